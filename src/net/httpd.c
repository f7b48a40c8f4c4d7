#include "net/httpd.h"

#include "net/h2.h"
#include "net/tls.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Go's http.Server backs off on a failing accept from 5 ms, doubling to 1 s. */
#define ACCEPT_BACKOFF_MIN_MS 5
#define ACCEPT_BACKOFF_MAX_MS 1000

struct httpd {
	struct loop *loop;
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct evconnlistener *listener; /* the bound socket's, owned by evhttp */
	struct event *resume;            /* re-enables the listener after a failed accept */
	int backoff_ms;
	SSL_CTX *tls;
	httpd_handler handler;
	httpd_h2_handler h2_handler;
	int idle_timeout_s;
	size_t max_body;
	const struct log_scope *scope; /* current at httpd_new: the handler runs in it */
	void *arg;
	int port;
	char address[64];
	struct httpd *next_server; /* on the list of servers */
	bool (*credentials_ok)(void *arg, SSL *ssl, const char *authorization);
	bool bearer_unjudged;
	int (*cert_cb)(SSL *ssl, void *arg);
	void *cert_arg;
	size_t max_headers, max_conns, max_unauth;
	int header_timeout_s, request_timeout_s;
	struct conn *conns;      /* alive, on a list: they may outlive the server (below) */
	struct httpd_counts *ct; /* shared by the servers of one port */
};

/*
 * What the limits count, shared by every server on one port (httpd_opts.
 * share: a server per thread), so that a limit is the port's whichever
 * thread accepted. Taken once per connection, never per request.
 */
struct httpd_counts {
	pthread_mutex_t lock;
	int refs;                 /* servers sharing it */
	size_t nconns;            /* connections alive */
	struct hmap unauth;       /* peer address → connections without credentials (intptr_t) */
	int64_t last_refusal_log; /* mono time of the last refusal logged */
};

/*
 * One connection, as httpd sees it beside evhttp: a copy of its first
 * request's headers (taken as TLS hands the plaintext over, before evhttp's
 * deferred read callback parses them), its deadline and its place in the
 * counts. It hangs off its SSL (ex_data) and is freed with it.
 */
struct conn {
	struct httpd *h; /* NULL once the server is freed: libevent frees its
	                  * connections' bufferevents (and SSLs) later */
	struct conn *prev, *next;
	struct bufferevent *bev; /* evhttp's: the TLS bufferevent */
	struct evbuffer_cb_entry *watch;
	struct event *deadline; /* the headers, then the whole first request */
	char *head;             /* the first request's header bytes so far */
	size_t nhead;
	char peer[64];
	bool started; /* first plaintext seen: peer known, counted */
	bool held;    /* the first request's headers are still being read */
	bool counted; /* counted in h->unauth under peer */
	/* ... but showing a bearer token credentials_ok could not judge
	 * (httpd_opts.bearer_unjudged): no pre-auth limits until the handler
	 * refuses it (httpd_credentials_judged). */
	bool provisional;
	/* HTTP/2 (ALPN "h2"): the session that took the bufferevent over from
	 * evhttp, and evhttp's callbacks, given back for evhttp to end it. */
	struct h2 *h2;
	bufferevent_data_cb ev_read, ev_write;
	bufferevent_event_cb ev_event;
	void *ev_arg;
};

static int conn_index = -1; /* SSL ex_data slot of a struct conn */

/* libevent hands a listener's error callback the listener's own argument —
 * evhttp's — so a failing listener finds its server here. Servers run on
 * several loops' threads in one process (cube up): guarded. */
static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct httpd *servers;

static void servers_add(struct httpd *h)
{
	pthread_mutex_lock(&servers_lock);
	h->next_server = servers;
	servers = h;
	pthread_mutex_unlock(&servers_lock);
}

static void servers_remove(struct httpd *h)
{
	pthread_mutex_lock(&servers_lock);
	for (struct httpd **p = &servers; *p; p = &(*p)->next_server)
		if (*p == h) {
			*p = h->next_server;
			break;
		}
	pthread_mutex_unlock(&servers_lock);
}

static struct httpd *server_of(const struct evconnlistener *lev)
{
	struct httpd *h;
	pthread_mutex_lock(&servers_lock);
	for (h = servers; h && h->listener != lev; h = h->next_server)
		;
	pthread_mutex_unlock(&servers_lock);
	return h;
}

