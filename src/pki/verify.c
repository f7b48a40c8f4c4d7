#include "pki/internal.h"

#include "base/err.h"
#include "base/timeutil.h"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

/* Go's crypto/x509 wording for what OpenSSL found. */
static int verify_error(X509_STORE_CTX *ctx, int64_t at_ns)
{
	int e = X509_STORE_CTX_get_error(ctx);
	X509 *bad = X509_STORE_CTX_get_current_cert(ctx);
	char now[TIME_BUF], edge[TIME_BUF];

	switch (e) {
	case X509_V_ERR_CERT_HAS_EXPIRED:
	case X509_V_ERR_CERT_NOT_YET_VALID: {
		bool expired = e == X509_V_ERR_CERT_HAS_EXPIRED;
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
	int r = 0;

	for (int i = 0; i < sk_X509_num(roots); i++)
		X509_STORE_add_cert(store, sk_X509_value(roots, i));
	if (!X509_STORE_CTX_init(ctx, store, cert, intermediates)) {
		r = pki_ossl_err("verify");
		goto out;
	}
	/* Time comes from our clock, never OpenSSL's idea of now. */
	X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), (time_t)(at_ns / 1000000000));
	if (purpose != PKI_PURPOSE_ANY)
		X509_STORE_CTX_set_purpose(ctx, purpose == PKI_PURPOSE_CLIENT
							? X509_PURPOSE_SSL_CLIENT
							: X509_PURPOSE_SSL_SERVER);
	if (X509_verify_cert(ctx) != 1)
		r = verify_error(ctx, at_ns);
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
