/*
 * cube server — the control plane (API server + controller manager) in one
 * process; cube up — that plus N hollow kubelets, with progress until every
 * node is Ready, then the KUBECONFIG line, until Ctrl-C.
 */
#include "cube/cli.h"
#include "cube/cluster.h"
#include "cube/control.h"
#include "cube/ha.h"

#include "controllers/controllers.h"

#include "client/informer.h"
#include "client/rest.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/fdlimit.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The flags control_plane_flag() takes, shared by `cube up` and `cube server`. */
#define CONTROL_PLANE_HELP                                                                         \
	"      --node-monitor-period DUR       the node lifecycle controller's check (default 5s)\n" \
	"      --node-monitor-grace-period DUR  how long a silent node stays Ready (default 50s)\n" \
	"      --default-not-ready-toleration-seconds N    the API server's default\n"              \
	"      --default-unreachable-toleration-seconds N  NoExecute tolerations (default 300)\n"   \
	"      --pod-initial-backoff DUR       the scheduler's podInitialBackoffSeconds (default 1s)\n" \
	"      --pod-max-backoff DUR           its podMaxBackoffSeconds (default 10s)\n"            \
	"      --controllers LIST              the controller manager's --controllers, e.g.\n"      \
	"                                      '*,-csrapproving' (no approver: kubelets stay\n"     \
	"                                      without certificates until you approve their CSRs)\n" \
	"  -v, --v N                           log verbosity\n"

static const char up_usage[] =
	"Usage: cube up [flags]\n"
	"\n"
	"Start a whole cluster in this process: the API server, the controller manager\n"
	"and N hollow kubelets that bootstrap with a token, get their certificates from\n"
	"CSRs, rotate them, and heartbeat. Shows progress until every node is Ready\n"
	"(then the memory resident in this process and its children: the kubelet\n"
	"processes, or under --ha every process of the layout),\n"
	"while the components log to DIR/logs/ (cube.log has every line) and each\n"
	"kubelet to DIR/nodes/NAME/kubelet.log (`cube logs`; -v N logs here too);\n"
	"prints the KUBECONFIG line, and runs until Ctrl-C. Run it again on the same\n"
	"--data-dir to resume the same cluster.\n"
	"\n"
	"Above 2,000 nodes, when this process's open-files limit cannot hold them all,\n"
	"the kubelets run in child processes instead, `cube kubelet --hollow-nodes` each\n"
	"with a range of nodes (DIR/logs/kubelets-I.log), each started once the one before\n"
	"has its nodes' certificates; a child that dies is restarted 10 s later, and all\n"
	"stop with cube up.\n"
	"\n"
	"Flags:\n"
	"      --nodes N                       hollow kubelets (default 3); refused at once when\n"
	"                                      the open-files limit cannot hold them\n"
	"      --kubelet-processes N           run the kubelets in N child processes, nodes\n"
	"                                      split evenly in ranges (cube's own; default 0 =\n"
	"                                      automatic: in this process when its open-files\n"
	"                                      limit holds them or up to 2,000 nodes, else one\n"
	"                                      process per 2,500, or more if the limit asks)\n"
	"      --data-dir DIR                  the cluster's home: PKI, kubeconfigs, state.db,\n"
	"                                      nodes/ (default ./cube-data)\n"
	"      --port N                        API server port on 127.0.0.1 (default 6443;\n"
	"                                      0 = any free port)\n"
	"      --cert-ttl DUR                  lifetime of the certificates the signer issues\n"
	"                                      (--cluster-signing-duration; default 8760h). The\n"
	"                                      signer backdates NotBefore by 5m, so a 2m TTL is\n"
	"                                      a 7m certificate, rotated within 78 s of issue\n"
	"      --node-status-update-frequency DUR   (default 10s)\n"
	"      --node-lease-duration-seconds N      (default 40)\n"
	"      --pod-start-delay DUR           the simulated runtime's start time (default 1s)\n"
	"      --exit-after DUR                a kubelet without a valid client certificate\n"
	"                                      exits (status 1) after this and is restarted\n"
	"                                      10 s later, as systemd would (default 5m)\n"
	"      --events[=BOOL]                 once up, the cluster's events and CSRs on the\n"
	"                                      console as they happen (default true)\n"
	"      --certificate-condition         kubelets report ClientCertificateExpiring, a node\n"
	"                                      condition, before their certificate runs out (cube's)\n"
	"      --self-heal                     kubelets re-bootstrap in place when their\n"
	"                                      certificate expires, instead of exiting (cube's)\n"
	"      --server-tls-bootstrap          kubelets request serving certificates too\n"
	"      --approve-kubelet-serving       ...and the controller manager approves them\n"
	"      --ha                            kubeadm's HA layout as processes: an etcd cluster\n"
	"                                      (TLS, pki/etcd/), several API servers on it behind\n"
	"                                      haproxy on --port, two controller managers and two\n"
	"                                      schedulers electing leaders, the kubelets in one\n"
	"                                      `cube kubelet --hollow-nodes` process; `cube fault\n"
	"                                      kill-etcd|kill-apiserver|expire-etcd-cert` break it\n"
	"      --etcd-members N                with --ha (default 3)\n"
	"      --apiservers N                  with --ha (default 2)\n"
	CONTROL_PLANE_HELP;

