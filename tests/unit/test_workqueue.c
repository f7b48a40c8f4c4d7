/* The work queue on the virtual clock: dedup, no key twice at once, dirty
 * keys rerun, per-key exponential backoff. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "client/workqueue.h"

#include "base/clock.h"
#include "base/loop.h"
#include "base/metrics.h"

#include <stdlib.h>
#include <string.h>

struct log {
	char seen[64][16];
	int64_t at[64];
	int n;
	bool hold; /* do not call done: processing stays open */
	struct workqueue *q;
};

static void process(void *arg, const char *key)
{
	struct log *l = arg;
	strncpy(l->seen[l->n], key, 15);
	l->at[l->n++] = clock_mono();
	if (!l->hold)
		workqueue_done(l->q, key);
}

static void turn(void)
{
	clock_advance(0);
}

static int setup(void **state)
{
	clock_use_virtual(INT64_C(1796032800) * NS_PER_SEC);
	return 0;
}

static int teardown(void **state)
{
	clock_use_real();
	return 0;
}

static void test_dedup_and_order(void **state)
{
	struct loop *loop = loop_new();
	struct log l = {0};
	l.q = workqueue_new(loop, 1, process, &l);
	workqueue_add(l.q, "a");
	workqueue_add(l.q, "b");
	workqueue_add(l.q, "a");
	assert_int_equal(workqueue_len(l.q), 2);
	turn();
	assert_int_equal(l.n, 2);
	assert_string_equal(l.seen[0], "a");
	assert_string_equal(l.seen[1], "b");
	workqueue_free(l.q);
	loop_free(loop);
}

static void test_dirty_key_reruns_after_done(void **state)
{
	struct loop *loop = loop_new();
	struct log l = {0};
	l.q = workqueue_new(loop, 2, process, &l);
	l.hold = true;
	workqueue_add(l.q, "a");
	turn();
	assert_int_equal(l.n, 1);
	/* Added while processing: not run twice at once... */
	workqueue_add(l.q, "a");
	turn();
	assert_int_equal(l.n, 1);
	/* ...but run again once done. */
	l.hold = false;
	workqueue_done(l.q, "a");
	turn();
	assert_int_equal(l.n, 2);
	workqueue_free(l.q);
	loop_free(loop);
}

static void test_backoff_doubles_and_forget_resets(void **state)
{
	struct loop *loop = loop_new();
	struct log l = {0};
	int64_t t0 = clock_mono();
	l.q = workqueue_new(loop, 1, process, &l);
	workqueue_retry(l.q, "x"); /* 5 ms */
	clock_advance(4 * NS_PER_MS);
	assert_int_equal(l.n, 0);
	clock_advance(1 * NS_PER_MS);
	turn();
	assert_int_equal(l.n, 1);
	assert_int_equal(l.at[0] - t0, 5 * NS_PER_MS);
	workqueue_retry(l.q, "x"); /* 10 ms */
	clock_advance(10 * NS_PER_MS);
	turn();
	assert_int_equal(l.n, 2);
	assert_int_equal(l.at[1] - l.at[0], 10 * NS_PER_MS);
	workqueue_forget(l.q, "x");
	workqueue_retry(l.q, "x"); /* back to 5 ms */
	clock_advance(5 * NS_PER_MS);
	turn();
	assert_int_equal(l.n, 3);
	assert_int_equal(l.at[2] - l.at[1], 5 * NS_PER_MS);
	workqueue_free(l.q);
	loop_free(loop);
}

