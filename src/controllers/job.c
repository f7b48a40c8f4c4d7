/*
 * job-controller (upstream pkg/controller/job, 1.32): runs a Job's pods to
 * completion — NonIndexed completion mode, podReplacementPolicy
 * TerminatingOrFailed, no podFailurePolicy.
 *
 *   pods — created from the template with the job-tracking finalizer
 *     (batch.kubernetes.io/job-tracking) and the Job as controller; at most
 *     parallelism active, and no more than completions − succeeded. A pod
 *     being deleted (an eviction, a drain) no longer counts as active: its
 *     replacement comes at once, after the failure back-off.
 *   counting — a pod that ended (Succeeded; Failed, or deleted before it
 *     succeeded) is first recorded by UID in status.uncountedTerminatedPods,
 *     then its finalizer is removed, then it moves into status.succeeded or
 *     status.failed: upstream's three steps, so a pod is counted once even
 *     when it is deleted or the controller restarts in between. Both status
 *     writes carry the resourceVersion (a stale cache fails the sync, which
 *     is retried), the second the one the first returned; a pod whose
 *     finalizer removal is in flight is not recorded again (finalizer
 *     expectations). Pods the controller deletes itself while the Job runs
 *     (suspend, too many active) lose the finalizer first and never count.
 *   back-off — new pods wait 10 s × 2^(failures−1), at most 10 min, after the
 *     last failure since the last success (upstream's DefaultJobPodFailure-
 *     BackOff and MaxJobPodFailureBackOff).
 *   the end — failed > backoffLimit (or, for OnFailure, container restarts
 *     ≥ backoffLimit): FailureTarget, active pods deleted, then Failed
 *     (BackoffLimitExceeded "Job has reached the specified backoff limit");
 *     activeDeadlineSeconds past: the same with DeadlineExceeded "Job was
 *     active longer than specified deadline"; succeeded reaching completions
 *     (or, without completions, a success), nothing active:
 *     SuccessCriteriaMet, then, nothing terminating, Complete
 *     (CompletionsReached "Reached expected number of succeeded pods") and
 *     completionTime — events Completed "Job completed", BackoffLimitExceeded,
 *     DeadlineExceeded.
 *   suspend — active pods deleted, Suspended (JobSuspended "Job suspended");
 *     resumed: Suspended False (JobResumed "Job resumed").
 *   orphans — a pod with the finalizer whose Job is gone has it removed.
 *   status — active, ready, terminating, succeeded, failed, startTime,
 *     completionTime, conditions; written when it changes.
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

#define NAME "job-controller"
#define JOBS_PATH "/apis/batch/v1/jobs"
#define FINALIZER "batch.kubernetes.io/job-tracking"
#define ORPHAN "orphan:" /* key prefix: a pod whose Job is gone */
#define BURST 500
#define EXPECTATIONS_TTL_NS (5 * 60 * NS_PER_SEC)
#define BACKOFF_NS (10 * NS_PER_SEC)
#define MAX_BACKOFF_NS (10 * 60 * NS_PER_SEC)
#define WORKERS 5 /* --concurrent-job-syncs */

/* ControlleeExpectations and finalizer expectations, per Job. */
struct jexpect {
	int add;
	struct strv dels;   /* pod keys whose deletion is not yet seen */
	struct strv rm_fin; /* pod UIDs whose finalizer removal is not yet seen */
	int64_t stamp;      /* mono, of the last creations or deletions */
};

/* Failures since the last success, for the creation back-off. */
struct jbackoff {
	int failures;
	int64_t last_failure; /* mono */
};

