#include "controllers/keyed.h"

#include "controllers/internal.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/strv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kcall {
	struct kcall *prev, *next;
	struct ksync *s;
	struct rest_call *call;
	ksync_cb cb;
	void *arg;
	void (*arg_free)(void *); /* for arg if the call never answers */
};

struct ksync {
	struct ksync *prev, *next;
	struct keyed *k;
	char *key;
	int pending;
	bool in_sync; /* the sync function (or a continuation) is running */
	bool failed;
	char err[1024];
	ksync_fn then;
	void *data;
	void (*data_free)(void *);
	struct kcall *calls;
};

struct keyed {
	struct controller_manager *m;
	struct rest_client *rest; /* the controller's (cm_client) */
	struct workqueue *q;
	ksync_fn sync;
	void *ctl;
	char *error_fmt;
	struct ksync *running;
};

static void end(struct ksync *s)
{
	struct keyed *k = s->k;

	if (s->failed) {
		LOG_UNHANDLED(NULL, k->error_fmt, s->key, s->err);
		workqueue_retry(k->q, s->key);
	} else {
		workqueue_forget(k->q, s->key);
	}
	workqueue_done(k->q, s->key);
	if (s->prev)
		s->prev->next = s->next;
	else
		k->running = s->next;
	if (s->next)
		s->next->prev = s->prev;
	if (s->data_free)
		s->data_free(s->data);
	free(s->key);
	free(s);
}

/* Nothing pending: the continuation, or the end. */
static void settle(struct ksync *s)
{
	while (!s->pending && s->then) {
		ksync_fn next = s->then;
		s->then = NULL;
		s->in_sync = true;
		next(s->k->ctl, s);
		s->in_sync = false;
	}
	if (!s->pending)
		end(s);
}

#define SYNC_WAIT_NS (100 * NS_PER_MS)

static void process(void *arg, const char *key)
{
	struct keyed *k = arg;
	struct ksync *s;

	/* WaitForCacheSync: no decision on a cache that has not listed yet (a
	 * ReplicaSet synced before its pods are known would create them all
	 * again). */
	if (!cm_informers_synced(k->m)) {
		workqueue_add_after(k->q, key, SYNC_WAIT_NS);
		workqueue_done(k->q, key);
		return;
	}
	if (!(s = calloc(1, sizeof(*s))))
		abort();
	s->k = k;
	s->key = str_dup(key);
	s->next = k->running;
	if (k->running)
		k->running->prev = s;
	k->running = s;
	s->in_sync = true;
	k->sync(k->ctl, s);
	s->in_sync = false;
	settle(s);
}

static void on_answer(void *arg, int status, json_t *body, const char *err)
{
	struct kcall *c = arg;
	struct ksync *s = c->s;

	if (c->prev)
		c->prev->next = c->next;
	else
		s->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->in_sync = true;
	if (c->cb)
		c->cb(s, c->arg, status, body, err);
	s->in_sync = false;
	free(c);
	s->pending--;
	settle(s);
}

static struct kcall *call_start(struct ksync *s, const char *method, const char *path,
			       const char *ct, const json_t *body, ksync_cb cb, void *arg,
			       void (*arg_free)(void *));

void ksync_call(struct ksync *s, const char *method, const char *path, const char *ct,
		const json_t *body, ksync_cb cb, void *arg)
{
	call_start(s, method, path, ct, body, cb, arg, NULL);
}

void ksync_call_owned(struct ksync *s, const char *method, const char *path, const char *ct,
		      const json_t *body, ksync_cb cb, void *arg, void (*free_fn)(void *))
{
	call_start(s, method, path, ct, body, cb, arg, free_fn);
}

static struct kcall *call_start(struct ksync *s, const char *method, const char *path,
			       const char *ct, const json_t *body, ksync_cb cb, void *arg,
			       void (*arg_free)(void *))
{
	struct kcall *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->s = s;
	c->cb = cb;
	c->arg = arg;
	c->arg_free = arg_free;
	c->next = s->calls;
	if (s->calls)
		s->calls->prev = c;
	s->calls = c;
	s->pending++;
	c->call = rest_do_ct(s->k->rest, method, path, ct, body, on_answer, c);
	return c;
}

