#include "api/validation.h"

#include "api/selector.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void val_init(struct validation *v)
{
	v->causes = json_array();
}

void val_free(struct validation *v)
{
	json_decref(v->causes);
	v->causes = NULL;
}

bool val_ok(const struct validation *v)
{
	return json_array_size(v->causes) == 0;
}

static void add(struct validation *v, const char *reason, const char *field, const char *msg)
{
	json_array_append_new(v->causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message",
						   msg, "field", field));
}

void val_required(struct validation *v, const char *field)
{
	add(v, "FieldValueRequired", field, "Required value");
}

void val_required_detail(struct validation *v, const char *field, const char *detail)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "Required value: %s", detail);
	add(v, "FieldValueRequired", field, msg);
}

void val_invalid_shown(struct validation *v, const char *field, const char *shown,
		       const char *detail)
{
	char *msg;
	if (asprintf(&msg, "Invalid value: %s: %s", shown, detail) < 0)
		abort();
	add(v, "FieldValueInvalid", field, msg);
	free(msg);
}

void val_invalid(struct validation *v, const char *field, const json_t *value, const char *detail)
{
	/* A nil value is the string "null" to ErrorBody, printed with %q. */
	char *shown = value && !json_is_null(value)
			      ? json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT)
			      : NULL;
	val_invalid_shown(v, field, shown ? shown : "\"null\"", detail);
	free(shown);
}

void val_invalid_str(struct validation *v, const char *field, const char *value,
		     const char *detail)
{
	json_t *s = json_string(value ? value : "");
	val_invalid(v, field, s, detail);
	json_decref(s);
}

void val_unsupported_shown(struct validation *v, const char *field, const char *shown,
			   const char *const *supported)
{
	char list[512] = "", *msg;
	for (size_t i = 0; supported[i]; i++) {
		size_t n = strlen(list);
		snprintf(list + n, sizeof(list) - n, "%s\"%s\"", i ? ", " : "", supported[i]);
	}
	if (asprintf(&msg, "Unsupported value: %s: supported values: %s", shown, list) < 0)
		abort();
	add(v, "FieldValueNotSupported", field, msg);
	free(msg);
}

void val_unsupported(struct validation *v, const char *field, const char *value,
		     const char *const *supported)
{
	char *shown;
	if (asprintf(&shown, "\"%s\"", value) < 0)
		abort();
	val_unsupported_shown(v, field, shown, supported);
	free(shown);
}

void val_forbidden(struct validation *v, const char *field, const char *detail)
{
	char *msg;
	if (asprintf(&msg, "Forbidden: %s", detail) < 0)
		abort();
	add(v, "FieldValueForbidden", field, msg);
	free(msg);
}

void val_too_long(struct validation *v, const char *field, const char *value, int max)
{
	char *msg;
	if (asprintf(&msg, "Too long: may not be more than %d bytes", max) < 0)
		abort();
	add(v, "FieldValueTooLong", field, msg);
	free(msg);
}

static bool alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_label(const char *s, size_t n)
{
	if (n == 0 || n > 63 || !alnum_lower(s[0]) || !alnum_lower(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

bool val_dns_label(struct validation *v, const char *field, const char *name)
{
	if (strlen(name) > 63) {
		val_invalid_str(v, field, name, "must be no more than 63 characters");
		return false;
	}
	if (!is_label(name, strlen(name))) {
		val_invalid_str(v, field, name,
				"a lowercase RFC 1123 label must consist of lower case "
				"alphanumeric characters or '-', and must start and end with an "
				"alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
				"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
		return false;
	}
	return true;
}

bool val_dns_subdomain(struct validation *v, const char *field, const char *name)
{
	size_t n = strlen(name);
	bool ok = n > 0 && n <= 253;

	for (const char *p = name; ok && *p;) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		/* Labels inside a subdomain may be longer than 63 here, as upstream allows. */
		ok = len > 0 && alnum_lower(p[0]) && alnum_lower(p[len - 1]);
		for (size_t i = 0; ok && i < len; i++)
			ok = alnum_lower(p[i]) || p[i] == '-';
		p += len + (dot ? 1 : 0);
		if (dot && !*p)
			ok = false;
	}
	if (n > 253) {
		val_invalid_str(v, field, name, "must be no more than 253 characters");
		return false;
	}
	if (!ok) {
		val_invalid_str(v, field, name,
				"a lowercase RFC 1123 subdomain must consist of lower case "
				"alphanumeric characters, '-' or '.', and must start and end with "
				"an alphanumeric character (e.g. 'example.com', regex used for "
				"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
				"[a-z0-9])?)*')");
		return false;
	}
	return true;
}

void val_metadata_maps(struct validation *v, const json_t *meta)
{
	const char *k;
	json_t *val;
	json_t *labels = json_object_get(meta, "labels");

	json_object_foreach(labels, k, val)
	{
		/* The selector parser knows upstream's label syntax: reuse it. */
		char *text;
		struct label_selector *sel;
		if (!json_is_string(val)) {
			val_invalid(v, "metadata.labels", val, "label values must be strings");
			continue;
		}
		if (asprintf(&text, "%s=%s", k, json_string_value(val)) < 0)
			abort();
		sel = label_selector_parse(text);
		if (!sel)
			val_invalid_str(v, "metadata.labels", k,
					"name part must consist of alphanumeric characters, '-', "
					"'_' or '.', and must start and end with an alphanumeric "
					"character (or the value is not a valid label value)");
		label_selector_free(sel);
		free(text);
	}
	json_object_foreach(json_object_get(meta, "annotations"), k, val)
	{
		if (!json_is_string(val))
			val_invalid(v, "metadata.annotations", val,
				    "annotation values must be strings");
	}
}

void val_immutable(struct validation *v, const char *field, const json_t *now, const json_t *old)
{
	if (!json_equal(now, old) && !(now == NULL && old == NULL))
		val_invalid(v, field, now ? now : json_null(), "field is immutable");
}

char *val_message(const struct validation *v, const char *kind, const char *name)
{
	size_t n = json_array_size(v->causes), cap = 256, len = 0;
	char *out = malloc(cap);

	if (!out)
		abort();
	len = (size_t)snprintf(out, cap, "%s \"%s\" is invalid: %s", kind, name ? name : "",
			       n > 1 ? "[" : "");
	for (size_t i = 0; i < n; i++) {
		json_t *c = json_array_get(v->causes, i);
		const char *f = json_string_value(json_object_get(c, "field"));
		const char *m = json_string_value(json_object_get(c, "message"));
		size_t need = len + strlen(f) + strlen(m) + 8;
		if (need > cap && !(out = realloc(out, cap = need * 2)))
			abort();
		len += (size_t)snprintf(out + len, cap - len, "%s%s: %s", i ? ", " : "", f, m);
	}
	if (n > 1) {
		if (len + 2 > cap && !(out = realloc(out, cap = len + 2)))
			abort();
		strcpy(out + len, "]");
	}
	return out;
}
