/*
 * The scheduler's cache: every node with the pods that count against it —
 * assigned and not terminal, as the informer shows them, plus the pods this
 * scheduler has bound and the informer has not shown yet ("assumed", which
 * never expire: durationToExpireAssumedPod is 0 in 1.32). Requests are
 * summed as upstream's NodeInfo does: real requests for fitting, non-zero
 * ones (100m CPU, 200 MiB memory per container that sets none) for scoring.
 */
#include "scheduler/internal.h"

#include "api/quantity.h"

#include "base/jx.h"
#include "base/strv.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_MILLI_CPU 100
#define DEFAULT_MEMORY (200 * 1024 * 1024)

/* ---- resources ------------------------------------------------------------------- */

int64_t resources_get(const struct resources *r, const char *name)
{
	if (!strcmp(name, "cpu"))
		return r->cpu;
	if (!strcmp(name, "memory"))
		return r->memory;
	if (!strcmp(name, "ephemeral-storage"))
		return r->ephemeral;
	if (!strcmp(name, "pods"))
		return r->pods;
	for (int i = 0; i < r->next; i++)
		if (!strcmp(r->ext[i].name, name))
			return r->ext[i].v;
	return 0;
}

static void resources_put(struct resources *r, const char *name, int64_t v, bool add)
{
	int64_t *slot = NULL;

	if (!strcmp(name, "cpu"))
		slot = &r->cpu;
	else if (!strcmp(name, "memory"))
		slot = &r->memory;
	else if (!strcmp(name, "ephemeral-storage"))
		slot = &r->ephemeral;
	else if (!strcmp(name, "pods"))
		slot = &r->pods;
	for (int i = 0; !slot && i < r->next; i++)
		if (!strcmp(r->ext[i].name, name))
			slot = &r->ext[i].v;
	if (!slot) {
		if (r->next == RES_EXT_MAX)
			return; /* more extended resources than any node has */
		snprintf(r->ext[r->next].name, sizeof(r->ext[0].name), "%s", name);
		r->ext[r->next].v = 0;
		slot = &r->ext[r->next++].v;
	}
	*slot = add ? *slot + v : v;
}

void resources_add(struct resources *r, const struct resources *d, int sign)
{
	r->cpu += sign * d->cpu;
	r->memory += sign * d->memory;
	r->ephemeral += sign * d->ephemeral;
	r->pods += sign * d->pods;
	for (int i = 0; i < d->next; i++)
		resources_put(r, d->ext[i].name, sign * d->ext[i].v, true);
}

static int64_t amount(const char *name, const json_t *q)
{
	return !strcmp(name, "cpu") ? quantity_milli(q) : quantity_value(q);
}

/* A container's request for each resource: requests, else limits (the API
 * defaults requests from limits upstream). */
static void container_requests(const json_t *c, struct resources *out)
{
	const json_t *req = jx_get(c, "resources.requests"), *lim = jx_get(c, "resources.limits");
	const char *name;
	json_t *q;

	memset(out, 0, sizeof(*out));
	json_object_foreach((json_t *)lim, name, q) if (!json_object_get(req, name))
		resources_put(out, name, amount(name, q), false);
	json_object_foreach((json_t *)req, name, q) resources_put(out, name, amount(name, q), false);
}

static void max_into(struct resources *acc, const struct resources *r)
{
	if (r->cpu > acc->cpu)
		acc->cpu = r->cpu;
	if (r->memory > acc->memory)
		acc->memory = r->memory;
	if (r->ephemeral > acc->ephemeral)
		acc->ephemeral = r->ephemeral;
	for (int i = 0; i < r->next; i++)
		if (r->ext[i].v > resources_get(acc, r->ext[i].name))
			resources_put(acc, r->ext[i].name, r->ext[i].v, false);
}

/* A container's requests with the defaults scoring uses for a missing cpu
 * or memory request (NonMissingContainerRequests). */
