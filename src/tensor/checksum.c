/* checksum.c — the checksum's lanes, tail and finish around the ISA's block kernel (see checksum.h). */
#include "tensor/checksum.h"

#include <string.h>

#include "core/hash.h"
#include "tensor/kernels.h"

uint64_t tern_checksum(const void *p, size_t n, uint64_t seed) {
    uint64_t acc[16];
    for (int j = 0; j < 16; j++)
        acc[j] = tern_mix64(seed + (uint64_t)j * TERN_CHECKSUM_G);
    const size_t blocks = n / 128;
    tern_kernels()->checksum_blocks(acc, p, blocks, 0);
    if (n % 128) {
        uint8_t last[128] = {0};
        memcpy(last, (const uint8_t *)p + blocks * 128, n % 128);
        tern_kernels_portable.checksum_blocks(acc, last, 1, blocks);
    }
    uint64_t h = tern_mix64(seed ^ (uint64_t)n);
    for (int j = 0; j < 16; j++)
        h = tern_mix64(h ^ acc[j]);
    return h;
}
