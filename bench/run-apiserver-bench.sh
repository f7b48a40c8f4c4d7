#!/bin/sh
# run-apiserver-bench.sh — every `cube apiserver` benchmark (bench/apiserver_bench.c)
# against a fresh cluster directory and server, then a summary of the figures.
#
#   bench/run-apiserver-bench.sh            # everything, 5-10 minutes
#   QUICK=1 bench/run-apiserver-bench.sh    # smaller and shorter, about 1 minute
#
# Knobs (environment): BUILD (build dir, default /tmp/build-apiserver-bench),
# DURATION (s per measurement, 10), LEASE_CLIENTS ("16 64 256"; 1024 works: the
# descriptor limit is raised to the hard limit, which must exceed clients + 100),
# WATCHERS ("1000 10000"), RATE (pod creates/s in watch, 200), NODES (5000),
# PODS (50000), RUNS (LIST repetitions, 5), CORES_CLIENTS (lease clients in
# the one-CPU/two-CPU runs, 64), QUIET_WAIT (s to wait for an idle
# machine, 120), KEEP=1 keeps the work directory, SKIP_BUILD=1 runs what $BUILD
# already holds (bench/run-all.sh builds once for every script). QUICK=1 changes
# the defaults only: a knob set in the environment still wins.
#
# Needs: the build deps and nginx: `scripts/deps.sh bench` installs them.
# for the GET comparison — skipped with a note when nginx is missing.
# Client and server share the machine's cores; other load on the machine shows
# up as "other processes" in each CPU line and skews the figures.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-/tmp/build-apiserver-bench}
if [ "${QUICK:-0}" = 1 ]; then
	DURATION=${DURATION:-3} LEASE_CLIENTS=${LEASE_CLIENTS:-64} WATCHERS=${WATCHERS:-1000}
	NODES=${NODES:-1000} PODS=${PODS:-5000} RUNS=${RUNS:-3}
fi
DURATION=${DURATION:-10}
LEASE_CLIENTS=${LEASE_CLIENTS:-16 64 256}
WATCHERS=${WATCHERS:-1000 10000}
RATE=${RATE:-200}
NODES=${NODES:-5000}
PODS=${PODS:-50000}
RUNS=${RUNS:-5}

WORK=$(mktemp -d /tmp/cube-apiserver-bench.XXXXXX)
LOG=$WORK/bench.log
SERVER_PID=
NGINX_PID=

cleanup() {
	[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	[ -f "$LOG" ] && cp "$LOG" "$BUILD/apiserver-bench.log"
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM

say() { echo "$@" | tee -a "$LOG"; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
	echo "building in $BUILD ..."
	cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$BUILD" -j "$(nproc)" --target cube apiserver_bench >/dev/null
fi
CUBE=$BUILD/cube
BENCH=$BUILD/bench/apiserver_bench
for b in "$CUBE" "$BENCH"; do
	[ -x "$b" ] || { echo "no $b (SKIP_BUILD=1 needs a build in $BUILD)" >&2; exit 1; }
done

# Each watch and each lease client holds a connection (and a descriptor) on both
# sides: the server and the client inherit this limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
need=0
for c in $LEASE_CLIENTS; do [ "$c" -gt "$need" ] && need=$c; done
for w in $WATCHERS; do [ "$w" -gt "$need" ] && need=$w; done
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((need + 100)) ]; then
	echo "# descriptor limit $(ulimit -n) (hard $(ulimit -Hn)) is below $need connections + 100:" \
		"raise the hard limit (ulimit -Hn) or lower LEASE_CLIENTS/WATCHERS" >&2
	exit 1
fi

# start_server NAME [apiserver flags...]: a fresh cluster dir $WORK/NAME.
start_server() {
	stop_server
	dir=$WORK/$1
	shift
	"$CUBE" pki init --dir "$dir" >/dev/null
	${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$CUBE" apiserver --cluster-dir "$dir" \
		--data-dir "$dir/data" --bind-address 127.0.0.1 \
		--secure-port 0 --port-file "$dir/port" "$@" 2>"$dir/server.log" &
	SERVER_PID=$!
	CLUSTER=$dir
	i=0
	until [ -s "$dir/port" ] &&
		curl -sf --cacert "$dir/pki/ca.crt" "https://127.0.0.1:$(cat "$dir/port")/healthz" >/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { cat "$dir/server.log"; echo "server did not start" >&2; exit 1; }
		sleep 0.1
	done
	say "# server pid $SERVER_PID, $CLUSTER, port $(cat "$dir/port") $*${SERVER_CPUS:+ on CPUs $SERVER_CPUS}"
}

stop_server() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
	fi
}

# Busy cores over the last second, from /proc/stat (all processes).
busy_cores() {
	a=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat)
	sleep 1
	b=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat)
	echo "$a $b" | awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($3-$1)/hz}'
}

# Other work on the machine skews every figure: wait (up to QUIET_WAIT s) for
# less than 0.25 busy cores before each measurement, and say what was seen.
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

bench() {
	wait_quiet
	say "\$ apiserver_bench $*"
	"$BENCH" "$@" --cluster-dir "$CLUSTER" --pid "$SERVER_PID" 2>&1 | tee -a "$LOG"
	say ""
}

