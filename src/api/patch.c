/*
 * JSON patch, merge patch and strategic merge patch.
 *
 * Status codes and messages, as found in the apiserver's PATCH handler
 * (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go, 1.32-era):
 *
 * - An unknown Content-Type is negotiation.NewUnsupportedMediaTypeError:
 *   415 "the body of the request was in an unknown format - accepted media
 *   types include: <list>", the list being the route's supportedTypes in
 *   order: json-patch, merge-patch, strategic-merge-patch, apply-patch+yaml.
 * - The body is first decoded with the field-validation directive, which
 *   defaults to Warn, so JSON and merge patches go through
 *   kjson.UnmarshalStrict and a bad body is 400 "error decoding patch: ...".
 *   A strategic patch body that is not a map is 400 with the bare decoder
 *   message.
 * - JSON patch: jsonpatch.DecodePatch errors (not an array of objects) are
 *   400 BadRequest; more than 10000 operations is 413; any error from
 *   Patch.Apply, including an unknown or missing "op" (jsonpatch only checks
 *   the kind while applying: "Unexpected kind: x"), is
 *   NewGenericServerResponse(422, ...) whose message is the fixed
 *   "the server rejected our request due to an error in our request"
 *   (reason Invalid, empty details): jsonpatch's own text, e.g.
 *   "replace operation does not apply: doc is missing key: /spec/x: missing
 *   value", is dropped. kubectl prints "The request is invalid: the server
 *   rejected our request ...". We keep that text in patch_detail().
 * - Merge patch: jsonpatch.MergePatch's ErrBadJSONPatch ("Invalid JSON
 *   Patch", e.g. for a null patch) is 400.
 * - Strategic merge patch: interpretStrategicMergePatchError makes
 *   ErrBadJSONDoc, ErrBadPatchFormatForPrimitiveList / ForRetainKeys /
 *   ForSetElementOrderList and ErrUnsupportedStrategicMergePatchFormat 400
 *   with their text, and ErrNoListOfLists / ErrPatchContentNotMatchRetainKeys
 *   the generic 422. Every other strategicpatch error (unknown $patch value,
 *   missing merge key, mismatched element types, ...) reaches the client
 *   unconverted, i.e. as a 500; we answer those 400 with the same text,
 *   since they are the client's fault.
 */
#include "api/patch.h"
#include "api/schema.h"

#include "base/err.h"
#include "base/jx.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON_PATCH_OPS 10000
/* The apiserver's JSONPatchMaxCopyBytes (3 MiB), which it sets as
 * jsonpatch's AccumulatedCopySizeLimit: the copies of one patch together may
 * add no more than this (measured as each copied value's JSON encoding). */
#define MAX_JSON_PATCH_COPY_BYTES (3 << 20)

static _Thread_local char detail[1024];

const char *patch_detail(void)
{
	return detail;
}

static json_t *must(json_t *v)
{
	if (!v)
		abort();
	return v;
}

static json_t *copy(const json_t *v)
{
	return v ? must(json_deep_copy(v)) : json_null();
}

/* A 400 whose message is the detail. */
__attribute__((format(printf, 1, 2))) static int bad(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return err_set(ERR_INVALID, "%s", detail);
}

/* A 422 as upstream sends it: the detail is not shown to the client. */
__attribute__((format(printf, 1, 2))) static int rejected(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return err_set(ERR_UNPROCESSABLE, "%s", PATCH_MSG_REJECTED);
}

/* ---- Go-style rendering, for messages that print values with %v ---- */

/* reflect.TypeOf(v) of a decoded value, for ErrBadArgType messages. */
static const char *go_type(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT:
		return "map[string]interface {}";
	case JSON_ARRAY:
		return "[]interface {}";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "int64";
	case JSON_REAL:
		return "float64";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	default:
		return "%!s(<nil>)";
	}
}

/* The JSON kind encoding/json names in "cannot unmarshal X into ...". */
static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	default:
		return "null";
	}
}

/* ---------------------------- merge patch ---------------------------- */

static json_t *pruned_copy(const json_t *v)
{
	json_t *c = copy(v);
	jx_prune_nulls(c);
	return c;
}

/* jsonpatch's mergeDocs (RFC 7386 MergePatch on an object), in place. */
static void merge_docs(json_t *doc, const json_t *patch)
{
	const char *k;
	json_t *pv;

	json_object_foreach((json_t *)patch, k, pv)
	{
		json_t *cur = json_object_get(doc, k);
		if (json_is_null(pv))
			json_object_del(doc, k);
		else if (!json_is_object(cur))
			json_object_set_new(doc, k, pruned_copy(pv));
		else if (!json_is_object(pv))
			/* As upstream, a replacement of an existing object is not pruned. */
			json_object_set_new(doc, k, copy(pv));
		else
			merge_docs(cur, pv);
	}
}

json_t *patch_merge(const json_t *target, const json_t *patch)
{
	json_t *doc;

	if (!json_is_object(patch))
		return pruned_copy(patch);
	doc = json_is_object(target) ? copy(target) : must(json_object());
	merge_docs(doc, patch);
	return doc;
}

/* ---------------------------- JSON patch ----------------------------- */

struct ptr {
	char **tok;
	size_t n;
};

static void ptr_free(struct ptr *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->tok[i]);
	free(p->tok);
	p->tok = NULL;
	p->n = 0;
}

