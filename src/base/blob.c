#include "base/blob.h"

#include "base/alloc.h"

#include <event2/buffer.h>
#include <string.h>

struct blob *blob_new(const char *data, size_t len)
{
	struct blob *b = xmalloc(sizeof(*b) + len + 1);

	b->len = len;
	b->refs = 1;
	memcpy(b->data, data, len);
	b->data[len] = '\0';
	return b;
}

struct blob *blob_ref(struct blob *b)
{
	if (b)
		__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
	return b;
}

void blob_unref(struct blob *b)
{
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(b);
}

static void release(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	blob_unref(arg);
}

void blob_to_evbuffer(struct blob *b, struct evbuffer *buf)
{
	if (!b->len)
		return;
	if (evbuffer_add_reference(buf, b->data, b->len, release, blob_ref(b)) < 0)
		abort();
}
