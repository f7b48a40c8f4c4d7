/*
 * cube kubelet — the node agent as its own process, with upstream's flag
 * names, or many hollow kubelets in one process (--hollow-nodes): alone, or
 * as one of `cube up`'s kubelet processes (--hollow-first-index, and
 * --control-socket for the supervisor's cube fault words).
 * Flags win over the --config file, as upstream's do.
 */
#include "cube/cli.h"
#include "cube/control.h"

#include "kubelet/kubelet.h"

#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"Usage: cube kubelet [flags]\n"
	"\n"
	"The node agent: TLS bootstrap, client and serving certificate rotation, the\n"
	"Node and its Lease, and pods bound to the node on a simulated runtime.\n"
	"\n"
	"Flags (upstream's names):\n"
	"      --hostname-override NAME        the node's name (default: the host name)\n"
	"      --kubeconfig F                  credentials for the API server (default\n"
	"                                      <root-dir>/kubelet.conf); written by bootstrap\n"
	"      --bootstrap-kubeconfig F        a bootstrap token kubeconfig to get a client\n"
	"                                      certificate with when --kubeconfig is missing or\n"
	"                                      its certificate is no longer valid: with rotation\n"
	"                                      in the background (CSR csr-*), without it first\n"
	"                                      (CSR node-csr-<hash>)\n"
	"      --cert-dir DIR                  certificates (default <root-dir>/pki)\n"
	"      --root-dir DIR                  the kubelet's files (default /var/lib/kubelet)\n"
	"      --config F                      a KubeletConfiguration file (rotateCertificates,\n"
	"                                      serverTLSBootstrap, nodeStatusUpdateFrequency,\n"
	"                                      nodeStatusReportFrequency, nodeLeaseDurationSeconds,\n"
	"                                      maxPods, registerWithTaints, port, selfHeal, ...)\n"
	"      --node-labels K=V,...           extra labels for the Node\n"
	"      --register-with-taints K=V:EFFECT,...  taints for the Node when it registers\n"
	"      --rotate-certificates[=BOOL]    rotate the client certificate at 70-90 % of its\n"
	"                                      life (default false; kubeadm and cube up: true).\n"
	"                                      Off: an expired certificate is still presented,\n"
	"                                      the node goes NotReady, the kubelet runs on\n"
	"      --rotate-server-certificates[=BOOL]  request and rotate a serving certificate\n"
	"      --node-ip IP                    the node's InternalIP (default 127.0.0.1)\n"
	"      --address IP                    where the HTTPS server listens (default 0.0.0.0)\n"
	"      --client-ca-file F              the HTTPS server asks a client certificate this CA\n"
	"                                      signed for all but /healthz (401 otherwise);\n"
	"                                      without it, it serves anyone\n"
	"      --port N                        the HTTPS server's port (default 10250; 0 = none;\n"
	"                                      -1 = any free port, as `port: -1` in --config)\n"
	"      --node-status-update-frequency DUR  how often the node's status is computed and,\n"
	"                                      unless nodeStatusReportFrequency says otherwise,\n"
	"                                      posted (default 10s)\n"
	"      --max-pods N                    capacity in pods (default 110)\n"
	"  -v, --v N                           log verbosity\n"
	"\n"
	"cube's own:\n"
	"      --certificate-condition[=BOOL]  report the node condition ClientCertificateExpiring:\n"
	"                                      True once the client certificate is past 90 % of\n"
	"                                      its life unrenewed or 3 renewals in a row failed\n"
	"                                      (certificateCondition: true; off by default)\n"
	"      --self-heal[=BOOL]              when the client certificate expires, re-bootstrap\n"
	"                                      in place with --bootstrap-kubeconfig instead of\n"
	"                                      exiting or waiting for a person (selfHeal: true)\n"
	"      --exit-after DUR                with rotation: how long without a valid client\n"
	"                                      certificate before exiting with status 1 while the\n"
	"                                      certificate manager saw the server answer\n"
	"                                      (default 5m, upstream's fixed value; 0 = never)\n"
	"      --pod-start-delay DUR           simulated container start time (default 1s);\n"
	"                                      a container's command runs as far as the\n"
	"                                      simulation understands it (sleep D, exit N,\n"
	"                                      sh -c scripts; docs/workloads.md)\n"
	"      --node-lease-duration-seconds N  the node Lease's duration, renewed every quarter\n"
	"                                      of it (nodeLeaseDurationSeconds, default 40;\n"
	"                                      upstream has no flag for it)\n"
	"      --hollow-nodes N                run N kubelets in this process, named\n"
	"                                      <prefix>K .. <prefix>K+N-1, each under\n"
	"                                      <root-dir>/<name>/ with its own credentials; they\n"
	"                                      serve HTTPS only when --port is given (port+i,\n"
	"                                      i counted from 0 in this process; --port=-1: each\n"
	"                                      on a free port of its own); refused at once when\n"
	"                                      the open-files limit cannot hold them. Their\n"
	"                                      timers share wake-ups: one due d ahead may fire\n"
	"                                      up to d/200 late, at most 50 ms\n"
	"      --hollow-name-prefix P          (default node-)\n"
	"      --hollow-first-index K          the first node's number (default 0): cube up's\n"
	"                                      kubelet processes each run one range of nodes\n"
	"      --control-socket PATH           with --hollow-nodes: answer cube fault's words\n"
	"                                      for these nodes on a Unix socket (control.h's\n"
	"                                      protocol: kubelet stop|start|restart NODE,\n"
	"                                      partition NODE, heal NODE, clock-skew NODE NS,\n"
	"                                      nodes), as cube up's kubelet processes do for\n"
	"                                      their supervisor\n";