/* Split an RFC 6901 pointer into unescaped tokens; false unless "" or "/...". */
static bool ptr_parse(const char *path, struct ptr *p)
{
	const char *s = path;

	p->tok = NULL;
	p->n = 0;
	if (!*s)
		return true;
	if (*s != '/')
		return false;
	while (*s == '/') {
		const char *e = strchr(s + 1, '/');
		size_t len = e ? (size_t)(e - s - 1) : strlen(s + 1), o = 0;
		char *t = malloc(len + 1), **nt = realloc(p->tok, (p->n + 1) * sizeof(*nt));
		if (!t || !nt)
			abort();
		p->tok = nt;
		for (size_t i = 0; i < len; i++) {
			char c = s[1 + i];
			if (c == '~' && i + 1 < len && (s[2 + i] == '0' || s[2 + i] == '1')) {
				c = s[2 + i] == '0' ? '~' : '/';
				i++;
			}
			t[o++] = c;
		}
		t[o] = '\0';
		p->tok[p->n++] = t;
		s += len + 1;
	}
	return true;
}

/* strconv.Atoi's syntax: optional sign, decimal digits. */
static bool parse_index(const char *s, long long *out)
{
	const char *p = s + (*s == '+' || *s == '-');
	char *end;

	if (!isdigit((unsigned char)*p))
		return false;
	for (const char *q = p; *q; q++)
		if (!isdigit((unsigned char)*q))
			return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0';
}

/*
 * An existing array position for tok. As jsonpatch v4
 * (SupportNegativeIndices), -1 is the last element.
 */
static bool array_pos(const json_t *a, const char *tok, size_t *pos, long long *raw)
{
	long long i, n = (long long)json_array_size(a);

	*raw = 0;
	if (!parse_index(tok, &i))
		return false;
	*raw = i;
	if (i < 0) {
		if (i < -n)
			return false;
		i += n;
	}
	if (i >= n)
		return false;
	*pos = (size_t)i;
	return true;
}

static json_t *child(json_t *v, const char *tok)
{
	size_t pos;
	long long raw;

	if (json_is_object(v))
		return json_object_get(v, tok);
	if (json_is_array(v) && array_pos(v, tok, &pos, &raw))
		return json_array_get(v, pos);
	return NULL;
}

/* The object or array holding the pointer's last token, or NULL. */
static json_t *find_parent(json_t *root, const struct ptr *p)
{
	json_t *v = root;

	if (p->n == 0)
		return NULL;
	for (size_t i = 0; i + 1 < p->n && v; i++)
		v = child(v, p->tok[i]);
	return json_is_object(v) || json_is_array(v) ? v : NULL;
}

/* Insert val (stolen) into parent at key, as jsonpatch's container.add. */
static int insert(json_t *parent, const char *key, json_t *val, const char *ctx, const char *path)
{
	long long i, n = (long long)json_array_size(parent);

	if (json_is_object(parent)) {
		json_object_set_new(parent, key, val);
		return 0;
	}
	if (!strcmp(key, "-")) {
		json_array_append_new(parent, val);
		return 0;
	}
	if (!parse_index(key, &i)) {
		json_decref(val);
		return rejected("%s for path: '%s': value was not a proper array index: '%s'", ctx,
		                path, key);
	}
	if (i > n || i < -(n + 1)) {
		json_decref(val);
		return rejected("%s for path: '%s': Unable to access invalid index: %lld: invalid "
		                "index referenced",
		                ctx, path, i);
	}
	if (i < 0)
		i += n + 1;
	json_array_insert_new(parent, (size_t)i, val);
	return 0;
}

/* Remove parent[key], as jsonpatch's container.remove. */
static int remove_at(json_t *parent, const char *key, const char *ctx, const char *path)
{
	size_t pos;
	long long raw;

	if (json_is_object(parent)) {
		if (json_object_del(parent, key))
			return rejected(
			    "error in %s for path: '%s': Unable to remove nonexistent key: "
			    "%s: missing value",
			    ctx, path, key);
		return 0;
	}
	if (!array_pos(parent, key, &pos, &raw))
		return rejected("error in %s for path: '%s': Unable to access invalid index: %lld: "
		                "invalid index referenced",
		                ctx, path, raw);
	json_array_remove(parent, pos);
	return 0;
}

/* The string member `name` of op; false when missing, null or not a string. */
static bool op_str(const json_t *op, const char *name, const char **out)
{
	*out = json_string_value(json_object_get(op, name));
	return *out != NULL;
}

/* The "value" member: a missing or null value adds null, as jsonpatch v4. */
static json_t *op_value(const json_t *op)
{
	return copy(json_object_get(op, "value"));
}

static int op_add(json_t **root, const json_t *op, const char *path, const struct ptr *p)
{
	json_t *parent;

	if (p->n == 0) {
		json_decref(*root);
		*root = op_value(op);
		return 0;
	}
	parent = find_parent(*root, p);
	if (!parent)
		return rejected(
		    "add operation does not apply: doc is missing path: \"%s\": missing "
		    "value",
		    path);
	return insert(parent, p->tok[p->n - 1], op_value(op), "error in add", path);
}

static int op_remove(json_t **root, const char *path, const struct ptr *p)
{
	json_t *parent = find_parent(*root, p);

	if (!parent)
		return rejected("remove operation does not apply: doc is missing path: \"%s\": "
		                "missing value",
		                path);
	return remove_at(parent, p->tok[p->n - 1], "remove", path);
}

static int op_replace(json_t **root, const json_t *op, const char *path, const struct ptr *p)
{
	json_t *parent, *val = op_value(op);
	const char *key;
	size_t pos;
	long long raw;

	if (p->n == 0) {
		if (!json_is_object(val) && !json_is_array(val)) {
			json_decref(val);
			return rejected("replace operation value must be object or array");
		}
		json_decref(*root);
		*root = val;
		return 0;
	}
	parent = find_parent(*root, p);
	key = p->tok[p->n - 1];
	if (!parent || !child(parent, key)) {
		json_decref(val);
		return rejected("replace operation does not apply: doc is missing %s: %s: missing "
		                "value",
		                parent ? "key" : "path", path);
	}
	if (json_is_object(parent))
		json_object_set_new(parent, key, val);
	else if (array_pos(parent, key, &pos, &raw))
		json_array_set_new(parent, pos, val);
	return 0;
}

