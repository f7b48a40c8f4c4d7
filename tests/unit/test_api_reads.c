/*
 * Reads and watches with upstream's resourceVersion semantics (issue 10,
 * item 8), in process. What this file pins, exactly as upstream 1.32
 * answers:
 *
 *   - a resourceVersion that is not a decimal revision: 400 with the
 *     strconv.ParseUint text (the etcd path's; see read.c for the watch
 *     cache's 500, an upstream bug cube does not copy);
 *   - ListOptions validation of resourceVersionMatch: 422;
 *   - a read from a revision not yet committed waits for it up to 3 s
 *     (answered as soon as it commits), then 504 "Too large resource
 *     version" with the ResourceVersionTooLarge cause and Retry-After: 1,
 *     as the watch cache's waitUntilFreshAndBlock;
 *   - continue tokens: the etcd store's encoding, every page read at the
 *     first page's revision (one snapshot), remainingItemCount only without
 *     selectors, the bad-token 400s, and the 410 with an rv -1 token once
 *     the snapshot has left the window;
 *   - watches: from resourceVersion 0 (a watch-list in 1.32: the server
 *     defaults sendInitialEvents=true) the initial events end with the
 *     k8s.io/initial-events-end bookmark; sendInitialEvents=false sends no
 *     ADDED for what exists; the periodic bookmark comes 2 s before
 *     timeoutSeconds ends the stream and carries the committed revision.
 *
 * The waits run on the virtual clock: exact (not answered at 2.999 s,
 * answered at 3 s) and instant. tests/e2e/test_apiserver.py's
 * test_resource_versions_as_upstream, test_continue_tokens_are_one_snapshot
 * and test_bookmarks_never_run_ahead drive the same through HTTPS.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/clock.h"
#include "base/jx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMS "/api/v1/namespaces/default/configmaps"
#define MERGE "application/merge-patch+json"
/* The window of the server whose snapshots are made to expire. */
#define SMALL_WINDOW 20

/* ---- servers ------------------------------------------------------------------ */

/* The server with the objects it seeds at start committed: until then the
 * committed revision is 0 (see test_wait_for_a_seeded_revision). */
static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "reads");
	testenv_pump(e, 3);
	*state = e;
	return 0;
}

/* On the virtual clock: the server's timers (the 3 s wait, bookmarks,
 * timeoutSeconds) fire only when the test moves time. */
static int setup_virtual(void **state)
{
	clock_use_virtual(clock_now());
	return setup(state);
}

/* The same, asked before the seeded objects have committed. */
static int setup_virtual_fresh(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	clock_use_virtual(clock_now());
	testenv_start_inproc(e, "reads");
	*state = e;
	return 0;
}

static int teardown_virtual(void **state)
{
	testenv_teardown(state);
	clock_use_real();
	return 0;
}

static void small_window(struct apiserver_opts *o)
{
	o->watch_window = SMALL_WINDOW;
}

/*
 * The server with a watch window of SMALL_WINDOW events, as `cube apiserver
 * --watch-window 20` in the e2e test: the default window (10,000 events)
 * would take that many writes to leave.
 */
static int setup_small_window(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc_tuned(e, "reads-window", small_window);
	testenv_pump(e, 3);
	*state = e;
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

/* A GET that must be refused with upstream's Status, exactly; a failure
 * names the target. */
static void expect_failure(struct testenv *e, const char *target, int code, const char *reason,
                           const char *message)
{
	struct testenv_reply r = testenv_as_admin(e, "GET", target, NULL, NULL);
	char *why = testenv_status_mismatch(&r, code, reason, message), buf[2048];

	testenv_reply_free(&r);
	if (why) {
		snprintf(buf, sizeof(buf), "GET %s: %s", target, why);
		free(why);
		fail_msg("%s", buf);
	}
}

static struct testenv_reply get_ok(struct testenv *e, const char *target)
{
	struct testenv_reply r = testenv_as_admin(e, "GET", target, NULL, NULL);
	if (r.status != 200)
		fail_msg("GET %s: %d %s", target, r.status, r.text);
	return r;
}

static void create_cm(struct testenv *e, const char *name, const char *labels)
{
	char body[256];
	struct testenv_reply r;

	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\",\"labels\":{%s}}}", name,
	         labels ? labels : "");
	r = testenv_as_admin(e, "POST", CMS, NULL, body);
	if (r.status != 201)
		fail_msg("create %s: %d %s", name, r.status, r.text);
	testenv_reply_free(&r);
}

