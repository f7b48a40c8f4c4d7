"""A real Prometheus (/usr/bin/prometheus) scraping a running `cube up` as
deploy/prometheus/ tells users to: every kubelet THROUGH the API server's node
proxy (https://APISERVER/api/v1/nodes/NODE/proxy/metrics), as the user
"prometheus" with a certificate from `cube certs` and the RBAC of
deploy/prometheus/rbac.yaml, the alert rules of cube-rules.yml loaded.

node-1 gets a client certificate that expires in an hour while the others
keep cube's default year, so Prometheus must find node-1 as the soonest to
expire, with about 3600 s left, and hold its expiry alerts pending. (Its
rotation stays on: the kubelet registers its client certificate series only
with rotation, as upstream does, and the hour-long certificate — NotBefore an
hour back — is not due for renewal for another 24 minutes at least.) node-2
gets rotation off: it reports no TTL at all, which is what
KubeletClientCertificateRotationOff is for.

Kubernetes service discovery is compiled out of Debian's prometheus package
(its config parser answers "field kubernetes_sd_configs not found"). With such
a build the test runs deploy/prometheus/prometheus-debian.yml instead: the
same jobs and relabeling, the node list written by cube-nodes-sd.sh. With a
Prometheus that has it, prometheus.yml as shipped.
"""

import base64
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from test_fault import FAST, fault
from test_up import NODES, Up, ready_nodes, wait_for

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"

# FAST without --cert-ttl: every node keeps a year-long certificate, so the
# one node-1 is given is the soonest to expire.
_i = FAST.index("--cert-ttl")
TIMINGS = FAST[:_i] + FAST[_i + 2:]


def load(name):
    return yaml.safe_load((DEPLOY / name).read_text())


def test_deploy_configs_differ_only_in_node_discovery():
    """prometheus.yml (Kubernetes discovery) and prometheus-debian.yml (a file
    from cube-nodes-sd.sh) are the same jobs, relabeling and TLS; check.sh
    relies on this when promtool cannot parse prometheus.yml."""
    k8s, deb = load("prometheus.yml"), load("prometheus-debian.yml")
    kubelet = k8s["scrape_configs"][0]
    assert kubelet["job_name"] == "kubelet"
    (sd,) = kubelet.pop("kubernetes_sd_configs")
    assert sd["role"] == "node" and sd["api_server"] == "https://127.0.0.1:6443", sd
    assert sd["tls_config"] == kubelet["tls_config"], sd
    (fsd,) = deb["scrape_configs"][0].pop("file_sd_configs")
    assert fsd["files"] == ["/etc/prometheus/cube-nodes.json"], fsd
    assert k8s == deb
    relabel = {r["target_label"]: r for r in kubelet["relabel_configs"]}
    assert relabel["__address__"]["replacement"] == "127.0.0.1:6443"
    assert relabel["__metrics_path__"]["replacement"] == "/api/v1/nodes/${1}/proxy/metrics"
    assert relabel["node"]["source_labels"] == ["__meta_kubernetes_node_name"]
    assert k8s["rule_files"] == ["cube-rules.yml"]


