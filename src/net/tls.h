/*
 * tls — OpenSSL contexts for cube's servers and clients, and the identity of
 * a TLS peer.
 *
 * Servers ask for a client certificate but never fail the handshake over it:
 * like kube-apiserver, they finish the handshake and judge the certificate
 * per request (tls_peer_identity), so an expired or foreign certificate gets
 * a 401 with a logged reason rather than a TLS alert (k8s-facts §8). ALPN
 * offers http/1.1 unless the server speaks HTTP/2 too (tls_server_offer_h2):
 * advertising h2 without speaking it breaks kubectl.
 *
 * Ownership: contexts are the caller's (SSL_CTX_free). tls_peer_identity's
 * result belongs to the SSL and lives as long as it.
 * Threads: contexts may be shared; one SSL per connection.
 */
#ifndef CUBE_NET_TLS_H
#define CUBE_NET_TLS_H

#include "base/strv.h"

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

/* cert_file may hold the chain; client_ca_file may be NULL (no client certs).
 * cert_file NULL: no certificate — the caller picks one per handshake
 * (SSL_CTX_set_cert_cb). */
SSL_CTX *tls_server_ctx(const char *cert_file, const char *key_file, const char *client_ca_file);
/* ALPN "h2" then "http/1.1", in that preference, as kube-apiserver. */
void tls_server_offer_h2(SSL_CTX *ctx);
/* Did the handshake choose "h2"? */
bool tls_alpn_h2(const SSL *ssl);
/* For clients: trust ca_pem (PEM text); optional client cert+key PEM. */
SSL_CTX *tls_client_ctx(const char *ca_pem, const char *cert_pem, const char *key_pem);
/*
 * The process's client context trusting ca_pem (NULL: no verification
 * roots), made on first use and shared by every caller with the same text:
 * a new reference (SSL_CTX_free), NULL on bad PEM. A client certificate
 * goes on each SSL (tls_use_client_cert), not on the shared context.
 */
SSL_CTX *tls_client_ctx_shared(const char *ca_pem);
/*
 * The process's server context asking for client certificates from the
 * CAs in client_ca_pem (PEM text; NULL: none asked), made on first use and
 * shared by every caller with the same text: a new reference. It has no
 * certificate: each connection gets its own from a callback
 * (SSL_set_cert_cb, httpd_opts.cert_cb). NULL on bad PEM.
 */
SSL_CTX *tls_server_ctx_shared(const char *client_ca_pem);
/* A client certificate and its key, parsed once and checked to match:
 * 0 with new references in *cert and *key, or ERR_INVALID. */
int tls_client_cert_parse(const char *cert_pem, const char *key_pem, X509 **cert, EVP_PKEY **key);
/* Present cert/key on this connection (references taken): 0 or ERR_INVALID. */
int tls_use_client_cert(SSL *ssl, X509 *cert, EVP_PKEY *key);
/* After a client handshake failed verifying the server: Go's x509 text
 * ("x509: certificate has expired or is not yet valid: current time ... is
 * after ..."), kept on the SSL; NULL when verification did not fail. */
const char *tls_verify_failure(const SSL *ssl);

struct tls_identity {
	bool present;      /* the peer sent a certificate */
	int verify_err;    /* 0, or ERR_EXPIRED / ERR_UNAUTHORIZED from pki_verify */
	char *verify_msg;  /* Go's x509 text when verify_err != 0 */
	char *desc;        /* "SN=<decimal>, SKID=<hex>, AKID=<hex>", as upstream logs it */
	char *user;        /* CN */
	struct strv groups; /* O's */
	int64_t not_after_ns;
};

/*
 * The peer's certificate judged against the client CA at time now_ns.
 * The result is cached on the connection; only the time check is redone.
 * Returns a borrowed pointer valid while the SSL lives.
 */
const struct tls_identity *tls_peer_identity(SSL *ssl, int64_t now_ns);
/* A copy of from into to (its strings its own), for another thread; and
 * what a copy holds, freed. */
void tls_identity_copy(struct tls_identity *to, const struct tls_identity *from);
void tls_identity_clear(struct tls_identity *id);

#endif