static int op_move(json_t **root, const json_t *op, const char *path, const struct ptr *p)
{
	const char *from;
	struct ptr fp;
	json_t *parent, *val;
	int rc;

	if (!op_str(op, "from", &from))
		return rejected("move operation failed to decode from: operation, missing from "
		                "field: missing value");
	if (!ptr_parse(from, &fp) || !(parent = find_parent(*root, &fp))) {
		rc = rejected("move operation does not apply: doc is missing from path: %s: "
		              "missing value",
		              from);
		ptr_free(&fp);
		return rc;
	}
	val = json_incref(child(parent, fp.tok[fp.n - 1]));
	rc = remove_at(parent, fp.tok[fp.n - 1], "move", from);
	ptr_free(&fp);
	if (rc) {
		json_decref(val);
		return rc;
	}
	/* Removing first, as jsonpatch does, makes a move into its own child fail. */
	parent = find_parent(*root, p);
	if (!parent) {
		json_decref(val);
		return rejected(
		    "move operation does not apply: doc is missing destination path: %s: "
		    "missing value",
		    path);
	}
	return insert(parent, p->tok[p->n - 1], val, "error in move", path);
}

static int op_copy(json_t **root, const json_t *op, const char *path, const struct ptr *p,
                   size_t *copied)
{
	const char *from;
	struct ptr fp;
	json_t *parent, *src = NULL;

	if (!op_str(op, "from", &from))
		return rejected("copy operation failed to decode from: operation, missing from "
		                "field: missing value");
	if (!ptr_parse(from, &fp))
		src = NULL;
	else if (fp.n == 0)
		src = *root;
	else if ((parent = find_parent(*root, &fp)))
		src = child(parent, fp.tok[fp.n - 1]);
	ptr_free(&fp);
	if (!src)
		return rejected("copy operation does not apply: doc is missing from path: %s: "
		                "missing value",
		                from);
	/* Before copying: a copy bomb (each op doubling the last) is refused
	 * while its values are still small. */
	*copied += json_dumpb(src, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	if (*copied > MAX_JSON_PATCH_COPY_BYTES)
		return rejected(
		    "Unable to complete the copy, the accumulated size increase of copy "
		    "is %zu, exceeding the limit %d",
		    *copied, MAX_JSON_PATCH_COPY_BYTES);
	src = copy(src);
	if (p->n == 0) {
		json_decref(*root);
		*root = src;
		return 0;
	}
	parent = find_parent(*root, p);
	if (!parent) {
		json_decref(src);
		return rejected(
		    "copy operation does not apply: doc is missing destination path: %s: "
		    "missing value",
		    path);
	}
	return insert(parent, p->tok[p->n - 1], src, "error while adding value during copy", path);
}

static int op_test(json_t **root, const json_t *op, const char *path, const struct ptr *p)
{
	json_t *parent, *val, *want = json_object_get(op, "value");

	if (p->n == 0) {
		val = *root;
	} else {
		parent = find_parent(*root, p);
		if (!parent)
			return rejected(
			    "test operation does not apply: is missing path: %s: missing "
			    "value",
			    path);
		val = child(parent, p->tok[p->n - 1]);
		if (!val && json_is_array(parent))
			return rejected("error in test for path: '%s': Unable to access invalid "
			                "index: %s: invalid index referenced",
			                path, p->tok[p->n - 1]);
	}
	/* jsonpatch v4 lets a missing member pass a test for null. */
	if ((!val || json_is_null(val)) && want && json_is_null(want))
		return 0;
	if (val && want && json_equal(val, want))
		return 0;
	return rejected("testing value %s failed: test failed", path);
}

static int apply_op(json_t **root, const json_t *op, size_t *copied)
{
	const char *kind = json_string_value(json_object_get(op, "op")), *path;
	struct ptr p;
	int rc;

	if (!kind)
		kind = "unknown";
	if (strcmp(kind, "add") && strcmp(kind, "remove") && strcmp(kind, "replace") &&
	    strcmp(kind, "move") && strcmp(kind, "copy") && strcmp(kind, "test"))
		return rejected("Unexpected kind: %s", kind);
	if (!op_str(op, "path", &path))
		return rejected("%s operation failed to decode path: missing value", kind);
	if (!ptr_parse(path, &p) || (p.n == 0 && !strcmp(kind, "remove"))) {
		ptr_free(&p);
		return rejected("%s operation does not apply: doc is missing path: \"%s\": missing "
		                "value",
		                kind, path);
	}
	if (!strcmp(kind, "add"))
		rc = op_add(root, op, path, &p);
	else if (!strcmp(kind, "remove"))
		rc = op_remove(root, path, &p);
	else if (!strcmp(kind, "replace"))
		rc = op_replace(root, op, path, &p);
	else if (!strcmp(kind, "move"))
		rc = op_move(root, op, path, &p);
	else if (!strcmp(kind, "copy"))
		rc = op_copy(root, op, path, &p, copied);
	else
		rc = op_test(root, op, path, &p);
	ptr_free(&p);
	return rc;
}

static int json_patch_run(const json_t *target, const json_t *ops, json_t **out)
{
	json_t *doc, *op;
	size_t i, copied = 0;
	int rc;

	*out = NULL;
	detail[0] = '\0';
	if (!ops || json_is_null(ops)) {
		*out = copy(target);
		return 0;
	}
	if (!json_is_array(ops))
		return bad("json: cannot unmarshal %s into Go value of type jsonpatch.Patch",
		           json_kind(ops));
	json_array_foreach(ops, i, op)
	{
		if (!json_is_object(op) && !json_is_null(op))
			return bad("json: cannot unmarshal %s into Go value of type "
			           "jsonpatch.Operation",
			           json_kind(op));
	}
	if (json_array_size(ops) > MAX_JSON_PATCH_OPS) {
		snprintf(detail, sizeof(detail),
		         "The allowed maximum operations in a JSON patch is %d, got %zu",
		         MAX_JSON_PATCH_OPS, json_array_size(ops));
		return err_set(ERR_TOOLARGE, "%s", detail);
	}
	doc = copy(target);
	json_array_foreach(ops, i, op)
	{
		if ((rc = apply_op(&doc, op, &copied))) {
			json_decref(doc);
			return rc;
		}
	}
	*out = doc;
	return 0;
}

json_t *patch_json(const json_t *target, const json_t *ops)
{
	json_t *out;
	json_patch_run(target, ops, &out);
	return out;
}

/* ---------------------- strategic merge patch ------------------------ */

/*
 * Patch metadata of one field, from the schema (the k8s.io/api struct tags
 * patchStrategy and patchMergeKey, generated into schema_data.c). `msg` is
 * the message of the value, of a list's elements or of a map's values. A
 * field that has no strategy merges if it is an object and is replaced
 * whole if it is a list, as upstream does; fields the schema does not know
 * (and kinds it has no message for) are treated the same way.
 */
struct smp_field {
	bool merge;       /* patchStrategy includes merge (lists) */
	bool retain_keys; /* retainKeys (documentation only: applying honours
	                     $retainKeys wherever it appears, as upstream) */
	const char *key;  /* patchMergeKey; NULL for a list of scalars */
	const struct schema_msg *msg;
};

/* The kind's message; a target without apiVersion takes the kind of that
 * name (each kind cube serves has one version). */
static const struct schema_msg *smp_root(const json_t *target, const char *kind)
{
	const char *api = jx_str(target, "apiVersion");

	for (size_t i = 0; !api && kind && i < schema_kinds_count; i++)
		if (!strcmp(schema_kinds[i].kind, kind))
			return schema_msg_at(schema_kinds[i].msg);
	return schema_kind_msg(api, kind);
}

/* The field called name in m, filled into buf; NULL when m has none. */
static const struct smp_field *smp_lookup(const struct schema_msg *m, const char *name,
                                          struct smp_field *buf)
{
	const struct schema_field *f = m ? schema_field_by_name(m, name) : NULL;

	if (!f)
		return NULL;
	buf->merge = f->flags & SF_MERGE;
	buf->retain_keys = f->flags & SF_RETAIN;
	buf->key = f->merge_key;
	buf->msg = f->msg == SCHEMA_NONE ? NULL : schema_msg_at(f->msg);
	return buf;
}

static const struct schema_msg *sub(const struct smp_field *f)
{
	return f ? f->msg : NULL;
}

#define DIRECTIVE "$patch"
#define RETAIN_KEYS "$retainKeys"
#define SET_ORDER "$setElementOrder"
#define DELETE_LIST "$deleteFromPrimitiveList"

static bool has_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* "$prefix/name" → name; NULL unless the text before the first '/' is prefix. */
static const char *after_prefix(const char *s, const char *prefix)
{
	const char *slash = strchr(s, '/');
	size_t n = strlen(prefix);

	if (!slash || (size_t)(slash - s) != n || strncmp(s, prefix, n))
		return NULL;
	return slash + 1;
}

static int bad_patch_type(const json_t *directive, const json_t *map)
{
	char *d = jx_go_string(directive), *m = jx_go_string(map);
	int rc = bad("unknown patch type: %s in map: %s", d, m);
	free(d);
	free(m);
	return rc;
}

static int no_merge_key(const json_t *map, const char *key)
{
	char *m = jx_go_string(map);
	int rc = bad("map: %s does not contain declared merge key: %s", m, key);
	free(m);
	return rc;
}

static int bad_arg_type(const char *expected, const json_t *actual)
{
	return bad("expected a %s, but received a %s", expected, go_type(actual));
}

/* The $patch value of an object element: "" when absent, NULL when not a string. */
static const char *directive_of(const json_t *v)
{
	json_t *d = json_object_get(v, DIRECTIVE);
	if (!d)
		return "";
	return json_string_value(d);
}

static int smp_map(json_t *orig, json_t *patch, const struct schema_msg *fields, json_t **out);
static int smp_new(json_t *pv, const struct smp_field *f, json_t **out);

/* Category of a list element, as reflect.TypeOf distinguishes them. */
static int elem_type(const json_t *v)
{
	json_type t = json_typeof(v);
	return t == JSON_FALSE ? JSON_TRUE : (int)t;
}

/* sliceElementType: the common element type of a and b, -1 if both are empty. */
static int elem_types(const json_t *a, const json_t *b, int *type)
{
	const json_t *lists[2] = {a, b};
	json_t *x;
	size_t i;

	*type = -1;
	for (int l = 0; l < 2; l++) {
		json_array_foreach((json_t *)lists[l], i, x)
		{
			int t = elem_type(x);
			if (*type == -1) {
				if (t == JSON_ARRAY)
					return rejected("lists of lists are not supported");
				*type = t;
			} else if (t != *type) {
				char *sa = jx_go_string(a), *sb = jx_go_string(b);
				int rc =
				    bad("list element types are not identical: [%s %s]", sa, sb);
				free(sa);
				free(sb);
				return rc;
			}
		}
	}
	return 0;
}

/* Two list items are the same when their merge keys (or values) are equal. */
static bool same_item(const json_t *a, const json_t *b, const char *key)
{
	if (!key)
		return jx_equal(a, b);
	return jx_equal(json_object_get(a, key), json_object_get(b, key));
}

/* Go's index(): the first position of item in order, or -1. */
static long order_pos(const json_t *order, const json_t *item, const char *key)
{
	json_t *o;
	size_t i;

	json_array_foreach((json_t *)order, i, o)
	{
		if (same_item(item, o, key))
			return (long)i;
	}
	return -1;
}

/* A list of borrowed elements, sorted in place. */
struct vec {
	json_t **v;
	size_t n, cap;
};

static void vec_push(struct vec *a, json_t *x)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 8;
		a->v = realloc(a->v, a->cap * sizeof(*a->v));
		if (!a->v)
			abort();
	}
	a->v[a->n++] = x;
}

