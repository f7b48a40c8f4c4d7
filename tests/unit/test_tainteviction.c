/*
 * The taint eviction controller against a real in-process API server, on
 * the virtual clock. A node gets node.kubernetes.io/unreachable:NoExecute;
 * its pods go as their tolerations say:
 *   p-short  tolerates it for 30 s         — deleted at 30 s, not at 29 s;
 *   p-default has no toleration: the API server's DefaultTolerationSeconds
 *            gives it 300 s                — its deletion is cancelled
 *            ("Cancelling deletion of Pod") when the taint comes off at 100 s;
 *   p-forever tolerates it with no limit   — never, until a taint it does
 *            not tolerate arrives: then at once, with p-default.
 * A deleted pod carries DisruptionTarget (DeletionByTaintManager) and a
 * deletionTimestamp (graceful: its kubelet would finish it), and the pod has
 * a Normal TaintManagerEviction "Marking for deletion Pod default/<name>".
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

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "te", &w->cm_kc, "taint-eviction-controller", true, NULL);
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

static void pod(struct world *w, const char *name, json_t *tolerations)
{
	json_t *p = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
			      "Pod", "metadata", "name", name, "spec", "nodeName", "n1",
			      "containers", "name", "c", "image", "nginx");
	if (tolerations)
		json_object_set_new(json_object_get(p, "spec"), "tolerations", tolerations);
	create(w, "/api/v1/namespaces/default/pods", p);
}

static void set_taints(struct world *w, json_t *taints)
{
	struct testenv_result r = call(w, "GET", "/api/v1/nodes/n1", NULL);
	json_t *node = json_deep_copy(r.body);

	json_decref(r.body);
	jx_set(node, "spec.taints", taints);
	r = call(w, "PUT", "/api/v1/nodes/n1", node);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(node);
}

/* The pod as stored; NULL when it is gone. */
static json_t *get_pod(struct world *w, const char *name)
{
	char path[128];
	struct testenv_result r;

	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
	r = call(w, "GET", path, NULL);
	if (r.status == 404) {
		json_decref(r.body);
		return NULL;
	}
	assert_int_equal(r.status, 200);
	return r.body;
}

static bool deleting(struct world *w, const char *name)
{
	json_t *p = get_pod(w, name);
	bool d = p && jx_get(p, "metadata.deletionTimestamp");
	json_decref(p);
	return d;
}

/* Events about pod `name` with this message. */
static int events(struct world *w, const char *name, const char *msg)
{
	struct testenv_result r = call(w, "GET", "/api/v1/namespaces/default/events", NULL);
	json_t *ev;
	size_t i;
	int n = 0;

	assert_int_equal(r.status, 200);
	json_array_foreach(json_object_get(r.body, "items"), i, ev)
	{
		if (strcmp(jx_str(ev, "involvedObject.name") ?: "", name) ||
		    strcmp(jx_str(ev, "message") ?: "", msg))
			continue;
		assert_string_equal(jx_str(ev, "reason"), "TaintManagerEviction");
		assert_string_equal(jx_str(ev, "type"), "Normal");
		assert_string_equal(jx_str(ev, "source.component"), "taint-eviction-controller");
		assert_null(jx_get(ev, "involvedObject.uid"));
		n++;
	}
	json_decref(r.body);
	return n;
}

/* Virtual time moves to t0 + secs, a second at a time. */
static void until(struct world *w, int secs)
{
	while (clock_now() < w->t0 + secs * NS_PER_SEC) {
		clock_advance(NS_PER_SEC);
		testenv_pump(&w->env, 3);
	}
}

static void test_tolerations_decide(void **state)
{
	struct world *w = *state;
	json_t *p, *cond;

	create(w, "/api/v1/nodes",
	       json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata",
			 "name", "n1"));
	pod(w, "p-short",
	    json_pack("[{s:s,s:s,s:s,s:i}]", "key", "node.kubernetes.io/unreachable", "operator",
		      "Exists", "effect", "NoExecute", "tolerationSeconds", 30));
	pod(w, "p-default", NULL);
	pod(w, "p-forever", json_pack("[{s:s,s:s,s:s}]", "key", "node.kubernetes.io/unreachable",
				      "operator", "Exists", "effect", "NoExecute"));
	testenv_pump(&w->env, 5);
	/* DefaultTolerationSeconds gave p-default its 300 s. */
	p = get_pod(w, "p-default");
	assert_int_equal(json_array_size(jx_get(p, "spec.tolerations")), 2);
	json_decref(p);

	w->t0 = clock_now();
	set_taints(w, json_pack("[{s:s,s:s}]", "key", "node.kubernetes.io/unreachable", "effect",
				"NoExecute"));
	testenv_pump(&w->env, 5);
	until(w, 29);
	assert_false(deleting(w, "p-short"));
	until(w, 31);
	assert_true(deleting(w, "p-short"));
	p = get_pod(w, "p-short");
	cond = jx_condition(json_object_get(p, "status"), "DisruptionTarget");
	assert_non_null(cond);
	assert_string_equal(jx_str(cond, "status"), "True");
	assert_string_equal(jx_str(cond, "reason"), "DeletionByTaintManager");
	assert_string_equal(jx_str(cond, "message"), "Taint manager: deleting due to NoExecute taint");
	json_decref(p);
	assert_int_equal(events(w, "p-short", "Marking for deletion Pod default/p-short"), 1);
	assert_false(deleting(w, "p-default"));
	assert_false(deleting(w, "p-forever"));

	/* The taint comes off before p-default's 300 s: cancelled, with the
	 * event; p-forever had nothing scheduled, so no event for it. */
	until(w, 100);
	set_taints(w, json_array());
	testenv_pump(&w->env, 5);
	assert_int_equal(events(w, "p-default", "Cancelling deletion of Pod default/p-default"), 1);
	assert_int_equal(events(w, "p-forever", "Cancelling deletion of Pod default/p-forever"), 0);
	until(w, 310);
	assert_false(deleting(w, "p-default"));
	assert_false(deleting(w, "p-forever"));

	/* A NoExecute taint nobody tolerates: both go at once. */
	set_taints(w, json_pack("[{s:s,s:s,s:s}]", "key", "example.com/dead", "value", "yes",
				"effect", "NoExecute"));
	testenv_pump(&w->env, 5);
	assert_true(deleting(w, "p-default"));
	assert_true(deleting(w, "p-forever"));
	assert_int_equal(events(w, "p-forever", "Marking for deletion Pod default/p-forever"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tolerations_decide, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