/* Connections may use the descriptors the process has, less a reserve for
 * its files, its store and the connections it makes itself. */
static size_t fd_budget(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 65536;
	return rl.rlim_cur > 256 ? (size_t)rl.rlim_cur - 128 : (size_t)rl.rlim_cur / 2;
}

/* ---- connections ---------------------------------------------------------- */

/* Under ct->lock. */
static void unauth_add(struct httpd_counts *ct, const char *peer, intptr_t d)
{
	intptr_t n = (intptr_t)hmap_get(&ct->unauth, peer) + d;
	if (n > 0)
		hmap_put(&ct->unauth, peer, (void *)n);
	else
		hmap_del(&ct->unauth, peer);
}

/* A connection counted without credentials has shown them: it counts no
 * more against its peer, and its limits go. */
static void uncount(struct conn *c)
{
	struct httpd_counts *ct = c->h->ct;

	pthread_mutex_lock(&ct->lock);
	unauth_add(ct, c->peer, -1);
	pthread_mutex_unlock(&ct->lock);
	c->counted = false;
	c->provisional = false;
}

/* The SSL is freed (with evhttp's connection): so is what hangs off it. */
static void conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	struct conn *c = ptr;

	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	if (!c)
		return;
	if (c->h) {
		struct httpd_counts *ct = c->h->ct;
		pthread_mutex_lock(&ct->lock);
		if (c->counted)
			unauth_add(ct, c->peer, -1);
		ct->nconns--;
		pthread_mutex_unlock(&ct->lock);
		if (c->prev)
			c->prev->next = c->next;
		else
			c->h->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
	}
	h2_free(c->h2);
	event_free(c->deadline);
	free(c->head);
	free(c);
}

/* End the connection as evhttp ends one whose socket failed or timed out;
 * an HTTP/2 session ends its streams first, then comes back here. */
static void conn_drop(struct conn *c, short why)
{
	c->held = false;
	if (c->h2 && h2_alive(c->h2)) {
		h2_close(c->h2, why & BEV_EVENT_TIMEOUT ? "timeout" : "closed by the server");
		return;
	}
	bufferevent_trigger_event(c->bev, BEV_EVENT_READING | why, 0);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	(void)fd;
	(void)what;
	LOG_V(2, "http: closing the connection from %s: %s", c->peer[0] ? c->peer : "?",
	      c->held ? "headers not complete in time" : "request not complete in time");
	conn_drop(c, BEV_EVENT_TIMEOUT);
}

static void arm(struct conn *c, int seconds)
{
	struct timeval tv = {seconds, 0};
	evtimer_add(c->deadline, &tv);
}

/* Refusals are logged at most once a second (a storm of them would be a
 * flood of lines); true when this one may be. Under ct->lock. */
static bool refusal_logged(struct httpd_counts *ct)
{
	int64_t now = clock_mono();

	if (now - ct->last_refusal_log < NS_PER_SEC)
		return false;
	ct->last_refusal_log = now;
	return true;
}

/* The peer's address into ip ("?" when unknown); its port, or 0. */
static int peer_of(evutil_socket_t fd, char *ip, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	bool v6;

	snprintf(ip, n, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return 0;
	v6 = ss.ss_family == AF_INET6;
	evutil_inet_ntop(ss.ss_family,
	                 v6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
	                    : (void *)&((struct sockaddr_in *)&ss)->sin_addr,
	                 ip, n);
	return ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                : ((struct sockaddr_in *)&ss)->sin_port);
}

/* The connection's first plaintext: who it is, and whether there is room. */
static int conn_start(struct conn *c)
{
	struct httpd_counts *ct = c->h->ct;
	size_t n;
	bool log;

	c->started = true;
	peer_of(bufferevent_getfd(c->bev), c->peer, sizeof(c->peer));
	pthread_mutex_lock(&ct->lock);
	n = ct->nconns;
	log = n > c->h->max_conns && refusal_logged(ct);
	pthread_mutex_unlock(&ct->lock);
	if (n <= c->h->max_conns)
		return 0;
	if (log)
		LOG_WARN("http: closing the connection from %s: %zu connections open, the "
		         "limit is %zu",
		         c->peer, n, c->h->max_conns);
	return -1;
}

