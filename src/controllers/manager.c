/*
 * The controller manager: one REST client and one CSR informer shared by the
 * CSR controllers, started and stopped with kube-controller-manager's log
 * lines; plus the CSR field helpers and job bookkeeping the controllers share.
 */
#include "controllers/internal.h"

#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USER_AGENT CM_USER_AGENT "/shared-informers"

/* ---- controller names ------------------------------------------------------ */

enum { CTL_SIGNING, CTL_APPROVING, CTL_CLEANER, CTL_NODELIFECYCLE, CTL_TAINTEVICTION,
       CTL_REPLICASET, CTL_DEPLOYMENT, CTL_STATEFULSET,
       CTL_DAEMONSET, CTL_ENDPOINTSLICE, CTL_ENDPOINTS, CTL_PODGC, CTL_NAMESPACE, CTL_JOB,
       CTL_AGGREGATION, CTL_N };

/* In upstream's registration order; alias first, as users type it. */
static const struct {
	const char *alias, *name;
} known[CTL_N] = {
	[CTL_SIGNING] = {"csrsigning", "certificatesigningrequest-signing-controller"},
	[CTL_APPROVING] = {"csrapproving", "certificatesigningrequest-approving-controller"},
	[CTL_CLEANER] = {"csrcleaner", "certificatesigningrequest-cleaner-controller"},
	[CTL_NODELIFECYCLE] = {"nodelifecycle", "node-lifecycle-controller"},
	/* No alias upstream: the name is the only way to say it. */
	[CTL_TAINTEVICTION] = {"taint-eviction-controller", "taint-eviction-controller"},
	[CTL_REPLICASET] = {"replicaset", "replicaset-controller"},
	[CTL_DEPLOYMENT] = {"deployment", "deployment-controller"},
	[CTL_STATEFULSET] = {"statefulset", "statefulset-controller"},
	[CTL_DAEMONSET] = {"daemonset", "daemonset-controller"},
	[CTL_ENDPOINTSLICE] = {"endpointslice", "endpointslice-controller"},
	[CTL_ENDPOINTS] = {"endpoint", "endpoints-controller"},
	[CTL_PODGC] = {"podgc", "pod-garbage-collector-controller"},
	[CTL_NAMESPACE] = {"namespace", "namespace-controller"},
	[CTL_JOB] = {"job", "job-controller"},
	[CTL_AGGREGATION] = {"clusterrole-aggregation", "clusterrole-aggregation-controller"},
};

static int canonical(const char *s, size_t n)
{
	for (int i = 0; i < CTL_N; i++)
		if ((strlen(known[i].alias) == n && !strncmp(s, known[i].alias, n)) ||
		    (strlen(known[i].name) == n && !strncmp(s, known[i].name, n)))
			return i;
	return -1;
}

/* Walk a comma-separated --controllers list: fn(entry, len, negated, index). */
static int each_entry(const char *list, int (*fn)(void *, const char *, size_t, bool, int),
		      void *arg)
{
	const char *p = list ? list : "*";
	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *s = p;
		bool neg = false;
		int rc;
		while (n && (*s == ' ')) /* pflag's StringSlice keeps spaces; be kind */
			s++, n--;
		while (n && s[n - 1] == ' ')
			n--;
		if (n && *s == '-')
			neg = true, s++, n--;
		if (n && (rc = fn(arg, s, n, neg, (n == 1 && *s == '*' && !neg) ? -2
										: canonical(s, n))) < 0)
			return rc;
		p = end ? end + 1 : p + strlen(p);
	}
	return 0;
}

static int check_entry(void *arg, const char *s, size_t n, bool neg, int idx)
{
	if (idx == -1)
		return err_set(ERR_INVALID, "\"%.*s\" is not in the list of known controllers",
			       (int)n, s);
	return 0;
}

int controller_manager_check_controllers(const char *list)
{
	return each_entry(list, check_entry, NULL);
}

