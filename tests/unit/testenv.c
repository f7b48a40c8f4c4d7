#include "testenv.h"

#include "controllers/controllers.h"
#include "pki/cluster.h"
#include "pki/pki.h"
#include "storage/store.h"

#include "base/alloc.h"
#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *testenv_path(const struct testenv *e, const char *rel, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", e->dir, rel);
	return buf;
}

void testenv_quiet_logs(void)
{
	if (getenv("CUBE_TEST_V"))
		log_set_verbosity(atoi(getenv("CUBE_TEST_V")));
	else
		log_set_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
}

static void start(struct testenv *e, const char *tag, bool listen, bool remote,
                  void (*tune)(struct apiserver_opts *o));

void testenv_start(struct testenv *e, const char *tag)
{
	start(e, tag, true, false, NULL);
}

void testenv_start_tuned(struct testenv *e, const char *tag,
                         void (*tune)(struct apiserver_opts *o))
{
	start(e, tag, true, false, tune);
}

void testenv_start_inproc(struct testenv *e, const char *tag)
{
	start(e, tag, false, false, NULL);
}

void testenv_start_inproc_remote(struct testenv *e, const char *tag)
{
	start(e, tag, false, true, NULL);
}

void testenv_start_inproc_tuned(struct testenv *e, const char *tag,
                                void (*tune)(struct apiserver_opts *o))
{
	start(e, tag, false, false, tune);
}

static void start(struct testenv *e, const char *tag, bool listen, bool remote,
                  void (*tune)(struct apiserver_opts *o))
{
	struct cluster_pki_opts po = {.cluster_name = "kubernetes",
	                              .server = "https://127.0.0.1:6443",
	                              .key_type = PKI_KEY_ECDSA,
	                              .ca_validity_ns = CLUSTER_CA_VALIDITY,
	                              .validity_ns = CLUSTER_CERT_VALIDITY};
	struct apiserver_opts ao;
	char crt[128], key[128], ca[128], data[128], tok[128], conf[128], sak[128], sap[128];

	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "/tmp/cube-%s-XXXXXX", tag);
	assert_non_null(mkdtemp(e->dir));
	po.dir = e->dir;
	assert_int_equal(cluster_pki_init(&po), 0);
	e->loop = loop_new();
	apiserver_opts_default(&ao);
	ao.bind_address = "127.0.0.1";
	ao.secure_port = listen ? 0 : -1;
	ao.tls_cert_file = testenv_path(e, "pki/apiserver.crt", crt, sizeof(crt));
	ao.tls_private_key_file = testenv_path(e, "pki/apiserver.key", key, sizeof(key));
	ao.client_ca_file = testenv_path(e, "pki/ca.crt", ca, sizeof(ca));
	ao.data_dir = testenv_path(e, "data", data, sizeof(data));
	ao.bootstrap_token_file = testenv_path(e, "pki/bootstrap-token", tok, sizeof(tok));
	ao.service_account_signing_key_file = testenv_path(e, "pki/sa.key", sak, sizeof(sak));
	ao.service_account_key_file = testenv_path(e, "pki/sa.pub", sap, sizeof(sap));
	if (remote) {
		e->remote = testenv_store_new(e->loop);
		ao.store = testenv_store_base(e->remote);
	}
	if (tune)
		tune(&ao);
	e->api = apiserver_new(e->loop, &ao);
	assert_non_null(e->api);
	/* The seeds (the default namespace, the RBAC policy) are durable, and
	 * so shown to readers, before a test reads: a loaded machine's disk
	 * may take longer than a first request (test_rest once read no
	 * "default" namespace). */
	testenv_pump(e, 1);
	if (!listen)
		return;
	snprintf(e->server, sizeof(e->server), "https://127.0.0.1:%d", apiserver_port(e->api));
	assert_int_equal(
	    kubeconfig_load(testenv_path(e, "admin.conf", conf, sizeof(conf)), &e->admin_kc), 0);
	free(e->admin_kc.server);
	e->admin_kc.server = strdup(e->server);
	e->admin = rest_client_from_kubeconfig(e->loop, &e->admin_kc, "cube-unit-test");
	assert_non_null(e->admin);
}

