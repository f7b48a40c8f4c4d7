"""Shared fixtures for cube's end-to-end tests.

The tests drive the real `cube` binary (and real kubectl, openssl, curl) the
way a user would, and assert on what a user would see.

Fixtures:
  cube  -- path of the binary under test: $CUBE_BIN, else /work/main/build/cube
  tmp   -- a fresh, empty directory for this test (a pathlib.Path)
  run   -- run(*argv, check=True, env=None, input=None, timeout=60) runs a
           command and returns a subprocess.CompletedProcess with text stdout
           and stderr, e.g. run(cube, "pki", "init", "--dir", tmp / "c")
           or run("openssl", "verify", ...).
  show  -- show(proc) formats a CompletedProcess (command, exit status,
           stdout, stderr) for assertion messages.

Each command runs with a clean, per-test environment: HOME points into the
test's tmp dir, KUBECONFIG and CUBE_CLOCK_OFFSET are unset, and `env` (a
dict) is merged on top of that.
"""

import os
import shlex
import signal
import subprocess

import pytest

DEFAULT_CUBE = "/work/main/build/cube"

# Variables from the caller's shell that would change what cube or kubectl
# do; each test starts without them.
_SCRUBBED_ENV = ("KUBECONFIG", "CUBE_CLOCK_OFFSET", "MALLOC_CONF")


@pytest.fixture(scope="session")
def cube():
    """Path of the cube binary under test."""
    path = os.environ.get("CUBE_BIN") or DEFAULT_CUBE
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"cube binary not found or not executable: {path} "
                    "(build it, or set CUBE_BIN)", pytrace=False)
    return path


@pytest.fixture
def tmp(tmp_path):
    """A fresh, empty directory for this test."""
    work = tmp_path / "work"
    work.mkdir()
    return work


def _describe(proc):
    return (f"$ {shlex.join(proc.args)}\n"
            f"exit status: {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}"
            f"--- stderr ---\n{proc.stderr}")


@pytest.fixture
def run(tmp_path):
    """run(*argv, check=True, env=None, input=None, timeout=60).

    check=True fails the test unless the command exits 0; check=False
    returns whatever happened. A command killed by a signal (a crash)
    always fails the test.
    """
    home = tmp_path / "home"
    home.mkdir()
    base_env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    base_env.update(HOME=str(home), LC_ALL="C")

    def _run(*argv, check=True, env=None, input=None, timeout=60):
        args = [str(a) for a in argv]
        full_env = dict(base_env)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        try:
            proc = subprocess.run(args, env=full_env, input=input, text=True,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"$ {shlex.join(args)}\ntimed out after {timeout}s\n"
                        f"--- stdout ---\n{e.stdout}\n--- stderr ---\n{e.stderr}")
        if proc.returncode < 0:
            try:
                name = signal.Signals(-proc.returncode).name
            except ValueError:
                name = f"signal {-proc.returncode}"
            pytest.fail(f"command crashed with {name}\n{_describe(proc)}")
        if check and proc.returncode != 0:
            pytest.fail(f"command failed\n{_describe(proc)}")
        return proc

    return _run


@pytest.fixture
def show():
    """show(proc) -> the command line, exit status and output, for
    assertion messages."""
    return _describe


# ---------------------------------------------------------------------------
# A running `cube apiserver` (appended for test_apiserver.py; reusable).
#
#   make_apiserver(parent_dir, *extra_args) -> CubeAPIServer
#       runs `cube pki init --dir parent_dir/cluster` and starts a server on
#       a free loopback port; the caller stops it (server.stop() returns the
#       exit status; SIGTERM must give 0).
#   apiserver  -- a fresh server for one test, stopped (and checked to exit
#                 0) at teardown.
#   wait_until(fn, timeout=10, message=None) -- polls fn every 50 ms until
#                 it returns something truthy (which it returns), else fails.
#
# server.request(method, path, body=..., content_type=..., auth=...) talks
# HTTPS to it directly: auth is "admin" (default; the admin.conf identity),
# None (no credentials), a (cert, key) pair, or ("token", TOKEN).
# server.node_identity("n1") makes a CN=system:node:n1 client certificate.
# ---------------------------------------------------------------------------

