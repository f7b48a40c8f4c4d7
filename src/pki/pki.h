/*
 * pki — keys, certificates, CSRs and CA signing, as a Kubernetes cluster
 * makes and checks them (OpenSSL 3 EVP/X509 APIs).
 *
 * Ownership: functions named _new, _parse, _load, _sign return objects the
 * caller owns and frees with the OpenSSL free function of the type
 * (EVP_PKEY_free, X509_free, X509_REQ_free, sk_X509_pop_free(s, X509_free)) or the
 * pki_*_free named beside them; char * results are malloc'd. Arguments are
 * borrowed.
 *
 * Time: every validity decision takes its time from the process clock
 * (base/clock.h) or from an explicit `at_ns`, never from OpenSSL's idea of
 * now — so tests and the simulator can move time.
 *
 * Errors: 0 or a negative code (base/err.h) with a one-line err_msg(); the
 * verification messages are Go's crypto/x509 texts, as the API server logs.
 *
 * Threads: any; nothing here keeps state between calls.
 */
#ifndef CUBE_PKI_PKI_H
#define CUBE_PKI_PKI_H

#include "base/strv.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- keys ---------------------------------------------------------------- */

enum pki_key_type {
	PKI_KEY_ECDSA, /* P-256, the kubelet's and cube's default */
	PKI_KEY_RSA,   /* 2048 bits, kubeadm's default */
};

EVP_PKEY *pki_key_new(enum pki_key_type type);
/* "ecdsa" / "rsa" → type; ERR_INVALID otherwise. */
int pki_key_type_parse(const char *s, enum pki_key_type *out);
/* "ECDSA P-256", "RSA 2048", ... (static string or into buf). */
const char *pki_key_describe(const EVP_PKEY *key, char *buf, size_t n);
bool pki_key_is_rsa(const EVP_PKEY *key);
/* Private key PEM in the traditional form Go writes: "EC PRIVATE KEY" (SEC1)
 * or "RSA PRIVATE KEY" (PKCS#1). */
char *pki_key_pem(EVP_PKEY *key);
/* Free text that holds a secret (a key's PEM, a kubeconfig), cleansed
 * first. NULL is a no-op. */
void pki_secret_free(char *s);
EVP_PKEY *pki_key_parse(const char *pem, size_t len);
/* "PUBLIC KEY" PEM (PKIX), as kubeadm's sa.pub. */
char *pki_pubkey_pem(EVP_PKEY *key);
/* A verification key from a PEM: PUBLIC KEY, a private key's public half or
 * a CERTIFICATE's key. */
EVP_PKEY *pki_pubkey_parse(const char *pem, size_t len);
/* Same public key (either may be a private key). */
bool pki_keys_match(EVP_PKEY *a, EVP_PKEY *b);
/* True when cert's public key is the public half of key. */
bool pki_key_matches(X509 *cert, EVP_PKEY *key);

/* ---- usages (Kubernetes' names: "digital signature", "client auth", ...) -- */

enum pki_usage {
	PKI_U_SIGNING = 1u << 0, /* "signing": alias of digital signature */
	PKI_U_DIGITAL_SIGNATURE = 1u << 1,
	PKI_U_CONTENT_COMMITMENT = 1u << 2,
	PKI_U_KEY_ENCIPHERMENT = 1u << 3,
	PKI_U_KEY_AGREEMENT = 1u << 4,
	PKI_U_DATA_ENCIPHERMENT = 1u << 5,
	PKI_U_CERT_SIGN = 1u << 6,
	PKI_U_CRL_SIGN = 1u << 7,
	PKI_U_ENCIPHER_ONLY = 1u << 8,
	PKI_U_DECIPHER_ONLY = 1u << 9,
	PKI_U_ANY = 1u << 10,
	PKI_U_SERVER_AUTH = 1u << 11,
	PKI_U_CLIENT_AUTH = 1u << 12,
	PKI_U_CODE_SIGNING = 1u << 13,
	PKI_U_EMAIL_PROTECTION = 1u << 14,
	PKI_U_SMIME = 1u << 15,
	PKI_U_IPSEC_END_SYSTEM = 1u << 16,
	PKI_U_IPSEC_TUNNEL = 1u << 17,
	PKI_U_IPSEC_USER = 1u << 18,
	PKI_U_TIMESTAMPING = 1u << 19,
	PKI_U_OCSP_SIGNING = 1u << 20,
	PKI_U_MICROSOFT_SGC = 1u << 21,
	PKI_U_NETSCAPE_SGC = 1u << 22,
};

