/*
 * The garbage collector and deletion semantics (issue 10, item 3), against
 * a real API server: foreground deletion waits for the dependents that
 * block it and keeps the owner's own finalizers; a bound pod stays graceful
 * under any propagation policy; "orphan" orphans while the owner is held;
 * a dependent with a living owner is kept; a reference to an owner that is
 * not there (same name, other uid) is collected; 202 only for
 * orphanDependents: false, as upstream; a Job orphans its dependents by
 * default.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS "/api/v1/namespaces/default"
#define CMS NS "/configmaps"
#define PODS NS "/pods"
#define HOLD "example.com/hold"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "gc");
	*state = e;
	return 0;
}

static int setup_remote(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc_remote(e, "gc-remote");
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	testenv_stop(*state);
	free(*state);
	return 0;
}

/* testenv_call, the body stolen. */
static struct testenv_result call(struct testenv *e, const char *method, const char *path,
                                  json_t *body)
{
	struct testenv_result r = testenv_call(e, method, path, body);
	json_decref(body);
	return r;
}

static json_t *get(struct testenv *e, const char *path)
{
	struct testenv_result r;
	testenv_pump(e, 3); /* the collector works at the loop's next turns */
	r = testenv_call(e, "GET", path, NULL);
	if (r.status != 200) {
		assert_int_equal(r.status, 404);
		json_decref(r.body);
		return NULL;
	}
	return r.body;
}

static bool exists(struct testenv *e, const char *path)
{
	json_t *o = get(e, path);
	json_decref(o);
	return o != NULL;
}

/* An ownerReference to obj (a create's answer). */
static json_t *ref_to(const json_t *obj, bool block)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "apiVersion", jx_str(obj, "apiVersion"),
	                 "kind", jx_str(obj, "kind"), "name", jx_str(obj, "metadata.name"), "uid",
	                 jx_str(obj, "metadata.uid"), "controller", 1, "blockOwnerDeletion", block);
}

/* POST obj (stolen) to path; its finalizer and owner references when
 * given. Returns the created object. */
static json_t *create(struct testenv *e, const char *path, json_t *obj, const char *finalizer,
                      json_t *refs)
{
	struct testenv_result r;
	if (finalizer)
		jx_set(obj, "metadata.finalizers", json_pack("[s]", finalizer));
	if (refs)
		jx_set(obj, "metadata.ownerReferences", refs);
	r = testenv_call(e, "POST", path, obj);
	assert_int_equal(r.status, 201);
	json_decref(obj);
	return r.body;
}

static json_t *cm(struct testenv *e, const char *name, const char *finalizer, json_t *refs)
{
	return create(e, CMS,
	              json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
	                        "metadata", "name", name),
	              finalizer, refs);
}

/* A pod bound to a node no kubelet runs: its deletion waits for a
 * confirmation this test gives by hand. */
static json_t *bound_pod(struct testenv *e, const char *name, json_t *refs)
{
	return create(e, PODS,
	              json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:[{s:s,s:s}]}}", "apiVersion", "v1",
	                        "kind", "Pod", "metadata", "name", name, "spec", "nodeName",
	                        "node-1", "containers", "name", "c", "image", "nginx"),
	              NULL, refs);
}

static int del(struct testenv *e, const char *path, const char *policy, json_t **out)
{
	char url[256];
	struct testenv_result r;
	snprintf(url, sizeof(url), "%s%s%s", path, policy ? "?propagationPolicy=" : "",
	         policy ? policy : "");
	r = testenv_call(e, "DELETE", url, NULL);
	if (out)
		*out = r.body;
	else
		json_decref(r.body);
	return r.status;
}

static bool has_finalizer(const json_t *obj, const char *name)
{
	json_t *f;
	size_t i;
	json_array_foreach(jx_get(obj, "metadata.finalizers"), i,
	                   f) if (!strcmp(json_string_value(f), name)) return true;
	return false;
}

/* Take every finalizer off the object at path (a PUT, as a controller would). */
static void release(struct testenv *e, const char *path)
{
	json_t *obj = get(e, path);
	struct testenv_result r;
	assert_non_null(obj);
	json_object_del(json_object_get(obj, "metadata"), "finalizers");
	r = call(e, "PUT", path, obj);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
}

