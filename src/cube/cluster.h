/*
 * cluster — the components of one cluster (API server, controller manager,
 * scheduler, kubelets) run as threads of this process,
 * each on its own loop (DESIGN.md §3): what `cube server` and `cube up` are
 * made of. Components still talk only through the API server.
 *
 * Main thread only (the components' own threads are internal).
 */
#ifndef CUBE_CLUSTER_H
#define CUBE_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct cluster_opts {
	const char *dir;          /* cluster dir: PKI, kubeconfigs, data/, nodes/ */
	const char *bind_address; /* API server */
	int port;                 /* 0 = any free port (kubeconfigs are rewritten) */
	int64_t cert_ttl_ns;      /* --cluster-signing-duration of the signer */
	bool approve_kubelet_serving;
	const char *controllers; /* the controller manager's --controllers, NULL: "*" */
	int64_t node_monitor_period_ns, node_monitor_grace_period_ns; /* 0: upstream's */
	int64_t pod_initial_backoff_ns, pod_max_backoff_ns;           /* the scheduler's, 0: 1s/10s */
	/* --default-not-ready-toleration-seconds, --default-unreachable-... */
	int64_t toleration_s[2];
	bool toleration_set[2];
	/* kubelets (none for `cube server`) */
	int nodes;
	const char *node_prefix;
	bool self_heal;
	bool certificate_condition; /* kubelets' ClientCertificateExpiring condition */
	bool server_tls_bootstrap;
	int64_t status_update_ns, lease_duration_s, pod_start_delay_ns, exit_after_ns;
};

struct cluster;

/* Create the PKI if missing, then start the API server, the controller
 * manager and the kubelets. NULL with err_msg() on failure. */
struct cluster *cluster_start(const struct cluster_opts *o);
int cluster_port(const struct cluster *c);
/* The descriptors each node costs this process: its kubelet's connections
 * and the in-process API server's ends of them, and the kubelet's HTTPS
 * listener (kubelet.h). */
long cluster_fds_per_node(void);
/* Stop everything (kubelets first), join the threads, free. */
void cluster_stop(struct cluster *c);

/*
 * The supervisor's commands, the words of a control.h request: "ping";
 * "status" ({port, controllers, nodes: [{name, active, partitioned,
 * clockSkewSeconds, time}]}); "kubelet stop|start|restart NODE"; "partition NODE";
 * "heal NODE"; "clock-skew NODE NS"; "controller-manager restart
 * [CONTROLLERS]"; "scheduler restart". A new reference; {"error": ...} on
 * failure. Main thread; kubelet commands run on the kubelets' thread while
 * the caller waits.
 */
json_t *cluster_control(struct cluster *c, const json_t *words);

#endif
