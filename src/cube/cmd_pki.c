/* cube pki init — a kubeadm-like cluster PKI (pki/cluster.h). */
#include "cube/cli.h"

#include "pki/cluster.h"

#include "api/validation.h"

#include "base/err.h"
#include "base/timeutil.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char init_usage[] =
	"Usage: cube pki init --dir DIR [flags]\n"
	"\n"
	"Create a cluster's PKI in DIR, laid out as kubeadm lays out /etc/kubernetes:\n"
	"  DIR/pki/ca.crt, ca.key                      the cluster CA\n"
	"  DIR/pki/apiserver.crt, .key                 serving certificate\n"
	"  DIR/pki/apiserver-kubelet-client.crt, .key  the API server's client certificate\n"
	"  DIR/admin.conf                              kubernetes-admin, O=system:masters\n"
	"  DIR/controller-manager.conf, scheduler.conf\n"
	"  DIR/pki/bootstrap-token, DIR/bootstrap-kubelet.conf\n"
	"and the PKI of a local etcd, under a CA of its own (CN etcd-ca):\n"
	"  DIR/pki/etcd/ca.crt, ca.key                 the etcd CA\n"
	"  DIR/pki/etcd/server.crt, .key               etcd's serving certificate\n"
	"  DIR/pki/etcd/peer.crt, .key                 for etcd members to talk to each other\n"
	"                                              (both: CN the node name; SANs the node\n"
	"                                              name, localhost, 127.0.0.1, ::1 and\n"
	"                                              --etcd-san; server and client auth)\n"
	"  DIR/pki/etcd/healthcheck-client.crt, .key   kube-etcd-healthcheck-client\n"
	"  DIR/pki/apiserver-etcd-client.crt, .key     kube-apiserver-etcd-client, the API\n"
	"                                              server's client for etcd\n"
	"Files that exist and are still valid are kept; the rest are (re)generated.\n"
	"\n"
	"Flags:\n"
	"      --dir DIR               where to write (required)\n"
	"      --cluster-name NAME     the CA's CN and the kubeconfigs' cluster (default kubernetes)\n"
	"      --server URL            API server URL in the kubeconfigs\n"
	"                              (default https://127.0.0.1:6443)\n"
	"      --apiserver-san SAN     an extra DNS name or IP for the serving cert (repeatable)\n"
	"      --node-name NAME        this node's name: CN of etcd/server and etcd/peer and a\n"
	"                              DNS name of theirs and apiserver's (default: the\n"
	"                              hostname, lower-cased, as kubeadm's)\n"
	"      --etcd-san SAN          an extra DNS name or IP for etcd/server and etcd/peer,\n"
	"                              e.g. the address other members dial (repeatable)\n"
	"      --key-type ecdsa|rsa    key algorithm: ECDSA P-256 (default) or RSA 2048\n"
	"      --validity DUR          lifetime of the leaf certificates (default 8760h)\n"
	"      --ca-validity DUR       lifetime of the CA (default 87600h)\n"
	"      --force                 regenerate everything\n";

static void print_line(void *arg, const char *line)
{
	printf("%s\n", line);
}

static int parse_dur(const char *flag, const char *s, int64_t *out)
{
	if (duration_parse(s, out) < 0 || *out <= 0)
		return cli_usage_error("pki init", "invalid %s \"%s\": want a positive duration "
				       "such as 8760h or 30d",
				       flag, s);
	return 0;
}

/* kubeadm refuses a node name that is not a DNS subdomain, in its words. */
static int check_node_name(const char *name)
{
	struct validation v;
	int r = 0;

	val_init(&v);
	if (!val_dns_subdomain(&v, "nodeRegistration.name", name)) {
		json_t *cause = json_array_get(v.causes, 0);
		r = cli_usage_error("pki init", "invalid --node-name: %s: %s",
				    json_string_value(json_object_get(cause, "field")),
				    json_string_value(json_object_get(cause, "message")));
	}
	val_free(&v);
	return r;
}

static int pki_init(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dir", required_argument, NULL, 'd'},
		{"cluster-name", required_argument, NULL, 'n'},
		{"server", required_argument, NULL, 's'},
		{"apiserver-san", required_argument, NULL, 'a'},
		{"node-name", required_argument, NULL, 'N'},
		{"etcd-san", required_argument, NULL, 'e'},
		{"key-type", required_argument, NULL, 'k'},
		{"validity", required_argument, NULL, 'V'},
		{"ca-validity", required_argument, NULL, 'C'},
		{"force", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct strv sans = STRV_INIT, etcd_sans = STRV_INIT;
	struct cluster_pki_opts o = {
		.cluster_name = "kubernetes",
		.etcd = true,
		.server = "https://127.0.0.1:6443",
		.key_type = PKI_KEY_ECDSA,
		.ca_validity_ns = CLUSTER_CA_VALIDITY,
		.validity_ns = CLUSTER_CERT_VALIDITY,
		.say = print_line,
	};
	int c, r = 0;

	while (r == 0 && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o.dir = optarg; break;
		case 'n': o.cluster_name = optarg; break;
		case 's': o.server = optarg; break;
		case 'a': strv_push(&sans, optarg); break;
		case 'N': o.node_name = optarg; r = check_node_name(optarg); break;
		case 'e': strv_push(&etcd_sans, optarg); break;
		case 'k':
			if (pki_key_type_parse(optarg, &o.key_type) < 0)
				r = cli_usage_error("pki init", "%s", err_msg());
			break;
		case 'V': r = parse_dur("--validity", optarg, &o.validity_ns); break;
		case 'C': r = parse_dur("--ca-validity", optarg, &o.ca_validity_ns); break;
		case 'f': o.force = true; break;
		case 'h':
			strv_free(&sans);
			strv_free(&etcd_sans);
			return cli_help(init_usage);
		default: r = cli_bad_flag("pki init", argv); break;
		}
	}
	if (r == 0 && optind < argc)
		r = cli_usage_error("pki init", "unexpected argument \"%s\"", argv[optind]);
	if (r == 0 && !o.dir)
		r = cli_usage_error("pki init", "--dir is required");
	if (r == 0 && strncmp(o.server, "https://", 8) != 0)
		r = cli_usage_error("pki init", "--server must be an https:// URL, not \"%s\"",
				    o.server);
	if (r == 0) {
		o.apiserver_sans = (const char *const *)sans.v;
		o.etcd_sans = (const char *const *)etcd_sans.v;
		if (cluster_pki_init(&o) < 0)
			r = cli_fail("%s", err_msg());
		else
			printf("[pki] Cluster PKI is ready in %s\n", o.dir);
	}
	strv_free(&sans);
	strv_free(&etcd_sans);
	return r;
}

int cmd_pki(int argc, char **argv)
{
	static const struct cli_command cmds[] = {
		{"init", "create or complete a cluster's PKI", pki_init, init_usage},
		{NULL, NULL, NULL, NULL},
	};
	return cli_dispatch("pki", cmds, argc, argv);
}
