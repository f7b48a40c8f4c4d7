#include "base/clock.h"
#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Virtual time: wall = virt_wall, mono = virt_mono; both move together. */
static atomic_bool virt_on;
static atomic_llong virt_wall;
static atomic_llong virt_mono;
static atomic_llong wall_offset;

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timer_set **sets;
static size_t nsets, capsets;

struct timer {
	struct timer_set *set;
	timer_cb cb;
	void *arg;
	const struct log_scope *scope; /* current when the timer was made */
	ptrdiff_t index; /* position in the heap (its slot has the deadline), -1 when not armed */
};

/* A heap slot carries its timer's key: ordering the heap reads the slots
 * only, not the timers (a hollow kubelets process has tens of thousands
 * of them, cold). */
struct slot {
	int64_t deadline;
	int64_t latest; /* the deadline and its slack: when it must have fired */
	uint64_t seq;   /* arming order: breaks ties between equal deadlines */
	struct timer *t;
};

struct timer_set {
	struct slot *heap;
	size_t len, cap;
	uint64_t seq;
	int64_t max_slack;
	/* timers_wake's answer, kept until the slot that gave it leaves the
	 * heap (an arm can only lower it): arming is O(1), and the walk runs
	 * once a wake-up, not once for every timer re-armed in it. */
	int64_t wake;
	bool wake_known;
	void (*on_change)(void *arg);
	void *on_change_arg;
};

static int64_t ts_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int64_t clock_now(void)
{
	/* A node's skewed clock (cube fault clock-skew) is its log scope's. */
	const struct log_scope *s = log_scope_current();
	int64_t off = atomic_load(&wall_offset) + (s ? s->clock_skew_ns : 0);

	if (atomic_load(&virt_on))
		return atomic_load(&virt_wall) + off;
	return ts_ns(CLOCK_REALTIME) + off;
}

void clock_set_offset(int64_t offset_ns)
{
	atomic_store(&wall_offset, offset_ns);
}

int64_t clock_offset(void)
{
	return atomic_load(&wall_offset);
}

int64_t clock_mono(void)
{
	if (atomic_load(&virt_on))
		return atomic_load(&virt_mono);
	return ts_ns(CLOCK_MONOTONIC);
}

int64_t clock_now_sec(void)
{
	int64_t ns = clock_now();
	return ns >= 0 ? ns / NS_PER_SEC : -((-ns + NS_PER_SEC - 1) / NS_PER_SEC);
}

bool clock_is_virtual(void)
{
	return atomic_load(&virt_on);
}

void clock_use_virtual(int64_t wall_ns)
{
	atomic_store(&virt_wall, wall_ns);
	/* Start mono well away from zero so "0 = unset" bugs show. */
	atomic_store(&virt_mono, 1000 * NS_PER_SEC);
	atomic_store(&virt_on, true);
}

void clock_use_real(void)
{
	atomic_store(&virt_on, false);
}

static void virt_step_to(int64_t mono)
{
	int64_t d = mono - atomic_load(&virt_mono);
	if (d <= 0)
		return;
	atomic_fetch_add(&virt_mono, d);
	atomic_fetch_add(&virt_wall, d);
}

/* The set holding the globally earliest deadline, or NULL. */
static struct timer_set *earliest_set(int64_t *deadline)
{
	struct timer_set *best = NULL;
	int64_t bestd = INT64_MAX;

	pthread_mutex_lock(&sets_lock);
	for (size_t i = 0; i < nsets; i++) {
		int64_t d = timers_next(sets[i]);
		if (d < bestd) {
			bestd = d;
			best = sets[i];
		}
	}
	pthread_mutex_unlock(&sets_lock);
	*deadline = bestd;
	return best;
}

int clock_advance(int64_t d_ns)
{
	int64_t target;
	int fired = 0;

	if (!atomic_load(&virt_on) || d_ns < 0)
		return 0;
	target = atomic_load(&virt_mono) + d_ns;
	for (;;) {
		int64_t deadline;
		struct timer_set *set = earliest_set(&deadline);
		if (!set || deadline > target)
			break;
		virt_step_to(deadline);
		fired += timers_run(set);
	}
	virt_step_to(target);
	return fired;
}

/* ---- the heap ---------------------------------------------------------- */

static bool before(const struct slot *a, const struct slot *b)
{
	return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void heap_place(struct timer_set *s, size_t i, struct slot v)
{
	s->heap[i] = v;
	v.t->index = (ptrdiff_t)i;
}

static void heap_up(struct timer_set *s, size_t i)
{
	struct slot v = s->heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!before(&v, &s->heap[parent]))
			break;
		heap_place(s, i, s->heap[parent]);
		i = parent;
	}
	heap_place(s, i, v);
}

static void heap_down(struct timer_set *s, size_t i)
{
	struct slot v = s->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= s->len)
			break;
		if (c + 1 < s->len && before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!before(&s->heap[c], &v))
			break;
		heap_place(s, i, s->heap[c]);
		i = c;
	}
	heap_place(s, i, v);
}

