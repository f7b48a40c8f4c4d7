#include "storage/cache.h"

#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A doubly linked list of watchers: the unindexed ones, or one node's. */
struct wlist {
	struct cache_watch *head;
};

struct cache_watch {
	struct cache *c;
	char *prefix;
	size_t prefix_len;
	int64_t from_rev;
	cache_watch_fn fn;
	void *arg;
	char *node;         /* index value, or NULL */
	struct wlist *list; /* the list it is on */
	bool dead;          /* unwatched during a dispatch; freed after it */
	struct cache_watch *prev, *next;
};

/* A write on its way to disk. */
struct pending {
	struct cache *c;
	struct cache_event ev;
	cache_done_fn done;
	void *arg;
};

struct cache {
	struct store *store;
	struct hmap objs; /* key → json_t* (latest state) */
	int64_t rev;      /* last revision handed out */
	int64_t gone_rev; /* events at or before this may be missing from the window */
	struct cache_event *ring;
	size_t window, head, len;
	struct wlist unindexed;
	struct hmap by_node; /* spec.nodeName → struct wlist* */
	int dispatching;     /* watchers may unwatch from inside their callback */
	size_t inflight;     /* writes handed to the store, not yet durable */
	struct cache_watch **doomed;
	size_t ndoomed, capdoomed;
};

struct cache *cache_new(struct store *store, size_t window)
{
	struct cache *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->store = store;
	c->window = window ? window : 1;
	c->ring = calloc(c->window, sizeof(*c->ring));
	if (!c->ring)
		abort();
	return c;
}

static void event_clear(struct cache_event *ev)
{
	free((char *)ev->key);
	json_decref(ev->obj);
	json_decref(ev->prev);
	memset(ev, 0, sizeof(*ev));
}

void cache_free(struct cache *c)
{
	const char *k;
	void *v;

	if (!c)
		return;
	for (size_t i = 0; hmap_next(&c->objs, &i, &k, &v);)
		json_decref(v);
	hmap_free(&c->objs);
	for (size_t i = 0; i < c->len; i++)
		event_clear(&c->ring[(c->head + i) % c->window]);
	free(c->ring);
	while (c->unindexed.head)
		cache_unwatch(c->unindexed.head);
	for (size_t i = 0; hmap_next(&c->by_node, &i, &k, &v);) {
		struct wlist *l = v;
		while (l->head)
			cache_unwatch(l->head);
		free(l);
	}
	hmap_free(&c->by_node);
	free(c->doomed);
	free(c);
}

static void load_one(void *arg, const char *key, const char *value, size_t len, int64_t rev)
{
	struct cache *c = arg;
	json_t *obj = jx_parse(value, len);
	if (!obj) {
		LOG_ERROR("storage: skipping unreadable object %s: %s", key, err_msg());
		return;
	}
	json_decref(hmap_put(&c->objs, key, obj));
}

int cache_load(struct cache *c)
{
	int64_t rev = 0;
	int r = c->store ? store_load(c->store, load_one, c, &rev) : 0;
	if (r == 0) {
		c->rev = rev;
		c->gone_rev = rev;
	}
	return r;
}

int64_t cache_rev(const struct cache *c)
{
	return c->rev;
}

json_t *cache_get(const struct cache *c, const char *key)
{
	return hmap_get(&c->objs, key);
}

static int cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

size_t cache_list(const struct cache *c, const char *prefix, const char *after, size_t limit,
                  json_t ***out, bool *more)
{
	size_t plen = strlen(prefix), n = 0, cap = 64;
	const char **keys = malloc(cap * sizeof(*keys));
	const char *k;
	void *v;

	if (!keys)
		abort();
	for (size_t i = 0; hmap_next(&c->objs, &i, &k, &v);) {
		if (strncmp(k, prefix, plen) != 0 || (after && strcmp(k, after) <= 0))
			continue;
		if (n == cap && !(keys = realloc(keys, (cap *= 2) * sizeof(*keys))))
			abort();
		keys[n++] = k;
	}
	qsort(keys, n, sizeof(*keys), cmp_keys);
	if (more)
		*more = limit && n > limit;
	if (limit && n > limit)
		n = limit;
	*out = malloc((n ? n : 1) * sizeof(**out));
	if (!*out)
		abort();
	for (size_t i = 0; i < n; i++)
		(*out)[i] = hmap_get(&c->objs, keys[i]);
	free(keys);
	return n;
}

