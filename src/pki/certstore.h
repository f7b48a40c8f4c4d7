/*
 * certstore — the kubelet's certificate directory, named as upstream names it
 * (k8s-facts §1.5), so the runbook's commands work on cube's files:
 *
 *   <dir>/<prefix>-2026-11-30-10-24-13.pem   certificate(s) then key, 0600
 *   <dir>/<prefix>-current.pem -> <dir>/<prefix>-2026-11-30-10-24-13.pem
 *
 * with prefix "kubelet-client" or "kubelet-server". An update writes the
 * dated file, points a "<prefix>-updated.pem" symlink at it, removes
 * "current" and renames "updated" over it; a crash between the last two
 * steps is repaired on the next load. Dated files are never deleted.
 *
 * Stateless functions; any thread, but one writer per directory at a time.
 */
#ifndef CUBE_PKI_CERTSTORE_H
#define CUBE_PKI_CERTSTORE_H

#include <openssl/evp.h>
#include <openssl/x509.h>

#define CERTSTORE_CLIENT "kubelet-client"
#define CERTSTORE_SERVER "kubelet-server"

/* "<dir>/<prefix>-current.pem" (malloc'd). */
char *certstore_current_path(const char *dir, const char *prefix);

/*
 * Store cert (+ chain, may be NULL) and key as the new current pair. The
 * dated name uses local time from the process clock, as upstream does.
 * *out_path (optional) receives the dated file's path, malloc'd.
 */
int certstore_update(const char *dir, const char *prefix, X509 *cert, STACK_OF(X509) *chain,
		     EVP_PKEY *key, char **out_path);
/* Same, from PEM text already holding certificate(s) and key. */
int certstore_update_pem(const char *dir, const char *prefix, const char *pem, char **out_path);
/* Same, for a pair already parsed (or made) by the caller: pem is cert's
 * and key's PEM, which is not parsed again; the two must match. In OpenSSL
 * 3.0 decoding a key or a certificate's public key costs more than the
 * rest of storing a pair (a kubelet's bootstrap, docs/performance.md). */
int certstore_update_pair(const char *dir, const char *prefix, X509 *cert, EVP_PKEY *key,
			  const char *pem, char **out_path);

/*
 * Load the current pair: <prefix>-current.pem, else cert_file/key_file when
 * given, else <prefix>.crt/<prefix>.key. ERR_NOTFOUND with upstream's
 * "no cert/key files read at ..." when none exists.
 */
int certstore_load(const char *dir, const char *prefix, const char *cert_file,
		   const char *key_file, X509 **cert, EVP_PKEY **key);

#endif
