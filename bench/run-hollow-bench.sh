#!/bin/sh
# run-hollow-bench.sh — issue 4's scale figures with hollow kubelets:
#   time for N hollow kubelets to bootstrap (token -> CSR -> approved -> signed)
#   and be Ready; CSRs issued per second meanwhile; memory per hollow node
#   (the kubelet processes' VmRSS / N); API server, controller manager and kubelet CPU
#   while the N nodes heartbeat at the default frequencies (Lease renewed every
#   10 s, status checked every 10 s and PATCHed every 5 min).
#
#   bench/run-hollow-bench.sh               # 100, 500, 1000 nodes + `cube up`: ~8 minutes
#   QUICK=1 bench/run-hollow-bench.sh       # 100 nodes, short windows: ~1 minute
#
# Each size runs API server, controller manager and hollow kubelets as three
# processes (so /proc tells their CPU and RSS apart) on a fresh `cube pki init`
# directory — the kubelets as several processes of up to PER_PROCESS nodes
# each above that, as `cube up` splits them: one process of 10,000 nodes
# needs more descriptors than a 20,000 hard limit allows, and so would the
# API server if every node bootstrapped at once (a node has two connections
# until its certificate comes), so each process starts once the nodes before
# it have their client certificates. Their CPU and RSS are added up. Then `cube up --nodes UP_NODES` runs everything in one process.
# bench/hollow_probe.py measures: one admin watch on Nodes and one on CSRs,
# timestamped on receipt, from t0 = just before the kubelet process starts.
#
# Knobs (environment): BUILD (build dir, default /tmp/build-hollow-bench),
# SIZES ("100 500 1000"), UP_NODES (1000; 0 skips `cube up`), WINDOW (s of CPU
# sampling after all are Ready, 60), PER_PROCESS (hollow nodes per kubelet
# process, 2500), SETTLE (s between all Ready and the window,
# 10), TIMEOUT (s to wait for Ready, 600), QUIET_WAIT (s to wait for an idle
# machine, 120), API_FLAGS (more `cube apiserver` flags, e.g. "--serving-threads
# 2"), KEEP=1 keeps the work directory.
#
# All processes share the machine's cores with the probe and anything else
# running; each CPU line says how busy the whole machine was.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-/tmp/build-hollow-bench}
SIZES=${SIZES:-100 500 1000}
UP_NODES=${UP_NODES:-1000}
WINDOW=${WINDOW:-60}
SETTLE=${SETTLE:-10}
TIMEOUT=${TIMEOUT:-600}
PER_PROCESS=${PER_PROCESS:-2500}
PY=/usr/bin/python3
PROBE=$ROOT/bench/hollow_probe.py
if [ "${QUICK:-0}" = 1 ]; then
	SIZES=100 UP_NODES=100 WINDOW=15 SETTLE=5
fi

WORK=$(mktemp -d /tmp/cube-hollow-bench.XXXXXX)
LOG=$WORK/bench.log
API_PID= CM_PID= KUBELET_PID= UP_PID= PROBE_PID=
# KUBELET_PID: every kubelet process of the size running (space-separated).

STOP_WAIT=100
. "$ROOT/bench/lib.sh" # stop, start_apiserver

stop_all() {
	# shellcheck disable=SC2086 # the kubelet processes, one word each
	stop "$PROBE_PID" $KUBELET_PID "$UP_PID"
	stop "$CM_PID"
	stop "$API_PID"
	API_PID= CM_PID= KUBELET_PID= UP_PID= PROBE_PID=
}

cleanup() {
	trap - EXIT INT TERM
	stop_all
	[ -f "$LOG" ] && cp "$LOG" "$BUILD/hollow-bench.log" 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$@" | tee -a "$LOG"; }

echo "building in $BUILD ..."
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target cube >/dev/null
CUBE=$BUILD/cube

# Each hollow kubelet holds its own TLS connections (node client, pod watch).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

busy_cores() {
	a=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
	sleep 1
	b=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
	echo "$a $b" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($2-$1)/hz}'
}

