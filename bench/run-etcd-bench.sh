#!/bin/sh
# run-etcd-bench.sh — cube's etcd backend (issue 12) against its anchors, in one run:
#
#   1. Lease PUTs (`apiserver_bench lease`) through `cube apiserver` on SQLite and
#      on a private one-member etcd (fresh etcd data for each run);
#   2. etcd's own rate through the JSON gateway cube uses (`etcd_put_bench`): plain
#      puts and the compare-and-swap txn cube sends, of a value the size of the
#      stored Lease, with the same concurrency (one keep-alive connection and key
#      per client, one request in flight each) — "raw etcd" — and once with the
#      POOL connections cube's backend may open per member (ETCD_CONNS in
#      etcd.c, 64);
#   3. a write through API server A seen by a watch on API server B, both on one
#      etcd (`apiserver_bench watch --write-port`), and the same through A alone;
#   4. a table of it all, the ratio cube-on-etcd / raw etcd, the CPU each process
#      used, and the line that reproduces it.
#
#   bench/run-etcd-bench.sh            # everything, 2.5-4 minutes
#   QUICK=1 bench/run-etcd-bench.sh    # smaller and shorter, about 1 minute
#
# Knobs (environment): BUILD (build dir, default /tmp/build-etcd-bench; its cube,
# bench/apiserver_bench and bench/etcd_put_bench are built there), ETCD (default
# etcd), DURATION (s per measurement, 10), CLIENTS ("64 256"), POOL (cube's etcd
# connections per member, 64), WATCHERS (100), RATE (pod creates/s through A, 100),
# WATCH_DURATION (s, 10), QUIET_WAIT (s to wait for an idle machine before each
# measurement, 60; QUICK: 10), KEEP=1 keeps the work directory, SKIP_BUILD=1 runs
# what $BUILD already holds (the tree may be mid-edit). QUICK=1 changes the
# defaults only: a knob set in the environment still wins (bench/run-all.sh
# passes CLIENTS="64 256 1024").
#
# Needs: the build deps, curl, ss (iproute2), base64 and etcd (Debian's etcd-server 3.4).
# etcd keeps its default durability: it fsyncs its WAL before it answers a write.
# Everything shares this machine's cores over loopback; other load shows up as
# "other processes" in each CPU line and skews the figures.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
BUILD=${BUILD:-/tmp/build-etcd-bench}
ETCD=${ETCD:-etcd}
if [ "${QUICK:-0}" = 1 ]; then
	DURATION=${DURATION:-3} CLIENTS=${CLIENTS:-64} WATCH_DURATION=${WATCH_DURATION:-5}
	QUIET_WAIT=${QUIET_WAIT:-10}
fi
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-64 256}
POOL=${POOL:-64}
WATCHERS=${WATCHERS:-100}
RATE=${RATE:-100}
WATCH_DURATION=${WATCH_DURATION:-10}
QUIET_WAIT=${QUIET_WAIT:-60}

WORK=$(mktemp -d /tmp/cube-etcd-bench.XXXXXX)
LOG=$WORK/bench.log
ROWS=$WORK/rows
ETCD_PID='' API_PID='' API_B_PID=''
RUNS=0

cleanup() {
	stop "$API_B_PID" "$API_PID" "$ETCD_PID"
	[ -f "$LOG" ] && cp "$LOG" "$BUILD/etcd-bench.log" 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$@" | tee -a "$LOG"; }

command -v "$ETCD" >/dev/null || { echo "no $ETCD: apt-get install etcd-server" >&2; exit 1; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	echo "building in $BUILD ..."
	cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$BUILD" -j "$(nproc)" --target cube apiserver_bench etcd_put_bench >/dev/null
fi
CUBE=$BUILD/cube
BENCH=$BUILD/bench/apiserver_bench
PUT=$BUILD/bench/etcd_put_bench
for b in "$CUBE" "$BENCH" "$PUT"; do
	[ -x "$b" ] || { echo "no $b (SKIP_BUILD=1 needs a build in $BUILD)" >&2; exit 1; }
done
# One connection per client, on the client's side and etcd's (or cube's).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# ---- the machine -----------------------------------------------------------------

# Busy cores over the last second, from /proc/stat (all processes).
busy_cores() {
	a=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat)
	sleep 1
	b=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat)
	echo "$a $b" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($3-$1)/hz}'
}

