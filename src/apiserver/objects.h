/*
 * The object work the handlers share: reading bodies, stamping metadata,
 * writing through the cache, deleting (gracefully, with finalizers and
 * dependents). Internal to src/apiserver; loop thread only.
 */
#ifndef CUBE_APISERVER_OBJECTS_H
#define CUBE_APISERVER_OBJECTS_H

#include "apiserver/internal.h"

#include "api/validation.h"
#include "api/selector.h"

/* The request body as an object (JSON, YAML or protobuf); NULL after a
 * reply has been sent (400/413/415). */
json_t *body_object(struct req *r);
/* The raw body; NULL after a 413. */
char *body_bytes(struct req *r, size_t *len);

/* Reply with obj, as JSON or a one-row Table when asked. Steals obj. */
void reply_object(struct req *r, int code, json_t *obj);
/* obj, an object of the cache, as JSON: the text the cache made of it
 * once (cache_json); a Table when the client asked for one. */
void reply_cached(struct req *r, int code, const json_t *obj);
/* 500 InternalError "Internal error occurred: <detail>": a write the store
 * failed, as upstream answers a storage error it has no mapping for. */
void reply_storage_error(struct req *r, const char *detail);
/* 409 Conflict with upstream's "the object has been modified" text. */
void reply_conflict(struct req *r);
/* A write lost to another API server's on a shared store: r served again. */
bool retry_lost_write(struct req *r, int err);
/* 422 from collected validation errors. */
void reply_invalid(struct req *r, struct validation *v, const char *kind, const char *name);

/* Write obj (stolen) as the new state of key and reply `code` with it once
 * durable; write_and_answer replies `answer` (stolen) instead. */
void write_and_reply(struct req *r, const char *key, json_t *obj, bool create, int code);
void write_and_answer(struct req *r, const char *key, json_t *obj, bool create, int code,
		      json_t *answer);

/* labelSelector and fieldSelector of a list or watch. */
struct selectors {
	struct label_selector *labels;
	struct field_selector *fields;
};
int parse_selectors(struct req *r, struct selectors *sel); /* 0, or a 400 sent */
void free_selectors(struct selectors *sel);
bool selectors_match(const struct selectors *sel, const json_t *obj);
/* The one object a list or watch can see, when its field selector names it
 * (metadata.name=X, in one namespace for a namespaced kind): its key
 * (malloc'd), so it is looked up, not found among all; else NULL. */
char *selectors_key(const struct req *r, const struct selectors *sel);

/* The scale subresource, and the autoscaling/v1 Scale of a workload. */
bool is_scale(const struct req *r);
json_t *scale_of(const json_t *obj);

/* read.c: GET and LIST with upstream's resourceVersion semantics (see there). */
void handle_get(struct req *r);
void handle_list(struct req *r);
/* A list's or a watch's ListOptions as upstream validates them: 0, or the
 * 422 has been sent. */
int check_list_watch_options(struct req *r, bool watch);
/* A resourceVersion parameter: 0 for "" and "0"; else 0, or a 400 sent. */
int rv_parse(struct req *r, const char *s, int64_t *out);
/* 504 "Timeout: Too large resource version: rv, current: current". */
void reply_too_large(struct req *r, int64_t rv, int64_t current, int retry_s);
/* Requests waiting for a revision: run those it reached; fail them all. */
void rv_waits_committed(struct apiserver *s);
void rv_waits_cancel(struct apiserver *s);

/* DELETE of r->name, with options from the body and the query. */
void handle_delete(struct req *r);
void handle_deletecollection(struct req *r);
void handle_eviction(struct req *r);

/* The garbage collector's finalizers (gc.c acts on them). */
#define FINALIZER_ORPHAN "orphan"
#define FINALIZER_FOREGROUND "foregroundDeletion"

/* Is name among obj's metadata.finalizers? */
bool has_finalizer(const json_t *obj, const char *name);

/* Delete an object without a request (GC, namespace teardown, finalizers
 * done): graceful for bound pods unless grace is 0. */
void delete_internal(struct apiserver *s, const char *key, int64_t grace_s, const char *policy);
/* The same, telling done (with the write's error) once durable; false when
 * nothing was written (absent, already terminating, or refused). */
bool delete_internal_then(struct apiserver *s, const char *key, int64_t grace_s,
			  const char *policy, cache_done_fn done, void *arg);

/* The served resource of obj's apiVersion and kind, or NULL. */
const struct resource *resource_of(const json_t *obj);

char *new_uid(void);

#endif
