/*
 * deployment-controller (upstream pkg/controller/deployment, 1.32;
 * reference/k8s-controllers-1.32.md §4): a Deployment's pods through
 * ReplicaSets, one per pod template.
 *
 *   new ReplicaSet — the owned one whose template equals the Deployment's
 *     (ignoring pod-template-hash), else a new one named
 *     "<deployment>-<hash>": the hash label on its selector, template and
 *     labels; annotations deployment.kubernetes.io/revision (the old
 *     maximum + 1, also set on the Deployment), desired-replicas and
 *     max-replicas, and the Deployment's own annotations.
 *   RollingUpdate — maxSurge (rounded up) and maxUnavailable (rounded
 *     down; 1 when both are 0) of spec.replicas: the new set grows to at
 *     most replicas + maxSurge pods in all, old sets shrink while at least
 *     replicas − maxUnavailable pods stay available — their unhealthy pods
 *     first, oldest sets first. Recreate: old sets to 0, then, once their
 *     pods are gone, the new one to replicas.
 *   scaling — a change of spec.replicas alone resizes the active sets in
 *     proportion (the rest to the largest), without a rollout.
 *   paused — scaling only; Progressing Unknown DeploymentPaused.
 *   status — replicas, updatedReplicas, readyReplicas, availableReplicas,
 *     unavailableReplicas, observedGeneration; conditions Available
 *     (MinimumReplicasAvailable / MinimumReplicasUnavailable) and
 *     Progressing (NewReplicaSetCreated, FoundNewReplicaSet,
 *     ReplicaSetUpdated, NewReplicaSetAvailable, ProgressDeadlineExceeded)
 *     with upstream's messages, so `kubectl rollout status` works.
 *   history — old sets scaled to 0 beyond revisionHistoryLimit are deleted.
 *   events — Normal ScalingReplicaSet "Scaled up replica set <rs> from <a>
 *     to <b>" / "Scaled down ...".
 *
 * The hash is fnv-32a over the template's canonical JSON (plus
 * collisionCount), encoded with upstream's alphabet; upstream hashes Go's
 * spew dump of the struct, so the names have upstream's form but not its
 * exact value for the same template.
 *
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

#include "api/schema.h"
#include "api/selector.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "deployment-controller"
#define DEPLOY_PATH "/apis/apps/v1/deployments"
#define RS_PATH "/apis/apps/v1/replicasets"
#define HASH_LABEL "pod-template-hash"
#define A_REVISION "deployment.kubernetes.io/revision"
#define A_DESIRED "deployment.kubernetes.io/desired-replicas"
#define A_MAX "deployment.kubernetes.io/max-replicas"
#define A_HISTORY "deployment.kubernetes.io/revision-history"

struct deployment {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *deploys, *sets, *pods;
	int sets_by_ns, pods_by_owner;
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

static int32_t replicas_of(const json_t *obj)
{
	return (int32_t)jx_int(obj, "spec.replicas", 1);
}

/* ---- the template hash ------------------------------------------------------------ */

static void template_hash(const json_t *tmpl, const json_t *collisions, char *out, size_t n)
{
	uint32_t h = fnv32_json(tmpl, FNV32_OFFSET, true);
	if (json_is_integer(collisions)) {
		uint32_t c = (uint32_t)json_integer_value(collisions);
		unsigned char b[8] = {c & 0xff, (c >> 8) & 0xff, (c >> 16) & 0xff, c >> 24, 0, 0, 0, 0};
		h = fnv32_bytes(b, sizeof(b), h, true);
	}
	hash_encode(h, out, n);
}


/* The template without the hash label, for comparison (EqualIgnoreHash). */
static json_t *without_hash(const json_t *tmpl)
{
	json_t *t = json_deep_copy(tmpl ? tmpl : json_null());
	/* Go decodes "creationTimestamp": null (which kubectl sends in a
	 * template) to the zero value, the same as no field at all. */
	jx_prune_nulls(t);
	json_t *labels = jx_get(t, "metadata.labels");
	json_object_del(labels, HASH_LABEL);
	if (labels && !json_object_size(labels))
		json_object_del(json_object_get(t, "metadata"), "labels");
	return t;
}

/* The Deployment's annotations a set carries (all but its own bookkeeping). */
static bool copied_annotation(const char *k)
{
	return strcmp(k, "kubectl.kubernetes.io/last-applied-configuration") &&
	       strcmp(k, A_REVISION) && strcmp(k, A_DESIRED) && strcmp(k, A_MAX) &&
	       strcmp(k, A_HISTORY);
}

/* ---- intstr ------------------------------------------------------------------------- */

/* GetScaledValueFromIntOrPercent */
static int32_t scaled(const json_t *v, int32_t total, bool round_up, int32_t dflt)
{
	const char *s;
	double pct;
	if (json_is_integer(v))
		return (int32_t)json_integer_value(v);
	if (!(s = json_string_value(v)) || !*s)
		return dflt;
	pct = strtod(s, NULL) * total / 100.0;
	return (int32_t)(round_up ? (pct - (int32_t)pct > 0 ? (int32_t)pct + 1 : (int32_t)pct)
				  : (int32_t)pct);
}

