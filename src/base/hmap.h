/*
 * hmap — a string-keyed hash map (open addressing, linear probing).
 *
 * Keys are copied and owned by the map; values are opaque pointers the
 * caller owns. Iteration order is unspecified. Not thread-safe: owned by one
 * thread (or guarded by its owner).
 */
#ifndef CUBE_BASE_HMAP_H
#define CUBE_BASE_HMAP_H

#include <stdbool.h>
#include <stddef.h>

struct hmap_slot {
	char *key; /* NULL = empty; HMAP_TOMB = deleted */
	void *value;
	size_t hash;
};

struct hmap {
	struct hmap_slot *slots;
	size_t cap, len, used; /* used counts tombstones too */
};

#define HMAP_INIT {NULL, 0, 0, 0}

void *hmap_get(const struct hmap *m, const char *key);
/* Insert or replace; returns the previous value (or NULL). */
void *hmap_put(struct hmap *m, const char *key, void *value);
/* Remove; returns the value removed (or NULL). */
void *hmap_del(struct hmap *m, const char *key);
size_t hmap_len(const struct hmap *m);
/* Iterate: for (size_t i = 0; hmap_next(m, &i, &k, &v);) ... */
bool hmap_next(const struct hmap *m, size_t *iter, const char **key, void **value);
void hmap_free(struct hmap *m); /* frees keys, not values */
/* hmap_free, each value first given to free_value (free, a destructor). */
void hmap_free_values(struct hmap *m, void (*free_value)(void *));

#endif
