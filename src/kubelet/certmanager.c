/*
 * The certificate manager and the CSR request it (and the TLS bootstrap)
 * uses. See certmanager.h; upstream's sources are client-go
 * util/certificate/certificate_manager.go and csr/csr.go.
 */
#include "kubelet/certmanager.h"

#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <errno.h>
#include <math.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CSR_PATH "/apis/certificates.k8s.io/v1/certificatesigningrequests"
/* How soon a CSR watch that ended is opened again. */
#define REWATCH_NS NS_PER_SEC
/* WaitForCertificate wraps every failure but the timeout in this. */
#define WATCH_ERR "cannot watch on the certificate signing request: "

/* ---- upstream's arithmetic --------------------------------------------------- */

int64_t certmgr_rotation_deadline(int64_t not_before_ns, int64_t not_after_ns, double u)
{
	double total = (double)(not_after_ns - not_before_ns);
	/* wait.Jitter(total, 0.2) - 0.3·total */
	return not_before_ns + (int64_t)(total + u * 0.2 * total - 0.3 * total);
}

int64_t certmgr_backoff_delay(int failed_attempts, double u)
{
	int64_t d = 2 * NS_PER_SEC;

	if (failed_attempts < 1 || failed_attempts >= CERTMGR_BACKOFF_STEPS)
		return -1;
	for (int i = 1; i < failed_attempts; i++)
		d *= 2;
	return d + (int64_t)(u * 0.1 * (double)d);
}

char *go_time_string(int64_t ns, char buf[GO_TIME_BUF])
{
	int64_t sec = ns >= 0 ? ns / NS_PER_SEC : -((-ns + NS_PER_SEC - 1) / NS_PER_SEC);
	int64_t frac = ns - sec * NS_PER_SEC;
	time_t t = (time_t)sec;
	struct tm tm;
	char date[32], fr[16] = "";

	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
	if (frac) {
		/* Go's .999999999: as many digits as needed, no trailing zeros. */
		size_t n;
		snprintf(fr, sizeof(fr), ".%09lld", (long long)frac);
		n = strlen(fr);
		while (n > 1 && fr[n - 1] == '0')
			fr[--n] = '\0';
	}
	snprintf(buf, GO_TIME_BUF, "%s%s +0000 UTC", date, fr);
	return buf;
}

/* "POST" → "Post", as Go's net/http names a method in its errors. */
static const char *go_method(const char *method, char buf[16])
{
	size_t i;
	for (i = 0; method[i] && i < 15; i++)
		buf[i] = (char)(i ? (method[i] | 0x20) : method[i]);
	buf[i] = '\0';
	return buf;
}

const char *kubelet_http_error(const char *method, const char *server, const char *path,
			       int status, const json_t *body, const char *err, char *buf, size_t n)
{
	const char *msg = body ? jx_str(body, "message") : NULL;
	char m[16];

	if (status == 0)
		snprintf(buf, n, "%s \"%s%s\": %s", go_method(method, m), server ? server : "",
			 path ? path : "", err ? err : "connection failed");
	else if (msg && *msg)
		snprintf(buf, n, "%s", msg);
	else
		snprintf(buf, n,
			 "the server responded with the status code %d but did not return more "
			 "information",
			 status);
	return buf;
}

/* ---- small helpers ------------------------------------------------------------- */

static json_t *usage_array(const struct strv *names)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < names->n; i++)
		json_array_append_new(arr, json_string(names->v[i]));
	return arr;
}

/* ---- one CSR ----------------------------------------------------------------------- */

struct csr_request {
	struct loop *loop;
	struct rest_client *c;
	char *name, *uid, *csr_pem, *signer, *server, *log_kv;
	struct strv usages;
	struct rest_call *call;
	struct rest_watch *watch;
	struct timer *deadline, *rewatch;
	bool told_approved;
	csr_done_cb done;
	void *arg;
};

static void req_free(struct csr_request *r)
{
	rest_cancel(r->call);
	rest_watch_stop(r->watch);
	timer_free(r->deadline);
	timer_free(r->rewatch);
	free(r->name);
	free(r->uid);
	free(r->csr_pem);
	free(r->signer);
	free(r->server);
	free(r->log_kv);
	strv_free(&r->usages);
	free(r);
}

void csr_request_cancel(struct csr_request *r)
{
	if (r)
		req_free(r);
}

/* Report the outcome and end the request. The callback that called this
 * has already forgotten its own rest call. */
static void req_finish(struct csr_request *r, int rc, bool created, int status, const char *err,
		       const char *cert_pem)
{
	csr_done_cb done = r->done;
	void *arg = r->arg;
	char *name = r->name;
	struct csr_result res = {.rc = rc,
				 .created = created,
				 .status = status,
				 .err = err,
				 .name = name,
				 .cert_pem = cert_pem};

	/* Free first: done may start the next request at once. */
	r->name = NULL;
	req_free(r);
	done(arg, &res);
	free(name);
}

