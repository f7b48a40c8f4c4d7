#include "client/rest.h"

#include "net/h2.h"
#include "net/httpd.h"
#include "net/tls.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/intern.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/strv.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct rest_call;

struct conn {
	struct rest_client *c;
	struct evhttp_connection *evcon; /* HTTP/1.1 */
	struct h2 *h2;                   /* HTTP/2, once the handshake chose it */
	bool h2mode;                     /* offered h2: no evcon */
	struct bufferevent *bev;
	struct event *reap;   /* fires once on a later turn to close this connection */
	const char *why;      /* why it is being closed */
	struct rest_call *calls;   /* requests in flight on it */
	bool dead;            /* take no more requests */
	bool nodelay;         /* TCP_NODELAY set on its socket */
	bool watch;           /* dedicated to one watch */
	char why_buf[512];    /* why, when it had to be worked out */
	struct conn *next;
};

/* One request in flight: a plain call, or a watch. */
struct rest_call {
	struct conn *conn;
	struct evhttp_request *req;
	rest_cb cb;
	void *arg;
	struct rest_watch *w;
	/* The log scope current when the call was made: its callbacks (and
	 * what they start) run in it. */
	const struct log_scope *scope;
	/* rest_do_raw's: the reply's bytes, not JSON (cb is NULL then). */
	rest_raw_cb raw;
	char accept[128];
	struct rest_call *next;
	/* HTTP/2: the request until its connection is ready, then its stream,
	 * the reply so far and the client's deadline for it. */
	char *method, *path, *ct, *body;
	struct h2_stream *stream;
	struct evbuffer *in;
	struct event *deadline;
	/* Refused streams sent again (h2_retry): how often, and the timer of
	 * the next try while the call waits on no connection. */
	int retries;
	struct event *retry;
	struct rest_client *parked; /* its client while it waits on none */
};

/* A request waiting for credentials (rest_hold). */
struct held {
	struct rest_call *call; /* the caller's handle, on no connection yet */
	char *method, *path, *ct, *body;
	struct held *next;
};

struct rest_client {
	struct loop *loop;
	SSL_CTX *tls;    /* the process's for this CA (tls_client_ctx_shared) */
	char *source;    /* the local address connections start from, or NULL */
	X509 *cert;      /* the client certificate each connection presents */
	EVP_PKEY *key;
	char *host, *token;
	const char *user_agent, *ca_pem; /* str_intern's: every node's the same */
	int port, max_conns, timeout_s;
	int source_family; /* source's, or AF_UNSPEC */
	bool h1_only;   /* DISABLE_HTTP2, or the server chose HTTP/1.1 */
	int read_idle_s, ping_timeout_s; /* HTTP/2 health check */
	struct conn *conns;
	bool holding;
	bool unreachable;  /* rest_set_unreachable: every connection fails ... */
	char unreachable_why[320]; /* ... with this (connections point at it) */
	struct held *held, **held_tail;
	struct rest_call *retrying; /* refused calls waiting to be sent again */
	void (*on_unauthorized)(void *arg);
	void *unauthorized_arg;
};

struct rest_watch {
	struct rest_call *call;
	rest_event_cb on_event;
	rest_end_cb on_end;
	void *arg;
	struct evbuffer *line; /* a partial event line */
	bool stopped;          /* the owner is gone: no more callbacks */
	bool in_event;         /* on_event is running (HTTP/2: free after it) */
};

/* ---- connections ------------------------------------------------------------- */

static void call_unlink(struct rest_call *call)
{
	for (struct rest_call **p = &call->conn->calls; *p; p = &(*p)->next)
		if (*p == call) {
			*p = call->next;
			return;
		}
}

static void watch_free(struct rest_watch *w)
{
	evbuffer_free(w->line);
	free(w);
}

/* Report a call that will never complete, and forget it. */
static void call_free(struct rest_call *call)
{
	if (call->stream)
		h2_cancel(call->stream);
	if (call->deadline)
		event_free(call->deadline);
	if (call->retry)
		event_free(call->retry);
	if (call->in)
		evbuffer_free(call->in);
	free(call->method);
	free(call->path);
	free(call->ct);
	free(call->body);
	free(call);
}

static void call_abandon(struct rest_call *call, const char *why, bool report)
{
	struct rest_watch *w = call->w;
	const struct log_scope *prev = log_scope_enter(call->scope);
	if (call->req)
		evhttp_cancel_request(call->req);
	if (w) {
		w->in_event = true; /* a stop from on_end frees nothing */
		if (report && !w->stopped)
			w->on_end(w->arg, 0, why);
		watch_free(w);
	} else if (report && call->cb) {
		call->cb(call->arg, 0, NULL, why);
	} else if (report && call->raw) {
		call->raw(call->arg, 0, NULL, NULL, 0, why);
	}
	call_free(call);
	log_scope_enter(prev);
}

