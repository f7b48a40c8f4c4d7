/*
 * The node lifecycle controller against a real in-process API server, on
 * the virtual clock, with upstream's defaults (5 s monitor period, 50 s
 * grace, 0.1 nodes/s eviction rate). The test plays the kubelets: it creates
 * Nodes with a Ready condition and renews their Leases every second while a
 * node is "alive".
 *
 * Covered: Ready → Unknown (NodeStatusUnknown, "Kubelet stopped posting node
 * status.") within one monitor period of the grace period; unreachable
 * NoSchedule and NoExecute taints; NoExecute taints one per 10 s in a
 * Normal zone; none in a small zone in PartialDisruption, none when every
 * zone is fully disrupted (and the ones present removed); taints off when
 * the node renews again; the zone-state and rate arithmetic for every
 * state, large zone included.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "client/rest.h"
#include "controllers/controllers.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
#define MAXN 8

struct world {
	struct testenv env;
	struct kubeconfig cm_kc;
	struct controller_manager *cm;
	int n;
	bool alive[MAXN];
	int64_t no_execute_at[MAXN]; /* first seen with a NoExecute taint, 0: never */
	int64_t unknown_at[MAXN];
};

#define pump(w, quiet) testenv_pump(&(w)->env, quiet)
#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)

/* ---- the kubelets the test plays ---------------------------------------------------- */

static bool has_taint(const json_t *node, const char *key, const char *effect);

static void name_of(int i, char *buf, size_t n)
{
	snprintf(buf, n, "n%d", i);
}

static void create_node(struct world *w, int i, const char *zone)
{
	char name[16], now[TIME_BUF];
	json_t *node, *lease;
	struct testenv_result r;

	name_of(i, name, sizeof(name));
	time_format_rfc3339(clock_now(), now);
	/* With what the controllers' view of a Node leaves out (nodeInfo,
	 * allocatable): the Unknown write must keep them. */
	node = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:[{s:s,s:s,s:s,s:s,s:s,s:s}],s:{s:s},"
			 "s:{s:s}}}",
			 "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
			 "topology.kubernetes.io/zone", zone, "status", "conditions", "type",
			 "Ready", "status", "True", "reason", "KubeletReady", "message",
			 "kubelet is posting ready status", "lastHeartbeatTime", now,
			 "lastTransitionTime", now, "nodeInfo", "kubeletVersion", "v1.32.0",
			 "allocatable", "cpu", "2");
	r = call(w, "POST", "/api/v1/nodes", node);
	assert_int_equal(r.status, 201);
	json_decref(node);
	/* TaintNodesByCondition: every new Node starts not-ready:NoSchedule. */
	assert_true(has_taint(r.body, "node.kubernetes.io/not-ready", "NoSchedule"));
	json_decref(r.body);
	time_format_rfc3339_micro(clock_now(), now);
	lease = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:s}}", "apiVersion",
			  "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", name,
			  "namespace", "kube-node-lease", "spec", "holderIdentity", name,
			  "leaseDurationSeconds", 40, "renewTime", now);
	r = call(w, "POST", LEASES, lease);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(lease);
	w->alive[i] = true;
	if (i >= w->n)
		w->n = i + 1;
}

static void renew(struct world *w, int i)
{
	char path[128], name[16], now[TIME_BUF];
	struct testenv_result r;
	json_t *l;

	name_of(i, name, sizeof(name));
	snprintf(path, sizeof(path), LEASES "/%s", name);
	r = call(w, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	l = json_deep_copy(r.body);
	json_decref(r.body);
	jx_set_str(l, "spec.renewTime", time_format_rfc3339_micro(clock_now(), now));
	r = call(w, "PUT", path, l);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(l);
}

/* A pod bound to node i, Ready as its kubelet would report it. */
static void create_pod(struct world *w, const char *name, int i)
{
	char node[16], path[128], now[TIME_BUF];
	json_t *pod, *copy;
	struct testenv_result r;

	name_of(i, node, sizeof(node));
	pod = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
			"Pod", "metadata", "name", name, "namespace", "default", "spec", "nodeName",
			node, "containers", "name", "c", "image", "nginx");
	r = call(w, "POST", "/api/v1/namespaces/default/pods", pod);
	assert_int_equal(r.status, 201);
	json_decref(pod);
	copy = json_deep_copy(r.body);
	json_decref(r.body);
	time_format_rfc3339(clock_now(), now);
	jx_set_str(copy, "status.phase", "Running");
	jx_set(copy, "status.conditions",
	       json_pack("[{s:s,s:s,s:s}]", "type", "Ready", "status", "True",
			 "lastTransitionTime", now));
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s/status", name);
	r = call(w, "PUT", path, copy);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(copy);
}

