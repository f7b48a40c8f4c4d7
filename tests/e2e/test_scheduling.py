"""End-to-end: the scheduler and taint eviction around a node that dies.

Separate processes, as a kubeadm cluster runs them: `cube apiserver`
(DefaultTolerationSeconds compressed to 4 s), `cube controller-manager`
(node monitor period 1 s, grace 15 s), `cube scheduler`, and two `cube
kubelet`s. Everything is observed with the real kubectl, the seeds' way:
`kubectl get pods -o wide`, `kubectl describe node | grep -A5 Taints`,
`kubectl describe pod`, `kubectl get events`.

One kubelet is killed (its Lease stops, as when its client certificate
expires): its node goes Unknown with the unreachable taints, a pod pinned to
it cannot be scheduled (upstream's FailedScheduling text), its pod is marked
for deletion after the 4 s toleration and stays Terminating while the
kubelet is away; when the kubelet comes back the node is Ready, the pending
pod is bound there, and the Terminating pod goes.
"""

import re
import signal
import time
import subprocess

import pytest

from conftest import stop_process
from test_kubelet import KUBECTL, ControllerManager, Kubelet, free_port


class Scheduler:
    def __init__(self, cube, server):
        conf = server.dir / "scheduler.conf"
        conf.write_text(re.sub(r"(?m)^(\s*server:\s*).*$", rf"\g<1>{server.url}",
                               conf.read_text()))
        self.log_path = server.dir / "scheduler.log"
        self.port = free_port()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(cube), "scheduler", "--kubeconfig", str(conf),
                                      "--secure-port", str(self.port), "--bind-address",
                                      "127.0.0.1", "--client-ca-file", str(server.pki / "ca.crt"),
                                      "-v", "2"], env=server.env, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()

    def stop(self):
        return stop_process(self.proc, "cube scheduler")


@pytest.fixture
def world(cube, make_apiserver, tmp, run):
    server = make_apiserver(tmp / "apiserver", "--default-unreachable-toleration-seconds", "4")
    cm = ControllerManager(cube, server)
    sched = Scheduler(cube, server)
    kubelets = [Kubelet(cube, server, tmp / n, n, "--bootstrap-kubeconfig",
                        server.bootstrap_conf, "--rotate-certificates", "--port", "0")
                for n in ("kl-a", "kl-b")]
    for k in kubelets:
        k.start()

    def kubectl(*args, check=True, input=None):
        return run(KUBECTL, "--kubeconfig", server.admin_conf, *args, check=check,
                   input=input, timeout=30)
    server.components = (cm, sched)
    yield server, kubectl, kubelets
    for k in kubelets:
        k.stop()
    rc = sched.stop()
    assert rc == 0, sched.log_path.read_text()[-3000:]
    cm.stop()
    server.stop()


def node_column(kubectl, node, col):
    for line in kubectl("get", "nodes", "--no-headers", check=False).stdout.splitlines():
        cols = line.split()
        if cols and cols[0] == node:
            return cols[col]
    return None


