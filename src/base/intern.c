#include "base/intern.h"

#include "base/hmap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t interned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmap interned = HMAP_INIT; /* text -> its copy */

const char *str_intern(const char *s)
{
	char *copy;

	if (!s)
		return NULL;
	pthread_mutex_lock(&interned_lock);
	if (!(copy = hmap_get(&interned, s))) {
		if (!(copy = strdup(s)))
			abort();
		hmap_put(&interned, s, copy);
	}
	pthread_mutex_unlock(&interned_lock);
	return copy;
}
