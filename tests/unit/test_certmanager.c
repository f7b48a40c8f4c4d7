/* The kubelet's certificate manager and configuration, alone: upstream's
 * rotation deadline and backoff arithmetic, the backoff schedule as timers
 * on the virtual clock against a server that refuses connections, the
 * bootstrap CSR's name, Go's time format, and KubeletConfiguration files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "kubelet/certmanager.h"
#include "kubelet/kubelet.h"

#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/metrics.h"
#include "base/rand.h"
#include "base/timeutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the deadline ------------------------------------------------------------------ */

static void test_deadline_bounds(void **state)
{
	int64_t nb = 1000 * NS_PER_SEC, life = 365 * NS_PER_DAY;

	/* u = 0 is exactly 70 %; u just under 1 stays under 90 %. */
	assert_true(certmgr_rotation_deadline(nb, nb + life, 0.0) == nb + life / 10 * 7);
	assert_true(certmgr_rotation_deadline(nb, nb + life, 0.999999999) < nb + life / 10 * 9);
	/* k8s-facts §1.1: a 365-day certificate rotates between day 255.5 and 328.5. */
	assert_true(certmgr_rotation_deadline(nb, nb + life, 0.0) - nb == 255 * NS_PER_DAY + NS_PER_DAY / 2);
}

/* 10,000 draws from the process source: all in [70 %, 90 %), each tenth
 * of that range holding 10 % ± 1.5 % of them. */
static void test_deadline_uniform(void **state)
{
	int64_t nb = 1700000000 * NS_PER_SEC, life = 90 * NS_PER_DAY;
	int64_t lo = nb + life / 10 * 7, hi = nb + life / 10 * 9;
	int deciles[10] = {0};
	const int draws = 10000;

	rand_seed(20261130);
	for (int i = 0; i < draws; i++) {
		int64_t d = certmgr_rotation_deadline(nb, nb + life, rand_double());
		assert_true(d >= lo);
		assert_true(d < hi);
		deciles[(d - lo) * 10 / (hi - lo)]++;
	}
	for (int i = 0; i < 10; i++) {
		assert_in_range(deciles[i], draws / 10 - draws * 15 / 1000,
				draws / 10 + draws * 15 / 1000);
	}
}

/* ---- the backoff ------------------------------------------------------------------- */

static void test_backoff_arithmetic(void **state)
{
	/* 2 s ×2 per step, up to 10 % jitter, 5 steps: 4 sleeps, then the limit. */
	static const int64_t base[] = {2, 4, 8, 16};
	for (int n = 1; n <= 4; n++) {
		assert_true(certmgr_backoff_delay(n, 0.0) == base[n - 1] * NS_PER_SEC);
		assert_true(certmgr_backoff_delay(n, 0.999) < base[n - 1] * NS_PER_SEC * 11 / 10);
		assert_true(certmgr_backoff_delay(n, 0.999) > base[n - 1] * NS_PER_SEC);
	}
	assert_true(certmgr_backoff_delay(5, 0.5) < 0);
	assert_true(certmgr_backoff_delay(0, 0.5) < 0);
	assert_true(CERTMGR_POLL_NS == 32 * NS_PER_SEC);
}

struct bo {
	char dir[64];
	struct loop *loop;
	struct rest_client *client;
	struct metrics *m;
	struct metric_series *errors;
};

static struct rest_client *bo_client(void *arg, bool have_cert)
{
	return ((struct bo *)arg)->client;
}

/* A loopback port nobody listens on. */
static int closed_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Run I/O until the renewal counter reaches n (the refused connect). */
static void pump_until_errors(struct bo *b, double n)
{
	for (int i = 0; i < 2000 && metrics_value(b->errors) < n; i++) {
		struct timeval tv = {0, 1000};
		loop_poll(b->loop);
		event_base_loopexit(loop_base(b->loop), &tv);
		event_base_loop(loop_base(b->loop), EVLOOP_ONCE);
	}
	assert_true(metrics_value(b->errors) == n);
}