struct enabled {
	int want;
	int verdict; /* -1 undecided, 0 off, 1 on */
	bool star;
};

static int enabled_entry(void *arg, const char *s, size_t n, bool neg, int idx)
{
	struct enabled *e = arg;
	if (e->verdict >= 0)
		return 0;
	if (idx == -2)
		e->star = true;
	else if (idx == e->want)
		e->verdict = neg ? 0 : 1;
	return 0;
}

/* upstream's IsControllerEnabled: an explicit name or -name decides (first
 * mention wins); otherwise "*" enables every on-by-default controller. */
static bool controller_enabled(const char *list, int which)
{
	struct enabled e = {which, -1, false};
	each_entry(list, enabled_entry, &e);
	return e.verdict >= 0 ? e.verdict == 1 : e.star;
}

/* ---- the informer feeding the queues --------------------------------------- */

static void enqueue(struct controller_manager *m, const json_t *obj)
{
	char key[512];
	informer_key(obj, key, sizeof(key));
	if (m->approving)
		csrapproving_enqueue(m->approving, key);
	if (m->signing)
		csrsigning_enqueue(m->signing, key);
}

/*
 * kube-state-metrics' CSR series, served beside the controllers' own (no
 * upstream controller exports them; the alert "CSR pending too long" needs
 * them, and a cube cluster runs no kube-state-metrics), with its names,
 * labels and help texts: kube_certificatesigningrequest_condition
 * {certificatesigningrequest, signer_name, condition=approved|denied} — how
 * many conditions of that type the CSR has — and
 * kube_certificatesigningrequest_created (Unix seconds). Kept whatever
 * --controllers says, so they tell of an approver that is off.
 */
static void csr_metrics(struct controller_manager *m, const json_t *csr, bool gone)
{
	static const char *const conds[][2] = {{"Approved", "approved"}, {"Denied", "denied"}};
	const char *name = jx_str(csr, "metadata.name"), *signer = jx_str(csr, "spec.signerName");
	int64_t created = 0;

	if (!m->m_csr_condition) {
		m->m_csr_condition = metrics_gauge(
			m->metrics, "kube_certificatesigningrequest_condition",
			"[STABLE] The number of each certificatesigningrequest condition",
			"certificatesigningrequest,signer_name,condition");
		m->m_csr_created =
			metrics_gauge(m->metrics, "kube_certificatesigningrequest_created",
				      "[STABLE] Unix creation timestamp",
				      "certificatesigningrequest,signer_name");
	}
	for (size_t i = 0; i < 2; i++) {
		const json_t *c;
		size_t j, count = 0;
		json_array_foreach(jx_get(csr, "status.conditions"), j, c)
			count += !strcmp(jx_str(c, "type") ?: "", conds[i][0]);
		if (gone)
			metrics_remove(m->m_csr_condition, name, signer, conds[i][1]);
		else
			metrics_set(metrics_with(m->m_csr_condition, name, signer, conds[i][1]),
				    (double)count);
	}
	if (gone) {
		metrics_remove(m->m_csr_created, name, signer);
	} else if (time_parse_rfc3339(jx_str(csr, "metadata.creationTimestamp") ?: "", &created) ==
		   0) {
		metrics_set(metrics_with(m->m_csr_created, name, signer),
			    (double)(created / NS_PER_SEC));
	}
}

static void on_add(void *arg, json_t *obj)
{
	LOG_V(4, "\"Adding certificate request\" csr=\"%s\"", jx_str(obj, "metadata.name") ?: "");
	csr_metrics(arg, obj, false);
	enqueue(arg, obj);
}

static void on_update(void *arg, json_t *old, json_t *obj)
{
	LOG_V(4, "\"Updating certificate request\" old=\"%s\"", jx_str(old, "metadata.name") ?: "");
	csr_metrics(arg, obj, false);
	enqueue(arg, obj);
}

