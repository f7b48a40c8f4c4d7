/* doctor: each failure mode of the seeds' table, judged from a snapshot of
 * the API (fixtures) and the nodes' own files, at a fixed `now`: the
 * finding, its cause and the command that fixes it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cube/doctor.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/strv.h"
#include "base/timeutil.h"
#include "pki/certstore.h"
#include "pki/expiry.h"
#include "pki/pki.h"

#define NOW (INT64_C(1796032800) * NS_PER_SEC) /* 2026-11-30T10:00:00Z */
#define ROLE_NODECLIENT "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
#define ROLE_SELF "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"

#include "testassert.h"

/* ---- fixtures ------------------------------------------------------------------------------ */

static const char *at(int64_t ns)
{
	static char bufs[8][TIME_BUF];
	static int i;
	return time_format_rfc3339_micro(ns, bufs[i++ % 8]);
}

/* A node Ready=status since `since`, in zone (NULL: none), tainted as listed. */
static json_t *node(const char *name, const char *status, const char *zone, const char *taint)
{
	json_t *n = json_pack(
	    "{s:{s:s, s:{}}, s:{}, s:{s:[{s:s, s:s, s:s, s:s, s:s}]}}", "metadata", "name", name,
	    "labels", "spec", "status", "conditions", "type", "Ready", "status", status, "reason",
	    strcmp(status, "True") ? "NodeStatusUnknown" : "KubeletReady", "message",
	    strcmp(status, "True") ? "Kubelet stopped posting node status." : "kubelet is ready",
	    "lastTransitionTime", at(NOW - 60 * NS_PER_SEC));
	if (zone)
		json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"),
		                    "topology.kubernetes.io/zone", json_string(zone));
	if (taint)
		json_object_set_new(
		    json_object_get(n, "spec"), "taints",
		    json_pack("[{s:s, s:s}]", "key", taint, "effect", "NoSchedule"));
	return n;
}

static json_t *lease(const char *name, int64_t renew, int dur_s)
{
	return json_pack("{s:{s:s, s:s}, s:{s:s, s:i}}", "metadata", "name", name, "namespace",
	                 "kube-node-lease", "spec", "renewTime", at(renew), "leaseDurationSeconds",
	                 dur_s);
}

/* A PEM certificate (base64 of it when b64) from a fresh CA-less key. */
static char *cert_pem(const char *cn, int64_t nb, int64_t na)
{
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	struct pki_cert_spec spec = {
	    .cn = cn, .usages = PKI_U_CLIENT_AUTH, .not_before_ns = nb, .not_after_ns = na};
	X509 *cert = pki_cert_new(&spec, key, NULL, key);
	char *pem = pki_cert_pem(cert);
	X509_free(cert);
	EVP_PKEY_free(key);
	return pem;
}

/* A CSR; state "Pending", "Approved" (issued with a certificate nb..na), "Denied". */
static json_t *csr(const char *name, const char *user, const char *state, int64_t created,
                   int64_t nb, int64_t na)
{
	json_t *c = json_pack(
	    "{s:{s:s, s:s}, s:{s:s, s:s, s:[s]}, s:{}}", "metadata", "name", name,
	    "creationTimestamp", at(created), "spec", "username", user, "signerName",
	    "kubernetes.io/kube-apiserver-client-kubelet", "groups",
	    strncmp(user, "system:node:", 12) ? "system:bootstrappers" : "system:nodes", "status");
	json_t *st = json_object_get(c, "status");
	if (!strcmp(state, "Pending"))
		return c;
	json_object_set_new(st, "conditions",
	                    json_pack("[{s:s, s:s, s:s, s:s, s:s}]", "type", state, "status",
	                              "True", "reason",
	                              !strcmp(state, "Denied") ? "CubeFaultDeny" : "AutoApproved",
	                              "message", "m", "lastUpdateTime", at(created + NS_PER_SEC)));
	if (!strcmp(state, "Approved")) {
		char *pem = cert_pem(user, nb, na), *b = b64_encode(pem, strlen(pem));
		json_object_set_new(st, "certificate", json_string(b));
		free(pem);
		free(b);
	}
	return c;
}

struct world {
	json_t *nodes, *leases, *csrs, *pods, *rs, *sts, *crbs, *reviews;
	struct doctor_node_local locals[4];
	size_t n_locals;
	struct doctor_input in;
	struct doctor_report r;
};

