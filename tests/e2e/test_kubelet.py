"""End-to-end tests of `cube kubelet` (issue 4).

A real `cube apiserver` runs over a `cube pki init` cluster directory and a
real `cube kubelet` bootstraps against it with the cluster's bootstrap-token
kubeconfig. The CSR controllers are the real `cube controller-manager` when
the binary has it; otherwise this file plays them itself — approve with
`kubectl certificate approve`, sign with `cube certs sign-csr`, PUT the
certificate into .../status.

What a user would check is checked the way they would check it: `kubectl
get nodes`, `ls -l` of the certificate directory, `openssl x509 -dates`,
`grep -i "certificate\\|tls\\|x509"` on the kubelet's log — and the seeds'
recovery plans: (1) delete kubelet-client-current.pem and restart, (2) sign a
certificate by hand with openssl and restart. Expiry is rehearsed with a
certificate signed for a few seconds, as upstream 1.32 behaves: without
rotation the kubelet keeps presenting it, its heartbeats stop and it keeps
running until a person acts; with rotation and no approver it exits with
status 1 after --exit-after; with --self-heal it re-bootstraps in place.
"""

import base64
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

from conftest import stop_process
import yaml

KUBECTL = "/usr/bin/kubectl"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
GREP = re.compile(r"certificate|tls|x509", re.I)


# ------------------------------------------------------------ the kubelet --

class Kubelet:
    """One `cube kubelet` process with its own root dir and log."""

    def __init__(self, cube, server, root, name, *extra):
        self.cube, self.server, self.root, self.name = str(cube), server, root, name
        self.pki = root / "pki"
        self.kubeconfig = root / "kubelet.conf"
        self.log_path = root.parent / f"{root.name}.log"
        self.extra = [str(a) for a in extra]
        self.proc = None

    def argv(self, *more):
        return [self.cube, "kubelet", "--hostname-override", self.name,
                "--root-dir", str(self.root), "--node-ip", "127.0.0.1",
                "--address", "127.0.0.1", "--port", "0", "-v", "2",
                *self.extra, *more]

    def start(self, *more):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(*more), env=self.server.env,
                                     stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()
        return self

    def stop(self, timeout=20):
        return stop_process(self.proc, "cube kubelet", timeout=timeout)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        return self.log_path.read_text(errors="replace") \
            if self.log_path.exists() else ""

    def tail(self, n=4000):
        return f"--- {self.log_path} ---\n{self.log()[-n:]}"


# --------------------------------------------------------- the controllers --

class ControllerManager:
    """The real `cube controller-manager`, signing with the cluster CA."""

    def __init__(self, cube, server):
        self.server = server
        conf = server.dir / "controller-manager.conf"
        conf.write_text(re.sub(r"(?m)^(\s*server:\s*).*$", rf"\g<1>{server.url}",
                               conf.read_text()))
        self.log_path = server.dir / "controller-manager.log"
        self.port = free_port()  # /healthz and /metrics
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(cube), "controller-manager", "--kubeconfig", str(conf),
             "--cluster-signing-cert-file", str(server.pki / "ca.crt"),
             "--cluster-signing-key-file", str(server.pki / "ca.key"), "-v", "2",
             "--use-service-account-credentials", "--leader-elect=false",
             "--secure-port", str(self.port), "--bind-address", "127.0.0.1",
             "--client-ca-file", str(server.pki / "ca.crt"),
             # compressed node lifecycle timings: NotReady within seconds
             "--node-monitor-period", "1s", "--node-monitor-grace-period", "15s"],
            env=server.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)


