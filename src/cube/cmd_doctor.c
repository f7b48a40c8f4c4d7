/*
 * cube doctor — gather what doctor.h judges: the API's nodes, Leases, CSRs,
 * pods, ReplicaSets, StatefulSets and ClusterRoleBindings, a
 * SubjectAccessReview for each pending kubelet CSR's requestor (the one the
 * approver asks), the kubelets' own directories, and on a `cube up` data
 * dir the control plane's certificates and what the supervisor knows of its
 * processes (which kubelets run, the controller manager's --controllers),
 * as `systemctl status` and the static pod manifests tell on a kubeadm
 * node. Then print the findings, and exit with the worst.
 */
#include "cube/cli.h"
#include "cube/control.h"
#include "cube/doctor.h"

#include "client/rest.h"
#include "controllers/controllers.h"
#include "pki/expiry.h"
#include "pki/kubeconfig.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/loop.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <dirent.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_CRITICAL 3
#define EXIT_UNINSPECTED 4 /* the kubeconfig could not even be used */

static const char doctor_usage[] =
    "Usage: cube doctor [--kubeconfig F | --data-dir DIR] [--kubelet-dir DIR ...] [flags]\n"
    "\n"
    "Diagnose a cluster as the seeds' failure table does: nodes NotReady (with the\n"
    "cause: kubelet stopped, client certificate expired and why rotation did not\n"
    "renew it, a certificate from another CA, the API server unreachable from the\n"
    "node, a wrong clock), CSRs pending too long and why, kubeadm's auto-approve\n"
    "bindings missing, certificates inside the warning window, pods Pending on\n"
    "taints, Terminating pods beside their replacements, zones in Full or Partial\n"
    "Disruption. Each finding has its symptom, evidence, root cause and fix.\n"
    "\n"
    "It reads the API with the kubeconfig and, when given, the kubelets' own\n"
    "directories (certificate store, config.yaml, kubelet.log). On a `cube up`\n"
    "data dir it reads everything there: admin.conf, nodes/*, pki/, cube.sock.\n"
    "With neither flag it uses ./cube-data when it holds a cluster, else\n"
    "$KUBECONFIG or ~/.kube/config.\n"
    "\n"
    "Exit status: 0 healthy, 1 warnings only, 3 at least one critical finding (the API\n"
    "unreachable included), 2 a bad command line, 4 a kubeconfig that cannot be used.\n"
    "\n"
    "Flags:\n"
    "      --kubeconfig F                  the cluster's kubeconfig\n"
    "      --data-dir DIR                  a `cube up` cluster\n"
    "      --kubelet-dir DIR               a kubelet root dir (/var/lib/kubelet), its pki\n"
    "                                      dir, or a dir of node dirs; repeatable\n"
    "  -o, --output text|json              (default text)\n"
    "      --warn-within DUR               certificates expiring within DUR (default 30d)\n"
    "      --csr-pending-after DUR         CSRs pending longer than DUR (default 5m)\n";

struct doctor_cmd {
	char *kubeconfig, *data_dir;
	struct strv kubelet_dirs;
	bool json;
	int64_t warn_ns, pending_ns;
};

