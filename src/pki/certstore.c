#include "pki/certstore.h"

#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char *pathf(const char *dir, const char *prefix, const char *suffix)
{
	char *p;
	if (asprintf(&p, "%s/%s-%s.pem", dir, prefix, suffix) < 0)
		abort();
	return p;
}

char *certstore_current_path(const char *dir, const char *prefix)
{
	return pathf(dir, prefix, "current");
}

/* Upstream refuses to replace a regular file where a symlink belongs. */
static int expect_symlink(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : err_set(ERR_IO, "stat %s: %s", path, strerror(errno));
	if (!S_ISLNK(st.st_mode))
		return err_set(ERR_INVALID, "expected \"%s\" to be a symlink but it is a file", path);
	return 1;
}

/* After a crash between "remove current" and "rename updated": finish it.
 * A current pair that exists, symlink or not, is left alone, as upstream. */
static int recover_updated(const char *dir, const char *prefix)
{
	char *cur = pathf(dir, prefix, "current"), *upd = pathf(dir, prefix, "updated");
	struct stat st;
	int r = 0;

	if (lstat(cur, &st) < 0 && (r = expect_symlink(upd)) == 1 && rename(upd, cur) < 0)
		r = err_set(ERR_IO, "rename %s: %s", upd, strerror(errno));
	free(cur);
	free(upd);
	return r < 0 ? r : 0;
}

/* A bad update must never replace a good pair: parse it first. */
static int pair_check(const char *pem)
{
	size_t len = strlen(pem);
	X509 *cert = pki_cert_parse(pem, len);
	EVP_PKEY *key = cert ? pki_key_parse(pem, len) : NULL;
	int r = 0;

	if (!cert || !key)
		r = err_wrap(ERR_INVALID, "new certificate/key pair");
	else if (!pki_key_matches(cert, key))
		r = err_set(ERR_INVALID, "new certificate/key pair: private key does not match "
					 "public key");
	X509_free(cert);
	EVP_PKEY_free(key);
	return r;
}

/* The dated file, then "updated" and "current" pointing at it. */
static int write_pair(const char *dir, const char *prefix, const char *pem, char **out_path)
{
	char stamp[32], *dated, *cur, *upd, *absdir = NULL;
	int64_t now = clock_now();
	time_t t = (time_t)(now / NS_PER_SEC);
	struct tm tm;
	int r;

	if ((r = file_mkdirs(dir, 0755)) < 0)
		return r;
	/* Upstream's symlinks are absolute, so they survive being read from elsewhere. */
	if (!(absdir = realpath(dir, NULL)))
		return err_set(ERR_IO, "resolve %s: %s", dir, strerror(errno));
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H-%M-%S", &tm);
	dated = pathf(absdir, prefix, stamp);
	cur = pathf(absdir, prefix, "current");
	upd = pathf(absdir, prefix, "updated");

	if ((r = expect_symlink(cur)) < 0 || (r = expect_symlink(upd)) < 0)
		goto out;
	if ((r = file_write_atomic(dated, pem, strlen(pem), 0600)) < 0)
		goto out;
	unlink(upd);
	if (symlink(dated, upd) < 0) {
		r = err_set(ERR_IO, "symlink %s: %s", upd, strerror(errno));
		goto out;
	}
	/* rename() replaces "current" atomically; upstream removes it first, which
	 * leaves a window with no current pair. We need not copy that. */
	if (rename(upd, cur) < 0) {
		r = err_set(ERR_IO, "rename %s: %s", upd, strerror(errno));
		goto out;
	}
	r = 0;
	if (out_path) {
		*out_path = dated;
		dated = NULL;
	}
out:
	free(dated);
	free(cur);
	free(upd);
	free(absdir);
	return r;
}

int certstore_update_pem(const char *dir, const char *prefix, const char *pem, char **out_path)
{
	int r = pair_check(pem);
	return r < 0 ? r : write_pair(dir, prefix, pem, out_path);
}

int certstore_update_pair(const char *dir, const char *prefix, X509 *cert, EVP_PKEY *key,
			  const char *pem, char **out_path)
{
	if (!pki_key_matches(cert, key))
		return err_set(ERR_INVALID, "new certificate/key pair: private key does not match "
					    "public key");
	return write_pair(dir, prefix, pem, out_path);
}

int certstore_update(const char *dir, const char *prefix, X509 *cert, STACK_OF(X509) *chain,
		     EVP_PKEY *key, char **out_path)
{
	char *parts[3] = {pki_cert_pem(cert), NULL, pki_key_pem(key)};
	size_t cap = 1;
	char *pem;
	int r;

	if (!parts[2]) {
		free(parts[0]);
		return ERR_CRYPTO;
	}
	for (int i = 0; chain && i < sk_X509_num(chain); i++) {
		char *c = pki_cert_pem(sk_X509_value(chain, i));
		size_t have = parts[1] ? strlen(parts[1]) : 0;
		parts[1] = realloc(parts[1], have + strlen(c) + 1);
		if (!parts[1])
			abort();
		strcpy(parts[1] + have, c);
		free(c);
	}
	for (int i = 0; i < 3; i++)
		cap += parts[i] ? strlen(parts[i]) : 0;
	pem = calloc(1, cap);
	if (!pem)
		abort();
	for (int i = 0; i < 3; i++)
		if (parts[i])
			strcat(pem, parts[i]);
	r = certstore_update_pem(dir, prefix, pem, out_path);
	OPENSSL_cleanse(pem, strlen(pem));
	for (int i = 0; i < 3; i++)
		free(parts[i]);
	free(pem);
	return r;
}

int certstore_load(const char *dir, const char *prefix, const char *cert_file,
		   const char *key_file, X509 **cert, EVP_PKEY **key)
{
	char *cur = pathf(dir, prefix, "current"), *crt = NULL, *kf = NULL;
	int r;

	*cert = NULL;
	*key = NULL;
	if ((r = recover_updated(dir, prefix)) < 0)
		goto out;
	if (file_exists(cur)) {
		r = pki_pair_load(cur, cert, key);
		goto out;
	}
	if (cert_file && key_file && file_exists(cert_file) && file_exists(key_file)) {
		crt = strdup(cert_file);
		kf = strdup(key_file);
	} else {
		if (asprintf(&crt, "%s/%s.crt", dir, prefix) < 0 ||
		    asprintf(&kf, "%s/%s.key", dir, prefix) < 0)
			abort();
		if (!file_exists(crt) || !file_exists(kf)) {
			r = err_set(ERR_NOTFOUND,
				    "no cert/key files read at \"%s\", (\"%s\", \"%s\") or "
				    "(\"%s\", \"%s\")",
				    cur, cert_file ? cert_file : "", key_file ? key_file : "", dir,
				    dir);
			goto out;
		}
	}
	if (!(*cert = pki_cert_load(crt)) || !(*key = pki_key_load(kf))) {
		X509_free(*cert);
		*cert = NULL;
		r = ERR_PARSE;
	} else if (!pki_key_matches(*cert, *key)) {
		X509_free(*cert);
		EVP_PKEY_free(*key);
		*cert = NULL;
		*key = NULL;
		r = err_set(ERR_INVALID, "%s: private key does not match public key", crt);
	} else {
		r = 0;
	}
out:
	free(cur);
	free(crt);
	free(kf);
	return r;
}
