/*
 * typed — request bodies decoded as upstream decodes them into Go structs.
 *
 * Upstream never stores what a client sent: it decodes the body into the
 * kind's Go type and encodes that. cube keeps JSON, so it does the decode's
 * work on the JSON instead (api/schema.h's schema_conform): wrong types are
 * refused with the Go decoder's text, unknown fields dropped (and, as the
 * fieldValidation parameter asks, refused or warned about), null read as
 * the zero value, quantities and times rewritten in their canonical form.
 * The answers are upstream's handlers':
 *
 *   create, update: 400 `<Kind> in version "v1" cannot be handled as a
 *     <Kind>: json: cannot unmarshal ...` (rest.go transformDecodeError);
 *     fieldValidation=Strict: the same 400 with `strict decoding error:
 *     unknown field "spec.foo", unknown field "x"`; Warn (the default): a
 *     `Warning: 299 - "unknown field \"spec.foo\""` header each; Ignore:
 *     nothing.
 *   patch: 422 ` "" is invalid: patch: Invalid value: "<v>": <error>` with
 *     one cause on field "patch" (patch.go), where <v> is the patched
 *     object's JSON for merge and JSON patches and Go's %v of the patch for
 *     strategic merge patches, whose errors are the unstructured
 *     converter's ("cannot restore map from string"); unknown fields, sorted
 *     for strategic merge, refused under Strict the same way.
 *   fieldValidation outside "", Ignore, Warn, Strict: 422 as upstream's
 *     `CreateOptions.meta.k8s.io "" is invalid: fieldValidation: ...`.
 *
 * Bodies of another kind than the one the URL decodes into (a check later
 * refuses them) and DeleteOptions are left as they are.
 *
 * Threads: the API server's loop thread, as the handlers.
 */
#include "apiserver/internal.h"

#include "api/schema.h"
#include "api/status.h"
#include "api/validation.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/sbuf.h"
#include "base/strv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

enum field_validation { FV_IGNORE, FV_WARN, FV_STRICT };

/* "CreateOptions" for POST, "UpdateOptions" for PUT, "PatchOptions" for PATCH. */
static const char *options_kind(const struct req *r)
{
	return is(r->verb, "create")   ? "CreateOptions"
	       : is(r->verb, "update") ? "UpdateOptions"
	                               : "PatchOptions";
}

bool dry_run_check(struct req *r, const json_t *body_values, struct validation *v)
{
	static const char *const supported[] = {"All", NULL};
	struct sbuf shown = SBUF_INIT;
	const struct evkeyval *kv;
	bool bad = false;
	size_t n = 0, i;
	json_t *x;

	sbuf_add(&shown, "[]string{");
	json_array_foreach(body_values, i, x)
	{
		const char *s = json_string_value(x) ? json_string_value(x) : "";
		bad |= strcmp(s, "All") != 0;
		sbuf_add(&shown, n++ ? ", " : "");
		sbuf_quote(&shown, s);
	}
	TAILQ_FOREACH(kv, &r->query, next)
	{
		if (strcmp(kv->key, "dryRun"))
			continue;
		bad |= strcmp(kv->value, "All") != 0;
		sbuf_add(&shown, n++ ? ", " : "");
		sbuf_quote(&shown, kv->value);
	}
	sbuf_addc(&shown, '}');
	if (bad)
		val_unsupported_shown(v, "dryRun", shown.s, supported);
	sbuf_free(&shown);
	return !bad;
}

/* The options of a create, update or patch (upstream's
 * Validate{Create,Update,Patch}Options: dryRun, then fieldValidation):
 * 0 with the fieldValidation mode, or the 422 has been answered. */
