/* qpack.h — MLX affine q4/q8 weights repacked for int8 dot-product kernels, the int8 activations they
 * multiply, and the portable definition of the product they compute.
 *
 * Packed layout. Rows go in blocks of 16 (the last block zero-padded). A block is one contiguous
 * stream, group after group; each group is
 *     scales[16] and biases[16] (the stored dtype, row r of the block at index r), then the codes:
 *     q8: group/4 chunks of 64 bytes, chunk c holding byte 4r+j = q[r][g*group + 4c + j];
 *     q4: group/8 chunks of 64 bytes, chunk c holding byte 4r+j = q[r][k+j] | q[r][k+4+j] << 4, k = g*group + 8c.
 * So one 64-byte load gives each of 16 32-bit lanes four codes of its own row: a VPDPBUSD against four
 * broadcast activation bytes adds four products to each of 16 rows at once, and a row block is read
 * front to back exactly once per pass, scales next to the codes they scale.
 *
 * The product (tern_qmm_ref). Activations are quantized per token and weight group with a power-of-two step:
 *     xs = 2^e, e the smallest integer with 127 * 2^e >= max|x| (tern_qact_exponent: within [-64, 63]),
 *     xq = round-to-nearest-even(x / xs) clamped to [-127, 127], xsum = xs * sum xq (exact),
 * and each output is, in f32 and in this order over the groups g,
 *     acc = fma(b_g, xsum_g, fma((float)idot_g, s_g * xs_g, acc)),   idot_g = sum q * xq (exact),
 * which is the dot product of the dequantized weights with the quantized activations. A token's result
 * depends only on its own activations, never on the other tokens computed with it.
 * Why a power of two: s_g * xs_g is then exact, and the kernels form it by adding e to the exponent of s_g (an
 * integer add) instead of multiplying. In the kernels' epilogue the multiplies share VPDPBUSD's pipes; two per
 * 16 VPDPBUSD instead of three raise the compute-bound ceiling from 84.2% to 88.9% of the VPDPBUSD peak. The
 * cost: a step up to twice as coarse as max|x| / 127, half a bit of the activations' resolution on average. */
#ifndef TERN_TENSOR_QPACK_H
#define TERN_TENSOR_QPACK_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/weight.h"

typedef struct tern_qpack {
    uint8_t *data;       /* the first piece's blocks */
    int owns_data;       /* 0 when the pieces lie in a caller's arena */
    int64_t rows, in, blocks;
    int bits, group;
    tern_dtype sdtype;
    size_t group_bytes;  /* scales + biases + codes of one group of one block */
    size_t block_bytes;  /* ng * group_bytes */
    /* The blocks may lie in several runs ("pieces"): piece i holds blocks [first[i], first[i + 1]) (the last up
     * to `blocks`) contiguously from piece_data[i]; first[0] = 0. One piece unless packed with a split. */
    int pieces;
    int64_t *first;
    uint8_t **piece_data;
} tern_qpack;

/* The packed bytes of block b (< p->blocks). */
static inline const uint8_t *tern_qpack_block_data(const tern_qpack *p, int64_t b) {
    int i = p->pieces - 1;
    while (i > 0 && p->first[i] > b)
        i--;
    return p->piece_data[i] + (size_t)(b - p->first[i]) * p->block_bytes;
}

/* Whether a weight can be packed: MLX affine with 4 or 8 bits, group >= 32 a power of two dividing the width. */
int tern_qpack_supported(const tern_weight *w);
/* Bytes of one group of one packed block for (bits, group, scale dtype). */
size_t tern_qpack_group_bytes(int bits, int group, tern_dtype sdtype);
/* Packs the 16 rows starting at row0 (rows past the weight's end are zero) into out[group_bytes * in/group]. */
void tern_qpack_block(const tern_weight *w, int64_t row0, uint8_t *out);
/* Bytes the packed copy of w takes (a multiple of 64). */
size_t tern_qpack_bytes(const tern_weight *w);
/* The 16-row blocks of a packable weight, and the bytes of one packed block. */
int64_t tern_qpack_blocks(const tern_weight *w);
size_t tern_qpack_block_bytes(const tern_weight *w);
/* Packs the whole weight (rows flattened over leading dims) into a new tern_qpack; *out NULL on error. With
 * `at` non-NULL (64-byte aligned, tern_qpack_bytes long) the codes go there and stay the caller's. */
tern_err *tern_qpack_create(const tern_weight *w, uint8_t *at, tern_qpack **out);
/* The same with the blocks in n pieces placed by the caller: blocks [first[i], first[i + 1]) at at[i]
 * (64-byte aligned, room for their blocks); first[0] must be 0 and first increasing, below the block count. */
tern_err *tern_qpack_create_split(const tern_weight *w, int n, const int64_t *first, uint8_t *const *at,
                                  tern_qpack **out);
void tern_qpack_free(tern_qpack *p);

/* Activations of T tokens quantized per weight group (see above). */
typedef struct tern_qact {
    int64_t T, in;
    int group;
    int8_t *q;     /* [T][in] */
    float *xs;     /* [T][in/group] the step, a power of two */
    float *xsum;   /* [T][in/group] the step times the sum of the group's codes */
} tern_qact;

#define TERN_QACT_EXP_MIN (-64)
#define TERN_QACT_EXP_MAX 63

/* The exponent of a group's step for the largest magnitude amax in it: the smallest e with 127 * 2^e >= amax,
 * clamped to [TERN_QACT_EXP_MIN, TERN_QACT_EXP_MAX] (zero gives the minimum, infinity the maximum). */
static inline int tern_qact_exponent(float amax) {
    if (!(amax > 0))
        return TERN_QACT_EXP_MIN;
    union {
        float f;
        uint32_t u;
    } v = {amax};
    /* amax = 1.m * 2^(E - 127) with E the exponent field; 127 * 2^(E - 133) = (254/128) * 2^(E - 127) covers it
     * unless 1.m > 254/128, i.e. m above 0x7e0000 (and 127 * 2^(E - 134) never does). A subnormal amax lands far below the minimum; infinity
     * (field 255) far above the maximum. */
    const int E = (int)(v.u >> 23 & 0xff), e = E - 133 + ((v.u & 0x7fffff) > 0x7e0000);
    return e < TERN_QACT_EXP_MIN ? TERN_QACT_EXP_MIN : e > TERN_QACT_EXP_MAX ? TERN_QACT_EXP_MAX : e;
}

/* 2^e for e within the exponent range above (a normal float). */
static inline float tern_qact_pow2(int e) {
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)(127 + e) << 23};
    return v.f;
}

/* The bits of a step 2^e: (127 + e) << 23. Added to a scale's bits less 127 << 23, they add e to its exponent. */
static inline int32_t tern_qact_bits(float step) {
    union {
        float f;
        int32_t i;
    } v = {step};
    return v.i;
}

/* Allocates and fills a; 0 when out of memory (a is then empty). Portable; the SIMD quantizers give the same bytes. */
int tern_qact_alloc(tern_qact *a, int64_t T, int64_t in, int group);
void tern_qact_fill_ref(tern_qact *a, const float *x);
void tern_qact_free(tern_qact *a);

/* The portable definition: y[t][o] for rows [row0, row0 + n_out) of w (unpacked) and all tokens of a. */
void tern_qmm_ref(const tern_weight *w, int64_t row0, int64_t n_out, const tern_qact *a, float *y);

#endif