def pod_json(kubectl, name):
    import json
    r = kubectl("get", "pod", name, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def node_json(kubectl, name):
    import json
    return json.loads(kubectl("get", "node", name, "-o", "json").stdout)


def stamp(text):
    """RFC 3339 (seconds or microseconds) to POSIX seconds."""
    from datetime import datetime
    return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()


def events(kubectl, name, reason):
    out = kubectl("get", "events", "--field-selector",
                  f"involvedObject.name={name},reason={reason}",
                  "-o", "custom-columns=MSG:.message", "--no-headers").stdout
    return [l for l in out.splitlines() if l.strip()]


def test_dead_node_tainted_avoided_and_evicted(world, wait_until):
    server, kubectl, (a, b) = world
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")

    # Scheduling: a pod lands on a node, with upstream's Scheduled event.
    kubectl("run", "free", "--image=nginx")
    wait_until(lambda: (pod_json(kubectl, "free") or {}).get("spec", {}).get("nodeName"),
               15, "free to be bound")
    node = pod_json(kubectl, "free")["spec"]["nodeName"]
    assert events(kubectl, "free", "Scheduled") == \
        [f"Successfully assigned default/free to {node}"]

    pin = '{"spec":{"nodeSelector":{"kubernetes.io/hostname":"kl-b"}}}'
    kubectl("run", "pinned", "--image=nginx", f"--overrides={pin}")
    wait_until(lambda: (pod_json(kubectl, "pinned") or {}).get("status", {})
               .get("phase") == "Running", 20, "pinned Running on kl-b")
    assert pod_json(kubectl, "pinned")["spec"]["nodeName"] == "kl-b"

    # kl-b dies: no more Lease renewals, no status.
    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(10)
    wait_until(lambda: node_column(kubectl, "kl-b", 1) == "NotReady", 30, "kl-b NotReady")
    # Unknown comes a grace period after the last renewal the controller saw,
    # within one monitor period (both times are the API's, lastTransitionTime
    # in whole seconds).
    renewed = stamp(kubectl("get", "lease", "-n", "kube-node-lease", "kl-b", "-o",
                            "jsonpath={.spec.renewTime}").stdout)
    ready = [c for c in node_json(kubectl, "kl-b")["status"]["conditions"]
             if c["type"] == "Ready"][0]
    took = stamp(ready["lastTransitionTime"]) - renewed
    print(f"kl-b Unknown {took:.1f}s after its last Lease renewal (grace 15s, period 1s)")
    assert ready["reason"] == "NodeStatusUnknown"
    assert 14 <= took <= 17, took
    wait_until(lambda: "node.kubernetes.io/unreachable:NoExecute" in
               kubectl("describe", "node", "kl-b").stdout, 10, "the NoExecute taint")
    taints = kubectl("describe", "node", "kl-b").stdout
    block = taints[taints.index("Taints:"):].split("Unschedulable:")[0]
    assert "node.kubernetes.io/unreachable:NoExecute" in block, block
    assert "node.kubernetes.io/unreachable:NoSchedule" in block, block
    assert "NodeStatusUnknown" in taints and "Kubelet stopped posting node status." in taints

    # New pods do not land there: upstream's message for the pinned one.
    kubectl("run", "pinned-2", "--image=nginx", f"--overrides={pin}")
    want = ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: "
            "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    wait_until(lambda: want in events(kubectl, "pinned-2", "FailedScheduling"), 15,
               "the FailedScheduling event")
    assert "FailedScheduling" in kubectl("describe", "pod", "pinned-2").stdout
    cond = [c for c in pod_json(kubectl, "pinned-2")["status"]["conditions"]
            if c["type"] == "PodScheduled"][0]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", want)

    # The pinned pod tolerates unreachable for 4 s (DefaultTolerationSeconds):
    # then it is marked for deletion, and stays Terminating with its kubelet away.
    wait_until(lambda: (pod_json(kubectl, "pinned") or {}).get("metadata", {})
               .get("deletionTimestamp"), 20, "pinned to be deleted")
    assert events(kubectl, "pinned", "TaintManagerEviction") == \
        ["Marking for deletion Pod default/pinned"]
    p = pod_json(kubectl, "pinned")
    dt = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"][0]
    assert dt["reason"] == "DeletionByTaintManager"
    assert re.search(r"(?m)^pinned\s.*Terminating", kubectl("get", "pods", "-o", "wide").stdout)

    # The kubelet comes back: Ready, taints gone, the pending pod bound there
    # within seconds, the Terminating pod confirmed gone.
    b.start()
    wait_until(lambda: node_column(kubectl, "kl-b", 1) == "Ready", 40, "kl-b Ready again")
    wait_until(lambda: (pod_json(kubectl, "pinned-2") or {}).get("spec", {})
               .get("nodeName") == "kl-b", 20, "pinned-2 bound to kl-b")
    wait_until(lambda: pod_json(kubectl, "pinned") is None, 30, "pinned gone")
    wait_until(lambda: re.search(r"(?m)^Taints:\s+<none>",
                                 kubectl("describe", "node", "kl-b").stdout), 10,
               "kl-b's taints to come off")


UNREACHABLE_NOEXECUTE = ('{"key":"node.kubernetes.io/unreachable","operator":"Exists",'
                         '"effect":"NoExecute"}')
PLAN_3 = '{"spec":{"tolerations":[%s]}}' % UNREACHABLE_NOEXECUTE


