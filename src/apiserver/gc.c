/*
 * The garbage collector: what upstream's kube-controller-manager runs on a
 * graph it builds from informers, run here beside the cache every write goes
 * through — so it needs no graph of its own, only an index from an owner's
 * uid to the keys of the objects that name it in metadata.ownerReferences.
 *
 * It hears every committed event (a cache watch) and keeps a queue of keys
 * to look at, worked off at the loop's next turn (never inside the event:
 * with a memory-only cache a write dispatches its event before it returns).
 * For each key, as upstream's attemptToDeleteItem and its two finalizers:
 *  - an object being deleted with the "orphan" finalizer: its dependents lose
 *    their reference to it, and the finalizer goes once those writes have
 *    landed (on a shared store writes land in any order: the owner's
 *    deletion first would leave dependents naming an absent owner, which
 *    are then collected — upstream orphans one dependent after another);
 *  - one being deleted with "foregroundDeletion": its dependents are deleted,
 *    and the finalizer goes once no dependent with blockOwnerDeletion is left
 *    (terminating ones count until they are gone);
 *  - any other object with owners: when none is "solid" (present with the
 *    same uid and not waiting for its dependents) it is deleted — in the
 *    foreground when an owner waits for it and it has dependents of its own —
 *    and when some are, the references to the absent and the waiting owners
 *    are removed.
 * A finalizer removed last from an object whose grace period is over deletes
 * it (a bound pod still waits for its kubelet). A write the store refuses
 * is looked at again a second later (the refused write sends no event
 * that would bring it back).
 *
 * Ownership: struct gc belongs to the API server (s->gc). Threads: the
 * server's loop.
 */
#include "apiserver/objects.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gc {
	struct apiserver *s;
	struct cache_watch *watch;
	struct event *run;    /* the queue's worker, made active when it fills */
	struct hmap queue;    /* keys to look at (values unused) */
	struct hmap children; /* owner uid → struct hmap* of dependent keys */
	struct hmap retry;    /* keys whose write the store refused (values unused) */
	struct timer *retry_timer;
};

/* A refused write is looked at again after this, not at once: a disk that
 * refuses one write usually refuses the next. */
#define GC_RETRY_NS NS_PER_SEC

static bool being_deleted(const json_t *obj)
{
	return jx_get(obj, "metadata.deletionTimestamp") != NULL;
}

/* ---- the index ------------------------------------------------------------ */

static void index_refs(struct gc *g, const char *key, const json_t *obj, bool add)
{
	json_t *ref;
	size_t i;

	json_array_foreach(jx_get(obj, "metadata.ownerReferences"), i, ref)
	{
		const char *uid = jx_str(ref, "uid");
		struct hmap *deps;
		if (!uid || !*uid)
			continue;
		deps = hmap_get(&g->children, uid);
		if (add) {
			if (!deps) {
				if (!(deps = calloc(1, sizeof(*deps))))
					abort();
				hmap_put(&g->children, uid, deps);
			}
			hmap_put(deps, key, (void *)1);
		} else if (deps) {
			hmap_del(deps, key);
			if (hmap_len(deps) == 0) {
				hmap_free(deps);
				free(hmap_del(&g->children, uid));
			}
		}
	}
}

/* The keys naming uid as an owner, copied: the index changes under writes. */
static void dependents_of(struct gc *g, const char *uid, struct strv *out)
{
	struct hmap *deps = uid ? hmap_get(&g->children, uid) : NULL;
	const char *k;
	void *v;

	for (size_t i = 0; deps && hmap_next(deps, &i, &k, &v);)
		strv_push(out, k);
}

static void free_deps(void *deps)
{
	hmap_free(deps);
	free(deps);
}

/* ---- the queue ------------------------------------------------------------ */

static void enqueue(struct gc *g, const char *key)
{
	if (hmap_get(&g->queue, key))
		return;
	hmap_put(&g->queue, key, (void *)1);
	if (hmap_len(&g->queue) == 1)
		event_active(g->run, 0, 0);
}

static void enqueue_dependents(struct gc *g, const char *uid)
{
	struct strv keys = STRV_INIT;
	dependents_of(g, uid, &keys);
	for (size_t i = 0; i < keys.n; i++)
		enqueue(g, keys.v[i]);
	strv_free(&keys);
}

/* The cache key of the owner ref names, for a dependent in ns; NULL when
 * its kind is not one this server serves. */
static char *owner_key(const json_t *ref, const char *ns)
{
	/* A reference names its owner as an object does itself. */
	const struct resource *res = resource_of(ref);
	const char *name = jx_str(ref, "name");

	if (!res || !name)
		return NULL;
	/* A cluster-scoped object cannot be owned by a namespaced one. */
	if (res->namespaced && !ns)
		return NULL;
	return object_key(res, res->namespaced ? ns : NULL, name);
}

