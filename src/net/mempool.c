#include "net/mempool.h"

#include <event2/event.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The size classes, by capacity: powers of two, and OpenSSL's buffers. */
static const size_t classes[] = {1024, 2048, 4096, 8192, 16384, 18432, 32768};
#define NCLASSES (sizeof(classes) / sizeof(classes[0]))
#define NO_CLASS NCLASSES

struct freelists {
	void *block[NCLASSES][MEMPOOL_KEEP];
	int n[NCLASSES];
};

static pthread_key_t lists_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static atomic_size_t reused;

static void lists_free(void *arg)
{
	struct freelists *fl = arg;

	for (size_t c = 0; c < NCLASSES; c++)
		while (fl->n[c])
			free(fl->block[c][--fl->n[c]]);
	free(fl);
}

static void key_init(void)
{
	if (pthread_key_create(&lists_key, lists_free) != 0)
		abort();
}

/* This thread's lists, made on first use (NULL if that fails: no pooling). */
static struct freelists *my_lists(void)
{
	struct freelists *fl;

	pthread_once(&key_once, key_init);
	if ((fl = pthread_getspecific(lists_key)))
		return fl;
	if (!(fl = calloc(1, sizeof(*fl))) || pthread_setspecific(lists_key, fl) != 0) {
		free(fl);
		return NULL;
	}
	return fl;
}

/* The class a request of n bytes takes a block of. */
static size_t class_of(size_t n)
{
	if (n < MEMPOOL_MIN || n > MEMPOOL_MAX)
		return NO_CLASS;
	for (size_t c = 0;; c++)
		if (n <= classes[c])
			return c;
}

/* The class a block of usable size u can serve: the largest not above u,
 * if u is not much more (a larger block is not kept as a smaller one). */
static size_t class_holding(size_t u)
{
	for (size_t c = NCLASSES; c-- > 0;)
		if (classes[c] <= u)
			return u - classes[c] < 64 ? c : NO_CLASS;
	return NO_CLASS;
}

static void *mempool_malloc(size_t n)
{
	size_t c = class_of(n);
	struct freelists *fl = c != NO_CLASS ? my_lists() : NULL;

	if (fl && fl->n[c]) {
		atomic_fetch_add_explicit(&reused, 1, memory_order_relaxed);
		return fl->block[c][--fl->n[c]];
	}
	return malloc(c != NO_CLASS ? classes[c] : n);
}

static void mempool_free(void *p)
{
	size_t c = p ? class_holding(malloc_usable_size(p)) : NO_CLASS;
	struct freelists *fl = c != NO_CLASS ? my_lists() : NULL;

	if (fl && fl->n[c] < MEMPOOL_KEEP) {
		fl->block[c][fl->n[c]++] = p;
		return;
	}
	free(p);
}

static void *mempool_realloc(void *p, size_t n)
{
	if (!p)
		return mempool_malloc(n);
	return realloc(p, n);
}

size_t mempool_reused(void)
{
	return atomic_load(&reused);
}

static void *ossl_malloc(size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return mempool_malloc(n);
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return mempool_realloc(p, n);
}

static void ossl_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	mempool_free(p);
}

bool mempool_install(void)
{
	event_set_mem_functions(mempool_malloc, mempool_realloc, mempool_free);
	return CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free) == 1;
}
