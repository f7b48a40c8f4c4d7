/*
 * The scheduler: informers feeding the cache and the queue, one scheduling
 * cycle per pod (schedule_one.go: filter, PostFilter, score, select, assume,
 * bind), the failure handler (event, PodScheduled condition, back to the
 * queue), KubeSchedulerConfiguration profiles.
 */
#include "scheduler/internal.h"

#include "client/events.h"
#include "client/informer.h"
#include "client/rest.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/rand.h"
#include "base/strv.h"
#include "base/timeutil.h"
#include "base/yamljson.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USER_AGENT "kube-scheduler/v1.32.0 (linux/amd64) cube/scheduler"
#define DEFAULT_SCHEDULER "default-scheduler"
#define NOTE_LIMIT 1024
#define BATCH 64 /* pods per loop turn: I/O gets its turn in between */
#define MIN_FEASIBLE_NODES 100
#define MIN_FEASIBLE_PERCENTAGE 5

/* Every plugin, by the index that rejector bit masks use. */
static const struct plugin *const all_plugins[] = {
	&plugin_node_unschedulable, &plugin_node_name,     &plugin_taint_toleration,
	&plugin_node_affinity,      &plugin_node_ports,    &plugin_node_resources_fit,
	&plugin_balanced_allocation,
};
#define NPLUGINS (sizeof(all_plugins) / sizeof(all_plugins[0]))

/* A binding in flight: the pod stays in flight in the queue until it ends. */
struct bind {
	struct bind *prev, *next;
	struct sched *s;
	struct qpod *qp;
	const struct profile *prof;
	char *node;
	json_t *pod;
	int64_t started;
	int evaluated, feasible;
	struct rest_call *call;
};

struct write {
	struct write *prev, *next;
	struct sched *s;
	struct rest_call *call;
	char *what;
};

struct sched {
	struct loop *loop;
	struct rest_client *rest;
	struct informer *pods, *nodes;
	struct cache cache;
	struct queue queue;
	struct profile *profiles;
	int nprofiles;
	int percentage;
	size_t next_start;
	unsigned plugin_events[NPLUGINS];
	struct event_recorder *events;
	struct timer *kick, *flush, *leftovers;
	bool kicked;
	struct bind *binds;
	struct write *writes;
	struct metrics *metrics;
	struct metric_family *m_attempts, *m_duration;
	struct secure_server *serving;
};

struct scheduler {
	struct sched s;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

static int plugin_index(const struct plugin *p)
{
	for (size_t i = 0; i < NPLUGINS; i++)
		if (all_plugins[i] == p)
			return (int)i;
	return -1;
}

static const struct plugin *plugin_named(const char *name)
{
	for (size_t i = 0; i < NPLUGINS; i++)
		if (!strcmp(all_plugins[i]->name, name))
			return all_plugins[i];
	return NULL;
}

void status_add(struct status *s, enum code code, const char *fmt, ...)
{
	va_list ap;
	if (s->code < code)
		s->code = code;
	if (s->n == REASONS_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(s->reasons[s->n++], sizeof(s->reasons[0]), fmt, ap);
	va_end(ap);
}

int feasible_nodes_to_find(int percentage, int nodes)
{
	int p = percentage, num;
	if (nodes < MIN_FEASIBLE_NODES)
		return nodes;
	if (p == 0) {
		p = 50 - nodes / 125;
		if (p < MIN_FEASIBLE_PERCENTAGE)
			p = MIN_FEASIBLE_PERCENTAGE;
	}
	num = (int)((int64_t)nodes * p / 100);
	return num < MIN_FEASIBLE_NODES ? MIN_FEASIBLE_NODES : num;
}

/* ---- profiles and the configuration file ------------------------------------------- */

static void profile_defaults(struct profile *p, const char *name)
{
	static const struct plugin *const filters[] = {
		&plugin_node_unschedulable, &plugin_node_name,  &plugin_taint_toleration,
		&plugin_node_affinity,      &plugin_node_ports, &plugin_node_resources_fit};
	static const struct plugin *const scorers[] = {&plugin_taint_toleration,
						       &plugin_node_affinity,
						       &plugin_node_resources_fit,
						       &plugin_balanced_allocation};

	memset(p, 0, sizeof(*p));
	p->name = str_dup(name);
	p->percentage = -1;
	p->preemption = true;
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		p->filters[p->nfilters++] = filters[i];
	for (size_t i = 0; i < sizeof(scorers) / sizeof(scorers[0]); i++) {
		p->weights[p->nscorers] = scorers[i]->default_weight;
		p->scorers[p->nscorers++] = scorers[i];
	}
}

static void drop(const struct plugin **v, int *w, int *n, const char *name)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(name, "*") || !strcmp(v[i]->name, name)) {
			memmove(&v[i], &v[i + 1], (size_t)(*n - i - 1) * sizeof(*v));
			if (w)
				memmove(&w[i], &w[i + 1], (size_t)(*n - i - 1) * sizeof(*w));
			(*n)--;
			i--;
		}
}

static void add(const struct plugin **v, int *w, int *n, const struct plugin *p, int weight)
{
	/* A configured entry replaces the default one; weight 0 means 1. */
	for (int i = 0; i < *n; i++)
		if (v[i] == p) {
			if (w)
				w[i] = weight > 0 ? weight : 1;
			return;
		}
	if (*n == 16)
		return;
	v[*n] = p;
	if (w)
		w[*n] = weight > 0 ? weight : 1;
	(*n)++;
}

