"""Several `cube apiserver`s on one etcd (issue 12, item 2): each with its own
watch cache, all consistent — a write through one is seen by watches on the
other in revision order, a read with no resourceVersion through the other
sees it at once, concurrent writes through both are compare-and-swapped
(none lost, a stale resourceVersion refused on either), and what one
acknowledged survives its crash."""
import json
import threading

import pytest

from conftest import CubeAPIServer, Etcd

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def pair(cube, tmp_path):
    etcd = Etcd(tmp_path).start()
    parent = tmp_path / "servers"
    parent.mkdir()
    args = ("--etcd-servers", etcd.servers)
    # One cluster directory (one PKI), two processes on one etcd.
    a = CubeAPIServer(cube, parent, args).start()
    b = CubeAPIServer(cube, parent, args)
    b.port_file = b.dir / "port-b"
    b.log_path = b.dir / "apiserver-b.log"
    b.start()
    yield a, b, etcd
    for s in (a, b):
        s.stop()
    etcd.stop()


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data}


def test_a_write_through_one_is_watched_on_the_other_in_order(pair):
    a, b, _ = pair
    rv0 = b.request("GET", CMS).json()["metadata"]["resourceVersion"]
    got = {}

    def watch():
        got["r"] = b.request("GET", f"{CMS}?watch=1&resourceVersion={rv0}&timeoutSeconds=4",
                             timeout=15)
    t = threading.Thread(target=watch)
    t.start()
    written = []
    for i in range(20):
        r = a.request("POST", CMS, cm(f"w{i}", i=str(i)))
        assert r.status == 201, r
        written.append(int(r.json()["metadata"]["resourceVersion"]))
    t.join(20)
    events = [json.loads(line) for line in got["r"].text.splitlines() if line.strip()]
    seen = [(e["type"], e["object"]["metadata"]["name"],
             int(e["object"]["metadata"]["resourceVersion"])) for e in events]
    assert [s[1] for s in seen] == [f"w{i}" for i in range(20)], seen
    assert [s[2] for s in seen] == written, (seen, written)
    assert all(s[0] == "ADDED" for s in seen)


def test_reads_through_the_other_are_consistent(pair):
    a, b, _ = pair
    for i in range(30):
        r = a.request("POST", CMS, cm(f"r{i}"))
        assert r.status == 201, r
        # No resourceVersion: the latest — what A just acknowledged.
        g = b.request("GET", f"{CMS}/r{i}")
        assert g.status == 200, g
        assert g.json()["metadata"]["resourceVersion"] == r.json()["metadata"]["resourceVersion"]
        names = {o["metadata"]["name"] for o in b.request("GET", CMS).json()["items"]}
        assert f"r{i}" in names


def test_concurrent_writes_through_both_are_compare_and_swapped(pair):
    a, b, _ = pair
    assert a.request("POST", CMS, cm("shared", seed="x")).status == 201
    # A JSON patch adding a key through each server, 40 at once: every
    # one lands (a write that loses the compare is served again).
    errors = []

    def add(server, k):
        r = server.request("PATCH", f"{CMS}/shared", [{"op": "add", "path": f"/data/{k}",
                                                       "value": k}],
                           content_type="application/json-patch+json")
        if r.status != 200:
            errors.append(r)
    threads = [threading.Thread(target=add, args=((a, b)[i % 2], f"k{i}")) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    data = a.request("GET", f"{CMS}/shared").json()["data"]
    assert set(data) == {f"k{i}" for i in range(40)} | {"seed"}, data
    # An update built on a stale resourceVersion is refused on either server.
    obj = b.request("GET", f"{CMS}/shared").json()
    obj["data"]["x"] = "1"
    assert a.request("PUT", f"{CMS}/shared", obj).status == 200
    obj["data"]["x"] = "2"
    r = b.request("PUT", f"{CMS}/shared", obj)
    assert r.status == 409 and "the object has been modified" in r.json()["message"], r
    # Two creates of one name: one 201, one 409 AlreadyExists.
    results = []
    ts = [threading.Thread(target=lambda s=s: results.append(
        s.request("POST", CMS, cm("once")).status)) for s in (a, b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert sorted(results) == [201, 409], results


def test_what_one_acknowledged_survives_its_crash(pair):
    a, b, _ = pair
    rvs = {}
    for i in range(25):
        r = a.request("POST", CMS, cm(f"c{i}", v=str(i)))
        assert r.status == 201
        rvs[f"c{i}"] = r.json()["metadata"]["resourceVersion"]
    a.kill()
    items = b.request("GET", CMS).json()["items"]
    have = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items
            if o["metadata"]["name"].startswith("c")}
    assert have == rvs
    a.start()
    again = {o["metadata"]["name"] for o in a.request("GET", CMS).json()["items"]}
    assert set(rvs) <= again
