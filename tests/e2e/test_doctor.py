"""`cube doctor` on a running `cube up`: each fault `cube fault` injects is
named with its root cause, and the command the doctor suggests is run as a
user would run it (plan 1, `cube restart`, `kubectl certificate approve`,
`kubectl create clusterrolebinding`, `cube fault heal`) and brings the node
back; a healthy cluster is called healthy, and the exit status is the worst
finding (0 healthy, 1 warnings, 3 critical).

Timings are compressed as in test_fault: Leases renewed every second, a
6 s grace period.
"""

import json
import os
import re


from test_fault import cluster, fault, ready_status  # noqa: F401 (the fixture)
from test_up import NODES, ready_nodes, wait_for


def doctor(u, *args):
    """(exit status, findings by object) of `cube doctor -o json`."""
    p = u.run(u.cube, "doctor", "--data-dir", u.data, "-o", "json", *args, check=False,
              timeout=60)
    assert p.returncode in (0, 1, 3), p.stderr
    report = json.loads(p.stdout)
    return p.returncode, report, {(f["object"], f["check"]): f for f in report["findings"]}


def shell(u, command):
    """A suggested fix, run as the user would: cube and kubectl on PATH,
    KUBECONFIG the cluster's."""
    env = {"PATH": f"{os.path.dirname(u.cube)}:{os.environ['PATH']}",
           "KUBECONFIG": u.data / "admin.conf"}
    return u.run("sh", "-c", command, env=env, timeout=90)


def fix_for(finding, word):
    fixes = [f for f in finding["fix"] if word in f]
    assert fixes, finding
    cmd = fixes[0]
    return cmd.split(": ", 1)[1] if cmd.startswith("plan 1: ") else cmd


def test_healthy_then_expiring_certificate(cluster):
    u = cluster
    rc, report, found = doctor(u)
    assert rc == 0 and report["healthy"] and not found, report
    assert report["summary"]["ready"] == 3
    # The same through the API alone, and as text.
    p = u.run(u.cube, "doctor", "--kubeconfig", u.data / "admin.conf", check=False)
    assert p.returncode == 0, p.stdout
    assert p.stdout.startswith("healthy: 3/3 nodes Ready, 0 CSRs pending"), p.stdout

    # Rotation off and 10 days left: a warning 30 days ahead, exit 1.
    fault(u, "disable-rotation", "node-2")
    fault(u, "expire-cert", "node-2", "--in", "10d")
    rc, report, found = doctor(u)
    assert rc == 1, report
    f = found[("node/node-2", "CertificateExpiring")]
    # 9d23h59m…: Kubernetes' short human duration says 9d.
    assert f["severity"] == "warning" and f["title"] == "client certificate expires in 9d", f
    assert "rotation is off (rotateCertificates: false)" in f["cause"], f
    assert any("rotateCertificates: true/" in x for x in f["fix"]), f
    # --warn-within 5d: outside the window, healthy again.
    rc, report, _ = doctor(u, "--warn-within", "5d")
    assert rc == 0, report
    assert u.stop() == 0


def test_expired_foreign_and_partitioned(cluster):
    u = cluster
    fault(u, "disable-rotation", "node-0")
    fault(u, "expire-cert", "node-0", "--in", "2s")
    fault(u, "wrong-ca", "node-1")
    fault(u, "partition", "node-2")
    for n in NODES:
        wait_for(lambda: ready_status(u, n) == "Unknown", 30, f"{n} Ready=Unknown")
    rc, report, found = doctor(u)
    assert rc == 3, report

    f = found[("node/node-0", "NodeNotReady")]
    assert f["title"] == "client certificate expired", f
    assert re.match(r"node-0: client certificate expired \d+s ago; rotation is off", f["cause"])
    assert any("rotateCertificates: false" in e for e in f["evidence"]), f
    assert any("(expired" in e for e in f["evidence"]), f
    f1 = found[("node/node-1", "NodeNotReady")]
    assert f1["title"] == "client certificate from another CA", f1
    assert "signed by CN=foreign-ca" in f1["cause"], f1
    f2 = found[("node/node-2", "NodeNotReady")]
    assert f2["title"] == "the API server is unreachable from the node", f2
    assert "connect: network is unreachable" in f2["cause"], f2
    z = found[("zone/(none)", "ZoneDisruption")]
    assert z["title"] == "FullDisruption" and "master disruption mode" in z["cause"], z

    # The suggested commands, as given.
    plan1 = fix_for(f, "plan 1")
    assert plan1 == (f"rm -f {u.data}/nodes/node-0/pki/kubelet-client-current.pem && "
                     f"cube restart --data-dir {u.data} node-0"), plan1
    shell(u, fix_for(f, "sed -i"))
    shell(u, plan1)
    shell(u, fix_for(f1, "plan 1"))
    assert f2["fix"][0].endswith(f"(cube fault --data-dir {u.data} heal node-2)"), f2
    shell(u, re.search(r"\((cube fault .*)\)$", f2["fix"][0]).group(1))
    wait_for(lambda: ready_nodes(u) == set(NODES), 60, "every node Ready after the fixes")
    rc, report, found = doctor(u)
    assert rc == 0, report
    assert u.stop() == 0


