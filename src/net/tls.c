#include "net/tls.h"

#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/intern.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ex_data slots: the SSL_CTX keeps its client CAs, each SSL its identity. */
static int ctx_roots_idx = -1, ssl_ident_idx = -1;
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;

void tls_identity_clear(struct tls_identity *id)
{
	free(id->user);
	free(id->desc);
	free(id->verify_msg);
	strv_free(&id->groups);
	memset(id, 0, sizeof(*id));
}

void tls_identity_copy(struct tls_identity *to, const struct tls_identity *from)
{
	*to = (struct tls_identity){.present = from->present,
				    .verify_err = from->verify_err,
				    .not_after_ns = from->not_after_ns};
	if ((from->verify_msg && !(to->verify_msg = strdup(from->verify_msg))) ||
	    (from->desc && !(to->desc = strdup(from->desc))) ||
	    (from->user && !(to->user = strdup(from->user))))
		abort();
	for (size_t i = 0; i < from->groups.n; i++)
		strv_push(&to->groups, from->groups.v[i]);
}

static void ident_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	struct tls_identity *id = ptr;
	if (!id)
		return;
	tls_identity_clear(id);
	free(id);
}

static void roots_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	sk_X509_pop_free(ptr, X509_free);
}

static void idx_init(void)
{
	ctx_roots_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, roots_free);
	ssl_ident_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, ident_free);
}

/* Accept any certificate at handshake time; tls_peer_identity judges it. */
static int accept_any(int preverify, X509_STORE_CTX *ctx)
{
	return 1;
}

static const unsigned char alpn_http11[] = "\x08http/1.1";
static const unsigned char alpn_h2[] = "\x02h2\x08http/1.1";

/* arg: the server's protocols in its order of preference (wire form). */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	const unsigned char *mine = arg;
	unsigned char *sel;

	(void)ssl;
	if (SSL_select_next_proto(&sel, outlen, mine, mine == alpn_h2 ? sizeof(alpn_h2) - 1
								       : sizeof(alpn_http11) - 1,
				  in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

/* Ask for client certificates signed by the CAs in pem (what
 * tls_peer_identity verifies against), sending their names so clients
 * pick the right certificate; accept any at the handshake. */
static int client_roots(SSL_CTX *ctx, const char *pem, size_t len)
{
	STACK_OF(X509) *roots;
	STACK_OF(X509_NAME) *names = sk_X509_NAME_new_null();
	int r;

	if (!names)
		abort();
	if ((r = pki_certs_parse(pem, len, &roots)) < 0) {
		sk_X509_NAME_free(names);
		return r;
	}
	for (int i = 0; i < sk_X509_num(roots); i++) {
		X509_NAME *n = X509_NAME_dup(X509_get_subject_name(sk_X509_value(roots, i)));
		if (!n || !sk_X509_NAME_push(names, n))
			abort();
	}
	SSL_CTX_set_ex_data(ctx, ctx_roots_idx, roots);
	SSL_CTX_set_client_CA_list(ctx, names);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
	return 0;
}

static int load_roots(SSL_CTX *ctx, const char *path)
{
	char *buf;
	size_t len;
	int r;

	if ((r = file_read(path, &buf, &len, 4 << 20)) < 0)
		return r;
	r = client_roots(ctx, buf, len);
	free(buf);
	return r < 0 ? err_wrap(r, "%s", path) : 0;
}

SSL_CTX *tls_server_ctx(const char *cert_file, const char *key_file, const char *client_ca_file)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	pthread_once(&idx_once, idx_init);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* An idle connection gives its record buffers back (~34 KiB a
	 * connection, both directions): a kubelet's connection is idle most of
	 * its life, and 10,000 of them are 330 MiB otherwise. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (cert_file && (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1)) {
		unsigned long e = ERR_get_error();
		char msg[256];
		ERR_error_string_n(e, msg, sizeof(msg));
		ERR_clear_error();
		err_set(ERR_INVALID, "load serving certificate %s / %s: %s", cert_file, key_file,
			msg);
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (client_ca_file && load_roots(ctx, client_ca_file) < 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* With client certificates OpenSSL refuses to resume a session (TLS
	 * 1.2 session ids) that has no id context: the handshake fails with
	 * "session id context uninitialized" instead of a full handshake. */
	SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"cube", 4);
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, (void *)alpn_http11);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
	/* Go clients never resume TLS 1.3 sessions here: issuing two tickets per
	 * handshake was a quarter of the handshake's cost (bench/). */
	SSL_CTX_set_num_tickets(ctx, 0);
	return ctx;
}

void tls_server_offer_h2(SSL_CTX *ctx)
{
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, (void *)alpn_h2);
}