/* validateMergeKeyInLists for one list. */
static int check_merge_keys(json_t *const *v, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		if (!json_is_object(v[i]))
			return bad_arg_type("map[string]interface {}", v[i]);
		if (!json_object_get(v[i], key))
			return no_merge_key(v[i], key);
	}
	return 0;
}

/*
 * normalizeSliceOrder: sort items by their position in order, keeping
 * elements that are "$patch: delete" at the end. Go sorts with
 * sort.SliceStable and a comparator that says "less" whenever either item
 * is missing from order; its insertion sort (used up to 20 elements) is
 * reproduced here so such items land where upstream puts them.
 */
static int normalize(struct vec *a, const json_t *order, const char *key)
{
	struct vec del = {0};
	size_t kept = 0;
	int rc;

	if (key) {
		if ((rc = check_merge_keys(a->v, a->n, key)))
			return rc;
		for (size_t i = 0; i < json_array_size(order); i++) {
			json_t *o = json_array_get(order, i);
			if ((rc = check_merge_keys(&o, 1, key)))
				return rc;
		}
		for (size_t i = 0; i < a->n; i++) {
			const char *d = directive_of(a->v[i]);
			if (d && !strcmp(d, "delete"))
				vec_push(&del, a->v[i]);
			else
				a->v[kept++] = a->v[i];
		}
		a->n = kept;
	}
	for (size_t i = 1; i < a->n; i++) {
		for (size_t j = i; j > 0; j--) {
			long pj = order_pos(order, a->v[j], key), pk;
			if (pj >= 0 && (pk = order_pos(order, a->v[j - 1], key)) >= 0 && pj >= pk)
				break;
			json_t *t = a->v[j];
			a->v[j] = a->v[j - 1];
			a->v[j - 1] = t;
		}
	}
	for (size_t i = 0; i < del.n; i++)
		vec_push(a, del.v[i]);
	free(del.v);
	return 0;
}

