#include "cube/cluster.h"
#include "cube/control.h"

#include "apiserver/apiserver.h"
#include "controllers/controllers.h"
#include "scheduler/scheduler.h"
#include "kubelet/kubelet.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* systemd's RestartSec=10 for a kubelet process that died. */
#define SHARD_RESTART_NS (10 * NS_PER_SEC)
/* How long a kubelet process may take to answer on its socket at start,
 * and to exit after SIGTERM. */
#define SHARD_START_S 120
#define SHARD_STOP_MS 10000
/* The next kubelet process starts once the last one's nodes all have a
 * client certificate, checked this often, or after SHARD_BOOTSTRAP_NS
 * whatever they have (no approver: they would wait for ever). */
#define SHARD_GATE_NS (500 * NS_PER_MS)
#define SHARD_BOOTSTRAP_NS (120 * NS_PER_SEC)

/* One component on its own thread and loop. */
struct component {
	const char *name;
	const char *comm; /* its thread's name: upstream's process name (ps -L, top -H) */
	pthread_t th;
	struct loop *loop;
	int (*start)(struct component *c);
	void (*stop)(struct component *c);
	void *state;
	struct cluster *cl;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready;
	int rc;
	char err[1024];
	struct log_scope log; /* <dir>/logs/<name>.log: this thread's lines */
};

/* One `cube kubelet --hollow-nodes` child: nodes first .. first+n-1. */
struct shard {
	struct cluster *cl;
	int index, first, n;
	char *sock, *log;      /* DIR/kubelets-<i>.sock, DIR/logs/kubelets-<i>.log */
	pid_t pid;             /* 0: not running */
	struct timer *restart; /* on opts.loop, after it died */
	struct timer *refault; /* shard_refault, once restarted */
	int64_t refault_deadline;
	bool died;     /* it ended, and is or will be started again */
	int certified;         /* its first nodes seen with a client certificate */
};

struct cluster {
	struct cluster_opts o;
	char server[64];
	struct component api, cm, sched, kubelets;
	int port;
	char *controllers; /* the controller manager's --controllers now (NULL: "*") */
	/* kubelet processes (opts.kubelet_processes > 0) instead of kubelets */
	struct shard *shards;
	int nshards, started;  /* shards[0 .. started-1] have had their turn */
	struct timer *next;    /* shards_next */
	int64_t next_deadline; /* mono: start the next whatever the last one's nodes have */
	struct event *sigchld;
	char self[PATH_MAX]; /* this binary, for them */
	bool stopping;       /* no more restarts */
};

static char *path_in(struct cluster *cl, const char *rel);

static void *component_main(void *arg)
{
	struct component *c = arg;
	char *dir = path_in(c->cl, "logs"), *file;
	int rc;

	/* Everything this component's thread logs also goes to its own file
	 * (`cube logs <component>`); a kubelet's lines to its node's. */
	if (asprintf(&file, "%s/%s.log", dir, c->name) < 0)
		abort();
	c->log.fd = -1;
	if (file_mkdirs(dir, 0700) == 0 && log_scope_open(&c->log, file) == 0)
		log_scope_enter(&c->log);
	free(file);
	free(dir);
	c->loop = loop_new();
	rc = c->start(c);
	pthread_mutex_lock(&c->mu);
	c->rc = rc;
	if (rc < 0)
		snprintf(c->err, sizeof(c->err), "%s: %s", c->name, err_msg());
	c->ready = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (rc == 0)
		loop_run(c->loop);
	if (c->stop)
		c->stop(c);
	loop_free(c->loop);
	log_scope_enter(NULL);
	log_scope_close(&c->log);
	return NULL;
}

static int component_run(struct component *c, struct cluster *cl)
{
	c->cl = cl;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	pthread_create(&c->th, NULL, component_main, c);
	pthread_setname_np(c->th, c->comm);
	pthread_mutex_lock(&c->mu);
	while (!c->ready)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	if (c->rc < 0) {
		pthread_join(c->th, NULL);
		c->th = 0;
		return err_set(c->rc, "%s", c->err);
	}
	return 0;
}

static void component_halt(struct component *c)
{
	if (!c->th)
		return;
	/* The thread may not have reached loop_run yet. */
	loop_stop_pending(c->loop);
	pthread_join(c->th, NULL);
	c->th = 0;
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

/* ---- the components --------------------------------------------------------- */

static char *path_in(struct cluster *cl, const char *rel)
{
	return file_join(cl->o.dir, rel);
}

static int api_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct apiserver_opts o;
	char *crt = path_in(cl, "pki/apiserver.crt"), *key = path_in(cl, "pki/apiserver.key");
	char *ca = path_in(cl, "pki/ca.crt"), *data = path_in(cl, "data");
	char *token = path_in(cl, "pki/bootstrap-token");
	char *sa_key = path_in(cl, "pki/sa.key"), *sa_pub = path_in(cl, "pki/sa.pub");
	char *kcrt = path_in(cl, "pki/apiserver-kubelet-client.crt");
	char *kkey = path_in(cl, "pki/apiserver-kubelet-client.key");

	apiserver_opts_default(&o);
	o.bind_address = cl->o.bind_address;
	o.secure_port = cl->o.port;
	o.tls_cert_file = crt;
	o.tls_private_key_file = key;
	o.client_ca_file = ca;
	o.data_dir = data;
	o.bootstrap_token_file = token;
	o.service_account_signing_key_file = sa_key;
	o.service_account_key_file = sa_pub;
	o.kubelet_client_certificate = kcrt;
	o.kubelet_client_key = kkey;
	/* The hollow nodes' Hostname resolves nowhere: their InternalIP first
	 * (metrics-server's usual setting). */
	o.kubelet_preferred_address_types =
	    "InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP";
	o.serving_threads = -1;
	if (cl->o.toleration_set[0])
		o.not_ready_toleration_s = cl->o.toleration_s[0];
	if (cl->o.toleration_set[1])
		o.unreachable_toleration_s = cl->o.toleration_s[1];
	c->state = apiserver_new(c->loop, &o);
	if (c->state)
		cl->port = apiserver_port(c->state);
	free(crt);
	free(key);
	free(ca);
	free(data);
	free(token);
	free(sa_key);
	free(sa_pub);
	free(kcrt);
	free(kkey);
	return c->state ? 0 : ERR_UNAVAILABLE;
}

