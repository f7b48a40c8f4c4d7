/*
 * apiserver_bench — what `cube apiserver` sustains, measured from outside
 * over mutual TLS the way kubelets and controllers use it. One process, one
 * libevent loop, many keep-alive HTTPS/1.1 connections (evhttp client over
 * bufferevent_openssl); each node identity is a real client certificate
 * signed in-process by the cluster CA. Every subcommand prints its figures
 * and the command line that reproduces them.
 *
 *   lease  N kubelets (system:node:node-i, one connection each) renew their
 *          own Lease in kube-node-lease as a kubelet does: create it once,
 *          then PUT the last object returned with a new spec.renewTime.
 *          Each PUT is answered only after the store committed it, so the
 *          rate is durable writes/s. Prints writes/s, p50/p99/max latency.
 *   get    GET /api/v1/nodes/node-1 on C keep-alive connections, requests/s;
 *          with --nginx-port, the same client then reads the same bytes from
 *          nginx (which the caller started) and prints the ratio cube/nginx.
 *   list   LIST of all nodes (creating --nodes realistic ~3 KB Nodes first)
 *          as JSON and as a server-side Table; median of --runs.
 *   watch  W watchers (system:node:node-i, one TLS connection each) watch
 *          pods with fieldSelector spec.nodeName=node-i from a resourceVersion;
 *          pods bound to random nodes are then created at --rate/s. Prints
 *          write-to-delivery latency (create sent → event line received by
 *          the right watcher) p50/p99/max, and misdeliveries. With
 *          --write-port the pods are created through another API server on
 *          the same store (same cluster CA): a write through A seen on B.
 *   rss    the server's VmRSS idle, then after creating --nodes Nodes and
 *          --pods Pods through the API with --clients connections, then
 *          25 s later, unread: the cache keeps objects nobody read for two
 *          of its 10 s sweeps as their text alone.
 *
 * Usage:
 *   apiserver_bench SUBCOMMAND --cluster-dir C [--port N] [--pid P] [flags]
 *     --cluster-dir C   a `cube pki init` dir: pki/ca.crt, pki/ca.key, admin.conf;
 *                       the port is read from C/port unless --port is given
 *     --pid P           the server's pid: its CPU time (and RSS) are reported
 *     --also-pid NAME=P the CPU of another process too (the store: etcd=P, a
 *                       second API server); up to 4
 *     --write-port N    watch: create the pods through the server on port N
 *     --first-node N    lease: the first kubelet's node number (default 1), so
 *                       that several client processes renew distinct Leases
 *     --duration S      measured seconds (lease, get, watch; default 10)
 *     --clients N       connections (lease 64, get 16, rss/list creation 32)
 *     --nodes N         Nodes to create (list, rss; default 5000)
 *     --pods N          Pods to create (rss; default 50000)
 *     --watchers N      watch connections (default 1000)
 *     --rate R          pod creates per second (watch; default 200)
 *     --runs R          LIST repetitions (default 5)
 *     --nginx-port P    also measure nginx on 127.0.0.1:P (get); --nginx-pid its worker
 *     --body-out F      write the Node bytes cube returned to F (get)
 *     --warmup S        unmeasured seconds before measuring (default 1)
 *     --connect-max N   TLS connections being set up at once (default 64), so
 *                       the server's listen backlog does not overflow
 *     --host H          server address (default 127.0.0.1)
 *
 * bench/run-apiserver-bench.sh starts a server (and nginx) and runs them all.
 * Client and server share the machine's cores: figures are loopback figures.
 */
#include "net/tls.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/loop.h"
#include "base/rand.h"
#include "base/timeutil.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define TABLE_ACCEPT "application/json;as=Table;v=v1;g=meta.k8s.io"
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

/* ---- common: options, identities, connections --------------------------------- */

struct opts {
	const char *cluster_dir, *host, *nginx_host, *body_out;
	int port, pid, clients, nodes, pods, watchers, runs, nginx_port, nginx_pid, connect_max;
	int write_port, first_node;
	double duration, warmup, rate;
};

struct ident {
	X509 *cert;
	EVP_PKEY *key;
};

struct bench {
	struct opts o;
	struct loop *loop;
	SSL_CTX *ctx; /* trusts the cluster CA; identities are set per connection */
	X509 *ca;
	EVP_PKEY *ca_key;
	struct ident admin;
	char host_hdr[64];
};

/* A keep-alive HTTPS connection; Nagle is switched off once it has a socket. */
struct conn {
	struct evhttp_connection *evcon;
	bool nodelay;
};

typedef void (*reply_cb)(struct evhttp_request *req, void *arg);

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "apiserver_bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double secs_since(int64_t mono_ns)
{
	return (double)(clock_mono() - mono_ns) / 1e9;
}

/* A client certificate for cn/org, signed by the cluster CA, valid for a day. */
static struct ident ident_new(struct bench *b, const char *cn, const char *org)
{
	const char *orgs[] = {org, NULL};
	int64_t now = clock_now();
	struct pki_cert_spec spec = {
		.cn = cn,
		.orgs = orgs,
		.usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH,
		.not_before_ns = now - PKI_BACKDATE_NS,
		.not_after_ns = now + NS_PER_DAY,
	};
	struct ident id = {NULL, pki_key_new(PKI_KEY_ECDSA)};

	if (!id.key || !(id.cert = pki_cert_new(&spec, id.key, b->ca, b->ca_key)))
		die("cannot issue a certificate for %s", cn);
	return id;
}

static struct ident node_ident(struct bench *b, int i)
{
	char cn[64];
	snprintf(cn, sizeof(cn), "system:node:node-%d", i);
	return ident_new(b, cn, "system:nodes");
}

static void ident_free(struct ident *id)
{
	X509_free(id->cert);
	EVP_PKEY_free(id->key);
}

