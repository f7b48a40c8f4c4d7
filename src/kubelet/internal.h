/*
 * What the files of src/kubelet share: the kubelet itself and the parts it
 * is made of. Not a contract outside src/kubelet.
 *
 *   kubelet.c    credentials: the node client, the two certificate managers,
 *                the expired-certificate watchdog, self-heal; start and stop
 *   config.c     KubeletConfiguration and defaults
 *   bootstrap.c  the foreground TLS bootstrap (node-csr-<hash>, rotation off)
 *                and the kubeconfig it writes
 *   node.c       registration, node status, the node Lease
 *   pods.c       pods bound to the node, on a simulated runtime
 *   server.c     the kubelet's HTTPS server: /healthz, /metrics, /pods
 *   hollow.c     many kubelets on one loop
 *
 * Everything runs on the kubelet's loop; nothing blocks.
 */
#ifndef CUBE_KUBELET_INTERNAL_H
#define CUBE_KUBELET_INTERNAL_H

#include "kubelet/certmanager.h"
#include "kubelet/kubelet.h"

#include "client/rest.h"
#include "pki/kubeconfig.h"

#include "base/metrics.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct bootstrap;
struct heartbeat;
struct pods;
struct kserver;

struct kubelet {
	struct loop *loop;
	struct kubelet_config cfg;
	char log_kv[300];               /* ` node="<name>"` on cube's own lines in hollow mode */
	struct metrics *metrics;        /* this kubelet's own registry (hollow: one each) */
	struct metric_family *m_client_errors, *m_server_errors, *m_server_rotation;

	/* The bootstrap kubeconfig's cluster, when there is one (has_boot):
	 * what the kubeconfig written after it and the CSR logs take. Interned:
	 * every hollow node of a process has the same. */
	const char *boot_server, *boot_ca_file, *boot_ca_data;
	bool has_boot;
	const char *server;             /* the API server's URL (str_intern's) */
	const char *ca_pem;             /* trust for it (str_intern's) */

	struct rest_client *client;     /* the node's identity: everything but bootstrap */
	struct rest_client *boot_client; /* token; for CSRs only (see csr_client) */
	struct rest_client *kc_client;  /* the kubeconfig's files, for CSRs without a cert */
	bool csr_with_boot;             /* certConfig is the bootstrap kubeconfig */
	struct certmgr *client_cm, *serving_cm;
	struct bootstrap *bs;           /* a foreground bootstrap in flight */
	struct cred_write *kc_write;    /* the kubeconfig being written at start */
	bool healing;                   /* self-heal is getting a new certificate */

	struct heartbeat *hb;
	struct pods *pods;
	struct kserver *server_tls;

	/* the transport watchdog (rotation only) */
	struct timer *watchdog, *heal_retry;
	int64_t last_cert_ns, last_cert_mono; /* lastCertAvailable */
	unsigned seen_generation;       /* the client certificate the connections use */
	bool has_cert;                  /* one has been seen: check every 10 s, not 1 s */
	int64_t start_mono;
	bool running, exited;
	bool unreachable;               /* kubelet_set_unreachable: its clients' too */
	char *boot_id, *machine_id, *system_uuid;
};

/* kubelet.c */
/* End the process as upstream's would: log the E line (a klog message and
 * its key/values, already formatted), then exit(status) or the on_exit hook. */
void kubelet_exit(struct kubelet *k, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The node's addresses are known (its first Node object was built): the
 * serving certificate manager has a template from now on. */
void kubelet_addresses_observed(struct kubelet *k);
/* A start-up failure: `"command failed" err="<message>"`, status 1. */
void kubelet_fail(struct kubelet *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "system:node:<name>" into buf. */
const char *kubelet_cn(const struct kubelet *k, char *buf, size_t n);

/* bootstrap.c */
/* Is the kubeconfig's client certificate readable and valid now? */
bool bootstrap_kubeconfig_valid(const char *path);
/* The kubeconfig upstream writes from the bootstrap kubeconfig: its
 * cluster, and kubelet-client-current.pem as certificate and key (YAML,
 * malloc'd), or NULL and an error. */
char *bootstrap_kubeconfig_text(struct kubelet *k);
/*
 * Get a client certificate with the bootstrap kubeconfig and write the
 * kubeconfig that points at the store. fresh_key: never reuse a key (self-
 * heal). done(k, 0) or done(k, error, message) once, on the loop.
 */
struct bootstrap *bootstrap_start(struct kubelet *k, bool fresh_key,
				  void (*done)(struct kubelet *k, int rc, const char *err));
void bootstrap_cancel(struct bootstrap *b);

/* node.c */
struct heartbeat *heartbeat_new(struct kubelet *k);
void heartbeat_start(struct heartbeat *h);
void heartbeat_free(struct heartbeat *h);

/* pods.c */
struct pods *pods_new(struct kubelet *k);
void pods_start(struct pods *p);
/* A v1 PodList of the pods bound to this node (new reference). */
json_t *pods_list(struct pods *p);
/*
 * A container's log as the simulated runtime wrote it: the lines its
 * program's `echo` statements have printed by now, each when the script
 * reaches it (timestamps: RFC 3339 with nanoseconds before each, as the
 * CRI log format); the last tail lines (-1: all). *out malloc'd. Errors
 * in upstream's words: ERR_NOTFOUND for a pod or container this node does
 * not run, ERR_INVALID while the container has not started ("is not
 * available").
 */
int pods_container_log(struct pods *p, const char *ns, const char *name, const char *container,
		       bool timestamps, long tail, char **out);
void pods_free(struct pods *p);

/* server.c */
struct kserver *kserver_new(struct kubelet *k);
int kserver_start(struct kserver *s);
int kserver_port(const struct kserver *s);
void kserver_free(struct kserver *s);

#endif
