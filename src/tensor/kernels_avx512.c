/* kernels_avx512.c — AVX-512 matrix products (compiled with AVX-512 flags; called only when cpuid
 * reports F/BW/VL/VNNI/BF16).
 *
 * - MLX affine q4/q8 (any number of tokens): activations are quantized to int8 with a scale per
 *   dot-product lane (8 or 4 values) and the packed weight bytes feed VPDPBUSD directly (u8 weight
 *   codes x s8 activations). With
 *   w = s*q + b per group: sum w*x = sum_g s_g * d * sum(q*xq) + sum_g b_g * sum_g(x), so the bias
 *   term costs one short dot per row. q4 bytes hold elements 2i (low nibble) and 2i+1 (high), so
 *   the activations are laid out even/odd per 128-element block to match.
 * - bf16 weights, few tokens: VDPBF16PS on the stored rows with bf16 activations.
 * - bf16 weights, many tokens (prefill): tiles of rows in L2, 4x4 register blocks of VDPBF16PS dot products
 *   summed in the same order as the GEMV, so results do not depend on the batch.
 * - f32/f16 weights: f32 FMA (the parity path keeps f32 precision end to end). */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "tensor/attention.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/quant_mlx.h"

static float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

static __mmask16 tail_mask16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }
static __mmask32 tail_mask32(int64_t n) { return n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1); }

/* ---- MLX affine, int8 activations (VNNI) ------------------------------------------------------ */

typedef struct qx {
    int64_t T, in, lanes_blocks; /* lanes_blocks: 128-element (q4) or 64-element (q8) blocks per row */
    int8_t *q;                   /* [T][in] in weight lane order */
    float *dlane;                /* [T][lanes_blocks][16] activation scale of each dot-product lane */
    float *gsum;                 /* [T][in/group] sum of x over each weight group */
} qx;

static void qx_free(qx *a) {
    free(a->q);
    free(a->dlane);
    free(a->gsum);
}

/* Quantizes activations with one scale per dot-product lane: the elements a lane of VPDPBUSD sums (8 for
 * q4, 4 for q8) share a scale, so a block's outlier costs precision only to its few neighbours, and the
 * per-lane scale vector the kernel needs anyway carries it at no extra cost. */
static int qx_prepare(qx *a, const float *x, int64_t T, int64_t in, int bits, int group) {
    const int64_t blk = bits == 4 ? 128 : 64, nb = in / blk, ng = in / group, E = bits == 4 ? 8 : 4;
    a->T = T;
    a->in = in;
    a->lanes_blocks = nb;
    a->q = malloc((size_t)(T * in));
    a->dlane = malloc((size_t)(T * nb * 16) * sizeof(float));
    a->gsum = malloc((size_t)(T * ng + 16) * sizeof(float));
    int8_t *lin = malloc((size_t)in);
    if (!a->q || !a->dlane || !a->gsum || !lin) {
        free(lin);
        qx_free(a);
        return 0;
    }
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * in;
        float *dl = a->dlane + t * nb * 16; /* lane l of block c covers elements (c*16 + l)*E .. +E */
        const __m256 abs8 = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        for (int64_t lane = 0; lane < in / E; lane++) {
            float amax;
            if (E == 8) {
                const __m256 v = _mm256_and_ps(_mm256_loadu_ps(xt + lane * 8), abs8);
                __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
                m = _mm_max_ps(m, _mm_movehl_ps(m, m));
                amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
            } else {
                const __m128 v = _mm_and_ps(_mm_loadu_ps(xt + lane * 4), _mm256_castps256_ps128(abs8));
                const __m128 m = _mm_max_ps(v, _mm_movehl_ps(v, v));
                amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
            }
            const float inv = amax > 0 ? 127.0f / amax : 0.0f;
            dl[lane] = amax / 127.0f;
            if (E == 8) {
                const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xt + lane * 8), _mm256_set1_ps(inv)));
                _mm_storel_epi64((__m128i *)(lin + lane * 8), _mm256_cvtsepi32_epi8(q));
            } else {
                const __m128i q = _mm_cvtps_epi32(_mm_mul_ps(_mm_loadu_ps(xt + lane * 4), _mm_set1_ps(inv)));
                const int32_t packed = _mm_cvtsi128_si32(_mm_cvtsepi32_epi8(q));
                memcpy(lin + lane * 4, &packed, 4);
            }
        }
        int8_t *qt = a->q + t * in;
        if (bits == 4) /* per 128-block: even elements (low nibbles) then odd ones (high nibbles), by lane */
            for (int64_t c = 0; c < nb; c++)
                for (int l = 0; l < 16; l++)
                    for (int j = 0; j < 4; j++) {
                        qt[c * 128 + 4 * l + j] = lin[c * 128 + 8 * l + 2 * j];
                        qt[c * 128 + 64 + 4 * l + j] = lin[c * 128 + 8 * l + 2 * j + 1];
                    }
        else
            memcpy(qt, lin, (size_t)in);
        for (int64_t g = 0; g < ng; g++) {
            float s = 0;
            for (int64_t k = 0; k < group; k++)
                s += xt[g * group + k];
            a->gsum[t * ng + g] = s;
        }
    }
    free(lin);
    return 1;
}

