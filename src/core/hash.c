/* hash.c — the streaming byte hash (see hash.h). */
#include "core/hash.h"

#include <string.h>

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

void tern_hasher_init(tern_hasher *s, uint64_t seed) {
    for (int k = 0; k < 4; k++)
        s->h[k] = tern_mix64(seed + 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1));
    s->n = 0;
}

void tern_hasher_feed(tern_hasher *s, const void *p, size_t n) {
    const uint8_t *b = p;
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * k, 8);
            s->h[k] = rotl(s->h[k] ^ (w * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
        }
    for (; i < n; i++)
        s->h[i & 3] = (s->h[i & 3] ^ b[i]) * 0x100000001b3ull;
    s->n += n;
}

uint64_t tern_hasher_done(const tern_hasher *s) {
    return tern_mix64(s->h[0] ^ rotl(s->h[1], 17) ^ rotl(s->h[2], 29) ^ rotl(s->h[3], 43) ^ s->n);
}

uint64_t tern_hash64(const void *p, size_t n, uint64_t seed) {
    tern_hasher s;
    tern_hasher_init(&s, seed);
    tern_hasher_feed(&s, p, n);
    return tern_hasher_done(&s);
}
