/*
 * etcd_put_bench — what etcd itself sustains through the v3 JSON gateway
 * cube's etcd backend talks to: the "raw etcd" anchor for the API server's
 * lease benchmark (bench/run-etcd-bench.sh).
 *
 * N clients, one plain-HTTP keep-alive connection and one key each
 * (<prefix>node-i, like a kubelet's Lease), one request in flight per
 * connection: POST /v3/kv/put of a Lease-shaped JSON value (base64, a new
 * renewTime each time) in a loop. With --txn each write is instead the
 * compare-and-swap cube sends (POST /v3/kv/txn: compare the key's
 * mod_revision with the last one written, then put; else range it), so the
 * gap between "put" and "txn" is etcd's cost of the compare, and the gap
 * between "txn" and cube-on-etcd is the API server's. An answer means etcd
 * committed the write (etcd fsyncs its WAL before it answers, by default).
 * Prints writes/s, p50/p99/max latency and the CPU of this client, of etcd
 * (--pid) and of everything else on the machine.
 *
 * Usage:
 *   etcd_put_bench --endpoint http://127.0.0.1:2379 [--pid P] [--clients N]
 *                  [--duration S] [--warmup S] [--value-size B] [--prefix K] [--txn]
 *     --endpoint U    one etcd member's client URL (http only)
 *     --pid P         etcd's pid: its CPU time is reported
 *     --clients N     connections and keys (default 64)
 *     --duration S    measured seconds (default 10), after --warmup S (1)
 *     --value-size B  pad each value to B bytes (default: the Lease as is, ~300;
 *                     at most 4 KiB more)
 *     --prefix K      the keys' prefix (default /bench/leases/)
 *     --txn           compare-and-swap writes, as cube's etcd backend sends them
 *
 * Threads: one, a libevent loop.
 */
#include "base/b64.h"
#include "base/clock.h"
#include "base/jx.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Filler for --value-size: up to 4 KiB more than the Lease itself. */
#define PAD_MAX 4096
static char pad_chars[PAD_MAX + 1];

struct opts {
	const char *endpoint, *prefix;
	int pid, clients, value_size;
	double duration, warmup;
	bool txn;
};

enum phase { PH_SETUP, PH_WARMUP, PH_MEASURE, PH_DRAIN };

struct client;

struct bench {
	struct opts o;
	struct loop *loop;
	char host[256], host_hdr[300];
	int port;
	struct client *c;
	int ready, active;
	enum phase phase;
	int64_t *lat;
	size_t nlat, caplat;
	long writes, failed_cas, errors;
	struct timer *phase_timer;
};

struct client {
	struct bench *b;
	struct evhttp_connection *evcon;
	int node;
	char *ekey;  /* base64 of the key */
	int64_t rev; /* the key's mod_revision after our last write (txn) */
	int64_t sent;
	bool nodelay;
};

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "etcd_put_bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* ---- CPU accounting (as apiserver_bench prints it) -------------------------------- */

/* utime+stime of a process in seconds (pid 0: this one); -1 if unreadable. */
static double proc_cpu_s(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), pid ? "/proc/%d/stat" : "/proc/self/stat", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
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
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

struct cpu_mark {
	int64_t mono;
	double self, etcd, machine;
};

static struct cpu_mark cpu_mark(int pid)
{
	struct cpu_mark m = {clock_mono(), proc_cpu_s(0), pid ? proc_cpu_s(pid) : 0,
			     machine_busy_s()};
	return m;
}

static void cpu_print(int pid, struct cpu_mark from, double ops)
{
	struct cpu_mark to = cpu_mark(pid);
	double wall = (double)(to.mono - from.mono) / 1e9;
	double self = to.self - from.self, etcd = to.etcd - from.etcd;

	printf("  CPU while measuring: client %.2f cores", self / wall);
	if (pid)
		printf(", etcd %.2f cores (%.0f us per write)", etcd / wall,
		       ops > 0 ? etcd * 1e6 / ops : 0);
	if (from.machine >= 0 && to.machine >= 0) {
		double other = (to.machine - from.machine - self - etcd) / wall;
		printf(", other processes %.2f cores", other > 0 ? other : 0);
	}
	printf("\n");
}

