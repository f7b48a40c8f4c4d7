/*
 * namespace-controller (upstream pkg/controller/namespace, 1.32): a deleted
 * namespace stays Terminating until its content is gone.
 *
 * The API server only marks a namespace being deleted (deletionTimestamp,
 * phase Terminating) while spec.finalizers holds "kubernetes". For such a
 * namespace each sync:
 *   1. discovers every namespaced resource that can be deleted (GET /api/v1,
 *      /apis and the preferred version of each group, as upstream's
 *      ServerPreferredNamespacedResources);
 *   2. deletes the namespace's content: DELETE of the collection with
 *      propagationPolicy Background, or each item where the resource has no
 *      deletecollection — so bound pods terminate gracefully, through their
 *      kubelets;
 *   3. lists what remains: pods still terminating, objects held by
 *      finalizers;
 *   4. writes upstream's five NamespaceDeletion* / NamespaceContentRemaining
 *      / NamespaceFinalizersRemaining conditions when they change;
 *   5. when nothing remains, removes "kubernetes" through the finalize
 *      subresource — the API server then deletes the namespace. Otherwise
 *      it looks again after estimate/2 + 1 seconds, where the estimate is
 *      the longest terminationGracePeriodSeconds of a remaining pod, or 15 s
 *      for objects waiting on finalizers (upstream's numbers).
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

#include "base/clock.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FINALIZER "kubernetes"
/* upstream's finalizerEstimateSeconds: how long to wait for finalizers. */
#define FINALIZER_ESTIMATE_S 15
/* upstream's --concurrent-namespace-syncs default. */
#define WORKERS 10
/* upstream's resync of every namespace. */
#define RESYNC_NS (5 * 60 * NS_PER_SEC)

struct nsctl {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *namespaces;
	struct keyed *work;
	struct timer *resync;
};

/* One deletable namespaced resource, as discovery told it. */
struct gvr {
	char base[160];  /* "/api/v1" or "/apis/apps/v1" */
	char group[96];  /* "" for core */
	char plural[96]; /* "pods" */
	bool collection; /* supports deletecollection */
};

struct run {
	char *ns;
	json_t *obj; /* the namespace as the sync began */
	struct gvr *gvrs;
	size_t n, cap;
	struct strv remaining;  /* "pods. has 2 resource instances" */
	struct hmap finalizers; /* finalizer -> count (boxed int) */
	struct strv errors;
	int64_t estimate_s;
};

static void run_free(void *arg)
{
	struct run *r = arg;

	free(r->ns);
	json_decref(r->obj);
	free(r->gvrs);
	strv_free(&r->remaining);
	hmap_free_values(&r->finalizers, free);
	strv_free(&r->errors);
	free(r);
}

static bool has_finalizer(const json_t *ns)
{
	json_t *f;
	size_t i;
	json_array_foreach(jx_get(ns, "spec.finalizers"), i, f) if (json_string_value(f) &&
								     !strcmp(json_string_value(f),
									     FINALIZER)) return true;
	return false;
}

static const char *collection_path(const struct run *r, const struct gvr *g, char *buf, size_t n)
{
	snprintf(buf, n, "%s/namespaces/%s/%s", g->base, r->ns, g->plural);
	return buf;
}

/* ---- 1. discovery ------------------------------------------------------------------ */

static bool has_verb(const json_t *res, const char *verb)
{
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(res, "verbs"), i, v) if (json_string_value(v) &&
								    !strcmp(json_string_value(v),
									    verb)) return true;
	return false;
}

static void add_resources(struct run *r, const char *base, const char *group, const json_t *list)
{
	json_t *res;
	size_t i;

	json_array_foreach(json_object_get(list, "resources"), i, res)
	{
		const char *name = jx_str(res, "name");
		/* Subresources (pods/status) go with their resource. */
		if (!name || strchr(name, '/') || !json_is_true(json_object_get(res, "namespaced")) ||
		    !has_verb(res, "delete") || !has_verb(res, "list"))
			continue;
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 16;
			if (!(r->gvrs = realloc(r->gvrs, r->cap * sizeof(*r->gvrs))))
				abort();
		}
		struct gvr *g = &r->gvrs[r->n++];
		snprintf(g->base, sizeof(g->base), "%s", base);
		snprintf(g->group, sizeof(g->group), "%s", group);
		snprintf(g->plural, sizeof(g->plural), "%s", name);
		g->collection = has_verb(res, "deletecollection");
	}
}

static void discovery_failed(struct ksync *s, const char *what, int status, const json_t *body,
			     const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];
	strv_pushf(&r->errors, "failed to discover %s: %s", what,
		   api_error(why, sizeof(why), status, body, err));
}