static void request_ok(struct testenv *e, const char *method, const char *target,
                       const char *content_type, const char *body)
{
	struct testenv_reply r = testenv_as_admin(e, method, target, content_type, body);
	if (r.status != 200 && r.status != 201)
		fail_msg("%s %s: %d %s", method, target, r.status, r.text);
	testenv_reply_free(&r);
}

/* The list's revision, the one the next write will follow. */
static int64_t current_rv(struct testenv *e)
{
	struct testenv_reply r = get_ok(e, CMS);
	int64_t rv = strtoll(jx_str(r.body, "metadata.resourceVersion"), NULL, 10);
	testenv_reply_free(&r);
	assert_true(rv > 0);
	return rv;
}

/* The names of a list's items, comma-separated, into buf. */
static const char *names(const json_t *list, char *buf, size_t n)
{
	size_t i, len = 0;
	json_t *item;

	buf[0] = '\0';
	json_array_foreach(json_object_get(list, "items"), i, item)
	{
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "," : "",
		                        jx_str(item, "metadata.name"));
		assert_true(len < n);
	}
	return buf;
}

static void assert_names(const json_t *list, const char *want)
{
	char buf[256];
	assert_string_equal(names(list, buf, sizeof(buf)), want);
}

/* An exchange started now, answered as the loop runs. */
static struct apiserver_exchange *start_get(struct testenv *e, const char *target)
{
	return testenv_exchange_as_admin(e, "GET", target, NULL, NULL);
}

/* An exchange's reply body, parsed (the caller's). */
static json_t *parse_reply(struct apiserver_exchange *x)
{
	size_t n;
	const char *text = apiserver_exchange_body(x, &n);
	json_t *body = json_loadb(text, n, 0, NULL);
	if (!body)
		fail_msg("not JSON: %s", text);
	return body;
}

/* Go's base64.RawURLEncoding, decoded here rather than with the server's
 * own b64 code; the alphabet is checked on the way (no '=', no '+', '/'). */
static char *b64url_decode_raw(const char *s, size_t *len)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t n = strlen(s), o = 0;
	char *out = malloc(n + 1);
	uint32_t acc = 0;
	int bits = 0;

	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		const char *p = s[i] ? strchr(alphabet, s[i]) : NULL;
		if (!p)
			fail_msg("token %s: '%c' is not base64url without padding", s, s[i]);
		acc = acc << 6 | (uint32_t)(p - alphabet);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)(acc >> bits & 0xff);
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* A continue token is exactly json.Marshal of the etcd store's
 * continueToken{v, rv, start}: start the last key after the prefix and a
 * NUL (written \u0000). */
static void assert_token(const char *tok, int64_t rv, const char *start)
{
	char want[256], *text;
	size_t len;

	assert_non_null(tok);
	text = b64url_decode_raw(tok, &len);
	snprintf(want, sizeof(want),
	         "{\"v\":\"meta.k8s.io/v1\",\"rv\":%" PRId64 ",\"start\":\"%s\\u0000\"}", rv,
	         start);
	assert_int_equal(len, strlen(text)); /* the NUL is escaped, not raw */
	assert_string_equal(text, want);
	free(text);
}

static char *b64url_encode_raw(const char *s)
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t n = strlen(s), o = 0;
	char *out = malloc(n * 2 + 4);
	uint32_t acc = 0;
	int bits = 0;

	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		acc = acc << 8 | (unsigned char)s[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = alphabet[acc >> bits & 63];
		}
	}
	if (bits)
		out[o++] = alphabet[acc << (6 - bits) & 63];
	out[o] = '\0';
	return out;
}

/* ---- watch streams ---------------------------------------------------------- */

/* The whole events of a stream so far, parsed (the caller's). */
static json_t *stream_events(struct apiserver_exchange *x)
{
	const char *p = apiserver_exchange_body(x, NULL), *nl;
	json_t *events = json_array();

	for (; (nl = strchr(p, '\n')); p = nl + 1) {
		json_t *ev = json_loadb(p, (size_t)(nl - p), 0, NULL);
		if (!ev)
			fail_msg("not an event: %.*s", (int)(nl - p), p);
		json_array_append_new(events, ev);
	}
	return events;
}

static size_t count_type(const json_t *events, const char *type)
{
	size_t i, n = 0;
	json_t *ev;
	json_array_foreach(events, i, ev) n += !strcmp(jx_str(ev, "type"), type);
	return n;
}

/* Pump the loop until the stream holds n events of type (bounded). */
static bool pump_until_events(struct testenv *e, struct apiserver_exchange *x, const char *type,
                              size_t n)
{
	for (int i = 0; i < 200; i++) {
		json_t *events = stream_events(x);
		size_t have = count_type(events, type);
		json_decref(events);
		if (have >= n)
			return true;
		testenv_pump(e, 1);
	}
	return false;
}