def test_plan_three_toleration_keeps_a_pod_and_lets_one_schedule(world, wait_until):
    """The seeds' plan 3: `kubectl patch pod` with an unbounded unreachable
    toleration. That pod is never evicted while its neighbour is; a new pod
    that also tolerates unreachable:NoSchedule is bound to the unreachable
    node, one that tolerates only NoExecute is not."""
    server, kubectl, (a, b) = world
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    pin = '{"spec":{"nodeSelector":{"kubernetes.io/hostname":"kl-b"}}}'
    for name in ("kept", "evicted"):
        kubectl("run", name, "--image=nginx", f"--overrides={pin}")
    for name in ("kept", "evicted"):
        wait_until(lambda n=name: (pod_json(kubectl, n) or {}).get("status", {})
                   .get("phase") == "Running", 20, f"{name} Running on kl-b")
    # Patched before the node fails: the 4 s toleration of this world leaves
    # no room to patch reliably between NotReady and the eviction.
    out = kubectl("patch", "pod", "kept", "-p", PLAN_3).stdout
    assert out.strip() == "pod/kept patched", out

    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(10)
    wait_until(lambda: "node.kubernetes.io/unreachable:NoExecute" in
               kubectl("describe", "node", "kl-b").stdout, 40, "the NoExecute taint")
    wait_until(lambda: (pod_json(kubectl, "evicted") or {}).get("metadata", {})
               .get("deletionTimestamp"), 20, "evicted to be marked for deletion")
    # Twice the toleration later, the patched pod is still untouched.
    time.sleep(8)
    kept = pod_json(kubectl, "kept")
    assert "deletionTimestamp" not in kept["metadata"], kept["metadata"]
    assert events(kubectl, "kept", "TaintManagerEviction") == []

    no_schedule = UNREACHABLE_NOEXECUTE.replace("NoExecute", "NoSchedule")
    for name, tols in (("tolerant", [no_schedule, UNREACHABLE_NOEXECUTE]),
                       ("intolerant", [UNREACHABLE_NOEXECUTE])):
        over = ('{"spec":{"nodeSelector":{"kubernetes.io/hostname":"kl-b"},'
                '"tolerations":[%s]}}' % ",".join(tols))
        kubectl("run", name, "--image=nginx", f"--overrides={over}")
    wait_until(lambda: (pod_json(kubectl, "tolerant") or {}).get("spec", {})
               .get("nodeName") == "kl-b", 15, "tolerant bound to the unreachable node")
    want = ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }.")
    wait_until(lambda: any(m.startswith(want) for m in
                           events(kubectl, "intolerant", "FailedScheduling")), 15,
               "intolerant's FailedScheduling")
    assert not pod_json(kubectl, "intolerant")["spec"].get("nodeName")


def test_dead_node_pods_replaced_then_over_repair_resolves(world, wait_until):
    """The seeds' failure chain on a Deployment: a node's kubelet stops,
    its pods are evicted after the toleration and replaced on the healthy
    node while the old ones stay Terminating (more pods than replicas: the
    "over-repair"); the kubelet comes back and the count returns to replicas."""
    import json
    server, kubectl, (a, b) = world
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    kubectl("create", "deployment", "web", "--image=nginx", "--replicas=4")
    kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    # A DaemonSet: its pods tolerate unreachable:NoExecute for ever, as
    # upstream's daemon pods do, so the dead node keeps its one.
    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "a", "image": "busybox"}]}}}}))
    kubectl("rollout", "status", "daemonset/agent", "--timeout=60s")

    def pods():
        out = kubectl("get", "pods", "-l", "app=web", "-o", "json").stdout
        return json.loads(out)["items"]
    on_b = [p["metadata"]["name"] for p in pods() if p["spec"].get("nodeName") == "kl-b"]
    assert on_b, "the scheduler spread the pods over both nodes"

    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(10)
    wait_until(lambda: node_column(kubectl, "kl-b", 1) == "NotReady", 30, "kl-b NotReady")

    def replaced():
        live = [p for p in pods() if not p["metadata"].get("deletionTimestamp")]
        running = [p for p in live if p["spec"].get("nodeName") == "kl-a" and
                   p.get("status", {}).get("phase") == "Running"]
        return len(running) == 4
    wait_until(replaced, 40, "4 pods running on kl-a")
    listing = kubectl("get", "pods", "-A").stdout
    terminating = [l for l in listing.splitlines() if "Terminating" in l]
    assert len(terminating) == len(on_b), listing
    agent_b = json.loads(kubectl("get", "pods", "-l", "app=agent", "-o", "json").stdout)["items"]
    agent_b = [p for p in agent_b if p["spec"].get("nodeName") == "kl-b"]
    assert len(agent_b) == 1 and not agent_b[0]["metadata"].get("deletionTimestamp"), agent_b
    assert len(pods()) == 4 + len(on_b)  # more pods than replicas
    ready = kubectl("get", "deployment", "web", "--no-headers").stdout.split()[1]
    assert ready == "4/4", ready

    b.start()
    wait_until(lambda: node_column(kubectl, "kl-b", 1) == "Ready", 40, "kl-b Ready again")
    wait_until(lambda: len(pods()) == 4, 30, "the Terminating pods to go")
    assert not [p for p in pods() if p["metadata"]["name"] in on_b]