static int parse(int argc, char **argv, struct doctor_cmd *o)
{
	static const struct option opts[] = {
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"data-dir", required_argument, NULL, 'd'},
	    {"kubelet-dir", required_argument, NULL, 'K'},
	    {"output", required_argument, NULL, 'o'},
	    {"warn-within", required_argument, NULL, 'w'},
	    {"csr-pending-after", required_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;

	o->warn_ns = 30 * 24 * 3600 * NS_PER_SEC;
	o->pending_ns = 5 * 60 * NS_PER_SEC;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'k':
			o->kubeconfig = optarg;
			break;
		case 'd':
			o->data_dir = optarg;
			break;
		case 'K':
			strv_push(&o->kubelet_dirs, optarg);
			break;
		case 'o':
			if (strcmp(optarg, "json") && strcmp(optarg, "text"))
				return cli_usage_error(
				    "doctor", "--output: text or json, not \"%s\"", optarg);
			o->json = !strcmp(optarg, "json");
			break;
		case 'w':
		case 'p':
			if (duration_parse(optarg, ch == 'w' ? &o->warn_ns : &o->pending_ns) < 0)
				return cli_usage_error(
				    "doctor", "--%s: %s",
				    ch == 'w' ? "warn-within" : "csr-pending-after", err_msg());
			break;
		case 'h':
			return -1;
		default:
			return cli_bad_flag("doctor", argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("doctor", "unexpected argument \"%s\"", argv[optind]);
	return 0;
}

/* ---- the API ------------------------------------------------------------------------------- */

/* A list's items (new reference), or NULL with *err (malloc'd) set. */
static json_t *list(struct rest_client *c, const char *path, char **err)
{
	json_t *body = NULL, *items;
	char *e = NULL;
	int status = rest_do_sync(c, "GET", path, NULL, &body, &e);

	if (status != 200) {
		if (err && !*err)
			*err = status ? str_printf("GET %s: %d %s", path, status,
			                           jx_str(body, "message") ?: "")
			              : str_printf("GET %s: %s", path, e ? e : "failed");
		free(e);
		json_decref(body);
		return NULL;
	}
	items = json_incref(json_object_get(body, "items"));
	json_decref(body);
	return items;
}

static bool allowed(struct rest_client *c, const json_t *csr, const char *sub)
{
	json_t *review = csrapproving_review(csr, sub), *body = NULL;
	int status = rest_do_sync(c, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
	                          review, &body, NULL);
	bool yes = (status == 200 || status == 201) && jx_bool(body, "status.allowed", false);

	json_decref(review);
	json_decref(body);
	return yes;
}

/* What the approver's SubjectAccessReviews answer for each pending
 * kubelet client CSR. */
static json_t *reviews(struct rest_client *c, const json_t *csrs)
{
	json_t *out = json_object();
	const json_t *csr;
	size_t i;

	json_array_foreach(csrs, i, csr)
	{
		if (jx_get(csr, "status.conditions") ||
		    strcmp(jx_str(csr, "spec.signerName") ?: "",
		           "kubernetes.io/kube-apiserver-client-kubelet"))
			continue;
		json_object_set_new(out, jx_str(csr, "metadata.name") ?: "",
		                    json_pack("{s:b, s:b}", "selfnodeclient",
		                              allowed(c, csr, "selfnodeclient"), "nodeclient",
		                              allowed(c, csr, "nodeclient")));
	}
	return out;
}

/* ---- the nodes' own files -------------------------------------------------------------------- */

static bool is_kubelet_dir(const char *dir)
{
	static const char *const marks[] = {"pki", "config.yaml", "kubelet-client-current.pem"};
	for (size_t i = 0; i < 3; i++) {
		char *p = file_join(dir, marks[i]);
		bool yes = file_exists(p);
		free(p);
		if (yes)
			return true;
	}
	return false;
}

/* A kubelet dir, or each node dir inside a parent. */
static void expand(const char *dir, struct strv *out)
{
	struct dirent **ents = NULL;
	int n;

	if (is_kubelet_dir(dir)) {
		strv_push(out, dir);
		return;
	}
	n = scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		char *sub = file_join(dir, ents[i]->d_name);
		if (ents[i]->d_name[0] != '.' && is_kubelet_dir(sub))
			strv_push(out, sub);
		free(sub);
		free(ents[i]);
	}
	free(ents);
}

/* What the supervisor says of its kubelets (which run, each node's clock,
 * taken back to the doctor's now) and of the controller manager. */
static void mark_running(const char *data_dir, int64_t now, struct doctor_node_local *l,
                         size_t n, char **controllers)
{
	int64_t t;
	char *sock = control_path(data_dir);
	json_t *words = json_pack("[s]", "status"), *st = control_call(sock, words, 10), *node;
	size_t i;

	json_array_foreach(jx_get(st, "nodes"), i, node)
	{
		for (size_t j = 0; j < n; j++)
			if (l[j].node && !strcmp(l[j].node, jx_str(node, "name") ?: "")) {
				l[j].running = jx_bool(node, "active", true);
				if (time_parse_rfc3339(jx_str(node, "time") ?: "", &t) == 0)
					l[j].clock_ns = t + (now - clock_now());
			}
	}
	if (jx_str(st, "controllers"))
		*controllers = xstrdup(jx_str(st, "controllers"));
	json_decref(st);
	json_decref(words);
	free(sock);
}

/* ---- the command ----------------------------------------------------------------------------- */

static const char *default_kubeconfig(struct doctor_cmd *o, char **owned)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");

	if (o->data_dir)
		return *owned = file_join(o->data_dir, "admin.conf");
	if (o->kubeconfig)
		return o->kubeconfig;
	if (!env && file_exists("cube-data/admin.conf")) {
		o->data_dir = "cube-data";
		return *owned = xstrdup("cube-data/admin.conf");
	}
	if (env && *env) {
		/* kubectl's first file of the list. */
		*owned = xstrndup(env, strcspn(env, ":"));
		return *owned;
	}
	return *owned = str_printf("%s/.kube/config", home ? home : ".");
}