class PythonController:
    """The CSR controllers played from here: every kubelet CSR without a
    certificate is approved with kubectl and signed with `cube certs
    sign-csr`, the certificate PUT into .../status. only_bootstrap: leave
    the nodes' own renewals Pending, as when kubeadm's
    node-autoapprove-certificate-rotation binding is gone."""

    def __init__(self, cube, server, work, only_bootstrap=False, duration=None):
        self.cube, self.server, self.work = str(cube), server, work
        self.only_bootstrap, self.duration = only_bootstrap, duration
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stopping.wait(0.2):
            try:
                self.pass_once()
            except Exception:  # the server may be restarting; try again
                pass

    def pass_once(self):
        items = self.server.request("GET", CSRS).json().get("items", [])
        for csr in items:
            name = csr["metadata"]["name"]
            if csr["spec"].get("signerName") != \
                    "kubernetes.io/kube-apiserver-client-kubelet":
                continue
            if csr.get("status", {}).get("certificate"):
                continue
            if self.only_bootstrap and \
                    not csr["spec"]["username"].startswith("system:bootstrap:"):
                continue
            types = {c["type"] for c in csr.get("status", {}).get("conditions", [])}
            if "Approved" not in types:
                subprocess.run([KUBECTL, "--kubeconfig", str(self.server.admin_conf),
                                "certificate", "approve", name],
                               capture_output=True, timeout=30)
                continue
            req, crt = self.work / f"{name}.csr", self.work / f"{name}.crt"
            req.write_bytes(base64.b64decode(csr["spec"]["request"]))
            subprocess.run([self.cube, "certs", "sign-csr", "--ca-dir",
                            str(self.server.dir), "--in", str(req), "--out", str(crt),
                            *(["--duration", self.duration] if self.duration else [])],
                           capture_output=True, check=True, timeout=30)
            csr.setdefault("status", {})["certificate"] = \
                base64.b64encode(crt.read_bytes()).decode()
            self.server.request("PUT", f"{CSRS}/{name}/status", body=csr)

    def stop(self):
        self.stopping.set()
        self.thread.join(10)


# ---------------------------------------------------------------- fixtures --

@pytest.fixture(scope="module")
def cluster(cube, make_apiserver, tmp_path_factory):
    """An API server and the CSR controllers, shared by this module's tests
    (each test uses its own node names)."""
    base = tmp_path_factory.mktemp("kubelet")
    server = make_apiserver(base / "apiserver")
    help_text = subprocess.run([str(cube), "--help"], capture_output=True,
                               text=True).stdout
    # CUBE_E2E_SIGNER=python plays the controllers from here even when the
    # binary has them (to exercise both paths).
    if "controller-manager" in help_text and \
            os.environ.get("CUBE_E2E_SIGNER") != "python":
        controllers = ControllerManager(cube, server)
    else:
        work = base / "signer"
        work.mkdir()
        controllers = PythonController(cube, server, work)
    yield server
    controllers.stop()
    rc = server.stop()
    assert rc in (0, None), f"cube apiserver exited {rc}\n{server.log()[-3000:]}"


@pytest.fixture(scope="module")
def stingy(cube, make_apiserver, tmp_path_factory):
    """An API server whose only approver signs bootstrap CSRs for 25 s and
    leaves every renewal Pending: the seeds' "CSR not auto-approved"."""
    base = tmp_path_factory.mktemp("stingy")
    server = make_apiserver(base / "apiserver")
    work = base / "signer"
    work.mkdir()
    controller = PythonController(cube, server, work, only_bootstrap=True, duration="25s")
    yield server
    controller.stop()
    server.stop()


@pytest.fixture
def kubelets(cube, cluster, tmp):
    """kubelets(name, *extra) -> a Kubelet (not started) with the bootstrap
    kubeconfig; all are stopped at teardown."""
    made = []

    def _make(name, *extra, bootstrap=True, server=None):
        server = server or cluster
        args = ["--bootstrap-kubeconfig", server.bootstrap_conf] if bootstrap else []
        k = Kubelet(cube, server, tmp / name, name, *args, *extra)
        made.append(k)
        return k
    yield _make
    for k in made:
        k.stop()


@pytest.fixture
def kubectl(run, cluster):
    def _kubectl(*args, check=True, input=None):
        return run(KUBECTL, "--kubeconfig", cluster.admin_conf, *args,
                   check=check, input=input, timeout=30)
    return _kubectl


# ----------------------------------------------------------------- helpers --

def node_status(kubectl, name):
    """The STATUS column of `kubectl get nodes` for name, or None."""
    out = kubectl("get", "nodes", "--no-headers", check=False).stdout
    for line in out.splitlines():
        cols = line.split()
        if cols and cols[0] == name:
            return cols[1]
    return None


