/*
 * err — the one table of error codes.
 *
 * Every fallible function in cube returns 0 or a negative code from this
 * table. A code maps to an HTTP status and a Kubernetes Status `reason`, so
 * the API server can turn any failure into a faithful Status object. The
 * human-readable detail goes to a per-thread message (err_set / err_msg),
 * which the caller that finally reports the error prints or sends.
 *
 * Thread-safety: the message buffer is thread-local; everything else is
 * constant.
 */
#ifndef CUBE_BASE_ERR_H
#define CUBE_BASE_ERR_H

#include <stdarg.h>

/* X(name, value, http status, Status reason) */
#define ERR_MAP(X)                                                                                 \
	X(ERR_INVALID, -1, 400, "BadRequest")                                                      \
	X(ERR_NOTFOUND, -2, 404, "NotFound")                                                       \
	X(ERR_EXISTS, -3, 409, "AlreadyExists")                                                    \
	X(ERR_CONFLICT, -4, 409, "Conflict")                                                       \
	X(ERR_GONE, -5, 410, "Expired")                                                            \
	X(ERR_UNAUTHORIZED, -6, 401, "Unauthorized")                                               \
	X(ERR_FORBIDDEN, -7, 403, "Forbidden")                                                     \
	X(ERR_UNPROCESSABLE, -8, 422, "Invalid")                                                   \
	X(ERR_TOOLARGE, -9, 413, "RequestEntityTooLarge")                                          \
	X(ERR_UNSUPPORTED, -10, 415, "UnsupportedMediaType")                                       \
	X(ERR_METHOD, -11, 405, "MethodNotAllowed")                                                \
	X(ERR_NOTACCEPTABLE, -12, 406, "NotAcceptable")                                            \
	X(ERR_TIMEOUT, -13, 504, "Timeout")                                                        \
	X(ERR_UNAVAILABLE, -14, 503, "ServiceUnavailable")                                         \
	X(ERR_TOOMANY, -15, 429, "TooManyRequests")                                                \
	X(ERR_IO, -16, 500, "InternalError")                                                       \
	X(ERR_INTERNAL, -17, 500, "InternalError")                                                 \
	X(ERR_CRYPTO, -18, 500, "InternalError")                                                   \
	X(ERR_EXPIRED, -19, 401, "Unauthorized")                                                   \
	X(ERR_PARSE, -20, 400, "BadRequest")

enum err_code {
	ERR_OK = 0,
#define ERR_ENUM(name, value, http, reason) name = value,
	ERR_MAP(ERR_ENUM)
#undef ERR_ENUM
};

/* "ERR_NOTFOUND" for -2; "ERR_UNKNOWN" for a code outside the table. */
const char *err_name(int code);
/* The HTTP status for a code; 500 for an unknown one, 200 for 0. */
int err_http_status(int code);
/* The Kubernetes Status reason ("NotFound", ...); "" for 0. */
const char *err_reason(int code);

/*
 * Record the detail of a failure for this thread and return `code`, so a
 * failing path reads `return err_set(ERR_PARSE, "bad PEM in %s", path);`.
 */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int err_vset(int code, const char *fmt, va_list ap);
/* Prepend context: "ctx: <previous message>". Returns code. */
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message set on this thread ("" if none). Valid until the next set. */
const char *err_msg(void);
/* Forget the message. */
void err_clear(void);

/*
 * An invariant the code relies on (the ones module headers state): when it
 * does not hold, cube has a bug, and going on would corrupt state. Reports
 * the condition, file:line and function on stderr and aborts — in release
 * builds too, unlike assert(3).
 */
#define CUBE_ASSERT(cond)                                                                          \
	((cond) ? (void)0 : cube_assert_fail(#cond, __FILE__, __LINE__, __func__))
__attribute__((noreturn)) void cube_assert_fail(const char *cond, const char *file, int line,
						const char *func);

#endif
