#include "storage/cache.h"

#include "base/alloc.h"
#include "base/blob.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"

#include <inttypes.h>
#include <stdint.h>
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
	char *index;        /* its value in an index (a node, a key), or NULL */
	struct hmap *map;   /* that index: by_node, by_key; NULL: unindexed */
	struct wlist *list; /* the list it is on */
	bool dead;          /* unwatched during a dispatch; freed after it */
	struct cache_watch *prev, *next;
};

/* A write on its way to disk. */
struct pending {
	struct cache *c;
	struct cache_event ev;
	struct blob *prev_json;     /* ev.prev's text, or NULL (made when needed) */
	cache_done_fn done;
	void *arg;
	bool silent;                /* settles nothing anyone saw: no event */
	struct pending *next_same;  /* the key's next write in flight */
};

/* A key with writes on their way to disk: what readers see meanwhile. */
struct shadow {
	json_t *committed; /* the durable state; NULL: absent */
	struct blob *json; /* committed's text, once made; else NULL */
	size_t pending;    /* the key's writes not yet durable */
	struct pending *head, *tail; /* them, in submission (= completion) order */
};

/* A remote write the store took: its answer waits for the watch to bring
 * its revision, so that the writer then reads what it wrote. */
struct rwrite {
	struct cache *c;
	json_t *obj; /* what was written (PUT), or the last state (DELETE) */
	cache_done_fn done;
	void *arg;
	int err;     /* 0 or ERR_CONFLICT */
	int64_t rev; /* the write's revision, or the store's at the conflict */
	int64_t since; /* clock_mono when it began to wait */
	struct rwrite *next;
};

/* How long a durable write waits for the watch before it is answered
 * anyway: upstream answers at once; waiting is read-your-writes, not
 * durability. */
#define RWAIT_NS (5 * NS_PER_SEC)

/*
 * A key's latest state. Its committed text is made once and sent by every
 * reader. An object at rest (no write in flight) that nobody has read
 * since the last sweep and that nothing else holds is kept as that text
 * alone, and parsed again when it is next read: jansson's tree is 3 to 8
 * times the text (a Node 7.6x, a Lease 8x, a CSR 3x), and most objects of
 * a large cluster sit unread for minutes (a Node between status reports,
 * an issued CSR).
 */
struct entry {
	json_t *obj;       /* the state, parsed (a reference); NULL while cold */
	struct blob *json; /* the committed state's text: obj's when obj is set
	                    * (so no other object can take obj's address while
	                    * it is kept), the object's when cold; NULL when not
	                    * made yet or while obj is a write not yet durable */
	bool read;         /* handed out or written since the last sweep */
};

/*
 * An event in the window, kept as text: its objects are parsed again for
 * the rare reader of the past (a watch resuming from a revision, a list at
 * one) and let go by the next sweep. Kept parsed, the window held two
 * trees per event (a node's Lease ten times over at 1,000 nodes).
 */
struct past {
	enum cache_event_type type;
	int64_t rev;
	char *key;
	struct blob *json;      /* the new state's text */
	struct blob *prev_json; /* the state before's, or NULL: none */
	json_t *obj, *prev;     /* parsed for a reader since the last sweep, or NULL */
};

/*
 * How often cold objects are let go: one not read for 10 to 20 s. A pass
 * over the entries takes SWEEP_NS in SWEEP_STEPS steps, a part of the
 * table each: letting go of ten thousand Leases' trees at once would
 * stall the loop.
 */
#define SWEEP_NS (10 * NS_PER_SEC)
#define SWEEP_STEPS 10

struct cache {
	struct store *store;
	bool remote;           /* the store assigns revisions (store_remote) */
	struct rwrite *rwaits; /* remote writes waiting for their revision, by rev */
	size_t nrwaits;
	struct timer *watchdog; /* cache_set_loop: answers writes the watch is late with */
	struct timer *reload;   /* ... and loads again after a failed reload */
	struct timer *sweeper;  /* cache_set_loop: a step of a sweep every SWEEP_NS / SWEEP_STEPS */
	size_t sweep_at;        /* the slot of objs the next step starts at */
	void (*progress)(void *arg);
	void *progress_arg;
	struct hmap objs;    /* key → struct entry* (latest state, the writers' view) */
	struct hmap dirs;    /* a key's directory ("/registry/pods/default/") → struct hmap*
	                        of its keys: a list reads one kind, not every object */
	struct hmap shadows; /* key → struct shadow*, while writes are in flight */
	int64_t rev;         /* last revision handed out */
	int64_t committed;   /* last revision durable: every event up to it dispatched */
	int64_t gone_rev; /* events at or before this may be missing from the window */
	struct past *ring;
	size_t window, head, len;
	struct wlist unindexed;
	struct hmap by_node; /* spec.nodeName → struct wlist* (none empty) */
	struct hmap by_key;  /* one object's key → struct wlist* (none empty) */
	bool freeing;        /* cache_free: lists are freed after their watchers */
	int dispatching;     /* watchers may unwatch from inside their callback */
	size_t inflight;     /* writes handed to the store, not yet durable */
	struct cache_watch **doomed;
	size_t ndoomed, capdoomed;
};

/* ---- objs and its directory index ---------------------------------------------- */

/* The directory of key: up to and including its last '/'. */
static size_t dir_len(const char *key)
{
	const char *slash = strrchr(key, '/');
	return slash ? (size_t)(slash - key) + 1 : 0;
}

static void dir_add(struct cache *c, const char *key)
{
	char dir[512];
	size_t n = dir_len(key);
	struct hmap *set;

	snprintf(dir, sizeof(dir), "%.*s", (int)n, key);
	if (!(set = hmap_get(&c->dirs, dir))) {
		if (!(set = calloc(1, sizeof(*set))))
			abort();
		hmap_put(&c->dirs, dir, set);
	}
	hmap_put(set, key, (void *)1);
}