static void conn_free(struct conn *k, bool report)
{
	struct rest_client *c = k->c;

	/* Cancelling and freeing below may reset the connection: nothing may
	 * schedule another reap of k from here on. */
	k->dead = true;
	if (k->evcon)
		evhttp_connection_set_closecb(k->evcon, NULL, NULL);
	for (struct conn **p = &c->conns; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	while (k->calls) {
		struct rest_call *call = k->calls;
		k->calls = call->next;
		call_abandon(call, k->why ? k->why : "connection closed", report);
	}
	event_free(k->reap);
	if (k->evcon)
		evhttp_connection_free(k->evcon);
	else if (k->h2)
		h2_free_with_bev(k->h2); /* later, when freed from its own callback */
	else
		bufferevent_free(k->bev);
	free(k);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	conn_free(arg, true);
}

/* Close on a later turn: never from inside libevent's callback for it. */
static void conn_retire(struct conn *k, const char *why)
{
	if (k->dead)
		return;
	k->dead = true;
	k->why = why;
	event_active(k->reap, 0, 0);
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
	/* An openssl bufferevent cannot reconnect: never reuse this one. */
	conn_retire(arg, "connection closed by the server");
}

static SSL *client_ssl(struct rest_client *c)
{
	SSL *ssl = SSL_new(c->tls);
	unsigned char ip[16];

	if (!ssl)
		abort();
	/* Parsed and checked against each other when they were set. */
	if (c->cert && tls_use_client_cert(ssl, c->cert, c->key) < 0)
		LOG_ERROR("\"Client certificate not presented\" err=\"%s\"", err_msg());
	/* The server's certificate is judged at the process clock's time. */
	X509_VERIFY_PARAM_set_time(SSL_get0_param(ssl), (time_t)clock_now_sec());
	/* Check the server's name or address, as Go's client does. */
	if (inet_pton(AF_INET, c->host, ip) == 1 || inet_pton(AF_INET6, c->host, ip) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), c->host);
	} else {
		SSL_set_tlsext_host_name(ssl, c->host);
		X509_VERIFY_PARAM_set1_host(SSL_get0_param(ssl), c->host, 0);
	}
	return ssl;
}

/* A connection of c's, not yet connected, over ssl (taken), on c's list. */
static struct conn *conn_alloc(struct rest_client *c, SSL *ssl)
{
	struct conn *k = calloc(1, sizeof(*k));

	if (!k)
		abort();
	k->c = c;
	k->reap = event_new(loop_base(c->loop), -1, 0, on_reap, k);
	k->bev =
	    bufferevent_openssl_socket_new(loop_base(c->loop), -1, ssl, BUFFEREVENT_SSL_CONNECTING,
						BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!k->reap || !k->bev)
		abort();
	k->next = c->conns;
	c->conns = k;
	return k;
}

static struct conn *conn_new(struct rest_client *c, bool watch)
{
	struct conn *k = conn_alloc(c, client_ssl(c));

	k->watch = watch;
	k->evcon = evhttp_connection_base_bufferevent_new(loop_base(c->loop), NULL, k->bev, c->host,
	                                                  (ev_uint16_t)c->port);
	evhttp_connection_set_retries(k->evcon, 0);
	if (c->source)
		evhttp_connection_set_local_address(k->evcon, c->source);
	/* -1 would mean libevent's 50 s default, which cuts quiet watches. */
	evhttp_connection_set_timeout(k->evcon, watch ? HTTPD_STREAM_TIMEOUT_S : c->timeout_s);
	evhttp_connection_set_closecb(k->evcon, on_conn_close, k);
	return k;
}

static int conn_load(const struct conn *k)
{
	int n = 0;
	for (const struct rest_call *call = k->calls; call; call = call->next)
		n++;
	return n;
}

/* The least busy usable connection, or a new one while under the limit. */
static struct conn *conn_pick(struct rest_client *c)
{
	struct conn *best = NULL;
	int n = 0, best_load = 0;
	for (struct conn *k = c->conns; k; k = k->next) {
		int load;
		if (k->dead || k->watch || k->h2mode)
			continue;
		n++;
		load = conn_load(k);
		if (!best || load < best_load) {
			best = k;
			best_load = load;
		}
	}
	if (!best || (best_load > 0 && n < c->max_conns))
		best = conn_new(c, false);
	return best;
}

/* Why a request failed below HTTP: the TLS error when there is one. */
static const char *transport_error(struct conn *k, char *buf, size_t n)
{
	unsigned long e = bufferevent_get_openssl_error(k->bev);
	SSL *ssl = bufferevent_openssl_get_ssl(k->bev);
	const char *why = ssl ? tls_verify_failure(ssl) : NULL;

	if (why) {
		/* Go's words, which the runbook greps for: the server's
		 * certificate judged at this client's clock. */
		snprintf(buf, n, "tls: failed to verify certificate: %s", why);
	} else if (e && ERR_GET_LIB(e) != 0) {
		/* Library 0 is the socket below TLS (refused, reset), not TLS itself. */
		char ossl[256];
		ERR_error_string_n(e, ossl, sizeof(ossl));
		snprintf(buf, n, "tls: %s", ossl);
	} else {
		snprintf(buf, n, "connection to %s:%d failed or was closed", k->c->host,
			 k->c->port);
	}
	return buf;
}

static void call_attach(struct conn *k, struct rest_call *call)
{
	call->conn = k;
	call->next = k->calls;
	k->calls = call;
}

static struct rest_call *call_new(struct conn *k, rest_cb cb, void *arg)
{
	struct rest_call *call = calloc(1, sizeof(*call));
	if (!call)
		abort();
	call->cb = cb;
	call->arg = arg;
	call->scope = log_scope_current();
	if (k)
		call_attach(k, call);
	return call;
}

/* evhttp makes the socket when the first request connects; a small request
 * body must not wait 40 ms for a delayed ACK. */
static void conn_nodelay(struct conn *k)
{
	evutil_socket_t fd;
	if (k->nodelay || (fd = bufferevent_getfd(k->bev)) < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	k->nodelay = true;
}

/* ---- requests ------------------------------------------------------------------- */

static void add_headers(struct rest_client *c, struct evhttp_request *req, const char *ct,
			const char *accept)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char host[300];

	snprintf(host, sizeof(host), "%s:%d", c->host, c->port);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Accept", accept && *accept ? accept : "application/json");
	evhttp_add_header(h, "User-Agent", c->user_agent);
	if (ct)
		evhttp_add_header(h, "Content-Type", ct);
	if (c->token) {
		/* Service account JWTs run to a kilobyte and more. */
		size_t n = strlen(c->token) + 8;
		char *auth = malloc(n);
		if (!auth)
			abort();
		snprintf(auth, n, "Bearer %s", c->token);
		evhttp_add_header(h, "Authorization", auth);
		free(auth);
	}
}

