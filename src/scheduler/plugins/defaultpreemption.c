/*
 * DefaultPreemption (PostFilter): when no node fits, find one where
 * deleting lower-priority pods would let the pod in, delete them, and
 * nominate the node. Upstream's evaluator (framework/preemption): nodes
 * rejected as UnschedulableAndUnresolvable are not candidates; on a
 * candidate every lower-priority pod is removed, then the most important
 * are put back while the pod still fits; the candidate with the lowest
 * highest-victim priority, then the lowest priority sum, then the fewest
 * victims, then the latest-started highest victim, wins. PodDisruption-
 * Budgets are not considered (cube serves none).
 *
 * Its messages, from the nested FitError when nothing helps: "0/3 nodes are
 * available: 3 Preemption is not helpful for scheduling.", per node "No
 * preemption victims found for incoming pod", and "not eligible due to
 * preemptionPolicy=Never.", all prefixed "preemption: ".
 */
#include "scheduler/internal.h"

#include "base/jx.h"
#include "base/rand.h"
#include "base/strv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_HELPFUL "Preemption is not helpful for scheduling"
#define NO_VICTIMS "No preemption victims found for incoming pod"

static int64_t prio(const json_t *pod)
{
	return jx_int(pod, "spec.priority", 0);
}

/* MoreImportantPod: higher priority, then the earlier start. */
static int more_important(const void *a, const void *b)
{
	const json_t *pa = *(json_t *const *)a, *pb = *(json_t *const *)b;
	const char *sa = jx_str(pa, "status.startTime"), *sb = jx_str(pb, "status.startTime");
	if (prio(pa) != prio(pb))
		return prio(pa) > prio(pb) ? -1 : 1;
	if (!sa || !sb)
		return sa ? -1 : sb ? 1 : 0;
	return strcmp(sa, sb);
}

/* A node info holding only `keep` of ni's pods. */
static void without(const struct node_info *ni, json_t **keep, size_t n, struct node_info *out)
{
	char key[512];

	*out = *ni;
	out->pods = (struct hmap)HMAP_INIT;
	memset(&out->requested, 0, sizeof(out->requested));
	out->nz_cpu = out->nz_memory = 0;
	for (size_t i = 0; i < n; i++) {
		struct pod_req r;
		snprintf(key, sizeof(key), "%s/%s", jx_str(keep[i], "metadata.namespace") ?: "",
			 jx_str(keep[i], "metadata.name") ?: "");
		hmap_put(&out->pods, key, keep[i]);
		pod_requests(keep[i], &r);
		resources_add(&out->requested, &r.r, 1);
		out->nz_cpu += r.nz_cpu;
		out->nz_memory += r.nz_memory;
	}
}

struct candidate {
	const struct node_info *ni;
	json_t **victims;
	size_t n;
};

/* SelectVictimsOnNode: 0 with the victims, or the status why not. */
static int select_victims(struct sched *s, const struct cycle *cy, const struct node_info *ni,
			  struct candidate *out, struct status *st)
{
	size_t total = hmap_len(&ni->pods), nkeep = 0, nvict = 0;
	json_t **keep = calloc(total + 1, sizeof(*keep)), **vict = calloc(total + 1, sizeof(*vict));
	struct node_info tmp;
	const char *k;
	void *v;

	if (!keep || !vict)
		abort();
	for (size_t it = 0; hmap_next(&ni->pods, &it, &k, &v);)
		if (prio(v) < prio(cy->pod))
			vict[nvict++] = v;
		else
			keep[nkeep++] = v;
	if (!nvict) {
		status_add(st, CODE_UNRESOLVABLE, NO_VICTIMS);
		goto fail;
	}
	without(ni, keep, nkeep, &tmp);
	if (!sched_fits(s, cy, &tmp, st)) {
		hmap_free(&tmp.pods);
		goto fail;
	}
	hmap_free(&tmp.pods);
	/* Reprieve the most important first, while the pod still fits. */
	qsort(vict, nvict, sizeof(*vict), more_important);
	out->n = 0;
	for (size_t i = 0; i < nvict; i++) {
		struct status probe = {0};
		keep[nkeep++] = vict[i];
		without(ni, keep, nkeep, &tmp);
		if (!sched_fits(s, cy, &tmp, &probe)) {
			nkeep--;
			vict[out->n++] = vict[i];
		}
		hmap_free(&tmp.pods);
	}
	free(keep);
	out->ni = ni;
	out->victims = vict;
	return 0;
fail:
	free(keep);
	free(vict);
	return -1;
}