struct jobctl {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *jobs, *pods;
	int pods_by_owner;
	struct hmap expect;  /* job key -> struct jexpect* */
	struct hmap backoff; /* job key -> struct jbackoff* */
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

static void *map_get(struct hmap *m, const char *key, size_t size)
{
	void *v = hmap_get(m, key);
	if (!v) {
		if (!(v = calloc(1, size)))
			abort();
		hmap_put(m, key, v);
	}
	return v;
}

/* ---- pods and their Jobs ------------------------------------------------------------ */

static bool has_finalizer(const json_t *pod)
{
	json_t *f;
	size_t i;
	json_array_foreach(jx_get(pod, "metadata.finalizers"), i, f) if (
		!strcmp(s_(json_string_value(f)), FINALIZER)) return true;
	return false;
}

/* The Job controlling pod (by name and UID), or NULL; its key into key. */
static json_t *owner_of(struct jobctl *c, const json_t *pod, char *key, size_t n)
{
	const json_t *ref = controller_ref(pod);
	json_t *job;

	if (!ref || strcmp(s_(jx_str(ref, "kind")), "Job"))
		return NULL;
	snprintf(key, n, "%s/%s", s_(jx_str(pod, "metadata.namespace")), s_(jx_str(ref, "name")));
	job = informer_get(c->jobs, key);
	if (!job || strcmp(s_(jx_str(job, "metadata.uid")), s_(jx_str(ref, "uid"))))
		return NULL;
	return job;
}

static void pod_changed(struct jobctl *c, const json_t *pod, bool added, bool gone)
{
	char key[512], pkey[512];

	if (owner_of(c, pod, key, sizeof(key))) {
		struct jexpect *e = hmap_get(&c->expect, key);
		if (e && added)
			e->add--;
		if (e && (gone || jx_get(pod, "metadata.deletionTimestamp")))
			strv_remove(&e->dels, obj_key(pod, pkey, sizeof(pkey)));
		if (e && (gone || !has_finalizer(pod)))
			strv_remove(&e->rm_fin, s_(jx_str(pod, "metadata.uid")));
		keyed_add(c->work, key);
	} else if (has_finalizer(pod) &&
		   (!controller_ref(pod) || !strcmp(s_(jx_str(controller_ref(pod), "kind")), "Job"))) {
		/* Its Job is gone, or it was orphaned: the finalizer is ours to
		 * take off. */
		char okey[600];
		snprintf(okey, sizeof(okey), ORPHAN "%s", obj_key(pod, pkey, sizeof(pkey)));
		keyed_add(c->work, okey);
	}
}

static void on_pod_add(void *arg, json_t *pod)
{
	pod_changed(arg, pod, true, false);
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	if (!json_equal(jx_get(old, "metadata.resourceVersion"),
			jx_get(pod, "metadata.resourceVersion")))
		pod_changed(arg, pod, false, false);
}

static void on_pod_delete(void *arg, json_t *pod)
{
	pod_changed(arg, pod, false, true);
}

static void expect_free(void *v)
{
	struct jexpect *e = v;
	if (!e)
		return;
	strv_free(&e->dels);
	strv_free(&e->rm_fin);
	free(e);
}

static void on_job(void *arg, json_t *job)
{
	struct jobctl *c = arg;
	char key[512];
	keyed_add(c->work, obj_key(job, key, sizeof(key)));
}

static void on_job_update(void *arg, json_t *old, json_t *job)
{
	(void)old;
	on_job(arg, job);
}

static void on_job_delete(void *arg, json_t *job)
{
	struct jobctl *c = arg;
	char key[512];
	obj_key(job, key, sizeof(key));
	expect_free(hmap_del(&c->expect, key));
	free(hmap_del(&c->backoff, key));
	/* Its pods lose their finalizers through the orphan path. */
	keyed_add(c->work, key);
}

/* ---- one sync ------------------------------------------------------------------------- */

struct run {
	struct jobctl *c;
	json_t *job;
	json_t **pods;
	size_t npods;
	json_t *uncounted_ok, *uncounted_failed; /* UIDs (arrays), the new status's */
	struct strv released;                    /* UIDs whose finalizer is off */
	struct strv patch_failed;
	int created, deleted;
	char *rv;      /* the Job's resourceVersion after this sync's writes */
	bool finished; /* Complete or Failed: only releasing pods */
	bool write_failed;
};

static void run_free(void *arg)
{
	struct run *r = arg;
	for (size_t i = 0; i < r->npods; i++)
		json_decref(r->pods[i]);
	free(r->pods);
	json_decref(r->job);
	json_decref(r->uncounted_ok);
	json_decref(r->uncounted_failed);
	strv_free(&r->released);
	strv_free(&r->patch_failed);
	free(r->rv);
	free(r);
}

static void job_event(struct run *r, const char *type, const char *reason, const char *fmt,
		      const char *arg)
{
	struct event_ref ref = event_ref_of(r->job, "batch/v1", "Job");
	event_record(r->c->events, &ref, type, reason, fmt, arg);
}

static bool succeeded(const json_t *pod)
{
	return !strcmp(s_(jx_str(pod, "status.phase")), "Succeeded");
}

/* isPodFailed with podReplacementPolicy TerminatingOrFailed: deleted pods
 * never get the chance to fail, so being deleted counts. */
static bool failed(const json_t *pod)
{
	return !strcmp(s_(jx_str(pod, "status.phase")), "Failed") ||
	       (jx_get(pod, "metadata.deletionTimestamp") && !succeeded(pod));
}

static bool uid_in(const json_t *arr, const char *uid)
{
	json_t *u;
	size_t i;
	json_array_foreach(arr, i, u) if (!strcmp(s_(json_string_value(u)), uid)) return true;
	return false;
}

static const char *job_path(const struct run *r, char *buf, size_t n, const char *sub)
{
	snprintf(buf, n, "/apis/batch/v1/namespaces/%s/jobs/%s%s",
		 s_(jx_str(r->job, "metadata.namespace")), s_(jx_str(r->job, "metadata.name")),
		 sub);
	return buf;
}

static json_t *condition(const json_t *job, const char *type)
{
	return jx_condition(json_object_get(job, "status"), type);
}

static bool condition_true(const json_t *job, const char *type)
{
	json_t *c = condition(job, type);
	return c && !strcmp(s_(jx_str(c, "status")), "True");
}

/* Set a condition on status (a copy being built): true when it changed. */
static bool set_condition(json_t *status, const char *type, const char *st, const char *reason,
			  const char *message)
{
	json_t *conds = json_object_get(status, "conditions"), *c;
	char now[TIME_BUF];
	size_t i;

	time_format_rfc3339(clock_now(), now);
	if (!json_is_array(conds)) {
		conds = json_array();
		json_object_set_new(status, "conditions", conds);
	}
	json_array_foreach(conds, i, c) if (!strcmp(s_(jx_str(c, "type")), type))
	{
		if (!strcmp(s_(jx_str(c, "status")), st))
			return false;
		json_object_set_new(c, "status", json_string(st));
		json_object_set_new(c, "reason", json_string(reason));
		json_object_set_new(c, "message", json_string(message));
		json_object_set_new(c, "lastProbeTime", json_string(now));
		json_object_set_new(c, "lastTransitionTime", json_string(now));
		return true;
	}
	json_array_append_new(conds, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status",
					       st, "lastProbeTime", now, "lastTransitionTime", now,
					       "reason", reason, "message", message));
	return true;
}

