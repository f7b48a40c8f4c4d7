/*
 * testenv — what the unit tests that need the API share: a cluster PKI in a
 * fresh temporary directory (cube pki init) and a real API server on a loop,
 * on a free loopback port, with an admin REST client. The bootstrap token
 * Secret is seeded from the cluster's pki/bootstrap-token. For the suites
 * that run it in process, also what their tests share: requests answered
 * in memory, allocations kept to the end of a test, JSON bodies written
 * with ', and the check that a reply is upstream's Status.
 *
 * Call clock_use_virtual before testenv_start if the test runs on the
 * virtual clock: timers belong to the clock they were made under.
 */
#ifndef CUBE_TESTS_TESTENV_H
#define CUBE_TESTS_TESTENV_H

#include "apiserver/apiserver.h"
#include "client/rest.h"
#include "pki/kubeconfig.h"

#include "base/loop.h"

#include <jansson.h>

struct testenv_store;

#include <stdbool.h>
#include <stddef.h>

struct testenv {
	char dir[64];    /* the cluster directory */
	char server[64]; /* https://127.0.0.1:<port> */
	struct loop *loop;
	struct apiserver *api;
	struct kubeconfig admin_kc; /* admin.conf, pointed at server */
	struct rest_client *admin;
	struct testenv_store *remote; /* testenv_start_inproc_remote's store */
	void **kept; /* testenv_keep's, freed by testenv_stop */
	size_t nkept;
};

/* tag names the temporary directory (/tmp/cube-<tag>-XXXXXX). */
void testenv_start(struct testenv *e, const char *tag);
/* The same with the server's options changed by tune first. */
void testenv_start_tuned(struct testenv *e, const char *tag,
                         void (*tune)(struct apiserver_opts *o));
/* Stops the server, frees everything (what testenv_keep kept too), removes
 * the directory (unless CUBE_TEST_KEEP is set). */
void testenv_stop(struct testenv *e);
/* cmocka's teardown for a state that is a started testenv on the heap:
 * testenv_stop, then free. */
int testenv_teardown(void **state);
/* "<dir>/<rel>" into buf. */
const char *testenv_path(const struct testenv *e, const char *rel, char *buf, size_t n);
/* Logs to /dev/null, unless CUBE_TEST_V is set: then at that verbosity. */
void testenv_quiet_logs(void);

/*
 * Run ready I/O and due timers until the loop has been idle for `quiet`
 * rounds of 2 ms of real time with no write on its way to disk (the store
 * commits on its own thread). The virtual clock does not move.
 */
void testenv_pump(struct testenv *e, int quiet);
/* Poll loop l until its loop_work jobs are done and their done callbacks
 * have run, for at most 10 s of real time (then the test fails). */
void testenv_work_wait(struct loop *l);

struct testenv_result {
	int status, done;
	json_t *body; /* the caller's: json_decref */
};

/* A request as the admin, answered before returning (in process after
 * testenv_start_inproc). */
struct testenv_result testenv_call(struct testenv *e, const char *method, const char *path,
                                   json_t *body);
/* The same with a Content-Type (NULL: JSON), for PATCH bodies. */
struct testenv_result testenv_call_ct(struct testenv *e, const char *method, const char *path,
                                      const char *content_type, json_t *body);

/* ---- in-process requests: no socket ------------------------------------------ */

/*
 * The API server alone, without a listener (and no admin REST client):
 * every request through testenv_do / testenv_as_admin, answered in memory by the
 * same code HTTPS requests go through.
 */
void testenv_start_inproc(struct testenv *e, const char *tag);
/* The same on a remote store in memory (e->remote, the server's): the
 * cache as it runs on etcd, with writes the test can hold. */
void testenv_start_inproc_remote(struct testenv *e, const char *tag);
/* The same with tune adjusting the API server's options first (a smaller
 * watch window, say). */
void testenv_start_inproc_tuned(struct testenv *e, const char *tag,
                                void (*tune)(struct apiserver_opts *o));

/* ---- a remote store in memory ------------------------------------------------ */

/*
 * What etcd is to the cache, in memory: it assigns revisions, each write is
 * a compare-and-swap on the key's mod revision, and the cache hears of every
 * write through the store's watch. A write lands at the loop's next turn, in
 * order — unless the test holds it, to land it later in an order of its
 * choosing (as writes on separate etcd requests may).
 * testenv_start_inproc_remote gives one to its API server
 * (apiserver_opts.store), which owns it and lands what is still held when
 * it closes it.
 */
struct testenv_store *testenv_store_new(struct loop *loop);
struct store *testenv_store_base(struct testenv_store *ts);
/* Let the next `pass` writes land as usual, then hold every one after
 * (SIZE_MAX: hold none again). */
