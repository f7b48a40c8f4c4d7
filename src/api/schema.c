#include "api/schema.h"

#include "api/quantity.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/sbuf.h"
#include "base/timeutil.h"

#include <math.h>
#include <stdarg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lookups ----------------------------------------------------------- */

const struct schema_msg *schema_kind_msg(const char *api_version, const char *kind)
{
	if (!kind)
		return NULL;
	for (size_t i = 0; i < schema_kinds_count; i++) {
		const struct schema_kind *k = &schema_kinds[i];
		if (!strcmp(k->kind, kind) &&
		    (!k->api_version || (api_version && !strcmp(k->api_version, api_version))))
			return &schema_msgs[k->msg];
	}
	return NULL;
}

const struct schema_msg *schema_msg_at(uint16_t index)
{
	/* The generator only writes indexes of messages it wrote. */
	CUBE_ASSERT(index < schema_msgs_count);
	return &schema_msgs[index];
}

const struct schema_field *schema_field_by_num(const struct schema_msg *m, uint32_t num)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->fields[i].num == num)
			return &m->fields[i];
	return NULL;
}

const struct schema_field *schema_field_by_name(const struct schema_msg *m, const char *name)
{
	const struct schema_field *f = m->fields;
	size_t lo = m->ninline, hi = m->n;

	/* The named fields are sorted by name (strcmp order, as the generator sorts). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, f[mid].name);
		if (!c)
			return &f[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	for (size_t i = 0; i < m->ninline; i++) {
		const struct schema_field *in = schema_field_by_name(&schema_msgs[f[i].msg], name);
		if (in)
			return in;
	}
	return NULL;
}

/* ---- conforming JSON to the schema ------------------------------------- */

/*
 * The walk keeps where it is as a stack of segments, and makes two paths of
 * it only to report: the decoder's (JSON field names only, no indexes or
 * map keys: "spec.containers.image", what a type error names) and the
 * strict one (indexes and keys: "spec.containers[0].foo", what an unknown
 * field is reported as). Most bodies report nothing, and pay for nothing.
 */
enum seg_kind { SEG_FIELD, SEG_KEY, SEG_INDEX };

struct seg {
	enum seg_kind kind;
	const char *name; /* SEG_FIELD, SEG_KEY: borrowed from the object */
	size_t index;
};

struct conform {
	enum schema_unknown mode;
	bool converter; /* SCHEMA_CONVERTER: the unstructured converter's texts */
	json_t *unknown;
	struct seg *path; /* where the walk is; strings made only to report */
	size_t depth, cap;
	int rc;         /* the first error */
	bool stop;      /* an error that ends decoding at once */
	char msg[1024]; /* its text (err_msg() is overwritten while walking on) */
};

static void push(struct conform *c, enum seg_kind kind, const char *name, size_t index)
{
	if (c->depth == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		if (!(c->path = realloc(c->path, c->cap * sizeof(*c->path))))
			abort();
	}
	c->path[c->depth++] = (struct seg){kind, name, index};
}

static void pop(struct conform *c)
{
	c->depth--;
}

/* The decoder's path (fields only, dotted) or the strict one. */
static void path_string(const struct conform *c, bool strict, struct sbuf *b)
{
	for (size_t i = 0; i < c->depth; i++) {
		const struct seg *g = &c->path[i];
		if (g->kind == SEG_INDEX) {
			if (strict)
				sbuf_addf(b, "[%zu]", g->index);
		} else if (strict || g->kind == SEG_FIELD) {
			if (b->len)
				sbuf_addc(b, '.');
			sbuf_add(b, g->name);
		}
	}
	if (!b->s)
		sbuf_add(b, "");
}

/* What Go's decoder calls a JSON value in "cannot unmarshal <value>". */
static void value_name(const json_t *v, bool numeric_target, char *buf, size_t n)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		snprintf(buf, n, "string");
		break;
	case JSON_OBJECT:
		snprintf(buf, n, "object");
		break;
	case JSON_ARRAY:
		snprintf(buf, n, "array");
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		snprintf(buf, n, "bool");
		break;
	case JSON_INTEGER:
		if (numeric_target)
			snprintf(buf, n, "number %" JSON_INTEGER_FORMAT, json_integer_value(v));
		else
			snprintf(buf, n, "number");
		break;
	default:
		if (numeric_target) {
			char num[40];
			jx_real_plain(json_real_value(v), num, sizeof(num));
			snprintf(buf, n, "number %s", num);
		} else {
			snprintf(buf, n, "number");
		}
	}
}

