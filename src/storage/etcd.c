/*
 * etcd — the store on an etcd v3 cluster, through the JSON gateway etcd
 * serves beside gRPC on its client port (POST /v3/kv/range, /v3/kv/txn,
 * /v3/kv/compaction, /v3/watch; keys and values base64, int64s as strings).
 * The gateway is what Debian's etcd-server 3.4 offers without a gRPC stack,
 * and it is the same API: the same revisions, compares and watch stream.
 *
 * Keys: upstream's layout, "<prefix>/<resource>/<namespace>/<name>"
 * (--etcd-prefix, default "/registry"; the plural without its group; nodes
 * under "minions", services and endpoints under "services/specs" and
 * "services/endpoints", as upstream's registry names them), so `etcdctl get
 * --prefix /registry/leases/` reads what it reads on a kubeadm cluster.
 * Values are the objects' JSON (not upstream's protobuf envelope) without
 * metadata.resourceVersion, which is the key's mod_revision, as upstream
 * stores them.
 *
 * Writes are one txn each: compare the key's mod_revision with the revision
 * the write was built on (0: absent), then put or delete; else read the
 * key's revision — ERR_CONFLICT, and the header's revision, which the cache
 * waits for before the write is built again. A write whose answer was lost
 * (the member died, the request timed out) is resolved by reading the key
 * from another member: our value at a newer revision means it was applied;
 * the revision it was built on means it was not, and it is sent again;
 * anything else is a conflict. So a write is neither lost nor applied
 * twice when a member fails under it.
 *
 * The watch covers the whole keyspace from the revision loaded, so every
 * revision arrives (keys outside the prefix as progress only: a consistent
 * read waits for etcd's current revision, which they also advance). When
 * its member fails it resumes from the next revision on another; when that
 * history is compacted, the owner loads again (store_watcher.reset).
 *
 * Compaction follows upstream's compactor: every interval, a txn on
 * "compact_rev_key" (compare its version with the one seen last) records
 * the current revision, and the winner compacts the revision recorded the
 * interval before — so of several API servers one compacts per interval,
 * and a revision lives at least one interval.
 *
 * Endpoints: requests go to one member at a time; a transport failure or a
 * 5xx marks it down for a second and moves to the next. Reads are retried
 * on the next member; writes are resolved as above.
 *
 * Threads: the owner's loop thread. store_load runs its requests on a
 * private event base, blocking: at start-up, and when the watch's history
 * is gone.
 */
#include "storage/store.h"

#include "net/tls.h"

#include "api/resources.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ETCD_CONNS 64 /* request connections per member, opened as needed: etcd
                       * batches what is in flight into one WAL fsync */
#define ETCD_TIMEOUT_S 10 /* one request */
#define ETCD_WATCH_TIMEOUT_S 3600
#define ETCD_DOWN_NS (1 * NS_PER_SEC)
#define ETCD_PAGE 1000     /* keys per range page while loading */
#define ETCD_WRITE_TRIES 4 /* sends of one write, resolutions included */
#define COMPACT_REV_KEY "compact_rev_key"
#define API_PREFIX "/registry"

struct endpoint {
	char *url, *host;
	int port;
	bool tls;
	int64_t down_until; /* real_ns */
};

struct etcd;
struct call;

struct conn {
	struct etcd *e;
	int ep;
	struct evhttp_connection *evcon;
	struct bufferevent *bev;
	struct event *reap;
	struct call *calls; /* in flight on it */
	bool dead, watch;
	struct conn *next;
};

typedef void (*call_fn)(struct call *call, int status, json_t *body, const char *err);

struct call {
	struct etcd *e;
	struct conn *k;
	struct evhttp_request *req;
	char *path, *body;
	int tries;  /* members asked */
	bool retry; /* a read: safe to send again elsewhere */
	struct event *later; /* a retry after a pause (an election under way) */
	call_fn fn;
	void *arg;
	struct call *next;
};

/* A write on its way: the txn, and how to resolve a lost answer. */
struct write {
	struct etcd *e;
	struct store_op op;
	char *ekey;   /* base64 of the etcd key */
	char *evalue; /* base64 of the value (PUT) */
	int sends;
	store_done_fn done;
	void *arg;
};

struct watch {
	struct store_watcher w;
	bool active;
	int64_t next; /* the first revision not yet delivered */
	struct call *call;
	struct evbuffer *line;
	struct event *restart; /* a later turn: reconnect, or reset */
	bool reset;            /* the history is gone: the owner loads again */
	int backoff_ms;
	/* A member cut off from the quorum keeps its streams open and silent:
	 * writes answered elsewhere and not back through the watch within
	 * WATCH_STALL_NS move it. */
	int64_t answered;    /* the newest revision a write was answered at */
	int64_t answered_at; /* real_ns of the first answer the watch lacks */
	int64_t progress_at; /* real_ns of the watch's last delivery */
	struct event *stall; /* a real-time check, every second */
};

#define WATCH_STALL_NS (3 * NS_PER_SEC)

struct etcd {
	struct store base;
	struct loop *loop;
	struct endpoint *eps;
	int neps, cur;
	SSL_CTX *tls;
	char *prefix; /* "/registry" */
	struct conn *conns;
	struct watch watch;
	struct timer *compact;
	int64_t compact_every, compact_version, compact_rev;
	uint64_t writes;
	int connect_timeout_s;
	bool closing;
	size_t inflight;
};

/* ---- keys and numbers ------------------------------------------------------------ */