def test_every_node_down_no_eviction_pending_until_one_returns(world, wait_until):
    """The seeds' "scheduling queue blocked": every kubelet stops. Every zone
    is fully disrupted, so the node lifecycle controller enters master
    disruption mode: no NoExecute taints, nothing evicted. New pods stay
    Pending with upstream's FailedScheduling text, and are bound within
    seconds of one node coming back."""
    import json
    server, kubectl, (a, b) = world
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    kubectl("run", "before", "--image=nginx")
    wait_until(lambda: (pod_json(kubectl, "before") or {}).get("status", {})
               .get("phase") == "Running", 20, "before Running")
    for k in (a, b):
        k.proc.send_signal(signal.SIGKILL)
        k.proc.wait(10)
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "NotReady", 30,
                   f"{k.name} NotReady")
    kubectl("run", "after", "--image=nginx")
    want = ("0/2 nodes are available: 2 node(s) had untolerated taint "
            "{node.kubernetes.io/unreachable: }. preemption: 0/2 nodes are available: "
            "2 Preemption is not helpful for scheduling.")
    wait_until(lambda: want in events(kubectl, "after", "FailedScheduling"), 20,
               "the FailedScheduling event")
    # Well past the 4 s toleration: in FullDisruption nothing is tainted
    # NoExecute and nothing evicted.
    time.sleep(8)
    for k in (a, b):
        node = node_json(kubectl, k.name)
        assert not [t for t in node["spec"].get("taints", []) if t["effect"] == "NoExecute"], node
    assert not pod_json(kubectl, "before")["metadata"].get("deletionTimestamp")
    assert "Entering master disruption mode" in \
        (server.dir / "controller-manager.log").read_text()

    a.start()
    wait_until(lambda: node_column(kubectl, "kl-a", 1) == "Ready", 40, "kl-a Ready again")
    back = time.monotonic()
    wait_until(lambda: (pod_json(kubectl, "after") or {}).get("spec", {}).get("nodeName"),
               20, "after to be bound")
    print(f"after bound {time.monotonic() - back:.1f}s after kl-a was Ready again")
    assert pod_json(kubectl, "after")["spec"]["nodeName"] == "kl-a"


def metrics_text(run, server, port):
    crt, key = server.node_identity("metrics-reader")
    return run("curl", "-sS", "--cacert", "/dev/null", "-k", "--cert", crt, "--key", key,
               f"https://127.0.0.1:{port}/metrics").stdout


def test_component_ports_health_and_metrics(world, wait_until, run):
    """The controller manager's and the scheduler's secure ports: /healthz
    for anyone, /metrics only with a client certificate of the cluster CA
    (upstream's 403 Status otherwise), with the series of this session's
    controllers in them."""
    server, kubectl, (a, b) = world
    cm, sched = server.components
    for port in (cm.port, sched.port):
        wait_until(lambda port=port: run("curl", "-sk", f"https://127.0.0.1:{port}/healthz",
                                         check=False).stdout == "ok", 10, "healthz")
        anon = run("curl", "-sk", "-w", "%{http_code}", f"https://127.0.0.1:{port}/metrics").stdout
        assert anon.endswith("403") and \
            'forbidden: User \\"system:anonymous\\" cannot get path \\"/metrics\\"' in anon, anon
    wait_until(lambda: node_column(kubectl, "kl-a", 1) == "Ready", 40, "kl-a Ready")
    kubectl("run", "m1", "--image=nginx")
    wait_until(lambda: 'scheduler_schedule_attempts_total{result="scheduled",'
               'profile="default-scheduler"} 1' in metrics_text(run, server, sched.port), 20,
               "a scheduled attempt counted")
    text = metrics_text(run, server, sched.port)
    assert 'scheduler_pending_pods{queue="active"}' in text
    assert "scheduler_scheduling_attempt_duration_seconds_bucket" in text
    wait_until(lambda: 'node_collector_zone_size{zone=""} 2' in
               metrics_text(run, server, cm.port), 20, "the zone's size")
    text = metrics_text(run, server, cm.port)
    assert "taint_eviction_controller_pod_deletions_total 0" in text, text
    assert 'node_collector_evictions_total{zone=""} 0' in text, text
    assert 'node_collector_zone_health{zone=""}' in text, text
    assert "node_collector_update_all_nodes_health_duration_seconds_count" in text, text