# Wait (up to QUIET_WAIT s) for less than 0.25 busy cores, and say what was seen:
# the machine is shared with other work.
wait_quiet() {
	waited=0
	while :; do
		busy=$(busy_cores)
		if awk -v b="$busy" 'BEGIN{exit !(b < 0.25)}' || [ "$waited" -ge "$QUIET_WAIT" ]; then
			break
		fi
		waited=$((waited + 1))
	done
	say "# machine busy before the run: $busy cores (waited ${waited}s for quiet)"
}

# ---- etcd --------------------------------------------------------------------------

# A loopback port nothing listens on now (etcd cannot be asked for port 0).
free_port() {
	p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000 ))
	while [ -n "$(ss -Htln "( sport = :$p )")" ] || [ "$p" = "${1:-}" ]; do p=$((p + 1)); done
	echo "$p"
}

# start_etcd NAME: a fresh one-member etcd in $WORK/etcd-NAME on free ports. Other
# etcds may run on this machine: the member that answers must be ours (its unique
# name), or the ports are picked again. Sets ETCD_PID, ETCD_URL, ETCD_DIR.
start_etcd() {
	stop_etcd
	ETCD_DIR=$WORK/etcd-$1
	etcd_name=cube-bench-$$-$1
	for try in 1 2 3 4 5; do
		rm -rf "$ETCD_DIR"
		mkdir -p "$ETCD_DIR"
		cport=$(free_port)
		pport=$(free_port "$cport")
		ETCD_URL=http://127.0.0.1:$cport
		"$ETCD" --name "$etcd_name" --data-dir "$ETCD_DIR/data" --logger zap --log-outputs stderr \
			--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
			--listen-peer-urls "http://127.0.0.1:$pport" \
			--initial-advertise-peer-urls "http://127.0.0.1:$pport" \
			--initial-cluster "$etcd_name=http://127.0.0.1:$pport" \
			--initial-cluster-token "$etcd_name" 2>"$ETCD_DIR/etcd.log" &
		ETCD_PID=$!
		i=0
		while kill -0 "$ETCD_PID" 2>/dev/null && [ $i -lt 100 ]; do
			if curl -sf -X POST -d '{}' "$ETCD_URL/v3/cluster/member/list" 2>/dev/null |
				grep -q "\"name\":\"$etcd_name\""; then
				say "# etcd pid $ETCD_PID, $ETCD_URL, $ETCD_DIR ($($ETCD --version | head -1))"
				return 0
			fi
			i=$((i + 1))
			sleep 0.1
		done
		stop "$ETCD_PID"
		ETCD_PID=
		say "# etcd on $ETCD_URL did not come up as ours (try $try): $(tail -1 "$ETCD_DIR/etcd.log")"
	done
	exit 1
}

stop_etcd() {
	[ -n "$ETCD_PID" ] || return 0
	stop "$ETCD_PID"
	ETCD_PID=''
	rm -rf "$ETCD_DIR/data"
	# etcd warns when an apply or a read is slow ("took too long").
	slow=$(grep -c 'took too long' "$ETCD_DIR/etcd.log" || true)
	if [ "$slow" -gt 0 ]; then
		say "# etcd logged $slow \"took too long\" warnings, the first:"
		grep 'took too long' "$ETCD_DIR/etcd.log" | head -2 | cut -c1-300 | sed 's/^/#   /' | tee -a "$LOG"
	fi
}

