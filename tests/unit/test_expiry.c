/* expiry (and the cluster PKI it reads): a cluster dir made by
 * cluster_pki_init on the virtual clock, kubelet cert dirs made by
 * certstore, and the rows `cube certs check-expiration` prints from them. */
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
#include "base/strv.h"
#include "pki/certstore.h"
#include "pki/cluster.h"
#include "pki/expiry.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#define T0 (INT64_C(1796032800) * NS_PER_SEC) /* 2026-11-30T10:00:00Z */
#define VALIDITY (240 * NS_PER_HOUR)
#define WARN (30 * NS_PER_DAY)

#include "testassert.h"

/* kubeadm's rows, in kubeadm's order; the CA last. */
static const char *const leaf_rows[] = {"admin.conf", "apiserver", "apiserver-kubelet-client",
                                        "controller-manager.conf", "scheduler.conf"};
#define NLEAF 5

struct fixture {
	char *root;       /* mkdtemp */
	char *dir;        /* <root>/cluster */
	struct strv said; /* progress lines of the last init */
};

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void say(void *arg, const char *line)
{
	strv_push(arg, line);
}

static int init_cluster(struct fixture *f, bool force)
{
	struct cluster_pki_opts o = {
	    .dir = f->dir,
	    .cluster_name = "kubernetes",
	    .server = "https://127.0.0.1:6443",
	    .key_type = PKI_KEY_ECDSA,
	    .ca_validity_ns = CLUSTER_CA_VALIDITY,
	    .validity_ns = VALIDITY,
	    .force = force,
	    .say = say,
	    .say_arg = &f->said,
	};
	int r;

	strv_free(&f->said);
	r = cluster_pki_init(&o);
	if (r < 0)
		print_error("cluster_pki_init: %s (%s)\n", err_name(r), err_msg());
	return r;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	setenv("TZ", "UTC", 1);
	tzset();
	clock_set_offset(0);
	clock_use_virtual(T0);
	err_clear();
	f->root = strdup("/tmp/test_expiry.XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	f->dir = file_join(f->root, "cluster");
	*state = f;
	return init_cluster(f, false) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	clock_use_real();
	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	strv_free(&f->said);
	free(f->root);
	free(f->dir);
	free(f);
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static char *in(const char *dir, const char *rel)
{
	return file_join(dir, rel);
}

static char *read_text(const char *path)
{
	char *buf = NULL;
	if (file_read(path, &buf, NULL, 1 << 20) < 0)
		fail_msg("read %s: %s", path, err_msg());
	return buf;
}

static bool said(const struct fixture *f, const char *line)
{
	return strv_has(&f->said, line);
}

static void scan(const char *dir, const char *const *kubelet_dirs, int64_t now,
                 struct expiry_report *rep)
{
	assert_int_equal(expiry_scan(dir, kubelet_dirs, now, WARN, rep), 0);
}

static const struct expiry_row *row_named(const struct expiry_report *rep, const char *name)
{
	for (size_t i = 0; i < rep->n; i++)
		if (strcmp(rep->rows[i].name, name) == 0)
			return &rep->rows[i];
	for (size_t i = 0; i < rep->n; i++)
		print_error("  row %zu: %s\n", i, rep->rows[i].name);
	fail_msg("no row \"%s\"", name);
	return NULL;
}

#define assert_status(row, st)                                                                     \
	do {                                                                                       \
		const struct expiry_row *r_ = (row);                                               \
		if (r_->status != (st))                                                            \
			fail_msg("row \"%s\": status %s, want %s (error: %s)", r_->name,           \
			         expiry_status_name(r_->status), expiry_status_name(st),           \
			         r_->error ? r_->error : "");                                      \
	} while (0)

/* A kubelet pair signed by the cluster's CA (or by `foreign` when given). */
static void store_kubelet(const char *cluster_dir, const char *kdir, const char *prefix,
                          const char *cn, bool foreign)
{
	char *crt = in(cluster_dir, "pki/ca.crt"), *kf = in(cluster_dir, "pki/ca.key");
	EVP_PKEY *ca_key = foreign ? pki_key_new(PKI_KEY_ECDSA) : pki_key_load(kf);
	X509 *ca =
	    foreign ? pki_ca_new(ca_key, "other-ca", CLUSTER_CA_VALIDITY) : pki_cert_load(crt);
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	static const char *const orgs[] = {"system:nodes", NULL};
	X509_REQ *req = pki_csr_new(key, cn, orgs, NULL, NULL, 0);
	struct pki_sign_policy pol = {
	    .ttl_ns = 365 * NS_PER_DAY,
	    .backdate_ns = PKI_BACKDATE_NS,
	    .short_ns = PKI_SHORT_NS,
	    .usages = pki_usages_kubelet(false, strcmp(prefix, CERTSTORE_SERVER) == 0),
	};
	X509 *cert;

	assert_non_null(ca);
	assert_non_null(ca_key);
	cert = pki_csr_sign(req, ca, ca_key, &pol);
	if (!cert)
		fail_msg("pki_csr_sign: %s", err_msg());
	if (certstore_update(kdir, prefix, cert, NULL, key, NULL) != 0)
		fail_msg("certstore_update: %s", err_msg());
	X509_free(cert);
	X509_REQ_free(req);
	EVP_PKEY_free(key);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	free(crt);
	free(kf);
}

/* ---- cluster_pki_init ---------------------------------------------------------- */

static void test_init_layout(void **state)
{
	struct fixture *f = *state;
	static const char *const files[] = {
	    "pki/ca.crt",
	    "pki/ca.key",
	    "pki/apiserver.crt",
	    "pki/apiserver.key",
	    "pki/apiserver-kubelet-client.crt",
	    "pki/apiserver-kubelet-client.key",
	    "admin.conf",
	    "controller-manager.conf",
	    "scheduler.conf",
	    "bootstrap-kubelet.conf",
	    "pki/bootstrap-token",
	    NULL,
	};
	static const char *const secret[] = {
	    "pki/ca.key", "pki/apiserver.key",   "pki/apiserver-kubelet-client.key",
	    "admin.conf", "pki/bootstrap-token", NULL};
	char *p, *token;
	struct kubeconfig kc;
	struct pki_cert_info info;
	X509 *x, *ca;

	for (size_t i = 0; files[i]; i++) {
		p = cluster_path(f->dir, files[i]);
		if (!file_exists(p))
			fail_msg("%s was not written", files[i]);
		free(p);
	}
	for (size_t i = 0; secret[i]; i++) {
		struct stat st;
		p = cluster_path(f->dir, secret[i]);
		assert_int_equal(stat(p, &st), 0);
		if ((st.st_mode & 07777) != 0600)
			fail_msg("%s has mode %o", secret[i], st.st_mode & 07777);
		free(p);
	}
	assert_true(said(f, "[certs] Generating \"ca\" certificate and key"));
	assert_true(said(f, "[certs] Generating \"apiserver\" certificate and key"));

	/* The CA: "kubernetes", from now for ten years. */
	p = cluster_path(f->dir, "pki/ca.crt");
	ca = pki_cert_load(p);
	free(p);
	assert_non_null(ca);
	assert_int_equal(pki_cert_not_after(ca), T0 + CLUSTER_CA_VALIDITY);

	/* The serving certificate names the usual hosts. */
	p = cluster_path(f->dir, "pki/apiserver.crt");
	x = pki_cert_load(p);
	free(p);
	pki_cert_info(x, &info);
	assert_string_equal(info.cn, "kube-apiserver");
	assert_true(strv_has(&info.dns, "localhost"));
	assert_true(strv_has(&info.dns, "kubernetes.default.svc.cluster.local"));
	assert_true(strv_has(&info.ips, "127.0.0.1"));
	assert_true(strv_has(&info.ips, "10.96.0.1"));
	assert_int_equal(info.not_before_ns, T0 - PKI_BACKDATE_NS);
	assert_int_equal(info.not_after_ns, T0 + VALIDITY);
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_SERVER), 0);
	pki_cert_info_free(&info);
	X509_free(x);

	/* admin.conf: kubernetes-admin in system:masters, embedded. */
	p = cluster_path(f->dir, "admin.conf");
	assert_int_equal(kubeconfig_load(p, &kc), 0);
	free(p);
	assert_string_equal(kc.server, "https://127.0.0.1:6443");
	assert_string_equal(kc.context, "kubernetes-admin@kubernetes");
	x = pki_cert_parse(kc.cert_data, strlen(kc.cert_data));
	pki_cert_info(x, &info);
	assert_string_equal(info.cn, "kubernetes-admin");
	assert_true(strv_has(&info.orgs, "system:masters"));
	assert_int_equal(pki_verify_with(x, ca, T0, PKI_PURPOSE_CLIENT), 0);
	pki_cert_info_free(&info);
	X509_free(x);
	kubeconfig_free(&kc);

	/* The bootstrap token, and the kubeconfig that carries it. */
	p = cluster_path(f->dir, "pki/bootstrap-token");
	token = read_text(p);
	free(p);
	token[strcspn(token, "\n")] = '\0';
	assert_true(pki_token_valid(token));
	p = cluster_path(f->dir, "bootstrap-kubelet.conf");
	assert_int_equal(kubeconfig_load(p, &kc), 0);
	free(p);
	assert_string_equal(kc.token, token);
	assert_null(kc.cert_data);
	kubeconfig_free(&kc);
	free(token);
	X509_free(ca);
}

