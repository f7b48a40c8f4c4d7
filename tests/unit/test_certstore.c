/* certstore: the kubelet's dated pair files and the "current" symlink, named
 * and repaired as upstream's certificate FileStore does. Virtual clock at
 * 2026-11-30T10:00:00Z, TZ=UTC unless a test says otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
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
#include "pki/certstore.h"
#include "pki/pki.h"

#define T0 (INT64_C(1796032800) * NS_PER_SEC) /* 2026-11-30T10:00:00Z */
#define YEAR (365 * NS_PER_DAY)

#include "testassert.h"

/* A CA and two node pairs, made once. */
static EVP_PKEY *ca_key, *key1, *key2;
static X509 *ca, *cert1, *cert2;

struct fixture {
	char *dir;  /* as mkdtemp made it */
	char *real; /* realpath of it: what the symlinks name */
};

static X509 *node_cert(EVP_PKEY *key, const char *cn, bool serving)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	struct pki_cert_spec spec = {
	    .cn = cn,
	    .orgs = orgs,
	    .usages = pki_usages_kubelet(false, serving),
	    .not_before_ns = T0 - 5 * NS_PER_MIN,
	    .not_after_ns = T0 + YEAR,
	};
	X509 *x = pki_cert_new(&spec, key, ca, ca_key);
	if (!x)
		fail_msg("pki_cert_new: %s", err_msg());
	return x;
}

static int group_setup(void **state)
{
	setenv("TZ", "UTC", 1);
	tzset();
	clock_use_virtual(T0);
	ca_key = pki_key_new(PKI_KEY_ECDSA);
	key1 = pki_key_new(PKI_KEY_ECDSA);
	key2 = pki_key_new(PKI_KEY_ECDSA);
	ca = pki_ca_new(ca_key, "kubernetes", 10 * YEAR);
	cert1 = node_cert(key1, "system:node:node-1", false);
	cert2 = node_cert(key2, "system:node:node-1", false);
	clock_use_real();
	return 0;
}

static int group_teardown(void **state)
{
	X509_free(ca);
	X509_free(cert1);
	X509_free(cert2);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(key1);
	EVP_PKEY_free(key2);
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	setenv("TZ", "UTC", 1);
	tzset();
	clock_set_offset(0);
	clock_use_virtual(T0);
	err_clear();
	f->dir = strdup("/tmp/test_certstore.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->real = realpath(f->dir, NULL);
	*state = f;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	clock_use_real();
	setenv("TZ", "UTC", 1);
	tzset();
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f->dir);
	free(f->real);
	free(f);
	return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static char *pathf(const char *dir, const char *name)
{
	return file_join(dir, name);
}

/* "<dir>/<prefix>-YYYY-MM-DD-HH-MM-SS.pem" for the process clock, local time. */
static char *dated_name(const char *dir, const char *prefix)
{
	time_t t = (time_t)(clock_now() / NS_PER_SEC);
	struct tm tm;
	char stamp[32], *p;

	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H-%M-%S", &tm);
	if (asprintf(&p, "%s/%s-%s.pem", dir, prefix, stamp) < 0)
		abort();
	return p;
}

static char *read_text(const char *path)
{
	char *buf = NULL;
	if (file_read(path, &buf, NULL, 1 << 20) < 0)
		fail_msg("read %s: %s", path, err_msg());
	return buf;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *link_target(const char *path)
{
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		fail_msg("readlink %s failed", path);
	buf[n] = '\0';
	return strdup(buf);
}

static bool is_symlink(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static bool exists_nofollow(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static char *pair_pem(X509 *cert, EVP_PKEY *key)
{
	char *c = pki_cert_pem(cert), *k = pki_key_pem(key), *out;
	if (asprintf(&out, "%s%s", c, k) < 0)
		abort();
	free(c);
	free(k);
	return out;
}

/* Loads the client pair and checks it is (cert, key). */
static void assert_loads(const char *dir, const char *prefix, X509 *cert, EVP_PKEY *key)
{
	X509 *c = NULL;
	EVP_PKEY *k = NULL;
	int r = certstore_load(dir, prefix, NULL, NULL, &c, &k);

	if (r != 0)
		fail_msg("certstore_load: %s (%s)", err_name(r), err_msg());
	assert_int_equal(X509_cmp(c, cert), 0);
	assert_int_equal(EVP_PKEY_eq(k, key), 1);
	X509_free(c);
	EVP_PKEY_free(k);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_current_path(void **state)
{
	char *p = certstore_current_path("/var/lib/kubelet/pki", CERTSTORE_CLIENT);
	assert_string_equal(p, "/var/lib/kubelet/pki/kubelet-client-current.pem");
	free(p);
	p = certstore_current_path("/x", CERTSTORE_SERVER);
	assert_string_equal(p, "/x/kubelet-server-current.pem");
	free(p);
}

static void test_update_layout(void **state)
{
	struct fixture *f = *state;
	char *out = NULL, *want = dated_name(f->real, CERTSTORE_CLIENT);
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);
	char *upd = pathf(f->dir, "kubelet-client-updated.pem");
	char *target, *text, *pem = pair_pem(cert1, key1);
	struct stat st;

	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, NULL, key1, &out), 0);
	/* The virtual clock's local time, which under TZ=UTC is: */
	assert_string_equal(out, want);
	assert_non_null(strstr(out, "/kubelet-client-2026-11-30-10-00-00.pem"));
	assert_int_equal(stat(out, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);

	/* current is an absolute symlink to the dated file. */
	assert_true(is_symlink(cur));
	target = link_target(cur);
	assert_int_equal(target[0], '/');
	assert_string_equal(target, out);
	assert_false(exists_nofollow(upd));

	/* Certificate first, then key. */
	text = read_text(out);
	assert_string_equal(text, pem);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);

	free(text);
	free(pem);
	free(target);
	free(out);
	free(want);
	free(cur);
	free(upd);
}

static void test_update_with_chain(void **state)
{
	struct fixture *f = *state;
	STACK_OF(X509) *chain = sk_X509_new_null(), *certs = NULL;
	char *out = NULL, *text, *c = pki_cert_pem(cert1), *a = pki_cert_pem(ca);
	char *k = pki_key_pem(key1), *want;

	sk_X509_push(chain, ca);
	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, chain, key1, &out), 0);
	text = read_text(out);
	if (asprintf(&want, "%s%s%s", c, a, k) < 0)
		abort();
	assert_string_equal(text, want);
	assert_int_equal(pki_certs_parse(text, strlen(text), &certs), 0);
	assert_int_equal(sk_X509_num(certs), 2);
	assert_int_equal(X509_cmp(sk_X509_value(certs, 1), ca), 0);
	/* The leaf is the one loaded. */
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);

	sk_X509_pop_free(certs, X509_free);
	sk_X509_free(chain);
	free(text);
	free(want);
	free(out);
	free(c);
	free(a);
	free(k);
}

