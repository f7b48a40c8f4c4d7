"""The API server's way to the kubelets, as the runbook uses it: each node of
`cube up` serves its kubelet API over HTTPS on a port of its own
(status.daemonEndpoints), and `kubectl get --raw
/api/v1/nodes/NODE/proxy/...` reaches it with the apiserver-kubelet-client
certificate: /configz, /healthz, /metrics; RBAC's nodes/proxy decides who may;
a kubelet that is down answers upstream's 503.
"""

import json
import re

import pytest

from test_fault import FAST, fault
from test_up import NODES, Up, ready_nodes, wait_for


@pytest.fixture
def cluster(cube, tmp, run):
    u = Up(cube, tmp / "cluster", run, *FAST)
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    yield u
    if u.proc.poll() is None:
        u.stop()


def raw(u, path, *extra, check=True):
    return u.kubectl("get", "--raw", path, *extra, check=check)


def test_node_proxy(cluster):
    u = cluster
    node = json.loads(u.kubectl("get", "node", "node-1", "-o", "json").stdout)
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    assert port > 0, node["status"]

    # The seeds' `grep -i rotate` on the running configuration.
    conf = json.loads(raw(u, "/api/v1/nodes/node-1/proxy/configz").stdout)["kubeletconfig"]
    assert conf["rotateCertificates"] is True and conf["port"] == port, conf
    assert raw(u, "/api/v1/nodes/node-1/proxy/healthz").stdout == "ok"
    metrics = raw(u, "/api/v1/nodes/node-1/proxy/metrics").stdout
    m = re.search(r"^kubelet_certificate_manager_client_ttl_seconds (\S+)$", metrics, re.M)
    assert m and 0 < float(m.group(1)) <= 600, metrics[:2000]
    # Each node answers for itself: node-2's pods are node-2's.
    pods = json.loads(raw(u, "/api/v1/nodes/node-2/proxy/pods").stdout)
    assert pods["kind"] == "PodList", pods

    # A path the kubelet does not serve: its own 404, passed through.
    p = raw(u, "/api/v1/nodes/node-1/proxy/nothing-here", check=False)
    assert p.returncode != 0 and "NotFound" in p.stderr, p.stderr
    p = raw(u, "/api/v1/nodes/nope/proxy/healthz", check=False)
    assert p.returncode != 0 and 'nodes "nope" not found' in p.stderr, p.stderr
    # RBAC: nodes/proxy is a subresource of its own.
    p = raw(u, "/api/v1/nodes/node-1/proxy/healthz", "--as=jane", check=False)
    assert p.returncode != 0 and ('User "jane" cannot get resource "nodes/proxy" in API group '
                                  '"" at the cluster scope') in p.stderr, p.stderr

    # The kubelet down: upstream's "error trying to reach service".
    node2 = json.loads(u.kubectl("get", "node", "node-2", "-o", "json").stdout)
    port2 = node2["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    fault(u, "stop-kubelet", "node-2")
    p = raw(u, "/api/v1/nodes/node-2/proxy/healthz", check=False)
    assert p.returncode != 0 and "(ServiceUnavailable): error trying to reach service: " in \
        p.stderr and f"127.0.0.1:{port2}" in p.stderr, p.stderr
    assert u.stop() == 0


def test_kubectl_logs(cluster):
    """`kubectl logs` reads what the simulated runtime wrote: each `echo` of
    the container's program once the script has reached it, through
    pods/log and the node's kubelet; upstream's checks and messages."""
    u = cluster
    u.kubectl("run", "talk", "--image=busybox", "--restart=Never", "--",
              "sh", "-c", "echo hello from cube; sleep 2; echo 'second line'; exit 0")
    out = wait_for(lambda: u.kubectl("logs", "talk", check=False).stdout, 30,
                   "the first line")
    assert out == "hello from cube\n", out
    wait_for(lambda: "second line" in u.kubectl("logs", "talk", check=False).stdout, 30,
             "the second line, two seconds later")
    stamped = u.kubectl("logs", "talk", "--timestamps").stdout.splitlines()
    assert len(stamped) == 2 and all(
        re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", line) for line in stamped), stamped
    assert u.kubectl("logs", "talk", "--tail=1").stdout == "second line\n"
    # Through the node proxy the same bytes come from the kubelet itself.
    node = u.kubectl("get", "pod", "talk", "-o", "jsonpath={.spec.nodeName}").stdout
    assert raw(u, f"/api/v1/nodes/{node}/proxy/containerLogs/default/talk/talk").stdout == \
        "hello from cube\nsecond line\n"

    u.kubectl("run", "two", "--image=nginx", "--overrides",
              '{"spec":{"containers":[{"name":"a","image":"nginx"},'
              '{"name":"b","image":"nginx"}]}}')
    p = raw(u, "/api/v1/namespaces/default/pods/two/log", check=False)
    assert "a container name must be specified for pod two, choose one of: [a b]" in p.stderr, \
        p.stderr
    p = u.kubectl("logs", "two", "-c", "zz", check=False)
    assert "container zz is not valid for pod two" in p.stderr, p.stderr
    # A pod the scheduler has not placed.
    u.kubectl("run", "nowhere", "--image=nginx", "--overrides",
              '{"spec":{"nodeSelector":{"no":"such-node"}}}')
    p = u.kubectl("logs", "nowhere", check=False)
    assert "pod nowhere does not have a host assigned" in p.stderr, p.stderr
    # An entrypoint that prints nothing: an empty log, not an error.
    wait_for(lambda: u.kubectl("logs", "two", "-c", "a", check=False).returncode == 0, 30,
             "container a running")
    assert u.kubectl("logs", "two", "-c", "b").stdout == ""
    assert u.stop() == 0
