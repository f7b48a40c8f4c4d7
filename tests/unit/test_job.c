/*
 * The Job controller against a real in-process API server on the virtual
 * clock (no scheduler, no kubelet: the test plays them by writing pod
 * fields).
 *
 * Covered: pods carry the job-tracking finalizer and the generated
 * selector labels; completions 2 / parallelism 1 runs one pod at a time and
 * ends SuccessCriteriaMet, then Complete with completionTime, succeeded 2,
 * and the finalizers off; a failed pod is replaced only after upstream's
 * 10 s back-off (not at 9 s), the next after 20 s; past backoffLimit the
 * Job gets FailureTarget and Failed (BackoffLimitExceeded); a pod deleted
 * while bound (an eviction) counts as failed and is replaced while it is
 * still Terminating, its finalizer released so the kubelet's confirmation
 * can remove it; a deleted Job's pods lose their finalizers; suspending
 * deletes the pods without counting failures, resuming restarts the clock;
 * the job-controller's service account token is renewed at 80 % of its
 * 3600 s (not at 47 min, by 49) and the controller works past its expiry.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "controllers/controllers.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/metrics.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOBS "/apis/batch/v1/namespaces/default/jobs"
#define PODS "/api/v1/namespaces/default/pods"
#define FINALIZER "batch.kubernetes.io/job-tracking"

struct world {
	struct testenv env;
	struct kubeconfig kc;
	struct controller_manager *cm;
};

#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "job", &w->kc, "job", true, NULL);
	while (!controller_manager_synced(w->cm))
		testenv_pump(&w->env, 2);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	testenv_cm_stop(&w->env, &w->kc, w->cm);
	free(w);
	return 0;
}

/* Virtual time in 100 ms steps, the loop pumped at each. */
static void advance(struct world *w, int64_t ns)
{
	for (int64_t done = 0; done < ns; done += NS_PER_SEC / 10) {
		clock_advance(NS_PER_SEC / 10);
		testenv_pump(&w->env, 2);
	}
}

static void make_job(struct world *w, const char *name, int completions, int backoff_limit)
{
	json_t *job = json_pack(
		"{s:s,s:s,s:{s:s},s:{s:i,s:i,s:i,s:{s:{s:s,s:[{s:s,s:s}]}}}}", "apiVersion",
		"batch/v1", "kind", "Job", "metadata", "name", name, "spec", "completions",
		completions, "parallelism", 1, "backoffLimit", backoff_limit, "template", "spec",
		"restartPolicy", "Never", "containers", "name", "w", "image", "busybox");
	struct testenv_result r = call(w, "POST", JOBS, job);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(job);
	advance(w, NS_PER_SEC / 2);
}

static json_t *get(struct world *w, const char *path)
{
	struct testenv_result r = call(w, "GET", path, NULL);
	if (r.status == 200)
		return r.body;
	json_decref(r.body);
	return NULL;
}

static json_t *job(struct world *w, const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), JOBS "/%s", name);
	return get(w, path);
}

/* The job's pods, in creation order; the caller's. */
static json_t *pods_of(struct world *w, const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), PODS "?labelSelector=batch.kubernetes.io%%2Fjob-name%%3D%s", name);
	json_t *l = get(w, path), *out = json_incref(json_object_get(l, "items"));
	json_decref(l);
	return out;
}

static bool has_finalizer(const json_t *pod)
{
	json_t *f;
	size_t i;
	json_array_foreach(jx_get(pod, "metadata.finalizers"), i, f) if (
		!strcmp(json_string_value(f) ?: "", FINALIZER)) return true;
	return false;
}

static void set_phase(struct world *w, const json_t *pod, const char *phase)
{
	char path[256];
	json_t *p = json_deep_copy(pod);
	struct testenv_result r;
	snprintf(path, sizeof(path), PODS "/%s/status", jx_str(pod, "metadata.name"));
	jx_set_str(p, "status.phase", phase);
	json_object_del(json_object_get(p, "metadata"), "resourceVersion");
	r = call(w, "PUT", path, p);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(p);
}

static const char *cond(const json_t *j, const char *type, char *buf, size_t n)
{
	json_t *c;
	size_t i;
	buf[0] = 0;
	json_array_foreach(jx_get(j, "status.conditions"), i, c) if (!strcmp(jx_str(c, "type"), type))
		snprintf(buf, n, "%s %s %s", jx_str(c, "status"), jx_str(c, "reason"),
			 jx_str(c, "message"));
	return buf;
}