static void on_version(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char *gv = arg, base[160], group[96];
	const char *slash = strchr(gv, '/');

	if (status != 200) {
		discovery_failed(s, gv, status, body, err);
	} else {
		snprintf(base, sizeof(base), "%s%s", slash ? "/apis/" : "/api/", gv);
		snprintf(group, sizeof(group), "%.*s", slash ? (int)(slash - gv) : 0, gv);
		add_resources(r, base, group, body);
	}
	free(gv);
}

static void on_groups(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	json_t *g;
	size_t i;
	char path[256];

	(void)arg;
	if (status != 200) {
		discovery_failed(s, "/apis", status, body, err);
		return;
	}
	json_array_foreach(json_object_get(body, "groups"), i, g)
	{
		const char *gv = jx_str(g, "preferredVersion.groupVersion");
		if (!gv)
			continue;
		snprintf(path, sizeof(path), "/apis/%s", gv);
		ksync_call_owned(s, "GET", path, NULL, NULL, on_version, str_dup(gv), free);
	}
}

/* ---- 2. deletion, 3. what remains ---------------------------------------------------- */

static void on_item_deleted(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];
	if (status != 200 && status != 202 && status != 404)
		strv_pushf(&r->errors, "failed to delete %s: %s", (char *)arg,
			   api_error(why, sizeof(why), status, body, err));
	free(arg);
}

/* deleteEachItem, for a resource without deletecollection. */
static void on_listed_for_delete(struct ksync *s, void *arg, int status, json_t *body,
				 const char *err)
{
	struct run *r = ksync_data(s);
	const struct gvr *g = &r->gvrs[(size_t)(uintptr_t)arg];
	char path[768], why[512];
	json_t *item;
	size_t i;

	if (status != 200) {
		strv_pushf(&r->errors, "failed to list %s: %s", g->plural,
			   api_error(why, sizeof(why), status, body, err));
		return;
	}
	json_array_foreach(json_object_get(body, "items"), i, item)
	{
		const char *name = jx_str(item, "metadata.name");
		if (!name)
			continue;
		collection_path(r, g, path, sizeof(path) - 256);
		snprintf(path + strlen(path), 256, "/%s", name);
		ksync_call_owned(s, "DELETE", path, NULL, NULL, on_item_deleted, str_dup(path), free);
	}
}

static void on_collection_deleted(struct ksync *s, void *arg, int status, json_t *body,
				  const char *err)
{
	struct run *r = ksync_data(s);
	const struct gvr *g = &r->gvrs[(size_t)(uintptr_t)arg];
	char why[512];
	if (status != 200 && status != 404)
		strv_pushf(&r->errors, "failed to delete collection %s: %s", g->plural,
			   api_error(why, sizeof(why), status, body, err));
}

/* How long the remaining pods may still take: their longest grace period —
 * 0 once that long has passed since the namespace was deleted (then what
 * remains is unexpected). */
static int64_t pods_estimate(const json_t *items, const json_t *ns)
{
	int64_t estimate = 0, deleted;
	json_t *pod;
	size_t i;
	json_array_foreach(items, i, pod)
	{
		const char *phase = jx_str(pod, "status.phase");
		if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
			continue;
		int64_t grace = jx_int(pod, "spec.terminationGracePeriodSeconds", 0);
		if (grace > estimate)
			estimate = grace;
	}
	if (time_parse_rfc3339(jx_str(ns, "metadata.deletionTimestamp") ?: "", &deleted) == 0 &&
	    clock_now() - deleted >= estimate * NS_PER_SEC)
		estimate = 0;
	return estimate;
}

static void on_remaining(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	const struct gvr *g = &r->gvrs[(size_t)(uintptr_t)arg];
	json_t *items = json_object_get(body, "items"), *item, *f;
	size_t i, j, n = json_array_size(items);
	bool held = false;
	char why[512];

	if (status != 200) {
		strv_pushf(&r->errors, "failed to list %s: %s", g->plural,
			   api_error(why, sizeof(why), status, body, err));
		return;
	}
	if (!n)
		return;
	strv_pushf(&r->remaining, "%s.%s has %zu resource instances", g->plural, g->group, n);
	json_array_foreach(items, i, item) json_array_foreach(jx_get(item, "metadata.finalizers"), j,
							     f)
	{
		const char *name = json_string_value(f);
		int *count;
		if (!name)
			continue;
		if (!(count = hmap_get(&r->finalizers, name))) {
			if (!(count = calloc(1, sizeof(*count))))
				abort();
			hmap_put(&r->finalizers, name, count);
		}
		++*count;
		held = true;
	}
	int64_t estimate =
		!strcmp(g->plural, "pods") && !*g->group ? pods_estimate(items, r->obj) : 0;
	if (!estimate && held)
		estimate = FINALIZER_ESTIMATE_S;
	if (!estimate)
		strv_pushf(&r->errors, "unexpected items still remain in namespace: %s for gvr: %s%s%s",
			   r->ns, g->group, *g->group ? "/" : "", g->plural);
	if (estimate > r->estimate_s)
		r->estimate_s = estimate;
}

