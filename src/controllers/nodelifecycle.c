/*
 * node-lifecycle-controller (upstream pkg/controller/nodelifecycle, 1.32;
 * reference/k8s-controllers-1.32.md §1, k8s-facts §5): watches Nodes and
 * their Leases in kube-node-lease and, every --node-monitor-period:
 *
 *   health — a node's probe time moves when its Ready heartbeat or its
 *     Lease's renewTime changes, on this controller's own clock. Past the
 *     grace period (--node-monitor-grace-period, 50 s; a node that never
 *     posted Ready: --node-startup-grace-period, 60 s) its Ready,
 *     MemoryPressure, DiskPressure and PIDPressure conditions go Unknown
 *     (NodeStatusUnknown, "Kubelet stopped posting node status.").
 *   NoSchedule taints — kept equal to what the conditions and
 *     spec.unschedulable say, on every Node change.
 *   NoExecute taints — not-ready / unreachable, added through one
 *     rate-limited queue per zone (token bucket, burst 1, drained every
 *     100 ms) whose rate follows the zone's state: Normal 0.1/s;
 *     PartialDisruption (more than 2 and at least 55 % not Ready) 0.01/s in a
 *     zone of more than 50 nodes, else 0; FullDisruption 0.1/s — unless every
 *     zone is fully disrupted: then no NoExecute taint at all and those
 *     present are removed ("master disruption mode"). Removed at once when
 *     the node is Ready again.
 *
 * Metrics node_collector_zone_health, _zone_size, _unhealthy_nodes_in_zone
 * {zone}, _evictions_total{zone} (one per NoExecute tainting) and the
 * _update_node_health / _update_all_nodes_health duration histograms (the
 * pass's own work; the writes it starts are not waited for).
 *
 * Events RegisteredNode, RemovingNode and NodeNotReady on the Node, from
 * component node-controller. When a node stops being Ready its pods' Ready
 * condition goes False, with a Warning NodeNotReady "Node is not ready" on
 * each (MarkPodsNotReady); so does a pod bound to it later.
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVICTION_TICK_NS (100 * NS_PER_MS) /* NodeEvictionPeriod */

#define TAINT_NOT_READY "node.kubernetes.io/not-ready"
#define TAINT_UNREACHABLE "node.kubernetes.io/unreachable"
#define EXCLUDE_DISRUPTION "node.kubernetes.io/exclude-disruption"

struct health {
	int64_t probe;             /* this controller's clock (wall ns) */
	char observed[8];          /* Ready as the last pass saw it: True/False/Unknown */
	char *heartbeat, *renew;   /* what was last seen */
};

struct zone {
	enum zone_state state;
	double qps, tokens;
	int64_t refilled;
	struct strv queue; /* nodes waiting for their NoExecute taint */
};

struct taint_write;
struct health_write;

struct nodelifecycle {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct nlc_opts o;
	struct informer *nodes, *leases, *pods;
	int by_node; /* the pod informer's index by spec.nodeName */
	struct hmap health; /* node name -> struct health */
	struct hmap zones;  /* zone key -> struct zone */
	struct timer *monitor, *evict;
	bool all_disrupted;
	struct event_recorder *events;
	struct job_list jobs;        /* status writes in flight */
	struct taint_write *writes;  /* taint changes in flight */
	struct health_write *health_writes; /* Unknown status writes in flight */
	struct strv pods_retry;      /* nodes whose pods could not all be marked not ready */
	struct metric_family *m_zone_health, *m_zone_size, *m_unhealthy, *m_evictions;
	struct metric_series *m_node_health, *m_all_health;
};

/* ---- pure pieces ---------------------------------------------------------------- */

enum zone_state nlc_zone_state(int ready, int not_ready, double unhealthy_threshold)
{
	if (ready == 0 && not_ready > 0)
		return ZONE_FULL_DISRUPTION;
	if (not_ready > 2 && (double)not_ready / (double)(ready + not_ready) >= unhealthy_threshold)
		return ZONE_PARTIAL_DISRUPTION;
	return ZONE_NORMAL;
}

double nlc_zone_qps(const struct nlc_opts *o, enum zone_state s, int zone_size, bool all_full)
{
	if (all_full)
		return 0;
	switch (s) {
	case ZONE_PARTIAL_DISRUPTION:
		return zone_size > o->large_cluster_size_threshold ? o->secondary_node_eviction_rate
								  : 0;
	case ZONE_INITIAL:
	case ZONE_NORMAL:
	case ZONE_FULL_DISRUPTION:
		break;
	}
	return o->node_eviction_rate;
}

const char *nlc_zone_state_name(enum zone_state s)
{
	static const char *const names[] = {"Initial", "Normal", "PartialDisruption",
					    "FullDisruption"};
	return names[s];
}

void nlc_opts_default(struct nlc_opts *o)
{
	o->node_monitor_period_ns = 5 * NS_PER_SEC;
	o->node_monitor_grace_period_ns = 50 * NS_PER_SEC;
	o->node_startup_grace_period_ns = 60 * NS_PER_SEC;
	o->node_eviction_rate = 0.1;
	o->secondary_node_eviction_rate = 0.01;
	o->unhealthy_zone_threshold = 0.55;
	o->large_cluster_size_threshold = 50;
}

/* ---- node fields ------------------------------------------------------------------ */

static const char *node_name(const json_t *node)
{
	return jx_str(node, "metadata.name") ?: "";
}

