/* resource.Quantity parsing: Value() and MilliValue() as upstream rounds them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/quantity.h"

static int64_t v(const char *s)
{
	json_t *q = json_string(s);
	int64_t r = quantity_value(q);
	json_decref(q);
	return r;
}

static int64_t m(const char *s)
{
	json_t *q = json_string(s);
	int64_t r = quantity_milli(q);
	json_decref(q);
	return r;
}

static void test_values(void **state)
{
	(void)state;
	assert_int_equal(m("100m"), 100);
	assert_int_equal(m("1"), 1000);
	assert_int_equal(m("0.5"), 500);
	assert_int_equal(m("2.0001"), 2001); /* rounded up, as MilliValue */
	assert_int_equal(m("1500u"), 2);
	assert_int_equal(v("128974848"), 128974848);
	assert_int_equal(v("129e6"), 129000000);
	assert_int_equal(v("123Mi"), 128974848);
	assert_int_equal(v("1Gi"), INT64_C(1073741824));
	assert_int_equal(v("16Ei"), INT64_MAX); /* saturates */
	assert_int_equal(v("1.5Ki"), 1536);
	assert_int_equal(v("100m"), 1); /* Value() rounds up */
	assert_int_equal(v("110"), 110);
	assert_int_equal(v("20k"), 20000);
	assert_int_equal(v("-1"), -1);
	assert_int_equal(v("1E3"), 1000);
	assert_int_equal(m("1e-3"), 1);
}

static void test_invalid(void **state)
{
	long double out;
	(void)state;
	assert_true(quantity_parse("", &out) < 0);
	assert_true(quantity_parse("abc", &out) < 0);
	assert_true(quantity_parse("1Qi", &out) < 0);
	assert_true(quantity_parse("1e", &out) < 0);
	assert_true(quantity_parse("1.2.3", &out) < 0);
	assert_int_equal(quantity_parse("2.5Gi", &out), 0);
	assert_true(out == 2.5L * 1073741824.0L);
	assert_int_equal(v("1Qi"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