static void world_init(struct world *w, int nodes)
{
	static const char *const names[] = {"node-0", "node-1", "node-2", "node-3"};
	memset(w, 0, sizeof(*w));
	w->nodes = json_array();
	w->leases = json_array();
	w->csrs = json_array();
	w->pods = json_array();
	w->rs = json_array();
	w->sts = json_array();
	w->crbs = json_pack("[{s:{s:s}, s:[{}]}, {s:{s:s}, s:[{}]}]", "roleRef", "name",
	                    ROLE_NODECLIENT, "subjects", "roleRef", "name", ROLE_SELF, "subjects");
	w->reviews = json_object();
	for (int i = 0; i < nodes; i++) {
		json_array_append_new(w->nodes, node(names[i], "True", NULL, NULL));
		json_array_append_new(w->leases, lease(names[i], NOW - NS_PER_SEC, 40));
		json_array_append_new(w->csrs, csr(names[i], "system:bootstrap:abcdef", "Approved",
		                                   NOW - NS_PER_DAY, NOW - NS_PER_DAY,
		                                   NOW + 364 * NS_PER_DAY));
	}
	w->in = (struct doctor_input){
	    .now_ns = NOW, .warn_ns = 30 * NS_PER_DAY, .csr_pending_ns = 5 * NS_PER_MIN};
}

/* A local node dir's evidence. */
static struct doctor_node_local *local(struct world *w, const char *name, int rotate, int64_t nb,
                                       int64_t na)
{
	struct doctor_node_local *l = &w->locals[w->n_locals++];
	char dir[256];

	snprintf(dir, sizeof(dir), "/data/nodes/%s", name);
	l->node = strdup(name);
	l->dir = strdup(dir);
	snprintf(dir, sizeof(dir), "/data/nodes/%s/pki", name);
	l->pki_dir = strdup(dir);
	snprintf(dir, sizeof(dir), "/data/nodes/%s/pki/kubelet-client-current.pem", name);
	l->cert_path = strdup(dir);
	l->not_before_ns = nb;
	l->not_after_ns = na;
	l->rotate = rotate;
	l->running = 1;
	return l;
}

static struct doctor_report *diagnose(struct world *w)
{
	w->in.nodes = w->nodes;
	w->in.leases = w->leases;
	w->in.csrs = w->csrs;
	w->in.pods = w->pods;
	w->in.replicasets = w->rs;
	w->in.statefulsets = w->sts;
	w->in.bindings = w->crbs;
	w->in.reviews = w->reviews;
	w->in.locals = w->locals;
	w->in.n_locals = w->n_locals;
	doctor_diagnose(&w->in, &w->r);
	return &w->r;
}

static void world_free(struct world *w)
{
	doctor_report_free(&w->r);
	for (size_t i = 0; i < w->n_locals; i++)
		doctor_node_local_free(&w->locals[i]);
	json_decref(w->nodes);
	json_decref(w->leases);
	json_decref(w->csrs);
	json_decref(w->pods);
	json_decref(w->rs);
	json_decref(w->sts);
	json_decref(w->crbs);
	json_decref(w->reviews);
}

static const struct doctor_finding *find(const struct doctor_report *r, const char *check,
                                         const char *object)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->v[i].check, check) && !strcmp(r->v[i].object, object))
			return &r->v[i];
	print_error("no %s finding for %s among %zu\n", check, object, r->n);
	for (size_t i = 0; i < r->n; i++)
		print_error("  %s %s: %s\n", r->v[i].check, r->v[i].object, r->v[i].cause);
	fail();
	return NULL;
}

static char *joined(const struct strv *sv)
{
	static char *last;
	free(last);
	return last = strv_join(sv, "\n");
}

/* A node not Ready for 60 s whose Lease stopped 70 s ago. */
static void lose(struct world *w, size_t i)
{
	json_t *n = json_array_get(w->nodes, i);
	char *name =
	    strdup(json_string_value(json_object_get(json_object_get(n, "metadata"), "name")));
	json_array_set_new(w->nodes, i,
	                   node(name, "Unknown", NULL, "node.kubernetes.io/unreachable"));
	json_array_set_new(w->leases, i, lease(name, NOW - 70 * NS_PER_SEC, 40));
	free(name);
}

/* ---- the tests ------------------------------------------------------------------------------- */

static void test_healthy(void **state)
{
	struct world w;
	world_init(&w, 3);
	local(&w, "node-0", 1, NOW - NS_PER_DAY, NOW + 364 * NS_PER_DAY);
	struct doctor_report *r = diagnose(&w);
	assert_int_equal(r->n, 0);
	assert_int_equal(doctor_worst(r), DOCTOR_OK);
	assert_int_equal(r->ready, 3);
	assert_string_equal(r->soonest, "node-0's client certificate in 364d");
	json_t *j = doctor_report_json(r);
	assert_true(json_is_true(json_object_get(j, "healthy")));
	json_decref(j);
	world_free(&w);
}