/* The reply, to whoever asked: status 0 with err on a transport failure. */
static void deliver(struct rest_call *call, struct rest_client *c, int status, const char *ct,
		    const char *data, size_t len, const char *err)
{
	json_t *body = NULL;

	if (status == 401 && c->on_unauthorized && c->token)
		c->on_unauthorized(c->unauthorized_arg);
	if (!call->cb && !call->raw) {
		/* Cancelled: nobody wants the answer. */
	} else if (status == 0) {
		if (call->raw)
			call->raw(call->arg, 0, NULL, NULL, 0, err);
		else
			call->cb(call->arg, 0, NULL, err);
	} else if (call->raw) {
		call->raw(call->arg, status, ct, len ? data : "", len, NULL);
	} else {
		if (len)
			body = jx_parse(data, len);
		call->cb(call->arg, status, body, NULL);
		json_decref(body);
	}
}

static void reply_in_scope(struct evhttp_request *req, struct rest_call *call)
{
	struct conn *k = call->conn;
	int status = req ? evhttp_request_get_response_code(req) : 0;
	char err[512];

	call_unlink(call);
	if (status == 0) {
		conn_retire(k, "connection failed");
		deliver(call, k->c, 0, NULL, NULL, 0, transport_error(k, err, sizeof(err)));
	} else {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);
		deliver(call, k->c, status,
			evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type"),
			len ? (const char *)evbuffer_pullup(in, (ev_ssize_t)len) : "", len, NULL);
	}
	call_free(call);
}

static void on_reply(struct evhttp_request *req, void *arg)
{
	struct rest_call *call = arg;
	const struct log_scope *prev = log_scope_enter(call->scope);
	reply_in_scope(req, call); /* frees call when the call is over */
	log_scope_enter(prev);
}

static enum evhttp_cmd_type method_of(const char *m)
{
	if (!strcmp(m, "POST"))
		return EVHTTP_REQ_POST;
	if (!strcmp(m, "PUT"))
		return EVHTTP_REQ_PUT;
	if (!strcmp(m, "PATCH"))
		return EVHTTP_REQ_PATCH;
	if (!strcmp(m, "DELETE"))
		return EVHTTP_REQ_DELETE;
	return EVHTTP_REQ_GET;
}

static void h2_call_send(struct rest_client *c, struct rest_call *call, const char *method,
			 const char *path, const char *content_type, const char *body);

/* Put call on a connection and send it; body is JSON text or NULL. */
static void call_send(struct rest_client *c, struct rest_call *call, const char *method,
		      const char *path, const char *content_type, const char *body)
{
	struct conn *k;

	if (!c->h1_only) {
		h2_call_send(c, call, method, path, content_type, body);
		return;
	}
	k = conn_pick(c);

	call_attach(k, call);
	if (c->unreachable) {
		/* No route: the connection fails before a byte is sent. */
		conn_retire(k, c->unreachable_why);
		return;
	}
	call->req = evhttp_request_new(on_reply, call);
	add_headers(c, call->req, body ? (content_type ? content_type : "application/json") : NULL,
		    call->accept);
	if (body) {
		char len[24];
		evbuffer_add(evhttp_request_get_output_buffer(call->req), body, strlen(body));
		/* evhttp adds Content-Length only for POST and PUT; PATCH needs it too. */
		snprintf(len, sizeof(len), "%zu", strlen(body));
		evhttp_add_header(evhttp_request_get_output_headers(call->req), "Content-Length",
				  len);
	}
	if (evhttp_make_request(k->evcon, call->req, method_of(method), path) < 0) {
		/* libevent freed the request; the reap reports the failure later. */
		call->req = NULL;
		conn_retire(k, "could not send the request");
	}
	conn_nodelay(k);
}

struct rest_call *rest_do_ct(struct rest_client *c, const char *method, const char *path,
			     const char *content_type, const json_t *body, rest_cb cb, void *arg)
{
	struct rest_call *call = call_new(NULL, cb, arg);
	char *text = body ? jx_dump(body) : NULL;

	if (c->holding) {
		struct held *h = calloc(1, sizeof(*h));
		if (!h)
			abort();
		h->call = call;
		h->method = str_dup(method);
		h->path = str_dup(path);
		h->ct = str_dup(content_type);
		h->body = text;
		*c->held_tail = h;
		c->held_tail = &h->next;
		return call;
	}
	call_send(c, call, method, path, content_type, text);
	free(text);
	return call;
}

static void held_free(struct held *h)
{
	free(h->method);
	free(h->path);
	free(h->ct);
	free(h->body);
	free(h);
}

/* The held list, detached (callbacks may queue new requests meanwhile). */
static struct held *take_held(struct rest_client *c)
{
	struct held *list = c->held;
	c->held = NULL;
	c->held_tail = &c->held;
	return list;
}

void rest_hold(struct rest_client *c, bool on)
{
	struct held *list;

	c->holding = on;
	if (on)
		return;
	list = take_held(c);
	/* In the order they were asked for; the cancelled are dropped. */
	while (list) {
		struct held *h = list;
		list = h->next;
		if (h->call->cb)
			call_send(c, h->call, h->method, h->path, h->ct, h->body);
		else
			free(h->call);
		held_free(h);
	}
}

void rest_fail_held(struct rest_client *c, const char *err)
{
	struct held *list = take_held(c);

	while (list) {
		struct held *h = list;
		list = h->next;
		if (h->call->cb) {
			const struct log_scope *prev = log_scope_enter(h->call->scope);
			h->call->cb(h->call->arg, 0, NULL, err);
			log_scope_enter(prev);
		}
		free(h->call);
		held_free(h);
	}
}