static const char server_usage[] =
	"Usage: cube server [flags]\n"
	"\n"
	"The control plane in one process: the API server, the controller manager (CSR\n"
	"approving, signing, cleaning; node lifecycle; taint eviction) and the scheduler, each on\n"
	"its own thread, talking through the API as separate processes would. Creates the PKI in --data-dir if missing.\n"
	"\n"
	"Flags:\n"
	"      --data-dir DIR                  PKI, kubeconfigs and state.db (default ./cube-data)\n"
	"      --secure-port N                 API server port (default 6443; 0 = any)\n"
	"      --bind-address IP               (default 127.0.0.1)\n"
	"      --cluster-signing-duration DUR  (default 8760h)\n"
	"      --approve-kubelet-serving       approve valid kubelet serving CSRs\n"
	CONTROL_PLANE_HELP;

/* ---- progress: an admin client watching nodes become Ready ----------------- */

/*
 * The nodes come from an informer (a list, then a watch) that counts the
 * Ready ones as they change, and goes once all are. Listing every Node
 * again each time cost more than the storm it reported on: at 10,000
 * nodes a list is 20 MB of JSON to send and to parse, three times a second.
 */
struct progress {
	struct loop *loop;
	struct rest_client *client;
	struct informer *nodes;
	struct timer *tick; /* the console line, at most every PROGRESS_EVERY */
	int want, ready, shown;
	bool events; /* then the cluster's events on the console */
	int64_t start;
	const char *dir;
	struct cluster *cl; /* NULL under --ha: its supervisor runs the cluster */
	struct ha *ha;      /* that supervisor, or NULL */
};

#define PROGRESS_EVERY (300 * NS_PER_MS)

/* When cube up began: the console's times count from the command, not
 * from when the cluster answered (a first kubelet process of 2,500 nodes
 * takes seconds to). */
static int64_t up_started;

static void feeds_start(struct progress *p);

static bool node_ready(const json_t *node)
{
	const json_t *c = node ? jx_condition(json_object_get(node, "status"), "Ready") : NULL;
	return c && !strcmp(jx_str(c, "status") ?: "", "True");
}

/* What the progress keeps of a Node (its informer's transform): its name,
 * version, and whether it is Ready. Not the Node's text, parsed again at
 * each of its changes through the storm. */
static json_t *ready_view(const json_t *node)
{
	static const char *const paths[] = {"metadata.name", "metadata.resourceVersion"};
	json_t *view = jx_pick(node, paths, sizeof(paths) / sizeof(paths[0]));

	if (node_ready(node))
		jx_set(view, "status.conditions",
		       json_pack("[{s:s,s:s}]", "type", "Ready", "status", "True"));
	return view;
}

static void node_added(void *arg, json_t *obj)
{
	struct progress *p = arg;
	p->ready += node_ready(obj);
}

static void node_updated(void *arg, json_t *old, json_t *obj)
{
	struct progress *p = arg;
	p->ready += node_ready(obj) - node_ready(old);
}

static void node_deleted(void *arg, json_t *obj)
{
	struct progress *p = arg;
	p->ready -= node_ready(obj);
}

