#include "api/openapi.h"

#include "api/resources.h"
#include "api/schema.h"
#include "base/jx.h"
#include "base/sbuf.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K8S_VERSION "v1.32.0"

/* One document being built. */
struct doc {
	bool v3;
	json_t *defs;                 /* name -> schema */
	unsigned char *seen;          /* per schema_msgs index: defined already */
	bool specials[ST_FIELDS + 1]; /* per special type: defined already */
};

/* ---- definitions -------------------------------------------------------- */

static void define_msg(struct doc *d, uint16_t index);

static json_t *ref_to(const struct doc *d, const char *name)
{
	char ref[256];
	snprintf(ref, sizeof(ref), "%s%s", d->v3 ? "#/components/schemas/" : "#/definitions/",
	         name);
	return json_pack("{s:s}", "$ref", ref);
}

/* A reference with siblings (description, default): v3 wraps it in allOf,
 * as upstream's v3 documents do; v2 keeps it bare. */
static json_t *ref_field(const struct doc *d, const char *name)
{
	return d->v3 ? json_pack("{s:[o]}", "allOf", ref_to(d, name)) : ref_to(d, name);
}

static const struct schema_special *special_of(unsigned type)
{
	for (size_t i = 0; i < schema_specials_count; i++)
		if (schema_specials[i].type == type)
			return &schema_specials[i];
	return NULL;
}

static json_t *special_schema(const struct doc *d, const struct schema_special *sp)
{
	json_t *s = json_pack("{s:s}", "description", sp->doc);
	switch (sp->type) {
	case ST_TIME:
	case ST_MTIME:
		json_object_set_new(s, "type", json_string("string"));
		json_object_set_new(s, "format", json_string("date-time"));
		break;
	case ST_QTY:
		if (d->v3)
			json_object_set_new(
			    s, "oneOf",
			    json_pack("[{s:s},{s:s}]", "type", "string", "type", "number"));
		else
			json_object_set_new(s, "type", json_string("string"));
		break;
	case ST_IOS:
		json_object_set_new(s, "format", json_string("int-or-string"));
		if (d->v3)
			json_object_set_new(
			    s, "oneOf",
			    json_pack("[{s:s},{s:s}]", "type", "integer", "type", "string"));
		else
			json_object_set_new(s, "type", json_string("string"));
		break;
	default: /* ST_RAW, ST_FIELDS: any object */
		json_object_set_new(s, "type", json_string("object"));
		break;
	}
	return s;
}

/* The name of the definition a value of this type refers to, defining it on
 * first use; NULL for plain values. */
static const char *definition(struct doc *d, unsigned type, uint16_t msg)
{
	if (type == ST_MSG) {
		define_msg(d, msg);
		return schema_msg_at(msg)->oapi;
	}
	const struct schema_special *sp = special_of(type);
	if (!sp)
		return NULL;
	if (!d->specials[type]) {
		d->specials[type] = true;
		json_object_set_new(d->defs, sp->oapi, special_schema(d, sp));
	}
	return sp->oapi;
}

static json_t *scalar_schema(unsigned type)
{
	switch (type) {
	case ST_BYTES:
		return json_pack("{s:s,s:s}", "type", "string", "format", "byte");
	case ST_BOOL:
		return json_pack("{s:s}", "type", "boolean");
	case ST_INT32:
		return json_pack("{s:s,s:s}", "type", "integer", "format", "int32");
	case ST_INT64:
	case ST_UINT32:
	case ST_UINT64:
		return json_pack("{s:s,s:s}", "type", "integer", "format", "int64");
	case ST_DOUBLE:
		return json_pack("{s:s,s:s}", "type", "number", "format", "double");
	case ST_LIST: /* a named slice of strings (ExtraValue) */
		return json_pack("{s:s,s:{s:s}}", "type", "array", "items", "type", "string");
	default:
		return json_pack("{s:s}", "type", "string");
	}
}

static json_t *scalar_zero(unsigned type);

/* An element of a list or a map's value: v3 gives each its zero as
 * default, as upstream's generator does for values Go can't omit. */
static json_t *element_schema(struct doc *d, unsigned type, uint16_t msg)
{
	const char *name = definition(d, type, msg);
	json_t *s, *zero;

	if (name && type == ST_MSG) {
		s = ref_field(d, name);
		if (d->v3)
			json_object_set_new(s, "default", json_object());
		return s;
	}
	if (name)
		return ref_to(d, name);
	s = scalar_schema(type);
	if (d->v3 && (zero = scalar_zero(type)))
		json_object_set_new(s, "default", zero);
	return s;
}

