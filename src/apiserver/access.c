/*
 * authorization.k8s.io/v1: SubjectAccessReview, LocalSubjectAccessReview,
 * SelfSubjectAccessReview and SelfSubjectRulesReview — what `kubectl auth
 * can-i` asks. A review is decided by the same chain as a request (authz.c:
 * the Node authorizer, the built-in policy, RBAC) for the user it names, or
 * for the caller; nothing is stored, the answer is the review with its
 * status (201).
 */
#include "apiserver/objects.h"

#include "api/status.h"

#include "base/err.h"
#include "base/jx.h"

#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

static const struct resource *resource_by_plural(const char *group, const char *plural)
{
	for (size_t i = 0; i < resources_count; i++)
		if (is(resources[i].group, group) && is(resources[i].plural, plural))
			return &resources[i];
	return NULL;
}

/* The chain's decision for attributes that come from a review, not a
 * request: a request of the resource is made up for the Node and built-in
 * rules; RBAC alone for what cube does not serve. */
bool authz_attrs_allowed(struct apiserver *s, const struct authz_attrs *a, char **reason)
{
	const struct resource *res = a->resource_request ? resource_by_plural(a->group ? a->group : "",
									a->resource ? a->resource : "")
							 : NULL;
	char why[512];

	*reason = NULL;
	if (strv_has(&a->user->groups, "system:masters"))
		return true;
	if (res) {
		struct req r;
		bool ok;
		memset(&r, 0, sizeof(r));
		r.s = s;
		r.res = res;
		r.sub = a->sub ? resource_sub(res, a->sub) : NULL;
		r.ns = (char *)(a->ns && *a->ns ? a->ns : NULL);
		r.name = (char *)(a->name && *a->name ? a->name : NULL);
		r.verb = (char *)a->verb;
		r.user = *a->user;
		TAILQ_INIT(&r.query);
		if (!a->sub || r.sub) {
			ok = authz_check(&r, NULL, reason) == 0;
			if (ok && rbac_allows(s, a, why, sizeof(why)) && *why) {
				free(*reason);
				*reason = strdup(why);
			}
			return ok;
		}
	}
	if (rbac_allows(s, a, why, sizeof(why))) {
		*reason = strdup(why);
		return true;
	}
	return false;
}

/* spec.resourceAttributes / nonResourceAttributes into a. */
static int read_attrs(struct req *r, const json_t *spec, struct authz_attrs *a)
{
	const json_t *ra = json_object_get(spec, "resourceAttributes");
	const json_t *na = json_object_get(spec, "nonResourceAttributes");

	if (!ra == !na) {
		req_fail(r, ERR_UNPROCESSABLE,
			 "spec.resourceAttributes: Invalid value: \"null\": exactly one of "
			 "nonResourceAttributes or resourceAttributes must be specified");
		return ERR_UNPROCESSABLE;
	}
	a->resource_request = ra != NULL;
	if (ra) {
		a->verb = jx_str(ra, "verb") ?: "";
		a->group = jx_str(ra, "group") ?: "";
		a->resource = jx_str(ra, "resource") ?: "";
		a->sub = jx_str(ra, "subresource");
		if (a->sub && !*a->sub)
			a->sub = NULL;
		a->ns = jx_str(ra, "namespace");
		a->name = jx_str(ra, "name");
	} else {
		a->verb = jx_str(na, "verb") ?: "";
		a->path = jx_str(na, "path") ?: "";
	}
	return 0;
}

static void reply_review(struct req *r, json_t *review, bool allowed, const char *reason)
{
	json_t *status = json_pack("{s:b}", "allowed", allowed);
	if (reason && *reason)
		json_object_set_new(status, "reason", json_string(reason));
	json_object_set_new(review, "status", status);
	jx_set(review, "metadata.creationTimestamp", json_null());
	req_reply(r, 201, review);
}

/* Whose access a review asks about, and where. */
enum review { REVIEW_SUBJECT, REVIEW_LOCAL, REVIEW_SELF };