/* Network deadlines run on real time, never the simulated clock. */
static int64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* A gateway int64: a JSON string of digits, or absent (zero is omitted). */
static int64_t i64(const json_t *obj, const char *path)
{
	const json_t *v = jx_get(obj, path);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static char *b64s(const char *s)
{
	return b64_encode(s, strlen(s));
}

/*
 * Upstream's key layout: "<prefix>/<resource>/<namespace>/<name>" with the
 * resource's plural and no group, except the names upstream's registry
 * kept from its first days (nodes are "minions", services "services/specs",
 * endpoints "services/endpoints"). The cache names keys with the group
 * ("/registry/apps/deployments/..."); this maps one onto the other.
 */
struct key_map {
	char cache[96]; /* "/registry/apps/deployments/" */
	char etcd[64];  /* "deployments/" */
};

static struct key_map key_maps[64];
static size_t nkey_maps;

static void key_maps_init(void)
{
	static const struct {
		const char *plural, *etcd;
	} renamed[] = {{"nodes", "minions"},
	               {"services", "services/specs"},
	               {"endpoints", "services/endpoints"}};

	if (nkey_maps)
		return;
	for (size_t j = 0; j < resources_count && nkey_maps < 64; j++) {
		const struct resource *r = &resources[j];
		struct key_map *m = &key_maps[nkey_maps++];
		const char *name = r->plural;
		for (size_t i = 0; !*r->group && i < sizeof(renamed) / sizeof(renamed[0]); i++)
			if (!strcmp(r->plural, renamed[i].plural))
				name = renamed[i].etcd;
		snprintf(m->cache, sizeof(m->cache), "%s/%s%s%s/", API_PREFIX, r->group,
		         *r->group ? "/" : "", r->plural);
		snprintf(m->etcd, sizeof(m->etcd), "%s/", name);
	}
}

/* The etcd key of a cache key, base64. */
static char *etcd_key(const struct etcd *e, const char *key)
{
	size_t pl = strlen(API_PREFIX);
	char *k, *out;

	for (size_t i = 0; i < nkey_maps; i++) {
		size_t cl = strlen(key_maps[i].cache);
		if (!strncmp(key, key_maps[i].cache, cl)) {
			if (asprintf(&k, "%s/%s%s", e->prefix, key_maps[i].etcd, key + cl) < 0)
				abort();
			goto done;
		}
	}
	if (strncmp(key, API_PREFIX, pl))
		return b64s(key);
	if (asprintf(&k, "%s%s", e->prefix, key + pl) < 0)
		abort();
done:
	out = b64s(k);
	free(k);
	return out;
}

/* The cache key of an etcd key (raw bytes), or NULL when outside the prefix. */
static char *cache_key(const struct etcd *e, const unsigned char *k, size_t len)
{
	size_t pl = strlen(e->prefix), best = 0;
	const struct key_map *m = NULL;
	const char *rest;
	char *out;

	if (len <= pl || memcmp(k, e->prefix, pl) || k[pl] != '/' || memchr(k, 0, len))
		return NULL;
	rest = (const char *)k + pl + 1;
	/* The longest match: "services/endpoints/" before any shorter name. */
	for (size_t i = 0; i < nkey_maps; i++) {
		size_t el = strlen(key_maps[i].etcd);
		if (el > best && el <= len - pl - 1 && !memcmp(rest, key_maps[i].etcd, el))
			m = &key_maps[i], best = el;
	}
	if (m) {
		if (asprintf(&out, "%s%.*s", m->cache, (int)(len - pl - 1 - best), rest + best) < 0)
			abort();
		return out;
	}
	if (asprintf(&out, "%s%.*s", API_PREFIX, (int)(len - pl), (const char *)k + pl) < 0)
		abort();
	return out;
}

/* ---- connections ------------------------------------------------------------------- */

static void call_report(struct call *call, int status, json_t *body, const char *err);

static void conn_free(struct conn *k, const char *why)
{
	struct etcd *e = k->e;

	k->dead = true;
	evhttp_connection_set_closecb(k->evcon, NULL, NULL);
	for (struct conn **p = &e->conns; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	while (k->calls) {
		struct call *call = k->calls;
		k->calls = call->next;
		call->k = NULL;
		if (call->req)
			evhttp_cancel_request(call->req);
		call->req = NULL;
		call_report(call, 0, NULL, why);
	}
	event_free(k->reap);
	evhttp_connection_free(k->evcon);
	free(k);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	conn_free(arg, "connection closed");
}

/* Close on a later turn: never from inside libevent's callback for it. */
static void conn_retire(struct conn *k)
{
	if (k->dead)
		return;
	k->dead = true;
	event_active(k->reap, 0, 0);
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	conn_retire(arg);
}

static struct bufferevent *make_bev(struct etcd *e, struct event_base *base,
                                    const struct endpoint *ep)
{
	SSL *ssl;

	if (!ep->tls)
		return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!(ssl = SSL_new(e->tls)))
		abort();
	X509_VERIFY_PARAM_set_time(SSL_get0_param(ssl), (time_t)clock_now_sec());
	if (!X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep->host)) {
		SSL_set_tlsext_host_name(ssl, ep->host);
		X509_VERIFY_PARAM_set1_host(SSL_get0_param(ssl), ep->host, 0);
	}
	return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
	                                      BEV_OPT_CLOSE_ON_FREE);
}

static struct conn *conn_new(struct etcd *e, int ep, bool watch)
{
	struct conn *k = calloc(1, sizeof(*k));
	struct event_base *base = loop_base(e->loop);

	if (!k)
		abort();
	k->e = e;
	k->ep = ep;
	k->watch = watch;
	k->reap = event_new(base, -1, 0, on_reap, k);
	k->bev = make_bev(e, base, &e->eps[ep]);
	k->evcon = evhttp_connection_base_bufferevent_new(base, NULL, k->bev, e->eps[ep].host,
	                                                  (ev_uint16_t)e->eps[ep].port);
	evhttp_connection_set_retries(k->evcon, 0);
	evhttp_connection_set_timeout(k->evcon, watch ? ETCD_WATCH_TIMEOUT_S : ETCD_TIMEOUT_S);
	evhttp_connection_set_closecb(k->evcon, on_conn_close, k);
	k->next = e->conns;
	e->conns = k;
	return k;
}

