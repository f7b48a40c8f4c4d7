/*
 * The scheduler against a real in-process API server, on the virtual clock.
 *
 * Covered: the backoff sequence (1, 2, 4, 8, 10, 10 s); numFeasibleNodesToFind;
 * a pod bound (Scheduled event, "Successfully assigned ns/p to n") to the
 * least allocated node; the FitError text for mixed reasons, sorted as
 * strings, with DefaultPreemption's nested message; upstream's exact text for
 * three nodes tainted unreachable; an unschedulable pod scheduled once the
 * taint comes off (event-driven, inside its backoff); preemption deleting a
 * lower-priority pod and nominating its node; a KubeSchedulerConfiguration
 * with a bad backoff refused; a pod with schedulingGates left alone until
 * they are removed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "pki/kubeconfig.h"
#include "scheduler/internal.h"
#include "scheduler/scheduler.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct world {
	struct testenv env;
	struct kubeconfig kc;
	struct scheduler *s;
};

#define call(w, method, path, body) testenv_call(&(w)->env, method, path, body)

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	struct scheduler_opts o;
	char path[160];

	clock_use_virtual(clock_now());
	if (getenv("CUBE_TEST_V"))
		log_set_verbosity(atoi(getenv("CUBE_TEST_V")));
	else
		log_set_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	testenv_start(&w->env, "sched");
	snprintf(path, sizeof(path), "%s/scheduler.conf", w->env.dir);
	assert_int_equal(kubeconfig_load(path, &w->kc), 0);
	scheduler_opts_default(&o);
	o.serving.port = 0; /* tests run side by side: no fixed port */
	o.kc = &w->kc;
	o.server = w->env.server;
	w->s = scheduler_new(w->env.loop, &o);
	assert_non_null(w->s);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	scheduler_free(w->s);
	kubeconfig_free(&w->kc);
	testenv_stop(&w->env);
	clock_use_real();
	free(w);
	return 0;
}

static void create(struct world *w, const char *path, json_t *obj)
{
	struct testenv_result r = call(w, "POST", path, obj);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(obj);
}

static void node(struct world *w, const char *name, const char *cpu, json_t *taints)
{
	json_t *n = json_pack("{s:s,s:s,s:{s:s},s:{},s:{s:{s:s,s:s,s:s}}}", "apiVersion", "v1",
			      "kind", "Node", "metadata", "name", name, "spec", "status",
			      "allocatable", "cpu", cpu, "memory", "8Gi", "pods", "110");
	struct testenv_result r;
	char path[128];

	create(w, "/api/v1/nodes", n);
	/* The admission taint not-ready:NoSchedule comes off: these nodes are
	 * Ready (no node lifecycle controller runs here). */
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	r = call(w, "GET", path, NULL);
	n = json_deep_copy(r.body);
	json_decref(r.body);
	jx_set(n, "spec.taints", taints ? taints : json_array());
	r = call(w, "PUT", path, n);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(n);
}

static void pod(struct world *w, const char *name, const char *cpu, int priority,
		const char *on_node)
{
	json_t *p = json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s,s:{s:{s:s}}}]}}", "apiVersion", "v1",
			      "kind", "Pod", "metadata", "name", name, "spec", "containers", "name",
			      "c", "image", "nginx", "resources", "requests", "cpu", cpu);
	if (priority)
		jx_set(p, "spec.priority", json_integer(priority));
	if (on_node)
		jx_set_str(p, "spec.nodeName", on_node);
	create(w, "/api/v1/namespaces/default/pods", p);
}

static json_t *get_pod(struct world *w, const char *name)
{
	char path[128];
	struct testenv_result r;
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
	r = call(w, "GET", path, NULL);
	if (r.status != 200) {
		json_decref(r.body);
		return NULL;
	}
	return r.body;
}

