"""kubectl version skew (issue 14): kubectl 1.27 to 1.33 against one cube.

cube answers as a 1.32 API server. Upstream supports kubectl within one minor
version of it, but people run what they have, so each kubectl from 1.27 to
1.33 present beside the `kubectl` on PATH (Google Cloud SDK installs them as
kubectl.1.27 ... kubectl.1.33 next to its version dispatcher) runs the same
battery, by its own path, never through the dispatcher: get, describe,
client-side and server-side apply, the three patch types, create, delete,
wait, explain, certificate approve and auth whoami. Every check reads what
kubectl printed; where an old kubectl against an upstream 1.32 server prints
an error, that error is what is expected.

One API server serves the whole module; each version has its own namespace
and its own HOME (so its own discovery and OpenAPI cache). The test ids are
the versions (`pytest -v` says which ran; absent ones are skipped with the
reason), and a line after pytest's summary lists them with their builds.
"""

import base64
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from datetime import datetime, timezone

import pytest
import yaml

from conftest import _describe

VERSIONS = ("1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33")
NODE = "skew-node"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def kubectl_dir():
    """The directory of the real kubectl behind PATH's (the dispatcher's)."""
    found = shutil.which("kubectl")
    return os.path.dirname(os.path.realpath(found)) if found else None


def version_params():
    where = kubectl_dir()
    params = []
    for v in VERSIONS:
        path = os.path.join(where, f"kubectl.{v}") if where else None
        absent = not (path and os.access(path, os.X_OK))
        reason = (f"no kubectl.{v} beside {where}/kubectl" if where
                  else "no kubectl on PATH")
        params.append(pytest.param(v, id=v, marks=pytest.mark.skipif(
            absent, reason=reason)))
    return params


def minor(version):
    return int(version.split(".")[1])


def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_table(text):
    """kubectl's column output as a list of dicts keyed by header."""
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        return []
    cols = [(m.start(), m.group())
            for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (start, name) in enumerate(cols):
            end = cols[i + 1][0] if i + 1 < len(cols) else None
            row[name] = line[start:end].strip()
        rows.append(row)
    return rows


def row_named(text, name, key="NAME"):
    rows = [r for r in parse_table(text) if r.get(key) == name]
    assert rows, f"no row {key}={name} in:\n{text}"
    return rows[0]


def explained_fields(text):
    """The field names `kubectl explain` lists (a name, then <type>)."""
    return set(re.findall(r"(?m)^\s+([A-Za-z0-9]+)\s+<[^>]+>", text))


class Kubectl:
    """One kubectl binary, its own HOME and namespace, the admin identity."""

    def __init__(self, version, path, work, server):
        self.version = version
        self.minor = minor(version)
        self.path = path
        self.work = work
        self.ns = "skew-" + version.replace(".", "-")
        home = work / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("KUBECONFIG", "CUBE_CLOCK_OFFSET")
                    and not k.startswith("KUBECTL_")}
        self.env.update(HOME=str(home), LC_ALL="C",
                        KUBECONFIG=str(server.admin_conf))

    def __call__(self, *args, check=True, input=None, timeout=30):
        argv = [self.path, "--namespace", self.ns, *map(str, args)]
        try:
            proc = subprocess.run(argv, env=self.env, input=input, text=True,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"$ {shlex.join(argv)}\ntimed out after {timeout}s\n"
                        f"--- stdout ---\n{e.stdout}\n--- stderr ---\n"
                        f"{e.stderr}", pytrace=False)
        if proc.returncode < 0:
            pytest.fail(f"kubectl {self.version} crashed with "
                        f"{signal.Signals(-proc.returncode).name}\n"
                        f"{_describe(proc)}", pytrace=False)
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {self.version} failed\n{_describe(proc)}",
                        pytrace=False)
        return proc

    def json(self, *args):
        return json.loads(self(*args, "-o", "json").stdout)

    def file(self, name, docs):
        """A manifest file of one or more documents, in this version's dir."""
        path = self.work / name
        path.write_text(yaml.safe_dump_all(docs))
        return path


# ---------------------------------------------------------------- fixtures --

_RAN = {}