/* Step 1: every ended pod that still has the finalizer is recorded by UID. */
static void record_ended(struct jobctl *c, struct ksync *s, struct run *r);
static void release_finalizers(void *ctl, struct ksync *s);
static void manage(void *ctl, struct ksync *s);

static void on_finalizer_removed(struct ksync *s, void *arg, int status, json_t *body,
				 const char *err)
{
	struct run *r = ksync_data(s); /* NULL for an orphan */
	char *uid = arg, why[512];

	if (status == 200 || status == 404) {
		if (r)
			strv_push(&r->released, uid);
	} else {
		struct jexpect *e = r ? hmap_get(&r->c->expect, ksync_key(s)) : NULL;
		if (e)
			strv_remove(&e->rm_fin, uid); /* not coming */
		if (r)
			strv_push(&r->patch_failed, uid);
		api_error(why, sizeof(why), status, body, err);
		LOG_V(2, "\"Failed to remove the job-tracking finalizer\" job=\"%s\" err=\"%s\"",
		      ksync_key(s), why);
		/* An orphan or a finished Job's pod: the sync is tried again. */
		if (!r || r->finished)
			ksync_fail(s, "%s", why);
	}
	free(uid);
}

/* A JSON patch taking the finalizer off, guarded by a test of its place;
 * uid is the pod's (malloc'd, the callback's). */
static void remove_finalizer(struct ksync *s, const json_t *pod, void *uid)
{
	struct run *r = ksync_data(s);
	if (r) {
		struct jexpect *e = map_get(&r->c->expect, ksync_key(s), sizeof(*e));
		strv_push_unique(&e->rm_fin, uid);
	}
	json_t *f, *patch = NULL;
	char path[768], at[64];
	size_t i;

	json_array_foreach(jx_get(pod, "metadata.finalizers"), i, f) if (
		!strcmp(s_(json_string_value(f)), FINALIZER))
	{
		snprintf(at, sizeof(at), "/metadata/finalizers/%zu", i);
		patch = json_pack("[{s:s,s:s,s:s},{s:s,s:s}]", "op", "test", "path", at, "value",
				  FINALIZER, "op", "remove", "path", at);
		break;
	}
	if (!patch) {
		free(uid);
		return;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
		 s_(jx_str(pod, "metadata.namespace")), s_(jx_str(pod, "metadata.name")));
	ksync_call_owned(s, "PATCH", path, "application/json-patch+json", patch,
			 on_finalizer_removed, uid, free);
	json_decref(patch);
}