/* ResolveFenceposts: maxSurge, maxUnavailable. */
static void fenceposts(const json_t *d, int32_t *surge, int32_t *unavail)
{
	const json_t *ru = jx_get(d, "spec.strategy.rollingUpdate");
	int32_t n = replicas_of(d);
	if (strcmp(s_(jx_str(d, "spec.strategy.type")), "RollingUpdate")) {
		*surge = *unavail = 0;
		return;
	}
	*surge = scaled(json_object_get(ru, "maxSurge"), n, true, (n + 3) / 4);
	*unavail = scaled(json_object_get(ru, "maxUnavailable"), n, false, n / 4);
	if (*surge == 0 && *unavail == 0)
		*unavail = 1;
	if (*unavail > n)
		*unavail = n;
}

/* ---- one sync ------------------------------------------------------------------------- */

struct run {
	struct deployment *c;
	json_t *d;        /* the informer's copy (a reference) */
	json_t **rss;     /* owned sets (references), oldest first */
	size_t n;
	int32_t *orig;    /* each set's spec.replicas as claimed (what is stored) */
	json_t *new_rs;   /* a reference, or NULL */
	json_t *created;  /* a set this sync created (body of the answer) */
	bool scaled;      /* some set was resized */
	bool stale;       /* the Deployment itself was written: its status waits */
};

static void run_free(void *arg)
{
	struct run *r = arg;
	for (size_t i = 0; i < r->n; i++)
		json_decref(r->rss[i]);
	free(r->rss);
	free(r->orig);
	json_decref(r->new_rs);
	json_decref(r->created);
	json_decref(r->d);
	free(r);
}

static int by_age(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(s_(jx_str(x, "metadata.creationTimestamp")),
		       s_(jx_str(y, "metadata.creationTimestamp")));
	return c ? c : strcmp(s_(jx_str(x, "metadata.name")), s_(jx_str(y, "metadata.name")));
}

static int64_t revision(const json_t *rs)
{
	const char *v = json_string_value(json_object_get(jx_get(rs, "metadata.annotations"),
							  A_REVISION));
	return v ? strtoll(v, NULL, 10) : 0;
}

static void on_written(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	char why[512];
	(void)arg;
	if (status != 200 && status != 201 && status != 404)
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

static void deploy_event(struct run *r, const char *fmt, const char *rs, int64_t a, int64_t b)
{
	struct event_ref ref = event_ref_of(r->d, "apps/v1", "Deployment");
	char msg[600];
	snprintf(msg, sizeof(msg), fmt, rs, (long long)a, (long long)b);
	event_record(r->c->events, &ref, "Normal", "ScalingReplicaSet", "%s", msg);
}

/* scaleReplicaSet, in two steps: the sync decides the sizes on its copies
 * (several steps may resize one set), then flush_scales writes each changed
 * set once. */
static void scale_rs(struct ksync *s, struct run *r, json_t *rs, int32_t to)
{
	(void)s;
	if (replicas_of(rs) != to)
		r->scaled = true;
	jx_set(rs, "spec.replicas", json_integer(to));
}

struct scaled {
	struct run *r;
	char name[300];
	int32_t from, to;
};

static void on_scaled(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct scaled *sc = arg;
	struct run *r = ksync_data(s);
	char why[512];

	if (status == 200) {
		if (sc->from != sc->to)
			deploy_event(r, sc->from < sc->to ? "Scaled up replica set %s from %lld to %lld"
							  : "Scaled down replica set %s from %lld to %lld",
				     sc->name, sc->from, sc->to);
	} else if (status != 404) {
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
	}
	free(sc);
}

static void flush_scales(struct ksync *s, struct run *r)
{
	int32_t surge, unavail;
	char want_desired[32], want_max[32];

	fenceposts(r->d, &surge, &unavail);
	snprintf(want_desired, sizeof(want_desired), "%d", replicas_of(r->d));
	snprintf(want_max, sizeof(want_max), "%d", replicas_of(r->d) + surge);
	for (size_t i = 0; i < r->n; i++) {
		json_t *rs = r->rss[i], *ann = jx_get(rs, "metadata.annotations");
		int32_t to = replicas_of(rs);
		struct scaled *sc;
		char path[768];
		bool same_ann;

		/* The size annotations follow the Deployment on the sets with pods. */
		same_ann = !to ||
			   (!strcmp(s_(json_string_value(json_object_get(ann, A_DESIRED))),
				    want_desired) &&
			    !strcmp(s_(json_string_value(json_object_get(ann, A_MAX))), want_max));
		if (to == r->orig[i] && same_ann)
			continue;
		if (to && !same_ann) {
			if (!json_is_object(ann)) {
				ann = json_object();
				jx_set(rs, "metadata.annotations", ann);
			}
			json_object_set_new(ann, A_DESIRED, json_string(want_desired));
			json_object_set_new(ann, A_MAX, json_string(want_max));
		}
		if (!(sc = calloc(1, sizeof(*sc))))
			abort();
		sc->r = r;
		snprintf(sc->name, sizeof(sc->name), "%s", s_(jx_str(rs, "metadata.name")));
		sc->from = r->orig[i];
		sc->to = to;
		r->orig[i] = to;
		snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s",
			 s_(jx_str(rs, "metadata.namespace")), sc->name);
		ksync_call_owned(s, "PUT", path, NULL, rs, on_scaled, sc, free);
	}
}

static int32_t sum(struct run *r, const char *field, bool olds_only)
{
	int64_t total = 0;
	for (size_t i = 0; i < r->n; i++)
		if (!olds_only || r->rss[i] != r->new_rs)
			total += jx_int(r->rss[i], field, !strcmp(field, "spec.replicas") ? 1 : 0);
	return (int32_t)total;
}