/* What a kubelet does once a pod's containers are gone. */
static void confirm(struct testenv *e, const char *name)
{
	char url[128];
	struct testenv_result r;
	snprintf(url, sizeof(url), PODS "/%s?gracePeriodSeconds=0", name);
	r = testenv_call(e, "DELETE", url, NULL);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
}

/* A -> B -> pod, every link blocking: a Foreground delete of A marks it,
 * deletes B in the foreground (it has a dependent of its own) and the pod
 * gracefully; both owners wait until the pod's kubelet confirms. */
static void test_foreground_waits_for_blocking_dependents(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "fg-a", NULL, NULL), *b, *pod, *got;

	b = cm(e, "fg-b", NULL, json_pack("[o]", ref_to(a, true)));
	pod = bound_pod(e, "fg-pod", json_pack("[o]", ref_to(b, true)));
	assert_int_equal(del(e, CMS "/fg-a", "Foreground", &got), 200);
	assert_true(has_finalizer(got, "foregroundDeletion"));
	assert_non_null(jx_get(got, "metadata.deletionTimestamp"));
	json_decref(got);

	got = get(e, CMS "/fg-a");
	assert_non_null(got); /* waits */
	assert_true(has_finalizer(got, "foregroundDeletion"));
	json_decref(got);
	got = get(e, CMS "/fg-b");
	assert_non_null(got);
	assert_true(has_finalizer(got, "foregroundDeletion"));
	json_decref(got);
	got = get(e, PODS "/fg-pod");
	assert_non_null(got); /* graceful: terminating, not gone */
	assert_non_null(jx_get(got, "metadata.deletionTimestamp"));
	assert_int_equal(jx_int(got, "metadata.deletionGracePeriodSeconds", -1), 30);
	json_decref(got);

	confirm(e, "fg-pod");
	assert_false(exists(e, PODS "/fg-pod"));
	assert_false(exists(e, CMS "/fg-b"));
	assert_false(exists(e, CMS "/fg-a"));
	json_decref(a);
	json_decref(b);
	json_decref(pod);
}

/* A dependent without blockOwnerDeletion is deleted too, but not waited for. */
static void test_foreground_does_not_wait_for_others(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "nb-a", NULL, NULL), *pod, *got;

	pod = bound_pod(e, "nb-pod", json_pack("[o]", ref_to(a, false)));
	assert_int_equal(del(e, CMS "/nb-a", "Foreground", NULL), 200);
	assert_false(exists(e, CMS "/nb-a"));
	got = get(e, PODS "/nb-pod");
	assert_non_null(got);
	assert_non_null(jx_get(got, "metadata.deletionTimestamp"));
	json_decref(got);
	confirm(e, "nb-pod");
	assert_false(exists(e, PODS "/nb-pod"));
	json_decref(a);
	json_decref(pod);
}

/* The owner's own finalizers outlast the foreground's. */
static void test_foreground_keeps_the_owners_finalizers(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "held-a", HOLD, NULL), *got;

	assert_int_equal(del(e, CMS "/held-a", "Foreground", NULL), 200);
	got = get(e, CMS "/held-a");
	assert_non_null(got);
	assert_false(has_finalizer(got, "foregroundDeletion"));
	assert_true(has_finalizer(got, HOLD));
	assert_non_null(jx_get(got, "metadata.deletionTimestamp"));
	json_decref(got);
	release(e, CMS "/held-a");
	assert_false(exists(e, CMS "/held-a"));
	json_decref(a);
}

/* A bound pod deleted in the foreground (or as an orphan) still waits for
 * its kubelet. */
static void test_bound_pod_graceful_under_any_policy(void **state)
{
	struct testenv *e = *state;
	static const char *const policies[] = {"Foreground", "Orphan", "Background"};

	for (size_t i = 0; i < 3; i++) {
		char name[32], path[64];
		json_t *pod, *got;
		snprintf(name, sizeof(name), "graceful-%zu", i);
		snprintf(path, sizeof(path), PODS "/%s", name);
		pod = bound_pod(e, name, NULL);
		assert_int_equal(del(e, path, policies[i], NULL), 200);
		got = get(e, path);
		assert_non_null(got);
		assert_int_equal(jx_int(got, "metadata.deletionGracePeriodSeconds", -1), 30);
		assert_null(jx_get(got, "metadata.finalizers")); /* the collector's are done */
		json_decref(got);
		confirm(e, name);
		assert_false(exists(e, path));
		json_decref(pod);
	}
}

/* Orphan on an owner held by a finalizer: its dependents are freed now,
 * and stay when the owner finally goes. */