int cmd_doctor(int argc, char **argv)
{
	struct doctor_cmd o = {0};
	struct doctor_input in = {0};
	struct doctor_report report;
	struct expiry_report certs = {0};
	struct strv dirs = STRV_INIT;
	struct doctor_node_local *locals;
	struct kubeconfig kc = {0};
	struct loop *loop = NULL;
	struct rest_client *c = NULL;
	json_t *nodes = NULL, *leases = NULL, *csrs = NULL, *pods = NULL, *rs = NULL, *sts = NULL,
	       *crbs = NULL, *revs = NULL;
	char *kc_path_owned = NULL, *err = NULL, *controllers = NULL;
	const char *kc_path;
	int rc = parse(argc, argv, &o);

	if (rc) {
		strv_free(&o.kubelet_dirs);
		return rc < 0 ? cli_help(doctor_usage) : rc;
	}
	kc_path = default_kubeconfig(&o, &kc_path_owned);
	if (kubeconfig_load(kc_path, &kc) < 0) {
		cli_fail("%s", err_msg());
		rc = EXIT_UNINSPECTED;
		goto out;
	}
	loop = loop_new();
	c = rest_client_from_kubeconfig(loop, &kc, "cube-doctor");
	if (!c) {
		cli_fail("%s: %s", kc_path, err_msg());
		rc = EXIT_UNINSPECTED;
		goto out;
	}
	in.now_ns = clock_now();
	in.warn_ns = o.warn_ns;
	in.csr_pending_ns = o.pending_ns;
	in.data_dir = o.data_dir;
	if ((nodes = list(c, "/api/v1/nodes", &err))) {
		leases =
		    list(c, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", NULL);
		csrs = list(c, "/apis/certificates.k8s.io/v1/certificatesigningrequests", NULL);
		pods = list(c, "/api/v1/pods", NULL);
		rs = list(c, "/apis/apps/v1/replicasets", NULL);
		sts = list(c, "/apis/apps/v1/statefulsets", NULL);
		crbs = list(c, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", NULL);
		revs = reviews(c, csrs);
	}
	in.api_error = err;
	in.nodes = nodes;
	in.leases = leases;
	in.csrs = csrs;
	in.pods = pods;
	in.replicasets = rs;
	in.statefulsets = sts;
	in.bindings = crbs;
	in.reviews = revs;

	if (o.data_dir && !o.kubelet_dirs.n) {
		char *nd = file_join(o.data_dir, "nodes");
		expand(nd, &dirs);
		free(nd);
	}
	for (size_t i = 0; i < o.kubelet_dirs.n; i++)
		expand(o.kubelet_dirs.v[i], &dirs);
	locals = xcalloc(dirs.n, sizeof(*locals));
	for (size_t i = 0; i < dirs.n; i++)
		doctor_node_local_read(dirs.v[i], kc.ca_data, in.now_ns, &locals[i]);
	if (o.data_dir) {
		expiry_scan(o.data_dir, NULL, in.now_ns, o.warn_ns, &certs);
		in.certs = &certs;
		mark_running(o.data_dir, in.now_ns, locals, dirs.n, &controllers);
		in.controllers = controllers;
	}
	in.locals = locals;
	in.n_locals = dirs.n;

	doctor_diagnose(&in, &report);
	if (o.json) {
		json_t *j = doctor_report_json(&report);
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	} else {
		doctor_report_print(stdout, &report);
	}
	rc = doctor_worst(&report) == DOCTOR_CRITICAL  ? EXIT_CRITICAL
	     : doctor_worst(&report) == DOCTOR_WARNING ? 1
	                                               : 0;
	doctor_report_free(&report);
	for (size_t i = 0; i < dirs.n; i++)
		doctor_node_local_free(&locals[i]);
	free(locals);
	expiry_report_free(&certs);
out:
	json_decref(nodes);
	json_decref(leases);
	json_decref(csrs);
	json_decref(pods);
	json_decref(rs);
	json_decref(sts);
	json_decref(crbs);
	json_decref(revs);
	free(err);
	free(controllers);
	rest_client_free(c);
	if (loop)
		loop_free(loop);
	kubeconfig_free(&kc);
	free(kc_path_owned);
	strv_free(&dirs);
	strv_free(&o.kubelet_dirs);
	return rc;
}
