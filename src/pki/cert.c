#include "pki/internal.h"

#include "base/clock.h"
#include "base/err.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kubernetes' usage names, in the order upstream lists them. */
static const struct usage_row {
	const char *name;
	unsigned bit;
	unsigned ku;    /* keyUsage flag, or 0 */
	int eku;        /* extendedKeyUsage NID, or NID_undef */
	const char *conf; /* X509V3 config word */
} usage_rows[] = {
	{"signing", PKI_U_SIGNING, KU_DIGITAL_SIGNATURE, NID_undef, "digitalSignature"},
	{"digital signature", PKI_U_DIGITAL_SIGNATURE, KU_DIGITAL_SIGNATURE, NID_undef,
	 "digitalSignature"},
	{"content commitment", PKI_U_CONTENT_COMMITMENT, KU_NON_REPUDIATION, NID_undef,
	 "nonRepudiation"},
	{"key encipherment", PKI_U_KEY_ENCIPHERMENT, KU_KEY_ENCIPHERMENT, NID_undef,
	 "keyEncipherment"},
	{"key agreement", PKI_U_KEY_AGREEMENT, KU_KEY_AGREEMENT, NID_undef, "keyAgreement"},
	{"data encipherment", PKI_U_DATA_ENCIPHERMENT, KU_DATA_ENCIPHERMENT, NID_undef,
	 "dataEncipherment"},
	{"cert sign", PKI_U_CERT_SIGN, KU_KEY_CERT_SIGN, NID_undef, "keyCertSign"},
	{"crl sign", PKI_U_CRL_SIGN, KU_CRL_SIGN, NID_undef, "cRLSign"},
	{"encipher only", PKI_U_ENCIPHER_ONLY, KU_ENCIPHER_ONLY, NID_undef, "encipherOnly"},
	{"decipher only", PKI_U_DECIPHER_ONLY, KU_DECIPHER_ONLY, NID_undef, "decipherOnly"},
	{"any", PKI_U_ANY, 0, NID_anyExtendedKeyUsage, "anyExtendedKeyUsage"},
	{"server auth", PKI_U_SERVER_AUTH, 0, NID_server_auth, "serverAuth"},
	{"client auth", PKI_U_CLIENT_AUTH, 0, NID_client_auth, "clientAuth"},
	{"code signing", PKI_U_CODE_SIGNING, 0, NID_code_sign, "codeSigning"},
	{"email protection", PKI_U_EMAIL_PROTECTION, 0, NID_email_protect, "emailProtection"},
	{"s/mime", PKI_U_SMIME, 0, NID_email_protect, "emailProtection"},
	{"ipsec end system", PKI_U_IPSEC_END_SYSTEM, 0, NID_ipsecEndSystem, "ipsecEndSystem"},
	{"ipsec tunnel", PKI_U_IPSEC_TUNNEL, 0, NID_ipsecTunnel, "ipsecTunnel"},
	{"ipsec user", PKI_U_IPSEC_USER, 0, NID_ipsecUser, "ipsecUser"},
	{"timestamping", PKI_U_TIMESTAMPING, 0, NID_time_stamp, "timeStamping"},
	{"ocsp signing", PKI_U_OCSP_SIGNING, 0, NID_OCSP_sign, "OCSPSigning"},
	{"microsoft sgc", PKI_U_MICROSOFT_SGC, 0, NID_ms_sgc, "msSGC"},
	{"netscape sgc", PKI_U_NETSCAPE_SGC, 0, NID_ns_sgc, "nsSGC"},
};
#define NUSAGES (sizeof(usage_rows) / sizeof(usage_rows[0]))

int pki_usage_parse(const char *name, unsigned *bit)
{
	for (size_t i = 0; i < NUSAGES; i++) {
		if (strcmp(usage_rows[i].name, name) == 0) {
			*bit = usage_rows[i].bit;
			return 0;
		}
	}
	return err_set(ERR_INVALID, "unknown usage \"%s\"", name);
}

void pki_usage_names(unsigned mask, struct strv *out)
{
	for (size_t i = 0; i < NUSAGES; i++)
		if (mask & usage_rows[i].bit)
			strv_push(out, usage_rows[i].name);
}