int rest_set_token(struct rest_client *c, const char *token)
{
	char *t = str_dup(token);
	free(c->token);
	c->token = t;
	return 0;
}

void rest_on_unauthorized(struct rest_client *c, void (*fn)(void *arg), void *arg)
{
	c->on_unauthorized = fn;
	c->unauthorized_arg = arg;
}

struct rest_client *rest_client_derive(const struct rest_client *c, const char *user_agent)
{
	char server[320];
	struct rest_config cfg = {
		.server = server,
		.ca_pem = c->ca_pem,
		.user_agent = user_agent,
		.max_conns = c->max_conns,
		.timeout_s = c->timeout_s,
	};
	snprintf(server, sizeof(server), strchr(c->host, ':') ? "https://[%s]:%d" : "https://%s:%d",
		 c->host, c->port);
	return rest_client_new(c->loop, &cfg);
}

struct sync_call {
	struct loop *loop;
	int status;
	json_t *body;
	char *err;
	bool done;
};

static void on_sync(void *arg, int status, json_t *body, const char *err)
{
	struct sync_call *s = arg;
	s->status = status;
	s->body = json_incref(body);
	s->err = err ? strdup(err) : NULL;
	s->done = true;
	loop_stop(s->loop);
}

int rest_do_sync(struct rest_client *c, const char *method, const char *path, const json_t *body,
		 json_t **out, char **err)
{
	struct sync_call s = {.loop = c->loop};

	rest_do(c, method, path, body, on_sync, &s);
	while (!s.done)
		loop_run(c->loop);
	if (out)
		*out = s.body;
	else
		json_decref(s.body);
	if (err)
		*err = s.err;
	else
		free(s.err);
	return s.status;
}

struct rest_call *rest_do(struct rest_client *c, const char *method, const char *path,
			  const json_t *body, rest_cb cb, void *arg)
{
	return rest_do_ct(c, method, path, NULL, body, cb, arg);
}

struct rest_call *rest_do_raw(struct rest_client *c, const char *method, const char *path,
			      const char *accept, const char *content_type, const char *body,
			      rest_raw_cb cb, void *arg)
{
	struct rest_call *call = call_new(NULL, NULL, arg);

	call->raw = cb;
	snprintf(call->accept, sizeof(call->accept), "%s", accept ? accept : "*/*");
	call_send(c, call, method, path, content_type, body);
	return call;
}

void rest_cancel(struct rest_call *call)
{
	if (call)
		call->cb = NULL, call->raw = NULL;
}

/* ---- watches ----------------------------------------------------------------------- */

static void watch_lines(struct rest_watch *w);

static void chunk_in_scope(struct evhttp_request *req, struct rest_call *call)
{
	struct rest_watch *w = call->w;
	evbuffer_add_buffer(w->line, evhttp_request_get_input_buffer(req));
	watch_lines(w);
}

static void on_chunk(struct evhttp_request *req, void *arg)
{
	struct rest_call *call = arg;
	const struct log_scope *prev = log_scope_enter(call->scope);
	chunk_in_scope(req, call); /* frees call when the call is over */
	log_scope_enter(prev);
}

static void watch_end_in_scope(struct evhttp_request *req, struct rest_call *call)
{
	struct rest_watch *w = call->w;
	struct conn *k = call->conn;
	int status = req ? evhttp_request_get_response_code(req) : 0;
	char err[512];

	call_unlink(call);
	conn_retire(k, "watch ended"); /* a watch connection serves one watch */
	if (!w->stopped)
		w->on_end(w->arg, status, status ? NULL : transport_error(k, err, sizeof(err)));
	watch_free(w);
	call_free(call);
}

static void on_watch_end(struct evhttp_request *req, void *arg)
{
	struct rest_call *call = arg;
	const struct log_scope *prev = log_scope_enter(call->scope);
	watch_end_in_scope(req, call); /* frees call when the call is over */
	log_scope_enter(prev);
}

static void h2_watch_send(struct rest_client *c, struct rest_call *call, const char *path);

static void watch_send(struct rest_client *c, struct rest_call *call, const char *path)
{
	struct conn *k;

	if (!c->h1_only) {
		h2_watch_send(c, call, path);
		return;
	}
	k = conn_new(c, true);
	call_attach(k, call);
	if (c->unreachable) {
		conn_retire(k, c->unreachable_why);
		return;
	}
	call->req = evhttp_request_new(on_watch_end, call);
	evhttp_request_set_chunked_cb(call->req, on_chunk);
	add_headers(c, call->req, NULL, NULL);
	if (evhttp_make_request(k->evcon, call->req, EVHTTP_REQ_GET, path) < 0) {
		call->req = NULL;
		conn_retire(k, "could not send the watch request");
	}
}

struct rest_watch *rest_watch(struct rest_client *c, const char *path, rest_event_cb on_event,
			      rest_end_cb on_end, void *arg)
{
	struct rest_watch *w = calloc(1, sizeof(*w));
	struct rest_call *call = call_new(NULL, NULL, NULL);

	if (!w)
		abort();
	w->call = call;
	w->on_event = on_event;
	w->on_end = on_end;
	w->arg = arg;
	w->line = evbuffer_new();
	call->w = w;
	watch_send(c, call, path);
	return w;
}

void rest_watch_stop(struct rest_watch *w)
{
	struct rest_call *call;

	if (!w || w->stopped)
		return;
	/* No more callbacks. HTTP/1.1: the connection closes on a later turn
	 * and frees w. HTTP/2: the stream is reset now, w freed now or, from
	 * inside its own callback, when that returns. */
	w->stopped = true;
	call = w->call;
	if (!call->conn || !call->conn->h2mode) {
		if (call->conn)
			conn_retire(call->conn, "watch stopped");
		return;
	}
	if (w->in_event && (call->conn->dead || !call->stream))
		return; /* its connection is ending it: that frees it */
	if (call->stream)
		h2_cancel(call->stream);
	call->stream = NULL;
	call_unlink(call);
	call->conn = NULL;
	if (!w->in_event) {
		watch_free(w);
		call_free(call);
	}
}

