#!/bin/sh
# run-all.sh — every benchmark of issue 13 in one command, and one markdown table
# of what they measured beside the issue's aims and the anchors measured in the
# same run (nginx serving the same bytes, raw etcd puts, `openssl speed`).
#
#   bench/run-all.sh            # everything: ~25-40 minutes on 2 cores
#   BIG=1 bench/run-all.sh      # and 10,000 hollow nodes: ~10 minutes more
#   QUICK=1 bench/run-all.sh    # smoke run, every script with QUICK=1: ~6 minutes
#
# In order, with one build (in $BUILD) shared by every script (SKIP_BUILD=1):
#   1. `openssl speed -seconds 3 ecdsap256` (the signing ceiling of one core) and
#      bench/pki_bench (what cube's signer does per CSR);
#   2. bench/run-apiserver-bench.sh: GET one Node against nginx, LIST 5,000 Nodes,
#      lease PUTs at LEASE_CLIENTS, watch, memory;
#   3. bench/run-etcd-bench.sh: cube on SQLite and on etcd, and raw etcd put/txn
#      through its JSON gateway, at the same LEASE_CLIENTS;
#   4. bench/run-hollow-bench.sh: hollow kubelets at SIZES — time to Ready, CSRs
#      issued per second, RSS per node, CPU while heartbeating.
# Then the table goes to stdout and to $OUT, each script's output beside it
# ($OUTDIR/{pki,apiserver,etcd,hollow}.out). A script that fails leaves "n/a"
# in its rows and says so under the table; the others still run.
#
# Knobs (environment): BUILD (default /tmp/build-all-bench), OUT (default
# /tmp/cube-bench-all/TABLE.md), QUICK=1 (passed to every script: shorter
# measurements, 100 hollow nodes, QUIET_WAIT 5 unless set), LEASE_CLIENTS
# ("64 256 1024", for both the apiserver and the etcd script), NODES (LIST size,
# 5000, also under QUICK), SIZES (hollow nodes, "1000 5000"; QUICK runs 100),
# BIG=1 (adds 10000 to SIZES, run as 4 kubelet processes of PER_PROCESS=2500
# nodes; a size whose kubelet process the descriptor hard limit cannot hold
# is left out, and its row says so), UP_NODES (`cube up --nodes N` after the split
# runs, 0 = skipped; QUICK runs 100), QUIET_WAIT (s each script waits for an
# idle machine before a measurement; the scripts' own defaults unless set),
# SKIP_BUILD=1 (use what $BUILD holds), KEEP=1 (keep the scripts' work dirs),
# TABLE_ONLY=1 (run nothing: write the table again from the outputs in $OUTDIR).
# Any other knob of a script (DURATION, WINDOW, TIMEOUT, ...) set in the
# environment reaches it too.
#
# Needs what the scripts need: `scripts/deps.sh bench` (nginx-light), etcd-server,
# python3, curl, openssl. Everything shares this machine's cores: other load
# skews the figures, and each script's log says how busy the machine was.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-/tmp/build-all-bench}
OUT=${OUT:-/tmp/cube-bench-all/TABLE.md}
OUTDIR=$(dirname "$OUT")
QUICK=${QUICK:-0}
LEASE_CLIENTS=${LEASE_CLIENTS:-64 256 1024}
NODES=${NODES:-5000}
SIZES=${SIZES:-1000 5000}
[ "${BIG:-0}" = 1 ] && SIZES="$SIZES 10000"
ASKED_SIZES=$SIZES
UP_NODES=${UP_NODES:-0}
[ "$QUICK" = 1 ] && QUIET_WAIT=${QUIET_WAIT:-5}
[ -n "${QUIET_WAIT:-}" ] && export QUIET_WAIT
export BUILD QUICK

mkdir -p "$OUTDIR"
STEPS=$OUTDIR/steps NOFD=$OUTDIR/hollow-nofd RUNENV=$OUTDIR/run.env
note() { echo "[run-all $(date +%H:%M:%S)] $*" >&2; }

# step NAME CMD...: run CMD with its output in $OUTDIR/NAME.out; remember exit and time.
step() {
	name=$1
	shift
	note "$name: $* (output: $OUTDIR/$name.out) ..."
	t=$(date +%s)
	"$@" >"$OUTDIR/$name.out" 2>&1
	rc=$?
	echo "$name $rc $(($(date +%s) - t))" >>"$STEPS"
	note "$name: exit $rc after $(($(date +%s) - t)) s"
}

