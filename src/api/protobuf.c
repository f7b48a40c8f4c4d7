#include "api/protobuf.h"

#include "api/schema.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/timeutil.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schema ------------------------------------------------------------ */

/*
 * The messages come from api/schema.h. The wrapper types are decoded through
 * the same loop into a scratch object and then converted; their fields are
 * written here because they are the wire format itself, not part of a kind.
 */
#define PB_WRAP(id, ...)                                                                           \
	static const struct schema_field id##_f[] = {__VA_ARGS__};                                 \
	static const size_t id##_n = sizeof(id##_f) / sizeof(id##_f[0])

PB_WRAP(Timestamp,
        {.name = "seconds", .num = 1, .type = ST_INT64, .flags = SF_PTR, .msg = SCHEMA_NONE},
        {.name = "nanos", .num = 2, .type = ST_INT32, .flags = SF_PTR, .msg = SCHEMA_NONE});
PB_WRAP(Quantity,
        {.name = "string", .num = 1, .type = ST_STRING, .flags = SF_PTR, .msg = SCHEMA_NONE});
PB_WRAP(IntOrString,
        {.name = "type", .num = 1, .type = ST_INT64, .flags = SF_PTR, .msg = SCHEMA_NONE},
        {.name = "intVal", .num = 2, .type = ST_INT32, .flags = SF_PTR, .msg = SCHEMA_NONE},
        {.name = "strVal", .num = 3, .type = ST_STRING, .flags = SF_PTR, .msg = SCHEMA_NONE});
/* RawExtension and FieldsV1: JSON text in field 1. */
PB_WRAP(Raw, {.name = "raw", .num = 1, .type = ST_STRING, .flags = SF_PTR, .msg = SCHEMA_NONE});

/* A message to decode: a schema message, or one of the wrappers above. */
struct pb_msg {
	const struct schema_field *fields;
	size_t n, ninline;
};

static struct pb_msg pb_of(const struct schema_msg *m)
{
	return (struct pb_msg){m->fields, m->n, m->ninline};
}

#define PB_WRAPPER(id) ((struct pb_msg){id##_f, id##_n, 0})

/* ---- decoding context --------------------------------------------------- */

#define PB_PATH_MAX 256

struct pb_ctx {
	int depth;
	size_t plen;
	char path[PB_PATH_MAX]; /* "Deployment.spec.template...", for messages */
};

struct pb_rd {
	const unsigned char *p, *end;
};

static int pb_bad(struct pb_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int pb_bad(struct pb_ctx *c, const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return err_set(ERR_INVALID, "invalid protobuf body: %s: %s", c->plen ? c->path : "envelope",
	               detail);
}

static size_t pb_push(struct pb_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static size_t pb_push(struct pb_ctx *c, const char *fmt, ...)
{
	size_t mark = c->plen;
	va_list ap;
	int k;

	if (c->plen + 1 >= sizeof(c->path))
		return mark;
	va_start(ap, fmt);
	k = vsnprintf(c->path + c->plen, sizeof(c->path) - c->plen, fmt, ap);
	va_end(ap);
	if (k > 0)
		c->plen += (size_t)k < sizeof(c->path) - c->plen ? (size_t)k
		                                                 : sizeof(c->path) - c->plen - 1;
	return mark;
}

static void pb_pop(struct pb_ctx *c, size_t mark)
{
	c->plen = mark;
	c->path[mark] = '\0';
}

/* jansson returns NULL only when out of memory for these: abort, as daemons do. */
static json_t *pb_chk(json_t *v)
{
	if (!v)
		abort();
	return v;
}

static void pb_set(json_t *obj, const char *key, json_t *v)
{
	if (json_object_set_new(obj, key, v) != 0)
		abort();
}

static void pb_append(json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, v) != 0)
		abort();
}

/* ---- wire primitives ---------------------------------------------------- */

static int pb_varint(struct pb_ctx *c, struct pb_rd *r, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			return pb_bad(c, "truncated varint");
		unsigned char b = *r->p++;
		/* The 10th byte may only carry the top bit of a 64-bit value. */
		if (shift == 63 && b > 1)
			return pb_bad(c, "varint overflows 64 bits");
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return pb_bad(c, "varint longer than 10 bytes");
}