/* ---- HTTP/2: every request and watch on one connection ------------------------------- */

/* Go's words when a request outlives the client's timeout. */
/* How often a refused stream is sent again (Go's RoundTrip: retry <= 6). */
#define H2_MAX_RETRIES 6
#define TIMEOUT_HEADERS                                                                            \
	"net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
#define TIMEOUT_BODY                                                                              \
	"net/http: request canceled (Client.Timeout or context cancellation while reading body)"

/* The call's deadline: timeout_s without a byte of its reply, as the
 * HTTP/1.1 connection's inactivity timeout. */
static void call_deadline_arm(struct rest_call *call, int seconds)
{
	struct timeval tv = {seconds, 0};
	if (call->deadline)
		evtimer_add(call->deadline, &tv);
}

static void h2_call_headers(void *arg, struct h2_stream *s);
static void h2_call_data(void *arg, struct h2_stream *s, const char *d, size_t n);
static void h2_call_closed(void *arg, struct h2_stream *s, const char *err);
static const struct h2_stream_cbs h2_call_cbs = {
	.headers = h2_call_headers, .data = h2_call_data, .closed = h2_call_closed};

/* What a request that failed below HTTP tells its caller: the same words
 * as over HTTP/1.1 when the connection went, else the session's own. */
static const char *h2_error(struct conn *k, const char *err)
{
	if (!strcmp(err, H2_EOF) || !strcmp(err, H2_RESET) || !strcmp(err, H2_CLOSED))
		return transport_error(k, k->why_buf, sizeof(k->why_buf));
	return err;
}

static void watch_lines(struct rest_watch *w)
{
	char *line;
	size_t len;

	w->in_event = true;
	while (!w->stopped && (line = evbuffer_readln(w->line, &len, EVBUFFER_EOL_LF))) {
		json_t *ev = len ? jx_parse(line, len) : NULL;
		free(line);
		if (!ev)
			continue;
		w->on_event(w->arg, jx_str(ev, "type") ?: "", json_object_get(ev, "object"));
		json_decref(ev);
	}
	w->in_event = false;
}

static void h2_call_headers(void *arg, struct h2_stream *s)
{
	struct rest_call *call = arg;
	(void)s;
	call_deadline_arm(call, call->conn->c->timeout_s);
}

static void h2_call_data(void *arg, struct h2_stream *s, const char *d, size_t n)
{
	struct rest_call *call = arg;
	struct rest_watch *w = call->w;
	const struct log_scope *prev;

	(void)s;
	if (!w) {
		evbuffer_add(call->in, d, n);
		call_deadline_arm(call, call->conn->c->timeout_s);
		return;
	}
	prev = log_scope_enter(call->scope);
	evbuffer_add(w->line, d, n);
	watch_lines(w);
	if (w->stopped) { /* rest_watch_stop from on_event: ours to free now */
		watch_free(w);
		call_free(call);
	}
	log_scope_enter(prev);
}

static void h2_retry(struct rest_client *c, struct rest_call *call);

static void h2_call_closed(void *arg, struct h2_stream *s, const char *err)
{
	struct rest_call *call = arg;
	struct conn *k = call->conn;
	struct rest_watch *w = call->w;
	const struct log_scope *prev = log_scope_enter(call->scope);
	int status = err ? 0 : h2_status(s);

	h2_stream_set_cbs(s, NULL, NULL); /* over: the session frees it */
	call->stream = NULL;
	call_unlink(call);
	/* Refused before the server looked at it (over its stream limit):
	 * Go's transport sends such a request again; so does this client.
	 * Watches end instead: their owners list and watch again anyway. */
	if (err && h2_stream_refused(s) && !w && call->retries < H2_MAX_RETRIES) {
		h2_retry(k->c, call);
		log_scope_enter(prev);
		return;
	}
	if (err)
		err = h2_error(k, err);
	if (w) {
		w->in_event = true; /* a stop from on_end frees nothing */
		if (!w->stopped)
			w->on_end(w->arg, status, err);
		watch_free(w);
	} else {
		size_t len = evbuffer_get_length(call->in);
		deliver(call, k->c, status, evhttp_find_header(h2_in_headers(s), "content-type"),
			len ? (const char *)evbuffer_pullup(call->in, (ev_ssize_t)len) : "", len,
			err);
	}
	call_free(call);
	log_scope_enter(prev);
}

static void on_call_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct rest_call *call = arg;
	const struct log_scope *prev = log_scope_enter(call->scope);

	(void)fd;
	(void)what;
	call_unlink(call);
	deliver(call, call->conn->c, 0, NULL, NULL, 0,
		call->stream && h2_status(call->stream) ? TIMEOUT_BODY : TIMEOUT_HEADERS);
	call_free(call); /* resets the stream */
	log_scope_enter(prev);
}