static json_t *condition(const json_t *node, const char *type)
{
	return jx_condition(json_object_get(node, "status"), type);
}

/* "True", "False", "Unknown", or NULL: no Ready condition. */
static const char *ready_status(const json_t *node)
{
	const json_t *c = condition(node, "Ready");
	return c ? jx_str(c, "status") : NULL;
}

static const char *label(const json_t *node, const char *key)
{
	return json_string_value(json_object_get(jx_get(node, "metadata.labels"), key));
}

void nlc_zone_key(const json_t *node, char *buf, size_t n)
{
	const char *region = label(node, "topology.kubernetes.io/region");
	const char *zone = label(node, "topology.kubernetes.io/zone");
	if (!region)
		region = label(node, "failure-domain.beta.kubernetes.io/region");
	if (!zone)
		zone = label(node, "failure-domain.beta.kubernetes.io/zone");
	if (!region && !zone)
		snprintf(buf, n, "%s", "");
	else
		snprintf(buf, n, "%s:\\x00:%s", region ? region : "", zone ? zone : "");
}

static bool has_taint(const json_t *node, const char *key, const char *effect)
{
	json_t *t;
	size_t i;
	json_array_foreach(jx_get(node, "spec.taints"), i, t) if (
		!strcmp(jx_str(t, "key") ?: "", key) &&
		!strcmp(jx_str(t, "effect") ?: "", effect)) return true;
	return false;
}

/* ---- writing ------------------------------------------------------------------------ */

/* Events from component node-controller: on the Node (namespace "default")
 * or on a pod. */
#define node_event(c, node, ...)                                                                   \
	do {                                                                                       \
		struct event_ref ref_ = event_ref_of(node, "v1", "Node");                          \
		event_record((c)->events, &ref_, __VA_ARGS__);                                     \
	} while (0)
#define pod_event(c, pod, ...)                                                                     \
	do {                                                                                       \
		struct event_ref ref_ = event_ref_of(pod, "v1", "Pod");                            \
		event_record((c)->events, &ref_, __VA_ARGS__);                                     \
	} while (0)

/* ---- pods on a node that is not Ready (MarkPodsNotReady) ---------------------------- */

/* A pod that could not be marked: its node is marked again at the next
 * monitor pass (upstream's nodesToRetry). */
static void on_pod_marked(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct nodelifecycle *c = j->ctl;
	char why[512];

	if (status != 200 && status != 404) {
		LOG_UNHANDLED(NULL, "unable to mark all pods NotReady on node %s: %s; queuing for retry",
			      j->key, api_error(why, sizeof(why), status, body, err));
		strv_push_unique(&c->pods_retry, j->key);
	}
	job_done(&c->jobs, j, false);
}

/* The pod's Ready condition to False, and upstream's Warning on the pod;
 * nothing when it has no Ready condition or it is False already. */
static void mark_pod_not_ready(struct nodelifecycle *c, const json_t *pod)
{
	const json_t *cond = condition(pod, "Ready");
	json_t *copy;
	char now[TIME_BUF], path[600];

	if (!cond || !strcmp(jx_str(cond, "status") ?: "", "False"))
		return;
	LOG_V(2, "\"Updating ready status of pod to false\" pod=\"%s/%s\"",
	      jx_str(pod, "metadata.namespace") ?: "", jx_str(pod, "metadata.name") ?: "");
	copy = json_deep_copy(pod);
	{
		json_t *ready = condition(copy, "Ready");
		json_object_set_new(ready, "status", json_string("False"));
		json_object_set_new(ready, "lastTransitionTime",
				    json_string(time_format_rfc3339(clock_now(), now)));
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/status",
		 jx_str(pod, "metadata.namespace") ?: "", jx_str(pod, "metadata.name") ?: "");
	{
		struct job *j = job_new(&c->jobs, NULL, jx_str(pod, "spec.nodeName") ?: "", c);
		rest_do(c->rest, "PUT", path, copy, on_pod_marked, j);
	}
	json_decref(copy);
	pod_event(c, pod, "Warning", "NodeNotReady", "Node is not ready");
}

static void mark_pods_not_ready(struct nodelifecycle *c, const char *node)
{
	json_t **pods;
	size_t n = informer_indexed(c->pods, c->by_node, node, &pods);

	for (size_t i = 0; i < n; i++)
		mark_pod_not_ready(c, pods[i]);
	free(pods);
}

/* The node's taints minus those of `keys` with `effect`, plus `add`. */
static json_t *taints_with(const json_t *node, const char *const *keys, const char *effect,
			   json_t *add)
{
	json_t *out = json_array(), *t;
	size_t i;

	json_array_foreach(jx_get(node, "spec.taints"), i, t)
	{
		bool drop = false;
		for (size_t k = 0; keys[k] && !drop; k++)
			drop = !strcmp(jx_str(t, "key") ?: "", keys[k]) &&
			       !strcmp(jx_str(t, "effect") ?: "", effect);
		if (!drop)
			json_array_append(out, t);
	}
	json_array_extend(out, add);
	json_decref(add);
	return out;
}

/* ---- NoSchedule: the exact set the node's state asks for ---------------------------- */

static const char *const no_schedule_keys[] = {
	TAINT_NOT_READY,
	TAINT_UNREACHABLE,
	"node.kubernetes.io/unschedulable",
	"node.kubernetes.io/memory-pressure",
	"node.kubernetes.io/disk-pressure",
	"node.kubernetes.io/pid-pressure",
	"node.kubernetes.io/network-unavailable",
	NULL};