@pytest.fixture(scope="module", autouse=True)
def versions_report(request):
    """After the run, one line naming the kubectls that ran."""
    yield
    skipped = [v for v in VERSIONS if v not in _RAN]
    line = ("kubectl skew: ran " + (", ".join(
        f"{v} ({_RAN[v]})" for v in VERSIONS if v in _RAN) or "none")
        + ("; not run: " + ", ".join(skipped) if skipped else ""))
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter:
        # After pytest's own summary, when nothing is captured any more.
        request.config.add_cleanup(lambda: reporter.write_line(line))


@pytest.fixture(scope="module")
def server(make_apiserver, tmp_path_factory):
    """One API server for every version, with one Ready node to list."""
    s = make_apiserver(tmp_path_factory.mktemp("skew-apiserver"))
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {
            "kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0",
                         "kubeProxyVersion": "v1.32.0",
                         "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "kernelVersion": "6.1.0-18-amd64",
                         "containerRuntimeVersion": "containerd://1.7.24",
                         "architecture": "amd64", "operatingSystem": "linux",
                         "machineID": "m", "systemUUID": "s", "bootID": "b"},
            "conditions": [{"type": "Ready", "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now_rfc3339(),
                            "lastTransitionTime": now_rfc3339()}]}}
    r = s.request("POST", "/api/v1/nodes", node)
    assert r.status == 201, r
    yield s
    rc = s.stop()
    assert rc == 0, f"cube apiserver exited {rc} on SIGTERM\n{s.log()[-3000:]}"


@pytest.fixture(scope="module", params=version_params())
def kc(request, server, tmp_path_factory):
    """kubectl VERSION by its own path, its own HOME, its own namespace
    (created here with `kubectl create namespace`)."""
    version = request.param
    path = os.path.join(kubectl_dir(), f"kubectl.{version}")
    k = Kubectl(version, path, tmp_path_factory.mktemp(f"kubectl-{version}"),
                server)
    info = json.loads(k("version", "-o", "json").stdout)
    client = info["clientVersion"]
    assert (client["major"], client["minor"].rstrip("+")) == \
        ("1", str(k.minor)), f"{path} is not kubectl {version}: {client}"
    assert info["serverVersion"]["gitVersion"].startswith("v1.32."), info
    out = k("create", "namespace", k.ns).stdout
    assert out.strip() == f"namespace/{k.ns} created", out
    _RAN[version] = client["gitVersion"]
    return k


# ------------------------------------------------------------------- tests --

def test_get_namespaces_and_nodes(kc):
    names = [i["metadata"]["name"] for i in kc.json("get", "namespaces")["items"]]
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease", kc.ns):
        assert ns in names, names
    out = kc("get", "namespaces").stdout
    assert re.split(r"\s{2,}", out.splitlines()[0].strip()) == \
        ["NAME", "STATUS", "AGE"], out
    assert row_named(out, kc.ns)["STATUS"] == "Active", out

    nodes = kc.json("get", "nodes")
    assert nodes["kind"] == "List", nodes
    assert [n["metadata"]["name"] for n in nodes["items"]] == [NODE], nodes
    out = kc("get", "nodes").stdout
    row = row_named(out, NODE)
    assert (row["STATUS"], row["ROLES"], row["VERSION"]) == \
        ("Ready", "<none>", "v1.32.0"), out


def test_run_get_describe_pod(kc):
    out = kc("run", "skew-pod", "--image=busybox:1.36",
             "--labels=app=skew", "--", "sleep", "3600").stdout
    assert out.strip() == "pod/skew-pod created", out

    items = kc.json("get", "pods")["items"]
    assert [p["metadata"]["name"] for p in items] == ["skew-pod"], items
    pod = items[0]
    assert pod["metadata"]["namespace"] == kc.ns, pod
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.36", pod
    assert pod["spec"]["containers"][0]["args"] == ["sleep", "3600"], pod
    assert pod["status"]["phase"] == "Pending", pod  # no scheduler here

    out = kc("get", "pods", "-l", "app=skew").stdout
    row = row_named(out, "skew-pod")
    assert (row["READY"], row["STATUS"], row["RESTARTS"]) == \
        ("0/1", "Pending", "0"), out

    out = kc("describe", "pod", "skew-pod").stdout
    fields = dict(re.findall(r"(?m)^(\w[\w-]*):\s+(.*)$", out))
    assert fields.get("Name") == "skew-pod", out
    assert fields.get("Namespace") == kc.ns, out
    assert fields.get("Status") == "Pending", out
    assert fields.get("Labels") == "app=skew", out
    assert re.search(r"(?m)^\s+Image:\s+busybox:1\.36$", out), out


