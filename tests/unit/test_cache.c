/* The cache in front of the store: revisions, lists, the watch window, the
 * node index — and the SQLite store under it: durable, reloadable. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "storage/cache.h"
#include "storage/store.h"

#include "base/blob.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/loop.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *pod(const char *name, const char *node)
{
	json_t *o = json_pack("{s:s,s:{s:s,s:s},s:{}}", "kind", "Pod", "metadata", "name", name,
			      "namespace", "default", "spec");
	if (node)
		jx_set_str(o, "spec.nodeName", node);
	return o;
}

struct seen {
	int n;
	char types[64];
	int64_t revs[64];
	struct cache_watch *self;
	bool unwatch_on_first;
};

static void record(void *arg, const struct cache_event *ev)
{
	struct seen *s = arg;
	s->types[s->n] = "AMD"[ev->type];
	s->revs[s->n++] = ev->rev;
	if (s->unwatch_on_first && s->n == 1)
		cache_unwatch(s->self);
}

struct texts {
	int n;
	struct blob *json[8];
};

static void keep_text(void *arg, const struct cache_event *ev)
{
	struct texts *t = arg;
	t->json[t->n++] = blob_ref(ev->json);
}

/* Each committed version is serialised once: the store's bytes are the
 * readers' and the watchers' (the same blob), exactly json_dumps' compact
 * text; an older version or a deleted key's is made for its caller alone. */
static void test_json_made_once(void **state)
{
	struct cache *c = cache_new(NULL, 16);
	struct texts t = {0};
	const char *key = "/registry/pods/default/a";
	struct cache_watch *w;
	struct blob *b1, *b2, *old;
	json_t *v1, *v2;
	char *dump;

	(void)state;
	assert_int_equal(cache_load(c), 0);
	w = cache_watch(c, "/registry/pods/", 0, keep_text, &t);
	assert_int_equal(cache_create(c, key, pod("a", "n1"), NULL, NULL), 0);
	v1 = json_incref(cache_get_committed(c, key));
	b1 = cache_json(c, key, v1);
	b2 = cache_json(c, key, v1);
	assert_ptr_equal(b1, b2);
	assert_ptr_equal(b1, t.json[0]);
	dump = json_dumps(v1, JSON_COMPACT);
	assert_string_equal(b1->data, dump);
	assert_int_equal(b1->len, strlen(dump));
	free(dump);
	blob_unref(b2);

	assert_int_equal(cache_update(c, key, pod("a", "n2"), NULL, NULL), 0);
	v2 = cache_get_committed(c, key);
	b2 = cache_json(c, key, v2);
	assert_ptr_equal(b2, t.json[1]);
	assert_non_null(strstr(b2->data, "\"nodeName\":\"n2\""));
	/* The version before: its own text, not kept for the next reader. */
	old = cache_json(c, key, v1);
	assert_ptr_not_equal(old, b1);
	assert_string_equal(old->data, b1->data);
	blob_unref(old);
	blob_unref(b2);

	/* A DELETED event carries the last state at the delete's revision. */
	assert_int_equal(cache_delete(c, key, NULL, NULL), 0);
	assert_int_equal(t.n, 3);
	assert_non_null(strstr(t.json[2]->data, "\"resourceVersion\":\"3\""));
	old = cache_json(c, key, v1);
	assert_ptr_not_equal(old, b1);
	blob_unref(old);

	for (int i = 0; i < t.n; i++)
		blob_unref(t.json[i]);
	blob_unref(b1);
	json_decref(v1);
	cache_unwatch(w);
	cache_free(c);
}

static void test_revisions_and_lists(void **state)
{
	struct cache *c = cache_new(NULL, 16);
	json_t **objs;
	bool more;
	size_t n;

	assert_int_equal(cache_load(c), 0);
	assert_int_equal(cache_create(c, "/registry/pods/default/b", pod("b", NULL), NULL, NULL), 0);
	assert_int_equal(cache_create(c, "/registry/pods/default/a", pod("a", NULL), NULL, NULL), 0);
	assert_int_equal(cache_create(c, "/registry/pods/default/a", pod("a", NULL), NULL, NULL),
			 ERR_EXISTS);
	assert_int_equal(cache_rev(c), 2);
	assert_string_equal(jx_str(cache_get(c, "/registry/pods/default/a"),
				   "metadata.resourceVersion"),
			    "2");
	assert_int_equal(cache_update(c, "/registry/pods/default/b", pod("b", "n1"), NULL, NULL), 0);
	assert_string_equal(jx_str(cache_get(c, "/registry/pods/default/b"),
				   "metadata.resourceVersion"),
			    "3");
	assert_int_equal(cache_update(c, "/registry/pods/default/zz", pod("zz", NULL), NULL, NULL),
			 ERR_NOTFOUND);
	/* Key order, paging. */
	n = cache_list(c, "/registry/pods/", NULL, 1, &objs, &more);
	assert_int_equal(n, 1);
	assert_true(more);
	assert_string_equal(jx_str(objs[0], "metadata.name"), "a");
	free(objs);
	n = cache_list(c, "/registry/pods/", "/registry/pods/default/a", 0, &objs, &more);
	assert_int_equal(n, 1);
	assert_false(more);
	assert_string_equal(jx_str(objs[0], "metadata.name"), "b");
	free(objs);
	assert_int_equal(cache_count(c, "/registry/pods/"), 2);
	assert_int_equal(cache_delete(c, "/registry/pods/default/a", NULL, NULL), 0);
	assert_null(cache_get(c, "/registry/pods/default/a"));
	assert_int_equal(cache_rev(c), 4);
	cache_free(c);
}

