#include "apiserver/objects.h"

#include "api/status.h"
#include "net/h2.h"
#include "net/tls.h"

#include "base/alloc.h"
#include "base/blob.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/sbuf.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <sys/queue.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>

void apiserver_opts_default(struct apiserver_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->bind_address = "0.0.0.0";
	o->secure_port = 6443;
	o->data_dir = "/var/lib/cube";
	o->sync = STORE_SYNC_NORMAL;
	o->enable_bootstrap_token_auth = true;
	o->not_ready_toleration_s = 300;
	o->unreachable_toleration_s = 300;
	o->max_body = 3 << 20;
	/* Each event holds two versions of an object: 10,000 bound the memory
	 * (bench/: 100,000 kept 245 MiB alive and doubled malloc's share). */
	o->watch_window = 10000;
	o->etcd_opts.prefix = "/registry";
	o->etcd_opts.compaction_interval_ns = 5 * 60 * NS_PER_SEC; /* upstream's 5m0s */
}

/* ---- replying ------------------------------------------------------------- */

/* The verb of apiserver_request_total and its latency, as upstream's
 * routes name it: writes by their HTTP method (POST, PUT, PATCH, DELETE;
 * dashboards select writes with verb=~"POST|PUT|PATCH|DELETE"), a
 * server-side apply APPLY (cleanVerb), reads GET, LIST and WATCH.
 * Authorization's verbs (create, update) stay authorization's. */
static const char *metric_verb(const struct req *r, const char *upper)
{
	if (!r->verb)
		return upper;
	if (!strcmp(r->verb, "create"))
		return "POST";
	if (!strcmp(r->verb, "update"))
		return "PUT";
	if (!strcmp(r->verb, "patch"))
		return r->apply ? "APPLY" : "PATCH";
	return upper;
}

static void observe(struct req *r)
{
	struct apiserver *s = r->s;
	const char *group = r->res ? r->res->group : "", *version = r->res ? r->res->version : "";
	const char *resource = r->res ? r->res->plural : "", *sub = r->sub ? r->sub->name : "";
	const char *scope = !r->res ? "" : r->name ? "resource" : r->ns ? "namespace" : "cluster";
	const char *verb = r->verb ? r->verb : "", *mverb;
	char code[8], upper[24];
	size_t i;

	for (i = 0; verb[i] && i < sizeof(upper) - 1; i++)
		upper[i] = (char)(verb[i] >= 'a' && verb[i] <= 'z' ? verb[i] - 32 : verb[i]);
	upper[i] = '\0';
	snprintf(code, sizeof(code), "%d", r->code);
	mverb = metric_verb(r, upper);
	metrics_inc(metrics_with(s->m_requests, mverb, group, version, resource, sub, scope,
				 "apiserver", code));
	if (!r->streaming)
		metrics_observe(metrics_with(s->m_latency, mverb, group, version, resource, sub,
					     scope, "apiserver"),
				(double)(clock_mono() - r->start_ns) / 1e9);
	if (log_verbosity >= 3) {
		char peer[64];
		LOG_V(3, "\"HTTP\" verb=\"%s\" URI=\"%s\" latency=\"%.3fms\" userAgent=\"%s\" "
			 "audit-ID=\"\" srcIP=\"%s\" resp=%d",
		      upper, r->gone ? r->path : r->tp->target(r),
		      (double)(clock_mono() - r->start_ns) / 1e6, req_header(r, "User-Agent") ?: "",
		      r->gone ? "" : r->tp->peer(r, peer, sizeof(peer)), r->code);
	}
}

/* Every request ends here: the metrics count it, the transport forgets it
 * (and may free what r's headers point into). */
static void req_done(struct req *r)
{
	observe(r);
	if (!r->gone)
		r->tp->release(r);
	else if (r->tp->forget)
		r->tp->forget(r);
	req_free(r);
}

const char *req_header(struct req *r, const char *name)
{
	return r->gone ? NULL : evhttp_find_header(r->in_headers, name);
}

void req_set_header(struct req *r, const char *name, const char *value)
{
	if (!r->gone)
		evhttp_add_header(r->out_headers, name, value);
}

void req_client_gone(struct req *r)
{
	r->gone = true;
	if (r->on_gone)
		r->on_gone(r->on_gone_arg);
}

