/*
 * cube fault — break a running `cube up` cluster the way certificates and
 * nodes really break, acting on the real thing: the kubelet's certificate
 * files and config.yaml, the RBAC bindings and CSRs in the API, the
 * kubelet's connections and clock, the controller manager's --controllers.
 * cube restart — systemctl restart for a node's kubelet or a control-plane
 * component.
 *
 * The injector stands outside the blast radius: it reads the cluster's own
 * files (the CA in pki/, the admin kubeconfig, whose certificate no fault
 * touches) and reaches the processes through the supervisor's socket
 * (control.h), so it keeps working while the cluster fails. Each fault is
 * recorded in <data-dir>/faults.json with what undoes it; `cube fault clear`
 * undoes them all, newest first.
 *
 * A running kubelet keeps its client certificate in memory, as upstream's
 * does (the store is read at start), so a fault that replaces the file
 * restarts that kubelet to make it take effect, as a reboot would; so does a
 * config.yaml edit.
 */
#include "cube/cli.h"
#include "cube/control.h"

#include "kubelet/kubelet.h"

#include "client/rest.h"
#include "pki/certstore.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <openssl/x509v3.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char fault_usage[] =
    "Usage: cube fault [--data-dir DIR] FAULT [ARGS]\n"
    "\n"
    "Inject a fault into the cluster `cube up` runs in DIR (default ./cube-data), on\n"
    "the real thing: files, connections, RBAC objects, the controller manager's flags.\n"
    "Each is recorded in DIR/faults.json; `cube fault clear` undoes them all.\n"
    "\n"
    "Faults:\n"
    "  expire-cert NODE [--in DUR]   replace NODE's client certificate by one the cluster\n"
    "                                CA signs that expires in DUR (default 0s: expired),\n"
    "                                and restart its kubelet to load it\n"
    "  expire-all [--in DUR]         the same for every node\n"
    "  wrong-ca NODE                 a client certificate from a foreign CA (the API\n"
    "                                server answers 401), kubelet restarted\n"
    "  disable-rotation NODE         rotateCertificates: false in NODE's config.yaml,\n"
    "                                kubelet restarted\n"
    "  approver off|on               the controller manager without / with csrapproving\n"
    "                                (--controllers=*,-csrapproving), restarted\n"
    "  revoke-autoapprove            delete kubeadm's auto-approve ClusterRoleBindings\n"
    "                                (kubeadm:node-autoapprove-bootstrap and\n"
    "                                kubeadm:node-autoapprove-certificate-rotation)\n"
    "  restore-autoapprove           create them again\n"
    "  deny-csrs                     a process that denies every CSR as it appears\n"
    "                                (log: DIR/logs/fault-deny-csrs.log)\n"
    "  partition NODE                cut NODE's kubelet off the API server (its\n"
    "                                connections fail: network is unreachable)\n"
    "  heal NODE                     undo partition\n"
    "  stop-kubelet NODE             systemctl stop kubelet on NODE\n"
    "  clock-skew NODE DUR           NODE's clock DUR ahead (\"-10m\": behind; 0: right)\n"
    "\n"
    "  With `cube up --ha`:\n"
    "  kill-etcd MEMBER              SIGKILL etcd member MEMBER (etcd1, or 1); it stays down\n"
    "  kill-apiserver N              SIGKILL API server N (apiserver0, or 0) behind haproxy\n"
    "  kill NAME                     SIGKILL any component (controller-manager-0, ...)\n"
    "  expire-etcd-cert MEMBER [--in DUR]  MEMBER's serving certificate replaced by one the\n"
    "                                etcd CA signs that expires in DUR (default 0s), member\n"
    "                                restarted: the API servers' TLS to it fails\n"
    "  list                          the faults in effect\n"
    "  clear                         undo every fault, newest first\n"
    "\n"
    "Flags:\n"
    "      --data-dir DIR                  the cluster (default ./cube-data)\n"
    "      --in DUR                        expire-cert, expire-all: NotAfter this far ahead\n"
    "\n"
    "Flags may come before the fault or among its words.\n";

static const char restart_usage[] =
    "Usage: cube restart [--data-dir DIR] NAME...\n"
    "\n"
    "Restart what NAME names in the cluster `cube up` runs in DIR, as systemctl restart\n"
    "would on a real machine: a node's kubelet (NAME is the node: it reads config.yaml\n"
    "and its certificate store again), controller-manager or scheduler.\n"
    "\n"
    "Flags:\n"
    "      --data-dir DIR                  the cluster (default ./cube-data)\n";

#define AUTOAPPROVE_BOOTSTRAP "kubeadm:node-autoapprove-bootstrap"
#define AUTOAPPROVE_ROTATION "kubeadm:node-autoapprove-certificate-rotation"
#define CRB_PATH "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
#define CSR_PATH "/apis/certificates.k8s.io/v1/certificatesigningrequests"

struct fault_ctx {
	const char *dir;
	char *sock;
	struct loop *loop;
	struct rest_client *api; /* admin.conf, made when first needed */
	json_t *faults;          /* faults.json's "faults" */
};

/* ---- the record: <dir>/faults.json --------------------------------------------- */

static char *faults_path(const struct fault_ctx *f)
{
	return file_join(f->dir, "faults.json");
}

static void faults_load(struct fault_ctx *f)
{
	char *path = faults_path(f);
	json_t *doc = file_exists(path) ? jx_load_file(path) : NULL;

	f->faults = json_incref(json_object_get(doc, "faults"));
	if (!json_is_array(f->faults)) {
		json_decref(f->faults);
		f->faults = json_array();
	}
	json_decref(doc);
	free(path);
}

