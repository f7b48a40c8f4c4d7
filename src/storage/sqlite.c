#include "storage/store.h"

#include "base/err.h"
#include "base/log.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct batch {
	struct store_op *ops;
	size_t n;
	store_done_fn done;
	void *arg;
	int err;
	char msg[256]; /* the failure's text: err_msg() is per thread */
	struct batch *next;
};

/* The writer's transaction control, prepared once: compiling these texts
 * again for every commit was most of a lone write's cost (a Lease PUT a
 * node every 10 s commits alone, four statements around one row). */
enum txn { TXN_BEGIN, TXN_COMMIT, TXN_ROLLBACK, TXN_SAVEPOINT, TXN_RELEASE, TXN_ROLLBACK_TO, TXN_N };

static const char *const txn_sql[TXN_N] = {
	[TXN_BEGIN] = "BEGIN IMMEDIATE",      [TXN_COMMIT] = "COMMIT",
	[TXN_ROLLBACK] = "ROLLBACK",          [TXN_SAVEPOINT] = "SAVEPOINT batch",
	[TXN_RELEASE] = "RELEASE batch",      [TXN_ROLLBACK_TO] = "ROLLBACK TO batch",
};

struct sqlite_store {
	struct store base;
	sqlite3 *db;
	sqlite3_stmt *put, *del, *setrev;
	sqlite3_stmt *txn[TXN_N];
	struct loop *loop;
	pthread_t writer;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	struct batch *head, **tail; /* queued for the writer */
	bool stopping, busy;
	atomic_ullong writes, commits;
};

static int sql_err(sqlite3 *db, const char *what)
{
	return err_set(ERR_IO, "sqlite %s: %s", what, sqlite3_errmsg(db));
}

static int exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		int r = err_set(ERR_IO, "sqlite: %s: %s", sql, msg ? msg : "?");
		sqlite3_free(msg);
		return r;
	}
	return 0;
}

static int txn(struct sqlite_store *s, enum txn t)
{
	int r = 0;

	if (sqlite3_step(s->txn[t]) != SQLITE_DONE)
		r = err_set(ERR_IO, "sqlite: %s: %s", txn_sql[t], sqlite3_errmsg(s->db));
	sqlite3_reset(s->txn[t]);
	return r;
}

static void free_batch(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->ops[i].key);
		free(b->ops[i].value);
	}
	free(b->ops);
	free(b);
}

/* Runs on the loop: the batch is durable (or failed). */
static void complete(void *arg)
{
	struct batch *b = arg;
	if (b->err)
		err_set(b->err, "%s", b->msg);
	b->done(b->arg, b->err, b->n ? b->ops[b->n - 1].rev : 0);
	free_batch(b);
}

static int apply_op(struct sqlite_store *s, const struct store_op *op)
{
	sqlite3_stmt *st = op->type == STORE_PUT ? s->put : s->del;
	int rc;

	sqlite3_bind_text(st, 1, op->key, -1, SQLITE_STATIC);
	if (op->type == STORE_PUT) {
		sqlite3_bind_blob(st, 2, op->value, (int)op->len, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, op->rev);
	}
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : sql_err(s->db, "write");
}

/*
 * One transaction for every batch queued since the last commit; each batch
 * inside its own savepoint, so that one refused write (a constraint, a full
 * page) fails alone and not the writes that happened to share its commit.
 * A batch's err and msg say how it ended; the result is the commit's own.
 */
static int commit_all(struct sqlite_store *s, struct batch *list)
{
	int64_t rev = 0;
	int r = txn(s, TXN_BEGIN);

	for (struct batch *b = list; b; b = b->next) {
		int64_t brev = 0;
		b->err = r;
		if (r)
			continue;
		if ((b->err = txn(s, TXN_SAVEPOINT)) == 0)
			for (size_t i = 0; b->err == 0 && i < b->n; i++) {
				b->err = apply_op(s, &b->ops[i]);
				if (b->ops[i].rev > brev)
					brev = b->ops[i].rev;
			}
		if (b->err) {
			snprintf(b->msg, sizeof(b->msg), "%s", err_msg());
			LOG_ERROR("storage write failed: %s", b->msg);
			txn(s, TXN_ROLLBACK_TO);
		} else if (brev > rev) {
			rev = brev;
		}
		txn(s, TXN_RELEASE);
	}
	if (r == 0 && rev) {
		sqlite3_bind_int64(s->setrev, 1, rev);
		if (sqlite3_step(s->setrev) != SQLITE_DONE)
			r = sql_err(s->db, "revision");
		sqlite3_reset(s->setrev);
	}
	if (r == 0)
		r = txn(s, TXN_COMMIT);
	if (r < 0) {
		LOG_ERROR("storage commit failed: %s", err_msg());
		txn(s, TXN_ROLLBACK);
	}
	return r;
}

