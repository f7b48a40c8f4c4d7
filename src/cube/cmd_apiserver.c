/* cube apiserver — the API server as its own process, with upstream's flag names. */
#include "cube/cli.h"

#include "apiserver/apiserver.h"

#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/loop.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"Usage: cube apiserver [flags]\n"
	"\n"
	"The Kubernetes API over HTTPS with mutual TLS, stored in SQLite (one server) or\n"
	"etcd (several servers on one etcd cluster).\n"
	"\n"
	"Flags (upstream's names):\n"
	"      --secure-port N                 port to serve HTTPS on (default 6443; 0 = any)\n"
	"      --bind-address IP               address to listen on (default 0.0.0.0)\n"
	"      --tls-cert-file F               serving certificate (chain)\n"
	"      --tls-private-key-file F        its key\n"
	"      --client-ca-file F              CA for client certificates\n"
	"      --storage-backend sqlite|etcd3  the store (default sqlite; etcd3 when\n"
	"                                      --etcd-servers is given)\n"
	"      --etcd-servers URL,...          etcd members (http:// or https://), tried in turn\n"
	"      --etcd-cafile F                 CA for the members' serving certificates\n"
	"      --etcd-certfile F, --etcd-keyfile F  our client pair (kubeadm's\n"
	"                                      apiserver-etcd-client)\n"
	"      --etcd-prefix P                 the keys' prefix (default /registry)\n"
	"      --etcd-compaction-interval D    how often to compact etcd's history (default\n"
	"                                      5m0s; 0 never)\n"
	"      --data-dir DIR                  where state.db lives (default /var/lib/cube)\n"
	"      --storage-sync normal|full      SQLite synchronous mode (default normal: survives\n"
	"                                      a process crash; full: also power loss)\n"
	"      --enable-bootstrap-token-auth   accept bootstrap tokens (default true)\n"
	"      --anonymous-auth                serve unauthenticated requests as system:anonymous\n"
	"                                      (default false: 401)\n"
	"      --default-not-ready-toleration-seconds N    (default 300)\n"
	"      --default-unreachable-toleration-seconds N  (default 300)\n"
	"      --max-request-body-bytes N      (default 3145728)\n"
	"      --service-account-signing-key-file F  key that signs service account tokens\n"
	"                                      (TokenRequest; kubeadm's sa.key)\n"
	"      --service-account-key-file F    public key (or private key, or certificate) that\n"
	"                                      verifies them (default: the signing key)\n"
	"      --service-account-issuer URL    the tokens' iss (default\n"
	"                                      https://kubernetes.default.svc.cluster.local)\n"
	"      --api-audiences A,B             audiences a token must name (default: the issuer)\n"
	"      --service-account-max-token-expiration D  longest token issued (default: none)\n"
	"      --kubelet-client-certificate F, --kubelet-client-key F  the client pair for\n"
	"                                      the kubelets (nodes/proxy, pods/log)\n"
	"      --kubelet-certificate-authority F  verify the kubelets' serving certificates\n"
	"                                      with it (default: not verified)\n"
	"      --kubelet-preferred-address-types LIST  node address types in the order tried\n"
	"                                      (default Hostname,InternalDNS,InternalIP,\n"
	"                                      ExternalDNS,ExternalIP)\n"
	"  -v, --v N                           log verbosity; 3 logs every request\n"
	"\n"
	"cube's own:\n"
	"      --cluster-dir DIR               take the certificates and sa.key/sa.pub from a\n"
	"                                      'cube pki init' DIR (apiserver-kubelet-client for\n"
	"                                      the kubelets too) and seed its bootstrap token\n"
	"                                      Secret. For https --etcd-servers also etcd's CA\n"
	"                                      (pki/etcd/ca.crt) and our client pair\n"
	"                                      (pki/apiserver-etcd-client.crt, .key), when DIR\n"
	"                                      has all three and none of --etcd-cafile,\n"
	"                                      --etcd-certfile, --etcd-keyfile is given\n"
	"      --bootstrap-token-file F        seed Secret kube-system/bootstrap-token-<id>\n"
	"      --port-file F                   write the port actually bound (for --secure-port 0)\n"
	"      --watch-window N                recent events kept, all resources together (default\n"
	"                                      10000): how far back a watch may resume and a\n"
	"                                      paged list stay one snapshot; older is 410 Expired\n"
	"      --serving-threads N             threads that serve the secure port's connections\n"
	"                                      (TLS, HTTP/1.1 and HTTP/2), requests staying on\n"
	"                                      the main loop with the cache and the store; 0: the\n"
	"                                      main loop serves them too (default: one per CPU\n"
	"                                      this process may use but the main loop's, from 4\n"
	"                                      CPUs on; 0 below, where they cost more than\n"
	"                                      they free)\n";

static struct loop *main_loop;