static void enqueue_owners(struct gc *g, const json_t *obj)
{
	json_t *ref;
	size_t i;

	json_array_foreach(jx_get(obj, "metadata.ownerReferences"), i, ref)
	{
		char *key = owner_key(ref, jx_str(obj, "metadata.namespace"));
		json_t *owner = key ? cache_get(g->s->cache, key) : NULL;
		if (owner && being_deleted(owner) &&
		    (has_finalizer(owner, FINALIZER_FOREGROUND) ||
		     has_finalizer(owner, FINALIZER_ORPHAN)))
			enqueue(g, key);
		free(key);
	}
}

static void on_event(void *arg, const struct cache_event *ev)
{
	struct gc *g = arg;
	const json_t *refs = jx_get(ev->obj, "metadata.ownerReferences");
	bool refs_changed =
	    !ev->prev || !json_equal((json_t *)refs, jx_get(ev->prev, "metadata.ownerReferences"));

	if (ev->type == CACHE_DELETED) {
		if (ev->prev)
			index_refs(g, ev->key, ev->prev, false);
		/* Its dependents may have lost their last owner; an owner
		 * waiting in the foreground may have lost its last blocker. */
		enqueue_dependents(g, jx_str(ev->obj, "metadata.uid"));
		enqueue_owners(g, ev->obj);
		return;
	}
	/* Most events (status updates) keep their references: no index work. */
	if (refs_changed) {
		if (ev->prev)
			index_refs(g, ev->key, ev->prev, false);
		index_refs(g, ev->key, ev->obj, true);
	}
	if (being_deleted(ev->obj) && (has_finalizer(ev->obj, FINALIZER_ORPHAN) ||
	                               has_finalizer(ev->obj, FINALIZER_FOREGROUND)))
		enqueue(g, ev->key);
	if (refs_changed) {
		if (json_array_size(refs))
			enqueue(g, ev->key);
		if (ev->prev)
			enqueue_owners(g, ev->prev);
	}
}

/* ---- writes ------------------------------------------------------------------ */

/* What a write's completion needs: the server (the collector may be gone
 * by then: it stops before the store's last writes complete), the key, and
 * the key of an owner that waits for the write, if one does. */
struct gc_write {
	struct apiserver *s;
	char *key;
	char *waiter;
};

static struct gc_write *gc_write(struct gc *g, const char *key, const char *waiter)
{
	struct gc_write *w = calloc(1, sizeof(*w));
	if (!w || !(w->key = strdup(key)) || (waiter && !(w->waiter = strdup(waiter))))
		abort();
	w->s = g->s;
	return w;
}

static void gc_write_free(struct gc_write *w)
{
	free(w->key);
	free(w->waiter);
	free(w);
}

static void retry_later(struct gc *g, const char *key)
{
	hmap_put(&g->retry, key, (void *)1);
	timer_after(g->retry_timer, GC_RETRY_NS);
}

static void on_written(void *arg, int err, json_t *obj)
{
	struct gc_write *w = arg;
	struct gc *g = w->s->gc;

	(void)obj;
	if (!err && g) {
		/* Landed, and in the index: the owner waiting for it looks
		 * again (enqueue_owners cannot find an owner its reference
		 * names by a kind this server does not serve). */
		if (w->waiter)
			enqueue(g, w->waiter);
	} else if (err == ERR_CONFLICT && g) {
		/* Another API server wrote the key first (a shared store): the
		 * cache has its write now; look again. */
		enqueue(g, w->key);
		if (w->waiter)
			enqueue(g, w->waiter);
	} else if (err && g) {
		LOG_ERROR("garbage collector: write of %s failed, retrying in 1s: %s", w->key,
		          err_msg());
		retry_later(g, w->key);
		if (w->waiter)
			retry_later(g, w->waiter);
	}
	gc_write_free(w);
}

static void on_retry(void *arg)
{
	struct gc *g = arg;
	struct hmap keys = g->retry;
	const char *k;
	void *v;

	memset(&g->retry, 0, sizeof(g->retry));
	for (size_t i = 0; hmap_next(&keys, &i, &k, &v);)
		enqueue(g, k);
	hmap_free(&keys);
}

static int gc_delete(struct gc *g, const char *key)
{
	struct gc_write *w = gc_write(g, key, NULL);
	int rc = cache_delete(g->s->cache, key, on_written, w);
	if (rc < 0)
		gc_write_free(w);
	return rc;
}

static int gc_update(struct gc *g, const char *key, json_t *obj, const char *waiter)
{
	struct gc_write *w = gc_write(g, key, waiter);
	int rc = cache_update(g->s->cache, key, obj, on_written, w);
	if (rc < 0)
		gc_write_free(w);
	return rc;
}

