/* HTTP/2 sessions (net/h2) back to back over a socket pair: requests and
 * replies, many streams on one connection, a streamed reply, the body
 * limit, a reset, the client's PING health check against a server that has
 * stopped reading, and the idle close. TLS is not h2's business: plain
 * socket bufferevents carry the frames. Durations are real (the health
 * check waits for the network) and compressed to a second. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "net/h2.h"

#include "base/clock.h"
#include "base/loop.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct pair {
	struct loop *loop;
	struct bufferevent *sbev, *cbev;
	struct h2 *srv, *cli;
	/* the server's view */
	struct h2_stream *held[8]; /* requests not answered yet */
	int nheld, requests;
	int srv_closed_streams;
	char srv_closed_err[128];
	bool hold; /* answer nothing: keep requests in held[] */
	char last_body[256];
	uint64_t last_body_sum; /* sum_bytes of the whole last body */
	int big_bodies;          /* POST /big bodies that arrived byte for byte */
	/* the connection */
	int cli_closed, srv_closed;
	char cli_why[128];
};

struct reply {
	int status, closed;
	char err[128];
	char body[512]; /* the first bytes */
	size_t n, total;
	uint64_t sum; /* sum_bytes of all of them */
};

/* A checksum that sees every byte and its order. */
static uint64_t sum_bytes(uint64_t sum, const char *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sum = sum * 1099511628211u + (unsigned char)d[i];
	return sum;
}

/* Run the loop until *flag (NULL: never) or for ns, real time: these
 * tests run on the real clock, as the sessions' timers do. */
static void spin(struct pair *p, const int *flag, int64_t ns)
{
	int64_t deadline = clock_mono() + ns;
	while (!(flag && *flag) && clock_mono() < deadline)
		event_base_loop(loop_base(p->loop), EVLOOP_ONCE | EVLOOP_NONBLOCK),
		    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}

static void spin_until(struct pair *p, const int *flag, int seconds)
{
	spin(p, flag, seconds * NS_PER_SEC);
	assert_true(*flag);
}

/* What the client sends with POST /big: 8 KiB. */
#define BIG_BODY 8192
static void big_body(char *body)
{
	for (size_t i = 0; i < BIG_BODY; i++)
		body[i] = (char)('a' + i % 26);
}

/* What the server answers /big after the request line: 64 KiB. */
static void add_big_body(struct evbuffer *b)
{
	for (int i = 0; i < 64; i++)
		evbuffer_add_printf(b, "%01023d", i);
}

static void srv_stream_closed(void *arg, struct h2_stream *s, const char *err)
{
	struct pair *p = arg;
	(void)s;
	p->srv_closed_streams++;
	snprintf(p->srv_closed_err, sizeof(p->srv_closed_err), "%s", err ? err : "");
}

static const struct h2_stream_cbs srv_cbs = {.closed = srv_stream_closed};

static void on_request(void *arg, struct h2_stream *s)
{
	struct pair *p = arg;
	struct evbuffer *b = evbuffer_new();
	size_t n = evbuffer_get_length(h2_in_body(s));

	p->requests++;
	snprintf(p->last_body, sizeof(p->last_body), "%.*s", (int)n,
	         (char *)evbuffer_pullup(h2_in_body(s), -1));
	p->last_body_sum = sum_bytes(0, (char *)evbuffer_pullup(h2_in_body(s), -1), n);
	if (p->hold) {
		h2_stream_set_cbs(s, &srv_cbs, p);
		p->held[p->nheld++] = s;
		evbuffer_free(b);
		return;
	}
	evhttp_add_header(h2_out_headers(s), "Content-Type", "text/plain");
	evhttp_add_header(h2_out_headers(s), "X-Method",
	                  h2_method(s) == EVHTTP_REQ_POST ? "POST" : "GET");
	evbuffer_add_printf(b, "%s %s", h2_path(s),
	                    evhttp_find_header(h2_in_headers(s), "accept") ?: "-");
	if (!strcmp(h2_path(s), "/big")) { /* four frame buffers' worth */
		char want[BIG_BODY];
		big_body(want);
		p->big_bodies += n == BIG_BODY && p->last_body_sum == sum_bytes(0, want, n);
		add_big_body(b);
	}
	h2_respond(s, 200, b);
	evbuffer_free(b);
}