static void api_stop(struct component *c)
{
	apiserver_free(c->state);
}

static int cm_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct controller_manager_opts o;
	char *kc = path_in(cl, "controller-manager.conf"), *crt = path_in(cl, "pki/ca.crt");
	char *key = path_in(cl, "pki/ca.key");

	controller_manager_opts_default(&o);
	o.serving.port = 0; /* in one process: no component ports */
	o.kubeconfig = kc;
	o.server = cl->server;
	o.cluster_signing_cert_file = crt;
	o.cluster_signing_key_file = key;
	if (cl->o.cert_ttl_ns > 0)
		o.cluster_signing_duration_ns = cl->o.cert_ttl_ns;
	o.approve_kubelet_serving = cl->o.approve_kubelet_serving;
	o.use_service_account_credentials = true; /* as kubeadm's manifest */
	if (cl->controllers)
		o.controllers = cl->controllers;
	if (cl->o.node_monitor_period_ns > 0)
		o.nlc.node_monitor_period_ns = cl->o.node_monitor_period_ns;
	if (cl->o.node_monitor_grace_period_ns > 0)
		o.nlc.node_monitor_grace_period_ns = cl->o.node_monitor_grace_period_ns;
	c->state = controller_manager_new(c->loop, &o);
	free(kc);
	free(crt);
	free(key);
	return c->state ? 0 : ERR_UNAVAILABLE;
}

static void cm_stop(struct component *c)
{
	controller_manager_free(c->state);
}

static int sched_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct scheduler_opts o;
	char *kc = path_in(cl, "scheduler.conf");

	scheduler_opts_default(&o);
	o.serving.port = 0;
	o.kubeconfig = kc;
	o.server = cl->server;
	if (cl->o.pod_initial_backoff_ns > 0)
		o.pod_initial_backoff_ns = cl->o.pod_initial_backoff_ns;
	if (cl->o.pod_max_backoff_ns > 0)
		o.pod_max_backoff_ns = cl->o.pod_max_backoff_ns;
	if (o.pod_max_backoff_ns < o.pod_initial_backoff_ns)
		o.pod_max_backoff_ns = o.pod_initial_backoff_ns;
	c->state = scheduler_new(c->loop, &o);
	free(kc);
	return c->state ? 0 : ERR_UNAVAILABLE;
}

static void sched_stop(struct component *c)
{
	scheduler_free(c->state);
}

static int kubelets_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct kubelet_config t;
	char *root = path_in(cl, "nodes"), *boot = path_in(cl, "bootstrap-kubelet.conf");
	char *ca = path_in(cl, "pki/ca.crt");
	int rc;

	kubelet_config_init(&t);
	kubelet_config_set(&t.root_dir, root);
	kubelet_config_set(&t.bootstrap_kubeconfig, boot);
	t.rotate_certificates = true;
	t.server_tls_bootstrap = cl->o.server_tls_bootstrap;
	t.self_heal = cl->o.self_heal;
	t.certificate_condition = cl->o.certificate_condition;
	/* Each node serves its HTTPS API on a port of its own on loopback,
	 * reported in status.daemonEndpoints: the API server's nodes/proxy
	 * and pods/log reach it there. */
	t.port = -1;
	kubelet_config_set(&t.address, "127.0.0.1");
	kubelet_config_set(&t.client_ca_file, ca);
	if (cl->o.status_update_ns > 0) {
		t.node_status_update_frequency_ns = cl->o.status_update_ns;
		t.update_frequency_set = true;
	}
	if (cl->o.lease_duration_s > 0)
		t.node_lease_duration_s = (int)cl->o.lease_duration_s;
	if (cl->o.pod_start_delay_ns > 0)
		t.pod_start_delay_ns = cl->o.pod_start_delay_ns;
	if (cl->o.exit_after_ns > 0)
		t.exit_after_ns = cl->o.exit_after_ns;
	c->state = kubelet_pool_new(c->loop, &t, cl->o.nodes, cl->o.node_prefix, 0);
	rc = c->state ? kubelet_pool_start(c->state) : ERR_INVALID;
	kubelet_config_free(&t);
	free(root);
	free(boot);
	free(ca);
	return rc;
}

