#include "pki/cluster.h"

#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"

#include <arpa/inet.h>
#include <openssl/x509v3.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A certificate authority: kubeadm's "ca" or "etcd-ca". */
struct ca {
	const char *base; /* under pki/, without .crt/.key: "ca", "etcd/ca" */
	const char *cn;
	X509 *cert;
	EVP_PKEY *key;
	bool fresh; /* made by this run: what an older CA signed must be made again */
};

/* One certificate the cluster needs: a file pair or a kubeconfig. */
struct leaf {
	const char *name;       /* kubeadm's base name: "apiserver", "etcd/server", "admin.conf" */
	const struct ca *ca;
	const char *cn;
	const char *const *orgs;
	const char *const *dns, *const *ips;
	unsigned usages;
	enum pki_purpose purpose;
	const char *user;       /* kubeconfig user; NULL for a .crt/.key pair */
};

struct ctx {
	const struct cluster_pki_opts *o;
	struct ca ca, etcd;
	char *ca_pem;
	int64_t now;
};

char *cluster_path(const char *dir, const char *rel)
{
	return file_join(dir, rel);
}

static void say(const struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct ctx *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!c->o->say)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	c->o->say(c->o->say_arg, line);
}

static bool same_set(const struct strv *have, const char *const *want)
{
	size_t n = 0;
	for (; want && want[n]; n++)
		if (!strv_has(have, want[n]))
			return false;
	return n == have->n;
}

static bool covers(const struct strv *have, const char *const *want)
{
	for (size_t i = 0; want && want[i]; i++)
		if (!strv_has(have, want[i]))
			return false;
	return true;
}

/* Still good for this request: our CA, our subject, our SANs, not expired.
 * The extended usages are compared as well as the purpose, because etcd's
 * pairs need client auth beside server auth, which a purpose cannot say. */
static bool leaf_ok(const struct ctx *c, const struct leaf *l, X509 *cert, EVP_PKEY *key)
{
	const unsigned eku = l->usages & (PKI_U_SERVER_AUTH | PKI_U_CLIENT_AUTH);
	struct pki_cert_info info;
	bool ok;

	if (!cert || !key || !pki_key_matches(cert, key) ||
	    pki_verify_with(cert, l->ca->cert, c->now, l->purpose) < 0)
		return false;
	pki_cert_info(cert, &info);
	ok = strcmp(info.cn, l->cn) == 0 && same_set(&info.orgs, l->orgs) &&
	     covers(&info.dns, l->dns) && covers(&info.ips, l->ips) &&
	     (info.usages & eku) == eku;
	pki_cert_info_free(&info);
	return ok;
}

static X509 *leaf_sign(const struct ctx *c, const struct leaf *l, EVP_PKEY *key)
{
	struct pki_cert_spec spec = {
		.cn = l->cn,
		.orgs = l->orgs,
		.dns = l->dns,
		.ips = l->ips,
		.usages = l->usages,
		.not_before_ns = c->now - PKI_BACKDATE_NS,
		.not_after_ns = c->now + c->o->validity_ns,
	};
	if (spec.not_after_ns > pki_cert_not_after(l->ca->cert))
		spec.not_after_ns = pki_cert_not_after(l->ca->cert);
	return pki_cert_new(&spec, key, l->ca->cert, l->ca->key);
}

static bool ca_usable(const struct ctx *c, const struct ca *ca)
{
	return ca->cert && ca->key && pki_key_matches(ca->cert, ca->key) &&
	       X509_check_ca(ca->cert) > 0 && pki_verify_with(ca->cert, ca->cert, c->now, 0) == 0;
}