static void watch_open(struct csr_request *r);

/* One state of the CSR: 1 issued (cert into *pem), 0 keep waiting, <0 failed (msg). */
static int judge(struct csr_request *r, const json_t *csr, char **pem, char *msg, size_t n)
{
	const char *uid = jx_str(csr, "metadata.uid");
	bool approved = false;
	json_t *c;
	size_t i;

	if (r->uid && uid && strcmp(uid, r->uid)) {
		snprintf(msg, n, WATCH_ERR "csr \"%s\" changed UIDs", r->name);
		return ERR_CONFLICT;
	}
	json_array_foreach(jx_get(csr, "status.conditions"), i, c)
	{
		const char *type = jx_str(c, "type");
		if (type && !strcmp(type, "Denied")) {
			snprintf(msg, n,
				 WATCH_ERR
				 "certificate signing request is denied, reason: %s, message: %s",
				 jx_str(c, "reason") ?: "", jx_str(c, "message") ?: "");
			return ERR_FORBIDDEN;
		}
		if (type && !strcmp(type, "Failed")) {
			snprintf(msg, n,
				 WATCH_ERR "certificate signing request failed, reason: %s, message: %s",
				 jx_str(c, "reason") ?: "", jx_str(c, "message") ?: "");
			return ERR_INVALID;
		}
		approved |= type && !strcmp(type, "Approved");
	}
	if (!approved)
		return 0;
	if ((*pem = (char *)b64_decode(jx_str(csr, "status.certificate"), NULL)) && **pem) {
		LOG_V(2, "certificate signing request %s is issued%s", r->name, r->log_kv);
		return 1;
	}
	free(*pem);
	*pem = NULL;
	if (!r->told_approved) {
		LOG_V(2, "certificate signing request %s is approved, waiting to be issued%s",
		      r->name, r->log_kv);
		r->told_approved = true;
	}
	return 0;
}

static void on_watch_event(void *arg, const char *type, json_t *obj)
{
	struct csr_request *r = arg;
	char msg[512], *pem = NULL;
	int v;

	if (!strcmp(type, "DELETED")) {
		snprintf(msg, sizeof(msg), WATCH_ERR "csr \"%s\" was deleted", r->name);
		req_finish(r, ERR_NOTFOUND, true, 0, msg, NULL);
		return;
	}
	if (strcmp(type, "ADDED") && strcmp(type, "MODIFIED"))
		return;
	v = judge(r, obj, &pem, msg, sizeof(msg));
	if (v > 0)
		req_finish(r, 0, true, 0, NULL, pem);
	else if (v < 0)
		req_finish(r, v, true, 0, msg, NULL);
	free(pem);
}

static void on_watch_end(void *arg, int status, const char *err)
{
	struct csr_request *r = arg;
	r->watch = NULL;
	/* A watch may end for many reasons (credentials changed, timeout):
	 * keep waiting until the deadline, as UntilWithSync does. */
	timer_after(r->rewatch, REWATCH_NS);
}

static void on_rewatch(void *arg)
{
	watch_open(arg);
}

static void watch_open(struct csr_request *r)
{
	char path[512];
	/* No resourceVersion: the first event is the CSR as it is now. */
	snprintf(path, sizeof(path), CSR_PATH "?watch=true&fieldSelector=metadata.name%%3D%s",
		 r->name);
	r->watch = rest_watch(r->c, path, on_watch_event, on_watch_end, r);
}

static void on_deadline(void *arg)
{
	req_finish(arg, ERR_TIMEOUT, true, 0, "timed out waiting for the condition", NULL);
}

static void start_waiting(struct csr_request *r, const json_t *csr)
{
	free(r->uid);
	r->uid = jx_str(csr, "metadata.uid") ? strdup(jx_str(csr, "metadata.uid")) : NULL;
	if (!r->name) {
		r->name = strdup(jx_str(csr, "metadata.name") ?: "");
	}
	watch_open(r);
}

/* X509_NAME as one line, for the "subjects differ" text. */
static void subject_text(X509_REQ *req, char *buf, size_t n)
{
	X509_NAME_oneline(X509_REQ_get_subject_name(req), buf, (int)n);
}

/*
 * upstream's ensureCompatible: the CSR found under our name asks for the
 * same subject and signer with our key, and the certificate it may carry has
 * not expired (kubernetes#65991: a kubelet stored an expired certificate
 * from an old CSR and was stuck with it). Usages are not compared.
 */