static json_t *strings(const char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* The zero of a Go builtin, which kube-openapi enforces as the default of
 * a value Go never omits; none for []byte (a slice) and the rest. */
static json_t *scalar_zero(unsigned type)
{
	/* The builtins are ST_STRING ... ST_DOUBLE in enum schema_type. */
	return type >= ST_STRING && type <= ST_DOUBLE && type != ST_BYTES ? schema_zero(type)
	                                                                  : NULL;
}

/* kube-openapi's enforced default of a field: {} for a struct held by
 * value, the zero of a scalar Go never omits; none for pointers, slices,
 * maps and the types with their own JSON form. */
static json_t *enforced_default(const struct schema_field *f)
{
	if (f->flags & (SF_REP | SF_PTR) || f->type == ST_MAP)
		return NULL;
	if (f->type == ST_MSG)
		return json_object();
	return f->flags & SF_OMIT ? NULL : scalar_zero(f->type);
}

static void field_extensions(json_t *s, const struct schema_field *f)
{
	if (f->flags & (SF_MERGE | SF_RETAIN))
		json_object_set_new(s, "x-kubernetes-patch-strategy",
		                    json_string((f->flags & SF_MERGE) && (f->flags & SF_RETAIN)
		                                    ? "merge,retainKeys"
		                                : f->flags & SF_MERGE ? "merge"
		                                                      : "retainKeys"));
	if (f->merge_key)
		json_object_set_new(s, "x-kubernetes-patch-merge-key", json_string(f->merge_key));
	if (f->flags & (SF_LIST_ATOMIC | SF_LIST_SET | SF_LIST_MAP))
		json_object_set_new(s, "x-kubernetes-list-type",
		                    json_string(f->flags & SF_LIST_MAP   ? "map"
		                                : f->flags & SF_LIST_SET ? "set"
		                                                         : "atomic"));
	if (f->list_keys)
		json_object_set_new(s, "x-kubernetes-list-map-keys", strings(f->list_keys));
	if (f->flags & SF_MAP_ATOMIC)
		json_object_set_new(s, "x-kubernetes-map-type", json_string("atomic"));
}

static json_t *field_schema(struct doc *d, const struct schema_field *f)
{
	json_t *s, *def;

	if (f->type == ST_MAP) {
		s = json_pack("{s:s,s:o}", "type", "object", "additionalProperties",
		              element_schema(d, f->val, f->msg));
	} else if (f->flags & SF_REP) {
		json_t *item = element_schema(d, f->type, f->msg);
		if (f->enums)
			json_object_set_new(item, "enum", strings(f->enums));
		s = json_pack("{s:s,s:o}", "type", "array", "items", item);
	} else {
		const char *name = definition(d, f->type, f->msg);
		s = name ? ref_field(d, name) : scalar_schema(f->type);
		if (f->enums)
			json_object_set_new(s, "enum", strings(f->enums));
	}
	json_object_set_new(s, "description", json_string(f->doc ? f->doc : ""));
	if (d->v3) {
		def = f->def ? json_loads(f->def, JSON_DECODE_ANY, NULL) : enforced_default(f);
		if (def)
			json_object_set_new(s, "default", def);
	}
	field_extensions(s, f);
	return s;
}

/* The fields of m into props and required, the inlined messages' too. */
static void add_fields(struct doc *d, const struct schema_msg *m, json_t *props, json_t *req)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct schema_field *f = &m->fields[i];
		if (f->flags & SF_INLINE) {
			add_fields(d, schema_msg_at(f->msg), props, req);
			continue;
		}
		json_object_set_new(props, f->name, field_schema(d, f));
		if (f->flags & SF_REQ)
			json_array_append_new(req, json_string(f->name));
	}
}

static json_t *gvk(const char *group, const char *version, const char *kind)
{
	return json_pack("{s:s,s:s,s:s}", "group", group, "kind", kind, "version", version);
}

static void split_api_version(const char *api_version, char *group, size_t n, const char **version)
{
	const char *slash = strchr(api_version, '/');
	snprintf(group, n, "%.*s", slash ? (int)(slash - api_version) : 0, api_version);
	*version = slash ? slash + 1 : api_version;
}

/* Upstream lists every group-version a kind is served in; DeleteOptions,
 * registered in every group, lists each served group. */
static json_t *kinds_of(uint16_t index)
{
	json_t *a = json_array();
	for (size_t i = 0; i < schema_kinds_count; i++) {
		const struct schema_kind *k = &schema_kinds[i];
		char group[96];
		const char *version;
		if (k->msg != index)
			continue;
		if (!k->api_version) {
			for (size_t r = 0; r < resources_count; r++) {
				bool dup = false;
				for (size_t s = 0; s < r; s++)
					dup |= !strcmp(resources[s].group, resources[r].group) &&
					       !strcmp(resources[s].version, resources[r].version);
				if (!dup)
					json_array_append_new(
					    a,
					    gvk(resources[r].group, resources[r].version, k->kind));
			}
			continue;
		}
		split_api_version(k->api_version, group, sizeof(group), &version);
		json_array_append_new(a, gvk(group, version, k->kind));
	}
	return a;
}

static void define_msg(struct doc *d, uint16_t index)
{
	const struct schema_msg *m = schema_msg_at(index);
	json_t *props, *req, *s, *kinds;

	if (d->seen[index])
		return;
	d->seen[index] = 1;
	/* Claim the name first: a message may reach itself (JSONSchemaProps
	 * would; none here yet), and the order of keys is sorted on output. */
	s = json_pack("{s:s,s:s}", "description", m->doc, "type", "object");
	json_object_set_new(d->defs, m->oapi, s);
	props = json_object();
	req = json_array();
	add_fields(d, m, props, req);
	if (json_object_size(props))
		json_object_set_new(s, "properties", props);
	else
		json_decref(props);
	if (json_array_size(req)) {
		jx_array_sort(req, jx_cmp_strings);
		json_object_set_new(s, "required", req);
	} else {
		json_decref(req);
	}
	if (m->flags & SM_ATOMIC)
		json_object_set_new(s, "x-kubernetes-map-type", json_string("atomic"));
	kinds = kinds_of(index);
	if (json_array_size(kinds))
		json_object_set_new(s, "x-kubernetes-group-version-kind", kinds);
	else
		json_decref(kinds);
}

static uint16_t msg_index(const char *name)
{
	for (size_t i = 0; i < schema_msgs_count; i++)
		if (!strcmp(schema_msgs[i].name, name))
			return (uint16_t)i;
	return SCHEMA_NONE;
}

/* The kind's definition, or NULL when the table has no schema for it. */
static const struct schema_msg *kind_msg(const char *group, const char *version, const char *kind)
{
	char api[128];
	snprintf(api, sizeof(api), "%s%s%s", group, *group ? "/" : "", version);
	return schema_kind_msg(api, kind);
}

/* "<Kind>List" into name: upstream's list types are Go structs of their
 * own; here they are made from the kind, as all have the same four fields. */