/* The value of header name in head (n bytes), malloc'd, or NULL. */
static char *find_header(const char *head, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = head, *end = head + n; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t line = (size_t)((eol ? eol : end) - p);
		if (line > len && p[len] == ':' && !strncasecmp(p, name, len)) {
			const char *v = p + len + 1, *stop = p + line;
			while (v < stop && (*v == ' ' || *v == '\t'))
				v++;
			while (stop > v && (stop[-1] == '\r' || stop[-1] == ' '))
				stop--;
			return strndup(v, (size_t)(stop - v));
		}
		p += line + 1;
	}
	return NULL;
}

/*
 * The first request's headers are in: does it show credentials? A
 * connection without them counts against its peer until it closes, and is
 * refused when the peer already holds the limit of such connections.
 * Connections are judged here, never earlier: one address may be a
 * thousand clients with credentials (hollow kubelets on 127.0.0.1), whose
 * connections must not be turned away for the anonymous ones beside them.
 * 0, or -1 when the connection is to be closed.
 */
static int judge(struct conn *c, const char *auth)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	bool ok;

	if (c->h->credentials_ok)
		ok = c->h->credentials_ok(c->h->arg, ssl, auth);
	else
		ok = SSL_get0_peer_certificate(ssl) && SSL_get_verify_result(ssl) == X509_V_OK;
	c->held = false;
	if (!ok) {
		struct httpd_counts *ct = c->h->ct;
		size_t unauth;
		bool log = false;

		pthread_mutex_lock(&ct->lock);
		unauth = (size_t)(intptr_t)hmap_get(&ct->unauth, c->peer);
		if (unauth >= c->h->max_unauth)
			log = refusal_logged(ct);
		else
			unauth_add(ct, c->peer, 1);
		pthread_mutex_unlock(&ct->lock);
		if (unauth >= c->h->max_unauth) {
			if (log)
				LOG_WARN("http: closing the connection from %s: %zu of its "
				         "connections show no credentials, the limit is %zu",
				         c->peer, unauth, c->h->max_unauth);
			return -1;
		}
		c->counted = true;
		c->provisional = c->h->bearer_unjudged && auth && !strncmp(auth, "Bearer ", 7);
	}
	arm(c, c->h->request_timeout_s);
	return 0;
}

static int inspect(struct conn *c)
{
	struct evhttp_connection *evcon = NULL;
	char *auth = find_header(c->head, c->nhead, "Authorization");
	int rc = judge(c, auth);

	free(auth);
	if (rc == 0 && c->counted && !c->provisional) {
		/* evhttp's callback argument is its connection. It checks a body
		 * against the limit once its read callback — deferred, so after
		 * this — has parsed the headers. */
		bufferevent_getcb(c->bev, NULL, NULL, NULL, (void **)&evcon);
		if (evcon)
			evhttp_connection_set_max_body_size(evcon, HTTPD_PREAUTH_MAX_BODY);
	}
	return rc;
}

/* ---- HTTP/2: a session on evhttp's bufferevent ------------------------------------- */

static void dispatch_in_scope(struct httpd *h, void (*fn)(void *req, void *arg), void *req);

static long h2_admit(void *arg, struct h2_stream *s)
{
	struct conn *c = arg;

	if (!c->h)
		return -1;
	if (c->held &&
	    judge(c, evhttp_find_header(h2_in_headers(s), "Authorization")) < 0)
		return -1;
	if (!c->counted || c->provisional)
		return 0;
	/* Without credentials, a few requests at a time: what a client's
	 * first moment asks at once (a kubelet's registration, its Lease and
	 * its pods, before its certificate exists) goes through, and the
	 * connection's pre-auth bodies stay bounded. The rest are refused. */
	if (h2_open_streams(h2_session(s)) > HTTPD_PREAUTH_MAX_STREAMS)
		return H2_REFUSE_STREAM;
	return (long)HTTPD_PREAUTH_MAX_BODY;
}

static void h2_call(void *req, void *arg)
{
	struct httpd *h = arg;
	h->h2_handler(req, h->arg);
}

static void h2_dispatch(void *arg, struct h2_stream *s)
{
	struct conn *c = arg;

	if (!c->h)
		return;
	evtimer_del(c->deadline);
	dispatch_in_scope(c->h, h2_call, s);
}