/* Scenario 1: rotation off, the certificate expired: plan 1 and rotation on. */
static void test_expired_rotation_off(void **state)
{
	struct world w;
	world_init(&w, 3);
	lose(&w, 1);
	local(&w, "node-1", 0, NOW - NS_PER_HOUR, NOW - 4 * NS_PER_MIN);
	w.in.data_dir = "/data";
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "NodeNotReady", "node/node-1");
	assert_int_equal(f->severity, DOCTOR_CRITICAL);
	assert_string_equal(f->title, "client certificate expired");
	assert_string_equal(f->cause, "node-1: client certificate expired 4m ago; rotation is off "
	                              "(rotateCertificates: false), so nothing renews it: apply "
	                              "plan 1 and turn rotation on");
	assert_int_equal(f->fix.n, 2);
	assert_string_equal(f->fix.v[0], "sed -i 's/^rotateCertificates: false/rotateCertificates: "
	                                 "true/' /data/nodes/node-1/config.yaml");
	assert_string_equal(f->fix.v[1], "plan 1: rm -f /data/nodes/node-1/pki/kubelet-client-"
	                                 "current.pem && cube restart --data-dir /data node-1");
	assert_contains(joined(&f->evidence), "Lease kube-node-lease/node-1 last renewed 70s ago "
	                                      "(leaseDurationSeconds 40): stale");
	assert_contains(joined(&f->evidence), "taints: node.kubernetes.io/unreachable:NoSchedule");
	assert_contains(joined(&f->evidence), "NotAfter 2026-11-30T09:56:00Z (expired 4m ago)");
	assert_int_equal(doctor_worst(r), DOCTOR_CRITICAL);
	world_free(&w);
}

/* Rotation on, nothing asked since: the seeds' sentence; kubeadm's paths
 * without a data dir. */
static void test_expired_no_csr_since(void **state)
{
	struct world w;
	world_init(&w, 3);
	lose(&w, 2);
	local(&w, "node-2", 1, NOW - NS_PER_HOUR, NOW - 4 * NS_PER_MIN);
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "NodeNotReady", "node/node-2");
	assert_string_equal(f->cause, "node-2: client certificate expired 4m ago; no CSR from "
	                              "system:node:node-2 since; rotation cannot recover: apply "
	                              "plan 1");
	assert_string_equal(f->fix.v[0],
	                    "plan 1: rm -f /data/nodes/node-2/pki/kubelet-client-current.pem && "
	                    "systemctl restart kubelet   # on node-2: the kubelet bootstraps again "
	                    "with --bootstrap-kubeconfig, which needs a valid token (kubeadm join "
	                    "removes bootstrap-kubelet.conf: write one with `kubeadm token create`, "
	                    "or use `kubeadm kubeconfig user --org system:nodes --client-name "
	                    "system:node:node-2` as kubelet.conf)");
	world_free(&w);
}

/* The renewal CSR is Pending: RBAC says no (the approver's own review). */
static void test_expired_csr_pending_no_binding(void **state)
{
	struct world w;
	world_init(&w, 3);
	lose(&w, 1);
	local(&w, "node-1", 1, NOW - NS_PER_HOUR, NOW - NS_PER_MIN);
	json_array_append_new(
	    w.csrs, csr("csr-abcde", "system:node:node-1", "Pending", NOW - 10 * NS_PER_MIN, 0, 0));
	json_object_set_new(w.reviews, "csr-abcde",
	                    json_pack("{s:b, s:b}", "selfnodeclient", 0, "nodeclient", 0));
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "NodeNotReady", "node/node-1");
	assert_contains(f->cause,
	                "node-1: client certificate expired 60s ago; its CSR csr-abcde is "
	                "Pending: no RBAC binding lets system:node:node-1 (groups "
	                "system:nodes) create certificatesigningrequests/selfnodeclient");
	assert_string_equal(f->fix.v[0], "kubectl create clusterrolebinding "
	                                 "kubeadm:node-autoapprove-certificate-rotation "
	                                 "--clusterrole=" ROLE_SELF " --group=system:nodes");
	assert_string_equal(f->fix.v[1], "kubectl certificate approve csr-abcde");
	/* Pending 10m > 5m: a finding of its own too. */
	f = find(r, "CSRPending", "csr/csr-abcde");
	assert_string_equal(f->title, "Pending for 10m");
	assert_int_equal(r->pending_csrs, 1);
	world_free(&w);
}

