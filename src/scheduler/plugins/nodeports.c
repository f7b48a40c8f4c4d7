/* NodePorts: a pod's host ports must be free on the node (same protocol and
 * port, and the same host IP or either one 0.0.0.0). */
#include "scheduler/internal.h"

#include "base/jx.h"

#include <string.h>

static const char *ip_of(const json_t *p)
{
	const char *ip = jx_str(p, "hostIP");
	return ip && *ip ? ip : "0.0.0.0";
}

static bool conflict(const json_t *a, const json_t *b)
{
	const char *ia = ip_of(a), *ib = ip_of(b);
	if (jx_int(a, "hostPort", 0) != jx_int(b, "hostPort", 0))
		return false;
	if (strcmp(jx_str(a, "protocol") ?: "TCP", jx_str(b, "protocol") ?: "TCP"))
		return false;
	return !strcmp(ia, ib) || !strcmp(ia, "0.0.0.0") || !strcmp(ib, "0.0.0.0");
}

/* Does any host port of pod clash with one of `ports`? */
static bool pod_clashes(const json_t *pod, const json_t *ports)
{
	const json_t *c, *p, *q;
	size_t i, j, k;
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
		json_array_foreach(json_object_get(c, "ports"), j, p)
	{
		if (jx_int(p, "hostPort", 0) <= 0)
			continue;
		json_array_foreach(ports, k, q) if (conflict(p, q)) return true;
	}
	return false;
}

static void filter(const struct cycle *cy, const struct node_info *ni, struct status *st)
{
	const char *k;
	void *v;

	if (!json_array_size(cy->host_ports))
		return;
	for (size_t it = 0; hmap_next(&ni->pods, &it, &k, &v);)
		if (pod_clashes(v, cy->host_ports)) {
			status_add(st, CODE_UNSCHEDULABLE,
				   "node(s) didn't have free ports for the requested pod ports");
			return;
		}
}

/* A new node may help; an assigned pod that went away, if it held one of
 * our ports. */
static bool hint(const json_t *pod, unsigned ev, const json_t *obj)
{
	json_t *ports, *c, *p;
	size_t i, j;
	bool clash;

	if (ev == EV_NODE_ADD)
		return true;
	ports = json_array();
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
		json_array_foreach(json_object_get(c, "ports"), j, p) if (jx_int(p, "hostPort", 0) > 0)
			json_array_append(ports, p);
	clash = pod_clashes(obj, ports);
	json_decref(ports);
	return clash;
}

const struct plugin plugin_node_ports = {
	.name = "NodePorts",
	.filter = filter,
	.events = EV_POD_DELETE | EV_NODE_ADD,
	.hint = hint,
};
