#!/bin/sh
# run-storm-bench.sh — issue 8's eviction and replacement storm: one zone of
# NODES hollow nodes running a REPLICAS-pod Deployment loses LOST of them (their
# hollow kubelet process is SIGKILLed). Measured: the time until every
# replacement pod runs, each phase on the way (Unknown, the NoExecute taint,
# the taint eviction, the ReplicaSet's creates, the scheduler's binds, the
# kubelets' starts) and the API server's request rate meanwhile
# (apiserver_request_total deltas, scraped with the admin certificate).
#
#   bench/run-storm-bench.sh          # 1,000 nodes, 100 lost, 3,000 pods; rates 1000 then 0.1: ~20 min
#   RATES=1000 bench/run-storm-bench.sh   # the replacement machinery alone: ~2 min
#   RATES=0.1 NODES=800 LOST=80 REPLICAS=2400 bench/run-storm-bench.sh  # upstream rate, <15 min
#   QUICK=1 bench/run-storm-bench.sh  # 100 nodes, 10 lost, 300 pods, rate 1000: ~1.5 min
#
# One run per --node-eviction-rate in RATES, each on a fresh `cube pki init`
# directory with five processes: `cube apiserver
# --default-{not-ready,unreachable}-toleration-seconds TOLERATION`, `cube
# controller-manager` (compressed timings: --node-monitor-period PERIOD,
# --node-monitor-grace-period GRACE), `cube scheduler`, and two `cube kubelet
# --hollow-nodes` processes in one zone (topology.kubernetes.io/zone=$ZONE):
# node-* (NODES - LOST) and lost-* (LOST). bench/storm_bench.py (stdlib
# Python) creates the Deployment, waits for it, kills lost-* and follows.
#
# 10 % of a zone unhealthy is below --unhealthy-zone-threshold 0.55, so the
# zone stays Normal and its NoExecute taints go out at --node-eviction-rate:
# upstream's 0.1 nodes/s makes 100 nodes take ~1,000 s by design (RATES'
# 0.1 run: the upstream-faithful figure); a raised rate (1000) measures the
# replacement machinery itself (cube drains a zone's taint queue once per
# 100 ms with a burst of 1, so at most 10 nodes/s whatever the rate).
#
# Knobs (environment): CUBE_BIN (default /tmp/bench-cube), NODES (1000),
# LOST (100), REPLICAS (3000), RATES ("1000 0.1"), PERIOD (5s), GRACE (20s),
# TOLERATION (10, seconds), ZONE (zone-a), BASELINE (10 s of request rate
# before the kill), TIMEOUT (s after the kill, 0 = derived), KEEP=1.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CUBE_BIN:-/tmp/bench-cube}
NODES=${NODES:-1000}
LOST=${LOST:-100}
REPLICAS=${REPLICAS:-3000}
RATES=${RATES:-1000 0.1}
if [ "${QUICK:-0}" = 1 ]; then
	NODES=100 LOST=10 REPLICAS=300 RATES=${QUICK_RATES:-1000}
fi
PERIOD=${PERIOD:-5s}
GRACE=${GRACE:-20s}
TOLERATION=${TOLERATION:-10}
ZONE=${ZONE:-zone-a}
BASELINE=${BASELINE:-10}
TIMEOUT=${TIMEOUT:-0}
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "no cube binary at $BIN (cp build/cube /tmp/bench-cube, or set CUBE_BIN)" >&2; exit 1; }

secs() { echo "$1" | awk '/ms$/{sub("ms","");print $0/1000;next} /m$/{sub("m","");print $0*60;next} {sub("s","");print $0+0}'; }
PERIOD_S=$(secs "$PERIOD")
GRACE_S=$(secs "$GRACE")

WORK=$(mktemp -d /tmp/cube-storm-bench.XXXXXX)
LOG=$WORK/storm.log
API_PID= CM_PID= SCHED_PID= STAY_PID= LOST_PID= PROBE_PID= TAIL_PID=

