#include "cube/ha.h"

#include "cube/cluster.h"

#include "kubelet/kubelet.h"
#include "pki/cluster.h"
#include "pki/pki.h"

#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum kind { ETCD, APISERVER, HAPROXY, CM, SCHEDULER, KUBELETS };

struct child {
	char name[40];
	enum kind kind;
	int index;
	int port, peer; /* serving port (etcd: client), etcd's peer port */
	pid_t pid;      /* 0: not running */
};

struct ha {
	struct loop *loop;
	struct ha_opts o;
	char self[PATH_MAX]; /* this binary, for the cube processes */
	struct child *kids;
	size_t n;
	struct event *sigchld;
	bool stopping;
};

static char *path(const struct ha *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *path(const struct ha *h, const char *fmt, ...)
{
	char rel[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	return file_join(h->o.dir, rel);
}

/* ---- ports: chosen once, kept in DIR/ha.json -------------------------------------- */

/* Sockets bound while ports are chosen, so that no port is handed out twice. */
static int held[64];
static int nheld;

static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0 && nheld < 64)
		held[nheld++] = fd;
	else if (fd >= 0)
		close(fd);
	return port;
}

static void release_ports(void)
{
	while (nheld > 0)
		close(held[--nheld]);
}

/* The ports of ha.json, or new ones for what it does not name; saved. */
static int assign_ports(struct ha *h)
{
	char *file = path(h, "ha.json");
	json_t *doc = file_exists(file) ? jx_load_file(file) : NULL, *ports;
	char *text;
	int rc;

	if (!doc)
		doc = json_object();
	if (!json_is_object(ports = json_object_get(doc, "ports"))) {
		ports = json_object();
		json_object_set_new(doc, "ports", ports);
	}
	/* --port 0: a free port for the balancer, kept like the others. */
	if (h->o.port <= 0) {
		if (!json_is_integer(json_object_get(ports, "balancer")))
			json_object_set_new(ports, "balancer", json_integer(free_port()));
		h->o.port = (int)json_integer_value(json_object_get(ports, "balancer"));
	}
	for (size_t i = 0; i < h->n; i++) {
		struct child *k = &h->kids[i];
		char key[64];
		if (k->kind != ETCD && k->kind != APISERVER)
			continue;
		snprintf(key, sizeof(key), "%s", k->name);
		if (!json_is_integer(json_object_get(ports, key)))
			json_object_set_new(ports, key, json_integer(free_port()));
		k->port = (int)json_integer_value(json_object_get(ports, key));
		if (k->kind == ETCD) {
			snprintf(key, sizeof(key), "%s-peer", k->name);
			if (!json_is_integer(json_object_get(ports, key)))
				json_object_set_new(ports, key, json_integer(free_port()));
			k->peer = (int)json_integer_value(json_object_get(ports, key));
		}
	}
	release_ports();
	text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	rc = file_write_atomic(file, text, strlen(text), 0600);
	free(text);
	json_decref(doc);
	free(file);
	return rc;
}

/* ---- the children's command lines ---------------------------------------------------- */

static char *etcd_servers(const struct ha *h)
{
	struct strv urls = STRV_INIT;
	char *out;

	for (size_t i = 0; i < h->n; i++)
		if (h->kids[i].kind == ETCD)
			strv_pushf(&urls, "https://127.0.0.1:%d", h->kids[i].port);
	out = strv_join(&urls, ",");
	strv_free(&urls);
	return out;
}

