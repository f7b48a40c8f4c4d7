"""`cube fault` and `cube restart` on a running `cube up`: each fault acts on
the real thing — the node's certificate files and config.yaml, RBAC bindings
and CSRs in the API, the kubelet's connections and clock, the controller
manager's --controllers — and the cluster reacts as upstream's does: 401s and
x509 errors, NotReady nodes with the unreachable taint, CSRs left Pending or
Denied. `cube fault clear` undoes every fault and the nodes come back.

Timings are compressed: Leases renewed every second, a 6 s grace period.
"""

import json
import re
import time

import pytest

from test_up import Up, NODES, cert_file, ready_nodes, wait_for

FAST = ("--node-monitor-period", "1s", "--node-monitor-grace-period", "6s",
        "--node-lease-duration-seconds", "4", "--node-status-update-frequency", "1s",
        "--cert-ttl", "10m")


@pytest.fixture
def cluster(cube, tmp, run):
    u = Up(cube, tmp / "cluster", run, *FAST)
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    yield u
    if u.proc.poll() is None:
        u.stop()


def fault(u, *args, check=True):
    return u.run(u.cube, "fault", "--data-dir", u.data, *args, check=check, timeout=90)


def node_json(u, node):
    return json.loads(u.kubectl("get", "node", node, "-o", "json").stdout)


def ready_status(u, node):
    for c in node_json(u, node)["status"].get("conditions", []):
        if c["type"] == "Ready":
            return c["status"]
    return None


def taints(u, node):
    return {f'{t["key"]}:{t["effect"]}' for t in node_json(u, node)["spec"].get("taints", [])}


def kubelet_log(u, node):
    return (u.data / "nodes" / node / "kubelet.log").read_text(errors="replace")


def csr_rows(u):
    return u.kubectl("get", "csr", "--no-headers").stdout.splitlines()


def test_expired_certificate_without_approver_then_recovery(cluster, run):
    u = cluster
    out = fault(u, "approver", "off").stdout
    assert "--controllers=*,-csrapproving" in out, out
    before = cert_file(u.data, "node-1")
    out = fault(u, "expire-cert", "node-1", "--in", "4s").stdout
    assert "kubelet restarted" in out, out
    # A real certificate from the cluster CA with the same key and subject,
    # NotAfter 4 s away; the old dated file is kept for `clear`.
    now = cert_file(u.data, "node-1")
    assert now != before and (u.data / "nodes" / "node-1" / "pki" / before).exists()
    subject = run("openssl", "x509", "-in", now, "-noout", "-subject").stdout
    assert "CN = system:node:node-1" in subject and "O = system:nodes" in subject, subject
    run("openssl", "verify", "-CAfile", u.data / "pki" / "ca.crt", "-no_check_time", now)
    # Past its rotation deadline at once, the kubelet asks for a new one;
    # with no approver the CSR stays Pending...
    wait_for(lambda: [r for r in csr_rows(u) if "system:node:node-1" in r and "Pending" in r],
             15, "node-1's rotation CSR Pending")
    # ...the certificate expires, the API server refuses it, the node goes
    # Unknown after the grace period and is tainted unreachable.
    wait_for(lambda: ready_status(u, "node-1") == "Unknown", 30, "node-1 Ready=Unknown")
    wait_for(lambda: "node.kubernetes.io/unreachable:NoSchedule" in taints(u, "node-1"), 15,
             "the unreachable taint")
    assert ready_nodes(u) == {"node-0", "node-2"}
    assert "x509: certificate has expired or is not yet valid" in u.logs("apiserver")
    assert re.search(r'Failed to update lease" err="Unauthorized"', kubelet_log(u, "node-1"))
    listed = fault(u, "list").stdout
    assert re.search(r"^approver-off\s+-", listed, re.M), listed
    assert re.search(r"^expire-cert\s+node-1\s+\S+\s+NotAfter", listed, re.M), listed

    # The approver back: the node's own CSR is approved and signed, the
    # kubelet rotates onto it and the node comes back.
    fault(u, "approver", "on")
    wait_for(lambda: "node-1" in ready_nodes(u), 60, "node-1 Ready again")
    # cube up's console told it as it happened.
    wait_for(lambda: re.search(r"^  \d\d:\d\d:\d\d  CSR\s+Approved,Issued\s+csr-\w+\s+"
                               r"system:node:node-1 ", u.output(), re.M), 10,
             "the CSR on the console")
    assert cert_file(u.data, "node-1") != now
    assert "approver-off" not in fault(u, "list").stdout
    assert "No faults in effect." in fault(u, "clear").stdout
    assert fault(u, "list").stdout.strip() == "No faults in effect."
    assert u.stop() == 0


