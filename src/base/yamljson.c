#include "base/alloc.h"
#include "base/yamljson.h"

#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

/* The parser recurses per nesting level; this keeps hostile input from
 * overflowing the stack. No real manifest comes near it. */
#define YJ_MAX_DEPTH 1000
/* Aliases are copied, so a "billion laughs" document would expand
 * exponentially; this bounds the nodes aliases may materialise. */
#define YJ_MAX_ALIAS_NODES ((size_t)1 << 20)

#define DIGITS "0123456789"

static void must(int ok)
{
	if (!ok)
		abort();
}

static json_t *xjson(json_t *v)
{
	if (!v)
		abort();
	return v;
}

/* ---- Scalar typing (go-yaml v2's resolve(), which kubectl uses) ---- */

static const char *const yaml_nulls[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const yaml_trues[] = {"true", "True", "TRUE", "yes", "Yes",
                                         "YES",  "on",   "On",   "ON",  NULL};
static const char *const yaml_falses[] = {"false", "False", "FALSE", "no",  "No",
                                          "NO",    "off",   "Off",   "OFF", NULL};
static const char *const yaml_nonfinite[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf",
                                             "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                                             ".NaN",  ".NAN",  NULL};

static bool in_list(const char *s, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && memcmp(*list, s, n) == 0)
			return true;
	return false;
}

/* Decimal, 0x, 0o, 0b or leading-0 octal, optionally signed, within int64. */
static bool parse_int(const char *s, json_int_t *out)
{
	unsigned long long u = 0;
	unsigned base = 10;
	bool neg = false;

	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		base = 16, s += 2;
	else if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
		base = 8, s += 2;
	else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
		base = 2, s += 2;
	else if (s[0] == '0' && s[1])
		base = 8, s += 1; /* YAML 1.1: 0644 is octal */
	if (!*s)
		return false;
	for (; *s; s++) {
		unsigned d = (*s >= '0' && *s <= '9')   ? (unsigned)(*s - '0')
		             : (*s >= 'a' && *s <= 'f') ? (unsigned)(*s - 'a' + 10)
		             : (*s >= 'A' && *s <= 'F') ? (unsigned)(*s - 'A' + 10)
		                                        : 99;
		if (d >= base || u > (ULLONG_MAX - d) / base)
			return false;
		u = u * base + d;
	}
	if (u > (unsigned long long)LLONG_MAX + neg)
		return false; /* too big: the caller reads it as a float */
	*out = neg && u ? -(json_int_t)(u - 1) - 1 : (json_int_t)u;
	return true;
}

/* go-yaml's ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static bool float_syntax(const char *s)
{
	size_t k;

	if (*s == '+' || *s == '-')
		s++;
	if (*s == '.') {
		if (!(k = strspn(++s, DIGITS)))
			return false;
		s += k;
	} else {
		if (!(k = strspn(s, DIGITS)))
			return false;
		s += k;
		if (*s == '.')
			s += 1 + strspn(s + 1, DIGITS);
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(k = strspn(s, DIGITS)))
			return false;
		s += k;
	}
	return *s == '\0';
}

/*
 * The JSON type a plain scalar denotes, filling *i or *d for numbers; -1 for
 * .inf/.nan, which JSON cannot hold. Anything that is not null, a boolean or
 * a number is a string.
 */
static int resolve_plain(const char *s, size_t n, json_int_t *i, double *d)
{
	int type = JSON_STRING;
	char *t, *w;

	if (in_list(s, n, yaml_nulls))
		return JSON_NULL;
	if (in_list(s, n, yaml_trues))
		return JSON_TRUE;
	if (in_list(s, n, yaml_falses))
		return JSON_FALSE;
	if (in_list(s, n, yaml_nonfinite))
		return -1;
	if (!s[0] || !strchr("+-." DIGITS, s[0]))
		return JSON_STRING;

	/* go-yaml drops every '_' before reading a number: 1_000 is 1000. */
	t = w = xrealloc(NULL, n + 1);
	for (size_t k = 0; k < n; k++)
		if (s[k] != '_')
			*w++ = s[k];
	*w = '\0';
	if (parse_int(t, i)) {
		type = JSON_INTEGER;
	} else if (float_syntax(t)) {
		/* Out of range stays a string, as with go-yaml's ParseFloat. */
		*d = strtod(t, NULL);
		if (isfinite(*d))
			type = JSON_REAL;
	}
	free(t);
	return type;
}

/*
 * The shortest text that reads back as d, in positional notation for
 * everyday magnitudes (1000.0, not 1e+03), never one that reads as an int.
 */
static void format_real(double d, char *buf, size_t size)
{
	int prec = 1, intdigits = 1;

	while (prec < 17 && (snprintf(buf, size, "%.*g", prec, d), strtod(buf, NULL) != d))
		prec++;
	for (double m = d < 0 ? -d : d; m >= 10 && m < 1e15; m /= 10)
		intdigits++;
	if (prec < intdigits)
		prec = intdigits;
	snprintf(buf, size, "%.*g", prec, d);
	if (!strpbrk(buf, ".e"))
		strncat(buf, ".0", size - strlen(buf) - 1);
}

/* The plain text of a scalar that is not a string. */
static const char *scalar_text(const json_t *v, char *buf, size_t size)
{
	switch (json_typeof(v)) {
	case JSON_INTEGER:
		snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return buf;
	case JSON_REAL:
		format_real(json_real_value(v), buf, size);
		return buf;
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	default:
		return "null";
	}
}

/* ---- Parsing ---- */

struct anchor {
	char *name;
	json_t *value;
	size_t nodes; /* size of value, charged to the alias budget per use */
};

struct yj {
	yaml_parser_t parser;
	const char *buf; /* the input, to turn a reader error's offset into a line */
	size_t len;
	struct anchor *anchors;
	size_t nanchors, capanchors;
	size_t nodes;       /* nodes built so far, alias copies included */
	size_t alias_nodes; /* of which copied by aliases */
	int depth;
};

static json_t *parse_node(struct yj *y, yaml_event_t *ev);

static json_t *fail_at(const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static json_t *fail_at(const yaml_mark_t *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	err_set(ERR_PARSE, "yaml: line %zu: %s", m->line + 1, msg);
	return NULL;
}

/* Next event, or false with err set from libyaml's problem. */
static bool next(struct yj *y, yaml_event_t *ev)
{
	const yaml_parser_t *p = &y->parser;
	size_t line;

	if (yaml_parser_parse(&y->parser, ev))
		return true;
	must(p->error != YAML_MEMORY_ERROR);
	line = p->problem_mark.line + 1;
	if (p->error == YAML_READER_ERROR) {
		/* Encoding errors carry a byte offset rather than a mark. */
		line = 1;
		for (size_t k = 0; k < p->problem_offset && k < y->len; k++)
			line += y->buf[k] == '\n';
	}
	/* An unclosed quote is found only at the end of the stream, so the
	 * scanner's context ("while scanning a quoted scalar") says where. */
	if (p->error == YAML_SCANNER_ERROR && p->context && p->context_mark.line + 1 != line)
		err_set(ERR_PARSE, "yaml: line %zu: %s (%s at line %zu)", line, p->problem,
		        p->context, p->context_mark.line + 1);
	else
		err_set(ERR_PARSE, "yaml: line %zu: %s", line,
		        p->problem ? p->problem : "unknown problem parsing YAML content");
	return false;
}

static void anchor_put(struct yj *y, const yaml_char_t *name, json_t *v, size_t nodes)
{
	struct anchor *a;

	if (y->nanchors == y->capanchors) {
		y->capanchors = y->capanchors ? 2 * y->capanchors : 8;
		y->anchors = xrealloc(y->anchors, y->capanchors * sizeof(*y->anchors));
	}
	a = &y->anchors[y->nanchors++];
	a->name = xmemdup(name, strlen((const char *)name));
	a->value = json_incref(v);
	a->nodes = nodes;
}

static void anchors_clear(struct yj *y)
{
	for (size_t k = 0; k < y->nanchors; k++) {
		free(y->anchors[k].name);
		json_decref(y->anchors[k].value);
	}
	y->nanchors = 0;
}

/* The newest definition wins: YAML lets a later anchor reuse a name. */
static const struct anchor *anchor_get(const struct yj *y, const yaml_char_t *name)
{
	for (size_t k = y->nanchors; k-- > 0;)
		if (strcmp(y->anchors[k].name, (const char *)name) == 0)
			return &y->anchors[k];
	return NULL;
}

static bool tag_is(const yaml_char_t *tag, const char *want)
{
	return tag && strcmp((const char *)tag, want) == 0;
}

static json_t *scalar_value(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	const yaml_char_t *tag = ev->data.scalar.tag;
	json_int_t i = 0;
	double d = 0;
	int type = JSON_STRING;

	/* Quoted, block and !!str scalars are strings; an explicit !!int or
	 * the like asks for typing even when quoted. */
	if (tag ? tag_is(tag, YAML_NULL_TAG) || tag_is(tag, YAML_BOOL_TAG) ||
	              tag_is(tag, YAML_INT_TAG) || tag_is(tag, YAML_FLOAT_TAG)
	        : ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
		type = resolve_plain(s, n, &i, &d);
	switch (type) {
	case JSON_NULL:
		return json_null();
	case JSON_TRUE:
		return json_true();
	case JSON_FALSE:
		return json_false();
	case JSON_INTEGER:
		return xjson(json_integer(i));
	case JSON_REAL:
		return xjson(json_real(d));
	case JSON_STRING:
		/* libyaml has checked the UTF-8, so NULL means out of memory. */
		return xjson(json_stringn(s, n));
	}
	return fail_at(&ev->start_mark, "cannot represent %.*s in JSON", (int)n, s);
}

static json_t *alias_value(struct yj *y, const yaml_event_t *ev)
{
	const struct anchor *a = anchor_get(y, ev->data.alias.anchor);

	if (!a)
		return fail_at(&ev->start_mark, "unknown anchor '%s' referenced",
		               (const char *)ev->data.alias.anchor);
	y->alias_nodes += a->nodes;
	if (y->alias_nodes > YJ_MAX_ALIAS_NODES)
		return fail_at(&ev->start_mark, "document contains excessive aliasing");
	y->nodes += a->nodes;
	/* A copy, so callers may edit one occurrence without touching others. */
	return xjson(json_deep_copy(a->value));
}

/*
 * A mapping key becomes an object key: the scalar's text as written, so
 * `on:` or `0644:` keep their spelling. Consumes *ev.
 */
static char *parse_key(struct yj *y, yaml_event_t *ev, size_t *len, bool *merge)
{
	char *key = NULL;
	json_t *v;

	*merge = false;
	if (ev->type == YAML_SCALAR_EVENT) {
		const char *s = (const char *)ev->data.scalar.value;
		*len = ev->data.scalar.length;
		*merge = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag &&
		         *len == 2 && memcmp(s, "<<", 2) == 0;
		key = xmemdup(s, *len);
		if (ev->data.scalar.anchor) {
			/* Anchored keys are rare; an alias to one means the scalar. */
			if ((v = scalar_value(ev)) != NULL) {
				anchor_put(y, ev->data.scalar.anchor, v, 1);
				json_decref(v);
			} else {
				free(key);
				key = NULL;
			}
		}
	} else if (ev->type == YAML_ALIAS_EVENT && (v = alias_value(y, ev)) != NULL) {
		if (json_is_string(v)) {
			*len = json_string_length(v);
			key = xmemdup(json_string_value(v), *len);
		} else if (json_is_object(v) || json_is_array(v)) {
			fail_at(&ev->start_mark, "mapping key must be a scalar");
		} else {
			char buf[64];
			const char *text = scalar_text(v, buf, sizeof(buf));
			*len = strlen(text);
			key = xmemdup(text, *len);
		}
		json_decref(v);
	} else if (ev->type != YAML_ALIAS_EVENT) {
		fail_at(&ev->start_mark, "mapping key must be a scalar");
	}
	yaml_event_delete(ev);
	return key;
}

/*
 * `<<: *base` or `<<: [*a, *b]`: add the keys not already present, so keys
 * written in the mapping and earlier merges win, as the merge spec says.
 */
static bool merge_into(json_t *obj, json_t *src, const yaml_mark_t *m)
{
	size_t k;

	if (json_is_object(src)) {
		must(json_object_update_missing(obj, src) == 0);
		return true;
	}
	if (json_is_array(src)) {
		for (k = 0; k < json_array_size(src); k++)
			if (!json_is_object(json_array_get(src, k)))
				break;
		if (k == json_array_size(src)) {
			for (k = 0; k < json_array_size(src); k++)
				must(json_object_update_missing(obj, json_array_get(src, k)) == 0);
			return true;
		}
	}
	fail_at(m, "map merge requires map or sequence of maps as the value");
	return false;
}

static json_t *parse_map(struct yj *y)
{
	json_t *obj = xjson(json_object());
	yaml_event_t ev;

	for (;;) {
		yaml_mark_t at;
		size_t len;
		bool merge, ok = false;
		char *key;
		json_t *v;

		if (!next(y, &ev))
			break;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return obj;
		}
		if (!(key = parse_key(y, &ev, &len, &merge)))
			break;
		if (next(y, &ev)) {
			at = ev.start_mark;
			v = parse_node(y, &ev);
			if (v && merge) {
				ok = merge_into(obj, v, &at);
				json_decref(v);
			} else if (v) {
				/* A repeated key replaces the earlier value, as in go-yaml. */
				must(json_object_setn_new(obj, key, len, v) == 0);
				ok = true;
			}
		}
		free(key);
		if (!ok)
			break;
	}
	json_decref(obj);
	return NULL;
}

static json_t *parse_seq(struct yj *y)
{
	json_t *arr = xjson(json_array()), *item;
	yaml_event_t ev;

	while (next(y, &ev)) {
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return arr;
		}
		if (!(item = parse_node(y, &ev)))
			break;
		must(json_array_append_new(arr, item) == 0);
	}
	json_decref(arr);
	return NULL;
}

/* The node that starts with *ev, which it consumes. */
static json_t *parse_node(struct yj *y, yaml_event_t *ev)
{
	size_t before = y->nodes;
	const yaml_char_t *anchor = NULL;
	json_t *v = NULL;

	if (++y->depth > YJ_MAX_DEPTH) {
		fail_at(&ev->start_mark, "exceeded max depth of %d", YJ_MAX_DEPTH);
		goto out;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		v = scalar_value(ev);
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		v = parse_seq(y);
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		v = parse_map(y);
		break;
	case YAML_ALIAS_EVENT:
		v = alias_value(y, ev);
		break;
	default:
		fail_at(&ev->start_mark, "unexpected event %d", (int)ev->type);
		break;
	}
	if (ev->type != YAML_ALIAS_EVENT)
		y->nodes++;
	/* Registered only once complete, so a node cannot alias itself. */
	if (v && anchor)
		anchor_put(y, anchor, v, y->nodes - before);
out:
	y->depth--;
	yaml_event_delete(ev);
	return v;
}

static void yj_init(struct yj *y, const char *buf, size_t len)
{
	memset(y, 0, sizeof(*y));
	y->buf = buf ? buf : "";
	y->len = buf ? len : 0;
	must(yaml_parser_initialize(&y->parser));
	yaml_parser_set_input_string(&y->parser, (const unsigned char *)y->buf, y->len);
}

static void yj_done(struct yj *y)
{
	anchors_clear(y);
	free(y->anchors);
	yaml_parser_delete(&y->parser);
}

/* Skip to the next document: 1 at one, 0 at the end of the stream, -1 on error. */
static int next_document(struct yj *y)
{
	yaml_event_t ev;
	yaml_event_type_t type;

	do {
		if (!next(y, &ev))
			return -1;
		type = ev.type;
		yaml_event_delete(&ev);
	} while (type != YAML_DOCUMENT_START_EVENT && type != YAML_STREAM_END_EVENT);
	return type == YAML_DOCUMENT_START_EVENT;
}

/* The document after its start event, through its end event. */
static json_t *parse_document(struct yj *y)
{
	yaml_event_t ev;
	json_t *root;

	if (!next(y, &ev) || !(root = parse_node(y, &ev)))
		return NULL;
	if (!next(y, &ev)) {
		json_decref(root);
		return NULL;
	}
	yaml_event_delete(&ev);
	anchors_clear(y); /* anchors do not reach across documents */
	return root;
}

json_t *yj_parse(const char *buf, size_t len)
{
	struct yj y;
	json_t *root = NULL;
	int r;

	yj_init(&y, buf, len);
	r = next_document(&y);
	if (r == 0)
		root = json_null();
	else if (r > 0)
		root = parse_document(&y);
	yj_done(&y);
	return root;
}

json_t *yj_parse_all(const char *buf, size_t len)
{
	struct yj y;
	json_t *docs = xjson(json_array()), *root;
	int r;

	yj_init(&y, buf, len);
	while ((r = next_document(&y)) > 0) {
		if (!(root = parse_document(&y))) {
			r = -1;
			break;
		}
		/* kubectl skips null documents: "---\n---", or comments only. */
		if (json_is_null(root))
			json_decref(root);
		else
			must(json_array_append_new(docs, root) == 0);
	}
	yj_done(&y);
	if (r < 0) {
		json_decref(docs);
		return NULL;
	}
	return docs;
}

static int read_all(const char *path, char **out, size_t *outlen)
{
	size_t len = 0, cap = 4096;
	char *buf;
	ssize_t n;
	int fd, e;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		e = errno;
		return err_set(e == ENOENT ? ERR_NOTFOUND : ERR_IO, "open %s: %s", path,
		               strerror(e));
	}
	buf = xrealloc(NULL, cap);
	for (;;) {
		if (len == cap)
			buf = xrealloc(buf, cap *= 2);
		n = read(fd, buf + len, cap - len);
		if (n > 0)
			len += (size_t)n;
		else if (n == 0)
			break;
		else if (errno != EINTR) {
			e = errno;
			close(fd);
			free(buf);
			return err_set(ERR_IO, "read %s: %s", path, strerror(e));
		}
	}
	close(fd);
	*out = buf;
	*outlen = len;
	return 0;
}

