/* qpack.h — MLX affine q4/q8 weights (and ggml Q4_0 / Q8_0 blocks, in the same affine form) repacked for int8
 * dot-product kernels, the int8 activations they multiply, and the portable definition of the product they
 * compute.
 *
 * Packed layout. Rows go in blocks of 16 (the last block zero-padded). A block is one contiguous
 * stream, group after group; each group is
 *     scales[16] and biases[16] (the stored dtype, row r of the block at index r), then the codes:
 *     q8: group/4 chunks of 64 bytes, chunk c holding byte 4r+j = q[r][g*group + 4c + j];
 *     q4: group/8 chunks of 64 bytes, chunk c holding byte 4r+j = q[r][k+j] | q[r][k+4+j] << 4, k = g*group + 8c.
 * (The ggml form, from Q4_0 / Q8_0 blocks, has no biases and its groups go in pairs: tern_qpack_form.)
 * So one 64-byte load gives each of 16 32-bit lanes four codes of its own row: a VPDPBUSD against four
 * broadcast activation bytes adds four products to each of 16 rows at once, and a row block is read
 * front to back exactly once per pass, scales next to the codes they scale.
 *
 * The product (tern_qmm_ref). Activations are quantized per token and weight group with a step xs of the form
 * 2^e or 1.5 x 2^e, the smallest such with 127 steps covering max|x| (tern_qact_step_for; e within [-64, 63]):
 *     xq = round-to-nearest-even(x * inv) clamped to [-127, 127], inv = 1 / xs rounded to f32,
 *     xsum = xs * sum xq (exact),
 * and each output is, in f32 and in this order over the groups g,
 *     acc = fma(b_g, xsum_g, fma((float)idot_g, s_g * xs_g, acc)),   idot_g = sum q * xq (exact),
 * which is the dot product of the dequantized weights with the quantized activations. A token's result
 * depends only on its own activations, never on the other tokens computed with it.
 * Why such steps: s_g * xs_g needs no multiply. The kernels add e to the exponent field of s_g (an integer add)
 * and, for 1.5 x 2^e, add s_g x 2^(e-1) formed the same way (a float add): one rounding, the same as the
 * product's. In the kernels' epilogue the multiplies share VPDPBUSD's pipes; two per 16 VPDPBUSD instead of
 * three raise the compute-bound ceiling from 84.2% to 88.9% of the VPDPBUSD peak, and adds run beside them.
 * The cost: a step up to 1.5x as coarse as max|x| / 127 (bench_kernels --act-error).
 * Weights from ggml blocks (Q4_0, Q8_0) meet the activation codes llama.cpp gives them: ggml's Q8_0 steps
 * (amax / 127 stored f16, of any value: s_g * xs_g is a multiply), and since their bias is -off x the scale
 * (off = 8 for 4-bit codes, 128 for 8-bit), the offset goes into the integer dot instead of a second FMA:
 *     acc = fma((float)(idot_g - off * isum_g), s_g * xs_g, acc),   isum_g = sum xq,
 * each block's value as ggml's integer dot gives it, the blocks summed in another order than its own. */
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
    size_t group_bytes;  /* scales (+ biases) + codes of one group of one block */
    size_t block_bytes;  /* ng * group_bytes, an odd ggml-form group's pair padded to a cache line */
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

/* The affine form a weight is packed in: code bits, group, and the scales' and biases' dtype. MLX affine weights
 * as stored (4 or 8 bits, group >= 32 a power of two dividing the width); ggml Q4_0 and Q8_0 blocks as groups of
 * 32 with the block's f16 step d as scale and -8d (Q4_0, codes as stored) or -128d (Q8_0, codes plus 128) as bias:
 * the same weights exactly, for every weight within f16's range. bits is 0 for any other weight.
 * The ggml form's packed blocks hold no biases (its product takes the offset in the integer dot, qpack.h's top):
 * a block's groups go in pairs, the pair's 2 x 16 f16 scales in one cache line, then the first group's codes, then
 * the second's; an odd last group has the line to itself. A tenth fewer bytes to stream than with the biases.
 * ggml Q4_K super-blocks (256 values: f16 d and dmin, eight 6-bit scales sc and mins m, 4-bit codes; a value is
 * d sc q - dmin m) pack as groups of 32 (bits 4, group 32, f16) in their own form, TERN_QPACK_Q4K below, and
 * Q6_K ones (sixteen int8 scales, 6-bit codes: d sc (q - 32)) as groups of 16 (bits 6, group 16), TERN_QPACK_Q6K. */
