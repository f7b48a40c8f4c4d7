/* hmap: string-keyed open addressing — lookups, replacement, deletion, and a
 * map that only churns (keys in flight) staying free of tombstones. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/hmap.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_get_replace_delete),
	    cmocka_unit_test(test_churn_leaves_no_tombstone_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