static json_t *wanted_no_schedule(const json_t *node)
{
	static const struct {
		const char *type, *status, *key;
	} map[] = {
		{"Ready", "False", TAINT_NOT_READY},
		{"Ready", "Unknown", TAINT_UNREACHABLE},
		{"MemoryPressure", "True", "node.kubernetes.io/memory-pressure"},
		{"DiskPressure", "True", "node.kubernetes.io/disk-pressure"},
		{"PIDPressure", "True", "node.kubernetes.io/pid-pressure"},
		{"NetworkUnavailable", "True", "node.kubernetes.io/network-unavailable"},
	};
	json_t *out = json_array();

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		const json_t *cond = condition(node, map[i].type);
		if (cond && !strcmp(jx_str(cond, "status") ?: "", map[i].status))
			json_array_append_new(out, json_pack("{s:s,s:s}", "key", map[i].key,
							     "effect", "NoSchedule"));
	}
	if (json_is_true(jx_get(node, "spec.unschedulable")))
		json_array_append_new(out, json_pack("{s:s,s:s}", "key",
						     "node.kubernetes.io/unschedulable", "effect",
						     "NoSchedule"));
	return out;
}

/* The taints the node should have for its NoSchedule state, or NULL when
 * it has them already. */
static json_t *no_schedule_taints(const json_t *node)
{
	json_t *want = wanted_no_schedule(node), *t;
	bool same = true;
	size_t i, have = 0;

	json_array_foreach(want, i, t) same &= has_taint(node, jx_str(t, "key"), "NoSchedule");
	json_array_foreach(jx_get(node, "spec.taints"), i, t)
	{
		for (size_t k = 0; no_schedule_keys[k]; k++)
			if (!strcmp(jx_str(t, "key") ?: "", no_schedule_keys[k]) &&
			    !strcmp(jx_str(t, "effect") ?: "", "NoSchedule"))
				have++;
	}
	if (same && have == json_array_size(want)) {
		json_decref(want);
		return NULL;
	}
	/* SwapNodeControllerTaint: a taint already there stays as it is; a new
	 * one is stamped timeAdded now. */
	{
		char now[TIME_BUF];
		json_t *keep = json_array();
		time_format_rfc3339(clock_now(), now);
		json_array_foreach(want, i, t)
		{
			json_t *old, *found = NULL;
			size_t k;
			json_array_foreach(jx_get(node, "spec.taints"), k, old) if (
				!strcmp(jx_str(old, "key") ?: "", jx_str(t, "key")) &&
				!strcmp(jx_str(old, "effect") ?: "", "NoSchedule")) found = old;
			if (found)
				json_array_append(keep, found);
			else {
				json_object_set_new(t, "timeAdded", json_string(now));
				json_array_append(keep, t);
			}
		}
		json_decref(want);
		return taints_with(node, no_schedule_keys, "NoSchedule", keep);
	}
}

/* ---- taint writes: GET, change, PUT with its resourceVersion, retry on
 * conflict (upstream's AddOrUpdateTaintOnNode / RemoveTaintOffNode) ------------ */

enum taint_op { OP_SYNC_NO_SCHEDULE, OP_SET_NO_EXECUTE, OP_CLEAR_NO_EXECUTE };

#define TAINT_TRIES 5

struct taint_write {
	struct nodelifecycle *c;
	struct taint_write *prev, *next;
	char node[256];
	enum taint_op op;
	char key[64]; /* OP_SET_NO_EXECUTE: which taint */
	int tries;
	bool from_queue; /* OP_SET_NO_EXECUTE through the zone's rate limiter */
};

static void no_execute_outcome(struct taint_write *t, bool ok);

static const char *const no_execute_keys[] = {TAINT_NOT_READY, TAINT_UNREACHABLE, NULL};

static json_t *apply_op(const struct taint_write *t, const json_t *node)
{
	char now[TIME_BUF];

	switch (t->op) {
	case OP_SYNC_NO_SCHEDULE:
		return no_schedule_taints(node);
	case OP_SET_NO_EXECUTE:
		if (has_taint(node, t->key, "NoExecute"))
			return NULL;
		return taints_with(node, no_execute_keys, "NoExecute",
				   json_pack("[{s:s,s:s,s:s}]", "key", t->key, "effect",
					     "NoExecute", "timeAdded",
					     time_format_rfc3339(clock_now(), now)));
	case OP_CLEAR_NO_EXECUTE:
		if (!has_taint(node, TAINT_NOT_READY, "NoExecute") &&
		    !has_taint(node, TAINT_UNREACHABLE, "NoExecute"))
			return NULL;
		return taints_with(node, no_execute_keys, "NoExecute", json_array());
	}
	return NULL;
}

static void taint_get(struct taint_write *t);

static void taint_end(struct taint_write *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		t->c->writes = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
}

static void on_taint_put(void *arg, int status, json_t *body, const char *err)
{
	struct taint_write *t = arg;
	char why[512];

	if (status == 409 && ++t->tries < TAINT_TRIES) {
		taint_get(t);
		return;
	}
	if (status != 200)
		LOG_UNHANDLED(NULL, "failed to update taints of node %s: %s", t->node,
			      api_error(why, sizeof(why), status, body, err));
	no_execute_outcome(t, status == 200);
	taint_end(t);
}

