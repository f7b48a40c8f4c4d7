/* NodeAffinity: spec.nodeSelector and the required node affinity terms
 * (any term, all of its requirements) must match the node; the preferred
 * terms' weights are its score. */
#include "scheduler/internal.h"

#include "base/jx.h"

#include <stdlib.h>
#include <string.h>

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

static bool required_matches(const json_t *pod, const json_t *node)
{
	const json_t *sel = jx_get(pod, "spec.nodeSelector"), *terms, *t;
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
	terms = jx_get(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
			    "nodeSelectorTerms");
	if (!terms)
		return true;
	json_array_foreach(terms, i, t) if (node_selector_term_matches(t, node)) return true;
	return false;
}

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	if (!required_matches(cy->pod, ni->node))
		status_add(st, CODE_UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector");
}

static const json_t *preferred(const json_t *pod)
{
	return jx_get(pod, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution");
}

static bool pre_score(const struct cycle *cy)
{
	return json_array_size(preferred(cy->pod)) > 0;
}

static int64_t score(const struct cycle *cy, const struct node_info *ni)
{
	const json_t *t;
	int64_t sum = 0;
	size_t i;
	json_array_foreach(preferred(cy->pod), i, t)
	{
		int64_t w = jx_int(t, "weight", 0);
		if (w && node_selector_term_matches(json_object_get(t, "preference"), ni->node))
			sum += w;
	}
	return sum;
}

static void normalize(int64_t *scores, size_t n)
{
	normalize_default(scores, n, false);
}

static bool hint(const json_t *pod, unsigned ev, const json_t *obj)
{
	(void)ev;
	return required_matches(pod, obj);
}

const struct plugin plugin_node_affinity = {
	.name = "NodeAffinity",
	.default_weight = 2,
	.filter = filter,
	.pre_score = pre_score,
	.score = score,
	.normalize = normalize,
	.events = EV_NODE_ADD | EV_NODE_LABEL,
	.hint = hint,
};
