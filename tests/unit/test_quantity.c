/* resource.Quantity parsing: Value() and MilliValue() as upstream rounds them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/quantity.h"
#include "base/err.h"

#include <stdlib.h>
#include <string.h>

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

/* String() after ParseQuantity: apimachinery's quantity_test.go examples. */
static void test_canonical(void **state)
{
	static const char *const cases[][2] = {
	    {"1024Mi", "1Gi"},      {"307200Ki", "300Mi"},   {"1025024Mi", "1001Gi"},
	    {"1024Gi", "1Ti"},      {"5000m", "5"},          {"0.5", "500m"},
	    {"1000M", "1G"},        {"0.001T", "1G"},        {"1000u", "1m"},
	    {"1.08", "1080m"},      {"1080000000n", "1080m"}, {".001e12", "1e9"},
	    {"0.001e0", "1e-3"},    {"1000e-12", "1e-9"},    {"00", "0"},
	    {".001Ki", "1024m"},    {".000001Ki", "1024u"},  {".000000000001Ki", "2n"},
	    {"-1024Mi", "-1Gi"},    {"1025", "1025"},        {"300M", "300M"},
	    {"1G", "1G"},           {"3k", "3k"},            {"80m", "80m"},
	    {"1n", "1n"},           {"1e3", "1e3"},          {"300e6", "300e6"},
	    {"80e-3", "80e-3"},     {"1.5", "1500m"},        {"1.5Gi", "1536Mi"},
	    {"1000m", "1"},         {"1024Ki", "1Mi"},       {"2e3", "2e3"},
	    {"1e4", "10e3"},        {"0.1m", "100u"},        {"3.001n", "4n"},
	    {"100.035k", "100.035k"}, {"0.5Mi", "512Ki"},      {"0.5Gi", "512Mi"},
	    {"1", "1"},             {" 1 ", "1"},            {"1E6", "1E6"},
	    {"+1", "+1"},           {"1000", "1k"},          {"0", "0"},
	    {"-0", "0"},            {"16Ei", "9223372036854775807"},         {"1Ki", "1Ki"},
	    {"8Ki", "8Ki"},         {"100m", "100m"},        {"1500Mi", "1500Mi"},
	    {"2048", "2048"},       {"12e-10", "2e-9"},        {"4Gi", "4Gi"},
	};
	static const char *const bad[][2] = {
	    {"", "quantities must match the regular expression "
		 "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
	    {"abc", "quantities must match"},
	    {"1Gb", "quantities must match"},
	    {"1KiB", "quantities must match"},
	    {"1.1.M", "quantities must match"},
	    {"1kk", "unable to parse quantity's suffix"},
	    {"1e", "unable to parse quantity's suffix"},
	    {"1Qi", "quantities must match"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = NULL;
		if (quantity_canonical(cases[i][0], &out) != 0)
			fail_msg("%s: %s", cases[i][0], err_msg());
		if (strcmp(out, cases[i][1]) != 0)
			fail_msg("%s: got %s, want %s", cases[i][0], out, cases[i][1]);
		free(out);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = NULL;
		assert_int_equal(quantity_canonical(bad[i][0], &out), ERR_INVALID);
		assert_null(out);
		if (strncmp(err_msg(), bad[i][1], strlen(bad[i][1])) != 0)
			fail_msg("%s: %s", bad[i][0], err_msg());
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_canonical),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
