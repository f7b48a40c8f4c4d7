#include "net/h2.h"
#include "net/httpd.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <nghttp2/nghttp2.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Frames wait in nghttp2 while this much is queued for the socket: a slow
 * reader holds back its own streams, not the process's memory. */
#define OUT_HIGH_WATER ((size_t)256 << 10)
/* Windows: a server takes up to 1 MiB a stream before the handler has read
 * it (Go's is 1 MiB); clients take 4 MiB a stream, as Go's transport. */
#define SERVER_STREAM_WINDOW (1 << 20)
#define CLIENT_STREAM_WINDOW (4 << 20)
#define CONN_WINDOW (64 << 20)

struct h2 {
	struct loop *loop;
	struct bufferevent *bev;
	nghttp2_session *ng;
	struct h2_opts o;
	struct event *kick;  /* the next turn: read what is buffered, write what is due */
	struct event *timer; /* client: health check; server: idle */
	int64_t last_read;   /* mono, of the last bytes from the peer */
	int64_t ping_sent;   /* mono, of the PING not yet answered; 0: none */
	int64_t idle_since;  /* mono, since no stream is open (server) */
	struct h2_stream *streams;
	size_t nstreams;
	bool dead;     /* over: no more frames, the bufferevent is not ours */
	bool freeing;  /* h2_free: nghttp2's callbacks are ignored */
	bool goaway;   /* either end said GOAWAY: no new streams */
	int depth;     /* callbacks of this session on the stack */
	bool doomed;   /* h2_free from inside one: the outermost frees */
	bool free_bev; /* ... and the bufferevent with it (h2_free_with_bev) */
	bool creating; /* nghttp2 is making the session: its large block is the frame buffer */
	void *framebuf; /* nghttp2's outbound frame buffer: the loop's scratch block */
	size_t framebuf_len;
};

struct h2_stream {
	struct h2 *h;
	int32_t id;
	struct h2_stream *prev, *next;
	const struct h2_stream_cbs *cbs;
	void *arg;
	enum evhttp_cmd_type method;
	char *path;
	int status;
	struct evkeyvalq in_headers, out_headers;
	struct evbuffer *in_body; /* server: the request body */
	struct evbuffer *out;     /* what this end still has to send */
	size_t max_body;
	bool ended;          /* nothing more will be added to out */
	bool deferred;       /* nghttp2 waits for out to grow (h2_send resumes it) */
	bool responded;      /* server: headers submitted */
	bool too_large;      /* server: answered 413; the rest of the body is dropped */
	bool orphan;         /* closed while its owner held it: the owner frees it */
	bool in_closed;      /* its closed callback runs */
	bool refused;        /* reset by the peer with REFUSED_STREAM: never processed */
	size_t header_bytes; /* server: the request's headers, decoded */
	struct event *drain; /* h2_end_within's deadline */
};

/* ---- the session's lifecycle ------------------------------------------------------ */

/*
 * Real time, whatever the process clock: these timers wait for the
 * network (as evhttp's HTTP/1.1 timeouts do), and a test that moves the
 * virtual clock an hour in one step has not left a connection silent for
 * an hour.
 */
static int64_t wire_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

static void kick(struct h2 *h)
{
	if (!h->dead)
		event_active(h->kick, EV_WRITE, 0);
}

static void stream_unlink(struct h2_stream *s);
static void stream_free(struct h2_stream *s);

/*
 * s is over: its owner hears. An owner that keeps it past its closed
 * callback (a handler still working on the request) gets it whole, apart
 * from the session, and frees it when it lets go (h2_stream_set_cbs NULL):
 * what it reads of the request stays valid until then.
 */
static void stream_over(struct h2_stream *s, const char *err)
{
	const struct h2_stream_cbs *cbs = s->cbs;

	/* nghttp2 may still parse frames of it in this read: they find nothing. */
	if (s->h && s->id > 0 && !s->h->freeing)
		nghttp2_session_set_stream_user_data(s->h->ng, s->id, NULL);
	stream_unlink(s);
	if (cbs && cbs->closed) {
		s->in_closed = true;
		cbs->closed(s->arg, s, err);
		s->in_closed = false;
	}
	if (s->cbs) {
		s->orphan = true;
		s->h = NULL;
		return;
	}
	stream_free(s);
}

/* The session is over: every stream is, and its owner hears. */
static void streams_gone(struct h2 *h, const char *why)
{
	while (h->streams)
		stream_over(h->streams, why);
}

