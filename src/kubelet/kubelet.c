/*
 * The kubelet's credentials and its life: bootstrap or load the client
 * certificate, build the node's rest client from it, rotate it (and the
 * serving certificate) with the certificate managers, and watch it as
 * upstream's transport does (pkg/kubelet/certificate/transport.go): every
 * 10 s, and when no valid certificate has been current for exit-after
 * while the server still answers, end the process so that systemd and the
 * bootstrap kubeconfig can start over. With self-heal the kubelet does that
 * start-over itself, in place, the moment the certificate expires.
 */
#include "kubelet/internal.h"

#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/timeutil.h"

#include <arpa/inet.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCHDOG_NS (10 * NS_PER_SEC)
#define HEAL_RETRY_NS (30 * NS_PER_SEC)
#define USER_AGENT "kubelet/" KUBELET_VERSION " (linux/amd64) cube/0.1.0"

const char *kubelet_name(const struct kubelet *k)
{
	return k->cfg.node_name;
}

int kubelet_port(const struct kubelet *k)
{
	return k->server_tls ? kserver_port(k->server_tls) : 0;
}

const char *kubelet_cn(const struct kubelet *k, char *buf, size_t n)
{
	snprintf(buf, n, "system:node:%s", k->cfg.node_name);
	return buf;
}

void kubelet_seen(struct kubelet *k, int status)
{
	/* transport.go's "server is responsive": an HTTP answer, 401/403 too;
	 * a 5xx is a proxy or load balancer, not the server (client-go's
	 * IsUnexpectedServerError). */
	k->responsive = status > 0 && status < 500;
}