static void test_init_rerun_keeps(void **state)
{
	struct fixture *f = *state;
	static const char *const kept[] = {
	    "pki/ca.crt",     "pki/ca.key",          "pki/apiserver.crt",      "admin.conf",
	    "scheduler.conf", "pki/bootstrap-token", "bootstrap-kubelet.conf", NULL};
	char *before[8];

	for (size_t i = 0; kept[i]; i++) {
		char *p = cluster_path(f->dir, kept[i]);
		before[i] = read_text(p);
		free(p);
	}
	clock_advance(NS_PER_HOUR);
	assert_int_equal(init_cluster(f, false), 0);
	assert_true(said(f, "[certs] Using existing ca certificate authority"));
	assert_true(said(f, "[certs] Using existing apiserver certificate and key on disk"));
	for (size_t i = 0; kept[i]; i++) {
		char *p = cluster_path(f->dir, kept[i]), *now = read_text(p);
		if (strcmp(now, before[i]) != 0)
			fail_msg("%s was rewritten by a second init", kept[i]);
		free(now);
		free(p);
		free(before[i]);
	}
}

static void test_init_force_regenerates(void **state)
{
	struct fixture *f = *state;
	char *p = cluster_path(f->dir, "pki/ca.crt"), *old_ca = read_text(p), *new_ca;
	struct expiry_report rep;

	assert_int_equal(init_cluster(f, true), 0);
	assert_true(said(f, "[certs] Generating \"ca\" certificate and key"));
	new_ca = read_text(p);
	assert_string_not_equal(old_ca, new_ca);

	/* Everything was signed again by the new CA. */
	scan(f->dir, NULL, T0, &rep);
	for (size_t i = 0; i < NLEAF; i++) {
		assert_string_equal(rep.rows[i].ca, "ca");
		assert_status(&rep.rows[i], EXPIRY_WARNING);
	}
	expiry_report_free(&rep);
	free(old_ca);
	free(new_ca);
	free(p);
}

