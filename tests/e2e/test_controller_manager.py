"""End-to-end tests of `cube controller-manager`.

A real `cube apiserver` and a real `cube controller-manager` run on loopback
over a `cube pki init` cluster directory. A kubelet's TLS bootstrap is played
with the real kubectl and the cluster's bootstrap-token kubeconfig, and the
result is checked the way an operator would: `kubectl get csr`, the issued
certificate pulled out with jsonpath and checked with `openssl verify` and
`openssl x509`.
"""

import base64
import json
import re
import signal
import subprocess
from datetime import datetime, timezone

import pytest

from conftest import stop_process

KUBECTL = "/usr/bin/kubectl"
CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING = "kubernetes.io/kubelet-serving"
MSG_NODECLIENT = ("Auto approving kubelet client certificate after "
                  "SubjectAccessReview.")

FLAGS = ("--kubeconfig", "--cluster-signing-cert-file",
         "--cluster-signing-key-file", "--cluster-signing-duration",
         "--controllers", "--approve-kubelet-serving", "--v", "--help")


# ----------------------------------------------------------------- helpers --

class ControllerManager:
    """One `cube controller-manager` for a CubeAPIServer's cluster."""

    def __init__(self, cube, server, name, *extra_args):
        self.cube = str(cube)
        self.server = server
        self.conf = server.dir / "controller-manager.conf"
        self.log_path = server.dir / f"{name}.log"
        self.extra = [str(a) for a in extra_args]
        self.proc = None
        # The kubeconfig names the server; the port is chosen at run time.
        text = self.conf.read_text()
        self.conf.write_text(re.sub(r"(?m)^(\s*server:\s*).*$",
                                    rf"\g<1>{server.url}", text))

    def argv(self):
        return [self.cube, "controller-manager", "--kubeconfig", str(self.conf),
                "--cluster-signing-cert-file", str(self.server.pki / "ca.crt"),
                "--cluster-signing-key-file", str(self.server.pki / "ca.key"),
                "--secure-port", "0", "-v", "2", "--use-service-account-credentials",
                # One instance per test on a module's server: no waiting for
                # the last test's lease (test_leader_election.py elects).
                "--leader-elect=false", *self.extra]

    def start(self, wait_until):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), env=self.server.env,
                                     stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()

        def synced():
            if self.proc.poll() is not None:
                pytest.fail(f"cube controller-manager exited with "
                            f"{self.proc.returncode}\n{self.log()[-3000:]}",
                            pytrace=False)
            return '"Caches are synced"' in self.log()
        wait_until(synced, 20, lambda: "the controller manager's caches to "
                   "sync; log:\n" + self.log()[-3000:])
        return self

    def stop(self, sig=signal.SIGTERM, timeout=20):
        return stop_process(self.proc, "cube controller-manager", sig, timeout)

    def log(self):
        return self.log_path.read_text(errors="replace") \
            if self.log_path.exists() else ""


@pytest.fixture(scope="module")
def server(make_apiserver, tmp_path_factory):
    """One API server for the module; each test uses its own CSR names."""
    s = make_apiserver(tmp_path_factory.mktemp("cm") / "apiserver")
    yield s
    rc = s.stop()
    assert rc in (0, None), f"cube apiserver exited {rc}\n{s.log()[-3000:]}"


@pytest.fixture
def start_cm(cube, server, wait_until):
    """start_cm(name, *extra_args) -> a running ControllerManager, stopped
    (and checked to exit 0 on SIGTERM) at teardown."""
    started = []

    def _start(name, *extra):
        cm = ControllerManager(cube, server, name, *extra).start(wait_until)
        started.append(cm)
        return cm
    yield _start
    for cm in started:
        rc = cm.stop()
        assert rc in (0, None), f"controller-manager exited {rc}\n{cm.log()[-3000:]}"


@pytest.fixture
def kubectl(run, server):
    """kubectl(*args, conf=admin.conf, check=True) with the real kubectl."""
    def _kubectl(*args, conf=None, check=True, input=None):
        return run(KUBECTL, "--kubeconfig", conf or server.admin_conf, *args,
                   check=check, input=input)
    return _kubectl


def new_request(tmp, name, subject, sans=None):
    """An ECDSA P-256 key and PEM CSR made with openssl, as a kubelet does."""
    d = tmp / name
    d.mkdir(parents=True)
    key, req = d / "key.pem", d / "req.pem"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey",
                    "-noout", "-out", str(key)], check=True, capture_output=True)
    argv = ["openssl", "req", "-new", "-key", str(key), "-subj", subject,
            "-out", str(req)]
    if sans:
        argv += ["-addext", "subjectAltName=" + sans]
    subprocess.run(argv, check=True, capture_output=True)
    return req.read_bytes()


