"""`cube up --kubelet-processes`: the hollow kubelets in child processes
("kubelet shards"), each `cube kubelet --hollow-nodes M --hollow-first-index
K` with its own open-files limit, supervised by `cube up`.

The nodes are the same nodes: named node-0..node-N-1 across the processes,
Ready, reachable by `cube fault` through the supervisor's socket (which asks
the process that runs the node), restarted 10 s after their process dies,
and gone with `cube up`. Small clusters stay in one process, as before.

Timings are compressed as in test_fault.py: Leases renewed every second, a
6 s grace period.
"""

import json
import os
import re
import resource
import signal
import socket
import subprocess
import time

import pytest

from test_up import Up, ready_nodes, vm_rss_mib, wait_for

FAST = ("--node-monitor-period", "1s", "--node-monitor-grace-period", "6s",
        "--node-lease-duration-seconds", "4", "--node-status-update-frequency", "1s")
SIX = {f"node-{i}" for i in range(6)}


def kubelet_children(pid):
    """{child pid: argv} of the `cube kubelet` processes whose parent is pid."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and len(argv) > 1 and argv[1] == "kubelet":
            out[int(d)] = argv
    return out


def flag(argv, name):
    for a in argv:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def shards(pid):
    """{first index: (pid, node count)} of pid's kubelet processes."""
    return {int(flag(a, "hollow-first-index")): (p, int(flag(a, "hollow-nodes")))
            for p, a in kubelet_children(pid).items()}


def klog_time(log, pattern):
    """The time (epoch s) of the first klog line matching pattern."""
    m = re.search(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+) .*" + pattern, log, re.M)
    assert m, pattern
    mon, day, hh, mm, ss = m.groups()
    t = time.localtime()
    return time.mktime((t.tm_year, int(mon), int(day), int(hh), int(mm), 0, 0, 0, -1)) + float(ss)


