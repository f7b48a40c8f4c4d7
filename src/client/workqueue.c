#include "client/workqueue.h"

#include "base/hmap.h"

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
};

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
	free(q);
}

void workqueue_add(struct workqueue *q, const char *key)
{
	struct item *it = item_get(q, key);
	if (it->processing) {
		it->dirty = true;
		return;
	}
	if (!it->queued)
		push(q, it);
}

void workqueue_add_after(struct workqueue *q, const char *key, int64_t delay_ns)
{
	struct item *it = item_get(q, key);
	/* An earlier wake-up wins. */
	if (!timer_pending(it->delay) || timer_deadline(it->delay) > clock_mono() + delay_ns)
		timer_after(it->delay, delay_ns);
}

void workqueue_retry(struct workqueue *q, const char *key)
{
	struct item *it = item_get(q, key);
	int64_t d = 5 * NS_PER_MS;
	for (int i = 0; i < it->failures && d < 1000 * NS_PER_SEC; i++)
		d *= 2;
	if (d > 1000 * NS_PER_SEC)
		d = 1000 * NS_PER_SEC;
	it->failures++;
	workqueue_add_after(q, key, d);
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