static void nonzero(const json_t *c, const struct resources *real, struct resources *out)
{
	*out = *real;
	if (!jx_get(c, "resources.requests.cpu") && !real->cpu)
		out->cpu = DEFAULT_MILLI_CPU;
	if (!jx_get(c, "resources.requests.memory") && !real->memory)
		out->memory = DEFAULT_MEMORY;
}

/* PodRequests: the containers' sum; init containers run one at a time, so
 * the pod needs the largest of them if larger (restartable "sidecar" init
 * containers run alongside the later ones and add up); plus overhead. The
 * same over the non-zero requests. */
void pod_requests(const json_t *pod, struct pod_req *out)
{
	const json_t *c, *overhead = jx_get(pod, "spec.overhead");
	struct resources one, nz1, sum = {0}, nzsum = {0}, init = {0}, nzinit = {0};
	struct resources side = {0}, nzside = {0};
	const char *name;
	json_t *q;
	size_t i;

	memset(out, 0, sizeof(*out));
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
	{
		container_requests(c, &one);
		nonzero(c, &one, &nz1);
		resources_add(&sum, &one, 1);
		resources_add(&nzsum, &nz1, 1);
	}
	json_array_foreach(jx_get(pod, "spec.initContainers"), i, c)
	{
		container_requests(c, &one);
		nonzero(c, &one, &nz1);
		if (!strcmp(jx_str(c, "restartPolicy") ?: "", "Always")) {
			resources_add(&side, &one, 1);
			resources_add(&nzside, &nz1, 1);
			resources_add(&sum, &one, 1);
			resources_add(&nzsum, &nz1, 1);
			continue;
		}
		/* A regular init container runs beside the sidecars before it. */
		resources_add(&one, &side, 1);
		resources_add(&nz1, &nzside, 1);
		max_into(&init, &one);
		max_into(&nzinit, &nz1);
	}
	max_into(&sum, &init);
	max_into(&nzsum, &nzinit);
	json_object_foreach((json_t *)overhead, name, q)
	{
		resources_put(&sum, name, amount(name, q), true);
		resources_put(&nzsum, name, amount(name, q), true);
	}
	out->r = sum;
	out->r.pods = 1;
	out->nz_cpu = nzsum.cpu;
	out->nz_memory = nzsum.memory;
}

void node_allocatable(const json_t *node, struct resources *out)
{
	const char *name;
	json_t *q;

	memset(out, 0, sizeof(*out));
	json_object_foreach(jx_get(node, "status.allocatable"), name, q)
		resources_put(out, name, amount(name, q), false);
}

/* ---- nodes ------------------------------------------------------------------------ */

void scache_init(struct cache *c)
{
	memset(c, 0, sizeof(*c));
}

static void node_info_free(struct node_info *ni)
{
	const char *k;
	void *v;
	for (size_t it = 0; hmap_next(&ni->pods, &it, &k, &v);)
		json_decref(v);
	hmap_free(&ni->pods);
	json_decref(ni->node);
	free(ni->name);
	free(ni);
}

void scache_free(struct cache *c)
{
	const char *k;
	void *v;
	for (size_t i = 0; i < c->n; i++)
		node_info_free(c->list[i]);
	free(c->list);
	hmap_free(&c->nodes);
	for (size_t it = 0; hmap_next(&c->pod_node, &it, &k, &v);)
		free(v);
	hmap_free(&c->pod_node);
	hmap_free(&c->assumed);
}

struct node_info *scache_node(const struct cache *c, const char *name)
{
	return name ? hmap_get(&c->nodes, name) : NULL;
}

/* A node info for a name, created (without a Node) if missing: pods can be
 * seen before their node. */
static struct node_info *node_for(struct cache *c, const char *name)
{
	struct node_info *ni = hmap_get(&c->nodes, name);
	if (ni)
		return ni;
	if (!(ni = calloc(1, sizeof(*ni))))
		abort();
	ni->name = str_dup(name);
	ni->order = -1;
	hmap_put(&c->nodes, name, ni);
	return ni;
}

