/*
 * store — the durable key → (value, revision) map under the API server.
 *
 * The API server's in-memory cache (storage/cache.h) is the one writer: it
 * orders writes, assigns each a revision from one global counter, and hands
 * them here to be made durable. store_write returns at once; `done` runs on
 * the owner's loop once the write is on disk (or failed). Writes queued
 * while the disk is busy are committed together in one transaction (group
 * commit), so durability costs one commit per batch, not per write; each
 * store_write sits in its own savepoint, so a write the database refuses
 * (a constraint, a full disk page) fails alone, not the writes that shared
 * its transaction. Completions run in submission order.
 *
 * The SQLite backend: WAL, one writer connection on a worker thread,
 * BEGIN IMMEDIATE, the revision counter stored in the same transaction.
 * synchronous=NORMAL survives a process crash (an acknowledged write is in
 * the WAL); STORE_SYNC_FULL also survives power loss, at a cost.
 *
 * Ownership: store_write takes the ops array and its strings. Threads:
 * store_open/load/write/close on the owner's loop thread.
 */
#ifndef CUBE_STORAGE_STORE_H
#define CUBE_STORAGE_STORE_H

#include "base/loop.h"

#include <stddef.h>
#include <stdint.h>

enum store_op_type { STORE_PUT, STORE_DELETE };

struct store_op {
	enum store_op_type type;
	char *key;
	char *value; /* PUT only; JSON text */
	size_t len;
	int64_t rev; /* the revision this write creates */
};

enum store_sync { STORE_SYNC_NORMAL, STORE_SYNC_FULL };

struct store;

typedef void (*store_each_fn)(void *arg, const char *key, const char *value, size_t len,
			      int64_t mod_rev);
typedef void (*store_done_fn)(void *arg, int err);

/* Open (creating) the database at path; completions are posted to loop. */
struct store *store_sqlite_open(const char *path, enum store_sync sync, struct loop *loop);
/* Every key in key order, and the store's revision. Call before writing. */
int store_load(struct store *s, store_each_fn each, void *arg, int64_t *rev);
void store_write(struct store *s, struct store_op *ops, size_t n, store_done_fn done, void *arg);
/* Writes committed so far, and commits (transactions) made: for metrics. */
void store_stats(struct store *s, uint64_t *writes, uint64_t *commits);
/* Waits for queued writes, then closes. NULL is a no-op. */
void store_close(struct store *s);

#endif
