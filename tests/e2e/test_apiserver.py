"""End-to-end tests of `cube apiserver` (issue 3).

A real `cube apiserver` is started on a loopback port over a `cube pki init`
cluster directory, and driven the way its users drive it: with the real
kubectl 1.32 (through the /usr/bin/kubectl version dispatcher), the official
Python client, curl, and raw HTTPS requests made with the admin, node,
bootstrap-token, expired, foreign and absent credentials.

Most tests share one server per module (each uses its own object names);
tests that need a clean state, kill the server or restart it get their own.
"""

import base64
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest
import yaml

KUBECTL = "/usr/bin/kubectl"
CORE = "/api/v1"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NODE_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"


# ----------------------------------------------------------------- helpers --

def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    """A MicroTime: exactly six fractional digits, as kubectl requires."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_manifest(name, ready=True, labels=None, taints=None,
                  unschedulable=None):
    """A Node as a kubelet registers it: addresses, nodeInfo, conditions."""
    status = "True" if ready else "False"
    node = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            **(labels or {})}},
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "kernelVersion": "6.1.0-18-amd64",
                "containerRuntimeVersion": "containerd://1.7.24",
                "architecture": "amd64", "operatingSystem": "linux",
                "machineID": "m", "systemUUID": "s", "bootID": "b"},
            "conditions": [{
                "type": "Ready", "status": status,
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status" if ready
                else "container runtime is down",
                "lastHeartbeatTime": now_rfc3339(),
                "lastTransitionTime": now_rfc3339()}],
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable is not None:
        node["spec"]["unschedulable"] = unschedulable
    return node


def pod_manifest(name, ns="default", node=None, labels=None,
                 containers=(("app", "nginx"),)):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns,
                        "labels": labels or {"app": name}},
           "spec": {"containers": [{"name": n, "image": i}
                                   for n, i in containers]}}
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def deployment_manifest(name, replicas=1, image="nginx"):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"app": name}},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [
                                      {"name": name, "image": image}]}}}}


def namespace_manifest(name):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name}}


def lease_manifest(node, ns="kube-node-lease"):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": ns},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
                     "renewTime": now_micro()}}


def csr_manifest(server, name, node):
    """A CertificateSigningRequest object carrying a real node CSR."""
    d = server.parent / "csr" / name
    d.mkdir(parents=True)
    server._cube("certs", "new-csr", "--node", node, "--key-out",
                 d / "key.pem", "--out", d / "req.pem")
    return {"apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(
                (d / "req.pem").read_bytes()).decode(),
                "signerName": NODE_SIGNER,
                "usages": ["digital signature", "client auth"]}}


def parse_table(text):
    """kubectl's column output as a list of dicts keyed by header."""
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        return []
    header = lines[0]
    cols = [(m.start(), m.group()) for m in
            re.finditer(r"\S+(?: \S+)*", header)]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (start, name) in enumerate(cols):
            end = cols[i + 1][0] if i + 1 < len(cols) else None
            row[name] = line[start:end].strip()
        rows.append(row)
    return rows


def header_of(text):
    return re.split(r"\s{2,}", text.splitlines()[0].strip())


def row_named(text, name, key="NAME"):
    rows = [r for r in parse_table(text) if r.get(key) == name]
    assert rows, f"no row {key}={name} in:\n{text}"
    return rows[0]


def rv(obj):
    return int(obj["metadata"]["resourceVersion"])


def assert_status(resp, code, reason=None, message=None):
    """resp is a Status with this code (and reason, and message substring)."""
    assert resp.status == code, f"expected HTTP {code}, got {resp!r}"
    st = resp.json()
    assert st.get("kind") == "Status" and st.get("apiVersion") == "v1", \
        f"not a Status object: {st}"
    assert st.get("status") == "Failure", st
    assert st.get("code") == code, st
    if reason:
        assert st.get("reason") == reason, st
    if message:
        assert message in st.get("message", ""), \
            f"message {st.get('message')!r} lacks {message!r}"
    return st


class Streamer:
    """The lines of a background process's stdout, collected by a thread."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def snapshot(self):
        with self._lock:
            return list(self.lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(5)
        return self.proc.stderr.read() if self.proc.stderr else ""


def open_watch(server, path, auth="admin", timeout=10):
    """A raw watch: (connection, response) with the stream open."""
    conn = server.connect(auth, timeout=timeout)
    conn.request("GET", path, headers=server.headers_for(auth))
    resp = conn.getresponse()
    assert resp.status == 200, f"watch {path}: HTTP {resp.status} {resp.read()[:500]!r}"
    return conn, resp


def read_events(resp, count=None, until=None):
    """Watch events, parsed, until count are read, until(event) is true,
    or the stream ends."""
    events = []
    while count is None or len(events) < count:
        line = resp.readline()
        if not line:
            break
        if not line.strip():
            continue
        ev = json.loads(line)
        events.append(ev)
        if until and until(ev):
            break
    return events


# ---------------------------------------------------------------- fixtures --

@pytest.fixture(scope="module")
def server(make_apiserver, tmp_path_factory):
    """One apiserver shared by this module's read-mostly tests."""
    s = make_apiserver(tmp_path_factory.mktemp("apiserver"))
    yield s
    rc = s.stop()
    assert rc == 0, f"cube apiserver exited {rc} on SIGTERM\n{s.log()[-3000:]}"


@pytest.fixture
def kubectl_env(run, tmp_path):
    """The environment `run` gives commands (its HOME, made by `run`), for
    kubectl started in the background with Popen."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "CUBE_CLOCK_OFFSET")}
    env.update(HOME=str(home), LC_ALL="C")
    return env


@pytest.fixture
def kubectl_for(run):
    """kubectl_for(server) -> kubectl(*args, check=True, input=None)."""
    def bind(srv, kubeconfig=None):
        conf = kubeconfig or srv.admin_conf

        def kubectl(*args, check=True, input=None, timeout=60):
            if isinstance(input, (dict, list)):
                input = yaml.safe_dump(input)
            return run(KUBECTL, *args, check=check, input=input,
                       timeout=timeout, env={"KUBECONFIG": conf})
        return kubectl
    return bind


@pytest.fixture
def kubectl(kubectl_for, server):
    """kubectl(*args) against the module's server as kubernetes-admin."""
    return kubectl_for(server)


