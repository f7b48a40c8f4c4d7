#!/usr/bin/python3
"""storm_bench.py — the driving and measuring side of bench/run-storm-bench.sh.

Python 3 standard library only (it reuses bench/hollow_probe.py's API client,
watch and /metrics parser). One admin watch on Nodes and one on Pods, every
event timestamped on receipt.

  1. waits for --nodes Ready nodes, creates Deployment default/storm
     (--replicas pods, 100m CPU / 64 MiB each, no tolerations of its own: the
     API server's DefaultTolerationSeconds gives them not-ready/unreachable
     NoExecute for its --default-*-toleration-seconds) and waits for every pod
     to be Running and Ready; prints the rollout time and the spread (pods
     per node) the scheduler made;
  2. samples the API server's apiserver_request_total for --baseline s;
  3. SIGKILLs the hollow kubelet process holding the --lost-prefix nodes and
     follows the storm: the lost nodes going Unknown and getting their
     unreachable NoExecute taint, their pods marked for deletion by the taint
     eviction controller, the ReplicaSet's replacements created, bound and
     Running + Ready — until --replicas pods run, none of them on a lost node
     (every replacement runs), scraping /metrics every --scrape s meanwhile;
  4. prints each phase's first/last time from the kill, which one dominated,
     and the API server's request rate (mean, peak, by verb and resource)
     against the baseline.

  storm_bench.py --server https://127.0.0.1:PORT --dir C --nodes 1000 \
      --lost-prefix lost- --lost 100 --replicas 3000 --kill-pid-file F \
      --grace 20 --period 5 --eviction-rate 1000 --toleration 10 \
      [--pids apiserver=PID,controller-manager=PID,scheduler=PID]
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hollow_probe import CLK_TCK, Api, Watch, pct, proc_ticks, scrape  # noqa: E402

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
UNREACHABLE = "node.kubernetes.io/unreachable"


def cond(o, typ):
    for c in (o.get("status") or {}).get("conditions") or []:
        if c.get("type") == typ:
            return c.get("status")
    return None


def has_taint(n, key, effect):
    return any(t.get("key") == key and t.get("effect") == effect
               for t in (n.get("spec") or {}).get("taints") or [])


def running(p):
    return (p.get("status") or {}).get("phase") == "Running" and cond(p, "Ready") == "True"


def dist(xs, unit="s"):
    if not xs:
        return "n=0"
    return "n=%d min=%.2f%s p50=%.2f p90=%.2f max=%.2f%s" % (
        len(xs), min(xs), unit, pct(xs, 50), pct(xs, 90), max(xs), unit)


def post(api, path, body):
    c = api.conn()
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status not in (200, 201):
            sys.exit("storm_bench: POST %s: %d %s" % (path, r.status, data[:300]))
    finally:
        c.close()


def total_requests(m):
    return sum(m.values())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--lost-prefix", default="lost-")
    p.add_argument("--lost", type=int, required=True)
    p.add_argument("--replicas", type=int, required=True)
    p.add_argument("--kill-pid-file", required=True)
    p.add_argument("--grace", type=float, required=True)
    p.add_argument("--period", type=float, required=True)
    p.add_argument("--eviction-rate", type=float, required=True)
    p.add_argument("--toleration", type=float, required=True)
    p.add_argument("--baseline", type=float, default=10)
    p.add_argument("--scrape", type=float, default=1.0)
    p.add_argument("--ready-timeout", type=float, default=600)
    p.add_argument("--timeout", type=float, default=0, help="s after the kill (0: derived)")
    p.add_argument("--pids", default="")
    p.add_argument("--ready-file")
    a = p.parse_args()

    api = Api(a.server, a.dir)
    lock = threading.Lock()
    lost = lambda name: bool(name) and name.startswith(a.lost_prefix)  # noqa: E731
    st = {"kill": None}
    node_ready = {}
    unknown, noexec = {}, {}
    false_det = {}
    pods = {}   # name -> dict(node, created, bound, running, marked, notready, victim, deleted)

    def node_ev(typ, n, t, listed=False):
        name = n["metadata"]["name"]
        if typ == "DELETED":
            return
        ready = cond(n, "Ready")
        with lock:
            if ready == "True":
                node_ready.setdefault(name, t)
            if st["kill"] is None:
                return
            if lost(name):
                if ready == "Unknown":
                    unknown.setdefault(name, t)
                if has_taint(n, UNREACHABLE, "NoExecute"):
                    noexec.setdefault(name, t)
            elif ready != "True":
                false_det.setdefault(name, (t - st["kill"], ready))

    def pod_ev(typ, o, t, listed=False):
        name = o["metadata"]["name"]
        node = (o.get("spec") or {}).get("nodeName")
        with lock:
            rec = pods.get(name)
            if rec is None:
                rec = pods[name] = {"created": t, "node": None, "bound": None, "running": None,
                                    "marked": None, "notready": None, "deleted": None,
                                    "after_kill": st["kill"] is not None, "victim": False}
            if node and not rec["node"]:
                rec["node"], rec["bound"] = node, t
            if typ == "DELETED":
                rec["deleted"] = rec["deleted"] or t
                return
            if running(o) and rec["running"] is None:
                rec["running"] = t
            if st["kill"] is not None:
                if o["metadata"].get("deletionTimestamp") and rec["marked"] is None:
                    rec["marked"] = t
                if rec["running"] and cond(o, "Ready") == "False" and rec["notready"] is None:
                    rec["notready"] = t

    nw = Watch(api, NODES, node_ev, lambda o, t: node_ev("ADDED", o, t, True))
    pw = Watch(api, PODS, pod_ev, lambda o, t: pod_ev("ADDED", o, t, True))
    nw.start()
    pw.start()
    if not (nw.started.wait(30) and pw.started.wait(30)):
        sys.exit("storm_bench: the watches did not start")
    if a.ready_file:
        open(a.ready_file, "w").close()
    t_start = time.time()
    while True:
        with lock:
            r = len(node_ready)
        if r >= a.nodes:
            break
        if time.time() - t_start > a.ready_timeout:
            sys.exit("storm_bench: only %d/%d nodes Ready" % (r, a.nodes))
        time.sleep(0.5)
    # the admission's not-ready:NoSchedule taint comes off just after Ready
    time.sleep(2)
    print("# all %d nodes Ready %.1fs after the probe started" % (a.nodes, time.time() - t_start),
          flush=True)

    # 1. the Deployment
    labels = {"app": "storm"}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "storm", "namespace": "default"},
           "spec": {"replicas": a.replicas, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                                 "spec": {"containers": [{
                                     "name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "64Mi"}}}]}}}}
    t_dep = time.time()
    post(api, DEPLOYS, dep)

    def n_running(exclude_lost):
        return sum(1 for r in pods.values() if r["running"] and not r["marked"]
                   and not r["deleted"] and not (exclude_lost and lost(r["node"])))

    last = 0
    while True:
        with lock:
            r, b = n_running(False), sum(1 for x in pods.values() if x["node"])
        if r >= a.replicas:
            break
        if time.time() - t_dep > a.ready_timeout:
            sys.exit("storm_bench: only %d/%d pods Running after %ds" % (r, a.replicas,
                                                                         a.ready_timeout))
        if time.time() - last >= 10:
            print("# rollout t=%.0fs: %d pods bound, %d Running+Ready of %d"
                  % (time.time() - t_dep, b, r, a.replicas), flush=True)
            last = time.time()
        time.sleep(0.2)
    t_rolled = time.time()
    with lock:
        snap = {k: dict(v) for k, v in pods.items()}
    per_node = {}
    for r in snap.values():
        if r["node"] and not r["deleted"]:
            per_node[r["node"]] = per_node.get(r["node"], 0) + 1
    counts = [per_node.get(n, 0) for n in node_ready]
    on_lost = sum(c for n, c in per_node.items() if lost(n))
    created = [r["created"] for r in snap.values()]
    print("RESULT rollout replicas=%d all_running=%.1fs (last created %.1fs, last bound %.1fs "
          "after the Deployment's POST)" % (
              a.replicas, t_rolled - t_dep, max(created) - t_dep,
              max(r["bound"] for r in snap.values() if r["bound"]) - t_dep))
    print("RESULT spread pods per node: min=%d p50=%d max=%d over %d nodes; %d pods on the %d "
          "lost-* nodes (%.1f%%, even spread: %.1f%%)" % (
              min(counts), pct(counts, 50), max(counts), len(counts), on_lost, a.lost,
              100.0 * on_lost / a.replicas, 100.0 * a.lost / a.nodes), flush=True)

    # 2. baseline request rate
    pids = {}
    for item in filter(None, a.pids.split(",")):
        k, v = item.split("=")
        pids[k] = int(v)
    m0, _ = scrape(api)
    b0 = time.time()
    time.sleep(a.baseline)
    m1, _ = scrape(api)
    b1 = time.time()
    base_rate = (total_requests(m1) - total_requests(m0)) / (b1 - b0)
    print("RESULT baseline requests %.1f/s over %.0fs before the kill (%d nodes heartbeating, "
          "%d pods running)" % (base_rate, b1 - b0, a.nodes, a.replicas), flush=True)

    # 3. the kill, and the storm
    with lock:
        victims = [k for k, v in pods.items() if lost(v["node"]) and not v["deleted"]]
        for k in victims:
            pods[k]["victim"] = True
    cpu0 = {k: proc_ticks(v)[1] for k, v in pids.items()}
    samples = [(time.time(), scrape(api)[0])]
    pid = int(open(a.kill_pid_file).read())
    with lock:
        st["kill"] = time.time()
    os.kill(pid, signal.SIGKILL)
    t_kill = st["kill"]
    print("# SIGKILL to hollow kubelet pid %d holding the %d lost-* nodes (%d pods) at %s"
          % (pid, a.lost, len(victims), time.strftime("%H:%M:%S", time.localtime(t_kill))),
          flush=True)
    drain = min(a.eviction_rate, 10.0)
    timeout = a.timeout or (a.grace + 3 * a.period + a.lost / drain * 1.2 + a.toleration + 180)
    last = 0
    done = None
    while True:
        time.sleep(max(0.05, samples[-1][0] + a.scrape - time.time()))
        samples.append((time.time(), scrape(api)[0]))
        now = time.time()
        with lock:
            u, e = len(unknown), len(noexec)
            marked = sum(1 for k in victims if pods[k]["marked"] or pods[k]["deleted"])
            repl = [v for v in pods.values() if v["after_kill"]]
            rr = sum(1 for v in repl if v["running"])
            good = n_running(True)
        if good >= a.replicas and marked >= len(victims) and done is None:
            done = now
            break
        if now - t_kill > timeout:
            print("# TIMEOUT %.0fs after the kill" % timeout)
            break
        if now - last >= 10:
            print("# t=kill+%5.0fs lost nodes Unknown %d, NoExecute %d of %d; victims marked %d of "
                  "%d; replacements created %d, Running %d; pods Running off lost nodes %d of %d"
                  % (now - t_kill, u, e, a.lost, marked, len(victims), len(repl), rr, good,
                     a.replicas), flush=True)
            last = now
    cpu1 = {k: proc_ticks(v)[1] for k, v in pids.items()}
    t_end = time.time()
    with lock:
        snap = {k: dict(v) for k, v in pods.items()}
        un, ne, fd = dict(unknown), dict(noexec), dict(false_det)

    # 4. figures
    rel = lambda xs: [x - t_kill for x in xs if x is not None]  # noqa: E731
    vic = [snap[k] for k in victims]
    repl = [v for v in snap.values() if v["after_kill"]]
    phases = [
        ("lost node Ready->Unknown", rel(un.values())),
        ("lost node unreachable:NoExecute", rel(ne.values())),
        ("victim pod Ready=False", rel(v["notready"] for v in vic)),
        ("victim pod marked for deletion", rel(v["marked"] or v["deleted"] for v in vic)),
        ("replacement created", rel(v["created"] for v in repl)),
        ("replacement bound", rel(v["bound"] for v in repl)),
        ("replacement Running+Ready", rel(v["running"] for v in repl)),
    ]
    print("RESULT storm setup nodes=%d lost=%d (%.0f%% of one zone) replicas=%d victims=%d "
          "monitor_period=%gs grace=%gs node_eviction_rate=%g tolerationSeconds=%g"
          % (a.nodes, a.lost, 100.0 * a.lost / a.nodes, a.replicas, len(victims), a.period,
             a.grace, a.eviction_rate, a.toleration))
    all_ok = done is not None
    print("RESULT kill -> every replacement Running: %s" % (
        "%.1fs" % (done - t_kill) if all_ok else "NOT REACHED (%.0fs)" % (t_end - t_kill)))
    prev, steps = 0.0, []
    print("# phase (s from the kill): first / p50 / last, n")
    for name, xs in phases:
        if xs:
            print("RESULT phase %-34s %7.1f / %7.1f / %7.1f  n=%d" % (
                name, min(xs), pct(xs, 50), max(xs), len(xs)))
            if name != "victim pod Ready=False":
                steps.append((max(xs) - prev, name))
                prev = max(xs)
        else:
            print("RESULT phase %-34s none" % name)
    if steps:
        print("RESULT where the time went (last of each phase minus the last of the one before): "
              + ", ".join("%s +%.1fs" % (n, d) for d, n in steps))
        d, n = max(steps)
        print("RESULT dominated by: %s (+%.1fs of %.1fs)" % (n, d, prev))
    per_pod = [v["running"] - v["created"] for v in repl if v["running"]]
    print("RESULT replacement created -> Running+Ready: " + dist(per_pod))
    per_bind = [v["bound"] - v["created"] for v in repl if v["bound"]]
    print("RESULT replacement created -> bound: " + dist(per_bind))
    rt = sorted(rel(v["running"] for v in repl))
    if rt:
        print("RESULT replacements Running, s from the kill: 10%% %.1f, 50%% %.1f, 90%% %.1f, "
              "100%% %.1f" % tuple(rt[min(len(rt) - 1, int(q * len(rt)))] for q in
                                   (0.1, 0.5, 0.9, 0.999)))
    on_lost = sum(1 for v in repl if lost(v["node"]))
    print("RESULT replacements bound to a lost node: %d; healthy nodes that left Ready: %d"
          % (on_lost, len(fd)))
    # the API server's load
    rates = []
    for (ta, ma), (tb, mb) in zip(samples, samples[1:]):
        rates.append(((tb - t_kill), (total_requests(mb) - total_requests(ma)) / (tb - ta)))
    if len(samples) > 1:
        (ta, ma), (tb, mb) = samples[0], samples[-1]
        w = tb - ta
        by = {}
        for k, v in mb.items():
            d = v - ma.get(k, 0)
            if d > 0:
                key = "%s %s%s" % (k[0] or "(non-resource)", k[1] or "", "/" + k[2] if k[2] else "")
                by[key] = by.get(key, 0) + d
        non2xx = sum(v - ma.get(k, 0) for k, v in mb.items() if not (k[3] or "").startswith("2"))
        peak_t, peak = max(rates, key=lambda x: x[1])
        print("RESULT apiserver requests kill..done (%.0fs): mean %.1f/s, peak %.0f/s (over %.0f s "
              "at kill+%.0fs), baseline %.1f/s; non-2xx %d" % (w, (total_requests(mb) - total_requests(ma)) / w,
                                                              peak, a.scrape, peak_t, base_rate, non2xx))
        print("RESULT apiserver requests by verb/resource (mean /s over kill..done, /metrics "
              "scrapes included): " + ", ".join("%s %.1f" % (k, v / w) for k, v in
                                                sorted(by.items(), key=lambda kv: -kv[1])[:12]))
        # Means over windows (not every n-th sample: the Lease renewals come in
        # bursts every 10 s, and a sample every 20 s would alias them).
        span = samples[-1][0] - t_kill
        win = 1 if span <= 60 else 10 * max(1, int(span / 400 + 0.999))
        rows, i = [], 0
        while i < len(samples) - 1:
            j = i
            while j < len(samples) - 1 and samples[j + 1][0] - samples[i][0] <= win + 0.01:
                j += 1
            j = max(j, i + 1)
            (ta, ma), (tb, mb) = samples[i], samples[j]
            rows.append("%d:%.0f" % (max(0, round(ta - t_kill)), (total_requests(mb) - total_requests(ma)) / (tb - ta)))
            i = j
        print("# requests/s from the kill, mean per %d s window (start:rate): %s" % (win, " ".join(rows)))
    if cpu0:
        print("RESULT cpu kill..done: " + ", ".join("%s %.1fs (%.2f cores)" % (
            k, (cpu1[k] - cpu0[k]) / CLK_TCK, (cpu1[k] - cpu0[k]) / CLK_TCK / (t_end - t_kill))
            for k in cpu0))
    if nw.errors or pw.errors:
        print("# watch reconnects: nodes %d, pods %d" % (nw.errors, pw.errors))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