static void destroy(struct h2 *h);

/* A libevent callback of h begins, and ends: h2_free inside it waits. */
static void enter(struct h2 *h)
{
	h->depth++;
}

static bool leave(struct h2 *h)
{
	if (--h->depth == 0 && h->doomed) {
		destroy(h);
		return false;
	}
	return !h->dead;
}

static void shutdown_session(struct h2 *h, const char *why)
{
	if (h->dead)
		return;
	h->dead = true;
	evtimer_del(h->timer);
	event_del(h->kick);
	bufferevent_setcb(h->bev, NULL, NULL, NULL, NULL);
	streams_gone(h, why);
	if (h->o.on_close)
		h->o.on_close(h->o.arg, why);
}

/*
 * nghttp2's outbound frame buffer is a ~16 KiB block a session, taken when
 * the session is made. Every frame, DATA too, is written into it by
 * mem_send and is dead once flush has copied it to the socket's buffer,
 * which it does before it asks mem_send again. So all the sessions of a
 * loop share one block, the loop's scratch block: ten thousand kubelet
 * connections at each end used to keep a page of their own resident for
 * the few bytes a heartbeat last wrote (40 MiB a side), and mapped, and
 * gave back what larger frames had touched.
 *
 * Sharing holds because no session writes there while another's frame
 * waits to be copied. flush runs only from the loop's callbacks, and what
 * runs inside mem_send (nghttp2's callbacks, a stream's owner's closed
 * callback) can only kick a session, never flush one, and never make
 * one: flush and ng_malloc assert it. The one write outside mem_send, a
 * client's preface as nghttp2 makes the session, goes out at once
 * (h2_new). A data source with NGHTTP2_DATA_FLAG_NO_COPY would break it
 * (its frame header waits in the buffer): do not use one here.
 */
#define FRAMEBUF_MIN ((size_t)16 << 10)

/* A flush is running on this thread: another, or a new client session,
 * would write over the frame it has not copied yet. */
static __thread bool flushing;

/* The frame buffer, the first block of its size a new session asks for,
 * is the loop's scratch block; anything else comes from the heap. */
static void *ng_malloc(size_t n, void *arg)
{
	struct h2 *h = arg;

	if (h->creating && !h->framebuf && n >= FRAMEBUF_MIN &&
	    (h->framebuf = loop_scratch(h->loop, n))) {
		CUBE_ASSERT(!flushing);
		h->framebuf_len = n;
		return h->framebuf;
	}
	return malloc(n);
}

/* The session lets go of the frame buffer: true when p is it (the loop
 * keeps the block). */
static bool framebuf_free(struct h2 *h, void *p)
{
	if (!p || p != h->framebuf)
		return false;
	h->framebuf = NULL;
	return true;
}

static void ng_free(void *p, void *arg)
{
	if (!framebuf_free(arg, p))
		free(p);
}

static void *ng_calloc(size_t nmemb, size_t size, void *arg)
{
	(void)arg;
	return calloc(nmemb, size);
}

/* nghttp2 takes its buffers with realloc(NULL, n). It never grows the
 * frame buffer; if a later version does, the session moves to a block of
 * its own on the heap. */
static void *ng_realloc(void *p, size_t n, void *arg)
{
	struct h2 *h = arg;
	void *q;

	if (!p)
		return ng_malloc(n, arg);
	if (p != h->framebuf)
		return realloc(p, n);
	if (!(q = malloc(n)))
		return NULL;
	memcpy(q, p, n < h->framebuf_len ? n : h->framebuf_len);
	framebuf_free(h, p);
	return q;
}

/* Queue what nghttp2 has to send, up to the high-water mark; a session
 * whose GOAWAY exchange is done closes once the socket has it all. */
static void flush(struct h2 *h)
{
	struct evbuffer *out;
	ssize_t n = 0;

	if (h->dead)
		return;
	CUBE_ASSERT(!flushing);
	out = bufferevent_get_output(h->bev);
	flushing = true;
	while (evbuffer_get_length(out) < OUT_HIGH_WATER) {
		const uint8_t *data;
		if ((n = nghttp2_session_mem_send(h->ng, &data)) <= 0)
			break;
		evbuffer_add(out, data, (size_t)n);
	}
	flushing = false;
	if (n < 0)
		shutdown_session(h, nghttp2_strerror((int)n));
	else if (!nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng) &&
	         !evbuffer_get_length(out))
		shutdown_session(h, H2_CLOSED);
}