/* What the cluster holds in memory now that every node is Ready: this
 * process and its children (the kubelet processes, or every process of
 * --ha's layout: etcd, the API servers, haproxy, the controllers, the
 * kubelets). */
static void print_memory(const struct progress *p)
{
	struct cluster_rss r = {.self_kib = proc_rss_kib(0)};
	const char *what = "kubelet ";

	if (p->cl) {
		cluster_rss(p->cl, &r);
	} else if (p->ha) {
		ha_rss(p->ha, &r);
		what = "";
	}
	if (r.self_kib < 0)
		return;
	if (!r.children)
		printf("  memory: %.1f MiB resident (one process)\n", r.self_kib / 1024.0);
	else
		printf("  memory: %.1f MiB resident in all: this process %.1f MiB, %d %s"
		       "process%s %.1f MiB\n",
		       (r.self_kib + r.children_kib) / 1024.0, r.self_kib / 1024.0,
		       r.children, what, r.children > 1 ? "es" : "",
		       r.children_kib / 1024.0);
}

static void on_tick(void *arg)
{
	struct progress *p = arg;
	char abs[PATH_MAX];

	if (!informer_synced(p->nodes)) {
		timer_after(p->tick, PROGRESS_EVERY);
		return;
	}
	if (p->ready != p->shown) {
		printf("  %d/%d nodes Ready (%.1fs)\n", p->ready, p->want,
		       (double)(clock_mono() - p->start) / 1e9);
		fflush(stdout);
		p->shown = p->ready;
	}
	if (p->ready < p->want) {
		timer_after(p->tick, PROGRESS_EVERY);
		return;
	}
	informer_free(p->nodes); /* what it kept is not the cluster's memory */
	p->nodes = NULL;
	print_memory(p);
	printf("\nCluster is up. Use it with:\n\n  export KUBECONFIG=%s/admin.conf\n"
	       "  kubectl get nodes\n  kubectl get csr\n\nCtrl-C stops it; `cube up` on "
	       "the same --data-dir resumes it.\n",
	       realpath(p->dir, abs) ? abs : p->dir);
	fflush(stdout);
	if (p->events)
		feeds_start(p);
}

static void progress_start(struct progress *p)
{
	struct informer_handlers h = {node_added, node_updated, node_deleted, p};

	p->nodes = informer_new(p->loop, p->client, "/api/v1/nodes", NULL, &h);
	informer_set_transform(p->nodes, ready_view);
	informer_start(p->nodes);
	p->tick = loop_timer(p->loop, on_tick, p);
	timer_after(p->tick, PROGRESS_EVERY);
}

/* ---- the console's cluster events: once up, what happens, as it happens ---- */

/* At most this many lines a second; the rest are counted (a storm of 1,000
 * rotations must not bury the console). */
#define FEED_LINES_PER_SEC 20

struct feed {
	struct progress *p;
	const char *path;
	void (*print)(const char *type, const json_t *obj);
	struct rest_watch *w;
	struct timer *relist;
};

static int64_t feed_window;
static int feed_lines, feed_dropped;

static bool feed_allow(void)
{
	int64_t now = clock_mono();
	if (now - feed_window >= NS_PER_SEC) {
		if (feed_dropped)
			printf("  ... %d more (kubectl get events, kubectl get csr)\n", feed_dropped);
		feed_window = now;
		feed_lines = feed_dropped = 0;
	}
	if (feed_lines >= FEED_LINES_PER_SEC) {
		feed_dropped++;
		return false;
	}
	feed_lines++;
	return true;
}

static const char *hms(const char *rfc3339, char buf[16])
{
	int64_t t;
	time_t sec;
	struct tm tm;

	if (!rfc3339 || time_parse_rfc3339(rfc3339, &t) < 0)
		t = clock_now();
	sec = (time_t)(t / NS_PER_SEC);
	gmtime_r(&sec, &tm);
	strftime(buf, 16, "%H:%M:%S", &tm);
	return buf;
}

