/* kv_type.h — the element formats of the KV cache, as llama.cpp's --cache-type-k / --cache-type-v name them.
 *
 * A cache row of n values (one position of one layer: kv_heads x head_dim) is stored as
 *     bf16, f16, f32  n elements;
 *     q8_0            n / 32 of ggml's q8_0 blocks: an f16 step d, 32 signed bytes q; value d q;
 *     q4_0            n / 32 of ggml's q4_0 blocks: an f16 step d, 16 bytes holding value j's 4-bit code in the
 *                     low nibble of byte j and value j + 16's in the high nibble; value d (q - 8).
 * Block formats need n a multiple of 32; as every head starts a block (head_dim a multiple of 32), a run of 8 or
 * 16 values at an element offset that is a multiple of its length lies in one block. Values are read back as
 * f32 exactly (a code times an f16 step is exact in f32), so every kernel sees the same numbers. */
#ifndef TERN_TENSOR_KV_TYPE_H
#define TERN_TENSOR_KV_TYPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
#include "core/status.h"

typedef enum tern_kv_type {
    TERN_KV_BF16 = 0, /* the default */
    TERN_KV_F16,
    TERN_KV_F32,
    TERN_KV_Q8_0,
    TERN_KV_Q4_0,
    TERN_KV_TYPE_COUNT
} tern_kv_type;

/* The type named `name` ("bf16", "f16", "f32", "q8_0", "q4_0"); an error listing the names otherwise. */
TERN_MUST_CHECK tern_err *tern_kv_type_parse(const char *name, tern_kv_type *out);
/* The type's name. */
const char *tern_kv_type_name(tern_kv_type t);
/* Values per block: 32 for q8_0 and q4_0, 1 for the float types. */
int64_t tern_kv_type_block(tern_kv_type t);
/* Bytes of n values (n a multiple of the block). */
static inline size_t tern_kv_type_bytes(tern_kv_type t, int64_t n) {
    switch (t) {
    case TERN_KV_F32: return (size_t)n * 4;
    case TERN_KV_Q8_0: return (size_t)(n / 32) * 34;
    case TERN_KV_Q4_0: return (size_t)(n / 32) * 18;
    default: return (size_t)n * 2;
    }
}
/* Stores x[n] at dst (n a multiple of the block): floats rounded to nearest even; q8_0 with step amax / 127 and
 * codes round-to-nearest-even(x 127 / amax) (ggml's x86 quantizer); q4_0 as ggml's reference quantizer. */
void tern_kv_type_store(tern_kv_type t, const float *x, void *dst, int64_t n);
/* out[n] = the values stored at src. */
void tern_kv_type_load(tern_kv_type t, const void *src, float *out, int64_t n);

/* Value i of a run of stored values starting at base (the portable kernels' accessor). */
static inline float tern_kv_type_elem(tern_kv_type t, const void *base, int64_t i) {
    const uint8_t *b = base;
    uint16_t h;
    switch (t) {
    case TERN_KV_F32: return ((const float *)base)[i];
    case TERN_KV_F16: memcpy(&h, b + 2 * i, 2); return tern_f16_to_f32(h);
    case TERN_KV_Q8_0:
        b += (i >> 5) * 34;
        memcpy(&h, b, 2);
        return (float)(int8_t)b[2 + (i & 31)] * tern_f16_to_f32(h);
    case TERN_KV_Q4_0:
        b += (i >> 5) * 18;
        memcpy(&h, b, 2);
        return (float)(((b[2 + (i & 15)] >> (i & 16 ? 4 : 0)) & 15) - 8) * tern_f16_to_f32(h);
    default: memcpy(&h, b + 2 * i, 2); return tern_bf16_to_f32(h);
    }
}

#endif
