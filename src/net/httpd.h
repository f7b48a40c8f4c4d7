/*
 * httpd — an HTTPS server on a cube loop: libevent's evhttp over
 * bufferevent_openssl, with the settings that matter measured in
 * reference/deps.md: TCP_NODELAY on every connection, header and body
 * limits, keep-alive, no read timeout on streaming (watch) replies, and a
 * graceful stop. With an h2_handler, a connection whose handshake chose
 * HTTP/2 is handed to an h2 session (net/h2.h) at its first bytes; the
 * limits below apply to it too (the first stream's headers are judged).
 *
 * The handler receives every request (evhttp_request) and owns replying.
 * httpd_ssl() gives the request's SSL for tls_peer_identity().
 *
 * What a client cannot do before it has shown credentials: each connection
 * runs through a filter that holds its first request until the headers are
 * complete and asks credentials_ok (a verified client certificate, a valid
 * bearer token); without them the connection's bodies are limited to
 * HTTPD_PREAUTH_MAX_BODY (over HTTP/2, HTTPD_PREAUTH_MAX_STREAMS of them
 * at a time), it counts against its peer's
 * max_unauthenticated_per_peer, and the headers (TLS handshake included)
 * must be complete within header_timeout_s and the request within
 * request_timeout_s — absolute deadlines that a trickle of bytes
 * cannot push back. Beyond max_connections a new connection is closed at
 * once; when accept() itself fails (EMFILE) the listener pauses and backs
 * off as Go's server does.
 *
 * The handler runs in the log scope current at httpd_new (base/log.h): a
 * hollow kubelet's server logs to that kubelet's file.
 *
 * Several loops may serve one port: a server made with httpd_opts.share
 * listens on the same address and port as the first one (made with
 * reuse_port: the kernel spreads connections over the sockets), and the
 * limits above count the port's connections whichever loop took them.
 *
 * Ownership: the server is the caller's (httpd_free); the SSL_CTX is
 * borrowed and must outlive it; a server shared must outlive those made
 * with it. Threads: each server its loop's thread only; credentials_ok
 * runs there too.
 */
#ifndef CUBE_NET_HTTPD_H
#define CUBE_NET_HTTPD_H

#include "base/loop.h"

#include <event2/http.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

struct httpd;
struct h2_stream;

/* An HTTP/2 request (net/h2.h): the handler answers it with h2_respond. */
typedef void (*httpd_h2_handler)(struct h2_stream *s, void *arg);

struct httpd_opts {
	const char *bind_address; /* "0.0.0.0", "127.0.0.1", "::" */
	int port;                 /* 0 = pick a free one (see httpd_port) */
	size_t max_body;          /* bytes; larger bodies get 413 */
	size_t max_headers;       /* bytes; larger headers get 400 */
	int idle_timeout_s;       /* keep-alive idle connections close after this */
	/* Does this connection show credentials (ssl, the Authorization header
	 * or NULL)? NULL: a verified client certificate does. */
	bool (*credentials_ok)(void *arg, SSL *ssl, const char *authorization);
	/* credentials_ok cannot judge bearer tokens (the handler does): a
	 * connection that shows one counts against its peer, but without the
	 * pre-auth limits on its bodies and streams until the handler has
	 * judged the token (httpd_credentials_judged). */
	bool bearer_unjudged;
	int header_timeout_s;                /* 0: HTTPD_HEADER_TIMEOUT_S */
	int request_timeout_s;               /* 0: HTTPD_REQUEST_TIMEOUT_S */
	size_t max_connections;              /* 0: the fd limit less a reserve */
	size_t max_unauthenticated_per_peer; /* 0: HTTPD_MAX_UNAUTH_PER_PEER */
	/* HTTP/2 requests go here when the handshake chose "h2" (the SSL_CTX
	 * offers it: tls_server_offer_h2); NULL: HTTP/1.1 only. */
	httpd_h2_handler h2_handler;
	/* Each connection's certificate, picked at its handshake
	 * (SSL_set_cert_cb): a context shared by many servers has none. */
	int (*cert_cb)(SSL *ssl, void *arg);
	void *cert_arg;
	/* Listen with SO_REUSEPORT, so that servers made with share may too. */
	bool reuse_port;
	/* Listen on this server's address and port too (it was made with
	 * reuse_port) and share its counts: a server per thread for one port. */
	struct httpd *share;
};

/* Go's ReadHeaderTimeout of kube-apiserver; upstream's request timeout. */
#define HTTPD_HEADER_TIMEOUT_S 32
#define HTTPD_REQUEST_TIMEOUT_S 60
#define HTTPD_PREAUTH_MAX_BODY ((size_t)64 << 10)
/* HTTP/2 streams open at once on a connection without credentials (the
 * rest are refused, REFUSED_STREAM: Go's client retries them, cube's
 * reports the error to its caller, whose own retry follows): at most
 * this many pre-auth bodies per connection. HTTP/1.1 has one at a time. */
#define HTTPD_PREAUTH_MAX_STREAMS 4
#define HTTPD_MAX_UNAUTH_PER_PEER 128

typedef void (*httpd_handler)(struct evhttp_request *req, void *arg);

struct httpd *httpd_new(struct loop *loop, SSL_CTX *tls, const struct httpd_opts *o,
                        httpd_handler handler, void *arg);
void httpd_free(struct httpd *h);
int httpd_port(const struct httpd *h);
SSL *httpd_ssl(struct evhttp_request *req);
/* An HTTP/2 request's SSL and "ip:port" of its peer. */
SSL *httpd_h2_ssl(struct h2_stream *s);
const char *httpd_h2_peer(struct h2_stream *s, char *buf, size_t n);
/* The handler judged a bearer token credentials_ok could not
 * (bearer_unjudged) on req's connection: ok, it counts against its peer no
 * more and its bodies may be as large as any; refused, the pre-auth limits
 * apply to it from now on. */
void httpd_credentials_judged(struct evhttp_request *req, bool ok);
void httpd_h2_credentials_judged(struct h2_stream *s, bool ok);
/* Bytes of replies on req's connection not yet written to the socket. */
size_t httpd_unsent(struct evhttp_request *req);
/* How long a quiet stream may stay open (libevent 2.1 has no "never"). */
#define HTTPD_STREAM_TIMEOUT_S (24 * 3600)

/* Keep a streaming reply open however long it stays quiet. */
void httpd_stream_no_timeout(struct evhttp_request *req);
/* A complete reply: status line, Content-Type and body (a C string). */
void httpd_reply(struct evhttp_request *req, int code, const char *reason, const char *ct,
                 const char *body);
/* "GET" → EVHTTP_REQ_GET (HTTP's methods, case-sensitive); 0 for others. */
enum evhttp_cmd_type httpd_method(const char *name);
/* "127.0.0.1:54321" of the peer, into buf. */
const char *httpd_peer(struct evhttp_request *req, char *buf, size_t n);

#endif