void req_stream_start(struct req *r, const char *content_type)
{
	r->streaming = true;
	req_set_header(r, "Content-Type", content_type);
	if (!r->gone)
		r->tp->stream_start(r);
}

void req_stream_send(struct req *r, const char *data, size_t n)
{
	struct evbuffer *buf;

	if (r->gone)
		return;
	buf = evbuffer_new();
	evbuffer_add(buf, data, n);
	r->tp->stream_chunk(r, buf);
	evbuffer_free(buf);
}

void req_stream_send_buffer(struct req *r, struct evbuffer *data)
{
	if (!r->gone)
		r->tp->stream_chunk(r, data);
}

size_t req_stream_unsent(struct req *r)
{
	return r->gone ? 0 : r->tp->stream_unsent(r);
}

void req_stream_end(struct req *r, int drain_s)
{
	if (!r->gone)
		r->tp->stream_end(r, drain_s);
	r->gone = true;
}

void req_reply_bytes(struct req *r, int code, const char *ct, const char *body, size_t len)
{
	struct evbuffer *out = evbuffer_new();
	evbuffer_add(out, body, len);
	if (ct)
		req_set_header(r, "Content-Type", ct);
	if (!r->gone)
		r->tp->reply(r, code, out);
	evbuffer_free(out);
	r->code = code;
	req_done(r);
}

static void reply_text(struct req *r, int code, const char *ct, const char *text)
{
	req_reply_bytes(r, code, ct, text, strlen(text));
}

/* A JSON reply's headers, as every reply of an object carries them. */
static void json_headers(struct req *r)
{
	if (!evhttp_find_header(r->out_headers, "Content-Type"))
		req_set_header(r, "Content-Type", "application/json");
	req_set_header(r, "Cache-Control", "no-cache, private");
}

void req_reply(struct req *r, int code, json_t *body)
{
	r->code = code;
	/* A stream's reply went at its start: this only counts it. */
	if (!r->gone && !r->streaming) {
		struct evbuffer *out = evbuffer_new();
		char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

		json_headers(r);
		if (text) {
			evbuffer_add(out, text, strlen(text));
			evbuffer_add(out, "\n", 1);
		}
		r->tp->reply(r, code, out);
		evbuffer_free(out);
		free(text);
	}
	json_decref(body);
	req_done(r);
}

void req_reply_json_buffer(struct req *r, int code, struct evbuffer *body)
{
	r->code = code;
	if (!r->gone && !r->streaming) {
		json_headers(r);
		evbuffer_add(body, "\n", 1);
		r->tp->reply(r, code, body);
	}
	req_done(r);
}

void req_reply_json(struct req *r, int code, struct blob *json)
{
	struct evbuffer *out = evbuffer_new();
	blob_to_evbuffer(json, out);
	req_reply_json_buffer(r, code, out);
	evbuffer_free(out);
}

void req_fail_status(struct req *r, json_t *status)
{
	int code = (int)json_integer_value(json_object_get(status, "code"));
	req_reply(r, code ? code : 500, status);
}

void req_fail(struct req *r, int err, const char *message)
{
	req_fail_status(r, status_failure(err, message, NULL, NULL, NULL));
}

void req_warn(struct req *r, const char *text)
{
	struct sbuf b = SBUF_INIT;
	struct evkeyvalq *h;
	struct evkeyval *kv;

	if (r->gone)
		return;
	sbuf_add(&b, "299 - \"");
	for (const char *p = text; *p; p++) {
		if (*p == '"' || *p == '\\')
			sbuf_addc(&b, '\\');
		sbuf_addc(&b, *p);
	}
	sbuf_addc(&b, '"');
	h = r->out_headers;
	TAILQ_FOREACH(kv, h, next)
	{
		if (!strcasecmp(kv->key, "Warning") && !strcmp(kv->value, b.s)) {
			sbuf_free(&b);
			return;
		}
	}
	evhttp_add_header(h, "Warning", b.s);
	sbuf_free(&b);
}

void req_not_found(struct req *r)
{
	char q[128], msg[512];

	if (refresh_and_retry(r))
		return;
	resource_qualified(r->res, q, sizeof(q));
	snprintf(msg, sizeof(msg), "%s \"%s\" not found", q, r->name ? r->name : "");
	req_fail_status(r, status_failure(ERR_NOTFOUND, msg, r->res->group, r->res->plural,
					  r->name));
}

