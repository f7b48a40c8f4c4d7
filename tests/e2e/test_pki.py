"""End-to-end tests of cube's PKI commands (issues 2 and 12).

`cube pki init` lays out a cluster's certificates as kubeadm does, etcd's
under their own CA too; the `cube certs` commands inspect, verify, sign and
check the expiry of them. Everything cube writes is checked with the real
openssl and kubectl, and expiry is rehearsed with cube's --clock-offset
rather than by waiting. test_etcd_tls.py runs a real etcd on the etcd files.
"""

import base64
import os
import hashlib
import json
import re
import shutil
import socket
import stat
from datetime import datetime, timedelta, timezone

import pytest
import yaml

# kubeadm's etcd certificates: check-expiration name -> file under pki/.
ETCD_LEAVES = {
    "apiserver-etcd-client": "apiserver-etcd-client",
    "etcd-healthcheck-client": "etcd/healthcheck-client",
    "etcd-peer": "etcd/peer",
    "etcd-server": "etcd/server",
}
# Rows of `cube certs check-expiration`, as kubeadm names them.
CLUSTER_ROWS = ["apiserver", "apiserver-kubelet-client", "admin.conf",
                "controller-manager.conf", "scheduler.conf"] + list(ETCD_LEAVES)
# kubeadm's order: the certificates by name, then the CAs by name.
KUBEADM_ROWS = sorted(CLUSTER_ROWS)
KUBEADM_CAS = ["ca", "etcd-ca"]
KUBECONFIGS = ["admin.conf", "controller-manager.conf", "scheduler.conf"]
ETCD_FILES = ["etcd/ca.crt", "etcd/ca.key"] + [
    f"{base}.{ext}" for base in ETCD_LEAVES.values() for ext in ("crt", "key")]
PKI_FILES = ["ca.crt", "ca.key", "apiserver.crt", "apiserver.key",
             "apiserver-kubelet-client.crt", "apiserver-kubelet-client.key",
             "bootstrap-token"] + ETCD_FILES
TOP_FILES = KUBECONFIGS + ["bootstrap-kubelet.conf"]
PRIVATE_FILES = ["pki/ca.key", "pki/apiserver.key",
                 "pki/apiserver-kubelet-client.key", "pki/bootstrap-token"] + [
    f"pki/{f}" for f in ETCD_FILES if f.endswith(".key")]

NODE_SUBJECT = "/CN=system:node:node-1/O=system:nodes"
BACKDATE = timedelta(minutes=5)


# ---------------------------------------------------------------- helpers --

def openssl(run, *args, check=True):
    return run("openssl", *args, check=check)


def x509(run, path, *opts):
    """stdout of `openssl x509 -in PATH -noout OPTS...`."""
    return openssl(run, "x509", "-in", path, "-noout", *opts).stdout


def subject(run, path):
    return x509(run, path, "-subject").strip()


def parse_openssl_date(text):
    return datetime.strptime(text.strip(), "%b %d %H:%M:%S %Y GMT").replace(
        tzinfo=timezone.utc)


def cert_dates(run, path):
    """(notBefore, notAfter) of a certificate, as aware datetimes."""
    fields = dict(line.split("=", 1)
                  for line in x509(run, path, "-dates").splitlines())
    return (parse_openssl_date(fields["notBefore"]),
            parse_openssl_date(fields["notAfter"]))


def fingerprint(run, path):
    out = x509(run, path, "-fingerprint", "-sha256").strip()
    return out.split("=", 1)[1]


def public_key_digest(run, *args):
    """SHA-256 of the public key PEM an openssl command prints."""
    pem = openssl(run, *args).stdout
    return hashlib.sha256(pem.encode()).hexdigest()


def utcnow():
    return datetime.now(timezone.utc).replace(microsecond=0)


def kubeconfig_user(path):
    """The first user entry of a kubeconfig, parsed with PyYAML."""
    with open(path) as f:
        cfg = yaml.safe_load(f)
    return cfg["users"][0]


def extract_kubeconfig_pem(path, field, out):
    """Decode a *-data field of a kubeconfig into the PEM file OUT."""
    with open(path) as f:
        cfg = yaml.safe_load(f)
    if field == "certificate-authority-data":
        data = cfg["clusters"][0]["cluster"][field]
    else:
        data = cfg["users"][0]["user"][field]
    out.write_bytes(base64.b64decode(data))
    return out


def kubeconfig_cert(conf, tmp):
    """The client certificate embedded in kubeconfig CONF, as a PEM file."""
    return extract_kubeconfig_pem(conf, "client-certificate-data",
                                  tmp / f"{conf.name}-client.crt")


def snapshot(cluster):
    """{relative path: bytes} of every regular file under a cluster dir."""
    return {str(p.relative_to(cluster)): p.read_bytes()
            for p in sorted(cluster.rglob("*")) if p.is_file()}


def lines_starting(text, prefix):
    return [line for line in text.splitlines() if line.startswith(prefix)]


def table_row(text, name):
    """The check-expiration table row for certificate NAME."""
    rows = [line for line in text.splitlines()
            if re.match(rf"{re.escape(name)}\s{{2,}}", line)]
    assert len(rows) == 1, f"expected one table row for {name!r} in:\n{text}"
    return rows[0]


def assert_one_line_failure(proc, show, *expected, rcs=(1,)):
    """A clean failure: an expected exit status and exactly one line of
    output, containing every string in EXPECTED."""
    assert proc.returncode in rcs, f"want exit status in {rcs}\n{show(proc)}"
    lines = [line for line in (proc.stdout + proc.stderr).splitlines()
             if line.strip()]
    assert len(lines) == 1, f"want a one-line message\n{show(proc)}"
    for text in expected:
        assert text in lines[0], f"want {text!r} in the message\n{show(proc)}"
    return lines[0]


