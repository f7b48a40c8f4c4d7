/*
 * statefulset-controller (upstream pkg/controller/statefulset, 1.32;
 * reference/k8s-controllers-1.32.md §5): pods with stable names
 * "<set>-<ordinal>", ordinals from spec.ordinals.start.
 *
 *   identity — labels statefulset.kubernetes.io/pod-name,
 *     apps.kubernetes.io/pod-index and controller-revision-hash; hostname
 *     the pod's name, subdomain spec.serviceName.
 *   never two — a pod that still exists (Terminating included) holds its
 *     ordinal: its replacement is created only once the object is gone.
 *     OrderedReady (the default) also waits, creating one ordinal at a time
 *     and only when every lower one is Running and Ready ("StatefulSet is
 *     waiting for Pod to Terminate", V4); Parallel carries on with the
 *     others.
 *   failed pods — a Failed (or Succeeded) pod is deleted and made again.
 *   scale down — the highest ordinals first; OrderedReady one at a time,
 *     when the others are healthy.
 *   revisions — a ControllerRevision "<set>-<hash>" per template (data:
 *     the template, revision: a counter); RollingUpdate replaces pods of an
 *     older revision from the highest ordinal down to spec.updateStrategy.
 *     rollingUpdate.partition, one at a time, each after the others are
 *     Ready; OnDelete waits for the user to delete them.
 *   status — replicas, readyReplicas, availableReplicas, currentReplicas,
 *     updatedReplicas, currentRevision, updateRevision, observedGeneration.
 *   events — SuccessfulCreate "create Pod <pod> in StatefulSet <set>
 *     successful", SuccessfulDelete "delete Pod ...", FailedCreate "create
 *     Pod <pod> in StatefulSet <set> failed error: <err>".
 *
 * Persistent volume claims are not made: cube serves no
 * PersistentVolumeClaims (volumeClaimTemplates are ignored).
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

#define NAME "statefulset-controller"
#define STS_PATH "/apis/apps/v1/statefulsets"
#define CR_PATH "/apis/apps/v1/controllerrevisions"
#define REV_LABEL "controller-revision-hash"

struct statefulset {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *sets, *pods, *revisions;
	int pods_by_owner, revs_by_owner;
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

/* ---- revisions ------------------------------------------------------------------- */

/* ControllerRevision data: the part of the set a revision captures. */
static json_t *revision_data(const json_t *set)
{
	const json_t *t = jx_get(set, "spec.template");
	json_t *tmpl = t ? json_deep_copy(t) : json_object();
	json_object_set_new(tmpl, "$patch", json_string("replace"));
	return json_pack("{s:{s:o}}", "spec", "template", tmpl);
}

/* fnv-32 (upstream's revision hash is fnv-32, not 32a) over the data and
 * the collision count, in upstream's alphabet. */
static void revision_name(const json_t *set, const json_t *data, char *out, size_t n)
{
	char digits[24], hash[16];
	uint32_t h = fnv32_json(data, FNV32_OFFSET, false);

	/* The count is always hashed, 0 while status has none. */
	snprintf(digits, sizeof(digits), "%lld", (long long)jx_int(set, "status.collisionCount", 0));
	h = fnv32_bytes(digits, strlen(digits), h, false);
	hash_encode(h, hash, sizeof(hash));
	snprintf(out, n, "%.223s-%s", s_(jx_str(set, "metadata.name")), hash);
}

/* ---- pods ----------------------------------------------------------------------- */

static int ordinal_of(const json_t *set, const json_t *pod)
{
	const char *setname = s_(jx_str(set, "metadata.name")), *name = s_(jx_str(pod, "metadata.name"));
	size_t n = strlen(setname);
	char *end;
	long v;

	if (strncmp(name, setname, n) || name[n] != '-' || !name[n + 1])
		return -1;
	v = strtol(name + n + 1, &end, 10);
	return *end || v < 0 ? -1 : (int)v;
}

static bool running_ready(const json_t *pod)
{
	return !strcmp(s_(jx_str(pod, "status.phase")), "Running") && pod_ready(pod);
}