static bool define_list(struct doc *d, const struct resource *res, char *name, size_t n)
{
	const struct schema_msg *m = kind_msg(res->group, res->version, res->kind);
	uint16_t lm = msg_index("meta.v1.ListMeta");
	json_t *items, *meta, *props, *s;
	char kind[128];

	if (!m)
		return false;
	snprintf(name, n, "%sList", m->oapi);
	if (json_object_get(d->defs, name))
		return true;
	define_msg(d, (uint16_t)(m - schema_msgs));
	define_msg(d, lm);
	items = element_schema(d, ST_MSG, (uint16_t)(m - schema_msgs));
	meta = ref_field(d, schema_msg_at(lm)->oapi);
	json_object_set_new(meta, "description",
	                    json_string("Where the list stands: the version it was read at and "
	                                "the token for the next page."));
	if (d->v3)
		json_object_set_new(meta, "default", json_object());
	props = json_pack(
	    "{s:{s:s,s:s},s:{s:s,s:s,s:o},s:{s:s,s:s},s:o}", "apiVersion", "description",
	    "The group and version of this list's schema, such as \"v1\" or \"apps/v1\".", "type",
	    "string", "items", "description", "The objects in this page of the list.", "type",
	    "array", "items", items, "kind", "description",
	    "The type of this list: the kind of its items followed by List.", "type", "string",
	    "metadata", meta);
	snprintf(kind, sizeof(kind), "%sList", res->kind);
	s = json_pack("{s:s,s:s,s:o,s:[s],s:[o]}", "description",
	              "A page of objects of one kind, and where the list stands.", "type", "object",
	              "properties", props, "required", "items", "x-kubernetes-group-version-kind",
	              gvk(res->group, res->version, kind));
	json_object_set_new(d->defs, name, s);
	return true;
}

/* ---- paths -------------------------------------------------------------- */

enum param_id {
	P_END = -1,
	P_ALLOW_BOOKMARKS,
	P_CONTINUE,
	P_DRY_RUN,
	P_FIELD_MANAGER,
	P_FIELD_SELECTOR,
	P_FIELD_VALIDATION,
	P_FORCE,
	P_GRACE,
	P_LABEL_SELECTOR,
	P_LIMIT,
	P_ORPHAN,
	P_PROPAGATION,
	P_RV,
	P_RV_MATCH,
	P_SEND_INITIAL,
	P_TIMEOUT,
	P_WATCH,
	P_PRETTY,
	P_NAME,
	P_NAMESPACE,
	P_CONTAINER,
	P_FOLLOW,
	P_TAIL_LINES,
	P_IGNORE_STORE_READ,
};

static const struct param {
	const char *name, *type;
	const char *doc;
} params[] = {
    [P_ALLOW_BOOKMARKS] = {"allowWatchBookmarks", "boolean",
                           "With watch, ask for BOOKMARK events that carry only a resourceVersion, "
                           "so a client can resume from a recent point."},
    [P_CONTINUE] = {"continue", "string",
                    "The token a previous page's metadata.continue returned, to fetch the next "
                    "page."},
    [P_DRY_RUN] = {"dryRun", "string",
                   "All: check and default the request, run admission, but store nothing."},
    [P_FIELD_MANAGER] = {"fieldManager", "string",
                         "The name of the actor making the change, recorded in managedFields."},
    [P_FIELD_SELECTOR] = {"fieldSelector", "string",
                          "Only objects whose fields match, such as spec.nodeName=node-1."},
    [P_FIELD_VALIDATION] = {"fieldValidation", "string",
                            "What to do with unknown or duplicate fields in the body: Ignore "
                            "them, Warn about them, or refuse the request (Strict)."},
    [P_FORCE] = {"force", "boolean",
                 "For an apply patch, take over fields other managers own instead of failing "
                 "with a conflict."},
    [P_GRACE] = {"gracePeriodSeconds", "integer",
                 "Seconds the object is given to terminate before it is removed; 0 removes it "
                 "at once."},
    [P_LABEL_SELECTOR] = {"labelSelector", "string",
                          "Only objects whose labels match, such as app=web,tier!=cache."},
    [P_LIMIT] = {"limit", "integer",
                 "At most this many items in the page; the rest is fetched with continue."},
    [P_ORPHAN] = {"orphanDependents", "boolean",
                  "Deprecated: use propagationPolicy. Whether dependents keep running without "
                  "their owner."},
    [P_PROPAGATION] = {"propagationPolicy", "string",
                       "How dependents are deleted: Orphan, Background or Foreground."},
    [P_RV] = {"resourceVersion", "string",
              "The store version to read at, or to watch from; see resourceVersionMatch."},
    [P_RV_MATCH] = {"resourceVersionMatch", "string",
                    "How resourceVersion is applied to a list: Exact or NotOlderThan."},
    [P_SEND_INITIAL] = {"sendInitialEvents", "boolean",
                        "With watch, start with an ADDED event for every existing object, then "
                        "a bookmark."},
    [P_TIMEOUT] = {"timeoutSeconds", "integer",
                   "End a list or watch call after this many seconds."},
    [P_WATCH] = {"watch", "boolean",
                 "Stream the changes to the matching objects instead of listing them."},
    [P_PRETTY] = {"pretty", "string", "If 'true', the reply is indented for reading."},
    [P_NAME] = {"name", "string", "The name of the object."},
    [P_NAMESPACE] = {"namespace", "string", "The namespace the object lives in."},
    [P_CONTAINER] = {"container", "string",
                     "The container whose log to read; needed when the pod has more than one."},
    [P_FOLLOW] = {"follow", "boolean", "Keep the stream open and send new lines as they come."},
    [P_TAIL_LINES] = {"tailLines", "integer", "Only the last this many lines."},
    [P_IGNORE_STORE_READ] = {"ignoreStoreReadErrorWithClusterBreakingPotential", "boolean",
                             "Delete an object the store cannot read or decode, without "
                             "finalizers or admission; it may leave the cluster broken."},
};

