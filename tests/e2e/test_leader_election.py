"""Leader election of `cube controller-manager` and `cube scheduler` (issue 12,
item 3): two of each on one API server, client-go's Lease protocol and log
lines, a takeover when the leader dies, a leader that loses its lease exits
1, and the scheduler gives its lease up on SIGTERM. Durations compressed
(lease 3 s, renew deadline 2 s, retry 0.5 s); the defaults themselves are
pinned by test_leaderelection.c on the virtual clock."""
import json
import re
import signal
import subprocess
import time
from datetime import datetime, timezone

import pytest

from conftest import stop_process

KUBECTL = "/usr/bin/kubectl"
FAST = ["--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
        "--leader-elect-retry-period", "500ms"]
ACQUIRED = "successfully acquired lease kube-system/{}"


class Component:
    def __init__(self, cube, server, kind, name, *extra):
        conf = server.dir / ("controller-manager.conf" if kind == "controller-manager"
                             else "scheduler.conf")
        # Atomically: the other instance may be reading it right now.
        tmp = conf.with_suffix(".tmp")
        tmp.write_text(re.sub(r"(?m)^(\s*server:\s*).*$", rf"\g<1>{server.url}",
                              conf.read_text()))
        tmp.replace(conf)
        self.log_path = server.dir / f"{name}.log"
        argv = [str(cube), kind, "--kubeconfig", str(conf), "--secure-port", "0",
                "-v", "2", *FAST, *extra]
        if kind == "controller-manager":
            argv += ["--cluster-signing-cert-file", str(server.pki / "ca.crt"),
                     "--cluster-signing-key-file", str(server.pki / "ca.key")]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, env=server.env, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def components(cube, apiserver):
    started = []

    def _start(kind, name, *extra):
        c = Component(cube, apiserver, kind, name, *extra)
        started.append(c)
        return c
    yield _start
    for c in started:
        if c.proc.poll() is None:
            c.proc.kill()
            c.proc.wait(10)


def kubectl(server, *args, check=True):
    r = subprocess.run([KUBECTL, "--kubeconfig", str(server.admin_conf), *args],
                       env=server.env, capture_output=True, text=True, timeout=30)
    if check:
        assert r.returncode == 0, r
    return r


