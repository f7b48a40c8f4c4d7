/* pki: keys, usages, certificates, CSRs, the signer's policy, PEM files,
 * verification at a chosen time, bootstrap tokens, and the etcd PKI
 * cluster_pki_init lays out as kubeadm does with the check-expiration rows
 * expiry_scan makes of it — all on the virtual clock, standing at
 * 2026-11-30T10:00:00Z unless a test moves it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <openssl/pem.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/strv.h"
#include "pki/cluster.h"
#include "pki/expiry.h"
#include "pki/pki.h"

#define T0 (INT64_C(1796032800) * NS_PER_SEC) /* 2026-11-30T10:00:00Z */
#define YEAR (365 * NS_PER_DAY)

#include "testassert.h"

#define assert_starts_with(s, prefix)                                                              \
	do {                                                                                       \
		const char *s_ = (s);                                                              \
		if (!s_ || strncmp(s_, (prefix), strlen(prefix)) != 0) {                           \
			print_error("\"%.80s\"\n  does not start with \"%s\"\n",                   \
			            s_ ? s_ : "(null)", (prefix));                                 \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

/* Keys are slow to make under the sanitizers: make a few once, share them. */
static EVP_PKEY *ec1, *ec2, *rsa1;

static int group_setup(void **state)
{
	setenv("TZ", "UTC", 1);
	tzset();
	ec1 = pki_key_new(PKI_KEY_ECDSA);
	ec2 = pki_key_new(PKI_KEY_ECDSA);
	rsa1 = pki_key_new(PKI_KEY_RSA);
	return ec1 && ec2 && rsa1 ? 0 : -1;
}

static int group_teardown(void **state)
{
	EVP_PKEY_free(ec1);
	EVP_PKEY_free(ec2);
	EVP_PKEY_free(rsa1);
	return 0;
}

static int setup(void **state)
{
	clock_set_offset(0);
	clock_use_virtual(T0);
	err_clear();
	return 0;
}

static int teardown(void **state)
{
	clock_use_real();
	clock_set_offset(0);
	setenv("TZ", "UTC", 1);
	tzset();
	return 0;
}

/* ---- helpers -------------------------------------------------------------- */

static X509 *make_ca(EVP_PKEY *key, const char *cn)
{
	X509 *ca = pki_ca_new(key, cn, 10 * YEAR);
	if (!ca)
		fail_msg("pki_ca_new: %s", err_msg());
	return ca;
}

static X509 *make_leaf(EVP_PKEY *key, const char *cn, unsigned usages, int64_t nb, int64_t na,
                       X509 *ca, EVP_PKEY *ca_key)
{
	struct pki_cert_spec spec = {
	    .cn = cn, .usages = usages, .not_before_ns = nb, .not_after_ns = na};
	X509 *x = pki_cert_new(&spec, key, ca, ca_key);
	if (!x)
		fail_msg("pki_cert_new: %s", err_msg());
	return x;
}

static bool strv_equals(const struct strv *sv, const char *const *want)
{
	size_t n = strlist_len(want);
	if (sv->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(sv->v[i], want[i]) != 0)
			return false;
	return true;
}

#define assert_strv(sv, ...)                                                                       \
	do {                                                                                       \
		static const char *const want_[] = {__VA_ARGS__, NULL};                            \
		if (!strv_equals(&(sv), want_)) {                                                  \
			char *got_ = strv_join(&(sv), ", ");                                       \
			print_error("got [%s]\n", got_);                                           \
			free(got_);                                                                \
			fail_msg("%s differs from the expected list", #sv);                        \
		}                                                                                  \
	} while (0)

static bool matches_regex(const char *s, const char *re)
{
	regex_t rx;
	bool ok;
	if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB) != 0)
		return false;
	ok = regexec(&rx, s, 0, NULL, 0) == 0;
	regfree(&rx);
	return ok;
}

static char *mkdir_tmp(void)
{
	char *d = strdup("/tmp/test_pki.XXXXXX");
	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void rm_rf(char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static char *path_in(const char *dir, const char *name)
{
	return file_join(dir, name);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *concat(const char *a, const char *b)
{
	char *s;
	if (asprintf(&s, "%s%s", a, b) < 0)
		abort();
	return s;
}

/* DER → PEM under any label, for hand-made (damaged) blocks. */
static char *der_pem(const char *label, const unsigned char *der, long len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long n;

	PEM_write_bio(b, label, "", der, len);
	n = BIO_get_mem_data(b, &data);
	out = strndup(data, (size_t)n);
	BIO_free(b);
	return out;
}

/* ---- keys ------------------------------------------------------------------ */

static void check_key_roundtrip(EVP_PKEY *key, const char *describe, bool rsa,
                                const char *pem_begin)
{
	char buf[32], *pem;
	EVP_PKEY *back;
	X509 *self;

	assert_string_equal(pki_key_describe(key, buf, sizeof(buf)), describe);
	assert_int_equal(pki_key_is_rsa(key), rsa);

	pem = pki_key_pem(key);
	assert_starts_with(pem, pem_begin);
	back = pki_key_parse(pem, strlen(pem));
	assert_non_null(back);
	assert_int_equal(EVP_PKEY_eq(key, back), 1);
	assert_string_equal(pki_key_describe(back, buf, sizeof(buf)), describe);

	/* The parsed key is the private half of a certificate made for the original. */
	self = make_leaf(key, "self", PKI_U_DIGITAL_SIGNATURE, T0, T0 + NS_PER_DAY, NULL, key);
	assert_true(pki_key_matches(self, back));
	assert_false(pki_key_matches(self, ec2));
	X509_free(self);
	EVP_PKEY_free(back);
	free(pem);
}

static void test_key_ecdsa(void **state)
{
	check_key_roundtrip(ec1, "ECDSA P-256", false, "-----BEGIN EC PRIVATE KEY-----\n");
}

static void test_key_rsa(void **state)
{
	check_key_roundtrip(rsa1, "RSA 2048", true, "-----BEGIN RSA PRIVATE KEY-----\n");
}

static void test_key_parse_errors(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	char *pem = pki_cert_pem(ca);

	assert_null(pki_key_parse("not a key", 9));
	assert_contains(err_msg(), "not a PEM file");
	/* A certificate is PEM, but holds no private key. */
	assert_null(pki_key_parse(pem, strlen(pem)));
	assert_contains(err_msg(), "no PRIVATE KEY block");
	free(pem);
	X509_free(ca);
}

static void test_key_type_parse(void **state)
{
	enum pki_key_type t = PKI_KEY_RSA;

	assert_int_equal(pki_key_type_parse("ecdsa", &t), 0);
	assert_int_equal(t, PKI_KEY_ECDSA);
	assert_int_equal(pki_key_type_parse("rsa", &t), 0);
	assert_int_equal(t, PKI_KEY_RSA);
	assert_int_equal(pki_key_type_parse("dsa", &t), ERR_INVALID);
	assert_contains(err_msg(), "\"dsa\"");
	assert_int_equal(pki_key_type_parse("ECDSA", &t), ERR_INVALID);
	assert_int_equal(pki_key_type_parse("", &t), ERR_INVALID);
	assert_int_equal(t, PKI_KEY_RSA);
}

/* ---- usages ---------------------------------------------------------------- */

static const struct {
	const char *name;
	unsigned bit;
} usage_table[] = {
    {"signing", PKI_U_SIGNING},
    {"digital signature", PKI_U_DIGITAL_SIGNATURE},
    {"content commitment", PKI_U_CONTENT_COMMITMENT},
    {"key encipherment", PKI_U_KEY_ENCIPHERMENT},
    {"key agreement", PKI_U_KEY_AGREEMENT},
    {"data encipherment", PKI_U_DATA_ENCIPHERMENT},
    {"cert sign", PKI_U_CERT_SIGN},
    {"crl sign", PKI_U_CRL_SIGN},
    {"encipher only", PKI_U_ENCIPHER_ONLY},
    {"decipher only", PKI_U_DECIPHER_ONLY},
    {"any", PKI_U_ANY},
    {"server auth", PKI_U_SERVER_AUTH},
    {"client auth", PKI_U_CLIENT_AUTH},
    {"code signing", PKI_U_CODE_SIGNING},
    {"email protection", PKI_U_EMAIL_PROTECTION},
    {"s/mime", PKI_U_SMIME},
    {"ipsec end system", PKI_U_IPSEC_END_SYSTEM},
    {"ipsec tunnel", PKI_U_IPSEC_TUNNEL},
    {"ipsec user", PKI_U_IPSEC_USER},
    {"timestamping", PKI_U_TIMESTAMPING},
    {"ocsp signing", PKI_U_OCSP_SIGNING},
    {"microsoft sgc", PKI_U_MICROSOFT_SGC},
    {"netscape sgc", PKI_U_NETSCAPE_SGC},
};
#define NUSAGE (sizeof(usage_table) / sizeof(usage_table[0]))

static void test_usage_parse(void **state)
{
	unsigned bit = 0;

	for (size_t i = 0; i < NUSAGE; i++) {
		bit = 0;
		if (pki_usage_parse(usage_table[i].name, &bit) != 0)
			fail_msg("\"%s\": %s", usage_table[i].name, err_msg());
		assert_int_equal(bit, usage_table[i].bit);
	}
	bit = 77;
	assert_int_equal(pki_usage_parse("client-auth", &bit), ERR_INVALID);
	assert_contains(err_msg(), "unknown usage");
	assert_contains(err_msg(), "client-auth");
	assert_int_equal(pki_usage_parse("Client Auth", &bit), ERR_INVALID);
	assert_int_equal(pki_usage_parse("", &bit), ERR_INVALID);
	assert_int_equal(bit, 77);
}

static void test_usage_names(void **state)
{
	struct strv all = STRV_INIT, none = STRV_INIT, two = STRV_INIT;
	unsigned mask = 0;

	for (size_t i = 0; i < NUSAGE; i++) {
		struct strv one = STRV_INIT;
		pki_usage_names(usage_table[i].bit, &one);
		assert_int_equal(one.n, 1);
		assert_string_equal(one.v[0], usage_table[i].name);
		strv_free(&one);
		mask |= usage_table[i].bit;
	}
	/* Every name, in table order. */
	pki_usage_names(mask, &all);
	assert_int_equal(all.n, NUSAGE);
	for (size_t i = 0; i < NUSAGE; i++)
		assert_string_equal(all.v[i], usage_table[i].name);

	pki_usage_names(0, &none);
	assert_int_equal(none.n, 0);
	/* Table order, not the order of the bits as written. */
	pki_usage_names(PKI_U_CLIENT_AUTH | PKI_U_DIGITAL_SIGNATURE, &two);
	assert_strv(two, "digital signature", "client auth");
	/* Appends to what is there. */
	pki_usage_names(PKI_U_KEY_ENCIPHERMENT, &two);
	assert_strv(two, "digital signature", "client auth", "key encipherment");
	strv_free(&all);
	strv_free(&none);
	strv_free(&two);
}

static void test_usages_kubelet(void **state)
{
	assert_int_equal(pki_usages_kubelet(false, false),
	                 PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH);
	assert_int_equal(pki_usages_kubelet(true, false),
	                 PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_CLIENT_AUTH);
	assert_int_equal(pki_usages_kubelet(false, true),
	                 PKI_U_DIGITAL_SIGNATURE | PKI_U_SERVER_AUTH);
	assert_int_equal(pki_usages_kubelet(true, true),
	                 PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_SERVER_AUTH);
}

/* ---- certificates ------------------------------------------------------------ */

static void test_ca_new(void **state)
{
	X509 *ca = pki_ca_new(ec1, "kubernetes", 10 * YEAR);
	struct pki_cert_info info;

	assert_non_null(ca);
	assert_int_equal(pki_cert_info(ca, &info), 0);
	assert_true(info.is_ca);
	assert_string_equal(info.cn, "kubernetes");
	assert_string_equal(info.subject, "CN=kubernetes");
	assert_string_equal(info.issuer, "CN=kubernetes");
	assert_int_equal(info.orgs.n, 0);
	assert_true(info.usages & PKI_U_CERT_SIGN);
	assert_string_equal(info.key, "ECDSA P-256");
	assert_int_equal(info.not_before_ns, T0);
	assert_int_equal(info.not_after_ns, T0 + 10 * YEAR);
	assert_int_equal(pki_cert_not_before(ca), T0);
	assert_int_equal(pki_cert_not_after(ca), T0 + 10 * YEAR);
	assert_true(pki_key_matches(ca, ec1));
	/* Self-signed: it is its own root. */
	assert_int_equal(pki_verify_with(ca, ca, T0, PKI_PURPOSE_ANY), 0);
	pki_cert_info_free(&info);
	X509_free(ca);

	/* "From now" is the process clock's now. */
	clock_advance(NS_PER_HOUR);
	ca = pki_ca_new(rsa1, "other", NS_PER_DAY);
	assert_non_null(ca);
	assert_int_equal(pki_cert_not_before(ca), T0 + NS_PER_HOUR);
	assert_int_equal(pki_cert_not_after(ca), T0 + NS_PER_HOUR + NS_PER_DAY);
	X509_free(ca);
}

static void test_cert_new_leaf(void **state)
{
	static const char *const orgs[] = {"system:masters", "acme", NULL};
	static const char *const dns[] = {"localhost", "kubernetes.default", NULL};
	static const char *const ips[] = {"127.0.0.1", "10.96.0.1", "::1", "fd00::10", NULL};
	unsigned usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_SERVER_AUTH |
	                  PKI_U_CLIENT_AUTH;
	struct pki_cert_spec spec = {
	    .cn = "kube-apiserver",
	    .orgs = orgs,
	    .dns = dns,
	    .ips = ips,
	    .usages = usages,
	    .not_before_ns = T0 - 5 * NS_PER_MIN,
	    .not_after_ns = T0 + YEAR,
	};
	X509 *ca = make_ca(ec1, "kubernetes"), *x;
	struct pki_cert_info info;

	x = pki_cert_new(&spec, ec2, ca, ec1);
	assert_non_null(x);
	assert_int_equal(pki_cert_info(x, &info), 0);
	assert_string_equal(info.cn, "kube-apiserver");
	assert_strv(info.orgs, "system:masters", "acme");
	assert_strv(info.dns, "localhost", "kubernetes.default");
	assert_strv(info.ips, "127.0.0.1", "10.96.0.1", "::1", "fd00::10");
	assert_int_equal(info.emails.n, 0);
	assert_int_equal(info.uris.n, 0);
	assert_int_equal(info.usages, usages);
	assert_false(info.is_ca);
	assert_string_equal(info.key, "ECDSA P-256");
	assert_contains(info.subject, "CN=kube-apiserver");
	assert_contains(info.subject, "O=system:masters");
	assert_string_equal(info.issuer, "CN=kubernetes");
	assert_int_equal(info.not_before_ns, T0 - 5 * NS_PER_MIN);
	assert_int_equal(info.not_after_ns, T0 + YEAR);
	/* Serial: non-empty "XX:XX:..." hex. */
	assert_true(strlen(info.serial) > 0);
	assert_true(matches_regex(info.serial, "^[0-9A-F]{2}(:[0-9A-F]{2})*$"));
	/* SHA-256 fingerprint: 32 bytes as "XX:" pairs = 95 characters. */
	assert_int_equal(strlen(info.sha256), 95);
	assert_true(matches_regex(info.sha256, "^[0-9A-F]{2}(:[0-9A-F]{2}){31}$"));
	assert_true(pki_key_matches(x, ec2));
	assert_false(pki_key_matches(x, ec1));
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_SERVER), 0);
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_CLIENT), 0);
	pki_cert_info_free(&info);
	X509_free(x);
	X509_free(ca);
}

