#!/usr/bin/python3
"""scheduler_bench.py — the loading and measuring side of
bench/run-scheduler-bench.sh. Python 3 standard library only.

  scheduler_bench.py load --server URL --dir C --nodes 5000 --pods 10000
      creates N Ready Nodes (4 CPU, 16 GiB, 110 pods each, no taints) and P
      pending pods (100m CPU, 128 MiB) over several keep-alive connections.
  scheduler_bench.py watch --server URL --dir C --pods 10000 --t0-file F
      watches pods and prints when every one has spec.nodeName, the rate
      (pods/s) from the scheduler's start (the time in F) and per second.

--dir is a `cube pki init` directory (admin.conf's client certificate).
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


def creds(d):
    conf = open(os.path.join(d, "admin.conf")).read()
    out = {}
    for field, suffix in (("client-certificate-data", "crt"), ("client-key-data", "key")):
        m = re.search(r"^\s*%s:\s*(\S+)" % field, conf, re.M)
        path = os.path.join(d, "bench-admin." + suffix)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(m.group(1)))
        out[suffix] = path
    return out


def connect(server, d):
    c = creds(d)
    ctx = ssl.create_default_context(cafile=os.path.join(d, "pki", "ca.crt"))
    ctx.load_cert_chain(c["crt"], c["key"])
    u = urllib.parse.urlparse(server)
    return lambda: http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=120)


def post_all(new_conn, path, bodies, threads=8):
    def work(chunk):
        conn = new_conn()
        for b in chunk:
            conn.request("POST", path, body=json.dumps(b),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status != 201:
                sys.exit(f"POST {path}: {r.status}")
    chunks = [bodies[i::threads] for i in range(threads)]
    ts = [threading.Thread(target=work, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def load(a):
    new_conn = connect(a.server, a.dir)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"n{i:05d}", "labels": {
                  "kubernetes.io/hostname": f"n{i:05d}",
                  "topology.kubernetes.io/zone": f"z{i % 3}"}},
              "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                         "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True",
                                         "lastHeartbeatTime": now,
                                         "lastTransitionTime": now}]}}
             for i in range(a.nodes)]
    t = time.monotonic()
    post_all(new_conn, "/api/v1/nodes", nodes)
    print(f"RESULT created_nodes={a.nodes} seconds={time.monotonic() - t:.1f}", flush=True)
    # TaintNodesByCondition gave them not-ready:NoSchedule; these nodes are Ready.
    def untaint(chunk):
        conn = new_conn()
        for n in chunk:
            conn.request("PATCH", f"/api/v1/nodes/{n['metadata']['name']}",
                         body=json.dumps({"spec": {"taints": None}}),
                         headers={"Content-Type": "application/merge-patch+json"})
            r = conn.getresponse()
            r.read()
    ts = [threading.Thread(target=untaint, args=(nodes[i::8],)) for i in range(8)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:05d}"},
             "spec": {"containers": [{"name": "c", "image": "pause",
                                      "resources": {"requests": {"cpu": "100m",
                                                                 "memory": "128Mi"}}}]}}
            for i in range(a.pods)]
    t = time.monotonic()
    post_all(new_conn, "/api/v1/namespaces/default/pods", pods)
    print(f"RESULT created_pods={a.pods} seconds={time.monotonic() - t:.1f}", flush=True)


def watch(a):
    new_conn = connect(a.server, a.dir)
    conn = new_conn()
    conn.request("GET", "/api/v1/namespaces/default/pods")
    r = conn.getresponse()
    body = json.loads(r.read())
    bound = {p["metadata"]["name"] for p in body["items"] if p["spec"].get("nodeName")}
    rv = body["metadata"]["resourceVersion"]
    conn.request("GET", f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}")
    r = conn.getresponse()
    per_second = {}
    while len(bound) < a.pods:
        line = r.readline()
        if not line:
            sys.exit("watch ended")
        ev = json.loads(line)
        p = ev["object"]
        if p.get("spec", {}).get("nodeName") and p["metadata"]["name"] not in bound:
            bound.add(p["metadata"]["name"])
            s = int(time.time())
            per_second[s] = per_second.get(s, 0) + 1
    done = time.time()
    t0 = float(open(a.t0_file).read())
    rates = [per_second[s] for s in sorted(per_second)][1:-1] or list(per_second.values())
    print(f"RESULT bound={len(bound)} seconds_from_scheduler_start={done - t0:.2f} "
          f"pods_per_second={a.pods / (done - t0):.0f} peak_1s={max(rates)} "
          f"median_1s={sorted(rates)[len(rates) // 2]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=("load", "watch"))
    ap.add_argument("--server", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--t0-file")
    a = ap.parse_args()
    (load if a.cmd == "load" else watch)(a)


if __name__ == "__main__":
    main()
