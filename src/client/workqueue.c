#include "client/workqueue.h"

#include "base/hmap.h"
#include "base/metrics.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Everything the queue knows about one key. */
struct item {
	char *key;
	bool queued;     /* in the FIFO */
	bool processing; /* handed to process(), not done yet */
	bool dirty;      /* added while processing: run again after done */
	int failures;
	int64_t added_at, started_at; /* mono: added, handed to process() */
	struct item *pnext, *pprev;   /* the processing list (instrumented queues) */
	struct timer *delay;
	struct workqueue *q;
	struct item *next; /* FIFO link */
};

struct workqueue {
	struct loop *loop;
	int workers, busy;
	void (*process)(void *arg, const char *key);
	void *arg;
	struct hmap items;
	struct item *head, *tail;
	size_t len;
	struct timer *kick; /* runs the queue on the next turn */
	/* workqueue_instrument's series (NULL: not instrumented). */
	struct metrics *metrics;
	struct metric_series *depth, *adds, *queue_lat, *work_lat, *retries, *unfinished,
		*longest;
	struct item *processing; /* the items handed out, for the in-progress gauges */
	int64_t base_delay_ns;   /* workqueue_retry's first step */
};

/* client-go's default per-item limiter: 5 ms doubling to 1000 s. */
#define BASE_DELAY_NS (5 * NS_PER_MS)
#define MAX_DELAY_NS (1000 * NS_PER_SEC)

/* upstream's workqueue histograms: 10 ns to 10 s, by tens. */
static const double latency_buckets[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10};

static void update_unfinished(void *arg);

void workqueue_instrument(struct workqueue *q, struct metrics *m, const char *name)
{
	size_t nb = sizeof(latency_buckets) / sizeof(latency_buckets[0]);

	q->depth = metrics_with(metrics_gauge(m, "workqueue_depth",
					      "Current depth of workqueue", "name"),
				name);
	q->adds = metrics_with(metrics_counter(m, "workqueue_adds_total",
					       "Total number of adds handled by workqueue", "name"),
			       name);
	q->queue_lat = metrics_with(
		metrics_histogram(m, "workqueue_queue_duration_seconds",
				  "How long in seconds an item stays in workqueue before being "
				  "requested.",
				  "name", latency_buckets, nb),
		name);
	q->work_lat = metrics_with(
		metrics_histogram(m, "workqueue_work_duration_seconds",
				  "How long in seconds processing an item from workqueue takes.",
				  "name", latency_buckets, nb),
		name);
	q->retries = metrics_with(metrics_counter(m, "workqueue_retries_total",
						  "Total number of retries handled by workqueue",
						  "name"),
				  name);
	q->unfinished = metrics_with(
		metrics_gauge(m, "workqueue_unfinished_work_seconds",
			      "How many seconds of work has done that is in progress and hasn't "
			      "been observed by work_duration. Large values indicate stuck "
			      "threads. One can deduce the number of stuck threads by observing "
			      "the rate at which this increases.",
			      "name"),
		name);
	q->longest = metrics_with(
		metrics_gauge(m, "workqueue_longest_running_processor_seconds",
			      "How many seconds has the longest running processor for workqueue "
			      "been running.",
			      "name"),
		name);
	q->metrics = m;
	metrics_on_render(m, update_unfinished, q);
}

/* The in-progress gauges, as upstream's updateUnfinishedWorkLoop keeps
 * them: brought up to date whenever the registry is rendered. */
static void update_unfinished(void *arg)
{
	struct workqueue *q = arg;
	int64_t now = clock_mono(), total = 0, longest = 0;

	for (const struct item *it = q->processing; it; it = it->pnext) {
		total += now - it->started_at;
		if (now - it->started_at > longest)
			longest = now - it->started_at;
	}
	metrics_set(q->unfinished, (double)total / 1e9);
	metrics_set(q->longest, (double)longest / 1e9);
}

/* upstream's metrics.add: once per key made dirty, with its time. */
static void counted_add(struct workqueue *q, struct item *it)
{
	it->added_at = clock_mono();
	if (q->depth) {
		metrics_add(q->depth, 1);
		metrics_inc(q->adds);
	}
}

static void push(struct workqueue *q, struct item *it)
{
	it->queued = true;
	it->next = NULL;
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->len++;
	timer_after(q->kick, 0);
}

static struct item *item_get(struct workqueue *q, const char *key);

static void on_delay(void *arg)
{
	struct item *it = arg;
	workqueue_add(it->q, it->key);
}

