/* The clock, timers and the event loop: virtual time fires timers in order,
 * each seeing its own deadline as "now"; real time drives a libevent loop. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/loop.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0 (INT64_C(1796032800) * NS_PER_SEC) /* 2026-11-30T10:00:00Z */

struct rec {
	int order[16];
	int64_t seen_now[16];
	int n;
};

struct tagged {
	struct rec *rec;
	int tag;
};

static void record(void *arg)
{
	struct tagged *t = arg;
	t->rec->order[t->rec->n] = t->tag;
	t->rec->seen_now[t->rec->n] = clock_now();
	t->rec->n++;
}

static int setup(void **state)
{
	clock_use_virtual(T0);
	return 0;
}

static int teardown(void **state)
{
	clock_set_offset(0);
	clock_use_real();
	return 0;
}

static void test_virtual_clock_stands_still(void **state)
{
	int64_t mono = clock_mono();
	assert_true(clock_is_virtual());
	assert_int_equal(clock_now(), T0);
	assert_int_equal(clock_now_sec(), T0 / NS_PER_SEC);
	assert_int_equal(clock_mono(), mono);
	clock_advance(1500 * NS_PER_MS);
	assert_int_equal(clock_now(), T0 + 1500 * NS_PER_MS);
	assert_int_equal(clock_mono(), mono + 1500 * NS_PER_MS);
}

static void test_timers_fire_in_deadline_order(void **state)
{
	struct timer_set *set = timers_new();
	struct rec rec = {0};
	struct tagged tags[4] = {{&rec, 0}, {&rec, 1}, {&rec, 2}, {&rec, 3}};
	struct timer *t[4];
	int64_t delays[4] = {30 * NS_PER_SEC, 10 * NS_PER_SEC, 20 * NS_PER_SEC, 10 * NS_PER_SEC};

	for (int i = 0; i < 4; i++) {
		t[i] = timer_new(set, record, &tags[i]);
		timer_after(t[i], delays[i]);
	}
	assert_int_equal(timers_count(set), 4);
	/* Nothing is due yet. */
	assert_int_equal(clock_advance(9 * NS_PER_SEC), 0);
	assert_int_equal(rec.n, 0);
	/* Two fire at 10 s, in arming order, each seeing now = its deadline. */
	assert_int_equal(clock_advance(11 * NS_PER_SEC), 3);
	assert_int_equal(rec.n, 3);
	assert_int_equal(rec.order[0], 1);
	assert_int_equal(rec.order[1], 3);
	assert_int_equal(rec.order[2], 2);
	assert_int_equal(rec.seen_now[0], T0 + 10 * NS_PER_SEC);
	assert_int_equal(rec.seen_now[2], T0 + 20 * NS_PER_SEC);
	assert_int_equal(clock_now(), T0 + 20 * NS_PER_SEC);
	assert_int_equal(clock_advance(10 * NS_PER_SEC), 1);
	assert_int_equal(rec.order[3], 0);
	assert_int_equal(timers_next(set), INT64_MAX);
	for (int i = 0; i < 4; i++)
		timer_free(t[i]);
	timers_free(set);
}

static void test_cancel_and_rearm(void **state)
{
	struct timer_set *set = timers_new();
	struct rec rec = {0};
	struct tagged a = {&rec, 1}, b = {&rec, 2};
	struct timer *ta = timer_new(set, record, &a), *tb = timer_new(set, record, &b);

	timer_after(ta, 5 * NS_PER_SEC);
	timer_after(tb, 6 * NS_PER_SEC);
	assert_true(timer_pending(ta));
	timer_cancel(ta);
	assert_false(timer_pending(ta));
	assert_int_equal(timer_deadline(ta), INT64_MAX);
	timer_after(tb, 1 * NS_PER_SEC); /* re-arming moves it */
	assert_int_equal(timers_count(set), 1);
	clock_advance(10 * NS_PER_SEC);
	assert_int_equal(rec.n, 1);
	assert_int_equal(rec.order[0], 2);
	assert_int_equal(rec.seen_now[0], T0 + 1 * NS_PER_SEC);
	timer_free(ta);
	timer_free(tb);
	timers_free(set);
}