static void dir_del(struct cache *c, const char *key)
{
	char dir[512];
	size_t n = dir_len(key);
	struct hmap *set;

	snprintf(dir, sizeof(dir), "%.*s", (int)n, key);
	if (!(set = hmap_get(&c->dirs, dir)))
		return;
	hmap_del(set, key);
	if (hmap_len(set) == 0) {
		hmap_del(&c->dirs, dir);
		hmap_free(set);
		free(set);
	}
}

static void dirs_clear(struct cache *c)
{
	const char *k;
	void *v;

	for (size_t i = 0; hmap_next(&c->dirs, &i, &k, &v);) {
		hmap_free(v);
		free(v);
	}
	hmap_free(&c->dirs);
	memset(&c->dirs, 0, sizeof(c->dirs));
}

/* After objs was loaded whole. */
static void dirs_build(struct cache *c)
{
	const char *k;
	void *v;

	dirs_clear(c);
	for (size_t i = 0; hmap_next(&c->objs, &i, &k, &v);)
		dir_add(c, k);
}

static struct entry *entry_new(json_t *obj, struct blob *json)
{
	struct entry *e = xcalloc(1, sizeof(*e));
	e->obj = obj;
	e->json = json;
	return e;
}

static void entry_free(void *v)
{
	struct entry *e = v;
	json_decref(e->obj);
	blob_unref(e->json);
	free(e);
}

/* e's object (borrowed), parsed again if it was cold; NULL for no entry. */
static json_t *entry_obj(struct entry *e)
{
	if (!e)
		return NULL;
	if (!e->obj) {
		e->obj = jx_parse_dumped(e->json->data, e->json->len);
		/* Text this cache made, or loaded and parsed once already. */
		CUBE_ASSERT(e->obj);
	}
	e->read = true;
	return e->obj;
}

static void objs_clear(struct hmap *objs)
{
	hmap_free_values(objs, entry_free);
}

/*
 * Every change to which keys exist goes through these two. key's latest
 * state becomes obj, with its committed text json or NULL (both
 * references taken); the state it replaces is let go.
 */
static void objs_put(struct cache *c, const char *key, json_t *obj, struct blob *json)
{
	struct entry *e = hmap_get(&c->objs, key);

	if (e) {
		json_decref(e->obj);
		blob_unref(e->json);
	} else {
		hmap_put(&c->objs, key, e = entry_new(NULL, NULL));
		dir_add(c, key);
	}
	e->obj = obj;
	e->json = json;
	e->read = true;
}

static void objs_del(struct cache *c, const char *key)
{
	struct entry *e = hmap_del(&c->objs, key);
	if (e) {
		dir_del(c, key);
		entry_free(e);
	}
}

/* Calls fn for each key in objs that may lie under prefix: those of every
 * directory under it, or of the one directory it lies in. */
static void objs_under(const struct cache *c, const char *prefix,
                       void (*fn)(const struct cache *c, const char *key, void *arg), void *arg)
{
	size_t plen = strlen(prefix);
	const char *d, *k;
	void *set, *one;

	for (size_t i = 0; hmap_next(&c->dirs, &i, &d, &set);) {
		size_t dlen = strlen(d);
		if (strncmp(d, prefix, dlen < plen ? dlen : plen))
			continue;
		for (size_t j = 0; hmap_next(set, &j, &k, &one);)
			fn(c, k, arg);
	}
}

struct cache *cache_new(struct store *store, size_t window)
{
	struct cache *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->store = store;
	c->remote = store_remote(store);
	c->window = window ? window : 1;
	c->ring = calloc(c->window, sizeof(*c->ring));
	if (!c->ring)
		abort();
	return c;
}

/* A past event's parsed objects go; its texts stay. */
static void past_let_go(struct past *p)
{
	json_decref(p->obj);
	json_decref(p->prev);
	p->obj = p->prev = NULL;
}

static void past_clear(struct past *p)
{
	free(p->key);
	past_let_go(p);
	blob_unref(p->json);
	blob_unref(p->prev_json);
	memset(p, 0, sizeof(*p));
}

static void event_clear(struct cache_event *ev)
{
	free((char *)ev->key);
	json_decref(ev->obj);
	json_decref(ev->prev);
	blob_unref(ev->json);
	memset(ev, 0, sizeof(*ev));
}

/* ---- the objects' JSON, made once ------------------------------------------------- */

static struct blob *serialize(const json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY);
	struct blob *b;

	if (!text)
		abort();
	b = blob_new(text, strlen(text));
	free(text);
	return b;
}

/*
 * Where key's committed text is kept (its shadow's while writes are in
 * flight, else its entry's), with the committed object in *obj (NULL while
 * cold); NULL when key is absent.
 */
static struct blob **committed_slot(const struct cache *c, const char *key, json_t **obj)
{
	struct shadow *sh = hmap_get(&c->shadows, key);
	struct entry *e = hmap_get(&c->objs, key);

	*obj = sh ? sh->committed : e ? e->obj : NULL;
	if (sh)
		return sh->committed ? &sh->json : NULL;
	return e ? &e->json : NULL;
}

/* key's committed text, borrowed (its entry or shadow keeps it), made
 * once; NULL when absent. (A cold entry has its text.) */
static struct blob *committed_text(const struct cache *c, const char *key)
{
	json_t *obj;
	struct blob **text = committed_slot(c, key, &obj);

	if (text && !*text)
		*text = serialize(obj);
	return text ? *text : NULL;
}

struct blob *cache_json(struct cache *c, const char *key, const json_t *obj)
{
	json_t *committed;