static void test_second_update(void **state)
{
	struct fixture *f = *state;
	char *first = NULL, *second = NULL, *target;
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);
	char *first_text, *pem1 = pair_pem(cert1, key1);

	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, NULL, key1, &first), 0);
	clock_advance(NS_PER_HOUR);
	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert2, NULL, key2, &second), 0);
	assert_string_not_equal(first, second);
	assert_non_null(strstr(second, "/kubelet-client-2026-11-30-11-00-00.pem"));

	target = link_target(cur);
	assert_string_equal(target, second);
	/* Dated files are never deleted, nor rewritten. */
	first_text = read_text(first);
	assert_string_equal(first_text, pem1);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert2, key2);

	free(first_text);
	free(pem1);
	free(target);
	free(first);
	free(second);
	free(cur);
}

static void test_update_uses_local_time(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	/* A POSIX zone one hour east of UTC: no tz database needed. */
	setenv("TZ", "XXX-1", 1);
	tzset();
	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, NULL, key1, &out), 0);
	assert_non_null(strstr(out, "/kubelet-client-2026-11-30-11-00-00.pem"));
	free(out);
}

static void test_update_creates_dir(void **state)
{
	struct fixture *f = *state;
	char *sub = pathf(f->dir, "var/lib/kubelet/pki");

	assert_int_equal(certstore_update(sub, CERTSTORE_CLIENT, cert1, NULL, key1, NULL), 0);
	assert_loads(sub, CERTSTORE_CLIENT, cert1, key1);
	free(sub);
}

static void test_update_pem(void **state)
{
	struct fixture *f = *state;
	char *pem = pair_pem(cert2, key2), *out = NULL, *text;

	assert_int_equal(certstore_update_pem(f->dir, CERTSTORE_CLIENT, pem, &out), 0);
	text = read_text(out);
	assert_string_equal(text, pem);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert2, key2);
	/* out_path is optional. */
	clock_advance(NS_PER_SEC);
	assert_int_equal(certstore_update_pem(f->dir, CERTSTORE_CLIENT, pem, NULL), 0);
	free(text);
	free(out);
	free(pem);
}

