/* qblock_mm.h — products over ggml block-quantized weights (qblock.h): the activations are quantized once per
 * token into the weight format's partner blocks, then every row is dotted with every token, split across a
 * thread pool. Each ISA supplies the inner pieces (tern_qblock_kernels). */
#ifndef TERN_TENSOR_QBLOCK_MM_H
#define TERN_TENSOR_QBLOCK_MM_H

#include <stdint.h>

#include "core/threadpool.h"
#include "tensor/qblock.h"
#include "tensor/weight.h"

/* Per token and Q8_0 activation block, for kernels that take a weight format's codes unsigned (Q4_0 as stored,
 * Q5_0 with its fifth bits, Q8_0 plus 128): its step as f32, and minus that offset times the sums of its codes four at a time (the block's
 * eight lanes) — what those kernels start each lane's integer sum from. */
typedef struct tern_qblock_side {
    float d;
    int32_t neg_off[8];
} tern_qblock_side;

/* The side data of one token's Q8_0 activation row of n values into side[n / 32], for weight codes offset by
 * `offset` (tern_qblock_code_offset). */
void tern_qblock_side_fill(const void *act, int64_t n, int offset, tern_qblock_side *side);
/* What a 32-value format's unsigned codes exceed its values by: 8 for Q4_0, 16 for Q5_0, 128 for Q8_0 (0 else). */
int tern_qblock_code_offset(tern_qblock t);

typedef struct tern_qblock_kernels {
    /* x[n] as activation blocks of format act (Q8_0, Q8_1, Q8_K), byte for byte as tern_qblock_quantize_ref. */
    void (*quantize)(tern_qblock act, const float *x, void *dst, int64_t n);
    /* tern_qblock_dot_ref, bit for bit. */
    float (*dot)(tern_qblock t, int64_t n, const void *w, const void *a);
    /* out[k] = dot(t, n, w, a + k * astride) for four tokens at once (each weight block read once), bit for bit. */
    void (*dot4)(tern_qblock t, int64_t n, const void *w, const void *a, size_t astride, float out[4]);
    /* For the formats whose bit (1 << t) is set in tile_formats (Q8_0 activations only): `rows` weight rows (stride
     * wrow) against T tokens' activation rows (stride arow) and their side data (n / 32 entries each):
     * y[t * ystride + r], each value bit for bit as dot gives it. */
    void (*tile)(tern_qblock t, int64_t n, const uint8_t *w, size_t wrow, int64_t rows, const uint8_t *a, size_t arow,
                 const tern_qblock_side *side, int64_t T, float *y, int64_t ystride);
    unsigned tile_formats;
} tern_qblock_kernels;

void tern_qblock_tile_avx512(tern_qblock t, int64_t n, const uint8_t *w, size_t wrow, int64_t rows, const uint8_t *a,
                             size_t arow, const tern_qblock_side *side, int64_t T, float *y, int64_t ystride);

extern const tern_qblock_kernels tern_qblock_portable, tern_qblock_avx2, tern_qblock_avx512;

/* Y[t][o] = X[t] . W[row0 + o] for t < T, o < n_out, W of format TERN_WF_QBLOCK; 0, or -1 when scratch memory
 * ran out (Y incomplete). A token's result depends only on its own activations. */
int tern_qblock_matmul(tern_pool *pool, const tern_qblock_kernels *k, const tern_weight *w, int64_t row0,
                       int64_t n_out, const float *x, int64_t T, float *y);

#endif
