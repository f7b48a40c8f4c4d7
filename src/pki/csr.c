#include "pki/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/timeutil.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

/*
 * A SubjectPublicKeyInfo set as its algorithm and bits, without OpenSSL
 * 3.0's encoders and decoders: X509_REQ_set_pubkey and X509_set_pubkey
 * encode the key and decode the result again, about 150 us a key (each
 * builds a provider lookup), where this takes 4 (docs/performance.md). The
 * object's public key is then not decoded (X509_REQ_get0_pubkey and
 * X509_get0_pubkey give NULL), so only an object that is encoded and freed
 * at once is made this way (pki_csr_new_pem, pki_csr_sign_pem).
 */

/* An EC key on a named curve: its curve and point, as the encoder writes
 * them (uncompressed). 0 when the key is not one: use X509_*_set_pubkey. */
static int spki_from_ec_key(X509_PUBKEY *pk, EVP_PKEY *key)
{
	unsigned char point[256], *bits;
	char group[64];
	size_t n = 0;
	int curve;

	if (!EVP_PKEY_is_a(key, "EC") ||
	    !EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
					    NULL) ||
	    (curve = OBJ_sn2nid(group)) == NID_undef ||
	    !EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point,
					     sizeof(point), &n))
		return 0;
	if (!(bits = OPENSSL_memdup(point, n)))
		abort();
	if (!X509_PUBKEY_set0_param(pk, OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT,
				    OBJ_nid2obj(curve), bits, (int)n)) {
		OPENSSL_free(bits);
		return pki_ossl_err("set the public key");
	}
	return 1;
}

/* A request's key into a certificate as it is, any algorithm. */
static int spki_copy(X509_PUBKEY *dst, X509_PUBKEY *src)
{
	ASN1_OBJECT *alg;
	const ASN1_OBJECT *aobj;
	const unsigned char *bits;
	unsigned char *copy;
	X509_ALGOR *algor;
	const void *pval;
	void *param = NULL;
	int len, ptype;

	if (!X509_PUBKEY_get0_param(NULL, &bits, &len, &algor, src))
		return pki_ossl_err("read the request's public key");
	X509_ALGOR_get0(&aobj, &ptype, &pval, algor);
	if (ptype == V_ASN1_OBJECT)
		param = OBJ_dup(pval);
	else if (ptype == V_ASN1_SEQUENCE)
		param = ASN1_STRING_dup(pval);
	else if (ptype != V_ASN1_NULL && ptype != V_ASN1_UNDEF)
		return err_set(ERR_INVALID, "unsupported public key parameters");
	if (!(copy = OPENSSL_memdup(bits, (size_t)len)) || !(alg = OBJ_dup(aobj)))
		abort();
	if (!X509_PUBKEY_set0_param(dst, alg, ptype, param, copy, len)) {
		/* Not taken: still ours. */
		OPENSSL_free(copy);
		ASN1_OBJECT_free(alg);
		if (ptype == V_ASN1_OBJECT)
			ASN1_OBJECT_free(param);
		else
			ASN1_STRING_free(param);
		return pki_ossl_err("set the public key");
	}
	return 0;
}

static X509_REQ *csr_build(EVP_PKEY *key, const char *cn, const char *const *orgs,
			   const char *const *dns, const char *const *ips, unsigned usages,
			   bool key_as_bits)
{
	X509_REQ *req = X509_REQ_new();
	X509_NAME *name = pki_name_new(cn, orgs);
	STACK_OF(X509_EXTENSION) *exts = NULL;
	X509V3_CTX ctx;
	int r = 0;

	X509_REQ_set_version(req, X509_REQ_VERSION_1);
	X509_REQ_set_subject_name(req, name);
	X509_NAME_free(name);
	if (key_as_bits)
		r = spki_from_ec_key(X509_REQ_get_X509_PUBKEY(req), key);
	if (r == 0 && !X509_REQ_set_pubkey(req, key))
		r = pki_ossl_err("public key");
	r = r < 0 ? r : 0;
	X509V3_set_ctx(&ctx, NULL, NULL, req, NULL, 0);
	if (r == 0)
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

X509_REQ *pki_csr_new(EVP_PKEY *key, const char *cn, const char *const *orgs,
		      const char *const *dns, const char *const *ips, unsigned usages)
{
	return csr_build(key, cn, orgs, dns, ips, usages, false);
}

char *pki_csr_new_pem(EVP_PKEY *key, const char *cn, const char *const *orgs,
		      const char *const *dns, const char *const *ips, unsigned usages)
{
	X509_REQ *req = csr_build(key, cn, orgs, dns, ips, usages, true);
	char *pem = req ? pki_csr_pem(req) : NULL;

	X509_REQ_free(req);
	return pem;
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

static X509 *csr_sign(X509_REQ *req, X509 *ca, EVP_PKEY *ca_key,
		      const struct pki_sign_policy *pol, bool key_as_bits)
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
	if (key_as_bits)
		r = spki_copy(X509_get_X509_PUBKEY(x), X509_REQ_get_X509_PUBKEY(req));
	else
		r = X509_set_pubkey(x, X509_REQ_get0_pubkey(req)) ? 0 : pki_ossl_err("public key");
	if (r == 0)
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

X509 *pki_csr_sign(X509_REQ *req, X509 *ca, EVP_PKEY *ca_key, const struct pki_sign_policy *pol)
{
	return csr_sign(req, ca, ca_key, pol, false);
}

char *pki_csr_sign_pem(X509_REQ *req, X509 *ca, EVP_PKEY *ca_key,
		       const struct pki_sign_policy *pol, int64_t *not_before_ns,
		       int64_t *not_after_ns)
{
	X509 *x = csr_sign(req, ca, ca_key, pol, true);
	char *pem;

	if (!x)
		return NULL;
	pem = pki_cert_pem(x);
	*not_before_ns = pki_cert_not_before(x);
	*not_after_ns = pki_cert_not_after(x);
	X509_free(x);
	return pem;
}
