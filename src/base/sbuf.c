#include "base/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(struct sbuf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	b->cap = (b->len + extra + 1) * 2;
	if (!(b->s = realloc(b->s, b->cap)))
		abort();
}

void sbuf_addn(struct sbuf *b, const char *s, size_t n)
{
	reserve(b, n);
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void sbuf_add(struct sbuf *b, const char *s)
{
	sbuf_addn(b, s, strlen(s));
}

void sbuf_addc(struct sbuf *b, char c)
{
	sbuf_addn(b, &c, 1);
}

void sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sbuf_quote(struct sbuf *b, const char *s)
{
	sbuf_addc(b, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			sbuf_add(b, "\\\"");
			break;
		case '\\':
			sbuf_add(b, "\\\\");
			break;
		case '\n':
			sbuf_add(b, "\\n");
			break;
		case '\r':
			sbuf_add(b, "\\r");
			break;
		case '\t':
			sbuf_add(b, "\\t");
			break;
		case '\a':
			sbuf_add(b, "\\a");
			break;
		case '\b':
			sbuf_add(b, "\\b");
			break;
		case '\f':
			sbuf_add(b, "\\f");
			break;
		case '\v':
			sbuf_add(b, "\\v");
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				sbuf_addf(b, "\\x%02x", *p);
			else
				sbuf_addc(b, (char)*p);
		}
	}
	sbuf_addc(b, '"');
}

void sbuf_truncate(struct sbuf *b, size_t len)
{
	if (len < b->len) {
		b->len = len;
		b->s[len] = '\0';
	}
}

char *sbuf_take(struct sbuf *b)
{
	char *s = b->s;

	if (!s && !(s = strdup("")))
		abort();
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

void sbuf_free(struct sbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}
