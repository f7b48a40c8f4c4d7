#include "base/loop.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/heap.h"
#include "base/log.h"

#include <event2/thread.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct deferred {
	void (*cb)(void *arg);
	void *arg;
	struct deferred *next;
};

struct loop {
	struct event_base *base;
	struct timer_set *timers;
	struct event *tick;  /* armed for the set's earliest deadline */
	/* Deferred work: the list, and an eventfd that other threads write
	 * when they make it non-empty (the loop's own thread activates the
	 * event instead). Not libevent's event_active across threads, which
	 * takes the base's lock against its own thread on every call. */
	struct event *wake;
	int wake_fd;
	pthread_t owner;      /* the thread that runs the loop (loop_run, loop_poll) */
	bool owned;
	pthread_mutex_t lock; /* guards the deferred list and work_running */
	struct deferred *head, **tail;
	/* loop_work: started and not yet done (the loop's thread alone), and
	 * still on a worker (under lock; work_idle says it reached 0). */
	size_t work_pending, work_running;
	pthread_cond_t work_idle;
	void *scratch; /* loop_scratch's block, and its size */
	size_t scratch_len;
};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

/*
 * libevent's own messages, in klog's format and rate-limited: at most
 * LIBEVENT_LOG_BURST a second, then a count of what was dropped. A socket
 * error that repeats every loop turn must not fill a disk. Real time: the
 * limit is about the log's reader, not the cluster's clock.
 */
#define LIBEVENT_LOG_BURST 10

static void on_libevent_log(int severity, const char *msg)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static time_t second;
	static long in_second, dropped;
	struct timespec ts;
	long was_dropped = 0;
	bool write;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&lock);
	if (ts.tv_sec != second) {
		second = ts.tv_sec;
		in_second = 0;
		was_dropped = dropped;
		dropped = 0;
	}
	write = ++in_second <= LIBEVENT_LOG_BURST;
	if (!write)
		dropped++;
	pthread_mutex_unlock(&lock);
	if (was_dropped)
		LOG_WARN("libevent: %ld more messages dropped (at most %d a second)", was_dropped,
		         LIBEVENT_LOG_BURST);
	if (!write)
		return;
	switch (severity) {
	case EVENT_LOG_DEBUG:
		LOG_V(4, "libevent: %s", msg);
		break;
	case EVENT_LOG_MSG:
		LOG_INFO("libevent: %s", msg);
		break;
	case EVENT_LOG_WARN:
		LOG_WARN("libevent: %s", msg);
		break;
	default:
		LOG_ERROR("libevent: %s", msg);
		break;
	}
}

static void threads_init(void)
{
	event_set_log_callback(on_libevent_log);
	if (evthread_use_pthreads() < 0)
		abort();
	/* A peer that hangs up must be an error on the socket, not the end of
	 * the process: every cube component writes to sockets. */
	signal(SIGPIPE, SIG_IGN);
}

static void arm_tick(struct loop *l)
{
	int64_t next = timers_wake(l->timers), d;
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
	uint64_t n;

	/* Reset before taking the list: a write after this wakes us again. */
	if (fd >= 0 && read(fd, &n, sizeof(n)) < 0) {
		/* EAGAIN: activated by the loop's own thread */
	}
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

/*
 * epoll with libevent's changelist: a descriptor's changes between two
 * dispatches are made in one epoll_ctl, or none when they cancel out. A
 * request's reply turns a connection's write interest on and off again
 * within one turn of the loop; without it each turn was two syscalls a
 * connection (GET one Node: 32 -> 21 us of server CPU, docs/performance.md).
 * libevent's caveat: not with descriptors dup()ed while registered, which
 * cube never does (dup2 happens only onto a child's stdout and stderr).
 */
static struct event_base *base_new(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (!cfg)
		abort();
	event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));

	pthread_once(&threads_once, threads_init);
	if (!l || !(l->base = base_new()))
		abort();
	l->timers = timers_new();
	l->tick = evtimer_new(l->base, on_tick, l);
	if ((l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    !(l->wake = event_new(l->base, l->wake_fd, EV_READ | EV_PERSIST, on_wake, l)) ||
	    event_add(l->wake, NULL) < 0)
		abort();
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->work_idle, NULL);
	l->tail = &l->head;
	timers_on_change(l->timers, on_timers_change, l);
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	/* Run what was deferred, so nothing leaks: first let the workers
	 * finish, as their jobs' done callbacks are deferred too (and may
	 * start more). */
	do {
		pthread_mutex_lock(&l->lock);
		while (l->work_running)
			pthread_cond_wait(&l->work_idle, &l->lock);
		pthread_mutex_unlock(&l->lock);
		on_wake(-1, 0, l);
	} while (l->work_pending);
	event_free(l->tick);
	event_free(l->wake);
	close(l->wake_fd);
	timers_free(l->timers);
	event_base_free(l->base);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->work_idle);
	free(l->scratch);
	free(l);
}