static void test_init_renews_expired_leaves(void **state)
{
	struct fixture *f = *state;
	char *ca = cluster_path(f->dir, "pki/ca.crt"),
	     *api = cluster_path(f->dir, "pki/apiserver.crt");
	char *ca_before = read_text(ca), *api_before = read_text(api), *ca_after, *api_after;
	struct expiry_report rep;

	clock_advance(11 * NS_PER_DAY);
	assert_int_equal(init_cluster(f, false), 0);
	ca_after = read_text(ca);
	api_after = read_text(api);
	assert_string_equal(ca_before, ca_after);
	assert_string_not_equal(api_before, api_after);

	scan(f->dir, NULL, clock_now(), &rep);
	for (size_t i = 0; i < NLEAF; i++) {
		assert_status(&rep.rows[i], EXPIRY_WARNING);
		assert_int_equal(rep.rows[i].not_after_ns, clock_now() + VALIDITY);
	}
	expiry_report_free(&rep);
	free(ca);
	free(api);
	free(ca_before);
	free(api_before);
	free(ca_after);
	free(api_after);
}

static void test_init_extra_sans(void **state)
{
	/* A new SAN makes the serving certificate unfit: only it is remade. */
	struct fixture *f = *state;
	static const char *const sans[] = {"10.0.0.9", "api.example.com", NULL};
	struct cluster_pki_opts o = {
	    .dir = f->dir,
	    .cluster_name = "kubernetes",
	    .server = "https://127.0.0.1:6443",
	    .apiserver_sans = sans,
	    .key_type = PKI_KEY_ECDSA,
	    .ca_validity_ns = CLUSTER_CA_VALIDITY,
	    .validity_ns = VALIDITY,
	};
	char *api = cluster_path(f->dir, "pki/apiserver.crt");
	char *adm = cluster_path(f->dir, "admin.conf");
	char *api_before = read_text(api), *adm_before = read_text(adm), *adm_after;
	struct pki_cert_info info;
	X509 *x;

	assert_int_equal(cluster_pki_init(&o), 0);
	x = pki_cert_load(api);
	assert_non_null(x);
	pki_cert_info(x, &info);
	assert_true(strv_has(&info.ips, "10.0.0.9"));
	assert_true(strv_has(&info.dns, "api.example.com"));
	assert_true(strv_has(&info.dns, "localhost"));
	pki_cert_info_free(&info);
	X509_free(x);
	adm_after = read_text(adm);
	assert_string_equal(adm_before, adm_after);
	{
		char *api_after = read_text(api);
		assert_string_not_equal(api_before, api_after);
		free(api_after);
	}
	free(api);
	free(adm);
	free(api_before);
	free(adm_before);
	free(adm_after);
}

