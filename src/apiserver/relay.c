/*
 * relay — the secure port's connections on worker threads, the requests on
 * the server's loop.
 *
 * With serving_threads N > 0 the API server runs N worker loops, each on a
 * thread of its own with its own httpd on the one listening socket
 * (httpd_opts.share): a connection's handshake, its TLS records, HTTP/1.1
 * parsing and HTTP/2 framing happen on the worker that accepted it. A whole
 * request is handed to the server's loop — which alone touches the cache,
 * the store and everything a handler reads — as a req on the relay
 * transport; what the handler answers goes back to the worker as messages,
 * in the order it was said (loop_defer keeps order).
 *
 * A relayed request, struct xreq, has two sides. The worker's holds the
 * connection's request (an evhttp_request or an h2_stream) until the answer
 * is sent or the client goes; the server's holds the req until it is done.
 * What the worker learnt of the request (target, headers, body, peer, the
 * client certificate's identity) is copied into the xreq before the handoff
 * and only read after it. Each side and each message in flight holds a
 * reference; the last one frees it, on whichever thread.
 *
 * Credentials: a worker judges a connection's client certificate itself
 * (httpd's credentials_ok), but a bearer token needs the server's state; a
 * connection with only a token counts as one without credentials until a
 * request on it authenticates, and its answer lifts the count
 * (httpd_credentials_judged).
 *
 * Threads: relay_start, relay_stop and relay_free on the server's loop
 * thread; the transport's operations there too; everything on a worker's
 * side on that worker's thread.
 */
#include "apiserver/internal.h"

#include "net/h2.h"
#include "net/tls.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

/* How often a worker looks again at what its streams have not sent (a
 * watch asks it before each event: a reader that has caught up since must
 * not look slow). */
#define UNSENT_SAMPLE_MS 200

struct worker {
	struct relay *rl;
	struct loop *loop;
	struct httpd *httpd;
	pthread_t thread;
	bool started;
	struct event *sample; /* refreshes its streams' unsent counts */
	struct xreq *streams; /* streaming replies on this worker (its thread) */
};

struct relay {
	struct apiserver *s;
	struct worker *w;
	size_t n;
	bool stopping; /* requests that reach the server now are dropped */
	const struct log_scope *scope; /* the server's: the workers log in it */
};

struct xreq {
	atomic_int refs; /* the worker's side, the server's, each message */
	struct worker *w;
	/* The worker's side (its thread): the request, until it is answered or
	 * the client goes (then both NULL). */
	struct evhttp_request *ev;
	struct h2_stream *st;
	bool streaming;
	struct xreq *prev, *next; /* on w->streams while streaming */
	/* Made on the worker before the handoff, read-only after it. */
	enum evhttp_cmd_type method;
	char *target;
	char peer[64];
	struct tls_identity id; /* the client certificate's, as judged then */
	struct evkeyvalq in, out; /* out: the server's until it answers */
	struct evbuffer *body;
	/* The server's side (its thread): the request, until it is done. */
	struct req *r;
	/* What the connection has not sent of a stream: bytes on their way to
	 * the worker, and the connection's own count as last seen there. */
	atomic_size_t pending, wire;
};

enum op { OP_REPLY, OP_START, OP_CHUNK, OP_END };

/* What the server says of a request, on its way to the worker. */
struct msg {
	struct xreq *x;
	enum op op;
	int code;           /* OP_REPLY */
	int drain_s;        /* OP_END */
	int token;          /* OP_REPLY, OP_START: its token worked (1), was refused (-1), or none (0) */
	struct evkeyvalq headers; /* OP_REPLY, OP_START */
	struct evbuffer *body;    /* OP_REPLY (NULL: none), OP_CHUNK */
	size_t len;               /* OP_CHUNK: counted in x->pending */
};

static struct xreq *xref(struct xreq *x)
{
	atomic_fetch_add(&x->refs, 1);
	return x;
}