static void srv_gone(void *arg, const char *why)
{
	struct pair *p = arg;
	(void)why;
	p->srv_closed = 1;
}

static void cli_gone(void *arg, const char *why)
{
	struct pair *p = arg;
	p->cli_closed = 1;
	snprintf(p->cli_why, sizeof(p->cli_why), "%s", why);
}

static void on_headers(void *arg, struct h2_stream *s)
{
	struct reply *r = arg;
	r->status = h2_status(s);
}

static void on_data(void *arg, struct h2_stream *s, const char *d, size_t n)
{
	struct reply *r = arg;
	(void)s;
	if (r->n + n < sizeof(r->body)) {
		memcpy(r->body + r->n, d, n);
		r->n += n;
	}
	r->total += n;
	r->sum = sum_bytes(r->sum, d, n);
}

static void on_closed(void *arg, struct h2_stream *s, const char *err)
{
	struct reply *r = arg;
	h2_stream_set_cbs(s, NULL, NULL); /* done with it: the session frees it */
	r->closed = 1;
	snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
}

static const struct h2_stream_cbs cli_cbs = {on_headers, on_data, on_closed};

static struct pair *pair_new(const struct h2_opts *so, const struct h2_opts *co)
{
	struct pair *p = calloc(1, sizeof(*p));
	struct h2_opts s = *so, c = *co;
	int fds[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	evutil_make_socket_nonblocking(fds[0]);
	evutil_make_socket_nonblocking(fds[1]);
	p->loop = loop_new();
	p->sbev = bufferevent_socket_new(loop_base(p->loop), fds[0],
	                                 BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	p->cbev = bufferevent_socket_new(loop_base(p->loop), fds[1],
	                                 BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	s.server = true;
	s.on_request = on_request;
	s.on_close = srv_gone;
	s.arg = p;
	c.on_close = cli_gone;
	c.arg = p;
	p->srv = h2_new(p->loop, p->sbev, &s);
	p->cli = h2_new(p->loop, p->cbev, &c);
	return p;
}

static void pair_free(struct pair *p)
{
	/* The handler lets go of what it held (closed ones are its to free). */
	for (int i = 0; i < p->nheld; i++)
		h2_stream_set_cbs(p->held[i], NULL, NULL);
	h2_free(p->cli);
	h2_free(p->srv);
	if (p->cbev)
		bufferevent_free(p->cbev);
	if (p->sbev)
		bufferevent_free(p->sbev);
	loop_free(p->loop);
	free(p);
}

static struct h2_stream *get(struct pair *p, const char *path, struct reply *r)
{
	static const char *const hdrs[] = {"Accept", "application/json", "Connection",
	                                   "keep-alive"};
	memset(r, 0, sizeof(*r));
	return h2_request(p->cli, "GET", "127.0.0.1:1", path, hdrs, 2, NULL, 0, &cli_cbs, r);
}

static void test_request_reply(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r;

	(void)state;
	assert_non_null(get(p, "/api/v1/nodes?limit=1", &r));
	spin_until(p, &r.closed, 5);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.err, "");
	/* The accept header arrived lower-cased; the hop-by-hop one did not. */
	assert_string_equal(r.body, "/api/v1/nodes?limit=1 application/json");
	assert_int_equal(p->requests, 1);
	assert_int_equal(h2_open_streams(p->cli), 0);
	assert_true(h2_alive(p->cli));
	pair_free(p);
}

/*
 * A long-lived connection's memory stays flat: nghttp2 would keep up to
 * max_streams (100) closed streams on the server for RFC 7540 priorities,
 * 24 KB on every kubelet's connection after a few minutes of heartbeats.
 * 300 requests one after another on a fresh pair: the heap in use grows
 * by less than 15 KB (with the streams kept: 24 KB).
 */
static void test_closed_streams_are_not_kept(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r;
	size_t before;

	(void)state;
	/* The settings exchanged, the allocator's caches in use. */
	for (int i = 0; i < 3; i++) {
		assert_non_null(get(p, "/warm-up", &r));
		spin_until(p, &r.closed, 5);
	}
	before = mallinfo2().uordblks;
	for (int i = 0; i < 300; i++) {
		assert_non_null(get(p, "/api/v1/nodes/node-1?resourceVersion=0", &r));
		spin_until(p, &r.closed, 5);
		assert_int_equal(r.status, 200);
	}
	assert_int_equal(p->requests, 303);
	assert_in_range(mallinfo2().uordblks, 0, before + 15000);
	pair_free(p);
}

/* The whole reply to POST /big, as on_request makes it. */
static uint64_t big_reply_sum(size_t *len)
{
	struct evbuffer *b = evbuffer_new();
	uint64_t sum;

	evbuffer_add_printf(b, "/big application/json");
	add_big_body(b);
	*len = evbuffer_get_length(b);
	sum = sum_bytes(0, (char *)evbuffer_pullup(b, -1), *len);
	evbuffer_free(b);
	return sum;
}

/* POST /big with 8 KiB of body; its reply, 64 KiB, is four frame buffers' worth. */
static void start_big(struct pair *p, struct reply *r)
{
	static const char *const hdrs[] = {"Accept", "application/json"};
	char body[BIG_BODY];

	big_body(body);
	memset(r, 0, sizeof(*r));
	assert_non_null(h2_request(p->cli, "POST", "127.0.0.1:1", "/big", hdrs, 1, body,
				   sizeof(body), &cli_cbs, r));
}

/* The reply to start_big, checked whole. */
static void finish_big(struct pair *p, struct reply *r)
{
	size_t want_len;
	uint64_t want = big_reply_sum(&want_len);

	spin_until(p, &r->closed, 5);
	assert_int_equal(r->status, 200);
	assert_string_equal(r->err, "");
	assert_int_equal(r->total, want_len);
	assert_true(r->sum == want);
}

/*
 * Every session of a loop writes its frames through one block, the loop's
 * scratch block: no connection keeps nghttp2's ~16 KiB outbound frame
 * buffer, or a resident page of it, for itself (10,000 kubelets: 40 MiB at
 * each end). Both ends here are sessions of one loop, so their frames
 * take turns in the block, each copied out before the next is made (a
 * turn cannot be interleaved: flush asserts it): four exchanges at once,
 * bodies and replies larger than the block on eight streams in both
 * directions, arrive byte for byte, and so do the exchanges after them.
 */
static void test_sessions_share_a_frame_buffer(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r[4];

	(void)state;
	assert_non_null(h2_frame_buffer(p->srv));
	assert_ptr_equal(h2_frame_buffer(p->srv), h2_frame_buffer(p->cli));
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 4; i++)
			start_big(p, &r[i]);
		for (int i = 0; i < 4; i++)
			finish_big(p, &r[i]);
		assert_non_null(get(p, "/api/v1/nodes/node-1?resourceVersion=0", &r[0]));
		spin_until(p, &r[0].closed, 5);
		assert_string_equal(r[0].body, "/api/v1/nodes/node-1?resourceVersion=0 application/json");
	}
	assert_int_equal(p->big_bodies, 8);
	pair_free(p);
}

