#include "cube/doctor.h"

#include "controllers/controllers.h"
#include "pki/certstore.h"
#include "pki/expiry.h"
#include "pki/pki.h"

#include "base/alloc.h"
#include "base/b64.h"
#include "base/clock.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/timeutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SIGNER_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define ROLE_NODECLIENT "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
#define ROLE_SELFNODECLIENT "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
#define TAINT_UNREACHABLE "node.kubernetes.io/unreachable"
#define TAINT_NOT_READY "node.kubernetes.io/not-ready"
#define DENIED_RECENT_NS (3600 * NS_PER_SEC)
#define MAX_LISTED 5
/* A clock this far off is a finding: NTP keeps nodes within milliseconds. */
#define SKEW_MIN_NS NS_PER_MIN

/* ---- what the CSRs say ------------------------------------------------------------------ */

enum csr_state { CSR_PENDING, CSR_APPROVED, CSR_DENIED, CSR_FAILED };

struct csr_view {
	const json_t *o;
	const char *name, *user, *signer;
	char node[256]; /* the node it is for: system:node:<node>, by user or CN */
	int64_t created_ns, decided_ns;
	enum csr_state state;
	const char *reason, *message; /* of the Denied or Failed condition */
	bool issued;
	int64_t not_before_ns, not_after_ns; /* of status.certificate */
};

struct ctx {
	const struct doctor_input *in;
	struct doctor_report *r;
	struct csr_view *csrs;
	size_t n_csrs;
};

static int64_t ts(const json_t *o, const char *path)
{
	int64_t t = 0;
	const char *s = jx_str(o, path);
	return s && time_parse_rfc3339(s, &t) == 0 ? t : 0;
}

static const char *name_of(const json_t *o)
{
	return jx_str(o, "metadata.name") ?: "";
}

static char *ago(int64_t ns, char buf[DURATION_BUF])
{
	return duration_human(ns < 0 ? 0 : ns, buf);
}

static bool is_node_user(const char *user, const char **node)
{
	if (!user || strncmp(user, "system:node:", 12) || !user[12])
		return false;
	*node = user + 12;
	return true;
}

static void csr_request_cn(const json_t *csr, char *cn_out, size_t n)
{
	size_t len;
	unsigned char *pem = b64_decode(jx_str(csr, "spec.request") ?: "", &len);
	X509_REQ *req = pem ? pki_csr_parse((const char *)pem, len) : NULL;
	struct pki_csr_info info;

	cn_out[0] = '\0';
	if (req && pki_csr_info(req, &info) == 0) {
		snprintf(cn_out, n, "%s", info.cn ?: "");
		pki_csr_info_free(&info);
	}
	X509_REQ_free(req);
	free(pem);
}

static void csr_view_read(const json_t *o, struct csr_view *v)
{
	const json_t *conds = jx_get(o, "status.conditions"), *c;
	const char *pem64 = jx_str(o, "status.certificate"), *node;
	char cn[256];
	size_t i;

	memset(v, 0, sizeof(*v));
	v->o = o;
	v->name = name_of(o);
	v->user = jx_str(o, "spec.username") ?: "";
	v->signer = jx_str(o, "spec.signerName") ?: "";
	v->created_ns = ts(o, "metadata.creationTimestamp");
	if (is_node_user(v->user, &node)) {
		snprintf(v->node, sizeof(v->node), "%s", node);
	} else {
		csr_request_cn(o, cn, sizeof(cn));
		if (is_node_user(cn, &node))
			snprintf(v->node, sizeof(v->node), "%s", node);
	}
	json_array_foreach(conds, i, c)
	{
		const char *type = jx_str(c, "type") ?: "";
		if (strcmp(jx_str(c, "status") ?: "True", "True"))
			continue;
		if (!strcmp(type, "Denied") || !strcmp(type, "Failed")) {
			v->state = !strcmp(type, "Denied") ? CSR_DENIED : CSR_FAILED;
			v->reason = jx_str(c, "reason");
			v->message = jx_str(c, "message");
			v->decided_ns = ts(c, "lastUpdateTime") ?: ts(c, "lastTransitionTime");
		} else if (!strcmp(type, "Approved") && v->state == CSR_PENDING) {
			v->state = CSR_APPROVED;
			v->decided_ns = ts(c, "lastUpdateTime") ?: ts(c, "lastTransitionTime");
		}
	}
	if (pem64 && *pem64) {
		size_t len;
		unsigned char *pem = b64_decode(pem64, &len);
		X509 *cert = pem ? pki_cert_parse((const char *)pem, len) : NULL;
		if (cert) {
			v->issued = true;
			v->not_before_ns = pki_cert_not_before(cert);
			v->not_after_ns = pki_cert_not_after(cert);
			X509_free(cert);
		}
		free(pem);
	}
}

static const char *csr_state_name(const struct csr_view *v)
{
	static const char *const names[] = {"Pending", "Approved", "Denied", "Failed"};
	if (v->state == CSR_APPROVED && v->issued)
		return "Approved,Issued";
	return names[v->state];
}

/* The newest issued client certificate CSR for node. */
static const struct csr_view *newest_issued(const struct ctx *c, const char *node)
{
	const struct csr_view *best = NULL;
	for (size_t i = 0; i < c->n_csrs; i++) {
		const struct csr_view *v = &c->csrs[i];
		if (v->issued && !strcmp(v->node, node) && !strcmp(v->signer, SIGNER_CLIENT) &&
		    (!best || v->not_after_ns > best->not_after_ns))
			best = v;
	}
	return best;
}

/* ---- findings ------------------------------------------------------------------------------ */

static struct doctor_finding *add(struct ctx *c, enum doctor_severity sev, const char *check,
                                  const char *object)
{
	struct doctor_finding *f = VEC_PUSH(*c->r);
	f->severity = sev;
	f->check = xstrdup(check);
	f->object = xstrdup(object);
	return f;
}

