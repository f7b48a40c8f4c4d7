#include "pki/expiry.h"

#include "pki/certstore.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/err.h"
#include "base/file.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *expiry_status_name(enum expiry_status s)
{
	static const char *const names[] = {"ok", "warning", "expired", "missing", "invalid"};
	return names[s];
}

static struct expiry_row *add_row(struct expiry_report *r, const char *name, const char *path)
{
	struct expiry_row *row;
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 16;
		r->rows = realloc(r->rows, r->cap * sizeof(*r->rows));
		if (!r->rows)
			abort();
	}
	row = &r->rows[r->n++];
	memset(row, 0, sizeof(*row));
	row->name = str_dup(name ?: "");
	row->path = str_dup(path ?: "");
	return row;
}

static void set_error(struct expiry_row *row, enum expiry_status st)
{
	row->status = st;
	row->error = str_dup(err_msg());
}

/* The CA a row is checked against, and what its column says when it verifies. */
struct signer {
	X509 *cert; /* NULL when the CA's file is missing or unreadable */
	const char *name;
};

/* Fills status, CA column and expiry from a parsed certificate. */
static void judge(struct expiry_row *row, X509 *cert, const struct signer *sig, int64_t now,
		  int64_t warn_ns)
{
	X509 *ca = sig ? sig->cert : NULL;

	row->not_after_ns = pki_cert_not_after(cert);
	/* Only a broken chain makes a row INVALID; an expired one is judged by
	 * its dates below, like every other row. */
	if (ca && !row->is_ca && pki_verify_with(cert, ca, now, 0) == ERR_UNAUTHORIZED) {
		char *cn = NULL;
		pki_name_read(X509_get_issuer_name(cert), &cn, NULL);
		row->ca = cn;
		set_error(row, EXPIRY_INVALID);
		return;
	}
	if (!row->ca) {
		if (row->is_ca)
			row->ca = str_dup("");
		else if (ca)
			row->ca = str_dup(sig->name);
		else
			pki_name_read(X509_get_issuer_name(cert), &row->ca, NULL);
	}
	if (now >= row->not_after_ns)
		row->status = EXPIRY_EXPIRED;
	else if (row->not_after_ns - now <= warn_ns)
		row->status = EXPIRY_WARNING;
	else
		row->status = EXPIRY_OK;
}

static void scan_pem(struct expiry_report *r, const char *name, const char *path,
		     const struct signer *ca, bool is_ca, int64_t now, int64_t warn_ns)
{
	struct expiry_row *row = add_row(r, name, path);
	X509 *cert;

	row->is_ca = is_ca;
	if (!file_exists(path)) {
		row->status = EXPIRY_MISSING;
		row->error = str_dup("file not found");
		return;
	}
	if (!(cert = pki_cert_load(path))) {
		set_error(row, EXPIRY_INVALID);
		return;
	}
	judge(row, cert, ca, now, warn_ns);
	X509_free(cert);
}

static void scan_kubeconfig(struct expiry_report *r, const char *name, const char *path,
			    const struct signer *ca, int64_t now, int64_t warn_ns)
{
	struct expiry_row *row = add_row(r, name, path);
	struct kubeconfig kc;
	X509 *cert;

	if (!file_exists(path)) {
		row->status = EXPIRY_MISSING;
		row->error = str_dup("file not found");
		return;
	}
	if (kubeconfig_load(path, &kc) < 0) {
		set_error(row, EXPIRY_INVALID);
		return;
	}
	if (!kc.cert_data) {
		err_set(ERR_INVALID, "%s: no client certificate", path);
		set_error(row, EXPIRY_INVALID);
	} else if (!(cert = pki_cert_parse(kc.cert_data, strlen(kc.cert_data)))) {
		err_wrap(ERR_PARSE, "%s", path);
		set_error(row, EXPIRY_INVALID);
	} else {
		judge(row, cert, ca, now, warn_ns);
		X509_free(cert);
	}
	kubeconfig_free(&kc);
}

/* "kubelet-client (node-1)": the node from the certificate's CN when it has one. */
static void kubelet_row_name(const char *prefix, const char *dir, const char *current, char *out,
			     size_t n)
{
	char *cn = NULL, *base, resolved[PATH_MAX];
	X509 *cert = pki_cert_load(current);
	const char *node = NULL;

	if (cert) {
		pki_name_read(X509_get_subject_name(cert), &cn, NULL);
		if (strncmp(cn, "system:node:", 12) == 0)
			node = cn + 12;
		X509_free(cert);
	}
	if (!node) {
		base = realpath(dir, resolved) ? resolved : (char *)dir;
		node = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
		/* <root>/<node>/pki: the node is the parent's name. */
		if (strcmp(node, "pki") == 0 && node > base + 1) {
			const char *end = node - 1, *start = end;
			while (start > base && start[-1] != '/')
				start--;
			snprintf(out, n, "%s (%.*s)", prefix, (int)(end - start), start);
			free(cn);
			return;
		}
	}
	snprintf(out, n, "%s (%s)", prefix, node);
	free(cn);
}

static bool scan_kubelet_certdir(struct expiry_report *r, const char *dir,
				 const struct signer *ca, int64_t now, int64_t warn_ns)
{
	static const char *const prefixes[] = {CERTSTORE_CLIENT, CERTSTORE_SERVER};
	bool found = false;

	for (size_t i = 0; i < 2; i++) {
		char *cur = certstore_current_path(dir, prefixes[i]), name[512];
		char resolved[PATH_MAX];
		if (file_exists(cur)) {
			kubelet_row_name(prefixes[i], dir, cur, name, sizeof(name));
			scan_pem(r, name, realpath(cur, resolved) ? resolved : cur, ca, false, now,
				 warn_ns);
			found = true;
		}
		free(cur);
	}
	return found;
}