static void kubelets_stop(struct component *c)
{
	kubelet_pool_free(c->state);
}

/* Point a kubeconfig at the server actually bound (port 0, or a resumed
 * cluster on another port). Missing files are fine. */
static void repoint(const char *path, const char *server)
{
	struct kubeconfig kc;
	if (!file_exists(path) || kubeconfig_load(path, &kc) < 0)
		return;
	if (!kc.server || strcmp(kc.server, server)) {
		free(kc.server);
		kc.server = strdup(server);
		/* Keep file references as files: the kubelet's points at its store. */
		if (kc.cert_file) {
			free(kc.cert_data);
			kc.cert_data = NULL;
		}
		if (kc.key_file) {
			free(kc.key_data);
			kc.key_data = NULL;
		}
		if (kc.ca_file) {
			free(kc.ca_data);
			kc.ca_data = NULL;
		}
		if (kubeconfig_save(path, &kc) < 0)
			LOG_ERROR("rewrite %s: %s", path, err_msg());
	}
	kubeconfig_free(&kc);
}

static void repoint_all(struct cluster *cl)
{
	static const char *const confs[] = {"admin.conf", "controller-manager.conf",
					    "scheduler.conf", "bootstrap-kubelet.conf"};
	char *nodes = path_in(cl, "nodes");
	DIR *d;
	struct dirent *e;

	for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
		char *p = path_in(cl, confs[i]);
		repoint(p, cl->server);
		free(p);
	}
	if ((d = opendir(nodes))) {
		while ((e = readdir(d))) {
			char rel[512], *p;
			if (e->d_name[0] == '.')
				continue;
			snprintf(rel, sizeof(rel), "nodes/%s/kubelet.conf", e->d_name);
			p = path_in(cl, rel);
			repoint(p, cl->server);
			free(p);
		}
		closedir(d);
	}
	free(nodes);
}

/* ---- kubelet processes ("shards") ------------------------------------------------- */

static void push_path(struct cluster *cl, struct strv *a, const char *flag, const char *rel)
{
	char *p = path_in(cl, rel);
	strv_pushf(a, "%s=%s", flag, p);
	free(p);
}

static void push_duration(struct strv *a, const char *flag, int64_t ns)
{
	char d[DURATION_BUF];
	strv_pushf(a, "%s=%s", flag, duration_format(ns, d));
}

/* kubelets_start's settings as `cube kubelet` flags. */
static void shard_argv(struct cluster *cl, const struct shard *sh, struct strv *a)
{
	const struct cluster_opts *o = &cl->o;

	strv_push(a, cl->self);
	/* cube --clock-offset lives in this process's clock: the same there. */
	if (clock_offset())
		push_duration(a, "--clock-offset", clock_offset());
	strv_push(a, "kubelet");
	strv_pushf(a, "--hollow-nodes=%d", sh->n);
	strv_pushf(a, "--hollow-first-index=%d", sh->first);
	strv_pushf(a, "--hollow-name-prefix=%s", o->node_prefix);
	push_path(cl, a, "--root-dir", "nodes");
	push_path(cl, a, "--bootstrap-kubeconfig", "bootstrap-kubelet.conf");
	push_path(cl, a, "--client-ca-file", "pki/ca.crt");
	strv_push(a, "--rotate-certificates");
	strv_push(a, "--address=127.0.0.1");
	strv_push(a, "--port=-1");
	strv_pushf(a, "--control-socket=%s", sh->sock);
	if (o->server_tls_bootstrap)
		strv_push(a, "--rotate-server-certificates");
	if (o->self_heal)
		strv_push(a, "--self-heal");
	if (o->certificate_condition)
		strv_push(a, "--certificate-condition");
	if (o->status_update_ns > 0)
		push_duration(a, "--node-status-update-frequency", o->status_update_ns);
	if (o->lease_duration_s > 0)
		strv_pushf(a, "--node-lease-duration-seconds=%lld", (long long)o->lease_duration_s);
	if (o->pod_start_delay_ns > 0)
		push_duration(a, "--pod-start-delay", o->pod_start_delay_ns);
	if (o->exit_after_ns > 0)
		push_duration(a, "--exit-after", o->exit_after_ns);
	if (log_verbosity > 0)
		strv_pushf(a, "--v=%d", log_verbosity);
}

/* Between fork and exec only async-signal-safe calls: the other threads'
 * locks may be held forever in this copy. */
static _Noreturn void shard_exec(char **argv, int log, pid_t parent, int maxfd)
{
	static const char msg[] = "cube up: exec of the kubelet process failed\n";

	dup2(log, 1);
	dup2(log, 2);
	/* The terminal's Ctrl-C is the supervisor's to pass on. */
	setpgid(0, 0);
	/* A supervisor killed outright takes its kubelets with it. The signal
	 * comes when the forking thread ends, so every fork is the main
	 * thread's (cluster_start, the loop's restarts); a supervisor that
	 * died before this line would never send it: then go now. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(1);
	/* The API server's thousands of sockets are not the child's to hold
	 * (they would count against its own limit). */
	if (close_range(3, ~0U, 0) < 0) /* before Linux 5.9: one by one */
		for (int fd = 3; fd < maxfd; fd++)
			close(fd);
	execv(argv[0], argv);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(127);
	_exit(127);
}

