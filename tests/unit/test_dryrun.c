/*
 * Dry runs that end a request early must leave it alone afterwards (issue
 * 10, item 1): removing the last finalizer of a terminating object with
 * ?dryRun=All, and a Foreground delete with ?dryRun=All, used the request
 * after the reply had freed it. Under ASan this file is the regression
 * test; without it, it checks the dry run changed nothing. And (item 2) a
 * dry-run DELETE — query or DeleteOptions body — a dry-run deletecollection
 * and a dry-run eviction delete nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/jx.h"

#include <stdlib.h>
#include <string.h>

#define CMS "/api/v1/namespaces/default/configmaps"
#define HOLD "example.com/hold"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "dryrun");
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	testenv_stop(*state);
	free(*state);
	return 0;
}

static json_t *get_cm(struct testenv *e, const char *name)
{
	char path[128];
	struct testenv_result r;
	snprintf(path, sizeof(path), CMS "/%s", name);
	r = testenv_call(e, "GET", path, NULL);
	if (r.status != 200) {
		json_decref(r.body);
		return NULL;
	}
	return r.body;
}

/* A ConfigMap, held by a finalizer when one is given. */
static void make_cm(struct testenv *e, const char *name, const char *finalizer)
{
	json_t *cm = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
	                       "metadata", "name", name);
	struct testenv_result r;
	if (finalizer)
		jx_set(cm, "metadata.finalizers", json_pack("[s]", finalizer));
	r = testenv_call(e, "POST", CMS, cm);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(cm);
}

static void test_dry_run_last_finalizer_removal(void **state)
{
	struct testenv *e = *state;
	struct testenv_result r;
	json_t *cm;

	make_cm(e, "held", HOLD);
	r = testenv_call(e, "DELETE", CMS "/held", NULL);
	json_decref(r.body);
	cm = get_cm(e, "held");
	assert_non_null(jx_get(cm, "metadata.deletionTimestamp"));
	json_object_del(json_object_get(cm, "metadata"), "finalizers");
	r = testenv_call(e, "PUT", CMS "/held?dryRun=All", cm);
	assert_int_equal(r.status, 200);
	assert_null(jx_get(r.body, "metadata.finalizers"));
	json_decref(r.body);
	json_decref(cm);
	testenv_pump(e, 3);
	/* Nothing happened: still there, still held. */
	cm = get_cm(e, "held");
	assert_non_null(cm);
	assert_string_equal(json_string_value(json_array_get(jx_get(cm, "metadata.finalizers"), 0)),
	                    HOLD);
	json_decref(cm);
}

static void test_dry_run_foreground_delete(void **state)
{
	struct testenv *e = *state;
	struct testenv_result r;
	json_t *cm;

	make_cm(e, "fg", HOLD);
	r = testenv_call(e, "DELETE", CMS "/fg?dryRun=All&propagationPolicy=Foreground", NULL);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	testenv_pump(e, 3);
	cm = get_cm(e, "fg");
	assert_non_null(cm);
	assert_null(jx_get(cm, "metadata.deletionTimestamp")); /* not even marked */
	json_decref(cm);
}

static void assert_still_there(struct testenv *e, const char *name)
{
	json_t *cm;
	testenv_pump(e, 3);
	cm = get_cm(e, name);
	assert_non_null(cm);
	assert_null(jx_get(cm, "metadata.deletionTimestamp"));
	json_decref(cm);
}

/* Issue 10, item 2: a dry-run delete answers as a delete would and deletes
 * nothing — asked in the query, in a DeleteOptions body (kubectl
 * --dry-run=server), for a collection and for an eviction. */
static void test_dry_run_deletes_delete_nothing(void **state)
{
	struct testenv *e = *state;
	struct testenv_result r;
	json_t *opts = json_pack("{s:s,s:s,s:[s]}", "apiVersion", "v1", "kind", "DeleteOptions",
	                         "dryRun", "All");
	json_t *pod, *eviction;

	make_cm(e, "q", NULL);
	r = testenv_call(e, "DELETE", CMS "/q?dryRun=All", NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "status"), "Success");
	json_decref(r.body);
	assert_still_there(e, "q");

	make_cm(e, "b", NULL);
	r = testenv_call(e, "DELETE", CMS "/b", opts);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	assert_still_there(e, "b");

	r = testenv_call(e, "DELETE", CMS "?dryRun=All", NULL);
	assert_int_equal(r.status, 200);
	/* upstream's DeleteCollection answers with what it deleted (would delete) */
	assert_string_equal(jx_str(r.body, "kind"), "ConfigMapList");
	assert_true(json_array_size(jx_get(r.body, "items")) >= 2);
	json_decref(r.body);
	assert_still_there(e, "q");
	assert_still_there(e, "b");

	pod = json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind", "Pod",
	                "metadata", "name", "p", "spec", "containers", "name", "c", "image", "x");
	r = testenv_call(e, "POST", "/api/v1/namespaces/default/pods", pod);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	eviction = json_pack("{s:s,s:s,s:{s:s},s:O}", "apiVersion", "policy/v1", "kind", "Eviction",
	                     "metadata", "name", "p", "deleteOptions", opts);
	r = testenv_call(e, "POST", "/api/v1/namespaces/default/pods/p/eviction", eviction);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	testenv_pump(e, 3);
	r = testenv_call(e, "GET", "/api/v1/namespaces/default/pods/p", NULL);
	assert_int_equal(r.status, 200);
	assert_null(jx_get(r.body, "metadata.deletionTimestamp"));
	json_decref(r.body);
	json_decref(pod);
	json_decref(eviction);
	json_decref(opts);

	/* and for real: answered with the list of what went, once it went */
	r = testenv_call(e, "DELETE", CMS, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "kind"), "ConfigMapList");
	assert_int_equal(json_array_size(jx_get(r.body, "items")), 2);
	assert_string_equal(jx_str(json_array_get(jx_get(r.body, "items"), 0), "metadata.name"),
	                    "b");
	json_decref(r.body);
	r = testenv_call(e, "GET", CMS, NULL);
	assert_int_equal(json_array_size(jx_get(r.body, "items")), 0);
	json_decref(r.body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_dry_run_last_finalizer_removal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dry_run_foreground_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dry_run_deletes_delete_nothing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
