/*
 * The API server's way to the kubelets: nodes/{name}/proxy/{path} and
 * pods/{name}/log, as upstream's: the node's address picked from
 * status.addresses in --kubelet-preferred-address-types order, its port
 * from status.daemonEndpoints.kubeletEndpoint.Port, and HTTPS with the
 * --kubelet-client-certificate/--kubelet-client-key pair (kubeadm's
 * apiserver-kubelet-client, CN kube-apiserver-kubelet-client, O
 * kubeadm:cluster-admins). The kubelet's serving certificate is verified
 * only when --kubelet-certificate-authority is given, as upstream.
 *
 * One REST client per kubelet address, kept for the server's life; a
 * request in flight holds its req until the kubelet answers (or the
 * server stops, which answers 503).
 */
#include "apiserver/internal.h"

#include "api/status.h"
#include "client/rest.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/sbuf.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ADDRESS_TYPES "Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP"
#define DEFAULT_KUBELET_PORT 10250

struct kubelet_conn {
	char addr[300]; /* "host:port" */
	struct rest_client *c;
	struct kubelet_conn *next;
};

/* A request waiting for its kubelet. */
struct proxy_call {
	struct proxy *p;
	struct req *r;
	struct rest_call *call;
	bool logs;     /* pods/log: upstream's LocationStreamer, not the proxy */
	char url[400]; /* what was asked, for error texts */
	struct proxy_call *next;
};

struct proxy {
	struct apiserver *s;
	char *cert_pem, *key_pem, *ca_pem;
	struct strv types;
	struct kubelet_conn *conns;
	struct proxy_call *calls;
};

static char *read_text(const char *path)
{
	char *text = NULL;
	size_t len;
	if (!path || !*path)
		return NULL;
	if (file_read(path, &text, &len, 1 << 20) < 0)
		return NULL;
	return text;
}

int proxy_init(struct apiserver *s)
{
	struct proxy *p = xcalloc(1, sizeof(*p));
	const char *types = s->o.kubelet_preferred_address_types;
	char *list = xstrdup(types && *types ? types : DEFAULT_ADDRESS_TYPES), *save = NULL;

	p->s = s;
	s->proxy = p;
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
		strv_push(&p->types, t);
	free(list);
	if (s->o.kubelet_client_certificate || s->o.kubelet_client_key) {
		if (!(p->cert_pem = read_text(s->o.kubelet_client_certificate)) ||
		    !(p->key_pem = read_text(s->o.kubelet_client_key)))
			return err_wrap(ERR_INVALID, "--kubelet-client-certificate and "
			                             "--kubelet-client-key");
	}
	if (s->o.kubelet_certificate_authority &&
	    !(p->ca_pem = read_text(s->o.kubelet_certificate_authority)))
		return err_wrap(ERR_INVALID, "--kubelet-certificate-authority");
	return 0;
}

static void unlink_call(struct proxy_call *pc)
{
	struct proxy_call **pp = &pc->p->calls;
	while (*pp && *pp != pc)
		pp = &(*pp)->next;
	if (*pp)
		*pp = pc->next;
}

void proxy_free(struct apiserver *s)
{
	struct proxy *p = s->proxy;

	if (!p)
		return;
	while (p->calls) {
		struct proxy_call *pc = p->calls;
		rest_cancel(pc->call);
		p->calls = pc->next;
		req_fail(pc->r, ERR_UNAVAILABLE, "the API server is shutting down");
		free(pc);
	}
	while (p->conns) {
		struct kubelet_conn *k = p->conns;
		p->conns = k->next;
		rest_client_free(k->c);
		free(k);
	}
	free(p->cert_pem);
	free(p->key_pem);
	free(p->ca_pem);
	strv_free(&p->types);
	free(p);
	s->proxy = NULL;
}

static struct rest_client *conn_for(struct proxy *p, const char *host, int port)
{
	struct kubelet_conn *k;
	char addr[300], url[320];

	snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
	for (k = p->conns; k; k = k->next)
		if (!strcmp(k->addr, addr))
			return k->c;
	snprintf(url, sizeof(url), "https://%s", addr);
	struct rest_config cfg = {.server = url,
	                          .ca_pem = p->ca_pem,
	                          .cert_pem = p->cert_pem,
	                          .key_pem = p->key_pem,
	                          .user_agent = "kube-apiserver",
	                          .max_conns = 2};
	struct rest_client *c = rest_client_new(p->s->loop, &cfg);
	if (!c)
		return NULL;
	k = xcalloc(1, sizeof(*k));
	snprintf(k->addr, sizeof(k->addr), "%s", addr);
	k->c = c;
	k->next = p->conns;
	p->conns = k;
	return c;
}