static const char *event_name(const json_t *ev)
{
	return jx_str(json_object_get(ev, "object"), "metadata.name");
}

static int64_t event_rv(const json_t *ev)
{
	return strtoll(jx_str(json_object_get(ev, "object"), "metadata.resourceVersion"), NULL, 10);
}

/* ---- malformed revisions and ListOptions -------------------------------------- */

static void test_malformed_resource_version_is_400(void **state)
{
	static const struct {
		const char *rv, *why;
	} cases[] = {
	    {"abc", "invalid syntax"},
	    {"-1", "invalid syntax"},
	    {"99999999999999999999", "value out of range"},
	};
	static const char *const targets[] = {CMS "?resourceVersion=%s",
	                                      CMS "/some?resourceVersion=%s",
	                                      CMS "?watch=1&resourceVersion=%s"};
	struct testenv *e = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
			char target[128], want[256];
			snprintf(target, sizeof(target), targets[t], cases[i].rv);
			snprintf(want, sizeof(want),
			         "invalid resource version: resourceVersion: Invalid value: "
			         "\"%s\": strconv.ParseUint: parsing \"%s\": %s",
			         cases[i].rv, cases[i].rv, cases[i].why);
			expect_failure(e, target, 400, "BadRequest", want);
		}
	}
}

/* validation.ValidateListOptions: 422 on ListOptions, one cause each. */
static void test_resource_version_match_is_validated(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r =
	    testenv_as_admin(e, "GET", CMS "?resourceVersionMatch=Exact", NULL, NULL);
	json_t *causes;

	testenv_assert_status(
	    &r, 422, "Invalid",
	    "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
	    "resourceVersionMatch is forbidden unless resourceVersion is provided");
	assert_string_equal(jx_str(r.body, "details.group"), "meta.k8s.io");
	assert_string_equal(jx_str(r.body, "details.kind"), "ListOptions");
	assert_null(jx_get(r.body, "details.name"));
	causes = jx_get(r.body, "details.causes");
	assert_int_equal(json_array_size(causes), 1);
	assert_string_equal(jx_str(json_array_get(causes, 0), "reason"), "FieldValueForbidden");
	assert_string_equal(jx_str(json_array_get(causes, 0), "field"), "resourceVersionMatch");
	testenv_reply_free(&r);

	expect_failure(e, CMS "?resourceVersion=0&resourceVersionMatch=Exact", 422, "Invalid",
	               "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
	               "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
	expect_failure(e, CMS "?resourceVersion=1&resourceVersionMatch=Newest", 422, "Invalid",
	               "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported "
	               "value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"");
	/* More than one: the aggregate's "[a, b]". */
	expect_failure(e, CMS "?resourceVersionMatch=Newest", 422, "Invalid",
	               "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: "
	               "resourceVersionMatch is forbidden unless resourceVersion is provided, "
	               "resourceVersionMatch: Unsupported value: \"Newest\": supported values: "
	               "\"Exact\", \"NotOlderThan\", \"\"]");
	/* NotOlderThan with a revision is a plain read. */
	r = get_ok(e, CMS "?resourceVersion=1&resourceVersionMatch=NotOlderThan");
	assert_string_equal(jx_str(r.body, "kind"), "ConfigMapList");
	testenv_reply_free(&r);
}

/* ---- waiting for a revision (virtual clock) ------------------------------------ */

static void assert_too_large(struct apiserver_exchange *x, int64_t rv, int64_t current)
{
	size_t n;
	const char *text = apiserver_exchange_body(x, &n);
	json_t *st = json_loadb(text, n, 0, NULL), *want;
	char msg[128];

	assert_int_equal(apiserver_exchange_status(x), 504);
	assert_non_null(st);
	snprintf(msg, sizeof(msg),
	         "Timeout: Too large resource version: %" PRId64 ", current: %" PRId64, rv,
	         current);
	assert_string_equal(jx_str(st, "kind"), "Status");
	assert_string_equal(jx_str(st, "status"), "Failure");
	assert_string_equal(jx_str(st, "reason"), "Timeout");
	assert_int_equal(jx_int(st, "code", 0), 504);
	assert_string_equal(jx_str(st, "message"), msg);
	want = json_loads("[{\"reason\":\"ResourceVersionTooLarge\","
	                  "\"message\":\"Too large resource version\"}]",
	                  0, NULL);
	assert_true(json_equal(jx_get(st, "details.causes"), want));
	assert_int_equal(jx_int(st, "details.retryAfterSeconds", 0), 1);
	assert_string_equal(apiserver_exchange_header(x, "Retry-After", 0), "1");
	json_decref(want);
	json_decref(st);
}

/* A LIST and a GET from a revision far ahead wait exactly 3 s (the watch
 * cache's blockTimeout), then 504 with Retry-After: 1. */
static void test_future_revision_waits_3s_then_504(void **state)
{
	struct testenv *e = *state;
	int64_t current = current_rv(e), ahead = current + 1000;
	char list[128], one[128];
	struct apiserver_exchange *lx, *gx;

	snprintf(list, sizeof(list), CMS "?resourceVersion=%" PRId64, ahead);
	snprintf(one, sizeof(one), CMS "/nothing?resourceVersion=%" PRId64, ahead);
	lx = start_get(e, list);
	gx = start_get(e, one);
	testenv_pump(e, 2);
	clock_advance(3 * NS_PER_SEC - NS_PER_MS);
	testenv_pump(e, 2);
	assert_false(apiserver_exchange_done(lx));
	assert_false(apiserver_exchange_done(gx));
	clock_advance(NS_PER_MS);
	assert_true(testenv_wait(e, lx));
	assert_true(testenv_wait(e, gx));
	assert_too_large(lx, ahead, current);
	assert_too_large(gx, ahead, current);
	apiserver_exchange_free(lx);
	apiserver_exchange_free(gx);
}

/* A revision that commits while the read waits: answered then, with it,
 * long before the 3 s (the clock never moves here). */
static void test_wait_is_answered_by_the_commit(void **state)
{
	struct testenv *e = *state;
	int64_t current = current_rv(e);
	char list[128], one[128];
	struct apiserver_exchange *lx, *gx;
	json_t *body;

	snprintf(list, sizeof(list), CMS "?resourceVersion=%" PRId64, current + 1);
	/* The object does not exist yet: the GET is answered with it, so the
	 * read was redone after the wait. */
	snprintf(one, sizeof(one), CMS "/rv-later?resourceVersion=%" PRId64, current + 1);
	lx = start_get(e, list);
	gx = start_get(e, one);
	testenv_pump(e, 2);
	assert_false(apiserver_exchange_done(lx));
	assert_false(apiserver_exchange_done(gx));

	create_cm(e, "rv-later", NULL);
	assert_true(testenv_wait(e, lx));
	assert_true(testenv_wait(e, gx));

	assert_int_equal(apiserver_exchange_status(lx), 200);
	body = parse_reply(lx);
	assert_names(body, "rv-later");
	assert_true(strtoll(jx_str(body, "metadata.resourceVersion"), NULL, 10) >= current + 1);
	json_decref(body);
	assert_int_equal(apiserver_exchange_status(gx), 200);
	body = parse_reply(gx);
	assert_string_equal(jx_str(body, "metadata.name"), "rv-later");
	json_decref(body);
	apiserver_exchange_free(lx);
	apiserver_exchange_free(gx);
}

/*
 * A read from a revision the server's own start-up writes (the seeded
 * namespaces, RBAC and bootstrap objects) are still committing is answered
 * as soon as that revision commits, as the watch cache's
 * waitUntilFreshAndBlock is woken by every commit. (The commit watch once
 * started at the last revision handed out, so those commits never woke
 * the wait: 504 after 3 s with a current already past the revision.)
 */
static void test_wait_for_a_seeded_revision(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x = start_get(e, CMS "?resourceVersion=1");

	testenv_pump(e, 3); /* every start-up write commits; the clock stands */
	assert_int_equal(apiserver_writes_inflight(e->api), 0);
	if (!apiserver_exchange_done(x)) {
		clock_advance(3 * NS_PER_SEC);
		assert_true(testenv_wait(e, x));
		char text[512];
		snprintf(text, sizeof(text), "%s", apiserver_exchange_body(x, NULL));
		int status = apiserver_exchange_status(x);
		apiserver_exchange_free(x);
		fail_msg("revision 1 committed, the read still waited 3 s: %d %s", status, text);
	}
	assert_int_equal(apiserver_exchange_status(x), 200);
	apiserver_exchange_free(x);
}

/* ---- continue tokens ---------------------------------------------------------- */

static void create_pages(struct testenv *e, int n)
{
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "page-%d", i);
		create_cm(e, name, "\"watch\":\"yes\"");
	}
}