/* The certificate controllers' queue: 0.2, 0.4, 0.8 s ..., capped at 1000 s. */
static void test_base_delay(void **state)
{
	struct loop *loop = loop_new();
	struct log l = {0};
	int64_t step = 200 * NS_PER_MS, last = clock_mono();

	l.q = workqueue_new(loop, 1, process, &l);
	workqueue_set_base_delay(l.q, step);
	for (int i = 0; i < 14; i++, step = step * 2 > 1000 * NS_PER_SEC ? 1000 * NS_PER_SEC
									: step * 2) {
		workqueue_retry(l.q, "csr-1");
		clock_advance(step - 1);
		turn();
		assert_int_equal(l.n, i);
		clock_advance(1);
		turn();
		assert_int_equal(l.n, i + 1);
		assert_int_equal(l.at[i] - last, step);
		last = l.at[i];
	}
	assert_int_equal(step, 1000 * NS_PER_SEC); /* 0.2 s · 2^13 > 1000 s */
	workqueue_free(l.q);
	loop_free(loop);
}

static void test_add_after_keeps_earliest(void **state)
{
	struct loop *loop = loop_new();
	struct log l = {0};
	l.q = workqueue_new(loop, 1, process, &l);
	workqueue_add_after(l.q, "k", 10 * NS_PER_SEC);
	workqueue_add_after(l.q, "k", 2 * NS_PER_SEC);
	workqueue_add_after(l.q, "k", 5 * NS_PER_SEC);
	clock_advance(2 * NS_PER_SEC);
	turn();
	assert_int_equal(l.n, 1);
	clock_advance(20 * NS_PER_SEC);
	assert_int_equal(l.n, 1);
	workqueue_free(l.q);
	loop_free(loop);
}

/* upstream's workqueue_* series, labelled with the queue's name. */
static void test_metrics(void **state)
{
	struct loop *loop = loop_new();
	struct metrics *m = metrics_new();
	struct log l = {.hold = true};
	char *text;

	l.q = workqueue_new(loop, 1, process, &l);
	workqueue_instrument(l.q, m, "certificate");
	workqueue_add(l.q, "a");
	workqueue_add(l.q, "b");
	workqueue_add(l.q, "a"); /* already queued: not an add */
	text = metrics_render(m);
	assert_non_null(strstr(text, "workqueue_depth{name=\"certificate\"} 2\n"));
	assert_non_null(strstr(text, "workqueue_adds_total{name=\"certificate\"} 2\n"));
	free(text);
	clock_advance(3 * NS_PER_MS); /* a waits 3 ms, then is held */
	assert_int_equal(l.n, 1);
	clock_advance(2 * NS_PER_SEC);
	workqueue_add(l.q, "a"); /* dirty while processing: an add, in the depth too */
	workqueue_retry(l.q, "b");
	text = metrics_render(m);
	assert_non_null(strstr(text, "workqueue_depth{name=\"certificate\"} 2\n"));
	/* a has been processing for 2 s: the render brings the gauges up to date. */
	assert_non_null(strstr(text, "workqueue_unfinished_work_seconds{name=\"certificate\"} 2"));
	assert_non_null(
		strstr(text, "workqueue_longest_running_processor_seconds{name=\"certificate\"} 2"));
	assert_non_null(strstr(text, "workqueue_adds_total{name=\"certificate\"} 3\n"));
	assert_non_null(strstr(text, "workqueue_retries_total{name=\"certificate\"} 1\n"));
	assert_non_null(strstr(
		text, "workqueue_queue_duration_seconds_bucket{name=\"certificate\",le=\"0.01\"} 1\n"));
	free(text);
	workqueue_done(l.q, "a"); /* worked 2 s */
	text = metrics_render(m);
	assert_non_null(strstr(text, "workqueue_work_duration_seconds_bucket{name=\"certificate\","
				     "le=\"1\"} 0\n"));
	assert_non_null(strstr(text, "workqueue_work_duration_seconds_bucket{name=\"certificate\","
				     "le=\"10\"} 1\n"));
	assert_non_null(strstr(text, "workqueue_unfinished_work_seconds{name=\"certificate\"} 0\n"));
	free(text);
	workqueue_free(l.q);
	metrics_free(m);
	loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dedup_and_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dirty_key_reruns_after_done, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backoff_doubles_and_forget_resets, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_add_after_keeps_earliest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_base_delay, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