. "$ROOT/bench/lib.sh" # stop, start_apiserver
stop_all() {
	stop "$PROBE_PID" "$TAIL_PID" "$STAY_PID" "$LOST_PID" "$SCHED_PID"
	stop "$CM_PID"
	stop "$API_PID"
	API_PID= CM_PID= SCHED_PID= STAY_PID= LOST_PID= PROBE_PID= TAIL_PID=
}
cleanup() {
	trap - EXIT INT TERM
	stop_all
	[ -f "$LOG" ] && cp "$LOG" /tmp/storm-bench.log 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$@" | tee -a "$LOG"; }

# 1,000 hollow kubelets hold several TLS connections each, all to one server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

log_errors() { # NAME FILE
	e=$(grep -c '^[EF][0-9]' "$2" || true)
	say "RESULT log $1: $(wc -l <"$2") lines, $e E/F"
	[ "$e" = 0 ] || grep '^[EF][0-9]' "$2" | sed 's/^[EF][0-9 :.]*[0-9]* [^]]*\] //; s/node="[^"]*"/node=…/g; s/pod="[^"]*"/pod=…/g' |
		sort | uniq -c | sort -rn | head -3 | sed 's/^/#   /' | tee -a "$LOG"
}

run_one() { # RATE
	rate=$1
	dir=$WORK/rate-$rate
	mkdir -p "$dir"
	start_apiserver "$BIN" "$dir" --default-not-ready-toleration-seconds "$TOLERATION" \
		--default-unreachable-toleration-seconds "$TOLERATION"
	cm_flags="--node-monitor-period $PERIOD --node-monitor-grace-period $GRACE --node-eviction-rate $rate"
	"$BIN" controller-manager --kubeconfig "$dir/controller-manager.conf" --use-service-account-credentials \
		--cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key" \
		--secure-port 0 $cm_flags 2>"$dir/controller-manager.log" &
	CM_PID=$!
	"$BIN" scheduler --kubeconfig "$dir/scheduler.conf" --secure-port 0 2>"$dir/scheduler.log" &
	SCHED_PID=$!
	say ""
	say "== $NODES nodes in zone $ZONE, $LOST lost, $REPLICAS pods; --node-eviction-rate $rate"
	say "# $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores shared by every process; load $(cut -d' ' -f1-3 /proc/loadavg)"
	say "# apiserver pid $API_PID on $server (tolerationSeconds $TOLERATION), controller-manager pid $CM_PID ($cm_flags), scheduler pid $SCHED_PID"
	rm -f "$dir/probe-ready"
	"$PY" "$ROOT/bench/storm_bench.py" --server "$server" --dir "$dir" --nodes "$NODES" \
		--lost-prefix lost- --lost "$LOST" --replicas "$REPLICAS" --kill-pid-file "$dir/lost.pid" \
		--grace "$GRACE_S" --period "$PERIOD_S" --eviction-rate "$rate" --toleration "$TOLERATION" \
		--baseline "$BASELINE" --timeout "$TIMEOUT" --ready-file "$dir/probe-ready" \
		--pids "apiserver=$API_PID,controller-manager=$CM_PID,scheduler=$SCHED_PID" \
		>"$dir/probe.out" 2>&1 &
	PROBE_PID=$!
	until [ -e "$dir/probe-ready" ]; do
		kill -0 "$PROBE_PID" 2>/dev/null || { cat "$dir/probe.out"; exit 1; }
		sleep 0.05
	done
	kflags="--bootstrap-kubeconfig $dir/bootstrap-kubelet.conf --rotate-certificates --port 0 --node-labels topology.kubernetes.io/zone=$ZONE"
	"$BIN" kubelet --hollow-nodes "$((NODES - LOST))" --hollow-name-prefix node- \
		--root-dir "$dir/stay" $kflags 2>"$dir/kubelet-stay.log" &
	STAY_PID=$!
	"$BIN" kubelet --hollow-nodes "$LOST" --hollow-name-prefix lost- \
		--root-dir "$dir/lost" $kflags 2>"$dir/kubelet-lost.log" &
	LOST_PID=$!
	echo "$LOST_PID" >"$dir/lost.pid"
	say "# kubelets: node-* pid $STAY_PID ($((NODES - LOST)) nodes), lost-* pid $LOST_PID ($LOST nodes)"
	tail -n +1 -f "$dir/probe.out" --pid "$PROBE_PID" | tee -a "$LOG" &
	TAIL_PID=$!
	rc=0
	wait "$PROBE_PID" || rc=$?
	PROBE_PID=
	sleep 0.3
	kill "$TAIL_PID" 2>/dev/null || true
	wait "$TAIL_PID" 2>/dev/null || true
	TAIL_PID=
	zs=$(grep -o 'zone is now in new state" zone="[^"]*" newState="[^"]*"' "$dir/controller-manager.log" |
		sed 's/.*zone="\([^"]*\)" newState="\([^"]*\)"/\1 -> \2;/; s/^:\\x00://' | tr '\n' ' ')
	say "RESULT zone states the controller logged, in order: ${zs:-none}"
	[ "$rc" = 0 ] || say "# NOT every replacement ran (probe exit $rc)"
	stop_all
	for c in apiserver controller-manager scheduler; do log_errors "$c" "$dir/$c.log"; done
	say "# reproduce: CUBE_BIN=$BIN NODES=$NODES LOST=$LOST REPLICAS=$REPLICAS RATES=$rate PERIOD=$PERIOD GRACE=$GRACE TOLERATION=$TOLERATION bench/run-storm-bench.sh"
}

for r in $RATES; do
	run_one "$r"
done
echo
echo "== summary (log: /tmp/storm-bench.log) =="
grep -E '^(RESULT (storm|kill|dominated|apiserver requests kill|rollout|spread|zone)|==)' "$LOG" | sed 's/^RESULT /  /'