# nginx serving the Node bytes cube returned, over HTTPS keep-alive with the
# cluster's serving certificate, one worker (cube serves from one loop thread).
start_nginx() {
	ng=$WORK/nginx
	mkdir -p "$ng/www/api/v1/nodes" "$ng/tmp"
	# Below the kernel's ephemeral range (32768 on), where the benchmark's own
	# connections take their local ports; the next one if it is taken.
	port=$(( ($$ % 10000) + 20000 ))
	for try in 1 2 3 4 5; do
		nginx_on "$port" && return 0
		port=$((port + 1))
	done
	cat "$ng/error.log"
	echo "nginx did not start" >&2
	exit 1
}

# nginx_on PORT: nginx serving $WORK/nginx/www on 127.0.0.1:PORT; 1 if it exits.
nginx_on() {
	port=$1
	cat >"$ng/nginx.conf" <<EOF
worker_processes 1;
user root;
pid $ng/nginx.pid;
error_log $ng/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $ng/tmp; proxy_temp_path $ng/tmp; fastcgi_temp_path $ng/tmp;
	uwsgi_temp_path $ng/tmp; scgi_temp_path $ng/tmp;
	keepalive_requests 100000000;
	keepalive_timeout 300s;
	open_file_cache max=16 inactive=600s;
	open_file_cache_valid 600s;
	server {
		listen 127.0.0.1:$port ssl;
		ssl_certificate $CLUSTER/pki/apiserver.crt;
		ssl_certificate_key $CLUSTER/pki/apiserver.key;
		ssl_protocols TLSv1.2 TLSv1.3;
		root $ng/www;
		default_type application/json;
		add_header Cache-Control "no-cache, private";
	}
}
EOF
	nginx -p "$ng" -c "$ng/nginx.conf" -g 'daemon off;' 2>>"$ng/error.log" &
	NGINX_PID=$!
	answered=
	for i in $(seq 50); do
		kill -0 "$NGINX_PID" 2>/dev/null || break
		curl -sk -o /dev/null "https://127.0.0.1:$port/" && { answered=1; break; }
		sleep 0.1
	done
	# Up only if nginx is still there: an answer from a server that already
	# held the port is not nginx's.
	if [ -z "$answered" ] || ! kill -0 "$NGINX_PID" 2>/dev/null; then
		kill "$NGINX_PID" 2>/dev/null || true
		wait "$NGINX_PID" 2>/dev/null || true
		NGINX_PID=
		return 1
	fi
	NGINX_PORT=$port
	NGINX_WORKER=$(pgrep -P "$NGINX_PID" | head -1)
}

say "# apiserver benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -r)"
say "# load average before: $(cut -d' ' -f1-3 /proc/loadavg); ulimit -n $(ulimit -n)"

start_server main
for c in $LEASE_CLIENTS; do
	bench lease --clients "$c" --duration "$DURATION"
done

if command -v nginx >/dev/null; then
	start_nginx
	bench get --duration "$DURATION" --clients 16 --nginx-port "$NGINX_PORT" \
		--nginx-pid "$NGINX_WORKER" --body-out "$WORK/nginx/www/api/v1/nodes/node-1"
	kill "$NGINX_PID"
	wait "$NGINX_PID" 2>/dev/null || true
	NGINX_PID=
else
	say "# nginx not installed (scripts/deps.sh bench): GET without the comparison"
	bench get --duration "$DURATION" --clients 16
fi

bench list --nodes "$NODES" --runs "$RUNS"
for w in $WATCHERS; do
	bench watch --watchers "$w" --rate "$RATE" --duration "$DURATION"
done

# Durability at power-loss level costs an fsync per group commit.
start_server sync-full --storage-sync full
bench lease --clients 64 --duration "$DURATION"

# Both cores (issue 13, item 5): lease renewals with the server on one CPU and
# on two, its connections served by its loop or by two serving threads. The
# client runs on the same two CPUs, unpinned: what the server can take
# is what the client leaves it. "its loop thread" in each CPU line is the
# serial part, the ceiling of a server whose connections its loop serves.
if [ "$(nproc)" -ge 2 ]; then
	for run in 0:0 0,1:0 0,1:2; do
		SERVER_CPUS=${run%:*}
		threads=${run#*:}
		start_server "cores-$(echo "$SERVER_CPUS" | tr , -)-threads-$threads" \
			--serving-threads "$threads"
		bench lease --clients "${CORES_CLIENTS:-64}" --duration "$DURATION"
	done
	SERVER_CPUS=
fi

# Memory on a fresh server; then LIST nodes again with the pods beside them.
start_server rss
bench rss --nodes "$NODES" --pods "$PODS"
bench list --nodes "$NODES" --runs "$RUNS"
stop_server

echo
echo "== summary (full log: $BUILD/apiserver-bench.log) =="
grep -E '^(RESULT|# server)' "$LOG" | sed 's/^RESULT /  /'
printf 'reproduce: '
[ "${QUICK:-0}" = 1 ] && printf 'QUICK=1 '
echo "BUILD=$BUILD DURATION=$DURATION LEASE_CLIENTS=\"$LEASE_CLIENTS\" CORES_CLIENTS=${CORES_CLIENTS:-64} WATCHERS=\"$WATCHERS\" RATE=$RATE NODES=$NODES PODS=$PODS RUNS=$RUNS bench/run-apiserver-bench.sh"
