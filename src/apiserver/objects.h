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
/* 409 Conflict with upstream's "the object has been modified" text. */
void reply_conflict(struct req *r);
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

/* The served resource of obj's apiVersion and kind, or NULL. */
const struct resource *resource_of(const json_t *obj);

char *new_uid(void);

#endif