static void test_orphan_while_the_owner_is_held(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "or-a", HOLD, NULL), *d, *got;

	d = cm(e, "or-d", NULL, json_pack("[o]", ref_to(a, true)));
	assert_int_equal(del(e, CMS "/or-a", "Orphan", &got), 200);
	assert_true(has_finalizer(got, "orphan"));
	json_decref(got);
	got = get(e, CMS "/or-d");
	assert_non_null(got);
	assert_null(jx_get(got, "metadata.ownerReferences"));
	json_decref(got);
	got = get(e, CMS "/or-a");
	assert_false(has_finalizer(got, "orphan"));
	assert_true(has_finalizer(got, HOLD));
	json_decref(got);
	release(e, CMS "/or-a");
	assert_false(exists(e, CMS "/or-a"));
	assert_true(exists(e, CMS "/or-d"));
	json_decref(a);
	json_decref(d);
}

/* A dependent naming its owner by a kind this server does not serve (the
 * index finds it by uid): the owner is looked at again once the
 * dependent's write lands, and goes. */
static void test_orphan_of_an_unknown_kind(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "ou-a", NULL, NULL), *ref = ref_to(a, true), *d, *got;

	json_object_set_new(ref, "apiVersion", json_string("example.com/v1"));
	json_object_set_new(ref, "kind", json_string("Widget"));
	d = cm(e, "ou-d", NULL, json_pack("[o]", ref));
	assert_int_equal(del(e, CMS "/ou-a", "Orphan", &got), 200);
	json_decref(got);
	assert_false(exists(e, CMS "/ou-a"));
	got = get(e, CMS "/ou-d");
	assert_non_null(got);
	assert_null(jx_get(got, "metadata.ownerReferences"));
	json_decref(got);
	json_decref(a);
	json_decref(d);
}

/*
 * On a shared store (etcd) the collector's writes may land in any order. An
 * owner orphaning its dependents keeps its finalizer until their writes
 * have landed: were its own deletion to land first, a dependent still
 * naming it would be collected as the dependent of an absent owner (seen
 * once in the etcd run of test_delete_orphan_keeps_dependents). Here the
 * collector's writes are held and landed newest first.
 */
static void test_orphan_waits_for_its_dependents_writes(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "or-a", NULL, NULL), *d, *got;

	d = cm(e, "or-d", NULL, json_pack("[o]", ref_to(a, true)));
	testenv_store_hold(e->remote, 1); /* the DELETE's own write lands */
	assert_int_equal(del(e, CMS "/or-a", "Orphan", &got), 200);
	assert_true(has_finalizer(got, "orphan"));
	json_decref(got);
	testenv_pump(e, 3);
	/* The dependent's write alone: the owner's waits for it. */
	assert_int_equal(testenv_store_held(e->remote), 1);
	assert_string_equal(testenv_store_held_key(e->remote, 0, NULL), "/registry/configmaps/default/or-d");
	while (testenv_store_held(e->remote)) {
		testenv_store_land(e->remote, testenv_store_held(e->remote) - 1);
		testenv_pump(e, 3);
	}
	testenv_store_hold(e->remote, SIZE_MAX);
	got = get(e, CMS "/or-d");
	assert_non_null(got);
	assert_null(jx_get(got, "metadata.ownerReferences"));
	json_decref(got);
	assert_false(exists(e, CMS "/or-a"));
	json_decref(a);
	json_decref(d);
}

/* Two owners, one deleted: the dependent stays, naming the living one. */
static void test_a_living_owner_keeps_its_dependent(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "two-a", NULL, NULL), *b = cm(e, "two-b", NULL, NULL), *d, *got;

	d = cm(e, "two-d", NULL, json_pack("[o,o]", ref_to(a, true), ref_to(b, false)));
	assert_int_equal(del(e, CMS "/two-a", "Background", NULL), 200);
	got = get(e, CMS "/two-d");
	assert_non_null(got);
	assert_int_equal(json_array_size(jx_get(got, "metadata.ownerReferences")), 1);
	assert_string_equal(
	    jx_str(json_array_get(jx_get(got, "metadata.ownerReferences"), 0), "name"), "two-b");
	json_decref(got);
	assert_int_equal(del(e, CMS "/two-b", NULL, NULL), 200);
	assert_false(exists(e, CMS "/two-d"));
	json_decref(a);
	json_decref(b);
	json_decref(d);
}

