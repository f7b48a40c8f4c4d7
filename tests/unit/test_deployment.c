/*
 * The Deployment and ReplicaSet controllers together against a real
 * in-process API server; the test plays the kubelets (it marks every pod
 * Running and Ready) one round at a time.
 *
 * Covered: the first ReplicaSet "<deploy>-<hash>" with the hash label on
 * selector, template and labels, revision 1; a RollingUpdate with maxSurge 1
 * and maxUnavailable 0 of 4 replicas never has more than 5 pods wanted nor
 * fewer than 4 available, ends with the new set at 4 and the old one at 0
 * (revision 2), status updatedReplicas/availableReplicas and the
 * Progressing condition NewReplicaSetAvailable with upstream's message,
 * ScalingReplicaSet events in upstream's wording.
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

#define DEPLOYS "/apis/apps/v1/namespaces/default/deployments"
#define SETS "/apis/apps/v1/namespaces/default/replicasets"
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
	w->cm = testenv_cm_start(&w->env, "deploy", &w->kc, "replicaset,deployment", false, NULL);
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

static json_t *get(struct world *w, const char *path)
{
	struct testenv_result r = call(w, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	return r.body;
}

/* The kubelets: every pod not yet Ready becomes Running and Ready. */
static int make_ready(struct world *w)
{
	json_t *l = get(w, PODS), *p;
	size_t i;
	int ready = 0;
	char now[TIME_BUF], path[256];

	time_format_rfc3339(clock_now(), now);
	json_array_foreach(json_object_get(l, "items"), i, p)
	{
		struct testenv_result r;
		json_t *copy;
		if (jx_get(p, "metadata.deletionTimestamp"))
			continue;
		if (jx_condition(json_object_get(p, "status"), "Ready")) {
			ready++;
			continue;
		}
		copy = json_deep_copy(p);
		jx_set_str(copy, "status.phase", "Running");
		jx_set(copy, "status.conditions",
		       json_pack("[{s:s,s:s,s:s}]", "type", "Ready", "status", "True",
				 "lastTransitionTime", now));
		snprintf(path, sizeof(path), PODS "/%s/status", jx_str(p, "metadata.name"));
		r = call(w, "PUT", path, copy);
		json_decref(r.body);
		json_decref(copy);
	}
	json_decref(l);
	return ready;
}

/* Sum of spec.replicas over the sets, and the set with this image. */
static int wanted(struct world *w, const char *image, int *with_image, int *sets)
{
	json_t *l = get(w, SETS), *rs;
	size_t i;
	int total = 0;

	*with_image = -1;
	*sets = (int)json_array_size(json_object_get(l, "items"));
	json_array_foreach(json_object_get(l, "items"), i, rs)
	{
		int n = (int)jx_int(rs, "spec.replicas", 0);
		total += n;
		if (!strcmp(jx_str(json_array_get(jx_get(rs, "spec.template.spec.containers"), 0),
				   "image") ?: "",
			    image))
			*with_image = n;
	}
	json_decref(l);
	return total;
}

static bool rolled_out(struct world *w, int replicas)
{
	json_t *d = get(w, DEPLOYS "/web");
	const json_t *p = jx_condition(json_object_get(d, "status"), "Progressing");
	bool done = jx_int(d, "status.observedGeneration", 0) == jx_int(d, "metadata.generation", -1) &&
		    jx_int(d, "status.updatedReplicas", 0) == replicas &&
		    jx_int(d, "status.availableReplicas", 0) == replicas &&
		    jx_int(d, "status.replicas", 0) == replicas && p &&
		    !strcmp(jx_str(p, "reason") ?: "", "NewReplicaSetAvailable");
	json_decref(d);
	return done;
}

