/*
 * log — klog-format lines on stderr.
 *
 *   E1130 09:43:01.123456    4242 certmanager.c:88] Failed to rotate: ...
 *
 * Severity letter, month+day, local time to the microsecond (from the process
 * clock, so virtual time shows in logs), thread id, file:line, then the
 * message. Messages that upstream prints are reproduced verbatim so that the
 * grep commands of the runbook find them.
 *
 * LOG_V(n, ...) checks the verbosity before its arguments are evaluated, so a
 * disabled debug line costs one comparison. LOG_FATAL exits with status 255
 * after logging, as klog.Fatal does.
 *
 * A log scope sends the lines written while it is current to one more
 * file: a hollow kubelet's <root-dir>/<name>/kubelet.log, a component's
 * log — what journalctl -u kubelet shows for one real node. The scope is
 * the thread's (log_scope_enter); work that starts later from code running
 * in a scope — timers (base/clock.h), REST calls and watches
 * (client/rest.h), an HTTPS server's handler (net/httpd.h) — takes the
 * scope with it, so everything one kubelet
 * does on a loop it shares with thousands logs to that kubelet's file.
 *
 * Thread-safety: any thread; each line is written with one write(2) per
 * destination. A scope must outlive the timers and calls made in it.
 */
#ifndef CUBE_BASE_LOG_H
#define CUBE_BASE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern int log_verbosity;

void log_set_verbosity(int v);
/* Send lines to `fd` instead of stderr (tests). */
void log_set_fd(int fd);

void log_write(char sev, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void log_vwrite(char sev, const char *file, int line, const char *fmt, va_list ap);
_Noreturn void log_fatal(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct log_scope {
	int fd;     /* the scope's file held open (O_APPEND), or -1 */
	char *path; /* else opened for each line: no descriptor held (ten
	               thousand hollow kubelets would hold ten thousand) */
	/* The scope is one node's (or component's) context, and a node has its
	 * own clock: clock_now() adds this while the scope is current (a
	 * skewed machine clock; 0 normally). Written on the scope's thread. */
	int64_t clock_skew_ns;
};

/* The scope current on this thread (NULL: none). */
const struct log_scope *log_scope_current(void);
/* Make s current on this thread (NULL: none); returns the one it replaces,
 * for log_scope_enter(prev) when the work is done. */
const struct log_scope *log_scope_enter(const struct log_scope *s);
/* A scope writing to path (created 0640, appended to), held open: 0, or
 * an error. */
int log_scope_open(struct log_scope *s, const char *path);
/* The same, opening path for each line (rarely written scopes). */
void log_scope_init_path(struct log_scope *s, const char *path);
void log_scope_close(struct log_scope *s);

/* s as klog writes a quoted value: `"`, `\` and newlines escaped. Into
 * out (n bytes, truncated), returned. */
char *log_quote(char *out, size_t n, const char *s);
/*
 * utilruntime.HandleError's line in 1.32:
 *   E... "Unhandled Error" err="<message>" logger="UnhandledError"
 * kv, when not NULL, is appended as it is (` node="node-1"`).
 */
void log_unhandled(const char *file, int line, const char *kv, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define LOG_UNHANDLED(kv, ...) log_unhandled(__FILE__, __LINE__, kv, __VA_ARGS__)
#define LOG_INFO(...) log_write('I', __FILE__, __LINE__, __VA_ARGS__)
#define LOG_WARN(...) log_write('W', __FILE__, __LINE__, __VA_ARGS__)
#define LOG_ERROR(...) log_write('E', __FILE__, __LINE__, __VA_ARGS__)
#define LOG_FATAL(...) log_fatal(__FILE__, __LINE__, __VA_ARGS__)
#define LOG_V(n, ...)                                                                              \
	do {                                                                                       \
		if (log_verbosity >= (n))                                                          \
			log_write('I', __FILE__, __LINE__, __VA_ARGS__);                           \
	} while (0)

#endif
