/*
 * The ReplicaSet controller against a real in-process API server (no
 * scheduler, no kubelet: the test plays them by writing pod fields).
 *
 * Covered: an orphan matching the selector is adopted, so only the missing
 * pods are created (generateName "<rs>-", the controller ownerReference,
 * the template's labels; SuccessfulCreate "Created pod: <name>"); status
 * replicas / readyReplicas / availableReplicas / observedGeneration; scale
 * down deletes the unassigned and not-Ready pods first (SuccessfulDelete);
 * a pod being deleted gracefully no longer counts, so its replacement is
 * created while it is still there — more pods than replicas, the seeds'
 * over-repair.
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
#include "base/log.h"
#include "base/timeutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RS "/apis/apps/v1/namespaces/default/replicasets"
#define PODS "/api/v1/namespaces/default/pods"

struct world {
	struct testenv env;
	struct kubeconfig kc;
	struct controller_manager *cm;
};

#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "rs", &w->kc, "replicaset", false, NULL);
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

/* Pump until cond holds, at most ~5 s of real time. */
#define settle_until(w, cond)                                                                      \
	do {                                                                                       \
		for (int i_ = 0; i_ < 250 && !(cond); i_++)                                        \
			testenv_pump(&(w)->env, 2);                                                \
	} while (0)

static json_t *list_pods(struct world *w)
{
	struct testenv_result r = call(w, "GET", PODS, NULL);
	assert_int_equal(r.status, 200);
	return r.body;
}

static size_t count_pods(struct world *w, bool live_only)
{
	json_t *l = list_pods(w), *p;
	size_t i, n = 0;
	json_array_foreach(json_object_get(l, "items"), i, p) if (
		!live_only || !jx_get(p, "metadata.deletionTimestamp")) n++;
	json_decref(l);
	return n;
}

static int events(struct world *w, const char *reason)
{
	struct testenv_result r = call(w, "GET", "/api/v1/namespaces/default/events", NULL);
	json_t *ev;
	size_t i;
	int n = 0;
	json_array_foreach(json_object_get(r.body, "items"), i, ev) if (
		!strcmp(jx_str(ev, "reason") ?: "", reason))
	{
		assert_string_equal(jx_str(ev, "source.component"), "replicaset-controller");
		assert_string_equal(jx_str(ev, "involvedObject.kind"), "ReplicaSet");
		n++;
	}
	json_decref(r.body);
	return n;
}

static json_t *get(struct world *w, const char *path)
{
	struct testenv_result r = call(w, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	return r.body;
}

static void put_status(struct world *w, const char *name, const char *node, bool ready)
{
	char path[256], now[TIME_BUF];
	json_t *p;
	struct testenv_result r;

	snprintf(path, sizeof(path), PODS "/%s", name);
	p = get(w, path);
	if (node) {
		json_t *b = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s}}", "apiVersion", "v1", "kind",
				      "Binding", "metadata", "name", name, "target", "kind", "Node",
				      "name", node);
		char bpath[300];
		snprintf(bpath, sizeof(bpath), PODS "/%s/binding", name);
		r = call(w, "POST", bpath, b);
		assert_int_equal(r.status, 201);
		json_decref(r.body);
		json_decref(b);
		json_decref(p);
		p = get(w, path);
	}
	time_format_rfc3339(clock_now(), now);
	jx_set_str(p, "status.phase", "Running");
	jx_set(p, "status.conditions",
	       json_pack("[{s:s,s:s,s:s}]", "type", "Ready", "status", ready ? "True" : "False",
			 "lastTransitionTime", now));
	snprintf(path, sizeof(path), PODS "/%s/status", name);
	r = call(w, "PUT", path, p);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(p);
}

static void set_replicas(struct world *w, int n)
{
	json_t *rs = get(w, RS "/web");
	struct testenv_result r;
	jx_set(rs, "spec.replicas", json_integer(n));
	r = call(w, "PUT", RS "/web", rs);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(rs);
}

