/*
 * controllers — the controller manager: kube-controller-manager's CSR
 * controllers (csrapproving, csrsigning, csrcleaner) on one loop.
 *
 * Every controller talks only to the API server (DESIGN.md §1): one CSR
 * informer (list + watch of certificates.k8s.io/v1 certificatesigningrequests)
 * feeds a work queue per controller; approvals go through the /approval
 * subresource, certificates and Failed conditions through /status, clean-up
 * through DELETE. The manager owns its REST client, made from the kubeconfig.
 *
 * and the node lifecycle controller (nodelifecycle.c): conditions to Unknown
 * past the grace period, not-ready / unreachable taints, rate-limited
 * NoExecute tainting per zone.
 *
 * and the workload and clean-up controllers (one file each): taint
 * eviction, ReplicaSet, Deployment, StatefulSet, DaemonSet, Endpoints,
 * EndpointSlices, pod GC, namespaces.
 *
 * Upstream names are accepted in opts.controllers: each controller's alias
 * (csrapproving, nodelifecycle, replicaset, podgc, namespace, ...) or its
 * canonical <name>-controller (manager.c's table); "*" enables all, "-name"
 * disables one.
 *
 * Ownership: the manager is the caller's; strings in opts are copied, a
 * kubeconfig passed as opts.kc is borrowed for the call only.
 * Threads: the loop's thread.
 */
#ifndef CUBE_CONTROLLERS_CONTROLLERS_H
#define CUBE_CONTROLLERS_CONTROLLERS_H

#include "base/loop.h"
#include "net/secureserve.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kubeconfig;

/* node-lifecycle-controller's flags, upstream's defaults (nlc_opts_default). */
struct nlc_opts {
	int64_t node_monitor_period_ns;        /* --node-monitor-period, 5s */
	int64_t node_monitor_grace_period_ns;  /* --node-monitor-grace-period, 50s */
	int64_t node_startup_grace_period_ns;  /* --node-startup-grace-period, 60s */
	double node_eviction_rate;             /* --node-eviction-rate, 0.1 */
	double secondary_node_eviction_rate;   /* --secondary-node-eviction-rate, 0.01 */
	double unhealthy_zone_threshold;       /* --unhealthy-zone-threshold, 0.55 */
	int large_cluster_size_threshold;      /* --large-cluster-size-threshold, 50 */
};

void nlc_opts_default(struct nlc_opts *o);

enum zone_state { ZONE_INITIAL, ZONE_NORMAL, ZONE_PARTIAL_DISRUPTION, ZONE_FULL_DISRUPTION };

/* upstream's ComputeZoneState over a zone's Ready and not-Ready nodes. */
enum zone_state nlc_zone_state(int ready, int not_ready, double unhealthy_threshold);
/* The zone's NoExecute tainting rate (nodes per second) in state s. */
double nlc_zone_qps(const struct nlc_opts *o, enum zone_state s, int zone_size, bool all_full);
const char *nlc_zone_state_name(enum zone_state s);
/* upstream's GetZoneKey: "region:\\x00:zone" from the stable topology labels,
 * else the beta failure-domain ones; "" when the node has neither. */
void nlc_zone_key(const json_t *node, char *buf, size_t n);

/* The SubjectAccessReview the CSR approver asks for the requestor recorded
 * in csr (user, uid, groups, extra): may it create
 * certificatesigningrequests/<subresource> ("selfnodeclient", "nodeclient").
 * New reference. */
json_t *csrapproving_review(const json_t *csr, const char *subresource);

struct controller_manager_opts {
	const char *kubeconfig;      /* --kubeconfig: path to load ... */
	const struct kubeconfig *kc; /* ... or one already loaded (wins over the path) */
	/* Replace the kubeconfig's server (tests and in-process use pick a port
	 * at run time); NULL keeps the kubeconfig's. Not a flag. */
	const char *server;
	const char *cluster_signing_cert_file; /* --cluster-signing-cert-file */
	const char *cluster_signing_key_file;  /* --cluster-signing-key-file */
	int64_t cluster_signing_duration_ns;   /* --cluster-signing-duration, default 8760h */
	const char *controllers;               /* --controllers, default "*" */
	bool approve_kubelet_serving;          /* --approve-kubelet-serving (cube's own) */
	/* How often csrcleaner looks at every CSR: upstream's pollingInterval,
	 * 1 h. Tests shorten it. */
	int64_t cleaner_period_ns;
	int workers; /* per queue-driven controller, default 5 (upstream's) */
	int64_t terminated_pod_gc_threshold; /* --terminated-pod-gc-threshold, 12500 */
	/* --use-service-account-credentials (upstream's default false; kubeadm
	 * and cube up set it): each controller acts as
	 * system:serviceaccount:kube-system:<its name>, with a TokenRequest
	 * token; without it every controller is the manager's own user. */
	bool use_service_account_credentials;
	/* --secure-port (10257; 0: none), --bind-address, --cert-dir,
	 * --tls-cert-file, --tls-private-key-file, --client-ca-file: /healthz and
	 * /metrics (net/secureserve.h). */
	struct secure_serving_opts serving;
	struct nlc_opts nlc;
};

#define CONTROLLER_MANAGER_SIGNING_DURATION (8760 * INT64_C(3600) * INT64_C(1000000000))
#define CONTROLLER_MANAGER_CLEANER_PERIOD (INT64_C(3600) * INT64_C(1000000000))

void controller_manager_opts_default(struct controller_manager_opts *o);

/* 0, or ERR_INVALID with upstream's message ("\"x\" is not in the list of
 * known controllers"). */
int controller_manager_check_controllers(const char *list);

struct controller_manager;

/* Starts every enabled controller; NULL with err_msg() on a bad kubeconfig,
 * unreadable signing files or an unknown controller name. */
/*
 * What controller_manager_new would refuse without the API (the controller
 * list, the signing CA and key): checked before a leader election, so a
 * wrong flag fails at once rather than once the lease is won.
 */
int controller_manager_preflight(const struct controller_manager_opts *o);
struct controller_manager *controller_manager_new(struct loop *loop,
						  const struct controller_manager_opts *o);
/* The CSR informer has listed once. */
bool controller_manager_synced(const struct controller_manager *m);
/* Stops the controllers (logs as upstream does) and frees everything;
 * callbacks of requests in flight never run. NULL is a no-op. */
void controller_manager_free(struct controller_manager *m);

#endif
