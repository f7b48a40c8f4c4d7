/* The CSR controllers (csrapproving, csrsigning, csrcleaner) against a real
 * in-process API server on loopback: the API server, the REST clients that
 * play kubelets and admins, and the controller manager share one loop. CSRs
 * are created with the identities that create them in a real cluster (a
 * bootstrap token, a node's client certificate, the admin), and everything
 * is observed through the API, as kubectl would. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "apiserver/apiserver.h"
#include "client/rest.h"
#include "controllers/controllers.h"
#include "controllers/internal.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/metrics.h"
#include "base/timeutil.h"

#include <fcntl.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG_NODE "Auto approving kubelet client certificate after SubjectAccessReview."
#define MSG_SELF "Auto approving self kubelet client certificate after SubjectAccessReview."
#define CLIENT_KUBELET "kubernetes.io/kube-apiserver-client-kubelet"
#define SERVING "kubernetes.io/kubelet-serving"
#define APISERVER_CLIENT "kubernetes.io/kube-apiserver-client"

struct world {
	struct testenv env; /* the cluster dir, the API server, the admin client */
	char ca_path[128], ca_key_path[128];
	struct kubeconfig cm_kc;
	struct rest_client *boot, *node1;
	char *node1_cert, *node1_key, token[32];
	X509 *ca;
	EVP_PKEY *ca_key;
	struct controller_manager *cm;
};

/* ---- driving the loop --------------------------------------------------------------- */

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/* Run the loop for ms milliseconds (the timer makes sure it wakes up). */
static void spin_for(struct world *w, int ms)
{
	int done = 0;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	struct event *ev = evtimer_new(loop_base(w->env.loop), on_wake, &done);
	evtimer_add(ev, &tv);
	while (!done)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	event_free(ev);
}

struct result {
	int status, done;
	json_t *body;
};

static void on_result(void *arg, int status, json_t *body, const char *err)
{
	struct result *r = arg;
	r->status = status;
	r->body = json_incref(body);
	r->done = 1;
}

static json_t *call(struct world *w, struct rest_client *c, const char *method, const char *path,
		    json_t *body, int *status)
{
	struct result r = {0};
	int64_t deadline = clock_mono() + 10 * NS_PER_SEC;
	rest_do(c, method, path, body, on_result, &r);
	while (!r.done && clock_mono() < deadline)
		event_base_loop(loop_base(w->env.loop), EVLOOP_ONCE);
	assert_true(r.done);
	if (status)
		*status = r.status;
	return r.body;
}

static json_t *get_csr(struct world *w, const char *name, int *status)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", CSR_PATH, name);
	return call(w, w->env.admin, "GET", path, NULL, status);
}

/* Poll the CSR (through the API) until pred holds; fail after 10 s. */
static json_t *wait_csr(struct world *w, const char *name, bool (*pred)(const json_t *))
{
	int64_t deadline = clock_mono() + 10 * NS_PER_SEC;
	for (;;) {
		int st;
		json_t *csr = get_csr(w, name, &st);
		if (st == 200 && pred(csr))
			return csr;
		json_decref(csr);
		if (clock_mono() > deadline)
			fail_msg("CSR %s: condition not reached within 10 s", name);
		spin_for(w, 20);
	}
}

static bool issued(const json_t *csr)
{
	return csr_issued(csr);
}

static bool failed(const json_t *csr)
{
	return csr_condition_true(csr, "Failed");
}

static bool approved(const json_t *csr)
{
	return csr_has_condition(csr, "Approved");
}

/* Still Pending: no conditions, no certificate. */
static void assert_pending(struct world *w, const char *name)
{
	int st;
	json_t *csr = get_csr(w, name, &st);
	assert_int_equal(st, 200);
	if (json_array_size(jx_get(csr, "status.conditions")) != 0 || csr_issued(csr)) {
		char *text = jx_dump(csr);
		fail_msg("CSR %s is not pending: %s", name, text);
	}
	json_decref(csr);
}

/* ---- objects ------------------------------------------------------------------------- */

/* base64 of a PEM CSR for a fresh key (RSA when rsa). */
static char *request_b64(const char *cn, const char *const *orgs, const char *const *dns,
			 const char *const *ips, bool rsa)
{
	EVP_PKEY *key = pki_key_new(rsa ? PKI_KEY_RSA : PKI_KEY_ECDSA);
	X509_REQ *req = pki_csr_new(key, cn, orgs, dns, ips, 0);
	char *pem, *b64;
	assert_non_null(req);
	pem = pki_csr_pem(req);
	b64 = b64_encode(pem, strlen(pem));
	free(pem);
	X509_REQ_free(req);
	EVP_PKEY_free(key);
	return b64;
}

static const char *const NODES[] = {"system:nodes", NULL};

