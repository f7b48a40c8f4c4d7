#include "cube/control.h"

#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CONTROL_MAX_REQUEST (64 * 1024)
/* A reply: "status" of ten thousand nodes is about 1.2 MB. */
#define CONTROL_MAX_REPLY (64u << 20)

struct control {
	struct evconnlistener *listener;
	char *path;
	control_fn fn;
	void *arg;
};

char *control_path(const char *dir)
{
	return file_join(dir, "cube.sock");
}

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return err_set(ERR_INVALID, "socket path %s is longer than %zu bytes", path,
		               sizeof(sa->sun_path) - 1);
	memcpy(sa->sun_path, path, strlen(path));
	return 0;
}

/* ---- the server ------------------------------------------------------------------ */

static void on_sent(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_free(bev);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static void reply(struct bufferevent *bev, json_t *r)
{
	char *text = jx_dump(r);

	json_decref(r);
	bufferevent_setcb(bev, NULL, on_sent, on_event, NULL);
	bufferevent_disable(bev, EV_READ);
	evbuffer_add_printf(bufferevent_get_output(bev), "%s\n", text);
	free(text);
}

static json_t *error_reply(const char *fmt, const char *what)
{
	char msg[512];
	snprintf(msg, sizeof(msg), fmt, what);
	return json_pack("{s:s}", "error", msg);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct control *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;
	char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
	json_t *words;

	if (!line) {
		if (evbuffer_get_length(in) > CONTROL_MAX_REQUEST)
			reply(bev, error_reply("%s", "request too long"));
		return;
	}
	words = jx_parse(line, len);
	free(line);
	if (!json_is_array(words) || json_array_size(words) == 0) {
		reply(bev, error_reply("%s", "a request is a JSON array of words"));
	} else {
		size_t i;
		json_t *w;
		bool strings = true;
		json_array_foreach(words, i, w) strings &= json_is_string(w);
		reply(bev, strings ? c->fn(c->arg, words)
		                   : error_reply("%s", "a request is a JSON array of words"));
	}
	json_decref(words);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
	struct bufferevent *bev =
	    bufferevent_socket_new(evconnlistener_get_base(l), fd, BEV_OPT_CLOSE_ON_FREE);

	if (!bev) {
		close(fd);
		return;
	}
	bufferevent_setcb(bev, on_read, NULL, on_event, arg);
	bufferevent_enable(bev, EV_READ);
}

struct control *control_listen(struct loop *loop, const char *path, control_fn fn, void *arg)
{
	struct control *c;
	struct sockaddr_un sa;
	json_t *probe = json_pack("[s]", "ping"), *answer;
	mode_t old;

	if (unix_addr(path, &sa) < 0)
		return NULL;
	/* Someone answering there is a live cluster: never take its socket. */
	if ((answer = control_call(path, probe, 2))) {
		json_decref(answer);
		json_decref(probe);
		err_set(ERR_CONFLICT, "another cube is running on this data dir (%s answers)",
		        path);
		return NULL;
	}
	json_decref(probe);
	unlink(path);
	if (!(c = calloc(1, sizeof(*c))))
		abort();
	c->fn = fn;
	c->arg = arg;
	c->path = strdup(path);
	old = umask(0077);
	c->listener = evconnlistener_new_bind(loop_base(loop), on_accept, c,
	                                      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
	                                      (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (!c->listener) {
		err_set(ERR_IO, "listen on %s: %s", path, strerror(errno));
		free(c->path);
		free(c);
		return NULL;
	}
	return c;
}

void control_free(struct control *c)
{
	if (!c)
		return;
	evconnlistener_free(c->listener);
	unlink(c->path);
	free(c->path);
	free(c);
}

/* ---- the client ------------------------------------------------------------------ */

static int send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

json_t *control_call(const char *path, const json_t *words, int timeout_s)
{
	struct sockaddr_un sa;
	struct timeval tv = {.tv_sec = timeout_s};
	char *text, *buf = NULL, *eol = NULL;
	size_t got = 0, cap = 0;
	int fd;
	json_t *r = NULL;

	if (unix_addr(path, &sa) < 0)
		return NULL;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		err_set(ERR_IO, "socket: %s", strerror(errno));
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err_set(ERR_UNAVAILABLE, "no cube up is running there (%s: %s)", path,
		        strerror(errno));
		close(fd);
		return NULL;
	}
	text = jx_dump(words);
	if (send_all(fd, text, strlen(text)) < 0 || send_all(fd, "\n", 1) < 0) {
		err_set(ERR_IO, "%s: %s", path, strerror(errno));
		goto out;
	}
	while (!eol && got < CONTROL_MAX_REPLY) {
		ssize_t n;
		if (got == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 65536)))
			abort();
		n = recv(fd, buf + got, cap - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		eol = memchr(buf + got, '\n', (size_t)n);
		got += (size_t)n;
	}
	if (!eol) {
		err_set(ERR_UNAVAILABLE, "%s did not answer%s", path,
		        got >= CONTROL_MAX_REPLY ? " in one line" : "");
		goto out;
	}
	r = jx_parse(buf, (size_t)(eol - buf));
out:
	free(buf);
	free(text);
	close(fd);
	return r;
}
