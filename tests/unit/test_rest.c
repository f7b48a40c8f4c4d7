/* The REST client against a real in-process API server on loopback: plain
 * requests, a watch, and credentials swapped under a running client. Runs
 * under ASan too, which makes it the memory check of both ends. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "client/informer.h"
#include "client/rest.h"
#include "net/httpd.h"
#include "net/tls.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/loop.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct world {
	struct testenv env;
};

struct result {
	int status, done;
	json_t *body;
	char err[256];
};

static void on_result(void *arg, int status, json_t *body, const char *err)
{
	struct result *r = arg;
	r->status = status;
	r->body = json_incref(body);
	snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
	r->done = 1;
}

static void spin_until(struct world *w, const int *flag)
{
	int64_t deadline = clock_mono() + 10 * NS_PER_SEC;
	while (!*flag && clock_mono() < deadline) {
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	}
	assert_true(*flag);
}

static void call(struct world *w, const char *method, const char *path, json_t *body,
		 struct result *r)
{
	memset(r, 0, sizeof(*r));
	rest_do(w->env.admin, method, path, body, on_result, r);
	spin_until(w, &r->done);
}

/* Threads of this process named cube-http-*: the serving threads. */
static int serving_threads(void)
{
	char path[64], name[32];
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		FILE *f;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, "cube-http-", 10))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	testenv_start(&w->env, "rest");
	assert_int_equal(serving_threads(), 0);
	*state = w;
	return 0;
}

/* The connections on two serving threads (relay.c), the requests on the
 * test's loop: every test again through the relay transport. */
static void two_threads(struct apiserver_opts *o)
{
	o->serving_threads = 2;
}

static int setup_relay(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	testenv_start_tuned(&w->env, "rest-relay", two_threads);
	assert_int_equal(serving_threads(), 2);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	testenv_stop(&w->env);
	free(w);
	return 0;
}

static void test_requests(void **state)
{
	struct world *w = *state;
	struct result r;
	json_t *cm = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
	                       "metadata", "name", "one", "data", "k", "v");

	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "items")), 4);
	json_decref(r.body);

	call(w, "POST", "/api/v1/namespaces/default/configmaps", cm, &r);
	assert_int_equal(r.status, 201);
	assert_string_equal(jx_str(r.body, "metadata.name"), "one");
	json_decref(r.body);

	call(w, "POST", "/api/v1/namespaces/default/configmaps", cm, &r);
	assert_int_equal(r.status, 409);
	assert_string_equal(jx_str(r.body, "reason"), "AlreadyExists");
	json_decref(r.body);
	json_decref(cm);

	call(w, "GET", "/api/v1/namespaces/default/configmaps/nope", NULL, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(jx_str(r.body, "message"), "configmaps \"nope\" not found");
	json_decref(r.body);
}

struct watched {
	int added, ended, end_status;
	char types[32];
};

static void on_event(void *arg, const char *type, json_t *obj)
{
	struct watched *s = arg;
	size_t n = strlen(s->types);
	if (n < sizeof(s->types) - 1)
		s->types[n] = type[0];
	s->added += !strcmp(type, "ADDED");
}

static void on_end(void *arg, int status, const char *err)
{
	struct watched *s = arg;
	s->ended = 1;
	s->end_status = status;
}

