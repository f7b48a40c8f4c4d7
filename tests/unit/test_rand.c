/* The seedable random source: replayable, and uniform enough for jitter. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/rand.h"

#include <string.h>

static void test_same_seed_same_sequence(void **state)
{
	struct rng a, b, c;
	rng_seed(&a, 42);
	rng_seed(&b, 42);
	rng_seed(&c, 43);
	for (int i = 0; i < 1000; i++) {
		uint64_t x = rng_u64(&a);
		assert_int_equal(x, rng_u64(&b));
		if (i == 0)
			assert_int_not_equal(x, rng_u64(&c));
	}
}

static void test_double_in_unit_interval_and_uniform(void **state)
{
	struct rng r;
	int buckets[10] = {0};
	const int n = 100000;

	rng_seed(&r, 7);
	for (int i = 0; i < n; i++) {
		double d = rng_double(&r);
		assert_true(d >= 0.0 && d < 1.0);
		buckets[(int)(d * 10)]++;
	}
	/* Each decile within 5 % of n/10: a loose chi-by-eye, 10+ sigma away. */
	for (int i = 0; i < 10; i++)
		assert_true(buckets[i] > n / 10 * 95 / 100 && buckets[i] < n / 10 * 105 / 100);
}

static void test_below_bounds(void **state)
{
	struct rng r;
	int seen[7] = {0};
	rng_seed(&r, 1);
	for (int i = 0; i < 7000; i++) {
		uint64_t v = rng_below(&r, 7);
		assert_true(v < 7);
		seen[v]++;
	}
	for (int i = 0; i < 7; i++)
		assert_true(seen[i] > 800);
}

static void test_process_source_replays(void **state)
{
	uint64_t first[5];
	rand_seed(99);
	for (int i = 0; i < 5; i++)
		first[i] = rand_u64();
	rand_seed(99);
	for (int i = 0; i < 5; i++)
		assert_int_equal(rand_u64(), first[i]);
	assert_true(rand_double() < 1.0);
	assert_true(rand_below(3) < 3);
}

static void test_alnum_alphabet(void **state)
{
	char s[65] = {0};
	rand_seed(5);
	rand_alnum(s, 64);
	for (int i = 0; i < 64; i++)
		assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", s[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_seed_same_sequence),
		cmocka_unit_test(test_double_in_unit_interval_and_uniform),
		cmocka_unit_test(test_below_bounds),
		cmocka_unit_test(test_process_source_replays),
		cmocka_unit_test(test_alnum_alphabet),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
