/*
 * The foreground TLS bootstrap of a kubelet without client rotation
 * (k8s-facts §1.7 path B; upstream pkg/kubelet/certificate/bootstrap
 * LoadClientCert): with the bootstrap kubeconfig's token, ask for a client
 * certificate under the deterministic name node-csr-<hash>, wait up to an
 * hour for it, store it as kubelet-client-<date>.pem with the current
 * symlink, and write the kubeconfig that points at the store. The private
 * key waits in kubelet-client.key.tmp until the certificate arrives, so a
 * restart asks again under the same name and finds its earlier request.
 *
 * With rotation the client certificate manager bootstraps instead; only
 * the kubeconfig's text here is shared (bootstrap_kubeconfig_text).
 */
#include "kubelet/internal.h"

#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/strv.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TMP_KEY "kubelet-client.key.tmp"
#define BOOTSTRAP_WAIT_NS (3600 * NS_PER_SEC)
#define HEALTHZ_WAIT_NS NS_PER_MIN
#define HEALTHZ_PERIOD_NS (2 * NS_PER_SEC)

/* ---- the CSR's name ------------------------------------------------------------ */

/* One field of the digest: its base64url form, then the '|' delimiter that
 * base64url never produces, so no two inputs write the same stream. */
static int digest_field(EVP_MD_CTX *ctx, const unsigned char *data, size_t len)
{
	char *enc = b64url_encode(data, len);
	int ok = EVP_DigestUpdate(ctx, enc, strlen(enc)) && EVP_DigestUpdate(ctx, "|", 1);
	free(enc);
	return ok;
}

char *kubelet_csr_name(EVP_PKEY *key, const char *cn, const char *const *orgs,
		       const char *const *usages)
{
	EVP_MD *md = EVP_MD_fetch(NULL, "SHA512-256", NULL);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char *der = NULL, sum[EVP_MAX_MD_SIZE];
	unsigned int sumlen = 0;
	int derlen = i2d_PUBKEY(key, &der), ok;
	char *name = NULL;

	ok = md && ctx && derlen > 0 && EVP_DigestInit_ex(ctx, md, NULL) &&
	     digest_field(ctx, der, (size_t)derlen) &&
	     digest_field(ctx, (const unsigned char *)cn, strlen(cn));
	for (size_t i = 0; ok && orgs && orgs[i]; i++)
		ok = digest_field(ctx, (const unsigned char *)orgs[i], strlen(orgs[i]));
	for (size_t i = 0; ok && usages && usages[i]; i++)
		ok = digest_field(ctx, (const unsigned char *)usages[i], strlen(usages[i]));
	if (ok && EVP_DigestFinal_ex(ctx, sum, &sumlen)) {
		char *enc = b64url_encode(sum, sumlen);
		name = str_printf("node-csr-%s", enc);
		free(enc);
	} else {
		err_set(ERR_CRYPTO, "SHA-512/256 of the CSR's identity failed");
	}
	OPENSSL_free(der);
	EVP_MD_CTX_free(ctx);
	EVP_MD_free(md);
	return name;
}

/* ---- is the kubeconfig still good? ---------------------------------------------- */

bool bootstrap_kubeconfig_valid(const char *path)
{
	struct kubeconfig kc;
	STACK_OF(X509) *certs = NULL;
	EVP_PKEY *key = NULL;
	bool ok = false;

	if (!file_exists(path))
		return false;
	if (kubeconfig_load(path, &kc) < 0) {
		LOG_UNHANDLED(NULL, "unable to read existing bootstrap client config from %s: %s", path,
			  err_msg());
		return false;
	}
	if (!kc.cert_data || pki_certs_parse(kc.cert_data, strlen(kc.cert_data), &certs) < 0) {
		LOG_UNHANDLED(NULL, "unable to load TLS certificates from existing bootstrap client config "
			  "read from %s: %s",
			  path, kc.cert_data ? err_msg() : "no client certificate");
		goto out;
	}
	if (!kc.key_data || !(key = pki_key_parse(kc.key_data, strlen(kc.key_data))) ||
	    !pki_key_matches(sk_X509_value(certs, 0), key)) {
		LOG_UNHANDLED(NULL, "unable to load TLS configuration from existing bootstrap client config "
			  "read from %s: tls: private key does not match public key",
			  path);
		goto out;
	}
	ok = true;
	for (int i = 0; ok && i < sk_X509_num(certs); i++) {
		int64_t na = pki_cert_not_after(sk_X509_value(certs, i));
		char when[GO_TIME_BUF];
		if (clock_now() > na) {
			LOG_UNHANDLED(NULL, "part of the existing bootstrap client certificate in %s is expired: "
				  "%s",
				  path, go_time_string(na, when));
			ok = false;
		}
	}
out:
	EVP_PKEY_free(key);
	sk_X509_pop_free(certs, X509_free);
	kubeconfig_free(&kc);
	return ok;
}