def test_partition_wrong_ca_and_rotation_off(cluster, run):
    u = cluster
    fault(u, "partition", "node-0")
    wait_for(lambda: ready_status(u, "node-0") == "Unknown", 30, "node-0 Ready=Unknown")
    wait_for(lambda: re.search(r"^  \d\d:\d\d:\d\d  Normal\s+NodeNotReady\s+node/node-0\s+Node "
                               r"node-0 status is now: NodeNotReady$", u.output(), re.M), 10,
             "the node controller's event on the console")
    assert "connect: network is unreachable" in kubelet_log(u, "node-0")
    fault(u, "heal", "node-0")
    wait_for(lambda: "node-0" in ready_nodes(u), 30, "node-0 Ready after heal")

    # A certificate from a CA the cluster does not trust: 401 for every call.
    fault(u, "wrong-ca", "node-2")
    bad = run("openssl", "verify", "-CAfile", u.data / "pki" / "ca.crt",
              cert_file(u.data, "node-2"), check=False)
    assert bad.returncode != 0, bad.stdout
    wait_for(lambda: ready_status(u, "node-2") == "Unknown", 30, "node-2 Ready=Unknown")
    assert "x509: certificate signed by unknown authority" in u.logs("apiserver")

    # rotateCertificates: false, as the runbook's grep shows it.
    fault(u, "disable-rotation", "node-1")
    conf = u.data / "nodes" / "node-1" / "config.yaml"
    assert "rotateCertificates: false" in run("grep", "-i", "rotate", conf).stdout
    wait_for(lambda: "Restarting kubelet" in kubelet_log(u, "node-1"), 10, "a kubelet restart")
    listed = fault(u, "list").stdout
    for row in ("partition", "wrong-ca", "disable-rotation"):
        assert (row == "partition") != bool(re.search(rf"^{row}\s", listed, re.M)), listed

    out = fault(u, "clear").stdout
    assert "node-2: client certificate" in out and "rotateCertificates: true" in out, out
    assert "rotateCertificates: true" in conf.read_text()
    run("openssl", "verify", "-CAfile", u.data / "pki" / "ca.crt", cert_file(u.data, "node-2"))
    wait_for(lambda: ready_nodes(u) == set(NODES), 40, "3 Ready nodes after clear")
    assert u.stop() == 0


def test_revoked_autoapprove_and_denied_csrs(cluster, run):
    u = cluster
    out = fault(u, "revoke-autoapprove").stdout
    assert "kubeadm:node-autoapprove-certificate-rotation deleted" in out, out
    gone = u.kubectl("get", "clusterrolebinding", "kubeadm:node-autoapprove-bootstrap",
                     check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr, gone.stderr
    # No binding: the approver's SubjectAccessReview says no, so the
    # rotation CSR stays Pending — until deny-csrs's process denies it.
    fault(u, "deny-csrs")
    fault(u, "expire-cert", "node-0", "--in", "60s")
    denied = wait_for(lambda: [r for r in csr_rows(u) if "system:node:node-0" in r and
                               "Denied" in r], 20, "node-0's CSR Denied")
    name = denied[0].split()[0]
    csr = json.loads(u.kubectl("get", "csr", name, "-o", "json").stdout)
    cond = csr["status"]["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("Denied", "CubeFaultDeny"), cond
    assert "Denied CSR" in (u.data / "logs" / "fault-deny-csrs.log").read_text()

    out = fault(u, "clear").stdout
    assert "kubeadm:node-autoapprove-bootstrap created" in out and "stopped" in out, out
    u.kubectl("get", "clusterrolebinding", "kubeadm:node-autoapprove-bootstrap",
              "kubeadm:node-autoapprove-certificate-rotation")
    binding = json.loads(u.kubectl("get", "clusterrolebinding",
                                   "kubeadm:node-autoapprove-certificate-rotation",
                                   "-o", "json").stdout)
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:nodes"}], binding
    assert u.stop() == 0


def test_clock_skew_restart_and_errors(cluster, run, cube, tmp):
    u = cluster
    # 400 days ahead the node finds the API server's certificate expired:
    # Go's words, which the runbook greps for.
    fault(u, "clock-skew", "node-1", "400d")
    wait_for(lambda: "tls: failed to verify certificate: x509: certificate has expired or is "
                     "not yet valid: current time" in kubelet_log(u, "node-1"),
             30, "node-1's x509 error")
    wait_for(lambda: ready_status(u, "node-1") == "Unknown", 30, "node-1 Ready=Unknown")
    assert "clock 400d ahead" in fault(u, "list").stdout
    fault(u, "clear")
    wait_for(lambda: "node-1" in ready_nodes(u), 60, "node-1 Ready after clear")

    # expire-all: every node's certificate replaced; stop-kubelet: its
    # kubelet stops and stays stopped until clear starts it.
    before = {n: cert_file(u.data, n) for n in NODES}
    fault(u, "expire-all", "--in", "1h")
    assert all(cert_file(u.data, n) != before[n] for n in NODES)
    fault(u, "stop-kubelet", "node-0")
    assert '"Stopping kubelet" node="node-0"' in kubelet_log(u, "node-0")
    listed = fault(u, "list").stdout
    assert len(re.findall(r"^expire-cert\s", listed, re.M)) == 3, listed
    assert re.search(r"^stop-kubelet\s+node-0", listed, re.M), listed
    out = fault(u, "clear").stdout
    assert "node-0: kubelet started" in out, out
    assert all(cert_file(u.data, n) == before[n] for n in NODES)
    wait_for(lambda: ready_nodes(u) == set(NODES), 60, "3 Ready nodes after clear")

    out = run(cube, "restart", "--data-dir", u.data, "node-2", "controller-manager").stdout
    assert "node-2: kubelet restarted" in out and "controller-manager restarted" in out, out
    assert "Restarting kubelet" in kubelet_log(u, "node-2")

    bad = fault(u, "no-such-fault", check=False)
    assert bad.returncode == 2 and 'unknown fault "no-such-fault"' in bad.stderr, bad.stderr
    bad = fault(u, "expire-cert", check=False)
    assert bad.returncode == 2 and "expire-cert needs NODE" in bad.stderr, bad.stderr
    bad = fault(u, "partition", "node-9", check=False)
    assert bad.returncode == 1 and 'no kubelet for node "node-9"' in bad.stderr, bad.stderr
    bad = run(cube, "fault", "--data-dir", tmp / "nowhere", "partition", "node-0", check=False)
    assert bad.returncode == 1 and "no cube up is running there" in bad.stderr, bad.stderr
    # A second `cube up` on the same data dir is refused while one runs.
    second = run(cube, "up", "--data-dir", u.data, "--port", "0", check=False, timeout=30)
    assert second.returncode == 1 and "another cube is running" in second.stderr, second.stderr
    assert u.stop() == 0
