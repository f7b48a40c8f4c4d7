/*
 * cube scenario — the seeds' failures as scripts with expected outcomes,
 * played on a fresh cluster (scenario.h) — and cube demo, what `make demo`
 * runs: rotation working, then scenario 1 and recovery plan 1, narrated.
 *
 * Each expected timing comes from the cluster's configured timers: a node
 * goes Unknown --node-monitor-grace-period after its last Lease renewal
 * (checked every --node-monitor-period), is tainted in the same pass, and
 * its pods are evicted --default-unreachable-toleration-seconds after the
 * NoExecute taint.
 */
#include "cube/cli.h"
#include "cube/scenario.h"

#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE "node-1" /* the node that breaks */
#define APP "web"
#define REPLICAS 6

/* ---- conditions ----------------------------------------------------------------- */

struct node_is {
	const char *node, *ready;
};

static bool node_ready_is(struct scen *s, void *arg)
{
	const struct node_is *w = arg;
	json_t *n = scen_node(s, w->node);
	return n && !strcmp(scen_ready(n) ?: "", w->ready);
}

/* Every node's Ready is arg ("True", "Unknown"). */
static bool every_node(struct scen *s, void *arg)
{
	int n = scen_nodes(s), matching = 0;
	char name[32];

	for (int i = 0; i < n; i++) {
		json_t *node;
		snprintf(name, sizeof(name), "node-%d", i);
		node = scen_node(s, name);
		matching += node && !strcmp(scen_ready(node) ?: "", (const char *)arg);
	}
	return matching == n;
}

struct taint_is {
	const char *node, *key, *effect;
	bool on;
};

static bool taint_is(struct scen *s, void *arg)
{
	const struct taint_is *w = arg;
	json_t *n = scen_node(s, w->node);
	return n && scen_has_taint(n, w->key, w->effect) == w->on;
}

static bool is_app(const json_t *pod)
{
	return !strcmp(jx_str(pod, "metadata.labels.app") ?: "", APP);
}

static bool terminating(const json_t *pod)
{
	return jx_get(pod, "metadata.deletionTimestamp") != NULL;
}

static bool running(const json_t *pod)
{
	return !strcmp(jx_str(pod, "status.phase") ?: "", "Running") && !terminating(pod);
}

/* The app's pods: running ones (on node when given, elsewhere when not),
 * and how many are Terminating on NODE. */
struct app_count {
	int running, running_on_node, running_elsewhere, terminating_on_node, on_node;
};

static struct app_count count_app(struct scen *s)
{
	struct app_count c = {0};
	json_t **v;
	size_t n = scen_pods(s, &v);

	for (size_t i = 0; i < n; i++) {
		const char *node = jx_str(v[i], "spec.nodeName") ?: "";
		bool here = !strcmp(node, NODE);
		if (!is_app(v[i]))
			continue;
		c.on_node += here;
		c.running += running(v[i]);
		c.running_on_node += here && running(v[i]);
		c.running_elsewhere += !here && running(v[i]);
		c.terminating_on_node += here && terminating(v[i]);
	}
	free(v);
	return c;
}

static bool app_running(struct scen *s, void *arg)
{
	return count_app(s).running == REPLICAS;
}

/* Every app pod on NODE has been evicted (is Terminating). */
static bool evicted(struct scen *s, void *arg)
{
	struct app_count c = count_app(s);
	return c.on_node > 0 && c.terminating_on_node == c.on_node;
}

static bool replaced(struct scen *s, void *arg)
{
	return count_app(s).running_elsewhere == REPLICAS;
}

static bool time_reached(struct scen *s, void *arg)
{
	return scen_now(s) >= *(double *)arg;
}

/* The FailedScheduling event of pod `pinned`, its message into arg. */
static bool failed_scheduling(struct scen *s, void *arg)
{
	json_t **v;
	size_t n = scen_events(s, &v);
	bool found = false;

	for (size_t i = 0; i < n && !found; i++)
		if (!strcmp(jx_str(v[i], "reason") ?: "", "FailedScheduling") &&
		    !strcmp(jx_str(v[i], "involvedObject.name") ?: "", "pinned")) {
			snprintf(arg, 512, "%s", jx_str(v[i], "message") ?: "");
			found = true;
		}
	free(v);
	return found;
}

static bool pinned_running(struct scen *s, void *arg)
{
	json_t *p = scen_pod(s, "default/pinned");
	return p && running(p) && !strcmp(jx_str(p, "spec.nodeName") ?: "", NODE);
}

/* A CSR named prefix* from a user starting with user, issued. */
struct csr_is {
	const char *prefix, *user, *signer;
	char name[256];
};