/* The call goes out on k's session as a stream. */
static void h2_submit(struct conn *k, struct rest_call *call)
{
	struct rest_client *c = k->c;
	const char *hdrs[8];
	char authority[300], *auth = NULL;
	struct timeval tv = {c->timeout_s, 0};
	size_t n = 0;

	snprintf(authority, sizeof(authority), strchr(c->host, ':') ? "[%s]:%d" : "%s:%d", c->host,
	         c->port);
	hdrs[n++] = "accept";
	hdrs[n++] = call->accept[0] ? call->accept : "application/json";
	hdrs[n++] = "user-agent";
	hdrs[n++] = c->user_agent;
	if (call->body) {
		hdrs[n++] = "content-type";
		hdrs[n++] = call->ct ? call->ct : "application/json";
	}
	if (c->token) {
		auth = str_printf("Bearer %s", c->token);
		hdrs[n++] = "authorization";
		hdrs[n++] = auth;
	}
	call->stream =
	    h2_request(k->h2, call->method, authority, call->path, hdrs, n / 2, call->body,
	               call->body ? strlen(call->body) : 0, &h2_call_cbs, call);
	free(auth);
	/* The body stays with the call: a refused stream is sent again. */
	if (!call->stream) {
		conn_retire(k, "could not send the request");
		return;
	}
	if (call->w)
		return;
	call->in = evbuffer_new();
	call->deadline = evtimer_new(loop_base(c->loop), on_call_deadline, call);
	if (!call->in || !call->deadline)
		abort();
	evtimer_add(call->deadline, &tv);
}

static void h2_conn_closed(void *arg, const char *why)
{
	struct conn *k = arg;
	conn_retire(k, h2_error(k, why));
}

/* The server chose HTTP/1.1: so does this client from now on, and the
 * calls that waited for this connection go out that way. */
/* A connection's calls are newest first: those waiting for it go out in
 * the order they were asked for. */
static struct rest_call *oldest_first(struct rest_call *list)
{
	struct rest_call *older = NULL;

	while (list) {
		struct rest_call *call = list;
		list = call->next;
		call->next = older;
		older = call;
	}
	return older;
}

static void fall_back_to_h1(struct conn *k)
{
	struct rest_client *c = k->c;
	struct rest_call *list = oldest_first(k->calls);

	LOG_V(2, "%s:%d does not speak HTTP/2: using HTTP/1.1", c->host, c->port);
	c->h1_only = true;
	k->calls = NULL;
	conn_retire(k, "HTTP/1.1 only");
	while (list) {
		struct rest_call *call = list;
		list = call->next;
		call->next = NULL;
		call->conn = NULL;
		if (call->w)
			watch_send(c, call, call->path);
		else
			call_send(c, call, call->method, call->path, call->ct, call->body);
	}
}

static void h2_queue(struct rest_client *c, struct rest_call *call);

static void h2_conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *k = arg;
	struct rest_client *c = k->c;
	struct h2_opts o = {.read_idle_s = c->read_idle_s,
			    .ping_timeout_s = c->ping_timeout_s,
			    .idle_timeout_s = H2_CLIENT_IDLE_TIMEOUT_S,
			    .on_close = h2_conn_closed,
			    .arg = k};

	/* Deferred events fold together: a connection that failed right
	 * after connecting says both. */
	if (!(what & BEV_EVENT_CONNECTED) ||
	    (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))) {
		conn_retire(k, transport_error(k, k->why_buf, sizeof(k->why_buf)));
		return;
	}
	conn_nodelay(k);
	if (!tls_alpn_h2(bufferevent_openssl_get_ssl(bev))) {
		fall_back_to_h1(k);
		return;
	}
	k->h2 = h2_new(c->loop, bev, &o);
	k->calls = oldest_first(k->calls);
	for (struct rest_call *call = k->calls, *next; call; call = next) {
		next = call->next;
		if (h2_can_open(k->h2)) {
			h2_submit(k, call);
		} else {
			/* Beyond the session's streams: another connection, as
			 * Go's transport dials when one cannot take a request. */
			call_unlink(call);
			h2_queue(c, call);
		}
	}
}

/* A socket bound to the client's source address for k to connect from
 * (bufferevent_socket_connect uses the one it is given). 0, or -1 with
 * errno set. */
static int bind_source(struct rest_client *c, struct conn *k)
{
	struct sockaddr_storage a = {0};
	socklen_t len;
	int fd;

	if (!c->source)
		return 0;
	if (c->source_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&a;
		in->sin_family = AF_INET;
		inet_pton(AF_INET, c->source, &in->sin_addr);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a;
		in6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, c->source, &in6->sin6_addr);
		len = sizeof(*in6);
	}
	fd = socket(c->source_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, len) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return bufferevent_setfd(k->bev, fd);
}

static struct conn *h2_conn_new(struct rest_client *c)
{
	SSL *ssl = client_ssl(c);
	struct conn *k;

	SSL_set_alpn_protos(ssl, (const unsigned char *)H2_ALPN_CLIENT_PROTOS,
			    sizeof(H2_ALPN_CLIENT_PROTOS) - 1);
	k = conn_alloc(c, ssl);
	k->h2mode = true;
	bufferevent_setcb(k->bev, NULL, NULL, h2_conn_event, k);
	/* The connection and the handshake must be done within the timeout. */
	bufferevent_set_timeouts(k->bev, &(struct timeval){c->timeout_s, 0},
				 &(struct timeval){c->timeout_s, 0});
	bufferevent_enable(k->bev, EV_READ | EV_WRITE);
	if (c->unreachable)
		conn_retire(k, c->unreachable_why);
	else if (bind_source(c, k) < 0) {
		/* Go's dialer's words for a local address it cannot use. */
		snprintf(k->why_buf, sizeof(k->why_buf), "dial tcp %s:0->%s:%d: bind: %s",
		         c->source, c->host, c->port, strerror(errno));
		conn_retire(k, k->why_buf);
	} else if (bufferevent_socket_connect_hostname(k->bev, NULL, c->source_family, c->host,
						       c->port) < 0) {
		conn_retire(k, transport_error(k, k->why_buf, sizeof(k->why_buf)));
	}
	return k;
}

/* Calls waiting for a connection being made: no more than its session
 * will take before the server's SETTINGS say otherwise (nghttp2 and Go's
 * transport both assume 100 until then). */
#define H2_STREAMS_BEFORE_SETTINGS 100

