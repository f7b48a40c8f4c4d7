/*
 * Assertions the cmocka tests share beyond cmocka's own. Include after
 * <cmocka.h> (and <string.h>).
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

#endif
