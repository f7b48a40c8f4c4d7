/*
 * Authorization, in upstream's order: the privileged group system:masters
 * may do everything; then the Node authorizer's rules for nodes (k8s-facts
 * §8.3, with AuthorizeNodeWithSelectors as in 1.32); then RBAC (rbac.c):
 * what Roles, ClusterRoles and their bindings grant.
 * Everything else is 403 with upstream's message.
 */
#include "apiserver/internal.h"

#include "api/selector.h"
#include "api/status.h"

#include "base/err.h"
#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool in_group(const struct req *r, const char *g)
{
	return strv_has(&r->user.groups, g);
}

static bool verb_in(const struct req *r, const char *const *verbs)
{
	for (size_t i = 0; verbs[i]; i++)
		if (is(r->verb, verbs[i]))
			return true;
	return false;
}

static const char *res_name(const struct req *r)
{
	return r->res ? r->res->plural : "";
}

/* The node's exact-match field selector value for field, or NULL. */
static char *selector_value(struct req *r, const char *field)
{
	const char *text = req_query(r, "fieldSelector");
	struct field_selector *fs = text ? field_selector_parse(text) : NULL;
	const char *v = fs ? field_selector_exact(fs, field) : NULL;
	char *out = v ? strdup(v) : NULL;
	field_selector_free(fs);
	return out;
}

/* upstream's NodeRules(): the static rules of the system:node role, compiled
 * in (an edited system:node ClusterRole does not change them). */
static bool node_static_rules_allow(const struct req *r)
{
	const json_t *rules = policy_node_rules(), *rule;
	size_t i;
	struct authz_attrs a = {&r->user, r->verb, true, r->res ? r->res->group : "",
				r->res ? r->res->plural : "", r->sub ? r->sub->name : NULL,
				r->ns, r->name, NULL};
	json_array_foreach(rules, i, rule) if (rbac_rule_allows(rule, &a)) return true;
	return false;
}

/* A refusal with the Node authorizer's reason (NULL: none). */
static int deny(char **reason, const char *fmt, const char *a, const char *b)
{
	char msg[256];

	if (fmt) {
		snprintf(msg, sizeof(msg), fmt, a, b);
		if (!(*reason = strdup(msg)))
			abort();
	}
	return ERR_FORBIDDEN;
}

#define NO_RELATIONSHIP "no relationship found between node '%s' and this object"

/* Upstream's graph: is the object related to the node? cube keeps no
 * graph; a pod is related when it is bound to the node (obj: the stored
 * object, NULL when absent), everything else (secrets, configmaps, volumes,
 * service accounts) never. */
static int related(const struct req *r, const json_t *obj, const char *node, char **reason)
{
	if (!r->name || !*r->name)
		return deny(reason, "No Object name found", NULL, NULL);
	if (is(r->res->plural, "pods") && obj && is(jx_str(obj, "spec.nodeName"), node))
		return 0;
	return deny(reason, NO_RELATIONSHIP, node, NULL);
}

/* authorizeNode (AuthorizeNodeWithSelectors, on in 1.32): a node writes any
 * Node (NodeRestriction decides which) and reads only its own. */
static int node_node(struct req *r, const char *node, char **reason)
{
	static const char *const write[] = {"create", "update", "patch", NULL};
	static const char *const read[] = {"get", "list", "watch", NULL};
	static const char *const status_write[] = {"update", "patch", NULL};
	const char *sub = r->sub ? r->sub->name : NULL;
	char *name = NULL;
	int rc;

	if (!sub && verb_in(r, write))
		return 0;
	if (is(sub, "status") && verb_in(r, status_write))
		return 0;
	if (sub || !verb_in(r, read))
		return deny(reason, NULL, NULL, NULL);
	/* A list or watch names its object by a metadata.name selector. */
	name = r->name ? strdup(r->name) : selector_value(r, "metadata.name");
	if (is(name, node))
		rc = 0;
	else if (!name || !*name)
		rc = deny(reason, "node '%s' cannot read all nodes, only its own Node object", node,
		          NULL);
	else
		rc = deny(reason, "node '%s' cannot read '%s', only its own Node object", node, name);
	free(name);
	return rc;
}