def wait_ready(kubectl, wait_until, kubelet, timeout=40):
    def ready():
        if not kubelet.running():
            pytest.fail(f"kubelet exited with {kubelet.proc.returncode}\n"
                        f"{kubelet.tail()}", pytrace=False)
        return node_status(kubectl, kubelet.name) == "Ready"
    wait_until(ready, timeout, lambda: f"node {kubelet.name} Ready\n{kubelet.tail()}")


def renew_time(server, name):
    r = server.request("GET", f"{LEASES}/{name}")
    return r.json()["spec"]["renewTime"] if r.status == 200 else None


def wait_lease_moves(server, wait_until, name, timeout=20):
    first = renew_time(server, name)
    wait_until(lambda: renew_time(server, name) not in (None, first), timeout,
               f"the Lease of {name} to be renewed")


def x509_dates(run, path):
    out = run("openssl", "x509", "-in", path, "-noout", "-dates").stdout
    fields = dict(line.split("=", 1) for line in out.splitlines())

    def parse(s):
        return datetime.strptime(s.strip(), "%b %d %H:%M:%S %Y %Z").replace(
            tzinfo=timezone.utc)
    return parse(fields["notBefore"]), parse(fields["notAfter"])


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def short_lived_kubeconfig(cluster, kubelet, seconds):
    """A kubeconfig for the node with a certificate that expires in seconds
    (signed with cube certs, as the seeds' plan 2 does with openssl)."""
    crt, key = cluster.node_identity(kubelet.name, duration=f"{seconds}s")
    kubelet.root.mkdir(parents=True, exist_ok=True)
    return cluster.write_kubeconfig(kubelet.root / "short.conf", crt, key)


# ------------------------------------------------------------------- tests --

def test_help_lists_upstream_flags(cube, run):
    out = run(cube, "kubelet", "--help").stdout
    for flag in ("--hostname-override", "--kubeconfig", "--bootstrap-kubeconfig",
                 "--cert-dir", "--root-dir", "--config", "--node-labels",
                 "--rotate-certificates", "--rotate-server-certificates",
                 "--node-ip", "--self-heal", "--hollow-nodes",
                 "--hollow-name-prefix", "--pod-start-delay", "--port",
                 "--exit-after"):
        assert flag in out, flag
    assert "kubelet" in run(cube, "--help").stdout
    bad = run(cube, "kubelet", "--no-such-flag", check=False)
    assert bad.returncode == 2 and "--no-such-flag" in bad.stderr


