#!/bin/sh
# run-detection-bench.sh — issue 8's node failure detection accuracy: FAIL
# hollow nodes whose Leases stop at a known time (their kubelet process is
# SIGKILLed), HEALTHY more in the same zone that keep running. Per failed
# node: (Ready -> Unknown) - expected, (unreachable:NoSchedule) - expected and
# (unreachable:NoExecute) - expected, where expected = the last renewal the
# probe observed + --node-monitor-grace-period; upstream's own granularity
# is one --node-monitor-period.
#
#   bench/run-detection-bench.sh          # 1,000 failing + 1,000 healthy, 5 s / 50 s: ~4 min
#   QUICK=1 bench/run-detection-bench.sh  # 100 + 100, grace 20 s: ~1.5 min
#
# Processes (as bench/run-hollow-bench.sh): `cube apiserver`, `cube
# controller-manager` (-v 2 for its taint-queue lines), and two `cube kubelet
# --hollow-nodes` processes — ok-* (HEALTHY) and fail-* (FAIL) — both labelled
# topology.kubernetes.io/zone=$ZONE. bench/detection_bench.py (stdlib Python)
# holds one admin watch on Leases and one on Nodes, timestamps on receipt,
# SIGKILLs the fail-* process once all are Ready and each fail-* Lease has
# been seen renewing, and prints the distributions.
#
# The zone: FAIL / (FAIL + HEALTHY) below --unhealthy-zone-threshold (0.55)
# keeps it Normal, so the NoExecute taints drain at --node-eviction-rate.
# Upstream's default 0.1 nodes/s would spread 1,000 taints over 10,000 s by
# design, so EVICTION_RATE defaults to 1000 for the taint-timing measurement
# (reported as such); EVICTION_RATE=0.1 FAIL=20 HEALTHY=30 measures the
# default rate's spacing instead. With all nodes of a zone down the zone is
# FullDisruption and, all zones being so, no NoExecute taint is ever added
# (master disruption mode) — hence the healthy nodes.
#
# Knobs (environment): CUBE_BIN (default /tmp/bench-cube: a copy, so a
# rebuild elsewhere does not change it mid-run), FAIL (1000), HEALTHY (1000),
# PERIOD (5s, --node-monitor-period), GRACE (50s, --node-monitor-grace-period),
# EVICTION_RATE (1000), SECONDARY_RATE (0.01), THRESHOLD (0.55), ZONE (zone-a),
# SIGNAL (KILL or STOP), SETTLE (s after all Ready before the kill, 15),
# TIMEOUT (s after the kill, 0 = derived), KEEP=1 keeps the work directory.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CUBE_BIN:-/tmp/bench-cube}
FAIL=${FAIL:-1000}
HEALTHY=${HEALTHY:-1000}
PERIOD=${PERIOD:-5s}
GRACE=${GRACE:-50s}
if [ "${QUICK:-0}" = 1 ]; then
	FAIL=${QUICK_FAIL:-100} HEALTHY=${QUICK_HEALTHY:-100} GRACE=${QUICK_GRACE:-20s}
fi
EVICTION_RATE=${EVICTION_RATE:-1000}
SECONDARY_RATE=${SECONDARY_RATE:-0.01}
THRESHOLD=${THRESHOLD:-0.55}
ZONE=${ZONE:-zone-a}
SIGNAL=${SIGNAL:-KILL}
SETTLE=${SETTLE:-15}
TIMEOUT=${TIMEOUT:-0}
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "no cube binary at $BIN (cp build/cube /tmp/bench-cube, or set CUBE_BIN)" >&2; exit 1; }

secs() { echo "$1" | awk '/ms$/{sub("ms","");print $0/1000;next} /m$/{sub("m","");print $0*60;next} {sub("s","");print $0+0}'; }
PERIOD_S=$(secs "$PERIOD")
GRACE_S=$(secs "$GRACE")

WORK=$(mktemp -d /tmp/cube-detect-bench.XXXXXX)
API_PID= CM_PID= OK_PID= FAIL_PID= PROBE_PID= TAIL_PID=

