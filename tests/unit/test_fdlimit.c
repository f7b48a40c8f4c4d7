/* fdlimit: the soft limit raised to the hard one, and a need either met
 * (limits raised as far as allowed) or refused with a message that says
 * how many, the limit and how to raise it. Cases that lower the hard limit
 * run in a child: a process without CAP_SYS_RESOURCE cannot undo that. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/fdlimit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static long nr_open(void)
{
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");
	long n = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld", &n), 1);
	fclose(f);
	return n;
}

static struct rlimit limits(void)
{
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	return rl;
}

static void set_soft(rlim_t soft)
{
	struct rlimit rl = limits();
	rl.rlim_cur = soft;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* The hard limit as fdlimit_raise leaves the soft one: capped at nr_open. */
static rlim_t reachable(void)
{
	rlim_t hard = limits().rlim_max, nr = (rlim_t)nr_open();
	return hard == RLIM_INFINITY || hard > nr ? nr : hard;
}

static void test_raise_lifts_soft_to_hard(void **state)
{
	set_soft(64);
	assert_int_equal(fdlimit_current(), 64);
	assert_int_equal(fdlimit_raise(), 0);
	assert_true(limits().rlim_cur == reachable());
	assert_int_equal(fdlimit_current(), (long)reachable());
	/* Again: nothing to do. */
	assert_int_equal(fdlimit_raise(), 0);
	assert_true(limits().rlim_cur == reachable());
}

static void test_ensure_within_the_soft_limit_changes_nothing(void **state)
{
	set_soft(200);
	assert_int_equal(fdlimit_ensure(150, "test"), 0);
	assert_int_equal(limits().rlim_cur, 200);
	fdlimit_raise();
}

static void test_ensure_raises_the_soft_limit_to_the_hard_one(void **state)
{
	if (reachable() < 1000)
		skip();
	set_soft(64);
	assert_int_equal(fdlimit_ensure(1000, "test"), 0);
	assert_true(limits().rlim_cur == reachable());
}

static void test_ensure_past_nr_open_is_refused_even_for_root(void **state)
{
	long nr = nr_open();
	struct rlimit before = limits();
	char want[64];

	err_clear();
	assert_int_equal(fdlimit_ensure(nr + 1, "cube up --nodes 999999"), ERR_UNAVAILABLE);
	snprintf(want, sizeof(want), "needs %ld file descriptors", nr + 1);
	assert_non_null(strstr(err_msg(), "cube up --nodes 999999"));
	assert_non_null(strstr(err_msg(), want));
	snprintf(want, sizeof(want), "fs.nr_open = %ld", nr);
	assert_non_null(strstr(err_msg(), want));
	assert_non_null(strstr(err_msg(), "sysctl -w fs.nr_open="));
	assert_true(limits().rlim_cur == before.rlim_cur && limits().rlim_max == before.rlim_max);
}

/* In a child: hard and soft limits 256, then a need of 5000. Exit 0 when
 * what happened is right for the child's privilege. */
static int child_above_hard(void)
{
	struct rlimit low = {256, 256}, probe = {256, 257}, rl;
	const char *m;
	bool privileged;

	if (setrlimit(RLIMIT_NOFILE, &low) < 0)
		return 10;
	/* Root with CAP_SYS_RESOURCE may raise the hard limit back: then
	 * fdlimit_ensure must do so; without it, refuse. */
	privileged = setrlimit(RLIMIT_NOFILE, &probe) == 0;
	if (setrlimit(RLIMIT_NOFILE, &low) < 0)
		return 11;
	if (privileged) {
		if (fdlimit_ensure(5000, "cube up --nodes 500") != 0)
			return 12;
		getrlimit(RLIMIT_NOFILE, &rl);
		return rl.rlim_cur == 5000 && rl.rlim_max == 5000 ? 0 : 13;
	}
	if (fdlimit_ensure(5000, "cube up --nodes 500") != ERR_UNAVAILABLE)
		return 14;
	m = err_msg();
	if (!strstr(m, "cube up --nodes 500 needs 5000 file descriptors") ||
	    !strstr(m, "may open at most 256") || !strstr(m, "ulimit -n 5000") ||
	    !strstr(m, "LimitNOFILE=5000") || !strstr(m, "CAP_SYS_RESOURCE")) {
		fprintf(stderr, "message: %s\n", m);
		return 15;
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur == 256 && rl.rlim_max == 256 ? 0 : 16;
}

static void test_ensure_above_the_hard_limit(void **state)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_above_hard());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raise_lifts_soft_to_hard),
		cmocka_unit_test(test_ensure_within_the_soft_limit_changes_nothing),
		cmocka_unit_test(test_ensure_raises_the_soft_limit_to_the_hard_one),
		cmocka_unit_test(test_ensure_past_nr_open_is_refused_even_for_root),
		cmocka_unit_test(test_ensure_above_the_hard_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