static void conn_open(struct bench *b, struct conn *c, const struct ident *id,
		      const char *host, int port, int timeout_s)
{
	SSL *ssl = SSL_new(b->ctx);
	struct bufferevent *bev;

	if (!ssl)
		die("SSL_new failed");
	if (id && (SSL_use_certificate(ssl, id->cert) != 1 || SSL_use_PrivateKey(ssl, id->key) != 1))
		die("cannot use the client certificate");
	bev = bufferevent_openssl_socket_new(loop_base(b->loop), -1, ssl,
					     BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	/* evhttp never sends close_notify (reference/deps.md §3.3). */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	c->evcon = evhttp_connection_base_bufferevent_new(loop_base(b->loop), NULL, bev, host,
							  (ev_uint16_t)port);
	if (!c->evcon)
		die("cannot create a connection to %s:%d", host, port);
	evhttp_connection_set_retries(c->evcon, 0);
	evhttp_connection_set_timeout(c->evcon, timeout_s);
	c->nodelay = false;
}

static void conn_close(struct conn *c)
{
	if (c->evcon)
		evhttp_connection_free(c->evcon);
	c->evcon = NULL;
}

/* Without TCP_NODELAY headers and body leave as two records, 40 ms apart. */
static void conn_nodelay(struct conn *c)
{
	int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(c->evcon));
	if (c->nodelay || fd < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	c->nodelay = true;
}

static struct evhttp_request *conn_send(struct bench *b, struct conn *c, enum evhttp_cmd_type m,
					const char *path, const char *accept, const char *body,
					reply_cb cb, void *arg)
{
	struct evhttp_request *req = evhttp_request_new(cb, arg);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Host", b->host_hdr);
	evhttp_add_header(h, "Accept", accept ? accept : "application/json");
	evhttp_add_header(h, "User-Agent", "apiserver_bench");
	if (body) {
		evhttp_add_header(h, "Content-Type", "application/json");
		evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	}
	if (evhttp_make_request(c->evcon, req, m, path) < 0)
		die("cannot send %s (out of file descriptors?)", path);
	conn_nodelay(c);
	return req;
}

static int reply_code(struct evhttp_request *req)
{
	return req ? evhttp_request_get_response_code(req) : 0;
}

/* The reply body as a NUL-terminated string (malloc'd). */
static char *reply_text(struct evhttp_request *req, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *s = malloc(n + 1);

	if (!s)
		abort();
	evbuffer_copyout(in, s, n);
	s[n] = '\0';
	if (len)
		*len = n;
	return s;
}

static json_t *reply_json(struct evhttp_request *req)
{
	size_t n;
	char *s = reply_text(req, &n);
	json_t *j = jx_parse(s, n);
	free(s);
	return j;
}

/* ---- common: samples, CPU and memory -------------------------------------------- */

struct samples {
	int64_t *v;
	size_t n, cap;
};

static void samples_add(struct samples *s, int64_t x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		if (!(s->v = realloc(s->v, s->cap * sizeof(*s->v))))
			abort();
	}
	s->v[s->n++] = x;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void samples_sort(struct samples *s)
{
	qsort(s->v, s->n, sizeof(*s->v), cmp_i64);
}

/* Quantile q of sorted samples, in ms. */
static double samples_ms(const struct samples *s, double q)
{
	size_t i = (size_t)(q * (double)s->n);
	if (!s->n)
		return 0;
	return (double)s->v[i < s->n ? i : s->n - 1] / 1e6;
}

static void samples_print(const char *what, struct samples *s)
{
	samples_sort(s);
	printf("  %-26s p50 %7.2f ms   p99 %7.2f ms   max %7.2f ms   (%zu samples)\n", what,
	       samples_ms(s, 0.5), samples_ms(s, 0.99), samples_ms(s, 1.0), s->n);
}

/* utime+stime in seconds of a /proc stat file; -1 if unreadable. */
static double stat_cpu_s(const char *path)
{
	char buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name (which may hold spaces): 14 and 15. */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A process's (pid 0: this one). */
static double proc_cpu_s(int pid)
{
	char path[64];

	snprintf(path, sizeof(path), pid ? "/proc/%d/stat" : "/proc/self/stat", pid);
	return stat_cpu_s(path);
}

/* A process's main thread: the API server's loop, which owns the cache and
 * the store and serves every request (serving threads or not). */
static double loop_cpu_s(int pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, pid);
	return stat_cpu_s(path);
}

/* VmRSS of pid in MiB, or -1. */
static double proc_rss_mib(int pid)
{
	char path[64], line[256];
	double kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), pid ? "/proc/%d/status" : "/proc/self/status", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lf kB", &kib) == 1)
			break;
	fclose(f);
	return kib < 0 ? -1 : kib / 1024;
}

/* CPU seconds all processes have spent busy (not idle or waiting on I/O). */
static double machine_busy_s(void)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7])
		  : 0;

	if (f)
		fclose(f);
	if (n != 8)
		return -1;
	/* user nice system idle iowait irq softirq steal: all but idle and iowait */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

/* --also-pid: processes beside the server whose CPU is reported (etcd, a second server). */
#define ALSO_MAX 4
static struct {
	char name[32];
	int pid;
} also[ALSO_MAX];
static int nalso;

/* CPU used by server, client and everything else over a measured interval. */
struct cpu_mark {
	int64_t mono;
	double self, server, loop, machine, also[ALSO_MAX];
};

/* server_pid 0: no server to account for. */
static struct cpu_mark cpu_mark(int server_pid)
{
	struct cpu_mark m = {clock_mono(),
			     proc_cpu_s(0),
			     server_pid ? proc_cpu_s(server_pid) : 0,
			     server_pid ? loop_cpu_s(server_pid) : 0,
			     machine_busy_s(),
			     {0}};
	for (int i = 0; i < nalso; i++)
		m.also[i] = proc_cpu_s(also[i].pid);
	return m;
}

/*
 * Cores used by each side, by other processes (on a shared machine they
 * skew every figure), and the server's CPU per operation.
 */
static void cpu_print(const char *what, int server_pid, struct cpu_mark from, double ops,
		      const char *op)
{
	struct cpu_mark to = cpu_mark(server_pid);
	double wall = (double)(to.mono - from.mono) / 1e9;
	double self = to.self - from.self, server = to.server - from.server, others = 0;

	printf("  CPU %s: client %.2f cores", what, self / wall);
	if (server_pid) {
		double loop = to.loop - from.loop;
		printf(", server %.2f cores (%.0f us per %s; its loop thread %.2f cores, %.0f us)",
		       server / wall, ops > 0 ? server * 1e6 / ops : 0, op, loop / wall,
		       ops > 0 ? loop * 1e6 / ops : 0);
	}
	for (int i = 0; i < nalso; i++) {
		double t = to.also[i] - from.also[i];
		printf(", %s %.2f cores (%.0f us per %s)", also[i].name, t / wall,
		       ops > 0 ? t * 1e6 / ops : 0, op);
		others += t;
	}
	if (from.machine >= 0 && to.machine >= 0) {
		double other = (to.machine - from.machine - self - server - others) / wall;
		/* Tick-granular accounting can make a quiet machine look negative. */
		printf(", other processes %.2f cores", other > 0 ? other : 0);
	}
	printf("\n");
}

/* ---- common: ramping connections up without overflowing the listen backlog -------- */

struct ramp {
	int next, total, inflight, max;
	void (*start)(void *ctx, int i);
	void *ctx;
};

static void ramp_more(struct ramp *r)
{
	while (r->inflight < r->max && r->next < r->total) {
		r->inflight++;
		r->start(r->ctx, r->next++);
	}
}

/* One started client got its first answer (or failed). */
static void ramp_done(struct ramp *r)
{
	r->inflight--;
	ramp_more(r);
}

/* ---- common: object bodies ------------------------------------------------------- */

static char bench_time[TIME_BUF]; /* timestamps inside generated objects */