# The sum of an etcd metric over its label sets.
etcd_metric() {
	curl -sf "$ETCD_URL/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {printf "%.6f", s}'
}

etcd_mark() {
	m_fsync=$(etcd_metric etcd_disk_wal_fsync_duration_seconds_count)
	m_fsync_s=$(etcd_metric etcd_disk_wal_fsync_duration_seconds_sum)
	m_props=$(etcd_metric etcd_server_proposals_committed_total)
}

# What etcd did since etcd_mark (the whole command: setup and warm-up included).
etcd_report() {
	f=$(etcd_metric etcd_disk_wal_fsync_duration_seconds_count)
	fs=$(etcd_metric etcd_disk_wal_fsync_duration_seconds_sum)
	pr=$(etcd_metric etcd_server_proposals_committed_total)
	ETCD_PER_FSYNC=$(awk -v a="$m_props" -v b="$pr" -v c="$m_fsync" -v d="$f" \
		'BEGIN{printf "%.1f", (d > c ? (b - a) / (d - c) : 0)}')
	ETCD_FSYNC_MS=$(awk -v c="$m_fsync" -v d="$f" -v s="$m_fsync_s" -v t="$fs" \
		'BEGIN{printf "%.2f", (d > c ? (t - s) * 1000 / (d - c) : 0)}')
	say "# etcd during the command: $(awk -v a="$m_props" -v b="$pr" 'BEGIN{print b - a}') proposals committed, $(awk -v c="$m_fsync" -v d="$f" 'BEGIN{print d - c}') WAL fsyncs ($ETCD_PER_FSYNC writes per fsync, mean fsync $ETCD_FSYNC_MS ms)"
}

# ---- cube --------------------------------------------------------------------------

# The W/E lines a server logged (the etcd backend's complaints land there).
log_check() {
	lines=$(grep -c '^[WEF][0-9]' "$1" || true)
	if [ "$lines" -gt 0 ]; then
		say "# $1: $lines warning/error lines, the first:"
		grep '^[WEF][0-9]' "$1" | head -5 | sed 's/^/#   /' | tee -a "$LOG"
		LOG_LINES=$((LOG_LINES + lines))
	fi
}
LOG_LINES=0

stop_cube() {
	stop "$API_B_PID" "$API_PID"
	[ -n "$API_PID" ] && log_check "$CLUSTER/apiserver.log"
	[ -n "$API_B_PID" ] && log_check "$CLUSTER/apiserver-b.log"
	API_PID='' API_B_PID=''
}

# ---- runs --------------------------------------------------------------------------

# The value of KEY=... in the RESULT line of file F.
result() { sed -n "s/^RESULT .*[ ]$2=\([^ ]*\).*/\1/p" "$1" | tail -1; }
# The cores of WHO ("client", "server", "etcd", ...) in F's "CPU while measuring" or "CPU writing" line.
cores() { grep -E '^  CPU (while measuring|writing):' "$1" | tail -1 | sed -n "s/.*[:,] $2 \([0-9.]*\) cores.*/\1/p"; }

# run NAME CMD...: measure after a quiet wait; the output goes to the log and $WORK/NAME.out.
run() {
	out=$WORK/$1.out
	shift
	wait_quiet
	say "\$ $(echo "$*" | sed "s#$BUILD/bench/##; s#$WORK#\$WORK#g")"
	"$@" 2>&1 | tee "$out" >>"$LOG"
	grep -E '^(  [0-9]|  CPU|  [a-z].*latency|RESULT)' "$out" || true
	RUNS=$((RUNS + 1))
}

# row TARGET CLIENTS F [cube-cores] [etcd-cores] [writes/fsync]: one line of the table.
row() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "$(result "$3" writes_per_s)" \
		"$(result "$3" p50_ms)" "$(result "$3" p99_ms)" "${4:--}" "${5:--}" "${6:--}" >>"$ROWS"
}

