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
 *     ns/p on node n, will try to kill it") and made again.
 *   updates — RollingUpdate: pods of an older template generation are
 *     replaced, at most maxUnavailable (1) of them unavailable at a time;
 *     OnDelete: only when deleted.
 *   status — desiredNumberScheduled, currentNumberScheduled,
 *     numberMisscheduled, numberReady, numberAvailable,
 *     updatedNumberScheduled, numberUnavailable, observedGeneration.
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

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

struct daemonset {
	struct controller_manager *m;
	struct informer *sets, *pods, *nodes;
	int pods_by_owner;
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

/* ---- which nodes ----------------------------------------------------------------- */

static bool in_values(const json_t *values, const char *v)
{
	const json_t *x;
	size_t i;
	json_array_foreach(values, i, x) if (!strcmp(s_(json_string_value(x)), v)) return true;
	return false;
}

/* A NodeSelectorRequirement on a label value (NULL: no such label). */
static bool requirement(const json_t *req, const char *value)
{
	const char *op = s_(jx_str(req, "operator"));
	const json_t *values = json_object_get(req, "values");
	if (!strcmp(op, "In"))
		return value && in_values(values, value);
	if (!strcmp(op, "NotIn"))
		return !value || !in_values(values, value);
	if (!strcmp(op, "Exists"))
		return value != NULL;
	if (!strcmp(op, "DoesNotExist"))
		return value == NULL;
	if (!strcmp(op, "Gt") || !strcmp(op, "Lt")) {
		long long have, want;
		if (!value || json_array_size(values) != 1)
			return false;
		have = strtoll(value, NULL, 10);
		want = strtoll(s_(json_string_value(json_array_get(values, 0))), NULL, 10);
		return !strcmp(op, "Gt") ? have > want : have < want;
	}
	return false;
}

static bool term_matches(const json_t *term, const json_t *node)
{
	const json_t *labels = jx_get(node, "metadata.labels"), *req;
	size_t i;
	if (!json_array_size(json_object_get(term, "matchExpressions")) &&
	    !json_array_size(json_object_get(term, "matchFields")))
		return false;
	json_array_foreach(json_object_get(term, "matchExpressions"), i, req) if (
		!requirement(req, json_string_value(json_object_get(labels, s_(jx_str(req, "key"))))))
		return false;
	json_array_foreach(json_object_get(term, "matchFields"), i, req) if (
		strcmp(s_(jx_str(req, "key")), "metadata.name") ||
		!requirement(req, jx_str(node, "metadata.name"))) return false;
	return true;
}

static bool selector_matches(const json_t *spec, const json_t *node)
{
	const json_t *labels = jx_get(node, "metadata.labels"), *terms, *t;
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach((json_t *)jx_get(spec, "nodeSelector"), k, v)
	{
		const char *have = json_string_value(json_object_get(labels, k));
		if (!have || strcmp(have, s_(json_string_value(v))))
			return false;
	}
	terms = jx_get(spec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
			     "nodeSelectorTerms");
	if (!terms)
		return true;
	json_array_foreach(terms, i, t) if (term_matches(t, node)) return true;
	return false;
}

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
	if (selector_matches(spec, node)) {
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
	return pod;
}

static bool current(const json_t *ds, const json_t *pod)
{
	char gen[32];
	snprintf(gen, sizeof(gen), "%lld", (long long)jx_int(ds, "metadata.generation", 1));
	return !strcmp(s_(json_string_value(json_object_get(jx_get(pod, "metadata.labels"),
							    GEN_LABEL))),
		       gen);
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
	api_error(why, sizeof(why), status, body, err);
	snprintf(msg, sizeof(msg), "Error creating: %s", why);
	if (ds)
		ds_event(c, ds, "Warning", "FailedCreate", msg);
	ksync_fail(s, "%s", why);
}

static void on_written(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	char why[512];
	(void)arg;
	if (status != 200 && status != 201 && status != 202 && status != 404)
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

static void ds_event(struct daemonset *c, const json_t *ds, const char *type, const char *reason,
		     const char *msg)
{
	struct event_ref ref = event_ref_of(ds, "apps/v1", "DaemonSet");
	event_record(c->events, &ref, type, reason, "%s", msg);
}

static void delete_pod(struct daemonset *c, struct ksync *s, const json_t *ds, const json_t *pod)
{
	char path[768], msg[512];
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
		 s_(jx_str(pod, "metadata.namespace")), s_(jx_str(pod, "metadata.name")));
	ksync_call(s, "DELETE", path, NULL, NULL, on_written, NULL);
	snprintf(msg, sizeof(msg), "Deleted pod: %s", s_(jx_str(pod, "metadata.name")));
	ds_event(c, ds, "Normal", "SuccessfulDelete", msg);
}

static void sync_ds(void *ctl, struct ksync *s)
{
	struct daemonset *c = ctl;
	json_t *ds = informer_get(c->sets, ksync_key(s)), **nodes, **owned;
	size_t nn, np;
	int desired = 0, scheduled = 0, mis = 0, ready = 0, avail = 0, updated = 0, unavailable = 0;
	int max_unavail, replacing = 0;
	int64_t min_ready, now = clock_now();
	bool rolling;
	char path[768];

	if (!ds || jx_get(ds, "metadata.deletionTimestamp"))
		return;
	min_ready = jx_int(ds, "spec.minReadySeconds", 0);
	rolling = strcmp(s_(jx_str(ds, "spec.updateStrategy.type")), "OnDelete") != 0;
	max_unavail = (int)jx_int(ds, "spec.updateStrategy.rollingUpdate.maxUnavailable", 1);
	if (max_unavail < 1)
		max_unavail = 1;
	nn = informer_list(c->nodes, &nodes);
	np = informer_indexed(c->pods, c->pods_by_owner, jx_str(ds, "metadata.uid"), &owned);
	/* What is unavailable now counts against the rolling update's budget:
	 * pods not available (Terminating ones included) and nodes that should
	 * have a pod and have none. */
	for (size_t k = 0; k < np; k++)
		if (jx_get(owned[k], "metadata.deletionTimestamp") ||
		    !pod_available(owned[k], min_ready, now))
			replacing++;
	for (size_t i = 0; i < nn; i++) {
		bool run, keep, has = false;
		should_run(ds, nodes[i], &run, &keep);
		for (size_t k = 0; run && !has && k < np; k++)
			has = !strcmp(s_(pod_node(owned[k])), s_(jx_str(nodes[i], "metadata.name")));
		if (run && !has)
			replacing++;
	}
	for (size_t i = 0; i < nn; i++) {
		const char *name = s_(jx_str(nodes[i], "metadata.name"));
		json_t *mine = NULL;
		bool run, keep, any = false;
		should_run(ds, nodes[i], &run, &keep);
		if (run)
			desired++;
		for (size_t k = 0; k < np; k++) {
			json_t *p = owned[k];
			char msg[768];
			if (strcmp(s_(pod_node(p)), name))
				continue;
			any = true;
			if (jx_get(p, "metadata.deletionTimestamp"))
				continue;
			if (!strcmp(s_(jx_str(p, "status.phase")), "Failed")) {
				snprintf(msg, sizeof(msg),
					 "Found failed daemon pod %s/%s on node %s, will try to kill it",
					 s_(jx_str(p, "metadata.namespace")),
					 s_(jx_str(p, "metadata.name")), name);
				ds_event(c, ds, "Warning", "FailedDaemonPod", msg);
				delete_pod(c, s, ds, p);
				continue;
			}
			if (!keep || mine) {
				delete_pod(c, s, ds, p); /* not wanted here, or a duplicate */
				continue;
			}
			mine = p;
		}
		if (mine) {
			scheduled++;
			if (!run)
				mis++;
			if (pod_ready(mine))
				ready++;
			if (pod_available(mine, min_ready, now))
				avail++;
			else if (run)
				unavailable++;
			if (current(ds, mine))
				updated++;
			else if (rolling && replacing < max_unavail && pod_available(mine, min_ready, now)) {
				replacing++;
				delete_pod(c, s, ds, mine);
			}
		} else if (run && !any) {
			json_t *pod = daemon_pod(ds, name);
			snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods",
				 s_(jx_str(ds, "metadata.namespace")));
			ksync_call(s, "POST", path, NULL, pod, on_created, c);
			json_decref(pod);
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
		if (json_equal(st, json_object_get(ds, "status"))) {
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

static void on_pod(void *arg, json_t *pod)
{
	struct daemonset *c = arg;
	const json_t *ref = controller_ref(pod);
	char key[512];
	if (!ref || strcmp(s_(jx_str(ref, "kind")), "DaemonSet"))
		return;
	snprintf(key, sizeof(key), "%s/%s", s_(jx_str(pod, "metadata.namespace")),
		 s_(jx_str(ref, "name")));
	keyed_add(c->work, key);
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	(void)old;
	on_pod(arg, pod);
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
	struct informer_handlers ph = {on_pod, on_pod_update, on_pod, c};
	struct informer_handlers nh = {on_node, on_node_update, on_node, c};

	if (!c)
		abort();
	c->m = m;
	c->sets = cm_informer(m, DS_PATH, &sh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->nodes = cm_informer(m, "/api/v1/nodes", &nh);
	c->pods_by_owner = cm_index(m, "/api/v1/pods", index_controller_uid);
	c->events = event_recorder_new(m->rest, NAME, NULL, 3);
	c->work = keyed_new(m, 2, sync_ds, c, "error syncing daemon set %s: %s");
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
	free(c);
}
