/*
 * daemonset-controller (upstream pkg/controller/daemon, 1.32;
 * reference/k8s-controllers-1.32.md §6): one pod per eligible node.
 *
 *   eligible — the node matches the template's nodeSelector and required
 *     node affinity, and the pod (with the tolerations below) tolerates its
 *     NoSchedule and NoExecute taints. A pod already there stays while it
 *     tolerates the node's NoExecute taints (a new NoSchedule taint does not
 *     evict it).
 *   daemon pods — the template plus, unless present, the tolerations
 *     upstream adds, operator Exists and no tolerationSeconds:
 *     not-ready:NoExecute, unreachable:NoExecute (so a NotReady node's
 *     daemon pods are never evicted), disk-pressure, memory-pressure,
 *     pid-pressure and unschedulable:NoSchedule, network-unavailable with
 *     hostNetwork; the required node affinity replaced by matchFields
 *     metadata.name In [node] (the default scheduler binds it); labels
 *     controller-revision-hash and pod-template-generation.
 *   failed pods — deleted (Warning FailedDaemonPod "Found failed daemon pod
 *     ns/p on node n, will try to kill it") and made again, with a backoff per
 *     node of 1 s doubling to 15 minutes.
 *   updates — RollingUpdate: pods without the current template's hash
 *     (label controller-revision-hash) are replaced: unavailable ones at
 *     once, available ones while fewer than maxUnavailable (1, or a
 *     percentage of the desired pods rounded up) are unavailable; OnDelete:
 *     only when deleted. maxSurge is not implemented.
 *   expectations — after creating or deleting pods the set is not managed
 *     again until the informer has seen them (or 5 minutes passed), so a
 *     node never gets two daemon pods.
 *   status — desiredNumberScheduled, currentNumberScheduled,
 *     numberMisscheduled, numberReady, numberAvailable,
 *     updatedNumberScheduled, numberUnavailable, observedGeneration.
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

#include "api/schema.h"
#include "api/taints.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "daemonset-controller"
#define DS_PATH "/apis/apps/v1/daemonsets"
#define GEN_LABEL "pod-template-generation"

/* Creations and deletions not yet seen by the informer (expectations). */
struct dsexpect {
	int add;
	struct strv dels;
	int64_t stamp; /* mono */
};

/* failedPodsBackoff: per DaemonSet and node, 1 s doubling to 15 min. */
struct backoff {
	int64_t next, delay; /* mono, ns */
};

#define EXPECT_TTL_NS (5 * 60 * NS_PER_SEC)
#define FAILED_BACKOFF_MAX_NS (15 * 60 * NS_PER_SEC)
#define REV_LABEL "controller-revision-hash"