static void argv_etcd(struct ha *h, const struct child *k, struct strv *a)
{
	struct strv cluster = STRV_INIT;
	char *data = path(h, "etcd/%s/data", k->name), *joined;
	char *crt = path(h, "etcd/%s/server.crt", k->name),
	     *key = path(h, "etcd/%s/server.key", k->name);
	char *ca = path(h, "pki/etcd/ca.crt"), *pcrt = path(h, "pki/etcd/peer.crt");
	char *pkey = path(h, "pki/etcd/peer.key");
	bool resumed = file_exists(data) == 1;

	for (size_t i = 0; i < h->n; i++)
		if (h->kids[i].kind == ETCD)
			strv_pushf(&cluster, "%s=https://127.0.0.1:%d", h->kids[i].name,
			           h->kids[i].peer);
	joined = strv_join(&cluster, ",");
	/* kubeadm's etcd manifest, on loopback. */
	strv_push(a, "etcd");
	strv_pushf(a, "--name=%s", k->name);
	strv_pushf(a, "--data-dir=%s", data);
	strv_pushf(a, "--listen-client-urls=https://127.0.0.1:%d", k->port);
	strv_pushf(a, "--advertise-client-urls=https://127.0.0.1:%d", k->port);
	strv_pushf(a, "--listen-peer-urls=https://127.0.0.1:%d", k->peer);
	strv_pushf(a, "--initial-advertise-peer-urls=https://127.0.0.1:%d", k->peer);
	strv_pushf(a, "--initial-cluster=%s", joined);
	strv_pushf(a, "--initial-cluster-state=%s", resumed ? "existing" : "new");
	strv_push(a, "--initial-cluster-token=cube");
	strv_pushf(a, "--cert-file=%s", crt);
	strv_pushf(a, "--key-file=%s", key);
	strv_push(a, "--client-cert-auth=true");
	strv_pushf(a, "--trusted-ca-file=%s", ca);
	strv_pushf(a, "--peer-cert-file=%s", pcrt);
	strv_pushf(a, "--peer-key-file=%s", pkey);
	strv_push(a, "--peer-client-cert-auth=true");
	strv_pushf(a, "--peer-trusted-ca-file=%s", ca);
	strv_push(a, "--snapshot-count=10000");
	strv_push(a, "--log-level=warn");
	free(joined);
	strv_free(&cluster);
	free(data);
	free(crt);
	free(key);
	free(ca);
	free(pcrt);
	free(pkey);
}

/* "--flag=DIR/rel". */
static void push_file(const struct ha *h, struct strv *a, const char *flag, const char *rel)
{
	char *v = path(h, "%s", rel);
	strv_pushf(a, "%s=%s", flag, v);
	free(v);
}

static void argv_cube(struct ha *h, const struct child *k, struct strv *a)
{
	char *v;

	strv_push(a, h->self);
	switch (k->kind) {
	case APISERVER:
		strv_push(a, "apiserver");
		strv_pushf(a, "--cluster-dir=%s", h->o.dir);
		strv_push(a, "--bind-address=127.0.0.1");
		strv_pushf(a, "--secure-port=%d", k->port);
		v = etcd_servers(h);
		strv_pushf(a, "--etcd-servers=%s", v);
		free(v);
		push_file(h, a, "--etcd-cafile", "pki/etcd/ca.crt");
		push_file(h, a, "--etcd-certfile", "pki/apiserver-etcd-client.crt");
		push_file(h, a, "--etcd-keyfile", "pki/apiserver-etcd-client.key");
		break;
	case CM:
		strv_push(a, "controller-manager");
		push_file(h, a, "--kubeconfig", "controller-manager.conf");
		push_file(h, a, "--cluster-signing-cert-file", "pki/ca.crt");
		push_file(h, a, "--cluster-signing-key-file", "pki/ca.key");
		strv_push(a, "--use-service-account-credentials");
		strv_push(a, "--secure-port=0");
		strv_push(a, "--leader-elect=true");
		if (h->o.cert_ttl_ns > 0)
			strv_pushf(a, "--cluster-signing-duration=%llds",
			           (long long)(h->o.cert_ttl_ns / NS_PER_SEC));
		if (h->o.node_monitor_grace_period_ns > 0)
			strv_pushf(a, "--node-monitor-grace-period=%lldms",
			           (long long)(h->o.node_monitor_grace_period_ns / 1000000));
		break;
	case SCHEDULER:
		strv_push(a, "scheduler");
		push_file(h, a, "--kubeconfig", "scheduler.conf");
		strv_push(a, "--secure-port=0");
		strv_push(a, "--leader-elect=true");
		break;
	case KUBELETS:
		strv_push(a, "kubelet");
		strv_pushf(a, "--hollow-nodes=%d", h->o.nodes);
		strv_push(a, "--hollow-name-prefix=node-");
		push_file(h, a, "--root-dir", "nodes");
		push_file(h, a, "--bootstrap-kubeconfig", "bootstrap-kubelet.conf");
		push_file(h, a, "--client-ca-file", "pki/ca.crt");
		strv_push(a, "--rotate-certificates=true");
		strv_push(a, "--port=0");
		if (h->o.self_heal)
			strv_push(a, "--self-heal=true");
		break;
	default:
		break;
	}
}