static int shard_spawn(struct shard *sh)
{
	struct strv a = STRV_INIT;
	int fd = open(sh->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	pid_t parent = getpid(), pid;
	struct rlimit lim;
	int maxfd = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < (1u << 20)
			    ? (int)lim.rlim_cur
			    : 1 << 20;

	if (fd < 0)
		return err_set(ERR_IO, "%s: %s", sh->log, strerror(errno));
	shard_argv(sh->cl, sh, &a);
	pid = fork();
	if (pid == 0)
		shard_exec(a.v, fd, parent, maxfd);
	close(fd);
	strv_free(&a);
	if (pid < 0)
		return err_set(ERR_IO, "fork: %s", strerror(errno));
	sh->pid = pid;
	LOG_INFO("\"Started kubelet process\" process=\"kubelets-%d\" pid=%d nodes=\"%s%d..%s%d\"",
		 sh->index, (int)pid, sh->cl->o.node_prefix, sh->first, sh->cl->o.node_prefix,
		 sh->first + sh->n - 1);
	return 0;
}

/* Go's exec.ExitError words: "exit status 1", "signal: killed". */
static const char *exit_text(int status, char *buf, size_t n)
{
	if (WIFEXITED(status)) {
		snprintf(buf, n, "exit status %d", WEXITSTATUS(status));
		return buf;
	}
	snprintf(buf, n, "signal: %s", strsignal(WTERMSIG(status)));
	buf[8] = (char)tolower((unsigned char)buf[8]);
	return buf;
}

/* Start sh's process; when that fails, again in 10 s (also the restart
 * timer's work after it died, which then puts its faults back). */
static void shard_launch(void *arg)
{
	struct shard *sh = arg;

	if (shard_spawn(sh) < 0) {
		LOG_ERROR("\"Failed to start kubelet process; retrying\" process=\"kubelets-%d\" "
		          "err=\"%s\" in=\"10s\"",
		          sh->index, err_msg());
		timer_after(sh->restart, SHARD_RESTART_NS);
		return;
	}
	if (sh->died) {
		sh->refault_deadline = clock_mono() + SHARD_START_S * NS_PER_SEC;
		timer_after(sh->refault, 0);
	}
}

static struct shard *shard_of(struct cluster *cl, const char *node);

/* The control words that put a recorded fault (faults.json, `cube fault`)
 * back on its node, or NULL for faults that outlive a process: certificate
 * files, config, RBAC objects, the controller manager's flags. */
static json_t *fault_words(const json_t *e, const char *node)
{
	const char *kind = jx_str(e, "fault") ?: "", *ns = jx_str(e, "ns");

	if (!strcmp(kind, "partition"))
		return json_pack("[s, s]", "partition", node);
	if (!strcmp(kind, "stop-kubelet"))
		return json_pack("[s, s, s]", "kubelet", "stop", node);
	if (!strcmp(kind, "clock-skew") && ns)
		return json_pack("[s, s, s]", "clock-skew", node, ns);
	return NULL;
}

/*
 * A restarted kubelet process starts with none of the faults `cube fault`
 * put on its nodes that live in the process (a partition, a stopped
 * kubelet, a skewed clock), while faults.json still lists them as in
 * effect. Once it answers on its socket, they are put back as they were,
 * so the record and the cluster agree, as a partition outlives a reboot.
 */
static void shard_refault(void *arg)
{
	struct shard *sh = arg;
	json_t *words = json_pack("[s]", "ping"), *r, *doc, *e;
	char *path;
	size_t i;

	r = sh->pid ? control_call(sh->sock, words, 1) : NULL;
	json_decref(words);
	if (!r || json_object_get(r, "error")) {
		json_decref(r);
		if (sh->pid && clock_mono() < sh->refault_deadline)
			timer_after(sh->refault, SHARD_GATE_NS);
		return;
	}
	json_decref(r);
	sh->died = false;
	path = path_in(sh->cl, "faults.json");
	doc = file_exists(path) == 1 ? jx_load_file(path) : NULL;
	json_array_foreach(json_object_get(doc, "faults"), i, e)
	{
		const char *node = jx_str(e, "target");
		if (!node || shard_of(sh->cl, node) != sh || !(words = fault_words(e, node)))
			continue;
		r = control_call(sh->sock, words, 30);
		if (r && !json_object_get(r, "error"))
			LOG_INFO("\"Put a fault back on a restarted kubelet process\" "
			         "process=\"kubelets-%d\" fault=\"%s\" node=\"%s\"",
			         sh->index, jx_str(e, "fault"), node);
		else
			LOG_ERROR("\"Could not put a fault back on a restarted kubelet process\" "
			          "process=\"kubelets-%d\" fault=\"%s\" node=\"%s\" err=\"%s\"",
			          sh->index, jx_str(e, "fault"), node,
			          r ? jx_str(r, "error") ?: "" : err_msg());
		json_decref(r);
		json_decref(words);
	}
	json_decref(doc);
	free(path);
}

/* Reap whichever kubelet processes ended; restart them unless stopping. */
static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
	struct cluster *cl = arg;
	char how[64];
	int status;

	(void)sig, (void)what;
	for (int i = 0; i < cl->nshards; i++) {
		struct shard *sh = &cl->shards[i];
		if (!sh->pid || waitpid(sh->pid, &status, WNOHANG) != sh->pid)
			continue;
		if (!cl->stopping) {
			LOG_ERROR("\"Kubelet process exited; restarting it\" "
				  "process=\"kubelets-%d\" pid=%d status=\"%s\" log=\"%s\" "
			          "in=\"10s\"",
			          sh->index, (int)sh->pid, exit_text(status, how, sizeof(how)),
			          sh->log);
			timer_after(sh->restart, SHARD_RESTART_NS);
			sh->died = true;
		}
		sh->pid = 0;
	}
}