static bool h2_conn_has_room(const struct conn *k)
{
	size_t n = 0;

	if (!k->h2mode || k->dead)
		return false;
	if (k->h2)
		return h2_can_open(k->h2);
	for (const struct rest_call *call = k->calls; call; call = call->next)
		n++;
	return n < H2_STREAMS_BEFORE_SETTINGS;
}

/* A session with room for another stream, or one being made. */
static struct conn *h2_conn_pick(struct rest_client *c)
{
	for (struct conn *k = c->conns; k; k = k->next)
		if (h2_conn_has_room(k))
			return k;
	return h2_conn_new(c);
}

static void h2_queue(struct rest_client *c, struct rest_call *call)
{
	struct conn *k = h2_conn_pick(c);

	call_attach(k, call);
	if (k->h2)
		h2_submit(k, call);
}

static void retrying_unlink(struct rest_client *c, struct rest_call *call)
{
	for (struct rest_call **p = &c->retrying; *p; p = &(*p)->next)
		if (*p == call) {
			*p = call->next;
			return;
		}
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct rest_call *call = arg;
	struct rest_client *c = call->parked;

	(void)fd, (void)what;
	retrying_unlink(c, call);
	event_free(call->retry);
	call->retry = NULL;
	call->parked = NULL;
	call_send(c, call, call->method, call->path, call->ct, call->body);
}

/*
 * Send a refused call again, as Go's http2 Transport.RoundTrip does: at
 * once the first time, then after 1 s, 2 s, 4 s ... with up to 10 % more,
 * six times at most. It waits on the client (no connection) meanwhile;
 * its reply deadline starts again with each try.
 */
static void h2_retry(struct rest_client *c, struct rest_call *call)
{
	double backoff = call->retries ? (double)(1u << (call->retries - 1)) : 0;
	struct timeval tv;

	backoff += backoff * 0.1 * rand_double();
	tv.tv_sec = (time_t)backoff;
	tv.tv_usec = (suseconds_t)((backoff - (double)tv.tv_sec) * 1e6);
	call->retries++;
	if (call->deadline) {
		event_free(call->deadline);
		call->deadline = NULL;
	}
	if (call->in) {
		evbuffer_free(call->in);
		call->in = NULL;
	}
	call->conn = NULL;
	call->parked = c;
	call->next = c->retrying;
	c->retrying = call;
	if (!(call->retry = evtimer_new(loop_base(c->loop), on_retry, call)))
		abort();
	evtimer_add(call->retry, &tv);
}

/* *slot becomes a copy of v (v may be *slot itself: then nothing moves). */
static void keep(char **slot, const char *v)
{
	if (*slot == v)
		return;
	free(*slot);
	*slot = str_dup(v);
}

static void h2_call_send(struct rest_client *c, struct rest_call *call, const char *method,
			 const char *path, const char *content_type, const char *body)
{
	/* Kept until the connection is ready (or falls back to HTTP/1.1). */
	keep(&call->method, method);
	keep(&call->path, path);
	keep(&call->ct, content_type);
	keep(&call->body, body);
	h2_queue(c, call);
}

static void h2_watch_send(struct rest_client *c, struct rest_call *call, const char *path)
{
	h2_call_send(c, call, "GET", path, NULL, NULL);
}

/* ---- the client ---------------------------------------------------------------------- */

static int parse_server(struct rest_client *c, const char *server)
{
	struct evhttp_uri *u = evhttp_uri_parse(server);
	const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL;
	const char *host = u ? evhttp_uri_get_host(u) : NULL;

	if (!u || !scheme || strcmp(scheme, "https") || !host) {
		evhttp_uri_free(u);
		return err_set(ERR_INVALID, "server \"%s\" is not an https:// URL", server);
	}
	c->host = strdup(host);
	c->port = evhttp_uri_get_port(u) > 0 ? evhttp_uri_get_port(u) : 443;
	evhttp_uri_free(u);
	return 0;
}

/* client-go reads these for every transport it builds (apimachinery's
 * util/net): a bad value is warned about and the default used. */
static int env_seconds(const char *name, int def)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtol(v, &end, 10);
	if (*end || errno || n > INT32_MAX || n < INT32_MIN) {
		LOG_WARN(
		    "Illegal %s(\"%s\"): strconv.Atoi: parsing \"%s\": %s. Default value %d is "
			 "used",
			 name, v, v, *end ? "invalid syntax" : "value out of range", def);
		return def;
	}
	return (int)n;
}

/* The pair new connections present, references taken (NULL, NULL: none).
 * Open connections hold references to the old pair and keep presenting
 * what they were opened with. */
static void use_pair(struct rest_client *c, X509 *cert, EVP_PKEY *key)
{
	if (cert)
		X509_up_ref(cert);
	if (key)
		EVP_PKEY_up_ref(key);
	X509_free(c->cert);
	EVP_PKEY_free(c->key);
	c->cert = cert;
	c->key = key;
}