static const enum param_id list_params[] = {
    P_ALLOW_BOOKMARKS, P_CONTINUE,     P_FIELD_SELECTOR, P_LABEL_SELECTOR, P_LIMIT, P_RV,
    P_RV_MATCH,        P_SEND_INITIAL, P_TIMEOUT,        P_WATCH,          P_END};
static const enum param_id write_params[] = {P_DRY_RUN, P_FIELD_MANAGER, P_FIELD_VALIDATION, P_END};
static const enum param_id patch_params[] = {P_DRY_RUN, P_FIELD_MANAGER, P_FIELD_VALIDATION,
                                             P_FORCE, P_END};
static const enum param_id delete_params[] = {P_DRY_RUN, P_GRACE,       P_IGNORE_STORE_READ,
                                              P_ORPHAN,  P_PROPAGATION, P_END};
static const enum param_id deletecollection_params[] = {
    P_CONTINUE,       P_DRY_RUN,      P_FIELD_SELECTOR, P_GRACE,       P_IGNORE_STORE_READ,
    P_LABEL_SELECTOR, P_LIMIT,        P_ORPHAN,         P_PROPAGATION, P_RV,
    P_RV_MATCH,       P_SEND_INITIAL, P_TIMEOUT,        P_END};
static const enum param_id log_params[] = {P_CONTAINER, P_FOLLOW, P_TAIL_LINES, P_END};
static const enum param_id no_params[] = {P_END};

static json_t *param(const struct doc *d, enum param_id id, const char *in)
{
	const struct param *p = &params[id];
	json_t *schema = json_pack("{s:s,s:b}", "type", p->type, "uniqueItems", 1);
	json_t *o = json_pack("{s:s,s:s,s:s}", "name", p->name, "in", in, "description", p->doc);

	if (!strcmp(in, "path"))
		json_object_set_new(o, "required", json_true());
	if (d->v3) {
		json_object_set_new(o, "schema", schema);
	} else {
		json_object_update(o, schema);
		json_decref(schema);
	}
	return o;
}

/* "CoreV1", "AppsV1", "RbacAuthorizationV1": upstream's operation ids. */
static void group_camel(const char *group, const char *version, char *out, size_t n)
{
	size_t len = 0;
	bool up = true;
	const char *g = *group ? group : "core";
	const char *end = strstr(g, ".k8s.io");
	size_t glen = end ? (size_t)(end - g) : strlen(g);

	for (size_t i = 0; i < glen && len + 1 < n; i++) {
		if (g[i] == '.') {
			up = true;
			continue;
		}
		out[len++] = up ? (char)toupper((unsigned char)g[i]) : g[i];
		up = false;
	}
	snprintf(out + len, n - len, "%c%s", toupper((unsigned char)version[0]), version + 1);
}

/* "core_v1", "rbacAuthorization_v1": upstream's tags. */
static void group_tag(const char *group, const char *version, char *out, size_t n)
{
	char camel[128];
	group_camel(group, version, camel, sizeof(camel));
	camel[strlen(camel) - strlen(version)] = '\0';
	camel[0] = (char)tolower((unsigned char)camel[0]);
	snprintf(out, n, "%s_%s", camel, version);
}

static const char *const json_types[] = {"application/json", "application/yaml",
                                         "application/vnd.kubernetes.protobuf", NULL};
static const char *const watch_types[] = {"application/json",
                                          "application/yaml",
                                          "application/vnd.kubernetes.protobuf",
                                          "application/json;stream=watch",
                                          "application/vnd.kubernetes.protobuf;stream=watch",
                                          NULL};
static const char *const patch_types[] = {
    "application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
    "application/strategic-merge-patch+json", NULL};
static const char *const any_type[] = {"*/*", NULL};
static const char *const text_types[] = {"text/plain", "application/json", "application/yaml",
                                         "application/vnd.kubernetes.protobuf", NULL};

/* One operation of a path. */
struct op {
	const char *method;   /* "get", "post", ... */
	const char *action;   /* x-kubernetes-action */
	const char *verb;     /* the operation id's first word */
	const char *infix;    /* after the group-version in the id: "Collection", "" */
	const char *suffix;   /* the subresource in the id: "Status", "" */
	const char *doc;      /* what it does, printf'd with the kind */
	const char *request;  /* definition of the body, or NULL */
	const char *response; /* definition of the reply; NULL: a string */
	const enum param_id *query;
	const char *const *consumes, *const *produces;
	const char *g, *v, *k; /* x-kubernetes-group-version-kind */
	bool created;          /* 201 as well as 200 */
	bool accepted;         /* 202 as well */
	bool optional_body;    /* a DELETE's options may be left out */
};

static json_t *content(const struct doc *d, const char *const *types, json_t *schema)
{
	json_t *c = json_object();
	for (size_t i = 0; types[i]; i++)
		json_object_set_new(c, types[i], json_pack("{s:O}", "schema", schema));
	json_decref(schema);
	return c;
}

static json_t *response_schema(const struct doc *d, const struct op *op)
{
	return op->response ? ref_to(d, op->response) : json_pack("{s:s}", "type", "string");
}