static void on_status_written(struct ksync *s, void *arg, int status, json_t *body,
			      const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];

	(void)arg;
	if (status == 200) {
		free(r->rv);
		r->rv = str_dup(jx_str(body, "metadata.resourceVersion"));
		return;
	}
	r->write_failed = true;
	if (status != 404)
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
}

/* PUT .../status with the resourceVersion the Job has as far as this sync
 * knows: a conflict fails the sync, to be retried on a fresher cache. */
static void put_status(struct ksync *s, struct run *r, json_t *copy)
{
	char path[768];
	jx_set_str(copy, "metadata.resourceVersion",
		   r->rv ? r->rv : s_(jx_str(r->job, "metadata.resourceVersion")));
	ksync_call(s, "PUT", job_path(r, path, sizeof(path), "/status"), NULL, copy,
		   on_status_written, NULL);
}

static json_t *uid_list(const json_t *unc, const char *key)
{
	json_t *v = json_object_get(unc, key);
	return json_is_array(v) ? json_deep_copy(v) : json_array();
}

static bool removal_expected(const struct run *r, const char *key, const char *uid)
{
	struct jexpect *e = hmap_get(&r->c->expect, key);
	return e && strv_has(&e->rm_fin, uid);
}

static void record_ended(struct jobctl *c, struct ksync *s, struct run *r)
{
	json_t *unc = jx_get(r->job, "status.uncountedTerminatedPods");
	bool added = false;

	(void)c;
	r->uncounted_ok = uid_list(unc, "succeeded");
	r->uncounted_failed = uid_list(unc, "failed");
	for (size_t i = 0; i < r->npods; i++) {
		const json_t *pod = r->pods[i];
		const char *uid = s_(jx_str(pod, "metadata.uid"));
		if (!has_finalizer(pod) || removal_expected(r, ksync_key(s), uid) ||
		    uid_in(r->uncounted_ok, uid) || uid_in(r->uncounted_failed, uid))
			continue;
		if (succeeded(pod))
			json_array_append_new(r->uncounted_ok, json_string(uid));
		else if (failed(pod))
			json_array_append_new(r->uncounted_failed, json_string(uid));
		else
			continue;
		added = true;
	}
	if (added) {
		json_t *copy = json_deep_copy(r->job);
		jx_set(copy, "status.uncountedTerminatedPods",
		       json_pack("{s:O,s:O}", "succeeded", r->uncounted_ok, "failed",
				 r->uncounted_failed));
		put_status(s, r, copy);
		json_decref(copy);
	}
	ksync_then(s, release_finalizers);
}

/* Step 2: the recorded pods lose their finalizer. */
static void release_finalizers(void *ctl, struct ksync *s)
{
	struct run *r = ksync_data(s);

	(void)ctl;
	/* Not recorded: no finalizer may go (the pod would be lost). */
	if (r->write_failed)
		return;
	for (size_t i = 0; i < r->npods; i++) {
		const char *uid = s_(jx_str(r->pods[i], "metadata.uid"));
		if (has_finalizer(r->pods[i]) && !removal_expected(r, ksync_key(s), uid) &&
		    (uid_in(r->uncounted_ok, uid) || uid_in(r->uncounted_failed, uid)))
			remove_finalizer(s, r->pods[i], str_dup(uid));
	}
	ksync_then(s, manage);
}

/* Step 3 happens in manage: a recorded UID whose pod is released or gone
 * moves into the counts. */
static bool pod_released(const struct run *r, const char *key, const char *uid)
{
	if (strv_has(&r->released, uid))
		return true;
	if (strv_has(&r->patch_failed, uid))
		return false;
	if (removal_expected(r, key, uid))
		return true; /* taken off, the cache not there yet */
	for (size_t i = 0; i < r->npods; i++)
		if (!strcmp(s_(jx_str(r->pods[i], "metadata.uid")), uid))
			return !has_finalizer(r->pods[i]);
	return true; /* gone */
}