/* ---- the new ReplicaSet ------------------------------------------------------------------ */

/* The set that took our name: the same template and owner is ours; any
 * other means a hash collision, and collisionCount goes up. */
static void on_existing(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	const json_t *ref = controller_ref(body);
	json_t *mine, *theirs, *copy;
	char why[512], path[768];
	bool same;

	(void)arg;
	if (status != 200) {
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
		return;
	}
	mine = without_hash(jx_get(r->d, "spec.template"));
	theirs = without_hash(jx_get(body, "spec.template"));
	same = ref && !strcmp(s_(jx_str(ref, "uid")), s_(jx_str(r->d, "metadata.uid"))) &&
	       json_equal(mine, theirs);
	json_decref(mine);
	json_decref(theirs);
	if (same) {
		r->created = json_incref(body);
		return;
	}
	copy = json_deep_copy(r->d);
	jx_set(copy, "status.collisionCount",
	       json_integer(jx_int(r->d, "status.collisionCount", 0) + 1));
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/deployments/%s/status",
		 s_(jx_str(r->d, "metadata.namespace")), s_(jx_str(r->d, "metadata.name")));
	ksync_call(s, "PUT", path, NULL, copy, on_written, NULL);
	json_decref(copy);
	r->stale = true;
	ksync_fail(s, "replicaset %s already exists with a different template",
		   s_(jx_str(body, "metadata.name")));
}

static void on_created(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];
	json_t *rs = arg;

	if (status == 409) {
		/* A set of that name exists: ours (made by an earlier sync the
		 * informer has not shown yet), or one with another template. */
		char path[768];
		snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s",
			 s_(jx_str(rs, "metadata.namespace")), s_(jx_str(rs, "metadata.name")));
		json_decref(rs);
		ksync_call(s, "GET", path, NULL, NULL, on_existing, NULL);
		return;
	}
	json_decref(rs);
	if (status == 201) {
		r->created = json_incref(body);
		if (replicas_of(body) > 0)
			deploy_event(r, "Scaled up replica set %s from %lld to %lld",
				     s_(jx_str(body, "metadata.name")), 0, replicas_of(body));
		return;
	}
	ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

static int32_t new_rs_replicas(struct run *r, int32_t current_new)
{
	int32_t surge, unavail, want = replicas_of(r->d), total, up;
	if (strcmp(s_(jx_str(r->d, "spec.strategy.type")), "RollingUpdate"))
		return want; /* Recreate: all at once (once the old pods are gone) */
	fenceposts(r->d, &surge, &unavail);
	total = sum(r, "spec.replicas", false);
	if (total >= want + surge)
		return current_new;
	up = want + surge - total;
	if (up > want - current_new)
		up = want - current_new;
	return current_new + up;
}

static void create_new_rs(struct ksync *s, struct run *r, int64_t rev, int32_t replicas)
{
	const json_t *d = r->d;
	char hash[16], name[300], buf[32], path[512];
	json_t *tmpl = json_deep_copy(jx_get(d, "spec.template")), *rs, *ann;
	int32_t surge, unavail;
	const char *k;
	json_t *v;

	template_hash(tmpl, jx_get(d, "status.collisionCount"), hash, sizeof(hash));
	if (!json_is_object(jx_get(tmpl, "metadata.labels")))
		jx_set(tmpl, "metadata.labels", json_object());
	json_object_set_new(jx_get(tmpl, "metadata.labels"), HASH_LABEL, json_string(hash));
	snprintf(name, sizeof(name), "%s-%s", s_(jx_str(d, "metadata.name")), hash);
	rs = json_pack("{s:s,s:s,s:{s:s,s:s,s:O,s:{},s:[o]},s:{s:i,s:i,s:O,s:o}}", "apiVersion",
		       "apps/v1", "kind", "ReplicaSet", "metadata", "name", name, "namespace",
		       s_(jx_str(d, "metadata.namespace")), "labels",
		       jx_get(tmpl, "metadata.labels"), "annotations", "ownerReferences",
		       owner_ref_to(d, "apps/v1", "Deployment"), "spec", "replicas", 0,
		       "minReadySeconds", (int)jx_int(d, "spec.minReadySeconds", 0), "selector",
		       jx_get(d, "spec.selector"), "template", tmpl);
	{
		json_t *sel = json_deep_copy(jx_get(d, "spec.selector"));
		if (!json_is_object(json_object_get(sel, "matchLabels")))
			json_object_set_new(sel, "matchLabels", json_object());
		json_object_set_new(json_object_get(sel, "matchLabels"), HASH_LABEL,
				    json_string(hash));
		jx_set(rs, "spec.selector", sel);
	}
	ann = jx_get(rs, "metadata.annotations");
	json_object_foreach(jx_get(d, "metadata.annotations"), k, v) if (copied_annotation(k))
		json_object_set(ann, k, v);
	snprintf(buf, sizeof(buf), "%lld", (long long)rev);
	json_object_set_new(ann, A_REVISION, json_string(buf));
	fenceposts(d, &surge, &unavail);
	snprintf(buf, sizeof(buf), "%d", replicas_of(d));
	json_object_set_new(ann, A_DESIRED, json_string(buf));
	snprintf(buf, sizeof(buf), "%d", replicas_of(d) + surge);
	json_object_set_new(ann, A_MAX, json_string(buf));
	jx_set(rs, "spec.replicas", json_integer(replicas));
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets",
		 s_(jx_str(d, "metadata.namespace")));
	ksync_call_owned(s, "POST", path, NULL, rs, on_created, json_incref(rs),
			 (void (*)(void *))json_decref);
	json_decref(rs);
}