static bool finished(const json_t *pod)
{
	const char *phase = s_(jx_str(pod, "status.phase"));
	return !strcmp(phase, "Failed") || !strcmp(phase, "Succeeded");
}

static json_t *new_pod(const json_t *set, int ord, const char *revision)
{
	json_t *pod = pod_from_template(jx_get(set, "spec.template"), set, "apps/v1", "StatefulSet");
	json_t *md = json_object_get(pod, "metadata"), *labels;
	char name[320], idx[16];

	snprintf(name, sizeof(name), "%s-%d", s_(jx_str(set, "metadata.name")), ord);
	snprintf(idx, sizeof(idx), "%d", ord);
	json_object_del(md, "generateName");
	json_object_set_new(md, "name", json_string(name));
	if (!json_is_object(labels = json_object_get(md, "labels"))) {
		labels = json_object();
		json_object_set_new(md, "labels", labels);
	}
	json_object_set_new(labels, "statefulset.kubernetes.io/pod-name", json_string(name));
	json_object_set_new(labels, "apps.kubernetes.io/pod-index", json_string(idx));
	json_object_set_new(labels, REV_LABEL, json_string(revision));
	jx_set_str(pod, "spec.hostname", name);
	if (jx_str(set, "spec.serviceName") && *jx_str(set, "spec.serviceName"))
		jx_set_str(pod, "spec.subdomain", jx_str(set, "spec.serviceName"));
	return pod;
}

/* ---- one sync --------------------------------------------------------------------- */

struct run {
	json_t *set;
	char update_rev[300];
};

static void run_free(void *arg)
{
	struct run *r = arg;
	json_decref(r->set);
	free(r);
}

static void set_event(struct statefulset *c, const json_t *set, const char *type,
		      const char *reason, const char *msg)
{
	struct event_ref ref = event_ref_of(set, "apps/v1", "StatefulSet");
	event_record(c->events, &ref, type, reason, "%s", msg);
}

struct podop {
	struct statefulset *c;
	char verb[8], pod[320];
};

static void on_pod_op(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct podop *op = arg;
	struct run *r = ksync_data(s);
	char msg[1024], why[512];
	const char *set = s_(jx_str(r->set, "metadata.name"));

	if (status == 200 || status == 201 || status == 202) {
		snprintf(msg, sizeof(msg), "%s Pod %s in StatefulSet %s successful", op->verb, op->pod,
			 set);
		set_event(op->c, r->set, "Normal",
			  !strcmp(op->verb, "create") ? "SuccessfulCreate" : "SuccessfulDelete", msg);
	} else if (status != 404 && !(status == 409 && !strcmp(op->verb, "create"))) {
		api_error(why, sizeof(why), status, body, err);
		snprintf(msg, sizeof(msg), "%s Pod %s in StatefulSet %s failed error: %s", op->verb,
			 op->pod, set, why);
		set_event(op->c, r->set, "Warning",
			  !strcmp(op->verb, "create") ? "FailedCreate" : "FailedDelete", msg);
		ksync_fail(s, "%s", why);
	}
	free(op);
}

static void pod_op(struct statefulset *c, struct ksync *s, const json_t *set, const char *verb,
		   const char *pod, json_t *body)
{
	struct podop *op = calloc(1, sizeof(*op));
	char path[768];

	if (!op)
		abort();
	op->c = c;
	snprintf(op->verb, sizeof(op->verb), "%s", verb);
	snprintf(op->pod, sizeof(op->pod), "%s", pod);
	if (!strcmp(verb, "create")) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods",
			 s_(jx_str(set, "metadata.namespace")));
		ksync_call_owned(s, "POST", path, NULL, body, on_pod_op, op, free);
	} else {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
			 s_(jx_str(set, "metadata.namespace")), pod);
		ksync_call_owned(s, "DELETE", path, NULL, NULL, on_pod_op, op, free);
	}
}

