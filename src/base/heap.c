#include "base/heap.h"

#include <gnu/libc-version.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

/*
 * jemalloc's control interface, declared weak so that this file links
 * without jemalloc (tests, sanitizer builds) and finds it when it is there,
 * linked or preloaded. Not <jemalloc/jemalloc.h>: with jemalloc's prefix-less
 * Debian build that header also redeclares malloc and friends.
 */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
	__attribute__((weak));

/* jemalloc's "arena.<i>.purge" for every arena (MALLCTL_ARENAS_ALL). */
#define JE_PURGE_ALL "arena.4096.purge"

static char allocator_name[96];

static void name_allocator(void)
{
	const char *version;
	size_t len = sizeof(version);

#if defined(__SANITIZE_ADDRESS__)
	/* The sanitizer's malloc, whatever else is linked or preloaded. */
	(void)version, (void)len;
	snprintf(allocator_name, sizeof(allocator_name), "AddressSanitizer's");
	return;
#endif
	if (mallctl && mallctl("version", &version, &len, NULL, 0) == 0)
		snprintf(allocator_name, sizeof(allocator_name), "jemalloc %s", version);
	else
		snprintf(allocator_name, sizeof(allocator_name), "glibc %s",
			 gnu_get_libc_version());
}

const char *heap_allocator(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, name_allocator);
	return allocator_name;
}

bool heap_returns_pages(void)
{
	bool on = false;
	size_t len = sizeof(on);

	return mallctl && mallctl("background_thread", &on, &len, NULL, 0) == 0 && on;
}

void heap_trim(void)
{
	if (mallctl)
		mallctl(JE_PURGE_ALL, NULL, NULL, NULL, 0);
	else
		malloc_trim(0);
}

void heap_thread_lean(void)
{
	unsigned first = 0;
	bool off = false;

	if (!mallctl)
		return;
	mallctl("thread.arena", NULL, NULL, &first, sizeof(first));
	mallctl("thread.tcache.enabled", NULL, NULL, &off, sizeof(off));
}