/* The session is over: evhttp gets its bufferevent back, and ends it. */
static void h2_closed(void *arg, const char *why)
{
	struct conn *c = arg;

	LOG_V(4, "http2: connection from %s closed: %s", c->peer, why);
	if (!c->h)
		return;
	bufferevent_setcb(c->bev, c->ev_read, c->ev_write, c->ev_event, c->ev_arg);
	conn_drop(c, BEV_EVENT_EOF);
}

/* The handshake chose h2: from its first bytes on the connection is the
 * session's. evhttp's read callback is deferred, so it has not seen them. */
static void h2_take_over(struct conn *c)
{
	struct h2_opts o = {.server = true,
	                    .max_body = c->h->max_body,
	                    .max_headers = c->h->max_headers,
	                    .idle_timeout_s = H2_SERVER_IDLE_TIMEOUT_S,
	                    .admit = h2_admit,
	                    .on_request = h2_dispatch,
	                    .on_close = h2_closed,
	                    .arg = c};

	bufferevent_getcb(c->bev, &c->ev_read, &c->ev_write, &c->ev_event, &c->ev_arg);
	free(c->head);
	c->head = NULL;
	c->h2 = h2_new(c->h->loop, c->bev, &o);
}

/*
 * Plaintext arrived (the TLS bufferevent's input grew). evhttp may already
 * have consumed earlier lines, so the first request's headers are copied as
 * they come; once they are complete (or too long for evhttp anyway) the
 * connection is judged and this callback goes.
 */
static void on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	struct evbuffer_ptr at;
	size_t n;
	char *end;
	int rc;

	if (!c->h || !info->n_added || !c->held)
		return;
	if (!c->started && conn_start(c) < 0) {
		conn_drop(c, BEV_EVENT_ERROR);
		return;
	}
	if (c->h->h2_handler && tls_alpn_h2(bufferevent_openssl_get_ssl(c->bev))) {
		evbuffer_remove_cb_entry(in, c->watch);
		c->watch = NULL;
		h2_take_over(c);
		return;
	}
	if (!c->head && !(c->head = malloc(c->h->max_headers + 1)))
		abort();
	n = info->n_added < c->h->max_headers - c->nhead ? info->n_added
	                                                 : c->h->max_headers - c->nhead;
	evbuffer_ptr_set(in, &at, info->orig_size, EVBUFFER_PTR_SET);
	if (evbuffer_copyout_from(in, &at, c->head + c->nhead, n) > 0)
		c->nhead += n;
	end = memmem(c->head, c->nhead, "\r\n\r\n", 4);
	if (!end && c->nhead < c->h->max_headers)
		return;
	if (end)
		c->nhead = (size_t)(end - c->head) + 4;
	rc = inspect(c);
	free(c->head);
	c->head = NULL;
	evbuffer_remove_cb_entry(in, c->watch);
	c->watch = NULL;
	if (rc < 0)
		conn_drop(c, BEV_EVENT_ERROR);
}

/*
 * evhttp writes a reply's headers into the connection's output and then
 * moves the body's chains after them; TLS writes a chain at a time, so a
 * small reply went out as two records in two send(2)s (a GET: two writes,
 * where nginx makes one). Once the body has arrived behind the headers, a
 * small reply is made one chain: one record, one write. A larger one goes
 * as it is (the API server makes a large body contiguous itself). Not for
 * HTTP/2, whose frames are copies into the buffer already.
 */
#define COALESCE_MAX (16u << 10)

static void on_output(struct evbuffer *out, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	size_t len = evbuffer_get_length(out);

	if (c->h2 || !info->n_added || len > COALESCE_MAX ||
	    evbuffer_peek(out, -1, NULL, NULL, 0) < 2)
		return;
	evbuffer_pullup(out, -1);
}

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
	struct httpd *h = arg;
	SSL *ssl = SSL_new(h->tls);
	struct conn *c = calloc(1, sizeof(*c));

	if (!c || !ssl)
		abort();
	c->h = h;
	c->held = true;
	if (h->cert_cb)
		SSL_set_cert_cb(ssl, h->cert_cb, h->cert_arg);
	c->bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
	                                        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!c->bev || !(c->deadline = evtimer_new(base, on_deadline, c)))
		abort();
	SSL_set_ex_data(ssl, conn_index, c);
	c->watch = evbuffer_add_cb(bufferevent_get_input(c->bev), on_input, c);
	if (!evbuffer_add_cb(bufferevent_get_output(c->bev), on_output, c))
		abort();
	pthread_mutex_lock(&h->ct->lock);
	h->ct->nconns++;
	pthread_mutex_unlock(&h->ct->lock);
	if ((c->next = h->conns))
		c->next->prev = c;
	h->conns = c;
	arm(c, h->header_timeout_s);
	return c->bev;
}

