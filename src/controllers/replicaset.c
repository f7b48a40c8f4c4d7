/*
 * replicaset-controller (upstream pkg/controller/replicaset, 1.32;
 * reference/k8s-controllers-1.32.md §3): keeps spec.replicas active pods
 * for each ReplicaSet.
 *
 *   active pods — owned (controller ownerReference with the ReplicaSet's
 *     UID), not Succeeded or Failed and not being deleted. A pod that gets a
 *     deletionTimestamp stops counting at once, so its replacement is
 *     created while it is still Terminating: for a while there are more
 *     pods than replicas (the seeds' "over-repair").
 *   adoption — an orphan pod in the namespace that matches the selector is
 *     adopted (the ownerReference added); an owned pod that no longer
 *     matches is released.
 *   expectations — after creating or deleting pods, the ReplicaSet is not
 *     managed again until the informer has seen them all (or 5 minutes
 *     passed), so a slow watch never causes a double create.
 *   scale up — min(diff, 500) pods in slow-start batches 1, 2, 4, ...; the
 *     first batch with a failure ends the sync (Warning FailedCreate "Error
 *     creating: ..."); Normal SuccessfulCreate "Created pod: <name>".
 *   scale down — the pods upstream ranks first: unassigned, Pending before
 *     Unknown before Running, not Ready, lower pod-deletion-cost, more pods
 *     of the set on the same node, more recently Ready, more restarts,
 *     newer; Normal SuccessfulDelete "Deleted pod: <name>".
 *   status — replicas, fullyLabeledReplicas, readyReplicas,
 *     availableReplicas (Ready for minReadySeconds), observedGeneration, the
 *     ReplicaFailure condition while creates or deletes fail.
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

#include "api/schema.h"
#include "api/selector.h"

#include "base/clock.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "replicaset-controller"
#define RS_PATH "/apis/apps/v1/replicasets"
#define BURST 500
#define EXPECTATIONS_TTL_NS (5 * 60 * NS_PER_SEC)

/* ControlleeExpectations: creations and deletions still to be observed. */
struct expect {
	int add;
	struct strv dels; /* pod keys */
	int64_t stamp;    /* mono */
};

