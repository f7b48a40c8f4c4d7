"""The API server's way to the kubelets, as the runbook uses it: each node of
`cube up` serves its kubelet API over HTTPS on a port of its own
(status.daemonEndpoints), and `kubectl get --raw
/api/v1/nodes/NODE/proxy/...` reaches it with the apiserver-kubelet-client
certificate: /configz, /healthz, /metrics; RBAC's nodes/proxy decides who may;
a kubelet that is down answers upstream's 503. `cube certs report` reads
every node's certificates the same way, from the API alone.

The nodes' certificates live a year here (no --cert-ttl), as a real
cluster's, so that only the faults bring one inside the warning window.
"""

import json
import re

import pytest

from test_fault import FAST, fault
from test_up import NODES, Up, ready_nodes, wait_for


YEAR_LONG = tuple(a for i, a in enumerate(FAST)
                  if a != "--cert-ttl" and (i == 0 or FAST[i - 1] != "--cert-ttl"))


@pytest.fixture
def cluster(cube, tmp, run):
    u = Up(cube, tmp / "cluster", run, *YEAR_LONG)
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
    assert m and 364 * 86400 < float(m.group(1)) <= 365 * 86400, metrics[:2000]
    # Each node answers for itself: node-2's pods are node-2's.
    pods = json.loads(raw(u, "/api/v1/nodes/node-2/proxy/pods").stdout)
    assert pods["kind"] == "PodList", pods

    # The kubelet itself asks a certificate of the cluster CA, but for
    # /healthz (anonymous off, as kubeadm's); the API server shows one.
    conf_text = (u.data / "nodes" / "node-1" / "config.yaml").read_text()
    assert "clientCAFile: " + str(u.data / "pki" / "ca.crt") in conf_text, conf_text
    direct = f"https://127.0.0.1:{port}"
    p = u.run("curl", "-sk", "-w", " %{http_code}", f"{direct}/configz")
    assert p.stdout == "Unauthorized 401", p.stdout
    assert u.run("curl", "-sk", f"{direct}/healthz").stdout == "ok"
    pki = u.data / "pki"
    p = u.run("curl", "-sk", "--cert", pki / "apiserver-kubelet-client.crt", "--key",
              pki / "apiserver-kubelet-client.key", f"{direct}/configz")
    assert json.loads(p.stdout)["kubeletconfig"]["port"] == port, p.stdout

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
    # A pod the scheduler has not placed: no location, nothing to stream
    # (upstream's LogLocation), not an error.
    u.kubectl("run", "nowhere", "--image=nginx", "--overrides",
              '{"spec":{"nodeSelector":{"no":"such-node"}}}')
    p = u.kubectl("logs", "nowhere", check=False)
    assert p.returncode == 0 and p.stdout == "", p.stdout + p.stderr
    # The kubelet's 404 for a container it does not run, through the proxy.
    p = raw(u, f"/api/v1/nodes/{node}/proxy/containerLogs/default/talk/zz", check=False)
    assert p.returncode != 0 and "(NotFound)" in p.stderr, p.stderr
    # An entrypoint that prints nothing: an empty log, not an error.
    wait_for(lambda: u.kubectl("logs", "two", "-c", "a", check=False).returncode == 0, 30,
             "container a running")
    assert u.kubectl("logs", "two", "-c", "b").stdout == ""
    assert u.stop() == 0


def test_certs_report(cluster):
    """The seeds' monthly inspection: each node's certificates as its kubelet
    reports them, the newest CSR where it cannot, the control plane's as a
    client sees them; exit 1 naming what is inside the window."""
    u = cluster
    report = [u.cube, "certs", "report", "--kubeconfig", u.data / "admin.conf"]
    p = u.run(*report)
    for n in NODES:
        assert re.search(rf"^{n}\s+client\s+.*\s+364d\s+kubelet metrics$", p.stdout, re.M) and \
            re.search(rf"^{n}\s+serving\s", p.stdout, re.M), p.stdout
    assert re.search(r"^node-0\s+client\s+\w{3} \d\d, \d{4} \d\d:\d\d UTC\s+364d\s+kubelet metrics$",
                     p.stdout, re.M), p.stdout
    assert re.search(r"^node-0\s+serving\s+-\s+-\s+no serving TTL: serverTLSBootstrap is off",
                     p.stdout, re.M), p.stdout
    assert re.search(r"^apiserver\s+serving\s+.*\s+TLS handshake with https://127\.0\.0\.1:",
                     p.stdout, re.M), p.stdout
    assert re.search(r"^ca\s+ca\s+.*\s+9y\s+this kubeconfig$", p.stdout, re.M), p.stdout

    # A certificate ten days from its end (rotation is far off: an hour into
    # its life), and a kubelet that is down.
    fault(u, "expire-cert", "node-0", "--in", "10d")
    fault(u, "stop-kubelet", "node-2")
    wait_for(lambda: "9d" in u.run(*report, check=False).stdout, 30,
             "node-0's new certificate in its kubelet's metrics")
    p = u.run(*report, check=False)
    assert p.returncode == 1, p.stdout
    assert re.search(r"^node-0\s+client\s+.*\s+9d\s+kubelet metrics$", p.stdout, re.M), p.stdout
    assert re.search(r"^node-2\s+client\s+.*\s+364d\s+CSR csr-\w+ \(kubelet unreachable: "
                     r"error trying to reach service: ", p.stdout, re.M), p.stdout
    assert re.search(r"^WARNING: node-0's client certificate expires in 9d \(.*\), inside the "
                     r"30d warning window$", p.stdout, re.M), p.stdout
    assert "node-1's" not in p.stdout
    # JSON, and a narrower window.
    doc = json.loads(u.run(*report, "-o", "json", check=False).stdout)
    node0 = [c for c in doc["certificates"]
             if c["owner"] == "node-0" and c["certificate"] == "client"][0]
    assert node0["status"] == "warning" and node0["source"] == "kubelet metrics", node0
    assert 9 * 86400e9 < node0["residualTime"] <= 10 * 86400e9, node0
    assert u.run(*report, "--warn-within", "5d").returncode == 0
    assert u.stop() == 0