/* A token carries the first page's revision: later pages show the list as
 * it was then, not the writes made in between. */
static void test_continue_pages_are_one_snapshot(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply first, second, third;
	const char *rv;
	char target[512];
	json_t *page3;

	create_pages(e, 5);
	first = get_ok(e, CMS "?limit=2");
	assert_names(first.body, "page-0,page-1");
	rv = jx_str(first.body, "metadata.resourceVersion");
	assert_token(jx_str(first.body, "metadata.continue"), strtoll(rv, NULL, 10), "page-1");
	assert_int_equal(jx_int(first.body, "metadata.remainingItemCount", -1), 3);

	/* between the pages: page-3 changes, page-4 goes, page-5 comes */
	request_ok(e, "PATCH", CMS "/page-3", MERGE, "{\"data\":{\"changed\":\"yes\"}}");
	request_ok(e, "DELETE", CMS "/page-4", NULL, NULL);
	create_cm(e, "page-5", NULL);

	snprintf(target, sizeof(target), CMS "?limit=2&continue=%s",
	         jx_str(first.body, "metadata.continue"));
	second = get_ok(e, target);
	assert_names(second.body, "page-2,page-3");
	assert_string_equal(jx_str(second.body, "metadata.resourceVersion"), rv);
	page3 = json_array_get(jx_get(second.body, "items"), 1);
	assert_null(jx_get(page3, "data.changed"));
	assert_token(jx_str(second.body, "metadata.continue"), strtoll(rv, NULL, 10), "page-3");
	assert_int_equal(jx_int(second.body, "metadata.remainingItemCount", -1), 1);

	snprintf(target, sizeof(target), CMS "?limit=2&continue=%s",
	         jx_str(second.body, "metadata.continue"));
	third = get_ok(e, target);
	assert_names(third.body, "page-4"); /* gone since, not in the snapshot's past */
	assert_string_equal(jx_str(third.body, "metadata.resourceVersion"), rv);
	/* The last page: no token, nothing remaining. */
	assert_null(jx_get(third.body, "metadata.continue"));
	assert_null(jx_get(third.body, "metadata.remainingItemCount"));

	testenv_reply_free(&third);
	testenv_reply_free(&second);
	testenv_reply_free(&first);
}

