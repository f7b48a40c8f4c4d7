/*
 * The StatefulSet, Endpoints and EndpointSlice controllers against a real
 * in-process API server; the test plays the scheduler and kubelets (binds
 * pods, marks them Running and Ready with an IP).
 *
 * Covered: pods db-0, db-1, db-2 made one at a time (OrderedReady: db-1 only
 * once db-0 is Running and Ready), with the identity labels and hostname;
 * a pod that is Terminating (graceful delete of a bound pod, as taint
 * eviction does) is never doubled — checked on every round while it stays
 * — and is made again once it is gone; the headless Service's Endpoints list
 * Ready pods in addresses and the others in notReadyAddresses, leave the
 * Terminating one out, while its EndpointSlice keeps it with
 * terminating=true, serving and ready as upstream sets them; the Endpoints
 * go when the Service does.
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
	w->cm = testenv_cm_start(&w->env, "sts", &w->kc, "statefulset,endpoint,endpointslice", false, NULL);
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

static void post(struct world *w, const char *path, json_t *obj)
{
	struct testenv_result r = call(w, "POST", path, obj);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(obj);
}

static json_t *get(struct world *w, const char *path)
{
	struct testenv_result r = call(w, "GET", path, NULL);
	if (r.status != 200) {
		json_decref(r.body);
		return NULL;
	}
	return r.body;
}

/* Bind the pod to n1 and make it Running with an IP, Ready or not. */
static void kubelet(struct world *w, const char *name, bool ready, int ip)
{
	char path[256], addr[32], now[TIME_BUF];
	json_t *p, *b;
	struct testenv_result r;

	snprintf(path, sizeof(path), PODS "/%s", name);
	p = get(w, path);
	assert_non_null(p);
	if (!jx_str(p, "spec.nodeName")) {
		b = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s}}", "apiVersion", "v1", "kind", "Binding",
			      "metadata", "name", name, "target", "kind", "Node", "name", "n1");
		snprintf(path, sizeof(path), PODS "/%s/binding", name);
		r = call(w, "POST", path, b);
		json_decref(r.body);
		json_decref(b);
		json_decref(p);
		snprintf(path, sizeof(path), PODS "/%s", name);
		p = get(w, path);
	}
	snprintf(addr, sizeof(addr), "10.0.0.%d", ip);
	time_format_rfc3339(clock_now(), now);
	jx_set_str(p, "status.phase", "Running");
	jx_set_str(p, "status.podIP", addr);
	jx_set(p, "status.conditions",
	       json_pack("[{s:s,s:s,s:s}]", "type", "Ready", "status", ready ? "True" : "False",
			 "lastTransitionTime", now));
	snprintf(path, sizeof(path), PODS "/%s/status", name);
	r = call(w, "PUT", path, p);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(p);
}

static bool exists(struct world *w, const char *name)
{
	char path[256];
	json_t *p;
	snprintf(path, sizeof(path), PODS "/%s", name);
	p = get(w, path);
	json_decref(p);
	return p != NULL;
}

static size_t npods(struct world *w)
{
	json_t *l = get(w, PODS);
	size_t n = json_array_size(json_object_get(l, "items"));
	json_decref(l);
	return n;
}

static size_t not_ready(struct world *w)
{
	json_t *ep = get(w, "/api/v1/namespaces/default/endpoints/db");
	size_t n = json_array_size(
		jx_get(json_array_get(jx_get(ep, "subsets"), 0), "notReadyAddresses"));
	json_decref(ep);
	return n;
}

#define until(w, cond)                                                                             \
	do {                                                                                       \
		for (int i_ = 0; i_ < 300 && !(cond); i_++)                                        \
			testenv_pump(&(w)->env, 2);                                                \
	} while (0)

