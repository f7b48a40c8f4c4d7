/*
 * What exists from the start: the four namespaces every cluster has, and the
 * bootstrap token Secret when the server is given a token file (cube's
 * stand-in for `kubeadm token create`).
 */
#include "apiserver/objects.h"

#include "pki/pki.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void stamp(json_t *obj)
{
	char now[TIME_BUF], *uid = new_uid();
	jx_set_str(obj, "metadata.uid", uid);
	jx_set_str(obj, "metadata.creationTimestamp", time_format_rfc3339(clock_now(), now));
	free(uid);
}

static void ensure(struct apiserver *s, const char *key, json_t *obj)
{
	if (cache_get(s->cache, key)) {
		json_decref(obj);
		return;
	}
	stamp(obj);
	if (cache_create(s->cache, key, obj, NULL, NULL) < 0)
		LOG_ERROR("seed %s: %s", key, err_msg());
}

static json_t *b64(const char *s)
{
	char *out = b64_encode(s, strlen(s));
	json_t *j = json_string(out);
	free(out);
	return j;
}

static void seed_token(struct apiserver *s, const char *path)
{
	char *text, key[128], name[64], id[7];
	json_t *secret;

	if (file_read(path, &text, NULL, 4096) < 0) {
		LOG_ERROR("bootstrap token file: %s", err_msg());
		return;
	}
	text[strcspn(text, "\r\n")] = '\0';
	if (!pki_token_valid(text)) {
		LOG_ERROR("bootstrap token file %s: not a token of the form [a-z0-9]{6}.[a-z0-9]{16}",
			  path);
		free(text);
		return;
	}
	memcpy(id, text, 6);
	id[6] = '\0';
	snprintf(name, sizeof(name), "bootstrap-token-%s", id);
	snprintf(key, sizeof(key), "/registry/secrets/kube-system/%s", name);
	secret = json_pack("{s:s,s:s,s:{s:s,s:s},s:s,s:{s:o,s:o,s:o,s:o,s:o}}", "kind", "Secret",
			   "apiVersion", "v1", "metadata", "name", name, "namespace",
			   "kube-system", "type", "bootstrap.kubernetes.io/token", "data",
			   "token-id", b64(id), "token-secret", b64(text + 7),
			   "usage-bootstrap-authentication", b64("true"),
			   "usage-bootstrap-signing", b64("true"), "auth-extra-groups",
			   b64("system:bootstrappers:kubeadm:default-node-token"));
	ensure(s, key, secret);
	free(text);
}

/* ---- RBAC: upstream's bootstrap roles for node certificates, and kubeadm's
 * bindings of them ------------------------------------------------------------ */

static json_t *rbac_object(const char *kind, const char *name, bool bootstrap)
{
	json_t *o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "rbac.authorization.k8s.io/v1",
			      "kind", kind, "metadata", "name", name);
	if (bootstrap) {
		/* upstream's marks on the policy it reconciles at every start */
		jx_set(o, "metadata.annotations",
		       json_pack("{s:s}", "rbac.authorization.kubernetes.io/autoupdate", "true"));
		jx_set(o, "metadata.labels", json_pack("{s:s}", "kubernetes.io/bootstrapping",
						       "rbac-defaults"));
	}
	return o;
}

static void ensure_rbac(struct apiserver *s, const char *plural, json_t *obj)
{
	const struct resource *res = resource_find("rbac.authorization.k8s.io", "v1", plural);
	char *key = object_key(res, NULL, jx_str(obj, "metadata.name"));
	ensure(s, key, obj);
	free(key);
}

static void bind_group(struct apiserver *s, const char *name, const char *role,
		       const char *group)
{
	json_t *b = rbac_object("ClusterRoleBinding", name, false);
	json_object_set_new(b, "roleRef", json_pack("{s:s,s:s,s:s}", "apiGroup",
						    "rbac.authorization.k8s.io", "kind",
						    "ClusterRole", "name", role));
	json_object_set_new(b, "subjects", json_pack("[{s:s,s:s,s:s}]", "kind", "Group",
						     "apiGroup", "rbac.authorization.k8s.io",
						     "name", group));
	ensure_rbac(s, "clusterrolebindings", b);
}

/*
 * Upstream's bootstrap ClusterRoles that cube serves so far (1.32's
 * bootstrappolicy), one rule a string: "groups;resources;verbs[;names]"
 * with comma-separated lists ("" is the core group), or "@urls;verbs" for
 * non-resource URLs.
 */
struct policy_role {
	const char *name;
	const char *const rules[24];
};

