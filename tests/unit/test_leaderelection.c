/*
 * Leader election on a real API server, on the virtual clock: client-go's
 * numbers (lease 15 s, renew deadline 10 s, retry 2 s, jitter 1.2) pinned —
 * who takes the lease, when a candidate may take over a silent holder,
 * when a holder that cannot renew gives up, and a release.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "client/leaderelection.h"
#include "testenv.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/timeutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASE "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"

struct candidate {
	struct leader_elector *le;
	int started, stopped;
};

static void on_started(void *arg)
{
	((struct candidate *)arg)->started++;
}

static void on_stopped(void *arg)
{
	((struct candidate *)arg)->stopped++;
}

static void candidate_start(struct testenv *e, struct candidate *c, const char *identity)
{
	struct leader_election_config cfg = {.ns = "kube-system",
	                                     .name = "kube-controller-manager",
	                                     .identity = identity,
	                                     .on_started = on_started,
	                                     .on_stopped = on_stopped,
	                                     .arg = c};
	memset(c, 0, sizeof(*c));
	c->le = leader_elector_start(e->loop, e->admin, &cfg);
	testenv_pump(e, 3);
}

/* Move the virtual clock by ms in 100 ms steps, the loop answering between. */
static void run_for(struct testenv *e, int ms)
{
	for (int t = 0; t < ms; t += 100) {
		clock_advance(100 * 1000 * 1000);
		testenv_pump(e, 2);
	}
}

/* Virtual milliseconds until *flag is set (at most limit_ms; it must be). */
static int ms_until(struct testenv *e, const int *flag, int limit_ms)
{
	int ms = 0;
	while (!*flag && ms < limit_ms) {
		run_for(e, 100);
		ms += 100;
	}
	assert_int_equal(*flag, 1);
	return ms;
}

static json_t *lease(struct testenv *e)
{
	struct testenv_result r = testenv_call(e, "GET", LEASE, NULL);
	assert_int_equal(r.status, 200);
	return r.body;
}

static const char *holder_of(json_t *l)
{
	return jx_str(l, "spec.holderIdentity") ?: "";
}

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	clock_use_virtual((int64_t)time(NULL) * NS_PER_SEC);
	testenv_quiet_logs();
	testenv_start(e, "leader");
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	testenv_teardown(state);
	clock_use_real();
	return 0;
}

/* The first candidate creates the Lease and leads; the second waits
 * while the holder renews every retry period. */
static void test_first_takes_second_waits(void **state)
{
	struct testenv *e = *state;
	struct candidate a, b;
	json_t *l;
	char renewed[64];

	candidate_start(e, &a, "host-a_1");
	assert_int_equal(a.started, 1);
	assert_true(leader_elector_is_leader(a.le));
	l = lease(e);
	assert_string_equal(holder_of(l), "host-a_1");
	assert_int_equal(jx_int(l, "spec.leaseDurationSeconds", 0), 15);
	assert_int_equal(jx_int(l, "spec.leaseTransitions", -1), 0);
	snprintf(renewed, sizeof(renewed), "%s", jx_str(l, "spec.renewTime"));
	json_decref(l);

	candidate_start(e, &b, "host-b_2");
	assert_int_equal(b.started, 0);
	assert_false(leader_elector_is_leader(b.le));
	assert_string_equal(leader_elector_leader(b.le), "host-a_1");
	/* A minute: a renews every 2 s, b never leads. */
	run_for(e, 60 * 1000);
	assert_int_equal(b.started, 0);
	assert_int_equal(a.stopped, 0);
	l = lease(e);
	assert_string_equal(holder_of(l), "host-a_1");
	assert_string_not_equal(jx_str(l, "spec.renewTime"), renewed);
	json_decref(l);
	leader_elector_free(a.le);
	leader_elector_free(b.le);
}

/* A holder that goes silent: the candidate takes over once the record
 * it observed is 15 s old — not before — plus at most one jittered retry. */
static void test_takeover_after_lease_duration(void **state)
{
	struct testenv *e = *state;
	struct candidate a, b;
	json_t *l;
	int ms;

	candidate_start(e, &a, "host-a_1");
	candidate_start(e, &b, "host-b_2");
	run_for(e, 3000);
	/* a dies: no release, no more renewals. */
	leader_elector_free(a.le);
	ms = ms_until(e, &b.started, 40000);
	/* b saw a's last renewal at most 2 s before a died: 15 s from then. */
	assert_true(ms >= 13000);
	assert_true(ms <= 15000 + 2 * 4400 + 200);
	l = lease(e);
	assert_string_equal(holder_of(l), "host-b_2");
	assert_int_equal(jx_int(l, "spec.leaseTransitions", -1), 1);
	json_decref(l);
	leader_elector_free(b.le);
}

/* A leader whose renewals fail (the Lease taken from under it) stops
 * leading when a round has not renewed for the renew deadline, 10 s. */
static void test_lost_after_renew_deadline(void **state)
{
	struct testenv *e = *state;
	struct candidate a;
	struct testenv_result r;
	json_t *l;
	int ms;
	char now[64];

	candidate_start(e, &a, "host-a_1");
	l = lease(e);
	time_format_rfc3339_micro(clock_now(), now);
	jx_set_str(l, "spec.holderIdentity", "intruder");
	jx_set_str(l, "spec.renewTime", now);
	r = testenv_call(e, "PUT", LEASE, l);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(l);
	ms = ms_until(e, &a.stopped, 30000);
	/* The round that fails starts at most one retry period after the
	 * intruder; it ends 10 s later. */
	assert_true(ms >= 10000 && ms <= 12000 + 200);
	assert_false(leader_elector_is_leader(a.le));
	leader_elector_free(a.le);
}

static int released;

static void on_release(void *arg)
{
	(void)arg;
	released++;
}

/* A release leaves no holder and a one-second lease: the next candidate
 * takes over on its next retry, not 15 s later. */
static void test_release(void **state)
{
	struct testenv *e = *state;
	struct candidate a, b;
	json_t *l;
	int ms;

	candidate_start(e, &a, "host-a_1");
	candidate_start(e, &b, "host-b_2");
	leader_elector_release(a.le, on_release, NULL);
	testenv_pump(e, 3);
	assert_int_equal(released, 1);
	assert_int_equal(a.stopped, 0);
	l = lease(e);
	assert_string_equal(holder_of(l), "");
	assert_int_equal(jx_int(l, "spec.leaseDurationSeconds", 0), 1);
	json_decref(l);
	ms = ms_until(e, &b.started, 10000);
	assert_true(ms <= 2000 + 2400 + 200);
	leader_elector_free(a.le);
	leader_elector_free(b.le);
}

static void test_identity(void **state)
{
	char *id = leader_election_identity();
	const char *us = strchr(id, '_');
	(void)state;
	assert_non_null(us);
	assert_int_equal(strlen(us + 1), 36);
	assert_int_equal(us[15], '4'); /* a version 4 UUID */
	free(id);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_first_takes_second_waits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_takeover_after_lease_duration, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_after_renew_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release, setup, teardown),
	    cmocka_unit_test(test_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
