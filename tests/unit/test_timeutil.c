/* Durations and timestamps as Go and apimachinery print them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/timeutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_duration_parse(void **state)
{
	static const struct {
		const char *in;
		int64_t ns;
	} ok[] = {
		{"0", 0},
		{"8760h", 8760 * NS_PER_HOUR},
		{"1h30m", 90 * NS_PER_MIN},
		{"2.5s", 2500 * NS_PER_MS},
		{"300ms", 300 * NS_PER_MS},
		{"30d", 30 * NS_PER_DAY},
		{"-2h", -2 * NS_PER_HOUR},
		{"+5m", 5 * NS_PER_MIN},
		{"1h0m0s", NS_PER_HOUR},
		{"10us", 10 * NS_PER_US},
		{"7ns", 7},
		{".5s", 500 * NS_PER_MS},
	};
	static const char *const bad[] = {"", "h", "10", "10x", "--1s", "1h-2m", "1h 2m", "abc"};
	int64_t ns;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(duration_parse(ok[i].in, &ns), 0);
		assert_int_equal(ns, ok[i].ns);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(duration_parse(bad[i], &ns), ERR_INVALID);
		assert_non_null(strstr(err_msg(), "duration"));
	}
}

static void test_duration_format_is_go(void **state)
{
	static const struct {
		int64_t ns;
		const char *out;
	} cases[] = {
		{0, "0s"},
		{1, "1ns"},
		{1500, "1.5\xc2\xb5s"},
		{2500 * NS_PER_MS, "2.5s"},
		{100 * NS_PER_MS, "100ms"},
		{5 * NS_PER_MIN, "5m0s"},
		{NS_PER_HOUR, "1h0m0s"},
		{8760 * NS_PER_HOUR, "8760h0m0s"},
		{90 * NS_PER_MIN + 500 * NS_PER_MS, "1h30m0.5s"},
		{-2 * NS_PER_SEC, "-2s"},
	};
	char buf[DURATION_BUF];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(duration_format(cases[i].ns, buf), cases[i].out);
}

static void test_short_human(void **state)
{
	char buf[DURATION_BUF];
	assert_string_equal(duration_short_human(-5 * NS_PER_SEC, buf), "<invalid>");
	assert_string_equal(duration_short_human(-500 * NS_PER_MS, buf), "0s");
	assert_string_equal(duration_short_human(45 * NS_PER_SEC, buf), "45s");
	assert_string_equal(duration_short_human(59 * NS_PER_MIN, buf), "59m");
	assert_string_equal(duration_short_human(5 * NS_PER_HOUR, buf), "5h");
	assert_string_equal(duration_short_human(364 * NS_PER_DAY, buf), "364d");
	assert_string_equal(duration_short_human(3650 * NS_PER_DAY, buf), "10y");
}

static void test_human(void **state)
{
	char buf[DURATION_BUF];
	assert_string_equal(duration_human(119 * NS_PER_SEC, buf), "119s");
	assert_string_equal(duration_human(200 * NS_PER_SEC, buf), "3m20s");
	assert_string_equal(duration_human(5 * NS_PER_MIN, buf), "5m");
	assert_string_equal(duration_human(90 * NS_PER_MIN, buf), "90m");
	assert_string_equal(duration_human(200 * NS_PER_MIN, buf), "3h20m");
	assert_string_equal(duration_human(30 * NS_PER_HOUR, buf), "30h");
	assert_string_equal(duration_human(50 * NS_PER_HOUR, buf), "2d2h");
	assert_string_equal(duration_human(30 * NS_PER_DAY, buf), "30d");
	assert_string_equal(duration_human(800 * NS_PER_DAY, buf), "2y70d");
	assert_string_equal(duration_human(3650 * NS_PER_DAY, buf), "10y");
}

static void test_rfc3339(void **state)
{
	char buf[TIME_BUF];
	int64_t t = INT64_C(1796032800) * NS_PER_SEC + 123456789;
	int64_t back;

	assert_string_equal(time_format_rfc3339(t, buf), "2026-11-30T10:00:00Z");
	assert_string_equal(time_format_rfc3339_micro(t, buf), "2026-11-30T10:00:00.123456Z");
	assert_int_equal(time_parse_rfc3339("2026-11-30T10:00:00Z", &back), 0);
	assert_int_equal(back, INT64_C(1796032800) * NS_PER_SEC);
	assert_int_equal(time_parse_rfc3339("2026-11-30T10:00:00.5Z", &back), 0);
	assert_int_equal(back, INT64_C(1796032800) * NS_PER_SEC + 500 * NS_PER_MS);
	assert_int_equal(time_parse_rfc3339("2026-11-30T11:00:00+01:00", &back), 0);
	assert_int_equal(back, INT64_C(1796032800) * NS_PER_SEC);
	assert_int_equal(time_parse_rfc3339("2026-11-30 10:00:00", &back), ERR_INVALID);
	assert_int_equal(time_parse_rfc3339("2026-11-30T10:00:00", &back), ERR_INVALID);
	assert_int_equal(time_parse_rfc3339("2026-11-30T10:00:00Zjunk", &back), ERR_INVALID);
}

static void test_rfc3339_local(void **state)
{
	char buf[TIME_BUF];
	int64_t t = INT64_C(1796032800) * NS_PER_SEC;

	setenv("TZ", "UTC", 1);
	tzset();
	assert_string_equal(time_format_rfc3339_local(t, buf), "2026-11-30T10:00:00Z");
	setenv("TZ", "Europe/Paris", 1);
	tzset();
	assert_string_equal(time_format_rfc3339_local(t, buf), "2026-11-30T11:00:00+01:00");
	setenv("TZ", "UTC", 1);
	tzset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_parse),
		cmocka_unit_test(test_duration_format_is_go),
		cmocka_unit_test(test_short_human),
		cmocka_unit_test(test_human),
		cmocka_unit_test(test_rfc3339),
		cmocka_unit_test(test_rfc3339_local),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