/*
 * Enforce upstream's order on a merged list: split it into items named by
 * porder (the patch list or $setElementOrder) and server-only items, sort
 * each by porder and sorder (the live list), then interleave them
 * (normalizeElementOrder/mergeSortedSlice): a server-only item goes first
 * only if the live list has it before the next patch item. An item the live
 * list lacks is taken as soon as it is reached, ahead of every server-only
 * item not yet placed: with no $setElementOrder a new element lands at the
 * front, as upstream (and the Kubernetes docs' kubectl patch example) shows.
 */
static int order_list(json_t *merged, const json_t *porder, const json_t *sorder, const char *key,
                      json_t **out)
{
	struct vec pi = {0}, so = {0};
	json_t *m, *o, *res;
	size_t i, l = 0, r = 0;
	int rc = 0;

	json_array_foreach(merged, i, m)
	{
		bool found = false;
		size_t j;
		if (key && !json_is_object(m))
			rc = bad_arg_type("map[string]interface {}", m);
		else if (key && !json_object_get(m, key))
			rc = no_merge_key(m, key);
		if (rc)
			goto done;
		json_array_foreach((json_t *)porder, j, o)
		{
			if (key && !json_is_object(o)) {
				rc = bad("value for key %zu is not a map.", j);
				goto done;
			}
			if (key ? json_object_get(o, key) && same_item(m, o, key)
			        : same_item(m, o, NULL)) {
				found = true;
				break;
			}
		}
		vec_push(found ? &pi : &so, m);
	}
	if ((rc = normalize(&pi, porder, key)) || (rc = normalize(&so, sorder, key)))
		goto done;
	res = must(json_array());
	while (l < so.n || r < pi.n) {
		long lp = l < so.n && r < pi.n ? order_pos(sorder, so.v[l], key) : -1;
		long rp = lp >= 0 ? order_pos(sorder, pi.v[r], key) : -1;
		if (r >= pi.n || (lp >= 0 && rp >= 0 && lp < rp))
			json_array_append(res, so.v[l++]);
		else
			json_array_append(res, pi.v[r++]);
	}
	*out = res;
done:
	free(pi.v);
	free(so.v);
	return rc;
}

/*
 * mergeSlice for a list with the merge strategy (or a $deleteFromPrimitiveList
 * parallel list when del). orig and patch are borrowed; *out is a new array.
 */