static bool csr_issued(struct scen *s, void *arg)
{
	struct csr_is *w = arg;
	json_t **v;
	size_t n = scen_csrs(s, &v);
	bool found = false;

	for (size_t i = 0; i < n && !found; i++) {
		const char *name = jx_str(v[i], "metadata.name") ?: "";
		if (!strncmp(name, w->prefix, strlen(w->prefix)) &&
		    !strncmp(jx_str(v[i], "spec.username") ?: "", w->user, strlen(w->user)) &&
		    jx_str(v[i], "status.certificate") &&
		    (!w->signer || !strcmp(jx_str(v[i], "spec.signerName") ?: "", w->signer))) {
			snprintf(w->name, sizeof(w->name), "%s", name);
			found = true;
		}
	}
	free(v);
	return found;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static double monitor_period(const struct scen *s)
{
	return (double)scen_timings(s)->monitor_period_ns / 1e9;
}

/* What follows a monitor pass lands somewhere inside the next period. */
static double tolerance(const struct scen *s)
{
	return monitor_period(s) / 2 + 0.5;
}

/* When the node's client certificate expires, in scenario seconds. */
static double cert_expiry(struct scen *s, const char *node)
{
	char rel[256], *path;
	X509 *cert;
	double t = -1;

	snprintf(rel, sizeof(rel), "nodes/%s/pki/kubelet-client-current.pem", node);
	path = file_join(scen_dir(s), rel);
	if ((cert = pki_cert_load(path))) {
		t = scen_now(s) + (double)(pki_cert_not_after(cert) - clock_now()) / 1e9;
		X509_free(cert);
	}
	free(path);
	return t;
}

static json_t *deployment(void)
{
	return json_pack(
	    "{s:s, s:s, s:{s:s}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, s:{s:[{s:s, s:s, "
	    "s:{s:{s:s, s:s}}}]}}}}",
	    "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", APP, "spec",
	    "replicas", REPLICAS, "selector", "matchLabels", "app", APP, "template", "metadata",
	    "labels", "app", APP, "spec", "containers", "name", APP, "image", "nginx:1.27",
	    "resources", "requests", "cpu", "100m", "memory", "64Mi");
}

static json_t *pinned_pod(void)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}, s:[{s:s, s:s}]}}", "apiVersion", "v1",
	                 "kind", "Pod", "metadata", "name", "pinned", "spec", "nodeSelector",
	                 "kubernetes.io/hostname", NODE, "containers", "name", "app", "image",
	                 "nginx:1.27");
}

/* The cluster up and the workload running on every node. */
static int setup(struct scen *s)
{
	json_t *d = deployment();
	int rc;

	scen_say(s, "The nodes come up: each kubelet bootstraps with a token, gets a client "
	            "certificate through a CSR the controller manager approves and signs, and "
	            "renews its Lease.");
	if (scen_wait(s, "every node Ready", every_node, (void *)"True", 60) < 0)
		return -1;
	scen_mark(s, "kubectl create deployment " APP " --replicas=%d", REPLICAS);
	rc = scen_create(s, "/apis/apps/v1/namespaces/default/deployments", d);
	json_decref(d);
	if (!scen_expect(s, "the Deployment is created", rc == 0, "%s", rc ? err_msg() : "web"))
		return -1;
	if (scen_wait(s, "the Deployment's pods Running", app_running, NULL, 60) < 0)
		return -1;
	scen_expect(s, NODE " runs pods of the Deployment", count_app(s).running_on_node > 0,
	            "%d of %d", count_app(s).running_on_node, REPLICAS);
	scen_sh(s, true, "kubectl get nodes", NULL);
	scen_sh(s, true, "kubectl get pods -o wide", NULL);
	return 0;
}

/* Rotation working: a certificate past its rotation deadline is replaced
 * through a CSR by the node itself, and the node stays Ready. */
static int rotation(struct scen *s)
{
	struct csr_is csr = {.prefix = "csr-",
	                     .user = "system:node:node-0",
	                     .signer = "kubernetes.io/kube-apiserver-client-kubelet"};
	struct node_is ready = {"node-0", "True"};

	scen_say(s, "Rotation working: node-0's client certificate is replaced by one already past "
	            "its rotation deadline (70-90%% of its life). The kubelet asks for a new one "
	            "with a CSR of its own; the controller manager approves and signs it.");
	scen_fault(s, "expire-cert node-0 --in 2m");
	if (scen_wait(s, "node-0's rotation CSR issued", csr_issued, &csr, 30) < 0)
		return -1;
	scen_expect(s, "node-0 rotated through its own CSR", true,
	            "%s by system:node:node-0, "
	            "Approved, Issued",
	            csr.name);
	scen_expect(s, "node-0 stayed Ready", node_ready_is(s, &ready), "Ready=%s",
	            scen_ready(scen_node(s, "node-0")) ?: "?");
	scen_sh(s, true, "kubectl get csr", NULL);
	scen_sh(s, true, "ls -l \"$CUBE_DATA/nodes/node-0/pki/\"", NULL);
	return 0;
}