/* Upstream counts what remains only when it does not have to filter. */
static void test_remaining_item_count_only_without_selectors(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	create_pages(e, 5);
	r = get_ok(e, CMS "?limit=2&labelSelector=watch%3Dyes");
	assert_names(r.body, "page-0,page-1");
	assert_non_null(jx_str(r.body, "metadata.continue"));
	assert_null(jx_get(r.body, "metadata.remainingItemCount"));
	testenv_reply_free(&r);

	r = get_ok(e, CMS "?limit=2&fieldSelector=metadata.name%21%3Dpage-0");
	assert_names(r.body, "page-1,page-2");
	assert_non_null(jx_str(r.body, "metadata.continue"));
	assert_null(jx_get(r.body, "metadata.remainingItemCount"));
	testenv_reply_free(&r);

	r = get_ok(e, CMS "?limit=2");
	assert_int_equal(jx_int(r.body, "metadata.remainingItemCount", -1), 3);
	testenv_reply_free(&r);
}

/* A list's items are exactly these names. */
static void expect_names(struct testenv *e, const char *target, const char *want)
{
	struct testenv_reply r = get_ok(e, target);
	assert_names(r.body, want);
	testenv_reply_free(&r);
}

/*
 * A list whose field selector names one object (metadata.name=X, as a
 * kubelet's informer on its own Node) is answered by looking it up: the
 * same answer as the scan's, names that share a prefix not taken, the other
 * selectors still applied, an older revision still served.
 */
static void test_list_of_one_name(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	char target[256], rv[32];

	create_cm(e, "one", "\"tier\":\"a\"");
	create_cm(e, "one-more", "\"tier\":\"a\"");
	create_cm(e, "on", NULL);
	r = get_ok(e, CMS "?fieldSelector=metadata.name%3Done");
	assert_names(r.body, "one");
	snprintf(rv, sizeof(rv), "%s", jx_str(r.body, "metadata.resourceVersion"));
	testenv_reply_free(&r);
	expect_names(e, CMS "?fieldSelector=metadata.name%3D%3Done&labelSelector=tier%3Da", "one");
	expect_names(e, CMS "?fieldSelector=metadata.name%3Done&labelSelector=tier%3Db", "");
	expect_names(e, CMS "?fieldSelector=metadata.name%3Done,metadata.namespace%3Dother", "");
	expect_names(e, CMS "?fieldSelector=metadata.name%3Dnone", "");
	/* Across namespaces: every namespace's "one". */
	expect_names(e, "/api/v1/configmaps?fieldSelector=metadata.name%3Done", "one");
	/* At the revision of the first list, after a change. */
	testenv_expect_code(testenv_as_admin(e, "DELETE", CMS "/one", NULL, NULL), 200);
	expect_names(e, CMS "?fieldSelector=metadata.name%3Done", "");
	snprintf(target, sizeof(target),
	         CMS "?fieldSelector=metadata.name%%3Done&resourceVersion=%s"
	             "&resourceVersionMatch=Exact",
	         rv);
	expect_names(e, target, "one");
}