/* One extension point's {enabled, disabled} lists applied to a profile. */
static int apply_set(struct profile *p, const json_t *set, bool filter, bool score,
		     bool post_filter)
{
	const json_t *e;
	size_t i;

	json_array_foreach(json_object_get(set, "disabled"), i, e)
	{
		const char *name = s_(jx_str(e, "name"));
		if (filter)
			drop(p->filters, NULL, &p->nfilters, name);
		if (score)
			drop(p->scorers, p->weights, &p->nscorers, name);
		if (post_filter && (!strcmp(name, "*") || !strcmp(name, "DefaultPreemption")))
			p->preemption = false;
	}
	json_array_foreach(json_object_get(set, "enabled"), i, e)
	{
		const char *name = s_(jx_str(e, "name"));
		const struct plugin *pl = plugin_named(name);
		if (!strcmp(name, "DefaultPreemption") || !strcmp(name, "PrioritySort") ||
		    !strcmp(name, "DefaultBinder")) {
			if (!strcmp(name, "DefaultPreemption") && post_filter)
				p->preemption = true;
			continue;
		}
		if (!pl)
			return err_set(ERR_INVALID, "plugin \"%s\" does not exist", name);
		if (filter && pl->filter)
			add(p->filters, NULL, &p->nfilters, pl, 0);
		if (score && pl->score)
			add(p->scorers, p->weights, &p->nscorers, pl, (int)jx_int(e, "weight", 0));
	}
	return 0;
}

static int profile_from(struct profile *p, const json_t *obj)
{
	const json_t *plugins = json_object_get(obj, "plugins");
	const json_t *pct = json_object_get(obj, "percentageOfNodesToScore");

	profile_defaults(p, jx_str(obj, "schedulerName") ?: DEFAULT_SCHEDULER);
	if (json_is_integer(pct))
		p->percentage = (int)json_integer_value(pct);
	if (apply_set(p, json_object_get(plugins, "multiPoint"), true, true, true) < 0 ||
	    apply_set(p, json_object_get(plugins, "filter"), true, false, false) < 0 ||
	    apply_set(p, json_object_get(plugins, "score"), false, true, false) < 0 ||
	    apply_set(p, json_object_get(plugins, "postFilter"), false, false, true) < 0)
		return ERR_INVALID;
	return 0;
}

/* KubeSchedulerConfiguration: the fields cube implements, validated as
 * upstream validates them. */
static int load_config(struct sched *s, const char *path, struct scheduler_opts *o)
{
	json_t *cfg;
	const json_t *v, *profiles, *p;
	size_t i;
	int rc = 0;

	if (yj_load(path, &cfg) < 0)
		return err_wrap(ERR_INVALID, "failed to read the scheduler configuration %s", path);
	if (strcmp(s_(jx_str(cfg, "kind")), "KubeSchedulerConfiguration") ||
	    strcmp(s_(jx_str(cfg, "apiVersion")), "kubescheduler.config.k8s.io/v1")) {
		json_decref(cfg);
		return err_set(ERR_INVALID,
			       "%s: not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration",
			       path);
	}
	if (json_is_integer(v = json_object_get(cfg, "podInitialBackoffSeconds")))
		o->pod_initial_backoff_ns = json_integer_value(v) * NS_PER_SEC;
	if (json_is_integer(v = json_object_get(cfg, "podMaxBackoffSeconds")))
		o->pod_max_backoff_ns = json_integer_value(v) * NS_PER_SEC;
	if (json_is_integer(v = json_object_get(cfg, "percentageOfNodesToScore")))
		o->percentage_of_nodes_to_score = (int)json_integer_value(v);
	if (!o->kubeconfig && jx_str(cfg, "clientConnection.kubeconfig"))
		o->kubeconfig = NULL; /* the caller's flag wins; see scheduler_new */
	if (o->pod_initial_backoff_ns <= 0)
		rc = err_set(ERR_INVALID, "podInitialBackoffSeconds: Invalid value: %lld: must be "
					  "greater than 0",
			     (long long)(o->pod_initial_backoff_ns / NS_PER_SEC));
	else if (o->pod_max_backoff_ns < o->pod_initial_backoff_ns)
		rc = err_set(ERR_INVALID, "podMaxBackoffSeconds: Invalid value: %lld: must be "
					  "greater than or equal to PodInitialBackoffSeconds",
			     (long long)(o->pod_max_backoff_ns / NS_PER_SEC));
	else if (o->percentage_of_nodes_to_score < 0 || o->percentage_of_nodes_to_score > 100)
		rc = err_set(ERR_INVALID, "percentageOfNodesToScore: Invalid value: %d: not in "
					  "valid range [0-100]",
			     o->percentage_of_nodes_to_score);
	profiles = json_object_get(cfg, "profiles");
	if (!rc && json_array_size(profiles)) {
		s->profiles = calloc(json_array_size(profiles), sizeof(*s->profiles));
		if (!s->profiles)
			abort();
		json_array_foreach(profiles, i, p)
		{
			for (int k = 0; k < s->nprofiles; k++)
				if (!strcmp(s->profiles[k].name, jx_str(p, "schedulerName") ?: DEFAULT_SCHEDULER))
					rc = err_set(ERR_INVALID, "profiles[%zu].schedulerName: "
								  "Duplicate value: \"%s\"",
						     i, s->profiles[k].name);
			if (rc || (rc = profile_from(&s->profiles[s->nprofiles++], p)) < 0)
				break;
		}
	}
	json_decref(cfg);
	return rc;
}

