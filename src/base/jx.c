#include "base/jx.h"

#include "base/err.h"
#include "base/sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

static json_t *parse(const char *buf, size_t len, size_t flags)
{
	json_error_t e;
	json_t *v = json_loadb(buf, len, JSON_DECODE_ANY | flags, &e);
	if (!v)
		err_set(ERR_PARSE, "line %d column %d: %s", e.line, e.column, e.text);
	return v;
}

json_t *jx_parse(const char *buf, size_t len)
{
	return parse(buf, len, 0);
}

json_t *jx_parse_dumped(const char *buf, size_t len)
{
	return parse(buf, len, JSON_ALLOW_NUL);
}

json_t *jx_load_file(const char *path)
{
	json_error_t e;
	json_t *v = json_load_file(path, JSON_DECODE_ANY, &e);
	if (!v)
		err_set(ERR_PARSE, "%s: line %d column %d: %s", path, e.line, e.column, e.text);
	return v;
}

/* Walks one segment of a dotted path; *end is set past the segment. */
static json_t *step(const json_t *v, const char *seg, size_t n)
{
	char key[256];
	if (!json_is_object(v) || n >= sizeof(key))
		return NULL;
	memcpy(key, seg, n);
	key[n] = '\0';
	return json_object_get(v, key);
}

json_t *jx_get(const json_t *root, const char *path)
{
	const json_t *v = root;
	const char *p = path;

	while (v && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		v = step(v, p, n);
		p += n + (dot ? 1 : 0);
	}
	return (json_t *)v;
}

const char *jx_str(const json_t *root, const char *path)
{
	return json_string_value(jx_get(root, path));
}

const char *jx_array_str(const json_t *a, size_t i)
{
	return json_string_value(json_array_get(a, i));
}

void jx_array_sort(json_t *a, int (*cmp)(const void *, const void *))
{
	size_t n = json_array_size(a);
	json_t **v;

	if (n < 2)
		return;
	if (!(v = malloc(n * sizeof(*v))))
		abort();
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(a, i));
	qsort(v, n, sizeof(*v), cmp);
	json_array_clear(a);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, v[i]);
	free(v);
}

int jx_cmp_strings(const void *a, const void *b)
{
	const char *x = json_string_value(*(json_t *const *)a);
	const char *y = json_string_value(*(json_t *const *)b);
	return strcmp(x ? x : "", y ? y : "");
}

json_t *jx_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s}", "error", msg);
}

