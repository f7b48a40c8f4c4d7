/*
 * The event recorder against a real in-process API server, on the virtual
 * clock: the Event as client-go writes it, a repeat patched into count+1
 * (kubectl describe's "x3 over ..."), the 10th distinct message about the
 * same object and reason combined, the 25-event burst per object and its
 * 5-minute refill.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "client/events.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <string.h>

static struct testenv env;

static int setup(void **state)
{
	(void)state;
	clock_use_virtual(INT64_C(1767225600) * NS_PER_SEC);
	testenv_start(&env, "events");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	testenv_stop(&env);
	return 0;
}

/* The Events in namespace ns about `name`, as a fresh array. */
static json_t *events_about(const char *ns, const char *name)
{
	char path[256];
	struct testenv_result r;
	json_t *out = json_array(), *ev;
	size_t i;

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
	r = testenv_call(&env, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	json_array_foreach(json_object_get(r.body, "items"), i, ev) if (
		!strcmp(jx_str(ev, "involvedObject.name") ?: "", name)) json_array_append(out, ev);
	json_decref(r.body);
	return out;
}

static void test_event_and_repeats(void **state)
{
	struct event_recorder *rec = event_recorder_new(env.loop, env.admin, "node-controller", NULL, 3);
	struct event_ref ref = {"v1", "Node", NULL, "n1", "uid-1"};
	json_t *evs, *ev;
	char first[TIME_BUF];

	(void)state;
	event_record(rec, &ref, "Normal", "RegisteredNode",
		     "Node %s event: Registered Node %s in Controller", "n1", "n1");
	testenv_pump(&env, 3);
	evs = events_about("default", "n1");
	assert_int_equal(json_array_size(evs), 1);
	ev = json_array_get(evs, 0);
	assert_string_equal(jx_str(ev, "reason"), "RegisteredNode");
	assert_string_equal(jx_str(ev, "message"), "Node n1 event: Registered Node n1 in Controller");
	assert_string_equal(jx_str(ev, "type"), "Normal");
	assert_string_equal(jx_str(ev, "source.component"), "node-controller");
	assert_string_equal(jx_str(ev, "reportingComponent"), "node-controller");
	assert_string_equal(jx_str(ev, "involvedObject.kind"), "Node");
	assert_string_equal(jx_str(ev, "involvedObject.uid"), "uid-1");
	assert_null(jx_get(ev, "involvedObject.namespace"));
	assert_int_equal(jx_int(ev, "count", 0), 1);
	assert_true(!strncmp(jx_str(ev, "metadata.name"), "n1.", 3));
	snprintf(first, sizeof(first), "%s", jx_str(ev, "firstTimestamp"));
	json_decref(evs);

	/* Two repeats a minute apart: the same Event, count 3, first kept. */
	for (int i = 0; i < 2; i++) {
		clock_advance(60 * NS_PER_SEC);
		event_record(rec, &ref, "Normal", "RegisteredNode",
			     "Node %s event: Registered Node %s in Controller", "n1", "n1");
		testenv_pump(&env, 3);
	}
	evs = events_about("default", "n1");
	assert_int_equal(json_array_size(evs), 1);
	ev = json_array_get(evs, 0);
	assert_int_equal(jx_int(ev, "count", 0), 3);
	assert_string_equal(jx_str(ev, "firstTimestamp"), first);
	assert_string_not_equal(jx_str(ev, "lastTimestamp"), first);
	json_decref(evs);

	/* A different reason is a different Event. */
	event_record(rec, &ref, "Normal", "NodeNotReady", "Node %s status is now: NodeNotReady",
		     "n1");
	testenv_pump(&env, 3);
	evs = events_about("default", "n1");
	assert_int_equal(json_array_size(evs), 2);
	json_decref(evs);
	event_recorder_free(rec);
}

static void test_aggregation_and_spam(void **state)
{
	struct event_recorder *rec = event_recorder_new(env.loop, env.admin, "default-scheduler", "h", 3);
	struct event_ref ref = {"v1", "Pod", "default", "p1", "uid-p1"};
	json_t *evs, *ev;
	size_t i;
	int separate = 0;
	long combined = 0;

	(void)state;
	/* 30 distinct messages: 9 Events, then one combined Event for the 10th
	 * and later; the last 5 are over the burst of 25 and not sent, but
	 * counted: the combined Event's last write (writes to one Event go one
	 * at a time, the latest count winning) says 21. */
	for (int k = 0; k < 30; k++)
		event_record(rec, &ref, "Warning", "FailedScheduling", "attempt %d", k);
	testenv_pump(&env, 3);
	evs = events_about("default", "p1");
	json_array_foreach(evs, i, ev)
	{
		const char *msg = jx_str(ev, "message");
		assert_string_equal(jx_str(ev, "involvedObject.namespace"), "default");
		assert_string_equal(jx_str(ev, "source.host"), "h");
		if (!strncmp(msg, "(combined from similar events): ", 32)) {
			combined = jx_int(ev, "count", 0);
			assert_string_equal(msg, "(combined from similar events): attempt 24");
		} else {
			separate++;
		}
	}
	assert_int_equal(separate, 9);
	assert_int_equal(combined, 21);
	json_decref(evs);

	/* Five minutes give one token back: of two more, the first is sent
	 * (count 22), the second only counted. */
	clock_advance(300 * NS_PER_SEC);
	event_record(rec, &ref, "Warning", "FailedScheduling", "attempt %d", 30);
	event_record(rec, &ref, "Warning", "FailedScheduling", "attempt %d", 31);
	testenv_pump(&env, 3);
	evs = events_about("default", "p1");
	json_array_foreach(evs, i, ev) if (!strncmp(jx_str(ev, "message"), "(combined", 9))
		combined = jx_int(ev, "count", 0);
	assert_int_equal(combined, 22);
	json_decref(evs);
	event_recorder_free(rec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_and_repeats),
		cmocka_unit_test(test_aggregation_and_spam),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
