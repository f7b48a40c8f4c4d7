/*
 * pod-garbage-collector-controller (upstream pkg/controller/podgc, 1.32;
 * reference/k8s-controllers-1.32.md §9): every 20 s,
 *
 *   terminated — Succeeded/Failed pods beyond --terminated-pod-gc-threshold
 *     (12500; ≤ 0 disables), the oldest first;
 *   out-of-service — Terminating pods on a node that is not Ready and
 *     carries a node.kubernetes.io/out-of-service taint;
 *   orphaned — pods bound to a node that no longer exists, once the node
 *     has been gone for the 40 s quarantine (checked again with a GET, the
 *     informer may lag);
 *   unscheduled — Terminating pods that were never bound.
 *
 * Each is force-deleted as upstream does: a pod not yet terminal first gets
 * phase Failed and (orphaned) the DisruptionTarget condition
 * (DeletionByPodGC), then DELETE with gracePeriodSeconds 0; "PodGC is force
 * deleting Pod" pod=ns/name. Metrics
 * pod_gc_collector_force_delete_pods_total and ..._pod_errors_total
 * {namespace, reason}.
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"

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

#define GC_PERIOD_NS (20 * NS_PER_SEC)
#define QUARANTINE_NS (40 * NS_PER_SEC)

struct podgc {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *pods, *nodes;
	struct timer *tick;
	int64_t threshold;
	struct hmap gone;     /* node name -> first seen missing (mono, boxed) */
	struct job_list jobs; /* deletes and checks in flight */
	struct metric_family *m_deleted, *m_errors;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

/* ---- force deletion ------------------------------------------------------------ */

struct gc_job {
	struct podgc *c;
	char reason[16];
	char ns[256], name[256];
	bool patched;
};

static void on_deleted(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct gc_job *g = j->ctl;
	char why[512];

	metrics_inc(metrics_with(g->c->m_deleted, g->ns, g->reason));
	if (status != 200 && status != 404) {
		metrics_inc(metrics_with(g->c->m_errors, g->ns, g->reason));
		LOG_UNHANDLED(NULL, "failed to delete pod %s/%s: %s", g->ns, g->name,
			      api_error(why, sizeof(why), status, body, err));
	}
	job_done(&g->c->jobs, j, false);
	free(g);
}

static void delete_now(struct job *j)
{
	struct gc_job *g = j->ctl;
	char path[768];
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0", g->ns,
		 g->name);
	rest_do(g->c->rest, "DELETE", path, NULL, on_deleted, j);
}

static void on_marked(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct gc_job *g = j->ctl;
	char why[512];
	if (status != 200 && status != 404) {
		metrics_inc(metrics_with(g->c->m_errors, g->ns, g->reason));
		LOG_UNHANDLED(NULL, "failed to mark pod %s/%s failed: %s", g->ns, g->name,
			      api_error(why, sizeof(why), status, body, err));
		job_done(&g->c->jobs, j, false);
		free(g);
		return;
	}
	delete_now(j);
}

/* markFailedAndDeletePodWithCondition */
static void force_delete(struct podgc *c, const json_t *pod, const char *reason,
			 const char *condition_msg)
{
	struct gc_job *g = calloc(1, sizeof(*g));
	const char *phase = s_(jx_str(pod, "status.phase"));
	char key[512], path[768], now[TIME_BUF];
	struct job *j;

	if (!g)
		abort();
	g->c = c;
	snprintf(g->reason, sizeof(g->reason), "%s", reason);
	snprintf(g->ns, sizeof(g->ns), "%s", s_(jx_str(pod, "metadata.namespace")));
	snprintf(g->name, sizeof(g->name), "%s", s_(jx_str(pod, "metadata.name")));
	LOG_INFO("\"PodGC is force deleting Pod\" pod=\"%s/%s\"", g->ns, g->name);
	j = job_new(&c->jobs, NULL, obj_key(pod, key, sizeof(key)), g);
	if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")) {
		delete_now(j);
		return;
	}
	{
		json_t *patch = json_pack("{s:{s:s}}", "status", "phase", "Failed");
		if (condition_msg)
			jx_set(patch, "status.conditions",
			       json_pack("[{s:s,s:s,s:s,s:s,s:s}]", "type", "DisruptionTarget",
					 "status", "True", "reason", "DeletionByPodGC", "message",
					 condition_msg, "lastTransitionTime",
					 time_format_rfc3339(clock_now(), now)));
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/status", g->ns, g->name);
		rest_do_ct(c->rest, "PATCH", path, SMP, patch,
			   on_marked, j);
		json_decref(patch);
	}
}

/* ---- the passes ------------------------------------------------------------------- */

static int by_creation(const void *a, const void *b)
{
	return strcmp(s_(jx_str(*(json_t *const *)a, "metadata.creationTimestamp")),
		      s_(jx_str(*(json_t *const *)b, "metadata.creationTimestamp")));
}

static bool terminal(const json_t *pod)
{
	const char *p = s_(jx_str(pod, "status.phase"));
	return !strcmp(p, "Succeeded") || !strcmp(p, "Failed");
}

static void gc_terminated(struct podgc *c, json_t **pods, size_t n)
{
	json_t **done;
	size_t nd = 0;

	if (c->threshold <= 0)
		return;
	if (!(done = calloc(n + 1, sizeof(*done))))
		abort();
	for (size_t i = 0; i < n; i++)
		if (terminal(pods[i]))
			done[nd++] = pods[i];
	if ((int64_t)nd > c->threshold) {
		size_t extra = nd - (size_t)c->threshold;
		qsort(done, nd, sizeof(*done), by_creation);
		LOG_INFO("\"Garbage collecting pods\" numPods=%zu", extra);
		for (size_t i = 0; i < extra; i++)
			force_delete(c, done[i], "terminated", NULL);
	}
	free(done);
}