bool tls_alpn_h2(const SSL *ssl)
{
	const unsigned char *p;
	unsigned int n;

	SSL_get0_alpn_selected(ssl, &p, &n);
	return n == 2 && !memcmp(p, "h2", 2);
}

static int add_pem_certs(X509_STORE *store, const char *pem)
{
	STACK_OF(X509) *certs;
	int r = pki_certs_parse(pem, strlen(pem), &certs);
	if (r < 0)
		return r;
	for (int i = 0; i < sk_X509_num(certs); i++)
		X509_STORE_add_cert(store, sk_X509_value(certs, i));
	sk_X509_pop_free(certs, X509_free);
	return 0;
}

/* ---- why a client's handshake failed, in Go's words --------------------------- */

static pthread_once_t verify_once = PTHREAD_ONCE_INIT;
static int verify_idx = -1;

static void free_msg(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	free(ptr);
}

static void verify_idx_init(void)
{
	verify_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_msg);
}

/* The first failure OpenSSL reports is explained while its certificate is
 * at hand; the handshake then fails as before. */
static int client_verify(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	int64_t at = (int64_t)X509_VERIFY_PARAM_get_time(X509_STORE_CTX_get0_param(x));

	if (ok || !ssl || verify_idx < 0 || SSL_get_ex_data(ssl, verify_idx))
		return ok;
	pki_verify_explain(X509_STORE_CTX_get_error(x), X509_STORE_CTX_get_current_cert(x),
			   at * NS_PER_SEC);
	SSL_set_ex_data(ssl, verify_idx, strdup(err_msg()));
	return ok;
}

const char *tls_verify_failure(const SSL *ssl)
{
	return verify_idx >= 0 ? SSL_get_ex_data(ssl, verify_idx) : NULL;
}

/* ---- one context per trusted CA, for the whole process --------------------------- */

/* Making a context and parsing its CA bundle cost OpenSSL 3 about 1 ms, the
 * most of a hollow kubelet's start; a thousand kubelets trust one CA, as
 * clients and as servers. The contexts live until the process ends (a
 * handful: one per CA text and end). */
struct shared_ctx {
	const char *ca_pem; /* str_intern's: one pointer per text */
	bool server;
	SSL_CTX *ctx;
	struct shared_ctx *next;
};

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_ctx *shared_ctxs;

/* A server's, without a certificate, asking for client certificates from
 * the CAs in client_ca_pem when given. */
