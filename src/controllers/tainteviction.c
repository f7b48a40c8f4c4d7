/*
 * taint-eviction-controller (upstream pkg/controller/tainteviction, 1.32;
 * reference/k8s-controllers-1.32.md §2, k8s-facts §5): deletes the pods of
 * a node that carries NoExecute taints they do not tolerate.
 *
 * For each pod bound to a node with NoExecute taints:
 *   a taint no toleration matches — delete now;
 *   all tolerated — after the smallest tolerationSeconds of the tolerations
 *     used (the first matching one per taint); ≤ 0 means now; none set means
 *     never, and any scheduled deletion is cancelled;
 *   a deletion already scheduled that fires earlier is kept; otherwise it
 *     is cancelled and scheduled again, counted from its first creation.
 * All NoExecute taints gone from the node: every scheduled deletion of its
 * pods is cancelled (Normal TaintManagerEviction "Cancelling deletion of Pod
 * ns/name"). When a deletion fires: "Deleting pod", Normal
 * TaintManagerEviction "Marking for deletion Pod ns/name", then up to 5
 * tries 10 ms apart of: GET the pod, add the DisruptionTarget condition
 * (DeletionByTaintManager, "Taint manager: deleting due to NoExecute taint")
 * through pods/status if it is not there, DELETE with the pod's own grace
 * period (the kubelet ends it, as upstream).
 *
 * Metrics: taint_eviction_controller_pod_deletions_total and
 * taint_eviction_controller_pod_deletion_duration_seconds (time from the
 * deletion's due time to the DELETE's answer; upstream multiplies that
 * duration by a second once more, cube records seconds).
 *
 * Upstream shards the work over 8 workers by node; on one loop the informer
 * events are handled as they arrive, node changes first being what arrives
 * first. Threads: the loop's.
 */
#include "controllers/internal.h"

#include "api/taints.h"

#include "base/clock.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "taint-eviction-controller"
#define RETRIES 5
#define RETRY_NS (10 * NS_PER_MS)

/* A pod's scheduled deletion (upstream's TimedWorker). */
struct eviction {
	struct tainteviction *c;
	char *key; /* "ns/name" */
	int64_t created, fire_at; /* wall ns */
	struct timer *timer;      /* NULL once fired: the key stays, so the same
				   * taints do not delete the pod again */
};

/* A deletion under way: GET, status patch, DELETE, with retries. */
struct deletion {
	struct deletion *prev, *next;
	struct tainteviction *c;
	char *ns, *name;
	int64_t fire_at;
	int tries;
	struct rest_call *call;
	struct timer *retry;
};

struct tainteviction {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *pods, *nodes;
	int by_node;
	struct hmap tainted;   /* node -> json_t* array of its NoExecute taints */
	struct hmap evictions; /* pod key -> struct eviction* */
	struct deletion *deletions;
	struct event_recorder *events;
	struct metric_series *m_deletions, *m_latency;
};

static const char *s(const char *v)
{
	return v ? v : "";
}

/* "ns/name" split into its parts (into the caller's buffers). */
static void split_key(const char *key, char *ns, size_t nn, char *name, size_t n)
{
	const char *slash = strchr(key, '/');
	snprintf(ns, nn, "%.*s", slash ? (int)(slash - key) : 0, key);
	snprintf(name, n, "%s", slash ? slash + 1 : key);
}

/* The event's reference as upstream builds it: v1 Pod, no UID. */
static void pod_event(struct tainteviction *c, const char *key, const char *fmt)
{
	char ns[256], name[256];
	struct event_ref ref;

	split_key(key, ns, sizeof(ns), name, sizeof(name));
	ref = (struct event_ref){"v1", "Pod", ns, name, NULL};
	event_record(c->events, &ref, "Normal", "TaintManagerEviction", fmt, key);
}

/* ---- deleting --------------------------------------------------------------------- */

static void deletion_free(struct deletion *d)
{
	struct tainteviction *c = d->c;
	if (d->prev)
		d->prev->next = d->next;
	else
		c->deletions = d->next;
	if (d->next)
		d->next->prev = d->prev;
	rest_cancel(d->call);
	timer_free(d->retry);
	free(d->ns);
	free(d->name);
	free(d);
}

static void step_get(struct deletion *d);

/* A step failed: try again 10 ms later, five tries in all. */
static void failed(struct deletion *d, int status, const json_t *body, const char *err)
{
	char why[512];
	d->call = NULL;
	if (++d->tries < RETRIES) {
		timer_after(d->retry, RETRY_NS);
		return;
	}
	LOG_UNHANDLED(NULL, "%s", api_error(why, sizeof(why), status, body, err));
	deletion_free(d);
}