static void xunref(struct xreq *x)
{
	if (atomic_fetch_sub(&x->refs, 1) != 1)
		return;
	free(x->target);
	tls_identity_clear(&x->id);
	evhttp_clear_headers(&x->in);
	evhttp_clear_headers(&x->out);
	if (x->body)
		evbuffer_free(x->body);
	free(x);
}

/* ---- the worker's side ------------------------------------------------------------- */

/* Move every header of from to the end of to (both lists of one thread's). */
static void move_headers(struct evkeyvalq *to, struct evkeyvalq *from)
{
	struct evkeyval *kv;

	while ((kv = TAILQ_FIRST(from))) {
		TAILQ_REMOVE(from, kv, next);
		TAILQ_INSERT_TAIL(to, kv, next);
	}
}

/*
 * The request's headers, taken from the connection's list rather than
 * copied (a copy is three allocations a header). evhttp still reads the
 * Connection and Proxy-Connection headers when it answers (keep-alive):
 * those are given back.
 */
static void take_headers(struct evkeyvalq *to, struct evkeyvalq *from)
{
	static const char *const kept[] = {"Connection", "Proxy-Connection"};

	move_headers(to, from);
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		const char *v = evhttp_find_header(to, kept[i]);
		if (v)
			evhttp_add_header(from, kept[i], v);
	}
}

static struct xreq *xreq_new(struct worker *w, enum evhttp_cmd_type method, const char *target,
			     struct evkeyvalq *in, struct evbuffer *body, SSL *ssl)
{
	struct xreq *x = calloc(1, sizeof(*x));

	if (!x || !(x->target = strdup(target ? target : "/")) || !(x->body = evbuffer_new()))
		abort();
	atomic_init(&x->refs, 2); /* the worker's side, and the server's */
	x->w = w;
	x->method = method;
	TAILQ_INIT(&x->in);
	TAILQ_INIT(&x->out);
	take_headers(&x->in, in);
	evbuffer_add_buffer(x->body, body);
	if (ssl)
		tls_identity_copy(&x->id, tls_peer_identity(ssl, clock_now()));
	return x;
}

static void serve(void *arg);

static void hand_over(struct xreq *x)
{
	loop_defer(x->w->rl->s->loop, serve, x);
}

static void streams_add(struct xreq *x)
{
	struct worker *w = x->w;
	struct timeval tv = {0, UNSENT_SAMPLE_MS * 1000};

	x->streaming = true;
	x->prev = NULL;
	if ((x->next = w->streams))
		w->streams->prev = x;
	else
		event_add(w->sample, &tv); /* the first stream: look every so often */
	w->streams = x;
}

static void streams_remove(struct xreq *x)
{
	struct worker *w = x->w;

	if (!x->streaming)
		return;
	x->streaming = false;
	if (x->prev)
		x->prev->next = x->next;
	else
		w->streams = x->next;
	if (x->next)
		x->next->prev = x->prev;
	if (!w->streams)
		event_del(w->sample);
}

static void client_gone(void *arg);

/* The worker is done with the request (answered, or its client went):
 * it lets go of the connection's request and of its reference. */
static void worker_done(struct xreq *x)
{
	streams_remove(x);
	if (x->ev)
		evhttp_connection_set_closecb(evhttp_request_get_connection(x->ev), NULL, NULL);
	if (x->st)
		h2_stream_set_cbs(x->st, NULL, NULL);
	x->ev = NULL;
	x->st = NULL;
	xunref(x);
}

/* The client went before the answer: the server hears, the worker is done. */
static void lost(struct xreq *x)
{
	loop_defer(x->w->rl->s->loop, client_gone, xref(x));
	worker_done(x);
}

static void h1_closed(struct evhttp_connection *conn, void *arg)
{
	struct xreq *x = arg;

	evhttp_connection_set_closecb(conn, NULL, NULL);
	http_forget_request(x->ev);
	x->ev = NULL;
	lost(x);
}

