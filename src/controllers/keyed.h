/*
 * keyed — the shape every workload controller has (issue 8, Deliver 6):
 * informer handlers enqueue keys, a work queue hands each key to the
 * controller's sync(key) — never the same key twice at once — and a sync
 * that fails is retried with the queue's backoff (5 ms doubling to 1000 s),
 * one that succeeds forgets its failures.
 *
 * A sync is asynchronous: it issues API calls with ksync_call and returns;
 * each call's callback runs when its answer comes; when none is left the
 * sync's continuation (ksync_then) runs if one was set — it may issue more
 * calls, e.g. the next slow-start batch — and otherwise the sync ends.
 * ksync_fail marks it failed: the message is logged as upstream's
 * HandleError line ("<fmt> with the key and the message") and the key is
 * retried.
 *
 * No key is synced before every informer of the manager has listed once
 * (upstream's WaitForCacheSync): until then keys wait 100 ms at a time.
 *
 * Ownership: the controller owns its keyed; keyed_stop cancels every call
 * in flight (call it before the rest client goes), keyed_free frees.
 * Threads: the loop's.
 */
#ifndef CUBE_CONTROLLERS_KEYED_H
#define CUBE_CONTROLLERS_KEYED_H

#include "client/rest.h"

#include <jansson.h>
#include <stdint.h>

struct controller_manager;
struct keyed;
struct ksync;

typedef void (*ksync_fn)(void *ctl, struct ksync *s);
typedef void (*ksync_cb)(struct ksync *s, void *arg, int status, json_t *body, const char *err);

/* Requests go through rest (the controller's client, cm_client);
 * error_fmt: printf format with two %s (key, message), upstream's wording;
 * name: the work queue's in the workqueue_* metrics (upstream's). */
struct keyed *keyed_new(struct controller_manager *m, const char *name, struct rest_client *rest,
			int workers, ksync_fn sync, void *ctl, const char *error_fmt);
void keyed_add(struct keyed *k, const char *key);
void keyed_add_after(struct keyed *k, const char *key, int64_t delay_ns);
void keyed_stop(struct keyed *k);
void keyed_free(struct keyed *k);

const char *ksync_key(const struct ksync *s);
/* A value the sync keeps between its steps; freed with free_fn at the end. */
void ksync_set_data(struct ksync *s, void *data, void (*free_fn)(void *));
void *ksync_data(const struct ksync *s);
void ksync_call(struct ksync *s, const char *method, const char *path, const char *content_type,
		const json_t *body, ksync_cb cb, void *arg);
/* As ksync_call, for an arg the callback frees: free_fn(arg) runs instead
 * if the call is cancelled at shutdown. */
void ksync_call_owned(struct ksync *s, const char *method, const char *path,
		      const char *content_type, const json_t *body, ksync_cb cb, void *arg,
		      void (*free_fn)(void *));
void ksync_then(struct ksync *s, ksync_fn next);
/* PUT obj (which carries the new status) to path (".../<name>/status"); on
 * a conflict GET the latest object once and put the status on it again, as
 * upstream's status updates retry. A failure fails the sync. */
void ksync_update_status(struct ksync *s, const char *path, const json_t *obj);
void ksync_fail(struct ksync *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The key again after delay (an expected change, e.g. minReadySeconds). */
void ksync_requeue_after(struct ksync *s, int64_t delay_ns);

#endif