/* ---- rollouts ------------------------------------------------------------------------------- */

/* reconcileOldReplicaSets for RollingUpdate. */
static void scale_down_olds(struct ksync *s, struct run *r)
{
	int32_t surge, unavail, want = replicas_of(r->d), min_avail, all, new_unavail, max_down;
	int32_t total_down, done = 0, available;

	fenceposts(r->d, &surge, &unavail);
	if (sum(r, "spec.replicas", true) == 0)
		return;
	all = sum(r, "spec.replicas", false);
	min_avail = want - unavail;
	new_unavail = r->new_rs ? replicas_of(r->new_rs) -
					  (int32_t)jx_int(r->new_rs, "status.availableReplicas", 0)
				: 0;
	max_down = all - min_avail - new_unavail;
	if (max_down <= 0)
		return;
	/* cleanupUnhealthyReplicas: unavailable old pods go first. */
	for (size_t i = 0; i < r->n && done < max_down; i++) {
		json_t *rs = r->rss[i];
		int32_t spec = replicas_of(rs), bad;
		if (rs == r->new_rs || spec == 0)
			continue;
		bad = spec - (int32_t)jx_int(rs, "status.availableReplicas", 0);
		if (bad <= 0)
			continue;
		if (bad > max_down - done)
			bad = max_down - done;
		scale_rs(s, r, rs, spec - bad);
		done += bad;
	}
	/* scaleDownOldReplicaSetsForRollingUpdate */
	available = sum(r, "status.availableReplicas", false);
	if (available <= min_avail)
		return;
	total_down = available - min_avail;
	for (size_t i = 0, down = 0; i < r->n && (int32_t)down < total_down; i++) {
		json_t *rs = r->rss[i];
		int32_t spec = replicas_of(rs), by;
		if (rs == r->new_rs || spec == 0)
			continue;
		by = spec < total_down - (int32_t)down ? spec : total_down - (int32_t)down;
		scale_rs(s, r, rs, spec - by);
		down += (size_t)by;
	}
}

static void rollout_rolling(struct ksync *s, struct run *r)
{
	if (r->new_rs)
		scale_rs(s, r, r->new_rs, new_rs_replicas(r, replicas_of(r->new_rs)));
	scale_down_olds(s, r);
}

/* oldPodsRunning: a pod of an old set that is not Succeeded or Failed —
 * Terminating ones included. */
static bool old_pods_running(struct run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		json_t **pods;
		size_t n;
		bool running = false;
		if (r->rss[i] == r->new_rs)
			continue;
		n = informer_indexed(r->c->pods, r->c->pods_by_owner,
				     jx_str(r->rss[i], "metadata.uid"), &pods);
		for (size_t k = 0; k < n && !running; k++) {
			const char *phase = s_(jx_str(pods[k], "status.phase"));
			running = strcmp(phase, "Succeeded") && strcmp(phase, "Failed");
		}
		free(pods);
		if (running)
			return true;
	}
	return false;
}

/* rolloutRecreate: every old set to 0; the new one only once their pods
 * are gone. True when the new set may grow (or be made). */
static bool rollout_recreate(struct ksync *s, struct run *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->rss[i] != r->new_rs && replicas_of(r->rss[i]))
			scale_rs(s, r, r->rss[i], 0);
	if (r->scaled || old_pods_running(r))
		return false;
	if (r->new_rs)
		scale_rs(s, r, r->new_rs, replicas_of(r->d));
	return true;
}

/* A change of spec.replicas only: resize the active sets in proportion. */
static bool scaling_event(struct run *r)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%d", replicas_of(r->d));
	for (size_t i = 0; i < r->n; i++) {
		const char *want = json_string_value(
			json_object_get(jx_get(r->rss[i], "metadata.annotations"), A_DESIRED));
		if (replicas_of(r->rss[i]) > 0 && want && strcmp(want, buf))
			return true;
	}
	return false;
}

static void scale_proportionally(struct ksync *s, struct run *r)
{
	int32_t surge, unavail, allowed, total = sum(r, "spec.replicas", false), left, given = 0;
	size_t largest = 0, active = 0;

	fenceposts(r->d, &surge, &unavail);
	for (size_t i = 0; i < r->n; i++)
		if (replicas_of(r->rss[i]) > 0) {
			active++;
			if (replicas_of(r->rss[i]) > replicas_of(r->rss[largest]) ||
			    !replicas_of(r->rss[largest]))
				largest = i;
		}
	if (active <= 1) {
		/* FindActiveOrLatest: the one active set, else the new one, else
		 * the newest old one. */
		json_t *only = active == 1 ? r->rss[largest]
				: r->new_rs ? r->new_rs
				: r->n	    ? r->rss[r->n - 1]
					    : NULL;
		if (only)
			scale_rs(s, r, only, replicas_of(r->d));
		return;
	}
	allowed = replicas_of(r->d) + surge;
	left = allowed - total;
	if (!left)
		return;
	for (size_t i = 0; i < r->n; i++) {
		int32_t spec = replicas_of(r->rss[i]), share;
		if (!spec || i == largest)
			continue;
		share = (int32_t)((int64_t)left * spec / (total ? total : 1));
		given += share;
		scale_rs(s, r, r->rss[i], spec + share);
	}
	scale_rs(s, r, r->rss[largest], replicas_of(r->rss[largest]) + left - given);
}

