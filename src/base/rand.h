/*
 * rand — the one seedable random source.
 *
 * Rotation jitter, backoff jitter, generated names: everything random that is
 * not cryptographic comes from here, so a run can be replayed by seeding it
 * (CUBE_SEED=<n> in the environment, or rand_seed()). Key material never
 * comes from here: OpenSSL's RAND does that.
 *
 * xoshiro256** seeded through splitmix64. The process source is protected by
 * a mutex; a struct rng owned by one thread needs no lock.
 */
#ifndef CUBE_BASE_RAND_H
#define CUBE_BASE_RAND_H

#include <stddef.h>
#include <stdint.h>

struct rng {
	uint64_t s[4];
};

void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_u64(struct rng *r);
/* Uniform in [0, 1). */
double rng_double(struct rng *r);
/* Uniform in [0, n); n > 0. */
uint64_t rng_below(struct rng *r, uint64_t n);

/* The process source: seeded from CUBE_SEED, else from the OS. */
void rand_seed(uint64_t seed);
uint64_t rand_u64(void);
double rand_double(void);
uint64_t rand_below(uint64_t n);
/* A random (version 4) UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", into out. */
#define RAND_UUID_LEN 36
char *rand_uuid(char out[RAND_UUID_LEN + 1]);
/* Fill `out` with n lowercase alphanumerics (generateName suffixes). */
void rand_alnum(char *out, size_t n);

#endif