static void test_completions_one_at_a_time(void **state)
{
	struct world *w = *state;
	char buf[256];
	json_t *pods, *j;

	make_job(w, "two", 2, 6);
	pods = pods_of(w, "two");
	assert_int_equal(json_array_size(pods), 1);
	json_t *p = json_array_get(pods, 0);
	assert_true(has_finalizer(p));
	j = job(w, "two");
	assert_string_equal(jx_str(p, "metadata.labels.controller-uid") ?: "",
			    jx_str(j, "metadata.uid"));
	assert_string_equal(json_string_value(json_object_get(jx_get(j, "spec.selector.matchLabels"),
							      "batch.kubernetes.io/controller-uid")),
			    jx_str(j, "metadata.uid"));
	assert_int_equal(jx_int(j, "status.active", 0), 1);
	assert_non_null(jx_get(j, "status.startTime"));
	json_decref(j);

	set_phase(w, p, "Succeeded");
	json_decref(pods);
	advance(w, NS_PER_SEC / 2);
	pods = pods_of(w, "two");
	assert_int_equal(json_array_size(pods), 2);
	j = job(w, "two");
	assert_int_equal(jx_int(j, "status.succeeded", 0), 1);
	assert_int_equal(jx_int(j, "status.active", 0), 1);
	json_decref(j);
	for (size_t i = 0; i < 2; i++) {
		p = json_array_get(pods, i);
		if (!strcmp(jx_str(p, "status.phase") ?: "", "Succeeded"))
			assert_false(has_finalizer(p));
		else
			set_phase(w, p, "Succeeded");
	}
	json_decref(pods);
	advance(w, NS_PER_SEC / 2);
	j = job(w, "two");
	assert_int_equal(jx_int(j, "status.succeeded", 0), 2);
	assert_int_equal(jx_int(j, "status.active", 0), 0);
	assert_string_equal(cond(j, "SuccessCriteriaMet", buf, sizeof(buf)),
			    "True CompletionsReached Reached expected number of succeeded pods");
	assert_string_equal(cond(j, "Complete", buf, sizeof(buf)),
			    "True CompletionsReached Reached expected number of succeeded pods");
	assert_non_null(jx_get(j, "status.completionTime"));
	json_decref(j);
	pods = pods_of(w, "two");
	assert_int_equal(json_array_size(pods), 2);
	for (size_t i = 0; i < 2; i++)
		assert_false(has_finalizer(json_array_get(pods, i)));
	json_decref(pods);
}

static void test_failures_back_off_then_fail(void **state)
{
	struct world *w = *state;
	char buf[256];
	json_t *pods, *j;

	make_job(w, "flaky", 1, 1);
	pods = pods_of(w, "flaky");
	set_phase(w, json_array_get(pods, 0), "Failed");
	json_decref(pods);
	/* The replacement waits 10 s from the failure: not at 9 s. */
	advance(w, 9 * NS_PER_SEC);
	pods = pods_of(w, "flaky");
	assert_int_equal(json_array_size(pods), 1);
	assert_false(has_finalizer(json_array_get(pods, 0)));
	json_decref(pods);
	j = job(w, "flaky");
	assert_int_equal(jx_int(j, "status.failed", 0), 1);
	json_decref(j);
	advance(w, 2 * NS_PER_SEC);
	pods = pods_of(w, "flaky");
	assert_int_equal(json_array_size(pods), 2);
	/* The second failure passes backoffLimit 1. */
	for (size_t i = 0; i < 2; i++)
		if (has_finalizer(json_array_get(pods, i)))
			set_phase(w, json_array_get(pods, i), "Failed");
	json_decref(pods);
	advance(w, NS_PER_SEC);
	j = job(w, "flaky");
	assert_int_equal(jx_int(j, "status.failed", 0), 2);
	assert_string_equal(cond(j, "FailureTarget", buf, sizeof(buf)),
			    "True BackoffLimitExceeded Job has reached the specified backoff limit");
	assert_string_equal(cond(j, "Failed", buf, sizeof(buf)),
			    "True BackoffLimitExceeded Job has reached the specified backoff limit");
	assert_null(jx_get(j, "status.completionTime"));
	json_decref(j);
	/* No third pod, ever. */
	advance(w, 30 * NS_PER_SEC);
	pods = pods_of(w, "flaky");
	assert_int_equal(json_array_size(pods), 2);
	json_decref(pods);
}

static void test_evicted_pod_replaced_and_orphans_released(void **state)
{
	struct world *w = *state;
	char path[256];
	json_t *pods, *j;
	struct testenv_result r;

	make_job(w, "evict", 1, 6);
	pods = pods_of(w, "evict");
	json_t *p = json_deep_copy(json_array_get(pods, 0));
	json_decref(pods);
	/* The scheduler binds it; the kubelet runs it. */
	snprintf(path, sizeof(path), PODS "/%s/binding", jx_str(p, "metadata.name"));
	json_t *binding = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s}}", "apiVersion", "v1", "kind",
				    "Binding", "metadata", "name", jx_str(p, "metadata.name"),
				    "target", "kind", "Node", "name", "node-a");
	r = call(w, "POST", path, binding);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(binding);
	/* Evicted: a graceful delete; the node never confirms. */
	snprintf(path, sizeof(path), PODS "/%s", jx_str(p, "metadata.name"));
	r = call(w, "DELETE", path, NULL);
	json_decref(r.body);
	advance(w, NS_PER_SEC);
	json_t *gone = get(w, path);
	assert_non_null(gone);
	assert_non_null(jx_get(gone, "metadata.deletionTimestamp"));
	assert_false(has_finalizer(gone));
	json_decref(gone);
	j = job(w, "evict");
	assert_int_equal(jx_int(j, "status.failed", 0), 1);
	assert_int_equal(jx_int(j, "status.active", 0), 0);
	json_decref(j);
	advance(w, 10 * NS_PER_SEC);
	pods = pods_of(w, "evict");
	assert_int_equal(json_array_size(pods), 2); /* the replacement beside the Terminating one */
	json_decref(pods);

	/* The Job deleted: its pods' finalizers come off. */
	r = call(w, "DELETE", JOBS "/evict?propagationPolicy=Orphan", NULL);
	json_decref(r.body);
	advance(w, NS_PER_SEC);
	pods = pods_of(w, "evict");
	assert_int_equal(json_array_size(pods), 2);
	for (size_t i = 0; i < 2; i++)
		assert_false(has_finalizer(json_array_get(pods, i)));
	json_decref(pods);
	json_decref(p);
}