def has_kubernetes_sd(tmp):
    """Whether this Prometheus build has Kubernetes service discovery."""
    probe = tmp / "probe.yml"
    probe.write_text("scrape_configs:\n  - job_name: probe\n"
                     "    kubernetes_sd_configs: [{role: node}]\n")
    p = subprocess.run([PROMTOOL, "check", "config", "--syntax-only", str(probe)],
                       capture_output=True, text=True, timeout=30)
    if p.returncode == 0:
        return True
    assert "field kubernetes_sd_configs not found" in p.stdout + p.stderr, p
    return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, config, tmp):
        self.port = free_port()
        self.log_path = tmp / "prometheus.log"
        log = open(self.log_path, "wb")
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["HOME"] = str(tmp)
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp, env=env)
        log.close()

    def log(self):
        return self.log_path.read_text(errors="replace")

    def api(self, path, **params):
        """GET /api/v1/PATH: its "data", or None while Prometheus starts."""
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus exited with {self.proc.returncode}\n{self.log()[-4000:]}",
                        pytrace=False)
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
        except (urllib.error.URLError, ConnectionError):
            return None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, q):
        data = self.api("query", query=q)
        return None if data is None else data["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def cluster(cube, tmp, run):
    u = Up(cube, tmp / "cluster", run, *TIMINGS)
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    yield u
    if u.proc.poll() is None:
        u.stop()


@pytest.fixture
def prometheus(tmp):
    started = []

    def _start(config):
        p = Prometheus(config, tmp)
        started.append(p)
        return p

    yield _start
    for p in started:
        p.stop()


@pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK),
                    reason=f"{PROMETHEUS} not installed (scripts/deps.sh installs Debian's "
                           "prometheus package)")