def test_bootstrap_store_and_ready(cluster, kubelets, kubectl, wait_until, run):
    k = kubelets("kl-boot", "--port", "0").start()
    wait_ready(kubectl, wait_until, k)

    # The store, as `ls -l` shows it: a dated 0600 file and the symlink.
    listing = run("ls", "-l", k.pki).stdout
    assert re.search(r"kubelet-client-current\.pem -> \S+/kubelet-client-"
                     r"\d{4}(-\d\d){5}\.pem", listing), listing
    link = k.pki / "kubelet-client-current.pem"
    target = os.readlink(link)
    assert os.path.isabs(target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert not (k.pki / "kubelet-client.key.tmp").exists()
    nb, na = x509_dates(run, link)
    assert nb < datetime.now(timezone.utc) < na
    subject = run("openssl", "x509", "-in", link, "-noout", "-subject").stdout
    assert "CN = system:node:kl-boot" in subject and "O = system:nodes" in subject
    run("openssl", "verify", "-CAfile", cluster.ca, link)

    # The kubeconfig it wrote points at the store, as upstream's does.
    conf = yaml.safe_load(k.kubeconfig.read_text())
    user = conf["users"][0]
    assert user["name"] == "default-auth"
    assert user["user"]["client-certificate"] == str(link)
    assert user["user"]["client-key"] == str(link)
    assert conf["contexts"][0]["context"]["namespace"] == "default"
    assert conf["current-context"] == "default-context"

    # The bootstrap CSR: node-csr-..., asked for by the bootstrap token.
    csrs = [l for l in kubectl("get", "csr", "--no-headers").stdout.splitlines()
            if l.startswith("node-csr-") and "Approved,Issued" in l]
    assert any("system:bootstrap:" in l and
               "kubernetes.io/kube-apiserver-client-kubelet" in l for l in csrs), csrs

    # The Node as upstream's kubelet writes it, and its Lease.
    node = json.loads(kubectl("get", "node", "kl-boot", "-o", "json").stdout)
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "kl-boot"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"][0]
    assert (ready["reason"], ready["message"]) == ("KubeletReady",
                                                   "kubelet is posting ready status")
    assert re.fullmatch(r"\S+T\S+\.\d{6}Z", renew_time(cluster, "kl-boot"))
    wait_lease_moves(cluster, wait_until, "kl-boot")


def test_config_file_labels_and_taints(cluster, kubelets, kubectl, wait_until, tmp):
    cfg = tmp / "kubelet-config.yaml"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "nodeLeaseDurationSeconds": 20, "maxPods": 42,
        "nodeStatusUpdateFrequency": "5s",
        "registerWithTaints": [{"key": "dedicated", "value": "infra",
                                "effect": "NoSchedule"}]}))
    k = kubelets("kl-config", "--config", cfg, "--node-labels",
                 "team=blue,tier=infra").start()
    wait_ready(kubectl, wait_until, k)
    node = json.loads(kubectl("get", "node", "kl-config", "-o", "json").stdout)
    assert node["metadata"]["labels"]["team"] == "blue"
    assert node["metadata"]["labels"]["tier"] == "infra"
    assert {"key": "dedicated", "value": "infra", "effect": "NoSchedule"} in \
        node["spec"]["taints"]
    assert node["status"]["capacity"]["pods"] == "42"
    lease = cluster.request("GET", f"{LEASES}/kl-config").json()
    assert lease["spec"]["leaseDurationSeconds"] == 20
    bad = tmp / "bad.yaml"
    bad.write_text("kind: KubeletConfiguration\nnodeStatusUpdateFrequency: soon\n")
    k2 = kubelets("kl-badconfig", "--config", bad).start()
    assert k2.proc.wait(20) == 1
    assert "nodeStatusUpdateFrequency" in k2.log()


def test_pod_runs_and_is_deleted(cluster, kubelets, kubectl, wait_until):
    k = kubelets("kl-pods").start()
    wait_ready(kubectl, wait_until, k)
    kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-kl", "namespace": "default"},
        "spec": {"nodeName": "kl-pods",
                 "containers": [{"name": "nginx", "image": "nginx"}]}}))

    def running():
        out = kubectl("get", "pod", "web-kl", "--no-headers", check=False).stdout
        return "1/1" in out and "Running" in out
    wait_until(running, 20, lambda: "pod web-kl Running\n" + k.tail())
    pod = json.loads(kubectl("get", "pod", "web-kl", "-o", "json").stdout)
    assert pod["status"]["podIP"].startswith("10.244.")
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("cube://")
    kubectl("delete", "pod", "web-kl", "--wait=false")
    wait_until(lambda: "NotFound" in kubectl("get", "pod", "web-kl",
                                             check=False).stderr,
               20, lambda: "pod web-kl gone\n" + k.tail())