pki() {
	echo "\$ openssl speed -seconds 3 ecdsap256"
	openssl speed -seconds 3 ecdsap256 2>&1 | tail -3 || return 1
	echo "\$ pki_bench 1"
	"$BUILD/bench/pki_bench" 1
}

# A size whose kubelet process cannot have the descriptors it needs (it says so
# and exits at once; the probe would then wait TIMEOUT for nothing) is left out
# and its rows say why. Asked of the binary itself, which checks before it reads
# its bootstrap kubeconfig: the budget lives in src (kubelet_pool_fds_per_node).
hollow_fit() {
	fit=''
	for h in $SIZES; do
		d=$(mktemp -d /tmp/cube-run-all-fd.XXXXXX)
		# run-hollow-bench.sh splits a size into processes of PER_PROCESS.
		p=$h
		[ "$p" -le "${PER_PROCESS:-2500}" ] || p=${PER_PROCESS:-2500}
		timeout 60 "$BUILD/cube" kubelet --hollow-nodes "$p" --root-dir "$d/nodes" \
			--bootstrap-kubeconfig "$d/none.conf" --rotate-certificates --port 0 >"$d/out" 2>&1
		if grep -q 'file descriptors' "$d/out"; then
			why=$(sed -n 's/.*needs \([0-9]*\) file descriptors, but this process may open at most \([0-9]*\).*/needs \1 descriptors, the hard limit (ulimit -Hn) is \2/p' "$d/out" | head -1)
			echo "$h ${why:-$(grep -m1 'file descriptors' "$d/out" | cut -c1-200)}" >>"$NOFD"
			note "hollow: $h nodes left out: $why"
		else
			fit="$fit $h"
		fi
		rm -rf "$d"
	done
	SIZES=${fit# }
}

if [ "${TABLE_ONLY:-0}" = 1 ]; then
	[ -f "$RUNENV" ] || { note "no $RUNENV: nothing was run with OUT=$OUT"; exit 1; }
	. "$RUNENV"
else
	rm -f "$OUTDIR"/*.out "$STEPS" "$NOFD"
	: >"$STEPS"
	: >"$NOFD"
	T0=$(date +%s)
	STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	GIT=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')

	if [ "${SKIP_BUILD:-0}" != 1 ]; then
		note "building cube, apiserver_bench, etcd_put_bench, pki_bench in $BUILD ..."
		t=$(date +%s)
		if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
			cmake --build "$BUILD" -j "$(nproc)" --target cube apiserver_bench etcd_put_bench pki_bench; } \
			>"$OUTDIR/build.out" 2>&1; then
			tail -30 "$OUTDIR/build.out" >&2
			note "build failed (log: $OUTDIR/build.out)"
			exit 1
		fi
		echo "build 0 $(($(date +%s) - t))" >>"$STEPS"
	fi
	for b in cube bench/apiserver_bench bench/etcd_put_bench bench/pki_bench; do
		[ -x "$BUILD/$b" ] || { note "no $BUILD/$b (SKIP_BUILD=1 needs a build there)"; exit 1; }
	done
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

	step pki pki
	step apiserver env SKIP_BUILD=1 LEASE_CLIENTS="$LEASE_CLIENTS" NODES="$NODES" \
		sh "$ROOT/bench/run-apiserver-bench.sh"
	step etcd env SKIP_BUILD=1 CLIENTS="$LEASE_CLIENTS" sh "$ROOT/bench/run-etcd-bench.sh"
	[ "$QUICK" = 1 ] || hollow_fit
	if [ "$QUICK" = 1 ]; then # its own sizes: 100 split, 100 in `cube up`
		step hollow env SKIP_BUILD=1 sh "$ROOT/bench/run-hollow-bench.sh"
	elif [ -n "$SIZES" ]; then
		step hollow env SKIP_BUILD=1 SIZES="$SIZES" UP_NODES="$UP_NODES" \
			sh "$ROOT/bench/run-hollow-bench.sh"
	fi
	LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
	T1=$(date +%s)
	# What TABLE_ONLY=1 needs to write the table again.
	for v in T0 T1 STARTED LOAD0 LOAD1 GIT QUICK QUIET_WAIT LEASE_CLIENTS NODES SIZES ASKED_SIZES UP_NODES BUILD; do
		eval "printf '%s=\"%s\"\\n' $v \"\${$v:-}\""
	done >"$RUNENV"
fi

# ---- the table -------------------------------------------------------------------

A=$OUTDIR/apiserver.out E=$OUTDIR/etcd.out H=$OUTDIR/hollow.out P=$OUTDIR/pki.out

# kv FILE PREFIX KEY: KEY's value in the first line of FILE starting with PREFIX.
kv() {
	[ -f "$1" ] || return 0
	awk -v p="$2" -v k="$3" 'index($0, p) == 1 {
		for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit }
	}' "$1"
}
# Numbers for people: 12345.6 -> 12,346 (integers), or with D decimals.
n() { # VALUE [DECIMALS]
	case "${1:-}" in '' | *[!0-9.]*) echo "${1:-n/a}"; return ;; esac
	awk -v v="$1" -v d="${2:-0}" 'BEGIN {
		s = sprintf("%." d "f", v); i = s; f = ""
		if (d > 0) { i = substr(s, 1, index(s, ".") - 1); f = substr(s, index(s, ".")) }
		while (length(i) > 3 && match(i, /[0-9][0-9][0-9]$/)) {
			o = "," substr(i, length(i) - 2) o; i = substr(i, 1, length(i) - 3)
		}
		print i o f }'
}
# x A B: A / B as "0.85×", or empty when either is missing.
x() {
	case "${1:-}${2:-}" in '' | *[!0-9.]*) return ;; esac
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf (a / b < 0.1 ? "%.2g×" : "%.2f×"), a / b }'
}
# pct A B: A / B in per cent, for ratios far below 1.
pct() {
	case "${1:-}${2:-}" in '' | *[!0-9.]*) echo n/a; return ;; esac
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2g %%", 100 * a / b }'
}
# le A B: true when A <= B (both numbers).
le() {
	case "${1:-}${2:-}" in '' | *[!0-9.]*) return 1 ;; esac
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'
}
verdict() { # VALUE AIM higher|lower
	case "${1:-}" in '' | *[!0-9.]*) echo "n/a"; return ;; esac
	if [ "$3" = higher ]; then
		le "$2" "$1" && echo "$(x "$1" "$2") aim: **meets**" || echo "$(x "$1" "$2") aim: below"
	else
		le "$1" "$2" && echo "$(x "$1" "$2") aim: **meets**" || echo "$(x "$1" "$2") aim: above"
	fi
}

ROWS=$OUTDIR/rows
: >"$ROWS"
row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" >>"$ROWS"; }

# GET one Node, 16 connections, against nginx serving the same bytes.
cg=$(kv "$A" "RESULT get target=cube" req_per_s)
ng=$(kv "$A" "RESULT get target=nginx" req_per_s)
cgp=$(kv "$A" "RESULT get target=cube" p99_ms)
ngp=$(kv "$A" "RESULT get target=nginx" p99_ms)
r=$(x "$cg" "$ng")
if [ -n "$r" ]; then
	le 0.8 "$(awk -v a="$cg" -v b="$ng" 'BEGIN{print a/b}')" && v="$r nginx: **meets** ≥ 0.8×" || v="$r nginx: below the 0.8× aim"
else v="n/a"; fi
row "GET one Node (HTTPS keep-alive, 16 connections), req/s" "$(n "$cg")" "nginx $(n "$ng")/s (aim ≥ 0.8×)" "$v"
row "GET one Node, p99" "$(n "$cgp" 2) ms" "nginx $(n "$ngp" 2) ms" "$(x "$cgp" "$ngp") nginx's"

# LIST Nodes, JSON, median (the first LIST: Nodes alone).
ln=$(kv "$A" "RESULT list nodes=" nodes)
lj=$(kv "$A" "RESULT list nodes=" json_median_ms)
row "LIST $(n "$ln") Nodes, JSON, median" "$(n "$lj" 1) ms" "aim ≤ 30 ms" "$(verdict "$lj" 30 lower)"

# Lease PUTs on the main server (not the sync-full one) beside raw etcd puts.
lease() { # CLIENTS KEY
	[ -f "$A" ] || return 0
	awk -v c="$1" -v k="$2" '
		/^# server pid/ { main = ($0 ~ /\/main,/) }
		main && $1 == "RESULT" && $2 == "lease" && $3 == "clients=" c {
			for (i = 4; i <= NF; i++) if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit }
		}' "$A"
}
for c in $LEASE_CLIENTS; do
	lw=$(lease "$c" writes_per_s)
	lp=$(lease "$c" p99_ms)
	ew=$(kv "$E" "RESULT etcd mode=put clients=$c " writes_per_s)
	ep=$(kv "$E" "RESULT etcd mode=put clients=$c " p99_ms)
	re=$(x "$lw" "$ew")
	row "lease PUT/s, $(n "$c") clients (durable, one mTLS connection each)" "$(n "$lw")" \
		"aim ≥ 20,000/s; raw etcd 3.4 put $(n "$ew")/s" "$(verdict "$lw" 20000 higher); ${re:-n/a} raw etcd"
	rp=$(x "$lp" "$ep")
	row "lease PUT p99, $(n "$c") clients" "$(n "$lp" 2) ms" "aim ≤ 20 ms; raw etcd put $(n "$ep" 2) ms" \
		"$(verdict "$lp" 20 lower); ${rp:-n/a} raw etcd's"
done

# Hollow kubelets: one size per "== N hollow kubelets, three processes" section.
hollow() { # N KEY -> value from that size's section
	[ -f "$H" ] || return 0
	awk -v n="$1" -v k="$2" '
		/^== [0-9]+ hollow kubelets, three processes/ { sec = ($2 == n) ; next }
		/^== / { sec = 0 }
		!sec || $1 != "RESULT" { next }
		k == "ready" && $2 ~ /^nodes=/ { for (i = 2; i <= NF; i++) if ($i ~ /^time_to_all_ready=/) { sub(/^[^=]*=/, "", $i); sub(/s$/, "", $i); print $i } }
		k == "peak" && $2 == "csrs" { for (i = 3; i <= NF; i++) if ($i ~ /^issued_per_s_peak=/) { sub(/^[^=]*=/, "", $i); print $i } }
		k == "created" && $2 == "csrs" { for (i = 3; i <= NF; i++) if ($i ~ /^issued=/) { sub(/^[^=]*=/, "", $i); print $i } }
		k == "rss" && $2 == "rss_after_window" { s = $0; sub(/.*\(/, "", s); sub(/ KiB.*/, "", s); print s }
		k == "rss_api" && $2 == "rss_after_window" { for (i = 3; i <= NF; i++) if ($i ~ /^apiserver=/) { sub(/^[^=]*=/, "", $i); sub(/MiB$/, "", $i); print $i } }
		k ~ /^cpu_/ && $2 == "cpu" && $3 == substr(k, 5) { for (i = 4; i <= NF; i++) if ($i ~ /^cores=/) { sub(/^cores=/, "", $i); print $i } }
		k == "busy" && $2 == "cpu" && $3 ~ /^window=/ { for (i = 4; i <= NF; i++) if ($i ~ /^machine_busy=/) { sub(/^[^=]*=/, "", $i); print $i } }
	' "$H" | head -1
}
hsizes=$(sed -n 's/^== \([0-9]*\) hollow kubelets, three processes.*/\1/p' "$H" 2>/dev/null | sort -un | tr '\n' ' ')
[ -n "$hsizes" ] || hsizes=$SIZES
peak='' peak_n=''
for h in $hsizes; do
	t=$(hollow "$h" ready)
	row "hollow nodes: $(n "$h") bootstrapped (token → CSR → signed) and Ready" "${t:-n/a} s" "—" \
		"$([ -n "$t" ] && awk -v t="$t" -v n="$h" 'BEGIN{ if (t+0 > 0) printf "%.0f nodes/s", n/t }' || echo n/a)"
	rs=$(hollow "$h" rss)
	row "hollow nodes: $(n "$h"), kubelet RSS per node (API server $(hollow "$h" rss_api) MiB)" \
		"${rs:-n/a} KiB" "aim 64 KiB (item 4)" "$(x "$rs" 64) the aim"
	ca=$(hollow "$h" cpu_apiserver) cc=$(hollow "$h" cpu_controller-manager) ck=$(hollow "$h" cpu_kubelet)
	tot=$(awk -v a="${ca:-0}" -v b="${cc:-0}" -v c="${ck:-0}" 'BEGIN{printf "%.3f", a+b+c}')
	[ -n "$ca$cc$ck" ] || tot=n/a
	row "hollow nodes: $(n "$h") heartbeating, CPU cores (API server + controller manager + kubelets)" \
		"$tot (${ca:-?} + ${cc:-?} + ${ck:-?})" "—" "machine busy $(hollow "$h" busy) of $(nproc) cores"
	p=$(hollow "$h" peak)
	if [ -n "$p" ] && { [ -z "$peak" ] || [ "$p" -gt "$peak" ]; }; then peak=$p peak_n=$h; fi