static struct conn *conn_of(struct evhttp_request *req)
{
	SSL *ssl = httpd_ssl(req);
	return ssl ? SSL_get_ex_data(ssl, conn_index) : NULL;
}

/*
 * accept() failed with something other than a retriable error — EMFILE
 * above all. The socket stays readable, so a listener left on would spin
 * (and libevent would log each turn): pause it, as Go's server does, and
 * say so once per pause.
 */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct httpd *h = server_of(lev);
	int err = EVUTIL_SOCKET_ERROR();
	struct timeval tv;

	(void)arg; /* evhttp's */
	if (!h)
		return;
	h->backoff_ms = h->backoff_ms ? h->backoff_ms * 2 : ACCEPT_BACKOFF_MIN_MS;
	if (h->backoff_ms > ACCEPT_BACKOFF_MAX_MS)
		h->backoff_ms = ACCEPT_BACKOFF_MAX_MS;
	LOG_ERROR("http: Accept error: accept tcp %s:%d: accept4: %s; retrying in %dms", h->address,
	          h->port, evutil_socket_error_to_string(err), h->backoff_ms);
	evconnlistener_disable(lev);
	tv.tv_sec = h->backoff_ms / 1000;
	tv.tv_usec = (h->backoff_ms % 1000) * 1000;
	/* Real time, whatever the clock: this waits for the kernel, not for
	 * the cluster's timers. */
	evtimer_add(h->resume, &tv);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct httpd *h = arg;
	(void)fd;
	(void)what;
	evconnlistener_enable(h->listener);
}

/* An accept that works again ends the back-off. */
static void calm(struct httpd *h)
{
	h->backoff_ms = 0;
}

static void dispatch_in_scope(struct httpd *h, void (*fn)(void *req, void *arg), void *req)
{
	const struct log_scope *prev = log_scope_enter(h->scope);
	calm(h);
	fn(req, h);
	log_scope_enter(prev);
}

static void h1_call(void *req, void *arg)
{
	struct httpd *h = arg;
	h->handler(req, h->arg);
}

static void dispatch(struct evhttp_request *req, void *arg)
{
	struct httpd *h = arg;
	struct conn *c = conn_of(req);

	/* The first request is in whole: no deadline but evhttp's from now. */
	if (c)
		evtimer_del(c->deadline);
	dispatch_in_scope(h, h1_call, req);
}

/* A listening socket on address:port that other sockets may bind too
 * (SO_REUSEPORT): the kernel spreads new connections over them, a loop
 * each. Go's backlog (the kernel's somaxconn), not libevent's 128. */
static int listen_reuseport(const char *address, int port, evutil_socket_t *out)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int fd, e;

	if (evutil_inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		sl = sizeof(*v4);
	} else if (evutil_inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		sl = sizeof(*v6);
	} else {
		return err_set(ERR_INVALID, "listen on %s:%d: not an IP address", address, port);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &(int){1}, sizeof(int)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, SOMAXCONN) < 0) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return err_set(ERR_IO, "listen on %s:%d: %s", address, port, strerror(e));
	}
	*out = fd;
	return 0;
}

/* Accept on fd (ours from now on). */
static int accept_on(struct httpd *h, evutil_socket_t fd)
{
	if (!(h->sock = evhttp_accept_socket_with_handle(h->http, fd))) {
		close(fd);
		return err_set(ERR_IO, "listen on %s:%d: cannot accept", h->address, h->port);
	}
	return 0;
}