static const struct policy_role policy_roles[] = {
	{"cluster-admin", {"*;*;*", "@*;*"}},
	{"system:discovery",
	 {"@/api,/api/*,/apis,/apis/*,/healthz,/livez,/openapi,/openapi/*,/readyz,/version,"
	  "/version/;get"}},
	{"system:public-info-viewer", {"@/healthz,/livez,/readyz,/version,/version/;get"}},
	{"system:basic-user",
	 {"authorization.k8s.io;selfsubjectaccessreviews,selfsubjectrulesreviews;create",
	  "authentication.k8s.io;selfsubjectreviews;create"}},
	{"system:monitoring",
	 {"@/healthz,/healthz/*,/livez,/livez/*,/metrics,/metrics/slis,/readyz,/readyz/*;get"}},
	{"system:auth-delegator",
	 {"authentication.k8s.io;tokenreviews;create",
	  "authorization.k8s.io;subjectaccessreviews;create"}},
	{"system:kube-scheduler",
	 {",events.k8s.io;events;create,patch,update", "coordination.k8s.io;leases;create",
	  "coordination.k8s.io;leases;get,update;kube-scheduler", ";nodes;get,list,watch",
	  ";pods;delete,get,list,watch", ";bindings,pods/binding;create",
	  ";pods/status;patch,update", ";replicationcontrollers,services;get,list,watch",
	  "apps,extensions;replicasets;get,list,watch", "apps;statefulsets;get,list,watch",
	  "policy;poddisruptionbudgets;get,list,watch",
	  ";persistentvolumeclaims,persistentvolumes;get,list,watch",
	  "authentication.k8s.io;tokenreviews;create",
	  "authorization.k8s.io;subjectaccessreviews;create", "storage.k8s.io;csinodes;get,list,watch",
	  ";namespaces;get,list,watch", "storage.k8s.io;csidrivers;get,list,watch",
	  "storage.k8s.io;csistoragecapacities;get,list,watch"}},
	{"system:volume-scheduler",
	 {";persistentvolumes;get,list,patch,update,watch", "storage.k8s.io;storageclasses;get,list,watch",
	  ";persistentvolumeclaims;get,list,patch,update,watch"}},
	{"system:kube-controller-manager",
	 {",events.k8s.io;events;create,patch,update", "coordination.k8s.io;leases;create",
	  "coordination.k8s.io;leases;get,update;kube-controller-manager",
	  ";secrets,serviceaccounts;create", ";secrets;delete",
	  ";configmaps,namespaces,secrets,serviceaccounts;get", ";secrets,serviceaccounts;update",
	  "authentication.k8s.io;tokenreviews;create",
	  "authorization.k8s.io;subjectaccessreviews;create", "*;*;list,watch",
	  ";serviceaccounts/token;create"}},
	{"system:node-proxier",
	 {";endpoints,services;list,watch", ";nodes;get,list,watch",
	  ",events.k8s.io;events;create,patch,update", "discovery.k8s.io;endpointslices;list,watch"}},
	{"system:node-bootstrapper", {"certificates.k8s.io;certificatesigningrequests;create,get,list,watch"}},
	{"system:certificates.k8s.io:certificatesigningrequests:nodeclient",
	 {"certificates.k8s.io;certificatesigningrequests/nodeclient;create"}},
	{"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
	 {"certificates.k8s.io;certificatesigningrequests/selfnodeclient;create"}},
};

/* Upstream's bootstrap ClusterRoleBindings for those roles: name, role,
 * then "User:x" / "Group:y" subjects. */
static const struct {
	const char *name, *role, *const subjects[3];
} policy_bindings[] = {
	{"cluster-admin", "cluster-admin", {"Group:system:masters"}},
	{"system:discovery", "system:discovery", {"Group:system:authenticated"}},
	{"system:basic-user", "system:basic-user", {"Group:system:authenticated"}},
	{"system:public-info-viewer", "system:public-info-viewer",
	 {"Group:system:authenticated", "Group:system:unauthenticated"}},
	{"system:monitoring", "system:monitoring", {"Group:system:monitoring"}},
	{"system:kube-scheduler", "system:kube-scheduler", {"User:system:kube-scheduler"}},
	{"system:volume-scheduler", "system:volume-scheduler", {"User:system:kube-scheduler"}},
	{"system:kube-controller-manager", "system:kube-controller-manager",
	 {"User:system:kube-controller-manager"}},
	{"system:node-proxier", "system:node-proxier", {"User:system:kube-proxy"}},
};

