/* TaintToleration: a node's NoSchedule and NoExecute taints must all be
 * tolerated (the first one that is not is the reason); scoring prefers
 * nodes with fewer untolerated PreferNoSchedule taints. */
#include "scheduler/internal.h"

#include "api/taints.h"

#include "base/jx.h"

#include <string.h>

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	const json_t *t = json_array_size(ni->taints)
				  ? taints_first_untolerated(ni->taints, cy->tolerations)
				  : NULL;
	if (t)
		status_add(st, CODE_UNRESOLVABLE, "node(s) had untolerated taint {%s: %s}",
			   jx_str(t, "key") ?: "", jx_str(t, "value") ?: "");
}

/* Only tolerations with effect PreferNoSchedule or none count. */
json_t *taint_toleration_prefer(const json_t *tolerations)
{
	json_t *usable = json_array();
	const json_t *tol;
	size_t i;
	json_array_foreach(tolerations, i, tol)
	{
		const char *e = jx_str(tol, "effect") ?: "";
		if (!*e || !strcmp(e, "PreferNoSchedule"))
			json_array_append(usable, (json_t *)tol);
	}
	return usable;
}

static int64_t score(const struct cycle *cy, const struct node_info *ni)
{
	static const char *const prefer[] = {"PreferNoSchedule", NULL};
	const json_t *t;
	int64_t n = 0;
	size_t i;

	json_array_foreach(ni->taints, i, t) if (
		taint_effect_in(t, prefer) && !tolerations_find(cy->prefer_tolerations, t)) n++;
	return n;
}

static void normalize(int64_t *scores, size_t n)
{
	normalize_default(scores, n, true);
}

static bool hint(const json_t *pod, unsigned ev, const json_t *obj)
{
	if (ev == EV_POD_TOLERATIONS)
		return true;
	return !taints_first_untolerated(jx_get(obj, "spec.taints"),
					 jx_get(pod, "spec.tolerations"));
}

const struct plugin plugin_taint_toleration = {
	.name = "TaintToleration",
	.default_weight = 3,
	.filter = filter,
	.score = score,
	.normalize = normalize,
	.events = EV_NODE_ADD | EV_NODE_TAINT | EV_POD_TOLERATIONS,
	.hint = hint,
};