static void test_cert_new_rsa_leaf(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *x =
	    make_leaf(rsa1, "rsa-client", pki_usages_kubelet(true, false), T0, T0 + YEAR, ca, ec1);
	struct pki_cert_info info;

	assert_int_equal(pki_cert_info(x, &info), 0);
	assert_string_equal(info.key, "RSA 2048");
	assert_int_equal(info.usages,
	                 PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_CLIENT_AUTH);
	assert_int_equal(info.dns.n + info.ips.n, 0);
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_CLIENT), 0);
	pki_cert_info_free(&info);
	X509_free(x);
	X509_free(ca);
}

static void test_cert_new_invalid_san(void **state)
{
	static const char *const bad_v4[] = {"1.2.3", NULL};
	static const char *const bad_v6[] = {"fd00::g", NULL};
	static const char *const bad_dns[] = {"bad name", NULL};
	struct pki_cert_spec spec = {.cn = "x", .not_before_ns = T0, .not_after_ns = T0 + YEAR};

	spec.ips = bad_v4;
	assert_null(pki_cert_new(&spec, ec1, NULL, ec1));
	assert_contains(err_msg(), "invalid IP SAN \"1.2.3\"");
	spec.ips = bad_v6;
	err_clear();
	assert_null(pki_cert_new(&spec, ec1, NULL, ec1));
	assert_contains(err_msg(), "invalid IP SAN \"fd00::g\"");
	spec.ips = NULL;
	spec.dns = bad_dns;
	assert_null(pki_cert_new(&spec, ec1, NULL, ec1));
	assert_contains(err_msg(), "invalid DNS SAN \"bad name\"");

	/* A CSR validates its SANs the same way. (NULL-returning functions have
	 * no code to check; the message is the contract.) */
	assert_null(pki_csr_new(ec1, "x", NULL, NULL, bad_v4, 0));
	assert_contains(err_msg(), "invalid IP SAN \"1.2.3\"");
	assert_null(pki_csr_new(ec1, "x", NULL, bad_dns, NULL, 0));
	assert_contains(err_msg(), "invalid DNS SAN");
}

static void test_cert_usage_aliases(void **state)
{
	/* "signing" and "s/mime" are written as digital signature and email
	 * protection, and read back under the canonical names. */
	X509 *x = make_leaf(ec1, "alias", PKI_U_SIGNING | PKI_U_SMIME, T0, T0 + YEAR, NULL, ec1);
	struct pki_cert_info info;
	struct strv names = STRV_INIT;

	pki_cert_info(x, &info);
	assert_int_equal(info.usages, PKI_U_DIGITAL_SIGNATURE | PKI_U_EMAIL_PROTECTION);
	pki_usage_names(info.usages, &names);
	assert_strv(names, "digital signature", "email protection");
	strv_free(&names);
	pki_cert_info_free(&info);
	X509_free(x);
}

static void test_cert_all_usages_roundtrip(void **state)
{
	unsigned all = 0;
	X509 *x;
	struct pki_cert_info info;

	for (size_t i = 0; i < NUSAGE; i++)
		if (usage_table[i].bit != PKI_U_SIGNING && usage_table[i].bit != PKI_U_SMIME)
			all |= usage_table[i].bit;
	x = make_leaf(ec1, "everything", all, T0, T0 + YEAR, NULL, ec1);
	pki_cert_info(x, &info);
	assert_int_equal(info.usages, all);
	pki_cert_info_free(&info);
	X509_free(x);

	/* Each keyUsage bit alone reads back as itself (bit positions). */
	for (size_t i = 0; i < NUSAGE; i++) {
		unsigned b = usage_table[i].bit;
		if (b == PKI_U_SIGNING || b == PKI_U_SMIME)
			continue;
		x = make_leaf(ec1, "one", b, T0, T0 + YEAR, NULL, ec1);
		pki_cert_info(x, &info);
		if (info.usages != b)
			fail_msg("usage \"%s\": wrote %#x, read %#x", usage_table[i].name, b,
			         info.usages);
		pki_cert_info_free(&info);
		X509_free(x);
	}
}