def test_expired_certificate_node_loses_its_pods_then_plan_two(world, wait_until, run, tmp):
    """The seeds' first row as it really happens: a kubelet without rotation
    whose client certificate expires (signed for 20 s). Its heartbeats are
    refused (401), the node goes NotReady, is tainted, its Deployment pod is
    evicted after the 4 s toleration and replaced on a healthy node; the
    seeds' plan 2 (a new certificate signed by hand, the kubelet restarted
    with it) brings the node back and the Terminating pod goes."""
    import json
    from test_kubelet import short_lived_kubeconfig
    server, kubectl, (a, b) = world
    c = Kubelet(server.cube, server, tmp / "kl-c", "kl-c", "--port", "0")
    world_kubelets = [c]
    try:
        conf = short_lived_kubeconfig(server, c, 20)
        c.start("--kubeconfig", conf)
        for k in (a, b, c):
            wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                       f"{k.name} Ready")
        kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3")
        kubectl("rollout", "status", "deployment/web", "--timeout=60s")

        def pods():
            return json.loads(kubectl("get", "pods", "-l", "app=web", "-o",
                                      "json").stdout)["items"]
        on_c = [p["metadata"]["name"] for p in pods() if p["spec"].get("nodeName") == "kl-c"]
        assert on_c, "the scheduler spread the 3 pods over the 3 nodes"

        wait_until(lambda: node_column(kubectl, "kl-c", 1) == "NotReady", 60,
                   "kl-c NotReady after its certificate expired")
        assert '"Failed to update lease" err="Unauthorized"' in c.log(), c.tail()
        wait_until(lambda: all((p := pod_json(kubectl, n)) and p["metadata"].get(
            "deletionTimestamp") for n in on_c), 30, "kl-c's pod marked for deletion")
        wait_until(lambda: len([p for p in pods() if not p["metadata"].get("deletionTimestamp")
                                and p.get("status", {}).get("phase") == "Running"]) == 3,
                   30, "3 replicas running elsewhere")
        assert all(p["spec"].get("nodeName") != "kl-c" for p in pods()
                   if not p["metadata"].get("deletionTimestamp"))

        # Plan 2: a certificate signed by hand, the kubelet restarted with it.
        c.stop()
        crt, key = server.node_identity("kl-c", duration="1h")
        c.start("--kubeconfig", server.write_kubeconfig(c.root / "renewed.conf", crt, key))
        wait_until(lambda: node_column(kubectl, "kl-c", 1) == "Ready", 40, "kl-c Ready again")
        wait_until(lambda: not [n for n in on_c if pod_json(kubectl, n)], 30,
                   "the Terminating pod confirmed gone")
        assert len(pods()) == 3
    finally:
        for k in world_kubelets:
            k.stop()