/* storage.ValidateListOptions / DecodeContinue's texts, as 400s. */
static void test_bad_continue_tokens_are_400(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	char target[512], *tok;

	expect_failure(e, CMS "?continue=%21%21", 400, "BadRequest",
	               "invalid continue token: continue key is not valid: illegal base64 data "
	               "at input byte 0");

	tok = b64url_encode_raw("{\"v\":\"x\",\"rv\":1,\"start\":\"a\"}");
	snprintf(target, sizeof(target), CMS "?continue=%s", tok);
	expect_failure(e, target, 400, "BadRequest",
	               "invalid continue token: continue key is not valid: server does not "
	               "recognize this encoded version x");
	free(tok);

	tok = b64url_encode_raw("{\"v\":\"meta.k8s.io/v1\",\"rv\":0,\"start\":\"a\"}");
	snprintf(target, sizeof(target), CMS "?continue=%s", tok);
	expect_failure(e, target, 400, "BadRequest",
	               "invalid continue token: continue key is not valid: incorrect encoded start "
	               "resourceVersion (version meta.k8s.io/v1)");
	free(tok);

	tok = b64url_encode_raw("{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"\"}");
	snprintf(target, sizeof(target), CMS "?continue=%s", tok);
	expect_failure(e, target, 400, "BadRequest",
	               "invalid continue token: continue key is not valid: encoded start key "
	               "empty (version meta.k8s.io/v1)");
	free(tok);

	/* A good token, and a resourceVersion with it. */
	create_pages(e, 3);
	r = get_ok(e, CMS "?limit=1");
	snprintf(target, sizeof(target), CMS "?continue=%s&resourceVersion=5",
	         jx_str(r.body, "metadata.continue"));
	expect_failure(e, target, 400, "BadRequest",
	               "specifying resource version is not allowed when using continue");
	/* "0" is no revision: allowed. */
	snprintf(target, sizeof(target), CMS "?continue=%s&resourceVersion=0",
	         jx_str(r.body, "metadata.continue"));
	testenv_reply_free(&r);
	r = get_ok(e, target);
	assert_names(r.body, "page-1,page-2");
	testenv_reply_free(&r);
}

/* Once the snapshot has left the window (SMALL_WINDOW events): 410 Expired
 * with the etcd store's inconsistentContinue text and, in
 * metadata.continue, the same start at rv -1, which continues at the
 * latest revision. */
static void test_continue_past_the_window_is_410_with_fresh_token(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply first, r;
	char target[512];
	const char *fresh;
	int64_t rv;

	create_pages(e, 5);
	first = get_ok(e, CMS "?limit=2");
	rv = strtoll(jx_str(first.body, "metadata.resourceVersion"), NULL, 10);
	for (int i = 0; i < SMALL_WINDOW + 5; i++) {
		char body[64];
		snprintf(body, sizeof(body), "{\"data\":{\"n\":\"%d\"}}", i);
		request_ok(e, "PATCH", CMS "/page-0", MERGE, body);
	}
	request_ok(e, "DELETE", CMS "/page-3", NULL, NULL);
	create_cm(e, "page-5", NULL);

	snprintf(target, sizeof(target), CMS "?limit=10&continue=%s",
	         jx_str(first.body, "metadata.continue"));
	r = testenv_as_admin(e, "GET", target, NULL, NULL);
	testenv_assert_status(
	    &r, 410, "Expired",
	    "The provided continue parameter is too old to display a consistent list "
	    "result. You can start a new list without the continue parameter, or use "
	    "the continue token in this response to retrieve the remainder of the "
	    "results. Continuing with the provided token results in an inconsistent "
	    "list - objects that were created, modified, or deleted between the time "
	    "the first chunk was returned and now may show up in the list.");
	fresh = jx_str(r.body, "metadata.continue");
	assert_token(fresh, -1, "page-1");

	/* The fresh token: the rest of the list as it is now. */
	snprintf(target, sizeof(target), CMS "?limit=10&continue=%s", fresh);
	testenv_reply_free(&first);
	first = get_ok(e, target);
	assert_names(first.body, "page-2,page-4,page-5");
	assert_true(strtoll(jx_str(first.body, "metadata.resourceVersion"), NULL, 10) >
	            rv + SMALL_WINDOW);
	testenv_reply_free(&first);
	testenv_reply_free(&r);

	/* An exact read of that revision, either form: too old. */
	snprintf(target, sizeof(target),
	         CMS "?resourceVersion=%" PRId64 "&resourceVersionMatch=Exact", rv);
	expect_failure(e, target, 410, "Expired",
	               "The resourceVersion for the provided list is too old.");
	snprintf(target, sizeof(target), CMS "?resourceVersion=%" PRId64 "&limit=2", rv);
	expect_failure(e, target, 410, "Expired",
	               "The resourceVersion for the provided list is too old.");
}