static void test_name_read(void **state)
{
	static const char *const orgs[] = {"system:nodes", "b", NULL};
	X509 *x = make_leaf(ec1, "system:node:node-1", 0, T0, T0 + YEAR, NULL, ec1), *y;
	struct pki_cert_spec spec = {.orgs = orgs, .not_before_ns = T0, .not_after_ns = T0 + YEAR};
	struct strv o = STRV_INIT;
	char *cn;

	pki_name_read(X509_get_subject_name(x), &cn, NULL);
	assert_string_equal(cn, "system:node:node-1");
	free(cn);

	/* No CN: "" — and the organisations, in order. */
	y = pki_cert_new(&spec, ec1, NULL, ec1);
	assert_non_null(y);
	pki_name_read(X509_get_subject_name(y), &cn, &o);
	assert_string_equal(cn, "");
	assert_strv(o, "system:nodes", "b");
	free(cn);
	strv_free(&o);
	X509_free(x);
	X509_free(y);
}

/* ---- CSRs -------------------------------------------------------------------- */

static void test_csr_roundtrip(void **state)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	static const char *const dns[] = {"node-1", "node-1.example.com", NULL};
	static const char *const ips[] = {"10.0.0.5", "fd00::5", NULL};
	unsigned usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_SERVER_AUTH;
	X509_REQ *req = pki_csr_new(ec1, "system:node:node-1", orgs, dns, ips, usages), *back;
	struct pki_csr_info info;
	char *pem;

	assert_non_null(req);
	assert_int_equal(pki_csr_verify(req), 0);
	pem = pki_csr_pem(req);
	assert_starts_with(pem, "-----BEGIN CERTIFICATE REQUEST-----\n");
	assert_contains(pem, "-----END CERTIFICATE REQUEST-----\n");
	back = pki_csr_parse(pem, strlen(pem));
	assert_non_null(back);
	assert_int_equal(pki_csr_verify(back), 0);

	assert_int_equal(pki_csr_info(back, &info), 0);
	assert_string_equal(info.cn, "system:node:node-1");
	assert_strv(info.orgs, "system:nodes");
	assert_strv(info.dns, "node-1", "node-1.example.com");
	assert_strv(info.ips, "10.0.0.5", "fd00::5");
	assert_true(info.has_usages);
	assert_int_equal(info.usages, usages);
	assert_false(info.key_rsa);
	assert_string_equal(info.key, "ECDSA P-256");
	pki_csr_info_free(&info);
	X509_REQ_free(back);
	X509_REQ_free(req);
	free(pem);
}

static void test_csr_no_usages(void **state)
{
	/* As the kubelet sends it: no usage extensions, no SANs, here with RSA. */
	X509_REQ *req = pki_csr_new(rsa1, "system:node:node-2", NULL, NULL, NULL, 0);
	struct pki_csr_info info;

	assert_non_null(req);
	assert_int_equal(pki_csr_info(req, &info), 0);
	assert_string_equal(info.cn, "system:node:node-2");
	assert_int_equal(info.orgs.n, 0);
	assert_int_equal(info.dns.n + info.ips.n + info.emails.n + info.uris.n, 0);
	assert_false(info.has_usages);
	assert_int_equal(info.usages, 0);
	assert_true(info.key_rsa);
	assert_string_equal(info.key, "RSA 2048");
	pki_csr_info_free(&info);
	X509_REQ_free(req);

	/* SANs alone are not usages. */
	{
		static const char *const dns[] = {"node-2", NULL};
		req = pki_csr_new(ec1, "n", NULL, dns, NULL, 0);
		pki_csr_info(req, &info);
		assert_strv(info.dns, "node-2");
		assert_false(info.has_usages);
		pki_csr_info_free(&info);
		X509_REQ_free(req);
	}
}

static void test_csr_tampered(void **state)
{
	X509_REQ *req = pki_csr_new(ec1, "system:node:node-1", NULL, NULL, NULL, 0), *bad;
	unsigned char *der = NULL;
	const unsigned char *p;
	int len = i2d_X509_REQ(req, &der);
	char *pem, *good;

	assert_true(len > 0);
	/* The last byte is inside the signature BIT STRING. */
	der[len - 1] ^= 0x01;
	pem = der_pem("CERTIFICATE REQUEST", der, len);
	assert_null(pki_csr_parse(pem, strlen(pem)));
	assert_contains(err_msg(), "verification failure");

	/* It still decodes; only the signature check refuses it. */
	p = der;
	bad = d2i_X509_REQ(NULL, &p, len);
	assert_non_null(bad);
	assert_int_equal(pki_csr_verify(bad), ERR_INVALID);
	/* The signer checks too. */
	{
		EVP_PKEY *ca_key = ec2;
		X509 *ca = make_ca(ca_key, "kubernetes");
		struct pki_sign_policy pol = {YEAR, PKI_BACKDATE_NS, PKI_SHORT_NS,
		                              PKI_U_CLIENT_AUTH};
		assert_null(pki_csr_sign(bad, ca, ca_key, &pol));
		X509_free(ca);
	}
	X509_REQ_free(bad);
	free(pem);

	/* A changed character in the base64 body: refused one way or another. */
	good = pki_csr_pem(req);
	{
		char *body = strchr(good, '\n') + 1 + 100; /* inside the base64 body */
		*body = *body == 'A' ? 'B' : 'A';
	}
	err_clear();
	assert_null(pki_csr_parse(good, strlen(good)));
	assert_true(strlen(err_msg()) > 0);
	free(good);
	OPENSSL_free(der);
	X509_REQ_free(req);
}

static void test_csr_parse_errors(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	char *pem = pki_cert_pem(ca);

	assert_null(pki_csr_parse("hello", 5));
	assert_contains(err_msg(), "not a PEM file");
	assert_null(pki_csr_parse(pem, strlen(pem)));
	assert_contains(err_msg(), "no CERTIFICATE REQUEST block");
	assert_null(pki_csr_parse(pem, 100));
	assert_contains(err_msg(), "truncated PEM");
	free(pem);
	X509_free(ca);
}

/* ---- the signer's policy ------------------------------------------------------ */

struct signer {
	X509 *ca;
	EVP_PKEY *ca_key;
	X509_REQ *req;
};

static void signer_init(struct signer *s, int64_t ca_validity)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	static const char *const dns[] = {"node-1", NULL};
	static const char *const ips[] = {"10.0.0.5", NULL};

	s->ca_key = ec1;
	s->ca = pki_ca_new(ec1, "kubernetes", ca_validity);
	/* The request asks for server auth; the policy decides. */
	s->req = pki_csr_new(ec2, "system:node:node-1", orgs, dns, ips,
	                     PKI_U_DIGITAL_SIGNATURE | PKI_U_SERVER_AUTH);
	assert_non_null(s->ca);
	assert_non_null(s->req);
}

static void signer_free(struct signer *s)
{
	X509_free(s->ca);
	X509_REQ_free(s->req);
}

static X509 *sign_ttl(struct signer *s, int64_t ttl)
{
	struct pki_sign_policy pol = {
	    .ttl_ns = ttl,
	    .backdate_ns = PKI_BACKDATE_NS,
	    .short_ns = PKI_SHORT_NS,
	    .usages = pki_usages_kubelet(false, false),
	};
	return pki_csr_sign(s->req, s->ca, s->ca_key, &pol);
}

/* DER of a request's or certificate's SubjectPublicKeyInfo, into buf. */
static int spki_der(X509_PUBKEY *pk, unsigned char *buf, size_t n)
{
	unsigned char *der = NULL;
	int len = i2d_X509_PUBKEY(pk, &der);

	assert_true(len > 0 && (size_t)len <= n);
	memcpy(buf, der, (size_t)len);
	OPENSSL_free(der);
	return len;
}

/* pki_csr_new_pem and pki_csr_sign_pem set a public key as its bits, without
 * OpenSSL's encoders: the same bytes as X509_*_set_pubkey, for EC (its own
 * path) and RSA (the copy a signer makes; the encoder for a request). */
static void test_csr_pem_paths_agree(void **state)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	static const char *const dns[] = {"node-1", NULL};
	static const char *const ips[] = {"10.0.0.5", NULL};
	EVP_PKEY *keys[] = {ec2, rsa1};
	struct pki_sign_policy pol = {.ttl_ns = 24 * 3600 * INT64_C(1000000000),
				      .backdate_ns = PKI_BACKDATE_NS,
				      .short_ns = PKI_SHORT_NS,
				      .usages = pki_usages_kubelet(false, false)};
	X509 *ca = pki_ca_new(ec1, "kubernetes", 10 * 24 * 3600 * INT64_C(1000000000));

	for (size_t i = 0; i < 2; i++) {
		unsigned char a[1024], b[1024];
		X509_REQ *slow = pki_csr_new(keys[i], "system:node:node-1", orgs, dns, ips, 0), *fast;
		char *pem = pki_csr_new_pem(keys[i], "system:node:node-1", orgs, dns, ips, 0);
		X509 *want, *got;
		int64_t nb, na;
		int n;

		assert_non_null(pem);
		fast = pki_csr_parse(pem, strlen(pem)); /* its signature checked */
		assert_non_null(fast);
		free(pem);
		n = spki_der(X509_REQ_get_X509_PUBKEY(slow), a, sizeof(a));
		assert_int_equal(spki_der(X509_REQ_get_X509_PUBKEY(fast), b, sizeof(b)), n);
		assert_memory_equal(a, b, (size_t)n);
		assert_int_equal(EVP_PKEY_eq(X509_REQ_get0_pubkey(fast), keys[i]), 1);
		assert_int_equal(X509_NAME_cmp(X509_REQ_get_subject_name(fast),
					       X509_REQ_get_subject_name(slow)), 0);

		/* Signed both ways: the same key, names and extensions. */
		want = pki_csr_sign(fast, ca, ec1, &pol);
		pem = pki_csr_sign_pem(fast, ca, ec1, &pol, &nb, &na);
		assert_non_null(want);
		assert_non_null(pem);
		got = pki_cert_parse(pem, strlen(pem));
		assert_non_null(got);
		free(pem);
		assert_int_equal(X509_verify(got, ec1), 1);
		assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(got), keys[i]), 1);
		n = spki_der(X509_get_X509_PUBKEY(want), a, sizeof(a));
		assert_int_equal(spki_der(X509_get_X509_PUBKEY(got), b, sizeof(b)), n);
		assert_memory_equal(a, b, (size_t)n);
		assert_true(nb == pki_cert_not_before(got));
		assert_true(na == pki_cert_not_after(got));
		assert_int_equal(X509_NAME_cmp(X509_get_subject_name(got),
					       X509_get_subject_name(want)), 0);
		assert_int_equal(X509_NAME_cmp(X509_get_issuer_name(got),
					       X509_get_issuer_name(want)), 0);
		assert_int_equal(X509_get_ext_count(got), X509_get_ext_count(want));
		for (int e = 0; e < X509_get_ext_count(got); e++) {
			X509_EXTENSION *x = X509_get_ext(got, e), *y = X509_get_ext(want, e);
			assert_int_equal(OBJ_cmp(X509_EXTENSION_get_object(x),
						 X509_EXTENSION_get_object(y)), 0);
			assert_int_equal(ASN1_OCTET_STRING_cmp(X509_EXTENSION_get_data(x),
							       X509_EXTENSION_get_data(y)), 0);
		}
		X509_free(want);
		X509_free(got);
		X509_REQ_free(fast);
		X509_REQ_free(slow);
	}
	X509_free(ca);
}

