"""OpenAPI over HTTP: what kubectl's caches and clients rely on.

/openapi/v3 lists each group-version's document with its hash; asked with
that hash a document may be kept for good, with an old one it moves (301);
ETag and If-None-Match give 304; /openapi/v2 comes as JSON or as gnostic's
protobuf, with one ETag; media types nobody serves get 406; names that are
not a group-version are 404. Behaviour from kube-openapi's handler and
handler3 (the published documents' shapes are in tests/unit/test_openapi.c;
kubectl reading them is test_kubectl_skew.py).
"""

import hashlib

PB_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PB_V2_NEW = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
PB_V3 = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"


def get(server, path, accept="application/json", **headers):
    return server.request("GET", path, headers={"Accept": accept, **headers})


def test_v3_index_hashes_and_caching(apiserver):
    r = get(apiserver, "/openapi/v3")
    assert r.status == 200, r
    paths = r.json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/certificates.k8s.io/v1",
            "apis/coordination.k8s.io/v1", "apis/rbac.authorization.k8s.io/v1"} <= set(paths)
    # cube lists no CRDs and publishes no document for their group.
    assert "apis/apiextensions.k8s.io/v1" not in paths
    assert r.headers["cache-control"] == "no-cache, private"
    assert r.headers["etag"] == '"%s"' % hashlib.sha512(r.body).hexdigest().upper()

    url = paths["apis/apps/v1"]["serverRelativeURL"]
    path, _, query = url.partition("?")
    assert path == "/openapi/v3/apis/apps/v1"
    digest = query.removeprefix("hash=")
    doc = get(apiserver, url)
    assert doc.status == 200, doc
    # The hash is the SHA-512 of the bytes, in upper-case hex, as the ETag.
    assert digest == hashlib.sha512(doc.body).hexdigest().upper()
    assert doc.headers["etag"] == f'"{digest}"'
    assert doc.headers["cache-control"] == "public, immutable"
    assert "expires" in doc.headers and doc.headers["vary"] == "Accept"
    assert "io.k8s.api.apps.v1.Deployment" in doc.json()["components"]["schemas"]

    # Without a hash: may be cached, but must be asked again.
    plain = get(apiserver, path)
    assert plain.status == 200 and plain.body == doc.body
    assert plain.headers["cache-control"] == "no-cache, private"
    # An old hash moves to the current one.
    old = get(apiserver, path + "?hash=0123ABCD")
    assert old.status == 301, old
    assert old.headers["location"] == url
    # If-None-Match: nothing new.
    same = get(apiserver, path, **{"If-None-Match": f'"{digest}"'})
    assert same.status == 304 and same.body == b"", same


def test_v3_media_types_and_names(apiserver):
    # A client that takes only the protobuf form: cube makes v3 in JSON only.
    assert get(apiserver, "/openapi/v3/api/v1", accept=PB_V3).status == 406
    assert get(apiserver, "/openapi/v3/api/v1", accept="text/html").status == 406
    # One that prefers protobuf but takes JSON gets JSON.
    r = get(apiserver, "/openapi/v3/api/v1", accept=f"{PB_V3}, application/json;q=0.5")
    assert r.status == 200 and r.headers["content-type"] == "application/json", r
    assert get(apiserver, "/openapi/v3/api/v1", accept="*/*").status == 200
    for path in ("/openapi/v3/apis/apps/v2", "/openapi/v3/apis//v1", "/openapi/v3/v2",
                 "/openapi/v3/swagger", "/openapi/v3/index", "/openapi/v3/apis/apps/v1/x",
                 "/openapi/v3/api/"):
        assert get(apiserver, path).status == 404, path


def test_v2_json_and_protobuf(apiserver):
    js = get(apiserver, "/openapi/v2")
    assert js.status == 200, js
    assert js.headers["content-type"] == "application/json"
    doc = js.json()
    assert doc["swagger"] == "2.0"
    assert "io.k8s.api.core.v1.Pod" in doc["definitions"]
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert any(p["name"] == "fieldValidation" and p["in"] == "query"
               for p in patch["parameters"]), patch["parameters"]

    for accept in (PB_V2, PB_V2_NEW, f"{PB_V2}, application/json"):
        pb = get(apiserver, "/openapi/v2", accept=accept)
        assert pb.status == 200, pb
        assert pb.headers["content-type"] == PB_V2_NEW
        # Document.swagger (field 1) = "2.0" first, as gnostic writes it.
        assert pb.body[:5] == b"\x0a\x032.0"
        # One ETag for both forms: the JSON's.
        assert pb.headers["etag"] == js.headers["etag"]
        assert pb.headers["vary"] == "Accept"
    assert get(apiserver, "/openapi/v2", accept="text/html").status == 406
    etag = js.headers["etag"]
    assert get(apiserver, "/openapi/v2", **{"If-None-Match": etag}).status == 304