/* kubeadm's HA guide's haproxy.cfg, TCP through to the API servers. */
static int write_haproxy_cfg(struct ha *h, char **out)
{
	struct strv cfg = STRV_INIT;
	char *text, *file = path(h, "haproxy.cfg");
	int rc;

	strv_push(&cfg, "# cube up --ha: kubeadm's HA guide's balancer, on loopback.\n"
	                "global\n    log stdout format raw local0\n"
	                "defaults\n    mode tcp\n    log global\n    option tcplog\n"
	                /* A server that refuses is tried once more, then another. */
	                "    retries 1\n    option redispatch\n    timeout connect 10s\n"
	                /* Watches stay open: the guide's 20 s would cut quiet ones. */
	                "    timeout client 1h\n    timeout server 1h\n");
	strv_pushf(&cfg,
	           "frontend apiserver\n    bind 127.0.0.1:%d\n"
	           "    default_backend apiserverbackend\n",
	           h->o.port);
	strv_push(&cfg, "backend apiserverbackend\n    option httpchk GET /healthz\n"
	                "    http-check expect status 200\n    balance roundrobin\n");
	for (size_t i = 0; i < h->n; i++)
		if (h->kids[i].kind == APISERVER)
			strv_pushf(
			    &cfg,
			    "    server %s 127.0.0.1:%d check check-ssl verify none inter 1s "
			    "fall 2 rise 2\n",
			    h->kids[i].name, h->kids[i].port);
	text = strv_join(&cfg, "");
	rc = file_write_atomic(file, text, strlen(text), 0600);
	free(text);
	strv_free(&cfg);
	*out = file;
	return rc;
}

static void child_argv(struct ha *h, const struct child *k, struct strv *a)
{
	if (k->kind == ETCD) {
		argv_etcd(h, k, a);
	} else if (k->kind == HAPROXY) {
		char *cfg = path(h, "haproxy.cfg");
		strv_push(a, "haproxy");
		strv_push(a, "-db"); /* foreground */
		strv_push(a, "-f");
		strv_push(a, cfg);
		free(cfg);
	} else {
		argv_cube(h, k, a);
	}
}

/* ---- processes ------------------------------------------------------------------------- */

static int spawn(struct ha *h, struct child *k)
{
	struct strv a = STRV_INIT;
	char *log = path(h, "logs/%s.log", k->name);
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	pid_t pid;

	if (fd < 0) {
		int rc = err_set(ERR_IO, "%s: %s", log, strerror(errno));
		free(log);
		return rc;
	}
	child_argv(h, k, &a);
	pid = fork();
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0); /* the terminal's Ctrl-C is the supervisor's to pass on */
		execvp(a.v[0], a.v);
		dprintf(2, "exec %s: %s\n", a.v[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	free(log);
	strv_free(&a);
	if (pid < 0)
		return err_set(ERR_IO, "fork: %s", strerror(errno));
	k->pid = pid;
	LOG_INFO("\"Started\" component=\"%s\" pid=%d", k->name, (int)pid);
	return 0;
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
	struct ha *h = arg;
	int status;
	pid_t pid;

	(void)sig, (void)what;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (size_t i = 0; i < h->n; i++)
			if (h->kids[i].pid == pid) {
				h->kids[i].pid = 0;
				if (!h->stopping)
					LOG_INFO("\"Component exited\" component=\"%s\" status=%d",
					         h->kids[i].name,
					         WIFEXITED(status) ? WEXITSTATUS(status)
					                           : 128 + WTERMSIG(status));
			}
}

/* Wait (at most timeout_s) until something accepts on 127.0.0.1:port. */
static int wait_port(int port, int timeout_s)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct sockaddr_in a = {.sin_family = AF_INET,
		                        .sin_port = htons((uint16_t)port),
		                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= timeout_s)
			return err_set(ERR_TIMEOUT, "nothing answered on 127.0.0.1:%d within %ds",
			               port, timeout_s);
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
	}
}

static struct child *find(struct ha *h, const char *name)
{
	for (size_t i = 0; i < h->n; i++)
		if (!strcmp(h->kids[i].name, name))
			return &h->kids[i];
	return NULL;
}

static void add(struct ha *h, enum kind kind, int index, const char *fmt)
{
	struct child *k = &h->kids[h->n++];
	k->kind = kind;
	k->index = index;
	snprintf(k->name, sizeof(k->name), fmt, index);
}