# Wait (up to QUIET_WAIT s) for less than 0.25 busy cores; say what was seen.
wait_quiet() {
	waited=0
	while :; do
		busy=$(busy_cores)
		if awk -v b="$busy" 'BEGIN{exit !(b < 0.25)}' || [ "$waited" -ge "${QUIET_WAIT:-120}" ]; then
			break
		fi
		waited=$((waited + 1))
	done
	say "# machine busy before the run: $busy cores (waited ${waited}s for quiet)"
}

rss_mib() { awk '/^VmRSS:/{printf "%.1f", $2/1024}' "/proc/$1/status"; }
# The kubelet processes' VmRSS added up, MiB.
kubelets_rss_mib() {
	# shellcheck disable=SC2086
	for p in $KUBELET_PID; do cat "/proc/$p/status"; done | awk '/^VmRSS:/{s += $2} END {printf "%.1f", s/1024}'
}

# E (and F) lines in a klog file, and the most frequent messages.
log_errors() { # NAME FILE
	e=$(grep -c '^[EF][0-9]' "$2" || true)
	w=$(grep -c '^W[0-9]' "$2" || true)
	say "RESULT log $1: $(wc -l <"$2") lines, $e E/F, $w W"
	if [ "$e" -gt 0 ]; then
		grep '^[EF][0-9]' "$2" | sed 's/^[EF][0-9 :.]*[0-9]* [^]]*\] //; s/node="[^"]*"/node=…/g' |
			sort | uniq -c | sort -rn | head -5 | sed 's/^/#   /' | tee -a "$LOG"
	fi
}

wait_port() { # FILE LOGFILE
	i=0
	until [ -s "$1" ]; do
		i=$((i + 1))
		[ $i -lt 200 ] || { cat "$2"; echo "server did not start" >&2; exit 1; }
		sleep 0.05
	done
}