/* usages: NULL-terminated; expiration < 0 leaves spec.expirationSeconds out. */
static json_t *csr_object(const char *name, const char *request, const char *signer,
			  const char *const *usages, int expiration)
{
	json_t *u = json_array();
	json_t *obj;
	for (size_t i = 0; usages[i]; i++)
		json_array_append_new(u, json_string(usages[i]));
	obj = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:o}}", "apiVersion",
			"certificates.k8s.io/v1", "kind", "CertificateSigningRequest", "metadata",
			"name", name, "spec", "request", request, "signerName", signer, "usages", u);
	if (expiration >= 0)
		jx_set(obj, "spec.expirationSeconds", json_integer(expiration));
	return obj;
}

static const char *const CLIENT_EC[] = {"digital signature", "client auth", NULL};
static const char *const CLIENT_RSA[] = {"digital signature", "key encipherment", "client auth",
					 NULL};
static const char *const SERVING_EC[] = {"digital signature", "server auth", NULL};

/* Create a CSR as `c` (whose identity the server records in spec). */
static void create(struct world *w, struct rest_client *c, const char *name, const char *cn,
		   const char *const *orgs, const char *const *dns, const char *const *ips,
		   const char *signer, const char *const *usages, int expiration, bool rsa)
{
	char *req = request_b64(cn, orgs, dns, ips, rsa);
	json_t *obj = csr_object(name, req, signer, usages, expiration), *body;
	int st;

	body = call(w, c, "POST", CSR_PATH, obj, &st);
	if (st != 201) {
		char *text = jx_dump(body);
		fail_msg("creating CSR %s: HTTP %d %s", name, st, text);
	}
	json_decref(body);
	json_decref(obj);
	free(req);
}

/* Add a condition through /approval, as kubectl certificate approve|deny does. */
static void set_approval(struct world *w, const char *name, const char *type, const char *reason)
{
	char path[256];
	int st;
	json_t *csr = get_csr(w, name, &st), *next, *body;
	assert_int_equal(st, 200);
	next = csr_with_condition(csr, type, reason, "set by the test");
	snprintf(path, sizeof(path), "%s/%s/approval", CSR_PATH, name);
	body = call(w, w->env.admin, "PUT", path, next, &st);
	assert_int_equal(st, 200);
	json_decref(body);
	json_decref(next);
	json_decref(csr);
}

/* The issued certificate, parsed. */
static X509 *certificate_of(const json_t *csr)
{
	size_t len;
	char *pem = csr_certificate_pem(csr, &len);
	X509 *cert;
	assert_non_null(pem);
	assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
	cert = pki_cert_parse(pem, len);
	assert_non_null(cert);
	free(pem);
	return cert;
}

static const json_t *condition(const json_t *csr, const char *type)
{
	json_t *c;
	size_t i;
	json_array_foreach(jx_get(csr, "status.conditions"), i, c)
	{
		if (!strcmp(jx_str(c, "type") ?: "", type))
			return c;
	}
	return NULL;
}

/* ---- the world --------------------------------------------------------------------------- */

static void start_cm(struct world *w, bool serving, const char *controllers)
{
	struct controller_manager_opts o;
	controller_manager_opts_default(&o);
	o.serving.port = 0; /* tests run side by side: no fixed port */
	o.kc = &w->cm_kc;
	o.server = w->env.server;
	o.cluster_signing_cert_file = w->ca_path;
	o.cluster_signing_key_file = w->ca_key_path;
	o.approve_kubelet_serving = serving;
	o.use_service_account_credentials = true; /* as kubeadm runs it */
	o.cleaner_period_ns = 100 * NS_PER_MS;
	if (controllers)
		o.controllers = controllers;
	w->cm = controller_manager_new(w->env.loop, &o);
	assert_non_null(w->cm);
	{
		int64_t deadline = clock_mono() + 10 * NS_PER_SEC;
		while (!controller_manager_synced(w->cm) && clock_mono() < deadline)
			spin_for(w, 10);
	}
	assert_true(controller_manager_synced(w->cm));
}

static void restart_cm(struct world *w, bool serving, const char *controllers)
{
	controller_manager_free(w->cm);
	w->cm = NULL;
	start_cm(w, serving, controllers);
}