/* The reflect Kind the converter names a decoded JSON value by. */
static const char *go_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		return "string";
	case JSON_OBJECT:
		return "map";
	case JSON_ARRAY:
		return "slice";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	case JSON_INTEGER:
		return "int64";
	default:
		return "float64";
	}
}

static bool numeric(unsigned type)
{
	return type == ST_INT32 || type == ST_INT64 || type == ST_UINT32 || type == ST_UINT64 ||
	       type == ST_DOUBLE;
}

/* Record an error: the first one wins, unless a later one stops decoding. */
static void fail(struct conform *c, bool stop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct conform *c, bool stop, const char *fmt, ...)
{
	va_list ap;

	if (c->rc && !stop)
		return;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->rc = ERR_INVALID;
	c->stop = c->stop || stop || c->converter;
}

/* "json: cannot unmarshal X into Go struct field S.f of type T". */
static void type_error(struct conform *c, const json_t *v, const char *gostruct, unsigned type,
                       const char *gotype, bool stop)
{
	struct sbuf field = SBUF_INIT;
	char what[64];

	if (c->rc && !stop)
		return; /* the first one stands: no need to say where this one is */
	value_name(v, numeric(type), what, sizeof(what));
	path_string(c, false, &field);
	fail(c, stop, "json: cannot unmarshal %s into Go struct field %s.%s of type %s", what,
	     gostruct, field.s, gotype);
	sbuf_free(&field);
}

/* The converter's text for a value of the wrong kind (strategic merge). */
static void convert_error(struct conform *c, const json_t *v, unsigned type, bool rep,
                          const char *gotype)
{
	if (rep || type == ST_LIST || (type == ST_BYTES && !json_is_string(v)))
		fail(c, true, "cannot restore slice from %s", go_kind(v));
	else if (type == ST_MAP)
		fail(c, true, "cannot restore map from %s", go_kind(v));
	else if (type == ST_MSG)
		fail(c, true, "cannot restore struct from: %s", go_kind(v));
	else if (json_is_integer(v) && type == ST_STRING)
		fail(c, true, "cannot convert int64 to string");
	else if (json_is_real(v) && numeric(type))
		fail(c, true, "cannot convert float64 to %s", gotype);
	else
		fail(c, true, "unrecognized type: %s", gotype);
}

static void mismatch(struct conform *c, const json_t *v, const char *gostruct, unsigned type,
                     bool rep, const char *gotype)
{
	if (c->converter)
		convert_error(c, v, type, rep, gotype);
	else
		type_error(c, v, gostruct, type, gotype, false);
}

/* Go's base64.StdEncoding.Decode: the offset of the first bad byte. */
static long base64_bad_at(const char *s)
{
	size_t j = 0, start = 0, i;
	bool pad = false;

	for (i = 0; s[i]; i++) {
		char ch = s[i];
		if (ch == '\r' || ch == '\n')
			continue;
		if (pad) {
			if (ch != '=' || j != 3)
				return (long)i;
			j = 0, pad = false;
			continue;
		}
		if (!j)
			start = i;
		if (ch == '=') {
			if (j < 2)
				return (long)i;
			if (j == 3) {
				j = 0;
				continue;
			}
			j = 3, pad = true; /* "xx=" wants one more '=' */
			continue;
		}
		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || ch == '+' || ch == '/'))
			return (long)i;
		j = (j + 1) % 4;
	}
	if (pad)
		return (long)i;
	return j ? (long)start : -1;
}

