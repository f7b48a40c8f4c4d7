/*
 * The scheduling queue (upstream backend/queue/scheduling_queue.go, 1.32):
 *
 *   activeQ        a heap: higher spec.priority first, then the earlier
 *                  timestamp (PrioritySort);
 *   podBackoffQ    a heap by backoff expiry = timestamp + min(initial ·
 *                  2^(attempts−1), max); the timestamp is reset when a failed
 *                  pod comes back, so the backoff counts from the failure;
 *   unschedulable  pods waiting for a cluster event that one of their
 *                  rejecting plugins registered, or for the 5-minute flush.
 *
 * A pod that failed with no rejecting plugin (an error, no nodes) goes back
 * through backoff. One rejected by plugins goes to unschedulable unless an
 * event those plugins care about arrived while it was being scheduled.
 */
#include "scheduler/internal.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/metrics.h"

#include <stdlib.h>
#include <string.h>

int64_t scheduler_backoff(int64_t initial_ns, int64_t max_ns, int attempts)
{
	int64_t d = initial_ns;
	if (attempts <= 0)
		return 0;
	for (int i = 1; i < attempts; i++) {
		if (d > max_ns - d)
			return max_ns;
		d *= 2;
	}
	return d < max_ns ? d : max_ns;
}

int64_t queue_backoff(const struct queue *q, const struct qpod *p)
{
	return p->timestamp + scheduler_backoff(q->initial_backoff_ns, q->max_backoff_ns,
						p->attempts);
}

static const char *where_name(enum qwhere w)
{
	return w == Q_ACTIVE ? "active" : w == Q_BACKOFF ? "backoff" : "unschedulable";
}

static void count_pending(struct queue *q)
{
	if (!q->m_pending)
		return;
	metrics_set(metrics_with(q->m_pending, "active"), (double)q->nactive);
	metrics_set(metrics_with(q->m_pending, "backoff"), (double)q->nbackoff);
	metrics_set(metrics_with(q->m_pending, "unschedulable"), (double)q->nunschedulable);
	metrics_set(metrics_with(q->m_pending, "gated"), 0);
}

static void incoming(struct queue *q, enum qwhere w, const char *event)
{
	if (q->m_incoming)
		metrics_inc(metrics_with(q->m_incoming, where_name(w), event));
}

/* ---- heaps ------------------------------------------------------------------------ */

static int64_t priority(const struct qpod *p)
{
	return jx_int(p->pod, "spec.priority", 0);
}

/* a before b? */
static bool before(const struct queue *q, bool active, const struct qpod *a, const struct qpod *b)
{
	if (!active)
		return queue_backoff(q, a) < queue_backoff(q, b);
	if (priority(a) != priority(b))
		return priority(a) > priority(b);
	return a->timestamp < b->timestamp;
}

struct heap {
	struct qpod ***v;
	size_t *n, *cap;
	bool active;
};

static struct heap heap_of(struct queue *q, bool active)
{
	return active ? (struct heap){&q->active, &q->nactive, &q->capactive, true}
		      : (struct heap){&q->backoff, &q->nbackoff, &q->capbackoff, false};
}

static void swap(struct qpod **v, size_t i, size_t j)
{
	struct qpod *t = v[i];
	v[i] = v[j];
	v[j] = t;
	v[i]->heap_at = i;
	v[j]->heap_at = j;
}