static void test_adopt_create_scale_and_over_repair(void **state)
{
	struct world *w = *state;
	json_t *orphan, *rs, *pods, *p;
	size_t i;
	int owned = 0;
	char keep[128] = "";

	orphan = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1",
			   "kind", "Pod", "metadata", "name", "stray", "labels", "app", "web",
			   "spec", "containers", "name", "c", "image", "nginx");
	json_decref(call(w, "POST", PODS, orphan).body);
	json_decref(orphan);
	/* The controller's pod informer has seen it before the set comes (they
	 * are separate watches: otherwise the set may create 3 and delete one). */
	for (int k = 0; k < 20; k++)
		testenv_pump(&w->env, 2);
	rs = json_pack("{s:s,s:s,s:{s:s},s:{s:i,s:{s:{s:s}},s:{s:{s:{s:s,s:s}},s:{s:[{s:s,s:s}]}}}}",
		       "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name", "web",
		       "spec", "replicas", 3, "selector", "matchLabels", "app", "web", "template",
		       "metadata", "labels", "app", "web", "tier", "front", "spec", "containers",
		       "name", "nginx", "image", "nginx");
	{
		struct testenv_result r = call(w, "POST", RS, rs);
		assert_int_equal(r.status, 201);
		json_decref(r.body);
	}
	json_decref(rs);
	settle_until(w, count_pods(w, false) == 3 && events(w, "SuccessfulCreate") == 2);
	assert_int_equal(count_pods(w, false), 3);
	assert_int_equal(events(w, "SuccessfulCreate"), 2);

	rs = get(w, RS "/web");
	pods = list_pods(w);
	json_array_foreach(json_object_get(pods, "items"), i, p)
	{
		const json_t *ref = json_array_get(jx_get(p, "metadata.ownerReferences"), 0);
		assert_non_null(ref);
		assert_string_equal(jx_str(ref, "uid"), jx_str(rs, "metadata.uid"));
		assert_string_equal(jx_str(ref, "kind"), "ReplicaSet");
		assert_true(json_is_true(json_object_get(ref, "controller")));
		if (strcmp(jx_str(p, "metadata.name"), "stray")) {
			assert_true(!strncmp(jx_str(p, "metadata.name"), "web-", 4));
			assert_string_equal(jx_str(p, "metadata.labels.tier"), "front");
			owned++;
		}
	}
	assert_int_equal(owned, 2);
	json_decref(rs);

	/* One pod scheduled and Ready: status follows, and scale-down keeps it. */
	snprintf(keep, sizeof(keep), "%s",
		 jx_str(json_array_get(json_object_get(pods, "items"), 0), "metadata.name"));
	json_decref(pods);
	put_status(w, keep, "n1", true);
	rs = NULL;
	for (int k = 0; k < 250; k++) {
		json_decref(rs);
		rs = get(w, RS "/web");
		if (jx_int(rs, "status.readyReplicas", 0) == 1)
			break;
		testenv_pump(&w->env, 2);
	}
	assert_int_equal(jx_int(rs, "status.replicas", 0), 3);
	assert_int_equal(jx_int(rs, "status.readyReplicas", 0), 1);
	assert_int_equal(jx_int(rs, "status.availableReplicas", 0), 1);
	assert_int_equal(jx_int(rs, "status.fullyLabeledReplicas", -1), 2); /* stray lacks tier */
	assert_int_equal(jx_int(rs, "status.observedGeneration", 0),
			 jx_int(rs, "metadata.generation", -1));
	json_decref(rs);

	set_replicas(w, 1);
	settle_until(w, count_pods(w, false) == 1);
	assert_int_equal(count_pods(w, false), 1);
	{
		char path[200];
		snprintf(path, sizeof(path), PODS "/%s", keep);
		json_decref(get(w, path)); /* the Ready, assigned one is the one left */
	}
	assert_int_equal(events(w, "SuccessfulDelete"), 2);

	/* It is deleted gracefully (bound, as by taint eviction): it stays,
	 * Terminating, and a replacement comes at once. */
	{
		char path[200];
		struct testenv_result r;
		snprintf(path, sizeof(path), PODS "/%s", keep);
		r = call(w, "DELETE", path, NULL);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
	}
	settle_until(w, count_pods(w, false) == 2);
	assert_int_equal(count_pods(w, false), 2);
	assert_int_equal(count_pods(w, true), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_adopt_create_scale_and_over_repair, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
