/*
 * csrapproving — upstream's sarapprove: auto-approve kubelet client
 * certificates, a node's own renewal ("selfnodeclient") before a bootstrap
 * request ("nodeclient"); everything else is left Pending, never denied.
 *
 * As upstream, it asks the API server a SubjectAccessReview "may the
 * requestor create certificatesigningrequests/<subresource> in
 * certificates.k8s.io?" with the requestor recorded in the CSR
 * (spec.username, uid, groups, extra — the API server filled them in), so
 * RBAC decides: kubeadm's bindings give nodeclient to the default node
 * token's group and selfnodeclient to system:nodes. Without them the CSR
 * stays Pending (upstream's IgnorableError, retried with backoff).
 *
 * cube's own --approve-kubelet-serving also approves a kubelet-serving CSR
 * when the node asks for itself and every SAN is one of its Node's
 * status.addresses (read from the API server).
 */
#include "controllers/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_SELF "Auto approving self kubelet client certificate after SubjectAccessReview."
#define MSG_NODE "Auto approving kubelet client certificate after SubjectAccessReview."
#define MSG_SERVING                                                                                \
	"Auto approving kubelet serving certificate: requested by the node itself for its "        \
	"own addresses."

struct csrapproving {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct workqueue *q;
	struct job_list jobs;
	/* Nodes, for --approve-kubelet-serving (cube's own): read from the
	 * manager's informer, since certificate-controller may not get nodes. */
	struct informer *nodes;
};

static bool in_groups(const json_t *csr, const char *g)
{
	json_t *v;
	size_t i;
	json_array_foreach(jx_get(csr, "spec.groups"), i, v)
	{
		if (json_is_string(v) && !strcmp(json_string_value(v), g))
			return true;
	}
	return false;
}

static const char *name_of(const struct job *j)
{
	return jx_str(j->csr, "metadata.name") ?: j->key;
}

/* ---- approve ---------------------------------------------------------------------- */

static void on_approved(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct csrapproving *c = j->ctl;
	char msg[1024], why[900];

	if (status == 200) {
		job_done(&c->jobs, j, false);
		return;
	}
	snprintf(msg, sizeof(msg), "error updating approval for csr: %s",
		 api_error(why, sizeof(why), status, body, err));
	sync_failed(j->key, msg, false);
	job_done(&c->jobs, j, true);
}

static void approve(struct csrapproving *c, struct job *j, const char *message)
{
	json_t *next = csr_with_condition(j->csr, "Approved", "AutoApproved", message);
	char path[512];

	LOG_INFO("\"%s\" csr=\"%s\"", message, name_of(j));

	rest_do(c->rest, "PUT", csr_path(path, sizeof(path), name_of(j), "approval"), next,
		on_approved, j);
	json_decref(next);
}

/* ---- kubelet client: selfnodeclient, then nodeclient ----------------------------------- */

/* The job's aux while its reviews are asked. */
struct sar {
	bool self; /* asking selfnodeclient (then nodeclient) */
	char tried[64];
};

static void ask_one(struct csrapproving *c, struct job *j);

json_t *csrapproving_review(const json_t *csr, const char *subresource)
{
	json_t *spec = json_pack("{s:{s:s,s:s,s:s,s:s}}", "resourceAttributes", "group",
				 "certificates.k8s.io", "resource", "certificatesigningrequests",
				 "subresource", subresource, "verb", "create");
	static const char *const copied[] = {"username", "uid", "groups", "extra"};
	for (size_t i = 0; i < 4; i++) {
		json_t *v = jx_get(csr, "spec");
		v = json_object_get(v, copied[i]);
		if (v)
			json_object_set(spec, i ? copied[i] : "user", v);
	}
	return json_pack("{s:s,s:s,s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
			 "SubjectAccessReview", "spec", spec);
}

static void on_review(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct sar *q = j->aux;
	struct csrapproving *c = j->ctl;
	char msg[1024], why[900];

	if (status != 201 && status != 200) {
		snprintf(msg, sizeof(msg), "%s", api_error(why, sizeof(why), status, body, err));
		sync_failed(j->key, msg, false);
		job_done(&c->jobs, j, true);
		return;
	}
	if (json_is_true(jx_get(body, "status.allowed"))) {
		approve(c, j, q->self ? MSG_SELF : MSG_NODE);
		return;
	}
	if (q->self) {
		q->self = false; /* then as a bootstrap request */
		ask_one(c, j);
		return;
	}
	/* upstream's IgnorableError: logged at V(4), retried with backoff. */
	snprintf(msg, sizeof(msg),
		 "recognized csr \"%s\" as [%s] but subject access review was not approved",
		 name_of(j), q->tried);
	sync_failed(j->key, msg, true);
	job_done(&c->jobs, j, true);
}