	/* Only the committed state's is kept: an older version, a copy or an
	 * object from elsewhere is made for this reader alone. */
	if (obj && committed_slot(c, key, &committed) && committed == obj)
		return blob_ref(committed_text(c, key));
	return serialize(obj);
}

struct blob *cache_text(struct cache *c, const char *key)
{
	return blob_ref(committed_text(c, key));
}

/* The version of key whose text is json, parsed (a new reference): the
 * cache's own tree when it is that version, else parsed again. */
static json_t *parse_version(const struct cache *c, const char *key, const struct blob *json)
{
	json_t *obj;
	struct blob **text = committed_slot(c, key, &obj);

	if (text && *text == json && obj)
		return json_incref(obj);
	obj = jx_parse_dumped(json->data, json->len);
	CUBE_ASSERT(obj); /* text this cache made */
	return obj;
}

/* A past event's objects, parsed for a reader until the next sweep. */
static json_t *past_obj(const struct cache *c, struct past *p)
{
	if (!p->obj)
		p->obj = parse_version(c, p->key, p->json);
	return p->obj;
}

static json_t *past_prev(const struct cache *c, struct past *p)
{
	if (!p->prev && p->prev_json)
		p->prev = parse_version(c, p->key, p->prev_json);
	return p->prev;
}


/* An entry's visit: kept parsed if touched since the last, else let go. */
static void sweep_entry(struct cache *c, const char *key, struct entry *e)
{
	if (!e->obj)
		return;
	if (e->read) {
		e->read = false;
		return;
	}
	/* Letting go of a tree a reader holds frees nothing; a write not yet
	 * durable has no text to fall back on. */
	if (e->obj->refcount != 1 || hmap_get(&c->shadows, key))
		return;
	if (!e->json)
		e->json = serialize(e->obj);
	json_decref(e->obj);
	e->obj = NULL;
}

/* The entries in the next `slots` slots of objs; the window's parsed
 * trees once a pass ends. (A table grown meanwhile moves entries about:
 * one may be visited twice in a pass, or wait for the next.) */
static void sweep_step(struct cache *c, size_t slots)
{
	size_t cap = c->objs.cap, i = c->sweep_at < cap ? c->sweep_at : cap;
	size_t end = cap - i <= slots ? cap : i + slots;
	const char *k;
	void *v;

	while (i < end && hmap_next(&c->objs, &i, &k, &v))
		sweep_entry(c, k, v);
	if (i >= cap) {
		for (size_t j = 0; j < c->len; j++)
			past_let_go(&c->ring[(c->head + j) % c->window]);
		i = 0;
	}
	c->sweep_at = i;
}

void cache_sweep(struct cache *c)
{
	c->sweep_at = 0;
	sweep_step(c, c->objs.cap);
}

size_t cache_parsed(const struct cache *c)
{
	const char *k;
	void *v;
	size_t n = 0;

	for (size_t i = 0; hmap_next(&c->objs, &i, &k, &v);)
		n += ((struct entry *)v)->obj != NULL;
	return n;
}

/* cache_free: every watcher of an index, then its lists. */
static void unwatch_index(struct hmap *m)
{
	const char *k;
	void *v;

	for (size_t i = 0; hmap_next(m, &i, &k, &v);) {
		struct wlist *l = v;
		while (l->head)
			cache_unwatch(l->head);
		free(l);
	}
	hmap_free(m);
}

void cache_free(struct cache *c)
{
	const char *k;
	void *v;

	if (!c)
		return;
	timer_free(c->watchdog);
	timer_free(c->reload);
	timer_free(c->sweeper);
	while (c->rwaits) {
		struct rwrite *w = c->rwaits;
		c->rwaits = w->next;
		err_set(ERR_UNAVAILABLE, "the cache is closing");
		if (w->done)
			w->done(w->arg, ERR_UNAVAILABLE, NULL);
		json_decref(w->obj);
		free(w);
	}
	objs_clear(&c->objs);
	dirs_clear(c);
	for (size_t i = 0; hmap_next(&c->shadows, &i, &k, &v);) {
		json_decref(((struct shadow *)v)->committed);
		blob_unref(((struct shadow *)v)->json);
		free(v);
	}
	hmap_free(&c->shadows);
	for (size_t i = 0; i < c->len; i++)
		past_clear(&c->ring[(c->head + i) % c->window]);
	free(c->ring);
	c->freeing = true;
	while (c->unindexed.head)
		cache_unwatch(c->unindexed.head);
	unwatch_index(&c->by_node);
	unwatch_index(&c->by_key);
	free(c->doomed);
	free(c);
}

struct load_into {
	struct hmap *map; /* key → struct entry* */
	bool stamp; /* a remote store keeps the revision out of the value */
};

static void set_rv(json_t *obj, int64_t rev);

static void load_one(void *arg, const char *key, const char *value, size_t len, int64_t rev)
{
	struct load_into *l = arg;
	json_t *obj = jx_parse_dumped(value, len);
	struct entry *was;
	if (!obj) {
		LOG_ERROR("storage: skipping unreadable object %s: %s", key, err_msg());
		return;
	}
	if (l->stamp)
		set_rv(obj, rev);
	/* A local store holds the very text it was given (submit): the
	 * readers' as well. A remote one's lacks the revision. */
	was = hmap_put(l->map, key, entry_new(obj, l->stamp ? NULL : blob_new(value, len)));
	if (was)
		entry_free(was);
}

static void remote_event(void *arg, const struct store_event *ev);
static void remote_reset(void *arg);
static void on_watchdog(void *arg);

static void remote_watch(struct cache *c)
{
	struct store_watcher w = {.event = remote_event, .reset = remote_reset, .arg = c};
	store_watch(c->store, c->committed, &w);
}