static void consume(struct h2 *h)
{
	struct evbuffer *in = bufferevent_get_input(h->bev);

	while (!h->dead && evbuffer_get_length(in)) {
		struct evbuffer_iovec v[8];
		int n = evbuffer_peek(in, -1, NULL, v, 8);
		size_t used = 0;

		h->last_read = wire_mono();
		for (int i = 0; i < n && !h->dead; i++) {
			ssize_t r = nghttp2_session_mem_recv(h->ng, v[i].iov_base, v[i].iov_len);
			if (r < 0) {
				LOG_V(2, "http2: closing the connection: %s",
				      nghttp2_strerror((int)r));
				shutdown_session(h, nghttp2_strerror((int)r));
				return;
			}
			used += (size_t)r;
		}
		evbuffer_drain(in, used);
	}
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct h2 *h = arg;
	(void)bev;
	enter(h);
	consume(h);
	flush(h);
	leave(h);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct h2 *h = arg;
	(void)bev;
	enter(h);
	flush(h);
	leave(h);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct h2 *h = arg;
	(void)bev;
	/* The handshake's own event may still be on its way to us, with
	 * others folded into it. */
	what &= ~BEV_EVENT_CONNECTED;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	enter(h);
	shutdown_session(h, what & BEV_EVENT_EOF ? H2_EOF : H2_RESET);
	leave(h);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	on_read(NULL, arg);
}

/* ---- timers: the client's health check, the server's idle close ------------------- */

static void arm(struct h2 *h)
{
	int64_t at = INT64_MAX;

	if (h->dead)
		return;
	if (!h->o.server && h->o.read_idle_s > 0)
		at = h->ping_sent ? h->ping_sent + h->o.ping_timeout_s * NS_PER_SEC
		                  : h->last_read + h->o.read_idle_s * NS_PER_SEC;
	if (h->o.idle_timeout_s > 0 && !h->nstreams &&
	    h->idle_since + h->o.idle_timeout_s * NS_PER_SEC < at)
		at = h->idle_since + h->o.idle_timeout_s * NS_PER_SEC;
	if (at == INT64_MAX) {
		evtimer_del(h->timer);
	} else {
		int64_t d = at - wire_mono();
		struct timeval tv;
		d = d > 0 ? (d + NS_PER_US - 1) / NS_PER_US : 0;
		tv.tv_sec = (time_t)(d / 1000000);
		tv.tv_usec = (suseconds_t)(d % 1000000);
		evtimer_add(h->timer, &tv);
	}
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct h2 *h = arg;
	int64_t now = wire_mono();

	(void)fd;
	(void)what;
	if (h->o.idle_timeout_s > 0 && !h->nstreams &&
	    now - h->idle_since >= h->o.idle_timeout_s * NS_PER_SEC) {
		h2_close(h, NULL);
		return;
	}
	enter(h);
	if (h->o.server || h->o.read_idle_s <= 0) {
		/* nothing else to watch */
	} else if (h->ping_sent) {
		if (now - h->ping_sent >= h->o.ping_timeout_s * NS_PER_SEC) {
			/* Go's words when the health check fails. */
			LOG_V(2, "http2: no PING answer in %ds: connection lost",
			      h->o.ping_timeout_s);
			shutdown_session(h, "http2: client connection lost");
			leave(h);
			return;
		}
	} else if (now - h->last_read >= h->o.read_idle_s * NS_PER_SEC) {
		nghttp2_submit_ping(h->ng, NGHTTP2_FLAG_NONE, NULL);
		h->ping_sent = now;
		flush(h);
	}
	if (leave(h))
		arm(h);
}

/* ---- streams ------------------------------------------------------------------------- */

static struct h2_stream *stream_new(struct h2 *h)
{
	struct h2_stream *s = calloc(1, sizeof(*s));

	if (!s || !(s->out = evbuffer_new()))
		abort();
	s->h = h;
	s->max_body = h->o.max_body;
	TAILQ_INIT(&s->in_headers);
	TAILQ_INIT(&s->out_headers);
	return s;
}

static void stream_link(struct h2_stream *s)
{
	struct h2 *h = s->h;
	if ((s->next = h->streams))
		s->next->prev = s;
	h->streams = s;
	h->nstreams++;
}

