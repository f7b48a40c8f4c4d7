/*
 * What a kind does differently in the API server, in one table: the
 * creates answered whole and never stored (reviews, TokenRequest, Binding,
 * Eviction), the mutating admission of one kind, the update rules beyond
 * the common ones, the namespace's second finalizer list and the names
 * that cannot go. The handlers ask r->kind; they never test a kind's name.
 *
 * What the shared resource table (api/resources.c) already says — names,
 * verbs, subresources, defaults, validation, naming rules — stays there.
 */
#include "apiserver/objects.h"

#include "base/jx.h"

#include <stddef.h>
#include <string.h>

static void namespace_deleting(json_t *ns)
{
	jx_set_str(ns, "status.phase", "Terminating");
}

static const char *const cluster_namespaces[] = {"default", "kube-system", "kube-public", NULL};
/* Old kubelets corrupted owner references through pods/status. */
static const char *const pod_status_keeps[] = {"metadata.ownerReferences", NULL};
/* The QoS class is set at creation; old kubelets dropped it from status. */
static const char *const pod_status_backfills[] = {"status.qosClass", NULL};
static const char *const deployment_status_keeps[] = {"metadata.labels", NULL};

static const struct kind_rules kinds[] = {
    {.plural = "pods",
     .admit = admit_pod,
     .status_keeps = pod_status_keeps,
     .status_backfills = pod_status_backfills,
     .sub_creates = {{"binding", handle_binding}, {"eviction", handle_eviction}}},
    {.plural = "nodes", .admit = admit_node},
    {.group = "apps", .plural = "deployments", .status_keeps = deployment_status_keeps},
    {.plural = "namespaces",
     .finalizers = "spec.finalizers",
     .deleting = namespace_deleting,
     .undeletable = cluster_namespaces},
    {.plural = "serviceaccounts", .sub_creates = {{"token", satoken_serve_request}}},
    {.group = "certificates.k8s.io",
     .plural = "certificatesigningrequests",
     .admit = admit_csr,
     .check_update = csr_update_rules},
    {.group = "authentication.k8s.io",
     .plural = "selfsubjectreviews",
     .serve_create = serve_selfsubjectreview},
    {.group = "authentication.k8s.io",
     .plural = "tokenreviews",
     .serve_create = satoken_serve_review},
    {.group = "authorization.k8s.io",
     .plural = "subjectaccessreviews",
     .serve_create = access_serve_subject},
    {.group = "authorization.k8s.io",
     .plural = "localsubjectaccessreviews",
     .serve_create = access_serve_local},
    {.group = "authorization.k8s.io",
     .plural = "selfsubjectaccessreviews",
     .serve_create = access_serve_self},
    {.group = "authorization.k8s.io",
     .plural = "selfsubjectrulesreviews",
     .serve_create = access_serve_rules},
};

static const struct kind_rules plain; /* every other kind: nothing special */

const struct kind_rules *kind_rules_of(const struct resource *res)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kinds[i].plural, res->plural) &&
		    !strcmp(kinds[i].group ? kinds[i].group : "", res->group))
			return &kinds[i];
	return &plain;
}

void (*kind_sub_create(const struct kind_rules *k, const char *sub))(struct req *r)
{
	for (size_t i = 0; i < sizeof(k->sub_creates) / sizeof(k->sub_creates[0]); i++)
		if (k->sub_creates[i].name && !strcmp(k->sub_creates[i].name, sub))
			return k->sub_creates[i].create;
	return NULL;
}

bool kind_undeletable(const struct kind_rules *k, const char *name)
{
	for (size_t i = 0; k->undeletable && k->undeletable[i]; i++)
		if (name && !strcmp(k->undeletable[i], name))
			return true;
	return false;
}
