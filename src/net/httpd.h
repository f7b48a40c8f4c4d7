/*
 * httpd — an HTTPS/1.1 server on a cube loop: libevent's evhttp over
 * bufferevent_openssl, with the settings that matter measured in
 * reference/deps.md: TCP_NODELAY on every connection, header and body
 * limits, keep-alive, no read timeout on streaming (watch) replies, and a
 * graceful stop.
 *
 * The handler receives every request (evhttp_request) and owns replying.
 * httpd_ssl() gives the request's SSL for tls_peer_identity().
 *
 * Ownership: the server is the caller's (httpd_free); the SSL_CTX is
 * borrowed and must outlive it. Threads: the loop's thread only.
 */
#ifndef CUBE_NET_HTTPD_H
#define CUBE_NET_HTTPD_H

#include "base/loop.h"

#include <event2/http.h>
#include <openssl/ssl.h>
#include <stddef.h>

struct httpd;

struct httpd_opts {
	const char *bind_address; /* "0.0.0.0", "127.0.0.1", "::" */
	int port;                 /* 0 = pick a free one (see httpd_port) */
	size_t max_body;          /* bytes; larger bodies get 413 */
	size_t max_headers;       /* bytes; larger headers get 400 */
	int idle_timeout_s;       /* keep-alive idle connections close after this */
};

typedef void (*httpd_handler)(struct evhttp_request *req, void *arg);

struct httpd *httpd_new(struct loop *loop, SSL_CTX *tls, const struct httpd_opts *o,
			httpd_handler handler, void *arg);
void httpd_free(struct httpd *h);
int httpd_port(const struct httpd *h);
SSL *httpd_ssl(struct evhttp_request *req);
/* How long a quiet stream may stay open (libevent 2.1 has no "never"). */
#define HTTPD_STREAM_TIMEOUT_S (24 * 3600)

/* Keep a streaming reply open however long it stays quiet. */
void httpd_stream_no_timeout(struct evhttp_request *req);
/* A complete reply: status line, Content-Type and body (a C string). */
void httpd_reply(struct evhttp_request *req, int code, const char *reason, const char *ct,
		 const char *body);
/* "127.0.0.1:54321" of the peer, into buf. */
const char *httpd_peer(struct evhttp_request *req, char *buf, size_t n);

#endif
