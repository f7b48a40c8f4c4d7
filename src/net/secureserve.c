#include "net/secureserve.h"

#include "net/httpd.h"
#include "net/tls.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "base/metrics.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SELF_SIGNED_VALIDITY (365 * NS_PER_DAY)

struct secure_server {
	SSL_CTX *ctx;
	struct httpd *h;
	struct metrics *metrics;
	bool client_auth;
};


/* A client certificate the client CA verifies (and that has not expired). */
static bool authenticated(struct secure_server *s, struct evhttp_request *req, char *user,
			  size_t n)
{
	SSL *ssl = httpd_ssl(req);
	const struct tls_identity *id = s->client_auth && ssl ? tls_peer_identity(ssl, clock_now())
							      : NULL;
	if (!id || !id->present || id->verify_err)
		return false;
	snprintf(user, n, "%s", id->user ? id->user : "");
	return true;
}

static void handle(struct evhttp_request *req, void *arg)
{
	struct secure_server *s = arg;
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	char user[256], body[512];

	if (!path)
		path = "/";
	if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		httpd_reply(req, 405, "Method Not Allowed", "text/plain; charset=utf-8",
		      "405 method not allowed\n");
		return;
	}
	if (!strcmp(path, "/healthz") || !strcmp(path, "/livez") || !strcmp(path, "/readyz")) {
		httpd_reply(req, 200, "OK", "text/plain; charset=utf-8", "ok");
		return;
	}
	if (strcmp(path, "/metrics")) {
		httpd_reply(req, 404, "Not Found", "text/plain; charset=utf-8", "404 page not found\n");
		return;
	}
	if (!authenticated(s, req, user, sizeof(user))) {
		snprintf(body, sizeof(body),
			 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
			 "\"Failure\",\"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get "
			 "path \\\"/metrics\\\"\",\"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n");
		httpd_reply(req, 403, "Forbidden", "application/json", body);
		return;
	}
	{
		char *text = metrics_render(s->metrics);
		httpd_reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text);
		free(text);
	}
}

/* GenerateSelfSignedCertKey for localhost and 127.0.0.1. */
static int self_signed(const char *name, X509 **cert, EVP_PKEY **key)
{
	const char *dns[] = {"localhost", NULL}, *ips[] = {"127.0.0.1", NULL};
	char cn[300];
	struct pki_cert_spec spec = {.cn = cn,
				     .dns = dns,
				     .ips = ips,
				     .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT |
					       PKI_U_SERVER_AUTH,
				     .not_before_ns = clock_now(),
				     .not_after_ns = clock_now() + SELF_SIGNED_VALIDITY};

	snprintf(cn, sizeof(cn), "localhost@%lld", (long long)clock_now_sec());
	(void)name;
	if (!(*key = pki_key_new(PKI_KEY_ECDSA)) || !(*cert = pki_cert_new(&spec, *key, NULL, *key))) {
		EVP_PKEY_free(*key);
		*key = NULL;
		return err_wrap(ERR_CRYPTO, "unable to generate self signed cert");
	}
	return 0;
}

static SSL_CTX *serving_ctx(const struct secure_serving_opts *o)
{
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	SSL_CTX *ctx;
	char crt[1024], keyf[1024];

	if (o->tls_cert_file && *o->tls_cert_file)
		return tls_server_ctx(o->tls_cert_file, o->tls_key_file, o->client_ca_file);
	if (o->cert_dir && *o->cert_dir) {
		snprintf(crt, sizeof(crt), "%s/%s.crt", o->cert_dir, o->name);
		snprintf(keyf, sizeof(keyf), "%s/%s.key", o->cert_dir, o->name);
		if (!file_exists(crt) || !file_exists(keyf)) {
			if (file_mkdirs(o->cert_dir, 0700) < 0 || self_signed(o->name, &cert, &key) < 0 ||
			    pki_cert_save(crt, cert) < 0 || pki_key_save(keyf, key) < 0) {
				X509_free(cert);
				EVP_PKEY_free(key);
				return NULL;
			}
			X509_free(cert);
			EVP_PKEY_free(key);
		}
		return tls_server_ctx(crt, keyf, o->client_ca_file);
	}
	if (self_signed(o->name, &cert, &key) < 0)
		return NULL;
	if ((ctx = tls_server_ctx(NULL, NULL, o->client_ca_file)) &&
	    (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1)) {
		SSL_CTX_free(ctx);
		ctx = NULL;
		err_set(ERR_CRYPTO, "unable to use the self signed cert");
	}
	X509_free(cert);
	EVP_PKEY_free(key);
	return ctx;
}

struct secure_server *secure_server_new(struct loop *loop, const struct secure_serving_opts *o)
{
	struct secure_server *s;
	struct httpd_opts ho = {.bind_address = o->bind_address ? o->bind_address : "0.0.0.0",
				.port = o->port,
				.max_body = 1 << 20,
				.max_headers = 64 << 10,
				.idle_timeout_s = 90};

	err_clear();
	if (o->port == 0)
		return NULL;
	if (!(s = calloc(1, sizeof(*s))))
		abort();
	s->metrics = o->metrics;
	s->client_auth = o->client_ca_file && *o->client_ca_file;
	if (!(s->ctx = serving_ctx(o)) || !(s->h = httpd_new(loop, s->ctx, &ho, handle, s))) {
		err_wrap(ERR_UNAVAILABLE, "failed to create listener on %s:%d", ho.bind_address,
			 o->port);
		secure_server_free(s);
		return NULL;
	}
	LOG_INFO("\"Serving securely on %s:%d\"", ho.bind_address, httpd_port(s->h));
	return s;
}

int secure_server_port(const struct secure_server *s)
{
	return s && s->h ? httpd_port(s->h) : 0;
}

void secure_server_free(struct secure_server *s)
{
	if (!s)
		return;
	httpd_free(s->h);
	if (s->ctx)
		SSL_CTX_free(s->ctx);
	free(s);
}