static void set_suspend(struct world *w, const char *name, bool on)
{
	char path[256];
	json_t *j = job(w, name);
	struct testenv_result r;
	snprintf(path, sizeof(path), JOBS "/%s", name);
	json_object_set_new(json_object_get(j, "spec"), "suspend", json_boolean(on));
	r = call(w, "PUT", path, j);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(j);
}

/* Suspending deletes the pods without counting them as failures (their
 * finalizer goes first); resuming starts over with a new startTime. */
static void test_suspend_is_not_a_failure(void **state)
{
	struct world *w = *state;
	char buf[256], *started;
	json_t *pods, *j;

	make_job(w, "pause", 1, 0);
	j = job(w, "pause");
	started = strdup(jx_str(j, "status.startTime"));
	json_decref(j);
	clock_advance(3 * NS_PER_SEC);
	set_suspend(w, "pause", true);
	advance(w, NS_PER_SEC);
	pods = pods_of(w, "pause");
	for (size_t i = 0; i < json_array_size(pods); i++) {
		json_t *p = json_array_get(pods, i);
		assert_non_null(jx_get(p, "metadata.deletionTimestamp"));
		assert_false(has_finalizer(p));
	}
	json_decref(pods);
	j = job(w, "pause");
	assert_int_equal(jx_int(j, "status.failed", 0), 0);
	assert_string_equal(cond(j, "Suspended", buf, sizeof(buf)), "True JobSuspended Job suspended");
	assert_string_equal(cond(j, "FailureTarget", buf, sizeof(buf)), "");
	json_decref(j);
	set_suspend(w, "pause", false);
	advance(w, NS_PER_SEC);
	j = job(w, "pause");
	assert_string_equal(cond(j, "Suspended", buf, sizeof(buf)), "False JobResumed Job resumed");
	assert_int_equal(jx_int(j, "status.active", 0), 1);
	assert_string_not_equal(jx_str(j, "status.startTime"), started);
	json_decref(j);
	free(started);
}

/* Tokens the job-controller's service account was issued (TokenRequests
 * answered 201), from the API server's apiserver_request_total. */
static int tokens_issued(void)
{
	char *text = metrics_render(metrics_default()), *line;
	int n = 0;
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "apiserver_request_total{") && strstr(line, "code=\"201\"") &&
		    strstr(line, "resource=\"serviceaccounts\"") &&
		    strstr(line, "subresource=\"token\""))
			n += atoi(strrchr(line, ' ') + 1);
	free(text);
	return n;
}

/* --use-service-account-credentials: the controller's token (3600 s) is
 * renewed when 20 % of its life is left — not at 47 minutes, by 49 — and
 * the controller keeps working across the old token's expiry. */
static void test_service_account_token_renewed_at_80_percent(void **state)
{
	struct world *w = *state;
	json_t *pods;
	int first;

	make_job(w, "before", 1, 1);
	pods = pods_of(w, "before");
	assert_int_equal(json_array_size(pods), 1); /* made as job-controller */
	json_decref(pods);
	first = tokens_issued();
	assert_true(first >= 1);
	clock_advance(47 * 60 * NS_PER_SEC);
	testenv_pump(&w->env, 5);
	assert_int_equal(tokens_issued(), first);
	clock_advance(2 * 60 * NS_PER_SEC);
	testenv_pump(&w->env, 5);
	assert_int_equal(tokens_issued(), first + 1);
	/* Past the first token's expiry (and go-jose's leeway): still working. */
	clock_advance(15 * 60 * NS_PER_SEC);
	testenv_pump(&w->env, 5);
	make_job(w, "after", 1, 1);
	pods = pods_of(w, "after");
	assert_int_equal(json_array_size(pods), 1);
	json_decref(pods);
	assert_int_equal(tokens_issued(), first + 1); /* no 401, no fetch again */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_completions_one_at_a_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures_back_off_then_fail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evicted_pod_replaced_and_orphans_released,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_suspend_is_not_a_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_service_account_token_renewed_at_80_percent,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
