/*
 * What exists from the start: the four namespaces every cluster has, the
 * bootstrap token Secret when the server is given a token file (cube's
 * stand-in for `kubeadm token create`), and the RBAC bootstrap policy
 * (policy.c).
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

void seed_create(struct apiserver *s, const char *key, json_t *obj)
{
	stamp(obj);
	if (cache_create(s->cache, key, obj, NULL, NULL) < 0)
		LOG_ERROR("seed %s: %s", key, err_msg());
}

static void ensure(struct apiserver *s, const char *key, json_t *obj)
{
	if (cache_get(s->cache, key)) {
		json_decref(obj);
		return;
	}
	seed_create(s, key, obj);
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
	policy_reconcile(s, first_start);
}