def test_https_server(cluster, kubelets, kubectl, wait_until, run):
    port = free_port()
    k = kubelets("kl-https", "--rotate-certificates").start("--port", str(port))
    wait_ready(kubectl, wait_until, k)
    url = f"https://127.0.0.1:{port}"
    assert run("curl", "-sk", f"{url}/healthz").stdout == "ok"
    metrics = run("curl", "-sk", f"{url}/metrics").stdout
    ttl = re.search(r"(?m)^kubelet_certificate_manager_client_ttl_seconds (\S+)$", metrics)
    assert ttl and 0 < float(ttl.group(1)) <= 365 * 86400, metrics
    assert "kubelet_certificate_manager_client_expiration_renew_errors 0" in metrics
    pods = json.loads(run("curl", "-sk", f"{url}/pods").stdout)
    assert pods["kind"] == "PodList"
    # Without serverTLSBootstrap the server uses a self-signed kubelet.crt,
    # and serves that one: its pair, picked at the handshake.
    assert (k.pki / "kubelet.crt").exists() and (k.pki / "kubelet.key").exists()

    def served(port):
        s = run("openssl", "s_client", "-connect", f"127.0.0.1:{port}", input="",
                check=False).stdout
        m = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", s, re.S)
        assert m, s[-2000:]
        return m.group(0)
    assert served(port) == (k.pki / "kubelet.crt").read_text().strip()
    # The client certificate's series exist only with rotation, as upstream's.
    port2 = free_port()
    k2 = kubelets("kl-https-static").start("--port", str(port2))
    wait_ready(kubectl, wait_until, k2)
    metrics = run("curl", "-sk", f"https://127.0.0.1:{port2}/metrics").stdout
    assert "kubelet_certificate_manager_client_ttl_seconds" not in metrics
    # Two kubelets of one machine, each with its own certificate.
    assert served(port2) == (k2.pki / "kubelet.crt").read_text().strip()
    assert served(port2) != served(port)
    # ... and the serving ones only with serverTLSBootstrap.
    assert "kubelet_certificate_manager_server_ttl_seconds" not in metrics


def test_plan1_delete_current_and_restart(cluster, kubelets, kubectl, wait_until,
                                          run):
    """Seed plan 1: rm kubelet-client-current.pem; restart; re-bootstrap."""
    k = kubelets("kl-plan1").start()
    wait_ready(kubectl, wait_until, k)
    first = (k.pki / "kubelet-client-current.pem").read_text()
    assert k.stop() == 0
    (k.pki / "kubelet-client-current.pem").unlink()
    k.start()
    wait_until(lambda: (k.pki / "kubelet-client-current.pem").exists(), 20,
               lambda: "a new kubelet-client-current.pem\n" + k.tail())
    assert (k.pki / "kubelet-client-current.pem").read_text() != first
    wait_ready(kubectl, wait_until, k)
    assert "Using bootstrap kubeconfig" in k.log()
    wait_lease_moves(cluster, wait_until, "kl-plan1")


def test_plan2_openssl_signed_certificate(cluster, kubelets, kubectl, wait_until,
                                          run, tmp):
    """Seed plan 2: a certificate signed by hand with openssl x509 -req -CA."""
    k = kubelets("kl-plan2").start()
    wait_ready(kubectl, wait_until, k)
    assert k.stop() == 0
    key, req, crt = tmp / "plan2.key", tmp / "plan2.csr", tmp / "plan2.crt"
    run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    run("openssl", "req", "-new", "-key", key, "-out", req,
        "-subj", "/CN=system:node:kl-plan2/O=system:nodes")
    run("openssl", "x509", "-req", "-in", req, "-CA", cluster.ca,
        "-CAkey", cluster.pki / "ca.key", "-CAcreateserial", "-days", "1",
        "-out", crt)
    current = k.pki / "kubelet-client-current.pem"
    current.unlink()
    current.write_text(crt.read_text() + key.read_text())
    current.chmod(0o600)
    k.start()
    wait_ready(kubectl, wait_until, k)
    wait_lease_moves(cluster, wait_until, "kl-plan2")
    assert "Using bootstrap kubeconfig" not in k.log().split("Kubelet version")[-1]
    nb, na = x509_dates(run, current)
    assert (na - nb).days == 1