void scache_node_set(struct cache *c, json_t *node)
{
	struct node_info *ni = node_for(c, jx_str(node, "metadata.name") ?: "");

	json_decref(ni->node);
	ni->node = json_incref(node);
	node_allocatable(node, &ni->alloc);
	ni->taints = jx_get(node, "spec.taints");
	ni->unschedulable = json_is_true(jx_get(node, "spec.unschedulable"));
	if (ni->order < 0) {
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 64;
			if (!(c->list = realloc(c->list, c->cap * sizeof(*c->list))))
				abort();
		}
		ni->order = (int)c->n;
		c->list[c->n++] = ni;
	}
}

void scache_node_del(struct cache *c, const char *name)
{
	struct node_info *ni = hmap_get(&c->nodes, name);
	if (!ni || ni->order < 0)
		return;
	/* Keep the order of the others; the last one moves into the hole. */
	c->list[ni->order] = c->list[--c->n];
	c->list[ni->order]->order = ni->order;
	ni->order = -1;
	json_decref(ni->node);
	ni->node = NULL;
	ni->taints = NULL;
	ni->unschedulable = false;
	if (!hmap_len(&ni->pods)) {
		hmap_del(&c->nodes, name);
		node_info_free(ni);
	}
}

/* ---- pods ------------------------------------------------------------------------- */

static void account(struct node_info *ni, const json_t *pod, int sign)
{
	struct pod_req req;
	pod_requests(pod, &req);
	resources_add(&ni->requested, &req.r, sign);
	ni->nz_cpu += sign * req.nz_cpu;
	ni->nz_memory += sign * req.nz_memory;
}

void scache_pod_del(struct cache *c, const char *key)
{
	char *node = hmap_del(&c->pod_node, key);
	struct node_info *ni = node ? hmap_get(&c->nodes, node) : NULL;
	json_t *old = ni ? hmap_del(&ni->pods, key) : NULL;

	hmap_del(&c->assumed, key);
	if (old) {
		account(ni, old, -1);
		json_decref(old);
		if (ni->order < 0 && !hmap_len(&ni->pods)) {
			hmap_del(&c->nodes, node);
			node_info_free(ni);
		}
	}
	free(node);
}

static void put(struct cache *c, const char *key, const json_t *pod, const char *node)
{
	struct node_info *ni;

	scache_pod_del(c, key);
	ni = node_for(c, node);
	hmap_put(&ni->pods, key, json_incref((json_t *)pod));
	hmap_put(&c->pod_node, key, str_dup(node));
	account(ni, pod, 1);
}

static bool terminal(const json_t *pod)
{
	const char *phase = jx_str(pod, "status.phase") ?: "";
	return !strcmp(phase, "Succeeded") || !strcmp(phase, "Failed");
}

void scache_pod_set(struct cache *c, const json_t *pod)
{
	const char *node = jx_str(pod, "spec.nodeName");
	char key[512];

	snprintf(key, sizeof(key), "%s/%s", jx_str(pod, "metadata.namespace") ?: "",
		 jx_str(pod, "metadata.name") ?: "");
	if (!node || !*node || terminal(pod)) {
		if (!scache_is_assumed(c, key) || (node && *node))
			scache_pod_del(c, key);
		return;
	}
	put(c, key, pod, node); /* confirms an assumed pod */
}

void scache_assume(struct cache *c, const json_t *pod, const char *node)
{
	char key[512];
	snprintf(key, sizeof(key), "%s/%s", jx_str(pod, "metadata.namespace") ?: "",
		 jx_str(pod, "metadata.name") ?: "");
	put(c, key, pod, node);
	hmap_put(&c->assumed, key, (void *)1);
}

void scache_forget(struct cache *c, const char *key)
{
	if (scache_is_assumed(c, key))
		scache_pod_del(c, key);
}

bool scache_is_assumed(const struct cache *c, const char *key)
{
	return hmap_get(&c->assumed, key) != NULL;
}