/* ---- the bootstrap itself ---------------------------------------------------------- */

struct bootstrap {
	struct kubelet *k;
	struct rest_client *c; /* k->boot_client, borrowed: freeing a client inside its
				* own callback is not allowed, and finish() runs there */
	EVP_PKEY *key;
	char *key_path;
	struct timer *timer;
	int64_t healthz_until;
	struct rest_call *call;
	struct csr_request *req;
	struct cred_write *store;
	void (*done)(struct kubelet *k, int rc, const char *err);
};

static void finish(struct bootstrap *b, int rc, const char *err)
{
	struct kubelet *k = b->k;
	void (*done)(struct kubelet *, int, const char *) = b->done;
	char *copy = err ? strdup(err) : NULL;

	bootstrap_cancel(b);
	done(k, rc, copy);
	free(copy);
}

/* upstream's LoadOrGenerateKeyFile, and the store's key before that. */
static EVP_PKEY *pick_key(struct bootstrap *b, bool fresh)
{
	struct kubelet *k = b->k;
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;

	if (!fresh && certstore_load(k->cfg.cert_dir, CERTSTORE_CLIENT, NULL, NULL, &cert, &key) == 0) {
		X509_free(cert);
		return key;
	}
	LOG_V(2, "\"No valid private key and/or certificate found, reusing existing private key "
		 "or creating a new one\"%s",
	      k->log_kv);
	if (!fresh && file_exists(b->key_path) && (key = pki_key_load(b->key_path)))
		return key;
	if (!(key = pki_key_new(PKI_KEY_ECDSA)))
		return NULL;
	if (pki_key_save(b->key_path, key) < 0) {
		EVP_PKEY_free(key);
		return NULL;
	}
	return key;
}

static void request(struct bootstrap *b);

/* The kubeconfig upstream writes: the bootstrap kubeconfig's cluster, and
 * the store's current pair as the user's certificate and key. */
char *bootstrap_kubeconfig_text(struct kubelet *k)
{
	char *abs = realpath(k->cfg.cert_dir, NULL), *ca_abs = NULL, *text;
	struct kubeconfig out = {0};

	out.cert_file = certstore_current_path(abs ? abs : k->cfg.cert_dir, CERTSTORE_CLIENT);
	if (k->boot_ca_file)
		ca_abs = realpath(k->boot_ca_file, NULL);
	out.cluster = "default-cluster";
	out.user = "default-auth";
	out.context = "default-context";
	out.namespace = "default";
	out.server = (char *)k->boot_server;
	out.ca_file = ca_abs ? ca_abs : (char *)k->boot_ca_file;
	out.ca_data = out.ca_file ? NULL : (char *)k->boot_ca_data;
	out.key_file = out.cert_file;
	text = kubeconfig_render(&out);
	free(out.cert_file);
	free(abs);
	free(ca_abs);
	if (!text)
		err_set(ERR_INTERNAL, "render kubeconfig %s", k->cfg.kubeconfig);
	return text;
}

static void on_stored(void *arg, struct cred_write_result *res)
{
	struct bootstrap *b = arg;

	b->store = NULL;
	X509_free(res->cert); /* the kubelet loads its pair from the store */
	if (res->rc < 0) {
		finish(b, ERR_IO, res->err);
		return;
	}
	if (res->unlink_errno)
		LOG_V(2, "\"Failed cleaning up private key file\" path=\"%s\" err=\"%s\"",
		      b->key_path, strerror(res->unlink_errno));
	finish(b, 0, NULL);
}

/* The pair into the store, the key file gone, the kubeconfig pointing at
 * the store: off the loop, in upstream's order. */