static void stream_free(struct h2_stream *s)
{
	if (s->drain)
		event_free(s->drain);
	evhttp_clear_headers(&s->in_headers);
	evhttp_clear_headers(&s->out_headers);
	if (s->in_body)
		evbuffer_free(s->in_body);
	evbuffer_free(s->out);
	free(s->path);
	free(s);
}

static void stream_unlink(struct h2_stream *s)
{
	struct h2 *h = s->h;
	if (!h)
		return;
	if (s->prev)
		s->prev->next = s->next;
	else
		h->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	if (!--h->nstreams) {
		h->idle_since = wire_mono();
		arm(h);
	}
}

static ssize_t read_out(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *user)
{
	struct h2_stream *s = src->ptr;
	size_t have = evbuffer_get_length(s->out);
	int n;

	(void)ng;
	(void)id;
	(void)user;
	if (!have && !s->ended) {
		s->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	n = have ? evbuffer_remove(s->out, buf, len < have ? len : have) : 0;
	if (s->ended && !evbuffer_get_length(s->out))
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return n;
}

/* nghttp2 wants header names in lower case; the connection's own headers
 * have no place in HTTP/2. nv's strings point into names (kept by the
 * caller) and the values given. */
static bool hop_by_hop(const char *name)
{
	static const char *const hop[] = {"connection",        "keep-alive", "proxy-connection",
	                                  "transfer-encoding", "upgrade",    "host"};
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (!strcasecmp(name, hop[i]))
			return true;
	return false;
}

static char *lower_dup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		abort();
	for (char *p = d; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return d;
}

struct nvs {
	nghttp2_nv *nv;
	char **owned;
	size_t n, nowned, cap;
};

static void nvs_add(struct nvs *v, const char *name, const char *value, bool lower)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 16;
		if (!(v->nv = realloc(v->nv, v->cap * sizeof(*v->nv))) ||
		    !(v->owned = realloc(v->owned, 2 * v->cap * sizeof(*v->owned))))
			abort();
	}
	if (lower)
		name = v->owned[v->nowned++] = lower_dup(name);
	v->nv[v->n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
	                             NGHTTP2_NV_FLAG_NONE};
}

static void nvs_free(struct nvs *v)
{
	for (size_t i = 0; i < v->nowned; i++)
		free(v->owned[i]);
	free(v->owned);
	free(v->nv);
}

/* ---- nghttp2's callbacks ------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s;
	if (h->dead)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (!h->o.server || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = stream_new(h);
	s->id = f->hd.stream_id;
	s->in_body = evbuffer_new();
	stream_link(s);
	nghttp2_session_set_stream_user_data(ng, s->id, s);
	return 0;
}

/* nghttp2 hands names and values NUL-terminated, names in lower case. */
static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	const char *n = (const char *)name, *v = (const char *)value;

	if (((struct h2 *)user)->dead)
		return NGHTTP2_ERR_CALLBACK_FAILURE;

	struct h2 *h = user;

	(void)flags;
	if (!s || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	/* What evhttp allows an HTTP/1.1 request (HPACK may inflate a small
	 * frame into much more); 32 bytes a field, as HTTP/2 counts them. */
	s->header_bytes += namelen + valuelen + 32;
	if (h->o.max_headers && s->header_bytes > h->o.max_headers)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	if (n[0] != ':') {
		evhttp_add_header(&s->in_headers, n, v);
	} else if (!strcmp(n, ":method")) {
		s->method = httpd_method(v);
	} else if (!strcmp(n, ":path")) {
		free(s->path);
		s->path = strdup(v);
	} else if (!strcmp(n, ":authority")) {
		evhttp_add_header(&s->in_headers, "Host", v);
	} else if (!strcmp(n, ":status")) {
		s->status = atoi(v);
	}
	return 0;
}

static void respond_too_large(struct h2_stream *s)
{
	struct evbuffer *b = evbuffer_new();
	s->too_large = true;
	evbuffer_add_printf(b, "request body too large\n");
	evhttp_add_header(&s->out_headers, "Content-Type", "text/plain; charset=utf-8");
	h2_respond(s, 413, b);
	evbuffer_free(b);
}

static void request_headers_in(struct h2 *h, struct h2_stream *s)
{
	long limit = h->o.admit ? h->o.admit(h->o.arg, s) : 0;

	if (limit == H2_REFUSE_STREAM) {
		s->too_large = true; /* nothing of it reaches the handler */
		nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
		return;
	}
	if (limit < 0) {
		h2_close(h, "refused");
		return;
	}
	if (limit > 0)
		s->max_body = (size_t)limit;
}