static int conn_load(const struct conn *k)
{
	int n = 0;
	for (const struct call *c = k->calls; c; c = c->next)
		n++;
	return n;
}

/* The least busy request connection to member ep, or a new one. */
static struct conn *conn_pick(struct etcd *e, int ep)
{
	struct conn *best = NULL;
	int n = 0, best_load = 0;

	for (struct conn *k = e->conns; k; k = k->next) {
		int load;
		if (k->dead || k->watch || k->ep != ep)
			continue;
		n++;
		load = conn_load(k);
		if (!best || load < best_load)
			best = k, best_load = load;
	}
	if (!best || (best_load > 0 && n < ETCD_CONNS))
		best = conn_new(e, ep, false);
	return best;
}

static void conn_nodelay(struct conn *k)
{
	evutil_socket_t fd = bufferevent_getfd(k->bev);
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
}

/* ---- members ------------------------------------------------------------------------ */

static void watch_move(struct etcd *e, int ep);

/* The member to ask: the current one unless it is down, then the next up. */
static int endpoint_pick(struct etcd *e)
{
	int64_t now = real_ns();
	for (int i = 0; i < e->neps; i++) {
		int ep = (e->cur + i) % e->neps;
		if (e->eps[ep].down_until <= now) {
			e->cur = ep;
			return ep;
		}
	}
	/* All down: try the next in turn rather than none. */
	e->cur = (e->cur + 1) % e->neps;
	return e->cur;
}

static void endpoint_failed(struct etcd *e, int ep, const char *why)
{
	if (e->eps[ep].down_until <= real_ns())
		LOG_WARN("etcd: member %s failed (%s); trying the next", e->eps[ep].url, why);
	e->eps[ep].down_until = real_ns() + ETCD_DOWN_NS;
	if (e->cur == ep)
		e->cur = (ep + 1) % e->neps;
	watch_move(e, ep);
}

/* ---- requests -------------------------------------------------------------------------- */

static void on_reply(struct evhttp_request *req, void *arg);

/* The POST every request is: JSON body, to ep. evhttp_make_request's result. */
static int post(struct evhttp_connection *evcon, struct evhttp_request *req,
                const struct endpoint *ep, const char *path, const char *body)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char host[300], len[24];

	snprintf(host, sizeof(host), "%s:%d", ep->host, ep->port);
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Content-Type", "application/json");
	snprintf(len, sizeof(len), "%zu", strlen(body));
	evhttp_add_header(h, "Content-Length", len);
	evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	return evhttp_make_request(evcon, req, EVHTTP_REQ_POST, path);
}

/* Put call on connection k and send it; chunk: a stream's reader (watch). */
static void call_post(struct call *call, struct conn *k, void (*chunk)(struct evhttp_request *,
                                                                       void *))
{
	call->k = k;
	call->next = k->calls;
	k->calls = call;
	call->req = evhttp_request_new(on_reply, call);
	if (chunk)
		evhttp_request_set_chunked_cb(call->req, chunk);
	if (post(k->evcon, call->req, &call->e->eps[k->ep], call->path, call->body) < 0) {
		call->req = NULL; /* libevent freed it; the reap reports the failure */
		conn_retire(k);
		return;
	}
	conn_nodelay(k);
}

static void call_send(struct call *call)
{
	call_post(call, conn_pick(call->e, endpoint_pick(call->e)), NULL);
}

static void call_free(struct call *call)
{
	if (call->later)
		event_free(call->later);
	free(call->path);
	free(call->body);
	free(call);
}

static void call_detach(struct call *call)
{
	struct conn *k = call->k;
	if (!k)
		return;
	for (struct call **p = &k->calls; *p; p = &(*p)->next)
		if (*p == call) {
			*p = call->next;
			break;
		}
	call->k = NULL;
}

/* A call's end: again on the next member when that is safe, else its fn. */
/* Reads that failed everywhere are tried again this often, this many times:
 * a leader election (about a second with etcd's defaults) must not fail them. */
#define RETRY_PAUSE_MS 200
#define RETRY_PAUSES 25

static void on_later(evutil_socket_t fd, short what, void *arg)
{
	struct call *call = arg;
	struct etcd *e = call->e;

	(void)fd, (void)what;
	if (!e->closing) {
		call_send(call);
		return;
	}
	e->inflight--;
	call->fn(call, 0, NULL, "the store is closing");
	call_free(call);
}

static void call_report(struct call *call, int status, json_t *body, const char *err)
{
	struct etcd *e = call->e;
	bool failed = status == 0 || status >= 500;

	if (failed && call->retry && !e->closing && ++call->tries < e->neps + RETRY_PAUSES) {
		if (call->tries < e->neps) {
			call_send(call); /* the next member, at once */
			return;
		}
		if (!call->later)
			call->later = evtimer_new(loop_base(e->loop), on_later, call);
		evtimer_add(call->later, &(struct timeval){.tv_usec = RETRY_PAUSE_MS * 1000});
		return;
	}
	e->inflight--;
	call->fn(call, status, body, err);
	call_free(call);
}