#define AFFINE_MAX_PARTS 4

/* Up to 4 matrices sharing one input (q/k/v, gate/up) run as one parallel region over their rows laid end
 * to end: one activation quantization, one wake-up, and the threads balance over all the rows. */
typedef struct affine_job {
    int n;
    const tern_weight *w[AFFINE_MAX_PARTS];
    float *y[AFFINE_MAX_PARTS];
    int64_t n_out[AFFINE_MAX_PARTS];
    int64_t start[AFFINE_MAX_PARTS + 1]; /* first virtual row of each part */
    int64_t row0, T, in;
    const qx *a;
} affine_job;

/* bf16/f16/f32 group scales -> f32, 16 at a time (masked at the end: rows have few groups). */
static void scales_to_f32(const void *src, tern_dtype dt, int64_t n, float *dst) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        __m512 v;
        if (dt == TERN_DT_F32) {
            v = _mm512_maskz_loadu_ps(m, (const float *)src + i);
        } else {
            const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)src + i);
            v = dt == TERN_DT_BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                                   : _mm512_cvtph_ps(h);
        }
        _mm512_mask_storeu_ps(dst + i, m, v);
    }
}

/* Bytes ahead of the current block that the row loop asks the memory system for: decode streams weights once,
 * and a single stream's hardware prefetch alone leaves the cores waiting on DRAM latency. */
#ifndef AFFINE_PREFETCH
#define AFFINE_PREFETCH 2048
#endif

/* One row against NT tokens (NT a compile-time constant at every call: the accumulators stay in
 * registers). out[t] = sum_g s_g * (d . int dot) over the row, without the bias term. */