static void test_server_prefix(void **state)
{
	struct fixture *f = *state;
	EVP_PKEY *skey = pki_key_new(PKI_KEY_ECDSA);
	X509 *scert = node_cert(skey, "system:node:node-1", true);
	char *out = NULL, *cur = certstore_current_path(f->dir, CERTSTORE_SERVER), *target;

	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, NULL, key1, NULL), 0);
	assert_int_equal(certstore_update(f->dir, CERTSTORE_SERVER, scert, NULL, skey, &out), 0);
	assert_non_null(strstr(out, "/kubelet-server-2026-11-30-10-00-00.pem"));
	target = link_target(cur);
	assert_string_equal(target, out);
	/* Each prefix has its own current pair. */
	assert_loads(f->dir, CERTSTORE_SERVER, scert, skey);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);

	free(target);
	free(cur);
	free(out);
	X509_free(scert);
	EVP_PKEY_free(skey);
}

static void test_load_recovers_updated(void **state)
{
	struct fixture *f = *state;
	char *out = NULL, *target;
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);
	char *upd = pathf(f->dir, "kubelet-client-updated.pem");

	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, NULL, key1, &out), 0);
	/* A crash after "remove current", before "rename updated". */
	assert_int_equal(unlink(cur), 0);
	assert_int_equal(symlink(out, upd), 0);

	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);
	assert_true(is_symlink(cur));
	target = link_target(cur);
	assert_string_equal(target, out);
	assert_false(exists_nofollow(upd));

	free(target);
	free(out);
	free(cur);
	free(upd);
}

static void test_load_updated_not_symlink(void **state)
{
	struct fixture *f = *state;
	char *upd = pathf(f->dir, "kubelet-client-updated.pem"), *pem = pair_pem(cert1, key1);
	char *want;
	X509 *c = NULL;
	EVP_PKEY *k = NULL;

	write_text(upd, pem);
	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, NULL, NULL, &c, &k), ERR_INVALID);
	if (asprintf(&want, "expected \"%s\" to be a symlink but it is a file", upd) < 0)
		abort();
	assert_string_equal(err_msg(), want);
	assert_null(c);
	assert_null(k);
	free(want);
	free(upd);
	free(pem);
}

static void test_update_refuses_regular_current(void **state)
{
	struct fixture *f = *state;
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);
	char *real_cur = certstore_current_path(f->real, CERTSTORE_CLIENT);
	char *pem = pair_pem(cert1, key1), *want, *text;

	write_text(cur, pem);
	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert2, NULL, key2, NULL),
	                 ERR_INVALID);
	assert_contains(err_msg(), "to be a symlink but it is a file");
	if (asprintf(&want, "expected \"%s\" to be a symlink but it is a file", real_cur) < 0)
		abort();
	assert_string_equal(err_msg(), want);
	/* The file is left as it was. */
	assert_false(is_symlink(cur));
	text = read_text(cur);
	assert_string_equal(text, pem);

	free(text);
	free(want);
	free(pem);
	free(cur);
	free(real_cur);
}

static void test_load_regular_current(void **state)
{
	/* Upstream's FileStore.Current() loads a current pair that is a plain
	 * file (recover() returns at once when "current" exists); only Update
	 * refuses to replace one. The contract says the same: "Load the current
	 * pair: <prefix>-current.pem". */
	struct fixture *f = *state;
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT), *pem = pair_pem(cert1, key1);
	X509 *c = NULL;
	EVP_PKEY *k = NULL;
	int r;

	write_text(cur, pem);
	r = certstore_load(f->dir, CERTSTORE_CLIENT, NULL, NULL, &c, &k);
	free(cur);
	free(pem);
	if (r != 0)
		fail_msg("certstore_load of a regular current file: %s, want 0; \"%s\"",
		         err_name(r), err_msg());
	assert_int_equal(X509_cmp(c, cert1), 0);
	X509_free(c);
	EVP_PKEY_free(k);
}

static void test_load_fallback_crt_key(void **state)
{
	struct fixture *f = *state;
	char *crt = pathf(f->dir, "kubelet-client.crt"), *kf = pathf(f->dir, "kubelet-client.key");

	assert_int_equal(pki_cert_save(crt, cert1), 0);
	assert_int_equal(pki_key_save(kf, key1), 0);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);

	/* Once there is a current pair, it wins. */
	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert2, NULL, key2, NULL), 0);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert2, key2);
	free(crt);
	free(kf);
}