static void on_taint_get(void *arg, int status, json_t *body, const char *err)
{
	struct taint_write *t = arg;
	char why[512], path[300];
	json_t *taints, *copy;

	if (status != 200) {
		if (status != 404)
			LOG_UNHANDLED(NULL, "failed to get node %s: %s", t->node,
				      api_error(why, sizeof(why), status, body, err));
		/* A node gone needs no taint; one that could not be read does. */
		no_execute_outcome(t, status == 404);
		taint_end(t);
		return;
	}
	if (!(taints = apply_op(t, body))) {
		taint_end(t);
		return;
	}
	copy = json_deep_copy(body);
	if (json_array_size(taints))
		jx_set(copy, "spec.taints", taints);
	else {
		json_decref(taints);
		json_object_del(json_object_get(copy, "spec"), "taints");
	}
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", t->node);
	rest_do(t->c->rest, "PUT", path, copy, on_taint_put, t);
	json_decref(copy);
}

static void taint_get(struct taint_write *t)
{
	char path[300];
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", t->node);
	rest_do(t->c->rest, "GET", path, NULL, on_taint_get, t);
}

/* Start a taint change when the informer's copy says one is needed. */
static struct taint_write *taint_write(struct nodelifecycle *c, const json_t *node,
				       enum taint_op op, const char *key)
{
	struct taint_write *t = calloc(1, sizeof(*t));
	json_t *need;

	if (!t)
		abort();
	t->c = c;
	t->op = op;
	snprintf(t->key, sizeof(t->key), "%s", key ? key : "");
	if (!(need = apply_op(t, node))) {
		free(t);
		return NULL;
	}
	json_decref(need);
	snprintf(t->node, sizeof(t->node), "%s", node_name(node));
	t->next = c->writes;
	if (c->writes)
		c->writes->prev = t;
	c->writes = t;
	taint_get(t);
	return t;
}

static void sync_no_schedule(struct nodelifecycle *c, const json_t *node)
{
	taint_write(c, node, OP_SYNC_NO_SCHEDULE, NULL);
}

/* ---- NoExecute ------------------------------------------------------------------------- */

/* The zone's token bucket: burst 1, as upstream's. Upstream's queue makes
 * each taint call inside its loop, so the bucket refills while the calls
 * run and a rate above one node per tick still drains at that rate; the
 * calls here are asynchronous, so a tick may hold what it earned — never
 * less than the one token of upstream's burst. */
static void refill(struct zone *z, int64_t now)
{
	double cap = fmax(1.0, z->qps * (double)EVICTION_TICK_NS / 1e9);
	z->tokens = fmin(cap, z->tokens + z->qps * (double)(now - z->refilled) / 1e9);
	z->refilled = now;
}

/* SwapLimiter: nothing if the rate is the same; else a new bucket (burst
 * 1), full only if the old one still had its token — a bucket that never
 * accepts (rate 0) leaves the new one empty. */
static void swap_limiter(struct zone *z, double qps)
{
	bool had;

	if (qps == z->qps)
		return;
	refill(z, clock_now());
	had = z->tokens >= 1.0;
	z->qps = qps;
	z->tokens = qps > 0 && had ? 1.0 : 0.0;
}

static struct zone *zone_of(struct nodelifecycle *c, const char *key)
{
	struct zone *z = hmap_get(&c->zones, key);
	if (!z) {
		if (!(z = calloc(1, sizeof(*z))))
			abort();
		/* addPodEvictorForNewZone: the primary rate, a full bucket. */
		z->state = ZONE_INITIAL;
		z->qps = c->o.node_eviction_rate;
		z->tokens = 1.0;
		z->refilled = clock_now();
		hmap_put(&c->zones, key, z);
		LOG_INFO("\"Initializing eviction metric for zone\" zone=\"%s\"", key);
		metrics_add(metrics_with(c->m_evictions, key), 0);
	}
	return z;
}

static void dequeue(struct zone *z, const char *name)
{
	strv_remove(&z->queue, name);
}

static bool queued(const struct zone *z, const char *name)
{
	return strv_has(&z->queue, name);
}

/* A NoExecute taint for the node's Ready state now, replacing the other;
 * from_queue: the zone's limiter let it through, so its outcome counts. */
static void taint_no_execute(struct nodelifecycle *c, const json_t *node, const char *key,
			     bool from_queue)
{
	struct taint_write *t = taint_write(c, node, OP_SET_NO_EXECUTE, key);
	if (t)
		t->from_queue = from_queue;
}

/* SwapNodeControllerTaint's result in doNoExecuteTaintingPass: done, the
 * eviction counted; or the node back in its zone's queue, tried again. */
static void no_execute_outcome(struct taint_write *t, bool ok)
{
	struct nodelifecycle *c = t->c;
	json_t *node;
	char zk[512];

	if (t->op != OP_SET_NO_EXECUTE || !t->from_queue ||
	    !(node = informer_get(c->nodes, t->node)))
		return;
	nlc_zone_key(node, zk, sizeof(zk));
	if (ok) {
		metrics_inc(metrics_with(c->m_evictions, zk));
		return;
	}
	struct zone *z = zone_of(c, zk);
	if (!queued(z, t->node))
		strv_push(&z->queue, t->node);
}

static void untaint_no_execute(struct nodelifecycle *c, const json_t *node)
{
	taint_write(c, node, OP_CLEAR_NO_EXECUTE, NULL);
}