struct daemonset {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *sets, *pods, *nodes;
	int pods_by_owner;
	struct hmap expect;  /* ds key -> struct dsexpect* */
	struct hmap backoff; /* "ds key/node" -> struct backoff* */
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

/* ---- which nodes ----------------------------------------------------------------- */

/* AddOrUpdateDaemonPodTolerations */
static void add_tolerations(json_t *spec)
{
	static const struct {
		const char *key, *effect;
		bool host_network_only;
	} add[] = {
		{"node.kubernetes.io/not-ready", "NoExecute", false},
		{"node.kubernetes.io/unreachable", "NoExecute", false},
		{"node.kubernetes.io/disk-pressure", "NoSchedule", false},
		{"node.kubernetes.io/memory-pressure", "NoSchedule", false},
		{"node.kubernetes.io/pid-pressure", "NoSchedule", false},
		{"node.kubernetes.io/unschedulable", "NoSchedule", false},
		{"node.kubernetes.io/network-unavailable", "NoSchedule", true},
	};
	json_t *tols = json_object_get(spec, "tolerations");
	if (!json_is_array(tols)) {
		tols = json_array();
		json_object_set_new(spec, "tolerations", tols);
	}
	for (size_t i = 0; i < sizeof(add) / sizeof(add[0]); i++) {
		json_t *t = json_pack("{s:s,s:s,s:s}", "key", add[i].key, "operator", "Exists",
				      "effect", add[i].effect), *x;
		size_t k;
		bool replaced = false;
		if (add[i].host_network_only && !json_is_true(json_object_get(spec, "hostNetwork"))) {
			json_decref(t);
			continue;
		}
		json_array_foreach(tols, k, x) if (!strcmp(s_(jx_str(x, "key")), add[i].key) &&
						   !strcmp(s_(jx_str(x, "effect")), add[i].effect))
		{
			json_array_set(tols, k, t);
			replaced = true;
			break;
		}
		if (!replaced)
			json_array_append(tols, t);
		json_decref(t);
	}
}

/* nodeShouldRunDaemonPod: (should run, should continue running). */
static void should_run(const json_t *ds, const json_t *node, bool *run, bool *keep)
{
	static const char *const no_exec[] = {"NoExecute", NULL};
	json_t *spec = json_deep_copy(jx_get(ds, "spec.template.spec") ?: json_null());
	const json_t *t;
	size_t i;

	*run = *keep = false;
	if (!json_is_object(spec)) {
		json_decref(spec);
		return;
	}
	add_tolerations(spec);
	if (pod_node_selector_matches(spec, node)) {
		*run = !taints_first_untolerated(jx_get(node, "spec.taints"),
						 json_object_get(spec, "tolerations"));
		*keep = true;
		json_array_foreach(jx_get(node, "spec.taints"), i, t) if (
			taint_effect_in(t, no_exec) &&
			!tolerations_find(json_object_get(spec, "tolerations"), t)) *keep = false;
	}
	json_decref(spec);
}

/* ---- the pods ---------------------------------------------------------------------- */

static const char *pod_node(const json_t *pod)
{
	const char *n = jx_str(pod, "spec.nodeName");
	const json_t *terms, *t, *f;
	size_t i, j;
	if (n && *n)
		return n;
	/* Not bound yet: the node it is meant for. */
	terms = jx_get(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
			    "nodeSelectorTerms");
	json_array_foreach(terms, i, t) json_array_foreach(json_object_get(t, "matchFields"), j, f) if (
		!strcmp(s_(jx_str(f, "key")), "metadata.name")) return json_string_value(
		json_array_get(json_object_get(f, "values"), 0));
	return NULL;
}

/* The template's hash (fnv-32a over its canonical JSON, upstream's
 * alphabet): the controller-revision-hash label that tells old pods from new. */
static void template_hash(const json_t *ds, char *out, size_t n)
{
	hash_encode(fnv32_json(jx_get(ds, "spec.template"), FNV32_OFFSET, true), out, n);
}

static json_t *daemon_pod(const json_t *ds, const char *node)
{
	json_t *pod = pod_from_template(jx_get(ds, "spec.template"), ds, "apps/v1", "DaemonSet");
	json_t *spec = json_object_get(pod, "spec"), *labels;
	char gen[32];

	add_tolerations(spec);
	jx_set(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
	       json_pack("{s:[{s:[{s:s,s:s,s:[s]}]}]}", "nodeSelectorTerms", "matchFields", "key",
			 "metadata.name", "operator", "In", "values", node));
	if (!json_is_object(labels = jx_get(pod, "metadata.labels"))) {
		labels = json_object();
		jx_set(pod, "metadata.labels", labels);
	}
	snprintf(gen, sizeof(gen), "%lld", (long long)jx_int(ds, "metadata.generation", 1));
	json_object_set_new(labels, GEN_LABEL, json_string(gen));
	{
		char hash[16];
		template_hash(ds, hash, sizeof(hash));
		json_object_set_new(labels, REV_LABEL, json_string(hash));
	}
	return pod;
}

/* IsPodUpdated: the pod carries the current template's hash. */
static bool current(const json_t *ds, const json_t *pod)
{
	char hash[16];
	template_hash(ds, hash, sizeof(hash));
	return !strcmp(s_(json_string_value(json_object_get(jx_get(pod, "metadata.labels"),
							    REV_LABEL))),
		       hash);
}

/* ---- expectations ---------------------------------------------------------------------- */

static struct dsexpect *expect_get(struct daemonset *c, const char *key, bool make)
{
	struct dsexpect *e = hmap_get(&c->expect, key);
	if (!e && make) {
		if (!(e = calloc(1, sizeof(*e))))
			abort();
		hmap_put(&c->expect, key, e);
	}
	return e;
}

static bool expect_satisfied(struct daemonset *c, const char *key)
{
	struct dsexpect *e = expect_get(c, key, false);
	return !e || (e->add <= 0 && !e->dels.n) || clock_mono() - e->stamp > EXPECT_TTL_NS;
}

static void expect_free(void *v)
{
	struct dsexpect *e = v;
	strv_free(&e->dels);
	free(e);
}

/* ---- one sync ------------------------------------------------------------------------ */

static void ds_event(struct daemonset *c, const json_t *ds, const char *type, const char *reason,
		     const char *msg);

static void on_created(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct daemonset *c = arg;
	json_t *ds = informer_get(c->sets, ksync_key(s));
	char msg[512], why[512];

	if (status == 201) {
		snprintf(msg, sizeof(msg), "Created pod: %s", s_(jx_str(body, "metadata.name")));
		if (ds)
			ds_event(c, ds, "Normal", "SuccessfulCreate", msg);
		return;
	}
	{
		struct dsexpect *e = expect_get(c, ksync_key(s), false);
		if (e)
			e->add--; /* never to be observed */
	}
	api_error(why, sizeof(why), status, body, err);
	snprintf(msg, sizeof(msg), "Error creating: %s", why);
	if (ds)
		ds_event(c, ds, "Warning", "FailedCreate", msg);
	ksync_fail(s, "%s", why);
}


static void ds_event(struct daemonset *c, const json_t *ds, const char *type, const char *reason,
		     const char *msg)
{
	struct event_ref ref = event_ref_of(ds, "apps/v1", "DaemonSet");
	event_record(c->events, &ref, type, reason, "%s", msg);
}

/* The answer to a daemon pod's DELETE: the event says how it went. */
struct ds_delete {
	struct daemonset *c;
	char pod[256], pkey[512];
};

static void on_deleted(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct ds_delete *d = arg;
	json_t *ds = informer_get(d->c->sets, ksync_key(s));
	char msg[1024], why[512];

	if (status == 200 || status == 202 || status == 404) {
		snprintf(msg, sizeof(msg), "Deleted pod: %s", d->pod);
		if (ds && status != 404)
			ds_event(d->c, ds, "Normal", "SuccessfulDelete", msg);
	} else {
		struct dsexpect *e = expect_get(d->c, ksync_key(s), false);
		if (e)
			strv_remove(&e->dels, d->pkey); /* never to be observed */
		api_error(why, sizeof(why), status, body, err);
		snprintf(msg, sizeof(msg), "Error deleting: %s", why);
		if (ds)
			ds_event(d->c, ds, "Warning", "FailedDelete", msg);
		ksync_fail(s, "%s", why);
	}
	free(d);
}

static void delete_pod(struct daemonset *c, struct ksync *s, const json_t *pod)
{
	struct ds_delete *d = calloc(1, sizeof(*d));
	struct dsexpect *e = expect_get(c, ksync_key(s), true);
	char path[768];

	if (!d)
		abort();
	d->c = c;
	snprintf(d->pod, sizeof(d->pod), "%s", s_(jx_str(pod, "metadata.name")));
	obj_key(pod, d->pkey, sizeof(d->pkey));
	strv_push_unique(&e->dels, d->pkey);
	e->stamp = clock_mono();
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
		 s_(jx_str(pod, "metadata.namespace")), d->pod);
	ksync_call_owned(s, "DELETE", path, NULL, NULL, on_deleted, d, free);
}