static int compatible(struct csr_request *r, const json_t *csr, char *msg, size_t n)
{
	char *pem = (char *)b64_decode(jx_str(csr, "spec.request"), NULL);
	X509_REQ *theirs = pem ? pki_csr_parse(pem, strlen(pem)) : NULL;
	X509_REQ *ours = pki_csr_parse(r->csr_pem, strlen(r->csr_pem));
	const char *signer = jx_str(csr, "spec.signerName");
	char *cert_pem = (char *)b64_decode(jx_str(csr, "status.certificate"), NULL);
	STACK_OF(X509) *certs = NULL;
	int rc = 0;

	if (!theirs || !ours) {
		/* The CSR found on the server is "new", ours the "original". */
		snprintf(msg, n, "unable to parse %s csr: %s", theirs ? "original" : "new",
			 err_msg());
		rc = ERR_INVALID;
	} else if (X509_NAME_cmp(X509_REQ_get_subject_name(theirs),
				 X509_REQ_get_subject_name(ours))) {
		char a[256], b[256];
		subject_text(theirs, a, sizeof(a));
		subject_text(ours, b, sizeof(b));
		snprintf(msg, n, "csr subjects differ: new: %s, orig: %s", a, b);
		rc = ERR_INVALID;
	} else if (signer && *signer && strcmp(signer, r->signer)) {
		snprintf(msg, n, "csr signerNames differ: new \"%s\", orig: \"%s\"", signer,
			 r->signer);
		rc = ERR_INVALID;
	} else if (X509_REQ_verify(theirs, X509_REQ_get0_pubkey(ours)) != 1) {
		/* Their request must be signed with our key (CheckSignature). */
		ERR_clear_error();
		snprintf(msg, n, "error validating signature new CSR against old key: %s",
			 pki_key_is_rsa(X509_REQ_get0_pubkey(ours))
				 ? "crypto/rsa: verification error"
				 : "x509: ECDSA verification failure");
		rc = ERR_INVALID;
	} else if (cert_pem && *cert_pem) {
		if (pki_certs_parse(cert_pem, strlen(cert_pem), &certs) < 0) {
			snprintf(msg, n, "error parsing signed certificate for CSR: %s", err_msg());
			rc = ERR_INVALID;
		}
		for (int i = 0; rc == 0 && certs && i < sk_X509_num(certs); i++) {
			char when[GO_TIME_BUF];
			int64_t na = pki_cert_not_after(sk_X509_value(certs, i));
			if (clock_now() > na) {
				snprintf(msg, n, "one of the certificates for the CSR has expired: %s",
					 go_time_string(na, when));
				rc = ERR_EXPIRED;
			}
		}
	}
	sk_X509_pop_free(certs, X509_free);
	X509_REQ_free(theirs);
	X509_REQ_free(ours);
	free(cert_pem);
	free(pem);
	return rc;
}

static void on_get_existing(void *arg, int status, json_t *body, const char *err)
{
	struct csr_request *r = arg;
	char msg[768], why[512];

	r->call = NULL;
	if (status != 200) {
		char path[512];
		snprintf(path, sizeof(path), CSR_PATH "/%s", r->name);
		kubelet_http_error("GET", r->server, path, status, body, err, why, sizeof(why));
		snprintf(msg, sizeof(msg), "cannot retrieve certificate signing request: %s", why);
		req_finish(r, ERR_IO, false, status, msg, NULL);
		return;
	}
	if (compatible(r, body, why, sizeof(why)) < 0) {
		snprintf(msg, sizeof(msg), "retrieved csr is not compatible: %s", why);
		req_finish(r, ERR_INVALID, false, status, msg, NULL);
		return;
	}
	LOG_INFO("csr for this node is still valid%s", r->log_kv);
	start_waiting(r, body);
}

static void on_created(void *arg, int status, json_t *body, const char *err)
{
	struct csr_request *r = arg;
	char msg[768], why[512], path[512];

	r->call = NULL;
	if (status == 201 || status == 200) {
		start_waiting(r, body);
		return;
	}
	if (status == 409 && r->name) {
		LOG_INFO("csr for this node already exists, reusing%s", r->log_kv);
		snprintf(path, sizeof(path), CSR_PATH "/%s", r->name);
		r->call = rest_do(r->c, "GET", path, NULL, on_get_existing, r);
		return;
	}
	kubelet_http_error("POST", r->server, CSR_PATH, status, body, err, why, sizeof(why));
	snprintf(msg, sizeof(msg), "cannot create certificate signing request: %s", why);
	req_finish(r, ERR_IO, false, status, msg, NULL);
}