static int ensure_ca(const struct ctx *c, struct ca *ca)
{
	char rel[64], *crt, *kf;
	int r = 0;

	snprintf(rel, sizeof(rel), "pki/%s.crt", ca->base);
	crt = cluster_path(c->o->dir, rel);
	snprintf(rel, sizeof(rel), "pki/%s.key", ca->base);
	kf = cluster_path(c->o->dir, rel);
	if (!c->o->force && file_exists(crt) && file_exists(kf)) {
		ca->cert = pki_cert_load(crt);
		ca->key = ca->cert ? pki_key_load(kf) : NULL;
		if (ca_usable(c, ca)) {
			say(c, "[certs] Using existing %s certificate authority", ca->base);
			goto out;
		}
		say(c, "[certs] Existing %s certificate authority is not usable (%s); "
		       "generating a new one",
		    ca->base, err_msg());
		X509_free(ca->cert);
		EVP_PKEY_free(ca->key);
		ca->cert = NULL;
		ca->key = NULL;
	}
	say(c, "[certs] Generating \"%s\" certificate and key", ca->base);
	ca->fresh = true;
	if (!(ca->key = pki_key_new(c->o->key_type)) ||
	    !(ca->cert = pki_ca_new(ca->key, ca->cn, c->o->ca_validity_ns)) ||
	    (r = pki_key_save(kf, ca->key)) < 0 || (r = pki_cert_save(crt, ca->cert)) < 0)
		r = r < 0 ? r : ERR_CRYPTO;
out:
	free(crt);
	free(kf);
	return r;
}

static void say_sans(const struct ctx *c, const struct leaf *l)
{
	struct strv d = {(char **)l->dns, strlist_len(l->dns), 0};
	struct strv i = {(char **)l->ips, strlist_len(l->ips), 0};
	char *dj = strv_join(&d, " "), *ij = strv_join(&i, " ");

	say(c, "[certs] %s serving cert is signed for DNS names [%s] and IPs [%s]", l->name, dj,
	    ij);
	free(dj);
	free(ij);
}

static int ensure_pair(const struct ctx *c, const struct leaf *l)
{
	char rel[256], *crt, *kf;
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	int r = 0;

	snprintf(rel, sizeof(rel), "pki/%s.crt", l->name);
	crt = cluster_path(c->o->dir, rel);
	snprintf(rel, sizeof(rel), "pki/%s.key", l->name);
	kf = cluster_path(c->o->dir, rel);
	if (!l->ca->fresh && file_exists(crt) && file_exists(kf)) {
		cert = pki_cert_load(crt);
		key = cert ? pki_key_load(kf) : NULL;
		if (leaf_ok(c, l, cert, key)) {
			say(c, "[certs] Using existing %s certificate and key on disk", l->name);
			goto out;
		}
		X509_free(cert);
		EVP_PKEY_free(key);
	}
	say(c, "[certs] Generating \"%s\" certificate and key", l->name);
	if (!(key = pki_key_new(c->o->key_type)) || !(cert = leaf_sign(c, l, key)))
		r = ERR_CRYPTO;
	if (r == 0 && l->dns)
		say_sans(c, l);
	if (r == 0 && (r = pki_key_save(kf, key)) == 0)
		r = pki_cert_save(crt, cert);
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	free(crt);
	free(kf);
	return r;
}

static void kc_names(const struct ctx *c, const char *user, struct kubeconfig *kc, char *ctxbuf,
		     size_t n)
{
	snprintf(ctxbuf, n, "%s@%s", user, c->o->cluster_name);
	kc->cluster = (char *)c->o->cluster_name;
	kc->user = (char *)user;
	kc->context = ctxbuf;
	kc->server = (char *)c->o->server;
	kc->ca_data = c->ca_pem;
}

/* A kubeconfig is kept only when it points where we would point it. */
static bool kubeconfig_ok(const struct ctx *c, const struct kubeconfig *kc)
{
	return !c->ca.fresh && kc->server && strcmp(kc->server, c->o->server) == 0 && kc->ca_data &&
	       strcmp(kc->ca_data, c->ca_pem) == 0;
}