/* CN=system:node:<node>, O=system:nodes, signed by the cluster CA for a year. */
static void node_identity(struct world *w, const char *node, char **cert_pem, char **key_pem)
{
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	char cn[128];
	X509_REQ *req;
	X509 *cert;
	struct pki_sign_policy pol = {.ttl_ns = 365 * NS_PER_DAY,
				      .backdate_ns = PKI_BACKDATE_NS,
				      .short_ns = PKI_SHORT_NS,
				      .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH};

	snprintf(cn, sizeof(cn), "system:node:%s", node);
	req = pki_csr_new(key, cn, NODES, NULL, NULL, 0);
	cert = pki_csr_sign(req, w->ca, w->ca_key, &pol);
	assert_non_null(cert);
	*cert_pem = pki_cert_pem(cert);
	*key_pem = pki_key_pem(key);
	X509_free(cert);
	X509_REQ_free(req);
	EVP_PKEY_free(key);
}

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	char path[160], tokfile[128], *tok;
	struct rest_config rc = {0};

	/* Quiet unless asked: CUBE_TEST_V=N shows the components' klog lines. */
	if (getenv("CUBE_TEST_V"))
		log_set_verbosity(atoi(getenv("CUBE_TEST_V")));
	else
		log_set_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	testenv_start(&w->env, "csrctl");
	snprintf(w->ca_path, sizeof(w->ca_path), "%s/pki/ca.crt", w->env.dir);
	snprintf(w->ca_key_path, sizeof(w->ca_key_path), "%s/pki/ca.key", w->env.dir);
	snprintf(tokfile, sizeof(tokfile), "%s/pki/bootstrap-token", w->env.dir);
	w->ca = pki_cert_load(w->ca_path);
	w->ca_key = pki_key_load(w->ca_key_path);
	assert_non_null(w->ca);
	assert_non_null(w->ca_key);

	snprintf(path, sizeof(path), "%s/controller-manager.conf", w->env.dir);
	assert_int_equal(kubeconfig_load(path, &w->cm_kc), 0);

	/* A kubelet bootstrapping with the cluster's token. */
	assert_int_equal(file_read(tokfile, &tok, NULL, 1024), 0);
	tok[strcspn(tok, "\r\n")] = '\0';
	snprintf(w->token, sizeof(w->token), "%s", tok);
	free(tok);
	rc.server = w->env.server;
	rc.ca_pem = w->env.admin_kc.ca_data;
	rc.token = w->token;
	rc.user_agent = "kubelet/bootstrap";
	w->boot = rest_client_new(w->env.loop, &rc);
	assert_non_null(w->boot);

	/* A kubelet renewing with its own client certificate. */
	node_identity(w, "n1", &w->node1_cert, &w->node1_key);
	memset(&rc, 0, sizeof(rc));
	rc.server = w->env.server;
	rc.ca_pem = w->env.admin_kc.ca_data;
	rc.cert_pem = w->node1_cert;
	rc.key_pem = w->node1_key;
	rc.user_agent = "kubelet/n1";
	w->node1 = rest_client_new(w->env.loop, &rc);
	assert_non_null(w->node1);

	start_cm(w, false, NULL);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;

	clock_set_offset(0);
	controller_manager_free(w->cm);
	rest_client_free(w->boot);
	rest_client_free(w->node1);
	kubeconfig_free(&w->cm_kc);
	X509_free(w->ca);
	EVP_PKEY_free(w->ca_key);
	free(w->node1_cert);
	free(w->node1_key);
	testenv_stop(&w->env);
	free(w);
	return 0;
}

/* ---- tests --------------------------------------------------------------------------------- */

/* TLS bootstrap: a token-authenticated kubelet's CSR is approved as
 * "nodeclient" and issued; the certificate is the CSR's subject, signed by
 * the cluster CA, valid for --cluster-signing-duration. */
