/*
 * scheduler — kube-scheduler (1.32) on a cube loop: unscheduled pods whose
 * spec.schedulerName is one of its profiles' go through the scheduling
 * queue, the filter and score plugins, and are bound to a node through
 * pods/binding. reference/k8s-scheduler-1.32.md holds the facts it follows.
 *
 *   queue — activeQ by priority then age; backoff min(1 s·2^(attempts−1),
 *     10 s) counted from the end of the failed attempt; unschedulable pods
 *     wait for a cluster event one of their rejecting plugins registered
 *     (node added, taint/label/allocatable change, an assigned pod deleted,
 *     their own tolerations changed), or 5 minutes.
 *   plugins — filters in upstream's order: NodeUnschedulable, NodeName,
 *     TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit (the first
 *     failing one decides a node); scores: TaintToleration ×3, NodeAffinity
 *     ×2, NodeResourcesFit (LeastAllocated) ×1,
 *     NodeResourcesBalancedAllocation ×1; DefaultPreemption as PostFilter.
 *   results — the Scheduled event ("Successfully assigned ns/p to n") after
 *     the binding; otherwise the PodScheduled=False condition and a Warning
 *     FailedScheduling with upstream's FitError text ("0/3 nodes are
 *     available: 3 node(s) had untolerated taint {...}. preemption: ...").
 *
 * Metrics (registry scheduler_metrics, served on --secure-port): scheduler_pending_pods{queue},
 * scheduler_schedule_attempts_total{result,profile},
 * scheduler_scheduling_attempt_duration_seconds{result,profile},
 * scheduler_queue_incoming_pods_total{queue,event}.
 *
 * Ownership: the scheduler is the caller's; strings in opts are copied.
 * Threads: the loop's.
 */
#ifndef CUBE_SCHEDULER_SCHEDULER_H
#define CUBE_SCHEDULER_SCHEDULER_H

#include "base/loop.h"
#include "net/secureserve.h"

#include <stdbool.h>
#include <stdint.h>

struct kubeconfig;
struct metrics;

struct scheduler_opts {
	const char *kubeconfig;      /* --kubeconfig */
	const struct kubeconfig *kc; /* or one already loaded (wins) */
	const char *server;          /* replaces the kubeconfig's server (tests, cube up) */
	/* --config: a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)
	 * file; its fields override the ones below. */
	const char *config;
	int64_t pod_initial_backoff_ns;          /* podInitialBackoffSeconds, 1 s */
	int64_t pod_max_backoff_ns;              /* podMaxBackoffSeconds, 10 s */
	int64_t pod_max_in_unschedulable_ns;     /* --pod-max-in-unschedulable-pods-duration, 5m */
	int percentage_of_nodes_to_score;        /* 0: adaptive */
	/* --secure-port (10259; 0: none) and the rest of the serving flags:
	 * /healthz and /metrics (net/secureserve.h). */
	struct secure_serving_opts serving;
};

void scheduler_opts_default(struct scheduler_opts *o);

struct scheduler;

/* NULL with err_msg() on a bad kubeconfig or configuration file. */
struct scheduler *scheduler_new(struct loop *loop, const struct scheduler_opts *o);
/* Both informers have listed once. */
bool scheduler_synced(const struct scheduler *s);
struct metrics *scheduler_metrics(const struct scheduler *s);
void scheduler_free(struct scheduler *s);

/* Exposed for tests: the backoff of a pod after `attempts` attempts. */
int64_t scheduler_backoff(int64_t initial_ns, int64_t max_ns, int attempts);

#endif
