/* NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods
 * that tolerate node.kubernetes.io/unschedulable:NoSchedule. */
#include "scheduler/internal.h"

#include "api/taints.h"

#include "base/jx.h"

static bool tolerates_unschedulable(const json_t *pod)
{
	json_t *taint = json_pack("{s:s,s:s}", "key", "node.kubernetes.io/unschedulable", "effect",
				  "NoSchedule");
	bool ok = tolerations_find(jx_get(pod, "spec.tolerations"), taint) != NULL;
	json_decref(taint);
	return ok;
}

static bool fits(const json_t *pod, const json_t *node)
{
	return !json_is_true(jx_get(node, "spec.unschedulable")) || tolerates_unschedulable(pod);
}

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	if (ni->unschedulable && !tolerates_unschedulable(cy->pod))
		status_add(st, CODE_UNRESOLVABLE, "node(s) were unschedulable");
}

static bool hint(const json_t *pod, unsigned ev, const json_t *obj)
{
	return ev == EV_POD_TOLERATIONS ? tolerates_unschedulable(pod) : fits(pod, obj);
}

const struct plugin plugin_node_unschedulable = {
	.name = "NodeUnschedulable",
	.filter = filter,
	.events = EV_NODE_ADD | EV_NODE_TAINT | EV_POD_TOLERATIONS,
	.hint = hint,
};