static const char *node_of(struct world *w, const char *name, char *buf, size_t n)
{
	json_t *p = get_pod(w, name);
	snprintf(buf, n, "%s", p ? jx_str(p, "spec.nodeName") ?: "" : "");
	json_decref(p);
	return buf;
}

/* The newest event about pod `name` with this reason: its message. */
static const char *last_event(struct world *w, const char *name, const char *reason, char *buf,
			      size_t n)
{
	struct testenv_result r = call(w, "GET", "/api/v1/namespaces/default/events", NULL);
	json_t *ev;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(json_object_get(r.body, "items"), i, ev) if (
		!strcmp(jx_str(ev, "involvedObject.name") ?: "", name) &&
		!strcmp(jx_str(ev, "reason") ?: "", reason))
	{
		assert_string_equal(jx_str(ev, "source.component"), "default-scheduler");
		snprintf(buf, n, "%s", jx_str(ev, "message"));
	}
	json_decref(r.body);
	return buf;
}

static void settle(struct world *w, int seconds)
{
	testenv_pump(&w->env, 5);
	for (int i = 0; i < seconds; i++) {
		clock_advance(NS_PER_SEC);
		testenv_pump(&w->env, 3);
	}
}

static void test_backoff_and_feasible_counts(void **state)
{
	const int64_t s = NS_PER_SEC;
	(void)state;
	assert_true(scheduler_backoff(s, 10 * s, 0) == 0);
	assert_true(scheduler_backoff(s, 10 * s, 1) == s);
	assert_true(scheduler_backoff(s, 10 * s, 2) == 2 * s);
	assert_true(scheduler_backoff(s, 10 * s, 3) == 4 * s);
	assert_true(scheduler_backoff(s, 10 * s, 4) == 8 * s);
	assert_true(scheduler_backoff(s, 10 * s, 5) == 10 * s);
	assert_true(scheduler_backoff(s, 10 * s, 40) == 10 * s);
	assert_int_equal(feasible_nodes_to_find(0, 50), 50);
	assert_int_equal(feasible_nodes_to_find(0, 1000), 420);
	assert_int_equal(feasible_nodes_to_find(0, 5000), 500);
	assert_int_equal(feasible_nodes_to_find(0, 6000), 300);
	assert_int_equal(feasible_nodes_to_find(30, 1000), 300);
}

static void test_binds_to_least_allocated(void **state)
{
	struct world *w = *state;
	char buf[2048];

	node(w, "n1", "4", NULL);
	node(w, "n2", "4", NULL);
	pod(w, "busy", "3", 0, "n1");
	settle(w, 0); /* the scheduler has seen both nodes and "busy" */
	pod(w, "p", "500m", 0, NULL);
	settle(w, 1);
	assert_string_equal(node_of(w, "p", buf, sizeof(buf)), "n2");
	assert_string_equal(last_event(w, "p", "Scheduled", buf, sizeof(buf)),
			    "Successfully assigned default/p to n2");
}

