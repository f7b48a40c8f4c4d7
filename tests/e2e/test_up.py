"""`cube up`: a whole cluster in one process, driven with kubectl and openssl.

The acceptance of issue 4: with a short certificate lifetime every node
bootstraps (node-csr-* Approved,Issued), comes Ready within seconds, rotates
its client certificate (a new CSR, a new dated file, the symlink moved, a new
validity) while staying Ready the whole time; and `cube up` again on the same
data dir resumes the same cluster.
"""

import os
import re
import signal
import subprocess
import time

import pytest

NODES = ("node-0", "node-1", "node-2")


class Up:
    """A running `cube up` on a free port, with kubectl pointed at it."""

    def __init__(self, cube, data, run, *extra):
        self.cube, self.data, self.run = cube, data, run
        self.log = open(data.parent / f"{data.name}.log", "ab")
        self.proc = subprocess.Popen(
            [cube, "up", "--nodes", "3", "--data-dir", str(data), "--port", "0", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)

    def kubectl(self, *args, check=True):
        return self.run("kubectl", "--kubeconfig", self.data / "admin.conf", *args,
                        check=check, timeout=30)

    def output(self):
        self.log.flush()
        return (self.data.parent / f"{self.data.name}.log").read_text(errors="replace")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=30)
        self.log.close()
        return rc


def wait_for(fn, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}", pytrace=False)


def ready_nodes(up):
    out = up.kubectl("get", "nodes", "--no-headers", check=False).stdout
    return {l.split()[0] for l in out.splitlines() if len(l.split()) > 1 and l.split()[1] == "Ready"}


def cert_file(data, node):
    return os.path.realpath(data / "nodes" / node / "pki" / "kubelet-client-current.pem")


def not_after(run, path):
    out = run("openssl", "x509", "-in", path, "-noout", "-enddate").stdout
    return out.strip().split("=", 1)[1]


@pytest.fixture
def up(cube, tmp, run):
    started = []

    def _start(*extra, data=None):
        u = Up(cube, data or tmp / "cluster", run, *extra)
        started.append(u)
        return u

    yield _start
    for u in started:
        if u.proc.poll() is None:
            u.stop()


def test_up_nodes_ready_and_bootstrap_csrs_issued(up, run):
    u = up()
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    csrs = u.kubectl("get", "csr", "--no-headers").stdout.splitlines()
    boot = [l for l in csrs if l.startswith("node-csr-")]
    assert len(boot) == 3, csrs
    assert all("Approved,Issued" in l for l in boot), csrs
    assert all("system:bootstrap:" in l for l in boot), csrs
    wait_for(lambda: "export KUBECONFIG=" in u.output(), 10, "the KUBECONFIG line")
    for node in NODES:
        pki = u.data / "nodes" / node / "pki"
        link = pki / "kubelet-client-current.pem"
        assert link.is_symlink(), f"{link} is not a symlink"
        target = os.readlink(link)
        assert os.path.isabs(target) and re.search(
            r"kubelet-client-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.pem$", target), target
        assert oct(os.stat(target).st_mode & 0o777) == "0o600"
        subject = run("openssl", "x509", "-in", link, "-noout", "-subject").stdout
        assert f"CN = system:node:{node}" in subject, subject
        run("openssl", "verify", "-CAfile", u.data / "pki" / "ca.crt", link)
    assert u.stop() == 0


def test_up_rotates_every_node_while_staying_ready(up, run):
    # 2m of TTL: with the signer's 5-minute backdate the lifetime is 7m, so
    # the 70-90 % deadline falls within 80 s of issuance.
    u = up("--cert-ttl", "2m")
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    first = {n: (cert_file(u.data, n), not_after(run, cert_file(u.data, n))) for n in NODES}
    not_ready_seen = []
    deadline = time.monotonic() + 240
    rotated = set()
    while rotated != set(NODES) and time.monotonic() < deadline:
        ready = ready_nodes(u)
        if ready != set(NODES):
            not_ready_seen.append((time.monotonic(), sorted(ready)))
        for n in NODES:
            path = cert_file(u.data, n)
            if path != first[n][0] and not_after(run, path) != first[n][1]:
                rotated.add(n)
        time.sleep(1)
    assert rotated == set(NODES), f"rotated only {sorted(rotated)} in 240 s"
    assert not not_ready_seen, f"nodes were not all Ready at: {not_ready_seen}"
    # Rotation CSRs are made by the nodes themselves (generateName csr-).
    csrs = u.kubectl("get", "csr", "--no-headers").stdout.splitlines()
    own = [l for l in csrs if l.startswith("csr-")]
    assert len(own) >= 3 and all("system:node:" in l and "Approved,Issued" in l for l in own), csrs
    for n in NODES:
        dated = sorted(p.name for p in (u.data / "nodes" / n / "pki").glob("kubelet-client-2*.pem"))
        assert len(dated) >= 2, f"{n}: old dated files are kept, new ones added: {dated}"
    assert u.stop() == 0


def test_up_resumes_the_same_cluster(up, run, tmp):
    data = tmp / "cluster"
    u = up(data=data)
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    u.kubectl("create", "configmap", "keep-me", "--from-literal=a=b")
    uids = u.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.uid}").stdout
    ca = (data / "pki" / "ca.crt").read_bytes()
    assert u.stop() == 0
    again = up(data=data)
    wait_for(lambda: ready_nodes(again) == set(NODES), 30, "3 Ready nodes after resume")
    assert again.kubectl("get", "configmap", "keep-me", "-o", "jsonpath={.data.a}").stdout == "b"
    assert again.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.uid}").stdout == uids
    assert (data / "pki" / "ca.crt").read_bytes() == ca
    # No second bootstrap: the nodes kept their certificates.
    boot = [l for l in again.kubectl("get", "csr", "--no-headers").stdout.splitlines()
            if l.startswith("node-csr-")]
    assert len(boot) == 3, boot
    assert again.stop() == 0