static void test_csr_sign_long_ttl(void **state)
{
	struct signer s;
	struct pki_cert_info info;
	X509 *x;

	signer_init(&s, 10 * YEAR);
	x = sign_ttl(&s, YEAR);
	assert_non_null(x);
	assert_int_equal(pki_cert_not_before(x), T0 - 5 * NS_PER_MIN);
	assert_int_equal(pki_cert_not_after(x), T0 + YEAR - 5 * NS_PER_MIN);

	pki_cert_info(x, &info);
	assert_string_equal(info.cn, "system:node:node-1");
	assert_strv(info.orgs, "system:nodes");
	assert_strv(info.dns, "node-1");
	assert_strv(info.ips, "10.0.0.5");
	/* Usages come from the policy, not the request. */
	assert_int_equal(info.usages, PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH);
	assert_false(info.is_ca);
	assert_string_equal(info.issuer, "CN=kubernetes");
	assert_true(strlen(info.serial) > 0);
	pki_cert_info_free(&info);

	assert_int_equal(pki_verify_with(x, s.ca, T0, PKI_PURPOSE_CLIENT), 0);
	assert_int_equal(pki_verify_with(x, s.ca, T0, PKI_PURPOSE_SERVER), ERR_UNAUTHORIZED);
	X509_free(x);

	/* Exactly 8h is not short: it is backdated too. */
	x = sign_ttl(&s, PKI_SHORT_NS);
	assert_int_equal(pki_cert_not_after(x), T0 + 8 * NS_PER_HOUR - 5 * NS_PER_MIN);
	X509_free(x);
	signer_free(&s);
}

static void test_csr_sign_short_ttl(void **state)
{
	struct signer s;
	X509 *x;

	signer_init(&s, 10 * YEAR);
	x = sign_ttl(&s, NS_PER_HOUR);
	assert_non_null(x);
	assert_int_equal(pki_cert_not_before(x), T0 - 5 * NS_PER_MIN);
	/* A short certificate keeps its whole life. */
	assert_int_equal(pki_cert_not_after(x), T0 + NS_PER_HOUR);
	X509_free(x);

	x = sign_ttl(&s, PKI_SHORT_NS - NS_PER_SEC);
	assert_int_equal(pki_cert_not_after(x), T0 + PKI_SHORT_NS - NS_PER_SEC);
	X509_free(x);

	/* "now" is the process clock's. */
	clock_advance(3 * NS_PER_HOUR);
	x = sign_ttl(&s, NS_PER_HOUR);
	assert_int_equal(pki_cert_not_before(x), T0 + 3 * NS_PER_HOUR - 5 * NS_PER_MIN);
	assert_int_equal(pki_cert_not_after(x), T0 + 4 * NS_PER_HOUR);
	X509_free(x);
	signer_free(&s);
}

static void test_csr_sign_clipped_to_ca(void **state)
{
	struct signer s;
	X509 *x;

	signer_init(&s, NS_PER_DAY);
	x = sign_ttl(&s, YEAR);
	assert_non_null(x);
	assert_int_equal(pki_cert_not_after(x), T0 + NS_PER_DAY);
	assert_int_equal(pki_verify_with(x, s.ca, T0, PKI_PURPOSE_CLIENT), 0);
	X509_free(x);

	/* With 2h left on the CA, a 1h certificate is not clipped. */
	clock_advance(22 * NS_PER_HOUR);
	x = sign_ttl(&s, NS_PER_HOUR);
	assert_int_equal(pki_cert_not_after(x), T0 + 23 * NS_PER_HOUR);
	X509_free(x);
	/* ...a 3h one is. */
	x = sign_ttl(&s, 3 * NS_PER_HOUR);
	assert_int_equal(pki_cert_not_after(x), T0 + NS_PER_DAY);
	X509_free(x);
	signer_free(&s);
}

static void test_csr_sign_ca_expired(void **state)
{
	struct signer s;

	signer_init(&s, NS_PER_DAY); /* NotAfter 2026-12-01T10:00:00Z */

	/* Long expired: even the backdated start is past the CA. */
	clock_use_virtual(T0 + NS_PER_DAY + NS_PER_HOUR);
	err_clear();
	assert_null(sign_ttl(&s, YEAR));
	assert_contains(err_msg(), "the signer has expired");
	assert_contains(err_msg(), "2026-12-01T10:00:00Z");

	/* Expired a minute ago: the backdated start is still inside. */
	clock_use_virtual(T0 + NS_PER_DAY + NS_PER_MIN);
	err_clear();
	assert_null(sign_ttl(&s, YEAR));
	assert_contains(err_msg(), "refusing to sign a certificate that expired in the past");

	/* At the very instant it expires. */
	clock_use_virtual(T0 + NS_PER_DAY);
	assert_null(sign_ttl(&s, NS_PER_HOUR));
	signer_free(&s);
}

/* ---- PEM helpers and files ---------------------------------------------------- */

static void test_certs_parse_chain(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *leaf = make_leaf(ec2, "leaf", PKI_U_CLIENT_AUTH, T0, T0 + YEAR, ca, ec1), *first;
	char *a = pki_cert_pem(leaf), *b = pki_cert_pem(ca), *chain = concat(a, b);
	STACK_OF(X509) *certs = NULL;

	assert_starts_with(a, "-----BEGIN CERTIFICATE-----\n");
	assert_int_equal(pki_certs_parse(chain, strlen(chain), &certs), 0);
	assert_int_equal(sk_X509_num(certs), 2);
	assert_int_equal(X509_cmp(sk_X509_value(certs, 0), leaf), 0);
	assert_int_equal(X509_cmp(sk_X509_value(certs, 1), ca), 0);
	sk_X509_pop_free(certs, X509_free);

	first = pki_cert_parse(chain, strlen(chain));
	assert_non_null(first);
	assert_int_equal(X509_cmp(first, leaf), 0);
	X509_free(first);

	/* Text around the blocks (as `openssl x509 -text` prints) and CRLF line
	 * ends are fine. */
	{
		char *text = NULL, *crlf = malloc(2 * strlen(chain) + 1), *o = crlf;
		if (asprintf(&text, "subject=CN = leaf\nissuer=CN = kubernetes\n%strailer\n",
		             chain) < 0)
			abort();
		for (const char *c = chain; *c; c++) {
			if (*c == '\n')
				*o++ = '\r';
			*o++ = *c;
		}
		*o = '\0';
		assert_int_equal(pki_certs_parse(text, strlen(text), &certs), 0);
		assert_int_equal(sk_X509_num(certs), 2);
		sk_X509_pop_free(certs, X509_free);
		assert_int_equal(pki_certs_parse(crlf, strlen(crlf), &certs), 0);
		assert_int_equal(sk_X509_num(certs), 2);
		assert_int_equal(X509_cmp(sk_X509_value(certs, 1), ca), 0);
		sk_X509_pop_free(certs, X509_free);
		free(text);
		free(crlf);
	}
	free(a);
	free(b);
	free(chain);
	X509_free(leaf);
	X509_free(ca);
}

static void test_certs_parse_errors(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	char *cert = pki_cert_pem(ca), *key = pki_key_pem(ec1), *two = concat(cert, cert);
	STACK_OF(X509) *certs = NULL;

	assert_int_equal(pki_certs_parse("just text\n", 10, &certs), ERR_PARSE);
	assert_contains(err_msg(), "not a PEM file");

	/* Cut in the middle of the body. */
	assert_int_equal(pki_certs_parse(cert, strlen(cert) / 2, &certs), ERR_PARSE);
	assert_contains(err_msg(), "truncated PEM");
	/* ...and in the middle of the second of two. */
	assert_int_equal(pki_certs_parse(two, strlen(two) - 40, &certs), ERR_PARSE);
	assert_contains(err_msg(), "truncated PEM");

	assert_int_equal(pki_certs_parse(key, strlen(key), &certs), ERR_PARSE);
	assert_contains(err_msg(), "no CERTIFICATE block");
	assert_null(certs);

	assert_null(pki_cert_parse("", 0));
	assert_contains(err_msg(), "not a PEM file");
	free(cert);
	free(key);
	free(two);
	X509_free(ca);
}