static const struct profile *profile_for(const struct sched *s, const json_t *pod)
{
	const char *name = jx_str(pod, "spec.schedulerName");
	if (!name || !*name)
		name = DEFAULT_SCHEDULER;
	for (int i = 0; i < s->nprofiles; i++)
		if (!strcmp(s->profiles[i].name, name))
			return &s->profiles[i];
	return NULL;
}

/* ---- writes ------------------------------------------------------------------------- */

static void write_end(struct write *w)
{
	struct sched *s = w->s;
	if (w->prev)
		w->prev->next = w->next;
	else
		s->writes = w->next;
	if (w->next)
		w->next->prev = w->prev;
	free(w->what);
	free(w);
}

static void on_written(void *arg, int status, json_t *body, const char *err)
{
	struct write *w = arg;
	w->call = NULL;
	if (status < 200 || status >= 300) {
		char q[1024];
		log_quote(q, sizeof(q), status ? s_(jx_str(body, "message")) : s_(err));
		LOG_ERROR("\"Error updating pod\" err=\"%s\" pod=\"%s\"", q, w->what);
	}
	write_end(w);
}

static void api_write(struct sched *s, const char *what, const char *method, const char *path,
		 const char *ct, json_t *body)
{
	struct write *w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->s = s;
	w->what = str_dup(what);
	w->next = s->writes;
	if (s->writes)
		s->writes->prev = w;
	s->writes = w;
	w->call = rest_do_ct(s->rest, method, path, ct, body, on_written, w);
}

static void pod_key(const json_t *pod, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", s_(jx_str(pod, "metadata.namespace")),
		 s_(jx_str(pod, "metadata.name")));
}

static void pod_event(struct sched *s, const json_t *pod, const char *type, const char *reason,
		      const char *msg)
{
	struct event_ref ref = event_ref_of(pod, "v1", "Pod");
	event_record(s->events, &ref, type, reason, "%s", msg);
}

/* ---- preemption's side effects ------------------------------------------------------- */

void sched_preempt(struct sched *s, const json_t *preemptor, const char *node, json_t **victims,
		   size_t n)
{
	char key[512], path[768], msg[512], now[TIME_BUF];
	const struct profile *prof = profile_for(s, preemptor);

	time_format_rfc3339(clock_now(), now);
	for (size_t i = 0; i < n; i++) {
		const json_t *v = victims[i];
		json_t *patch;
		pod_key(v, key, sizeof(key));
		LOG_V(2, "\"Preemptor Pod preempted victim Pod\" preemptor=\"%s/%s\" victim=\"%s\" "
			 "node=\"%s\"",
		      s_(jx_str(preemptor, "metadata.namespace")),
		      s_(jx_str(preemptor, "metadata.name")), key, node);
		snprintf(msg, sizeof(msg), "%s: preempting to accommodate a higher priority pod",
			 prof ? prof->name : DEFAULT_SCHEDULER);
		patch = json_pack("{s:{s:[{s:s,s:s,s:s,s:s,s:s}]}}", "status", "conditions", "type",
				  "DisruptionTarget", "status", "True", "reason",
				  "PreemptionByScheduler", "message", msg, "lastTransitionTime",
				  now);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/status",
			 s_(jx_str(v, "metadata.namespace")), s_(jx_str(v, "metadata.name")));
		api_write(s, key, "PATCH", path, "application/strategic-merge-patch+json", patch);
		json_decref(patch);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
			 s_(jx_str(v, "metadata.namespace")), s_(jx_str(v, "metadata.name")));
		api_write(s, key, "DELETE", path, NULL, NULL);
		snprintf(msg, sizeof(msg), "Preempted by pod %s on node %s",
			 s_(jx_str(preemptor, "metadata.uid")), node);
		pod_event(s, v, "Normal", "Preempted", msg);
	}
}

/* ---- one cycle --------------------------------------------------------------------- */

