/*
 * heap — which malloc the process runs on, and its free pages.
 *
 * The cube executable is linked with jemalloc (Debian's libjemalloc2) unless
 * it is built with sanitizers, whose own malloc must stay: jemalloc hands
 * pages nobody uses back to the kernel a few seconds after they are freed,
 * from a background thread, where glibc keeps a burst's free chunks resident
 * until malloc_trim walks the whole heap (0.8 s for an API server's after
 * 10,000 nodes bootstrapped; docs/performance.md). Unit tests and the
 * benchmark clients keep glibc's; a process with jemalloc preloaded
 * (LD_PRELOAD) is seen as jemalloc's too: the check is at run time.
 *
 * The executable's settings for jemalloc are in main.c (malloc_conf);
 * MALLOC_CONF in the environment adds to them, as jemalloc documents.
 *
 * Threads: any.
 */
#ifndef CUBE_BASE_HEAP_H
#define CUBE_BASE_HEAP_H

#include <stdbool.h>

/* "jemalloc 5.3.0-0-g…", "glibc 2.36", or "AddressSanitizer's" in a
 * sanitizer build: static storage. */
const char *heap_allocator(void);

/* True when the allocator gives free pages back by itself (jemalloc with
 * its background threads on): no heap_trim is needed. */
bool heap_returns_pages(void);

/* Hand whole free pages back to the kernel now (glibc: malloc_trim(0),
 * which holds each arena's lock while it walks it; jemalloc: purge every
 * arena's unused dirty pages). */
void heap_trim(void);

/* For a thread that allocates little, now and then (loop_work's workers):
 * with jemalloc it takes the first arena's pages and keeps no cache of its
 * own. An idle thread's cache is never given back (jemalloc empties it only
 * as the thread allocates), and an arena of its own holds partly used pages
 * of every size (docs/performance.md). Under glibc, nothing. */
void heap_thread_lean(void);

#endif
