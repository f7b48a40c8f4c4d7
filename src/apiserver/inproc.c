/*
 * In-process requests (apiserver.h): a transport whose "connection" is an
 * exchange in the caller's memory. A request enters req_serve exactly as
 * one from HTTPS does; only where its bytes come from and go differs.
 *
 * The exchange and its request point at each other while the request is
 * open: release (the request is over) and free (the client goes) each cut
 * their side, so either may come first.
 */
#include "apiserver/internal.h"

#include "net/tls.h"

#include "base/alloc.h"
#include "base/clock.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

struct apiserver_exchange {
	struct req *r; /* while the request is open */
	char *target;
	struct evkeyvalq in_headers, out_headers;
	struct evbuffer *in_body, *out_body, *unsent;
	char *text; /* the body as last returned, NUL-terminated */
	struct tls_identity id;
	int status;
	bool done, stall;
};

static struct apiserver_exchange *exchange_of(struct req *r)
{
	return r->conn;
}

static void xp_attach(struct req *r)
{
	exchange_of(r)->r = r;
}

static const struct tls_identity *xp_identity(struct req *r)
{
	struct apiserver_exchange *x = exchange_of(r);
	return x->id.present ? &x->id : NULL;
}

static const char *xp_peer(struct req *r, char *buf, size_t n)
{
	(void)r;
	snprintf(buf, n, "in-process");
	return buf;
}

static const char *xp_target(struct req *r)
{
	return exchange_of(r)->target;
}

static void xp_reply(struct req *r, int code, struct evbuffer *body)
{
	struct apiserver_exchange *x = exchange_of(r);
	x->status = code;
	evbuffer_add_buffer(x->out_body, body);
	x->done = true;
}

static void xp_stream_start(struct req *r)
{
	exchange_of(r)->status = 200;
}

static void xp_stream_chunk(struct req *r, struct evbuffer *data)
{
	struct apiserver_exchange *x = exchange_of(r);
	evbuffer_add_buffer(x->stall ? x->unsent : x->out_body, data);
}

static size_t xp_stream_unsent(struct req *r)
{
	return evbuffer_get_length(exchange_of(r)->unsent);
}

static void xp_release(struct req *r)
{
	exchange_of(r)->r = NULL;
}

static void xp_stream_end(struct req *r, int drain_s)
{
	struct apiserver_exchange *x = exchange_of(r);
	(void)drain_s; /* the caller reads at its own pace */
	x->done = true;
	xp_release(r);
}

static const struct req_transport inproc_transport = {
    .attach = xp_attach,
    .identity = xp_identity,
    .peer = xp_peer,
    .target = xp_target,
    .reply = xp_reply,
    .stream_start = xp_stream_start,
    .stream_chunk = xp_stream_chunk,
    .stream_unsent = xp_stream_unsent,
    .stream_end = xp_stream_end,
    .release = xp_release,
};

static enum evhttp_cmd_type method_of(const char *m)
{
	enum evhttp_cmd_type cmd = httpd_method(m);
	/* What no handler serves. */
	return cmd && cmd != EVHTTP_REQ_CONNECT ? cmd : EVHTTP_REQ_TRACE;
}

struct apiserver_exchange *apiserver_exchange(struct apiserver *s,
                                              const struct apiserver_request *rq)
{
	struct apiserver_exchange *x = calloc(1, sizeof(*x));

	if (!x)
		abort();
	x->target = xstrdup(rq->target);
	TAILQ_INIT(&x->in_headers);
	TAILQ_INIT(&x->out_headers);
	x->in_body = evbuffer_new();
	x->out_body = evbuffer_new();
	x->unsent = evbuffer_new();
	if (!x->in_body || !x->out_body || !x->unsent)
		abort();
	for (size_t i = 0; rq->headers && rq->headers[i] && rq->headers[i + 1]; i += 2)
		evhttp_add_header(&x->in_headers, rq->headers[i], rq->headers[i + 1]);
	if (rq->body)
		evbuffer_add(x->in_body, rq->body, rq->body_len ? rq->body_len : strlen(rq->body));
	if (rq->user) {
		x->id.present = true;
		x->id.user = xstrdup(rq->user);
		for (size_t i = 0; rq->groups && rq->groups[i]; i++)
			strv_push(&x->id.groups, rq->groups[i]);
		x->id.not_after_ns = clock_now() + 365 * 24 * 3600 * NS_PER_SEC;
	}
	req_serve(s, &inproc_transport, x, method_of(rq->method), x->target, &x->in_headers,
	          &x->out_headers, x->in_body);
	return x;
}

int apiserver_exchange_status(const struct apiserver_exchange *x)
{
	return x->status;
}

bool apiserver_exchange_done(const struct apiserver_exchange *x)
{
	return x->done;
}

const char *apiserver_exchange_header(const struct apiserver_exchange *x, const char *name,
                                      size_t i)
{
	const struct evkeyval *kv;
	TAILQ_FOREACH(kv, &x->out_headers, next)
	{
		if (!strcasecmp(kv->key, name) && i-- == 0)
			return kv->value;
	}
	return NULL;
}

const char *apiserver_exchange_body(const struct apiserver_exchange *x, size_t *len)
{
	struct apiserver_exchange *w = (struct apiserver_exchange *)x; /* its copy only */
	size_t n = evbuffer_get_length(x->out_body);

	free(w->text);
	if (!(w->text = malloc(n + 1)))
		abort();
	evbuffer_copyout(x->out_body, w->text, n);
	w->text[n] = '\0';
	if (len)
		*len = n;
	return w->text;
}

void apiserver_exchange_stall(struct apiserver_exchange *x, bool stall)
{
	x->stall = stall;
	if (!stall)
		evbuffer_add_buffer(x->out_body, x->unsent);
}

void apiserver_exchange_free(struct apiserver_exchange *x)
{
	if (!x)
		return;
	if (x->r) {
		struct req *r = x->r;
		x->r = NULL;
		req_client_gone(r);
	}
	evhttp_clear_headers(&x->in_headers);
	evhttp_clear_headers(&x->out_headers);
	evbuffer_free(x->in_body);
	evbuffer_free(x->out_body);
	evbuffer_free(x->unsent);
	free(x->id.user);
	strv_free(&x->id.groups);
	free(x->target);
	free(x->text);
	free(x);
}
