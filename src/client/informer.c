#include "client/informer.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/rand.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct informer {
	struct loop *loop;
	struct rest_client *c;
	char *path, *query;
	struct informer_handlers *h; /* every registered set, in order */
	size_t nh;
	struct hmap store; /* key → json_t*, or its jx_dump text (keep_text) */
	bool keep_text;
	json_t *(*transform)(const json_t *obj); /* NULL: keep objects whole */
	struct informer_index {
		const char *(*key_of)(const json_t *obj);
		struct hmap buckets; /* value → struct hmap* (key → json_t*, borrowed) */
	} *index;            /* nindex of them, made as they are added: a kubelet
	                      * has two informers a node and no index */
	int nindex;
	char rv[32];
	bool synced, stopped;
	struct rest_call *listing; /* the list in flight */
	struct rest_watch *watch;
	struct timer *retry;
	int64_t backoff_ns;
};

const char *informer_key(const json_t *obj, char *buf, size_t n)
{
	const char *ns = jx_str(obj, "metadata.namespace"), *name = jx_str(obj, "metadata.name");
	if (ns && *ns)
		snprintf(buf, n, "%s/%s", ns, name ? name : "");
	else
		snprintf(buf, n, "%s", name ? name : "");
	return buf;
}

static void list(struct informer *inf);

/* ---- what the store holds: the tree (a reference), or its text ---------------- */

static void *stored(const struct informer *inf, json_t *obj)
{
	return inf->keep_text ? (void *)jx_dump(obj) : (void *)json_incref(obj);
}

/* A stored value as a tree of the caller's. */
static json_t *tree_of(const struct informer *inf, void *held)
{
	return inf->keep_text ? jx_parse_dumped(held, strlen(held)) : json_incref(held);
}

static void drop(const struct informer *inf, void *held)
{
	if (inf->keep_text)
		free(held);
	else
		json_decref(held);
}

/* ---- indexes ------------------------------------------------------------------ */

static void index_put(struct informer *inf, const char *key, json_t *obj)
{
	for (int i = 0; i < inf->nindex; i++) {
		const char *v = inf->index[i].key_of(obj);
		struct hmap *b;
		if (!v || !*v)
			continue;
		if (!(b = hmap_get(&inf->index[i].buckets, v))) {
			if (!(b = calloc(1, sizeof(*b))))
				abort();
			hmap_put(&inf->index[i].buckets, v, b);
		}
		hmap_put(b, key, obj);
	}
}

static void index_del(struct informer *inf, const char *key, json_t *obj)
{
	for (int i = 0; i < inf->nindex; i++) {
		const char *v = inf->index[i].key_of(obj);
		struct hmap *b = v && *v ? hmap_get(&inf->index[i].buckets, v) : NULL;
		if (!b)
			continue;
		hmap_del(b, key);
		if (!hmap_len(b)) {
			char *name = strdup(v); /* v may point into obj, the bucket's key not */
			if (!name)
				abort();
			hmap_free(hmap_del(&inf->index[i].buckets, name));
			free(b);
			free(name);
		}
	}
}

int informer_add_index(struct informer *inf, const char *(*key_of)(const json_t *obj))
{
	if (inf->nindex == INFORMER_MAX_INDEXES || inf->keep_text)
		abort();
	inf->index = xrealloc(inf->index, (size_t)(inf->nindex + 1) * sizeof(*inf->index));
	inf->index[inf->nindex].key_of = key_of;
	inf->index[inf->nindex].buckets = (struct hmap)HMAP_INIT;
	return inf->nindex++;
}

size_t informer_indexed(const struct informer *inf, int index, const char *value, json_t ***out)
{
	const struct hmap *b;
	size_t n = 0;
	const char *k;
	void *v;

	CUBE_ASSERT(index >= 0 && index < inf->nindex);
	b = hmap_get(&inf->index[index].buckets, value ? value : "");

	*out = malloc(((b ? hmap_len(b) : 0) + 1) * sizeof(**out));
	if (!*out)
		abort();
	for (size_t it = 0; b && hmap_next(b, &it, &k, &v);)
		(*out)[n++] = v;
	return n;
}

/* Tell every handler set, in registration order. */
static void tell_add(struct informer *inf, json_t *obj)
{
	for (size_t i = 0; i < inf->nh; i++)
		if (inf->h[i].on_add)
			inf->h[i].on_add(inf->h[i].arg, obj);
}

static void tell_update(struct informer *inf, json_t *old, json_t *obj)
{
	for (size_t i = 0; i < inf->nh; i++)
		if (inf->h[i].on_update)
			inf->h[i].on_update(inf->h[i].arg, old, obj);
}

static void tell_delete(struct informer *inf, json_t *obj)
{
	for (size_t i = 0; i < inf->nh; i++)
		if (inf->h[i].on_delete)
			inf->h[i].on_delete(inf->h[i].arg, obj);
}
static void watch(struct informer *inf);

