#!/usr/bin/python3
"""hollow_probe.py — the measuring side of bench/run-hollow-bench.sh.

Python 3 standard library only. Two commands:

  ready   watch Nodes and CSRs (one admin watch each, timestamps taken on
          receipt) while hollow kubelets bootstrap; print when all N Nodes are
          Ready, the CSR issue rate (peak over 1 s, average) and where each
          node's time went (CSR created -> approved -> issued -> Node Ready);
          with --pids, each process's CPU over the bootstrap and per second;
          request latencies (apiserver_request_duration_seconds) and TCP
          connections accepted on the machine (/proc/net/snmp) meanwhile.
  cpu     sample /proc/<pid>/stat (utime+stime, per thread) and VmRSS of the
          given processes over a window; with --server, also the API server's
          apiserver_request_total and latencies before and after, as requests
          per second.

Watching costs the API server one event per change, far less than listing
1,000 Nodes (~3 MB of JSON) every 0.5 s. A final LIST checks the counts.

  hollow_probe.py ready --server https://127.0.0.1:PORT --dir C --nodes 1000 \
      --t0-file T0 --ready-file R --timeout 600 \
      --pids apiserver=PID,controller-manager=PID,kubelet=@KUBELET_PID_FILE
  hollow_probe.py cpu --pids apiserver=PID,kubelet=PID --seconds 60 \
      [--server URL --dir C]

--dir is a `cube pki init` directory: pki/ca.crt and admin.conf (its embedded
client certificate and key are written beside it as admin-probe.{crt,key}).
"""
import argparse
import base64
import http.client
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the API -------------------------------------------------------------------------


def admin_creds(d):
    """Write the admin client certificate and key out of admin.conf."""
    conf = open(os.path.join(d, "admin.conf")).read()
    out = {}
    for field, suffix in (("client-certificate-data", "crt"), ("client-key-data", "key")):
        m = re.search(r"^\s*%s:\s*(\S+)" % field, conf, re.M)
        if not m:
            sys.exit("hollow_probe: no %s in %s/admin.conf" % (field, d))
        path = os.path.join(d, "admin-probe." + suffix)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(m.group(1)))
        out[suffix] = path
    return out


class Api:
    def __init__(self, server, d):
        u = urllib.parse.urlsplit(server)
        self.host, self.port = u.hostname, u.port or 443
        creds = admin_creds(d)
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "pki", "ca.crt"))
        self.ctx.load_cert_chain(creds["crt"], creds["key"])

    def conn(self, timeout=30):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                           timeout=timeout)

    def get(self, path, raw=False):
        c = self.conn()
        try:
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError("GET %s: %d %s" % (path, r.status, body[:200]))
            return body if raw else json.loads(body)
        finally:
            c.close()