static void on_h1(struct evhttp_request *ev, void *arg)
{
	struct worker *w = arg;
	struct xreq *x = xreq_new(w, evhttp_request_get_command(ev), evhttp_request_get_uri(ev),
				  evhttp_request_get_input_headers(ev),
				  evhttp_request_get_input_buffer(ev), httpd_ssl(ev));

	x->ev = ev;
	httpd_peer(ev, x->peer, sizeof(x->peer));
	evhttp_connection_set_closecb(evhttp_request_get_connection(ev), h1_closed, x);
	hand_over(x);
}

static void h2_closed(void *arg, struct h2_stream *s, const char *err)
{
	(void)s;
	(void)err;
	lost(arg);
}

static const struct h2_stream_cbs h2_cbs = {.closed = h2_closed};

static void on_h2(struct h2_stream *st, void *arg)
{
	struct worker *w = arg;
	struct xreq *x = xreq_new(w, h2_method(st), h2_path(st), h2_in_headers(st),
				  h2_in_body(st), httpd_h2_ssl(st));

	x->st = st;
	httpd_h2_peer(st, x->peer, sizeof(x->peer));
	h2_stream_set_cbs(st, &h2_cbs, x);
	hand_over(x);
}

static size_t wire_unsent(struct xreq *x)
{
	return x->ev ? httpd_unsent(x->ev) : x->st ? h2_unsent(x->st) : 0;
}

static void on_sample(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	(void)fd;
	(void)what;
	for (struct xreq *x = w->streams; x; x = x->next)
		atomic_store(&x->wire, wire_unsent(x));
}

static void reply_h1(struct xreq *x, struct msg *m)
{
	move_headers(evhttp_request_get_output_headers(x->ev), &m->headers);
	switch (m->op) {
	case OP_REPLY:
		http_coalesce(m->body);
		evhttp_connection_set_closecb(evhttp_request_get_connection(x->ev), NULL, NULL);
		evhttp_send_reply(x->ev, m->code, NULL, m->body);
		x->ev = NULL; /* libevent's once sent */
		worker_done(x);
		break;
	case OP_START:
		evhttp_send_reply_start(x->ev, 200, "OK");
		httpd_stream_no_timeout(x->ev);
		streams_add(x);
		break;
	case OP_CHUNK:
		evhttp_send_reply_chunk(x->ev, m->body);
		break;
	case OP_END: {
		struct evhttp_request *ev = x->ev;
		/* What is buffered may still go out; a reader that never comes
		 * back is dropped by the connection's timeout. */
		if (m->drain_s > 0)
			evhttp_connection_set_timeout(evhttp_request_get_connection(ev),
						      m->drain_s);
		worker_done(x);
		evhttp_send_reply_end(ev);
		break;
	}
	}
}

static void reply_h2(struct xreq *x, struct msg *m)
{
	struct h2_stream *st = x->st;

	move_headers(h2_out_headers(st), &m->headers);
	switch (m->op) {
	case OP_REPLY:
		h2_respond(st, m->code, m->body);
		worker_done(x);
		break;
	case OP_START:
		h2_respond(st, 200, NULL);
		streams_add(x);
		break;
	case OP_CHUNK:
		h2_send(st, m->body);
		break;
	case OP_END:
		worker_done(x);
		h2_end_within(st, m->drain_s);
		break;
	}
}

/* A message from the server, on the worker's thread. */
static void deliver(void *arg)
{
	struct msg *m = arg;
	struct xreq *x = m->x;

	if (m->op == OP_CHUNK)
		atomic_fetch_sub(&x->pending, m->len);
	/* What the loop made of the connection's token, before the answer. */
	if (m->token && x->ev)
		httpd_credentials_judged(x->ev, m->token > 0);
	else if (m->token && x->st)
		httpd_h2_credentials_judged(x->st, m->token > 0);
	/* A client that went is owed nothing more. */
	if (x->ev)
		reply_h1(x, m);
	else if (x->st)
		reply_h2(x, m);
	if (x->ev || x->st)
		atomic_store(&x->wire, wire_unsent(x));
	evhttp_clear_headers(&m->headers);
	if (m->body)
		evbuffer_free(m->body);
	free(m);
	xunref(x);
}

