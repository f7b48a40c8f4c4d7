/*
 * loop — one component's event loop: libevent for I/O, the clock for time.
 *
 * A loop owns an event_base and a timer_set. With the real clock one
 * libevent timer is kept armed for the earliest deadline of the set, so
 * timers made with loop_timer() fire on time without a libevent event each.
 * With the virtual clock nothing fires on its own: clock_advance() fires the
 * timers, and loop_poll() runs ready I/O without blocking — that is how tests
 * and the simulator step a component.
 *
 * Ownership: the loop owns its base and set; free the timers first.
 * Threads: a loop belongs to the thread that runs it. loop_stop() and
 * loop_defer() may be called from any thread (libevent is set up with
 * pthreads locking for that).
 */
#ifndef CUBE_BASE_LOOP_H
#define CUBE_BASE_LOOP_H

#include "base/clock.h"

#include <event2/event.h>

struct loop;

struct loop *loop_new(void);
void loop_free(struct loop *l);

struct event_base *loop_base(struct loop *l);
struct timer_set *loop_timers(struct loop *l);
/* Shorthand for timer_new(loop_timers(l), cb, arg). */
struct timer *loop_timer(struct loop *l, timer_cb cb, void *arg);

/* Run until loop_stop(); 0, or ERR_INTERNAL if libevent failed. */
int loop_run(struct loop *l);
/* Run whatever is ready now (I/O and due timers), without blocking. */
int loop_poll(struct loop *l);
/* Ask a running loop to return; safe from any thread and from signal-free contexts. */
void loop_stop(struct loop *l);
/* The same for a loop whose loop_run may not have begun yet (a thread just
 * started): libevent forgets a break that comes before its loop, so this
 * one is deferred and taken when the loop runs. Not from signal handlers. */
void loop_stop_pending(struct loop *l);
/*
 * Run cb(arg) on the loop's thread at its next turn. Safe from any thread:
 * this is how a worker thread posts a result back (DESIGN.md §3).
 */
void loop_defer(struct loop *l, void (*cb)(void *arg), void *arg);

#endif