def supervisor(u, *words):
    """One request on cube up's control socket (control.h)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(u.data / "cube.sock"))
        s.sendall(json.dumps(list(words)).encode() + b"\n")
        return json.loads(s.makefile().readline())


def ready_status(u, node):
    out = u.kubectl("get", "node", node, "-o",
                    'jsonpath={.status.conditions[?(@.type=="Ready")].status}', check=False)
    return out.stdout.strip()


def fault(u, *args, check=True):
    return u.run(u.cube, "fault", "--data-dir", u.data, *args, check=check, timeout=60)


def stop_with_sigterm(u):
    u.proc.send_signal(signal.SIGTERM)
    rc = u.proc.wait(timeout=30)
    u.log.close()
    return rc


class Cluster(Up):
    """test_up's Up (kubectl, output, logs) with this test's private HOME,
    as the `run` fixture gives every command."""

    def __init__(self, cube, data, run, *extra):
        self.cube, self.data, self.run = cube, data, run
        self.log = open(data.parent / f"{data.name}.log", "ab")
        env = dict(os.environ, HOME=str(data.parent.parent / "home"), LC_ALL="C")
        env.pop("KUBECONFIG", None)
        env.pop("CUBE_CLOCK_OFFSET", None)
        self.proc = subprocess.Popen(
            [cube, "up", "--data-dir", str(data), "--port", "0", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)


@pytest.fixture
def up(cube, tmp, run):
    started = []

    def _start(*extra):
        u = Cluster(cube, tmp / "cluster", run, *extra)
        started.append(u)
        return u

    yield _start
    for u in started:
        if u.proc.poll() is None:
            u.proc.kill()
            u.proc.wait()


def test_kubelets_in_two_processes(up):
    u = up("--nodes", "6", "--kubelet-processes", "2", *FAST)
    wait_for(lambda: ready_nodes(u) == SIX, 40, "node-0..node-5 Ready")
    # Two children of cube up, three nodes each, in index order.
    kids = wait_for(lambda: (lambda s: len(s) == 2 and s)(shards(u.proc.pid)), 10,
                    "two kubelet processes")
    assert {k: n for k, (_, n) in kids.items()} == {0: 3, 3: 3}, kids
    assert "kubelets in 2 processes of up to 3 nodes" in u.output(), u.output()
    # The memory line adds the two processes to cube up's own, as /proc has them.
    m = wait_for(lambda: re.search(
        r"^  memory: ([\d.]+) MiB resident in all: this process ([\d.]+) MiB, "
        r"2 kubelet processes ([\d.]+) MiB$", u.output(), re.M), 10, "the memory line")
    total, own, kubelets = map(float, m.groups())
    assert abs(total - own - kubelets) < 0.15, m.group(0)
    assert 0.5 < own / vm_rss_mib(u.proc.pid) < 2, m.group(0)
    assert 0.5 < kubelets / sum(vm_rss_mib(p) for p, _ in kids.values()) < 2, m.group(0)
    for first, (pid, _) in kids.items():
        argv = kubelet_children(u.proc.pid)[pid]
        assert flag(argv, "control-socket") == str(u.data / f"kubelets-{first // 3}.sock")
        assert flag(argv, "node-lease-duration-seconds") == "4", argv
    # The second process started only once the first one's nodes had their
    # client certificates (one bootstrap storm at a time: the fd budget).
    started = klog_time(u.logs("cube"), r'"Started kubelet process" process="kubelets-1"')
    for i in range(3):
        pem = u.data / "nodes" / f"node-{i}" / "pki" / "kubelet-client-current.pem"
        assert os.lstat(pem).st_mtime <= started, (i, os.lstat(pem).st_mtime, started)
    # Each process logs to its own file; each node still to its kubelet.log.
    log1 = (u.data / "logs" / "kubelets-1.log").read_text(errors="replace")
    assert 'node="node-4"' in log1 and 'node="node-1"' not in log1
    assert 'node="node-4"' in (u.data / "nodes" / "node-4" / "kubelet.log").read_text()

    # The supervisor's status: both processes' nodes, in order.
    st = supervisor(u, "status")
    assert [n["name"] for n in st["nodes"]] == [f"node-{i}" for i in range(6)], st
    assert all(n["active"] for n in st["nodes"]), st

    # `cube logs kubelet`: each kubelet process's own log, in order.
    out = u.run(u.cube, "logs", "--data-dir", u.data, "kubelet").stdout
    firsts = [(u.data / "logs" / f"kubelets-{i}.log").read_text().splitlines()[0]
              for i in (0, 1)]
    assert out.startswith(firsts[0] + "\n") and firsts[1] in out, out[:2000]
    assert out.index(firsts[1]) > out.index(firsts[0])

    # A partition of a node of the second process: its Lease stops, the
    # node goes Unknown; its neighbour in the same process stays Ready.
    fault(u, "partition", "node-4")
    wait_for(lambda: ready_status(u, "node-4") == "Unknown", 30, "node-4 Ready=Unknown")
    assert ready_status(u, "node-3") == "True"
    kubelet_log = (u.data / "nodes" / "node-4" / "kubelet.log").read_text(errors="replace")
    assert "connect: network is unreachable" in kubelet_log
    assert [n["partitioned"] for n in supervisor(u, "status")["nodes"]] == \
        [False, False, False, False, True, False]
    fault(u, "heal", "node-4")
    wait_for(lambda: ready_status(u, "node-4") == "True", 30, "node-4 Ready after heal")
    bad = fault(u, "partition", "node-9", check=False)
    assert bad.returncode == 1 and 'no kubelet for node "node-9"' in bad.stderr, bad.stderr

    # kill -9 of the first process while node-1 is partitioned and node-2's
    # clock is skewed: logged, started again 10 s later, its nodes Ready
    # again — but node-1 still cut off and node-2's clock still ahead, as
    # faults.json says (the process's own state is gone with it).
    fault(u, "partition", "node-1")
    fault(u, "clock-skew", "node-2", "90s")
    old = kids[0][0]
    os.kill(old, signal.SIGKILL)
    # One look at the children per try: the process may go between two.
    new = wait_for(lambda: (lambda s: 0 in s and s[0][0] != old and s[0][0])(shards(u.proc.pid)),
                   25, "the first kubelet process started again")
    assert new != old
    assert re.search(r'^E.*"Kubelet process exited; restarting it" process="kubelets-0" '
                     rf'pid={old} status="signal: killed"', u.logs("cube"), re.M), \
        u.logs("cube")[-3000:]

    def refaulted():
        # The restarted process's nodes are missing from the status until
        # it answers the supervisor.
        st = {n["name"]: n for n in supervisor(u, "status")["nodes"]}
        if not {"node-0", "node-1", "node-2"} <= st.keys():
            return False
        return st["node-1"]["partitioned"] and st["node-2"]["clockSkewSeconds"] == 90 and \
            not st["node-0"]["partitioned"]
    wait_for(refaulted, 30, "node-1 partitioned and node-2 skewed again after the restart")
    for node, kind in (("node-1", "partition"), ("node-2", "clock-skew")):
        assert re.search(r'^I.*"Put a fault back on a restarted kubelet process" '
                         rf'process="kubelets-0" fault="{kind}" node="{node}"',
                         u.logs("cube"), re.M), u.logs("cube")[-3000:]
    fault(u, "heal", "node-1")
    fault(u, "clock-skew", "node-2", "0")
    wait_for(lambda: ready_nodes(u) == SIX and
             all(n["active"] for n in supervisor(u, "status")["nodes"]), 40,
             "node-0..node-5 Ready after the restart")

    # SIGTERM: cube up stops its kubelet processes and exits 0.
    pids = [p for p, _ in shards(u.proc.pid).values()]
    assert stop_with_sigterm(u) == 0
    for p in pids:
        assert not os.path.exists(f"/proc/{p}"), f"kubelet process {p} outlived cube up"
    assert not list(u.data.glob("kubelets-*.sock"))


def test_small_cluster_stays_in_one_process(up):
    u = up()
    wait_for(lambda: ready_nodes(u) == {"node-0", "node-1", "node-2"}, 30, "3 Ready nodes")
    assert kubelet_children(u.proc.pid) == {}
    assert "kubelets in" not in u.output()
    assert stop_with_sigterm(u) == 0


def test_limits_refused_at_once(cube, tmp):
    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (4000, 4000))

    def up(*args):
        return subprocess.run([cube, "up", "--port", "0", "--data-dir", tmp / "c", *args],
                              capture_output=True, text=True, timeout=30, preexec_fn=low,
                              env=dict(os.environ, HOME=str(tmp)))
    # One process for 1,500 nodes: 256 + 1,500 x 3 is more than 4,000.
    r = up("--nodes", "1500", "--kubelet-processes", "1")
    assert r.returncode == 1, r.stderr
    assert "each kubelet process (cube kubelet --hollow-nodes 1500) needs 4756 file " \
           "descriptors" in r.stderr, r.stderr
    assert "or more kubelet processes: --kubelet-processes 2 fits the limit now" in r.stderr
    # cube up's own: 256 + 3,000 ends at rest + the second connection of the
    # two processes' 1,500 nodes bootstrapping.
    r = up("--nodes", "3000", "--kubelet-processes", "2")
    assert r.returncode == 1 and "cube up --nodes 3000 (its kubelets in 2 processes) needs " \
        "6256 file descriptors" in r.stderr, r.stderr
    assert "or run fewer nodes: --nodes 1872 fits the limit now" in r.stderr, r.stderr
    # Automatic: 2,500 nodes do not fit one process (256 + 2,500 x 5), nor
    # one kubelet process (256 + 2,500 x 3): three, of 834 nodes, whose
    # bootstrap still needs too many here; 748 fit, in one process.
    r = up("--nodes", "2500")
    assert r.returncode == 1 and "cube up --nodes 2500 (its kubelets in 3 processes) needs " \
        "4424 file descriptors" in r.stderr, r.stderr
    assert "or run fewer nodes: --nodes 748 fits the limit now" in r.stderr, r.stderr
    assert not (tmp / "c").exists()
    r = up("--kubelet-processes", "many")
    assert r.returncode == 2 and "--kubelet-processes: 0 (automatic) to 1024" in r.stderr
    r = subprocess.run([cube, "kubelet", "--control-socket", tmp / "k.sock"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--control-socket is for --hollow-nodes" in r.stderr, r.stderr