static json_t *operation(const struct doc *d, const struct op *op, const char *id, const char *tag)
{
	char text[256];
	json_t *o, *ps = json_array(), *rs = json_object();

	snprintf(text, sizeof(text), op->doc, op->k);
	o = json_pack("{s:s,s:s,s:[s],s:s}", "description", text, "operationId", id, "tags", tag,
	              "x-kubernetes-action", op->action);
	for (size_t i = 0; op->query[i] != P_END; i++)
		json_array_append_new(ps, param(d, op->query[i], "query"));
	if (op->request && !d->v3) {
		json_t *body = json_pack("{s:s,s:s,s:o}", "name", "body", "in", "body", "schema",
		                         ref_to(d, op->request));
		if (!op->optional_body)
			json_object_set_new(body, "required", json_true());
		json_array_append_new(ps, body);
	}
	if (json_array_size(ps))
		json_object_set_new(o, "parameters", ps);
	else
		json_decref(ps);
	if (op->request && d->v3) {
		json_t *body =
		    json_pack("{s:o}", "content", content(d, op->consumes, ref_to(d, op->request)));
		if (!op->optional_body)
			json_object_set_new(body, "required", json_true());
		json_object_set_new(o, "requestBody", body);
	}
	static const struct {
		const char *code, *text;
	} codes[] = {{"200", "OK"}, {"201", "Created"}, {"202", "Accepted"}};
	for (size_t i = 0; i < 3; i++) {
		json_t *r;
		if ((i == 1 && !op->created) || (i == 2 && !op->accepted))
			continue;
		r = json_pack("{s:s}", "description", codes[i].text);
		if (d->v3)
			json_object_set_new(r, "content",
			                    content(d, op->produces, response_schema(d, op)));
		else
			json_object_set_new(r, "schema", response_schema(d, op));
		json_object_set_new(rs, codes[i].code, r);
	}
	json_object_set_new(rs, "401", json_pack("{s:s}", "description", "Unauthorized"));
	json_object_set_new(o, "responses", rs);
	if (!d->v3) {
		json_object_set_new(o, "consumes", strings(op->consumes));
		json_object_set_new(o, "produces", strings(op->produces));
		json_object_set_new(o, "schemes", json_pack("[s]", "https"));
	}
	json_object_set_new(o, "x-kubernetes-group-version-kind", gvk(op->g, op->v, op->k));
	return o;
}

/* Add op at path (made if new), with the path's own parameters. */
static void add_op(struct doc *d, json_t *paths, const char *path, const struct op *op,
                   const struct resource *res, bool namespaced, bool named)
{
	json_t *item = json_object_get(paths, path);
	char camel[128], tag[128], id[256];

	if (!item) {
		json_t *ps = json_array();
		if (named)
			json_array_append_new(ps, param(d, P_NAME, "path"));
		if (namespaced)
			json_array_append_new(ps, param(d, P_NAMESPACE, "path"));
		json_array_append_new(ps, param(d, P_PRETTY, "query"));
		item = json_pack("{s:o}", "parameters", ps);
		json_object_set_new(paths, path, item);
	}
	group_camel(res->group, res->version, camel, sizeof(camel));
	group_tag(res->group, res->version, tag, sizeof(tag));
	snprintf(id, sizeof(id), "%s%s%s%s%s%s", op->verb, camel, op->infix ? op->infix : "",
	         namespaced ? "Namespaced" : "", res->kind, op->suffix);
	json_object_set_new(item, op->method, operation(d, op, id, tag));
}

static void capitalize(const char *s, char *out, size_t n)
{
	snprintf(out, n, "%c%s", toupper((unsigned char)s[0]), s + 1);
}

static void subresource_paths(struct doc *d, json_t *paths, const struct resource *res,
                              const char *item)
{
	for (size_t i = 0; i < RESOURCE_MAX_SUBS && res->subs[i].name; i++) {
		const struct subresource *sub = &res->subs[i];
		const struct schema_msg *m = kind_msg(sub->group, sub->version, sub->kind);
		char path[512], suffix[64];
		const char *def;
		bool log = !strcmp(sub->name, "log");

		/* The proxies carry any request; nothing to describe. */
		if (!m && !log)
			continue;
		def = log ? NULL : (define_msg(d, (uint16_t)(m - schema_msgs)), m->oapi);
		snprintf(path, sizeof(path), "%s/%s", item, sub->name);
		capitalize(sub->name, suffix, sizeof(suffix));
		struct op base = {.suffix = suffix,
		                  .request = def,
		                  .response = def,
		                  .consumes = any_type,
		                  .produces = json_types,
		                  .g = sub->group,
		                  .v = sub->version,
		                  .k = sub->kind};
		if (log) {
			struct op op = base;
			op.method = "get", op.action = "get", op.verb = "read";
			op.doc = "Read the log of a %s's container.", op.request = NULL;
			op.query = log_params, op.produces = text_types;
			add_op(d, paths, path, &op, res, res->namespaced, true);
			continue;
		}
		if (sub->verbs & VERB_GET) {
			struct op op = base;
			op.method = "get", op.action = "get", op.verb = "read", op.request = NULL;
			op.doc = "Read the %s behind this subresource.", op.query = no_params;
			add_op(d, paths, path, &op, res, res->namespaced, true);
		}
		if (sub->verbs & VERB_UPDATE) {
			struct op op = base;
			op.method = "put", op.action = "put", op.verb = "replace";
			op.doc = "Replace this subresource of the object with the %s given.";
			op.query = write_params, op.created = true;
			add_op(d, paths, path, &op, res, res->namespaced, true);
		}
		if (sub->verbs & VERB_PATCH) {
			struct op op = base;
			op.method = "patch", op.action = "patch", op.verb = "patch";
			op.doc = "Change part of this subresource (%s): JSON patch, merge patch, "
			         "strategic merge patch or apply.";
			op.query = patch_params, op.consumes = patch_types, op.created = true;
			op.request = schema_msg_at(msg_index("meta.v1.Patch"))->oapi;
			define_msg(d, msg_index("meta.v1.Patch"));
			add_op(d, paths, path, &op, res, res->namespaced, true);
		}
		if (sub->verbs & VERB_CREATE) {
			struct op op = base;
			op.method = "post", op.action = "post", op.verb = "create";
			op.doc = "Create a %s for the object.", op.query = write_params;
			op.created = true, op.accepted = true;
			add_op(d, paths, path, &op, res, res->namespaced, true);
		}
	}
}

