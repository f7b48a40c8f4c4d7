/*
 * csrsigning — upstream's four in-tree signers (kubelet-serving,
 * kube-apiserver-client-kubelet, kube-apiserver-client, legacy-unknown) with
 * the cluster CA: an approved, not failed, not yet issued CSR of one of them
 * is checked against that signer's rules (a Failed/SignerValidationFailure
 * condition when it breaks them) and signed with upstream's policy
 * (pki_csr_sign: 5 min backdate, 8 h "short"), the certificate written to
 * status.certificate through /status.
 *
 * The CA is upstream's dynamic certificate content: the files are looked at
 * again before each signature and re-read when they changed on disk; a
 * broken new pair is logged and the last good one kept.
 *
 * One queue serves the four signers (upstream runs one controller each over
 * the same informer; each handles only its own signerName).
 */
#include "controllers/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct stamp {
	bool ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

struct csrsigning {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct workqueue *q;
	struct job_list jobs;
	X509 *ca;
	EVP_PKEY *ca_key;
	struct stamp cert_st, key_st; /* of the files last looked at */
};

static const char *const signers[] = {SIGNER_KUBELET_SERVING, SIGNER_KUBELET_CLIENT,
				      SIGNER_APISERVER_CLIENT, SIGNER_LEGACY_UNKNOWN};
static const char *const controller_names[] = {
	"csrsigning-kubelet-serving", "csrsigning-kubelet-client",
	"csrsigning-kube-apiserver-client", "csrsigning-legacy-unknown"};

static const char *name_of(const struct job *j)
{
	return jx_str(j->csr, "metadata.name") ?: j->key;
}

/* ---- the CA ------------------------------------------------------------------------ */

static struct stamp stamp_of(const char *path)
{
	struct stamp s = {0};
	struct stat st;
	if (stat(path, &st) == 0) {
		s.ok = true;
		s.dev = st.st_dev;
		s.ino = st.st_ino;
		s.size = st.st_size;
		s.mtime = st.st_mtim;
	}
	return s;
}

