/*
 * Limits a hostile or broken client cannot pass (issue 10, item 4), against
 * a real API server: an object beyond etcd's 1.5 MiB is refused as upstream
 * refuses it (500, "etcdserver: request is too large") and nothing is
 * stored; a body beyond 3 MiB is 413; a JSON patch copy bomb is the generic
 * 422; JSON nested beyond the parser's depth is 400 — and the server keeps
 * answering after each.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/clock.h"
#include "base/jx.h"
#include "net/httpd.h"
#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"
#define CMS "/api/v1/namespaces/default/configmaps"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start(e, "limits");
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	testenv_stop(*state);
	free(*state);
	return 0;
}

static char *filler(size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, 'x', n);
	s[n] = '\0';
	return s;
}

static json_t *lease(const char *name, const char *holder)
{
	return json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "coordination.k8s.io/v1",
	                 "kind", "Lease", "metadata", "name", name, "spec", "holderIdentity",
	                 holder);
}

static int status_of(struct testenv *e, const char *method, const char *path, json_t *body,
                     char *msg, size_t n)
{
	struct testenv_result r = testenv_call(e, method, path, body);
	if (msg)
		snprintf(msg, n, "%s", jx_str(r.body, "message") ?: "");
	json_decref(r.body);
	json_decref(body);
	return r.status;
}

static void test_object_beyond_etcds_limit(void **state)
{
	struct testenv *e = *state;
	char *big = filler(1600 * 1024), *ok = filler(1400 * 1024), msg[256];
	json_t *l;

	assert_int_equal(status_of(e, "POST", LEASES, lease("big", big), msg, sizeof(msg)), 500);
	assert_string_equal(msg, "etcdserver: request is too large");
	assert_int_equal(status_of(e, "GET", LEASES "/big", NULL, NULL, 0), 404);
	/* Under the limit it is stored; growing it past the limit by an
	 * update is refused, and the stored object stays as it was. */
	assert_int_equal(status_of(e, "POST", LEASES, lease("grows", ok), NULL, 0), 201);
	l = lease("grows", big);
	assert_int_equal(status_of(e, "PUT", LEASES "/grows", l, msg, sizeof(msg)), 500);
	assert_string_equal(msg, "etcdserver: request is too large");
	{
		struct testenv_result r = testenv_call(e, "GET", LEASES "/grows", NULL);
		assert_int_equal(r.status, 200);
		assert_int_equal(strlen(jx_str(r.body, "spec.holderIdentity")), 1400 * 1024);
		json_decref(r.body);
	}
	free(big);
	free(ok);
}

static void test_body_beyond_the_request_limit(void **state)
{
	struct testenv *e = *state;
	char *huge = filler(3200 * 1024), msg[256];

	assert_int_equal(status_of(e, "POST", LEASES, lease("huge", huge), msg, sizeof(msg)), 413);
	assert_string_equal(msg, "Request entity too large: limit is 3145728");
	free(huge);
	assert_int_equal(status_of(e, "GET", LEASES, NULL, NULL, 0), 200);
}

/* The 20-op copy bomb as a PATCH: 422 with upstream's generic text, the
 * object unchanged. */
static void test_json_patch_copy_bomb(void **state)
{
	struct testenv *e = *state;
	json_t *ops = json_array(), *cm;
	struct testenv_result r;
	char from[40], to[40];

	cm = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
	               "metadata", "name", "bomb", "data", "k", "0123456789abcdef0123456789abcdef");
	assert_int_equal(status_of(e, "POST", CMS, cm, NULL, 0), 201);
	json_array_append_new(
	    ops, json_pack("{s:s,s:s,s:{}}", "op", "add", "path", "/metadata/annotations"));
	json_array_append_new(ops, json_pack("{s:s,s:s,s:s}", "op", "copy", "from", "/data/k",
	                                     "path", "/metadata/annotations/a0"));
	for (int i = 1; i < 20; i++) {
		/* a_i = a_{i-1} twice over, as an array */
		snprintf(to, sizeof(to), "/metadata/annotations/a%d", i);
		json_array_append_new(
		    ops, json_pack("{s:s,s:s,s:[]}", "op", "add", "path", to, "value"));
		snprintf(from, sizeof(from), "/metadata/annotations/a%d", i - 1);
		for (int k = 0; k < 2; k++)
			json_array_append_new(ops, json_pack("{s:s,s:s,s:s+}", "op", "copy", "from",
			                                     from, "path", to, "/-"));
	}
	r = testenv_call_ct(e, "PATCH", CMS "/bomb", "application/json-patch+json", ops);
	assert_int_equal(r.status, 422);
	assert_string_equal(jx_str(r.body, "message"),
	                    "the server rejected our request due to an error in our request");
	json_decref(r.body);
	json_decref(ops);
	r = testenv_call(e, "GET", CMS "/bomb", NULL);
	assert_int_equal(r.status, 200);
	assert_null(jx_get(r.body, "metadata.annotations"));
	json_decref(r.body);
}