/* processTaintBaseEviction, with the Ready status this pass observed. */
static void process_no_execute(struct nodelifecycle *c, const json_t *node, struct zone *z,
			       const char *ready)
{
	const char *name = node_name(node);
	const char *want = NULL, *other = NULL;

	if (ready && !strcmp(ready, "False"))
		want = TAINT_NOT_READY, other = TAINT_UNREACHABLE;
	else if (ready && !strcmp(ready, "Unknown"))
		want = TAINT_UNREACHABLE, other = TAINT_NOT_READY;
	if (!want) {
		if (ready && !strcmp(ready, "True")) {
			dequeue(z, name);
			if (has_taint(node, TAINT_NOT_READY, "NoExecute") ||
			    has_taint(node, TAINT_UNREACHABLE, "NoExecute")) {
				untaint_no_execute(c, node);
				LOG_V(2, "\"Node is healthy again, removed all taints\" node=\"%s\"",
				      name);
			}
		}
		return;
	}
	if (has_taint(node, want, "NoExecute"))
		return;
	if (has_taint(node, other, "NoExecute")) {
		/* The two are exclusive: swapped at once, no rate limit. */
		taint_no_execute(c, node, want, false);
		return;
	}
	if (!queued(z, name)) {
		LOG_V(2, "\"Node is %s. Adding it to the Taint queue\" node=\"%s\"",
		      !strcmp(want, TAINT_NOT_READY) ? "NotReady" : "unresponsive", name);
		strv_push(&z->queue, name);
	}
}

/* Every 100 ms: each zone's queue, as its token bucket allows. */
static void on_evict_tick(void *arg)
{
	struct nodelifecycle *c = arg;
	const char *key;
	void *v;
	int64_t now = clock_now();

	timer_after(c->evict, EVICTION_TICK_NS);
	for (size_t it = 0; hmap_next(&c->zones, &it, &key, &v);) {
		struct zone *z = v;
		refill(z, now);
		/* RateLimitedTimedQueue.Try: a token for each node taken, whatever
		 * then happens to it. */
		while (z->queue.n && z->tokens >= 1.0) {
			char *name = str_dup(z->queue.v[0]);
			json_t *node = informer_get(c->nodes, name);
			const char *ready = node ? ready_status(node) : NULL;

			z->tokens -= 1.0;
			dequeue(z, name);
			/* doNoExecuteTaintingPass reads the node as it is now. */
			if (ready && (!strcmp(ready, "False") || !strcmp(ready, "Unknown")))
				taint_no_execute(c, node,
						 !strcmp(ready, "False") ? TAINT_NOT_READY
									 : TAINT_UNREACHABLE,
						 true);
			else
				LOG_V(4, "\"Node was in a taint queue, but it's ready now. Ignoring "
					 "taint request\" node=\"%s\"",
				      name);
			free(name);
		}
	}
}

/* ---- health ------------------------------------------------------------------------------ */

static bool changed(char **seen, const char *now)
{
	bool diff = (*seen == NULL) != (now == NULL) || (now && strcmp(*seen, now));
	if (diff) {
		free(*seen);
		*seen = now ? strdup(now) : NULL;
	}
	return diff;
}

static struct health *health_of(struct nodelifecycle *c, const json_t *node)
{
	struct health *h = hmap_get(&c->health, node_name(node));
	const json_t *ready = condition(node, "Ready");
	int64_t created = 0;

	if (h)
		return h;
	if (!(h = calloc(1, sizeof(*h))))
		abort();
	/* A node that never posted Ready counts from its creation; any other is
	 * given a fresh grace period from now, as after a restart. */
	if (!ready && time_parse_rfc3339(jx_str(node, "metadata.creationTimestamp"), &created) == 0)
		h->probe = created;
	else {
		LOG_INFO("\"Missing timestamp for Node. Assuming now as a timestamp\" node=\"%s\"",
			 node_name(node));
		h->probe = clock_now();
	}
	if (ready) {
		h->heartbeat = str_dup(jx_str(ready, "lastHeartbeatTime"));
	}
	hmap_put(&c->health, node_name(node), h);
	return h;
}

static void observe(struct nodelifecycle *c, const json_t *node, struct health *h)
{
	const json_t *ready = condition(node, "Ready");
	char key[300];
	json_t *lease;

	if (ready && changed(&h->heartbeat, jx_str(ready, "lastHeartbeatTime")))
		h->probe = clock_now();
	snprintf(key, sizeof(key), "kube-node-lease/%s", node_name(node));
	lease = informer_get(c->leases, key);
	if (lease && jx_str(lease, "spec.renewTime") &&
	    (!h->renew || strcmp(jx_str(lease, "spec.renewTime"), h->renew) > 0)) {
		free(h->renew);
		h->renew = strdup(jx_str(lease, "spec.renewTime"));
		h->probe = clock_now();
	}
}

/* The status write of a stale node: the four kubelet conditions to Unknown.
 * NULL when nothing changes. */