/* upstream's GetPreferredNodeAddress: the first address of the first
 * type in the preferred order. */
static const char *node_address(const struct proxy *p, const json_t *node, char *known, size_t n)
{
	const json_t *addrs = jx_get(node, "status.addresses"), *a;
	size_t i, o = 0;

	for (size_t t = 0; t < p->types.n; t++)
		json_array_foreach(addrs, i, a)
		{
			if (!strcmp(jx_str(a, "type") ?: "", p->types.v[t]) && jx_str(a, "address"))
				return jx_str(a, "address");
		}
	known[0] = '\0';
	json_array_foreach(addrs, i, a)
	{
		o += (size_t)snprintf(known + o, o < n ? n - o : 0, "%s{%s %s}", i ? " " : "",
		                      jx_str(a, "type") ?: "", jx_str(a, "address") ?: "");
		if (o >= n)
			break;
	}
	return NULL;
}

static void on_kubelet(void *arg, int status, const char *ct, const char *body, size_t len,
                       const char *err)
{
	struct proxy_call *pc = arg;
	char msg[1200];

	unlink_call(pc);
	if (status == 0 && !pc->logs) {
		/* The proxy's own words, a 503 Status. */
		snprintf(msg, sizeof(msg), "error trying to reach service: %s",
		         err ? err : "failed");
		req_fail(pc->r, ERR_UNAVAILABLE, msg);
	} else if (status == 0) {
		/* LocationStreamer's client error: an internal error, Go's text. */
		snprintf(msg, sizeof(msg), "Get \"%s\": %s", pc->url, err ? err : "failed");
		req_fail(pc->r, ERR_INTERNAL, msg);
	} else if (pc->logs && (status < 200 || status > 299)) {
		/* GenericHttpResponseChecker: the kubelet's answer as a Status. */
		snprintf(msg, sizeof(msg), "%.*s", (int)len, body ? body : "");
		req_fail_status(pc->r, status_failure(status == 400   ? ERR_INVALID
		                                      : status == 404 ? ERR_NOTFOUND
		                                      : status == 403 ? ERR_FORBIDDEN
		                                                      : ERR_INTERNAL,
		                                      msg, NULL, NULL, NULL));
	} else {
		req_reply_bytes(pc->r, status, pc->logs ? "text/plain" : ct, body, len);
	}
	free(pc);
}

/* Send method path (with its query) to node's kubelet and answer r with
 * what it says. */
static void forward(struct req *r, const json_t *node, const char *path, bool logs)
{
	struct proxy *p = r->s->proxy;
	const char *addr;
	char known[512], msg[700];
	int64_t port = jx_int(node, "status.daemonEndpoints.kubeletEndpoint.Port", 0);
	struct rest_client *c;
	struct proxy_call *pc;
	char *body = NULL;
	static const char *const methods[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
	                                      "OPTIONS", "TRACE", "CONNECT", "PATCH"};
	const char *method = "GET";

	if (!(addr = node_address(p, node, known, sizeof(known)))) {
		snprintf(msg, sizeof(msg), "no preferred addresses found; known addresses: [%s]",
		         known);
		req_fail(r, ERR_UNAVAILABLE, msg);
		return;
	}
	if (!(c = conn_for(p, addr, port > 0 ? (int)port : DEFAULT_KUBELET_PORT))) {
		req_fail(r, ERR_UNAVAILABLE, err_msg());
		return;
	}
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (r->method == (enum evhttp_cmd_type)(1 << i))
			method = methods[i];
	if (r->in_body && evbuffer_get_length(r->in_body)) {
		size_t n = evbuffer_get_length(r->in_body);
		body = xmemdup(evbuffer_pullup(r->in_body, (ev_ssize_t)n), n);
	}
	pc = xcalloc(1, sizeof(*pc));
	pc->p = p;
	pc->r = r;
	pc->logs = logs;
	snprintf(pc->url, sizeof(pc->url),
	         strchr(addr, ':') ? "https://[%s]:%d%s" : "https://%s:%d%s", addr,
	         port > 0 ? (int)port : DEFAULT_KUBELET_PORT, path);
	pc->next = p->calls;
	p->calls = pc;
	pc->call = rest_do_raw(c, method, path, req_header(r, "Accept"),
	                       req_header(r, "Content-Type"), body, on_kubelet, pc);
	free(body);
}