static int ensure_kubeconfig(const struct ctx *c, const struct leaf *l)
{
	char *path = cluster_path(c->o->dir, l->name), ctxname[256];
	struct kubeconfig have, want = {0};
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	int r = 0;

	if (file_exists(path) && kubeconfig_load(path, &have) == 0) {
		bool ok = kubeconfig_ok(c, &have) && have.cert_data && have.key_data;
		if (ok) {
			cert = pki_cert_parse(have.cert_data, strlen(have.cert_data));
			key = cert ? pki_key_parse(have.key_data, strlen(have.key_data)) : NULL;
			ok = leaf_ok(c, l, cert, key);
		}
		kubeconfig_free(&have);
		X509_free(cert);
		EVP_PKEY_free(key);
		cert = NULL;
		key = NULL;
		if (ok) {
			say(c, "[kubeconfig] Using existing kubeconfig file: \"%s\"", path);
			goto out;
		}
	}
	say(c, "[kubeconfig] Writing \"%s\" kubeconfig file", l->name);
	if (!(key = pki_key_new(c->o->key_type)) || !(cert = leaf_sign(c, l, key))) {
		r = ERR_CRYPTO;
		goto out;
	}
	kc_names(c, l->user, &want, ctxname, sizeof(ctxname));
	want.cert_data = pki_cert_pem(cert);
	want.key_data = pki_key_pem(key);
	r = want.key_data ? kubeconfig_save(path, &want) : ERR_CRYPTO;
	free(want.cert_data);
	free(want.key_data);
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	free(path);
	return r;
}

static int ensure_token(const struct ctx *c, char token[24])
{
	char *path = cluster_path(c->o->dir, "pki/bootstrap-token"), *have = NULL;
	int r = 0;

	if (!c->o->force && file_read(path, &have, NULL, 4096) == 0) {
		have[strcspn(have, "\r\n")] = '\0';
		if (pki_token_valid(have)) {
			memcpy(token, have, 24);
			say(c, "[bootstrap-token] Using existing bootstrap token %.6s", token);
			goto out;
		}
	}
	if ((r = pki_token_new(token)) == 0) {
		char line[32];
		snprintf(line, sizeof(line), "%s\n", token);
		r = file_write_atomic(path, line, strlen(line), 0600);
		say(c, "[bootstrap-token] Using token: %s", token);
	}
out:
	free(have);
	free(path);
	return r;
}

static int ensure_bootstrap_kubeconfig(const struct ctx *c, const char *token)
{
	char *path = cluster_path(c->o->dir, "bootstrap-kubelet.conf"), ctxname[256];
	struct kubeconfig have, want = {0};
	int r;

	if (file_exists(path) && kubeconfig_load(path, &have) == 0) {
		bool ok = kubeconfig_ok(c, &have) && have.token && strcmp(have.token, token) == 0;
		kubeconfig_free(&have);
		if (ok) {
			say(c, "[kubeconfig] Using existing kubeconfig file: \"%s\"", path);
			free(path);
			return 0;
		}
	}
	say(c, "[kubeconfig] Writing \"bootstrap-kubelet.conf\" kubeconfig file");
	kc_names(c, "tls-bootstrap-token-user", &want, ctxname, sizeof(ctxname));
	want.token = (char *)token;
	r = kubeconfig_save(path, &want);
	free(path);
	return r;
}

/* kubeadm's "sa" pair: the key the API server signs service account tokens
 * with, and its public half that verifies them. Not a certificate: a new CA
 * leaves it alone (tokens issued before stay valid). */