static void test_watch_window_and_gone(void **state)
{
	struct cache *c = cache_new(NULL, 3);
	struct seen s = {0}, late = {0};
	struct cache_watch *w;

	cache_load(c);
	for (int i = 0; i < 5; i++) {
		char key[64], name[8];
		snprintf(name, sizeof(name), "p%d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		cache_create(c, key, pod(name, NULL), NULL, NULL);
	}
	/* Window of 3 holds revisions 3..5: resuming from 1 is too old. */
	assert_null(cache_watch(c, "/registry/pods/", 1, record, &s));
	assert_non_null(strstr(err_msg(), "too old resource version: 1 (2)"));
	/* From 3: revisions 4 and 5 are replayed at once. */
	w = cache_watch(c, "/registry/pods/", 3, record, &late);
	assert_non_null(w);
	assert_int_equal(late.n, 2);
	assert_int_equal(late.revs[0], 4);
	assert_int_equal(late.revs[1], 5);
	cache_update(c, "/registry/pods/default/p0", pod("p0", NULL), NULL, NULL);
	cache_delete(c, "/registry/pods/default/p1", NULL, NULL);
	assert_int_equal(late.n, 4);
	assert_memory_equal(late.types, "AAMD", 4);
	/* Other prefixes are not delivered. */
	cache_create(c, "/registry/nodes/n1", json_pack("{s:{s:s}}", "metadata", "name", "n1"),
		     NULL, NULL);
	assert_int_equal(late.n, 4);
	cache_unwatch(w);
	cache_free(c);
}

static void test_node_index(void **state)
{
	struct cache *c = cache_new(NULL, 64);
	struct seen n1 = {0}, n2 = {0}, all = {0};
	struct cache_watch *w1, *w2, *wa;

	cache_load(c);
	w1 = cache_watch_node(c, "/registry/pods/", 0, "n1", record, &n1);
	w2 = cache_watch_node(c, "/registry/pods/", 0, "n2", record, &n2);
	wa = cache_watch(c, "/registry/pods/", 0, record, &all);
	cache_create(c, "/registry/pods/default/a", pod("a", NULL), NULL, NULL);
	cache_update(c, "/registry/pods/default/a", pod("a", "n1"), NULL, NULL);
	cache_create(c, "/registry/pods/default/b", pod("b", "n2"), NULL, NULL);
	/* Moving a pod from n1 to n2 is news for both nodes. */
	cache_update(c, "/registry/pods/default/a", pod("a", "n2"), NULL, NULL);
	cache_delete(c, "/registry/pods/default/b", NULL, NULL);
	assert_int_equal(all.n, 5);
	assert_int_equal(n1.n, 2); /* bound to n1, moved away */
	assert_int_equal(n2.n, 3); /* b added, a moved in, b deleted */
	cache_unwatch(w1);
	cache_unwatch(w2);
	cache_unwatch(wa);
	cache_free(c);
}

/* One object's watchers (a kubelet's CSR, its Node) are indexed by key:
 * another object's events never reach them, their own always do, and the
 * last one to go takes its list with it (ASan sees any left behind). */
static void test_key_index(void **state)
{
	struct cache *c = cache_new(NULL, 64);
	struct seen a = {0}, a2 = {0}, b = {0};
	struct cache_watch *wb;

	cache_load(c);
	a.self = cache_watch_key(c, "/registry/pods/", 0, "/registry/pods/default/a", record, &a);
	a2.unwatch_on_first = true;
	a2.self = cache_watch_key(c, "/registry/pods/", 0, "/registry/pods/default/a", record, &a2);
	wb = cache_watch_key(c, "/registry/pods/", 0, "/registry/pods/default/b", record, &b);
	cache_create(c, "/registry/pods/default/a", pod("a", NULL), NULL, NULL);
	cache_create(c, "/registry/pods/default/ab", pod("ab", NULL), NULL, NULL);
	cache_update(c, "/registry/pods/default/a", pod("a", "n1"), NULL, NULL);
	cache_delete(c, "/registry/pods/default/a", NULL, NULL);
	assert_int_equal(a.n, 3);
	assert_memory_equal(a.types, "AMD", 3);
	assert_int_equal(a2.n, 1); /* unwatched from its own callback */
	assert_int_equal(b.n, 0);
	cache_unwatch(a.self);
	/* A new watcher of the same key from revision 0 replays its events. */
	a.self = cache_watch_key(c, "/registry/pods/", 0, "/registry/pods/default/a", record, &a);
	assert_int_equal(a.n, 6);
	cache_unwatch(a.self);
	cache_create(c, "/registry/pods/default/b", pod("b", NULL), NULL, NULL);
	assert_int_equal(b.n, 1);
	(void)wb; /* left for cache_free */
	cache_free(c);
}

/* A list reads only the directories under its prefix: kinds and
 * namespaces stay apart, a prefix sharing letters with another kind's
 * does not reach it, deleted keys leave, and a revision's list still sees
 * a key deleted since. */
static void test_lists_by_directory(void **state)
{
	struct cache *c = cache_new(NULL, 64);
	json_t **objs;
	size_t n;

	cache_load(c);
	cache_create(c, "/registry/pods/default/a", pod("a", NULL), NULL, NULL);
	cache_create(c, "/registry/pods/kube-system/b", pod("b", NULL), NULL, NULL);
	cache_create(c, "/registry/podsecrets/default/x", pod("x", NULL), NULL, NULL);
	cache_create(c, "/registry/nodes/n1", pod("n1", NULL), NULL, NULL);
	assert_int_equal(cache_count(c, "/registry/pods/"), 2);
	assert_int_equal(cache_count(c, "/registry/pods/default/"), 1);
	assert_int_equal(cache_count(c, "/registry/pods"), 3); /* a bare prefix, as asked */
	assert_int_equal(cache_count(c, "/registry/"), 4);
	n = cache_list(c, "/registry/pods/", NULL, 0, &objs, NULL);
	assert_int_equal(n, 2);
	assert_string_equal(jx_str(objs[0], "metadata.name"), "a");
	assert_string_equal(jx_str(objs[1], "metadata.name"), "b");
	free(objs);
	cache_delete(c, "/registry/pods/kube-system/b", NULL, NULL);
	cache_delete(c, "/registry/nodes/n1", NULL, NULL);
	assert_int_equal(cache_count(c, "/registry/pods/"), 1);
	assert_int_equal(cache_count(c, "/registry/nodes/"), 0);
	n = cache_list_committed(c, "/registry/pods/", NULL, 0, &objs, NULL);
	assert_int_equal(n, 1);
	free(objs);
	/* At revision 4 (before the deletes) b and n1 were there. */
	assert_int_equal(cache_list_at(c, 4, "/registry/pods/", NULL, false, 0, &objs, NULL, &n), 0);
	assert_int_equal(n, 2);
	free(objs);
	assert_int_equal(cache_list_at(c, 4, "/registry/nodes/", NULL, false, 0, &objs, NULL, &n), 0);
	assert_int_equal(n, 1);
	free(objs);
	cache_free(c);
}

static void test_unwatch_inside_callback(void **state)
{
	struct cache *c = cache_new(NULL, 8);
	struct seen a = {0}, b = {0};

	cache_load(c);
	a.unwatch_on_first = true;
	a.self = cache_watch(c, "/registry/pods/", 0, record, &a);
	b.self = cache_watch(c, "/registry/pods/", 0, record, &b);
	cache_create(c, "/registry/pods/default/x", pod("x", NULL), NULL, NULL);
	cache_create(c, "/registry/pods/default/y", pod("y", NULL), NULL, NULL);
	assert_int_equal(a.n, 1);
	assert_int_equal(b.n, 2);
	cache_unwatch(b.self);
	cache_free(c);
}

/* ---- the SQLite store under a real loop ---- */

static int acked;

static void on_done(void *arg, int err, json_t *obj)
{
	assert_int_equal(err, 0);
	acked++;
}

/* What a watcher was told, as text (the objects are the cache's). */
struct told {
	int n;
	char type[8];
	char *obj[8], *prev[8];
};

static void tell(void *arg, const struct cache_event *ev)
{
	struct told *t = arg;
	t->type[t->n] = "AMD"[ev->type];
	t->obj[t->n] = jx_dump(ev->obj);
	t->prev[t->n++] = ev->prev ? jx_dump(ev->prev) : NULL;
}

static void told_free(struct told *t)
{
	for (int i = 0; i < t->n; i++) {
		free(t->obj[i]);
		free(t->prev[i]);
	}
}

/* Two sweeps without a read, and nothing else holding it: the object is
 * kept as its committed text alone (the same bytes every reader got), and
 * parsed again when read, written, listed or deleted. */
static void test_unread_objects_kept_as_text(void **state)
{
	struct cache *c = cache_new(NULL, 16);
	const char *a = "/registry/pods/default/a", *b = "/registry/pods/default/b",
	           *z = "/registry/pods/default/z";
	struct told t = {0};
	struct cache_watch *w;
	struct blob *text, *again;
	json_t *held, **objs;
	char *was;

	(void)state;
	assert_int_equal(cache_load(c), 0);
	assert_int_equal(cache_create(c, a, pod("a", "n1"), NULL, NULL), 0);
	assert_int_equal(cache_create(c, b, pod("b", "n2"), NULL, NULL), 0);
	assert_int_equal(cache_create(c, z, pod("z", NULL), NULL, NULL), 0);
	text = cache_json(c, a, cache_get(c, a));
	held = json_incref(cache_get(c, b));
	assert_int_equal(cache_parsed(c), 3);
	cache_sweep(c); /* all read or written since the last: kept */
	assert_int_equal(cache_parsed(c), 3);
	/* a and z go (the window keeps their events as text); b is held by a
	 * reader */
	cache_sweep(c);
	assert_int_equal(cache_parsed(c), 1);
	json_decref(held);
	cache_sweep(c);
	assert_int_equal(cache_parsed(c), 0);

	/* Its text is read without parsing it. */
	again = cache_text(c, a);
	assert_ptr_equal(again, text);
	blob_unref(again);
	assert_null(cache_text(c, "/registry/pods/default/none"));
	assert_int_equal(cache_parsed(c), 0);

	/* Read again: the same object, and the very text kept for it. */
	was = jx_dump(cache_get(c, a));
	assert_string_equal(was, text->data);
	assert_int_equal(cache_parsed(c), 1);
	again = cache_json(c, a, cache_get(c, a));
	assert_ptr_equal(again, text);
	blob_unref(again);
	free(was);
	/* Reading the text does not keep the tree. */
	cache_sweep(c);
	again = cache_text(c, a);
	assert_ptr_equal(again, text);
	blob_unref(again);
	cache_sweep(c);
	assert_int_equal(cache_parsed(c), 0);
	blob_unref(text);

	/* A list parses what it hands out. */
	assert_int_equal(cache_list(c, "/registry/pods/", NULL, 0, &objs, NULL), 3);
	assert_string_equal(jx_str(objs[0], "spec.nodeName"), "n1");
	assert_string_equal(jx_str(objs[1], "spec.nodeName"), "n2");
	assert_string_equal(jx_str(objs[2], "metadata.name"), "z");
	free(objs);
	assert_int_equal(cache_parsed(c), 3);

	/* A write on a cold object: its watchers get the state before as prev;
	 * a delete of a cold one, its last state. */
	cache_sweep(c);
	cache_sweep(c);
	assert_int_equal(cache_parsed(c), 0);
	w = cache_watch(c, "/registry/pods/", cache_rev(c), tell, &t);
	assert_int_equal(cache_update(c, a, pod("a", "n3"), NULL, NULL), 0);
	assert_int_equal(cache_delete(c, b, NULL, NULL), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.type[0], 'M');
	assert_non_null(strstr(t.obj[0], "\"nodeName\":\"n3\""));
	assert_non_null(strstr(t.prev[0], "\"nodeName\":\"n1\""));
	assert_non_null(strstr(t.prev[0], "\"resourceVersion\":\"1\""));
	assert_int_equal(t.type[1], 'D');
	assert_non_null(strstr(t.obj[1], "\"nodeName\":\"n2\""));
	assert_non_null(strstr(t.obj[1], "\"resourceVersion\":\"5\""));
	assert_null(cache_get(c, b));
	assert_string_equal(jx_str(cache_get_committed(c, a), "spec.nodeName"), "n3");
	told_free(&t);
	cache_unwatch(w);
	cache_free(c);
}

/* The window keeps its events as text: a watch resuming from a revision
 * and a list at one get the objects of then, parsed again, after the
 * sweeps have let every tree go. */
static void test_window_kept_as_text(void **state)
{
	struct cache *c = cache_new(NULL, 8);
	const char *x = "/registry/pods/default/x", *y = "/registry/pods/default/y";
	struct told t = {0};
	struct cache_watch *w;
	json_t **objs;
	size_t n;

	(void)state;
	assert_int_equal(cache_load(c), 0);
	assert_int_equal(cache_create(c, x, pod("x", "n1"), NULL, NULL), 0);
	assert_int_equal(cache_update(c, x, pod("x", "n2"), NULL, NULL), 0);
	assert_int_equal(cache_create(c, y, pod("y", NULL), NULL, NULL), 0);
	assert_int_equal(cache_delete(c, y, NULL, NULL), 0);
	cache_sweep(c);
	cache_sweep(c);
	assert_int_equal(cache_parsed(c), 0);

	w = cache_watch(c, "/registry/pods/", 0, tell, &t);
	assert_int_equal(t.n, 4);
	assert_memory_equal(t.type, "AMAD", 4);
	assert_non_null(strstr(t.obj[0], "\"nodeName\":\"n1\""));
	assert_null(t.prev[0]);
	assert_non_null(strstr(t.obj[1], "\"nodeName\":\"n2\""));
	assert_non_null(strstr(t.obj[1], "\"resourceVersion\":\"2\""));
	assert_non_null(strstr(t.prev[1], "\"nodeName\":\"n1\""));
	assert_non_null(strstr(t.prev[1], "\"resourceVersion\":\"1\""));
	assert_non_null(strstr(t.obj[3], "\"resourceVersion\":\"4\""));
	assert_non_null(strstr(t.prev[3], "\"resourceVersion\":\"3\""));
	cache_unwatch(w);
	told_free(&t);

	/* As it was at revision 3: x at n2, y present. */
	cache_sweep(c);
	assert_int_equal(cache_list_at(c, 3, "/registry/pods/", NULL, false, 0, &objs, NULL, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(jx_str(objs[0], "spec.nodeName"), "n2");
	assert_string_equal(jx_str(objs[1], "metadata.resourceVersion"), "3");
	free(objs);
	assert_int_equal(cache_list_at(c, 1, "/registry/pods/", NULL, false, 0, &objs, NULL, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(jx_str(objs[0], "spec.nodeName"), "n1");
	free(objs);

	/* The same as texts, nothing parsed: now, then as at revision 3. */
	cache_sweep(c);
	cache_sweep(c);
	{
		struct blob **texts;
		const char **keys;
		bool more;

		assert_int_equal(cache_list_text_at(c, 4, "/registry/pods/", NULL, false, 0,
		                                    &texts, &keys, &more, &n),
		                 0);
		assert_int_equal(n, 1);
		assert_string_equal(keys[0], x);
		assert_non_null(strstr(texts[0]->data, "\"resourceVersion\":\"2\""));
		free(texts);
		free(keys);
		assert_int_equal(cache_list_text_at(c, 3, "/registry/pods/", NULL, false, 1,
		                                    &texts, &keys, &more, &n),
		                 0);
		assert_int_equal(n, 1);
		assert_true(more);
		assert_string_equal(keys[0], x);
		free(texts);
		free(keys);
		assert_int_equal(cache_list_text_at(c, 3, "/registry/pods/", x, false, 0, &texts,
		                                    &keys, &more, &n),
		                 0);
		assert_int_equal(n, 1);
		assert_false(more);
		assert_string_equal(keys[0], y);
		assert_non_null(strstr(texts[0]->data, "\"resourceVersion\":\"3\""));
		free(texts);
		free(keys);
		assert_int_equal(cache_list_text_at(c, 1, "/registry/pods/", NULL, false, 0, &texts,
		                                    &keys, NULL, &n),
		                 0);
		assert_int_equal(n, 1);
		assert_non_null(strstr(texts[0]->data, "\"nodeName\":\"n1\""));
		free(texts);
		free(keys);
		assert_int_equal(cache_parsed(c), 0);
	}
	cache_free(c);
}

/* On its loop the cache sweeps a tenth of its table a second: an object
 * written and then left alone is let go between 10 and 20 s later, the
 * table a part at a time, never all in one turn of the loop. */
static void test_sweeps_run_in_steps(void **state)
{
	struct loop *loop;
	struct cache *c;
	size_t parsed[24];
	int partial = 0;

	(void)state;
	clock_use_virtual(clock_now());
	loop = loop_new();
	c = cache_new(NULL, 16);
	cache_set_loop(c, loop);
	assert_int_equal(cache_load(c), 0);
	for (int i = 0; i < 200; i++) {
		char key[64], name[16];
		snprintf(name, sizeof(name), "p%03d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		assert_int_equal(cache_create(c, key, pod(name, NULL), NULL, NULL), 0);
	}
	for (int s = 0; s < 24; s++) {
		clock_advance(NS_PER_SEC);
		parsed[s] = cache_parsed(c);
		partial += parsed[s] > 0 && parsed[s] < 200;
	}
	/* The first pass only notes that they were written; the second lets
	 * them go, over several steps. */
	assert_int_equal(parsed[9], 200);
	assert_true(partial >= 5);
	assert_int_equal(parsed[21], 0);
	cache_free(c);
	loop_free(loop);
	clock_use_real();
}

static void test_sqlite_durable_and_reloaded(void **state)
{
	char dir[] = "/tmp/cube-store-XXXXXX", path[128];
	struct loop *loop = loop_new();
	struct store *st;
	struct cache *c;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/state.db", dir);
	st = store_sqlite_open(path, STORE_SYNC_NORMAL, loop);
	assert_non_null(st);
	c = cache_new(st, 100);
	assert_int_equal(cache_load(c), 0);
	acked = 0;
	for (int i = 0; i < 200; i++) {
		char key[64], name[16];
		snprintf(name, sizeof(name), "p%03d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		cache_create(c, key, pod(name, "n1"), on_done, NULL);
	}
	cache_delete(c, "/registry/pods/default/p007", on_done, NULL);
	/* Replies come only once durable, on the loop. */
	assert_int_equal(acked, 0);
	for (int spins = 0; acked < 201 && spins < 100000; spins++) {
		loop_poll(loop);
		usleep(100);
	}
	assert_int_equal(acked, 201);
	uint64_t writes, commits;
	store_stats(st, &writes, &commits);
	assert_int_equal(writes, 201);
	assert_true(commits <= writes);
	cache_free(c);
	store_close(st);

	/* A new process: everything is back, and the revision resumes. */
	st = store_sqlite_open(path, STORE_SYNC_NORMAL, loop);
	c = cache_new(st, 100);
	assert_int_equal(cache_load(c), 0);
	assert_int_equal(cache_rev(c), 201);
	assert_int_equal(cache_count(c, "/registry/pods/"), 199);
	assert_null(cache_get(c, "/registry/pods/default/p007"));
	assert_string_equal(jx_str(cache_get(c, "/registry/pods/default/p199"),
				   "metadata.resourceVersion"),
			    "200");
	/* The store's text is the readers' (and the fallback of a cold object). */
	{
		json_t *p199 = cache_get(c, "/registry/pods/default/p199");
		struct blob *text = cache_json(c, "/registry/pods/default/p199", p199);
		char *dump = jx_dump(p199);
		assert_string_equal(text->data, dump);
		free(dump);
		blob_unref(text);
	}
	/* The window starts empty at the stored revision: older resumes are 410. */
	assert_null(cache_watch(c, "/registry/pods/", 100, NULL, NULL));
	cache_free(c);
	store_close(st);
	loop_free(loop);
	unlink(path);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

/* ---- the committed view, reads at a revision, failed commits ------------------ */

static int failed;
static char failed_msg[256];

static void on_result(void *arg, int err, json_t *obj)
{
	(void)arg;
	acked++;
	if (err) {
		failed++;
		snprintf(failed_msg, sizeof(failed_msg), "%s", err_msg());
		assert_null(obj);
	}
}

static void settle(struct loop *loop, struct cache *c)
{
	for (int spins = 0; cache_inflight(c) && spins < 100000; spins++) {
		loop_poll(loop);
		usleep(100);
	}
	assert_int_equal(cache_inflight(c), 0);
}

struct sqlite_fixture {
	char dir[64], path[128];
	struct loop *loop;
	struct store *st;
	struct cache *c;
};

static void fixture_open(struct sqlite_fixture *f)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/cube-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	f->loop = loop_new();
	f->st = store_sqlite_open(f->path, STORE_SYNC_NORMAL, f->loop);
	assert_non_null(f->st);
	f->c = cache_new(f->st, 100);
	assert_int_equal(cache_load(f->c), 0);
}

static void fixture_close(struct sqlite_fixture *f)
{
	char cmd[160];
	cache_free(f->c);
	store_close(f->st);
	loop_free(f->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
}

static const char *rv_of(const json_t *o)
{
	return jx_str(o, "metadata.resourceVersion");
}

/* A write is shown to readers only once durable; writers build on it at once. */
static void test_committed_view_hides_writes_in_flight(void **state)
{
	struct sqlite_fixture f;
	json_t **objs;
	size_t n;
	(void)state;

	fixture_open(&f);
	acked = 0;
	cache_create(f.c, "/registry/pods/default/a", pod("a", NULL), on_result, NULL);
	settle(f.loop, f.c);
	cache_update(f.c, "/registry/pods/default/a", pod("a", "n1"), on_result, NULL);
	cache_create(f.c, "/registry/pods/default/b", pod("b", NULL), on_result, NULL);
	cache_delete(f.c, "/registry/pods/default/a", on_result, NULL);
	/* in flight: the latest has them, the committed view does not */
	assert_int_equal(cache_rev(f.c), 4);
	assert_int_equal(cache_committed_rev(f.c), 1);
	assert_null(cache_get(f.c, "/registry/pods/default/a"));
	assert_string_equal(rv_of(cache_get_committed(f.c, "/registry/pods/default/a")), "1");
	assert_null(cache_get_committed(f.c, "/registry/pods/default/b"));
	assert_null(cache_text(f.c, "/registry/pods/default/b"));
	{
		struct blob *text = cache_text(f.c, "/registry/pods/default/a");
		assert_non_null(strstr(text->data, "\"resourceVersion\":\"1\""));
		assert_null(strstr(text->data, "nodeName"));
		blob_unref(text);
	}
	n = cache_list_committed(f.c, "/registry/pods/", NULL, 0, &objs, NULL);
	assert_int_equal(n, 1);
	assert_string_equal(jx_str(objs[0], "metadata.name"), "a");
	assert_null(jx_str(objs[0], "spec.nodeName"));
	free(objs);
	settle(f.loop, f.c);
	assert_int_equal(cache_committed_rev(f.c), 4);
	assert_null(cache_get_committed(f.c, "/registry/pods/default/a"));
	assert_string_equal(rv_of(cache_get_committed(f.c, "/registry/pods/default/b")), "3");
	fixture_close(&f);
}

/* A list as it was at a revision: the window's later events undone. */
static void test_list_at_a_revision(void **state)
{
	struct cache *c = cache_new(NULL, 3);
	json_t **objs;
	size_t n;
	(void)state;

	cache_create(c, "/registry/pods/default/a", pod("a", NULL), NULL, NULL); /* 1 */
	cache_create(c, "/registry/pods/default/b", pod("b", NULL), NULL, NULL); /* 2 */
	cache_update(c, "/registry/pods/default/a", pod("a", "n1"), NULL, NULL); /* 3 */
	cache_delete(c, "/registry/pods/default/b", NULL, NULL);                 /* 4 */
	cache_create(c, "/registry/pods/default/c", pod("c", NULL), NULL, NULL); /* 5 */
	assert_int_equal(cache_list_at(c, 2, "/registry/pods/", NULL, false, 0, &objs, NULL, &n),
			 0);
	assert_int_equal(n, 2);
	assert_string_equal(rv_of(objs[0]), "1");
	assert_string_equal(rv_of(objs[1]), "2");
	free(objs);
	assert_int_equal(cache_list_at(c, 4, "/registry/pods/", NULL, false, 0, &objs, NULL, &n),
			 0);
	assert_int_equal(n, 1);
	assert_string_equal(rv_of(objs[0]), "3");
	free(objs);
	/* from a key: after it, or from it */
	assert_int_equal(cache_list_at(c, 5, "/registry/pods/", "/registry/pods/default/a", false,
				       0, &objs, NULL, &n),
			 0);
	assert_int_equal(n, 1);
	assert_string_equal(jx_str(objs[0], "metadata.name"), "c");
	free(objs);
	assert_int_equal(cache_list_at(c, 5, "/registry/pods/", "/registry/pods/default/a", true,
				       0, &objs, NULL, &n),
			 0);
	assert_int_equal(n, 2);
	free(objs);
	/* the window holds 3, 4, 5: revision 1 can no longer be rebuilt; 6 is not there yet */
	assert_int_equal(cache_list_at(c, 1, "/registry/pods/", NULL, false, 0, &objs, NULL, &n),
			 ERR_GONE);
	assert_int_equal(cache_list_at(c, 6, "/registry/pods/", NULL, false, 0, &objs, NULL, &n),
			 ERR_TIMEOUT);
	assert_string_equal(err_msg(), "Too large resource version: 6, current: 5");
	cache_free(c);
}

/* A commit the disk refuses is answered with its error; the key is what the
 * disk holds; the server goes on (a trigger makes SQLite refuse it, as a
 * constraint or a full disk would). */
static void test_failed_commit_is_answered_not_fatal(void **state)
{
	struct sqlite_fixture f;
	sqlite3 *db;
	(void)state;

	fixture_open(&f);
	acked = failed = 0;
	cache_create(f.c, "/registry/pods/default/boom", pod("boom", NULL), on_result, NULL);
	settle(f.loop, f.c);
	assert_int_equal(sqlite3_open(f.path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "CREATE TRIGGER refuse BEFORE UPDATE ON kv WHEN "
				      "NEW.key LIKE '%/boom' BEGIN SELECT RAISE(ABORT, "
				      "'refused by the test'); END;",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	cache_update(f.c, "/registry/pods/default/boom", pod("boom", "n1"), on_result, NULL);
	assert_string_equal(jx_str(cache_get(f.c, "/registry/pods/default/boom"), "spec.nodeName"),
			    "n1");
	settle(f.loop, f.c);
	assert_int_equal(failed, 1);
	assert_non_null(strstr(failed_msg, "refused by the test"));
	/* back to what the disk holds, for readers and writers */
	assert_string_equal(rv_of(cache_get(f.c, "/registry/pods/default/boom")), "1");
	assert_null(jx_str(cache_get(f.c, "/registry/pods/default/boom"), "spec.nodeName"));
	assert_int_equal(cache_committed_rev(f.c), 1);
	/* A failed write's successors in flight are told against the disk: a
	 * delete after a refused update is the delete of revision 1; a delete
	 * after a refused create is nothing anyone saw. */
	assert_int_equal(sqlite3_open(f.path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "CREATE TRIGGER refuse_new BEFORE INSERT ON kv WHEN "
				      "NEW.key LIKE '%/never' BEGIN SELECT RAISE(ABORT, "
				      "'refused by the test'); END;",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	struct seen seen = {0};
	seen.self = cache_watch(f.c, "/registry/pods/", cache_rev(f.c), record, &seen);
	cache_update(f.c, "/registry/pods/default/boom", pod("boom", "n2"), on_result, NULL);
	cache_delete(f.c, "/registry/pods/default/boom", on_result, NULL);
	cache_create(f.c, "/registry/pods/default/never", pod("never", NULL), on_result, NULL);
	cache_delete(f.c, "/registry/pods/default/never", on_result, NULL);
	settle(f.loop, f.c);
	assert_int_equal(failed, 3);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.types[0], 'D');
	assert_int_equal(seen.revs[0], 4);
	assert_null(cache_get(f.c, "/registry/pods/default/boom"));
	assert_null(cache_get(f.c, "/registry/pods/default/never"));
	assert_null(cache_get_committed(f.c, "/registry/pods/default/never"));
	cache_unwatch(seen.self);
	/* and the next write goes through */
	cache_create(f.c, "/registry/pods/default/ok", pod("ok", NULL), on_result, NULL);
	settle(f.loop, f.c);
	assert_int_equal(failed, 3);
	assert_int_equal(cache_committed_rev(f.c), 7);
	fixture_close(&f);
}

/* A string may hold a NUL (a YAML or protobuf body can carry one): the
 * stored text says \u0000, and every reading of it back keeps the NUL —
 * the object gone cold, the window's events, a restart. */
static void test_nul_in_a_string_read_back(void **state)
{
	const char *k = "/registry/pods/default/nul";
	struct sqlite_fixture f;
	struct told t = {0};
	struct cache_watch *w;
	json_t *o = pod("nul", NULL);

	(void)state;
	fixture_open(&f);
	json_object_set_new(o, "note", json_stringn("a\0b", 3));
	cache_create(f.c, k, o, on_result, NULL);
	cache_update(f.c, k, json_deep_copy(o), on_result, NULL);
	settle(f.loop, f.c);
	cache_sweep(f.c);
	cache_sweep(f.c);
	assert_int_equal(cache_parsed(f.c), 0);
	assert_int_equal(json_string_length(jx_get(cache_get(f.c, k), "note")), 3);
	w = cache_watch(f.c, "/registry/pods/", 0, tell, &t);
	assert_int_equal(t.n, 2);
	assert_non_null(strstr(t.prev[1], "a\\u0000b"));
	cache_unwatch(w);
	told_free(&t);

	cache_free(f.c);
	f.c = cache_new(f.st, 100);
	assert_int_equal(cache_load(f.c), 0);
	assert_int_equal(json_string_length(jx_get(cache_get(f.c, k), "note")), 3);
	fixture_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_revisions_and_lists),
		cmocka_unit_test(test_json_made_once),
		cmocka_unit_test(test_unread_objects_kept_as_text),
		cmocka_unit_test(test_window_kept_as_text),
		cmocka_unit_test(test_sweeps_run_in_steps),
		cmocka_unit_test(test_watch_window_and_gone),
		cmocka_unit_test(test_node_index),
		cmocka_unit_test(test_key_index),
		cmocka_unit_test(test_lists_by_directory),
		cmocka_unit_test(test_unwatch_inside_callback),
		cmocka_unit_test(test_sqlite_durable_and_reloaded),
		cmocka_unit_test(test_committed_view_hides_writes_in_flight),
		cmocka_unit_test(test_list_at_a_revision),
		cmocka_unit_test(test_failed_commit_is_answered_not_fatal),
		cmocka_unit_test(test_nul_in_a_string_read_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
