/* hmap: string-keyed open addressing — lookups, replacement, deletion, and a
 * map that only churns (keys in flight) staying free of tombstones; and
 * str_intern, the process's one copy of a string, built on it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/hmap.h"
#include "base/intern.h"

#include <pthread.h>
#include <string.h>

#include <stdio.h>

static void test_put_get_replace_delete(void **state)
{
	struct hmap m = HMAP_INIT;
	char key[32];
	(void)state;

	for (intptr_t i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "/registry/pods/default/p%ld", (long)i);
		assert_null(hmap_put(&m, key, (void *)(i + 1)));
	}
	assert_int_equal(hmap_len(&m), 1000);
	assert_ptr_equal(hmap_put(&m, "/registry/pods/default/p7", (void *)99), (void *)8);
	assert_ptr_equal(hmap_get(&m, "/registry/pods/default/p7"), (void *)99);
	for (intptr_t i = 0; i < 1000; i += 2) {
		snprintf(key, sizeof(key), "/registry/pods/default/p%ld", (long)i);
		assert_non_null(hmap_del(&m, key));
		assert_null(hmap_del(&m, key));
	}
	assert_int_equal(hmap_len(&m), 500);
	for (intptr_t i = 1; i < 1000; i += 2) {
		snprintf(key, sizeof(key), "/registry/pods/default/p%ld", (long)i);
		assert_non_null(hmap_get(&m, key));
	}
	hmap_free(&m);
}

/* 64 keys in flight, a million writes through them: the slots stay few and
 * runs short, not filled with tombstones (every lookup walked them). */
static void test_churn_leaves_no_tombstone_runs(void **state)
{
	struct hmap m = HMAP_INIT;
	char key[48];
	(void)state;

	for (long i = 0; i < 1000000; i++) {
		snprintf(key, sizeof(key), "/registry/leases/kube-node-lease/node-%ld", i);
		hmap_put(&m, key, (void *)1);
		if (i >= 64) {
			snprintf(key, sizeof(key), "/registry/leases/kube-node-lease/node-%ld", i - 64);
			assert_non_null(hmap_del(&m, key));
		}
	}
	assert_int_equal(hmap_len(&m), 64);
	assert_true(m.cap <= 256);
	assert_true(m.used < m.cap / 2);
	hmap_free(&m);
}

/* Equal strings give one pointer, whoever asks and from which thread; the
 * copy is the process's, not the caller's buffer. */
struct interner {
	const char *got[200];
};

static void *intern_many(void *arg)
{
	struct interner *t = arg;
	char buf[64];

	for (int i = 0; i < 200; i++) {
		snprintf(buf, sizeof(buf), "-----BEGIN CERTIFICATE----- %d", i % 50);
		t->got[i] = str_intern(buf);
	}
	return NULL;
}

static void test_intern_shares_one_copy(void **state)
{
	struct interner a, b;
	pthread_t ta, tb;
	char buf[32] = "https://127.0.0.1:6443";
	const char *one;

	(void)state;
	assert_null(str_intern(NULL));
	one = str_intern(buf);
	assert_ptr_not_equal(one, buf);
	buf[0] = 'X';
	assert_string_equal(one, "https://127.0.0.1:6443");
	assert_ptr_equal(str_intern("https://127.0.0.1:6443"), one);
	assert_ptr_not_equal(str_intern("https://127.0.0.1:6444"), one);
	assert_int_equal(pthread_create(&ta, NULL, intern_many, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, intern_many, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	for (int i = 0; i < 200; i++) {
		assert_ptr_equal(a.got[i], b.got[i]);
		assert_ptr_equal(a.got[i], a.got[i % 50]);
	}
	assert_ptr_not_equal(a.got[0], a.got[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_get_replace_delete),
	    cmocka_unit_test(test_churn_leaves_no_tombstone_runs),
	    cmocka_unit_test(test_intern_shares_one_copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