def test_apply_client_side(kc):
    """kubectl apply (client-side, --validate=strict by default), twice: the
    second apply changes, adds and (three-way, from the last-applied
    annotation) removes fields."""
    def manifests(replicas, image, data):
        return [{"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "csa-web", "labels": {"app": "csa-web"}},
                 "spec": {"replicas": replicas,
                          "selector": {"matchLabels": {"app": "csa-web"}},
                          "template": {
                              "metadata": {"labels": {"app": "csa-web"}},
                              "spec": {"containers": [
                                  {"name": "web", "image": image}]}}}},
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "csa-settings"}, "data": data}]

    first = kc.file("csa-1.yaml", manifests(1, "nginx:1.25",
                                            {"color": "blue", "size": "small"}))
    out = kc("apply", "-f", first).stdout
    assert out.splitlines() == ["deployment.apps/csa-web created",
                                "configmap/csa-settings created"], out
    cm = kc.json("get", "configmap", "csa-settings")
    assert cm["data"] == {"color": "blue", "size": "small"}, cm
    last = cm["metadata"]["annotations"][
        "kubectl.kubernetes.io/last-applied-configuration"]
    assert json.loads(last)["data"] == {"color": "blue", "size": "small"}, last

    out = kc("apply", "-f", first).stdout
    assert out.splitlines() == ["deployment.apps/csa-web unchanged",
                                "configmap/csa-settings unchanged"], out

    second = kc.file("csa-2.yaml", manifests(3, "nginx:1.27",
                                             {"color": "green", "shape": "round"}))
    out = kc("apply", "-f", second).stdout
    assert out.splitlines() == ["deployment.apps/csa-web configured",
                                "configmap/csa-settings configured"], out
    cm = kc.json("get", "configmap", "csa-settings")
    assert cm["data"] == {"color": "green", "shape": "round"}, cm
    dep = kc.json("get", "deployment", "csa-web")
    assert dep["spec"]["replicas"] == 3, dep
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "nginx:1.27", dep
    assert dep["metadata"]["generation"] == 2, dep


def test_apply_server_side(kc):
    """kubectl apply --server-side: the objects are created and changed; a
    create by apply is admitted as a create (no object in a namespace that
    does not exist). cube keeps no managedFields yet, so field ownership and
    apply conflicts are not checked here."""
    def manifests(replicas, data):
        return [{"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "ssa-web"},
                 "spec": {"replicas": replicas,
                          "selector": {"matchLabels": {"app": "ssa-web"}},
                          "template": {
                              "metadata": {"labels": {"app": "ssa-web"}},
                              "spec": {"containers": [
                                  {"name": "web", "image": "nginx:1.25"}]}}}},
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "ssa-settings"}, "data": data}]

    out = kc("apply", "--server-side", "-f",
             kc.file("ssa-1.yaml", manifests(1, {"color": "blue"}))).stdout
    assert out.splitlines() == ["deployment.apps/ssa-web serverside-applied",
                                "configmap/ssa-settings serverside-applied"], out
    out = kc("apply", "--server-side", "-f",
             kc.file("ssa-2.yaml", manifests(2, {"color": "green"}))).stdout
    assert out.splitlines() == ["deployment.apps/ssa-web serverside-applied",
                                "configmap/ssa-settings serverside-applied"], out

    cm = kc.json("get", "configmap", "ssa-settings", "--show-managed-fields")
    assert cm["data"] == {"color": "green"}, cm
    dep = kc.json("get", "deployment", "ssa-web", "--show-managed-fields")
    assert dep["spec"]["replicas"] == 2, dep
    missing = kc("apply", "--server-side", "-n", "no-such-namespace", "-f",
                 kc.file("ssa-3.yaml", manifests(1, {"color": "red"})[1:]), check=False)
    assert missing.returncode == 1, missing
    assert 'namespaces "no-such-namespace" not found' in missing.stderr, missing.stderr