struct csr_request *csr_request_start(struct loop *loop, struct rest_client *c,
				      const struct csr_spec *spec, csr_done_cb done, void *arg)
{
	struct csr_request *r = calloc(1, sizeof(*r));
	char *req_b64 = b64_encode(spec->csr_pem, strlen(spec->csr_pem));
	json_t *meta, *body;

	if (!r)
		abort();
	for (size_t i = 0; spec->usages && spec->usages[i]; i++)
		strv_push(&r->usages, spec->usages[i]);
	meta = spec->name ? json_pack("{s:s}", "name", spec->name)
			  : json_pack("{s:s}", "generateName", "csr-");
	body = json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:o}}", "apiVersion", "certificates.k8s.io/v1",
			 "kind", "CertificateSigningRequest", "metadata", meta, "spec", "request",
			 req_b64, "signerName", spec->signer, "usages", usage_array(&r->usages));
	r->loop = loop;
	r->c = c;
	r->name = spec->name ? strdup(spec->name) : NULL;
	r->csr_pem = strdup(spec->csr_pem);
	r->signer = strdup(spec->signer);
	r->server = strdup(spec->server ? spec->server : "");
	r->log_kv = strdup(spec->log_kv ? spec->log_kv : "");
	r->done = done;
	r->arg = arg;
	r->deadline = loop_timer(loop, on_deadline, r);
	r->rewatch = loop_timer(loop, on_rewatch, r);
	timer_after(r->deadline, spec->timeout_ns);
	r->call = rest_do(c, "POST", CSR_PATH, body, on_created, r);
	json_decref(body);
	free(req_b64);
	return r;
}

/* ---- an issued pair, stored off the loop --------------------------------------------- */

struct cred_write {
	/* The worker's: copies and a reference of its own. */
	char *dir, *prefix, *cert_pem, *unlink_path, *file_path, *file_text;
	EVP_PKEY *key;
	/* Its answer, read on the loop once the work is done. */
	int rc;
	char err[1024];
	X509 *cert;
	int unlink_errno;
	/* The loop's. */
	cred_write_cb done; /* NULL once cancelled */
	void *arg;
	/* The caller's log scope, for done; the worker has only its clock
	 * (a node's skew names the dated file) and logs nothing of its own. */
	const struct log_scope *scope;
	struct log_scope clock_only;
};

/* The store's file holds the certificate(s), then the key. The certificate
 * is parsed once, for the store's check and for its holder. */
static int store_pair(struct cred_write *w)
{
	size_t n = strlen(w->cert_pem);
	char *key_pem, *pem;
	int rc;

	if (!(w->cert = pki_cert_parse(w->cert_pem, n)))
		return err_wrap(ERR_INVALID, "new certificate/key pair");
	if (!(key_pem = pki_key_pem(w->key)))
		return err_wrap(ERR_CRYPTO, "new certificate/key pair");
	pem = str_printf("%s%s%s", w->cert_pem, n && w->cert_pem[n - 1] == '\n' ? "" : "\n",
			 key_pem);
	rc = certstore_update_pair(w->dir, w->prefix, w->cert, w->key, pem, NULL);
	pki_secret_free(pem);
	pki_secret_free(key_pem);
	return rc;
}

/* On a worker: nothing here may touch the loop's state. */
static void cred_write_work(void *arg)
{
	struct cred_write *w = arg;
	const struct log_scope *prev = log_scope_enter(&w->clock_only);
	char dir[4096];

	w->rc = w->cert_pem ? store_pair(w) : 0;
	if (w->rc == 0 && w->unlink_path && unlink(w->unlink_path) < 0 && errno != ENOENT)
		w->unlink_errno = errno;
	if (w->rc == 0 && w->file_path) {
		file_mkdirs(file_dirname(w->file_path, dir, sizeof(dir)), 0755);
		w->rc = file_write_atomic(w->file_path, w->file_text, strlen(w->file_text), 0600);
	}
	if (w->rc < 0) {
		/* The error text is per thread: carry it back. */
		snprintf(w->err, sizeof(w->err), "%s", err_msg());
		X509_free(w->cert);
		w->cert = NULL;
	}
	log_scope_enter(prev);
}

static void cred_write_done(void *arg)
{
	struct cred_write *w = arg;

	/* Not cancelled: the caller, and so its scope, is still there. */
	if (w->done) {
		struct cred_write_result res = {w->rc, w->err, w->cert, w->unlink_errno};
		const struct log_scope *prev = log_scope_enter(w->scope);

		w->cert = NULL; /* done's now */
		w->done(w->arg, &res);
		log_scope_enter(prev);
	}
	X509_free(w->cert);
	EVP_PKEY_free(w->key);
	free(w->dir);
	free(w->prefix);
	free(w->cert_pem);
	free(w->unlink_path);
	free(w->file_path);
	pki_secret_free(w->file_text);
	free(w);
}

struct cred_write *cred_write_start(struct loop *loop, const struct cred_write_spec *spec,
				    cred_write_cb done, void *arg)
{
	struct cred_write *w = calloc(1, sizeof(*w));

	if (!w || (spec->key && !EVP_PKEY_up_ref(spec->key)))
		abort();
	w->dir = str_dup(spec->dir);
	w->prefix = str_dup(spec->prefix);
	w->cert_pem = str_dup(spec->cert_pem);
	w->key = spec->key;
	w->unlink_path = str_dup(spec->unlink_path);
	w->file_path = str_dup(spec->file_path);
	w->file_text = str_dup(spec->file_text);
	w->done = done;
	w->arg = arg;
	w->scope = log_scope_current();
	w->clock_only = (struct log_scope){.fd = -1,
					   .clock_skew_ns = w->scope ? w->scope->clock_skew_ns : 0};
	loop_work(loop, cred_write_work, cred_write_done, w);
	return w;
}