/* A Node as a kubelet registers it, with status: about 3 KB. */
static char *node_body(int i)
{
	char *s;
	if (asprintf(&s,
		     "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%d\","
		     "\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/os\":"
		     "\"linux\",\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/hostname\":\"node-%d\","
		     "\"kubernetes.io/os\":\"linux\",\"node.kubernetes.io/instance-type\":"
		     "\"n2-standard-8\",\"topology.kubernetes.io/region\":\"europe-west1\","
		     "\"topology.kubernetes.io/zone\":\"europe-west1-%c\"},\"annotations\":{"
		     "\"node.alpha.kubernetes.io/ttl\":\"0\",\"volumes.kubernetes.io/"
		     "controller-managed-attach-detach\":\"true\"}},"
		     "\"spec\":{\"podCIDR\":\"10.%d.%d.0/24\",\"podCIDRs\":[\"10.%d.%d.0/24\"],"
		     "\"providerID\":\"cube://bench/node-%d\"},"
		     "\"status\":{\"capacity\":{\"cpu\":\"8\",\"ephemeral-storage\":\"101445540Ki\","
		     "\"hugepages-1Gi\":\"0\",\"hugepages-2Mi\":\"0\",\"memory\":\"32876672Ki\","
		     "\"pods\":\"110\"},\"allocatable\":{\"cpu\":\"7910m\",\"ephemeral-storage\":"
		     "\"93492209510\",\"hugepages-1Gi\":\"0\",\"hugepages-2Mi\":\"0\",\"memory\":"
		     "\"29376640Ki\",\"pods\":\"110\"},\"conditions\":["
		     "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"%s\","
		     "\"lastTransitionTime\":\"%s\",\"reason\":\"KubeletHasSufficientMemory\","
		     "\"message\":\"kubelet has sufficient memory available\"},"
		     "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"%s\","
		     "\"lastTransitionTime\":\"%s\",\"reason\":\"KubeletHasNoDiskPressure\","
		     "\"message\":\"kubelet has no disk pressure\"},"
		     "{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"%s\","
		     "\"lastTransitionTime\":\"%s\",\"reason\":\"KubeletHasSufficientPID\","
		     "\"message\":\"kubelet has sufficient PID available\"},"
		     "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"%s\","
		     "\"lastTransitionTime\":\"%s\",\"reason\":\"KubeletReady\","
		     "\"message\":\"kubelet is posting ready status\"}],"
		     "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.128.%d.%d\"},"
		     "{\"type\":\"Hostname\",\"address\":\"node-%d\"}],"
		     "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},"
		     "\"nodeInfo\":{\"machineID\":\"%08x7d2e4c0b9a1f3e5d6c7b8a90\",\"systemUUID\":"
		     "\"%08x-4f1e-9c2d-7b3a-5e6f7a8b9c0d\",\"bootID\":\"%08x-1a2b-3c4d-5e6f-"
		     "7a8b9c0d1e2f\",\"kernelVersion\":\"6.1.0-28-cloud-amd64\",\"osImage\":"
		     "\"Debian GNU/Linux 12 (bookworm)\",\"containerRuntimeVersion\":"
		     "\"containerd://1.7.24\",\"kubeletVersion\":\"v1.32.4\",\"kubeProxyVersion\":"
		     "\"v1.32.4\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"},"
		     "\"images\":["
		     "{\"names\":[\"registry.k8s.io/kube-proxy@sha256:"
		     "e5f0c2b8f7d7a2cd2b8f1e3a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f\","
		     "\"registry.k8s.io/kube-proxy:v1.32.4\"],\"sizeBytes\":30953283},"
		     "{\"names\":[\"registry.k8s.io/coredns/coredns@sha256:"
		     "9caabbf6238b189a65d0d6e6ac138de60d6a1c419e5a341fbbb7c78382559c6e\","
		     "\"registry.k8s.io/coredns/coredns:v1.11.3\"],\"sizeBytes\":18562039},"
		     "{\"names\":[\"docker.io/library/nginx@sha256:"
		     "0a399eb16751829e1af26fea27b20c3ec28d7ab1fb72182879dcae1cca21206a\","
		     "\"docker.io/library/nginx:1.27\"],\"sizeBytes\":72951243},"
		     "{\"names\":[\"registry.k8s.io/pause@sha256:"
		     "7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097\","
		     "\"registry.k8s.io/pause:3.10\"],\"sizeBytes\":320368}]}}",
		     i, i, 'b' + i % 3, i / 256 % 256, i % 256, i / 256 % 256, i % 256, i, bench_time,
		     bench_time, bench_time, bench_time, bench_time, bench_time, bench_time,
		     bench_time, i / 256 % 256, i % 256, i, (unsigned)i, (unsigned)i,
		     (unsigned)i) < 0)
		abort();
	return s;
}

/* A ReplicaSet's pod bound to a node, as the scheduler leaves it: about 1.2 KB. */
static char *pod_body(const char *name, int node)
{
	char *s;
	if (asprintf(&s,
		     "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
		     "\"namespace\":\"default\",\"labels\":{\"app\":\"web-%d\","
		     "\"pod-template-hash\":\"5d8f7c9b4d\",\"tier\":\"frontend\"},"
		     "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
		     "\"name\":\"web-%d-5d8f7c9b4d\",\"uid\":\"6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b\","
		     "\"controller\":true,\"blockOwnerDeletion\":true}]},"
		     "\"spec\":{\"nodeName\":\"node-%d\",\"containers\":[{\"name\":\"web\","
		     "\"image\":\"docker.io/library/nginx:1.27\",\"ports\":[{\"containerPort\":8080,"
		     "\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"POD_NAME\",\"valueFrom\":{"
		     "\"fieldRef\":{\"fieldPath\":\"metadata.name\"}}}],\"resources\":{\"requests\":"
		     "{\"cpu\":\"100m\",\"memory\":\"128Mi\"},\"limits\":{\"memory\":\"256Mi\"}},"
		     "\"volumeMounts\":[{\"name\":\"kube-api-access\",\"mountPath\":"
		     "\"/var/run/secrets/kubernetes.io/serviceaccount\",\"readOnly\":true}]}],"
		     "\"volumes\":[{\"name\":\"kube-api-access\",\"projected\":{\"sources\":["
		     "{\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}}]}}],"
		     "\"serviceAccountName\":\"default\"}}",
		     name, node % 100, node % 100, node) < 0)
		abort();
	return s;
}

/* ---- common: creating many objects through the API -------------------------------- */

struct bulk_conn {
	struct bulk *bk;
	struct conn c;
	int idx;
};

struct bulk {
	struct bench *b;
	const char *path;
	char *(*body)(int i, void *arg);
	void *arg;
	int next, total, done, created, existed, failed, active;
	struct bulk_conn *conns;
};

static void bulk_send(struct bulk_conn *bc);

static void bulk_reply(struct evhttp_request *req, void *arg)
{
	struct bulk_conn *bc = arg;
	struct bulk *bk = bc->bk;
	int code = reply_code(req);

	bk->done++;
	if (code == 201)
		bk->created++;
	else if (code == 409)
		bk->existed++;
	else if (bk->failed++ < 3) {
		char *t = req ? reply_text(req, NULL) : strdup("(connection failed)");
		fprintf(stderr, "create %s #%d: HTTP %d %.300s\n", bk->path, bc->idx, code, t);
		free(t);
	}
	if (!req)
		die("connection to the server failed");
	bulk_send(bc);
}

static void bulk_send(struct bulk_conn *bc)
{
	struct bulk *bk = bc->bk;
	char *body;

	if (bk->next == bk->total) {
		if (--bk->active == 0)
			loop_stop(bk->b->loop);
		return;
	}
	bc->idx = bk->next++;
	body = bk->body(bc->idx, bk->arg);
	conn_send(bk->b, &bc->c, EVHTTP_REQ_POST, bk->path, NULL, body, bulk_reply, bc);
	free(body);
}

/* POST total objects to path over `clients` admin connections; prints the rate. */
static void bulk_create(struct bench *b, const char *what, const char *path, int total,
			char *(*body)(int i, void *arg), void *arg)
{
	struct bulk bk = {.b = b, .path = path, .body = body, .arg = arg, .total = total};
	int n = b->o.clients < total ? b->o.clients : total;
	struct cpu_mark mark = cpu_mark(b->o.pid);
	int64_t t0 = clock_mono();

	if (total <= 0)
		return;
	bk.conns = calloc((size_t)n, sizeof(*bk.conns));
	bk.active = n;
	for (int i = 0; i < n; i++) {
		bk.conns[i].bk = &bk;
		conn_open(b, &bk.conns[i].c, &b->admin, b->o.host, b->o.port, 120);
		bulk_send(&bk.conns[i]);
	}
	loop_run(b->loop);
	printf("  created %d %s in %.1f s (%.0f/s over %d connections; %d already existed, "
	       "%d failed)\n",
	       bk.created, what, secs_since(t0), (double)bk.done / secs_since(t0), n, bk.existed,
	       bk.failed);
	cpu_print("creating", b->o.pid, mark, bk.done, "object");
	for (int i = 0; i < n; i++)
		conn_close(&bk.conns[i].c);
	free(bk.conns);
}

