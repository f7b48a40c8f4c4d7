/*
 * certmanager — client-go's certificate manager (util/certificate), on a
 * cube loop: it keeps one certificate/key pair current in a certstore
 * directory and, when rotation is on, replaces it at a jittered 70–90 % of
 * its lifetime by creating a CSR with a fresh ECDSA P-256 key and waiting
 * for the issued certificate. The kubelet runs two: the client certificate
 * (signer kubernetes.io/kube-apiserver-client-kubelet, prefix
 * kubelet-client) and the serving certificate (kubernetes.io/kubelet-serving,
 * prefix kubelet-server).
 *
 * Upstream's numbers and log lines are the specification (k8s-facts §1.1–
 * §1.6): the deadline, the backoff (2 s ×2, jitter 0.1, 5 steps, then a
 * 32 s poll), the 15 min wait for issuance, the "server healthy" verdict the
 * kubelet's watchdog reads, and the lines prefixed with the manager's name
 * ("kubernetes.io/kube-apiserver-client-kubelet: Rotating certificates") at
 * upstream's verbosity (V(2); failures as utilruntime.HandleError's E line).
 * Every wait is a timer on the loop, never a sleep, so the whole schedule
 * runs on the virtual clock. Jitter comes from base/rand.
 *
 * Also here: csr_request, one CSR from creation to issued certificate
 * (client-go's csr.RequestCertificate + WaitForCertificate), shared with the
 * TLS bootstrap; and cred_write, a kubelet's credential files written on a
 * worker thread (the manager's, the bootstrap's and the start's).
 *
 * Ownership: managers and requests are the caller's; strings and lists in a
 * config are copied; the rest client a callback returns is borrowed for
 * the call. Threads: the loop's (cred_write's work runs on loop_work's).
 */
#ifndef CUBE_KUBELET_CERTMANAGER_H
#define CUBE_KUBELET_CERTMANAGER_H

#include "client/rest.h"

#include "base/loop.h"
#include "base/metrics.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>

#define SIGNER_KUBELET_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define SIGNER_KUBELET_SERVING "kubernetes.io/kubelet-serving"

/* ---- pure pieces (upstream's arithmetic), for tests ------------------------ */

/* NotBefore + total·(0.7 + 0.2·u), u uniform in [0,1): client-go's
 * jitteryDuration, so the deadline is uniform in [70 %, 90 %) of the lifetime. */
int64_t certmgr_rotation_deadline(int64_t not_before_ns, int64_t not_after_ns, double u);
/* The sleep after failed attempt n (1-based) of one deadline: 2 s·2^(n-1)
 * plus up to 10 % jitter (u in [0,1)); -1 after the fifth: the backoff limit. */
int64_t certmgr_backoff_delay(int failed_attempts, double u);
#define CERTMGR_BACKOFF_STEPS 5
#define CERTMGR_POLL_NS (32 * INT64_C(1000000000))
#define CERTMGR_WAIT_NS (15 * 60 * INT64_C(1000000000)) /* certificateWaitTimeout */

/* Go's time.Time.String() in UTC: "2026-11-30 10:00:00.5 +0000 UTC". */
#define GO_TIME_BUF 64
char *go_time_string(int64_t ns, char buf[GO_TIME_BUF]);

/* ---- one CSR, from creation to certificate --------------------------------- */

struct csr_spec {
	const char *name;    /* fixed name (bootstrap), or NULL for generateName "csr-" */
	const char *csr_pem; /* the PKCS#10 request */
	const char *signer;
	const char *const *usages; /* spec.usages, in the order upstream sends them */
	int64_t timeout_ns;  /* how long to wait for issuance */
	const char *server;  /* the API server's URL, for error texts */
	const char *log_kv;  /* appended to each log line (hollow: ` node="n"`), or NULL */
};

struct csr_result {
	int rc;                /* 0: issued */
	bool created;          /* the CSR object existed (the failure was in waiting) */
	int status;            /* HTTP status of a failed create, 0 for a transport error */
	const char *err;       /* Go-like text of the failure */
	const char *name;      /* the CSR's name, once known */
	const char *cert_pem;  /* the issued certificate(s) on success */
};

typedef void (*csr_done_cb)(void *arg, const struct csr_result *res);

struct csr_request;

/*
 * Create the CSR with client c and watch it (fieldSelector metadata.name)
 * until it is issued, denied, failed, deleted, or the timeout passes. A
 * named CSR that already exists is reused when it asks for the same thing
 * ("csr for this node already exists, reusing"). done runs exactly once,
 * on the loop, unless the request is cancelled first; the request has
 * freed itself by then, so done must forget the pointer. c must outlive
 * the request.
 */
struct csr_request *csr_request_start(struct loop *loop, struct rest_client *c,
				      const struct csr_spec *spec, csr_done_cb done, void *arg);
/* Stop waiting; done will not run. NULL is a no-op. */
void csr_request_cancel(struct csr_request *r);

/* ---- an issued pair, stored off the loop -------------------------------------- */

/*
 * What a kubelet writes for its credentials, in this order, each step
 * optional: an issued pair into the store (dir, prefix), the file
 * unlink_path removed, file_text written to file_path (the kubeconfig). On a
 * worker thread (loop_work): decoding the certificate and the fsyncs would
 * stall every node on the loop. Strings are copied and the key referenced,
 * so the caller may go on.
 */