struct replicaset {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *sets, *pods;
	int pods_by_ns;
	struct hmap expect; /* rs key -> struct expect* */
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

/* ---- expectations --------------------------------------------------------------- */

static struct expect *expect_get(struct replicaset *c, const char *key, bool make)
{
	struct expect *e = hmap_get(&c->expect, key);
	if (!e && make) {
		if (!(e = calloc(1, sizeof(*e))))
			abort();
		hmap_put(&c->expect, key, e);
	}
	return e;
}

static void expect_drop(struct replicaset *c, const char *key)
{
	struct expect *e = hmap_del(&c->expect, key);
	if (e) {
		strv_free(&e->dels);
		free(e);
	}
}

static bool expect_satisfied(struct replicaset *c, const char *key)
{
	struct expect *e = expect_get(c, key, false);
	if (!e)
		return true;
	if (e->add <= 0 && e->dels.n == 0)
		return true;
	if (clock_mono() - e->stamp > EXPECTATIONS_TTL_NS) {
		LOG_V(4, "\"Expectations expired\" controller=\"%s\"", key);
		return true;
	}
	return false;
}

/* ---- pods and their owners ---------------------------------------------------------- */

static bool owned_by(const json_t *pod, const json_t *rs)
{
	const json_t *ref = controller_ref(pod);
	return ref && !strcmp(s_(jx_str(ref, "uid")), s_(jx_str(rs, "metadata.uid")));
}

/* The ReplicaSet that controls pod (by name and UID), or NULL. */
static json_t *owner_of(struct replicaset *c, const json_t *pod, char *key, size_t n)
{
	const json_t *ref = controller_ref(pod);
	json_t *rs;

	if (!ref || strcmp(s_(jx_str(ref, "kind")), "ReplicaSet"))
		return NULL;
	snprintf(key, n, "%s/%s", s_(jx_str(pod, "metadata.namespace")), s_(jx_str(ref, "name")));
	rs = informer_get(c->sets, key);
	if (!rs || strcmp(s_(jx_str(rs, "metadata.uid")), s_(jx_str(ref, "uid"))))
		return NULL;
	return rs;
}

/* The sets whose selector matches an orphan (they may adopt it). */
static void enqueue_matching(struct replicaset *c, const json_t *pod)
{
	json_t **sets;
	size_t n = informer_list(c->sets, &sets);
	for (size_t i = 0; i < n; i++) {
		struct label_selector *sel;
		char key[512];
		if (strcmp(s_(jx_str(sets[i], "metadata.namespace")),
			   s_(jx_str(pod, "metadata.namespace"))))
			continue;
		sel = label_selector_from_json(jx_get(sets[i], "spec.selector"));
		if (sel && !label_selector_empty(sel) &&
		    label_selector_match(sel, jx_get(pod, "metadata.labels")))
			keyed_add(c->work, obj_key(sets[i], key, sizeof(key)));
		label_selector_free(sel);
	}
	free(sets);
}

static void deletion_observed(struct replicaset *c, const json_t *pod)
{
	char key[512], pkey[512];
	struct expect *e;

	if (!owner_of(c, pod, key, sizeof(key)))
		return;
	if ((e = expect_get(c, key, false)))
		strv_remove(&e->dels, obj_key(pod, pkey, sizeof(pkey)));
	keyed_add(c->work, key);
}

static void on_pod_add(void *arg, json_t *pod)
{
	struct replicaset *c = arg;
	char key[512];
	struct expect *e;

	if (jx_get(pod, "metadata.deletionTimestamp")) {
		/* A pod seen first while being deleted counts as a deletion. */
		deletion_observed(c, pod);
		return;
	}
	if (owner_of(c, pod, key, sizeof(key))) {
		if ((e = expect_get(c, key, false)))
			e->add--;
		keyed_add(c->work, key);
	} else if (!controller_ref(pod)) {
		enqueue_matching(c, pod);
	}
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	struct replicaset *c = arg;
	char key[512];
	bool labels = !json_equal(jx_get(old, "metadata.labels"), jx_get(pod, "metadata.labels"));

	if (json_equal(jx_get(old, "metadata.resourceVersion"),
		       jx_get(pod, "metadata.resourceVersion")))
		return;
	if (jx_get(pod, "metadata.deletionTimestamp")) {
		/* Being deleted counts as deleted: the replacement comes now. */
		deletion_observed(c, pod);
		if (labels)
			deletion_observed(c, old);
		return;
	}
	if (!json_equal(controller_ref(old), controller_ref(pod)) &&
	    owner_of(c, old, key, sizeof(key)))
		keyed_add(c->work, key);
	if (owner_of(c, pod, key, sizeof(key))) {
		const json_t *rs = informer_get(c->sets, key);
		int64_t min_ready = jx_int(rs, "spec.minReadySeconds", 0);
		keyed_add(c->work, key);
		/* Available only after minReadySeconds: look again then. */
		if (min_ready > 0 && !pod_ready(old) && pod_ready(pod))
			keyed_add_after(c->work, key, (min_ready + 1) * NS_PER_SEC);
	} else if (!controller_ref(pod) && labels) {
		enqueue_matching(c, pod);
	}
}

static void on_pod_delete(void *arg, json_t *pod)
{
	deletion_observed(arg, pod);
}

static void on_set(void *arg, json_t *rs)
{
	struct replicaset *c = arg;
	char key[512];
	keyed_add(c->work, obj_key(rs, key, sizeof(key)));
}

static void on_set_update(void *arg, json_t *old, json_t *rs)
{
	(void)old;
	on_set(arg, rs);
}

static void on_set_delete(void *arg, json_t *rs)
{
	struct replicaset *c = arg;
	char key[512];
	expect_drop(c, obj_key(rs, key, sizeof(key)));
}

/* ---- ranking pods for deletion (ActivePodsWithRanks) --------------------------------- */

struct ranked {
	json_t *pod;
	int rank; /* pods of the set on the same node */
};

static int phase_order(const json_t *pod)
{
	const char *p = s_(jx_str(pod, "status.phase"));
	return !strcmp(p, "Pending") ? 0 : !strcmp(p, "Unknown") ? 1 : !strcmp(p, "Running") ? 2 : 3;
}

static int64_t log2_since(const char *stamp)
{
	int64_t t, d;
	if (!stamp || time_parse_rfc3339(stamp, &t) < 0)
		return -1;
	d = clock_now() - t;
	return d <= 0 ? -1 : (int64_t)log2((double)d);
}

static int restarts(const json_t *pod)
{
	const json_t *cs;
	size_t i;
	int max = 0;
	json_array_foreach(jx_get(pod, "status.containerStatuses"), i, cs)
	{
		int r = (int)jx_int(cs, "restartCount", 0);
		if (r > max)
			max = r;
	}
	return max;
}

static int64_t deletion_cost(const json_t *pod)
{
	const char *v = json_string_value(json_object_get(jx_get(pod, "metadata.annotations"),
							  "controller.kubernetes.io/pod-deletion-cost"));
	return v ? strtoll(v, NULL, 10) : 0;
}

static const char *ready_since(const json_t *pod)
{
	return jx_str(jx_condition(json_object_get(pod, "status"), "Ready"), "lastTransitionTime");
}

/* Less: which pod goes first. */
static int rank_cmp(const void *pa, const void *pb)
{
	const struct ranked *a = pa, *b = pb;
	const json_t *x = a->pod, *y = b->pod;
	bool ax = *s_(jx_str(x, "spec.nodeName")) != 0, ay = *s_(jx_str(y, "spec.nodeName")) != 0;
	int64_t lx, ly;

	if (ax != ay)
		return ax ? 1 : -1;
	if (phase_order(x) != phase_order(y))
		return phase_order(x) < phase_order(y) ? -1 : 1;
	if (pod_ready(x) != pod_ready(y))
		return pod_ready(x) ? 1 : -1;
	if (deletion_cost(x) != deletion_cost(y))
		return deletion_cost(x) < deletion_cost(y) ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank > b->rank ? -1 : 1;
	/* Times that differ compare by their log2 rank; equal ranks end it
	 * with the UID (LogarithmicScaleDown). */
	if (pod_ready(x) && pod_ready(y) && strcmp(s_(ready_since(x)), s_(ready_since(y)))) {
		lx = log2_since(ready_since(x));
		ly = log2_since(ready_since(y));
		if (lx == ly)
			return strcmp(s_(jx_str(x, "metadata.uid")), s_(jx_str(y, "metadata.uid")));
		return lx < ly ? -1 : 1;
	}
	if (restarts(x) != restarts(y))
		return restarts(x) > restarts(y) ? -1 : 1;
	if (strcmp(s_(jx_str(x, "metadata.creationTimestamp")),
		   s_(jx_str(y, "metadata.creationTimestamp")))) {
		lx = log2_since(jx_str(x, "metadata.creationTimestamp"));
		ly = log2_since(jx_str(y, "metadata.creationTimestamp"));
		if (lx != ly)
			return lx < ly ? -1 : 1;
	}
	return strcmp(s_(jx_str(x, "metadata.uid")), s_(jx_str(y, "metadata.uid")));
}

/* ---- one sync --------------------------------------------------------------------------- */

struct run {
	struct replicaset *c;
	json_t *rs;          /* the informer's copy (a reference) */
	json_t **pods;       /* active owned pods (references) */
	size_t npods;
	int to_create, created_batch, batch;
	bool manage_failed;
	char failure[512];
};

static void run_free(void *arg)
{
	struct run *r = arg;
	for (size_t i = 0; i < r->npods; i++)
		json_decref(r->pods[i]);
	free(r->pods);
	json_decref(r->rs);
	free(r);
}

static void rs_event(struct replicaset *c, const json_t *rs, const char *type, const char *reason,
		     const char *fmt, const char *arg)
{
	struct event_ref ref = event_ref_of(rs, "apps/v1", "ReplicaSet");
	event_record(c->events, &ref, type, reason, fmt, arg);
}

static void write_status(void *ctl, struct ksync *s);

static void on_created(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];
	struct expect *e = expect_get(r->c, ksync_key(s), false);