static json_t *stale_status(const json_t *node, bool *ready_changed)
{
	static const char *const types[] = {"Ready", "MemoryPressure", "DiskPressure",
					    "PIDPressure"};
	json_t *copy = json_deep_copy(node), *conds = jx_get(copy, "status.conditions");
	char now[TIME_BUF];

	time_format_rfc3339(clock_now(), now);
	*ready_changed = false;
	if (!json_is_object(json_object_get(copy, "status")))
		json_object_set_new(copy, "status", json_object());
	if (!json_is_array(conds)) {
		conds = json_array();
		jx_set(copy, "status.conditions", conds);
	}
	for (size_t i = 0; i < 4; i++) {
		json_t *c = jx_condition(json_object_get(copy, "status"), types[i]);
		if (!c) {
			json_array_append_new(
				conds, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", types[i],
						 "status", "Unknown", "reason", "NodeStatusNeverUpdated",
						 "message", "Kubelet never posted node status.",
						 "lastHeartbeatTime",
						 jx_str(node, "metadata.creationTimestamp") ?: now,
						 "lastTransitionTime", now));
		} else if (strcmp(jx_str(c, "status") ?: "", "Unknown")) {
			json_object_set_new(c, "status", json_string("Unknown"));
			json_object_set_new(c, "reason", json_string("NodeStatusUnknown"));
			json_object_set_new(c, "message",
					    json_string("Kubelet stopped posting node status."));
			json_object_set_new(c, "lastTransitionTime", json_string(now));
		} else {
			continue;
		}
		*ready_changed |= i == 0;
	}
	if (!*ready_changed) {
		/* upstream writes only when Ready changed */
		json_decref(copy);
		return NULL;
	}
	return copy;
}

/*
 * ---- the Unknown status write, retried as upstream's tryUpdateNodeHealth ----------
 *
 * Every try reads the Node whole first: the informer keeps a view of it
 * (manager.c), and a status PUT replaces the whole status. Upstream's first
 * try writes its informer's copy; this one GET is the difference, one
 * request for each node that goes stale.
 */

#define HEALTH_RETRIES 5                 /* NodeHealthUpdateRetry */
#define HEALTH_RETRY_NS (20 * NS_PER_MS) /* retrySleepTime */

struct health_write {
	struct health_write *prev, *next;
	struct nodelifecycle *c;
	char name[256];
	int tries;
	struct rest_call *call;
	struct timer *retry;
};

static void health_write_end(struct health_write *w)
{
	struct nodelifecycle *c = w->c;
	if (w->prev)
		w->prev->next = w->next;
	else
		c->health_writes = w->next;
	if (w->next)
		w->next->prev = w->prev;
	rest_cancel(w->call);
	timer_free(w->retry);
	free(w);
}

static void health_put(struct health_write *w, const json_t *node);

static void on_health_got(void *arg, int status, json_t *node, const char *err)
{
	struct health_write *w = arg;
	bool changed;
	json_t *next;

	(void)err;
	w->call = NULL;
	if (status != 200) {
		LOG_ERROR("\"Failed while getting a Node to retry updating node health. Probably "
			  "Node was deleted\" node=\"%s\"",
			  w->name);
		health_write_end(w);
		return;
	}
	/* Someone else may have written it meanwhile (the kubelet is back, or
	 * it is Unknown already): nothing to do then. */
	if (!(next = stale_status(node, &changed))) {
		health_write_end(w);
		return;
	}
	json_decref(next);
	health_put(w, node);
}

static void health_get(void *arg)
{
	struct health_write *w = arg;
	char path[300];
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", w->name);
	w->call = rest_do(w->c->rest, "GET", path, NULL, on_health_got, w);
}

static void on_health_put(void *arg, int status, json_t *body, const char *err)
{
	struct health_write *w = arg;
	char why[512], q[600];

	w->call = NULL;
	if (status == 200 || status == 201) {
		health_write_end(w);
		return;
	}
	if (++w->tries < HEALTH_RETRIES) {
		timer_after(w->retry, HEALTH_RETRY_NS);
		return;
	}
	log_quote(q, sizeof(q), api_error(why, sizeof(why), status, body, err));
	LOG_ERROR("\"Update health of Node from Controller error, Skipping - no pods will be "
		  "evicted\" err=\"%s\" node=\"%s\"",
		  q, w->name);
	health_write_end(w);
}

static void health_put(struct health_write *w, const json_t *node)
{
	bool changed;
	json_t *status = stale_status(node, &changed);
	char path[300];

	snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", w->name);
	w->call = rest_do(w->c->rest, "PUT", path, status, on_health_put, w);
	json_decref(status);
}

static void write_health(struct nodelifecycle *c, const json_t *node)
{
	struct health_write *w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->c = c;
	snprintf(w->name, sizeof(w->name), "%s", node_name(node));
	w->retry = loop_timer(c->m->loop, health_get, w);
	w->next = c->health_writes;
	if (c->health_writes)
		c->health_writes->prev = w;
	c->health_writes = w;
	health_get(w);
}

/* One node of monitorNodeHealth. Returns the Ready status it should be
 * counted with (after a stale update). */
