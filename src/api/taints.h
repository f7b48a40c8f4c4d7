/*
 * taints — where a pod may run, as upstream's helpers read it (k8s.io/api
 * core/v1 toleration.go, component-helpers scheduling/corev1): which
 * toleration tolerates which taint, which taints of a node a pod does not
 * tolerate, and whether a node matches a pod's nodeSelector and required
 * node affinity. Shared by the scheduler (TaintToleration, NodeAffinity)
 * and the controllers (taint eviction, DaemonSet).
 *
 * Everything borrows its arguments and allocates nothing. Threads: any.
 */
#ifndef CUBE_API_TAINTS_H
#define CUBE_API_TAINTS_H

#include <jansson.h>
#include <stdbool.h>

/* Toleration.ToleratesTaint: effect empty or equal, key empty or equal,
 * operator Exists, or Equal (or empty) with an equal value. */
bool toleration_tolerates(const json_t *toleration, const json_t *taint);
/* The first toleration in the array that tolerates taint, or NULL. */
const json_t *tolerations_find(const json_t *tolerations, const json_t *taint);
/* The first taint of the node's spec.taints whose effect is NoSchedule or
 * NoExecute and that no toleration tolerates (upstream's
 * FindMatchingUntoleratedTaint with the DoNotSchedule filter), or NULL. */
const json_t *taints_first_untolerated(const json_t *taints, const json_t *tolerations);
/* The taint's effect is one of effects (a NULL-terminated list). */
bool taint_effect_in(const json_t *taint, const char *const *effects);

/* A NodeSelectorTerm: every matchExpressions requirement (In, NotIn,
 * Exists, DoesNotExist, Gt, Lt) on the node's labels and every matchFields
 * one on metadata.name; an empty term matches nothing. */
bool node_selector_term_matches(const json_t *term, const json_t *node);
/* A pod spec's nodeSelector and its required node affinity (any term). */
bool pod_node_selector_matches(const json_t *spec, const json_t *node);

#endif