static inline __attribute__((always_inline)) void affine_row(const uint8_t *qrow, const float *sb, const float *bb,
                                                              const qx *a, int64_t t0, const int NT, const int bits,
                                                              int gshift, __m512i idx, float *out) {
    const int64_t in = a->in, nb = a->lanes_blocks, blk = bits == 4 ? 128 : 64, ng = in >> gshift;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 acc[8];
    const int8_t *xq[8];
    const float *dl[8];
    for (int t = 0; t < NT; t++) {
        xq[t] = a->q + (t0 + t) * in;
        dl[t] = a->dlane + (t0 + t) * nb * 16;
        /* The bias term sum_g b_g * sum_g(x) starts the accumulator: one horizontal sum per row and token. */
        const float *gs = a->gsum + (t0 + t) * ng;
        acc[t] = _mm512_setzero_ps();
        for (int64_t k = 0; k < ng; k += 16) {
            const __mmask16 m = tail_mask16(ng - k);
            acc[t] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, bb + k), _mm512_maskz_loadu_ps(m, gs + k), acc[t]);
        }
    }
    for (int64_t c = 0; c < nb; c++) {
        const __m512 sv = _mm512_permutexvar_ps(idx, _mm512_loadu_ps(sb + ((c * blk) >> gshift)));
        _mm_prefetch((const char *)(qrow + c * 64 + AFFINE_PREFETCH), _MM_HINT_T0);
        const __m512i W = _mm512_loadu_si512(qrow + c * 64);
        if (bits == 4) {
            const __m512i lo = _mm512_and_si512(W, low4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), low4);
            for (int t = 0; t < NT; t++) {
                __m512i ia = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xq[t] + c * 128));
                ia = _mm512_dpbusd_epi32(ia, hi, _mm512_loadu_si512(xq[t] + c * 128 + 64));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(sv, _mm512_loadu_ps(dl[t] + c * 16)), acc[t]);
            }
        } else {
            for (int t = 0; t < NT; t++) {
                __m512i ia = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W, _mm512_loadu_si512(xq[t] + c * 64));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(sv, _mm512_loadu_ps(dl[t] + c * 16)), acc[t]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        out[t] = hsum(acc[t]);
}

#define AFFINE_TILE 16

/* Rows [b, e) of one MLX affine matrix against all tokens. Rows go in tiles of 16 (their codes stay in L1)
 * and tokens in groups of up to 8 (each weight block is unpacked once for the group); every output is computed
 * by the same affine_row arithmetic whatever T is, so a row's result does not depend on its batch. */
static void affine_part(const affine_job *j, int part, size_t b, size_t e) {
    const tern_weight *w = j->w[part];
    float *y = j->y[part];
    const int64_t n_out = j->n_out[part];
    const int bits = w->bits, g = w->group;
    const int64_t in = j->in, ng = in / g, words = tern_mlx_row_words(in, bits), stride = ng + 16;
    const int64_t per_lane = bits == 4 ? 8 : 4;
    float *sb = calloc((size_t)(AFFINE_TILE * stride), sizeof(float));
    float *bb = calloc((size_t)(AFFINE_TILE * stride), sizeof(float));
    if (!sb || !bb) {
        free(sb);
        free(bb);
        return;
    }
    int32_t idx_i[16];
    for (int l = 0; l < 16; l++)
        idx_i[l] = (int32_t)((l * per_lane) / g);
    const __m512i idx = _mm512_loadu_si512(idx_i);
    const size_t ss = tern_dtype_size(w->sdtype);
    int gs = 0; /* log2 of the group size (a power of two, checked by the caller) */
    while ((1 << gs) < g)
        gs++;
    for (size_t o0 = b; o0 < e; o0 += AFFINE_TILE) {
        const int64_t rows = (int64_t)(e - o0) < AFFINE_TILE ? (int64_t)(e - o0) : AFFINE_TILE;
        for (int64_t i = 0; i < rows; i++) {
            const int64_t r = j->row0 + (int64_t)o0 + i;
            scales_to_f32((const char *)w->scales + (size_t)(r * ng) * ss, w->sdtype, ng, sb + i * stride);
            scales_to_f32((const char *)w->biases + (size_t)(r * ng) * ss, w->sdtype, ng, bb + i * stride);
        }
        for (int64_t t0 = 0; t0 < j->T; t0 += 8) {
            const int nt = j->T - t0 < 8 ? (int)(j->T - t0) : 8;
            for (int64_t i = 0; i < rows; i++) {
                const int64_t r = j->row0 + (int64_t)o0 + i;
                const uint8_t *qrow = (const uint8_t *)w->data + (size_t)(r * words) * 4;
                const float *si = sb + i * stride, *bi = bb + i * stride;
                if (i + 1 < rows && t0 == 0) /* the next row's codes start streaming while this one computes */
                    _mm_prefetch((const char *)(qrow + words * 4), _MM_HINT_T0);
                float dots[8] = {0};
#define AFFINE_CASE(n)                                                                                     \
    case n:                                                                                                \
        if (bits == 4)                                                                                     \
            affine_row(qrow, si, bi, j->a, t0, n, 4, gs, idx, dots);                                       \
        else                                                                                               \
            affine_row(qrow, si, bi, j->a, t0, n, 8, gs, idx, dots);                                       \
        break;
                switch (nt) { /* constant token counts keep the accumulators in registers */
                    AFFINE_CASE(1)
                    AFFINE_CASE(2)
                    AFFINE_CASE(3)
                    AFFINE_CASE(4)
                    AFFINE_CASE(5)
                    AFFINE_CASE(6)
                    AFFINE_CASE(7)
                    AFFINE_CASE(8)
                }
#undef AFFINE_CASE
                for (int t = 0; t < nt; t++)
                    y[(t0 + t) * n_out + (int64_t)o0 + i] = dots[t];
            }
        }
    }
    free(sb);
    free(bb);
}