/* ---- the work --------------------------------------------------------------- */

/* Take name off obj's finalizers (obj is the cache's state at key); the
 * last one gone from an object whose grace period is over deletes it. */
static void remove_finalizer(struct gc *g, const char *key, const json_t *obj, const char *name)
{
	json_t *copy = json_deep_copy(obj), *fins = jx_get(copy, "metadata.finalizers"), *f;
	size_t i;
	int rc;

	json_array_foreach(fins, i, f)
	{
		if (is(json_string_value(f), name)) {
			json_array_remove(fins, i);
			break;
		}
	}
	if (json_array_size(fins) == 0 &&
	    jx_int(obj, "metadata.deletionGracePeriodSeconds", 0) == 0) {
		json_decref(copy);
		rc = gc_delete(g, key);
	} else {
		if (json_array_size(fins) == 0)
			json_object_del(json_object_get(copy, "metadata"), "finalizers");
		rc = gc_update(g, key, copy, NULL);
	}
	if (rc < 0)
		LOG_ERROR("garbage collector: remove finalizer %s from %s: %s", name, key,
		          err_msg());
}

/* Drop obj's references to the owners whose uids are in uids; waiter: the
 * key of an owner to look at again if the write fails. */
static void remove_refs(struct gc *g, const char *key, const json_t *obj, const struct strv *uids,
                        const char *waiter)
{
	json_t *copy = json_deep_copy(obj), *refs = jx_get(copy, "metadata.ownerReferences");

	for (size_t i = json_array_size(refs); i-- > 0;)
		if (strv_has(uids, jx_str(json_array_get(refs, i), "uid")))
			json_array_remove(refs, i);
	if (json_array_size(refs) == 0)
		json_object_del(json_object_get(copy, "metadata"), "ownerReferences");
	if (gc_update(g, key, copy, waiter) < 0) {
		LOG_ERROR("garbage collector: remove owner references from %s: %s", key, err_msg());
		if (waiter)
			retry_later(g, waiter);
	}
}

/* Whether dep names the owner uid, and (blocking) with blockOwnerDeletion. */
static bool names_owner(const json_t *dep, const char *uid, bool blocking)
{
	json_t *ref;
	size_t i;

	json_array_foreach(jx_get(dep, "metadata.ownerReferences"), i, ref)
	{
		if (is(jx_str(ref, "uid"), uid) &&
		    (!blocking || json_is_true(json_object_get(ref, "blockOwnerDeletion"))))
			return true;
	}
	return false;
}

/* The dependents of the owner at key lose their reference to it; how many
 * still name it (their writes on the way: the owner looks again as each
 * completes, gc_write's waiter). One whose write is already on its way is
 * waited for, not written again; one being deleted is as good as orphaned
 * (upstream takes a 404 for success). */
static size_t orphan_dependents(struct gc *g, const char *key, const char *uid)
{
	struct strv keys = STRV_INIT, one = STRV_INIT;
	size_t n = 0;

	strv_push(&one, uid);
	dependents_of(g, uid, &keys);
	for (size_t i = 0; i < keys.n; i++) {
		json_t *dep = cache_get(g->s->cache, keys.v[i]);
		if (!dep)
			continue;
		n++;
		if (names_owner(dep, uid, false))
			remove_refs(g, keys.v[i], dep, &one, key);
	}
	strv_free(&one);
	strv_free(&keys);
	return n;
}

static void attempt(struct gc *g, const char *key);

/* An owner deleted in the foreground: its dependents go first; its
 * finalizer goes once none with blockOwnerDeletion remains. */
static void delete_dependents(struct gc *g, const char *key, const json_t *obj)
{
	const char *uid = jx_str(obj, "metadata.uid");
	struct strv keys = STRV_INIT;
	bool blocked = false;

	dependents_of(g, uid, &keys);
	for (size_t i = 0; i < keys.n; i++) {
		json_t *dep = cache_get(g->s->cache, keys.v[i]);
		if (dep && !being_deleted(dep))
			attempt(g, keys.v[i]);
		/* attempt may have deleted it, or dropped the reference. */
		if ((dep = cache_get(g->s->cache, keys.v[i])) && names_owner(dep, uid, true))
			blocked = true;
	}
	strv_free(&keys);
	if (!blocked && (obj = cache_get(g->s->cache, key)) &&
	    has_finalizer(obj, FINALIZER_FOREGROUND))
		remove_finalizer(g, key, obj, FINALIZER_FOREGROUND);
}