static void *writer_main(void *arg)
{
	struct sqlite_store *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct batch *list, *b, *next;
		char commit_msg[256];
		uint64_t nops = 0;
		int r;

		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->wake, &s->lock);
		if (!s->head)
			break;
		list = s->head;
		s->head = NULL;
		s->tail = &s->head;
		s->busy = true;
		pthread_mutex_unlock(&s->lock);

		r = commit_all(s, list);
		if (r)
			snprintf(commit_msg, sizeof(commit_msg), "%s", err_msg());
		for (b = list; b; b = next) {
			next = b->next;
			if (r) { /* the commit failed: every batch in it did */
				b->err = r;
				snprintf(b->msg, sizeof(b->msg), "%s", commit_msg);
			}
			if (!b->err)
				nops += b->n;
			loop_defer(s->loop, complete, b);
		}
		atomic_fetch_add(&s->writes, nops);
		atomic_fetch_add(&s->commits, 1);

		pthread_mutex_lock(&s->lock);
		s->busy = false;
		pthread_cond_broadcast(&s->idle);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static int prepare(struct sqlite_store *s)
{
	static const char schema[] =
		"CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, "
		"mod_rev INTEGER NOT NULL) WITHOUT ROWID;"
		"CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), "
		"rev INTEGER NOT NULL);"
		"INSERT OR IGNORE INTO meta (id, rev) VALUES (1, 0);";
	int r = exec(s->db, schema);

	if (r == 0 && (sqlite3_prepare_v2(s->db,
					  "INSERT INTO kv (key, value, mod_rev) VALUES (?1, ?2, ?3) "
					  "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
					  "mod_rev = excluded.mod_rev",
					  -1, &s->put, NULL) != SQLITE_OK ||
		       sqlite3_prepare_v2(s->db, "DELETE FROM kv WHERE key = ?1", -1, &s->del,
					  NULL) != SQLITE_OK ||
		       sqlite3_prepare_v2(s->db, "UPDATE meta SET rev = max(rev, ?1) WHERE id = 1",
					  -1, &s->setrev, NULL) != SQLITE_OK))
		r = sql_err(s->db, "prepare");
	for (int t = 0; r == 0 && t < TXN_N; t++)
		if (sqlite3_prepare_v2(s->db, txn_sql[t], -1, &s->txn[t], NULL) != SQLITE_OK)
			r = sql_err(s->db, "prepare");
	return r;
}

static void sqlite_close(struct store *st_);
static const struct store_ops sqlite_ops;

struct store *store_sqlite_open(const char *path, enum store_sync sync, struct loop *loop)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	int r;


	if (!s)
		abort();
	s->base.ops = &sqlite_ops;
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
						  SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		err_set(ERR_IO, "open %s: %s", path, sqlite3_errmsg(s->db));
		sqlite3_close(s->db);
		free(s);
		return NULL;
	}
	sqlite3_busy_timeout(s->db, 5000);
	r = exec(s->db, "PRAGMA journal_mode=WAL");
	if (r == 0)
		r = exec(s->db, sync == STORE_SYNC_FULL ? "PRAGMA synchronous=FULL"
							: "PRAGMA synchronous=NORMAL");
	/* Keep the WAL from growing without bound between checkpoints. */
	if (r == 0)
		r = exec(s->db, "PRAGMA journal_size_limit=67108864");
	if (r == 0)
		r = prepare(s);
	if (r < 0) {
		err_wrap(r, "%s", path);
		sqlite_close(&s->base);
		return NULL;
	}
	s->loop = loop;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	pthread_cond_init(&s->idle, NULL);
	s->tail = &s->head;
	pthread_create(&s->writer, NULL, writer_main, s);
	pthread_setname_np(s->writer, "sqlite-writer");
	return &s->base;
}

static int sqlite_load(struct store *st_, store_each_fn each, void *arg, int64_t *rev)
{
	struct sqlite_store *s = (struct sqlite_store *)st_;
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT rev FROM meta WHERE id = 1", -1, &st, NULL) !=
	    SQLITE_OK)
		return sql_err(s->db, "load");
	*rev = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(s->db, "SELECT key, value, mod_rev FROM kv ORDER BY key", -1, &st,
			       NULL) != SQLITE_OK)
		return sql_err(s->db, "load");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		each(arg, (const char *)sqlite3_column_text(st, 0),
		     (const char *)sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
		     sqlite3_column_int64(st, 2));
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : sql_err(s->db, "load");
}

static void sqlite_write(struct store *st_, struct store_op *ops, size_t n, store_done_fn done,
			 void *arg)
{
	struct sqlite_store *s = (struct sqlite_store *)st_;
	struct batch *b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	b->ops = ops;
	b->n = n;
	b->done = done;
	b->arg = arg;
	pthread_mutex_lock(&s->lock);
	*s->tail = b;
	s->tail = &b->next;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

static void sqlite_stats(struct store *st_, uint64_t *writes, uint64_t *commits)
{
	struct sqlite_store *s = (struct sqlite_store *)st_;
	*writes = atomic_load(&s->writes);
	*commits = atomic_load(&s->commits);
}

static void sqlite_close(struct store *st_)
{
	struct sqlite_store *s = (struct sqlite_store *)st_;
	if (!s)
		return;
	if (s->loop) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->writer, NULL);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->wake);
		pthread_cond_destroy(&s->idle);
	}
	sqlite3_finalize(s->put);
	sqlite3_finalize(s->del);
	sqlite3_finalize(s->setrev);
	for (int t = 0; t < TXN_N; t++)
		sqlite3_finalize(s->txn[t]);
	sqlite3_close(s->db);
	free(s);
}

static const struct store_ops sqlite_ops = {
	.load = sqlite_load,
	.write = sqlite_write,
	.stats = sqlite_stats,
	.close = sqlite_close,
};