static void test_watch_and_rotation(void **state)
{
	struct world *w = *state;
	struct watched s = {0};
	struct result r;
	json_t *cm = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			       "metadata", "name", "two");
	struct rest_watch *wa = rest_watch(
	    w->env.admin, "/api/v1/namespaces/default/configmaps?watch=true", on_event, on_end, &s);

	assert_non_null(wa);
	call(w, "POST", "/api/v1/namespaces/default/configmaps", cm, &r);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(cm);
	spin_until(w, &s.added);
	assert_string_equal(s.types, "A");

	/* New credentials leave open connections alone; closing them ends the
	 * watch with them... */
	assert_int_equal(
	    rest_set_client_cert(w->env.admin, w->env.admin_kc.cert_data, w->env.admin_kc.key_data),
	    0);
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(w->env.loop), EVLOOP_NONBLOCK);
	assert_int_equal(s.ended, 0);
	rest_close_all(w->env.admin);
	spin_until(w, &s.ended);
	assert_int_equal(s.end_status, 0);
	/* ...and the next request goes out on a new connection. */
	call(w, "GET", "/api/v1/namespaces/default/configmaps/two", NULL, &r);
	assert_int_equal(r.status, 200);
	json_decref(r.body);

	/* Clearing the certificate: the open connection keeps presenting the
	 * one it was opened with (Go's transport does the same)... */
	rest_clear_client_cert(w->env.admin);
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	/* ...and a new connection goes without one: 401, as upstream. */
	rest_close_all(w->env.admin);
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 401);
	json_decref(r.body);

	/* A pair already parsed (a certificate manager's) is shared, not
	 * copied: the client holds references that outlive the caller's. */
	{
		X509 *cert;
		EVP_PKEY *key;

		assert_int_equal(tls_client_cert_parse(w->env.admin_kc.cert_data,
						       w->env.admin_kc.key_data, &cert, &key),
				 0);
		rest_set_client_pair(w->env.admin, cert, key);
		/* A new client refuses a pair that does not belong together, as
		 * it refuses such PEM. */
		{
			EVP_PKEY *other = pki_key_new(PKI_KEY_ECDSA);
			struct rest_config bad = {.server = w->env.server,
						  .ca_pem = w->env.admin_kc.ca_data,
						  .cert = cert,
						  .key = other};

			assert_null(rest_client_new(w->env.loop, &bad));
			assert_non_null(strstr(err_msg(), "bad TLS material"));
			EVP_PKEY_free(other);
		}
		X509_free(cert);
		EVP_PKEY_free(key);
	}
	rest_close_all(w->env.admin);
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
}

static void test_stop_watch_from_owner(void **state)
{
	struct world *w = *state;
	struct watched s = {0};
	struct rest_watch *wa =
	    rest_watch(w->env.admin, "/api/v1/namespaces?watch=true", on_event, on_end, &s);
	spin_until(w, &s.added); /* the synthetic ADDED for existing namespaces */
	rest_watch_stop(wa);
	/* A stopped watch calls nothing back; let the loop close it. */
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(w->env.loop), EVLOOP_NONBLOCK);
	assert_int_equal(s.ended, 0);
}

/* Established connections to the test server, 127.0.0.1:port, counted from
 * the client's end (others on the machine may have that port as theirs). */
static int connections_to(int port)
{
	FILE *f = fopen("/proc/self/net/tcp", "r");
	char line[512];
	int n = 0;
	unsigned raddr, rport, st;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %*d: %*x:%*x %x:%x %x", &raddr, &rport, &st) == 3 &&
		    raddr == 0x0100007f && rport == (unsigned)port && st == 1)
			n++;
	fclose(f);
	return n;
}

struct many {
	struct result r[20];
	struct watched s[3];
	struct rest_watch *wa[3];
};

/* Twenty requests in flight and three watches: what a kubelet has open. */
static void many_at_once(struct world *w, struct rest_client *c, struct many *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < 3; i++)
		m->wa[i] =
		    rest_watch(c, "/api/v1/namespaces?watch=true", on_event, on_end, &m->s[i]);
	for (int i = 0; i < 20; i++)
		rest_do(c, "GET", "/api/v1/namespaces/default", NULL, on_result, &m->r[i]);
	for (int i = 0; i < 20; i++) {
		spin_until(w, &m->r[i].done);
		assert_int_equal(m->r[i].status, 200);
		json_decref(m->r[i].body);
	}
	for (int i = 0; i < 3; i++)
		spin_until(w, &m->s[i].added);
}

/* HTTP/2 by default: every request and watch rides one connection, as a
 * Go client's do (one TCP connection per kubelet). */
static void test_one_connection(void **state)
{
	struct world *w = *state;
	int port = atoi(strrchr(w->env.server, ':') + 1);
	struct many m;

	many_at_once(w, w->env.admin, &m);
	assert_int_equal(connections_to(port), 1);
	for (int i = 0; i < 3; i++)
		rest_watch_stop(m.wa[i]);
}

/* More requests at once than a connection's 100 streams, asked before
 * any connection exists: they wait for the first only up to its limit and
 * the rest go out on a second, as Go's transport dials another; none fail. */