static const char *pod_ready(struct world *w, const char *name, char *buf, size_t n)
{
	char path[128];
	struct testenv_result r;
	json_t *c;
	size_t k;

	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
	r = call(w, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	snprintf(buf, n, "%s", "");
	json_array_foreach(jx_get(r.body, "status.conditions"), k, c) if (
		!strcmp(jx_str(c, "type") ?: "", "Ready")) snprintf(buf, n, "%s", jx_str(c, "status"));
	json_decref(r.body);
	return buf;
}

static json_t *get_node(struct world *w, int i)
{
	char path[64], name[16];
	struct testenv_result r;

	name_of(i, name, sizeof(name));
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	r = call(w, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	return r.body;
}

static bool has_taint(const json_t *node, const char *key, const char *effect)
{
	json_t *t;
	size_t k;
	json_array_foreach(jx_get(node, "spec.taints"), k, t) if (
		!strcmp(jx_str(t, "key") ?: "", key) &&
		!strcmp(jx_str(t, "effect") ?: "", effect)) return true;
	return false;
}

static const json_t *ready_of(const json_t *node)
{
	json_t *c;
	size_t k;
	json_array_foreach(jx_get(node, "status.conditions"), k, c) if (
		!strcmp(jx_str(c, "type") ?: "", "Ready")) return c;
	return NULL;
}

/* One virtual second: the live nodes renew, the controller runs, and the
 * test notes when each node went Unknown and got its NoExecute taint. */
static void second(struct world *w)
{
	clock_advance(NS_PER_SEC);
	for (int i = 0; i < w->n; i++)
		if (w->alive[i])
			renew(w, i);
	pump(w, 10);
	for (int i = 0; i < w->n; i++) {
		json_t *node = get_node(w, i);
		const json_t *ready = ready_of(node);
		if (!w->unknown_at[i] && ready && !strcmp(jx_str(ready, "status"), "Unknown"))
			w->unknown_at[i] = clock_now();
		if (!w->no_execute_at[i] &&
		    (has_taint(node, "node.kubernetes.io/unreachable", "NoExecute") ||
		     has_taint(node, "node.kubernetes.io/not-ready", "NoExecute")))
			w->no_execute_at[i] = clock_now();
		json_decref(node);
	}
}

static void seconds(struct world *w, int n)
{
	for (int i = 0; i < n; i++)
		second(w);
}

/* ---- the world -------------------------------------------------------------------------- */

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "nlc", &w->cm_kc, "nodelifecycle", true, NULL);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	testenv_cm_stop(&w->env, &w->cm_kc, w->cm);
	free(w);
	return 0;
}

/* ---- the tests -------------------------------------------------------------------------- */