static int bind_new(struct httpd *h, const struct httpd_opts *o)
{
	struct sockaddr_storage ss;
	ev_socklen_t sl = sizeof(ss);
	evutil_socket_t fd;

	snprintf(h->address, sizeof(h->address), "%s", o->bind_address);
	if (o->reuse_port) {
		if (listen_reuseport(o->bind_address, o->port, &fd) < 0 || accept_on(h, fd) < 0)
			return -1;
	} else if (!(h->sock = evhttp_bind_socket_with_handle(h->http, o->bind_address,
	                                                      (ev_uint16_t)o->port))) {
		return err_set(ERR_IO, "listen on %s:%d: %s", o->bind_address, o->port,
		               evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	if (getsockname(evhttp_bound_socket_get_fd(h->sock), (struct sockaddr *)&ss, &sl) == 0)
		h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                                         : ((struct sockaddr_in *)&ss)->sin_port);
	if (!(h->ct = calloc(1, sizeof(*h->ct))))
		abort();
	pthread_mutex_init(&h->ct->lock, NULL);
	h->ct->refs = 1;
	return 0;
}

/* A socket of its own on first's address and port (first was made with
 * reuse_port), and first's counts. */
static int bind_shared(struct httpd *h, struct httpd *first)
{
	evutil_socket_t fd;

	snprintf(h->address, sizeof(h->address), "%s", first->address);
	h->port = first->port;
	if (listen_reuseport(first->address, first->port, &fd) < 0 || accept_on(h, fd) < 0)
		return -1;
	h->ct = first->ct;
	pthread_mutex_lock(&h->ct->lock);
	h->ct->refs++;
	pthread_mutex_unlock(&h->ct->lock);
	return 0;
}

static void counts_release(struct httpd_counts *ct)
{
	bool last;

	pthread_mutex_lock(&ct->lock);
	last = --ct->refs == 0;
	pthread_mutex_unlock(&ct->lock);
	if (!last)
		return;
	hmap_free(&ct->unauth);
	pthread_mutex_destroy(&ct->lock);
	free(ct);
}

struct httpd *httpd_new(struct loop *loop, SSL_CTX *tls, const struct httpd_opts *o,
                        httpd_handler handler, void *arg)
{
	struct httpd *h = calloc(1, sizeof(*h));

	if (!h)
		abort();
	if (conn_index < 0) /* once; the loop thread of the first server */
		conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, conn_free);
	h->loop = loop;
	h->tls = tls;
	h->h2_handler = o->h2_handler;
	h->idle_timeout_s = o->idle_timeout_s > 0 ? o->idle_timeout_s : 300;
	h->max_body = o->max_body;
	h->credentials_ok = o->credentials_ok;
	h->bearer_unjudged = o->bearer_unjudged;
	h->cert_cb = o->cert_cb;
	h->cert_arg = o->cert_arg;
	h->max_headers = o->max_headers;
	h->header_timeout_s =
	    o->header_timeout_s > 0 ? o->header_timeout_s : HTTPD_HEADER_TIMEOUT_S;
	h->request_timeout_s =
	    o->request_timeout_s > 0 ? o->request_timeout_s : HTTPD_REQUEST_TIMEOUT_S;
	h->max_unauth = o->max_unauthenticated_per_peer ? o->max_unauthenticated_per_peer
	                                                : HTTPD_MAX_UNAUTH_PER_PEER;
	h->max_conns = o->max_connections ? o->max_connections : fd_budget();
	h->handler = handler;
	h->scope = log_scope_current();
	h->arg = arg;
	h->http = evhttp_new(loop_base(loop));
	evhttp_set_bevcb(h->http, make_bev, h);
	evhttp_set_gencb(h->http, dispatch, h);
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
	                                        EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE |
	                                        EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS);
	evhttp_set_max_body_size(h->http, (ev_ssize_t)o->max_body);
	evhttp_set_max_headers_size(h->http, (ev_ssize_t)o->max_headers);
	evhttp_set_timeout(h->http, h->idle_timeout_s);
	evhttp_set_default_content_type(h->http, "application/json");
	if ((o->share ? bind_shared(h, o->share) : bind_new(h, o)) < 0) {
		evhttp_free(h->http);
		free(h);
		return NULL;
	}
	/* Without TCP_NODELAY a small reply waits 40 ms for a delayed ACK. Linux
	 * hands the listener's setting to every accepted socket. */
	setsockopt(evhttp_bound_socket_get_fd(h->sock), IPPROTO_TCP, TCP_NODELAY, &(int){1},
	           sizeof(int));
	h->listener = evhttp_bound_socket_get_listener(h->sock);
	if (!(h->resume = evtimer_new(loop_base(loop), on_resume, h)))
		abort();
	servers_add(h);
	evconnlistener_set_error_cb(h->listener, on_accept_error);
	return h;
}

