/*
 * What the scheduler's files share: the node cache, the scheduling queue,
 * one scheduling cycle, and the plugin interface every file under plugins/
 * implements.
 *
 * Threads: the scheduler's loop, all of it.
 */
#ifndef CUBE_SCHEDULER_INTERNAL_H
#define CUBE_SCHEDULER_INTERNAL_H

#include "scheduler/scheduler.h"

#include "base/hmap.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- resources ---------------------------------------------------------------- */

#define RES_EXT_MAX 8

/* cpu in millicores, the rest in units (bytes, pods, devices). */
struct resources {
	int64_t cpu, memory, ephemeral, pods;
	int next;
	struct {
		char name[96];
		int64_t v;
	} ext[RES_EXT_MAX];
};

/* A pod's requests as upstream computes them (max of the init containers
 * and the sum of the others, plus overhead), and the "non-zero" cpu/memory
 * that scoring uses (100m / 200 MiB for a container that sets none). */
struct pod_req {
	struct resources r;
	int64_t nz_cpu, nz_memory;
};

void pod_requests(const json_t *pod, struct pod_req *out);
/* Allocatable of a node (status.allocatable). */
void node_allocatable(const json_t *node, struct resources *out);
int64_t resources_get(const struct resources *r, const char *name);
void resources_add(struct resources *r, const struct resources *d, int sign);

/* ---- the cache: nodes and the pods that count against them --------------------- */

struct node_info {
	char *name;
	json_t *node; /* a reference */
	struct resources alloc;
	struct resources requested; /* real requests of the pods on it */
	int64_t nz_cpu, nz_memory;  /* their non-zero requests */
	struct hmap pods;           /* pod key -> json_t* (reference) */
	int order;                  /* position in the cache's node list */
	/* What the filters read on every attempt, looked up once per Node
	 * version (borrowed from node). */
	const json_t *taints;
	bool unschedulable;
};

struct cache {
	struct hmap nodes;        /* name -> struct node_info* */
	struct node_info **list;  /* every node, in the order they came */
	size_t n, cap;
	struct hmap pod_node;     /* pod key -> node name it counts on (malloc'd) */
	struct hmap assumed;      /* pod key -> (void*)1: bound by us, not yet seen */
};

void scache_init(struct cache *c);
void scache_free(struct cache *c);
void scache_node_set(struct cache *c, json_t *node);
void scache_node_del(struct cache *c, const char *name);
struct node_info *scache_node(const struct cache *c, const char *name);
/* A pod that counts against its node (assigned, not terminal); pod_del if
 * it no longer does. Assumed pods count from cache_assume until the
 * informer shows them. */
void scache_pod_set(struct cache *c, const json_t *pod);
void scache_pod_del(struct cache *c, const char *key);
void scache_assume(struct cache *c, const json_t *pod, const char *node);
/* The binding failed: the pod no longer counts. */
void scache_forget(struct cache *c, const char *key);
bool scache_is_assumed(const struct cache *c, const char *key);

/* ---- statuses and plugins ------------------------------------------------------------ */

enum code { CODE_SUCCESS, CODE_UNSCHEDULABLE, CODE_UNRESOLVABLE, CODE_ERROR };

#define REASONS_MAX 6

struct status {
	enum code code;
	int plugin; /* the rejecting plugin's index, -1 none */
	int n;
	char reasons[REASONS_MAX][192];
};