static void test_more_than_a_connections_streams(void **state)
{
	struct world *w = *state;
	int port = atoi(strrchr(w->env.server, ':') + 1);
	struct rest_client *c = rest_client_from_kubeconfig(w->env.loop, &w->env.admin_kc, NULL);
	enum { N = 150 };
	struct result *r = calloc(N, sizeof(*r));

	assert_non_null(c);
	for (int i = 0; i < N; i++)
		rest_do(c, "GET", "/api/v1/namespaces/default", NULL, on_result, &r[i]);
	for (int i = 0; i < N; i++) {
		spin_until(w, &r[i].done);
		assert_int_equal(r[i].status, 200);
		json_decref(r[i].body);
	}
	assert_int_equal(connections_to(port), 2);
	rest_client_free(c);
	free(r);
}

/* Before credentials, a connection may have HTTPD_PREAUTH_MAX_STREAMS
 * requests at a time (a kubelet's first moment: its registration, Lease
 * and pods), each answered 401; beyond them streams are refused. */
static void test_streams_without_credentials(void **state)
{
	struct world *w = *state;
	struct rest_config cfg = {.server = w->env.server, .ca_pem = w->env.admin_kc.ca_data};
	struct rest_client *c = rest_client_new(w->env.loop, &cfg);
	enum { N = HTTPD_PREAUTH_MAX_STREAMS * 3 };
	struct result r[N];
	int unauthorized = 0;

	assert_non_null(c);
	memset(r, 0, sizeof(r));
	/* More at once than a connection without credentials may have: the
	 * server refuses the rest (REFUSED_STREAM), and the client sends them
	 * again, as Go's transport does, until each has its answer. */
	for (int i = 0; i < N; i++)
		rest_do(c, "GET", "/api/v1/namespaces/default", NULL, on_result, &r[i]);
	for (int i = 0; i < N; i++) {
		spin_until(w, &r[i].done);
		unauthorized += r[i].status == 401;
		if (r[i].status != 401)
			fail_msg("call %d: status %d, %s", i, r[i].status, r[i].err);
		json_decref(r[i].body);
	}
	assert_int_equal(unauthorized, N);
	rest_client_free(c);
}

/* Clients that trust the same CA share one TLS context (a thousand
 * kubelets, one parse of ca.crt); each still presents its own
 * certificate (the admin's works, checked by every test here). */
static void test_shared_tls_context(void **state)
{
	struct world *w = *state;
	char *copy = strdup(w->env.admin_kc.ca_data); /* the same text elsewhere */
	SSL_CTX *a = tls_client_ctx_shared(w->env.admin_kc.ca_data);
	SSL_CTX *b = tls_client_ctx_shared(copy);
	SSL_CTX *none = tls_client_ctx_shared(NULL);

	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_ptr_not_equal(a, none);
	assert_null(tls_client_ctx_shared("-----BEGIN CERTIFICATE-----\nnot base64\n"));
	SSL_CTX_free(a);
	SSL_CTX_free(b);
	SSL_CTX_free(none);
	free(copy);
}

/* Servers asking for client certificates from the same CA share one
 * context, apart from the clients' and from the servers that ask for
 * none; an empty CA text is refused, not taken for none. */
static void test_shared_server_context(void **state)
{
	struct world *w = *state;
	SSL_CTX *a = tls_server_ctx_shared(w->env.admin_kc.ca_data);
	SSL_CTX *b = tls_server_ctx_shared(w->env.admin_kc.ca_data);
	SSL_CTX *client = tls_client_ctx_shared(w->env.admin_kc.ca_data);
	SSL_CTX *none = tls_server_ctx_shared(NULL);

	(void)w;
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_ptr_not_equal(a, client);
	assert_non_null(none);
	assert_ptr_not_equal(a, none);
	assert_int_equal(SSL_CTX_get_verify_mode(a), SSL_VERIFY_PEER);
	assert_int_equal(SSL_CTX_get_verify_mode(none), SSL_VERIFY_NONE);
	assert_int_equal(sk_X509_NAME_num(SSL_CTX_get_client_CA_list(a)), 1);
	assert_null(tls_server_ctx_shared(""));
	SSL_CTX_free(a);
	SSL_CTX_free(b);
	SSL_CTX_free(client);
	SSL_CTX_free(none);
}