int cache_load(struct cache *c)
{
	struct load_into l = {.map = &c->objs, .stamp = c->remote};
	int64_t rev = 0;
	int r = c->store ? store_load(c->store, load_one, &l, &rev) : 0;
	if (r == 0) {
		dirs_build(c);
		c->rev = c->committed = rev;
		c->gone_rev = rev;
		if (c->remote)
			remote_watch(c);
	}
	return r;
}

static void on_reload(void *arg)
{
	remote_reset(arg);
}

static void on_sweep(void *arg)
{
	struct cache *c = arg;

	sweep_step(c, c->objs.cap / SWEEP_STEPS + 1);
	timer_after(c->sweeper, SWEEP_NS / SWEEP_STEPS);
}

void cache_set_loop(struct cache *c, struct loop *loop)
{
	if (c->sweeper)
		return;
	c->sweeper = loop_timer(loop, on_sweep, c);
	timer_after(c->sweeper, SWEEP_NS / SWEEP_STEPS);
	if (!c->remote)
		return;
	c->watchdog = loop_timer(loop, on_watchdog, c);
	c->reload = loop_timer(loop, on_reload, c);
}

void cache_on_progress(struct cache *c, void (*fn)(void *arg), void *arg)
{
	c->progress = fn;
	c->progress_arg = arg;
}

bool cache_remote(const struct cache *c)
{
	return c->remote;
}

struct store *cache_store(const struct cache *c)
{
	return c->store;
}

int64_t cache_rev(const struct cache *c)
{
	return c->rev;
}

int64_t cache_committed_rev(const struct cache *c)
{
	return c->committed;
}

json_t *cache_get(const struct cache *c, const char *key)
{
	return entry_obj(hmap_get(&c->objs, key));
}

json_t *cache_get_committed(const struct cache *c, const char *key)
{
	struct shadow *sh = hmap_get(&c->shadows, key);
	return sh ? sh->committed : cache_get(c, key);
}

/* A key → state view to list: borrowed objects, or (text) their committed
 * texts; NULL for absent. */
struct view {
	const char **keys;
	void **vals;
	size_t n, cap;
	bool text;
};

static void view_add(struct view *v, const char *key, void *val)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 64;
		if (!(v->keys = realloc(v->keys, v->cap * sizeof(*v->keys))) ||
		    !(v->vals = realloc(v->vals, v->cap * sizeof(*v->vals))))
			abort();
	}
	v->keys[v->n] = key;
	v->vals[v->n++] = val;
}

static const struct view *sort_view;

static int cmp_view(const void *a, const void *b)
{
	return strcmp(sort_view->keys[*(const size_t *)a], sort_view->keys[*(const size_t *)b]);
}

/* The view's states under prefix after `after` (or from it, inclusive), in
 * key order, at most limit; their keys too when keys is not NULL. */
static size_t view_take(const struct view *v, const char *prefix, const char *after,
                        bool inclusive, size_t limit, void ***out, const char ***keys,
                        bool *more)
{
	size_t plen = strlen(prefix), n = 0, *idx = xmalloc((v->n + 1) * sizeof(*idx));

	for (size_t i = 0; i < v->n; i++)
		if (v->vals[i] && !strncmp(v->keys[i], prefix, plen) &&
		    (!after || strcmp(v->keys[i], after) >= (inclusive ? 0 : 1)))
			idx[n++] = i;
	sort_view = v; /* the loop's thread only */
	qsort(idx, n, sizeof(*idx), cmp_view);
	if (more)
		*more = limit && n > limit;
	if (limit && n > limit)
		n = limit;
	*out = xmalloc((n ? n : 1) * sizeof(**out));
	if (keys)
		*keys = xmalloc((n ? n : 1) * sizeof(**keys));
	for (size_t i = 0; i < n; i++) {
		(*out)[i] = v->vals[idx[i]];
		if (keys)
			(*keys)[i] = v->keys[idx[i]];
	}
	free(idx);
	return n;
}

static void view_free(struct view *v)
{
	free(v->keys);
	free(v->vals);
}