const char *req_query(struct req *r, const char *key)
{
	return evhttp_find_header(&r->query, key);
}

void req_free(struct req *r)
{
	free(r->path);
	free(r->ns);
	free(r->name);
	free(r->verb);
	user_info_free(&r->user);
	evhttp_clear_headers(&r->query);
	free(r);
}

json_t *user_info_json(const struct user_info *u)
{
	json_t *groups = json_array();
	json_t *out = json_pack("{s:s}", "username", u->name ? u->name : "");
	for (size_t i = 0; i < u->groups.n; i++)
		json_array_append_new(groups, json_string(u->groups.v[i]));
	if (u->uid && *u->uid)
		json_object_set_new(out, "uid", json_string(u->uid));
	json_object_set_new(out, "groups", groups);
	if (u->extra && json_object_size(u->extra))
		json_object_set_new(out, "extra", json_deep_copy(u->extra));
	return out;
}

bool req_dry_run(struct req *r)
{
	return r->dry_run || req_query(r, "dryRun") != NULL;
}

void user_info_free(struct user_info *u)
{
	free(u->name);
	free(u->uid);
	strv_free(&u->groups);
	json_decref(u->extra);
	memset(u, 0, sizeof(*u));
}

char *object_key(const struct resource *res, const char *ns, const char *name)
{
	char *k;
	if (asprintf(&k, "/registry/%s%s%s/%s/%s", res->group, *res->group ? "/" : "",
		     res->plural, res->namespaced ? ns : "", name) < 0)
		abort();
	if (!res->namespaced) {
		/* Cluster-scoped keys have no namespace segment. */
		char *dbl = strstr(k, "//");
		if (dbl)
			memmove(dbl, dbl + 1, strlen(dbl));
	}
	return k;
}

char *prefix_key(const struct resource *res, const char *ns)
{
	char *k;
	if (asprintf(&k, "/registry/%s%s%s/%s%s", res->group, *res->group ? "/" : "",
		     res->plural, ns && res->namespaced ? ns : "",
		     ns && res->namespaced ? "/" : "") < 0)
		abort();
	return k;
}

/* ---- routing ---------------------------------------------------------------- */

/* Splits a path into at most max segments; returns the count, *more set
 * when the path goes on past them. */
static int split(const char *path, char **seg, int max, bool *more)
{
	int n = 0;
	const char *p = path;

	*more = false;
	while (*p == '/')
		p++;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (n == max) {
			*more = true;
			break;
		}
		seg[n++] = xstrndup(p, len);
		p += len;
		while (*p == '/')
			p++;
	}
	return n;
}

/* A boolean query parameter as Go's strconv.ParseBool reads it. */
bool query_bool(struct req *r, const char *key)
{
	static const char *const yes[] = {"1", "t", "T", "true", "TRUE", "True", NULL};
	const char *v = req_query(r, key);
	for (size_t i = 0; v && yes[i]; i++)
		if (!strcmp(v, yes[i]))
			return true;
	return false;
}

static const char *method_verb(struct req *r)
{
	bool watch = query_bool(r, "watch");

	switch (r->method) {
	case EVHTTP_REQ_GET:
	case EVHTTP_REQ_HEAD:
		return r->name ? (watch ? "watch" : "get") : (watch ? "watch" : "list");
	case EVHTTP_REQ_POST:
		return "create";
	case EVHTTP_REQ_PUT:
		return "update";
	case EVHTTP_REQ_PATCH:
		return "patch";
	case EVHTTP_REQ_DELETE:
		return r->name ? "delete" : "deletecollection";
	default:
		return "unknown";
	}
}

/*
 * /api/v1/[namespaces/NS/]RES[/NAME[/SUB]] or /apis/G/V/...; 0 when the
 * path names a resource we serve, else ERR_NOTFOUND.
 */