static void test_certs_parse_bad_body(void **state)
{
	/* Well-formed armour around a body that is not a certificate. The
	 * contract: every pki_certs_parse error is ERR_PARSE, the decode failure
	 * included. */
	static const unsigned char junk[] = "this is not DER at all, just bytes";
	char *pem = der_pem("CERTIFICATE", junk, sizeof(junk));
	STACK_OF(X509) *certs = NULL;

	int r = pki_certs_parse(pem, strlen(pem), &certs);

	free(pem);
	if (r == 0)
		sk_X509_pop_free(certs, X509_free);
	if (r != ERR_PARSE)
		fail_msg("pki_certs_parse of a bad body: %s (%d), want ERR_PARSE; \"%s\"",
		         err_name(r), r, err_msg());
}

static void test_cert_key_files(void **state)
{
	char *dir = mkdir_tmp(), *crt = path_in(dir, "ca.crt"), *kf = path_in(dir, "ca.key");
	char *csrf = path_in(dir, "req.csr"), *missing = path_in(dir, "missing.crt");
	X509 *ca = make_ca(ec1, "kubernetes"), *back;
	X509_REQ *req = pki_csr_new(ec2, "someone", NULL, NULL, NULL, 0), *req_back;
	EVP_PKEY *kback;
	struct stat st;
	char *pem, *text;

	assert_int_equal(pki_cert_save(crt, ca), 0);
	back = pki_cert_load(crt);
	assert_non_null(back);
	assert_int_equal(X509_cmp(back, ca), 0);
	assert_int_equal(file_read(crt, &text, NULL, 1 << 20), 0);
	pem = pki_cert_pem(ca);
	assert_string_equal(text, pem);
	free(text);
	free(pem);

	assert_int_equal(pki_key_save(kf, ec1), 0);
	assert_int_equal(stat(kf, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	kback = pki_key_load(kf);
	assert_non_null(kback);
	assert_int_equal(EVP_PKEY_eq(kback, ec1), 1);
	assert_int_equal(file_read(kf, &text, NULL, 1 << 20), 0);
	assert_starts_with(text, "-----BEGIN EC PRIVATE KEY-----\n");
	free(text);

	/* Overwriting keeps the key private. */
	assert_int_equal(chmod(kf, 0644), 0);
	assert_int_equal(pki_key_save(kf, ec2), 0);
	assert_int_equal(stat(kf, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	pem = pki_csr_pem(req);
	write_text(csrf, pem);
	free(pem);
	req_back = pki_csr_load(csrf);
	assert_non_null(req_back);
	assert_int_equal(X509_REQ_verify(req_back, ec2), 1);

	/* Errors name the file. */
	assert_null(pki_cert_load(missing));
	assert_contains(err_msg(), missing);
	assert_null(pki_key_load(missing));
	assert_contains(err_msg(), missing);
	assert_null(pki_csr_load(missing));
	/* A key file is not a certificate file. */
	assert_null(pki_cert_load(kf));
	assert_contains(err_msg(), kf);
	assert_contains(err_msg(), "no CERTIFICATE block");

	X509_REQ_free(req);
	X509_REQ_free(req_back);
	EVP_PKEY_free(kback);
	X509_free(back);
	X509_free(ca);
	free(crt);
	free(kf);
	free(csrf);
	free(missing);
	rm_rf(dir);
}

static void test_pair_load(void **state)
{
	char *dir = mkdir_tmp(), *good = path_in(dir, "pair.pem"), *bad = path_in(dir, "bad.pem");
	char *only = path_in(dir, "only.pem");
	X509 *ca = make_ca(ec1, "kubernetes"), *c = NULL;
	X509 *leaf = make_leaf(ec2, "leaf", PKI_U_CLIENT_AUTH, T0, T0 + YEAR, ca, ec1);
	char *cp = pki_cert_pem(leaf), *kp = pki_key_pem(ec2), *wrong = pki_key_pem(ec1);
	char *pair = concat(cp, kp), *mismatched = concat(cp, wrong);
	EVP_PKEY *k = NULL;

	write_text(good, pair);
	assert_int_equal(pki_pair_load(good, &c, &k), 0);
	assert_int_equal(X509_cmp(c, leaf), 0);
	assert_int_equal(EVP_PKEY_eq(k, ec2), 1);
	X509_free(c);
	EVP_PKEY_free(k);

	write_text(bad, mismatched);
	assert_int_equal(pki_pair_load(bad, &c, &k), ERR_INVALID);
	assert_contains(err_msg(), "does not match");
	assert_contains(err_msg(), bad);
	assert_null(c);
	assert_null(k);

	write_text(only, cp);
	assert_true(pki_pair_load(only, &c, &k) < 0);
	assert_contains(err_msg(), "PRIVATE KEY");
	assert_null(c);
	assert_null(k);

	free(cp);
	free(kp);
	free(wrong);
	free(pair);
	free(mismatched);
	X509_free(leaf);
	X509_free(ca);
	free(good);
	free(bad);
	free(only);
	rm_rf(dir);
}

/* ---- verification at a chosen time ------------------------------------------- */

static void test_verify_valid(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *x = make_leaf(ec2, "c", pki_usages_kubelet(false, false), T0, T0 + YEAR, ca, ec1);

	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_ANY), 0);
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_CLIENT), 0);
	assert_int_equal(pki_verify_with(x, ca, T0 + YEAR - NS_PER_SEC, PKI_PURPOSE_CLIENT), 0);
	X509_free(x);
	X509_free(ca);
}

static void test_verify_window_inclusive(void **state)
{
	/* RFC 5280 §4.1.2.5 and Go's isValid: the window is notBefore through
	 * notAfter inclusive ("expired" is now.After(NotAfter)). */
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *x = make_leaf(ec2, "c", PKI_U_CLIENT_AUTH, T0, T0 + YEAR, ca, ec1);

	int at_start = pki_verify_with(x, ca, T0, PKI_PURPOSE_ANY);
	int at_end = pki_verify_with(x, ca, T0 + YEAR, PKI_PURPOSE_ANY);
	char msg[256];
	int after;

	snprintf(msg, sizeof(msg), "%s", err_msg());
	after = pki_verify_with(x, ca, T0 + YEAR + NS_PER_SEC, PKI_PURPOSE_ANY);
	/* Half a second past NotAfter is the same second for OpenSSL, but Go
	 * compares nanoseconds: expired (a kubelet and the server must agree). */
	int half = pki_verify_with(x, ca, T0 + YEAR + NS_PER_SEC / 2, PKI_PURPOSE_ANY);
	X509_free(x);
	X509_free(ca);
	assert_int_equal(at_start, 0);
	assert_int_equal(after, ERR_EXPIRED);
	assert_int_equal(half, ERR_EXPIRED);
	if (at_end != 0)
		fail_msg("verify at exactly NotAfter: %s, want 0; \"%s\"", err_name(at_end), msg);
}

static void test_verify_not_yet_valid(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *x = make_leaf(ec2, "c", PKI_U_CLIENT_AUTH, T0 + NS_PER_HOUR, T0 + YEAR, ca, ec1);

	assert_int_equal(pki_verify_with(x, ca, T0 + 30 * NS_PER_MIN, PKI_PURPOSE_ANY),
	                 ERR_EXPIRED);
	assert_string_equal(err_msg(), "x509: certificate has expired or is not yet valid: "
	                               "current time 2026-11-30T10:30:00Z is before "
	                               "2026-11-30T11:00:00Z");

	/* "current time" is local, as Go's time.Now() prints; the edge is UTC. */
	setenv("TZ", "XXX-1", 1);
	tzset();
	assert_int_equal(pki_verify_with(x, ca, T0 + 30 * NS_PER_MIN, PKI_PURPOSE_ANY),
	                 ERR_EXPIRED);
	setenv("TZ", "UTC", 1);
	tzset();
	assert_string_equal(err_msg(), "x509: certificate has expired or is not yet valid: "
	                               "current time 2026-11-30T11:30:00+01:00 is before "
	                               "2026-11-30T11:00:00Z");
	X509_free(x);
	X509_free(ca);
}

static void test_verify_expired(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *x = make_leaf(ec2, "c", PKI_U_CLIENT_AUTH, T0, T0 + YEAR, ca, ec1);
	int64_t at = INT64_C(1830297600) * NS_PER_SEC; /* 2028-01-01T00:00:00Z */

	assert_int_equal(pki_verify_with(x, ca, at, PKI_PURPOSE_CLIENT), ERR_EXPIRED);
	assert_contains(err_msg(),
	                "x509: certificate has expired or is not yet valid: current time");
	assert_contains(err_msg(), "is after");
	assert_string_equal(err_msg(), "x509: certificate has expired or is not yet valid: "
	                               "current time 2028-01-01T00:00:00Z is after "
	                               "2027-11-30T10:00:00Z");
	/* One second past NotAfter is already too late. */
	assert_int_equal(pki_verify_with(x, ca, T0 + YEAR + NS_PER_SEC, PKI_PURPOSE_ANY),
	                 ERR_EXPIRED);
	X509_free(x);
	X509_free(ca);
}

static void test_verify_expired_names_leaf(void **state)
{
	/* Go checks the leaf before it looks for a chain: when both the leaf and
	 * its CA have expired, the message names the leaf's NotAfter. */
	X509 *ca = pki_ca_new(ec1, "kubernetes", NS_PER_DAY); /* to 2026-12-01T10:00:00Z */
	X509 *x = make_leaf(ec2, "c", PKI_U_CLIENT_AUTH, T0, T0 + 12 * NS_PER_HOUR, ca, ec1);
	int r = pki_verify_with(x, ca, T0 + 3 * NS_PER_DAY, PKI_PURPOSE_ANY);
	char msg[256];

	snprintf(msg, sizeof(msg), "%s", err_msg());
	X509_free(x);
	X509_free(ca);
	assert_int_equal(r, ERR_EXPIRED);
	assert_string_equal(msg, "x509: certificate has expired or is not yet valid: current time "
	                         "2026-12-03T10:00:00Z is after 2026-11-30T22:00:00Z");
}

