/*
 * cube logs — a component's log from a cluster `cube up` (or `cube server`)
 * runs: the klog lines it wrote, as `journalctl -u kubelet` shows a real
 * node's. The files are the components' log scopes (base/log.h):
 * <data-dir>/logs/<component>.log for the control plane and the hollow
 * pool, <data-dir>/nodes/<node>/kubelet.log for each kubelet.
 */
#include "cube/cli.h"


#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char logs_usage[] =
    "Usage: cube logs [flags] [COMPONENT]\n"
    "\n"
    "Print a component's log from a cluster that `cube up` or `cube server` runs in\n"
    "--data-dir: every line it wrote, at the verbosity the cluster runs with.\n"
    "  cube logs --node node-1 | grep -i \"certificate\\|tls\\|x509\"\n"
    "is the runbook's `journalctl -u kubelet | grep ...` on that node.\n"
    "\n"
    "COMPONENT: apiserver, controller-manager, scheduler, or kubelet (with --node,\n"
    "that node's kubelet; without, the hollow kubelet pool's own lines).\n"
    "\n"
    "Flags:\n"
    "      --data-dir DIR                  the cluster (default ./cube-data)\n"
    "      --node NAME                     the kubelet of node NAME\n"
    "                                      (DIR/nodes/NAME/kubelet.log)\n"
    "  -n, --lines N                       the last N lines only\n"
    "  -f, --follow                        then print what is appended, until Ctrl-C\n";

static const char *const components[] = {"apiserver", "controller-manager", "scheduler", "kubelet",
                                         NULL};

static bool known(const char *c)
{
	for (size_t i = 0; components[i]; i++)
		if (!strcmp(components[i], c))
			return true;
	return false;
}

/* Where the last n lines of f start (0: from the beginning). */
static long tail_offset(FILE *f, long size, long n)
{
	char buf[65536];
	long pos = size, lines = 0;

	/* A final newline ends the last line; it does not start another. */
	if (size > 0 && fseek(f, size - 1, SEEK_SET) == 0 && fgetc(f) == '\n')
		pos--;
	while (pos > 0) {
		long chunk = pos < (long)sizeof(buf) ? pos : (long)sizeof(buf);
		if (fseek(f, pos - chunk, SEEK_SET) < 0 ||
		    fread(buf, 1, (size_t)chunk, f) != (size_t)chunk)
			return 0;
		for (long i = chunk - 1; i >= 0; i--)
			if (buf[i] == '\n' && ++lines == n)
				return pos - chunk + i + 1;
		pos -= chunk;
	}
	return 0;
}

/* Copy f from off to its end onto stdout; the new offset. */
static long copy_from(FILE *f, long off)
{
	char buf[65536];
	size_t got;

	if (fseek(f, off, SEEK_SET) < 0)
		return off;
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
		fwrite(buf, 1, got, stdout);
		off += (long)got;
	}
	clearerr(f);
	fflush(stdout);
	return off;
}

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

/* -f: poll for what is appended (a truncated file starts over). */
static void follow(FILE *f, const char *path, long off)
{
	struct timespec tick = {0, 200 * 1000 * 1000};
	struct stat st;

	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	while (!stop) {
		if (stat(path, &st) == 0) {
			if (st.st_size < off)
				off = 0;
			if (st.st_size > off)
				off = copy_from(f, off);
		}
		nanosleep(&tick, NULL);
	}
}

int cmd_logs(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"data-dir", required_argument, NULL, 'd'}, {"node", required_argument, NULL, 'N'},
	    {"lines", required_argument, NULL, 'n'},    {"follow", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	const char *dir = "./cube-data", *node = NULL, *component;
	long lines = -1, size, off = 0;
	bool follow_on = false;
	char path[4096], *end;
	struct stat st;
	FILE *f;
	int c;

	while ((c = getopt_long(argc, argv, "hn:f", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'N':
			node = optarg;
			break;
		case 'n':
			errno = 0;
			lines = strtol(optarg, &end, 10);
			if (errno || *end || lines < 0)
				return cli_usage_error("logs", "--lines wants a count, not \"%s\"",
				                       optarg);
			break;
		case 'f':
			follow_on = true;
			break;
		case 'h':
			return cli_help(logs_usage);
		default:
			return cli_bad_flag("logs", argv);
		}
	}
	if (optind < argc - 1)
		return cli_usage_error("logs", "one component at most, not \"%s\"",
		                       argv[optind + 1]);
	component = optind < argc ? argv[optind] : node ? "kubelet" : NULL;
	if (!component)
		return cli_usage_error("logs",
		                       "which log? a COMPONENT (apiserver, "
		                       "controller-manager, scheduler, kubelet) or --node NAME");
	if (!known(component))
		return cli_usage_error("logs",
		                       "no component \"%s\": apiserver, controller-manager, "
		                       "scheduler or kubelet",
		                       component);
	if (node && strcmp(component, "kubelet"))
		return cli_usage_error("logs", "--node names a kubelet, not the %s", component);
	if (node && (strchr(node, '/') || !strcmp(node, "..") || !*node))
		return cli_usage_error("logs", "--node wants a node name, not \"%s\"", node);
	if (node)
		snprintf(path, sizeof(path), "%s/nodes/%s/kubelet.log", dir, node);
	else
		snprintf(path, sizeof(path), "%s/logs/%s.log", dir, component);
	if (!(f = fopen(path, "rb"))) {
		if (node && stat(dir, &st) == 0)
			return cli_fail("no log for node %s in %s (%s: %s)", node, dir, path,
			                strerror(errno));
		return cli_fail("%s: %s (is --data-dir a cluster that `cube up` runs?)", path,
		                strerror(errno));
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	if (lines == 0)
		off = size;
	else if (lines > 0)
		off = tail_offset(f, size, lines);
	off = copy_from(f, off);
	if (follow_on)
		follow(f, path, off);
	fclose(f);
	return 0;
}