static int route(struct req *r)
{
	char *seg[10] = {0};
	bool more;
	int n = split(r->path, seg, 10, &more), i, rc = ERR_NOTFOUND;
	const char *group, *version;

	if (n < 3)
		goto out;
	if (!strcmp(seg[0], "api")) {
		group = "";
		version = seg[1];
		i = 2;
	} else if (!strcmp(seg[0], "apis") && n >= 4) {
		group = seg[1];
		version = seg[2];
		i = 3;
	} else {
		goto out;
	}
	/* namespaces/NS/<more> is a namespaced collection; namespaces/NS[/status]
	 * is the namespace itself. */
	if (n - i >= 3 && !strcmp(seg[i], "namespaces") &&
	    (*group || (strcmp(seg[i + 2], "status") && strcmp(seg[i + 2], "finalize")))) {
		r->ns = xstrndup(seg[i + 1], strlen(seg[i + 1]));
		i += 2;
	}
	if (i >= n || !(r->res = resource_find(group, version, seg[i])))
		goto out;
	i++;
	if (i < n)
		r->name = xstrndup(seg[i], strlen(seg[i])), i++;
	if (i < n && !(r->sub = resource_sub(r->res, seg[i])))
		goto out;
	if (i < n)
		i++;
	/* A proxy's path goes on, as deep as it likes: it is the kubelet's. */
	if (r->sub && is(r->sub->name, "proxy"))
		i = n, more = false;
	if (i != n || more || (r->res->namespaced && r->name && !r->ns) ||
	    (!r->res->namespaced && r->ns))
		goto out;
	r->kind = kind_rules_of(r->res);
	rc = 0;
out:
	for (int j = 0; j < n; j++)
		free(seg[j]);
	if (rc < 0)
		r->res = NULL, r->sub = NULL;
	return rc;
}

static bool public_path(const char *p)
{
	return !strcmp(p, "/version") || !strcmp(p, "/healthz") || !strcmp(p, "/livez") ||
	       !strcmp(p, "/readyz") || !strncmp(p, "/healthz/", 9) ||
	       !strncmp(p, "/livez/", 7) || !strncmp(p, "/readyz/", 8);
}

/* Discovery and /metrics: paths that are not requests for a resource
 * (/api, /api/v1, /apis, /apis/<g>, /apis/<g>/<v>, /openapi...). */
static bool nonresource_path(const char *p)
{
	int segments = 0;
	if (!strcmp(p, "/metrics") || !strncmp(p, "/openapi", 8))
		return true;
	if (strcmp(p, "/api") && strncmp(p, "/api/", 5) && strcmp(p, "/apis") &&
	    strncmp(p, "/apis/", 6))
		return false;
	for (const char *c = p; *c; c++)
		if (*c == '/' && c[1] && c[1] != '?')
			segments++;
	return segments <= (strncmp(p, "/apis", 5) ? 2 : 3);
}

/* A non-resource request authorized as upstream: the HTTP method as the
 * verb, the path; "forbidden: User \"x\" cannot get path \"/metrics\"". */
static int authz_nonresource(struct req *r)
{
	static const struct {
		enum evhttp_cmd_type m;
		const char *verb;
	} verbs[] = {{EVHTTP_REQ_GET, "get"},   {EVHTTP_REQ_HEAD, "get"},
		     {EVHTTP_REQ_POST, "post"}, {EVHTTP_REQ_PUT, "put"},
		     {EVHTTP_REQ_PATCH, "patch"}, {EVHTTP_REQ_DELETE, "delete"}};
	const char *verb = "get";
	char msg[600];

	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (verbs[i].m == r->method)
			verb = verbs[i].verb;
	/* upstream's privileged group, as for resources */
	if (strv_has(&r->user.groups, "system:masters"))
		return 0;
	struct authz_attrs a = {&r->user, verb, false, NULL, NULL, NULL, NULL, NULL, r->path};
	if (rbac_allows(r->s, &a, NULL, 0))
		return 0;
	snprintf(msg, sizeof(msg), "forbidden: User \"%s\" cannot %s path \"%s\"",
		 r->user.name ? r->user.name : "", verb, r->path);
	req_fail_status(r, status_failure(ERR_FORBIDDEN, msg, NULL, NULL, NULL));
	return ERR_FORBIDDEN;
}

static void serve_metrics(struct req *r)
{
	char *text;

	for (size_t i = 0; i < resources_count; i++) {
		char *pfx = prefix_key(&resources[i], NULL), q[128];
		metrics_set(metrics_with(r->s->m_objects,
					 resource_qualified(&resources[i], q, sizeof(q))),
			    (double)cache_count(r->s->cache, pfx));
		free(pfx);
	}
	text = metrics_render(metrics_default());
	reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text);
	free(text);
}