@pytest.fixture
def popen_kubectl(kubectl_env, server):
    """kubectl in the background: returns a Streamer of its stdout."""
    started = []

    def start(*args, kubeconfig=None):
        env = dict(kubectl_env, KUBECONFIG=str(kubeconfig or server.admin_conf))
        proc = subprocess.Popen([KUBECTL, *map(str, args)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        s = Streamer(proc)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture
def curl(run, server, tmp_path):
    """curl(method, path, data=None, ctype=..., identity="admin",
    token=None, srv=None) -> (curl exit status, HTTP code, body text).
    identity is "admin", None (no client certificate) or (cert, key);
    data may be a JSON-able value, a string, or "@file"."""
    counter = [0]

    def _curl(method, path, data=None, ctype="application/json",
              identity="admin", token=None, srv=None):
        srv = srv or server
        counter[0] += 1
        out = tmp_path / f"curl-body-{counter[0]}"
        argv = ["curl", "-sS", "--cacert", srv.ca, "-X", method,
                "-o", out, "-w", "%{http_code}"]
        if identity == "admin":
            identity = srv.admin
        if identity:
            argv += ["--cert", identity[0], "--key", identity[1]]
        if token:
            argv += ["-H", f"Authorization: Bearer {token}"]
        if data is not None:
            if not isinstance(data, str):
                data = json.dumps(data)
            argv += ["-H", f"Content-Type: {ctype}", "--data-binary", data]
        argv.append(srv.url + path)
        proc = run(*argv, check=False)
        body = out.read_text() if out.exists() else ""
        return proc.returncode, int(proc.stdout.strip() or 0), body
    return _curl


@pytest.fixture(scope="module")
def nodes_for_get(server):
    """Two nodes, created with kubectl from YAML, that no test changes."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(KUBECONFIG=str(server.admin_conf), HOME=str(server.parent))
    docs = [node_manifest("get-node-a", ready=True,
                          labels={"zone": "a",
                                  "node-role.kubernetes.io/worker": ""}),
            node_manifest("get-node-b", ready=False, labels={"zone": "b"})]
    proc = subprocess.run([KUBECTL, "create", "-f", "-"], env=env, text=True,
                          input=yaml.safe_dump_all(docs), capture_output=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "node/get-node-a created" in proc.stdout
    return ["get-node-a", "get-node-b"]


def create(kubectl, *docs):
    """kubectl create -f - of manifests; returns stdout."""
    return kubectl("create", "-f", "-",
                   input=yaml.safe_dump_all(list(docs))).stdout


def get_json(kubectl, *args):
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


# ============================================================ kubectl: read --

def test_kubectl_version_reports_cube_1_32(kubectl):
    out = kubectl("version").stdout
    assert "Server Version: v1.32.0-cube" in out, out
    info = json.loads(kubectl("version", "-o", "json").stdout)
    assert info["serverVersion"]["major"] == "1"
    assert info["serverVersion"]["minor"] == "32"


def test_runs_on_jemalloc_with_background_purging(cube, server, run):
    """The executable is linked with jemalloc, whose background threads hand
    freed pages back (base/heap.h): `cube version` says so, and the running
    server has the threads (jemalloc names them)."""
    out = run(cube, "version").stdout
    assert re.search(r"^heap: jemalloc 5\.\S+, free pages returned by "
                     r"background threads$", out, re.M), out
    task = f"/proc/{server.proc.pid}/task"
    names = [open(f"{task}/{t}/comm").read().strip() for t in os.listdir(task)]
    assert "jemalloc_bg_thd" in names, names


def test_api_resources_lists_kinds_with_short_names(kubectl):
    out = kubectl("api-resources").stdout
    assert header_of(out) == ["NAME", "SHORTNAMES", "APIVERSION",
                              "NAMESPACED", "KIND"], out
    rows = {r["NAME"]: r for r in parse_table(out)}
    expected = {
        "nodes": ("no", "v1", "false", "Node"),
        "pods": ("po", "v1", "true", "Pod"),
        "events": ("ev", "v1", "true", "Event"),
        "certificatesigningrequests": ("csr", "certificates.k8s.io/v1",
                                       "false", "CertificateSigningRequest"),
        "deployments": ("deploy", "apps/v1", "true", "Deployment"),
        "replicasets": ("rs", "apps/v1", "true", "ReplicaSet"),
        "leases": ("", "coordination.k8s.io/v1", "true", "Lease"),
        "namespaces": ("ns", "v1", "false", "Namespace"),
    }
    for name, (short, version, namespaced, kind) in expected.items():
        assert name in rows, f"api-resources lacks {name}:\n{out}"
        r = rows[name]
        assert (r["SHORTNAMES"], r["APIVERSION"], r["NAMESPACED"],
                r["KIND"]) == (short, version, namespaced, kind), r


def test_get_nodes_default_columns(kubectl, nodes_for_get):
    out = kubectl("get", "nodes").stdout
    assert header_of(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], out
    a = row_named(out, "get-node-a")
    assert (a["STATUS"], a["ROLES"], a["VERSION"]) == \
        ("Ready", "worker", "v1.32.0"), a
    assert re.fullmatch(r"\d+s|\d+m\d*s?", a["AGE"]), a
    b = row_named(out, "get-node-b")
    assert (b["STATUS"], b["ROLES"]) == ("NotReady", "<none>"), b
    # The short name resolves to the same resource.
    assert "get-node-a" in kubectl("get", "no").stdout


def test_get_nodes_wide(kubectl, nodes_for_get):
    out = kubectl("get", "nodes", "-o", "wide").stdout
    assert header_of(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION",
                              "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                              "KERNEL-VERSION", "CONTAINER-RUNTIME"], out
    a = row_named(out, "get-node-a")
    assert a["INTERNAL-IP"] == "10.0.0.11"
    assert a["EXTERNAL-IP"] == "<none>"
    assert a["OS-IMAGE"] == "Debian GNU/Linux 12 (bookworm)"
    assert a["KERNEL-VERSION"] == "6.1.0-18-amd64"
    assert a["CONTAINER-RUNTIME"] == "containerd://1.7.24"


def test_get_node_yaml_and_json(kubectl, nodes_for_get):
    doc = yaml.safe_load(kubectl("get", "node", "get-node-a", "-o", "yaml").stdout)
    assert doc["kind"] == "Node" and doc["apiVersion"] == "v1"
    assert doc["metadata"]["name"] == "get-node-a"
    assert doc["metadata"]["uid"] and doc["metadata"]["resourceVersion"]
    assert doc["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"
    listed = get_json(kubectl, "nodes")
    assert listed["kind"] == "List"
    names = [n["metadata"]["name"] for n in listed["items"]]
    assert {"get-node-a", "get-node-b"} <= set(names), names
    assert all(n["kind"] == "Node" for n in listed["items"])


def test_get_nodes_jsonpath(kubectl, nodes_for_get):
    out = kubectl("get", "nodes", "get-node-a", "-o",
                  "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"
                  " {.status.addresses[0].address}").stdout
    assert out == "True 10.0.0.11", out
    names = kubectl("get", "nodes", "-o",
                    "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"
                    ).stdout.split()
    assert {"get-node-a", "get-node-b"} <= set(names), names


def test_get_nodes_show_labels_and_label_selector(kubectl, nodes_for_get):
    out = kubectl("get", "nodes", "--show-labels").stdout
    assert header_of(out)[-1] == "LABELS", out
    labels = row_named(out, "get-node-a")["LABELS"].split(",")
    assert "zone=a" in labels and "kubernetes.io/hostname=get-node-a" in labels
    out = kubectl("get", "nodes", "-l", "zone=b").stdout
    assert [r["NAME"] for r in parse_table(out)] == ["get-node-b"], out
    out = kubectl("get", "nodes", "-l", "zone in (a,b),zone!=a").stdout
    assert [r["NAME"] for r in parse_table(out)] == ["get-node-b"], out


def test_get_pods_all_namespaces(kubectl):
    create(kubectl, namespace_manifest("team-a"), namespace_manifest("team-b"))
    create(kubectl, pod_manifest("web", ns="team-a"),
           pod_manifest("db", ns="team-b"))
    out = kubectl("get", "pods", "-A").stdout
    assert header_of(out) == ["NAMESPACE", "NAME", "READY", "STATUS",
                              "RESTARTS", "AGE"], out
    rows = {(r["NAMESPACE"], r["NAME"]) for r in parse_table(out)}
    assert {("team-a", "web"), ("team-b", "db")} <= rows, out
    web = row_named(out, "web")
    assert (web["READY"], web["STATUS"], web["RESTARTS"]) == \
        ("0/1", "Pending", "0"), web
    # Without -A only the namespace asked for.
    out = kubectl("get", "po", "-n", "team-a").stdout
    assert [r["NAME"] for r in parse_table(out)] == ["web"], out


def test_get_pods_field_selector_node_name(kubectl):
    create(kubectl, namespace_manifest("fs"),
           pod_manifest("on-1", ns="fs", node="fs-node-1"),
           pod_manifest("on-2", ns="fs", node="fs-node-2"),
           pod_manifest("nowhere", ns="fs"))
    out = kubectl("get", "pods", "-A", "--field-selector",
                  "spec.nodeName=fs-node-1").stdout
    assert [r["NAME"] for r in parse_table(out)] == ["on-1"], out
    out = kubectl("get", "pods", "-n", "fs", "-o", "wide",
                  "--field-selector", "spec.nodeName!=fs-node-1").stdout
    assert header_of(out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE",
                              "IP", "NODE", "NOMINATED NODE",
                              "READINESS GATES"], out
    nodes = {r["NAME"]: r["NODE"] for r in parse_table(out)}
    assert nodes == {"on-2": "fs-node-2", "nowhere": "<none>"}, out


def test_get_pod_output_formats(kubectl):
    create(kubectl, pod_manifest("formats", labels={"app": "formats",
                                                    "tier": "web"}))
    doc = yaml.safe_load(kubectl("get", "pod", "formats", "-o", "yaml").stdout)
    assert doc["kind"] == "Pod" and doc["spec"]["containers"][0]["image"] == "nginx"
    doc = get_json(kubectl, "pod", "formats")
    assert doc["metadata"]["namespace"] == "default"
    out = kubectl("get", "pod", "formats", "-o",
                  "jsonpath={.metadata.labels.tier}").stdout
    assert out == "web"
    out = kubectl("get", "pods", "-l", "tier=web", "--show-labels").stdout
    row = row_named(out, "formats")
    assert set(row["LABELS"].split(",")) == {"app=formats", "tier=web"}, out


def _event(name, ns, node):
    ts = now_rfc3339()
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": "Node", "name": node, "uid": node},
            "reason": "NodeReady", "type": "Normal",
            "message": f"Node {node} status is now: NodeReady",
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": ts, "lastTimestamp": ts, "count": 1}


def _replicaset(name):
    d = deployment_manifest(name, replicas=2)
    d["kind"] = "ReplicaSet"
    return d


# (kubectl get arguments, manifests to create, header, row name, cells)
GET_CASES = {
    "csr": (["csr"], lambda s: [csr_manifest(s, "csr-get", "csr-node")],
            ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION",
             "CONDITION"], "csr-get",
            {"SIGNERNAME": NODE_SIGNER, "REQUESTOR": "kubernetes-admin",
             "REQUESTEDDURATION": "<none>", "CONDITION": "Pending"}),
    "leases": (["leases", "-A"], lambda s: [lease_manifest("lease-node")],
               ["NAMESPACE", "NAME", "HOLDER", "AGE"], "lease-node",
               {"NAMESPACE": "kube-node-lease", "HOLDER": "lease-node"}),
    "events": (["events", "-A"],
               lambda s: [_event("ev-node.1", "default", "ev-node")],
               ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT",
                "MESSAGE"], None,
               {"NAMESPACE": "default", "TYPE": "Normal", "REASON": "NodeReady",
                "OBJECT": "node/ev-node",
                "MESSAGE": "Node ev-node status is now: NodeReady"}),
    "deploy": (["deploy"], lambda s: [deployment_manifest("get-deploy", 2)],
               ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
               "get-deploy", {"READY": "0/2"}),
    "rs": (["rs"], lambda s: [_replicaset("get-rs")],
           ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], "get-rs",
           {"DESIRED": "2"}),
}


@pytest.mark.parametrize("case", list(GET_CASES))
def test_get_resource_table(kubectl, server, case):
    args, manifests, header, name, cells = GET_CASES[case]
    create(kubectl, *manifests(server))
    out = kubectl("get", *args).stdout
    assert header_of(out) == header, out
    rows = parse_table(out)
    if name:
        rows = [r for r in rows if r["NAME"] == name]
    else:
        rows = [r for r in rows if r["OBJECT"] == cells["OBJECT"]]
    assert len(rows) == 1, f"expected one matching row:\n{out}"
    for k, v in cells.items():
        assert rows[0][k] == v, f"{k}: {rows[0][k]!r} != {v!r}\n{out}"
    # -o wide adds the priority-1 columns and keeps the others.
    wide = kubectl("get", *args, "-o", "wide").stdout
    assert set(header) <= set(header_of(wide)), wide


def test_get_missing_object_is_not_found(kubectl):
    p = kubectl("get", "pod", "nope", check=False)
    assert p.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in p.stderr, p.stderr


# ========================================================== kubectl: watch --

def test_get_pods_watch_prints_new_and_changed_pods(kubectl, popen_kubectl,
                                                     wait_until):
    create(kubectl, namespace_manifest("watched"))
    create(kubectl, pod_manifest("first", ns="watched"))
    w = popen_kubectl("get", "pods", "-n", "watched", "-w")

    def lines_for(name):
        return [l for l in w.snapshot() if l.split()[:1] == [name]]

    wait_until(lambda: lines_for("first"),
               message=lambda: f"the existing pod's row; saw {w.snapshot()}")
    assert w.snapshot()[0].split()[:2] == ["NAME", "READY"], w.snapshot()
    create(kubectl, pod_manifest("second", ns="watched"))
    wait_until(lambda: lines_for("second"),
               message=lambda: f"the new pod's row; saw {w.snapshot()}")
    kubectl("label", "pod", "second", "-n", "watched", "changed=yes")
    wait_until(lambda: len(lines_for("second")) >= 2,
               message=lambda: f"a row for the change; saw {w.snapshot()}")
    assert "Pending" in lines_for("second")[-1]
    # One header only: every event came back as a Table row.
    assert sum(l.split()[:1] == ["NAME"] for l in w.snapshot()) == 1, w.snapshot()
    assert w.proc.poll() is None, "kubectl get -w ended on its own"


def test_get_single_pod_watch_prints_its_changes(kubectl, popen_kubectl,
                                                  wait_until):
    """`get pod P -w` drops the first (synthetic ADDED) event on purpose;
    the real change after it must still be printed."""
    create(kubectl, pod_manifest("solo"))
    w = popen_kubectl("get", "pod", "solo", "-w")

    def rows():
        return [l for l in w.snapshot() if l.split()[:1] == ["solo"]]

    wait_until(lambda: rows(), message=lambda: f"solo's row; saw {w.snapshot()}")
    # kubectl's watch opens a moment after its GET; keep changing the pod
    # until a change arrives through the watch.
    step = iter(range(1000))

    def changed():
        kubectl("label", "pod", "solo", f"step={next(step)}", "--overwrite")
        return len(rows()) >= 2

    wait_until(changed, timeout=15, message=lambda: f"a row for the change; "
               f"saw {w.snapshot()}")


# ======================================================= kubectl: describe --

def test_describe_node_shows_conditions_taints_pods_and_lease(kubectl):
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    create(kubectl, node_manifest("desc-node", taints=[taint]))
    create(kubectl, pod_manifest("desc-pod", node="desc-node"))
    create(kubectl, lease_manifest("desc-node"))
    out = kubectl("describe", "node", "desc-node").stdout
    assert re.search(r"(?m)^Name:\s+desc-node$", out), out
    assert re.search(r"(?m)^Taints:\s+dedicated=db:NoSchedule$", out), out
    assert re.search(r"(?m)^Unschedulable:\s+false$", out), out
    assert re.search(r"(?m)^\s+Ready\s+True\s+.*KubeletReady\s+kubelet is "
                     r"posting ready status$", out), out
    assert re.search(r"(?m)^Lease:\s*$", out), out
    assert re.search(r"(?m)^\s+HolderIdentity:\s+desc-node$", out), out
    assert re.search(r"(?m)^\s+RenewTime:\s+\S+", out), out
    assert "Failed to get lease" not in out, out
    assert re.search(r"(?m)^Non-terminated Pods:\s+\(1 in total\)$", out), out
    assert re.search(r"(?m)^\s+default\s+desc-pod\s+", out), out
    assert re.search(r"(?m)^\s+InternalIP:\s+10\.0\.0\.11$", out), out
    assert re.search(r"(?m)^\s+Kubelet Version:\s+v1\.32\.0$", out), out


# ========================================================= kubectl: create --

def test_create_f_and_again_is_already_exists(kubectl, tmp_path):
    f = tmp_path / "objects.yaml"
    f.write_text(yaml.safe_dump_all([deployment_manifest("created"),
                                     pod_manifest("created-pod")]))
    out = kubectl("create", "-f", f).stdout
    assert "deployment.apps/created created" in out, out
    assert "pod/created-pod created" in out, out
    again = kubectl("create", "-f", f, check=False)
    assert again.returncode == 1
    assert ('Error from server (AlreadyExists): error when creating "%s": '
            'deployments.apps "created" already exists' % f) in again.stderr, \
        again.stderr
    assert 'pods "created-pod" already exists' in again.stderr, again.stderr


@pytest.mark.parametrize("kind", ["deployment", "pod"])
def test_apply_created_configured_unchanged(kubectl, tmp_path, kind):
    f = tmp_path / "m.yaml"
    if kind == "deployment":
        doc, ref = deployment_manifest("applied", replicas=1), "deployment.apps/applied"
    else:
        doc, ref = pod_manifest("applied-pod"), "pod/applied-pod"
    f.write_text(yaml.safe_dump(doc))
    assert kubectl("apply", "-f", f).stdout.strip() == f"{ref} created"
    if kind == "deployment":
        doc["spec"]["replicas"] = 3
        doc["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    else:
        doc["metadata"]["labels"]["version"] = "2"
    f.write_text(yaml.safe_dump(doc))
    assert kubectl("apply", "-f", f).stdout.strip() == f"{ref} configured"
    assert kubectl("apply", "-f", f).stdout.strip() == f"{ref} unchanged"
    live = get_json(kubectl, ref)
    if kind == "deployment":
        assert live["spec"]["replicas"] == 3
        assert [(c["name"], c["image"]) for c in live["spec"]["template"][
            "spec"]["containers"]] == [("applied", "nginx:1.27")]
        assert live["metadata"]["generation"] == 2
    else:
        assert live["metadata"]["labels"]["version"] == "2"
    assert "kubectl.kubernetes.io/last-applied-configuration" in \
        live["metadata"]["annotations"]


def test_create_deployment_from_flags(kubectl):
    out = kubectl("create", "deployment", "web", "--image=nginx",
                  "--replicas=3").stdout
    assert out.strip() == "deployment.apps/web created"
    d = get_json(kubectl, "deploy", "web")
    assert d["spec"]["replicas"] == 3
    assert d["spec"]["selector"]["matchLabels"] == {"app": "web"}
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    c = d["spec"]["template"]["spec"]["containers"]
    assert [(x["name"], x["image"]) for x in c] == [("nginx", "nginx")]
    again = kubectl("create", "deployment", "web", "--image=nginx", check=False)
    assert again.returncode == 1
    assert 'deployments.apps "web" already exists' in again.stderr


def test_scale_deployment(kubectl, show):
    kubectl("create", "deployment", "scaled", "--image=nginx")
    p = kubectl("scale", "deployment", "scaled", "--replicas=4", check=False)
    assert p.returncode == 0 and p.stdout.strip() == \
        "deployment.apps/scaled scaled", show(p)
    assert get_json(kubectl, "deploy", "scaled")["spec"]["replicas"] == 4


@pytest.mark.parametrize("args,ref", [
    (["namespace", "made-by-flags"], "namespace/made-by-flags"),
    (["configmap", "cm-by-flags", "--from-literal=a=b"],
     "configmap/cm-by-flags"),
    (["secret", "generic", "secret-by-flags", "--from-literal=a=b"],
     "secret/secret-by-flags"),
], ids=["namespace", "configmap", "secret"])
def test_create_from_flags(kubectl, show, args, ref):
    """Typed kubectl create sends protobuf bodies (kubectl-wire.md 0.3)."""
    p = kubectl("create", *args, check=False)
    assert p.returncode == 0 and p.stdout.strip() == f"{ref} created", show(p)
    assert kubectl("get", ref, "-o", "name").stdout.strip() == ref


# ========================================================== kubectl: patch --

POD_PATCHES = {
    # Strategic merge: containers merge by name; the other container stays.
    "strategic": ('{"spec":{"containers":[{"name":"b","image":"busybox:2"}]}}',
                  lambda p: [(c["name"], c["image"]) for c in
                             p["spec"]["containers"]]
                  == [("a", "nginx"), ("b", "busybox:2")]),
    "merge": ('{"metadata":{"labels":{"patched":"merge","app":null}}}',
              lambda p: p["metadata"]["labels"] == {"patched": "merge"}),
    "json": ('[{"op":"add","path":"/metadata/labels/patched","value":"json"},'
             '{"op":"replace","path":"/spec/containers/0/image","value":"nginx:2"}]',
             lambda p: p["metadata"]["labels"]["patched"] == "json"
             and p["spec"]["containers"][0]["image"] == "nginx:2"),
}


@pytest.mark.parametrize("ptype", list(POD_PATCHES))
def test_patch_pod(kubectl, ptype):
    name = f"patch-{ptype}"
    create(kubectl, pod_manifest(name, containers=(("a", "nginx"),
                                                   ("b", "busybox"))))
    body, check = POD_PATCHES[ptype]
    # Strategic merge is kubectl's default: no --type for it.
    how = [] if ptype == "strategic" else ["--type", ptype]
    out = kubectl("patch", "pod", name, *how, "-p", body).stdout
    assert out.strip() == f"pod/{name} patched", out
    pod = get_json(kubectl, "pod", name)
    assert check(pod), json.dumps(pod, indent=1)
    # The same patch again changes nothing, not even the resourceVersion.
    if ptype != "json":
        out = kubectl("patch", "pod", name, *how, "-p", body).stdout
        assert out.strip() == f"pod/{name} patched (no change)", out


POD_UPDATE_FORBIDDEN = ("pod updates may not change fields other than "
                        "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                        "`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                        "additions to existing tolerations),"
                        "`spec.terminationGracePeriodSeconds` (allow it to be set "
                        "to 1 if it was previously negative)")


def test_pod_update_may_change_only_what_upstream_allows(kubectl):
    """ValidatePodUpdate: images, a shorter activeDeadlineSeconds, added
    tolerations; everything else in the spec is Forbidden with upstream's
    text, and the pod is left as it was."""
    name = "update-rules"
    create(kubectl, pod_manifest(name))
    before = get_json(kubectl, "pod", name)
    r = kubectl("patch", "pod", name, "-p",
                '{"spec":{"restartPolicy":"Never"}}', check=False)
    assert r.returncode != 0
    assert (f'The Pod "{name}" is invalid: spec: Forbidden: '
            + POD_UPDATE_FORBIDDEN) in r.stderr, r.stderr
    assert '"Always"' in r.stderr and '"Never"' in r.stderr, r.stderr
    r = kubectl("patch", "pod", name, "--type", "json", "-p",
                '[{"op":"add","path":"/spec/containers/-",'
                '"value":{"name":"extra","image":"busybox"}}]', check=False)
    assert "spec.containers: Forbidden: pod updates may not add or remove " \
        "containers" in r.stderr, r.stderr
    assert get_json(kubectl, "pod", name)["spec"] == before["spec"]
    # What may change does.
    kubectl("patch", "pod", name, "-p",
            '{"spec":{"activeDeadlineSeconds":600,'
            '"containers":[{"name":"app","image":"nginx:2"}]}}')
    r = kubectl("patch", "pod", name, "-p",
                '{"spec":{"activeDeadlineSeconds":601}}', check=False)
    assert "spec.activeDeadlineSeconds: Invalid value: 601: must be less " \
        "than or equal to previous value" in r.stderr, r.stderr
    r = kubectl("patch", "pod", name, "--type", "json", "-p",
                '[{"op":"add","path":"/spec/schedulingGates",'
                '"value":[{"name":"late"}]}]', check=False)
    assert "spec.schedulingGates[0].name: Forbidden: only deletion is " \
        "allowed, but found new scheduling gate 'late'" in r.stderr, r.stderr


def test_pod_toleration_update_plan_3(kubectl):
    """The seeds' plan 3 patch replaces the tolerations list; upstream
    accepts it because DefaultTolerationSeconds runs on update too and puts
    back the not-ready toleration the patch dropped, and the unreachable one
    only lost its tolerationSeconds. Dropping a toleration is Forbidden."""
    name = "plan-3"
    create(kubectl, pod_manifest(name))
    tols = get_json(kubectl, "pod", name)["spec"]["tolerations"]
    assert sorted((t["key"], t["tolerationSeconds"]) for t in tols) == [
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300)], tols
    out = kubectl("patch", "pod", name, "-p",
                  '{"spec":{"tolerations":[{"key":"node.kubernetes.io/'
                  'unreachable","operator":"Exists","effect":"NoExecute"}]}}')
    assert out.stdout.strip() == f"pod/{name} patched", out
    tols = get_json(kubectl, "pod", name)["spec"]["tolerations"]
    assert tols == [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "effect": "NoExecute"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
         "effect": "NoExecute", "tolerationSeconds": 300}], tols
    # A toleration the user added cannot be taken away again.
    kubectl("patch", "pod", name, "--type", "json", "-p",
            '[{"op":"add","path":"/spec/tolerations/-","value":'
            '{"key":"dedicated","operator":"Equal","value":"db",'
            '"effect":"NoSchedule"}}]')
    r = kubectl("patch", "pod", name, "-p",
                '{"spec":{"tolerations":[{"key":"node.kubernetes.io/'
                'unreachable","operator":"Exists","effect":"NoExecute"}]}}',
                check=False)
    assert r.returncode != 0
    assert (f'The Pod "{name}" is invalid: spec.tolerations: Forbidden: '
            "existing toleration can not be modified except its "
            "tolerationSeconds") in r.stderr, r.stderr


NODE_PATCHES = {
    "strategic": '{"metadata":{"labels":{"patched":"strategic"}},'
                 '"spec":{"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]}}',
    "merge": '{"metadata":{"labels":{"patched":"merge"}},'
             '"spec":{"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]}}',
    "json": '[{"op":"add","path":"/metadata/labels/patched","value":"json"},'
            '{"op":"add","path":"/spec/taints",'
            '"value":[{"key":"k","value":"v","effect":"NoSchedule"}]}]',
}


@pytest.mark.parametrize("ptype", list(NODE_PATCHES))
def test_patch_node(kubectl, ptype):
    name = f"patch-node-{ptype}"
    create(kubectl, node_manifest(name, taints=[
        {"key": "old", "effect": "NoExecute"}]))
    how = [] if ptype == "strategic" else ["--type", ptype]
    out = kubectl("patch", "node", name, *how, "-p", NODE_PATCHES[ptype]).stdout
    assert out.strip() == f"node/{name} patched", out
    node = get_json(kubectl, "node", name)
    assert node["metadata"]["labels"]["patched"] == ptype
    # Taints have no merge key: the list is replaced whole.
    assert node["spec"]["taints"] == [{"key": "k", "value": "v",
                                       "effect": "NoSchedule"}], node["spec"]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"


def test_label_and_annotate(kubectl):
    create(kubectl, pod_manifest("labelled"), node_manifest("labelled-node"))
    assert kubectl("label", "pod", "labelled", "env=prod").stdout.strip() == \
        "pod/labelled labeled"
    assert kubectl("annotate", "pod", "labelled", "note=hello").stdout.strip() \
        == "pod/labelled annotated"
    assert kubectl("label", "node", "labelled-node", "rack=r1").stdout.strip() \
        == "node/labelled-node labeled"
    pod = get_json(kubectl, "pod", "labelled")
    assert pod["metadata"]["labels"]["env"] == "prod"
    assert pod["metadata"]["annotations"]["note"] == "hello"
    assert parse_table(kubectl("get", "nodes", "-l", "rack=r1").stdout)[0][
        "NAME"] == "labelled-node"
    refused = kubectl("label", "pod", "labelled", "env=dev", check=False)
    assert refused.returncode == 1 and "--overwrite is false" in refused.stderr
    assert kubectl("label", "pod", "labelled", "env-").stdout.strip() == \
        "pod/labelled unlabeled"
    assert "env" not in get_json(kubectl, "pod", "labelled")["metadata"]["labels"]


def test_cordon_and_uncordon(kubectl):
    create(kubectl, node_manifest("cordoned"))
    assert kubectl("cordon", "cordoned").stdout.strip() == "node/cordoned cordoned"
    row = row_named(kubectl("get", "nodes").stdout, "cordoned")
    assert row["STATUS"] == "Ready,SchedulingDisabled", row
    assert get_json(kubectl, "node", "cordoned")["spec"]["unschedulable"] is True
    assert kubectl("cordon", "cordoned").stdout.strip() == \
        "node/cordoned already cordoned"
    assert kubectl("uncordon", "cordoned").stdout.strip() == \
        "node/cordoned uncordoned"
    row = row_named(kubectl("get", "nodes").stdout, "cordoned")
    assert row["STATUS"] == "Ready", row
    assert "unschedulable" not in get_json(kubectl, "node", "cordoned")["spec"]


def test_taint_add_and_remove(kubectl):
    create(kubectl, node_manifest("tainted"))
    # TaintNodesByCondition: a new Node is not-ready:NoSchedule until the node
    # lifecycle controller (not running here) sees it Ready.
    assert get_json(kubectl, "node", "tainted")["spec"]["taints"] == \
        [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    kubectl("taint", "nodes", "tainted", "node.kubernetes.io/not-ready:NoSchedule-")
    assert kubectl("taint", "nodes", "tainted", "k1=v1:NoSchedule").stdout.strip() \
        == "node/tainted tainted"
    kubectl("taint", "nodes", "tainted", "k2=v2:NoExecute")

    def taints():
        t = get_json(kubectl, "node", "tainted")["spec"].get("taints", [])
        return sorted((x["key"], x.get("value"), x["effect"]) for x in t)

    assert taints() == [("k1", "v1", "NoSchedule"), ("k2", "v2", "NoExecute")]
    dup = kubectl("taint", "nodes", "tainted", "k1=v1:NoSchedule", check=False)
    assert dup.returncode == 1 and "already has k1 taint" in dup.stderr
    assert kubectl("taint", "nodes", "tainted", "k1=v1:NoSchedule-").stdout.strip() \
        == "node/tainted untainted"
    assert taints() == [("k2", "v2", "NoExecute")]
    kubectl("taint", "nodes", "tainted", "k2:NoExecute-")
    assert taints() == []
    out = kubectl("describe", "node", "tainted").stdout
    assert re.search(r"(?m)^Taints:\s+<none>$", out), out


# ========================================================= kubectl: delete --

def test_delete_bound_pod_is_graceful_until_the_node_confirms(kubectl, server):
    node = "grace-node"
    create(kubectl, pod_manifest("graceful", node=node))
    out = kubectl("delete", "pod", "graceful", "--wait=false").stdout
    assert out.strip() == 'pod "graceful" deleted'
    row = row_named(kubectl("get", "pods").stdout, "graceful")
    assert row["STATUS"] == "Terminating", row
    pod = get_json(kubectl, "pod", "graceful")
    assert pod["metadata"]["deletionTimestamp"]
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    # The kubelet of that node confirms: then the pod is gone.
    r = server.request("DELETE", f"{CORE}/namespaces/default/pods/graceful"
                       "?gracePeriodSeconds=0", auth=server.node_identity(node))
    assert r.status == 200, r
    gone = kubectl("get", "pod", "graceful", check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr, gone.stderr


@pytest.mark.parametrize("first", ["kubelet", "finalizer"])
def test_bound_pod_with_a_finalizer_goes_when_both_let_go(kubectl, server, first):
    """A bound pod held by a finalizer (a Job's job-tracking one) goes only
    once its kubelet confirmed and the finalizer is off, in either order:
    taking the finalizer off mid-grace does not cut the kubelet short, and
    the kubelet's confirmation brings the grace period down to 0 so the
    finalizer's removal then deletes it (upstream's ShouldDeleteDuringUpdate)."""
    node, name = "held-node", f"held-{first}"
    pod = pod_manifest(name, node=node)
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    create(kubectl, pod)
    kubectl("delete", "pod", name, "--wait=false")

    def confirm():
        r = server.request("DELETE", f"{CORE}/namespaces/default/pods/{name}"
                           "?gracePeriodSeconds=0", auth=server.node_identity(node))
        assert r.status == 200, r

    def release():
        kubectl("patch", "pod", name, "--type=json", "-p",
                '[{"op":"remove","path":"/metadata/finalizers/0"}]')

    steps = (confirm, release) if first == "kubelet" else (release, confirm)
    steps[0]()
    left = get_json(kubectl, "pod", name)
    assert left["metadata"]["deletionTimestamp"], left["metadata"]
    if first == "kubelet":
        assert left["metadata"]["deletionGracePeriodSeconds"] == 0
    steps[1]()
    gone = kubectl("get", "pod", name, check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr, gone.stderr


def test_delete_waits_until_the_node_confirms(kubectl, server, popen_kubectl,
                                              wait_until):
    node = "grace-node"
    create(kubectl, pod_manifest("awaited", node=node))
    d = popen_kubectl("delete", "pod", "awaited")
    path = f"{CORE}/namespaces/default/pods/awaited"
    wait_until(lambda: server.request("GET", path).json()["metadata"].get(
        "deletionTimestamp"), message="the pod to be marked for deletion")
    # kubectl lists the pod by name, then watches for its DELETED event.
    wait_until(lambda: "fieldSelector=metadata.name%3Dawaited&limit=500"
               in server.log(), message="kubectl delete's list of the pod")
    assert d.proc.poll() is None, "kubectl delete returned before the kubelet confirmed"
    r = server.request("DELETE", path + "?gracePeriodSeconds=0",
                       auth=server.node_identity(node))
    assert r.status == 200, r
    wait_until(lambda: d.proc.poll() is not None, timeout=20,
               message="kubectl delete to return after the confirmation")
    err = d.stop()
    assert d.proc.returncode == 0, err
    assert d.snapshot() == ['pod "awaited" deleted'], d.snapshot()


def test_delete_force_removes_a_bound_pod_at_once(kubectl):
    create(kubectl, pod_manifest("forced", node="force-node"))
    p = kubectl("delete", "pod", "forced", "--grace-period=0", "--force",
                timeout=20)
    assert 'pod "forced" force deleted' in p.stdout, p.stdout
    gone = kubectl("get", "pod", "forced", check=False)
    assert gone.returncode == 1 and 'pods "forced" not found' in gone.stderr


def test_delete_unbound_pod_is_immediate(kubectl):
    create(kubectl, pod_manifest("unbound"))
    p = kubectl("delete", "pod", "unbound", timeout=20)
    assert p.stdout.strip() == 'pod "unbound" deleted'
    gone = kubectl("get", "pod", "unbound", check=False)
    assert gone.returncode == 1 and 'pods "unbound" not found' in gone.stderr


# ============================================================ kubectl: csr --

def test_certificate_approve_and_deny(kubectl, server):
    create(kubectl, csr_manifest(server, "csr-yes", "approved-node"),
           csr_manifest(server, "csr-no", "denied-node"))
    out = kubectl("certificate", "approve", "csr-yes").stdout
    assert out.strip() == \
        "certificatesigningrequest.certificates.k8s.io/csr-yes approved"
    out = kubectl("certificate", "deny", "csr-no").stdout
    assert out.strip() == \
        "certificatesigningrequest.certificates.k8s.io/csr-no denied"
    table = kubectl("get", "csr").stdout
    assert row_named(table, "csr-yes")["CONDITION"] == "Approved", table
    assert row_named(table, "csr-no")["CONDITION"] == "Denied", table
    cond = get_json(kubectl, "csr", "csr-yes")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in cond] == \
        [("Approved", "True", "KubectlApprove")]
    refused = kubectl("certificate", "deny", "csr-yes", check=False)
    assert refused.returncode == 1 and "already Approved" in refused.stderr


def test_auth_whoami_is_kubernetes_admin(kubectl):
    out = kubectl("auth", "whoami").stdout
    rows = {r["ATTRIBUTE"]: r["VALUE"] for r in parse_table(out)}
    assert rows["Username"] == "kubernetes-admin", out
    assert "system:masters" in rows["Groups"], out
    assert "system:authenticated" in rows["Groups"], out


# =========================================================== kubectl: wait --

def test_wait_for_ready_node_returns_at_once(kubectl):
    create(kubectl, node_manifest("wait-ready"))
    p = kubectl("wait", "--for=condition=Ready", "node/wait-ready",
                "--timeout=20s", timeout=30)
    assert p.stdout.strip() == "node/wait-ready condition met"


def test_wait_returns_when_status_turns_ready(kubectl, popen_kubectl, curl,
                                              server, wait_until):
    create(kubectl, node_manifest("wait-later", ready=False))
    w = popen_kubectl("wait", "--for=condition=Ready", "node/wait-later",
                      "--timeout=30s")
    # Change the status once kubectl has listed the node (its watch then
    # starts from that list's resourceVersion and must see the change).
    wait_until(lambda: "fieldSelector=metadata.name%3Dwait-later" in server.log(),
               message="kubectl wait's list of the node")
    assert w.proc.poll() is None, "kubectl wait returned for a NotReady node"
    ready = {"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}]}}
    rc, code, body = curl("PATCH", f"{CORE}/nodes/wait-later/status", ready,
                          ctype="application/strategic-merge-patch+json")
    assert (rc, code) == (0, 200), body
    wait_until(lambda: w.proc.poll() is not None, timeout=20,
               message="kubectl wait to return")
    err = w.stop()
    assert w.proc.returncode == 0, err
    assert "node/wait-later condition met" in w.snapshot(), w.snapshot()


# ========================================================== kubectl: drain --

def test_drain_evicts_the_pod_the_kubelet_confirms(kubectl, server):
    node = "drain-node"
    create(kubectl, node_manifest(node))
    create(kubectl, pod_manifest("drained-pod", node=node))
    me = server.node_identity(node)
    stop = threading.Event()
    confirmed = []

    def kubelet():
        """Plays the kubelet: confirms the deletion of its evicted pod."""
        path = f"{CORE}/namespaces/default/pods/drained-pod"
        while not stop.is_set():
            r = server.request("GET", path, auth=me)
            if r.status == 404:
                return
            if r.status == 200 and r.json()["metadata"].get("deletionTimestamp"):
                d = server.request("DELETE", path + "?gracePeriodSeconds=0", auth=me)
                confirmed.append(d.status)
                return
            time.sleep(0.05)

    t = threading.Thread(target=kubelet, daemon=True)
    t.start()
    try:
        p = kubectl("drain", node, "--ignore-daemonsets", "--force",
                    "--timeout=30s", timeout=45)
    finally:
        stop.set()
        t.join(5)
    assert confirmed == [200], f"kubelet's confirmation: {confirmed}"
    out = p.stdout + p.stderr
    assert f"node/{node} cordoned" in out, out
    assert "evicting pod default/drained-pod" in out, out
    assert "pod/drained-pod evicted" in out, out
    assert f"node/{node} drained" in out, out
    row = row_named(kubectl("get", "nodes").stdout, node)
    assert row["STATUS"] == "Ready,SchedulingDisabled"


# ========================================================= python client --

@pytest.fixture
def k8s(server):
    """The official Python client, configured from admin.conf."""
    from kubernetes import client, config
    api = config.new_client_from_config(config_file=str(server.admin_conf))
    yield client.CoreV1Api(api)
    api.close()


def test_python_client_lists_nodes(k8s, nodes_for_get):
    nodes = k8s.list_node()
    names = [n.metadata.name for n in nodes.items]
    assert {"get-node-a", "get-node-b"} <= set(names), names
    a = [n for n in nodes.items if n.metadata.name == "get-node-a"][0]
    assert a.status.node_info.kubelet_version == "v1.32.0"
    assert int(nodes.metadata.resource_version) > 0


def test_python_client_load_kube_config(server, nodes_for_get):
    from kubernetes import client, config
    config.load_kube_config(config_file=str(server.admin_conf))
    names = [n.metadata.name for n in client.CoreV1Api().list_node().items]
    assert "get-node-a" in names


def test_python_client_watch_sees_added_and_modified(k8s):
    from kubernetes import client, watch
    k8s.create_node(client.V1Node(metadata=client.V1ObjectMeta(
        name="py-watched", labels={"step": "0"})))
    w = watch.Watch()
    seen = []
    for ev in w.stream(k8s.list_node, timeout_seconds=10):
        if ev["object"].metadata.name != "py-watched":
            continue
        seen.append((ev["type"], ev["object"].metadata.labels.get("step")))
        if ev["type"] == "ADDED":
            k8s.patch_node("py-watched", {"metadata": {"labels": {"step": "1"}}})
        if ev["type"] == "MODIFIED":
            w.stop()
    assert seen == [("ADDED", "0"), ("MODIFIED", "1")], seen


def test_python_client_creates_pod(k8s, kubectl):
    from kubernetes import client
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="py-pod", labels={"from": "python"}),
        spec=client.V1PodSpec(containers=[client.V1Container(
            name="app", image="nginx")]))
    made = k8s.create_namespaced_pod("default", pod)
    assert made.metadata.uid and made.metadata.resource_version
    assert made.metadata.creation_timestamp is not None
    row = row_named(kubectl("get", "pods", "-l", "from=python").stdout, "py-pod")
    assert row["STATUS"] == "Pending"


# ========================================================= node identity --

@pytest.fixture(scope="module")
def n1(server):
    """Nodes n1 and n2 exist; returns n1's client certificate."""
    for name in ("n1", "n2"):
        r = server.request("POST", f"{CORE}/nodes", node_manifest(name))
        assert r.status == 201, r
    r = server.request("POST", LEASES, lease_manifest("n2"))
    assert r.status == 201, r
    return server.node_identity("n1")


def test_node_creates_and_renews_its_own_lease(server, n1):
    r = server.request("POST", LEASES, lease_manifest("n1"), auth=n1)
    assert r.status == 201, r
    lease = server.request("GET", f"{LEASES}/n1", auth=n1).json()
    first = lease["spec"]["renewTime"]
    lease["spec"]["renewTime"] = now_micro()
    r = server.request("PUT", f"{LEASES}/n1", lease, auth=n1)
    assert r.status == 200, r
    assert r.json()["spec"]["renewTime"] != first
    assert rv(r.json()) > rv(lease)


def test_node_updates_its_own_status(server, n1):
    node = server.request("GET", f"{CORE}/nodes/n1", auth=n1).json()
    node["status"]["conditions"][0]["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"
    r = server.request("PUT", f"{CORE}/nodes/n1/status", node, auth=n1)
    assert r.status == 200, r
    patch = {"status": {"conditions": [{"type": "Ready", "status": "False",
                                        "reason": "KubeletNotReady"}]}}
    r = server.request("PATCH", f"{CORE}/nodes/n1/status", patch, auth=n1,
                       content_type="application/strategic-merge-patch+json")
    assert r.status == 200, r
    cond = r.json()["status"]["conditions"][0]
    assert (cond["status"], cond["lastHeartbeatTime"]) == \
        ("False", "2030-01-01T00:00:00Z"), cond


def test_node_is_forbidden_another_nodes_lease(server, n1):
    for method, body in (("GET", None), ("PUT", lease_manifest("n2")),
                         ("DELETE", None)):
        r = server.request(method, f"{LEASES}/n2", body, auth=n1)
        assert_status(r, 403, "Forbidden",
                      'leases.coordination.k8s.io "n2" is forbidden: '
                      'User "system:node:n1"')
    r = server.request("POST", LEASES, lease_manifest("n9"), auth=n1)
    assert_status(r, 403, "Forbidden")


def test_node_is_forbidden_a_missing_lease_too(server, n1):
    """Authorization comes before the lookup: no 404 leaks existence."""
    r = server.request("GET", f"{LEASES}/no-such-node", auth=n1)
    assert_status(r, 403, "Forbidden", 'is forbidden: User "system:node:n1"')


def test_node_is_forbidden_another_nodes_status(server, n1):
    r = server.request("GET", f"{CORE}/nodes/n2/status", auth=n1)
    assert_status(r, 403, "Forbidden",
                  'nodes "n2" is forbidden: User "system:node:n1" cannot get '
                  'resource "nodes/status"')
    node = server.request("GET", f"{CORE}/nodes/n2").json()
    # Writes pass the Node authorizer and are refused by NodeRestriction,
    # with its message (as upstream).
    r = server.request("PUT", f"{CORE}/nodes/n2/status", node, auth=n1)
    assert_status(r, 403, "Forbidden",
                  'nodes "n2" is forbidden: node "n1" is not allowed to '
                  'modify node "n2"')
    r = server.request("PATCH", f"{CORE}/nodes/n2/status",
                       {"status": {"phase": "x"}}, auth=n1,
                       content_type="application/merge-patch+json")
    assert_status(r, 403, "Forbidden", 'node "n1" is not allowed to modify')


def test_node_reads_only_its_own_node(server, n1):
    assert server.request("GET", f"{CORE}/nodes/n1", auth=n1).status == 200
    r = server.request("GET", f"{CORE}/nodes", auth=n1)
    assert_status(r, 403, "Forbidden", 'User "system:node:n1" cannot list')
    r = server.request("GET", f"{CORE}/nodes?fieldSelector=metadata.name%3Dn1",
                       auth=n1)
    assert r.status == 200 and [n["metadata"]["name"] for n in
                                r.json()["items"]] == ["n1"], r


def test_node_lists_pods_only_bound_to_itself(server, n1):
    r = server.request("POST", f"{CORE}/namespaces/default/pods",
                       pod_manifest("on-n1", node="n1"))
    assert r.status == 201, r
    r = server.request("GET", f"{CORE}/pods?fieldSelector=spec.nodeName%3Dn1",
                       auth=n1)
    assert r.status == 200, r
    assert [p["metadata"]["name"] for p in r.json()["items"]] == ["on-n1"]
    conn, resp = open_watch(server, f"{CORE}/pods?watch=true&timeoutSeconds=1"
                            "&fieldSelector=spec.nodeName%3Dn1", auth=n1)
    try:
        events = read_events(resp)
    finally:
        conn.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
        [("ADDED", "on-n1")], events
    for query in ("", "?fieldSelector=spec.nodeName%3Dn2",
                  "?labelSelector=app%3Don-n1"):
        r = server.request("GET", f"{CORE}/pods{query}", auth=n1)
        assert_status(r, 403, "Forbidden",
                      'pods is forbidden: User "system:node:n1" cannot list '
                      'resource "pods"')


def test_node_csr_for_another_node_is_forbidden(server, n1):
    r = server.request("POST", CSRS, csr_manifest(server, "n1-for-n2", "n2"),
                       auth=n1)
    assert_status(r, 403, "Forbidden",
                  "can only create a node CSR with CN=system:node:n1")
    r = server.request("POST", CSRS, csr_manifest(server, "n1-own", "n1"),
                       auth=n1)
    assert r.status == 201, r
    assert r.json()["spec"]["username"] == "system:node:n1"


# =================================================== bad credentials: 401 --

def _probe(curl, identity):
    rc, code, body = curl("GET", f"{CORE}/nodes", identity=identity)
    assert rc == 0, f"curl failed (TLS handshake?): exit {rc} {body}"
    return code, body


def test_expired_node_certificate_is_401(server, curl, wait_until):
    expired = server.node_identity("expired-node", duration="24h",
                                   clock_offset="-400d")
    code, body = _probe(curl, expired)
    assert code == 401, body
    st = json.loads(body)
    assert (st["kind"], st["reason"], st["code"]) == \
        ("Status", "Unauthorized", 401), st
    wait_until(lambda: re.search(
        r"Unable to authenticate the request.*x509: certificate has expired "
        r"or is not yet valid", server.log()),
        message="the expired-certificate line in the server log")


def test_foreign_ca_certificate_is_401(server, curl, run, tmp_path,
                                       cube, wait_until):
    other = tmp_path / "other-cluster"
    run(cube, "pki", "init", "--dir", other)
    foreign = server.node_identity("foreign-node", ca_dir=other)
    code, body = _probe(curl, foreign)
    assert code == 401, body
    assert json.loads(body)["reason"] == "Unauthorized"
    wait_until(lambda: re.search(
        r"Unable to authenticate the request.*x509: certificate signed by "
        r"unknown authority", server.log()),
        message="the unknown-authority line in the server log")


# ======================================================= bootstrap token --

def test_bootstrap_token_creates_and_reads_csrs(server):
    token = ("token", server.token)
    r = server.request("POST", CSRS, csr_manifest(server, "boot-csr", "boot-node"),
                       auth=token)
    assert r.status == 201, r
    tid = server.token.split(".")[0]
    spec = r.json()["spec"]
    assert spec["username"] == f"system:bootstrap:{tid}"
    assert "system:bootstrappers" in spec["groups"]
    r = server.request("GET", f"{CSRS}/boot-csr", auth=token)
    assert r.status == 200 and r.json()["metadata"]["name"] == "boot-csr", r
    r = server.request("GET", CSRS, auth=token)
    assert r.status == 200 and "boot-csr" in \
        [c["metadata"]["name"] for c in r.json()["items"]], r


def test_bootstrap_token_is_forbidden_everything_else(server):
    token = ("token", server.token)
    tid = server.token.split(".")[0]
    r = server.request("GET", f"{CORE}/nodes", auth=token)
    assert_status(r, 403, "Forbidden",
                  f'nodes is forbidden: User "system:bootstrap:{tid}" cannot '
                  'list resource "nodes" in API group "" at the cluster scope')
    r = server.request("POST", f"{CORE}/namespaces/default/pods",
                       pod_manifest("from-token"), auth=token)
    assert_status(r, 403, "Forbidden", f'User "system:bootstrap:{tid}" cannot create')
    # Creating and reading CSRs is all: not approving one.
    csr = server.request("POST", CSRS, csr_manifest(server, "boot-approve",
                                                    "boot-node-2"))
    assert csr.status == 201, csr
    body = csr.json()
    body["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                      "reason": "Self"}]}
    r = server.request("PUT", f"{CSRS}/boot-approve/approval", body, auth=token)
    assert_status(r, 403, "Forbidden", f'User "system:bootstrap:{tid}" cannot '
                  'update resource "certificatesigningrequests/approval"')


def test_wrong_token_is_401(server):
    tid = server.token.split(".")[0]
    for tok in (f"{tid}.0000000000000000", "abcdef.0123456789abcdef", "garbage"):
        r = server.request("GET", CSRS, auth=("token", tok))
        assert_status(r, 401, "Unauthorized")


def test_no_credentials(server):
    r = server.request("GET", f"{CORE}/nodes", auth=None)
    assert_status(r, 401, "Unauthorized")
    for path in ("/version", "/healthz", "/livez", "/readyz"):
        r = server.request("GET", path, auth=None)
        assert r.status == 200, f"{path}: {r!r}"
    v = server.request("GET", "/version", auth=None).json()
    assert (v["major"], v["minor"], v["gitVersion"]) == ("1", "32", "v1.32.0-cube")


# ============================================================= bad input --

PODS = f"{CORE}/namespaces/default/pods"
CMS = f"{CORE}/namespaces/default/configmaps"


BAD_INPUT = {
    "malformed-json": (lambda s: s.request(
        "POST", PODS, '{"kind":"Pod",', content_type="application/json"),
        400, "BadRequest", None),
    "wrong-kind": (lambda s: s.request(
        "POST", PODS, dict(pod_manifest("wk"), kind="ConfigMap")),
        400, "BadRequest", None),
    "invalid-name": (lambda s: s.request(
        "POST", PODS, pod_manifest("Bad_Name")),
        422, "Invalid", "metadata.name"),
    "bad-label-selector": (lambda s: s.request(
        "GET", PODS + "?labelSelector=a%20in%20(b"), 400, "BadRequest", None),
    "bad-field-selector": (lambda s: s.request(
        "GET", PODS + "?fieldSelector=spec.foo%3Dbar"),
        400, "BadRequest", "field label not supported"),
    "json-patch-missing-path": (lambda s: s.request(
        "PATCH", f"{PODS}/bad-input-target",
        '[{"op":"replace","path":"/metadata/labels/missing","value":"x"},'
        '{"op":"replace","path":"/spec/nope/deeper","value":"x"}]',
        content_type="application/json-patch+json"), 422, None, None),
    "unknown-patch-type": (lambda s: s.request(
        "PATCH", f"{PODS}/bad-input-target", '{"metadata":{}}',
        content_type="application/x-nonsense"),
        415, "UnsupportedMediaType", None),
    "garbage-protobuf": (lambda s: s.request(
        "POST", PODS, b"k8s\x00\xff\xff\xff\xff\x0fgarbage\x01\x02",
        content_type="application/vnd.kubernetes.protobuf"),
        400, "BadRequest", None),
    "stale-resource-version": (lambda s: s.request(
        "PUT", f"{PODS}/bad-input-target",
        dict(pod_manifest("bad-input-target"),
             metadata={"name": "bad-input-target", "namespace": "default",
                       "resourceVersion": "1", "labels": {"x": "y"}})),
        409, "Conflict",
        'Operation cannot be fulfilled on pods "bad-input-target": the object '
        'has been modified; please apply your changes to the latest version '
        'and try again'),
    "already-exists": (lambda s: s.request(
        "POST", PODS, pod_manifest("bad-input-target")),
        409, "AlreadyExists", 'pods "bad-input-target" already exists'),
    "not-found": (lambda s: s.request("GET", f"{PODS}/nope"),
                  404, "NotFound", 'pods "nope" not found'),
}


@pytest.fixture(scope="module")
def bad_input_target(server):
    r = server.request("POST", PODS, pod_manifest("bad-input-target"))
    assert r.status == 201, r
    return r.json()


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_a_status_and_the_server_keeps_serving(
        server, kubectl, bad_input_target, case):
    send, code, reason, message = BAD_INPUT[case]
    r = send(server)
    assert_status(r, code, reason, message)
    # Nothing changed, and the server still answers kubectl.
    now = server.request("GET", f"{PODS}/bad-input-target").json()
    assert now["metadata"]["resourceVersion"] == \
        bad_input_target["metadata"]["resourceVersion"]
    assert "bad-input-target" in kubectl("get", "pods").stdout


def test_not_found_status_details(server):
    st = assert_status(server.request("GET", f"{PODS}/nope"), 404, "NotFound")
    assert st["details"] == {"name": "nope", "kind": "pods"}, st


def status_body(text, what="the request"):
    try:
        st = json.loads(text)
    except ValueError:
        pytest.fail(f"the answer to {what} is not a Status but: {text[:300]!r}",
                    pytrace=False)
    assert st.get("kind") == "Status", st
    return st


def _configmap_file(path, name, size):
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name},
                                "data": {"x": "y" * size}}))
    return "@" + str(path)