def test_static_certificate_expires_and_kubelet_stays(cluster, kubelets, kubectl,
                                                     wait_until, run):
    """No rotation, a certificate that runs out: the kubelet keeps presenting
    it (upstream's static transport), the API server refuses it with 401 and
    logs the x509 reason, the Lease stops — and the kubelet keeps running
    past --exit-after: no watchdog without rotation. The seeds' plan 1 (a
    restart with the bootstrap kubeconfig) brings the node back."""
    k = kubelets("kl-exp", "--exit-after", "10s", bootstrap=False)
    conf = short_lived_kubeconfig(cluster, k, 20)
    k.start("--kubeconfig", conf)
    wait_ready(kubectl, wait_until, k)
    _, not_after = x509_dates(run, cluster.node_identity("kl-exp", duration="20s")[0])
    wait_until(lambda: datetime.now(timezone.utc) > not_after, 40, "the certificate to expire")
    time.sleep(1)
    frozen = renew_time(cluster, "kl-exp")
    # Well past --exit-after and two renew intervals: still running, no heartbeat.
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        assert k.running(), f"the kubelet exited with {k.proc.returncode}\n{k.tail()}"
        time.sleep(1)
    assert renew_time(cluster, "kl-exp") == frozen, "heartbeats went on"
    # The seeds' diagnosis: the node is NotReady, Unknown, tainted unreachable.
    assert node_status(kubectl, "kl-exp") == "NotReady"
    described = kubectl("describe", "node", "kl-exp").stdout
    assert re.search(r"Taints:\s+node\.kubernetes\.io/unreachable:NoSchedule", described), \
        described
    assert "NodeStatusUnknown" in described and \
        "Kubelet stopped posting node status." in described, described
    log = k.log()
    assert '"Failed to update lease" err="Unauthorized"' in log, k.tail()
    for absent in ("No valid client certificate", "exiting", "Certificate rotation detected"):
        assert absent not in log, f"{absent!r} in\n{k.tail()}"
    # The API server says why, as upstream's x509 authenticator does.
    api = cluster.log()
    assert re.search(r'"Unable to authenticate the request" err="verifying certificate SN=\d+, '
                     r'SKID=[0-9A-F:]*, AKID=[0-9A-F:]+ failed: x509: certificate has expired '
                     r'or is not yet valid: current time \S+ is after \S+"', api), api[-2000:]

    # Plan 1, as a person would: stop it, start it with the bootstrap kubeconfig.
    assert k.stop() == 0
    k.start("--kubeconfig", k.kubeconfig, "--bootstrap-kubeconfig",
            cluster.bootstrap_conf)
    wait_ready(kubectl, wait_until, k)
    wait_lease_moves(cluster, wait_until, "kl-exp")


def csrs_of(server, user):
    items = server.request("GET", CSRS).json().get("items", [])
    return [c for c in items if c["spec"]["username"] == user]


def test_rotating_kubelet_expires_without_approver_and_exits_1(stingy, kubelets,
                                                               wait_until, run):
    """Rotation on (background bootstrap, csr-* by the token), renewals never
    approved: the 25 s certificate runs out, and --exit-after later the
    kubelet exits with status 1 and upstream 1.32's line."""
    k = kubelets("kl-rot", "--rotate-certificates", "--exit-after", "20s", server=stingy)
    k.start()
    wait_until(lambda: (k.pki / "kubelet-client-current.pem").exists(), 30,
               lambda: "the bootstrap certificate\n" + k.tail())
    assert '"Client rotation is on, will bootstrap in background"' in k.log()
    boot = [c for c in stingy.request("GET", CSRS).json()["items"]
            if c["spec"]["username"].startswith("system:bootstrap:")]
    assert boot and all(c["metadata"]["name"].startswith("csr-") for c in boot), boot
    # The node asks for its renewal itself; nobody approves it.
    wait_until(lambda: csrs_of(stingy, "system:node:kl-rot"), 30,
               lambda: "the renewal CSR\n" + k.tail())
    renewal = csrs_of(stingy, "system:node:kl-rot")[0]
    assert renewal["metadata"]["name"].startswith("csr-")
    assert not renewal.get("status", {}).get("conditions")
    _, not_after = x509_dates(run, k.pki / "kubelet-client-current.pem")
    rc = k.proc.wait(90)
    gone = datetime.now(timezone.utc)
    assert rc == 1, k.tail()
    # exit-after past the watchdog's last check that saw a valid certificate
    # (at most 10 s before NotAfter), found by a check every 10 s: 10-30 s
    # after NotAfter (+1 s for its truncation, +1 s for the exit).
    assert 9 <= (gone - not_after).total_seconds() <= 32, (gone, not_after)
    assert re.search(r'(?m)^E\d{4} .*"No valid client certificate is found and the server is '
                     r'responsive, exiting\." lastCertificateAvailabilityTime="[^"]+" '
                     r'shutdownThreshold="20s"$', k.log()), k.tail()
    found = run("grep", "-i", r"certificate\|tls\|x509", k.log_path).stdout
    assert "Current certificate is expired" in found