static char *node_body_cb(int i, void *arg)
{
	return node_body(i + 1);
}

static void create_nodes(struct bench *b, int n)
{
	bulk_create(b, "nodes", "/api/v1/nodes", n, node_body_cb, NULL);
}

/* ---- common: one request, synchronously (setup only) -------------------------------- */

struct sync_call {
	struct bench *b;
	int code;
	char *body;
	size_t len;
	int64_t sent, took;
};

static void sync_reply(struct evhttp_request *req, void *arg)
{
	struct sync_call *sc = arg;
	sc->took = clock_mono() - sc->sent;
	sc->code = reply_code(req);
	sc->body = req ? reply_text(req, &sc->len) : NULL;
	loop_stop(sc->b->loop);
}

/* The reply's code; *body (malloc'd) when asked for. */
static int call(struct bench *b, struct conn *c, enum evhttp_cmd_type m, const char *path,
		const char *accept, const char *body, char **out, size_t *len, int64_t *took)
{
	struct sync_call sc = {.b = b, .sent = clock_mono()};

	conn_send(b, c, m, path, accept, body, sync_reply, &sc);
	loop_run(b->loop);
	if (out)
		*out = sc.body;
	else
		free(sc.body);
	if (len)
		*len = sc.len;
	if (took)
		*took = sc.took;
	return sc.code;
}

/* ---- lease ------------------------------------------------------------------------ */

enum phase { PH_SETUP, PH_WARMUP, PH_MEASURE, PH_DRAIN };

struct lease_bench;

struct kubelet {
	struct lease_bench *lb;
	struct conn c;
	struct ident id;
	int node;
	json_t *lease; /* the last object the server returned */
	int64_t sent;
};

struct lease_bench {
	struct bench *b;
	struct kubelet *k;
	int n, ready, active;
	enum phase phase;
	struct ramp ramp;
	struct samples lat;
	long puts, conflicts, errors;
	struct timer *phase_timer;
};

static void lease_put(struct kubelet *k);

static void lease_go(void *arg)
{
	struct lease_bench *lb = arg;

	if (lb->phase == PH_WARMUP) {
		lb->phase = PH_MEASURE;
		timer_after(lb->phase_timer, (int64_t)(lb->b->o.duration * 1e9));
	} else if (lb->phase == PH_MEASURE) {
		lb->phase = PH_DRAIN;
	}
	loop_stop(lb->b->loop); /* bench_lease takes its marks between phases */
}

/* Every kubelet has its lease: renew all at once from now on. */
static void lease_all_ready(struct lease_bench *lb)
{
	lb->phase = PH_WARMUP;
	lb->active = lb->n;
	for (int i = 0; i < lb->n; i++)
		lease_put(&lb->k[i]);
	timer_after(lb->phase_timer, (int64_t)(lb->b->o.warmup * 1e9));
}

static void lease_failed(struct kubelet *k, struct evhttp_request *req, const char *what)
{
	char *t = req ? reply_text(req, NULL) : strdup("(connection failed)");
	if (k->lb->errors++ < 3)
		fprintf(stderr, "node-%d %s: HTTP %d %.300s\n", k->node, what, reply_code(req), t);
	free(t);
}

static void lease_on_put(struct evhttp_request *req, void *arg)
{
	struct kubelet *k = arg;
	struct lease_bench *lb = k->lb;
	int code = reply_code(req);
	json_t *obj;

	if (lb->phase == PH_MEASURE)
		samples_add(&lb->lat, clock_mono() - k->sent);
	if (code == 200 && (obj = reply_json(req))) {
		json_decref(k->lease);
		k->lease = obj;
		lb->puts += lb->phase == PH_MEASURE;
	} else if (code == 409) {
		lb->conflicts++;
	} else {
		lease_failed(k, req, "PUT");
		if (!req) {
			if (--lb->active == 0)
				loop_stop(lb->b->loop);
			return;
		}
	}
	if (lb->phase == PH_DRAIN) {
		if (--lb->active == 0)
			loop_stop(lb->b->loop);
		return;
	}
	lease_put(k);
}

/* What a kubelet does every renewInterval: last lease, new renewTime, Update. */
static void lease_put(struct kubelet *k)
{
	char path[160], now[TIME_BUF];
	char *body;

	jx_set_str(k->lease, "spec.renewTime", time_format_rfc3339_micro(clock_now(), now));
	body = jx_dump(k->lease);
	snprintf(path, sizeof(path), LEASE_PATH "/node-%d", k->node);
	k->sent = clock_mono();
	conn_send(k->lb->b, &k->c, EVHTTP_REQ_PUT, path, NULL, body, lease_on_put, k);
	free(body);
}

static void lease_ready(struct kubelet *k, json_t *lease)
{
	struct lease_bench *lb = k->lb;
	k->lease = lease;
	ramp_done(&lb->ramp);
	if (++lb->ready == lb->n)
		lease_all_ready(lb);
}

static void lease_on_get(struct evhttp_request *req, void *arg)
{
	struct kubelet *k = arg;
	json_t *obj = reply_code(req) == 200 ? reply_json(req) : NULL;
	if (!obj) {
		lease_failed(k, req, "GET");
		die("kubelet node-%d could not read its lease", k->node);
	}
	lease_ready(k, obj);
}

static void lease_on_create(struct evhttp_request *req, void *arg)
{
	struct kubelet *k = arg;
	char path[160];
	json_t *obj;

	if (reply_code(req) == 201 && (obj = reply_json(req))) {
		lease_ready(k, obj);
	} else if (reply_code(req) == 409) {
		/* Left by an earlier run: carry on from what is stored. */
		snprintf(path, sizeof(path), LEASE_PATH "/node-%d", k->node);
		conn_send(k->lb->b, &k->c, EVHTTP_REQ_GET, path, NULL, NULL, lease_on_get, k);
	} else {
		lease_failed(k, req, "create");
		die("kubelet node-%d could not create its lease", k->node);
	}
}

static void lease_start(void *ctx, int i)
{
	struct lease_bench *lb = ctx;
	struct kubelet *k = &lb->k[i];
	char now[TIME_BUF], *body;

	conn_open(lb->b, &k->c, &k->id, lb->b->o.host, lb->b->o.port, 120);
	if (asprintf(&body,
		     "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
		     "{\"name\":\"node-%d\",\"namespace\":\"kube-node-lease\"},\"spec\":{"
		     "\"holderIdentity\":\"node-%d\",\"leaseDurationSeconds\":40,"
		     "\"renewTime\":\"%s\"}}",
		     k->node, k->node, time_format_rfc3339_micro(clock_now(), now)) < 0)
		abort();
	conn_send(lb->b, &k->c, EVHTTP_REQ_POST, LEASE_PATH, NULL, body, lease_on_create, k);
	free(body);
}