static void cycle_init(struct sched *s, struct cycle *cy, const json_t *pod, json_t *ports)
{
	const json_t *c, *p;
	size_t i, j;

	memset(cy, 0, sizeof(*cy));
	cy->pod = pod;
	cy->cache = &s->cache;
	cy->tolerations = jx_get(pod, "spec.tolerations");
	cy->spec = json_object_get(pod, "spec");
	cy->node_name = jx_str(pod, "spec.nodeName");
	cy->node_selector =
		json_object_size(json_object_get(cy->spec, "nodeSelector")) ||
		jx_get(cy->spec,
		       "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
	cy->prefer_tolerations = taint_toleration_prefer(cy->tolerations);
	pod_requests(pod, &cy->req);
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
		json_array_foreach(json_object_get(c, "ports"), j, p) if (jx_int(p, "hostPort", 0) > 0)
			json_array_append(ports, (json_t *)p);
	cy->host_ports = ports;
}

/* RunFilterPlugins: the first plugin that rejects decides. */
static bool run_filters(const struct profile *prof, const struct cycle *cy,
			const struct node_info *ni, struct status *st)
{
	memset(st, 0, sizeof(*st));
	st->plugin = -1;
	for (int i = 0; i < prof->nfilters; i++) {
		prof->filters[i]->filter(cy, ni, st);
		if (st->code != CODE_SUCCESS) {
			st->plugin = plugin_index(prof->filters[i]);
			return false;
		}
	}
	return true;
}

bool sched_fits(struct sched *s, const struct cycle *cy, const struct node_info *ni,
		struct status *st)
{
	const struct profile *prof = profile_for(s, cy->pod);
	return prof && run_filters(prof, cy, ni, st);
}

void fit_error_text(char *buf, size_t len, size_t all, const struct status *sts, size_t n,
		      const char *post)
{
	struct strv reasons = {0}, lines = {0};
	int *counts = NULL;
	char *joined;

	for (size_t i = 0; i < n; i++)
		for (int r = 0; r < sts[i].n; r++) {
			size_t at;
			for (at = 0; at < reasons.n && strcmp(reasons.v[at], sts[i].reasons[r]); at++)
				;
			if (at == reasons.n) {
				strv_push(&reasons, sts[i].reasons[r]);
				if (!(counts = realloc(counts, reasons.n * sizeof(*counts))))
					abort();
				counts[at] = 0;
			}
			counts[at]++;
		}
	for (size_t i = 0; i < reasons.n; i++)
		strv_pushf(&lines, "%d %s", counts[i], reasons.v[i]);
	strv_sort(&lines);
	joined = strv_join(&lines, ", ");
	snprintf(buf, len, "0/%zu nodes are available:%s%s%s%s%s", all, lines.n ? " " : "", joined,
		 lines.n ? "." : "", post && *post ? " " : "", post ? post : "");
	free(joined);
	free(counts);
	strv_free(&lines);
	strv_free(&reasons);
}

static void observe(struct sched *s, const struct profile *prof, const char *result,
		    int64_t started)
{
	const char *name = prof ? prof->name : DEFAULT_SCHEDULER;
	metrics_inc(metrics_with(s->m_attempts, result, name));
	metrics_observe(metrics_with(s->m_duration, result, name),
			(double)(clock_mono() - started) / (double)NS_PER_SEC);
}

/* updatePod: PodScheduled=False and the nomination, only when they change. */
static void update_status(struct sched *s, const json_t *pod, const char *reason, const char *msg,
			  const char *nominated, bool clear_nominated)
{
	const json_t *cond = jx_condition(json_object_get(pod, "status"), "PodScheduled");
	const char *had_nom = s_(jx_str(pod, "status.nominatedNodeName"));
	char path[768], key[512], now[TIME_BUF];
	json_t *patch;

	if (cond && !strcmp(s_(jx_str(cond, "status")), "False") &&
	    !strcmp(s_(jx_str(cond, "reason")), reason) &&
	    !strcmp(s_(jx_str(cond, "message")), msg) &&
	    (!nominated || !*nominated || !strcmp(had_nom, nominated)) &&
	    !(clear_nominated && *had_nom))
		return;
	time_format_rfc3339(clock_now(), now);
	patch = json_pack("{s:{s:[{s:s,s:s,s:s,s:s,s:n,s:s}]}}", "status", "conditions", "type",
			  "PodScheduled", "status", "False", "reason", reason, "message", msg,
			  "lastProbeTime", "lastTransitionTime",
			  cond && !strcmp(s_(jx_str(cond, "status")), "False")
				  ? s_(jx_str(cond, "lastTransitionTime"))
				  : now);
	if (nominated && *nominated)
		jx_set_str(patch, "status.nominatedNodeName", nominated);
	else if (clear_nominated && *had_nom)
		jx_set(patch, "status.nominatedNodeName", json_null());
	pod_key(pod, key, sizeof(key));
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/status",
		 s_(jx_str(pod, "metadata.namespace")), s_(jx_str(pod, "metadata.name")));
	api_write(s, key, "PATCH", path, "application/strategic-merge-patch+json", patch);
	json_decref(patch);
}

/* handleSchedulingFailure */
static void failed(struct sched *s, struct qpod *qp, const struct profile *prof, bool error,
		   const char *msg, unsigned rejectors, const char *nominated, bool clear_nominated,
		   int64_t started)
{
	char note[NOTE_LIMIT + 1], q[4096];
	json_t *now = informer_get(s->pods, qp->key);
	json_t *pod = json_incref(now ? now : qp->pod);

	log_quote(q, sizeof(q), msg);
	if (error)
		LOG_ERROR("\"Error scheduling pod; retrying\" err=\"%s\" pod=\"%s\"", q, qp->key);
	else if (!strncmp(msg, "no nodes available", 18))
		LOG_V(2, "\"Unable to schedule pod; no nodes are registered to the cluster; "
			 "waiting\" pod=\"%s\"",
		      qp->key);
	else
		LOG_V(2, "\"Unable to schedule pod; no fit; waiting\" pod=\"%s\" err=\"%s\"", qp->key,
		      q);
	observe(s, prof, error ? "error" : "unschedulable", started);
	if (now && jx_str(now, "spec.nodeName") && *jx_str(now, "spec.nodeName")) {
		LOG_INFO("\"Pod has been assigned to node. Abort adding it back to queue.\" "
			 "pod=\"%s\" node=\"%s\"",
			 qp->key, jx_str(now, "spec.nodeName"));
		queue_done(&s->queue, qp);
	} else {
		queue_failed(&s->queue, qp, rejectors);
	}
	if (strlen(msg) > NOTE_LIMIT)
		snprintf(note, sizeof(note), "%.*s ...", NOTE_LIMIT - 4, msg);
	else
		snprintf(note, sizeof(note), "%s", msg);
	pod_event(s, pod, "Warning", "FailedScheduling", note);
	update_status(s, pod, error ? "SchedulerError" : "Unschedulable", msg, nominated,
		      clear_nominated);
	json_decref(pod);
}

