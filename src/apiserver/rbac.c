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

#include "api/status.h"

#include "base/err.h"
#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		/* upstream's describers: RoleBinding "name/ns", ServiceAccount "name/ns" */
		const char *sk = jx_str(sub, "kind") ?: "", *sn = jx_str(sub, "name") ?: "";
		const char *sns = jx_str(sub, "namespace");
		char who[600];
		if (is(sk, "ServiceAccount"))
			snprintf(who, sizeof(who), "%s/%s", sn, sns && *sns ? sns : ns ? ns : "");
		else
			snprintf(who, sizeof(who), "%s", sn);
		snprintf(why, n, "RBAC: allowed by %s \"%s%s%s\" of %s \"%s\" to %s \"%s\"", kind,
			 jx_str(bindings[b], "metadata.name") ?: "", ns ? "/" : "", ns ? ns : "",
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

/* RulesFor: every rule the user holds in ns (and cluster-wide) — the
 * privileged group system:masters everything, then what bindings give. */
json_t *rbac_rules_for(struct apiserver *s, const struct user_info *u, const char *ns)
{
	json_t *out = json_array();

	if (strv_has(&u->groups, "system:masters")) {
		json_array_append_new(out, json_pack("{s:[s],s:[s],s:[s]}", "verbs", "*", "apiGroups",
						     "*", "resources", "*"));
		json_array_append_new(out,
				      json_pack("{s:[s],s:[s]}", "verbs", "*", "nonResourceURLs", "*"));
	}
	for (int pass = 0; pass < 2; pass++) {
		json_t **bindings, *rules, *rule;
		size_t n, i;
		char *prefix;
		if (pass && (!ns || !*ns))
			break;
		prefix = pass ? rbac_prefix("rolebindings", ns) : rbac_prefix("clusterrolebindings", NULL);
		n = cache_list(s->cache, prefix, NULL, 0, &bindings, NULL);
		free(prefix);
		for (size_t b = 0; b < n; b++)
			if (binding_applies(bindings[b], u, pass ? ns : NULL) &&
			    (rules = role_rules(s, bindings[b], pass ? ns : NULL)))
				json_array_foreach(rules, i, rule) json_array_append(out, rule);
		free(bindings);
	}
	return out;
}

/* ---- escalation (upstream's policybased storage and ConfirmNoEscalation) ---- */

/* resourceCoversAll, for one resource. */
static bool resource_covered(const json_t *set, const char *res)
{
	const char *slash = res ? strchr(res, '/') : NULL;
	char star[256];
	if (has(set, "*") || (res && has(set, res)))
		return true;
	if (!slash)
		return false;
	snprintf(star, sizeof(star), "*%s", slash);
	return has(set, star);
}

static bool url_covered(const json_t *set, const char *url)
{
	json_t *e;
	size_t i;
	json_array_foreach(set, i, e)
	{
		const char *o = json_string_value(e);
		size_t n = o ? strlen(o) : 0;
		if (o && (!strcmp(o, "*") || !strcmp(o, url) ||
			  (n && o[n - 1] == '*' && !strncmp(o, url, n - 1))))
			return true;
	}
	return false;
}

/* ruleCovers for one simple rule (one verb, group, resource, name or URL). */
static bool simple_covered(const json_t *owners, const char *verb, const char *group,
			   const char *res, const char *name, const char *url)
{
	json_t *o;
	size_t i;
	json_array_foreach(owners, i, o)
	{
		if (!has(json_object_get(o, "verbs"), "*") && !has(json_object_get(o, "verbs"), verb))
			continue;
		if (url) {
			if (url_covered(json_object_get(o, "nonResourceURLs"), url))
				return true;
			continue;
		}
		if (!has(json_object_get(o, "apiGroups"), "*") &&
		    !has(json_object_get(o, "apiGroups"), group))
			continue;
		if (!resource_covered(json_object_get(o, "resources"), res))
			continue;
		json_t *names = json_object_get(o, "resourceNames");
		if (json_array_size(names) && (!name || !has(names, name)))
			continue;
		return true;
	}
	return false;
}

/* A missing permission, its verbs merged with those of the same group,
 * resource and name (or URL) — upstream's CompactRules — into acc: key ->
 * {"head": the CompactString fields before Verbs, "verbs": [...]}. */
static void missing_add(json_t *acc, const char *verb, const char *group, const char *res,
			const char *name, const char *url)
{
	char key[1024], head[1100];
	json_t *e;

	if (url) {
		snprintf(key, sizeof(key), "u\x1f%s", url);
		snprintf(head, sizeof(head), "NonResourceURLs:[\"%s\"]", url);
	} else if (name) {
		snprintf(key, sizeof(key), "r\x1f%s\x1f%s\x1f%s", group, res, name);
		snprintf(head, sizeof(head),
			 "APIGroups:[\"%s\"], Resources:[\"%s\"], ResourceNames:[\"%s\"]", group, res,
			 name);
	} else {
		snprintf(key, sizeof(key), "r\x1f%s\x1f%s", group, res);
		snprintf(head, sizeof(head), "APIGroups:[\"%s\"], Resources:[\"%s\"]", group, res);
	}
	if (!(e = json_object_get(acc, key))) {
		e = json_pack("{s:s,s:[]}", "head", head, "verbs");
		json_object_set_new(acc, key, e);
	}
	if (!has(json_object_get(e, "verbs"), verb))
		json_array_append_new(json_object_get(e, "verbs"), json_string(verb));
}

/* acc as CompactString lines: {..., Verbs:["get" "delete"]}. */
static void missing_lines(const json_t *acc, struct strv *out)
{
	const char *k;
	json_t *e, *v;
	size_t i;
	json_object_foreach((json_t *)acc, k, e)
	{
		struct strv verbs = STRV_INIT;
		json_array_foreach(json_object_get(e, "verbs"), i, v)
			strv_pushf(&verbs, "\"%s\"", json_string_value(v));
		char *joined = strv_join(&verbs, " ");
		strv_pushf(out, "{%s, Verbs:[%s]}", jx_str(e, "head"), joined);
		free(joined);
		strv_free(&verbs);
	}
}

typedef void (*missing_fn)(json_t *acc, const char *verb, const char *group, const char *res,
			   const char *name, const char *url);

/* Covers: each rule broken into simple rules in BreakdownRule's order
 * (group, resource, verb, name; then URL, verb), each held by some owner
 * rule; what is not goes to add. */
static void uncovered(const json_t *owners, const json_t *rules, missing_fn add, json_t *acc)
{
	json_t *rule, *v, *g, *res, *nm, *u;
	size_t i, a, b, c, d;

	json_array_foreach(rules, i, rule)
	{
		json_t *names = json_object_get(rule, "resourceNames");
		json_t *verbs = json_object_get(rule, "verbs");
		json_array_foreach(json_object_get(rule, "apiGroups"), a, g)
			json_array_foreach(json_object_get(rule, "resources"), b, res)
				json_array_foreach(verbs, c, v)
		{
			const char *gs = json_string_value(g) ?: "", *rs = json_string_value(res) ?: "";
			const char *verb = json_string_value(v);
			if (!verb)
				continue;
			if (!json_array_size(names)) {
				if (!simple_covered(owners, verb, gs, rs, NULL, NULL))
					add(acc, verb, gs, rs, NULL, NULL);
				continue;
			}
			json_array_foreach(names, d, nm) if (
				json_string_value(nm) &&
				!simple_covered(owners, verb, gs, rs, json_string_value(nm), NULL))
				add(acc, verb, gs, rs, json_string_value(nm), NULL);
		}
		json_array_foreach(json_object_get(rule, "nonResourceURLs"), a, u)
			json_array_foreach(verbs, c, v)
		{
			const char *url = json_string_value(u), *verb = json_string_value(v);
			if (url && verb && !simple_covered(owners, verb, NULL, NULL, NULL, url))
				add(acc, verb, NULL, NULL, NULL, url);
		}
	}
}

/* One simple rule, as BreakdownRule writes it. */
static void breakdown_add(json_t *acc, const char *verb, const char *group, const char *res,
			  const char *name, const char *url)
{
	json_t *r = json_pack("{s:[s]}", "verbs", verb);
	if (url) {
		json_object_set_new(r, "nonResourceURLs", json_pack("[s]", url));
	} else {
		json_object_set_new(r, "apiGroups", json_pack("[s]", group));
		json_object_set_new(r, "resources", json_pack("[s]", res));
		if (name)
			json_object_set_new(r, "resourceNames", json_pack("[s]", name));
	}
	json_array_append_new(acc, r);
}

json_t *rbac_missing_rules(const json_t *owners, const json_t *rules)
{
	json_t *acc = json_array();
	uncovered(owners, rules, breakdown_add, acc);
	return acc;
}

/* The rules a roleRef points at, or NULL with *err set. */
static json_t *ref_rules(struct apiserver *s, const json_t *ref, const char *ns, char *err,
			 size_t n)
{
	const char *kind = jx_str(ref, "kind"), *name = jx_str(ref, "name") ?: "";
	bool cluster = !is(kind, "Role");
	char *key = object_key(rbac_res(cluster ? "clusterroles" : "roles"), ns, name);
	json_t *role = cache_get(s->cache, key), *rules;

	free(key);
	if (!role) {
		snprintf(err, n, "%s.rbac.authorization.k8s.io \"%s\" not found",
			 cluster ? "clusterroles" : "roles", name);
		return NULL;
	}
	rules = json_object_get(role, "rules");
	return rules ? rules : role; /* no rules: nothing to hold (a non-array is none) */
}

/* May the caller hold this verb (escalate, bind) on the role? */
static bool verb_on_role(struct req *r, const char *verb, const char *plural, const char *ns,
			 const char *name)
{
	struct authz_attrs a = {&r->user, verb, true, "rbac.authorization.k8s.io", plural, NULL,
				ns, name, NULL};
	return rbac_allows(r->s, &a, NULL, 0);
}

int rbac_check_escalation(struct req *r, const json_t *obj)
{
	const char *plural = r->res->plural, *name = jx_str(obj, "metadata.name") ?: "";
	bool role = is(plural, "roles") || is(plural, "clusterroles");
	bool binding = is(plural, "rolebindings") || is(plural, "clusterrolebindings");
	json_t *rules = NULL, *owners;
	struct strv missing = STRV_INIT;
	char err[512] = "", q[128], *msg, *groups, *lines;
	int rc = 0;

	if ((!role && !binding) || r->sub || strv_has(&r->user.groups, "system:masters"))
		return 0;
	if (role) {
		if (verb_on_role(r, "escalate", plural, r->ns, name))
			return 0;
		rules = json_object_get(obj, "rules");
	} else {
		const json_t *ref = json_object_get(obj, "roleRef");
		/* BindingAuthorized: in the binding's namespace, whatever the role's kind */
		if (verb_on_role(r, "bind", is(jx_str(ref, "kind"), "Role") ? "roles" : "clusterroles",
				 r->ns, jx_str(ref, "name")))
			return 0;
		rules = ref_rules(r->s, ref, r->ns, err, sizeof(err));
	}
	resource_qualified(r->res, q, sizeof(q));
	if (!rules && *err) {
		msg = str_printf("%s \"%s\" is forbidden: %s", q, name, err);
		goto refuse;
	}
	owners = rbac_rules_for(r->s, &r->user, r->ns);
	{
		json_t *acc = json_object();
		uncovered(owners, rules, missing_add, acc);
		missing_lines(acc, &missing);
		json_decref(acc);
	}
	json_decref(owners);
	if (!missing.n) {
		strv_free(&missing);
		return 0;
	}
	/* sets.NewString(...).List(): unique, sorted */
	strv_sort(&missing);
	for (size_t i = 1; i < missing.n;)
		if (!strcmp(missing.v[i], missing.v[i - 1]))
			strv_remove(&missing, missing.v[i]);
		else
			i++;
	{
		struct strv quoted = STRV_INIT;
		for (size_t i = 0; i < r->user.groups.n; i++)
			strv_pushf(&quoted, "\"%s\"", r->user.groups.v[i]);
		groups = strv_join(&quoted, " ");
		strv_free(&quoted);
	}
	lines = strv_join(&missing, "\n");
	msg = str_printf("%s \"%s\" is forbidden: user \"%s\" (groups=[%s]) is attempting to grant "
			 "RBAC permissions not currently held:\n%s",
			 q, name, r->user.name ? r->user.name : "", groups, lines);
	free(groups);
	free(lines);
refuse:
	req_fail_status(r, status_failure(ERR_FORBIDDEN, msg, r->res->group, plural, name));
	free(msg);
	strv_free(&missing);
	rc = ERR_FORBIDDEN;
	return rc;
}
