/* cube controller-manager — the CSR controllers, the node lifecycle and
 * taint eviction controllers as their own process, with kube-controller-manager's flag
 * names. */
#include "cube/cli.h"

#include "controllers/controllers.h"

#include "base/err.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"Usage: cube controller-manager --kubeconfig FILE [flags]\n"
	"\n"
	"kube-controller-manager's certificate controllers — approve kubelet client CSRs,\n"
	"sign approved CSRs with the cluster CA, clean up old CSRs — and its node\n"
	"lifecycle controller: nodes whose kubelet stops posting status go Unknown after\n"
	"the grace period and get node.kubernetes.io/unreachable (or not-ready) NoSchedule\n"
	"and, rate-limited per zone, NoExecute taints; and its taint eviction controller:\n"
	"pods on a node with NoExecute taints they do not tolerate are deleted when their\n"
	"tolerationSeconds run out; and the workload controllers: ReplicaSet, Deployment\n"
	"(rolling updates), StatefulSet, DaemonSet, Endpoints and EndpointSlices, pod\n"
	"garbage collection. They talk only to\n"
	"the API server named in the kubeconfig.\n"
	"\n"
	"Flags (upstream's names):\n"
	"      --kubeconfig FILE               kubeconfig with the API server's location and the\n"
	"                                      controller manager's credentials (required; 'cube\n"
	"                                      pki init' writes DIR/controller-manager.conf)\n"
	"      --cluster-signing-cert-file F   PEM-encoded X509 CA certificate used to issue\n"
	"                                      cluster-scoped certificates (DIR/pki/ca.crt); re-read\n"
	"                                      when it changes on disk\n"
	"      --cluster-signing-key-file F    PEM-encoded RSA or ECDSA private key used to sign\n"
	"                                      cluster-scoped certificates (DIR/pki/ca.key)\n"
	"                                      Without both, the signing controller is skipped.\n"
	"      --cluster-signing-duration D    the max length of duration signed certificates will\n"
	"                                      be given; individual CSRs may request shorter certs\n"
	"                                      by setting spec.expirationSeconds (default 8760h0m0s)\n"
	"      --controllers LIST              a list of controllers to enable. '*' enables all\n"
	"                                      on-by-default controllers, 'foo' enables the\n"
	"                                      controller named 'foo', '-foo' disables the\n"
	"                                      controller named 'foo' (default \"*\").\n"
	"                                      All controllers: csrapproving, csrsigning,\n"
	"                                      csrcleaner, nodelifecycle (also by their names\n"
	"                                      certificatesigningrequest-{approving,signing,\n"
	"                                      cleaner}-controller, node-lifecycle-controller),\n"
	"                                      taint-eviction-controller, replicaset,\n"
	"                                      deployment, statefulset, daemonset,\n"
	"                                      endpointslice,\n"
	"                                      endpoint, podgc, namespace, job (or\n"
	"                                      <name>-controller; endpoints-controller for\n"
	"                                      endpoint, pod-garbage-collector-controller for\n"
	"                                      podgc)\n"
	"      --node-monitor-period D         how often node health is checked (default 5s)\n"
	"      --node-monitor-grace-period D   how long a node may stop posting status before it\n"
	"                                      is marked unhealthy (default 50s)\n"
	"      --node-startup-grace-period D   the same for a node that never posted (default 1m0s)\n"
	"      --node-eviction-rate R          nodes per second tainted NoExecute in a healthy\n"
	"                                      zone (default 0.1)\n"
	"      --secondary-node-eviction-rate R  the same in a zone above the unhealthy threshold;\n"
	"                                      0 in zones of at most --large-cluster-size-threshold\n"
	"                                      nodes (default 0.01)\n"
	"      --unhealthy-zone-threshold F    share of not-Ready nodes (at least 3) that makes a\n"
	"                                      zone partially disrupted (default 0.55)\n"
	"      --large-cluster-size-threshold N  (default 50)\n"
	"      --terminated-pod-gc-threshold N  terminated pods kept before the pod garbage\n"
	"                                      collector deletes the oldest; <= 0 disables it\n"
	"                                      (default 12500)\n"
	"      --use-service-account-credentials  run each controller as its own service account\n"
	"                                      (system:serviceaccount:kube-system:<controller>,\n"
	"                                      with a TokenRequest token; kubeadm and cube up set\n"
	"                                      it). Default false: every controller is the\n"
	"                                      manager's own user, which then needs more than the\n"
	"                                      system:kube-controller-manager role grants\n"
	CLI_SERVING_HELP("10257")
	CLI_LEADER_HELP("kube-controller-manager")
	"  -v, --v N                           log verbosity (2: CA reloads and why a CSR is left\n"
	"                                      pending; 4: every CSR event)\n"
	"  -h, --help                          this help\n"
	"\n"
	"cube's own:\n"
	"      --approve-kubelet-serving[=BOOL]\n"
	"                                      also approve kubernetes.io/kubelet-serving CSRs that a\n"
	"                                      node makes for itself when every SAN is one of its\n"
	"                                      Node's status.addresses (default false: they stay\n"
	"                                      Pending, as upstream)\n"
	"\n"
	"SIGTERM or SIGINT stops the controllers gracefully.\n";