static void on_delete(void *arg, json_t *obj)
{
	LOG_V(4, "\"Deleting certificate request\" csr=\"%s\"", jx_str(obj, "metadata.name") ?: "");
	csr_metrics(arg, obj, true);
	enqueue(arg, obj);
}

static const char *const queue_names[] = {"csrsigning-kubelet-serving", "csrsigning-kubelet-client",
					  "csrsigning-kube-apiserver-client",
					  "csrsigning-legacy-unknown", "csrapproving"};

/* cache.WaitForNamedCacheSync's lines, once the first list is in. */
static void on_sync_wait(void *arg)
{
	struct controller_manager *m = arg;
	if (!informer_synced(m->csrs)) {
		timer_after(m->sync_wait, 100 * NS_PER_MS);
		return;
	}
	m->synced_logged = true;
	for (size_t i = 0; i < sizeof(queue_names) / sizeof(queue_names[0]); i++)
		if ((i < 4 && m->signing) || (i == 4 && m->approving))
			LOG_INFO("\"Caches are synced\" controller=\"certificate-%s\"", queue_names[i]);
}

/* ---- shared informers ---------------------------------------------------------- */

/*
 * A Node as the controllers read it: metadata, spec, conditions, phase, and
 * addresses (csrapproving checks a serving CSR's names against them). What
 * only the kubelet, the scheduler and kubectl read stays out: nodeInfo,
 * capacity, allocatable, images, daemonEndpoints, volumes. 8.3 KB of a
 * hollow node's 12.7 KB tree, 10,000 of them.
 */
static json_t *node_view(const json_t *node)
{
	static const char *const paths[] = {"apiVersion", "kind", "metadata", "spec",
					    "status.conditions", "status.addresses", "status.phase"};
	return jx_pick(node, paths, sizeof(paths) / sizeof(paths[0]));
}

/* A node's Lease: the node lifecycle controller reads only its renewTime.
 * 1.3 KB instead of a 3 KB tree. */
static json_t *lease_view(const json_t *lease)
{
	static const char *const paths[] = {"metadata.name", "metadata.namespace",
					    "metadata.resourceVersion", "spec.renewTime"};
	return jx_pick(lease, paths, sizeof(paths) / sizeof(paths[0]));
}

static const struct {
	const char *path;
	json_t *(*view)(const json_t *obj);
} views[] = {{NODES_PATH, node_view}, {LEASES_PATH, lease_view}};

struct informer *cm_informer(struct controller_manager *m, const char *path,
			     const struct informer_handlers *h)
{
	struct informer *inf = hmap_get(&m->informers, path);
	if (!inf) {
		inf = informer_new(m->loop, m->rest, path, NULL, h);
		for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
			if (!strcmp(views[i].path, path))
				informer_set_transform(inf, views[i].view);
		hmap_put(&m->informers, path, inf);
	} else if (h) {
		informer_add_handlers(inf, h);
	}
	return inf;
}

static const char *pod_node(const json_t *pod)
{
	return jx_str(pod, "spec.nodeName");
}

int cm_pods_by_node(struct controller_manager *m)
{
	return cm_index(m, "/api/v1/pods", pod_node);
}

int cm_index(struct controller_manager *m, const char *path, const char *(*key_of)(const json_t *))
{
	for (int i = 0; i < m->nindexes; i++)
		if (m->indexes[i].key_of == key_of && !strcmp(m->indexes[i].path, path))
			return m->indexes[i].index;
	if (m->nindexes == (int)(sizeof(m->indexes) / sizeof(m->indexes[0])))
		abort();
	snprintf(m->indexes[m->nindexes].path, sizeof(m->indexes[0].path), "%s", path);
	m->indexes[m->nindexes].key_of = key_of;
	m->indexes[m->nindexes].index = informer_add_index(cm_informer(m, path, NULL), key_of);
	return m->indexes[m->nindexes++].index;
}

bool cm_informers_synced(const struct controller_manager *m)
{
	const char *k;
	void *v;
	for (size_t it = 0; hmap_next(&m->informers, &it, &k, &v);)
		if (!informer_synced(v))
			return false;
	return true;
}

