"""End-to-end: the etcd PKI that `cube pki init` writes (issue 12) works.

A real etcd (Debian's 3.4, /usr/bin/etcd) serves mutual TLS with
pki/etcd/server.* and pki/etcd/peer.*, trusting pki/etcd/ca.crt for clients
and peers, as kubeadm's etcd static pod does. kubeadm's liveness probe
identity (etcd/healthcheck-client) may read /health; no certificate, or one
from the cluster CA, may not. Then `cube apiserver` stores in that etcd with
kubeadm's apiserver-etcd-client pair, named by flags or found in
--cluster-dir.

Every process here is started by the test and stopped by its own PID.
"""

import json
import os
import socket
import subprocess
import time

import pytest

from conftest import CubeAPIServer, free_loopback_ports, stop_process

ETCD = "/usr/bin/etcd"
# The default node name. CubeAPIServer runs its own `cube pki init` without
# --node-name, which must keep (not remake) the files etcd is serving with.
NODE = socket.gethostname().lower()

pytestmark = pytest.mark.skipif(not os.access(ETCD, os.X_OK), reason="needs /usr/bin/etcd")


class TLSEtcd:
    """etcd members on loopback with the cluster's etcd PKI, as kubeadm's
    etcd.yaml runs them: client and peer certificate auth both on."""

    def __init__(self, parent, pki, members=1):
        self.dir = parent / "etcd"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pki = pki
        self.names = [f"member{i}" for i in range(members)]
        ports = free_loopback_ports(2 * len(self.names))
        self.client, self.peer = ports[:len(self.names)], ports[len(self.names):]
        self.procs = []

    @property
    def urls(self):
        return [f"https://127.0.0.1:{p}" for p in self.client]

    def argv(self, i):
        e = self.pki / "etcd"
        cluster = ",".join(f"{n}=https://127.0.0.1:{p}" for n, p in zip(self.names, self.peer))
        return [ETCD, "--name", self.names[i], "--data-dir", str(self.dir / self.names[i]),
                "--cert-file", str(e / "server.crt"), "--key-file", str(e / "server.key"),
                "--client-cert-auth", "--trusted-ca-file", str(e / "ca.crt"),
                "--listen-client-urls", self.urls[i],
                "--advertise-client-urls", self.urls[i],
                "--peer-cert-file", str(e / "peer.crt"), "--peer-key-file", str(e / "peer.key"),
                "--peer-client-cert-auth", "--peer-trusted-ca-file", str(e / "ca.crt"),
                "--listen-peer-urls", f"https://127.0.0.1:{self.peer[i]}",
                "--initial-advertise-peer-urls", f"https://127.0.0.1:{self.peer[i]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--log-level", "warn"]

    def start(self, timeout=30):
        for i in range(len(self.names)):
            with open(self.dir / f"{self.names[i]}.log", "ab") as log:
                self.procs.append(subprocess.Popen(self.argv(i), stdout=log, stderr=log,
                                                   stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout
        while not all(self.healthy(u) for u in self.urls):
            for p, n in zip(self.procs, self.names):
                if p.poll() is not None:
                    pytest.fail(f"etcd {n} exited {p.returncode}\n{self.log()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"etcd not healthy after {timeout}s\n{self.log()}", pytrace=False)
            time.sleep(0.1)
        return self

    def curl(self, url, *client):
        """curl URL/health with the etcd CA and an optional (cert, key)."""
        argv = ["curl", "-sS", "-m", "10", "--cacert", str(self.pki / "etcd" / "ca.crt")]
        if client:
            argv += ["--cert", str(client[0]), "--key", str(client[1])]
        return subprocess.run(argv + [url + "/health"], capture_output=True, text=True,
                              timeout=20)

    def healthcheck_client(self):
        e = self.pki / "etcd"
        return e / "healthcheck-client.crt", e / "healthcheck-client.key"

    def healthy(self, url):
        proc = self.curl(url, *self.healthcheck_client())
        try:
            return proc.returncode == 0 and json.loads(proc.stdout)["health"] == "true"
        except (ValueError, KeyError):
            return False

    def etcdctl(self, *args):
        """etcdctl as the API server: apiserver-etcd-client."""
        argv = ["etcdctl", "--endpoints", ",".join(self.urls),
                "--cacert", str(self.pki / "etcd" / "ca.crt"),
                "--cert", str(self.pki / "apiserver-etcd-client.crt"),
                "--key", str(self.pki / "apiserver-etcd-client.key"), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, ETCDCTL_API="3"))

    def log(self):
        return "\n".join(f"--- {n} ---\n" + (self.dir / f"{n}.log").read_text(errors="replace")
                         for n in self.names if (self.dir / f"{n}.log").exists())

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def parent(tmp_path):
    """Where CubeAPIServer keeps its cluster dir (parent/cluster)."""
    d = tmp_path / "apiserver"
    d.mkdir()
    return d


@pytest.fixture
def cluster(run, cube, parent):
    """`cube pki init` in the directory the API server will use later; its
    own pki init there keeps these files."""
    d = parent / "cluster"
    run(cube, "pki", "init", "--dir", d)
    return d


@pytest.fixture
def etcd(parent, cluster):
    e = TLSEtcd(parent, cluster / "pki")
    try:
        yield e.start()
    finally:
        e.stop()


# ------------------------------------------------------------------ etcd ---

def test_etcd_serves_health_to_the_healthcheck_client(etcd):
    proc = etcd.curl(etcd.urls[0], *etcd.healthcheck_client())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["health"] == "true", proc.stdout


def test_etcd_refuses_a_client_without_certificate(etcd):
    proc = etcd.curl(etcd.urls[0])
    assert proc.returncode != 0, f"etcd answered without a client certificate: {proc.stdout}"
    assert "health" not in proc.stdout, proc.stdout


def test_etcd_refuses_a_client_of_the_cluster_ca(etcd, cluster):
    pki = cluster / "pki"
    proc = etcd.curl(etcd.urls[0], pki / "apiserver-kubelet-client.crt",
                     pki / "apiserver-kubelet-client.key")
    assert proc.returncode != 0, f"etcd trusted the cluster CA: {proc.stdout}"
    assert "health" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("host", [NODE, "localhost"])
def test_etcd_serving_certificate_matches_its_names(etcd, host):
    port = etcd.client[0]
    crt, key = etcd.healthcheck_client()
    proc = subprocess.run(
        ["curl", "-sS", "-m", "10", "--resolve", f"{host}:{port}:127.0.0.1",
         "--cacert", str(etcd.pki / "etcd" / "ca.crt"), "--cert", str(crt), "--key", str(key),
         f"https://{host}:{port}/health"], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["health"] == "true"


def test_cluster_ca_does_not_vouch_for_etcd(etcd, cluster):
    crt, key = etcd.healthcheck_client()
    proc = subprocess.run(
        ["curl", "-sS", "-m", "10", "--cacert", str(cluster / "pki" / "ca.crt"),
         "--cert", str(crt), "--key", str(key), etcd.urls[0] + "/health"],
        capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0, proc.stdout


def test_two_members_join_over_peer_tls(parent, cluster):
    # The peers dial each other with etcd/peer, so it needs client auth as
    # well as server auth, and 127.0.0.1 among its names.
    e = TLSEtcd(parent, cluster / "pki", members=2)
    try:
        e.start()
        proc = e.etcdctl("member", "list", "-w", "json")
        assert proc.returncode == 0, proc.stderr
        members = json.loads(proc.stdout)["members"]
        assert sorted(m.get("name", "") for m in members) == ["member0", "member1"], members
        proc = e.etcdctl("endpoint", "health")
        said = proc.stdout + proc.stderr  # etcdctl 3.4 reports health on stderr
        assert proc.returncode == 0 and said.count("is healthy") == 2, said
    finally:
        e.stop()


# ---------------------------------------------------- cube apiserver on it ---

def kubectl_namespaces(run, server):
    proc = run("kubectl", "--kubeconfig", server.admin_conf, "get", "ns",
               "-o", "jsonpath={.items[*].metadata.name}", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr + server.log()[-3000:]
    return proc.stdout.split()


def serve(cube, parent, *args):
    server = CubeAPIServer(cube, parent, args)
    try:
        server.start()
    except BaseException:
        stop_process(server.proc, "cube apiserver")
        raise
    return server


def check_stored_in_etcd(run, etcd, server):
    """kubectl lists default, and the Namespace is a key in this etcd."""
    try:
        assert "default" in kubectl_namespaces(run, server)
        proc = etcd.etcdctl("get", "/registry/namespaces/default", "--keys-only")
        assert proc.returncode == 0, proc.stderr
        assert "/registry/namespaces/default" in proc.stdout, proc.stdout
        assert "Loaded storage (etcd3)" in server.log(), server.log()[-3000:]
    finally:
        rc = server.stop()
    assert rc == 0, f"cube apiserver exited {rc} on SIGTERM\n{server.log()[-3000:]}"


def test_apiserver_stores_in_tls_etcd_with_the_etcd_flags(run, cube, parent, cluster, etcd):
    pki = cluster / "pki"
    server = serve(cube, parent, "--etcd-servers", etcd.urls[0],
                   "--etcd-cafile", pki / "etcd" / "ca.crt",
                   "--etcd-certfile", pki / "apiserver-etcd-client.crt",
                   "--etcd-keyfile", pki / "apiserver-etcd-client.key")
    check_stored_in_etcd(run, etcd, server)


def test_apiserver_finds_the_etcd_pair_in_the_cluster_dir(run, cube, parent, cluster, etcd):
    server = serve(cube, parent, "--etcd-servers", etcd.urls[0])
    check_stored_in_etcd(run, etcd, server)


def test_apiserver_help_says_cluster_dir_brings_the_etcd_pair(run, cube):
    out = run(cube, "apiserver", "--help").stdout
    assert "pki/apiserver-etcd-client.crt" in out and "pki/etcd/ca.crt" in out, out