done
while read -r h why; do
	row "hollow nodes: $(n "$h")" "not run" "—" "\`cube kubelet --hollow-nodes $h\` $why"
done <"$NOFD"

# CSRs issued per second during the storm beside the signing ceiling of one core.
os=$(grep 'ecdsa (nistp256)' "$P" 2>/dev/null | awk '{print $(NF-1)}' | head -1)
ps=$(awk '/^CSR sign / { for (i = 1; i <= NF; i++) if ($i == "ops/s") { print $(i - 1); exit } }' "$P" 2>/dev/null)
row "CSRs issued per second, peak second (of $(n "${peak_n:-}") nodes' bootstrap)" "$(n "$peak")" \
	"\`openssl speed ecdsap256\` $(n "$os") sign/s (one core)" "$(pct "$peak" "$os") of the ceiling"
row "cube's signer alone (\`pki_bench\`: CSR sign, csrsigning policy, one thread)" "$(n "$ps")/s" \
	"\`openssl speed ecdsap256\` $(n "$os") sign/s" "$(pct "$ps" "$os") of the ceiling"

# ---- the page --------------------------------------------------------------------

took=$((T1 - T0))
{
	if [ "$QUICK" = 1 ]; then
		echo "### bench/run-all.sh — QUICK smoke run, $STARTED"
	else
		echo "### bench/run-all.sh — $STARTED"
	fi
	echo
	echo "Machine: $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(openssl version | cut -d' ' -f1-2), $(etcd --version 2>/dev/null | head -1 || echo 'no etcd'), $(nginx -v 2>&1 | sed 's/.*: //' || echo 'no nginx'); load average $LOAD0 at the start, $LOAD1 at the end; git $GIT."
	echo
	busy=$(cat "$A" "$E" "$H" 2>/dev/null | sed -n 's/^# machine busy before the run: \([0-9.]*\) cores.*/\1/p' | sort -n |
		awk '{v[NR] = $1} END { if (NR) printf "%s / %s / %s cores (min / median / max, %d measurements)", v[1], v[int((NR + 1) / 2)], v[NR], NR }')
	[ -n "$busy" ] && echo "Other work on the machine just before each measurement: $busy; each script waited up to QUIET_WAIT s for < 0.25 cores." && echo
	echo "| measurement | cube | anchor | ratio / verdict |"
	echo "| --- | ---: | --- | --- |"
	cat "$ROWS"
	echo
	while read -r name rc secs; do
		printf '%s %s s%s; ' "$name" "$secs" "$([ "$rc" = 0 ] || echo " (EXIT $rc: see $OUTDIR/$name.out)")"
	done <"$STEPS"
	echo "total $((took / 60)) min $((took % 60)) s."
	printf 'Reproduce: `'
	[ "$QUICK" = 1 ] && printf 'QUICK=1 '
	[ -n "${QUIET_WAIT:-}" ] && printf 'QUIET_WAIT=%s ' "$QUIET_WAIT"
	[ "$QUICK" = 1 ] || printf 'SIZES="%s" UP_NODES=%s ' "$ASKED_SIZES" "$UP_NODES"
	echo "LEASE_CLIENTS=\"$LEASE_CLIENTS\" NODES=$NODES bench/run-all.sh\` (outputs: $OUTDIR/*.out)"
} >"$OUT"
cat "$OUT"