/* ---- status ----------------------------------------------------------------------------------- */

/* SetDeploymentCondition: a condition with the same status and reason is
 * left as it was; otherwise lastTransitionTime moves only with the status.
 * touch (the Progressing ReplicaSetUpdated case): a new lastUpdateTime even
 * when nothing else changes, as upstream records each sign of progress. */
static json_t *condition_set(const char *type, const char *status, const char *reason,
			     const char *msg, const json_t *old, bool touch)
{
	char now[TIME_BUF];
	const char *since = NULL;

	if (!touch && old && !strcmp(s_(jx_str(old, "status")), status) &&
	    !strcmp(s_(jx_str(old, "reason")), reason))
		return json_deep_copy(old);
	time_format_rfc3339(clock_now(), now);
	if (old && !strcmp(s_(jx_str(old, "status")), status))
		since = jx_str(old, "lastTransitionTime");
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status, "reason",
			 reason, "message", msg, "lastUpdateTime", now, "lastTransitionTime",
			 since ? since : now);
}

static json_t *condition_new(const char *type, const char *status, const char *reason,
			     const char *msg, const json_t *old)
{
	return condition_set(type, status, reason, msg, old, false);
}

static void set_condition(json_t *conds, json_t *c)
{
	json_t *x;
	size_t i;
	json_array_foreach(conds, i, x) if (!strcmp(s_(jx_str(x, "type")), jx_str(c, "type")))
	{
		json_array_set_new(conds, i, c);
		return;
	}
	json_array_append_new(conds, c);
}

static void write_status(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	const json_t *d = r->d, *old = json_object_get(d, "status");
	json_t *st, *conds, *copy;
	const json_t *rs = r->created ? r->created : r->new_rs;
	const json_t *prog = jx_condition(old, "Progressing");
	int32_t surge, unavail, want = replicas_of(d), total, avail, ready, updated;
	char msg[512], path[768];
	const char *rs_name = s_(jx_str(rs, "metadata.name"));

	(void)ctl;
	fenceposts(d, &surge, &unavail);
	total = sum(r, "status.replicas", false);
	avail = sum(r, "status.availableReplicas", false);
	ready = sum(r, "status.readyReplicas", false);
	updated = rs ? (int32_t)jx_int(rs, "status.replicas", 0) : 0;
	st = json_pack("{s:I,s:i,s:i,s:i,s:i}", "observedGeneration",
		       (json_int_t)jx_int(d, "metadata.generation", 0), "replicas", total,
		       "updatedReplicas", updated, "readyReplicas", ready, "availableReplicas",
		       avail);
	/* unavailable: the pods wanted (spec.replicas of the sets) not available */
	if (sum(r, "spec.replicas", false) - avail > 0)
		json_object_set_new(st, "unavailableReplicas",
				    json_integer(sum(r, "spec.replicas", false) - avail));
	if (json_is_integer(jx_get(old, "collisionCount")))
		json_object_set(st, "collisionCount", jx_get(old, "collisionCount"));
	conds = json_is_array(json_object_get(old, "conditions"))
			? json_deep_copy(json_object_get(old, "conditions"))
			: json_array();
	if (avail >= want - unavail)
		set_condition(conds, condition_new("Available", "True", "MinimumReplicasAvailable",
						   "Deployment has minimum availability.",
						   jx_condition(old, "Available")));
	else
		set_condition(conds, condition_new("Available", "False",
						   "MinimumReplicasUnavailable",
						   "Deployment does not have minimum availability.",
						   jx_condition(old, "Available")));
	/* checkPausedConditions, then syncRolloutStatus (only with a deadline,
	 * and not once the rollout has completed: a resync or a plain scale of
	 * a finished rollout estimates no progress). */
	if (jx_get(d, "spec.progressDeadlineSeconds") && json_is_true(jx_get(d, "spec.paused"))) {
		if (!prog || strcmp(s_(jx_str(prog, "reason")), "ProgressDeadlineExceeded"))
			set_condition(conds, condition_new("Progressing", "Unknown", "DeploymentPaused",
							   "Deployment is paused", prog));
	} else if (jx_get(d, "spec.progressDeadlineSeconds") && prog &&
		   !strcmp(s_(jx_str(prog, "reason")), "DeploymentPaused")) {
		set_condition(conds, condition_new("Progressing", "Unknown", "DeploymentResumed",
						   "Deployment is resumed", prog));
	} else if (jx_get(d, "spec.progressDeadlineSeconds") &&
		   !(total == updated && prog &&
		     !strcmp(s_(jx_str(prog, "reason")), "NewReplicaSetAvailable"))) {
		bool complete = rs && updated == want && total == want && avail == want;
		if (complete) {
			snprintf(msg, sizeof(msg), "ReplicaSet \"%s\" has successfully progressed.",
				 rs_name);
			set_condition(conds, condition_new("Progressing", "True",
							   "NewReplicaSetAvailable", msg, prog));
		} else if (r->created) {
			snprintf(msg, sizeof(msg), "Created new replica set \"%s\"", rs_name);
			set_condition(conds, condition_new("Progressing", "True",
							   "NewReplicaSetCreated", msg, prog));
		} else if (!prog && rs) {
			snprintf(msg, sizeof(msg), "Found new replica set \"%s\"", rs_name);
			set_condition(conds, condition_new("Progressing", "True",
							   "FoundNewReplicaSet", msg, prog));
		} else if (rs && (r->scaled ||
				  updated > jx_int(old, "updatedReplicas", 0) ||
				  ready > jx_int(old, "readyReplicas", 0) ||
				  avail > jx_int(old, "availableReplicas", 0) ||
				  !strcmp(s_(jx_str(prog, "reason")), "DeploymentResumed"))) {
			snprintf(msg, sizeof(msg), "ReplicaSet \"%s\" is progressing.", rs_name);
			set_condition(conds, condition_set("Progressing", "True", "ReplicaSetUpdated",
							   msg, prog, true));
		} else if (rs && prog && strcmp(s_(jx_str(prog, "reason")), "NewReplicaSetAvailable")) {
			int64_t since, deadline = jx_int(d, "spec.progressDeadlineSeconds", 600);
			if (time_parse_rfc3339(jx_str(prog, "lastUpdateTime"), &since) == 0 &&
			    clock_now() > since + deadline * NS_PER_SEC) {
				snprintf(msg, sizeof(msg),
					 "ReplicaSet \"%s\" has timed out progressing.", rs_name);
				set_condition(conds, condition_new("Progressing", "False",
								   "ProgressDeadlineExceeded",
								   msg, prog));
			} else {
				/* Look again when the deadline would pass. */
				ksync_requeue_after(s, deadline * NS_PER_SEC);
			}
		}
	}
	json_object_set_new(st, "conditions", conds);
	if (old && schema_field_equal("apps/v1", "Deployment", "status", st, old)) {
		json_decref(st);
		return;
	}
	copy = json_deep_copy(d);
	json_object_set_new(copy, "status", st);
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/deployments/%s/status",
		 s_(jx_str(d, "metadata.namespace")), s_(jx_str(d, "metadata.name")));
	ksync_update_status(s, path, copy);
	json_decref(copy);
}