def test_body_over_the_default_limit_is_413(server, curl, kubectl, tmp_path):
    big = _configmap_file(tmp_path / "big.json", "too-big", (3 << 20) + 10)
    rc, code, body = curl("POST", CMS, big)
    assert (rc, code) == (0, 413), body[:300]
    st = status_body(body)
    assert (st["kind"], st["reason"], st["code"]) == \
        ("Status", "RequestEntityTooLarge", 413), st
    assert "too-big" not in kubectl("get", "configmaps").stdout


def test_max_request_body_bytes_flag(make_apiserver, tmp_path, kubectl_for,
                                     curl):
    s = make_apiserver(tmp_path / "small", "--max-request-body-bytes", "1000")
    try:
        small = _configmap_file(tmp_path / "small.json", "small", 100)
        rc, code, body = curl("POST", CMS, small, srv=s)
        assert (rc, code) == (0, 201), body
        # Just over the limit, and far over it: the same Status each time.
        for size in (1500, 20000):
            big = _configmap_file(tmp_path / f"big-{size}.json", "big", size)
            rc, code, body = curl("POST", CMS, big, srv=s)
            assert (rc, code) == (0, 413), body
            st = status_body(body, f"a {size}-byte body")
            assert (st["reason"], st["code"]) == ("RequestEntityTooLarge", 413), st
            assert st["message"] == "Request entity too large: limit is 1000", st
        out = kubectl_for(s)("get", "configmaps").stdout
        assert "small" in out and "big" not in out
    finally:
        assert s.stop() == 0


