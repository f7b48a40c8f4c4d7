/*
 * cache — the API server's objects in memory, in front of the durable store:
 * what the upstream API server calls the watch cache, here also the single
 * writer that orders all writes.
 *
 * Reads (get, list) are served from memory. Writes take the next revision
 * from one global counter, stamp it into metadata.resourceVersion, replace
 * the object in memory at once (so the next write on the loop sees it and
 * checks against it) and go to the store; their `done` callback runs — and
 * watchers hear of them — only once the store says the write is durable.
 * So there are two views: the latest (cache_get, cache_list: what writers
 * build on) and the committed one (cache_get_committed,
 * cache_list_committed: what clients may be shown, every write in it
 * durable, at cache_committed_rev). A revision is shown to no client before
 * it is durable, so none is handed out twice across a crash.
 *
 * A write the store fails is answered with the error (done gets err and a
 * NULL object): no event, and the key goes back to what the disk holds
 * unless a later write of it is already on its way (which then carries the
 * failed one's content to disk as its own, as a write that timed out in
 * etcd may still land).
 *
 * With a remote store (etcd, shared with other API servers) the store
 * assigns revisions and the cache is fed by the store's watch: a write is a
 * compare-and-swap against the revision of the state it was built on, and
 * its `done` runs once the watch has brought its revision (so a writer
 * reads what it wrote, and watchers heard of it first). There is one view
 * (latest = committed = what the watch brought). A write that lost the
 * compare to another server's is done with ERR_CONFLICT once this cache
 * has seen the winner: the caller builds it again on the new state, as
 * upstream's GuaranteedUpdate does. When the watch's history is compacted
 * away the cache loads again; watchers hear the difference as events.
 *
 * Watchers see events in revision order. A window of recent events lets a
 * watch resume from a resourceVersion and a list be read as it was at one
 * (cache_list_at, for continue tokens); older than the window is ERR_GONE
 * (410). Watchers interested in one node's objects are indexed by
 * spec.nodeName.
 *
 * Keys are "/registry/<resource>/<namespace>/<name>" (no namespace segment
 * for cluster-scoped resources), so a prefix selects a resource or a
 * namespace of it, and key order is namespace/name order.
 *
 * Each committed object's compact JSON text is made once — for a local
 * store, the very bytes the store was given — and every GET, LIST and
 * watcher sends those bytes (cache_json, cache_event.json) rather than
 * serialising the object again.
 *
 * An object kept only as that text costs a fraction of its parsed tree
 * (a Node's tree is 7.6 times its text), so one that is at rest (no write
 * in flight), has not been read or written since the last sweep and is
 * held by nothing else is kept as text alone, and parsed again when it is
 * next read (cache_sweep, every 10 s once cache_set_loop has a loop).
 * The window keeps its events as text as well: a watch resuming from a
 * revision, or a list at one, gets their objects parsed again. A reader
 * that sends text asks for text (cache_text, cache_list_text_at) and
 * parses nothing.
 *
 * Ownership: objects in the cache are immutable and shared: copy before
 * changing one. Writes steal the object they are given. cache_get, list
 * and event objects are borrowed: for the current callback, since a sweep
 * may let go of an unread one from the next loop turn on; keep one longer
 * with json_incref. Reads may parse a cold object again: the cache does not
 * change, so they take it const. Threads: the owning loop's thread only.
 */
#ifndef CUBE_STORAGE_CACHE_H
#define CUBE_STORAGE_CACHE_H

#include "storage/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cache_event_type { CACHE_ADDED, CACHE_MODIFIED, CACHE_DELETED };

struct blob;

struct cache_event {
	enum cache_event_type type;
	int64_t rev;
	const char *key;
	json_t *obj;  /* the new state; for DELETED the last state at the delete's revision */
	json_t *prev; /* the state before, or NULL */
	struct blob *json; /* obj's JSON text when the cache made it already, or NULL
	                    * (borrowed: blob_ref to keep it; else cache_json) */
};

struct cache;
struct cache_watch;

typedef void (*cache_done_fn)(void *arg, int err, json_t *obj);
typedef void (*cache_watch_fn)(void *arg, const struct cache_event *ev);

/* store may be NULL: memory only, writes complete at once (tests). */
struct cache *cache_new(struct store *store, size_t window);
void cache_free(struct cache *c);
/* Fill memory from the store; the revision counter resumes after it. */
int cache_load(struct cache *c);

/*
 * The cache's timers, on loop: cache_sweep every 10 s; and, remote, a
 * durable write its watch has not brought back within 5 s is answered
 * anyway (upstream never waits), and a reload that failed is tried again a
 * second later. Once only.
 */