static int faults_save(struct fault_ctx *f)
{
	char *path = faults_path(f);
	json_t *doc = json_pack("{s:O}", "faults", f->faults);
	char *text = json_dumps(doc, JSON_INDENT(2));
	int rc = file_write_atomic(path, text, strlen(text), 0600);

	free(text);
	json_decref(doc);
	free(path);
	return rc;
}

/* Add a fault: kind, target ("" for the cluster), then what undoes it. */
static int record(struct fault_ctx *f, const char *kind, const char *target, json_t *undo)
{
	char since[TIME_BUF];
	json_t *e = json_pack("{s:s, s:s, s:s}", "fault", kind, "target", target, "since",
	                      time_format_rfc3339(clock_now(), since));

	if (undo)
		json_object_update(e, undo);
	json_decref(undo);
	json_array_append_new(f->faults, e);
	return faults_save(f);
}

/* The newest record of kind (and target, when given): its index, or -1. */
static int find_record(const struct fault_ctx *f, const char *kind, const char *target)
{
	for (int i = (int)json_array_size(f->faults) - 1; i >= 0; i--) {
		const json_t *e = json_array_get(f->faults, (size_t)i);
		if (!strcmp(jx_str(e, "fault") ?: "", kind) &&
		    (!target || !strcmp(jx_str(e, "target") ?: "", target)))
			return i;
	}
	return -1;
}

static void forget(struct fault_ctx *f, const char *kind, const char *target)
{
	int i;
	while ((i = find_record(f, kind, target)) >= 0)
		json_array_remove(f->faults, (size_t)i);
}

/* ---- reaching the cluster -------------------------------------------------------- */

/* Ask the supervisor; 0, or an error with its message. */
static int supervise(struct fault_ctx *f, json_t *words, json_t **out)
{
	json_t *r = control_call(f->sock, words, 60);

	json_decref(words);
	if (!r)
		return err_wrap(ERR_UNAVAILABLE, "the cluster in %s", f->dir);
	if (jx_str(r, "error")) {
		int rc = err_set(ERR_INVALID, "%s", jx_str(r, "error"));
		json_decref(r);
		return rc;
	}
	if (out)
		*out = r;
	else
		json_decref(r);
	return 0;
}

static int restart_kubelet(struct fault_ctx *f, const char *node)
{
	return supervise(f, json_pack("[s, s, s]", "kubelet", "restart", node), NULL);
}

static struct rest_client *api(struct fault_ctx *f)
{
	char *path;
	struct kubeconfig kc;

	if (f->api)
		return f->api;
	path = file_join(f->dir, "admin.conf");
	if (kubeconfig_load(path, &kc) == 0) {
		f->api = rest_client_from_kubeconfig(f->loop, &kc, "cube-fault");
		kubeconfig_free(&kc);
	} else {
		err_wrap(ERR_NOTFOUND, "the cluster's admin kubeconfig");
	}
	free(path);
	return f->api;
}

/* status, or an error naming what was asked and what came back. */
static int call(struct fault_ctx *f, const char *method, const char *path, const json_t *body,
                json_t **out)
{
	struct rest_client *c = api(f);
	char *err = NULL;
	json_t *r = NULL;
	int status;

	if (!c)
		return -1;
	status = rest_do_sync(c, method, path, body, &r, &err);
	if (status == 0)
		err_set(ERR_UNAVAILABLE, "%s %s: %s", method, path, err ? err : "failed");
	else if (status >= 300 && status != 404 && status != 409)
		err_set(ERR_INVALID, "%s %s: %d %s", method, path, status,
		        jx_str(r, "message") ?: "");
	free(err);
	if (out)
		*out = r;
	else
		json_decref(r);
	return status;
}

/* ---- certificates ------------------------------------------------------------------ */

static char *node_dir(const struct fault_ctx *f, const char *node)
{
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "nodes/%s", node);
	return file_join(f->dir, rel);
}

/* The foreign CA wrong-ca signs with: made once, kept in <dir>/faults/. */
static int foreign_ca(struct fault_ctx *f, X509 **ca, EVP_PKEY **key)
{
	char *d = file_join(f->dir, "faults");
	char *crt = file_join(d, "foreign-ca.crt"), *k = file_join(d, "foreign-ca.key");
	int rc = 0;

	if (file_exists(crt) && file_exists(k)) {
		*ca = pki_cert_load(crt);
		*key = pki_key_load(k);
	} else {
		*key = pki_key_new(PKI_KEY_ECDSA);
		*ca = *key ? pki_ca_new(*key, "foreign-ca", 10 * 365 * NS_PER_DAY) : NULL;
		if (*ca && (file_mkdirs(d, 0700) < 0 || pki_key_save(k, *key) < 0 ||
		            pki_cert_save(crt, *ca) < 0))
			rc = -1;
	}
	if (!*ca || !*key)
		rc = err_wrap(ERR_IO, "the foreign CA in %s", d);
	free(d);
	free(crt);
	free(k);
	return rc;
}

static int cluster_ca(struct fault_ctx *f, X509 **ca, EVP_PKEY **key)
{
	char *crt = file_join(f->dir, "pki/ca.crt"), *k = file_join(f->dir, "pki/ca.key");
	int rc = 0;

	*ca = pki_cert_load(crt);
	*key = *ca ? pki_key_load(k) : NULL;
	if (!*ca || !*key)
		rc = err_wrap(ERR_IO, "the cluster CA (%s)", crt);
	free(crt);
	free(k);
	return rc;
}

/*
 * Replace node's client certificate by one for the same key and subject,
 * signed by ca (the cluster's, or the foreign one), valid from not_before
 * to not_after; record how to put the old one back; restart its kubelet.
 */