void cred_write_cancel(struct cred_write *w)
{
	if (w)
		w->done = NULL;
}

/* ---- the manager --------------------------------------------------------------------- */

enum action { ACT_CYCLE, ACT_ROUND, ACT_ATTEMPT };

struct certmgr {
	struct loop *loop;
	struct certmgr_config cfg; /* strings below are owned copies */
	struct strv orgs, dns, ips, usages;
	X509 *cert;
	EVP_PKEY *key;
	X509 *stale_cert;    /* an expired pair found at start: not Current() */
	EVP_PKEY *stale_key;
	unsigned generation; /* bumped with every pair made current */
	bool healthy;        /* upstream's serverHealth */
	bool force;          /* rotate at the next deadline computation */
	bool polling;        /* past the backoff limit: every 32 s */
	int failed;          /* failed attempts in this round */
	int attempts;
	int failing;         /* failed attempts since a certificate was last issued */
	char last_err[512];  /* the last one's error */
	enum action next;
	struct timer *timer, *expiry;
	struct csr_request *req;
	struct cred_write *store; /* the issued pair, being written */
	EVP_PKEY *pending;        /* the key of the CSR in flight, or being stored */
};

/* client-go's m.logf: klog.V(2).Infof("<name>: ..."). */
#define MLOG(m, fmt, ...)                                                                          \
	LOG_V(2, "%s: " fmt "%s", (m)->cfg.name, __VA_ARGS__, (m)->cfg.log_kv)
/* utilruntime.HandleError(fmt.Errorf("<name>: ...")). */
#define MERR(m, fmt, ...) LOG_UNHANDLED((m)->cfg.log_kv, "%s: " fmt, (m)->cfg.name, __VA_ARGS__)

static void copy_list(struct strv *dst, const char *const *src)
{
	for (size_t i = 0; src && src[i]; i++)
		strv_push(dst, src[i]);
}

static void on_timer(void *arg);
static void on_expiry(void *arg);

struct certmgr *certmgr_new(struct loop *loop, const struct certmgr_config *cfg)
{
	struct certmgr *m = calloc(1, sizeof(*m));

	if (!m)
		abort();
	m->loop = loop;
	m->cfg = *cfg;
	m->cfg.name = str_dup(cfg->name ? cfg->name : cfg->signer);
	m->cfg.log_kv = str_dup(cfg->log_kv ? cfg->log_kv : "");
	m->cfg.signer = str_dup(cfg->signer);
	m->cfg.server = str_dup(cfg->server);
	m->cfg.cert_dir = str_dup(cfg->cert_dir);
	m->cfg.prefix = str_dup(cfg->prefix);
	m->cfg.cert_file = str_dup(cfg->cert_file);
	m->cfg.key_file = str_dup(cfg->key_file);
	m->cfg.initial_pem = str_dup(cfg->initial_pem);
	m->cfg.cn = str_dup(cfg->cn);
	copy_list(&m->orgs, cfg->orgs);
	copy_list(&m->dns, cfg->dns);
	copy_list(&m->ips, cfg->ips);
	/* Every key is ECDSA P-256: DefaultKubelet{Client,Serving}GetUsages
	 * without key encipherment. */
	pki_usage_names(pki_usages_kubelet(false, cfg->serving), &m->usages);
	m->cfg.orgs = NULL;
	m->cfg.dns = NULL;
	m->cfg.ips = NULL;
	m->timer = loop_timer(loop, on_timer, m);
	m->expiry = loop_timer(loop, on_expiry, m);
	return m;
}

static bool expired_at(X509 *cert, int64_t now)
{
	/* Go: now.After(NotAfter). */
	return now > pki_cert_not_after(cert);
}

X509 *certmgr_current(struct certmgr *m)
{
	if (!m->cert)
		return NULL;
	if (expired_at(m->cert, clock_now())) {
		/* upstream logs this on every call of Current() while expired. */
		if (m->cfg.rotate)
			MLOG(m, "%s", "Current certificate is expired");
		return NULL;
	}
	return m->cert;
}

EVP_PKEY *certmgr_current_key(struct certmgr *m)
{
	return m->cert && !expired_at(m->cert, clock_now()) ? m->key : NULL;
}

X509 *certmgr_held(struct certmgr *m, EVP_PKEY **key)
{
	*key = m->cert ? m->key : m->stale_key;
	return m->cert ? m->cert : m->stale_cert;
}

double certmgr_ttl_seconds(const struct certmgr *m)
{
	if (!m->cert || expired_at(m->cert, clock_now()))
		return INFINITY;
	return trunc((double)(pki_cert_not_after(m->cert) - clock_now()) / 1e9);
}

int certmgr_attempts(const struct certmgr *m)
{
	return m->attempts;
}

