/*
 * kubelet — cube's node agent, as upstream 1.32's kubelet behaves towards
 * the API server: the TLS bootstrap with a token, client and serving
 * certificate rotation at a jittered 70–90 % of the lifetime, the Node
 * object and its status, the node Lease, and pods bound to the node run by
 * a simulated runtime.
 *
 * Two bootstrap paths, as upstream's buildKubeletClientConfig: with
 * rotateCertificates the client certificate manager bootstraps in the
 * background (CSRs named csr-*, the bootstrap token's) while the kubelet
 * runs, and a watchdog ends the process with status 1 when no valid
 * certificate has been current for --exit-after (5 min) and the server
 * answered the manager; without it, a foreground bootstrap (node-csr-<hash>)
 * and a static certificate that, once expired, is still presented — 401s,
 * NotReady, no exit. cube's --self-heal re-bootstraps in place instead.
 *
 * Everything runs on one loop and reads the process clock, so a test can
 * drive a kubelet (or a thousand, see kubelet_pool) on the virtual clock.
 * Components talk only through the API server (DESIGN.md §1).
 *
 * Ownership: a kubelet_config owns its strings (kubelet_config_free);
 * kubelet_new copies the config; the loop is borrowed and must outlive the
 * kubelet. Threads: the loop's thread only.
 */
#ifndef CUBE_KUBELET_KUBELET_H
#define CUBE_KUBELET_KUBELET_H

#include "base/loop.h"
#include "base/strv.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>

#define KUBELET_VERSION "v1.32.0"
#define KUBELET_RUNTIME_VERSION "cube://0.1.0"

struct kubelet;

/*
 * Flags and KubeletConfiguration fields, upstream's names in comments.
 * Unset strings are NULL; kubelet_config_finish fills the derived defaults.
 */
struct kubelet_config {
	char *node_name;            /* --hostname-override; default: the host name */
	char *root_dir;             /* --root-dir; default /var/lib/kubelet */
	char *cert_dir;             /* --cert-dir; default <root-dir>/pki */
	char *kubeconfig;           /* --kubeconfig; default <root-dir>/kubelet.conf (cube) */
	char *bootstrap_kubeconfig; /* --bootstrap-kubeconfig */
	char *node_ip;              /* --node-ip; default 127.0.0.1 */
	char *source_address;       /* cube's: the local address its API connections
	                               start from (a hollow node's own on loopback) */
	struct strv node_labels;    /* --node-labels, "key=value" each */
	json_t *register_with_taints; /* registerWithTaints: [{key, value, effect}] */

	bool rotate_certificates;         /* rotateCertificates / --rotate-certificates */
	bool server_tls_bootstrap;        /* serverTLSBootstrap / --rotate-server-certificates */
	int64_t node_status_update_frequency_ns; /* nodeStatusUpdateFrequency, 10s */
	int64_t node_status_report_frequency_ns; /* nodeStatusReportFrequency, 5m */
	int node_lease_duration_s;        /* nodeLeaseDurationSeconds, 40 */
	int max_pods;                     /* maxPods, 110 */
	char *address;                    /* address the HTTPS server binds, 0.0.0.0 */
	int port;                         /* port / --port: 10250; 0 = no server; -1 = any free
					     port (tests; kubelet_port() says which) */
	char *tls_cert_file, *tls_private_key_file; /* tlsCertFile / tlsPrivateKeyFile */
	char *client_ca_file; /* authentication.x509.clientCAFile / --client-ca-file: the
				 HTTPS server asks a certificate this CA signed (but for
				 /healthz), as anonymous: false does; NULL: serves anyone */

	/* cube's own */
	bool self_heal;            /* selfHeal / --self-heal: re-bootstrap in place when the
				      client certificate expires */
	bool certificate_condition; /* certificateCondition / --certificate-condition: the
				       ClientCertificateExpiring node condition */
	int64_t pod_start_delay_ns; /* --pod-start-delay, 1s */
	int64_t pod_stop_delay_ns;  /* simulated container stop time, 1s */
	int64_t exit_after_ns;     /* --exit-after, 5m: the watchdog's shutdown threshold
				      (rotation only; upstream's is fixed at 5m) */
	bool name_in_logs;         /* add node="<name>" to lines (hollow kubelets) */
	/* Hollow kubelets: the first Lease renewal and status sync wait a
	 * random part of their period, as kubelets started at random moments
	 * would; upstream's 4 % jitter after that. A pool started at once
	 * would otherwise renew in lockstep. (cube's; a kubelet alone never.) */
	bool random_phase;

