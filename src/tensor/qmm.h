/* qmm.h — the int8 product over packed weights (qpack.h: MLX affine, ggml Q4_0 / Q8_0 / Q4_K / Q6_K), split across a thread
 * pool. The partitioning is shared by every instruction set; each ISA supplies the two inner pieces. */
#ifndef TERN_TENSOR_QMM_H
#define TERN_TENSOR_QMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "tensor/ops.h"
#include "tensor/qpack.h"
#include "tensor/weight.h"

typedef struct tern_qmm_kernels {
    /* Quantizes groups [n0, n1) of x [T][in] in token order (group n % ng of token n / ng, ng = in / group) into
     * their units of a, byte for byte as tern_qact_fill_ref. */
    void (*fill)(tern_qact *a, const float *x, int64_t n0, int64_t n1);
    /* The same for weights from ggml blocks (group 32): tern_qact_set_q8_0 of tern_qblock_quantize_ref's Q8_0
     * blocks, byte for byte (finite x). */
    void (*fill_ggml)(tern_qact *a, const float *x, int64_t n0, int64_t n1);
    /* One packed 16-row block against the tile of a's tokens starting at t0 (a multiple of TERN_QACT_TILE), with
     * exactly tern_qmm_ref's arithmetic: y[(t - t0) * ystride + r] for rows r < valid. first: the block's first
     * tile (it comes from memory; later tiles find it in cache). */
    void (*tile)(const uint8_t *blk, const tern_qact *a, int64_t t0, int first, int bits, tern_dtype sdt,
                 size_t gbytes, float *y, int64_t ystride, int valid);
    int q4k, q6k; /* whether tile takes the Q4_K form, the Q6_K form (else such weights stay on ggml's block
                   * products) */
    /* Two packed blocks, found in cache (not their first tile), against a whole tile (TERN_QACT_TILE tokens from
     * t0): what tile gives for each, bit for bit, into y0 (b0's rows < valid0) and y1 (b1's rows < valid1); the
     * forms it pairs read each activation once for both blocks. NULL where the ISA pairs no blocks. */
    void (*tile_pair)(const uint8_t *b0, const uint8_t *b1, const tern_qact *a, int64_t t0, int bits, tern_dtype sdt,
                      size_t gbytes, float *y0, float *y1, int64_t ystride, int valid0, int valid1);
} tern_qmm_kernels;

/* Whether weights of form f are packed for the int8 kernels k (NULL where the ISA has none) and taken by them on
 * this CPU: the MLX and Q4_0 / Q8_0 forms always (packed on every path), the Q4_K and Q6_K forms where k->q4k / k->q6k
 * say so (the Q6_K form's kernel needs AVX-512 VBMI besides). */
int tern_qmm_takes_form(const tern_qmm_kernels *k, tern_qpack_form f);

/* Up to 4 packable matrices of one width and group sharing the input x [T][in]: ys[i] gets rows
 * [row0s[i], row0s[i] + n_outs[i]) of ws[i], all in one parallel region. `next` (n_next matrices, or NULL) is
 * the group the caller will multiply next: each thread, done with its own share, requests the first lines of
 * its share of that group, so the next region does not start on cold memory. Returns 1 when done, 0 (nothing
 * written) when a weight is not packable (tern_qpack_supported) or the matrices differ in width, group or origin
 * (MLX, ggml blocks of 32, Q4_K, Q6_K) or the kernels do not take the form, -1 when scratch memory ran out (the
 * outputs are incomplete). Weights from ggml blocks take ggml's Q8_0 activation codes (tern_qact_set_q8_0), Q4_K and
 * Q6_K ones its Q8_K codes (tern_qact_set_q8_k), the others tern_qact_fill_ref's. */
int tern_qmm_run(tern_pool *pool, const tern_qmm_kernels *k, const tern_weight *const *ws, const int64_t *row0s,
                 const int64_t *n_outs, int n, const float *x, int64_t T, float *const *ys,
                 const tern_weight *const *next, int n_next);
/* Most parts of one tern_qmm_run_parts call. */
#define TERN_QMM_MAX_SLABS 64

/* One part of a product: rows [row0, row0 + n_out) of w against its own input x [T][in], into y [T][n_out]. */
typedef struct tern_qmm_part {
    const tern_weight *w;
    int64_t row0, n_out;
    const float *x;
    int64_t T;
    float *y;
} tern_qmm_part;

/* Up to TERN_QMM_MAX_SLABS parts of one width, group and origin, each with its own input (the slabs of a stacked
 * weight each expert of a mixture runs over its own tokens), in one quantization region and one product region;
 * parts with the same input share its codes. Each part's results are tern_qmm_run's for it alone. Returns as
 * tern_qmm_run does. */
int tern_qmm_run_parts(tern_pool *pool, const tern_qmm_kernels *k, const tern_qmm_part *parts, int n);
/* tern_qmm_run over the input gate(x, mul) (both [T][in]; an element-wise gate, tern_gate_fn), formed in x by the
 * quantization pass itself (no pass of its own); x is left unchanged when it returns 0. */
int tern_qmm_run_gated(tern_pool *pool, const tern_qmm_kernels *k, const tern_weight *const *ws, const int64_t *row0s,
                       const int64_t *n_outs, int n, float *x, const float *mul, tern_gate_fn gate, int64_t T,
                       float *const *ys, const tern_weight *const *next, int n_next);

#endif