static void test_verify_at_time_not_clock(void **state)
{
	/* The time given wins over the process clock and over OpenSSL's now. */
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *x = make_leaf(ec2, "c", PKI_U_CLIENT_AUTH, T0 + 100 * NS_PER_DAY,
	                    T0 + 101 * NS_PER_DAY, ca, ec1);

	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_ANY), ERR_EXPIRED);
	assert_int_equal(
	    pki_verify_with(x, ca, T0 + 100 * NS_PER_DAY + NS_PER_HOUR, PKI_PURPOSE_ANY), 0);
	clock_advance(200 * NS_PER_DAY);
	assert_int_equal(
	    pki_verify_with(x, ca, T0 + 100 * NS_PER_DAY + NS_PER_HOUR, PKI_PURPOSE_ANY), 0);
	X509_free(x);
	X509_free(ca);
}

static void test_verify_unknown_authority(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes"), *other = make_ca(ec2, "kubernetes");
	X509 *x = make_leaf(rsa1, "c", PKI_U_CLIENT_AUTH, T0, T0 + YEAR, ca, ec1);
	STACK_OF(X509) *roots = sk_X509_new_null();

	/* Same name, different key: still unknown. */
	assert_int_equal(pki_verify_with(x, other, T0, PKI_PURPOSE_ANY), ERR_UNAUTHORIZED);
	assert_string_equal(err_msg(), "x509: certificate signed by unknown authority");
	/* A self-signed leaf against someone else's root. */
	assert_int_equal(pki_verify_with(other, ca, T0, PKI_PURPOSE_ANY), ERR_UNAUTHORIZED);
	assert_string_equal(err_msg(), "x509: certificate signed by unknown authority");

	/* Any one of several roots will do. */
	sk_X509_push(roots, other);
	sk_X509_push(roots, ca);
	assert_int_equal(pki_verify(x, NULL, roots, T0, PKI_PURPOSE_CLIENT), 0);
	/* No roots at all. */
	sk_X509_zero(roots);
	assert_int_equal(pki_verify(x, NULL, roots, T0, PKI_PURPOSE_CLIENT), ERR_UNAUTHORIZED);
	sk_X509_free(roots);
	X509_free(x);
	X509_free(ca);
	X509_free(other);
}

static void test_verify_purpose(void **state)
{
	X509 *ca = make_ca(ec1, "kubernetes");
	X509 *srv = make_leaf(ec2, "s", pki_usages_kubelet(false, true), T0, T0 + YEAR, ca, ec1);
	X509 *cli = make_leaf(ec2, "c", pki_usages_kubelet(false, false), T0, T0 + YEAR, ca, ec1);

	assert_int_equal(pki_verify_with(srv, ca, T0, PKI_PURPOSE_SERVER), 0);
	assert_int_equal(pki_verify_with(srv, ca, T0, PKI_PURPOSE_ANY), 0);
	assert_int_equal(pki_verify_with(srv, ca, T0, PKI_PURPOSE_CLIENT), ERR_UNAUTHORIZED);
	assert_contains(err_msg(), "incompatible key usage");
	assert_string_equal(err_msg(), "x509: certificate specifies an incompatible key usage");
	assert_int_equal(pki_verify_with(cli, ca, T0, PKI_PURPOSE_SERVER), ERR_UNAUTHORIZED);
	assert_contains(err_msg(), "incompatible key usage");
	X509_free(srv);
	X509_free(cli);
	X509_free(ca);
}

static void test_verify_intermediate(void **state)
{
	EVP_PKEY *leaf_key = pki_key_new(PKI_KEY_ECDSA);
	X509 *root = make_ca(ec1, "root");
	struct pki_cert_spec ispec = {
	    .cn = "intermediate",
	    .usages = PKI_U_CERT_SIGN | PKI_U_DIGITAL_SIGNATURE,
	    .is_ca = true,
	    .not_before_ns = T0,
	    .not_after_ns = T0 + 5 * YEAR,
	};
	X509 *inter = pki_cert_new(&ispec, ec2, root, ec1);
	X509 *leaf, *selfsigned = make_ca(rsa1, "intermediate");
	STACK_OF(X509) *ints = sk_X509_new_null(), *roots = sk_X509_new_null();
	struct pki_cert_info info;

	assert_non_null(inter);
	pki_cert_info(inter, &info);
	assert_true(info.is_ca);
	assert_string_equal(info.issuer, "CN=root");
	pki_cert_info_free(&info);
	assert_int_equal(pki_verify_with(inter, root, T0, PKI_PURPOSE_ANY), 0);

	leaf = make_leaf(leaf_key, "leaf", pki_usages_kubelet(false, false), T0, T0 + YEAR, inter,
	                 ec2);
	sk_X509_push(ints, inter);
	sk_X509_push(roots, root);
	assert_int_equal(pki_verify(leaf, ints, roots, T0, PKI_PURPOSE_CLIENT), 0);
	/* Without the intermediate the chain does not reach the root. */
	assert_int_equal(pki_verify(leaf, NULL, roots, T0, PKI_PURPOSE_CLIENT), ERR_UNAUTHORIZED);
	assert_string_equal(err_msg(), "x509: certificate signed by unknown authority");
	/* An impostor with the intermediate's name but another key. */
	sk_X509_zero(ints);
	sk_X509_push(ints, selfsigned);
	assert_int_equal(pki_verify(leaf, ints, roots, T0, PKI_PURPOSE_CLIENT), ERR_UNAUTHORIZED);
	sk_X509_free(ints);
	sk_X509_free(roots);
	X509_free(leaf);
	X509_free(inter);
	X509_free(root);
	X509_free(selfsigned);
	EVP_PKEY_free(leaf_key);
}

static void test_verify_intermediate_as_root(void **state)
{
	/* Go's x509 treats every certificate in Roots as a trust anchor, self-signed
	 * or not: an apiserver whose --client-ca-file holds only an intermediate
	 * accepts the clients that intermediate signed. */
	X509 *root = make_ca(ec1, "root");
	struct pki_cert_spec ispec = {
	    .cn = "intermediate",
	    .usages = PKI_U_CERT_SIGN | PKI_U_DIGITAL_SIGNATURE,
	    .is_ca = true,
	    .not_before_ns = T0,
	    .not_after_ns = T0 + 5 * YEAR,
	};
	X509 *inter = pki_cert_new(&ispec, ec2, root, ec1), *leaf;
	int r;

	assert_non_null(inter);
	leaf = make_leaf(rsa1, "leaf", pki_usages_kubelet(true, false), T0, T0 + YEAR, inter, ec2);
	r = pki_verify_with(leaf, inter, T0, PKI_PURPOSE_CLIENT);
	X509_free(leaf);
	X509_free(inter);
	X509_free(root);
	if (r != 0)
		fail_msg("leaf verified against its issuing intermediate as root: %s, want 0; "
		         "\"%s\"",
		         err_name(r), err_msg());
}

/* ---- tokens ------------------------------------------------------------------ */

static void test_token(void **state)
{
	static const char *const valid[] = {"abcdef.0123456789abcdef", "000000.0000000000000000",
	                                    "zzzzzz.zzzzzzzzzzzzzzzz", NULL};
	static const char *const invalid[] = {
	    "",
	    "abcdef",
	    "ABCDEF.0123456789abcdef",
	    "abcdef.0123456789ABCDEF",
	    "abcdef0123456789abcdef",
	    "abcdef-0123456789abcdef",
	    "abcde.0123456789abcdefg",
	    "abcdef.0123456789abcde",
	    "abcdef.0123456789abcdef0",
	    "abc_ef.0123456789abcdef",
	    "abcdef.0123456789abcde.",
	    " abcdef.0123456789abcde",
	    NULL,
	};
	char a[24], b[24];

	for (size_t i = 0; valid[i]; i++)
		if (!pki_token_valid(valid[i]))
			fail_msg("\"%s\" should be valid", valid[i]);
	for (size_t i = 0; invalid[i]; i++)
		if (pki_token_valid(invalid[i]))
			fail_msg("\"%s\" should be invalid", invalid[i]);

	memset(a, 'X', sizeof(a));
	assert_int_equal(pki_token_new(a), 0);
	assert_int_equal(strlen(a), 23);
	assert_true(matches_regex(a, "^[a-z0-9]{6}\\.[a-z0-9]{16}$"));
	assert_true(pki_token_valid(a));
	assert_int_equal(pki_token_new(b), 0);
	assert_true(pki_token_valid(b));
	assert_string_not_equal(a, b);
}

/* ---- the etcd PKI (cluster.h) and its expiry rows (expiry.h) -------------- */

/* kubeadm's etcd files (cmd/kubeadm/app/phases/certs/certlist.go). */
static const char *const etcd_keys[] = {"pki/etcd/ca.key",
                                        "pki/etcd/server.key",
                                        "pki/etcd/peer.key",
                                        "pki/etcd/healthcheck-client.key",
                                        "pki/apiserver-etcd-client.key",
                                        NULL};
static const char *const etcd_certs[] = {"pki/etcd/ca.crt",
                                         "pki/etcd/server.crt",
                                         "pki/etcd/peer.crt",
                                         "pki/etcd/healthcheck-client.crt",
                                         "pki/apiserver-etcd-client.crt",
                                         NULL};

static void say_into(void *arg, const char *line)
{
	strv_push(arg, line);
}

/* cluster_pki_init with the etcd PKI for node (NULL: the hostname). */
static int init_etcd(const char *dir, const char *node, bool etcd, struct strv *said)
{
	static const char *const sans[] = {"10.0.0.7", "etcd.example.com", NULL};
	struct cluster_pki_opts o = {
	    .dir = dir,
	    .cluster_name = "kubernetes",
	    .server = "https://127.0.0.1:6443",
	    .key_type = PKI_KEY_ECDSA,
	    .ca_validity_ns = CLUSTER_CA_VALIDITY,
	    .validity_ns = CLUSTER_CERT_VALIDITY,
	    .node_name = node,
	    .etcd = etcd,
	    .etcd_sans = sans,
	    .say = say_into,
	    .say_arg = said,
	};
	int r;

	strv_free(said);
	if ((r = cluster_pki_init(&o)) < 0)
		print_error("cluster_pki_init: %s (%s)\n", err_name(r), err_msg());
	return r;
}