/* DISABLE_HTTP2, client-go's switch: HTTP/1.1, a connection per watch and
 * a few for requests; everything still works. */
static void test_http1(void **state)
{
	struct world *w = *state;
	int port = atoi(strrchr(w->env.server, ':') + 1);
	struct rest_client *c;
	struct many m;

	setenv("DISABLE_HTTP2", "1", 1);
	c = rest_client_from_kubeconfig(w->env.loop, &w->env.admin_kc, "test");
	unsetenv("DISABLE_HTTP2");
	assert_non_null(c);
	many_at_once(w, c, &m);
	assert_true(connections_to(port) >= 3 + 2);
	for (int i = 0; i < 3; i++)
		rest_watch_stop(m.wa[i]);
	rest_client_free(c);
}

struct stopper {
	struct rest_watch *w;
	int ended;
};

static void stop_on_end(void *arg, int status, const char *err)
{
	struct stopper *s = arg;
	(void)status;
	(void)err;
	s->ended = 1;
	rest_watch_stop(s->w); /* what an owner may do from its own callback */
}

static void ignore_event(void *arg, const char *type, json_t *obj)
{
	(void)arg;
	(void)type;
	(void)obj;
}

/* A watch whose owner stops it from inside on_end, when its connection is
 * closed under it (rest_close_all): ended once, freed once (ASan). */
static void test_stop_watch_from_on_end(void **state)
{
	struct world *w = *state;
	struct stopper s = {0};
	struct result r;

	s.w = rest_watch(w->env.admin, "/api/v1/namespaces?watch=true", ignore_event, stop_on_end,
			 &s);
	call(w, "GET", "/api/v1/namespaces/default", NULL, &r); /* the watch is open by now */
	json_decref(r.body);
	rest_close_all(w->env.admin);
	spin_until(w, &s.ended);
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(w->env.loop), EVLOOP_NONBLOCK);
}

struct freeing {
	struct rest_client *c;
	int done;
};

static void free_client_on_result(void *arg, int status, json_t *body, const char *err)
{
	struct freeing *f = arg;
	(void)status;
	(void)body;
	(void)err;
	rest_client_free(f->c); /* inside its own callback */
	f->done = 1;
}

/* A component may free its client from inside one of its callbacks, with
 * other requests and a watch still on the connection. */
static void test_free_client_from_callback(void **state)
{
	struct world *w = *state;
	struct freeing f = {0};
	struct watched s = {0};

	f.c = rest_client_from_kubeconfig(w->env.loop, &w->env.admin_kc, "test");
	rest_watch(f.c, "/api/v1/namespaces?watch=true", on_event, on_end, &s);
	rest_do(f.c, "GET", "/api/v1/namespaces", NULL, free_client_on_result, &f);
	spin_until(w, &f.done);
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(w->env.loop), EVLOOP_NONBLOCK);
}

struct changes {
	int adds, updates, deletes;
	int with_spec; /* objects told of that have a spec */
	char old_x[16]; /* metadata.labels.x of the last update's old object */
};

static void inf_add(void *arg, json_t *obj)
{
	struct changes *ch = arg;
	ch->adds++;
	ch->with_spec += !!json_object_get(obj, "spec");
}

static void inf_update(void *arg, json_t *old, json_t *obj)
{
	struct changes *ch = arg;
	ch->updates++;
	ch->with_spec += !!json_object_get(old, "spec") + !!json_object_get(obj, "spec");
	snprintf(ch->old_x, sizeof(ch->old_x), "%s", jx_str(old, "metadata.labels.x") ?: "");
}

static void inf_delete(void *arg, json_t *obj)
{
	struct changes *ch = arg;
	ch->deletes++;
	ch->with_spec += !!json_object_get(obj, "spec");
}

/* A transform: a Namespace without its spec (finalizers: ["kubernetes"]). */
static json_t *without_spec(const json_t *obj)
{
	json_t *view = json_deep_copy(obj);
	json_object_del(view, "spec");
	return view;
}

enum kept { TREES, TEXT, VIEWS };