static void informers_free(struct controller_manager *m)
{
	const char *k;
	void *v;
	for (size_t it = 0; hmap_next(&m->informers, &it, &k, &v);)
		informer_free(v);
	hmap_free(&m->informers);
}

/* ---- lifecycle ---------------------------------------------------------------- */

void controller_manager_opts_default(struct controller_manager_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cluster_signing_duration_ns = CONTROLLER_MANAGER_SIGNING_DURATION;
	o->controllers = "*";
	o->cleaner_period_ns = CONTROLLER_MANAGER_CLEANER_PERIOD;
	o->workers = 5;
	o->terminated_pod_gc_threshold = 12500;
	o->serving.port = 10257;
	o->serving.name = "kube-controller-manager";
	nlc_opts_default(&o->nlc);
}


int controller_manager_preflight(const struct controller_manager_opts *o)
{
	bool signing = o->cluster_signing_cert_file && *o->cluster_signing_cert_file &&
		       o->cluster_signing_key_file && *o->cluster_signing_key_file;

	if (controller_manager_check_controllers(o->controllers) < 0)
		return ERR_INVALID;
	if (signing && controller_enabled(o->controllers, CTL_SIGNING) &&
	    csrsigning_check_ca(o->cluster_signing_cert_file, o->cluster_signing_key_file) < 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		return err_set(ERR_INVALID, "error starting controllers: %s", msg);
	}
	return 0;
}