/* Many requests at once share the connection, and a held reply streams
 * its chunks as they are sent, after the others have completed. */
static void test_multiplexed_and_streamed(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r[6];
	struct evbuffer *b = evbuffer_new();
	char path[32];

	(void)state;
	p->hold = true;
	assert_non_null(get(p, "/watch", &r[0]));
	spin_until(p, &p->nheld, 5);
	p->hold = false;
	for (int i = 1; i < 6; i++) {
		snprintf(path, sizeof(path), "/r%d", i);
		assert_non_null(get(p, path, &r[i]));
	}
	assert_int_equal(h2_open_streams(p->cli), 6);
	for (int i = 1; i < 6; i++) {
		spin_until(p, &r[i].closed, 5);
		assert_int_equal(r[i].status, 200);
	}
	assert_int_equal(r[0].closed, 0);
	h2_respond(p->held[0], 200, NULL);
	evbuffer_add_printf(b, "{\"type\":\"ADDED\"}\n");
	h2_send(p->held[0], b);
	{
		int64_t deadline = clock_mono() + 5 * NS_PER_SEC;
		while (r[0].n < 17 && !r[0].closed && clock_mono() < deadline)
			event_base_loop(loop_base(p->loop), EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	assert_int_equal(r[0].status, 200);
	assert_int_equal(r[0].closed, 0);
	evbuffer_add_printf(b, "{\"type\":\"DELETED\"}\n");
	h2_send(p->held[0], b);
	h2_end(p->held[0]);
	spin_until(p, &r[0].closed, 5);
	assert_string_equal(r[0].err, "");
	assert_string_equal(r[0].body, "{\"type\":\"ADDED\"}\n{\"type\":\"DELETED\"}\n");
	evbuffer_free(b);
	pair_free(p);
}

static void test_body_limit(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){.max_body = 16}, &(struct h2_opts){0});
	struct reply small, big;
	char body[64];

	(void)state;
	memset(body, 'x', sizeof(body));
	memset(&small, 0, sizeof(small));
	memset(&big, 0, sizeof(big));
	assert_non_null(
	    h2_request(p->cli, "POST", "h", "/small", NULL, 0, "{\"a\":1}", 7, &cli_cbs, &small));
	spin_until(p, &small.closed, 5);
	assert_int_equal(small.status, 200);
	assert_string_equal(p->last_body, "{\"a\":1}");
	assert_non_null(
	    h2_request(p->cli, "POST", "h", "/big", NULL, 0, body, sizeof(body), &cli_cbs, &big));
	spin_until(p, &big.closed, 5);
	assert_int_equal(big.status, 413);
	assert_int_equal(p->requests, 1); /* the handler never saw it */
	pair_free(p);
}