def test_wrong_method_for_a_path_is_405(server):
    """POST names a collection, PUT an object: not the other way round."""
    r = server.request("POST", f"{CMS}/by-url", _cm("by-body"))
    assert_status(r, 405, "MethodNotAllowed")
    assert server.request("GET", f"{CMS}/by-body").status == 404, \
        "a POST to an object's URL created the object named in the body"
    r = server.request("PUT", CMS, _cm("by-put"))
    assert_status(r, 405, "MethodNotAllowed")


# ================================================================ watches --

def _cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"watch": "yes"}},
            "data": data}


def test_watch_from_zero_starts_with_added_for_existing(server):
    for name in ("w0-a", "w0-b"):
        assert server.request("POST", CMS, _cm(name)).status == 201
    conn, resp = open_watch(server, CMS + "?watch=true&resourceVersion=0"
                            "&labelSelector=watch%3Dyes&timeoutSeconds=5")
    try:
        assert resp.getheader("Content-Type").startswith("application/json")
        events = read_events(resp, until=lambda e: e["object"]["metadata"][
            "name"] == "w0-b")
        names = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
        assert ("ADDED", "w0-a") in names and ("ADDED", "w0-b") in names, names
        assert all(t == "ADDED" for t, _ in names), names
        assert all(e["object"]["kind"] == "ConfigMap" for e in events)
    finally:
        conn.close()