/* Each member serves its own copy of etcd/server.crt, so that one can expire alone. */
static int member_certs(struct ha *h, const struct child *k)
{
	static const char *const files[] = {"server.crt", "server.key"};
	char *dir = path(h, "etcd/%s", k->name);
	int rc = file_mkdirs(dir, 0700);

	for (size_t i = 0; rc == 0 && i < 2; i++) {
		char *src = path(h, "pki/etcd/%s", files[i]);
		char *dst = path(h, "etcd/%s/%s", k->name, files[i]);
		char *data = NULL;
		size_t len;
		if (!file_exists(dst) && (rc = file_read(src, &data, &len, 1 << 20)) == 0)
			rc = file_write_atomic(dst, data, len, 0600);
		free(data);
		free(src);
		free(dst);
	}
	free(dir);
	return rc;
}

static int make_pki(struct ha *h)
{
	char server[64];
	struct cluster_pki_opts po = {
	    .dir = h->o.dir,
	    .cluster_name = "kubernetes",
	    .server = server,
	    .key_type = PKI_KEY_ECDSA,
	    .ca_validity_ns = CLUSTER_CA_VALIDITY,
	    .validity_ns = CLUSTER_CERT_VALIDITY,
	    .etcd = true,
	};

	snprintf(server, sizeof(server), "https://127.0.0.1:%d", h->o.port);
	return cluster_pki_init(&po);
}

struct ha *ha_start(struct loop *loop, const struct ha_opts *o)
{
	struct ha *h = calloc(1, sizeof(*h));
	char *logs, *cfg = NULL;
	ssize_t n;
	int rc;

	if (!h)
		abort();
	h->loop = loop;
	h->o = *o;
	if ((n = readlink("/proc/self/exe", h->self, sizeof(h->self) - 1)) <= 0) {
		err_set(ERR_IO, "/proc/self/exe: %s", strerror(errno));
		free(h);
		return NULL;
	}
	h->self[n] = 0;
	if (!(h->kids = calloc((size_t)(o->etcd_members + o->apiservers + 6), sizeof(*h->kids))))
		abort();
	for (int i = 0; i < o->etcd_members; i++)
		add(h, ETCD, i, "etcd%d");
	for (int i = 0; i < o->apiservers; i++)
		add(h, APISERVER, i, "apiserver%d");
	add(h, HAPROXY, 0, "haproxy");
	for (int i = 0; i < 2; i++)
		add(h, CM, i, "controller-manager-%d");
	for (int i = 0; i < 2; i++)
		add(h, SCHEDULER, i, "scheduler-%d");
	if (o->nodes > 0)
		add(h, KUBELETS, 0, "kubelets");
	logs = path(h, "logs");
	rc = file_mkdirs(o->dir, 0700);
	if (rc == 0)
		rc = file_mkdirs(logs, 0700);
	free(logs);
	if (rc == 0)
		rc = assign_ports(h);
	if (rc == 0)
		rc = make_pki(h);
	if (rc == 0)
		rc = write_haproxy_cfg(h, &cfg);
	free(cfg);
	if (rc < 0) {
		ha_stop(h);
		return NULL;
	}
	h->sigchld = evsignal_new(loop_base(loop), SIGCHLD, on_sigchld, h);
	evsignal_add(h->sigchld, NULL);
	/* etcd first (a quorum must form before the API servers load), then
	 * the API servers and the balancer, then the rest. */
	for (size_t i = 0; rc == 0 && i < h->n; i++)
		if (h->kids[i].kind == ETCD && (rc = member_certs(h, &h->kids[i])) == 0)
			rc = spawn(h, &h->kids[i]);
	for (size_t i = 0; rc == 0 && i < h->n; i++)
		if (h->kids[i].kind == ETCD)
			rc = wait_port(h->kids[i].port, 30);
	for (size_t i = 0; rc == 0 && i < h->n; i++)
		if (h->kids[i].kind == APISERVER)
			rc = spawn(h, &h->kids[i]);
	for (size_t i = 0; rc == 0 && i < h->n; i++)
		if (h->kids[i].kind == APISERVER)
			rc = wait_port(h->kids[i].port, 90);
	for (size_t i = 0; rc == 0 && i < h->n; i++)
		if (h->kids[i].kind == HAPROXY)
			rc = spawn(h, &h->kids[i]);
	if (rc == 0)
		rc = wait_port(h->o.port, 10);
	for (size_t i = 0; rc == 0 && i < h->n; i++)
		if (h->kids[i].kind >= CM)
			rc = spawn(h, &h->kids[i]);
	if (rc < 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		ha_stop(h);
		err_set(ERR_UNAVAILABLE, "%s (logs in %s/logs/)", msg, o->dir);
		return NULL;
	}
	return h;
}

