#include "pki/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/timeutil.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

X509_REQ *pki_csr_new(EVP_PKEY *key, const char *cn, const char *const *orgs,
		      const char *const *dns, const char *const *ips, unsigned usages)
{
	X509_REQ *req = X509_REQ_new();
	X509_NAME *name = pki_name_new(cn, orgs);
	STACK_OF(X509_EXTENSION) *exts = NULL;
	X509V3_CTX ctx;
	int r;

	X509_REQ_set_version(req, X509_REQ_VERSION_1);
	X509_REQ_set_subject_name(req, name);
	X509_NAME_free(name);
	X509_REQ_set_pubkey(req, key);
	X509V3_set_ctx(&ctx, NULL, NULL, req, NULL, 0);
	r = pki_exts_add_sans(&exts, dns, ips, &ctx);
	if (r == 0 && usages)
		r = pki_exts_add_usages(&exts, usages, &ctx);
	if (r == 0 && exts && !X509_REQ_add_extensions(req, exts))
		r = pki_ossl_err("add CSR extensions");
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	if (r == 0 && !X509_REQ_sign(req, key, EVP_sha256()))
		r = pki_ossl_err("sign CSR");
	if (r < 0) {
		X509_REQ_free(req);
		return NULL;
	}
	return req;
}

char *pki_csr_pem(X509_REQ *req)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long len;

	PEM_write_bio_X509_REQ(b, req);
	len = BIO_get_mem_data(b, &data);
	if (!(out = strndup(data, (size_t)len)))
		abort();
	BIO_free(b);
	return out;
}

int pki_csr_verify(X509_REQ *req)
{
	EVP_PKEY *pub = X509_REQ_get0_pubkey(req);
	if (!pub || X509_REQ_verify(req, pub) != 1) {
		ERR_clear_error();
		return err_set(ERR_INVALID, "x509: ECDSA verification failure or bad CSR signature");
	}
	return 0;
}

X509_REQ *pki_csr_parse(const char *pem, size_t len)
{
	BIO *b;
	X509_REQ *req;

	if (pki_pem_check(pem, len, "CERTIFICATE REQUEST") < 0)
		return NULL;
	b = BIO_new_mem_buf(pem, (int)len);
	req = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);
	BIO_free(b);
	if (!req) {
		pki_ossl_fail(ERR_PARSE, "bad CERTIFICATE REQUEST block");
		return NULL;
	}
	if (pki_csr_verify(req) < 0) {
		X509_REQ_free(req);
		return NULL;
	}
	return req;
}

int pki_csr_info(X509_REQ *req, struct pki_csr_info *out)
{
	STACK_OF(X509_EXTENSION) *exts = X509_REQ_get_extensions(req);
	EVP_PKEY *pub = X509_REQ_get0_pubkey(req);

	memset(out, 0, sizeof(*out));
	pki_name_read(X509_REQ_get_subject_name(req), &out->cn, &out->orgs);
	/* X509_REQ_get_extensions returns a new stack (or NULL): ours to free. */
	pki_exts_read(exts, &out->dns, &out->ips, &out->emails, &out->uris, &out->usages,
		      &out->has_usages);
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	if (pub) {
		out->key_rsa = pki_key_is_rsa(pub);
		pki_key_describe(pub, out->key, sizeof(out->key));
	}
	return 0;
}

void pki_csr_info_free(struct pki_csr_info *info)
{
	free(info->cn);
	strv_free(&info->orgs);
	strv_free(&info->dns);
	strv_free(&info->ips);
	strv_free(&info->emails);
	strv_free(&info->uris);
}

/* Copies the request's subjectAltName extension, exactly as requested. */
static int copy_sans(X509_REQ *req, X509 *x)
{
	STACK_OF(X509_EXTENSION) *exts = X509_REQ_get_extensions(req);
	int r = 0;

	for (int i = 0; i < sk_X509_EXTENSION_num(exts); i++) {
		X509_EXTENSION *ex = sk_X509_EXTENSION_value(exts, i);
		if (OBJ_obj2nid(X509_EXTENSION_get_object(ex)) == NID_subject_alt_name &&
		    !X509_add_ext(x, ex, -1))
			r = pki_ossl_err("copy subjectAltName");
	}
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	return r;
}

static int add_conf_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = ex && X509_add_ext(x, ex, -1);
	X509_EXTENSION_free(ex);
	return ok ? 0 : pki_ossl_err(value);
}

X509 *pki_csr_sign(X509_REQ *req, X509 *ca, EVP_PKEY *ca_key, const struct pki_sign_policy *pol)
{
	int64_t now = clock_now(), ca_after = pki_cert_not_after(ca), nb, na;
	STACK_OF(X509_EXTENSION) *exts = NULL;
	char when[TIME_BUF];
	X509V3_CTX ctx;
	X509 *x;
	int r;

	if (pki_csr_verify(req) < 0)
		return NULL;
	nb = now - pol->backdate_ns;
	/* A short-lived certificate keeps its whole requested life. */
	na = pol->ttl_ns < pol->short_ns ? now + pol->ttl_ns : now + pol->ttl_ns - pol->backdate_ns;
	if (na >= ca_after)
		na = ca_after;
	time_format_rfc3339(ca_after, when);
	if (nb >= ca_after) {
		err_set(ERR_INVALID, "the signer has expired: NotAfter=%s", when);
		return NULL;
	}
	if (now >= ca_after) {
		err_set(ERR_INVALID,
			"refusing to sign a certificate that expired in the past: NotAfter=%s",
			when);
		return NULL;
	}

	x = X509_new();
	X509_set_version(x, X509_VERSION_3);
	X509_set_subject_name(x, X509_REQ_get_subject_name(req));
	X509_set_issuer_name(x, X509_get_subject_name(ca));
	X509_set_pubkey(x, X509_REQ_get0_pubkey(req));
	r = pki_set_serial(x);
	if (r == 0 && (!ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(nb / NS_PER_SEC)) ||
		       !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(na / NS_PER_SEC))))
		r = pki_ossl_err("validity");
	X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
	if (r == 0)
		r = add_conf_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE");
	if (r == 0)
		r = pki_exts_add_usages(&exts, pol->usages, &ctx);
	for (int i = 0; r == 0 && i < sk_X509_EXTENSION_num(exts); i++)
		if (!X509_add_ext(x, sk_X509_EXTENSION_value(exts, i), -1))
			r = pki_ossl_err("add extension");
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	if (r == 0)
		r = add_conf_ext(x, &ctx, NID_authority_key_identifier, "keyid:always");
	if (r == 0)
		r = copy_sans(req, x);
	if (r == 0 && !X509_sign(x, ca_key, EVP_sha256()))
		r = pki_ossl_err("sign certificate");
	if (r < 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}