int certmgr_failing(const struct certmgr *m, const char **last_err)
{
	if (last_err)
		*last_err = m->failing ? m->last_err : NULL;
	return m->failing;
}

bool certmgr_server_healthy(const struct certmgr *m)
{
	return m->healthy;
}

unsigned certmgr_generation(const struct certmgr *m)
{
	return m->generation;
}

static void on_expiry(void *arg)
{
	struct certmgr *m = arg;
	if (!m->cert || !expired_at(m->cert, clock_now()))
		return;
	if (m->cfg.on_change)
		m->cfg.on_change(m->cfg.arg, NULL, NULL);
}

static void arm_expiry(struct certmgr *m)
{
	int64_t left;
	if (!m->cert)
		return;
	/* Current() turns nil the first nanosecond after NotAfter. */
	left = pki_cert_not_after(m->cert) - clock_now() + 1;
	timer_after(m->expiry, left > 0 ? left : 0);
}

/* Adopt a pair (owned) as current. */
static void set_pair(struct certmgr *m, X509 *cert, EVP_PKEY *key)
{
	X509_free(m->cert);
	EVP_PKEY_free(m->key);
	m->cert = cert;
	m->key = key;
	X509_free(m->stale_cert);
	EVP_PKEY_free(m->stale_key);
	m->stale_cert = NULL;
	m->stale_key = NULL;
	m->generation++;
	arm_expiry(m);
}

/* ---- loading ------------------------------------------------------------------------ */

/* The kubeconfig's own pair stands in when the store has nothing usable. */
static int seed_from_initial(struct certmgr *m, X509 **cert, EVP_PKEY **key)
{
	const char *pem = m->cfg.initial_pem;
	X509 *c = pem ? pki_cert_parse(pem, strlen(pem)) : NULL;
	EVP_PKEY *k = c ? pki_key_parse(pem, strlen(pem)) : NULL;

	if (!c || !k) {
		X509_free(c);
		EVP_PKEY_free(k);
		return -1;
	}
	if (certstore_update_pem(m->cfg.cert_dir, m->cfg.prefix, pem, NULL) < 0)
		LOG_UNHANDLED(m->cfg.log_kv,
			      "unable to set the cert/key pair to the bootstrap certificate: %s",
			      err_msg());
	*cert = c;
	*key = k;
	return 0;
}

/* getCurrentCertificateOrBootstrap: the store's pair unless it has expired;
 * then the initial (bootstrap) pair, rotated at once; else none, rotated at
 * once. */
/* The file store's Current() says where it reads from. */
static void say_loading(struct certmgr *m)
{
	char *cur = certstore_current_path(m->cfg.cert_dir, m->cfg.prefix);

	if (file_exists(cur))
		LOG_INFO("Loading cert/key pair from \"%s\".%s", cur, m->cfg.log_kv);
	else if (m->cfg.cert_file && m->cfg.key_file && file_exists(m->cfg.cert_file) &&
		 file_exists(m->cfg.key_file))
		LOG_INFO("Loading cert/key pair from (\"%s\", \"%s\").%s", m->cfg.cert_file,
			 m->cfg.key_file, m->cfg.log_kv);
	free(cur);
}

static int load(struct certmgr *m)
{
	X509 *cert = NULL, *c;
	EVP_PKEY *key = NULL, *k;
	int rc;

	say_loading(m);
	rc = certstore_load(m->cfg.cert_dir, m->cfg.prefix, m->cfg.cert_file, m->cfg.key_file,
			    &cert, &key);

	if (rc < 0 && rc != ERR_NOTFOUND)
		return rc;
	m->force = false;
	if (rc == 0 && !expired_at(cert, clock_now())) {
		set_pair(m, cert, key);
		return 0;
	}
	m->force = true;
	if (seed_from_initial(m, &c, &k) == 0) {
		X509_free(cert);
		EVP_PKEY_free(key);
		set_pair(m, c, k);
		return 0;
	}
	/* No current pair (upstream's cert is nil); the expired one is kept
	 * for a static transport to go on presenting. */
	m->stale_cert = cert;
	m->stale_key = key;
	return 0;
}

/* ---- rotation ------------------------------------------------------------------------ */

static void arm(struct certmgr *m, enum action next, int64_t delay)
{
	m->next = next;
	timer_after(m->timer, delay > 0 ? delay : 0);
}

static void list_text(const struct strv *l, char *buf, size_t n)
{
	size_t o = (size_t)snprintf(buf, n, "[");
	for (size_t i = 0; i < l->n && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? " " : "", l->v[i]);
	if (o < n)
		snprintf(buf + o, n - o, "]");
}

