/*
 * In-process requests (issue 10, item 12): the API server answered without
 * a socket through apiserver_exchange — the transport seam every unit test
 * of src/apiserver stands on. What HTTPS gives a request, the exchange
 * must give too: authentication from a client certificate or a token,
 * reply headers, a write answered after its commit, a watch stream, a
 * reader that stops reading, a client that goes away mid-request.
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

#define CMS "/api/v1/namespaces/default/configmaps"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "inproc");
	*state = e;
	return 0;
}

static void create_cm(struct testenv *e, const char *name, size_t value_len)
{
	char *value = malloc(value_len + 1), *body;
	struct testenv_reply r;

	memset(value, 'v', value_len);
	value[value_len] = '\0';
	assert_true(asprintf(&body, "{\"metadata\":{\"name\":\"%s\"},\"data\":{\"k\":\"%s\"}}",
	                     name, value) > 0);
	r = testenv_as_admin(e, "POST", CMS, NULL, body);
	assert_int_equal(r.status, 201);
	testenv_reply_free(&r);
	free(body);
	free(value);
}

static void test_no_listener(void **state)
{
	struct testenv *e = *state;
	assert_int_equal(apiserver_port(e->api), -1);
	assert_null(e->admin);
}

/* A write is answered after its commit, with HTTPS's headers. */
static void test_write_then_read(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	create_cm(e, "one", 3);
	r = testenv_as_admin(e, "GET", CMS "/one", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "data.k"), "vvv");
	assert_string_equal(apiserver_exchange_header(r.x, "content-type", 0), "application/json");
	assert_string_equal(apiserver_exchange_header(r.x, "Cache-Control", 0),
	                    "no-cache, private");
	testenv_reply_free(&r);

	/* The query string is parsed as evhttp parses a request line's. */
	r = testenv_as_admin(e, "GET", CMS "?labelSelector=a%3Db&limit=1", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "items")), 0);
	testenv_reply_free(&r);
}

/* Who asks comes from the request: a certificate's CN and O's, a bearer
 * token, or nothing (401: anonymous access is off). */
static void test_authentication(void **state)
{
	static const char *const none[] = {NULL};
	struct testenv *e = *state;
	struct apiserver_request rq = {.method = "GET", .target = CMS};
	const char *bad_token[] = {"Authorization", "Bearer abcdef.0123456789abcdef", NULL};
	struct testenv_reply r;

	r = testenv_do(e, &rq);
	assert_int_equal(r.status, 401);
	assert_string_equal(jx_str(r.body, "reason"), "Unauthorized");
	testenv_reply_free(&r);

	rq.headers = bad_token;
	r = testenv_do(e, &rq);
	assert_int_equal(r.status, 401);
	testenv_reply_free(&r);

	/* A certificate without groups: authenticated, not authorized. */
	rq.headers = NULL;
	rq.user = "alice";
	rq.groups = none;
	r = testenv_do(e, &rq);
	assert_int_equal(r.status, 403);
	assert_non_null(strstr(jx_str(r.body, "message"),
	                       "User \"alice\" cannot list resource \"configmaps\""));
	testenv_reply_free(&r);
}

/* Warnings and Retry-After reach the reply's headers. */
static void test_reply_headers(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r =
	    testenv_as_admin(e, "POST", CMS "?fieldValidation=Warn", NULL,
	                     "{\"metadata\":{\"name\":\"warned\"},\"spec\":1}");
	assert_int_equal(r.status, 201);
	assert_string_equal(apiserver_exchange_header(r.x, "Warning", 0),
	                    "299 - \"unknown field \\\"spec\\\"\"");
	assert_null(apiserver_exchange_header(r.x, "Warning", 1));
	testenv_reply_free(&r);
}

/* Lines of a stream body that are whole events. */
static size_t events(const char *text, const char *type)
{
	size_t n = 0;
	char want[32];
	snprintf(want, sizeof(want), "{\"type\":\"%s\"", type);
	for (const char *p = text; (p = strstr(p, want)); p++)
		n++;
	return n;
}

static bool pump_until_events(struct testenv *e, struct apiserver_exchange *x, const char *type,
                              size_t n)
{
	for (int i = 0; i < 200; i++) {
		if (events(apiserver_exchange_body(x, NULL), type) >= n)
			return true;
		testenv_pump(e, 1);
	}
	return false;
}

/* A watch streams its initial events then what commits, and ends when the
 * caller goes away (the stream's resources freed: ASan checks). */
static void test_watch_stream(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x;

	create_cm(e, "before", 1);
	x = testenv_exchange_as_admin(e, "GET", CMS "?watch=1&resourceVersion=0", NULL, NULL);
	assert_int_equal(apiserver_exchange_status(x), 200);
	assert_false(apiserver_exchange_done(x));
	assert_true(pump_until_events(e, x, "ADDED", 1));
	create_cm(e, "after", 1);
	assert_true(pump_until_events(e, x, "ADDED", 2));
	assert_non_null(strstr(apiserver_exchange_body(x, NULL), "\"name\":\"after\""));
	apiserver_exchange_free(x);
	/* The server serves on. */
	create_cm(e, "later", 1);
}

/* A reader that stops reading is dropped once more than 8 MiB wait unsent
 * (watch.c's limit), and the server keeps serving everyone else. */
static void test_stalled_watcher_is_closed(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x =
	    testenv_exchange_as_admin(e, "GET", CMS "?watch=1&resourceVersion=0", NULL, NULL);
	char name[32];
	int i;

	apiserver_exchange_stall(x, true);
	for (i = 0; i < 20 && !apiserver_exchange_done(x); i++) {
		snprintf(name, sizeof(name), "big-%d", i);
		create_cm(e, name, 1 << 20);
		testenv_pump(e, 1);
	}
	assert_true(apiserver_exchange_done(x));
	/* Closed by the limit, after more than 8 and fewer than 12 events. */
	assert_in_range(i, 9, 12);
	apiserver_exchange_stall(x, false);
	apiserver_exchange_free(x);
	create_cm(e, "still-served", 1);
}

/* A client gone while its write commits: the answer goes nowhere, the
 * write stands, nothing leaks. */
static void test_client_gone_mid_write(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x = testenv_exchange_as_admin(
	    e, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"orphaned\"}}");
	struct testenv_reply r;

	assert_false(apiserver_exchange_done(x)); /* waits for its commit */
	apiserver_exchange_free(x);
	testenv_pump(e, 3);
	r = testenv_as_admin(e, "GET", CMS "/orphaned", NULL, NULL);
	assert_int_equal(r.status, 200);
	testenv_reply_free(&r);
}

/* A target no URI parser takes is a 400, not a crash (libevent's free
 * takes no NULL). */
static void test_unparsable_target(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = testenv_as_admin(e, "GET", "http://[::1/x", NULL, NULL);
	assert_int_equal(r.status, 400);
	testenv_reply_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_listener),
	    cmocka_unit_test(test_write_then_read),
	    cmocka_unit_test(test_authentication),
	    cmocka_unit_test(test_reply_headers),
	    cmocka_unit_test(test_watch_stream),
	    cmocka_unit_test(test_stalled_watcher_is_closed),
	    cmocka_unit_test(test_client_gone_mid_write),
	    cmocka_unit_test(test_unparsable_target),
	};
	return cmocka_run_group_tests(tests, setup, testenv_teardown);
}
