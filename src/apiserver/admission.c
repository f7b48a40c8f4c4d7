/*
 * Admission, after authorization and before validation and storage:
 * NamespaceLifecycle, NodeRestriction (noderestriction.c), TaintNodesByCondition,
 * DefaultTolerationSeconds, and the CSR requestor fields. Each plugin either mutates the object or refuses
 * the request with upstream's message.
 */
#include "apiserver/internal.h"

#include "api/status.h"

#include "base/err.h"
#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int forbid(struct req *r, const char *fmt, const char *a, const char *b)
{
	char reason[512], q[128], msg[1024];
	snprintf(reason, sizeof(reason), fmt, a, b);
	resource_qualified(r->res, q, sizeof(q));
	if (r->name)
		snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: %s", q, r->name, reason);
	else
		snprintf(msg, sizeof(msg), "%s is forbidden: %s", q, reason);
	req_fail_status(r, status_failure(ERR_FORBIDDEN, msg, r->res->group, r->res->plural,
					  r->name));
	return ERR_FORBIDDEN;
}

/* No new objects in a namespace that is missing or going away. */
static int namespace_lifecycle(struct req *r, const json_t *obj, const json_t *old)
{
	char key[300], msg[512];
	json_t *ns;

	/* The namespaces the cluster is made of cannot go. */
	if (is(r->verb, "delete") && !r->sub && kind_undeletable(r->kind, r->name))
		return forbid(r, "this namespace may not be deleted%s%s", "", "");
	/* Subresource creates too (eviction, binding): kubectl drain reads the
	 * NamespaceTerminating cause. A server-side apply of a new object is a
	 * create to admission, as upstream's patcher admits it. */
	if (!r->res->namespaced ||
	    !(is(r->verb, "create") || (is(r->verb, "patch") && !old && !r->sub)))
		return 0;
	snprintf(key, sizeof(key), "/registry/namespaces/%s", r->ns);
	ns = cache_get(r->s->cache, key);
	/* Upstream looks a namespace its informer lacks up live. */
	if (!ns && refresh_and_retry(r))
		return ERR_NOTFOUND;
	if (!ns) {
		snprintf(msg, sizeof(msg), "namespaces \"%s\" not found", r->ns);
		req_fail_status(r, status_failure(ERR_NOTFOUND, msg, "", "namespaces", r->ns));
		return ERR_NOTFOUND;
	}
	if (jx_get(ns, "metadata.deletionTimestamp") ||
	    is(jx_str(ns, "status.phase"), "Terminating")) {
		/* NewForbidden's "<resource> \"<name>\" is forbidden: ...", with
		 * the NamespaceTerminating cause clients look for. */
		/* extractResourceName: the name, else generateName, else "Unknown". */
		const char *name = r->sub ? r->name : jx_str(obj, "metadata.name");
		if (!name || !*name)
			name = jx_str(obj, "metadata.generateName");
		if (!name || !*name)
			name = "Unknown";
		char q[128], why[384], cause[320];
		json_t *st, *causes;
		resource_qualified(r->res, q, sizeof(q));
		snprintf(why, sizeof(why),
			 "unable to create new content in namespace %s because it is being "
			 "terminated",
			 r->ns);
		snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: %s", q, name ? name : "", why);
		st = status_failure(ERR_FORBIDDEN, msg, r->res->group, r->res->plural, name);
		snprintf(cause, sizeof(cause), "namespace %s is being terminated", r->ns);
		causes = json_pack("[{s:s,s:s,s:s}]", "reason", "NamespaceTerminating", "message",
				   cause, "field", "metadata.namespace");
		if (json_is_object(json_object_get(st, "details")))
			json_object_set_new(json_object_get(st, "details"), "causes", causes);
		else
			json_decref(causes);
		req_fail_status(r, st);
		return ERR_FORBIDDEN;
	}
	return 0;
}