/* ---- expiry_scan ------------------------------------------------------------------ */

static void test_scan_fresh_cluster(void **state)
{
	struct fixture *f = *state;
	struct expiry_report rep;
	char *p;

	scan(f->dir, NULL, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 1);
	for (size_t i = 0; i < NLEAF; i++) {
		const struct expiry_row *r = &rep.rows[i];
		assert_string_equal(r->name, leaf_rows[i]);
		/* Ten days left, inside the 30-day window. */
		assert_status(r, EXPIRY_WARNING);
		assert_string_equal(r->ca, "ca");
		assert_false(r->is_ca);
		assert_int_equal(r->not_after_ns, T0 + VALIDITY);
	}
	p = cluster_path(f->dir, "admin.conf");
	assert_string_equal(rep.rows[0].path, p);
	free(p);
	p = cluster_path(f->dir, "pki/apiserver.crt");
	assert_string_equal(rep.rows[1].path, p);
	free(p);

	/* The CA row comes last. */
	assert_string_equal(rep.rows[NLEAF].name, "ca");
	assert_true(rep.rows[NLEAF].is_ca);
	assert_false(rep.rows[NLEAF].external);
	assert_status(&rep.rows[NLEAF], EXPIRY_OK);
	assert_int_equal(rep.rows[NLEAF].not_after_ns, T0 + CLUSTER_CA_VALIDITY);
	expiry_report_free(&rep);
	assert_int_equal(rep.n, 0);
	assert_null(rep.rows);

	/* A narrower window: all OK. */
	assert_int_equal(expiry_scan(f->dir, NULL, T0, 5 * NS_PER_DAY, &rep), 0);
	for (size_t i = 0; i < rep.n; i++)
		assert_status(&rep.rows[i], EXPIRY_OK);
	expiry_report_free(&rep);
}