void kubelet_exit(struct kubelet *k, int status, const char *fmt, ...)
{
	char msg[1024], q[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (k->exited)
		return;
	k->exited = true;
	if (k->cfg.on_exit) {
		log_write(status == 255 ? 'F' : 'E', __FILE__, __LINE__, "%s", msg);
		k->cfg.on_exit(k->cfg.on_exit_arg, k, status);
		return;
	}
	if (status == 255)
		LOG_FATAL("%s", msg); /* klog.Fatalf: exit status 255 */
	LOG_ERROR("\"command failed\" err=\"%s\"", log_quote(q, sizeof(q), msg));
	exit(status);
}

/* ---- credentials ------------------------------------------------------------------- */

static char *pair_pem(X509 *cert, EVP_PKEY *key, char **key_pem)
{
	*key_pem = pki_key_pem(key);
	return pki_cert_pem(cert);
}

static void start_heal(struct kubelet *k);

/* The client certificate changed (rotation, self-heal) or expired. */
static void on_client_cert(void *arg, X509 *cert, EVP_PKEY *key)
{
	struct kubelet *k = arg;
	char *key_pem, *cert_pem;

	if (!k->client)
		return;
	if (!cert) {
		/* The rotating manager's GetClientCertificate answers with an
		 * empty certificate from now on: requests are anonymous, hence 401.
		 * Without rotation upstream's transport keeps presenting the static
		 * certificate, and the API server logs why it refuses it (x509). */
		if (k->cfg.rotate_certificates) {
			rest_clear_client_cert(k->client);
			rest_close_all(k->client);
		}
		if (k->cfg.self_heal)
			start_heal(k);
		return;
	}
	cert_pem = pair_pem(cert, key, &key_pem);
	LOG_INFO("certificate rotation detected, shutting down client connections to start "
		 "using new credentials");
	if (rest_set_client_cert(k->client, cert_pem, key_pem) < 0)
		LOG_ERROR("\"Unable to use the new client certificate\" err=\"%s\"", err_msg());
	rest_close_all(k->client);
	k->last_cert_ns = clock_now();
	OPENSSL_cleanse(key_pem, strlen(key_pem));
	free(key_pem);
	free(cert_pem);
}

static void on_serving_cert(void *arg, X509 *cert, EVP_PKEY *key)
{
	struct kubelet *k = arg;
	if (cert && k->server_tls)
		kserver_use(k->server_tls, cert, key);
}

static void on_seen(void *arg, int status)
{
	kubelet_seen(arg, status);
}

/*
 * upstream's ClientsetFn: with a valid certificate, the node's own client;
 * without one, the bootstrap credentials — but only when this run
 * bootstrapped (LoadClientConfig's certConfig); else the node's client,
 * which then sends no certificate.
 */
static struct rest_client *csr_client(void *arg, bool have_cert)
{
	struct kubelet *k = arg;
	if (!have_cert && k->bootstrapped && k->boot_client)
		return k->boot_client;
	return k->client;
}

/* ---- the watchdog (transport.go) ------------------------------------------------------ */

static void on_watchdog(void *arg)
{
	struct kubelet *k = arg;
	int64_t now = clock_now();
	char d[DURATION_BUF];

	timer_after(k->watchdog, WATCHDOG_NS);
	if (k->cfg.exit_after_ns <= 0)
		return;
	if (certmgr_current(k->client_cm)) {
		k->last_cert_ns = now;
		return;
	}
	if (now <= k->last_cert_ns + k->cfg.exit_after_ns)
		return;
	duration_format(k->cfg.exit_after_ns, d);
	if (k->cfg.self_heal && k->has_boot) {
		LOG_V(2, "\"No valid client certificate for %s; self-heal is re-bootstrapping, not "
			 "exiting\"",
		      d);
		return;
	}
	if (k->responsive)
		kubelet_exit(k, 255,
			     "It has been %s since a valid client cert was found and the server is "
			     "responsive, exiting.",
			     d);
	else
		LOG_ERROR("It has been %s since a valid client cert was found, but the server is not "
			  "responsive. A restart may be necessary to retrieve new initial "
			  "credentials.",
			  d);
}

/* ---- self-heal ----------------------------------------------------------------------- */

static void on_bootstrapped(struct kubelet *k, int rc, const char *err);

static void start_heal(struct kubelet *k)
{
	if (k->bs || k->exited)
		return;
	if (!k->has_boot) {
		LOG_ERROR("\"Self-heal cannot re-bootstrap: no --bootstrap-kubeconfig; the kubelet "
			  "goes on as upstream's would\" node=\"%s\"",
			  k->cfg.node_name);
		return;
	}
	LOG_WARN("\"Client certificate expired; self-heal is re-bootstrapping from the "
		 "bootstrap kubeconfig (new key, new node-csr), without a restart\" node=\"%s\" "
		 "bootstrapKubeconfig=\"%s\"",
		 k->cfg.node_name, k->cfg.bootstrap_kubeconfig);
	k->healing = true;
	if (!(k->bs = bootstrap_start(k, true, on_bootstrapped))) {
		LOG_ERROR("\"Self-heal re-bootstrap failed, will retry\" err=\"%s\" interval=\"30s\"",
			  err_msg());
		timer_after(k->heal_retry, HEAL_RETRY_NS);
	}
}

static void on_heal_retry(void *arg)
{
	struct kubelet *k = arg;
	if (!certmgr_current(k->client_cm))
		start_heal(k);
}

static void healed(struct kubelet *k)
{
	k->healing = false;
	k->bootstrapped = true;
	/* The store has the new pair: adopting it swaps the client's
	 * credentials through on_client_cert, as a rotation would. */
	if (certmgr_reload(k->client_cm) < 0) {
		LOG_ERROR("\"Self-heal could not load the new client certificate\" err=\"%s\"",
			  err_msg());
		timer_after(k->heal_retry, HEAL_RETRY_NS);
		return;
	}
	LOG_INFO("\"Self-heal complete: the new client certificate is in use, no restart\" "
		 "node=\"%s\"",
		 k->cfg.node_name);
}

/* ---- starting ------------------------------------------------------------------------- */

static double client_ttl(void *arg)
{
	struct kubelet *k = arg;
	return k->client_cm ? certmgr_ttl_seconds(k->client_cm) : INFINITY;
}

static double server_ttl(void *arg)
{
	struct kubelet *k = arg;
	return k->serving_cm ? certmgr_ttl_seconds(k->serving_cm) : INFINITY;
}

static void register_metrics(struct kubelet *k)
{
	static const double rotation_buckets[] = {60,       3600,     14400,    86400,   604800,
						  2592000, 7776000, 15552000, 31104000, 124416000};

	k->metrics = metrics_new();
	k->m_client_errors = metrics_counter(k->metrics,
					     "kubelet_certificate_manager_client_expiration_renew_errors",
					     "Counter of certificate renewal errors.", NULL);
	k->m_server_errors = metrics_counter(k->metrics, "kubelet_server_expiration_renew_errors",
					     "Counter of certificate renewal errors.", NULL);
	k->m_server_rotation = metrics_histogram(
		k->metrics, "kubelet_certificate_manager_server_rotation_seconds",
		"Histogram of the number of seconds the previous certificate lived before being "
		"rotated.",
		NULL, rotation_buckets, sizeof(rotation_buckets) / sizeof(rotation_buckets[0]));
	metrics_gauge_func(k->metrics, "kubelet_certificate_manager_client_ttl_seconds",
			   "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The "
			   "value is in seconds until certificate expiry (negative if already "
			   "expired). If client certificate is invalid or unused, the value will be "
			   "+INF.",
			   client_ttl, k);
	metrics_gauge_func(k->metrics, "kubelet_certificate_manager_server_ttl_seconds",
			   "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving "
			   "certificate. The value is in seconds until certificate expiry (negative if "
			   "already expired). If serving certificate is invalid or unused, the value "
			   "will be +INF.",
			   server_ttl, k);
}

static int start_client_manager(struct kubelet *k, const struct kubeconfig *kc)
{
	const char *orgs[] = {"system:nodes", NULL};
	char cn[300], *initial = NULL;
	struct certmgr_config mc = {
		.name = SIGNER_KUBELET_CLIENT,
		.signer = SIGNER_KUBELET_CLIENT,
		.server = k->server,
		.cert_dir = k->cfg.cert_dir,
		.prefix = CERTSTORE_CLIENT,
		.cert_file = kc->cert_file,
		.key_file = kc->key_file,
		.rotate = k->cfg.rotate_certificates,
		.cn = kubelet_cn(k, cn, sizeof(cn)),
		.orgs = orgs,
		.client = csr_client,
		.on_change = on_client_cert,
		.on_seen = on_seen,
		.arg = k,
		.renew_errors = metrics_with(k->m_client_errors),
	};
	int rc;

	/* Embedded data (kubeadm's high-powered kubeconfig) seeds the store. */
	if (!kc->cert_file && kc->cert_data && kc->key_data)
		initial = str_printf("%s%s", kc->cert_data, kc->key_data);
	mc.initial_pem = initial;
	k->client_cm = certmgr_new(k->loop, &mc);
	rc = certmgr_start(k->client_cm);
	if (initial)
		OPENSSL_cleanse(initial, strlen(initial));
	free(initial);
	return rc;
}

static int start_serving_manager(struct kubelet *k)
{
	const char *orgs[] = {"system:nodes", NULL}, *dns[2] = {NULL}, *ips[3] = {NULL};
	unsigned char buf[16];
	char cn[300];
	size_t ni = 0;
	struct certmgr_config mc = {
		.name = SIGNER_KUBELET_SERVING,
		.signer = SIGNER_KUBELET_SERVING,
		.server = k->server,
		.cert_dir = k->cfg.cert_dir,
		.prefix = CERTSTORE_SERVER,
		.rotate = true,
		.serving = true,
		.cn = kubelet_cn(k, cn, sizeof(cn)),
		.orgs = orgs,
		.dns = dns,
		.ips = ips,
		.client = csr_client,
		.on_change = on_serving_cert,
		.on_seen = on_seen,
		.arg = k,
		.renew_errors = metrics_with(k->m_server_errors),
		.rotation_seconds = metrics_with(k->m_server_rotation),
	};

	/* SANs from the node's addresses: the Hostname (an IP SAN when it
	 * parses as one) and the InternalIP. */
	if (inet_pton(AF_INET, k->cfg.node_name, buf) == 1 ||
	    inet_pton(AF_INET6, k->cfg.node_name, buf) == 1)
		ips[ni++] = k->cfg.node_name;
	else
		dns[0] = k->cfg.node_name;
	if (!ni || strcmp(ips[0], k->cfg.node_ip))
		ips[ni++] = k->cfg.node_ip;
	k->serving_cm = certmgr_new(k->loop, &mc);
	return certmgr_start(k->serving_cm);
}

static struct rest_client *node_client(struct kubelet *k)
{
	X509 *cert = certmgr_current(k->client_cm);
	char *cert_pem = NULL, *key_pem = NULL;
	struct rest_config rc = {.server = k->server,
				 .ca_pem = k->ca_pem,
				 .user_agent = USER_AGENT,
				 /* hollow nodes share one process's descriptors */
				 .max_conns = 2};
	struct rest_client *c;

	if (cert)
		cert_pem = pair_pem(cert, certmgr_current_key(k->client_cm), &key_pem);
	rc.cert_pem = cert_pem;
	rc.key_pem = key_pem;
	c = rest_client_new(k->loop, &rc);
	if (key_pem)
		OPENSSL_cleanse(key_pem, strlen(key_pem));
	free(key_pem);
	free(cert_pem);
	return c;
}

/* The kubeconfig is in place: build the node's client and start working. */
static void run(struct kubelet *k)
{
	struct kubeconfig kc;

	if (kubeconfig_load(k->cfg.kubeconfig, &kc) < 0) {
		kubelet_exit(k, 1, "invalid kubeconfig: %s", err_msg());
		return;
	}
	k->server = strdup(kc.server ? kc.server : "");
	k->ca_pem = kc.ca_data ? strdup(kc.ca_data) : NULL;
	if (start_client_manager(k, &kc) < 0) {
		kubeconfig_free(&kc);
		kubelet_exit(k, 1, "failed to initialize client certificate manager: %s",
			     err_msg());
		return;
	}
	kubeconfig_free(&kc);
	if (!(k->client = node_client(k))) {
		kubelet_exit(k, 1, "invalid kubeconfig: %s", err_msg());
		return;
	}
	k->last_cert_ns = clock_now();
	timer_after(k->watchdog, WATCHDOG_NS);
	if (k->cfg.server_tls_bootstrap && start_serving_manager(k) < 0)
		LOG_ERROR("\"Failed to start the serving certificate manager\" err=\"%s\"", err_msg());
	if (k->cfg.port != 0) {
		k->server_tls = kserver_new(k);
		if (kserver_start(k->server_tls) < 0) {
			kubelet_exit(k, 1, "failed to listen and serve: %s", err_msg());
			return;
		}
	}
	k->hb = heartbeat_new(k);
	heartbeat_start(k->hb);
	k->pods = pods_new(k);
	pods_start(k->pods);
	LOG_INFO("\"Started kubelet\" node=\"%s\"", k->cfg.node_name);
}

static void on_bootstrapped(struct kubelet *k, int rc, const char *err)
{
	k->bs = NULL;
	if (rc < 0 && k->healing) {
		char q[1024];
		LOG_ERROR("\"Self-heal re-bootstrap failed, will retry\" err=\"%s\" interval=\"30s\"",
			  log_quote(q, sizeof(q), err));
		timer_after(k->heal_retry, HEAL_RETRY_NS);
		return;
	}
	if (rc < 0) {
		kubelet_exit(k, 1, "failed to run Kubelet: %s", err ? err : "bootstrap failed");
		return;
	}
	/* The token is not needed again soon: let its connection go. */
	rest_close_all(k->boot_client);
	if (k->healing) {
		healed(k);
		return;
	}
	k->bootstrapped = true;
	run(k);
}

/* A stable machine-id and system UUID per node name; a new boot ID per start. */
static void make_ids(struct kubelet *k)
{
	unsigned char h[32];
	unsigned int n = 0;
	char hex[65];

	EVP_Digest(k->cfg.node_name, strlen(k->cfg.node_name), h, &n, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	k->machine_id = strndup(hex, 32);
	k->system_uuid = str_printf("%.8s-%.4s-%.4s-%.4s-%.12s", hex + 32, hex + 40, hex + 44,
				    hex + 48, hex + 52);
	k->boot_id = str_printf("%08x-%04x-4%03x-%04x-%012llx", (unsigned)rand_below(1ull << 32),
				(unsigned)rand_below(1u << 16), (unsigned)rand_below(1u << 12),
				(unsigned)(0x8000 | rand_below(1u << 14)),
				(unsigned long long)rand_below(1ull << 48));
}

struct kubelet *kubelet_new(struct loop *loop, const struct kubelet_config *cfg)
{
	struct kubelet *k = calloc(1, sizeof(*k));

	if (!k)
		abort();
	k->loop = loop;
	kubelet_config_copy(&k->cfg, cfg);
	kubelet_config_finish(&k->cfg);
	if (!k->cfg.node_name || !*k->cfg.node_name || k->cfg.node_lease_duration_s <= 0 ||
	    k->cfg.node_status_update_frequency_ns <= 0) {
		err_set(ERR_INVALID, "invalid kubelet configuration: node name, lease duration and "
				     "status update frequency are required");
		kubelet_config_free(&k->cfg);
		free(k);
		return NULL;
	}
	register_metrics(k);
	make_ids(k);
	k->watchdog = loop_timer(loop, on_watchdog, k);
	k->heal_retry = loop_timer(loop, on_heal_retry, k);
	return k;
}

int kubelet_start(struct kubelet *k)
{
	const char *kc = k->cfg.kubeconfig;

	if (file_mkdirs(k->cfg.root_dir, 0750) < 0 || file_mkdirs(k->cfg.cert_dir, 0755) < 0)
		return err_wrap(ERR_IO, "failed to create the kubelet's directories");
	if (k->cfg.bootstrap_kubeconfig) {
		if (kubeconfig_load(k->cfg.bootstrap_kubeconfig, &k->boot) < 0)
			return err_wrap(ERR_INVALID, "unable to load bootstrap kubeconfig");
		k->has_boot = true;
		k->boot_client = rest_client_from_kubeconfig(k->loop, &k->boot, USER_AGENT);
		if (!k->boot_client)
			return err_wrap(ERR_INVALID, "unable to load bootstrap kubeconfig");
	}
	k->running = true;
	if (bootstrap_kubeconfig_valid(kc)) {
		LOG_V(2, "\"Kubeconfig exists and is valid, skipping bootstrap\" path=\"%s\"", kc);
		run(k);
		return 0;
	}
	if (k->has_boot) {
		if (!(k->bs = bootstrap_start(k, false, on_bootstrapped)))
			return ERR_INVALID;
		return 0;
	}
	if (!file_exists(kc))
		return err_set(ERR_NOTFOUND,
			       "invalid kubeconfig: stat %s: no such file or directory (and no "
			       "--bootstrap-kubeconfig to create it)",
			       kc);
	/* An expired or broken kubeconfig and nothing to bootstrap with: go on
	 * with it, as upstream does — requests fail until someone fixes it. */
	run(k);
	return 0;
}

void kubelet_free(struct kubelet *k)
{
	if (!k)
		return;
	bootstrap_cancel(k->bs);
	pods_free(k->pods);
	heartbeat_free(k->hb);
	kserver_free(k->server_tls);
	certmgr_free(k->client_cm);
	certmgr_free(k->serving_cm);
	timer_free(k->watchdog);
	timer_free(k->heal_retry);
	rest_client_free(k->client);
	rest_client_free(k->boot_client);
	metrics_free(k->metrics);
	kubeconfig_free(&k->boot);
	kubelet_config_free(&k->cfg);
	free(k->server);
	free(k->ca_pem);
	free(k->boot_id);
	free(k->machine_id);
	free(k->system_uuid);
	free(k);
}