void httpd_free(struct httpd *h)
{
	if (!h)
		return;
	servers_remove(h);
	/* HTTP/2 streams hear that their connection is going while the server
	 * (and whoever handles them) is still whole. */
	for (struct conn *c = h->conns; c; c = c->next)
		if (c->h2)
			h2_close(c->h2, "server shutting down");
	evhttp_free(h->http);
	/* What evhttp_free left for the loop to finish must not come back here. */
	for (struct conn *c = h->conns; c; c = c->next) {
		c->h = NULL;
		evtimer_del(c->deadline);
	}
	counts_release(h->ct);
	if (h->resume)
		event_free(h->resume);
	free(h);
}

enum evhttp_cmd_type httpd_method(const char *name)
{
	static const struct {
		const char *name;
		enum evhttp_cmd_type cmd;
	} methods[] = {{"GET", EVHTTP_REQ_GET},         {"POST", EVHTTP_REQ_POST},
	               {"PUT", EVHTTP_REQ_PUT},         {"PATCH", EVHTTP_REQ_PATCH},
	               {"DELETE", EVHTTP_REQ_DELETE},   {"HEAD", EVHTTP_REQ_HEAD},
	               {"OPTIONS", EVHTTP_REQ_OPTIONS}, {"CONNECT", EVHTTP_REQ_CONNECT},
	               {"TRACE", EVHTTP_REQ_TRACE}};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(name, methods[i].name))
			return methods[i].cmd;
	return 0;
}

int httpd_port(const struct httpd *h)
{
	return h->port;
}

SSL *httpd_ssl(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	return bev ? bufferevent_openssl_get_ssl(bev) : NULL;
}

static struct conn *h2_conn(struct h2_stream *s)
{
	return h2_arg(h2_session(s));
}

SSL *httpd_h2_ssl(struct h2_stream *s)
{
	return bufferevent_openssl_get_ssl(h2_conn(s)->bev);
}

const char *httpd_h2_peer(struct h2_stream *s, char *buf, size_t n)
{
	char ip[64];
	int port = peer_of(bufferevent_getfd(h2_conn(s)->bev), ip, sizeof(ip));

	snprintf(buf, n, "%s:%d", ip, port);
	return buf;
}

/* The handler judged a token credentials_ok could not (bearer_unjudged). */
static void judged(struct conn *c, struct evhttp_connection *evcon, bool ok)
{
	if (!c || !c->h)
		return;
	if (ok && c->counted) {
		uncount(c);
		if (evcon)
			evhttp_connection_set_max_body_size(evcon, (ev_ssize_t)c->h->max_body);
	} else if (!ok && c->provisional) {
		c->provisional = false;
		if (evcon)
			evhttp_connection_set_max_body_size(evcon, HTTPD_PREAUTH_MAX_BODY);
	}
}

void httpd_credentials_judged(struct evhttp_request *req, bool ok)
{
	judged(conn_of(req), evhttp_request_get_connection(req), ok);
}

void httpd_h2_credentials_judged(struct h2_stream *s, bool ok)
{
	judged(h2_session(s) ? h2_conn(s) : NULL, NULL, ok);
}

size_t httpd_unsent(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void httpd_stream_no_timeout(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	/* In libevent 2.1 -1 means "the 50 s default", not "none": a quiet
	 * watch would be cut. A day outlives any watch's timeoutSeconds. */
	if (conn)
		evhttp_connection_set_timeout(conn, HTTPD_STREAM_TIMEOUT_S);
}

const char *httpd_peer(struct evhttp_request *req, char *buf, size_t n)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	const char *addr = NULL;
	ev_uint16_t port = 0;

	if (conn)
		evhttp_connection_get_peer(conn, (char **)&addr, &port);
	snprintf(buf, n, "%s:%u", addr ? addr : "?", port);
	return buf;
}

void httpd_reply(struct evhttp_request *req, int code, const char *reason, const char *ct,
                 const char *body)
{
	struct evbuffer *b = evbuffer_new();
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ct);
	evbuffer_add(b, body, strlen(body));
	evhttp_send_reply(req, code, reason, b);
	evbuffer_free(b);
}