/* A dependent: deleted when no owner is solid, else freed of the others. */
static void collect(struct gc *g, const char *key, const json_t *obj)
{
	const char *ns = jx_str(obj, "metadata.namespace");
	struct strv gone = STRV_INIT; /* uids of absent and waiting owners */
	size_t solid = 0, waiting = 0;
	json_t *ref;
	size_t i;

	json_array_foreach(jx_get(obj, "metadata.ownerReferences"), i, ref)
	{
		char *okey = owner_key(ref, ns);
		json_t *owner = okey ? cache_get(g->s->cache, okey) : NULL;
		const char *uid = jx_str(ref, "uid");
		if (!okey) /* a kind we cannot look up: never delete for it */
			solid++;
		else if (!owner || !is(jx_str(owner, "metadata.uid"), uid))
			strv_push(&gone, uid ?: "");
		else if (being_deleted(owner) && has_finalizer(owner, FINALIZER_FOREGROUND)) {
			strv_push(&gone, uid);
			waiting++;
		} else
			solid++;
		free(okey);
	}
	if (gone.n && solid) {
		remove_refs(g, key, obj, &gone, NULL);
	} else if (gone.n) {
		/* Upstream's choice of policy: the foreground when an owner
		 * waits and this object has dependents to wait for in turn,
		 * else what the object's own finalizers ask, else background. */
		const char *policy = "Background";
		if (waiting && hmap_get(&g->children, jx_str(obj, "metadata.uid") ?: ""))
			policy = "Foreground";
		else if (has_finalizer(obj, FINALIZER_ORPHAN))
			policy = "Orphan";
		else if (has_finalizer(obj, FINALIZER_FOREGROUND))
			policy = "Foreground";
		struct gc_write *w = gc_write(g, key, NULL);
		if (!delete_internal_then(g->s, key, -1, policy, on_written, w))
			gc_write_free(w);
	}
	strv_free(&gone);
}

static void attempt(struct gc *g, const char *key)
{
	json_t *obj = cache_get(g->s->cache, key);

	if (!obj)
		return;
	if (being_deleted(obj)) {
		if (has_finalizer(obj, FINALIZER_ORPHAN)) {
			if (orphan_dependents(g, key, jx_str(obj, "metadata.uid")) == 0 &&
			    (obj = cache_get(g->s->cache, key)))
				remove_finalizer(g, key, obj, FINALIZER_ORPHAN);
		} else if (has_finalizer(obj, FINALIZER_FOREGROUND)) {
			delete_dependents(g, key, obj);
		}
		/* Otherwise on its way already: nothing to decide. */
		return;
	}
	if (json_array_size(jx_get(obj, "metadata.ownerReferences")))
		collect(g, key, obj);
}

static void run_queue(evutil_socket_t fd, short what, void *arg)
{
	struct gc *g = arg;
	struct hmap batch = g->queue;
	const char *k;
	void *v;

	(void)fd;
	(void)what;
	/* Work that this batch causes queues afresh, for the next turn. */
	memset(&g->queue, 0, sizeof(g->queue));
	for (size_t i = 0; hmap_next(&batch, &i, &k, &v);)
		attempt(g, k);
	hmap_free(&batch);
}

int gc_start(struct apiserver *s)
{
	struct gc *g = calloc(1, sizeof(*g));
	json_t **objs;
	size_t n;

	if (!g)
		abort();
	g->s = s;
	if (!(g->run = event_new(loop_base(s->loop), -1, 0, run_queue, g)))
		abort();
	g->retry_timer = loop_timer(s->loop, on_retry, g);
	/* What the store holds: the index, and whatever a restart left half
	 * done (a finalizer to act on, an owner gone while we were down). */
	n = cache_list(s->cache, "/registry/", NULL, 0, &objs, NULL);
	for (size_t i = 0; i < n; i++) {
		bool owned = json_array_size(jx_get(objs[i], "metadata.ownerReferences")) > 0;
		bool pending =
		    being_deleted(objs[i]) && (has_finalizer(objs[i], FINALIZER_ORPHAN) ||
		                               has_finalizer(objs[i], FINALIZER_FOREGROUND));
		if (!owned && !pending)
			continue;
		const struct resource *res = resource_of(objs[i]);
		char *key = res ? object_key(res, jx_str(objs[i], "metadata.namespace"),
		                             jx_str(objs[i], "metadata.name"))
		                : NULL;
		if (!key)
			continue;
		index_refs(g, key, objs[i], true);
		enqueue(g, key);
		free(key);
	}
	free(objs);
	g->watch = cache_watch(s->cache, "/registry/", cache_rev(s->cache), on_event, g);
	s->gc = g;
	return 0;
}

void gc_stop(struct apiserver *s)
{
	struct gc *g = s->gc;

	if (!g)
		return;
	cache_unwatch(g->watch);
	event_free(g->run);
	timer_free(g->retry_timer);
	hmap_free(&g->retry);
	hmap_free(&g->queue);
	hmap_free_values(&g->children, free_deps);
	free(g);
	s->gc = NULL;
}