void cache_set_loop(struct cache *c, struct loop *loop);
/*
 * Let go of the parsed trees of objects at rest that were neither read
 * nor written since the last sweep and that nothing else holds: they stay
 * as their committed text until read. cache_parsed: how many objects are
 * held parsed now (the rest are text alone).
 */
void cache_sweep(struct cache *c);
size_t cache_parsed(const struct cache *c);
/* cb(arg) whenever the committed revision moves (one hook: the API
 * server's reads waiting for a revision). */
void cache_on_progress(struct cache *c, void (*fn)(void *arg), void *arg);
/* The store is remote: reads with no resourceVersion must first learn its
 * current revision (store_current_rev) and wait for it, to be consistent. */
bool cache_remote(const struct cache *c);
struct store *cache_store(const struct cache *c);

/* The last revision handed out; the last one durable (and dispatched). */
int64_t cache_rev(const struct cache *c);
int64_t cache_committed_rev(const struct cache *c);
json_t *cache_get(const struct cache *c, const char *key);
json_t *cache_get_committed(const struct cache *c, const char *key);
/* Objects under prefix with key > after (NULL = from the start), in key
 * order, at most limit (0 = all). *out is a malloc'd array of borrowed
 * objects; *more is set when objects remain after the last one returned. */
size_t cache_list(const struct cache *c, const char *prefix, const char *after, size_t limit,
		  json_t ***out, bool *more);
size_t cache_list_committed(const struct cache *c, const char *prefix, const char *after,
                            size_t limit, json_t ***out, bool *more);
/*
 * The committed objects as they were at revision rev (the window's events
 * after it undone): 0 and *n of them in *out, as cache_list, the keys after
 * start (from it when inclusive; NULL: all); ERR_GONE when rev is older
 * than the window, ERR_TIMEOUT when it is not committed yet.
 */
int cache_list_at(const struct cache *c, int64_t rev, const char *prefix, const char *start,
                  bool inclusive, size_t limit, json_t ***out, bool *more, size_t *n);
/*
 * The same as texts: *out the committed texts (borrowed, as objects are)
 * and *keys their keys (borrowed; both arrays malloc'd), no object parsed
 * for it: what a LIST without selectors sends.
 */
int cache_list_text_at(const struct cache *c, int64_t rev, const char *prefix,
                       const char *start, bool inclusive, size_t limit, struct blob ***out,
                       const char ***keys, bool *more, size_t *n);
size_t cache_count(const struct cache *c, const char *prefix);
/*
 * The compact JSON text of obj (json_dumps JSON_COMPACT), an object this
 * cache handed out for key: made once per committed version and shared,
 * else made for this caller. A new reference (blob_unref).
 */
struct blob *cache_json(struct cache *c, const char *key, const json_t *obj);
/* The committed state's text (a new reference), NULL when absent: what a
 * GET sends. A cold object is not parsed for it (nor kept warm). */
struct blob *cache_text(struct cache *c, const char *key);
/* Writes acknowledged to no one yet: handed to the store, not durable (or,
 * remote, not yet back through the watch). */
size_t cache_inflight(const struct cache *c);

/*
 * Objects are limited to etcd's default request size (--max-request-bytes,
 * 1.5 MiB) in their JSON encoding, whatever the store: a write beyond it is
 * ERR_TOOLARGE with etcd's "etcdserver: request is too large", which the
 * API server answers as upstream does (500).
 */
#define CACHE_MAX_OBJECT_BYTES (3u << 19)

int cache_create(struct cache *c, const char *key, json_t *obj, cache_done_fn done, void *arg);
int cache_update(struct cache *c, const char *key, json_t *obj, cache_done_fn done, void *arg);
int cache_delete(struct cache *c, const char *key, cache_done_fn done, void *arg);

/*
 * Watch keys under prefix from revision from_rev: events after it are
 * replayed at once (from the window), then delivered as they commit.
 * NULL and ERR_GONE when from_rev is older than the window.
 */
struct cache_watch *cache_watch(struct cache *c, const char *prefix, int64_t from_rev,
				cache_watch_fn fn, void *arg);
/*
 * The same, for a watcher that only cares about objects whose spec.nodeName
 * is node (a kubelet's pods): it is indexed, so an event costs nothing for
 * the watchers of other nodes. The caller still applies its own selectors.
 */
struct cache_watch *cache_watch_node(struct cache *c, const char *prefix, int64_t from_rev,
				     const char *node, cache_watch_fn fn, void *arg);
/*
 * The same, for a watcher of one object, key (a fieldSelector
 * metadata.name=...: a kubelet's Node, its CSR): indexed by key, so the
 * other objects' events cost it nothing.
 */
struct cache_watch *cache_watch_key(struct cache *c, const char *prefix, int64_t from_rev,
				    const char *key, cache_watch_fn fn, void *arg);
void cache_unwatch(struct cache_watch *w);

#endif
