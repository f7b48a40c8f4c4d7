#include "api/taints.h"

#include "base/jx.h"

#include <stdlib.h>

#include <string.h>

static const char *str(const json_t *obj, const char *key)
{
	const char *v = json_string_value(json_object_get(obj, key));
	return v ? v : "";
}

bool toleration_tolerates(const json_t *tol, const json_t *taint)
{
	const char *effect = str(tol, "effect"), *key = str(tol, "key"), *op = str(tol, "operator");

	if (*effect && strcmp(effect, str(taint, "effect")))
		return false;
	if (*key && strcmp(key, str(taint, "key")))
		return false;
	if (!strcmp(op, "Exists"))
		return true;
	if (!*op || !strcmp(op, "Equal"))
		return !strcmp(str(tol, "value"), str(taint, "value"));
	return false;
}

const json_t *tolerations_find(const json_t *tolerations, const json_t *taint)
{
	const json_t *t;
	size_t i;
	json_array_foreach(tolerations, i, t) if (toleration_tolerates(t, taint)) return t;
	return NULL;
}

bool taint_effect_in(const json_t *taint, const char *const *effects)
{
	const char *e = str(taint, "effect");
	for (size_t i = 0; effects[i]; i++)
		if (!strcmp(e, effects[i]))
			return true;
	return false;
}

const json_t *taints_first_untolerated(const json_t *taints, const json_t *tolerations)
{
	static const char *const hard[] = {"NoSchedule", "NoExecute", NULL};
	const json_t *t;
	size_t i;
	json_array_foreach(taints, i, t) if (taint_effect_in(t, hard) &&
					     !tolerations_find(tolerations, t)) return t;
	return NULL;
}

/* ---- node selectors ---------------------------------------------------------------- */

static bool in_values(const json_t *values, const char *v)
{
	const json_t *x;
	size_t i;
	json_array_foreach(values, i, x) if (!strcmp(json_string_value(x) ?: "", v)) return true;
	return false;
}

/* Gt / Lt: both sides must be integers, else no match. */
static bool compare(const json_t *values, const char *v, bool greater)
{
	char *end;
	long long have, want;
	if (!v || json_array_size(values) != 1)
		return false;
	have = strtoll(v, &end, 10);
	if (!*v || *end)
		return false;
	want = strtoll(json_string_value(json_array_get(values, 0)) ?: "", &end, 10);
	if (*end)
		return false;
	return greater ? have > want : have < want;
}

static bool requirement(const json_t *req, const char *value)
{
	const char *op = jx_str(req, "operator") ?: "";
	const json_t *values = json_object_get(req, "values");

	if (!strcmp(op, "In"))
		return value && in_values(values, value);
	if (!strcmp(op, "NotIn"))
		return !value || !in_values(values, value);
	if (!strcmp(op, "Exists"))
		return value != NULL;
	if (!strcmp(op, "DoesNotExist"))
		return value == NULL;
	if (!strcmp(op, "Gt"))
		return compare(values, value, true);
	if (!strcmp(op, "Lt"))
		return compare(values, value, false);
	return false;
}

bool node_selector_term_matches(const json_t *term, const json_t *node)
{
	const json_t *labels = jx_get(node, "metadata.labels"), *req;
	const json_t *exprs = json_object_get(term, "matchExpressions");
	const json_t *fields = json_object_get(term, "matchFields");
	size_t i;

	if (!json_array_size(exprs) && !json_array_size(fields))
		return false; /* an empty term matches nothing */
	json_array_foreach(exprs, i, req) if (
		!requirement(req, json_string_value(json_object_get(
					  labels, jx_str(req, "key") ?: "")))) return false;
	json_array_foreach(fields, i, req)
	{
		if (strcmp(jx_str(req, "key") ?: "", "metadata.name"))
			return false;
		if (!requirement(req, jx_str(node, "metadata.name")))
			return false;
	}
	return true;
}

bool pod_node_selector_matches(const json_t *spec, const json_t *node)
{
	const json_t *sel = jx_get(spec, "nodeSelector"), *terms, *t;
	const json_t *labels = jx_get(node, "metadata.labels");
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach((json_t *)sel, k, v)
	{
		const char *have = json_string_value(json_object_get(labels, k));
		if (!have || strcmp(have, json_string_value(v) ?: ""))
			return false;
	}
	terms = jx_get(spec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
			     "nodeSelectorTerms");
	if (!terms)
		return true;
	json_array_foreach(terms, i, t) if (node_selector_term_matches(t, node)) return true;
	return false;
}