static void bench_lease(struct bench *b)
{
	struct lease_bench lb = {.b = b, .n = b->o.clients > 0 ? b->o.clients : 64};
	struct cpu_mark mark;
	int64_t t0;
	double wall;

	printf("lease: %d kubelets (one mTLS keep-alive connection and Lease each), %.0f s "
	       "measured after %.0f s warm-up\n",
	       lb.n, b->o.duration, b->o.warmup);
	lb.k = calloc((size_t)lb.n, sizeof(*lb.k));
	for (int i = 0; i < lb.n; i++) {
		lb.k[i].lb = &lb;
		lb.k[i].node = b->o.first_node + i;
		lb.k[i].id = node_ident(b, lb.k[i].node);
	}
	lb.phase_timer = loop_timer(b->loop, lease_go, &lb);
	lb.ramp = (struct ramp){0, lb.n, 0, b->o.connect_max, lease_start, &lb};
	ramp_more(&lb.ramp);
	loop_run(b->loop); /* setup + warm-up: stops when measuring starts */
	mark = cpu_mark(b->o.pid);
	t0 = clock_mono();
	loop_run(b->loop); /* measuring: stops at the deadline */
	wall = secs_since(t0);
	cpu_print("while measuring", b->o.pid, mark, (double)lb.puts, "PUT");
	loop_run(b->loop); /* drain what is in flight */

	printf("  %.0f durable lease updates/s (%ld in %.2f s), %ld conflicts, %ld errors\n",
	       (double)lb.puts / wall, lb.puts, wall, lb.conflicts, lb.errors);
	samples_print("PUT latency", &lb.lat);
	printf("RESULT lease clients=%d writes_per_s=%.0f p50_ms=%.2f p99_ms=%.2f\n", lb.n,
	       (double)lb.puts / wall, samples_ms(&lb.lat, 0.5), samples_ms(&lb.lat, 0.99));
	for (int i = 0; i < lb.n; i++) {
		conn_close(&lb.k[i].c);
		ident_free(&lb.k[i].id);
		json_decref(lb.k[i].lease);
	}
	timer_free(lb.phase_timer);
	free(lb.lat.v);
	free(lb.k);
}

/* ---- get ------------------------------------------------------------------------ */

struct getter {
	struct get_bench *gb;
	struct conn c;
	int64_t sent;
};

struct get_bench {
	struct bench *b;
	const char *path;
	struct getter *g;
	int n, active;
	enum phase phase;
	long ok, bad;
	size_t bytes;
	struct samples lat;
	struct timer *phase_timer;
};

static void get_send(struct getter *g);

static void get_on_reply(struct evhttp_request *req, void *arg)
{
	struct getter *g = arg;
	struct get_bench *gb = g->gb;

	if (gb->phase == PH_MEASURE) {
		samples_add(&gb->lat, clock_mono() - g->sent);
		if (reply_code(req) == 200)
			gb->ok++, gb->bytes = evbuffer_get_length(evhttp_request_get_input_buffer(req));
		else
			gb->bad++;
	}
	if (!req)
		die("connection failed during get");
	if (gb->phase == PH_DRAIN) {
		if (--gb->active == 0)
			loop_stop(gb->b->loop);
		return;
	}
	get_send(g);
}

static void get_send(struct getter *g)
{
	g->sent = clock_mono();
	conn_send(g->gb->b, &g->c, EVHTTP_REQ_GET, g->gb->path, NULL, NULL, get_on_reply, g);
}

static void get_go(void *arg)
{
	struct get_bench *gb = arg;
	if (gb->phase == PH_WARMUP) {
		gb->phase = PH_MEASURE;
		timer_after(gb->phase_timer, (int64_t)(gb->b->o.duration * 1e9));
	} else {
		gb->phase = PH_DRAIN;
	}
	loop_stop(gb->b->loop);
}

/* n keep-alive connections looping GET path on host:port; returns requests/s. */
static double get_run(struct bench *b, const char *label, const char *host, int port, int pid,
		      const char *path, struct samples *lat)
{
	struct get_bench gb = {.b = b, .path = path, .n = b->o.clients > 0 ? b->o.clients : 16};
	struct cpu_mark mark;
	int64_t t0;
	double wall, rps;

	gb.g = calloc((size_t)gb.n, sizeof(*gb.g));
	gb.phase = PH_WARMUP;
	gb.active = gb.n;
	gb.phase_timer = loop_timer(b->loop, get_go, &gb);
	for (int i = 0; i < gb.n; i++) {
		gb.g[i].gb = &gb;
		conn_open(b, &gb.g[i].c, &b->admin, host, port, 60);
		get_send(&gb.g[i]);
	}
	timer_after(gb.phase_timer, (int64_t)(b->o.warmup * 1e9));
	loop_run(b->loop);
	mark = cpu_mark(pid);
	t0 = clock_mono();
	loop_run(b->loop);
	wall = secs_since(t0);
	rps = (double)gb.ok / wall;
	printf("  %-6s %8.0f requests/s  (%ld ok, %ld not 200, %zu-byte body, %d connections)\n",
	       label, rps, gb.ok, gb.bad, gb.bytes, gb.n);
	cpu_print("while measuring", pid, mark, (double)gb.ok, "GET");
	loop_run(b->loop);
	for (int i = 0; i < gb.n; i++)
		conn_close(&gb.g[i].c);
	timer_free(gb.phase_timer);
	free(gb.g);
	*lat = gb.lat;
	return rps;
}

static void ensure_node(struct bench *b, struct conn *c, int i)
{
	char *body = node_body(i);
	int code = call(b, c, EVHTTP_REQ_POST, "/api/v1/nodes", NULL, body, NULL, NULL, NULL);
	free(body);
	if (code != 201 && code != 409)
		die("cannot create node-%d: HTTP %d", i, code);
}

static void bench_get(struct bench *b)
{
	const char *path = "/api/v1/nodes/node-1";
	struct samples lc = {0}, ln = {0};
	struct conn c;
	char *body;
	size_t len;
	double cube, nginx;

	printf("get: GET %s, %d keep-alive HTTPS connections, %.0f s each\n", path,
	       b->o.clients > 0 ? b->o.clients : 16, b->o.duration);
	conn_open(b, &c, &b->admin, b->o.host, b->o.port, 60);
	ensure_node(b, &c, 1);
	if (call(b, &c, EVHTTP_REQ_GET, path, NULL, NULL, &body, &len, NULL) != 200)
		die("GET %s failed", path);
	conn_close(&c);
	if (b->o.body_out && file_write_atomic(b->o.body_out, body, len, 0644) < 0)
		die("cannot write %s", b->o.body_out);
	free(body);

	cube = get_run(b, "cube", b->o.host, b->o.port, b->o.pid, path, &lc);
	samples_print("cube GET latency", &lc);
	printf("RESULT get target=cube req_per_s=%.0f p50_ms=%.2f p99_ms=%.2f\n", cube,
	       samples_ms(&lc, 0.5), samples_ms(&lc, 0.99));
	if (b->o.nginx_port) {
		nginx = get_run(b, "nginx", b->o.nginx_host, b->o.nginx_port, b->o.nginx_pid, path,
				&ln);
		samples_print("nginx GET latency", &ln);
		printf("RESULT get target=nginx req_per_s=%.0f p50_ms=%.2f p99_ms=%.2f\n", nginx,
		       samples_ms(&ln, 0.5), samples_ms(&ln, 0.99));
		printf("RESULT get ratio_cube_over_nginx=%.2f\n", nginx > 0 ? cube / nginx : 0);
	}
	free(lc.v);
	free(ln.v);
}

/* ---- list ----------------------------------------------------------------------- */