json_t *schema_zero(unsigned type)
{
	switch (type) {
	case ST_STRING:
	case ST_BYTES:
		return json_string("");
	case ST_BOOL:
		return json_false();
	case ST_INT32:
	case ST_INT64:
	case ST_UINT32:
	case ST_UINT64:
		return json_integer(0);
	case ST_DOUBLE:
		return json_real(0);
	case ST_MSG:
		return json_object();
	case ST_LIST:
		return json_array();
	case ST_QTY:
		return json_string("0");
	case ST_IOS:
		return json_integer(0);
	default:
		return json_null();
	}
}

static json_t *conform_value(struct conform *c, json_t *v, unsigned type, uint16_t msg,
                             const char *gostruct, const char *gotype);

static void conform_msg(struct conform *c, json_t *obj, const struct schema_msg *m);

/* An integer field: in range, or "number <v>" (the converter wraps int32s, as Go's Convert). */
static json_t *conform_int(struct conform *c, json_t *v, unsigned type, const char *gostruct,
                           const char *gotype)
{
	json_int_t i;
	bool ok;

	if (json_is_real(v) && c->converter) {
		/* A whole float converts (and wraps) as an integer would; anything
		 * else, or beyond int64, cannot. */
		double d = json_real_value(v);
		if (!(d >= -0x1p63 && d < 0x1p63) || d != trunc(d)) {
			convert_error(c, v, type, false, gotype);
			return NULL;
		}
		i = (json_int_t)d;
	} else if (!json_is_integer(v)) {
		mismatch(c, v, gostruct, type, false, gotype);
		return NULL;
	} else {
		i = json_integer_value(v);
	}
	switch (type) {
	case ST_INT32:
		ok = i >= INT32_MIN && i <= INT32_MAX;
		if (!ok && c->converter)
			return json_integer((int32_t)(uint32_t)i);
		break;
	case ST_UINT32:
		ok = i >= 0 && i <= UINT32_MAX;
		break;
	case ST_UINT64:
		ok = i >= 0;
		break;
	default:
		ok = true;
	}
	if (!ok) {
		type_error(c, v, gostruct, type, gotype, false);
		return NULL;
	}
	return json_is_integer(v) ? json_incref(v) : json_integer(i);
}

/* Quantity.UnmarshalJSON: a string or a bare number, canonicalised. */
static json_t *conform_quantity(struct conform *c, json_t *v)
{
	char num[64], *canon = NULL;
	const char *text;
	json_t *out;

	if (json_is_string(v)) {
		text = json_string_value(v);
	} else if (json_is_integer(v)) {
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		text = num;
	} else if (json_is_real(v)) {
		/* The literal as the client most likely wrote it (jansson keeps
		 * only the double): 1000000.0 -> "1000000" -> "1M". */
		jx_real_plain(json_real_value(v), num, sizeof(num));
		text = num;
	} else {
		text = "{";
	}
	if (quantity_canonical(text, &canon) < 0) {
		fail(c, true, "%s", err_msg());
		return NULL;
	}
	out = json_string(canon);
	free(canon);
	return out;
}

static json_t *conform_time(struct conform *c, json_t *v, bool micro, const char *gostruct)
{
	char out[TIME_BUF];

	if (!json_is_string(v)) {
		if (c->converter)
			fail(c, true, "json: cannot unmarshal %s into Go value of type string",
			     json_is_object(v)    ? "object"
			     : json_is_array(v)   ? "array"
			     : json_is_boolean(v) ? "bool"
			                          : "number");
		else
			type_error(c, v, gostruct, ST_STRING, "string", true);
		return NULL;
	}
	if (time_parse_go(json_string_value(v), micro, out) < 0) {
		fail(c, true, "%s", err_msg());
		return NULL;
	}
	/* The zero time is what Go writes as null: the field is unset. */
	if (!strncmp(out, "0001-01-01T00:00:00", 19) && strspn(out + 19, ".0") == strlen(out) - 20)
		return json_null();
	return json_string(out);
}

/* IntOrString.UnmarshalJSON: any string, or an int32. */
static json_t *conform_ios(struct conform *c, json_t *v, const char *gostruct)
{
	if (json_is_string(v))
		return json_incref(v);
	if (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
	    json_integer_value(v) <= INT32_MAX)
		return json_incref(v);
	if (c->converter) {
		char what[64];
		value_name(v, true, what, sizeof(what));
		fail(c, true, "json: cannot unmarshal %s into Go value of type int32", what);
	} else {
		type_error(c, v, gostruct, ST_INT32, "int32", true);
	}
	return NULL;
}

