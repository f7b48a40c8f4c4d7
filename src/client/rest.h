/*
 * rest — the client side of the Kubernetes API, on a cube loop.
 *
 * Requests are asynchronous: rest_do sends, and the callback runs on the
 * loop with the HTTP status and the parsed JSON body (or a transport error).
 * Connections are HTTPS/1.1 keep-alive over libevent's evhttp and
 * bufferevent_openssl, a few per client so requests run side by side; a
 * watch gets a connection of its own and delivers one event per line.
 *
 * Credentials can change under a running client (kubelet certificate
 * rotation): rest_set_client_cert builds a new TLS context that connections
 * opened from then on use; connections already open keep the certificate
 * they were opened with, as Go's transport does, until the owner closes them
 * with rest_close_all — requests and watches in flight then fail with a
 * transport error, and their owners retry. upstream's kubelet closes them
 * only when the certificate changes ("Certificate rotation detected,
 * shutting down client connections to start using new credentials"), so an
 * expired certificate stays on the connections that were opened with it.
 *
 * Ownership: the client is the caller's; bodies passed in are borrowed; the
 * body given to a callback is borrowed for the call. Threads: the loop's.
 */
#ifndef CUBE_CLIENT_REST_H
#define CUBE_CLIENT_REST_H

#include "base/loop.h"

#include <jansson.h>
#include <openssl/types.h>
#include <stdbool.h>
#include <stddef.h>

struct rest_config {
	const char *server;   /* "https://127.0.0.1:6443" */
	const char *ca_pem;   /* trust for the server */
	const char *cert_pem; /* client certificate (chain), or NULL */
	const char *key_pem;
	X509 *cert;           /* or a pair already parsed (references taken); a
	                       * key that is not the certificate's is refused */
	EVP_PKEY *key;
	const char *token;    /* bearer token, or NULL */
	const char *user_agent;
	int max_conns;        /* parallel connections for plain requests (default 4) */
	int timeout_s;        /* per request (default 30) */
};

struct kubeconfig;

struct rest_client;

struct rest_client *rest_client_new(struct loop *loop, const struct rest_config *cfg);
/* From a loaded kubeconfig (pki/kubeconfig.h). */
struct rest_client *rest_client_from_kubeconfig(struct loop *loop, const struct kubeconfig *kc,
						const char *user_agent);
/* A component's client from its --kubeconfig: kc when given, else the file
 * at path (NULL with err_msg() when neither works: "--kubeconfig is
 * required", "invalid configuration: <path>: ..."); server, when not NULL,
 * replaces the kubeconfig's (tests and in-process components pick the port
 * at run time). */
struct rest_client *rest_client_for_component(struct loop *loop, const char *path,
					      const struct kubeconfig *kc, const char *server,
					      const char *user_agent);
void rest_client_free(struct rest_client *c);

/* The client certificate for connections opened from now on; open ones are
 * left alone (rest_close_all). 0 or an error. */
int rest_set_client_cert(struct rest_client *c, const char *cert_pem, const char *key_pem);
/* The same from a parsed pair that belongs together (a certificate
 * manager's): references taken, nothing parsed or copied. */
void rest_set_client_pair(struct rest_client *c, X509 *cert, EVP_PKEY *key);
/* New connections send no client certificate; open ones keep theirs. */
void rest_clear_client_cert(struct rest_client *c);
/* Close every connection (e.g. after credentials changed elsewhere). */
void rest_close_all(struct rest_client *c);
/*
 * A network partition between this client and its server (cube fault
 * partition): while on, open connections are cut and every request and
 * watch fails on the next turn with Go's "dial tcp HOST:PORT: connect:
 * network is unreachable", as when the route is gone; off, connections are
 * made again as usual. The client's owner retries as it would for any
 * transport error.
 */
void rest_set_unreachable(struct rest_client *c, bool on);
/*
 * Connections made from now on start from this local address (a hollow
 * node's own on loopback, so that the API server sees each node as its own
 * peer, as it sees real nodes); NULL: the system's choice. An IPv4
 * loopback source is used only when the server is on IPv4 loopback too
 * (elsewhere it could not be reached from it). 0, or ERR_INVALID when addr
 * is not an IP address.
 */
int rest_set_source_address(struct rest_client *c, const char *addr);
bool rest_unreachable(const struct rest_client *c);

/*
 * Bearer credentials that come and go (the controller manager's service
 * account tokens, client-go's cached token source): rest_set_token is used
 * by requests sent from then on; while rest_hold(c, true) plain requests
 * wait, in order, and go out when the hold is lifted (watches are never
 * held); on_unauthorized runs when a request carrying a token gets a 401,
 * so the owner can fetch a new one.
 */
int rest_set_token(struct rest_client *c, const char *token);
void rest_hold(struct rest_client *c, bool on);
/* The held requests fail (status 0, err); the hold stays. */
void rest_fail_held(struct rest_client *c, const char *err);
void rest_on_unauthorized(struct rest_client *c, void (*fn)(void *arg), void *arg);
/* A client for the same server and trust, with no credentials yet. */
struct rest_client *rest_client_derive(const struct rest_client *c, const char *user_agent);

/*
 * status: the HTTP status, or 0 on a transport failure (then err says why).
 * body: the response parsed as JSON, or NULL.
 */
typedef void (*rest_cb)(void *arg, int status, json_t *body, const char *err);

struct rest_call;

/* method "GET", "POST", ...; body may be NULL. Content-Type is JSON unless
 * given. The handle is valid until the callback runs or rest_cancel. */
struct rest_call *rest_do(struct rest_client *c, const char *method, const char *path,
			  const json_t *body, rest_cb cb, void *arg);
struct rest_call *rest_do_ct(struct rest_client *c, const char *method, const char *path,
			     const char *content_type, const json_t *body, rest_cb cb, void *arg);
/*
 * A request whose reply is bytes, not JSON (a kubelet's /metrics through the
 * API server's node proxy): cb gets the status (0 with err on a transport
 * failure), the reply's Content-Type (may be NULL) and its body, borrowed
 * for the call. accept NULL: any media type; body (text, may be NULL) goes
 * as content_type (NULL: JSON). Never held (rest_hold).
 */
typedef void (*rest_raw_cb)(void *arg, int status, const char *content_type, const char *body,
			    size_t len, const char *err);
struct rest_call *rest_do_raw(struct rest_client *c, const char *method, const char *path,
			      const char *accept, const char *content_type, const char *body,
			      rest_raw_cb cb, void *arg);
/* The callback will not run (the request itself may still complete). */
void rest_cancel(struct rest_call *call);
/*
 * A blocking call for command-line tools: runs the client's loop (which
 * nothing else may be running) until the reply. The HTTP status, or 0 with
 * *err (malloc'd) on a transport failure; *out the body (new reference, may
 * be NULL). out and err may be NULL.
 */
int rest_do_sync(struct rest_client *c, const char *method, const char *path, const json_t *body,
		 json_t **out, char **err);

struct rest_watch;
typedef void (*rest_event_cb)(void *arg, const char *type, json_t *object);
/* The stream ended: status 200 for a clean end, else the HTTP status or 0. */
typedef void (*rest_end_cb)(void *arg, int status, const char *err);

struct rest_watch *rest_watch(struct rest_client *c, const char *path, rest_event_cb on_event,
			      rest_end_cb on_end, void *arg);
/* Stop a watch; its callbacks are not called again. NULL is a no-op. */
void rest_watch_stop(struct rest_watch *w);

#endif