static void request_in(struct h2 *h, struct h2_stream *s)
{
	const unsigned allowed = EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
	                         EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD |
	                         EVHTTP_REQ_OPTIONS;

	if (s->too_large || h->dead)
		return;
	if (!s->path || !(s->method & allowed)) {
		/* What evhttp answers a method it does not take. */
		h2_respond(s, 501, NULL);
		h2_end(s);
		return;
	}
	h->o.on_request(h->o.arg, s);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;

	if (h->dead)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (!s)
			break;
		if (h->o.server && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
			request_headers_in(h, s);
			if (end)
				request_in(h, s);
		} else if (!h->o.server && f->headers.cat == NGHTTP2_HCAT_RESPONSE &&
		           s->status >= 200 && s->cbs && s->cbs->headers) {
			s->cbs->headers(s->arg, s);
		}
		break;
	case NGHTTP2_DATA:
		if (s && h->o.server && end)
			request_in(h, s);
		break;
	case NGHTTP2_PING:
		if (f->hd.flags & NGHTTP2_FLAG_ACK)
			h->ping_sent = 0;
		break;
	case NGHTTP2_GOAWAY:
		h->goaway = true;
		break;
	default:
		break;
	}
	return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, id);

	(void)flags;
	if (h->dead)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (!s)
		return 0;
	if (!h->o.server) {
		if (s->cbs && s->cbs->data)
			s->cbs->data(s->arg, s, (const char *)data, len);
		return 0;
	}
	if (s->too_large)
		return 0;
	if (s->max_body && evbuffer_get_length(s->in_body) + len > s->max_body) {
		respond_too_large(s);
		return 0;
	}
	evbuffer_add(s->in_body, data, len);
	return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, id);
	const char *err = NULL;
	char why[128];

	if (!s || h->freeing)
		return 0;
	nghttp2_session_set_stream_user_data(ng, id, NULL);
	if (code != NGHTTP2_NO_ERROR) {
		s->refused = code == NGHTTP2_REFUSED_STREAM;
		snprintf(why, sizeof(why), "stream error: stream ID %d; %s", id,
		         nghttp2_http2_strerror(code));
		err = why;
	} else if (h->o.server && !s->ended) {
		err = "the client closed the stream";
	}
	stream_over(s, err);
	return 0;
}

/* A reply that went whole before the request did (the 413): the rest of
 * the upload is not wanted, as Go's server says with RST_STREAM. */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
	struct h2 *h = user;
	struct h2_stream *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);

	if (h->o.server && s && s->too_large && (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA))
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
	return 0;
}

/* ---- the session --------------------------------------------------------------------- */

static nghttp2_session_callbacks *callbacks(void)
{
	nghttp2_session_callbacks *cb;

	if (nghttp2_session_callbacks_new(&cb) != 0)
		abort();
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	return cb;
}

struct h2 *h2_new(struct loop *loop, struct bufferevent *bev, const struct h2_opts *o)
{
	struct h2 *h = calloc(1, sizeof(*h));
	nghttp2_session_callbacks *cb = callbacks();
	nghttp2_option *opt;
	nghttp2_settings_entry iv[3];
	size_t niv = 0;
	int rc;
	nghttp2_mem mem = {h, ng_malloc, ng_free, ng_calloc, ng_realloc};

