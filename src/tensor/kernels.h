/* kernels.h — one table of kernels per instruction set. ops.c and attention.c call through the table of the
 * active ISA (tern_kernels(): chosen from cpuid or TERN_ISA at the first call, changed only by tern_isa_set),
 * never through a ladder of ISA tests. The portable table is the reference every SIMD kernel is tested
 * against. A product kernel returns 1 when it computed Y, 0 when the weight's format or shape is not one it
 * handles (the portable path then runs), or -1 when scratch memory ran out (Y is incomplete); all compute
 * Y[t][o] = X[t] . W[row0 + o] for t < T. */
#ifndef TERN_TENSOR_KERNELS_H
#define TERN_TENSOR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
#include "core/threadpool.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"
#include "tensor/weight.h"

/* A worker that cannot get its scratch memory records it here (several threads may); the product then reports
 * -1 instead of leaving stale output. */
static inline void tern_job_fail(const int *failed) { __atomic_store_n((int *)failed, 1, __ATOMIC_RELAXED); }

/* bf16 weights: up to this many tokens the matrix-vector kernel reads the stored rows directly; above it, tiles
 * of rows are reused across tokens (both sum in the same order, so the switch does not change results). */
#define TERN_GEMV_MAX_T 8

/* ggml's gelu_tanh from its f16 table: 0 at or below -10, x at or above 10, else table[f16(x)] (f16 rounded to
 * nearest even) widened back. */
static inline float tern_gelu_f16_at(float x, const uint16_t *table) {
    return x <= -10.0f ? 0.0f : x >= 10.0f ? x : tern_f16_to_f32(table[tern_f32_to_f16(x)]);
}

struct tern_qmm_kernels;
struct tern_qblock_kernels;
struct tern_attn_args;

typedef struct tern_kernel_table {
    tern_isa isa;
    int lanes; /* floats per vector: attention serves head dims that are multiples of it, query heads per KV head
                * that divide it */
    /* The int8 product's inner pieces for MLX affine q4/q8 (qmm.h); NULL: the path keeps f32 activations. */
    const struct tern_qmm_kernels *qmm;
    /* The products over ggml block formats (qblock_mm.h). */
    const struct tern_qblock_kernels *qblock;
    /* Float products (f32, f16, bf16 weights); NULL: the portable loop. */
    int (*matmul)(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                  float *y, tern_mm_kind kind);
    /* RMSNorm (sum of squares in double lanes: the paths differ only in rounding). */
    void (*rmsnorm)(const float *x, const float *w, int64_t n, float eps, float *y);
    /* Pairs (i, i + dim/2) rotated by the angle whose cos/sin are cs[i]/sn[i]; pairs of zero frequency untouched. */
    void (*rope_apply)(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn);
    /* gelu_tanh in place; g = gelu_tanh(g) * u in one pass; cap * tanh(x / cap) in place. */
    void (*gelu_tanh)(float *x, int64_t n);
    void (*gelu_tanh_mul)(float *g, const float *u, int64_t n);
    /* g = tern_gelu_f16_at(g, table) * u (tern_gelu_tanh_mul_f16); the table has 65536 entries and one of padding. */
    void (*gelu_tanh_mul_f16)(float *g, const float *u, int64_t n, const uint16_t *table);
    void (*softcap)(float *x, int64_t n, float cap);
    /* g = g / (1 + e^min(-g, 88)) * u (silu(g) * u), e^ by this table's exp, each step rounded as in C. */
    void (*silu_mul)(float *g, const float *u, int64_t n);
    /* e^x in place, 0 below -87 and for NaN. */
    void (*exp)(float *x, int64_t n);
    /* Softmax in place: max, e^(x - max) by the exp above, sum, scale. */
    void (*softmax)(float *x, int64_t n);
    /* y = y * a + x * b over n floats (the rescaled sum that merges two attention partials). */
    void (*axpby)(float *y, const float *x, int64_t n, float a, float b);
    /* C[M][N] = A[M][K] B[K][N], all row-major with leading dimensions lda, ldb, ldc, each C entry summed over k in
     * order (one thread: callers split the rows). Products of activations with activations: a vision tower's
     * attention, scores against the keys transposed and probabilities against the values. */
    void (*sgemm)(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                  int64_t ldc);
    /* sgemm over bf16 operands with f32 sums (K even): A [M][K] bf16 rows, B packed by pairs of its rows — Bp[k/2][j]
     * holds B[k][j] in its low half and B[k + 1][j] in its high half. Each C entry sums the pairs' products in k
     * order (a bf16 product is exact in f32; only the sums round). */
    void (*bgemm)(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp, int64_t ldb,
                  float *C, int64_t ldc);
    /* y[i] = x[i] as bf16, rounded to nearest even (tern_f32_to_bf16), over n floats; a subnormal may become zero
     * (AVX-512's conversion reads them as zero). */
    void (*to_bf16)(const float *x, uint16_t *y, int64_t n);
    /* One chunk's attention partial (see attention.h), for the shapes `lanes` allows. */
    void (*attend_part)(const struct tern_attn_args *a);
    /* Sum of n floats streamed from memory (the bandwidth probe's inner loop). */
    double (*read_sum)(const float *p, size_t n);
    /* The checksum's 16 lanes (checksum.h) over `blocks` 128-byte blocks at p, the first being block `first`. */
    void (*checksum_blocks)(uint64_t acc[16], const void *p, size_t blocks, uint64_t first);
} tern_kernel_table;

