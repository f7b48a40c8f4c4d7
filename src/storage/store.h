/*
 * store — the durable key → (value, revision) map under the API server,
 * behind one interface with two backends.
 *
 * A local store (SQLite, sqlite.c) is written by one API server, whose
 * in-memory cache (storage/cache.h) is the one writer: it orders writes,
 * assigns each a revision from one global counter, and hands them here to
 * be made durable. store_write returns at once; `done` runs on the owner's
 * loop once the write is on disk (or failed). Writes queued while the disk
 * is busy are committed together in one transaction (group commit), so
 * durability costs one commit per batch, not per write; each store_write
 * sits in its own savepoint, so a write the database refuses (a
 * constraint, a full disk page) fails alone, not the writes that shared
 * its transaction. Completions run in submission order. WAL, one writer
 * connection on a worker thread, BEGIN IMMEDIATE, the revision counter
 * stored in the same transaction. synchronous=NORMAL survives a process
 * crash (an acknowledged write is in the WAL); STORE_SYNC_FULL also
 * survives power loss, at a cost.
 *
 * A remote store (etcd, etcd.c) is shared by several API servers: it
 * assigns the revisions (etcd's mod_revision), each write is a
 * compare-and-swap on the key's mod revision, and every server's cache
 * learns of every write, its own included, from store_watch — in revision
 * order, which is what keeps the servers' caches consistent.
 *
 * Ownership: store_write takes the ops array and its strings. Threads:
 * the owner's loop thread (the SQLite writer is a thread of its own).
 */
#ifndef CUBE_STORAGE_STORE_H
#define CUBE_STORAGE_STORE_H

#include "base/loop.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum store_op_type { STORE_PUT, STORE_DELETE };

struct store_op {
	enum store_op_type type;
	char *key;
	char *value; /* PUT only; JSON text */
	size_t len;
	int64_t rev;    /* local stores: the revision this write creates */
	int64_t expect; /* remote stores: the key's mod revision the write was
	                 * built on, 0 when it must be absent (compare-and-swap) */
};

enum store_sync { STORE_SYNC_NORMAL, STORE_SYNC_FULL };

struct store;

typedef void (*store_each_fn)(void *arg, const char *key, const char *value, size_t len,
			      int64_t mod_rev);
/*
 * err 0: durable, at revision rev (the last op's). A remote store answers
 * ERR_CONFLICT when a key was not at its op's expect: rev is then the
 * store's revision at the refusal, which the caller's view must reach
 * before it builds the write again.
 */
typedef void (*store_done_fn)(void *arg, int err, int64_t rev);

/* A remote store's changes, in revision order, each revision once. */
struct store_event {
	enum store_op_type type;
	const char *key;   /* NULL: a revision outside the API's keys (progress only) */
	const char *value; /* PUT: the JSON text */
	size_t len;
	int64_t rev;
};

struct store_watcher {
	void (*event)(void *arg, const struct store_event *ev);
	/* The history after the revision asked for is gone (compacted while
	 * the watch was away): load again, then watch from the new revision. */
	void (*reset)(void *arg);
	void *arg;
};

/* The backends behind one interface (sqlite.c, etcd.c). */
struct store_ops {
	int (*load)(struct store *s, store_each_fn each, void *arg, int64_t *rev);
	void (*write)(struct store *s, struct store_op *ops, size_t n, store_done_fn done,
		      void *arg);
	void (*stats)(struct store *s, uint64_t *writes, uint64_t *commits);
	void (*close)(struct store *s);
	/* Remote stores only (NULL otherwise). */
	void (*watch)(struct store *s, int64_t after, const struct store_watcher *w);
	void (*current_rev)(struct store *s, void (*cb)(void *arg, int err, int64_t rev),
			    void *arg);
};

struct store {
	const struct store_ops *ops;
};

/* Open (creating) the database at path; completions are posted to loop. */
struct store *store_sqlite_open(const char *path, enum store_sync sync, struct loop *loop);

/* An etcd v3 cluster (etcd.c), through its JSON gateway. */
struct store_etcd_opts {
	const char *servers;  /* --etcd-servers: "https://127.0.0.1:2379,..." */
	const char *prefix;   /* --etcd-prefix, default "/registry" */
	const char *cafile;   /* --etcd-cafile: trust for the servers */
	const char *certfile; /* --etcd-certfile, --etcd-keyfile: our client certificate */
	const char *keyfile;
	int64_t compaction_interval_ns; /* --etcd-compaction-interval (5m; 0: never) */
	int connect_timeout_s;          /* how long to wait for a first answer (60) */
};
struct store *store_etcd_open(const struct store_etcd_opts *o, struct loop *loop);

/* Every key in key order, and the store's revision. Call before writing. */
int store_load(struct store *s, store_each_fn each, void *arg, int64_t *rev);
void store_write(struct store *s, struct store_op *ops, size_t n, store_done_fn done, void *arg);
/* Writes committed so far, and commits (transactions) made: for metrics. */
void store_stats(struct store *s, uint64_t *writes, uint64_t *commits);
/* Waits for queued writes, then closes. NULL is a no-op. */
void store_close(struct store *s);

/*
 * A remote store assigns revisions and is shared with other API servers:
 * the cache hears of every write, its own included, through store_watch.
 */
bool store_remote(const struct store *s);
/* Events after revision `after`, until the store closes; a new call replaces it. */
void store_watch(struct store *s, int64_t after, const struct store_watcher *w);
/* The store's revision now (a quorum read): what a consistent read waits for. */
void store_current_rev(struct store *s, void (*cb)(void *arg, int err, int64_t rev), void *arg);

#endif