/* ---- watches --------------------------------------------------------------------- */

/* From "0", with bookmarks: 1.32 defaults the watch to sendInitialEvents=
 * true (SetListOptionsDefaults), so the ADDED of what exists end with the
 * bookmark annotated k8s.io/initial-events-end, at the list's revision;
 * what commits afterwards follows it. */
static void test_watch_from_zero_ends_initial_events_with_bookmark(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x;
	json_t *events, *mark, *want;
	int64_t rv;

	create_cm(e, "a", NULL);
	create_cm(e, "b", NULL);
	rv = current_rv(e);
	x = start_get(e, CMS "?watch=1&resourceVersion=0&allowWatchBookmarks=true");
	assert_int_equal(apiserver_exchange_status(x), 200);
	assert_string_equal(apiserver_exchange_header(x, "Content-Type", 0), "application/json");
	assert_true(pump_until_events(e, x, "BOOKMARK", 1));
	create_cm(e, "c", NULL);
	assert_true(pump_until_events(e, x, "ADDED", 3));

	events = stream_events(x);
	assert_int_equal(json_array_size(events), 4);
	assert_string_equal(jx_str(json_array_get(events, 0), "type"), "ADDED");
	assert_string_equal(event_name(json_array_get(events, 0)), "a");
	assert_string_equal(jx_str(json_array_get(events, 1), "type"), "ADDED");
	assert_string_equal(event_name(json_array_get(events, 1)), "b");
	mark = json_array_get(events, 2);
	assert_string_equal(jx_str(mark, "type"), "BOOKMARK");
	assert_string_equal(jx_str(mark, "object.kind"), "ConfigMap");
	assert_string_equal(jx_str(mark, "object.apiVersion"), "v1");
	assert_int_equal(event_rv(mark), rv);
	want = json_pack("{s:s}", "k8s.io/initial-events-end", "true");
	assert_true(
	    json_equal(jx_get(json_object_get(mark, "object"), "metadata.annotations"), want));
	assert_string_equal(jx_str(json_array_get(events, 3), "type"), "ADDED");
	assert_string_equal(event_name(json_array_get(events, 3)), "c");
	assert_true(event_rv(json_array_get(events, 3)) > rv);
	json_decref(want);
	json_decref(events);
	apiserver_exchange_free(x);
}

/* Without allowWatchBookmarks there is no bookmark to end them with. */
static void test_watch_without_bookmarks_sends_none(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x;
	json_t *events;

	create_cm(e, "a", NULL);
	x = start_get(e, CMS "?watch=1&resourceVersion=0");
	assert_true(pump_until_events(e, x, "ADDED", 1));
	create_cm(e, "b", NULL);
	assert_true(pump_until_events(e, x, "ADDED", 2));
	events = stream_events(x);
	assert_int_equal(json_array_size(events), 2);
	assert_int_equal(count_type(events, "BOOKMARK"), 0);
	json_decref(events);
	apiserver_exchange_free(x);
}

/* sendInitialEvents=false (with the resourceVersionMatch=NotOlderThan it
 * requires): no ADDED for what exists, and no initial-events-end bookmark;
 * only what commits from now on. */
static void test_watch_without_initial_events_sends_no_added(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x;
	json_t *events;

	create_cm(e, "old-1", NULL);
	create_cm(e, "old-2", NULL);
	x = start_get(e, CMS "?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
	                     "&allowWatchBookmarks=true");
	assert_int_equal(apiserver_exchange_status(x), 200);
	testenv_pump(e, 3);
	create_cm(e, "new", NULL);
	assert_true(pump_until_events(e, x, "ADDED", 1));
	events = stream_events(x);
	assert_int_equal(json_array_size(events), 1);
	assert_string_equal(jx_str(json_array_get(events, 0), "type"), "ADDED");
	assert_string_equal(event_name(json_array_get(events, 0)), "new");
	json_decref(events);
	apiserver_exchange_free(x);
}