static void ask_one(struct csrapproving *c, struct job *j)
{
	struct sar *q = j->aux;
	const char *sub = q->self ? "selfnodeclient" : "nodeclient";
	json_t *review = csrapproving_review(j->csr, sub);
	size_t n = strlen(q->tried);

	snprintf(q->tried + n, sizeof(q->tried) - n, "%s%s", n ? " " : "", sub);
	rest_do(c->rest, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review,
		on_review, j);
	json_decref(review);
}

/* Asked in upstream's order: a node's own renewal first. */
static void ask(struct csrapproving *c, struct job *j, bool self)
{
	struct sar *q = calloc(1, sizeof(*q));
	if (!q)
		abort();
	q->self = self;
	free(j->aux);
	j->aux = q;
	ask_one(c, j);
}

static void client_csr(struct csrapproving *c, struct job *j, const struct pki_csr_info *info)
{
	bool bad;
	unsigned usages = csr_usages(j->csr, &bad);
	const char *user = jx_str(j->csr, "spec.username") ?: "";
	char why[256];

	if (csr_check_kubelet_client(info, usages, bad, why, sizeof(why))) {
		/* Not recognized: upstream stays silent and leaves it Pending. */
		LOG_V(2, "\"Not a kubelet client certificate request, leaving it pending\" csr=\"%s\" "
			 "reason=\"%s\"",
		      name_of(j), why);
		job_done(&c->jobs, j, false);
		return;
	}
	ask(c, j, !strcmp(user, info->cn));
}

/* ---- kubelet serving (cube's --approve-kubelet-serving) -------------------------------- */

static void leave_pending(struct csrapproving *c, struct job *j, const char *why)
{
	char q[1024];
	log_quote(q, sizeof(q), why);
	LOG_INFO("\"Not approving kubelet serving certificate, leaving it pending\" csr=\"%s\" "
		 "reason=\"%s\"",
		 name_of(j), q);
	job_done(&c->jobs, j, false);
}

static bool same_ip(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	if (inet_pton(AF_INET, a, x) == 1)
		return inet_pton(AF_INET, b, y) == 1 && !memcmp(x, y, 4);
	if (inet_pton(AF_INET6, a, x) == 1)
		return inet_pton(AF_INET6, b, y) == 1 && !memcmp(x, y, 16);
	return false;
}

/* A SAN the kubelet would have put in its serving CSR for this address list:
 * DNS from Hostname/InternalDNS/ExternalDNS, IPs from any address that is one. */
static bool address_has(const json_t *addrs, const char *san, bool ip)
{
	json_t *a;
	size_t i;
	json_array_foreach(addrs, i, a)
	{
		const char *type = jx_str(a, "type") ?: "", *v = jx_str(a, "address");
		if (!v)
			continue;
		if (ip ? same_ip(san, v)
		       : (!strcmp(v, san) && (!strcmp(type, "Hostname") ||
					      !strcmp(type, "InternalDNS") ||
					      !strcmp(type, "ExternalDNS"))))
			return true;
	}
	return false;
}

static void on_node(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct csrapproving *c = j->ctl;
	X509_REQ *req = csr_request(j->csr);
	struct pki_csr_info info;
	const json_t *addrs = jx_get(body, "status.addresses");
	char why[1024], msg[1100];

	if (status != 200) {
		/* The Node may not be registered yet: look again later. */
		snprintf(msg, sizeof(msg), "error getting node for csr: %s",
			 api_error(why, sizeof(why), status, body, err));
		sync_failed(j->key, msg, status == 404);
		X509_REQ_free(req);
		job_done(&c->jobs, j, true);
		return;
	}
	if (!req) {
		job_done(&c->jobs, j, false);
		return;
	}
	pki_csr_info(req, &info);
	X509_REQ_free(req);
	for (size_t i = 0; i < info.dns.n; i++)
		if (!address_has(addrs, info.dns.v[i], false)) {
			snprintf(why, sizeof(why), "DNS subjectAltName %s is not an address of node %s",
				 info.dns.v[i], info.cn + 12);
			goto pending;
		}
	for (size_t i = 0; i < info.ips.n; i++)
		if (!address_has(addrs, info.ips.v[i], true)) {
			snprintf(why, sizeof(why), "IP subjectAltName %s is not an address of node %s",
				 info.ips.v[i], info.cn + 12);
			goto pending;
		}
	pki_csr_info_free(&info);
	approve(c, j, MSG_SERVING);
	return;
pending:
	pki_csr_info_free(&info);
	leave_pending(c, j, why);
}