/* A client that gives up resets its stream: the server's handler hears. */
static void test_cancel_reaches_the_handler(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r;
	struct h2_stream *s;

	(void)state;
	p->hold = true;
	s = get(p, "/held", &r);
	spin_until(p, &p->nheld, 5);
	h2_cancel(s);
	spin_until(p, &p->srv_closed_streams, 5);
	assert_string_equal(p->srv_closed_err, "stream error: stream ID 1; CANCEL");
	assert_int_equal(r.closed, 0); /* no callbacks after a cancel */
	assert_true(h2_alive(p->cli));
	pair_free(p);
}

/* client-go's health check: no frame for read_idle_s, a PING, no answer in
 * ping_timeout_s: the connection is lost, and every stream on it hears. */
static void test_health_check(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0},
	                          &(struct h2_opts){.read_idle_s = 1, .ping_timeout_s = 1});
	struct reply r;
	int64_t t0;

	(void)state;
	p->hold = true;
	get(p, "/watch", &r);
	spin_until(p, &p->nheld, 5);
	/* A quiet but healthy server answers the PING: still alive after 2.5 s. */
	t0 = clock_mono();
	while (clock_mono() - t0 < 2500 * NS_PER_MS)
		event_base_loop(loop_base(p->loop), EVLOOP_ONCE | EVLOOP_NONBLOCK),
		    nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
	assert_int_equal(p->cli_closed, 0);
	/* The server stops reading (a frozen process): lost within 1 + 1 s. */
	bufferevent_disable(p->sbev, EV_READ);
	t0 = clock_mono();
	spin_until(p, &p->cli_closed, 5);
	/* 1 + 1 s, and what a loaded machine adds. */
	assert_true(clock_mono() - t0 <= 4000 * NS_PER_MS);
	assert_string_equal(p->cli_why, "http2: client connection lost");
	assert_int_equal(r.closed, 1);
	assert_string_equal(r.err, "http2: client connection lost");
	assert_false(h2_alive(p->cli));
	assert_null(get(p, "/after", &r));
	pair_free(p);
}

/* A connection with no stream open closes after the idle timeout
 * (GOAWAY), and the peer hears. */
static void test_idle_close(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){.idle_timeout_s = 1}, &(struct h2_opts){0});
	struct reply r;

	(void)state;
	get(p, "/one", &r);
	spin_until(p, &r.closed, 5);
	spin_until(p, &p->srv_closed, 3);
	spin_until(p, &p->cli_closed, 3);
	pair_free(p);
}

/* The peer's socket goes: streams in flight fail, the session is over. */
static void test_peer_gone(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r;

	(void)state;
	p->hold = true;
	get(p, "/held", &r);
	spin_until(p, &p->nheld, 5);
	h2_free(p->srv);
	p->srv = NULL;
	bufferevent_free(p->sbev);
	p->sbev = NULL;
	spin_until(p, &r.closed, 5);
	/* A socket closed with unread bytes is reset rather than ended. */
	assert_true(!strcmp(r.err, H2_EOF) || !strcmp(r.err, H2_RESET));
	assert_int_equal(p->cli_closed, 1);
	pair_free(p);
}