static void on_retry(void *arg)
{
	step_get(arg);
}

static void on_deleted(void *arg, int status, json_t *body, const char *err)
{
	struct deletion *d = arg;
	struct tainteviction *c = d->c;

	if (status != 200 && status != 202) {
		failed(d, status, body, err);
		return;
	}
	d->call = NULL;
	metrics_inc(c->m_deletions);
	metrics_observe(c->m_latency, (double)(clock_now() - d->fire_at) / (double)NS_PER_SEC);
	deletion_free(d);
}

static void step_delete(struct deletion *d)
{
	char path[768];
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", d->ns, d->name);
	d->call = rest_do(d->c->rest, "DELETE", path, NULL, on_deleted, d);
}

static void on_patched(void *arg, int status, json_t *body, const char *err)
{
	struct deletion *d = arg;
	if (status != 200) {
		failed(d, status, body, err);
		return;
	}
	d->call = NULL;
	step_delete(d);
}

static bool has_disruption_target(const json_t *pod)
{
	const json_t *cond = jx_condition(json_object_get(pod, "status"), "DisruptionTarget");
	return cond && !strcmp(s(jx_str(cond, "status")), "True") &&
	       !strcmp(s(jx_str(cond, "reason")), "DeletionByTaintManager") &&
	       !strcmp(s(jx_str(cond, "message")), "Taint manager: deleting due to NoExecute taint");
}

static void on_got(void *arg, int status, json_t *pod, const char *err)
{
	struct deletion *d = arg;
	char path[768], now[TIME_BUF];
	json_t *patch;

	if (status != 200) {
		failed(d, status, pod, err);
		return;
	}
	d->call = NULL;
	if (has_disruption_target(pod)) {
		step_delete(d);
		return;
	}
	/* utilpod.PatchPodStatus: a strategic merge of the condition, with the
	 * pod's UID as precondition. */
	time_format_rfc3339(clock_now(), now);
	patch = json_pack("{s:{s:s},s:{s:[{s:s,s:s,s:s,s:s,s:s}]}}", "metadata", "uid",
			  s(jx_str(pod, "metadata.uid")), "status", "conditions", "type",
			  "DisruptionTarget", "status", "True", "reason", "DeletionByTaintManager",
			  "message", "Taint manager: deleting due to NoExecute taint",
			  "lastTransitionTime", now);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/status", d->ns, d->name);
	d->call = rest_do_ct(d->c->rest, "PATCH", path, SMP,
			     patch, on_patched, d);
	json_decref(patch);
}

static void step_get(struct deletion *d)
{
	char path[768];
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", d->ns, d->name);
	d->call = rest_do(d->c->rest, "GET", path, NULL, on_got, d);
}

/* deletePodHandler: the scheduled time has come. */
static void evict_now(struct tainteviction *c, const char *key, int64_t fire_at)
{
	struct deletion *d = calloc(1, sizeof(*d));
	char ns[256], name[256];

	if (!d)
		abort();
	split_key(key, ns, sizeof(ns), name, sizeof(name));
	LOG_INFO("\"Deleting pod\" controller=\"" NAME "\" pod=\"%s\"", key);
	pod_event(c, key, "Marking for deletion Pod %s");
	d->c = c;
	d->ns = str_dup(ns);
	d->name = str_dup(name);
	d->fire_at = fire_at;
	d->retry = loop_timer(c->m->loop, on_retry, d);
	d->next = c->deletions;
	if (c->deletions)
		c->deletions->prev = d;
	c->deletions = d;
	step_get(d);
}

/* ---- the timed queue ----------------------------------------------------------------- */

static void eviction_free(struct eviction *e)
{
	if (e->timer)
		timer_free(e->timer);
	free(e->key);
	free(e);
}

static void on_fire(void *arg)
{
	struct eviction *e = arg;
	struct tainteviction *c = e->c;
	int64_t fire_at = e->fire_at;
	char *key = str_dup(e->key);

	/* The key stays in the queue with no timer (upstream keeps a nil
	 * worker): later taint changes do not fire it again; the pod's deletion
	 * or a cancellation removes it. */
	timer_free(e->timer);
	e->timer = NULL;
	evict_now(c, key, fire_at);
	free(key);
}