/* authorizePod: reads of pods bound to the node, mirror pods' create and
 * delete (NodeRestriction limits them), status and eviction. */
static int node_pod(struct req *r, const json_t *obj, const char *node, char **reason)
{
	static const char *const status_write[] = {"update", "patch", NULL};
	const char *sub = r->sub ? r->sub->name : NULL;

	if (!sub && is(r->verb, "get"))
		return related(r, obj, node, reason);
	if (!sub && (is(r->verb, "list") || is(r->verb, "watch"))) {
		char *v = selector_value(r, "spec.nodeName");
		bool own = is(v, node);
		free(v);
		if (own)
			return 0;
		if (r->name && *r->name)
			return related(r, obj, node, reason);
		return deny(reason, "can only list/watch pods with spec.nodeName field selector", NULL,
		            NULL);
	}
	if (!sub && (is(r->verb, "create") || is(r->verb, "delete")))
		return 0;
	if (is(sub, "status") && verb_in(r, status_write))
		return 0;
	if (is(sub, "eviction") && is(r->verb, "create"))
		return 0;
	return deny(reason, NULL, NULL, NULL);
}

/* authorizeLease: the node's own Lease in kube-node-lease. */
static int node_lease(struct req *r, const char *node, char **reason)
{
	static const char *const verbs[] = {"get", "create", "update", "patch", "delete", NULL};

	if (!verb_in(r, verbs))
		return deny(reason, "can only get, create, update, patch, or delete a node lease", NULL,
		            NULL);
	if (!is(r->ns, "kube-node-lease"))
		return deny(reason, "can only access leases in the \"kube-node-lease\" system namespace",
		            NULL, NULL);
	/* A create names its Lease in the body: NodeRestriction checks it. */
	if (!is(r->verb, "create") && !is(r->name, node))
		return deny(reason, "can only access node lease with the same name as the requesting node",
		            NULL, NULL);
	return 0;
}

/* authorizeReadNamespacedObject (secrets, configmaps), authorizeGet
 * (persistent volumes and claims), authorizeCreateToken (service
 * accounts): the request's shape, then the graph. */
static int node_related_read(struct req *r, const json_t *obj, const char *node, char **reason)
{
	static const char *const read[] = {"get", "list", "watch", NULL};
	const char *res = res_name(r), *sub = r->sub ? r->sub->name : NULL;

	if (is(res, "secrets") || is(res, "configmaps")) {
		if (!verb_in(r, read))
			return deny(reason, "can only read resources of this type", NULL, NULL);
		if (sub)
			return deny(reason, "cannot read subresource", NULL, NULL);
		if (!r->ns || !*r->ns)
			return deny(reason, "can only read namespaced object of this type", NULL, NULL);
	} else if (is(res, "serviceaccounts")) {
		if (!is(r->verb, "create") || !r->name || !*r->name)
			return deny(reason, "can only create tokens for individual service accounts",
			            NULL, NULL);
		if (!is(sub, "token"))
			return deny(reason, "can only create token subresource of serviceaccount", NULL,
			            NULL);
		return deny(reason, NO_RELATIONSHIP, node, NULL);
	} else if (is(res, "persistentvolumeclaims") && is(sub, "status")) {
		if (!is(r->verb, "update") && !is(r->verb, "patch"))
			return deny(reason, "can only get/update/patch this type", NULL, NULL);
	} else {
		if (!is(r->verb, "get"))
			return deny(reason, "can only get individual resources of this type", NULL, NULL);
		if (sub)
			return deny(reason, "cannot get subresource", NULL, NULL);
	}
	return related(r, obj, node, reason);
}