/* HEAD: the length a GET would carry, and no body (a body is a protocol
 * error to Go's client and to curl). */
static void test_head(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct reply r = {0};
	struct h2_stream *s;

	(void)state;
	s = h2_request(p->cli, "HEAD", "h", "/healthz", NULL, 0, NULL, 0, &cli_cbs, &r);
	assert_non_null(s);
	spin_until(p, &r.closed, 5);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.err, "");
	assert_int_equal(r.n, 0);
	pair_free(p);
}

/* A handler still holding a request its client gave up on reads valid
 * memory until it lets go; what it sends is dropped. */
static void test_abandoned_request_stays_readable(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct evbuffer *b = evbuffer_new();
	struct reply r = {0};
	struct h2_stream *s;

	(void)state;
	p->hold = true;
	s = h2_request(p->cli, "POST", "h", "/slow", NULL, 0, "{\"x\":1}", 7, &cli_cbs, &r);
	spin_until(p, &p->nheld, 5);
	h2_cancel(s);
	spin_until(p, &p->srv_closed_streams, 5);
	assert_int_equal(evbuffer_get_length(h2_in_body(p->held[0])), 7);
	assert_string_equal(evhttp_find_header(h2_in_headers(p->held[0]), "host"), "h");
	evbuffer_add_printf(b, "late");
	h2_respond(p->held[0], 200, b); /* dropped */
	assert_int_equal(h2_unsent(p->held[0]), 0);
	evbuffer_free(b);
	pair_free(p); /* lets go of held[0]: freed (ASan checks) */
}

/* The client's owner frees the session from inside one of its callbacks. */
static void free_in_closed(void *arg, struct h2_stream *s, const char *err)
{
	struct pair *p = arg;
	(void)err;
	h2_stream_set_cbs(s, NULL, NULL);
	h2_free_with_bev(p->cli);
	p->cli = NULL;
	p->cbev = NULL;
	p->cli_closed = 1;
}

static void test_free_from_inside_a_callback(void **state)
{
	static const struct h2_stream_cbs cbs = {.closed = free_in_closed};
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});

	(void)state;
	assert_non_null(h2_request(p->cli, "GET", "h", "/a", NULL, 0, NULL, 0, &cbs, p));
	assert_non_null(h2_request(p->cli, "GET", "h", "/b", NULL, 0, NULL, 0, &cbs, p));
	spin_until(p, &p->cli_closed, 5);
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(p->loop), EVLOOP_NONBLOCK);
	pair_free(p);
}

/* A graceful close (GOAWAY) lets the streams open finish first. */
static void test_goaway_lets_streams_finish(void **state)
{
	struct pair *p = pair_new(&(struct h2_opts){0}, &(struct h2_opts){0});
	struct evbuffer *b = evbuffer_new();
	struct reply r = {0};

	(void)state;
	p->hold = true;
	get(p, "/held", &r);
	spin_until(p, &p->nheld, 5);
	h2_close(p->srv, NULL);
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(p->loop), EVLOOP_NONBLOCK);
	assert_false(h2_can_open(p->cli));
	assert_int_equal(r.closed, 0);
	evbuffer_add_printf(b, "done");
	h2_respond(p->held[0], 200, b);
	spin_until(p, &r.closed, 5);
	assert_string_equal(r.err, "");
	assert_string_equal(r.body, "done");
	spin_until(p, &p->cli_closed, 5);
	evbuffer_free(b);
	pair_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_reply),
	    cmocka_unit_test(test_closed_streams_are_not_kept),
	    cmocka_unit_test(test_sessions_share_a_frame_buffer),
	    cmocka_unit_test(test_multiplexed_and_streamed),
	    cmocka_unit_test(test_body_limit),
	    cmocka_unit_test(test_cancel_reaches_the_handler),
	    cmocka_unit_test(test_health_check),
	    cmocka_unit_test(test_idle_close),
	    cmocka_unit_test(test_peer_gone),
	    cmocka_unit_test(test_head),
	    cmocka_unit_test(test_abandoned_request_stays_readable),
	    cmocka_unit_test(test_free_from_inside_a_callback),
	    cmocka_unit_test(test_goaway_lets_streams_finish),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