. "$ROOT/bench/lib.sh" # stop, start_apiserver
cleanup() {
	trap - EXIT INT TERM
	stop "$PROBE_PID" "$TAIL_PID" "$OK_PID" "$FAIL_PID"
	stop "$CM_PID"
	stop "$API_PID"
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 2,000 hollow kubelets hold several TLS connections each, all to one server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

dir=$WORK
start_apiserver "$BIN" "$dir"

CM_FLAGS="--node-monitor-period $PERIOD --node-monitor-grace-period $GRACE --node-eviction-rate $EVICTION_RATE --secondary-node-eviction-rate $SECONDARY_RATE --unhealthy-zone-threshold $THRESHOLD"
# --secure-port 0: no metrics port, so nothing to collide with on this machine.
"$BIN" controller-manager --kubeconfig "$dir/controller-manager.conf" --use-service-account-credentials \
	--cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key" \
	--secure-port 0 -v 2 $CM_FLAGS 2>"$dir/controller-manager.log" &
CM_PID=$!

echo "# node failure detection, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores shared by every process; load $(cut -d' ' -f1-3 /proc/loadavg); ulimit -n $(ulimit -n)"
echo "# apiserver pid $API_PID on $server; controller-manager pid $CM_PID: $CM_FLAGS"
"$PY" "$ROOT/bench/detection_bench.py" --server "$server" --dir "$dir" --fail-prefix fail- \
	--fail "$FAIL" --healthy "$HEALTHY" --kill-pid-file "$dir/fail.pid" --signal "$SIGNAL" \
	--grace "$GRACE_S" --period "$PERIOD_S" --eviction-rate "$EVICTION_RATE" \
	--settle "$SETTLE" --timeout "$TIMEOUT" --cm-log "$dir/controller-manager.log" \
	--ready-file "$dir/probe-ready" >"$dir/probe.out" 2>&1 &
PROBE_PID=$!
until [ -e "$dir/probe-ready" ]; do
	kill -0 "$PROBE_PID" 2>/dev/null || { cat "$dir/probe.out"; exit 1; }
	sleep 0.05
done
KFLAGS="--bootstrap-kubeconfig $dir/bootstrap-kubelet.conf --rotate-certificates --port 0 --node-labels topology.kubernetes.io/zone=$ZONE"
"$BIN" kubelet --hollow-nodes "$HEALTHY" --hollow-name-prefix ok- --root-dir "$dir/ok" $KFLAGS \
	2>"$dir/kubelet-ok.log" &
OK_PID=$!
"$BIN" kubelet --hollow-nodes "$FAIL" --hollow-name-prefix fail- --root-dir "$dir/fail" $KFLAGS \
	2>"$dir/kubelet-fail.log" &
FAIL_PID=$!
echo "$FAIL_PID" >"$dir/fail.pid"
echo "# kubelets: ok-* pid $OK_PID ($HEALTHY nodes), fail-* pid $FAIL_PID ($FAIL nodes), zone $ZONE"
rc=0
tail -n +1 -f "$dir/probe.out" --pid "$PROBE_PID" &
TAIL_PID=$!
wait "$PROBE_PID" || rc=$?
PROBE_PID=
sleep 0.3
kill "$TAIL_PID" 2>/dev/null || true
wait "$TAIL_PID" 2>/dev/null || true

zs=$(grep -o 'zone is now in new state" zone="[^"]*" newState="[^"]*"' "$dir/controller-manager.log" |
	sed 's/.*zone="\([^"]*\)" newState="\([^"]*\)"/\1 -> \2;/; s/^:\\x00://' | tr '\n' ' ')
frac=$(awk -v f="$FAIL" -v h="$HEALTHY" 'BEGIN{printf "%.2f", f/(f+h)}')
echo "RESULT zone $ZONE: $FAIL of $((FAIL + HEALTHY)) nodes failed ($frac; --unhealthy-zone-threshold $THRESHOLD); zone states the controller logged, in order: ${zs:-none}$(grep -q 'Entering master disruption' "$dir/controller-manager.log" && echo ' + master disruption mode' || true)"
# (the kubelets' E lines are the expected 401s before each certificate is issued)
for c in apiserver controller-manager kubelet-ok; do
	e=$(grep -c '^[EF][0-9]' "$dir/$c.log" || true)
	echo "RESULT log $c: $(wc -l <"$dir/$c.log") lines, $e E/F"
	[ "$e" = 0 ] || grep '^[EF][0-9]' "$dir/$c.log" | sed 's/^[EF][0-9 :.]*[0-9]* [^]]*\] //; s/node="[^"]*"/node=…/g' |
		sort | uniq -c | sort -rn | head -3 | sed 's/^/#   /'
done
echo "# reproduce: CUBE_BIN=$BIN FAIL=$FAIL HEALTHY=$HEALTHY PERIOD=$PERIOD GRACE=$GRACE EVICTION_RATE=$EVICTION_RATE SECONDARY_RATE=$SECONDARY_RATE SIGNAL=$SIGNAL bench/run-detection-bench.sh"
exit "$rc"