static void test_scan_expired(void **state)
{
	struct fixture *f = *state;
	struct expiry_report rep;

	clock_advance(11 * NS_PER_DAY);
	scan(f->dir, NULL, clock_now(), &rep);
	assert_int_equal(rep.n, NLEAF + 1);
	for (size_t i = 0; i < NLEAF; i++) {
		assert_status(&rep.rows[i], EXPIRY_EXPIRED);
		/* Still recognisably ours. */
		assert_string_equal(rep.rows[i].ca, "ca");
	}
	assert_status(&rep.rows[NLEAF], EXPIRY_OK);
	expiry_report_free(&rep);

	/* Either side of NotAfter. */
	scan(f->dir, NULL, T0 + VALIDITY + NS_PER_SEC, &rep);
	assert_status(&rep.rows[1], EXPIRY_EXPIRED);
	expiry_report_free(&rep);
	scan(f->dir, NULL, T0 + VALIDITY - NS_PER_SEC, &rep);
	assert_status(&rep.rows[1], EXPIRY_WARNING);
	expiry_report_free(&rep);
}

static void test_scan_missing(void **state)
{
	struct fixture *f = *state;
	char *conf = cluster_path(f->dir, "scheduler.conf");
	char *crt = cluster_path(f->dir, "pki/apiserver-kubelet-client.crt");
	struct expiry_report rep;
	const struct expiry_row *r;

	assert_int_equal(unlink(conf), 0);
	assert_int_equal(unlink(crt), 0);
	scan(f->dir, NULL, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 1);
	r = row_named(&rep, "scheduler.conf");
	assert_status(r, EXPIRY_MISSING);
	assert_string_equal(r->path, conf);
	assert_non_null(r->error);
	assert_true(strlen(r->error) > 0);
	r = row_named(&rep, "apiserver-kubelet-client");
	assert_status(r, EXPIRY_MISSING);
	/* The others are unaffected. */
	assert_status(row_named(&rep, "admin.conf"), EXPIRY_WARNING);
	assert_status(row_named(&rep, "ca"), EXPIRY_OK);
	expiry_report_free(&rep);
	free(conf);
	free(crt);
}

static void test_scan_invalid_files(void **state)
{
	struct fixture *f = *state;
	char *crt = cluster_path(f->dir, "pki/apiserver.crt");
	char *conf = cluster_path(f->dir, "controller-manager.conf");
	struct expiry_report rep;
	const struct expiry_row *r;
	FILE *fp;

	fp = fopen(crt, "w");
	fputs("garbage\n", fp);
	fclose(fp);
	fp = fopen(conf, "w");
	fputs("apiVersion: v1\nkind: Config\n", fp);
	fclose(fp);
	scan(f->dir, NULL, T0, &rep);
	r = row_named(&rep, "apiserver");
	assert_status(r, EXPIRY_INVALID);
	assert_contains(r->error, "not a PEM file");
	r = row_named(&rep, "controller-manager.conf");
	assert_status(r, EXPIRY_INVALID);
	assert_true(strlen(r->error) > 0);
	expiry_report_free(&rep);
	free(crt);
	free(conf);
}

static void test_scan_external_ca(void **state)
{
	struct fixture *f = *state;
	char *key = cluster_path(f->dir, "pki/ca.key");
	struct expiry_report rep;

	assert_int_equal(unlink(key), 0);
	scan(f->dir, NULL, T0, &rep);
	assert_string_equal(rep.rows[rep.n - 1].name, "ca");
	assert_true(rep.rows[rep.n - 1].external);
	assert_status(&rep.rows[rep.n - 1], EXPIRY_OK);
	/* The leaves still check out against the certificate. */
	assert_string_equal(rep.rows[1].ca, "ca");
	expiry_report_free(&rep);
	free(key);
}