/* An owner of that name with another uid is not the owner: collected. */
static void test_owner_of_another_uid_is_absent(void **state)
{
	struct testenv *e = *state;
	json_t *a = cm(e, "uid-a", NULL, NULL), *ref = ref_to(a, false), *d;

	json_object_set_new(ref, "uid", json_string("00000000-0000-0000-0000-000000000000"));
	d = cm(e, "uid-d", NULL, json_pack("[o]", ref));
	assert_false(exists(e, CMS "/uid-d"));
	assert_true(exists(e, CMS "/uid-a"));
	json_decref(a);
	json_decref(d);
}

/* Upstream's codes: 202 only for a deferred delete that sent the
 * deprecated orphanDependents: false; both options at once are invalid. */
static void test_delete_answers_as_upstream(void **state)
{
	struct testenv *e = *state;
	struct testenv_result r;
	json_t *a = cm(e, "code-a", HOLD, NULL), *b = cm(e, "code-b", HOLD, NULL);

	r = call(e, "DELETE", CMS "/code-a",
	         json_pack("{s:s,s:s,s:b}", "apiVersion", "v1", "kind", "DeleteOptions",
	                   "orphanDependents", 0));
	assert_int_equal(r.status, 202);
	assert_string_equal(jx_str(r.body, "kind"), "ConfigMap");
	json_decref(r.body);
	assert_int_equal(del(e, CMS "/code-b", "Foreground", NULL), 200);
	r = call(e, "DELETE", CMS "/code-b?propagationPolicy=Orphan",
	         json_pack("{s:s,s:s,s:b}", "apiVersion", "v1", "kind", "DeleteOptions",
	                   "orphanDependents", 1));
	assert_int_equal(r.status, 422);
	assert_non_null(strstr(jx_str(r.body, "message"),
	                       "orphanDependents and deletionPropagation cannot be both set"));
	json_decref(r.body);
	json_decref(a);
	json_decref(b);
}

static json_t *job(struct testenv *e, const char *name)
{
	return create(e, "/apis/batch/v1/namespaces/default/jobs",
	              json_pack("{s:s,s:s,s:{s:s},s:{s:{s:{s:s,s:[{s:s,s:s}]}}}}", "apiVersion",
	                        "batch/v1", "kind", "Job", "metadata", "name", name, "spec",
	                        "template", "spec", "restartPolicy", "Never", "containers", "name",
	                        "c", "image", "busybox"),
	              NULL, NULL);
}

/* batch/v1 Jobs default to orphaning (upstream's DefaultGarbageCollectionPolicy). */
static void test_job_orphans_by_default(void **state)
{
	struct testenv *e = *state;
	json_t *j = job(e, "j1"), *d = cm(e, "j1-d", NULL, json_pack("[o]", ref_to(j, true)));
	json_t *j2 = job(e, "j2"), *d2 = cm(e, "j2-d", NULL, json_pack("[o]", ref_to(j2, true)));

	assert_int_equal(del(e, "/apis/batch/v1/namespaces/default/jobs/j1", NULL, NULL), 200);
	assert_false(exists(e, "/apis/batch/v1/namespaces/default/jobs/j1"));
	assert_true(exists(e, CMS "/j1-d"));
	assert_int_equal(del(e, "/apis/batch/v1/namespaces/default/jobs/j2", "Background", NULL),
	                 200);
	assert_false(exists(e, CMS "/j2-d"));
	json_decref(j);
	json_decref(d);
	json_decref(j2);
	json_decref(d2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_foreground_waits_for_blocking_dependents),
	    cmocka_unit_test(test_foreground_does_not_wait_for_others),
	    cmocka_unit_test(test_foreground_keeps_the_owners_finalizers),
	    cmocka_unit_test(test_bound_pod_graceful_under_any_policy),
	    cmocka_unit_test(test_orphan_while_the_owner_is_held),
	    cmocka_unit_test(test_orphan_of_an_unknown_kind),
	    cmocka_unit_test_setup_teardown(test_orphan_waits_for_its_dependents_writes,
	                                    setup_remote, teardown),
	    cmocka_unit_test(test_a_living_owner_keeps_its_dependent),
	    cmocka_unit_test(test_owner_of_another_uid_is_absent),
	    cmocka_unit_test(test_delete_answers_as_upstream),
	    cmocka_unit_test(test_job_orphans_by_default),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