static int64_t move_counted(struct run *r, const char *key, json_t *uncounted)
{
	int64_t n = 0;
	for (size_t i = 0; i < json_array_size(uncounted);) {
		if (pod_released(r, key, s_(json_string_value(json_array_get(uncounted, i))))) {
			json_array_remove(uncounted, i);
			n++;
		} else {
			i++;
		}
	}
	return n;
}

static void on_created(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	struct jexpect *e = hmap_get(&r->c->expect, ksync_key(s));
	char why[512];

	(void)arg;
	if (status == 201) {
		job_event(r, "Normal", "SuccessfulCreate", "Created pod: %s",
			  s_(jx_str(body, "metadata.name")));
		return;
	}
	if (e)
		e->add--; /* never to be observed */
	r->created--;
	api_error(why, sizeof(why), status, body, err);
	if (status == 403 && strstr(why, "because it is being terminated"))
		return;
	job_event(r, "Warning", "FailedCreate", "Error creating: %s", why);
	ksync_fail(s, "%s", why);
}

static void on_deleted(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct run *r = ksync_data(s);
	char why[512];

	if (status == 200 || status == 202) {
		job_event(r, "Normal", "SuccessfulDelete", "Deleted pod: %s", arg);
	} else if (status != 404) {
		struct jexpect *e = hmap_get(&r->c->expect, ksync_key(s));
		char pkey[600];
		snprintf(pkey, sizeof(pkey), "%s/%s", s_(jx_str(r->job, "metadata.namespace")),
			 (char *)arg);
		if (e)
			strv_remove(&e->dels, pkey);
		api_error(why, sizeof(why), status, body, err);
		job_event(r, "Warning", "FailedDelete", "Error deleting: %s", why);
		ksync_fail(s, "%s", why);
	}
	free(arg);
}

/* A DELETE of the pod, expected until the informer sees it go. Where the
 * Job runs on (suspend, too many active) the finalizer goes first, as
 * upstream's deleteJobPods: such a pod is not a failure of the Job. */
static void delete_pod(struct ksync *s, struct run *r, const json_t *pod, bool keep_finalizer)
{
	struct jexpect *e = map_get(&r->c->expect, ksync_key(s), sizeof(*e));
	char path[768], pkey[512];

	if (!keep_finalizer && has_finalizer(pod))
		remove_finalizer(s, pod, str_dup(s_(jx_str(pod, "metadata.uid"))));
	strv_push_unique(&e->dels, obj_key(pod, pkey, sizeof(pkey)));
	e->stamp = clock_mono();
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
		 s_(jx_str(pod, "metadata.namespace")), s_(jx_str(pod, "metadata.name")));
	ksync_call_owned(s, "DELETE", path, NULL, NULL, on_deleted,
			 str_dup(s_(jx_str(pod, "metadata.name"))), free);
	r->deleted++;
}

/* Pods to give up first: not yet running, then not ready, then the newest. */
static int deletion_order(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	bool rx = !strcmp(s_(jx_str(x, "status.phase")), "Running"),
	     ry = !strcmp(s_(jx_str(y, "status.phase")), "Running");
	if (rx != ry)
		return rx ? 1 : -1;
	if (pod_ready(x) != pod_ready(y))
		return pod_ready(x) ? 1 : -1;
	return strcmp(s_(jx_str(y, "metadata.creationTimestamp")),
		      s_(jx_str(x, "metadata.creationTimestamp")));
}

static void create_pods(struct ksync *s, struct run *r, int n)
{
	struct jexpect *e = map_get(&r->c->expect, ksync_key(s), sizeof(*e));
	char path[512];

	if (n > BURST)
		n = BURST;
	e->add = n;
	e->stamp = clock_mono();
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods",
		 s_(jx_str(r->job, "metadata.namespace")));
	for (int i = 0; i < n; i++) {
		json_t *pod = pod_from_template(jx_get(r->job, "spec.template"), r->job, "batch/v1",
						"Job");
		json_t *fins = jx_get(pod, "metadata.finalizers");
		if (!json_is_array(fins)) {
			fins = json_array();
			jx_set(pod, "metadata.finalizers", fins);
		}
		json_array_append_new(fins, json_string(FINALIZER));
		ksync_call(s, "POST", path, NULL, pod, on_created, NULL);
		json_decref(pod);
	}
	r->created += n;
}

