/*
 * The storage interface's one suite, run on both backends: the cache over
 * SQLite, and the cache over a real etcd (Debian's etcd-server, started on
 * free loopback ports). Then what only a shared store does: two caches
 * (two API servers) on one etcd, a write through one seen by the other in
 * revision order, a compare-and-swap lost and built again, a member killed
 * under a writer, and the compactor on the virtual clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "storage/cache.h"
#include "storage/store.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/loop.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- a real etcd ------------------------------------------------------------ */

#define MAX_MEMBERS 3

struct etcd_cluster {
	char dir[64];
	int n;
	int client[MAX_MEMBERS], peer[MAX_MEMBERS];
	pid_t pid[MAX_MEMBERS];
	char servers[256];
};

/* A free port, its socket kept open in *fd so that the next one differs. */
static int free_port(int *fd)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);

	*fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(*fd >= 0);
	assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
	return ntohs(a.sin_port);
}

static void member_start(struct etcd_cluster *e, int i)
{
	char name[16], data[96], curl[64], purl[64], cluster[512] = "", log[96];
	pid_t pid;

	snprintf(name, sizeof(name), "m%d", i);
	snprintf(data, sizeof(data), "%s/%s", e->dir, name);
	snprintf(log, sizeof(log), "%s/%s.log", e->dir, name);
	snprintf(curl, sizeof(curl), "http://127.0.0.1:%d", e->client[i]);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", e->peer[i]);
	for (int j = 0; j < e->n; j++) {
		size_t l = strlen(cluster);
		snprintf(cluster + l, sizeof(cluster) - l, "%sm%d=http://127.0.0.1:%d",
		         j ? "," : "", j, e->peer[j]);
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		FILE *f = freopen(log, "a", stdout);
		(void)f;
		dup2(1, 2);
		execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls",
		       curl, "--advertise-client-urls", curl, "--listen-peer-urls", purl,
		       "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
		       "--initial-cluster-state", "new", "--log-level", "warn", (char *)NULL);
		_exit(127);
	}
	e->pid[i] = pid;
}