# One size, three processes.
run_split() {
	n=$1
	dir=$WORK/split-$n
	"$CUBE" pki init --dir "$dir" >/dev/null
	"$CUBE" apiserver --cluster-dir "$dir" --data-dir "$dir/data" --bind-address 127.0.0.1 \
		--secure-port 0 --port-file "$dir/port" ${API_FLAGS:-} 2>"$dir/apiserver.log" &
	API_PID=$!
	wait_port "$dir/port" "$dir/apiserver.log"
	port=$(cat "$dir/port")
	server=https://127.0.0.1:$port
	for f in admin.conf controller-manager.conf bootstrap-kubelet.conf scheduler.conf; do
		sed -i "s#^\( *server: \).*#\1$server#" "$dir/$f"
	done
	until curl -sf --cacert "$dir/pki/ca.crt" "$server/healthz" >/dev/null; do sleep 0.1; done
	"$CUBE" controller-manager --kubeconfig "$dir/controller-manager.conf" --use-service-account-credentials \
		--cluster-signing-cert-file "$dir/pki/ca.crt" \
		--cluster-signing-key-file "$dir/pki/ca.key" --secure-port 0 2>"$dir/controller-manager.log" &
	CM_PID=$!
	sleep 2
	wait_quiet
	say ""
	say "== $n hollow kubelets, three processes (apiserver pid $API_PID, port $port; controller-manager pid $CM_PID)"
	say "RESULT idle_rss apiserver=$(rss_mib $API_PID)MiB controller-manager=$(rss_mib $CM_PID)MiB"
	procs=$(((n + PER_PROCESS - 1) / PER_PROCESS))
	cmd="$CUBE kubelet --root-dir $dir/nodes --bootstrap-kubeconfig $dir/bootstrap-kubelet.conf --rotate-certificates --port 0"
	kpids='' i=0
	while [ $i -lt $procs ]; do
		first=$((i * PER_PROCESS)) count=$PER_PROCESS
		[ $((first + count)) -le "$n" ] || count=$((n - first))
		say "\$ $cmd --hollow-nodes $count --hollow-first-index $first"
		kpids="$kpids,kubelet-$i=@$dir/kubelet-$i.pid"
		i=$((i + 1))
	done
	[ "$procs" -gt 1 ] || kpids=",kubelet=@$dir/kubelet-0.pid"
	rm -f "$dir/t0" "$dir/probe-ready"
	"$PY" "$PROBE" ready --server "$server" --dir "$dir" --nodes "$n" --t0-file "$dir/t0" \
		--ready-file "$dir/probe-ready" --timeout "$TIMEOUT" -v \
		--pids "apiserver=$API_PID,controller-manager=$CM_PID$kpids" \
		>"$dir/probe.out" 2>&1 &
	PROBE_PID=$!
	until [ -e "$dir/probe-ready" ]; do
		kill -0 "$PROBE_PID" 2>/dev/null || { cat "$dir/probe.out"; exit 1; }
		sleep 0.05
	done
	date +%s.%N >"$dir/t0.tmp" && mv "$dir/t0.tmp" "$dir/t0"
	KUBELET_PID='' i=0
	while [ $i -lt $procs ]; do
		first=$((i * PER_PROCESS)) count=$PER_PROCESS
		[ $((first + count)) -le "$n" ] || count=$((n - first))
		if [ $i -gt 0 ]; then
			# One bootstrap storm at a time (the descriptor budget).
			w=0
			until [ "$(find "$dir/nodes" -name kubelet-client-current.pem | wc -l)" -ge "$first" ]; do
				w=$((w + 1))
				[ $w -lt $((TIMEOUT * 2)) ] || break
				sleep 0.5
			done
			say "# kubelet process $i started $(awk -v t0="$(cat "$dir/t0")" -v now="$(date +%s.%N)" 'BEGIN{printf "%.1f", now-t0}') s after t0, once $first nodes had their certificates"
		fi
		$cmd --hollow-nodes "$count" --hollow-first-index "$first" 2>"$dir/kubelet-$i.log" &
		echo $! >"$dir/kubelet-$i.pid"
		KUBELET_PID="$KUBELET_PID $!"
		i=$((i + 1))
	done
	KUBELET_PID=${KUBELET_PID# }
	rc=0
	wait "$PROBE_PID" || rc=$?
	PROBE_PID=
	tee -a "$LOG" <"$dir/probe.out" | grep -v '^# t=' || true
	kr=$(kubelets_rss_mib)
	say "RESULT rss_when_ready kubelet=${kr}MiB ($(echo "$kr $n" | awk '{printf "%.1f", $1*1024/$2}') KiB per hollow node) apiserver=$(rss_mib $API_PID)MiB controller-manager=$(rss_mib $CM_PID)MiB"
	[ "$rc" = 0 ] || say "# NOT ALL READY within ${TIMEOUT}s"
	sleep "$SETTLE"
	say "# CPU over ${WINDOW}s, starting ${SETTLE}s after all were Ready:"
	"$PY" "$PROBE" cpu --pids "apiserver=$API_PID,controller-manager=$CM_PID,kubelet=$(echo "$KUBELET_PID" | tr ' ' '+')" \
		--seconds "$WINDOW" --server "$server" --dir "$dir" 2>&1 | tee -a "$LOG"
	kr=$(kubelets_rss_mib)
	say "RESULT rss_after_window kubelet=${kr}MiB ($(echo "$kr $n" | awk '{printf "%.1f", $1*1024/$2}') KiB per hollow node) apiserver=$(rss_mib $API_PID)MiB"
	# shellcheck disable=SC2086
	say "RESULT fds kubelet=$(for p in $KUBELET_PID; do ls /proc/$p/fd; done | wc -l) apiserver=$(ls /proc/$API_PID/fd | wc -l)"
	stop_all
	for c in apiserver controller-manager; do log_errors "$c" "$dir/$c.log"; done
	i=0
	while [ $i -lt $procs ]; do
		log_errors "kubelet-$i" "$dir/kubelet-$i.log"
		i=$((i + 1))
	done
	say "# reproduce: cube pki init --dir C; cube apiserver --cluster-dir C --data-dir C/data --bind-address 127.0.0.1 --secure-port 0 --port-file C/port &"
	say "#   (point C/*.conf at the port); cube controller-manager --kubeconfig C/controller-manager.conf --use-service-account-credentials --cluster-signing-cert-file C/pki/ca.crt --cluster-signing-key-file C/pki/ca.key &"
	say "#   cube kubelet --hollow-nodes $PER_PROCESS --hollow-first-index 0 --root-dir C/nodes --bootstrap-kubeconfig C/bootstrap-kubelet.conf --rotate-certificates --port 0 & (one per $PER_PROCESS of the $n nodes: --hollow-first-index $PER_PROCESS, ...)"
	say "#   $PY bench/hollow_probe.py ready --server https://127.0.0.1:PORT --dir C --nodes $n --t0-file T0"
}

# Everything in one process: cube up.
run_up() {
	n=$1
	dir=$WORK/up-$n
	wait_quiet
	say ""
	cmd="$CUBE up --nodes $n --port 0 --data-dir $dir"
	say "== $n hollow kubelets, one process: \$ $cmd"
	mkdir -p "$dir"
	rm -f "$dir/t0"
	date +%s.%N >"$dir/t0"
	$cmd >"$dir/up.out" 2>"$dir/up.log" &
	UP_PID=$!
	echo "$UP_PID" >"$dir/up.pid"
	i=0
	until grep -q 'API server on' "$dir/up.out"; do
		i=$((i + 1))
		kill -0 "$UP_PID" 2>/dev/null && [ $i -lt 1200 ] || { cat "$dir/up.out" "$dir/up.log"; exit 1; }
		sleep 0.05
	done
	server=$(sed -n 's/.*API server on \(https:[^ ]*\).*/\1/p' "$dir/up.out")
	say "# API server at $server after $(awk -v t0="$(cat "$dir/t0")" -v now="$(date +%s.%N)" 'BEGIN{printf "%.2f", now-t0}')s (PKI, server, controller manager, $n kubelets started)"
	"$PY" "$PROBE" ready --server "$server" --dir "$dir" --nodes "$n" --t0-file "$dir/t0" \
		--timeout "$TIMEOUT" --pids "cube-up=@$dir/up.pid" >"$dir/probe.out" 2>&1 || true
	tee -a "$LOG" <"$dir/probe.out" >/dev/null
	grep -E '^RESULT (nodes|csrs|cpu|tcp)|^# issued' "$dir/probe.out" || true
	say "# (objects made before the probe's watches started carry the watch start as their time)"
	i=0
	until grep -q "$n/$n nodes Ready" "$dir/up.out" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
	say "RESULT cube_up_progress $(grep -o "$n/$n nodes Ready ([0-9.]*s)" "$dir/up.out" | tail -1) (its own clock starts once the kubelets have started)"
	say "RESULT rss_when_ready cube_up=$(rss_mib $UP_PID)MiB ($(echo "$(rss_mib $UP_PID) $n" | awk '{printf "%.1f", $1*1024/$2}') KiB per node, control plane included)"
	sleep "$SETTLE"
	say "# CPU over ${WINDOW}s, starting ${SETTLE}s after all were Ready (per-thread cores, busiest first; the threads are unnamed):"
	"$PY" "$PROBE" cpu --pids "cube-up=$UP_PID" --seconds "$WINDOW" --server "$server" \
		--dir "$dir" 2>&1 | tee -a "$LOG"
	stop_all
	log_errors "cube-up" "$dir/up.log"
}

say "# hollow-kubelet benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores shared by every process, $(uname -r)"
say "# load average before: $(cut -d' ' -f1-3 /proc/loadavg); ulimit -n $(ulimit -n)"
for n in $SIZES; do
	run_split "$n"
done
[ "$UP_NODES" -gt 0 ] && run_up "$UP_NODES"

echo
echo "== summary (full log: $BUILD/hollow-bench.log) =="
grep -E '^(RESULT|==|# NOT|# issued per|# cores per)' "$LOG" | sed 's/^RESULT /  /'
echo
echo "reproduce: BUILD=$BUILD SIZES=\"$SIZES\" UP_NODES=$UP_NODES WINDOW=$WINDOW SETTLE=$SETTLE PER_PROCESS=$PER_PROCESS $0"