	/*
	 * Where upstream's kubelet would end the process (the watchdog, a
	 * failed start: status 1). NULL: exit(status). The hollow pool
	 * restarts the kubelet instead, as systemd would.
	 */
	void (*on_exit)(void *arg, struct kubelet *k, int status);
	void *on_exit_arg;

	/* set by the parsers, for defaulting (upstream's rule: an explicit
	 * update frequency is also the report frequency unless that is set) */
	bool update_frequency_set, report_frequency_set;
};

/* Upstream's defaults. */
void kubelet_config_init(struct kubelet_config *c);
void kubelet_config_free(struct kubelet_config *c);
/* A deep copy into dst (which need not be initialised). */
void kubelet_config_copy(struct kubelet_config *dst, const struct kubelet_config *src);
/* Replace a string field with a copy of v (NULL clears it). */
void kubelet_config_set(char **field, const char *v);
/*
 * Apply a KubeletConfiguration document (kubelet.config.k8s.io/v1beta1),
 * YAML or JSON. Durations are Go strings ("10s", "5m0s"). Unknown fields are
 * warned about, not refused, as upstream's lenient decoding does.
 * 0, or ERR_INVALID / ERR_PARSE / ERR_NOTFOUND with err_msg().
 */
int kubelet_config_load(struct kubelet_config *c, const char *path);
/* The KubeletConfiguration (kubelet.config.k8s.io/v1beta1) c runs with:
 * what kubelet_config_apply reads back to the same settings. New reference. */
json_t *kubelet_config_json(const struct kubelet_config *c);
/* That document as YAML at path (replaced atomically, not synced; 0644). */
int kubelet_config_write(const struct kubelet_config *c, const char *path);
int kubelet_config_apply(struct kubelet_config *c, const json_t *doc);
/* Derived defaults: node name, cert dir, kubeconfig, report frequency. */
void kubelet_config_finish(struct kubelet_config *c);

/* Nothing happens until kubelet_start. NULL with err_msg() on bad config. */
struct kubelet *kubelet_new(struct loop *loop, const struct kubelet_config *cfg);
/*
 * Bootstrap if needed, then register, heartbeat and run pods — all
 * asynchronously on the loop. 0, or an error found before any I/O (no
 * kubeconfig and no bootstrap kubeconfig, unreadable files).
 */
int kubelet_start(struct kubelet *k);
void kubelet_free(struct kubelet *k);

const char *kubelet_name(const struct kubelet *k);
/* A network partition between this kubelet and the API server (rest.h's
 * rest_set_unreachable on every client it has or makes): on, its requests
 * fail as when the route is gone; off, it reconnects as after any outage. */
void kubelet_set_unreachable(struct kubelet *k, bool on);
/* The HTTPS port actually bound, or 0 when none. */
int kubelet_port(const struct kubelet *k);

/*
 * The name upstream's TLS bootstrap gives its CSR (k8s-facts §1.7):
 * "node-csr-" + base64url-no-padding(SHA-512/256 of base64url(PKIX DER of
 * the public key) "|" base64url(CN) "|" base64url(O)... "|" base64url(usage)
 * ... "|"). The same key and subject always give the same name. Malloc'd,
 * or NULL with err_msg().
 */
char *kubelet_csr_name(EVP_PKEY *key, const char *cn, const char *const *orgs,
		       const char *const *usages);

/*
 * Hollow kubelets: n independent kubelets on one loop, named
 * <prefix>0 .. <prefix>(n-1), each under <root-dir>/<name>/ with its own
 * key, certificates (pki/), kubeconfig, rest client and connections, Lease,
 * status and pods. tmpl gives everything else; a kubelet that would exit is
 * restarted in place after 10 s, as systemd's Restart=always would. With
 * tmpl->port P > 0 the i-th serves on P+i; with -1 each on a free port.
 *
 * The pool gives the loop's timers HOLLOW_TIMER_SLACK_NS of slack (clock.h):
 * heartbeats due within 50 ms of each other go out in one wake-up, not one
 * each — 10,000 nodes' 2,000 timers a second cost the kubelets and the API
 * server about 40 % less CPU (docs/performance.md). A Lease renewed 10 s
 * apart, with upstream's 4 % jitter, moves by at most 0.5 %.
 */