unsigned pki_usages_kubelet(bool rsa, bool serving)
{
	unsigned u = PKI_U_DIGITAL_SIGNATURE | (serving ? PKI_U_SERVER_AUTH : PKI_U_CLIENT_AUTH);
	return rsa ? u | PKI_U_KEY_ENCIPHERMENT : u;
}

/* Appends word to a comma-separated config value unless already there. */
static void conf_add(char *buf, size_t n, const char *word)
{
	if (strstr(buf, word))
		return;
	if (buf[0])
		strncat(buf, ",", n - strlen(buf) - 1);
	strncat(buf, word, n - strlen(buf) - 1);
}

static int push_ext(STACK_OF(X509_EXTENSION) **exts, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	if (!ex)
		return pki_ossl_err(value);
	if (!*exts)
		*exts = sk_X509_EXTENSION_new_null();
	sk_X509_EXTENSION_push(*exts, ex);
	return 0;
}

int pki_exts_add_usages(STACK_OF(X509_EXTENSION) **exts, unsigned usages, X509V3_CTX *ctx)
{
	char ku[256] = "", eku[256] = "";
	int r = 0;

	for (size_t i = 0; i < NUSAGES; i++) {
		if (!(usages & usage_rows[i].bit))
			continue;
		conf_add(usage_rows[i].ku ? ku : eku, sizeof(ku), usage_rows[i].conf);
	}
	if (ku[0]) {
		char v[300];
		/* Go marks keyUsage critical; so do we. */
		snprintf(v, sizeof(v), "critical,%s", ku);
		r = push_ext(exts, ctx, NID_key_usage, v);
	}
	if (r == 0 && eku[0])
		r = push_ext(exts, ctx, NID_ext_key_usage, eku);
	return r;
}

static bool valid_dns(const char *s)
{
	if (!*s || strlen(s) > 253)
		return false;
	for (const char *p = s; *p; p++)
		if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
		      ('0' <= *p && *p <= '9') || *p == '-' || *p == '.' || *p == '*'))
			return false;
	return true;
}

static bool valid_ip(const char *s)
{
	unsigned char buf[16];
	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

int pki_exts_add_sans(STACK_OF(X509_EXTENSION) **exts, const char *const *dns,
		      const char *const *ips, X509V3_CTX *ctx)
{
	size_t cap = 64, len = 0;
	char *v = calloc(1, cap);
	int r;

	for (int pass = 0; pass < 2; pass++) {
		const char *const *list = pass ? ips : dns;
		for (size_t i = 0; list && list[i]; i++) {
			size_t need;
			if (pass ? !valid_ip(list[i]) : !valid_dns(list[i])) {
				free(v);
				return err_set(ERR_INVALID, "invalid %s SAN \"%s\"",
					       pass ? "IP" : "DNS", list[i]);
			}
			need = len + strlen(list[i]) + 8;
			if (need > cap) {
				cap = need * 2;
				v = realloc(v, cap);
				if (!v)
					abort();
			}
			len += (size_t)snprintf(v + len, cap - len, "%s%s:%s", len ? "," : "",
						pass ? "IP" : "DNS", list[i]);
		}
	}
	r = len ? push_ext(exts, ctx, NID_subject_alt_name, v) : 0;
	free(v);
	return r;
}

static void add_general_names(const GENERAL_NAMES *names, struct strv *dns, struct strv *ips,
			      struct strv *emails, struct strv *uris)
{
	for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		const unsigned char *d;
		char buf[INET6_ADDRSTRLEN];
		int len;

		switch (g->type) {
		case GEN_DNS:
			strv_pushf(dns, "%.*s", ASN1_STRING_length(g->d.dNSName),
				   (const char *)ASN1_STRING_get0_data(g->d.dNSName));
			break;
		case GEN_EMAIL:
			strv_pushf(emails, "%.*s", ASN1_STRING_length(g->d.rfc822Name),
				   (const char *)ASN1_STRING_get0_data(g->d.rfc822Name));
			break;
		case GEN_URI:
			strv_pushf(uris, "%.*s", ASN1_STRING_length(g->d.uniformResourceIdentifier),
				   (const char *)ASN1_STRING_get0_data(
					   g->d.uniformResourceIdentifier));
			break;
		case GEN_IPADD:
			d = ASN1_STRING_get0_data(g->d.iPAddress);
			len = ASN1_STRING_length(g->d.iPAddress);
			if ((len == 4 || len == 16) &&
			    inet_ntop(len == 4 ? AF_INET : AF_INET6, d, buf, sizeof(buf)))
				strv_push(ips, buf);
			break;
		default:
			break;
		}
	}
}

