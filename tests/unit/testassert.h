/*
 * What the cmocka tests share beyond cmocka's own: assertions, and a
 * runner for a suite ctest runs in parts. Include after <cmocka.h> (and
 * <string.h>, <stdio.h>, <stdlib.h>).
 */
#ifndef CUBE_TESTS_TESTASSERT_H
#define CUBE_TESTS_TESTASSERT_H

/* s (a string, may be NULL) contains sub; both printed when it does not. */
#define assert_contains(s, sub)                                                                    \
	do {                                                                                       \
		const char *s_ = (s);                                                              \
		if (!s_ || !strstr(s_, (sub))) {                                                   \
			print_error("\"%s\"\n  does not contain \"%s\"\n", s_ ? s_ : "(null)",     \
			            (sub));                                                        \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

/*
 * Run tests, or with CUBE_TEST_PART="K/N" in the environment the Kth of
 * every N of them (K from 0): tests/CMakeLists.txt runs a long suite whose
 * tests mostly wait as N ctest entries at once.
 */
#define run_tests_in_part(tests) run_part_(#tests, tests, sizeof(tests) / sizeof((tests)[0]))

static inline int run_part_(const char *name, const struct CMUnitTest *tests, size_t n)
{
	const char *part = getenv("CUBE_TEST_PART");
	struct CMUnitTest *mine = calloc(n ? n : 1, sizeof(*mine));
	unsigned k = 0, of = 1;
	size_t m = 0;
	int rc;

	if (!mine)
		abort();
	if (part && (sscanf(part, "%u/%u", &k, &of) != 2 || !of || k >= of)) {
		fprintf(stderr, "CUBE_TEST_PART=%s: want K/N with K < N\n", part);
		abort();
	}
	for (size_t i = 0; i < n; i++)
		if (i % of == k)
			mine[m++] = tests[i];
	rc = _cmocka_run_group_tests(name, mine, m, NULL, NULL);
	free(mine);
	return rc;
}

#endif