static SSL_CTX *server_ctx_for(const char *client_ca_pem)
{
	SSL_CTX *ctx = tls_server_ctx(NULL, NULL, NULL);

	if (ctx && client_ca_pem && client_roots(ctx, client_ca_pem, strlen(client_ca_pem)) < 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static SSL_CTX *shared_ctx(const char *ca_pem, bool server)
{
	const char *key = str_intern(ca_pem); /* NULL, none, is not "", a bad text */
	struct shared_ctx *e;
	SSL_CTX *ctx = NULL;

	pthread_mutex_lock(&shared_lock);
	for (e = shared_ctxs; e && (e->ca_pem != key || e->server != server); e = e->next)
		;
	if (!e && (ctx = server ? server_ctx_for(ca_pem) : tls_client_ctx(ca_pem, NULL, NULL))) {
		if (!(e = calloc(1, sizeof(*e))))
			abort();
		*e = (struct shared_ctx){.ca_pem = key, .server = server, .ctx = ctx, .next = shared_ctxs};
		shared_ctxs = e;
	}
	if (e) {
		ctx = e->ctx;
		SSL_CTX_up_ref(ctx);
	}
	pthread_mutex_unlock(&shared_lock);
	return ctx;
}

SSL_CTX *tls_client_ctx_shared(const char *ca_pem)
{
	return shared_ctx(ca_pem, false);
}

SSL_CTX *tls_server_ctx_shared(const char *client_ca_pem)
{
	return shared_ctx(client_ca_pem, true);
}

int tls_client_cert_parse(const char *cert_pem, const char *key_pem, X509 **cert, EVP_PKEY **key)
{
	*cert = pki_cert_parse(cert_pem, strlen(cert_pem));
	*key = *cert ? pki_key_parse(key_pem, strlen(key_pem)) : NULL;
	if (*key && X509_check_private_key(*cert, *key) == 1)
		return 0;
	ERR_clear_error();
	X509_free(*cert);
	EVP_PKEY_free(*key);
	*cert = NULL;
	*key = NULL;
	return err_set(ERR_INVALID, "bad client certificate or key");
}

int tls_use_client_cert(SSL *ssl, X509 *cert, EVP_PKEY *key)
{
	if (SSL_use_certificate(ssl, cert) == 1 && SSL_use_PrivateKey(ssl, key) == 1)
		return 0;
	ERR_clear_error();
	return err_set(ERR_INVALID, "client certificate not usable");
}

SSL_CTX *tls_client_ctx(const char *ca_pem, const char *cert_pem, const char *key_pem)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	static const unsigned char alpn[] = "\x08http/1.1";

	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* as the server's */
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	if (ca_pem) {
		if (add_pem_certs(SSL_CTX_get_cert_store(ctx), ca_pem) < 0)
			goto fail;
		pthread_once(&verify_once, verify_idx_init);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, client_verify);
	}
	if (cert_pem && key_pem) {
		X509 *cert = pki_cert_parse(cert_pem, strlen(cert_pem));
		EVP_PKEY *key = cert ? pki_key_parse(key_pem, strlen(key_pem)) : NULL;
		int ok = cert && key && SSL_CTX_use_certificate(ctx, cert) == 1 &&
			 SSL_CTX_use_PrivateKey(ctx, key) == 1;
		X509_free(cert);
		EVP_PKEY_free(key);
		if (!ok)
			goto fail;
	}
	return ctx;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

static void hex_id(const ASN1_OCTET_STRING *s, char *out, size_t n)
{
	size_t o = 0;
	out[0] = '\0';
	for (int i = 0; s && i < ASN1_STRING_length(s) && o + 4 < n; i++)
		o += (size_t)snprintf(out + o, n - o, i ? ":%02X" : "%02X",
				      ASN1_STRING_get0_data(s)[i]);
}

/* Upstream's "SN=<decimal>, SKID=<AB:CD..>, AKID=<..>" for log lines. */
static char *describe(X509 *cert)
{
	char skid[200], akid[200], *sn, *out;
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);

	sn = bn ? BN_bn2dec(bn) : NULL;
	hex_id(X509_get0_subject_key_id(cert), skid, sizeof(skid));
	hex_id(X509_get0_authority_key_id(cert), akid, sizeof(akid));
	if (asprintf(&out, "SN=%s, SKID=%s, AKID=%s", sn ? sn : "?", skid, akid) < 0)
		abort();
	OPENSSL_free(sn);
	BN_free(bn);
	return out;
}

static struct tls_identity *ident_new(SSL *ssl, int64_t now_ns)
{
	struct tls_identity *id = calloc(1, sizeof(*id));
	X509 *peer = SSL_get0_peer_certificate(ssl);
	STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
	STACK_OF(X509) *roots = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_roots_idx);
	STACK_OF(X509) *inter = NULL;

	if (!id)
		abort();
	if (!peer)
		return id;
	id->present = true;
	pki_name_read(X509_get_subject_name(peer), &id->user, &id->groups);
	id->not_after_ns = pki_cert_not_after(peer);
	id->desc = describe(peer);
	/* On the server side the chain does not include the leaf. */
	if (chain && sk_X509_num(chain) > 0)
		inter = chain;
	if (!roots) {
		id->verify_err = err_set(ERR_UNAUTHORIZED, "x509: no client CA configured");
	} else {
		id->verify_err = pki_verify(peer, inter, roots, now_ns, PKI_PURPOSE_CLIENT);
	}
	if (id->verify_err && !(id->verify_msg = strdup(err_msg())))
		abort();
	return id;
}

const struct tls_identity *tls_peer_identity(SSL *ssl, int64_t now_ns)
{
	struct tls_identity *id;

	pthread_once(&idx_once, idx_init);
	id = SSL_get_ex_data(ssl, ssl_ident_idx);
	if (!id) {
		id = ident_new(ssl, now_ns);
		SSL_set_ex_data(ssl, ssl_ident_idx, id);
		return id;
	}
	/* The chain was good when first seen; time is what can change since. */
	if (id->present && id->verify_err == 0 && now_ns >= id->not_after_ns) {
		X509 *peer = SSL_get0_peer_certificate(ssl);
		STACK_OF(X509) *roots = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_roots_idx);
		id->verify_err = pki_verify(peer, NULL, roots, now_ns, PKI_PURPOSE_CLIENT);
		free(id->verify_msg);
		if (!(id->verify_msg = strdup(err_msg())))
			abort();
	}
	return id;
}