/* The schedule of attempts when every CSR create fails: at once, then after
 * 2, 4, 8 and 16 s (+≤10 %), then the backoff limit and every 32 s. */
static void test_backoff_schedule(void **state)
{
	static const int64_t sleeps[] = {2, 4, 8, 16};
	struct bo b = {.dir = "/tmp/cube-cm-XXXXXX"};
	char server[64];
	struct certmgr *m;
	const char *orgs[] = {"system:nodes", NULL};
	struct certmgr_config cfg = {.name = SIGNER_KUBELET_CLIENT,
				     .signer = SIGNER_KUBELET_CLIENT,
				     .prefix = CERTSTORE_CLIENT,
				     .rotate = true,
				     .cn = "system:node:n1",
				     .orgs = orgs,
				     .client = bo_client,
				     .arg = &b};

	clock_use_virtual(1800000000 * NS_PER_SEC);
	rand_seed(7);
	assert_non_null(mkdtemp(b.dir));
	cfg.cert_dir = b.dir;
	b.loop = loop_new();
	b.m = metrics_new();
	b.errors = metrics_with(metrics_counter(b.m, "renew_errors", "h", NULL));
	cfg.renew_errors = b.errors;
	snprintf(server, sizeof(server), "https://127.0.0.1:%d", closed_port());
	cfg.server = server;
	b.client = rest_client_new(b.loop, &(struct rest_config){.server = server});
	assert_non_null(b.client);

	/* No pair in the store: upstream rotates at once. */
	m = certmgr_new(b.loop, &cfg);
	assert_int_equal(certmgr_start(m), 0);
	assert_null(certmgr_current(m));
	assert_true(isinf(certmgr_ttl_seconds(m)));
	pump_until_errors(&b, 1);
	assert_int_equal(certmgr_attempts(m), 1);
	for (int i = 0; i < 4; i++) {
		clock_advance(sleeps[i] * NS_PER_SEC - NS_PER_MS);
		loop_poll(b.loop);
		assert_int_equal(certmgr_attempts(m), i + 1);
		clock_advance(sleeps[i] * NS_PER_SEC / 10 + 2 * NS_PER_MS);
		assert_int_equal(certmgr_attempts(m), i + 2);
		pump_until_errors(&b, i + 2);
	}
	/* The limit: nothing for 32 s, then one attempt per 32 s. */
	for (int i = 0; i < 2; i++) {
		clock_advance(32 * NS_PER_SEC - NS_PER_MS);
		assert_int_equal(certmgr_attempts(m), 5 + i);
		clock_advance(2 * NS_PER_MS);
		assert_int_equal(certmgr_attempts(m), 6 + i);
		pump_until_errors(&b, 6 + i);
	}
	/* Refused connections are no answer: the server is not healthy. */
	assert_false(certmgr_server_healthy(m));

	certmgr_free(m);
	rest_client_free(b.client);
	metrics_free(b.m);
	loop_free(b.loop);
	clock_use_real();
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", b.dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* ---- an issued pair, stored off the loop ---- */

struct cw_seen {
	int calls;
	int rc;
	char err[512];
	X509 *cert;
	int unlink_errno;
	pthread_t thread;
	const struct log_scope *scope;
	int64_t now; /* clock_now() in done: the scope's clock */
};

static void cw_done(void *arg, struct cred_write_result *res)
{
	struct cw_seen *s = arg;

	s->calls++;
	s->rc = res->rc;
	snprintf(s->err, sizeof(s->err), "%s", res->err);
	X509_free(s->cert);
	s->cert = res->cert;
	s->unlink_errno = res->unlink_errno;
	s->thread = pthread_self();
	s->scope = log_scope_current();
	s->now = clock_now();
}

static void test_cred_write(void **state)
{
	char dir[64] = "/tmp/cube-cw-XXXXXX", path[256], target[512], want[512], stamp[32],
	     cmd[128], *text = NULL, *cert_pem;
	int64_t now = 1800000000 * NS_PER_SEC, skew = NS_PER_DAY;
	struct log_scope node = {.fd = -1, .clock_skew_ns = skew};
	const struct log_scope *prev;
	EVP_PKEY *ca_key = pki_key_new(PKI_KEY_ECDSA), *key = pki_key_new(PKI_KEY_ECDSA);
	EVP_PKEY *other = pki_key_new(PKI_KEY_ECDSA), *held = NULL;
	X509 *ca = pki_ca_new(ca_key, "ca", 10 * NS_PER_DAY), *cert, *loaded = NULL;
	struct pki_cert_spec spec = {.cn = "system:node:n1",
				     .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH,
				     .not_before_ns = now,
				     .not_after_ns = now + 100 * NS_PER_SEC};
	struct cw_seen seen = {0};
	struct loop *loop = loop_new();
	struct cred_write_spec cw;
	struct stat st;
	time_t t = (time_t)((now + skew) / NS_PER_SEC);
	struct tm tm;
	ssize_t n;

	(void)state;
	clock_use_virtual(now);
	assert_non_null(mkdtemp(dir));
	cert = pki_cert_new(&spec, key, ca, ca_key);
	cert_pem = pki_cert_pem(cert);
	snprintf(path, sizeof(path), "%s/kubelet-client.key.tmp", dir);
	assert_int_equal(file_write_atomic(path, "key", 3, 0600), 0);

	/* In a node's scope: the pair, the key file gone, then the file. */
	cw = (struct cred_write_spec){.dir = dir,
				      .prefix = CERTSTORE_CLIENT,
				      .cert_pem = cert_pem,
				      .key = key,
				      .unlink_path = path,
				      .file_path = NULL,
				      .file_text = "kubeconfig text"};
	snprintf(want, sizeof(want), "%s/sub/kubelet.conf", dir);
	cw.file_path = want;
	prev = log_scope_enter(&node);
	cred_write_start(loop, &cw, cw_done, &seen);
	log_scope_enter(prev);
	assert_int_equal(seen.calls, 0); /* not before the loop hears of it */
	testenv_work_wait(loop);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.rc, 0);
	assert_non_null(seen.cert);
	assert_int_equal(X509_cmp(seen.cert, cert), 0);
	assert_true(pthread_equal(seen.thread, pthread_self()));
	assert_ptr_equal(seen.scope, &node);
	assert_true(seen.now == now + skew);
	assert_false(file_exists(path));
	assert_int_equal(seen.unlink_errno, 0);
	assert_int_equal(file_read(want, &text, NULL, 4096), 0);
	assert_string_equal(text, "kubeconfig text");
	free(text);
	assert_int_equal(stat(want, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* The dated file is named by the node's clock, not the process's. */
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H-%M-%S", &tm);
	snprintf(path, sizeof(path), "%s/kubelet-client-current.pem", dir);
	assert_true((n = readlink(path, target, sizeof(target) - 1)) > 0);
	target[n] = '\0';
	snprintf(want, sizeof(want), "kubelet-client-%s.pem", stamp);
	assert_non_null(strstr(target, want));
	assert_int_equal(certstore_load(dir, CERTSTORE_CLIENT, NULL, NULL, &loaded, &held), 0);
	assert_int_equal(X509_cmp(loaded, cert), 0);
	assert_true(pki_key_matches(loaded, key));
	X509_free(loaded);
	EVP_PKEY_free(held);

	/* A certificate for another key never replaces the pair, and the
	 * files after it are not written. */
	clock_advance(NS_PER_SEC);
	cw.key = other;
	cw.unlink_path = NULL;
	snprintf(want, sizeof(want), "%s/other.conf", dir);
	cw.file_path = want;
	cred_write_start(loop, &cw, cw_done, &seen);
	testenv_work_wait(loop);
	assert_int_equal(seen.calls, 2);
	assert_true(seen.rc < 0);
	assert_non_null(strstr(seen.err, "private key does not match public key"));
	assert_null(seen.cert);
	assert_ptr_equal(seen.scope, NULL);
	assert_false(file_exists(want));
	assert_int_equal(certstore_load(dir, CERTSTORE_CLIENT, NULL, NULL, &loaded, &held), 0);
	assert_int_equal(X509_cmp(loaded, cert), 0);
	X509_free(loaded);
	EVP_PKEY_free(held);

	/* A file alone; cancelled, done never runs (and nothing leaks). */
	cw = (struct cred_write_spec){.file_path = want, .file_text = "x"};
	cred_write_cancel(cred_write_start(loop, &cw, cw_done, &seen));
	testenv_work_wait(loop);
	assert_int_equal(seen.calls, 2);
	assert_true(file_exists(want));

	X509_free(seen.cert);
	free(cert_pem);
	X509_free(cert);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(key);
	EVP_PKEY_free(other);
	loop_free(loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A pair in the store: the manager logs upstream's deadline and waits. */
static void test_waits_for_deadline(void **state)
{
	char dir[64] = "/tmp/cube-cm-XXXXXX", cmd[128];
	int64_t now = 1800000000 * NS_PER_SEC;
	EVP_PKEY *ca_key, *key;
	X509 *ca, *cert;
	struct loop *loop;
	struct certmgr *m;
	const char *orgs[] = {"system:nodes", NULL};
	struct pki_cert_spec spec = {.cn = "system:node:n1",
				     .orgs = orgs,
				     .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH,
				     .not_before_ns = now,
				     .not_after_ns = now + 100 * NS_PER_SEC};
	struct certmgr_config cfg = {.name = SIGNER_KUBELET_CLIENT,
				     .signer = SIGNER_KUBELET_CLIENT,
				     .prefix = CERTSTORE_CLIENT,
				     .cn = "system:node:n1",
				     .orgs = orgs,
				     .rotate = true};

	clock_use_virtual(now);
	assert_non_null(mkdtemp(dir));
	cfg.cert_dir = dir;
	ca_key = pki_key_new(PKI_KEY_ECDSA);
	ca = pki_ca_new(ca_key, "ca", 10 * NS_PER_DAY);
	key = pki_key_new(PKI_KEY_ECDSA);
	cert = pki_cert_new(&spec, key, ca, ca_key);
	assert_int_equal(certstore_update(dir, CERTSTORE_CLIENT, cert, NULL, key, NULL), 0);
	loop = loop_new();
	m = certmgr_new(loop, &cfg);
	assert_int_equal(certmgr_start(m), 0);
	assert_non_null(certmgr_current(m));
	assert_true(certmgr_ttl_seconds(m) == 100);
	/* Nothing is asked before 70 s; past NotAfter the certificate is gone. */
	clock_advance(69 * NS_PER_SEC);
	assert_int_equal(certmgr_attempts(m), 0);
	assert_true(certmgr_ttl_seconds(m) == 31);
	certmgr_free(m);
	/* Over many deadlines: never an attempt before 70 % of the life, always
	 * one by 90 % (the timers, not only the arithmetic). */
	for (int seed = 1; seed <= 200; seed++) {
		clock_use_virtual(now);
		rand_seed((uint64_t)seed);
		m = certmgr_new(loop, &cfg);
		assert_int_equal(certmgr_start(m), 0);
		clock_advance(70 * NS_PER_SEC - 1);
		assert_int_equal(certmgr_attempts(m), 0);
		while (certmgr_attempts(m) == 0 && clock_now() < now + 90 * NS_PER_SEC)
			clock_advance(10 * NS_PER_MS);
		assert_int_equal(certmgr_attempts(m), 1);
		assert_true(clock_now() <= now + 90 * NS_PER_SEC);
		certmgr_free(m);
	}
	clock_use_virtual(now + 69 * NS_PER_SEC);
	m = certmgr_new(loop, &(struct certmgr_config){.name = "x",
							 .signer = SIGNER_KUBELET_CLIENT,
							 .cert_dir = dir,
							 .prefix = CERTSTORE_CLIENT,
							 .cn = "system:node:n1"});
	assert_int_equal(certmgr_start(m), 0);
	clock_advance(31 * NS_PER_SEC);
	assert_non_null(certmgr_current(m)); /* NotAfter itself still counts */
	clock_advance(NS_PER_SEC);
	assert_null(certmgr_current(m));
	assert_true(isinf(certmgr_ttl_seconds(m)));
	certmgr_free(m);
	loop_free(loop);
	X509_free(cert);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
	clock_use_real();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* ---- the bootstrap CSR's name -------------------------------------------------------- */

static const char vector_key[] = "-----BEGIN EC PRIVATE KEY-----\n"
				 "MHcCAQEEINILGShjgArvIvvLIGHIsi7H+KrDRWzUiFC/Us2+BVgQoAoGCCqGSM49\n"
				 "AwEHoUQDQgAE8k1cRIGSmCPD04qeyjlD950U9yRsVWrZRnDFA9d0w42rXBMd1CPT\n"
				 "6I1c9Nsy2Uba4KvALKFrhNwZ/80qNi4yXg==\n"
				 "-----END EC PRIVATE KEY-----\n";

/*
 * The expected name, computed by hand with upstream's algorithm
 * (bootstrap.go digestedName) in Python:
 *
 *   der = <the key's public half, PKIX DER: openssl ec -pubout -outform DER>
 *   enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b'=')
 *   h = hashlib.new('sha512_256')
 *   for f in [der, b'system:node:node-0', b'system:nodes',
 *             b'digital signature', b'client auth']:
 *       h.update(enc(f)); h.update(b'|')
 *   'node-csr-' + enc(h.digest()).decode()
 */
static void test_csr_name(void **state)
{
	const char *orgs[] = {"system:nodes", NULL};
	const char *usages[] = {"digital signature", "client auth", NULL};
	EVP_PKEY *key = pki_key_parse(vector_key, strlen(vector_key));
	EVP_PKEY *other = pki_key_new(PKI_KEY_ECDSA);
	char *a, *b, *c, *d;

	assert_non_null(key);
	a = kubelet_csr_name(key, "system:node:node-0", orgs, usages);
	assert_string_equal(a, "node-csr-qmuOen7nqP-Gqt9F9GkXcRdr2Y9ZPF-kTiTchkDpbuU");
	b = kubelet_csr_name(key, "system:node:node-0", orgs, usages);
	assert_string_equal(a, b); /* same inputs, same name: a restart finds its CSR */
	c = kubelet_csr_name(other, "system:node:node-0", orgs, usages);
	assert_string_not_equal(a, c); /* another key, another name */
	d = kubelet_csr_name(key, "system:node:node-1", orgs, usages);
	assert_string_not_equal(a, d);
	free(a);
	free(b);
	free(c);
	free(d);
	EVP_PKEY_free(key);
	EVP_PKEY_free(other);
}

/* ---- Go's formats ------------------------------------------------------------------------ */

static void test_go_time(void **state)
{
	char buf[GO_TIME_BUF];
	int64_t t;

	assert_int_equal(time_parse_rfc3339("2026-11-30T10:00:00Z", &t), 0);
	assert_string_equal(go_time_string(t, buf), "2026-11-30 10:00:00 +0000 UTC");
	assert_string_equal(go_time_string(t + 500 * NS_PER_MS, buf),
			    "2026-11-30 10:00:00.5 +0000 UTC");
	assert_string_equal(go_time_string(t + 338165164, buf),
			    "2026-11-30 10:00:00.338165164 +0000 UTC");
}

static void test_http_error(void **state)
{
	char buf[256];
	json_t *st = json_pack("{s:s,s:s}", "kind", "Status", "message", "Unauthorized");

	assert_string_equal(kubelet_http_error("PUT", "https://h:1", "/x", 401, st, NULL, buf,
					       sizeof(buf)),
			    "Unauthorized");
	assert_string_equal(kubelet_http_error("POST", "https://h:1", "/x", 0, NULL, "refused",
					       buf, sizeof(buf)),
			    "Post \"https://h:1/x\": refused");
	json_decref(st);
}

/* ---- KubeletConfiguration --------------------------------------------------------------- */

static int load_text(struct kubelet_config *c, const char *text)
{
	char path[] = "/tmp/cube-kcfg-XXXXXX";
	int fd = mkstemp(path), rc;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (int)strlen(text));
	close(fd);
	rc = kubelet_config_load(c, path);
	unlink(path);
	return rc;
}

static void test_config(void **state)
{
	struct kubelet_config c;

	kubelet_config_init(&c);
	assert_true(c.node_status_update_frequency_ns == 10 * NS_PER_SEC);
	assert_true(c.node_status_report_frequency_ns == 5 * NS_PER_MIN);
	assert_int_equal(c.node_lease_duration_s, 40);
	assert_int_equal(c.port, 10250);
	assert_true(c.exit_after_ns == 5 * NS_PER_MIN);
	assert_int_equal(load_text(&c, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
				       "kind: KubeletConfiguration\n"
				       "rotateCertificates: true\n"
				       "serverTLSBootstrap: true\n"
				       "selfHeal: true\n"
				       "nodeStatusUpdateFrequency: 4s\n"
				       "nodeLeaseDurationSeconds: 20\n"
				       "maxPods: 250\n"
				       "port: 10350\n"
				       "registerWithTaints:\n"
				       "- {key: dedicated, value: infra, effect: NoSchedule}\n"
				       "cgroupDriver: systemd\n"),
			 0);
	kubelet_config_set(&c.node_name, "n1");
	kubelet_config_set(&c.root_dir, "/var/lib/k");
	kubelet_config_finish(&c);
	assert_true(c.rotate_certificates && c.server_tls_bootstrap && c.self_heal);
	assert_true(c.node_status_update_frequency_ns == 4 * NS_PER_SEC);
	/* An explicit update frequency is also the report frequency (upstream). */
	assert_true(c.node_status_report_frequency_ns == 4 * NS_PER_SEC);
	assert_int_equal(c.node_lease_duration_s, 20);
	assert_int_equal(c.max_pods, 250);
	assert_int_equal(c.port, 10350);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(c.register_with_taints, 0), "value")),
			    "infra");
	assert_string_equal(c.cert_dir, "/var/lib/k/pki");
	assert_string_equal(c.kubeconfig, "/var/lib/k/kubelet.conf");
	kubelet_config_free(&c);

	kubelet_config_init(&c);
	assert_int_equal(load_text(&c, "nodeStatusUpdateFrequency: 20s\n"
				       "nodeStatusReportFrequency: 1m30s\n"),
			 0);
	kubelet_config_finish(&c);
	assert_true(c.node_status_report_frequency_ns == 90 * NS_PER_SEC);
	assert_non_null(c.node_name); /* the host name */
	kubelet_config_free(&c);

	kubelet_config_init(&c);
	assert_true(load_text(&c, "nodeStatusUpdateFrequency: soon\n") < 0);
	assert_non_null(strstr(err_msg(), "nodeStatusUpdateFrequency"));
	assert_true(load_text(&c, "rotateCertificates: \"yes please\"\n") < 0);
	assert_non_null(strstr(err_msg(), "rotateCertificates: must be a boolean"));
	assert_true(load_text(&c, "kind: KubeProxyConfiguration\n") < 0);
	assert_true(load_text(&c, "registerWithTaints: [{key: a, effect: Sometimes}]\n") < 0);
	assert_true(kubelet_config_load(&c, "/nonexistent/kubelet.yaml") < 0);
	kubelet_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deadline_bounds),   cmocka_unit_test(test_deadline_uniform),
		cmocka_unit_test(test_backoff_arithmetic), cmocka_unit_test(test_backoff_schedule),
		cmocka_unit_test(test_waits_for_deadline), cmocka_unit_test(test_csr_name),
		cmocka_unit_test(test_go_time),           cmocka_unit_test(test_http_error),
		cmocka_unit_test(test_config),           cmocka_unit_test(test_cred_write),
	};
	/* The manager's lines would bury cmocka's; keep only errors' worth. */
	if (!getenv("CUBE_TEST_LOG"))
		log_set_fd(open("/dev/null", 1));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
