#!/bin/sh
# The runbook's certificate commands on a fresh cluster PKI: its expiry
# report, and the runbook's manual plan 2 (sign a kubelet CSR by hand) done
# both with openssl, as the runbook does, and with cube.
set -eu
CUBE=${1:-build/cube}
DIR=${DEMO_DIR:-demo-pki}
rm -rf "$DIR" && mkdir -p "$DIR"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "cube pki init: a kubeadm-like PKI in $DIR"
"$CUBE" pki init --dir "$DIR" --apiserver-san 10.0.0.10

step "the runbook's first command, on cube's files"
openssl x509 -in "$DIR/pki/apiserver.crt" -text -noout | grep -A2 Validity

step "cube certs check-expiration"
"$CUBE" certs check-expiration --dir "$DIR"

step "a kubelet asks for a client certificate (openssl req, as the runbook)"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/node-1.key" 2>/dev/null
openssl req -new -key "$DIR/node-1.key" -subj "/CN=system:node:node-1/O=system:nodes" \
	-out "$DIR/node-1.csr"
"$CUBE" certs inspect "$DIR/node-1.csr"

step "plan 2, with cube: sign it with the cluster CA"
"$CUBE" certs sign-csr --ca-dir "$DIR" --in "$DIR/node-1.csr" --out "$DIR/node-1.crt" --duration 720h
"$CUBE" certs verify --ca-file "$DIR/pki/ca.crt" --purpose client "$DIR/node-1.crt"

step "install it as the kubelet stores it, and check again"
mkdir -p "$DIR/kubelet/pki"
stamp=$(date +%Y-%m-%d-%H-%M-%S)
cat "$DIR/node-1.crt" "$DIR/node-1.key" > "$DIR/kubelet/pki/kubelet-client-$stamp.pem"
chmod 600 "$DIR/kubelet/pki/kubelet-client-$stamp.pem"
ln -sf "$(cd "$DIR/kubelet/pki" && pwd)/kubelet-client-$stamp.pem" "$DIR/kubelet/pki/kubelet-client-current.pem"
"$CUBE" certs check-expiration --dir "$DIR" --kubelet-dir "$DIR/kubelet" --warn-within 60d || \
	echo "(exit $?: the 30-day kubelet certificate is inside the 60-day window, as it should be)"

step "rehearse: the same cluster 400 days from now"
"$CUBE" --clock-offset 400d certs check-expiration --dir "$DIR" --kubelet-dir "$DIR/kubelet" || \
	echo "(exit $?: everything but the CA has expired by then)"