struct rest_client *rest_client_new(struct loop *loop, const struct rest_config *cfg)
{
	struct rest_client *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->loop = loop;
	c->held_tail = &c->held;
	c->max_conns = cfg->max_conns > 0 ? cfg->max_conns : 4;
	c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 30;
	c->h1_only = getenv("DISABLE_HTTP2") && *getenv("DISABLE_HTTP2");
	c->read_idle_s = env_seconds("HTTP2_READ_IDLE_TIMEOUT_SECONDS", H2_READ_IDLE_TIMEOUT_S);
	c->ping_timeout_s = env_seconds("HTTP2_PING_TIMEOUT_SECONDS", H2_PING_TIMEOUT_S);
	/* Go's transport: no read-idle timeout, no health check; a ping
	 * timeout of zero or less is its default. */
	if (c->read_idle_s < 0)
		c->read_idle_s = 0;
	if (c->ping_timeout_s <= 0)
		c->ping_timeout_s = H2_PING_TIMEOUT_S;
	c->user_agent = str_intern(cfg->user_agent ? cfg->user_agent : "cube/0.1.0");
	c->token = cfg->token ? strdup(cfg->token) : NULL;
	c->ca_pem = str_intern(cfg->ca_pem);
	if (cfg->cert && cfg->key)
		use_pair(c, cfg->cert, cfg->key);
	if (parse_server(c, cfg->server ? cfg->server : "") < 0 ||
	    !(c->tls = tls_client_ctx_shared(cfg->ca_pem)) ||
	    (cfg->cert && X509_check_private_key(cfg->cert, cfg->key) != 1) ||
	    (!cfg->cert && cfg->cert_pem && cfg->key_pem &&
	     tls_client_cert_parse(cfg->cert_pem, cfg->key_pem, &c->cert, &c->key) < 0)) {
		ERR_clear_error();
		if (c->host)
			err_set(ERR_INVALID, "bad TLS material for %s", cfg->server);
		rest_client_free(c);
		return NULL;
	}
	return c;
}

struct rest_client *rest_client_from_kubeconfig(struct loop *loop, const struct kubeconfig *kc,
						const char *user_agent)
{
	struct rest_config cfg = {
		.server = kc->server,
		.ca_pem = kc->ca_data,
		.cert_pem = kc->cert_data,
		.key_pem = kc->key_data,
		.token = kc->token,
		.user_agent = user_agent,
	};
	return rest_client_new(loop, &cfg);
}

struct rest_client *rest_client_for_component(struct loop *loop, const char *path,
					      const struct kubeconfig *kc, const char *server,
					      const char *user_agent)
{
	struct kubeconfig loaded = {0};
	struct rest_config cfg = {0};
	struct rest_client *c;

	if (!kc) {
		if (!path || !*path) {
			err_set(ERR_INVALID, "--kubeconfig is required");
			return NULL;
		}
		if (kubeconfig_load(path, &loaded) < 0) {
			err_wrap(ERR_INVALID, "invalid configuration: %s", path);
			kubeconfig_free(&loaded);
			return NULL;
		}
		kc = &loaded;
	}
	cfg.server = server ? server : kc->server;
	cfg.ca_pem = kc->ca_data;
	cfg.cert_pem = kc->cert_data;
	cfg.key_pem = kc->key_data;
	cfg.token = kc->token;
	cfg.user_agent = user_agent;
	c = rest_client_new(loop, &cfg);
	kubeconfig_free(&loaded);
	return c;
}

void rest_close_all(struct rest_client *c)
{
	/* Requests and watches in flight fail on a later turn; their owners retry. */
	for (struct conn *k = c->conns; k; k = k->next)
		conn_retire(k, "connection closed to start using new credentials");
}

static bool ipv4_loopback(const char *ip)
{
	struct in_addr a;
	return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int rest_set_source_address(struct rest_client *c, const char *addr)
{
	unsigned char buf[16];
	int family = !addr                                ? AF_UNSPEC
		     : inet_pton(AF_INET, addr, buf) == 1  ? AF_INET
		     : inet_pton(AF_INET6, addr, buf) == 1 ? AF_INET6
							   : -1;

	if (family < 0)
		return err_set(ERR_INVALID, "source address \"%s\" is not an IP address", addr);
	/* A loopback source reaches only a server on loopback; a source of
	 * the other family than a literal server address reaches nothing. */
	if (family == AF_INET && ipv4_loopback(addr) && !ipv4_loopback(c->host))
		addr = NULL, family = AF_UNSPEC;
	if (addr && inet_pton(family == AF_INET ? AF_INET6 : AF_INET, c->host, buf) == 1)
		return err_set(ERR_INVALID, "source address %s cannot reach %s", addr, c->host);
	free(c->source);
	c->source = addr ? str_dup(addr) : NULL;
	c->source_family = family;
	return 0;
}

void rest_set_unreachable(struct rest_client *c, bool on)
{
	c->unreachable = on;
	if (!on)
		return;
	/* What Go's dialer says when the route to the server is gone. */
	snprintf(c->unreachable_why, sizeof(c->unreachable_why),
		 "dial tcp %s:%d: connect: network is unreachable", c->host, c->port);
	for (struct conn *k = c->conns; k; k = k->next)
		conn_retire(k, c->unreachable_why);
}

bool rest_unreachable(const struct rest_client *c)
{
	return c->unreachable;
}

int rest_set_client_cert(struct rest_client *c, const char *cert_pem, const char *key_pem)
{
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;

	if (cert_pem && key_pem && tls_client_cert_parse(cert_pem, key_pem, &cert, &key) < 0)
		return ERR_INVALID;
	use_pair(c, cert, key);
	X509_free(cert);
	EVP_PKEY_free(key);
	return 0;
}

void rest_set_client_pair(struct rest_client *c, X509 *cert, EVP_PKEY *key)
{
	use_pair(c, cert, key);
}

void rest_clear_client_cert(struct rest_client *c)
{
	use_pair(c, NULL, NULL);
}

void rest_client_free(struct rest_client *c)
{
	if (!c)
		return;
	/* The owner is going away: nobody is left to hear about failures. */
	while (c->conns)
		conn_free(c->conns, false);
	while (c->held) {
		struct held *h = c->held;
		c->held = h->next;
		free(h->call);
		held_free(h);
	}
	while (c->retrying) {
		struct rest_call *call = c->retrying;
		c->retrying = call->next;
		call_free(call);
	}
	SSL_CTX_free(c->tls);
	free(c->source);
	X509_free(c->cert);
	EVP_PKEY_free(c->key);
	free(c->host);
	free(c->token);
	free(c);
}
