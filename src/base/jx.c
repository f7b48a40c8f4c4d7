#include "base/jx.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

json_t *jx_parse(const char *buf, size_t len)
{
	json_error_t e;
	json_t *v = json_loadb(buf, len, JSON_DECODE_ANY, &e);
	if (!v)
		err_set(ERR_PARSE, "line %d column %d: %s", e.line, e.column, e.text);
	return v;
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

json_t *jx_condition(const json_t *status, const char *type)
{
	json_t *c;
	size_t i;

	json_array_foreach(json_object_get(status, "conditions"), i, c)
	{
		const char *t = json_string_value(json_object_get(c, "type"));
		if (t && !strcmp(t, type))
			return c;
	}
	return NULL;
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