static int replace_client_cert(struct fault_ctx *f, const char *kind, const char *node, X509 *ca,
                               EVP_PKEY *ca_key, const char *issuer, int64_t not_before,
                               int64_t not_after)
{
	char *dir = node_dir(f, node), *pki = file_join(dir, "pki");
	char *cur = certstore_current_path(pki, CERTSTORE_CLIENT), *was = realpath(cur, NULL);
	char *issued = NULL, *cn = NULL, when[TIME_BUF];
	struct strv orgs = {0};
	X509 *cert = NULL, *next = NULL;
	EVP_PKEY *key = NULL;
	int rc;

	if (!was || pki_pair_load(cur, &cert, &key) < 0) {
		rc = err_set(ERR_NOTFOUND, "node %s has no client certificate (%s)", node, cur);
		goto out;
	}
	pki_name_read(X509_get_subject_name(cert), &cn, &orgs);
	struct pki_cert_spec spec = {
	    .cn = cn,
	    .orgs = (const char *const *)orgs.v,
	    .usages = pki_usages_kubelet(pki_key_is_rsa(key), false),
	    .not_before_ns = not_before,
	    .not_after_ns = not_after,
	};
	if (!(next = pki_cert_new(&spec, key, ca, ca_key)) ||
	    (rc = certstore_update(pki, CERTSTORE_CLIENT, next, NULL, key, &issued)) < 0) {
		rc = err_wrap(ERR_IO, "a new client certificate for %s", node);
		goto out;
	}
	if ((rc = record(f, kind, node,
	                 json_pack("{s:s, s:s, s:s}", "restore", was, "issued", issued, "notAfter",
	                           time_format_rfc3339(not_after, when)))) < 0)
		goto out;
	printf("%s: client certificate replaced by %s (CN=%s, issuer %s, NotAfter %s)\n", node,
	       issued, cn, issuer, when);
	rc = restart_kubelet(f, node);
	if (rc == 0)
		printf("%s: kubelet restarted to load it\n", node);
out:
	X509_free(cert);
	X509_free(next);
	EVP_PKEY_free(key);
	strv_free(&orgs);
	free(cn);
	free(issued);
	free(was);
	free(cur);
	free(pki);
	free(dir);
	return rc;
}

/* NotBefore an hour back: the certificate looks issued long ago, so a
 * kubelet that rotates finds itself past its rotation deadline at once. */
static int expire_cert(struct fault_ctx *f, const char *node, int64_t in_ns)
{
	X509 *ca;
	EVP_PKEY *key;
	int64_t now = clock_now();
	int rc = cluster_ca(f, &ca, &key);

	if (rc == 0)
		rc = replace_client_cert(f, "expire-cert", node, ca, key, "the cluster CA",
		                         now - NS_PER_HOUR, now + in_ns);
	X509_free(ca);
	EVP_PKEY_free(key);
	return rc;
}

static int wrong_ca(struct fault_ctx *f, const char *node)
{
	X509 *ca;
	EVP_PKEY *key;
	int64_t now = clock_now();
	int rc = foreign_ca(f, &ca, &key);

	if (rc == 0)
		rc = replace_client_cert(f, "wrong-ca", node, ca, key,
		                         "foreign-ca (not the cluster's)", now - 5 * NS_PER_MIN,
		                         now + 365 * NS_PER_DAY);
	X509_free(ca);
	EVP_PKEY_free(key);
	return rc;
}

/* Every node under <dir>/nodes/, sorted. */
static void node_names(const struct fault_ctx *f, struct strv *out)
{
	char *nodes = file_join(f->dir, "nodes");
	DIR *d = opendir(nodes);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && e->d_type == DT_DIR)
			strv_push(out, e->d_name);
	if (d)
		closedir(d);
	strv_sort(out);
	free(nodes);
}

static int expire_all(struct fault_ctx *f, int64_t in_ns)
{
	struct strv nodes = {0};
	int rc = 0;

	node_names(f, &nodes);
	for (size_t i = 0; i < nodes.n && rc == 0; i++)
		rc = expire_cert(f, nodes.v[i], in_ns);
	if (nodes.n == 0)
		rc = err_set(ERR_NOTFOUND, "no nodes in %s/nodes", f->dir);
	strv_free(&nodes);
	return rc;
}

/* Point <prefix>-current.pem back at a file, as certstore's update does. */
static int restore_cert(struct fault_ctx *f, const json_t *e)
{
	const char *node = jx_str(e, "target"), *was = jx_str(e, "restore");
	char *dir = node_dir(f, node), *pki = file_join(dir, "pki");
	char *cur = certstore_current_path(pki, CERTSTORE_CLIENT);
	char *tmp = file_join(pki, CERTSTORE_CLIENT "-updated.pem");
	int rc = 0;

	unlink(tmp);
	if (!was || symlink(was, tmp) < 0 || rename(tmp, cur) < 0)
		rc = err_set(ERR_IO, "restore %s -> %s: %s", cur, was ?: "?", strerror(errno));
	else
		printf("%s: client certificate %s restored\n", node, was);
	free(tmp);
	free(cur);
	free(pki);
	free(dir);
	return rc ? rc : restart_kubelet(f, node);
}

/* ---- config.yaml --------------------------------------------------------------------- */

static int set_rotation(struct fault_ctx *f, const char *node, bool on)
{
	char *dir = node_dir(f, node), *path = file_join(dir, "config.yaml");
	struct kubelet_config c;
	int rc;

	kubelet_config_init(&c);
	if ((rc = kubelet_config_load(&c, path)) == 0) {
		c.rotate_certificates = on;
		rc = kubelet_config_write(&c, path);
	}
	kubelet_config_free(&c);
	if (rc == 0)
		printf("%s: rotateCertificates: %s in %s\n", node, on ? "true" : "false", path);
	free(path);
	free(dir);
	return rc ? rc : restart_kubelet(f, node);
}