static void on_written(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	char why[512];
	(void)arg;
	if (status != 200 && status != 201 && status != 409)
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

/* The update revision's name; the ControllerRevision made if missing. */
static void ensure_revision(struct statefulset *c, struct ksync *s, struct run *r)
{
	json_t *data = revision_data(r->set), **revs, *cr;
	size_t n = informer_indexed(c->revisions, c->revs_by_owner, jx_str(r->set, "metadata.uid"),
				    &revs);
	int64_t max = 0;
	bool have = false;
	char path[512];

	revision_name(r->set, data, r->update_rev, sizeof(r->update_rev));
	for (size_t i = 0; i < n; i++) {
		if (jx_int(revs[i], "revision", 0) > max)
			max = jx_int(revs[i], "revision", 0);
		if (!strcmp(s_(jx_str(revs[i], "metadata.name")), r->update_rev))
			have = true;
	}
	free(revs);
	if (have) {
		json_decref(data);
		return;
	}
	{
		const json_t *ml = jx_get(r->set, "spec.selector.matchLabels");
		const char *dash = strrchr(r->update_rev, '-');
		json_t *labels = ml ? json_deep_copy(ml) : json_object();
		json_object_set_new(labels, "controller.kubernetes.io/hash",
				    json_string(dash ? dash + 1 : r->update_rev));
		cr = json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:[o]},s:o,s:I}", "apiVersion", "apps/v1",
			       "kind", "ControllerRevision", "metadata", "name", r->update_rev,
			       "namespace", s_(jx_str(r->set, "metadata.namespace")), "labels",
			       labels, "ownerReferences",
			       owner_ref_to(r->set, "apps/v1", "StatefulSet"), "data", data,
			       "revision", (json_int_t)(max + 1));
	}
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/controllerrevisions",
		 s_(jx_str(r->set, "metadata.namespace")));
	ksync_call(s, "POST", path, NULL, cr, on_written, NULL);
	json_decref(cr);
}

static void write_status(struct ksync *s, struct run *r, json_t **by_ord, int start, int top,
			 const char *current_rev)
{
	const json_t *set = r->set, *old = json_object_get(set, "status");
	int replicas = 0, ready = 0, avail = 0, current = 0, updated = 0;
	int64_t min_ready = jx_int(set, "spec.minReadySeconds", 0), now = clock_now();
	json_t *st, *copy;
	char path[768];

	for (int o = start; o < top; o++) {
		const json_t *p = by_ord[o - start];
		const char *rev;
		if (!p)
			continue;
		replicas++;
		if (pod_ready(p)) {
			ready++;
			if (pod_available(p, min_ready, now))
				avail++;
		}
		rev = json_string_value(json_object_get(jx_get(p, "metadata.labels"), REV_LABEL));
		if (rev && !strcmp(rev, current_rev))
			current++;
		if (rev && !strcmp(rev, r->update_rev))
			updated++;
	}
	st = json_pack("{s:I,s:i,s:i,s:i,s:i,s:i,s:s,s:s,s:i}", "observedGeneration",
		       (json_int_t)jx_int(set, "metadata.generation", 0), "replicas", replicas,
		       "readyReplicas", ready, "availableReplicas", avail, "currentReplicas",
		       current, "updatedReplicas", updated, "currentRevision", current_rev,
		       "updateRevision", r->update_rev, "collisionCount",
		       (int)jx_int(set, "status.collisionCount", 0));
	if (json_object_get(old, "conditions"))
		json_object_set(st, "conditions", json_object_get(old, "conditions"));
	if (min_ready > 0 && avail < ready)
		ksync_requeue_after(s, min_ready * NS_PER_SEC);
	if (old && schema_field_equal("apps/v1", "StatefulSet", "status", st, old)) {
		json_decref(st);
		return;
	}
	copy = json_deep_copy(set);
	json_object_set_new(copy, "status", st);
	snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/statefulsets/%s/status",
		 s_(jx_str(set, "metadata.namespace")), s_(jx_str(set, "metadata.name")));
	ksync_update_status(s, path, copy);
	json_decref(copy);
}

