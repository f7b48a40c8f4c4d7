#include "storage/store.h"

/* The interface's calls: each backend's own, through its table. */

int store_load(struct store *s, store_each_fn each, void *arg, int64_t *rev)
{
	return s->ops->load(s, each, arg, rev);
}

void store_write(struct store *s, struct store_op *ops, size_t n, store_done_fn done, void *arg)
{
	s->ops->write(s, ops, n, done, arg);
}

void store_stats(struct store *s, uint64_t *writes, uint64_t *commits)
{
	s->ops->stats(s, writes, commits);
}

void store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

bool store_remote(const struct store *s)
{
	return s && s->ops->watch;
}

void store_watch(struct store *s, int64_t after, const struct store_watcher *w)
{
	s->ops->watch(s, after, w);
}

void store_current_rev(struct store *s, void (*cb)(void *arg, int err, int64_t rev), void *arg)
{
	s->ops->current_rev(s, cb, arg);
}
