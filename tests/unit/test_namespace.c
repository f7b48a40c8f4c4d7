/*
 * The namespace controller and the API server's side of namespace deletion,
 * on a real in-process API server and the virtual clock:
 *
 * - DELETE marks the namespace Terminating and keeps it while
 *   spec.finalizers holds "kubernetes"; new content is refused;
 * - the controller deletes the content: an unbound pod and a ConfigMap go
 *   at once, a bound pod (no kubelet here) stays Terminating — graceful,
 *   never forced — and the NamespaceContentRemaining condition names it;
 *   it looks again after 30/2 + 1 = 16 s, not before;
 * - a ConfigMap held by a finalizer keeps the namespace (15 s estimate,
 *   NamespaceFinalizersRemaining names the finalizer);
 * - once nothing remains the controller finalizes and the namespace goes.
 * - default, kube-system and kube-public may not be deleted.
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
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct world {
	struct testenv env;
	struct kubeconfig cm_kc;
	struct controller_manager *cm;
};

#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)
#define NS "/api/v1/namespaces/team"

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "namespace", &w->cm_kc, "namespace", true, NULL);
	/* Every informer listed before the test begins. */
	while (!controller_manager_synced(w->cm))
		testenv_pump(&w->env, 2);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	testenv_cm_stop(&w->env, &w->cm_kc, w->cm);
	free(w);
	return 0;
}

static int post(struct world *w, const char *path, json_t *obj)
{
	struct testenv_result r = call(w, "POST", path, obj);
	json_decref(r.body);
	json_decref(obj);
	return r.status;
}

static json_t *get(struct world *w, const char *path)
{
	struct testenv_result r = call(w, "GET", path, NULL);
	if (r.status == 200)
		return r.body;
	json_decref(r.body);
	return NULL;
}

static bool exists(struct world *w, const char *path)
{
	json_t *o = get(w, path);
	json_decref(o);
	return o != NULL;
}

/* The message of the namespace's condition of this type, or "". */
static const char *condition(json_t *ns, const char *type, char *buf, size_t n)
{
	json_t *c;
	size_t i;
	buf[0] = 0;
	json_array_foreach(jx_get(ns, "status.conditions"), i, c) if (!strcmp(
		jx_str(c, "type"), type)) snprintf(buf, n, "%s %s", jx_str(c, "status"),
						   jx_str(c, "message"));
	return buf;
}

static void advance(struct world *w, int64_t ns)
{
	for (int64_t done = 0; done < ns; done += NS_PER_SEC / 10) {
		clock_advance(NS_PER_SEC / 10);
		testenv_pump(&w->env, 2);
	}
}

/* The controller's first pass: keys wait in 100 ms steps of the virtual
 * clock until every informer has listed. */
static void settle(struct world *w)
{
	advance(w, NS_PER_SEC / 2);
}

static json_t *pod(const char *name, const char *node)
{
	json_t *p = json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
			      "Pod", "metadata", "name", name, "spec", "containers", "name", "c",
			      "image", "nginx");
	if (node)
		jx_set_str(p, "spec.nodeName", node);
	return p;
}