def test_watch_from_list_resource_version_sends_only_later_changes(server):
    assert server.request("POST", CMS, _cm("wl-before")).status == 201
    listed = server.request("GET", CMS).json()
    conn, resp = open_watch(server, CMS + "?watch=true&resourceVersion="
                            + listed["metadata"]["resourceVersion"])
    try:
        made = server.request("POST", CMS, _cm("wl-after"))
        assert made.status == 201
        changed = server.request(
            "PATCH", f"{CMS}/wl-after", {"data": {"k": "v"}},
            content_type="application/merge-patch+json")
        assert changed.status == 200
        gone = server.request("DELETE", f"{CMS}/wl-after")
        assert gone.status == 200
        events = read_events(resp, count=3)
    finally:
        conn.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
        [("ADDED", "wl-after"), ("MODIFIED", "wl-after"),
         ("DELETED", "wl-after")], events
    rvs = [rv(e["object"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(listed["metadata"]["resourceVersion"])
    assert rvs[0] == rv(made.json()) and rvs[1] == rv(changed.json())


def test_watch_without_allow_bookmarks_sends_no_bookmark(server):
    conn, resp = open_watch(server, CMS + "?watch=true&timeoutSeconds=2")
    try:
        for i in range(3):
            server.request("POST", CMS, _cm(f"wb-{i}"))
        events = read_events(resp)  # until the server ends the stream
    finally:
        conn.close()
    types = {e["type"] for e in events}
    assert "BOOKMARK" not in types, types
    assert {"ADDED"} == types, types


def test_watch_timeout_seconds_ends_the_stream(server):
    start = time.monotonic()
    conn, resp = open_watch(server, CMS + "?watch=true&resourceVersion=0"
                            "&timeoutSeconds=1", timeout=10)
    try:
        read_events(resp)
        assert resp.read() == b""
    finally:
        conn.close()
    took = time.monotonic() - start
    assert 0.9 <= took < 5, f"stream lasted {took:.2f}s for timeoutSeconds=1"


@pytest.mark.parametrize("value", ["true", "1", "True"])
def test_watch_query_parameter_values(server, value):
    """Upstream reads watch= as a bool: anything but 0/false is a watch
    (the Python client sends watch=True)."""
    conn, resp = open_watch(server, f"{CMS}?watch={value}&timeoutSeconds=1")
    try:
        first = resp.readline()
    finally:
        conn.close()
    ev = json.loads(first)
    assert ev.get("type") == "ADDED" and "object" in ev, \
        f"watch={value} did not start a watch: {first[:300]!r}"


def test_watch_from_before_a_restart_is_expired(apiserver):
    """The restarted server's watch window starts at its current revision:
    an older resourceVersion gets 410 Expired inside a 200 stream."""
    assert apiserver.request("POST", CMS, _cm("old-1")).status == 201
    old = apiserver.request("GET", CMS).json()["metadata"]["resourceVersion"]
    assert apiserver.request("POST", CMS, _cm("old-2")).status == 201
    apiserver.restart()
    conn, resp = open_watch(apiserver, f"{CMS}?watch=true&resourceVersion={old}")
    try:
        events = read_events(resp, count=1)
    finally:
        conn.close()
    assert len(events) == 1 and events[0]["type"] == "ERROR", events
    st = events[0]["object"]
    assert (st["kind"], st["reason"], st["code"]) == ("Status", "Expired", 410), st
    assert st["message"].startswith(f"too old resource version: {old} ("), st


def test_watch_as_table_for_kubectl(server):
    conn = server.connect()
    conn.request("GET", CMS + "?watch=true&resourceVersion=0&timeoutSeconds=1",
                 headers={"Accept": "application/json;as=Table;v=v1;"
                                    "g=meta.k8s.io,application/json"})
    resp = conn.getresponse()
    try:
        events = read_events(resp)
    finally:
        conn.close()
    assert events, "no events"
    assert all(e["object"]["kind"] == "Table" for e in events), events[0]
    assert events[0]["object"]["columnDefinitions"], events[0]
    assert all(len(e["object"]["rows"]) == 1 for e in events)


# ============================================================= durability --

def _create_stream(server, names, acked, errors, halfway):
    """Create ConfigMaps one by one over a keep-alive connection, recording
    each acknowledged (201) create; set halfway after 150 acks in all."""
    conn = server.connect(timeout=10)
    try:
        for name in names:
            conn.request("POST", CMS, body=json.dumps(_cm(name, value=name)),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 201:
                errors.append((name, resp.status, data[:300]))
                continue
            acked.append((name, json.loads(data)))
            if len(acked) >= 150:
                halfway.set()
    except Exception as e:  # the server died under us
        errors.append(("died", type(e).__name__, str(e)))
    finally:
        conn.close()


def test_sigkill_mid_stream_loses_no_acknowledged_write(apiserver):
    names = [f"cm-{i:04d}" for i in range(300)]
    acked, errors, halfway = [], [], threading.Event()
    writers = [threading.Thread(target=_create_stream, daemon=True,
                                args=(apiserver, names[i::3], acked, errors,
                                      halfway)) for i in range(3)]
    for t in writers:
        t.start()
    assert halfway.wait(30), f"writes did not get going: {errors[:3]}"
    assert apiserver.kill() == -signal.SIGKILL
    for t in writers:
        t.join(15)
    assert len(acked) < len(names), "the kill came after the last write"
    assert not [e for e in errors if e[0] != "died"], errors

    apiserver.start()
    listed = apiserver.request("GET", CMS).json()
    stored = {c["metadata"]["name"]: c for c in listed["items"]}
    lost = [n for n, _ in acked if n not in stored]
    assert not lost, f"{len(lost)} acknowledged creates lost: {lost[:10]}"
    for name, obj in acked:
        assert stored[name]["metadata"]["uid"] == obj["metadata"]["uid"]
        assert stored[name]["data"] == {"value": name}
    top = max(rv(obj) for _, obj in acked)
    assert int(listed["metadata"]["resourceVersion"]) >= top
    r = apiserver.request("POST", CMS, _cm("after-crash"))
    assert r.status == 201, r
    assert rv(r.json()) > top, \
        f"revision went backwards: {rv(r.json())} after {top}"


def test_restart_keeps_objects_and_the_revision(apiserver, kubectl_for):
    kubectl = kubectl_for(apiserver)
    create(kubectl, node_manifest("kept-node"), pod_manifest("kept-pod"),
           deployment_manifest("kept-deploy"))
    before = {}
    for path in (f"{CORE}/nodes/kept-node", f"{PODS}/kept-pod",
                 "/apis/apps/v1/namespaces/default/deployments/kept-deploy"):
        before[path] = apiserver.request("GET", path).json()
    top = int(apiserver.request("GET", f"{CORE}/namespaces").json()[
        "metadata"]["resourceVersion"])

    assert apiserver.stop() == 0, apiserver.log()[-2000:]
    apiserver.start()

    for path, obj in before.items():
        now = apiserver.request("GET", path)
        assert now.status == 200, f"{path} lost: {now!r}"
        assert now.json() == obj, f"{path} changed across the restart"
    listed = apiserver.request("GET", f"{CORE}/namespaces").json()
    assert int(listed["metadata"]["resourceVersion"]) >= top
    r = apiserver.request("POST", CMS, _cm("after-restart"))
    assert r.status == 201 and rv(r.json()) > top, r
    assert "kept-pod" in kubectl("get", "pods").stdout


# ---- garbage collection: Deployment -> ReplicaSet -> Pod ------------------------


def owned_chain(kubectl, name, node=None):
    """A Deployment owning a ReplicaSet owning a Pod (unbound, or bound to
    node), as the controllers would build them; returns the owners' uids."""
    create(kubectl, deployment_manifest(name))
    d_uid = kubectl("get", "deploy", name, "-o", "jsonpath={.metadata.uid}").stdout
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": f"{name}-rs", "labels": {"app": name},
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name, "uid": d_uid, "controller": True,
                                            "blockOwnerDeletion": True}]},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                   "template": {"metadata": {"labels": {"app": name}},
                                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    create(kubectl, rs)
    rs_uid = kubectl("get", "rs", f"{name}-rs", "-o", "jsonpath={.metadata.uid}").stdout
    pod = pod_manifest(f"{name}-pod", labels={"app": name}, node=node)
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "name": f"{name}-rs", "uid": rs_uid,
                                           "controller": True, "blockOwnerDeletion": True}]
    create(kubectl, pod)
    return d_uid, rs_uid


def gone(kubectl, kind, name):
    return kubectl("get", kind, name, check=False).returncode != 0


@pytest.mark.parametrize("cascade", ["background", "foreground"])
def test_delete_cascades_to_dependents(kubectl, wait_until, cascade):
    name = f"gc-{cascade}"
    owned_chain(kubectl, name)
    kubectl("delete", "deploy", name, f"--cascade={cascade}", "--wait=false")
    wait_until(lambda: gone(kubectl, "deploy", name), 20, "the deployment to go")
    wait_until(lambda: gone(kubectl, "rs", f"{name}-rs"), 20, "its ReplicaSet to go")
    wait_until(lambda: gone(kubectl, "pod", f"{name}-pod"), 20, "its Pod to go")


def test_delete_orphan_keeps_dependents(kubectl, wait_until):
    name = "gc-orphan"
    _, rs_uid = owned_chain(kubectl, name)
    kubectl("delete", "deploy", name, "--cascade=orphan")
    wait_until(lambda: gone(kubectl, "deploy", name), 20, "the deployment to go")
    refs = kubectl("get", "rs", f"{name}-rs", "-o",
                   "jsonpath={.metadata.ownerReferences}").stdout
    assert refs == "", f"the orphaned ReplicaSet still names its owner: {refs}"
    owner = kubectl("get", "pod", f"{name}-pod", "-o",
                    "jsonpath={.metadata.ownerReferences[0].uid}").stdout
    assert owner == rs_uid, "the pod keeps its (living) owner"


def test_foreground_waits_for_a_terminating_pod(kubectl, wait_until):
    """Issue 10, item 3: a foreground delete of a Deployment waits for its
    ReplicaSet, which waits for its bound pod (blockOwnerDeletion) until the
    pod's kubelet confirms; the owners show upstream's foregroundDeletion
    finalizer meanwhile. Before, the owners went at once and the bound pod
    lost its graceful termination."""
    name = "gc-waits"
    d_uid, rs_uid = owned_chain(kubectl, name, node="node-gone")
    out = kubectl("delete", "deploy", name, "--cascade=foreground", "--wait=false").stdout
    assert f'deployment.apps "{name}" deleted' in out
    wait_until(lambda: kubectl("get", "pod", f"{name}-pod", "-o",
                               "jsonpath={.metadata.deletionTimestamp}").stdout, 20,
               "the pod to be terminating")
    for kind, obj in (("deploy", name), ("rs", f"{name}-rs")):
        fins = kubectl("get", kind, obj, "-o", "jsonpath={.metadata.finalizers}").stdout
        assert "foregroundDeletion" in fins, f"{kind}/{obj} waits in the foreground: {fins}"
    grace = kubectl("get", "pod", f"{name}-pod", "-o",
                    "jsonpath={.metadata.deletionGracePeriodSeconds}").stdout
    assert grace == "30", "the bound pod keeps its grace period"
    assert "Terminating" in kubectl("get", "pod", f"{name}-pod").stdout
    kubectl("delete", "pod", f"{name}-pod", "--grace-period=0", "--force")
    wait_until(lambda: gone(kubectl, "rs", f"{name}-rs"), 20, "the ReplicaSet to go")
    wait_until(lambda: gone(kubectl, "deploy", name), 20, "the Deployment to go")


def test_finalizer_holds_deletion_until_removed(kubectl, wait_until):
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    create(kubectl, cm)
    kubectl("delete", "configmap", "held", "--wait=false")
    ts = kubectl("get", "configmap", "held", "-o",
                 "jsonpath={.metadata.deletionTimestamp}").stdout
    assert ts, "a finalizer keeps the object, marked for deletion"
    kubectl("patch", "configmap", "held", "--type", "merge", "-p",
            '{"metadata":{"finalizers":null}}')
    wait_until(lambda: gone(kubectl, "configmap", "held"), 20, "the object to go")


# ======================================================= rbac.authorization.k8s.io --

def test_rbac_objects_created_listed_and_validated(kubectl):
    """Role, ClusterRole, RoleBinding and ClusterRoleBinding through kubectl's
    own create commands (protobuf bodies), upstream's Tables, defaults and
    validation messages; a binding's roleRef cannot change."""
    kubectl("create", "clusterrole", "pod-reader", "--verb=get,list,watch", "--resource=pods")
    kubectl("create", "role", "cm-editor", "--verb=update", "--resource=configmaps")
    kubectl("create", "rolebinding", "read-pods", "--clusterrole=pod-reader",
            "--user=alice", "--group=devs", "--serviceaccount=default:robot")
    kubectl("create", "clusterrolebinding", "read-pods-everywhere",
            "--clusterrole=pod-reader", "--group=auditors")
    cr = get_json(kubectl, "clusterrole", "pod-reader")
    assert cr["rules"] == [{"verbs": ["get", "list", "watch"], "apiGroups": [""],
                            "resources": ["pods"]}], cr
    rb = get_json(kubectl, "rolebinding", "read-pods")
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": "pod-reader"}, rb
    assert {(s["kind"], s.get("apiGroup"), s.get("namespace")) for s in rb["subjects"]} == {
        ("User", "rbac.authorization.k8s.io", None),
        ("Group", "rbac.authorization.k8s.io", None),
        ("ServiceAccount", "", "default")}, rb["subjects"]

    out = kubectl("get", "rolebinding", "read-pods", "-o", "wide").stdout.splitlines()
    assert out[0].split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert out[1].split()[:2] == ["read-pods", "ClusterRole/pod-reader"], out
    assert out[1].split()[3:] == ["alice", "devs", "default/robot"], out
    out = kubectl("get", "clusterrole", "pod-reader").stdout.splitlines()
    assert out[0].split() == ["NAME", "CREATED", "AT"], out
    assert re.match(r"pod-reader\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", out[1]), out
    assert "read-pods-everywhere" in kubectl("get", "clusterrolebindings").stdout

    bad = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": "bad-rules"},
           "rules": [{"verbs": ["get"], "resources": ["pods"]},
                     {"verbs": [], "nonResourceURLs": ["/healthz"], "apiGroups": [""]}]}
    r = kubectl("create", "-f", "-", input=bad, check=False)
    assert r.returncode != 0
    for want in ("rules[0].apiGroups: Required value: resource rules must supply at least "
                 "one api group",
                 "rules[1].verbs: Required value: verbs must contain at least one value",
                 "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: rules cannot "
                 "apply to both regular resources and non-resource URLs"):
        assert want in r.stderr, r.stderr
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "urls", "namespace": "default"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}
    r = kubectl("create", "-f", "-", input=role, check=False)
    assert "namespaced rules cannot apply to non-resource URLs" in r.stderr, r.stderr
    r = kubectl("patch", "rolebinding", "read-pods", "--type=merge", "-p",
                '{"roleRef":{"name":"other"}}', check=False)
    assert "roleRef: Invalid value" in r.stderr and "cannot change roleRef" in r.stderr, \
        r.stderr
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "to-a-role"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
           "subjects": [{"kind": "ServiceAccount", "name": "robot"}]}
    r = kubectl("create", "-f", "-", input=crb, check=False)
    assert 'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"' \
        in r.stderr, r.stderr
    assert "subjects[0].namespace: Required value" in r.stderr, r.stderr