static int field_validation(struct req *r, enum field_validation *out)
{
	static const char *const supported[] = {"", "Ignore", "Strict", "Warn", NULL};
	const char *fv = req_query(r, "fieldValidation");
	struct validation v;
	char kind[64];
	json_t *st;
	char *msg;

	val_init(&v);
	dry_run_check(r, NULL, &v);
	if (!fv || !*fv || is(fv, "Warn"))
		*out = FV_WARN;
	else if (is(fv, "Strict"))
		*out = FV_STRICT;
	else if (is(fv, "Ignore"))
		*out = FV_IGNORE;
	else
		val_unsupported(&v, "fieldValidation", fv, supported);
	if (val_ok(&v)) {
		val_free(&v);
		return 0;
	}
	snprintf(kind, sizeof(kind), "%s.meta.k8s.io", options_kind(r));
	msg = val_message(&v, kind, "");
	st = status_failure(ERR_UNPROCESSABLE, msg, "meta.k8s.io", options_kind(r), "");
	json_object_set(json_object_get(st, "details"), "causes", v.causes);
	free(msg);
	val_free(&v);
	req_fail_status(r, st);
	return ERR_UNPROCESSABLE;
}

int check_field_validation(struct req *r)
{
	enum field_validation fv;
	return field_validation(r, &fv);
}

/* The kind a body on this URL decodes into, and its apiVersion. */
static const struct schema_msg *target(const struct req *r, char *api_version, size_t n,
                                       const char **kind)
{
	const char *group = r->sub ? r->sub->group : r->res->group;
	const char *version = r->sub ? r->sub->version : r->res->version;

	*kind = r->sub ? r->sub->kind : r->res->kind;
	if (*group)
		snprintf(api_version, n, "%s/%s", group, version);
	else
		snprintf(api_version, n, "%s", version);
	return schema_kind_msg(api_version, *kind);
}

static void warn_unknown(struct req *r, const json_t *unknown)
{
	size_t i;
	json_t *p;

	json_array_foreach(unknown, i, p)
	{
		if (i == 100) /* the decoder keeps the first hundred */
			break;
		char *text = str_printf("unknown field \"%s\"", json_string_value(p));
		req_warn(r, text);
		free(text);
	}
}

/* "strict decoding error: unknown field \"a\", unknown field \"b\"" (malloc'd). */
static char *strict_error(const json_t *unknown)
{
	struct sbuf b = SBUF_INIT;
	size_t i;
	json_t *p;

	sbuf_add(&b, "strict decoding error: ");
	json_array_foreach(unknown, i, p)
	{
		/* upstream keeps the first hundred */
		if (i == 100)
			break;
		sbuf_addf(&b, "%sunknown field ", i ? ", " : "");
		sbuf_quote(&b, json_string_value(p));
	}
	return sbuf_take(&b);
}

int typed_body(struct req *r, json_t *obj)
{
	const char *kind, *body_kind = jx_str(obj, "kind"), *body_api = jx_str(obj, "apiVersion");
	char api_version[128], *msg = NULL;
	const struct schema_msg *m;
	enum field_validation fv;
	json_t *unknown = NULL;
	const char *version;
	int rc;

	if (!is(r->verb, "create") && !is(r->verb, "update"))
		return 0;
	if (!(m = target(r, api_version, sizeof(api_version), &kind)))
		return 0;
	if ((body_kind && *body_kind && !is(body_kind, kind)) ||
	    (body_api && *body_api && !is(body_api, api_version)))
		return 0; /* not this kind: identity checks answer it */
	if (field_validation(r, &fv) < 0)
		return ERR_UNPROCESSABLE;
	rc = schema_conform(obj, m, fv == FV_IGNORE ? SCHEMA_DROP : SCHEMA_REPORT, 0, &unknown);
	if (rc < 0)
		msg = str_printf("%s", err_msg());
	else if (unknown && fv == FV_STRICT)
		msg = strict_error(unknown);
	if (msg) {
		char *text;
		version = strchr(api_version, '/') ? strchr(api_version, '/') + 1 : api_version;
		text = str_printf("%s in version \"%s\" cannot be handled as a %s: %s", kind,
		                  version, kind, msg);
		req_fail(r, ERR_INVALID, text);
		free(text);
		free(msg);
		json_decref(unknown);
		return ERR_INVALID;
	}
	if (unknown)
		warn_unknown(r, unknown);
	json_decref(unknown);
	return 0;
}