static bool out_of_service(const json_t *node)
{
	const json_t *t, *ready = jx_condition(json_object_get(node, "status"), "Ready");
	size_t i;
	if (ready && !strcmp(s_(jx_str(ready, "status")), "True"))
		return false;
	json_array_foreach(jx_get(node, "spec.taints"), i, t) if (
		!strcmp(s_(jx_str(t, "key")), "node.kubernetes.io/out-of-service")) return true;
	return false;
}

struct check {
	struct podgc *c;
	char node[256];
};

/* The quarantine is over: does the API server still not know the node? */
static void on_node_checked(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct check *k = j->ctl;
	struct podgc *c = k->c;
	json_t **pods;
	size_t n;

	(void)body;
	(void)err;
	if (status == 404) {
		n = informer_indexed(c->pods, cm_pods_by_node(c->m), k->node, &pods);
		for (size_t i = 0; i < n; i++)
			force_delete(c, pods[i], "orphaned", "PodGC: node no longer exists");
		free(pods);
	}
	job_done(&c->jobs, j, false);
	free(k);
}

static void gc_orphaned(struct podgc *c, json_t **pods, size_t n)
{
	int64_t now = clock_mono();
	struct strv checked = {0};

	for (size_t i = 0; i < n; i++) {
		const char *node = jx_str(pods[i], "spec.nodeName");
		int64_t *since;
		if (!node || !*node || informer_get(c->nodes, node) || strv_has(&checked, node))
			continue;
		strv_push(&checked, node);
		if (!(since = hmap_get(&c->gone, node))) {
			if (!(since = malloc(sizeof(*since))))
				abort();
			*since = now;
			hmap_put(&c->gone, node, since);
			LOG_V(4, "\"Node missing, enqueued for quarantine\" node=\"%s\"", node);
		}
		if (now - *since >= QUARANTINE_NS) {
			struct check *k = calloc(1, sizeof(*k));
			char path[512];
			struct job *j;
			if (!k)
				abort();
			k->c = c;
			snprintf(k->node, sizeof(k->node), "%s", node);
			j = job_new(&c->jobs, NULL, node, k);
			snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
			rest_do(c->rest, "GET", path, NULL, on_node_checked, j);
			free(hmap_del(&c->gone, node));
		}
	}
	/* Nodes that came back leave the quarantine. */
	{
		const char *k;
		void *v;
		struct strv back = {0};
		for (size_t it = 0; hmap_next(&c->gone, &it, &k, &v);)
			if (informer_get(c->nodes, k) || !strv_has(&checked, k))
				strv_push(&back, k);
		for (size_t i = 0; i < back.n; i++)
			free(hmap_del(&c->gone, back.v[i]));
		strv_free(&back);
	}
	strv_free(&checked);
}

static void on_tick(void *arg)
{
	struct podgc *c = arg;
	json_t **pods;
	size_t n;

	timer_after(c->tick, GC_PERIOD_NS);
	if (!informer_synced(c->pods) || !informer_synced(c->nodes))
		return;
	n = informer_list(c->pods, &pods);
	gc_terminated(c, pods, n);
	for (size_t i = 0; i < n; i++) {
		const char *node = jx_str(pods[i], "spec.nodeName");
		json_t *nd;
		if (!jx_get(pods[i], "metadata.deletionTimestamp"))
			continue;
		if (!node || !*node)
			force_delete(c, pods[i], "unscheduled", NULL);
		else if ((nd = informer_get(c->nodes, node)) && out_of_service(nd))
			force_delete(c, pods[i], "out-of-service", NULL);
	}
	gc_orphaned(c, pods, n);
	free(pods);
}

struct podgc *podgc_new(struct controller_manager *m, int64_t threshold)
{
	struct podgc *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->rest = cm_client(m, "pod-garbage-collector");
	c->m = m;
	c->threshold = threshold;
	c->pods = cm_informer(m, "/api/v1/pods", NULL);
	c->nodes = cm_informer(m, NODES_PATH, NULL);
	cm_pods_by_node(m);
	c->tick = loop_timer(m->loop, on_tick, c);
	c->m_deleted = metrics_counter(m->metrics, "pod_gc_collector_force_delete_pods_total",
				       "[ALPHA] Number of pods that are being forcefully deleted "
				       "since the Pod GC Controller started.",
				       "namespace,reason");
	c->m_errors = metrics_counter(m->metrics, "pod_gc_collector_force_delete_pod_errors_total",
				      "[ALPHA] Number of errors encountered when forcefully deleting "
				      "the pods since the Pod GC Controller started.",
				      "namespace,reason");
	timer_after(c->tick, GC_PERIOD_NS);
	return c;
}

void podgc_stop(struct podgc *c)
{
	if (!c)
		return;
	timer_free(c->tick);
	c->tick = NULL;
}

void podgc_free(struct podgc *c)
{
	struct job *j;

	if (!c)
		return;
	podgc_stop(c);
	/* Jobs still waiting: their callbacks never run (the client is gone). */
	for (j = c->jobs.head; j; j = j->next)
		free(j->ctl);
	job_list_free(&c->jobs);
	hmap_free_values(&c->gone, free);
	free(c);
}