def test_prometheus_scrapes_kubelets_through_the_node_proxy(cluster, prometheus, run, tmp,
                                                            wait_until):
    u = cluster
    admin = yaml.safe_load((u.data / "admin.conf").read_text())
    server = admin["clusters"][0]["cluster"]["server"]
    hostport = server.removeprefix("https://")
    pki = tmp / "pki"
    pki.mkdir()
    (pki / "ca.crt").write_bytes(
        base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"]))
    # Prometheus's own identity, as docs/monitoring.md makes it.
    run(u.cube, "certs", "new-csr", "--cn", "prometheus", "--key-out", pki / "prometheus.key",
        "--out", pki / "prometheus.csr")
    run(u.cube, "certs", "sign-csr", "--ca-dir", u.data / "pki", "--in", pki / "prometheus.csr",
        "--out", pki / "prometheus.crt", "--usages", "digital signature,client auth")
    u.kubectl("apply", "-f", DEPLOY / "rbac.yaml")

    # node-1: a certificate with an hour left; node-2: rotation off.
    fault(u, "expire-cert", "node-1", "--in", "1h")
    fault(u, "disable-rotation", "node-2")

    k8s_sd = has_kubernetes_sd(tmp)
    name = "prometheus.yml" if k8s_sd else "prometheus-debian.yml"
    print(f"{PROMETHEUS}: Kubernetes service discovery {'present' if k8s_sd else 'absent'}; "
          f"running deploy/prometheus/{name}")
    text = (DEPLOY / name).read_text()
    for placeholder, value in (("127.0.0.1:6443", hostport),
                               ("/etc/cube/pki/", f"{pki}/"),
                               ("/etc/prometheus/cube-nodes.json", str(tmp / "cube-nodes.json"))):
        text = text.replace(placeholder, value)
    config = yaml.safe_load(text)
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(DEPLOY / "cube-rules.yml")]
    # `cube up` runs the controller manager and the scheduler in its own
    # process, without their HTTPS servers.
    config["scrape_configs"] = [j for j in config["scrape_configs"]
                                if j["job_name"] in ("kubelet", "apiserver")]
    if not k8s_sd:
        # As docs/monitoring.md has it: a kubeconfig for the prometheus user.
        conf = tmp / "prometheus.conf"
        k = ("kubectl", f"--kubeconfig={conf}", "config")
        run(*k, "set-cluster", "cube", f"--server={server}",
            f"--certificate-authority={pki / 'ca.crt'}")
        run(*k, "set-credentials", "prometheus", f"--client-certificate={pki / 'prometheus.crt'}",
            f"--client-key={pki / 'prometheus.key'}")
        run(*k, "set-context", "cube", "--cluster=cube", "--user=prometheus")
        run(*k, "use-context", "cube")
        run("sh", DEPLOY / "cube-nodes-sd.sh", tmp / "cube-nodes.json", env={"KUBECONFIG": conf})
        targets = json.loads((tmp / "cube-nodes.json").read_text())
        assert sorted(t["labels"]["__meta_kubernetes_node_name"] for t in targets) == \
            list(NODES), targets
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    run(PROMTOOL, "check", "config", tmp / "prometheus.yml")

    prom = prometheus(tmp / "prometheus.yml")
    started = time.monotonic()

    def targets():
        data = prom.api("targets")
        return json.dumps(data, indent=1)[:3000] if data else "(no answer)"

    def scraped():
        r = prom.query('count(up{job="kubelet"} == 1)')
        return r and r[0]["value"][1] == "3" and \
            prom.query("kubelet_certificate_manager_client_ttl_seconds")
    wait_until(scraped, 45, lambda: "Prometheus to scrape 3 kubelets; "
               + f"TTLs: {prom.query('kubelet_certificate_manager_client_ttl_seconds')}"
               + "; its targets: "
               + targets() + "\n--- prometheus log ---\n" + prom.log()[-3000:], interval=0.2)
    print(f"3 kubelets scraped {time.monotonic() - started:.1f}s after Prometheus started")

    (soonest,) = prom.query("bottomk(1, kubelet_certificate_manager_client_ttl_seconds)")
    assert soonest["metric"]["node"] == "node-1", soonest
    assert 3000 < float(soonest["value"][1]) < 3700, soonest
    ttls = {r["metric"]["node"]: float(r["value"][1])
            for r in prom.query("kubelet_certificate_manager_client_ttl_seconds")}
    assert sorted(ttls) == ["node-0", "node-1"] and ttls["node-0"] > 364 * 86400, ttls
    (up,) = prom.query('count(up{job="kubelet"} == 1)')
    assert up["value"][1] == "3", up

    # Each through the node proxy, labelled with its node.
    active = [t for t in prom.api("targets")["activeTargets"] if t["labels"]["job"] == "kubelet"]
    assert sorted((t["labels"]["node"], t["labels"]["instance"], t["scrapeUrl"], t["health"])
                  for t in active) == \
        [(n, n, f"{server}/api/v1/nodes/{n}/proxy/metrics", "up") for n in NODES], active
    wait_until(lambda: prom.query('up{job="apiserver"} == 1'), 20,
               lambda: f"the API server scraped; its targets: {targets()}", interval=0.2)

    # The rules load and evaluate without errors.
    def evaluated():
        groups = prom.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return len(rules) == 15 and all(r["health"] == "ok" for r in rules) and groups
    groups = wait_until(evaluated, 20, lambda: "the 15 rules evaluated without errors: "
                        + json.dumps(prom.api("rules"))[:3000], interval=0.2)
    assert [g["name"] for g in groups] == ["cube-certificates", "cube-nodes"]

    # node-1's expiry alerts pending (for: 5m), no other node's; node-2's
    # rotation-off alert pending (for: 10m); the API server has seen node-1
    # present a certificate with under a day left (under an hour: its
    # le="3600" bucket), so its alert fires at once. And nothing else.
    expected = [("APIServerClientCertificateExpiring", "", "critical", "firing"),
                ("APIServerClientCertificateExpiring", "", "warning", "firing"),
                ("KubeletClientCertificateExpiringSoon", "node-1", "critical", "pending"),
                ("KubeletClientCertificateExpiringSoon", "node-1", "warning", "pending"),
                ("KubeletClientCertificateRotationOff", "node-2", "warning", "pending")]

    def alerts():
        return sorted((a["labels"]["alertname"], a["labels"].get("node", ""),
                       a["labels"]["severity"], a["state"]) for a in prom.api("alerts")["alerts"])
    wait_until(lambda: alerts() == expected, 30,
               lambda: f"the alerts {expected}; now: {alerts()}", interval=0.2)
    (under_an_hour,) = prom.query('sum(apiserver_client_certificate_expiration_seconds_bucket'
                                  '{job="apiserver", le="3600"})')
    assert float(under_an_hour["value"][1]) > 0, under_an_hour

    prom.stop()
    assert prom.proc.returncode == 0, prom.log()[-3000:]
    assert u.stop() == 0
