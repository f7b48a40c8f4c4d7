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
 * What would stall a loop (an fsync, decoding a certificate) runs on the
 * process's worker threads with loop_work(), which hands the result back.
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

/*
 * Run work(arg) on one of the process's LOOP_WORKERS threads, then done(arg)
 * on this loop's thread (DESIGN.md §3: disk commits and anything slow).
 * From the loop's thread. Jobs run side by side and finish in any order: a
 * caller that needs one after another starts the next from done. done
 * always runs, at the latest in loop_free(), which first waits for work
 * still running. So work must touch only what its job owns, and an owner
 * freed first marks its job (arg) so that done only frees it.
 */
void loop_work(struct loop *l, void (*work)(void *arg), void (*done)(void *arg), void *arg);
/* Jobs started whose done has not run yet: a test's "quiet" waits for 0. */
size_t loop_work_pending(const struct loop *l);

/*
 * The loop's scratch block: n bytes shared by everything that runs on the
 * loop, made at the first call and freed with the loop. Only for bytes
 * that are dead once the code that wrote them has handed them on, before
 * it returns to the loop (an HTTP/2 session's outbound frame, copied to
 * its socket's buffer as soon as it is made). NULL when the block an
 * earlier caller made is smaller than n. From the loop's thread.
 */
void *loop_scratch(struct loop *l, size_t n);

/* Blocked in fsync a worker uses no CPU; several let the filesystem commit
 * their files in one journal transaction. */
#define LOOP_WORKERS 4

#endif
