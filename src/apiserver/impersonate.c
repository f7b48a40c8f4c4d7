/*
 * Impersonation (upstream's WithImpersonation filter): Impersonate-User,
 * Impersonate-Group (repeated), Impersonate-Uid and Impersonate-Extra-<key>
 * headers make the request act as that user, once the caller is allowed
 * the `impersonate` verb on each: users (or serviceaccounts, for
 * system:serviceaccount:<ns>:<name>), groups, uids and userextras/<key>.
 * `kubectl --as system:node:node-0 --as-group system:nodes` is this.
 */
#include "apiserver/internal.h"

#include "api/status.h"

#include "base/err.h"
#include "base/log.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#define SA_PREFIX "system:serviceaccount:"

/* "<resource> \"<name>\" is forbidden: User ... cannot impersonate ..." */
static int refuse(struct req *r, const struct authz_attrs *a)
{
	char msg[1024];
	snprintf(msg, sizeof(msg),
		 "%s%s%s \"%s\" is forbidden: User \"%s\" cannot impersonate resource \"%s%s%s\" "
		 "in API group \"%s\" %s%s%s",
		 a->resource, *a->group ? "." : "", a->group, a->name ? a->name : "",
		 r->user.name ? r->user.name : "", a->resource, a->sub ? "/" : "",
		 a->sub ? a->sub : "", a->group, a->ns ? "in the namespace \"" : "at the cluster scope",
		 a->ns ? a->ns : "", a->ns ? "\"" : "");
	req_fail_status(r, status_failure(ERR_FORBIDDEN, msg, a->group, a->resource, a->name));
	return ERR_FORBIDDEN;
}

static int allowed(struct req *r, const char *group, const char *resource, const char *sub,
		   const char *ns, const char *name)
{
	struct authz_attrs a = {&r->user, "impersonate", true, group, resource, sub, ns, name, NULL};
	char *reason = NULL;
	bool ok = authz_attrs_allowed(r->s, &a, &reason);
	free(reason);
	return ok ? 0 : refuse(r, &a);
}

int impersonate(struct req *r)
{
	struct evkeyvalq *h = r->in_headers;
	struct evkeyval *kv;
	const char *user = NULL, *uid = NULL;
	struct strv groups = STRV_INIT, extra_keys = STRV_INIT, extra_vals = STRV_INIT;
	int rc = 0;

	TAILQ_FOREACH(kv, h, next)
	{
		if (!strcasecmp(kv->key, "Impersonate-User"))
			user = kv->value;
		else if (!strcasecmp(kv->key, "Impersonate-Group"))
			strv_push(&groups, kv->value);
		else if (!strcasecmp(kv->key, "Impersonate-Uid"))
			uid = kv->value;
		else if (!strncasecmp(kv->key, "Impersonate-Extra-", 18)) {
			strv_push(&extra_keys, kv->key + 18);
			strv_push(&extra_vals, kv->value);
		}
	}
	if (!user && !uid && !groups.n && !extra_keys.n)
		goto out;
	if (!user || !*user) {
		req_fail(r, ERR_INTERNAL, "requested impersonation without impersonating a user");
		rc = ERR_INTERNAL;
		goto out;
	}
	/* Each thing impersonated, authorized as upstream names it. */
	const char *sa = !strncmp(user, SA_PREFIX, strlen(SA_PREFIX)) ? user + strlen(SA_PREFIX) : NULL;
	/* SplitUsername: exactly "<ns>:<name>", both non-empty; else a user. */
	if (sa && strchr(sa, ':') && strchr(sa, ':') != sa && strchr(sa, ':')[1] &&
	    !strchr(strchr(sa, ':') + 1, ':')) {
		char ns[256];
		const char *rest = user + strlen(SA_PREFIX), *colon = strchr(rest, ':');
		snprintf(ns, sizeof(ns), "%.*s", (int)(colon - rest), rest);
		rc = allowed(r, "", "serviceaccounts", NULL, ns, colon + 1);
	} else {
		rc = allowed(r, "", "users", NULL, NULL, user);
	}
	for (size_t i = 0; rc == 0 && i < groups.n; i++)
		rc = allowed(r, "", "groups", NULL, NULL, groups.v[i]);
	if (rc == 0 && uid)
		rc = allowed(r, "authentication.k8s.io", "uids", NULL, NULL, uid);
	for (size_t i = 0; rc == 0 && i < extra_keys.n; i++)
		rc = allowed(r, "authentication.k8s.io", "userextras", extra_keys.v[i], NULL,
			     extra_vals.v[i]);
	if (rc < 0)
		goto out;
	LOG_V(4, "\"impersonating\" user=\"%s\" as=\"%s\"", r->user.name ? r->user.name : "", user);
	user_info_free(&r->user);
	r->user.name = str_dup(user);
	r->user.uid = uid ? str_dup(uid) : NULL;
	r->user.groups = groups;
	groups = (struct strv)STRV_INIT;
	for (size_t i = 0; i < extra_keys.n; i++) {
		json_t *vals;
		if (!r->user.extra)
			r->user.extra = json_object();
		if (!(vals = json_object_get(r->user.extra, extra_keys.v[i])))
			json_object_set_new(r->user.extra, extra_keys.v[i], vals = json_array());
		json_array_append_new(vals, json_string(extra_vals.v[i]));
	}
	if (!strncmp(user, SA_PREFIX, strlen(SA_PREFIX)) && !r->user.groups.n) {
		const char *rest = user + strlen(SA_PREFIX), *colon = strchr(rest, ':');
		strv_push(&r->user.groups, "system:serviceaccounts");
		if (colon)
			strv_pushf(&r->user.groups, "system:serviceaccounts:%.*s", (int)(colon - rest),
				   rest);
	}
	/* A user other than anonymous is authenticated, unless the caller
	 * said unauthenticated; anonymous is unauthenticated. */
	if (!strcmp(user, "system:anonymous"))
		strv_push_unique(&r->user.groups, "system:unauthenticated");
	else if (!strv_has(&r->user.groups, "system:unauthenticated"))
		strv_push_unique(&r->user.groups, "system:authenticated");
out:
	strv_free(&groups);
	strv_free(&extra_keys);
	strv_free(&extra_vals);
	return rc;
}