def csr_yaml(name, request, signer=CLIENT_KUBELET,
             usages=("digital signature", "client auth"), expiration=None):
    obj = {"apiVersion": "certificates.k8s.io/v1",
           "kind": "CertificateSigningRequest",
           "metadata": {"name": name},
           "spec": {"request": base64.b64encode(request).decode(),
                    "signerName": signer, "usages": list(usages)}}
    if expiration is not None:
        obj["spec"]["expirationSeconds"] = expiration
    return json.dumps(obj)  # JSON is YAML


def condition_of(kubectl, name):
    """The CONDITION column of `kubectl get csr NAME`."""
    out = kubectl("get", "csr", name, check=False).stdout
    lines = out.splitlines()
    if len(lines) < 2:
        return ""
    header = lines[0]
    start = header.index("CONDITION")
    return lines[1][start:].strip()


def wait_condition(kubectl, wait_until, name, want, timeout=20):
    return wait_until(lambda: condition_of(kubectl, name) == want, timeout,
                      lambda: f"csr {name} to be {want}; now: "
                      f"{kubectl('get', 'csr', name, check=False).stdout!r}")


def issued_certificate(kubectl, tmp, name):
    """status.certificate, base64-decoded the way a user does it, in a file."""
    b64 = kubectl("get", "csr", name, "-o",
                  "jsonpath={.status.certificate}").stdout
    pem = subprocess.run(["base64", "-d"], input=b64.encode(),
                         capture_output=True, check=True).stdout
    path = tmp / f"{name}.crt"
    path.write_bytes(pem)
    return path


def x509_dates(run, path):
    out = run("openssl", "x509", "-noout", "-dates", "-in", path).stdout
    fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def parse(s):
        return datetime.strptime(s.strip(), "%b %d %H:%M:%S %Y %Z") \
            .replace(tzinfo=timezone.utc)
    return parse(fields["notBefore"]), parse(fields["notAfter"])


# ------------------------------------------------------------------- tests --

def test_help_documents_every_flag(cube, run):
    out = run(cube, "controller-manager", "--help").stdout
    for flag in FLAGS:
        assert flag in out, f"{flag} missing from --help:\n{out}"
    for name in ("csrapproving", "csrsigning", "csrcleaner", "8760h0m0s"):
        assert name in out, out
    assert "controller-manager" in run(cube, "--help").stdout


def test_command_line_mistakes(cube, run, tmp):
    r = run(cube, "controller-manager", check=False)
    assert r.returncode == 2 and "--kubeconfig is required" in r.stderr, r
    r = run(cube, "controller-manager", "--kubeconfig", tmp / "x",
            "--controllers", "csrsigning,nope", check=False)
    assert r.returncode == 2, r
    assert '"nope" is not in the list of known controllers' in r.stderr, r
    r = run(cube, "controller-manager", "--kubeconfig", tmp / "x",
            "--cluster-signing-duration", "forever", check=False)
    assert r.returncode == 2 and "--cluster-signing-duration" in r.stderr, r
    r = run(cube, "controller-manager", "--kubeconfig", tmp / "missing.conf",
            check=False)
    assert r.returncode == 1 and "missing.conf" in r.stderr, r


def test_unreadable_ca_stops_startup(cube, run, server):
    conf = server.dir / "controller-manager.conf"
    r = run(cube, "controller-manager", "--kubeconfig", conf,
            "--cluster-signing-cert-file", server.pki / "nope.crt",
            "--cluster-signing-key-file", server.pki / "ca.key", check=False)
    assert r.returncode == 1, r
    assert "error reading CA cert file" in r.stderr and "nope.crt" in r.stderr, r