static void bind_end(struct bind *b)
{
	struct sched *s = b->s;
	if (b->prev)
		b->prev->next = b->next;
	else
		s->binds = b->next;
	if (b->next)
		b->next->prev = b->prev;
	json_decref(b->pod);
	free(b->node);
	free(b);
}

static void on_bound(void *arg, int status, json_t *body, const char *err)
{
	struct bind *b = arg;
	struct sched *s = b->s;
	char msg[1024];

	b->call = NULL;
	if (status == 201 || status == 200) {
		snprintf(msg, sizeof(msg), "Successfully assigned %s to %s", b->qp->key, b->node);
		LOG_V(2, "\"Successfully bound pod to node\" pod=\"%s\" node=\"%s\" "
			 "evaluatedNodes=%d feasibleNodes=%d",
		      b->qp->key, b->node, b->evaluated, b->feasible);
		observe(s, b->prof, "scheduled", b->started);
		pod_event(s, b->pod, "Normal", "Scheduled", msg);
		queue_done(&s->queue, b->qp);
	} else {
		snprintf(msg, sizeof(msg), "%s",
			 status ? s_(jx_str(body, "message")) : s_(err));
		if (!*msg)
			snprintf(msg, sizeof(msg), "binding failed with HTTP %d", status);
		LOG_V(1, "\"Failed to bind pod\" pod=\"%s\"", b->qp->key);
		scache_forget(&s->cache, b->qp->key);
		queue_move(&s->queue, EV_POD_DELETE, b->pod, NULL, NULL, "AssignedPodDelete");
		failed(s, b->qp, b->prof, true, msg, 0, NULL, true, b->started);
	}
	bind_end(b);
	timer_after(s->kick, 0);
}

static void bind_pod(struct sched *s, struct qpod *qp, const struct profile *prof, const char *node,
		 int evaluated, int feasible, int64_t started)
{
	struct bind *b = calloc(1, sizeof(*b));
	json_t *assumed = json_deep_copy(qp->pod), *binding;
	char path[768];

	if (!b)
		abort();
	jx_set_str(assumed, "spec.nodeName", node);
	scache_assume(&s->cache, assumed, node);
	b->s = s;
	b->qp = qp;
	b->prof = prof;
	b->node = str_dup(node);
	b->pod = assumed;
	b->started = started;
	b->evaluated = evaluated;
	b->feasible = feasible;
	b->next = s->binds;
	if (s->binds)
		s->binds->prev = b;
	s->binds = b;
	LOG_V(3, "\"Attempting to bind pod to node\" pod=\"%s\" node=\"%s\"", qp->key, node);
	binding = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s}}", "apiVersion", "v1", "kind",
			    "Binding", "metadata", "name", s_(jx_str(qp->pod, "metadata.name")),
			    "namespace", s_(jx_str(qp->pod, "metadata.namespace")), "uid",
			    s_(jx_str(qp->pod, "metadata.uid")), "target", "kind", "Node", "name",
			    node);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/binding",
		 s_(jx_str(qp->pod, "metadata.namespace")), s_(jx_str(qp->pod, "metadata.name")));
	b->call = rest_do(s->rest, "POST", path, binding, on_bound, b);
	json_decref(binding);
}

/* prioritizeNodes + selectHost over the feasible nodes. */
static const struct node_info *select_host(const struct profile *prof, const struct cycle *cy,
					   const struct node_info **feasible, size_t n)
{
	int64_t *total = calloc(n, sizeof(*total)), *sc = calloc(n, sizeof(*sc)), best = -1;
	const struct node_info *pick = NULL;
	uint64_t ties = 0;

	if (!total || !sc)
		abort();
	for (int p = 0; p < prof->nscorers; p++) {
		const struct plugin *pl = prof->scorers[p];
		if (pl->pre_score && !pl->pre_score(cy))
			continue;
		for (size_t i = 0; i < n; i++)
			sc[i] = pl->score(cy, feasible[i]);
		if (pl->normalize)
			pl->normalize(sc, n);
		for (size_t i = 0; i < n; i++)
			total[i] += sc[i] * prof->weights[p];
	}
	/* The highest total; ties broken by reservoir sampling. */
	for (size_t i = 0; i < n; i++) {
		if (total[i] > best) {
			best = total[i];
			pick = feasible[i];
			ties = 1;
		} else if (total[i] == best && rand_below(++ties) == 0) {
			pick = feasible[i];
		}
	}
	free(total);
	free(sc);
	return pick;
}