/* Virtual rows [b, e) of the job: the pieces that fall in each part. */
static void affine_range(void *ctx, size_t b, size_t e, int tid) {
    const affine_job *j = ctx;
    for (int p = 0; p < j->n; p++) {
        int64_t lo = (int64_t)b > j->start[p] ? (int64_t)b : j->start[p];
        int64_t hi = (int64_t)e < j->start[p + 1] ? (int64_t)e : j->start[p + 1];
        if (lo < hi)
            affine_part(j, p, (size_t)(lo - j->start[p]), (size_t)(hi - j->start[p]));
    }
}

static int affine_shape_ok(const tern_weight *w) {
    const int64_t in = tern_weight_cols(w);
    return w->fmt == TERN_WF_MLX_AFFINE && (w->bits == 4 || w->bits == 8) && w->group >= 32 &&
           !(w->group & (w->group - 1)) && in % (w->bits == 4 ? 128 : 64) == 0 && in % w->group == 0;
}

/* n matrices (same bits, group and width) against the same T tokens, as one parallel region. */
static int affine_gemv_parts(tern_pool *pool, const tern_weight *const *ws, const int64_t *row0s, const int64_t *n_outs,
                             int n, const float *x, int64_t T, float *const *ys) {
    const tern_weight *w = ws[0];
    const int64_t in = tern_weight_cols(w);
    affine_job j = {.n = n, .row0 = row0s[0], .T = T, .in = in};
    for (int p = 0; p < n; p++) {
        if (!affine_shape_ok(ws[p]) || ws[p]->bits != w->bits || ws[p]->group != w->group ||
            tern_weight_cols(ws[p]) != in || row0s[p] != row0s[0])
            return 0;
        j.w[p] = ws[p];
        j.y[p] = ys[p];
        j.n_out[p] = n_outs[p];
        j.start[p + 1] = j.start[p] + n_outs[p];
    }
    qx a;
    if (!qx_prepare(&a, x, T, in, w->bits, w->group))
        return 0;
    j.a = &a;
    tern_pool_parallel_for(pool, (size_t)j.start[n], AFFINE_TILE, affine_range, &j);
    qx_free(&a);
    return 1;
}

static int affine_gemv(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                       float *y) {
    return affine_gemv_parts(pool, &w, &row0, &n_out, 1, x, T, &y);
}

int tern_matmul_group_avx512(tern_pool *pool, const tern_weight *const *ws, int n, const float *x, int64_t T,
                             float *const *ys, tern_mm_kind kind) {
    if (kind != TERN_MM_DECODE || n < 1 || n > AFFINE_MAX_PARTS)
        return 0;
    int64_t row0s[AFFINE_MAX_PARTS] = {0}, n_outs[AFFINE_MAX_PARTS];
    for (int p = 0; p < n; p++)
        n_outs[p] = tern_weight_rows(ws[p]);
    return affine_gemv_parts(pool, ws, row0s, n_outs, n, x, T, ys);
}

/* ---- bf16 activations ------------------------------------------------------------------------- */