int yj_load(const char *path, json_t **out)
{
	char *buf = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	if ((r = read_all(path, &buf, &len)) < 0)
		return r;
	*out = yj_parse(buf, len);
	free(buf);
	return *out ? 0 : err_wrap(ERR_PARSE, "%s", path);
}

json_t *yj_load_file(const char *path)
{
	json_t *v;

	yj_load(path, &v);
	return v;
}

/* ---- Emitting ---- */

struct outbuf {
	char *p;
	size_t len, cap;
};

static int out_write(void *data, unsigned char *s, size_t n)
{
	struct outbuf *o = data;

	if (o->len + n + 1 > o->cap) {
		o->cap = 2 * (o->len + n + 1);
		o->p = xrealloc(o->p, o->cap);
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
	return 1;
}

/*
 * Whether `s` written plain reads back as this string, both here and in the
 * go-yaml v2 kubectl reads our output with, which also takes y/n for
 * booleans, 2001-12-14 for a timestamp and 1:20 for a base-60 number.
 */
static bool plain_reads_as_string(const char *s, size_t n)
{
	static const char *const go_only[] = {"y", "Y", "n", "N", "<<", NULL};
	size_t k = (s[0] == '+' || s[0] == '-');
	json_int_t i;
	double d;

	if (resolve_plain(s, n, &i, &d) != JSON_STRING || in_list(s, n, go_only))
		return false;
	if (n > 4 && strspn(s, DIGITS) == 4 && s[4] == '-')
		return false;
	if (k < n && s[k] >= '0' && s[k] <= '9' && memchr(s, ':', n))
		return false;
	return true;
}

static bool emit_scalar(yaml_emitter_t *e, const char *s, size_t n, yaml_scalar_style_t style)
{
	yaml_event_t ev;

	/* Fails only on invalid UTF-8 (a *_nocheck jansson string) or OOM. */
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, 1, 1, style)) {
		err_set(ERR_INVALID, "yaml: cannot emit a string that is not valid UTF-8");
		return false;
	}
	return yaml_emitter_emit(e, &ev);
}