/* LIST path runs times with accept; prints and returns the median in ms. */
static double list_runs(struct bench *b, struct conn *c, const char *label, const char *path,
			const char *accept)
{
	struct samples s = {0};
	size_t len = 0;
	double med;

	for (int i = 0; i < b->o.runs; i++) {
		int64_t took;
		int code = call(b, c, EVHTTP_REQ_GET, path, accept, NULL, NULL, &len, &took);
		if (code != 200)
			die("LIST %s: HTTP %d", path, code);
		samples_add(&s, took);
	}
	samples_sort(&s);
	med = samples_ms(&s, 0.5);
	printf("  %-28s median %8.1f ms   min %8.1f   max %8.1f   %6.2f MB   (%d runs)\n", label,
	       med, samples_ms(&s, 0), samples_ms(&s, 1.0), (double)len / 1e6, b->o.runs);
	free(s.v);
	return med;
}

static void bench_list(struct bench *b)
{
	struct conn c;
	double json, table, page;

	printf("list: LIST /api/v1/nodes with %d nodes (~3 KB each), one keep-alive connection\n",
	       b->o.nodes);
	create_nodes(b, b->o.nodes);
	conn_open(b, &c, &b->admin, b->o.host, b->o.port, 300);
	list_runs(b, &c, "warm-up (JSON)", "/api/v1/nodes", NULL);
	json = list_runs(b, &c, "JSON", "/api/v1/nodes", NULL);
	table = list_runs(b, &c, "Table", "/api/v1/nodes", TABLE_ACCEPT);
	page = list_runs(b, &c, "Table, limit=500 (kubectl)", "/api/v1/nodes?limit=500",
			 TABLE_ACCEPT);
	printf("RESULT list nodes=%d json_median_ms=%.1f table_median_ms=%.1f "
	       "table_limit500_median_ms=%.1f\n",
	       b->o.nodes, json, table, page);
	conn_close(&c);
}

/* ---- watch ------------------------------------------------------------------------ */

struct watcher {
	struct watch_bench *wb;
	struct conn c;
	struct ident id;
	struct evbuffer *partial; /* bytes of an event line not yet complete */
	int node;
	bool up;
};

struct writer {
	struct watch_bench *wb;
	struct conn c;
	bool busy;
	int64_t sent;
};

struct watch_bench {
	struct bench *b;
	struct watcher *w;
	struct writer *wr;
	int n, nwr, up, lost;
	char rv[24];
	unsigned run; /* names this run's pods: wb-<run>-<seq> */
	struct ramp ramp;
	struct rng rng;
	/* per pod written */
	int64_t *sent_ns;
	int *target;
	unsigned char *seen;
	int written, acked, cap;
	long delivered, wrong, dup, skipped, write_err;
	struct samples deliver, ack;
	struct timer *tick;
	int64_t start, stop_at;
	bool writing;
};

static void watch_line(struct watcher *w, const char *line)
{
	struct watch_bench *wb = w->wb;
	char want[32];
	const char *p;
	int seq;

	snprintf(want, sizeof(want), "\"name\":\"wb-%x-", wb->run);
	if (!(p = strstr(line, want)) || sscanf(p + strlen(want), "%d", &seq) != 1)
		return;
	if (seq < 0 || seq >= wb->written)
		return;
	if (wb->target[seq] != w->node) {
		wb->wrong++;
		return;
	}
	if (wb->seen[seq]++) {
		wb->dup++;
		return;
	}
	wb->delivered++;
	samples_add(&wb->deliver, clock_mono() - wb->sent_ns[seq]);
}

static void watch_on_chunk(struct evhttp_request *req, void *arg)
{
	struct watcher *w = arg;
	char *line;
	size_t n;

	evbuffer_add_buffer(w->partial, evhttp_request_get_input_buffer(req));
	while ((line = evbuffer_readln(w->partial, &n, EVBUFFER_EOL_LF))) {
		watch_line(w, line);
		free(line);
	}
}

static int watch_on_headers(struct evhttp_request *req, void *arg)
{
	struct watcher *w = arg;
	if (evhttp_request_get_response_code(req) != 200)
		return 0; /* the end callback reports it */
	w->up = true;
	w->wb->up++;
	ramp_done(&w->wb->ramp);
	if (w->wb->up == w->wb->n)
		loop_stop(w->wb->b->loop);
	return 0;
}

/* The stream ended: an error before it was up, or the server closed it. */
static void watch_on_end(struct evhttp_request *req, void *arg)
{
	struct watcher *w = arg;
	struct watch_bench *wb = w->wb;

	if (!w->up) {
		char *t = req ? reply_text(req, NULL) : strdup("(connection failed)");
		die("watcher node-%d: HTTP %d %.300s", w->node, reply_code(req), t);
	}
	wb->lost++;
}

static void watch_start(void *ctx, int i)
{
	struct watch_bench *wb = ctx;
	struct watcher *w = &wb->w[i];
	struct evhttp_request *req;
	char path[200];

	w->partial = evbuffer_new();
	conn_open(wb->b, &w->c, &w->id, wb->b->o.host, wb->b->o.port, 3600);
	snprintf(path, sizeof(path),
		 "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%%3Dnode-%d&resourceVersion=%s",
		 w->node, wb->rv);
	req = conn_send(wb->b, &w->c, EVHTTP_REQ_GET, path, NULL, NULL, watch_on_end, w);
	evhttp_request_set_chunked_cb(req, watch_on_chunk);
	evhttp_request_set_header_cb(req, watch_on_headers);
}

static void writer_send(struct writer *wr);

static void writer_on_reply(struct evhttp_request *req, void *arg)
{
	struct writer *wr = arg;
	struct watch_bench *wb = wr->wb;

	wr->busy = false;
	wb->acked++;
	if (reply_code(req) == 201)
		samples_add(&wb->ack, clock_mono() - wr->sent);
	else if (wb->write_err++ < 3)
		fprintf(stderr, "pod create: HTTP %d\n", reply_code(req));
	if (!req)
		die("writer connection failed");
}

static void writer_send(struct writer *wr)
{
	struct watch_bench *wb = wr->wb;
	int seq = wb->written++, node = 1 + (int)rng_below(&wb->rng, (uint64_t)wb->n);
	char name[48], *body;

	if (seq == wb->cap) {
		wb->cap *= 2;
		wb->sent_ns = realloc(wb->sent_ns, (size_t)wb->cap * sizeof(*wb->sent_ns));
		wb->target = realloc(wb->target, (size_t)wb->cap * sizeof(*wb->target));
		wb->seen = realloc(wb->seen, (size_t)wb->cap);
		if (!wb->sent_ns || !wb->target || !wb->seen)
			abort();
	}
	snprintf(name, sizeof(name), "wb-%x-%d", wb->run, seq);
	body = pod_body(name, node);
	wb->target[seq] = node;
	wb->seen[seq] = 0;
	wr->busy = true;
	wr->sent = wb->sent_ns[seq] = clock_mono();
	conn_send(wb->b, &wr->c, EVHTTP_REQ_POST, "/api/v1/namespaces/default/pods", NULL, body,
		  writer_on_reply, wr);
	free(body);
}

/* Every 5 ms: issue the writes the rate says are due, on idle writers. */
static void watch_tick(void *arg)
{
	struct watch_bench *wb = arg;
	int64_t now = clock_mono();
	long due = (long)((double)(now - wb->start) / 1e9 * wb->b->o.rate);

	if (now >= wb->stop_at) {
		wb->writing = false;
		loop_stop(wb->b->loop);
		return;
	}
	for (int i = 0; i < wb->nwr && wb->written < due; i++)
		if (!wb->wr[i].busy)
			writer_send(&wb->wr[i]);
	if (wb->written < due) {
		wb->skipped += due - wb->written; /* the server is behind: do not queue */
		wb->start += (int64_t)((double)(due - wb->written) / wb->b->o.rate * 1e9);
	}
	timer_after(wb->tick, 5 * NS_PER_MS);
}

