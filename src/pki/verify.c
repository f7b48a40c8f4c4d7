#include "pki/internal.h"

#include "base/err.h"
#include "base/timeutil.h"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>
#include <stdbool.h>

/*
 * What Go would report first. OpenSSL walks the chain from the root down and
 * stops at the first error; Go checks the leaf's dates before anything else,
 * and a certificate is still valid at its NotAfter second. The callback
 * keeps going past errors and remembers the most relevant one.
 */
struct finding {
	int err;
	X509 *cert;
};

/* The date error nearest the leaf, and the first chain error. */
struct verdict {
	struct finding date, chain;
	int date_depth;
	int64_t at_ns; /* OpenSSL checks whole seconds; Go checks nanoseconds */
};

static int verdict_idx = -1;
static pthread_once_t verdict_once = PTHREAD_ONCE_INIT;

static void verdict_init(void)
{
	verdict_idx = X509_STORE_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static bool date_error(int e)
{
	return e == X509_V_ERR_CERT_HAS_EXPIRED || e == X509_V_ERR_CERT_NOT_YET_VALID;
}

static int collect(int ok, X509_STORE_CTX *ctx)
{
	struct verdict *v = X509_STORE_CTX_get_ex_data(ctx, verdict_idx);
	int e = X509_STORE_CTX_get_error(ctx), depth = X509_STORE_CTX_get_error_depth(ctx);
	X509 *cert = X509_STORE_CTX_get_current_cert(ctx);

	if (ok)
		return 1;
	if (!date_error(e)) {
		if (!v->chain.err)
			v->chain = (struct finding){e, cert};
		return 0; /* a broken chain ends the walk */
	}
	/* Exactly at NotAfter Go still says valid; a fraction of a second
	 * later (the same second for OpenSSL) it says expired. */
	if (e == X509_V_ERR_CERT_HAS_EXPIRED && cert && v->at_ns % 1000000000 == 0 &&
	    ASN1_TIME_cmp_time_t(X509_get0_notAfter(cert),
				 X509_VERIFY_PARAM_get_time(X509_STORE_CTX_get0_param(ctx))) == 0)
		return 1;
	if (!v->date.err || depth < v->date_depth) {
		v->date = (struct finding){e, cert};
		v->date_depth = depth;
	}
	return 1;
}

/* Go checks the leaf's own dates first, then the chain, then the rest. */
static const struct finding *verdict_pick(const struct verdict *v)
{
	if (v->date.err && v->date_depth == 0)
		return &v->date;
	if (v->chain.err)
		return &v->chain;
	return v->date.err ? &v->date : NULL;
}

/* Go's crypto/x509 wording for what OpenSSL found. */
static int verify_error(const struct finding *f, int64_t at_ns)
{
	return pki_verify_explain(f->err, f->cert, at_ns);
}

int pki_verify_explain(int e, X509 *bad, int64_t at_ns)
{
	char now[TIME_BUF], edge[TIME_BUF];

	switch (e) {
	case X509_V_ERR_CERT_HAS_EXPIRED:
	case X509_V_ERR_CERT_NOT_YET_VALID: {
		bool expired = e == X509_V_ERR_CERT_HAS_EXPIRED;
		if (!bad)
			return err_set(ERR_EXPIRED,
				       "x509: certificate has expired or is not yet valid");
		time_format_rfc3339_local(at_ns, now);
		time_format_rfc3339(expired ? pki_cert_not_after(bad) : pki_cert_not_before(bad),
				    edge);
		return err_set(ERR_EXPIRED,
			       "x509: certificate has expired or is not yet valid: current time "
			       "%s is %s %s",
			       now, expired ? "after" : "before", edge);
	}
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
	case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
	case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
	case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
	case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
	case X509_V_ERR_CERT_SIGNATURE_FAILURE:
		return err_set(ERR_UNAUTHORIZED, "x509: certificate signed by unknown authority");
	case X509_V_ERR_INVALID_PURPOSE:
		return err_set(ERR_UNAUTHORIZED,
			       "x509: certificate specifies an incompatible key usage");
	default:
		return err_set(ERR_UNAUTHORIZED, "x509: %s", X509_verify_cert_error_string(e));
	}
}

int pki_verify(X509 *cert, STACK_OF(X509) *intermediates, STACK_OF(X509) *roots, int64_t at_ns,
	       enum pki_purpose purpose)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	struct verdict v = {{0, NULL}, {0, NULL}, 0, at_ns};
	const struct finding *f;
	int r = 0, ok;

	pthread_once(&verdict_once, verdict_init);
	for (int i = 0; i < sk_X509_num(roots); i++)
		X509_STORE_add_cert(store, sk_X509_value(roots, i));
	if (!X509_STORE_CTX_init(ctx, store, cert, intermediates)) {
		r = pki_ossl_err("verify");
		goto out;
	}
	/* Time comes from our clock, never OpenSSL's idea of now. Every
	 * certificate in roots is trusted, self-signed or not, as in Go. */
	X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), (time_t)(at_ns / 1000000000));
	X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), X509_V_FLAG_PARTIAL_CHAIN);
	X509_STORE_CTX_set_ex_data(ctx, verdict_idx, &v);
	X509_STORE_CTX_set_verify_cb(ctx, collect);
	if (purpose != PKI_PURPOSE_ANY)
		X509_STORE_CTX_set_purpose(ctx, purpose == PKI_PURPOSE_CLIENT
							? X509_PURPOSE_SSL_CLIENT
							: X509_PURPOSE_SSL_SERVER);
	ok = X509_verify_cert(ctx);
	if ((f = verdict_pick(&v)))
		r = verify_error(f, at_ns);
	else if (ok != 1)
		r = err_set(ERR_UNAUTHORIZED, "x509: %s",
			    X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
out:
	ERR_clear_error();
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return r;
}

int pki_verify_with(X509 *cert, X509 *root, int64_t at_ns, enum pki_purpose purpose)
{
	STACK_OF(X509) *roots = sk_X509_new_null();
	int r;

	sk_X509_push(roots, root);
	r = pki_verify(cert, NULL, roots, at_ns, purpose);
	sk_X509_free(roots);
	return r;
}
