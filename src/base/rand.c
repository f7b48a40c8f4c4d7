#include "base/rand.h"

#include <stdio.h>
#include <string.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/random.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

uint64_t rng_u64(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double rng_double(struct rng *r)
{
	/* The top 53 bits give every double in [0,1) with spacing 2^-53. */
	return (double)(rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
	/* Reject the short tail so every value is equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = rng_u64(r);
	while (x >= limit);
	return x % n;
}

static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rng proc_rng;
static bool proc_seeded;

static void proc_seed_once(void)
{
	const char *env = getenv("CUBE_SEED");
	uint64_t seed;

	if (proc_seeded)
		return;
	if (env && *env)
		seed = strtoull(env, NULL, 0);
	else if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		abort();
	rng_seed(&proc_rng, seed);
	proc_seeded = true;
}

void rand_seed(uint64_t seed)
{
	pthread_mutex_lock(&proc_lock);
	rng_seed(&proc_rng, seed);
	proc_seeded = true;
	pthread_mutex_unlock(&proc_lock);
}

uint64_t rand_u64(void)
{
	uint64_t v;
	pthread_mutex_lock(&proc_lock);
	proc_seed_once();
	v = rng_u64(&proc_rng);
	pthread_mutex_unlock(&proc_lock);
	return v;
}

double rand_double(void)
{
	return (double)(rand_u64() >> 11) * 0x1.0p-53;
}

uint64_t rand_below(uint64_t n)
{
	uint64_t v;
	pthread_mutex_lock(&proc_lock);
	proc_seed_once();
	v = rng_below(&proc_rng, n);
	pthread_mutex_unlock(&proc_lock);
	return v;
}

void rand_alnum(char *out, size_t n)
{
	/* Kubernetes' generateName alphabet: no vowels, no look-alikes. */
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[rand_below(sizeof(alphabet) - 1)];
}

char *rand_uuid(char out[RAND_UUID_LEN + 1])
{
	unsigned char b[16];
	uint64_t x = rand_u64(), y = rand_u64();

	memcpy(b, &x, 8);
	memcpy(b + 8, &y, 8);
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(out, RAND_UUID_LEN + 1,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		 b[15]);
	return out;
}
