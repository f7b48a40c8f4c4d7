/*
 * alloc — allocation that cannot fail: out of memory aborts (DESIGN §5),
 * so callers never carry a NULL check for it. Zero sizes allocate one byte,
 * so a result is never NULL.
 */
#ifndef CUBE_BASE_ALLOC_H
#define CUBE_BASE_ALLOC_H

#include <stdlib.h>
#include <string.h>

static inline void *alloc_check(void *p)
{
	if (!p)
		abort();
	return p;
}

static inline void *xmalloc(size_t n)
{
	return alloc_check(malloc(n ? n : 1));
}

static inline void *xcalloc(size_t n, size_t size)
{
	return alloc_check(calloc(n ? n : 1, size ? size : 1));
}

static inline void *xrealloc(void *p, size_t n)
{
	return alloc_check(realloc(p, n ? n : 1));
}

static inline char *xstrndup(const char *s, size_t n)
{
	return alloc_check(strndup(s, n));
}

static inline char *xstrdup(const char *s)
{
	return alloc_check(strdup(s));
}

/* n bytes of s and a NUL after them. */
static inline char *xmemdup(const void *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/*
 * Append a zeroed element to a vector struct { T *v; size_t n, cap; } and
 * return a pointer to it (the storage doubles as it grows).
 */
#define VEC_PUSH(vec)                                                                              \
	(((vec).n == (vec).cap                                                                     \
	      ? (void)((vec).cap = (vec).cap ? 2 * (vec).cap : 16,                                 \
	               (vec).v = xrealloc((vec).v, (vec).cap * sizeof(*(vec).v)))                  \
	      : (void)0),                                                                          \
	 memset(&(vec).v[(vec).n], 0, sizeof(*(vec).v)), &(vec).v[(vec).n++])

#endif