static void test_terminating_until_content_is_gone(void **state)
{
	struct world *w = *state;
	char buf[512];
	json_t *ns;

	assert_int_equal(post(w, "/api/v1/namespaces",
			      json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
					"Namespace", "metadata", "name", "team")),
			 201);
	assert_int_equal(post(w, NS "/pods", pod("bound", "node-a")), 201);
	assert_int_equal(post(w, NS "/pods", pod("unbound", NULL)), 201);
	assert_int_equal(post(w, NS "/configmaps",
			      json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
					"ConfigMap", "metadata", "name", "plain")),
			 201);
	assert_int_equal(post(w, NS "/configmaps",
			      json_pack("{s:s,s:s,s:{s:s,s:[s]}}", "apiVersion", "v1", "kind",
					"ConfigMap", "metadata", "name", "held", "finalizers",
					"example.com/hold")),
			 201);
	ns = get(w, NS);
	assert_string_equal(json_string_value(json_array_get(jx_get(ns, "spec.finalizers"), 0)) ?: "",
			    "kubernetes");
	json_decref(ns);
	/* A user cannot take the finalizer off through the namespace itself. */
	{
		struct testenv_result r;
		ns = get(w, NS);
		jx_set(ns, "spec.finalizers", json_array());
		r = call(w, "PUT", NS, ns);
		assert_int_equal(r.status, 200);
		assert_int_equal(json_array_size(jx_get(r.body, "spec.finalizers")), 1);
		json_decref(r.body);
		json_decref(ns);
	}

	struct testenv_result r = call(w, "DELETE", NS, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "status.phase"), "Terminating");
	assert_non_null(jx_get(r.body, "metadata.deletionTimestamp"));
	json_decref(r.body);
	/* Nothing new goes into it. */
	assert_int_equal(post(w, NS "/configmaps",
			      json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
					"ConfigMap", "metadata", "name", "late")),
			 403);

	settle(w);
	assert_false(exists(w, NS "/pods/unbound"));
	assert_false(exists(w, NS "/configmaps/plain"));
	/* Graceful: the bound pod waits for a kubelet, as upstream. */
	json_t *bound = get(w, NS "/pods/bound");
	assert_non_null(bound);
	assert_non_null(jx_get(bound, "metadata.deletionTimestamp"));
	json_decref(bound);
	ns = get(w, NS);
	assert_non_null(ns);
	assert_string_equal(condition(ns, "NamespaceContentRemaining", buf, sizeof(buf)),
			    "True Some resources are remaining: configmaps. has 1 resource "
			    "instances, pods. has 1 resource instances");
	assert_string_equal(condition(ns, "NamespaceFinalizersRemaining", buf, sizeof(buf)),
			    "True Some content in the namespace has finalizers remaining: "
			    "example.com/hold in 1 resource instances");
	assert_string_equal(condition(ns, "NamespaceDeletionContentFailure", buf, sizeof(buf)),
			    "False All content successfully deleted, may be waiting on "
			    "finalization");
	json_decref(ns);

	/* The kubelet's confirmation (a force delete here) and the finalizer's
	 * owner letting go. */
	r = call(w, "DELETE", NS "/pods/bound?gracePeriodSeconds=0", NULL);
	json_decref(r.body);
	{
		json_t *cm = get(w, NS "/configmaps/held");
		json_object_set_new(json_object_get(cm, "metadata"), "finalizers", json_array());
		r = call(w, "PUT", NS "/configmaps/held", cm);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
		json_decref(cm);
	}
	assert_false(exists(w, NS "/configmaps/held"));
	/* The controller looks again 30/2 + 1 = 16 s after its last pass. */
	advance(w, 15 * NS_PER_SEC);
	assert_true(exists(w, NS));
	advance(w, 2 * NS_PER_SEC);
	assert_false(exists(w, NS));
}

static void test_finalizer_only_waits_fifteen_halves(void **state)
{
	struct world *w = *state;
	struct testenv_result r;

	assert_int_equal(post(w, "/api/v1/namespaces",
			      json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
					"Namespace", "metadata", "name", "team")),
			 201);
	assert_int_equal(post(w, NS "/configmaps",
			      json_pack("{s:s,s:s,s:{s:s,s:[s]}}", "apiVersion", "v1", "kind",
					"ConfigMap", "metadata", "name", "held", "finalizers",
					"example.com/hold")),
			 201);
	r = call(w, "DELETE", NS, NULL);
	json_decref(r.body);
	settle(w);
	assert_true(exists(w, NS));
	{
		json_t *cm = get(w, NS "/configmaps/held");
		json_object_set_new(json_object_get(cm, "metadata"), "finalizers", json_array());
		r = call(w, "PUT", NS "/configmaps/held", cm);
		json_decref(r.body);
		json_decref(cm);
	}
	/* 15/2 + 1 = 8 s. */
	advance(w, 7 * NS_PER_SEC);
	assert_true(exists(w, NS));
	advance(w, 2 * NS_PER_SEC);
	assert_false(exists(w, NS));
	/* An empty namespace goes within the first pass. */
	assert_int_equal(post(w, "/api/v1/namespaces",
			      json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
					"Namespace", "metadata", "name", "team")),
			 201);
	r = call(w, "DELETE", NS, NULL);
	json_decref(r.body);
	testenv_pump(&w->env, 20);
	assert_false(exists(w, NS));
}

static void test_immortal_namespaces(void **state)
{
	struct world *w = *state;
	static const char *const names[] = {"default", "kube-system", "kube-public"};
	char path[128], msg[160];

	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s", names[i]);
		if (!exists(w, path))
			assert_int_equal(post(w, "/api/v1/namespaces",
					      json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1",
							"kind", "Namespace", "metadata", "name",
							names[i])),
					 201);
		struct testenv_result r = call(w, "DELETE", path, NULL);
		assert_int_equal(r.status, 403);
		snprintf(msg, sizeof(msg),
			 "namespaces \"%s\" is forbidden: this namespace may not be deleted",
			 names[i]);
		assert_string_equal(jx_str(r.body, "message"), msg);
		json_decref(r.body);
		json_t *ns = get(w, path);
		assert_null(jx_get(ns, "metadata.deletionTimestamp"));
		json_decref(ns);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_terminating_until_content_is_gone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_finalizer_only_waits_fifteen_halves, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_immortal_namespaces, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