lease_sqlite() {
	CLUSTER=$WORK/sqlite-$1
	start_apiserver "$CUBE" "$CLUSTER"
	say "# cube apiserver pid $API_PID on SQLite ($CLUSTER/data), port $port"
	run "sqlite-$1" "$BENCH" lease --cluster-dir "$CLUSTER" --port "$port" --pid "$API_PID" \
		--clients "$1" --duration "$DURATION"
	stop_cube
	f=$WORK/sqlite-$1.out
	row "cube on SQLite" "$1" "$f" "$(cores "$f" server)"
}

lease_etcd() {
	start_etcd "lease-$1"
	CLUSTER=$WORK/etcd-$1
	start_apiserver "$CUBE" "$CLUSTER" --etcd-servers "$ETCD_URL"
	say "# cube apiserver pid $API_PID on etcd $ETCD_URL, port $port"
	etcd_mark
	run "etcd-$1" "$BENCH" lease --cluster-dir "$CLUSTER" --port "$port" --pid "$API_PID" \
		--also-pid "etcd=$ETCD_PID" --clients "$1" --duration "$DURATION"
	etcd_report
	# The stored Lease: raw etcd writes values of its size.
	key=$(printf %s /registry/coordination.k8s.io/leases/kube-node-lease/node-1 | base64 -w0)
	VALUE_SIZE=$(curl -sf -X POST -d "{\"key\":\"$key\"}" "$ETCD_URL/v3/kv/range" |
		sed -n 's/.*"value":"\([^"]*\)".*/\1/p' | base64 -d | wc -c)
	stop_cube
	f=$WORK/etcd-$1.out
	row "cube on etcd" "$1" "$f" "$(cores "$f" server)" "$(cores "$f" etcd)" "$ETCD_PER_FSYNC"
}

# raw NAME CLIENTS LABEL [--txn]: etcd_put_bench on a fresh etcd.
raw() {
	raw_name=$1 raw_n=$2 raw_label=$3
	shift 3
	start_etcd "$raw_name"
	etcd_mark
	run "$raw_name" "$PUT" --endpoint "$ETCD_URL" --pid "$ETCD_PID" --clients "$raw_n" \
		--duration "$DURATION" --value-size "${VALUE_SIZE:-0}" "$@"
	etcd_report
	stop_etcd
	row "$raw_label" "$raw_n" "$WORK/$raw_name.out" - "$(cores "$WORK/$raw_name.out" etcd)" "$ETCD_PER_FSYNC"
}

# Two API servers on one etcd and one cluster dir: pods created through A (--write-port),
# watched on B by W node identities; then the same with A alone as the reference.
watch_ab() {
	start_etcd watch
	CLUSTER=$WORK/ab
	start_apiserver "$CUBE" "$CLUSTER" --etcd-servers "$ETCD_URL"
	port_a=$port
	"$CUBE" apiserver --cluster-dir "$CLUSTER" --bind-address 127.0.0.1 --secure-port 0 \
		--port-file "$CLUSTER/port-b" --etcd-servers "$ETCD_URL" 2>"$CLUSTER/apiserver-b.log" &
	API_B_PID=$!
	i=0
	until [ -s "$CLUSTER/port-b" ] && curl -sf --cacert "$CLUSTER/pki/ca.crt" \
		"https://127.0.0.1:$(cat "$CLUSTER/port-b")/healthz" >/dev/null; do
		i=$((i + 1))
		[ $i -lt 200 ] || { cat "$CLUSTER/apiserver-b.log"; exit 1; }
		sleep 0.05
	done
	port_b=$(cat "$CLUSTER/port-b")
	say "# API server A pid $API_PID port $port_a, B pid $API_B_PID port $port_b, one etcd $ETCD_URL"
	etcd_mark
	run watch-ab "$BENCH" watch --cluster-dir "$CLUSTER" --port "$port_b" --write-port "$port_a" \
		--pid "$API_B_PID" --also-pid "apiserver-A=$API_PID" --also-pid "etcd=$ETCD_PID" \
		--watchers "$WATCHERS" --rate "$RATE" --duration "$WATCH_DURATION"
	etcd_report
	run watch-aa "$BENCH" watch --cluster-dir "$CLUSTER" --port "$port_a" --pid "$API_PID" \
		--also-pid "apiserver-B=$API_B_PID" --also-pid "etcd=$ETCD_PID" \
		--watchers "$WATCHERS" --rate "$RATE" --duration "$WATCH_DURATION"
	stop_cube
	stop_etcd
}

