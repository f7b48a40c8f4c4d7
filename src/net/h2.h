/*
 * h2 — HTTP/2 (nghttp2) over a connected TLS bufferevent, for either end.
 *
 * A session takes over a bufferevent whose handshake chose "h2" by ALPN:
 * it sets the bufferevent's callbacks and moves frames between it and
 * nghttp2. Requests and replies are streams: the server hears of each
 * complete request (h2_opts.on_request) and answers it with h2_respond,
 * whole or as a stream of chunks (a watch); the client opens one with
 * h2_request and hears of its headers, its data and its end through the
 * stream's callbacks. Many streams share the connection: a kubelet's
 * requests and watches all ride one.
 *
 * Health (real time, as the network's): a client session PINGs after read_idle_s without a frame
 * from the server and declares the connection lost when no answer comes within ping_timeout_s —
 * client-go's HTTP/2 health check (30 s and 15 s by default, HTTP2_READ_IDLE_TIMEOUT_SECONDS and
 * HTTP2_PING_TIMEOUT_SECONDS). Either end closes (GOAWAY) after idle_timeout_s with no stream open
 * — the server's keep-alive limit, the client's IdleConnTimeout (90 s in client-go).
 *
 * Nothing said through this API calls back synchronously: frames go out on
 * the loop's next turn, so a handler may respond, send or cancel from
 * anywhere, including from inside a callback of this session.
 *
 * Ownership: the session is the caller's (h2_free); the bufferevent stays
 * the caller's (unless h2_free_with_bev) and must outlive the session's
 * use of it — after on_close the session touches it no more. A stream
 * belongs to its session while it is open and to its owner (a handler, a
 * call: whoever set its callbacks) from the moment the owner has it: an
 * owner that still holds it when its closed callback has returned keeps
 * it, whole, until it lets go with h2_stream_set_cbs(s, NULL, NULL) or
 * h2_cancel — so a handler still working on a request a client gave up on
 * reads valid memory; writes to such a stream are dropped. Threads: the
 * loop's thread only.
 */
#ifndef CUBE_NET_H2_H
#define CUBE_NET_H2_H

#include "base/loop.h"

#include <event2/bufferevent.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct h2;
struct h2_stream;

/* The ALPN protocol id and the protocol list a client offers (wire form). */
#define H2_ALPN "h2"
#define H2_ALPN_CLIENT_PROTOS "\x02h2\x08http/1.1"

/* client-go's health-check defaults (apimachinery util/net). */
#define H2_READ_IDLE_TIMEOUT_S 30
#define H2_PING_TIMEOUT_S 15
/* kube-apiserver's streams per connection when --http2-max-streams-per-
 * connection is 0, its default (secure_serving.go, since CVE-2023-44487),
 * and its HTTP/2 idle timeout. */
#define H2_SERVER_MAX_STREAMS 100
#define H2_SERVER_IDLE_TIMEOUT_S 90
/* client-go's IdleConnTimeout (apimachinery SetTransportDefaults). */
#define H2_CLIENT_IDLE_TIMEOUT_S 90

struct h2_opts {
	bool server;
	/* server: the largest request body (larger: 413); 0: no limit */
	size_t max_body;
	size_t max_headers;   /* server: a request's decoded headers; 0: no limit */
	uint32_t max_streams; /* server: SETTINGS_MAX_CONCURRENT_STREAMS; 0: default */
	int idle_timeout_s;   /* close with no stream open this long; 0: never */
	int read_idle_s;      /* client: PING after this without a frame; 0: never */
	int ping_timeout_s;   /* client: ... and give up this long after the PING */
	/* server: a request's headers are in (s is readable but has no body
	 * yet): the body limit for it (bytes, 0 for the session's),
	 * H2_REFUSE_STREAM to reset it (REFUSED_STREAM), or -1 to close the
	 * connection. NULL: the session's limit. */
	long (*admit)(void *arg, struct h2_stream *s);
	/* server: a whole request is in; the handler owns answering it. */
	void (*on_request)(void *arg, struct h2_stream *s);
	/* The connection is over (the peer went, an error, the health check,
	 * the idle timeout, h2_close): every open stream has heard first. */
	void (*on_close)(void *arg, const char *why);
	void *arg;
};