static void test_scan_kubelet_dir(void **state)
{
	struct fixture *f = *state;
	char *kdir = in(f->root, "kubelet/pki");
	const char *const kdirs[] = {kdir, NULL};
	struct expiry_report rep;
	const struct expiry_row *r;
	char resolved[PATH_MAX], *cur;

	store_kubelet(f->dir, kdir, CERTSTORE_CLIENT, "system:node:node-1", false);
	store_kubelet(f->dir, kdir, CERTSTORE_SERVER, "system:node:node-1", false);
	scan(f->dir, kdirs, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 1 + 2);

	r = row_named(&rep, "kubelet-client (node-1)");
	assert_string_equal(r->ca, "ca");
	assert_false(r->is_ca);
	assert_status(r, EXPIRY_OK);
	assert_int_equal(r->not_after_ns, T0 + 365 * NS_PER_DAY - PKI_BACKDATE_NS);
	/* The path is the dated file the symlink names. */
	cur = certstore_current_path(kdir, CERTSTORE_CLIENT);
	assert_non_null(realpath(cur, resolved));
	assert_string_equal(r->path, resolved);
	assert_contains(r->path, "/kubelet-client-2026-11-30-10-00-00.pem");
	free(cur);

	r = row_named(&rep, "kubelet-server (node-1)");
	assert_string_equal(r->ca, "ca");
	assert_status(r, EXPIRY_OK);
	/* Kubelet rows come after the cluster's. */
	assert_string_equal(rep.rows[NLEAF].name, "ca");
	expiry_report_free(&rep);

	/* A year on, the kubelet's client certificate has expired too. */
	scan(f->dir, kdirs, T0 + 400 * NS_PER_DAY, &rep);
	assert_status(row_named(&rep, "kubelet-client (node-1)"), EXPIRY_EXPIRED);
	expiry_report_free(&rep);
	free(kdir);
}

static void test_scan_kubelet_foreign_ca(void **state)
{
	struct fixture *f = *state;
	char *kdir = in(f->root, "kubelet/pki");
	const char *const kdirs[] = {kdir, NULL};
	struct expiry_report rep;
	const struct expiry_row *r;

	store_kubelet(f->dir, kdir, CERTSTORE_CLIENT, "system:node:node-1", true);
	scan(f->dir, kdirs, T0, &rep);
	r = row_named(&rep, "kubelet-client (node-1)");
	assert_status(r, EXPIRY_INVALID);
	/* Says who signed it instead. */
	assert_string_equal(r->ca, "other-ca");
	assert_non_null(r->error);
	assert_contains(r->error, "unknown authority");
	assert_int_equal(r->not_after_ns, T0 + 365 * NS_PER_DAY - PKI_BACKDATE_NS);
	expiry_report_free(&rep);
	free(kdir);
}