static void sleep_ms(int ms)
{
	nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

/* Until a kubelet process answers on its socket (its pool started): 0,
 * or an error saying it exited or never answered. */
static int shard_wait(struct shard *sh)
{
	json_t *ping = json_pack("[s]", "ping"), *r;
	int64_t deadline = clock_mono() + SHARD_START_S * NS_PER_SEC;
	int rc = 0, status;
	char how[64];

	while (!(r = control_call(sh->sock, ping, 1)) || json_object_get(r, "error")) {
		json_decref(r);
		r = NULL;
		if (waitpid(sh->pid, &status, WNOHANG) == sh->pid) {
			sh->pid = 0;
			rc = err_set(ERR_UNAVAILABLE, "kubelet process %d (%s) failed: %s",
				     sh->index, sh->log, exit_text(status, how, sizeof(how)));
			break;
		}
		if (clock_mono() > deadline) {
			rc = err_set(ERR_TIMEOUT,
			             "kubelet process %d did not answer on %s "
			             "within %ds (%s)",
			             sh->index, sh->sock, SHARD_START_S, sh->log);
			break;
		}
		sleep_ms(50);
	}
	json_decref(r);
	json_decref(ping);
	return rc;
}

/* Have all of sh's nodes a client certificate (the kubelet's
 * <cert-dir>/kubelet-client-current.pem)? Then their bootstrap is over. */
static bool shard_certified(struct shard *sh)
{
	while (sh->certified < sh->n) {
		char rel[320], *p;
		int have;
		snprintf(rel, sizeof(rel), "nodes/%s%d/pki/kubelet-client-current.pem",
			 sh->cl->o.node_prefix, sh->first + sh->certified);
		p = path_in(sh->cl, rel);
		have = file_exists(p) == 1;
		free(p);
		if (!have)
			return false;
		sh->certified++;
	}
	return true;
}

/*
 * The kubelet processes start one after another, each once the one before
 * has its nodes' certificates: a node holds two connections while it
 * bootstraps (the token's and its own) and one after, and the API server
 * here holds the other ends, so one bootstrap storm at a time is what its
 * descriptors are budgeted for (cluster_shards_fds) — and a storm of
 * 2,500 nodes is served faster than one of 10,000. A resumed cluster's
 * nodes have theirs: then all start at once.
 */
static void shards_next(void *arg)
{
	struct cluster *cl = arg;
	struct shard *last = &cl->shards[cl->started - 1];
	bool done = shard_certified(last);

	if (!done && clock_mono() < cl->next_deadline) {
		timer_after(cl->next, SHARD_GATE_NS);
		return;
	}
	if (!done)
		LOG_WARN("\"Kubelet process's nodes are still without certificates; starting the "
		         "next\" process=\"kubelets-%d\" certified=%d nodes=%d",
		         last->index, last->certified, last->n);
	shard_launch(&cl->shards[cl->started++]);
	cl->next_deadline = clock_mono() + SHARD_BOOTSTRAP_NS;
	if (cl->started < cl->nshards)
		timer_after(cl->next, 0);
}

static int shards_start(struct cluster *cl)
{
	const struct cluster_opts *o = &cl->o;
	int per = o->nodes / o->kubelet_processes, extra = o->nodes % o->kubelet_processes;
	char *logs = path_in(cl, "logs");
	ssize_t len = readlink("/proc/self/exe", cl->self, sizeof(cl->self) - 1);
	int rc = file_mkdirs(logs, 0700), first = 0;

	free(logs);
	CUBE_ASSERT(o->loop && o->kubelet_processes <= o->nodes);
	if (len <= 0)
		return err_set(ERR_IO, "/proc/self/exe: %s", strerror(errno));
	cl->self[len] = '\0';
	if (rc < 0)
		return rc;
	cl->nshards = o->kubelet_processes;
	if (!(cl->shards = calloc((size_t)cl->nshards, sizeof(*cl->shards))))
		abort();
	/* Before the first fork: a child that dies at once is reaped too. */
	cl->sigchld = evsignal_new(loop_base(o->loop), SIGCHLD, on_sigchld, cl);
	evsignal_add(cl->sigchld, NULL);
	for (int i = 0; i < cl->nshards; i++) {
		struct shard *sh = &cl->shards[i];
		char rel[64];
		*sh = (struct shard){
		    .cl = cl, .index = i, .first = first, .n = per + (i < extra ? 1 : 0)};
		first += sh->n;
		snprintf(rel, sizeof(rel), "kubelets-%d.sock", i);
		sh->sock = path_in(cl, rel);
		snprintf(rel, sizeof(rel), "logs/kubelets-%d.log", i);
		sh->log = path_in(cl, rel);
		sh->restart = loop_timer(o->loop, shard_launch, sh);
		sh->refault = loop_timer(o->loop, shard_refault, sh);
	}
	cl->next = loop_timer(o->loop, shards_next, cl);
	/* The first waited for: what it refuses (its limit, a flag) fails
	 * cube up at once; the rest follow on the loop. */
	cl->started = 1;
	if ((rc = shard_spawn(&cl->shards[0])) == 0 && (rc = shard_wait(&cl->shards[0])) == 0) {
		cl->next_deadline = clock_mono() + SHARD_BOOTSTRAP_NS;
		if (cl->nshards > 1)
			timer_after(cl->next, 0);
	}
	return rc;
}

static void shards_stop(struct cluster *cl)
{
	int left = 0;

	cl->stopping = true;
	timer_free(cl->next);
	cl->next = NULL;
	for (int i = 0; i < cl->nshards; i++) {
		timer_free(cl->shards[i].restart);
		timer_free(cl->shards[i].refault);
		cl->shards[i].restart = NULL;
		if (cl->shards[i].pid && kill(cl->shards[i].pid, SIGTERM) == 0)
			left++;
	}
	/* Together: each frees its pool at the same time as the others. */
	for (int t = 0; left > 0 && t < SHARD_STOP_MS; t += 20) {
		sleep_ms(20);
		for (int i = 0; i < cl->nshards; i++) {
			pid_t pid = cl->shards[i].pid, r = pid ? waitpid(pid, NULL, WNOHANG) : 0;
			if (pid && (r == pid || (r < 0 && errno == ECHILD))) {
				cl->shards[i].pid = 0;
				left--;
			}
		}
	}
	for (int i = 0; i < cl->nshards; i++) {
		struct shard *sh = &cl->shards[i];
		if (sh->pid) {
			LOG_ERROR("\"Kubelet process did not exit; killing it\" "
			          "process=\"kubelets-%d\" pid=%d after=\"%ds\"",
			          i, (int)sh->pid, SHARD_STOP_MS / 1000);
			kill(sh->pid, SIGKILL);
			waitpid(sh->pid, NULL, 0);
		}
		free(sh->sock);
		free(sh->log);
	}
	if (cl->sigchld)
		event_free(cl->sigchld);
	free(cl->shards);
	cl->shards = NULL;
	cl->nshards = 0;
}

/* The kubelet process that runs node (<prefix><index> in its range). */
static struct shard *shard_of(struct cluster *cl, const char *node)
{
	size_t plen = strlen(cl->o.node_prefix);
	char *end, canon[32];
	long i;

	if (strncmp(node, cl->o.node_prefix, plen) || !isdigit((unsigned char)node[plen]))
		return NULL;
	i = strtol(node + plen, &end, 10);
	/* "node-07" is no node's name. */
	snprintf(canon, sizeof(canon), "%ld", i);
	if (*end || strcmp(canon, node + plen))
		return NULL;
	for (int s = 0; s < cl->nshards; s++)
		if (i >= cl->shards[s].first && i < cl->shards[s].first + cl->shards[s].n)
			return &cl->shards[s];
	return NULL;
}

static void say(void *arg, const char *line)
{
	LOG_V(1, "%s", line);
}

struct cluster *cluster_start(const struct cluster_opts *o)
{
	struct cluster *cl = calloc(1, sizeof(*cl));
	struct cluster_pki_opts po = {
		.dir = o->dir,
		.cluster_name = "kubernetes",
		.server = "https://127.0.0.1:6443",
		.key_type = PKI_KEY_ECDSA,
		.ca_validity_ns = CLUSTER_CA_VALIDITY,
		.validity_ns = CLUSTER_CERT_VALIDITY,
		.say = say,
	};

	if (!cl)
		abort();
	cl->o = *o;
	cl->controllers = o->controllers ? strdup(o->controllers) : NULL;
	/* comm: 15 bytes at most, as the kernel keeps a process's name. */
	cl->api = (struct component){
	    .name = "apiserver", .comm = "kube-apiserver", .start = api_start, .stop = api_stop};
	cl->cm = (struct component){.name = "controller-manager",
	                            .comm = "kube-controller",
	                            .start = cm_start,
	                            .stop = cm_stop};
	cl->sched = (struct component){
	    .name = "scheduler", .comm = "kube-scheduler", .start = sched_start, .stop = sched_stop};
	cl->kubelets = (struct component){
	    .name = "kubelet", .comm = "kubelet", .start = kubelets_start, .stop = kubelets_stop};
	/* The kubeconfigs name the server; keep the one they name if we do not
	 * know the port yet, so a rerun does not regenerate them for nothing. */
	char want[64], *admin = path_in(cl, "admin.conf");
	struct kubeconfig have;
	if (o->port > 0) {
		snprintf(want, sizeof(want), "https://127.0.0.1:%d", o->port);
	} else if (file_exists(admin) && kubeconfig_load(admin, &have) == 0) {
		snprintf(want, sizeof(want), "%s", have.server ? have.server : po.server);
		kubeconfig_free(&have);
	} else {
		snprintf(want, sizeof(want), "%s", po.server);
	}
	free(admin);
	po.server = want;
	if (file_mkdirs(o->dir, 0700) < 0 || cluster_pki_init(&po) < 0)
		goto fail;
	if (component_run(&cl->api, cl) < 0)
		goto fail;
	snprintf(cl->server, sizeof(cl->server), "https://127.0.0.1:%d", cl->port);
	repoint_all(cl);
	if (component_run(&cl->cm, cl) < 0 || component_run(&cl->sched, cl) < 0)
		goto fail;
	if (o->nodes > 0 && o->kubelet_processes > 0 && shards_start(cl) < 0)
		goto fail;
	if (o->nodes > 0 && o->kubelet_processes == 0 && component_run(&cl->kubelets, cl) < 0)
		goto fail;
	return cl;
fail:
	cluster_stop(cl);
	return NULL;
}

int cluster_kubelet_processes(int nodes, int asked, long room)
{
	long per = room / cluster_fds_per_process_node(), n;

	if (asked >= 1)
		return asked < nodes ? asked : nodes;
	/* What runs (or is refused) in one process today still does. */
	if (nodes <= CLUSTER_INPROCESS_NODES || nodes * cluster_fds_per_node() <= room)
		return 0;
	n = (nodes + CLUSTER_NODES_PER_PROCESS - 1) / CLUSTER_NODES_PER_PROCESS;
	/* A limit too low for processes that large: as many as fit it (the
	 * check before the start says when none can). */
	if (per > 0 && nodes > n * per)
		n = (nodes + per - 1) / per;
	return (int)(n < nodes ? n : nodes);
}

long proc_rss_kib(pid_t pid)
{
	char path[64], *text, *at;
	size_t len;
	long kib = -1;

	snprintf(path, sizeof(path), pid ? "/proc/%d/status" : "/proc/self/status", (int)pid);
	if (file_read(path, &text, &len, 64 << 10) < 0)
		return -1;
	if ((at = strstr(text, "\nVmRSS:")))
		kib = strtol(at + 7, NULL, 10);
	free(text);
	return kib;
}

void cluster_rss_add(struct cluster_rss *r, pid_t pid)
{
	long kib = pid ? proc_rss_kib(pid) : -1;
	if (kib > 0) {
		r->children_kib += kib;
		r->children++;
	}
}

void cluster_rss(const struct cluster *cl, struct cluster_rss *r)
{
	for (int i = 0; i < cl->nshards; i++)
		cluster_rss_add(r, cl->shards[i].pid);
}

long cluster_fds_per_node(void)
{
	/* kubelets_start: every node serves (port -1); the API server is here. */
	return kubelet_pool_fds_per_node(true, true);
}

long cluster_shards_fds(int nodes, int processes)
{
	/* The server's ends of the kubelets' connections: KUBELET_HOLLOW_CONNS
	 * while a node bootstraps, one after; shards_next lets the nodes of
	 * two processes at most bootstrap at once (one starting, the last one's
	 * second connections closing). */
	long boot = kubelet_pool_fds_per_node(false, false) - 1;
	int storms = processes < 2 ? processes : 2;

	return nodes + (long)storms * cluster_process_nodes(nodes, processes) * boot;
}

long cluster_fds_per_process_node(void)
{
	/* shard_argv: --port=-1, the API server in the supervisor. */
	return kubelet_pool_fds_per_node(true, false);
}

int cluster_process_nodes(int nodes, int processes)
{
	return processes > 0 ? (nodes + processes - 1) / processes : nodes;
}

int cluster_port(const struct cluster *c)
{
	return c->port;
}

void cluster_stop(struct cluster *c)
{
	if (!c)
		return;
	shards_stop(c);
	component_halt(&c->kubelets);
	component_halt(&c->sched);
	component_halt(&c->cm);
	component_halt(&c->api);
	free(c->controllers);
	free(c);
}

/* ---- the supervisor: what cube fault and cube restart ask for ---------------- */

/* Stop a component and start it again with what cl says now. */
static int component_restart(struct component *c)
{
	struct cluster *cl = c->cl;

	component_halt(c);
	c->ready = false;
	c->rc = 0;
	c->state = NULL;
	return component_run(c, cl);
}

/* A call run on a component's own thread, the caller waiting for it. */
struct on_thread {
	struct component *c;
	json_t *(*fn)(struct component *c, const json_t *words);
	const json_t *words;
	json_t *reply;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void on_thread_run(void *arg)
{
	struct on_thread *t = arg;
	json_t *r = t->fn(t->c, t->words);

	pthread_mutex_lock(&t->mu);
	t->reply = r;
	t->done = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static json_t *run_on_thread(struct component *c,
			     json_t *(*fn)(struct component *c, const json_t *words),
			     const json_t *words)
{
	struct on_thread t = {.c = c, .fn = fn, .words = words};

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	loop_defer(c->loop, on_thread_run, &t);
	pthread_mutex_lock(&t.mu);
	while (!t.done)
		pthread_cond_wait(&t.cv, &t.mu);
	pthread_mutex_unlock(&t.mu);
	pthread_mutex_destroy(&t.mu);
	pthread_cond_destroy(&t.cv);
	return t.reply;
}

/* On the kubelets' thread: kubelet_pool_command's words. */
static json_t *kubelet_command(struct component *c, const json_t *words)
{
	return kubelet_pool_command(c->state, words);
}

/* A shard that is down: its nodes as kubelet_pool_status says of stopped ones. */
static void shard_down_nodes(const struct shard *sh, json_t *out)
{
	char now[TIME_BUF], name[256];

	time_format_rfc3339_micro(clock_now(), now);
	for (int i = 0; i < sh->n; i++) {
		snprintf(name, sizeof(name), "%s%d", sh->cl->o.node_prefix, sh->first + i);
		json_array_append_new(out, json_pack("{s:s, s:b, s:b, s:i, s:s}", "name", name,
						     "active", false, "partitioned", false,
						     "clockSkewSeconds", 0, "time", now));
	}
}

/* ["nodes"] of every kubelet process, in node order. */
static json_t *shard_nodes(struct cluster *cl)
{
	json_t *words = json_pack("[s]", "nodes"), *out = json_array();

	for (int i = 0; i < cl->nshards; i++) {
		struct shard *sh = &cl->shards[i];
		json_t *r = sh->pid ? control_call(sh->sock, words, 10) : NULL;
		json_t *nodes = json_object_get(r, "nodes");

		if (json_is_array(nodes))
			json_array_extend(out, nodes);
		else if (!sh->pid)
			shard_down_nodes(sh, out);
		else
			/* Left out rather than reported stopped: they may well run. */
			LOG_WARN("\"Kubelet process did not list its nodes\" "
			         "process=\"kubelets-%d\" err=\"%s\"",
			         i,
			         r ? json_string_value(json_object_get(r, "error"))
			                 ?: "unexpected reply"
				   : err_msg());
		json_decref(r);
	}
	json_decref(words);
	return out;
}

/* A kubelet word to the process that runs its node. */
static json_t *shard_command(struct cluster *cl, const json_t *words)
{
	const char *node = kubelet_pool_command_node(words);
	/* Words naming no node: any pool answers what is wrong with them. */
	struct shard *sh = node ? shard_of(cl, node) : &cl->shards[0];
	json_t *r;

	if (!sh)
		return jx_error("no kubelet for node \"%s\" here", node);
	if (sh->index >= cl->started)
		return jx_error("the kubelet process of node \"%s\" (kubelets-%d) has not started "
			    "yet: it starts once kubelets-%d's nodes have their certificates",
			    node ?: "", sh->index, sh->index - 1);
	if (!sh->pid)
		return jx_error(
		    "the kubelet process of node \"%s\" (kubelets-%d) is down; it restarts "
		    "within 10s",
		    node ?: "", sh->index);
	if (!(r = control_call(sh->sock, words, 30)))
		return jx_error("kubelets-%d: %s", sh->index, err_msg());
	return r;
}

static json_t *status(struct cluster *cl)
{
	json_t *r = json_pack("{s:i, s:s}", "port", cl->port, "controllers",
			      cl->controllers ? cl->controllers : "*");
	if (cl->kubelets.th) {
		json_t *words = json_pack("[s]", "nodes"),
		       *nodes = run_on_thread(&cl->kubelets, kubelet_command, words);
		json_object_set(r, "nodes", json_object_get(nodes, "nodes"));
		json_decref(nodes);
		json_decref(words);
	} else if (cl->nshards) {
		json_object_set_new(r, "nodes", shard_nodes(cl));
	}
	return r;
}

/* ["controller-manager", "restart", CONTROLLERS?]: CONTROLLERS replaces
 * --controllers (what editing its manifest does); "" is the default. */
static json_t *restart_cm(struct cluster *cl, const char *controllers)
{
	if (controllers) {
		if (*controllers && controller_manager_check_controllers(controllers) < 0)
			return jx_error("%s", err_msg());
		free(cl->controllers);
		cl->controllers = *controllers ? strdup(controllers) : NULL;
	}
	LOG_INFO("\"Restarting the controller manager\" controllers=\"%s\"",
		 cl->controllers ? cl->controllers : "*");
	if (component_restart(&cl->cm) < 0)
		return jx_error("%s", err_msg());
	return json_pack("{s:b, s:s}", "ok", true, "controllers",
			 cl->controllers ? cl->controllers : "*");
}

json_t *cluster_control(struct cluster *cl, const json_t *words)
{
	const char *verb = jx_array_str(words, 0);

	if (!strcmp(verb, "ping"))
		return json_pack("{s:b}", "ok", true);
	if (!strcmp(verb, "status"))
		return status(cl);
	if (!strcmp(verb, "controller-manager") && !strcmp(jx_array_str(words, 1) ?: "", "restart"))
		return restart_cm(cl, jx_array_str(words, 2));
	if (!strcmp(verb, "scheduler") && !strcmp(jx_array_str(words, 1) ?: "", "restart"))
		return component_restart(&cl->sched) < 0 ? jx_error("%s", err_msg())
							 : json_pack("{s:b}", "ok", true);
	if (!strcmp(verb, "kubelet") || !strcmp(verb, "partition") || !strcmp(verb, "heal") ||
	    !strcmp(verb, "clock-skew")) {
		if (cl->nshards)
			return shard_command(cl, words);
		if (!cl->kubelets.th)
			return jx_error("this cluster runs no kubelets");
		return run_on_thread(&cl->kubelets, kubelet_command, words);
	}
	return jx_error("unknown command \"%s\"", verb);
}
