/*
 * cluster — the components of one cluster (API server, controller manager,
 * scheduler, kubelets) run as threads of this process,
 * each on its own loop (DESIGN.md §3): what `cube server` and `cube up` are
 * made of. Components still talk only through the API server.
 *
 * Many kubelets outgrow one process: its open-files limit holds about five
 * descriptors a node (both ends of every connection, and each node's HTTPS
 * listener), and one loop uses one core. With kubelet_processes > 0 the
 * hollow kubelets run instead in that many child processes ("kubelet
 * shards"), `cube kubelet --hollow-nodes M --hollow-first-index K
 * --control-socket DIR/kubelets-<i>.sock`, each with its own descriptor
 * budget, logging to DIR/logs/kubelets-<i>.log; this process keeps the API
 * server's ends. They start one after another, each when the one before
 * has its nodes' certificates, so that one bootstrap storm at a time holds
 * the API server's descriptors. A child that dies is logged and started
 * again 10 s later (systemd's Restart=always, RestartSec=10); each dies with
 * this process (PR_SET_PDEATHSIG) should it be killed.
 *
 * Main thread only (the components' own threads are internal); the kubelet
 * processes are reaped and restarted on the caller's loop (opts.loop).
 */
#ifndef CUBE_CLUSTER_H
#define CUBE_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

struct loop;

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
	/* 0: the kubelets on a thread of this process; N: in N child processes
	 * (cluster_kubelet_processes decides), nodes split evenly in contiguous
	 * ranges. They need loop: the caller's, which must outlive the cluster
	 * and run while it does. */
	int kubelet_processes;
	struct loop *loop;
};

struct cluster;

/* Create the PKI if missing, then start the API server, the controller
 * manager and the kubelets. NULL with err_msg() on failure. */
struct cluster *cluster_start(const struct cluster_opts *o);
int cluster_port(const struct cluster *c);
/*
 * How many kubelet processes `cube up --nodes nodes --kubelet-processes
 * asked` runs, room being the descriptors a process may spend on nodes (its
 * limit less what the rest needs): asked when >= 1 (at most one per node);
 * automatically none — a thread of this process, as always — when room
 * holds the nodes here or they are CLUSTER_INPROCESS_NODES at most, else
 * one per CLUSTER_NODES_PER_PROCESS, or more when each process's room
 * needs it.
 */
#define CLUSTER_INPROCESS_NODES 2000
#define CLUSTER_NODES_PER_PROCESS 2500
int cluster_kubelet_processes(int nodes, int asked, long room);
/* The descriptors each node costs this process with the kubelets here: its
 * kubelet's connections and the in-process API server's ends of them, and
 * the kubelet's HTTPS listener (kubelet.h). */
long cluster_fds_per_node(void);
/* What nodes in kubelet processes cost this process: the API server's ends
 * of their connections, two while a node bootstraps and one after, the
 * processes bootstrapping one after another. */
long cluster_shards_fds(int nodes, int processes);
/* What each node costs a kubelet process: its connections and listener
 * (the API server is elsewhere), as `cube kubelet` checks it. */
long cluster_fds_per_process_node(void);
/* The most nodes one of `processes` kubelet processes runs. */
int cluster_process_nodes(int nodes, int processes);
/* What cube up's processes hold resident, from /proc (VmRSS, KiB): this
 * one — the control plane, and the kubelets when they run here — and the
 * children running now, added up: the kubelet processes (cluster_rss), or
 * every process of --ha's layout (ha_rss). */
struct cluster_rss {
	long self_kib, children_kib;
	int children;
};
/* Add the kubelet processes running now to r. */
void cluster_rss(const struct cluster *cl, struct cluster_rss *r);
/* Add a running child's VmRSS to r (pid 0, or one /proc does not know: nothing). */
void cluster_rss_add(struct cluster_rss *r, pid_t pid);
/* A process's VmRSS in KiB (pid 0: this one), or -1 when /proc does not say. */
long proc_rss_kib(pid_t pid);
/* Stop everything (kubelets first: SIGTERM to the kubelet processes, SIGKILL
 * to any still there after 10 s), join the threads, free. Before the loop
 * of opts.loop is freed. */
void cluster_stop(struct cluster *c);

/*
 * The supervisor's commands, the words of a control.h request: "ping";
 * "status" ({port, controllers, nodes: [{name, active, partitioned,
 * clockSkewSeconds, time}]}); "kubelet stop|start|restart NODE"; "partition NODE";
 * "heal NODE"; "clock-skew NODE NS"; "controller-manager restart
 * [CONTROLLERS]"; "scheduler restart". A new reference; {"error": ...} on
 * failure. Main thread; kubelet commands run on the kubelets' thread, or go
 * to the kubelet process that runs NODE ("status": to each, their nodes
 * merged in order), while the caller waits.
 */
json_t *cluster_control(struct cluster *c, const json_t *words);

#endif