static void schedule_one(struct sched *s, struct qpod *qp)
{
	const struct profile *prof = profile_for(s, qp->pod);
	struct cache *c = &s->cache;
	const char *nom = jx_str(qp->pod, "status.nominatedNodeName");
	size_t n = c->n, want, found = 0, processed = 0;
	const struct node_info **feasible;
	struct status *sts;
	json_t *ports = json_array();
	struct cycle cy;
	int64_t started = clock_mono();
	unsigned rejectors = 0;
	bool nominated_fits = false;

	if (scache_is_assumed(c, qp->key)) {
		queue_done(&s->queue, qp); /* bound already: skipPodSchedule */
		json_decref(ports);
		return;
	}
	if (jx_get(qp->pod, "metadata.deletionTimestamp")) {
		char msg[600];
		snprintf(msg, sizeof(msg), "skip schedule deleting pod: %s", qp->key);
		pod_event(s, qp->pod, "Warning", "FailedScheduling", msg);
		queue_done(&s->queue, qp);
		json_decref(ports);
		return;
	}
	LOG_V(3, "\"Attempting to schedule pod\" pod=\"%s\"", qp->key);
	if (!n) {
		failed(s, qp, prof, false, "no nodes available to schedule pods", 0, NULL, false,
		       started);
		json_decref(ports);
		return;
	}
	cycle_init(s, &cy, qp->pod, ports);
	feasible = calloc(n, sizeof(*feasible));
	sts = calloc(n, sizeof(*sts));
	if (!feasible || !sts)
		abort();
	want = (size_t)(prof->nscorers ? feasible_nodes_to_find(prof->percentage >= 0
									? prof->percentage
									: s->percentage,
								(int)n)
				      : 1);
	/* evaluateNominatedNode: a nominated node that fits is taken as is. */
	if (nom && *nom) {
		const struct node_info *ni = scache_node(c, nom);
		struct status st;
		if (ni && ni->node && run_filters(prof, &cy, ni, &st)) {
			feasible[found++] = ni;
			nominated_fits = true;
		}
	}
	for (size_t j = 0; !nominated_fits && j < n && found < want; j++) {
		size_t i = (s->next_start + j) % n;
		processed++;
		if (run_filters(prof, &cy, c->list[i], &sts[i]))
			feasible[found++] = c->list[i];
		else if (sts[i].plugin >= 0)
			rejectors |= 1u << sts[i].plugin;
	}
	if (processed)
		s->next_start = (s->next_start + processed) % n;
	if (!found) {
		char post[2048] = "", nominated[256] = "", msg[4096];
		if (prof->preemption)
			preemption_post_filter(s, &cy, sts, n, post, sizeof(post), nominated,
					       sizeof(nominated));
		fit_error_text(msg, sizeof(msg), n, sts, n, post);
		/* No candidate: a nomination from an earlier attempt is cleared. */
		failed(s, qp, prof, false, msg, rejectors, nominated, prof->preemption && !*nominated,
		       started);
	} else {
		const struct node_info *host =
			found == 1 ? feasible[0] : select_host(prof, &cy, feasible, found);
		bind_pod(s, qp, prof, host->name, (int)(processed ? processed : 1), (int)found,
		     started);
	}
	free(feasible);
	free(sts);
	json_decref(ports);
	json_decref((json_t *)cy.prefer_tolerations);
}

static void on_kick(void *arg)
{
	struct sched *s = arg;
	struct qpod *qp;

	/* WaitForCacheSync: no decision before both informers have listed (a
	 * pod tried against half the nodes would back off for nothing). */
	if (!informer_synced(s->pods) || !informer_synced(s->nodes)) {
		timer_after(s->kick, 100 * NS_PER_MS);
		return;
	}
	for (int i = 0; i < BATCH && (qp = queue_pop(&s->queue)); i++) {
		if (!profile_for(s, qp->pod)) {
			queue_done(&s->queue, qp);
			continue;
		}
		schedule_one(s, qp);
	}
	if (queue_active_len(&s->queue))
		timer_after(s->kick, 0);
}

static void kick(struct sched *s)
{
	if (queue_active_len(&s->queue))
		timer_after(s->kick, 0);
}

static void on_flush(void *arg)
{
	struct sched *s = arg;
	queue_flush(&s->queue, false);
	kick(s);
	timer_after(s->flush, NS_PER_SEC);
}

static void on_leftovers(void *arg)
{
	struct sched *s = arg;
	queue_flush(&s->queue, true);
	kick(s);
	timer_after(s->leftovers, 30 * NS_PER_SEC);
}

/* ---- informers ------------------------------------------------------------------------- */

/* isPodWorthRequeuing: any rejecting plugin registered for ev whose hint
 * says the change may help. */
static bool worth(void *arg, struct qpod *p, unsigned ev, const json_t *obj)
{
	(void)arg;
	for (size_t i = 0; i < NPLUGINS; i++) {
		const struct plugin *pl = all_plugins[i];
		if (!(p->rejectors & (1u << i)) || !(pl->events & ev))
			continue;
		if (!pl->hint || pl->hint(p->pod, ev, obj))
			return true;
	}
	return false;
}

/* SchedulingGates (PreEnqueue): a gated pod waits outside the queue until
 * its gates are removed. */
static bool gated(const json_t *pod)
{
	return json_array_size(jx_get(pod, "spec.schedulingGates")) > 0;
}

static bool assigned(const json_t *pod)
{
	const char *n = jx_str(pod, "spec.nodeName");
	return n && *n;
}

