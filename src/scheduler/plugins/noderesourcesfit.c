/* NodeResourcesFit: the pod's requests must fit in what the node's pods
 * leave of its allocatable — every shortfall is a reason, in upstream's
 * order (Too many pods, cpu, memory, ephemeral-storage, the rest); scoring
 * is LeastAllocated over cpu and memory, weight 1 each, on the non-zero
 * requests. */
#include "scheduler/internal.h"

#include "base/jx.h"

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	const struct resources *req = &cy->req.r, *alloc = &ni->alloc, *used = &ni->requested;

	if (used->pods + 1 > alloc->pods)
		status_add(st, CODE_UNSCHEDULABLE, "Too many pods");
	if (req->cpu > 0 && req->cpu > alloc->cpu - used->cpu)
		status_add(st, CODE_UNSCHEDULABLE, "Insufficient cpu");
	if (req->memory > 0 && req->memory > alloc->memory - used->memory)
		status_add(st, CODE_UNSCHEDULABLE, "Insufficient memory");
	if (req->ephemeral > 0 && req->ephemeral > alloc->ephemeral - used->ephemeral)
		status_add(st, CODE_UNSCHEDULABLE, "Insufficient ephemeral-storage");
	for (int i = 0; i < req->next; i++) {
		const char *name = req->ext[i].name;
		if (req->ext[i].v > 0 &&
		    req->ext[i].v > resources_get(alloc, name) - resources_get(used, name))
			status_add(st, CODE_UNSCHEDULABLE, "Insufficient %s", name);
	}
}

static int64_t least(int64_t requested, int64_t capacity)
{
	if (capacity == 0 || requested > capacity)
		return 0;
	return (capacity - requested) * MAX_NODE_SCORE / capacity;
}

/* cpu and memory, weight 1 each; a resource the node has none of is left
 * out of the mean. */
static int64_t score(const struct cycle *cy, const struct node_info *ni)
{
	int64_t total = 0, weights = 0;
	if (ni->alloc.cpu) {
		total += least(ni->nz_cpu + cy->req.nz_cpu, ni->alloc.cpu);
		weights++;
	}
	if (ni->alloc.memory) {
		total += least(ni->nz_memory + cy->req.nz_memory, ni->alloc.memory);
		weights++;
	}
	return weights ? total / weights : 0;
}

/* An added node, or a new allocatable: worth trying if the pod fits. A
 * deleted assigned pod always is. */
static bool hint(const json_t *pod, unsigned ev, const json_t *obj)
{
	struct pod_req req;
	struct resources alloc;

	if (ev == EV_POD_DELETE)
		return true;
	pod_requests(pod, &req);
	node_allocatable(obj, &alloc);
	return req.r.cpu <= alloc.cpu && req.r.memory <= alloc.memory &&
	       req.r.ephemeral <= alloc.ephemeral && alloc.pods >= 1;
}

const struct plugin plugin_node_resources_fit = {
	.name = "NodeResourcesFit",
	.default_weight = 1,
	.filter = filter,
	.score = score,
	.events = EV_POD_DELETE | EV_NODE_ADD | EV_NODE_ALLOCATABLE,
	.hint = hint,
};
