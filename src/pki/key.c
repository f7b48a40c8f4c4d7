#include "pki/internal.h"

#include "base/err.h"

#include <openssl/core_names.h>
#include <openssl/encoder.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pki_ossl_fail(int code, const char *what)
{
	unsigned long e = ERR_get_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return err_set(code, "%s: %s", what, reason ? reason : "unknown error");
}

int pki_ossl_err(const char *what)
{
	return pki_ossl_fail(ERR_CRYPTO, what);
}

EVP_PKEY *pki_key_new(enum pki_key_type type)
{
	EVP_PKEY *k;

	if (type == PKI_KEY_RSA)
		k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	else
		k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!k)
		pki_ossl_err("generate key");
	return k;
}

int pki_key_type_parse(const char *s, enum pki_key_type *out)
{
	if (strcmp(s, "ecdsa") == 0)
		*out = PKI_KEY_ECDSA;
	else if (strcmp(s, "rsa") == 0)
		*out = PKI_KEY_RSA;
	else
		return err_set(ERR_INVALID, "unknown key type \"%s\" (want ecdsa or rsa)", s);
	return 0;
}

bool pki_key_is_rsa(const EVP_PKEY *key)
{
	return EVP_PKEY_is_a(key, "RSA");
}

const char *pki_key_describe(const EVP_PKEY *key, char *buf, size_t n)
{
	char group[64];

	if (EVP_PKEY_is_a(key, "RSA")) {
		snprintf(buf, n, "RSA %d", EVP_PKEY_get_bits(key));
	} else if (EVP_PKEY_is_a(key, "EC") &&
		   EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group,
						  sizeof(group), NULL)) {
		const char *nist = strcmp(group, "prime256v1") == 0   ? "P-256"
				   : strcmp(group, "secp384r1") == 0  ? "P-384"
				   : strcmp(group, "secp521r1") == 0  ? "P-521"
								      : group;
		snprintf(buf, n, "ECDSA %s", nist);
	} else {
		snprintf(buf, n, "%s", EVP_PKEY_get0_type_name(key));
	}
	return buf;
}

static char *bio_take(BIO *b)
{
	char *data, *out;
	long len = BIO_get_mem_data(b, &data);

	out = malloc((size_t)len + 1);
	if (!out)
		abort();
	memcpy(out, data, (size_t)len);
	out[len] = '\0';
	BIO_free(b);
	return out;
}

char *pki_key_pem(EVP_PKEY *key)
{
	BIO *b = BIO_new(BIO_s_mem());
	/* "type-specific" is SEC1 / PKCS#1: the blocks Go's keyutil writes. */
	OSSL_ENCODER_CTX *ctx =
		OSSL_ENCODER_CTX_new_for_pkey(key, EVP_PKEY_KEYPAIR, "PEM", "type-specific", NULL);

	if (!ctx || OSSL_ENCODER_CTX_get_num_encoders(ctx) == 0 || !OSSL_ENCODER_to_bio(ctx, b)) {
		OSSL_ENCODER_CTX_free(ctx);
		BIO_free(b);
		pki_ossl_err("encode key");
		return NULL;
	}
	OSSL_ENCODER_CTX_free(ctx);
	return bio_take(b);
}

EVP_PKEY *pki_key_parse(const char *pem, size_t len)
{
	BIO *b;
	EVP_PKEY *k;

	if (pki_pem_check(pem, len, "PRIVATE KEY") < 0)
		return NULL;
	b = BIO_new_mem_buf(pem, (int)len);
	k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	BIO_free(b);
	if (!k)
		pki_ossl_fail(ERR_PARSE, "bad private key");
	return k;
}

char *pki_pubkey_pem(EVP_PKEY *key)
{
	BIO *b = BIO_new(BIO_s_mem());

	/* "PUBLIC KEY" (PKIX), as kubeadm writes sa.pub. */
	if (!b || PEM_write_bio_PUBKEY(b, key) != 1) {
		BIO_free(b);
		pki_ossl_err("encode public key");
		return NULL;
	}
	return bio_take(b);
}

EVP_PKEY *pki_pubkey_parse(const char *pem, size_t len)
{
	BIO *b;
	EVP_PKEY *k = NULL;

	if (pki_pem_check(pem, len, NULL) < 0)
		return NULL;
	/* What --service-account-key-file takes: a public key, a private key
	 * (its public half) or a certificate (its key). */
	b = BIO_new_mem_buf(pem, (int)len);
	if (memmem(pem, len, "-----BEGIN PUBLIC KEY-----", 26)) {
		k = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
	} else if (memmem(pem, len, "-----BEGIN CERTIFICATE-----", 27)) {
		X509 *c = PEM_read_bio_X509(b, NULL, NULL, NULL);
		if (c && (k = X509_get0_pubkey(c)))
			EVP_PKEY_up_ref(k);
		X509_free(c);
	} else {
		k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	}
	BIO_free(b);
	if (!k)
		pki_ossl_fail(ERR_PARSE, "no public key, private key or certificate");
	return k;
}

bool pki_keys_match(EVP_PKEY *a, EVP_PKEY *b)
{
	bool ok = EVP_PKEY_eq(a, b) == 1;
	ERR_clear_error();
	return ok;
}

bool pki_key_matches(X509 *cert, EVP_PKEY *key)
{
	bool ok = X509_check_private_key(cert, key) == 1;
	ERR_clear_error();
	return ok;
}

int pki_token_new(char buf[24])
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[64];
	size_t out = 0;

	while (out < 22) {
		if (RAND_bytes(r, sizeof(r)) != 1)
			return pki_ossl_err("random token");
		/* 252 = 7 * 36: rejecting above it keeps every letter equally likely. */
		for (size_t i = 0; i < sizeof(r) && out < 22; i++)
			if (r[i] < 252)
				buf[out < 6 ? out : out + 1] = alphabet[r[i] % 36], out++;
	}
	buf[6] = '.';
	buf[23] = '\0';
	return 0;
}

bool pki_token_valid(const char *t)
{
	if (strlen(t) != 23 || t[6] != '.')
		return false;
	for (int i = 0; i < 23; i++) {
		if (i == 6)
			continue;
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9')))
			return false;
	}
	return true;
}