static void test_fit_error_texts(void **state)
{
	struct world *w = *state;
	json_t *unreachable = json_pack("[{s:s,s:s}]", "key", "node.kubernetes.io/unreachable",
					"effect", "NoSchedule");
	char buf[2048];
	json_t *p, *cond;

	node(w, "a1", "1", json_deep_copy(unreachable));
	node(w, "a2", "1", json_deep_copy(unreachable));
	node(w, "a3", "1", unreachable);
	pod(w, "stuck", "100m", 0, NULL);
	settle(w, 1);
	assert_string_equal(last_event(w, "stuck", "FailedScheduling", buf, sizeof(buf)),
			    "0/3 nodes are available: 3 node(s) had untolerated taint "
			    "{node.kubernetes.io/unreachable: }. preemption: 0/3 nodes are "
			    "available: 3 Preemption is not helpful for scheduling.");
	p = get_pod(w, "stuck");
	cond = jx_condition(json_object_get(p, "status"), "PodScheduled");
	assert_non_null(cond);
	assert_string_equal(jx_str(cond, "status"), "False");
	assert_string_equal(jx_str(cond, "reason"), "Unschedulable");
	assert_string_equal(jx_str(cond, "message"), buf);
	json_decref(p);

	/* The taint comes off a3: "stuck" goes there within its backoff (2 s
	 * after its second failure at most), not after the 5-minute flush. */
	{
		struct testenv_result r = call(w, "GET", "/api/v1/nodes/a3", NULL);
		json_t *n = json_deep_copy(r.body);
		json_decref(r.body);
		jx_set(n, "spec.taints", json_array());
		r = call(w, "PUT", "/api/v1/nodes/a3", n);
		json_decref(r.body);
		json_decref(n);
	}
	settle(w, 3);
	assert_string_equal(node_of(w, "stuck", buf, sizeof(buf)), "a3");

	/* Mixed reasons, sorted as strings: 1 cordoned, 2 tainted, 3 short of
	 * cpu (a3 now holds "stuck"); none has a lower-priority pod to preempt. */
	node(w, "b1", "1", NULL);
	node(w, "b2", "1", NULL);
	pod(w, "fill-b1", "1", 0, "b1"); /* so that "wide" finds no room there */
	node(w, "c1", "8", NULL);
	{
		struct testenv_result r = call(w, "GET", "/api/v1/nodes/c1", NULL);
		json_t *n = json_deep_copy(r.body);
		json_decref(r.body);
		jx_set(n, "spec.unschedulable", json_true());
		r = call(w, "PUT", "/api/v1/nodes/c1", n);
		json_decref(r.body);
		json_decref(n);
	}
	pod(w, "wide", "2", 0, NULL);
	settle(w, 1);
	assert_string_equal(last_event(w, "wide", "FailedScheduling", buf, sizeof(buf)),
			    "0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had "
			    "untolerated taint {node.kubernetes.io/unreachable: }, 3 Insufficient "
			    "cpu. preemption: 0/6 nodes are available: 3 No preemption victims "
			    "found for incoming pod, 3 Preemption is not helpful for scheduling.");

}

static bool is_str(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

static void test_preemption(void **state)
{
	struct world *w = *state;
	char buf[2048];
	json_t *p;

	node(w, "only", "2", NULL);
	pod(w, "low", "1500m", 0, "only");
	pod(w, "high", "1", 1000, NULL);
	settle(w, 1);
	/* The victim is deleted (no kubelet here: it stays Terminating) and
	 * "high" is nominated to its node: a status patch, then a delete, each
	 * a commit away — waited for with a bound, not guessed by a quiet
	 * spell (a loaded machine stretches the loop's pauses). */
	for (int i = 0; i < 500; i++) {
		json_t *high = get_pod(w, "high");
		bool nominated = is_str(jx_str(high, "status.nominatedNodeName"), "only");
		bool gone;
		json_decref(high);
		p = get_pod(w, "low");
		gone = !p || jx_get(p, "metadata.deletionTimestamp");
		json_decref(p);
		if (gone && nominated)
			break;
		testenv_pump(&w->env, 1);
	}
	p = get_pod(w, "low");
	assert_true(!p || jx_get(p, "metadata.deletionTimestamp"));
	if (p) {
		assert_non_null(jx_condition(json_object_get(p, "status"), "DisruptionTarget"));
		json_decref(p);
	}
	p = get_pod(w, "high");
	assert_string_equal(jx_str(p, "status.nominatedNodeName") ?: "", "only");
	json_decref(p);
	assert_true(strstr(last_event(w, "low", "Preempted", buf, sizeof(buf)),
			   "Preempted by pod ") == buf);
	assert_string_equal(last_event(w, "high", "FailedScheduling", buf, sizeof(buf)),
			    "0/1 nodes are available: 1 Insufficient cpu.");
}

/* NodeAffinity and NodePorts: a nodeSelector picks the labelled node; a
 * second pod asking for the same host port finds no room there. */
static void test_selector_and_ports(void **state)
{
	struct world *w = *state;
	char buf[2048];
	struct testenv_result r;
	json_t *n, *p;

	node(w, "plain", "4", NULL);
	node(w, "fast", "4", NULL);
	r = call(w, "GET", "/api/v1/nodes/fast", NULL);
	n = json_deep_copy(r.body);
	json_decref(r.body);
	jx_set(n, "metadata.labels", json_pack("{s:s}", "disk", "ssd"));
	r = call(w, "PUT", "/api/v1/nodes/fast", n);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(n);
	settle(w, 0);
	for (int i = 0; i < 2; i++) {
		char name[16];
		snprintf(name, sizeof(name), "web-%d", i);
		p = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s},s:[{s:s,s:s,s:[{s:i,s:i}]}]}}", "apiVersion",
			      "v1", "kind", "Pod", "metadata", "name", name, "spec", "nodeSelector",
			      "disk", "ssd", "containers", "name", "c", "image", "nginx", "ports",
			      "containerPort", 80, "hostPort", 8080);
		create(w, "/api/v1/namespaces/default/pods", p);
		settle(w, 1);
	}
	assert_string_equal(node_of(w, "web-0", buf, sizeof(buf)), "fast");
	assert_string_equal(node_of(w, "web-1", buf, sizeof(buf)), "");
	assert_string_equal(last_event(w, "web-1", "FailedScheduling", buf, sizeof(buf)),
			    "0/2 nodes are available: 1 node(s) didn't have free ports for the "
			    "requested pod ports, 1 node(s) didn't match Pod's node "
			    "affinity/selector. preemption: 0/2 nodes are available: 1 No preemption "
			    "victims found for incoming pod, 1 Preemption is not helpful for "
			    "scheduling.");
}

