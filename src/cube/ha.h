/*
 * ha — `cube up --ha`: kubeadm's highly available layout on one machine,
 * every part a real process this supervisor starts and watches:
 *
 *   etcd0..etcdM-1   Debian's etcd, one cluster, TLS everywhere with the
 *                    cluster's etcd PKI (pki/etcd/; each member serves its
 *                    own copy of etcd/server.crt, in etcd/<member>/, so one
 *                    member's certificate can expire alone)
 *   apiserver0..N-1  `cube apiserver` on the etcd cluster (apiserver-etcd-client)
 *   haproxy          Debian's haproxy in front of them on 127.0.0.1:PORT, TCP,
 *                    /healthz checks, as kubeadm's HA guide configures it
 *   controller-manager-0/1, scheduler-0/1  with --leader-elect
 *   kubelets         `cube kubelet --hollow-nodes N` pointed at the balancer
 *
 * Every kubeconfig names the balancer. Ports are chosen once and kept in
 * DIR/ha.json (etcd's members are known by their peer URLs), so `cube up
 * --ha` on the same DIR resumes the same cluster. Logs: DIR/logs/<name>.log.
 * A component that dies stays down (the runbook's point is to see what
 * keeps working): `cube fault kill-etcd|kill-apiserver` stop one, `cube
 * fault clear` (or the control word "start NAME") starts it again.
 *
 * Main thread; children are reaped on the loop (SIGCHLD).
 */
#ifndef CUBE_HA_H
#define CUBE_HA_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct loop;

struct ha_opts {
	const char *dir;
	int port; /* the balancer's (default 6443) */
	int nodes, etcd_members, apiservers;
	int64_t cert_ttl_ns;                  /* the signer's --cluster-signing-duration */
	int64_t node_monitor_grace_period_ns; /* 0: upstream's */
	int64_t status_update_ns;             /* kubelets' nodeStatusUpdateFrequency */
	bool self_heal;
};

struct ha;

/* The PKI (with etcd's), then every process. NULL with err_msg(). */
struct ha *ha_start(struct loop *loop, const struct ha_opts *o);
/* The descriptors each node costs the kubelets' process, which inherits
 * this one's limit: `cube up --ha` checks it before starting anything. */
long ha_fds_per_node(void);
/* The balancer's port (the one kubeconfigs name). */
int ha_port(const struct ha *h);
/* The running children's VmRSS, added to r (cube/cluster.h). */
struct cluster_rss;
void ha_rss(const struct ha *h, struct cluster_rss *r);
/* SIGTERM to everything, kubelets first, etcd last; waits; frees. */
void ha_stop(struct ha *h);
/*
 * The supervisor's words (control.h): "status" → {"components": [{name,
 * pid, running, port}]}; "kill NAME" (SIGKILL, stays down); "start NAME";
 * "restart NAME". A new reference; {"error": ...} on failure.
 */
json_t *ha_control(struct ha *h, const json_t *words);

#endif