/* ---- latency samples ---------------------------------------------------------------- */

static void lat_add(struct bench *b, int64_t ns)
{
	if (b->nlat == b->caplat) {
		b->caplat = b->caplat ? 2 * b->caplat : 4096;
		if (!(b->lat = realloc(b->lat, b->caplat * sizeof(*b->lat))))
			abort();
	}
	b->lat[b->nlat++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double lat_ms(const struct bench *b, double q)
{
	size_t i = (size_t)(q * (double)b->nlat);
	if (!b->nlat)
		return 0;
	return (double)b->lat[i < b->nlat ? i : b->nlat - 1] / 1e6;
}

/* ---- the writes ----------------------------------------------------------------------- */

/* A Lease as cube stores it (no resourceVersion); --value-size pads holderIdentity. */
static char *lease_value(const struct bench *b, const struct client *c)
{
	char now[TIME_BUF], *s;
	int n;

	time_format_rfc3339_micro(clock_now(), now);
	for (int pad = 0;; pad = b->o.value_size - n) {
		n = asprintf(&s,
			     "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
			     "\"metadata\":{\"name\":\"node-%d\",\"namespace\":\"kube-node-lease\","
			     "\"uid\":\"26c4c73c-c1cd-49bb-904e-%012d\",\"creationTimestamp\":"
			     "\"2026-12-03T00:00:00Z\"},\"spec\":{\"holderIdentity\":\"node-%d%.*s\","
			     "\"leaseDurationSeconds\":40,\"renewTime\":\"%s\"}}",
			     c->node, c->node, c->node, pad, pad_chars, now);
		if (n < 0)
			abort();
		if (pad || n >= b->o.value_size)
			return s;
		free(s);
	}
}

static void on_reply(struct evhttp_request *req, void *arg);

static void client_send(struct client *c, bool create)
{
	struct bench *b = c->b;
	struct evhttp_request *req = evhttp_request_new(on_reply, c);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char *value = lease_value(b, c), *ev = b64_encode(value, strlen(value)), *body;
	const char *path = "/v3/kv/put";
	int n;

	if (create || !b->o.txn)
		n = asprintf(&body, "{\"key\":\"%s\",\"value\":\"%s\"}", c->ekey, ev);
	else
		n = asprintf(&body,
			     "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":\"EQUAL\","
			     "\"mod_revision\":\"%" PRId64 "\"}],"
			     "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}],"
			     "\"failure\":[{\"request_range\":{\"key\":\"%s\",\"keys_only\":true}}]}",
			     c->ekey, c->rev, c->ekey, ev, c->ekey),
		path = "/v3/kv/txn";
	if (n < 0)
		abort();
	evhttp_add_header(h, "Host", b->host_hdr);
	evhttp_add_header(h, "Content-Type", "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	c->sent = clock_mono();
	if (evhttp_make_request(c->evcon, req, EVHTTP_REQ_POST, path) < 0)
		die("cannot send %s", path);
	if (!c->nodelay) {
		int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(c->evcon));
		if (fd >= 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
			c->nodelay = true;
		}
	}
	free(body);
	free(ev);
	free(value);
}

static void all_ready(struct bench *b)
{
	b->phase = PH_WARMUP;
	b->active = b->o.clients;
	for (int i = 0; i < b->o.clients; i++)
		client_send(&b->c[i], false);
	timer_after(b->phase_timer, (int64_t)(b->o.warmup * 1e9));
}

/*
 * The key's mod_revision after a put or a txn (gateway int64s are strings):
 * the header's revision when the write was applied, else the one the failed
 * compare's range read, so that the next txn compares against it.
 */
static int64_t reply_rev(struct evhttp_request *req, bool *succeeded)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_t *j = jx_parse((const char *)evbuffer_pullup(in, (ev_ssize_t)len), len);
	bool ok = !succeeded || jx_bool(j, "succeeded", false);
	const json_t *r = json_array_get(json_object_get(j, "responses"), 0);
	const char *rev = ok ? jx_str(j, "header.revision")
			     : jx_str(json_array_get(jx_get(r, "response_range.kvs"), 0),
				      "mod_revision");
	int64_t out = rev ? strtoll(rev, NULL, 10) : 0;

	if (succeeded)
		*succeeded = ok;
	json_decref(j);
	return out;
}

static void on_reply(struct evhttp_request *req, void *arg)
{
	struct client *c = arg;
	struct bench *b = c->b;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	bool ok = code == 200;

	if (!req)
		die("node-%d: the connection to %s failed", c->node, b->o.endpoint);
	if (b->phase == PH_MEASURE)
		lat_add(b, clock_mono() - c->sent);
	if (ok && (b->o.txn || b->phase == PH_SETUP)) {
		bool succeeded = true;
		c->rev = reply_rev(req, b->phase == PH_SETUP ? NULL : &succeeded);
		if (!succeeded)
			ok = false, b->failed_cas++; /* someone else wrote the key */
	} else if (!ok && b->errors++ < 3) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		fprintf(stderr, "node-%d: HTTP %d %.*s\n", c->node, code,
			(int)evbuffer_get_length(in) > 300 ? 300 : (int)evbuffer_get_length(in),
			(const char *)evbuffer_pullup(in, -1));
	}
	switch (b->phase) {
	case PH_SETUP:
		if (!ok)
			die("node-%d: the first put failed", c->node);
		if (++b->ready == b->o.clients)
			all_ready(b);
		return;
	case PH_MEASURE:
		b->writes += ok;
		break;
	case PH_DRAIN:
		if (--b->active == 0)
			loop_stop(b->loop);
		return;
	default:
		break;
	}
	client_send(c, false);
}

