/*
 * informer — a local, eventually consistent copy of a set of objects, kept
 * by list-then-watch, with handlers told of every change (client-go's
 * shared informer, single-threaded).
 *
 * Start lists the collection, replaces the store (telling handlers what was
 * added, changed or deleted since the last list), then watches from the
 * list's resourceVersion. A watch that ends is resumed from the last
 * resourceVersion seen; a 410 (as an ERROR event or a status) means relist.
 * Transport errors back off 1 s → 30 s. Handlers run after the store is
 * updated, on the loop, and must not block.
 *
 * Several consumers can share one informer (client-go's shared informer
 * factory): each adds its handlers before the start, and each set is told
 * of every change in the order they were added.
 *
 * Keys are "namespace/name", or "name" for cluster-scoped objects. Objects in
 * the store are shared and immutable: copy before changing one.
 *
 * A store may keep its objects as their compact text instead of a tree
 * (informer_keep_text), parsed again for each informer_read: for an object
 * held for long and read now and then, whose tree would be several times
 * its text (a kubelet's own Node: 2.1 KB of text, 15.7 KB as a tree).
 *
 * Ownership: the informer is the caller's; the rest client is borrowed and
 * must outlive it. Threads: the loop's.
 */
#ifndef CUBE_CLIENT_INFORMER_H
#define CUBE_CLIENT_INFORMER_H

#include "client/rest.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct informer_handlers {
	void (*on_add)(void *arg, json_t *obj);
	void (*on_update)(void *arg, json_t *old, json_t *obj);
	void (*on_delete)(void *arg, json_t *obj);
	void *arg;
};

struct informer;

/* path: the collection, e.g. "/api/v1/pods"; query: "fieldSelector=..." or NULL. */
struct informer *informer_new(struct loop *loop, struct rest_client *c, const char *path,
			      const char *query, const struct informer_handlers *h);
/*
 * An index: key_of(obj) names the bucket an object belongs to ("spec.nodeName"
 * of a pod), NULL or "" for none; informer_indexed lists a bucket without a
 * scan (client-go's indexers). Add indexes before informer_start; at most
 * INFORMER_MAX_INDEXES. Returns the index's number.
 */
#define INFORMER_MAX_INDEXES 4
int informer_add_index(struct informer *inf, const char *(*key_of)(const json_t *obj));
/* The objects whose index value is `value` (borrowed); *out malloc'd. */
size_t informer_indexed(const struct informer *inf, int index, const char *value, json_t ***out);

/* One more set of handlers (copied); add them before informer_start. */
void informer_add_handlers(struct informer *inf, const struct informer_handlers *h);
void informer_start(struct informer *inf);
/* The first list has arrived. */
bool informer_synced(const struct informer *inf);
/*
 * Keep the objects as text: call before informer_start, with no indexes.
 * Handlers are still told of changes with trees (parsed for the moment);
 * informer_get and informer_list, which lend the stored trees, abort.
 */
void informer_keep_text(struct informer *inf);
/*
 * What the store keeps of each object, and what handlers are told of
 * (client-go's SetTransform): transform(obj) returns a new reference to the
 * part of obj its consumer reads, keeping metadata.name, namespace and
 * resourceVersion. For a consumer that reads a few fields of many objects:
 * a hollow Node's tree is 12.7 KB, the scheduler's view of it 3.6 KB.
 * Call before informer_start.
 */
void informer_set_transform(struct informer *inf, json_t *(*transform)(const json_t *obj));
/* The object under key, borrowed, or NULL. */
json_t *informer_get(const struct informer *inf, const char *key);
/* The object under key, or NULL, from either kind of store: a reference the
 * caller releases (json_decref), shared and immutable as informer_get's
 * (a text store parses a new one each time). */
json_t *informer_read(const struct informer *inf, const char *key);
/* A text store's object under key as its stored text, borrowed until the
 * informer's next event, or NULL: to tell whether it changed without
 * parsing it. A tree store aborts. */
const char *informer_text(const struct informer *inf, const char *key);
/* Borrowed objects, in no particular order; *out malloc'd. */
size_t informer_list(const struct informer *inf, json_t ***out);
/* "ns/name" or "name" of an object (into buf). */
const char *informer_key(const json_t *obj, char *buf, size_t n);
void informer_free(struct informer *inf);

#endif