	if (!h)
		abort();
	h->loop = loop;
	h->bev = bev;
	h->o = *o;
	if (o->server && !h->o.max_streams)
		h->o.max_streams = H2_SERVER_MAX_STREAMS;
	/* nghttp2 keeps a server's closed streams for RFC 7540's priority
	 * tree, as many as it allows open at once: on a kubelet's connection,
	 * which lives for days, 100 streams, 24 KB (test_h2) — 240 MB for
	 * 10,000 nodes. Nothing here uses priorities, so a stream goes when
	 * it closes. */
	if (nghttp2_option_new(&opt) != 0)
		abort();
	nghttp2_option_set_no_closed_streams(opt, 1);
	h->creating = true;
	rc = o->server ? nghttp2_session_server_new3(&h->ng, cb, h, opt, &mem)
	               : nghttp2_session_client_new3(&h->ng, cb, h, opt, &mem);
	h->creating = false;
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (rc != 0)
		abort();
	if (o->server) {
		iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
		                                     h->o.max_streams};
		iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
		                                     SERVER_STREAM_WINDOW};
	} else {
		iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
		iv[niv++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
		                                     CLIENT_STREAM_WINDOW};
	}
	nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, niv);
	nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW);
	h->kick = event_new(loop_base(loop), -1, 0, on_kick, h);
	h->timer = evtimer_new(loop_base(loop), on_timer, h);
	if (!h->kick || !h->timer)
		abort();
	h->last_read = h->idle_since = wire_mono();
	bufferevent_setcb(bev, on_read, on_write, on_event, h);
	bufferevent_set_timeouts(bev, NULL, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	arm(h);
	/* nghttp2 wrote a client's preface into the frame buffer as it made
	 * the session: out with it before another session writes there (the
	 * first mem_send hands out the preface alone, with no callback). */
	if (!o->server && h->framebuf) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(h->ng, &data);
		if (n > 0)
			evbuffer_add(bufferevent_get_output(bev), data, (size_t)n);
	}
	/* The settings go now; what is already buffered (the client's preface
	 * arrived with the handshake) is read on the next turn. */
	kick(h);
	return h;
}

static void destroy(struct h2 *h)
{
	struct bufferevent *bev = h->free_bev ? h->bev : NULL;

	h->freeing = true;
	nghttp2_session_del(h->ng);
	while (h->streams) {
		struct h2_stream *s = h->streams;
		h->streams = s->next;
		stream_free(s);
	}
	event_free(h->timer);
	event_free(h->kick);
	free(h);
	if (bev)
		bufferevent_free(bev);
}

static void h2_release(struct h2 *h, bool with_bev)
{
	if (!h)
		return;
	h->free_bev = with_bev;
	if (!h->dead) {
		h->dead = true;
		evtimer_del(h->timer);
		event_del(h->kick);
		bufferevent_setcb(h->bev, NULL, NULL, NULL, NULL);
		streams_gone(h, H2_CLOSED);
	}
	/* From inside one of its callbacks: the outermost one frees it. */
	if (h->depth) {
		h->doomed = true;
		return;
	}
	destroy(h);
}

void h2_free(struct h2 *h)
{
	h2_release(h, false);
}

void h2_free_with_bev(struct h2 *h)
{
	h2_release(h, true);
}

void h2_close(struct h2 *h, const char *why)
{
	if (h->dead)
		return;
	if (why) {
		shutdown_session(h, why);
		return;
	}
	h->goaway = true;
	/* The streams open go on; the connection closes when they are done. */
	nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE,
	                      nghttp2_session_get_last_proc_stream_id(h->ng), NGHTTP2_NO_ERROR,
	                      NULL, 0);
	kick(h);
}

bool h2_alive(const struct h2 *h)
{
	return !h->dead && !h->goaway;
}