static void phase_next(void *arg)
{
	struct bench *b = arg;
	if (b->phase == PH_WARMUP) {
		b->phase = PH_MEASURE;
		timer_after(b->phase_timer, (int64_t)(b->o.duration * 1e9));
	} else {
		b->phase = PH_DRAIN;
	}
	loop_stop(b->loop); /* main takes its marks between phases */
}

/* ---- main -------------------------------------------------------------------------------- */

static const char usage[] =
	"usage: etcd_put_bench --endpoint http://HOST:PORT [--pid P] [--clients N]\n"
	"         [--duration S] [--warmup S] [--value-size B] [--prefix K] [--txn]\n";

static void parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{"endpoint", required_argument, NULL, 'e'}, {"pid", required_argument, NULL, 'P'},
		{"clients", required_argument, NULL, 'c'},  {"duration", required_argument, NULL, 'd'},
		{"warmup", required_argument, NULL, 'W'},   {"value-size", required_argument, NULL, 's'},
		{"prefix", required_argument, NULL, 'k'},   {"txn", no_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct opts){.prefix = "/bench/leases/", .clients = 64, .duration = 10, .warmup = 1};
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'e': o->endpoint = optarg; break;
		case 'P': o->pid = atoi(optarg); break;
		case 'c': o->clients = atoi(optarg); break;
		case 'd': o->duration = atof(optarg); break;
		case 'W': o->warmup = atof(optarg); break;
		case 's': o->value_size = atoi(optarg); break;
		case 'k': o->prefix = optarg; break;
		case 't': o->txn = true; break;
		default: fputs(usage, stderr); exit(2);
		}
	}
	if (!o->endpoint || o->clients < 1 || optind != argc) {
		fputs(usage, stderr);
		exit(2);
	}
}