static bool node_user(const struct req *r)
{
	const char *user = r->user.name;
	return in_group(r, "system:nodes") && user && !strncmp(user, "system:node:", 12);
}

/* Only a pod is related to a node by its content (related). */
bool authz_reads_object(const struct req *r)
{
	return !in_group(r, "system:masters") && node_user(r) && r->res && !*r->res->group &&
	       is(res_name(r), "pods");
}

/* The Node authorizer (upstream's NodeAuthorizer.Authorize). */
static int node_rules(struct req *r, const json_t *obj, const char *node, char **reason)
{
	const char *res = res_name(r), *group = r->res ? r->res->group : "";

	if (!*node)
		return deny(reason, "unknown node for user \"%s\"", r->user.name, NULL);
	if (!*group && is(res, "nodes"))
		return node_node(r, node, reason);
	if (!*group && is(res, "pods"))
		return node_pod(r, obj, node, reason);
	if (is(group, "coordination.k8s.io") && is(res, "leases"))
		return node_lease(r, node, reason);
	if (!*group && (is(res, "secrets") || is(res, "configmaps") || is(res, "serviceaccounts") ||
	                is(res, "persistentvolumeclaims") || is(res, "persistentvolumes")))
		return node_related_read(r, obj, node, reason);
	/* Not subdivided: upstream's NodeRules, the system:node role's. */
	return node_static_rules_allow(r) ? 0 : deny(reason, NULL, NULL, NULL);
}

int authz_check(struct req *r, const json_t *obj, char **reason)
{
	const char *user = r->user.name;

	*reason = NULL;
	/* Upstream's privileged group; everyone else — the scheduler, the
	 * controller manager and each of its controllers' service accounts —
	 * holds exactly what the bootstrap policy binds to them. */
	if (in_group(r, "system:masters"))
		return 0;
	if (node_user(r) && node_rules(r, obj, user + 12, reason) == 0)
		return 0;
	/* Then RBAC: what bindings grant (the Node authorizer's reason, if
	 * any, is kept for the message). */
	if (r->res) {
		/* A create is a POST to the collection: upstream's request has no
		 * name, so rules limited to resourceNames never allow it. */
		bool collection = is(r->verb, "create") && !r->sub;
		struct authz_attrs a = {&r->user,    r->verb,  true,    r->res->group,
					r->res->plural, r->sub ? r->sub->name : NULL, r->ns,
					collection ? NULL : r->name, NULL};
		if (rbac_allows(r->s, &a, NULL, 0)) {
			free(*reason);
			*reason = NULL;
			return 0;
		}
	}
	return ERR_FORBIDDEN;
}

int authz_request(struct req *r, const json_t *obj)
{
	char *reason = NULL, q[128], what[160], msg[1024], scope[160];
	json_t *st;

	if (authz_check(r, obj, &reason) == 0)
		return 0;
	resource_qualified(r->res, q, sizeof(q));
	if (r->name)
		snprintf(what, sizeof(what), "%s \"%s\"", q, r->name);
	else
		snprintf(what, sizeof(what), "%s", q);
	if (r->ns)
		snprintf(scope, sizeof(scope), "in the namespace \"%s\"", r->ns);
	else
		snprintf(scope, sizeof(scope), "at the cluster scope");
	snprintf(msg, sizeof(msg),
		 "%s is forbidden: User \"%s\" cannot %s resource \"%s%s%s\" in API group \"%s\" "
		 "%s%s%s",
		 what, r->user.name ? r->user.name : "", r->verb, r->res->plural,
		 r->sub ? "/" : "", r->sub ? r->sub->name : "", r->res->group, scope,
		 reason ? ": " : "", reason ? reason : "");
	free(reason);
	st = status_failure(ERR_FORBIDDEN, msg, r->res->group, r->res->plural, r->name);
	req_fail_status(r, st);
	return ERR_FORBIDDEN;
}