static int smp_list(json_t *orig, json_t *patch, const struct smp_field *f, bool del, json_t **out)
{
	const char *key = f ? f->key : NULL;
	json_t *base, *pitems, *sorder, *x;
	bool replace = false;
	size_t i;
	int type, rc;

	*out = NULL;
	if (!json_array_size(orig) && !json_array_size(patch)) {
		*out = json_incref(orig);
		return 0;
	}
	if ((rc = elem_types(orig, patch, &type)))
		return rc;
	if (type != JSON_OBJECT) {
		base = must(json_array());
		if (del) {
			json_array_foreach(orig, i, x)
			{
				if (order_pos(patch, x, NULL) < 0)
					json_array_append(base, x);
			}
			*out = base;
			return 0;
		}
		/* deduplicateScalars over both lists; the order is set below. */
		json_array_foreach(orig, i, x)
		{
			if (order_pos(base, x, NULL) < 0)
				json_array_append(base, x);
		}
		json_array_foreach(patch, i, x)
		{
			if (order_pos(base, x, NULL) < 0)
				json_array_append(base, x);
		}
		rc = order_list(base, patch, orig, NULL, out);
		json_decref(base);
		return rc;
	}
	if (!key)
		return bad("cannot merge lists without merge key for type map");

	/* mergeSliceWithSpecialElements: deletions and $patch: replace first. */
	base = must(json_array());
	pitems = must(json_array());
	json_array_extend(base, orig);
	json_array_foreach(patch, i, x)
	{
		const char *d = directive_of(x);
		if (d && !*d) {
			json_array_append(pitems, x);
		} else if (d && !strcmp(d, "delete")) {
			json_t *v = json_object_get(x, key);
			if (!v) {
				rc = no_merge_key(x, key);
				goto fail;
			}
			for (size_t j = json_array_size(base); j-- > 0;)
				if (jx_equal(json_object_get(json_array_get(base, j), key), v))
					json_array_remove(base, j);
		} else if (d && !strcmp(d, "replace")) {
			replace = true;
		} else if (d && !strcmp(d, "merge")) {
			/* Upstream refuses "merging lists cannot yet be specified in the patch";
			 * merging is what a list with this strategy does anyway. */
			json_object_del(x, DIRECTIVE);
			json_array_append(pitems, x);
		} else {
			rc = bad_patch_type(json_object_get(x, DIRECTIVE), x);
			goto fail;
		}
	}
	if (replace) {
		json_decref(base);
		base = must(json_array());
		json_array_foreach(pitems, i, x)
		{
			json_t *v;
			if (!json_object_get(x, key)) {
				rc = no_merge_key(x, key);
				goto fail;
			}
			if ((rc = smp_map(NULL, x, sub(f), &v)))
				goto fail;
			json_array_append_new(base, v);
		}
		json_decref(pitems);
		*out = base;
		return 0;
	}

	/* mergeSliceWithoutSpecialElements: merge by key, append the rest. */
	sorder = must(json_array());
	json_array_extend(sorder, base);
	json_array_foreach(pitems, i, x)
	{
		json_t *v = json_object_get(x, key), *m;
		size_t j, n = json_array_size(base);
		if (!v) {
			rc = no_merge_key(x, key);
			json_decref(sorder);
			goto fail;
		}
		for (j = 0; j < n; j++)
			if (jx_equal(json_object_get(json_array_get(base, j), key), v))
				break;
		rc = smp_map(j < n ? json_array_get(base, j) : NULL, x, sub(f), &m);
		if (rc) {
			json_decref(sorder);
			goto fail;
		}
		if (j < n)
			json_array_set_new(base, j, m);
		else
			json_array_append_new(base, m);
	}
	rc = order_list(base, pitems, sorder, key, out);
	json_decref(sorder);
fail:
	json_decref(base);
	json_decref(pitems);
	return rc;
}

/*
 * The value for a key the live object lacks (or holds with another type):
 * upstream takes the patch value after discardNullValuesFromPatch and
 * removeDirectives. Directives are processed against an empty original
 * instead, so nothing a patch says ($setElementOrder, $retainKeys, ...) is
 * stored; an object with "$patch: delete" is dropped (*out NULL), as
 * upstream. Upstream also drops one with "$patch: replace"; we keep its
 * content, which is what replace means.
 */
static int smp_new(json_t *pv, const struct smp_field *f, json_t **out)
{
	json_t *x, *arr, *v;
	size_t i;
	int rc;

	*out = NULL;
	if (json_is_object(pv)) {
		const char *d = directive_of(pv);
		if (d && !strcmp(d, "delete"))
			return 0;
		return smp_map(NULL, pv, sub(f), out);
	}
	if (!json_is_array(pv)) {
		*out = json_incref(pv);
		return 0;
	}
	if (f && f->merge) {
		arr = must(json_array());
		rc = smp_list(arr, pv, f, false, out);
		json_decref(arr);
		return rc;
	}
	arr = must(json_array());
	json_array_foreach(pv, i, x)
	{
		if (json_is_object(x) && json_object_get(x, DIRECTIVE))
			continue;
		if (json_is_object(x))
			rc = smp_map(NULL, x, sub(f), &v);
		else
			rc = smp_new(x, NULL, &v);
		if (rc) {
			json_decref(arr);
			return rc;
		}
		json_array_append_new(arr, v);
	}
	*out = arr;
	return 0;
}

/* applyRetainKeysDirective. */
static int retain_keys(json_t *res, json_t *patch)
{
	json_t *rk = json_object_get(patch, RETAIN_KEYS), *x;
	const char *k;
	void *tmp;
	int rc = 0;

	if (!rk)
		return 0;
	json_incref(rk);
	json_object_del(patch, RETAIN_KEYS);
	if (!json_is_array(rk)) {
		rc = bad("invalid patch format of retainKeys");
		goto done;
	}
	json_object_foreach(patch, k, x)
	{
		json_t *name = json_string(k);
		bool listed = order_pos(rk, must(name), NULL) >= 0;
		json_decref(name);
		if (json_is_null(x) || has_prefix(k, DELETE_LIST) || has_prefix(k, SET_ORDER))
			continue;
		if (!listed) {
			rc = bad("invalid patch format of retainKeys");
			goto done;
		}
	}
	json_object_foreach_safe(res, tmp, k, x)
	{
		json_t *name = must(json_string(k));
		if (order_pos(rk, name, NULL) < 0)
			json_object_del(res, k);
		json_decref(name);
	}
done:
	json_decref(rk);
	return rc;
}