def test_tls_bootstrap_csr_is_approved_and_issued(server, start_cm, kubectl,
                                                  wait_until, run, tmp):
    cm = start_cm("cm-bootstrap")
    req = new_request(tmp, "boot", "/O=system:nodes/CN=system:node:e2e-node")
    kubectl("create", "-f", "-", conf=server.bootstrap_conf,
            input=csr_yaml("node-csr-e2e", req))
    wait_condition(kubectl, wait_until, "node-csr-e2e", "Approved,Issued")

    table = kubectl("get", "csr", "node-csr-e2e").stdout
    assert "system:bootstrap:" in table and CLIENT_KUBELET in table, table
    obj = json.loads(kubectl("get", "csr", "node-csr-e2e", "-o", "json").stdout)
    (cond,) = obj["status"]["conditions"]
    assert cond["type"] == "Approved" and cond["status"] == "True", cond
    assert cond["reason"] == "AutoApproved", cond
    assert cond["message"] == MSG_NODECLIENT, cond
    assert cond.get("lastUpdateTime"), cond

    crt = issued_certificate(kubectl, tmp, "node-csr-e2e")
    v = run("openssl", "verify", "-CAfile", server.pki / "ca.crt", crt)
    assert v.stdout.strip().endswith(": OK"), v.stdout
    subject = run("openssl", "x509", "-noout", "-subject", "-in", crt).stdout
    assert "O = system:nodes" in subject and \
        "CN = system:node:e2e-node" in subject, subject
    not_before, not_after = x509_dates(run, crt)
    # --cluster-signing-duration's default, 8760h, after a 5 min backdate.
    assert (not_after - not_before).total_seconds() == 8760 * 3600
    now = datetime.now(timezone.utc)
    assert 4 * 60 <= (now - not_before).total_seconds() <= 6 * 60 + 30
    # The key in the certificate is the kubelet's.
    pub_crt = run("openssl", "x509", "-noout", "-pubkey", "-in", crt).stdout
    pub_key = run("openssl", "pkey", "-pubout", "-in",
                  tmp / "boot" / "key.pem").stdout
    assert pub_crt == pub_key
    log = cm.log()
    assert MSG_NODECLIENT in log, log[-3000:]
    assert '"Signed certificate" csr="node-csr-e2e"' in log, log[-3000:]

    assert cm.stop() == 0
    log = cm.log()
    assert '"Shutting down certificate controller" name="csrapproving"' in log
    assert '"Shutting down CSR cleaner controller"' in log


def test_requested_duration(server, start_cm, kubectl, wait_until, run, tmp):
    start_cm("cm-duration")
    req = new_request(tmp, "dur", "/O=system:nodes/CN=system:node:dur-node")
    kubectl("create", "-f", "-", conf=server.bootstrap_conf,
            input=csr_yaml("csr-one-hour", req, expiration=3600))
    wait_condition(kubectl, wait_until, "csr-one-hour", "Approved,Issued")
    table = kubectl("get", "csr", "csr-one-hour").stdout
    assert re.search(r"\b60m\b", table), table
    not_before, not_after = x509_dates(
        run, issued_certificate(kubectl, tmp, "csr-one-hour"))
    # Short certificates keep their whole life after the backdate.
    assert (not_after - not_before).total_seconds() == 3600 + 300


def test_serving_csr_stays_pending(server, start_cm, kubectl, wait_until, tmp):
    start_cm("cm-serving")
    req = new_request(tmp, "serving", "/O=system:nodes/CN=system:node:s-node",
                      sans="DNS:s-node,IP:10.0.0.21")
    kubectl("create", "-f", "-", input=csr_yaml(
        "csr-serving", req, signer=SERVING,
        usages=("digital signature", "server auth")))
    # A client CSR made afterwards is done: the serving one has been seen.
    req = new_request(tmp, "after", "/O=system:nodes/CN=system:node:s-node2")
    kubectl("create", "-f", "-", conf=server.bootstrap_conf,
            input=csr_yaml("csr-after-serving", req))
    wait_condition(kubectl, wait_until, "csr-after-serving", "Approved,Issued")
    assert condition_of(kubectl, "csr-serving") == "Pending"


def test_without_approver_kubectl_approve_gets_it_signed(server, start_cm,
                                                         kubectl, wait_until,
                                                         run, tmp):
    cm = start_cm("cm-noapprove", "--controllers", "*,-csrapproving")
    assert '"Warning: controller is disabled" controller=' \
        '"certificatesigningrequest-approving-controller"' in cm.log()
    req = new_request(tmp, "manual", "/O=system:nodes/CN=system:node:m-node")
    kubectl("create", "-f", "-", conf=server.bootstrap_conf,
            input=csr_yaml("csr-manual", req))
    # Nobody approves it; a sentinel the signer handles proves it was seen.
    req2 = new_request(tmp, "sentinel", "/CN=alice/O=team-a")
    kubectl("create", "-f", "-", input=csr_yaml(
        "csr-sentinel", req2, signer="kubernetes.io/kube-apiserver-client"))
    kubectl("certificate", "approve", "csr-sentinel")
    wait_condition(kubectl, wait_until, "csr-sentinel", "Approved,Issued")
    assert condition_of(kubectl, "csr-manual") == "Pending"

    kubectl("certificate", "approve", "csr-manual")
    wait_condition(kubectl, wait_until, "csr-manual", "Approved,Issued")
    crt = issued_certificate(kubectl, tmp, "csr-manual")
    v = run("openssl", "verify", "-CAfile", server.pki / "ca.crt", crt)
    assert v.stdout.strip().endswith(": OK"), v.stdout