/* JSON nested deeper than the parser goes (jansson's 2048 levels; upstream's
 * decoder stops at 10000) is a 400, not a stack overflow. */
static void test_nesting_beyond_the_parsers_depth(void **state)
{
	struct testenv *e = *state;
	json_t *deep = json_array(), *cm;
	char msg[256];

	for (int i = 0; i < 3000; i++)
		deep = json_pack("[o]", deep);
	cm = json_pack("{s:s,s:s,s:{s:s},s:{s:o}}", "apiVersion", "v1", "kind", "ConfigMap",
	               "metadata", "name", "deep", "binaryData", "k", deep);
	assert_int_equal(status_of(e, "POST", CMS, cm, msg, sizeof(msg)), 400);
	assert_non_null(strstr(msg, "depth"));
	assert_int_equal(status_of(e, "GET", CMS, NULL, NULL, 0), 200);
}

/* Issue 10, item 10: a short continue token ("/re", base64) was compared
 * with "/registry/" past the bytes decoded (ASan: heap-buffer-overflow). */
static void test_continue_tokens_are_read_within_bounds(void **state)
{
	struct testenv *e = *state;
	static const char *const bad[] = {"L3Jl", "AAAA", "%3D%3D%3D%3D", "L3JlZ2lzdHJ5LwBh"};
	char path[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(path, sizeof(path), CMS "?limit=1&continue=%s", bad[i]);
		assert_int_equal(status_of(e, "GET", path, NULL, NULL, 0), 400);
	}
}

static void answer(struct evhttp_request *req, void *arg)
{
	(void)arg;
	httpd_reply(req, 200, "OK", "text/plain", "ok");
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Has the server closed fd (EOF or reset), without blocking? */
static bool closed_by_server(int fd)
{
	char b[4096];
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, 0) <= 0)
		return false;
	ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN);
}

/* The API server's serving certificate and client CA, for a test server. */
static SSL_CTX *serving_ctx(struct testenv *e)
{
	char crt[160], key[160], ca[160];
	return tls_server_ctx(testenv_path(e, "pki/apiserver.crt", crt, sizeof(crt)),
	                      testenv_path(e, "pki/apiserver.key", key, sizeof(key)),
	                      testenv_path(e, "pki/ca.crt", ca, sizeof(ca)));
}

/* A byte every 200 ms keeps libevent's inactivity timeout (here 30 s) from
 * ever firing; the header deadline (here 1 s, from the accept, TLS
 * handshake included) closes the connection all the same. */
static void test_a_trickle_cannot_hold_a_connection(void **state)
{
	struct testenv *e = *state;
	SSL_CTX *ctx = serving_ctx(e);
	struct httpd_opts o = {.bind_address = "127.0.0.1",
	                       .max_body = 1 << 20,
	                       .max_headers = 64 << 10,
	                       .idle_timeout_s = 30,
	                       .header_timeout_s = 1};
	struct httpd *h = httpd_new(e->loop, ctx, &o, answer, NULL);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)httpd_port(h))};
	struct timespec t0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool closed = false;

	assert_non_null(h);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* A TLS record header, a byte at a time: never a whole ClientHello. */
	for (int i = 0; i < 25 && !closed; i++) {
		static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
		(void)!send(fd, hello + (i % 11), 1, MSG_NOSIGNAL);
		for (int k = 0; k < 20 && !closed; k++) {
			testenv_pump(e, 1);
			usleep(10 * 1000);
			closed = closed_by_server(fd);
		}
	}
	assert_true(closed);
	assert_true(seconds_since(&t0) < 2.5);
	assert_true(seconds_since(&t0) > 0.9);
	close(fd);
	httpd_free(h);
	SSL_CTX_free(ctx);
}

