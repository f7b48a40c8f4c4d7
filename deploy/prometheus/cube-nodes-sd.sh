#!/bin/sh
# cube-nodes-sd.sh [OUT]: write the cluster's nodes as a Prometheus file_sd
# target list (default /etc/prometheus/cube-nodes.json), for a Prometheus
# built without Kubernetes service discovery (Debian's package) and
# deploy/prometheus/prometheus-debian.yml.
#
# Each node becomes one target, its kubelet's InternalIP:port, labelled
# __meta_kubernetes_node_name as Kubernetes discovery would label it; the
# scrape config's relabeling then sends the scrape through the API server's
# node proxy. kubectl runs with the caller's KUBECONFIG: it needs to list
# nodes (deploy/prometheus/rbac.yaml grants that).
#
# The file is replaced in one rename, so Prometheus never reads half of it.
# Run it every minute or so, e.g. from cron:
#   * * * * * KUBECONFIG=/etc/cube/prometheus.conf /usr/local/bin/cube-nodes-sd.sh
set -eu

out=${1:-/etc/prometheus/cube-nodes.json}
list=$(mktemp)
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$list" "$tmp"' EXIT

# name, kubelet port, then the InternalIP address(es).
kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.daemonEndpoints.kubeletEndpoint.Port}{" "}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' >"$list"

awk '
BEGIN { printf "[" }
NF >= 2 {
	host = (NF >= 3) ? $3 : $1
	if (host ~ /:/) host = "[" host "]"
	printf "%s\n  {\"targets\": [\"%s:%s\"], \"labels\": {\"__meta_kubernetes_node_name\": \"%s\"}}", sep, host, $2, $1
	sep = ","
}
END { print "\n]" }
' "$list" >"$tmp"

chmod 0644 "$tmp"
mv "$tmp" "$out"
