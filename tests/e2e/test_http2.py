"""HTTP/2, as kube-apiserver and client-go speak it.

The API server offers ALPN h2 and http/1.1: kubectl (Go) and curl negotiate
h2, openssl and the Python client (urllib3) stay on HTTP/1.1, and both
work. cube's own clients multiplex everything on one connection, so a
hollow kubelet holds one TCP connection once bootstrapped; and they run
client-go's HTTP/2 health check (PING after HTTP2_READ_IDLE_TIMEOUT_SECONDS
without a frame, give up after HTTP2_PING_TIMEOUT_SECONDS), which is how a
kubelet notices an API server that stopped answering without closing.
"""
import json
import os
import re
import signal
import subprocess
import time
from datetime import datetime

import pytest

from test_kubelet import Kubelet
from test_up import Up, ready_nodes, wait_for

KUBECTL = "/usr/bin/kubectl"


def test_clients_negotiate_h2_and_http11(apiserver, run):
    conf = apiserver.admin_conf
    # kubectl: Go's transport says which protocol it built its connection for.
    out = run(KUBECTL, "--kubeconfig", conf, "get", "namespaces",
              env={"GODEBUG": "http2debug=1"})
    assert "http2: Transport creating client conn" in out.stderr, out.stderr[-2000:]
    assert "default" in out.stdout
    # A watch over HTTP/2 delivers what happens while it is open.
    env = dict(os.environ, KUBECONFIG=str(conf), HOME=str(apiserver.parent))
    watch = subprocess.Popen([KUBECTL, "get", "namespaces", "--watch", "--output-watch-events",
                              "--request-timeout=8s"], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.5)
    run(KUBECTL, "--kubeconfig", conf, "create", "namespace", "seen-over-h2")
    out, err = watch.communicate(timeout=30)
    assert re.search(r"(?m)^ADDED\s+seen-over-h2\s", out), out + err

    crt, key = apiserver.admin
    curl = ["curl", "-sS", "-v", "--cacert", apiserver.ca, "--cert", crt, "--key", key,
            f"{apiserver.url}/api/v1/namespaces/default"]
    h2 = run(*curl[:1], "--http2", *curl[1:])
    assert "ALPN: server accepted h2" in h2.stderr, h2.stderr
    assert re.search(r"(?m)^< HTTP/2 200", h2.stderr), h2.stderr
    assert '"name":"default"' in h2.stdout
    h1 = run(*curl[:1], "--http1.1", *curl[1:])
    assert re.search(r"(?m)^< HTTP/1.1 200", h1.stderr), h1.stderr
    assert h1.stdout == h2.stdout
    # HEAD: the headers of a GET, no body (a body is a protocol error).
    head = run(*curl[:1], "--http2", "-I", *curl[1:])
    assert re.search(r"(?m)^HTTP/2 200", head.stdout), head.stdout + head.stderr
    assert re.search(r"(?mi)^content-length: [1-9]", head.stdout), head.stdout

    for alpn, want in (("h2", "h2"), ("http/1.1", "http/1.1")):
        s = run("openssl", "s_client", "-connect", f"127.0.0.1:{apiserver.port}",
                "-alpn", alpn, "-CAfile", apiserver.ca, input="", check=False)
        assert f"ALPN protocol: {want}" in s.stdout, s.stdout[-2000:]

    # The official Python client (urllib3, HTTP/1.1 only).
    script = ("import kubernetes as k;"
              f"k.config.load_kube_config({str(conf)!r});"
              "print(sorted(n.metadata.name for n in "
              "k.client.CoreV1Api().list_namespace().items))")
    out = run("/usr/bin/python3", "-c", script)
    assert "'default'" in out.stdout


def established_from(port):
    """Local "ip:port" of this machine's sockets connected to 127.0.0.1:port."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True).stdout
    return {line.split()[-2] for line in out.splitlines() if line.strip()}


def user_agents_by_peer(log):
    """srcIP "ip:port" -> userAgent, from the API server's request lines (-v 3)."""
    found = {}
    for m in re.finditer(r'userAgent="([^"]*)".*?srcIP="([0-9.]+:\d+)"', log):
        found[m.group(2)] = m.group(1)
    return found