	(void)arg;
	if (status == 201) {
		rs_event(r->c, r->rs, "Normal", "SuccessfulCreate", "Created pod: %s",
			 s_(jx_str(body, "metadata.name")));
		return;
	}
	api_error(why, sizeof(why), status, body, err);
	if (e)
		e->add--; /* this one will never be observed */
	if (status == 403 && strstr(why, "because it is being terminated"))
		return; /* NamespaceTerminating: not an error of ours */
	rs_event(r->c, r->rs, "Warning", "FailedCreate", "Error creating: %s", why);
	if (!r->manage_failed) {
		r->manage_failed = true;
		snprintf(r->failure, sizeof(r->failure), "%s", why);
	}
	ksync_fail(s, "%s", why);
}

/* slowStartBatch: 1, 2, 4, ... pods at a time; a failing batch ends it. */
static void create_batch(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	char path[512];
	int n;

	(void)ctl;
	if (r->manage_failed || r->to_create <= 0) {
		struct expect *e = expect_get(r->c, ksync_key(s), false);
		if (e && r->to_create > 0)
			e->add -= r->to_create; /* skipped: never to be observed */
		r->to_create = 0;
		write_status(ctl, s);
		return;
	}
	n = r->batch < r->to_create ? r->batch : r->to_create;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods",
		 s_(jx_str(r->rs, "metadata.namespace")));
	for (int i = 0; i < n; i++) {
		json_t *pod = pod_from_template(jx_get(r->rs, "spec.template"), r->rs, "apps/v1",
						"ReplicaSet");
		ksync_call(s, "POST", path, NULL, pod, on_created, NULL);
		json_decref(pod);
	}
	r->to_create -= n;
	r->batch *= 2;
	ksync_then(s, create_batch);
}