/* ---- the controller manager ------------------------------------------------------------ */

static int set_controllers(struct fault_ctx *f, const char *list)
{
	json_t *r = NULL;
	int rc = supervise(f, json_pack("[s, s, s]", "controller-manager", "restart", list), &r);

	if (rc == 0)
		printf("controller manager restarted with --controllers=%s\n",
		       jx_str(r, "controllers") ?: list);
	json_decref(r);
	return rc;
}

static int approver(struct fault_ctx *f, const char *how)
{
	json_t *st = NULL;
	char list[512];
	int rc;

	if (strcmp(how, "off") && strcmp(how, "on"))
		return err_set(ERR_INVALID, "approver: off or on, not \"%s\"", how);
	if (!strcmp(how, "on")) {
		int i = find_record(f, "approver-off", NULL);
		const char *was =
		    i >= 0 ? jx_str(json_array_get(f->faults, (size_t)i), "restore") : "";
		if ((rc = set_controllers(f, was ?: "")) == 0) {
			forget(f, "approver-off", NULL);
			rc = faults_save(f);
		}
		return rc;
	}
	if ((rc = supervise(f, json_pack("[s]", "status"), &st)) < 0)
		return rc;
	snprintf(list, sizeof(list), "%s,-csrapproving", jx_str(st, "controllers") ?: "*");
	if (strstr(jx_str(st, "controllers") ?: "", "-csrapproving"))
		snprintf(list, sizeof(list), "%s", jx_str(st, "controllers"));
	rc = record(f, "approver-off", "",
	            json_pack("{s:s}", "restore",
	                      strcmp(jx_str(st, "controllers") ?: "*", "*")
	                          ? jx_str(st, "controllers")
	                          : ""));
	json_decref(st);
	return rc ? rc : set_controllers(f, list);
}

/* ---- RBAC ----------------------------------------------------------------------------------- */

/* kubeadm init's binding, as the API server's bootstrap writes it. */
static json_t *kubeadm_binding(const char *name)
{
	bool boot = !strcmp(name, AUTOAPPROVE_BOOTSTRAP);
	return json_pack(
	    "{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}", "apiVersion",
	    "rbac.authorization.k8s.io/v1", "kind", "ClusterRoleBinding", "metadata", "name", name,
	    "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind", "ClusterRole", "name",
	    boot ? "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	         : "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
	    "subjects", "apiGroup", "rbac.authorization.k8s.io", "kind", "Group", "name",
	    boot ? "system:bootstrappers:kubeadm:default-node-token" : "system:nodes");
}

/* What a saved binding is recreated from: no server-set metadata. */
static json_t *binding_to_save(const json_t *b)
{
	json_t *copy = json_deep_copy(b), *md = json_object_get(copy, "metadata");
	const char *drop[] = {"uid", "resourceVersion", "creationTimestamp", "managedFields",
	                      "generation"};

	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		json_object_del(md, drop[i]);
	return copy;
}

static int revoke_autoapprove(struct fault_ctx *f)
{
	const char *names[] = {AUTOAPPROVE_BOOTSTRAP, AUTOAPPROVE_ROTATION};
	json_t *saved = json_array();
	char path[256];
	int rc = 0;

	for (size_t i = 0; i < 2 && rc == 0; i++) {
		json_t *b = NULL;
		int st;
		snprintf(path, sizeof(path), "%s/%s", CRB_PATH, names[i]);
		if ((st = call(f, "GET", path, NULL, &b)) == 200) {
			json_array_append_new(saved, binding_to_save(b));
			st = call(f, "DELETE", path, NULL, NULL);
		}
		if (st == 200 || st == 404)
			printf("clusterrolebinding %s %s\n", names[i],
			       st == 200 ? "deleted" : "was already gone");
		else
			rc = -1;
		json_decref(b);
	}
	if (rc == 0)
		rc = record(f, "revoke-autoapprove", "", json_pack("{s:o}", "saved", saved));
	else
		json_decref(saved);
	return rc;
}

static int restore_autoapprove(struct fault_ctx *f)
{
	int i = find_record(f, "revoke-autoapprove", NULL);
	json_t *saved =
	    i >= 0 ? json_object_get(json_array_get(f->faults, (size_t)i), "saved") : NULL;
	const char *names[] = {AUTOAPPROVE_BOOTSTRAP, AUTOAPPROVE_ROTATION};
	int rc = 0;

	for (size_t n = 0; n < 2 && rc == 0; n++) {
		json_t *b = NULL, *e;
		size_t k;
		int st;
		json_array_foreach(saved, k, e) if (!strcmp(jx_str(e, "metadata.name") ?: "",
		                                            names[n])) b = json_incref(e);
		if (!b)
			b = kubeadm_binding(names[n]);
		st = call(f, "POST", CRB_PATH, b, NULL);
		json_decref(b);
		if (st == 201 || st == 409)
			printf("clusterrolebinding %s %s\n", names[n],
			       st == 201 ? "created" : "was already there");
		else
			rc = -1;
	}
	if (rc == 0) {
		forget(f, "revoke-autoapprove", NULL);
		rc = faults_save(f);
	}
	return rc;
}

/* ---- deny-csrs: a process of its own ---------------------------------------------------- */

struct denier {
	struct fault_ctx *f;
	struct rest_watch *w;
	struct timer *relist;
};

static bool csr_decided(const json_t *csr)
{
	const json_t *c = json_object_get(json_object_get(csr, "status"), "conditions");
	return jx_condition_in(c, "Approved") || jx_condition_in(c, "Denied") ||
	       jx_condition_in(c, "Failed");
}

