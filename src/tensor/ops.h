/* ops.h — the math the models are written in: weight rows and matrix products over any stored
 * format, norms, RoPE, activations, softmax. Activations are f32 row-major; weights stay in
 * their stored format and are dequantized inside the kernels. These are the portable
 * implementations; SIMD variants are checked against them. */
#ifndef TERN_TENSOR_OPS_H
#define TERN_TENSOR_OPS_H

#include <stdint.h>

#include "core/threadpool.h"
#include "tensor/weight.h"

/* Which tokens a product serves: generated tokens (DECODE) or prompt tokens (PREFILL). A kernel may pick
 * its method by the role (mxfp4: the portable path for DECODE, the tiled bf16 GEMM for PREFILL; MLX q4/q8
 * and ggml Q4_0 / Q8_0 take the int8 kernel for both, the latter over their packed copy), but computes a token
 * the same way whatever else is in the batch, so the result depends only on the token's role. */
typedef enum tern_mm_kind { TERN_MM_DECODE = 0, TERN_MM_PREFILL = 1 } tern_mm_kind;

/* Writes logical row `row` of `w` (flattened over all leading dims) as f32 into out[cols]. */
void tern_weight_row(const tern_weight *w, int64_t row, float *out);
/* Y[t][o] = sum_k X[t][k] * W[row0 + o][k] for t < T, o < n_out: rows [row0, row0 + n_out) of w
 * (row0 selects an expert slab of a stacked [E, out, in] weight). X is [T][in], Y is [T][n_out]. The products
 * return 0, or -1 when scratch memory ran out (Y is then incomplete: the caller reports an error). */
int tern_matmul_rows(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                      float *y, tern_mm_kind kind);
/* One slab of a stacked weight with its own tokens: rows [row0, row0 + n_out) against x [T][in] into y [T][n_out],
 * the tokens of one role. */
typedef struct tern_slab {
    int64_t row0, T;
    const float *x;
    float *y;
    tern_mm_kind kind;
} tern_slab;
/* tern_matmul_rows of each of n slabs of w (n_out rows each) — the experts of a mixture, each over the tokens
 * routed to it — in as few parallel regions as the kernels allow (the int8 kernels: two per 64 slabs). Results
 * as tern_matmul_rows gives them slab by slab; 0, or -1 when scratch memory ran out. */
int tern_matmul_slabs(tern_pool *pool, const tern_weight *w, int64_t n_out, const tern_slab *s, int n);
/* Y = X W^T over all rows of a 2-D weight: X [T][in], Y [T][out]. */
int tern_matmul(tern_pool *pool, const tern_weight *w, const float *x, int64_t T, float *y, tern_mm_kind kind);

/* ys[i] = X W_i^T for n (<= 4) matrices that read the same X (q/k/v, gate/up): one parallel region where the
 * kernels allow it, else one product each. Same results as n separate tern_matmul calls. `next` (n_next
 * matrices, or NULL) names the group the caller multiplies next, a hint for streaming it (see tern_qmm_run). */
int tern_matmul_group(tern_pool *pool, const tern_weight *const *ws, int n, const float *x, int64_t T,
                      float *const *ys, tern_mm_kind kind, const tern_weight *const *next, int n_next);
/* A gated MLP's activation in place: g = act(g) * u over n floats (tern_gelu_tanh_mul, tern_silu_mul). */
typedef void (*tern_gate_fn)(float *g, const float *u, int64_t n);
/* tern_matmul_group over a gated MLP's activation: x = gate(x, mul) (both [T][in]) is formed in place first (by the
 * int8 kernels' quantization pass itself, else by a parallel pass), then multiplied. */
int tern_matmul_gated_group(tern_pool *pool, const tern_weight *const *ws, int n, float *x, const float *mul,
                            tern_gate_fn gate, int64_t T, float *const *ys, tern_mm_kind kind,
                            const tern_weight *const *next, int n_next);

/* y = x * (mean(x^2) + eps)^-1/2 * w  (w may be NULL: the scale-free variant). In place allowed. */
void tern_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *y);
/* Rotate-half RoPE over one head of `dim` values at position pos, in two steps so the heads of one token share
 * the angles: angles writes cs/sn[dim/2] = cos/sin(pos * inv_freq[i]) (computed in double), apply rotates each
 * pair (i, i + dim/2) by them; pairs with inv_freq[i] == 0 are left as they are. */
void tern_rope_angles(int64_t dim, const float *inv_freq, int64_t pos, float *cs, float *sn);
void tern_rope_apply(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn);
/* gelu with the tanh approximation, in place. */
void tern_gelu_tanh(float *x, int64_t n);
/* g = gelu_tanh(g) * u in one pass (the gated MLP's activation). */
void tern_gelu_tanh_mul(float *g, const float *u, int64_t n);
/* gelu_tanh as ggml computes it, in place: the input rounded to f16 and looked up in a table of f16 results
 * (0 at or below -10, x at or above 10). Quantized GGUF products then see the activation codes llama.cpp sees. */
void tern_gelu_tanh_f16(float *x, int64_t n);
/* g = tern_gelu_tanh_f16(g) * u in one pass. */
void tern_gelu_tanh_mul_f16(float *g, const float *u, int64_t n);
/* g = silu(g) * u = g / (1 + e^-g) * u in one pass (the SwiGLU MLP's activation), e^-g clamped to e^88 and by the
 * path's exp (tern_exp's values), the division and product rounded as C's. */
void tern_silu_mul(float *g, const float *u, int64_t n);
/* x = cap * tanh(x / cap) in place (the final logit soft-cap). */
void tern_softcap(float *x, int64_t n, float cap);
/* x = e^x in place for x <= 88; below -87, -inf and NaN give exactly 0. Relative error ~1e-7 on the vector
 * paths (libm's expf on the portable one). */
void tern_exp(float *x, int64_t n);
/* C[M][N] = A[M][K] B[K][N] over row-major float matrices with leading dimensions lda, ldb, ldc, on the calling
 * thread (the active path's register tiles; each entry summed over k in order). */
void tern_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                int64_t ldc);
/* tern_sgemm over bf16 operands with f32 sums, on the calling thread: A [M][K] bf16 rows, B packed by pairs of its
 * rows (Bp[k/2][j] = B[k][j] | B[k + 1][j] << 16; K even); see tern_kernels.bgemm. */
void tern_bgemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp, int64_t ldb,
                float *C, int64_t ldc);
/* y = x rounded to bf16 (nearest even, as tern_f32_to_bf16; subnormals may become zero), over n floats. */
void tern_to_bf16(const float *x, uint16_t *y, int64_t n);
/* Numerically stable softmax in place. */
void tern_softmax(float *x, int64_t n);
/* The same on the active path: its vectorised exp and float sums (agrees with tern_softmax to ~1e-6 relative). */
void tern_softmax_fast(float *x, int64_t n);

#endif