/* x [T][in] -> bf16 [T][in_pad] (zero padded to a multiple of 32). */
static uint16_t *to_bf16(const float *x, int64_t T, int64_t in, int64_t in_pad) {
    uint16_t *xb = calloc((size_t)(T * in_pad), sizeof *xb);
    if (!xb)
        return NULL;
    for (int64_t t = 0; t < T; t++) {
        int64_t k = 0;
        for (; k + 16 <= in; k += 16) {
            __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + t * in + k));
            _mm256_storeu_si256((__m256i *)(xb + t * in_pad + k), (__m256i)v);
        }
        for (; k < in; k++)
            xb[t * in_pad + k] = tern_f32_to_bf16(x[t * in + k]);
    }
    return xb;
}

typedef struct bf16_job {
    const tern_weight *w;
    int64_t row0, n_out, T, in, in_pad;
    const uint16_t *xb;
    float *y;
} bf16_job;

static void bf16_gemv_range(void *ctx, size_t b, size_t e, int tid) {
    const bf16_job *j = ctx;
    const int64_t in = j->in;
    for (size_t o = b; o < e; o++) {
        const uint16_t *wr = (const uint16_t *)j->w->data + (j->row0 + (int64_t)o) * in;
        for (int64_t t0 = 0; t0 < j->T; t0 += 4) {
            const int nt = j->T - t0 < 4 ? (int)(j->T - t0) : 4;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (int64_t k = 0; k < in; k += 32) {
                const __m512i wv = _mm512_maskz_loadu_epi16(tail_mask32(in - k), wr + k);
                for (int t = 0; t < nt; t++) {
                    const __m512i xv = _mm512_loadu_si512(j->xb + (t0 + t) * j->in_pad + k);
                    acc[t] = _mm512_dpbf16_ps(acc[t], (__m512bh)wv, (__m512bh)xv);
                }
            }
            for (int t = 0; t < nt; t++)
                j->y[(t0 + t) * j->n_out + (int64_t)o] = hsum(acc[t]);
        }
    }
}

/* ---- tiled GEMM over bf16 rows (many tokens, any format but f32/f16) ------------------------------------ */

typedef struct gemm_job {
    const tern_weight *w;
    int64_t row0, n_out, T, in, kpad; /* kpad: row length padded to 32 */
    int64_t tile_rows;
    const uint16_t *xb;               /* [T][kpad] */
    float *y;
} gemm_job;

/* Row r of w as bf16 into out[kpad] (zero padded). MLX affine q4/q8 rows are dequantized with SIMD:
 * nibbles/bytes -> int32 -> s*q + b in f32 -> bf16, 16 values at a time. */
static void row_to_bf16(const tern_weight *w, int64_t r, int64_t in, int64_t kpad, uint16_t *out, float *scratch) {
    memset(out + in, 0, (size_t)(kpad - in) * sizeof *out);
    if (w->fmt == TERN_WF_BF16) {
        memcpy(out, (const uint16_t *)w->data + r * in, (size_t)in * sizeof *out);
        return;
    }
    const int bits = w->bits, g = w->group;
    if (w->fmt == TERN_WF_MLX_AFFINE && (bits == 4 || bits == 8) && g >= 16 && !(g & (g - 1)) && in % 128 == 0) {
        const int64_t ng = in / g, words = tern_mlx_row_words(in, bits);
        const size_t ss = tern_dtype_size(w->sdtype);
        float *sb = scratch, *bb = scratch + ng;
        scales_to_f32((const char *)w->scales + (size_t)(r * ng) * ss, w->sdtype, ng, sb);
        scales_to_f32((const char *)w->biases + (size_t)(r * ng) * ss, w->sdtype, ng, bb);
        const uint8_t *q = (const uint8_t *)w->data + (size_t)(r * words) * 4;
        for (int64_t k = 0; k < in; k += 16) {
            __m128i codes;
            if (bits == 8) {
                codes = _mm_loadu_si128((const __m128i *)(q + k));
            } else { /* 8 bytes hold 16 nibbles, element 2i in the low nibble of byte i */
                __m128i b8 = _mm_loadl_epi64((const __m128i *)(q + k / 2));
                __m128i lo = _mm_and_si128(b8, _mm_set1_epi8(0x0f));
                __m128i hi = _mm_and_si128(_mm_srli_epi16(b8, 4), _mm_set1_epi8(0x0f));
                codes = _mm_unpacklo_epi8(lo, hi);
            }
            const int64_t gi = k / g;
            __m512 v = _mm512_fmadd_ps(_mm512_set1_ps(sb[gi]), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes)),
                                       _mm512_set1_ps(bb[gi]));
            _mm256_storeu_si256((__m256i *)(out + k), (__m256i)_mm512_cvtneps_pbh(v));
        }
        return;
    }
    tern_weight_row(w, r, scratch);
    for (int64_t k = 0; k < in; k++)
        out[k] = tern_f32_to_bf16(scratch[k]);
}

