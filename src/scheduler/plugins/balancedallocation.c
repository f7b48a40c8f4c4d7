/* NodeResourcesBalancedAllocation: prefer nodes whose cpu and memory would
 * be used in equal shares — 100 · (1 − |f_cpu − f_mem| / 2), f = requested
 * / allocatable (capped at 1), on the real requests. */
#include "scheduler/internal.h"

#include <math.h>

static double fraction(int64_t requested, int64_t capacity)
{
	double f;
	if (capacity <= 0)
		return 1;
	f = (double)requested / (double)capacity;
	return f > 1 ? 1 : f;
}

/* A resource the node has none of is left out; with fewer than two, the
 * spread is 0. */
static int64_t score(const struct cycle *cy, const struct node_info *ni)
{
	double std = 0;
	if (ni->alloc.cpu && ni->alloc.memory) {
		double cpu = fraction(ni->requested.cpu + cy->req.r.cpu, ni->alloc.cpu);
		double mem = fraction(ni->requested.memory + cy->req.r.memory, ni->alloc.memory);
		std = fabs(cpu - mem) / 2;
	}
	return (int64_t)((1 - std) * MAX_NODE_SCORE);
}

const struct plugin plugin_balanced_allocation = {
	.name = "NodeResourcesBalancedAllocation",
	.default_weight = 1,
	.score = score,
};