static bool expectations_met(struct jobctl *c, const char *key)
{
	struct jexpect *e = hmap_get(&c->expect, key);
	return !e || (e->add <= 0 && e->dels.n == 0) ||
	       clock_mono() - e->stamp > EXPECTATIONS_TTL_NS;
}

/* The creation back-off after failures; 0 when pods may be created now. */
static int64_t backoff_left(struct jobctl *c, const char *key)
{
	struct jbackoff *b = hmap_get(&c->backoff, key);
	int64_t delay;
	if (!b || b->failures <= 0)
		return 0;
	delay = BACKOFF_NS;
	for (int i = 1; i < b->failures && delay < MAX_BACKOFF_NS; i++)
		delay *= 2;
	if (delay > MAX_BACKOFF_NS)
		delay = MAX_BACKOFF_NS;
	delay -= clock_mono() - b->last_failure;
	return delay > 0 ? delay : 0;
}

/* pastBackoffLimitOnFailure: container restarts of active pods count. */
static bool past_restart_limit(const struct run *r, int64_t limit)
{
	int64_t restarts = 0;
	json_t *cs;
	size_t j;

	if (strcmp(s_(jx_str(r->job, "spec.template.spec.restartPolicy")), "OnFailure"))
		return false;
	for (size_t i = 0; i < r->npods; i++) {
		if (!pod_active(r->pods[i]))
			continue;
		json_array_foreach(jx_get(r->pods[i], "status.containerStatuses"), j, cs)
			restarts += jx_int(cs, "restartCount", 0);
	}
	return limit == 0 ? restarts > 0 : restarts >= limit;
}

/* Step 3, the decisions, the status. */
/* manageJob for NonIndexed: pods created or deleted towards the active
 * count wanted; the active count afterwards. */
static int64_t manage_pods(struct jobctl *c, struct ksync *s, struct run *r, json_t **act,
			   size_t nact, int64_t ok, int64_t *terminating)
{
	const json_t *job = r->job;
	const char *key = ksync_key(s);
	int64_t active = (int64_t)nact, want = jx_int(job, "spec.parallelism", 1);
	json_t *comp = jx_get(job, "spec.completions");

	if (!expectations_met(c, key))
		return active;
	if (json_is_integer(comp) && json_integer_value(comp) - ok < want)
		want = json_integer_value(comp) - ok;
	if (!json_is_integer(comp) && ok > 0)
		want = active; /* a success: no new pods, the rest finish */
	if (want < 0)
		want = 0;
	if (active < want) {
		int64_t wait = backoff_left(c, key);
		if (wait > 0) {
			LOG_V(4, "\"Job pods creation delayed by backoff\" job=\"%s\" wait=%.3fs", key,
			      (double)wait / NS_PER_SEC);
			ksync_requeue_after(s, wait);
			return active;
		}
		create_pods(s, r, (int)(want - active));
		return active + r->created;
	}
	if (active > want) {
		qsort(act, nact, sizeof(*act), deletion_order);
		for (int64_t i = 0; i < active - want && i < BURST; i++)
			delete_pod(s, r, act[i], false);
		*terminating += active - want;
		return want;
	}
	return active;
}