static void schedule(struct tainteviction *c, const char *key, int64_t created, int64_t fire_at)
{
	struct eviction *e = hmap_get(&c->evictions, key);
	int64_t now = clock_now();

	if (e) {
		LOG_V(4, "\"Trying to add already existing work, skipping\" args=\"%s\"", key);
		return;
	}
	if (!(e = calloc(1, sizeof(*e))))
		abort();
	e->c = c;
	e->key = str_dup(key);
	e->created = created;
	e->fire_at = fire_at;
	e->timer = loop_timer(c->m->loop, on_fire, e);
	hmap_put(&c->evictions, key, e);
	LOG_V(4, "\"Adding TimedWorkerQueue item and scheduling deletion\" item=\"%s\" "
		 "createdAt=\"%lld\" fireAt=\"%lld\"",
	      key, (long long)created, (long long)fire_at);
	timer_after(e->timer, fire_at > now ? fire_at - now : 0);
}

/* cancelWorkWithEvent: the event only when a timer was still waiting. */
static void cancel(struct tainteviction *c, const char *key)
{
	struct eviction *e = hmap_del(&c->evictions, key);
	bool waiting = e && e->timer;
	if (!e)
		return;
	LOG_V(4, "\"Cancelling TimedWorkerQueue item\" item=\"%s\"", key);
	eviction_free(e);
	if (waiting)
		pod_event(c, key, "Cancelling deletion of Pod %s");
}

/* getMinTolerationTime over the tolerations used: 0 when none (or one ≤ 0),
 * -1 when none sets tolerationSeconds (forever), else the smallest, in ns. */
static int64_t min_toleration(const json_t *used)
{
	int64_t best = -1;
	const json_t *t;
	size_t i;

	if (!json_array_size(used))
		return 0;
	json_array_foreach(used, i, t)
	{
		const json_t *secs = json_object_get(t, "tolerationSeconds");
		if (!json_is_integer(secs))
			continue;
		if (json_integer_value(secs) <= 0)
			return 0;
		if (best < 0 || json_integer_value(secs) * NS_PER_SEC < best)
			best = json_integer_value(secs) * NS_PER_SEC;
	}
	return best;
}

/* processPodOnNode */
static void process_pod(struct tainteviction *c, const char *key, const char *node,
			const json_t *tolerations, const json_t *taints, int64_t now)
{
	json_t *used = json_array();
	const json_t *t;
	struct eviction *e;
	int64_t min, created = now;
	size_t i;
	bool all = true;

	if (!json_array_size(taints))
		cancel(c, key);
	json_array_foreach(taints, i, t)
	{
		const json_t *tol = tolerations_find(tolerations, t);
		if (!tol) {
			all = false;
			break;
		}
		json_array_append(used, (json_t *)tol);
	}
	if (!all) {
		LOG_V(2, "\"Not all taints are tolerated after update for pod on node\" pod=\"%s\" "
			 "node=\"%s\"",
		      key, node);
		cancel(c, key);
		schedule(c, key, now, now);
		json_decref(used);
		return;
	}
	min = min_toleration(used);
	json_decref(used);
	if (min < 0) {
		LOG_V(4, "\"Current tolerations for pod tolerate forever, cancelling any scheduled "
			 "deletion\" pod=\"%s\"",
		      key);
		cancel(c, key);
		return;
	}
	if ((e = hmap_get(&c->evictions, key)) && !e->timer)
		return; /* fired already */
	if (e) {
		created = e->created;
		if (created + min < now + min)
			return; /* the one scheduled fires first */
		cancel(c, key);
	}
	schedule(c, key, created, now + min);
}

/* ---- pods and nodes ---------------------------------------------------------------------- */

static json_t *no_execute(const json_t *node)
{
	static const char *const effects[] = {"NoExecute", NULL};
	json_t *out = json_array(), *t;
	size_t i;
	json_array_foreach(jx_get(node, "spec.taints"), i, t) if (taint_effect_in(t, effects))
		json_array_append(out, t);
	return out;
}

/* handlePodUpdate for a pod that exists. */
static void handle_pod(struct tainteviction *c, const json_t *pod)
{
	const char *node = jx_str(pod, "spec.nodeName");
	const json_t *taints;
	char key[512];

	informer_key(pod, key, sizeof(key));
	LOG_V(4, "\"Noticed pod update\" pod=\"%s\"", key);
	if (!node || !*node || !(taints = hmap_get(&c->tainted, node)))
		return;
	process_pod(c, key, node, jx_get(pod, "spec.tolerations"), taints, clock_now());
}