#define HOLLOW_TIMER_SLACK_NS (50 * NS_PER_MS)
struct kubelet_pool;

/* Named <prefix>first .. <prefix>(first+n-1): a cluster's kubelets may
 * be several pools (processes), each with its own range. Ports stay P+i,
 * i counted within this pool. */
struct kubelet_pool *kubelet_pool_new(struct loop *loop, const struct kubelet_config *tmpl, int n,
				      const char *prefix, int first);
int kubelet_pool_start(struct kubelet_pool *p);
void kubelet_pool_free(struct kubelet_pool *p);
int kubelet_pool_size(const struct kubelet_pool *p);
/* The i-th kubelet, NULL while it is stopped. */
struct kubelet *kubelet_pool_get(const struct kubelet_pool *p, int i);

/*
 * The connections one hollow kubelet holds open at once, the figure its
 * file-descriptor budget is made of (cube up and cube kubelet
 * --hollow-nodes refuse up front what the process's limit cannot hold;
 * base/fdlimit.h). Counted in the code: over HTTP/2 every request and
 * watch of a client shares one connection, so a kubelet holds its node
 * client's and, while it bootstraps, the bootstrap token's; the transport
 * watchdog closes both when the certificate arrives (within 10 s), and the
 * node client's next request opens the one it keeps. Measured with
 * `ls /proc/PID/fd | wc -l` every 50 ms from start to 20 s after all
 * Ready: `cube up` peaks at 4.98 descriptors per node (200 nodes) and
 * 4.95 (1,000) above a control plane of about 85 — 2 × 2 + 1 — and rests
 * at 3 (one connection, both ends, and the HTTPS listener). Over HTTP/1.1
 * (DISABLE_HTTP2) it was 4 connections and 9 descriptors a node.
 */
#define KUBELET_HOLLOW_CONNS 2
/* The descriptors each hollow kubelet needs: its connections; as many
 * again when the API server they go to runs in this process (the
 * connections' other ends); and its HTTPS listener when it serves. */
long kubelet_pool_fds_per_node(bool serving, bool server_here);

/*
 * What an operator does to one node's kubelet — systemctl stop/start/
 * restart (a start reads config.yaml again), a network partition from the
 * API server and its healing, the machine's clock set off by arg ns (0:
 * right again; base/clock.h) — by node name. 0, or ERR_NOTFOUND. A stopped
 * kubelet stays stopped (no restart after 10 s) until START or RESTART.
 */
enum kubelet_pool_op {
	KUBELET_POOL_STOP,
	KUBELET_POOL_START,
	KUBELET_POOL_RESTART,
	KUBELET_POOL_PARTITION,
	KUBELET_POOL_HEAL,
	KUBELET_POOL_CLOCK_SKEW,
};
int kubelet_pool_control(struct kubelet_pool *p, const char *name, enum kubelet_pool_op op,
			 int64_t arg);
/* [{name, active, partitioned, clockSkewSeconds, time}] per node, time being
 * the node's own clock now (RFC 3339, µs); a new reference. */
json_t *kubelet_pool_status(const struct kubelet_pool *p);

/*
 * The operator's words for a pool, as a control.h request carries them
 * (cube fault, cube restart), and the one place they map to the calls
 * above — for the pool on cube up's thread and for each `cube kubelet
 * --control-socket` process alike: ["kubelet", "stop"|"start"|"restart",
 * NODE], ["partition", NODE], ["heal", NODE], ["clock-skew", NODE, NS],
 * ["nodes"] ({"nodes": kubelet_pool_status}). {"ok": true}, or {"error":
 * ...} ("no kubelet for node \"NAME\" here" for a name not in the pool); a
 * new reference. The pool's loop thread.
 */
json_t *kubelet_pool_command(struct kubelet_pool *p, const json_t *words);
/* The NODE those words name (borrowed from words), NULL when they name none
 * (["nodes"], a word missing): what a supervisor of several pools routes by. */
const char *kubelet_pool_command_node(const json_t *words);

#endif