static void test_zone_arithmetic(void **state)
{
	struct nlc_opts o;

	(void)state;
	nlc_opts_default(&o);
	assert_true(o.node_monitor_period_ns == 5 * NS_PER_SEC);
	assert_true(o.node_monitor_grace_period_ns == 50 * NS_PER_SEC);
	assert_true(o.node_startup_grace_period_ns == 60 * NS_PER_SEC);
	assert_int_equal(nlc_zone_state(10, 0, 0.55), ZONE_NORMAL);
	assert_int_equal(nlc_zone_state(3, 2, 0.55), ZONE_NORMAL);        /* ≤ 2 not ready */
	assert_int_equal(nlc_zone_state(3, 3, 0.55), ZONE_NORMAL);        /* 50 % < 55 % */
	assert_int_equal(nlc_zone_state(2, 3, 0.55), ZONE_PARTIAL_DISRUPTION);
	assert_int_equal(nlc_zone_state(0, 1, 0.55), ZONE_FULL_DISRUPTION);
	assert_int_equal(nlc_zone_state(0, 0, 0.55), ZONE_NORMAL);
	assert_true(nlc_zone_qps(&o, ZONE_NORMAL, 5, false) == 0.1);
	assert_true(nlc_zone_qps(&o, ZONE_PARTIAL_DISRUPTION, 51, false) == 0.01);
	assert_true(nlc_zone_qps(&o, ZONE_PARTIAL_DISRUPTION, 50, false) == 0);
	assert_true(nlc_zone_qps(&o, ZONE_FULL_DISRUPTION, 5, false) == 0.1);
	assert_true(nlc_zone_qps(&o, ZONE_FULL_DISRUPTION, 5, true) == 0);
	assert_true(nlc_zone_qps(&o, ZONE_NORMAL, 5, true) == 0);
}

/* Two nodes, one stops renewing: Unknown at 50 s (+ at most one 5 s
 * period), unreachable NoSchedule and NoExecute; back when it renews. */
static void test_unknown_after_grace_and_back(void **state)
{
	struct world *w = *state;
	int64_t stop;
	json_t *node;
	const json_t *ready;

	create_node(w, 0, "z1");
	create_node(w, 1, "z1");
	create_pod(w, "on-n1", 1);
	create_pod(w, "on-n0", 0);
	seconds(w, 10);
	/* Both report Ready: the controller has lifted the not-ready taint. */
	for (int i = 0; i < 2; i++) {
		node = get_node(w, i);
		assert_false(has_taint(node, "node.kubernetes.io/not-ready", "NoSchedule"));
		json_decref(node);
	}
	w->alive[1] = false;
	stop = clock_now(); /* its last renewal was a second ago at most */
	seconds(w, 70);
	assert_true(w->unknown_at[1] > 0);
	fprintf(stderr, "Ready went Unknown %.1f s after the last renewal\n",
		(double)(w->unknown_at[1] - stop) / 1e9);
	/* upstream's granularity: the controller notes a renewal at its next
	 * pass (≤ 5 s late, on its own clock) and finds the node stale at the
	 * first pass after probe + 50 s — so 50–60 s after the last renewal,
	 * never sooner than the grace period. */
	assert_true(w->unknown_at[1] - stop >= 50 * NS_PER_SEC);
	assert_true(w->unknown_at[1] - stop <= 61 * NS_PER_SEC);
	assert_int_equal(w->unknown_at[0], 0);
	node = get_node(w, 1);
	ready = ready_of(node);
	assert_string_equal(jx_str(ready, "reason"), "NodeStatusUnknown");
	assert_string_equal(jx_str(ready, "message"), "Kubelet stopped posting node status.");
	/* The status was written whole: not from the controllers' view. */
	assert_string_equal(jx_str(node, "status.nodeInfo.kubeletVersion"), "v1.32.0");
	assert_string_equal(jx_str(node, "status.allocatable.cpu"), "2");
	assert_true(has_taint(node, "node.kubernetes.io/unreachable", "NoSchedule"));
	assert_true(has_taint(node, "node.kubernetes.io/unreachable", "NoExecute"));
	json_decref(node);
	/* processTaintBaseEviction sees the Ready status from before the pass's
	 * own update, so the node is queued at the next pass; a Normal zone's
	 * full bucket then taints it within the 100 ms tick. */
	fprintf(stderr, "NoExecute %.1f s after Unknown\n",
		(double)(w->no_execute_at[1] - w->unknown_at[1]) / 1e9);
	assert_true(w->no_execute_at[1] - w->unknown_at[1] >= 4 * NS_PER_SEC);
	assert_true(w->no_execute_at[1] - w->unknown_at[1] <= 7 * NS_PER_SEC);
	node = get_node(w, 0);
	assert_false(has_taint(node, "node.kubernetes.io/unreachable", "NoSchedule"));
	json_decref(node);
	/* MarkPodsNotReady: its pod is not Ready any more, the other node's is. */
	{
		char buf[16];
		struct testenv_result r;
		bool node_event = false, pod_event = false;
		json_t *e;
		size_t k;

		assert_string_equal(pod_ready(w, "on-n1", buf, sizeof(buf)), "False");
		assert_string_equal(pod_ready(w, "on-n0", buf, sizeof(buf)), "True");
		r = call(w, "GET", "/api/v1/namespaces/default/events", NULL);
		json_array_foreach(json_object_get(r.body, "items"), k, e)
		{
			const char *reason = jx_str(e, "reason") ?: "", *msg = jx_str(e, "message");
			const char *kind = jx_str(e, "involvedObject.kind") ?: "";
			node_event |= !strcmp(reason, "NodeNotReady") && !strcmp(kind, "Node") &&
				      !strcmp(msg, "Node n1 status is now: NodeNotReady");
			pod_event |= !strcmp(reason, "NodeNotReady") && !strcmp(kind, "Pod") &&
				     !strcmp(msg, "Node is not ready") &&
				     !strcmp(jx_str(e, "type") ?: "", "Warning");
		}
		json_decref(r.body);
		assert_true(node_event);
		assert_true(pod_event);
	}

	/* It renews again and posts Ready: the taints come off. */
	{
		char now[TIME_BUF];
		json_t *copy = json_deep_copy(node = get_node(w, 1)), *c;
		size_t k;
		struct testenv_result r;
		time_format_rfc3339(clock_now(), now);
		json_array_foreach(jx_get(copy, "status.conditions"), k, c)
		{
			json_object_set_new(c, "status", json_string("True"));
			json_object_set_new(c, "lastHeartbeatTime", json_string(now));
			json_object_set_new(c, "lastTransitionTime", json_string(now));
		}
		r = call(w, "PUT", "/api/v1/nodes/n1/status", copy);
		assert_int_equal(r.status, 200);
		json_decref(r.body);
		json_decref(copy);
		json_decref(node);
	}
	w->alive[1] = true;
	seconds(w, 8);
	node = get_node(w, 1);
	assert_false(has_taint(node, "node.kubernetes.io/unreachable", "NoSchedule"));
	assert_false(has_taint(node, "node.kubernetes.io/unreachable", "NoExecute"));
	json_decref(node);
}