void status_add(struct status *s, enum code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct cycle;

/* Cluster events a rejected pod may wait for (framework.ClusterEvent). */
enum {
	EV_NODE_ADD = 1u << 0,
	EV_NODE_TAINT = 1u << 1, /* taints or spec.unschedulable changed */
	EV_NODE_LABEL = 1u << 2,
	EV_NODE_ALLOCATABLE = 1u << 3,
	EV_NODE_CONDITION = 1u << 4,
	EV_POD_DELETE = 1u << 5,      /* an assigned pod went away */
	EV_POD_TOLERATIONS = 1u << 6, /* the unscheduled pod's own tolerations */
	EV_POD_UPDATE = 1u << 7,      /* the unscheduled pod's own spec otherwise */
};

struct plugin {
	const char *name;
	int default_weight; /* MultiPoint weight upstream gives it (0: not a scorer) */
	/* Filter: fill st (code, reasons) when the node does not fit. */
	void (*filter)(const struct cycle *cy, const struct node_info *ni, struct status *st);
	/* PreScore: false to skip scoring for this pod. */
	bool (*pre_score)(const struct cycle *cy);
	int64_t (*score)(const struct cycle *cy, const struct node_info *ni);
	/* NormalizeScore over the feasible nodes' scores. */
	void (*normalize)(int64_t *scores, size_t n);
	/* Events that may make a pod this plugin rejected schedulable. */
	unsigned events;
	/* QueueingHint: may `ev` about node (or a deleted pod) make pod
	 * schedulable? NULL: yes. */
	bool (*hint)(const json_t *pod, unsigned ev, const json_t *obj);
};

extern const struct plugin plugin_node_unschedulable, plugin_node_name, plugin_taint_toleration,
	plugin_node_affinity, plugin_node_ports, plugin_node_resources_fit,
	plugin_balanced_allocation;

/* The pod's tolerations that count for PreferNoSchedule (a new array). */
json_t *taint_toleration_prefer(const json_t *tolerations);

/* DefaultNormalizeScore(100, reverse) */
void normalize_default(int64_t *scores, size_t n, bool reverse);

#define MAX_NODE_SCORE 100

/* ---- one scheduling cycle -------------------------------------------------------------- */

struct cycle {
	const json_t *pod;
	struct pod_req req;
	const json_t *tolerations;
	const struct cache *cache;
	/* NodeAffinity's parsed view of the pod, NodePorts' host ports... */
	const json_t *host_ports; /* array of {protocol, hostIP, hostPort} */
	/* TaintToleration's scoring view: the tolerations with effect
	 * PreferNoSchedule or none (computed once per pod, not per node). */
	const json_t *prefer_tolerations;
	const char *node_name;  /* spec.nodeName, NULL or "" for none */
	const json_t *spec;     /* the pod's spec */
	bool node_selector;     /* a nodeSelector or required node affinity to check */
};

/* DefaultPreemption's PostFilter: the message, and the node the pod is
 * nominated to with the victims already deleted (into buf / nominated). */
struct sched;
const char *preemption_post_filter(struct sched *s, struct cycle *cy, struct status *statuses,
				   size_t n, char *buf, size_t len, char *nominated, size_t nlen);

/* FitError.Error: "0/<all> nodes are available: " and the histogram of the
 * statuses' reasons (sorted as strings), then " <post>" when given. */
void fit_error_text(char *buf, size_t len, size_t all, const struct status *sts, size_t n,
		    const char *post);
/* The profile's filters pass for the pod on ni (st: why not). */
bool sched_fits(struct sched *s, const struct cycle *cy, const struct node_info *ni,
		struct status *st);
/* Delete the victims for preemptor, nominated to node (events, DisruptionTarget). */
void sched_preempt(struct sched *s, const json_t *preemptor, const char *node, json_t **victims,
		   size_t n);


/* ---- the queue ---------------------------------------------------------------------------- */

enum qwhere { Q_NONE, Q_ACTIVE, Q_BACKOFF, Q_UNSCHEDULABLE, Q_FLIGHT };

struct qpod {
	char *key;
	json_t *pod;
	int64_t timestamp;   /* mono: queued, or last failure */
	int64_t initial;     /* mono: first time it was made active */
	int attempts;
	unsigned rejectors;  /* bit per plugin index */
	unsigned flight_events; /* events seen while it was being scheduled */
	enum qwhere where;
	size_t heap_at;
	bool deleted;        /* gone while in flight */
};

struct queue {
	struct hmap pods;      /* key -> struct qpod* */
	struct qpod **active;  /* heap: priority desc, then timestamp */
	size_t nactive, capactive;
	struct qpod **backoff; /* heap: backoff expiry */
	size_t nbackoff, capbackoff;
	size_t nunschedulable;
	int64_t initial_backoff_ns, max_backoff_ns, max_unschedulable_ns;
	/* plugin events, by plugin index (to match rejectors) */
	const unsigned *plugin_events;
	struct metric_family *m_pending, *m_incoming;
};

void queue_init(struct queue *q, int64_t initial_ns, int64_t max_ns);
void queue_free(struct queue *q);
/* A new unscheduled pod (or one seen again); event names the metric. */
void queue_add(struct queue *q, const char *key, json_t *pod);
void queue_update(struct queue *q, const char *key, json_t *pod, unsigned ev);
void queue_delete(struct queue *q, const char *key);
/* Pop the best active pod (NULL if none); it is in flight until done. */
struct qpod *queue_pop(struct queue *q);
/* The attempt failed: back to backoff/active or unschedulable. */
void queue_failed(struct queue *q, struct qpod *p, unsigned rejectors);
/* The attempt ended (bound or assumed): forget the pod. */
void queue_done(struct queue *q, struct qpod *p);
/* A cluster event: move the unschedulable pods it may help. hint decides
 * per pod and plugin (NULL: every registered rejector counts). */
void queue_move(struct queue *q, unsigned ev, const json_t *obj,
		bool (*hint)(void *arg, struct qpod *p, unsigned ev, const json_t *obj), void *arg,
		const char *event_name);
/* flushBackoffQCompleted and flushUnschedulablePodsLeftover. */
void queue_flush(struct queue *q, bool leftovers);
int64_t queue_backoff(const struct queue *q, const struct qpod *p);
size_t queue_active_len(const struct queue *q);

/* ---- the scheduler ------------------------------------------------------------------------------ */

struct profile {
	char *name; /* schedulerName */
	const struct plugin *filters[16];
	int nfilters;
	const struct plugin *scorers[16];
	int weights[16];
	int nscorers;
	int percentage; /* percentageOfNodesToScore for this profile, -1: global */
	bool preemption;
};

/* numFeasibleNodesToFind */
int feasible_nodes_to_find(int percentage, int nodes);

#endif