enum { TERN_QPACK_MLX = 0, TERN_QPACK_GGML32 = 1, TERN_QPACK_Q4K = 2, TERN_QPACK_Q6K = 3 };
typedef struct tern_qpack_form {
    int bits, group;
    tern_dtype sdtype;
    int origin; /* TERN_QPACK_*: MLX affine, ggml Q4_0 / Q8_0 blocks (no biases, groups in pairs), Q4_K, Q6_K */
} tern_qpack_form;

/* In a ggml-form block of `bits`-bit codes: the offsets of group g's 16 scales and of its codes. */
static inline size_t tern_qpack_ggml_codes_bytes(int bits) { return (size_t)(16 * 32 * bits / 8); }
static inline size_t tern_qpack_ggml_scales_at(int bits, int64_t g) {
    return (size_t)(g >> 1) * (64 + 2 * tern_qpack_ggml_codes_bytes(bits)) + (size_t)(g & 1) * 32;
}
static inline size_t tern_qpack_ggml_codes_at(int bits, int64_t g) {
    return (size_t)(g >> 1) * (64 + 2 * tern_qpack_ggml_codes_bytes(bits)) + 64 +
           (size_t)(g & 1) * tern_qpack_ggml_codes_bytes(bits);
}

/* A Q4_K-form block is one run per super-block s of its 16 rows: d[16] and dmin[16] (f16, one cache line),
 * sc[8][16] and m[8][16] (bytes, sub-block-major: one 16-byte load gives a sub-block's 16 rows), then the eight
 * sub-blocks' codes as eight 4-bit groups of the layout above. Its product keeps ggml's integers: per row and
 * super-block, isum = sum_j sc_j idot_j and msum = sum_j m_j xsum_j (exact), then
 *     acc = fma((float)msum, -(dmin * xs), fma((float)isum, d * xs, acc))
 * with the activations quantized as ggml's Q8_K (one step xs per 256 values, tern_qact_set_q8_k). */
#define TERN_QPACK_Q4K_BYTES (64 + 256 + 8 * 256)
static inline size_t tern_qpack_q4k_sc_at(int64_t s, int j) {
    return (size_t)s * TERN_QPACK_Q4K_BYTES + 64 + 16 * (size_t)j;
}
static inline size_t tern_qpack_q4k_m_at(int64_t s, int j) {
    return (size_t)s * TERN_QPACK_Q4K_BYTES + 192 + 16 * (size_t)j;
}
static inline size_t tern_qpack_q4k_codes_at(int64_t s, int j) {
    return (size_t)s * TERN_QPACK_Q4K_BYTES + 320 + 256 * (size_t)j;
}

/* A Q6_K-form block, per super-block s of its 16 rows: d[16] (f16, then 32 bytes of padding), sc[16][16] (int8,
 * sub-block-major), then the sixteen sub-blocks' codes: four chunks each of the 4 codes of 16 rows (code 4r + k
 * of a chunk is row r's code 4c + k of the sub-block), a chunk's 64 codes 6 bits each in 48 bytes, 8 codes to 6
 * bytes, code i at bit 6 (i % 8) of bytes 6 (i / 8) .. (the file's bytes exactly, rearranged). Its product:
 * per row and super-block isum = sum_j sc_j (sum u x - 32 xsum_j) over the unsigned codes u = q + 32 (exact), then
 *     acc = fma((float)isum, d * xs, acc). */