static void on_deleted(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char *pkey = arg, why[512];
	const char *slash = strchr(pkey, '/');

	if (status == 200 || status == 202) {
		rs_event(r->c, r->rs, "Normal", "SuccessfulDelete", "Deleted pod: %s",
			 slash ? slash + 1 : pkey);
	} else if (status != 404) {
		struct expect *e = expect_get(r->c, ksync_key(s), false);
		if (e)
			strv_remove(&e->dels, pkey);
		api_error(why, sizeof(why), status, body, err);
		rs_event(r->c, r->rs, "Warning", "FailedDelete", "Error deleting: %s", why);
		if (!r->manage_failed) {
			r->manage_failed = true;
			snprintf(r->failure, sizeof(r->failure), "%s", why);
		}
		ksync_fail(s, "%s", why);
	} else {
		struct expect *e = expect_get(r->c, ksync_key(s), false);
		if (e)
			strv_remove(&e->dels, pkey); /* gone already */
	}
	free(pkey);
}

static void scale_down(struct replicaset *c, struct ksync *s, struct run *r, int diff)
{
	struct ranked *v = calloc(r->npods + 1, sizeof(*v));
	struct expect *e = expect_get(c, ksync_key(s), true);

	if (!v)
		abort();
	for (size_t i = 0; i < r->npods; i++) {
		v[i].pod = r->pods[i];
		for (size_t j = 0; j < r->npods; j++)
			if (*s_(jx_str(r->pods[i], "spec.nodeName")) &&
			    !strcmp(s_(jx_str(r->pods[i], "spec.nodeName")),
				    s_(jx_str(r->pods[j], "spec.nodeName"))))
				v[i].rank++;
	}
	qsort(v, r->npods, sizeof(*v), rank_cmp);
	e->add = 0;
	strv_free(&e->dels); /* ExpectDeletions: these, and only these */
	e->dels = (struct strv){0};
	e->stamp = clock_mono();
	for (int i = 0; i < diff; i++) {
		char pkey[512], path[768];
		obj_key(v[i].pod, pkey, sizeof(pkey));
		strv_push(&e->dels, pkey);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
			 s_(jx_str(v[i].pod, "metadata.namespace")),
			 s_(jx_str(v[i].pod, "metadata.name")));
		ksync_call_owned(s, "DELETE", path, NULL, NULL, on_deleted, str_dup(pkey), free);
	}
	free(v);
}