void pki_exts_read(const STACK_OF(X509_EXTENSION) *exts, struct strv *dns, struct strv *ips,
		   struct strv *emails, struct strv *uris, unsigned *usages, bool *has_usages)
{
	GENERAL_NAMES *names = X509V3_get_d2i(exts, NID_subject_alt_name, NULL, NULL);
	ASN1_BIT_STRING *ku = X509V3_get_d2i(exts, NID_key_usage, NULL, NULL);
	EXTENDED_KEY_USAGE *eku = X509V3_get_d2i(exts, NID_ext_key_usage, NULL, NULL);

	*usages = 0;
	*has_usages = ku || eku;
	if (names)
		add_general_names(names, dns, ips, emails, uris);
	for (size_t i = 0; i < NUSAGES; i++) {
		const struct usage_row *u = &usage_rows[i];
		/* "signing" and "s/mime" are aliases: report the canonical names. */
		if (u->bit == PKI_U_SIGNING || u->bit == PKI_U_SMIME)
			continue;
		if (u->ku && ku) {
			int bitno = 0;
			for (unsigned f = u->ku; f > 1; f >>= 1)
				bitno++;
			/* keyUsage bit n is stored MSB-first: KU_ flags are its first 2 bytes. */
			if (ASN1_BIT_STRING_get_bit(ku, u->ku == KU_DECIPHER_ONLY ? 8 : 7 - bitno))
				*usages |= u->bit;
		}
		for (int j = 0; !u->ku && eku && j < sk_ASN1_OBJECT_num(eku); j++)
			if (OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, j)) == u->eku)
				*usages |= u->bit;
	}
	GENERAL_NAMES_free(names);
	ASN1_BIT_STRING_free(ku);
	EXTENDED_KEY_USAGE_free(eku);
}

void pki_name_read(const X509_NAME *name, char **cn, struct strv *orgs)
{
	*cn = NULL;
	for (int i = 0; i < X509_NAME_entry_count(name); i++) {
		const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
		int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
		unsigned char *utf8 = NULL;
		if ((nid != NID_commonName && nid != NID_organizationName) ||
		    ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e)) < 0)
			continue;
		if (nid == NID_organizationName && orgs)
			strv_push(orgs, (char *)utf8);
		else if (nid == NID_commonName && !*cn && !(*cn = strdup((char *)utf8)))
			abort();
		OPENSSL_free(utf8);
	}
	if (!*cn && !(*cn = strdup("")))
		abort();
}

X509_NAME *pki_name_new(const char *cn, const char *const *orgs)
{
	X509_NAME *n = X509_NAME_new();
	for (size_t i = 0; orgs && orgs[i]; i++)
		X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, (const unsigned char *)orgs[i],
					   -1, -1, 0);
	if (cn && *cn)
		X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					   -1, 0);
	return n;
}

int pki_set_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	int ok = bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
		 BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	return ok ? 0 : pki_ossl_err("serial number");
}

int64_t pki_asn1_time_ns(const ASN1_TIME *t)
{
	struct tm tm;
	if (!ASN1_TIME_to_tm(t, &tm))
		return 0;
	return (int64_t)timegm(&tm) * NS_PER_SEC;
}

int64_t pki_cert_not_before(const X509 *cert)
{
	return pki_asn1_time_ns(X509_get0_notBefore(cert));
}

int64_t pki_cert_not_after(const X509 *cert)
{
	return pki_asn1_time_ns(X509_get0_notAfter(cert));
}

static int set_validity(X509 *x, int64_t nb, int64_t na)
{
	/* Go writes whole seconds; so do we. */
	if (!ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(nb / NS_PER_SEC)) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(na / NS_PER_SEC)))
		return pki_ossl_err("validity");
	return 0;
}