/* y[t][r] for NR rows x NT tokens (compile-time constants at every call): dot products along k. */
static inline __attribute__((always_inline)) void gemm_dot(const uint16_t *W, const uint16_t *X, int64_t kpad,
                                                           const int NR, const int NT, float *y, int64_t ystride) {
    __m512 acc[4][4];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kpad; k += 32) {
        __m512i wv[4];
        for (int r = 0; r < NR; r++)
            wv[r] = _mm512_loadu_si512(W + r * kpad + k);
        for (int t = 0; t < NT; t++) {
            const __m512i xv = _mm512_loadu_si512(X + t * kpad + k);
            for (int r = 0; r < NR; r++)
                acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], (__m512bh)xv);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < NR; r++)
            y[t * ystride + r] = hsum(acc[r][t]);
}

#define GEMM_CASE(nr, nt) gemm_dot(tile + i * kpad, xb, kpad, nr, nt, y, j->n_out)

static void gemm_range(void *ctx, size_t b, size_t e, int tid) {
    const gemm_job *j = ctx;
    const int64_t in = j->in, kpad = j->kpad;
    uint16_t *tile = malloc((size_t)(j->tile_rows * kpad) * sizeof *tile);
    float *scratch = malloc((size_t)(in + 32) * sizeof *scratch);
    if (!tile || !scratch)
        goto done;
    for (size_t o0 = b; o0 < e; o0 += (size_t)j->tile_rows) {
        const int64_t rows = (int64_t)(e - o0) < j->tile_rows ? (int64_t)(e - o0) : j->tile_rows;
        for (int64_t i = 0; i < rows; i++)
            row_to_bf16(j->w, j->row0 + (int64_t)o0 + i, in, kpad, tile + i * kpad, scratch);
        for (int64_t t0 = 0; t0 < j->T; t0 += 4) {
            const int nt = j->T - t0 < 4 ? (int)(j->T - t0) : 4;
            const uint16_t *xb = j->xb + t0 * kpad;
            for (int64_t i = 0; i < rows; i += 4) {
                const int nr = rows - i < 4 ? (int)(rows - i) : 4;
                float *y = j->y + t0 * j->n_out + (int64_t)o0 + i;
                switch (nr * 4 + nt) {
                case 4 * 4 + 4: GEMM_CASE(4, 4); break;
                case 4 * 4 + 3: GEMM_CASE(4, 3); break;
                case 4 * 4 + 2: GEMM_CASE(4, 2); break;
                case 4 * 4 + 1: GEMM_CASE(4, 1); break;
                case 3 * 4 + 4: GEMM_CASE(3, 4); break;
                case 3 * 4 + 3: GEMM_CASE(3, 3); break;
                case 3 * 4 + 2: GEMM_CASE(3, 2); break;
                case 3 * 4 + 1: GEMM_CASE(3, 1); break;
                case 2 * 4 + 4: GEMM_CASE(2, 4); break;
                case 2 * 4 + 3: GEMM_CASE(2, 3); break;
                case 2 * 4 + 2: GEMM_CASE(2, 2); break;
                case 2 * 4 + 1: GEMM_CASE(2, 1); break;
                case 1 * 4 + 4: GEMM_CASE(1, 4); break;
                case 1 * 4 + 3: GEMM_CASE(1, 3); break;
                case 1 * 4 + 2: GEMM_CASE(1, 2); break;
                default: GEMM_CASE(1, 1); break;
                }
            }
        }
    }
done:
    free(tile);
    free(scratch);
}