/* maxUnavailable: a number, or a percentage of the desired pods rounded up. */
static int max_unavailable(const json_t *ds, int desired)
{
	const json_t *v = jx_get(ds, "spec.updateStrategy.rollingUpdate.maxUnavailable");
	int n = 1;
	if (json_is_integer(v))
		n = (int)json_integer_value(v);
	else if (json_is_string(v)) {
		double pct = strtod(json_string_value(v), NULL) * desired / 100.0;
		n = (int)pct + (pct > (int)pct ? 1 : 0);
	}
	return n < 1 ? 1 : n; /* maxSurge is not implemented: 0 would stall */
}

/* A failed pod may be deleted now, or is held by its node's backoff. */
static bool failed_allowed(struct daemonset *c, struct ksync *s, const char *node)
{
	char key[800];
	struct backoff *b;
	int64_t now = clock_mono();

	snprintf(key, sizeof(key), "%s/%s", ksync_key(s), node);
	if (!(b = hmap_get(&c->backoff, key))) {
		if (!(b = calloc(1, sizeof(*b))))
			abort();
		hmap_put(&c->backoff, key, b);
	}
	if (now < b->next) {
		LOG_V(2, "\"Deleting failed pod on node has been limited by backoff\" daemonset=\"%s\" "
			 "node=\"%s\"",
		      ksync_key(s), node);
		ksync_requeue_after(s, b->next - now);
		return false;
	}
	b->delay = b->delay ? b->delay * 2 : NS_PER_SEC;
	if (b->delay > FAILED_BACKOFF_MAX_NS)
		b->delay = FAILED_BACKOFF_MAX_NS;
	b->next = now + b->delay;
	return true;
}

