"""`cube up --ha` (issue 12): kubeadm's HA layout as real processes — a
three-member etcd with TLS, two API servers on it behind haproxy, two
controller managers and two schedulers electing leaders, hollow kubelets on
the balancer — and the acceptance run: kill one etcd member, then one API
server, then the active controller manager and the active scheduler; kubectl
keeps working through the balancer, nodes stay Ready, a certificate rotation
still completes, a Deployment still gets its pods scheduled, and no
acknowledged write is lost. Then an etcd member's expired serving
certificate, and `cube fault clear`."""
import json
import re
import time

import pytest

from test_up import Up, NODES, cert_file, ready_nodes, vm_rss_mib, wait_for


@pytest.fixture
def ha(cube, tmp, run):
    u = Up(cube, tmp / "ha", run, "--ha", "--events=false")
    wait_for(lambda: "Cluster is up" in u.output(), 90, "the HA cluster up:\n" + u.output())
    wait_for(lambda: ready_nodes(u) == set(NODES), 30, "3 Ready nodes")
    yield u
    if u.proc.poll() is None:
        assert u.stop() == 0, u.output()[-3000:]


def fault(u, *args, check=True):
    return u.run(u.cube, "fault", "--data-dir", u.data, *args, check=check, timeout=90)


def kubectl_retry(u, *args, tries=3):
    """kubectl as a user runs it: the call may meet the moment a server dies
    (haproxy notices within 2 s); a second try must work."""
    for i in range(tries):
        r = u.kubectl(*args, check=False)
        if r.returncode == 0:
            return r
        time.sleep(1)
    pytest.fail(f"kubectl {' '.join(args)} failed {tries} times: {r.stderr}")


def leader(u, component):
    """Which of component-0/1 holds its lease (its log says it acquired it last)."""
    lease = "kube-controller-manager" if component == "controller-manager" else "kube-scheduler"
    held = [n for n in (f"{component}-0", f"{component}-1")
            if f"successfully acquired lease kube-system/{lease}" in u.logs(n)]
    return held