/* ---- f32 / f16 weights ---------------------------------------------------------------------------- */

typedef struct f32_job {
    const tern_weight *w;
    int64_t row0, n_out, T, in;
    const float *x;
    float *y;
} f32_job;

static void f32_range(void *ctx, size_t b, size_t e, int tid) {
    const f32_job *j = ctx;
    const int64_t in = j->in;
    float *row = j->w->fmt == TERN_WF_F16 ? malloc((size_t)in * sizeof *row) : NULL;
    if (j->w->fmt == TERN_WF_F16 && !row)
        return;
    for (size_t o = b; o < e; o++) {
        const int64_t r = j->row0 + (int64_t)o;
        const float *wr;
        if (row) {
            const uint16_t *hr = (const uint16_t *)j->w->data + r * in;
            int64_t k = 0;
            for (; k + 16 <= in; k += 16)
                _mm512_storeu_ps(row + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hr + k))));
            for (; k < in; k++)
                row[k] = tern_f16_to_f32(hr[k]);
            wr = row;
        } else {
            wr = (const float *)j->w->data + r * in;
        }
        for (int64_t t0 = 0; t0 < j->T; t0 += 4) {
            const int nt = j->T - t0 < 4 ? (int)(j->T - t0) : 4;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (int64_t k = 0; k < in; k += 16) {
                const __mmask16 m = tail_mask16(in - k);
                const __m512 wv = _mm512_maskz_loadu_ps(m, wr + k);
                for (int t = 0; t < nt; t++)
                    acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, j->x + (t0 + t) * in + k), acc[t]);
            }
            for (int t = 0; t < nt; t++)
                j->y[(t0 + t) * j->n_out + (int64_t)o] = hsum(acc[t]);
        }
    }
    free(row);
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

int tern_matmul_avx512(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                       float *y, tern_mm_kind kind) {
    const int64_t in = tern_weight_cols(w);
    if (w->fmt == TERN_WF_F32 || w->fmt == TERN_WF_F16) {
        f32_job j = {w, row0, n_out, T, in, x, y};
        tern_pool_parallel_for(pool, (size_t)n_out, 8, f32_range, &j);
        return 1;
    }
    /* Generated tokens on MLX affine weights: the int8 path (or the portable one when the shape does not fit
     * it), at every T; prompt tokens go to the tiled bf16 GEMM below, also at every T. */
    if (w->fmt == TERN_WF_MLX_AFFINE && kind == TERN_MM_DECODE)
        return affine_gemv(pool, w, row0, n_out, x, T, y);
    if (T <= TERN_GEMV_MAX_T && w->fmt == TERN_WF_BF16) {
        int64_t in_pad = (in + 31) / 32 * 32;
        uint16_t *xb = to_bf16(x, T, in, in_pad);
        if (!xb)
            return 0;
        bf16_job j = {w, row0, n_out, T, in, in_pad, xb, y};
        tern_pool_parallel_for(pool, (size_t)n_out, 8, bf16_gemv_range, &j);
        free(xb);
        return 1;
    }
    if (w->fmt == TERN_WF_MXFP4 && kind == TERN_MM_DECODE)
        return 0; /* the portable path, at every T */
    const int64_t kpad = (in + 31) / 32 * 32;
    uint16_t *xb = to_bf16(x, T, in, kpad);
    if (!xb)
        return 0;
    /* A tile of weight rows stays within ~256 KB (L2) while every group of 4 tokens streams over it. */
    int64_t tile_rows = (256 << 10) / (kpad * 2);
    tile_rows = tile_rows < 4 ? 4 : tile_rows > 64 ? 64 : tile_rows / 4 * 4;
    gemm_job j = {w, row0, n_out, T, in, kpad, tile_rows, xb, y};
    tern_pool_parallel_for(pool, (size_t)n_out, (size_t)tile_rows, gemm_range, &j);
    free(xb);
    return 1;
}