static void resource_paths(struct doc *d, json_t *paths, const struct resource *res)
{
	const struct schema_msg *m = kind_msg(res->group, res->version, res->kind);
	const char *status = schema_msg_at(msg_index("meta.v1.Status"))->oapi;
	const char *options = schema_msg_at(msg_index("meta.v1.DeleteOptions"))->oapi;
	const char *patch = schema_msg_at(msg_index("meta.v1.Patch"))->oapi;
	char prefix[160], coll[320], item[384], list[256];

	if (!m)
		return;
	define_msg(d, (uint16_t)(m - schema_msgs));
	define_msg(d, msg_index("meta.v1.Status"));
	if (*res->group)
		snprintf(prefix, sizeof(prefix), "/apis/%s/%s", res->group, res->version);
	else
		snprintf(prefix, sizeof(prefix), "/api/%s", res->version);
	snprintf(coll, sizeof(coll), "%s%s/%s", prefix,
	         res->namespaced ? "/namespaces/{namespace}" : "", res->plural);
	snprintf(item, sizeof(item), "%s/{name}", coll);

	struct op base = {.suffix = "",
	                  .response = m->oapi,
	                  .consumes = any_type,
	                  .produces = json_types,
	                  .g = res->group,
	                  .v = res->version,
	                  .k = res->kind};
	if (res->verbs & VERB_LIST && define_list(d, res, list, sizeof(list))) {
		struct op op = base;
		op.method = "get", op.action = "list", op.verb = "list", op.response = list;
		op.doc = "List or watch objects of kind %s.", op.query = list_params;
		op.produces = watch_types;
		add_op(d, paths, coll, &op, res, res->namespaced, false);
		if (res->namespaced) {
			char all[320];
			snprintf(all, sizeof(all), "%s/%s", prefix, res->plural);
			op.suffix = "ForAllNamespaces";
			op.doc = "List or watch objects of kind %s in every namespace.";
			add_op(d, paths, all, &op, res, false, false);
		}
	}
	if (res->verbs & VERB_CREATE) {
		struct op op = base;
		op.method = "post", op.action = "post", op.verb = "create", op.request = m->oapi;
		op.doc = "Create a %s.", op.query = write_params, op.created = true;
		op.accepted = true;
		add_op(d, paths, coll, &op, res, res->namespaced, false);
	}
	if (res->verbs & VERB_DELETECOLLECTION) {
		struct op op = base;
		define_msg(d, msg_index("meta.v1.DeleteOptions"));
		op.method = "delete", op.action = "deletecollection", op.verb = "delete";
		op.infix = "Collection", op.optional_body = true;
		op.request = options, op.response = status, op.query = deletecollection_params;
		op.doc = "Delete every %s the selectors match.";
		add_op(d, paths, coll, &op, res, res->namespaced, false);
	}
	if (res->verbs & VERB_GET) {
		struct op op = base;
		op.method = "get", op.action = "get", op.verb = "read", op.query = no_params;
		op.doc = "Read the named %s.";
		add_op(d, paths, item, &op, res, res->namespaced, true);
	}
	if (res->verbs & VERB_UPDATE) {
		struct op op = base;
		op.method = "put", op.action = "put", op.verb = "replace", op.request = m->oapi;
		op.doc = "Replace the named %s with the object given.", op.query = write_params;
		op.created = true;
		add_op(d, paths, item, &op, res, res->namespaced, true);
	}
	if (res->verbs & VERB_PATCH) {
		struct op op = base;
		define_msg(d, msg_index("meta.v1.Patch"));
		op.method = "patch", op.action = "patch", op.verb = "patch", op.request = patch;
		op.doc = "Change part of the named %s: JSON patch, merge patch, strategic merge "
		         "patch or server-side apply.";
		op.query = patch_params, op.consumes = patch_types, op.created = true;
		add_op(d, paths, item, &op, res, res->namespaced, true);
	}
	if (res->verbs & VERB_DELETE) {
		struct op op = base;
		define_msg(d, msg_index("meta.v1.DeleteOptions"));
		op.method = "delete", op.action = "delete", op.verb = "delete",
		op.request = options, op.optional_body = true, op.accepted = true;
		/* A pod goes through its node: the reply is the pod, terminating. */
		op.response = res->rules & RES_GRACEFUL ? m->oapi : status;
		op.doc = "Delete the named %s.", op.query = delete_params;
		add_op(d, paths, item, &op, res, res->namespaced, true);
	}
	subresource_paths(d, paths, res, item);
}

static void doc_init(struct doc *d, bool v3)
{
	*d = (struct doc){.v3 = v3, .defs = json_object(), .seen = calloc(schema_msgs_count, 1)};
	if (!d->seen)
		abort();
}

static json_t *doc_finish(struct doc *d, json_t *paths)
{
	json_t *o = json_pack("{s:{s:s,s:s},s:o}", "info", "title", "Kubernetes", "version",
	                      K8S_VERSION, "paths", paths);
	/* Every document can carry a watch event. */
	define_msg(d, msg_index("meta.v1.WatchEvent"));
	free(d->seen);
	if (d->v3) {
		json_object_set_new(o, "openapi", json_string("3.0.0"));
		json_object_set_new(o, "components", json_pack("{s:o}", "schemas", d->defs));
	} else {
		json_object_set_new(o, "swagger", json_string("2.0"));
		json_object_set_new(o, "definitions", d->defs);
	}
	return o;
}

json_t *openapi_v3(const char *group, const char *version)
{
	struct doc d;
	json_t *paths = json_object();
	bool any = false;

	doc_init(&d, true);
	/* A group-version whose kinds have no schema (CRDs, which cube lists
	 * empty) has no document. */
	for (size_t i = 0; i < resources_count; i++)
		if (!strcmp(resources[i].group, group) && !strcmp(resources[i].version, version) &&
		    kind_msg(group, version, resources[i].kind)) {
			resource_paths(&d, paths, &resources[i]);
			any = true;
		}
	if (!any) {
		json_decref(paths);
		json_decref(d.defs);
		free(d.seen);
		return NULL;
	}
	return doc_finish(&d, paths);
}

