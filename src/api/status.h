/*
 * status — Kubernetes Status objects, the body of every API error.
 *
 *   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
 *    "message":"pods \"nope\" not found","reason":"NotFound",
 *    "details":{"name":"nope","kind":"pods"},"code":404}
 *
 * The code and reason come from the error table (base/err.h), so a failure
 * anywhere below maps to the right HTTP status without a second table.
 *
 * Ownership: functions return new references. Any thread.
 */
#ifndef CUBE_API_STATUS_H
#define CUBE_API_STATUS_H

#include <jansson.h>

/* A Failure Status for err (code from base/err.h) with message. group may be
 * "" for the core group; name/kind may be NULL (no details). */
json_t *status_failure(int err, const char *message, const char *group, const char *kind,
		       const char *name);
/* A Success Status (as DELETE and eviction answer), with optional details. */
json_t *status_success(int http_code, const char *group, const char *kind, const char *name,
		       const char *uid);
/* Append a cause {reason, message, field} to a Status's details (422s). */
void status_add_cause(json_t *status, const char *reason, const char *message,
		      const char *field);

#endif
