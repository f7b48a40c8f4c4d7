#!/bin/sh
# The one list of Debian packages cube needs: to build, to test, to run its
# end-to-end suites. Idempotent: installs only what is missing, so `make` can
# call it every time at no cost. Runs as root on a fresh Debian 12.
set -eu

BUILD="build-essential pkg-config cmake libssl-dev libevent-dev libnghttp2-dev libjansson-dev libyaml-dev libsqlite3-dev libjemalloc-dev"
# chromium: the scenario report is checked as a person opens it (headless).
# prometheus: promtool tests deploy/prometheus's alert rules, and a real
# Prometheus scrapes the kubelets through the node proxy (e2e).
# etcd-server, etcd-client: the etcd3 backend's tests run a real etcd (and
# etcdctl); haproxy: the balancer of `cube up --ha` (and test_ha.py).
TEST="libcmocka-dev openssl curl python3 python3-pytest python3-yaml python3-kubernetes chromium prometheus etcd-server etcd-client haproxy"

# `deps.sh bench` adds what bench/ compares against.
BENCH="nginx-light"
want="$BUILD $TEST"
[ "${1:-}" = bench ] && want="$want $BENCH"

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
# kubectl drives the e2e suites. Any kubectl on PATH will do (the Google
# Cloud SDK's, with kubectl.1.27 ... kubectl.1.33 beside it for
# test_kubectl_skew.py); only without one, Debian's.
command -v kubectl >/dev/null 2>&1 || missing="$missing kubernetes-client"

[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$missing (run as root, or install them yourself)" >&2
	exit 1
fi
echo "deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