/* Step 3, the decisions, the status. */
static void manage(void *ctl, struct ksync *s)
{
	struct jobctl *c = ctl;
	struct run *r = ksync_data(s);
	const char *key = ksync_key(s);
	const json_t *job = r->job;
	json_t *copy = json_deep_copy(job), *st = json_object_get(copy, "status");
	int64_t new_ok, new_failed, ok, bad, active = 0, ready = 0, terminating = 0;
	int64_t limit = jx_int(job, "spec.backoffLimit", 6);
	bool suspended = json_is_true(jx_get(job, "spec.suspend"));
	bool finishing = condition_true(job, "SuccessCriteriaMet") ||
			 condition_true(job, "FailureTarget");
	json_t *comp = jx_get(job, "spec.completions");
	char now[TIME_BUF];
	json_t **act = calloc(r->npods + 1, sizeof(*act));
	size_t nact = 0;

	if (!act)
		abort();
	if (!json_is_object(st)) {
		st = json_object();
		json_object_set_new(copy, "status", st);
	}
	time_format_rfc3339(clock_now(), now);
	new_ok = move_counted(r, key, r->uncounted_ok);
	new_failed = move_counted(r, key, r->uncounted_failed);
	ok = jx_int(job, "status.succeeded", 0) + new_ok;
	bad = jx_int(job, "status.failed", 0) + new_failed;
	if (new_ok || new_failed) {
		struct jbackoff *b = map_get(&c->backoff, key, sizeof(*b));
		if (new_ok)
			b->failures = 0;
		b->failures += (int)new_failed;
		if (new_failed)
			b->last_failure = clock_mono();
	}
	for (size_t i = 0; i < r->npods; i++) {
		const json_t *pod = r->pods[i];
		if (pod_active(pod)) {
			act[nact++] = r->pods[i];
			ready += pod_ready(pod);
		} else if (jx_get(pod, "metadata.deletionTimestamp") && !succeeded(pod) &&
			   strcmp(s_(jx_str(pod, "status.phase")), "Failed")) {
			terminating++;
		}
	}
	active = (int64_t)nact;
	/* Started now; and again when resumed, as upstream. */
	if (!suspended && (!jx_get(job, "status.startTime") || condition_true(job, "Suspended")))
		json_object_set_new(st, "startTime", json_string(now));

	/* Failure first, as upstream. */
	if (!finishing && !suspended) {
		int64_t start, ads = jx_int(job, "spec.activeDeadlineSeconds", -1);
		const char *stamp = jx_str(st, "startTime");
		if (bad > limit || past_restart_limit(r, limit)) {
			set_condition(st, "FailureTarget", "True", "BackoffLimitExceeded",
				      "Job has reached the specified backoff limit");
			finishing = true;
		} else if (ads >= 0 && stamp && time_parse_rfc3339(stamp, &start) == 0) {
			int64_t left = start + ads * NS_PER_SEC - clock_now();
			if (left <= 0) {
				set_condition(st, "FailureTarget", "True", "DeadlineExceeded",
					      "Job was active longer than specified deadline");
				finishing = true;
			} else {
				ksync_requeue_after(s, left);
			}
		}
	}
	bool failing = condition_true(copy, "FailureTarget");

	if (finishing) {
		/* deleteActivePods: they keep their finalizer and count as failed. */
		for (size_t i = 0; i < nact; i++)
			delete_pod(s, r, act[i], true);
		terminating += active;
		active = ready = 0;
	} else if (suspended) {
		for (size_t i = 0; i < nact; i++)
			delete_pod(s, r, act[i], false);
		terminating += active;
		active = ready = 0;
	} else {
		int64_t before = active;
		active = manage_pods(c, s, r, act, nact, ok, &terminating);
		if (active < before)
			ready = ready < active ? ready : active;
		/* Success once nothing is left active. */
		bool done = json_is_integer(comp) ? ok >= json_integer_value(comp) : ok > 0;
		if (done && active == 0) {
			set_condition(st, "SuccessCriteriaMet", "True", "CompletionsReached",
				      "Reached expected number of succeeded pods");
			finishing = true;
		}
	}
	/* The end proper, once no pod of the Job is left running. */
	if (finishing && active == 0 && terminating == 0 && json_array_size(r->uncounted_ok) == 0 &&
	    json_array_size(r->uncounted_failed) == 0) {
		if (failing) {
			json_t *ft = jx_condition(st, "FailureTarget");
			char reason[64], msg[160];
			snprintf(reason, sizeof(reason), "%s", s_(jx_str(ft, "reason")));
			snprintf(msg, sizeof(msg), "%s", s_(jx_str(ft, "message")));
			if (set_condition(st, "Failed", "True", reason, msg))
				job_event(r, "Warning", reason, "%s", msg);
		} else if (set_condition(st, "Complete", "True", "CompletionsReached",
					 "Reached expected number of succeeded pods")) {
			json_object_set_new(st, "completionTime", json_string(now));
			job_event(r, "Normal", "Completed", "%s", "Job completed");
		}
	}
	if (suspended && set_condition(st, "Suspended", "True", "JobSuspended", "Job suspended"))
		job_event(r, "Normal", "Suspended", "%s", "Job suspended");
	if (!suspended && condition_true(job, "Suspended") &&
	    set_condition(st, "Suspended", "False", "JobResumed", "Job resumed"))
		job_event(r, "Normal", "Resumed", "%s", "Job resumed");

	json_object_set_new(st, "active", json_integer(active));
	json_object_set_new(st, "ready", json_integer(ready));
	json_object_set_new(st, "terminating", json_integer(terminating));
	json_object_set_new(st, "succeeded", json_integer(ok));
	json_object_set_new(st, "failed", json_integer(bad));
	json_object_set_new(st, "uncountedTerminatedPods",
			    json_pack("{s:O,s:O}", "succeeded", r->uncounted_ok, "failed",
				      r->uncounted_failed));
	/* As the API encodes them: active, succeeded and failed are omitted at
	 * 0, ready and terminating are not; uncountedTerminatedPods is {}. */
	static const char *const omitted[] = {"active", "succeeded", "failed"};
	for (size_t i = 0; i < 3; i++)
		if (!json_integer_value(json_object_get(st, omitted[i])))
			json_object_del(st, omitted[i]);
	json_t *unc = json_object_get(st, "uncountedTerminatedPods");
	if (!json_array_size(json_object_get(unc, "succeeded")))
		json_object_del(unc, "succeeded");
	if (!json_array_size(json_object_get(unc, "failed")))
		json_object_del(unc, "failed");
	if (!json_equal(st, json_object_get(job, "status")))
		put_status(s, r, copy);
	json_decref(copy);
	free(act);
}