static int pb_len(struct pb_ctx *c, struct pb_rd *r, const unsigned char **data, size_t *n)
{
	uint64_t len = 0;
	int rc = pb_varint(c, r, &len);

	if (rc)
		return rc;
	if (len > (uint64_t)(r->end - r->p))
		return pb_bad(c, "length %llu runs past the end of the message (%zu bytes left)",
		              (unsigned long long)len, (size_t)(r->end - r->p));
	*data = r->p;
	*n = (size_t)len;
	r->p += len;
	return 0;
}

static int pb_tag(struct pb_ctx *c, struct pb_rd *r, uint32_t *num, unsigned *wt)
{
	uint64_t t = 0;
	int rc = pb_varint(c, r, &t);

	if (rc)
		return rc;
	if (t > UINT32_MAX || (t >> 3) == 0)
		return pb_bad(c, "invalid field number %llu", (unsigned long long)(t >> 3));
	*num = (uint32_t)(t >> 3);
	*wt = (unsigned)(t & 7);
	return 0;
}

static int pb_skip(struct pb_ctx *c, struct pb_rd *r, uint32_t num, unsigned wt)
{
	const unsigned char *d;
	uint64_t v = 0;
	size_t n;

	switch (wt) {
	case 0:
		return pb_varint(c, r, &v);
	case 1:
	case 5: {
		size_t w = wt == 1 ? 8 : 4;
		if ((size_t)(r->end - r->p) < w)
			return pb_bad(c, "field %u: truncated fixed%zu", num, w * 8);
		r->p += w;
		return 0;
	}
	case 2:
		return pb_len(c, r, &d, &n);
	case 3:
	case 4:
		return pb_bad(c, "field %u: groups are not supported", num);
	default:
		return pb_bad(c, "field %u: invalid wire type %u", num, wt);
	}
}

/* ---- values ------------------------------------------------------------- */