static void on_denied(void *arg, int status, json_t *body, const char *err)
{
	if (status == 200)
		LOG_INFO("\"Denied CSR\" csr=\"%s\"", jx_str(body, "metadata.name") ?: "");
	else if (status != 409)
		LOG_ERROR("\"Could not deny CSR\" status=%d err=\"%s\"", status,
		          err ? err : (jx_str(body, "message") ?: ""));
}

static void deny(struct denier *d, const json_t *csr)
{
	char path[512], now[TIME_BUF];
	json_t *copy;

	if (csr_decided(csr))
		return;
	copy = json_deep_copy(csr);
	time_format_rfc3339(clock_now(), now);
	if (!json_is_array(jx_get(copy, "status.conditions")))
		jx_set(copy, "status.conditions", json_array());
	json_array_append_new(jx_get(copy, "status.conditions"),
	                      json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "Denied",
	                                "status", "True", "reason", "CubeFaultDeny", "message",
	                                "This CSR was denied by cube fault deny-csrs.",
	                                "lastUpdateTime", now, "lastTransitionTime", now));
	snprintf(path, sizeof(path), "%s/%s/approval", CSR_PATH,
	         jx_str(csr, "metadata.name") ?: "");
	rest_do(d->f->api, "PUT", path, copy, on_denied, d);
	json_decref(copy);
}

static void denier_list(void *arg);

static void on_csr_event(void *arg, const char *type, json_t *obj)
{
	if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED"))
		deny(arg, obj);
}

static void on_watch_end(void *arg, int status, const char *err)
{
	struct denier *d = arg;
	d->w = NULL;
	timer_after(d->relist, NS_PER_SEC);
}

static void on_list(void *arg, int status, json_t *body, const char *err)
{
	struct denier *d = arg;
	char path[256];
	json_t *csr;
	size_t i;

	if (status != 200) {
		LOG_ERROR("\"Could not list CSRs\" status=%d err=\"%s\"", status, err ?: "");
		timer_after(d->relist, NS_PER_SEC);
		return;
	}
	json_array_foreach(json_object_get(body, "items"), i, csr) deny(d, csr);
	snprintf(path, sizeof(path), "%s?watch=true&resourceVersion=%s", CSR_PATH,
	         jx_str(body, "metadata.resourceVersion") ?: "0");
	d->w = rest_watch(d->f->api, path, on_csr_event, on_watch_end, d);
}

static void denier_list(void *arg)
{
	struct denier *d = arg;
	rest_do(d->f->api, "GET", CSR_PATH, NULL, on_list, d);
}

/* The child: deny until SIGTERM. */
static _Noreturn void denier_run(struct fault_ctx *f, const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	struct denier d = {.f = f};

	setsid();
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		log_set_fd(STDERR_FILENO);
	}
	f->loop = loop_new();
	if (!api(f)) {
		LOG_ERROR("\"deny-csrs cannot reach the cluster\" err=\"%s\"", err_msg());
		_exit(1);
	}
	d.relist = loop_timer(f->loop, denier_list, &d);
	LOG_INFO("\"Denying every CSR until stopped\" pid=%d", (int)getpid());
	timer_after(d.relist, 0);
	cli_run_until_signal(f->loop);
	_exit(0);
}

