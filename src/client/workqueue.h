/*
 * workqueue — keys waiting to be reconciled, as client-go's work queue:
 * a key is never processed twice at once, and a key added while it is
 * being processed is processed again afterwards, so no change is lost.
 * Processing may be asynchronous: the controller calls workqueue_done when
 * it has finished with a key (successfully or not).
 *
 * Rate limiting per key is client-go's default controller limiter:
 * exponential 5 ms → 1000 s per failure (workqueue_retry), forgotten on
 * success (workqueue_forget); a queue may start from another first step
 * (workqueue_set_base_delay). The default limiter's overall bucket (10
 * retries a second, a burst of 100) is not kept.
 *
 * Ownership: the queue copies keys; the key handed to process() is valid
 * until workqueue_done for it. Threads: the loop's.
 */
#ifndef CUBE_CLIENT_WORKQUEUE_H
#define CUBE_CLIENT_WORKQUEUE_H

#include "base/loop.h"

#include <stddef.h>
#include <stdint.h>

struct workqueue;

/* process(arg, key) is called on the loop; it must end with workqueue_done. */
struct workqueue *workqueue_new(struct loop *loop, int workers,
				void (*process)(void *arg, const char *key), void *arg);
void workqueue_free(struct workqueue *q);
/*
 * upstream's workqueue metrics in m, labelled name="<name>": workqueue_depth,
 * _adds_total, _queue_duration_seconds, _work_duration_seconds,
 * _retries_total, _unfinished_work_seconds and
 * _longest_running_processor_seconds (the last two brought up to date
 * each time m is rendered, which must be on the queue's thread). Queues
 * sharing a name share the series, as upstream's do; m must outlive q.
 */
struct metrics;
void workqueue_instrument(struct workqueue *q, struct metrics *m, const char *name);

void workqueue_add(struct workqueue *q, const char *key);
void workqueue_add_after(struct workqueue *q, const char *key, int64_t delay_ns);
/* Requeue after this key's next backoff step. */
void workqueue_retry(struct workqueue *q, const char *key);
/* The first backoff step, doubled at each failure up to 1000 s: 5 ms unless
 * set (upstream's certificate controllers start from 200 ms). */
void workqueue_set_base_delay(struct workqueue *q, int64_t base_ns);
void workqueue_forget(struct workqueue *q, const char *key);
void workqueue_done(struct workqueue *q, const char *key);
size_t workqueue_len(const struct workqueue *q);

#endif
