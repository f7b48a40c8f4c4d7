#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_MSG_MAX 1024

static _Thread_local char err_buf[ERR_MSG_MAX];

struct err_row {
	int code;
	int http;
	const char *name;
	const char *reason;
};

static const struct err_row err_rows[] = {
#define ERR_ROW(name, value, http, reason) {value, http, #name, reason},
	ERR_MAP(ERR_ROW)
#undef ERR_ROW
};

static const struct err_row *err_find(int code)
{
	/* Codes are dense and start at -1, so the row is at index -code-1. */
	size_t i = (size_t)(-(long)code - 1);
	if (code >= 0 || i >= sizeof(err_rows) / sizeof(err_rows[0]))
		return NULL;
	return &err_rows[i];
}

const char *err_name(int code)
{
	const struct err_row *r = err_find(code);
	if (code == 0)
		return "ERR_OK";
	return r ? r->name : "ERR_UNKNOWN";
}

int err_http_status(int code)
{
	const struct err_row *r = err_find(code);
	if (code == 0)
		return 200;
	return r ? r->http : 500;
}

const char *err_reason(int code)
{
	const struct err_row *r = err_find(code);
	if (code == 0)
		return "";
	return r ? r->reason : "InternalError";
}

int err_vset(int code, const char *fmt, va_list ap)
{
	vsnprintf(err_buf, sizeof(err_buf), fmt, ap);
	return code;
}

int err_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(code, fmt, ap);
	va_end(ap);
	return code;
}

int err_wrap(int code, const char *fmt, ...)
{
	char prev[ERR_MSG_MAX], ctx[ERR_MSG_MAX / 2];
	va_list ap;

	memcpy(prev, err_buf, sizeof(prev));
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	/* Truncating the tail of a long message is fine: it is for humans. */
	if (prev[0])
		snprintf(err_buf, sizeof(err_buf), "%s: %.*s", ctx, ERR_MSG_MAX / 2 - 3, prev);
	else
		snprintf(err_buf, sizeof(err_buf), "%s", ctx);
	return code;
}

const char *err_msg(void)
{
	return err_buf;
}

void err_clear(void)
{
	err_buf[0] = '\0';
}

void cube_assert_fail(const char *cond, const char *file, int line, const char *func)
{
	/* Not through klog: the logger may be what is broken. */
	fprintf(stderr, "cube: internal error: %s:%d: %s: assertion failed: %s\n", file, line,
		func, cond);
	fflush(stderr);
	abort();
}