static void heap_remove(struct timer_set *s, struct timer *t)
{
	size_t i = (size_t)t->index;
	struct slot last = s->heap[--s->len];

	if (s->heap[i].latest == s->wake)
		s->wake_known = false;

	t->index = -1;
	if (last.t == t)
		return;
	heap_place(s, i, last);
	heap_up(s, i);
	heap_down(s, (size_t)last.t->index);
}

struct timer_set *timers_new(void)
{
	struct timer_set *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	pthread_mutex_lock(&sets_lock);
	if (nsets == capsets) {
		capsets = capsets ? capsets * 2 : 8;
		sets = realloc(sets, capsets * sizeof(*sets));
		if (!sets)
			abort();
	}
	sets[nsets++] = s;
	pthread_mutex_unlock(&sets_lock);
	return s;
}

void timers_free(struct timer_set *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&sets_lock);
	for (size_t i = 0; i < nsets; i++) {
		if (sets[i] == s) {
			sets[i] = sets[--nsets];
			break;
		}
	}
	if (nsets == 0) {
		free(sets);
		sets = NULL;
		capsets = 0;
	}
	pthread_mutex_unlock(&sets_lock);
	free(s->heap);
	free(s);
}

void timers_on_change(struct timer_set *s, void (*cb)(void *), void *arg)
{
	s->on_change = cb;
	s->on_change_arg = arg;
}

int64_t timers_next(const struct timer_set *s)
{
	return s->len ? s->heap[0].deadline : INT64_MAX;
}

void timers_set_slack(struct timer_set *s, int64_t max_ns)
{
	s->max_slack = max_ns > 0 ? max_ns : 0;
}

/*
 * The least `latest` in the heap. A slot whose deadline is already past the
 * best found cannot do better, nor can anything below it (deadlines only
 * grow down the heap): the walk visits the timers due within one slack of
 * the first, a few dozen in a hollow kubelets process, one without slack.
 */
int64_t timers_wake(struct timer_set *s)
{
	size_t stack[64], n = 0;
	int64_t best = INT64_MAX;

	if (s->wake_known)
		return s->wake;
	if (s->len) {
		best = s->heap[0].latest;
		stack[n++] = 0;
	}
	while (n) {
		size_t i = stack[--n];
		if (s->heap[i].latest < best)
			best = s->heap[i].latest;
		/* Depth-first: the stack holds at most one pending sibling a level. */
		for (size_t c = 2 * i + 1; c <= 2 * i + 2 && c < s->len; c++)
			if (s->heap[c].deadline < best && n < sizeof(stack) / sizeof(stack[0]))
				stack[n++] = c;
	}
	s->wake = best;
	s->wake_known = true;
	return best;
}

int timers_count(const struct timer_set *s)
{
	return (int)s->len;
}

int timers_run(struct timer_set *s)
{
	int64_t now = clock_mono();
	int fired = 0;

	/* A callback may arm, cancel or free timers, this one included. */
	while (s->len && s->heap[0].deadline <= now) {
		struct timer *t = s->heap[0].t;
		const struct log_scope *prev = log_scope_enter(t->scope);
		heap_remove(s, t);
		t->cb(t->arg); /* may free t */
		log_scope_enter(prev);
		fired++;
	}
	return fired;
}

struct timer *timer_new(struct timer_set *s, timer_cb cb, void *arg)
{
	struct timer *t = calloc(1, sizeof(*t));
	if (!t)
		abort();
	t->set = s;
	t->cb = cb;
	t->arg = arg;
	t->scope = log_scope_current();
	t->index = -1;
	return t;
}

void timer_free(struct timer *t)
{
	if (!t)
		return;
	timer_cancel(t);
	free(t);
}

void timer_cancel(struct timer *t)
{
	if (t->index >= 0)
		heap_remove(t->set, t);
}

static int64_t slack_for(const struct timer_set *s, int64_t deadline)
{
	int64_t d = deadline - clock_mono(), slack;

	if (!s->max_slack || d <= 0)
		return 0;
	slack = d / TIMER_SLACK_DIVISOR;
	return slack < s->max_slack ? slack : s->max_slack;
}

void timer_at(struct timer *t, int64_t deadline)
{
	struct timer_set *s = t->set;
	int64_t old_wake = timers_wake(s), latest;

	timer_cancel(t);
	if (s->len == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->heap = realloc(s->heap, s->cap * sizeof(*s->heap));
		if (!s->heap)
			abort();
	}
	latest = slack_for(s, deadline);
	latest = deadline > INT64_MAX - latest ? INT64_MAX : deadline + latest;
	heap_place(s, s->len++, (struct slot){deadline, latest, s->seq++, t});
	heap_up(s, (size_t)t->index);
	if (s->wake_known && latest < s->wake)
		s->wake = latest;
	if (s->on_change && latest < old_wake)
		s->on_change(s->on_change_arg);
}

void timer_after(struct timer *t, int64_t delay_ns)
{
	timer_at(t, clock_mono() + (delay_ns > 0 ? delay_ns : 0));
}

bool timer_pending(const struct timer *t)
{
	return t->index >= 0;
}

int64_t timer_deadline(const struct timer *t)
{
	return t->index >= 0 ? t->set->heap[t->index].deadline : INT64_MAX;
}
