#include "base/strv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void strv_take(struct strv *sv, char *s)
{
	if (sv->n + 1 >= sv->cap) {
		sv->cap = sv->cap ? sv->cap * 2 : 8;
		sv->v = realloc(sv->v, sv->cap * sizeof(*sv->v));
		if (!sv->v)
			abort();
	}
	sv->v[sv->n++] = s;
	sv->v[sv->n] = NULL;
}

void strv_push(struct strv *sv, const char *s)
{
	char *copy = strdup(s);
	if (!copy)
		abort();
	strv_take(sv, copy);
}

char *str_dup(const char *s)
{
	char *d;
	if (!s)
		return NULL;
	if (!(d = strdup(s)))
		abort();
	return d;
}

static char *str_vprintf(const char *fmt, va_list ap)
{
	char *s;
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	return s;
}

char *str_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	s = str_vprintf(fmt, ap);
	va_end(ap);
	return s;
}

void strv_pushf(struct strv *sv, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strv_take(sv, str_vprintf(fmt, ap));
	va_end(ap);
}

bool strv_has(const struct strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

void strv_push_unique(struct strv *sv, const char *s)
{
	if (!strv_has(sv, s))
		strv_push(sv, s);
}

bool strv_remove(struct strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++) {
		if (strcmp(sv->v[i], s))
			continue;
		free(sv->v[i]);
		memmove(&sv->v[i], &sv->v[i + 1], (sv->n - i - 1) * sizeof(char *));
		sv->v[--sv->n] = NULL;
		return true;
	}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort(struct strv *sv)
{
	if (sv->n > 1)
		qsort(sv->v, sv->n, sizeof(*sv->v), cmp_str);
}

char *strv_join(const struct strv *sv, const char *sep)
{
	size_t len = 1, seplen = strlen(sep);
	char *out, *p;

	for (size_t i = 0; i < sv->n; i++)
		len += strlen(sv->v[i]) + seplen;
	out = p = malloc(len);
	if (!out)
		abort();
	*p = '\0';
	for (size_t i = 0; i < sv->n; i++) {
		if (i)
			p = stpcpy(p, sep);
		p = stpcpy(p, sv->v[i]);
	}
	return out;
}

void strv_free(struct strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

size_t strlist_len(const char *const *list)
{
	size_t n = 0;
	while (list && list[n])
		n++;
	return n;
}
