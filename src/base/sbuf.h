/*
 * sbuf — a growable string buffer.
 *
 * Always NUL-terminated once something was added; allocation failure aborts
 * (as the rest of cube's allocation helpers do). sbuf_take hands the string
 * to the caller and leaves the buffer empty for reuse. Owned by whoever made
 * it; not thread-safe.
 */
#ifndef CUBE_BASE_SBUF_H
#define CUBE_BASE_SBUF_H

#include <stddef.h>

struct sbuf {
	char *s;
	size_t len, cap;
};

#define SBUF_INIT                                                                                  \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

void sbuf_addn(struct sbuf *b, const char *s, size_t n);
void sbuf_add(struct sbuf *b, const char *s);
void sbuf_addc(struct sbuf *b, char c);
void sbuf_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Go's %q of s for the ASCII range: what upstream prints around bad values. */
void sbuf_quote(struct sbuf *b, const char *s);
/* Cut back to len bytes (a mark taken from b->len). */
void sbuf_truncate(struct sbuf *b, size_t len);
/* The string (malloc'd, the caller's); "" when nothing was added. */
char *sbuf_take(struct sbuf *b);
void sbuf_free(struct sbuf *b);

#endif