static X509 *load_in(const char *dir, const char *rel)
{
	char *p = path_in(dir, rel);
	X509 *x = pki_cert_load(p);
	if (!x)
		fail_msg("%s: %s", rel, err_msg());
	free(p);
	return x;
}

static char *read_in(const char *dir, const char *rel)
{
	char *p = path_in(dir, rel), *text = NULL;
	if (file_read(p, &text, NULL, 1 << 20) < 0)
		fail_msg("read %s: %s", rel, err_msg());
	free(p);
	return text;
}

static bool exists_in(const char *dir, const char *rel)
{
	char *p = path_in(dir, rel);
	bool yes = file_exists(p);
	free(p);
	return yes;
}

static void unlink_in(const char *dir, const char *rel)
{
	char *p = path_in(dir, rel);
	assert_int_equal(unlink(p), 0);
	free(p);
}

/* Every file under the cluster dir that `rels` names, read now. */
static void snap(const char *dir, const char *const *rels, char **out)
{
	for (size_t i = 0; rels[i]; i++)
		out[i] = read_in(dir, rels[i]);
}

/* Which of rels changed since snap (true) — and frees the snapshot. */
static void changed_since(const char *dir, const char *const *rels, char **before, bool *out)
{
	for (size_t i = 0; rels[i]; i++) {
		char *now = read_in(dir, rels[i]);
		out[i] = strcmp(now, before[i]) != 0;
		free(now);
		free(before[i]);
	}
}

/* A leaf of the etcd CA as kubeadm makes it: subject, SANs, usages, CA. */
static void check_etcd_leaf(const char *dir, const char *rel, const char *cn, bool serving,
                            X509 *etcd_ca, X509 *cluster_ca)
{
	const unsigned both = PKI_U_SERVER_AUTH | PKI_U_CLIENT_AUTH;
	X509 *x = load_in(dir, rel);
	struct pki_cert_info info;

	pki_cert_info(x, &info);
	assert_string_equal(info.cn, cn);
	/* kubeadm 1.32 puts no O= on any of them. */
	assert_int_equal(info.orgs.n, 0);
	assert_false(info.is_ca);
	assert_int_equal(info.not_before_ns, T0 - PKI_BACKDATE_NS);
	assert_int_equal(info.not_after_ns, T0 + CLUSTER_CERT_VALIDITY);
	if (serving) {
		const char *const dns[] = {cn, "localhost", "etcd.example.com", NULL};
		assert_true(strv_equals(&info.dns, dns));
		assert_strv(info.ips, "127.0.0.1", "::1", "10.0.0.7");
		assert_int_equal(info.usages & both, both);
		assert_int_equal(pki_verify_with(x, etcd_ca, T0, PKI_PURPOSE_SERVER), 0);
	} else {
		assert_int_equal(info.dns.n + info.ips.n, 0);
		assert_int_equal(info.usages & both, PKI_U_CLIENT_AUTH);
		assert_int_equal(pki_verify_with(x, etcd_ca, T0, PKI_PURPOSE_SERVER),
		                 ERR_UNAUTHORIZED);
	}
	assert_int_equal(pki_verify_with(x, etcd_ca, T0, PKI_PURPOSE_CLIENT), 0);
	/* The cluster CA vouches for none of etcd's certificates. */
	assert_int_equal(pki_verify_with(x, cluster_ca, T0, PKI_PURPOSE_ANY), ERR_UNAUTHORIZED);
	assert_contains(err_msg(), "x509: certificate signed by unknown authority");
	pki_cert_info_free(&info);
	X509_free(x);
}

static void test_cluster_etcd_layout(void **state)
{
	char *dir = mkdir_tmp();
	struct strv said = STRV_INIT;
	struct pki_cert_info info;
	X509 *etcd_ca, *ca, *x;

	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	for (size_t i = 0; etcd_keys[i]; i++) {
		struct stat st;
		char *p = path_in(dir, etcd_keys[i]);
		assert_int_equal(stat(p, &st), 0);
		if ((st.st_mode & 07777) != 0600)
			fail_msg("%s has mode %o", etcd_keys[i], st.st_mode & 07777);
		free(p);
		assert_true(exists_in(dir, etcd_certs[i]));
	}

	etcd_ca = load_in(dir, "pki/etcd/ca.crt");
	ca = load_in(dir, "pki/ca.crt");
	pki_cert_info(etcd_ca, &info);
	assert_string_equal(info.cn, "etcd-ca");
	assert_true(info.is_ca);
	assert_int_equal(info.not_after_ns, T0 + CLUSTER_CA_VALIDITY);
	pki_cert_info_free(&info);
	assert_int_not_equal(X509_cmp(etcd_ca, ca), 0);

	check_etcd_leaf(dir, "pki/etcd/server.crt", "node-a", true, etcd_ca, ca);
	check_etcd_leaf(dir, "pki/etcd/peer.crt", "node-a", true, etcd_ca, ca);
	check_etcd_leaf(dir, "pki/etcd/healthcheck-client.crt", "kube-etcd-healthcheck-client",
	                false, etcd_ca, ca);
	check_etcd_leaf(dir, "pki/apiserver-etcd-client.crt", "kube-apiserver-etcd-client", false,
	                etcd_ca, ca);

	/* The cluster's own certificates are not the etcd CA's. */
	x = load_in(dir, "pki/apiserver.crt");
	assert_int_equal(pki_verify_with(x, etcd_ca, T0, PKI_PURPOSE_ANY), ERR_UNAUTHORIZED);
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_SERVER), 0);
	/* ... and the API server's certificate names the node, as kubeadm's. */
	pki_cert_info(x, &info);
	assert_true(strv_has(&info.dns, "node-a"));
	pki_cert_info_free(&info);
	X509_free(x);

	/* kubeadm's progress lines, with its base names. */
	assert_true(strv_has(&said, "[certs] Generating \"etcd/ca\" certificate and key"));
	assert_true(strv_has(&said, "[certs] Generating \"etcd/healthcheck-client\" certificate "
	                            "and key"));
	assert_true(strv_has(&said, "[certs] Generating \"apiserver-etcd-client\" certificate "
	                            "and key"));
	assert_true(strv_has(&said, "[certs] etcd/server serving cert is signed for DNS names "
	                            "[node-a localhost etcd.example.com] and IPs "
	                            "[127.0.0.1 ::1 10.0.0.7]"));
	assert_true(strv_has(&said, "[certs] etcd/peer serving cert is signed for DNS names "
	                            "[node-a localhost etcd.example.com] and IPs "
	                            "[127.0.0.1 ::1 10.0.0.7]"));
	X509_free(etcd_ca);
	X509_free(ca);
	strv_free(&said);
	rm_rf(dir);
}

static void test_cluster_etcd_off(void **state)
{
	/* Without opts.etcd (kubeadm's external etcd, and every caller that
	 * predates it) nothing of etcd's is written, nor listed. */
	char *dir = mkdir_tmp();
	struct strv said = STRV_INIT;
	struct expiry_report rep;

	assert_int_equal(init_etcd(dir, "node-a", false, &said), 0);
	assert_false(exists_in(dir, "pki/etcd"));
	assert_false(exists_in(dir, "pki/apiserver-etcd-client.crt"));
	assert_int_equal(expiry_scan(dir, NULL, T0, 30 * NS_PER_DAY, &rep), 0);
	assert_int_equal(rep.n, 6);
	for (size_t i = 0; i < rep.n; i++)
		if (strstr(rep.rows[i].name, "etcd"))
			fail_msg("row %s without a local etcd", rep.rows[i].name);
	expiry_report_free(&rep);
	strv_free(&said);
	rm_rf(dir);
}

static void test_cluster_etcd_empty_node_name(void **state)
{
	char *dir = mkdir_tmp();
	struct strv said = STRV_INIT;

	assert_int_equal(init_etcd(dir, "", true, &said), ERR_INVALID);
	assert_contains(err_msg(), "no node name");
	assert_false(exists_in(dir, "pki"));
	strv_free(&said);
	rm_rf(dir);
}

static void test_cluster_etcd_rerun(void **state)
{
	static const char *const rels[] = {"pki/etcd/ca.crt",
	                                   "pki/etcd/ca.key",
	                                   "pki/etcd/server.crt",
	                                   "pki/etcd/peer.crt",
	                                   "pki/etcd/healthcheck-client.crt",
	                                   "pki/apiserver-etcd-client.crt",
	                                   "pki/apiserver.crt",
	                                   "pki/ca.crt",
	                                   NULL};
	/* Which of rels a new node name remakes: what names the node. */
	static const bool renamed[] = {false, false, true, true, false, false, true, false};
	char *dir = mkdir_tmp(), *before[8];
	struct strv said = STRV_INIT;
	bool changed[8];
	X509 *x;

	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	snap(dir, rels, before);
	clock_advance(NS_PER_HOUR);
	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	assert_true(strv_has(&said, "[certs] Using existing etcd/ca certificate authority"));
	assert_true(strv_has(&said, "[certs] Using existing etcd/server certificate and key on "
	                            "disk"));
	assert_true(strv_has(&said, "[certs] Using existing apiserver-etcd-client certificate "
	                            "and key on disk"));
	changed_since(dir, rels, before, changed);
	for (size_t i = 0; rels[i]; i++)
		if (changed[i])
			fail_msg("%s was rewritten by a second init", rels[i]);

	snap(dir, rels, before);
	assert_int_equal(init_etcd(dir, "node-b", true, &said), 0);
	changed_since(dir, rels, before, changed);
	for (size_t i = 0; rels[i]; i++)
		if (changed[i] != renamed[i])
			fail_msg("%s: changed %d after a new node name, want %d", rels[i],
			         changed[i], renamed[i]);
	x = load_in(dir, "pki/etcd/peer.crt");
	{
		struct pki_cert_info info;
		pki_cert_info(x, &info);
		assert_string_equal(info.cn, "node-b");
		assert_true(strv_has(&info.dns, "node-b"));
		pki_cert_info_free(&info);
	}
	X509_free(x);
	strv_free(&said);
	rm_rf(dir);
}