/* ---- 4. conditions, 5. finalize ------------------------------------------------------ */

/* Upstream's five deletion conditions, in its order; true when any changed. */
static bool set_conditions(struct run *r, json_t *ns)
{
	char *remaining;
	struct strv fins = {0};
	const char *k;
	void *v;
	bool changed = false;
	char now[TIME_BUF];

	/* Sorted, as upstream, for stable updates. */
	strv_sort(&r->remaining);
	remaining = strv_join(&r->remaining, ", ");
	for (size_t it = 0; hmap_next(&r->finalizers, &it, &k, &v);)
		strv_pushf(&fins, "%s in %d resource instances", k, *(int *)v);
	strv_sort(&fins);
	char *finalizers = strv_join(&fins, ", ");
	char *content_msg = str_printf("Some resources are remaining: %s", remaining);
	char *fin_msg = str_printf("Some content in the namespace has finalizers remaining: %s",
				   finalizers);
	struct cond {
		const char *type, *status, *reason, *message;
	} want[] = {
		{"NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered",
		 "All resources successfully discovered"},
		{"NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
		 "All legacy kube types successfully parsed"},
		{"NamespaceDeletionContentFailure", "False", "ContentDeleted",
		 "All content successfully deleted, may be waiting on finalization"},
		{"NamespaceContentRemaining", "False", "ContentRemoved",
		 "All content successfully removed"},
		{"NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers",
		 "All content-preserving finalizers finished"},
	};
	if (r->remaining.n)
		want[3] = (struct cond){"NamespaceContentRemaining", "True", "SomeResourcesRemain",
					content_msg};
	if (fins.n)
		want[4] = (struct cond){"NamespaceFinalizersRemaining", "True",
					"SomeFinalizersRemain", fin_msg};
	json_t *old = jx_get(ns, "status.conditions"), *out = json_array();

	time_format_rfc3339(clock_now(), now);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		json_t *had = NULL, *c;
		size_t j;
		json_array_foreach(old, j, c) if (!strcmp(jx_str(c, "type") ?: "", want[i].type)) had =
			c;
		/* The transition time moves with the status only. */
		bool same_status = had && !strcmp(jx_str(had, "status") ?: "", want[i].status);
		changed |= !same_status || strcmp(jx_str(had, "reason") ?: "", want[i].reason) ||
			   strcmp(jx_str(had, "message") ?: "", want[i].message);
		json_array_append_new(
			out, json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", want[i].type, "status",
				       want[i].status, "lastTransitionTime",
				       same_status && jx_str(had, "lastTransitionTime")
					       ? jx_str(had, "lastTransitionTime")
					       : now,
				       "reason", want[i].reason, "message", want[i].message));
	}
	jx_set(ns, "status.conditions", out);
	free(remaining);
	free(finalizers);
	free(content_msg);
	free(fin_msg);
	strv_free(&fins);
	return changed;
}

static void on_finalized(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];
	(void)arg;
	if (status == 200 || status == 404)
		LOG_V(4, "\"Namespace finalized\" namespace=\"%s\"", r->ns);
	else
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

/* The namespace as it is now, "kubernetes" taken off, PUT to /finalize
 * with its resourceVersion: a conflict fails the sync, tried again. */
static void on_fresh(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	json_t *ns, *fins, *f;
	char path[512], why[512];
	size_t i;

	(void)arg;
	if (status == 404)
		return;
	if (status != 200) {
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
		return;
	}
	ns = json_deep_copy(body);
	fins = jx_get(ns, "spec.finalizers");
	json_array_foreach(fins, i, f) if (json_string_value(f) &&
					   !strcmp(json_string_value(f), FINALIZER))
	{
		json_array_remove(fins, i);
		break;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/finalize", r->ns);
	ksync_call(s, "PUT", path, NULL, ns, on_finalized, NULL);
	json_decref(ns);
}

static void finalize(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	char path[512];

	(void)ctl;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", r->ns);
	ksync_call(s, "GET", path, NULL, NULL, on_fresh, NULL);
}

static void conclude(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	json_t *ns = json_deep_copy(r->obj);
	char path[512];

	(void)ctl;
	if (set_conditions(r, ns)) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/status", r->ns);
		ksync_update_status(s, path, ns);
	}
	json_decref(ns);
	if (r->errors.n) {
		char *all = strv_join(&r->errors, ", ");
		ksync_fail(s, "%s", all);
		free(all);
		return;
	}
	if (r->estimate_s > 0) {
		int64_t wait = r->estimate_s / 2 + 1;
		LOG_V(4, "\"Content remaining in namespace\" namespace=\"%s\" waitSeconds=%lld", r->ns,
		      (long long)wait);
		ksync_requeue_after(s, wait * NS_PER_SEC);
		return;
	}
	ksync_then(s, finalize);
}

