/*
 * The RBAC authorizer (upstream plugin/pkg/auth/authorizer/rbac, 1.32):
 * a request is allowed when a ClusterRoleBinding, or a RoleBinding of the
 * request's namespace, names the user, one of its groups or its service
 * account, and the role it refers to has a rule covering the request.
 * Roles and bindings are read from the API server's in-memory cache, so a
 * decision costs no store read; nothing is cached between requests, so a
 * binding written is in force for the next request.
 *
 * Rules as upstream's RuleAllows: verbs (or "*"); for resources, apiGroups
 * (or "*"), resources ("*", "<resource>", "<resource>/<sub>", or a star
 * then "/<sub>"), and resourceNames (empty: any; else the request must name one); for
 * non-resource URLs, the path exactly, "*", or a prefix ending in "*".
 */
#include "apiserver/internal.h"

#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static bool has(const json_t *list, const char *v)
{
	json_t *e;
	size_t i;
	json_array_foreach(list, i, e) if (is(json_string_value(e), v)) return true;
	return false;
}

static bool verb_matches(const json_t *rule, const char *verb)
{
	return has(json_object_get(rule, "verbs"), "*") || has(json_object_get(rule, "verbs"), verb);
}

static bool resource_matches(const json_t *rule, const char *res, const char *sub)
{
	json_t *e;
	size_t i;
	char combined[256];

	snprintf(combined, sizeof(combined), "%s%s%s", res, sub ? "/" : "", sub ? sub : "");
	json_array_foreach(json_object_get(rule, "resources"), i, e)
	{
		const char *r = json_string_value(e);
		if (!r)
			continue;
		if (!strcmp(r, "*") || !strcmp(r, combined))
			return true;
		if (sub && !strncmp(r, "*/", 2) && !strcmp(r + 2, sub))
			return true;
	}
	return false;
}

static bool url_matches(const json_t *rule, const char *path)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(rule, "nonResourceURLs"), i, e)
	{
		const char *u = json_string_value(e);
		size_t n = u ? strlen(u) : 0;
		if (!u)
			continue;
		if (!strcmp(u, "*") || !strcmp(u, path))
			return true;
		if (n && u[n - 1] == '*' && !strncmp(u, path, n - 1))
			return true;
	}
	return false;
}

bool rbac_rule_allows(const json_t *rule, const struct authz_attrs *a)
{
	json_t *names;

	if (!verb_matches(rule, a->verb))
		return false;
	if (!a->resource_request)
		return url_matches(rule, a->path ? a->path : "");
	if (!has(json_object_get(rule, "apiGroups"), "*") &&
	    !has(json_object_get(rule, "apiGroups"), a->group ? a->group : ""))
		return false;
	if (!resource_matches(rule, a->resource ? a->resource : "", a->sub))
		return false;
	names = json_object_get(rule, "resourceNames");
	return json_array_size(names) == 0 || (a->name && has(names, a->name));
}

/* appliesTo: a binding's subjects against the user. */
static bool subject_matches(const json_t *sub, const struct user_info *u, const char *binding_ns)
{
	const char *kind = jx_str(sub, "kind"), *name = jx_str(sub, "name");

	if (!name)
		return false;
	if (is(kind, "User"))
		return is(u->name, name);
	if (is(kind, "Group"))
		return strv_has(&u->groups, name);
	if (is(kind, "ServiceAccount")) {
		const char *ns = jx_str(sub, "namespace");
		char want[600];
		if (!ns || !*ns)
			ns = binding_ns ? binding_ns : "";
		snprintf(want, sizeof(want), "system:serviceaccount:%s:%s", ns, name);
		return is(u->name, want);
	}
	return false;
}

/* The binding's first subject that is the user, or NULL. */
static const json_t *binding_applies(const json_t *b, const struct user_info *u, const char *ns)
{
	json_t *sub;
	size_t i;
	json_array_foreach(jx_get(b, "subjects"), i, sub) if (subject_matches(sub, u, ns)) return sub;
	return NULL;
}

static const struct resource *rbac_res(const char *plural)
{
	return resource_find("rbac.authorization.k8s.io", "v1", plural);
}

char *rbac_prefix(const char *plural, const char *ns)
{
	return prefix_key(rbac_res(plural), ns);
}

/* The rules of the role a binding refers to (borrowed), or NULL. */
static json_t *role_rules(struct apiserver *s, const json_t *binding, const char *ns)
{
	const char *kind = jx_str(binding, "roleRef.kind"), *name = jx_str(binding, "roleRef.name");
	char *key;
	json_t *role;

	if (!name)
		return NULL;
	if (is(kind, "ClusterRole"))
		key = object_key(rbac_res("clusterroles"), NULL, name);
	else if (is(kind, "Role") && ns)
		key = object_key(rbac_res("roles"), ns, name);
	else
		return NULL;
	role = cache_get(s->cache, key);
	free(key);
	return role ? json_object_get(role, "rules") : NULL;
}

/* The first binding under prefix that grants a; its description into why. */
static bool bindings_allow(struct apiserver *s, const char *prefix, const char *ns,
			   const struct authz_attrs *a, const char *kind, char *why, size_t n)
{
	json_t **bindings, *rule;
	size_t nb = cache_list(s->cache, prefix, NULL, 0, &bindings, NULL), i;
	bool ok = false;

	for (size_t b = 0; b < nb && !ok; b++) {
		const json_t *sub = binding_applies(bindings[b], a->user, ns);
		json_t *rules;
		if (!sub || !(rules = role_rules(s, bindings[b], ns)))
			continue;
		json_array_foreach(rules, i, rule) if (rbac_rule_allows(rule, a))
		{
			ok = true;
			break;
		}
		if (!ok || !why)
			continue;
		/* upstream's describers: RoleBinding "ns/name", ServiceAccount "name/ns" */
		const char *sk = jx_str(sub, "kind") ?: "", *sn = jx_str(sub, "name") ?: "";
		const char *sns = jx_str(sub, "namespace");
		char who[600];
		if (is(sk, "ServiceAccount"))
			snprintf(who, sizeof(who), "%s/%s", sn, sns && *sns ? sns : ns ? ns : "");
		else
			snprintf(who, sizeof(who), "%s", sn);
		snprintf(why, n, "RBAC: allowed by %s \"%s%s%s\" of %s \"%s\" to %s \"%s\"", kind,
			 ns ? ns : "", ns ? "/" : "", jx_str(bindings[b], "metadata.name") ?: "",
			 jx_str(bindings[b], "roleRef.kind") ?: "",
			 jx_str(bindings[b], "roleRef.name") ?: "", sk, who);
	}
	free(bindings);
	return ok;
}

bool rbac_allows(struct apiserver *s, const struct authz_attrs *a, char *why, size_t n)
{
	char *prefix = rbac_prefix("clusterrolebindings", NULL);
	bool ok;

	if (why && n)
		why[0] = 0;
	ok = bindings_allow(s, prefix, NULL, a, "ClusterRoleBinding", why, n);
	free(prefix);
	if (ok || !a->resource_request || !a->ns || !*a->ns)
		return ok;
	prefix = rbac_prefix("rolebindings", a->ns);
	ok = bindings_allow(s, prefix, a->ns, a, "RoleBinding", why, n);
	free(prefix);
	return ok;
}

json_t *rbac_binding_rules(struct apiserver *s, const json_t *binding, const struct user_info *u,
			   const char *ns)
{
	return binding_applies(binding, u, ns) ? role_rules(s, binding, ns) : NULL;
}