static void test_cluster_etcd_server_needs_client_auth(void **state)
{
	/* A serving certificate without client auth, but otherwise right, is
	 * remade: etcd dials itself with it (kubeadm's reason for both). */
	static const char *const dns[] = {"node-a", "localhost", "etcd.example.com", NULL};
	static const char *const ips[] = {"127.0.0.1", "::1", "10.0.0.7", NULL};
	char *dir = mkdir_tmp(), *ckf = path_in(dir, "pki/etcd/ca.key");
	char *kf = path_in(dir, "pki/etcd/server.key"), *crt = path_in(dir, "pki/etcd/server.crt");
	struct strv said = STRV_INIT;
	struct pki_cert_info info;
	EVP_PKEY *ca_key, *key;
	X509 *ca, *x;

	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	ca = load_in(dir, "pki/etcd/ca.crt");
	ca_key = pki_key_load(ckf);
	key = pki_key_load(kf);
	assert_non_null(ca_key);
	assert_non_null(key);
	{
		struct pki_cert_spec spec = {.cn = "node-a",
		                             .dns = dns,
		                             .ips = ips,
		                             .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_SERVER_AUTH,
		                             .not_before_ns = T0,
		                             .not_after_ns = T0 + YEAR};
		x = pki_cert_new(&spec, key, ca, ca_key);
		assert_non_null(x);
		assert_int_equal(pki_cert_save(crt, x), 0);
		X509_free(x);
	}
	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	assert_true(strv_has(&said, "[certs] Generating \"etcd/server\" certificate and key"));
	assert_true(
	    strv_has(&said, "[certs] Using existing etcd/peer certificate and key on disk"));
	x = load_in(dir, "pki/etcd/server.crt");
	pki_cert_info(x, &info);
	assert_true(info.usages & PKI_U_CLIENT_AUTH);
	pki_cert_info_free(&info);
	X509_free(x);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(key);
	free(ckf);
	free(kf);
	free(crt);
	strv_free(&said);
	rm_rf(dir);
}

static void test_cluster_cas_are_independent(void **state)
{
	static const char *const rels[] = {"pki/etcd/ca.crt",
	                                   "pki/etcd/server.crt",
	                                   "pki/etcd/peer.crt",
	                                   "pki/etcd/healthcheck-client.crt",
	                                   "pki/apiserver-etcd-client.crt",
	                                   "pki/ca.crt",
	                                   "pki/apiserver.crt",
	                                   "pki/apiserver-kubelet-client.crt",
	                                   "admin.conf",
	                                   NULL};
	/* rels[0..4] are the etcd CA's, the rest the cluster CA's. */
	char *dir = mkdir_tmp(), *before[9];
	struct strv said = STRV_INIT;
	bool changed[9];

	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	snap(dir, rels, before);
	unlink_in(dir, "pki/etcd/ca.key");
	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	assert_true(strv_has(&said, "[certs] Generating \"etcd/ca\" certificate and key"));
	assert_true(strv_has(&said, "[certs] Using existing ca certificate authority"));
	changed_since(dir, rels, before, changed);
	for (size_t i = 0; rels[i]; i++)
		if (changed[i] != (i < 5))
			fail_msg("%s: changed %d after a new etcd CA", rels[i], changed[i]);

	snap(dir, rels, before);
	unlink_in(dir, "pki/ca.key");
	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	assert_true(strv_has(&said, "[certs] Using existing etcd/ca certificate authority"));
	changed_since(dir, rels, before, changed);
	for (size_t i = 0; rels[i]; i++)
		if (changed[i] != (i >= 5))
			fail_msg("%s: changed %d after a new cluster CA", rels[i], changed[i]);
	strv_free(&said);
	rm_rf(dir);
}

static const struct expiry_row *row_named(const struct expiry_report *rep, const char *name)
{
	for (size_t i = 0; i < rep->n; i++)
		if (strcmp(rep->rows[i].name, name) == 0)
			return &rep->rows[i];
	fail_msg("no row \"%s\"", name);
	return NULL;
}

static void test_expiry_etcd_rows(void **state)
{
	/* kubeadm's check-expiration: the certificates by name, then the CAs. */
	static const char *const names[] = {"admin.conf",
	                                    "apiserver",
	                                    "apiserver-etcd-client",
	                                    "apiserver-kubelet-client",
	                                    "controller-manager.conf",
	                                    "etcd-healthcheck-client",
	                                    "etcd-peer",
	                                    "etcd-server",
	                                    "scheduler.conf",
	                                    "ca",
	                                    "etcd-ca",
	                                    NULL};
	char *dir = mkdir_tmp(), *etcd_dir;
	struct strv said = STRV_INIT;
	struct expiry_report rep;
	const struct expiry_row *r;

	assert_int_equal(init_etcd(dir, "node-a", true, &said), 0);
	assert_int_equal(expiry_scan(dir, NULL, T0, 30 * NS_PER_DAY, &rep), 0);
	assert_int_equal(rep.n, strlist_len(names));
	for (size_t i = 0; names[i]; i++) {
		r = &rep.rows[i];
		assert_string_equal(r->name, names[i]);
		assert_int_equal(r->status, EXPIRY_OK);
		assert_false(r->external);
		assert_int_equal(r->is_ca, i >= 9);
		if (!r->is_ca)
			assert_string_equal(r->ca, strstr(names[i], "etcd") ? "etcd-ca" : "ca");
	}
	r = row_named(&rep, "etcd-server");
	etcd_dir = path_in(dir, "pki/etcd/server.crt");
	assert_string_equal(r->path, etcd_dir);
	free(etcd_dir);
	assert_int_equal(r->not_after_ns, T0 + CLUSTER_CERT_VALIDITY);
	assert_int_equal(row_named(&rep, "etcd-ca")->not_after_ns, T0 + CLUSTER_CA_VALIDITY);
	expiry_report_free(&rep);

	/* Damage: a cluster-CA certificate in etcd's place, a missing peer
	 * pair, and no etcd CA key (kubeadm never calls etcd-ca external). */
	{
		char *src = read_in(dir, "pki/apiserver-kubelet-client.crt");
		char *dst = path_in(dir, "pki/etcd/healthcheck-client.crt");
		write_text(dst, src);
		free(src);
		free(dst);
	}
	unlink_in(dir, "pki/etcd/peer.crt");
	unlink_in(dir, "pki/etcd/ca.key");
	assert_int_equal(expiry_scan(dir, NULL, T0, 30 * NS_PER_DAY, &rep), 0);
	r = row_named(&rep, "etcd-healthcheck-client");
	assert_int_equal(r->status, EXPIRY_INVALID);
	assert_string_equal(r->ca, "kubernetes");
	assert_contains(r->error, "signed by unknown authority");
	assert_int_equal(row_named(&rep, "etcd-peer")->status, EXPIRY_MISSING);
	assert_int_equal(row_named(&rep, "etcd-server")->status, EXPIRY_OK);
	assert_false(row_named(&rep, "etcd-ca")->external);
	assert_int_equal(row_named(&rep, "apiserver")->status, EXPIRY_OK);
	expiry_report_free(&rep);

	/* No pki/etcd: an external etcd, whose rows kubeadm leaves out. */
	etcd_dir = path_in(dir, "pki/etcd");
	rm_rf(etcd_dir);
	assert_int_equal(expiry_scan(dir, NULL, T0, 30 * NS_PER_DAY, &rep), 0);
	assert_int_equal(rep.n, 6);
	assert_string_equal(rep.rows[5].name, "ca");
	expiry_report_free(&rep);
	strv_free(&said);
	rm_rf(dir);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_key_ecdsa),
	    T(test_key_rsa),
	    T(test_key_parse_errors),
	    T(test_key_type_parse),
	    T(test_usage_parse),
	    T(test_usage_names),
	    T(test_usages_kubelet),
	    T(test_ca_new),
	    T(test_cert_new_leaf),
	    T(test_cert_new_rsa_leaf),
	    T(test_cert_new_invalid_san),
	    T(test_cert_usage_aliases),
	    T(test_cert_all_usages_roundtrip),
	    T(test_name_read),
	    T(test_csr_roundtrip),
	    T(test_csr_no_usages),
	    T(test_csr_tampered),
	    T(test_csr_parse_errors),
	    T(test_csr_pem_paths_agree),
	    T(test_csr_sign_long_ttl),
	    T(test_csr_sign_short_ttl),
	    T(test_csr_sign_clipped_to_ca),
	    T(test_csr_sign_ca_expired),
	    T(test_certs_parse_chain),
	    T(test_certs_parse_errors),
	    T(test_certs_parse_bad_body),
	    T(test_cert_key_files),
	    T(test_pair_load),
	    T(test_verify_valid),
	    T(test_verify_window_inclusive),
	    T(test_verify_not_yet_valid),
	    T(test_verify_expired),
	    T(test_verify_expired_names_leaf),
	    T(test_verify_at_time_not_clock),
	    T(test_verify_unknown_authority),
	    T(test_verify_purpose),
	    T(test_verify_intermediate),
	    T(test_verify_intermediate_as_root),
	    T(test_token),
	    T(test_cluster_etcd_layout),
	    T(test_cluster_etcd_off),
	    T(test_cluster_etcd_empty_node_name),
	    T(test_cluster_etcd_rerun),
	    T(test_cluster_etcd_server_needs_client_auth),
	    T(test_cluster_cas_are_independent),
	    T(test_expiry_etcd_rows),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