/* An event as `kubectl get events` shows it: type, reason, object, message. */
static void print_event(const char *type, const json_t *ev)
{
	char when[16], obj[300];

	if (strcmp(type, "ADDED") || !feed_allow())
		return;
	snprintf(obj, sizeof(obj), "%s/%s", jx_str(ev, "involvedObject.kind") ?: "",
		 jx_str(ev, "involvedObject.name") ?: "");
	for (char *c = obj; *c && *c != '/'; c++)
		*c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
	printf("  %s  %-7s  %-24s %-22s %s\n",
	       hms(jx_str(ev, "lastTimestamp") ?: jx_str(ev, "eventTime"), when),
	       jx_str(ev, "type") ?: "", jx_str(ev, "reason") ?: "", obj,
	       jx_str(ev, "message") ?: "");
	fflush(stdout);
}

/* A CSR when it appears and as it is decided: Pending, Approved, Issued. */
static void print_csr(const char *type, const json_t *csr)
{
	const json_t *conds = jx_get(csr, "status.conditions"), *c;
	char when[16], state[64] = "Pending";
	size_t i;

	if (!strcmp(type, "DELETED") || !feed_allow())
		return;
	json_array_foreach(conds, i, c)
	{
		if (i == 0)
			snprintf(state, sizeof(state), "%s", jx_str(c, "type") ?: "");
	}
	if (jx_str(csr, "status.certificate"))
		snprintf(state + strlen(state), sizeof(state) - strlen(state), ",Issued");
	printf("  %s  %-7s  %-24s %-22s %s (%s)\n", hms(NULL, when), "CSR", state,
	       jx_str(csr, "metadata.name") ?: "", jx_str(csr, "spec.username") ?: "",
	       jx_str(csr, "spec.signerName") ?: "");
	fflush(stdout);
}

static void feed_event(void *arg, const char *type, json_t *obj)
{
	struct feed *f = arg;
	f->print(type, obj);
}

static void feed_end(void *arg, int status, const char *err)
{
	struct feed *f = arg;
	(void)status;
	(void)err;
	f->w = NULL;
	timer_after(f->relist, NS_PER_SEC);
}

/* From the list's revision on: what was there before is not news. */
static void feed_listed(void *arg, int status, json_t *body, const char *err)
{
	struct feed *f = arg;
	char path[300];

	(void)err;
	if (status != 200) {
		timer_after(f->relist, NS_PER_SEC);
		return;
	}
	snprintf(path, sizeof(path), "%s?watch=true&resourceVersion=%s", f->path,
		 jx_str(body, "metadata.resourceVersion") ?: "0");
	f->w = rest_watch(f->p->client, path, feed_event, feed_end, f);
}

static void feed_list(void *arg)
{
	struct feed *f = arg;
	char path[300];
	snprintf(path, sizeof(path), "%s?limit=1", f->path);
	rest_do(f->p->client, "GET", path, NULL, feed_listed, f);
}

static struct feed feeds[] = {
	{.path = "/api/v1/events", .print = print_event},
	{.path = "/apis/certificates.k8s.io/v1/certificatesigningrequests", .print = print_csr},
};

static void feeds_start(struct progress *p)
{
	printf("\nCluster events (kubectl get events -w; the klog stream is in %s/logs/):\n",
	       p->dir);
	for (size_t i = 0; i < sizeof(feeds) / sizeof(feeds[0]); i++) {
		feeds[i].p = p;
		feeds[i].relist = loop_timer(p->loop, feed_list, &feeds[i]);
		timer_after(feeds[i].relist, 0);
	}
}

static void feeds_stop(void)
{
	for (size_t i = 0; i < sizeof(feeds) / sizeof(feeds[0]); i++) {
		rest_watch_stop(feeds[i].w);
		timer_free(feeds[i].relist);
		feeds[i].w = NULL;
		feeds[i].relist = NULL;
	}
}

/* ---- the supervisor: cube.sock (control.h) ---------------------------------- */

static json_t *supervise(void *arg, const json_t *words)
{
	struct cluster **cl = arg;
	return cluster_control(*cl, words);
}

static struct ha *ha_now; /* the --ha supervisor, for its socket */

static json_t *supervise_ha(void *arg, const json_t *words)
{
	(void)arg;
	return ha_control(ha_now, words);
}

/* Start the cluster with its supervisor socket on loop; refuses when
 * another cube already runs on dir. */
static struct cluster *start(struct loop *loop, const struct cluster_opts *o,
			     struct cluster **cl, struct control **ctl)
{
	char *path = control_path(o->dir);