def test_patch_three_ways(kc):
    out = kc("create", "deployment", "patchme", "--image=nginx:1.25").stdout
    assert out.strip() == "deployment.apps/patchme created", out
    out = kc("create", "configmap", "patchme",
             "--from-literal=a=1", "--from-literal=b=2").stdout
    assert out.strip() == "configmap/patchme created", out

    # Strategic: containers merge by name (a merge patch would replace the
    # list), so the image changes and a second container joins.
    out = kc("patch", "deployment", "patchme", "--type=strategic", "-p",
             json.dumps({"spec": {"template": {"spec": {"containers": [
                 {"name": "nginx", "image": "nginx:1.27"},
                 {"name": "sidecar", "image": "busybox:1.36"}]}}}})).stdout
    assert out.strip() == "deployment.apps/patchme patched", out
    containers = kc.json("get", "deployment", "patchme")[
        "spec"]["template"]["spec"]["containers"]
    assert sorted((c["name"], c["image"]) for c in containers) == \
        [("nginx", "nginx:1.27"), ("sidecar", "busybox:1.36")], containers

    out = kc("patch", "configmap", "patchme", "--type=merge", "-p",
             json.dumps({"data": {"a": None, "c": "3"}})).stdout
    assert out.strip() == "configmap/patchme patched", out
    assert kc.json("get", "configmap", "patchme")["data"] == \
        {"b": "2", "c": "3"}

    out = kc("patch", "configmap", "patchme", "--type=json", "-p",
             json.dumps([{"op": "test", "path": "/data/b", "value": "2"},
                         {"op": "replace", "path": "/data/b", "value": "20"},
                         {"op": "remove", "path": "/data/c"}])).stdout
    assert out.strip() == "configmap/patchme patched", out
    assert kc.json("get", "configmap", "patchme")["data"] == {"b": "20"}

    proc = kc("patch", "configmap", "patchme", "--type=json", "-p",
              json.dumps([{"op": "test", "path": "/data/b", "value": "2"}]),
              check=False)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        "The request is invalid: the server rejected our request due to an "
        "error in our request"), _describe(proc)


def test_create_delete_wait(kc):
    out = kc("create", "configmap", "held", "--from-literal=k=v").stdout
    assert out.strip() == "configmap/held created", out
    out = kc("describe", "configmap", "held").stdout
    assert re.search(r"(?m)^Name:\s+held$", out), out
    assert re.search(r"(?m)^Namespace:\s+" + re.escape(kc.ns) + "$", out), out
    assert re.search(r"(?m)^k:\n-+\nv$", out), out

    out = kc("wait", "--for=jsonpath={.data.k}=v", "configmap/held",
             "--timeout=10s").stdout
    assert out.strip() == "configmap/held condition met", out

    # A finalizer holds the object after delete: wait times out on it, then
    # sees it go once the finalizer is removed.
    kc("patch", "configmap", "held", "--type=merge", "-p",
       json.dumps({"metadata": {"finalizers": ["skew.cube.test/hold"]}}))
    out = kc("delete", "configmap", "held", "--wait=false").stdout
    assert re.match(r'configmap "held" deleted', out), out
    cm = kc.json("get", "configmap", "held")
    assert cm["metadata"].get("deletionTimestamp"), cm
    proc = kc("wait", "--for=delete", "configmap/held", "--timeout=500ms",
              check=False)
    assert proc.returncode != 0 and "timed out waiting for the condition" \
        in proc.stderr, _describe(proc)
    kc("patch", "configmap", "held", "--type=json", "-p",
       json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))
    kc("wait", "--for=delete", "configmap/held", "--timeout=10s")
    proc = kc("get", "configmap", "held", check=False)
    assert proc.returncode == 1 and \
        'configmaps "held" not found' in proc.stderr, _describe(proc)

    out = kc("create", "deployment", "made", "--image=nginx:1.25",
             "--replicas=2").stdout
    assert out.strip() == "deployment.apps/made created", out
    out = kc("wait", "--for=jsonpath={.spec.replicas}=2", "deployment/made",
             "--timeout=10s").stdout
    assert out.strip() == "deployment.apps/made condition met", out
    out = kc("get", "deployment", "made").stdout
    assert row_named(out, "made")["READY"] == "0/2", out
    out = kc("delete", "deployment", "made").stdout
    assert re.match(r'deployment.apps "made" deleted', out), out
    proc = kc("get", "deployment", "made", check=False)
    assert proc.returncode == 1 and \
        'deployments.apps "made" not found' in proc.stderr, _describe(proc)