/* After a failure: try again after a growing pause, never at once. */
static void later(struct informer *inf, bool relist)
{
	inf->backoff_ns = inf->backoff_ns ? inf->backoff_ns * 2 : NS_PER_SEC;
	if (inf->backoff_ns > 30 * NS_PER_SEC)
		inf->backoff_ns = 30 * NS_PER_SEC;
	inf->rv[0] = relist ? '\0' : inf->rv[0];
	timer_after(inf->retry, inf->backoff_ns);
}

static void on_retry(void *arg)
{
	struct informer *inf = arg;
	if (inf->rv[0])
		watch(inf);
	else
		list(inf);
}

/* What the store keeps of obj (a new reference). */
static json_t *viewed(const struct informer *inf, json_t *obj)
{
	return inf->transform ? inf->transform(obj) : json_incref(obj);
}

static void apply(struct informer *inf, const char *type, json_t *obj)
{
	char key[512];
	void *held;
	json_t *old = NULL;

	informer_key(obj, key, sizeof(key));
	if ((held = hmap_get(&inf->store, key))) {
		/* A text store parses the old object only for handlers to see. */
		if (!inf->keep_text || inf->nh)
			old = tree_of(inf, held);
		if (old)
			index_del(inf, key, old);
		drop(inf, held);
	}
	if (!strcmp(type, "DELETED")) {
		hmap_del(&inf->store, key);
		if (held)
			tell_delete(inf, obj);
		json_decref(old);
		return;
	}
	hmap_put(&inf->store, key, stored(inf, obj));
	index_put(inf, key, obj);
	if (held)
		tell_update(inf, old, obj);
	else
		tell_add(inf, obj);
	json_decref(old);
}

static void on_event(void *arg, const char *type, json_t *obj)
{
	struct informer *inf = arg;
	const char *rv = jx_str(obj, "metadata.resourceVersion");

	if (!strcmp(type, "ERROR")) {
		/* 410 Expired: our resourceVersion is gone; start over. */
		inf->rv[0] = '\0';
		return;
	}
	if (!json_is_object(obj)) {
		LOG_V(2, "\"Watch event without an object\" path=\"%s\" type=\"%s\"", inf->path,
		      type);
		return;
	}
	if (rv)
		snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
	inf->backoff_ns = 0; /* the stream works */
	if (!strcmp(type, "BOOKMARK"))
		return;
	obj = viewed(inf, obj);
	apply(inf, type, obj);
	json_decref(obj);
}

static void on_watch_end(void *arg, int status, const char *err)
{
	struct informer *inf = arg;
	inf->watch = NULL;
	if (inf->stopped)
		return;
	if (status == 200 && inf->rv[0]) {
		inf->backoff_ns = 0;
		watch(inf); /* a clean end (timeoutSeconds): resume at once */
		return;
	}
	LOG_V(2, "\"Watch ended\" path=\"%s\" status=%d err=\"%s\"", inf->path, status,
	      err ? err : "");
	later(inf, status == 410 || !inf->rv[0]);
}

static void watch(struct informer *inf)
{
	char path[2048];
	/* Informers ask for 300–600 s so their watches do not all end together. */
	snprintf(path, sizeof(path),
		 "%s?watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d%s%s",
		 inf->path, inf->rv, 300 + (int)rand_below(300), inf->query ? "&" : "",
		 inf->query ? inf->query : "");
	inf->watch = rest_watch(inf->c, path, on_event, on_watch_end, inf);
}

/* A list's items as the store keeps them; each item's tree is let go as
 * its view is made. */
static json_t *list_items(const struct informer *inf, json_t *list)
{
	json_t *items = json_object_get(list, "items"), *views, *obj;
	size_t i;

	if (!inf->transform || !json_is_array(items))
		return json_incref(items);
	views = json_array();
	json_array_foreach(items, i, obj)
	{
		json_array_append_new(views, viewed(inf, obj));
		json_array_set_new(items, i, json_null());
	}
	return views;
}