static void parse_endpoint(struct bench *b)
{
	struct evhttp_uri *u = evhttp_uri_parse(b->o.endpoint);
	const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL;

	if (!scheme || strcmp(scheme, "http") || !evhttp_uri_get_host(u))
		die("--endpoint %s: want http://HOST:PORT", b->o.endpoint);
	snprintf(b->host, sizeof(b->host), "%s", evhttp_uri_get_host(u));
	b->port = evhttp_uri_get_port(u) > 0 ? evhttp_uri_get_port(u) : 2379;
	snprintf(b->host_hdr, sizeof(b->host_hdr), "%s:%d", b->host, b->port);
	evhttp_uri_free(u);
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	struct cpu_mark mark;
	int64_t t0;
	double wall;
	char *sample;

	parse_opts(&b.o, argc, argv);
	parse_endpoint(&b);
	memset(pad_chars, 'x', PAD_MAX);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	b.loop = loop_new();
	b.phase_timer = loop_timer(b.loop, phase_next, &b);
	b.c = calloc((size_t)b.o.clients, sizeof(*b.c));
	if (!b.c)
		abort();
	for (int i = 0; i < b.o.clients; i++) {
		struct client *c = &b.c[i];
		char key[256];
		c->b = &b;
		c->node = i + 1;
		snprintf(key, sizeof(key), "%snode-%d", b.o.prefix, c->node);
		c->ekey = b64_encode(key, strlen(key));
		c->evcon = evhttp_connection_base_new(loop_base(b.loop), NULL, b.host,
						      (ev_uint16_t)b.port);
		if (!c->evcon)
			die("cannot make a connection to %s", b.o.endpoint);
		evhttp_connection_set_retries(c->evcon, 0);
		evhttp_connection_set_timeout(c->evcon, 60);
	}
	sample = lease_value(&b, &b.c[0]);
	printf("etcd: %d clients (one keep-alive connection and key each, one request in flight), "
	       "%s of a %zu-byte value, %.0f s measured after %.0f s warm-up\n",
	       b.o.clients, b.o.txn ? "compare-and-swap txn (as cube sends)" : "put",
	       strlen(sample), b.o.duration, b.o.warmup);
	free(sample);

	for (int i = 0; i < b.o.clients; i++)
		client_send(&b.c[i], true);
	loop_run(b.loop); /* setup + warm-up: stops when measuring starts */
	mark = cpu_mark(b.o.pid);
	t0 = clock_mono();
	loop_run(b.loop); /* measuring */
	wall = (double)(clock_mono() - t0) / 1e9;
	cpu_print(b.o.pid, mark, (double)b.writes);
	loop_run(b.loop); /* drain */

	qsort(b.lat, b.nlat, sizeof(*b.lat), cmp_i64);
	printf("  %.0f committed writes/s (%ld in %.2f s), %ld failed compares, %ld errors\n",
	       (double)b.writes / wall, b.writes, wall, b.failed_cas, b.errors);
	printf("  %-26s p50 %7.2f ms   p99 %7.2f ms   max %7.2f ms   (%zu samples)\n",
	       b.o.txn ? "txn latency" : "put latency", lat_ms(&b, 0.5), lat_ms(&b, 0.99),
	       lat_ms(&b, 1.0), b.nlat);
	printf("RESULT etcd mode=%s clients=%d writes_per_s=%.0f p50_ms=%.2f p99_ms=%.2f\n",
	       b.o.txn ? "txn" : "put", b.o.clients, (double)b.writes / wall, lat_ms(&b, 0.5),
	       lat_ms(&b, 0.99));
	printf("reproduce:");
	for (int a = 0; a < argc; a++)
		printf(" %s", argv[a]);
	printf("\n  (client and etcd share this machine's %ld cores over loopback)\n",
	       sysconf(_SC_NPROCESSORS_ONLN));

	for (int i = 0; i < b.o.clients; i++) {
		evhttp_connection_free(b.c[i].evcon);
		free(b.c[i].ekey);
	}
	timer_free(b.phase_timer);
	loop_free(b.loop);
	free(b.c);
	free(b.lat);
	return 0;
}