#define H2_REFUSE_STREAM (-2L)

/* Why a session ended below HTTP/2 (on_close, closed): the peer closed
 * the socket, it failed, or the session was closed on this side. Other
 * reasons are HTTP/2's own ("http2: client connection lost", ...). */
#define H2_EOF "EOF"
#define H2_RESET "connection reset"
#define H2_CLOSED "connection closed"

/* Take over bev (connected, TLS done, ALPN "h2"). Never NULL. */
struct h2 *h2_new(struct loop *loop, struct bufferevent *bev, const struct h2_opts *o);
/* Streams still owned hear closed("connection closed") first. From inside
 * one of the session's callbacks the memory goes when that returns. */
void h2_free(struct h2 *h);
/* The same, and bev with it (then, too). */
void h2_free_with_bev(struct h2 *h);
/* Close the connection gracefully (GOAWAY) once its streams are done;
 * now when why is given (streams hear why, then on_close). */
void h2_close(struct h2 *h, const char *why);
bool h2_alive(const struct h2 *h);
/* May a client open another stream now (alive, under the peer's limit)? */
bool h2_can_open(const struct h2 *h);
size_t h2_open_streams(const struct h2 *h);
/* nghttp2's outbound frame buffer: the loop's scratch block, one for all
 * of the loop's sessions (NULL if the session's is its own). */
const void *h2_frame_buffer(const struct h2 *h);
void *h2_arg(const struct h2 *h);

/* ---- streams ---------------------------------------------------------------------- */

struct h2_stream_cbs {
	/* client: the reply's headers are in (h2_status, h2_in_headers) */
	void (*headers)(void *arg, struct h2_stream *s);
	/* client: body bytes (borrowed for the call) */
	void (*data)(void *arg, struct h2_stream *s, const char *d, size_t n);
	/* The stream is over: err NULL when it ended cleanly (client: the
	 * whole reply is in), else why it did not (reset, connection lost).
	 * The stream is freed after this returns. */
	void (*closed)(void *arg, struct h2_stream *s, const char *err);
};

struct h2 *h2_session(const struct h2_stream *s);
/* Who hears about s; NULL cbs: nobody (the owner gave it up). */
void h2_stream_set_cbs(struct h2_stream *s, const struct h2_stream_cbs *cbs, void *arg);

/* server: the request */
enum evhttp_cmd_type h2_method(const struct h2_stream *s);
const char *h2_path(const struct h2_stream *s);       /* :path, the request target */
struct evkeyvalq *h2_in_headers(struct h2_stream *s); /* Host from :authority */
struct evbuffer *h2_in_body(struct h2_stream *s);
/* server: headers of the reply, filled before h2_respond */
struct evkeyvalq *h2_out_headers(struct h2_stream *s);
/* server: the reply's status and headers, and body when not NULL (the
 * whole reply); with body NULL the reply streams: h2_send, then h2_end. */
void h2_respond(struct h2_stream *s, int code, struct evbuffer *body);
void h2_send(struct h2_stream *s, struct evbuffer *data); /* drains data */
void h2_end(struct h2_stream *s);
/* h2_end, and reset the stream if the peer has not taken it all within
 * seconds (a reader that stopped reading one stream). */
void h2_end_within(struct h2_stream *s, int seconds);
/* Bytes of the reply not yet taken by the peer's flow-control window. */
size_t h2_unsent(const struct h2_stream *s);

/* client: a request; headers are "name", "value" pairs (any case), the
 * body (may be NULL) is copied. NULL when the session cannot take it. */
struct h2_stream *h2_request(struct h2 *h, const char *method, const char *authority,
                             const char *path, const char *const *headers, size_t nheaders,
                             const char *body, size_t len, const struct h2_stream_cbs *cbs,
                             void *arg);
int h2_status(const struct h2_stream *s); /* client: the reply's status, 0 before */
/* Was s reset with REFUSED_STREAM (the peer did not process it: safe to
 * send again)? Asked in the closed callback. */
bool h2_stream_refused(const struct h2_stream *s);
/* Reset the stream (RST_STREAM CANCEL); its callbacks do not run again. */
void h2_cancel(struct h2_stream *s);

#endif