/* certSatisfiesTemplate; missing names are listed as a Go []string prints. */
static bool missing(struct certmgr *m, const struct strv *want, const struct strv *have,
		    const char *what)
{
	struct strv miss = STRV_INIT;
	char text[1024];
	bool any;

	for (size_t i = 0; i < want->n; i++)
		if (!strv_has(have, want->v[i]))
			strv_push(&miss, want->v[i]);
	strv_sort(&miss);
	if ((any = miss.n > 0)) {
		list_text(&miss, text, sizeof(text));
		MLOG(m, "Current certificate is missing requested %s %s", what, text);
	}
	strv_free(&miss);
	return any;
}

static bool satisfies_template(struct certmgr *m)
{
	struct pki_cert_info info;
	bool ok = true;

	if (!m->cert || pki_cert_info(m->cert, &info) < 0)
		return false;
	if (!m->cfg.cn || strcmp(info.cn ? info.cn : "", m->cfg.cn)) {
		MLOG(m, "Current certificate CN (%s) does not match requested CN (%s)",
		     info.cn ? info.cn : "", m->cfg.cn ? m->cfg.cn : "");
		ok = false;
	}
	ok = ok && !missing(m, &m->dns, &info.dns, "DNS names") &&
	     !missing(m, &m->ips, &info.ips, "IP addresses") &&
	     !missing(m, &m->orgs, &info.orgs, "orgs");
	pki_cert_info_free(&info);
	return ok;
}

static int64_t next_deadline(struct certmgr *m)
{
	int64_t nb, na, deadline;
	char a[GO_TIME_BUF], b[GO_TIME_BUF];

	if (m->force) {
		m->force = false;
		return clock_now();
	}
	if (!satisfies_template(m))
		return clock_now();
	nb = pki_cert_not_before(m->cert);
	na = pki_cert_not_after(m->cert);
	deadline = certmgr_rotation_deadline(nb, na, rand_double());
	MLOG(m, "Certificate expiration is %s, rotation deadline is %s", go_time_string(na, a),
	     go_time_string(deadline, b));
	return deadline;
}

static void attempt(struct certmgr *m);

/* The body of upstream's wait.Until loop: sleep until the deadline, then
 * rotate with backoff. */
static void cycle(struct certmgr *m)
{
	int64_t wait = next_deadline(m) - clock_now();
	char d[DURATION_BUF];

	if (wait > 0) {
		MLOG(m, "Waiting %s for next certificate rotation", duration_format(wait, d));
		arm(m, ACT_ROUND, wait);
		return;
	}
	m->failed = 0;
	m->polling = false;
	attempt(m);
}

static void renew_failed(struct certmgr *m, const char *why)
{
	int64_t d;

	if (m->cfg.renew_errors)
		metrics_inc(m->cfg.renew_errors);
	m->failed++;
	m->failing++;
	snprintf(m->last_err, sizeof(m->last_err), "%s", why ? why : "");
	if (m->polling) {
		arm(m, ACT_ATTEMPT, CERTMGR_POLL_NS);
		return;
	}
	d = certmgr_backoff_delay(m->failed, rand_double());
	if (d >= 0) {
		arm(m, ACT_ATTEMPT, d);
		return;
	}
	MERR(m, "%s", "Reached backoff limit, still unable to rotate certs: timed out waiting "
		      "for the condition");
	m->polling = true;
	/* wait.PollInfinite waits one interval before its first try. */
	arm(m, ACT_ATTEMPT, CERTMGR_POLL_NS);
}

/* The new pair is on disk: make it current. */
static void on_stored(void *arg, struct cred_write_result *res)
{
	struct certmgr *m = arg;

	m->store = NULL;
	if (res->rc < 0) {
		MERR(m, "Unable to store the new cert/key pair: %s", res->err);
		EVP_PKEY_free(m->pending);
		m->pending = NULL;
		renew_failed(m, res->err);
		return;
	}
	if (m->cfg.rotation_seconds && m->cert)
		metrics_observe(m->cfg.rotation_seconds,
				(double)(clock_now() - pki_cert_not_before(m->cert)) / 1e9);
	set_pair(m, res->cert, m->pending);
	m->pending = NULL;
	m->healthy = true;
	m->failing = 0;
	m->last_err[0] = '\0';
	if (m->cfg.on_change)
		m->cfg.on_change(m->cfg.arg, m->cert, m->key);
	/* wait.Until runs its body again one period after it returns. */
	arm(m, ACT_CYCLE, NS_PER_SEC);
}

static void on_csr_done(void *arg, const struct csr_result *res)
{
	struct certmgr *m = arg;

	m->req = NULL;
	if (res->rc < 0) {
		if (res->created) {
			MERR(m, "certificate request was not signed: %s", res->err);
		} else {
			MERR(m, "Failed while requesting a signed certificate from the control "
				"plane: %s",
			     res->err);
			/* updateServerError: a 401 may come from a TLS-terminating
			 * proxy, 403 and 404 are answers of a working server. */
			m->healthy = res->status == 401 || res->status == 403 ||
				     res->status == 404;
		}
		EVP_PKEY_free(m->pending);
		m->pending = NULL;
		renew_failed(m, res->err);
		return;
	}
	m->store = cred_write_start(m->loop,
				    &(struct cred_write_spec){.dir = m->cfg.cert_dir,
							      .prefix = m->cfg.prefix,
							      .cert_pem = res->cert_pem,
							      .key = m->pending},
				    on_stored, m);
}