/* 300 s tolerations for not-ready and unreachable, unless the pod has its own. */
void admit_pod(struct req *r, json_t *obj)
{
	static const char *const keys[] = {"node.kubernetes.io/not-ready",
					   "node.kubernetes.io/unreachable"};
	json_t *spec = json_object_get(obj, "spec"), *tols, *t;
	int64_t secs[2] = {r->s->o.not_ready_toleration_s, r->s->o.unreachable_toleration_s};
	size_t i;

	/* Upstream's plugin admits updates too: a pod whose tolerations are
	 * replaced (the seeds' plan 3) gets back the ones it lost. */
	if (!json_is_object(spec) || r->sub ||
	    !(is(r->verb, "create") || is(r->verb, "update") || is(r->verb, "patch")))
		return;
	tols = json_object_get(spec, "tolerations");
	if (!json_is_array(tols) && tols)
		return; /* validation says why */
	if (!tols) {
		tols = json_array();
		json_object_set_new(spec, "tolerations", tols);
	}
	for (int k = 0; k < 2; k++) {
		bool have = false;
		json_array_foreach(tols, i, t)
		{
			const char *key = jx_str(t, "key"), *eff = jx_str(t, "effect");
			/* An Exists toleration with no key tolerates everything. */
			if ((is(key, keys[k]) || ((!key || !*key) && is(jx_str(t, "operator"), "Exists"))) &&
			    (!eff || !*eff || is(eff, "NoExecute")))
				have = true;
		}
		if (!have)
			json_array_append_new(tols, json_pack("{s:s,s:s,s:s,s:I}", "key", keys[k],
							      "operator", "Exists", "effect",
							      "NoExecute", "tolerationSeconds",
							      (json_int_t)secs[k]));
	}
}

/* TaintNodesByCondition: a new Node is not ready until its controller says
 * otherwise — node.kubernetes.io/not-ready:NoSchedule, which the node
 * lifecycle controller lifts once the node reports Ready. */
void admit_node(struct req *r, json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec"), *taints, *t;
	size_t i;

	if (!is(r->verb, "create") || !json_is_object(obj))
		return;
	if (!spec) {
		spec = json_object();
		json_object_set_new(obj, "spec", spec);
	}
	/* Not an object: validation refuses it; leave it to say so. */
	if (!json_is_object(spec))
		return;
	if (!json_is_array(taints = json_object_get(spec, "taints"))) {
		taints = json_array();
		json_object_set_new(spec, "taints", taints);
	}
	json_array_foreach(taints, i, t) if (is(jx_str(t, "key"), "node.kubernetes.io/not-ready") &&
					     is(jx_str(t, "effect"), "NoSchedule")) return;
	json_array_append_new(taints, json_pack("{s:s,s:s}", "key", "node.kubernetes.io/not-ready",
						"effect", "NoSchedule"));
}

/* The requestor fields are the server's to fill, from who asked. */
void admit_csr(struct req *r, json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec"), *groups;
	if (!spec || !is(r->verb, "create"))
		return;
	groups = json_array();
	json_object_set_new(spec, "username", json_string(r->user.name ? r->user.name : ""));
	if (r->user.uid)
		json_object_set_new(spec, "uid", json_string(r->user.uid));
	else
		json_object_del(spec, "uid");
	for (size_t i = 0; i < r->user.groups.n; i++)
		json_array_append_new(groups, json_string(r->user.groups.v[i]));
	json_object_set_new(spec, "groups", groups);
	if (r->user.extra && json_object_size(r->user.extra))
		json_object_set_new(spec, "extra", json_deep_copy(r->user.extra));
	else
		json_object_del(spec, "extra");
}

int admit(struct req *r, json_t *obj, const json_t *old)
{
	int rc;
	if ((rc = namespace_lifecycle(r, obj, old)) < 0 || (rc = node_restriction(r, obj, old)) < 0)
		return rc;
	if (obj && !r->sub && r->kind->admit)
		r->kind->admit(r, obj);
	return 0;
}