def lease(server, name):
    r = kubectl(server, "-n", "kube-system", "get", "lease", name, "-o", "json",
                check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def lease_versions(path):
    """The objects `kubectl get -w -o json` wrote so far, in order."""
    text, got, dec, at = path.read_text(errors="replace"), [], json.JSONDecoder(), 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return got
        try:
            obj, at = dec.raw_decode(text, at)
        except json.JSONDecodeError:
            return got  # a version still being written
        got.append(obj)


def leader_of(server, pair, name):
    """The one of pair that logged taking the lease (waits for one)."""
    def one():
        got = [c for c in pair if ACQUIRED.format(name) in c.log()]
        return got[0] if len(got) == 1 else None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if one():
            return one()
        time.sleep(0.05)
    pytest.fail("no leader: " + " | ".join(c.log()[-1500:] for c in pair))


def test_controller_managers_one_leads_the_other_takes_over(components, apiserver,
                                                            wait_until):
    a = components("controller-manager", "cm-a")
    b = components("controller-manager", "cm-b")
    first = leader_of(apiserver, (a, b), "kube-controller-manager")
    other = b if first is a else a
    wait_until(lambda: "attempting to acquire leader lease "
               "kube-system/kube-controller-manager..." in other.log(), 10)
    spec = lease(apiserver, "kube-controller-manager")["spec"]
    assert spec["leaseDurationSeconds"] == 3 and spec["leaseTransitions"] == 0, spec
    assert re.fullmatch(r"[^_]+_[0-9a-f-]{36}", spec["holderIdentity"]), spec
    # Only the leader runs the controllers.
    assert '"Starting certificate controller"' in first.log()
    assert '"Starting certificate controller"' not in other.log()
    events = kubectl(apiserver, "-n", "kube-system", "get", "events", "-o", "json").stdout
    msgs = [e["message"] for e in json.loads(events)["items"]
            if e["reason"] == "LeaderElection"]
    assert f"{spec['holderIdentity']} became leader" in msgs, msgs

    # The leader dies; the other waits out the lease it observed, then leads.
    first.proc.kill()
    first.proc.wait(10)
    died = time.monotonic()
    wait_until(lambda: ACQUIRED.format("kube-controller-manager") in other.log(), 15)
    took = time.monotonic() - died
    assert 1.0 < took < 3 + 2 * 1.1 + 2, took
    spec2 = lease(apiserver, "kube-controller-manager")["spec"]
    assert spec2["holderIdentity"] != spec["holderIdentity"], spec2
    assert spec2["leaseTransitions"] == 1, spec2
    wait_until(lambda: '"Starting certificate controller"' in other.log(), 10)
    rc = stop_process(other.proc, "cube controller-manager")
    assert rc == 0, other.log()[-2000:]


def test_a_leader_that_loses_its_lease_exits_1(components, apiserver, wait_until):
    cm = components("controller-manager", "cm-lost")
    wait_until(lambda: ACQUIRED.format("kube-controller-manager") in cm.log(), 15)
    # Another holder takes the Lease from under it and keeps renewing.
    obj = lease(apiserver, "kube-controller-manager")
    stop_at = time.monotonic() + 6
    while cm.proc.poll() is None and time.monotonic() < stop_at:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        kubectl(apiserver, "-n", "kube-system", "patch", "lease", "kube-controller-manager",
                "--type=merge", "-p", json.dumps(
                    {"spec": {"holderIdentity": "intruder", "renewTime": now}}))
        time.sleep(0.3)
    assert cm.proc.wait(10) == 1, cm.log()[-3000:]
    log = cm.log()
    assert ("failed to renew lease kube-system/kube-controller-manager: "
            "context deadline exceeded") in log, log[-3000:]
    assert '"leaderelection lost"' in log, log[-3000:]
    assert obj is not None


def test_scheduler_releases_its_lease_on_sigterm(components, apiserver, wait_until):
    # A long lease: the takeover is fast only because the lease is given up.
    slow = ["--leader-elect-lease-duration", "60s", "--leader-elect-renew-deadline", "2s",
            "--leader-elect-retry-period", "500ms"]
    a = components("scheduler", "sched-a", *slow)
    b = components("scheduler", "sched-b", *slow)
    first = leader_of(apiserver, (a, b), "kube-scheduler")
    other = b if first is a else a
    held = lease(apiserver, "kube-scheduler")["spec"]
    # The released record may live only until the other's next retry (0.5 s),
    # shorter than a kubectl GET on a busy machine: watch every version.
    seen_path = apiserver.dir / "lease-watch.json"
    with open(seen_path, "wb") as out, open(apiserver.dir / "lease-watch.err", "wb") as err:
        watch = subprocess.Popen([KUBECTL, "--kubeconfig", str(apiserver.admin_conf),
                                  "-n", "kube-system", "get", "lease", "kube-scheduler",
                                  "-w", "-o", "json"], env=apiserver.env, stdout=out,
                                 stderr=err, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: seen_path.stat().st_size > 0, 10)
        stopped = time.monotonic()
        assert stop_process(first.proc, "cube scheduler") == 0, first.log()[-2000:]
        assert '"Requested to terminate, exiting"' in first.log()
        wait_until(lambda: ACQUIRED.format("kube-scheduler") in other.log(), 10)
        assert time.monotonic() - stopped < 5
        wait_until(lambda: any(v["spec"].get("holderIdentity", "") not in
                               ("", held["holderIdentity"])
                               for v in lease_versions(seen_path)), 10,
                   lambda: seen_path.read_text(errors="replace")[-3000:])
    finally:
        watch.kill()
        watch.wait(10)
    specs = [v["spec"] for v in lease_versions(seen_path)]
    assert specs[0]["holderIdentity"] == held["holderIdentity"], specs
    # Given up: no holder, a one-second lease, transitions kept; then taken.
    released = [s for s in specs if s.get("holderIdentity", "") == ""]
    assert len(released) == 1, specs
    assert released[0]["leaseDurationSeconds"] == 1, specs
    assert released[0]["leaseTransitions"] == held.get("leaseTransitions", 0), specs
    taken = specs[specs.index(released[0]) + 1]
    assert taken["holderIdentity"] not in ("", held["holderIdentity"]), specs
    assert taken["leaseDurationSeconds"] == 60, specs
    events = kubectl(apiserver, "-n", "kube-system", "get", "events", "-o", "json").stdout
    sources = {e["source"].get("component") for e in json.loads(events)["items"]
               if e["reason"] == "LeaderElection"}
    assert sources == {"default-scheduler"}, sources


def test_bad_durations_are_refused(cube, run, apiserver):
    conf = apiserver.dir / "scheduler.conf"
    r = run(cube, "scheduler", "--kubeconfig", conf, "--leader-elect-lease-duration", "5s",
            "--leader-elect-renew-deadline", "10s", check=False)
    assert r.returncode == 2 and "leaseDuration must be greater than renewDeadline" in r.stderr
    r = run(cube, "controller-manager", "--kubeconfig", conf,
            "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "2s",
            check=False)
    assert r.returncode == 2 and \
        "renewDeadline must be greater than retryPeriod*JitterFactor" in r.stderr
    r = run(cube, "scheduler", "--kubeconfig", conf, "--leader-elect-resource-lock",
            "endpoints", check=False)
    assert r.returncode == 2 and 'resourceLock value must be "leases"' in r.stderr
