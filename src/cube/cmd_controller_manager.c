/* cube controller-manager — the CSR controllers as their own process, with
 * kube-controller-manager's flag names. */
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
	"kube-controller-manager's certificate controllers: approve kubelet client CSRs,\n"
	"sign approved CSRs with the cluster CA, and clean up old CSRs. They talk only to\n"
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
	"                                      All controllers: csrapproving, csrsigning, csrcleaner\n"
	"                                      (also by their names certificatesigningrequest-\n"
	"                                      {approving,signing,cleaner}-controller)\n"
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

int cmd_controller_manager(int argc, char **argv)
{
	static const struct option opts[] = {
		{"kubeconfig", required_argument, NULL, 'k'},
		{"cluster-signing-cert-file", required_argument, NULL, 'c'},
		{"cluster-signing-key-file", required_argument, NULL, 'K'},
		{"cluster-signing-duration", required_argument, NULL, 'd'},
		{"controllers", required_argument, NULL, 'C'},
		{"approve-kubelet-serving", optional_argument, NULL, 'S'},
		{"v", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct controller_manager_opts o;
	struct controller_manager *m;
	struct loop *loop;
	int c;

	controller_manager_opts_default(&o);
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
		case 'v': log_set_verbosity(atoi(optarg)); break;
		case 'h': return cli_help(usage);
		default: return cli_bad_flag("controller-manager", argv);
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

	loop = loop_new();
	if (!(m = controller_manager_new(loop, &o))) {
		int rc = cli_fail("%s", err_msg());
		loop_free(loop);
		return rc;
	}
	cli_run_until_signal(loop);
	controller_manager_free(m);
	LOG_INFO("\"Shutdown complete\"");
	loop_free(loop);
	return 0;
}