static void test_load_explicit_files(void **state)
{
	struct fixture *f = *state;
	char *crt = pathf(f->dir, "my.crt"), *kf = pathf(f->dir, "my.key");
	char *dcrt = pathf(f->dir, "kubelet-client.crt"),
	     *dkf = pathf(f->dir, "kubelet-client.key");
	char *wrong = pathf(f->dir, "wrong.key");
	X509 *c = NULL;
	EVP_PKEY *k = NULL;

	assert_int_equal(pki_cert_save(crt, cert2), 0);
	assert_int_equal(pki_key_save(kf, key2), 0);
	assert_int_equal(pki_cert_save(dcrt, cert1), 0);
	assert_int_equal(pki_key_save(dkf, key1), 0);

	/* cert_file/key_file come before <prefix>.crt/.key. */
	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, crt, kf, &c, &k), 0);
	assert_int_equal(X509_cmp(c, cert2), 0);
	assert_int_equal(EVP_PKEY_eq(k, key2), 1);
	X509_free(c);
	EVP_PKEY_free(k);

	/* Given files that do not exist: on to the defaults. */
	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, "/nonexistent/a.crt",
	                                "/nonexistent/a.key", &c, &k),
	                 0);
	assert_int_equal(X509_cmp(c, cert1), 0);
	X509_free(c);
	EVP_PKEY_free(k);

	/* A key that is not the certificate's. */
	assert_int_equal(pki_key_save(wrong, key1), 0);
	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, crt, wrong, &c, &k), ERR_INVALID);
	assert_contains(err_msg(), "does not match");
	assert_null(c);
	assert_null(k);

	free(crt);
	free(kf);
	free(dcrt);
	free(dkf);
	free(wrong);
}

static void test_load_mismatched_current(void **state)
{
	/* A current pair whose key is not the certificate's, put there by hand. */
	struct fixture *f = *state;
	char *dated = pathf(f->dir, "kubelet-client-2026-11-30-09-00-00.pem");
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);
	char *c1 = pki_cert_pem(cert1), *k2 = pki_key_pem(key2), *pem;
	X509 *c = NULL;
	EVP_PKEY *k = NULL;

	if (asprintf(&pem, "%s%s", c1, k2) < 0)
		abort();
	write_text(dated, pem);
	assert_int_equal(symlink(dated, cur), 0);
	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, NULL, NULL, &c, &k), ERR_INVALID);
	assert_contains(err_msg(), "does not match");
	assert_null(c);
	assert_null(k);
	free(c1);
	free(k2);
	free(pem);
	free(dated);
	free(cur);
}

static void test_update_pem_rejects_bad_pair(void **state)
{
	/* Upstream's FileStore.Update parses the certificates and the key and
	 * loads the written file as a pair before it touches the symlink
	 * ("invalid certificate data", "invalid key data", "private key does
	 * not match public key"): a bad update never replaces a good current
	 * pair. */
	struct fixture *f = *state;
	char *c1 = pki_cert_pem(cert1), *k2 = pki_key_pem(key2), *mismatched, *cur_before,
	     *cur_after;
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);
	int r_mismatch, r_garbage, r_nokey;

	if (asprintf(&mismatched, "%s%s", c1, k2) < 0)
		abort();
	assert_int_equal(certstore_update(f->dir, CERTSTORE_CLIENT, cert1, NULL, key1, NULL), 0);
	cur_before = link_target(cur);

	clock_advance(NS_PER_MIN);
	r_mismatch = certstore_update_pem(f->dir, CERTSTORE_CLIENT, mismatched, NULL);
	clock_advance(NS_PER_MIN);
	r_garbage = certstore_update_pem(f->dir, CERTSTORE_CLIENT, "not a pem\n", NULL);
	clock_advance(NS_PER_MIN);
	r_nokey = certstore_update_pem(f->dir, CERTSTORE_CLIENT, c1, NULL);
	cur_after = link_target(cur);
	free(c1);
	free(k2);
	free(mismatched);
	free(cur);

	if (r_mismatch >= 0 || r_garbage >= 0 || r_nokey >= 0 ||
	    strcmp(cur_before, cur_after) != 0) {
		print_error("mismatched pair: %d, garbage: %d, cert without key: %d\n"
		            "current before %s\ncurrent after  %s\n",
		            r_mismatch, r_garbage, r_nokey, cur_before, cur_after);
		free(cur_before);
		free(cur_after);
		fail();
	}
	free(cur_before);
	free(cur_after);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);
}

