/*
 * The kubelet against a real in-process API server, on the virtual clock.
 * The test plays the CSR controllers itself (the controller manager is
 * another component): an informer on CSRs approves through .../approval
 * and signs with the cluster CA through .../status, with a TTL the test
 * chooses — 60 s certificates make rotation and expiry happen within a
 * minute of virtual time.
 *
 * Covered: TLS bootstrap (kubeconfig, dated 0600 pair, current symlink, no
 * temporary key left), registration and Ready status, the Lease, a pod
 * bound to the node going Running and being deleted, rotation at 70–90 %
 * of the lifetime with the client carrying on without a restart, the
 * serving certificate, the expired-certificate exit (255) and self-heal,
 * and hollow kubelets including taking over an existing Node.
 *
 * The kubelet's and API server's log goes to <tmp dir>/log; CUBE_TEST_LOG=1
 * sends it to stderr instead, CUBE_TEST_V=N raises the verbosity and
 * CUBE_TEST_KEEP=1 keeps the tmp dirs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "apiserver/apiserver.h"
#include "client/informer.h"
#include "client/rest.h"
#include "kubelet/kubelet.h"
#include "pki/certstore.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testassert.h"

#define CSRS "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define LEASE "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"

struct world {
	struct testenv env; /* the cluster dir, the API server, the admin client */
	char boot[128], log_path[128];
	X509 *ca;
	EVP_PKEY *ca_key;
	struct informer *csrs;
	int64_t client_ttl_ns, serving_ttl_ns; /* 0: leave that kind of CSR alone */
	bool only_bootstrap; /* approve only the bootstrap token's CSRs (selfnodeclient gone) */
	int signed_client, signed_serving;
	/* every CSR seen, with the virtual time it was first seen at */
	struct seen_csr {
		char name[96], user[96], signer[64];
		int64_t at;
		bool issued;
	} seen[64];
	int nseen;
	int exits, exit_status;
	int log_fd;
	struct kubelet *k;
};

/* ---- driving the loop ------------------------------------------------------------- */

#define pump(w, quiet) testenv_pump(&(w)->env, quiet)

#define SETTLE 25 /* × 2 ms */

/* Move virtual time forward in steps, letting I/O settle after each. */
static void advance(struct world *w, int64_t total, int64_t step)
{
	for (int64_t t = 0; t < total; t += step) {
		clock_advance(step);
		pump(w, SETTLE);
	}
}

typedef bool (*cond_fn)(struct world *w, void *arg);

/* Until cond holds, advancing virtual time by step up to max. */
static bool wait_for(struct world *w, cond_fn cond, void *arg, int64_t step, int64_t max)
{
	for (int64_t t = 0; t <= max; t += step) {
		pump(w, SETTLE);
		if (cond(w, arg))
			return true;
		clock_advance(step);
	}
	return cond(w, arg);
}

#define result testenv_result
#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)

static json_t *get(struct world *w, const char *path)
{
	struct result r = call(w, "GET", path, NULL);
	if (r.status != 200) {
		json_decref(r.body);
		return NULL;
	}
	return r.body;
}

/* ---- the test's CSR controller --------------------------------------------------------- */

static char *b64(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	return out;
}

static char *unb64(const char *s)
{
	size_t n = strlen(s), pad = 0;
	unsigned char *out = malloc(n + 1);
	int m = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
	while (n && s[n - 1] == '=' && pad < 2)
		n--, pad++;
	out[m - (int)pad] = '\0';
	return (char *)out;
}

static void ignore(void *arg, int status, json_t *body, const char *err)
{
}

static void approve(struct world *w, json_t *csr)
{
	json_t *copy = json_deep_copy(csr), *conds = jx_get(copy, "status.conditions");
	char path[512];

	if (!json_is_array(conds)) {
		conds = json_array();
		jx_set(copy, "status.conditions", conds);
	}
	json_array_append_new(conds, json_pack("{s:s,s:s,s:s,s:s}", "type", "Approved", "status",
					       "True", "reason", "KubectlApprove", "message",
					       "This CSR was approved by the test."));
	snprintf(path, sizeof(path), CSRS "/%s/approval", jx_str(csr, "metadata.name"));
	rest_do(w->env.admin, "PUT", path, copy, ignore, NULL);
	json_decref(copy);
}

static void sign(struct world *w, json_t *csr, int64_t ttl)
{
	char *pem = unb64(jx_str(csr, "spec.request")), *cert_pem, *enc, path[512];
	X509_REQ *req = pki_csr_parse(pem, strlen(pem));
	struct pki_sign_policy pol = {.ttl_ns = ttl, .backdate_ns = 0, .short_ns = PKI_SHORT_NS};
	json_t *u, *copy;
	size_t i;
	X509 *cert;

	assert_non_null(req);
	json_array_foreach(jx_get(csr, "spec.usages"), i, u)
	{
		unsigned bit;
		assert_int_equal(pki_usage_parse(json_string_value(u), &bit), 0);
		pol.usages |= bit;
	}
	cert = pki_csr_sign(req, w->ca, w->ca_key, &pol);
	assert_non_null(cert);
	cert_pem = pki_cert_pem(cert);
	enc = b64(cert_pem);
	copy = json_deep_copy(csr);
	jx_set_str(copy, "status.certificate", enc);
	snprintf(path, sizeof(path), CSRS "/%s/status", jx_str(csr, "metadata.name"));
	rest_do(w->env.admin, "PUT", path, copy, ignore, NULL);
	json_decref(copy);
	free(enc);
	free(cert_pem);
	X509_free(cert);
	X509_REQ_free(req);
	free(pem);
}

static struct seen_csr *record(struct world *w, const json_t *csr)
{
	const char *name = jx_str(csr, "metadata.name") ?: "";
	struct seen_csr *r;

	for (int i = 0; i < w->nseen; i++)
		if (!strcmp(w->seen[i].name, name))
			return &w->seen[i];
	assert_true(w->nseen < 64);
	r = &w->seen[w->nseen++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->user, sizeof(r->user), "%s", jx_str(csr, "spec.username") ?: "");
	snprintf(r->signer, sizeof(r->signer), "%s", jx_str(csr, "spec.signerName") ?: "");
	r->at = clock_now();
	return r;
}

static void csr_seen(void *arg, json_t *csr)
{
	struct world *w = arg;
	const char *signer = jx_str(csr, "spec.signerName");
	bool serving = signer && !strcmp(signer, "kubernetes.io/kubelet-serving");
	int64_t ttl = serving ? w->serving_ttl_ns : w->client_ttl_ns;
	struct seen_csr *r = record(w, csr);
	json_t *c;
	size_t i;
	bool approved = false;

	r->issued = jx_str(csr, "status.certificate") != NULL;
	if (!ttl || r->issued)
		return;
	if (w->only_bootstrap && strncmp(r->user, "system:bootstrap:", 17))
		return;
	json_array_foreach(jx_get(csr, "status.conditions"), i, c) approved |=
		!strcmp(jx_str(c, "type") ?: "", "Approved");
	if (!approved) {
		approve(w, csr);
		return;
	}
	sign(w, csr, ttl);
	if (serving)
		w->signed_serving++;
	else
		w->signed_client++;
}

static void csr_updated(void *arg, json_t *old, json_t *csr)
{
	csr_seen(arg, csr);
}

/* ---- the world -------------------------------------------------------------------------- */