def test_namespace_deletion_waits_for_its_pods(world, wait_until):
    """`kubectl delete namespace`: Terminating (new content refused, the
    controller's conditions in `kubectl describe`), its pods terminated
    gracefully through their kubelet — never force-removed — and the
    namespace gone once they are, after upstream's 30/2 + 1 s recheck."""
    server, kubectl, (a, b) = world
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    kubectl("create", "namespace", "team")
    kubectl("-n", "team", "create", "deployment", "web", "--image=nginx", "--replicas=2")
    wait_until(lambda: kubectl("-n", "team", "get", "pods", "--no-headers").stdout
               .count("Running") == 2, 30, "two web pods Running")
    start = time.monotonic()
    out = kubectl("delete", "namespace", "team", "--wait=false").stdout
    assert out.strip() == 'namespace "team" deleted', out
    assert node_column(kubectl, "kl-a", 1) == "Ready"
    r = kubectl("-n", "team", "create", "configmap", "late", check=False)
    assert r.returncode != 0
    assert ('configmaps "late" is forbidden: unable to create new content in namespace team '
            "because it is being terminated") in r.stderr, r.stderr
    wait_until(lambda: "SomeResourcesRemain" in kubectl("describe", "namespace", "team",
                                                        check=False).stdout,
               10, "the NamespaceContentRemaining condition")
    desc = kubectl("describe", "namespace", "team").stdout
    assert re.search(r"(?m)^Status:\s+Terminating", desc), desc
    assert "Some resources are remaining: pods. has 2 resource instances" in desc, desc
    # The kubelets confirm the graceful deletions.
    wait_until(lambda: kubectl("-n", "team", "get", "pods", "--no-headers",
                               check=False).stdout.strip() == "", 20, "the pods gone")
    wait_until(lambda: kubectl("get", "namespace", "team", check=False).returncode != 0, 30,
               "the namespace gone")
    took = time.monotonic() - start
    print(f"namespace gone {took:.1f}s after kubectl delete (pods' grace 30s: recheck at 16s)")
    assert 15 <= took <= 30, took


JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox, command: ["sh", "-c", "sleep 8"]}]
"""


def test_job_pod_lost_to_eviction_is_replaced(world, wait_until):
    """A Job's pod on a node that dies is evicted (counted failed), replaced
    on the healthy node after the 10 s back-off, and the Job ends Complete
    — but only once the evicted pod is really gone, when its kubelet
    returns (upstream 1.31+: SuccessCriteriaMet first)."""
    server, kubectl, kubelets = world
    for k in kubelets:
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    kubectl("apply", "-f", "-", input=JOB)
    header = kubectl("get", "jobs").stdout.splitlines()[0].split()
    assert header == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], header

    def pods():
        import json
        out = kubectl("get", "pods", "-l", "job-name=batch", "-o", "json").stdout
        return json.loads(out)["items"]
    wait_until(lambda: [p for p in pods() if p["status"].get("phase") == "Running"], 20,
               "the Job's pod Running")
    first = pods()[0]
    dead = next(k for k in kubelets if k.name == first["spec"]["nodeName"])
    dead.proc.send_signal(signal.SIGKILL)
    dead.proc.wait(10)
    wait_until(lambda: (pod_json(kubectl, first["metadata"]["name"]) or {})
               .get("metadata", {}).get("deletionTimestamp"), 40, "the pod evicted")
    wait_until(lambda: len(pods()) == 2, 20, "a replacement")
    other = [p for p in pods() if p["metadata"]["name"] != first["metadata"]["name"]][0]
    assert other["spec"]["nodeName"] != dead.name
    job = kubectl("get", "job", "batch", "-o", "jsonpath={.status.failed}").stdout
    assert job == "1", job
    # The replacement finishes; the evicted pod is still Terminating.
    conditions = lambda: kubectl("get", "job", "batch", "-o",  # noqa: E731
                                 "jsonpath={.status.conditions[*].type}").stdout.split()
    wait_until(lambda: "SuccessCriteriaMet" in conditions(), 30, "SuccessCriteriaMet")
    assert "Complete" not in conditions()
    # printJob has no case for SuccessCriteriaMet: still Running.
    assert re.search(r"(?m)^batch\s+Running\s+1/1", kubectl("get", "jobs").stdout)
    dead.start()
    wait_until(lambda: re.search(r"(?m)^batch\s+Complete\s+1/1",
                                 kubectl("get", "jobs").stdout), 40, "Complete")
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=batch",
                     "-o", "custom-columns=R:.reason", "--no-headers").stdout.split()
    assert events.count("SuccessfulCreate") == 2 and "Completed" in events, events


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres}]
"""