NODES = "/api/v1/nodes"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def node_ready(n):
    for c in (n.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def csr_state(o):
    st = o.get("status") or {}
    approved = any(c.get("type") == "Approved" and c.get("status", "True") == "True"
                   for c in st.get("conditions") or [])
    return approved, bool(st.get("certificate"))


def csr_node(o):
    """The node a kubelet client CSR is for: its subject's system:node:<name>."""
    try:
        pem = base64.b64decode(o["spec"]["request"]).decode()
        der = base64.b64decode("".join(l for l in pem.splitlines() if "-----" not in l))
        i = der.find(b"system:node:")
        if i > 0:
            return der[i + 12:i + der[i - 1]].decode(errors="replace")
    except (KeyError, ValueError, UnicodeDecodeError):
        pass
    return o.get("metadata", {}).get("name")


class Watch(threading.Thread):
    """One watch stream; on_event(type, object, t_receipt). Re-lists on 410."""

    def __init__(self, api, path, on_event, on_list):
        super().__init__(daemon=True)
        self.api, self.path, self.on_event, self.on_list = api, path, on_event, on_list
        self.rv = None
        self.started = threading.Event()
        self.errors = 0

    def relist(self):
        lst = self.api.get(self.path)
        self.rv = lst["metadata"]["resourceVersion"]
        t = time.time()
        for o in lst.get("items") or []:
            self.on_list(o, t)

    def run(self):
        while True:
            try:
                if self.rv is None:
                    self.relist()
                c = self.api.conn(timeout=None)
                c.request("GET", "%s?watch=true&allowWatchBookmarks=true&resourceVersion=%s"
                          % (self.path, self.rv))
                r = c.getresponse()
                if r.status != 200:
                    raise RuntimeError("watch %s: %d" % (self.path, r.status))
                self.started.set()
                while True:
                    line = r.readline()
                    if not line:
                        break
                    t = time.time()
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        self.rv = None  # 410 Gone: list again
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self.rv = rv
                    if ev.get("type") != "BOOKMARK":
                        self.on_event(ev.get("type"), obj, t)
                c.close()
            except (OSError, RuntimeError, http.client.HTTPException, ValueError) as e:
                self.errors += 1
                print("# watch %s: %s; again in 0.5 s" % (self.path, e), flush=True)
                time.sleep(0.5)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def cmd_ready(a):
    api = Api(a.server, a.dir)
    lock = threading.Lock()
    ready_at, csr_created, csr_approved, csr_issued = {}, {}, {}, {}
    csr_for = {}

    def node_ev(typ, n, t):
        name = n["metadata"]["name"]
        with lock:
            if typ in ("ADDED", "MODIFIED") and node_ready(n):
                ready_at.setdefault(name, t)
            elif typ == "DELETED":
                ready_at.pop(name, None)

    def csr_ev(typ, o, t):
        uid = o["metadata"]["uid"]
        approved, issued = csr_state(o)
        with lock:
            if typ == "DELETED":
                return
            csr_created.setdefault(uid, t)
            if uid not in csr_for:
                csr_for[uid] = csr_node(o)
            if approved:
                csr_approved.setdefault(uid, t)
            if issued:
                csr_issued.setdefault(uid, t)

    nw = Watch(api, NODES, node_ev, lambda o, t: node_ev("ADDED", o, t))
    cw = Watch(api, CSRS, csr_ev, lambda o, t: csr_ev("ADDED", o, t))
    nw.start()
    cw.start()
    if not (nw.started.wait(30) and cw.started.wait(30)):
        sys.exit("hollow_probe: the watches did not start")
    if a.ready_file:
        open(a.ready_file, "w").close()
    # The runner writes t0 (epoch seconds) just before it starts the kubelets.
    while not (os.path.exists(a.t0_file) and os.path.getsize(a.t0_file) > 0):
        time.sleep(0.01)
    t0 = float(open(a.t0_file).read().split()[0])
    tcp0 = tcp_opens()
    m0, h0 = scrape(api)
    cpu0 = {}
    for item in (a.pids.split(",") if a.pids else []):
        name, pid = item.split("=")
        # name=@FILE: a process started at t0 (its pid written to FILE): from 0
        cpu0[name] = (pid, 0 if pid.startswith("@") else proc_ticks(int(pid))[1])
    deadline = t0 + a.timeout
    last, last_shown = None, 0.0
    series = []
    cpu_series = []  # (t, {name: ticks}) every 0.5 s: who is busy when
    while True:
        now = time.time()
        with lock:
            r, c, i = len(ready_at), len(csr_created), len(csr_issued)
        series.append((now - t0, r, c, i))
        cpu_series.append((now, sample_ticks(cpu0)))
        if a.verbose and (r, i) != last and now - last_shown >= 2:
            print("# t=%6.1fs ready %d/%d, CSRs created %d, issued %d"
                  % (now - t0, r, a.nodes, c, i), flush=True)
            last, last_shown = (r, i), now
        if r >= a.nodes or now > deadline:
            break
        time.sleep(0.5)
    with lock:
        ready = dict(ready_at)
        created, approved, issued = dict(csr_created), dict(csr_approved), dict(csr_issued)
        node_of = dict(csr_for)

    t_end = time.time()
    tcp1 = tcp_opens()
    cpu_line = []
    for name, (pid, ticks0) in cpu0.items():
        try:
            p = int(open(pid[1:]).read()) if pid.startswith("@") else int(pid)
            cpu_line.append("%s %.1fs (%.2f cores)" % (
                name, (proc_ticks(p)[1] - ticks0) / CLK_TCK,
                (proc_ticks(p)[1] - ticks0) / CLK_TCK / (t_end - t0)))
        except (OSError, ValueError):
            pass
    m1, h1 = scrape(api)
    # A final LIST says what the API holds, independently of the watches.
    nodes = api.get(NODES).get("items") or []
    csrs = api.get(CSRS).get("items") or []
    listed_ready = sum(node_ready(n) for n in nodes)
    listed_issued = sum(csr_state(o)[1] for o in csrs)

    all_ready = len(ready) >= a.nodes
    t_all = max(ready.values()) - t0 if all_ready else float("nan")
    print("RESULT nodes=%d ready=%d/%d time_to_all_ready=%s first_ready=%.2fs listed_nodes=%d "
          "listed_ready=%d" % (a.nodes, len(ready), a.nodes,
                               "%.2fs" % t_all if all_ready else "NOT-REACHED(%ds)" % a.timeout,
                               min(ready.values()) - t0 if ready else float("nan"),
                               len(nodes), listed_ready))
    # Issue rate: issued certificates per 1 s bucket from t0.
    buckets = {}
    for t in issued.values():
        buckets[int(t - t0)] = buckets.get(int(t - t0), 0) + 1
    span_end = (max(ready.values()) if all_ready else time.time()) - t0
    if issued:
        first, lastt = min(issued.values()) - t0, max(issued.values()) - t0
        peak_s, peak = max(buckets.items(), key=lambda kv: kv[1])
        print("RESULT csrs created=%d approved=%d issued=%d listed_issued=%d "
              "issued_per_s_peak=%d (second %d) issued_per_s_avg_to_ready=%.1f "
              "issued_per_s_avg_while_issuing=%.1f (%.2fs..%.2fs)"
              % (len(created), len(approved), len(issued), listed_issued, peak, peak_s,
                 len(issued) / span_end if span_end > 0 else float("nan"),
                 len(issued) / (lastt - first) if lastt > first else float("nan"),
                 first, lastt))
    else:
        print("RESULT csrs created=%d approved=%d issued=0 listed_issued=%d"
              % (len(created), len(approved), listed_issued))
    # Where a node's time went (per CSR, matched to its node by the subject).
    ready_by_node = {n: t for n, t in ready.items()}
    ph = {"t0->csr": [], "csr->approved": [], "approved->issued": [], "issued->ready": []}
    for uid, tc in created.items():
        ph["t0->csr"].append(tc - t0)
        if uid in approved:
            ph["csr->approved"].append(approved[uid] - tc)
            if uid in issued:
                ph["approved->issued"].append(issued[uid] - approved[uid])
        n = node_of.get(uid)
        if uid in issued and n in ready_by_node:
            ph["issued->ready"].append(ready_by_node[n] - issued[uid])
    print("RESULT phases (p50 / p90 / max, s): " + "; ".join(
        "%s %.2f / %.2f / %.2f" % (k, pct(v, 50), pct(v, 90), max(v) if v else float("nan"))
        for k, v in ph.items()))
    if cpu_line:
        print("RESULT cpu t0..all-ready (%.1fs): %s" % (t_end - t0, ", ".join(cpu_line)))
    print("RESULT tcp connections opened on the machine t0..all-ready: %d" % (tcp1 - tcp0))
    print("RESULT latency t0..all-ready: " + latency_line(h0, h1, max(10, a.nodes // 10)))
    # Cores used by each process, per second from t0: who is saturated when.
    if cpu0 and len(cpu_series) > 2:
        names = list(cpu0)
        rows = []
        prev_t, prev = t0, {n: (0 if cpu0[n][0].startswith("@") else cpu0[n][1]) for n in names}
        for t, ticks in cpu_series[2::2]:
            if not ticks:
                continue
            rows.append("%.0f-%.0fs %s" % (prev_t - t0, t - t0, " ".join(
                "%.2f" % ((ticks.get(n, prev.get(n, 0)) - prev.get(n, 0)) / CLK_TCK / (t - prev_t))
                for n in names)))
            prev_t, prev = t, {n: ticks.get(n, prev.get(n, 0)) for n in names}
        print("# cores per second (%s): %s" % (" ".join(names), ", ".join(rows)))
    # A coarse timeline, one line per ~10 % of the run.
    step = max(1, len(series) // 10)
    print("# timeline (s: ready, CSRs created, issued): " + ", ".join(
        "%.1f: %d %d %d" % s for s in series[::step] + [series[-1]]))
    print("# issued per second from t0: " + " ".join(
        "%d" % buckets.get(s, 0) for s in range(int(span_end) + 1)))
    if nw.errors or cw.errors:
        print("# watch reconnects: nodes %d, csrs %d" % (nw.errors, cw.errors))
    return 0 if all_ready else 1


# ---- CPU and memory ------------------------------------------------------------------


def proc_ticks(pid):
    """utime+stime of the process and of each thread: {tid: ticks}, total."""
    threads = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            s = open("/proc/%d/task/%s/stat" % (pid, tid)).read()
        except OSError:
            continue
        f = s[s.rindex(")") + 2:].split()
        threads[int(tid)] = int(f[11]) + int(f[12])
    s = open("/proc/%d/stat" % pid).read()
    f = s[s.rindex(")") + 2:].split()
    return threads, int(f[11]) + int(f[12])


def machine_ticks():
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]
    return sum(v[:3]) + sum(v[5:8]), v[3] + v[4]  # busy, idle


def sample_ticks(cpu0):
    """{name: total ticks} for the processes given to `ready --pids`."""
    out = {}
    for name, (pid, _) in cpu0.items():
        try:
            p = int(open(pid[1:]).read()) if pid.startswith("@") else int(pid)
            out[name] = proc_ticks(p)[1]
        except (OSError, ValueError):
            pass
    return out


def tcp_opens():
    """Passive TCP opens on the whole machine (/proc/net/snmp): accepted connections."""
    lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Tcp:")]
    return int(lines[1][lines[0].index("PassiveOpens")])


def vmrss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def scrape(api):
    """apiserver_request_total as {(verb, resource, subresource, code): n}, and
    apiserver_request_duration_seconds as {(verb, resource, subresource):
    {"sum": s, "count": n, le: cumulative n}}."""
    out, hist = {}, {}
    text = api.get("/metrics", raw=True).decode()
    for m in re.finditer(r'^apiserver_request_total\{([^}]*)\} (\S+)$', text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        k = (lab.get("verb"), lab.get("resource"), lab.get("subresource"), lab.get("code"))
        out[k] = out.get(k, 0) + float(m.group(2))
    for m in re.finditer(r'^apiserver_request_duration_seconds_(bucket|sum|count)\{([^}]*)\} (\S+)$',
                         text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        h = hist.setdefault((lab.get("verb"), lab.get("resource"), lab.get("subresource")), {})
        key = float(lab["le"]) if m.group(1) == "bucket" else m.group(1)
        h[key] = h.get(key, 0) + float(m.group(3))
    return out, hist


def hist_quantile(h, q):
    """The upper bound of the bucket holding quantile q (as Prometheus would, coarsely)."""
    n = h.get("count", 0)
    for le in sorted(k for k in h if not isinstance(k, str)):
        if h[le] >= q * n:
            return le
    return float("inf")


def latency_line(hist0, hist1, min_count):
    """Requests per (verb, resource) between two scrapes: count, mean, p50/p99 bucket bounds."""
    rows = []
    for k, h1 in hist1.items():
        h0 = hist0.get(k, {})
        d = {kk: v - h0.get(kk, 0) for kk, v in h1.items()}
        if d.get("count", 0) >= min_count and k[0] != "WATCH":
            rows.append((d["count"], "%s %s%s n=%d mean=%.1fms p50<=%gms p99<=%gms" % (
                k[0] or "(non-resource)", k[1], "/" + k[2] if k[2] else "", d["count"],
                1000.0 * d["sum"] / d["count"], 1000 * hist_quantile(d, 0.5),
                1000 * hist_quantile(d, 0.99))))
    return "; ".join(r for _, r in sorted(rows, reverse=True))


def group_ticks(pids):
    """proc_ticks of a group of processes (a+b+c), as one."""
    threads, total = {}, 0
    for pid in pids:
        t, n = proc_ticks(pid)
        threads.update(t)
        total += n
    return threads, total


def cmd_cpu(a):
    # name=PID, or name=PID+PID+... for processes counted as one (the
    # kubelet processes a size is split over).
    pids = []
    for item in a.pids.split(","):
        name, pid = item.split("=")
        pids.append((name, [int(p) for p in pid.split("+")]))
    api = Api(a.server, a.dir) if a.server else None
    m0, h0 = scrape(api) if api else ({}, {})
    tcp0 = tcp_opens()
    b0, i0 = machine_ticks()
    p0 = {name: group_ticks(pid) for name, pid in pids}
    w0 = time.time()
    peak_rss = {name: 0 for name, _ in pids}
    while time.time() < w0 + a.seconds:
        time.sleep(min(1.0, max(0.0, w0 + a.seconds - time.time())))
        for name, pid in pids:
            peak_rss[name] = max(peak_rss[name], sum(vmrss_kib(p) for p in pid))
    w = time.time() - w0
    b1, i1 = machine_ticks()
    p1 = {name: group_ticks(pid) for name, pid in pids}
    m1, h1 = scrape(api) if api else ({}, {})
    tcp1 = tcp_opens()
    ours = 0.0
    for name, pid in pids:
        (t0, s0), (t1, s1) = p0[name], p1[name]
        cores = (s1 - s0) / CLK_TCK / w
        ours += cores
        per = sorted(((t1[t] - t0.get(t, 0)) / CLK_TCK / w, t) for t in t1)
        busy = ["%.3f" % c for c, _ in reversed(per) if c >= 0.0005]
        print("RESULT cpu %s pid=%s cores=%.3f (threads: %s) VmRSS=%.1fMiB" %
              (name, "+".join(map(str, pid)), cores, " ".join(busy) or "idle",
               sum(vmrss_kib(p) for p in pid) / 1024.0))
    machine = (b1 - b0) / CLK_TCK / w
    print("RESULT cpu window=%.1fs machine_busy=%.2f cores of %d, other_processes=%.2f cores"
          % (w, machine, os.cpu_count(), max(0.0, machine - ours)))
    if api:
        rates = {}
        for k, v in m1.items():
            d = v - m0.get(k, 0)
            if d > 0:
                rates[k] = d / w
        total = sum(rates.values())
        print("RESULT requests %.1f/s: %s" % (total, ", ".join(
            "%s %s%s %s %.1f/s" % (k[0] or "(non-resource)", k[1], "/" + k[2] if k[2] else "",
                                  k[3], v)
            for k, v in sorted(rates.items(), key=lambda kv: -kv[1]))))
        print("RESULT latency in the window: " + latency_line(h0, h1, 10))
        print("RESULT tcp connections opened on the machine in the window: %d (%.1f/s)"
              % (tcp1 - tcp0, (tcp1 - tcp0) / w))
        bad = {k: v for k, v in rates.items() if not k[3].startswith("2")}
        if bad:
            print("# non-2xx answers in the window: " + ", ".join(
                "%s %s %s %.2f/s" % (k[0], k[1], k[3], v) for k, v in bad.items()))
        return total
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("ready")
    r.add_argument("--server", required=True)
    r.add_argument("--dir", required=True)
    r.add_argument("--nodes", type=int, required=True)
    r.add_argument("--t0-file", required=True)
    r.add_argument("--ready-file")
    r.add_argument("--timeout", type=float, default=600)
    r.add_argument("--pids", help="name=pid or name=@pidfile (started at t0), comma-separated")
    r.add_argument("-v", "--verbose", action="store_true")
    c = sub.add_parser("cpu")
    c.add_argument("--pids", required=True, help="name=pid,name=pid")
    c.add_argument("--seconds", type=float, default=60)
    c.add_argument("--server")
    c.add_argument("--dir")
    a = p.parse_args()
    if a.cmd == "ready":
        return cmd_ready(a)
    cmd_cpu(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
