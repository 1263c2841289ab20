/* kernels.h — the per-ISA matrix-product back ends behind tern_matmul_rows (ops.c).
 * Each returns 1 when it computed Y, or 0 when the weight's format or shape is not one it
 * handles (the portable path then runs). All compute Y[t][o] = X[t] . W[row0 + o] for t < T. */
#ifndef TERN_TENSOR_KERNELS_H
#define TERN_TENSOR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "tensor/ops.h"
#include "tensor/weight.h"

/* bf16 weights: up to this many tokens the matrix-vector kernel reads the stored rows directly; above it, tiles
 * of rows are reused across tokens (both sum in the same order, so the switch does not change results). */
#define TERN_GEMV_MAX_T 8

int tern_matmul_avx512(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                       float *y, tern_mm_kind kind);
/* The int8 product's inner pieces for MLX affine q4/q8 (qmm.h), per ISA. */
struct tern_qmm_kernels;
extern const struct tern_qmm_kernels tern_qmm_avx512, tern_qmm_avx2;
int tern_matmul_avx2(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                     float *y);

/* Sum of n floats streamed from memory (the bandwidth probe's inner loop), per ISA. */
double tern_read_sum_avx512(const float *p, size_t n);
double tern_read_sum_avx2(const float *p, size_t n);

/* gelu_tanh in place, and cap * tanh(x / cap) in place (vectorised tanh, |error| ~1e-7). */
void tern_gelu_tanh_avx512(float *x, int64_t n);
void tern_softcap_avx512(float *x, int64_t n, float cap);
/* g = gelu_tanh(g) * u, one pass. */
void tern_gelu_tanh_mul_avx512(float *g, const float *u, int64_t n);
/* tern_rmsnorm with the sum of squares in double lanes (differs from the portable order only in rounding). */
void tern_rmsnorm_avx512(const float *x, const float *w, int64_t n, float eps, float *y);
/* tern_rope_apply: pairs (i, i + dim/2) rotated by the angle whose cos/sin are cs[i]/sn[i]; pairs of zero
 * frequency left untouched. */
void tern_rope_apply_avx512(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn);
/* tern_exp: e^x in place, 0 below -87 and for NaN. */
void tern_exp_avx512(float *x, int64_t n);

/* The same with AVX2 + FMA (8 lanes). */
void tern_gelu_tanh_avx2(float *x, int64_t n);
void tern_softcap_avx2(float *x, int64_t n, float cap);
void tern_gelu_tanh_mul_avx2(float *g, const float *u, int64_t n);
void tern_rmsnorm_avx2(const float *x, const float *w, int64_t n, float eps, float *y);
void tern_rope_apply_avx2(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn);
void tern_exp_avx2(float *x, int64_t n);

struct tern_attn_args;
/* One chunk's attention partial (see attention.h); head_dim a multiple of 16, heads per KV head dividing 16. */
void tern_attend_part_avx512(const struct tern_attn_args *a);
/* The same with AVX2; head_dim a multiple of 8, heads per KV head dividing 8. */
void tern_attend_part_avx2(const struct tern_attn_args *a);
/* y = y * a + x * b over n floats (the rescaled sum that merges two attention partials). */
void tern_axpby_avx512(float *y, const float *x, int64_t n, float a, float b);
void tern_axpby_avx2(float *y, const float *x, int64_t n, float a, float b);

#endif