/* Scenario 1: rotation off on NODE, its client certificate expires. */
static int scenario_1(struct scen *s)
{
	const struct scen_timings *t = scen_timings(s);
	double grace = (double)t->grace_ns / 1e9, tol = tolerance(s), t_exp, t_unknown, renew;
	double t_noschedule, t_noexecute, t_evicted;
	struct node_is unknown = {NODE, "Unknown"};
	struct taint_is ns = {NODE, "node.kubernetes.io/unreachable", "NoSchedule", true};
	struct taint_is ne = {NODE, "node.kubernetes.io/unreachable", "NoExecute", true};
	char msg[512] = "";
	json_t *pod;
	struct app_count c;

	scen_say(s, "Scenario 1: rotation fails on " NODE " (rotateCertificates: false in its "
	            "config.yaml) and its client certificate expires.");
	if (scen_fault(s, "disable-rotation " NODE) ||
	    scen_fault(s, "expire-cert " NODE " --in 5s"))
		return -1;
	t_exp = cert_expiry(s, NODE);
	scen_wait(s, "the certificate's NotAfter", time_reached, &t_exp, 10);
	scen_mark(s, NODE "'s client certificate has expired (NotAfter)");
	scen_say(s, "The API server refuses the expired certificate (401): the Lease is no longer "
	            "renewed, the node controller marks the node Unknown after the grace period "
	            "and taints it.");
	if ((t_unknown = scen_wait(s, NODE " Ready=Unknown", node_ready_is, &unknown, grace + 30)) <
	    0)
		return -1;
	renew = scen_last_renew(s, NODE);
	scen_expect(s, "the last Lease renewal came before the certificate expired",
	            renew <= t_exp + 0.5, "renewed at t+%.1fs, expired at t+%.1fs", renew, t_exp);
	/* The first monitor pass past the grace period sees it. */
	scen_expect_time(
	    s,
	    NODE " Ready=Unknown after its last Lease renewal (--node-monitor-grace-period, "
	         "checked every --node-monitor-period)",
	    t_unknown - renew, grace + monitor_period(s) / 2, tol);
	if ((t_noschedule = scen_wait(s, "the unreachable:NoSchedule taint", taint_is, &ns, 15)) <
	        0 ||
	    (t_noexecute = scen_wait(s, "the unreachable:NoExecute taint", taint_is, &ne, 15)) < 0)
		return -1;
	/* NoSchedule follows the node's update at once; NoExecute comes from
	 * the next monitor pass, the first to observe the node Unknown
	 * (processTaintBaseEviction reads the observed condition). */
	scen_expect_time(s, "unreachable:NoSchedule taint after Ready=Unknown",
	                 t_noschedule - t_unknown, 0, 1);
	scen_expect_time(
	    s, "unreachable:NoExecute taint one --node-monitor-period after Ready=Unknown",
	    t_noexecute - t_unknown, monitor_period(s), 1);
	scen_say(s, "The runbook's diagnosis (seeds 4.4):");
	scen_sh(s, true, "kubectl get nodes", NULL);
	scen_sh(s, true, "kubectl describe node " NODE " | grep -A5 Taints", NULL);
	scen_sh(s, true, "cube logs --data-dir \"$CUBE_DATA\" apiserver | grep -i x509 | tail -2",
	        NULL);
	scen_sh(s, true,
	        "cube logs --data-dir \"$CUBE_DATA\" --node " NODE
	        " | grep -i \"certificate\\|tls\\|x509\\|unauthorized\" | tail -4",
	        NULL);
	scen_sh(s, true,
	        "openssl x509 -in \"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\" "
	        "-text -noout | grep -A2 Validity",
	        NULL);
	scen_sh(s, true, "grep -i rotate \"$CUBE_DATA/nodes/" NODE "/config.yaml\"", NULL);
	scen_sh(s, true, "kubectl get csr", NULL);

	scen_say(s,
	         "Its pods tolerate the unreachable taint for %ds (the API server's default "
	         "toleration), then taint eviction deletes them; the ReplicaSet replaces them "
	         "on the other nodes.",
	         t->toleration_s);
	if ((t_evicted = scen_wait(s, "the pods on " NODE " evicted", evicted, NULL,
	                           t->toleration_s + 30)) < 0)
		return -1;
	scen_expect_time(s, "pods evicted after the NoExecute taint (tolerationSeconds)",
	                 t_evicted - t_noexecute, t->toleration_s, 1);
	if (scen_wait(s, "replacements Running on the other nodes", replaced, NULL, 60) < 0)
		return -1;
	c = count_app(s);
	scen_expect(s, "replicas replaced elsewhere; the evicted stay Terminating on " NODE,
	            c.running_elsewhere == REPLICAS && c.terminating_on_node > 0,
	            "%d Running elsewhere, %d Terminating on " NODE, c.running_elsewhere,
	            c.terminating_on_node);
	scen_sh(s, true, "kubectl get pods -o wide", NULL);

	scen_say(s, "Nothing new can be scheduled on " NODE ": a pod that must run there stays "
	            "Pending with the scheduler's FailedScheduling message.");
	pod = pinned_pod();
	scen_mark(s, "kubectl run pinned (nodeSelector kubernetes.io/hostname=" NODE ")");
	scen_create(s, "/api/v1/namespaces/default/pods", pod);
	json_decref(pod);
	if (scen_wait(s, "FailedScheduling for pod pinned", failed_scheduling, msg, 30) < 0)
		return -1;
	scen_expect(s, "FailedScheduling names the unreachable taint",
	            strstr(msg, "untolerated taint {node.kubernetes.io/unreachable: }") != NULL,
	            "%s", msg);
	scen_sh(s, true, "kubectl describe pod pinned | sed -n '/Events:/,$p'", NULL);
	return 0;
}

