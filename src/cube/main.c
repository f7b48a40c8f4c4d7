/*
 * cube — one binary, many components (like k3s): the first argument names
 * the subcommand. Global flags come before it.
 */
#include "cube/cli.h"

#include "net/secureserve.h"
#include "net/mempool.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/fdlimit.h"
#include "base/heap.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * jemalloc's settings, read by jemalloc itself at its first allocation when
 * the executable is linked with it (base/heap.h). Its background threads
 * (one per CPU at most, signals blocked) hand pages that stayed free for
 * its dirty decay time (10 s by default) back to the kernel, so a burst
 * (a bootstrap storm's handshakes, a large list) leaves no resident garbage
 * behind and no thread serving requests pays for the purge. MALLOC_CONF in
 * the environment adds to these. Ignored by glibc's malloc.
 */
const char *malloc_conf = "background_thread:true";

#define CUBE_VERSION "0.1.0"
#define CUBE_K8S_VERSION "v1.32.0"

static const char main_usage[] =
	"cube - a small Kubernetes-compatible control plane, for rehearsing node\n"
	"certificate rotation and its failures.\n"
	"\n"
	"Usage: cube [global flags] <command> [flags]\n"
	"\n"
	"Commands:\n"
	"  up                  a whole cluster in this process: control plane + N hollow kubelets\n"
	"  server              the control plane (API server, controller manager, scheduler) in one\n"
	"                      process\n"
	"  apiserver           the API server (HTTPS, mutual TLS, SQLite store)\n"
	"  controller-manager  CSR, node lifecycle and taint eviction controllers\n"
	"  scheduler           binds pods to nodes (filters, scores, preemption, backoff queue)\n"
	"  kubelet             the node agent: bootstrap, certificate rotation, heartbeats, pods\n"
	"  pki init            create a cluster's PKI (CA, serving and client certs, kubeconfigs)\n"
	"  certs               check-expiration, report, inspect, verify, sign-csr, new-csr\n"
	"  logs                a component's or a node's kubelet log (cube up's data dir)\n"
	"  fault               break a running cube up cluster: expired or foreign certificates,\n"
	"                      no rotation, no approver, no RBAC binding, partitions, clock skew\n"
	"  restart             restart a node's kubelet or a control-plane component (cube up)\n"
	"  scenario            play the seeds' failures on a fresh cluster: timeline, diagnosis,\n"
	"                      expected timings, an HTML report\n"
	"  demo                rotation, scenario 1 and recovery plan 1, narrated (make demo)\n"
	"  doctor              diagnose a cluster: each failure mode of the seeds' table found,\n"
	"                      with its evidence, root cause and fix\n"
	"  version             print cube's version\n"
	"\n"
	"Global flags:\n"
	"  -v, --v N                 log verbosity (klog levels)\n"
	"      --clock-offset DUR    live as if the wall clock were DUR later (\"400d\", \"-2h\"):\n"
	"                            rehearse expiry without waiting; also CUBE_CLOCK_OFFSET\n"
	"  -h, --help                this help\n"
	"\n"
	"Run 'cube <command> --help' for a command's flags.\n";

static int cmd_version(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return cli_help("Usage: cube version\n\nPrint cube's version, the Kubernetes "
				"version it emulates, and the malloc it runs on.\n");
	printf("cube %s (Kubernetes %s)\n", CUBE_VERSION, CUBE_K8S_VERSION);
	printf("heap: %s%s\n", heap_allocator(),
	       heap_returns_pages() ? ", free pages returned by background threads" : "");
	return 0;
}

static const struct cli_command commands[] = {
	{"up", "a whole cluster in one process", cmd_up, NULL},
	{"server", "the control plane in one process", cmd_server, NULL},
	{"apiserver", "the Kubernetes API server", cmd_apiserver, NULL},
	{"controller-manager", "the controllers", cmd_controller_manager, NULL},
	{"scheduler", "the scheduler", cmd_scheduler, NULL},
	{"kubelet", "the node agent", cmd_kubelet, NULL},
	{"pki", "cluster PKI: init", cmd_pki, NULL},
	{"certs", "certificate tools", cmd_certs, NULL},
	{"logs", "a component's log from a cube up cluster", cmd_logs, NULL},
	{"fault", "inject a fault into a cube up cluster", cmd_fault, NULL},
	{"restart", "restart a kubelet or component of a cube up cluster", cmd_restart, NULL},
	{"scenario", "play a failure scenario on a fresh cluster", cmd_scenario, NULL},
	{"demo", "rotation, scenario 1 and recovery plan 1", cmd_demo, NULL},
	{"doctor", "diagnose a cluster: the seeds' failure table", cmd_doctor, NULL},
	{"version", "print the version", cmd_version, NULL},
	{NULL, NULL, NULL, NULL},
};

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "cube %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nRun 'cube %s --help' for usage.\n", cmd);
	return EXIT_USAGE;
}

int cli_bad_flag(const char *cmd, char **argv)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	if (optopt && strncmp(arg, "--", 2) == 0)
		return cli_usage_error(cmd, "flag %s needs a value", arg);
	return cli_usage_error(cmd, "unknown flag %s", arg);
}

