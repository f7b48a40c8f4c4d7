/*
 * What exists from the start: the four namespaces every cluster has, and the
 * bootstrap token Secret when the server is given a token file (cube's
 * stand-in for `kubeadm token create`).
 */
#include "apiserver/objects.h"

#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <openssl/evp.h>
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
	size_t n = strlen(s);
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	json_t *j;
	if (!out)
		abort();
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	j = json_string(out);
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

/* A ClusterRole granting `verbs` on one resource (and subresource). */
static void csr_role(struct apiserver *s, const char *name, const char *resource,
		     json_t *verbs)
{
	json_t *role = rbac_object("ClusterRole", name, true);
	json_object_set_new(role, "rules",
			    json_pack("[{s:o,s:[s],s:[s]}]", "verbs", verbs, "apiGroups",
				      "certificates.k8s.io", "resources", resource));
	ensure_rbac(s, "clusterroles", role);
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

#define NODECLIENT "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
#define SELFNODECLIENT "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"

static void seed_rbac(struct apiserver *s, bool first_start)
{
	csr_role(s, "system:node-bootstrapper", "certificatesigningrequests",
		 json_pack("[s,s,s,s]", "create", "get", "list", "watch"));
	csr_role(s, NODECLIENT, "certificatesigningrequests/nodeclient", json_pack("[s]", "create"));
	csr_role(s, SELFNODECLIENT, "certificatesigningrequests/selfnodeclient",
		 json_pack("[s]", "create"));
	/* kubeadm creates its bindings once, at init: one deleted later stays
	 * deleted (the seeds' "CSR not auto-approved"). */
	if (!first_start || !s->o.bootstrap_token_file)
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
	bool first_start = !cache_get(s->cache, "/registry/namespaces/kube-system");
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