json_t *openapi_v2(void)
{
	struct doc d;
	json_t *paths = json_object();

	doc_init(&d, false);
	for (size_t i = 0; i < resources_count; i++)
		resource_paths(&d, paths, &resources[i]);
	return doc_finish(&d, paths);
}

/* ---- v2 in protobuf: gnostic's openapi.v2.Document ----------------------- */

/*
 * Field numbers are gnostic's OpenAPIv2.proto (openapi_v2). Values that
 * proto3 leaves out when zero ("" and false) are left out here too. Maps
 * of the JSON (paths, definitions, properties, responses) are repeated
 * Named* messages, in sorted key order as upstream's JSON is written;
 * extensions ("x-...") are NamedAny whose Any holds the value's YAML text —
 * JSON, which is YAML.
 */

static void pb_varint(struct sbuf *b, uint64_t v)
{
	char buf[10];
	size_t n = 0;
	do {
		buf[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	sbuf_addn(b, buf, n);
}

static void pb_len(struct sbuf *b, unsigned field, const char *s, size_t n)
{
	pb_varint(b, (uint64_t)field << 3 | 2);
	pb_varint(b, n);
	sbuf_addn(b, s, n);
}

static void pb_str(struct sbuf *b, unsigned field, const json_t *v)
{
	const char *s = json_string_value(v);
	if (s && *s)
		pb_len(b, field, s, strlen(s));
}

static void pb_strs(struct sbuf *b, unsigned field, const json_t *a)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);
		if (s)
			pb_len(b, field, s, strlen(s));
	}
}

static void pb_bool(struct sbuf *b, unsigned field, const json_t *v)
{
	if (json_is_true(v)) {
		pb_varint(b, (uint64_t)field << 3);
		pb_varint(b, 1);
	}
}

typedef void (*pb_encoder)(struct sbuf *b, const json_t *v);

/* The message enc makes of v, as field `field` of b. */
static void pb_sub(struct sbuf *b, unsigned field, pb_encoder enc, const json_t *v)
{
	struct sbuf c = SBUF_INIT;
	enc(&c, v);
	pb_len(b, field, c.s ? c.s : "", c.len);
	sbuf_free(&c);
}

/* Any: the value's YAML (its JSON) in field 2. */
static void pb_any(struct sbuf *b, const json_t *v)
{
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		abort();
	pb_len(b, 2, text, strlen(text));
	free(text);
}

static int by_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of o, sorted (the caller frees the array). */
static const char **sorted_keys(const json_t *o, size_t *n)
{
	const char *key, **keys = malloc((json_object_size(o) + 1) * sizeof(*keys));
	json_t *v;
	size_t i = 0;

	if (!keys)
		abort();
	json_object_foreach((json_t *)o, key, v) keys[i++] = key;
	qsort(keys, i, sizeof(*keys), by_key);
	*n = i;
	return keys;
}

/* A JSON object as repeated Named*{name = 1, value = 2} in field `field`:
 * every key, or (ext) only the "x-" ones, or (!ext) all but them. */
enum keys { ALL_KEYS, EXTENSIONS, NOT_EXTENSIONS };

static void pb_named(struct sbuf *b, unsigned field, const json_t *o, pb_encoder enc,
                     enum keys which)
{
	size_t n;
	const char **keys = sorted_keys(o, &n);

	for (size_t i = 0; i < n; i++) {
		bool ext = !strncmp(keys[i], "x-", 2);
		struct sbuf c = SBUF_INIT;
		if ((which == EXTENSIONS && !ext) || (which == NOT_EXTENSIONS && ext))
			continue;
		pb_len(&c, 1, keys[i], strlen(keys[i]));
		pb_sub(&c, 2, enc, json_object_get(o, keys[i]));
		pb_len(b, field, c.s, c.len);
		sbuf_free(&c);
	}
	free(keys);
}

static void pb_extensions(struct sbuf *b, unsigned field, const json_t *o)
{
	pb_named(b, field, o, pb_any, EXTENSIONS);
}

static void pb_schema(struct sbuf *b, const json_t *s);

static void pb_schema_list(struct sbuf *b, const json_t *s)
{
	pb_sub(b, 1, pb_schema, s); /* ItemsItem.schema */
}

static void pb_additional(struct sbuf *b, const json_t *s)
{
	if (json_is_boolean(s)) {
		/* false is proto3's zero: an empty oneof reads as "no schema". */
		pb_varint(b, 2 << 3);
		pb_varint(b, json_is_true(s));
	} else
		pb_sub(b, 1, pb_schema, s);
}

static void pb_type(struct sbuf *b, const json_t *t)
{
	if (json_is_string(t))
		pb_str(b, 1, t);
	else
		pb_strs(b, 1, t);
}

static void pb_properties(struct sbuf *b, const json_t *props)
{
	pb_named(b, 1, props, pb_schema, ALL_KEYS);
}

static void pb_schema(struct sbuf *b, const json_t *s)
{
	json_t *v;
	size_t i;

	pb_str(b, 1, json_object_get(s, "$ref"));
	pb_str(b, 2, json_object_get(s, "format"));
	pb_str(b, 3, json_object_get(s, "title"));
	pb_str(b, 4, json_object_get(s, "description"));
	if ((v = json_object_get(s, "default")))
		pb_sub(b, 5, pb_any, v);
	pb_bool(b, 16, json_object_get(s, "uniqueItems"));
	pb_strs(b, 19, json_object_get(s, "required"));
	json_array_foreach(json_object_get(s, "enum"), i, v) pb_sub(b, 20, pb_any, v);
	if ((v = json_object_get(s, "additionalProperties")))
		pb_sub(b, 21, pb_additional, v);
	if ((v = json_object_get(s, "type")))
		pb_sub(b, 22, pb_type, v);
	if ((v = json_object_get(s, "items")))
		pb_sub(b, 23, pb_schema_list, v);
	json_array_foreach(json_object_get(s, "allOf"), i, v) pb_sub(b, 24, pb_schema, v);
	if ((v = json_object_get(s, "properties")))
		pb_sub(b, 25, pb_properties, v);
	pb_extensions(b, 31, s);
}