# ---- the run -----------------------------------------------------------------------

T0=$(date +%s)
say "# etcd backend benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -r)"
say "# load average before: $(cut -d' ' -f1-3 /proc/loadavg); git $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
: >"$ROWS"
for c in $CLIENTS; do
	lease_sqlite "$c"
	lease_etcd "$c"
	raw "put-$c" "$c" "raw etcd put"
	raw "txn-$c" "$c" "raw etcd txn (CAS, as cube)" --txn
done
raw "txn-pool" "$POOL" "raw etcd txn, cube pool" --txn
watch_ab

echo
echo "== summary (full log: $BUILD/etcd-bench.log) =="
{
	echo "Lease PUTs, durable writes/s (etcd: a $VALUE_SIZE-byte value, cube's stored Lease); CPU in cores while measuring"
	printf '%-8s %-28s %9s %8s %8s %9s %9s %12s\n' clients target writes/s p50_ms p99_ms cube_cpu etcd_cpu writes/fsync
	awk -F'\t' '{printf "%-8s %-28s %9s %8s %8s %9s %9s %12s\n", $1, $2, $3, $4, $5, $6, $7, $8}' "$ROWS"
	for c in $CLIENTS; do
		awk -F'\t' -v c="$c" '$1 == c {r[$2] = $3} $2 == "raw etcd txn, cube pool" {q = $3} END {
			e = r["cube on etcd"]; p = r["raw etcd put"]; t = r["raw etcd txn (CAS, as cube)"]; s = r["cube on SQLite"]
			printf "ratio at %s clients: cube-on-etcd / raw etcd put %.2f, / raw etcd txn %.2f, / raw txn on cube'"'"'s %d connections %.2f; cube-on-etcd / cube-on-SQLite %.2f\n",
				c, p ? e / p : 0, t ? e / t : 0, pool, q ? e / q : 0, s ? e / s : 0 }' pool="$POOL" "$ROWS"
	done
	echo
	for w in ab aa; do
		f=$WORK/watch-$w.out
		[ "$w" = ab ] && what="write through A -> watch on B" || what="write through A -> watch on A (reference)"
		printf '%s: %s watchers, %s pods/s, delivered %s, p50 %s ms, p99 %s ms, max %s ms\n' "$what" \
			"$(result "$f" watchers)" "$(result "$f" rate)" "$(result "$f" delivered)" \
			"$(result "$f" p50_ms)" "$(result "$f" p99_ms)" "$(result "$f" max_ms)"
		grep '^  CPU writing' "$f" | sed 's/^  /  /'
	done
	echo "(duplicates in the watch log are the MODIFIED events of the garbage collector deleting the"
	echo " pods, whose owner ReplicaSet does not exist; the latency is the first event's)"
	echo
	echo "API servers' warning/error lines: $LOG_LINES (the log shows the first of each)"
	echo "$RUNS measurements in $(( $(date +%s) - T0 )) s"
	printf 'reproduce: '
	[ "${QUICK:-0}" = 1 ] && printf 'QUICK=1 '
	echo "BUILD=$BUILD DURATION=$DURATION CLIENTS=\"$CLIENTS\" POOL=$POOL WATCHERS=$WATCHERS RATE=$RATE WATCH_DURATION=$WATCH_DURATION bench/run-etcd-bench.sh"
} | tee -a "$LOG"
