/*
 * clock — the process's one clock, and timers driven by it.
 *
 * Everything that reads time in cube reads it here: timers, durations,
 * certificate validity checks, object timestamps, log lines. The clock is
 * real by default; tests and the simulator switch it to a virtual clock that
 * stands still until clock_advance() moves it. Nothing else in cube calls
 * time() or clock_gettime().
 *
 * Times are int64 nanoseconds: "wall" since the Unix epoch, "mono" since an
 * arbitrary origin. Timers are keyed on mono time, so a wall-clock step does
 * not fire or stall them.
 *
 * Timers live in a timer_set, a min-heap owned by one thread (normally one
 * event loop, see loop.h). With the real clock the owner calls timers_run()
 * when timers_next() is due. With the virtual clock clock_advance() walks
 * every registered set and fires timers in deadline order, each seeing
 * clock_now() equal to its own deadline; that makes tests exact. Advancing a
 * virtual clock is meant for one thread driving all sets (tests, simulator).
 *
 * Thread-safety: clock_now/clock_mono may be called from any thread. A
 * timer_set and its timers belong to the thread that created them.
 */
#ifndef CUBE_BASE_CLOCK_H
#define CUBE_BASE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define NS_PER_US INT64_C(1000)
#define NS_PER_MS INT64_C(1000000)
#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MIN (60 * NS_PER_SEC)
#define NS_PER_HOUR (60 * NS_PER_MIN)
#define NS_PER_DAY (24 * NS_PER_HOUR)

int64_t clock_now(void);  /* wall time, ns since the epoch */
int64_t clock_mono(void); /* monotonic time, ns */
/* Seconds since the epoch, for APIs that want time_t. */
int64_t clock_now_sec(void);

/*
 * Shift the wall clock by offset_ns (mono time is untouched): the process
 * then lives as if it were that much later or earlier. `cube --clock-offset`
 * uses it to rehearse expiry; it is a fault, not a correction.
 */
void clock_set_offset(int64_t offset_ns);
int64_t clock_offset(void);
/* One node's clock can be off too: clock_now() adds the current log scope's
 * clock_skew_ns (base/log.h), so a hollow kubelet whose scope is skewed
 * reads its own wrong time in everything it does (cube fault clock-skew). */

bool clock_is_virtual(void);
/* Switch the process to a virtual clock standing at wall time `wall_ns`. */
void clock_use_virtual(int64_t wall_ns);
/* Back to the real clock (tests that switch must switch back). */
void clock_use_real(void);
/*
 * Virtual clock only: move time forward by `d_ns`, firing every due timer of
 * every timer set in deadline order (ties in arming order). Returns the
 * number of timers fired.
 */
int clock_advance(int64_t d_ns);

struct timer_set;
struct timer;
typedef void (*timer_cb)(void *arg);

struct timer_set *timers_new(void);
/* Frees the set; its timers must have been freed first. NULL is a no-op. */
void timers_free(struct timer_set *set);
/*
 * Called whenever the set's wake-up (timers_wake) moves earlier, so an
 * event loop can re-arm. May be NULL.
 */
void timers_on_change(struct timer_set *set, void (*cb)(void *arg), void *arg);
/* Earliest mono deadline, or INT64_MAX when nothing is armed. */
int64_t timers_next(const struct timer_set *set);
/*
 * Timer slack, in the manner of Linux's for poll() and select() (0.1 % of
 * the timeout, 0.5 % for a niced task, at most 100 ms): a timer armed d
 * ahead may fire up to min(d / TIMER_SLACK_DIVISOR, max_ns) late, so
 * that timers due close together fire in one wake-up instead of one each.
 * A process of thousands of hollow kubelets wakes every 2 ms for one
 * heartbeat without it; a timer armed for now has none. 0 (the default)
 * turns it off. Arming order and firing order are unchanged: a wake-up fires
 * every timer whose deadline has come, in deadline order. The virtual clock
 * fires timers at their deadlines, slack or not.
 */
#define TIMER_SLACK_DIVISOR 200
void timers_set_slack(struct timer_set *set, int64_t max_ns);
/* When the owner should call timers_run() next: the earliest time by which
 * some timer's slack runs out (timers_next() without slack). INT64_MAX when
 * nothing is armed. */
int64_t timers_wake(struct timer_set *set);
/* Fire every timer due at clock_mono(); returns how many fired. */
int timers_run(struct timer_set *set);
int timers_count(const struct timer_set *set);

struct timer *timer_new(struct timer_set *set, timer_cb cb, void *arg);
void timer_free(struct timer *t); /* cancels first; NULL is a no-op */
void timer_at(struct timer *t, int64_t mono_deadline_ns);
void timer_after(struct timer *t, int64_t delay_ns);
void timer_cancel(struct timer *t);
bool timer_pending(const struct timer *t);
int64_t timer_deadline(const struct timer *t); /* INT64_MAX if not armed */

#endif