static void on_pod_add(void *arg, json_t *pod)
{
	struct sched *s = arg;
	char key[512];

	pod_key(pod, key, sizeof(key));
	if (assigned(pod)) {
		scache_pod_set(&s->cache, pod);
		queue_delete(&s->queue, key);
		return;
	}
	if (profile_for(s, pod) && !jx_get(pod, "metadata.deletionTimestamp") && !gated(pod)) {
		queue_add(&s->queue, key, pod);
		kick(s);
	}
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	struct sched *s = arg;
	char key[512];
	unsigned ev = 0;

	pod_key(pod, key, sizeof(key));
	if (assigned(pod)) {
		scache_pod_set(&s->cache, pod);
		queue_delete(&s->queue, key);
		if (!assigned(old))
			return;
		/* A terminal pod frees its node, as a deleted one does. */
		if (strcmp(s_(jx_str(old, "status.phase")), s_(jx_str(pod, "status.phase"))) &&
		    (!strcmp(s_(jx_str(pod, "status.phase")), "Succeeded") ||
		     !strcmp(s_(jx_str(pod, "status.phase")), "Failed")))
			queue_move(&s->queue, EV_POD_DELETE, pod, worth, s, "AssignedPodDelete");
		kick(s);
		return;
	}
	if (!profile_for(s, pod))
		return;
	/* A pod this scheduler has bound (the informer lags): nothing to do;
	 * nor for a resync that changed nothing. */
	if (scache_is_assumed(&s->cache, key) ||
	    json_equal(jx_get(old, "metadata.resourceVersion"),
		       jx_get(pod, "metadata.resourceVersion")))
		return;
	if (gated(pod)) {
		queue_delete(&s->queue, key);
		return;
	}
	if (!json_equal(jx_get(old, "spec.tolerations"), jx_get(pod, "spec.tolerations")))
		ev |= EV_POD_TOLERATIONS;
	if (!json_equal(json_object_get(old, "spec"), json_object_get(pod, "spec")))
		ev |= EV_POD_UPDATE;
	queue_update(&s->queue, key, pod, ev);
	kick(s);
}

static void on_pod_delete(void *arg, json_t *pod)
{
	struct sched *s = arg;
	char key[512];

	pod_key(pod, key, sizeof(key));
	if (assigned(pod) || scache_is_assumed(&s->cache, key)) {
		scache_pod_del(&s->cache, key);
		queue_move(&s->queue, EV_POD_DELETE, pod, worth, s, "AssignedPodDelete");
	}
	queue_delete(&s->queue, key);
	kick(s);
}

/*
 * What the scheduler keeps of a Node (its informer's transform): what its
 * plugins, hints and change kinds read. Name, labels, taints, unschedulable
 * and allocatable as they are; status.conditions becomes the map from type
 * to status that nodeConditionsChanged compares (heartbeats, reasons and
 * messages do not count). A hollow node's tree is 12.7 KB; this is 3.6 KB.
 */
static json_t *node_view(const json_t *node)
{
	static const char *const paths[] = {"metadata.name", "metadata.resourceVersion",
					    "metadata.labels", "spec.taints", "spec.unschedulable",
					    "status.allocatable"};
	json_t *view = jx_pick(node, paths, sizeof(paths) / sizeof(paths[0]));
	json_t *conds = jx_get(node, "status.conditions"), *c;
	size_t i;

	if (json_is_array(conds)) {
		json_t *statuses = json_object();
		json_array_foreach(conds, i, c)
		{
			const char *type = jx_str(c, "type");
			json_t *status = json_object_get(c, "status");
			if (type && json_is_string(status))
				json_object_set(statuses, type, status);
		}
		jx_set(view, "status.conditions", statuses);
	}
	return view;
}

static void on_node_add(void *arg, json_t *node)
{
	struct sched *s = arg;
	scache_node_set(&s->cache, node);
	queue_move(&s->queue, EV_NODE_ADD, node, worth, s, "NodeAdd");
	kick(s);
}

/* NodeSchedulingPropertiesChange: which kinds of change this update is. */
static void on_node_update(void *arg, json_t *old, json_t *node)
{
	static const struct {
		unsigned ev;
		const char *name;
	} kinds[] = {{EV_NODE_ALLOCATABLE, "NodeUpdateNodeAllocatable"},
		     {EV_NODE_LABEL, "NodeUpdateNodeLabel"},
		     {EV_NODE_TAINT, "NodeUpdateNodeTaint"},
		     {EV_NODE_CONDITION, "NodeUpdateNodeCondition"}};
	struct sched *s = arg;
	unsigned ev = 0;

	scache_node_set(&s->cache, node);
	if (!json_equal(jx_get(old, "status.allocatable"), jx_get(node, "status.allocatable")))
		ev |= EV_NODE_ALLOCATABLE;
	if (!json_equal(jx_get(old, "metadata.labels"), jx_get(node, "metadata.labels")))
		ev |= EV_NODE_LABEL;
	if (!json_equal(jx_get(old, "spec.taints"), jx_get(node, "spec.taints")) ||
	    json_is_true(jx_get(old, "spec.unschedulable")) !=
		    json_is_true(jx_get(node, "spec.unschedulable")))
		ev |= EV_NODE_TAINT;
	if (!json_equal(jx_get(old, "status.conditions"), jx_get(node, "status.conditions")))
		ev |= EV_NODE_CONDITION;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (ev & kinds[i].ev)
			queue_move(&s->queue, kinds[i].ev, node, worth, s, kinds[i].name);
	kick(s);
}