/* Strict UTF-8, as jansson requires of strings: no overlongs, surrogates or > U+10FFFF. */
static bool pb_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char b = s[i];
		size_t k;
		uint32_t cp;

		if (b < 0x80) {
			i++;
			continue;
		} else if (b >= 0xc2 && b <= 0xdf) {
			k = 1, cp = b & 0x1f;
		} else if (b >= 0xe0 && b <= 0xef) {
			k = 2, cp = b & 0x0f;
		} else if (b >= 0xf0 && b <= 0xf4) {
			k = 3, cp = b & 0x07;
		} else {
			return false;
		}
		if (n - i <= k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

static int pb_string(struct pb_ctx *c, const unsigned char *d, size_t n, json_t **out)
{
	if (!pb_utf8(d, n))
		return pb_bad(c, "string is not valid UTF-8");
	*out = json_stringn((const char *)d, n);
	if (!*out)
		return pb_bad(c, "string rejected by the JSON library");
	return 0;
}

static json_t *pb_base64(const unsigned char *d, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t olen = (n + 2) / 3 * 4;
	char *o = malloc(olen + 1), *w = o;
	json_t *v;

	if (!o)
		abort();
	for (size_t i = 0; i < n; i += 3) {
		uint32_t x = (uint32_t)d[i] << 16;
		size_t left = n - i;
		if (left > 1)
			x |= (uint32_t)d[i + 1] << 8;
		if (left > 2)
			x |= d[i + 2];
		*w++ = tab[(x >> 18) & 63];
		*w++ = tab[(x >> 12) & 63];
		*w++ = left > 1 ? tab[(x >> 6) & 63] : '=';
		*w++ = left > 2 ? tab[x & 63] : '=';
	}
	*w = '\0';
	v = pb_chk(json_stringn(o, olen));
	free(o);
	return v;
}

/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the range Go will marshal. */
#define PB_TIME_MIN (-62135596800LL)
#define PB_TIME_MAX 253402300799LL

static int pb_time(struct pb_ctx *c, json_t *ts, bool micro, json_t **out, bool *zero)
{
	int64_t s = json_integer_value(json_object_get(ts, "seconds"));
	int64_t ns = json_integer_value(json_object_get(ts, "nanos"));
	int64_t days, y;
	unsigned mo, d, sod;
	char buf[48];

	*zero = s == 0 && ns == 0;
	if (*zero) {
		/* Go writes a zero Time as an empty message; JSON calls it null. */
		*out = json_null();
		return 0;
	}
	if (s < PB_TIME_MIN || s > PB_TIME_MAX)
		return pb_bad(c, "time %lld seconds is outside years 1-9999", (long long)s);
	if (ns < 0 || ns > 999999999)
		return pb_bad(c, "time nanos %lld out of range", (long long)ns);
	days = (s >= 0 ? s : s - 86399) / 86400;
	sod = (unsigned)(s - days * 86400);
	time_civil(days, &y, &mo, &d);
	if (micro)
		snprintf(buf, sizeof(buf), "%04lld-%02u-%02uT%02u:%02u:%02u.%06uZ", (long long)y,
		         mo, d, sod / 3600, sod / 60 % 60, sod % 60, (unsigned)(ns / 1000));
	else
		/* meta.v1.Time keeps whole seconds only, as Go's Unmarshal does. */
		snprintf(buf, sizeof(buf), "%04lld-%02u-%02uT%02u:%02u:%02uZ", (long long)y, mo, d,
		         sod / 3600, sod / 60 % 60, sod % 60);
	*out = pb_chk(json_string(buf));
	return 0;
}

static int pb_msg_decode(struct pb_ctx *c, const struct pb_msg *m, const unsigned char *d, size_t n,
                         json_t *obj);

/* Decode a message into a scratch object, for conversion by the caller. */
static int pb_wrapped(struct pb_ctx *c, struct pb_msg m, const unsigned char *d, size_t n,
                      json_t **tmp)
{
	int rc;

	*tmp = pb_chk(json_object());
	rc = pb_msg_decode(c, &m, d, n, *tmp);
	if (rc) {
		json_decref(*tmp);
		*tmp = NULL;
	}
	return rc;
}

static unsigned pb_wire_type(unsigned type)
{
	switch (type) {
	case ST_INT32:
	case ST_INT64:
	case ST_UINT32:
	case ST_UINT64:
	case ST_BOOL:
		return 0;
	case ST_DOUBLE:
		return 1;
	default:
		return 2;
	}
}

static int pb_fixed64(struct pb_ctx *c, struct pb_rd *r, uint64_t *v)
{
	if (r->end - r->p < 8)
		return pb_bad(c, "truncated fixed64");
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | r->p[i];
	r->p += 8;
	return 0;
}

static int pb_raw(struct pb_ctx *c, const unsigned char *d, size_t n, json_t **out, bool *zero)
{
	json_t *tmp, *raw;
	int rc;

	if ((rc = pb_wrapped(c, PB_WRAPPER(Raw), d, n, &tmp)))
		return rc;
	raw = json_object_get(tmp, "raw");
	*zero = !raw || !json_string_length(raw);
	*out = *zero ? json_null() : jx_parse(json_string_value(raw), json_string_length(raw));
	json_decref(tmp);
	if (!*out)
		return pb_bad(c, "raw bytes are not JSON: %s", err_msg());
	return 0;
}

static int pb_ios(struct pb_ctx *c, const unsigned char *d, size_t n, json_t **out, bool *zero)
{
	json_t *tmp, *s;
	json_int_t type;
	int rc;

	if ((rc = pb_wrapped(c, PB_WRAPPER(IntOrString), d, n, &tmp)))
		return rc;
	type = json_integer_value(json_object_get(tmp, "type"));
	s = json_object_get(tmp, "strVal");
	if (type == 0) {
		json_int_t i = json_integer_value(json_object_get(tmp, "intVal"));
		*zero = i == 0;
		*out = pb_chk(json_integer(i));
	} else if (type == 1) {
		*zero = !s || !json_string_length(s);
		*out = s ? json_incref(s) : pb_chk(json_string(""));
	} else {
		json_decref(tmp);
		return pb_bad(c, "IntOrString type %lld is neither 0 (int) nor 1 (string)",
		              (long long)type);
	}
	json_decref(tmp);
	return 0;
}

/*
 * One value of `type` whose tag has been read. *zero tells whether it is the
 * type's zero value, which a singular non-pointer field omits.
 */
static int pb_value(struct pb_ctx *c, unsigned type, uint16_t msg, unsigned wt, struct pb_rd *r,
                    json_t **out, bool *zero)
{
	const unsigned char *d = NULL;
	json_t *tmp = NULL, *s;
	uint64_t v = 0;
	size_t n = 0;
	int rc;

	*out = NULL;
	*zero = false;
	if (wt != pb_wire_type(type))
		return pb_bad(c, "wire type %u, expected %u", wt, pb_wire_type(type));
	rc = wt == 0 ? pb_varint(c, r, &v) : wt == 1 ? pb_fixed64(c, r, &v) : pb_len(c, r, &d, &n);
	if (rc)
		return rc;

	switch (type) {
	case ST_STRING:
		*zero = n == 0;
		return pb_string(c, d, n, out);
	case ST_BYTES:
		*zero = n == 0;
		*out = pb_base64(d, n);
		return 0;
	case ST_INT32:
		/* Negative int32s are sign-extended to 10 bytes; keep the low 32 bits. */
		*zero = (uint32_t)v == 0;
		*out = pb_chk(json_integer((int32_t)(uint32_t)v));
		return 0;
	case ST_UINT32:
		*zero = (uint32_t)v == 0;
		*out = pb_chk(json_integer((uint32_t)v));
		return 0;
	case ST_INT64:
		*zero = v == 0;
		*out = pb_chk(json_integer((json_int_t)(int64_t)v));
		return 0;
	case ST_UINT64:
		if (v > INT64_MAX)
			return pb_bad(c, "uint64 %llu does not fit a JSON integer here",
			              (unsigned long long)v);
		*zero = v == 0;
		*out = pb_chk(json_integer((json_int_t)v));
		return 0;
	case ST_DOUBLE: {
		double f;
		memcpy(&f, &v, sizeof(f));
		if (f != f || f - f != 0)
			return pb_bad(c, "a double that is not finite");
		*zero = f == 0;
		*out = pb_chk(json_real(f));
		return 0;
	}
	case ST_BOOL:
		*zero = v == 0;
		*out = json_boolean(v != 0);
		return 0;
	case ST_MSG:
		rc = pb_wrapped(c, pb_of(schema_msg_at(msg)), d, n, out);
		*zero = !rc && json_object_size(*out) == 0;
		return rc;
	case ST_LIST:
		/* A Go named slice travels as a message of one repeated field. */
		if ((rc = pb_wrapped(c, pb_of(schema_msg_at(msg)), d, n, &tmp)))
			return rc;
		s = json_object_get(tmp, "items");
		*out = s ? json_incref(s) : pb_chk(json_array());
		*zero = json_array_size(*out) == 0;
		json_decref(tmp);
		return 0;
	case ST_TIME:
	case ST_MTIME:
		if ((rc = pb_wrapped(c, PB_WRAPPER(Timestamp), d, n, &tmp)))
			return rc;
		rc = pb_time(c, tmp, type == ST_MTIME, out, zero);
		json_decref(tmp);
		return rc;
	case ST_QTY:
		if ((rc = pb_wrapped(c, PB_WRAPPER(Quantity), d, n, &tmp)))
			return rc;
		s = json_object_get(tmp, "string");
		*zero = !s || json_string_length(s) == 0;
		/* An empty Quantity is zero, which Go marshals as "0". */
		*out = *zero ? pb_chk(json_string("0")) : json_incref(s);
		json_decref(tmp);
		return 0;
	case ST_IOS:
		return pb_ios(c, d, n, out, zero);
	case ST_RAW:
	case ST_FIELDS:
		return pb_raw(c, d, n, out, zero);
	default:
		return pb_bad(c, "internal: no decoder for type %u", type);
	}
}

/* One map entry {1 key, 2 value}; a later entry with the same key wins. */
static int pb_map_entry(struct pb_ctx *c, const struct schema_field *f, const unsigned char *d,
                        size_t n, json_t *obj)
{
	struct pb_rd r = {d, d + n};
	const unsigned char *key = (const unsigned char *)"";
	size_t klen = 0;
	json_t *val = NULL, *map;
	int rc = 0;

	if (++c->depth > PB_MAX_DEPTH) {
		c->depth--;
		return pb_bad(c, "nesting deeper than %d", PB_MAX_DEPTH);
	}
	while (r.p < r.end && !rc) {
		uint32_t num = 0;
		unsigned wt = 0;
		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		if (num == 1) {
			if (wt != 2)
				rc = pb_bad(c, "map key: wire type %u, expected 2", wt);
			else
				rc = pb_len(c, &r, &key, &klen);
		} else if (num == 2) {
			json_t *v;
			bool zero;
			size_t mark = pb_push(c, "{value}");
			rc = pb_value(c, f->val, f->msg, wt, &r, &v, &zero);
			pb_pop(c, mark);
			if (!rc) {
				json_decref(val);
				val = v;
			}
		} else {
			rc = pb_skip(c, &r, num, wt);
		}
	}
	c->depth--;
	if (!rc && (!pb_utf8(key, klen) || memchr(key, '\0', klen)))
		rc = pb_bad(c, "map key is not valid UTF-8 text");
	if (rc) {
		json_decref(val);
		return rc;
	}
	if (!val)
		val = pb_chk(schema_zero(f->val)); /* an entry without field 2 */
	map = json_object_get(obj, f->name);
	if (!map) {
		map = pb_chk(json_object());
		pb_set(obj, f->name, map);
	}
	if (json_object_setn_new(map, (const char *)key, klen, val) != 0)
		return pb_bad(c, "map key rejected by the JSON library");
	return 0;
}

static void pb_push_elem(json_t *obj, const char *name, json_t *v)
{
	json_t *arr = json_object_get(obj, name);

	if (!arr) {
		arr = pb_chk(json_array());
		pb_set(obj, name, arr);
	}
	pb_append(arr, v);
}

static int pb_repeated(struct pb_ctx *c, const struct schema_field *f, unsigned wt, struct pb_rd *r,
                       json_t *obj)
{
	json_t *arr = json_object_get(obj, f->name), *v;
	size_t idx = json_array_size(arr), mark;
	bool zero;
	int rc;

	if (wt == 2 && pb_wire_type(f->type) != 2) {
		/* Packed scalars: one length-delimited run of varints or fixed64s. */
		const unsigned char *d;
		size_t n;
		if ((rc = pb_len(c, r, &d, &n)))
			return rc;
		struct pb_rd sub = {d, d + n};
		while (sub.p < sub.end) {
			mark = pb_push(c, "[%zu]", idx++);
			rc = pb_value(c, f->type, SCHEMA_NONE, pb_wire_type(f->type), &sub, &v,
			              &zero);
			pb_pop(c, mark);
			if (rc)
				return rc;
			pb_push_elem(obj, f->name, v);
		}
		return 0;
	}
	mark = pb_push(c, "[%zu]", idx);
	rc = pb_value(c, f->type, f->msg, wt, r, &v, &zero);
	pb_pop(c, mark);
	if (rc)
		return rc;
	pb_push_elem(obj, f->name, v);
	return 0;
}

/*
 * A singular message merges into an earlier occurrence, as protobuf
 * specifies. An inlined one (Volume's VolumeSource) writes its fields into
 * the parent's object, as its JSON does.
 */
static int pb_submsg(struct pb_ctx *c, const struct schema_field *f, unsigned wt, struct pb_rd *r,
                     json_t *obj)
{
	struct pb_msg m = pb_of(schema_msg_at(f->msg));
	const unsigned char *d;
	size_t n;
	json_t *child;
	bool fresh;
	int rc;

	if (wt != 2)
		return pb_bad(c, "wire type %u, expected 2", wt);
	if ((rc = pb_len(c, r, &d, &n)))
		return rc;
	if (f->flags & SF_INLINE)
		return pb_msg_decode(c, &m, d, n, obj);
	child = json_object_get(obj, f->name);
	fresh = !json_is_object(child);
	if (fresh)
		child = pb_chk(json_object());
	rc = pb_msg_decode(c, &m, d, n, child);
	if (fresh) {
		if (!rc && (json_object_size(child) > 0 || (f->flags & SF_PTR)))
			pb_set(obj, f->name, child);
		else
			json_decref(child);
	}
	return rc;
}

static int pb_field_decode(struct pb_ctx *c, const struct schema_field *f, unsigned wt,
                           struct pb_rd *r, json_t *obj)
{
	const unsigned char *d;
	json_t *v;
	bool zero;
	size_t n;
	int rc;

	if (f->type == ST_MAP) {
		if (wt != 2)
			return pb_bad(c, "wire type %u, expected 2", wt);
		if ((rc = pb_len(c, r, &d, &n)))
			return rc;
		return pb_map_entry(c, f, d, n, obj);
	}
	if (f->flags & SF_REP)
		return pb_repeated(c, f, wt, r, obj);
	if (f->type == ST_MSG)
		return pb_submsg(c, f, wt, r, obj);
	if ((rc = pb_value(c, f->type, f->msg, wt, r, &v, &zero)))
		return rc;
	/* Last one wins; a zero Time or raw value is never "set", even behind a pointer. */
	if (zero && (!(f->flags & SF_PTR) || f->type == ST_TIME || f->type == ST_MTIME ||
	             f->type == ST_RAW || f->type == ST_FIELDS)) {
		json_decref(v);
		json_object_del(obj, f->name);
	} else {
		pb_set(obj, f->name, v);
	}
	return 0;
}

static const struct schema_field *pb_field_find(const struct pb_msg *m, uint32_t num)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->fields[i].num == num)
			return &m->fields[i];
	return NULL;
}