static void on_reply(struct evhttp_request *req, void *arg)
{
	struct call *call = arg;
	struct conn *k = call->k;
	int status = req ? evhttp_request_get_response_code(req) : 0;
	json_t *body = NULL;
	char why[128];

	call->req = NULL;
	call_detach(call);
	if (status == 0) {
		snprintf(why, sizeof(why), "connection to %s failed or was closed",
		         call->e->eps[k->ep].url);
		conn_retire(k);
		endpoint_failed(call->e, k->ep, why);
		call_report(call, 0, NULL, why);
		return;
	}
	{
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);
		if (len)
			body = jx_parse((const char *)evbuffer_pullup(in, (ev_ssize_t)len), len);
	}
	if (status >= 500) {
		snprintf(why, sizeof(why), "%s", jx_str(body, "message") ?: "server error");
		endpoint_failed(call->e, k->ep, why);
	}
	call_report(call, status, body, status >= 500 ? why : NULL);
	json_decref(body);
}

/* POST body (stolen) to path on the current member; fn runs once with the answer. */
static void request(struct etcd *e, const char *path, char *body, bool retry, call_fn fn, void *arg)
{
	struct call *call = calloc(1, sizeof(*call));
	if (!call || !(call->path = strdup(path)))
		abort();
	call->e = e;
	call->body = body;
	call->retry = retry;
	call->fn = fn;
	call->arg = arg;
	e->inflight++;
	call_send(call);
}

/* The gateway's error text: its message, or the HTTP status. */
static const char *error_text(int status, const json_t *body, const char *err, char *buf, size_t n)
{
	if (err)
		return err;
	if (jx_str(body, "message"))
		return jx_str(body, "message");
	snprintf(buf, n, "etcd answered HTTP %d", status);
	return buf;
}

/* ---- writes -------------------------------------------------------------------------------- */

static void write_send(struct write *w);

static void note_answered(struct etcd *e, int64_t rev)
{
	struct watch *wa = &e->watch;
	if (rev < wa->next)
		return; /* the watch has it */
	if (wa->answered < wa->next)
		wa->answered_at = real_ns();
	if (rev > wa->answered)
		wa->answered = rev;
}

static void write_finish(struct write *w, int err, const char *msg, int64_t rev)
{
	if (err)
		err_set(err, "%s", msg);
	else
		w->e->writes++;
	if (rev > 0)
		note_answered(w->e, rev);
	w->done(w->arg, err, rev);
	free(w->op.key);
	free(w->op.value);
	free(w->ekey);
	free(w->evalue);
	free(w);
}

/* The write's answer was lost: what does the key hold now? */
static void on_resolve(struct call *call, int status, json_t *body, const char *err)
{
	struct write *w = call->arg;
	const json_t *kv = json_array_get(json_object_get(body, "kvs"), 0);
	int64_t mod = i64(kv, "mod_revision"), head = i64(body, "header.revision");
	char buf[64];

	if (status != 200) {
		write_finish(w, ERR_UNAVAILABLE, error_text(status, body, err, buf, sizeof(buf)),
		             0);
		return;
	}
	if (w->op.type == STORE_PUT && kv && mod > w->op.expect && jx_str(kv, "value") &&
	    !strcmp(jx_str(kv, "value"), w->evalue)) {
		write_finish(w, 0, NULL, mod); /* applied before its answer was lost */
	} else if (w->op.type == STORE_DELETE && !kv && w->op.expect) {
		write_finish(w, 0, NULL, head); /* gone: ours, or a delete as good */
	} else if (mod == w->op.expect && w->sends < ETCD_WRITE_TRIES) {
		write_send(w); /* never applied */
	} else if (mod == w->op.expect) {
		write_finish(w, ERR_UNAVAILABLE, "etcdserver: request timed out", 0);
	} else {
		write_finish(w, ERR_CONFLICT, "the key changed under the write", head);
	}
}

static void on_txn(struct call *call, int status, json_t *body, const char *err)
{
	struct write *w = call->arg;
	char buf[64];

	if (status == 200) {
		int64_t rev = i64(body, "header.revision");
		const json_t *r = json_array_get(json_object_get(body, "responses"), 0);
		const json_t *kv = json_array_get(jx_get(r, "response_range.kvs"), 0);
		if (jx_bool(body, "succeeded", false))
			write_finish(w, 0, NULL, rev);
		else if (w->sends > 1 && w->op.type == STORE_PUT && jx_str(kv, "value") &&
		         !strcmp(jx_str(kv, "value"), w->evalue))
			/* A send again after a lost answer: the first one had landed
			 * after all (it was still in raft when we looked). */
			write_finish(w, 0, NULL, i64(kv, "mod_revision"));
		else if (w->sends > 1 && w->op.type == STORE_DELETE && !kv)
			write_finish(w, 0, NULL, rev);
		else
			write_finish(w, ERR_CONFLICT, "the key changed under the write", rev);
		return;
	}
	if (status == 0 || status >= 500) {
		/* Applied or not? Ask the key (another member, if this one is down). */
		char *q;
		if (asprintf(&q, "{\"key\":\"%s\"}", w->ekey) < 0)
			abort();
		request(w->e, "/v3/kv/range", q, true, on_resolve, w);
		return;
	}
	/* 429: etcd is out of room or overloaded; nothing was applied. */
	if (status == 429) {
		write_finish(w, ERR_UNAVAILABLE, error_text(status, body, err, buf, sizeof(buf)),
		             0);
		return;
	}
	/* 4xx: the request itself was refused (too large, malformed). */
	if (status == 413 ||
	    (jx_str(body, "message") && strstr(jx_str(body, "message"), "too large")))
		write_finish(w, ERR_TOOLARGE, "etcdserver: request is too large", 0);
	else
		write_finish(w, ERR_INVALID, error_text(status, body, err, buf, sizeof(buf)), 0);
}

