"""`cube demo` and `cube scenario`: the seeds' scenario 1 and recovery plan 1
on a fresh cluster in a process of its own, with the timeline, the runbook's
commands and their real output, every measured timing checked against the
cluster's timers, and a self-contained HTML report; then the other plans and
the failure table's rows, each as a scenario that must pass.
"""

import os
import re
import struct
import xml.dom.minidom
import zlib

import pytest

CHROMIUM = "/usr/bin/chromium"


def png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and ctype in (2, 6) and not interlace, ihdr
    bpp = 4 if ctype == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def test_demo_plays_rotation_scenario_1_and_plan_1(cube, tmp, run):
    report = tmp / "demo.html"
    r = run(cube, "demo", "--data-dir", tmp / "demo", "--report", report, check=False,
            timeout=180)
    out = r.stdout
    assert r.returncode == 0, out[-4000:] + r.stderr
    assert re.search(r"^demo: PASS \((\d+)/\1 expectations held\)", out, re.M), out[-3000:]
    # The live timeline, as it happened.
    for line in (r"t\+\s*[\d.]+s\s+node-1\s+Ready=Unknown",
                 r"t\+\s*[\d.]+s\s+node-1\s+taint node.kubernetes.io/unreachable:NoSchedule added",
                 r"t\+\s*[\d.]+s\s+node-1\s+taint node.kubernetes.io/unreachable:NoExecute added",
                 r"TaintManagerEviction: Marking for deletion Pod default/web-",
                 r"node-csr-\S+\s+created by system:bootstrap:",
                 r"t\+\s*[\d.]+s\s+node-1\s+Ready=True"):
        assert re.search(line, out), line
    # Measured against the configured timers: a 5 s grace checked every
    # 500 ms (expected: grace + half a period), 8 s tolerations.
    m = re.search(r"PASS  node-1 Ready=Unknown after its last Lease renewal .*measured "
                  r"([\d.]+)s, expected 5.2s", out)
    assert m and 4.0 <= float(m.group(1)) <= 6.0, out[-3000:]
    m = re.search(r"PASS  pods evicted after the NoExecute taint .*measured ([\d.]+)s, "
                  r"expected 8.0s", out)
    assert m and 7.0 <= float(m.group(1)) <= 9.0, out[-3000:]
    # The runbook's commands ran, with their real output.
    assert re.search(r"\$ kubectl describe node node-1 \| grep -A5 Taints\n\s+Taints:\s+"
                     r"node.kubernetes.io/unreachable:NoExecute", out), out
    assert "x509: certificate has expired or is not yet valid" in out
    assert "rotateCertificates: false" in out
    assert "untolerated taint {node.kubernetes.io/unreachable: }" in out

    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and "PASS:" in html
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    doc = xml.dom.minidom.parseString(svg)
    rects = doc.getElementsByTagName("rect")
    # A lane per node; node-1's Unknown stretch and its taints are drawn.
    assert any(r.getAttribute("fill") == "#ef6c00" for r in rects)
    assert any(r.getAttribute("fill") == "#6a1b9a" for r in rects)
    assert len(doc.getElementsByTagName("polyline")) == 3
    assert "kubectl get nodes" in html and "FAIL</td>" not in html

    # As a person opens it: headless Chromium draws the timeline, with no
    # console errors.
    if not os.path.exists(CHROMIUM):
        pytest.skip("no /usr/bin/chromium (scripts/deps.sh installs it)")
    shot = tmp / "report.png"
    r = run(CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", "--window-size=1200,700",
            f"--screenshot={shot}", f"file://{report}", check=False, timeout=90,
            env={**os.environ, "HOME": str(tmp / "chromium-home")})
    assert shot.exists(), r.stderr[-2000:]
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l]
    assert not console, console
    w, h, rows = png_pixels(shot)
    near = lambda p, q: all(abs(a - b) <= 12 for a, b in zip(p, q))  # noqa: E731
    unknown = sum(near(p, (0xef, 0x6c, 0x00)) for row in rows for p in row)
    ready = sum(near(p, (0x2e, 0x7d, 0x32)) for row in rows for p in row)
    noexecute = sum(near(p, (0x6a, 0x1b, 0x9a)) for row in rows for p in row)
    # node-1's Unknown stretch, three nodes' Ready lanes, its NoExecute bar.
    assert unknown > 2000 and ready > 20000 and noexecute > 500, (unknown, ready, noexecute)


def test_scenario_list_and_errors(cube, tmp, run):
    out = run(cube, "scenario", "list").stdout
    for name in ("expired-client-cert", "plan-1", "plan-2", "plan-3", "ca-mismatch",
                 "rbac-removal", "expire-all"):
        assert re.search(rf"^{name}\s", out, re.M), out
    bad = run(cube, "scenario", "run", "nope", check=False)
    assert bad.returncode == 2 and 'no scenario "nope"' in bad.stderr, bad.stderr
    bad = run(cube, "scenario", "run", "plan-1", "--timings", "slow", check=False)
    assert bad.returncode == 2 and "compressed or upstream" in bad.stderr, bad.stderr
    # A data dir that is not a previous scenario's is never emptied.
    keep = tmp / "mine"
    keep.mkdir()
    (keep / "precious").write_text("x")
    bad = run(cube, "scenario", "run", "plan-1", "--data-dir", keep, check=False)
    assert bad.returncode == 1 and "is not a previous scenario's data dir" in bad.stderr
    assert (keep / "precious").read_text() == "x"


# What each scenario must show besides passing: a line of its own output.
SCENARIOS = {
    "plan-2": "PASS  no CSR: the certificate came from the CA directly: ",
    "plan-3": "PASS  the seeds' NoExecute toleration alone leaves the pod Pending: not bound",
    "ca-mismatch": "PASS  cube doctor names the foreign CA: ",
    "rbac-removal": "PASS  cube doctor names the missing binding: ",
    "expire-all": "PASS  no pod evicted: master disruption mode: 0 Terminating",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_failure_table_and_plans(cube, tmp, run, name):
    bindir = os.path.dirname(cube)
    p = run(cube, "scenario", "run", name, "-q", "--data-dir", tmp / name,
            env={"PATH": f"{bindir}:{os.environ['PATH']}"}, check=False, timeout=240)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr
    assert re.search(rf"^{name}: PASS \((\d+)/\1 expectations held\)", p.stdout, re.M), \
        p.stdout[-3000:]
    assert SCENARIOS[name] in p.stdout, p.stdout[-3000:]
    assert "FAIL" not in p.stdout