static void test_csr_pending_approver_off(void **state)
{
	struct world w;
	world_init(&w, 3);
	json_array_append_new(
	    w.csrs, csr("csr-fghij", "system:node:node-0", "Pending", NOW - 6 * NS_PER_MIN, 0, 0));
	json_object_set_new(w.reviews, "csr-fghij",
	                    json_pack("{s:b, s:b}", "selfnodeclient", 1, "nodeclient", 0));
	w.in.controllers = "*,-csrapproving";
	w.in.data_dir = "/data";
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "CSRPending", "csr/csr-fghij");
	assert_int_equal(f->severity, DOCTOR_WARNING);
	assert_string_equal(f->cause, "the controller manager runs without its CSR approver "
	                              "(--controllers=*,-csrapproving): nothing approves the CSR");
	assert_string_equal(f->fix.v[1], "kubectl certificate approve csr-fghij");
	assert_int_equal(doctor_worst(r), DOCTOR_WARNING);
	world_free(&w);
	/* The approver off and RBAC refusing too: both, the approver first. */
	world_init(&w, 1);
	json_array_append_new(
	    w.csrs, csr("csr-both", "system:node:node-0", "Pending", NOW - 6 * NS_PER_MIN, 0, 0));
	json_object_set_new(w.reviews, "csr-both",
	                    json_pack("{s:b, s:b}", "selfnodeclient", 0, "nodeclient", 0));
	w.in.controllers = "*,-csrapproving";
	r = diagnose(&w);
	f = find(r, "CSRPending", "csr/csr-both");
	assert_contains(f->cause, "nothing approves the CSR; once it runs, no RBAC binding lets "
	                          "system:node:node-0");
	assert_int_equal(f->fix.n, 3);
	assert_contains(f->fix.v[1], "kubeadm:node-autoapprove-certificate-rotation");
	world_free(&w);
	/* Younger than --csr-pending-after: counted, not reported. */
	world_init(&w, 1);
	json_array_append_new(
	    w.csrs, csr("csr-young", "system:node:node-0", "Pending", NOW - 4 * NS_PER_MIN, 0, 0));
	r = diagnose(&w);
	assert_int_equal(r->n, 0);
	assert_int_equal(r->pending_csrs, 1);
	world_free(&w);
}

static void test_denied_grouped_per_node(void **state)
{
	struct world w;
	world_init(&w, 2);
	json_array_append_new(
	    w.csrs, csr("csr-d1", "system:node:node-1", "Denied", NOW - 3 * NS_PER_MIN, 0, 0));
	json_array_append_new(
	    w.csrs, csr("csr-d2", "system:node:node-1", "Denied", NOW - 2 * NS_PER_MIN, 0, 0));
	/* Older than an hour: history, not a finding. */
	json_array_append_new(
	    w.csrs, csr("csr-old", "system:node:node-0", "Denied", NOW - 2 * NS_PER_HOUR, 0, 0));
	struct doctor_report *r = diagnose(&w);
	assert_int_equal(r->n, 1);
	const struct doctor_finding *f = find(r, "CSRDenied", "node/node-1");
	assert_string_equal(f->title, "2 CSRs Denied in the last hour");
	assert_string_equal(
	    f->symptom, "certificate requests for system:node:node-1 are denied (newest: csr-d2)");
	assert_contains(f->cause, "(reason CubeFaultDeny)");
	assert_int_equal(f->evidence.n, 2);
	world_free(&w);
}

static void test_foreign_ca_stopped_unreachable(void **state)
{
	struct world w;
	struct doctor_node_local *l;
	world_init(&w, 4);
	for (size_t i = 1; i < 4; i++)
		lose(&w, i);
	l = local(&w, "node-1", 1, NOW - NS_PER_HOUR, NOW + 300 * NS_PER_DAY);
	l->foreign_issuer = strdup("foreign-ca");
	l = local(&w, "node-2", 1, NOW - NS_PER_HOUR, NOW + 300 * NS_PER_DAY);
	l->running = 0;
	l = local(&w, "node-3", 1, NOW - NS_PER_HOUR, NOW + 300 * NS_PER_DAY);
	l->log_err = strdup("error getting node \"node-3\": Get \"https://127.0.0.1:6443/api/v1/"
	                    "nodes/node-3\": dial tcp 127.0.0.1:6443: connect: network is "
	                    "unreachable");
	l->log_line = strdup("E1130 ...");
	w.in.data_dir = "/data";
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "NodeNotReady", "node/node-1");
	assert_string_equal(f->title, "client certificate from another CA");
	assert_contains(f->cause, "signed by CN=foreign-ca, not the cluster CA");
	assert_contains(f->fix.v[0], "plan 1: rm -f /data/nodes/node-1/pki/");
	f = find(r, "NodeNotReady", "node/node-2");
	assert_string_equal(f->title, "the kubelet is not running");
	assert_string_equal(f->fix.v[0], "cube restart --data-dir /data node-2");
	f = find(r, "NodeNotReady", "node/node-3");
	assert_string_equal(f->title, "the API server is unreachable from the node");
	assert_contains(f->cause, "connect: network is unreachable");
	assert_string_equal(f->fix.v[0], "restore the network path from the node to the API "
	                                 "server (cube fault --data-dir /data heal node-3)");
	/* 3 of 4 not Ready: more than 2 and at least 55 %. */
	f = find(r, "ZoneDisruption", "zone/(none)");
	assert_string_equal(f->title, "PartialDisruption");
	assert_int_equal(f->severity, DOCTOR_WARNING);
	assert_contains(f->cause, "eviction slows to 0.00 nodes/s");
	world_free(&w);
}