/* A pair already parsed is stored without parsing its PEM again; a key
 * that is not the certificate's is refused and leaves current alone. */
static void test_update_pair(void **state)
{
	struct fixture *f = *state;
	char *c1 = pki_cert_pem(cert1), *k1 = pki_key_pem(key1), *pem, *cur_before, *cur_after;
	char *cur = certstore_current_path(f->dir, CERTSTORE_CLIENT);

	if (asprintf(&pem, "%s%s", c1, k1) < 0)
		abort();
	assert_int_equal(certstore_update_pair(f->dir, CERTSTORE_CLIENT, cert1, key1, pem, NULL),
			 0);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);
	cur_before = link_target(cur);
	clock_advance(NS_PER_MIN);
	assert_true(certstore_update_pair(f->dir, CERTSTORE_CLIENT, cert1, key2, pem, NULL) < 0);
	assert_string_equal(err_msg(),
			    "new certificate/key pair: private key does not match public key");
	cur_after = link_target(cur);
	assert_string_equal(cur_before, cur_after);
	assert_loads(f->dir, CERTSTORE_CLIENT, cert1, key1);
	free(cur_before);
	free(cur_after);
	free(cur);
	free(pem);
	free(c1);
	free(k1);
}

static void test_load_notfound(void **state)
{
	struct fixture *f = *state;
	X509 *c = (X509 *)1;
	EVP_PKEY *k = (EVP_PKEY *)1;
	char *want;

	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, NULL, NULL, &c, &k),
	                 ERR_NOTFOUND);
	assert_null(c);
	assert_null(k);
	assert_contains(err_msg(), "no cert/key files read at");
	if (asprintf(&want, "no cert/key files read at \"%s/kubelet-client-current.pem\", ",
	             f->dir) < 0)
		abort();
	assert_contains(err_msg(), want);
	free(want);

	/* Named files that are missing are named in the message. */
	assert_int_equal(certstore_load(f->dir, CERTSTORE_SERVER, "/x/a.crt", "/x/a.key", &c, &k),
	                 ERR_NOTFOUND);
	assert_contains(err_msg(), "(\"/x/a.crt\", \"/x/a.key\")");
	assert_contains(err_msg(), "kubelet-server-current.pem");

	/* A directory that does not exist at all. */
	{
		char *gone = pathf(f->dir, "gone");
		assert_int_equal(certstore_load(gone, CERTSTORE_CLIENT, NULL, NULL, &c, &k),
		                 ERR_NOTFOUND);
		free(gone);
	}
}

static void test_load_notfound_upstream_text(void **state)
{
	/* client-go's fileStore.Current() names the pair file, the configured
	 * files, then the cert and key *directories*:
	 *   fmt.Sprintf("no cert/key files read at %q, (%q, %q) or (%q, %q)",
	 *       pairFile, s.certFile, s.keyFile, s.certDirectory, s.keyDirectory)
	 * and the kubelet passes its cert dir as both directories. */
	struct fixture *f = *state;
	X509 *c = NULL;
	EVP_PKEY *k = NULL;
	char *want;

	assert_int_equal(certstore_load(f->dir, CERTSTORE_CLIENT, NULL, NULL, &c, &k),
	                 ERR_NOTFOUND);
	if (asprintf(&want,
	             "no cert/key files read at \"%s/kubelet-client-current.pem\", (\"\", \"\") or "
	             "(\"%s\", \"%s\")",
	             f->dir, f->dir, f->dir) < 0)
		abort();
	if (strcmp(err_msg(), want) != 0) {
		print_error("got  %s\nwant %s\n", err_msg(), want);
		free(want);
		fail();
	}
	free(want);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_current_path),
	    T(test_update_layout),
	    T(test_update_with_chain),
	    T(test_second_update),
	    T(test_update_uses_local_time),
	    T(test_update_creates_dir),
	    T(test_update_pem),
	    T(test_server_prefix),
	    T(test_load_recovers_updated),
	    T(test_load_updated_not_symlink),
	    T(test_update_refuses_regular_current),
	    T(test_load_regular_current),
	    T(test_load_fallback_crt_key),
	    T(test_load_explicit_files),
	    T(test_load_mismatched_current),
	    T(test_update_pem_rejects_bad_pair),
	    T(test_update_pair),
	    T(test_load_notfound),
	    T(test_load_notfound_upstream_text),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