/* Five nodes, two stop (a Normal zone): NoExecute taints 10 s apart. */
static void test_normal_zone_rate(void **state)
{
	struct world *w = *state;
	int64_t gap;

	for (int i = 0; i < 5; i++)
		create_node(w, i, "z1");
	seconds(w, 5);
	w->alive[3] = w->alive[4] = false;
	seconds(w, 80);
	assert_true(w->no_execute_at[3] > 0 && w->no_execute_at[4] > 0);
	gap = llabs(w->no_execute_at[4] - w->no_execute_at[3]);
	fprintf(stderr, "NoExecute taints %.1f s apart\n", (double)gap / 1e9);
	assert_true(gap >= 9 * NS_PER_SEC && gap <= 11 * NS_PER_SEC);
	for (int i = 0; i < 3; i++)
		assert_int_equal(w->no_execute_at[i], 0);
}

static void fast_eviction(struct controller_manager_opts *o)
{
	nlc_opts_default(&o->nlc);
	o->nlc.node_eviction_rate = 100;
}

/* A rate above one node per 100 ms tick drains at that rate: three nodes
 * stop together and all three NoExecute taints come within one tick of
 * each other (a burst-1 bucket taken once per tick would space them 0.1 s
 * apart, 10 nodes/s whatever the flag says). */