int cli_fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int cli_need_fds(const char *cmd, const char *flag, int nodes, long per_node)
{
	char what[128];
	long need = CLI_FD_RESERVE + nodes * per_node, fit;

	snprintf(what, sizeof(what), "cube %s %s %d", cmd, flag, nodes);
	if (fdlimit_ensure(need, what) == 0)
		return 0;
	fit = (fdlimit_current() - CLI_FD_RESERVE) / per_node;
	if (fit < 1)
		return cli_fail("%s", err_msg());
	return cli_fail("%s; or run fewer nodes: %s %ld fits the limit now", err_msg(), flag, fit);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	LOG_INFO("\"Received signal, shutting down\" signal=%d", (int)sig);
	loop_stop(arg);
}

/*
 * glibc keeps what a burst freed (a bootstrap storm's handshakes and
 * bootstrap clients, a thousand kubelets' first lists) as free chunks in its
 * heaps, resident. Handing whole free pages back now and then keeps RSS
 * near what is in use: 1,000 hollow kubelets, 130.6 -> 91.7 MB. Real time,
 * not the virtual clock: this is about the process, not the cluster.
 * jemalloc's background threads do this by themselves (malloc_conf).
 */
#define TRIM_PERIOD_S 30

static void on_trim(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	heap_trim();
}

struct event *cli_heap_trimmer(struct loop *loop)
{
	struct event *trim;

	if (heap_returns_pages())
		return NULL;
	if (!(trim = event_new(loop_base(loop), -1, EV_PERSIST, on_trim, NULL)))
		abort();
	event_add(trim, &(struct timeval){TRIM_PERIOD_S, 0});
	return trim;
}

void cli_run_until_signal(struct loop *loop)
{
	struct event *term = evsignal_new(loop_base(loop), SIGTERM, on_signal, loop);
	struct event *intr = evsignal_new(loop_base(loop), SIGINT, on_signal, loop);

	evsignal_add(term, NULL);
	evsignal_add(intr, NULL);
	loop_run(loop);
	event_free(term);
	event_free(intr);
}

int cli_serving_flag(const char *cmd, int c, const char *arg, struct secure_serving_opts *o)
{
	char *end;
	long port;

	switch (c - CLI_SERVING_BASE) {
	case 0:
		port = strtol(arg, &end, 10);
		if (!*arg || *end || port < 0 || port > 65535)
			return cli_usage_error(cmd, "invalid argument \"%s\" for \"--secure-port\" flag",
					       arg);
		o->port = (int)port;
		return 1;
	case 1: o->bind_address = arg; return 1;
	case 2: o->cert_dir = arg; return 1;
	case 3: o->tls_cert_file = arg; return 1;
	case 4: o->tls_key_file = arg; return 1;
	case 5: o->client_ca_file = arg; return 1;
	default: return 0;
	}
}

int cli_parse_bool(const char *s, bool *out)
{
	if (!s || !strcmp(s, "true") || !strcmp(s, "1"))
		*out = true;
	else if (!strcmp(s, "false") || !strcmp(s, "0"))
		*out = false;
	else
		return -1;
	return 0;
}

int cli_help(const char *usage)
{
	fputs(usage, stdout);
	return 0;
}

int cli_dispatch(const char *group, const struct cli_command *cmds, int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		printf("Usage: cube %s <command> [flags]\n\nCommands:\n", group);
		for (const struct cli_command *c = cmds; c->name; c++)
			printf("  %-20s %s\n", c->name, c->summary);
		printf("\nRun 'cube %s <command> --help' for a command's flags.\n", group);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	for (const struct cli_command *c = cmds; c->name; c++)
		if (!strcmp(c->name, argv[1]))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "cube %s: unknown command \"%s\"\nRun 'cube %s --help' for usage.\n",
		group, argv[1], group);
	return EXIT_USAGE;
}

static int set_offset(const char *s)
{
	int64_t ns;
	if (duration_parse(s, &ns) < 0) {
		fprintf(stderr, "cube: --clock-offset: %s\nRun 'cube --help' for usage.\n",
			err_msg());
		return EXIT_USAGE;
	}
	clock_set_offset(ns);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"v", required_argument, NULL, 'v'},
		{"clock-offset", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *env = getenv("CUBE_CLOCK_OFFSET");
	int c;

	/* Before OpenSSL or libevent allocates anything: the buffers they take
	 * and give back on every read and write come from per-thread lists
	 * (net/mempool.h). */
	mempool_install();
	/* As Go programs since 1.19: the soft limit a login shell hands out
	 * (1,024) is not a daemon's. Commands that know their need check it
	 * (cli_need_fds). */
	fdlimit_raise();
	/* Every command reports bad flags itself, in one line, with its own name. */
	opterr = 0;
	if (env && *env && set_offset(env))
		return EXIT_USAGE;
	/* "+" stops at the first non-option: the subcommand parses the rest. */
	while ((c = getopt_long(argc, argv, "+v:h", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			log_set_verbosity(atoi(optarg));
			break;
		case 'o':
			if (set_offset(optarg))
				return EXIT_USAGE;
			break;
		case 'h':
			return cli_help(main_usage);
		default:
			fprintf(stderr, "cube: unknown flag %s\nRun 'cube --help' for usage.\n",
				argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	optind = 0; /* subcommands run getopt afresh */
	if (argc < 1) {
		fputs(main_usage, stderr);
		return EXIT_USAGE;
	}
	for (const struct cli_command *cmd = commands; cmd->name; cmd++)
		if (!strcmp(cmd->name, argv[0]))
			return cmd->run(argc, argv);
	fprintf(stderr, "cube: unknown command \"%s\"\nRun 'cube --help' for usage.\n", argv[0]);
	return EXIT_USAGE;
}