/*
 * Many timers, armed, moved and cancelled at random, some on the same
 * deadline: they fire in (deadline, last arming) order, each once.
 */
struct many {
	struct timer *t;
	int64_t deadline;
	unsigned armed_at; /* the arming's place in the whole test */
	bool armed;
	int fired;
};

static struct many *last_fired;
static int out_of_order;

static void fire_many(void *arg)
{
	struct many *m = arg;
	if (last_fired && (last_fired->deadline > m->deadline ||
	                   (last_fired->deadline == m->deadline && last_fired->armed_at > m->armed_at)))
		out_of_order++;
	last_fired = m;
	m->fired++;
}

static void test_many_timers_in_order(void **state)
{
	enum { N = 1000 };
	struct timer_set *set = timers_new();
	static struct many m[N];
	unsigned seed = 42, arming = 0;
	int armed = 0;

	(void)state;
	last_fired = NULL;
	out_of_order = 0;
	for (int i = 0; i < N; i++)
		m[i] = (struct many){.t = timer_new(set, fire_many, &m[i])};
	for (int round = 0; round < 5 * N; round++) {
		struct many *x = &m[rand_r(&seed) % N];
		if (rand_r(&seed) % 4 == 0) {
			timer_cancel(x->t);
			x->armed = false;
		} else {
			/* Deadlines 1..50 s: many share one. */
			x->deadline = clock_mono() + (1 + rand_r(&seed) % 50) * NS_PER_SEC;
			timer_at(x->t, x->deadline);
			x->armed = true;
			x->armed_at = arming++;
		}
	}
	for (int i = 0; i < N; i++)
		armed += m[i].armed;
	assert_int_equal(timers_count(set), armed);
	assert_int_equal(clock_advance(60 * NS_PER_SEC), armed);
	assert_int_equal(out_of_order, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(m[i].fired, m[i].armed ? 1 : 0);
		timer_free(m[i].t);
	}
	timers_free(set);
}

/* A periodic timer re-arms itself from its own callback, like a heartbeat. */
struct ticker {
	struct timer *t;
	int fired;
	int64_t last;
};

static void tick(void *arg)
{
	struct ticker *k = arg;
	k->fired++;
	k->last = clock_now();
	timer_after(k->t, 10 * NS_PER_SEC);
}

static void test_periodic_timer_rearms_inside_advance(void **state)
{
	struct timer_set *set = timers_new();
	struct ticker k = {0};

	k.t = timer_new(set, tick, &k);
	timer_after(k.t, 10 * NS_PER_SEC);
	/* One advance of 55 s fires at 10, 20, 30, 40, 50. */
	assert_int_equal(clock_advance(55 * NS_PER_SEC), 5);
	assert_int_equal(k.fired, 5);
	assert_int_equal(k.last, T0 + 50 * NS_PER_SEC);
	timer_free(k.t);
	timers_free(set);
}

static void test_timers_across_sets_interleave(void **state)
{
	struct timer_set *s1 = timers_new(), *s2 = timers_new();
	struct rec rec = {0};
	struct tagged a = {&rec, 1}, b = {&rec, 2}, c = {&rec, 3};
	struct timer *ta = timer_new(s1, record, &a), *tb = timer_new(s2, record, &b),
		     *tc = timer_new(s1, record, &c);

	timer_after(ta, 3 * NS_PER_SEC);
	timer_after(tb, 2 * NS_PER_SEC);
	timer_after(tc, 1 * NS_PER_SEC);
	clock_advance(5 * NS_PER_SEC);
	assert_int_equal(rec.n, 3);
	assert_int_equal(rec.order[0], 3);
	assert_int_equal(rec.order[1], 2);
	assert_int_equal(rec.order[2], 1);
	timer_free(ta);
	timer_free(tb);
	timer_free(tc);
	timers_free(s1);
	timers_free(s2);
}

