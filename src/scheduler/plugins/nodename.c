/* NodeName: a pod that names a node (spec.nodeName set before scheduling
 * never reaches the queue; this is for the scheduler's own checks) fits
 * only that node. */
#include "scheduler/internal.h"

#include "base/jx.h"

#include <string.h>

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	const char *want = cy->node_name;
	if (want && *want && strcmp(want, ni->name))
		status_add(st, CODE_UNRESOLVABLE, "node(s) didn't match the requested node name");
}

const struct plugin plugin_node_name = {
	.name = "NodeName",
	.filter = filter,
	.events = EV_NODE_ADD,
};