int64_t jx_int(const json_t *root, const char *path, int64_t dflt)
{
	json_t *v = jx_get(root, path);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

bool jx_bool(const json_t *root, const char *path, bool dflt)
{
	json_t *v = jx_get(root, path);
	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

int jx_set(json_t *root, const char *path, json_t *value)
{
	json_t *v = root;
	const char *p = path;

	for (;;) {
		const char *dot = strchr(p, '.');
		char key[256];
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		json_t *next;

		if (!json_is_object(v) || n >= sizeof(key)) {
			json_decref(value);
			return err_set(ERR_INVALID, "cannot set %s: not an object", path);
		}
		memcpy(key, p, n);
		key[n] = '\0';
		if (!dot)
			return json_object_set_new(v, key, value) ? ERR_INTERNAL : 0;
		next = json_object_get(v, key);
		if (!next) {
			next = json_object();
			json_object_set_new(v, key, next);
		}
		v = next;
		p = dot + 1;
	}
}

int jx_set_str(json_t *root, const char *path, const char *s)
{
	return jx_set(root, path, json_string(s));
}

char *jx_dump(const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		abort();
	return s;
}

json_t *jx_condition_in(const json_t *conditions, const char *type)
{
	json_t *c;
	size_t i;

	json_array_foreach(conditions, i, c)
	{
		const char *t = json_string_value(json_object_get(c, "type"));
		if (t && !strcmp(t, type))
			return c;
	}
	return NULL;
}

json_t *jx_condition(const json_t *status, const char *type)
{
	return jx_condition_in(json_object_get(status, "conditions"), type);
}

bool jx_equal(const json_t *a, const json_t *b)
{
	if (!a || !b)
		return !a && !b;
	return json_equal((json_t *)a, (json_t *)b);
}

json_t *jx_pick(const json_t *obj, const char *const *paths, size_t n)
{
	json_t *picked = json_object();

	if (!picked)
		abort();
	for (size_t i = 0; i < n; i++) {
		json_t *v = jx_get(obj, paths[i]);
		if (v)
			jx_set(picked, paths[i], json_incref(v));
	}
	return picked;
}

void jx_del(json_t *root, const char *path)
{
	const char *dot = strrchr(path, '.');
	json_t *parent = root;

	if (dot) {
		char head[256];
		size_t n = (size_t)(dot - path);
		if (n >= sizeof(head))
			return;
		memcpy(head, path, n);
		head[n] = '\0';
		parent = jx_get(root, head);
	}
	if (json_is_object(parent))
		json_object_del(parent, dot ? dot + 1 : path);
}

void jx_prune_nulls(json_t *v)
{
	const char *k;
	json_t *x;
	void *tmp;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach_safe(v, tmp, k, x)
		{
			if (json_is_null(x))
				json_object_del(v, k);
			else
				jx_prune_nulls(x);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) jx_prune_nulls(x);
	}
}

/* Go's %v (positional false: strconv 'g' shortest) or 'f' with precision -1. */
static char *real_shortest(double d, bool positional, char *buf, size_t n)
{
	char e[40], digits[24];
	int prec, exp, nd = 0;
	bool neg;

	if (d != d || d - d != 0) {
		snprintf(buf, n, "%s", d != d ? "NaN" : d > 0 ? "+Inf" : "-Inf");
		return buf;
	}
	if (d == 0) {
		snprintf(buf, n, "%s", signbit(d) ? "-0" : "0");
		return buf;
	}
	/* the shortest %e that reads back */
	for (prec = 0; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec, d);
		if (strtod(e, NULL) == d)
			break;
	}
	neg = e[0] == '-';
	for (const char *p = e + neg; *p && *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	exp = atoi(strchr(e, 'e') + 1);
	struct sbuf o = SBUF_INIT;
	if (neg)
		sbuf_addc(&o, '-');
	if (!positional && (exp < -4 || exp >= 6)) {
		sbuf_addc(&o, digits[0]);
		if (nd > 1)
			sbuf_addf(&o, ".%s", digits + 1);
		sbuf_addf(&o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	} else if (exp < 0) {
		sbuf_add(&o, "0.");
		for (int i = 0; i < -exp - 1; i++)
			sbuf_addc(&o, '0');
		sbuf_add(&o, digits);
	} else {
		for (int i = 0; i <= exp || i < nd; i++) {
			if (i == exp + 1)
				sbuf_addc(&o, '.');
			sbuf_addc(&o, i < nd ? digits[i] : '0');
		}
	}
	snprintf(buf, n, "%s", o.s);
	sbuf_free(&o);
	return buf;
}

char *jx_real_go(double d, char *buf, size_t n)
{
	return real_shortest(d, false, buf, n);
}

char *jx_real_plain(double d, char *buf, size_t n)
{
	return real_shortest(d, true, buf, n);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void go_string(struct sbuf *b, const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT: {
		const char **keys = malloc((json_object_size(v) + 1) * sizeof(*keys));
		const char *k;
		json_t *x;
		size_t n = 0;

		if (!keys)
			abort();
		json_object_foreach((json_t *)v, k, x) keys[n++] = k;
		qsort(keys, n, sizeof(*keys), cmp_str);
		sbuf_add(b, "map[");
		for (size_t i = 0; i < n; i++) {
			sbuf_addf(b, "%s%s:", i ? " " : "", keys[i]);
			go_string(b, json_object_get(v, keys[i]));
		}
		sbuf_addc(b, ']');
		free(keys);
		break;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *x;
		sbuf_addc(b, '[');
		json_array_foreach(v, i, x)
		{
			if (i)
				sbuf_addc(b, ' ');
			go_string(b, x);
		}
		sbuf_addc(b, ']');
		break;
	}
	case JSON_STRING:
		sbuf_addn(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		sbuf_addf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: {
		char num[40];
		sbuf_add(b, jx_real_go(json_real_value(v), num, sizeof(num)));
		break;
	}
	case JSON_TRUE:
		sbuf_add(b, "true");
		break;
	case JSON_FALSE:
		sbuf_add(b, "false");
		break;
	default:
		sbuf_add(b, "<nil>");
	}
}

char *jx_go_string(const json_t *v)
{
	struct sbuf b = SBUF_INIT;
	go_string(&b, v);
	return sbuf_take(&b);
}
