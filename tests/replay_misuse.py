#!/usr/bin/python3
"""Replay the misuse that issue 10's review reproduced against a running
cube cluster and print what the API server answered, its memory, and that
it kept serving kubectl.

    tests/replay_misuse.py [--cube build/cube] [--keep]

Starts `cube up --nodes 2` in a temporary directory (its own HOME for
kubectl), then: server-side dry runs (delete, finalizer-removing patch,
drain), a 20-operation JSON-patch copy bomb, five watchers that never read
while a 900 KB object changes, ten unauthenticated 16 MB uploads at once, a
connection that trickles a byte at a time, writes that corrupt typed fields,
and a bootstrap token that claims system:masters. Not a test (tests/e2e and
tests/unit pin each behaviour); a demonstration that prints figures.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Cluster:
    def __init__(self, cube, root):
        self.root = root
        self.data = os.path.join(root, "cluster")
        self.env = dict(os.environ, HOME=os.path.join(root, "home"), LC_ALL="C",
                        KUBECONFIG=os.path.join(self.data, "admin.conf"))
        os.makedirs(self.env["HOME"])
        self.log = open(os.path.join(root, "up.log"), "w")
        self.proc = subprocess.Popen([cube, "up", "--data-dir", self.data, "--nodes", "2",
                                      "--port", "0"], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(self.env["KUBECONFIG"]) and "Ready" in self.kubectl(
                    "get", "nodes", check=False):
                break
            time.sleep(0.3)
        else:
            sys.exit("cube up did not get ready; see " + self.log.name)
        conf = open(self.env["KUBECONFIG"]).read()
        self.server = conf.split("server: ")[1].split()[0]
        self.port = int(self.server.rsplit(":", 1)[1])
        pki = os.path.join(self.data, "pki")
        self.ca = os.path.join(pki, "ca.crt")
        self.admin = self._admin_identity(conf)
        self.apiserver_pid = self._apiserver_pid()

    def _admin_identity(self, conf):
        import yaml
        user = yaml.safe_load(conf)["users"][0]["user"]
        crt, key = os.path.join(self.root, "admin.crt"), os.path.join(self.root, "admin.key")
        open(crt, "wb").write(base64.b64decode(user["client-certificate-data"]))
        open(key, "wb").write(base64.b64decode(user["client-key-data"]))
        return crt, key

    def _apiserver_pid(self):
        # cube up runs every component in its one process.
        return self.proc.pid

    def kubectl(self, *args, check=True, input=None):
        r = subprocess.run(["kubectl", *args], env=self.env, capture_output=True, text=True,
                           input=input, timeout=60)
        if check and r.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr}")
        return (r.stdout + r.stderr).strip()

    def context(self, admin=True):
        ctx = ssl.create_default_context(cafile=self.ca)
        if admin:
            ctx.load_cert_chain(*self.admin)
        return ctx

    def request(self, method, path, body=None, ctype="application/json", admin=True,
                token=None):
        import http.client
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context(admin),
                                        timeout=30)
        headers = {"Accept": "application/json", "Content-Type": ctype}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        try:
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace")
        finally:
            c.close()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def show(title, *lines):
    print(f"\n== {title}")
    for line in lines:
        print(f"   {line}")


def brief(body, n=160):
    try:
        msg = json.loads(body).get("message")
        if msg:
            return msg[:n]
    except (ValueError, AttributeError):
        pass
    return body[:n].replace("\n", " ")


CMS = "/api/v1/namespaces/default/configmaps"


def dry_runs(c):
    c.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    out = [c.kubectl("delete", "cm", "held", "--dry-run=server")]
    after = c.kubectl("get", "cm", "held", "-o", "jsonpath={.metadata.deletionTimestamp}")
    out.append(f"after: deletionTimestamp={after or '(none)'} — nothing deleted")
    c.kubectl("delete", "cm", "held", "--wait=false")
    out.append(c.kubectl("patch", "cm", "held", "--type=merge", "-p",
                         '{"metadata":{"finalizers":null}}', "--dry-run=server"))
    fins = c.kubectl("get", "cm", "held", "-o", "jsonpath={.metadata.finalizers}")
    out.append(f"after: finalizers={fins} — still held")
    out.append(c.kubectl("drain", "node-1", "--dry-run=server", "--ignore-daemonsets",
                         "--force", check=False).splitlines()[-1])
    sched = c.kubectl("get", "node", "node-1", "-o", "jsonpath={.spec.unschedulable}")
    out.append(f"after: node-1 unschedulable={sched or 'false'}")
    c.kubectl("patch", "cm", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    show("server-side dry runs", *out)


def copy_bomb(c):
    c.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "bomb"}, "data": {"k": "0123456789abcdef" * 2}})
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {}},
           {"op": "copy", "from": "/data/k", "path": "/metadata/annotations/a0"}]
    for i in range(1, 20):
        ops.append({"op": "add", "path": f"/metadata/annotations/a{i}", "value": []})
        for _ in range(2):
            ops.append({"op": "copy", "from": f"/metadata/annotations/a{i - 1}",
                        "path": f"/metadata/annotations/a{i}/-"})
    t0 = time.monotonic()
    code, body = c.request("PATCH", f"{CMS}/bomb", ops, ctype="application/json-patch+json")
    show(f"JSON-patch copy bomb ({len(ops)} operations, 2^19 x 32 bytes if applied)",
         f"{code} {brief(body)} in {time.monotonic() - t0:.3f} s",
         f"RSS {rss_kb(c.apiserver_pid)} KiB")


def stalled_watchers(c):
    c.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "blob"}, "data": {"k": "0"}})
    socks = []
    for _ in range(5):
        raw = socket.create_connection(("127.0.0.1", c.port))
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s = c.context().wrap_socket(raw, server_hostname="127.0.0.1")
        s.sendall(f"GET {CMS}?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        socks.append(s)
    time.sleep(0.5)
    before = peak = rss_kb(c.apiserver_pid)
    for i in range(40):
        code, _ = c.request("PUT", f"{CMS}/blob", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blob"},
            "data": {"k": chr(97 + i % 26) * (900 * 1024)}})
        peak = max(peak, rss_kb(c.apiserver_pid))
    for s in socks:
        s.close()
    show("5 watchers that never read, 40 updates of a 900 KB ConfigMap",
         f"RSS {before} KiB -> peak {peak} KiB (the watchers are closed past 8 MiB unsent)")


def uploads(c):
    big, answers = b"x" * (16 << 20), []
    before = peak = rss_kb(c.apiserver_pid)

    def one():
        try:
            answers.append(c.request("POST", CMS, big, admin=False)[0])
        except OSError:
            answers.append("closed before the body was read")

    threads = [threading.Thread(target=one) for _ in range(10)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_kb(c.apiserver_pid))
        time.sleep(0.005)
    show("10 unauthenticated 16 MB uploads at once",
         f"answers: {sorted(set(map(str, answers)))} in {time.monotonic() - t0:.2f} s",
         f"RSS {before} KiB -> peak {peak} KiB")


def trickle(c):
    s = socket.create_connection(("127.0.0.1", c.port))
    t0 = time.monotonic()
    hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
    i = 0
    try:
        while time.monotonic() - t0 < 60:
            s.sendall(hello[i % len(hello):i % len(hello) + 1])
            i += 1
            s.settimeout(1.0)
            try:
                if s.recv(1) == b"":
                    break
            except socket.timeout:
                pass
    except OSError:
        pass
    show("a connection trickling a byte a second (never a whole TLS hello)",
         f"closed by the server after {time.monotonic() - t0:.1f} s and {i} bytes "
         "(the 32 s header deadline)")
    s.close()


def corruptions(c):
    out = []
    cases = [
        ("PATCH", "/api/v1/nodes/node-1/status", {"status": {"capacity": {"cpu": {"x": 1}}}},
         "status.capacity.cpu={\"x\":1}"),
        ("PATCH", "/api/v1/nodes/node-1", {"metadata": {"labels": "str"}}, "labels:\"str\""),
        ("PATCH", f"{CMS}/blob", {"metadata": {"ownerReferences": "str"}},
         "ownerReferences:\"str\""),
        ("PATCH", f"{CMS}/blob", {"metadata": {"finalizers": {}}}, "finalizers:{}"),
        ("PATCH", f"{CMS}/blob", {"data": {"k": 1}}, "ConfigMap data value 1"),
    ]
    for method, path, body, what in cases:
        code, resp = c.request(method, path, body, ctype="application/merge-patch+json")
        # the message quotes the whole patched object; its end says why
        msg = brief(resp, 1 << 20)
        out.append(f"{what}: {code} ...{msg[-110:]}")
    out.append("kubectl describe node node-1: " + (
        "ok" if "Name:" in c.kubectl("describe", "node", "node-1", check=False) else "FAILED"))
    show("typed-field corruptions (refused as upstream's typed decode refuses them)", *out)


def masters_token(c):
    def b64(s):
        return base64.b64encode(s.encode()).decode()
    c.request("POST", "/api/v1/namespaces/kube-system/secrets", {
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": "bootstrap-token-mstr01", "namespace": "kube-system"},
        "data": {"token-id": b64("mstr01"), "token-secret": b64("0123456789abcdef"),
                 "usage-bootstrap-authentication": b64("true"),
                 "auth-extra-groups": b64("system:masters")}})
    code, body = c.request("GET", "/api/v1/namespaces/kube-system/secrets", admin=False,
                           token="mstr01.0123456789abcdef")
    show("a bootstrap token with auth-extra-groups=system:masters",
         f"{code} {brief(body)} (groups must start with system:bootstrappers:)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cube", default=shutil.which("cube") or "build/cube")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="cube-misuse-")
    c = Cluster(os.path.abspath(args.cube), root)
    try:
        show("start", f"cube up at {c.server}, RSS {rss_kb(c.apiserver_pid)} KiB")
        for step in (dry_runs, copy_bomb, stalled_watchers, uploads, trickle, corruptions,
                     masters_token):
            step(c)
        alive = c.proc.poll() is None
        nodes = c.kubectl("get", "nodes", check=False)
        show("after all of it",
             f"cube up {'still running' if alive else 'EXITED'}, "
             f"RSS {rss_kb(c.apiserver_pid) if alive else 0} KiB",
             *nodes.splitlines())
    finally:
        c.stop()
        if args.keep:
            print(f"\nkept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
