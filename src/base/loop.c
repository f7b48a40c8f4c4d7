#include "base/loop.h"

#include "base/err.h"

#include <event2/thread.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

struct deferred {
	void (*cb)(void *arg);
	void *arg;
	struct deferred *next;
};

struct loop {
	struct event_base *base;
	struct timer_set *timers;
	struct event *tick;  /* armed for the set's earliest deadline */
	struct event *wake;  /* made active by loop_defer from other threads */
	pthread_mutex_t lock; /* guards the deferred list */
	struct deferred *head, **tail;
};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void threads_init(void)
{
	if (evthread_use_pthreads() < 0)
		abort();
	/* A peer that hangs up must be an error on the socket, not the end of
	 * the process: every cube component writes to sockets. */
	signal(SIGPIPE, SIG_IGN);
}

static void arm_tick(struct loop *l)
{
	int64_t next = timers_next(l->timers), d;
	struct timeval tv;

	if (clock_is_virtual() || next == INT64_MAX) {
		evtimer_del(l->tick);
		return;
	}
	d = next - clock_mono();
	if (d < 0)
		d = 0;
	/* Round up: waking a microsecond early would just re-arm. */
	d = (d + NS_PER_US - 1) / NS_PER_US;
	tv.tv_sec = (time_t)(d / 1000000);
	tv.tv_usec = (suseconds_t)(d % 1000000);
	evtimer_add(l->tick, &tv);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct loop *l = arg;
	timers_run(l->timers);
	arm_tick(l);
}

static void on_timers_change(void *arg)
{
	arm_tick(arg);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct loop *l = arg;
	struct deferred *d;

	pthread_mutex_lock(&l->lock);
	d = l->head;
	l->head = NULL;
	l->tail = &l->head;
	pthread_mutex_unlock(&l->lock);
	while (d) {
		struct deferred *next = d->next;
		d->cb(d->arg);
		free(d);
		d = next;
	}
}

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));

	pthread_once(&threads_once, threads_init);
	if (!l || !(l->base = event_base_new()))
		abort();
	l->timers = timers_new();
	l->tick = evtimer_new(l->base, on_tick, l);
	l->wake = event_new(l->base, -1, 0, on_wake, l);
	pthread_mutex_init(&l->lock, NULL);
	l->tail = &l->head;
	timers_on_change(l->timers, on_timers_change, l);
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	on_wake(-1, 0, l); /* run what was deferred, so nothing leaks */
	event_free(l->tick);
	event_free(l->wake);
	timers_free(l->timers);
	event_base_free(l->base);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

struct event_base *loop_base(struct loop *l)
{
	return l->base;
}

struct timer_set *loop_timers(struct loop *l)
{
	return l->timers;
}

struct timer *loop_timer(struct loop *l, timer_cb cb, void *arg)
{
	return timer_new(l->timers, cb, arg);
}

int loop_run(struct loop *l)
{
	arm_tick(l);
	/* NO_EXIT_ON_EMPTY: a loop waiting only for loop_defer is not done. */
	if (event_base_loop(l->base, EVLOOP_NO_EXIT_ON_EMPTY) < 0)
		return err_set(ERR_INTERNAL, "event loop failed");
	return 0;
}

int loop_poll(struct loop *l)
{
	timers_run(l->timers);
	if (event_base_loop(l->base, EVLOOP_NONBLOCK) < 0)
		return err_set(ERR_INTERNAL, "event loop failed");
	arm_tick(l);
	return 0;
}

void loop_stop(struct loop *l)
{
	event_base_loopbreak(l->base);
}

void loop_defer(struct loop *l, void (*cb)(void *), void *arg)
{
	struct deferred *d = malloc(sizeof(*d));
	if (!d)
		abort();
	d->cb = cb;
	d->arg = arg;
	d->next = NULL;
	pthread_mutex_lock(&l->lock);
	*l->tail = d;
	l->tail = &d->next;
	pthread_mutex_unlock(&l->lock);
	event_active(l->wake, 0, 0);
}