static void test_offset_shifts_wall_not_mono(void **state)
{
	int64_t mono = clock_mono();
	clock_set_offset(400 * NS_PER_DAY);
	assert_int_equal(clock_now(), T0 + 400 * NS_PER_DAY);
	assert_int_equal(clock_offset(), 400 * NS_PER_DAY);
	assert_int_equal(clock_mono(), mono);
	clock_set_offset(0);
	assert_int_equal(clock_now(), T0);
}

/* A node's own clock: the log scope current on the thread is skewed, the
 * process's clock and mono time are not. */
static void test_scope_skew(void **state)
{
	struct log_scope node = {.fd = -1, .clock_skew_ns = -2 * NS_PER_HOUR};
	const struct log_scope *prev;
	int64_t mono = clock_mono();

	prev = log_scope_enter(&node);
	assert_int_equal(clock_now(), T0 - 2 * NS_PER_HOUR);
	assert_int_equal(clock_now_sec(), (T0 - 2 * NS_PER_HOUR) / NS_PER_SEC);
	assert_int_equal(clock_mono(), mono);
	clock_set_offset(NS_PER_DAY); /* both add up */
	assert_int_equal(clock_now(), T0 + NS_PER_DAY - 2 * NS_PER_HOUR);
	clock_set_offset(0);
	log_scope_enter(prev);
	assert_int_equal(clock_now(), T0);
}

static void count_change(void *arg)
{
	(*(int *)arg)++;
}

static void nothing(void *arg)
{
	(void)arg;
}

/* Slack is d/200, at most the set's cap; the wake-up is the least deadline
 * plus slack over every armed timer, and moves earlier only when asked to. */
static void test_timer_slack_sets_the_wake_up(void **state)
{
	struct timer_set *set = timers_new();
	struct timer *t[6];
	int64_t now = clock_mono();
	int changes = 0;

	for (int i = 0; i < 6; i++)
		t[i] = timer_new(set, nothing, NULL);
	timers_on_change(set, count_change, &changes);

	timer_after(t[0], 10 * NS_PER_SEC); /* no slack yet */
	assert_int_equal(timers_wake(set), now + 10 * NS_PER_SEC);
	timer_cancel(t[0]);
	assert_int_equal(timers_wake(set), INT64_MAX);

	timers_set_slack(set, 50 * NS_PER_MS);
	changes = 0;
	timer_after(t[0], 10 * NS_PER_SEC); /* 10 s / 200 = 50 ms */
	assert_int_equal(timers_next(set), now + 10 * NS_PER_SEC);
	assert_int_equal(timers_wake(set), now + 10 * NS_PER_SEC + 50 * NS_PER_MS);
	assert_int_equal(changes, 1);
	timer_after(t[1], 20 * NS_PER_SEC); /* capped at 50 ms: later, no change */
	timer_after(t[2], 10 * NS_PER_SEC + 20 * NS_PER_MS);
	assert_int_equal(timers_wake(set), now + 10 * NS_PER_SEC + 50 * NS_PER_MS);
	assert_int_equal(changes, 1);
	timer_after(t[3], 1 * NS_PER_SEC); /* 5 ms */
	assert_int_equal(timers_wake(set), now + 1 * NS_PER_SEC + 5 * NS_PER_MS);
	assert_int_equal(changes, 2);
	timer_after(t[5], 0); /* now: none */
	assert_int_equal(timers_wake(set), now);
	assert_int_equal(changes, 3);
	timer_cancel(t[3]);
	timer_cancel(t[5]);
	assert_int_equal(timers_wake(set), now + 10 * NS_PER_SEC + 50 * NS_PER_MS);

	/* Armed later for a later deadline but with less slack: the wake-up is
	 * its, though the first timer keeps the heap's top. */
	clock_advance(9990 * NS_PER_MS);
	timer_after(t[4], 20 * NS_PER_MS); /* at 10.01 s, 0.1 ms of slack */
	assert_int_equal(timers_next(set), now + 10 * NS_PER_SEC);
	assert_int_equal(timers_wake(set), now + 10010 * NS_PER_MS + 100 * NS_PER_US);
	assert_int_equal(changes, 4);
	timer_cancel(t[4]);
	timer_cancel(t[0]);
	assert_int_equal(timers_wake(set), now + 10 * NS_PER_SEC + 20 * NS_PER_MS + 50 * NS_PER_MS);

	/* The virtual clock fires at deadlines, slack or not. */
	clock_advance(30 * NS_PER_MS);
	assert_false(timer_pending(t[2]));
	assert_true(timer_pending(t[1]));
	for (int i = 0; i < 6; i++)
		timer_free(t[i]);
	timers_free(set);
}