struct controller_manager *controller_manager_new(struct loop *loop,
						  const struct controller_manager_opts *o)
{
	struct informer_handlers h = {on_add, on_update, on_delete, NULL};
	struct controller_manager *m;
	bool on[CTL_N];

	if (controller_manager_check_controllers(o->controllers) < 0)
		return NULL;
	if (!(m = calloc(1, sizeof(*m))))
		abort();
	m->loop = loop;
	m->metrics = metrics_new();
	m->signing_duration_ns = o->cluster_signing_duration_ns > 0
					 ? o->cluster_signing_duration_ns
					 : CONTROLLER_MANAGER_SIGNING_DURATION;
	m->cleaner_period_ns =
		o->cleaner_period_ns > 0 ? o->cleaner_period_ns : CONTROLLER_MANAGER_CLEANER_PERIOD;
	m->workers = o->workers > 0 ? o->workers : 5;
	m->approve_kubelet_serving = o->approve_kubelet_serving;
	m->signing_cert = o->cluster_signing_cert_file && *o->cluster_signing_cert_file
				  ? strdup(o->cluster_signing_cert_file)
				  : NULL;
	m->signing_key = o->cluster_signing_key_file && *o->cluster_signing_key_file
				 ? strdup(o->cluster_signing_key_file)
				 : NULL;
	if (!(m->rest = rest_client_for_component(loop, o->kubeconfig, o->kc, o->server, USER_AGENT)))
		goto fail;
	m->use_sa_credentials = o->use_service_account_credentials;
	h.arg = m;
	m->csrs = cm_informer(m, CSR_PATH, &h);
	m->sync_wait = loop_timer(loop, on_sync_wait, m);

	for (int i = 0; i < CTL_N; i++) {
		const char *name = known[i].name;
		if (!(on[i] = controller_enabled(o->controllers, i))) {
			LOG_INFO("\"Warning: controller is disabled\" controller=\"%s\"", name);
			continue;
		}
		LOG_V(1, "\"Starting controller\" controller=\"%s\"", name);
		if (i == CTL_SIGNING) {
			if (!m->signing_cert || !m->signing_key) {
				LOG_INFO("\"Skipping CSR signer controller because no csr cert/key "
					 "was specified\"");
				LOG_INFO("\"Warning: skipping controller\" controller=\"%s\"", name);
				continue;
			}
			if (!(m->signing = csrsigning_new(m))) {
				char msg[1024], q[1200];
				snprintf(msg, sizeof(msg), "%s", err_msg());
				log_quote(q, sizeof(q), msg);
				LOG_ERROR("\"Error starting controller\" err=\"%s\" controller=\"%s\"",
					  q, name);
				err_set(ERR_INVALID, "error starting controllers: %s", msg);
				goto fail;
			}
		} else if (i == CTL_APPROVING) {
			m->approving = csrapproving_new(m);
		} else if (i == CTL_NODELIFECYCLE) {
			struct nlc_opts no = o->nlc;
			if (no.node_monitor_period_ns <= 0)
				nlc_opts_default(&no);
			m->nodelifecycle = nodelifecycle_new(m, &no);
		} else if (i == CTL_TAINTEVICTION) {
			m->tainteviction = tainteviction_new(m);
		} else if (i == CTL_REPLICASET) {
			m->replicaset = replicaset_new(m);
		} else if (i == CTL_DEPLOYMENT) {
			m->deployment = deployment_new(m);
		} else if (i == CTL_STATEFULSET) {
			m->statefulset = statefulset_new(m);
		} else if (i == CTL_DAEMONSET) {
			m->daemonset = daemonset_new(m);
		} else if (i == CTL_ENDPOINTSLICE) {
			m->endpointslice = endpointslice_new(m);
		} else if (i == CTL_ENDPOINTS) {
			m->endpoints = endpoints_new(m);
		} else if (i == CTL_PODGC) {
			m->podgc = podgc_new(m, o->terminated_pod_gc_threshold);
		} else if (i == CTL_NAMESPACE) {
			m->namespaces = namespace_new(m);
		} else if (i == CTL_JOB) {
			m->jobs = jobctl_new(m);
		} else if (i == CTL_AGGREGATION) {
			m->aggregation = aggregation_new(m);
		} else {
			m->cleaner = csrcleaner_new(m);
		}
		LOG_INFO("\"Started controller\" controller=\"%s\"", name);
	}
	{
		const char *k;
		void *v;
		for (size_t it = 0; hmap_next(&m->informers, &it, &k, &v);)
			informer_start(v);
	}
	timer_after(m->sync_wait, 0);
	{
		struct secure_serving_opts so = o->serving;
		so.metrics = m->metrics;
		if (!so.name)
			so.name = "kube-controller-manager";
		if (!(m->serving = secure_server_new(loop, &so)) && *err_msg())
			goto fail;
	}
	return m;
fail:
	controller_manager_free(m);
	return NULL;
}

bool controller_manager_synced(const struct controller_manager *m)
{
	return m && m->csrs && informer_synced(m->csrs);
}

void controller_manager_free(struct controller_manager *m)
{
	if (!m)
		return;
	/* The informers first (they stop their watches on the client), then
	 * what else the controllers have on the client, then the client (no
	 * callback runs after this), then the controllers and their jobs. */
	secure_server_free(m->serving);
	informers_free(m);
	m->csrs = NULL;
	nodelifecycle_stop(m->nodelifecycle);
	tainteviction_stop(m->tainteviction);
	replicaset_stop(m->replicaset);
	deployment_stop(m->deployment);
	statefulset_stop(m->statefulset);
	endpoints_stop(m->endpoints);
	endpoints_stop(m->endpointslice);
	podgc_stop(m->podgc);
	daemonset_stop(m->daemonset);
	namespace_stop(m->namespaces);
	jobctl_stop(m->jobs);
	aggregation_stop(m->aggregation);
	rest_client_free(m->rest);
	m->rest = NULL;
	cm_clients_free(m);
	timer_free(m->sync_wait);
	nodelifecycle_free(m->nodelifecycle);
	tainteviction_free(m->tainteviction);
	replicaset_free(m->replicaset);
	deployment_free(m->deployment);
	statefulset_free(m->statefulset);
	endpoints_free(m->endpoints);
	endpoints_free(m->endpointslice);
	podgc_free(m->podgc);
	daemonset_free(m->daemonset);
	namespace_free(m->namespaces);
	jobctl_free(m->jobs);
	aggregation_free(m->aggregation);
	csrcleaner_free(m->cleaner);
	csrapproving_free(m->approving);
	csrsigning_free(m->signing);
	/* Last: the controllers' queues unhook from it as they go. */
	metrics_free(m->metrics);
	free(m->signing_cert);
	free(m->signing_key);
	free(m);
}