long ha_fds_per_node(void)
{
	/* argv_cube's KUBELETS: --port=0 (no listeners), the API servers in
	 * processes of their own. */
	return kubelet_pool_fds_per_node(false, false);
}

int ha_port(const struct ha *h)
{
	return h->o.port;
}

static void stop_child(struct child *k, int sig, int timeout_ms)
{
	if (!k->pid)
		return;
	kill(k->pid, sig);
	for (int t = 0; t < timeout_ms; t += 20) {
		pid_t r = waitpid(k->pid, NULL, WNOHANG);
		if (r == k->pid || (r < 0 && errno == ECHILD)) {
			k->pid = 0;
			return;
		}
		nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
	}
	kill(k->pid, SIGKILL);
	waitpid(k->pid, NULL, 0);
	k->pid = 0;
}

void ha_stop(struct ha *h)
{
	if (!h)
		return;
	h->stopping = true;
	/* The reverse of the start: kubelets first, etcd last. */
	for (size_t i = h->n; i-- > 0;)
		stop_child(&h->kids[i], SIGTERM, 10000);
	if (h->sigchld)
		event_free(h->sigchld);
	free(h->kids);
	free(h);
}

void ha_rss(const struct ha *h, struct cluster_rss *r)
{
	for (size_t i = 0; i < h->n; i++)
		cluster_rss_add(r, h->kids[i].pid);
}

/* ---- the supervisor's words ---------------------------------------------------------------- */

static json_t *status(struct ha *h)
{
	json_t *list = json_array();
	for (size_t i = 0; i < h->n; i++) {
		const struct child *k = &h->kids[i];
		json_t *e = json_pack("{s:s,s:b,s:i}", "name", k->name, "running", k->pid != 0,
		                      "pid", (int)k->pid);
		if (k->port)
			json_object_set_new(e, "port", json_integer(k->port));
		json_array_append_new(list, e);
	}
	return json_pack("{s:o,s:i}", "components", list, "port", h->o.port);
}

json_t *ha_control(struct ha *h, const json_t *words)
{
	const char *verb = json_string_value(json_array_get(words, 0));
	const char *name = json_string_value(json_array_get(words, 1));
	struct child *k;

	if (verb && !strcmp(verb, "ping"))
		return json_pack("{s:b,s:b}", "ok", 1, "ha", 1);
	if (verb && !strcmp(verb, "status"))
		return status(h);
	/* cube fault's kubelet words: the hollow nodes share one process, so
	 * restarting one node's kubelet restarts them all (as a reboot of a
	 * machine that runs them would). */
	if (verb && !strcmp(verb, "kubelet") && name) {
		const char *how = name;
		struct child *kl = find(h, "kubelets");
		if (!kl)
			return jx_error("this cluster runs no kubelets");
		if (!strcmp(how, "restart") || !strcmp(how, "stop"))
			stop_child(kl, SIGTERM, 10000);
		if ((!strcmp(how, "restart") || !strcmp(how, "start")) && !kl->pid &&
		    spawn(h, kl) < 0)
			return jx_error("%s", err_msg());
		return status(h);
	}
	if (!verb || !name)
		return jx_error("want: status | kill NAME | start NAME | restart NAME");
	if (!(k = find(h, name)))
		return jx_error("no component %s in this cluster (cube fault list shows them)", name);
	if (!strcmp(verb, "kill")) {
		LOG_INFO("\"Killing\" component=\"%s\" pid=%d", k->name, (int)k->pid);
		stop_child(k, SIGKILL, 0);
	} else if (!strcmp(verb, "start") || !strcmp(verb, "restart")) {
		if (!strcmp(verb, "restart"))
			stop_child(k, SIGTERM, 10000);
		if (!k->pid && spawn(h, k) < 0)
			return jx_error("%s", err_msg());
	} else {
		return jx_error("unknown word %s", verb);
	}
	return status(h);
}