static void on_exit_hook(void *arg, struct kubelet *k, int status)
{
	struct world *w = arg;
	w->exits++;
	w->exit_status = status;
}

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	struct informer_handlers h = {csr_seen, csr_updated, NULL, w};
	char path[128];
	struct kubeconfig boot;

	/* Before anything makes timers: they live on the clock they were made with. */
	clock_use_virtual(clock_now());
	/* V(2): the certificate manager's lines, at upstream's verbosity. */
	log_set_verbosity(getenv("CUBE_TEST_V") ? atoi(getenv("CUBE_TEST_V")) : 2);
	testenv_start(&w->env, "kubelet");
	snprintf(w->log_path, sizeof(w->log_path), "%s/log", w->env.dir);
	if (!getenv("CUBE_TEST_LOG"))
		log_set_fd(w->log_fd = open(w->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600));

	/* The bootstrap kubeconfig, pointed at this server. */
	snprintf(path, sizeof(path), "%s/bootstrap-kubelet.conf", w->env.dir);
	assert_int_equal(kubeconfig_load(path, &boot), 0);
	free(boot.server);
	boot.server = strdup(w->env.server);
	snprintf(w->boot, sizeof(w->boot), "%s/bootstrap.conf", w->env.dir);
	assert_int_equal(kubeconfig_save(w->boot, &boot), 0);
	kubeconfig_free(&boot);

	snprintf(path, sizeof(path), "%s/pki/ca.crt", w->env.dir);
	assert_non_null(w->ca = pki_cert_load(path));
	snprintf(path, sizeof(path), "%s/pki/ca.key", w->env.dir);
	assert_non_null(w->ca_key = pki_key_load(path));
	w->csrs = informer_new(w->env.loop, w->env.admin, CSRS, NULL, &h);
	informer_start(w->csrs);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;

	kubelet_free(w->k);
	informer_free(w->csrs);
	log_set_verbosity(0);
	X509_free(w->ca);
	EVP_PKEY_free(w->ca_key);
	clock_use_real();
	if (w->log_fd > 0) {
		log_set_fd(2);
		close(w->log_fd);
	}
	testenv_stop(&w->env);
	free(w);
	return 0;
}

static void config(struct world *w, struct kubelet_config *c, const char *name)
{
	char root[128];

	kubelet_config_init(c);
	snprintf(root, sizeof(root), "%s/kubelet", w->env.dir);
	kubelet_config_set(&c->node_name, name);
	kubelet_config_set(&c->root_dir, root);
	kubelet_config_set(&c->bootstrap_kubeconfig, w->boot);
	kubelet_config_set(&c->address, "127.0.0.1");
	c->port = 0;
	c->on_exit = on_exit_hook;
	c->on_exit_arg = w;
}

static void start(struct world *w, struct kubelet_config *c)
{
	w->k = kubelet_new(w->env.loop, c);
	assert_non_null(w->k);
	kubelet_config_free(c);
	assert_int_equal(kubelet_start(w->k), 0);
}

static bool log_has(struct world *w, const char *needle)
{
	char *text = NULL;
	bool found;

	if (getenv("CUBE_TEST_LOG"))
		return true; /* the lines went to stderr */
	assert_int_equal(file_read(w->log_path, &text, NULL, 64 << 20), 0);
	found = strstr(text, needle) != NULL;
	if (!found)
		fprintf(stderr, "log lacks \"%s\"; log at %s\n", needle, w->log_path);
	free(text);
	return found;
}

/* ---- conditions ----------------------------------------------------------------------- */