/* The path and query after ".../nodes/<name>/proxy" in the request line. */
static char *proxied_path(struct req *r)
{
	const char *target = r->tp->target(r), *q = strchr(target, '?'), *at;
	char marker[320];
	size_t plen = q ? (size_t)(q - target) : strlen(target);

	snprintf(marker, sizeof(marker), "/%s/proxy", r->name);
	for (at = target; (at = strstr(at, marker)) && at < target + plen; at++) {
		const char *rest = at + strlen(marker);
		if (rest == target + plen || *rest == '/' || *rest == '?')
			return str_printf("%s%.*s%s", *rest == '/' ? "" : "/",
			                  (int)(target + plen - rest), rest, q ? q : "");
	}
	return str_printf("/%s", q ? q : "");
}

void proxy_serve_node(struct req *r)
{
	char *key, *path;
	const json_t *node;

	if (authz_request(r, NULL) < 0)
		return;
	key = object_key(r->res, NULL, r->name);
	node = cache_get(r->s->cache, key);
	free(key);
	if (!node) {
		req_not_found(r);
		return;
	}
	path = proxied_path(r);
	forward(r, node, path, false);
	free(path);
}

/* The container pods/log reads: ?container=, else the pod's only one;
 * NULL with the 400 answered (upstream's LogLocation checks). */
static const char *log_container(struct req *r, const json_t *pod)
{
	const json_t *cs = jx_get(pod, "spec.containers"), *c, *st;
	const char *want = req_query(r, "container"), *name = jx_str(pod, "metadata.name");
	const char *reason = "ContainerCreating";
	char msg[1024];
	size_t i, o = 0;

	if (!want || !*want) {
		if (json_array_size(cs) == 1) {
			want = jx_str(json_array_get(cs, 0), "name");
		} else {
			json_array_foreach(cs, i, c)
			{
				o +=
				    (size_t)snprintf(msg + o, sizeof(msg) > o ? sizeof(msg) - o : 0,
				                     "%s%s", i ? " " : "", jx_str(c, "name") ?: "");
				if (o >= sizeof(msg))
					break;
			}
			char *m =
			    str_printf("a container name must be specified for pod %s, choose one "
			               "of: [%s]",
			               name, json_array_size(cs) ? msg : "");
			req_fail(r, ERR_INVALID, m);
			free(m);
			return NULL;
		}
	}
	json_array_foreach(cs, i, c)
	{
		if (is(jx_str(c, "name"), want))
			break;
	}
	if (i == json_array_size(cs)) {
		snprintf(msg, sizeof(msg), "container %s is not valid for pod %s", want, name);
		req_fail(r, ERR_INVALID, msg);
		return NULL;
	}
	if (!jx_str(pod, "spec.nodeName")) {
		/* No host, no location: upstream streams nothing, with 200. */
		req_reply_bytes(r, 200, "text/plain", "", 0);
		return NULL;
	}
	json_array_foreach(jx_get(pod, "status.containerStatuses"), i, st)
	{
		if (!is(jx_str(st, "name"), want))
			continue;
		/* A container in back-off still has its last run's log. */
		if (jx_get(st, "state.running") || jx_get(st, "state.terminated") ||
		    jx_get(st, "lastState.terminated"))
			return want;
		reason = jx_str(st, "state.waiting.reason") ?: reason;
	}
	snprintf(msg, sizeof(msg), "container \"%s\" in pod \"%s\" is waiting to start: %s", want,
	         name, reason);
	req_fail(r, ERR_INVALID, msg);
	return NULL;
}

void proxy_serve_pod_log(struct req *r)
{
	static const char *const passed[] = {"timestamps", "tailLines", "limitBytes",
	                                     "sinceSeconds"};
	char *key, *path;
	const json_t *pod, *node;
	const char *container;
	struct sbuf q = SBUF_INIT;

	if (authz_request(r, NULL) < 0)
		return;
	key = object_key(r->res, r->ns, r->name);
	pod = cache_get(r->s->cache, key);
	free(key);
	if (!pod) {
		req_not_found(r);
		return;
	}
	if (!(container = log_container(r, pod)))
		return;
	key = object_key(resource_find("", "v1", "nodes"), NULL, jx_str(pod, "spec.nodeName"));
	node = cache_get(r->s->cache, key);
	free(key);
	if (!node) {
		char msg[300];
		snprintf(msg, sizeof(msg), "nodes \"%s\" not found", jx_str(pod, "spec.nodeName"));
		req_fail(r, ERR_NOTFOUND, msg);
		return;
	}
	for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
		const char *v = req_query(r, passed[i]);
		char *enc = v ? evhttp_encode_uri(v) : NULL;
		if (enc)
			sbuf_addf(&q, "%c%s=%s", q.len ? '&' : '?', passed[i], enc);
		free(enc);
	}
	path = str_printf("/containerLogs/%s/%s/%s%s", r->ns, r->name, container, q.s ? q.s : "");
	forward(r, node, path, true);
	free(path);
	sbuf_free(&q);
}