/* ---- the server's side: the relay transport ---------------------------------------- */

static struct xreq *xreq_of(struct req *r)
{
	return r->conn;
}

static void send_msg(struct req *r, enum op op, int code, int drain_s, struct evbuffer *body)
{
	struct xreq *x = xreq_of(r);
	struct msg *m = calloc(1, sizeof(*m));

	if (!m)
		abort();
	m->x = xref(x);
	m->op = op;
	m->code = code;
	m->drain_s = drain_s;
	if (op == OP_REPLY || op == OP_START)
		m->token = r->by_token ? 1 : r->token_refused ? -1 : 0;
	TAILQ_INIT(&m->headers);
	if (op == OP_REPLY || op == OP_START)
		move_headers(&m->headers, &x->out);
	if (body) {
		if (!(m->body = evbuffer_new()))
			abort();
		evbuffer_add_buffer(m->body, body);
		m->len = evbuffer_get_length(m->body);
	}
	if (op == OP_CHUNK)
		atomic_fetch_add(&x->pending, m->len);
	loop_defer(x->w->loop, deliver, m);
}

static void relay_attach(struct req *r)
{
	xreq_of(r)->r = r;
}

static const struct tls_identity *relay_identity(struct req *r)
{
	return &xreq_of(r)->id;
}

static const char *relay_peer(struct req *r, char *buf, size_t n)
{
	snprintf(buf, n, "%s", xreq_of(r)->peer);
	return buf;
}

static const char *relay_target(struct req *r)
{
	return xreq_of(r)->target;
}

static void relay_reply(struct req *r, int code, struct evbuffer *body)
{
	send_msg(r, OP_REPLY, code, 0, body);
}

static void relay_stream_start(struct req *r)
{
	send_msg(r, OP_START, 200, 0, NULL);
}

static void relay_stream_chunk(struct req *r, struct evbuffer *data)
{
	send_msg(r, OP_CHUNK, 0, 0, data);
}

static size_t relay_stream_unsent(struct req *r)
{
	struct xreq *x = xreq_of(r);
	return atomic_load(&x->pending) + atomic_load(&x->wire);
}

static void relay_stream_end(struct req *r, int drain_s)
{
	send_msg(r, OP_END, 0, drain_s, NULL);
}

/* The server is done with the request: its side lets go. */
static void relay_release(struct req *r)
{
	struct xreq *x = xreq_of(r);

	x->r = NULL;
	xunref(x);
}

static const struct req_transport relay_transport = {
	.attach = relay_attach,
	.forget = relay_release,
	.identity = relay_identity,
	.peer = relay_peer,
	.target = relay_target,
	.reply = relay_reply,
	.stream_start = relay_stream_start,
	.stream_chunk = relay_stream_chunk,
	.stream_unsent = relay_stream_unsent,
	.stream_end = relay_stream_end,
	.release = relay_release,
};

/* A request handed over by a worker, on the server's thread. */
static void serve(void *arg)
{
	struct xreq *x = arg;
	struct relay *rl = x->w->rl;

	if (rl->stopping) {
		xunref(x); /* the server's side: nothing will answer it */
		return;
	}
	req_serve(rl->s, &relay_transport, x, x->method, x->target, &x->in, &x->out, x->body);
}

/* The worker's word that a client went (the message's own reference). */
static void client_gone(void *arg)
{
	struct xreq *x = arg;

	if (x->r)
		req_client_gone(x->r);
	xunref(x);
}

/* ---- the workers --------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	/* What the worker logs goes where the server's lines go. */
	log_scope_enter(w->rl->scope);
	if (loop_run(w->loop) < 0)
		LOG_ERROR("\"Serving thread failed\" err=\"%s\"", err_msg());
	return NULL;
}