static void sync_set(void *ctl, struct ksync *s)
{
	struct statefulset *c = ctl;
	json_t *set = informer_get(c->sets, ksync_key(s)), **owned, **by_ord;
	bool parallel, deleting, rolling;
	int start, want, top, max_ord, partition;
	size_t n;
	struct run *r;
	const char *current_rev;

	if (!set)
		return;
	if (!(r = calloc(1, sizeof(*r))))
		abort();
	r->set = json_incref(set);
	ksync_set_data(s, r, run_free);
	ensure_revision(c, s, r);
	parallel = !strcmp(s_(jx_str(set, "spec.podManagementPolicy")), "Parallel");
	rolling = strcmp(s_(jx_str(set, "spec.updateStrategy.type")), "OnDelete") != 0;
	partition = (int)jx_int(set, "spec.updateStrategy.rollingUpdate.partition", 0);
	deleting = jx_get(set, "metadata.deletionTimestamp") != NULL;
	start = (int)jx_int(set, "spec.ordinals.start", 0);
	want = (int)jx_int(set, "spec.replicas", 1);
	top = start + want;
	current_rev = jx_str(set, "status.currentRevision");
	if (!current_rev || !*current_rev)
		current_rev = r->update_rev;

	n = informer_indexed(c->pods, c->pods_by_owner, jx_str(set, "metadata.uid"), &owned);
	max_ord = top;
	/* Ordinals far beyond the range are not ours to manage (nor to size
	 * an array by). */
	for (size_t i = 0; i < n; i++)
		if (ordinal_of(set, owned[i]) >= max_ord && ordinal_of(set, owned[i]) < top + 100000)
			max_ord = ordinal_of(set, owned[i]) + 1;
	by_ord = calloc((size_t)(max_ord - start) + 1, sizeof(*by_ord));
	if (!by_ord)
		abort();
	for (size_t i = 0; i < n; i++) {
		int o = ordinal_of(set, owned[i]);
		if (o >= start && o < max_ord)
			by_ord[o - start] = owned[i];
	}
	free(owned);
	if (deleting)
		goto status;

	/* Ordinals in range: make what is missing, replace what finished. */
	for (int o = start; o < top; o++) {
		json_t *p = by_ord[o - start];
		char name[320];
		snprintf(name, sizeof(name), "%s-%d", s_(jx_str(set, "metadata.name")), o);
		if (!p) {
			json_t *pod = new_pod(set, o, r->update_rev);
			pod_op(c, s, set, "create", name, pod);
			json_decref(pod);
			if (!parallel)
				goto status; /* one at a time */
			continue;
		}
		if (jx_get(p, "metadata.deletionTimestamp")) {
			/* Still there: its ordinal stays taken. */
			LOG_V(4, "\"StatefulSet is waiting for Pod to Terminate\" statefulSet=\"%s\" "
				 "pod=\"%s/%s\"",
			      ksync_key(s), s_(jx_str(p, "metadata.namespace")), name);
			if (!parallel)
				goto status;
			continue;
		}
		if (finished(p)) {
			pod_op(c, s, set, "delete", name, NULL);
			if (!parallel)
				goto status;
			continue;
		}
		if (!parallel && !running_ready(p)) {
			LOG_V(4, "\"StatefulSet is waiting for Pod to be Running and Ready\" "
				 "statefulSet=\"%s\" pod=\"%s\"",
			      ksync_key(s), name);
			goto status;
		}
	}
	/* Condemned ordinals: the highest first. */
	for (int o = max_ord - 1; o >= top; o--) {
		json_t *p = by_ord[o - start];
		if (!p)
			continue;
		if (jx_get(p, "metadata.deletionTimestamp")) {
			LOG_V(4, "\"StatefulSet is waiting for Pod to Terminate prior to scale down\" "
				 "statefulSet=\"%s\" pod=\"%s\"",
			      ksync_key(s), s_(jx_str(p, "metadata.name")));
			if (!parallel)
				goto status;
			continue;
		}
		pod_op(c, s, set, "delete", s_(jx_str(p, "metadata.name")), NULL);
		if (!parallel)
			goto status;
	}
	/* RollingUpdate: the highest pod of an older revision, down to the
	 * partition, one at a time. */
	if (rolling) {
		/* Each replacement waits for every pod in range to be healthy, in
		 * both pod management policies. */
		for (int o = start; o < top; o++)
			if (!by_ord[o - start] || !running_ready(by_ord[o - start]))
				goto status;
		for (int o = top - 1; o >= start && o >= start + partition; o--) {
			json_t *p = by_ord[o - start];
			const char *rev = p ? json_string_value(json_object_get(
						      jx_get(p, "metadata.labels"), REV_LABEL))
					    : NULL;
			if (!p || jx_get(p, "metadata.deletionTimestamp"))
				break; /* wait for it */
			if (rev && strcmp(rev, r->update_rev)) {
				pod_op(c, s, set, "delete", s_(jx_str(p, "metadata.name")), NULL);
				break;
			}
		}
	}
status:
	{
		/* Every pod on the update revision: it becomes the current one. */
		bool all_updated = true;
		for (int o = start; o < top; o++) {
			const json_t *p = by_ord[o - start];
			const char *rev = p ? json_string_value(json_object_get(
						      jx_get(p, "metadata.labels"), REV_LABEL))
					    : NULL;
			if (!p || !rev || strcmp(rev, r->update_rev))
				all_updated = false;
		}
		write_status(s, r, by_ord, start, top, all_updated ? r->update_rev : current_rev);
	}
	free(by_ord);
}