/* Query and path parameters share their first fields; unique_items and
 * the extensions differ (QueryParameterSubSchema: 20, 23; Path...: 19, 22). */
static void pb_nonbody_fields(struct sbuf *b, const json_t *p, bool query)
{
	pb_bool(b, 1, json_object_get(p, "required"));
	pb_str(b, 2, json_object_get(p, "in"));
	pb_str(b, 3, json_object_get(p, "description"));
	pb_str(b, 4, json_object_get(p, "name"));
	pb_str(b, query ? 6 : 5, json_object_get(p, "type"));
	pb_bool(b, query ? 20 : 19, json_object_get(p, "uniqueItems"));
	pb_extensions(b, query ? 23 : 22, p);
}

static void pb_query_param(struct sbuf *b, const json_t *p)
{
	pb_nonbody_fields(b, p, true);
}

static void pb_path_param(struct sbuf *b, const json_t *p)
{
	pb_nonbody_fields(b, p, false);
}

static void pb_nonbody(struct sbuf *b, const json_t *p)
{
	if (!strcmp(json_string_value(json_object_get(p, "in")), "path"))
		pb_sub(b, 4, pb_path_param, p);
	else
		pb_sub(b, 3, pb_query_param, p);
}

static void pb_body(struct sbuf *b, const json_t *p)
{
	pb_str(b, 1, json_object_get(p, "description"));
	pb_str(b, 2, json_object_get(p, "name"));
	pb_str(b, 3, json_object_get(p, "in"));
	pb_bool(b, 4, json_object_get(p, "required"));
	pb_sub(b, 5, pb_schema, json_object_get(p, "schema"));
	pb_extensions(b, 6, p);
}

static void pb_parameter(struct sbuf *b, const json_t *p)
{
	const char *in = json_string_value(json_object_get(p, "in"));
	if (in && !strcmp(in, "body"))
		pb_sub(b, 1, pb_body, p);
	else
		pb_sub(b, 2, pb_nonbody, p);
}

static void pb_parameters_item(struct sbuf *b, const json_t *p)
{
	pb_sub(b, 1, pb_parameter, p);
}

static void pb_schema_item(struct sbuf *b, const json_t *s)
{
	pb_sub(b, 1, pb_schema, s);
}

static void pb_response(struct sbuf *b, const json_t *r)
{
	json_t *s = json_object_get(r, "schema");
	pb_str(b, 1, json_object_get(r, "description"));
	if (s)
		pb_sub(b, 2, pb_schema_item, s);
	pb_extensions(b, 5, r);
}

static void pb_response_value(struct sbuf *b, const json_t *r)
{
	pb_sub(b, 1, pb_response, r);
}

static void pb_responses(struct sbuf *b, const json_t *rs)
{
	pb_named(b, 1, rs, pb_response_value, NOT_EXTENSIONS);
	pb_extensions(b, 2, rs);
}

static void pb_operation(struct sbuf *b, const json_t *op)
{
	json_t *v;
	size_t i;

	pb_strs(b, 1, json_object_get(op, "tags"));
	pb_str(b, 3, json_object_get(op, "description"));
	pb_str(b, 5, json_object_get(op, "operationId"));
	pb_strs(b, 6, json_object_get(op, "produces"));
	pb_strs(b, 7, json_object_get(op, "consumes"));
	json_array_foreach(json_object_get(op, "parameters"), i, v)
	    pb_sub(b, 8, pb_parameters_item, v);
	if ((v = json_object_get(op, "responses")))
		pb_sub(b, 9, pb_responses, v);
	pb_strs(b, 10, json_object_get(op, "schemes"));
	pb_extensions(b, 13, op);
}

static void pb_path_item(struct sbuf *b, const json_t *item)
{
	static const char *const methods[] = {"get",     "put",  "post", "delete",
	                                      "options", "head", "patch"};
	json_t *v;
	size_t i;

	for (unsigned m = 0; m < 7; m++)
		if ((v = json_object_get(item, methods[m])))
			pb_sub(b, 2 + m, pb_operation, v);
	json_array_foreach(json_object_get(item, "parameters"), i, v)
	    pb_sub(b, 9, pb_parameters_item, v);
	pb_extensions(b, 10, item);
}

static void pb_paths(struct sbuf *b, const json_t *paths)
{
	pb_extensions(b, 1, paths);
	pb_named(b, 2, paths, pb_path_item, NOT_EXTENSIONS);
}

static void pb_definitions(struct sbuf *b, const json_t *defs)
{
	pb_named(b, 1, defs, pb_schema, ALL_KEYS);
}

static void pb_info(struct sbuf *b, const json_t *info)
{
	pb_str(b, 1, json_object_get(info, "title"));
	pb_str(b, 2, json_object_get(info, "version"));
	pb_str(b, 3, json_object_get(info, "description"));
	pb_extensions(b, 7, info);
}

void openapi_v2_protobuf(const json_t *doc, struct sbuf *out)
{
	json_t *v;

	pb_str(out, 1, json_object_get(doc, "swagger"));
	if ((v = json_object_get(doc, "info")))
		pb_sub(out, 2, pb_info, v);
	if ((v = json_object_get(doc, "paths")))
		pb_sub(out, 8, pb_paths, v);
	if ((v = json_object_get(doc, "definitions")))
		pb_sub(out, 9, pb_definitions, v);
	pb_extensions(out, 16, doc);
}