static void test_ordered_never_two_and_endpoints(void **state)
{
	struct world *w = *state;
	json_t *p, *ep, *sl, *e;
	size_t i;

	post(w, "/api/v1/namespaces/default/services",
	     json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:{s:s},s:[{s:s,s:i,s:s}]}}", "apiVersion", "v1",
		       "kind", "Service", "metadata", "name", "db", "spec", "clusterIP", "None",
		       "selector", "app", "db", "ports", "name", "pg", "port", 5432, "targetPort",
		       "pg"));
	post(w, "/apis/apps/v1/namespaces/default/statefulsets",
	     json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:i,s:{s:{s:s}},s:{s:{s:{s:s}},s:{s:[{s:s,s:s,"
		       "s:[{s:s,s:i}]}]}}}}",
		       "apiVersion", "apps/v1", "kind", "StatefulSet", "metadata", "name", "db",
		       "spec", "serviceName", "db", "replicas", 3, "selector", "matchLabels", "app",
		       "db", "template", "metadata", "labels", "app", "db", "spec", "containers",
		       "name", "pg", "image", "postgres", "ports", "name", "pg", "containerPort",
		       5432));
	until(w, exists(w, "db-0"));
	assert_true(exists(w, "db-0"));
	for (int k = 0; k < 20; k++)
		testenv_pump(&w->env, 2);
	assert_false(exists(w, "db-1")); /* OrderedReady: db-0 is not Ready yet */
	p = get(w, PODS "/db-0");
	assert_string_equal(json_string_value(json_object_get(jx_get(p, "metadata.labels"),
							      "statefulset.kubernetes.io/pod-name")),
			    "db-0");
	assert_string_equal(json_string_value(json_object_get(jx_get(p, "metadata.labels"),
							      "apps.kubernetes.io/pod-index")),
			    "0");
	assert_string_equal(jx_str(p, "spec.hostname"), "db-0");
	assert_string_equal(jx_str(p, "spec.subdomain"), "db");
	json_decref(p);
	kubelet(w, "db-0", true, 10);
	until(w, exists(w, "db-1"));
	kubelet(w, "db-1", true, 11);
	until(w, exists(w, "db-2"));
	kubelet(w, "db-2", false, 12); /* running, not Ready */
	for (int k = 0; k < 20; k++)
		testenv_pump(&w->env, 2);

	/* Endpoints: two ready addresses, one not ready. */
	until(w, not_ready(w) == 1);
	ep = get(w, "/api/v1/namespaces/default/endpoints/db");
	assert_non_null(ep);
	{
		const json_t *sub = json_array_get(jx_get(ep, "subsets"), 0);
		assert_int_equal(json_array_size(json_object_get(sub, "addresses")), 2);
		assert_string_equal(jx_str(json_array_get(json_object_get(sub, "addresses"), 0), "ip"),
				    "10.0.0.10");
		assert_string_equal(
			jx_str(json_array_get(json_object_get(sub, "addresses"), 0), "hostname"),
			"db-0");
		assert_string_equal(
			jx_str(json_array_get(json_object_get(sub, "notReadyAddresses"), 0), "ip"),
			"10.0.0.12");
		assert_int_equal(jx_int(json_array_get(json_object_get(sub, "ports"), 0), "port", 0),
				 5432);
	}
	json_decref(ep);

	/* db-1 is deleted gracefully (bound): it stays Terminating; no second
	 * db-1 ever appears, and the Endpoints leave it out. */
	{
		struct testenv_result r = call(w, "DELETE", PODS "/db-1", NULL);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
	}
	for (int k = 0; k < 40; k++) {
		testenv_pump(&w->env, 2);
		p = get(w, PODS "/db-1");
		assert_non_null(p);
		assert_non_null(jx_get(p, "metadata.deletionTimestamp"));
		json_decref(p);
		assert_int_equal(npods(w), 3);
	}
	ep = get(w, "/api/v1/namespaces/default/endpoints/db");
	assert_int_equal(json_array_size(jx_get(json_array_get(jx_get(ep, "subsets"), 0),
						"addresses")),
			 1);
	json_decref(ep);
	/* The slice keeps it, terminating. */
	sl = get(w, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices");
	assert_int_equal(json_array_size(json_object_get(sl, "items")), 1);
	{
		const json_t *s0 = json_array_get(json_object_get(sl, "items"), 0);
		int seen = 0;
		assert_string_equal(json_string_value(json_object_get(
					    jx_get(s0, "metadata.labels"), "kubernetes.io/service-name")),
				    "db");
		json_array_foreach(jx_get(s0, "endpoints"), i, e)
		{
			if (strcmp(jx_str(e, "targetRef.name") ?: "", "db-1"))
				continue;
			seen++;
			assert_true(json_is_true(jx_get(e, "conditions.terminating")));
			assert_true(json_is_true(jx_get(e, "conditions.serving")));
			assert_true(json_is_false(jx_get(e, "conditions.ready")));
		}
		assert_int_equal(seen, 1);
	}
	json_decref(sl);

	/* The kubelet confirms: gone, then made again. */
	{
		struct testenv_result r = call(w, "DELETE", PODS "/db-1?gracePeriodSeconds=0", NULL);
		json_decref(r.body);
	}
	until(w, exists(w, "db-1") && npods(w) == 3);
	p = get(w, PODS "/db-1");
	assert_non_null(p);
	assert_null(jx_get(p, "metadata.deletionTimestamp"));
	json_decref(p);

	/* The Service goes: its Endpoints go with it. */
	{
		struct testenv_result r = call(w, "DELETE", "/api/v1/namespaces/default/services/db",
					       NULL);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
	}
	until(w, !(ep = get(w, "/api/v1/namespaces/default/endpoints/db")) ||
		     (json_decref(ep), false));
	assert_null(get(w, "/api/v1/namespaces/default/endpoints/db"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ordered_never_two_and_endpoints, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
