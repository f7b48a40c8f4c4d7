#!/bin/sh
# run-scheduler-bench.sh — issue 8's scheduler throughput: P pending pods
# onto N Ready nodes, end to end through the API server (watch, filter,
# score, bind via pods/binding, the Scheduled event).
#
#   bench/run-scheduler-bench.sh                  # 10,000 pods onto 5,000 nodes
#   NODES=500 PODS=2000 bench/run-scheduler-bench.sh
#
# `cube apiserver` runs on a fresh `cube pki init` directory; the nodes and
# pods are created first (bench/scheduler_bench.py load), then `cube
# scheduler` starts and the clock runs from its start to the last pod seen
# bound by an admin watch. The scheduler's RSS and CPU time come from /proc
# at the end. Knobs: BUILD (default build), NODES, PODS, KEEP=1.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
NODES=${NODES:-5000}
PODS=${PODS:-10000}
CUBE=$BUILD/cube
PY=/usr/bin/python3
dir=$(mktemp -d /tmp/cube-sched-bench-XXXXXX)
cleanup() {
	[ -n "${SCHED_PID:-}" ] && kill "$SCHED_PID" 2>/dev/null || true
	[ -n "${API_PID:-}" ] && kill "$API_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	[ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$CUBE" pki init --dir "$dir" >/dev/null
"$CUBE" apiserver --cluster-dir "$dir" --data-dir "$dir/data" --bind-address 127.0.0.1 \
	--secure-port 0 --port-file "$dir/port" 2>"$dir/apiserver.log" &
API_PID=$!
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
server=https://127.0.0.1:$port
sed -i "s#server: .*#server: $server#" "$dir/scheduler.conf"
echo "== $PODS pods onto $NODES nodes (apiserver pid $API_PID, port $port)"
"$PY" "$ROOT/bench/scheduler_bench.py" load --server "$server" --dir "$dir" --nodes "$NODES" --pods "$PODS"
"$PY" "$ROOT/bench/scheduler_bench.py" watch --server "$server" --dir "$dir" --pods "$PODS" \
	--t0-file "$dir/t0" &
WATCH_PID=$!
sleep 1
date +%s.%N > "$dir/t0"
"$CUBE" scheduler --kubeconfig "$dir/scheduler.conf" -v "${SCHED_V:-0}" 2>"$dir/scheduler.log" &
SCHED_PID=$!
wait "$WATCH_PID"
ticks=$(awk '{print $14 + $15}' "/proc/$SCHED_PID/stat")
rss=$(awk '/VmRSS/ {print $2}' "/proc/$SCHED_PID/status")
hz=$(getconf CLK_TCK)
echo "RESULT scheduler_cpu_seconds=$(echo "$ticks $hz" | awk '{printf "%.1f", $1/$2}') scheduler_rss=$((rss / 1024))MiB"
api_ticks=$(awk '{print $14 + $15}' "/proc/$API_PID/stat")
echo "RESULT apiserver_cpu_seconds_total=$(echo "$api_ticks $hz" | awk '{printf "%.1f", $1/$2}')"
grep -c "Unhandled\|E[0-9]" "$dir/scheduler.log" | sed 's/^/RESULT scheduler_error_lines=/'
echo "# reproduce: NODES=$NODES PODS=$PODS bench/run-scheduler-bench.sh"