def test_ha_survives_losing_one_of_everything(ha, run):
    u = ha
    # With every node Ready, what the layout holds in memory: the supervisor
    # and each process it started (3 etcd, 2 API servers, haproxy, 2
    # controller managers, 2 schedulers, the kubelets), as /proc says.
    m = re.search(r"^  memory: ([\d.]+) MiB resident in all: this process ([\d.]+) MiB, "
                  r"(\d+) processes ([\d.]+) MiB$", u.output(), re.M)
    assert m, u.output()
    kids = [int(p) for p in run("pgrep", "-P", str(u.proc.pid)).stdout.split()]
    assert int(m.group(3)) == len(kids) == 11, (m.group(0), kids)
    assert 0.5 < float(m.group(4)) / sum(vm_rss_mib(p) for p in kids) < 2, m.group(0)
    assert abs(float(m.group(1)) - float(m.group(2)) - float(m.group(4))) < 0.2, m.group(0)
    # The layout: etcd with TLS on three members, two API servers.
    cfg = (u.data / "haproxy.cfg").read_text()
    assert cfg.count("server apiserver") == 2 and "option httpchk GET /healthz" in cfg
    members = run("etcdctl", "--endpoints",
                  ",".join(f"https://127.0.0.1:{p}" for p in etcd_ports(u)),
                  "--cacert", u.data / "pki/etcd/ca.crt",
                  "--cert", u.data / "pki/etcd/healthcheck-client.crt",
                  "--key", u.data / "pki/etcd/healthcheck-client.key",
                  "member", "list", env={"ETCDCTL_API": "3"}).stdout
    assert len(members.strip().splitlines()) == 3, members
    wait_for(lambda: len(leader(u, "controller-manager")) == 1, 30, "a controller-manager leader")
    wait_for(lambda: len(leader(u, "scheduler")) == 1, 30, "a scheduler leader")

    acked = {}

    def write(tag):
        name = f"acked-{tag}"
        kubectl_retry(u, "create", "configmap", name, f"--from-literal=tag={tag}")
        acked[name] = tag

    write("start")
    out = fault(u, "kill-etcd", "0").stdout
    assert "etcd0: killed" in out, out
    write("after-etcd")
    out = fault(u, "kill-apiserver", "0").stdout
    assert "apiserver0: killed" in out, out
    time.sleep(2.5)  # haproxy's checks: inter 1s, fall 2
    for i in range(5):
        write(f"after-apiserver-{i}")
    assert ready_nodes(u) == set(NODES)

    (cm,) = leader(u, "controller-manager")
    fault(u, "kill", cm)
    other_cm = "controller-manager-1" if cm.endswith("0") else "controller-manager-0"
    wait_for(lambda: "successfully acquired lease kube-system/kube-controller-manager"
             in u.logs(other_cm), 40, f"{other_cm} to take over")
    (sched,) = leader(u, "scheduler")
    fault(u, "kill", sched)
    other_s = "scheduler-1" if sched.endswith("0") else "scheduler-0"
    wait_for(lambda: "successfully acquired lease kube-system/kube-scheduler"
             in u.logs(other_s), 40, f"{other_s} to take over")
    write("after-leaders")

    # A certificate rotation completes: node-0's certificate past its
    # deadline, the kubelets restarted; the new controller manager approves
    # and signs through the surviving API server and etcd members.
    fault(u, "expire-cert", "node-0", "--in", "60s")

    def rotated():
        # The fault's certificate ends within a minute; a rotated one is
        # the signer's year. (Same-second files share a name: read it.)
        return run("openssl", "x509", "-in", cert_file(u.data, "node-0"), "-noout",
                   "-checkend", "3600", check=False).returncode == 0
    wait_for(rotated, 60, "node-0's rotated certificate")
    assert "Auto approving self kubelet client certificate" in (
        u.logs(other_cm)), u.logs(other_cm)[-2000:]
    wait_for(lambda: ready_nodes(u) == set(NODES), 60, "3 Ready nodes after the restart")

    # A Deployment gets its pods scheduled by the new scheduler.
    kubectl_retry(u, "create", "deployment", "web", "--image=nginx", "--replicas=3")

    def running():
        out = u.kubectl("get", "pods", "-l", "app=web", "-o", "json", check=False).stdout
        pods = json.loads(out)["items"] if out else []
        return len([p for p in pods if p["status"].get("phase") == "Running"
                    and p["spec"].get("nodeName")]) == 3
    wait_for(running, 60, "3 running web pods")

    # Every acknowledged write is there, with what it said.
    cms = json.loads(kubectl_retry(u, "get", "configmaps", "-o", "json").stdout)["items"]
    have = {c["metadata"]["name"]: c["data"]["tag"] for c in cms
            if c["metadata"]["name"].startswith("acked-")}
    assert have == acked, (have, acked)

    # clear starts what was killed: etcd0 healthy, apiserver0 serving.
    out = fault(u, "clear").stdout
    assert "No faults in effect." in out, out
    etcd0 = etcd_ports(u)[0]
    wait_for(lambda: etcd_health(u, run, etcd0), 20, "etcd0 healthy again")
    api0 = json.loads((u.data / "ha.json").read_text())["ports"]["apiserver0"]
    wait_for(lambda: run("curl", "-sk", f"https://127.0.0.1:{api0}/healthz",
                         check=False).stdout == "ok", 30, "apiserver0 serving again")


def etcd_health(u, run, port):
    r = run("curl", "-sS", "--cacert", u.data / "pki/etcd/ca.crt",
            "--cert", u.data / "pki/etcd/healthcheck-client.crt",
            "--key", u.data / "pki/etcd/healthcheck-client.key",
            f"https://127.0.0.1:{port}/health", check=False)
    return r.returncode == 0 and '"health":"true"' in r.stdout


def etcd_ports(u):
    ports = json.loads((u.data / "ha.json").read_text())["ports"]
    return [ports[k] for k in sorted(ports) if re.fullmatch(r"etcd\d+", k)]


def test_an_etcd_members_expired_certificate(ha, run):
    u = ha
    out = fault(u, "expire-etcd-cert", "etcd1").stdout
    assert "etcd1: serving certificate replaced" in out and "restarted" in out, out
    crt = u.data / "etcd/etcd1/server.crt"
    end = run("openssl", "x509", "-in", crt, "-noout", "-checkend", "0", check=False)
    assert end.returncode == 1, end  # expired
    run("openssl", "verify", "-CAfile", u.data / "pki/etcd/ca.crt", "-no_check_time", crt)
    port = etcd_ports(u)[1]
    # A client that checks the member's certificate now refuses it ...
    health = run("curl", "-sS", "--cacert", u.data / "pki/etcd/ca.crt",
                 "--cert", u.data / "pki/etcd/healthcheck-client.crt",
                 "--key", u.data / "pki/etcd/healthcheck-client.key",
                 f"https://127.0.0.1:{port}/health", check=False)
    assert health.returncode != 0 and "expired" in health.stderr, health
    # ... and the API servers use the other members: the cluster works on.
    kubectl_retry(u, "create", "configmap", "during-expired-etcd-cert")
    assert ready_nodes(u) == set(NODES)
    out = fault(u, "clear").stdout
    assert "etcd1: serving certificate restored" in out, out
    wait_for(lambda: etcd_health(u, run, port), 20, "etcd1 healthy again")