def user_kubeconfig(server, run, tmp_path, name, group):
    """A kubeconfig for CN=name, O=group, signed by the cluster CA."""
    key, csr, crt = (tmp_path / f"{name}.{x}" for x in ("key", "csr", "crt"))
    run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-subj", f"/O={group}/CN={name}", "-out", csr)
    run("openssl", "x509", "-req", "-in", csr, "-CA", server.pki / "ca.crt", "-CAkey",
        server.pki / "ca.key", "-CAcreateserial", "-days", "1", "-out", crt)
    conf = tmp_path / f"{name}.conf"
    server.write_kubeconfig(conf, crt, key, user=name)
    return conf


def test_rbac_grants_and_kubectl_auth_can_i(kubectl, kubectl_for, server, run, tmp_path):
    """A user with no binding is refused with upstream's message; a
    RoleBinding to a ClusterRole lets them read pods in that namespace only;
    `kubectl auth can-i` (SelfSubjectAccessReview) and `--list`
    (SelfSubjectRulesReview) say so; a SubjectAccessReview by the admin
    answers for that user with RBAC's reason."""
    carol = kubectl_for(server, user_kubeconfig(server, run, tmp_path, "carol", "qa"))
    r = carol("get", "pods", check=False)
    assert r.returncode != 0
    assert ('pods is forbidden: User "carol" cannot list resource "pods" in API group "" '
            'in the namespace "default"') in r.stderr, r.stderr
    r = carol("auth", "can-i", "list", "pods", check=False)
    assert r.stdout.strip() == "no", r.stderr
    kubectl("create", "clusterrole", "carol-reader", "--verb=get,list,watch",
            "--resource=pods,configmaps")
    kubectl("create", "rolebinding", "carol-reads", "--clusterrole=carol-reader",
            "--group=qa", "--namespace=default")
    assert carol("auth", "can-i", "list", "pods").stdout.strip() == "yes"
    assert carol("auth", "can-i", "list", "pods", "-n", "kube-system",
                 check=False).stdout.strip() == "no"
    assert carol("auth", "can-i", "delete", "pods", check=False).stdout.strip() == "no"
    carol("get", "pods")
    r = carol("get", "secrets", check=False)
    assert 'User "carol" cannot list resource "secrets"' in r.stderr, r.stderr
    listed = carol("auth", "can-i", "--list").stdout
    assert re.search(r"(?m)^pods\s+\[\]\s+\[\]\s+\[get list watch\]", listed), listed
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": "carol", "groups": ["qa"], "resourceAttributes": {
               "namespace": "default", "verb": "get", "resource": "configmaps"}}}
    r = server.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
    assert r.status == 201, r
    st = r.json()["status"]
    assert st == {"allowed": True, "reason": 'RBAC: allowed by RoleBinding "carol-reads/default"'
                  ' of ClusterRole "carol-reader" to Group "qa"'}, st
    sar["spec"]["resourceAttributes"]["verb"] = "delete"
    assert server.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                          sar).json()["status"] == {"allowed": False}
    # kubectl's validation of a kind without a PATCH path asks whether it is
    # a CRD, and carol may not list CRDs: upstream's refusal, word for word.
    r = carol("create", "-f", "-", input=sar, check=False)
    assert ('failed to check CRD: failed to list CRDs: customresourcedefinitions.apiextensions'
            '.k8s.io is forbidden: User "carol" cannot list resource "customresourcedefinitions"'
            ' in API group "apiextensions.k8s.io" at the cluster scope') in r.stderr, r.stderr
    # Only those allowed to may ask about others.
    r = carol("create", "--validate=false", "-f", "-", input=sar, check=False)
    assert 'cannot create resource "subjectaccessreviews"' in r.stderr, r.stderr
    # A rules review needs a namespace; a node's is incomplete (the Node
    # authorizer cannot list rules), as upstream.
    ssrr = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {}}
    assert_status(server.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                                 ssrr), 400, "BadRequest", "no namespace on request")
    ssrr["spec"]["namespace"] = "default"
    st = server.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", ssrr,
                        auth=server.node_identity("reviewer")).json()["status"]
    assert st["incomplete"] is True, st
    assert st["evaluationError"] == "node authorizer does not support user rule resolution"


def test_impersonation_as_upstream(kubectl, kubectl_for, server, run, tmp_path):
    """`kubectl --as/--as-group`: the admin may impersonate; the request then
    runs as that user (whoami, can-i, and RBAC decide); a user without the
    impersonate verb gets upstream's 403."""
    out = kubectl("auth", "whoami", "--as", "system:node:n9", "--as-group", "system:nodes",
                  "-o", "json").stdout
    info = json.loads(out)["status"]["userInfo"]
    assert info["username"] == "system:node:n9"
    assert info["groups"] == ["system:nodes", "system:authenticated"], info
    assert kubectl("auth", "can-i", "create", "certificatesigningrequests/selfnodeclient",
                   "--as", "system:node:node-0", "--as-group",
                   "system:nodes").stdout.strip() == "yes"
    assert kubectl("auth", "can-i", "create", "certificatesigningrequests/selfnodeclient",
                   "--as", "dave", check=False).stdout.strip() == "no"
    r = kubectl("get", "configmaps", "--as", "dave", check=False)
    assert 'User "dave" cannot list resource "configmaps"' in r.stderr, r.stderr
    kubectl("create", "role", "dave-cm", "--verb=list", "--resource=configmaps")
    kubectl("create", "rolebinding", "dave-cm", "--role=dave-cm", "--user=dave")
    kubectl("get", "configmaps", "--as", "dave")
    # Only those allowed the impersonate verb may do it.
    erin = kubectl_for(server, user_kubeconfig(server, run, tmp_path, "erin", "qa"))
    r = erin("get", "pods", "--as", "dave", check=False)
    assert ('users "dave" is forbidden: User "erin" cannot impersonate resource "users" in '
            'API group "" at the cluster scope') in r.stderr, r.stderr
    kubectl("create", "clusterrole", "impersonate-dave", "--verb=impersonate",
            "--resource=users", "--resource-name=dave")
    kubectl("create", "clusterrolebinding", "erin-as-dave", "--clusterrole=impersonate-dave",
            "--user=erin")
    erin("get", "configmaps", "--as", "dave")
    r = erin("get", "configmaps", "--as", "frank", check=False)
    assert 'users "frank" is forbidden' in r.stderr, r.stderr


def test_rbac_escalation_prevented(kubectl, kubectl_for, server, run, tmp_path):
    """A user who may write roles and bindings still cannot grant what they
    do not hold (upstream's message lists what is missing) — unless they hold
    `escalate` on the role or `bind` on the role a binding refers to."""
    kubectl("create", "clusterrole", "rbac-writer", "--verb=create,update,get",
            "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io")
    kubectl("create", "clusterrole", "pod-getter", "--verb=get,list", "--resource=pods")
    kubectl("create", "clusterrole", "pod-deleter", "--verb=delete", "--resource=pods")
    for role in ("rbac-writer", "pod-getter"):
        kubectl("create", "rolebinding", f"gina-{role}", f"--clusterrole={role}",
                "--user=gina")
    gina = kubectl_for(server, user_kubeconfig(server, run, tmp_path, "gina", "ops"))
    gina("create", "role", "ok-role", "--verb=get", "--resource=pods")
    r = gina("create", "role", "greedy", "--verb=get,delete", "--resource=pods,secrets",
             check=False)
    assert r.returncode != 0
    want = ('roles.rbac.authorization.k8s.io "greedy" is forbidden: user "gina" '
            '(groups=["ops" "system:authenticated"]) is attempting to grant RBAC permissions '
            'not currently held:\n'
            '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}\n'
            '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}')
    assert want in r.stderr, r.stderr
    gina("create", "rolebinding", "ok-binding", "--clusterrole=pod-getter", "--user=hank")
    r = gina("create", "rolebinding", "bad-binding", "--clusterrole=pod-deleter",
             "--user=hank", check=False)
    assert ('rolebindings.rbac.authorization.k8s.io "bad-binding" is forbidden: user "gina" '
            '(groups=["ops" "system:authenticated"]) is attempting to grant RBAC permissions '
            'not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}') \
        in r.stderr, r.stderr
    # bind on that ClusterRole lets her bind it; escalate lets her write any role.
    kubectl("create", "clusterrole", "bind-deleter", "--verb=bind",
            "--resource=clusterroles.rbac.authorization.k8s.io", "--resource-name=pod-deleter")
    kubectl("create", "clusterrole", "escalator", "--verb=escalate",
            "--resource=roles.rbac.authorization.k8s.io")
    kubectl("create", "rolebinding", "gina-bind", "--clusterrole=bind-deleter", "--user=gina")
    kubectl("create", "rolebinding", "gina-escalate", "--clusterrole=escalator", "--user=gina")
    gina("create", "rolebinding", "bad-binding", "--clusterrole=pod-deleter", "--user=hank")
    gina("create", "role", "greedy", "--verb=get,delete", "--resource=pods,secrets")


def test_bootstrap_policy_roles_and_the_scheduler_holds_only_its_own(kubectl):
    """Upstream's bootstrap ClusterRoles and bindings are there (and marked
    for reconciliation); the scheduler's identity is authorized by its role
    only: it may bind pods, not read secrets."""
    roles = kubectl("get", "clusterroles").stdout
    for name in ("cluster-admin", "system:discovery", "system:basic-user",
                 "system:public-info-viewer", "system:kube-scheduler",
                 "system:volume-scheduler", "system:kube-controller-manager",
                 "system:node-bootstrapper"):
        assert re.search(rf"(?m)^{re.escape(name)}\s", roles), name
    crb = get_json(kubectl, "clusterrolebinding", "cluster-admin")
    assert crb["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                "name": "system:masters"}]
    assert crb["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
    can = lambda *a: kubectl("auth", "can-i", *a, "--as", "system:kube-scheduler",  # noqa
                             check=False).stdout.strip()
    assert can("create", "pods", "--subresource=binding") == "yes"
    assert can("patch", "pods", "--subresource=status") == "yes"
    assert can("get", "secrets") == "no"
    assert can("create", "deployments.apps") == "no"


def test_nonresource_paths_authorized_as_upstream(server, kubectl):
    """Discovery is system:discovery's (every authenticated user), /metrics
    system:monitoring's or an admin's: a node may read /api, not /metrics,
    until a ClusterRoleBinding gives it the monitoring role."""
    node = server.node_identity("watcher")
    assert server.request("GET", "/api", auth=node).status == 200
    assert server.request("GET", "/apis/apps/v1", auth=node).status == 200
    r = server.request("GET", "/metrics", auth=node)
    assert_status(r, 403, "Forbidden",
                  'forbidden: User "system:node:watcher" cannot get path "/metrics"')
    assert server.request("GET", "/metrics").status == 200  # the admin
    kubectl("create", "clusterrolebinding", "watcher-metrics",
            "--clusterrole=system:monitoring", "--user=system:node:watcher")
    assert server.request("GET", "/metrics", auth=node).status == 200


def _jwt_part(text):
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _der_of_es256(raw):
    """r||s (JWS) to the DER ECDSA-Sig-Value openssl verifies."""
    def integer(b):
        b = b.lstrip(b"\0") or b"\0"
        if b[0] & 0x80:
            b = b"\0" + b
        return b"\x02" + bytes([len(b)]) + b
    body = integer(raw[:32]) + integer(raw[32:])
    return b"\x30" + bytes([len(body)]) + body


def test_service_account_tokens(kubectl, kubectl_for, server, run, tmp_path, wait_until):
    """`kubectl create token` returns an ES256 JWT signed with sa.key that
    openssl verifies with sa.pub, carrying upstream's claims; it
    authenticates as the service account (whoami shows its UID, groups and
    credential id), RBAC decides what it may do, a TokenReview answers for
    it, and a recreated service account (new UID) no longer accepts it once
    the token's last success is 10 s old (upstream's TokenSuccessCacheTTL)."""
    kubectl("create", "serviceaccount", "droid")
    sa = get_json(kubectl, "serviceaccount", "droid")
    token = kubectl("create", "token", "droid", "--duration", "20m").stdout.strip()
    head, body, sig = token.split(".")
    assert _jwt_part(head) == {"alg": "ES256", "kid": _jwt_part(head)["kid"]}
    claims = _jwt_part(body)
    assert claims["iss"] == "https://kubernetes.default.svc.cluster.local"
    assert claims["aud"] == ["https://kubernetes.default.svc.cluster.local"]
    assert claims["sub"] == "system:serviceaccount:default:droid"
    assert claims["exp"] - claims["iat"] == 1200 and claims["nbf"] == claims["iat"]
    assert claims["kubernetes.io"] == {"namespace": "default", "serviceaccount": {
        "name": "droid", "uid": sa["metadata"]["uid"]}}
    signed, der = tmp_path / "signed", tmp_path / "sig.der"
    signed.write_bytes(f"{head}.{body}".encode())
    der.write_bytes(_der_of_es256(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))))
    out = run("openssl", "dgst", "-sha256", "-verify", server.pki / "sa.pub", "-signature",
              der, signed)
    assert "Verified OK" in out.stdout

    conf = tmp_path / "droid.conf"
    conf.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server.url,
                                               "certificate-authority": str(server.ca)}}],
        "users": [{"name": "droid", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "droid"}}]}))
    droid = kubectl_for(server, conf)
    who = droid("auth", "whoami", "-o", "json").stdout
    info = json.loads(who)["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:default:droid"
    assert info["uid"] == sa["metadata"]["uid"]
    assert info["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default",
                              "system:authenticated"]
    assert info["extra"] == {"authentication.kubernetes.io/credential-id":
                             [f"JTI={claims['jti']}"]}
    r = droid("get", "pods", check=False)
    assert ('User "system:serviceaccount:default:droid" cannot list resource "pods" in API '
            'group "" in the namespace "default"') in r.stderr, r.stderr
    kubectl("create", "role", "pod-lister", "--verb=list", "--resource=pods")
    kubectl("create", "rolebinding", "droid-lists", "--role=pod-lister",
            "--serviceaccount=default:droid")
    assert droid("get", "pods").returncode == 0

    status = json.loads(kubectl("create", "-o", "json", "-f", "-", input={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}}).stdout)["status"]
    assert status["authenticated"] is True
    assert status["user"]["username"] == "system:serviceaccount:default:droid"
    assert status["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    review = json.loads(kubectl("create", "-o", "json", "-f", "-", input={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": ["vault"]}}).stdout)["status"]
    assert "authenticated" not in review and review["error"], review

    r = kubectl("create", "token", "droid", "--duration", "5m", check=False)
    assert ('TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
            'Invalid value: 300: may not specify a duration less than 10 minutes') in r.stderr
    r = kubectl("create", "token", "nobody", check=False)
    assert 'serviceaccounts "nobody" not found' in r.stderr

    kubectl("delete", "serviceaccount", "droid")
    kubectl("create", "serviceaccount", "droid")
    wait_until(lambda: "Unauthorized" in droid("get", "pods", check=False).stderr, 15,
               "the old token refused once its remembered success has expired")
    assert re.search(r'"Unable to authenticate the request" err="\[invalid bearer token, '
                     r'service account UID \(\S+\) does not match claim \(' +
                     sa["metadata"]["uid"] + r'\)\]"', server.log())