/*
 * The periodic bookmark (virtual clock): 2 s before timeoutSeconds ends the
 * stream (cacheWatcher.nextBookmarkTime), carrying the committed revision —
 * no older than any event sent — and the stream ends at timeoutSeconds.
 */
static void test_periodic_bookmark_before_timeout_carries_committed_rv(void **state)
{
	struct testenv *e = *state;
	struct apiserver_exchange *x =
	    start_get(e, CMS "?watch=true&allowWatchBookmarks=true&timeoutSeconds=4");
	json_t *events, *mark;
	int64_t added_rv;

	assert_true(pump_until_events(e, x, "BOOKMARK", 1)); /* initial-events-end */
	create_cm(e, "bm-1", NULL);
	assert_true(pump_until_events(e, x, "ADDED", 1));
	events = stream_events(x);
	added_rv = event_rv(json_array_get(events, json_array_size(events) - 1));
	json_decref(events);

	clock_advance(2 * NS_PER_SEC - NS_PER_MS);
	testenv_pump(e, 2);
	events = stream_events(x);
	assert_int_equal(count_type(events, "BOOKMARK"), 1);
	json_decref(events);

	clock_advance(NS_PER_MS);
	assert_true(pump_until_events(e, x, "BOOKMARK", 2));
	events = stream_events(x);
	mark = json_array_get(events, json_array_size(events) - 1);
	assert_string_equal(jx_str(mark, "type"), "BOOKMARK");
	assert_int_equal(event_rv(mark), added_rv); /* nothing else has committed */
	/* only the first bookmark is the annotated one */
	assert_null(jx_get(json_object_get(mark, "object"), "metadata.annotations"));
	json_decref(events);
	assert_false(apiserver_exchange_done(x));

	clock_advance(2 * NS_PER_SEC);
	assert_true(testenv_wait(e, x));
	events = stream_events(x);
	assert_int_equal(count_type(events, "BOOKMARK"), 2);
	json_decref(events);
	apiserver_exchange_free(x);
}

/*
 * A watch's ListOptions are validated as upstream's validateWatchOptions
 * does: sendInitialEvents needs resourceVersionMatch=NotOlderThan, and
 * resourceVersionMatch on a watch needs sendInitialEvents.
 */
/* A watch that must be refused at once, not streamed. */
static void expect_watch_refused(struct testenv *e, const char *target, const char *message)
{
	struct apiserver_exchange *x = start_get(e, target);
	struct testenv_reply r = {0};
	char *why, buf[2048];
	size_t n;

	testenv_pump(e, 1);
	if (!apiserver_exchange_done(x)) {
		int status = apiserver_exchange_status(x);
		apiserver_exchange_free(x);
		fail_msg("GET %s: streams (%d) instead of a 422", target, status);
	}
	r.status = apiserver_exchange_status(x);
	r.text = strdup(apiserver_exchange_body(x, &n));
	r.body = json_loadb(r.text, n, 0, NULL);
	r.x = x;
	why = testenv_status_mismatch(&r, 422, "Invalid", message);
	testenv_reply_free(&r);
	if (why) {
		snprintf(buf, sizeof(buf), "GET %s: %s", target, why);
		free(why);
		fail_msg("%s", buf);
	}
}

static void test_watch_options_are_validated(void **state)
{
	struct testenv *e = *state;

	expect_watch_refused(
	    e, CMS "?watch=1&sendInitialEvents=false",
	    "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
	    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
	expect_watch_refused(
	    e, CMS "?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan",
	    "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
	    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_list_of_one_name, setup, testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_resource_version_is_400, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_resource_version_match_is_validated, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_future_revision_waits_3s_then_504, setup_virtual,
	                                    teardown_virtual),
	    cmocka_unit_test_setup_teardown(test_wait_is_answered_by_the_commit, setup_virtual,
	                                    teardown_virtual),
	    cmocka_unit_test_setup_teardown(test_wait_for_a_seeded_revision, setup_virtual_fresh,
	                                    teardown_virtual),
	    cmocka_unit_test_setup_teardown(test_continue_pages_are_one_snapshot, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_remaining_item_count_only_without_selectors, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_continue_tokens_are_400, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_continue_past_the_window_is_410_with_fresh_token,
	                                    setup_small_window, testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_watch_from_zero_ends_initial_events_with_bookmark,
	                                    setup, testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_watch_without_bookmarks_sends_none, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(test_watch_without_initial_events_sends_no_added, setup,
	                                    testenv_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_periodic_bookmark_before_timeout_carries_committed_rv, setup_virtual,
	        teardown_virtual),
	    cmocka_unit_test_setup_teardown(test_watch_options_are_validated, setup,
	                                    testenv_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