def test_signer_refuses_wrong_usages(server, start_cm, kubectl, wait_until,
                                     tmp):
    start_cm("cm-refuse")
    req = new_request(tmp, "refuse", "/CN=bob/O=team-b")
    kubectl("create", "-f", "-", input=csr_yaml(
        "csr-refused", req, signer="kubernetes.io/kube-apiserver-client",
        usages=("digital signature", "server auth")))
    kubectl("certificate", "approve", "csr-refused")
    wait_condition(kubectl, wait_until, "csr-refused", "Approved,Failed")
    obj = json.loads(kubectl("get", "csr", "csr-refused", "-o", "json").stdout)
    failed = [c for c in obj["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "SignerValidationFailure", obj
    assert failed[0]["message"] == \
        "invalid usage for client certificate: server auth", obj
    assert not obj["status"].get("certificate")


def test_controllers_act_as_their_service_accounts(server, start_cm, kubectl, wait_until):
    """With --use-service-account-credentials each controller is its own
    kube-system service account holding exactly its system:controller:*
    role: the accounts exist, the CSR approver's approval is made as
    certificate-controller, and the aggregation controller (escalate on
    clusterroles) folds a role labelled aggregate-to-view into view, edit
    and admin."""
    cm = start_cm("cm-identities")
    wait_until(lambda: "clusterrole-aggregation-controller" in kubectl(
        "get", "serviceaccounts", "-n", "kube-system", "-o", "name").stdout, 20,
        "the controllers' service accounts")
    accounts = kubectl("get", "serviceaccounts", "-n", "kube-system", "-o", "name").stdout
    for name in ("certificate-controller", "node-controller", "replicaset-controller",
                 "deployment-controller", "namespace-controller", "pod-garbage-collector"):
        assert f"serviceaccount/{name}\n" in accounts, accounts
    can = lambda *a: kubectl("auth", "can-i", *a, "--as",  # noqa: E731
                             "system:serviceaccount:kube-system:replicaset-controller",
                             check=False).stdout.strip()
    assert can("patch", "pods") == "yes" and can("update", "pods") == "no"
    assert can("get", "secrets") == "no"

    kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-reader", "labels": {
            "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"],
                   "verbs": ["get", "list"]}]}))
    want = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}

    def aggregated(role):
        return want in json.loads(kubectl("get", "clusterrole", role, "-o",
                                          "json").stdout).get("rules", [])
    for role in ("view", "edit", "admin"):
        wait_until(lambda: aggregated(role), 20, f"widgets-reader's rule in {role}")
    view = json.loads(kubectl("get", "clusterrole", "view", "-o", "json").stdout)
    source = json.loads(kubectl("get", "clusterrole", "system:aggregate-to-view", "-o",
                                "json").stdout)
    assert view["rules"][:len(source["rules"])] == source["rules"]  # by name: "system:..." first
    assert not any("secrets" in r.get("resources", []) for r in view["rules"])
    kubectl("delete", "clusterrole", "widgets-reader")
    wait_until(lambda: not aggregated("view"), 20, "the rule gone from view")
    # Applied server-side as upstream's (no resourceVersion): admin, edit and
    # view, which aggregate one another, never conflict, so no error lines.
    applied = re.findall(r'verb="(\w+)" URI="/apis/rbac\.authorization\.k8s\.io/v1/'
                         r'clusterroles/(admin|edit|view)(\?[^"]*)?"', server.log())
    assert ("PATCH", "view", "?fieldManager=clusterrole-aggregation-controller&force=true") \
        in applied, applied
    assert {verb for verb, _, _ in applied} == {"GET", "PATCH"}, applied  # no PUT
    assert not re.search(r"(admin|edit|view) failed with : ", cm.log()), cm.log()[-3000:]
    # ...and counted as upstream counts an apply.
    metrics = kubectl("get", "--raw", "/metrics").stdout
    assert re.search(r'^apiserver_request_total\{verb="APPLY",group="rbac\.authorization\.k8s\.io",'
                     r'version="v1",resource="clusterroles",subresource="",scope="resource",'
                     r'component="apiserver",code="200"\} [1-9]', metrics, re.M), \
        [m for m in metrics.splitlines() if "clusterroles" in m and "request_total" in m]
    # Writes by their HTTP method, as upstream's routes name them (dashboards
    # select verb=~"POST|PUT|PATCH|DELETE"), not by authorization's verbs.
    assert re.search(r'^apiserver_request_total\{verb="POST",', metrics, re.M), metrics[:2000]
    assert 'verb="CREATE"' not in metrics and 'verb="UPDATE"' not in metrics