static void test_scan_kubelet_node_dirs(void **state)
{
	/* `cube up` lays nodes out as ROOT/<node>/pki. */
	struct fixture *f = *state;
	char *root = in(f->root, "nodes"), *n2 = in(root, "node-2/pki"),
	     *n3 = in(root, "node-3/pki");
	char *n3root = in(root, "node-3");
	const char *const by_root[] = {root, NULL};
	const char *const by_certdir[] = {n2, NULL};
	const char *const by_noderoot[] = {n3root, NULL};
	struct expiry_report rep;

	store_kubelet(f->dir, n2, CERTSTORE_CLIENT, "system:node:node-2", false);
	/* A CN that names no node: the directory does. */
	store_kubelet(f->dir, n3, CERTSTORE_CLIENT, "kubelet", false);

	scan(f->dir, by_root, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 1 + 2);
	assert_string_equal(rep.rows[NLEAF + 1].name, "kubelet-client (node-2)");
	assert_string_equal(rep.rows[NLEAF + 2].name, "kubelet-client (node-3)");
	assert_string_equal(rep.rows[NLEAF + 1].ca, "ca");
	assert_status(&rep.rows[NLEAF + 1], EXPIRY_OK);
	expiry_report_free(&rep);

	/* The cert dir itself, and the node's root dir, name the same node. */
	scan(f->dir, by_certdir, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 2);
	assert_string_equal(rep.rows[NLEAF + 1].name, "kubelet-client (node-2)");
	expiry_report_free(&rep);
	scan(f->dir, by_noderoot, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 2);
	assert_string_equal(rep.rows[NLEAF + 1].name, "kubelet-client (node-3)");
	expiry_report_free(&rep);
	free(root);
	free(n2);
	free(n3);
	free(n3root);
}

static void test_scan_kubelet_missing(void **state)
{
	struct fixture *f = *state;
	char *empty = in(f->root, "empty"), *gone = in(f->root, "gone");
	const char *const kdirs[] = {empty, gone, NULL};
	struct expiry_report rep;

	assert_int_equal(mkdir(empty, 0755), 0);
	scan(f->dir, kdirs, T0, &rep);
	assert_int_equal(rep.n, NLEAF + 1 + 2);
	for (size_t i = NLEAF + 1; i < rep.n; i++) {
		assert_string_equal(rep.rows[i].name, "kubelet-client");
		assert_status(&rep.rows[i], EXPIRY_MISSING);
		assert_true(strlen(rep.rows[i].error) > 0);
	}
	assert_contains(rep.rows[NLEAF + 1].path, "kubelet-client-current.pem");
	expiry_report_free(&rep);
	free(empty);
	free(gone);
}

static void test_scan_kubelet_without_cluster(void **state)
{
	/* No cluster dir: nothing to check against, the issuer is reported. */
	struct fixture *f = *state;
	char *kdir = in(f->root, "kubelet/pki");
	const char *const kdirs[] = {kdir, NULL};
	struct expiry_report rep;

	store_kubelet(f->dir, kdir, CERTSTORE_CLIENT, "system:node:node-1", false);
	scan(NULL, kdirs, T0, &rep);
	assert_int_equal(rep.n, 1);
	assert_string_equal(rep.rows[0].name, "kubelet-client (node-1)");
	assert_string_equal(rep.rows[0].ca, "kubernetes");
	assert_status(&rep.rows[0], EXPIRY_OK);
	expiry_report_free(&rep);

	scan(NULL, NULL, T0, &rep);
	assert_int_equal(rep.n, 0);
	expiry_report_free(&rep);
	free(kdir);
}

static void test_status_names(void **state)
{
	assert_string_equal(expiry_status_name(EXPIRY_OK), "ok");
	assert_string_equal(expiry_status_name(EXPIRY_WARNING), "warning");
	assert_string_equal(expiry_status_name(EXPIRY_EXPIRED), "expired");
	assert_string_equal(expiry_status_name(EXPIRY_MISSING), "missing");
	assert_string_equal(expiry_status_name(EXPIRY_INVALID), "invalid");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_init_layout),
	    T(test_init_rerun_keeps),
	    T(test_init_force_regenerates),
	    T(test_init_renews_expired_leaves),
	    T(test_init_extra_sans),
	    T(test_scan_fresh_cluster),
	    T(test_scan_expired),
	    T(test_scan_missing),
	    T(test_scan_invalid_files),
	    T(test_scan_external_ca),
	    T(test_scan_kubelet_dir),
	    T(test_scan_kubelet_foreign_ca),
	    T(test_scan_kubelet_node_dirs),
	    T(test_scan_kubelet_missing),
	    T(test_scan_kubelet_without_cluster),
	    cmocka_unit_test(test_status_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