/* The kubelet's clock: ahead while Ready (its Lease from the future), and
 * its own x509 text when it is cut off. */
static void test_clock_skew(void **state)
{
	struct world w;
	struct doctor_node_local *l;
	world_init(&w, 4);
	json_array_set_new(w.leases, 0, lease("node-0", NOW + 400 * NS_PER_DAY, 40));
	lose(&w, 1);
	l = local(&w, "node-1", 1, NOW - NS_PER_HOUR, NOW + 300 * NS_PER_DAY);
	l->log_err = strdup("Get \"https://127.0.0.1:6443/\": tls: failed to verify certificate: "
	                    "x509: certificate has expired or is not yet valid: current time "
	                    "2026-11-30T10:10:00Z is after 2026-11-30T10:05:00Z");
	/* Read on the node: behind by 2 hours, Ready. */
	l = local(&w, "node-2", 1, NOW - NS_PER_HOUR, NOW + 300 * NS_PER_DAY);
	l->clock_ns = NOW - 2 * NS_PER_HOUR;
	/* A Lease 9 s late on a Ready node (a partition just healed): no clock. */
	json_array_set_new(w.leases, 3, lease("node-3", NOW - 9 * NS_PER_SEC, 4));
	w.in.data_dir = "/data";
	struct doctor_report *r = diagnose(&w);
	assert_int_equal(r->n, 3);
	const struct doctor_finding *f = find(r, "NodeClockSkew", "node/node-0");
	assert_int_equal(f->severity, DOCTOR_WARNING);
	assert_string_equal(f->title, "the node's clock is 400d ahead");
	assert_string_equal(f->symptom, "Ready, but its Lease's renewTime is 400d after now");
	f = find(r, "NodeNotReady", "node/node-1");
	assert_string_equal(f->title, "the node's clock is wrong");
	assert_contains(f->cause, "node-1: the node's clock is 10m ahead");
	assert_string_equal(f->fix.v[0],
	                    "set the node's clock right (cube fault --data-dir /data clock-skew "
	                    "node-1 0)");
	f = find(r, "NodeClockSkew", "node/node-2");
	assert_string_equal(f->title, "the node's clock is 120m behind");
	assert_string_equal(f->symptom, "Ready, but the node's clock reads 2026-11-30T08:00:00Z");
	world_free(&w);
}

/* From the API alone: the newest certificate issued to the node expired. */
static void test_api_only_expired(void **state)
{
	struct world w;
	world_init(&w, 3);
	lose(&w, 0);
	json_array_append_new(w.csrs, csr("csr-old1", "system:node:node-0", "Approved",
	                                  NOW - 2 * NS_PER_DAY, NOW - 2 * NS_PER_DAY,
	                                  NOW - 3 * NS_PER_MIN));
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "NodeNotReady", "node/node-0");
	assert_string_equal(f->cause, "node-0: the newest client certificate issued to "
	                              "system:node:node-0 (CSR csr-old1) expired 3m ago and no CSR "
	                              "since renewed it: apply plan 1");
	assert_contains(joined(&f->evidence),
	                "CSR csr-old1 by system:node:node-0: Approved,Issued");
	world_free(&w);
}

/* Inside 30 days: a warning when rotation will not renew it (off, or past
 * 90 % of the life); not when rotation is on and its time has not come. */