def make_key(run, path, kind="ecparam"):
    if kind == "ecparam":
        openssl(run, "ecparam", "-genkey", "-name", "prime256v1", "-noout",
                "-out", path)
    elif kind == "genpkey-ec":
        openssl(run, "genpkey", "-algorithm", "EC",
                "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    elif kind == "rsa":
        openssl(run, "genpkey", "-algorithm", "RSA",
                "-pkeyopt", "rsa_keygen_bits:2048", "-out", path)
    else:
        raise ValueError(kind)
    return path


def make_csr(run, tmp, name="node-1", subj=NODE_SUBJECT, key_kind="ecparam",
             extra=()):
    """A key and a PKCS#10 request made by openssl: (key path, csr path)."""
    key = make_key(run, tmp / f"{name}.key", key_kind)
    csr = tmp / f"{name}.csr"
    openssl(run, "req", "-new", "-key", key, "-subj", subj, "-out", csr,
            *extra)
    return key, csr


def make_kubelet_certdir(certdir, cert, key, stamp="2025-10-26-10-00-00"):
    """Lay out a kubelet cert store as the kubelet does: a dated pair file
    (cert PEM then key PEM, 0600) and kubelet-client-current.pem, a symlink
    to its absolute path."""
    certdir.mkdir(parents=True, exist_ok=True)
    pair = certdir / f"kubelet-client-{stamp}.pem"
    pair.write_bytes(cert.read_bytes() + key.read_bytes())
    pair.chmod(0o600)
    (certdir / "kubelet-client-current.pem").symlink_to(pair.resolve())
    return pair


# --------------------------------------------------------------- fixtures --

@pytest.fixture
def pki_init(run, cube, tmp):
    """pki_init(name, *flags, offset=None, check=True) runs `cube pki init`
    in tmp/NAME and returns (cluster dir, CompletedProcess)."""
    def _init(name="cluster", *flags, offset=None, check=True):
        cluster = tmp / name
        pre = [f"--clock-offset={offset}"] if offset else []
        proc = run(cube, *pre, "pki", "init", "--dir", cluster, *flags,
                   check=check)
        return cluster, proc
    return _init


@pytest.fixture
def cluster(pki_init):
    """A cluster with an extra DNS and IP SAN on its serving certificate."""
    c, _ = pki_init("cluster", "--apiserver-san", "api.example.com",
                    "--apiserver-san", "10.0.0.5")
    return c


@pytest.fixture
def sign(run, cube):
    """sign(cluster, csr, out, *flags, offset=None, check=True) runs
    `cube certs sign-csr`."""
    def _sign(ca_dir, csr, out, *flags, offset=None, check=True):
        pre = [f"--clock-offset={offset}"] if offset else []
        return run(cube, *pre, "certs", "sign-csr", "--ca-dir", ca_dir,
                   "--in", csr, "--out", out, *flags, check=check)
    return _sign


@pytest.fixture
def check_expiration(run, cube):
    def _check(*flags):
        return run(cube, "certs", "check-expiration", *flags, check=False)
    return _check


# ------------------------------------------------------------- pki init ---

def test_init_writes_kubeadm_layout(cluster):
    missing = [f"pki/{f}" for f in PKI_FILES if not (cluster / "pki" / f).is_file()]
    missing += [f for f in TOP_FILES if not (cluster / f).is_file()]
    assert not missing, f"pki init did not write {missing}"


@pytest.mark.parametrize("rel", PRIVATE_FILES + KUBECONFIGS)
def test_init_secrets_are_private(cluster, rel):
    mode = stat.S_IMODE((cluster / rel).stat().st_mode)
    assert mode == 0o600, f"{rel} holds a secret but has mode {mode:o}"


def test_openssl_verifies_every_certificate_against_ca(run, cluster, tmp):
    ca = cluster / "pki" / "ca.crt"
    certs = [cluster / "pki" / f for f in
             ("ca.crt", "apiserver.crt", "apiserver-kubelet-client.crt")]
    certs += [kubeconfig_cert(cluster / c, tmp) for c in KUBECONFIGS]
    proc = openssl(run, "verify", "-CAfile", ca, *certs, check=False)
    for c in certs:
        assert f"{c}: OK" in proc.stdout, f"openssl rejects {c.name}:\n{proc.stdout}{proc.stderr}"
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("conf", TOP_FILES)
def test_kubeconfigs_embed_the_cluster_ca(cluster, tmp, conf):
    embedded = extract_kubeconfig_pem(cluster / conf, "certificate-authority-data",
                                      tmp / "embedded-ca.crt")
    assert embedded.read_bytes() == (cluster / "pki" / "ca.crt").read_bytes(), \
        f"{conf} does not embed pki/ca.crt"


@pytest.mark.parametrize("conf", KUBECONFIGS)
def test_kubeconfig_client_key_matches_its_certificate(run, cluster, tmp, conf):
    cert = kubeconfig_cert(cluster / conf, tmp)
    key = extract_kubeconfig_pem(cluster / conf, "client-key-data", tmp / "client.key")
    assert (public_key_digest(run, "x509", "-in", cert, "-noout", "-pubkey")
            == public_key_digest(run, "pkey", "-in", key, "-pubout")), \
        f"{conf}: client-key-data is not the key of client-certificate-data"


@pytest.mark.parametrize("name", ["ca", "apiserver", "apiserver-kubelet-client"])
def test_key_files_match_their_certificates(run, cluster, name):
    pki = cluster / "pki"
    assert (public_key_digest(run, "x509", "-in", pki / f"{name}.crt", "-noout", "-pubkey")
            == public_key_digest(run, "pkey", "-in", pki / f"{name}.key", "-pubout")), \
        f"pki/{name}.key is not the key of pki/{name}.crt"


def test_ca_certificate_is_a_ca(run, cluster):
    ca = cluster / "pki" / "ca.crt"
    out = x509(run, ca, "-subject", "-ext", "basicConstraints,keyUsage")
    assert "subject=CN = kubernetes" in out, out
    assert "CA:TRUE" in out, out
    assert "Certificate Sign" in out, out


def test_apiserver_certificate_has_requested_sans_and_server_auth(run, cluster):
    out = x509(run, cluster / "pki" / "apiserver.crt", "-subject",
               "-ext", "subjectAltName,keyUsage,extendedKeyUsage")
    assert "CN = kube-apiserver" in out, out
    for san in ("DNS:api.example.com", "IP Address:10.0.0.5", "DNS:localhost",
                "IP Address:127.0.0.1", "DNS:kubernetes.default",
                "DNS:kubernetes", "IP Address:10.96.0.1"):
        assert re.search(rf"{re.escape(san)}(,|$)", out, re.M), \
            f"apiserver.crt lacks SAN {san}:\n{out}"
    assert "TLS Web Server Authentication" in out, out
    assert "TLS Web Client Authentication" not in out, out


@pytest.mark.parametrize("conf, want_subject", [
    ("admin.conf", "subject=O = system:masters, CN = kubernetes-admin"),
    ("controller-manager.conf", "subject=CN = system:kube-controller-manager"),
    ("scheduler.conf", "subject=CN = system:kube-scheduler"),
], ids=KUBECONFIGS)
def test_kubeconfig_client_certificate_identity(run, cluster, tmp, conf, want_subject):
    cert = kubeconfig_cert(cluster / conf, tmp)
    out = x509(run, cert, "-subject", "-ext", "keyUsage,extendedKeyUsage")
    assert want_subject in out, f"{conf}:\n{out}"
    assert "TLS Web Client Authentication" in out, f"{conf}:\n{out}"
    assert "TLS Web Server Authentication" not in out, f"{conf}:\n{out}"


def test_apiserver_kubelet_client_certificate_is_a_client_cert(run, cluster):
    out = x509(run, cluster / "pki" / "apiserver-kubelet-client.crt", "-subject",
               "-ext", "extendedKeyUsage")
    assert "CN = kube-apiserver-kubelet-client" in out, out
    assert "TLS Web Client Authentication" in out, out


def test_leaf_validity_follows_validity_flag(run, pki_init):
    before = utcnow()
    cluster, _ = pki_init("c", "--validity", "48h")
    after = utcnow() + timedelta(seconds=1)
    not_before, not_after = cert_dates(run, cluster / "pki" / "apiserver.crt")
    assert before - BACKDATE - timedelta(seconds=1) <= not_before <= after - BACKDATE, \
        f"notBefore {not_before} is not now-5m"
    assert before + timedelta(hours=48) - timedelta(seconds=1) <= not_after <= after + timedelta(hours=48), \
        f"notAfter {not_after} is not now+48h"


def test_rsa_key_type_gives_rsa_2048(run, pki_init, tmp):
    cluster, _ = pki_init("rsa", "--key-type", "rsa")
    certs = [cluster / "pki" / f for f in
             ("ca.crt", "apiserver.crt", "apiserver-kubelet-client.crt")]
    certs += [kubeconfig_cert(cluster / c, tmp) for c in KUBECONFIGS]
    for cert in certs:
        text = x509(run, cert, "-text")
        assert "rsaEncryption" in text and "Public-Key: (2048 bit)" in text, \
            f"{cert.name} is not RSA 2048:\n{text}"
    verify = openssl(run, "verify", "-CAfile", cluster / "pki" / "ca.crt", *certs)
    assert verify.stdout.count(": OK") == len(certs), verify.stdout


def test_default_key_type_is_ecdsa_p256(run, cluster):
    text = x509(run, cluster / "pki" / "apiserver.crt", "-text")
    assert "id-ecPublicKey" in text and "P-256" in text, text


def test_kubectl_reads_admin_conf(run, cluster):
    proc = run("kubectl", "--kubeconfig", cluster / "admin.conf", "config", "view",
               "--minify", "-o", "jsonpath={.users[0].name}")
    assert proc.stdout == "kubernetes-admin", proc.stdout


def test_cluster_name_and_server_flags_reach_ca_and_kubeconfigs(run, pki_init):
    cluster, _ = pki_init("c", "--cluster-name", "prod",
                          "--server", "https://10.1.2.3:6443")
    assert subject(run, cluster / "pki" / "ca.crt") == "subject=CN = prod"
    proc = run("kubectl", "--kubeconfig", cluster / "admin.conf", "config", "view",
               "--minify", "-o",
               "jsonpath={.clusters[0].name} {.clusters[0].cluster.server} "
               "{.contexts[0].name}")
    assert proc.stdout == "prod https://10.1.2.3:6443 kubernetes-admin@prod", proc.stdout


def test_clock_offset_env_var_moves_cube_into_the_past(run, cube, tmp):
    before = utcnow()
    run(cube, "pki", "init", "--dir", tmp / "c",
        env={"CUBE_CLOCK_OFFSET": "-400d"})
    not_before, _ = cert_dates(run, tmp / "c" / "pki" / "ca.crt")
    want = before - timedelta(days=400)
    assert abs(not_before - want) < timedelta(minutes=1), \
        f"CA notBefore {not_before}, want about {want}"


# ------------------------------------------------------ pki init re-runs ---

def test_rerun_keeps_every_file(run, pki_init, cluster):
    before = snapshot(cluster)
    _, proc = pki_init("cluster", "--apiserver-san", "api.example.com",
                       "--apiserver-san", "10.0.0.5")
    assert "Using existing" in proc.stdout, proc.stdout
    assert "Generating" not in proc.stdout, proc.stdout
    after = snapshot(cluster)
    changed = [f for f in before if before[f] != after.get(f)]
    assert not changed, f"re-running pki init rewrote {changed}"


def test_rerun_keeps_ca_fingerprint(run, pki_init, cluster):
    ca = cluster / "pki" / "ca.crt"
    old = fingerprint(run, ca)
    pki_init("cluster")
    assert fingerprint(run, ca) == old


def test_deleting_apiserver_crt_regenerates_only_it(run, pki_init, cluster):
    before = snapshot(cluster)
    (cluster / "pki" / "apiserver.crt").unlink()
    _, proc = pki_init("cluster", "--apiserver-san", "api.example.com",
                       "--apiserver-san", "10.0.0.5")
    assert 'Generating "apiserver" certificate' in proc.stdout, proc.stdout
    after = snapshot(cluster)
    regenerated = {"pki/apiserver.crt", "pki/apiserver.key"}
    changed = [f for f in before if f not in regenerated and before[f] != after.get(f)]
    assert not changed, f"only apiserver should change, but so did {changed}"
    assert after["pki/apiserver.crt"] != before["pki/apiserver.crt"]
    openssl(run, "verify", "-CAfile", cluster / "pki" / "ca.crt",
            cluster / "pki" / "apiserver.crt")


def test_force_regenerates_the_ca_and_everything_it_signed(run, pki_init, cluster, tmp):
    ca = cluster / "pki" / "ca.crt"
    old = fingerprint(run, ca)
    pki_init("cluster", "--force")
    assert fingerprint(run, ca) != old, "--force kept the old CA"
    certs = [cluster / "pki" / "apiserver.crt", cluster / "pki" / "apiserver-kubelet-client.crt"]
    certs += [kubeconfig_cert(cluster / c, tmp) for c in KUBECONFIGS]
    proc = openssl(run, "verify", "-CAfile", ca, *certs, check=False)
    assert proc.returncode == 0, f"not re-signed by the new CA:\n{proc.stdout}{proc.stderr}"


def test_rerun_renews_expired_leaves_and_keeps_ca(run, pki_init, check_expiration):
    cluster, _ = pki_init("c", "--validity", "24h", offset="-400d")
    ca_fp = fingerprint(run, cluster / "pki" / "ca.crt")
    pki_init("c")
    assert fingerprint(run, cluster / "pki" / "ca.crt") == ca_fp, \
        "the CA was still valid and should have been kept"
    _, not_after = cert_dates(run, cluster / "pki" / "apiserver.crt")
    assert not_after > utcnow(), "expired apiserver.crt was kept"
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 0, proc.stdout


def test_new_san_regenerates_serving_certificate(run, pki_init, cluster):
    pki_init("cluster", "--apiserver-san", "new.example.com")
    out = x509(run, cluster / "pki" / "apiserver.crt", "-ext", "subjectAltName")
    assert "DNS:new.example.com" in out, f"kept a serving cert without the new SAN:\n{out}"


# ------------------------------------------------------------ etcd PKI ---
# kubeadm's layout for a local etcd (cmd/kubeadm/app/phases/certs/certlist.go):
# a CA of its own, CN etcd-ca; etcd/server and etcd/peer with CN = the node
# name, SANs node name, localhost, 127.0.0.1, ::1 and the extra SANs, server
# and client auth; etcd/healthcheck-client and apiserver-etcd-client, client
# auth only, no organisation.

ETCD_NODE = "etcd-node-1"
ETCD_CA_SIGNED = [f"{base}.crt" for base in ETCD_LEAVES.values()]


@pytest.fixture
def etcd_cluster(pki_init):
    """A cluster with a chosen node name and extra etcd SANs."""
    c, _ = pki_init("etcd", "--node-name", ETCD_NODE, "--etcd-san", "10.0.0.7",
                    "--etcd-san", "etcd.example.com")
    return c


def sans(run, path):
    """The subjectAltName entries of a certificate, as openssl prints them."""
    out = x509(run, path, "-ext", "subjectAltName")
    return {e.strip() for e in out.splitlines()[-1].split(",")} if "DNS:" in out else set()


def usages(run, path):
    return x509(run, path, "-ext", "keyUsage,extendedKeyUsage")


def test_etcd_ca_is_its_own_ca(run, etcd_cluster):
    ca = etcd_cluster / "pki" / "etcd" / "ca.crt"
    out = x509(run, ca, "-subject", "-issuer", "-ext", "basicConstraints,keyUsage")
    assert "subject=CN = etcd-ca" in out and "issuer=CN = etcd-ca" in out, out
    assert "CA:TRUE" in out and "Certificate Sign" in out, out
    assert fingerprint(run, ca) != fingerprint(run, etcd_cluster / "pki" / "ca.crt")


@pytest.mark.parametrize("base", ["etcd/server", "etcd/peer"])
def test_etcd_serving_pairs_name_the_node(run, etcd_cluster, base):
    crt = etcd_cluster / "pki" / f"{base}.crt"
    assert subject(run, crt) == f"subject=CN = {ETCD_NODE}"
    assert sans(run, crt) == {f"DNS:{ETCD_NODE}", "DNS:localhost", "DNS:etcd.example.com",
                              "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1",
                              "IP Address:10.0.0.7"}
    out = usages(run, crt)
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in out, out


@pytest.mark.parametrize("base, cn", [
    ("etcd/healthcheck-client", "kube-etcd-healthcheck-client"),
    ("apiserver-etcd-client", "kube-apiserver-etcd-client"),
])
def test_etcd_clients_are_client_only_without_organisation(run, etcd_cluster, base, cn):
    crt = etcd_cluster / "pki" / f"{base}.crt"
    # kubeadm 1.32 puts no O= on them (it used to be system:masters).
    assert subject(run, crt) == f"subject=CN = {cn}"
    out = usages(run, crt)
    assert "TLS Web Client Authentication" in out, out
    assert "TLS Web Server Authentication" not in out, out
    assert sans(run, crt) == set(), x509(run, crt, "-text")


def test_etcd_node_name_defaults_to_the_hostname(run, cluster):
    want = socket.gethostname().lower()
    for base in ("etcd/server", "etcd/peer"):
        crt = cluster / "pki" / f"{base}.crt"
        assert subject(run, crt) == f"subject=CN = {want}"
        assert f"DNS:{want}" in sans(run, crt)


def test_etcd_certificates_verify_against_etcd_ca_only(run, etcd_cluster):
    pki = etcd_cluster / "pki"
    certs = [pki / f for f in ETCD_CA_SIGNED]
    proc = openssl(run, "verify", "-CAfile", pki / "etcd" / "ca.crt", *certs, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for c in certs:
        assert f"{c}: OK" in proc.stdout, proc.stdout
    # Each one alone, so one failure cannot hide another's success.
    for c in certs:
        proc = openssl(run, "verify", "-CAfile", pki / "ca.crt", c, check=False)
        assert proc.returncode != 0, f"the cluster CA accepts {c}:\n{proc.stdout}"
    # Nor does the etcd CA vouch for the cluster's own certificates.
    for c in (pki / "apiserver.crt", pki / "apiserver-kubelet-client.crt"):
        proc = openssl(run, "verify", "-CAfile", pki / "etcd" / "ca.crt", c, check=False)
        assert proc.returncode != 0, f"the etcd CA accepts {c}:\n{proc.stdout}"


@pytest.mark.parametrize("base", ["etcd/ca"] + list(ETCD_LEAVES.values()))
def test_etcd_key_files_match_their_certificates(run, etcd_cluster, base):
    pki = etcd_cluster / "pki"
    assert (public_key_digest(run, "x509", "-in", pki / f"{base}.crt", "-noout", "-pubkey")
            == public_key_digest(run, "pkey", "-in", pki / f"{base}.key", "-pubout")), base


def test_init_says_what_it_makes_for_etcd(pki_init):
    _, proc = pki_init("c", "--node-name", ETCD_NODE)
    for base in ["etcd/ca"] + list(ETCD_LEAVES.values()):
        assert f'[certs] Generating "{base}" certificate and key' in proc.stdout, proc.stdout
    assert (f"[certs] etcd/server serving cert is signed for DNS names [{ETCD_NODE} localhost] "
            "and IPs [127.0.0.1 ::1]") in proc.stdout, proc.stdout


def test_etcd_rsa_key_type(run, pki_init):
    cluster, _ = pki_init("rsa", "--key-type", "rsa")
    pki = cluster / "pki"
    for f in ["etcd/ca.crt"] + ETCD_CA_SIGNED:
        text = x509(run, pki / f, "-text")
        assert "Public-Key: (2048 bit)" in text, f"{f} is not RSA 2048"
    out = usages(run, pki / "etcd" / "server.crt")
    assert "Digital Signature, Key Encipherment" in out, out


def test_rerun_with_new_node_name_regenerates_only_what_names_it(run, pki_init, etcd_cluster):
    before = snapshot(etcd_cluster)
    _, proc = pki_init("etcd", "--node-name", "etcd-node-2", "--etcd-san", "10.0.0.7",
                       "--etcd-san", "etcd.example.com")
    after = snapshot(etcd_cluster)
    changed = {f for f in before if before[f] != after.get(f)}
    # The apiserver certificate names the node too, as kubeadm's does.
    assert changed == {"pki/etcd/server.crt", "pki/etcd/server.key", "pki/etcd/peer.crt",
                       "pki/etcd/peer.key", "pki/apiserver.crt", "pki/apiserver.key"}, \
        f"{sorted(changed)}\n{proc.stdout}"
    assert subject(run, etcd_cluster / "pki" / "etcd" / "server.crt") == \
        "subject=CN = etcd-node-2"
    assert "DNS:etcd-node-2" in sans(run, etcd_cluster / "pki" / "apiserver.crt")


def test_new_etcd_ca_remakes_etcd_certificates_only(run, pki_init, etcd_cluster):
    before = snapshot(etcd_cluster)
    (etcd_cluster / "pki" / "etcd" / "ca.key").unlink()
    pki_init("etcd", "--node-name", ETCD_NODE, "--etcd-san", "10.0.0.7",
             "--etcd-san", "etcd.example.com")
    after = snapshot(etcd_cluster)
    changed = {f for f in before if before[f] != after.get(f)}
    assert changed == {f"pki/{f}" for f in ETCD_FILES}, sorted(changed)
    proc = openssl(run, "verify", "-CAfile", etcd_cluster / "pki" / "etcd" / "ca.crt",
                   *[etcd_cluster / "pki" / f for f in ETCD_CA_SIGNED], check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_new_cluster_ca_leaves_etcd_alone(pki_init, etcd_cluster):
    before = snapshot(etcd_cluster)
    (etcd_cluster / "pki" / "ca.key").unlink()
    pki_init("etcd", "--node-name", ETCD_NODE, "--etcd-san", "10.0.0.7",
             "--etcd-san", "etcd.example.com")
    after = snapshot(etcd_cluster)
    assert all(before[f"pki/{f}"] == after[f"pki/{f}"] for f in ETCD_FILES), \
        "a new cluster CA remade etcd's certificates"
    assert before["pki/ca.crt"] != after["pki/ca.crt"]


def test_force_regenerates_the_etcd_ca(run, pki_init, etcd_cluster):
    ca = etcd_cluster / "pki" / "etcd" / "ca.crt"
    old = fingerprint(run, ca)
    pki_init("etcd", "--node-name", ETCD_NODE, "--force")
    assert fingerprint(run, ca) != old, "--force kept the old etcd CA"
    proc = openssl(run, "verify", "-CAfile", ca,
                   *[etcd_cluster / "pki" / f for f in ETCD_CA_SIGNED], check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_help_describes_the_etcd_files(run, cube):
    out = run(cube, "pki", "init", "--help").stdout
    for text in ("DIR/pki/etcd/ca.crt", "etcd/server.crt", "etcd/peer.crt",
                 "etcd/healthcheck-client.crt", "apiserver-etcd-client.crt", "etcd-ca",
                 "--etcd-san", "--node-name"):
        assert text in out, f"{text!r} not in:\n{out}"


# ------------------------------------------------------------ sign-csr ---

@pytest.mark.parametrize("key_kind", ["ecparam", "genpkey-ec"])
def test_sign_csr_signs_kubelet_client_request(run, cluster, sign, tmp, key_kind):
    _, csr = make_csr(run, tmp, key_kind=key_kind)
    out = tmp / "node-1.crt"
    sign(cluster, csr, out)
    verify = openssl(run, "verify", "-CAfile", cluster / "pki" / "ca.crt", out, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    want = openssl(run, "req", "-in", csr, "-noout", "-subject").stdout.strip()
    assert subject(run, out) == want
    assert "TLS Web Client Authentication" in x509(run, out, "-ext", "extendedKeyUsage")


def test_sign_csr_accepts_the_pki_subdirectory(run, cluster, sign, tmp):
    _, csr = make_csr(run, tmp)
    sign(cluster / "pki", csr, tmp / "out.crt")
    openssl(run, "verify", "-CAfile", cluster / "pki" / "ca.crt", tmp / "out.crt")


def test_sign_csr_long_duration_is_shortened_by_the_backdate(run, cluster, sign, tmp):
    _, csr = make_csr(run, tmp)
    before = utcnow()
    sign(cluster, csr, tmp / "out.crt", "--duration", "8760h")
    after = utcnow() + timedelta(seconds=1)
    not_before, not_after = cert_dates(run, tmp / "out.crt")
    year = timedelta(hours=8760)
    assert before - BACKDATE <= not_before <= after - BACKDATE, not_before
    assert before + year - BACKDATE <= not_after <= after + year - BACKDATE, \
        f"notAfter {not_after}, want now+8760h-5m"


def test_sign_csr_short_duration_keeps_the_whole_hour(run, cluster, sign, tmp):
    _, csr = make_csr(run, tmp)
    sign(cluster, csr, tmp / "out.crt", "--duration", "1h")
    not_before, not_after = cert_dates(run, tmp / "out.crt")
    assert not_after - not_before == timedelta(hours=1, minutes=5), \
        f"{not_before} .. {not_after}: want 1h plus the 5m backdate"


def test_sign_csr_never_outlives_the_ca(run, pki_init, sign, tmp):
    cluster, _ = pki_init("c", "--ca-validity", "240h", "--validity", "24h")
    _, csr = make_csr(run, tmp)
    sign(cluster, csr, tmp / "out.crt", "--duration", "8760h")
    _, ca_not_after = cert_dates(run, cluster / "pki" / "ca.crt")
    _, not_after = cert_dates(run, tmp / "out.crt")
    assert not_after == ca_not_after, f"cert ends {not_after}, CA ends {ca_not_after}"


def test_sign_csr_rsa_request_gets_key_encipherment(run, cluster, sign, tmp):
    _, csr = make_csr(run, tmp, key_kind="rsa")
    sign(cluster, csr, tmp / "out.crt")
    out = x509(run, tmp / "out.crt", "-ext", "keyUsage,extendedKeyUsage")
    assert "Digital Signature, Key Encipherment" in out, out
    assert "TLS Web Client Authentication" in out, out


def test_sign_csr_usages_flag_and_request_sans(run, cluster, sign, tmp):
    _, csr = make_csr(run, tmp, extra=["-addext", "subjectAltName=DNS:node-1,IP:10.0.0.7"])
    sign(cluster, csr, tmp / "out.crt", "--usages",
         "digital signature,key encipherment,server auth")
    out = x509(run, tmp / "out.crt", "-ext", "subjectAltName,keyUsage,extendedKeyUsage")
    assert "DNS:node-1" in out and "IP Address:10.0.0.7" in out, out
    assert "TLS Web Server Authentication" in out, out
    assert "TLS Web Client Authentication" not in out, out


# --------------------------------------------------- broken input files ---

@pytest.fixture
def bad_files(run, pki_init, tmp):
    """Certificates cube must reject, next to the cluster whose CA the
    tests verify against: {kind: (ca.crt, file)}."""
    cluster, _ = pki_init("cluster")
    old, _ = pki_init("old", "--validity", "24h", offset="-400d")
    foreign, _ = pki_init("foreign")
    good = (cluster / "pki" / "apiserver.crt").read_text()
    truncated = tmp / "truncated.crt"
    truncated.write_text(good[: len(good) // 2])
    not_pem = tmp / "not-pem.crt"
    not_pem.write_text("this is not a certificate\n")
    der = tmp / "cert.der"
    openssl(run, "x509", "-in", cluster / "pki" / "apiserver.crt", "-outform", "DER",
            "-out", der)
    ca = cluster / "pki" / "ca.crt"
    return {
        "good": (ca, cluster / "pki" / "apiserver.crt"),
        "expired": (old / "pki" / "ca.crt", old / "pki" / "apiserver.crt"),
        "foreign": (ca, foreign / "pki" / "apiserver.crt"),
        "truncated": (ca, truncated),
        "not-pem": (ca, not_pem),
        "der": (ca, der),
    }


def test_verify_accepts_a_good_certificate(run, cube, bad_files):
    ca, cert = bad_files["good"]
    proc = run(cube, "certs", "verify", "--ca-file", ca, cert, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == f"{cert}: OK", proc.stdout


@pytest.mark.parametrize("kind, message", [
    ("expired", "x509: certificate has expired or is not yet valid: current time "),
    ("foreign", "x509: certificate signed by unknown authority"),
    ("truncated", "truncated PEM"),
    ("not-pem", "not a PEM file"),
    ("der", "not a PEM file"),
], ids=["expired", "foreign", "truncated", "not-pem", "der"])
def test_verify_rejects_bad_certificate_in_one_line(run, cube, show, bad_files, kind, message):
    ca, cert = bad_files[kind]
    proc = run(cube, "certs", "verify", "--ca-file", ca, cert, check=False)
    assert_one_line_failure(proc, show, str(cert), message)


def test_verify_expired_message_names_expiry_time(run, cube, bad_files):
    ca, cert = bad_files["expired"]
    proc = run(cube, "certs", "verify", "--ca-file", ca, cert, check=False)
    m = re.search(r"current time (\S+) is after (\S+)$", proc.stdout.strip())
    assert m, proc.stdout
    _, not_after = cert_dates(run, cert)
    assert m.group(2) == not_after.strftime("%Y-%m-%dT%H:%M:%SZ"), proc.stdout
    now = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs(now - utcnow()) < timedelta(minutes=1), f"'current time' is not now: {proc.stdout}"


def test_verify_reports_each_file_and_fails_if_any_fails(run, cube, bad_files):
    ca, good = bad_files["good"]
    _, foreign = bad_files["foreign"]
    proc = run(cube, "certs", "verify", "--ca-file", ca, good, foreign, check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"{good}: OK" in proc.stdout, proc.stdout
    assert f"{foreign}: x509: certificate signed by unknown authority" in proc.stdout, proc.stdout


@pytest.mark.parametrize("conf_or_crt, purpose, ok", [
    ("pki/apiserver.crt", "server", True),
    ("pki/apiserver.crt", "client", False),
    ("pki/apiserver-kubelet-client.crt", "client", True),
    ("pki/apiserver-kubelet-client.crt", "server", False),
], ids=["server-as-server", "server-as-client", "client-as-client", "client-as-server"])
def test_verify_purpose(run, cube, cluster, conf_or_crt, purpose, ok):
    proc = run(cube, "certs", "verify", "--ca-file", cluster / "pki" / "ca.crt",
               "--purpose", purpose, cluster / conf_or_crt, check=False)
    if ok:
        assert proc.returncode == 0, proc.stdout
    else:
        assert proc.returncode == 1, proc.stdout
        assert "incompatible key usage" in proc.stdout, proc.stdout


@pytest.mark.parametrize("kind, message", [
    ("truncated", "truncated PEM"),
    ("not-pem", "not a PEM file"),
    ("der", "not a PEM file"),
], ids=["truncated", "not-pem", "der"])
def test_inspect_rejects_unreadable_file_in_one_line(run, cube, show, bad_files, kind, message):
    _, cert = bad_files[kind]
    proc = run(cube, "certs", "inspect", cert, check=False)
    assert_one_line_failure(proc, show, str(cert), message)


def test_inspect_flags_expired_certificate(run, cube, bad_files):
    ca, cert = bad_files["expired"]
    proc = run(cube, "certs", "inspect", cert, "--ca-file", ca, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^Time left:\s+EXPIRED", proc.stdout, re.M), proc.stdout
    assert "certificate has expired" in proc.stdout, proc.stdout


def test_inspect_foreign_ca_fails(run, cube, bad_files):
    ca, cert = bad_files["foreign"]
    proc = run(cube, "certs", "inspect", cert, "--ca-file", ca, check=False)
    assert proc.returncode == 1, proc.stdout
    assert "signed by unknown authority" in proc.stdout, proc.stdout


def test_inspect_json_agrees_with_openssl(run, cube, cluster):
    cert = cluster / "pki" / "apiserver.crt"
    proc = run(cube, "certs", "inspect", cert, "-o", "json")
    [info] = json.loads(proc.stdout)
    _, not_after = cert_dates(run, cert)
    assert info["notAfter"] == not_after.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert info["sha256"] == fingerprint(run, cert)
    assert "api.example.com" in info["dnsNames"]
    assert "10.0.0.5" in info["ipAddresses"]
    assert info["expired"] is False


def test_inspect_csr(run, cube, tmp):
    _, csr = make_csr(run, tmp)
    proc = run(cube, "certs", "inspect", csr)
    assert "system:node:node-1" in proc.stdout and "system:nodes" in proc.stdout, proc.stdout
    assert "signature valid" in proc.stdout, proc.stdout


@pytest.fixture
def csr(run, tmp):
    return make_csr(run, tmp)[1]


@pytest.mark.parametrize("kind, message", [
    ("truncated", "truncated PEM"),
    ("not-pem", "not a PEM file"),
], ids=["truncated", "not-pem"])
def test_sign_csr_rejects_unreadable_request_in_one_line(run, cluster, sign, show, tmp, csr, kind, message):
    bad = tmp / f"{kind}.csr"
    text = csr.read_text()
    bad.write_text(text[: len(text) // 2] if kind == "truncated" else "garbage\n")
    out = tmp / "out.crt"
    proc = sign(cluster, bad, out, check=False)
    assert_one_line_failure(proc, show, str(bad), message)
    assert not out.exists(), "a failed sign-csr wrote a certificate"


def test_sign_csr_refuses_an_expired_ca(run, pki_init, sign, show, tmp, csr):
    cluster, _ = pki_init("c", "--ca-validity", "48h", "--validity", "24h", offset="-400d")
    out = tmp / "out.crt"
    proc = sign(cluster, csr, out, check=False)
    line = assert_one_line_failure(proc, show)
    assert "the signer has expired" in line or "refusing to sign" in line, show(proc)
    assert not out.exists(), "a failed sign-csr wrote a certificate"


# ---------------------------------------------------- check-expiration ---

def test_check_expiration_fresh_cluster_is_clean(run, cluster, check_expiration):
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in CLUSTER_ROWS + ["ca"]:
        table_row(proc.stdout, name)
    for word in ("WARNING:", "EXPIRED:", "MISSING:", "INVALID:"):
        assert not lines_starting(proc.stdout, word), proc.stdout


def test_check_expiration_table_shows_openssl_expiry(run, cluster, check_expiration):
    proc = check_expiration("--dir", cluster)
    _, not_after = cert_dates(run, cluster / "pki" / "apiserver.crt")
    row = table_row(proc.stdout, "apiserver")
    assert not_after.strftime("%b %d, %Y %H:%M UTC") in row, row


@pytest.fixture
def ten_day_cluster(pki_init):
    cluster, _ = pki_init("c", "--validity", "240h")
    return cluster


def test_check_expiration_warns_inside_window(ten_day_cluster, check_expiration):
    proc = check_expiration("--dir", ten_day_cluster)
    assert proc.returncode == 1, proc.stdout
    warnings = lines_starting(proc.stdout, "WARNING:")
    for name in CLUSTER_ROWS:
        assert any(f'"{name}"' in w for w in warnings), \
            f"no WARNING line for {name}:\n{proc.stdout}"
    assert not any('"ca"' in w for w in warnings), proc.stdout


def test_check_expiration_narrow_window_is_clean(ten_day_cluster, check_expiration):
    proc = check_expiration("--dir", ten_day_cluster, "--warn-within", "5d")
    assert proc.returncode == 0, proc.stdout
    assert not lines_starting(proc.stdout, "WARNING:"), proc.stdout


def test_check_expiration_reports_expired_cluster(pki_init, check_expiration):
    cluster, _ = pki_init("c", "--validity", "24h", offset="-400d")
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 1, proc.stdout
    expired = lines_starting(proc.stdout, "EXPIRED:")
    for name in CLUSTER_ROWS:
        assert any(f'"{name}"' in e for e in expired), \
            f"no EXPIRED line for {name}:\n{proc.stdout}"


def test_check_expiration_reports_missing_certificate(cluster, check_expiration):
    (cluster / "scheduler.conf").unlink()
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 1, proc.stdout
    missing = lines_starting(proc.stdout, "MISSING:")
    assert len(missing) == 1 and '"scheduler.conf"' in missing[0], proc.stdout


def table_cells(row):
    """A check-expiration row split into its columns."""
    return re.split(r"\s{2,}", row.strip())


def test_check_expiration_rows_are_kubeadms(cluster, check_expiration):
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 0, proc.stdout
    certs, cas = proc.stdout.split("\n\n", 1)
    names = [table_cells(line)[0] for line in certs.splitlines()[1:]]
    assert names == KUBEADM_ROWS, proc.stdout
    assert [table_cells(line)[0] for line in cas.strip().splitlines()[1:]] == KUBEADM_CAS, \
        proc.stdout


@pytest.mark.parametrize("name", CLUSTER_ROWS)
def test_check_expiration_names_each_rows_ca(run, cluster, check_expiration, name):
    proc = check_expiration("--dir", cluster)
    cells = table_cells(table_row(proc.stdout, name))
    # CERTIFICATE, EXPIRES, RESIDUAL TIME, CERTIFICATE AUTHORITY, EXTERNALLY MANAGED
    assert cells[3] == ("etcd-ca" if name in ETCD_LEAVES else "ca"), cells
    assert cells[4] == "no", cells
    if name in ETCD_LEAVES:
        _, not_after = cert_dates(run, cluster / "pki" / f"{ETCD_LEAVES[name]}.crt")
        assert cells[1] == not_after.strftime("%b %d, %Y %H:%M UTC"), cells


def test_check_expiration_etcd_ca_row(run, cluster, check_expiration):
    proc = check_expiration("--dir", cluster)
    cells = table_cells(table_row(proc.stdout, "etcd-ca"))
    _, not_after = cert_dates(run, cluster / "pki" / "etcd" / "ca.crt")
    assert cells[1] == not_after.strftime("%b %d, %Y %H:%M UTC"), cells
    assert cells[3] == "no", cells


def test_check_expiration_without_local_etcd_leaves_etcd_out(cluster, check_expiration):
    # kubeadm's external etcd: no pki/etcd, and no etcd rows at all.
    shutil.rmtree(cluster / "pki" / "etcd")
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 0, proc.stdout
    for name in list(ETCD_LEAVES) + ["etcd-ca"]:
        assert not re.search(rf"^{name}\s", proc.stdout, re.M), proc.stdout


def test_check_expiration_reports_missing_etcd_certificate(cluster, check_expiration):
    (cluster / "pki" / "etcd" / "server.crt").unlink()
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 1, proc.stdout
    missing = lines_starting(proc.stdout, "MISSING:")
    assert len(missing) == 1 and '"etcd-server"' in missing[0], proc.stdout
    assert "pki/etcd/server.crt" in missing[0], proc.stdout


def test_check_expiration_flags_etcd_cert_from_the_cluster_ca(cluster, check_expiration):
    # A certificate the cluster CA signed where etcd's should be.
    pki = cluster / "pki"
    shutil.copy(pki / "apiserver-kubelet-client.crt", pki / "etcd" / "healthcheck-client.crt")
    proc = check_expiration("--dir", cluster)
    assert proc.returncode == 1, proc.stdout
    invalid = lines_starting(proc.stdout, "INVALID:")
    assert len(invalid) == 1 and '"etcd-healthcheck-client"' in invalid[0], proc.stdout
    cells = table_cells(table_row(proc.stdout, "etcd-healthcheck-client"))
    assert cells[3] == "kubernetes", cells


# kubelet certificate stores

@pytest.fixture
def past_cluster(pki_init):
    """A cluster made 400 days ago whose leaves have 10 days left now."""
    cluster, _ = pki_init("c", "--validity", f"{410 * 24}h", offset="-400d")
    return cluster


@pytest.fixture
def kubelet_root(tmp):
    return tmp / "nodes"


def kubelet_cert(run, sign, tmp, ca_dir, offset=None, duration="8760h"):
    """A node-1 client certificate signed by CA_DIR: (cert, key)."""
    key, csr = make_csr(run, tmp)
    cert = tmp / "node-1.crt"
    sign(ca_dir, csr, cert, "--duration", duration, offset=offset)
    return cert, key


@pytest.mark.parametrize("where", ["nodes", "nodes/node-1", "nodes/node-1/pki"])
def test_check_expiration_finds_kubelet_certificate(run, cluster, sign, tmp, kubelet_root,
                                                    check_expiration, where):
    cert, key = kubelet_cert(run, sign, tmp, cluster)
    make_kubelet_certdir(kubelet_root / "node-1" / "pki", cert, key)
    proc = check_expiration("--dir", cluster, "--kubelet-dir", tmp / where)
    assert proc.returncode == 0, proc.stdout
    row = table_row(proc.stdout, "kubelet-client (node-1)")
    _, not_after = cert_dates(run, cert)
    assert not_after.strftime("%b %d, %Y %H:%M UTC") in row, row


def test_check_expiration_reports_expired_kubelet_certificate(run, past_cluster, sign, tmp,
                                                              kubelet_root, check_expiration):
    cert, key = kubelet_cert(run, sign, tmp, past_cluster, offset="-400d", duration="24h")
    make_kubelet_certdir(kubelet_root / "node-1" / "pki", cert, key)
    proc = check_expiration("--dir", past_cluster, "--kubelet-dir", kubelet_root)
    assert proc.returncode == 1, proc.stdout
    expired = lines_starting(proc.stdout, "EXPIRED:")
    assert len(expired) == 1 and '"kubelet-client (node-1)"' in expired[0], proc.stdout


def test_check_expiration_reports_expired_kubelet_certificate_older_than_ca(
        run, cluster, sign, tmp, kubelet_root, check_expiration):
    # The CA is made now; the kubelet cert is signed by it while cube lives
    # 400 days ago. It is expired now, and signed by the cluster CA.
    cert, key = kubelet_cert(run, sign, tmp, cluster, offset="-400d", duration="24h")
    make_kubelet_certdir(kubelet_root / "node-1" / "pki", cert, key)
    proc = check_expiration("--dir", cluster, "--kubelet-dir", kubelet_root)
    assert proc.returncode == 1, proc.stdout
    expired = lines_starting(proc.stdout, "EXPIRED:")
    assert len(expired) == 1 and '"kubelet-client (node-1)"' in expired[0], proc.stdout


@pytest.mark.parametrize("damage", ["foreign-ca", "truncated"])
def test_check_expiration_flags_invalid_kubelet_certificate(run, pki_init, cluster, sign, tmp,
                                                            kubelet_root, check_expiration,
                                                            damage):
    if damage == "foreign-ca":
        foreign, _ = pki_init("foreign")
        cert, key = kubelet_cert(run, sign, tmp, foreign)
    else:
        cert, key = kubelet_cert(run, sign, tmp, cluster)
        text = cert.read_text()
        cert.write_text(text[: len(text) // 2])
    make_kubelet_certdir(kubelet_root / "node-1" / "pki", cert, key)
    proc = check_expiration("--dir", cluster, "--kubelet-dir", kubelet_root)
    assert proc.returncode == 1, proc.stdout
    invalid = lines_starting(proc.stdout, "INVALID:")
    assert len(invalid) == 1 and '"kubelet-client (node-1)"' in invalid[0], proc.stdout


def test_check_expiration_json(run, past_cluster, sign, tmp, kubelet_root, check_expiration):
    cert, key = kubelet_cert(run, sign, tmp, past_cluster, offset="-400d", duration="24h")
    make_kubelet_certdir(kubelet_root / "node-1" / "pki", cert, key)
    proc = check_expiration("--dir", past_cluster, "--kubelet-dir", kubelet_root, "-o", "json")
    assert proc.returncode == 1, proc.stdout
    info = json.loads(proc.stdout)
    assert info["kind"] == "CertificateExpirationInfo"
    status = {c["name"]: c["status"] for c in info["certificates"]}
    want = {name: "warning" for name in CLUSTER_ROWS}
    want["kubelet-client (node-1)"] = "expired"
    assert status == want
    assert [(c["name"], c["status"]) for c in info["certificateAuthorities"]] == \
        [("ca", "ok"), ("etcd-ca", "ok")]
    authority = {c["name"]: c["certificateAuthority"] for c in info["certificates"]}
    for name in CLUSTER_ROWS:
        assert authority[name] == ("etcd-ca" if name in ETCD_LEAVES else "ca"), authority


# ----------------------------------------------------- bad command lines ---

@pytest.mark.parametrize("args, message", [
    pytest.param(["pki", "init", "--dir", "{d}", "--bogus"], "--bogus", id="unknown-flag"),
    pytest.param(["pki", "init"], "--dir is required", id="missing-dir"),
    pytest.param(["pki", "init", "--dir", "{d}", "--key-type", "dsa"], "dsa", id="bad-key-type"),
    pytest.param(["pki", "init", "--dir", "{d}", "--validity", "10parsecs"], "10parsecs", id="bad-validity"),
    pytest.param(["pki", "init", "--dir", "{d}", "--ca-validity", "-1h"], "-1h", id="bad-ca-validity"),
    pytest.param(["pki", "init", "--dir", "{d}", "--node-name", "Node_1"], "nodeRegistration.name: Invalid value: \"Node_1\"", id="bad-node-name"),
    pytest.param(["--clock-offset=yesterday", "pki", "init", "--dir", "{d}"], "yesterday", id="bad-clock-offset"),
    pytest.param(["certs", "check-expiration", "--warn-within", "soon"], "soon", id="bad-warn-within"),
    pytest.param(["certs", "check-expiration", "-o", "yaml"], "yaml", id="bad-output-format"),
    pytest.param(["certs", "sign-csr", "--ca-dir", "{d}", "--in", "x.csr"], "--out", id="sign-csr-without-out"),
    pytest.param(["certs", "sign-csr", "--ca-dir", "{d}", "--in", "x", "--out", "y", "--duration", "1x"], "1x", id="bad-duration"),
    pytest.param(["certs", "verify", "x.crt"], "--ca-file", id="verify-without-ca-file"),
    pytest.param(["certs", "frobnicate"], "frobnicate", id="unknown-certs-command"),
    pytest.param(["frobnicate"], "frobnicate", id="unknown-command"),
])
def test_bad_command_line_exits_2(run, cube, show, tmp, args, message):
    target = tmp / "never"
    proc = run(cube, *[a.replace("{d}", str(target)) for a in args], check=False)
    assert proc.returncode == 2, show(proc)
    assert message in proc.stderr, show(proc)
    assert "Traceback" not in proc.stderr and "Sanitizer" not in proc.stderr, show(proc)
    assert not target.exists(), f"a rejected command line still wrote {target}"


def test_bad_clock_offset_env_exits_2(run, cube, show, tmp):
    proc = run(cube, "pki", "init", "--dir", tmp / "never",
               env={"CUBE_CLOCK_OFFSET": "bogus"}, check=False)
    assert proc.returncode == 2, show(proc)
    assert "bogus" in proc.stderr, show(proc)
    assert not (tmp / "never").exists()


# ---- new-csr: cube's own requests --------------------------------------------


def test_new_csr_passes_openssl_req_verify(run, cube, cluster, sign, tmp):
    key, csr = tmp / "n.key", tmp / "n.csr"
    run(cube, "certs", "new-csr", "--node", "node-7", "--dns", "node-7.local",
        "--ip", "10.1.2.3", "--key-out", key, "--out", csr)
    verify = openssl(run, "req", "-verify", "-in", csr, "-noout", check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "verify OK" in verify.stdout + verify.stderr
    subj = openssl(run, "req", "-in", csr, "-noout", "-subject").stdout
    assert "CN = system:node:node-7" in subj and "O = system:nodes" in subj, subj
    text = openssl(run, "req", "-in", csr, "-noout", "-text").stdout
    assert "DNS:node-7.local" in text and "IP Address:10.1.2.3" in text, text
    assert "prime256v1" in text or "P-256" in text, text
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    # The pair works end to end: signed by the cluster CA, matching the key.
    sign(cluster, csr, tmp / "n.crt")
    cert_mod = openssl(run, "x509", "-in", tmp / "n.crt", "-noout", "-pubkey").stdout
    key_mod = openssl(run, "pkey", "-in", key, "-pubout").stdout
    assert cert_mod == key_mod


def test_new_csr_needs_exactly_one_subject(run, cube, tmp, show):
    proc = run(cube, "certs", "new-csr", "--node", "a", "--cn", "b", "--key-out",
               tmp / "k", "--out", tmp / "r", check=False)
    assert proc.returncode == 2, show(proc)
    assert "exactly one of --node and --cn" in proc.stderr