void *loop_scratch(struct loop *l, size_t n)
{
	if (!l->scratch) {
		l->scratch = xmalloc(n);
		l->scratch_len = n;
	}
	return n <= l->scratch_len ? l->scratch : NULL;
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

static void own(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	l->owner = pthread_self();
	l->owned = true;
	pthread_mutex_unlock(&l->lock);
}

int loop_run(struct loop *l)
{
	own(l);
	arm_tick(l);
	/* NO_EXIT_ON_EMPTY: a loop waiting only for loop_defer is not done. */
	if (event_base_loop(l->base, EVLOOP_NO_EXIT_ON_EMPTY) < 0)
		return err_set(ERR_INTERNAL, "event loop failed");
	return 0;
}

int loop_poll(struct loop *l)
{
	own(l);
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

static void stop_now(void *arg)
{
	loop_stop(arg);
}

void loop_stop_pending(struct loop *l)
{
	loop_defer(l, stop_now, l);
}

void loop_defer(struct loop *l, void (*cb)(void *), void *arg)
{
	struct deferred *d = malloc(sizeof(*d));
	bool was_empty, mine;

	if (!d)
		abort();
	d->cb = cb;
	d->arg = arg;
	d->next = NULL;
	pthread_mutex_lock(&l->lock);
	was_empty = !l->head;
	*l->tail = d;
	l->tail = &d->next;
	mine = l->owned && pthread_equal(l->owner, pthread_self());
	pthread_mutex_unlock(&l->lock);
	if (mine)
		event_active(l->wake, EV_READ, 0);
	else if (was_empty && write(l->wake_fd, &(uint64_t){1}, sizeof(uint64_t)) < 0)
		abort(); /* an eventfd write fails only when its counter would overflow */
}

/* ---- worker threads ------------------------------------------------------------ */

struct job {
	struct loop *l;
	void (*work)(void *arg);
	void (*done)(void *arg);
	void *arg;
	struct job *next;
};

/* One queue for the process: a job waits for whichever worker is free. */
static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	pthread_cond_t ready;
	struct job *head, **tail;
} workers = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL,
	     &workers.head};

static void job_done(void *arg)
{
	struct job *j = arg;

	j->done(j->arg);
	j->l->work_pending--;
	free(j);
}

static void *worker_main(void *unused)
{
	(void)unused;
	heap_thread_lean();
	for (;;) {
		struct job *j;
		struct loop *l;

		pthread_mutex_lock(&workers.lock);
		while (!workers.head)
			pthread_cond_wait(&workers.ready, &workers.lock);
		j = workers.head;
		if (!(workers.head = j->next))
			workers.tail = &workers.head;
		pthread_mutex_unlock(&workers.lock);

		j->work(j->arg);
		/* The job is the loop's from here: done may run (and free it)
		 * before loop_defer returns. */
		l = j->l;
		loop_defer(l, job_done, j);
		pthread_mutex_lock(&l->lock);
		if (--l->work_running == 0)
			pthread_cond_broadcast(&l->work_idle);
		pthread_mutex_unlock(&l->lock);
	}
	return NULL;
}

/* Detached for the life of the process, with every signal blocked: signals
 * are the loops' business. */
static void workers_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < LOOP_WORKERS; i++) {
		pthread_t th;
		char name[16];
		if (pthread_create(&th, &attr, worker_main, NULL) != 0)
			abort();
		snprintf(name, sizeof(name), "cube-work-%d", i);
		pthread_setname_np(th, name);
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void loop_work(struct loop *l, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (!j)
		abort();
	*j = (struct job){l, work, done, arg, NULL};
	pthread_once(&workers.once, workers_start);
	l->work_pending++;
	pthread_mutex_lock(&l->lock);
	l->work_running++;
	pthread_mutex_unlock(&l->lock);
	pthread_mutex_lock(&workers.lock);
	*workers.tail = j;
	workers.tail = &j->next;
	pthread_cond_signal(&workers.ready);
	pthread_mutex_unlock(&workers.lock);
}

size_t loop_work_pending(const struct loop *l)
{
	return l->work_pending;
}