static void test_expiring(void **state)
{
	struct world w;
	world_init(&w, 3);
	local(&w, "node-0", 0, NOW - 355 * NS_PER_DAY, NOW + 10 * NS_PER_DAY);
	local(&w, "node-1", 1, NOW - 355 * NS_PER_DAY, NOW + 10 * NS_PER_DAY);
	local(&w, "node-2", 1, NOW - 10 * NS_PER_DAY, NOW + 10 * NS_PER_DAY); /* 50 % */
	struct doctor_report *r = diagnose(&w);
	assert_int_equal(r->n, 2);
	const struct doctor_finding *f = find(r, "CertificateExpiring", "node/node-0");
	assert_string_equal(f->title, "client certificate expires in 10d");
	assert_string_equal(f->symptom, "node-0's client certificate expires in 10d (NotAfter "
	                                "2026-12-10T10:00:00Z), inside the 30d warning window");
	assert_contains(f->cause, "rotation is off");
	f = find(r, "CertificateExpiring", "node/node-1");
	assert_string_equal(f->cause, "node-1: rotation is overdue: the kubelet renews at 70-90% "
	                              "of the certificate's life, and it is past 90%; no renewal "
	                              "CSR since it was issued");
	assert_string_equal(r->soonest, "node-0's client certificate in 10d");
	world_free(&w);
	/* --warn-within 5d: none. */
	world_init(&w, 1);
	local(&w, "node-0", 0, NOW - 355 * NS_PER_DAY, NOW + 10 * NS_PER_DAY);
	w.in.warn_ns = 5 * NS_PER_DAY;
	assert_int_equal(diagnose(&w)->n, 0);
	world_free(&w);
}

/* The kubelet's own word (cube's opt-in condition), from the API alone. */
static void test_reported_condition(void **state)
{
	struct world w;
	world_init(&w, 2);
	json_t *conds = jx_get(json_array_get(w.nodes, 1), "status.conditions");
	json_array_append_new(
	    conds, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "ClientCertificateExpiring",
	                     "status", "True", "reason", "ClientCertificateNearExpiry", "message",
	                     "client certificate /var/lib/kubelet/pki/kubelet-client-"
	                     "current.pem (NotAfter 2026-12-01T10:00:00Z) is past 90% of its life and not renewed; "
	                     "rotation is off",
	                     "lastTransitionTime", at(NOW - NS_PER_HOUR)));
	struct doctor_report *r = diagnose(&w);
	assert_int_equal(r->n, 1);
	const struct doctor_finding *f = find(r, "CertificateExpiring", "node/node-1");
	assert_string_equal(f->title, "the kubelet reports its client certificate expiring");
	assert_contains(f->symptom, "(NotAfter 2026-12-01T10:00:00Z) is past 90% of its life");
	assert_contains(f->fix.v[0],
	                "plan 1: rm -f /var/lib/kubelet/pki/kubelet-client-current.pem");
	world_free(&w);
}

static void test_control_plane_certs(void **state)
{
	struct world w;
	struct expiry_row rows[] = {
	    {.name = "apiserver",
	     .path = "/data/pki/apiserver.crt",
	     .status = EXPIRY_EXPIRED,
	     .not_after_ns = NOW - NS_PER_DAY},
	    {.name = "admin.conf",
	     .path = "/data/admin.conf",
	     .status = EXPIRY_WARNING,
	     .not_after_ns = NOW + 20 * NS_PER_DAY},
	    {.name = "ca",
	     .path = "/data/pki/ca.crt",
	     .status = EXPIRY_OK,
	     .not_after_ns = NOW + 3000 * NS_PER_DAY},
	};
	struct expiry_report rep = {.rows = rows, .n = 3};
	world_init(&w, 1);
	w.in.certs = &rep;
	struct doctor_report *r = diagnose(&w);
	assert_int_equal(r->n, 2);
	assert_int_equal(find(r, "CertificateExpired", "certificate/apiserver")->severity,
	                 DOCTOR_CRITICAL);
	assert_string_equal(find(r, "CertificateExpiring", "certificate/admin.conf")->title,
	                    "expires in 20d");
	world_free(&w);
}

static void test_bindings_missing(void **state)
{
	struct world w;
	world_init(&w, 1);
	json_array_remove(w.crbs, 1); /* selfnodeclient's */
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f =
	    find(r, "AutoApproveBindingMissing", "clusterrolebindings");
	assert_string_equal(f->symptom, "nodes' renewal CSRs will stay Pending");
	assert_int_equal(f->fix.n, 1);
	assert_contains(f->fix.v[0], "kubeadm:node-autoapprove-certificate-rotation");
	world_free(&w);
}

static json_t *pod(const char *name, const char *node, const char *owner_kind, const char *uid,
                   bool terminating)
{
	json_t *p = json_pack("{s:{s:s, s:s, s:[{s:s, s:s, s:b}]}, s:{}, s:{s:s}}", "metadata",
	                      "name", name, "namespace", "default", "ownerReferences", "kind",
	                      owner_kind, "uid", uid, "controller", 1, "spec", "status", "phase",
	                      node ? "Running" : "Pending");
	if (node)
		jx_set(p, "spec.nodeName", json_string(node));
	if (terminating)
		jx_set(p, "metadata.deletionTimestamp", json_string(at(NOW - NS_PER_MIN)));
	return p;
}

/* Evicted pods Terminating on the lost node beside their replacements;
 * a StatefulSet's pod that waits; pods Pending on the taint. */
