"""End-to-end: kubeadm's certificate bindings decide the CSR approver (issue 9).

A real `cube apiserver` over a `cube pki init` cluster (which, as kubeadm,
creates the bootstrap policy's certificate roles and kubeadm's three
bindings) and a real `cube controller-manager`, whose approver asks the API
server a SubjectAccessReview for each kubelet CSR. Deleting
`kubeadm:node-autoapprove-certificate-rotation` — the seeds' "CSR not
auto-approved" — leaves a node's renewal CSR Pending while bootstrap CSRs
are still approved; recreating the binding the way the seeds advise
(`kubectl create clusterrolebinding ... --group=system:nodes`) gets it
approved.
"""

import base64
import json
import time

import pytest

from test_kubelet import KUBECTL, ControllerManager

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
ROTATION = "kubeadm:node-autoapprove-certificate-rotation"
SELFNODECLIENT = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"


@pytest.fixture
def cluster(cube, make_apiserver, tmp, run):
    server = make_apiserver(tmp / "apiserver")
    cm = ControllerManager(cube, server)

    def kubectl(*args, check=True, input=None):
        return run(KUBECTL, "--kubeconfig", server.admin_conf, *args, check=check,
                   input=input, timeout=30)
    yield server, kubectl
    cm.stop()
    server.stop()


def submit(server, name, node, auth):
    """A kubelet client CSR for system:node:<node>, sent as `auth`."""
    d = server.parent / "csr" / name
    d.mkdir(parents=True)
    server._cube("certs", "new-csr", "--node", node, "--key-out", d / "key.pem",
                 "--out", d / "req.pem")
    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode((d / "req.pem").read_bytes()).decode(),
                     "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                     "usages": ["digital signature", "client auth"]}}
    r = server.request("POST", CSRS, body, auth=auth)
    assert r.status == 201, r


def condition(kubectl, name):
    out = kubectl("get", "csr", name, "-o", "json").stdout
    return [c["type"] for c in json.loads(out).get("status", {}).get("conditions") or []]


def test_rotation_binding_decides_node_renewals(cluster, wait_until):
    server, kubectl = cluster
    rows = kubectl("get", "clusterrolebindings").stdout
    for name in ("kubeadm:kubelet-bootstrap", "kubeadm:node-autoapprove-bootstrap", ROTATION):
        assert name in rows, rows
    roles = kubectl("get", "clusterroles").stdout
    assert SELFNODECLIENT in roles and "system:node-bootstrapper" in roles, roles
    node = server.node_identity("renewer")
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": "system:node:renewer", "groups": ["system:nodes"],
                    "resourceAttributes": {"group": "certificates.k8s.io", "verb": "create",
                                           "resource": "certificatesigningrequests",
                                           "subresource": "selfnodeclient"}}}
    r = server.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
    assert r.json()["status"] == {
        "allowed": True, "reason": f'RBAC: allowed by ClusterRoleBinding "{ROTATION}" of '
        f'ClusterRole "{SELFNODECLIENT}" to Group "system:nodes"'}, r.json()

    # With the binding: a node's renewal is approved, with upstream's message.
    submit(server, "renewal-1", "renewer", node)
    wait_until(lambda: "Approved" in condition(kubectl, "renewal-1"), 15, "renewal-1 approved")
    msg = json.loads(kubectl("get", "csr", "renewal-1", "-o", "json").stdout)[
        "status"]["conditions"][0]["message"]
    assert msg == "Auto approving self kubelet client certificate after SubjectAccessReview."

    # Without it: Pending, however long; a bootstrap CSR still goes through.
    kubectl("delete", "clusterrolebinding", ROTATION)
    submit(server, "renewal-2", "renewer", node)
    submit(server, "bootstrap-1", "newcomer", ("token", server.token))
    wait_until(lambda: "Approved" in condition(kubectl, "bootstrap-1"), 15,
               "the bootstrap CSR approved")
    time.sleep(3)
    assert condition(kubectl, "renewal-2") == []
    assert "Pending" in kubectl("get", "csr", "renewal-2").stdout

    # The seeds' fix: the binding again, and the pending CSR is approved.
    kubectl("create", "clusterrolebinding", ROTATION, f"--clusterrole={SELFNODECLIENT}",
            "--group=system:nodes")
    wait_until(lambda: "Approved" in condition(kubectl, "renewal-2"), 60,
               "renewal-2 approved after the binding came back")