static void sync_ds(void *ctl, struct ksync *s)
{
	struct daemonset *c = ctl;
	json_t *ds = informer_get(c->sets, ksync_key(s)), **nodes, **owned;
	size_t nn, np;
	int desired = 0, scheduled = 0, mis = 0, ready = 0, avail = 0, updated = 0, unavailable = 0;
	int budget;
	int64_t min_ready, now = clock_now();
	bool rolling, manage;
	char path[768];
	struct dsexpect *exp;

	if (!ds || jx_get(ds, "metadata.deletionTimestamp"))
		return;
	manage = expect_satisfied(c, ksync_key(s));
	exp = expect_get(c, ksync_key(s), true);
	if (manage) {
		exp->add = 0;
		strv_free(&exp->dels);
		exp->dels = (struct strv){0};
	}
	min_ready = jx_int(ds, "spec.minReadySeconds", 0);
	rolling = strcmp(s_(jx_str(ds, "spec.updateStrategy.type")), "OnDelete") != 0;
	nn = informer_list(c->nodes, &nodes);
	np = informer_indexed(c->pods, c->pods_by_owner, jx_str(ds, "metadata.uid"), &owned);

	/* The rolling update's budget: maxUnavailable minus what is unavailable
	 * now on the nodes that should run a pod (no pod, a Terminating one, or
	 * one not available). */
	for (size_t i = 0; i < nn; i++) {
		bool run, keep, good = false;
		should_run(ds, nodes[i], &run, &keep);
		if (!run)
			continue;
		desired++;
		for (size_t k = 0; !good && k < np; k++)
			good = !strcmp(s_(pod_node(owned[k])), s_(jx_str(nodes[i], "metadata.name"))) &&
			       !jx_get(owned[k], "metadata.deletionTimestamp") &&
			       pod_available(owned[k], min_ready, now);
		if (!good)
			unavailable++;
	}
	budget = max_unavailable(ds, desired) - unavailable;
	unavailable = 0;
	for (size_t i = 0; i < nn; i++) {
		const char *name = s_(jx_str(nodes[i], "metadata.name"));
		json_t *mine = NULL;
		bool run, keep, any = false;
		should_run(ds, nodes[i], &run, &keep);
		for (size_t k = 0; k < np; k++) {
			json_t *p = owned[k];
			char msg[768];
			if (strcmp(s_(pod_node(p)), name))
				continue;
			any = true;
			if (jx_get(p, "metadata.deletionTimestamp"))
				continue;
			if (!manage) {
				if (!mine)
					mine = p;
				continue;
			}
			if (!strcmp(s_(jx_str(p, "status.phase")), "Failed")) {
				if (!failed_allowed(c, s, name))
					continue;
				snprintf(msg, sizeof(msg),
					 "Found failed daemon pod %s/%s on node %s, will try to kill it",
					 s_(jx_str(p, "metadata.namespace")),
					 s_(jx_str(p, "metadata.name")), name);
				ds_event(c, ds, "Warning", "FailedDaemonPod", msg);
				delete_pod(c, s, p);
				continue;
			}
			if (!keep || mine) {
				delete_pod(c, s, p); /* not wanted here, or a duplicate */
				continue;
			}
			mine = p;
		}
		if (mine) {
			bool ok = pod_available(mine, min_ready, now);
			if (run) {
				scheduled++;
				if (pod_ready(mine))
					ready++;
				if (ok)
					avail++;
				else
					unavailable++;
				if (current(ds, mine))
					updated++;
			} else {
				mis++;
			}
			/* Old pods: an unavailable one is replaced at once, an available
			 * one within the budget. */
			if (manage && run && rolling && !current(ds, mine) && (!ok || budget > 0)) {
				if (ok)
					budget--;
				delete_pod(c, s, mine);
			}
		} else if (run && !any && manage) {
			json_t *pod = daemon_pod(ds, name);
			snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods",
				 s_(jx_str(ds, "metadata.namespace")));
			ksync_call(s, "POST", path, NULL, pod, on_created, c);
			json_decref(pod);
			exp->add++;
			exp->stamp = clock_mono();
			LOG_V(4, "\"Nodes needing daemon pods for daemon set, creating\" daemonset=\"%s\" "
				 "node=\"%s\"",
			      ksync_key(s), name);
			unavailable++;
		} else if (run) {
			unavailable++;
		}
	}
	free(nodes);
	free(owned);
	{
		json_t *st = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:I}", "desiredNumberScheduled", desired,
				       "currentNumberScheduled", scheduled, "numberMisscheduled", mis,
				       "numberReady", ready, "numberAvailable", avail,
				       "updatedNumberScheduled", updated, "observedGeneration",
				       (json_int_t)jx_int(ds, "metadata.generation", 0)),
		       *copy;
		if (unavailable)
			json_object_set_new(st, "numberUnavailable", json_integer(unavailable));
		if (min_ready > 0 && avail < ready)
			ksync_requeue_after(s, min_ready * NS_PER_SEC);
		if (schema_field_equal("apps/v1", "DaemonSet", "status", st,
		                       json_object_get(ds, "status"))) {
			json_decref(st);
			return;
		}
		copy = json_deep_copy(ds);
		json_object_set_new(copy, "status", st);
		snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/daemonsets/%s/status",
			 s_(jx_str(ds, "metadata.namespace")), s_(jx_str(ds, "metadata.name")));
		ksync_update_status(s, path, copy);
		json_decref(copy);
	}
}