/* ---- the loop on the real clock ---- */

struct stopper {
	struct loop *loop;
	int fired;
	int64_t at;
};

static void stop_loop(void *arg)
{
	struct stopper *s = arg;
	s->fired++;
	s->at = clock_mono();
	loop_stop(s->loop);
}

static void test_loop_real_timer_fires(void **state)
{
	struct stopper s = {0};
	struct timer *t;
	int64_t start;

	clock_use_real();
	s.loop = loop_new();
	t = loop_timer(s.loop, stop_loop, &s);
	start = clock_mono();
	timer_after(t, 20 * NS_PER_MS);
	assert_int_equal(loop_run(s.loop), 0);
	assert_int_equal(s.fired, 1);
	assert_true(s.at - start >= 20 * NS_PER_MS);
	timer_free(t);
	loop_free(s.loop);
}

struct stamps {
	struct loop *loop;
	int64_t at[2];
	int n;
};

static void stamp(void *arg)
{
	struct stamps *s = arg;
	s->at[s->n++] = clock_mono();
	if (s->n == 2)
		loop_stop(s->loop);
}

/* Two timers 2 ms apart, each with 10 ms of slack (2 s / 200): one wake-up
 * fires both, the first held back past the second's deadline. Without
 * slack the first would fire 2 ms before it. (8 ms to spare for a wake-up
 * early by libevent's coarse clock, 1 ms at most.) */
static void test_loop_timer_slack_coalesces(void **state)
{
	struct stamps s = {0};
	struct timer *a, *b;
	int64_t start;

	clock_use_real();
	s.loop = loop_new();
	timers_set_slack(loop_timers(s.loop), 50 * NS_PER_MS);
	a = loop_timer(s.loop, stamp, &s);
	b = loop_timer(s.loop, stamp, &s);
	start = clock_mono();
	timer_at(a, start + 2 * NS_PER_SEC);
	timer_at(b, start + 2 * NS_PER_SEC + 2 * NS_PER_MS);
	assert_int_equal(loop_run(s.loop), 0);
	assert_int_equal(s.n, 2);
	assert_true(s.at[0] >= start + 2 * NS_PER_SEC + 2 * NS_PER_MS);
	assert_true(s.at[1] - s.at[0] < 1 * NS_PER_MS);
	timer_free(a);
	timer_free(b);
	loop_free(s.loop);
}

static void *post_from_thread(void *arg)
{
	struct stopper *s = arg;
	loop_defer(s->loop, stop_loop, s);
	return NULL;
}

static void test_loop_defer_from_another_thread(void **state)
{
	struct stopper s = {0};
	pthread_t th;

	clock_use_real();
	s.loop = loop_new();
	pthread_create(&th, NULL, post_from_thread, &s);
	assert_int_equal(loop_run(s.loop), 0);
	pthread_join(th, NULL);
	assert_int_equal(s.fired, 1);
	loop_free(s.loop);
}

/* ---- loop_work ---- */

struct jobs {
	struct loop *loop;
	pthread_t main;
	int done, off_loop, on_loop;
	sem_t go;        /* a job's work waits for it */
	bool slow_first; /* the first job waits for go, then takes a while */
	bool chain;      /* the first job's done starts one more */
};