	if (file_mkdirs(o->dir, 0700) < 0 ||
	    !(*ctl = control_listen(loop, path, supervise, cl))) {
		free(path);
		return NULL;
	}
	free(path);
	if (!(*cl = cluster_start(o))) {
		control_free(*ctl);
		*ctl = NULL;
	}
	return *cl;
}

/* Run the main loop until SIGINT/SIGTERM, with progress if want > 0, then
 * the cluster's events when events. */
static int wait_for_signal(struct loop *loop, struct cluster *cl, struct control *ctl,
			   const char *dir, int want, bool events)
{
	/* cl NULL: the --ha supervisor (ha_now) runs the cluster. */
	struct progress p = {.loop = loop, .want = want, .shown = -1,
			     .start = up_started ? up_started : clock_mono(),
			     .dir = dir, .events = events, .cl = cl, .ha = cl ? NULL : ha_now};
	struct kubeconfig kc;
	char *admin = file_join(dir, "admin.conf");
	struct event *trim;

	if (want > 0 && kubeconfig_load(admin, &kc) == 0) {
		p.client = rest_client_from_kubeconfig(loop, &kc, "cube-up");
		kubeconfig_free(&kc);
		progress_start(&p);
	}
	free(admin);
	/* Its kubelets' bootstrap garbage (in process), or the supervisor's. */
	trim = cli_heap_trimmer(loop);
	cli_run_until_signal(loop);
	if (trim)
		event_free(trim);
	feeds_stop();
	informer_free(p.nodes);
	timer_free(p.tick);
	rest_client_free(p.client);
	control_free(ctl);
	if (cl) {
		/* The kubelet processes' timers and SIGCHLD are on loop. */
		cluster_stop(cl);
		loop_free(loop);
	} else {
		ha_stop(ha_now);
		ha_now = NULL;
		loop_free(loop);
	}
	LOG_INFO("\"Shutdown complete\"");
	return 0;
}

/* What `cube up --nodes nodes --kubelet-processes asked` needs of this
 * process's limit and of each kubelet process's (0: none), as it would
 * run under limit. */
static void up_needs(int nodes, int asked, long limit, long *self, long *child)
{
	int procs = cluster_kubelet_processes(nodes, asked, limit - CLI_FD_RESERVE);

	*self = CLI_FD_RESERVE + (procs ? cluster_shards_fds(nodes, procs)
					: nodes * cluster_fds_per_node());
	*child = procs ? CLI_FD_RESERVE + cluster_process_nodes(nodes, procs) *
					      cluster_fds_per_process_node()
		       : 0;
}

/* The most nodes that would fit limit, run as cube up would run them. */
static int nodes_that_fit(int nodes, int asked, long limit)
{
	long self, child;

	for (; nodes > 0; nodes--) {
		up_needs(nodes, asked, limit, &self, &child);
		if (self <= limit && child <= limit)
			break;
	}
	return nodes;
}

/*
 * The descriptors `cube up --nodes N` needs, refused now rather than
 * kubelets failing one by one with EMFILE and restarting: this process's
 * (the API server's ends of every connection, and with the kubelets here
 * theirs too), then each kubelet process's, which inherits this limit and
 * checks it again itself. 0, or 1 after saying what to do.
 */
static int need_fds(const struct cluster_opts *o, bool ha, int asked)
{
	int per = cluster_process_nodes(o->nodes, o->kubelet_processes), fit;
	long self, child, each;
	char what[160];

	if (ha || o->kubelet_processes == 0)
		return cli_need_fds("up", "--nodes", o->nodes,
				    ha ? ha_fds_per_node() : cluster_fds_per_node());
	up_needs(o->nodes, asked, fdlimit_current(), &self, &child);
	snprintf(what, sizeof(what), "cube up --nodes %d (its kubelets in %d processes)", o->nodes,
		 o->kubelet_processes);
	if (fdlimit_ensure(self, what) < 0) {
		if ((fit = nodes_that_fit(o->nodes, asked, fdlimit_current())) < 1)
			return cli_fail("%s", err_msg());
		return cli_fail("%s; or run fewer nodes: --nodes %d fits the limit now", err_msg(),
				fit);
	}
	snprintf(what, sizeof(what), "cube up --nodes %d --kubelet-processes %d: each kubelet "
		 "process (cube kubelet --hollow-nodes %d)", o->nodes, o->kubelet_processes, per);
	if (fdlimit_ensure(child, what) == 0)
		return 0;
	each = (fdlimit_current() - CLI_FD_RESERVE) / cluster_fds_per_process_node();
	if (each < 1)
		return cli_fail("%s", err_msg());
	return cli_fail("%s; or more kubelet processes: --kubelet-processes %ld fits the limit now",
			err_msg(), (o->nodes + each - 1) / each);
}