static void count_remaining(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	char path[512];

	(void)ctl;
	for (size_t i = 0; i < r->n; i++)
		ksync_call(s, "GET", collection_path(r, &r->gvrs[i], path, sizeof(path)), NULL, NULL,
			   on_remaining, (void *)(uintptr_t)i);
	ksync_then(s, conclude);
}

static void delete_content(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	json_t *opts = json_pack("{s:s,s:s,s:s}", "kind", "DeleteOptions", "apiVersion", "v1",
				 "propagationPolicy", "Background");
	char path[512];

	(void)ctl;
	if (r->errors.n) { /* discovery failed: delete nothing on a partial view */
		conclude(ctl, s);
		json_decref(opts);
		return;
	}
	LOG_V(5, "\"Namespace controller - deleteAllContent\" namespace=\"%s\" resources=%zu",
	      r->ns, r->n);
	for (size_t i = 0; i < r->n; i++) {
		const struct gvr *g = &r->gvrs[i];
		collection_path(r, g, path, sizeof(path));
		if (g->collection)
			ksync_call(s, "DELETE", path, NULL, opts, on_collection_deleted,
				   (void *)(uintptr_t)i);
		else
			ksync_call(s, "GET", path, NULL, NULL, on_listed_for_delete,
				   (void *)(uintptr_t)i);
	}
	json_decref(opts);
	ksync_then(s, count_remaining);
}

static void sync_namespace(void *ctl, struct ksync *s)
{
	struct nsctl *c = ctl;
	const char *key = ksync_key(s);
	json_t *ns = informer_get(c->namespaces, key);
	struct run *r;

	/* Gone, not being deleted, or finalized already: nothing to do. */
	if (!ns || !jx_get(ns, "metadata.deletionTimestamp") || !has_finalizer(ns))
		return;
	LOG_V(5, "\"Namespace controller - syncNamespace\" namespace=\"%s\" finalizerToken=\"%s\"",
	      key, FINALIZER);
	if (!(r = calloc(1, sizeof(*r))))
		abort();
	r->ns = str_dup(key);
	r->obj = json_incref(ns);
	ksync_set_data(s, r, run_free);
	ksync_call_owned(s, "GET", "/api/v1", NULL, NULL, on_version, str_dup("v1"), free);
	ksync_call(s, "GET", "/apis", NULL, NULL, on_groups, NULL);
	ksync_then(s, delete_content);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

static void on_ns(void *arg, json_t *ns)
{
	struct nsctl *c = arg;
	if (jx_str(ns, "metadata.name"))
		keyed_add(c->work, jx_str(ns, "metadata.name"));
}

static void on_ns_update(void *arg, json_t *old, json_t *ns)
{
	(void)old;
	on_ns(arg, ns);
}

static void on_resync(void *arg)
{
	struct nsctl *c = arg;
	json_t **all;
	size_t n = informer_list(c->namespaces, &all);
	for (size_t i = 0; i < n; i++)
		on_ns(c, all[i]);
	free(all);
	timer_after(c->resync, RESYNC_NS);
}

struct nsctl *namespace_new(struct controller_manager *m)
{
	struct nsctl *c = calloc(1, sizeof(*c));
	struct informer_handlers h = {on_ns, on_ns_update, NULL, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "namespace-controller");
	c->m = m;
	c->namespaces = cm_informer(m, "/api/v1/namespaces", &h);
	c->work = keyed_new(m, "namespace", c->rest, WORKERS, sync_namespace, c, "deletion of namespace %s failed: %s");
	c->resync = loop_timer(m->loop, on_resync, c);
	timer_after(c->resync, RESYNC_NS);
	LOG_INFO("\"Starting namespace controller\"");
	return c;
}

void namespace_stop(struct nsctl *c)
{
	if (!c)
		return;
	timer_free(c->resync);
	c->resync = NULL;
	keyed_stop(c->work);
}

void namespace_free(struct nsctl *c)
{
	if (!c)
		return;
	namespace_stop(c);
	keyed_free(c->work);
	free(c);
}