static int pb_msg_decode(struct pb_ctx *c, const struct pb_msg *m, const unsigned char *d, size_t n,
                         json_t *obj)
{
	struct pb_rd r = {d, d + n};
	int rc = 0;

	if (++c->depth > PB_MAX_DEPTH) {
		c->depth--;
		return pb_bad(c, "nesting deeper than %d", PB_MAX_DEPTH);
	}
	while (r.p < r.end) {
		const struct schema_field *f;
		uint32_t num = 0;
		unsigned wt = 0;

		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		f = pb_field_find(m, num);
		if (!f) {
			if ((rc = pb_skip(c, &r, num, wt)))
				break;
			continue;
		}
		size_t mark = *f->name ? pb_push(c, ".%s", f->name) : c->plen;
		rc = pb_field_decode(c, f, wt, &r, obj);
		pb_pop(c, mark);
		if (rc)
			break;
	}
	c->depth--;
	return rc;
}

/* ---- envelope ----------------------------------------------------------- */

struct pb_env {
	const unsigned char *api_version, *kind, *raw, *encoding, *ctype;
	size_t api_version_len, kind_len, raw_len, encoding_len, ctype_len;
};

static int pb_typemeta(struct pb_ctx *c, const unsigned char *d, size_t n, struct pb_env *e)
{
	struct pb_rd r = {d, d + n};
	int rc = 0;

	while (r.p < r.end && !rc) {
		uint32_t num = 0;
		unsigned wt = 0;
		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		if (num == 1 || num == 2) {
			if (wt != 2)
				return pb_bad(c, "typeMeta field %u: wire type %u, expected 2", num,
				              wt);
			rc = num == 1 ? pb_len(c, &r, &e->api_version, &e->api_version_len)
			              : pb_len(c, &r, &e->kind, &e->kind_len);
		} else {
			rc = pb_skip(c, &r, num, wt);
		}
	}
	return rc;
}

