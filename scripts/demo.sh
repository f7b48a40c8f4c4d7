#!/bin/sh
# The main job: a whole cluster in one process. Three hollow kubelets
# bootstrap with a token, get client certificates through CSRs that the
# controller manager approves and signs, and rotate them while they keep
# heartbeating. The certificates live 10 minutes (plus the signer's 5-minute
# backdate), so rotation shows within a few minutes. Ctrl-C stops it;
# running it again resumes the same cluster.
#
# In another terminal, while it runs:
#   export KUBECONFIG=$PWD/demo-data/admin.conf
#   kubectl get nodes,csr
#   ls -l demo-data/nodes/node-0/pki/
#   openssl x509 -in demo-data/nodes/node-0/pki/kubelet-client-current.pem -noout -dates
#   build/cube certs check-expiration --dir demo-data --kubelet-dir demo-data/nodes
# The PKI walkthrough of the runbook is scripts/demo-pki.sh.
set -eu
CUBE=${1:-build/cube}
DIR=${DEMO_DIR:-demo-data}
exec "$CUBE" up --nodes "${DEMO_NODES:-3}" --data-dir "$DIR" --port "${DEMO_PORT:-6443}" \
	--cert-ttl "${DEMO_CERT_TTL:-10m}"