static void etcd_start(struct etcd_cluster *e, int members)
{
	memset(e, 0, sizeof(*e));
	e->n = members;
	snprintf(e->dir, sizeof(e->dir), "/tmp/cube-etcd-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	/* Every port chosen while all are bound: an etcd given one port twice never starts. */
	int held[2 * MAX_MEMBERS];
	for (int i = 0; i < members; i++) {
		size_t l = strlen(e->servers);
		e->client[i] = free_port(&held[2 * i]);
		e->peer[i] = free_port(&held[2 * i + 1]);
		snprintf(e->servers + l, sizeof(e->servers) - l, "%shttp://127.0.0.1:%d",
		         i ? "," : "", e->client[i]);
	}
	for (int i = 0; i < 2 * members; i++)
		close(held[i]);
	for (int i = 0; i < members; i++)
		member_start(e, i);
}

static void member_kill(struct etcd_cluster *e, int i)
{
	if (e->pid[i] > 0) {
		kill(e->pid[i], SIGKILL);
		waitpid(e->pid[i], NULL, 0);
		e->pid[i] = 0;
	}
}

static void etcd_stop(struct etcd_cluster *e)
{
	char cmd[96];
	for (int i = 0; i < e->n; i++)
		member_kill(e, i);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
	assert_int_equal(system(cmd), 0);
}

/* ---- the backend under test --------------------------------------------------- */

enum backend { SQLITE, ETCD };

struct fixture {
	enum backend backend;
	struct loop *loop;
	char dir[64], path[96];
	struct etcd_cluster etcd;
};

static struct store *open_store(struct fixture *f, int64_t compaction_ns)
{
	if (f->backend == SQLITE)
		return store_sqlite_open(f->path, STORE_SYNC_NORMAL, f->loop);
	struct store_etcd_opts o = {.servers = f->etcd.servers,
	                            .prefix = "/registry",
	                            .compaction_interval_ns = compaction_ns,
	                            .connect_timeout_s = 30};
	return store_etcd_open(&o, f->loop);
}

static int setup(void **state, enum backend b, int members)
{
	struct fixture *f = calloc(1, sizeof(*f));
	f->backend = b;
	f->loop = loop_new();
	snprintf(f->dir, sizeof(f->dir), "/tmp/cube-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/state.db", f->dir);
	if (b == ETCD)
		etcd_start(&f->etcd, members);
	*state = f;
	return 0;
}

static int setup_sqlite(void **state)
{
	return setup(state, SQLITE, 0);
}

static int setup_etcd(void **state)
{
	return setup(state, ETCD, 1);
}

static int setup_etcd3(void **state)
{
	return setup(state, ETCD, 3);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[96];

	if (f->backend == ETCD)
		etcd_stop(&f->etcd);
	loop_free(f->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Run the loop until *n reaches want (real network: a deadline, not a hope). */
static void pump(struct loop *loop, const int *n, int want)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		loop_poll(loop);
		if (*n >= want)
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			fail_msg("timed out: %d of %d", *n, want);
		usleep(200);
	}
}

static json_t *pod(const char *name)
{
	return json_pack("{s:s,s:{s:s,s:s},s:{s:s}}", "kind", "Pod", "metadata", "name", name,
	                 "namespace", "default", "spec", "nodeName", "n1");
}

static int64_t rv(const json_t *obj)
{
	const char *s = jx_str(obj, "metadata.resourceVersion");
	return s ? strtoll(s, NULL, 10) : -1;
}

struct acks {
	int n, errs, last_err;
	int64_t revs[256];
};

static void on_ack(void *arg, int err, json_t *obj)
{
	struct acks *a = arg;
	if (err) {
		a->errs++;
		a->last_err = err;
	} else {
		a->revs[a->n % 256] = rv(obj);
	}
	a->n++;
}

struct seen {
	int n;
	char types[256];
	int64_t revs[256];
	char keys[256][64];
};

static void record(void *arg, const struct cache_event *ev)
{
	struct seen *s = arg;
	if (s->n < 256) {
		s->types[s->n] = "AMD"[ev->type];
		s->revs[s->n] = ev->rev;
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", ev->key);
		assert_int_equal(rv(ev->obj), ev->rev);
	}
	s->n++;
}

static int cmp_rev(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* ---- the shared suite ----------------------------------------------------------- */

/* Writes are answered once durable, with their revision stamped; reads
 * see them; the refusals are the interface's, whatever the backend. */
static void test_writes_reads_and_refusals(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_store(f, 0);
	struct cache *c;
	struct acks a = {0};
	json_t *upd;

	assert_non_null(st);
	c = cache_new(st, 100);
	assert_int_equal(cache_load(c), 0);
	int64_t start = cache_committed_rev(c);
	assert_int_equal(cache_create(c, "/registry/pods/default/a", pod("a"), on_ack, &a), 0);
	pump(f->loop, &a.n, 1);
	assert_int_equal(cache_create(c, "/registry/pods/default/b", pod("b"), on_ack, &a), 0);
	pump(f->loop, &a.n, 2);
	assert_int_equal(a.errs, 0);
	assert_true(a.revs[0] > start && a.revs[1] > a.revs[0]);
	assert_int_equal(rv(cache_get_committed(c, "/registry/pods/default/a")), a.revs[0]);
	assert_int_equal(cache_committed_rev(c), a.revs[1]);
	/* The key exists: refused at once, nothing sent. */
	assert_int_equal(cache_create(c, "/registry/pods/default/a", pod("a"), on_ack, &a),
	                 ERR_EXISTS);
	assert_int_equal(cache_update(c, "/registry/pods/default/zz", pod("zz"), on_ack, &a),
	                 ERR_NOTFOUND);
	assert_int_equal(cache_delete(c, "/registry/pods/default/zz", on_ack, &a), ERR_NOTFOUND);
	/* etcd's request limit, on both. */
	upd = pod("big");
	json_t *blob = json_string("");
	char *big = malloc(CACHE_MAX_OBJECT_BYTES + 10);
	memset(big, 'x', CACHE_MAX_OBJECT_BYTES + 9);
	big[CACHE_MAX_OBJECT_BYTES + 9] = 0;
	json_string_set(blob, big);
	free(big);
	jx_set(upd, "spec.blob", blob);
	assert_int_equal(cache_create(c, "/registry/pods/default/big", upd, on_ack, &a),
	                 ERR_TOOLARGE);
	assert_string_equal(err_msg(), "etcdserver: request is too large");

	upd = json_deep_copy(cache_get(c, "/registry/pods/default/a"));
	jx_set_str(upd, "spec.nodeName", "n2");
	/* One after the other: writes in flight together may be answered in
	 * any order (etcd's connections race), each in its revision. */
	assert_int_equal(cache_update(c, "/registry/pods/default/a", upd, on_ack, &a), 0);
	pump(f->loop, &a.n, 3);
	assert_int_equal(cache_delete(c, "/registry/pods/default/b", on_ack, &a), 0);
	pump(f->loop, &a.n, 4);
	assert_int_equal(a.errs, 0);
	assert_true(a.revs[3] > a.revs[2] && a.revs[2] > a.revs[1]);
	assert_string_equal(jx_str(cache_get(c, "/registry/pods/default/a"), "spec.nodeName"),
	                    "n2");
	assert_null(cache_get(c, "/registry/pods/default/b"));
	assert_int_equal(cache_count(c, "/registry/pods/"), 1);
	store_close(st);
	cache_free(c);

	/* Another process: the state and its revisions are back. */
	st = open_store(f, 0);
	c = cache_new(st, 100);
	assert_int_equal(cache_load(c), 0);
	assert_true(cache_committed_rev(c) >= a.revs[3]);
	assert_int_equal(cache_count(c, "/registry/pods/"), 1);
	assert_int_equal(rv(cache_get(c, "/registry/pods/default/a")), a.revs[2]);
	assert_string_equal(jx_str(cache_get(c, "/registry/pods/default/a"), "spec.nodeName"),
	                    "n2");
	/* The window starts at the loaded revision: older resumes are 410. */
	assert_null(cache_watch(c, "/registry/pods/", a.revs[0], record, NULL));
	assert_non_null(strstr(err_msg(), "too old resource version"));
	store_close(st);
	cache_free(c);
}

/* Watchers hear every write in revision order, from a revision on; a
 * list reads the state at an older revision from the window. */
static void test_watch_order_and_list_at(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_store(f, 0);
	struct cache *c = cache_new(st, 1000);
	struct acks a = {0};
	struct seen all = {0}, late = {0};
	struct cache_watch *w1, *w2;
	json_t **objs;
	bool more;
	size_t n;

	assert_int_equal(cache_load(c), 0);
	w1 = cache_watch(c, "/registry/pods/", cache_committed_rev(c), record, &all);
	assert_non_null(w1);
	for (int i = 0; i < 50; i++) {
		char key[64], name[16];
		snprintf(name, sizeof(name), "p%02d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		assert_int_equal(cache_create(c, key, pod(name), on_ack, &a), 0);
	}
	pump(f->loop, &a.n, 50);
	assert_int_equal(a.errs, 0);
	qsort(a.revs, 50, sizeof(a.revs[0]), cmp_rev);
	int64_t mid = a.revs[24];
	for (int i = 0; i < 50; i += 2) {
		char key[64];
		snprintf(key, sizeof(key), "/registry/pods/default/p%02d", i);
		assert_int_equal(cache_delete(c, key, on_ack, &a), 0);
	}
	pump(f->loop, &a.n, 75);
	assert_int_equal(a.errs, 0);
	assert_int_equal(all.n, 75);
	for (int i = 1; i < all.n; i++)
		assert_true(all.revs[i] > all.revs[i - 1]);
	assert_int_equal(all.types[0], 'A');
	assert_int_equal(all.types[74], 'D');
	/* From the middle: the window replays exactly what came after. */
	w2 = cache_watch(c, "/registry/pods/", mid, record, &late);
	assert_non_null(w2);
	assert_int_equal(late.n, 50);
	assert_int_equal(late.revs[0], a.revs[25]);
	/* The state at mid: p00..p24, none deleted yet. */
	assert_int_equal(cache_list_at(c, mid, "/registry/pods/", NULL, false, 0, &objs, &more, &n),
	                 0);
	assert_int_equal(n, 25);
	free(objs);
	n = cache_list_committed(c, "/registry/pods/", NULL, 0, &objs, &more);
	assert_int_equal(n, 25);
	assert_string_equal(jx_str(objs[0], "metadata.name"), "p01");
	free(objs);
	cache_unwatch(w1);
	cache_unwatch(w2);
	store_close(st);
	cache_free(c);
}

/* ---- what only a shared store does ------------------------------------------------ */

/* Two API servers' caches on one etcd: each hears the other's writes, in
 * one revision order; a write built on a state the other has replaced
 * loses its compare, is answered ERR_CONFLICT once its cache has the
 * winner, and succeeds built again. */
static void test_two_servers_one_order(void **state)
{
	struct fixture *f = *state;
	struct store *sa = open_store(f, 0), *sb = open_store(f, 0);
	struct cache *a = cache_new(sa, 1000), *b = cache_new(sb, 1000);
	struct acks acks = {0}, lost = {0};
	struct seen on_a = {0}, on_b = {0};
	json_t *mine, *theirs;

	assert_int_equal(cache_load(a), 0);
	assert_int_equal(cache_load(b), 0);
	assert_non_null(cache_watch(a, "/registry/", cache_committed_rev(a), record, &on_a));
	assert_non_null(cache_watch(b, "/registry/", cache_committed_rev(b), record, &on_b));
	for (int i = 0; i < 40; i++) {
		char key[64], name[16];
		snprintf(name, sizeof(name), "x%02d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		/* Alternate servers, writes overlapping in flight. */
		assert_int_equal(cache_create(i % 2 ? b : a, key, pod(name), on_ack, &acks), 0);
	}
	pump(f->loop, &acks.n, 40);
	assert_int_equal(acks.errs, 0);
	pump(f->loop, &on_a.n, 40);
	pump(f->loop, &on_b.n, 40);
	for (int i = 0; i < 40; i++) {
		assert_int_equal(on_a.revs[i], on_b.revs[i]);
		assert_string_equal(on_a.keys[i], on_b.keys[i]);
		if (i)
			assert_true(on_a.revs[i] > on_a.revs[i - 1]);
	}
	assert_int_equal(cache_count(a, "/registry/pods/"), 40);
	assert_int_equal(cache_count(b, "/registry/pods/"), 40);

	/* Both build on the same state; a's write lands first. */
	mine = json_deep_copy(cache_get(a, "/registry/pods/default/x00"));
	theirs = json_deep_copy(cache_get(b, "/registry/pods/default/x00"));
	jx_set_str(mine, "spec.nodeName", "from-a");
	jx_set_str(theirs, "spec.nodeName", "from-b");
	assert_int_equal(cache_update(a, "/registry/pods/default/x00", mine, on_ack, &acks), 0);
	pump(f->loop, &acks.n, 41);
	assert_int_equal(cache_update(b, "/registry/pods/default/x00", theirs, on_ack, &lost), 0);
	pump(f->loop, &lost.n, 1);
	assert_int_equal(lost.errs, 1);
	assert_int_equal(lost.last_err, ERR_CONFLICT);
	/* Answered only once b has the winner: built again, it wins. */
	assert_string_equal(jx_str(cache_get(b, "/registry/pods/default/x00"), "spec.nodeName"),
	                    "from-a");
	theirs = json_deep_copy(cache_get(b, "/registry/pods/default/x00"));
	jx_set_str(theirs, "spec.nodeName", "from-b");
	assert_int_equal(cache_update(b, "/registry/pods/default/x00", theirs, on_ack, &lost), 0);
	pump(f->loop, &lost.n, 2);
	assert_int_equal(lost.errs, 1);
	pump(f->loop, &on_a.n, 42);
	assert_string_equal(jx_str(cache_get(a, "/registry/pods/default/x00"), "spec.nodeName"),
	                    "from-b");
	/* Both create one name: one wins, the other loses its compare and
	 * then finds the name taken. */
	int errs = acks.errs + lost.errs;
	assert_int_equal(cache_create(a, "/registry/pods/default/new", pod("new"), on_ack, &acks),
	                 0);
	assert_int_equal(cache_create(b, "/registry/pods/default/new", pod("new"), on_ack, &lost),
	                 0);
	pump(f->loop, &lost.n, 3);
	pump(f->loop, &acks.n, 42);
	assert_int_equal(acks.errs + lost.errs - errs, 1);
	assert_true(acks.last_err == ERR_CONFLICT || lost.last_err == ERR_CONFLICT);
	pump(f->loop, &on_a.n, 43);
	pump(f->loop, &on_b.n, 43);
	assert_int_equal(cache_create(a, "/registry/pods/default/new", pod("new"), on_ack, &acks),
	                 ERR_EXISTS);
	assert_int_equal(cache_create(b, "/registry/pods/default/new", pod("new"), on_ack, &lost),
	                 ERR_EXISTS);
	store_close(sa);
	store_close(sb);
	cache_free(a);
	cache_free(b);
}

static int64_t virtual_start;

/* The compactor, on the virtual clock: the first interval records, the
 * second compacts what the first recorded. */
static void test_compaction(void **state)
{
	struct fixture *f = *state;
	struct store *st;
	struct cache *c;
	struct acks a = {0};
	char cmd[512];
	int64_t first;

	clock_use_virtual(virtual_start);
	st = open_store(f, 60 * NS_PER_SEC);
	c = cache_new(st, 100);
	assert_int_equal(cache_load(c), 0);
	assert_int_equal(cache_create(c, "/registry/pods/default/a", pod("a"), on_ack, &a), 0);
	pump(f->loop, &a.n, 1);
	first = a.revs[0];
	/* Nothing is compacted at start. */
	snprintf(cmd, sizeof(cmd),
	         "ETCDCTL_API=3 etcdctl --endpoints %s get --rev=%" PRId64
	         " /registry/pods/default/a >/dev/null 2>&1",
	         f->etcd.servers, first);
	assert_int_equal(system(cmd), 0);
	clock_advance(60 * NS_PER_SEC); /* records the revision */
	for (int i = 0; i < 200; i++)
		loop_poll(f->loop), usleep(1000);
	assert_int_equal(system(cmd), 0);
	struct acks b = {0};
	json_t *upd = json_deep_copy(cache_get(c, "/registry/pods/default/a"));
	jx_set_str(upd, "spec.nodeName", "n9");
	assert_int_equal(cache_update(c, "/registry/pods/default/a", upd, on_ack, &b), 0);
	pump(f->loop, &b.n, 1);
	clock_advance(60 * NS_PER_SEC); /* compacts what the first recorded */
	for (int i = 0; i < 500 && system(cmd) == 0; i++)
		loop_poll(f->loop), usleep(2000);
	/* The first write's revision is gone from etcd's history. */
	assert_int_not_equal(system(cmd), 0);
	store_close(st);
	cache_free(c);
	clock_use_real();
}

/* A three-member cluster loses the member the server talks to: writes
 * go on through another, none lost, none applied twice, and the watch
 * resumes where it was. */
static void test_member_killed_under_writes(void **state)
{
	struct fixture *f = *state;
	struct store *st = open_store(f, 0);
	struct cache *c = cache_new(st, 1000);
	struct acks a = {0};
	struct seen seen = {0};

	assert_int_equal(cache_load(c), 0);
	assert_non_null(cache_watch(c, "/registry/pods/", cache_committed_rev(c), record, &seen));
	for (int i = 0; i < 20; i++) {
		char key[64], name[16];
		snprintf(name, sizeof(name), "k%02d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		assert_int_equal(cache_create(c, key, pod(name), on_ack, &a), 0);
	}
	pump(f->loop, &a.n, 20);
	/* The first member is the one asked (the store starts there). */
	member_kill(&f->etcd, 0);
	for (int i = 20; i < 60; i++) {
		char key[64], name[16];
		snprintf(name, sizeof(name), "k%02d", i);
		snprintf(key, sizeof(key), "/registry/pods/default/%s", name);
		assert_int_equal(cache_create(c, key, pod(name), on_ack, &a), 0);
	}
	pump(f->loop, &a.n, 60);
	assert_int_equal(a.errs, 0);
	pump(f->loop, &seen.n, 60);
	assert_int_equal(seen.n, 60);
	for (int i = 1; i < 60; i++)
		assert_true(seen.revs[i] > seen.revs[i - 1]);
	assert_int_equal(cache_count(c, "/registry/pods/"), 60);
	store_close(st);
	cache_free(c);

	/* What the cluster holds is what was acknowledged, once each. */
	st = open_store(f, 0);
	c = cache_new(st, 10);
	assert_int_equal(cache_load(c), 0);
	assert_int_equal(cache_count(c, "/registry/pods/"), 60);
	store_close(st);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_writes_reads_and_refusals, setup_sqlite, teardown),
	    cmocka_unit_test_setup_teardown(test_writes_reads_and_refusals, setup_etcd, teardown),
	    cmocka_unit_test_setup_teardown(test_watch_order_and_list_at, setup_sqlite, teardown),
	    cmocka_unit_test_setup_teardown(test_watch_order_and_list_at, setup_etcd, teardown),
	    cmocka_unit_test_setup_teardown(test_two_servers_one_order, setup_etcd, teardown),
	    cmocka_unit_test_setup_teardown(test_compaction, setup_etcd, teardown),
	    cmocka_unit_test_setup_teardown(test_member_killed_under_writes, setup_etcd3, teardown),
	};
	virtual_start = (int64_t)time(NULL) * NS_PER_SEC;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
