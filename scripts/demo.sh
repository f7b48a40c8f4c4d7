#!/bin/sh
# The main job: `cube demo`. A 3-node cluster comes up on any free port; a
# client certificate rotates through the node's own CSR; then the seeds'
# scenario 1 — node-1's certificate expires with rotation off: NotReady,
# tainted, its pods evicted and replaced, nothing new scheduled there — and
# recovery plan 1 brings it back. About half a minute; it writes an HTML
# report (cube-demo-report.html) and exits 0 when every expectation held.
#
# The long-running cluster is `build/cube up` (see README.md); the runbook's
# PKI walkthrough is scripts/demo-pki.sh.
set -eu
CUBE=${1:-build/cube}
exec "$CUBE" demo --data-dir "${DEMO_DIR:-cube-demo}" --report "${DEMO_REPORT:-cube-demo-report.html}"