static int pb_envelope(struct pb_ctx *c, const unsigned char *d, size_t n, struct pb_env *e)
{
	struct pb_rd r = {d, d + n};
	const unsigned char *tm;
	size_t tmlen;
	int rc = 0;

	while (r.p < r.end && !rc) {
		uint32_t num = 0;
		unsigned wt = 0;
		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		if (num < 1 || num > 4) {
			rc = pb_skip(c, &r, num, wt);
			continue;
		}
		if (wt != 2)
			return pb_bad(c, "field %u: wire type %u, expected 2", num, wt);
		switch (num) {
		case 1:
			if (!(rc = pb_len(c, &r, &tm, &tmlen)))
				rc = pb_typemeta(c, tm, tmlen, e);
			break;
		case 2:
			rc = pb_len(c, &r, &e->raw, &e->raw_len);
			break;
		case 3:
			rc = pb_len(c, &r, &e->encoding, &e->encoding_len);
			break;
		default:
			rc = pb_len(c, &r, &e->ctype, &e->ctype_len);
			break;
		}
	}
	return rc;
}

static bool pb_text(const unsigned char *s, size_t n)
{
	return n == 0 || (pb_utf8(s, n) && !memchr(s, '\0', n));
}

bool pb_has_magic(const unsigned char *buf, size_t len)
{
	return buf && len >= PB_MAGIC_LEN && memcmp(buf, PB_MAGIC, PB_MAGIC_LEN) == 0;
}