static void write_send(struct write *w)
{
	char *body;
	int n;

	w->sends++;
	if (w->op.type == STORE_PUT)
		n = asprintf(
		    &body,
		    "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":\"EQUAL\","
		    "\"mod_revision\":\"%" PRId64 "\"}],"
		    "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}],"
		    "\"failure\":[{\"request_range\":{\"key\":\"%s\"%s}}]}",
		    w->ekey, w->op.expect, w->ekey, w->evalue, w->ekey,
		    /* A send again reads the value: was the first one ours? */
		    w->sends > 1 ? "" : ",\"keys_only\":true");
	else
		n = asprintf(
		    &body,
		    "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":\"EQUAL\","
		    "\"mod_revision\":\"%" PRId64 "\"}],"
		    "\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}}],"
		    "\"failure\":[{\"request_range\":{\"key\":\"%s\",\"keys_only\":true}}]}",
		    w->ekey, w->op.expect, w->ekey, w->ekey);
	if (n < 0)
		abort();
	request(w->e, "/v3/kv/txn", body, false, on_txn, w);
}

/* One txn per op: the cache writes one key at a time. */
static void etcd_write(struct store *s, struct store_op *ops, size_t n, store_done_fn done,
                       void *arg)
{
	struct etcd *e = (struct etcd *)s;
	struct write *w = calloc(1, sizeof(*w));

	if (!w)
		abort();
	CUBE_ASSERT(n == 1);
	w->e = e;
	w->op = ops[0];
	free(ops);
	w->done = done;
	w->arg = arg;
	w->ekey = etcd_key(e, w->op.key);
	if (w->op.type == STORE_PUT)
		w->evalue = b64_encode(w->op.value, w->op.len);
	write_send(w);
}

/* ---- the watch ------------------------------------------------------------------------------- */

static void watch_start(struct etcd *e);

static void watch_deliver(struct etcd *e, const json_t *events)
{
	struct watch *wa = &e->watch;
	size_t i;
	const json_t *ev;
	int64_t last = 0;

	json_array_foreach(events, i, ev)
	{
		const json_t *kv = json_object_get(ev, "kv");
		const char *type = jx_str(ev, "type");
		struct store_event se = {0};
		unsigned char *k, *v = NULL;
		size_t klen = 0, vlen = 0;
		char *key;

		se.rev = i64(kv, "mod_revision");
		if (se.rev < wa->next)
			continue; /* seen before a reconnect */
		if (!(k = b64_decode(jx_str(kv, "key"), &klen)))
			continue;
		key = cache_key(e, k, klen);
		free(k);
		se.type = type && !strcmp(type, "DELETE") ? STORE_DELETE : STORE_PUT;
		se.key = key;
		if (key && se.type == STORE_PUT) {
			/* An empty value is omitted by the gateway. */
			v = jx_str(kv, "value") ? b64_decode(jx_str(kv, "value"), &vlen) : NULL;
			se.value = v ? (const char *)v : "";
			se.len = vlen;
		}
		wa->w.event(wa->w.arg, &se);
		free(key);
		free(v);
		if (se.rev > last)
			last = se.rev;
	}
	/* A revision's events come in one message: the next starts after it. */
	if (last) {
		wa->next = last + 1;
		wa->progress_at = real_ns();
	}
}

static void on_watch_line(struct etcd *e, const char *line, size_t len)
{
	json_t *msg = jx_parse(line, len), *res = json_object_get(msg, "result");
	struct watch *wa = &e->watch;

	if (!res) {
		if (msg)
			LOG_WARN("etcd: watch: %s", jx_str(msg, "error.message") ?: line);
		json_decref(msg);
		return;
	}
	if (i64(res, "compact_revision")) {
		LOG_WARN("etcd: watch from revision %" PRId64 " is gone (compacted at %" PRId64
		         "): reloading",
		         wa->next, i64(res, "compact_revision"));
		wa->reset = true;
		event_active(wa->restart, 0, 0);
	} else if (jx_bool(res, "canceled", false)) {
		/* Canceled for another reason (the member is leaving, no
		 * leader): the stream stays open but carries nothing more. */
		LOG_WARN("etcd: watch canceled by %s (%s); resuming elsewhere",
		         e->eps[wa->call && wa->call->k ? wa->call->k->ep : e->cur].url,
		         jx_str(res, "cancel_reason") ?: "no reason given");
		if (wa->call && wa->call->k)
			endpoint_failed(e, wa->call->k->ep, "watch canceled");
		else
			event_active(wa->restart, 0, 0);
	} else {
		wa->backoff_ms = 0; /* a healthy stream */
		watch_deliver(e, json_object_get(res, "events"));
	}
	json_decref(msg);
}

static void on_watch_chunk(struct evhttp_request *req, void *arg)
{
	struct call *call = arg;
	struct etcd *e = call->e;
	struct watch *wa = &e->watch;
	char *line;
	size_t len;

	if (wa->call != call)
		return;
	evbuffer_add_buffer(wa->line, evhttp_request_get_input_buffer(req));
	while (wa->call == call && !wa->reset &&
	       (line = evbuffer_readln(wa->line, &len, EVBUFFER_EOL_LF))) {
		if (len)
			on_watch_line(e, line, len);
		free(line);
	}
}

/* The stream ended (or its connection failed): start again later. */
static void on_watch_end(struct call *call, int status, json_t *body, const char *err)
{
	struct etcd *e = call->e;
	struct watch *wa = &e->watch;

	(void)body;
	if (wa->call != call)
		return; /* replaced or stopped */
	wa->call = NULL;
	if (!wa->active)
		return;
	LOG_WARN("etcd: watch stream ended (%s); resuming from revision %" PRId64,
	         err             ? err
	         : status == 200 ? "closed"
	                         : "refused",
	         wa->next);
	wa->backoff_ms =
	    wa->backoff_ms ? (wa->backoff_ms * 2 > 2000 ? 2000 : wa->backoff_ms * 2) : 100;
	event_add(wa->restart, &(struct timeval){.tv_sec = wa->backoff_ms / 1000,
	                                         .tv_usec = (wa->backoff_ms % 1000) * 1000});
}