/* calculateStatus, and the update when anything changed. */
static void write_status(void *ctl, struct ksync *s)
{
	struct replicaset *c = ctl;
	struct run *r = ksync_data(s);
	const json_t *rs = r->rs, *old = json_object_get(rs, "status");
	struct label_selector *tmpl = NULL;
	json_t *st, *conds, *copy, *fail;
	int full = 0, ready = 0, avail = 0;
	int64_t min_ready = jx_int(rs, "spec.minReadySeconds", 0), now = clock_now();
	char path[768];
	{
		/* the template's labels as a selector: fully labeled pods */
		const json_t *labels = jx_get(rs, "spec.template.metadata.labels");
		json_t *ml = json_pack("{s:o}", "matchLabels",
				       labels ? json_deep_copy(labels) : json_object());
		tmpl = label_selector_from_json(ml);
		json_decref(ml);
	}
	for (size_t i = 0; i < r->npods; i++) {
		if (tmpl && label_selector_match(tmpl, jx_get(r->pods[i], "metadata.labels")))
			full++;
		if (pod_ready(r->pods[i])) {
			ready++;
			if (pod_available(r->pods[i], min_ready, now))
				avail++;
		}
	}
	label_selector_free(tmpl);
	st = json_pack("{s:i,s:i,s:i,s:i,s:I}", "replicas", (int)r->npods, "fullyLabeledReplicas",
		       full, "readyReplicas", ready, "availableReplicas", avail,
		       "observedGeneration", (json_int_t)jx_int(rs, "metadata.generation", 0));
	conds = json_is_array(json_object_get(old, "conditions"))
			? json_deep_copy(json_object_get(old, "conditions"))
			: json_array();
	fail = jx_condition(old, "ReplicaFailure");
	if (r->manage_failed && !fail) {
		char stamp[TIME_BUF];
		int diff = (int)r->npods - (int)jx_int(rs, "spec.replicas", 1);
		json_array_append_new(conds, json_pack("{s:s,s:s,s:s,s:s,s:s}", "type",
						       "ReplicaFailure", "status", "True", "reason",
						       diff < 0 ? "FailedCreate" : "FailedDelete",
						       "message", r->failure, "lastTransitionTime",
						       time_format_rfc3339(now, stamp)));
	} else if (!r->manage_failed && fail) {
		size_t i;
		json_t *cnd;
		json_array_foreach(conds, i, cnd) if (!strcmp(s_(jx_str(cnd, "type")),
							      "ReplicaFailure"))
		{
			json_array_remove(conds, i);
			break;
		}
	}
	if (json_array_size(conds))
		json_object_set_new(st, "conditions", conds);
	else
		json_decref(conds);
	/* Minimum availability comes with time: look again then. */
	if (min_ready > 0 && avail < ready)
		ksync_requeue_after(s, min_ready * NS_PER_SEC);
	if (old && schema_field_equal("apps/v1", "ReplicaSet", "status", st, old)) {
		json_decref(st);
		return;
	}
	copy = json_deep_copy(rs);
	json_object_set_new(copy, "status", st);
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s/status",
		 s_(jx_str(rs, "metadata.namespace")), s_(jx_str(rs, "metadata.name")));
	ksync_update_status(s, path, copy);
	json_decref(copy);
	(void)c;
}

/* arg non-NULL for a release: as upstream's ReleasePod, a pod gone (404) or
 * recreated under the name (422, its uid differs) is released already. */
