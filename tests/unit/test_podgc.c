/*
 * The pod garbage collector against a real in-process API server, on the
 * virtual clock: pods bound to a node that does not exist are force-deleted
 * after the 40 s quarantine (not before), pods of a live node stay, and of
 * three Succeeded pods over a threshold of 2 the oldest goes.
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

struct world {
	struct testenv env;
	struct kubeconfig cm_kc;
	struct controller_manager *cm;
	int64_t t0;
};

#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)

/* Two terminated pods at most, so that three show the threshold. */
static void gc_threshold(struct controller_manager_opts *o)
{
	o->terminated_pod_gc_threshold = 2;
}

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "podgc", &w->cm_kc, "podgc", true, gc_threshold);
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

static void create(struct world *w, const char *path, json_t *obj)
{
	struct testenv_result r = call(w, "POST", path, obj);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(obj);
}

static void pod(struct world *w, const char *name, const char *node, const char *phase)
{
	char path[256];
	struct testenv_result r;
	json_t *p = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
			      "Pod", "metadata", "name", name, "spec", "nodeName", node,
			      "containers", "name", "c", "image", "nginx");
	create(w, "/api/v1/namespaces/default/pods", p);
	if (!phase)
		return;
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
	r = call(w, "GET", path, NULL);
	p = json_deep_copy(r.body);
	json_decref(r.body);
	jx_set_str(p, "status.phase", phase);
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s/status", name);
	r = call(w, "PUT", path, p);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(p);
}

static bool exists(struct world *w, const char *name)
{
	char path[256];
	struct testenv_result r;
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
	r = call(w, "GET", path, NULL);
	json_decref(r.body);
	return r.status == 200;
}

static void until(struct world *w, int secs)
{
	while (clock_now() < w->t0 + secs * NS_PER_SEC) {
		clock_advance(NS_PER_SEC);
		testenv_pump(&w->env, 3);
	}
}

static void test_orphans_and_terminated(void **state)
{
	struct world *w = *state;

	create(w, "/api/v1/nodes",
	       json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata",
			 "name", "alive"));
	pod(w, "lost", "ghost", NULL);
	pod(w, "kept", "alive", NULL);
	pod(w, "done-1", "alive", "Succeeded");
	clock_advance(2 * NS_PER_SEC); /* creation times a second apart at least */
	pod(w, "done-2", "alive", "Succeeded");
	clock_advance(2 * NS_PER_SEC);
	pod(w, "done-3", "alive", "Failed");
	testenv_pump(&w->env, 5);
	w->t0 = clock_now();

	/* The first pass (20 s) sees "ghost" missing; 40 s later it is gone. */
	until(w, 21);
	assert_false(exists(w, "done-1")); /* over the threshold: the oldest */
	assert_true(exists(w, "done-2"));
	assert_true(exists(w, "done-3"));
	assert_true(exists(w, "lost"));
	until(w, 55);
	assert_true(exists(w, "lost")); /* quarantine: 40 s from first seen missing */
	until(w, 65);
	assert_false(exists(w, "lost"));
	assert_true(exists(w, "kept"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_orphans_and_terminated, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