/* One array of elements of type (SF_REP fields and named slices). */
static json_t *conform_array(struct conform *c, json_t *v, unsigned type, uint16_t msg,
                             const char *gostruct, const char *gotype, const char *elemtype)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v)) {
		mismatch(c, v, gostruct, type, true, gotype);
		return NULL;
	}
	json_array_foreach(v, i, e)
	{
		json_t *ne;
		push(c, SEG_INDEX, NULL, i);
		ne = json_is_null(e) ? schema_zero(type)
		                     : conform_value(c, e, type, msg, gostruct, elemtype);
		pop(c);
		if (c->stop) {
			json_decref(ne);
			return NULL;
		}
		if (ne == e)
			json_decref(ne); /* unchanged: no write */
		else if (ne)
			json_array_set_new(v, i, ne);
	}
	return json_incref(v);
}

static json_t *conform_map(struct conform *c, json_t *v, const struct schema_field *f,
                           const char *gostruct)
{
	const char *k;
	json_t *e;
	void *it;

	if (!json_is_object(v)) {
		mismatch(c, v, gostruct, ST_MAP, false, f->gotype);
		return NULL;
	}
	for (it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
		json_t *ne;
		k = json_object_iter_key(it);
		e = json_object_iter_value(it);
		push(c, SEG_KEY, k, 0);
		ne = json_is_null(e) ? schema_zero(f->val)
		                     : conform_value(c, e, f->val, f->msg, gostruct, f->elem);
		pop(c);
		if (c->stop) {
			json_decref(ne);
			return NULL;
		}
		if (ne == e)
			json_decref(ne);
		else if (ne)
			json_object_iter_set_new(v, it, ne);
	}
	return json_incref(v);
}

/*
 * One value of a type: a new reference to what is to be stored (the value
 * itself, or its canonical form), or NULL after recording an error.
 */
static json_t *conform_value(struct conform *c, json_t *v, unsigned type, uint16_t msg,
                             const char *gostruct, const char *gotype)
{
	long bad;

	switch (type) {
	case ST_STRING:
		if (!json_is_string(v))
			break;
		return json_incref(v);
	case ST_BYTES:
		if (!json_is_string(v))
			break;
		if ((bad = base64_bad_at(json_string_value(v))) >= 0) {
			fail(c, c->converter, "illegal base64 data at input byte %ld", bad);
			return NULL;
		}
		return json_incref(v);
	case ST_BOOL:
		if (!json_is_boolean(v))
			break;
		return json_incref(v);
	case ST_INT32:
	case ST_INT64:
	case ST_UINT32:
	case ST_UINT64:
		return conform_int(c, v, type, gostruct, gotype);
	case ST_DOUBLE:
		if (!json_is_number(v))
			break;
		return json_incref(v);
	case ST_MSG: {
		const struct schema_msg *m = schema_msg_at(msg);
		if (!json_is_object(v))
			break;
		conform_msg(c, v, m);
		return c->stop ? NULL : json_incref(v);
	}
	case ST_LIST:
		return conform_array(c, v, ST_STRING, SCHEMA_NONE, gostruct, gotype, "string");
	case ST_TIME:
	case ST_MTIME:
		return conform_time(c, v, type == ST_MTIME, gostruct);
	case ST_QTY:
		return conform_quantity(c, v);
	case ST_IOS:
		return conform_ios(c, v, gostruct);
	default: /* ST_RAW, ST_FIELDS: any JSON */
		return json_incref(v);
	}
	mismatch(c, v, gostruct, type, false, gotype);
	return NULL;
}

static json_t *conform_field(struct conform *c, json_t *v, const struct schema_field *f,
                             const char *gostruct)
{
	if (f->type == ST_MAP)
		return conform_map(c, v, f, gostruct);
	if (f->flags & SF_REP)
		return conform_array(c, v, f->type, f->msg, gostruct, f->gotype, f->elem);
	return conform_value(c, v, f->type, f->msg, gostruct, f->gotype);
}