/* ---- informers ------------------------------------------------------------------------ */

static json_t *owner_of(struct statefulset *c, const json_t *obj)
{
	const json_t *ref = controller_ref(obj);
	char key[512];
	json_t *set;
	if (!ref || strcmp(s_(jx_str(ref, "kind")), "StatefulSet"))
		return NULL;
	snprintf(key, sizeof(key), "%s/%s", s_(jx_str(obj, "metadata.namespace")),
		 s_(jx_str(ref, "name")));
	set = informer_get(c->sets, key);
	return set && !strcmp(s_(jx_str(set, "metadata.uid")), s_(jx_str(ref, "uid"))) ? set : NULL;
}

static void enqueue_owner(struct statefulset *c, const json_t *obj)
{
	json_t *set = owner_of(c, obj);
	char key[512];
	if (set)
		keyed_add(c->work, obj_key(set, key, sizeof(key)));
}

static void on_pod(void *arg, json_t *pod)
{
	enqueue_owner(arg, pod);
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	struct statefulset *c = arg;
	const json_t *set;
	(void)old;
	enqueue_owner(c, pod);
	/* Available after minReadySeconds: look again then. */
	if ((set = owner_of(c, pod)) && !pod_ready(old) && pod_ready(pod) &&
	    jx_int(set, "spec.minReadySeconds", 0) > 0) {
		char key[512];
		keyed_add_after(c->work, obj_key(set, key, sizeof(key)),
				(jx_int(set, "spec.minReadySeconds", 0) + 1) * NS_PER_SEC);
	}
}

static void on_set(void *arg, json_t *set)
{
	struct statefulset *c = arg;
	char key[512];
	keyed_add(c->work, obj_key(set, key, sizeof(key)));
}

static void on_set_update(void *arg, json_t *old, json_t *set)
{
	(void)old;
	on_set(arg, set);
}

struct statefulset *statefulset_new(struct controller_manager *m)
{
	struct statefulset *c = calloc(1, sizeof(*c));
	struct informer_handlers sh = {on_set, on_set_update, NULL, c};
	struct informer_handlers ph = {on_pod, on_pod_update, on_pod, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "statefulset-controller");
	c->m = m;
	c->sets = cm_informer(m, STS_PATH, &sh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->revisions = cm_informer(m, CR_PATH, NULL);
	c->pods_by_owner = cm_index(m, "/api/v1/pods", index_controller_uid);
	c->revs_by_owner = cm_index(m, CR_PATH, index_controller_uid);
	c->events = event_recorder_new(m->loop, c->rest, NAME, NULL, 3);
	c->work = keyed_new(m, "statefulset", c->rest, m->workers, sync_set, c, "error syncing StatefulSet %s: %s");
	LOG_INFO("\"Starting stateful set controller\"");
	return c;
}

void statefulset_stop(struct statefulset *c)
{
	if (!c)
		return;
	keyed_stop(c->work);
	event_recorder_free(c->events);
	c->events = NULL;
}

void statefulset_free(struct statefulset *c)
{
	if (!c)
		return;
	statefulset_stop(c);
	keyed_free(c->work);
	free(c);
}