/* ---- informers ------------------------------------------------------------------------- */

static void enqueue_all(struct daemonset *c)
{
	json_t **all;
	size_t n = informer_list(c->sets, &all);
	char key[512];
	for (size_t i = 0; i < n; i++)
		keyed_add(c->work, obj_key(all[i], key, sizeof(key)));
	free(all);
}

static void on_node(void *arg, json_t *node)
{
	(void)node;
	enqueue_all(arg);
}

static void on_node_update(void *arg, json_t *old, json_t *node)
{
	/* Only what decides where daemon pods run. */
	if (json_equal(jx_get(old, "metadata.labels"), jx_get(node, "metadata.labels")) &&
	    json_equal(jx_get(old, "spec.taints"), jx_get(node, "spec.taints")))
		return;
	enqueue_all(arg);
}

/* The DaemonSet that owns pod (key into buf), or false. */
static bool owner_key(const json_t *pod, char *key, size_t n)
{
	const json_t *ref = controller_ref(pod);
	if (!ref || strcmp(s_(jx_str(ref, "kind")), "DaemonSet"))
		return false;
	snprintf(key, n, "%s/%s", s_(jx_str(pod, "metadata.namespace")), s_(jx_str(ref, "name")));
	return true;
}

static void observed_deletion(struct daemonset *c, const json_t *pod, const char *key)
{
	struct dsexpect *e = expect_get(c, key, false);
	char pkey[512];
	if (e)
		strv_remove(&e->dels, obj_key(pod, pkey, sizeof(pkey)));
}

