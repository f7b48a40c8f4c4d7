/* The error table: every code maps to one HTTP status and Status reason. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/err.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_table_maps_codes(void **state)
{
	assert_int_equal(err_http_status(ERR_NOTFOUND), 404);
	assert_string_equal(err_reason(ERR_NOTFOUND), "NotFound");
	assert_string_equal(err_name(ERR_NOTFOUND), "ERR_NOTFOUND");
	assert_int_equal(err_http_status(ERR_CONFLICT), 409);
	assert_string_equal(err_reason(ERR_CONFLICT), "Conflict");
	assert_string_equal(err_reason(ERR_EXISTS), "AlreadyExists");
	assert_int_equal(err_http_status(ERR_GONE), 410);
	assert_string_equal(err_reason(ERR_GONE), "Expired");
	assert_int_equal(err_http_status(ERR_UNPROCESSABLE), 422);
	assert_string_equal(err_reason(ERR_UNPROCESSABLE), "Invalid");
	assert_int_equal(err_http_status(ERR_TOOLARGE), 413);
	assert_int_equal(err_http_status(ERR_UNSUPPORTED), 415);
	assert_int_equal(err_http_status(ERR_UNAUTHORIZED), 401);
	assert_int_equal(err_http_status(ERR_FORBIDDEN), 403);
	assert_int_equal(err_http_status(ERR_EXPIRED), 401);
}

static void test_every_row_is_consistent(void **state)
{
	/* Codes are dense from -1 down; each has a distinct name. */
	for (int c = -1; c >= ERR_PARSE; c--) {
		assert_string_not_equal(err_name(c), "ERR_UNKNOWN");
		assert_true(err_http_status(c) >= 400 && err_http_status(c) < 600);
		assert_true(strlen(err_reason(c)) > 0);
		for (int d = c - 1; d >= ERR_PARSE; d--)
			assert_string_not_equal(err_name(c), err_name(d));
	}
}

static void test_unknown_and_ok(void **state)
{
	assert_string_equal(err_name(0), "ERR_OK");
	assert_int_equal(err_http_status(0), 200);
	assert_string_equal(err_name(-999), "ERR_UNKNOWN");
	assert_int_equal(err_http_status(-999), 500);
	assert_string_equal(err_reason(-999), "InternalError");
	assert_string_equal(err_name(5), "ERR_UNKNOWN");
}

static void test_messages_set_and_wrap(void **state)
{
	err_clear();
	assert_string_equal(err_msg(), "");
	assert_int_equal(err_set(ERR_PARSE, "bad %s at %d", "PEM", 3), ERR_PARSE);
	assert_string_equal(err_msg(), "bad PEM at 3");
	assert_int_equal(err_wrap(ERR_PARSE, "load %s", "ca.crt"), ERR_PARSE);
	assert_string_equal(err_msg(), "load ca.crt: bad PEM at 3");
	err_clear();
	err_wrap(ERR_IO, "alone");
	assert_string_equal(err_msg(), "alone");
}

static void test_long_messages_truncate(void **state)
{
	char big[4000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	err_set(ERR_IO, "%s", big);
	assert_true(strlen(err_msg()) < 1024);
	err_wrap(ERR_IO, "ctx");
	assert_memory_equal(err_msg(), "ctx: xxx", 8);
}

/* A broken invariant ends the process with where it broke, in any build. */
static void test_assert_reports_and_aborts(void **state)
{
	int fds[2], status = 0;
	char out[512] = "";
	ssize_t n;
	pid_t pid;
	(void)state;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int two = 2;
		dup2(fds[1], 2);
		signal(SIGABRT, SIG_DFL);
		CUBE_ASSERT(1 + 1 == two + 1);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	assert_true(n > 0);
	assert_non_null(strstr(out, "test_err.c:"));
	assert_non_null(strstr(out, "test_assert_reports_and_aborts: assertion failed: "
				    "1 + 1 == two + 1"));
	CUBE_ASSERT(1 + 1 == 2); /* and a true one costs nothing */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_maps_codes),
		cmocka_unit_test(test_every_row_is_consistent),
		cmocka_unit_test(test_unknown_and_ok),
		cmocka_unit_test(test_messages_set_and_wrap),
		cmocka_unit_test(test_long_messages_truncate),
		cmocka_unit_test(test_assert_reports_and_aborts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