/* Issued CSRs from a user starting with user. */
static int count_issued(struct scen *s, const char *user)
{
	json_t **v;
	size_t n = scen_csrs(s, &v);
	int count = 0;

	for (size_t i = 0; i < n; i++)
		count += !strncmp(jx_str(v[i], "spec.username") ?: "", user, strlen(user)) &&
		         jx_str(v[i], "status.certificate") != NULL;
	free(v);
	return count;
}

/* The node back: Ready, its unreachable taints gone, the pinned pod (when
 * there is one) running there. */
static int node_back(struct scen *s, double t_restart)
{
	struct node_is ready = {NODE, "True"};
	struct taint_is ns = {NODE, "node.kubernetes.io/unreachable", "NoSchedule", false};
	struct taint_is ne = {NODE, "node.kubernetes.io/unreachable", "NoExecute", false};
	double t_ready, t_clean;

	if ((t_ready = scen_wait(s, NODE " Ready again", node_ready_is, &ready, 60)) < 0)
		return -1;
	scen_expect(s, NODE " Ready again after the restart", true, "%.1fs after the restart",
	            t_ready - t_restart);
	if (scen_wait(s, "unreachable:NoSchedule removed", taint_is, &ns, 15) < 0 ||
	    (t_clean = scen_wait(s, "unreachable:NoExecute removed", taint_is, &ne, 15)) < 0)
		return -1;
	/* NoExecute goes in the first monitor pass that observes Ready. */
	scen_expect_time(s, "taints removed after Ready", t_clean - t_ready, monitor_period(s) / 2,
	                 tolerance(s));
	if (scen_pod(s, "default/pinned") &&
	    scen_wait(s, "pod pinned Running on " NODE, pinned_running, NULL, 60) >= 0)
		scen_expect(s, "the pending pod is scheduled on " NODE " again", true, "Running");
	return 0;
}

/* Recovery plan 1: delete the expired certificate, restart the kubelet. */
static int plan_1(struct scen *s)
{
	int before = count_issued(s, "system:bootstrap:"), after;
	double t_restart;

	scen_say(s, "Recovery plan 1: delete the certificate and restart the kubelet. With no "
	            "client certificate it bootstraps again with the bootstrap token (a "
	            "node-csr-<hash> CSR with rotation off, csr-<random> with it on), which the "
	            "approver approves.");
	scen_mark(s,
	          "rm -f kubelet-client-current.pem; systemctl restart kubelet (cube restart " NODE
	          ")");
	scen_sh(s, true, "rm -f \"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\"",
	        NULL);
	t_restart = scen_now(s);
	if (scen_sh(s, true, "cube restart --data-dir \"$CUBE_DATA\" " NODE, NULL) != 0 ||
	    node_back(s, t_restart) < 0)
		return -1;
	after = count_issued(s, "system:bootstrap:");
	scen_expect(s, "a new certificate through the bootstrap token", after == before + 1,
	            "%d bootstrap CSRs issued before, %d after", before, after);
	scen_sh(s, true, "ls -la \"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\"",
	        NULL);
	scen_sh(s, true, "kubectl get nodes " NODE, NULL);
	scen_sh(s, true, "kubectl get csr", NULL);
	scen_sh(s, true, "kubectl get pods -o wide", NULL);
	return 0;
}