def test_explain(kc):
    out = kc("explain", "pod.spec.tolerations").stdout
    assert re.search(r"(?m)^KIND:\s+Pod$", out), out
    assert "FIELDS:" in out, out
    fields = explained_fields(out)
    for f in ("effect", "key", "operator", "tolerationSeconds", "value"):
        assert f in fields, f"{f} not among {sorted(fields)}:\n{out}"

    out = kc("explain", "deployment.spec.strategy", "--recursive").stdout
    assert re.search(r"(?m)^KIND:\s+Deployment$", out), out
    fields = explained_fields(out)
    for f in ("rollingUpdate", "maxSurge", "maxUnavailable", "type"):
        assert f in fields, f"{f} not among {sorted(fields)}:\n{out}"


def test_certificate_approve(kc, run):
    name = f"skew-csr-{kc.ns}"
    key, req = kc.work / "user.key", kc.work / "user.csr"
    run("openssl", "req", "-new", "-newkey", "ec",
        "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", req, "-subj", f"/O=skew/CN={name}")
    csr = {"apiVersion": "certificates.k8s.io/v1",
           "kind": "CertificateSigningRequest",
           "metadata": {"name": name},
           "spec": {"request": base64.b64encode(req.read_bytes()).decode(),
                    "signerName": CLIENT_SIGNER,
                    "expirationSeconds": 3600,
                    "usages": ["client auth"]}}
    out = kc("create", "-f", "-", input=yaml.safe_dump(csr)).stdout
    assert out.strip() == \
        f"certificatesigningrequest.certificates.k8s.io/{name} created", out
    row = row_named(kc("get", "csr", name).stdout, name)
    assert (row["SIGNERNAME"], row["REQUESTOR"], row["CONDITION"]) == \
        (CLIENT_SIGNER, "kubernetes-admin", "Pending"), row

    out = kc("certificate", "approve", name).stdout
    assert out.strip() == \
        f"certificatesigningrequest.certificates.k8s.io/{name} approved", out
    out = kc("wait", "--for=condition=Approved", f"csr/{name}",
             "--timeout=10s").stdout
    assert out.strip() == \
        f"certificatesigningrequest.certificates.k8s.io/{name} condition met", out
    conds = kc.json("get", "csr", name)["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in conds] == \
        [("Approved", "True", "KubectlApprove")], conds
    assert row_named(kc("get", "csr", name).stdout, name)["CONDITION"] == \
        "Approved"


def test_auth_whoami(kc):
    proc = kc("auth", "whoami", check=False)
    if kc.minor < 28:
        # kubectl 1.27 asks authentication.k8s.io/v1beta1 (then v1alpha1);
        # an upstream 1.32 server serves v1 only (beta APIs are off by
        # default), so kubectl says the API is not enabled.
        assert proc.returncode == 1, _describe(proc)
        assert "the selfsubjectreviews API is not enabled in the cluster" \
            in proc.stderr, _describe(proc)
        return
    assert proc.returncode == 0, _describe(proc)
    rows = dict(re.split(r"\s{2,}", l.strip(), 1)
                for l in proc.stdout.splitlines()[1:] if l.strip())
    assert rows.get("Username") == "kubernetes-admin", proc.stdout
    assert "system:masters" in rows.get("Groups", ""), proc.stdout
    review = kc.json("auth", "whoami")
    assert review["kind"] == "SelfSubjectReview", review
    assert review["status"]["userInfo"]["username"] == "kubernetes-admin", review