def test_stopped_approver_off_and_clock(cluster):
    u = cluster
    fault(u, "stop-kubelet", "node-0")
    fault(u, "approver", "off")
    fault(u, "expire-cert", "node-1", "--in", "3s")
    fault(u, "clock-skew", "node-2", "400d")
    for n in ("node-0", "node-1"):
        wait_for(lambda: ready_status(u, n) == "Unknown", 30, f"{n} Ready=Unknown")
    rc, report, found = doctor(u, "--csr-pending-after", "1s")
    assert rc == 3, report

    f0 = found[("node/node-0", "NodeNotReady")]
    assert f0["title"] == "the kubelet is not running", f0
    assert f0["fix"] == [f"cube restart --data-dir {u.data} node-0"], f0
    f1 = found[("node/node-1", "NodeNotReady")]
    assert f1["title"] == "client certificate expired", f1
    assert "--controllers=*,-csrapproving" in f1["cause"], f1
    m = re.search(r"its CSR (csr-\w+) is Pending", f1["cause"])
    assert m, f1
    assert found[(f"csr/{m.group(1)}", "CSRPending")]["severity"] == "warning"
    clock = [f for (obj, _), f in found.items() if obj == "node/node-2"]
    assert clock and "clock" in clock[0]["title"] and "ahead" in clock[0]["title"] + \
        clock[0]["cause"], clock

    shell(u, f0["fix"][0])
    shell(u, fix_for(f1, "kubectl certificate approve"))
    wait_for(lambda: {"node-0", "node-1"} <= ready_nodes(u), 60, "node-0 and node-1 Ready")
    assert u.stop() == 0


def test_bindings_revoked_and_csrs_denied(cluster):
    u = cluster
    fault(u, "revoke-autoapprove")
    (u.data / "nodes" / "node-0" / "pki" / "kubelet-client-current.pem").unlink()
    u.run(u.cube, "restart", "--data-dir", u.data, "node-0")
    wait_for(lambda: ready_status(u, "node-0") == "Unknown", 30, "node-0 Ready=Unknown")
    rc, report, found = doctor(u, "--csr-pending-after", "1s")
    assert rc == 3, report
    b = found[("clusterrolebindings", "AutoApproveBindingMissing")]
    assert len(b["evidence"]) == 2, b
    f = found[("node/node-0", "NodeNotReady")]
    assert f["title"] == "no client certificate", f
    assert re.search(r"no RBAC binding lets system:bootstrap:\w+ \(groups .*\) create "
                     r"certificatesigningrequests/nodeclient", f["cause"]), f
    # kubeadm's binding again: the approver's next try approves it.
    shell(u, fix_for(f, "kubeadm:node-autoapprove-bootstrap"))
    wait_for(lambda: "node-0" in ready_nodes(u), 60, "node-0 Ready after the binding")

    # Renewals denied (the rotation binding still gone, so the approver
    # does not race the denier).
    fault(u, "deny-csrs")
    fault(u, "expire-cert", "node-1", "--in", "2m")
    wait_for(lambda: ("node/node-1", "CSRDenied") in doctor(u)[2], 30, "node-1's CSR denied")
    rc, report, found = doctor(u)
    d = found[("node/node-1", "CSRDenied")]
    assert "reason CubeFaultDeny" in d["cause"], d
    e = found[("node/node-1", "CertificateExpiring")]
    assert "rotation is overdue" in e["cause"] and "was Denied (reason CubeFaultDeny)" in \
        e["cause"], e
    shell(u, fix_for(b, "kubeadm:node-autoapprove-certificate-rotation"))
    fault(u, "clear")
    assert u.stop() == 0
