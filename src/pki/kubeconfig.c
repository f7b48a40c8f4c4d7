#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/strv.h"

#include "base/b64.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/yamljson.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#define KUBECONFIG_MAX (4 << 20)

/* The element of list `key` whose name is `name`, then its `inner` object. */
static json_t *named(const json_t *root, const char *key, const char *name, const char *inner)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(root, key), i, e)
	{
		if (name && json_is_string(json_object_get(e, "name")) &&
		    strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
			return json_object_get(e, inner);
	}
	return NULL;
}

static int b64_decode_pem(const char *in, char **out)
{
	/* An empty field decodes to nothing, as Go's decoder has it. */
	if (!(*out = *in ? (char *)b64_decode(in, NULL) : strdup("")))
		return err_set(ERR_PARSE, "illegal base64 data");
	return 0;
}

/* Fills *data (and *file) from "<what>-data" or "<what>" in obj. */
static int take_pem(const json_t *obj, const char *what, const char *dir, char **data,
		    char **file, bool lazy)
{
	char key[64];
	const char *v;

	snprintf(key, sizeof(key), "%s-data", what);
	if ((v = json_string_value(json_object_get(obj, key))) && *v)
		return b64_decode_pem(v, data) < 0 ? err_wrap(ERR_PARSE, "%s", key) : 0;
	if ((v = json_string_value(json_object_get(obj, what))) && *v) {
		*file = file_join(dir, v);
		if (lazy && !file_exists(*file))
			return 0;
		return file_read(*file, data, NULL, KUBECONFIG_MAX);
	}
	return 0;
}

static int load(const char *path, struct kubeconfig *out, bool lazy)
{
	char dir[4096];
	json_t *root, *ctx, *cluster, *user;
	const char *cur;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = yj_load(path, &root)) < 0)
		return err_wrap(r, "load kubeconfig");
	file_dirname(path, dir, sizeof(dir));
	cur = jx_str(root, "current-context");
	if ((!cur || !*cur) && json_array_size(json_object_get(root, "contexts")) == 1)
		cur = jx_str(json_array_get(json_object_get(root, "contexts"), 0), "name");
	if (!cur || !*cur || !(ctx = named(root, "contexts", cur, "context"))) {
		r = err_set(ERR_INVALID, "%s: context \"%s\" does not exist", path, cur ? cur : "");
		goto out;
	}
	out->context = str_dup(cur);
	out->cluster = str_dup(jx_str(ctx, "cluster"));
	out->user = str_dup(jx_str(ctx, "user"));
	out->namespace = str_dup(jx_str(ctx, "namespace"));
	cluster = named(root, "clusters", out->cluster, "cluster");
	user = named(root, "users", out->user, "user");
	if (!cluster) {
		r = err_set(ERR_INVALID, "%s: cluster \"%s\" does not exist", path,
			    out->cluster ? out->cluster : "");
		goto out;
	}
	out->server = str_dup(jx_str(cluster, "server"));
	r = take_pem(cluster, "certificate-authority", dir, &out->ca_data, &out->ca_file, false);
	if (r == 0 && user)
		r = take_pem(user, "client-certificate", dir, &out->cert_data, &out->cert_file,
			     lazy);
	if (r == 0 && user)
		r = take_pem(user, "client-key", dir, &out->key_data, &out->key_file, lazy);
	if (r == 0 && user)
		out->token = str_dup(jx_str(user, "token"));
out:
	json_decref(root);
	if (r < 0) {
		err_wrap(r, "%s", path);
		kubeconfig_free(out);
	}
	return r;
}

int kubeconfig_load(const char *path, struct kubeconfig *out)
{
	return load(path, out, false);
}

int kubeconfig_load_lazy(const char *path, struct kubeconfig *out)
{
	return load(path, out, true);
}

static void put_pem(json_t *obj, const char *what, const char *data, const char *file)
{
	char key[64];
	if (file) {
		json_object_set_new(obj, what, json_string(file));
	} else if (data) {
		char *b64 = b64_encode(data, strlen(data));
		snprintf(key, sizeof(key), "%s-data", what);
		json_object_set_new(obj, key, json_string(b64));
		free(b64);
	}
}

char *kubeconfig_render(const struct kubeconfig *kc)
{
	json_t *root = json_object(), *cluster = json_object(), *user = json_object();
	json_t *ctx = json_object();
	char *text;

	json_object_set_new(root, "apiVersion", json_string("v1"));
	json_object_set_new(root, "kind", json_string("Config"));
	json_object_set_new(cluster, "server", json_string(kc->server ? kc->server : ""));
	put_pem(cluster, "certificate-authority", kc->ca_data, kc->ca_file);
	json_object_set_new(root, "clusters",
			    json_pack("[{s:o,s:s}]", "cluster", cluster, "name", kc->cluster));
	json_object_set_new(ctx, "cluster", json_string(kc->cluster));
	if (kc->namespace)
		json_object_set_new(ctx, "namespace", json_string(kc->namespace));
	json_object_set_new(ctx, "user", json_string(kc->user));
	json_object_set_new(root, "contexts",
			    json_pack("[{s:o,s:s}]", "context", ctx, "name", kc->context));
	json_object_set_new(root, "current-context", json_string(kc->context));
	json_object_set_new(root, "preferences", json_object());
	put_pem(user, "client-certificate", kc->cert_data, kc->cert_file);
	put_pem(user, "client-key", kc->key_data, kc->key_file);
	if (kc->token)
		json_object_set_new(user, "token", json_string(kc->token));
	json_object_set_new(root, "users", json_pack("[{s:s,s:o}]", "name", kc->user, "user", user));

	text = yj_emit(root);
	json_decref(root);
	return text;
}

int kubeconfig_save(const char *path, const struct kubeconfig *kc)
{
	char *text = kubeconfig_render(kc);
	int r;

	if (!text)
		return err_set(ERR_INTERNAL, "render kubeconfig %s", path);
	r = file_write_atomic(path, text, strlen(text), 0600);
	pki_secret_free(text);
	return r;
}

void kubeconfig_free(struct kubeconfig *kc)
{
	char **fields[] = {&kc->cluster,   &kc->user,      &kc->context,   &kc->namespace,
			   &kc->server,    &kc->ca_data,   &kc->ca_file,   &kc->cert_data,
			   &kc->cert_file, &kc->key_data,  &kc->key_file,  &kc->token};
	if (kc->key_data)
		OPENSSL_cleanse(kc->key_data, strlen(kc->key_data));
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		free(*fields[i]);
		*fields[i] = NULL;
	}
}