/* view_take's states, typed: the same pointers in an array of their own. */
static json_t **as_objects(void **vals, size_t n)
{
	json_t **out = xmalloc((n ? n : 1) * sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out[i] = vals[i];
	free(vals);
	return out;
}

static struct blob **as_texts(void **vals, size_t n)
{
	struct blob **out = xmalloc((n ? n : 1) * sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out[i] = vals[i];
	free(vals);
	return out;
}

static void add_latest(const struct cache *c, const char *key, void *arg)
{
	struct view *v = arg;
	/* Without a write in flight the latest is the committed: a text view
	 * is only ever of the committed state. */
	view_add(v, key, v->text ? (void *)committed_text(c, key) : cache_get(c, key));
}

size_t cache_list(const struct cache *c, const char *prefix, const char *after, size_t limit,
                  json_t ***out, bool *more)
{
	struct view v = {0};
	void **vals;
	size_t n;

	objs_under(c, prefix, add_latest, &v);
	n = view_take(&v, prefix, after, false, limit, &vals, NULL, more);
	*out = as_objects(vals, n);
	view_free(&v);
	return n;
}

static void add_committed(const struct cache *c, const char *key, void *v)
{
	if (!hmap_get(&c->shadows, key))
		add_latest(c, key, v);
}

/* The committed state under prefix (and maybe a little beyond it: the
 * caller's view_take filters): the latest, with in-flight keys as they were. */
static void committed_view(const struct cache *c, const char *prefix, struct view *v)
{
	size_t plen = strlen(prefix);
	const char *k;
	void *o;

	objs_under(c, prefix, add_committed, v);
	for (size_t i = 0; hmap_next(&c->shadows, &i, &k, &o);)
		if (!strncmp(k, prefix, plen))
			view_add(v, k, v->text ? (void *)committed_text(c, k)
			                       : ((struct shadow *)o)->committed);
}

size_t cache_list_committed(const struct cache *c, const char *prefix, const char *after,
                            size_t limit, json_t ***out, bool *more)
{
	struct view v = {0};
	void **vals;
	size_t n;

	committed_view(c, prefix, &v);
	n = view_take(&v, prefix, after, false, limit, &vals, NULL, more);
	*out = as_objects(vals, n);
	view_free(&v);
	return n;
}

/* cache_list_at, of objects or (v->text) of texts. */
static int list_at(const struct cache *c, struct view *v, int64_t rev, const char *prefix,
                   const char *start, bool inclusive, size_t limit, void ***out,
                   const char ***keys, bool *more, size_t *n)
{
	struct hmap at = {0}; /* key → index in v */

	*n = 0;
	if (rev < c->gone_rev)
		return err_set(ERR_GONE, "too old resource version: %" PRId64 " (%" PRId64 ")",
		               rev, c->gone_rev);
	if (rev > c->committed)
		return err_set(ERR_TIMEOUT, "Too large resource version: %" PRId64
		                            ", current: %" PRId64,
		               rev, c->committed);
	committed_view(c, prefix, v);
	if (rev == c->committed) {
		/* The usual read: nothing to undo, no index to build. */
		*n = view_take(v, prefix, start, inclusive, limit, out, keys, more);
		return 0;
	}
	for (size_t i = 0; i < v->n; i++)
		hmap_put(&at, v->keys[i], (void *)(uintptr_t)(i + 1));
	/* Undo the events after rev, newest first: each key ends as it was then. */
	for (size_t i = c->len; i-- > 0;) {
		struct past *p = &c->ring[(c->head + i) % c->window];
		void *was;
		uintptr_t slot;
		if (p->rev <= rev)
			break;
		was = p->type == CACHE_ADDED ? NULL
		      : v->text              ? (void *)p->prev_json
		                             : past_prev(c, p);
		slot = (uintptr_t)hmap_get(&at, p->key);
		if (slot) {
			v->vals[slot - 1] = was;
		} else {
			view_add(v, p->key, was);
			hmap_put(&at, p->key, (void *)(uintptr_t)v->n);
		}
	}
	*n = view_take(v, prefix, start, inclusive, limit, out, keys, more);
	hmap_free(&at);
	return 0;
}

int cache_list_at(const struct cache *c, int64_t rev, const char *prefix, const char *start,
                  bool inclusive, size_t limit, json_t ***out, bool *more, size_t *n)
{
	struct view v = {0};
	void **vals;
	int rc = list_at(c, &v, rev, prefix, start, inclusive, limit, &vals, NULL, more, n);

	if (rc == 0)
		*out = as_objects(vals, *n);
	view_free(&v);
	return rc;
}

int cache_list_text_at(const struct cache *c, int64_t rev, const char *prefix,
                       const char *start, bool inclusive, size_t limit, struct blob ***out,
                       const char ***keys, bool *more, size_t *n)
{
	struct view v = {.text = true};
	void **vals;
	int rc = list_at(c, &v, rev, prefix, start, inclusive, limit, &vals, keys, more, n);

	if (rc == 0)
		*out = as_texts(vals, *n);
	view_free(&v);
	return rc;
}

struct counting {
	const char *prefix;
	size_t plen, n;
};

static void count_one(const struct cache *c, const char *key, void *arg)
{
	struct counting *t = arg;
	t->n += strncmp(key, t->prefix, t->plen) == 0;
}

size_t cache_count(const struct cache *c, const char *prefix)
{
	struct counting t = {.prefix = prefix, .plen = strlen(prefix)};

	objs_under(c, prefix, count_one, &t);
	return t.n;
}

/* ev, whose state before has the text prev_json (NULL: made here if
 * needed), into the window as text. */
static void ring_push(struct cache *c, const struct cache_event *ev, struct blob *prev_json)
{
	struct past *slot;
	if (c->len == c->window) {
		slot = &c->ring[c->head];
		c->gone_rev = slot->rev;
		past_clear(slot);
		c->head = (c->head + 1) % c->window;
		c->len--;
	}
	slot = &c->ring[(c->head + c->len) % c->window];
	*slot = (struct past){
	    .type = ev->type,
	    .rev = ev->rev,
	    .key = xstrdup(ev->key),
	    .json = ev->json ? blob_ref(ev->json) : serialize(ev->obj),
	    .prev_json = prev_json ? blob_ref(prev_json) : ev->prev ? serialize(ev->prev) : NULL,
	};
	c->len++;
}

static bool watcher_wants(const struct cache_watch *w, int64_t rev, const char *key)
{
	return rev > w->from_rev && strncmp(key, w->prefix, w->prefix_len) == 0;
}

static void unlink_free(struct cache_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		w->list->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	/* An index keeps no empty lists: a key is watched once per CSR. */
	if (w->map && !w->list->head && !w->c->freeing) {
		hmap_del(w->map, w->index);
		free(w->list);
	}
	free(w->prefix);
	free(w->index);
	free(w);
}

static void dispatch_list(struct wlist *l, const struct cache_event *ev)
{
	for (struct cache_watch *w = l ? l->head : NULL; w; w = w->next)
		if (!w->dead && watcher_wants(w, ev->rev, ev->key))
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
	dispatch_list(hmap_get(&c->by_key, ev->key), ev);
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

/* The key's in-flight bookkeeping once one of its writes is settled. */
static void set_rv(json_t *obj, int64_t rev);

/*
 * A failed write's successor on the same key was built on what never
 * reached the disk: its event is rewritten against the committed state —
 * prev, and its type (a MODIFIED of something absent is an ADDED; a DELETED
 * of it is nothing anyone saw).
 */
static void rebase_successor(struct pending *n, const json_t *committed, struct blob *json)
{
	json_decref(n->ev.prev);
	blob_unref(n->prev_json);
	n->ev.prev = json_incref((json_t *)committed);
	n->prev_json = blob_ref(json);
	if (n->ev.type == CACHE_DELETED) {
		if (!committed) {
			n->silent = true;
			return;
		}
		json_decref(n->ev.obj);
		n->ev.obj = json_deep_copy(committed);
		set_rv(n->ev.obj, n->ev.rev);
	} else {
		n->ev.type = committed ? CACHE_MODIFIED : CACHE_ADDED;
	}
}

/* state (text json) is durable now, or the head write failed (durable false). */
static void shadow_settle(struct cache *c, const char *key, bool durable, json_t *state,
                          struct blob *json)
{
	struct shadow *sh = hmap_get(&c->shadows, key);
	struct entry *e;

	/* Every write in flight was queued on its key when submitted, and they
	 * complete in submission order. */
	CUBE_ASSERT(sh && sh->pending > 0 && sh->head);
	sh->head = sh->head->next_same;
	if (!sh->head)
		sh->tail = NULL;
	if (!durable && sh->head)
		rebase_successor(sh->head, sh->committed, sh->json);
	if (durable) {
		json_decref(sh->committed);
		blob_unref(sh->json);
		sh->committed = json_incref(state);
		sh->json = blob_ref(json);
	} else if (sh->pending == 1) {
		/* No later write builds on the failed one: the key is what the
		 * disk has. (A later one carries it to disk as its own.) */
		if (sh->committed)
			objs_put(c, key, json_incref(sh->committed), sh->json);
		else
			objs_del(c, key);
		sh->json = NULL;
	}
	if (--sh->pending == 0) {
		/* At rest: the latest state is the committed one, text and all. */
		e = hmap_get(&c->objs, key);
		if (e && sh->committed && e->obj == sh->committed && !e->json) {
			e->json = sh->json;
			sh->json = NULL;
		}
		json_decref(sh->committed);
		blob_unref(sh->json);
		free(hmap_del(&c->shadows, key));
	}
}

static void pending_free(struct pending *p)
{
	event_clear(&p->ev);
	blob_unref(p->prev_json);
	free(p);
}

static void on_durable(void *arg, int err, int64_t rev)
{
	struct pending *p = arg;
	struct cache *c = p->c;

	(void)rev; /* the cache's own, in p */
	if (c->store)
		c->inflight--;
	if (err) {
		/* Nothing of it is seen: no event, the writer told, readers and
		 * later writers see the key as the disk has it. */
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		LOG_ERROR("storage write of %s at revision %" PRId64 " failed: %s", p->ev.key,
		          p->ev.rev, msg);
		shadow_settle(c, p->ev.key, false, NULL, NULL);
		if (p->done) {
			err_set(err, "%s", msg);
			p->done(p->arg, err, NULL);
		}
		pending_free(p);
		return;
	}
	/* The text the store was given is the readers' too. */
	if (p->ev.type == CACHE_DELETED)
		shadow_settle(c, p->ev.key, true, NULL, NULL);
	else
		shadow_settle(c, p->ev.key, true, p->ev.obj, p->ev.json);
	/* Completions run in submission order (store.h): revisions only grow. */
	CUBE_ASSERT(p->ev.rev > c->committed);
	c->committed = p->ev.rev;
	if (p->ev.type == CACHE_DELETED && !p->silent)
		p->ev.json = serialize(p->ev.obj);
	if (!p->silent) {
		ring_push(c, &p->ev, p->prev_json);
		dispatch(c, &p->ev);
	}
	if (p->done)
		p->done(p->arg, 0, p->ev.obj);
	pending_free(p);
	if (c->progress)
		c->progress(c->progress_arg);
}

static void set_rv(json_t *obj, int64_t rev)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRId64, rev);
	jx_set_str(obj, "metadata.resourceVersion", buf);
}


/* ---- a remote store: revisions come from it, state from its watch ------------------- */

static int64_t rv_of(const json_t *obj)
{
	const char *rv = jx_str(obj, "metadata.resourceVersion");
	return rv ? strtoll(rv, NULL, 10) : 0;
}

static void rwrite_finish(struct rwrite *w)
{
	if (w->err) {
		err_set(w->err, "Operation cannot be fulfilled: the object has been modified");
		if (w->done)
			w->done(w->arg, w->err, NULL);
	} else {
		set_rv(w->obj, w->rev);
		if (w->done)
			w->done(w->arg, 0, w->obj);
	}
	json_decref(w->obj);
	free(w);
}

/* Answer the writes whose revision the watch has brought. */
static void rwaits_run(struct cache *c)
{
	while (c->rwaits && c->rwaits->rev <= c->committed) {
		struct rwrite *w = c->rwaits;
		c->rwaits = w->next;
		c->nrwaits--;
		rwrite_finish(w);
	}
}

static void on_watchdog(void *arg)
{
	struct cache *c = arg;
	int64_t now = clock_mono();
	struct rwrite **p = &c->rwaits;

	while (*p) {
		struct rwrite *w = *p;
		if (now - w->since < RWAIT_NS) {
			p = &w->next;
			continue;
		}
		LOG_WARN("storage: revision %" PRId64 " not back through the watch after %ds "
			 "(at %" PRId64 "); answering its write",
			 w->rev, (int)(RWAIT_NS / NS_PER_SEC), c->committed);
		*p = w->next;
		c->nrwaits--;
		rwrite_finish(w);
	}
	if (c->rwaits)
		timer_after(c->watchdog, NS_PER_SEC);
}

static void on_remote_written(void *arg, int err, int64_t rev)
{
	struct rwrite *w = arg, **p;
	struct cache *c = w->c;

	c->inflight--;
	if (err && err != ERR_CONFLICT) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		LOG_ERROR("storage write failed: %s", msg);
		err_set(err, "%s", msg);
		if (w->done)
			w->done(w->arg, err, NULL);
		json_decref(w->obj);
		free(w);
		return;
	}
	/* A conflict is answered once this cache has seen what it lost to,
	 * so that the write, built again, builds on it. */
	w->err = err;
	w->rev = rev;
	if (rev <= c->committed) {
		rwrite_finish(w);
		return;
	}
	for (p = &c->rwaits; *p && (*p)->rev <= rev; p = &(*p)->next)
		;
	w->next = *p;
	*p = w;
	c->nrwaits++;
	w->since = clock_mono();
	if (c->watchdog && !timer_pending(c->watchdog))
		timer_after(c->watchdog, NS_PER_SEC);
}

