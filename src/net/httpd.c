#include "net/httpd.h"

#include "base/err.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct httpd {
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	SSL_CTX *tls;
	httpd_handler handler;
	void *arg;
	int port;
};

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
	struct httpd *h = arg;
	SSL *ssl = SSL_new(h->tls);
	return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
					      BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
}

static void dispatch(struct evhttp_request *req, void *arg)
{
	struct httpd *h = arg;
	h->handler(req, h->arg);
}

struct httpd *httpd_new(struct loop *loop, SSL_CTX *tls, const struct httpd_opts *o,
			httpd_handler handler, void *arg)
{
	struct httpd *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss;
	ev_socklen_t sl = sizeof(ss);

	if (!h)
		abort();
	h->tls = tls;
	h->handler = handler;
	h->arg = arg;
	h->http = evhttp_new(loop_base(loop));
	evhttp_set_bevcb(h->http, make_bev, h);
	evhttp_set_gencb(h->http, dispatch, h);
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
						    EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS);
	evhttp_set_max_body_size(h->http, (ev_ssize_t)o->max_body);
	evhttp_set_max_headers_size(h->http, (ev_ssize_t)o->max_headers);
	evhttp_set_timeout(h->http, o->idle_timeout_s > 0 ? o->idle_timeout_s : 300);
	evhttp_set_default_content_type(h->http, "application/json");
	h->sock = evhttp_bind_socket_with_handle(h->http, o->bind_address, (ev_uint16_t)o->port);
	if (!h->sock) {
		err_set(ERR_IO, "listen on %s:%d: %s", o->bind_address, o->port,
			evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		evhttp_free(h->http);
		free(h);
		return NULL;
	}
	/* Without TCP_NODELAY a small reply waits 40 ms for a delayed ACK. Linux
	 * hands the listener's setting to every accepted socket. */
	setsockopt(evhttp_bound_socket_get_fd(h->sock), IPPROTO_TCP, TCP_NODELAY, &(int){1},
		   sizeof(int));
	if (getsockname(evhttp_bound_socket_get_fd(h->sock), (struct sockaddr *)&ss, &sl) == 0)
		h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							 : ((struct sockaddr_in *)&ss)->sin_port);
	return h;
}

void httpd_free(struct httpd *h)
{
	if (!h)
		return;
	evhttp_free(h->http);
	free(h);
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