/* handleNodeUpdate */
static void handle_node(struct tainteviction *c, const json_t *node)
{
	const char *name = jx_str(node, "metadata.name");
	json_t *taints = no_execute(node), **pods;
	size_t n;
	int64_t now = clock_now();

	json_decref(hmap_del(&c->tainted, s(name)));
	if (json_array_size(taints))
		hmap_put(&c->tainted, s(name), json_incref(taints));
	n = informer_indexed(c->pods, c->by_node, name, &pods);
	if (n && !json_array_size(taints))
		LOG_V(4, "\"All taints were removed from the node. Cancelling all evictions...\" "
			 "node=\"%s\"",
		      s(name));
	for (size_t i = 0; i < n; i++) {
		char key[512];
		informer_key(pods[i], key, sizeof(key));
		if (!json_array_size(taints))
			cancel(c, key);
		else
			process_pod(c, key, s(name), jx_get(pods[i], "spec.tolerations"), taints,
				    now);
	}
	free(pods);
	json_decref(taints);
}

static void on_pod_add(void *arg, json_t *pod)
{
	handle_pod(arg, pod);
}

/* PodUpdated: only a change of node or tolerations matters. */
static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	if (!strcmp(s(jx_str(old, "spec.nodeName")), s(jx_str(pod, "spec.nodeName"))) &&
	    json_equal(jx_get(old, "spec.tolerations"), jx_get(pod, "spec.tolerations")))
		return;
	handle_pod(arg, pod);
}

static void on_pod_delete(void *arg, json_t *pod)
{
	char key[512];
	informer_key(pod, key, sizeof(key));
	LOG_V(4, "\"Noticed pod deletion\" pod=\"%s\"", key);
	cancel(arg, key);
}

static void on_node_add(void *arg, json_t *node)
{
	handle_node(arg, node);
}

/* NodeUpdated: only a change of the NoExecute taints matters. */
static void on_node_update(void *arg, json_t *old, json_t *node)
{
	json_t *a = no_execute(old), *b = no_execute(node);
	bool same = json_equal(a, b);
	json_decref(a);
	json_decref(b);
	if (!same)
		handle_node(arg, node);
}

static void on_node_delete(void *arg, json_t *node)
{
	struct tainteviction *c = arg;
	json_decref(hmap_del(&c->tainted, s(jx_str(node, "metadata.name"))));
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

struct tainteviction *tainteviction_new(struct controller_manager *m)
{
	static const double buckets[] = {0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240};
	struct tainteviction *c = calloc(1, sizeof(*c));
	struct informer_handlers nh = {on_node_add, on_node_update, on_node_delete, c};
	struct informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, c};

	if (!c)
		abort();
	/* Upstream: "taint-manager uses existing cluster role from node-controller". */
	c->rest = cm_client(m, "node-controller");
	c->m = m;
	/* Nodes first: their handlers run before the pods' for the same list. */
	c->nodes = cm_informer(m, NODES_PATH, &nh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->by_node = cm_pods_by_node(m);
	c->events = event_recorder_new(m->loop, c->rest, NAME, NULL, 3);
	c->m_deletions = metrics_with(metrics_counter(
		m->metrics, "taint_eviction_controller_pod_deletions_total",
		"[ALPHA] Total number of Pods deleted by TaintEvictionController since its start.",
		NULL));
	c->m_latency = metrics_with(metrics_histogram(
		m->metrics, "taint_eviction_controller_pod_deletion_duration_seconds",
		"[ALPHA] Latency, in seconds, between the time when a taint effect has been "
		"activated for the Pod and its deletion via TaintEvictionController.",
		NULL, buckets, sizeof(buckets) / sizeof(buckets[0])));
	LOG_INFO("\"Starting\" controller=\"" NAME "\"");
	LOG_INFO("\"Sending events to api server\"");
	return c;
}

void tainteviction_stop(struct tainteviction *c)
{
	const char *k;
	void *v;

	if (!c)
		return;
	for (size_t it = 0; hmap_next(&c->evictions, &it, &k, &v);)
		eviction_free(v);
	hmap_free(&c->evictions);
	while (c->deletions)
		deletion_free(c->deletions);
	event_recorder_free(c->events);
	c->events = NULL;
}

void tainteviction_free(struct tainteviction *c)
{
	const char *k;
	void *v;

	if (!c)
		return;
	tainteviction_stop(c);
	for (size_t it = 0; hmap_next(&c->tainted, &it, &k, &v);)
		json_decref(v);
	hmap_free(&c->tainted);
	free(c);
}