/* Send one write: compare-and-swap against the state it was built on. */
static int submit_remote(struct cache *c, enum cache_event_type type, const char *key,
			 json_t *obj, cache_done_fn done, void *arg)
{
	json_t *prev = cache_get(c, key);
	struct store_op *op = calloc(1, sizeof(*op));
	struct rwrite *w = calloc(1, sizeof(*w));

	if (!op || !w || !(op->key = strdup(key)))
		abort();
	/* Built on the revision the object says (a copy taken earlier may
	 * be older than the cache now), else on the cache's state. */
	if (type == CACHE_ADDED)
		op->expect = 0;
	else
		op->expect = obj && rv_of(obj) > 0 ? rv_of(obj) : prev ? rv_of(prev) : 0;
	if (type == CACHE_DELETED) {
		op->type = STORE_DELETE;
		w->obj = json_deep_copy(prev);
	} else {
		/* The revision is the key's mod_revision, not part of the value. */
		jx_del(obj, "metadata.resourceVersion");
		op->type = STORE_PUT;
		op->value = jx_dump(obj);
		op->len = strlen(op->value);
		if (op->len > CACHE_MAX_OBJECT_BYTES) {
			free(op->value);
			free(op->key);
			free(op);
			free(w);
			json_decref(obj);
			return err_set(ERR_TOOLARGE, "etcdserver: request is too large");
		}
		w->obj = obj;
	}
	w->c = c;
	w->done = done;
	w->arg = arg;
	c->inflight++;
	store_write(c->store, op, 1, on_remote_written, w);
	return 0;
}