def test_bootstrap_policy_reconciled_at_restart(apiserver, kubectl_for):
    """At start the API server reconciles upstream's bootstrap policy: a
    role that lost a rule gets it back as simple rules, a binding that lost
    its subject gets it back (what a user added stays), a role annotated
    autoupdate=false is only reported; the log lines are upstream's."""
    kubectl = kubectl_for(apiserver)
    proxier = get_json(kubectl, "clusterrole", "system:node-proxier")
    assert proxier["rules"][0] == {"apiGroups": [""], "resources": ["endpoints", "services"],
                                   "verbs": ["list", "watch"]}
    proxier["rules"] = proxier["rules"][1:]
    kubectl("replace", "-f", "-", input=proxier)
    dns = get_json(kubectl, "clusterrole", "system:kube-dns")
    dns["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
    dns["rules"] = []
    kubectl("replace", "-f", "-", input=dns)
    kubectl("patch", "clusterrolebinding", "system:kube-scheduler", "--type=json", "-p",
            json.dumps([{"op": "replace", "path": "/subjects", "value": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "extra"}]}]))
    apiserver.restart()
    log = apiserver.log()
    simple = ("[{[list] [] [endpoints] [] []} {[watch] [] [endpoints] [] []} "
              "{[list] [] [services] [] []} {[watch] [] [services] [] []}]")
    assert ("updated clusterrole.rbac.authorization.k8s.io/system:node-proxier with "
            f"additional permissions: {simple}") in log, log[-3000:]
    assert ("skipped reconcile-protected clusterrole.rbac.authorization.k8s.io/system:kube-dns "
            f"with missing permissions: {simple}") in log
    assert ("updated clusterrolebinding.rbac.authorization.k8s.io/system:kube-scheduler with "
            "additional subjects: [{User rbac.authorization.k8s.io system:kube-scheduler }]") in log
    proxier = get_json(kubectl, "clusterrole", "system:node-proxier")
    assert {"apiGroups": [""], "resources": ["services"], "verbs": ["watch"]} in proxier["rules"]
    assert get_json(kubectl, "clusterrole", "system:kube-dns").get("rules", []) == []
    names = [s["name"] for s in
             get_json(kubectl, "clusterrolebinding", "system:kube-scheduler")["subjects"]]
    assert names == ["extra", "system:kube-scheduler"]
    # A restart with nothing to mend writes nothing.
    apiserver.restart()
    assert "updated clusterrole" not in apiserver.log()[len(log):]


def test_token_request_and_review_edge_cases(server, kubectl, wait_until):
    """Bad TokenRequest bodies are 400s, not crashes; a node-bound token
    dies with its node (once its last success is 10 s old); TokenReview
    wants a token; a patch naming another
    object's uid (a controller's adoption of a recreated pod) is refused."""
    kubectl("create", "serviceaccount", "edgy")
    base = f"{CORE}/namespaces/default/serviceaccounts/edgy/token"
    for spec in ({"audiences": [1]}, {"audiences": "x"}, {"expirationSeconds": "1h"},
                 {"audiences": [1], "expirationSeconds": 3607,
                  "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "nope"}}):
        r = server.request("POST", base, {"apiVersion": "authentication.k8s.io/v1",
                                          "kind": "TokenRequest", "spec": spec})
        assert r.status == 400, (spec, r.status, r.body)
    r = server.request("POST", base, {"apiVersion": "authentication.k8s.io/v1",
                                      "kind": "TokenRequest",
                                      "spec": {"expirationSeconds": None}})
    assert r.status == 201 and r.json()["spec"]["expirationSeconds"] == 3600, r.body
    r = server.request("POST", base, {"kind": "TokenRequest", "spec": {"boundObjectRef": {
        "kind": "Deployment", "apiVersion": "apps/v1", "name": "x"}}})
    assert_status(r, 400, "BadRequest",
                  "cannot bind token to object of type apps/v1, Kind=Deployment")

    create(kubectl, node_manifest("bound-node"))
    node_uid = get_json(kubectl, "node", "bound-node")["metadata"]["uid"]
    r = server.request("POST", base, {"kind": "TokenRequest", "spec": {"boundObjectRef": {
        "kind": "Node", "apiVersion": "v1", "name": "bound-node", "uid": node_uid}}})
    assert r.status == 201, r.body
    token = r.json()["status"]["token"]
    claims = _jwt_part(token.split(".")[1])
    assert claims["kubernetes.io"]["node"] == {"name": "bound-node", "uid": node_uid}
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": token}}
    r = server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
    assert r.json()["status"]["authenticated"] is True, r.body
    kubectl("delete", "node", "bound-node")
    # A review authenticates through the same cache as requests (upstream's
    # TokenSuccessCacheTTL, 10 s): the success of a moment ago still holds,
    # then the token is found invalidated.
    r = server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review)
    assert r.json()["status"]["authenticated"] is True, r.body

    def invalidated():
        st = server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                            review).json()["status"]
        return st.get("error") == "service account token has been invalidated" and \
            st.get("authenticated") is not True
    wait_until(invalidated, 15, "the review's remembered success to expire")
    r = server.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                       {"kind": "TokenReview", "spec": {"token": ""}})
    assert_status(r, 400, "BadRequest", "token is required for TokenReview in authentication")

    create(kubectl, pod_manifest("adoptee"))
    r = server.request("PATCH", f"{CORE}/namespaces/default/pods/adoptee",
                       {"metadata": {"uid": "not-its-uid", "labels": {"a": "b"}}},
                       content_type="application/strategic-merge-patch+json")
    assert_status(r, 422, "Invalid", "metadata.uid: Invalid value: \"not-its-uid\": field is "
                  "immutable")
    assert "a" not in (get_json(kubectl, "pod", "adoptee")["metadata"].get("labels") or {})


def test_dry_run_delete_deletes_nothing(kubectl):
    """`kubectl delete --dry-run=server` (a DeleteOptions body with dryRun)
    answers as a delete would and the object stays (issue 10, item 2)."""
    kubectl("create", "configmap", "dry-kept")
    out = kubectl("delete", "configmap", "dry-kept", "--dry-run=server").stdout
    assert 'configmap "dry-kept" deleted (server dry run)' in out, out
    obj = get_json(kubectl, "configmap", "dry-kept")
    assert "deletionTimestamp" not in obj["metadata"]


# ============================================ issue 10: misuse, items 4 and 7 --

def _b64(s):
    return base64.b64encode(s.encode()).decode()


def _secret_token(server, tid, tsecret, extra_groups):
    body = {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{tid}", "namespace": "kube-system"},
            "data": {"token-id": _b64(tid), "token-secret": _b64(tsecret),
                     "usage-bootstrap-authentication": _b64("true"),
                     "auth-extra-groups": _b64(extra_groups)}}
    r = server.request("POST", f"{CORE}/namespaces/kube-system/secrets", body)
    assert r.status == 201, r
    return f"{tid}.{tsecret}"


def test_bootstrap_token_groups_stay_inside_bootstrappers(server):
    """Issue 10, item 7: a bootstrap token whose auth-extra-groups names
    system:masters authenticates as nobody (upstream's group pattern); one
    with a system:bootstrappers: group gets it, sorted after the base group."""
    bad = _secret_token(server, "mstr01", "0123456789abcdef",
                        "system:bootstrappers:ok,system:masters")
    for path in (f"{CORE}/nodes", f"{CORE}/namespaces/kube-system/secrets"):
        assert_status(server.request("GET", path, auth=("token", bad)), 401, "Unauthorized")
    good = _secret_token(server, "grp001", "0123456789abcdef",
                         "system:bootstrappers:worker,system:bootstrappers:a")
    r = server.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                       {"apiVersion": "authentication.k8s.io/v1",
                        "kind": "SelfSubjectReview"}, auth=("token", good))
    assert r.status == 201, r
    assert r.json()["status"]["userInfo"]["groups"] == [
        "system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:worker",
        "system:authenticated"]
    wrong = "grp001.0123456789abcdee"
    assert_status(server.request("GET", CSRS, auth=("token", wrong)), 401, "Unauthorized")


def _node(server, name):
    return server.node_identity(name)


def _mirror_pod(name, node, node_uid, **spec):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default",
                        "annotations": {"kubernetes.io/config.mirror": "x"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                             "uid": node_uid, "controller": True}]},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}}
    pod["spec"].update(spec)
    return pod


def test_node_restriction_as_upstream(server):
    """Issue 10, item 7: NodeRestriction's rules with upstream's texts — a
    kubelet may not change its taints or restricted labels, creates only
    mirror pods bound and owned by itself without secrets or service
    accounts, and acts only on its own Lease in kube-node-lease."""
    node = "nr-node"
    me = _node(server, node)
    r = server.request("POST", f"{CORE}/nodes",
                       {"apiVersion": "v1", "kind": "Node", "metadata": {
                           "name": node, "labels": {"node-restriction.kubernetes.io/x": "y",
                                                    "kubernetes.io/hostname": node}}},
                       auth=me)
    assert_status(r, 403, "Forbidden", f'nodes "{node}" is forbidden: node "{node}" is not '
                  'allowed to set the following labels: node-restriction.kubernetes.io/x')
    r = server.request("POST", f"{CORE}/nodes",
                       {"apiVersion": "v1", "kind": "Node", "metadata": {
                           "name": node, "labels": {"kubernetes.io/hostname": node,
                                                    "topology.kubernetes.io/zone": "z1"}}},
                       auth=me)
    assert r.status == 201, r
    uid = r.json()["metadata"]["uid"]
    taint = [{"op": "add", "path": "/spec/taints",
              "value": [{"key": "k", "effect": "NoSchedule"}]}]
    r = server.request("PATCH", f"{CORE}/nodes/{node}", taint,
                       content_type="application/json-patch+json", auth=me)
    assert_status(r, 403, "Forbidden",
                  f'nodes "{node}" is forbidden: node "{node}" is not allowed to modify taints')
    lbl = {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": "",
                                   "example.com/free": "yes"}}}
    r = server.request("PATCH", f"{CORE}/nodes/{node}", lbl,
                       content_type="application/merge-patch+json", auth=me)
    assert_status(r, 403, "Forbidden", f'nodes "{node}" is forbidden: is not allowed to '
                  'modify labels: node-role.kubernetes.io/control-plane')
    r = server.request("PATCH", f"{CORE}/nodes/{node}",
                       {"metadata": {"labels": {"example.com/free": "yes"}}},
                       content_type="application/merge-patch+json", auth=me)
    assert r.status == 200, r

    r = server.request("POST", PODS, pod_manifest("nr-plain", node=node), auth=me)
    assert_status(r, 403, "Forbidden", f'pods "nr-plain" is forbidden: pod does not have '
                  f'"kubernetes.io/config.mirror" annotation, node "{node}" can only create '
                  'mirror pods')
    r = server.request("POST", PODS, _mirror_pod("nr-other", "elsewhere", uid), auth=me)
    assert_status(r, 403, "Forbidden", f'node "{node}" can only create pods with '
                  'spec.nodeName set to itself')
    r = server.request("POST", PODS, _mirror_pod("nr-uid", node, "0000"), auth=me)
    assert_status(r, 403, "Forbidden", f"node {node} UID mismatch: expected 0000 got {uid}")
    r = server.request("POST", PODS, _mirror_pod("nr-sa", node, uid, serviceAccountName="x"),
                       auth=me)
    assert_status(r, 403, "Forbidden", f'node "{node}" can not create pods that reference '
                  'a service account')
    r = server.request("POST", PODS, _mirror_pod(
        "nr-secret", node, uid, volumes=[{"name": "s", "secret": {"secretName": "s"}}]),
        auth=me)
    assert_status(r, 403, "Forbidden", f'node "{node}" can not create pods that reference '
                  'secrets')
    r = server.request("POST", PODS, _mirror_pod("nr-mirror", node, uid), auth=me)
    assert r.status == 201, r

    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": node}, "spec": {"holderIdentity": node}}
    r = server.request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                       lease, auth=me)
    assert r.status == 403, r
    r = server.request("POST", LEASES, dict(lease, metadata={"name": "someone-else"}),
                       auth=me)
    assert r.status == 403, r
    r = server.request("POST", LEASES, lease, auth=me)
    assert r.status == 201, r


def _rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_unauthenticated_uploads_are_not_read(make_apiserver, tmp_path, kubectl_for):
    """Issue 10, item 4: ten 16 MB uploads without credentials are refused
    before their bodies are read (the server's memory barely moves), while an
    authenticated client still gets upstream's 413 Status for 3.2 MB."""
    s = make_apiserver(tmp_path / "uploads")
    try:
        before = _rss_kb(s.proc.pid)
        big = b"x" * (16 << 20)
        answers, peak = [], [before]

        def upload():
            try:
                r = s.request("POST", CMS, big, content_type="application/json", auth=None)
                answers.append(r.status)
            except (ConnectionError, ssl.SSLError, OSError):
                answers.append("closed")  # refused mid-upload, having read little

        t0 = time.monotonic()
        threads = [threading.Thread(target=upload) for _ in range(10)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak.append(_rss_kb(s.proc.pid))
            time.sleep(0.005)
        elapsed = time.monotonic() - t0
        grown = max(peak) - before
        print(f"10 x 16 MB unauthenticated at once: {elapsed:.2f} s, answers {answers}, "
              f"RSS +{grown} KiB at most")
        assert all(a in (401, 413, "closed") for a in answers), answers
        assert grown < 32 * 1024, f"RSS grew {grown} KiB"
        r = s.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "big"},
                                    "data": {"k": "x" * (3200 * 1024)}})
        assert_status(r, 413, "RequestEntityTooLarge",
                      "Request entity too large: limit is 3145728")
        kubectl = kubectl_for(s)
        assert "default" in kubectl("get", "ns").stdout
    finally:
        assert s.stop() == 0


def test_watchers_that_stop_reading_are_closed(make_apiserver, tmp_path, kubectl_for):
    """Issue 10, item 4: five watchers that never read while a 900 KB
    ConfigMap changes 40 times are closed once 8 MiB wait unsent (upstream's
    'Forcing ... watcher close due to unresponsiveness'); the server's memory
    stays bounded and kubectl still works."""
    s = make_apiserver(tmp_path / "watchers")
    socks = []
    try:
        r = s.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "blob"}, "data": {"k": "0"}})
        assert r.status == 201, r
        ctx = s.ssl_context()
        for _ in range(5):
            raw = socket.create_connection(("127.0.0.1", s.port))
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            c.sendall(b"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\n"
                      b"Host: x\r\nAccept: application/json\r\n\r\n")
            socks.append(c)
        time.sleep(0.5)
        before = _rss_kb(s.proc.pid)
        peak = before
        for i in range(40):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blob"},
                    "data": {"k": chr(97 + i % 26) * (900 * 1024)}}
            r = s.request("PUT", f"{CMS}/blob", body)
            assert r.status == 200, r
            peak = max(peak, _rss_kb(s.proc.pid))
        print(f"5 stalled watchers x 40 updates of 900 KB: RSS {before} -> peak {peak} KiB")
        assert peak - before < 200 * 1024, f"RSS grew {peak - before} KiB"
        assert "watcher close due to unresponsiveness" in s.log()
        kubectl = kubectl_for(s)
        assert "blob" in kubectl("get", "cm").stdout
    finally:
        for c in socks:
            c.close()
        assert s.stop() == 0


def test_out_of_descriptors_the_listener_backs_off(make_apiserver, tmp_path, kubectl_for):
    """Issue 10, item 4: with its descriptors exhausted the server pauses
    accepting (Go's back-off, one line per pause) instead of spinning on
    EMFILE, and serves again once connections close."""
    s = make_apiserver(tmp_path / "emfile")
    conns = []
    try:
        subprocess.run(["prlimit", f"--pid={s.proc.pid}", "--nofile=96:96"], check=True)
        t0 = time.monotonic()
        try:
            for _ in range(150):
                conns.append(socket.create_connection(("127.0.0.1", s.port), timeout=2))
        except OSError:
            pass
        time.sleep(2)
        lines = s.log().count("Accept error")
        print(f"{len(conns)} connections, {lines} accept-error lines in "
              f"{time.monotonic() - t0:.1f} s")
        assert 0 < lines < 60, lines
        assert "Too many open files; retrying in" in s.log()
        for c in conns:
            c.close()
        conns = []
        time.sleep(1.5)
        kubectl = kubectl_for(s)
        assert "default" in kubectl("get", "ns").stdout
    finally:
        for c in conns:
            c.close()
        assert s.stop() == 0