static void on_pod(void *arg, json_t *pod)
{
	struct daemonset *c = arg;
	struct dsexpect *e;
	char key[512];
	if (!owner_key(pod, key, sizeof(key)))
		return;
	if (jx_get(pod, "metadata.deletionTimestamp"))
		observed_deletion(c, pod, key);
	else if ((e = expect_get(c, key, false)))
		e->add--;
	keyed_add(c->work, key);
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	struct daemonset *c = arg;
	char key[512];
	if (!owner_key(pod, key, sizeof(key)))
		return;
	if (jx_get(pod, "metadata.deletionTimestamp") && !jx_get(old, "metadata.deletionTimestamp"))
		observed_deletion(c, pod, key);
	keyed_add(c->work, key);
}

static void on_pod_delete(void *arg, json_t *pod)
{
	struct daemonset *c = arg;
	char key[512];
	if (!owner_key(pod, key, sizeof(key)))
		return;
	observed_deletion(c, pod, key);
	keyed_add(c->work, key);
}

static void on_set(void *arg, json_t *ds)
{
	struct daemonset *c = arg;
	char key[512];
	keyed_add(c->work, obj_key(ds, key, sizeof(key)));
}

static void on_set_update(void *arg, json_t *old, json_t *ds)
{
	(void)old;
	on_set(arg, ds);
}

struct daemonset *daemonset_new(struct controller_manager *m)
{
	struct daemonset *c = calloc(1, sizeof(*c));
	struct informer_handlers sh = {on_set, on_set_update, NULL, c};
	struct informer_handlers ph = {on_pod, on_pod_update, on_pod_delete, c};
	struct informer_handlers nh = {on_node, on_node_update, on_node, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "daemon-set-controller");
	c->m = m;
	c->sets = cm_informer(m, DS_PATH, &sh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->nodes = cm_informer(m, NODES_PATH, &nh);
	c->pods_by_owner = cm_index(m, "/api/v1/pods", index_controller_uid);
	c->events = event_recorder_new(m->loop, c->rest, NAME, NULL, 3);
	c->work = keyed_new(m, "daemonset", c->rest, 2, sync_ds, c, "error syncing daemon set %s: %s");
	LOG_INFO("\"Starting daemon sets controller\"");
	return c;
}

void daemonset_stop(struct daemonset *c)
{
	if (!c)
		return;
	keyed_stop(c->work);
	event_recorder_free(c->events);
	c->events = NULL;
}

void daemonset_free(struct daemonset *c)
{
	if (!c)
		return;
	daemonset_stop(c);
	keyed_free(c->work);
	hmap_free_values(&c->expect, expect_free);
	hmap_free_values(&c->backoff, free);
	free(c);
}