static void test_workloads_and_pending(void **state)
{
	struct world w;
	world_init(&w, 3);
	lose(&w, 1);
	json_array_append_new(w.rs, json_pack("{s:{s:s, s:s, s:s}, s:{s:i}}", "metadata", "name",
	                                      "web-5d4f", "namespace", "default", "uid", "rs-1",
	                                      "spec", "replicas", 2));
	json_array_append_new(w.sts, json_pack("{s:{s:s, s:s, s:s}, s:{s:i}}", "metadata", "name",
	                                       "db", "namespace", "default", "uid", "sts-1", "spec",
	                                       "replicas", 2));
	json_array_append_new(w.pods, pod("web-a", "node-0", "ReplicaSet", "rs-1", false));
	json_array_append_new(w.pods, pod("web-b", "node-2", "ReplicaSet", "rs-1", false));
	json_array_append_new(w.pods, pod("web-c", "node-1", "ReplicaSet", "rs-1", true));
	/* Terminating on a Ready node: an ordinary graceful deletion. */
	json_array_append_new(w.pods, pod("web-d", "node-0", "ReplicaSet", "rs-1", true));
	json_array_append_new(w.pods, pod("db-0", "node-0", "StatefulSet", "sts-1", false));
	json_array_append_new(w.pods, pod("db-1", "node-1", "StatefulSet", "sts-1", true));
	json_t *p = pod("pinned", NULL, "ReplicaSet", "none", false);
	jx_set(p, "status.conditions",
	       json_pack("[{s:s, s:s, s:s, s:s}]", "type", "PodScheduled", "status", "False",
	                 "reason", "Unschedulable", "message",
	                 "0/3 nodes are available: 1 node(s) had untolerated taint "
	                 "{node.kubernetes.io/unreachable: }, 2 node(s) didn't match Pod's node "
	                 "affinity/selector."));
	json_array_append_new(w.pods, p);
	struct doctor_report *r = diagnose(&w);

	const struct doctor_finding *f = find(r, "ReplicasExceeded", "replicaset/default/web-5d4f");
	assert_string_equal(f->symptom, "web-5d4f wants 2 replicas and has 2 active pods plus 1 "
	                                "Terminating on node-1");
	assert_string_equal(f->fix.v[1], "kubectl delete pod -n default --force --grace-period=0 "
	                                 "web-c   # only if the node is really gone");
	f = find(r, "StatefulSetPodStuck", "statefulset/default/db");
	assert_contains(f->symptom, "db-1 Terminating on node-1");
	f = find(r, "PodsPendingOnTaints", "pods");
	assert_string_equal(f->title, "1 pod Pending on taints");
	assert_contains(f->cause, "tainted node-1 (not Ready)");
	assert_contains(f->fix.v[1], "kubectl patch pod pinned -n default -p");
	world_free(&w);
}

static void test_zones(void **state)
{
	struct world w;
	world_init(&w, 4);
	for (size_t i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "node-%zu", i);
		json_array_set_new(w.nodes, i,
		                   node(name, i < 3 ? "Unknown" : "True", i < 3 ? "a" : "b", NULL));
	}
	struct doctor_report *r = diagnose(&w);
	const struct doctor_finding *f = find(r, "ZoneDisruption", "zone/:\\x00:a");
	assert_string_equal(f->title, "FullDisruption");
	assert_int_equal(f->severity, DOCTOR_CRITICAL);
	assert_contains(f->cause, "evicted at --node-eviction-rate (0.10/s)");
	world_free(&w);
	/* Every node down: master disruption mode. */
	world_init(&w, 3);
	for (size_t i = 0; i < 3; i++)
		lose(&w, i);
	r = diagnose(&w);
	f = find(r, "ZoneDisruption", "zone/(none)");
	assert_contains(f->cause, "\"master disruption mode\"");
	world_free(&w);
}

static void test_api_error_and_json(void **state)
{
	struct doctor_input in = {.now_ns = NOW,
	                          .api_error = "GET /api/v1/nodes: 401 Unauthorized"};
	struct doctor_report r;
	doctor_diagnose(&in, &r);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.v[0].check, "APIUnreachable");
	assert_contains(r.v[0].cause, "refuses this kubeconfig's credentials");
	json_t *j = doctor_report_json(&r);
	assert_false(json_is_true(json_object_get(j, "healthy")));
	assert_string_equal(json_string_value(json_object_get(j, "worst")), "critical");
	assert_int_equal(json_integer_value(jx_get(j, "summary.critical")), 1);
	assert_string_equal(jx_str(json_array_get(json_object_get(j, "findings"), 0), "check"),
	                    "APIUnreachable");
	json_decref(j);
	doctor_report_free(&r);
}