static bool emit_string(yaml_emitter_t *e, const char *s, size_t n)
{
	yaml_scalar_style_t style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;

	/* libyaml itself falls back to quotes where plain or block syntax
	 * cannot hold the text (": ", "#", leading "-", trailing spaces). */
	if (memchr(s, '\n', n))
		style = YAML_LITERAL_SCALAR_STYLE;
	else if (plain_reads_as_string(s, n))
		style = YAML_ANY_SCALAR_STYLE;
	return emit_scalar(e, s, n, style);
}

static bool emit_node(yaml_emitter_t *e, const json_t *v)
{
	yaml_event_t ev;
	const char *text;
	char num[64];
	size_t k;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		must(yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
		                                         YAML_BLOCK_MAPPING_STYLE));
		if (!yaml_emitter_emit(e, &ev))
			return false;
		for (void *it = json_object_iter((json_t *)v); it;
		     it = json_object_iter_next((json_t *)v, it))
			if (!emit_string(e, json_object_iter_key(it),
			                 json_object_iter_key_len(it)) ||
			    !emit_node(e, json_object_iter_value(it)))
				return false;
		must(yaml_mapping_end_event_initialize(&ev));
		return yaml_emitter_emit(e, &ev);
	case JSON_ARRAY:
		must(yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		                                          YAML_BLOCK_SEQUENCE_STYLE));
		if (!yaml_emitter_emit(e, &ev))
			return false;
		for (k = 0; k < json_array_size(v); k++)
			if (!emit_node(e, json_array_get(v, k)))
				return false;
		must(yaml_sequence_end_event_initialize(&ev));
		return yaml_emitter_emit(e, &ev);
	case JSON_STRING:
		return emit_string(e, json_string_value(v), json_string_length(v));
	default:
		text = scalar_text(v, num, sizeof(num));
		return emit_scalar(e, text, strlen(text), YAML_PLAIN_SCALAR_STYLE);
	}
}

