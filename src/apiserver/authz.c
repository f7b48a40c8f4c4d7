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

static int node_rules(struct req *r, const json_t *obj, const char *node, char **reason)
{
	static const char *const write[] = {"create", "update", "patch", NULL};
	static const char *const status_write[] = {"update", "patch", NULL};
	static const char *const lease_verbs[] = {"get", "create", "update", "patch", "delete",
						  NULL};
	const char *res = res_name(r), *sub = r->sub ? r->sub->name : NULL;
	char msg[256];

	if (is(res, "nodes")) {
		if ((!sub && verb_in(r, write)) || (is(sub, "status") && verb_in(r, status_write)))
			return 0; /* NodeRestriction decides which node */
		if (is(r->verb, "get") && is(r->name, node))
			return 0;
		if (is(r->verb, "list") || is(r->verb, "watch")) {
			char *v = selector_value(r, "metadata.name");
			bool own = is(v, node);
			free(v);
			if (own)
				return 0;
		}
		snprintf(msg, sizeof(msg), "node '%s' cannot read all nodes, only its own Node object",
			 node);
	} else if (is(res, "pods")) {
		if (is(r->verb, "list") || is(r->verb, "watch")) {
			char *v = selector_value(r, "spec.nodeName");
			bool own = is(v, node);
			free(v);
			if (own)
				return 0;
			snprintf(msg, sizeof(msg),
				 "can only list/watch pods with spec.nodeName field selector");
		} else if (sub && is(sub, "status") && verb_in(r, status_write)) {
			return 0; /* NodeRestriction: bound to this node */
		} else if (sub && is(sub, "eviction") && is(r->verb, "create")) {
			return 0;
		} else if (!sub && (is(r->verb, "create") || is(r->verb, "delete"))) {
			return 0;
		} else if (!sub && is(r->verb, "get") && obj &&
			   is(jx_str(obj, "spec.nodeName"), node)) {
			return 0;
		} else {
			snprintf(msg, sizeof(msg),
				 "no relationship found between node '%s' and this object", node);
		}
	} else if (is(res, "leases")) {
		if (is(r->ns, "kube-node-lease") && verb_in(r, lease_verbs) &&
		    (is(r->name, node) || is(r->verb, "create")))
			return 0;
		snprintf(msg, sizeof(msg), "node '%s' cannot access lease %s/%s", node,
			 r->ns ? r->ns : "", r->name ? r->name : "");
	} else if (is(res, "secrets") || is(res, "configmaps") || is(res, "serviceaccounts") ||
		   is(res, "persistentvolumeclaims") || is(res, "persistentvolumes")) {
		/* Upstream allows only named objects its Node graph relates to
		 * the node's pods; cube keeps no such graph: none. */
		snprintf(msg, sizeof(msg), "no relationship found between node '%s' and this object",
			 node);
	} else if (node_static_rules_allow(r)) {
		/* Not subdivided: upstream's NodeRules, the system:node role's. */
		return 0;
	} else {
		snprintf(msg, sizeof(msg), "no relationship found between node '%s' and this object",
			 node);
	}
	if (!(*reason = strdup(msg)))
		abort();
	return ERR_FORBIDDEN;
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
	if (in_group(r, "system:nodes") && user && !strncmp(user, "system:node:", 12) &&
	    node_rules(r, obj, user + 12, reason) == 0)
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