static void test_eviction_rate_above_ten_per_second(void **state)
{
	struct world *w = *state;
	int64_t first = 0, last = 0;

	testenv_cm_stop(&w->env, &w->cm_kc, w->cm);
	memset(w, 0, sizeof(*w));
	w->cm = testenv_cm_start(&w->env, "nlc", &w->cm_kc, "nodelifecycle", true,
				 fast_eviction);
	for (int i = 0; i < 8; i++)
		create_node(w, i, "z1");
	seconds(w, 5);
	w->alive[5] = w->alive[6] = w->alive[7] = false;
	while (!w->unknown_at[5] || !w->unknown_at[6] || !w->unknown_at[7])
		second(w);
	for (int step = 0; step < 500 && !(w->no_execute_at[5] && w->no_execute_at[6] &&
					    w->no_execute_at[7]);
	     step++) {
		clock_advance(20 * NS_PER_MS);
		pump(w, 5);
		for (int i = 5; i < 8; i++) {
			json_t *node = get_node(w, i);
			if (!w->no_execute_at[i] &&
			    has_taint(node, "node.kubernetes.io/unreachable", "NoExecute"))
				w->no_execute_at[i] = clock_now();
			json_decref(node);
		}
	}
	for (int i = 5; i < 8; i++) {
		assert_true(w->no_execute_at[i] > 0);
		if (!first || w->no_execute_at[i] < first)
			first = w->no_execute_at[i];
		if (w->no_execute_at[i] > last)
			last = w->no_execute_at[i];
	}
	fprintf(stderr, "three NoExecute taints within %.2f s at rate 100\n",
		(double)(last - first) / 1e9);
	assert_true(last - first <= 100 * NS_PER_MS);
}

/* Five nodes, three stop: PartialDisruption in a small zone — no NoExecute
 * taint (rate 0), though the NoSchedule ones come. */
static void test_small_zone_partial_disruption(void **state)
{
	struct world *w = *state;
	json_t *node;

	for (int i = 0; i < 5; i++)
		create_node(w, i, "z1");
	seconds(w, 5);
	w->alive[2] = w->alive[3] = w->alive[4] = false;
	seconds(w, 90);
	for (int i = 2; i < 5; i++) {
		assert_true(w->unknown_at[i] > 0);
		assert_int_equal(w->no_execute_at[i], 0);
		node = get_node(w, i);
		assert_true(has_taint(node, "node.kubernetes.io/unreachable", "NoSchedule"));
		json_decref(node);
	}
}

/* Every node of the only zone stops: FullDisruption everywhere — no
 * NoExecute taint at all. */
static void test_full_disruption(void **state)
{
	struct world *w = *state;

	for (int i = 0; i < 3; i++)
		create_node(w, i, "z1");
	seconds(w, 5);
	for (int i = 0; i < 3; i++)
		w->alive[i] = false;
	seconds(w, 90);
	for (int i = 0; i < 3; i++) {
		assert_true(w->unknown_at[i] > 0);
		assert_int_equal(w->no_execute_at[i], 0);
	}
}

/* Admission never trips over a malformed spec (cube still stores these:
 * typed validation of Node is issue 14's; upstream answers 400). */
static void test_malformed_node_spec(void **state)
{
	struct world *w = *state;
	static const char *const bodies[] = {
		"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"bad1\"},\"spec\":5}",
		"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"bad2\"},"
		"\"spec\":{\"taints\":7}}",
	};

	for (size_t i = 0; i < 2; i++) {
		json_t *body = json_loads(bodies[i], 0, NULL);
		struct testenv_result r = call(w, "POST", "/api/v1/nodes", body);
		fprintf(stderr, "malformed node spec %zu: HTTP %d\n", i, r.status);
		assert_true(r.status > 0); /* answered, alive (ASan: no use after free) */
		json_decref(r.body);
		json_decref(body);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zone_arithmetic),
		cmocka_unit_test_setup_teardown(test_unknown_after_grace_and_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_normal_zone_rate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eviction_rate_above_ten_per_second, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_small_zone_partial_disruption, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_full_disruption, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_node_spec, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