/* ---- CSR helpers ------------------------------------------------------------------- */

X509_REQ *csr_request(const json_t *csr)
{
	size_t len;
	unsigned char *pem = b64_decode(jx_str(csr, "spec.request"), &len);
	X509_REQ *req;

	if (!pem) {
		err_set(ERR_PARSE, "PEM block type must be CERTIFICATE REQUEST");
		return NULL;
	}
	req = pki_csr_parse((const char *)pem, len);
	free(pem);
	return req;
}

unsigned csr_usages(const json_t *csr, bool *bad)
{
	json_t *u;
	size_t i;
	unsigned mask = 0;

	*bad = false;
	json_array_foreach(jx_get(csr, "spec.usages"), i, u)
	{
		unsigned bit;
		if (json_is_string(u) && pki_usage_parse(json_string_value(u), &bit) == 0)
			mask |= bit;
		else
			*bad = true;
	}
	return mask;
}

bool csr_has_condition(const json_t *csr, const char *type)
{
	json_t *c;
	size_t i;
	json_array_foreach(jx_get(csr, "status.conditions"), i, c)
	{
		const char *t = jx_str(c, "type");
		if (t && !strcmp(t, type))
			return true;
	}
	return false;
}

bool csr_condition_true(const json_t *csr, const char *type)
{
	json_t *c;
	size_t i;
	json_array_foreach(jx_get(csr, "status.conditions"), i, c)
	{
		const char *t = jx_str(c, "type"), *s = jx_str(c, "status");
		if (t && !strcmp(t, type) && s && !strcmp(s, "True"))
			return true;
	}
	return false;
}

bool csr_approved(const json_t *csr)
{
	return csr_has_condition(csr, "Approved") && !csr_has_condition(csr, "Denied");
}

bool csr_issued(const json_t *csr)
{
	const char *cert = jx_str(csr, "status.certificate");
	return cert && *cert;
}

json_t *csr_with_condition(const json_t *csr, const char *type, const char *reason,
			   const char *message)
{
	json_t *copy = json_deep_copy(csr), *conds = jx_get(copy, "status.conditions");
	char now[TIME_BUF];

	if (!json_is_array(conds)) {
		conds = json_array();
		jx_set(copy, "status.conditions", conds);
	}
	time_format_rfc3339(clock_now(), now);
	json_array_append_new(conds, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status",
					       "True", "reason", reason, "message", message,
					       "lastUpdateTime", now, "lastTransitionTime", now));
	return copy;
}

char *csr_certificate_pem(const json_t *csr, size_t *len)
{
	return (char *)b64_decode(jx_str(csr, "status.certificate"), len);
}

struct workqueue *csr_queue_new(struct controller_manager *m,
				void (*process)(void *arg, const char *key), void *arg)
{
	struct workqueue *q = workqueue_new(m->loop, m->workers, process, arg);

	workqueue_instrument(q, m->metrics, "certificate");
	workqueue_set_base_delay(q, 200 * NS_PER_MS);
	return q;
}

const char *csr_path(char *buf, size_t n, const char *name, const char *sub)
{
	snprintf(buf, n, "%s/%s%s%s", CSR_PATH, name, sub ? "/" : "", sub ? sub : "");
	return buf;
}

const char *api_error(char *buf, size_t n, int status, const json_t *body, const char *err)
{
	const char *msg = jx_str(body, "message");
	if (status == 0)
		snprintf(buf, n, "%s", err ? err : "request failed");
	else if (msg && *msg)
		snprintf(buf, n, "%s", msg);
	else
		snprintf(buf, n, "the server responded with HTTP %d", status);
	return buf;
}

