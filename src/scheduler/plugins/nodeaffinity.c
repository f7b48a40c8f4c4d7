/* NodeAffinity: spec.nodeSelector and the required node affinity terms
 * (any term, all of its requirements) must match the node; the preferred
 * terms' weights are its score. */
#include "scheduler/internal.h"

#include "api/taints.h"

#include "base/jx.h"

#include <stdlib.h>
#include <string.h>

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	if (cy->node_selector && !pod_node_selector_matches(cy->spec, ni->node))
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
	return pod_node_selector_matches(jx_get(pod, "spec"), obj);
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