static int deny_csrs(struct fault_ctx *f)
{
	char *logs = file_join(f->dir, "logs"), *log = file_join(logs, "fault-deny-csrs.log");
	pid_t pid;
	int rc;

	if (find_record(f, "deny-csrs", NULL) >= 0) {
		printf("deny-csrs is already running\n");
		rc = 0;
		goto out;
	}
	file_mkdirs(logs, 0700);
	fflush(stdout);
	if ((pid = fork()) < 0) {
		rc = err_set(ERR_IO, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		denier_run(f, log);
	rc = record(f, "deny-csrs", "", json_pack("{s:i}", "pid", (int)pid));
	if (rc == 0)
		printf("deny-csrs: process %d denies every new CSR (log: %s)\n", (int)pid, log);
out:
	free(log);
	free(logs);
	return rc;
}

static void stop_denier(const json_t *e)
{
	pid_t pid = (pid_t)jx_int(e, "pid", 0);
	if (pid > 0 && kill(pid, SIGTERM) == 0)
		printf("deny-csrs: process %d stopped\n", (int)pid);
}

/* ---- the kubelet's process, network and clock -------------------------------------------- */

#define PARTITIONED "cut off the API server (network is unreachable)"
#define HEALED "reaches the API server again"

/* A supervisor command about node; on: the fault's record (its detail,
 * may be NULL) replaces any before it, else the fault is over. */
static int kubelet_op(struct fault_ctx *f, const char *kind, const char *node, json_t *words,
                      const char *said, bool on, json_t *detail)
{
	int rc = supervise(f, words, NULL);

	if (rc < 0) {
		json_decref(detail);
		return rc;
	}
	printf("%s: %s\n", node, said);
	forget(f, kind, node);
	if (on)
		return record(f, kind, node, detail);
	json_decref(detail);
	return faults_save(f);
}

static int clock_skew(struct fault_ctx *f, const char *node, const char *dur)
{
	int64_t ns;
	char num[32], buf[128];

	if (duration_parse(dur, &ns) < 0)
		return -1;
	snprintf(num, sizeof(num), "%lld", (long long)ns);
	snprintf(buf, sizeof(buf), "clock %s %s", dur + (dur[0] == '-' || dur[0] == '+'),
	         ns > 0 ? "ahead" : "behind");
	return kubelet_op(f, "clock-skew", node, json_pack("[s, s, s]", "clock-skew", node, num),
	                  ns ? buf : "clock right again", ns != 0,
	                  /* ns: for cube up to put it back on a restarted process */
	                  ns ? json_pack("{s:s, s:s}", "detail", buf, "ns", num) : NULL);
}

/* ---- list and clear ------------------------------------------------------------------ */

static int list(struct fault_ctx *f)
{
	size_t i;
	json_t *e;

	if (json_array_size(f->faults) == 0) {
		printf("No faults in effect.\n");
		return 0;
	}
	printf("%-20s %-12s %-22s %s\n", "FAULT", "TARGET", "SINCE", "DETAIL");
	json_array_foreach(f->faults, i, e)
	{
		const char *kind = jx_str(e, "fault") ?: "?";
		char detail[600] = "";
		if (jx_str(e, "notAfter"))
			snprintf(detail, sizeof(detail), "NotAfter %s (%s)", jx_str(e, "notAfter"),
			         jx_str(e, "issued") ?: "");
		else if (jx_int(e, "pid", 0))
			snprintf(detail, sizeof(detail), "process %lld",
			         (long long)jx_int(e, "pid", 0));
		else if (jx_str(e, "detail"))
			snprintf(detail, sizeof(detail), "%s", jx_str(e, "detail"));
		else if (!strcmp(kind, "approver-off"))
			snprintf(detail, sizeof(detail), "--controllers without csrapproving");
		else if (!strcmp(kind, "revoke-autoapprove"))
			snprintf(detail, sizeof(detail), "%zu bindings deleted",
			         json_array_size(json_object_get(e, "saved")));
		printf("%-20s %-12s %-22s %s\n", kind,
		       *(jx_str(e, "target") ?: "") ? jx_str(e, "target") : "-",
		       jx_str(e, "since") ?: "", detail);
	}
	return 0;
}

static int said(int rc, const char *node, const char *what)
{
	if (rc == 0)
		printf("%s: %s\n", node, what);
	return rc;
}

static int restore_etcd_cert(struct fault_ctx *f, const json_t *e);

static int undo(struct fault_ctx *f, const json_t *e)
{
	const char *kind = jx_str(e, "fault") ?: "", *node = jx_str(e, "target") ?: "";

	if (!strcmp(kind, "expire-cert") || !strcmp(kind, "wrong-ca"))
		return restore_cert(f, e);
	if (!strcmp(kind, "disable-rotation"))
		return set_rotation(f, node, true);
	if (!strcmp(kind, "approver-off"))
		return set_controllers(f, jx_str(e, "restore") ?: "");
	if (!strcmp(kind, "deny-csrs")) {
		stop_denier(e);
		return 0;
	}
	if (!strcmp(kind, "partition"))
		return said(supervise(f, json_pack("[s, s]", "heal", node), NULL), node, HEALED);
	if (!strcmp(kind, "stop-kubelet"))
		return said(supervise(f, json_pack("[s, s, s]", "kubelet", "start", node), NULL),
		            node, "kubelet started");
	if (!strcmp(kind, "clock-skew"))
		return said(supervise(f, json_pack("[s, s, s]", "clock-skew", node, "0"), NULL),
		            node, "clock right again");
	if (!strcmp(kind, "kill-etcd") || !strcmp(kind, "kill-apiserver") || !strcmp(kind, "kill"))
		return said(supervise(f, json_pack("[s, s]", "start", node), NULL), node,
			    "started again");
	if (!strcmp(kind, "expire-etcd-cert"))
		return restore_etcd_cert(f, e);
	return 0; /* revoke-autoapprove: restore_autoapprove reads the record */
}

static int clear(struct fault_ctx *f)
{
	int rc = 0, i;

	if (find_record(f, "revoke-autoapprove", NULL) >= 0 && restore_autoapprove(f) < 0) {
		fprintf(stderr, "error: %s\n", err_msg());
		rc = -1;
	}
	for (i = (int)json_array_size(f->faults) - 1; i >= 0; i--) {
		json_t *e = json_incref(json_array_get(f->faults, (size_t)i));
		if (undo(f, e) < 0) {
			fprintf(stderr, "error: %s: %s\n", jx_str(e, "fault"), err_msg());
			rc = -1;
		} else {
			json_array_remove(f->faults, (size_t)i);
		}
		json_decref(e);
	}
	if (faults_save(f) < 0)
		return -1;
	if (rc == 0)
		printf("No faults in effect.\n");
	return rc == 0 ? 0
	               : err_set(ERR_IO, "some faults could not be undone (still in faults.json)");
}

/* ---- the HA layout's faults (cube up --ha, ha.h) ----------------------------------------- */

/* "etcd1" from "1" or "etcd1"; prefix "" takes the name as it is. */
static void component_name(const char *prefix, const char *arg, char *out, size_t n)
{
	bool digits = *arg && strspn(arg, "0123456789") == strlen(arg);
	snprintf(out, n, "%s%s", digits ? prefix : "", arg);
}

static int kill_component(struct fault_ctx *f, const char *kind, const char *name)
{
	int rc = supervise(f, json_pack("[s, s]", "kill", name), NULL);

	if (rc == 0)
		rc = record(f, kind, name, NULL);
	if (rc == 0)
		printf("%s: killed (SIGKILL); it stays down until `cube fault clear`\n", name);
	return rc;
}

/* The DNS names and IPs of cert's subjectAltName. */
static void sans_read(X509 *cert, struct strv *dns, struct strv *ips)
{
	GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);

	for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		char buf[64];
		if (g->type == GEN_DNS) {
			strv_push(dns, (const char *)ASN1_STRING_get0_data(g->d.dNSName));
		} else if (g->type == GEN_IPADD) {
			int len = ASN1_STRING_length(g->d.iPAddress);
			const unsigned char *b = ASN1_STRING_get0_data(g->d.iPAddress);
			if (inet_ntop(len == 4 ? AF_INET : AF_INET6, b, buf, sizeof(buf)))
				strv_push(ips, buf);
		}
	}
	GENERAL_NAMES_free(names);
}