static void sift_up(struct queue *q, struct heap h, size_t i)
{
	struct qpod **v = *h.v;
	while (i && before(q, h.active, v[i], v[(i - 1) / 2])) {
		swap(v, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void sift_down(struct queue *q, struct heap h, size_t i)
{
	struct qpod **v = *h.v;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < *h.n && before(q, h.active, v[l], v[m]))
			m = l;
		if (r < *h.n && before(q, h.active, v[r], v[m]))
			m = r;
		if (m == i)
			return;
		swap(v, i, m);
		i = m;
	}
}

static void heap_push(struct queue *q, struct heap h, struct qpod *p)
{
	if (*h.n == *h.cap) {
		*h.cap = *h.cap ? *h.cap * 2 : 64;
		if (!(*h.v = realloc(*h.v, *h.cap * sizeof(**h.v))))
			abort();
	}
	(*h.v)[*h.n] = p;
	p->heap_at = (*h.n)++;
	sift_up(q, h, p->heap_at);
}

static void heap_remove(struct queue *q, struct heap h, size_t i)
{
	struct qpod **v = *h.v;
	if (i != --*h.n) {
		swap(v, i, *h.n);
		sift_down(q, h, i);
		sift_up(q, h, i);
	}
}

/* ---- placing pods ------------------------------------------------------------------- */

static void take_out(struct queue *q, struct qpod *p)
{
	if (p->where == Q_ACTIVE)
		heap_remove(q, heap_of(q, true), p->heap_at);
	else if (p->where == Q_BACKOFF)
		heap_remove(q, heap_of(q, false), p->heap_at);
	else if (p->where == Q_UNSCHEDULABLE)
		q->nunschedulable--;
	p->where = Q_NONE;
}

static void place(struct queue *q, struct qpod *p, enum qwhere w, const char *event)
{
	take_out(q, p);
	p->where = w;
	if (w == Q_ACTIVE) {
		if (!p->initial)
			p->initial = clock_mono();
		heap_push(q, heap_of(q, true), p);
	} else if (w == Q_BACKOFF) {
		heap_push(q, heap_of(q, false), p);
	} else if (w == Q_UNSCHEDULABLE) {
		q->nunschedulable++;
	}
	incoming(q, w, event);
	count_pending(q);
}

/* Backoff if the pod is still backing off, else active. */
static void requeue(struct queue *q, struct qpod *p, const char *event)
{
	place(q, p, queue_backoff(q, p) > clock_mono() ? Q_BACKOFF : Q_ACTIVE, event);
}

void queue_init(struct queue *q, int64_t initial_ns, int64_t max_ns)
{
	memset(q, 0, sizeof(*q));
	q->initial_backoff_ns = initial_ns;
	q->max_backoff_ns = max_ns;
	q->max_unschedulable_ns = 5 * 60 * NS_PER_SEC;
}

static void qpod_free(struct qpod *p)
{
	json_decref(p->pod);
	free(p->key);
	free(p);
}

void queue_free(struct queue *q)
{
	const char *k;
	void *v;
	for (size_t it = 0; hmap_next(&q->pods, &it, &k, &v);)
		qpod_free(v);
	hmap_free(&q->pods);
	free(q->active);
	free(q->backoff);
}

void queue_add(struct queue *q, const char *key, json_t *pod)
{
	struct qpod *p = hmap_get(&q->pods, key);

	if (p) {
		queue_update(q, key, pod, EV_POD_UPDATE);
		return;
	}
	if (!(p = calloc(1, sizeof(*p))))
		abort();
	p->key = strdup(key);
	p->pod = json_incref(pod);
	p->timestamp = clock_mono();
	hmap_put(&q->pods, key, p);
	place(q, p, Q_ACTIVE, "UnschedulablePodAdd");
}

void queue_update(struct queue *q, const char *key, json_t *pod, unsigned ev)
{
	struct qpod *p = hmap_get(&q->pods, key);

	if (!p) {
		queue_add(q, key, pod);
		return;
	}
	json_decref(p->pod);
	p->pod = json_incref(pod);
	if (p->where == Q_FLIGHT) {
		/* Deleted and made again under the same name while in flight: the
		 * new pod is queued when the attempt ends. */
		p->deleted = false;
		p->flight_events |= ev;
		return;
	}
	if (p->where == Q_ACTIVE) {
		/* A new priority can move it. */
		sift_down(q, heap_of(q, true), p->heap_at);
		sift_up(q, heap_of(q, true), p->heap_at);
		return;
	}
	if (p->where == Q_UNSCHEDULABLE && ev) {
		/* Its own change may be what its rejectors wait for. */
		for (int i = 0; i < 32; i++)
			if ((p->rejectors & (1u << i)) && (q->plugin_events[i] & ev)) {
				requeue(q, p, "UnschedulablePodUpdate");
				return;
			}
	}
}

void queue_delete(struct queue *q, const char *key)
{
	struct qpod *p = hmap_get(&q->pods, key);
	if (!p)
		return;
	if (p->where == Q_FLIGHT) {
		p->deleted = true; /* freed when the attempt ends */
		return;
	}
	take_out(q, p);
	hmap_del(&q->pods, key);
	qpod_free(p);
	count_pending(q);
}

struct qpod *queue_pop(struct queue *q)
{
	struct qpod *p;
	if (!q->nactive)
		return NULL;
	p = q->active[0];
	take_out(q, p);
	p->where = Q_FLIGHT;
	p->attempts++;
	p->flight_events = 0;
	count_pending(q);
	return p;
}

static bool ended_deleted(struct queue *q, struct qpod *p)
{
	if (!p->deleted)
		return false;
	hmap_del(&q->pods, p->key);
	qpod_free(p);
	return true;
}

void queue_failed(struct queue *q, struct qpod *p, unsigned rejectors)
{
	bool woken = false;

	if (ended_deleted(q, p))
		return;
	p->timestamp = clock_mono();
	p->rejectors = rejectors;
	p->where = Q_NONE;
	if (!rejectors) {
		requeue(q, p, "ScheduleAttemptFailure");
		return;
	}
	for (int i = 0; i < 32 && !woken; i++)
		woken = (rejectors & (1u << i)) && (q->plugin_events[i] & p->flight_events);
	if (woken)
		requeue(q, p, "ScheduleAttemptFailure");
	else
		place(q, p, Q_UNSCHEDULABLE, "ScheduleAttemptFailure");
}

void queue_done(struct queue *q, struct qpod *p)
{
	hmap_del(&q->pods, p->key);
	qpod_free(p);
	count_pending(q);
}

void queue_move(struct queue *q, unsigned ev, const json_t *obj,
		bool (*hint)(void *arg, struct qpod *p, unsigned ev, const json_t *obj), void *arg,
		const char *event_name)
{
	const char *k;
	void *v;

	for (size_t it = 0; hmap_next(&q->pods, &it, &k, &v);) {
		struct qpod *p = v;
		bool registered = false;
		if (p->where == Q_FLIGHT) {
			p->flight_events |= ev;
			continue;
		}
		if (p->where != Q_UNSCHEDULABLE)
			continue;
		for (int i = 0; i < 32 && !registered; i++)
			registered = (p->rejectors & (1u << i)) && (q->plugin_events[i] & ev);
		if (registered && (!hint || hint(arg, p, ev, obj)))
			requeue(q, p, event_name);
	}
}

void queue_flush(struct queue *q, bool leftovers)
{
	int64_t now = clock_mono();

	while (q->nbackoff && queue_backoff(q, q->backoff[0]) <= now)
		place(q, q->backoff[0], Q_ACTIVE, "BackoffComplete");
	if (leftovers) {
		const char *k;
		void *v;
		for (size_t it = 0; hmap_next(&q->pods, &it, &k, &v);) {
			struct qpod *p = v;
			if (p->where == Q_UNSCHEDULABLE && now - p->timestamp > q->max_unschedulable_ns)
				requeue(q, p, "UnschedulableTimeout");
		}
	}
}

size_t queue_active_len(const struct queue *q)
{
	return q->nactive;
}