static const char *monitor_node(struct nodelifecycle *c, const json_t *node,
				const char **observed_out)
{
	struct health *h = health_of(c, node);
	const char *ready = ready_status(node), *observed = ready;
	int64_t grace = ready ? c->o.node_monitor_grace_period_ns
			      : c->o.node_startup_grace_period_ns;
	bool ready_changed;
	json_t *status;

	observe(c, node, h);
	if (clock_now() <= h->probe + grace)
		goto out;
	if (!(status = stale_status(node, &ready_changed)))
		goto out;
	json_decref(status);
	write_health(c, node);
	ready = "Unknown";
out:
	/* Only this controller's own True → Unknown: a kubelet that posts
	 * NotReady itself says so with its own event. */
	if (observed && !strcmp(observed, "True") && strcmp(ready, "True")) {
		node_event(c, node, "Normal", "NodeNotReady", "Node %s status is now: NodeNotReady",
			   node_name(node));
		strv_remove(&c->pods_retry, node_name(node));
		mark_pods_not_ready(c, node_name(node));
	} else if (strv_remove(&c->pods_retry, node_name(node)) && strcmp(ready ?: "", "True")) {
		mark_pods_not_ready(c, node_name(node));
	}
	snprintf(h->observed, sizeof(h->observed), "%s", ready ? ready : "");
	*observed_out = observed;
	return ready;
}

/* handleDisruption: zone states, master disruption mode, limiters. */
static void handle_disruption(struct nodelifecycle *c, json_t **all, size_t n,
			      struct hmap *counts)
{
	bool all_full = true, any = false;
	const char *key;
	void *v;

	for (size_t it = 0; hmap_next(counts, &it, &key, &v);) {
		int *cnt = v, size = cnt[0] + cnt[1];
		any = true;
		metrics_set(metrics_with(c->m_zone_size, key), size);
		metrics_set(metrics_with(c->m_unhealthy, key), cnt[1]);
		metrics_set(metrics_with(c->m_zone_health, key),
			    size ? 100.0 * (double)cnt[0] / (double)size : 100.0);
		all_full &= nlc_zone_state(cnt[0], cnt[1], c->o.unhealthy_zone_threshold) ==
			    ZONE_FULL_DISRUPTION;
	}
	all_full &= any;
	if (all_full && !c->all_disrupted) {
		LOG_INFO("\"Controller detected that all Nodes are not-Ready. Entering master "
			 "disruption mode\"");
		for (size_t i = 0; i < n; i++) {
			char zk[512];
			nlc_zone_key(all[i], zk, sizeof(zk));
			dequeue(zone_of(c, zk), node_name(all[i]));
			untaint_no_execute(c, all[i]);
		}
		for (size_t it = 0; hmap_next(&c->zones, &it, &key, &v);)
			swap_limiter(v, 0);
	} else if (!all_full && c->all_disrupted) {
		LOG_INFO("\"Controller detected that some Nodes are Ready. Exiting master "
			 "disruption mode\"");
		/* A fresh grace for everyone, as upstream resets the timestamps. */
		for (size_t it = 0; hmap_next(&c->health, &it, &key, &v);)
			((struct health *)v)->probe = clock_now();
	}
	for (size_t it = 0; hmap_next(counts, &it, &key, &v);) {
		int *cnt = v;
		struct zone *z = zone_of(c, key);
		enum zone_state s = nlc_zone_state(cnt[0], cnt[1], c->o.unhealthy_zone_threshold);
		bool leaving = !all_full && c->all_disrupted;

		if (all_full) {
			z->state = s;
			continue;
		}
		if (s == z->state && !leaving)
			continue;
		if (!leaving)
			LOG_INFO("\"Controller detected that zone is now in new state\" zone=\"%s\" "
				 "newState=\"%s\"",
				 key, nlc_zone_state_name(s));
		z->state = s;
		swap_limiter(z, nlc_zone_qps(&c->o, s, cnt[0] + cnt[1], false));
	}
	c->all_disrupted = all_full;
}

static void on_monitor(void *arg)
{
	struct nodelifecycle *c = arg;
	json_t **all;
	size_t n;
	struct hmap counts = HMAP_INIT; /* zone -> int[2] {ready, not ready} */
	int64_t started;

	timer_after(c->monitor, c->o.node_monitor_period_ns);
	if (!informer_synced(c->nodes) || !informer_synced(c->leases) ||
	    !informer_synced(c->pods))
		return;
	n = informer_list(c->nodes, &all);
	started = clock_mono();
	for (size_t i = 0; i < n; i++) {
		int64_t t = clock_mono();
		const char *observed, *ready = monitor_node(c, all[i], &observed);
		char zk[512];
		int *cnt;

		nlc_zone_key(all[i], zk, sizeof(zk));
		/* processTaintBaseEviction sees the Ready status from before this
		 * pass's own update: a node marked Unknown now is queued next pass. */
		process_no_execute(c, all[i], zone_of(c, zk), observed);
		if (label(all[i], EXCLUDE_DISRUPTION))
			continue;
		if (!(cnt = hmap_get(&counts, zk))) {
			if (!(cnt = calloc(2, sizeof(int))))
				abort();
			hmap_put(&counts, zk, cnt);
		}
		cnt[ready && !strcmp(ready, "True") ? 0 : 1]++;
		metrics_observe(c->m_node_health, (double)(clock_mono() - t) / (double)NS_PER_SEC);
	}
	handle_disruption(c, all, n, &counts);
	metrics_observe(c->m_all_health, (double)(clock_mono() - started) / (double)NS_PER_SEC);
	hmap_free_values(&counts, free);
	free(all);
}

/* ---- the informers ---------------------------------------------------------------------- */

static void on_node_add(void *arg, json_t *node)
{
	struct nodelifecycle *c = arg;
	LOG_V(1, "\"Controller observed a new Node\" node=\"%s\"", node_name(node));
	node_event(c, node, "Normal", "RegisteredNode", "Node %s event: Registered Node %s in "
							"Controller",
		   node_name(node), node_name(node));
	/* Taints of an earlier life come off; the queue puts them back. */
	untaint_no_execute(c, node);
	sync_no_schedule(c, node);
}

