/*
 * The kubelet's credentials and its life, as upstream 1.32's
 * cmd/kubelet/app/server.go (buildKubeletClientConfig) and
 * pkg/kubelet/certificate/transport.go arrange them:
 *
 *   rotateCertificates on  — "Client rotation is on, will bootstrap in
 *     background": the kubeconfig that points at kubelet-client-current.pem
 *     is written at once, the client certificate manager gets the first
 *     certificate (CSR csr-*, the bootstrap token's) and every later one,
 *     and the kubelet runs meanwhile. The transport watchdog checks the
 *     manager every 10 s (every second until a first certificate): a new
 *     certificate closes the connections; no valid certificate for
 *     exit-after while the manager thinks the server healthy ends the
 *     process with status 1, so that systemd and the bootstrap kubeconfig
 *     start over.
 *   rotateCertificates off — the foreground bootstrap (node-csr-<hash>,
 *     bootstrap.c) when the kubeconfig is not valid, then a static
 *     certificate: when it expires the kubelet keeps presenting it, gets
 *     401s and stays NotReady until a person acts. No watchdog.
 *
 * cube's self-heal (off by default) re-bootstraps in place the moment the
 * client certificate expires, instead of waiting for a person or a restart.
 */
#include "kubelet/internal.h"

#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/intern.h"
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
#define WATCHDOG_FIRST_NS NS_PER_SEC /* until the first certificate */
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

void kubelet_exit(struct kubelet *k, int status, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (k->exited)
		return;
	k->exited = true;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	LOG_ERROR("%s%s", line, k->log_kv);
	if (k->cfg.on_exit) {
		k->cfg.on_exit(k->cfg.on_exit_arg, k, status);
		return;
	}
	exit(status);
}