void req_serve(struct apiserver *s, const struct req_transport *tp, void *conn,
	       enum evhttp_cmd_type method, const char *target, struct evkeyvalq *in_headers,
	       struct evkeyvalq *out_headers, struct evbuffer *in_body)
{
	struct req *r = calloc(1, sizeof(*r));
	struct evhttp_uri *uri;
	const char *path, *q, *accept;

	if (!r)
		abort();
	r->s = s;
	r->tp = tp;
	r->conn = conn;
	r->in_headers = in_headers;
	r->out_headers = out_headers;
	r->in_body = in_body;
	r->start_ns = clock_mono();
	r->method = method;
	TAILQ_INIT(&r->query);
	tp->attach(r);
	/* As evhttp parses a request line's target (an absolute path and
	 * the query; no authority). */
	uri = evhttp_uri_parse_with_flags(target, EVHTTP_URI_NONCONFORMANT);
	path = uri ? evhttp_uri_get_path(uri) : NULL;
	q = uri ? evhttp_uri_get_query(uri) : NULL;
	r->path = evhttp_uridecode(path && *path ? path : "/", 0, NULL);
	if (!uri || (q && evhttp_parse_query_str(q, &r->query) < 0)) {
		if (uri) /* libevent's free takes no NULL */
			evhttp_uri_free(uri);
		req_fail(r, ERR_INVALID, "malformed query string");
		return;
	}
	evhttp_uri_free(uri);
	accept = req_header(r, "Accept");
	r->want_table = accept && strstr(accept, "as=Table");

	if (public_path(r->path)) {
		if (!strcmp(r->path, "/version"))
			discovery_serve(r);
		else
			reply_text(r, 200, "text/plain; charset=utf-8", "ok");
		return;
	}
	if (authn_request(r) < 0 || impersonate(r) < 0)
		return;
	if (nonresource_path(r->path) && authz_nonresource(r) < 0)
		return;
	if (!strcmp(r->path, "/metrics")) {
		serve_metrics(r);
		return;
	}
	if (discovery_serve(r))
		return;
	if (route(r) < 0) {
		req_fail_status(r, status_failure(ERR_NOTFOUND,
						  "the server could not find the requested resource",
						  NULL, NULL, NULL));
		return;
	}
	if (!(r->verb = strdup(method_verb(r))))
		abort();
	if (r->method == EVHTTP_REQ_PATCH) {
		const char *ct = req_header(r, "Content-Type");
		r->apply = ct && !strncmp(ct, "application/apply-patch+yaml", 28);
	}
	handle_resource(r);
}

/* ---- the HTTPS transport: evhttp's request is r->conn ---------------------- */

static struct evhttp_request *http_ev(struct req *r)
{
	return r->conn;
}

static const struct tls_identity *http_identity(struct req *r)
{
	SSL *ssl = httpd_ssl(http_ev(r));
	return ssl ? tls_peer_identity(ssl, clock_now()) : NULL;
}

static const char *http_peer(struct req *r, char *buf, size_t n)
{
	return httpd_peer(http_ev(r), buf, n);
}

static const char *http_target(struct req *r)
{
	return evhttp_request_get_uri(http_ev(r));
}

/*
 * A LIST's body is its items' stored bytes, each a chain of its own, and
 * TLS writes a chain at a time: one record and one send(2) per item — 5,000
 * syscalls for 5,000 Nodes, half the server's time. Copied into chains of
 * 64 KiB (one copy of bytes about to be encrypted anyway; not one chain
 * the size of the body, which a large list would double in memory), it
 * goes out in records of 16 KiB. HTTP/2 needs none of this: its DATA
 * frames are copies.
 */
#define COALESCE_CHUNK (64u << 10)

void http_coalesce(struct evbuffer *body)
{
	size_t len = body ? evbuffer_get_length(body) : 0;
	int chains = len ? evbuffer_peek(body, -1, NULL, NULL, 0) : 0;
	struct evbuffer *out;

	if (chains <= 8 || len / (size_t)chains >= 8192)
		return;
	if (!(out = evbuffer_new()))
		abort();
	while (evbuffer_get_length(body)) {
		struct evbuffer_iovec v;
		int n;
		if (evbuffer_reserve_space(out, COALESCE_CHUNK, &v, 1) != 1)
			abort();
		n = evbuffer_remove(body, v.iov_base, v.iov_len);
		v.iov_len = n > 0 ? (size_t)n : 0;
		evbuffer_commit_space(out, &v, 1);
	}
	evbuffer_add_buffer(body, out);
	evbuffer_free(out);
}