struct answered {
	int status, done;
};

static void on_answer(void *arg, int status, json_t *body, const char *err)
{
	struct answered *a = arg;
	(void)body;
	(void)err;
	a->status = status;
	a->done = 1;
}

/* GET / from n clients at once (certificates when cert_pem): how many got
 * 200. The clients stay connected (keep-alive) until freed by the caller. */
static int burst(struct testenv *e, struct rest_client **c, int n, const char *server,
                 const char *cert_pem, const char *key_pem)
{
	struct answered a[32] = {{0}};
	int ok = 0;

	assert_true(n <= 32);
	for (int i = 0; i < n; i++) {
		c[i] = rest_client_new(e->loop, &(struct rest_config){.server = server,
		                                                      .ca_pem = e->admin_kc.ca_data,
		                                                      .cert_pem = cert_pem,
		                                                      .key_pem = key_pem});
		rest_do(c[i], "GET", "/", NULL, on_answer, &a[i]);
	}
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 20000 && !a[i].done; k++)
			testenv_pump(e, 1);
		ok += a[i].status == 200;
	}
	return ok;
}

/* As the API server judges them: a client certificate the CA signed. */
static bool cert_ok(void *arg, SSL *ssl, const char *authorization)
{
	const struct tls_identity *id = ssl ? tls_peer_identity(ssl, clock_now()) : NULL;
	(void)arg;
	(void)authorization;
	return id && id->present && id->verify_err == 0;
}

/* The per-peer cap counts connections that have shown no credentials and
 * turns away only those: four anonymous keep-alive connections fill it and
 * a fifth is closed, while twenty clients with certificates from the same
 * address still get through (refusing every new connection of a full
 * peer kept a thousand hollow kubelets on 127.0.0.1 from bootstrapping:
 * their anonymous requests filled the cap); when an anonymous connection
 * goes, its place is free again. */
static void test_per_peer_cap_counts_connections_without_credentials(void **state)
{
	struct testenv *e = *state;
	char server[64];
	SSL_CTX *ctx = serving_ctx(e);
	struct httpd_opts o = {.bind_address = "127.0.0.1",
	                       .max_body = 1 << 20,
	                       .max_headers = 64 << 10,
	                       .idle_timeout_s = 30,
	                       .credentials_ok = cert_ok,
	                       .max_unauthenticated_per_peer = 4};
	struct httpd *h = httpd_new(e->loop, ctx, &o, answer, NULL);
	struct rest_client *anon[32], *certs[32], *late;

	assert_non_null(h);
	snprintf(server, sizeof(server), "https://127.0.0.1:%d", httpd_port(h));
	assert_int_equal(burst(e, anon, 4, server, NULL, NULL), 4);
	assert_int_equal(burst(e, &late, 1, server, NULL, NULL), 0);
	assert_int_equal(burst(e, certs, 20, server, e->admin_kc.cert_data, e->admin_kc.key_data),
	                 20);
	rest_client_free(late);
	rest_client_free(anon[0]);
	testenv_pump(e, 3); /* the server sees the close */
	assert_int_equal(burst(e, &anon[0], 1, server, NULL, NULL), 1);
	for (int i = 0; i < 20; i++)
		rest_client_free(certs[i]);
	for (int i = 0; i < 4; i++)
		rest_client_free(anon[i]);
	testenv_pump(e, 3);
	httpd_free(h);
	SSL_CTX_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_object_beyond_etcds_limit),
	    cmocka_unit_test(test_body_beyond_the_request_limit),
	    cmocka_unit_test(test_json_patch_copy_bomb),
	    cmocka_unit_test(test_nesting_beyond_the_parsers_depth),
	    cmocka_unit_test(test_a_trickle_cannot_hold_a_connection),
	    cmocka_unit_test(test_per_peer_cap_counts_connections_without_credentials),
	    cmocka_unit_test(test_continue_tokens_are_read_within_bounds),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
