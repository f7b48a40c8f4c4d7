/* base64 both ways: RFC 4648's vectors, the url alphabet without padding
 * (JWT segments), and what each decoder must refuse. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/b64.h"

#include <stdlib.h>
#include <string.h>

static void test_rfc4648_vectors(void **state)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const std[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
	                                  "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	static const char *const url[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
	(void)state;
	for (size_t i = 0; i < 7; i++) {
		char *e = b64_encode(plain[i], strlen(plain[i]));
		char *u = b64url_encode(plain[i], strlen(plain[i]));
		assert_string_equal(e, std[i]);
		assert_string_equal(u, url[i]);
		free(e);
		free(u);
		if (i == 0)
			continue;
		size_t len = 99;
		unsigned char *d = b64_decode(std[i], &len);
		assert_int_equal(len, strlen(plain[i]));
		assert_string_equal((char *)d, plain[i]);
		free(d);
		d = b64url_decode(url[i], strlen(url[i]), &len);
		assert_int_equal(len, strlen(plain[i]));
		assert_memory_equal(d, plain[i], len);
		free(d);
	}
}

static void test_url_alphabet(void **state)
{
	static const unsigned char bytes[] = {0xfb, 0xff, 0xbf};
	size_t len;
	(void)state;
	char *u = b64url_encode(bytes, 3), *e = b64_encode(bytes, 3);
	assert_string_equal(u, "-_-_");
	assert_string_equal(e, "+/+/");
	unsigned char *d = b64url_decode(u, 4, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(d, bytes, 3);
	free(d);
	free(u);
	free(e);
	/* Only the first n characters count. */
	d = b64url_decode("Zm9vYmFy.rest", 8, &len);
	assert_string_equal((char *)d, "foobar");
	free(d);
}

static void test_refused(void **state)
{
	size_t len;
	(void)state;
	assert_null(b64_decode(NULL, &len));
	assert_null(b64_decode("", &len));
	assert_null(b64_decode("Zm9", &len));         /* unpadded */
	assert_null(b64_decode("Zm!v", &len));        /* not the alphabet */
	assert_null(b64url_decode("Zg==", 4, &len));  /* padding is not base64url */
	assert_null(b64url_decode("+/+/", 4, &len));  /* the standard alphabet neither */
	assert_null(b64url_decode("Zm9vY", 5, &len)); /* a lone sixth of a byte */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rfc4648_vectors),
	    cmocka_unit_test(test_url_alphabet),
	    cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