static void serving_csr(struct csrapproving *c, struct job *j, const struct pki_csr_info *info)
{
	bool bad;
	unsigned usages = csr_usages(j->csr, &bad);
	const char *user = jx_str(j->csr, "spec.username") ?: "";
	char why[512];
	json_t *node;

	if (csr_check_kubelet_serving(info, usages, bad, why, sizeof(why))) {
		leave_pending(c, j, why);
		return;
	}
	if (strcmp(user, info->cn) || !in_groups(j->csr, "system:nodes")) {
		snprintf(why, sizeof(why), "requested by %s, not by the node %s itself", user,
			 info->cn);
		leave_pending(c, j, why);
		return;
	}
	node = c->nodes ? informer_get(c->nodes, info->cn + 12) : NULL;
	if (node) {
		on_node(j, 200, node, NULL);
	} else {
		/* The Node may not be registered yet (on_node tries later). */
		json_t *st;
		snprintf(why, sizeof(why), "nodes \"%s\" not found", info->cn + 12);
		st = json_pack("{s:s}", "message", why);
		on_node(j, 404, st, NULL);
		json_decref(st);
	}
}

/* ---- the queue -------------------------------------------------------------------------- */

static void handle(struct csrapproving *c, struct job *j)
{
	const char *signer = jx_str(j->csr, "spec.signerName") ?: "";
	struct pki_csr_info info;
	X509_REQ *req;
	char msg[1024];

	if (csr_has_condition(j->csr, "Approved") || csr_has_condition(j->csr, "Denied")) {
		job_done(&c->jobs, j, false);
		return;
	}
	if (!(req = csr_request(j->csr))) {
		snprintf(msg, sizeof(msg), "unable to parse csr \"%s\": %s", name_of(j), err_msg());
		sync_failed(j->key, msg, false);
		job_done(&c->jobs, j, true);
		return;
	}
	pki_csr_info(req, &info);
	X509_REQ_free(req);
	if (!strcmp(signer, SIGNER_KUBELET_CLIENT))
		client_csr(c, j, &info);
	else if (!strcmp(signer, SIGNER_KUBELET_SERVING) && c->m->approve_kubelet_serving)
		serving_csr(c, j, &info);
	else
		job_done(&c->jobs, j, false);
	pki_csr_info_free(&info);
}

static void process(void *arg, const char *key)
{
	struct csrapproving *c = arg;
	json_t *csr = informer_get(c->m->csrs, key);
	struct job *j = job_new(&c->jobs, c->q, key, c);

	if (!csr) {
		LOG_V(3, "\"csr has been deleted\" csr=\"%s\"", key);
		job_done(&c->jobs, j, false);
		return;
	}
	if (csr_issued(csr)) {
		job_done(&c->jobs, j, false);
		return;
	}
	/* A private copy: the informer's object is shared and immutable. */
	j->csr = json_deep_copy(csr);
	handle(c, j);
}

struct csrapproving *csrapproving_new(struct controller_manager *m)
{
	struct csrapproving *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->rest = cm_client(m, "certificate-controller");
	c->m = m;
	c->q = csr_queue_new(m, process, c);
	if (m->approve_kubelet_serving)
		c->nodes = cm_informer(m, NODES_PATH, NULL);
	LOG_INFO("\"Starting certificate controller\" name=\"csrapproving\"");
	LOG_INFO("\"Waiting for caches to sync\" controller=\"certificate-csrapproving\"");
	return c;
}

void csrapproving_enqueue(struct csrapproving *c, const char *key)
{
	workqueue_add(c->q, key);
}

void csrapproving_free(struct csrapproving *c)
{
	if (!c)
		return;
	LOG_INFO("\"Shutting down certificate controller\" name=\"csrapproving\"");
	job_list_free(&c->jobs);
	workqueue_free(c->q);
	free(c);
}
