#include "base/log.h"

#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int log_verbosity;
static int log_fd = 2;

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