static void http_reply(struct req *r, int code, struct evbuffer *body)
{
	http_coalesce(body);
	evhttp_send_reply(http_ev(r), code, NULL, body);
}

static void http_stream_start(struct req *r)
{
	evhttp_send_reply_start(http_ev(r), 200, "OK");
	httpd_stream_no_timeout(http_ev(r));
}

static void http_stream_chunk(struct req *r, struct evbuffer *data)
{
	evhttp_send_reply_chunk(http_ev(r), data);
}

static size_t http_stream_unsent(struct req *r)
{
	return httpd_unsent(http_ev(r));
}

static void http_release(struct req *r)
{
	evhttp_connection_set_closecb(evhttp_request_get_connection(http_ev(r)), NULL, NULL);
}

static void http_stream_end(struct req *r, int drain_s)
{
	/* What is buffered may still go out; a reader that never comes back
	 * is dropped by the connection's timeout, not kept for a day. */
	if (drain_s > 0)
		evhttp_connection_set_timeout(evhttp_request_get_connection(http_ev(r)),
		                              drain_s);
	http_release(r);
	evhttp_send_reply_end(http_ev(r));
}

void http_forget_request(struct evhttp_request *ev)
{
	/* A request libevent detached from its failed connection (EOF,
	 * timeout) is its handler's to free; one still attached goes with the
	 * connection. Not evhttp_send_reply_end: on a connection being freed
	 * it may send, and free the connection a second time. */
	if (!evhttp_request_get_connection(ev))
		evhttp_request_free(ev);
}

static void http_closed(struct evhttp_connection *conn, void *arg)
{
	struct req *r = arg;

	evhttp_connection_set_closecb(conn, NULL, NULL);
	http_forget_request(http_ev(r));
	r->conn = NULL;
	req_client_gone(r);
}

static void http_attach(struct req *r)
{
	evhttp_connection_set_closecb(evhttp_request_get_connection(http_ev(r)), http_closed, r);
}

static const struct req_transport http_transport = {
	.attach = http_attach,
	.identity = http_identity,
	.peer = http_peer,
	.target = http_target,
	.reply = http_reply,
	.stream_start = http_stream_start,
	.stream_chunk = http_stream_chunk,
	.stream_unsent = http_stream_unsent,
	.stream_end = http_stream_end,
	.release = http_release,
};

/* ---- the HTTP/2 transport: the stream is r->conn ---------------------------- */

static struct h2_stream *h2_of(struct req *r)
{
	return r->conn;
}

static const struct tls_identity *h2t_identity(struct req *r)
{
	SSL *ssl = httpd_h2_ssl(h2_of(r));
	return ssl ? tls_peer_identity(ssl, clock_now()) : NULL;
}

static const char *h2t_peer(struct req *r, char *buf, size_t n)
{
	return httpd_h2_peer(h2_of(r), buf, n);
}

static const char *h2t_target(struct req *r)
{
	return h2_path(h2_of(r));
}

static void h2t_reply(struct req *r, int code, struct evbuffer *body)
{
	h2_respond(h2_of(r), code, body);
}

static void h2t_stream_start(struct req *r)
{
	h2_respond(h2_of(r), 200, NULL);
}

static void h2t_stream_chunk(struct req *r, struct evbuffer *data)
{
	h2_send(h2_of(r), data);
}

static size_t h2t_stream_unsent(struct req *r)
{
	return h2_unsent(h2_of(r));
}

static void h2t_release(struct req *r)
{
	h2_stream_set_cbs(h2_of(r), NULL, NULL);
}

/* What is buffered may still go within drain_s; a reader that never
 * takes it loses the stream (not the connection: its other streams are
 * someone else's business). */
static void h2t_stream_end(struct req *r, int drain_s)
{
	h2t_release(r);
	h2_end_within(h2_of(r), drain_s);
}

static void h2t_closed(void *arg, struct h2_stream *s, const char *err)
{
	(void)s;
	(void)err;
	req_client_gone(arg);
}

static const struct h2_stream_cbs h2t_cbs = {.closed = h2t_closed};