static int scaling_events(struct world *w, const char *msg)
{
	struct testenv_result r = call(w, "GET", "/api/v1/namespaces/default/events", NULL);
	json_t *ev;
	size_t i;
	int n = 0;
	json_array_foreach(json_object_get(r.body, "items"), i, ev) if (
		!strcmp(jx_str(ev, "reason") ?: "", "ScalingReplicaSet") &&
		(!msg || !strncmp(jx_str(ev, "message") ?: "", msg, strlen(msg)))) n++;
	json_decref(r.body);
	return n;
}

static void test_rolling_update(void **state)
{
	struct world *w = *state;
	json_t *d, *l, *rs;
	int with, sets, total;
	struct testenv_result r;

	d = json_pack("{s:s,s:s,s:{s:s},s:{s:i,s:{s:{s:s}},s:{s:s,s:{s:i,s:i}},"
		      "s:{s:{s:{s:s}},s:{s:[{s:s,s:s}]}}}}",
		      "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", "web",
		      "spec", "replicas", 4, "selector", "matchLabels", "app", "web", "strategy",
		      "type", "RollingUpdate", "rollingUpdate", "maxSurge", 1, "maxUnavailable", 0,
		      "template", "metadata", "labels", "app", "web", "spec", "containers", "name",
		      "nginx", "image", "nginx:1");
	r = call(w, "POST", DEPLOYS, d);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(d);
	for (int i = 0; i < 400 && !rolled_out(w, 4); i++) {
		make_ready(w);
		testenv_pump(&w->env, 2);
	}
	assert_true(rolled_out(w, 4));
	l = get(w, SETS);
	assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
	rs = json_array_get(json_object_get(l, "items"), 0);
	{
		const char *hash = jx_str(rs, "metadata.labels.pod-template-hash");
		char name[64];
		assert_non_null(hash);
		snprintf(name, sizeof(name), "web-%s", hash);
		assert_string_equal(jx_str(rs, "metadata.name"), name);
		assert_string_equal(jx_str(rs, "spec.selector.matchLabels.pod-template-hash"), hash);
		assert_string_equal(jx_str(rs, "spec.template.metadata.labels.pod-template-hash"),
				    hash);
		assert_string_equal(json_string_value(json_object_get(
					    jx_get(rs, "metadata.annotations"),
					    "deployment.kubernetes.io/revision")),
				    "1");
	}
	json_decref(l);
	assert_int_equal(scaling_events(w, "Scaled up replica set web-"), 1);

	/* A new image: surge 1, unavailable 0. */
	d = get(w, DEPLOYS "/web");
	json_object_set_new(json_array_get(jx_get(d, "spec.template.spec.containers"), 0), "image",
			    json_string("nginx:2"));
	r = call(w, "PUT", DEPLOYS "/web", d);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(d);
	for (int i = 0; i < 600 && !rolled_out(w, 4); i++) {
		int ready = make_ready(w);
		total = wanted(w, "nginx:2", &with, &sets);
		assert_true(total <= 5);  /* replicas + maxSurge */
		if (sets == 2)
			assert_true(ready >= 4 || i == 0); /* never below replicas - maxUnavailable */
		testenv_pump(&w->env, 2);
	}
	assert_true(rolled_out(w, 4));
	total = wanted(w, "nginx:2", &with, &sets);
	assert_int_equal(sets, 2);
	assert_int_equal(with, 4);
	assert_int_equal(total, 4);
	d = get(w, DEPLOYS "/web");
	assert_string_equal(json_string_value(json_object_get(jx_get(d, "metadata.annotations"),
							      "deployment.kubernetes.io/revision")),
			    "2");
	{
		const json_t *p = jx_condition(json_object_get(d, "status"), "Progressing");
		const json_t *a = jx_condition(json_object_get(d, "status"), "Available");
		assert_non_null(strstr(jx_str(p, "message"), "\" has successfully progressed."));
		assert_string_equal(jx_str(a, "reason"), "MinimumReplicasAvailable");
		assert_string_equal(jx_str(a, "message"), "Deployment has minimum availability.");
	}
	json_decref(d);
	assert_int_equal(scaling_events(w, "Scaled down replica set web-"), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rolling_update, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