static void advance(struct cache *c, int64_t rev)
{
	if (rev > c->committed)
		c->committed = c->rev = rev;
}

static void remote_event(void *arg, const struct store_event *sev)
{
	struct cache *c = arg;
	struct cache_event ev = {.rev = sev->rev, .key = sev->key};
	struct entry *e = sev->key ? hmap_get(&c->objs, sev->key) : NULL;
	struct blob *prev_json = e ? blob_ref(e->json) : NULL;

	if (sev->key && sev->type == STORE_PUT) {
		if (!(ev.obj = jx_parse_dumped(sev->value, sev->len))) {
			LOG_ERROR("storage: skipping unreadable object %s at revision %" PRId64 ": %s",
				  sev->key, sev->rev, err_msg());
		} else {
			set_rv(ev.obj, sev->rev);
			/* The value lacks the revision: the readers' text is made
			 * here, once, for the window, the watchers and the GETs. */
			ev.json = serialize(ev.obj);
			ev.prev = json_incref(cache_get(c, sev->key));
			objs_put(c, sev->key, json_incref(ev.obj), blob_ref(ev.json));
			ev.type = ev.prev ? CACHE_MODIFIED : CACHE_ADDED;
		}
	} else if (sev->key && (ev.prev = json_incref(cache_get(c, sev->key)))) {
		objs_del(c, sev->key);
		ev.type = CACHE_DELETED;
		ev.obj = json_deep_copy(ev.prev);
		set_rv(ev.obj, sev->rev);
		ev.json = serialize(ev.obj);
	}
	advance(c, sev->rev);
	if (ev.obj) {
		ring_push(c, &ev, prev_json);
		dispatch(c, &ev);
	}
	json_decref(ev.obj);
	json_decref(ev.prev);
	blob_unref(ev.json);
	blob_unref(prev_json);
	rwaits_run(c);
	if (c->progress)
		c->progress(c->progress_arg);
}

/* Tell the watchers how the new state differs from the old, at rev. */
static void reset_diff(struct cache *c, struct hmap *fresh, int64_t rev)
{
	const char *k;
	void *v;

	for (size_t i = 0; hmap_next(&c->objs, &i, &k, &v);) {
		json_t *now = entry_obj(hmap_get(fresh, k)), *was = entry_obj(v);
		struct cache_event ev = {.rev = rev, .key = k, .obj = now, .prev = was};
		if (now && rv_of(now) == rv_of(was))
			continue;
		ev.type = now ? CACHE_MODIFIED : CACHE_DELETED;
		if (!now) {
			ev.obj = json_deep_copy(was);
			set_rv(ev.obj, rev);
		}
		dispatch(c, &ev);
		if (!now)
			json_decref(ev.obj);
	}
	for (size_t i = 0; hmap_next(fresh, &i, &k, &v);)
		if (!hmap_get(&c->objs, k)) {
			struct cache_event ev = {.type = CACHE_ADDED, .rev = rev, .key = k,
			                         .obj = entry_obj(v)};
			dispatch(c, &ev);
		}
}