/* cube up --ha: the processes of ha.h, supervised from this one. */
static int up_ha(struct loop *loop, const struct cluster_opts *o, int etcd_members,
		 int apiservers, bool events)
{
	struct ha_opts ho = {.dir = o->dir,
			     .port = o->port,
			     .nodes = o->nodes,
			     .etcd_members = etcd_members,
			     .apiservers = apiservers,
			     .cert_ttl_ns = o->cert_ttl_ns,
			     .node_monitor_grace_period_ns = o->node_monitor_grace_period_ns,
			     .status_update_ns = o->status_update_ns,
			     .self_heal = o->self_heal};
	char *sock = control_path(o->dir);
	struct control *ctl;

	if (file_mkdirs(o->dir, 0700) < 0 ||
	    !(ctl = control_listen(loop, sock, supervise_ha, NULL))) {
		free(sock);
		loop_free(loop);
		return cli_fail("%s", err_msg());
	}
	free(sock);
	if (!(ha_now = ha_start(loop, &ho))) {
		int rc = cli_fail("%s", err_msg());
		control_free(ctl);
		loop_free(loop);
		return rc;
	}
	printf("  %d etcd members, %d API servers behind haproxy on https://127.0.0.1:%d, 2 "
	       "controller managers, 2 schedulers (leader-elected)\n",
	       etcd_members, apiservers, ha_port(ha_now));
	fflush(stdout);
	return wait_for_signal(loop, NULL, ctl, o->dir, o->nodes, events);
}

/* The console is for progress: the whole klog stream goes to
 * <dir>/logs/cube.log instead (each component's and node's lines also to
 * their own files). 0, or the console keeps the stream. */
static int quiet_console(const char *dir)
{
	char *logs = file_join(dir, "logs"), *path = file_join(logs, "cube.log");
	int fd = file_mkdirs(logs, 0700) == 0
	             ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640)
	             : -1;

	free(logs);
	free(path);
	if (fd < 0)
		return -1;
	log_set_fd(fd);
	return 0;
}

static int dur_flag(const char *cmd, const char *flag, const char *v, int64_t *out)
{
	if (duration_parse(v, out) < 0 || *out <= 0)
		return cli_usage_error(cmd, "invalid %s \"%s\"", flag, v);
	return 0;
}

/* --default-{not-ready,unreachable}-toleration-seconds: 0 or more. */
static int seconds_flag(const char *cmd, const struct option *opts, int c, const char *v,
			struct cluster_opts *o)
{
	char *end;
	long long n = strtoll(v, &end, 10);
	const char *name = "default-not-ready-toleration-seconds";

	for (size_t i = 0; opts[i].name; i++)
		if (opts[i].val == c)
			name = opts[i].name;
	if (!*v || *end || n < 0)
		return cli_usage_error(cmd, "invalid argument \"%s\" for \"--%s\" flag", v, name);
	o->toleration_s[c - 1] = n;
	o->toleration_set[c - 1] = true;
	return 0;
}

/* The control-plane flags `cube up` and `cube server` share: 0 taken, a
 * usage error's exit code, or -1 when c is none of them. */
static int control_plane_flag(const char *cmd, const struct option *opts, int c,
			      const char *arg, struct cluster_opts *o)
{
	switch (c) {
	case 'A': o->approve_kubelet_serving = true; return 0;
	case 'M': return dur_flag(cmd, "--node-monitor-period", arg, &o->node_monitor_period_ns);
	case 'G':
		return dur_flag(cmd, "--node-monitor-grace-period", arg,
				&o->node_monitor_grace_period_ns);
	case 1: case 2: return seconds_flag(cmd, opts, c, arg, o);
	case 3: return dur_flag(cmd, "--pod-initial-backoff", arg, &o->pod_initial_backoff_ns);
	case 4: return dur_flag(cmd, "--pod-max-backoff", arg, &o->pod_max_backoff_ns);
	case 5:
		o->controllers = arg;
		return controller_manager_check_controllers(arg) < 0
			       ? cli_usage_error(cmd, "%s", err_msg())
			       : 0;
	default: return -1;
	}
}