static json_t *split_list(const char *text, size_t n)
{
	json_t *out = json_array();
	const char *p = text, *end = text + n;
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
		json_array_append_new(out, json_stringn(p, len));
		if (!comma)
			break;
		p = comma + 1;
	}
	return out;
}

/* One rule from its string form (see policy_roles). */
static json_t *policy_rule(const char *text)
{
	const char *f[4] = {NULL};
	size_t len[4] = {0}, n = 0;
	bool urls = *text == '@';
	const char *p = urls ? text + 1 : text;

	while (n < 4) {
		const char *semi = strchr(p, ';');
		f[n] = p;
		len[n] = semi ? (size_t)(semi - p) : strlen(p);
		n++;
		if (!semi)
			break;
		p = semi + 1;
	}
	if (urls)
		return json_pack("{s:o,s:o}", "verbs", split_list(f[1], len[1]), "nonResourceURLs",
				 split_list(f[0], len[0]));
	json_t *rule = json_pack("{s:o,s:o,s:o}", "verbs", split_list(f[2], len[2]), "apiGroups",
				 split_list(f[0], len[0]), "resources", split_list(f[1], len[1]));
	if (n == 4)
		json_object_set_new(rule, "resourceNames", split_list(f[3], len[3]));
	return rule;
}

#define NODECLIENT "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
#define SELFNODECLIENT "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"

static void seed_rbac(struct apiserver *s, bool first_start)
{
	for (size_t i = 0; i < sizeof(policy_roles) / sizeof(policy_roles[0]); i++) {
		json_t *role = rbac_object("ClusterRole", policy_roles[i].name, true), *rules;
		json_object_set_new(role, "rules", rules = json_array());
		for (size_t k = 0; policy_roles[i].rules[k]; k++)
			json_array_append_new(rules, policy_rule(policy_roles[i].rules[k]));
		ensure_rbac(s, "clusterroles", role);
	}
	for (size_t i = 0; i < sizeof(policy_bindings) / sizeof(policy_bindings[0]); i++) {
		json_t *b = rbac_object("ClusterRoleBinding", policy_bindings[i].name, true), *subs;
		json_object_set_new(b, "roleRef", json_pack("{s:s,s:s,s:s}", "apiGroup",
							    "rbac.authorization.k8s.io", "kind",
							    "ClusterRole", "name",
							    policy_bindings[i].role));
		json_object_set_new(b, "subjects", subs = json_array());
		for (size_t k = 0; k < 3 && policy_bindings[i].subjects[k]; k++) {
			const char *sub = policy_bindings[i].subjects[k], *colon = strchr(sub, ':');
			json_array_append_new(subs, json_pack("{s:s%,s:s,s:s}", "kind", sub,
							      (size_t)(colon - sub), "apiGroup",
							      "rbac.authorization.k8s.io", "name",
							      colon + 1));
		}
		ensure_rbac(s, "clusterrolebindings", b);
	}
	/* kubeadm creates its bindings once, at init: one deleted later stays
	 * deleted (the seeds' "CSR not auto-approved"). */
	if (!first_start)
		return;
	bind_group(s, "kubeadm:kubelet-bootstrap", "system:node-bootstrapper",
		   "system:bootstrappers:kubeadm:default-node-token");
	bind_group(s, "kubeadm:node-autoapprove-bootstrap", NODECLIENT,
		   "system:bootstrappers:kubeadm:default-node-token");
	bind_group(s, "kubeadm:node-autoapprove-certificate-rotation", SELFNODECLIENT,
		   "system:nodes");
}

void seed_defaults(struct apiserver *s)
{
	/* The first start with this policy: a new store, or one an older cube
	 * made before RBAC (no system:node-bootstrapper yet). */
	char *marker = object_key(resource_find("rbac.authorization.k8s.io", "v1", "clusterroles"),
				  NULL, "system:node-bootstrapper");
	bool first_start = !cache_get(s->cache, marker);
	free(marker);
	static const char *const names[] = {"default", "kube-system", "kube-public",
					    "kube-node-lease"};
	const struct resource *ns = resource_find("", "v1", "namespaces");

	for (size_t i = 0; i < 4; i++) {
		char key[96];
		json_t *obj = json_pack("{s:s,s:s,s:{s:s}}", "kind", "Namespace", "apiVersion", "v1",
					"metadata", "name", names[i]);
		ns->defaults(obj);
		snprintf(key, sizeof(key), "/registry/namespaces/%s", names[i]);
		ensure(s, key, obj);
	}
	if (s->o.bootstrap_token_file)
		seed_token(s, s->o.bootstrap_token_file);
	seed_rbac(s, first_start);
}