/* cleanupDeployment: old sets with nothing in them beyond the limit. */
static void cleanup(struct ksync *s, struct run *r)
{
	int64_t limit = jx_int(r->d, "spec.revisionHistoryLimit", 10);
	size_t olds = 0, drop;

	for (size_t i = 0; i < r->n; i++)
		if (r->rss[i] != r->new_rs)
			olds++;
	if ((int64_t)olds <= limit)
		return;
	drop = olds - (size_t)limit;
	for (size_t i = 0; i < r->n && drop; i++) {
		json_t *rs = r->rss[i];
		char path[768];
		if (rs == r->new_rs || replicas_of(rs) || jx_int(rs, "status.replicas", 0) ||
		    jx_get(rs, "metadata.deletionTimestamp"))
			continue;
		LOG_V(4, "\"Trying to cleanup replica set for deployment\" replicaSet=\"%s/%s\"",
		      s_(jx_str(rs, "metadata.namespace")), s_(jx_str(rs, "metadata.name")));
		snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s",
			 s_(jx_str(rs, "metadata.namespace")), s_(jx_str(rs, "metadata.name")));
		ksync_call(s, "DELETE", path, NULL, NULL, on_written, NULL);
		drop--;
	}
}

/* ---- the sync ------------------------------------------------------------------------------------ */

/* The owned sets (adopting matching orphans), oldest first, and the new one. */
static void claim_sets(struct deployment *c, struct ksync *s, struct run *r)
{
	const json_t *d = r->d;
	struct label_selector *sel = label_selector_from_json(jx_get(d, "spec.selector"));
	json_t *want = without_hash(jx_get(d, "spec.template")), **all;
	size_t n = informer_indexed(c->sets, c->sets_by_ns, jx_str(d, "metadata.namespace"), &all);

	r->rss = calloc(n + 1, sizeof(*r->rss));
	if (!r->rss)
		abort();
	for (size_t i = 0; i < n; i++) {
		const json_t *ref = controller_ref(all[i]);
		bool mine = ref && !strcmp(s_(jx_str(ref, "uid")), s_(jx_str(d, "metadata.uid")));
		if (!mine && !ref && sel && !label_selector_empty(sel) &&
		    label_selector_match(sel, jx_get(all[i], "metadata.labels")) &&
		    !jx_get(d, "metadata.deletionTimestamp")) {
			json_t *patch = adopt_patch(d, "apps/v1", "Deployment", all[i]);
			char path[768];
			snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s",
				 s_(jx_str(all[i], "metadata.namespace")),
				 s_(jx_str(all[i], "metadata.name")));
			ksync_call(s, "PATCH", path, SMP, patch, on_written, NULL);
			json_decref(patch);
			mine = true;
		}
		if (mine)
			r->rss[r->n++] = json_deep_copy(all[i]); /* resized as the sync goes */
	}
	qsort(r->rss, r->n, sizeof(*r->rss), by_age);
	if (!(r->orig = calloc(r->n + 1, sizeof(*r->orig))))
		abort();
	for (size_t i = 0; i < r->n; i++)
		r->orig[i] = replicas_of(r->rss[i]);
	for (size_t i = 0; i < r->n; i++) {
		json_t *t = without_hash(jx_get(r->rss[i], "spec.template"));
		if (!r->new_rs && json_equal(t, want))
			r->new_rs = json_incref(r->rss[i]);
		json_decref(t);
	}
	json_decref(want);
	free(all);
	label_selector_free(sel);
}