size_t cache_count(const struct cache *c, const char *prefix)
{
	size_t plen = strlen(prefix), n = 0;
	const char *k;
	void *v;
	for (size_t i = 0; hmap_next(&c->objs, &i, &k, &v);)
		n += strncmp(k, prefix, plen) == 0;
	return n;
}

static void ring_push(struct cache *c, const struct cache_event *ev)
{
	struct cache_event *slot;
	if (c->len == c->window) {
		slot = &c->ring[c->head];
		c->gone_rev = slot->rev;
		event_clear(slot);
		c->head = (c->head + 1) % c->window;
		c->len--;
	}
	slot = &c->ring[(c->head + c->len) % c->window];
	*slot = *ev;
	if (!(slot->key = strdup(ev->key)))
		abort();
	json_incref(slot->obj);
	json_incref(slot->prev);
	c->len++;
}

static bool watcher_wants(const struct cache_watch *w, const struct cache_event *ev)
{
	return ev->rev > w->from_rev && strncmp(ev->key, w->prefix, w->prefix_len) == 0;
}

static void unlink_free(struct cache_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		w->list->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	free(w->prefix);
	free(w->node);
	free(w);
}

static void dispatch_list(struct wlist *l, const struct cache_event *ev)
{
	for (struct cache_watch *w = l ? l->head : NULL; w; w = w->next)
		if (!w->dead && watcher_wants(w, ev))
			w->fn(w->arg, ev);
}

static const char *node_of(const json_t *obj)
{
	const char *n = obj ? jx_str(obj, "spec.nodeName") : NULL;
	return n && *n ? n : NULL;
}

static void dispatch(struct cache *c, const struct cache_event *ev)
{
	const char *now = node_of(ev->obj), *was = node_of(ev->prev);

	c->dispatching++;
	dispatch_list(&c->unindexed, ev);
	/* A pod moving between nodes is news for both. */
	if (now)
		dispatch_list(hmap_get(&c->by_node, now), ev);
	if (was && (!now || strcmp(was, now)))
		dispatch_list(hmap_get(&c->by_node, was), ev);
	if (--c->dispatching == 0) {
		for (size_t i = 0; i < c->ndoomed; i++)
			unlink_free(c->doomed[i]);
		c->ndoomed = 0;
	}
}

static void on_durable(void *arg, int err)
{
	struct pending *p = arg;
	struct cache *c = p->c;

	if (c->store)
		c->inflight--;
	if (err) {
		/* The disk refused a write the cache already shows: memory and
		 * disk now disagree, and only a restart from disk is honest. */
		LOG_FATAL("storage write of %s at revision %" PRId64 " failed: %s", p->ev.key,
		          p->ev.rev, err_msg());
	}
	ring_push(c, &p->ev);
	dispatch(c, &p->ev);
	if (p->done)
		p->done(p->arg, 0, p->ev.obj);
	event_clear(&p->ev);
	free(p);
}

static void set_rv(json_t *obj, int64_t rev)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRId64, rev);
	jx_set_str(obj, "metadata.resourceVersion", buf);
}

static int submit(struct cache *c, enum cache_event_type type, const char *key, json_t *obj,
                  cache_done_fn done, void *arg)
{
	struct pending *p;
	json_t *prev = hmap_get(&c->objs, key);
	int64_t rev = c->rev + 1;
	char *value = NULL;

	if (type != CACHE_DELETED) {
		size_t len;
		set_rv(obj, rev);
		if (c->store)
			len = strlen(value = jx_dump(obj));
		else
			len = json_dumpb(obj, NULL, 0, JSON_COMPACT);
		if (len > CACHE_MAX_OBJECT_BYTES) {
			free(value);
			json_decref(obj);
			return err_set(ERR_TOOLARGE, "etcdserver: request is too large");
		}
	}
	if (!(p = calloc(1, sizeof(*p))))
		abort();
	p->c = c;
	p->done = done;
	p->arg = arg;
	p->ev.type = type;
	p->ev.rev = c->rev = rev;
	if (!(p->ev.key = strdup(key)))
		abort();
	p->ev.prev = prev; /* the map's reference moves to the event */
	if (type == CACHE_DELETED) {
		p->ev.obj = json_deep_copy(prev);
		hmap_del(&c->objs, key);
		set_rv(p->ev.obj, rev);
	} else {
		p->ev.obj = obj;
		hmap_put(&c->objs, key, json_incref(obj));
	}

	if (!c->store) {
		on_durable(p, 0);
		return 0;
	}
	struct store_op *op = calloc(1, sizeof(*op));
	if (!op)
		abort();
	op->type = type == CACHE_DELETED ? STORE_DELETE : STORE_PUT;
	if (!(op->key = strdup(key)))
		abort();
	op->rev = rev;
	if (op->type == STORE_PUT) {
		op->value = value;
		op->len = strlen(value);
	}
	c->inflight++;
	store_write(c->store, op, 1, on_durable, p);
	return 0;
}