static void watch_stop_stream(struct etcd *e)
{
	struct watch *wa = &e->watch;
	struct call *call = wa->call;

	wa->call = NULL;
	if (call && call->k)
		conn_retire(call->k); /* its end is reported, and ignored */
	evbuffer_drain(wa->line, evbuffer_get_length(wa->line));
}

static void on_watch_restart(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct watch *wa = &e->watch;

	(void)fd, (void)what;
	if (!wa->active)
		return;
	if (wa->reset) {
		wa->reset = false;
		watch_stop_stream(e);
		wa->active = false;
		wa->w.reset(wa->w.arg); /* loads, then watches again */
		return;
	}
	watch_start(e);
}

static void on_stall_check(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct watch *wa = &e->watch;

	(void)fd, (void)what;
	int64_t since = wa->answered_at > wa->progress_at ? wa->answered_at : wa->progress_at;

	/* Behind and not moving: a watch that lags under load but delivers is fine. */
	if (!wa->active || !wa->call || !wa->call->k || wa->answered < wa->next ||
	    real_ns() - since < WATCH_STALL_NS)
		return;
	LOG_WARN("etcd: the watch on %s is at revision %" PRId64
	         ", writes were answered at %" PRId64 "; moving it",
	         e->eps[wa->call->k->ep].url, wa->next - 1, wa->answered);
	wa->answered_at = real_ns();
	endpoint_failed(e, wa->call->k->ep, "watch fell behind");
}

/* A member marked down: a watch on it moves now, not when TCP notices. */
static void watch_move(struct etcd *e, int ep)
{
	struct watch *wa = &e->watch;
	if (wa->active && wa->call && wa->call->k && wa->call->k->ep == ep) {
		watch_stop_stream(e);
		event_active(wa->restart, 0, 0);
	}
}

static void watch_start(struct etcd *e)
{
	struct watch *wa = &e->watch;
	struct call *call = calloc(1, sizeof(*call));
	int ep = endpoint_pick(e);

	watch_stop_stream(e);
	if (!call || !(call->path = strdup("/v3/watch")))
		abort();
	/* The whole keyspace ("\0" to "\0"), so that every revision arrives. */
	if (asprintf(&call->body,
	             "{\"create_request\":{\"key\":\"AA==\",\"range_end\":\"AA==\","
	             "\"start_revision\":\"%" PRId64 "\"}}",
	             wa->next) < 0)
		abort();
	call->e = e;
	call->fn = on_watch_end;
	e->inflight++;
	wa->call = call;
	call_post(call, conn_new(e, ep, true), on_watch_chunk);
}

static void etcd_watch(struct store *s, int64_t after, const struct store_watcher *w)
{
	struct etcd *e = (struct etcd *)s;
	struct watch *wa = &e->watch;

	wa->w = *w;
	wa->active = true;
	if (!wa->stall) {
		wa->stall = event_new(loop_base(e->loop), -1, EV_PERSIST, on_stall_check, e);
		event_add(wa->stall, &(struct timeval){.tv_sec = 1});
	}
	wa->reset = false;
	wa->next = after + 1;
	wa->backoff_ms = 0;
	watch_start(e);
}

/* ---- reads -------------------------------------------------------------------------------------
 */

struct rev_ask {
	void (*cb)(void *arg, int err, int64_t rev);
	void *arg;
};

static void on_current_rev(struct call *call, int status, json_t *body, const char *err)
{
	struct rev_ask *a = call->arg;
	char buf[64];

	if (status == 200) {
		a->cb(a->arg, 0, i64(body, "header.revision"));
	} else {
		err_set(ERR_UNAVAILABLE, "%s", error_text(status, body, err, buf, sizeof(buf)));
		a->cb(a->arg, ERR_UNAVAILABLE, 0);
	}
	free(a);
}

static void etcd_current_rev(struct store *s, void (*cb)(void *arg, int err, int64_t rev),
                             void *arg)
{
	struct etcd *e = (struct etcd *)s;
	struct rev_ask *a = calloc(1, sizeof(*a));
	char *key = b64s(COMPACT_REV_KEY), *body;

	if (!a)
		abort();
	a->cb = cb;
	a->arg = arg;
	if (asprintf(&body, "{\"key\":\"%s\",\"count_only\":true}", key) < 0)
		abort();
	free(key);
	request(e, "/v3/kv/range", body, true, on_current_rev, a);
}

/* ---- loading (blocking, on a private base) ------------------------------------------------------
 */

struct sync_reply {
	struct event_base *base;
	int status;
	json_t *body;
};

static void on_sync_reply(struct evhttp_request *req, void *arg)
{
	struct sync_reply *sr = arg;
	sr->status = req ? evhttp_request_get_response_code(req) : 0;
	if (sr->status) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);
		sr->body =
		    len ? jx_parse((const char *)evbuffer_pullup(in, (ev_ssize_t)len), len) : NULL;
	}
	event_base_loopexit(sr->base, NULL);
}

