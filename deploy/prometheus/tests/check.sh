#!/bin/sh
# Check deploy/prometheus with promtool: the rules load, their unit tests
# pass, and both scrape configs parse. ctest runs it as e2e/promtool_rules;
# scripts/deps.sh installs promtool (Debian's prometheus package).
#
#   sh deploy/prometheus/tests/check.sh
set -eu

d=$(cd "$(dirname "$0")/.." && pwd)

if ! command -v promtool >/dev/null 2>&1; then
	echo "check.sh: promtool not found (scripts/deps.sh installs the prometheus package)" >&2
	exit 1
fi

promtool check rules "$d/cube-rules.yml"
promtool test rules "$d/tests/cube-rules-test.yml"
promtool check config --syntax-only "$d/prometheus-debian.yml"

# prometheus.yml uses Kubernetes service discovery, which Debian's build of
# Prometheus leaves out: its promtool stops at the first kubernetes_sd_configs
# with "field kubernetes_sd_configs not found". Only that failure is let
# through; tests/e2e/test_prometheus.py checks that prometheus.yml and
# prometheus-debian.yml differ in their node discovery alone.
if ! out=$(promtool check config --syntax-only "$d/prometheus.yml" 2>&1); then
	echo "$out"
	case $out in
	*"field kubernetes_sd_configs not found"*)
		echo "check.sh: this promtool has no Kubernetes service discovery;" \
			"prometheus.yml not checked by promtool"
		;;
	*) exit 1 ;;
	esac
else
	echo "$out"
fi
echo "check.sh: OK"