/* A worker's loop and server; the first binds, the others share its socket. */
static int worker_init(struct worker *w, SSL_CTX *tls, const struct httpd_opts *base)
{
	struct httpd_opts o = *base;

	o.credentials_ok = authn_cert_credentials_ok;
	o.bearer_unjudged = true; /* tokens need the cache: the loop judges them */
	o.h2_handler = on_h2;
	o.reuse_port = true;
	if (w != w->rl->w)
		o.share = w->rl->w[0].httpd;
	w->loop = loop_new();
	if (!(w->httpd = httpd_new(w->loop, tls, &o, on_h1, w)))
		return -1;
	if (!(w->sample = event_new(loop_base(w->loop), -1, EV_PERSIST, on_sample, w)))
		abort();
	return 0;
}

struct relay *relay_start(struct apiserver *s, SSL_CTX *tls, const struct httpd_opts *o,
			  size_t n)
{
	struct relay *rl = calloc(1, sizeof(*rl));
	sigset_t all, old;

	if (!rl || !(rl->w = calloc(n, sizeof(*rl->w))))
		abort();
	rl->s = s;
	rl->n = n;
	rl->scope = log_scope_current();
	for (size_t i = 0; i < n; i++) {
		rl->w[i].rl = rl;
		if (worker_init(&rl->w[i], tls, o) < 0) {
			relay_free(rl);
			return NULL;
		}
	}
	/* Signals are the main thread's business; faults stay each thread's. */
	sigfillset(&all);
	for (const int *f = (const int[]){SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, 0}; *f;
	     f++)
		sigdelset(&all, *f);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (size_t i = 0; i < n; i++) {
		char name[16];
		if (pthread_create(&rl->w[i].thread, NULL, worker_main, &rl->w[i]) != 0)
			break;
		rl->w[i].started = true;
		snprintf(name, sizeof(name), "cube-http-%zu", i);
		pthread_setname_np(rl->w[i].thread, name);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rl->w[n - 1].started) {
		relay_free(rl);
		err_set(ERR_INTERNAL, "could not start the serving threads");
		return NULL;
	}
	return rl;
}

int relay_port(const struct relay *rl)
{
	return httpd_port(rl->w[0].httpd);
}

/*
 * No connection is served any more: the workers stop, their servers close
 * every connection (the server's loop hears of each client gone), and the
 * requests they had handed over are dropped. Answers said later still
 * find their messages delivered, to nobody, by relay_free.
 */
void relay_stop(struct relay *rl)
{
	if (!rl || rl->stopping)
		return;
	rl->stopping = true;
	/* A worker may not have reached loop_run yet. */
	for (size_t i = 0; i < rl->n; i++)
		if (rl->w[i].started)
			loop_stop_pending(rl->w[i].loop);
	for (size_t i = 0; i < rl->n; i++)
		if (rl->w[i].started) {
			pthread_join(rl->w[i].thread, NULL);
			rl->w[i].started = false;
		}
	/* The threads are gone: their loops are this thread's now. What the
	 * server had said is delivered while the connections still exist. */
	for (size_t i = 0; i < rl->n; i++)
		if (rl->w[i].loop)
			loop_poll(rl->w[i].loop);
	/* Shared servers before the one whose socket they share. */
	for (size_t i = rl->n; i-- > 0;) {
		httpd_free(rl->w[i].httpd);
		rl->w[i].httpd = NULL;
	}
	for (size_t i = 0; i < rl->n; i++)
		if (rl->w[i].loop)
			loop_poll(rl->w[i].loop);
	/* Requests handed over and clients gone, heard now while the server
	 * is whole. */
	loop_poll(rl->s->loop);
}

void relay_free(struct relay *rl)
{
	if (!rl)
		return;
	relay_stop(rl);
	for (size_t i = 0; i < rl->n; i++) {
		if (rl->w[i].sample)
			event_free(rl->w[i].sample);
		loop_free(rl->w[i].loop); /* runs what was said since, to nobody */
	}
	free(rl->w);
	free(rl);
}