struct cred_write_spec {
	const char *dir, *prefix; /* the certstore */
	const char *cert_pem;     /* the issued certificate(s), or NULL: no pair */
	EVP_PKEY *key;            /* the key it was issued for */
	const char *unlink_path;  /* or NULL */
	const char *file_path, *file_text; /* or NULL: written atomically, 0600 */
};

struct cred_write_result {
	int rc;           /* 0, or the first step's error */
	const char *err;  /* its text */
	X509 *cert;       /* on success: the certificate parsed, done's to keep (or free) */
	int unlink_errno; /* removing unlink_path failed with it (not ENOENT): a warning */
};

typedef void (*cred_write_cb)(void *arg, struct cred_write_result *res);

struct cred_write;

/* done runs once, on the loop and in the caller's log scope, unless
 * cancelled first; forget the pointer then. */
struct cred_write *cred_write_start(struct loop *loop, const struct cred_write_spec *spec,
				    cred_write_cb done, void *arg);
/* done will not run; the files may still be written. NULL is a no-op. */
void cred_write_cancel(struct cred_write *w);

/* Go's text for a failed request: `Post "https://host/path": <err>` for a
 * transport failure, else the Status message ("Unauthorized"). Into buf. */
const char *kubelet_http_error(const char *method, const char *server, const char *path,
			       int status, const json_t *body, const char *err, char *buf,
			       size_t n);

/* ---- the manager ---------------------------------------------------------------- */

struct certmgr_config {
	const char *name;     /* log prefix; upstream: the signer name */
	const char *log_kv;   /* appended to every line (hollow: ` node="n"`), or NULL */
	const char *signer;
	const char *server;   /* the API server's URL, for error texts */
	const char *cert_dir;
	const char *prefix;   /* CERTSTORE_CLIENT or CERTSTORE_SERVER */
	/* Fallback files for the first load, and an initial pair (the
	 * kubeconfig's embedded data) to seed an empty store with, as upstream's
	 * bootstrap certificate data. Any may be NULL. */
	const char *cert_file, *key_file, *initial_pem;
	bool rotate;          /* request new certificates; else only track expiry */
	bool serving;         /* usages: server auth instead of client auth */
	/* The template every CSR asks for. */
	const char *cn;
	const char *const *orgs, *const *dns, *const *ips;
	/* The client to create CSRs with; have_cert says whether a valid
	 * certificate is current (upstream's ClientsetFn). Called once per
	 * attempt, from a timer, never while a request made with an earlier
	 * answer is in flight. */
	struct rest_client *(*client)(void *arg, bool have_cert);
	/* The current pair changed: a new one, or none (cert NULL: expired). */
	void (*on_change)(void *arg, X509 *cert, EVP_PKEY *key);
	void *arg;
	struct metric_series *renew_errors;     /* counter, may be NULL */
	struct metric_series *rotation_seconds; /* histogram, may be NULL */
};

struct certmgr;

struct certmgr *certmgr_new(struct loop *loop, const struct certmgr_config *cfg);
/*
 * Load the current pair from the store (seeding it from initial_pem when
 * the store has none or only an expired one) and, with rotate, start the
 * rotation loop ("Certificate rotation is enabled"). 0, or an error reading
 * the store that is not "no pair yet".
 */
int certmgr_start(struct certmgr *m);
void certmgr_free(struct certmgr *m);

/* The current certificate, or NULL when there is none or it has expired
 * (upstream's Current()). Borrowed; valid until the next change. */
X509 *certmgr_current(struct certmgr *m);
EVP_PKEY *certmgr_current_key(struct certmgr *m);
/* The pair the manager holds, expired or not (a static transport presents
 * it anyway); NULL when none. Borrowed. */
X509 *certmgr_held(struct certmgr *m, EVP_PKEY **key);
/* Re-read the store after someone else put a pair there (bootstrap). */
int certmgr_reload(struct certmgr *m);
/* Drop whatever rotation is doing and start a new round now (a fresh key,
 * the client the callback gives then): self-heal's in-place re-bootstrap. */
void certmgr_rotate_now(struct certmgr *m);
/* Upstream's ServerHealthy(): true after a certificate was issued, or when
 * creating a CSR was answered 401, 403 or 404; false after any other failure
 * to create one, and before either happened. Other requests do not count. */
bool certmgr_server_healthy(const struct certmgr *m);
/* Bumped each time a different pair becomes current: the watchdog's way of
 * telling a rotation from the same certificate (upstream compares pointers). */
unsigned certmgr_generation(const struct certmgr *m);
/* Seconds until NotAfter, truncated; +Inf without a current certificate —
 * expired included, as upstream's gauge reads Current() (the
 * *_ttl_seconds gauges). */
double certmgr_ttl_seconds(const struct certmgr *m);
/* Times rotation has been attempted (tests, metrics). */
int certmgr_attempts(const struct certmgr *m);
/* Attempts failed since a certificate was last issued, and the last one's
 * error (borrowed; NULL when none failed). */
int certmgr_failing(const struct certmgr *m, const char **last_err);

#endif
