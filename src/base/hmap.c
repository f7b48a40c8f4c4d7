#include "base/hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char tomb;
#define HMAP_TOMB (&tomb)

static size_t hash_str(const char *s)
{
	/* FNV-1a: short keys, good spread, no state. */
	uint64_t h = UINT64_C(1469598103934665603);
	while (*s)
		h = (h ^ (unsigned char)*s++) * UINT64_C(1099511628211);
	return (size_t)h;
}

static struct hmap_slot *find(const struct hmap *m, const char *key, size_t h)
{
	size_t mask = m->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct hmap_slot *s = &m->slots[i];
		if (!s->key)
			return s;
		if (s->key != HMAP_TOMB && s->hash == h && strcmp(s->key, key) == 0)
			return s;
	}
}

static void grow(struct hmap *m)
{
	struct hmap old = *m;
	/* Sized for what it holds (at most half full), not doubled blindly:
	 * the rehash is often there to drop tombstones, and a map that churns
	 * through few keys must not grow without bound. */
	m->cap = 4; /* an informer's store of one object, a bucket of one pod */
	while ((m->len + 1) * 2 >= m->cap)
		m->cap *= 2;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots)
		abort();
	m->used = m->len;
	for (size_t i = 0; i < old.cap; i++) {
		struct hmap_slot *s = &old.slots[i];
		if (s->key && s->key != HMAP_TOMB)
			*find(m, s->key, s->hash) = *s;
	}
	free(old.slots);
}

void *hmap_get(const struct hmap *m, const char *key)
{
	struct hmap_slot *s;
	if (!m->cap)
		return NULL;
	s = find(m, key, hash_str(key));
	return s->key ? s->value : NULL;
}

void *hmap_put(struct hmap *m, const char *key, void *value)
{
	size_t h = hash_str(key);
	struct hmap_slot *s;
	void *prev;

	if ((m->used + 1) * 4 >= m->cap * 3)
		grow(m);
	s = find(m, key, h);
	if (s->key) {
		prev = s->value;
		s->value = value;
		return prev;
	}
	if (!(s->key = strdup(key)))
		abort();
	s->value = value;
	s->hash = h;
	m->len++;
	m->used++;
	return NULL;
}

void *hmap_del(struct hmap *m, const char *key)
{
	struct hmap_slot *s;
	void *v;
	if (!m->cap)
		return NULL;
	s = find(m, key, hash_str(key));
	if (!s->key)
		return NULL;
	v = s->value;
	free(s->key);
	s->key = HMAP_TOMB;
	s->value = NULL;
	m->len--;
	/* A tombstone that ends a probe run is not needed: clear it, and the
	 * ones before it. A map that only churns (writes in flight, queues)
	 * keeps short runs instead of filling with tombstones until it
	 * rehashes, which made every lookup walk them. */
	size_t mask = m->cap - 1, i = (size_t)(s - m->slots);
	if (!m->slots[(i + 1) & mask].key) {
		while (m->slots[i].key == HMAP_TOMB) {
			m->slots[i].key = NULL;
			m->used--;
			i = (i - 1) & mask;
		}
	}
	return v;
}

size_t hmap_len(const struct hmap *m)
{
	return m->len;
}

bool hmap_next(const struct hmap *m, size_t *iter, const char **key, void **value)
{
	while (*iter < m->cap) {
		struct hmap_slot *s = &m->slots[(*iter)++];
		if (s->key && s->key != HMAP_TOMB) {
			*key = s->key;
			*value = s->value;
			return true;
		}
	}
	return false;
}

void hmap_free_values(struct hmap *m, void (*free_value)(void *))
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key && m->slots[i].key != HMAP_TOMB)
			free_value(m->slots[i].value);
	hmap_free(m);
}

void hmap_free(struct hmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key && m->slots[i].key != HMAP_TOMB)
			free(m->slots[i].key);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = m->used = 0;
}
