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
    "that node's kubelet; without, the hollow kubelet pool's own lines, and each\n"
    "kubelet process's DIR/logs/kubelets-I.log when cube up runs them apart).\n"
    "\n"
    "Flags:\n"
    "      --data-dir DIR                  the cluster (default ./cube-data)\n"
    "      --node NAME                     the kubelet of node NAME\n"
    "                                      (DIR/nodes/NAME/kubelet.log)\n"
    "  -n, --lines N                       the last N lines only (of each file)\n"
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

/* One file of the log asked for. */
struct log_file {
	char path[4096];
	FILE *f;
	long off;
};

/* -f: poll for what is appended to each (a truncated file starts over). */
static void follow(struct log_file *files, size_t n)
{
	struct timespec tick = {0, 200 * 1000 * 1000};
	struct stat st;

	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	while (!stop) {
		for (size_t i = 0; i < n; i++) {
			if (stat(files[i].path, &st) != 0)
				continue;
			if (st.st_size < files[i].off)
				files[i].off = 0;
			if (st.st_size > files[i].off)
				files[i].off = copy_from(files[i].f, files[i].off);
		}
		nanosleep(&tick, NULL);
	}
}

#define MAX_LOG_FILES 64

/*
 * The files of the log asked for: a node's kubelet.log, or a component's
 * log; for the kubelet pool, its own log and, when cube up runs the
 * kubelets in processes of their own (--kubelet-processes), each
 * process's logs/kubelets-<i>.log, in order. How many were found.
 */
static size_t log_files(const char *dir, const char *component, const char *node,
                        struct log_file *out)
{
	size_t n = 0;

	if (node) {
		snprintf(out[n++].path, sizeof(out->path), "%s/nodes/%s/kubelet.log", dir, node);
		return n;
	}
	snprintf(out[n++].path, sizeof(out->path), "%s/logs/%s.log", dir, component);
	if (strcmp(component, "kubelet"))
		return n;
	if (access(out[0].path, F_OK) != 0)
		n = 0;
	for (int i = 0; n < MAX_LOG_FILES; i++) {
		snprintf(out[n].path, sizeof(out->path), "%s/logs/kubelets-%d.log", dir, i);
		if (access(out[n].path, F_OK) != 0)
			break;
		n++;
	}
	if (!n) /* neither: say what was looked for first */
		snprintf(out[n++].path, sizeof(out->path), "%s/logs/%s.log", dir, component);
	return n;
}

int cmd_logs(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"data-dir", required_argument, NULL, 'd'}, {"node", required_argument, NULL, 'N'},
	    {"lines", required_argument, NULL, 'n'},    {"follow", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	const char *dir = "./cube-data", *node = NULL, *component;
	static struct log_file files[MAX_LOG_FILES];
	long lines = -1, size, off;
	bool follow_on = false;
	size_t nfiles;
	char *end;
	struct stat st;
	int c, rc = 0;

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
	nfiles = log_files(dir, component, node, files);
	for (size_t i = 0; i < nfiles; i++) {
		if ((files[i].f = fopen(files[i].path, "rb")))
			continue;
		if (node && stat(dir, &st) == 0)
			rc = cli_fail("no log for node %s in %s (%s: %s)", node, dir, files[i].path,
		                strerror(errno));
		else
			rc = cli_fail("%s: %s (is --data-dir a cluster that `cube up` runs?)",
			              files[i].path, strerror(errno));
		nfiles = i;
		goto out;
	}
	/* The last N lines of each: the processes' lines interleave in time,
	 * each file in order. */
	for (size_t i = 0; i < nfiles; i++) {
		fseek(files[i].f, 0, SEEK_END);
		size = ftell(files[i].f);
		off = lines == 0 ? size : lines > 0 ? tail_offset(files[i].f, size, lines) : 0;
		files[i].off = copy_from(files[i].f, off);
	}
	if (follow_on)
		follow(files, nfiles);
out:
	for (size_t i = 0; i < nfiles; i++)
		fclose(files[i].f);
	return rc;
}
