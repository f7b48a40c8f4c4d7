# lib.sh — what the bench scripts share; sourced, not run.

# stop PID...: CONT (a SIGSTOPped process cannot die), TERM, then KILL after
# STOP_WAIT tenths of a second (default 50); a child that has exited stays a
# zombie (Z) until it is waited for, so Z counts as gone.
stop() {
	for p in "$@"; do [ -n "$p" ] && { kill -CONT "$p"; kill "$p"; } 2>/dev/null || true; done
	for p in "$@"; do
		[ -n "$p" ] || continue
		i=0
		while [ -n "$(ps -o stat= -p "$p" 2>/dev/null | grep -v Z)" ] &&
			[ $i -lt "${STOP_WAIT:-50}" ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}

# start_apiserver BIN DIR [FLAG...]: `cube pki init` DIR, `cube apiserver` on a
# free loopback port with FLAGs, DIR's kubeconfigs pointed at it, /healthz
# answered. Sets API_PID, port and server.
start_apiserver() {
	_bin=$1 _dir=$2
	shift 2
	"$_bin" pki init --dir "$_dir" >/dev/null
	"$_bin" apiserver --cluster-dir "$_dir" --data-dir "$_dir/data" --bind-address 127.0.0.1 \
		--secure-port 0 --port-file "$_dir/port" "$@" 2>"$_dir/apiserver.log" &
	API_PID=$!
	i=0
	until [ -s "$_dir/port" ]; do
		i=$((i + 1)); [ $i -lt 200 ] || { cat "$_dir/apiserver.log"; exit 1; }
		sleep 0.05
	done
	port=$(cat "$_dir/port")
	server=https://127.0.0.1:$port
	for f in admin.conf controller-manager.conf bootstrap-kubelet.conf scheduler.conf; do
		sed -i "s#^\( *server: \).*#\1$server#" "$_dir/$f"
	done
	until curl -sf --cacert "$_dir/pki/ca.crt" "$server/healthz" >/dev/null; do sleep 0.1; done
}

# SKIP_BUILD=1: run what $BUILD already holds (bench/run-all.sh builds once for
# every script, and the tree may be mid-edit). Scripts that source this file
# before they build (run-hollow-bench.sh) call this cmake, which then does nothing.
if [ "${SKIP_BUILD:-0}" = 1 ]; then
	cmake() { :; }
fi