def test_one_connection_per_hollow_kubelet(cube, tmp, run):
    nodes = 20
    data = tmp / "cluster"
    up = Up(cube, data, run, "--nodes", str(nodes), "-v", "3")
    try:
        wait_for(lambda: len(ready_nodes(up)) == nodes, 60, f"{nodes} nodes Ready")
        ready_at = time.monotonic()
        port = int(re.search(r"127\.0\.0\.1:(\d+)", up.output()).group(1))

        def kubelet_connections():
            agents = user_agents_by_peer(up.logs("apiserver"))
            return [p for p in established_from(port)
                    if agents.get(p, "").startswith("kubelet/")]
        # The connections a kubelet opened before its certificate existed
        # go when the transport watchdog sees the certificate (10 s), as
        # does the bootstrap token's.
        wait_for(lambda: len(kubelet_connections()) == nodes, 40,
                 f"one connection per kubelet ({nodes})")
        # ...and stay one while they heartbeat, watch and sync status.
        time.sleep(3)
        assert len(kubelet_connections()) == nodes
        # Each node connects from its own loopback address (127.1.0.2
        # onwards), as real nodes from their own machines: the API server's
        # per-peer limits see twenty peers, not one.
        sources = sorted(p.rsplit(":", 1)[0] for p in kubelet_connections())
        assert sources == sorted(f"127.1.0.{2 + i}" for i in range(nodes)), sources
        assert len(ready_nodes(up)) == nodes
        # Started together, the pool's kubelets still renew their Leases
        # at spread-out moments of the 10 s period (random first phase):
        # in lockstep they would all fall within a second or two. Every
        # kubelet renews within a period (10 s) of being Ready.
        time.sleep(max(0.0, ready_at + 12 - time.monotonic()))
        leases = json.loads(up.kubectl("get", "leases", "-n", "kube-node-lease",
                                       "-o", "json").stdout)["items"]
        phases = sorted(
            (datetime.strptime(lease["spec"]["renewTime"][:26], "%Y-%m-%dT%H:%M:%S.%f")
             .timestamp()) % 10 for lease in leases)
        assert len(phases) == nodes
        gaps = [b - a for a, b in zip(phases, phases[1:])] + [phases[0] + 10 - phases[-1]]
        assert 10 - max(gaps) >= 4, f"renewals bunched in {10 - max(gaps):.1f} s: {phases}"
    finally:
        assert up.stop() == 0


def test_health_check_notices_a_frozen_apiserver(cube, make_apiserver, tmp, wait_until):
    server = make_apiserver(tmp / "apiserver")
    try:
        crt, key = server.node_identity("kl-h2")
        kubeconfig = tmp / "kl-h2.conf"
        server.write_kubeconfig(kubeconfig, crt, key)
        env = dict(server.env, HTTP2_READ_IDLE_TIMEOUT_SECONDS="1",
                   HTTP2_PING_TIMEOUT_SECONDS="1")
        k = Kubelet(cube, server, tmp / "kl-h2", "kl-h2", "--kubeconfig", kubeconfig,
                    "--rotate-certificates=false")
        k.root.mkdir(parents=True)
        with open(k.log_path, "ab") as log:
            k.proc = subprocess.Popen(k.argv(), env=env, stdout=log, stderr=log,
                                      stdin=subprocess.DEVNULL)
        lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kl-h2"
        wait_until(lambda: server.request("GET", lease).status == 200, 20,
                   lambda: "the kubelet's lease\n" + k.tail())
        # Quiet for longer than the read-idle time: PINGs keep it alive.
        time.sleep(2.5)
        assert "connection lost" not in k.log()
        # The API server stops answering without closing anything.
        server.proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            wait_until(lambda: "http2: client connection lost" in k.log(), 10,
                       lambda: "the health check to fail\n" + k.tail())
            lost_after = time.monotonic() - t0
        finally:
            server.proc.send_signal(signal.SIGCONT)
        # read idle (1 s) + ping timeout (1 s), from the last frame read.
        assert lost_after < 4, lost_after
        # Back: a new connection, and the lease moves again.
        before = server.request("GET", lease).json()["spec"]["renewTime"]
        wait_until(lambda: server.request("GET", lease).json()["spec"]["renewTime"]
                   != before, 30, lambda: "the lease to move again\n" + k.tail())
        assert k.running()
        k.stop()
    finally:
        server.stop()