struct status_update {
	char *path;
	json_t *status;
	bool retried;
};

static void status_update_free(void *arg)
{
	struct status_update *u = arg;
	free(u->path);
	json_decref(u->status);
	free(u);
}

static void on_status_put(struct ksync *s, void *arg, int status, json_t *body, const char *err);

static void on_status_get(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct status_update *u = arg;
	char why[512];
	json_t *next;

	if (status != 200) {
		if (status != 404)
			ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
		status_update_free(u);
		return;
	}
	next = json_deep_copy(body);
	json_object_set(next, "status", u->status);
	ksync_call_owned(s, "PUT", u->path, NULL, next, on_status_put, u, status_update_free);
	json_decref(next);
}

static void on_status_put(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct status_update *u = arg;
	char why[512];

	if (status == 409 && !u->retried) {
		u->retried = true;
		ksync_call_owned(s, "GET", u->path, NULL, NULL, on_status_get, u, status_update_free);
		return;
	}
	if (status != 200 && status != 404)
		ksync_fail(s, "%s", api_error(why, sizeof(why), status, body, err));
	status_update_free(u);
}

void ksync_update_status(struct ksync *s, const char *path, const json_t *obj)
{
	struct status_update *u = calloc(1, sizeof(*u));
	if (!u)
		abort();
	u->path = str_dup(path);
	u->status = json_incref(json_object_get(obj, "status"));
	ksync_call_owned(s, "PUT", path, NULL, obj, on_status_put, u, status_update_free);
}

const char *ksync_key(const struct ksync *s)
{
	return s->key;
}

void ksync_set_data(struct ksync *s, void *data, void (*free_fn)(void *))
{
	if (s->data_free)
		s->data_free(s->data);
	s->data = data;
	s->data_free = free_fn;
}

void *ksync_data(const struct ksync *s)
{
	return s->data;
}

void ksync_then(struct ksync *s, ksync_fn next)
{
	s->then = next;
}

void ksync_fail(struct ksync *s, const char *fmt, ...)
{
	va_list ap;
	if (s->failed)
		return; /* the first error is the one reported */
	s->failed = true;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
}

void ksync_requeue_after(struct ksync *s, int64_t delay_ns)
{
	workqueue_add_after(s->k->q, s->key, delay_ns);
}

struct keyed *keyed_new(struct controller_manager *m, const char *name, struct rest_client *rest,
			int workers, ksync_fn sync, void *ctl, const char *error_fmt)
{
	struct keyed *k = calloc(1, sizeof(*k));
	if (!k)
		abort();
	k->m = m;
	k->rest = rest;
	k->sync = sync;
	k->ctl = ctl;
	k->error_fmt = str_dup(error_fmt);
	k->q = workqueue_new(m->loop, workers, process, k);
	workqueue_instrument(k->q, m->metrics, name);
	return k;
}

void keyed_add(struct keyed *k, const char *key)
{
	if (k && k->q)
		workqueue_add(k->q, key);
}

void keyed_add_after(struct keyed *k, const char *key, int64_t delay_ns)
{
	if (k && k->q)
		workqueue_add_after(k->q, key, delay_ns);
}

void keyed_stop(struct keyed *k)
{
	if (!k)
		return;
	while (k->running) {
		struct ksync *s = k->running;
		while (s->calls) {
			struct kcall *c = s->calls;
			s->calls = c->next;
			rest_cancel(c->call);
			if (c->arg_free)
				c->arg_free(c->arg);
			free(c);
		}
		k->running = s->next;
		if (s->data_free)
			s->data_free(s->data);
		free(s->key);
		free(s);
	}
	workqueue_free(k->q);
	k->q = NULL;
}

void keyed_free(struct keyed *k)
{
	if (!k)
		return;
	keyed_stop(k);
	free(k->error_fmt);
	free(k);
}