extern const tern_kernel_table tern_kernels_portable, tern_kernels_avx2, tern_kernels_avx512, tern_kernels_amx;

/* The table of the active ISA. */
const tern_kernel_table *tern_kernels(void);

/* The int8 products' pieces per ISA (qmm_avx512.c, qmm_avx2.c; AMX: qmm_avx512.c's quantizers, qmm_amx.c's
 * tiles). */
extern const struct tern_qmm_kernels tern_qmm_avx512, tern_qmm_avx2, tern_qmm_amx;
struct tern_qact;
/* tern_qmm_kernels.tile for the Q6_K form on AVX-512 with VBMI (qmm_q6k_avx512.c; tern_cpu_vbmi): the tile of a's
 * tokens from t0, y[(t - t0) * ystride + r] for rows r < valid. */
void tern_qmm_q6k_tile(const uint8_t *blk, const struct tern_qact *a, int64_t t0, float *y, int64_t ystride,
                       int valid);
/* tern_qmm_kernels.tile on AMX (qmm_amx.c). */
void tern_qmm_amx_tile(const uint8_t *blk, const struct tern_qact *a, int64_t t0, int first, int bits, tern_dtype sdt,
                       size_t gbytes, float *y, int64_t ystride, int valid);

/* The SIMD kernels by name, for the tables and for the tests that compare them with the portable ones. */
int tern_matmul_avx512(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                       float *y, tern_mm_kind kind);
int tern_matmul_avx2(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                     float *y, tern_mm_kind kind);
double tern_read_sum_avx512(const float *p, size_t n);
double tern_read_sum_avx2(const float *p, size_t n);
void tern_gelu_tanh_avx512(float *x, int64_t n);
void tern_softcap_avx512(float *x, int64_t n, float cap);
void tern_gelu_tanh_mul_avx512(float *g, const float *u, int64_t n);
void tern_rmsnorm_avx512(const float *x, const float *w, int64_t n, float eps, float *y);
void tern_rope_apply_avx512(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn);
void tern_exp_avx512(float *x, int64_t n);
void tern_silu_mul_avx512(float *g, const float *u, int64_t n);
void tern_softmax_avx512(float *x, int64_t n);
void tern_softmax_avx2(float *x, int64_t n);
void tern_softmax_portable(float *x, int64_t n);
void tern_sgemm_avx512(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                       float *C, int64_t ldc);
void tern_sgemm_avx2(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                     int64_t ldc);
void tern_sgemm_portable(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                         float *C, int64_t ldc);
void tern_bgemm_avx512(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp, int64_t ldb,
                       float *C, int64_t ldc);
void tern_bgemm_avx2(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp, int64_t ldb,
                     float *C, int64_t ldc);
void tern_bgemm_portable(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp,
                         int64_t ldb, float *C, int64_t ldc);
void tern_to_bf16_avx512(const float *x, uint16_t *y, int64_t n);
void tern_to_bf16_avx2(const float *x, uint16_t *y, int64_t n);
void tern_to_bf16_portable(const float *x, uint16_t *y, int64_t n);
void tern_gelu_tanh_avx2(float *x, int64_t n);
void tern_softcap_avx2(float *x, int64_t n, float cap);
void tern_gelu_tanh_mul_avx2(float *g, const float *u, int64_t n);
void tern_rmsnorm_avx2(const float *x, const float *w, int64_t n, float eps, float *y);
void tern_rope_apply_avx2(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn);
void tern_exp_avx2(float *x, int64_t n);
void tern_silu_mul_avx2(float *g, const float *u, int64_t n);
void tern_attend_part_avx512(const struct tern_attn_args *a);
void tern_attend_part_avx2(const struct tern_attn_args *a);
void tern_axpby_avx512(float *y, const float *x, int64_t n, float a, float b);
void tern_axpby_avx2(float *y, const float *x, int64_t n, float a, float b);

#endif
