/*
 * Helpers shared by the files of src/pki; not part of the module's contract.
 */
#ifndef CUBE_PKI_INTERNAL_H
#define CUBE_PKI_INTERNAL_H

#include "pki/pki.h"

#include <openssl/x509v3.h>

/* ERR_CRYPTO with "what: <OpenSSL's reason>"; clears OpenSSL's queue. */
int pki_ossl_err(const char *what);
/* The same with another code (ERR_PARSE for data that does not decode). */
int pki_ossl_fail(int code, const char *what);
/* SANs and usages found in a certificate's or a request's extensions. */
void pki_exts_read(const STACK_OF(X509_EXTENSION) *exts, struct strv *dns, struct strv *ips,
		   struct strv *emails, struct strv *uris, unsigned *usages, bool *has_usages);
/* Add keyUsage / extendedKeyUsage extensions for `usages` to a stack. */
int pki_exts_add_usages(STACK_OF(X509_EXTENSION) **exts, unsigned usages, X509V3_CTX *ctx);
/* Add a subjectAltName extension for dns/ips (none when both empty). */
int pki_exts_add_sans(STACK_OF(X509_EXTENSION) **exts, const char *const *dns,
		      const char *const *ips, X509V3_CTX *ctx);
/* Build a name with O's first then CN, the order Go's pkix.Name writes. */
X509_NAME *pki_name_new(const char *cn, const char *const *orgs);
/* Classify a PEM text before OpenSSL reads it: "not a PEM file", "truncated". */
int pki_pem_check(const char *buf, size_t len, const char *want);
/* A random positive 127-bit serial. */
int pki_set_serial(X509 *x);
int64_t pki_asn1_time_ns(const ASN1_TIME *t);

#endif
