/*
 * blob — immutable bytes with a reference count: one serialisation of an
 * object, shared by everyone who sends it (a GET, a LIST, every watcher)
 * and handed to libevent without a copy (blob_to_evbuffer).
 *
 * Ownership: blob_new and blob_ref return a reference; blob_unref drops
 * one (NULL is a no-op); the last frees the bytes. Threads: any — the
 * count is atomic, so a reference may end on another thread.
 */
#ifndef CUBE_BASE_BLOB_H
#define CUBE_BASE_BLOB_H

#include <stddef.h>

struct evbuffer;

struct blob {
	size_t len;
	int refs;    /* atomic */
	char data[]; /* len bytes, then a NUL (text stays a C string) */
};

/* A copy of data (len bytes). */
struct blob *blob_new(const char *data, size_t len);
struct blob *blob_ref(struct blob *b);
void blob_unref(struct blob *b);
/* Append b's bytes to buf by reference: buf holds a reference of its own
 * until it has sent (or dropped) them. */
void blob_to_evbuffer(struct blob *b, struct evbuffer *buf);

#endif