static void access_review(struct req *r, json_t *body, enum review kind)
{
	json_t *spec = json_object_get(body, "spec"), *g;
	struct user_info who = {0};
	struct authz_attrs a = {0};
	bool self = kind == REVIEW_SELF;
	char *reason = NULL;
	size_t i;

	if (read_attrs(r, spec, &a) < 0)
		goto out;
	if (self) {
		who = r->user;
	} else {
		who.name = (char *)(jx_str(spec, "user") ?: "");
		who.uid = (char *)jx_str(spec, "uid");
		json_array_foreach(json_object_get(spec, "groups"), i, g) if (json_string_value(g))
			strv_push(&who.groups, json_string_value(g));
		if (!*who.name && !who.groups.n) {
			req_fail(r, ERR_UNPROCESSABLE,
				 "spec.user: Invalid value: \"\": at least one of user or group must "
				 "be specified");
			goto out;
		}
	}
	if (kind == REVIEW_LOCAL) {
		json_t *ra = json_object_get(spec, "resourceAttributes");
		const char *ns = jx_str(ra, "namespace");
		if (!ra || (ns && *ns && !is(ns, r->ns))) {
			char msg[512];
			snprintf(msg, sizeof(msg),
				 "spec.resourceAttributes.namespace: Invalid value: \"%s\": must "
				 "match metadata.namespace",
				 ns ? ns : "");
			req_fail(r, ERR_UNPROCESSABLE, msg);
			goto out;
		}
		jx_set_str(ra, "namespace", r->ns);
		a.ns = r->ns;
	}
	a.user = &who;
	bool ok = authz_attrs_allowed(r->s, &a, &reason);
	reply_review(r, json_incref(body), ok, reason);
out:
	free(reason);
	if (!self)
		strv_free(&who.groups);
}

/* A rule as SelfSubjectRulesReview reports it: ResourceRule (verbs,
 * apiGroups, resources, resourceNames) or NonResourceRule (verbs,
 * nonResourceURLs); NULL for a rule with neither. */
static json_t *reported_rule(const json_t *rule, bool *urls)
{
	static const char *const res_fields[] = {"verbs", "apiGroups", "resources",
						 "resourceNames"};
	json_t *out = json_object();
	bool has_res = json_array_size(json_object_get(rule, "resources")) > 0;

	*urls = !has_res && json_array_size(json_object_get(rule, "nonResourceURLs")) > 0;
	if (!has_res && !*urls) {
		json_decref(out);
		return NULL;
	}
	if (*urls) {
		json_object_set(out, "verbs", json_object_get(rule, "verbs"));
		json_object_set(out, "nonResourceURLs", json_object_get(rule, "nonResourceURLs"));
		return out;
	}
	for (size_t i = 0; i < 4; i++)
		if (json_object_get(rule, res_fields[i]))
			json_object_set(out, res_fields[i], json_object_get(rule, res_fields[i]));
	return out;
}

/* SelfSubjectRulesReview: what the caller may do in spec.namespace, as
 * rbac_rules_for resolves it; the Node authorizer cannot list its rules
 * (incomplete). */
static void rules_review(struct req *r, json_t *body)
{
	const char *ns = jx_str(body, "spec.namespace") ?: "";
	json_t *res_rules = json_array(), *url_rules = json_array(), *status;
	bool node = strv_has(&r->user.groups, "system:nodes") && r->user.name &&
		    !strncmp(r->user.name, "system:node:", 12);

	if (!*ns) {
		json_decref(res_rules);
		json_decref(url_rules);
		req_fail(r, ERR_INVALID, "no namespace on request");
		return;
	}
	json_t *rules = rbac_rules_for(r->s, &r->user, ns), *rule;
	size_t i;
	json_array_foreach(rules, i, rule)
	{
		bool urls;
		json_t *out = reported_rule(rule, &urls);
		if (out)
			json_array_append_new(urls ? url_rules : res_rules, out);
	}
	json_decref(rules);
	status = json_pack("{s:o,s:o,s:b}", "resourceRules", res_rules, "nonResourceRules",
			   url_rules, "incomplete", node);
	if (node)
		json_object_set_new(status, "evaluationError",
				    json_string("node authorizer does not support user rule "
						"resolution"));
	(void)body;
	req_reply(r, 201,
		  json_pack("{s:s,s:s,s:{s:n},s:{},s:o}", "kind", "SelfSubjectRulesReview",
			    "apiVersion", "authorization.k8s.io/v1", "metadata",
			    "creationTimestamp", "spec", "status", status));
}

/* The review's body once the asker may send it: self reviews are anyone
 * authenticated's (upstream's system:basic-user binding), the others
 * whoever may create them. NULL: answered. */
static json_t *review_body(struct req *r, bool self)
{
	if ((!self || !strv_has(&r->user.groups, "system:authenticated")) &&
	    authz_request(r, NULL) < 0)
		return NULL;
	return body_object(r);
}

static void serve_access(struct req *r, enum review kind)
{
	json_t *body = review_body(r, kind == REVIEW_SELF);
	if (body)
		access_review(r, body, kind);
	json_decref(body);
}

void access_serve_subject(struct req *r)
{
	serve_access(r, REVIEW_SUBJECT);
}

void access_serve_local(struct req *r)
{
	serve_access(r, REVIEW_LOCAL);
}

void access_serve_self(struct req *r)
{
	serve_access(r, REVIEW_SELF);
}

void access_serve_rules(struct req *r)
{
	json_t *body = review_body(r, true);
	if (body)
		rules_review(r, body);
	json_decref(body);
}
