/*
 * mempool — what OpenSSL and libevent allocate, through per-thread free
 * lists for the block sizes they take and give back on every read and
 * write.
 *
 * Each read event takes a libevent buffer chain (a power of two, 1–16 KiB)
 * that is freed once the bytes are consumed; with SSL_MODE_RELEASE_BUFFERS
 * (tls.c) each SSL_write takes a ~17 KiB record buffer and gives it back.
 * glibc serves a request of 1 KiB or more by first merging every fast-bin
 * chunk it holds (malloc_consolidate): in a process of 2,500 hollow
 * kubelets, each heartbeat also frees a few small chunks, and a fifth of
 * the process's CPU went to merging them again on every read
 * (docs/performance.md). Blocks of those sizes are kept on a free list of
 * the thread that frees them (at most MEMPOOL_KEEP per size), so the next
 * read or write takes one back without asking malloc. The blocks are
 * malloc's own, and known by malloc_usable_size: anything either library
 * hands its caller to free() may still be freed with free().
 *
 * mempool_install must run before OpenSSL or libevent allocates anything
 * (first thing in main); a process that never calls it keeps their own
 * allocators (the unit tests but test_mempool).
 *
 * Threads: any; a block freed on another thread joins that thread's list;
 * a thread's lists are freed when it exits.
 */
#ifndef CUBE_NET_MEMPOOL_H
#define CUBE_NET_MEMPOOL_H

#include <stdbool.h>
#include <stddef.h>

/* Sizes kept: libevent's chains, 1 to 16 KiB, and OpenSSL 3.0's record
 * buffers (16 KiB of plaintext, the encryption overhead, the header and
 * compression's slack: under 18 KiB), and 32 KiB. */
#define MEMPOOL_MIN 1024u
#define MEMPOOL_MAX (32u << 10)
#define MEMPOOL_KEEP 64

/* OpenSSL's and libevent's allocations through the pool: true, or false
 * when OpenSSL had already allocated (then OpenSSL keeps its own). */
bool mempool_install(void);
/* Allocations served from a free list, this process. */
size_t mempool_reused(void);

#endif