static struct loop *main_loop;

static void split_labels(struct kubelet_config *c, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save))
		strv_push(&c->node_labels, kv);
	free(copy);
}

/* "key=value:Effect,key2:Effect" as --register-with-taints takes them. */
static int split_taints(struct kubelet_config *c, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	json_t *arr = json_array();
	int rc = 0;

	for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
		char *eff = strrchr(t, ':'), *eq;
		json_t *taint;
		if (!eff) {
			rc = -1;
			break;
		}
		*eff++ = '\0';
		taint = json_pack("{s:s,s:s}", "key", t, "effect", eff);
		if ((eq = strchr(t, '='))) {
			*eq = '\0';
			json_object_set_new(taint, "key", json_string(t));
			json_object_set_new(taint, "value", json_string(eq + 1));
		}
		json_array_append_new(arr, taint);
	}
	free(copy);
	if (rc == 0) {
		json_decref(c->register_with_taints);
		c->register_with_taints = arr;
	} else {
		json_decref(arr);
	}
	return rc;
}

static const struct option opts[] = {
	{"hostname-override", required_argument, NULL, 'H'},
	{"kubeconfig", required_argument, NULL, 'k'},
	{"bootstrap-kubeconfig", required_argument, NULL, 'b'},
	{"cert-dir", required_argument, NULL, 'c'},
	{"root-dir", required_argument, NULL, 'r'},
	{"config", required_argument, NULL, 'C'},
	{"node-labels", required_argument, NULL, 'l'},
	{"register-with-taints", required_argument, NULL, 't'},
	{"rotate-certificates", optional_argument, NULL, 'R'},
	{"rotate-server-certificates", optional_argument, NULL, 'S'},
	{"node-ip", required_argument, NULL, 'i'},
	{"address", required_argument, NULL, 'a'},
	{"client-ca-file", required_argument, NULL, 0x301},
	{"port", required_argument, NULL, 'p'},
	{"max-pods", required_argument, NULL, 'm'},
	{"self-heal", optional_argument, NULL, 'E'},
	{"certificate-condition", optional_argument, NULL, 0x300},
	{"exit-after", required_argument, NULL, 'x'},
	{"pod-start-delay", required_argument, NULL, 'd'},
	{"hollow-nodes", required_argument, NULL, 'N'},
	{"hollow-name-prefix", required_argument, NULL, 'P'},
	{"hollow-first-index", required_argument, NULL, 0x302},
	{"control-socket", required_argument, NULL, 0x303},
	{"node-status-update-frequency", required_argument, NULL, 0x304},
	{"node-lease-duration-seconds", required_argument, NULL, 0x305},
	{"v", required_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

struct run_opts {
	int hollow, first;
	const char *prefix;
	const char *control; /* --control-socket, NULL: none */
	bool port_set;
};

static int duration_flag(const char *flag, const char *s, int64_t *out)
{
	if (duration_parse(s, out) < 0 || *out < 0)
		return cli_usage_error("kubelet", "invalid %s \"%s\"", flag, s);
	return 0;
}

/* An integer flag in [min, max]. */
static int int_flag(const char *flag, const char *s, long min, long max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < min || v > max)
		return cli_usage_error("kubelet", "invalid argument \"%s\" for \"%s\" flag", s,
				       flag);
	*out = (int)v;
	return 0;
}

/* Apply one flag (the second pass; --config was read in the first). */
static int apply_flag(struct kubelet_config *c, struct run_opts *ro, int opt, char **argv)
{
	int rc = 0;

	switch (opt) {
	case 'H': kubelet_config_set(&c->node_name, optarg); break;
	case 'k': kubelet_config_set(&c->kubeconfig, optarg); break;
	case 'b': kubelet_config_set(&c->bootstrap_kubeconfig, optarg); break;
	case 'c': kubelet_config_set(&c->cert_dir, optarg); break;
	case 'r': kubelet_config_set(&c->root_dir, optarg); break;
	case 'C': break;
	case 'l': split_labels(c, optarg); break;
	case 't':
		if (split_taints(c, optarg) < 0)
			return cli_usage_error("kubelet", "invalid --register-with-taints \"%s\"",
					       optarg);
		break;
	case 'R': rc = cli_parse_bool(optarg, &c->rotate_certificates); break;
	case 'S': rc = cli_parse_bool(optarg, &c->server_tls_bootstrap); break;
	case 'E': rc = cli_parse_bool(optarg, &c->self_heal); break;
	case 0x300: rc = cli_parse_bool(optarg, &c->certificate_condition); break;
	case 0x301: kubelet_config_set(&c->client_ca_file, optarg); break;
	case 'i': kubelet_config_set(&c->node_ip, optarg); break;
	case 'a': kubelet_config_set(&c->address, optarg); break;
	case 'p':
		ro->port_set = true;
		return int_flag("--port", optarg, -1, 65535, &c->port);
	case 'm': c->max_pods = atoi(optarg); break;
	case 'x': return duration_flag("--exit-after", optarg, &c->exit_after_ns);
	case 'd': return duration_flag("--pod-start-delay", optarg, &c->pod_start_delay_ns);
	case 'N': ro->hollow = atoi(optarg); break;
	case 'P': ro->prefix = optarg; break;
	case 0x302: return int_flag("--hollow-first-index", optarg, 0, 1 << 30, &ro->first);
	case 0x303: ro->control = optarg; break;
	case 0x304:
		c->update_frequency_set = true;
		if (duration_parse(optarg, &c->node_status_update_frequency_ns) < 0 ||
		    c->node_status_update_frequency_ns <= 0)
			return cli_usage_error("kubelet", "invalid --node-status-update-frequency "
					       "\"%s\"", optarg);
		break;
	case 0x305:
		return int_flag("--node-lease-duration-seconds", optarg, 1, 1 << 30,
				&c->node_lease_duration_s);
	case 'v': log_set_verbosity(atoi(optarg)); break;
	default: return cli_bad_flag("kubelet", argv);
	}
	if (rc < 0)
		return cli_usage_error("kubelet", "invalid boolean \"%s\"", optarg);
	return 0;
}

/* parse() printed the help: nothing more to do. */
#define PARSE_HELP (-1)

/* 0, PARSE_HELP, or an exit status for a bad command line. */
static int parse(int argc, char **argv, struct kubelet_config *c, struct run_opts *ro)
{
	const char *config = NULL;
	int opt, rc;

	/* First pass: --config and --help, so flags can override the file. */
	while ((opt = getopt_long(argc, argv, "hv:", opts, NULL)) != -1) {
		if (opt == 'h') {
			cli_help(usage);
			return PARSE_HELP;
		}
		if (opt == 'C')
			config = optarg;
		if (opt == '?' || opt == ':')
			return cli_bad_flag("kubelet", argv);
	}
	if (optind < argc)
		return cli_usage_error("kubelet", "unexpected argument \"%s\"", argv[optind]);
	if (config && kubelet_config_load(c, config) < 0)
		return cli_fail("%s", err_msg());
	optind = 0;
	while ((opt = getopt_long(argc, argv, "hv:", opts, NULL)) != -1)
		if ((rc = apply_flag(c, ro, opt, argv)) != 0)
			return rc;
	return 0;
}

static void run_loop(void)
{
	cli_run_until_signal(main_loop);
}

static int run_one(const struct kubelet_config *c)
{
	struct kubelet *k = kubelet_new(main_loop, c);
	int rc = 0;

	if (!k)
		return cli_fail("%s", err_msg());
	if (kubelet_start(k) < 0)
		rc = cli_fail("failed to run Kubelet: %s", err_msg());
	else
		run_loop();
	kubelet_free(k);
	return rc;
}

/* --control-socket: the pool's words (kubelet.h), and "ping" for
 * control_listen's probe and the supervisor's wait for this process. */
static json_t *pool_control(void *arg, const json_t *words)
{
	const char *verb = jx_array_str(words, 0);

	if (verb && !strcmp(verb, "ping"))
		return json_pack("{s:b}", "ok", true);
	return kubelet_pool_command(arg, words);
}

static int run_hollow(struct kubelet_config *c, const struct run_opts *ro)
{
	struct kubelet_pool *p;
	struct control *ctl = NULL;
	int rc = 0;

	if (!ro->port_set)
		c->port = 0;
	if (!(p = kubelet_pool_new(main_loop, c, ro->hollow, ro->prefix, ro->first)))
		return cli_fail("%s", err_msg());
	if (kubelet_pool_start(p) < 0)
		rc = cli_fail("failed to run hollow kubelets: %s", err_msg());
	/* Last: a supervisor waiting for the socket finds the pool started. */
	else if (ro->control && !(ctl = control_listen(main_loop, ro->control, pool_control, p)))
		rc = cli_fail("--control-socket: %s", err_msg());
	else {
		struct event *trim = cli_heap_trimmer(main_loop);
		run_loop();
		if (trim)
			event_free(trim);
	}
	control_free(ctl);
	kubelet_pool_free(p);
	return rc;
}

int cmd_kubelet(int argc, char **argv)
{
	struct kubelet_config c;
	struct run_opts ro = {.prefix = "node-"};
	int rc;

	kubelet_config_init(&c);
	if ((rc = parse(argc, argv, &c, &ro)) != 0) {
		kubelet_config_free(&c);
		return rc == PARSE_HELP ? 0 : rc;
	}
	if (ro.hollow < 0) {
		kubelet_config_free(&c);
		return cli_usage_error("kubelet", "--hollow-nodes must be 0 or more");
	}
	if (ro.hollow == 0 && (ro.control || ro.first)) {
		kubelet_config_free(&c);
		return cli_usage_error("kubelet", "--%s is for --hollow-nodes",
				       ro.control ? "control-socket" : "hollow-first-index");
	}
	/* Refuse now what the descriptor limit cannot hold (run_hollow
	 * serves only with --port). */
	if (ro.hollow > 0 &&
	    cli_need_fds("kubelet", "--hollow-nodes", ro.hollow,
			 kubelet_pool_fds_per_node(ro.port_set && c.port != 0, false))) {
		kubelet_config_free(&c);
		return 1;
	}
	LOG_INFO("\"Kubelet version\" kubeletVersion=\"%s\"", KUBELET_VERSION);
	main_loop = loop_new();
	rc = ro.hollow > 0 ? run_hollow(&c, &ro) : run_one(&c);
	LOG_INFO("\"Shutdown complete\"");
	loop_free(main_loop);
	kubelet_config_free(&c);
	return rc;
}
