#!/usr/bin/python3
"""detection_bench.py — the measuring side of bench/run-detection-bench.sh.

Python 3 standard library only (it reuses bench/hollow_probe.py's API client
and watch). One admin watch on the Leases in kube-node-lease and one on Nodes,
every event timestamped on receipt. Once all nodes are Ready and every node
to fail has been seen renewing its Lease, the probe SIGKILLs the hollow
kubelet process that holds them (--kill-pid) and records, per failed node:

  expected      the last renewal it observed (receipt of the Lease event that
                moved spec.renewTime, or of a Node event that moved the Ready
                condition's lastHeartbeatTime, whichever is later) + the grace
                period (--grace, the controller manager's
                --node-monitor-grace-period)
  unknown       receipt of the Node event with Ready=Unknown
  noschedule    receipt of the Node event carrying node.kubernetes.io/unreachable:NoSchedule
  noexecute     receipt of the Node event carrying node.kubernetes.io/unreachable:NoExecute

and prints the distribution (min/p50/p90/p99/max) of each minus expected,
against one --node-monitor-period (--period). With --cm-log, the controller
manager's -v 2 lines "Node is unresponsive. Adding it to the Taint queue"
split the NoExecute delay into "Unknown -> queued" (upstream: the next pass)
and "queued -> tainted" (the zone's token bucket). Nodes not killed must stay
Ready throughout: any that does not is reported as a false detection.

  detection_bench.py --server https://127.0.0.1:PORT --dir C --fail-prefix fail- \
      --fail 1000 --healthy 1000 --kill-pid PID|--kill-pid-file F --grace 50 --period 5 \
      [--eviction-rate 1000] [--cm-log C/controller-manager.log] [--timeout S]
"""
import argparse
import datetime
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hollow_probe import Api, Watch, pct  # noqa: E402

NODES = "/api/v1/nodes"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
UNREACHABLE = "node.kubernetes.io/unreachable"


def rfc3339(s):
    """Epoch seconds of an RFC 3339 time with optional fraction (UTC 'Z')."""
    if not s:
        return None
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", s)
    if not m:
        return None
    dt = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    off = 0
    if m.group(3) != "Z":
        sign = 1 if m.group(3)[0] == "+" else -1
        off = sign * (int(m.group(3)[1:3]) * 3600 + int(m.group(3)[4:6]) * 60)
    return (dt.replace(tzinfo=datetime.timezone.utc).timestamp() - off
            + (float(m.group(2)) if m.group(2) else 0.0))