/* Wait (at most 10 s) for outstanding acks and deliveries. */
static void watch_settle(void *arg)
{
	struct watch_bench *wb = arg;
	if ((wb->acked == wb->written && wb->delivered >= wb->acked - wb->write_err) ||
	    clock_mono() >= wb->stop_at) {
		loop_stop(wb->b->loop);
		return;
	}
	timer_after(wb->tick, 10 * NS_PER_MS);
}

static void watch_rv(struct watch_bench *wb)
{
	struct conn c;
	char *body;
	json_t *list;

	conn_open(wb->b, &c, &wb->b->admin, wb->b->o.host, wb->b->o.port, 60);
	if (call(wb->b, &c, EVHTTP_REQ_GET, "/api/v1/pods?limit=1", NULL, NULL, &body, NULL,
		 NULL) != 200 ||
	    !(list = jx_parse(body, strlen(body))))
		die("cannot list pods");
	snprintf(wb->rv, sizeof(wb->rv), "%s", jx_str(list, "metadata.resourceVersion"));
	json_decref(list);
	free(body);
	conn_close(&c);
}

static void watch_connect(struct watch_bench *wb)
{
	struct bench *b = wb->b;
	int64_t t0 = clock_mono();
	struct cpu_mark mark;
	double rss0 = b->o.pid ? proc_rss_mib(b->o.pid) : -1, self0 = proc_rss_mib(0);

	for (int i = 0; i < wb->n; i++) {
		wb->w[i].wb = wb;
		wb->w[i].node = i + 1;
		wb->w[i].id = node_ident(b, i + 1);
	}
	printf("  issued %d node certificates in %.2f s\n", wb->n, secs_since(t0));
	watch_rv(wb);
	mark = cpu_mark(b->o.pid);
	t0 = clock_mono();
	wb->ramp = (struct ramp){0, wb->n, 0, b->o.connect_max, watch_start, wb};
	ramp_more(&wb->ramp);
	loop_run(b->loop);
	printf("  %d watches established in %.2f s (%.0f mTLS connections + watch requests/s, "
	       "at most %d connecting at once)\n",
	       wb->up, secs_since(t0), wb->up / secs_since(t0), b->o.connect_max);
	cpu_print("connecting", b->o.pid, mark, wb->up, "watch connection");
	if (b->o.pid)
		printf("  server RSS %.0f -> %.0f MiB (%.1f KiB per watch connection); client RSS "
		       "%.0f MiB\n",
		       rss0, proc_rss_mib(b->o.pid),
		       (proc_rss_mib(b->o.pid) - rss0) * 1024 / wb->n, proc_rss_mib(0) - self0);
}

static void bench_watch(struct bench *b)
{
	struct watch_bench wb = {.b = b, .n = b->o.watchers, .nwr = 16, .cap = 1024};
	struct cpu_mark mark;
	double wall;

	printf("watch: %d watchers (own node identity and TLS connection each), pods bound to "
	       "random nodes created at %.0f/s for %.0f s\n",
	       wb.n, b->o.rate, b->o.duration);
	wb.w = calloc((size_t)wb.n, sizeof(*wb.w));
	wb.wr = calloc((size_t)wb.nwr, sizeof(*wb.wr));
	wb.sent_ns = malloc((size_t)wb.cap * sizeof(*wb.sent_ns));
	wb.target = malloc((size_t)wb.cap * sizeof(*wb.target));
	wb.seen = malloc((size_t)wb.cap);
	wb.run = (unsigned)(clock_now() / NS_PER_SEC) & 0xffffff;
	rng_seed(&wb.rng, 42);
	watch_connect(&wb);

	if (b->o.write_port)
		printf("  writing through the server on port %d, watching on port %d\n",
		       b->o.write_port, b->o.port);
	for (int i = 0; i < wb.nwr; i++) {
		wb.wr[i].wb = &wb;
		conn_open(b, &wb.wr[i].c, &b->admin, b->o.host,
			  b->o.write_port ? b->o.write_port : b->o.port, 60);
	}
	wb.tick = loop_timer(b->loop, watch_tick, &wb);
	wb.start = clock_mono();
	wb.stop_at = wb.start + (int64_t)(b->o.duration * 1e9);
	wb.writing = true;
	mark = cpu_mark(b->o.pid);
	timer_after(wb.tick, 0);
	loop_run(b->loop);
	wall = (double)(clock_mono() - mark.mono) / 1e9;
	cpu_print("writing", b->o.pid, mark, wb.written, "pod created");
	timer_free(wb.tick);
	wb.tick = loop_timer(b->loop, watch_settle, &wb);
	wb.stop_at = clock_mono() + 10 * NS_PER_SEC;
	timer_after(wb.tick, 0);
	loop_run(b->loop);

	printf("  %d pods written (%.0f/s, %ld not sent because all %d writers were busy), "
	       "%ld write errors\n",
	       wb.written, wb.written / wall, wb.skipped, wb.nwr, wb.write_err);
	printf("  %ld delivered to the right watcher, %ld missing, %ld to a wrong watcher, %ld "
	       "duplicates, %d streams lost\n",
	       wb.delivered, wb.acked - wb.write_err - wb.delivered, wb.wrong, wb.dup, wb.lost);
	samples_print("create (201) latency", &wb.ack);
	samples_print("write-to-delivery latency", &wb.deliver);
	printf("RESULT watch watchers=%d rate=%.0f delivered=%ld/%d p50_ms=%.2f p99_ms=%.2f "
	       "max_ms=%.2f\n",
	       wb.n, wb.written / wall, wb.delivered, wb.written, samples_ms(&wb.deliver, 0.5),
	       samples_ms(&wb.deliver, 0.99), samples_ms(&wb.deliver, 1.0));
	for (int i = 0; i < wb.nwr; i++)
		conn_close(&wb.wr[i].c);
	for (int i = 0; i < wb.n; i++) {
		conn_close(&wb.w[i].c);
		if (wb.w[i].partial)
			evbuffer_free(wb.w[i].partial);
		ident_free(&wb.w[i].id);
	}
	timer_free(wb.tick);
	free(wb.w);
	free(wb.wr);
	free(wb.sent_ns);
	free(wb.target);
	free(wb.seen);
	free(wb.deliver.v);
	free(wb.ack.v);
}

/* ---- rss ------------------------------------------------------------------------ */

struct pod_gen {
	unsigned run;
	int nodes;
};

static char *pod_body_cb(int i, void *arg)
{
	struct pod_gen *g = arg;
	char name[48];
	snprintf(name, sizeof(name), "rss-%x-%d", g->run, i);
	return pod_body(name, 1 + i % g->nodes);
}

/* Two of the cache's sweeps (10 s apart) and a little. */
#define UNREAD_S 25