static int make_csr(struct certmgr *m, char **csr_pem)
{
	EVP_PKEY_free(m->pending);
	if (!(m->pending = pki_key_new(PKI_KEY_ECDSA)))
		return err_wrap(ERR_CRYPTO, "%s: unable to generate a new private key",
				m->cfg.name);
	*csr_pem = pki_csr_new_pem(m->pending, m->cfg.cn, (const char *const *)m->orgs.v,
				   (const char *const *)m->dns.v, (const char *const *)m->ips.v, 0);
	if (!*csr_pem)
		return err_wrap(ERR_CRYPTO, "%s: unable to create a csr from the private key",
				m->cfg.name);
	return 0;
}

static void attempt(struct certmgr *m)
{
	struct rest_client *c;
	char *csr_pem = NULL;
	struct csr_spec spec;

	MLOG(m, "%s", "Rotating certificates");
	m->attempts++;
	if (make_csr(m, &csr_pem) < 0) {
		MERR(m, "Unable to generate a certificate signing request: %s", err_msg());
		renew_failed(m, err_msg());
		return;
	}
	c = m->cfg.client ? m->cfg.client(m->cfg.arg, certmgr_current(m) != NULL) : NULL;
	if (!c) {
		MERR(m, "Unable to load a client to request certificates: %s",
		     err_msg()[0] ? err_msg() : "no client");
		free(csr_pem);
		renew_failed(m, err_msg()[0] ? err_msg() : "no client");
		return;
	}
	spec = (struct csr_spec){.csr_pem = csr_pem,
				 .signer = m->cfg.signer,
				 .usages = (const char *const *)m->usages.v,
				 .timeout_ns = CERTMGR_WAIT_NS,
				 .server = m->cfg.server,
				 .log_kv = m->cfg.log_kv};
	m->req = csr_request_start(m->loop, c, &spec, on_csr_done, m);
	free(csr_pem);
}

static void on_timer(void *arg)
{
	struct certmgr *m = arg;
	switch (m->next) {
	case ACT_CYCLE:
		cycle(m);
		break;
	case ACT_ROUND:
		m->failed = 0;
		m->polling = false;
		attempt(m);
		break;
	case ACT_ATTEMPT:
		attempt(m);
		break;
	}
}

int certmgr_start(struct certmgr *m)
{
	int rc;

	if ((rc = load(m)) < 0)
		return rc;
	if (m->cfg.rotate) {
		MLOG(m, "%s", "Certificate rotation is enabled");
		arm(m, ACT_CYCLE, 0);
	}
	return 0;
}

/* Whatever rotation was doing is moot now. */
static void drop_request(struct certmgr *m)
{
	csr_request_cancel(m->req);
	m->req = NULL;
	cred_write_cancel(m->store);
	m->store = NULL;
	EVP_PKEY_free(m->pending);
	m->pending = NULL;
}

int certmgr_reload(struct certmgr *m)
{
	X509 *cert;
	EVP_PKEY *key;
	int rc = certstore_load(m->cfg.cert_dir, m->cfg.prefix, NULL, NULL, &cert, &key);

	if (rc < 0)
		return rc;
	drop_request(m);
	m->force = false;
	set_pair(m, cert, key);
	if (m->cfg.on_change && certmgr_current(m))
		m->cfg.on_change(m->cfg.arg, m->cert, m->key);
	if (m->cfg.rotate)
		arm(m, ACT_CYCLE, NS_PER_SEC);
	return 0;
}

void certmgr_rotate_now(struct certmgr *m)
{
	drop_request(m);
	m->force = true;
	arm(m, ACT_CYCLE, 0);
}

void certmgr_free(struct certmgr *m)
{
	if (!m)
		return;
	csr_request_cancel(m->req);
	cred_write_cancel(m->store);
	timer_free(m->timer);
	timer_free(m->expiry);
	X509_free(m->cert);
	EVP_PKEY_free(m->key);
	X509_free(m->stale_cert);
	EVP_PKEY_free(m->stale_key);
	EVP_PKEY_free(m->pending);
	free((char *)m->cfg.name);
	free((char *)m->cfg.log_kv);
	free((char *)m->cfg.signer);
	free((char *)m->cfg.server);
	free((char *)m->cfg.cert_dir);
	free((char *)m->cfg.prefix);
	free((char *)m->cfg.cert_file);
	free((char *)m->cfg.key_file);
	pki_secret_free((char *)m->cfg.initial_pem);
	free((char *)m->cfg.cn);
	strv_free(&m->orgs);
	strv_free(&m->dns);
	strv_free(&m->ips);
	strv_free(&m->usages);
	free(m);
}