/* Recovery plan 2: sign a certificate by hand with the cluster CA. */
static int plan_2(struct scen *s)
{
	json_t **v;
	size_t n = scen_csrs(s, &v);
	int before = (int)n, after;
	double t_restart;
	char *out = NULL;

	free(v);
	scen_say(s, "Recovery plan 2, when rotation has failed for good: sign a client "
	            "certificate by hand with the cluster CA (the seeds' openssl commands, on the "
	            "kubelet's own key), put it in the kubelet's store — one file, certificate "
	            "then key — and restart the kubelet. No CSR: the certificate comes from the "
	            "CA's key.");
	if (scen_sh(s, true,
	            "mkdir -p \"$CUBE_DATA/plan-2\" && cd \"$CUBE_DATA/plan-2\" && "
	            "openssl pkey -in \"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\" "
	            "-out kubelet-client.key && "
	            "openssl req -new -key kubelet-client.key -subj "
	            "\"/CN=system:node:" NODE "/O=system:nodes\" -out kubelet-client.csr && "
	            "openssl x509 -req -in kubelet-client.csr -CA \"$CUBE_DATA/pki/ca.crt\" "
	            "-CAkey \"$CUBE_DATA/pki/ca.key\" -CAcreateserial -days 365 "
	            "-out kubelet-client.crt 2>&1",
	            NULL) != 0)
		return -1;
	scen_mark(s, "cat kubelet-client.crt kubelet-client.key > kubelet-client-current.pem; "
	             "systemctl restart kubelet (cube restart " NODE ")");
	if (scen_sh(s, true,
	            "cd \"$CUBE_DATA/plan-2\" && cat kubelet-client.crt kubelet-client.key > "
	            "\"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\"",
	            NULL) != 0)
		return -1;
	t_restart = scen_now(s);
	if (scen_sh(s, true, "cube restart --data-dir \"$CUBE_DATA\" " NODE, NULL) != 0 ||
	    node_back(s, t_restart) < 0)
		return -1;
	n = scen_csrs(s, &v);
	after = (int)n;
	free(v);
	scen_expect(s, "no CSR: the certificate came from the CA directly", after == before,
	            "%d CSRs before, %d after", before, after);
	scen_sh(s, true,
	        "openssl x509 -in \"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\" "
	        "-noout -subject -issuer -enddate",
	        &out);
	scen_expect(s, "the new certificate: CN=system:node:" NODE ", issued by the cluster CA",
	            out && strstr(out, "CN = system:node:" NODE) && strstr(out, "issuer="), "%s",
	            out ? out : "");
	free(out);
	return 0;
}

static bool pinned_bound(struct scen *s, void *arg)
{
	json_t *p = scen_pod(s, "default/pinned");
	return p && !strcmp(jx_str(p, "spec.nodeName") ?: "", NODE);
}

/* Recovery plan 3: tolerate the taint, for one urgent pod. */
static int plan_3(struct scen *s)
{
	double t_patch;

	scen_say(s, "Recovery plan 3, for emergency scheduling only: tolerate the taint. The "
	            "seeds' patch tolerates unreachable:NoExecute — eviction — but the scheduler "
	            "filters on unreachable:NoSchedule, so the pod stays Pending.");
	if (scen_sh(s, true,
	            "kubectl patch pod pinned -p '{\"spec\":{\"tolerations\":[{\"key\":"
	            "\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":"
	            "\"NoExecute\"}]}}'",
	            NULL) != 0)
		return -1;
	t_patch = scen_now(s);
	scen_wait(s, "(the scheduler retries the updated pod)", time_reached,
	          &(double){t_patch + 3}, 5);
	scen_expect(s, "the seeds' NoExecute toleration alone leaves the pod Pending",
	            !pinned_bound(s, NULL), "%s",
	            pinned_bound(s, NULL) ? "bound to " NODE : "not bound");
	scen_sh(s, true, "kubectl describe pod pinned | sed -n '/Tolerations:/,/Events:/p'", NULL);
	scen_say(s, "Tolerating NoSchedule too lets the scheduler bind the pod to " NODE
	            " — which, cut off, never starts it: plan 3 moves a pod, it does not repair "
	            "the node. A pod's tolerations can only be added to (upstream's update "
	            "rule), so the patch keeps the first one.");
	if (scen_sh(s, true,
	            "kubectl patch pod pinned -p '{\"spec\":{\"tolerations\":[{\"key\":"
	            "\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":"
	            "\"NoExecute\"},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":"
	            "\"Exists\",\"effect\":\"NoSchedule\"}]}}'",
	            NULL) != 0)
		return -1;
	if (scen_wait(s, "pod pinned bound to " NODE, pinned_bound, NULL, 30) < 0)
		return -1;
	scen_expect(s, "tolerating unreachable:NoSchedule too binds the pod to " NODE, true,
	            "spec.nodeName=" NODE ", phase %s",
	            jx_str(scen_pod(s, "default/pinned"), "status.phase") ?: "?");
	scen_sh(s, true, "kubectl get pod pinned -o wide", NULL);
	return 0;
}