static void bench_rss(struct bench *b)
{
	struct pod_gen g = {(unsigned)(clock_now() / NS_PER_SEC) & 0xffffff,
			    b->o.nodes > 0 ? b->o.nodes : 1};
	double idle, nodes, pods, unread;

	if (!b->o.pid)
		die("rss needs --pid");
	printf("rss: apiserver VmRSS, idle and with %d nodes + %d pods created through the API\n",
	       b->o.nodes, b->o.pods);
	idle = proc_rss_mib(b->o.pid);
	printf("  idle                 %8.1f MiB\n", idle);
	create_nodes(b, b->o.nodes);
	nodes = proc_rss_mib(b->o.pid);
	printf("  with %6d nodes     %8.1f MiB\n", b->o.nodes, nodes);
	bulk_create(b, "pods", "/api/v1/namespaces/default/pods", b->o.pods, pod_body_cb, &g);
	pods = proc_rss_mib(b->o.pid);
	printf("  with %6d pods more %8.1f MiB  (%.1f KiB per object above idle)\n", b->o.pods,
	       pods, (pods - idle) * 1024 / (b->o.nodes + b->o.pods));
	sleep(UNREAD_S);
	unread = proc_rss_mib(b->o.pid);
	printf("  %d s later, unread   %8.1f MiB  (%.1f KiB per object above idle)\n", UNREAD_S,
	       unread, (unread - idle) * 1024 / (b->o.nodes + b->o.pods));
	printf("RESULT rss idle_mib=%.1f nodes=%d nodes_mib=%.1f pods=%d loaded_mib=%.1f "
	       "unread_mib=%.1f\n",
	       idle, b->o.nodes, nodes, b->o.pods, pods, unread);
}

/* ---- main ------------------------------------------------------------------------- */

static void load_cluster(struct bench *b)
{
	char *ca = file_join(b->o.cluster_dir, "pki/ca.crt");
	char *key = file_join(b->o.cluster_dir, "pki/ca.key");
	char *admin = file_join(b->o.cluster_dir, "admin.conf");
	char *portf = file_join(b->o.cluster_dir, "port"), *text;
	struct kubeconfig kc = {0};
	char *ca_pem;

	if (!(b->ca = pki_cert_load(ca)) || !(b->ca_key = pki_key_load(key)))
		die("cannot load %s / %s", ca, key);
	if (kubeconfig_load(admin, &kc) < 0 || !kc.cert_data || !kc.key_data)
		die("cannot load the admin credentials from %s", admin);
	if (!(b->admin.cert = pki_cert_parse(kc.cert_data, strlen(kc.cert_data))) ||
	    !(b->admin.key = pki_key_parse(kc.key_data, strlen(kc.key_data))))
		die("bad admin credentials in %s", admin);
	if (!b->o.port && file_read(portf, &text, NULL, 64) == 0) {
		b->o.port = atoi(text);
		free(text);
	}
	if (!b->o.port)
		die("no --port and no %s", portf);
	if (!(ca_pem = pki_cert_pem(b->ca)) || !(b->ctx = tls_client_ctx(ca_pem, NULL, NULL)))
		die("cannot make the TLS client context");
	snprintf(b->host_hdr, sizeof(b->host_hdr), "%s:%d", b->o.host, b->o.port);
	free(ca_pem);
	kubeconfig_free(&kc);
	free(ca);
	free(key);
	free(admin);
	free(portf);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static const char usage[] =
	"usage: apiserver_bench lease|get|list|watch|rss --cluster-dir C [--port N] [--pid P]\n"
	"         [--duration S] [--clients N] [--nodes N] [--pods N] [--watchers N]\n"
	"         [--rate R] [--runs R] [--nginx-port P] [--nginx-pid P] [--body-out F]\n"
	"         [--connect-max N] [--warmup S] [--host H] [--also-pid NAME=P]\n"
	"         [--write-port N] [--first-node N]\n";

/* --also-pid NAME=PID */
static void also_pid_add(const char *arg)
{
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg || atoi(eq + 1) <= 0 || nalso == ALSO_MAX)
		die("--also-pid %s: want NAME=PID, at most %d times", arg, ALSO_MAX);
	snprintf(also[nalso].name, sizeof(also[nalso].name), "%.*s", (int)(eq - arg), arg);
	also[nalso++].pid = atoi(eq + 1);
}

static void parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{"cluster-dir", required_argument, NULL, 'C'}, {"host", required_argument, NULL, 'H'},
		{"port", required_argument, NULL, 'p'},        {"pid", required_argument, NULL, 'P'},
		{"duration", required_argument, NULL, 'd'},    {"warmup", required_argument, NULL, 'W'},
		{"clients", required_argument, NULL, 'c'},     {"nodes", required_argument, NULL, 'n'},
		{"pods", required_argument, NULL, 'o'},        {"watchers", required_argument, NULL, 'w'},
		{"rate", required_argument, NULL, 'r'},        {"runs", required_argument, NULL, 'R'},
		{"nginx-port", required_argument, NULL, 'g'},  {"body-out", required_argument, NULL, 'b'},
		{"connect-max", required_argument, NULL, 'm'}, {"nginx-pid", required_argument, NULL, 'N'},
		{"also-pid", required_argument, NULL, 'A'},    {"write-port", required_argument, NULL, 'x'},
		{"first-node", required_argument, NULL, 'F'},  {NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct opts){.host = "127.0.0.1", .nginx_host = "127.0.0.1", .duration = 10,
			   .warmup = 1, .nodes = 5000, .pods = 50000, .watchers = 1000,
			   .rate = 200, .runs = 5, .connect_max = 64, .first_node = 1};
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'C': o->cluster_dir = optarg; break;
		case 'H': o->host = optarg; break;
		case 'p': o->port = atoi(optarg); break;
		case 'P': o->pid = atoi(optarg); break;
		case 'd': o->duration = atof(optarg); break;
		case 'W': o->warmup = atof(optarg); break;
		case 'c': o->clients = atoi(optarg); break;
		case 'n': o->nodes = atoi(optarg); break;
		case 'o': o->pods = atoi(optarg); break;
		case 'w': o->watchers = atoi(optarg); break;
		case 'r': o->rate = atof(optarg); break;
		case 'R': o->runs = atoi(optarg); break;
		case 'g': o->nginx_port = atoi(optarg); break;
		case 'b': o->body_out = optarg; break;
		case 'm': o->connect_max = atoi(optarg); break;
		case 'N': o->nginx_pid = atoi(optarg); break;
		case 'x': o->write_port = atoi(optarg); break;
		case 'F': o->first_node = atoi(optarg); break;
		case 'A': also_pid_add(optarg); break;
		default: fputs(usage, stderr); exit(2);
		}
	}
	if (!o->cluster_dir) {
		fputs(usage, stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(struct bench *b);
		int clients;
	} cmds[] = {{"lease", bench_lease, 64}, {"get", bench_get, 16}, {"list", bench_list, 32},
		    {"watch", bench_watch, 0},  {"rss", bench_rss, 32}};
	struct bench b = {0};
	size_t i;

	if (argc < 2)
		die("%s", usage);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]) && strcmp(argv[1], cmds[i].name); i++)
		;
	if (i == sizeof(cmds) / sizeof(cmds[0])) {
		fputs(usage, stderr);
		return 2;
	}
	parse_opts(&b.o, argc, argv);
	if (!b.o.clients)
		b.o.clients = cmds[i].clients ? cmds[i].clients : 16;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	time_format_rfc3339(clock_now(), bench_time);
	b.loop = loop_new();
	load_cluster(&b);

	cmds[i].run(&b);

	printf("reproduce:");
	for (int a = 0; a < argc; a++)
		printf(" %s", argv[a]);
	printf("\n  (client and server share this machine's %ld cores over loopback)\n",
	       sysconf(_SC_NPROCESSORS_ONLN));
	SSL_CTX_free(b.ctx);
	ident_free(&b.admin);
	X509_free(b.ca);
	EVP_PKEY_free(b.ca_key);
	loop_free(b.loop);
	return 0;
}