void testenv_store_hold(struct testenv_store *ts, size_t pass);
/* Writes held so far, not landed. */
size_t testenv_store_held(const struct testenv_store *ts);
/* The key of held write i (0: the oldest) and whether it is a delete. */
const char *testenv_store_held_key(const struct testenv_store *ts, size_t i, bool *is_delete);
/* Held write i lands now: its watch event and its answer, before returning. */
void testenv_store_land(struct testenv_store *ts, size_t i);

struct testenv_reply {
	int status;
	char *text;                   /* the body as sent */
	json_t *body;                 /* text parsed as JSON, or NULL */
	struct apiserver_exchange *x; /* headers: apiserver_exchange_header */
};

/* Starts rq and runs the loop until it is answered (the test fails after
 * 10 s of real time). */
struct testenv_reply testenv_do(struct testenv *e, const struct apiserver_request *rq);
/* As the cluster admin (kubernetes-admin, system:masters); body JSON text
 * or NULL; content_type NULL: application/json when there is a body. */
struct testenv_reply testenv_as_admin(struct testenv *e, const char *method, const char *target,
                                      const char *content_type, const char *body);
/* The same request started, not waited for: the loop answers it as it runs
 * (a watch streams). The caller's: apiserver_exchange_free. */
struct apiserver_exchange *testenv_exchange_as_admin(struct testenv *e, const char *method,
                                                     const char *target, const char *content_type,
                                                     const char *body);
/* Run the loop until x is done (or 10 s of real time have passed). */
bool testenv_wait(struct testenv *e, struct apiserver_exchange *x);
void testenv_reply_free(struct testenv_reply *r);

/* ---- what the in-process tests share ---------------------------------------- */

/*
 * Keeps p (malloc'd) for testenv_stop to free, and returns it. cmocka leaves
 * a test at its first failing assertion, so what a test frees at its end
 * would leak from a failed one; what it keeps is freed at teardown either way.
 */
void *testenv_keep(struct testenv *e, void *p);

/* JSON text written with ' for " (for bodies that need no '), in one of
 * eight rotating buffers: good until eight more calls. */
__attribute__((format(printf, 1, 2))) const char *testenv_json(const char *fmt, ...);

/*
 * How r differs from upstream's Status for a failure — kind Status,
 * apiVersion v1, status Failure, this code (the reply's status code too),
 * this reason (NULL: none, as etcd's errors are passed through) and this
 * message (NULL: any) — malloc'd, or NULL when it is exactly that.
 */
char *testenv_status_mismatch(const struct testenv_reply *r, int code, const char *reason,
                              const char *message);
/* r is that Status, or the test fails at the caller's line saying how it
 * is not; r is freed first either way (a failed test leaks nothing). */
#define testenv_expect_status(r, code, reason, message)                                            \
	testenv_expect_status_at(r, code, reason, message, __FILE__, __LINE__)
/* The same check of a reply the caller goes on reading (and frees). */
#define testenv_assert_status(r, code, reason, message)                                            \
	testenv_assert_status_at(r, code, reason, message, __FILE__, __LINE__)
/* r's status code is code (its body printed if not); r freed first. */
#define testenv_expect_code(r, code) testenv_expect_code_at(r, code, __FILE__, __LINE__)

void testenv_expect_status_at(struct testenv_reply r, int code, const char *reason,
                              const char *message, const char *file, int line);
void testenv_assert_status_at(const struct testenv_reply *r, int code, const char *reason,
                              const char *message, const char *file, int line);
void testenv_expect_code_at(struct testenv_reply r, int code, const char *file, int line);

/* A CertificateSigningRequest's spec.request: a PEM request for a fresh
 * ECDSA key, with this CN and O's (NULL-terminated, or NULL), base64; the
 * caller's. */
char *testenv_csr_request(const char *cn, const char *const *orgs);

/* ---- a controller manager on the test server ------------------------------- */

struct controller_manager;
struct controller_manager_opts;

/*
 * What the tests of one controller share: logs quiet (testenv_quiet_logs),
 * the virtual clock when asked (before the server starts, so its timers use
 * it), the test server, and a controller manager with its own credentials
 * (controller-manager.conf, loaded into kc) running `controllers`. tune,
 * when not NULL, adjusts the options first.
 */
struct controller_manager *testenv_cm_start(struct testenv *e, const char *tag,
                                            struct kubeconfig *kc, const char *controllers,
                                            bool virtual_clock,
                                            void (*tune)(struct controller_manager_opts *o));
/* Frees the manager, kc and the server (and goes back to the real clock). */
void testenv_cm_stop(struct testenv *e, struct kubeconfig *kc, struct controller_manager *cm);

#endif
