/* klog lines: header format, virtual time, and levels checked before the
 * arguments are evaluated. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/clock.h"
#include "base/log.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pipefd[2];

static int setup(void **state)
{
	setenv("TZ", "UTC", 1);
	clock_use_virtual(INT64_C(1796032800) * NS_PER_SEC + 123456 * NS_PER_US);
	if (pipe(pipefd) < 0)
		return -1;
	log_set_fd(pipefd[1]);
	return 0;
}

static int teardown(void **state)
{
	log_set_fd(2);
	log_set_verbosity(0);
	close(pipefd[0]);
	close(pipefd[1]);
	clock_use_real();
	return 0;
}

static char *drain(void)
{
	static char buf[8192];
	ssize_t n = read(pipefd[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void test_klog_header(void **state)
{
	regex_t re;
	char *line;

	LOG_ERROR("%s: Certificate expiration is %s", "kubernetes.io/kube-apiserver-client-kubelet",
		  "2027-11-30");
	line = drain();
	assert_int_equal(regcomp(&re,
				 "^E1130 10:00:00\\.123456 +[0-9]+ test_log\\.c:[0-9]+\\] "
				 "kubernetes.io/kube-apiserver-client-kubelet: Certificate "
				 "expiration is 2027-11-30\n$",
				 REG_EXTENDED),
			 0);
	assert_int_equal(regexec(&re, line, 0, NULL, 0), 0);
	regfree(&re);
	LOG_WARN("w");
	assert_int_equal(drain()[0], 'W');
	LOG_INFO("i");
	assert_int_equal(drain()[0], 'I');
}

static int evaluated;

static const char *costly(void)
{
	evaluated++;
	return "x";
}

static void test_verbosity_checked_before_arguments(void **state)
{
	char *out;
	evaluated = 0;
	log_set_verbosity(2);
	LOG_V(4, "debug %s", costly());
	assert_int_equal(evaluated, 0);
	LOG_V(2, "shown %s", costly());
	assert_int_equal(evaluated, 1);
	out = drain();
	assert_non_null(strstr(out, "] shown x\n"));
	assert_null(strstr(out, "debug"));
}

static char *file_text(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static const struct log_scope *seen_scope;

static void in_timer(void *arg)
{
	(void)arg;
	seen_scope = log_scope_current();
	LOG_INFO("from the timer");
}

/* A scope's lines go to its file as well as the main stream; a timer made
 * in a scope fires in it, whatever is current when it fires; a path scope
 * holds no descriptor between lines. */
static void test_scopes(void **state)
{
	char dir[] = "/tmp/cube-log-XXXXXX", held[64], by_path[64];
	struct log_scope a, b;
	struct timer_set *set = timers_new();
	struct timer *t;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(held, sizeof(held), "%s/a.log", dir);
	snprintf(by_path, sizeof(by_path), "%s/b.log", dir);
	assert_int_equal(log_scope_open(&a, held), 0);
	log_scope_init_path(&b, by_path);
	assert_int_equal(b.fd, -1);

	assert_null(log_scope_enter(&a));
	LOG_INFO("in a");
	t = timer_new(set, in_timer, NULL);
	assert_ptr_equal(log_scope_enter(&b), &a);
	LOG_INFO("in b");
	timer_after(t, NS_PER_SEC);
	clock_advance(2 * NS_PER_SEC);
	timers_run(set);
	assert_ptr_equal(seen_scope, &a);
	assert_ptr_equal(log_scope_current(), &b); /* restored after the timer */
	assert_ptr_equal(log_scope_enter(NULL), &b);
	LOG_INFO("in none");

	assert_non_null(strstr(file_text(held), "] in a\n"));
	assert_non_null(strstr(file_text(held), "] from the timer\n"));
	assert_null(strstr(file_text(held), "in b"));
	assert_non_null(strstr(file_text(by_path), "] in b\n"));
	assert_null(strstr(file_text(by_path), "timer"));
	assert_null(strstr(file_text(held), "in none"));
	assert_non_null(strstr(drain(), "] in none\n")); /* the main stream has them all */

	timer_free(t);
	timers_free(set);
	log_scope_close(&a);
	log_scope_close(&b);
	unlink(held);
	unlink(by_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_klog_header),
		cmocka_unit_test(test_verbosity_checked_before_arguments),
		cmocka_unit_test(test_scopes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