size_t cache_inflight(const struct cache *c)
{
	return c->inflight;
}

int cache_create(struct cache *c, const char *key, json_t *obj, cache_done_fn done, void *arg)
{
	if (hmap_get(&c->objs, key)) {
		json_decref(obj);
		return err_set(ERR_EXISTS, "%s already exists", key);
	}
	return submit(c, CACHE_ADDED, key, obj, done, arg);
}

int cache_update(struct cache *c, const char *key, json_t *obj, cache_done_fn done, void *arg)
{
	if (!hmap_get(&c->objs, key)) {
		json_decref(obj);
		return err_set(ERR_NOTFOUND, "%s not found", key);
	}
	return submit(c, CACHE_MODIFIED, key, obj, done, arg);
}

int cache_delete(struct cache *c, const char *key, cache_done_fn done, void *arg)
{
	if (!hmap_get(&c->objs, key))
		return err_set(ERR_NOTFOUND, "%s not found", key);
	return submit(c, CACHE_DELETED, key, NULL, done, arg);
}

static struct cache_watch *watch_new(struct cache *c, const char *prefix, int64_t from_rev,
                                     const char *node, cache_watch_fn fn, void *arg)
{
	struct cache_watch *w;
	struct wlist *l = &c->unindexed;

	if (from_rev < c->gone_rev) {
		err_set(ERR_GONE, "too old resource version: %" PRId64 " (%" PRId64 ")", from_rev,
		        c->gone_rev);
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->prefix = strdup(prefix)) || (node && !(w->node = strdup(node))))
		abort();
	w->c = c;
	w->prefix_len = strlen(prefix);
	w->from_rev = from_rev;
	w->arg = arg;
	w->fn = fn;
	/* Replay first, then join a list: no event is seen twice or missed,
	 * since nothing commits while we run on the loop. */
	for (size_t i = 0; i < c->len; i++) {
		const struct cache_event *ev = &c->ring[(c->head + i) % c->window];
		if (watcher_wants(w, ev))
			fn(arg, ev);
	}
	if (node && !(l = hmap_get(&c->by_node, node))) {
		if (!(l = calloc(1, sizeof(*l))))
			abort();
		hmap_put(&c->by_node, node, l);
	}
	w->list = l;
	w->next = l->head;
	if (l->head)
		l->head->prev = w;
	l->head = w;
	return w;
}

struct cache_watch *cache_watch(struct cache *c, const char *prefix, int64_t from_rev,
                                cache_watch_fn fn, void *arg)
{
	return watch_new(c, prefix, from_rev, NULL, fn, arg);
}

struct cache_watch *cache_watch_node(struct cache *c, const char *prefix, int64_t from_rev,
                                     const char *node, cache_watch_fn fn, void *arg)
{
	return watch_new(c, prefix, from_rev, node, fn, arg);
}

void cache_unwatch(struct cache_watch *w)
{
	struct cache *c;

	if (!w)
		return;
	c = w->c;
	if (c->dispatching) {
		/* The dispatch loop is walking a list: unlink after it. */
		w->dead = true;
		if (c->ndoomed == c->capdoomed) {
			c->capdoomed = c->capdoomed ? c->capdoomed * 2 : 8;
			c->doomed = realloc(c->doomed, c->capdoomed * sizeof(*c->doomed));
			if (!c->doomed)
				abort();
		}
		c->doomed[c->ndoomed++] = w;
		return;
	}
	unlink_free(w);
}