/* 0 and *bit set, or ERR_INVALID ("unknown usage"). */
int pki_usage_parse(const char *name, unsigned *bit);
/* Append the names of the bits in `mask`, in table order. */
void pki_usage_names(unsigned mask, struct strv *out);
/* What a kubelet asks for (k8s-facts §1.3): digital signature + client/server
 * auth, plus key encipherment for RSA keys. */
unsigned pki_usages_kubelet(bool rsa, bool serving);

/* ---- certificates ---------------------------------------------------------- */

struct pki_cert_spec {
	const char *cn;
	const char *const *orgs; /* NULL-terminated, or NULL */
	const char *const *dns;
	const char *const *ips;
	unsigned usages;
	bool is_ca;
	int64_t not_before_ns;
	int64_t not_after_ns;
};

/*
 * A certificate for `pub` as described by spec, signed by issuer/issuer_key;
 * issuer NULL makes it self-signed with issuer_key. SANs are validated (an
 * IP that does not parse is ERR_INVALID).
 */
X509 *pki_cert_new(const struct pki_cert_spec *spec, EVP_PKEY *pub, X509 *issuer,
		   EVP_PKEY *issuer_key);
/* A self-signed CA valid from now for `validity_ns`. */
X509 *pki_ca_new(EVP_PKEY *key, const char *cn, int64_t validity_ns);

/* The first CN (*cn malloc'd, "" when none) and every O (orgs may be NULL). */
void pki_name_read(const X509_NAME *name, char **cn, struct strv *orgs);

/* Validity as ns since the epoch. */
int64_t pki_cert_not_before(const X509 *cert);
int64_t pki_cert_not_after(const X509 *cert);

/* What `cube certs inspect` shows; every field owned by the struct. */
struct pki_cert_info {
	char *subject, *issuer; /* RFC 2253-like "CN=...,O=..." */
	char *cn;
	struct strv orgs, dns, ips, emails, uris;
	unsigned usages;
	bool is_ca;
	char key[32];
	char serial[80];
	char sha256[100]; /* "AB:CD:..." */
	int64_t not_before_ns, not_after_ns;
};
int pki_cert_info(X509 *cert, struct pki_cert_info *out);
void pki_cert_info_free(struct pki_cert_info *info);

/* ---- CSRs ------------------------------------------------------------------ */

/* A PKCS#10 request signed by key. usages 0 = no usage extensions, as the
 * kubelet sends (usages go in the CSR object's spec instead). */
X509_REQ *pki_csr_new(EVP_PKEY *key, const char *cn, const char *const *orgs,
		      const char *const *dns, const char *const *ips, unsigned usages);
/* The same as PEM, made faster for an EC key (its public key set as its
 * bits, without OpenSSL 3.0's encoders): what a kubelet sends. */
char *pki_csr_new_pem(EVP_PKEY *key, const char *cn, const char *const *orgs,
		      const char *const *dns, const char *const *ips, unsigned usages);
char *pki_csr_pem(X509_REQ *req);
/* Parses the first CERTIFICATE REQUEST block; checks the self-signature. */
X509_REQ *pki_csr_parse(const char *pem, size_t len);
/* 0 when the request's signature verifies with its own public key. */
int pki_csr_verify(X509_REQ *req);