bool h2_can_open(const struct h2 *h)
{
	uint32_t max;

	if (!h2_alive(h))
		return false;
	max = nghttp2_session_get_remote_settings(h->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
	return h->nstreams < max;
}

size_t h2_open_streams(const struct h2 *h)
{
	return h->nstreams;
}

const void *h2_frame_buffer(const struct h2 *h)
{
	return h->framebuf;
}

void *h2_arg(const struct h2 *h)
{
	return h->o.arg;
}

struct h2 *h2_session(const struct h2_stream *s)
{
	return s->h;
}

void h2_stream_set_cbs(struct h2_stream *s, const struct h2_stream_cbs *cbs, void *arg)
{
	s->cbs = cbs;
	s->arg = arg;
	/* The owner lets go of a stream that is over: it was the last. */
	if (!cbs && s->orphan && !s->in_closed)
		stream_free(s);
}

enum evhttp_cmd_type h2_method(const struct h2_stream *s)
{
	return s->method;
}

const char *h2_path(const struct h2_stream *s)
{
	return s->path;
}

struct evkeyvalq *h2_in_headers(struct h2_stream *s)
{
	return &s->in_headers;
}

struct evbuffer *h2_in_body(struct h2_stream *s)
{
	return s->in_body;
}

struct evkeyvalq *h2_out_headers(struct h2_stream *s)
{
	return &s->out_headers;
}

int h2_status(const struct h2_stream *s)
{
	return s->status;
}

bool h2_stream_refused(const struct h2_stream *s)
{
	return s->refused;
}

size_t h2_unsent(const struct h2_stream *s)
{
	return s->orphan ? 0 : evbuffer_get_length(s->out);
}

static void on_drain_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct h2_stream *s = arg;
	(void)fd;
	(void)what;
	if (s->orphan || s->h->dead)
		return;
	LOG_V(2, "http2: stream %d: the reply was not taken within its deadline: reset", s->id);
	nghttp2_submit_rst_stream(s->h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
	kick(s->h);
}

void h2_end_within(struct h2_stream *s, int seconds)
{
	struct timeval tv = {seconds, 0};

	h2_end(s);
	if (s->orphan || seconds <= 0 || s->h->dead)
		return;
	if (!s->drain && !(s->drain = evtimer_new(loop_base(s->h->loop), on_drain_deadline, s)))
		abort();
	evtimer_add(s->drain, &tv);
}

void h2_respond(struct h2_stream *s, int code, struct evbuffer *body)
{
	struct h2 *h = s->h;
	nghttp2_data_provider prd = {.source.ptr = s, .read_callback = read_out};
	struct nvs v = {0};
	char status[8], length[24];

	if (s->orphan || s->responded || h->dead)
		return;
	s->responded = true;
	snprintf(status, sizeof(status), "%d", code);
	nvs_add(&v, ":status", status, false);
	for (struct evkeyval *kv = TAILQ_FIRST(&s->out_headers); kv; kv = TAILQ_NEXT(kv, next))
		if (!hop_by_hop(kv->key) && strcasecmp(kv->key, "content-length"))
			nvs_add(&v, kv->key, kv->value, true);
	if (body) {
		s->ended = true;
		evbuffer_add_buffer(s->out, body);
		snprintf(length, sizeof(length), "%zu", evbuffer_get_length(s->out));
		nvs_add(&v, "content-length", length, false);
		/* A HEAD reply has the length of what a GET would carry, not it. */
		if (s->method == EVHTTP_REQ_HEAD)
			evbuffer_drain(s->out, evbuffer_get_length(s->out));
	}
	nghttp2_submit_response(h->ng, s->id, v.nv, v.n,
	                        s->ended && !evbuffer_get_length(s->out) ? NULL : &prd);
	nvs_free(&v);
	kick(h);
}

static void resume(struct h2_stream *s)
{
	if (s->orphan)
		return;
	if (s->deferred && !s->h->dead) {
		s->deferred = false;
		nghttp2_session_resume_data(s->h->ng, s->id);
	}
	kick(s->h);
}

void h2_send(struct h2_stream *s, struct evbuffer *data)
{
	if (s->orphan || s->ended || s->h->dead) {
		evbuffer_drain(data, evbuffer_get_length(data));
		return;
	}
	evbuffer_add_buffer(s->out, data);
	resume(s);
}

void h2_end(struct h2_stream *s)
{
	s->ended = true;
	resume(s);
}

struct h2_stream *h2_request(struct h2 *h, const char *method, const char *authority,
                             const char *path, const char *const *headers, size_t nheaders,
                             const char *body, size_t len, const struct h2_stream_cbs *cbs,
                             void *arg)
{
	nghttp2_data_provider prd;
	struct h2_stream *s;
	struct nvs v = {0};
	int32_t id;

	if (!h2_can_open(h))
		return NULL;
	s = stream_new(h);
	s->cbs = cbs;
	s->arg = arg;
	s->ended = true;
	if (body && len)
		evbuffer_add(s->out, body, len);
	prd = (nghttp2_data_provider){.source.ptr = s, .read_callback = read_out};
	nvs_add(&v, ":method", method, false);
	nvs_add(&v, ":scheme", "https", false);
	nvs_add(&v, ":authority", authority, false);
	nvs_add(&v, ":path", path, false);
	for (size_t i = 0; i + 1 < 2 * nheaders; i += 2)
		if (!hop_by_hop(headers[i]))
			nvs_add(&v, headers[i], headers[i + 1], true);
	id = nghttp2_submit_request(h->ng, NULL, v.nv, v.n, body && len ? &prd : NULL, s);
	nvs_free(&v);
	if (id < 0) {
		stream_free(s);
		return NULL;
	}
	s->id = id;
	stream_link(s);
	kick(h);
	return s;
}

void h2_cancel(struct h2_stream *s)
{
	if (s->orphan) {
		h2_stream_set_cbs(s, NULL, NULL);
		return;
	}
	s->cbs = NULL;
	if (s->h->dead)
		return;
	nghttp2_submit_rst_stream(s->h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
	kick(s->h);
}