X509 *pki_cert_new(const struct pki_cert_spec *spec, EVP_PKEY *pub, X509 *issuer,
		   EVP_PKEY *issuer_key)
{
	X509 *x = X509_new();
	X509_NAME *name = pki_name_new(spec->cn, spec->orgs);
	STACK_OF(X509_EXTENSION) *exts = NULL;
	X509V3_CTX ctx;
	int r = 0;

	X509_set_version(x, X509_VERSION_3);
	X509_set_subject_name(x, name);
	X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
	X509_NAME_free(name);
	X509_set_pubkey(x, pub);
	r = pki_set_serial(x);
	if (r == 0)
		r = set_validity(x, spec->not_before_ns, spec->not_after_ns);

	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	if (r == 0)
		r = push_ext(&exts, &ctx, NID_basic_constraints,
			     spec->is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
	if (r == 0)
		r = pki_exts_add_usages(&exts, spec->usages, &ctx);
	if (r == 0 && spec->is_ca)
		r = push_ext(&exts, &ctx, NID_subject_key_identifier, "hash");
	if (r == 0)
		r = pki_exts_add_sans(&exts, spec->dns, spec->ips, &ctx);
	for (int i = 0; r == 0 && i < sk_X509_EXTENSION_num(exts); i++)
		if (!X509_add_ext(x, sk_X509_EXTENSION_value(exts, i), -1))
			r = pki_ossl_err("add extension");
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	exts = NULL;
	/* The authority key id needs the issuer's SKI, hence after the others. */
	if (r == 0 && issuer)
		r = push_ext(&exts, &ctx, NID_authority_key_identifier, "keyid:always");
	if (r == 0 && exts && !X509_add_ext(x, sk_X509_EXTENSION_value(exts, 0), -1))
		r = pki_ossl_err("add extension");
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	if (r == 0 && !X509_sign(x, issuer_key, EVP_sha256()))
		r = pki_ossl_err("sign certificate");
	if (r < 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}

X509 *pki_ca_new(EVP_PKEY *key, const char *cn, int64_t validity_ns)
{
	int64_t now = clock_now();
	struct pki_cert_spec spec = {
		.cn = cn,
		.usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_CERT_SIGN,
		.is_ca = true,
		.not_before_ns = now,
		.not_after_ns = now + validity_ns,
	};
	return pki_cert_new(&spec, key, NULL, key);
}

static char *name_string(const X509_NAME *n)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long len;

	X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
	len = BIO_get_mem_data(b, &data);
	if (!(out = strndup(data, (size_t)len)))
		abort();
	BIO_free(b);
	return out;
}

static void hex_colon(const unsigned char *d, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && o + 4 <= cap; i++)
		o += (size_t)snprintf(out + o, cap - o, i ? ":%02X" : "%02X", d[i]);
}

int pki_cert_info(X509 *cert, struct pki_cert_info *out)
{
	unsigned char md[EVP_MAX_MD_SIZE], ser[64];
	unsigned mdlen = 0;
	const ASN1_INTEGER *sn = X509_get0_serialNumber(cert);
	BIGNUM *bn = ASN1_INTEGER_to_BN(sn, NULL);
	int serlen = bn ? BN_bn2bin(bn, ser) : 0;
	bool has;

	memset(out, 0, sizeof(*out));
	out->subject = name_string(X509_get_subject_name(cert));
	out->issuer = name_string(X509_get_issuer_name(cert));
	pki_name_read(X509_get_subject_name(cert), &out->cn, &out->orgs);
	pki_exts_read(X509_get0_extensions(cert), &out->dns, &out->ips, &out->emails, &out->uris,
		      &out->usages, &has);
	out->is_ca = X509_check_ca(cert) > 0;
	pki_key_describe(X509_get0_pubkey(cert), out->key, sizeof(out->key));
	if (serlen > 0 && serlen <= (int)sizeof(ser))
		hex_colon(ser, (size_t)serlen, out->serial, sizeof(out->serial));
	BN_free(bn);
	X509_digest(cert, EVP_sha256(), md, &mdlen);
	hex_colon(md, mdlen, out->sha256, sizeof(out->sha256));
	out->not_before_ns = pki_cert_not_before(cert);
	out->not_after_ns = pki_cert_not_after(cert);
	return 0;
}

void pki_cert_info_free(struct pki_cert_info *info)
{
	free(info->subject);
	free(info->issuer);
	free(info->cn);
	strv_free(&info->orgs);
	strv_free(&info->dns);
	strv_free(&info->ips);
	strv_free(&info->emails);
	strv_free(&info->uris);
}
