#!/bin/sh
# run-scenario-upstream.sh — the seeds' scenario 1 and recovery plan 1 on
# upstream 1.32's timings (50 s grace, 5 s monitor period, 40 s Leases
# renewed every 10 s, 300 s tolerations), too long for `make test` (about 7
# minutes, nearly all of it waiting): every measured timing beside the one
# the timers predict, and the report.
#
#   bench/run-scenario-upstream.sh [build/cube]
#
# Knobs (environment): OUT (work directory, default /tmp/cube-scenario-upstream).
set -eu
CUBE=${1:-build/cube}
OUT=${OUT:-/tmp/cube-scenario-upstream}
mkdir -p "$OUT"
start=$(date +%s)
rc=0
"$CUBE" scenario run plan-1 --timings upstream --quiet --data-dir "$OUT/cluster" \
	--report "$OUT/report.html" >"$OUT/out.log" 2>&1 || rc=$?
end=$(date +%s)
sed -n '/^plan-1: /,$p' "$OUT/out.log"
echo "wall time: $((end - start)) s; exit $rc; full output: $OUT/out.log"
echo "reproduce: bench/run-scenario-upstream.sh $CUBE"
exit $rc