void testenv_stop(struct testenv *e)
{
	char cmd[128];
	while (e->nkept)
		free(e->kept[--e->nkept]);
	free(e->kept);
	if (e->admin)
		rest_client_free(e->admin);
	apiserver_free(e->api);
	loop_free(e->loop);
	kubeconfig_free(&e->admin_kc);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
	/* CUBE_TEST_KEEP=1 leaves the directory (logs, certificates) to look at. */
	if (!getenv("CUBE_TEST_KEEP"))
		assert_int_equal(system(cmd), 0);
}

int testenv_teardown(void **state)
{
	testenv_stop(*state);
	free(*state);
	return 0;
}

/* ---- in-process requests ---------------------------------------------------- */

static int64_t real_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool testenv_wait(struct testenv *e, struct apiserver_exchange *x)
{
	struct event_base *base = loop_base(e->loop);
	int64_t deadline = real_ms() + 10000;

	/* Each round runs what is ready, then blocks until something is (a
	 * commit from the store's thread wakes the loop) or 5 ms pass. */
	while (!apiserver_exchange_done(x) && real_ms() < deadline) {
		struct timeval tv = {0, 5000};
		loop_poll(e->loop);
		if (apiserver_exchange_done(x))
			break;
		event_base_loopexit(base, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	return apiserver_exchange_done(x);
}

struct testenv_reply testenv_do(struct testenv *e, const struct apiserver_request *rq)
{
	struct testenv_reply r = {0};
	size_t n;

	r.x = apiserver_exchange(e->api, rq);
	if (!testenv_wait(e, r.x))
		fail_msg("%s %s: no answer within 10 s", rq->method, rq->target);
	r.status = apiserver_exchange_status(r.x);
	r.text = strdup(apiserver_exchange_body(r.x, &n));
	r.body = json_loadb(r.text, n, JSON_DECODE_ANY, NULL);
	return r;
}

/* The request as the cluster admin; headers holds its Content-Type. */
static struct apiserver_request as_admin(const char *method, const char *target,
                                         const char *content_type, const char *body,
                                         const char *headers[3])
{
	static const char *const masters[] = {"system:masters", NULL};

	headers[0] = "Content-Type";
	headers[1] = content_type ? content_type : "application/json";
	headers[2] = NULL;
	return (struct apiserver_request){.method = method,
	                                  .target = target,
	                                  .headers = body ? headers : NULL,
	                                  .body = body,
	                                  .user = "kubernetes-admin",
	                                  .groups = masters};
}

struct testenv_reply testenv_as_admin(struct testenv *e, const char *method, const char *target,
                                      const char *content_type, const char *body)
{
	const char *headers[3];
	struct apiserver_request rq = as_admin(method, target, content_type, body, headers);
	return testenv_do(e, &rq);
}

struct apiserver_exchange *testenv_exchange_as_admin(struct testenv *e, const char *method,
                                                     const char *target, const char *content_type,
                                                     const char *body)
{
	const char *headers[3];
	struct apiserver_request rq = as_admin(method, target, content_type, body, headers);
	return apiserver_exchange(e->api, &rq);
}

void testenv_reply_free(struct testenv_reply *r)
{
	apiserver_exchange_free(r->x);
	free(r->text);
	json_decref(r->body);
	memset(r, 0, sizeof(*r));
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(bool *)arg = true;
}

/* The wait is an event of our own, removed after each round, so no stale
 * wake-up can end a later round early. */
/* Writes the test holds (e->remote) are on their way only when it says. */
static size_t held(const struct testenv *e)
{
	return e->remote ? testenv_store_held(e->remote) : 0;
}

void testenv_work_wait(struct loop *l)
{
	for (int i = 0; i < 10000 && loop_work_pending(l); i++) {
		usleep(1000);
		assert_int_equal(loop_poll(l), 0);
	}
	assert_int_equal(loop_work_pending(l), 0);
}

void testenv_pump(struct testenv *e, int quiet)
{
	struct event_base *base = loop_base(e->loop);
	bool idle = false;
	struct event *tick = evtimer_new(base, on_idle, &idle);

	for (int rounds = 0, i = 0; rounds < quiet && i < 5000; i++) {
		struct timeval tv = {0, 2000};
		idle = false;
		loop_poll(e->loop);
		evtimer_add(tick, &tv);
		event_base_loop(base, EVLOOP_ONCE);
		evtimer_del(tick);
		/* A commit on the store's thread, or a kubelet's files on a
		 * worker, is work the loop will hear of. */
		rounds = idle && apiserver_writes_inflight(e->api) <= held(e) &&
				 loop_work_pending(e->loop) == 0
			     ? rounds + 1
			     : 0;
	}
	event_free(tick);
}

static void on_result(void *arg, int status, json_t *body, const char *err)
{
	struct testenv_result *r = arg;
	(void)err;
	r->status = status;
	r->body = json_incref(body);
	r->done = 1;
}

struct testenv_result testenv_call_ct(struct testenv *e, const char *method, const char *path,
                                      const char *content_type, json_t *body)
{
	struct testenv_result r = {0};

	if (!e->admin) { /* in process */
		char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		struct testenv_reply x = testenv_as_admin(e, method, path, content_type, text);
		r.status = x.status;
		r.body = json_incref(x.body);
		r.done = 1;
		free(text);
		testenv_reply_free(&x);
		return r;
	}
	rest_do_ct(e->admin, method, path, content_type, body, on_result, &r);
	for (int i = 0; i < 20000 && !r.done; i++)
		testenv_pump(e, 1);
	assert_true(r.done);
	return r;
}

struct testenv_result testenv_call(struct testenv *e, const char *method, const char *path,
                                   json_t *body)
{
	return testenv_call_ct(e, method, path, NULL, body);
}

/* ---- what the in-process tests share ---------------------------------------- */

void *testenv_keep(struct testenv *e, void *p)
{
	e->kept = xrealloc(e->kept, (e->nkept + 1) * sizeof(*e->kept));
	return e->kept[e->nkept++] = p;
}

const char *testenv_json(const char *fmt, ...)
{
	static char bufs[8][16384];
	static unsigned next;
	char *b = bufs[next++ % 8];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(bufs[0]), fmt, ap);
	va_end(ap);
	assert_true(n < (int)sizeof(bufs[0]));
	for (char *p = b; *p; p++)
		if (*p == '\'')
			*p = '"';
	return b;
}

char *testenv_status_mismatch(const struct testenv_reply *r, int code, const char *reason,
                              const char *message)
{
	const json_t *b = r->body;
	char *why = NULL;

	if (r->status != code || !b || jx_int(b, "code", 0) != code ||
	    strcmp(jx_str(b, "kind") ?: "", "Status") ||
	    strcmp(jx_str(b, "apiVersion") ?: "", "v1") ||
	    strcmp(jx_str(b, "status") ?: "", "Failure") ||
	    (reason ? strcmp(jx_str(b, "reason") ?: "", reason) != 0
	            : jx_get(b, "reason") != NULL) ||
	    (message && strcmp(jx_str(b, "message") ?: "", message)))
		assert_true(asprintf(&why, "expected %d %s%s%s%s, got %d: %s", code,
		                     reason ? reason : "(no reason)", message ? " \"" : "",
		                     message ? message : "", message ? "\"" : "", r->status,
		                     r->text ? r->text : "") > 0);
	return why;
}

static void fail_at(char *why, const char *file, int line)
{
	print_error("ERROR: %s\n", why);
	free(why);
	_fail(file, line);
}

void testenv_expect_status_at(struct testenv_reply r, int code, const char *reason,
                              const char *message, const char *file, int line)
{
	char *why = testenv_status_mismatch(&r, code, reason, message);

	testenv_reply_free(&r);
	if (why)
		fail_at(why, file, line);
}

void testenv_assert_status_at(const struct testenv_reply *r, int code, const char *reason,
                              const char *message, const char *file, int line)
{
	char *why = testenv_status_mismatch(r, code, reason, message);

	if (why)
		fail_at(why, file, line);
}

void testenv_expect_code_at(struct testenv_reply r, int code, const char *file, int line)
{
	int status = r.status;

	if (status != code)
		print_error("answer: %s\n", r.text);
	testenv_reply_free(&r);
	_assert_int_equal((LargestIntegralType)status, (LargestIntegralType)code, file, line);
}

char *testenv_csr_request(const char *cn, const char *const *orgs)
{
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	X509_REQ *req = pki_csr_new(key, cn, orgs, NULL, NULL, 0);
	char *pem = pki_csr_pem(req), *b64 = b64_encode(pem, strlen(pem));

	free(pem);
	X509_REQ_free(req);
	EVP_PKEY_free(key);
	return b64;
}

struct controller_manager *testenv_cm_start(struct testenv *e, const char *tag,
                                            struct kubeconfig *kc, const char *controllers,
                                            bool virtual_clock,
                                            void (*tune)(struct controller_manager_opts *o))
{
	struct controller_manager_opts o;
	struct controller_manager *cm;
	char path[160];

	if (virtual_clock)
		clock_use_virtual(clock_now());
	testenv_quiet_logs();
	testenv_start(e, tag);
	snprintf(path, sizeof(path), "%s/controller-manager.conf", e->dir);
	assert_int_equal(kubeconfig_load(path, kc), 0);
	controller_manager_opts_default(&o);
	o.serving.port = 0; /* tests run side by side: no fixed port */
	o.kc = kc;
	o.server = e->server;
	o.controllers = controllers;
	o.use_service_account_credentials = true; /* as kubeadm runs it */
	if (tune)
		tune(&o);
	cm = controller_manager_new(e->loop, &o);
	assert_non_null(cm);
	return cm;
}

void testenv_cm_stop(struct testenv *e, struct kubeconfig *kc, struct controller_manager *cm)
{
	controller_manager_free(cm);
	kubeconfig_free(kc);
	testenv_stop(e);
	clock_use_real();
}

/* ---- a remote store in memory ------------------------------------------------ */

struct ts_value {
	char *value;
	size_t len;
	int64_t mod;
};

struct ts_write {
	struct testenv_store *ts;
	struct store_op op;
	store_done_fn done;
	void *arg;
};

struct testenv_store {
	struct store base; /* first: the store interface's pointer is ours */
	struct loop *loop;
	struct hmap kv; /* key → struct ts_value* */
	int64_t rev;
	struct store_watcher watcher;
	uint64_t writes;
	size_t pass;         /* writes that may still land before holding */
	struct ts_write **held;
	size_t nheld;
	size_t queued; /* writes deferred to the loop's next turn, not landed */
};

static void ts_value_free(void *p)
{
	struct ts_value *v = p;
	free(v->value);
	free(v);
}

static int ts_cmp_keys(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ts_load(struct store *s, store_each_fn each, void *arg, int64_t *rev)
{
	struct testenv_store *ts = (struct testenv_store *)s;
	const char **keys = calloc(hmap_len(&ts->kv) + 1, sizeof(*keys));
	size_t n = 0;
	const char *k;
	void *v;

	assert_non_null(keys);
	for (size_t i = 0; hmap_next(&ts->kv, &i, &k, &v);)
		keys[n++] = k;
	qsort(keys, n, sizeof(*keys), ts_cmp_keys);
	for (size_t i = 0; i < n; i++) {
		struct ts_value *val = hmap_get(&ts->kv, keys[i]);
		each(arg, keys[i], val->value, val->len, val->mod);
	}
	free(keys);
	*rev = ts->rev;
	return 0;
}

/* etcd's txn: compare the key's mod revision, then put or delete. */
static void ts_land(struct ts_write *w)
{
	struct testenv_store *ts = w->ts;
	struct ts_value *cur = hmap_get(&ts->kv, w->op.key);
	int64_t mod = cur ? cur->mod : 0;
	struct store_event ev = {.type = w->op.type, .key = w->op.key};

	if (mod != w->op.expect || (w->op.type == STORE_DELETE && !cur)) {
		err_set(ERR_CONFLICT, "the key changed under the write");
		w->done(w->arg, ERR_CONFLICT, ts->rev);
	} else {
		ev.rev = ++ts->rev;
		if (w->op.type == STORE_PUT) {
			struct ts_value *v = calloc(1, sizeof(*v));
			assert_non_null(v);
			*v = (struct ts_value){w->op.value, w->op.len, ts->rev};
			w->op.value = NULL;
			if ((cur = hmap_put(&ts->kv, w->op.key, v)))
				ts_value_free(cur);
			ev.value = v->value;
			ev.len = v->len;
		} else {
			ts_value_free(hmap_del(&ts->kv, w->op.key));
		}
		ts->writes++;
		if (ts->watcher.event)
			ts->watcher.event(ts->watcher.arg, &ev);
		w->done(w->arg, 0, ev.rev);
	}
	free(w->op.key);
	free(w->op.value);
	free(w);
}

static void ts_land_deferred(void *arg)
{
	struct ts_write *w = arg;
	w->ts->queued--;
	ts_land(w);
}

static void ts_write(struct store *s, struct store_op *ops, size_t n, store_done_fn done,
                     void *arg)
{
	struct testenv_store *ts = (struct testenv_store *)s;
	struct ts_write *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	assert_int_equal(n, 1); /* the cache writes one key at a time to a remote store */
	*w = (struct ts_write){ts, ops[0], done, arg};
	free(ops);
	if (ts->pass == 0) {
		ts->held = realloc(ts->held, (ts->nheld + 1) * sizeof(*ts->held));
		assert_non_null(ts->held);
		ts->held[ts->nheld++] = w;
		return;
	}
	if (ts->pass != SIZE_MAX)
		ts->pass--;
	ts->queued++;
	loop_defer(ts->loop, ts_land_deferred, w);
}

static void ts_stats(struct store *s, uint64_t *writes, uint64_t *commits)
{
	struct testenv_store *ts = (struct testenv_store *)s;
	*writes = *commits = ts->writes;
}

static void ts_watch(struct store *s, int64_t after, const struct store_watcher *w)
{
	struct testenv_store *ts = (struct testenv_store *)s;
	/* No history is kept: the cache watches from what it loaded. */
	assert_int_equal(after, ts->rev);
	ts->watcher = *w;
}

static void ts_current_rev(struct store *s, void (*cb)(void *arg, int err, int64_t rev), void *arg)
{
	struct testenv_store *ts = (struct testenv_store *)s;
	cb(arg, 0, ts->rev);
}

static void ts_close(struct store *s)
{
	struct testenv_store *ts = (struct testenv_store *)s;

	/* As etcd's close: what was sent lands, and is answered — writes
	 * the answers send too (called outside the loop: it runs here). */
	while (ts->queued || ts->nheld) {
		if (ts->nheld)
			testenv_store_land(ts, 0);
		else
			loop_poll(ts->loop);
	}
	free(ts->held);
	hmap_free_values(&ts->kv, ts_value_free);
	free(ts);
}

static const struct store_ops ts_ops = {
    .load = ts_load,
    .write = ts_write,
    .stats = ts_stats,
    .close = ts_close,
    .watch = ts_watch,
    .current_rev = ts_current_rev,
};

struct testenv_store *testenv_store_new(struct loop *loop)
{
	struct testenv_store *ts = calloc(1, sizeof(*ts));
	assert_non_null(ts);
	ts->base.ops = &ts_ops;
	ts->loop = loop;
	ts->pass = SIZE_MAX;
	return ts;
}

struct store *testenv_store_base(struct testenv_store *ts)
{
	return &ts->base;
}

void testenv_store_hold(struct testenv_store *ts, size_t pass)
{
	ts->pass = pass;
}

size_t testenv_store_held(const struct testenv_store *ts)
{
	return ts->nheld;
}

const char *testenv_store_held_key(const struct testenv_store *ts, size_t i, bool *is_delete)
{
	assert_true(i < ts->nheld);
	if (is_delete)
		*is_delete = ts->held[i]->op.type == STORE_DELETE;
	return ts->held[i]->op.key;
}

void testenv_store_land(struct testenv_store *ts, size_t i)
{
	struct ts_write *w;

	assert_true(i < ts->nheld);
	w = ts->held[i];
	memmove(&ts->held[i], &ts->held[i + 1], (ts->nheld - i - 1) * sizeof(*ts->held));
	ts->nheld--;
	ts_land(w);
}
