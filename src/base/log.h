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
 * Thread-safety: any thread; each line is written with one write(2).
 */
#ifndef CUBE_BASE_LOG_H
#define CUBE_BASE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

extern int log_verbosity;

void log_set_verbosity(int v);
/* Send lines to `fd` instead of stderr (tests). */
void log_set_fd(int fd);

void log_write(char sev, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void log_vwrite(char sev, const char *file, int line, const char *fmt, va_list ap);
_Noreturn void log_fatal(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

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