static int ensure_sa_key(const struct ctx *c)
{
	char *kf = cluster_path(c->o->dir, "pki/sa.key"), *pf = cluster_path(c->o->dir, "pki/sa.pub");
	EVP_PKEY *key = NULL, *pub = NULL;
	char *pem = NULL;
	int r = 0;

	if (!c->o->force && file_exists(kf) && file_exists(pf)) {
		char *text = NULL;
		size_t len = 0;
		key = pki_key_load(kf);
		if (key && file_read(pf, &text, &len, 1 << 16) == 0)
			pub = pki_pubkey_parse(text, len);
		free(text);
		if (key && pub && pki_keys_match(key, pub)) {
			say(c, "[certs] Using the existing \"sa\" key");
			goto out;
		}
		EVP_PKEY_free(key);
	}
	say(c, "[certs] Generating \"sa\" key and public key");
	if (!(key = pki_key_new(c->o->key_type)) || !(pem = pki_pubkey_pem(key))) {
		r = ERR_CRYPTO;
		goto out;
	}
	if ((r = pki_key_save(kf, key)) == 0)
		r = file_write_atomic(pf, pem, strlen(pem), 0644);
out:
	EVP_PKEY_free(key);
	EVP_PKEY_free(pub);
	free(pem);
	free(kf);
	free(pf);
	return r;
}