/* MEMBER's serving certificate (etcd/<member>/server.crt), same key, subject
 * and SANs, signed by the etcd CA, NotAfter now + in_ns; member restarted. */
static int expire_etcd_cert(struct fault_ctx *f, const char *member, int64_t in_ns)
{
	char rel[128], when[TIME_BUF];
	char *crt, *keyf, *saved, *cacrt = file_join(f->dir, "pki/etcd/ca.crt");
	char *cakey = file_join(f->dir, "pki/etcd/ca.key"), *cn = NULL;
	struct strv orgs = STRV_INIT, dns = STRV_INIT, ips = STRV_INIT;
	X509 *cert, *ca = pki_cert_load(cacrt), *next = NULL;
	EVP_PKEY *key, *ca_key = pki_key_load(cakey);
	int64_t now = clock_now();
	int rc = 0;

	snprintf(rel, sizeof(rel), "etcd/%s/server.crt", member);
	crt = file_join(f->dir, rel);
	snprintf(rel, sizeof(rel), "etcd/%s/server.key", member);
	keyf = file_join(f->dir, rel);
	snprintf(rel, sizeof(rel), "etcd/%s/server.crt.pre-fault", member);
	saved = file_join(f->dir, rel);
	cert = pki_cert_load(crt);
	key = pki_key_load(keyf);
	if (!cert || !key || !ca || !ca_key) {
		rc = err_set(ERR_NOTFOUND,
		             "no etcd member %s with its certificate in %s (is this a "
					   "`cube up --ha` cluster?)",
			     member, crt);
		goto out;
	}
	pki_name_read(X509_get_subject_name(cert), &cn, &orgs);
	sans_read(cert, &dns, &ips);
	struct pki_cert_spec spec = {
	    .cn = cn,
	    .orgs = (const char *const *)orgs.v,
	    .dns = (const char *const *)dns.v,
	    .ips = (const char *const *)ips.v,
	    .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT | PKI_U_SERVER_AUTH |
		      PKI_U_CLIENT_AUTH,
	    .not_before_ns = now - NS_PER_HOUR,
	    .not_after_ns = now + in_ns,
	};
	/* The certificate before the first fault is the one clear restores. */
	if ((!file_exists(saved) && rename(crt, saved) < 0) ||
	    !(next = pki_cert_new(&spec, key, ca, ca_key)) || pki_cert_save(crt, next) < 0) {
		rc = err_wrap(ERR_IO, "a new serving certificate for %s", member);
		goto out;
	}
	if ((rc = record(f, "expire-etcd-cert", member,
			 json_pack("{s:s, s:s}", "restore", saved, "notAfter",
				   time_format_rfc3339(now + in_ns, when)))) < 0)
		goto out;
	printf("%s: serving certificate replaced (CN=%s, issuer etcd-ca, NotAfter %s)\n", member,
	       cn, when);
	if ((rc = supervise(f, json_pack("[s, s]", "restart", member), NULL)) == 0)
		printf("%s: restarted to serve it\n", member);
out:
	X509_free(cert);
	X509_free(ca);
	X509_free(next);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
	strv_free(&orgs);
	strv_free(&dns);
	strv_free(&ips);
	free(cn);
	free(crt);
	free(keyf);
	free(saved);
	free(cacrt);
	free(cakey);
	return rc;
}

static int restore_etcd_cert(struct fault_ctx *f, const json_t *e)
{
	const char *member = jx_str(e, "target") ?: "", *saved = jx_str(e, "restore") ?: "";
	char rel[128], *crt;
	int rc;

	snprintf(rel, sizeof(rel), "etcd/%s/server.crt", member);
	crt = file_join(f->dir, rel);
	rc = rename(saved, crt) < 0 && file_exists(saved)
		 ? err_set(ERR_IO, "%s: %s", saved, strerror(errno))
		 : 0;
	free(crt);
	if (rc == 0)
		rc = said(supervise(f, json_pack("[s, s]", "restart", member), NULL), member,
			  "serving certificate restored, member restarted");
	return rc;
}

/* ---- the command ------------------------------------------------------------------------- */

/* The fault's words after its name: flags (--in, --data-dir) may come
 * anywhere among them; "-10m" is a word (a negative skew), not a flag. */
struct fault_args {
	const char *v[4];
	int n;
	int64_t in_ns;
};

static int fault_args(struct fault_ctx *f, int argc, char **argv, struct fault_args *a)
{
	for (int i = 0; i < argc; i++) {
		const char *w = argv[i], *val = NULL;
		bool in = !strncmp(w, "--in", 4) && (!w[4] || w[4] == '=');
		bool dir = !strncmp(w, "--data-dir", 10) && (!w[10] || w[10] == '=');

		if (in || dir) {
			val =
			    strchr(w, '=') ? strchr(w, '=') + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!val)
				return cli_usage_error("fault", "flag %s needs a value", w);
			if (dir)
				f->dir = val;
			else if (duration_parse(val, &a->in_ns) < 0 || a->in_ns < 0)
				return cli_usage_error("fault", "invalid --in \"%s\"", val);
		} else if (w[0] == '-' && w[1] == '-') {
			return cli_usage_error("fault", "unknown flag %s", w);
		} else if (a->n < 4) {
			a->v[a->n++] = w;
		} else {
			return cli_usage_error("fault", "unexpected argument \"%s\"", w);
		}
	}
	return 0;
}

