/* mempool: the blocks OpenSSL and libevent take and give back on every
 * read and write come back from a per-thread list; every other allocation,
 * and free() of what the libraries hand out, behave as malloc's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "net/mempool.h"
#include "pki/pki.h"

#include "base/clock.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void test_a_freed_block_of_a_class_is_taken_again(void **state)
{
	size_t before = mempool_reused();
	char *p = OPENSSL_malloc(17000), *q;

	(void)state;
	assert_non_null(p);
	memset(p, 'a', 17000);
	OPENSSL_free(p);
	q = OPENSSL_malloc(16385); /* the same class: 16 KiB < n <= 18 KiB */
	assert_ptr_equal(q, p);
	assert_int_equal(mempool_reused(), before + 1);
	OPENSSL_free(q);
	/* Outside the classes: malloc's, never a list's. */
	p = OPENSSL_malloc(MEMPOOL_MAX + 1);
	assert_non_null(p);
	OPENSSL_free(p);
	p = OPENSSL_malloc(100);
	assert_non_null(p);
	OPENSSL_free(p);
	assert_int_equal(mempool_reused(), before + 1);
}

static void test_realloc_keeps_the_bytes(void **state)
{
	char *p = OPENSSL_malloc(10);

	(void)state;
	memcpy(p, "0123456789", 10);
	p = OPENSSL_realloc(p, 17000);
	assert_memory_equal(p, "0123456789", 10);
	memset(p + 10, 'x', 17000 - 10);
	p = OPENSSL_realloc(p, 100000);
	assert_memory_equal(p, "0123456789", 10);
	assert_int_equal(p[16999], 'x');
	OPENSSL_free(p);
}

/* What libevent hands its caller to free() is malloc's: free() takes it. */
static void test_libevent_strings_free_with_free(void **state)
{
	char *s = evhttp_uridecode("/api/v1/a%20b", 0, NULL);
	struct evbuffer *b = evbuffer_new();
	char *line;

	(void)state;
	assert_string_equal(s, "/api/v1/a b");
	free(s);
	evbuffer_add_printf(b, "%2000s\n", "x"); /* a chain of a pooled class */
	line = evbuffer_readln(b, NULL, EVBUFFER_EOL_LF);
	assert_int_equal(strlen(line), 2000);
	free(line);
	evbuffer_free(b);
}

static SSL_CTX *ctx(bool server, EVP_PKEY *key, X509 *cert)
{
	SSL_CTX *c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

	assert_non_null(c);
	SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
	if (server) {
		assert_int_equal(SSL_CTX_use_certificate(c, cert), 1);
		assert_int_equal(SSL_CTX_use_PrivateKey(c, key), 1);
	}
	return c;
}

/* A TLS connection over a BIO pair, both ends releasing their buffers as
 * cube's do: each write's record buffer is one given back before. */
static void test_record_buffers_come_from_the_list(void **state)
{
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	X509 *cert = pki_ca_new(key, "mempool", 3600 * NS_PER_SEC);
	SSL_CTX *sc = ctx(true, key, cert), *cc = ctx(false, NULL, NULL);
	SSL *s = SSL_new(sc), *c = SSL_new(cc);
	BIO *bs, *bc;
	char buf[16];
	size_t before;

	(void)state;
	assert_int_equal(BIO_new_bio_pair(&bc, 0, &bs, 0), 1);
	SSL_set_bio(c, bc, bc);
	SSL_set_bio(s, bs, bs);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	for (int i = 0; i < 20 && !(SSL_is_init_finished(c) && SSL_is_init_finished(s)); i++) {
		SSL_do_handshake(c);
		SSL_do_handshake(s);
	}
	assert_true(SSL_is_init_finished(c) && SSL_is_init_finished(s));
	before = mempool_reused();
	for (int i = 0; i < 100; i++) {
		assert_int_equal(SSL_write(c, "ping", 4), 4);
		assert_int_equal(SSL_read(s, buf, sizeof(buf)), 4);
	}
	assert_true(mempool_reused() - before >= 100);
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(sc);
	SSL_CTX_free(cc);
	X509_free(cert);
	EVP_PKEY_free(key);
}

/* A thread's lists go with the thread (the ASan build's leak check). */
static void *fill_and_exit(void *arg)
{
	void *p[4];

	(void)arg;
	for (int i = 0; i < 4; i++)
		p[i] = OPENSSL_malloc(4000);
	for (int i = 0; i < 4; i++)
		OPENSSL_free(p[i]);
	return NULL;
}

static void test_a_threads_lists_go_with_it(void **state)
{
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, fill_and_exit, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_freed_block_of_a_class_is_taken_again),
		cmocka_unit_test(test_realloc_keeps_the_bytes),
		cmocka_unit_test(test_libevent_strings_free_with_free),
		cmocka_unit_test(test_record_buffers_come_from_the_list),
		cmocka_unit_test(test_a_threads_lists_go_with_it),
	};

	/* Before OpenSSL or libevent allocates anything, as cube's main does. */
	if (!mempool_install())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