static void h2t_attach(struct req *r)
{
	h2_stream_set_cbs(h2_of(r), &h2t_cbs, r);
}

/* The client went, and the request is over now: its stream, kept for it
 * (h2.h), goes. */
static void h2t_forget(struct req *r)
{
	h2_stream_set_cbs(h2_of(r), NULL, NULL);
}

static const struct req_transport h2_transport = {
	.attach = h2t_attach,
	.forget = h2t_forget,
	.identity = h2t_identity,
	.peer = h2t_peer,
	.target = h2t_target,
	.reply = h2t_reply,
	.stream_start = h2t_stream_start,
	.stream_chunk = h2t_stream_chunk,
	.stream_unsent = h2t_stream_unsent,
	.stream_end = h2t_stream_end,
	.release = h2t_release,
};

static void on_h2_request(struct h2_stream *st, void *arg)
{
	req_serve(arg, &h2_transport, st, h2_method(st), h2_path(st), h2_in_headers(st),
		  h2_out_headers(st), h2_in_body(st));
}

static void on_request(struct evhttp_request *ev, void *arg)
{
	req_serve(arg, &http_transport, ev, evhttp_request_get_command(ev),
		  evhttp_request_get_uri(ev), evhttp_request_get_input_headers(ev),
		  evhttp_request_get_output_headers(ev), evhttp_request_get_input_buffer(ev));
}

/* ---- lifecycle ---------------------------------------------------------------- */

static void register_metrics(struct apiserver *s)
{
	static const double latency[] = {0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25,
					 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60};
	static const double expiry[] = {0, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 345600,
					604800, 2592000, 7776000, 15552000, 31104000};
	struct metrics *m = metrics_default();

	s->m_requests = metrics_counter(
		m, "apiserver_request_total",
		"[STABLE] Counter of apiserver requests broken out for each verb, dry run value, "
		"group, version, resource, scope, component, and HTTP response code.",
		"verb,group,version,resource,subresource,scope,component,code");
	s->m_latency = metrics_histogram(
		m, "apiserver_request_duration_seconds",
		"[STABLE] Response latency distribution in seconds for each verb, dry run value, "
		"group, version, resource, subresource, scope and component.",
		"verb,group,version,resource,subresource,scope,component", latency,
		sizeof(latency) / sizeof(latency[0]));
	s->m_cert_exp = metrics_histogram(
		m, "apiserver_client_certificate_expiration_seconds",
		"[ALPHA] Distribution of the remaining lifetime on the certificate used to "
		"authenticate a request.",
		NULL, expiry, sizeof(expiry) / sizeof(expiry[0]));
	s->m_objects = metrics_gauge(
		m, "apiserver_storage_objects",
		"[STABLE] Number of stored objects at the time of last check split by kind. In "
		"case of a fetching error, the value will be -1.",
		"resource");
}

/* Every commit: reads held for a revision may run now (read.c). */
static void on_commit(void *arg)
{
	rv_waits_committed(arg);
}

static int settle_seeds(struct apiserver *s)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (cache_inflight(s->cache)) {
		loop_poll(s->loop);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 60)
			return err_set(ERR_UNAVAILABLE,
				       "storage: the defaults' writes were not answered in 60s");
		nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
	}
	return 0;
}

/*
 * Threads for the connections: as asked, or (-1) one per CPU this process
 * may run on beside the loop's, from 4 CPUs on. Below that they cost more
 * than they free: on 2 CPUs shared with the clients (bench/, "Both
 * cores") a GET took 44 us of CPU relayed against 28 us on the loop, and
 * lease renewals went from 13.5k/s to 12.4k/s. None on the virtual clock,
 * whose steps must see every event.
 */
static size_t serving_threads(int asked)
{
	cpu_set_t cpus;

	if (clock_is_virtual() || asked == 0)
		return 0;
	if (asked > 0)
		return (size_t)asked;
	if (sched_getaffinity(0, sizeof(cpus), &cpus) < 0)
		return 0;
	return CPU_COUNT(&cpus) >= 4 ? (size_t)CPU_COUNT(&cpus) - 1 : 0;
}