/* The CA mismatch (failure table: kubelet registration fails). */
static int ca_mismatch(struct scen *s)
{
	const struct scen_timings *t = scen_timings(s);
	struct node_is unknown = {NODE, "Unknown"};
	double t_fault, t_unknown;
	char *out = NULL;

	scen_say(s, "The failure table's CA mismatch: " NODE "'s client certificate is replaced "
	            "by one a foreign CA signed. The API server cannot verify it (401), and the "
	            "node goes Unknown after the grace period.");
	t_fault = scen_now(s);
	if (scen_fault(s, "wrong-ca " NODE))
		return -1;
	if ((t_unknown = scen_wait(s, NODE " Ready=Unknown", node_ready_is, &unknown,
	                           (double)t->grace_ns / 1e9 + 30)) < 0)
		return -1;
	scen_expect(s, NODE " Unknown after the grace period",
	            t_unknown - t_fault >= (double)t->grace_ns / 1e9 - 1,
	            "%.1fs after the certificate changed", t_unknown - t_fault);
	scen_sh(s, true, "cube logs --data-dir \"$CUBE_DATA\" apiserver | grep -i x509 | tail -2",
	        &out);
	scen_expect(s, "the API server logs x509: certificate signed by unknown authority",
	            out && strstr(out, "x509: certificate signed by unknown authority"), "%s",
	            out ? out : "");
	free(out);
	scen_sh(s, true,
	        "openssl verify -CAfile \"$CUBE_DATA/pki/ca.crt\" "
	        "\"$CUBE_DATA/nodes/" NODE "/pki/kubelet-client-current.pem\" 2>&1",
	        NULL);
	out = NULL;
	scen_sh(s, true,
	        "cube doctor --data-dir \"$CUBE_DATA\" 2>&1 | sed -n '/node\\/" NODE " /,/^$/p'",
	        &out);
	scen_expect(s, "cube doctor names the foreign CA", out && strstr(out, "signed by CN="),
	            "%s", out ? out : "");
	free(out);
	return 0;
}

/* The auto-approve binding removed (failure table: CSR not approved). */
static int rbac_removal(struct scen *s)
{
	struct node_is unknown = {NODE, "Unknown"};
	struct csr_is csr = {.prefix = "csr-", .user = "system:node:" NODE};
	char *out = NULL;
	double t0;

	scen_say(s, "The failure table's CSR that is never approved: kubeadm's auto-approve "
	            "bindings are deleted, and " NODE "'s certificate comes to its rotation "
	            "deadline. The approver's SubjectAccessReview says no: the CSR stays "
	            "Pending, the certificate expires, the node goes Unknown.");
	if (scen_fault(s, "revoke-autoapprove"))
		return -1;
	t0 = scen_now(s);
	if (scen_fault(s, "expire-cert " NODE " --in 6s"))
		return -1;
	if (scen_wait(s, NODE " Ready=Unknown", node_ready_is, &unknown,
	              (double)scen_timings(s)->grace_ns / 1e9 + 40) < 0)
		return -1;
	scen_sh(s, true, "kubectl get csr", &out);
	scen_expect(s, NODE "'s renewal CSR still Pending",
	            out && strstr(out, "system:node:" NODE) && strstr(out, "Pending"), "%.0fs on",
	            scen_now(s) - t0);
	free(out);
	out = NULL;
	scen_sh(s, true, "kubectl get clusterrolebindings | grep autoapprove || true", NULL);
	scen_sh(s, true, "cube doctor --data-dir \"$CUBE_DATA\" --csr-pending-after 1s 2>&1", &out);
	scen_expect(s, "cube doctor names the missing binding",
	            out && strstr(out, "no RBAC binding lets system:node:" NODE), "%s",
	            out ? "no RBAC binding lets system:node:" NODE " ..." : "");
	free(out);
	scen_say(s, "The fix cube doctor gives: kubeadm's binding again, and the pending CSR "
	            "approved by hand; the kubelet picks its certificate up and the node comes "
	            "back.");
	scen_fault(s, "restore-autoapprove");
	if (scen_sh(
	        s, true,
	        "kubectl get csr -o jsonpath='{range .items[?(@.spec.username==\"system:node:" NODE
	        "\")]}{.metadata.name}{\"\\n\"}{end}' | xargs -r kubectl certificate approve",
	        NULL) != 0)
		return -1;
	if (scen_wait(s, NODE "'s CSR issued", csr_issued, &csr, 30) < 0)
		return -1;
	return node_back(s, scen_now(s));
}