/* validatePatchWithSetOrderList. */
static int check_order(const json_t *pl, const json_t *order, const char *key)
{
	struct vec keep = {0};
	size_t pi = 0, si = 0, no = json_array_size(order), i;
	json_t *x;
	int rc = 0;

	if (!json_array_size(pl) || !no)
		return 0;
	json_array_foreach((json_t *)pl, i, x)
	{
		const char *d;
		if (key && !json_is_object(x)) {
			rc = bad_arg_type("map[string]interface {}", x);
			goto done;
		}
		d = key ? directive_of(x) : "";
		if (!d || strcmp(d, "delete"))
			vec_push(&keep, x);
	}
	while (pi < keep.n && si < no) {
		json_t *p = keep.v[pi], *o = json_array_get(order, si);
		if (json_is_object(p) && json_object_get(p, DIRECTIVE)) {
			pi++;
			continue;
		}
		if (key) {
			if (!json_is_object(o)) {
				rc = bad_arg_type("map[string]interface {}", o);
				goto done;
			}
			if (!json_object_get(p, key) || !json_object_get(o, key)) {
				rc = no_merge_key(json_object_get(p, key) ? o : p, key);
				goto done;
			}
		}
		if (same_item(p, o, key))
			pi++;
		si++;
	}
	if (pi < keep.n && si >= no) {
		char *sp = jx_go_string(pl), *so = jx_go_string(order);
		rc = bad("The order in patch list:\n%s\n doesn't match %s list:\n%s\n", sp,
		         SET_ORDER, so);
		free(sp);
		free(so);
	}
done:
	free(keep.v);
	return rc;
}

/* mergePatchIntoOriginal: one $setElementOrder/<name> directive (order stolen). */
static int set_order_one(json_t *res, json_t *patch, const char *name, json_t *order,
                         const struct schema_msg *fields)
{
	struct smp_field buf;
	const struct smp_field *f = smp_lookup(fields, name, &buf);
	const char *key = f ? f->key : NULL;
	json_t *ol = json_object_get(res, name), *pl = json_object_get(patch, name);
	json_t *merged = NULL, *result, *empty;
	int type, rc;

	if (ol && !json_is_array(ol))
		return bad_arg_type("[]interface {}", ol);
	if (pl && !json_is_array(pl))
		return bad_arg_type("[]interface {}", pl);
	if ((rc = check_order(pl, order, key)))
		return rc;
	if (!ol && !pl)
		return 0;
	if (ol && !pl)
		merged = json_incref(ol);
	else if (ol && f && f->merge)
		rc = smp_list(ol, pl, f, false, &merged);
	else
		rc = smp_new(pl, f, &merged);
	if (rc)
		return rc;
	empty = must(json_array());
	rc = elem_types(ol ? ol : empty, pl ? pl : empty, &type);
	if (!rc)
		rc = order_list(merged, order, ol ? ol : empty, key, &result);
	json_decref(empty);
	json_decref(merged);
	if (rc)
		return rc;
	json_object_set_new(res, name, result);
	json_object_del(patch, name);
	return 0;
}

static int set_element_order(json_t *res, json_t *patch, const struct schema_msg *fields)
{
	struct vec keys = {0};
	const char *k;
	json_t *x;
	int rc = 0;

	/* Collected first: handling one removes other members from patch. */
	json_object_foreach(patch, k, x)
	{
		if (has_prefix(k, SET_ORDER))
			vec_push(&keys, must(json_string(k)));
	}
	for (size_t i = 0; i < keys.n && !rc; i++) {
		const char *sk = json_string_value(keys.v[i]), *name = after_prefix(sk, SET_ORDER);
		json_t *order = json_incref(json_object_get(patch, sk));
		json_object_del(patch, sk);
		if (!json_is_array(order))
			rc = bad_arg_type("[]interface {}", order);
		else if (!name)
			rc = bad("invalid patch format of setElementOrder list");
		else
			rc = set_order_one(res, patch, name, order, fields);
		json_decref(order);
	}
	for (size_t i = 0; i < keys.n; i++)
		json_decref(keys.v[i]);
	free(keys.v);
	return rc;
}

static bool same_type(const json_t *a, const json_t *b)
{
	if (json_is_object(a) || json_is_object(b))
		return json_is_object(a) && json_is_object(b);
	if (json_is_array(a) || json_is_array(b))
		return json_is_array(a) && json_is_array(b);
	return true;
}

/* The main loop of mergeMap. */
static int merge_fields(json_t *res, json_t *patch, const struct schema_msg *fields)
{
	const char *k;
	json_t *pv;

	json_object_foreach(patch, k, pv)
	{
		const char *name = k;
		bool del = false;
		json_t *cur, *nv = NULL;
		struct smp_field buf;
		const struct smp_field *f;
		int rc = 0;

		if (k[0] == '$') {
			if (!has_prefix(k, DELETE_LIST)) {
				return bad("unknown patch directive: %s", k);
			}
			if (!(name = after_prefix(k, DELETE_LIST)))
				return bad("invalid patch format of primitive list");
			del = true;
		}
		f = smp_lookup(fields, name, &buf);
		cur = json_object_get(res, name);
		if (json_is_null(pv)) {
			json_object_del(res, name);
			continue;
		}
		if (!cur || !same_type(cur, pv)) {
			if (del)
				continue;
			rc = smp_new(pv, f, &nv);
		} else if (json_is_object(cur)) {
			rc = smp_map(cur, pv, sub(f), &nv);
		} else if (json_is_array(cur)) {
			/* Unlike upstream, a deletion list of a list without the merge
			 * strategy deletes too, rather than replacing the list with it. */
			if (del || (f && f->merge))
				rc = smp_list(cur, pv, f, del, &nv);
			else
				rc = smp_new(pv, f, &nv);
		} else {
			nv = json_incref(pv);
		}
		if (rc)
			return rc;
		if (nv)
			json_object_set_new(res, name, nv);
		else
			json_object_del(res, name);
	}
	return 0;
}

/*
 * mergeMap: merge patch into orig (mutated; NULL means an empty object).
 * patch is a private copy and is consumed by the directives it holds.
 */
