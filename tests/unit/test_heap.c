/* heap: which malloc the process runs on, and heap_trim handing freed pages
 * back. Built twice: as every suite, on glibc's malloc, and as
 * test_heap_jemalloc, linked with jemalloc as the cube executable is
 * (HEAP_TEST_JEMALLOC; tests/CMakeLists.txt). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HEAP_TEST_JEMALLOC
/* The executable's settings, as main.c gives them, but pages freed are
 * never purged by decay: only heap_trim hands them back. */
const char *malloc_conf = "background_thread:true,dirty_decay_ms:-1";
#endif

#define BLOCKS 1024
#define BLOCK (32u << 10) /* on the heap for both: below glibc's mmap threshold */
#define MiB (1024L * 1024)

static long resident_bytes(void)
{
	long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

static void test_names_the_allocator(void **state)
{
	const char *name = heap_allocator();
	(void)state;

#if defined(HEAP_TEST_JEMALLOC)
	assert_int_equal(strncmp(name, "jemalloc 5.", 11), 0);
	assert_true(heap_returns_pages());
#elif defined(__SANITIZE_ADDRESS__)
	assert_string_equal(name, "AddressSanitizer's");
	assert_false(heap_returns_pages());
#else
	assert_int_equal(strncmp(name, "glibc 2.", 8), 0);
	assert_false(heap_returns_pages());
#endif
	assert_ptr_equal(heap_allocator(), name);
}

/*
 * 32 MiB in blocks, each followed by a small block that stays, so freeing
 * them leaves holes neither allocator gives back by itself here (glibc:
 * not at the heap's top; jemalloc: no decay). heap_trim gives back all but
 * the pages the small blocks share.
 */
static void test_trim_gives_freed_pages_back(void **state)
{
	static void *block[BLOCKS], *pin[BLOCKS];
	long before, freed, trimmed;
	(void)state;

#if defined(__SANITIZE_ADDRESS__)
	skip(); /* the sanitizer's malloc keeps freed blocks in quarantine */
#endif
	heap_trim();
	before = resident_bytes();
	for (int i = 0; i < BLOCKS; i++) {
		block[i] = malloc(BLOCK);
		pin[i] = malloc(64);
		assert_non_null(block[i]);
		assert_non_null(pin[i]);
		memset(block[i], 0xa5, BLOCK);
	}
	for (int i = 0; i < BLOCKS; i++)
		free(block[i]);
	freed = resident_bytes();
	heap_trim();
	trimmed = resident_bytes();
	for (int i = 0; i < BLOCKS; i++)
		free(pin[i]);
	print_message("resident: %ld MiB before, %ld after the free, %ld after heap_trim\n",
		      before / MiB, freed / MiB, trimmed / MiB);
	assert_true(freed - before >= 24 * MiB);
	/* glibc keeps each hole's first page (the pin and the free chunk's
	 * header): 1,024 pages of 8,192. */
	assert_true(trimmed - before <= (freed - before) / 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_the_allocator),
		cmocka_unit_test(test_trim_gives_freed_pages_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