static void test_bootstrap_csr_approved_and_issued(void **state)
{
	struct world *w = *state;
	json_t *csr;
	const json_t *cond;
	X509 *cert;
	struct pki_cert_info info;
	char want_user[64];
	int64_t t;

	create(w, w->boot, "node-csr-boot1", "system:node:boot1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	csr = wait_csr(w, "node-csr-boot1", issued);
	snprintf(want_user, sizeof(want_user), "system:bootstrap:%.6s", w->token);
	assert_string_equal(jx_str(csr, "spec.username"), want_user);
	assert_int_equal(json_array_size(jx_get(csr, "status.conditions")), 1);
	cond = condition(csr, "Approved");
	assert_non_null(cond);
	assert_string_equal(jx_str(cond, "status"), "True");
	assert_string_equal(jx_str(cond, "reason"), "AutoApproved");
	assert_string_equal(jx_str(cond, "message"), MSG_NODE);
	assert_int_equal(time_parse_rfc3339(jx_str(cond, "lastUpdateTime"), &t), 0);
	assert_true(llabs(t - clock_now()) < 60 * NS_PER_SEC);

	cert = certificate_of(csr);
	assert_int_equal(pki_verify_with(cert, w->ca, clock_now(), PKI_PURPOSE_CLIENT), 0);
	assert_int_equal(pki_cert_info(cert, &info), 0);
	assert_string_equal(info.cn, "system:node:boot1");
	assert_int_equal(info.orgs.n, 1);
	assert_string_equal(info.orgs.v[0], "system:nodes");
	assert_false(info.is_ca);
	assert_int_equal(info.usages, PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH);
	/* 8760h exactly: NotBefore backdated 5 min, NotAfter = now + TTL - 5 min. */
	assert_true(info.not_after_ns - info.not_before_ns == 8760 * NS_PER_HOUR);
	assert_true(info.not_before_ns <= clock_now() - 4 * NS_PER_MIN);
	pki_cert_info_free(&info);
	X509_free(cert);
	json_decref(csr);

	/* An RSA kubelet asks for key encipherment too: upstream accepts that set. */
	create(w, w->boot, "node-csr-rsa", "system:node:rsa1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_RSA, -1, true);
	csr = wait_csr(w, "node-csr-rsa", issued);
	assert_string_equal(jx_str(condition(csr, "Approved"), "message"), MSG_NODE);
	cert = certificate_of(csr);
	assert_int_equal(pki_verify_with(cert, w->ca, clock_now(), PKI_PURPOSE_CLIENT), 0);
	X509_free(cert);
	json_decref(csr);
}

/* Rotation: a node renewing with its own certificate is "selfnodeclient". */
static void test_node_renewal_is_selfnodeclient(void **state)
{
	struct world *w = *state;
	json_t *csr;
	X509 *cert;
	struct pki_cert_info info;

	create(w, w->node1, "csr-renew", "system:node:n1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	csr = wait_csr(w, "csr-renew", issued);
	assert_string_equal(jx_str(csr, "spec.username"), "system:node:n1");
	assert_string_equal(jx_str(condition(csr, "Approved"), "reason"), "AutoApproved");
	assert_string_equal(jx_str(condition(csr, "Approved"), "message"), MSG_SELF);
	cert = certificate_of(csr);
	assert_int_equal(pki_verify_with(cert, w->ca, clock_now(), PKI_PURPOSE_CLIENT), 0);
	assert_int_equal(pki_cert_info(cert, &info), 0);
	assert_string_equal(info.cn, "system:node:n1");
	pki_cert_info_free(&info);
	X509_free(cert);
	json_decref(csr);
}

/* What is not exactly a node client certificate request stays Pending
 * (never Denied), whoever asks. */
static void test_not_a_node_client_csr_stays_pending(void **state)
{
	struct world *w = *state;
	static const char *const wrong_o[] = {"system:masters", NULL};
	static const char *const two_o[] = {"system:nodes", "extra", NULL};
	static const char *const dns[] = {"boot2.example", NULL};
	static const char *const ips[] = {"10.0.0.2", NULL};
	static const char *const extra_usage[] = {"digital signature", "client auth",
						  "server auth", NULL};
	static const char *const no_ds[] = {"client auth", NULL};
	json_t *csr;

	create(w, w->boot, "bad-o", "system:node:boot2", wrong_o, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	create(w, w->boot, "bad-two-o", "system:node:boot2", two_o, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	create(w, w->boot, "bad-usage", "system:node:boot2", NODES, NULL, NULL, CLIENT_KUBELET,
	       extra_usage, -1, false);
	create(w, w->boot, "bad-usage-short", "system:node:boot2", NODES, NULL, NULL,
	       CLIENT_KUBELET, no_ds, -1, false);
	create(w, w->boot, "bad-dns", "system:node:boot2", NODES, dns, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	create(w, w->boot, "bad-ip", "system:node:boot2", NODES, NULL, ips, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	create(w, w->boot, "bad-cn", "bob", NODES, NULL, NULL, CLIENT_KUBELET, CLIENT_EC, -1,
	       false);
	/* Not the kubelet signer at all: the approver leaves it to a human. */
	create(w, w->boot, "other-signer", "system:node:boot2", NODES, NULL, NULL,
	       APISERVER_CLIENT, CLIENT_EC, -1, false);

	/* A good one created afterwards is done: the controllers have seen them all. */
	create(w, w->boot, "good", "system:node:boot2", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	json_decref(wait_csr(w, "good", issued));
	spin_for(w, 300);
	assert_pending(w, "bad-o");
	assert_pending(w, "bad-two-o");
	assert_pending(w, "bad-usage");
	assert_pending(w, "bad-usage-short");
	assert_pending(w, "bad-dns");
	assert_pending(w, "bad-ip");
	assert_pending(w, "bad-cn");
	assert_pending(w, "other-signer");

	/* A human approves the odd one: the signer then refuses it for its usages. */
	set_approval(w, "bad-usage", "Approved", "KubectlApprove");
	csr = wait_csr(w, "bad-usage", failed);
	assert_string_equal(jx_str(condition(csr, "Failed"), "reason"), "SignerValidationFailure");
	assert_string_equal(jx_str(condition(csr, "Failed"), "message"),
			    "usages did not match [client auth digital signature key encipherment]");
	assert_false(csr_issued(csr));
	json_decref(csr);
}

/* workqueue_retries_total{name="certificate"}: the certificate queues' retries. */
static long cert_queue_retries(struct world *w)
{
	static const char series[] = "workqueue_retries_total{name=\"certificate\"} ";
	char *text = metrics_render(w->cm->metrics), *at = strstr(text, series);
	long n = at ? strtol(at + strlen(series), NULL, 10) : 0;
	free(text);
	return n;
}

/* A valid node client request from someone kubeadm's bindings do not let
 * create nodeclient CSRs (here the controller manager) is recognized,
 * refused by the API server's SubjectAccessReview, and left Pending. It
 * comes back on upstream's certificate queue backoff, 0.2, 0.4, 0.8 s ...:
 * a few retries in the 0.3 s and more it is watched, where client-go's
 * default 5 ms steps would make seven. */
static void test_unauthorized_requestor_stays_pending(void **state)
{
	struct world *w = *state;
	struct kubeconfig kc = {0};
	struct rest_client *sched;
	char path[160];

	/* The controller manager, once a binding lets it create CSRs: none
	 * gives it nodeclient or selfnodeclient. */
	json_t *b = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s}]}", "apiVersion",
			      "rbac.authorization.k8s.io/v1", "kind", "ClusterRoleBinding",
			      "metadata", "name", "manager-makes-csrs", "roleRef", "apiGroup",
			      "rbac.authorization.k8s.io", "kind", "ClusterRole", "name",
			      "system:node-bootstrapper", "subjects", "kind", "User", "apiGroup",
			      "rbac.authorization.k8s.io", "name", "system:kube-controller-manager");
	int st;
	long retries;
	json_decref(call(w, w->env.admin, "POST",
			 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", b, &st));
	assert_int_equal(st, 201);
	json_decref(b);
	snprintf(path, sizeof(path), "%s/controller-manager.conf", w->env.dir);
	assert_int_equal(kubeconfig_load(path, &kc), 0);
	free(kc.server);
	kc.server = strdup(w->env.server);
	sched = rest_client_from_kubeconfig(w->env.loop, &kc, "test-scheduler");
	assert_non_null(sched);
	retries = cert_queue_retries(w);
	create(w, sched, "by-manager", "system:node:u1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	create(w, w->boot, "sentinel-u", "system:node:u2", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	json_decref(wait_csr(w, "sentinel-u", issued));
	spin_for(w, 300); /* a few of its backoff retries */
	assert_pending(w, "by-manager");
	retries = cert_queue_retries(w) - retries;
	assert_in_range(retries, 1, 5);
	rest_client_free(sched);
	kubeconfig_free(&kc);
}

static void create_node(struct world *w, const char *name, const char *ip)
{
	json_t *node = json_pack(
		"{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s},{s:s,s:s}]}}", "apiVersion", "v1", "kind", "Node",
		"metadata", "name", name, "status", "addresses", "type", "InternalIP", "address", ip,
		"type", "Hostname", "address", name);
	json_t *body;
	char path[128];
	int st;

	body = call(w, w->env.admin, "POST", "/api/v1/nodes", node, &st);
	assert_int_equal(st, 201);
	if (!jx_get(body, "status.addresses")) {
		/* The status is the kubelet's to write, through /status. */
		json_object_set(body, "status", json_object_get(node, "status"));
		snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
		json_decref(call(w, w->env.admin, "PUT", path, body, &st));
		assert_int_equal(st, 200);
	}
	json_decref(body);
	json_decref(node);
}

/* Serving certificates stay Pending unless --approve-kubelet-serving; with
 * it, only the node's own request for its own addresses is approved. */
static void test_serving_csrs(void **state)
{
	struct world *w = *state;
	static const char *const dns[] = {"n1", NULL};
	static const char *const ips[] = {"10.0.0.11", NULL};
	static const char *const other_ip[] = {"10.9.9.9", NULL};
	static const char *const other_dns[] = {"evil.example", NULL};
	json_t *csr;
	X509 *cert;

	create_node(w, "n1", "10.0.0.11");
	create(w, w->node1, "serving-default", "system:node:n1", NODES, dns, ips, SERVING,
	       SERVING_EC, -1, false);
	create(w, w->boot, "sentinel-1", "system:node:s1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	json_decref(wait_csr(w, "sentinel-1", issued));
	spin_for(w, 300);
	assert_pending(w, "serving-default");

	restart_cm(w, true, NULL);
	/* The one left pending before is approved now, on the relist. */
	csr = wait_csr(w, "serving-default", issued);
	assert_string_equal(jx_str(condition(csr, "Approved"), "reason"), "AutoApproved");
	cert = certificate_of(csr);
	assert_int_equal(pki_verify_with(cert, w->ca, clock_now(), PKI_PURPOSE_SERVER), 0);
	X509_free(cert);
	json_decref(csr);

	create(w, w->node1, "serving-other-ip", "system:node:n1", NODES, dns, other_ip, SERVING,
	       SERVING_EC, -1, false);
	create(w, w->node1, "serving-other-dns", "system:node:n1", NODES, other_dns, ips, SERVING,
	       SERVING_EC, -1, false);
	create(w, w->node1, "serving-client-usage", "system:node:n1", NODES, dns, ips, SERVING,
	       CLIENT_EC, -1, false);
	/* The admin asking for the node's serving certificate is not the node. */
	create(w, w->env.admin, "serving-by-admin", "system:node:n1", NODES, dns, ips, SERVING,
	       SERVING_EC, -1, false);
	/* Nor is a bootstrap token. */
	create(w, w->boot, "serving-by-token", "system:node:n1", NODES, dns, ips, SERVING,
	       SERVING_EC, -1, false);
	create(w, w->node1, "serving-good", "system:node:n1", NODES, dns, ips, SERVING, SERVING_EC,
	       -1, false);
	json_decref(wait_csr(w, "serving-good", issued));
	spin_for(w, 300);
	assert_pending(w, "serving-other-ip");
	assert_pending(w, "serving-other-dns");
	assert_pending(w, "serving-client-usage");
	assert_pending(w, "serving-by-admin");
	assert_pending(w, "serving-by-token");
}

/* spec.expirationSeconds shortens the certificate; short ones keep their
 * whole life after the 5 min backdate; the floor is 10 min. */
static void test_expiration_seconds(void **state)
{
	struct world *w = *state;
	json_t *csr, *probe;
	X509 *cert;

	create(w, w->boot, "one-hour", "system:node:e1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, 3600, false);
	csr = wait_csr(w, "one-hour", issued);
	cert = certificate_of(csr);
	assert_true(pki_cert_not_after(cert) - pki_cert_not_before(cert) ==
		    3600 * NS_PER_SEC + 5 * NS_PER_MIN);
	X509_free(cert);
	json_decref(csr);

	create(w, w->boot, "ten-minutes", "system:node:e2", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, 600, false);
	csr = wait_csr(w, "ten-minutes", issued);
	cert = certificate_of(csr);
	assert_true(pki_cert_not_after(cert) - pki_cert_not_before(cert) ==
		    600 * NS_PER_SEC + 5 * NS_PER_MIN);
	X509_free(cert);
	json_decref(csr);

	/* The API refuses < 600 s, so the signer's floor is checked directly. */
	probe = json_pack("{s:{s:i}}", "spec", "expirationSeconds", 300);
	assert_true(csrsigning_duration(8760 * NS_PER_HOUR, probe) == 600 * NS_PER_SEC);
	json_decref(probe);
	probe = json_pack("{s:{s:I}}", "spec", "expirationSeconds", (json_int_t)(10 * 365 * 86400));
	assert_true(csrsigning_duration(8760 * NS_PER_HOUR, probe) == 8760 * NS_PER_HOUR);
	json_decref(probe);
	probe = json_pack("{s:{}}", "spec");
	assert_true(csrsigning_duration(2 * NS_PER_HOUR, probe) == 2 * NS_PER_HOUR);
	json_decref(probe);
}

/* Only approved, not denied, not failed CSRs are signed; each signer keeps
 * its own rules. */
static void test_denied_is_never_signed(void **state)
{
	struct world *w = *state;
	static const char *const server_usage[] = {"server auth", NULL};
	static const char *const ke_only[] = {"key encipherment", NULL};
	static const char *const alice_o[] = {"team-a", NULL};
	json_t *csr;
	X509 *cert;
	struct pki_cert_info info;

	create(w, w->env.admin, "alice-denied", "alice", alice_o, NULL, NULL, APISERVER_CLIENT,
	       CLIENT_EC, -1, false);
	create(w, w->env.admin, "alice-approved", "alice", alice_o, NULL, NULL, APISERVER_CLIENT,
	       CLIENT_EC, -1, false);
	create(w, w->env.admin, "alice-server", "alice", alice_o, NULL, NULL, APISERVER_CLIENT,
	       server_usage, -1, false);
	create(w, w->env.admin, "alice-no-client", "alice", alice_o, NULL, NULL, APISERVER_CLIENT,
	       ke_only, -1, false);
	set_approval(w, "alice-denied", "Denied", "KubectlDeny");
	set_approval(w, "alice-approved", "Approved", "KubectlApprove");
	set_approval(w, "alice-server", "Approved", "KubectlApprove");
	set_approval(w, "alice-no-client", "Approved", "KubectlApprove");

	csr = wait_csr(w, "alice-approved", issued);
	cert = certificate_of(csr);
	assert_int_equal(pki_cert_info(cert, &info), 0);
	assert_string_equal(info.cn, "alice");
	assert_string_equal(info.orgs.v[0], "team-a");
	pki_cert_info_free(&info);
	X509_free(cert);
	json_decref(csr);

	csr = wait_csr(w, "alice-server", failed);
	assert_string_equal(jx_str(condition(csr, "Failed"), "reason"), "SignerValidationFailure");
	assert_string_equal(jx_str(condition(csr, "Failed"), "message"),
			    "invalid usage for client certificate: server auth");
	assert_false(csr_issued(csr));
	json_decref(csr);
	csr = wait_csr(w, "alice-no-client", failed);
	assert_string_equal(jx_str(condition(csr, "Failed"), "message"),
			    "missing required usage for client certificate: client auth");
	json_decref(csr);

	spin_for(w, 300);
	csr = get_csr(w, "alice-denied", NULL);
	assert_false(csr_issued(csr));
	assert_int_equal(json_array_size(jx_get(csr, "status.conditions")), 1);
	json_decref(csr);

	/* kube-state-metrics' CSR series and the certificate queue's. */
	char *text = metrics_render(w->cm->metrics);
	static const char *const want[] = {
	    "kube_certificatesigningrequest_condition{certificatesigningrequest=\"alice-denied\","
	    "signer_name=\"kubernetes.io/kube-apiserver-client\",condition=\"denied\"} 1\n",
	    "kube_certificatesigningrequest_condition{certificatesigningrequest=\"alice-denied\","
	    "signer_name=\"kubernetes.io/kube-apiserver-client\",condition=\"approved\"} 0\n",
	    "kube_certificatesigningrequest_condition{certificatesigningrequest=\"alice-server\","
	    "signer_name=\"kubernetes.io/kube-apiserver-client\",condition=\"approved\"} 1\n",
	    "kube_certificatesigningrequest_condition{certificatesigningrequest=\"alice-approved\","
	    "signer_name=\"kubernetes.io/kube-apiserver-client\",condition=\"approved\"} 1\n",
	    "kube_certificatesigningrequest_created{certificatesigningrequest=\"alice-approved\","
	    "signer_name=\"kubernetes.io/kube-apiserver-client\"} 1.",
	    "workqueue_adds_total{name=\"certificate\"} ",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(text, want[i]))
			fail_msg("no \"%s\" in\n%s", want[i], text);
	free(text);
}

/* The cleaner deletes, through the API, an issued CSR approved more than an
 * hour ago and a pending one older than a day; younger ones stay. */
static void test_cleaner(void **state)
{
	struct world *w = *state;
	static const char *const wrong_o[] = {"system:masters", NULL};
	int64_t deadline;
	int st;

	create(w, w->boot, "old-issued", "system:node:c1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	create(w, w->boot, "old-pending", "system:node:c2", wrong_o, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	json_decref(wait_csr(w, "old-issued", issued));
	spin_for(w, 300); /* several cleaner passes: nothing is old yet */
	json_decref(get_csr(w, "old-issued", &st));
	assert_int_equal(st, 200);

	/* Two hours later (the API server stamps times from the same clock). */
	clock_set_offset(2 * NS_PER_HOUR);
	deadline = clock_mono() + 10 * NS_PER_SEC;
	do {
		spin_for(w, 50);
		json_decref(get_csr(w, "old-issued", &st));
	} while (st == 200 && clock_mono() < deadline);
	assert_int_equal(st, 404);
	assert_pending(w, "old-pending");

	/* A CSR approved just now is kept even at this clock. */
	create(w, w->boot, "young-issued", "system:node:c3", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	json_decref(wait_csr(w, "young-issued", issued));
	spin_for(w, 300);
	json_decref(get_csr(w, "young-issued", &st));
	assert_int_equal(st, 200);

	clock_set_offset(25 * NS_PER_HOUR);
	deadline = clock_mono() + 10 * NS_PER_SEC;
	do {
		spin_for(w, 50);
		json_decref(get_csr(w, "old-pending", &st));
	} while (st == 200 && clock_mono() < deadline);
	assert_int_equal(st, 404);
	clock_set_offset(0);
}

/* Denied and Failed CSRs go an hour after that condition was last updated
 * (upstream's deniedExpiration for both), not before. */
static void test_cleaner_denied_and_failed(void **state)
{
	struct world *w = *state;
	static const char *const server_usage[] = {"server auth", NULL};
	static const char *const team[] = {"team-a", NULL};
	int64_t deadline;
	int st, st2;

	create(w, w->env.admin, "bob-denied", "bob", team, NULL, NULL, APISERVER_CLIENT, CLIENT_EC,
	       -1, false);
	create(w, w->env.admin, "bob-failed", "bob", team, NULL, NULL, APISERVER_CLIENT,
	       server_usage, -1, false);
	set_approval(w, "bob-denied", "Denied", "KubectlDeny");
	set_approval(w, "bob-failed", "Approved", "KubectlApprove");
	json_decref(wait_csr(w, "bob-failed", failed));

	/* 59 minutes on: both are kept. */
	clock_set_offset(59 * NS_PER_MIN);
	spin_for(w, 300);
	json_decref(get_csr(w, "bob-denied", &st));
	json_decref(get_csr(w, "bob-failed", &st2));
	assert_int_equal(st, 200);
	assert_int_equal(st2, 200);

	/* 61 minutes on: both go. */
	clock_set_offset(61 * NS_PER_MIN);
	deadline = clock_mono() + 10 * NS_PER_SEC;
	do {
		spin_for(w, 50);
		json_decref(get_csr(w, "bob-denied", &st));
		json_decref(get_csr(w, "bob-failed", &st2));
	} while ((st == 200 || st2 == 200) && clock_mono() < deadline);
	assert_int_equal(st, 404);
	assert_int_equal(st2, 404);
	clock_set_offset(0);
}

/* An issued certificate past its NotAfter goes too, however recent the
 * approval (here: a 10 min certificate and a clock 20 min later). */
static void test_cleaner_expired_certificate(void **state)
{
	struct world *w = *state;
	json_t *csr;
	const json_t *cond;
	int64_t deadline;
	int st;

	create(w, w->boot, "short-lived", "system:node:x1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, 600, false);
	csr = wait_csr(w, "short-lived", issued);
	cond = condition(csr, "Approved");
	assert_non_null(jx_str(cond, "lastUpdateTime"));
	json_decref(csr);
	clock_set_offset(20 * NS_PER_MIN);
	deadline = clock_mono() + 10 * NS_PER_SEC;
	do {
		spin_for(w, 50);
		json_decref(get_csr(w, "short-lived", &st));
	} while (st == 200 && clock_mono() < deadline);
	assert_int_equal(st, 404);
	clock_set_offset(0);
}

/* The CA files are re-read when they change on disk: the next certificate
 * comes from the new CA. */
static void test_ca_reload(void **state)
{
	struct world *w = *state;
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	X509 *ca = pki_ca_new(key, "kubernetes-rotated", CLUSTER_CA_VALIDITY), *cert;
	char *pem;
	json_t *csr;

	create(w, w->boot, "before", "system:node:r1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	csr = wait_csr(w, "before", issued);
	cert = certificate_of(csr);
	assert_int_equal(pki_verify_with(cert, w->ca, clock_now(), PKI_PURPOSE_CLIENT), 0);
	X509_free(cert);
	json_decref(csr);

	pem = pki_key_pem(key);
	assert_int_equal(file_write_atomic(w->ca_key_path, pem, strlen(pem), 0600), 0);
	free(pem);
	pem = pki_cert_pem(ca);
	assert_int_equal(file_write_atomic(w->ca_path, pem, strlen(pem), 0644), 0);
	free(pem);

	create(w, w->boot, "after", "system:node:r2", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	csr = wait_csr(w, "after", issued);
	cert = certificate_of(csr);
	assert_int_equal(pki_verify_with(cert, ca, clock_now(), PKI_PURPOSE_CLIENT), 0);
	assert_int_not_equal(pki_verify_with(cert, w->ca, clock_now(), PKI_PURPOSE_CLIENT), 0);
	X509_free(cert);
	json_decref(csr);
	X509_free(ca);
	EVP_PKEY_free(key);
}

/* --controllers: names, aliases, "-name"; an unknown name is refused. */
static void test_controllers_flag(void **state)
{
	struct world *w = *state;
	json_t *csr;

	assert_int_equal(controller_manager_check_controllers("*"), 0);
	assert_int_equal(controller_manager_check_controllers("*,-csrcleaner"), 0);
	assert_int_equal(
		controller_manager_check_controllers("certificatesigningrequest-signing-controller"),
		0);
	assert_int_equal(controller_manager_check_controllers("csrsigning,nope"), ERR_INVALID);
	assert_string_equal(err_msg(), "\"nope\" is not in the list of known controllers");

	/* Without the approver, a bootstrap CSR waits for a human... */
	restart_cm(w, false, "*,-csrapproving");
	create(w, w->boot, "manual", "system:node:m1", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	spin_for(w, 300);
	assert_pending(w, "manual");
	/* ...and is signed once approved (kubectl certificate approve). */
	set_approval(w, "manual", "Approved", "KubectlApprove");
	csr = wait_csr(w, "manual", issued);
	assert_true(approved(csr));
	assert_string_equal(jx_str(condition(csr, "Approved"), "reason"), "KubectlApprove");
	json_decref(csr);

	/* Only the approver: approved, never issued. */
	restart_cm(w, false, "csrapproving");
	create(w, w->boot, "approve-only", "system:node:m2", NODES, NULL, NULL, CLIENT_KUBELET,
	       CLIENT_EC, -1, false);
	csr = wait_csr(w, "approve-only", approved);
	json_decref(csr);
	spin_for(w, 300);
	csr = get_csr(w, "approve-only", NULL);
	assert_false(csr_issued(csr));
	json_decref(csr);
}

/* Bad signing files stop the manager from starting, with upstream's words. */
static void test_bad_signing_files(void **state)
{
	struct world *w = *state;
	struct controller_manager_opts o;
	char missing[160];

	snprintf(missing, sizeof(missing), "%s/pki/nope.crt", w->env.dir);
	controller_manager_opts_default(&o);
	o.serving.port = 0; /* tests run side by side: no fixed port */
	o.kc = &w->cm_kc;
	o.server = w->env.server;
	o.cluster_signing_cert_file = missing;
	o.cluster_signing_key_file = w->ca_key_path;
	assert_null(controller_manager_new(w->env.loop, &o));
	assert_non_null(strstr(err_msg(), "error reading CA cert file"));
	assert_non_null(strstr(err_msg(), missing));

	/* Someone else's key. */
	{
		char other[160], *pem;
		EVP_PKEY *k = pki_key_new(PKI_KEY_ECDSA);
		snprintf(other, sizeof(other), "%s/pki/other.key", w->env.dir);
		pem = pki_key_pem(k);
		assert_int_equal(file_write_atomic(other, pem, strlen(pem), 0600), 0);
		free(pem);
		EVP_PKEY_free(k);
		o.cluster_signing_cert_file = w->ca_path;
		o.cluster_signing_key_file = other;
		assert_null(controller_manager_new(w->env.loop, &o));
		assert_non_null(strstr(err_msg(), "private key does not match public key"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bootstrap_csr_approved_and_issued, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_node_renewal_is_selfnodeclient, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_not_a_node_client_csr_stays_pending, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unauthorized_requestor_stays_pending, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_serving_csrs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiration_seconds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_denied_is_never_signed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cleaner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cleaner_expired_certificate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cleaner_denied_and_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ca_reload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_controllers_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_signing_files, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