/* A field of the informer's object under key (read as a copy: either store). */
static const char *stored_str(struct informer *inf, const char *key, const char *path,
			      char *buf, size_t n)
{
	json_t *obj = informer_read(inf, key);
	if (!obj)
		return NULL;
	snprintf(buf, n, "%s", jx_str(obj, path) ?: "");
	json_decref(obj);
	return buf;
}

/* List, add, change, delete, seen by the handlers and in the store. TEXT:
 * the store keeps its objects as text (informer_keep_text); VIEWS: as a
 * transform makes them, from the list and from the watch alike. */
static void informer_round(struct world *w, enum kept store)
{
	bool text = store == TEXT;
	struct changes ch = {0};
	struct informer_handlers h = {inf_add, inf_update, inf_delete, &ch};
	struct informer *inf =
	    informer_new(w->env.loop, w->env.admin, "/api/v1/namespaces", NULL, &h);
	json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
			       "metadata", "name", "team-a");
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "x", "y");
	struct result r;
	char buf[64];
	int want;

	if (text)
		informer_keep_text(inf);
	if (store == VIEWS)
		informer_set_transform(inf, without_spec);
	informer_start(inf);
	want = 4;
	while (ch.adds < want)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	assert_true(informer_synced(inf));
	assert_string_equal(stored_str(inf, "kube-system", "metadata.name", buf, sizeof(buf)),
			    "kube-system");
	{
		/* A tree store lends its one tree; a text store parses anew. */
		json_t *a = informer_read(inf, "kube-system"), *b = informer_read(inf, "kube-system");
		assert_true(text ? a != b : a == b);
		json_decref(a);
		json_decref(b);
	}
	if (!text)
		assert_non_null(informer_get(inf, "kube-system"));
	call(w, "POST", "/api/v1/namespaces", ns, &r);
	json_decref(r.body);
	while (ch.adds < 5)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	memset(&r, 0, sizeof(r));
	rest_do_ct(w->env.admin, "PATCH", "/api/v1/namespaces/team-a",
		   "application/merge-patch+json", patch, on_result, &r);
	spin_until(w, &r.done);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	while (ch.updates < 1)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	assert_string_equal(ch.old_x, "");
	assert_string_equal(stored_str(inf, "team-a", "metadata.labels.x", buf, sizeof(buf)),
			    "y");
	/* Deleting marks it Terminating (an update); the namespace controller's
	 * finalize — done here by hand — removes it (a delete). */
	call(w, "DELETE", "/api/v1/namespaces/team-a", NULL, &r);
	json_decref(r.body);
	while (ch.updates < 2)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	assert_string_equal(ch.old_x, "y"); /* the old object, from the store */
	assert_string_equal(stored_str(inf, "team-a", "status.phase", buf, sizeof(buf)),
			    "Terminating");
	{
		json_t *held = informer_read(inf, "team-a"), *fin = json_deep_copy(held);
		json_decref(held);
		jx_set(fin, "spec.finalizers", json_array());
		call(w, "PUT", "/api/v1/namespaces/team-a/finalize", fin, &r);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
		json_decref(fin);
	}
	while (ch.deletes < 1)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	assert_null(informer_read(inf, "team-a"));
	/* Every object seen had its spec (the namespace controller's finalizer),
	 * unless the transform took it. */
	if (store == VIEWS) {
		assert_int_equal(ch.with_spec, 0);
		assert_null(json_object_get(informer_get(inf, "kube-system"), "spec"));
	} else {
		assert_int_equal(ch.with_spec, ch.adds + 2 * ch.updates + ch.deletes);
	}
	informer_free(inf);
	json_decref(ns);
	json_decref(patch);
}

static void test_informer(void **state)
{
	informer_round(*state, TREES);
}

static void test_informer_keeping_text(void **state)
{
	informer_round(*state, TEXT);
}

static void test_informer_transform(void **state)
{
	informer_round(*state, VIEWS);
}

static int unauthorized_seen;
static void on_unauthorized(void *arg)
{
	(void)arg;
	unauthorized_seen++;
}

/* A derived client holds its requests until it has a token, sends them in
 * order when the hold is lifted (a cancelled one is dropped), and reports
 * a 401 on a request that carried a token. */