def test_statefulset_pod_on_a_dead_node_is_never_duplicated(world, wait_until):
    """The seeds' StatefulSet row: the pod of a dead node is evicted and
    stays Terminating while its kubelet is away — and in all that time there
    is never a second pod of its ordinal (checked every second). When the
    kubelet returns and confirms, the pod is created again, a new UID."""
    server, kubectl, kubelets = world
    for k in kubelets:
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    kubectl("apply", "-f", "-", input=STATEFULSET)

    def pods():
        import json
        out = kubectl("get", "pods", "-l", "app=db", "-o", "json").stdout
        return {p["metadata"]["name"]: p for p in json.loads(out)["items"]}
    wait_until(lambda: sum(p["status"].get("phase") == "Running" for p in pods().values()) == 2,
               30, "db-0 and db-1 Running")
    victim = pods()["db-0"]
    dead = next(k for k in kubelets if k.name == victim["spec"]["nodeName"])
    dead.proc.send_signal(signal.SIGKILL)
    dead.proc.wait(10)
    wait_until(lambda: pods()["db-0"]["metadata"].get("deletionTimestamp"), 40,
               "db-0 evicted")
    # Terminating for as long as the kubelet is away: never two db-0.
    for _ in range(12):
        now = pods()
        names = [n for n in now if n.startswith("db-")]
        assert len(names) == len(set(names)) <= 2, names
        assert now["db-0"]["metadata"]["uid"] == victim["metadata"]["uid"], now["db-0"]
        assert now["db-0"]["metadata"].get("deletionTimestamp")
        time.sleep(1)
    dead.start()
    wait_until(lambda: "db-0" in pods() and pods()["db-0"]["metadata"]["uid"] !=
               victim["metadata"]["uid"], 60, "db-0 created again")
    wait_until(lambda: pods()["db-0"]["status"].get("phase") == "Running", 30,
               "the new db-0 Running")


def test_endpoints_drift_when_a_node_goes_not_ready(world, wait_until):
    """The seeds' endpoint drift: when the node lifecycle controller marks
    the dead node's pods not ready, its pod's address leaves the Service's
    ready set — `notReadyAddresses` in Endpoints, `ready: false` in the
    EndpointSlice — while the healthy node's stays; back when it returns."""
    import json
    server, kubectl, (a, b) = world
    for k in (a, b):
        wait_until(lambda k=k: node_column(kubectl, k.name, 1) == "Ready", 40,
                   f"{k.name} Ready")
    # web-b tolerates unreachable for good: it is marked not ready, never
    # evicted, so it is there when its kubelet returns.
    for name, node in (("web-a", "kl-a"), ("web-b", "kl-b")):
        pin = ('{"spec":{"nodeSelector":{"kubernetes.io/hostname":"%s"},"tolerations":[%s]}}'
               % (node, UNREACHABLE_NOEXECUTE))
        kubectl("run", name, "--image=nginx", "--labels=app=web", f"--overrides={pin}")
    kubectl("create", "service", "clusterip", "web", "--tcp=80:80")
    ips = {}
    for name in ("web-a", "web-b"):
        wait_until(lambda n=name: pod_json(kubectl, n)["status"].get("podIP"), 20,
                   f"{name}'s IP")
        ips[name] = pod_json(kubectl, name)["status"]["podIP"]

    def endpoints():
        ep = json.loads(kubectl("get", "endpoints", "web", "-o", "json").stdout)
        ready, not_ready = set(), set()
        for sub in ep.get("subsets") or []:
            ready |= {x["ip"] for x in sub.get("addresses") or []}
            not_ready |= {x["ip"] for x in sub.get("notReadyAddresses") or []}
        return ready, not_ready

    def slice_ready():
        out = kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=web",
                      "-o", "json").stdout
        return {e["addresses"][0]: e["conditions"].get("ready")
                for s in json.loads(out)["items"] for e in s.get("endpoints") or []}
    both = {ips["web-a"], ips["web-b"]}
    wait_until(lambda: endpoints() == (both, set()), 20, "both pods ready endpoints")
    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(10)
    wait_until(lambda: node_column(kubectl, "kl-b", 1) == "NotReady", 30, "kl-b NotReady")
    wait_until(lambda: endpoints() == ({ips["web-a"]}, {ips["web-b"]}), 10,
               "web-b's address in notReadyAddresses")
    assert slice_ready() == {ips["web-a"]: True, ips["web-b"]: False}, slice_ready()
    ready = [c for c in pod_json(kubectl, "web-b")["status"]["conditions"]
             if c["type"] == "Ready"][0]
    assert ready["status"] == "False", ready
    b.start()
    wait_until(lambda: endpoints() == (both, set()), 40, "web-b ready again")