struct pki_csr_info {
	char *cn;
	struct strv orgs, dns, ips, emails, uris;
	unsigned usages;     /* from keyUsage/extKeyUsage extensions, if any */
	bool has_usages;
	bool key_rsa;
	char key[32];
};
int pki_csr_info(X509_REQ *req, struct pki_csr_info *out);
void pki_csr_info_free(struct pki_csr_info *info);

/* ---- signing ----------------------------------------------------------------- */

/*
 * The in-tree signer's policy (k8s-facts §3.2): NotBefore = now − backdate;
 * NotAfter = now + ttl − backdate when ttl ≥ short_ns, else now + ttl;
 * clipped to the CA's NotAfter; refused when the CA has expired.
 */
struct pki_sign_policy {
	int64_t ttl_ns;
	int64_t backdate_ns; /* upstream: 5 min */
	int64_t short_ns;    /* upstream: 8 h */
	unsigned usages;
};
#define PKI_BACKDATE_NS (5 * 60 * INT64_C(1000000000))
#define PKI_SHORT_NS (8 * 3600 * INT64_C(1000000000))

/* Subject and SANs come from the request; usages from the policy. */
X509 *pki_csr_sign(X509_REQ *req, X509 *ca, EVP_PKEY *ca_key, const struct pki_sign_policy *pol);
/* The same as PEM and its validity, made faster (the request's public key
 * copied as its bits, without OpenSSL 3.0's encoders): what a signer sends. */
char *pki_csr_sign_pem(X509_REQ *req, X509 *ca, EVP_PKEY *ca_key,
		       const struct pki_sign_policy *pol, int64_t *not_before_ns,
		       int64_t *not_after_ns);

/* ---- PEM files --------------------------------------------------------------- */

/* Every CERTIFICATE block in order. Errors: ERR_PARSE with "not a PEM file",
 * "truncated PEM", "no CERTIFICATE block" or the decode failure. */
int pki_certs_parse(const char *pem, size_t len, STACK_OF(X509) **out);
X509 *pki_cert_parse(const char *pem, size_t len);
X509 *pki_cert_load(const char *path);
EVP_PKEY *pki_key_load(const char *path);
X509_REQ *pki_csr_load(const char *path);
/* Certificate(s) then key in one file, as the kubelet stores them. */
int pki_pair_load(const char *path, X509 **cert, EVP_PKEY **key);
char *pki_cert_pem(X509 *cert);
int pki_cert_save(const char *path, X509 *cert);
int pki_key_save(const char *path, EVP_PKEY *key); /* mode 0600 */

/* ---- verification -------------------------------------------------------- */

enum pki_purpose { PKI_PURPOSE_ANY, PKI_PURPOSE_CLIENT, PKI_PURPOSE_SERVER };

/*
 * Verify `cert` (with optional intermediates) up to one of `roots` at time
 * at_ns. 0, or ERR_EXPIRED for a time outside the validity window, or
 * ERR_UNAUTHORIZED for an unknown authority / bad signature / wrong usage;
 * err_msg() is Go's text, e.g.
 *   x509: certificate has expired or is not yet valid: current time
 *   2026-11-30T10:00:00Z is after 2026-11-29T10:00:00Z
 *   x509: certificate signed by unknown authority
 */
int pki_verify(X509 *cert, STACK_OF(X509) *intermediates, STACK_OF(X509) *roots, int64_t at_ns,
	       enum pki_purpose purpose);
/* Go's text for OpenSSL's verify result e about cert (NULL: unknown) at
 * at_ns, as pki_verify's err_msg(); returns its error code. */
int pki_verify_explain(int e, X509 *cert, int64_t at_ns);
/* Convenience: one root. */
int pki_verify_with(X509 *cert, X509 *root, int64_t at_ns, enum pki_purpose purpose);

/* ---- tokens ------------------------------------------------------------------ */

/* A bootstrap token "abcdef.0123456789abcdef" ([a-z0-9]{6}.[a-z0-9]{16}), from
 * OpenSSL's RAND. buf must hold 24 bytes. */
int pki_token_new(char buf[24]);
bool pki_token_valid(const char *token);

#endif