/* The Deployment's revision annotation follows its new set's. */
static void sync_revision(struct ksync *s, struct run *r, int64_t rev)
{
	char buf[32], path[768];
	json_t *copy;
	snprintf(buf, sizeof(buf), "%lld", (long long)rev);
	if (!strcmp(s_(json_string_value(json_object_get(jx_get(r->d, "metadata.annotations"),
							 A_REVISION))),
		    buf))
		return;
	copy = json_deep_copy(r->d);
	if (!json_is_object(jx_get(copy, "metadata.annotations")))
		jx_set(copy, "metadata.annotations", json_object());
	json_object_set_new(jx_get(copy, "metadata.annotations"), A_REVISION, json_string(buf));
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/deployments/%s",
		 s_(jx_str(r->d, "metadata.namespace")), s_(jx_str(r->d, "metadata.name")));
	ksync_call(s, "PUT", path, NULL, copy, on_written, NULL);
	json_decref(copy);
	/* A status write now would conflict with that update: the next sync,
	 * which the update triggers, writes it. */
	r->stale = true;
}

/* getNewReplicaSet on an existing set: minReadySeconds and the copied
 * annotations (kubernetes.io/change-cause) follow the Deployment. True when
 * the set was updated. */
static bool new_rs_stale(struct ksync *s, struct run *r)
{
	const json_t *dann = jx_get(r->d, "metadata.annotations");
	json_t *copy, *ann;
	const char *k;
	json_t *v;
	bool changed = false;
	char path[768];

	copy = json_deep_copy(r->new_rs);
	if (!json_is_object(ann = jx_get(copy, "metadata.annotations"))) {
		ann = json_object();
		jx_set(copy, "metadata.annotations", ann);
	}
	json_object_foreach((json_t *)dann, k, v) if (copied_annotation(k) &&
						      !json_equal(json_object_get(ann, k), v))
	{
		json_object_set(ann, k, v);
		changed = true;
	}
	if (jx_int(copy, "spec.minReadySeconds", 0) != jx_int(r->d, "spec.minReadySeconds", 0)) {
		jx_set(copy, "spec.minReadySeconds",
		       json_integer(jx_int(r->d, "spec.minReadySeconds", 0)));
		changed = true;
	}
	if (changed) {
		snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s",
			 s_(jx_str(copy, "metadata.namespace")), s_(jx_str(copy, "metadata.name")));
		ksync_call(s, "PUT", path, NULL, copy, on_written, NULL);
	}
	json_decref(copy);
	return changed;
}

static void after_create(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);
	if (!r->stale)
		write_status(ctl, s);
}

static void sync_deployment(void *ctl, struct ksync *s)
{
	struct deployment *c = ctl;
	json_t *d = informer_get(c->deploys, ksync_key(s));
	struct run *r;
	int64_t max_old = 0, rev;

	if (!d) {
		LOG_V(4, "\"Deployment has been deleted\" deployment=\"%s\"", ksync_key(s));
		return;
	}
	if (jx_get(d, "metadata.deletionTimestamp"))
		return;
	if (!(r = calloc(1, sizeof(*r))))
		abort();
	r->c = c;
	r->d = json_incref(d);
	ksync_set_data(s, r, run_free);
	claim_sets(c, s, r);
	for (size_t i = 0; i < r->n; i++)
		if (r->rss[i] != r->new_rs && revision(r->rss[i]) > max_old)
			max_old = revision(r->rss[i]);
	rev = r->new_rs && revision(r->new_rs) > max_old ? revision(r->new_rs) : max_old + 1;

	if (json_is_true(jx_get(d, "spec.paused")) || scaling_event(r)) {
		scale_proportionally(s, r);
		flush_scales(s, r);
		write_status(c, s);
		return;
	}
	if (!r->new_rs) {
		if (strcmp(s_(jx_str(d, "spec.strategy.type")), "RollingUpdate")) {
			if (!rollout_recreate(s, r)) {
				flush_scales(s, r); /* the new set waits for the old pods */
				write_status(c, s);
				return;
			}
			create_new_rs(s, r, rev, replicas_of(d));
		} else {
			create_new_rs(s, r, rev, new_rs_replicas(r, 0));
		}
		flush_scales(s, r);
		sync_revision(s, r, rev);
		ksync_then(s, after_create);
		return;
	}
	if (new_rs_stale(s, r))
		return; /* its update brings us back */
	if (revision(r->new_rs) != rev) {
		/* An old template again (rollback): it becomes the newest revision. */
		json_t *copy = json_deep_copy(r->new_rs), *ann;
		char buf[32], path[768], *hist;
		struct strv h = {0};
		if (!json_is_object(ann = jx_get(copy, "metadata.annotations"))) {
			ann = json_object();
			jx_set(copy, "metadata.annotations", ann);
		}
		if (json_string_value(json_object_get(ann, A_HISTORY)))
			strv_push(&h, json_string_value(json_object_get(ann, A_HISTORY)));
		strv_pushf(&h, "%lld", (long long)revision(r->new_rs));
		hist = strv_join(&h, ",");
		json_object_set_new(ann, A_HISTORY, json_string(hist));
		free(hist);
		strv_free(&h);
		snprintf(buf, sizeof(buf), "%lld", (long long)rev);
		json_object_set_new(ann, A_REVISION, json_string(buf));
		snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets/%s",
			 s_(jx_str(copy, "metadata.namespace")), s_(jx_str(copy, "metadata.name")));
		ksync_call(s, "PUT", path, NULL, copy, on_written, NULL);
		json_decref(copy);
		sync_revision(s, r, rev);
		return; /* the update brings us back */
	}
	sync_revision(s, r, rev);
	if (r->stale)
		return;
	if (strcmp(s_(jx_str(d, "spec.strategy.type")), "RollingUpdate"))
		rollout_recreate(s, r);
	else
		rollout_rolling(s, r);
	flush_scales(s, r);
	if (!r->scaled)
		cleanup(s, r);
	write_status(c, s);
}