#define TERN_QPACK_Q6K_BYTES (64 + 256 + 16 * 192)
static inline size_t tern_qpack_q6k_sc_at(int64_t s, int j) {
    return (size_t)s * TERN_QPACK_Q6K_BYTES + 64 + 16 * (size_t)j;
}
static inline size_t tern_qpack_q6k_codes_at(int64_t s, int j) {
    return (size_t)s * TERN_QPACK_Q6K_BYTES + 320 + 192 * (size_t)j;
}
tern_qpack_form tern_qpack_form_of(const tern_weight *w);
/* Whether a weight can be packed (its form has bits). */
int tern_qpack_supported(const tern_weight *w);
/* Row `row` of w in its form: unsigned codes[in], scales and biases [in / group] as f32. */
void tern_qpack_row(const tern_weight *w, int64_t row, uint8_t *codes, float *scales, float *biases);
/* Bytes of one group of one packed block in form f (the ggml form's pairs: two groups' bytes a pair). */
size_t tern_qpack_group_bytes(tern_qpack_form f);
/* Packs the 16 rows starting at row0 (rows past the weight's end are zero) into out[tern_qpack_block_bytes(w)]. */
void tern_qpack_block(const tern_weight *w, int64_t row0, uint8_t *out);
/* Bytes the packed copy of w takes (a multiple of 64). */
size_t tern_qpack_bytes(const tern_weight *w);
/* The 16-row blocks of a packable weight, and the bytes of one packed block. */
int64_t tern_qpack_blocks(const tern_weight *w);
size_t tern_qpack_block_bytes(const tern_weight *w);
/* Packs the whole weight (rows flattened over leading dims) into a new tern_qpack; *out NULL on error. With
 * `at` non-NULL (64-byte aligned, tern_qpack_bytes long) the codes go there and stay the caller's. */
TERN_MUST_CHECK tern_err *tern_qpack_create(const tern_weight *w, uint8_t *at, tern_qpack **out);
/* A tern_qpack describing a packed copy at `at` (mapped from a cache, or to be filled block by block with
 * tern_qpack_block), nothing packed. */
TERN_MUST_CHECK tern_err *tern_qpack_place(const tern_weight *w, uint8_t *at, tern_qpack **out);
/* The same with the blocks in n pieces placed by the caller: blocks [first[i], first[i + 1]) at at[i]
 * (64-byte aligned, room for their blocks); first[0] must be 0 and first increasing, below the block count.
 * With fill 0 the blocks are only described (already there, or filled by the caller). */
TERN_MUST_CHECK tern_err *tern_qpack_create_split(const tern_weight *w, int n, const int64_t *first, uint8_t *const *at, int fill,
                                  tern_qpack **out);
void tern_qpack_free(tern_qpack *p);

#define TERN_QACT_EXP_MIN (-64)
#define TERN_QACT_EXP_MAX 63

/* A group's step xs = 2^e or 1.5 x 2^e, as the quantizers and kernels use it. */
typedef struct tern_qact_step {
    float xs, inv;      /* the step, and 1 / xs rounded to f32 */
    int32_t exp_bits;   /* e << 23: added to a scale's exponent field, a multiply by 2^e */
    int32_t half_mask;  /* all ones for 1.5 x 2^e, else 0 */
} tern_qact_step;

static inline float tern_qact_pow2(int e) { /* 2^e, e within the exponent range (a normal float) */
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)(127 + e) << 23};
    return v.f;
}

/* The step of a group whose largest magnitude is amax: the smallest 2^e or 1.5 x 2^e with 127 steps covering it,
 * e clamped to [TERN_QACT_EXP_MIN, TERN_QACT_EXP_MAX] (zero gives 2^min, infinity 1.5 x 2^max). */
static inline tern_qact_step tern_qact_step_for(float amax) {
    int e, half;
    if (!(amax > 0)) {
        e = TERN_QACT_EXP_MIN, half = 0;
    } else {
        union {
            float f;
            uint32_t u;
        } v = {amax};
        /* amax = 1.m * 2^(E - 127), E the exponent field. In 2^(E - 127) units the candidates are 127/128 (never
         * enough), 190.5/128 (1.5 x 2^(E - 134): enough while 1.m <= 1.48828125, m <= 0x3e8000), 127/64
         * (2^(E - 133): while m <= 0x7e0000) and 381/128 (1.5 x 2^(E - 133): always). */
        const int E = (int)(v.u >> 23 & 0xff);
        const uint32_t m = v.u & 0x7fffff;
        e = m <= 0x3e8000 ? E - 134 : E - 133;
        half = m <= 0x3e8000 || m > 0x7e0000;
        if (e < TERN_QACT_EXP_MIN)
            e = TERN_QACT_EXP_MIN, half = 0;
        if (e > TERN_QACT_EXP_MAX)
            e = TERN_QACT_EXP_MAX, half = 1;
    }
    const float p = tern_qact_pow2(e), ip = tern_qact_pow2(-e);
    return (tern_qact_step){half ? 1.5f * p : p, half ? (2.0f / 3.0f) * ip : ip, (int32_t)((uint32_t)e << 23),
                            half ? -1 : 0};
}