/*
 * The watch's history is gone (compacted while it was away): load the
 * store again. Watchers hear the difference as events at the new revision,
 * and the window starts there: a watch from before it is 410 Gone.
 */
static void remote_reset(void *arg)
{
	struct cache *c = arg;
	struct hmap fresh = {0};
	struct load_into l = {.map = &fresh, .stamp = true};
	int64_t rev = 0;

	if (store_load(c->store, load_one, &l, &rev) < 0) {
		LOG_ERROR("storage: reloading after a compaction failed: %s; again in 1s", err_msg());
		objs_clear(&fresh);
		if (c->reload)
			timer_after(c->reload, NS_PER_SEC);
		else
			remote_watch(c); /* from where it was: compacted again, reset again */
		return;
	}
	LOG_INFO("storage: reloaded at revision %" PRId64 " after the watch lost its history",
		 rev);
	reset_diff(c, &fresh, rev);
	objs_clear(&c->objs);
	c->objs = fresh;
	dirs_build(c);
	for (size_t i = 0; i < c->len; i++)
		past_clear(&c->ring[(c->head + i) % c->window]);
	c->head = c->len = 0;
	c->gone_rev = rev;
	advance(c, rev);
	rwaits_run(c);
	if (c->progress)
		c->progress(c->progress_arg);
	remote_watch(c);
}

static int submit(struct cache *c, enum cache_event_type type, const char *key, json_t *obj,
                  cache_done_fn done, void *arg)
{
	struct pending *p;
	struct entry *e;
	json_t *prev;
	int64_t rev = c->rev + 1;
	char *value = NULL;

	if (c->remote)
		return submit_remote(c, type, key, obj, done, arg);
	if (type != CACHE_DELETED) {
		size_t len;
		set_rv(obj, rev);
		len = strlen(value = jx_dump(obj));
		if (len > CACHE_MAX_OBJECT_BYTES) {
			free(value);
			json_decref(obj);
			return err_set(ERR_TOOLARGE, "etcdserver: request is too large");
		}
	}
	e = hmap_get(&c->objs, key);
	prev = entry_obj(e);
	struct shadow *sh = hmap_get(&c->shadows, key);
	if (!sh) {
		/* At rest until now: the latest state is the committed one. */
		sh = xcalloc(1, sizeof(*sh));
		sh->committed = json_incref(prev);
		if (e) {
			sh->json = e->json;
			e->json = NULL;
		}
		hmap_put(&c->shadows, key, sh);
	}
	sh->pending++;
	p = xcalloc(1, sizeof(*p));
	/* prev's text: the last write in flight's, else the committed one. */
	p->prev_json = blob_ref(!prev ? NULL : sh->tail ? sh->tail->ev.json : sh->json);
	if (sh->tail)
		sh->tail->next_same = p;
	else
		sh->head = p;
	sh->tail = p;
	p->c = c;
	p->done = done;
	p->arg = arg;
	p->ev.type = type;
	p->ev.rev = c->rev = rev;
	if (!(p->ev.key = strdup(key)))
		abort();
	p->ev.prev = json_incref(prev);
	if (type == CACHE_DELETED) {
		p->ev.obj = json_deep_copy(prev);
		objs_del(c, key);
		set_rv(p->ev.obj, rev);
	} else {
		p->ev.obj = obj;
		objs_put(c, key, json_incref(obj), NULL);
		/* Serialised once: for the store, then every reader and watcher. */
		p->ev.json = blob_new(value, strlen(value));
	}

	if (!c->store) {
		free(value);
		on_durable(p, 0, rev);
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
	/* A remote write is answered once the watch brings it, too. */
	return c->inflight + c->nrwaits;
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
                                     struct hmap *map, const char *index, cache_watch_fn fn,
                                     void *arg)
{
	struct cache_watch *w;
	struct wlist *l = &c->unindexed;

	if (from_rev < c->gone_rev) {
		err_set(ERR_GONE, "too old resource version: %" PRId64 " (%" PRId64 ")", from_rev,
		        c->gone_rev);
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->prefix = strdup(prefix)) || (map && !(w->index = strdup(index))))
		abort();
	w->c = c;
	w->prefix_len = strlen(prefix);
	w->from_rev = from_rev;
	w->arg = arg;
	w->fn = fn;
	/* Replay first, then join a list: no event is seen twice or missed,
	 * since nothing commits while we run on the loop. */
	for (size_t i = 0; i < c->len; i++) {
		struct past *p = &c->ring[(c->head + i) % c->window];
		struct cache_event ev;
		if (!watcher_wants(w, p->rev, p->key) || (map == &c->by_key && strcmp(p->key, index)))
			continue;
		ev = (struct cache_event){p->type, p->rev, p->key, past_obj(c, p), past_prev(c, p),
		                          p->json};
		fn(arg, &ev);
	}
	if (map && !(l = hmap_get(map, index))) {
		if (!(l = calloc(1, sizeof(*l))))
			abort();
		hmap_put(map, index, l);
	}
	w->map = map;
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
	return watch_new(c, prefix, from_rev, NULL, NULL, fn, arg);
}

struct cache_watch *cache_watch_node(struct cache *c, const char *prefix, int64_t from_rev,
                                     const char *node, cache_watch_fn fn, void *arg)
{
	return watch_new(c, prefix, from_rev, &c->by_node, node, fn, arg);
}

struct cache_watch *cache_watch_key(struct cache *c, const char *prefix, int64_t from_rev,
                                    const char *key, cache_watch_fn fn, void *arg)
{
	return watch_new(c, prefix, from_rev, &c->by_key, key, fn, arg);
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