/* ---- a node's own files ------------------------------------------------------------------------
 */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char *p = file_join(dir, name);
	assert_int_equal(file_write_atomic(p, text, strlen(text), 0600), 0);
	free(p);
}

static void test_local_read(void **state)
{
	char root[] = "/tmp/test_doctor.XXXXXX", *dir, *pki, *ca_pem;
	EVP_PKEY *ca_key = pki_key_new(PKI_KEY_ECDSA), *key = pki_key_new(PKI_KEY_ECDSA);
	X509 *ca = pki_ca_new(ca_key, "kubernetes", 3650 * NS_PER_DAY), *foreign, *cert;
	const char *orgs[] = {"system:nodes", NULL};
	struct pki_cert_spec spec = {.cn = "system:node:node-7",
	                             .orgs = orgs,
	                             .usages = PKI_U_CLIENT_AUTH,
	                             .not_before_ns = NOW - NS_PER_DAY,
	                             .not_after_ns = NOW - NS_PER_MIN};
	struct doctor_node_local l;

	assert_non_null(mkdtemp(root));
	dir = file_join(root, "kubelet");
	pki = file_join(dir, "pki");
	assert_int_equal(file_mkdirs(pki, 0700), 0);
	cert = pki_cert_new(&spec, key, ca, ca_key);
	assert_int_equal(certstore_update(pki, CERTSTORE_CLIENT, cert, NULL, key, NULL), 0);
	write_file(dir, "config.yaml",
	           "apiVersion: kubelet.config.k8s.io/v1beta1\n"
	           "kind: KubeletConfiguration\nrotateCertificates: false\n");
	write_file(dir, "kubelet.log",
	           "I1130 09:59:00.000000 1 node.c:1] \"Successfully registered node\"\n"
	           "E1130 09:59:58.000000 1 node.c:531] \"Failed to update lease\" "
	           "err=\"Unauthorized\"\n"
	           "E1130 09:59:59.000000 1 node.c:385] \"Unable to update node status\" "
	           "err=\"update node status exceeds retry count\"\n");
	ca_pem = pki_cert_pem(ca);
	doctor_node_local_read(dir, ca_pem, NOW, &l);
	assert_string_equal(l.node, "node-7"); /* from the CN, not the dir */
	assert_string_equal(l.dir, dir);
	assert_int_equal(l.not_after_ns, NOW - NS_PER_MIN);
	assert_null(l.foreign_issuer);
	assert_int_equal(l.rotate, 0);
	assert_int_equal(l.running, -1);
	assert_string_equal(l.log_err, "Unauthorized"); /* the generic one skipped */
	assert_contains(l.log_line, "Failed to update lease");
	doctor_node_local_free(&l);

	/* Given the pki dir itself; a certificate of another CA. */
	EVP_PKEY *fkey = pki_key_new(PKI_KEY_ECDSA);
	foreign = pki_ca_new(fkey, "foreign-ca", 3650 * NS_PER_DAY);
	X509_free(cert);
	spec.not_after_ns = NOW + NS_PER_DAY;
	cert = pki_cert_new(&spec, key, foreign, fkey);
	assert_int_equal(certstore_update(pki, CERTSTORE_CLIENT, cert, NULL, key, NULL), 0);
	doctor_node_local_read(pki, ca_pem, NOW, &l);
	assert_string_equal(l.dir, dir);
	assert_string_equal(l.foreign_issuer, "foreign-ca");
	assert_int_equal(l.rotate, 0);
	doctor_node_local_free(&l);

	X509_free(foreign);
	EVP_PKEY_free(fkey);
	X509_free(cert);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(key);
	free(ca_pem);
	free(pki);
	free(dir);
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthy),
	    cmocka_unit_test(test_expired_rotation_off),
	    cmocka_unit_test(test_expired_no_csr_since),
	    cmocka_unit_test(test_expired_csr_pending_no_binding),
	    cmocka_unit_test(test_csr_pending_approver_off),
	    cmocka_unit_test(test_denied_grouped_per_node),
	    cmocka_unit_test(test_foreign_ca_stopped_unreachable),
	    cmocka_unit_test(test_clock_skew),
	    cmocka_unit_test(test_api_only_expired),
	    cmocka_unit_test(test_expiring),
	    cmocka_unit_test(test_reported_condition),
	    cmocka_unit_test(test_control_plane_certs),
	    cmocka_unit_test(test_bindings_missing),
	    cmocka_unit_test(test_workloads_and_pending),
	    cmocka_unit_test(test_zones),
	    cmocka_unit_test(test_api_error_and_json),
	    cmocka_unit_test(test_local_read),
	};
	clock_use_virtual(NOW);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