static int smp_map(json_t *orig, json_t *patch, const struct schema_msg *fields, json_t **out)
{
	json_t *res;
	const char *d = directive_of(patch);
	int rc;

	*out = NULL;
	if (d && !strcmp(d, "replace")) {
		json_object_del(patch, DIRECTIVE);
		return smp_map(NULL, patch, fields, out);
	}
	if (d && !strcmp(d, "delete")) {
		*out = must(json_object());
		return 0;
	}
	if (!d || (*d && strcmp(d, "merge")))
		return bad_patch_type(json_object_get(patch, DIRECTIVE), patch);
	/* Upstream rejects "$patch: merge" on a map as an unknown patch type; it
	 * asks for what a map gets anyway, so it is accepted and dropped. */
	json_object_del(patch, DIRECTIVE);

	res = orig ? json_incref(orig) : must(json_object());
	if ((rc = retain_keys(res, patch)) || (rc = set_element_order(res, patch, fields)) ||
	    (rc = merge_fields(res, patch, fields))) {
		json_decref(res);
		return rc;
	}
	*out = res;
	return 0;
}

static int smp_run(const json_t *target, const json_t *patch, const char *kind, json_t **out)
{
	json_t *orig, *p;
	int rc;

	*out = NULL;
	detail[0] = '\0';
	if (!json_is_object(target))
		return bad("invalid JSON document");
	if (!patch || json_is_null(patch)) {
		*out = copy(target);
		return 0;
	}
	if (!json_is_object(patch))
		return bad(
		    "json: cannot unmarshal %s into Go value of type map[string]interface {}",
		    json_kind(patch));
	/* Private copies: merging mutates the original and consumes the patch. */
	orig = copy(target);
	p = copy(patch);
	rc = smp_map(orig, p, smp_root(target, kind), out);
	json_decref(orig);
	json_decref(p);
	return rc;
}

json_t *patch_strategic(const json_t *target, const json_t *patch, const char *kind)
{
	json_t *out;
	smp_run(target, patch, kind, &out);
	return out;
}

/* ---------------------------- dispatch ------------------------------- */

#define CT_JSON "application/json-patch+json"
#define CT_MERGE "application/merge-patch+json"
#define CT_STRATEGIC "application/strategic-merge-patch+json"
#define CT_APPLY "application/apply-patch+yaml"

/* The shape kjson.UnmarshalStrict into []jsonPatchOp demands. */
static int check_json_patch(const json_t *ops)
{
	static const char *const fields[] = {"op", "path", "from"};
	json_t *op;
	size_t i;

	if (json_is_null(ops))
		return 0;
	if (!json_is_array(ops))
		return bad("error decoding patch: json: cannot unmarshal %s into Go value of type "
		           "[]handlers.jsonPatchOp",
		           json_kind(ops));
	json_array_foreach((json_t *)ops, i, op)
	{
		if (json_is_null(op))
			continue;
		if (!json_is_object(op))
			return bad(
			    "error decoding patch: json: cannot unmarshal %s into Go value of "
			    "type handlers.jsonPatchOp",
			    json_kind(op));
		for (size_t f = 0; f < 3; f++) {
			json_t *v = json_object_get(op, fields[f]);
			if (v && !json_is_string(v) && !json_is_null(v))
				return bad(
				    "error decoding patch: json: cannot unmarshal %s into Go "
				    "struct field jsonPatchOp.%s of type string",
				    json_kind(v), fields[f]);
		}
	}
	return 0;
}

/* The media type without parameters or surrounding blanks. */
static bool media_is(const char *ct, size_t n, const char *type)
{
	return n == strlen(type) && !strncmp(ct, type, n);
}

int patch_apply(const json_t *target, const char *content_type, const char *body, size_t len,
                const char *kind, json_t **out)
{
	const char *ct = content_type ? content_type : "";
	size_t n;
	json_t *p, *res = NULL;
	bool strategic;
	int rc;

	*out = NULL;
	detail[0] = '\0';
	while (isspace((unsigned char)*ct))
		ct++;
	n = strcspn(ct, ";");
	while (n && isspace((unsigned char)ct[n - 1]))
		n--;
	if (media_is(ct, n, CT_APPLY))
		return err_set(ERR_INTERNAL, "%s is applied by the caller, not by patch_apply",
		               CT_APPLY);
	strategic = media_is(ct, n, CT_STRATEGIC);
	if (!strategic && !media_is(ct, n, CT_JSON) && !media_is(ct, n, CT_MERGE))
		return err_set(ERR_UNSUPPORTED,
		               "the body of the request was in an unknown format - accepted media "
		               "types include: %s, %s, %s, %s",
		               CT_JSON, CT_MERGE, CT_STRATEGIC, CT_APPLY);

	p = jx_parse(body ? body : "", body ? len : 0);
	if (!p) {
		snprintf(detail, sizeof(detail), "%s%s",
		         strategic ? "" : "error decoding patch: ", err_msg());
		return err_set(ERR_INVALID, "%s", detail);
	}
	if (strategic) {
		rc = smp_run(target, p, kind, &res);
	} else if (media_is(ct, n, CT_JSON)) {
		rc = check_json_patch(p);
		if (!rc)
			rc = json_patch_run(target, p, &res);
	} else if (json_is_null(p)) {
		rc = bad("Invalid JSON Patch");
	} else if (!json_is_object(p)) {
		rc = bad("error decoding patch: json: cannot unmarshal %s into Go value of type "
		         "map[string]interface {}",
		         json_kind(p));
	} else {
		rc = 0;
		res = patch_merge(target, p);
	}
	json_decref(p);
	if (rc)
		return rc;
	if (!json_is_object(res)) {
		/* What decoding the result into the typed object turns into upstream:
		 * errors.NewInvalid with an empty kind and name, on the field "patch". */
		char *s = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
		snprintf(
		    detail, sizeof(detail),
		    " \"\" is invalid: patch: Invalid value: \"%s\": json: cannot unmarshal %s "
		    "into Go value of type map[string]interface {}",
		    s ? s : "", json_kind(res));
		free(s);
		json_decref(res);
		return err_set(ERR_UNPROCESSABLE, "%s", detail);
	}
	*out = res;
	return 0;
}