static bool stamp_eq(const struct stamp *a, const struct stamp *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* upstream's caProvider.setCA: exactly one certificate, a key that is its pair. */
static int load_ca(const char *cert_path, const char *key_path, X509 **ca, EVP_PKEY **key)
{
	STACK_OF(X509) *certs = NULL;
	char *text = NULL;
	size_t len;
	int n;

	*ca = NULL;
	*key = NULL;
	if (file_read(cert_path, &text, &len, 1 << 20) < 0)
		return err_wrap(ERR_INVALID, "error reading CA cert file \"%s\"", cert_path);
	if (pki_certs_parse(text, len, &certs) < 0) {
		free(text);
		return err_wrap(ERR_INVALID, "error reading CA cert file \"%s\"", cert_path);
	}
	free(text);
	if ((n = sk_X509_num(certs)) != 1) {
		sk_X509_pop_free(certs, X509_free);
		return err_set(ERR_INVALID,
			       "error reading CA cert file \"%s\": expected 1 certificate, found %d",
			       cert_path, n);
	}
	*ca = sk_X509_shift(certs);
	sk_X509_pop_free(certs, X509_free);
	if (!(*key = pki_key_load(key_path))) {
		X509_free(*ca);
		*ca = NULL;
		return err_wrap(ERR_INVALID, "error reading CA key file \"%s\"", key_path);
	}
	if (!pki_key_matches(*ca, *key)) {
		X509_free(*ca);
		EVP_PKEY_free(*key);
		*ca = NULL;
		*key = NULL;
		return err_set(ERR_INVALID, "tls: private key does not match public key");
	}
	return 0;
}

int csrsigning_check_ca(const char *cert_path, const char *key_path)
{
	X509 *ca;
	EVP_PKEY *key;
	int rc = load_ca(cert_path, key_path, &ca, &key);

	X509_free(ca);
	EVP_PKEY_free(key);
	return rc;
}

/* Before each signature: re-read the files if either changed on disk. */
static void refresh_ca(struct csrsigning *c)
{
	struct stamp cs = stamp_of(c->m->signing_cert), ks = stamp_of(c->m->signing_key);
	X509 *ca;
	EVP_PKEY *key;
	char q[1024];

	if (stamp_eq(&cs, &c->cert_st) && stamp_eq(&ks, &c->key_st))
		return;
	c->cert_st = cs;
	c->key_st = ks;
	if (load_ca(c->m->signing_cert, c->m->signing_key, &ca, &key) < 0) {
		/* Half-written or broken: keep signing with the last good pair. */
		log_quote(q, sizeof(q), err_msg());
		LOG_ERROR("\"Unhandled Error\" err=\"key failed with : %s\" logger=\"UnhandledError\"",
			  q);
		return;
	}
	if (X509_cmp(ca, c->ca) == 0 && EVP_PKEY_eq(key, c->ca_key) == 1) {
		X509_free(ca);
		EVP_PKEY_free(key);
		return;
	}
	X509_free(c->ca);
	EVP_PKEY_free(c->ca_key);
	c->ca = ca;
	c->ca_key = key;
	LOG_V(2, "\"Loaded a new cert/key pair\" name=\"csr-controller::%s::%s\"", c->m->signing_cert,
	      c->m->signing_key);
}

/* ---- policy ---------------------------------------------------------------------------- */

int64_t csrsigning_duration(int64_t cluster_ns, const json_t *csr)
{
	const json_t *exp = jx_get(csr, "spec.expirationSeconds");
	int64_t want;

	if (!json_is_integer(exp))
		return cluster_ns;
	want = (int64_t)json_integer_value(exp) * NS_PER_SEC;
	if (want > cluster_ns)
		return cluster_ns;
	if (want < 10 * NS_PER_MIN) /* twice the backdate: a sanity floor */
		return 10 * NS_PER_MIN;
	return want;
}

/* upstream's validAPIServerClientUsages, in spec.usages order. */
static const char *apiserver_client_usages(const json_t *csr, char *buf, size_t n)
{
	json_t *u;
	size_t i;
	bool client = false;

	json_array_foreach(jx_get(csr, "spec.usages"), i, u)
	{
		const char *s = json_string_value(u) ?: "";
		if (!strcmp(s, "client auth"))
			client = true;
		else if (strcmp(s, "digital signature") && strcmp(s, "key encipherment")) {
			snprintf(buf, n, "invalid usage for client certificate: %s", s);
			return buf;
		}
	}
	if (!client) {
		snprintf(buf, n, "missing required usage for client certificate: client auth");
		return buf;
	}
	return NULL;
}

/* The signer's rules for this request: NULL when they hold, else why not. */
static const char *signer_check(const char *signer, const json_t *csr, X509_REQ *req, char *buf,
				size_t n)
{
	struct pki_csr_info info;
	const char *why = NULL;
	unsigned usages;
	bool bad;

	if (!strcmp(signer, SIGNER_LEGACY_UNKNOWN))
		return NULL; /* no restrictions, for v1beta1 compatibility */
	if (!strcmp(signer, SIGNER_APISERVER_CLIENT))
		return apiserver_client_usages(csr, buf, n);
	usages = csr_usages(csr, &bad);
	pki_csr_info(req, &info);
	if (!strcmp(signer, SIGNER_KUBELET_CLIENT))
		why = csr_check_kubelet_client(&info, usages, bad, buf, n);
	else
		why = csr_check_kubelet_serving(&info, usages, bad, buf, n);
	pki_csr_info_free(&info);
	return why;
}

/* ---- writing the result ----------------------------------------------------------------- */

static void on_failed_written(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct csrsigning *c = j->ctl;
	char msg[1024], why[900];

	if (status == 200) {
		job_done(&c->jobs, j, false);
		return;
	}
	snprintf(msg, sizeof(msg), "error adding failure condition for csr: %s",
		 api_error(why, sizeof(why), status, body, err));
	sync_failed(j->key, msg, false);
	job_done(&c->jobs, j, true);
}

static void on_issued(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct csrsigning *c = j->ctl;
	char msg[1024], why[900];

	if (status == 200) {
		job_done(&c->jobs, j, false);
		return;
	}
	snprintf(msg, sizeof(msg), "error updating signature for csr: %s",
		 api_error(why, sizeof(why), status, body, err));
	sync_failed(j->key, msg, false);
	job_done(&c->jobs, j, true);
}

static void fail_validation(struct csrsigning *c, struct job *j, const char *signer,
			    const char *why)
{
	json_t *next = csr_with_condition(j->csr, "Failed", "SignerValidationFailure", why);
	char path[512], q[1024];

	log_quote(q, sizeof(q), why);
	LOG_INFO("\"Signer refused the request\" csr=\"%s\" signerName=\"%s\" "
		 "reason=\"SignerValidationFailure\" message=\"%s\"",
		 name_of(j), signer, q);
	rest_do(c->rest, "PUT", csr_path(path, sizeof(path), name_of(j), "status"), next,
		on_failed_written, j);
	json_decref(next);
}

static void sign(struct csrsigning *c, struct job *j, const char *signer, X509_REQ *req)
{
	bool bad;
	struct pki_sign_policy pol = {
		.ttl_ns = csrsigning_duration(c->m->signing_duration_ns, j->csr),
		.backdate_ns = PKI_BACKDATE_NS,
		.short_ns = PKI_SHORT_NS,
		.usages = csr_usages(j->csr, &bad),
	};
	int64_t not_before, not_after;
	char *pem, *b64, path[512], msg[1024], nb[TIME_BUF], na[TIME_BUF];
	json_t *next;

	refresh_ca(c);
	if (!(pem = pki_csr_sign_pem(req, c->ca, c->ca_key, &pol, &not_before, &not_after))) {
		snprintf(msg, sizeof(msg), "error auto signing csr: %s", err_msg());
		sync_failed(j->key, msg, false);
		job_done(&c->jobs, j, true);
		return;
	}
	b64 = b64_encode(pem, strlen(pem));
	LOG_INFO("\"Signed certificate\" csr=\"%s\" signerName=\"%s\" notBefore=\"%s\" "
		 "notAfter=\"%s\"",
		 name_of(j), signer, time_format_rfc3339(not_before, nb),
		 time_format_rfc3339(not_after, na));
	next = json_deep_copy(j->csr);
	jx_set(next, "status.certificate", json_string(b64));
	rest_do(c->rest, "PUT", csr_path(path, sizeof(path), name_of(j), "status"), next,
		on_issued, j);
	json_decref(next);
	free(b64);
	free(pem);
}

/* ---- the queue --------------------------------------------------------------------------- */

static bool known_signer(const char *s)
{
	for (size_t i = 0; i < sizeof(signers) / sizeof(signers[0]); i++)
		if (!strcmp(s, signers[i]))
			return true;
	return false;
}

static void process(void *arg, const char *key)
{
	struct csrsigning *c = arg;
	json_t *csr = informer_get(c->m->csrs, key);
	struct job *j = job_new(&c->jobs, c->q, key, c);
	const char *signer;
	X509_REQ *req;
	char why[512], msg[1024];

	if (!csr) {
		LOG_V(3, "\"csr has been deleted\" csr=\"%s\"", key);
		job_done(&c->jobs, j, false);
		return;
	}
	signer = jx_str(csr, "spec.signerName") ?: "";
	/* Unapproved, failed, already issued or not ours: nothing to do. */
	if (csr_issued(csr) || !csr_approved(csr) || csr_condition_true(csr, "Failed") ||
	    !known_signer(signer)) {
		job_done(&c->jobs, j, false);
		return;
	}
	j->csr = json_deep_copy(csr);
	if (!(req = csr_request(j->csr))) {
		snprintf(msg, sizeof(msg), "unable to parse csr \"%s\": %s", name_of(j), err_msg());
		sync_failed(j->key, msg, false);
		job_done(&c->jobs, j, true);
		return;
	}
	if (signer_check(signer, j->csr, req, why, sizeof(why)))
		fail_validation(c, j, signer, why);
	else
		sign(c, j, signer, req);
	X509_REQ_free(req);
}

struct csrsigning *csrsigning_new(struct controller_manager *m)
{
	struct csrsigning *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->rest = cm_client(m, "certificate-controller");
	c->m = m;
	c->cert_st = stamp_of(m->signing_cert);
	c->key_st = stamp_of(m->signing_key);
	if (load_ca(m->signing_cert, m->signing_key, &c->ca, &c->ca_key) < 0) {
		err_wrap(ERR_INVALID, "failed to start %s certificate controller", signers[0]);
		free(c);
		return NULL;
	}
	LOG_V(2, "\"Loaded a new cert/key pair\" name=\"csr-controller::%s::%s\"", m->signing_cert,
	      m->signing_key);
	c->q = csr_queue_new(m, process, c);
	for (size_t i = 0; i < 4; i++) {
		LOG_INFO("\"Starting certificate controller\" name=\"%s\"", controller_names[i]);
		LOG_INFO("\"Waiting for caches to sync\" controller=\"certificate-%s\"",
			 controller_names[i]);
	}
	return c;
}

void csrsigning_enqueue(struct csrsigning *c, const char *key)
{
	workqueue_add(c->q, key);
}

void csrsigning_free(struct csrsigning *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < 4; i++)
		LOG_INFO("\"Shutting down certificate controller\" name=\"%s\"", controller_names[i]);
	job_list_free(&c->jobs);
	workqueue_free(c->q);
	X509_free(c->ca);
	EVP_PKEY_free(c->ca_key);
	free(c);
}
