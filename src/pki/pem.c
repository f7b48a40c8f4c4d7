#include "pki/internal.h"

#include "base/err.h"
#include "base/file.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PEM_MAX (4 << 20) /* a certificate file over 4 MiB is not one */

/* "EC PRIVATE KEY" is a "PRIVATE KEY"; "CERTIFICATE REQUEST" is no "CERTIFICATE". */
static bool label_is(const char *label, size_t n, const char *want)
{
	size_t wn = strlen(want);
	if (n == wn)
		return memcmp(label, want, n) == 0;
	return !strcmp(want, "PRIVATE KEY") && n > wn && label[n - wn - 1] == ' ' &&
	       memcmp(label + n - wn, want, wn) == 0;
}

/*
 * OpenSSL's own messages for a broken PEM ("no start line", "bad end line")
 * are obscure; name the three cases users actually meet.
 */
int pki_pem_check(const char *buf, size_t len, const char *want)
{
	static const char begin[] = "-----BEGIN ";
	const char *p = memmem(buf, len, begin, sizeof(begin) - 1), *end = buf + len;
	bool found = false;

	if (!p)
		return err_set(ERR_PARSE, "not a PEM file (no \"-----BEGIN\" line)");
	while (p) {
		const char *label = p + sizeof(begin) - 1;
		const char *dash = memmem(label, (size_t)(end - label), "-----", 5);
		char endline[96];
		int n;

		if (!dash || dash - label > 64)
			return err_set(ERR_PARSE, "truncated PEM: damaged BEGIN line");
		n = snprintf(endline, sizeof(endline), "-----END %.*s-----", (int)(dash - label),
			     label);
		if (!memmem(dash, (size_t)(end - dash), endline, (size_t)n))
			return err_set(ERR_PARSE, "truncated PEM: no \"%s\" line", endline);
		if (!want || label_is(label, (size_t)(dash - label), want))
			found = true;
		p = memmem(dash, (size_t)(end - dash), begin, sizeof(begin) - 1);
	}
	if (!found)
		return err_set(ERR_PARSE, "no %s block in PEM data", want);
	return 0;
}

int pki_certs_parse(const char *pem, size_t len, STACK_OF(X509) **out)
{
	STACK_OF(X509) *certs;
	BIO *b;
	int r;

	if ((r = pki_pem_check(pem, len, "CERTIFICATE")) < 0)
		return r;
	certs = sk_X509_new_null();
	b = BIO_new_mem_buf(pem, (int)len);
	for (;;) {
		X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
		if (x) {
			sk_X509_push(certs, x);
			continue;
		}
		/* "no start line" after at least one certificate is the normal end. */
		if (ERR_GET_REASON(ERR_peek_last_error()) == PEM_R_NO_START_LINE &&
		    sk_X509_num(certs) > 0) {
			ERR_clear_error();
			break;
		}
		BIO_free(b);
		sk_X509_pop_free(certs, X509_free);
		return pki_ossl_fail(ERR_PARSE, "bad CERTIFICATE block");
	}
	BIO_free(b);
	*out = certs;
	return 0;
}

X509 *pki_cert_parse(const char *pem, size_t len)
{
	STACK_OF(X509) *certs;
	X509 *x;

	if (pki_certs_parse(pem, len, &certs) < 0)
		return NULL;
	x = sk_X509_shift(certs);
	sk_X509_pop_free(certs, X509_free);
	return x;
}

/* Reads path, runs parse on it, and prefixes any error with the path. */
#define LOAD_WITH(path, parse_call, type)                                                          \
	do {                                                                                       \
		char *buf;                                                                         \
		size_t len;                                                                        \
		type *obj;                                                                         \
		if (file_read(path, &buf, &len, PEM_MAX) < 0)                                      \
			return NULL;                                                               \
		obj = parse_call;                                                                  \
		free(buf);                                                                         \
		if (!obj)                                                                          \
			err_wrap(ERR_PARSE, "%s", path);                                           \
		return obj;                                                                        \
	} while (0)

X509 *pki_cert_load(const char *path)
{
	LOAD_WITH(path, pki_cert_parse(buf, len), X509);
}

EVP_PKEY *pki_key_load(const char *path)
{
	LOAD_WITH(path, pki_key_parse(buf, len), EVP_PKEY);
}

X509_REQ *pki_csr_load(const char *path)
{
	LOAD_WITH(path, pki_csr_parse(buf, len), X509_REQ);
}

int pki_pair_load(const char *path, X509 **cert, EVP_PKEY **key)
{
	char *buf;
	size_t len;
	int r;

	*cert = NULL;
	*key = NULL;
	if ((r = file_read(path, &buf, &len, PEM_MAX)) < 0)
		return r;
	*cert = pki_cert_parse(buf, len);
	if (*cert)
		*key = pki_key_parse(buf, len);
	free(buf);
	if (!*cert || !*key) {
		X509_free(*cert);
		*cert = NULL;
		return err_wrap(ERR_PARSE, "%s", path);
	}
	if (!pki_key_matches(*cert, *key)) {
		X509_free(*cert);
		EVP_PKEY_free(*key);
		*cert = NULL;
		*key = NULL;
		return err_set(ERR_INVALID, "%s: private key does not match public key", path);
	}
	return 0;
}

char *pki_cert_pem(X509 *cert)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long len;

	PEM_write_bio_X509(b, cert);
	len = BIO_get_mem_data(b, &data);
	if (!(out = strndup(data, (size_t)len)))
		abort();
	BIO_free(b);
	return out;
}

int pki_cert_save(const char *path, X509 *cert)
{
	char *pem = pki_cert_pem(cert);
	int r = file_write_atomic(path, pem, strlen(pem), 0644);
	free(pem);
	return r;
}

void pki_secret_free(char *s)
{
	if (s)
		OPENSSL_cleanse(s, strlen(s));
	free(s);
}

int pki_key_save(const char *path, EVP_PKEY *key)
{
	char *pem = pki_key_pem(key);
	int r;
	if (!pem)
		return ERR_CRYPTO;
	r = file_write_atomic(path, pem, strlen(pem), 0600);
	pki_secret_free(pem);
	return r;
}