/* A pod whose Job is gone keeps no finalizer of ours. */
static void sync_orphan(struct jobctl *c, struct ksync *s, const char *pkey)
{
	json_t *pod = informer_get(c->pods, pkey);
	char key[512];
	if (!pod || !has_finalizer(pod) || owner_of(c, pod, key, sizeof(key)))
		return;
	remove_finalizer(s, pod, str_dup(s_(jx_str(pod, "metadata.uid"))));
}

static void sync_job(void *ctl, struct ksync *s)
{
	struct jobctl *c = ctl;
	const char *key = ksync_key(s);
	json_t *job, **pods;
	struct run *r;
	size_t n;

	if (!strncmp(key, ORPHAN, strlen(ORPHAN))) {
		sync_orphan(c, s, key + strlen(ORPHAN));
		return;
	}
	if (!(job = informer_get(c->jobs, key))) {
		LOG_V(4, "\"Job has been deleted\" key=\"%s\"", key);
		return;
	}
	if (!(r = calloc(1, sizeof(*r))))
		abort();
	r->c = c;
	r->job = json_incref(job);
	n = informer_indexed(c->pods, c->pods_by_owner, s_(jx_str(job, "metadata.uid")), &pods);
	if (!(r->pods = calloc(n + 1, sizeof(*r->pods))))
		abort();
	for (size_t i = 0; i < n; i++)
		r->pods[r->npods++] = json_incref(pods[i]);
	free(pods);
	ksync_set_data(s, r, run_free);
	/* A finished Job only lets its pods go. */
	if (condition_true(job, "Complete") || condition_true(job, "Failed")) {
		r->finished = true;
		for (size_t i = 0; i < r->npods; i++)
			if (has_finalizer(r->pods[i]))
				remove_finalizer(s, r->pods[i],
						 str_dup(s_(jx_str(r->pods[i], "metadata.uid"))));
		return;
	}
	record_ended(c, s, r);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

struct jobctl *jobctl_new(struct controller_manager *m)
{
	struct jobctl *c = calloc(1, sizeof(*c));
	struct informer_handlers jh = {on_job, on_job_update, on_job_delete, c};
	struct informer_handlers ph = {on_pod_add, on_pod_update, on_pod_delete, c};

	if (!c)
		abort();
	c->rest = cm_client(m, "job-controller");
	c->m = m;
	c->jobs = cm_informer(m, JOBS_PATH, &jh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->pods_by_owner = cm_index(m, "/api/v1/pods", index_controller_uid);
	c->events = event_recorder_new(m->loop, c->rest, NAME, NULL, 3);
	c->work = keyed_new(m, "job", c->rest, WORKERS, sync_job, c, "syncing job: %s: %s");
	LOG_INFO("\"Starting job controller\"");
	return c;
}

void jobctl_stop(struct jobctl *c)
{
	if (!c)
		return;
	keyed_stop(c->work);
	event_recorder_free(c->events);
	c->events = NULL;
}

void jobctl_free(struct jobctl *c)
{
	if (!c)
		return;
	jobctl_stop(c);
	keyed_free(c->work);
	hmap_free_values(&c->expect, expect_free);
	hmap_free_values(&c->backoff, free);
	free(c);
}