/* A service account "name" in default and a token for it (the caller's:
 * json_decref the result's body; the token is at status.token). */
static void sa_token(struct world *w, const char *name, struct result *tok)
{
	json_t *token_req = json_pack("{s:s,s:s,s:{s:i}}", "apiVersion", "authentication.k8s.io/v1",
				      "kind", "TokenRequest", "spec", "expirationSeconds", 600);
	json_t *sa = json_pack("{s:{s:s}}", "metadata", "name", name);
	struct result made;
	char path[128];

	call(w, "POST", "/api/v1/namespaces/default/serviceaccounts", sa, &made);
	json_decref(sa);
	assert_int_equal(made.status, 201);
	json_decref(made.body);
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/serviceaccounts/%s/token", name);
	call(w, "POST", path, token_req, tok);
	assert_int_equal(tok->status, 201);
	json_decref(token_req);
}

static void test_hold_and_token(void **state)
{
	struct world *w = *state;
	struct rest_client *c = rest_client_derive(w->env.admin, "test/held");
	struct result a, b, cancelled, bad, tok;
	json_t *review = json_pack("{s:s,s:s}", "apiVersion", "authentication.k8s.io/v1", "kind",
				   "SelfSubjectReview");

	unauthorized_seen = 0; /* the suite runs twice */
	sa_token(w, "held", &tok);

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&cancelled, 0, sizeof(cancelled));
	rest_hold(c, true);
	rest_do(c, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review, on_result,
		&a);
	json_decref(review); /* the request has its own copy of the body */
	rest_cancel(rest_do(c, "GET", "/api/v1/namespaces", NULL, on_result, &cancelled));
	rest_do(c, "GET", "/api/v1/namespaces/default/pods", NULL, on_result, &b);
	testenv_pump(&w->env, 5);
	assert_false(a.done || b.done);
	rest_set_token(c, jx_str(tok.body, "status.token"));
	rest_hold(c, false);
	spin_until(w, &a.done);
	spin_until(w, &b.done);
	assert_int_equal(a.status, 201);
	assert_string_equal(jx_str(a.body, "status.userInfo.username"),
			    "system:serviceaccount:default:held");
	assert_int_equal(b.status, 403); /* no binding gives it pods */
	assert_false(cancelled.done);
	assert_int_equal(unauthorized_seen, 0);

	rest_on_unauthorized(c, on_unauthorized, NULL);
	rest_set_token(c, "not.a-valid.token");
	memset(&bad, 0, sizeof(bad));
	rest_do(c, "GET", "/api/v1/namespaces/default/pods", NULL, on_result, &bad);
	spin_until(w, &bad.done);
	assert_int_equal(bad.status, 401);
	assert_int_equal(unauthorized_seen, 1);
	json_decref(a.body);
	json_decref(b.body);
	json_decref(bad.body);
	json_decref(tok.body);
	rest_client_free(c);
}

/* A server stopped as soon as it has started: its serving threads may not
 * have reached their loops yet, and must stop all the same (libevent
 * forgets a loop break that comes before the loop). */
static void test_stop_at_once(void **state)
{
	struct world *w = *state;
	char crt[128], key[128], ca[128], data[128];
	struct apiserver_opts o;

	apiserver_opts_default(&o);
	o.bind_address = "127.0.0.1";
	o.secure_port = 0;
	o.serving_threads = 2;
	o.tls_cert_file = testenv_path(&w->env, "pki/apiserver.crt", crt, sizeof(crt));
	o.tls_private_key_file = testenv_path(&w->env, "pki/apiserver.key", key, sizeof(key));
	o.client_ca_file = testenv_path(&w->env, "pki/ca.crt", ca, sizeof(ca));
	o.data_dir = testenv_path(&w->env, "data-at-once", data, sizeof(data));
	for (int i = 0; i < 50; i++) {
		struct apiserver *s = apiserver_new(w->env.loop, &o);
		assert_non_null(s);
		apiserver_free(s);
	}
}

/* A connection that shows a bearer token is not held to the limits of one
 * without credentials: its first request may have a large body (served
 * on the loop, the token is judged as the connection is; relayed, the
 * serving thread cannot judge it and must not refuse it either). */