/* A cert dir, a kubelet root dir (<dir>/pki), or a directory of node dirs. */
static void scan_kubelet(struct expiry_report *r, const char *dir, const struct signer *ca,
			 int64_t now, int64_t warn_ns)
{
	char *sub = file_join(dir, "pki");
	bool found = scan_kubelet_certdir(r, dir, ca, now, warn_ns) ||
		     scan_kubelet_certdir(r, sub, ca, now, warn_ns);
	struct dirent **ents = NULL;
	int n;

	free(sub);
	if (found)
		return;
	n = scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		char *node = file_join(dir, ents[i]->d_name), *pki = file_join(node, "pki");
		if (ents[i]->d_name[0] != '.')
			found |= scan_kubelet_certdir(r, pki, ca, now, warn_ns);
		free(node);
		free(pki);
		free(ents[i]);
	}
	free(ents);
	if (!found) {
		struct expiry_row *row = add_row(r, "kubelet-client", dir);
		char *cur = certstore_current_path(dir, CERTSTORE_CLIENT);
		row->status = EXPIRY_MISSING;
		row->error = str_dup(n < 0 ? "directory not found" : "no kubelet certificates");
		free(row->path);
		row->path = cur;
	}
}

/* A certificate kubeadm's check-expiration lists, in its (alphabetical) order. */
struct cluster_row {
	const char *name; /* kubeadm's: "apiserver-etcd-client", "etcd-server" */
	const char *rel;  /* the file: a kubeconfig when it ends in .conf */
	bool etcd;        /* signed by the etcd CA, and listed only with a local etcd */
};

static const struct cluster_row cluster_rows[] = {
	{"admin.conf", "admin.conf", false},
	{"apiserver", "pki/apiserver.crt", false},
	{"apiserver-etcd-client", "pki/apiserver-etcd-client.crt", true},
	{"apiserver-kubelet-client", "pki/apiserver-kubelet-client.crt", false},
	{"controller-manager.conf", "controller-manager.conf", false},
	{"etcd-healthcheck-client", "pki/etcd/healthcheck-client.crt", true},
	{"etcd-peer", "pki/etcd/peer.crt", true},
	{"etcd-server", "pki/etcd/server.crt", true},
	{"scheduler.conf", "scheduler.conf", false},
};

static void scan_cluster_row(struct expiry_report *out, const char *dir,
			     const struct cluster_row *cr, const struct signer *ca, int64_t now,
			     int64_t warn_ns)
{
	size_t len = strlen(cr->rel);
	char *p = cluster_path(dir, cr->rel);

	if (len > 5 && !strcmp(cr->rel + len - 5, ".conf"))
		scan_kubeconfig(out, cr->name, p, ca, now, warn_ns);
	else
		scan_pem(out, cr->name, p, ca, false, now, warn_ns);
	free(p);
}

static X509 *load_if_there(const char *dir, const char *rel)
{
	char *p = cluster_path(dir, rel);
	X509 *x = file_exists(p) ? pki_cert_load(p) : NULL;
	free(p);
	return x;
}

static void scan_cluster(struct expiry_report *out, const char *dir, const struct signer *ca,
			 int64_t now, int64_t warn_ns)
{
	char *etcd_dir = cluster_path(dir, "pki/etcd"), *crt, *key;
	/* kubeadm lists etcd's certificates only for a local etcd; with no
	 * config to read, a pki/etcd directory is what says there is one. */
	bool etcd = file_exists(etcd_dir);
	struct signer etcd_ca = {etcd ? load_if_there(dir, "pki/etcd/ca.crt") : NULL, "etcd-ca"};

	for (size_t i = 0; i < sizeof(cluster_rows) / sizeof(cluster_rows[0]); i++)
		if (etcd || !cluster_rows[i].etcd)
			scan_cluster_row(out, dir, &cluster_rows[i],
					 cluster_rows[i].etcd ? &etcd_ca : ca, now, warn_ns);
	crt = cluster_path(dir, "pki/ca.crt");
	key = cluster_path(dir, "pki/ca.key");
	scan_pem(out, "ca", crt, NULL, true, now, warn_ns);
	out->rows[out->n - 1].external = !file_exists(key);
	free(crt);
	free(key);
	if (etcd) {
		/* Never "externally managed": kubeadm has no external etcd CA mode. */
		crt = cluster_path(dir, "pki/etcd/ca.crt");
		scan_pem(out, "etcd-ca", crt, NULL, true, now, warn_ns);
		free(crt);
	}
	X509_free(etcd_ca.cert);
	free(etcd_dir);
}

int expiry_scan(const char *dir, const char *const *kubelet_dirs, int64_t now, int64_t warn_ns,
		struct expiry_report *out)
{
	struct signer ca = {dir ? load_if_there(dir, "pki/ca.crt") : NULL, "ca"};

	memset(out, 0, sizeof(*out));
	if (dir)
		scan_cluster(out, dir, &ca, now, warn_ns);
	for (size_t i = 0; kubelet_dirs && kubelet_dirs[i]; i++)
		scan_kubelet(out, kubelet_dirs[i], &ca, now, warn_ns);
	X509_free(ca.cert);
	return 0;
}

void expiry_report_free(struct expiry_report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->rows[i].name);
		free(r->rows[i].path);
		free(r->rows[i].ca);
		free(r->rows[i].error);
	}
	free(r->rows);
	memset(r, 0, sizeof(*r));
}
