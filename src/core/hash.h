/* hash.h — 64-bit mixing and hashing shared by everything that needs a quick, non-cryptographic hash: seeds
 * and ids (splitmix64), cache keys and the packed-weights cache's checksum. */
#ifndef TERN_CORE_HASH_H
#define TERN_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64's finalizer: every input bit reaches every output bit. */
static inline uint64_t tern_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The next value of a splitmix64 sequence whose state is *s. */
static inline uint64_t tern_splitmix64(uint64_t *s) { return tern_mix64(*s += 0x9e3779b97f4a7c15ull); }

/* A streaming hash of bytes: four independent lanes over 32-byte strides (several bytes a cycle). */
typedef struct tern_hasher {
    uint64_t h[4];
    uint64_t n;
} tern_hasher;

void tern_hasher_init(tern_hasher *s, uint64_t seed);
/* Feeds n bytes; every call but the last must feed a multiple of 32 (the result is then that of one call). */
void tern_hasher_feed(tern_hasher *s, const void *p, size_t n);
uint64_t tern_hasher_done(const tern_hasher *s);
/* The hash of n bytes in one call. */
uint64_t tern_hash64(const void *p, size_t n, uint64_t seed);

#endif