/* Every node's certificate at once (failure table: scheduling queue blocked). */
static int expire_all(struct scen *s)
{
	const struct scen_timings *t = scen_timings(s);
	char msg[512] = "", *out = NULL, name[32];
	struct app_count c;
	json_t *pod;
	double t_all;

	scen_say(s, "The failure table's blocked scheduling queue: every node's certificate "
	            "expires at once, rotation off everywhere. Every node goes Unknown; the node "
	            "lifecycle controller sees a whole zone down, assumes the fault is its own "
	            "side's (master disruption mode) and evicts nothing; nothing can be "
	            "scheduled anywhere.");
	for (int i = 0; i < scen_nodes(s); i++) {
		char args[64];
		snprintf(name, sizeof(name), "node-%d", i);
		snprintf(args, sizeof(args), "disable-rotation %s", name);
		if (scen_fault(s, args))
			return -1;
	}
	if (scen_fault(s, "expire-all --in 3s"))
		return -1;
	if ((t_all = scen_wait(s, "every node Ready=Unknown", every_node, (void *)"Unknown",
	                       (double)t->grace_ns / 1e9 + 40)) < 0)
		return -1;
	scen_sh(s, true, "kubectl get nodes", NULL);
	scen_wait(s, "(the tolerations' time passes)", time_reached,
	          &(double){t_all + t->toleration_s + 3}, t->toleration_s + 10);
	c = count_app(s);
	scen_expect(s, "no pod evicted: master disruption mode", c.terminating_on_node == 0,
	            "%d Terminating on " NODE ", %d running", c.terminating_on_node, c.running);
	pod = pinned_pod();
	scen_mark(s, "kubectl run pinned (nodeSelector kubernetes.io/hostname=" NODE ")");
	scen_create(s, "/api/v1/namespaces/default/pods", pod);
	json_decref(pod);
	if (scen_wait(s, "FailedScheduling for pod pinned", failed_scheduling, msg, 30) < 0)
		return -1;
	snprintf(name, sizeof(name), "0/%d nodes are available", scen_nodes(s));
	scen_expect(s, "FailedScheduling: no node available", strstr(msg, name) != NULL, "%s", msg);
	scen_sh(s, true, "cube doctor --data-dir \"$CUBE_DATA\" 2>&1 | grep -A3 ZoneDisruption",
	        &out);
	scen_expect(s, "cube doctor: FullDisruption, master disruption mode",
	            out && strstr(out, "master disruption mode"), "%s", out ? out : "");
	free(out);
	scen_say(s, "Recovery: `cube fault clear` puts back every certificate and turns rotation "
	            "on again.");
	scen_fault(s, "clear");
	if (scen_wait(s, "every node Ready", every_node, (void *)"True", 60) < 0)
		return -1;
	return scen_wait(s, "pod pinned Running on " NODE, pinned_running, NULL, 60) < 0 ? -1 : 0;
}

/* ---- the table ------------------------------------------------------------------------------ */

struct scenario {
	const char *name, *title, *summary;
	int (*steps[4])(struct scen *s);
};

static const struct scenario scenarios[] = {
    {"expired-client-cert",
     "Scenario 1: a kubelet's client certificate expires while rotation is off",
     "seeds 4.1-4.4: NotReady after the grace period, unreachable taints, pods evicted and "
     "replaced, nothing new scheduled there",
     {setup, scenario_1}},
    {"plan-1",
     "Scenario 1, then recovery plan 1: delete the certificate, restart the kubelet",
     "seeds 4.6 plan 1: the kubelet bootstraps again with its token and the node comes back",
     {setup, scenario_1, plan_1}},
    {"plan-2",
     "Scenario 1, then recovery plan 2: sign a certificate by hand with the cluster CA",
     "seeds 4.6 plan 2: the seeds' openssl commands on the kubelet's key, no CSR",
     {setup, scenario_1, plan_2}},
    {"plan-3",
     "Scenario 1, then recovery plan 3: tolerate the taint",
     "seeds 4.6 plan 3: the seeds' NoExecute toleration is not enough to schedule; any "
     "effect is, onto the broken node",
     {setup, scenario_1, plan_3}},
    {"ca-mismatch",
     "A client certificate from another CA, then recovery plan 1",
     "seeds 4.5 failure table, kubelet registration fails: 401, x509: certificate signed by "
     "unknown authority",
     {setup, ca_mismatch, plan_1}},
    {"rbac-removal",
     "kubeadm's auto-approve bindings removed: the renewal CSR stays Pending",
     "seeds 4.5 failure table, CSR not approved: the certificate expires, cube doctor names "
     "the binding, the fix brings the node back",
     {setup, rbac_removal}},
    {"expire-all",
     "Every node's certificate expires at once",
     "seeds 4.5 failure table, scheduling queue blocked: FullDisruption, no eviction, "
     "FailedScheduling everywhere",
     {setup, expire_all}},
    {"demo",
     "cube demo: rotation, scenario 1 and recovery plan 1",
     "what `cube demo` plays: a rotation that works, then scenario 1 and plan 1",
     {setup, rotation, scenario_1, plan_1}},
};

static const struct scenario *find(const char *name)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (!strcmp(scenarios[i].name, name))
			return &scenarios[i];
	return NULL;
}

static int play(const struct scenario *sc, const struct scen_opts *base)
{
	struct scen_opts o = *base;
	struct scen *s;

	o.name = sc->name;
	o.title = sc->title;
	printf("%s\n", sc->title);
	fflush(stdout);
	if (!(s = scen_start(&o)))
		return cli_fail("%s", err_msg());
	for (size_t i = 0; i < 4 && sc->steps[i]; i++)
		if (sc->steps[i](s) < 0) {
			/* A step that cannot go on fails the run, whatever held so far. */
			scen_expect(s, "the scenario runs to its end", false,
			            "step %zu of %s stopped", i + 1, sc->name);
			break;
		}
	return scen_finish(s);
}

/* ---- the commands ---------------------------------------------------------------------------- */