void kubelet_fail(struct kubelet *k, const char *fmt, ...)
{
	char msg[1024], q[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* cobra's RunE error, as cmd/kubelet prints it. */
	kubelet_exit(k, 1, "\"command failed\" err=\"%s\"", log_quote(q, sizeof(q), msg));
}

/* ---- credentials ------------------------------------------------------------------- */

static void start_heal(struct kubelet *k);
static void healed(struct kubelet *k);

static void close_connections(struct kubelet *k)
{
	LOG_INFO("\"Certificate rotation detected, shutting down client connections to start "
		 "using new credentials\"%s",
		 k->log_kv);
	rest_close_all(k->client);
}

/* The client certificate changed (rotation, self-heal) or expired. */
static void on_client_cert(void *arg, X509 *cert, EVP_PKEY *key)
{
	struct kubelet *k = arg;

	if (!k->client)
		return;
	if (!cert) {
		/* The rotating manager's GetClientCertificate answers with no
		 * certificate from now on: new connections are anonymous. Open ones
		 * keep the certificate they were made with, so the API server goes
		 * on logging why it refuses it (x509). Without rotation the static
		 * transport keeps presenting it everywhere. */
		if (k->cfg.rotate_certificates)
			rest_clear_client_cert(k->client);
		if (k->cfg.self_heal)
			start_heal(k);
		return;
	}
	if (k->healing)
		healed(k);
	rest_set_client_pair(k->client, cert, key);
	/* With rotation the watchdog closes the connections at its next check,
	 * as upstream's; a static transport has no watchdog (self-heal's new
	 * certificate). */
	if (!k->cfg.rotate_certificates)
		close_connections(k);
}

/* What every client of this kubelet's starts with: the partition it is
 * under, and the node's own source address. */
static void client_setup(struct kubelet *k, struct rest_client *c)
{
	rest_set_unreachable(c, k->unreachable);
	if (k->cfg.source_address && rest_set_source_address(c, k->cfg.source_address) < 0)
		LOG_ERROR("\"Ignoring the source address\" err=\"%s\"", err_msg());
}

/* A client from the kubeconfig's own files, made anew for each request as
 * upstream's createClientFunc(certConfig): it presents whatever the files
 * hold now — after expiry, the expired certificate. */
static struct rest_client *kubeconfig_client(struct kubelet *k)
{
	struct kubeconfig kc;

	rest_client_free(k->kc_client);
	k->kc_client = NULL;
	if (kubeconfig_load(k->cfg.kubeconfig, &kc) < 0)
		return NULL;
	k->kc_client = rest_client_from_kubeconfig(k->loop, &kc, USER_AGENT);
	kubeconfig_free(&kc);
	if (k->kc_client)
		client_setup(k, k->kc_client);
	return k->kc_client;
}

/*
 * upstream's ClientsetFn for the client certificate: with a valid
 * certificate, the node's own client; without one, certConfig — the
 * bootstrap kubeconfig when this run had to bootstrap (or self-heal is
 * re-bootstrapping), else the kubeconfig as it is on disk.
 */
static struct rest_client *csr_client(void *arg, bool have_cert)
{
	struct kubelet *k = arg;
	if (have_cert)
		return k->client;
	if (k->csr_with_boot && k->boot_client)
		return k->boot_client;
	return kubeconfig_client(k);
}

/* The serving certificate manager always asks with the node's own client
 * (NewKubeletServerCertificateManager's kubeClient). */
static struct rest_client *serving_client(void *arg, bool have_cert)
{
	struct kubelet *k = arg;
	(void)have_cert;
	return k->client;
}

/* ---- the transport watchdog (transport.go, rotation only) ---------------------------- */

/* Go's time.Time String() of a time.Now() value, with its monotonic part. */
static void go_now_string(struct kubelet *k, int64_t wall, int64_t mono, char *buf, size_t n)
{
	char when[GO_TIME_BUF];
	double m = (double)(mono - k->start_mono) / 1e9;
	snprintf(buf, n, "%s m=+%.9f", go_time_string(wall, when), m);
}

static void on_watchdog(void *arg)
{
	struct kubelet *k = arg;
	X509 *curr = certmgr_current(k->client_cm);
	unsigned gen = certmgr_generation(k->client_cm);
	char d[DURATION_BUF], since[96];

	timer_after(k->watchdog, k->has_cert ? WATCHDOG_NS : WATCHDOG_FIRST_NS);
	if (k->cfg.exit_after_ns > 0) {
		if (curr) {
			k->last_cert_ns = clock_now();
			k->last_cert_mono = clock_mono();
		} else if (clock_now() > k->last_cert_ns + k->cfg.exit_after_ns) {
			duration_format(k->cfg.exit_after_ns, d);
			go_now_string(k, k->last_cert_ns, k->last_cert_mono, since, sizeof(since));
			if (k->cfg.self_heal && k->has_boot)
				LOG_V(2, "\"No valid client certificate; self-heal is re-bootstrapping, "
					 "not exiting\" shutdownThreshold=\"%s\"%s",
				      d, k->log_kv);
			else if (certmgr_server_healthy(k->client_cm))
				kubelet_exit(k, 1,
					     "\"No valid client certificate is found and the server is "
					     "responsive, exiting.\" lastCertificateAvailabilityTime=\"%s\" "
					     "shutdownThreshold=\"%s\"",
					     since, d);
			else
				LOG_ERROR("\"No valid client certificate is found but the server is not "
					  "responsive. A restart may be necessary to retrieve new initial "
					  "credentials.\" lastCertificateAvailabilityTime=\"%s\" "
					  "shutdownThreshold=\"%s\"%s",
					  since, d, k->log_kv);
		}
	}
	if (!curr || gen == k->seen_generation || k->exited)
		return;
	k->seen_generation = gen;
	k->has_cert = true;
	close_connections(k);
	/* The bootstrap token is not needed again soon: its connection goes
	 * too, rather than idling out (one connection per kubelet). */
	if (k->boot_client)
		rest_close_all(k->boot_client);
}

/* ---- self-heal ----------------------------------------------------------------------- */

static void on_bootstrapped(struct kubelet *k, int rc, const char *err);

static void start_heal(struct kubelet *k)
{
	if (k->bs || k->exited || k->healing)
		return;
	if (!k->has_boot) {
		LOG_ERROR("\"Self-heal cannot re-bootstrap: no --bootstrap-kubeconfig; the kubelet "
			  "goes on as upstream's would\" node=\"%s\"",
			  k->cfg.node_name);
		return;
	}
	LOG_WARN("\"Client certificate expired; self-heal is re-bootstrapping from the "
		 "bootstrap kubeconfig, without a restart\" node=\"%s\" bootstrapKubeconfig=\"%s\"",
		 k->cfg.node_name, k->cfg.bootstrap_kubeconfig);
	k->healing = true;
	if (k->cfg.rotate_certificates) {
		/* What a restart would do: certConfig becomes the bootstrap
		 * kubeconfig and the manager asks at once (csr-*, the token's). */
		k->csr_with_boot = true;
		certmgr_rotate_now(k->client_cm);
		return;
	}
	/* Without rotation: the foreground bootstrap, with a fresh key. */
	if (!(k->bs = bootstrap_start(k, true, on_bootstrapped))) {
		LOG_ERROR("\"Self-heal re-bootstrap failed, will retry\" err=\"%s\" interval=\"30s\"",
			  err_msg());
		k->healing = false;
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

/* The client certificate's series exist only with rotation, as upstream
 * registers them in buildKubeletClientConfig's rotation branch. */
static void register_metrics(struct kubelet *k)
{
	static const double rotation_buckets[] = {60,       3600,     14400,    86400,   604800,
						  2592000, 7776000, 15552000, 31104000, 124416000};

	k->metrics = metrics_new();
	if (k->cfg.rotate_certificates) {
		k->m_client_errors = metrics_counter(
			k->metrics, "kubelet_certificate_manager_client_expiration_renew_errors",
			"Counter of certificate renewal errors.", NULL);
		metrics_gauge_func(k->metrics, "kubelet_certificate_manager_client_ttl_seconds",
				   "Gauge of the TTL (time-to-live) of the Kubelet's client "
				   "certificate. The value is in seconds until certificate expiry "
				   "(negative if already expired). If client certificate is invalid or "
				   "unused, the value will be +INF.",
				   client_ttl, k);
	}
	/* The serving series come with the serving certificate manager, which
	 * exists only with serverTLSBootstrap (else a file-backed one, without
	 * metrics). */
	if (!k->cfg.server_tls_bootstrap)
		return;
	k->m_server_errors = metrics_counter(k->metrics, "kubelet_server_expiration_renew_errors",
					     "Counter of certificate renewal errors.", NULL);
	k->m_server_rotation = metrics_histogram(
		k->metrics, "kubelet_certificate_manager_server_rotation_seconds",
		"Histogram of the number of seconds the previous certificate lived before being "
		"rotated.",
		NULL, rotation_buckets, sizeof(rotation_buckets) / sizeof(rotation_buckets[0]));
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
		.log_kv = k->log_kv,
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
		.arg = k,
		.renew_errors = k->m_client_errors ? metrics_with(k->m_client_errors) : NULL,
	};
	int rc;

	/* Embedded data (kubeadm's high-powered kubeconfig) seeds the store. */
	if (!kc->cert_file && kc->cert_data && kc->key_data)
		initial = str_printf("%s%s", kc->cert_data, kc->key_data);
	mc.initial_pem = initial;
	k->client_cm = certmgr_new(k->loop, &mc);
	if (mc.rotate)
		LOG_V(2, "\"Starting client certificate rotation\"%s", k->log_kv);
	rc = certmgr_start(k->client_cm);
	pki_secret_free(initial);
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
		.log_kv = k->log_kv,
		.signer = SIGNER_KUBELET_SERVING,
		.server = k->server,
		.cert_dir = k->cfg.cert_dir,
		.prefix = CERTSTORE_SERVER,
		.cert_file = k->cfg.tls_cert_file,
		.key_file = k->cfg.tls_private_key_file,
		.rotate = true,
		.serving = true,
		.cn = kubelet_cn(k, cn, sizeof(cn)),
		.orgs = orgs,
		.dns = dns,
		.ips = ips,
		.client = serving_client,
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

void kubelet_addresses_observed(struct kubelet *k)
{
	/* newGetTemplateFn has no template, so no serving CSR, until the node
	 * has addresses: the first Node the kubelet builds observes them. */
	if (!k->cfg.server_tls_bootstrap || k->serving_cm)
		return;
	if (start_serving_manager(k) < 0)
		LOG_ERROR("\"Failed to start the serving certificate manager\" err=\"%s\"%s",
			  err_msg(), k->log_kv);
}

static struct rest_client *node_client(struct kubelet *k)
{
	struct rest_config rc = {.server = k->server,
				 .ca_pem = k->ca_pem,
				 .user_agent = USER_AGENT,
				 /* hollow nodes share one process's descriptors */
				 .max_conns = 2};
	struct rest_client *c;

	/* The manager's own pair, not a parsed copy a node (7 KB). A static
	 * certificate is presented even when it has expired. */
	rc.cert = certmgr_current(k->client_cm);
	rc.key = certmgr_current_key(k->client_cm);
	if (!rc.cert && !k->cfg.rotate_certificates)
		rc.cert = certmgr_held(k->client_cm, &rc.key);
	if (!rc.cert)
		rc.key = NULL;
	c = rest_client_new(k->loop, &rc);
	if (c)
		client_setup(k, c);
	return c;
}

/* The kubeconfig is in place: build the node's client and start working. */
static void run(struct kubelet *k)
{
	struct kubeconfig kc;

	if (kubeconfig_load_lazy(k->cfg.kubeconfig, &kc) < 0) {
		kubelet_fail(k, "failed to run Kubelet: invalid kubeconfig: %s", err_msg());
		return;
	}
	k->server = str_intern(kc.server ? kc.server : "");
	k->ca_pem = str_intern(kc.ca_data);
	if (start_client_manager(k, &kc) < 0) {
		kubeconfig_free(&kc);
		kubelet_fail(k, "failed to run Kubelet: failed to initialize client certificate manager: %s",
			     err_msg());
		return;
	}
	kubeconfig_free(&kc);
	if (!(k->client = node_client(k))) {
		kubelet_fail(k, "failed to run Kubelet: invalid kubeconfig: %s", err_msg());
		return;
	}
	/* cube's self-heal: a static certificate found expired at start. */
	if (k->cfg.self_heal && !k->cfg.rotate_certificates && !certmgr_current(k->client_cm))
		start_heal(k);
	if (k->cfg.rotate_certificates) {
		/* UpdateTransport: lastCertAvailable starts now; a certificate
		 * current from the start is no rotation. */
		k->last_cert_ns = clock_now();
		k->last_cert_mono = clock_mono();
		if (certmgr_current(k->client_cm)) {
			k->has_cert = true;
			k->seen_generation = certmgr_generation(k->client_cm);
		}
		timer_after(k->watchdog, k->has_cert ? WATCHDOG_NS : WATCHDOG_FIRST_NS);
	}
	if (k->cfg.port != 0) {
		k->server_tls = kserver_new(k);
		if (kserver_start(k->server_tls) < 0) {
			kubelet_fail(k, "failed to run Kubelet: failed to listen and serve: %s", err_msg());
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
		LOG_ERROR("\"Self-heal re-bootstrap failed, will retry\" err=\"%s\" interval=\"30s\"%s",
			  log_quote(q, sizeof(q), err), k->log_kv);
		k->healing = false;
		timer_after(k->heal_retry, HEAL_RETRY_NS);
		return;
	}
	if (rc < 0) {
		kubelet_fail(k, "failed to run Kubelet: %s", err ? err : "bootstrap failed");
		return;
	}
	/* The token is not needed again soon: let its connection go. */
	rest_close_all(k->boot_client);
	if (k->healing) {
		/* The store has the new pair: adopting it swaps the client's
		 * credentials through on_client_cert. */
		if (certmgr_reload(k->client_cm) < 0) {
			LOG_ERROR("\"Self-heal could not load the new client certificate\" "
				  "err=\"%s\"%s",
				  err_msg(), k->log_kv);
			k->healing = false;
			timer_after(k->heal_retry, HEAL_RETRY_NS);
		}
		return; /* on_client_cert has said "Self-heal complete" */
	}
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
	{
		char uuid[RAND_UUID_LEN + 1];
		k->boot_id = str_printf("%s", rand_uuid(uuid));
	}
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
	if (k->cfg.name_in_logs)
		snprintf(k->log_kv, sizeof(k->log_kv), " node=\"%s\"", k->cfg.node_name);
	k->start_mono = clock_mono();
	register_metrics(k);
	make_ids(k);
	k->watchdog = loop_timer(loop, on_watchdog, k);
	k->heal_retry = loop_timer(loop, on_heal_retry, k);
	return k;
}

static void on_kubeconfig_written(void *arg, struct cred_write_result *res)
{
	struct kubelet *k = arg;

	k->kc_write = NULL;
	if (res->rc < 0) {
		kubelet_fail(k, "failed to run Kubelet: unable to write kubeconfig %s: %s",
			     k->cfg.kubeconfig, res->err);
		return;
	}
	LOG_V(2, "\"Use the bootstrap credentials to request a cert, and set kubeconfig to "
		 "point to the certificate dir\"%s",
	      k->log_kv);
	k->csr_with_boot = true;
	run(k);
}

/* rotateCertificates on: upstream's bootstrap.LoadClientConfig, then run;
 * the certificate manager does the rest. The kubeconfig it writes is
 * written off the loop (its fsyncs), and the kubelet runs once it is. */
static int start_background(struct kubelet *k)
{
	const char *kc = k->cfg.kubeconfig;

	LOG_INFO("\"Client rotation is on, will bootstrap in background\"%s", k->log_kv);
	if (!k->has_boot) {
		if (!file_exists(kc))
			return err_set(ERR_NOTFOUND,
				       "unable to load kubeconfig: stat %s: no such file or directory",
				       kc);
		LOG_V(2, "\"No bootstrapping requested, will use kubeconfig\"%s", k->log_kv);
	} else if (bootstrap_kubeconfig_valid(kc)) {
		LOG_V(2, "\"Current kubeconfig file contents are still valid, no bootstrap "
			 "necessary\"%s",
		      k->log_kv);
	} else {
		char *text = bootstrap_kubeconfig_text(k);

		if (!text)
			return err_wrap(ERR_IO, "unable to write kubeconfig %s", kc);
		k->kc_write = cred_write_start(
		    k->loop, &(struct cred_write_spec){.file_path = kc, .file_text = text},
		    on_kubeconfig_written, k);
		pki_secret_free(text);
		return 0;
	}
	run(k);
	return 0;
}

/* rotateCertificates off: upstream's bootstrap.LoadClientCert in the
 * foreground, then run with a static certificate. */
static int start_foreground(struct kubelet *k)
{
	const char *kc = k->cfg.kubeconfig;

	/* LoadClientCert runs only with a bootstrap kubeconfig. */
	if (k->has_boot && bootstrap_kubeconfig_valid(kc)) {
		LOG_V(2, "\"Kubeconfig exists and is valid, skipping bootstrap\" path=\"%s\"%s", kc,
		      k->log_kv);
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

int kubelet_start(struct kubelet *k)
{
	if (file_mkdirs(k->cfg.root_dir, 0750) < 0 || file_mkdirs(k->cfg.cert_dir, 0755) < 0)
		return err_wrap(ERR_IO, "failed to create the kubelet's directories");
	if (k->cfg.bootstrap_kubeconfig) {
		struct kubeconfig boot;

		if (kubeconfig_load(k->cfg.bootstrap_kubeconfig, &boot) < 0)
			return err_wrap(ERR_INVALID, "unable to load bootstrap kubeconfig");
		k->has_boot = true;
		k->boot_server = str_intern(boot.server);
		k->boot_ca_file = str_intern(boot.ca_file);
		k->boot_ca_data = str_intern(boot.ca_data);
		k->boot_client = rest_client_from_kubeconfig(k->loop, &boot, USER_AGENT);
		kubeconfig_free(&boot);
		if (!k->boot_client)
			return err_wrap(ERR_INVALID, "unable to load bootstrap kubeconfig");
		client_setup(k, k->boot_client);
	}
	k->running = true;
	return k->cfg.rotate_certificates ? start_background(k) : start_foreground(k);
}

void kubelet_set_unreachable(struct kubelet *k, bool on)
{
	struct rest_client *clients[] = {k->client, k->boot_client, k->kc_client};

	k->unreachable = on;
	for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++)
		if (clients[i])
			rest_set_unreachable(clients[i], on);
}

void kubelet_free(struct kubelet *k)
{
	if (!k)
		return;
	bootstrap_cancel(k->bs);
	cred_write_cancel(k->kc_write);
	pods_free(k->pods);
	heartbeat_free(k->hb);
	kserver_free(k->server_tls);
	certmgr_free(k->client_cm);
	certmgr_free(k->serving_cm);
	timer_free(k->watchdog);
	timer_free(k->heal_retry);
	rest_client_free(k->client);
	rest_client_free(k->boot_client);
	rest_client_free(k->kc_client);
	metrics_free(k->metrics);
	kubelet_config_free(&k->cfg);
	free(k->boot_id);
	free(k->machine_id);
	free(k->system_uuid);
	free(k);
}