def test_rotating_kubelet_self_heals_without_approver(stingy, kubelets, wait_until, run):
    """The same, with --self-heal: at expiry the kubelet asks again with the
    bootstrap token, in place, and keeps its process."""
    def token_csrs():
        return [c for c in stingy.request("GET", CSRS).json()["items"]
                if c["spec"]["username"].startswith("system:bootstrap:")]
    before = len(token_csrs())
    k = kubelets("kl-rot-heal", "--rotate-certificates", "--self-heal", "--exit-after", "10s",
                 server=stingy)
    k.start()
    wait_until(lambda: (k.pki / "kubelet-client-current.pem").exists(), 30,
               lambda: "the bootstrap certificate\n" + k.tail())
    first = os.readlink(k.pki / "kubelet-client-current.pem")
    wait_until(lambda: "Self-heal complete" in k.log(), 60,
               lambda: "self-heal to finish\n" + k.tail())
    assert os.readlink(k.pki / "kubelet-client-current.pem") != first
    pid = k.proc.pid
    time.sleep(12)  # past --exit-after: still the same process
    assert k.running() and k.proc.pid == pid, k.tail()
    # The bootstrap, then self-heal's csr-*, both the token's and issued.
    mine = token_csrs()[before:]
    assert len(mine) >= 2, mine
    assert all(c["metadata"]["name"].startswith("csr-") and c["status"].get("certificate")
               for c in mine[:2]), mine
    assert "No valid client certificate is found" not in k.log()


def test_self_heal_rebootstraps_without_restart(cluster, kubelets, kubectl,
                                                wait_until):
    k = kubelets("kl-heal", "--self-heal", "--exit-after", "10s")
    conf = short_lived_kubeconfig(cluster, k, 20)
    k.start("--kubeconfig", conf)
    wait_ready(kubectl, wait_until, k)
    wait_until(lambda: "self-heal is re-bootstrapping" in k.log(), 40,
               lambda: "self-heal to start\n" + k.tail())
    wait_until(lambda: "Self-heal complete" in k.log(), 30,
               lambda: "self-heal to finish\n" + k.tail())
    pid = k.proc.pid
    # Two renewals: well past --exit-after, and still the same process.
    wait_lease_moves(cluster, wait_until, "kl-heal")
    wait_lease_moves(cluster, wait_until, "kl-heal")
    assert k.running() and k.proc.pid == pid, k.tail()
    assert node_status(kubectl, "kl-heal") == "Ready"
    assert "Certificate rotation detected, shutting down client connections" in k.log()
    assert (k.pki / "kubelet-client-current.pem").is_symlink()


def test_hollow_nodes(cube, cluster, kubectl, wait_until, tmp, run):
    root = tmp / "hollow"
    log = open(tmp / "hollow.log", "ab")
    proc = subprocess.Popen(
        [str(cube), "kubelet", "--hollow-nodes", "3", "--hollow-name-prefix", "hn-",
         "--root-dir", str(root), "--bootstrap-kubeconfig", str(cluster.bootstrap_conf)],
        env=cluster.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    names = {"hn-0", "hn-1", "hn-2"}
    try:
        wait_until(lambda: all(node_status(kubectl, n) == "Ready" for n in names), 40,
                   lambda: "3 Ready hollow nodes\n" +
                   (tmp / "hollow.log").read_text()[-3000:])
        pems = set()
        for n in names:
            link = root / n / "pki" / "kubelet-client-current.pem"
            assert link.is_symlink()
            pems.add(link.read_text())
            subject = run("openssl", "x509", "-in", link, "-noout", "-subject").stdout
            assert f"CN = system:node:{n}" in subject
            assert renew_time(cluster, n)
        assert len(pems) == 3, "each hollow node has its own key and certificate"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