static void test_token_connection_first_body(void **state)
{
	struct world *w = *state;
	struct rest_client *c = rest_client_derive(w->env.admin, "test/token-body");
	size_t big = 100 << 10;
	char *data = malloc(big + 1);
	json_t *cm;
	struct result tok, r;

	sa_token(w, "bulky", &tok);
	memset(data, 'x', big);
	data[big] = '\0';
	cm = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
		       "metadata", "name", "bulky", "data", "k", data);
	free(data);
	rest_set_token(c, jx_str(tok.body, "status.token"));
	memset(&r, 0, sizeof(r));
	rest_do(c, "POST", "/api/v1/namespaces/default/configmaps", cm, on_result, &r);
	json_decref(cm);
	spin_until(w, &r.done);
	assert_int_equal(r.status, 403); /* authenticated, and no binding: not 413 */
	json_decref(r.body);
	json_decref(tok.body);
	rest_client_free(c);
}

/* A partition: every request and watch fails at once as an unroutable
 * dial does; healed, the same client works again. */
static void test_unreachable(void **state)
{
	struct world *w = *state;
	struct result r;
	struct watched s = {0};
	char want[128];

	snprintf(want, sizeof(want), "dial tcp 127.0.0.1:%s: connect: network is unreachable",
		 strrchr(w->env.server, ':') + 1);
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	rest_set_unreachable(w->env.admin, true);
	assert_true(rest_unreachable(w->env.admin));
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, want);
	rest_watch(w->env.admin, "/api/v1/namespaces?watch=true", on_event, on_end, &s);
	spin_until(w, &s.ended);
	assert_int_equal(s.end_status, 0);
	rest_set_unreachable(w->env.admin, false);
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
}

/* When the server's certificate does not verify, the error is Go's:
 * what the runbook greps kubelet logs for. */
static void test_server_certificate_errors(void **state)
{
	struct world *w = *state;
	struct result r;
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	X509 *ca = pki_ca_new(key, "foreign-ca", NS_PER_DAY);
	char *pem = pki_cert_pem(ca);
	struct rest_config cfg = {.server = w->env.server, .ca_pem = pem};
	struct rest_client *c = rest_client_new(w->env.loop, &cfg);

	memset(&r, 0, sizeof(r));
	rest_do(c, "GET", "/version", NULL, on_result, &r);
	spin_until(w, &r.done);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "tls: failed to verify certificate: x509: certificate signed by "
				   "unknown authority");
	rest_client_free(c);

	/* 400 days on, the server's one-year certificate has expired. */
	clock_set_offset(400 * NS_PER_DAY);
	call(w, "GET", "/version", NULL, &r);
	clock_set_offset(0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.err, "tls: failed to verify certificate: x509: certificate has "
				      "expired or is not yet valid: current time "));
	assert_non_null(strstr(r.err, " is after "));
	free(pem);
	X509_free(ca);
	EVP_PKEY_free(key);
}

#define TESTS(X) \
	X(test_requests) \
	X(test_one_connection) \
	X(test_more_than_a_connections_streams) \
	X(test_shared_tls_context) \
	X(test_shared_server_context) \
	X(test_streams_without_credentials) \
	X(test_http1) \
	X(test_stop_watch_from_on_end) \
	X(test_free_client_from_callback) \
	X(test_watch_and_rotation) \
	X(test_stop_watch_from_owner) \
	X(test_informer) \
	X(test_informer_keeping_text) \
	X(test_informer_transform) \
	X(test_hold_and_token) \
	X(test_token_connection_first_body) \
	X(test_stop_at_once) \
	X(test_unreachable) \
	X(test_server_certificate_errors)

int main(void)
{
#define ON_LOOP(t) cmocka_unit_test_setup_teardown(t, setup, teardown),
#define RELAYED(t) cmocka_unit_test_setup_teardown(t, setup_relay, teardown),
	const struct CMUnitTest on_loop[] = {TESTS(ON_LOOP)};
	const struct CMUnitTest relayed[] = {TESTS(RELAYED)};
	int failed = cmocka_run_group_tests_name("served on the loop", on_loop, NULL, NULL);

	return failed + cmocka_run_group_tests_name("served by two threads", relayed, NULL, NULL);
}