void sync_failed(const char *key, const char *msg, bool ignorable)
{
	char q[2048];
	if (ignorable) {
		log_quote(q, sizeof(q), msg);
		LOG_V(4, "\"sync certificate request failed\" csr=\"%s\" err=\"%s\"", key, q);
		return;
	}
	LOG_UNHANDLED(NULL, "sync %s failed with: %s", key, msg);
}

/* ---- jobs ---------------------------------------------------------------------------- */

struct job *job_new(struct job_list *l, struct workqueue *q, const char *key, void *ctl)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j || !(j->key = strdup(key)))
		abort();
	j->q = q;
	j->ctl = ctl;
	j->next = l->head;
	if (l->head)
		l->head->prev = j;
	l->head = j;
	return j;
}

static void job_free(struct job_list *l, struct job *j)
{
	free(j->aux);
	if (j->prev)
		j->prev->next = j->next;
	else
		l->head = j->next;
	if (j->next)
		j->next->prev = j->prev;
	json_decref(j->csr);
	free(j->key);
	free(j);
}

void job_done(struct job_list *l, struct job *j, bool retry)
{
	if (j->q) {
		if (retry)
			workqueue_retry(j->q, j->key);
		else
			workqueue_forget(j->q, j->key);
		workqueue_done(j->q, j->key);
	}
	job_free(l, j);
}

void job_list_free(struct job_list *l)
{
	while (l->head)
		job_free(l, l->head);
}

/* ---- upstream's kubelet CSR shapes (pkg/apis/certificates/helpers.go) ---------------------- */

static bool orgs_system_nodes(const struct pki_csr_info *info)
{
	return info->orgs.n == 1 && !strcmp(info->orgs.v[0], "system:nodes");
}

const char *csr_check_kubelet_client(const struct pki_csr_info *info, unsigned usages, bool bad,
				     char *buf, size_t n)
{
	const unsigned rsa = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_CLIENT_AUTH;
	const unsigned ec = PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH;
	const char *msg = NULL;

	if (!orgs_system_nodes(info))
		msg = "subject organization is not system:nodes";
	else if (info->dns.n)
		msg = "DNS subjectAltNames are not allowed";
	else if (info->emails.n)
		msg = "Email subjectAltNames are not allowed";
	else if (info->ips.n)
		msg = "IP subjectAltNames are not allowed";
	else if (info->uris.n)
		msg = "URI subjectAltNames are not allowed";
	else if (strncmp(info->cn ? info->cn : "", "system:node:", 12))
		msg = "subject common name does not begin with system:node:";
	else if (bad || (usages != rsa && usages != ec))
		msg = "usages did not match [client auth digital signature key encipherment]";
	if (!msg)
		return NULL;
	snprintf(buf, n, "%s", msg);
	return buf;
}

const char *csr_check_kubelet_serving(const struct pki_csr_info *info, unsigned usages, bool bad,
				      char *buf, size_t n)
{
	const unsigned rsa = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_SERVER_AUTH;
	const unsigned ec = PKI_U_DIGITAL_SIGNATURE | PKI_U_SERVER_AUTH;
	const char *msg = NULL;

	if (!orgs_system_nodes(info))
		msg = "subject organization is not system:nodes";
	else if (!info->dns.n && !info->ips.n)
		msg = "DNS or IP subjectAltName is required";
	else if (info->emails.n)
		msg = "Email subjectAltNames are not allowed";
	else if (info->uris.n)
		msg = "URI subjectAltNames are not allowed";
	else if (bad || (usages != rsa && usages != ec))
		msg = "usages did not match [digital signature key encipherment server auth]";
	else if (strncmp(info->cn ? info->cn : "", "system:node:", 12))
		msg = "subject common name does not begin with system:node:";
	if (!msg)
		return NULL;
	snprintf(buf, n, "%s", msg);
	return buf;
}
