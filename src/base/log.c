#include "base/log.h"

#include "base/clock.h"
#include "base/err.h"

#include <errno.h>
#include <fcntl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int log_verbosity;
static int log_fd = 2;
static __thread const struct log_scope *scope;

const struct log_scope *log_scope_current(void)
{
	return scope;
}

const struct log_scope *log_scope_enter(const struct log_scope *s)
{
	const struct log_scope *prev = scope;
	scope = s;
	return prev;
}

static int open_log(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

int log_scope_open(struct log_scope *s, const char *path)
{
	s->path = NULL;
	s->fd = open_log(path);
	return s->fd < 0 ? err_set(ERR_IO, "open %s: %s", path, strerror(errno)) : 0;
}

void log_scope_init_path(struct log_scope *s, const char *path)
{
	s->fd = -1;
	if (!(s->path = strdup(path)))
		abort();
}

void log_scope_close(struct log_scope *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->path);
	s->fd = -1;
	s->path = NULL;
}

static void scope_write(const struct log_scope *s, const char *buf, size_t n)
{
	int fd = s->fd >= 0 ? s->fd : s->path ? open_log(s->path) : -1;

	if (fd >= 0 && write(fd, buf, n) < 0) {
		/* The main stream has the line. */
	}
	if (fd >= 0 && s->fd < 0)
		close(fd);
}

void log_set_verbosity(int v)
{
	log_verbosity = v;
}

void log_set_fd(int fd)
{
	log_fd = fd;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

void log_vwrite(char sev, const char *file, int line, const char *fmt, va_list ap)
{
	char buf[8192];
	int64_t now = clock_now();
	time_t sec = (time_t)(now / NS_PER_SEC);
	struct tm tm;
	size_t n;
	int r;

	localtime_r(&sec, &tm);
	r = snprintf(buf, sizeof(buf), "%c%02d%02d %02d:%02d:%02d.%06ld %7ld %s:%d] ", sev,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (long)((now % NS_PER_SEC) / NS_PER_US), (long)syscall(SYS_gettid),
		     base_name(file), line);
	n = (size_t)r;
	r = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	n += r < 0 ? 0 : ((size_t)r < sizeof(buf) - n - 1 ? (size_t)r : sizeof(buf) - n - 2);
	if (n == 0 || buf[n - 1] != '\n')
		buf[n++] = '\n';
	/* One write per line keeps lines whole when threads log at once. */
	if (write(log_fd, buf, n) < 0) {
		/* Nowhere left to report it. */
	}
	if (scope)
		scope_write(scope, buf, n);
}

void log_write(char sev, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(sev, file, line, fmt, ap);
	va_end(ap);
}

char *log_quote(char *out, size_t n, const char *s)
{
	size_t o = 0;

	for (; s && *s && o + 3 < n; s++) {
		if (*s == '"' || *s == '\\' || *s == '\n') {
			out[o++] = '\\';
			out[o++] = *s == '\n' ? 'n' : *s;
		} else {
			out[o++] = *s;
		}
	}
	if (n)
		out[o] = '\0';
	return out;
}

void log_unhandled(const char *file, int line, const char *kv, const char *fmt, ...)
{
	char msg[4096], q[8200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_write('E', file, line, "\"Unhandled Error\" err=\"%s\" logger=\"UnhandledError\"%s",
		  log_quote(q, sizeof(q), msg), kv ? kv : "");
}

void log_fatal(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite('F', file, line, fmt, ap);
	va_end(ap);
	exit(255);
}