import base64 as _base64
import http.client as _http_client
import json as _json
import re as _re
import ssl as _ssl
import time as _time


def stop_process(proc, name, sig=signal.SIGTERM, timeout=20):
    """Signal a cube process and return its exit status (None if it never
    ran, its status if it already ended); kill it and fail the test if it
    does not exit within timeout."""
    if proc is None or proc.poll() is not None:
        return None if proc is None else proc.returncode
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"{name} did not exit within {timeout}s of "
                    f"{signal.Signals(sig).name}", pytrace=False)


def _wait_until(fn, timeout=10.0, message=None, interval=0.05):
    deadline = _time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if _time.monotonic() >= deadline:
            what = message() if callable(message) else message
            pytest.fail(f"timed out after {timeout}s waiting for "
                        f"{what or getattr(fn, '__name__', 'a condition')}",
                        pytrace=False)
        _time.sleep(interval)


@pytest.fixture(scope="session")
def wait_until():
    """wait_until(fn, timeout=10, message=None): poll fn every 50 ms."""
    return _wait_until


class Response:
    """An HTTP answer: status, headers (lower-case keys), text, json()."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body
        self.text = body.decode("utf-8", "replace")

    def json(self):
        try:
            return _json.loads(self.text)
        except ValueError:
            raise AssertionError(f"HTTP {self.status}: body is not JSON: "
                                 f"{self.text[:500]!r}") from None

    def __repr__(self):
        return f"<HTTP {self.status} {self.text[:800]}>"



# -- etcd -------------------------------------------------------------------
#
# CUBE_TEST_STORAGE=etcd3 runs every CubeAPIServer on a private one-member
# etcd (Debian's etcd-server) on free loopback ports instead of SQLite:
# the API server suite runs against both backends (tests/CMakeLists.txt).

def free_loopback_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_loopback_ports(n):
    """n distinct free ports: all chosen while every socket is still bound."""
    import socket
    held = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        held.append(s)
    ports = [s.getsockname()[1] for s in held]
    for s in held:
        s.close()
    return ports


_ETCDS = []


class Etcd:
    """A real etcd cluster of `members` on loopback, plain HTTP or TLS."""

    def __init__(self, parent, members=1, name="etcd"):
        self.dir = parent / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.names = [f"{name}{i}" for i in range(members)]
        ports = free_loopback_ports(2 * len(self.names))
        self.client, self.peer = ports[:len(self.names)], ports[len(self.names):]
        self.procs = [None] * members
        _ETCDS.append(self)

    @property
    def urls(self):
        return [f"http://127.0.0.1:{p}" for p in self.client]

    @property
    def servers(self):
        return ",".join(self.urls)

    def start_member(self, i):
        cluster = ",".join(f"{n}=http://127.0.0.1:{p}"
                           for n, p in zip(self.names, self.peer))
        argv = ["etcd", "--name", self.names[i],
                "--data-dir", str(self.dir / self.names[i]),
                "--listen-client-urls", self.urls[i],
                "--advertise-client-urls", self.urls[i],
                "--listen-peer-urls", f"http://127.0.0.1:{self.peer[i]}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{self.peer[i]}",
                "--initial-cluster", cluster,
                "--initial-cluster-state", "new",
                "--log-level", "warn"]
        log = open(self.dir / f"{self.names[i]}.log", "ab")
        self.procs[i] = subprocess.Popen(argv, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)
        log.close()

    def start(self, timeout=30):
        for i in range(len(self.names)):
            self.start_member(i)
        _wait_until(self.healthy, timeout, "etcd to answer /health")
        return self

    def healthy(self, i=None):
        import urllib.request
        for j, url in enumerate(self.urls):
            if i is not None and j != i:
                continue
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if b'"true"' not in r.read():
                        return False
            except OSError:
                return False
        return True

    def kill(self, i):
        if self.procs[i] and self.procs[i].poll() is None:
            self.procs[i].kill()
            self.procs[i].wait(10)

    def stop(self):
        for i in range(len(self.procs)):
            self.kill(i)

    def etcdctl(self, *args):
        return subprocess.run(["etcdctl", "--endpoints", self.servers,
                               *map(str, args)],
                              env=dict(os.environ, ETCDCTL_API="3"),
                              capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="session", autouse=True)
def _stop_etcds():
    yield
    for e in _ETCDS:
        e.stop()


def storage_backend():
    return os.environ.get("CUBE_TEST_STORAGE", "sqlite")


class CubeAPIServer:
    """One `cube apiserver` over a `cube pki init` cluster directory."""

    def __init__(self, cube, parent, extra_args=(), env=None):
        self.cube = str(cube)
        self.parent = parent
        self.dir = parent / "cluster"
        self.pki = self.dir / "pki"
        self.ca = self.pki / "ca.crt"
        self.data_dir = self.dir / "data"
        self.admin_conf = self.dir / "admin.conf"
        self.bootstrap_conf = self.dir / "bootstrap-kubelet.conf"
        self.port_file = self.dir / "port"
        self.log_path = self.dir / "apiserver.log"
        self.extra_args = [str(a) for a in extra_args]
        self.env = {k: v for k, v in os.environ.items()
                    if k not in _SCRUBBED_ENV}
        self.env.update(HOME=str(parent), LC_ALL="C")
        self.env.update(env or {})
        self.proc = None
        self.port = None
        self._identities = {}
        self._cube("pki", "init", "--dir", self.dir)
        self.token = (self.pki / "bootstrap-token").read_text().strip()
        self.admin = self._admin_identity()
        self.etcd = None
        if storage_backend() == "etcd3" and not any(
                a.startswith("--etcd-servers") or a == "--storage-backend"
                for a in self.extra_args):
            self.etcd = Etcd(parent).start()
            self.extra_args += ["--etcd-servers", self.etcd.servers]

    # -- processes ---------------------------------------------------------

    def _cube(self, *args, env=None):
        full = dict(self.env)
        full.update(env or {})
        argv = [self.cube] + [str(a) for a in args]
        proc = subprocess.run(argv, env=full, text=True, capture_output=True,
                              timeout=60)
        if proc.returncode != 0:
            pytest.fail(f"command failed\n{_describe(proc)}", pytrace=False)
        return proc

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout=20):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        if self.port_file.exists():
            self.port_file.unlink()
        # Two serving threads unless a test says otherwise: below 4 CPUs
        # the default is none, and every suite here should go through the
        # relay (src/apiserver/relay.c) as well as the in-process tests do.
        threads = ([] if any(a.startswith("--serving-threads") for a in self.extra_args)
                   else ["--serving-threads", "2"])
        argv = [self.cube, "apiserver", "--cluster-dir", self.dir,
                "--data-dir", self.data_dir, "--bind-address", "127.0.0.1",
                "--secure-port", "0", "--port-file", self.port_file, "-v", "3",
                *threads, *self.extra_args]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(a) for a in argv], env=self.env,
                                     stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()

        def port_written():
            if self.proc.poll() is not None:
                pytest.fail(f"cube apiserver exited with {self.proc.returncode} "
                            f"while starting\n--- log ---\n{self.log()[-4000:]}",
                            pytrace=False)
            text = self.port_file.read_text() if self.port_file.exists() else ""
            return text.strip().isdigit() and int(text)

        self.port = _wait_until(port_written, timeout,
                                "the apiserver's --port-file")

        def healthy():
            try:
                r = self.request("GET", "/healthz", auth=None, timeout=2)
            except OSError:
                return False
            return r.status == 200 and r.text.strip() == "ok"

        _wait_until(healthy, timeout, lambda: "/healthz to answer ok; log:\n"
                    + self.log()[-4000:])
        for conf in (self.admin_conf, self.bootstrap_conf):
            text = conf.read_text()
            conf.write_text(_re.sub(r"(?m)^(\s*server:\s*).*$",
                                    rf"\g<1>{self.url}", text))
        return self

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Signal the server and return its exit status (0 for SIGTERM)."""
        return stop_process(self.proc, "cube apiserver", sig, timeout)

    def kill(self):
        """SIGKILL: a crash, no chance to flush anything."""
        self.proc.kill()
        return self.proc.wait(10)

    def restart(self):
        rc = self.stop()
        assert rc == 0, f"SIGTERM exit status {rc}\n{self.log()[-3000:]}"
        return self.start()

    def log(self):
        return self.log_path.read_text(errors="replace") \
            if self.log_path.exists() else ""

    # -- identities --------------------------------------------------------

    def _admin_identity(self):
        import yaml
        conf = yaml.safe_load(self.admin_conf.read_text())
        user = conf["users"][0]["user"]
        crt, key = self.dir / "admin.crt", self.dir / "admin.key"
        crt.write_bytes(_base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(_base64.b64decode(user["client-key-data"]))
        key.chmod(0o600)
        return (crt, key)

    def node_identity(self, node, ca_dir=None, duration=None, clock_offset=None):
        """(cert, key) for CN=system:node:NODE, O=system:nodes, signed by
        this cluster's CA (or ca_dir's), optionally already expired."""
        tag = (node, str(ca_dir), duration, clock_offset)
        if tag in self._identities:
            return self._identities[tag]
        d = self.parent / "identities" / f"{len(self._identities)}-{node}"
        d.mkdir(parents=True)
        key, req, crt = d / "node.key", d / "node.csr", d / "node.crt"
        self._cube("certs", "new-csr", "--node", node, "--key-out", key,
                   "--out", req)
        sign = ["certs", "sign-csr", "--ca-dir", ca_dir or self.dir,
                "--in", req, "--out", crt]
        if duration:
            sign += ["--duration", duration]
        if clock_offset:
            sign = [f"--clock-offset={clock_offset}"] + sign
        self._cube(*sign)
        self._identities[tag] = (crt, key)
        return (crt, key)

    def write_kubeconfig(self, path, cert, key, user="user"):
        """A kubeconfig for this server with a client certificate."""
        import yaml
        conf = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "cube", "cluster": {
                "server": self.url, "certificate-authority": str(self.ca)}}],
            "users": [{"name": user, "user": {
                "client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "cube", "context": {
                "cluster": "cube", "user": user}}],
            "current-context": "cube",
        }
        path.write_text(yaml.safe_dump(conf))
        return path

    # -- HTTP --------------------------------------------------------------

    def ssl_context(self, auth="admin"):
        ctx = _ssl.create_default_context(cafile=str(self.ca))
        if auth == "admin":
            auth = self.admin
        if isinstance(auth, tuple) and len(auth) == 2 and auth[0] != "token":
            ctx.load_cert_chain(str(auth[0]), str(auth[1]))
        return ctx

    def connect(self, auth="admin", timeout=10):
        return _http_client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.ssl_context(auth),
            timeout=timeout)

    @staticmethod
    def headers_for(auth, content_type=None, headers=None):
        h = {"Accept": "application/json"}
        if content_type:
            h["Content-Type"] = content_type
        if isinstance(auth, tuple) and auth and auth[0] == "token":
            h["Authorization"] = f"Bearer {auth[1]}"
        h.update(headers or {})
        return h

    def request(self, method, path, body=None, content_type=None,
                auth="admin", headers=None, timeout=10):
        """One HTTPS request; body may be bytes, str or a JSON-able value."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = _json.dumps(body)
            content_type = content_type or "application/json"
        if isinstance(body, str):
            body = body.encode()
        conn = self.connect(auth, timeout)
        try:
            conn.request(method, path, body=body,
                         headers=self.headers_for(auth, content_type, headers))
            resp = conn.getresponse()
            return Response(resp.status, resp.getheaders(), resp.read())
        finally:
            conn.close()


@pytest.fixture(scope="session")
def make_apiserver(cube):
    """make_apiserver(parent_dir, *extra_args, env=None) -> a started
    CubeAPIServer; the caller stops it."""
    def _make(parent, *extra_args, env=None):
        parent.mkdir(parents=True, exist_ok=True)
        return CubeAPIServer(cube, parent, extra_args, env).start()
    return _make


@pytest.fixture
def apiserver(make_apiserver, tmp_path):
    """A fresh cube apiserver for one test; SIGTERM at teardown must exit 0."""
    server = make_apiserver(tmp_path / "apiserver")
    yield server
    rc = server.stop()
    assert rc in (0, None), (f"cube apiserver exited {rc} on SIGTERM\n"
                             f"{server.log()[-3000:]}")