/* Activations of T tokens quantized per weight group (see above). A token's group is a unit: its codes at
 * q + u * group and its step and sums at [u], u = tern_qact_unit(t, g). Units go in tiles of TERN_QACT_TILE
 * tokens, group-major within a tile: the kernels take one tile per pass over a weight block, and so find the
 * codes of all its tokens for one group side by side (one stream, offsets known when compiled). */
#define TERN_QACT_TILE 8
typedef struct tern_qact {
    int64_t T, in;
    int group;
    int8_t *q;          /* [T][in] */
    float *xs;          /* [T][in/group] the step */
    float *xsum;        /* [T][in/group] the step times the sum of the group's codes */
    int32_t *exp_bits;  /* [T][in/group] the step's tern_qact_step.exp_bits */
    int32_t *half_mask; /* [T][in/group] and its half_mask */
    int32_t *isum;      /* [T][in/group] the sum of the group's codes */
    int ggml_steps;     /* 1: ggml's Q8_0 steps (tern_qact_set_q8_0) for the ggml form's product; 2: ggml's Q8_K
                         * steps (tern_qact_set_q8_k) for the Q4_K and Q6_K forms'; 0: tern's own */
} tern_qact;

/* The unit of token t's group g: tile t / TERN_QACT_TILE starts at unit t0 * ng (t0 its first token), and holds
 * group g of its nt tokens (TERN_QACT_TILE, fewer in the last tile) at units g * nt .. g * nt + nt - 1. */
static inline int64_t tern_qact_unit(const tern_qact *a, int64_t t, int64_t g) {
    const int64_t t0 = t - t % TERN_QACT_TILE, nt = a->T - t0 < TERN_QACT_TILE ? a->T - t0 : TERN_QACT_TILE;
    return t0 * (a->in / a->group) + g * nt + (t - t0);
}

/* Records unit u's step and code sum (every quantizer ends a group with this). */
static inline void tern_qact_set(tern_qact *a, int64_t u, tern_qact_step st, int32_t isum) {
    a->xs[u] = st.xs;
    a->xsum[u] = (float)isum * st.xs;
    a->exp_bits[u] = st.exp_bits;
    a->half_mask[u] = st.half_mask;
    a->isum[u] = isum;
}

/* Records unit u's ggml Q8_0 step (any value; the exponent fields unused) and code sum. */
static inline void tern_qact_set_ggml(tern_qact *a, int64_t u, float xs, int32_t isum) {
    a->xs[u] = xs;
    a->xsum[u] = (float)isum * xs;
    a->exp_bits[u] = a->half_mask[u] = 0;
    a->isum[u] = isum;
}

/* Unit u (group 32) from its ggml Q8_0 block (f16 step, 32 codes; tern_qblock_quantize_ref's bytes): the codes
 * llama.cpp multiplies ggml weights with, in place of tern_qact_step_for's step. Set a->ggml_steps with these. */
void tern_qact_set_q8_0(tern_qact *a, int64_t u, const uint8_t *blk);
/* Token t's groups of its ggml Q8_K block s (f32 step, 256 codes, sums; the quantizer's bytes), 256 / a->group of
 * them (groups of 16 or 32): each the block's step and its own code sum. Set a->ggml_steps = 2 with these. */
void tern_qact_set_q8_k(tern_qact *a, int64_t t, int64_t s, const uint8_t *blk);
/* Allocates and fills a; 0 when out of memory (a is then empty). Portable; the SIMD quantizers give the same bytes. */
int tern_qact_alloc(tern_qact *a, int64_t T, int64_t in, int group);
void tern_qact_fill_ref(tern_qact *a, const float *x);
void tern_qact_free(tern_qact *a);
/* Bytes of the arrays of a tern_qact of T tokens (64-byte aligned within), and a tern_qact laid out in such
 * memory (64-byte aligned, the caller's: nothing to free). */
size_t tern_qact_bytes(int64_t T, int64_t in, int group);
void tern_qact_place(tern_qact *a, int64_t T, int64_t in, int group, void *mem);

/* The portable definition: y[t][o] for rows [row0, row0 + n_out) of w (unpacked, in its form) and all tokens of
 * a. */
void tern_qmm_ref(const tern_weight *w, int64_t row0, int64_t n_out, const tern_qact *a, float *y);

#endif
