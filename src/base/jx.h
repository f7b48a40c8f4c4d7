/*
 * jx — small helpers over jansson.
 *
 * Objects are jansson values; these helpers read and write them by dotted
 * path ("metadata.name", "status.conditions"), parse with a message that
 * names line and column, and dump compactly. Ownership follows jansson:
 * jx_get and the typed getters borrow; jx_set steals the value it is given;
 * jx_parse and jx_load_file return new references.
 *
 * Pure functions over the values given; the caller serialises access to a
 * value shared between threads (cached objects are immutable by convention).
 */
#ifndef CUBE_BASE_JX_H
#define CUBE_BASE_JX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Parse JSON text; NULL and ERR_PARSE ("line L column C: ...") on failure. */
json_t *jx_parse(const char *buf, size_t len);
/* The same for text jx_dump made: a string may hold a NUL (a YAML or
 * protobuf body can carry one), dumped as \u0000 and read back. */
json_t *jx_parse_dumped(const char *buf, size_t len);
json_t *jx_load_file(const char *path);

/* The value at a dotted path, or NULL. Borrowed. */
json_t *jx_get(const json_t *root, const char *path);
/* The string at path, or NULL when missing or not a string. Borrowed. */
const char *jx_str(const json_t *root, const char *path);
/* The integer at path, or `dflt` when missing or not an integer. */
int64_t jx_int(const json_t *root, const char *path, int64_t dflt);
bool jx_bool(const json_t *root, const char *path, bool dflt);
/*
 * Set the value at path, creating intermediate objects; steals `value`.
 * Returns 0, or ERR_INVALID when an intermediate exists and is not an object.
 */
int jx_set(json_t *root, const char *path, json_t *value);
int jx_set_str(json_t *root, const char *path, const char *s);

/* The i-th element of an array when it is a string, else NULL. Borrowed. */
const char *jx_array_str(const json_t *a, size_t i);
/* Sort a's elements in place; cmp compares two `json_t *const *`, as qsort. */
void jx_array_sort(json_t *a, int (*cmp)(const void *, const void *));
/* The comparator of arrays of strings (strcmp order). */
int jx_cmp_strings(const void *a, const void *b);
/* {"error": <formatted message>}, a new reference: a failed request's reply
 * (the supervisor's control words). */
json_t *jx_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* json_equal where a missing value (NULL) equals another missing one:
 * Go's == on two decoded values, nil included. */
bool jx_equal(const json_t *a, const json_t *b);

/* Remove the member at path (absent: nothing to do). */
void jx_del(json_t *root, const char *path);
/* A new object holding the values at these paths of obj, where they exist
 * (shared with obj, not copied): an informer's view of an object. */
json_t *jx_pick(const json_t *obj, const char *const *paths, size_t n);

/* The element of a conditions array whose "type" is `type`, or NULL. */
json_t *jx_condition_in(const json_t *conditions, const char *type);
/* The element of status.conditions (status: an object's "status") whose
 * "type" is `type`, or NULL. Borrowed: the condition lookup every
 * controller and the kubelet need. */
json_t *jx_condition(const json_t *status, const char *type);
/* Drop null members of objects, also inside arrays (jsonpatch's pruneNulls). */
void jx_prune_nulls(json_t *v);

/* Compact JSON with key order kept; malloc'd. */
char *jx_dump(const json_t *v);

/* A float64 as Go's fmt %v prints it: the shortest digits that read back,
 * in %e form ("1e+06", "1.5e-07") when the decimal exponent is below -4 or
 * at least 6 (strconv's 'g' with the shortest precision). Returns buf. */
char *jx_real_go(double d, char *buf, size_t n);
/* The same digits written out without an exponent ("1000000", "0.00001"):
 * Go's strconv 'f' with precision -1, the closest to a JSON literal as sent. */
char *jx_real_plain(double d, char *buf, size_t n);
/* Go's %v (and %+v) of a decoded JSON value held as map[string]interface{}:
 * "map[a:1 b:[x y]]" (keys sorted), strings bare, <nil> for null (or NULL),
 * floats as jx_real_go. malloc'd. */
char *jx_go_string(const json_t *v);

#endif