int cmd_up(int argc, char **argv)
{
	static const struct option opts[] = {
		{"nodes", required_argument, NULL, 'n'},
		{"data-dir", required_argument, NULL, 'd'},
		{"port", required_argument, NULL, 'p'},
		{"cert-ttl", required_argument, NULL, 't'},
		{"node-status-update-frequency", required_argument, NULL, 'u'},
		{"node-lease-duration-seconds", required_argument, NULL, 'l'},
		{"pod-start-delay", required_argument, NULL, 's'},
		{"exit-after", required_argument, NULL, 'x'},
		{"self-heal", no_argument, NULL, 'H'},
		{"certificate-condition", no_argument, NULL, 0x301},
		{"events", optional_argument, NULL, 0x302},
		{"server-tls-bootstrap", no_argument, NULL, 'S'},
		{"approve-kubelet-serving", no_argument, NULL, 'A'},
		{"node-monitor-period", required_argument, NULL, 'M'},
		{"node-monitor-grace-period", required_argument, NULL, 'G'},
		{"default-not-ready-toleration-seconds", required_argument, NULL, 1},
		{"default-unreachable-toleration-seconds", required_argument, NULL, 2},
		{"pod-initial-backoff", required_argument, NULL, 3},
		{"pod-max-backoff", required_argument, NULL, 4},
		{"controllers", required_argument, NULL, 5},
		{"ha", no_argument, NULL, 0x303},
		{"kubelet-processes", required_argument, NULL, 0x306},
		{"etcd-members", required_argument, NULL, 0x304},
		{"apiservers", required_argument, NULL, 0x305},
		{"v", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct cluster_opts o = {.dir = "cube-data", .bind_address = "127.0.0.1", .port = 6443,
				 .nodes = 3, .node_prefix = "node-"};
	bool ha = false;
	int etcd_members = 3, apiservers = 2, processes = 0;
	struct cluster *cl = NULL;
	struct control *ctl;
	struct loop *loop;
	/* cube -v N up, or up -v N: the klog stream on the console too. */
	bool console_klog = log_verbosity > 0, events = true;
	int c, r = 0;

	up_started = clock_mono();
	while (r == 0 && (c = getopt_long(argc, argv, "hv:", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.nodes = atoi(optarg);
			if (o.nodes < 0)
				r = cli_usage_error("up", "--nodes must be 0 or more");
			break;
		case 'd': o.dir = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 't': r = dur_flag("up", "--cert-ttl", optarg, &o.cert_ttl_ns); break;
		case 'u': r = dur_flag("up", "--node-status-update-frequency", optarg,
				       &o.status_update_ns); break;
		case 'l': o.lease_duration_s = atoi(optarg); break;
		case 's': r = dur_flag("up", "--pod-start-delay", optarg, &o.pod_start_delay_ns); break;
		case 'x': r = dur_flag("up", "--exit-after", optarg, &o.exit_after_ns); break;
		case 'H': o.self_heal = true; break;
		case 0x301: o.certificate_condition = true; break;
		case 0x302:
			if (cli_parse_bool(optarg, &events) < 0)
				r = cli_usage_error("up", "--events: true or false, not \"%s\"", optarg);
			break;
		case 'S': o.server_tls_bootstrap = true; break;
		case 0x303: ha = true; break;
		case 0x304:
			if ((etcd_members = atoi(optarg)) < 1 || etcd_members > 7)
				r = cli_usage_error("up", "--etcd-members: 1 to 7");
			break;
		case 0x305:
			if ((apiservers = atoi(optarg)) < 1 || apiservers > 9)
				r = cli_usage_error("up", "--apiservers: 1 to 9");
			break;
		case 0x306: {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 0 || v > 1024)
				r = cli_usage_error("up", "--kubelet-processes: 0 (automatic) to "
						    "1024, not \"%s\"", optarg);
			processes = (int)v;
			break;
		}
		case 'v':
			log_set_verbosity(atoi(optarg));
			console_klog = true;
			break;
		case 'h': return cli_help(up_usage);
		default:
			if ((r = control_plane_flag("up", opts, c, optarg, &o)) < 0)
				return cli_bad_flag("up", argv);
		}
	}
	if (r)
		return r;
	/* --ha's kubelets are one process of their own already. */
	if (ha && processes)
		return cli_usage_error("up", "--kubelet-processes is not for --ha (its kubelets "
				       "run in one process of their own)");
	o.kubelet_processes = ha ? 0
				 : cluster_kubelet_processes(o.nodes, processes,
							     fdlimit_current() - CLI_FD_RESERVE);
	if (o.nodes > 0 && need_fds(&o, ha, processes))
		return 1;
	printf("Starting a cluster with %d node%s in %s ...\n", o.nodes, o.nodes == 1 ? "" : "s",
	       o.dir);
	loop = loop_new();
	if (!console_klog && quiet_console(o.dir) == 0)
		printf("  logs in %s/logs/ and %s/nodes/*/kubelet.log: `cube logs --data-dir %s "
		       "COMPONENT`, or -v N to see them here\n",
		       o.dir, o.dir, o.dir);
	fflush(stdout);
	if (ha)
		return up_ha(loop, &o, etcd_members, apiservers, events);
	o.loop = loop;
	if (!start(loop, &o, &cl, &ctl)) {
		loop_free(loop);
		return cli_fail("%s", err_msg());
	}
	printf("  API server on https://127.0.0.1:%d\n", cluster_port(cl));
	if (o.kubelet_processes > 0)
		printf("  kubelets in %d process%s of up to %d nodes, each started once the one "
		       "before has its nodes' certificates (cube kubelet --hollow-nodes; logs in "
		       "%s/logs/kubelets-*.log)\n",
		       o.kubelet_processes, o.kubelet_processes == 1 ? "" : "es",
		       cluster_process_nodes(o.nodes, o.kubelet_processes), o.dir);
	fflush(stdout);
	return wait_for_signal(loop, cl, ctl, o.dir, o.nodes, events);
}

int cmd_server(int argc, char **argv)
{
	static const struct option opts[] = {
		{"data-dir", required_argument, NULL, 'd'},
		{"secure-port", required_argument, NULL, 'p'},
		{"bind-address", required_argument, NULL, 'b'},
		{"cluster-signing-duration", required_argument, NULL, 't'},
		{"approve-kubelet-serving", no_argument, NULL, 'A'},
		{"node-monitor-period", required_argument, NULL, 'M'},
		{"node-monitor-grace-period", required_argument, NULL, 'G'},
		{"default-not-ready-toleration-seconds", required_argument, NULL, 1},
		{"default-unreachable-toleration-seconds", required_argument, NULL, 2},
		{"pod-initial-backoff", required_argument, NULL, 3},
		{"pod-max-backoff", required_argument, NULL, 4},
		{"controllers", required_argument, NULL, 5},
		{"v", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct cluster_opts o = {.dir = "cube-data", .bind_address = "127.0.0.1", .port = 6443};
	struct cluster *cl = NULL;
	struct control *ctl;
	struct loop *loop;
	int c, r = 0;

	while (r == 0 && (c = getopt_long(argc, argv, "hv:", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o.dir = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 'b': o.bind_address = optarg; break;
		case 't': r = dur_flag("server", "--cluster-signing-duration", optarg,
				       &o.cert_ttl_ns); break;
		case 'v': log_set_verbosity(atoi(optarg)); break;
		case 'h': return cli_help(server_usage);
		default:
			if ((r = control_plane_flag("server", opts, c, optarg, &o)) < 0)
				return cli_bad_flag("server", argv);
		}
	}
	if (r)
		return r;
	loop = loop_new();
	o.loop = loop;
	if (!start(loop, &o, &cl, &ctl)) {
		loop_free(loop);
		return cli_fail("%s", err_msg());
	}
	LOG_INFO("\"cube server is up\" apiserver=\"https://127.0.0.1:%d\" kubeconfig=\"%s/admin.conf\"",
		 cluster_port(cl), o.dir);
	return wait_for_signal(loop, cl, ctl, o.dir, 0, false);
}