static void unknown_field(struct conform *c, const char *key)
{
	struct sbuf p = SBUF_INIT;

	if (c->mode != SCHEMA_REPORT || !c->unknown)
		return;
	push(c, SEG_FIELD, key, 0);
	path_string(c, true, &p);
	pop(c);
	json_array_append_new(c->unknown, json_string(p.s));
	sbuf_free(&p);
}

/*
 * Would Go's encoder leave this field out? omitempty omits false, 0, "" and
 * empty slices and maps — never a struct (a message, Quantity, Time,
 * IntOrString) and never a set pointer (SF_PTR: `immutable: false` stays).
 */
static bool omitted_empty(const struct schema_field *f, const json_t *v)
{
	if (!(f->flags & SF_OMIT) || (f->flags & SF_PTR))
		return false;
	if (f->type == ST_MAP || (f->flags & SF_REP) || f->type == ST_LIST)
		return json_is_array(v) ? json_array_size(v) == 0
		                        : json_is_object(v) && json_object_size(v) == 0;
	switch (f->type) {
	case ST_STRING:
	case ST_BYTES:
		return json_is_string(v) && json_string_length(v) == 0;
	case ST_BOOL:
		return json_is_false(v);
	case ST_INT32:
	case ST_INT64:
	case ST_UINT32:
	case ST_UINT64:
	case ST_DOUBLE:
		return json_is_number(v) && json_number_value(v) == 0;
	default:
		return false;
	}
}

static void conform_msg(struct conform *c, json_t *obj, const struct schema_msg *m)
{
	/* The Go struct a type error names: "Container" of "core.v1.Container". */
	const char *gostruct = strrchr(m->name, '.') ? strrchr(m->name, '.') + 1 : m->name;
	const char *key;
	json_t *v, *tmp;

	json_object_foreach_safe(obj, tmp, key, v)
	{
		const struct schema_field *f = schema_field_by_name(m, key);
		json_t *nv;

		if (!f) {
			unknown_field(c, key);
			json_object_del(obj, key);
			continue;
		}
		if (json_is_null(v)) {
			json_object_del(obj, key); /* null is the zero value */
			continue;
		}
		push(c, SEG_FIELD, key, 0);
		nv = conform_field(c, v, f, gostruct);
		pop(c);
		if (c->stop) {
			json_decref(nv);
			return;
		}
		if (nv && (json_is_null(nv) || omitted_empty(f, nv))) {
			/* decoded to the zero value, or one Go's encoder omits */
			json_decref(nv);
			json_object_del(obj, key);
		} else if (nv == v) {
			json_decref(nv); /* unchanged: no write */
		} else if (nv) {
			json_object_set_new(obj, key, nv);
		}
	}
}

bool schema_field_equal(const char *api_version, const char *kind, const char *field,
                        const json_t *computed, const json_t *stored)
{
	const struct schema_msg *m = schema_kind_msg(api_version, kind);
	const struct schema_field *f = m ? schema_field_by_name(m, field) : NULL;
	json_t *copy;
	bool equal;

	if (!f || f->type != ST_MSG || (f->flags & SF_REP) || !json_is_object(computed))
		return json_equal(computed, stored);
	copy = json_deep_copy(computed);
	schema_conform(copy, schema_msg_at(f->msg), SCHEMA_DROP, 0, NULL);
	equal = json_equal(copy, stored);
	json_decref(copy);
	return equal;
}

int schema_conform(json_t *obj, const struct schema_msg *m, enum schema_unknown mode,
                   unsigned flags, json_t **unknown)
{
	struct conform c = {.mode = mode, .converter = flags & SCHEMA_CONVERTER};

	if (unknown)
		*unknown = NULL;
	if (mode == SCHEMA_REPORT && unknown)
		c.unknown = json_array();
	conform_msg(&c, obj, m);
	free(c.path);
	if (c.rc || !json_array_size(c.unknown)) {
		json_decref(c.unknown);
		c.unknown = NULL;
	}
	if (unknown)
		*unknown = c.unknown;
	return c.rc ? err_set(c.rc, "%s", c.msg) : 0;
}