static struct item *item_get(struct workqueue *q, const char *key)
{
	struct item *it = hmap_get(&q->items, key);
	if (!it) {
		it = calloc(1, sizeof(*it));
		if (!it || !(it->key = strdup(key)))
			abort();
		it->q = q;
		it->delay = loop_timer(q->loop, on_delay, it);
		hmap_put(&q->items, key, it);
	}
	return it;
}

static void run(void *arg)
{
	struct workqueue *q = arg;
	while (q->head && q->busy < q->workers) {
		struct item *it = q->head;
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
		q->len--;
		it->queued = false;
		it->processing = true;
		it->dirty = false;
		it->started_at = clock_mono();
		if (q->depth) {
			metrics_add(q->depth, -1);
			metrics_observe(q->queue_lat, (double)(it->started_at - it->added_at) / 1e9);
			it->pprev = NULL;
			it->pnext = q->processing;
			if (q->processing)
				q->processing->pprev = it;
			q->processing = it;
		}
		q->busy++;
		q->process(q->arg, it->key);
	}
}

struct workqueue *workqueue_new(struct loop *loop, int workers,
				void (*process)(void *arg, const char *key), void *arg)
{
	struct workqueue *q = calloc(1, sizeof(*q));
	if (!q)
		abort();
	q->loop = loop;
	q->base_delay_ns = BASE_DELAY_NS;
	q->workers = workers > 0 ? workers : 1;
	q->process = process;
	q->arg = arg;
	q->kick = loop_timer(loop, run, q);
	return q;
}

void workqueue_free(struct workqueue *q)
{
	const char *k;
	void *v;
	if (!q)
		return;
	for (size_t i = 0; hmap_next(&q->items, &i, &k, &v);) {
		struct item *it = v;
		timer_free(it->delay);
		free(it->key);
		free(it);
	}
	hmap_free(&q->items);
	timer_free(q->kick);
	if (q->metrics)
		metrics_off_render(q->metrics, update_unfinished, q);
	free(q);
}

void workqueue_add(struct workqueue *q, const char *key)
{
	struct item *it = item_get(q, key);
	if (it->processing) {
		if (!it->dirty)
			counted_add(q, it);
		it->dirty = true;
		return;
	}
	if (!it->queued) {
		counted_add(q, it);
		push(q, it);
	}
}

void workqueue_add_after(struct workqueue *q, const char *key, int64_t delay_ns)
{
	struct item *it = item_get(q, key);
	/* upstream's AddAfter counts a retry, rate-limited or not. */
	if (q->retries)
		metrics_inc(q->retries);
	/* An earlier wake-up wins. */
	if (!timer_pending(it->delay) || timer_deadline(it->delay) > clock_mono() + delay_ns)
		timer_after(it->delay, delay_ns);
}

void workqueue_retry(struct workqueue *q, const char *key)
{
	struct item *it = item_get(q, key);
	int64_t d = q->base_delay_ns;
	for (int i = 0; i < it->failures && d < MAX_DELAY_NS; i++)
		d *= 2;
	if (d > MAX_DELAY_NS)
		d = MAX_DELAY_NS;
	it->failures++;
	workqueue_add_after(q, key, d);
}

void workqueue_set_base_delay(struct workqueue *q, int64_t base_ns)
{
	q->base_delay_ns = base_ns > 0 ? base_ns : BASE_DELAY_NS;
}

void workqueue_forget(struct workqueue *q, const char *key)
{
	struct item *it = hmap_get(&q->items, key);
	if (it)
		it->failures = 0;
}

void workqueue_done(struct workqueue *q, const char *key)
{
	struct item *it = hmap_get(&q->items, key);
	if (!it || !it->processing)
		return;
	it->processing = false;
	q->busy--;
	if (q->work_lat) {
		metrics_observe(q->work_lat, (double)(clock_mono() - it->started_at) / 1e9);
		if (it->pprev)
			it->pprev->pnext = it->pnext;
		else
			q->processing = it->pnext;
		if (it->pnext)
			it->pnext->pprev = it->pprev;
		it->pnext = it->pprev = NULL;
	}
	if (it->dirty) {
		it->dirty = false;
		push(q, it);
	} else if (!it->queued && !timer_pending(it->delay) && it->failures == 0) {
		/* Nothing more to do for this key: forget it entirely. */
		hmap_del(&q->items, key);
		timer_free(it->delay);
		free(it->key);
		free(it);
	}
	timer_after(q->kick, 0);
}

size_t workqueue_len(const struct workqueue *q)
{
	return q->len;
}