static void on_node_delete(void *arg, json_t *node)
{
	struct sched *s = arg;
	scache_node_del(&s->cache, s_(jx_str(node, "metadata.name")));
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

void scheduler_opts_default(struct scheduler_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->pod_initial_backoff_ns = NS_PER_SEC;
	o->pod_max_backoff_ns = 10 * NS_PER_SEC;
	o->pod_max_in_unschedulable_ns = 5 * 60 * NS_PER_SEC;
	o->serving.port = 10259;
	o->serving.name = "kube-scheduler";
}


struct scheduler *scheduler_new(struct loop *loop, const struct scheduler_opts *opts)
{
	struct scheduler *sc = calloc(1, sizeof(*sc));
	struct sched *s = &sc->s;
	struct scheduler_opts o = *opts;
	struct informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, s};
	struct informer_handlers nh = {on_node_add, on_node_update, on_node_delete, s};

	if (!sc)
		abort();
	s->loop = loop;
	scache_init(&s->cache);
	if (o.config && *o.config && load_config(s, o.config, &o) < 0)
		goto fail;
	if (!s->nprofiles) {
		if (!(s->profiles = calloc(1, sizeof(*s->profiles))))
			abort();
		profile_defaults(&s->profiles[s->nprofiles++], DEFAULT_SCHEDULER);
	}
	s->percentage = o.percentage_of_nodes_to_score;
	queue_init(&s->queue, o.pod_initial_backoff_ns > 0 ? o.pod_initial_backoff_ns : NS_PER_SEC,
		   o.pod_max_backoff_ns > 0 ? o.pod_max_backoff_ns : 10 * NS_PER_SEC);
	if (o.pod_max_in_unschedulable_ns > 0)
		s->queue.max_unschedulable_ns = o.pod_max_in_unschedulable_ns;
	for (size_t i = 0; i < NPLUGINS; i++)
		s->plugin_events[i] = all_plugins[i]->events;
	s->queue.plugin_events = s->plugin_events;
	s->metrics = metrics_new();
	s->queue.m_pending = metrics_gauge(s->metrics, "scheduler_pending_pods",
					   "[STABLE] Number of pending pods, by the queue type. "
					   "'active' means number of pods in activeQ; 'backoff' "
					   "means number of pods in backoffQ; 'unschedulable' means "
					   "number of pods in unschedulablePods that the scheduler "
					   "attempted to schedule and failed; 'gated' is the number "
					   "of unschedulable pods that the scheduler never attempted "
					   "to schedule because they are gated.",
					   "queue");
	s->queue.m_incoming = metrics_counter(
		s->metrics, "scheduler_queue_incoming_pods_total",
		"[STABLE] Number of pods added to scheduling queues by event and queue type.",
		"queue,event");
	s->m_attempts = metrics_counter(s->metrics, "scheduler_schedule_attempts_total",
					"[STABLE] Number of attempts to schedule pods, by the "
					"result. 'unschedulable' means a pod could not be "
					"scheduled, while 'error' means an internal scheduler "
					"problem.",
					"result,profile");
	{
		double buckets[15];
		for (int i = 0; i < 15; i++)
			buckets[i] = 0.001 * (double)(1 << i);
		s->m_duration = metrics_histogram(
			s->metrics, "scheduler_scheduling_attempt_duration_seconds",
			"[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + "
			"binding)",
			"result,profile", buckets, 15);
	}
	if (!(s->rest = rest_client_for_component(loop, o.kubeconfig, o.kc, o.server, USER_AGENT)))
		goto fail;
	s->events = event_recorder_new(loop, s->rest, DEFAULT_SCHEDULER, NULL, 6);
	s->kick = loop_timer(loop, on_kick, s);
	s->flush = loop_timer(loop, on_flush, s);
	s->leftovers = loop_timer(loop, on_leftovers, s);
	s->nodes = informer_new(loop, s->rest, "/api/v1/nodes", NULL, &nh);
	informer_set_transform(s->nodes, node_view);
	/* Terminal pods are neither scheduled nor counted. */
	s->pods = informer_new(loop, s->rest, "/api/v1/pods",
			       "fieldSelector=status.phase!%3DSucceeded,status.phase!%3DFailed",
			       &ph);
	informer_start(s->nodes);
	informer_start(s->pods);
	timer_after(s->flush, NS_PER_SEC);
	timer_after(s->leftovers, 30 * NS_PER_SEC);
	{
		struct secure_serving_opts so = o.serving;
		so.metrics = s->metrics;
		if (!so.name)
			so.name = "kube-scheduler";
		if (!(s->serving = secure_server_new(loop, &so)) && *err_msg())
			goto fail;
	}
	return sc;
fail:
	scheduler_free(sc);
	return NULL;
}

bool scheduler_synced(const struct scheduler *sc)
{
	return sc && sc->s.pods && informer_synced(sc->s.pods) && informer_synced(sc->s.nodes);
}

struct metrics *scheduler_metrics(const struct scheduler *sc)
{
	return sc ? sc->s.metrics : NULL;
}

void scheduler_free(struct scheduler *sc)
{
	struct sched *s;

	if (!sc)
		return;
	s = &sc->s;
	secure_server_free(s->serving);
	informer_free(s->pods);
	informer_free(s->nodes);
	while (s->binds) {
		rest_cancel(s->binds->call);
		bind_end(s->binds);
	}
	while (s->writes) {
		rest_cancel(s->writes->call);
		write_end(s->writes);
	}
	event_recorder_free(s->events);
	rest_client_free(s->rest);
	timer_free(s->kick);
	timer_free(s->flush);
	timer_free(s->leftovers);
	queue_free(&s->queue);
	scache_free(&s->cache);
	for (int i = 0; i < s->nprofiles; i++)
		free(s->profiles[i].name);
	free(s->profiles);
	metrics_free(s->metrics);
	free(sc);
}