static void on_issued(void *arg, const struct csr_result *res)
{
	struct bootstrap *b = arg;
	char *text;

	b->req = NULL;
	if (res->rc < 0) {
		finish(b, res->rc, res->err);
		return;
	}
	if (!(text = bootstrap_kubeconfig_text(b->k))) {
		finish(b, ERR_IO, err_msg());
		return;
	}
	b->store = cred_write_start(b->k->loop,
				    &(struct cred_write_spec){.dir = b->k->cfg.cert_dir,
							      .prefix = CERTSTORE_CLIENT,
							      .cert_pem = res->cert_pem,
							      .key = b->key,
							      .unlink_path = b->key_path,
							      .file_path = b->k->cfg.kubeconfig,
							      .file_text = text},
				    on_stored, b);
	pki_secret_free(text);
}

/* requestNodeCertificate's usages, in its order: the hash covers them. */
static void bootstrap_usages(EVP_PKEY *key, const char *out[4])
{
	size_t n = 0;
	out[n++] = "digital signature";
	out[n++] = "client auth";
	if (pki_key_is_rsa(key))
		out[n++] = "key encipherment";
	out[n] = NULL;
}

static void request(struct bootstrap *b)
{
	struct kubelet *k = b->k;
	char cn[300], *name, *csr_pem;
	const char *orgs[] = {"system:nodes", NULL}, *usages[4];
	struct csr_spec spec;

	kubelet_cn(k, cn, sizeof(cn));
	bootstrap_usages(b->key, usages);
	name = kubelet_csr_name(b->key, cn, orgs, usages);
	csr_pem = name ? pki_csr_new_pem(b->key, cn, orgs, NULL, NULL, 0) : NULL;
	if (!csr_pem) {
		free(name);
		finish(b, ERR_CRYPTO, err_msg());
		return;
	}
	spec = (struct csr_spec){.name = name,
				 .csr_pem = csr_pem,
				 .signer = SIGNER_KUBELET_CLIENT,
				 .usages = usages,
				 .timeout_ns = BOOTSTRAP_WAIT_NS,
				 .server = k->boot_server,
				 .log_kv = k->log_kv};
	LOG_V(2, "\"Waiting for client certificate to be issued\"%s", k->log_kv);
	b->req = csr_request_start(k->loop, b->c, &spec, on_issued, b);
	free(name);
	free(csr_pem);
}

/* ---- waiting for the API server ---------------------------------------------------- */

static void poll_healthz(void *arg);

static void on_healthz(void *arg, int status, json_t *body, const char *err)
{
	struct bootstrap *b = arg;
	char why[512], q[600];

	b->call = NULL;
	if (status == 200) {
		request(b);
		return;
	}
	kubelet_http_error("GET", b->k->boot_server, "/healthz", status, body, err, why,
			   sizeof(why));
	LOG_INFO("\"Failed to connect to apiserver\" err=\"%s\"", log_quote(q, sizeof(q), why));
	if (clock_mono() >= b->healthz_until) {
		/* Upstream only warns and goes on to ask anyway. */
		LOG_INFO("\"Error waiting for apiserver to come up\" err=\"timed out waiting to "
			 "connect to apiserver\"");
		request(b);
		return;
	}
	timer_after(b->timer, HEALTHZ_PERIOD_NS + (int64_t)(rand_double() * 0.2 *
							     (double)HEALTHZ_PERIOD_NS));
}

static void poll_healthz(void *arg)
{
	struct bootstrap *b = arg;
	b->call = rest_do(b->c, "GET", "/healthz", NULL, on_healthz, b);
}

struct bootstrap *bootstrap_start(struct kubelet *k, bool fresh_key,
				  void (*done)(struct kubelet *k, int rc, const char *err))
{
	struct bootstrap *b = calloc(1, sizeof(*b));

	if (!b)
		abort();
	b->k = k;
	b->done = done;
	b->key_path = file_join(k->cfg.cert_dir, TMP_KEY);
	b->timer = loop_timer(k->loop, poll_healthz, b);
	LOG_V(2, "\"Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig "
		 "file\"");
	b->c = k->boot_client;
	if (!b->c || file_mkdirs(k->cfg.cert_dir, 0755) < 0 || !(b->key = pick_key(b, fresh_key))) {
		err_wrap(ERR_INVALID, "unable to bootstrap");
		bootstrap_cancel(b);
		return NULL;
	}
	b->healthz_until = clock_mono() + HEALTHZ_WAIT_NS;
	timer_after(b->timer, 0);
	return b;
}

void bootstrap_cancel(struct bootstrap *b)
{
	if (!b)
		return;
	rest_cancel(b->call);
	csr_request_cancel(b->req);
	cred_write_cancel(b->store);
	timer_free(b->timer);
	EVP_PKEY_free(b->key);
	free(b->key_path);
	free(b);
}