static int run_fault(struct fault_ctx *f, const char *fault, const struct fault_args *args)
{
	static const struct {
		const char *name, *what;
		int args;
	} table[] = {
	    {"expire-cert", "NODE", 1},
	    {"expire-all", "", 0},
	    {"wrong-ca", "NODE", 1},
	    {"disable-rotation", "NODE", 1},
	    {"approver", "off|on", 1},
	    {"revoke-autoapprove", "", 0},
	    {"restore-autoapprove", "", 0},
	    {"deny-csrs", "", 0},
	    {"partition", "NODE", 1},
	    {"heal", "NODE", 1},
	    {"stop-kubelet", "NODE", 1},
	    {"clock-skew", "NODE DUR", 2},
	    {"kill-etcd", "MEMBER", 1},
	    {"kill-apiserver", "N", 1},
	    {"kill", "NAME", 1},
	    {"expire-etcd-cert", "MEMBER", 1},
	    {"list", "", 0},
	    {"clear", "", 0},
	};
	const char *a = args->v[0], *b = args->v[1];
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]) && strcmp(table[i].name, fault); i++)
		;
	if (i == sizeof(table) / sizeof(table[0]))
		return cli_usage_error("fault", "unknown fault \"%s\"", fault);
	if (args->n < table[i].args)
		return cli_usage_error("fault", "%s needs %s", fault, table[i].what);
	if (args->n > table[i].args)
		return cli_usage_error("fault", "unexpected argument \"%s\"",
		                       args->v[table[i].args]);
	if (!strcmp(fault, "expire-cert"))
		return expire_cert(f, a, args->in_ns);
	if (!strcmp(fault, "expire-all"))
		return expire_all(f, args->in_ns);
	if (!strcmp(fault, "wrong-ca"))
		return wrong_ca(f, a);
	if (!strcmp(fault, "disable-rotation")) {
		int rc = set_rotation(f, a, false);
		return rc ? rc : record(f, "disable-rotation", a, NULL);
	}
	if (!strcmp(fault, "approver"))
		return approver(f, a);
	if (!strcmp(fault, "revoke-autoapprove"))
		return revoke_autoapprove(f);
	if (!strcmp(fault, "restore-autoapprove"))
		return restore_autoapprove(f);
	if (!strcmp(fault, "deny-csrs"))
		return deny_csrs(f);
	if (!strcmp(fault, "partition") || !strcmp(fault, "heal"))
		return kubelet_op(f, "partition", a, json_pack("[s, s]", fault, a),
		                  *fault == 'p' ? PARTITIONED : HEALED, *fault == 'p', NULL);
	if (!strcmp(fault, "stop-kubelet"))
		return kubelet_op(f, "stop-kubelet", a,
		                  json_pack("[s, s, s]", "kubelet", "stop", a), "kubelet stopped",
		                  true, NULL);
	if (!strcmp(fault, "clock-skew"))
		return clock_skew(f, a, b);
	if (!strcmp(fault, "kill-etcd") || !strcmp(fault, "kill-apiserver") ||
	    !strcmp(fault, "kill") || !strcmp(fault, "expire-etcd-cert")) {
		char name[64];
		component_name(!strcmp(fault, "kill-apiserver") ? "apiserver"
			       : !strcmp(fault, "kill")         ? ""
								: "etcd",
			       a, name, sizeof(name));
		if (!strcmp(fault, "expire-etcd-cert"))
			return expire_etcd_cert(f, name, args->in_ns);
		return kill_component(f, fault, name);
	}
	if (!strcmp(fault, "list"))
		return list(f);
	return clear(f);
}

int cmd_fault(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"data-dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct fault_ctx f = {.dir = "cube-data"};
	struct fault_args args = {0};
	const char *fault;
	int c, rc;

	/* "+": stop at the fault's name; its own words are read below. */
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			f.dir = optarg;
			break;
		case 'h':
			return cli_help(fault_usage);
		default:
			return cli_bad_flag("fault", argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("fault", "which fault? (cube fault --help lists them)");
	fault = argv[optind++];
	if (!strcmp(fault, "--help") || !strcmp(fault, "help"))
		return cli_help(fault_usage);
	if ((rc = fault_args(&f, argc - optind, argv + optind, &args)))
		return rc;
	f.sock = control_path(f.dir);
	f.loop = loop_new();
	faults_load(&f);
	rc = run_fault(&f, fault, &args);
	json_decref(f.faults);
	rest_client_free(f.api);
	loop_free(f.loop);
	free(f.sock);
	if (rc > 0)
		return rc; /* a usage error, already printed */
	return rc < 0 ? cli_fail("%s", err_msg()) : 0;
}

int cmd_restart(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"data-dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct fault_ctx f = {.dir = "cube-data"};
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			f.dir = optarg;
			break;
		case 'h':
			return cli_help(restart_usage);
		default:
			return cli_bad_flag("restart", argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("restart", "what? a node, controller-manager or scheduler");
	f.sock = control_path(f.dir);
	for (int i = optind; i < argc && rc == 0; i++) {
		const char *name = argv[i];
		bool cp = !strcmp(name, "controller-manager") || !strcmp(name, "scheduler");
		rc = supervise(&f,
		               cp ? json_pack("[s, s]", name, "restart")
		                  : json_pack("[s, s, s]", "kubelet", "restart", name),
		               NULL);
		if (rc == 0)
			printf("%s%s restarted\n", name, cp ? "" : ": kubelet");
	}
	free(f.sock);
	return rc < 0 ? cli_fail("%s", err_msg()) : 0;
}