/* pickOneNodeForPreemption's criteria, in order; true when a beats b. */
static bool better(const struct candidate *a, const struct candidate *b)
{
	int64_t ha = prio(a->victims[0]), hb = prio(b->victims[0]), sa = 0, sb = 0;
	const char *ta, *tb;

	if (ha != hb)
		return ha < hb;
	for (size_t i = 0; i < a->n; i++)
		sa += prio(a->victims[i]) + INT64_C(2147483648);
	for (size_t i = 0; i < b->n; i++)
		sb += prio(b->victims[i]) + INT64_C(2147483648);
	if (sa != sb)
		return sa < sb;
	if (a->n != b->n)
		return a->n < b->n;
	ta = jx_str(a->victims[0], "status.startTime");
	tb = jx_str(b->victims[0], "status.startTime");
	return ta && tb && strcmp(ta, tb) > 0;
}

/* podTerminatingByPreemption: being deleted by a preemption of ours. */
static bool preempted(const json_t *pod)
{
	const json_t *c = jx_condition(json_object_get(pod, "status"), "DisruptionTarget");
	return c && !strcmp(jx_str(c, "status") ?: "", "True") &&
	       !strcmp(jx_str(c, "reason") ?: "", "PreemptionByScheduler");
}

const char *preemption_post_filter(struct sched *s, struct cycle *cy, struct status *statuses,
				   size_t n, char *buf, size_t len, char *nominated, size_t nlen)
{
	const char *policy = jx_str(cy->pod, "spec.preemptionPolicy");
	const char *nom = jx_str(cy->pod, "status.nominatedNodeName");
	struct status *dry = calloc(n + 1, sizeof(*dry));
	struct candidate best = {0};
	size_t potential = 0, start;
	char inner[2048];

	if (!dry)
		abort();
	nominated[0] = '\0';
	if (policy && !strcmp(policy, "Never")) {
		snprintf(buf, len, "preemption: not eligible due to preemptionPolicy=Never.");
		free(dry);
		return buf;
	}
	if (nom && *nom) {
		const struct node_info *ni = scache_node(cy->cache, nom);
		for (size_t i = 0; ni && i < cy->cache->n; i++)
			if (cy->cache->list[i] == ni && statuses[i].code == CODE_UNSCHEDULABLE) {
				const char *k;
				void *v;
				for (size_t it = 0; hmap_next(&ni->pods, &it, &k, &v);)
					if (prio(v) < prio(cy->pod) &&
					    jx_get(v, "metadata.deletionTimestamp") &&
					    preempted(v)) {
						snprintf(buf, len,
							 "preemption: not eligible due to a terminating "
							 "pod on the nominated node.");
						free(dry);
						return buf;
					}
			}
	}
	/* Nodes where it might help: those not rejected as unresolvable. */
	for (size_t i = 0; i < n; i++)
		if (statuses[i].code == CODE_UNSCHEDULABLE)
			potential++;
		else
			status_add(&dry[i], CODE_UNRESOLVABLE, NOT_HELPFUL);
	start = n ? (size_t)rand_below(n) : 0;
	for (size_t j = 0; potential && j < n; j++) {
		size_t i = (start + j) % n;
		struct candidate c = {0};
		if (statuses[i].code != CODE_UNSCHEDULABLE)
			continue;
		if (select_victims(s, cy, cy->cache->list[i], &c, &dry[i]) < 0)
			continue;
		if (!best.ni || better(&c, &best)) {
			free(best.victims);
			best = c;
		} else {
			free(c.victims);
		}
	}
	if (!best.ni) {
		fit_error_text(inner, sizeof(inner), n, dry, n, NULL); /* the nested FitError */
		snprintf(buf, len, "preemption: %s", inner);
		free(dry);
		return buf;
	}
	snprintf(nominated, nlen, "%s", best.ni->name);
	sched_preempt(s, cy->pod, best.ni->name, best.victims, best.n);
	free(best.victims);
	free(dry);
	buf[0] = '\0';
	return buf;
}