def test_csr_names_are_path_segments(server):
    """Issue 10, item 10: a CSR's name may be anything upstream's storage
    can key — not 'a/b' (400, upstream's key function's text)."""
    body = csr_manifest(server, "a/b", "csr-name-node")
    r = server.request("POST", CSRS, body)
    assert_status(r, 400, "BadRequest", 'Name parameter invalid: "a/b": may not contain \'/\'')
    r = server.request("POST", CSRS, csr_manifest(server, "node-csr-Ab_9", "csr-name-node"))
    assert r.status == 201, r


def test_tls12_sessions_resume_with_client_certificates(server, tmp_path):
    """Issue 10, item 10: with client certificates a TLS 1.2 session is
    resumed (the server sets a session id context); before, the resuming
    handshake failed with an internal-error alert."""
    crt, key = server.admin
    sess = tmp_path / "sess"
    base = ["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}", "-tls1_2",
            "-cert", str(crt), "-key", str(key), "-CAfile", str(server.ca)]
    first = subprocess.run(base + ["-sess_out", str(sess)], input="", capture_output=True,
                           text=True, timeout=20)
    assert "Verify return code: 0 (ok)" in first.stdout, first.stdout + first.stderr
    again = subprocess.run(base + ["-sess_in", str(sess)], input="", capture_output=True,
                           text=True, timeout=20)
    assert "Reused, TLSv1.2" in again.stdout, again.stdout + again.stderr


# ================================== issue 10, item 5: bodies decode as typed --

QTY_RE = "quantities must match the regular expression " \
         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def test_typed_fields_as_upstream(server, kubectl, k8s):
    """Issue 10, item 5: every body is decoded as upstream decodes it into
    the kind's Go type. The review's corruptions are refused with the Go
    decoder's texts — 400 on create/update (rest.go's "cannot be handled
    as"), 422 on the field "patch" for patches (patch.go), the converter's
    texts for strategic merge — and nothing reaches the store that a typed
    client (kubectl describe, the Python client) cannot read."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "typed-node"},
            "status": {"capacity": {"cpu": "4000m", "memory": "2048Mi", "pods": 110}}}
    r = server.request("POST", f"{CORE}/nodes", node)
    assert r.status == 201, r
    # quantities canonical as upstream's String(): 4000m -> 4, 2048Mi -> 2Gi, 110 -> "110"
    assert r.json()["status"]["capacity"] == {"cpu": "4", "memory": "2Gi", "pods": "110"}

    def patch(path, body, ct):
        return server.request("PATCH", path, json.dumps(body), content_type=ct)

    merge, smp = "application/merge-patch+json", "application/strategic-merge-patch+json"
    r = patch(f"{CORE}/nodes/typed-node/status", {"status": {"capacity": {"cpu": {"x": 1}}}},
              merge)
    assert_status(r, 422, "Invalid", QTY_RE)
    st = r.json()
    assert st["message"].startswith(' "" is invalid: patch: Invalid value: "{'), st
    assert st["details"]["causes"][0]["field"] == "patch", st
    for body, want in [
            ({"metadata": {"labels": "str"}},
             "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels "
             "of type map[string]string"),
            ({"metadata": {"ownerReferences": "str"}},
             "json: cannot unmarshal string into Go struct field "
             "ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference"),
            ({"metadata": {"finalizers": {}}},
             "json: cannot unmarshal object into Go struct field "
             "ObjectMeta.metadata.finalizers of type []string")]:
        assert_status(patch(f"{CORE}/nodes/typed-node", body, merge), 422, "Invalid", want)
    # strategic merge: the converter's text, the patch shown as Go's %v
    r = patch(f"{CORE}/nodes/typed-node", {"metadata": {"labels": "str"}}, smp)
    assert_status(r, 422, "Invalid",
                  'patch: Invalid value: "map[metadata:map[labels:str]]": '
                  "cannot restore map from string")
    # kubectl sees the same
    out = kubectl("label", "node", "typed-node", "a=b", check=False)
    assert out.returncode == 0, out
    out = kubectl("patch", "node", "typed-node", "-p", '{"spec":{"unschedulable":"yes"}}',
                  check=False)
    assert out.returncode != 0 and "unrecognized type: bool" in out.stderr, out

    # create: 400 BadRequest, "cannot be handled as"
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "typed-cm", "namespace": "default"}, "data": {"a": 1}}
    r = server.request("POST", f"{CORE}/namespaces/default/configmaps", cm)
    assert_status(r, 400, "BadRequest",
                  'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
                  "unmarshal number into Go struct field ConfigMap.data of type string")
    # kubectl's default fieldValidation=Strict refuses unknown fields ...
    cm["data"] = {"a": "1"}
    cm["spec"] = {"x": 1}
    out = kubectl("create", "-f", "-", input=cm, check=False)
    assert out.returncode != 0, out
    assert 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding ' \
           'error: unknown field "spec"' in out.stderr, out
    # ... --validate=warn stores the object without them and says so
    out = kubectl("create", "-f", "-", "--validate=warn", input=cm)
    assert 'Warning: unknown field "spec"' in out.stderr, out
    assert "spec" not in get_json(kubectl, "configmap", "typed-cm")
    r = server.request("POST", f"{CORE}/namespaces/default/configmaps?fieldValidation=strict",
                       {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "typed-cm2"}})
    assert_status(r, 422, "Invalid",
                  'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported '
                  'value: "strict": supported values: "", "Ignore", "Strict", "Warn"')
    # the options are validated before the body is read, as upstream's
    r = server.request("POST", f"{CORE}/namespaces/default/configmaps?fieldValidation=x",
                       "{not json")
    assert_status(r, 422, "Invalid", 'CreateOptions.meta.k8s.io "" is invalid')
    r = server.request("PATCH", f"{CORE}/nodes/typed-node?fieldValidation=x", "{not json",
                       content_type="application/merge-patch+json")
    assert_status(r, 422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid')
    assert "name" not in r.json()["details"], r.json()

    # what was stored reads back through typed clients
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typed-pod"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1000m",
                                                               "memory": "1024Mi"}}}]}}
    r = server.request("POST", f"{CORE}/namespaces/default/pods", pod)
    assert r.status == 201, r
    assert r.json()["spec"]["containers"][0]["resources"]["requests"] == \
        {"cpu": "1", "memory": "1Gi"}
    assert "Name:" in kubectl("describe", "node", "typed-node").stdout
    assert k8s.read_node("typed-node").status.capacity["memory"] == "2Gi"
    assert k8s.read_namespaced_pod("typed-pod", "default").spec.containers[0].image == \
        "busybox"


# ======================== issue 10, items 8 and 9: revisions, durability --

def _decode_token(tok):
    return json.loads(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))


def test_resource_versions_as_upstream(server):
    """Issue 10, item 8: malformed revisions are 400; a read from a revision
    not yet committed waits up to 3 s, then 504 'Too large resource version'
    with Retry-After, as the watch cache answers; ListOptions validation is
    upstream's 422."""
    for bad, why in [("abc", "invalid syntax"), ("-1", "invalid syntax"),
                     ("99999999999999999999", "value out of range")]:
        want = (f'invalid resource version: resourceVersion: Invalid value: "{bad}": '
                f'strconv.ParseUint: parsing "{bad}": {why}')
        assert_status(server.request("GET", f"{CMS}?resourceVersion={bad}"), 400,
                      "BadRequest", want)
        assert_status(server.request("GET", f"{CMS}?watch=1&resourceVersion={bad}"), 400,
                      "BadRequest", want)
    current = int(server.request("GET", CMS).json()["metadata"]["resourceVersion"])
    start = time.monotonic()
    r = server.request("GET", f"{CMS}?resourceVersion={current + 1000}")
    took = time.monotonic() - start
    assert_status(r, 504, "Timeout", f"Timeout: Too large resource version: {current + 1000}")
    assert 2.5 < took < 6, took
    assert r.headers.get("retry-after") == "1", r.headers
    st = r.json()
    assert st["details"]["causes"] == [{"reason": "ResourceVersionTooLarge",
                                        "message": "Too large resource version"}], st
    assert st["details"]["retryAfterSeconds"] == 1, st
    # a revision that commits while the read waits: answered then
    current = int(server.request("GET", CMS).json()["metadata"]["resourceVersion"])
    timer = threading.Timer(0.5, lambda: server.request("POST", CMS, _cm("rv-later")))
    timer.start()
    try:
        start = time.monotonic()
        r = server.request("GET", f"{CMS}?resourceVersion={current + 1}")
        assert r.status == 200, r
        assert time.monotonic() - start < 2.5
        assert "rv-later" in [i["metadata"]["name"] for i in r.json()["items"]]
    finally:
        timer.join()
    assert_status(server.request("GET", f"{CMS}?resourceVersionMatch=Exact"), 422, "Invalid",
                  'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                  "resourceVersionMatch is forbidden unless resourceVersion is provided")
    assert_status(server.request("GET", f"{CMS}?resourceVersion=0&resourceVersionMatch=Exact"),
                  422, "Invalid",
                  'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')


def test_continue_tokens_are_one_snapshot(make_apiserver, tmp_path):
    """Issue 10, item 8: a continue token carries the first page's revision
    (upstream's {"v","rv","start"} encoding), so later pages show the list as
    it was — not writes made in between; once that revision has left the
    watch window, 410 Expired with upstream's text and a token that
    continues at the latest revision."""
    s = make_apiserver(tmp_path / "pages", "--watch-window", "20")
    try:
        ns = f"{CORE}/namespaces/default/configmaps"
        for i in range(5):
            assert s.request("POST", ns, _cm(f"page-{i}")).status == 201
        first = s.request("GET", f"{ns}?limit=2").json()
        tok = first["metadata"]["continue"]
        decoded = _decode_token(tok)
        assert decoded == {"v": "meta.k8s.io/v1", "rv": int(first["metadata"]["resourceVersion"]),
                           "start": "page-1\u0000"}, decoded
        assert first["metadata"]["remainingItemCount"] == 3
        # between the pages: page-3 changes, page-4 goes, page-5 comes
        r = s.request("PATCH", f"{ns}/page-3", {"data": {"changed": "yes"}},
                      content_type="application/merge-patch+json")
        assert r.status == 200, r
        assert s.request("DELETE", f"{ns}/page-4").status == 200
        assert s.request("POST", ns, _cm("page-5")).status == 201
        second = s.request("GET", f"{ns}?limit=10&continue={tok}").json()
        assert [i["metadata"]["name"] for i in second["items"]] == \
            ["page-2", "page-3", "page-4"], second
        assert "data" not in second["items"][1] or "changed" not in second["items"][1]["data"]
        assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        # the snapshot leaves the window
        tok = s.request("GET", f"{ns}?limit=2").json()["metadata"]["continue"]
        for i in range(25):
            s.request("PATCH", f"{ns}/page-0", {"data": {"n": str(i)}},
                      content_type="application/merge-patch+json")
        r = s.request("GET", f"{ns}?limit=10&continue={tok}")
        assert_status(r, 410, "Expired",
                      "The provided continue parameter is too old to display a consistent "
                      "list result. You can start a new list without the continue parameter, "
                      "or use the continue token in this response to retrieve the remainder "
                      "of the results.")
        fresh = r.json()["metadata"]["continue"]
        assert _decode_token(fresh)["rv"] == -1
        rest = s.request("GET", f"{ns}?limit=10&continue={fresh}").json()
        assert [i["metadata"]["name"] for i in rest["items"]] == ["page-2", "page-3", "page-5"]
        # bad tokens and combinations, as upstream's etcd3 store answers them
        assert_status(s.request("GET", f"{ns}?continue=%21%21"), 400, "BadRequest",
                      "invalid continue token: continue key is not valid: illegal base64 "
                      "data at input byte 0")
        bad = base64.urlsafe_b64encode(b'{"v":"x","rv":1,"start":"a"}').decode().rstrip("=")
        assert_status(s.request("GET", f"{ns}?continue={bad}"), 400, "BadRequest",
                      "continue key is not valid: server does not recognize this encoded "
                      "version x")
        assert_status(s.request("GET", f"{ns}?continue={fresh}&resourceVersion=5"), 400,
                      "BadRequest",
                      "specifying resource version is not allowed when using continue")
    finally:
        assert s.stop() == 0


def test_bookmarks_never_run_ahead(server):
    """Issue 10, item 8: a bookmark carries the committed revision, never one
    of a write still on its way to disk; a watch from "" ends its initial
    events with the k8s.io/initial-events-end bookmark, and the periodic one
    comes 2 s before timeoutSeconds ends the stream (upstream's
    nextBookmarkTime)."""
    conn, resp = open_watch(server, CMS + "?watch=true&allowWatchBookmarks=true"
                            "&timeoutSeconds=4", timeout=10)
    try:
        made = server.request("POST", CMS, _cm("bm-1"))
        assert made.status == 201
        events = read_events(resp)  # until the stream ends
    finally:
        conn.close()
    kinds = [(e["type"], e["object"]["metadata"].get("annotations")) for e in events]
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    assert marks and marks[0]["object"]["metadata"]["annotations"] == \
        {"k8s.io/initial-events-end": "true"}, kinds
    assert len(marks) == 2, kinds
    last_event_rv = max(rv(e["object"]) for e in events if e["type"] != "BOOKMARK")
    assert rv(marks[1]["object"]) >= last_event_rv
    assert rv(marks[1]["object"]) >= rv(made.json())


@pytest.mark.skipif(os.environ.get("CUBE_TEST_STORAGE") == "etcd3",
                    reason="refuses writes through SQLite; etcd's refusals are "
                           "test_store_etcd's")
def test_failed_commit_answers_500_and_serves_on(make_apiserver, tmp_path, kubectl_for,
                                                wait_until):
    """Issue 10, item 9: a write the store cannot commit is answered with a
    500 (upstream's 'Internal error occurred: ...') instead of ending the
    process; nothing of it is shown, reads go on, and once the store accepts
    writes again they work, and the garbage collector retries what it was
    refused. The store refuses through a trigger another SQLite connection
    adds, as a constraint or a full disk would refuse."""
    import sqlite3
    s = make_apiserver(tmp_path / "refuse")
    try:
        kubectl = kubectl_for(s)
        kubectl("create", "configmap", "held")
        db = sqlite3.connect(str(s.data_dir / "state.db"))
        db.execute("CREATE TRIGGER refuse BEFORE UPDATE ON kv WHEN NEW.key LIKE '%/held' "
                   "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;")
        db.commit()
        out = kubectl("label", "configmap", "held", "a=b", check=False)
        assert out.returncode != 0, out
        assert "Internal error occurred: sqlite write: refused by the test" in out.stderr, out
        assert "labels" not in get_json(kubectl, "configmap", "held")["metadata"]
        kubectl("create", "configmap", "other")  # other writes go on
        assert s.proc.poll() is None
        db.execute("DROP TRIGGER refuse")
        db.commit()
        db.close()
        kubectl("label", "configmap", "held", "a=b")
        assert get_json(kubectl, "configmap", "held")["metadata"]["labels"] == {"a": "b"}

        # the garbage collector retries what the store refused it
        owner = s.request("POST", CMS, _cm("owner")).json()
        dep = _cm("dep")
        dep["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                               "name": "owner",
                                               "uid": owner["metadata"]["uid"]}]
        assert s.request("POST", CMS, dep).status == 201
        db = sqlite3.connect(str(s.data_dir / "state.db"))
        db.execute("CREATE TRIGGER keep BEFORE DELETE ON kv WHEN OLD.key LIKE '%/dep' "
                   "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;")
        db.commit()
        assert s.request("DELETE", f"{CMS}/owner").status == 200
        wait_until(lambda: "garbage collector: write of" in s.log(), 10, "a refused GC write")
        assert s.request("GET", f"{CMS}/dep").status == 200
        db.execute("DROP TRIGGER keep")
        db.commit()
        db.close()
        wait_until(lambda: s.request("GET", f"{CMS}/dep").status == 404, 10,
                   "the collector's retry")
    finally:
        assert s.stop() == 0