def ready_of(n):
    for c in (n.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status"), c.get("lastHeartbeatTime")
    return None, None


def has_taint(n, key, effect):
    return any(t.get("key") == key and t.get("effect") == effect
               for t in (n.get("spec") or {}).get("taints") or [])


def dist(xs):
    if not xs:
        return "n=0"
    return "n=%d min=%.2f p50=%.2f p90=%.2f p99=%.2f max=%.2f" % (
        len(xs), min(xs), pct(xs, 50), pct(xs, 90), pct(xs, 99), max(xs))


def klog_times(path, pattern, day):
    """{node: epoch} of the first klog line matching pattern (with node="...")."""
    out = {}
    rx = re.compile(r'^[IWE](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) .*' + pattern
                    + r'.*node="([^"]+)"')
    try:
        f = open(path, errors="replace")
    except OSError:
        return out
    for line in f:
        m = rx.match(line)
        if not m:
            continue
        mo, d, hh, mi, ss, frac, node = m.groups()
        t = time.mktime((day.tm_year, int(mo), int(d), int(hh), int(mi), int(ss), 0, 0, -1))
        out.setdefault(node, t + float("0." + frac))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--fail-prefix", default="fail-")
    p.add_argument("--fail", type=int, required=True)
    p.add_argument("--healthy", type=int, required=True)
    p.add_argument("--kill-pid", type=int)
    p.add_argument("--kill-pid-file", help="read the pid to kill from here, at the kill")
    p.add_argument("--signal", default="KILL", choices=("KILL", "STOP"))
    p.add_argument("--grace", type=float, required=True)
    p.add_argument("--period", type=float, required=True)
    p.add_argument("--eviction-rate", type=float, default=0.1)
    p.add_argument("--settle", type=float, default=12,
                   help="s after all Ready before killing (>= one Lease interval)")
    p.add_argument("--ready-timeout", type=float, default=600)
    p.add_argument("--timeout", type=float, default=0,
                   help="s after the kill to wait for every taint (0: derived)")
    p.add_argument("--cm-log")
    p.add_argument("--ready-file", help="touched when the watches run")
    a = p.parse_args()

    api = Api(a.server, a.dir)
    lock = threading.Lock()
    total = a.fail + a.healthy
    failing = lambda name: name.startswith(a.fail_prefix)  # noqa: E731
    st = {"kill": None}
    ready_at = {}          # node -> first receipt Ready=True
    renew_rx = {}          # failing node -> receipt of the last Lease event moving renewTime
    renew_val = {}         # ... its renewTime (epoch)
    renew_seen = {}        # node -> renewTime string last seen
    renewals = {}          # failing node -> number of renewals observed (not counting the list)
    hb_rx, hb_val = {}, {}  # node -> receipt of last Ready lastHeartbeatTime change, value
    unknown, nosched, noexec = {}, {}, {}
    false_det = {}         # healthy node -> (time, what)

    def lease_ev(typ, o, t, listed=False):
        name = o["metadata"]["name"]
        rt = (o.get("spec") or {}).get("renewTime")
        with lock:
            if typ == "DELETED" or not rt or renew_seen.get(name) == rt:
                return
            renew_seen[name] = rt
            if not failing(name):
                return
            renew_rx[name] = t
            renew_val[name] = rfc3339(rt)
            if not listed:
                renewals[name] = renewals.get(name, 0) + 1

    def node_ev(typ, n, t, listed=False):
        name = n["metadata"]["name"]
        if typ == "DELETED":
            return
        status, hb = ready_of(n)
        with lock:
            if status == "True":
                ready_at.setdefault(name, t)
            if hb and hb_val.get(name) != hb:
                if name in hb_val and not listed:
                    hb_rx[name] = t
                hb_val[name] = hb
            if st["kill"] is None:
                return
            if failing(name):
                if status == "Unknown":
                    unknown.setdefault(name, t)
                if has_taint(n, UNREACHABLE, "NoSchedule"):
                    nosched.setdefault(name, t)
                if has_taint(n, UNREACHABLE, "NoExecute"):
                    noexec.setdefault(name, t)
            elif status != "True" or (n.get("spec") or {}).get("taints"):
                false_det.setdefault(name, (t - st["kill"], "Ready=%s taints=%s" % (
                    status, [x.get("key") + ":" + x.get("effect")
                             for x in (n.get("spec") or {}).get("taints") or []])))

    lw = Watch(api, LEASES, lease_ev, lambda o, t: lease_ev("ADDED", o, t, True))
    nw = Watch(api, NODES, node_ev, lambda o, t: node_ev("ADDED", o, t, True))
    lw.start()
    nw.start()
    if not (lw.started.wait(30) and nw.started.wait(30)):
        sys.exit("detection_bench: the watches did not start")
    if a.ready_file:
        open(a.ready_file, "w").close()
    t_start = time.time()

    # 1. all Ready, and untainted (the admission's not-ready:NoSchedule lifted)
    while True:
        with lock:
            r = len(ready_at)
        if r >= total:
            break
        if time.time() - t_start > a.ready_timeout:
            sys.exit("detection_bench: only %d/%d nodes Ready after %ds" % (r, total, a.ready_timeout))
        time.sleep(0.5)
    t_ready = time.time()
    print("# all %d nodes Ready %.1fs after the probe started" % (total, t_ready - t_start),
          flush=True)
    # 2. settle: every node to fail seen renewing its Lease on the watch
    while True:
        with lock:
            seen = sum(1 for n in renewals if renewals[n] >= 1)
        if time.time() - t_ready >= a.settle and seen >= a.fail:
            break
        if time.time() - t_ready > a.settle + 60:
            print("# only %d/%d failing nodes seen renewing; killing anyway" % (seen, a.fail))
            break
        time.sleep(0.2)
    listed = api.get(NODES).get("items") or []
    tainted = [n["metadata"]["name"] for n in listed if (n.get("spec") or {}).get("taints")]
    if tainted:
        print("# %d nodes still carry taints before the kill (e.g. %s)" % (len(tainted), tainted[:3]))

    # 3. the kill
    sig = signal.SIGKILL if a.signal == "KILL" else signal.SIGSTOP
    if a.kill_pid is None:
        a.kill_pid = int(open(a.kill_pid_file).read())
    with lock:
        st["kill"] = time.time()
    os.kill(a.kill_pid, sig)
    t_kill = st["kill"]
    print("# SIG%s to hollow kubelet pid %d holding %d nodes at %s" % (
        a.signal, a.kill_pid, a.fail,
        time.strftime("%H:%M:%S", time.localtime(t_kill)) + ("%.3f" % (t_kill % 1))[1:]),
        flush=True)
    drain = min(a.eviction_rate, 10.0) if a.eviction_rate > 0 else 0.01
    timeout = a.timeout or (a.grace + 3 * a.period + a.fail / drain * 1.5 + 60)
    last_print = 0
    while True:
        now = time.time()
        with lock:
            u, s, e = len(unknown), len(nosched), len(noexec)
        if u >= a.fail and s >= a.fail and e >= a.fail:
            break
        if now - t_kill > timeout:
            print("# TIMEOUT %.0fs after the kill: Unknown %d, NoSchedule %d, NoExecute %d of %d"
                  % (timeout, u, s, e, a.fail))
            break
        if now - last_print >= 10:
            print("# t=kill+%5.1fs Unknown %d, unreachable:NoSchedule %d, unreachable:NoExecute %d"
                  " of %d" % (now - t_kill, u, s, e, a.fail), flush=True)
            last_print = now
        time.sleep(0.2)
    t_done = time.time()

    with lock:
        rx, rv, hx = dict(renew_rx), dict(renew_val), dict(hb_rx)
        un, ns, ne, fd = dict(unknown), dict(nosched), dict(noexec), dict(false_det)
    names = sorted(n for n in rv if failing(n))
    expected, by_hb = {}, 0
    for n in names:
        last = rx[n]
        if hx.get(n, 0) > last:
            last, by_hb = hx[n], by_hb + 1
        expected[n] = last + a.grace
    d_unknown = [un[n] - expected[n] for n in names if n in un]
    d_nosched = [ns[n] - expected[n] for n in names if n in ns]
    d_noexec = [ne[n] - expected[n] for n in names if n in ne]
    since_renew = [t_kill - rx[n] for n in names]
    rx_lag = [1000 * (rx[n] - rv[n]) for n in names if rv.get(n)]
    u_to_s = [ns[n] - un[n] for n in names if n in un and n in ns]
    u_to_e = [ne[n] - un[n] for n in names if n in un and n in ne]

    print("RESULT setup failed_nodes=%d healthy_nodes=%d (one zone) monitor_period=%gs grace=%gs "
          "node_eviction_rate=%g signal=SIG%s" % (a.fail, a.healthy, a.period, a.grace,
                                                   a.eviction_rate, a.signal))
    print("RESULT kill - last renewal observed (s): " + dist(since_renew))
    print("RESULT renewal receipt - its spec.renewTime (ms: write + watch latency): " + dist(rx_lag))
    if by_hb:
        print("# %d nodes' last sign of life was a Node status heartbeat, not a Lease renewal"
              % by_hb)
    print("RESULT Ready->Unknown - expected (s): " + dist(d_unknown))
    print("RESULT unreachable:NoSchedule - expected (s): " + dist(d_nosched))
    print("RESULT unreachable:NoExecute - expected (s): " + dist(d_noexec))
    print("RESULT Unknown -> NoSchedule taint (s): " + dist(u_to_s))
    print("RESULT Unknown -> NoExecute taint (s): " + dist(u_to_e))
    if a.cm_log:
        queued = klog_times(a.cm_log, r"Adding it to the Taint queue", time.localtime(t_kill))
        queued = {n: t for n, t in queued.items() if t >= t_kill - 1 and failing(n)}
        u_q = [queued[n] - un[n] for n in names if n in queued and n in un]
        q_e = [ne[n] - queued[n] for n in names if n in queued and n in ne]
        print("RESULT Unknown -> queued for NoExecute (s, controller log, 1 us klog stamps): "
              + dist(u_q))
        print("RESULT queued -> NoExecute taint (s): " + dist(q_e))
    if len(ne) > 1:
        ts = sorted(ne.values())
        span = ts[-1] - ts[0]
        per_s = {}
        for t in ts:
            per_s[int(t - ts[0])] = per_s.get(int(t - ts[0]), 0) + 1
        print("RESULT NoExecute taints: %d over %.1fs (%.2f/s; busiest second %d); the zone's "
              "rate --node-eviction-rate %g/s" % (len(ts), span, (len(ts) - 1) / span if span else
                                                  float("inf"), max(per_s.values()), a.eviction_rate))
        gaps = [b - x for x, b in zip(ts, ts[1:])]
        print("RESULT gap between consecutive NoExecute taints (s): " + dist(gaps))
    late = [x for x in d_unknown if x > a.period]
    late2 = [x for x in d_unknown if x > 2 * a.period]
    early = [x for x in d_unknown if x < 0]
    print("RESULT Unknown within one monitor period of expected: %d/%d; later than one period: "
          "%d (worst %.2fs); later than two: %d; earlier than expected: %d"
          % (len(d_unknown) - len(late) - len(early), len(names), len(late),
             max(late) if late else 0, len(late2), len(early)))
    missing = [n for n in names if n not in un]
    if missing:
        print("RESULT NOT DETECTED: %d nodes never went Unknown (e.g. %s)" % (len(missing),
                                                                            missing[:5]))
    print("RESULT false detections among the %d nodes left running: %d%s" % (
        a.healthy, len(fd), (" e.g. " + "; ".join("%s at kill+%.1fs %s" % (k, v[0], v[1])
                                                   for k, v in list(fd.items())[:3])) if fd else ""))
    print("RESULT kill -> last NoExecute: %.1fs; watch reconnects: leases %d, nodes %d"
          % ((max(ne.values()) - t_kill) if ne else float("nan"), lw.errors, nw.errors))
    ok = len(un) >= a.fail and len(ne) >= a.fail and not fd
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