static void on_node_update(void *arg, json_t *old, json_t *node)
{
	(void)old;
	sync_no_schedule(arg, node);
}

static void on_node_delete(void *arg, json_t *node)
{
	struct nodelifecycle *c = arg;
	struct health *h = hmap_del(&c->health, node_name(node));

	LOG_V(1, "\"Controller observed a Node deletion\" node=\"%s\"", node_name(node));
	node_event(c, node, "Normal", "RemovingNode", "Node %s event: Removing Node %s from "
						      "Controller",
		   node_name(node), node_name(node));
	if (h) {
		free(h->heartbeat);
		free(h->renew);
		free(h);
	}
}

/* A pod bound to a node this controller found not Ready is marked too. */
static void on_pod(void *arg, json_t *pod)
{
	struct nodelifecycle *c = arg;
	const char *node = jx_str(pod, "spec.nodeName");
	struct health *h = node ? hmap_get(&c->health, node) : NULL;

	if (h && h->observed[0] && strcmp(h->observed, "True"))
		mark_pod_not_ready(c, pod);
}

/* podUpdated: only a pod that has just been bound (nodeName changed). */
static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	if (strcmp(jx_str(old, "spec.nodeName") ?: "", jx_str(pod, "spec.nodeName") ?: ""))
		on_pod(arg, pod);
}

struct nodelifecycle *nodelifecycle_new(struct controller_manager *m, const struct nlc_opts *o)
{
	struct nodelifecycle *c = calloc(1, sizeof(*c));
	struct informer_handlers nh = {on_node_add, on_node_update, on_node_delete, c};
	struct informer_handlers lh = {NULL, NULL, NULL, c};
	struct informer_handlers ph = {on_pod, on_pod_update, NULL, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "node-controller");
	c->m = m;
	c->o = *o;
	c->health = (struct hmap)HMAP_INIT;
	c->zones = (struct hmap)HMAP_INIT;
	c->nodes = cm_informer(m, NODES_PATH, &nh);
	c->leases = cm_informer(m, LEASES_PATH, &lh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->by_node = cm_pods_by_node(m);
	c->events = event_recorder_new(m->loop, c->rest, "node-controller", NULL, 3);
	{
		double per_node[8], all_nodes[8];
		for (int i = 0; i < 8; i++) {
			per_node[i] = 0.001 * (double)(1 << (2 * i));
			all_nodes[i] = 0.01 * (double)(1 << (2 * i));
		}
		c->m_zone_health = metrics_gauge(
			m->metrics, "node_collector_zone_health",
			"[ALPHA] Gauge measuring percentage of healthy nodes per zone.", "zone");
		c->m_zone_size = metrics_gauge(
			m->metrics, "node_collector_zone_size",
			"[ALPHA] Gauge measuring number of registered Nodes per zones.", "zone");
		c->m_unhealthy = metrics_gauge(
			m->metrics, "node_collector_unhealthy_nodes_in_zone",
			"[ALPHA] Gauge measuring number of not Ready Nodes per zones.", "zone");
		c->m_evictions = metrics_counter(m->metrics, "node_collector_evictions_total",
						 "[STABLE] Number of Node evictions that happened "
						 "since current instance of NodeController started.",
						 "zone");
		c->m_node_health = metrics_with(metrics_histogram(
			m->metrics, "node_collector_update_node_health_duration_seconds",
			"[ALPHA] Duration in seconds for NodeController to update the health of a "
			"single node.",
			NULL, per_node, 8));
		c->m_all_health = metrics_with(metrics_histogram(
			m->metrics, "node_collector_update_all_nodes_health_duration_seconds",
			"[ALPHA] Duration in seconds for NodeController to update the health of all "
			"nodes.",
			NULL, all_nodes, 8));
	}
	c->monitor = loop_timer(m->loop, on_monitor, c);
	c->evict = loop_timer(m->loop, on_evict_tick, c);
	LOG_INFO("\"Sending events to api server\"");
	timer_after(c->monitor, c->o.node_monitor_period_ns);
	timer_after(c->evict, EVICTION_TICK_NS);
	return c;
}

void nodelifecycle_stop(struct nodelifecycle *c)
{
	if (!c)
		return;
	event_recorder_free(c->events);
	timer_free(c->monitor);
	timer_free(c->evict);
	while (c->health_writes)
		health_write_end(c->health_writes);
	c->events = NULL;
	c->nodes = c->leases = c->pods = NULL; /* the manager's */
	c->monitor = c->evict = NULL;
}

void nodelifecycle_free(struct nodelifecycle *c)
{
	const char *key;
	void *v;

	if (!c)
		return;
	nodelifecycle_stop(c);
	for (size_t it = 0; hmap_next(&c->health, &it, &key, &v);) {
		struct health *h = v;
		free(h->heartbeat);
		free(h->renew);
		free(h);
	}
	hmap_free(&c->health);
	for (size_t it = 0; hmap_next(&c->zones, &it, &key, &v);) {
		struct zone *z = v;
		strv_free(&z->queue);
		free(z);
	}
	hmap_free(&c->zones);
	strv_free(&c->pods_retry);
	job_list_free(&c->jobs);
	while (c->writes)
		taint_end(c->writes);
	free(c);
}