/* The converter reports unknown fields sorted. */
static void sort_paths(json_t *unknown)
{
	jx_array_sort(unknown, jx_cmp_strings);
}

static void reply_patch_invalid(struct req *r, const char *value, const char *detail)
{
	struct validation v;
	char *msg;
	json_t *st;

	val_init(&v);
	val_invalid_str(&v, "patch", value, detail);
	msg = val_message(&v, "", "");
	st = status_failure(ERR_UNPROCESSABLE, msg, NULL, NULL, NULL);
	json_object_set_new(st, "details", json_pack("{s:O}", "causes", v.causes));
	free(msg);
	val_free(&v);
	req_fail_status(r, st);
}

/* Drop from unknown the paths base has itself: upstream's current object is
 * typed, so a patch's unknown fields can only be the patch's own; a stored
 * object written before cube decoded bodies may carry some. */
static void forget_inherited(json_t **unknown, const json_t *base, const struct schema_msg *m)
{
	json_t *copy, *had = NULL, *kept;
	size_t i, j;
	json_t *p, *q;

	if (!*unknown || !base)
		return;
	copy = json_deep_copy(base);
	if (schema_conform(copy, m, SCHEMA_REPORT, 0, &had) < 0 || !had) {
		json_decref(copy);
		json_decref(had);
		return;
	}
	kept = json_array();
	json_array_foreach(*unknown, i, p)
	{
		bool inherited = false;
		json_array_foreach(had, j, q) inherited = inherited || json_equal(p, q);
		if (!inherited)
			json_array_append(kept, p);
	}
	json_decref(*unknown);
	*unknown = json_array_size(kept) ? kept : NULL;
	if (!*unknown)
		json_decref(kept);
	json_decref(had);
	json_decref(copy);
}

int typed_patched(struct req *r, json_t *patched, const json_t *base, const char *content_type,
                  const char *patch, size_t patch_len)
{
	bool smp =
	    content_type && !strncmp(content_type, "application/strategic-merge-patch+json", 38);
	const char *kind;
	char api_version[128], *detail = NULL, *value;
	const struct schema_msg *m = target(r, api_version, sizeof(api_version), &kind);
	enum field_validation fv;
	json_t *unknown = NULL;
	int rc;

	if (!m)
		return 0;
	if (field_validation(r, &fv) < 0)
		return ERR_UNPROCESSABLE;
	/* Shown as the decode sees it: before this decode drops or rewrites anything. */
	if (smp) {
		json_t *p = jx_parse(patch, patch_len);
		value = p ? jx_go_string(p) : str_printf("%.*s", (int)patch_len, patch);
		json_decref(p);
	} else {
		value = json_dumps(patched, JSON_COMPACT | JSON_SORT_KEYS);
		if (!value)
			abort();
	}
	rc = schema_conform(patched, m, fv == FV_IGNORE ? SCHEMA_DROP : SCHEMA_REPORT,
	                    smp ? SCHEMA_CONVERTER : 0, &unknown);
	if (rc == 0)
		forget_inherited(&unknown, base, m);
	if (rc < 0) {
		detail = str_printf("%s", err_msg());
	} else if (unknown && fv == FV_STRICT) {
		if (smp)
			sort_paths(unknown);
		detail = strict_error(unknown);
	}
	if (detail) {
		reply_patch_invalid(r, value, detail);
		free(detail);
		free(value);
		json_decref(unknown);
		return ERR_UNPROCESSABLE;
	}
	free(value);
	if (unknown) {
		if (smp)
			sort_paths(unknown);
		warn_unknown(r, unknown);
	}
	json_decref(unknown);
	return 0;
}
