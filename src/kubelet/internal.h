/*
 * What the files of src/kubelet share: the kubelet itself and the parts it
 * is made of. Not a contract outside src/kubelet.
 *
 *   kubelet.c    credentials: the node client, the two certificate managers,
 *                the expired-certificate watchdog, self-heal; start and stop
 *   config.c     KubeletConfiguration and defaults
 *   bootstrap.c  TLS bootstrap with the bootstrap kubeconfig (node-csr-<hash>)
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
	struct metrics *metrics;        /* this kubelet's own registry (hollow: one each) */
	struct metric_family *m_client_errors, *m_server_errors, *m_server_rotation;

	struct kubeconfig boot;         /* the bootstrap kubeconfig, when there is one */
	bool has_boot;
	char *server;                   /* the API server's URL */
	char *ca_pem;                   /* trust for it */

	struct rest_client *client;     /* the node's identity: everything but bootstrap */
	struct rest_client *boot_client; /* token; for CSRs only (see csr_client) */
	bool bootstrapped;              /* this run got its certificate by bootstrap */
	struct certmgr *client_cm, *serving_cm;
	struct bootstrap *bs;           /* a bootstrap in flight */
	bool healing;                   /* that bootstrap is self-heal's */

	struct heartbeat *hb;
	struct pods *pods;
	struct kserver *server_tls;

	struct timer *watchdog, *heal_retry;
	int64_t last_cert_ns;           /* the last time a valid client cert was current */
	bool responsive;                /* the last answer was HTTP (below 500) */
	bool running, exited;
	char *boot_id, *machine_id, *system_uuid;
};

/* kubelet.c */
/* Record how the API server answered (status) or that it did not (0). */
void kubelet_seen(struct kubelet *k, int status);
/* Fail the way upstream's process would: exit status, or the on_exit hook. */
void kubelet_exit(struct kubelet *k, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "system:node:<name>" into buf. */
const char *kubelet_cn(const struct kubelet *k, char *buf, size_t n);

/* bootstrap.c */
/* Is the kubeconfig's client certificate readable and valid now? */
bool bootstrap_kubeconfig_valid(const char *path);
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
void pods_free(struct pods *p);

/* server.c */
struct kserver *kserver_new(struct kubelet *k);
int kserver_start(struct kserver *s);
/* Serve with this pair from the next connection on. */
void kserver_use(struct kserver *s, X509 *cert, EVP_PKEY *key);
int kserver_port(const struct kserver *s);
void kserver_free(struct kserver *s);

#endif