static bool is_ip(const char *s)
{
	unsigned char buf[16];
	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* Extra SANs go to the IPs when they parse as one, as kubeadm sorts them. */
static void add_sans(struct strv *dns, struct strv *ips, const char *const *sans)
{
	for (size_t i = 0; sans && sans[i]; i++)
		strv_push_unique(is_ip(sans[i]) ? ips : dns, sans[i]);
}

/* kubeadm's stacked etcd: a CA of its own, the member's serving and peer
 * pairs, and the two clients that talk to it (the liveness probe and the API
 * server). Its certificates go nowhere near the cluster CA: a client
 * certificate the cluster CA signed must not open etcd, and the other way. */
static int ensure_etcd(struct ctx *c, const char *node)
{
	const bool rsa = c->o->key_type == PKI_KEY_RSA;
	/* etcd also dials with its serving certificate (etcd-io/etcd#9785),
	 * so kubeadm gives server and peer client auth too. */
	const unsigned both = pki_usages_kubelet(rsa, true) | PKI_U_CLIENT_AUTH;
	const unsigned client = pki_usages_kubelet(rsa, false);
	struct strv dns = STRV_INIT, ips = STRV_INIT;
	char *dir = cluster_path(c->o->dir, "pki/etcd");
	int r;

	strv_push(&dns, node);
	strv_push_unique(&dns, "localhost");
	strv_push(&ips, "127.0.0.1");
	strv_push(&ips, "::1");
	add_sans(&dns, &ips, c->o->etcd_sans);
	const char *const *d = (const char *const *)dns.v, *const *ip = (const char *const *)ips.v;
	const struct leaf pairs[] = {
		{"etcd/server", &c->etcd, node, NULL, d, ip, both, PKI_PURPOSE_SERVER, NULL},
		{"etcd/peer", &c->etcd, node, NULL, d, ip, both, PKI_PURPOSE_SERVER, NULL},
		{"etcd/healthcheck-client", &c->etcd, "kube-etcd-healthcheck-client", NULL, NULL,
		 NULL, client, PKI_PURPOSE_CLIENT, NULL},
		{"apiserver-etcd-client", &c->etcd, "kube-apiserver-etcd-client", NULL, NULL, NULL,
		 client, PKI_PURPOSE_CLIENT, NULL},
	};

	if ((r = file_mkdirs(dir, 0755)) == 0)
		r = ensure_ca(c, &c->etcd);
	for (size_t i = 0; r == 0 && i < sizeof(pairs) / sizeof(pairs[0]); i++)
		r = ensure_pair(c, &pairs[i]);
	free(dir);
	strv_free(&dns);
	strv_free(&ips);
	return r;
}

/* kubeadm's default nodeRegistration.name: the hostname, lower-cased. */
static void node_name(const struct cluster_pki_opts *o, char *buf, size_t n)
{
	buf[0] = '\0';
	if (o->node_name) {
		snprintf(buf, n, "%s", o->node_name);
		return;
	}
	gethostname(buf, n - 1);
	buf[n - 1] = '\0';
	for (char *p = buf; *p; p++)
		*p = (char)tolower((unsigned char)*p);
}

int cluster_pki_init(const struct cluster_pki_opts *o)
{
	static const char *const masters[] = {"system:masters", NULL};
	static const char *const cluster_admins[] = {"kubeadm:cluster-admins", NULL};
	struct ctx c = {
		.o = o,
		.now = clock_now(),
		.ca = {.base = "ca", .cn = o->cluster_name},
		.etcd = {.base = "etcd/ca", .cn = "etcd-ca"},
	};
	struct strv dns = STRV_INIT, ips = STRV_INIT;
	char node[256], *pki = cluster_path(o->dir, "pki"), token[24];
	bool rsa = o->key_type == PKI_KEY_RSA;
	int r;

	node_name(o, node, sizeof(node));
	if (o->etcd && !node[0]) {
		r = err_set(ERR_INVALID, "no node name for the etcd certificates, which are "
					 "named after it (the hostname is empty: give --node-name)");
		goto out;
	}
	if ((r = file_mkdirs(pki, 0755)) < 0)
		goto out;
	strv_push(&dns, "kubernetes");
	strv_push(&dns, "kubernetes.default");
	strv_push(&dns, "kubernetes.default.svc");
	strv_push(&dns, "kubernetes.default.svc.cluster.local");
	strv_push(&dns, "localhost");
	if (node[0])
		strv_push_unique(&dns, node);
	strv_push(&ips, "10.96.0.1");
	strv_push(&ips, "127.0.0.1");
	add_sans(&dns, &ips, o->apiserver_sans);

	const struct leaf pairs[] = {
		{"apiserver", &c.ca, "kube-apiserver", NULL, (const char *const *)dns.v,
		 (const char *const *)ips.v, pki_usages_kubelet(rsa, true), PKI_PURPOSE_SERVER,
		 NULL},
		{"apiserver-kubelet-client", &c.ca, "kube-apiserver-kubelet-client", cluster_admins,
		 NULL, NULL, pki_usages_kubelet(rsa, false), PKI_PURPOSE_CLIENT, NULL},
	};
	const struct leaf confs[] = {
		{"admin.conf", &c.ca, "kubernetes-admin", masters, NULL, NULL,
		 pki_usages_kubelet(rsa, false), PKI_PURPOSE_CLIENT, "kubernetes-admin"},
		{"controller-manager.conf", &c.ca, "system:kube-controller-manager", NULL, NULL,
		 NULL, pki_usages_kubelet(rsa, false), PKI_PURPOSE_CLIENT,
		 "system:kube-controller-manager"},
		{"scheduler.conf", &c.ca, "system:kube-scheduler", NULL, NULL, NULL,
		 pki_usages_kubelet(rsa, false), PKI_PURPOSE_CLIENT, "system:kube-scheduler"},
	};

	if ((r = ensure_ca(&c, &c.ca)) < 0)
		goto out;
	c.ca_pem = pki_cert_pem(c.ca.cert);
	for (size_t i = 0; r == 0 && i < sizeof(pairs) / sizeof(pairs[0]); i++)
		r = ensure_pair(&c, &pairs[i]);
	if (r == 0 && o->etcd)
		r = ensure_etcd(&c, node);
	for (size_t i = 0; r == 0 && i < sizeof(confs) / sizeof(confs[0]); i++)
		r = ensure_kubeconfig(&c, &confs[i]);
	if (r == 0)
		r = ensure_sa_key(&c);
	if (r == 0)
		r = ensure_token(&c, token);
	if (r == 0)
		r = ensure_bootstrap_kubeconfig(&c, token);
out:
	X509_free(c.ca.cert);
	EVP_PKEY_free(c.ca.key);
	X509_free(c.etcd.cert);
	EVP_PKEY_free(c.etcd.key);
	free(c.ca_pem);
	free(pki);
	strv_free(&dns);
	strv_free(&ips);
	return r;
}