static bool emit_document(yaml_emitter_t *e, const json_t *v)
{
	yaml_event_t ev;

	must(yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
	if (!yaml_emitter_emit(e, &ev))
		return false;
	must(yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
	if (!yaml_emitter_emit(e, &ev) || !emit_node(e, v))
		return false;
	must(yaml_document_end_event_initialize(&ev, 1));
	if (!yaml_emitter_emit(e, &ev))
		return false;
	must(yaml_stream_end_event_initialize(&ev));
	return yaml_emitter_emit(e, &ev) && yaml_emitter_flush(e);
}

char *yj_emit(const json_t *v)
{
	struct outbuf out = {0};
	yaml_emitter_t e;

	if (!v) {
		err_set(ERR_INVALID, "yaml: nothing to emit");
		return NULL;
	}
	must(yaml_emitter_initialize(&e));
	yaml_emitter_set_output(&e, out_write, &out);
	yaml_emitter_set_indent(&e, 2);
	yaml_emitter_set_width(&e, -1); /* never fold: certificate data stays one line */
	yaml_emitter_set_unicode(&e, 1);
	if (!emit_document(&e, v)) {
		must(e.error != YAML_MEMORY_ERROR);
		if (e.error != YAML_NO_ERROR)
			err_set(ERR_INTERNAL, "yaml: %s", e.problem ? e.problem : "emitter error");
		free(out.p);
		out.p = NULL;
	}
	yaml_emitter_delete(&e);
	return out.p;
}