double tern_read_sum_avx512(const float *p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
    }
    double s = hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; i < n; i++)
        s += p[i];
    return s;
}

/* ---- activations ------------------------------------------------------------------------------ */

/* exp(x) for x in [-87, 88]: 2^n * p(r) with n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), p a degree-6
 * Taylor polynomial; relative error ~1e-7. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* tanh(u) = sign(u) (1 - 2 / (exp(2|u|) + 1)). */
static inline __m512 tanh512(__m512 u) {
    const __m512 a = _mm512_abs_ps(u);
    const __m512 e = exp512(_mm512_add_ps(a, a));
    const __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32((int)0x80000000u))));
}

void tern_gelu_tanh_avx512(float *x, int64_t n) {
    const __m512 k = _mm512_set1_ps(0.7978845608028654f), c = _mm512_set1_ps(0.044715f), h = _mm512_set1_ps(0.5f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512 u = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(c, v), _mm512_mul_ps(v, v), v));
        const __m512 g = _mm512_mul_ps(_mm512_mul_ps(h, v), _mm512_add_ps(_mm512_set1_ps(1.0f), tanh512(u)));
        _mm512_mask_storeu_ps(x + i, m, g);
    }
}

void tern_softcap_avx512(float *x, int64_t n, float cap) {
    const __m512 c = _mm512_set1_ps(cap), ic = _mm512_set1_ps(1.0f / cap);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(c, tanh512(_mm512_mul_ps(v, ic))));
    }
}

/* ---- attention -------------------------------------------------------------------------------------- */

static inline __m512 load16(const void *base, tern_dtype dt, int64_t i) {
    if (dt == TERN_DT_F32)
        return _mm512_loadu_ps((const float *)base + i);
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

void tern_attend_avx512(const tern_attn_args *a) {
    const int64_t hd = a->head_dim, group = a->n_heads / a->kv_heads, row = a->kv_heads * hd;
    const int64_t n = a->end - a->start + 1;
    for (int64_t j = 0; j < n; j++) {
        const int64_t slot = (a->start + j) % a->slots;
        for (int64_t g = 0; g < a->kv_heads; g++) {
            const int64_t off = slot * row + g * hd;
            __m512 acc[16];
            for (int64_t h = 0; h < group; h++)
                acc[h] = _mm512_setzero_ps();
            for (int64_t d = 0; d < hd; d += 16) {
                const __m512 kv = load16(a->k, a->dtype, off + d);
                for (int64_t h = 0; h < group; h++)
                    acc[h] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(a->q + (g * group + h) * hd + d), acc[h]);
            }
            for (int64_t h = 0; h < group; h++)
                a->scores[(g * group + h) * n + j] = hsum(acc[h]);
        }
    }
    for (int64_t h = 0; h < a->n_heads; h++)
        tern_softmax(a->scores + h * n, n);
    memset(a->out, 0, (size_t)(a->n_heads * hd) * sizeof(float));
    for (int64_t j = 0; j < n; j++) {
        const int64_t slot = (a->start + j) % a->slots;
        for (int64_t g = 0; g < a->kv_heads; g++) {
            const int64_t off = slot * row + g * hd;
            for (int64_t d = 0; d < hd; d += 16) {
                const __m512 vv = load16(a->v, a->dtype, off + d);
                for (int64_t h = 0; h < group; h++) {
                    float *o = a->out + (g * group + h) * hd + d;
                    _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_set1_ps(a->scores[(g * group + h) * n + j]), vv,
                                                        _mm512_loadu_ps(o)));
                }
            }
        }
    }
}