static const char scenario_usage[] =
    "Usage: cube scenario list\n"
    "       cube scenario run NAME [flags]\n"
    "\n"
    "Play one of the seeds' failures on a fresh cluster (`cube up` in its own process), with\n"
    "a live timeline (t+12.3s node-1 Ready=Unknown ...), the runbook's diagnostic commands\n"
    "run at the right moments, and each measured timing checked against the one the\n"
    "cluster's timers predict. Exit 0 when every expectation held.\n"
    "\n"
    "Flags:\n"
    "      --report FILE.html              write the report: an SVG timeline of node states,\n"
    "                                      taints, pods per node, CSRs and events, the\n"
    "                                      expectations, and the commands' output\n"
    "      --timings compressed|upstream   compressed (default): 5s grace, Leases every\n"
    "                                      500ms, 8s tolerations; upstream: 1.32's 50s grace,\n"
    "                                      40s Leases, 300s tolerations\n"
    "      --nodes N                       (default 3; scenarios need 3 or more)\n"
    "      --data-dir DIR                  the cluster (default ./scenario-data/NAME; made\n"
    "                                      afresh, refused when it holds anything else)\n"
    "  -q, --quiet                         narration and verdict only, no live timeline\n";

static const char demo_usage[] =
    "Usage: cube demo [flags]\n"
    "\n"
    "The seeds on one screen, in about a minute: a 3-node cluster comes up (any free port),\n"
    "a client certificate rotates through the node's own CSR, then scenario 1 — node-1's\n"
    "certificate expires with rotation off: NotReady, tainted, its pods evicted and\n"
    "replaced, nothing new scheduled there — and recovery plan 1 brings it back. Writes an\n"
    "HTML report; exit 0 when every expectation held. `cube up` is the long-running\n"
    "cluster.\n"
    "\n"
    "Flags:\n"
    "      --report FILE.html              (default ./cube-demo-report.html)\n"
    "      --data-dir DIR                  (default ./cube-demo)\n"
    "      --timings compressed|upstream   (default compressed)\n"
    "  -q, --quiet                         no live timeline\n";

static int parse(const char *cmd, int argc, char **argv, struct scen_opts *o, const char **dir)
{
	static const struct option opts[] = {
	    {"report", required_argument, NULL, 'r'},
	    {"timings", required_argument, NULL, 't'},
	    {"nodes", required_argument, NULL, 'n'},
	    {"data-dir", required_argument, NULL, 'd'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->report = optarg;
			break;
		case 'd':
			*dir = optarg;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'n':
			o->nodes = atoi(optarg);
			if (o->nodes < 3)
				return cli_usage_error(cmd, "--nodes must be 3 or more");
			break;
		case 't':
			if (!strcmp(optarg, "compressed"))
				o->timings = &scen_compressed;
			else if (!strcmp(optarg, "upstream"))
				o->timings = &scen_upstream;
			else
				return cli_usage_error(cmd,
				                       "--timings: compressed or upstream, not "
				                       "\"%s\"",
				                       optarg);
			break;
		case 'h':
			return cli_help(!strcmp(cmd, "demo") ? demo_usage : scenario_usage);
		default:
			return cli_bad_flag(cmd, argv);
		}
	}
	return -1;
}

static int list(void)
{
	printf("%-22s %s\n", "NAME", "WHAT");
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		printf("%-22s %s\n%-22s   (%s)\n", scenarios[i].name, scenarios[i].title, "",
		       scenarios[i].summary);
	return 0;
}

int cmd_scenario(int argc, char **argv)
{
	struct scen_opts o = {.timings = &scen_compressed, .nodes = 3};
	const char *dir = NULL, *verb = argc > 1 ? argv[1] : "", *name;
	const struct scenario *sc;
	char def[300];
	int rc;

	if (!strcmp(verb, "--help") || !strcmp(verb, "-h") || !*verb)
		return *verb ? cli_help(scenario_usage)
		             : cli_usage_error("scenario", "list or run NAME");
	if (!strcmp(verb, "list"))
		return list();
	if (strcmp(verb, "run"))
		return cli_usage_error("scenario", "unknown verb \"%s\" (list or run)", verb);
	if ((rc = parse("scenario run", argc - 1, argv + 1, &o, &dir)) >= 0)
		return rc;
	if (optind + 1 != argc - 1)
		return cli_usage_error("scenario run", optind + 1 < argc - 1
		                                           ? "one scenario at a time"
		                                           : "which scenario? (cube "
		                                             "scenario list)");
	name = argv[optind + 1];
	if (!(sc = find(name)))
		return cli_usage_error("scenario run", "no scenario \"%s\" (cube scenario list)",
		                       name);
	snprintf(def, sizeof(def), "scenario-data/%s", name);
	o.dir = dir ? dir : def;
	return play(sc, &o);
}

int cmd_demo(int argc, char **argv)
{
	struct scen_opts o = {
	    .timings = &scen_compressed, .nodes = 3, .report = "cube-demo-report.html"};
	const char *dir = NULL;
	int rc;

	if ((rc = parse("demo", argc, argv, &o, &dir)) >= 0)
		return rc;
	if (optind != argc)
		return cli_usage_error("demo", "unexpected argument \"%s\"", argv[optind]);
	o.dir = dir ? dir : "cube-demo";
	return play(find("demo"), &o);
}