struct apiserver *apiserver_new(struct loop *loop, const struct apiserver_opts *o)
{
	struct apiserver *s = calloc(1, sizeof(*s));
	/* evhttp's own 413 is a bare HTML page (libevent 2.1 has no error hook):
	 * let bodies up to 16 MiB (or 4x the limit) through so the handler
	 * answers them with a proper Status; beyond that evhttp's 413 remains. */
	size_t transport_max = o->max_body * 4 > (16u << 20) ? o->max_body * 4 : (16u << 20);
	struct httpd_opts ho = {.bind_address = o->bind_address,
				.port = o->secure_port,
				.max_body = transport_max,
				.max_headers = 64 << 10,
				.idle_timeout_s = 300,
				.credentials_ok = authn_credentials_ok,
				.h2_handler = on_h2_request};
	size_t threads;
	char *db;

	if (!s)
		abort();
	s->o = *o;
	s->loop = loop;
	s->store = o->store; /* ours now, whatever happens next */
	register_metrics(s);
	/* Without a listener (in-process requests only) there is no TLS. */
	if (o->secure_port >= 0 && (!o->tls_cert_file || !o->tls_private_key_file)) {
		err_set(ERR_INVALID, "--tls-cert-file and --tls-private-key-file are required");
		goto fail;
	}
	if (o->secure_port >= 0 && !(s->tls = tls_server_ctx(o->tls_cert_file,
							      o->tls_private_key_file,
							      o->client_ca_file)))
		goto fail;
	if (s->tls)
		tls_server_offer_h2(s->tls);
	authn_init(s);
	if (satoken_init(s) < 0 || proxy_init(s) < 0)
		goto fail;
	if (s->store) {
		/* given */
	} else if (o->etcd) {
		s->store = store_etcd_open(&o->etcd_opts, loop);
	} else {
		if (file_mkdirs(o->data_dir, 0700) < 0)
			goto fail;
		db = file_join(o->data_dir, "state.db");
		s->store = store_sqlite_open(db, o->sync, loop);
		free(db);
	}
	if (!s->store)
		goto fail;
	s->cache = cache_new(s->store, o->watch_window);
	cache_set_loop(s->cache, loop);
	if (cache_load(s->cache) < 0)
		goto fail;
	LOG_INFO("Loaded storage (%s): revision %" PRId64,
		 o->store ? "given" : o->etcd ? "etcd3" : "sqlite",
		 cache_rev(s->cache));
	seed_defaults(s);
	/* A shared store's cache hears of the seeds' writes through its watch:
	 * serve once it has them (the default namespace, the RBAC policy). */
	if (cache_remote(s->cache) && settle_seeds(s) < 0)
		goto fail;
	if (gc_start(s) < 0)
		goto fail;
	/* From what is durable: the seeds' writes still in flight commit later,
	 * and reads waiting for their revisions must hear of them. */
	cache_on_progress(s->cache, on_commit, s);
	if (o->secure_port < 0)
		return s;
	threads = serving_threads(o->serving_threads);
	if (threads > 0 ? !(s->relay = relay_start(s, s->tls, &ho, threads))
			: !(s->httpd = httpd_new(loop, s->tls, &ho, on_request, s)))
		goto fail;
	LOG_INFO("Serving securely on %s:%d", o->bind_address, apiserver_port(s));
	if (threads > 0)
		LOG_V(1, "Connections served on %zu threads", threads);
	return s;
fail:
	apiserver_free(s);
	return NULL;
}

int apiserver_port(const struct apiserver *s)
{
	return s->relay ? relay_port(s->relay) : s->httpd ? httpd_port(s->httpd) : -1;
}

size_t apiserver_writes_inflight(const struct apiserver *s)
{
	return cache_inflight(s->cache);
}

void apiserver_free(struct apiserver *s)
{
	if (!s)
		return;
	s->closing = true;
	watch_close_all(s);
	rv_waits_cancel(s);
	proxy_free(s);
	relay_stop(s->relay);
	httpd_free(s->httpd);
	/* Before the store closes: what its last writes tell the collector
	 * must not become writes of its own. */
	gc_stop(s);
	/* Queued writes finish and their callbacks run before the cache goes. */
	store_close(s->store);
	loop_poll(s->loop);
	rv_waits_cancel(s); /* any the store's last answers began */
	cache_free(s->cache);
	relay_free(s->relay); /* what was answered since goes nowhere */
	SSL_CTX_free(s->tls);
	satoken_free(s);
	authn_free(s);
	free(s);
}