static void set(char **field, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set(char **field, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	free(*field);
	*field = s;
}

static const struct doctor_node_local *local_for(const struct ctx *c, const char *node)
{
	for (size_t i = 0; i < c->in->n_locals; i++)
		if (c->in->locals[i].node && !strcmp(c->in->locals[i].node, node))
			return &c->in->locals[i];
	return NULL;
}

static const json_t *find_named(const json_t *items, const char *name)
{
	const json_t *o;
	size_t i;
	json_array_foreach(items, i, o)
	{
		if (!strcmp(name_of(o), name))
			return o;
	}
	return NULL;
}

static const json_t *node_named(const struct ctx *c, const char *name)
{
	return find_named(c->in->nodes, name);
}

static const char *ready_of(const json_t *node)
{
	const json_t *cond = jx_condition(json_object_get(node, "status"), "Ready");
	return cond ? jx_str(cond, "status") : NULL;
}

static bool node_ready(const json_t *node)
{
	return node && !strcmp(ready_of(node) ?: "", "True");
}

/* ---- how to fix, in the words of where the node runs ---------------------------------------- */

static void fix_restart(const struct ctx *c, struct doctor_finding *f, const char *node)
{
	if (c->in->data_dir)
		strv_pushf(&f->fix, "cube restart --data-dir %s %s", c->in->data_dir, node);
	else
		strv_pushf(&f->fix, "systemctl restart kubelet   # on %s", node);
}

static void fix_clock(const struct ctx *c, struct doctor_finding *f, const char *node)
{
	if (c->in->data_dir)
		strv_pushf(&f->fix,
		           "set the node's clock right (cube fault --data-dir %s clock-skew %s 0)",
		           c->in->data_dir, node);
	else
		strv_pushf(&f->fix,
		           "set the node's clock right: timedatectl set-ntp true   # on %s", node);
}

/* The seeds' recovery plan 1: the kubelet bootstraps again with its token. */
static void fix_plan_1(const struct ctx *c, struct doctor_finding *f, const char *node,
                       const struct doctor_node_local *l)
{
	char *link = l ? certstore_current_path(l->pki_dir, CERTSTORE_CLIENT)
	               : xstrdup("/var/lib/kubelet/pki/kubelet-client-current.pem");
	if (c->in->data_dir)
		strv_pushf(&f->fix, "plan 1: rm -f %s && cube restart --data-dir %s %s", link,
		           c->in->data_dir, node);
	else
		strv_pushf(&f->fix,
		           "plan 1: rm -f %s && systemctl restart kubelet   # on %s: the kubelet "
		           "bootstraps again with --bootstrap-kubeconfig, which needs a valid "
		           "token (kubeadm join removes bootstrap-kubelet.conf: write one with "
		           "`kubeadm token create`, or use `kubeadm kubeconfig user --org "
		           "system:nodes --client-name system:node:%s` as kubelet.conf)",
		           link, node, node);
	free(link);
}

/* rotateCertificates: true in config.yaml; the kubelet reads it when it
 * (re)starts — restart says whether to say so here or a later fix does. */
static void fix_rotation_on(const struct ctx *c, struct doctor_finding *f, const char *node,
                            const struct doctor_node_local *l, bool restart)
{
	char *conf = l ? file_join(l->dir, "config.yaml") : xstrdup("/var/lib/kubelet/config.yaml");
	strv_pushf(&f->fix, "sed -i 's/^rotateCertificates: false/rotateCertificates: true/' %s",
	           conf);
	free(conf);
	if (restart)
		fix_restart(c, f, node);
}

static void fix_bindings(struct doctor_finding *f, bool bootstrap, bool self)
{
	if (bootstrap)
		strv_push(&f->fix,
		          "kubectl create clusterrolebinding kubeadm:node-autoapprove-bootstrap "
		          "--clusterrole=" ROLE_NODECLIENT
		          " --group=system:bootstrappers:kubeadm:default-node-token");
	if (self)
		strv_push(&f->fix, "kubectl create clusterrolebinding "
		                   "kubeadm:node-autoapprove-certificate-rotation "
		                   "--clusterrole=" ROLE_SELFNODECLIENT " --group=system:nodes");
}

/* ---- CSRs: why one is still pending ---------------------------------------------------------- */

static bool approver_off(const struct ctx *c)
{
	const char *ctl = c->in->controllers;
	return ctl && (strstr(ctl, "-csrapproving") ||
	               (!strstr(ctl, "*") && !strstr(ctl, "csrapproving")));
}

/* Cause and fixes for a pending CSR (also used for a node waiting on one). */
static void pending_cause(struct ctx *c, struct doctor_finding *f, const struct csr_view *v)
{
	const json_t *rev = json_object_get(c->in->reviews, v->name);
	char groups[512] = "";
	const json_t *g;
	size_t i;

	json_array_foreach(jx_get(v->o, "spec.groups"), i, g)
	{
		size_t n = strlen(groups);
		snprintf(groups + n, sizeof(groups) - n, "%s%s", n ? ", " : "",
		         json_string_value(g));
	}
	bool off = approver_off(c), self = !strncmp(v->user, "system:node:", 12);
	bool refused =
	    rev && !jx_bool(rev, "selfnodeclient", false) && !jx_bool(rev, "nodeclient", false);
	char *rbac = refused ? str_printf("no RBAC binding lets %s (groups %s) create "
	                                  "certificatesigningrequests/%s: the approver's "
	                                  "SubjectAccessReview says no and leaves the CSR Pending",
	                                  v->user, groups, self ? "selfnodeclient" : "nodeclient")
	                     : NULL;

	if (strcmp(v->signer, SIGNER_CLIENT)) {
		set(&f->cause,
		    "nothing approves %s CSRs: the controller manager approves only kubelet client "
		    "certificates (%s)",
		    v->signer, SIGNER_CLIENT);
	} else if (off) {
		/* Nothing approves at all; RBAC matters once it is back. */
		set(&f->cause,
		    "the controller manager runs without its CSR approver (--controllers=%s): "
		    "nothing approves the CSR%s%s",
		    c->in->controllers, rbac ? "; once it runs, " : "", rbac ? rbac : "");
		if (c->in->data_dir)
			strv_pushf(&f->fix,
			           "restore csrapproving in the controller manager's --controllers "
			           "(cube fault --data-dir %s approver on)",
			           c->in->data_dir);
		else
			strv_push(&f->fix, "restore csrapproving in kube-controller-manager's "
			                   "--controllers (its static pod manifest)");
		if (rbac)
			fix_bindings(f, !self, self);
	} else if (rbac) {
		set(&f->cause, "%s", rbac);
		fix_bindings(f, !self, self);
	} else {
		set(&f->cause, "the requestor may be approved but the approver has not acted: is "
		               "kube-controller-manager running, with csrapproving?");
	}
	free(rbac);
	strv_pushf(&f->fix, "kubectl certificate approve %s", v->name);
}

static bool denied_recently(const struct ctx *c, const struct csr_view *v)
{
	return v->state == CSR_DENIED && *v->node &&
	       c->in->now_ns - v->decided_ns < DENIED_RECENT_NS;
}

/* One finding per node whose CSRs were denied within the hour. */
static void check_denied(struct ctx *c, const char *node)
{
	struct doctor_finding *f = NULL;
	const struct csr_view *newest = NULL;
	char b[DURATION_BUF], obj[300];
	int n = 0;

	for (size_t i = c->n_csrs; i-- > 0;) {
		const struct csr_view *v = &c->csrs[i];
		if (!denied_recently(c, v) || strcmp(v->node, node))
			continue;
		if (!f) {
			snprintf(obj, sizeof(obj), "node/%s", node);
			f = add(c, DOCTOR_WARNING, "CSRDenied", obj);
			newest = v;
		}
		if (++n <= MAX_LISTED)
			strv_pushf(&f->evidence,
			           "CSR %s by %s: Denied %s ago, reason %s, message \"%s\"",
			           v->name, v->user, ago(c->in->now_ns - v->decided_ns, b),
			           v->reason ?: "(none)", v->message ?: "");
	}
	if (!f)
		return;
	set(&f->title, "%d CSR%s Denied in the last hour", n, n == 1 ? "" : "s");
	set(&f->symptom, "certificate requests for system:node:%s are denied (newest: %s)", node,
	    newest->name);
	set(&f->cause,
	    "something denies %s's certificate requests (reason %s); the controller manager "
	    "never denies, so it is a person or another approver",
	    node, newest->reason ?: "(none)");
	strv_push(&f->fix, "stop whatever denies them (kubectl get csr -o custom-columns=NAME:"
	                   ".metadata.name,CONDITION:.status.conditions[0].type,REASON:.status."
	                   "conditions[0].reason); the kubelet asks again with a new CSR");
}

static void check_csrs(struct ctx *c)
{
	struct strv denied = STRV_INIT;
	char b[DURATION_BUF], obj[300];

	for (size_t i = 0; i < c->n_csrs; i++) {
		const struct csr_view *v = &c->csrs[i];
		struct doctor_finding *f;
		int64_t age = c->in->now_ns - v->created_ns;

		if (denied_recently(c, v))
			strv_push_unique(&denied, v->node);
		if (v->state != CSR_PENDING)
			continue;
		c->r->pending_csrs++;
		if (age < c->in->csr_pending_ns)
			continue;
		snprintf(obj, sizeof(obj), "csr/%s", v->name);
		f = add(c, DOCTOR_WARNING, "CSRPending", obj);
		set(&f->title, "Pending for %s", ago(age, b));
		set(&f->symptom, "CSR %s from %s (%s) has been Pending for %s", v->name, v->user,
		    v->signer, b);
		if (*v->node)
			strv_pushf(&f->evidence, "it asks a certificate for system:node:%s",
			           v->node);
		pending_cause(c, f, v);
	}
	for (size_t i = 0; i < denied.n; i++)
		check_denied(c, denied.v[i]);
	strv_free(&denied);
}

static void check_bindings(struct ctx *c)
{
	bool boot = false, self = false;
	const json_t *b;
	size_t i;
	struct doctor_finding *f;

	if (!c->in->bindings)
		return;
	json_array_foreach(c->in->bindings, i, b)
	{
		const char *role = jx_str(b, "roleRef.name") ?: "";
		if (!json_array_size(jx_get(b, "subjects")))
			continue;
		boot |= !strcmp(role, ROLE_NODECLIENT);
		self |= !strcmp(role, ROLE_SELFNODECLIENT);
	}
	if (boot && self)
		return;
	f = add(c, DOCTOR_WARNING, "AutoApproveBindingMissing", "clusterrolebindings");
	set(&f->title, "kubeadm's auto-approve %s missing",
	    boot || self ? "binding is" : "bindings are");
	set(&f->symptom, "%s%s%s will stay Pending", !boot ? "new nodes' bootstrap CSRs" : "",
	    !boot && !self ? " and " : "", !self ? "nodes' renewal CSRs" : "");
	if (!boot)
		strv_push(&f->evidence,
		          "no ClusterRoleBinding refers to ClusterRole " ROLE_NODECLIENT
		          " (kubeadm:node-autoapprove-bootstrap)");
	if (!self)
		strv_push(&f->evidence,
		          "no ClusterRoleBinding refers to ClusterRole " ROLE_SELFNODECLIENT
		          " (kubeadm:node-autoapprove-certificate-rotation)");
	set(&f->cause,
	    "the approver approves a kubelet's CSR only when RBAC lets the requestor "
	    "create certificatesigningrequests/%s",
	    !boot && !self ? "nodeclient or selfnodeclient"
	    : !boot        ? "nodeclient"
	                   : "selfnodeclient");
	fix_bindings(f, !boot, !self);
}

/* ---- nodes -------------------------------------------------------------------------------- */

static const json_t *lease_for(const struct ctx *c, const char *node)
{
	const json_t *l;
	size_t i;
	json_array_foreach(c->in->leases, i, l)
	{
		if (!strcmp(name_of(l), node) &&
		    !strcmp(jx_str(l, "metadata.namespace") ?: "", "kube-node-lease"))
			return l;
	}
	return NULL;
}

static void taints_evidence(struct doctor_finding *f, const json_t *node)
{
	const json_t *t;
	size_t i;
	struct strv list = STRV_INIT;
	char *s;

	json_array_foreach(jx_get(node, "spec.taints"), i, t)
	    strv_pushf(&list, "%s:%s", jx_str(t, "key") ?: "", jx_str(t, "effect") ?: "");
	if (!list.n)
		return;
	s = strv_join(&list, ", ");
	strv_pushf(&f->evidence, "taints: %s", s);
	free(s);
	strv_free(&list);
}

static void pods_evidence(const struct ctx *c, struct doctor_finding *f, const char *node)
{
	const json_t *p;
	size_t i;
	int n = 0, term = 0;

	json_array_foreach(c->in->pods, i, p)
	{
		if (strcmp(jx_str(p, "spec.nodeName") ?: "", node))
			continue;
		n++;
		term += jx_get(p, "metadata.deletionTimestamp") != NULL;
	}
	if (n)
		strv_pushf(&f->evidence, "%d pod%s bound to it, %d Terminating", n,
		           n == 1 ? "" : "s", term);
}

static void local_evidence(const struct ctx *c, struct doctor_finding *f,
                           const struct doctor_node_local *l)
{
	char t[TIME_BUF], b[DURATION_BUF];
	int64_t now = c->in->now_ns;

	if (l->running == 0)
		strv_push(&f->evidence, "the kubelet process is not running");
	if (l->cert_error) {
		strv_pushf(&f->evidence, "%s: %s", l->cert_path ?: l->dir, l->cert_error);
	} else if (l->cert_path) {
		time_format_rfc3339(l->not_after_ns, t);
		if (l->not_after_ns <= now)
			strv_pushf(&f->evidence, "%s: NotAfter %s (expired %s ago)", l->cert_path,
			           t, ago(now - l->not_after_ns, b));
		else
			strv_pushf(&f->evidence, "%s: NotAfter %s (valid for %s)", l->cert_path, t,
			           ago(l->not_after_ns - now, b));
		if (l->foreign_issuer)
			strv_pushf(&f->evidence, "issuer CN=%s: not the cluster CA",
			           l->foreign_issuer);
	}
	if (l->rotate >= 0)
		strv_pushf(&f->evidence, "%s/config.yaml: rotateCertificates: %s", l->dir,
		           l->rotate ? "true" : "false");
	if (l->log_line)
		strv_pushf(&f->evidence, "kubelet.log: %s", l->log_line);
}

static void csr_evidence(const struct ctx *c, struct doctor_finding *f, const char *node,
                         int64_t since)
{
	char b[DURATION_BUF];
	int listed = 0;

	for (size_t i = c->n_csrs; i-- > 0 && listed < MAX_LISTED;) {
		const struct csr_view *v = &c->csrs[i];
		if (strcmp(v->node, node) || v->created_ns < since)
			continue;
		listed++;
		strv_pushf(&f->evidence, "CSR %s by %s: %s, created %s ago", v->name, v->user,
		           csr_state_name(v), ago(c->in->now_ns - v->created_ns, b));
	}
}

/* The node's newest kubelet client CSR created at or after t. */
static const struct csr_view *newest_csr(const struct ctx *c, const char *node, int64_t t)
{
	for (size_t i = c->n_csrs; i-- > 0;) {
		const struct csr_view *v = &c->csrs[i];
		if (!strcmp(v->node, node) && v->created_ns >= t &&
		    !strcmp(v->signer, SIGNER_CLIENT))
			return v;
	}
	return NULL;
}

/* Why no new certificate came, when the node's newest CSR since t says:
 * Pending (and why) or Denied. head starts the cause's sentence. false:
 * no such CSR. */
static bool csr_cause(struct ctx *c, struct doctor_finding *f, const char *node, int64_t t,
                      const char *head, const struct doctor_node_local *l)
{
	const struct csr_view *v = newest_csr(c, node, t);

	if (v && v->state == CSR_PENDING) {
		pending_cause(c, f, v);
		set(&f->cause, "%s; its CSR %s is Pending: %s", head, v->name, f->cause);
		return true;
	}
	if (v && v->state == CSR_DENIED) {
		set(&f->cause,
		    "%s; its CSR %s was Denied (reason %s): stop what denies it, then "
		    "apply plan 1",
		    head, v->name, v->reason ?: "(none)");
		fix_plan_1(c, f, node, l);
		return true;
	}
	return false;
}

static bool log_says(const struct doctor_node_local *l, const char *what)
{
	return l && l->log_err && strstr(l->log_err, what);
}

/* Go's x509 text carries the kubelet's own clock: "current time T is after". */
static bool log_clock(const struct doctor_node_local *l, int64_t *t)
{
	const char *p = l && l->log_err ? strstr(l->log_err, "current time ") : NULL;
	char buf[64];
	size_t n;

	if (!p)
		return false;
	p += 13;
	n = strcspn(p, " ");
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return time_parse_rfc3339(buf, t) == 0;
}

/* The node's clock now: what the supervisor read (`date` on the node),
 * else what its newest x509 error says. */
static bool node_clock(const struct doctor_node_local *l, int64_t *t)
{
	if (l && l->clock_ns) {
		*t = l->clock_ns;
		return true;
	}
	return log_clock(l, t);
}

/* An expired client certificate: why nothing renewed it. Renewal CSRs
 * are the node's own since the certificate's NotBefore. */
static void expired_cause(struct ctx *c, struct doctor_finding *f, const char *node,
                          const struct doctor_node_local *l)
{
	char b[DURATION_BUF], *head;

	head = str_printf("%s: client certificate expired %s ago", node,
	                  ago(c->in->now_ns - l->not_after_ns, b));
	set(&f->title, "client certificate expired");
	if (l->rotate == 0) {
		set(&f->cause,
		    "%s; rotation is off (rotateCertificates: false), so nothing renews it: apply "
		    "plan 1 and turn rotation on",
		    head);
		fix_rotation_on(c, f, node, l, false);
		fix_plan_1(c, f, node, l);
	} else if (!csr_cause(c, f, node, l->not_before_ns, head, l)) {
		set(&f->cause,
		    "%s; no CSR from system:node:%s since; rotation cannot recover: apply plan 1",
		    head, node);
		fix_plan_1(c, f, node, l);
	}
	free(head);
}

/* Why a node is not Ready, from the strongest evidence down. */
static void not_ready_cause(struct ctx *c, struct doctor_finding *f, const char *node,
                            const struct doctor_node_local *l, const json_t *lease)
{
	int64_t now = c->in->now_ns, clock;
	int64_t renew = ts(lease, "spec.renewTime");
	int64_t dur = jx_int(lease, "spec.leaseDurationSeconds", 40) * NS_PER_SEC;
	const struct csr_view *api = newest_issued(c, node);
	char b[DURATION_BUF];

	if (l && l->running == 0) {
		set(&f->title, "the kubelet is not running");
		set(&f->cause,
		    "%s: the kubelet is not running: nothing renews the Lease or posts "
		    "status",
		    node);
		fix_restart(c, f, node);
	} else if (node_clock(l, &clock) && llabs(clock - now) > SKEW_MIN_NS) {
		set(&f->title, "the node's clock is wrong");
		set(&f->cause,
		    "%s: the node's clock is %s %s: its kubelet judges certificates with it "
		    "and finds them expired or not yet valid",
		    node, duration_human(llabs(clock - now), b), clock > now ? "ahead" : "behind");
		fix_clock(c, f, node);
		fix_restart(c, f, node);
	} else if (l && l->foreign_issuer) {
		set(&f->title, "client certificate from another CA");
		set(&f->cause,
		    "%s: its client certificate was signed by CN=%s, not the cluster CA: the API "
		    "server answers 401 (x509: certificate signed by unknown authority) and "
		    "rotation "
		    "cannot authenticate either: apply plan 1",
		    node, l->foreign_issuer);
		fix_plan_1(c, f, node, l);
	} else if (l && l->cert_path && !l->cert_error && l->not_after_ns <= now) {
		expired_cause(c, f, node, l);
	} else if (l && !l->cert_path && !l->cert_error) {
		char *head = str_printf("%s: the kubelet has no client certificate "
		                        "(kubelet-client-current.pem is missing)",
		                        node);
		set(&f->title, "no client certificate");
		/* Its bootstrap CSRs: the newest of all tells. */
		if (!csr_cause(c, f, node, 0, head, l)) {
			set(&f->cause, "%s and has not bootstrapped a new one", head);
			strv_push(&f->fix,
			          "check the kubelet's --bootstrap-kubeconfig and its token");
			fix_restart(c, f, node);
		}
		free(head);
	} else if (lease && renew - now > dur) {
		set(&f->title, "the node's clock is ahead");
		set(&f->cause,
		    "%s: the Lease was renewed %s in the future: the node's clock is ahead", node,
		    duration_human(renew - now, b));
		fix_clock(c, f, node);
	} else if (log_says(l, "network is unreachable") || log_says(l, "connection refused") ||
	           log_says(l, "i/o timeout") || log_says(l, "no route to host") ||
	           /* cube's client: a connection refused or cut */
	           log_says(l, "failed or was closed")) {
		set(&f->title, "the API server is unreachable from the node");
		set(&f->cause,
		    "%s: the kubelet cannot reach the API server (%s); its certificate is "
		    "fine",
		    node, l->log_err);
		if (c->in->data_dir)
			strv_pushf(&f->fix,
			           "restore the network path from the node to the API server "
			           "(cube fault --data-dir %s heal %s)",
			           c->in->data_dir, node);
		else
			strv_push(&f->fix,
			          "restore the network path from the node to the API server "
			          "(routes, firewall, load balancer)");
	} else if (log_says(l, "Unauthorized")) {
		set(&f->title, "the API server refuses the kubelet's credentials");
		set(&f->cause,
		    "%s: the API server answers 401 to the kubelet although the certificate "
		    "on disk is valid: the kubelet still holds an older one",
		    node);
		fix_restart(c, f, node);
	} else if (!l && api && api->not_after_ns <= now) {
		/* From the API alone: the newest certificate it issued this node. */
		ago(now - api->not_after_ns, b);
		set(&f->title, "client certificate expired");
		set(&f->cause,
		    "%s: the newest client certificate issued to system:node:%s (CSR %s) expired "
		    "%s "
		    "ago and no CSR since renewed it: apply plan 1",
		    node, node, api->name, b);
		fix_plan_1(c, f, node, l);
	} else {
		set(&f->title, "the kubelet stopped posting status");
		set(&f->cause, "%s: the kubelet stopped renewing its Lease; its log says why",
		    node);
		if (c->in->data_dir)
			strv_pushf(&f->fix,
			           "cube logs --data-dir %s --node %s -n 100 | grep -i "
			           "\"certificate\\|tls\\|x509\"",
			           c->in->data_dir, node);
		else
			strv_push(&f->fix, "journalctl -u kubelet -n 100 --no-pager | grep -i "
			                   "\"certificate\\|tls\\|x509\"   # on the node");
	}
}

/* A Ready node whose clock is off: read from the node, else seen in its
 * Lease — the controller goes by the Lease changing, not by its times,
 * which are the kubelet's clock. A Lease renewed a little late (after a
 * partition heals, the status comes back first) is no clock: from the
 * Lease, behind counts from 5 minutes. */
static void ready_clock(struct ctx *c, const char *name, const struct doctor_node_local *l,
                        const json_t *lease)
{
	int64_t now = c->in->now_ns, renew = ts(lease, "spec.renewTime"), off;
	int64_t dur = jx_int(lease, "spec.leaseDurationSeconds", 40) * NS_PER_SEC;
	char obj[300], b[DURATION_BUF], t[TIME_BUF];
	struct doctor_finding *f;

	if (l && l->clock_ns)
		off = l->clock_ns - now;
	else if (lease && (renew - now > SKEW_MIN_NS ||
	                   now - renew > (2 * dur > 5 * NS_PER_MIN ? 2 * dur : 5 * NS_PER_MIN)))
		off = renew - now;
	else
		return;
	if (llabs(off) <= SKEW_MIN_NS)
		return;
	snprintf(obj, sizeof(obj), "node/%s", name);
	f = add(c, DOCTOR_WARNING, "NodeClockSkew", obj);
	duration_human(llabs(off), b);
	set(&f->title, "the node's clock is %s %s", b, off > 0 ? "ahead" : "behind");
	if (l && l->clock_ns) {
		set(&f->symptom, "Ready, but the node's clock reads %s",
		    time_format_rfc3339(l->clock_ns, t));
		strv_pushf(&f->evidence, "the node's clock: %s; now: %s", t,
		           time_format_rfc3339(now, (char[TIME_BUF]){0}));
	} else {
		set(&f->symptom, "Ready, but its Lease's renewTime is %s %s now", b,
		    off > 0 ? "after" : "before");
	}
	if (lease)
		strv_pushf(&f->evidence, "Lease kube-node-lease/%s renewTime %s", name,
		           jx_str(lease, "spec.renewTime") ?: "");
	set(&f->cause,
	    "%s: the node's clock is %s %s; its kubelet judges certificates by it, so they will "
	    "look expired or not yet valid to it, and its rotation deadlines move",
	    name, b, off > 0 ? "ahead" : "behind");
	fix_clock(c, f, name);
}

/* cube's opt-in ClientCertificateExpiring condition, when the kubelet
 * reports it True and the node's files are not at hand to say more. */
static void reported_expiring(struct ctx *c, const json_t *node)
{
	const json_t *cond =
	    jx_condition(json_object_get(node, "status"), "ClientCertificateExpiring");
	const char *name = name_of(node), *reason;
	char obj[300];
	struct doctor_finding *f;

	if (!cond || strcmp(jx_str(cond, "status") ?: "", "True"))
		return;
	reason = jx_str(cond, "reason") ?: "";
	snprintf(obj, sizeof(obj), "node/%s", name);
	f = add(c, DOCTOR_WARNING, "CertificateExpiring", obj);
	set(&f->title, "the kubelet reports its client certificate expiring");
	set(&f->symptom, "%s", jx_str(cond, "message") ?: "");
	strv_pushf(&f->evidence, "condition ClientCertificateExpiring=True, reason %s, since %s",
	           reason, jx_str(cond, "lastTransitionTime") ?: "");
	set(&f->cause, "%s: %s", name,
	    !strcmp(reason, "ClientCertificateRotationFailing")
	        ? "its renewals keep failing (the condition's message has the last error)"
	        : "its certificate is past 90% of its life and not renewed");
	csr_evidence(c, f, name, 0);
	fix_plan_1(c, f, name, NULL);
}

static void check_node(struct ctx *c, const json_t *node)
{
	const char *name = name_of(node), *ready = ready_of(node);
	const json_t *cond = jx_condition(json_object_get(node, "status"), "Ready");
	const json_t *lease = lease_for(c, name);
	const struct doctor_node_local *l = local_for(c, name);
	int64_t now = c->in->now_ns, renew = ts(lease, "spec.renewTime");
	int64_t dur = jx_int(lease, "spec.leaseDurationSeconds", 40) * NS_PER_SEC;
	char obj[300], b[DURATION_BUF], b2[DURATION_BUF];
	struct doctor_finding *f;

	snprintf(obj, sizeof(obj), "node/%s", name);
	if (node_ready(node)) {
		c->r->ready++;
		ready_clock(c, name, l, lease);
		if (!l)
			reported_expiring(c, node);
		return;
	}
	f = add(c, DOCTOR_CRITICAL, "NodeNotReady", obj);
	set(&f->symptom, "%s Ready=%s for %s (%s: %s)", name, ready ?: "(none)",
	    ago(now - ts(cond, "lastTransitionTime"), b), jx_str(cond, "reason") ?: "",
	    jx_str(cond, "message") ?: "");
	if (lease)
		strv_pushf(&f->evidence,
		           "Lease kube-node-lease/%s last renewed %s ago "
		           "(leaseDurationSeconds %lld): %s",
		           name, ago(now - renew, b2), (long long)(dur / NS_PER_SEC),
		           now - renew > dur ? "stale" : "fresh");
	else
		strv_pushf(&f->evidence, "no Lease kube-node-lease/%s", name);
	taints_evidence(f, node);
	pods_evidence(c, f, name);
	if (l)
		local_evidence(c, f, l);
	csr_evidence(c, f, name, 0);
	not_ready_cause(c, f, name, l, lease);
}

/* ---- certificates ---------------------------------------------------------------------------- */

static void note_soonest(struct ctx *c, int64_t *best, int64_t not_after, const char *what)
{
	char b[DURATION_BUF];
	if (*best && not_after >= *best)
		return;
	*best = not_after;
	snprintf(c->r->soonest, sizeof(c->r->soonest), "%s in %s", what,
	         duration_short_human(not_after - c->in->now_ns, b));
}

/* A kubelet client certificate still valid: inside the window and not
 * about to be renewed (rotation off, or past 90 % of its life: the
 * kubelet rotates at a jittered 70–90 %). */
static void kubelet_cert(struct ctx *c, const char *node, int rotate, int64_t nb, int64_t na,
                         const char *where, int64_t *soonest)
{
	int64_t now = c->in->now_ns, life = na - nb, slack = life / 50;
	char obj[300], b[DURATION_BUF], w[DURATION_BUF], t[TIME_BUF], what[300], *head;
	struct doctor_finding *f;
	bool overdue = now > nb + life / 10 * 9 + (slack > 5 * NS_PER_SEC ? slack : 5 * NS_PER_SEC);

	snprintf(what, sizeof(what), "%s's client certificate", node);
	note_soonest(c, soonest, na, what);
	if (na <= now || na - now > c->in->warn_ns || (rotate != 0 && !overdue))
		return;
	snprintf(obj, sizeof(obj), "node/%s", node);
	f = add(c, DOCTOR_WARNING, "CertificateExpiring", obj);
	set(&f->title, "client certificate expires in %s", duration_short_human(na - now, b));
	set(&f->symptom, "%s expires in %s (NotAfter %s), inside the %s warning window", what, b,
	    time_format_rfc3339(na, t), duration_short_human(c->in->warn_ns, w));
	strv_pushf(&f->evidence, "%s", where);
	if (rotate == 0) {
		set(&f->cause,
		    "%s: rotation is off (rotateCertificates: false): nothing will renew it", node);
		fix_rotation_on(c, f, node, local_for(c, node), true);
		return;
	}
	csr_evidence(c, f, node, nb);
	head = str_printf("%s: rotation is overdue: the kubelet renews at 70-90%% of the "
	                  "certificate's life, and it is past 90%%",
	                  node);
	if (!csr_cause(c, f, node, nb, head, local_for(c, node))) {
		set(&f->cause, "%s; no renewal CSR since it was issued", head);
		if (c->in->data_dir)
			strv_pushf(&f->fix, "cube logs --data-dir %s --node %s | grep -i rotat",
			           c->in->data_dir, node);
		else
			strv_push(&f->fix, "journalctl -u kubelet | grep -i rotat   # on the node");
	}
	free(head);
}

static void check_certs(struct ctx *c, const struct strv *reported)
{
	int64_t soonest = 0, now = c->in->now_ns;
	const json_t *node;
	size_t i;
	char b[DURATION_BUF], t[TIME_BUF], obj[300];

	json_array_foreach(c->in->nodes, i, node)
	{
		const char *name = name_of(node);
		const struct doctor_node_local *l = local_for(c, name);
		const struct csr_view *v = newest_issued(c, name);
		char where[600];
		if (l && l->cert_path && !l->cert_error) {
			snprintf(where, sizeof(where), "%s", l->cert_path);
			if (!strv_has(reported, name))
				kubelet_cert(c, name, l->rotate, l->not_before_ns, l->not_after_ns,
				             where, &soonest);
		} else if (!l && v) {
			snprintf(where, sizeof(where),
			         "the newest certificate the API issued it: CSR %s", v->name);
			if (!strv_has(reported, name))
				kubelet_cert(c, name, -1, v->not_before_ns, v->not_after_ns, where,
				             &soonest);
		}
	}
	for (i = 0; c->in->certs && i < c->in->certs->n; i++) {
		const struct expiry_row *row = &c->in->certs->rows[i];
		struct doctor_finding *f;
		enum doctor_severity sev =
		    row->status == EXPIRY_WARNING ? DOCTOR_WARNING : DOCTOR_CRITICAL;
		if (row->status == EXPIRY_MISSING)
			continue;
		if (row->status != EXPIRY_INVALID)
			note_soonest(c, &soonest, row->not_after_ns, row->name);
		if (row->status == EXPIRY_OK)
			continue;
		snprintf(obj, sizeof(obj), "certificate/%s", row->name);
		f = add(c, sev,
		        row->status == EXPIRY_WARNING ? "CertificateExpiring"
		                                      : "CertificateExpired",
		        obj);
		strv_pushf(&f->evidence, "%s", row->path);
		if (row->status == EXPIRY_INVALID) {
			set(&f->title, "not signed by the cluster CA");
			set(&f->symptom, "%s: %s", row->name, row->error ?: "invalid");
			set(&f->cause, "%s is not a certificate of this cluster's CA (issuer %s)",
			    row->name, row->ca ?: "unknown");
		} else {
			bool expired = row->status == EXPIRY_EXPIRED;
			time_format_rfc3339(row->not_after_ns, t);
			set(&f->title, "%s %s", expired ? "expired" : "expires in",
			    expired ? "" : duration_short_human(row->not_after_ns - now, b));
			set(&f->symptom, "%s %s (NotAfter %s)", row->name,
			    expired ? "has expired" : "expires inside the warning window", t);
			set(&f->cause, "control-plane certificates are not rotated automatically");
		}
		strv_push(&f->fix, "renew it from the cluster CA (kubeadm certs renew on a kubeadm "
		                   "cluster; cube certs sign-csr --ca-dir <pki dir>)");
	}
}

/* ---- pods and workloads ------------------------------------------------------------------- */

static bool pending_on_taints(const json_t *pod, const char **msg)
{
	const json_t *cond = jx_condition(json_object_get(pod, "status"), "PodScheduled");
	if (jx_str(pod, "spec.nodeName") || jx_get(pod, "metadata.deletionTimestamp") || !cond ||
	    strcmp(jx_str(cond, "status") ?: "", "False") ||
	    strcmp(jx_str(cond, "reason") ?: "", "Unschedulable"))
		return false;
	*msg = jx_str(cond, "message") ?: "";
	return strstr(*msg, "untolerated taint") != NULL;
}

static void check_pending_pods(struct ctx *c)
{
	const json_t *p, *node;
	size_t i;
	int n = 0;
	struct doctor_finding *f = NULL;
	struct strv tainted = STRV_INIT;
	const char *msg, *first = NULL, *first_ns = NULL;
	char *list;

	json_array_foreach(c->in->pods, i, p)
	{
		if (!pending_on_taints(p, &msg))
			continue;
		if (!f) {
			f = add(c, DOCTOR_WARNING, "PodsPendingOnTaints", "pods");
			first = name_of(p);
			first_ns = jx_str(p, "metadata.namespace") ?: "default";
		}
		if (++n <= MAX_LISTED)
			strv_pushf(&f->evidence, "%s/%s: %s", jx_str(p, "metadata.namespace") ?: "",
			           name_of(p), msg);
	}
	if (!f)
		return;
	if (n > MAX_LISTED)
		strv_pushf(&f->evidence, "... and %d more", n - MAX_LISTED);
	json_array_foreach(c->in->nodes, i, node)
	{
		const json_t *t;
		size_t j;
		json_array_foreach(jx_get(node, "spec.taints"), j, t)
		{
			const char *key = jx_str(t, "key") ?: "";
			if (!strcmp(key, TAINT_UNREACHABLE) || !strcmp(key, TAINT_NOT_READY)) {
				strv_push_unique(&tainted, name_of(node));
				break;
			}
		}
	}
	list = strv_join(&tainted, ", ");
	set(&f->title, "%d pod%s Pending on taints", n, n == 1 ? "" : "s");
	set(&f->symptom,
	    "%d pod%s cannot be scheduled: the nodes they fit carry taints they do "
	    "not tolerate",
	    n, n == 1 ? "" : "s");
	if (tainted.n)
		set(&f->cause,
		    "the node lifecycle controller tainted %s (not Ready); the scheduler "
		    "filters tainted nodes out (TaintToleration)",
		    list);
	else
		set(&f->cause, "the nodes carry taints the pods do not tolerate");
	if (tainted.n)
		strv_pushf(&f->fix,
		           "repair %s (the NodeNotReady findings): the taints go when the "
		           "node is Ready",
		           list);
	strv_pushf(&f->fix,
	           "plan 3, for one urgent pod only: kubectl patch pod %s -n %s -p "
	           "'{\"spec\":{\"tolerations\":[{\"key\":\"" TAINT_UNREACHABLE
	           "\",\"operator\":\"Exists\"}]}}'",
	           first, first_ns);
	free(list);
	strv_free(&tainted);
}

static const char *controller_uid(const json_t *o, const char *kind)
{
	const json_t *ref;
	size_t i;
	json_array_foreach(jx_get(o, "metadata.ownerReferences"), i, ref)
	{
		if (jx_bool(ref, "controller", false) && !strcmp(jx_str(ref, "kind") ?: "", kind))
			return jx_str(ref, "uid");
	}
	return NULL;
}

/* Terminating pods owned by uid on nodes that are not Ready. */
static int stuck_pods(const struct ctx *c, const char *uid, const char *kind, int *active,
                      struct strv *names, struct strv *nodes)
{
	const json_t *p;
	size_t i;
	int stuck = 0;

	*active = 0;
	json_array_foreach(c->in->pods, i, p)
	{
		const char *owner = controller_uid(p, kind), *node = jx_str(p, "spec.nodeName");
		if (!uid || !owner || strcmp(owner, uid))
			continue;
		if (!jx_get(p, "metadata.deletionTimestamp")) {
			const char *phase = jx_str(p, "status.phase") ?: "";
			*active += strcmp(phase, "Succeeded") && strcmp(phase, "Failed");
		} else if (node && !node_ready(node_named(c, node))) {
			stuck++;
			strv_push(names, name_of(p));
			strv_push_unique(nodes, node);
		}
	}
	return stuck;
}

static void check_workloads(struct ctx *c, const json_t *items, const char *kind)
{
	const json_t *o;
	size_t i;
	char obj[600];

	json_array_foreach(items, i, o)
	{
		struct strv names = STRV_INIT, nodes = STRV_INIT;
		const char *ns = jx_str(o, "metadata.namespace") ?: "default";
		int64_t want = jx_int(o, "spec.replicas", 1);
		int active,
		    stuck = stuck_pods(c, jx_str(o, "metadata.uid"), kind, &active, &names, &nodes);
		bool sts = !strcmp(kind, "StatefulSet");
		char *pods, *where;
		struct doctor_finding *f;

		if (!stuck || (!sts && active + stuck <= want)) {
			strv_free(&names);
			strv_free(&nodes);
			continue;
		}
		pods = strv_join(&names, " ");
		where = strv_join(&nodes, ", ");
		snprintf(obj, sizeof(obj), "%s/%s/%s", sts ? "statefulset" : "replicaset", ns,
		         name_of(o));
		f = add(c, DOCTOR_WARNING, sts ? "StatefulSetPodStuck" : "ReplicasExceeded", obj);
		if (sts) {
			set(&f->title, "%d pod%s Terminating on a lost node, not replaced", stuck,
			    stuck == 1 ? "" : "s");
			set(&f->symptom, "%s wants %lld replicas; %s Terminating on %s", name_of(o),
			    (long long)want, pods, where);
			set(&f->cause,
			    "a StatefulSet makes a pod of the same identity only once the old "
			    "one is gone, and a node that is not Ready never confirms the "
			    "deletion");
		} else {
			set(&f->title,
			    "%d pods for %lld replicas: %d Terminating beside their "
			    "replacements",
			    active + stuck, (long long)want, stuck);
			set(&f->symptom,
			    "%s wants %lld replicas and has %d active pods plus %d "
			    "Terminating on %s",
			    name_of(o), (long long)want, active, stuck, where);
			set(&f->cause,
			    "the evicted pods stay Terminating until their kubelet confirms "
			    "the deletion, which a node that is not Ready never does; the "
			    "ReplicaSet has already replaced them (the seeds' controller "
			    "over-repair)");
		}
		strv_pushf(&f->evidence, "Terminating: %s", pods);
		strv_pushf(&f->fix,
		           "they go once %s is Ready again (or its Node object is deleted)", where);
		strv_pushf(&f->fix,
		           "kubectl delete pod -n %s --force --grace-period=0 %s   # only "
		           "if the node is really gone",
		           ns, pods);
		free(pods);
		free(where);
		strv_free(&names);
		strv_free(&nodes);
	}
}

/* ---- zones: the node lifecycle controller's disruption states -------------------------------- */

struct zone {
	char key[300];
	int ready, not_ready;
};

static void check_zones(struct ctx *c)
{
	struct {
		struct zone *v;
		size_t n, cap;
	} zones = {0};
	const json_t *node;
	size_t i, full = 0;
	struct nlc_opts o;

	nlc_opts_default(&o);
	json_array_foreach(c->in->nodes, i, node)
	{
		char key[300];
		struct zone *z = NULL;
		nlc_zone_key(node, key, sizeof(key));
		for (size_t j = 0; j < zones.n && !z; j++)
			z = strcmp(zones.v[j].key, key) ? NULL : &zones.v[j];
		if (!z) {
			z = VEC_PUSH(zones);
			snprintf(z->key, sizeof(z->key), "%s", key);
		}
		*(node_ready(node) ? &z->ready : &z->not_ready) += 1;
	}
	for (i = 0; i < zones.n; i++)
		full += nlc_zone_state(zones.v[i].ready, zones.v[i].not_ready,
		                       o.unhealthy_zone_threshold) == ZONE_FULL_DISRUPTION;
	for (i = 0; i < zones.n; i++) {
		const struct zone *z = &zones.v[i];
		enum zone_state s =
		    nlc_zone_state(z->ready, z->not_ready, o.unhealthy_zone_threshold);
		int size = z->ready + z->not_ready;
		char obj[320];
		struct doctor_finding *f;

		if (s != ZONE_FULL_DISRUPTION && s != ZONE_PARTIAL_DISRUPTION)
			continue;
		snprintf(obj, sizeof(obj), "zone/%s", *z->key ? z->key : "(none)");
		f = add(c, s == ZONE_FULL_DISRUPTION ? DOCTOR_CRITICAL : DOCTOR_WARNING,
		        "ZoneDisruption", obj);
		set(&f->title, "%s", nlc_zone_state_name(s));
		set(&f->symptom, "%d of %d nodes in the zone are not Ready", z->not_ready, size);
		strv_pushf(&f->evidence, "node_collector_zone_health{zone=\"%s\"} %.0f", z->key,
		           100.0 * z->ready / size);
		if (full == zones.n)
			set(&f->cause,
			    "every node of the cluster is not Ready: the node lifecycle controller "
			    "assumes the fault is on the control plane's side (\"master disruption "
			    "mode\"), removes NoExecute taints and evicts nothing; nothing new can "
			    "be "
			    "scheduled. A cause common to every node: an expired CA, every "
			    "kubelet's "
			    "certificate at once, the API server's network");
		else if (s == ZONE_FULL_DISRUPTION)
			set(&f->cause,
			    "the whole zone is not Ready: its pods are evicted at "
			    "--node-eviction-rate (%.2f/s) to the other zones",
			    nlc_zone_qps(&o, s, size, false));
		else
			set(&f->cause,
			    "more than %.0f%% of the zone is not Ready "
			    "(--unhealthy-zone-threshold): "
			    "eviction slows to %.2f nodes/s (--secondary-node-eviction-rate, 0 for "
			    "zones of %d nodes or fewer)",
			    o.unhealthy_zone_threshold * 100, nlc_zone_qps(&o, s, size, false),
			    o.large_cluster_size_threshold);
		strv_push(&f->fix, "find what the nodes share (the NodeNotReady findings name each "
		                   "cause) and repair that first");
	}
	free(zones.v);
}

/* ---- the diagnosis ------------------------------------------------------------------------ */

static int csr_by_time(const void *a, const void *b)
{
	const struct csr_view *x = a, *y = b;
	return (x->created_ns > y->created_ns) - (x->created_ns < y->created_ns);
}

void doctor_diagnose(const struct doctor_input *in, struct doctor_report *out)
{
	struct ctx c = {.in = in, .r = out};
	struct strv reported = STRV_INIT;
	const json_t *o;
	size_t i;

	memset(out, 0, sizeof(*out));
	c.n_csrs = json_array_size(in->csrs);
	c.csrs = xcalloc(c.n_csrs, sizeof(*c.csrs));
	json_array_foreach(in->csrs, i, o) csr_view_read(o, &c.csrs[i]);
	qsort(c.csrs, c.n_csrs, sizeof(*c.csrs), csr_by_time);

	if (in->api_error) {
		struct doctor_finding *f = add(&c, DOCTOR_CRITICAL, "APIUnreachable", "apiserver");
		set(&f->title, "the API cannot be read");
		set(&f->symptom, "%s", in->api_error);
		if (strstr(in->api_error, "401") || strstr(in->api_error, "Unauthorized"))
			set(&f->cause,
			    "the API server refuses this kubeconfig's credentials (an expired "
			    "or foreign client certificate?)");
		else if (strstr(in->api_error, "x509"))
			set(&f->cause,
			    "the server at the kubeconfig's address presents a certificate "
			    "its CA does not accept (another cluster there, or an expired "
			    "serving certificate?)");
		else
			set(&f->cause,
			    "the API server does not answer at the kubeconfig's address");
		strv_push(&f->fix, "kubectl --kubeconfig <the same file> get --raw /readyz");
	}
	json_array_foreach(in->nodes, i, o)
	{
		size_t before = out->n;
		out->nodes++;
		check_node(&c, o);
		/* A node's expired certificate is its NotReady finding's story. */
		if (out->n > before && !strcmp(out->v[before].check, "NodeNotReady"))
			strv_push(&reported, name_of(o));
	}
	check_zones(&c);
	check_csrs(&c);
	check_bindings(&c);
	check_certs(&c, &reported);
	check_pending_pods(&c);
	check_workloads(&c, in->replicasets, "ReplicaSet");
	check_workloads(&c, in->statefulsets, "StatefulSet");
	strv_free(&reported);
	free(c.csrs);
}