/* POST body to member ep and wait: the HTTP status (0: transport), *out the body. */
static int sync_post(struct etcd *e, int ep, const char *path, const char *body, json_t **out)
{
	struct sync_reply sr = {.base = event_base_new()};
	struct bufferevent *bev = make_bev(e, sr.base, &e->eps[ep]);
	struct evhttp_connection *evcon = evhttp_connection_base_bufferevent_new(
	    sr.base, NULL, bev, e->eps[ep].host, (ev_uint16_t)e->eps[ep].port);
	struct evhttp_request *req = evhttp_request_new(on_sync_reply, &sr);

	evhttp_connection_set_retries(evcon, 0);
	evhttp_connection_set_timeout(evcon, ETCD_TIMEOUT_S);
	if (post(evcon, req, &e->eps[ep], path, body) == 0)
		event_base_dispatch(sr.base);
	evhttp_connection_free(evcon);
	event_base_free(sr.base);
	*out = sr.body;
	return sr.status;
}

/* Every key under the prefix at one revision, page by page, from member ep. */
static int load_from(struct etcd *e, int ep, store_each_fn each, void *arg, int64_t *rev)
{
	char *start, *end, *from = NULL, *body;
	int64_t at = 0;
	bool more = true;
	int rc = 0;

	if (asprintf(&start, "%s/", e->prefix) < 0 || asprintf(&end, "%s0", e->prefix) < 0)
		abort();
	from = b64s(start);
	while (more && rc == 0) {
		json_t *resp = NULL, *kv;
		char *rend = b64s(end);
		size_t i;
		int status;

		if (asprintf(&body,
		             "{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"%d\",\"revision\":"
		             "\"%" PRId64 "\"}",
		             from, rend, ETCD_PAGE, at) < 0)
			abort();
		free(rend);
		status = sync_post(e, ep, "/v3/kv/range", body, &resp);
		free(body);
		if (status != 200) {
			char buf[64];
			rc = err_set(ERR_UNAVAILABLE, "%s: %s", e->eps[ep].url,
			             error_text(status, resp, status ? NULL : "connection failed",
			                        buf, sizeof(buf)));
			json_decref(resp);
			break;
		}
		if (!at)
			at = i64(resp, "header.revision");
		more = jx_bool(resp, "more", false);
		json_array_foreach(json_object_get(resp, "kvs"), i, kv)
		{
			size_t klen = 0, vlen = 0;
			unsigned char *k = b64_decode(jx_str(kv, "key"), &klen);
			unsigned char *v =
			    jx_str(kv, "value") ? b64_decode(jx_str(kv, "value"), &vlen) : NULL;
			char *key = k ? cache_key(e, k, klen) : NULL;
			if (key)
				each(arg, key, v ? (const char *)v : "", vlen,
				     i64(kv, "mod_revision"));
			if (more && k) {
				/* The next page starts just after the last key. */
				unsigned char *next = malloc(klen + 1);
				if (!next)
					abort();
				memcpy(next, k, klen);
				next[klen] = 0;
				free(from);
				from = b64_encode(next, klen + 1);
				free(next);
			}
			free(key);
			free(k);
			free(v);
		}
		json_decref(resp);
	}
	free(from);
	free(start);
	free(end);
	if (rc == 0)
		*rev = at;
	return rc;
}

static int etcd_load(struct store *s, store_each_fn each, void *arg, int64_t *rev)
{
	struct etcd *e = (struct etcd *)s;
	int64_t give_up = real_ns() + (int64_t)e->connect_timeout_s * NS_PER_SEC;

	for (int attempt = 0;; attempt++) {
		int ep = (e->cur + attempt) % e->neps;
		if (load_from(e, ep, each, arg, rev) == 0) {
			e->cur = ep;
			return 0;
		}
		LOG_WARN("etcd: %s", err_msg());
		if (real_ns() >= give_up)
			return err_set(ERR_UNAVAILABLE, "etcd: no member of %d answered within %ds",
			               e->neps, e->connect_timeout_s);
		if ((attempt + 1) % e->neps == 0)
			nanosleep(&(struct timespec){.tv_nsec = 500 * 1000 * 1000}, NULL);
	}
}

/* ---- compaction ---------------------------------------------------------------------------------
 */

static void on_compacted(struct call *call, int status, json_t *body, const char *err)
{
	struct etcd *e = call->e;
	int64_t rev = (int64_t)(intptr_t)call->arg;
	char buf[64];

	if (status == 200)
		LOG_INFO("etcd: compacted rev (%" PRId64 "), endpoints (%s)", rev,
		         e->eps[e->cur].url);
	else
		LOG_ERROR("etcd: compact (%" PRId64 ") failed: %s", rev,
		          error_text(status, body, err, buf, sizeof(buf)));
}

static void on_compact_txn(struct call *call, int status, json_t *body, const char *err)
{
	struct etcd *e = call->e;
	int64_t cur = i64(body, "header.revision");
	char buf[64];

	if (e->closing)
		return;
	timer_after(e->compact, e->compact_every);
	if (status != 200) {
		LOG_ERROR("etcd: compact: %s", error_text(status, body, err, buf, sizeof(buf)));
		return;
	}
	if (!jx_bool(body, "succeeded", false)) {
		/* Another server recorded this interval: take its count. */
		const json_t *r = json_array_get(json_object_get(body, "responses"), 0);
		e->compact_version =
		    i64(json_array_get(jx_get(r, "response_range.kvs"), 0), "version");
		e->compact_rev = cur;
		return;
	}
	e->compact_version++;
	if (e->compact_rev) {
		char *q;
		if (asprintf(&q, "{\"revision\":\"%" PRId64 "\"}", e->compact_rev) < 0)
			abort();
		request(e, "/v3/kv/compaction", q, false, on_compacted,
		        (void *)(intptr_t)e->compact_rev);
	}
	e->compact_rev = cur;
}