struct one_job {
	struct jobs *j;
	int index;
	pthread_t worker;
};

static void job_work(void *arg)
{
	struct one_job *o = arg;

	o->worker = pthread_self();
	if (o->j->slow_first && o->index == 0) {
		sem_wait(&o->j->go);
		usleep(20000); /* still running when loop_free begins */
	}
}

static void job_done(void *arg)
{
	struct one_job *o = arg;
	struct jobs *j = o->j;

	j->done++;
	j->off_loop += !pthread_equal(o->worker, j->main);
	j->on_loop += pthread_equal(pthread_self(), j->main);
	if (j->chain && o->index == 0) {
		o->index = 1;
		loop_work(j->loop, job_work, job_done, o);
		return;
	}
	free(o);
}

static void start_job(struct jobs *j, int index)
{
	struct one_job *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	o->j = j;
	o->index = index;
	loop_work(j->loop, job_work, job_done, o);
}

/* Work runs on the workers, done on the loop's thread, each once. */
static void test_loop_work_runs_off_the_loop(void **state)
{
	struct jobs j = {.loop = loop_new(), .main = pthread_self()};

	for (int i = 0; i < 32; i++)
		start_job(&j, i);
	assert_int_equal(loop_work_pending(j.loop), 32);
	assert_int_equal(j.done, 0);
	testenv_work_wait(j.loop);
	assert_int_equal(j.done, 32);
	assert_int_equal(j.off_loop, 32);
	assert_int_equal(j.on_loop, 32);
	loop_free(j.loop);
}

/* loop_free waits for work still running and delivers its done, and the
 * done of a job that done started. */
static void test_loop_free_finishes_work(void **state)
{
	struct jobs j = {.loop = loop_new(), .main = pthread_self(), .slow_first = true,
			 .chain = true};

	sem_init(&j.go, 0, 0);
	start_job(&j, 0);
	sem_post(&j.go);
	loop_free(j.loop);
	assert_int_equal(j.done, 2);
	assert_int_equal(j.on_loop, 2);
	sem_destroy(&j.go);
}

/* One scratch block a loop, sized by its first caller: every caller that
 * fits gets that block, a larger one gets none; the loop frees it. */
static void test_loop_scratch(void **state)
{
	struct loop *a = loop_new(), *b = loop_new();
	char *p = loop_scratch(a, 100);

	(void)state;
	assert_non_null(p);
	memset(p, 1, 100);
	assert_ptr_equal(loop_scratch(a, 100), p);
	assert_ptr_equal(loop_scratch(a, 10), p);
	assert_null(loop_scratch(a, 101));
	assert_non_null(loop_scratch(b, 100));
	assert_ptr_not_equal(loop_scratch(b, 100), p);
	loop_free(a);
	loop_free(b);
}

static void test_loop_virtual_timers_follow_advance(void **state)
{
	struct loop *l = loop_new();
	struct rec rec = {0};
	struct tagged a = {&rec, 7};
	struct timer *t = loop_timer(l, record, &a);

	timer_after(t, 1 * NS_PER_HOUR);
	assert_int_equal(loop_poll(l), 0); /* no real time makes it fire */
	assert_int_equal(rec.n, 0);
	clock_advance(1 * NS_PER_HOUR);
	assert_int_equal(rec.n, 1);
	assert_int_equal(rec.seen_now[0], T0 + NS_PER_HOUR);
	timer_free(t);
	loop_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_virtual_clock_stands_still, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timers_fire_in_deadline_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_and_rearm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_timers_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_periodic_timer_rearms_inside_advance, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_timers_across_sets_interleave, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_scope_skew, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offset_shifts_wall_not_mono, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timer_slack_sets_the_wake_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_real_timer_fires, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_timer_slack_coalesces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_defer_from_another_thread, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_loop_virtual_timers_follow_advance, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_loop_work_runs_off_the_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_free_finishes_work, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_scratch, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