static void on_claimed(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	char why[512];
	if (status != 200 && status != 404 && !(arg && status == 422))
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

/* claimPods: adopt matching orphans, release owned pods that no longer
 * match; the active owned (or adopted) pods go into r. */
static void claim(struct replicaset *c, struct ksync *s, struct run *r)
{
	const json_t *rs = r->rs;
	struct label_selector *sel = label_selector_from_json(jx_get(rs, "spec.selector"));
	bool deleting = jx_get(rs, "metadata.deletionTimestamp") != NULL;
	json_t **all;
	size_t n = informer_indexed(c->pods, c->pods_by_ns, jx_str(rs, "metadata.namespace"), &all);

	r->pods = calloc(n + 1, sizeof(*r->pods));
	if (!r->pods)
		abort();
	for (size_t i = 0; i < n; i++) {
		json_t *pod = all[i], *copy;
		bool matches = sel && !label_selector_empty(sel) &&
			       label_selector_match(sel, jx_get(pod, "metadata.labels"));
		char path[768];

		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
			 s_(jx_str(pod, "metadata.namespace")), s_(jx_str(pod, "metadata.name")));
		if (owned_by(pod, rs)) {
			if (!matches && !deleting) {
				/* Release: drop our ownerReference. */
				copy = release_patch(rs, pod);
				ksync_call(s, "PATCH", path, SMP, copy, on_claimed, (void *)1);
				json_decref(copy);
				continue;
			}
		} else if (!controller_ref(pod) && matches && !deleting &&
			   !jx_get(pod, "metadata.deletionTimestamp")) {
			copy = adopt_patch(rs, "apps/v1", "ReplicaSet", pod);
			ksync_call(s, "PATCH", path, SMP, copy, on_claimed, NULL);
			json_decref(copy);
		} else {
			continue;
		}
		if (pod_active(pod))
			r->pods[r->npods++] = json_incref(pod);
	}
	free(all);
	label_selector_free(sel);
}

static void sync_set(void *ctl, struct ksync *s)
{
	struct replicaset *c = ctl;
	const char *key = ksync_key(s);
	json_t *rs = informer_get(c->sets, key);
	struct run *r;
	int want, diff;

	if (!rs) {
		LOG_V(4, "\"ReplicaSet has been deleted\" replicaSet=\"%s\"", key);
		expect_drop(c, key);
		return;
	}
	if (!(r = calloc(1, sizeof(*r))))
		abort();
	r->c = c;
	r->rs = json_incref(rs);
	r->batch = 1;
	ksync_set_data(s, r, run_free);
	claim(c, s, r);
	want = (int)jx_int(rs, "spec.replicas", 1);
	diff = (int)r->npods - want;
	if (!expect_satisfied(c, key) || jx_get(rs, "metadata.deletionTimestamp") || !diff) {
		write_status(c, s);
		return;
	}
	if (diff < 0) {
		struct expect *e = expect_get(c, key, true);
		int n = -diff > BURST ? BURST : -diff;
		LOG_V(2, "\"Too few replicas\" replicaSet=\"%s\" need=%d creating=%d", key, want, n);
		e->add = n;
		strv_free(&e->dels);
		e->dels = (struct strv){0};
		e->stamp = clock_mono();
		r->to_create = n;
		create_batch(c, s);
	} else {
		int n = diff > BURST ? BURST : diff;
		LOG_V(2, "\"Too many replicas\" replicaSet=\"%s\" need=%d deleting=%d", key, want, n);
		scale_down(c, s, r, n);
		ksync_then(s, write_status);
	}
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

struct replicaset *replicaset_new(struct controller_manager *m)
{
	struct replicaset *c = calloc(1, sizeof(*c));
	struct informer_handlers sh = {on_set, on_set_update, on_set_delete, c};
	struct informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "replicaset-controller");
	c->m = m;
	c->sets = cm_informer(m, RS_PATH, &sh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->pods_by_ns = cm_index(m, "/api/v1/pods", index_namespace);
	c->events = event_recorder_new(m->loop, c->rest, NAME, NULL, 3);
	c->work = keyed_new(m, "replicaset", c->rest, m->workers, sync_set, c, "sync %s failed with %s");
	LOG_INFO("\"Starting controller\" name=\"replicaset\"");
	return c;
}

void replicaset_stop(struct replicaset *c)
{
	if (!c)
		return;
	keyed_stop(c->work);
	event_recorder_free(c->events);
	c->events = NULL;
}

void replicaset_free(struct replicaset *c)
{
	const char *k;
	void *v;

	if (!c)
		return;
	replicaset_stop(c);
	keyed_free(c->work);
	for (size_t it = 0; hmap_next(&c->expect, &it, &k, &v);) {
		strv_free(&((struct expect *)v)->dels);
		free(v);
	}
	hmap_free(&c->expect);
	free(c);
}