static void on_compact_tick(void *arg)
{
	struct etcd *e = arg;
	char *key = b64s(COMPACT_REV_KEY), *val, *body, rev[24];

	snprintf(rev, sizeof(rev), "%" PRId64, e->compact_rev);
	val = b64s(rev);
	if (asprintf(&body,
	             "{\"compare\":[{\"key\":\"%s\",\"target\":\"VERSION\",\"result\":\"EQUAL\","
	             "\"version\":\"%" PRId64 "\"}],"
	             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}],"
	             "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
	             key, e->compact_version, key, val, key) < 0)
		abort();
	free(key);
	free(val);
	request(e, "/v3/kv/txn", body, false, on_compact_txn, NULL);
}

/* ---- the store
 * ------------------------------------------------------------------------------------ */

static void etcd_stats(struct store *s, uint64_t *writes, uint64_t *commits)
{
	struct etcd *e = (struct etcd *)s;
	*writes = *commits = e->writes;
}

static void etcd_close(struct store *s)
{
	struct etcd *e = (struct etcd *)s;
	int64_t give_up;

	if (!e)
		return;
	e->closing = true;
	e->watch.active = false;
	watch_stop_stream(e);
	if (e->compact)
		timer_cancel(e->compact);
	/* Writes in flight get their answers (or time out) first. */
	give_up = real_ns() + 5 * NS_PER_SEC;
	while (e->inflight && real_ns() < give_up)
		event_base_loop(loop_base(e->loop), EVLOOP_ONCE | EVLOOP_NONBLOCK),
		    nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
	while (e->conns)
		conn_free(e->conns, "the store is closing");
	timer_free(e->compact);
	if (e->watch.restart)
		event_free(e->watch.restart);
	if (e->watch.stall)
		event_free(e->watch.stall);
	if (e->watch.line)
		evbuffer_free(e->watch.line);
	for (int i = 0; i < e->neps; i++) {
		free(e->eps[i].url);
		free(e->eps[i].host);
	}
	free(e->eps);
	SSL_CTX_free(e->tls);
	free(e->prefix);
	free(e);
}

static const struct store_ops etcd_ops = {
    .load = etcd_load,
    .write = etcd_write,
    .stats = etcd_stats,
    .close = etcd_close,
    .watch = etcd_watch,
    .current_rev = etcd_current_rev,
};

static int parse_servers(struct etcd *e, const char *servers)
{
	char *list = strdup(servers ? servers : ""), *save = NULL;

	if (!list)
		abort();
	for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
		struct evhttp_uri *uri = evhttp_uri_parse(u);
		const char *scheme = uri ? evhttp_uri_get_scheme(uri) : NULL;
		const char *host = uri ? evhttp_uri_get_host(uri) : NULL;
		struct endpoint *ep;

		if (!scheme || !host || (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
			evhttp_uri_free(uri);
			free(list);
			return err_set(ERR_INVALID,
			               "--etcd-servers: \"%s\" is not an http:// or https:// URL",
			               u);
		}
		if (!(e->eps = realloc(e->eps, (size_t)(e->neps + 1) * sizeof(*e->eps))))
			abort();
		ep = &e->eps[e->neps++];
		memset(ep, 0, sizeof(*ep));
		ep->url = strdup(u);
		ep->host = strdup(host);
		ep->tls = !strcmp(scheme, "https");
		ep->port = evhttp_uri_get_port(uri) > 0 ? evhttp_uri_get_port(uri) : 2379;
		evhttp_uri_free(uri);
	}
	free(list);
	if (!e->neps)
		return err_set(ERR_INVALID, "--etcd-servers must be specified");
	return 0;
}

/* The TLS context for https members: --etcd-cafile, --etcd-certfile/keyfile. */
static int make_tls(struct etcd *e, const struct store_etcd_opts *o)
{
	char *ca = NULL, *cert = NULL, *key = NULL;
	int rc = 0;

	size_t n;

	if ((o->cafile && (rc = file_read(o->cafile, &ca, &n, 1 << 20)) < 0) ||
	    (o->certfile && (rc = file_read(o->certfile, &cert, &n, 1 << 20)) < 0) ||
	    (o->keyfile && (rc = file_read(o->keyfile, &key, &n, 1 << 20)) < 0))
		rc = err_wrap(rc, "etcd TLS");
	else if (!(e->tls = tls_client_ctx(ca, cert, key)))
		rc = err_set(ERR_INVALID, "etcd TLS: bad --etcd-cafile, --etcd-certfile or "
		                          "--etcd-keyfile");
	free(ca);
	free(cert);
	free(key);
	return rc;
}

struct store *store_etcd_open(const struct store_etcd_opts *o, struct loop *loop)
{
	struct etcd *e = calloc(1, sizeof(*e));
	const char *prefix = o->prefix && *o->prefix ? o->prefix : API_PREFIX;
	bool tls = false;

	if (!e)
		abort();
	e->base.ops = &etcd_ops;
	e->loop = loop;
	key_maps_init();
	e->prefix = strdup(prefix);
	/* "/registry/" and "/registry" are one prefix. */
	if (strlen(e->prefix) > 1 && e->prefix[strlen(e->prefix) - 1] == '/')
		e->prefix[strlen(e->prefix) - 1] = 0;
	e->connect_timeout_s = o->connect_timeout_s > 0 ? o->connect_timeout_s : 60;
	e->watch.line = evbuffer_new();
	e->watch.restart = event_new(loop_base(loop), -1, 0, on_watch_restart, e);
	if (parse_servers(e, o->servers) < 0)
		goto fail;
	for (int i = 0; i < e->neps; i++)
		tls |= e->eps[i].tls;
	if (tls && make_tls(e, o) < 0)
		goto fail;
	e->compact_every = o->compaction_interval_ns;
	if (e->compact_every > 0) {
		e->compact = loop_timer(loop, on_compact_tick, e);
		timer_after(e->compact, e->compact_every);
	}
	return &e->base;
fail:
	etcd_close(&e->base);
	return NULL;
}