int cmd_apiserver(int argc, char **argv)
{
	static const struct option opts[] = {
		{"secure-port", required_argument, NULL, 'p'},
		{"bind-address", required_argument, NULL, 'b'},
		{"tls-cert-file", required_argument, NULL, 'c'},
		{"tls-private-key-file", required_argument, NULL, 'k'},
		{"client-ca-file", required_argument, NULL, 'C'},
		{"storage-backend", required_argument, NULL, 's'},
		{"data-dir", required_argument, NULL, 'd'},
		{"etcd-servers", required_argument, NULL, 0x110},
		{"etcd-cafile", required_argument, NULL, 0x111},
		{"etcd-certfile", required_argument, NULL, 0x112},
		{"etcd-keyfile", required_argument, NULL, 0x113},
		{"etcd-prefix", required_argument, NULL, 0x114},
		{"etcd-compaction-interval", required_argument, NULL, 0x115},
		{"storage-sync", required_argument, NULL, 'S'},
		{"enable-bootstrap-token-auth", optional_argument, NULL, 'B'},
		{"anonymous-auth", optional_argument, NULL, 'A'},
		{"default-not-ready-toleration-seconds", required_argument, NULL, 'n'},
		{"default-unreachable-toleration-seconds", required_argument, NULL, 'u'},
		{"max-request-body-bytes", required_argument, NULL, 'm'},
		{"service-account-signing-key-file", required_argument, NULL, 'K'},
		{"service-account-key-file", required_argument, NULL, 'Y'},
		{"service-account-issuer", required_argument, NULL, 'I'},
		{"api-audiences", required_argument, NULL, 'a'},
		{"service-account-max-token-expiration", required_argument, NULL, 'X'},
		{"kubelet-client-certificate", required_argument, NULL, 0x100},
		{"kubelet-client-key", required_argument, NULL, 0x101},
		{"kubelet-certificate-authority", required_argument, NULL, 0x102},
		{"kubelet-preferred-address-types", required_argument, NULL, 0x103},
		{"cluster-dir", required_argument, NULL, 'D'},
		{"bootstrap-token-file", required_argument, NULL, 'T'},
		{"port-file", required_argument, NULL, 'P'},
		{"watch-window", required_argument, NULL, 'W'},
		{"serving-threads", required_argument, NULL, 0x120},
		{"v", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct apiserver_opts o;
	char *cluster_files[11] = {NULL};
	const char *cluster_dir = NULL;
	int64_t max_exp_ns;
	const char *port_file = NULL, *backend = NULL;
	struct apiserver *s;
	int c, rc = 0;

	apiserver_opts_default(&o);
	o.serving_threads = -1;
	while ((c = getopt_long(argc, argv, "hv:", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
		{
			char *end;
			long port = strtol(optarg, &end, 10);
			/* 0 picks a free port (cube's); the rest as upstream. */
			if (*end || end == optarg || port < 0 || port > 65535)
				return cli_usage_error("apiserver",
						       "--secure-port %s must be between 1 and "
						       "65535, inclusive. It cannot be turned off "
						       "with 0 (cube's 0 picks a free port)",
						       optarg);
			o.secure_port = (int)port;
			break;
		}
		case 'b': o.bind_address = optarg; break;
		case 'c': o.tls_cert_file = optarg; break;
		case 'k': o.tls_private_key_file = optarg; break;
		case 'C': o.client_ca_file = optarg; break;
		case 's':
			backend = optarg;
			if (strcmp(optarg, "sqlite") && strcmp(optarg, "etcd3"))
				return cli_usage_error("apiserver",
						       "--storage-backend %s: want sqlite or etcd3",
						       optarg);
			break;
		case 0x110: o.etcd_opts.servers = optarg; break;
		case 0x111: o.etcd_opts.cafile = optarg; break;
		case 0x112: o.etcd_opts.certfile = optarg; break;
		case 0x113: o.etcd_opts.keyfile = optarg; break;
		case 0x114: o.etcd_opts.prefix = optarg; break;
		case 0x115:
			if (duration_parse(optarg, &o.etcd_opts.compaction_interval_ns) < 0 ||
			    o.etcd_opts.compaction_interval_ns < 0)
				return cli_usage_error("apiserver",
						       "invalid argument \"%s\" for "
						       "\"--etcd-compaction-interval\" flag",
						       optarg);
			break;
		case 'd': o.data_dir = optarg; break;
		case 'S':
			if (!strcmp(optarg, "full"))
				o.sync = STORE_SYNC_FULL;
			else if (strcmp(optarg, "normal"))
				return cli_usage_error("apiserver", "--storage-sync must be normal or full");
			break;
		case 'B':
			if (cli_parse_bool(optarg, &o.enable_bootstrap_token_auth) < 0)
				return cli_usage_error("apiserver", "--enable-bootstrap-token-auth "
								    "wants true or false");
			break;
		case 'A':
			if (cli_parse_bool(optarg, &o.anonymous_auth) < 0)
				return cli_usage_error("apiserver", "--anonymous-auth wants true or false");
			break;
		case 'n': o.not_ready_toleration_s = atoll(optarg); break;
		case 'u': o.unreachable_toleration_s = atoll(optarg); break;
		case 'm': o.max_body = strtoull(optarg, NULL, 10); break;
		case 'D':
			cluster_files[0] = file_join(optarg, "pki/apiserver.crt");
			cluster_files[1] = file_join(optarg, "pki/apiserver.key");
			cluster_files[2] = file_join(optarg, "pki/ca.crt");
			cluster_files[3] = file_join(optarg, "pki/bootstrap-token");
			cluster_files[4] = file_join(optarg, "pki/sa.key");
			cluster_files[5] = file_join(optarg, "pki/sa.pub");
			o.service_account_signing_key_file = cluster_files[4];
			o.service_account_key_file = cluster_files[5];
			o.tls_cert_file = cluster_files[0];
			o.tls_private_key_file = cluster_files[1];
			o.client_ca_file = cluster_files[2];
			o.bootstrap_token_file = cluster_files[3];
			cluster_files[6] = file_join(optarg, "pki/apiserver-kubelet-client.crt");
			cluster_files[7] = file_join(optarg, "pki/apiserver-kubelet-client.key");
			o.kubelet_client_certificate = cluster_files[6];
			o.kubelet_client_key = cluster_files[7];
			cluster_dir = optarg;
			break;
		case 0x100: o.kubelet_client_certificate = optarg; break;
		case 0x101: o.kubelet_client_key = optarg; break;
		case 0x102: o.kubelet_certificate_authority = optarg; break;
		case 0x103: o.kubelet_preferred_address_types = optarg; break;
		case 'T': o.bootstrap_token_file = optarg; break;
		case 'K': o.service_account_signing_key_file = optarg; break;
		case 'Y': o.service_account_key_file = optarg; break;
		case 'I': o.service_account_issuer = optarg; break;
		case 'a': o.api_audiences = optarg; break;
		case 'X':
			if (duration_parse(optarg, &max_exp_ns) < 0 || max_exp_ns < 0)
				return cli_usage_error("apiserver",
						       "invalid argument \"%s\" for "
						       "\"--service-account-max-token-expiration\" flag",
						       optarg);
			o.service_account_max_token_expiration_s = max_exp_ns / 1000000000;
			break;
		case 'P': port_file = optarg; break;
		case 'W': {
			char *end;
			long long n = strtoll(optarg, &end, 10);
			if (*end || n < 1)
				return cli_usage_error("apiserver",
						       "--watch-window wants a number of events >= 1");
			o.watch_window = (size_t)n;
			break;
		}
		case 0x120: {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (!*optarg || *end || n < 0 || n > 256)
				return cli_usage_error("apiserver",
						       "--serving-threads wants a number from 0 to 256");
			o.serving_threads = (int)n;
			break;
		}
		case 'v': log_set_verbosity(atoi(optarg)); break;
		case 'h': return cli_help(usage);
		default: return cli_bad_flag("apiserver", argv);
		}
	}
	/* kubeadm's etcd client files from the cluster dir, as a set, unless
	 * the flags name any: half a pair from each would not match. */
	if (cluster_dir && !o.etcd_opts.cafile && !o.etcd_opts.certfile && !o.etcd_opts.keyfile) {
		cluster_files[8] = file_join(cluster_dir, "pki/etcd/ca.crt");
		cluster_files[9] = file_join(cluster_dir, "pki/apiserver-etcd-client.crt");
		cluster_files[10] = file_join(cluster_dir, "pki/apiserver-etcd-client.key");
		if (file_exists(cluster_files[8]) && file_exists(cluster_files[9]) &&
		    file_exists(cluster_files[10])) {
			o.etcd_opts.cafile = cluster_files[8];
			o.etcd_opts.certfile = cluster_files[9];
			o.etcd_opts.keyfile = cluster_files[10];
		}
	}
	/* As upstream, whose only backend is etcd3: it needs its servers. */
	o.etcd = backend ? !strcmp(backend, "etcd3") : o.etcd_opts.servers != NULL;
	if (o.etcd && !o.etcd_opts.servers)
		return cli_usage_error("apiserver", "--etcd-servers must be specified");
	main_loop = loop_new();
	s = apiserver_new(main_loop, &o);
	if (!s) {
		rc = cli_fail("%s", err_msg());
		goto out;
	}
	if (port_file) {
		char buf[16];
		snprintf(buf, sizeof(buf), "%d\n", apiserver_port(s));
		file_write_atomic(port_file, buf, strlen(buf), 0644);
	}
	cli_run_until_signal(main_loop);
	apiserver_free(s);
	LOG_INFO("\"Shutdown complete\"");
out:
	loop_free(main_loop);
	for (int i = 0; i < 11; i++)
		free(cluster_files[i]);
	return rc;
}