bool pb_kind_supported(const char *api_version, const char *kind)
{
	return api_version && kind && schema_kind_msg(api_version, kind) != NULL;
}

int pb_parse(const unsigned char *buf, size_t len, json_t **out)
{
	static const char proto_ct[] = "application/vnd.kubernetes.protobuf";
	struct pb_ctx c = {0};
	struct pb_env e = {0};
	const struct schema_msg *sm;
	struct pb_msg m;
	char api_version[256], kind[256];
	json_t *obj;
	int rc;

	*out = NULL;
	if (!pb_has_magic(buf, len))
		return err_set(ERR_INVALID, "invalid protobuf body: it does not start with the "
		                            "Kubernetes magic \"k8s\\0\"");
	if ((rc = pb_envelope(&c, buf + PB_MAGIC_LEN, len - PB_MAGIC_LEN, &e)))
		return rc;
	if (!e.kind_len)
		return err_set(ERR_INVALID, "invalid protobuf body: the envelope names no kind");
	if (!pb_text(e.kind, e.kind_len) || !pb_text(e.api_version, e.api_version_len) ||
	    e.kind_len >= sizeof(kind) || e.api_version_len >= sizeof(api_version))
		return err_set(
		    ERR_INVALID,
		    "invalid protobuf body: the envelope's apiVersion or kind is not text");
	memcpy(kind, e.kind, e.kind_len);
	kind[e.kind_len] = '\0';
	memcpy(api_version, e.api_version ? (const char *)e.api_version : "", e.api_version_len);
	api_version[e.api_version_len] = '\0';
	if (e.encoding_len)
		return err_set(ERR_UNSUPPORTED,
		               "protobuf content encoding \"%.*s\" is not supported for %s",
		               (int)(e.encoding_len > 64 ? 64 : e.encoding_len),
		               (const char *)e.encoding, kind);
	if (e.ctype_len &&
	    (e.ctype_len != sizeof(proto_ct) - 1 || memcmp(e.ctype, proto_ct, e.ctype_len) != 0))
		return err_set(ERR_UNSUPPORTED, "protobuf envelope content type is not %s",
		               proto_ct);
	sm = schema_kind_msg(api_version, kind);
	if (!sm)
		return err_set(ERR_UNSUPPORTED,
		               "no protobuf decoder for kind \"%s\" in \"%s\"; send it as "
		               "application/json",
		               kind, api_version);

	obj = pb_chk(json_object());
	pb_set(obj, "apiVersion", pb_chk(json_string(api_version)));
	pb_set(obj, "kind", pb_chk(json_string(kind)));
	pb_push(&c, "%s", kind);
	m = pb_of(sm);
	if (e.raw_len && (rc = pb_msg_decode(&c, &m, e.raw, e.raw_len, obj))) {
		json_decref(obj);
		return rc;
	}
	*out = obj;
	return 0;
}

json_t *pb_decode(const unsigned char *buf, size_t len)
{
	json_t *obj;

	return pb_parse(buf, len, &obj) == 0 ? obj : NULL;
}