/* The controllers, started once this instance leads (cli_run_elected). */
struct cm_run {
	struct controller_manager_opts *o;
	struct loop *loop;
	struct controller_manager *m;
};

static int cm_start(void *arg)
{
	struct cm_run *r = arg;
	return (r->m = controller_manager_new(r->loop, r->o)) ? 0 : -1;
}

static void cm_stop(void *arg)
{
	struct cm_run *r = arg;
	controller_manager_free(r->m);
	r->m = NULL;
}

int cmd_controller_manager(int argc, char **argv)
{
	static const struct option opts[] = {
		{"kubeconfig", required_argument, NULL, 'k'},
		{"cluster-signing-cert-file", required_argument, NULL, 'c'},
		{"cluster-signing-key-file", required_argument, NULL, 'K'},
		{"cluster-signing-duration", required_argument, NULL, 'd'},
		{"controllers", required_argument, NULL, 'C'},
		{"approve-kubelet-serving", optional_argument, NULL, 'S'},
		{"node-monitor-period", required_argument, NULL, 1},
		{"node-monitor-grace-period", required_argument, NULL, 2},
		{"node-startup-grace-period", required_argument, NULL, 3},
		{"node-eviction-rate", required_argument, NULL, 4},
		{"secondary-node-eviction-rate", required_argument, NULL, 5},
		{"unhealthy-zone-threshold", required_argument, NULL, 6},
		{"large-cluster-size-threshold", required_argument, NULL, 7},
		{"terminated-pod-gc-threshold", required_argument, NULL, 8},
		{"use-service-account-credentials", optional_argument, NULL, 9},
		CLI_SERVING_OPTIONS,
		CLI_LEADER_OPTIONS,
		{"v", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct controller_manager_opts o;
	struct cli_leader_opts leader;
	struct cm_run run = {.o = &o};
	struct cli_elected elected = {.cmd = "controller-manager",
				      .user_agent = "kube-controller-manager/leader-election",
				      .events_component = "kube-controller-manager",
				      .lost_msg = "\"leaderelection lost\"",
				      .start = cm_start,
				      .stop = cm_stop,
				      .arg = &run};
	int c, rc;

	controller_manager_opts_default(&o);
	cli_leader_defaults(&leader, "kube-controller-manager");
	while ((c = getopt_long(argc, argv, "hv:", opts, NULL)) != -1) {
		switch (c) {
		case 'k': o.kubeconfig = optarg; break;
		case 'c': o.cluster_signing_cert_file = optarg; break;
		case 'K': o.cluster_signing_key_file = optarg; break;
		case 'd':
			err_clear();
			if (duration_parse(optarg, &o.cluster_signing_duration_ns) < 0 ||
			    o.cluster_signing_duration_ns <= 0)
				return cli_usage_error("controller-manager",
						       "invalid argument \"%s\" for "
						       "\"--cluster-signing-duration\" flag: %s",
						       optarg, *err_msg() ? err_msg() : "must be > 0");
			break;
		case 'C': o.controllers = optarg; break;
		case 'S':
			if (cli_parse_bool(optarg, &o.approve_kubelet_serving) < 0)
				return cli_usage_error("controller-manager",
						       "invalid argument \"%s\" for "
						       "\"--approve-kubelet-serving\" flag",
						       optarg);
			break;
		case 1: case 2: case 3: {
			int64_t *dst = c == 1 ? &o.nlc.node_monitor_period_ns
				       : c == 2 ? &o.nlc.node_monitor_grace_period_ns
						: &o.nlc.node_startup_grace_period_ns;
			err_clear();
			if (duration_parse(optarg, dst) < 0 || *dst <= 0)
				return cli_usage_error("controller-manager",
						       "invalid argument \"%s\" for \"--%s\" flag: %s",
						       optarg, opts[5 + c].name,
						       *err_msg() ? err_msg() : "must be > 0");
			break;
		}
		case 4: case 5: case 6: case 7: {
			char *end;
			double v = strtod(optarg, &end);
			if (end == optarg || *end || v < 0 || (c == 6 && v > 1))
				return cli_usage_error("controller-manager",
						       "invalid argument \"%s\" for \"--%s\" flag",
						       optarg, opts[5 + c].name);
			if (c == 4)
				o.nlc.node_eviction_rate = v;
			else if (c == 5)
				o.nlc.secondary_node_eviction_rate = v;
			else if (c == 6)
				o.nlc.unhealthy_zone_threshold = v;
			else
				o.nlc.large_cluster_size_threshold = (int)v;
			break;
		}
		case 8: {
			char *end;
			long long v = strtoll(optarg, &end, 10);
			if (end == optarg || *end)
				return cli_usage_error("controller-manager",
						       "invalid argument \"%s\" for "
						       "\"--terminated-pod-gc-threshold\" flag",
						       optarg);
			o.terminated_pod_gc_threshold = v;
			break;
		}
		case 9:
			if (cli_parse_bool(optarg, &o.use_service_account_credentials) < 0)
				return cli_usage_error("controller-manager",
						       "invalid argument \"%s\" for "
						       "\"--use-service-account-credentials\" flag",
						       optarg);
			break;
		case 'v': log_set_verbosity(atoi(optarg)); break;
		case 'h': return cli_help(usage);
		default: {
			int r = cli_serving_flag("controller-manager", c, optarg, &o.serving);
			if (r == 0)
				r = cli_leader_flag("controller-manager", c, optarg, &leader);
			if (r == 1)
				break;
			return r ? r : cli_bad_flag("controller-manager", argv);
		}
		}
	}
	if (optind < argc)
		return cli_usage_error("controller-manager", "unexpected argument %s", argv[optind]);
	if (!o.kubeconfig || !*o.kubeconfig)
		return cli_usage_error("controller-manager", "--kubeconfig is required");
	if (controller_manager_check_controllers(o.controllers) < 0)
		return cli_usage_error("controller-manager", "%s", err_msg());
	if (!o.cluster_signing_cert_file != !o.cluster_signing_key_file)
		return cli_usage_error("controller-manager",
				       "--cluster-signing-cert-file and --cluster-signing-key-file "
				       "go together");

	if ((rc = cli_leader_check("controller-manager", &leader)))
		return rc;
	if (controller_manager_preflight(&o) < 0)
		return cli_fail("%s", err_msg());
	elected.kubeconfig = o.kubeconfig;
	run.loop = loop_new();
	rc = cli_run_elected(run.loop, &leader, &elected);
	LOG_INFO("\"Shutdown complete\"");
	loop_free(run.loop);
	return rc;
}