/* SchedulingGates: a gated pod is not tried; once the gates go it is bound. */
static void test_scheduling_gates(void **state)
{
	struct world *w = *state;
	char buf[256];
	json_t *p;
	struct testenv_result r;

	node(w, "g1", "2", NULL);
	p = json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s}],s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
		      "Pod", "metadata", "name", "gated", "spec", "schedulingGates", "name",
		      "example.com/wait", "containers", "name", "c", "image", "nginx");
	create(w, "/api/v1/namespaces/default/pods", p);
	settle(w, 3);
	assert_string_equal(node_of(w, "gated", buf, sizeof(buf)), "");
	assert_string_equal(last_event(w, "gated", "FailedScheduling", buf, sizeof(buf)), "");
	p = get_pod(w, "gated");
	json_object_del(json_object_get(p, "spec"), "schedulingGates");
	r = call(w, "PUT", "/api/v1/namespaces/default/pods/gated", p);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	json_decref(p);
	settle(w, 1);
	assert_string_equal(node_of(w, "gated", buf, sizeof(buf)), "g1");
}

static void test_config_validation(void **state)
{
	char path[] = "/tmp/cube-sched-cfg-XXXXXX";
	struct scheduler_opts o;
	int fd = mkstemp(path);
	const char *yaml = "apiVersion: kubescheduler.config.k8s.io/v1\n"
			   "kind: KubeSchedulerConfiguration\n"
			   "podInitialBackoffSeconds: 5\n"
			   "podMaxBackoffSeconds: 2\n";
	struct loop *loop = loop_new();

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	scheduler_opts_default(&o);
	o.serving.port = 0; /* tests run side by side: no fixed port */
	o.config = path;
	o.kubeconfig = "/nonexistent";
	assert_null(scheduler_new(loop, &o));
	assert_non_null(strstr(err_msg(), "podMaxBackoffSeconds: Invalid value: 2"));
	unlink(path);
	loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff_and_feasible_counts),
		cmocka_unit_test_setup_teardown(test_binds_to_least_allocated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fit_error_texts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_preemption, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scheduling_gates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selector_and_ports, setup, teardown),
		cmocka_unit_test(test_config_validation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