static void replace(struct informer *inf, json_t *list)
{
	struct hmap fresh = HMAP_INIT;
	json_t *items = list_items(inf, list);
	const char *k;
	void *v;
	size_t i;
	json_t *obj;
	char key[512];

	json_array_foreach(items, i, obj) hmap_put(&fresh, informer_key(obj, key, sizeof(key)),
						   obj);
	/* Deletions first: what the last list had and this one lacks. Every
	 * handler is told before any of them leaves the store. */
	for (size_t it = 0; hmap_next(&inf->store, &it, &k, &v);) {
		if (!hmap_get(&fresh, k)) {
			json_t *gone = tree_of(inf, v);
			tell_delete(inf, gone);
			json_decref(gone);
		}
	}
	for (size_t it = 0; hmap_next(&inf->store, &it, &k, &v);)
		if (!hmap_get(&fresh, k)) {
			if (!inf->keep_text)
				index_del(inf, k, v);
			drop(inf, v);
		}
	{
		struct hmap keep = HMAP_INIT;
		for (size_t it = 0; hmap_next(&inf->store, &it, &k, &v);)
			if (hmap_get(&fresh, k))
				hmap_put(&keep, k, v);
		hmap_free(&inf->store);
		inf->store = keep;
	}
	json_array_foreach(items, i, obj)
	{
		void *held = hmap_get(&inf->store, informer_key(obj, key, sizeof(key)));
		json_t *old = held ? tree_of(inf, held) : NULL;
		bool same = old && json_equal(jx_get(old, "metadata.resourceVersion"),
					      jx_get(obj, "metadata.resourceVersion"));

		json_decref(old);
		if (!same)
			apply(inf, held ? "MODIFIED" : "ADDED", obj);
	}
	hmap_free(&fresh);
	json_decref(items);
}

static void on_list(void *arg, int status, json_t *body, const char *err)
{
	struct informer *inf = arg;
	const char *rv = jx_str(body, "metadata.resourceVersion");

	inf->listing = NULL;
	if (status != 200 || !rv) {
		LOG_V(2, "\"Failed to list\" path=\"%s\" status=%d err=\"%s\"", inf->path, status,
		      err ? err : (body ? jx_str(body, "message") ?: "" : ""));
		later(inf, true);
		return;
	}
	inf->backoff_ns = 0;
	snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
	replace(inf, body);
	inf->synced = true;
	watch(inf);
}

static void list(struct informer *inf)
{
	char path[2048];
	snprintf(path, sizeof(path), "%s%s%s", inf->path, inf->query ? "?" : "",
		 inf->query ? inf->query : "");
	inf->listing = rest_do(inf->c, "GET", path, NULL, on_list, inf);
}

struct informer *informer_new(struct loop *loop, struct rest_client *c, const char *path,
			      const char *query, const struct informer_handlers *h)
{
	struct informer *inf = calloc(1, sizeof(*inf));
	if (!inf || !(inf->path = strdup(path)) || (query && !(inf->query = strdup(query))))
		abort();
	inf->loop = loop;
	inf->c = c;
	if (h)
		informer_add_handlers(inf, h);
	inf->retry = loop_timer(loop, on_retry, inf);
	return inf;
}

void informer_add_handlers(struct informer *inf, const struct informer_handlers *h)
{
	struct informer_handlers *grown = realloc(inf->h, (inf->nh + 1) * sizeof(*grown));
	if (!grown)
		abort();
	inf->h = grown;
	inf->h[inf->nh++] = *h;
}

void informer_start(struct informer *inf)
{
	list(inf);
}

bool informer_synced(const struct informer *inf)
{
	return inf->synced;
}

void informer_keep_text(struct informer *inf)
{
	CUBE_ASSERT(inf->nindex == 0 && !inf->listing && !inf->synced);
	inf->keep_text = true;
}

void informer_set_transform(struct informer *inf, json_t *(*transform)(const json_t *obj))
{
	CUBE_ASSERT(!inf->listing && !inf->synced);
	inf->transform = transform;
}

json_t *informer_get(const struct informer *inf, const char *key)
{
	CUBE_ASSERT(!inf->keep_text);
	return hmap_get(&inf->store, key);
}

json_t *informer_read(const struct informer *inf, const char *key)
{
	void *held = hmap_get(&inf->store, key);
	return held ? tree_of(inf, held) : NULL;
}

const char *informer_text(const struct informer *inf, const char *key)
{
	CUBE_ASSERT(inf->keep_text);
	return hmap_get(&inf->store, key);
}

size_t informer_list(const struct informer *inf, json_t ***out)
{
	size_t n = 0;
	const char *k;
	void *v;

	CUBE_ASSERT(!inf->keep_text);
	*out = malloc((hmap_len(&inf->store) + 1) * sizeof(**out));
	if (!*out)
		abort();
	for (size_t it = 0; hmap_next(&inf->store, &it, &k, &v);)
		(*out)[n++] = v;
	return n;
}

void informer_free(struct informer *inf)
{
	const char *k;
	void *v;

	if (!inf)
		return;
	inf->stopped = true;
	rest_watch_stop(inf->watch);
	timer_free(inf->retry);
	for (size_t it = 0; hmap_next(&inf->store, &it, &k, &v);)
		drop(inf, v);
	hmap_free(&inf->store);
	for (int i = 0; i < inf->nindex; i++) {
		for (size_t it = 0; hmap_next(&inf->index[i].buckets, &it, &k, &v);) {
			hmap_free(v);
			free(v);
		}
		hmap_free(&inf->index[i].buckets);
	}
	free(inf->index);
	rest_cancel(inf->listing);
	free(inf->h);
	free(inf->path);
	free(inf->query);
	free(inf);
}