static char *link_target(struct world *w, const char *prefix)
{
	char path[256], *buf = calloc(1, 512);
	snprintf(path, sizeof(path), "%s/kubelet/pki/%s-current.pem", w->env.dir, prefix);
	if (readlink(path, buf, 511) < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static bool bootstrapped(struct world *w, void *arg)
{
	char path[256], *t = link_target(w, "kubelet-client");
	bool done = t != NULL;

	snprintf(path, sizeof(path), "%s/kubelet/kubelet.conf", w->env.dir);
	free(t);
	return done && file_exists(path);
}

static bool node_ready(struct world *w, void *name)
{
	char path[256];
	json_t *node, *c;
	size_t i;
	bool ready = false;

	snprintf(path, sizeof(path), "/api/v1/nodes/%s", (const char *)name);
	if (!(node = get(w, path)))
		return false;
	json_array_foreach(jx_get(node, "status.conditions"), i, c) if (
		!strcmp(jx_str(c, "type"), "Ready")) ready = !strcmp(jx_str(c, "status"), "True");
	json_decref(node);
	return ready;
}

/* The lease's renewTime (malloc'd), or NULL. */
static char *renew_time(struct world *w, const char *name)
{
	char path[256], *out;
	json_t *l;

	snprintf(path, sizeof(path), LEASE "%s", name);
	if (!(l = get(w, path)))
		return NULL;
	out = strdup(jx_str(l, "spec.renewTime") ?: "");
	json_decref(l);
	return out;
}

static bool lease_moved(struct world *w, void *since)
{
	char *now = renew_time(w, "node-0");
	bool moved = now && strcmp(now, since);
	free(now);
	return moved;
}

static bool lease_exists(struct world *w, void *name)
{
	char *t = renew_time(w, name);
	bool there = t != NULL;
	free(t);
	return there;
}

static bool pod_phase(struct world *w, void *phase)
{
	json_t *pod = get(w, "/api/v1/namespaces/default/pods/web");
	bool ok = pod && !strcmp(jx_str(pod, "status.phase") ?: "", phase);
	json_decref(pod);
	return ok;
}

static bool pod_gone(struct world *w, void *arg)
{
	struct result r = call(w, "GET", "/api/v1/namespaces/default/pods/web", NULL);
	json_decref(r.body);
	return r.status == 404;
}

static bool link_changed(struct world *w, void *before)
{
	char *t = link_target(w, "kubelet-client");
	bool changed = t && strcmp(t, before);
	free(t);
	return changed;
}

static bool exited(struct world *w, void *arg)
{
	return w->exits > 0;
}

/* ---- the tests ------------------------------------------------------------------------- */

static void check_store(struct world *w)
{
	char *target = link_target(w, "kubelet-client"), path[256];
	struct kubeconfig kc;
	struct stat st;

	assert_non_null(target);
	assert_non_null(strstr(target, "/kubelet/pki/kubelet-client-2"));
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/kubelet/pki/kubelet-client.key.tmp", w->env.dir);
	assert_false(file_exists(path));
	snprintf(path, sizeof(path), "%s/kubelet/kubelet.conf", w->env.dir);
	assert_int_equal(kubeconfig_load(path, &kc), 0);
	assert_string_equal(kc.cluster, "default-cluster");
	assert_string_equal(kc.user, "default-auth");
	assert_string_equal(kc.context, "default-context");
	assert_string_equal(kc.namespace, "default");
	assert_non_null(strstr(kc.cert_file, "/kubelet/pki/kubelet-client-current.pem"));
	assert_string_equal(kc.cert_file, kc.key_file);
	kubeconfig_free(&kc);
	free(target);
}

static void check_node(struct world *w)
{
	json_t *node = get(w, "/api/v1/nodes/node-0"), *c;
	size_t i;
	int seen = 0;

	assert_non_null(node);
	assert_string_equal(json_string_value(json_object_get(jx_get(node, "metadata.labels"),
							      "kubernetes.io/hostname")),
			    "node-0");
	assert_string_equal(json_string_value(json_object_get(jx_get(node, "metadata.labels"),
							      "kubernetes.io/os")),
			    "linux");
	assert_string_equal(jx_str(node, "status.nodeInfo.kubeletVersion"), "v1.32.0");
	assert_string_equal(jx_str(node, "status.nodeInfo.containerRuntimeVersion"),
			    "cube://0.1.0");
	assert_string_equal(jx_str(node, "status.capacity.pods"), "110");
	json_array_foreach(jx_get(node, "status.conditions"), i, c)
	{
		const char *t = jx_str(c, "type");
		if (!strcmp(t, "Ready")) {
			assert_string_equal(jx_str(c, "reason"), "KubeletReady");
			assert_string_equal(jx_str(c, "message"), "kubelet is posting ready status");
			seen++;
		} else if (!strcmp(t, "MemoryPressure")) {
			assert_string_equal(jx_str(c, "reason"), "KubeletHasSufficientMemory");
			seen++;
		} else if (!strcmp(t, "DiskPressure") || !strcmp(t, "PIDPressure")) {
			assert_string_equal(jx_str(c, "status"), "False");
			seen++;
		}
	}
	assert_int_equal(seen, 4);
	json_decref(node);
}

static void check_lease(struct world *w)
{
	json_t *l;
	const char *rt, *dot;
	char *before;

	assert_true(wait_for(w, lease_exists, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	l = get(w, LEASE "node-0");
	assert_non_null(l);
	assert_string_equal(jx_str(l, "spec.holderIdentity"), "node-0");
	assert_int_equal(jx_int(l, "spec.leaseDurationSeconds", 0), 40);
	rt = jx_str(l, "spec.renewTime");
	assert_non_null(dot = strchr(rt, '.'));
	assert_int_equal(strlen(dot), 8); /* ".123456Z": a MicroTime */
	before = strdup(rt);
	json_decref(l);
	/* Renewed every 10 s (+4 % jitter), owned by the Node by then at the
	 * latest (the first lease may come before the Node's uid is known). */
	assert_true(wait_for(w, lease_moved, before, NS_PER_SEC, 12 * NS_PER_SEC));
	l = get(w, LEASE "node-0");
	assert_string_equal(jx_str(json_array_get(jx_get(l, "metadata.ownerReferences"), 0),
				   "kind") ?: "",
			    "Node");
	json_decref(l);
	free(before);
}

static void check_pod(struct world *w)
{
	json_t *pod = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:[{s:s,s:s}]}}", "apiVersion", "v1",
				"kind", "Pod", "metadata", "name", "web", "spec", "nodeName",
				"node-0", "containers", "name", "nginx", "image", "nginx:1.27");
	struct result r = call(w, "POST", "/api/v1/namespaces/default/pods", pod);
	json_t *st, *cs;

	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(pod);
	assert_true(wait_for(w, pod_phase, "Running", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	pod = get(w, "/api/v1/namespaces/default/pods/web");
	st = json_object_get(pod, "status");
	cs = json_array_get(jx_get(st, "containerStatuses"), 0);
	assert_string_equal(jx_str(st, "hostIP"), "127.0.0.1");
	assert_non_null(strstr(jx_str(st, "podIP"), "10.244."));
	assert_non_null(jx_str(st, "startTime"));
	assert_true(json_is_true(json_object_get(cs, "ready")));
	assert_true(json_is_true(json_object_get(cs, "started")));
	assert_non_null(jx_str(cs, "state.running.startedAt"));
	assert_string_equal(jx_str(cs, "image"), "docker.io/library/nginx:1.27");
	assert_non_null(strstr(jx_str(cs, "imageID"), "docker.io/library/nginx@sha256:"));
	assert_non_null(strstr(jx_str(cs, "containerID"), "cube://"));
	assert_int_equal(json_array_size(jx_get(st, "conditions")), 5);
	json_decref(pod);
}

/* The i-th CSR seen whose requestor starts with user and whose signer is signer. */
static struct seen_csr *nth_csr(struct world *w, const char *user, const char *signer, int n)
{
	for (int i = 0; i < w->nseen; i++)
		if (!strncmp(w->seen[i].user, user, strlen(user)) &&
		    !strcmp(w->seen[i].signer, signer) && n-- == 0)
			return &w->seen[i];
	return NULL;
}

#define CLIENT_SIGNER "kubernetes.io/kube-apiserver-client-kubelet"
#define SERVING_SIGNER "kubernetes.io/kubelet-serving"

struct csr_wait {
	const char *user, *signer;
	int n;
};

static bool csr_appeared(struct world *w, void *arg)
{
	struct csr_wait *c = arg;
	return nth_csr(w, c->user, c->signer, c->n) != NULL;
}

static int log_count(struct world *w, const char *needle)
{
	char *text = NULL, *p;
	int n = 0;

	if (getenv("CUBE_TEST_LOG"))
		return -1;
	assert_int_equal(file_read(w->log_path, &text, NULL, 64 << 20), 0);
	for (p = text; (p = strstr(p, needle)); p++)
		n++;
	free(text);
	return n;
}

static X509 *current_client_cert(struct world *w)
{
	char *t = link_target(w, "kubelet-client");
	X509 *cert = t ? pki_cert_load(t) : NULL;
	free(t);
	return cert;
}

/*
 * Rotation: the node's own CSR (csr-*, system:node:node-0) is created inside
 * [70 %, 90 %) of the certificate's life — measured against its NotBefore
 * and NotAfter, to the 250 ms step of virtual time — and the kubelet
 * carries on with the new pair without a restart.
 */
static void check_rotation(struct world *w)
{
	char *before = link_target(w, "kubelet-client"), *moved;
	X509 *cert = pki_cert_load(before);
	int64_t nb = pki_cert_not_before(cert), na = pki_cert_not_after(cert), life = na - nb;
	struct csr_wait own = {"system:node:node-0", CLIENT_SIGNER, 0};
	struct seen_csr *r;
	double at;

	X509_free(cert);
	assert_true(life == 60 * NS_PER_SEC);
	assert_true(wait_for(w, csr_appeared, &own, 250 * NS_PER_MS, 60 * NS_PER_SEC));
	r = nth_csr(w, own.user, own.signer, 0);
	at = (double)(r->at - nb) / (double)life;
	fprintf(stderr, "rotation CSR %s created at %.4f of the certificate's life\n", r->name,
		at);
	assert_true(at >= 0.70);
	assert_true(r->at - nb < life * 9 / 10 + 250 * NS_PER_MS);
	assert_int_equal(strncmp(r->name, "csr-", 4), 0);
	assert_true(wait_for(w, link_changed, before, 250 * NS_PER_MS, 10 * NS_PER_SEC));
	cert = current_client_cert(w);
	assert_true(pki_cert_not_before(cert) > nb);
	X509_free(cert);
	assert_true(log_has(w, "kubernetes.io/kube-apiserver-client-kubelet: Rotating certificates"));
	/* The watchdog notices within its 10 s period and closes the connections. */
	advance(w, 10 * NS_PER_SEC, NS_PER_SEC);
	assert_true(log_count(w, "\"Certificate rotation detected, shutting down client "
				 "connections to start using new credentials\"") != 0);
	/* No restart: the same kubelet keeps renewing its lease with the new pair,
	 * past the old certificate's NotAfter. */
	moved = renew_time(w, "node-0");
	advance(w, na - clock_now() + 5 * NS_PER_SEC, NS_PER_SEC);
	assert_true(wait_for(w, lease_moved, moved, NS_PER_SEC, 12 * NS_PER_SEC));
	assert_int_equal(w->exits, 0);
	free(moved);
	free(before);
}

/* rotateCertificates, as cube up and kubeadm run it: the kubeconfig is
 * written at once, the certificate manager bootstraps in the background
 * (csr-*, the bootstrap token's), and rotates at 70–90 %. */
static void test_bootstrap_rotation_and_pods(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	struct csr_wait boot = {"system:bootstrap:", CLIENT_SIGNER, 0};
	struct seen_csr *r;
	char path[256];

	w->client_ttl_ns = 60 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.rotate_certificates = true;
	start(w, &c);
	/* Written off the loop (its fsyncs), and before any certificate: the
	 * kubelet runs only once it is there. */
	assert_int_equal(log_count(w, "\"Started kubelet\""), 0);
	testenv_work_wait(w->env.loop);
	snprintf(path, sizeof(path), "%s/kubelet/kubelet.conf", w->env.dir);
	assert_true(file_exists(path));
	assert_int_equal(log_count(w, "\"Started kubelet\""), 1);
	snprintf(path, sizeof(path), "%s/kubelet/pki/kubelet-client-current.pem", w->env.dir);
	assert_false(file_exists(path));
	assert_true(log_has(w, "\"Client rotation is on, will bootstrap in background\""));
	assert_true(wait_for(w, bootstrapped, NULL, 100 * NS_PER_MS, 5 * NS_PER_SEC));
	check_store(w);
	assert_true(wait_for(w, csr_appeared, &boot, 100 * NS_PER_MS, NS_PER_SEC));
	r = nth_csr(w, boot.user, boot.signer, 0);
	assert_int_equal(strncmp(r->name, "csr-", 4), 0);
	assert_int_equal(w->nseen, 1);
	/* Registration backs off to 7 s while the node has no certificate. */
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	check_node(w);
	check_lease(w);
	check_pod(w);
	check_rotation(w);
	/* Deleting the pod: the kubelet stops it and confirms with grace 0. */
	{
		struct result res = call(w, "DELETE", "/api/v1/namespaces/default/pods/web", NULL);
		assert_int_equal(res.status, 200);
		json_decref(res.body);
	}
	assert_true(wait_for(w, pod_gone, NULL, 100 * NS_PER_MS, 5 * NS_PER_SEC));
	assert_true(log_has(w, "kubernetes.io/kube-apiserver-client-kubelet: Certificate "
			       "expiration is "));
	assert_true(log_has(w, "for next certificate rotation"));
	assert_true(log_has(w, "kubernetes.io/kube-apiserver-client-kubelet: Certificate rotation "
			       "is enabled"));
}

/*
 * rotateCertificates off: the foreground node-csr-<hash> bootstrap, then a
 * static certificate. When it runs out the kubelet keeps presenting it (the
 * API server logs the x509 reason), its heartbeats get 401 and stop, and it
 * stays running long past exit-after: no watchdog without rotation.
 */
static void test_static_certificate_expires(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	char *frozen, *later;
	X509 *cert;
	int64_t na;

	w->client_ttl_ns = 60 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.exit_after_ns = 30 * NS_PER_SEC;
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	assert_int_equal(strncmp(w->seen[0].name, "node-csr-", 9), 0);
	assert_int_equal(strncmp(w->seen[0].user, "system:bootstrap:", 17), 0);
	cert = current_client_cert(w);
	na = pki_cert_not_after(cert);
	X509_free(cert);
	advance(w, na - clock_now() + NS_PER_SEC, NS_PER_SEC);
	frozen = renew_time(w, "node-0");
	advance(w, 90 * NS_PER_SEC, 2 * NS_PER_SEC);
	later = renew_time(w, "node-0");
	assert_string_equal(frozen, later);
	assert_int_equal(w->exits, 0);
	assert_true(log_has(w, "\"Failed to update lease\" err=\"Unauthorized\""));
	/* The API server says why, on connections the kubelet opened long ago. */
	assert_true(log_has(w, "failed: x509: certificate has expired or is not yet valid"));
	assert_int_equal(log_count(w, "No valid client certificate"), 0);
	assert_int_equal(log_count(w, "Certificate rotation detected"), 0);
	free(frozen);
	free(later);
}

/* A condition of node-0 (new reference), or NULL. */
static json_t *node_condition(struct world *w, const char *type)
{
	json_t *node = get(w, "/api/v1/nodes/node-0"), *c;
	json_t *found = NULL;
	size_t i;

	json_array_foreach(jx_get(node, "status.conditions"), i, c)
	{
		if (!strcmp(jx_str(c, "type") ?: "", type))
			found = json_incref(c);
	}
	json_decref(node);
	return found;
}

/*
 * cube's opt-in ClientCertificateExpiring: False while the certificate is
 * young, True past 90 % of its life (rotation off here: nothing renews it),
 * naming the file and its NotAfter; Ready untouched. Off by default.
 */
static void test_certificate_condition(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	char path[512], na_text[TIME_BUF], want[1024];
	json_t *cond;
	X509 *cert;
	int64_t nb, na;

	w->client_ttl_ns = 100 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.certificate_condition = true;
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	cert = current_client_cert(w);
	nb = pki_cert_not_before(cert);
	na = pki_cert_not_after(cert);
	X509_free(cert);
	snprintf(path, sizeof(path), "%s/kubelet/pki/kubelet-client-current.pem", w->env.dir);
	time_format_rfc3339(na, na_text);
	cond = node_condition(w, "ClientCertificateExpiring");
	assert_non_null(cond);
	assert_string_equal(jx_str(cond, "status"), "False");
	assert_string_equal(jx_str(cond, "reason"), "ClientCertificateValid");
	snprintf(want, sizeof(want), "client certificate %s valid until %s; rotation is off", path,
		 na_text);
	assert_string_equal(jx_str(cond, "message"), want);
	json_decref(cond);
	/* Just before 90 %: still False; just after, True within a status sync. */
	advance(w, nb + (na - nb) / 10 * 9 - clock_now() - 2 * NS_PER_SEC, NS_PER_SEC);
	cond = node_condition(w, "ClientCertificateExpiring");
	assert_string_equal(jx_str(cond, "status"), "False");
	json_decref(cond);
	advance(w, 15 * NS_PER_SEC, NS_PER_SEC);
	cond = node_condition(w, "ClientCertificateExpiring");
	assert_string_equal(jx_str(cond, "status"), "True");
	assert_string_equal(jx_str(cond, "reason"), "ClientCertificateNearExpiry");
	snprintf(want, sizeof(want),
		 "client certificate %s (NotAfter %s) is past 90%% of its life and not renewed; "
		 "rotation is off",
		 path, na_text);
	assert_string_equal(jx_str(cond, "message"), want);
	json_decref(cond);
	assert_true(node_ready(w, "node-0"));
}

/* node-0's resourceVersion, malloc'd. */
static char *node_rv(struct world *w)
{
	json_t *node = get(w, "/api/v1/nodes/node-0");
	char *rv = strdup(jx_str(node, "metadata.resourceVersion") ?: "");
	json_decref(node);
	return rv;
}

/* Was node-0 written since it was at rv? */
static bool node_written_since(struct world *w, const char *rv)
{
	char *now = node_rv(w);
	bool written = strcmp(now, rv) != 0;
	free(now);
	return written;
}

/*
 * nodeStatusHasChanged: a status that differs from the Node's only in its
 * heartbeat times is not written until nodeStatusReportFrequency (5 min)
 * has passed since the last write; a field someone else changed is written
 * back at the next sync (every 10 s).
 */
static void test_status_written_when_changed(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	json_t *patch;
	struct result r;
	char *rv;

	w->client_ttl_ns = 3600 * NS_PER_SEC;
	config(w, &c, "node-0");
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	advance(w, 15 * NS_PER_SEC, NS_PER_SEC);
	rv = node_rv(w);
	advance(w, 60 * NS_PER_SEC, NS_PER_SEC); /* six syncs */
	assert_false(node_written_since(w, rv));

	/* Someone else says it is not Ready: the next sync says it is again. */
	patch = json_pack("{s:{s:[{s:s,s:s,s:s}]}}", "status", "conditions", "type", "Ready",
			  "status", "False", "reason", "SomeoneElse");
	r = testenv_call_ct(&w->env, "PATCH", "/api/v1/nodes/node-0/status",
			    "application/strategic-merge-patch+json", patch);
	json_decref(patch);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	assert_false(node_ready(w, "node-0"));
	/* 10 s and its jitter (4 %), in 1 s steps, and slack. */
	assert_true(wait_for(w, node_ready, "node-0", NS_PER_SEC, 15 * NS_PER_SEC));

	/* Unchanged again: nothing until five minutes after that write. */
	free(rv);
	rv = node_rv(w);
	advance(w, 4 * NS_PER_MIN, 5 * NS_PER_SEC);
	assert_false(node_written_since(w, rv));
	advance(w, 70 * NS_PER_SEC, 5 * NS_PER_SEC);
	assert_true(node_written_since(w, rv));
	free(rv);
}

/* Requests for Nodes the API server answered (apiserver_request_total),
 * of verb (GET: one Node; LIST), its subresource none. */
static int node_requests(const char *verb)
{
	char *text = metrics_render(metrics_default()), *line, want[32];
	int n = 0;

	snprintf(want, sizeof(want), "verb=\"%s\"", verb);
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "apiserver_request_total{") && strstr(line, want) &&
		    strstr(line, "resource=\"nodes\"") && strstr(line, "subresource=\"\""))
			n += atoi(strrchr(line, ' ') + 1);
	free(text);
	return n;
}

/*
 * Upstream since 1.30: a status update's first try takes the Node from the
 * kubelet's informer on it (listed once, then watched), not from a GET
 * every 10 s; the store is asked only when a try failed. Someone else's
 * change reaches it through the watch (test_status_written_when_changed).
 */
static void test_status_reads_the_node_from_its_informer(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	int gets, lists = node_requests("LIST"), d;

	w->client_ttl_ns = 3600 * NS_PER_SEC;
	config(w, &c, "node-0");
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	advance(w, 15 * NS_PER_SEC, NS_PER_SEC);
	assert_true(node_requests("LIST") > lists);
	gets = node_requests("GET");
	advance(w, 60 * NS_PER_SEC, NS_PER_SEC); /* six syncs */
	assert_int_equal(node_requests("GET"), gets);

	/* The Node deleted: the informer says so; each sync's first try finds
	 * no Node ("node", the lister's word), the four retries GET it from the
	 * store ("nodes", the API's) and the update gives up. The kubelet does
	 * not register again (upstream's registrationCompleted). */
	{
		struct result r = call(w, "DELETE", "/api/v1/nodes/node-0", NULL);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
	}
	gets = node_requests("GET");
	advance(w, 11 * NS_PER_SEC, NS_PER_SEC);
	d = node_requests("GET") - gets;
	assert_true(d >= 4 && d % 4 == 0);
	assert_true(log_has(w, "\"Error updating node status, will retry\" err=\"error getting "
			       "node \\\"node-0\\\": node \\\"node-0\\\" not found\""));
	assert_true(log_has(w, "err=\"error getting node \\\"node-0\\\": nodes \\\"node-0\\\" "
			       "not found\""));
	assert_true(log_has(w, "\"Unable to update node status\" err=\"update node status "
			       "exceeds retry count\""));
}

/* Without certificateCondition there is no such condition. */
static void test_certificate_condition_off(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;

	w->client_ttl_ns = 100 * NS_PER_SEC;
	config(w, &c, "node-0");
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	assert_null(node_condition(w, "ClientCertificateExpiring"));
}

static bool exited(struct world *w, void *arg);

/*
 * rotateCertificates on, and the node's renewals are never approved: the
 * certificate runs out, and exit-after later — the certificate manager saw
 * the server answer — the kubelet exits with status 1 and upstream's line.
 */
static void test_rotating_expired_exits(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	struct csr_wait own = {"system:node:node-0", CLIENT_SIGNER, 0};
	X509 *cert;
	int64_t na;

	w->client_ttl_ns = 60 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.rotate_certificates = true;
	c.exit_after_ns = 30 * NS_PER_SEC;
	start(w, &c);
	assert_true(wait_for(w, bootstrapped, NULL, 100 * NS_PER_MS, 5 * NS_PER_SEC));
	w->only_bootstrap = true;
	cert = current_client_cert(w);
	na = pki_cert_not_after(cert);
	X509_free(cert);
	assert_true(wait_for(w, csr_appeared, &own, NS_PER_SEC, 60 * NS_PER_SEC));
	assert_false(nth_csr(w, own.user, own.signer, 0)->issued);
	/* The threshold counts from the watchdog's last check that saw a valid
	 * certificate (at most 10 s before NotAfter), and a check every 10 s
	 * finds it passed: 20–40 s after NotAfter. */
	advance(w, na - clock_now() + 19 * NS_PER_SEC, NS_PER_SEC);
	assert_int_equal(w->exits, 0);
	assert_true(wait_for(w, exited, NULL, NS_PER_SEC, 23 * NS_PER_SEC));
	assert_int_equal(w->exit_status, 1);
	assert_true(clock_now() - na >= 20 * NS_PER_SEC);
	assert_true(clock_now() - na <= 41 * NS_PER_SEC);
	assert_true(log_has(w, "\"No valid client certificate is found and the server is "
			       "responsive, exiting.\" lastCertificateAvailabilityTime=\""));
	assert_true(log_has(w, "shutdownThreshold=\"30s\""));
	assert_true(log_has(w, "kubernetes.io/kube-apiserver-client-kubelet: Current certificate is "
			       "expired"));
	assert_int_equal(log_count(w, "the current certificate can no longer be used"), 0);
}

/*
 * No approver at all: the bootstrap CSR stays Pending, a new csr-* follows
 * when the 15-minute wait runs out, and the kubelet — whose manager never
 * heard the server refuse — keeps running, logging that a restart may be
 * needed.
 */
static void test_stuck_approver(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	struct csr_wait second = {"system:bootstrap:", CLIENT_SIGNER, 1};

	config(w, &c, "node-0");
	c.rotate_certificates = true;
	start(w, &c);
	pump(w, SETTLE); /* the first CSR goes out now, at virtual time 0 */
	assert_int_equal(w->nseen, 1);
	advance(w, 14 * NS_PER_MIN, 20 * NS_PER_SEC);
	assert_int_equal(w->nseen, 1);
	assert_true(wait_for(w, csr_appeared, &second, 10 * NS_PER_SEC, 2 * NS_PER_MIN));
	assert_true(nth_csr(w, second.user, second.signer, 1)->at -
			    nth_csr(w, second.user, second.signer, 0)->at >=
		    15 * NS_PER_MIN);
	assert_int_equal(w->exits, 0);
	assert_true(log_has(w, "\"No valid client certificate is found but the server is not "
			       "responsive. A restart may be necessary to retrieve new initial "
			       "credentials.\""));
	assert_true(log_has(w, "kubernetes.io/kube-apiserver-client-kubelet: certificate request "
			       "was not signed: timed out waiting for the condition"));
}

/* Self-heal without rotation: the expired kubelet re-bootstraps in place
 * (a new node-csr with a fresh key) and carries on. */
static void test_self_heal(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	char *before, *frozen;
	X509 *cert;
	int64_t na;

	w->client_ttl_ns = 60 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.self_heal = true;
	c.exit_after_ns = 30 * NS_PER_SEC;
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	before = link_target(w, "kubelet-client");
	cert = pki_cert_load(before);
	na = pki_cert_not_after(cert);
	X509_free(cert);
	w->client_ttl_ns = 3600 * NS_PER_SEC;
	advance(w, na - clock_now() + NS_PER_SEC, NS_PER_SEC);
	assert_true(wait_for(w, link_changed, before, 500 * NS_PER_MS, 10 * NS_PER_SEC));
	frozen = renew_time(w, "node-0");
	assert_true(wait_for(w, lease_moved, frozen, NS_PER_SEC, 12 * NS_PER_SEC));
	advance(w, 60 * NS_PER_SEC, 2 * NS_PER_SEC);
	assert_int_equal(w->exits, 0);
	assert_int_equal(w->signed_client, 2);
	assert_int_equal(strncmp(w->seen[1].name, "node-csr-", 9), 0);
	assert_string_not_equal(w->seen[0].name, w->seen[1].name);
	assert_true(log_has(w, "self-heal is re-bootstrapping"));
	assert_true(log_count(w, "Self-heal complete") <= 1);
	assert_true(log_has(w, "Self-heal complete"));
	assert_true(log_has(w, "\"Certificate rotation detected, shutting down client connections"));
	free(before);
	free(frozen);
}

/* Self-heal with rotation and the renewals never approved: at expiry the
 * manager asks again with the bootstrap token (csr-*), in place. */
static void test_self_heal_rotating(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	struct csr_wait again = {"system:bootstrap:", CLIENT_SIGNER, 1};
	char *before, *frozen;
	X509 *cert;
	int64_t na;

	w->client_ttl_ns = 60 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.rotate_certificates = true;
	c.self_heal = true;
	c.exit_after_ns = 30 * NS_PER_SEC;
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	w->only_bootstrap = true;
	before = link_target(w, "kubelet-client");
	cert = pki_cert_load(before);
	na = pki_cert_not_after(cert);
	X509_free(cert);
	advance(w, na - clock_now() + NS_PER_SEC, NS_PER_SEC);
	assert_true(wait_for(w, csr_appeared, &again, 500 * NS_PER_MS, 5 * NS_PER_SEC));
	assert_int_equal(strncmp(nth_csr(w, again.user, again.signer, 1)->name, "csr-", 4), 0);
	assert_true(wait_for(w, link_changed, before, 500 * NS_PER_MS, 10 * NS_PER_SEC));
	frozen = renew_time(w, "node-0");
	assert_true(wait_for(w, lease_moved, frozen, NS_PER_SEC, 15 * NS_PER_SEC));
	advance(w, 40 * NS_PER_SEC, 2 * NS_PER_SEC);
	assert_int_equal(w->exits, 0);
	assert_true(log_has(w, "Self-heal complete"));
	free(before);
	free(frozen);
}

static bool serving_issued(struct world *w, void *arg)
{
	char *t = link_target(w, "kubelet-server");
	bool issued = t != NULL;
	free(t);
	return issued;
}

struct probe {
	int status, done;
	json_t *body; /* a JSON answer, or NULL */
};

static void on_probe(void *arg, int status, json_t *body, const char *err)
{
	struct probe *p = arg;
	(void)err;
	p->status = status;
	p->body = json_incref(body);
	p->done = 1;
}

/* GET path from the kubelet's server, trusting only the cluster CA; the
 * JSON answer into *body when body is not NULL (the caller's). */
static int probe_kubelet_json(struct world *w, const char *path, json_t **body)
{
	char server[64];
	struct probe p = {0};
	struct rest_client *c;

	snprintf(server, sizeof(server), "https://127.0.0.1:%d", kubelet_port(w->k));
	c = rest_client_new(w->env.loop, &(struct rest_config){.server = server,
							   .ca_pem = w->env.admin_kc.ca_data});
	rest_do(c, "GET", path, NULL, on_probe, &p);
	for (int i = 0; i < 20000 && !p.done; i++)
		pump(w, 1);
	rest_client_free(c);
	if (body)
		*body = p.body;
	else
		json_decref(p.body);
	return p.status;
}

static int probe_kubelet(struct world *w, const char *path)
{
	return probe_kubelet_json(w, path, NULL);
}

/* serverTLSBootstrap on the first run after a background bootstrap: the
 * serving CSR is the node's own (system:node:node-0), never the token's;
 * until it is issued the HTTPS server has no certificate at all (no
 * self-signed fallback); then it presents the issued one. */
static void test_serving_certificate(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	struct pki_cert_info info;
	struct csr_wait serving = {"", SERVING_SIGNER, 0};
	char *t, path[256];
	X509 *cert;

	w->client_ttl_ns = 3600 * NS_PER_SEC;
	config(w, &c, "node-0");
	c.rotate_certificates = true;
	c.server_tls_bootstrap = true;
	c.port = -1;
	start(w, &c);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	assert_true(wait_for(w, csr_appeared, &serving, NS_PER_SEC, 40 * NS_PER_SEC));
	assert_string_equal(nth_csr(w, "", SERVING_SIGNER, 0)->user, "system:node:node-0");
	for (int i = 0; i < w->nseen; i++)
		if (!strcmp(w->seen[i].signer, SERVING_SIGNER))
			assert_string_equal(w->seen[i].user, "system:node:node-0");
	assert_true(kubelet_port(w->k) > 0);
	assert_int_equal(probe_kubelet(w, "/healthz"), 0); /* no certificate: no handshake */
	assert_true(log_has(w, ": no serving certificate available for the kubelet"));
	snprintf(path, sizeof(path), "%s/kubelet/pki/kubelet.crt", w->env.dir);
	assert_false(file_exists(path));
	/* Now play the approver for the serving CSR left pending so far. */
	w->serving_ttl_ns = 3600 * NS_PER_SEC;
	{
		json_t *list = get(w, CSRS), *csr;
		size_t i;
		json_array_foreach(json_object_get(list, "items"), i, csr) csr_seen(w, csr);
		json_decref(list);
	}
	assert_true(wait_for(w, serving_issued, NULL, 100 * NS_PER_MS, 5 * NS_PER_SEC));
	pump(w, 50);
	t = link_target(w, "kubelet-server");
	cert = pki_cert_load(t);
	assert_int_equal(pki_cert_info(cert, &info), 0);
	assert_string_equal(info.cn, "system:node:node-0");
	assert_true(strv_has(&info.dns, "node-0"));
	assert_true(strv_has(&info.ips, "127.0.0.1"));
	assert_true(info.usages & PKI_U_SERVER_AUTH);
	pki_cert_info_free(&info);
	X509_free(cert);
	free(t);
	assert_int_equal(probe_kubelet(w, "/healthz"), 200);
	assert_int_equal(probe_kubelet(w, "/pods"), 200);
	assert_int_equal(probe_kubelet(w, "/metrics"), 200);
	assert_int_equal(probe_kubelet(w, "/nope"), 404);
	/* /configz: the configuration it runs with, as upstream nests it. */
	{
		json_t *z = NULL;
		assert_int_equal(probe_kubelet_json(w, "/configz", &z), 200);
		assert_true(jx_bool(z, "kubeletconfig.serverTLSBootstrap", false));
		assert_true(jx_bool(z, "kubeletconfig.rotateCertificates", false));
		assert_string_equal(jx_str(z, "kubeletconfig.nodeStatusUpdateFrequency"), "10s");
		assert_null(jx_get(z, "kubeletconfig.kind"));
		json_decref(z);
	}
}

/* node-0 serving on a port of its own, started (again) on the same directory. */
static void start_serving(struct world *w)
{
	struct kubelet_config c;

	kubelet_free(w->k);
	config(w, &c, "node-0");
	c.port = -1;
	start(w, &c);
	pump(w, SETTLE);
}

static char *pki_text(struct world *w, const char *file)
{
	char path[256], *text = NULL;

	snprintf(path, sizeof(path), "%s/kubelet/pki/%s", w->env.dir, file);
	assert_int_equal(file_read(path, &text, NULL, 1 << 20), 0);
	return text;
}

/* Without serverTLSBootstrap: the self-signed pair is written at the first
 * start (kubelet.crt 0644, kubelet.key 0600) and loaded again at the next.
 * It is written without fsync, as upstream writes it, so a crash may leave
 * it truncated: such a pair does not load and is made again, a certificate
 * and the key that matches it. */
static void test_self_signed_pair_kept_or_made_again(void **state)
{
	struct world *w = *state;
	char crt[256], key[256], *first, *text;
	struct stat st;
	X509 *cert;
	EVP_PKEY *pkey;

	w->client_ttl_ns = 3600 * NS_PER_SEC;
	start_serving(w);
	assert_true(wait_for(w, node_ready, "node-0", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	snprintf(crt, sizeof(crt), "%s/kubelet/pki/kubelet.crt", w->env.dir);
	snprintf(key, sizeof(key), "%s/kubelet/pki/kubelet.key", w->env.dir);
	assert_int_equal(stat(crt, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(stat(key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	first = pki_text(w, "kubelet.crt");
	assert_non_null(strstr(first, "-----BEGIN CERTIFICATE-----"));

	start_serving(w);
	text = pki_text(w, "kubelet.crt");
	assert_string_equal(text, first);
	free(text);

	assert_int_equal(truncate(crt, (off_t)(strlen(first) / 2)), 0);
	start_serving(w);
	text = pki_text(w, "kubelet.crt");
	assert_string_not_equal(text, first);
	assert_non_null(cert = pki_cert_load(crt));
	assert_non_null(pkey = pki_key_load(key));
	assert_true(pki_key_matches(cert, pkey));
	X509_free(cert);
	EVP_PKEY_free(pkey);
	free(text);
	free(first);
}

/* The KubeletConfiguration a kubelet runs with reads back to the same
 * settings: what config.yaml and /configz show is what is in force. */
static void test_config_document_round_trips(void **state)
{
	struct kubelet_config a, b;
	json_t *da, *db;
	(void)state;

	kubelet_config_init(&a);
	a.rotate_certificates = true;
	a.self_heal = true;
	a.node_status_update_frequency_ns = 90 * NS_PER_SEC;
	a.node_status_report_frequency_ns = 5 * NS_PER_MIN;
	a.node_lease_duration_s = 7;
	a.port = -1;
	a.register_with_taints = json_pack("[{s:s,s:s}]", "key", "k", "effect", "NoSchedule");
	da = kubelet_config_json(&a);
	assert_string_equal(jx_str(da, "nodeStatusUpdateFrequency"), "1m30s");
	assert_string_equal(jx_str(da, "nodeStatusReportFrequency"), "5m0s");
	kubelet_config_init(&b);
	assert_int_equal(kubelet_config_apply(&b, da), 0);
	db = kubelet_config_json(&b);
	assert_true(json_equal(da, db));
	assert_int_equal(b.node_lease_duration_s, 7);
	assert_true(b.rotate_certificates && b.self_heal && !b.server_tls_bootstrap);
	json_decref(da);
	json_decref(db);
	kubelet_config_free(&a);
	kubelet_config_free(&b);
}

static void no_op(void *arg)
{
	(void)arg;
}

/* A pool's loop gives its timers 50 ms of slack at most (kubelet.h): a
 * heartbeat armed 10 s ahead may wait that long for others due then. */
static void test_hollow_pool_timer_slack(void **state)
{
	struct world *w = *state;
	struct loop *l = loop_new();
	struct kubelet_config c;
	struct kubelet_pool *p;
	struct timer *t = loop_timer(l, no_op, NULL);

	timer_after(t, 10 * NS_PER_SEC);
	assert_int_equal(timers_wake(loop_timers(l)), timer_deadline(t));
	config(w, &c, "ignored");
	p = kubelet_pool_new(l, &c, 0, "none-", 0);
	kubelet_config_free(&c);
	assert_non_null(p);
	timer_after(t, 10 * NS_PER_SEC);
	assert_int_equal(timers_wake(loop_timers(l)), timer_deadline(t) + 50 * NS_PER_MS);
	kubelet_pool_free(p);
	timer_free(t);
	loop_free(l);
}

/* Three hollow kubelets on this loop, one taking over an existing Node:
 * the default labels are reconciled, the Node's other labels are its own.
 * Each line names its node. */
static void test_hollow(void **state)
{
	struct world *w = *state;
	struct kubelet_config c;
	struct kubelet_pool *p;
	json_t *node = json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s}}}", "apiVersion", "v1", "kind",
				 "Node", "metadata", "name", "hollow-1", "labels",
				 "kubernetes.io/hostname", "somewhere-else", "team", "blue");
	struct result r = call(w, "POST", "/api/v1/nodes", node);
	char *certs[3];

	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(node);
	w->client_ttl_ns = 3600 * NS_PER_SEC;
	config(w, &c, "ignored");
	c.rotate_certificates = true;
	strv_push(&c.node_labels, "team=red");
	p = kubelet_pool_new(w->env.loop, &c, 3, "hollow-", 0);
	kubelet_config_free(&c);
	assert_non_null(p);
	assert_int_equal(kubelet_pool_start(p), 0);
	for (int i = 0; i < 3; i++) {
		char name[32], path[256];
		snprintf(name, sizeof(name), "hollow-%d", i);
		assert_string_equal(kubelet_name(kubelet_pool_get(p, i)), name);
		assert_true(wait_for(w, node_ready, name, 100 * NS_PER_MS, 10 * NS_PER_SEC));
		snprintf(path, sizeof(path), "%s/kubelet/%s/pki/kubelet-client-current.pem", w->env.dir,
			 name);
		certs[i] = calloc(1, 512);
		assert_true(readlink(path, certs[i], 511) > 0);
		assert_true(wait_for(w, lease_exists, name, 100 * NS_PER_MS, 5 * NS_PER_SEC));
	}
	/* Each node's config.yaml is the configuration it runs with (the
	 * runbook's `grep -i rotate /var/lib/kubelet/config.yaml`). */
	for (int i = 0; i < 3; i++) {
		char path[256];
		struct kubelet_config f;
		snprintf(path, sizeof(path), "%s/kubelet/hollow-%d/config.yaml", w->env.dir, i);
		kubelet_config_init(&f);
		assert_int_equal(kubelet_config_load(&f, path), 0);
		assert_true(f.rotate_certificates);
		kubelet_config_free(&f);
	}
	assert_string_not_equal(certs[0], certs[1]);
	assert_string_not_equal(certs[1], certs[2]);
	node = get(w, "/api/v1/nodes/hollow-1");
	assert_string_equal(json_string_value(json_object_get(jx_get(node, "metadata.labels"),
							      "kubernetes.io/hostname")),
			    "hollow-1");
	assert_string_equal(json_string_value(json_object_get(jx_get(node, "metadata.labels"),
							      "team")),
			    "blue");
	json_decref(node);
	node = get(w, "/api/v1/nodes/hollow-2");
	assert_string_equal(json_string_value(json_object_get(jx_get(node, "metadata.labels"),
							      "team")),
			    "red");
	json_decref(node);
	assert_true(log_has(w, "Node was previously registered"));
	assert_true(log_has(w, "kubernetes.io/kube-apiserver-client-kubelet: Rotating certificates "
			       "node=\"hollow-1\""));
	assert_true(log_has(w, "\"Certificate rotation detected, shutting down client connections "
			       "to start using new credentials\" node=\"hollow-2\""));
	kubelet_pool_free(p);
	for (int i = 0; i < 3; i++)
		free(certs[i]);
}

static bool lease_of_moved(struct world *w, const char *name, const char *since)
{
	char *now = renew_time(w, name);
	bool moved = now && strcmp(now, since);
	free(now);
	return moved;
}

static bool ctl0_moved(struct world *w, void *since)
{
	return lease_of_moved(w, "ctl-0", since);
}

/* What an operator does to one hollow kubelet (kubelet_pool_control):
 * partition and heal, stop and start, restart reading config.yaml, a
 * skewed clock. */
static void test_hollow_control(void **state)
{
	struct world *w = *state;
	struct kubelet_config c, f;
	struct kubelet_pool *p;
	char conf[256], *t;
	json_t *st, *lease;
	int64_t renew;

	w->client_ttl_ns = 3600 * NS_PER_SEC;
	config(w, &c, "ignored");
	c.rotate_certificates = true;
	p = kubelet_pool_new(w->env.loop, &c, 2, "ctl-", 0);
	kubelet_config_free(&c);
	assert_int_equal(kubelet_pool_start(p), 0);
	assert_true(wait_for(w, node_ready, "ctl-0", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	assert_true(wait_for(w, node_ready, "ctl-1", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	assert_true(wait_for(w, lease_exists, "ctl-0", 100 * NS_PER_MS, 5 * NS_PER_SEC));
	assert_int_equal(kubelet_pool_control(p, "ctl-9", KUBELET_POOL_STOP, 0), ERR_NOTFOUND);

	/* Partitioned: no renewal gets through; healed, they do again. */
	assert_int_equal(kubelet_pool_control(p, "ctl-0", KUBELET_POOL_PARTITION, 0), 0);
	pump(w, SETTLE);
	t = renew_time(w, "ctl-0");
	advance(w, 30 * NS_PER_SEC, 5 * NS_PER_SEC);
	assert_false(lease_of_moved(w, "ctl-0", t));
	assert_true(log_has(w, "connect: network is unreachable"));
	st = kubelet_pool_status(p);
	assert_true(jx_bool(json_array_get(st, 0), "partitioned", false));
	assert_false(jx_bool(json_array_get(st, 1), "partitioned", true));
	json_decref(st);
	assert_int_equal(kubelet_pool_control(p, "ctl-0", KUBELET_POOL_HEAL, 0), 0);
	assert_true(wait_for(w, ctl0_moved, t, 2 * NS_PER_SEC, 30 * NS_PER_SEC));
	free(t);

	/* Stopped stays stopped; started runs again. */
	assert_int_equal(kubelet_pool_control(p, "ctl-1", KUBELET_POOL_STOP, 0), 0);
	assert_null(kubelet_pool_get(p, 1));
	advance(w, 30 * NS_PER_SEC, 10 * NS_PER_SEC);
	assert_null(kubelet_pool_get(p, 1));
	assert_int_equal(kubelet_pool_control(p, "ctl-1", KUBELET_POOL_START, 0), 0);
	assert_non_null(kubelet_pool_get(p, 1));
	assert_true(log_has(w, "\"Starting kubelet\" node=\"ctl-1\""));

	/* A restart reads config.yaml again: rotation off, no background
	 * bootstrap this time. */
	snprintf(conf, sizeof(conf), "%s/kubelet/ctl-0/config.yaml", w->env.dir);
	kubelet_config_init(&f);
	assert_int_equal(kubelet_config_load(&f, conf), 0);
	f.rotate_certificates = false;
	assert_int_equal(kubelet_config_write(&f, conf), 0);
	kubelet_config_free(&f);
	assert_int_equal(log_count(w, "will bootstrap in background\" node=\"ctl-0\""), 1);
	assert_int_equal(kubelet_pool_control(p, "ctl-0", KUBELET_POOL_RESTART, 0), 0);
	assert_true(log_has(w, "\"Restarting kubelet\" node=\"ctl-0\""));
	assert_true(wait_for(w, node_ready, "ctl-0", 100 * NS_PER_MS, 10 * NS_PER_SEC));
	assert_int_equal(log_count(w, "will bootstrap in background\" node=\"ctl-0\""), 1);

	/* A clock 400 days ahead: the Lease it renews says so. */
	assert_int_equal(kubelet_pool_control(p, "ctl-0", KUBELET_POOL_CLOCK_SKEW, 400 * NS_PER_DAY),
			 0);
	st = kubelet_pool_status(p);
	assert_int_equal(jx_int(json_array_get(st, 0), "clockSkewSeconds", 0), 400 * 86400);
	json_decref(st);
	t = renew_time(w, "ctl-0");
	assert_true(wait_for(w, ctl0_moved, t, 2 * NS_PER_SEC, 30 * NS_PER_SEC));
	free(t);
	lease = get(w, LEASE "ctl-0");
	assert_int_equal(time_parse_rfc3339(jx_str(lease, "spec.renewTime"), &renew), 0);
	assert_true(renew > clock_now() + 399 * NS_PER_DAY);
	json_decref(lease);
	kubelet_pool_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bootstrap_rotation_and_pods, setup, teardown),
		cmocka_unit_test_setup_teardown(test_static_certificate_expires, setup, teardown),
		cmocka_unit_test_setup_teardown(test_certificate_condition, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_written_when_changed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_reads_the_node_from_its_informer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_certificate_condition_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotating_expired_exits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stuck_approver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_self_heal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_self_heal_rotating, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serving_certificate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_self_signed_pair_kept_or_made_again, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hollow_pool_timer_slack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hollow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hollow_control, setup, teardown),
		cmocka_unit_test(test_config_document_round_trips),
	};
	return run_tests_in_part(tests);
}