/* ---- informers ----------------------------------------------------------------------------- */

static void enqueue(struct deployment *c, const json_t *d)
{
	char key[512];
	keyed_add(c->work, obj_key(d, key, sizeof(key)));
}

static void on_deploy(void *arg, json_t *d)
{
	enqueue(arg, d);
}

static void on_deploy_update(void *arg, json_t *old, json_t *d)
{
	(void)old;
	enqueue(arg, d);
}

/* A set's owner (by name and UID), or NULL. */
static json_t *owner_of(struct deployment *c, const json_t *rs)
{
	const json_t *ref = controller_ref(rs);
	char key[512];
	json_t *d;
	if (!ref || strcmp(s_(jx_str(ref, "kind")), "Deployment"))
		return NULL;
	snprintf(key, sizeof(key), "%s/%s", s_(jx_str(rs, "metadata.namespace")),
		 s_(jx_str(ref, "name")));
	d = informer_get(c->deploys, key);
	return d && !strcmp(s_(jx_str(d, "metadata.uid")), s_(jx_str(ref, "uid"))) ? d : NULL;
}

static void on_set(void *arg, json_t *rs)
{
	struct deployment *c = arg;
	json_t *d = owner_of(c, rs);
	if (d) {
		enqueue(c, d);
		return;
	}
	if (!controller_ref(rs)) {
		/* An orphan: the Deployments whose selector matches may adopt it. */
		json_t **all;
		size_t n = informer_list(c->deploys, &all);
		for (size_t i = 0; i < n; i++) {
			struct label_selector *sel;
			if (strcmp(s_(jx_str(all[i], "metadata.namespace")),
				   s_(jx_str(rs, "metadata.namespace"))))
				continue;
			sel = label_selector_from_json(jx_get(all[i], "spec.selector"));
			if (sel && !label_selector_empty(sel) &&
			    label_selector_match(sel, jx_get(rs, "metadata.labels")))
				enqueue(c, all[i]);
			label_selector_free(sel);
		}
		free(all);
	}
}

static void on_set_update(void *arg, json_t *old, json_t *rs)
{
	struct deployment *c = arg;
	json_t *d = owner_of(c, old);
	if (d && d != owner_of(c, rs))
		enqueue(c, d);
	on_set(arg, rs);
}

/* deletePod: a Recreate rollout waits for the old pods to be gone. */
static void on_pod_delete(void *arg, json_t *pod)
{
	struct deployment *c = arg;
	const json_t *ref = controller_ref(pod);
	json_t *rs, *d;
	char key[512];

	if (!ref || strcmp(s_(jx_str(ref, "kind")), "ReplicaSet"))
		return;
	snprintf(key, sizeof(key), "%s/%s", s_(jx_str(pod, "metadata.namespace")),
		 s_(jx_str(ref, "name")));
	if ((rs = informer_get(c->sets, key)) && (d = owner_of(c, rs)) &&
	    strcmp(s_(jx_str(d, "spec.strategy.type")), "RollingUpdate"))
		enqueue(c, d);
}

static void on_set_delete(void *arg, json_t *rs)
{
	struct deployment *c = arg;
	json_t *d = owner_of(c, rs);
	if (d)
		enqueue(c, d);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

struct deployment *deployment_new(struct controller_manager *m)
{
	struct deployment *c = calloc(1, sizeof(*c));
	struct informer_handlers dh = {on_deploy, on_deploy_update, NULL, c};
	struct informer_handlers sh = {on_set, on_set_update, on_set_delete, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "deployment-controller");
	c->m = m;
	c->deploys = cm_informer(m, DEPLOY_PATH, &dh);
	c->sets = cm_informer(m, RS_PATH, &sh);
	c->sets_by_ns = cm_index(m, RS_PATH, index_namespace);
	{
		struct informer_handlers ph = {NULL, NULL, on_pod_delete, c};
		c->pods = cm_informer(m, "/api/v1/pods", &ph);
	}
	c->pods_by_owner = cm_index(m, "/api/v1/pods", index_controller_uid);
	c->events = event_recorder_new(m->loop, c->rest, NAME, NULL, 3);
	c->work = keyed_new(m, "deployment", c->rest, m->workers, sync_deployment, c, "error syncing deployment %s: %s");
	LOG_INFO("\"Starting controller\" controller=\"deployment\"");
	return c;
}

void deployment_stop(struct deployment *c)
{
	if (!c)
		return;
	keyed_stop(c->work);
	event_recorder_free(c->events);
	c->events = NULL;
}

void deployment_free(struct deployment *c)
{
	if (!c)
		return;
	deployment_stop(c);
	keyed_free(c->work);
	free(c);
}
