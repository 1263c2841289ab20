/* kernels_avx512.c — AVX-512 matrix products (compiled with AVX-512 flags; called only when cpuid
 * reports F/BW/VL/VNNI/BF16).
 *
 * (MLX affine q4/q8 weights with groups of 32 or more take the int8 kernel of qmm_avx512.c before reaching
 * this file; other MLX shapes and mxfp4 come here as rows converted to bf16.)
 * - bf16 weights, few tokens: VDPBF16PS on the stored rows with bf16 activations, 8 rows x 1-2 or 4 rows x 4
 *   tokens at a time.
 * - bf16 weights, many tokens (prefill): tiles of rows in L2, 4x4 register blocks of VDPBF16PS dot products
 *   summed in the same order as the GEMV, so results do not depend on the batch.
 * - f32/f16 weights: f32 FMA, rows and tokens blocked as for bf16 (the parity path keeps f32 precision end to end).
 * Also the bandwidth probe's read loop, vectorised exp/tanh/GELU/soft-cap/RMSNorm, and attention. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "tensor/attention.h"
#include "tensor/checksum.h"
#include "tensor/kernels.h"
#include "tensor/qblock_mm.h"
#include "tensor/ops.h"
#include "tensor/quant_mlx.h"

static float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

static __mmask16 tail_mask16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }
static __mmask32 tail_mask32(int64_t n) { return n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1); }

/* CALL(NR, NT) with NR = nr and NT = nt (each 1..4) as compile-time constants, so the register blocks unroll. */
#define SWITCH_4X4(nr, nt, CALL)                                                                                  \
    switch ((nr) * 4 + (nt)) {                                                                                    \
    case 4 * 4 + 4: CALL(4, 4); break;                                                                            \
    case 4 * 4 + 3: CALL(4, 3); break;                                                                            \
    case 4 * 4 + 2: CALL(4, 2); break;                                                                            \
    case 4 * 4 + 1: CALL(4, 1); break;                                                                            \
    case 3 * 4 + 4: CALL(3, 4); break;                                                                            \
    case 3 * 4 + 3: CALL(3, 3); break;                                                                            \
    case 3 * 4 + 2: CALL(3, 2); break;                                                                            \
    case 3 * 4 + 1: CALL(3, 1); break;                                                                            \
    case 2 * 4 + 4: CALL(2, 4); break;                                                                            \
    case 2 * 4 + 3: CALL(2, 3); break;                                                                            \
    case 2 * 4 + 2: CALL(2, 2); break;                                                                            \
    case 2 * 4 + 1: CALL(2, 1); break;                                                                            \
    case 1 * 4 + 4: CALL(1, 4); break;                                                                            \
    case 1 * 4 + 3: CALL(1, 3); break;                                                                            \
    case 1 * 4 + 2: CALL(1, 2); break;                                                                            \
    default: CALL(1, 1); break;                                                                                   \
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

/* y[t][r] for NR stored rows from W (stride `in`) x NT tokens (compile-time constants at every call; NR <= 8,
 * NR x NT <= 16). Each
 * (row, token) is one chain of VDPBF16PS along k (the GEMV and the tiled GEMM both take it, so a token's result
 * does not depend on which ran); the NR rows run side by side so that the chains overlap (one row alone waits on
 * its chain's latency: ~11 GB/s per core). */
static inline __attribute__((always_inline)) void gemv_dot(const uint16_t *W, int64_t in, const uint16_t *X,
                                                           int64_t in_pad, const int NR, const int NT, float *y,
                                                           int64_t ystride) {
    __m512 acc[8][4];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < in; k += 32) {
        const __mmask32 m = tail_mask32(in - k);
        __m512i wv[8];
        for (int r = 0; r < NR; r++)
            wv[r] = _mm512_maskz_loadu_epi16(m, W + r * in + k);
        for (int t = 0; t < NT; t++) {
            const __m512i xv = _mm512_loadu_si512(X + t * in_pad + k);
            for (int r = 0; r < NR; r++)
                acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], (__m512bh)xv);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < NR; r++)
            y[t * ystride + r] = hsum(acc[r][t]);
}

/* CALL(NR, NT) for every block shape walk_blocks hands out (8 rows x 1-2 tokens, else up to 4 x 4), as constants. */
#define SWITCH_BLOCK(nr, nt, CALL)                                                                                \
    do {                                                                                                          \
        if ((nr) == 8)                                                                                            \
            (nt) == 1 ? CALL(8, 1) : CALL(8, 2);                                                                  \
        else                                                                                                      \
            SWITCH_4X4(nr, nt, CALL);                                                                             \
    } while (0)

/* The register blocks of a float product over rows [b, e) and T tokens: blk(job, o, t0, nr, nt) computes rows
 * o .. o+nr-1 for tokens t0 .. t0+nt-1, 8 rows at once for one or two tokens (8 or 16 dot-product chains in flight:
 * with 3 KB rows 4 left ~20% of the bandwidth unused), else 4 rows x up to 4 tokens. Inlined with blk: as a call
 * per block it measured ~4 points slower on such rows. */
static inline __attribute__((always_inline)) void walk_blocks(const void *job, size_t b, size_t e, int64_t T,
                        void (*blk)(const void *job, size_t o, int64_t t0, int nr, int nt)) {
    for (size_t o8 = b; o8 < e; o8 += 8) {
        const int rows = e - o8 < 8 ? (int)(e - o8) : 8;
        for (int64_t t0 = 0; t0 < T; t0 += 4) {
            const int nt = T - t0 < 4 ? (int)(T - t0) : 4;
            if (rows == 8 && nt <= 2) {
                blk(job, o8, t0, 8, nt);
                continue;
            }
            for (int sub = 0; sub < rows; sub += 4)
                blk(job, o8 + (size_t)sub, t0, rows - sub < 4 ? rows - sub : 4, nt);
        }
    }
}

#define GEMV_CASE(nr, nt) gemv_dot(wr, in, xb, j->in_pad, nr, nt, y, j->n_out)

static inline __attribute__((always_inline)) void bf16_block(const void *ctx, size_t o, int64_t t0, int nr, int nt) {
    const bf16_job *j = ctx;
    const int64_t in = j->in;
    const uint16_t *wr = (const uint16_t *)j->w->data + (j->row0 + (int64_t)o) * in, *xb = j->xb + t0 * j->in_pad;
    float *y = j->y + t0 * j->n_out + (int64_t)o;
    SWITCH_BLOCK(nr, nt, GEMV_CASE);
}

static void bf16_gemv_range(void *ctx, size_t b, size_t e, int tid) {
    walk_blocks(ctx, b, e, ((const bf16_job *)ctx)->T, bf16_block);
}

/* ---- tiled GEMM over bf16 rows (many tokens, any format but f32/f16) ------------------------------------ */

typedef struct gemm_job {
    const tern_weight *w;
    int64_t row0, n_out, T, in, kpad; /* kpad: row length padded to 32 */
    int64_t tile_rows;
    const uint16_t *xb;               /* [T][kpad] */
    float *y;
    int failed; /* a worker lacked scratch memory */
} gemm_job;

/* Row r of w as bf16 into out[kpad] (zero padded). */
static void row_to_bf16(const tern_weight *w, int64_t r, int64_t in, int64_t kpad, uint16_t *out, float *scratch) {
    memset(out + in, 0, (size_t)(kpad - in) * sizeof *out);
    if (w->fmt == TERN_WF_BF16) {
        memcpy(out, (const uint16_t *)w->data + r * in, (size_t)in * sizeof *out);
        return;
    }
    tern_weight_row(w, r, scratch);
    for (int64_t k = 0; k < in; k++)
        out[k] = tern_f32_to_bf16(scratch[k]);
}

/* A tile row is kpad elements, zero padded: gemv_dot over it reads whole vectors and sums in the same order. */
#define GEMM_CASE(nr, nt) gemv_dot(tile + i * kpad, kpad, xb, kpad, nr, nt, y, j->n_out)

static void gemm_range(void *ctx, size_t b, size_t e, int tid) {
    const gemm_job *j = ctx;
    const int64_t in = j->in, kpad = j->kpad;
    uint16_t *tile = malloc((size_t)(j->tile_rows * kpad) * sizeof *tile);
    float *scratch = malloc((size_t)(in + 32) * sizeof *scratch);
    if (!tile || !scratch) {
        tern_job_fail(&j->failed);
        goto done;
    }
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
                SWITCH_4X4(nr, nt, GEMM_CASE);
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

/* y[t][r] for NR rows of f32 or f16 weights from row r0 x NT tokens (compile-time constants at every call; NR <= 8,
 * NR x NT <= 16): per
 * (row, token) one chain of FMAs along k, the NR rows side by side so the chains overlap; f16 rows are widened
 * as they are read (exactly). */
static inline __attribute__((always_inline)) void f32_dot(const f32_job *j, int64_t r0, int64_t t0, const int NR,
                                                          const int NT, const int half, float *y) {
    const int64_t in = j->in;
    __m512 acc[8][4];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < in; k += 16) {
        const __mmask16 m = tail_mask16(in - k);
        __m512 wv[8];
        for (int r = 0; r < NR; r++)
            wv[r] = half ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)j->w->data + (r0 + r) * in + k))
                         : _mm512_maskz_loadu_ps(m, (const float *)j->w->data + (r0 + r) * in + k);
        for (int t = 0; t < NT; t++) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, j->x + (t0 + t) * in + k);
            for (int r = 0; r < NR; r++)
                acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < NR; r++)
            y[t * j->n_out + r] = hsum(acc[r][t]);
}

#define F32_CASE(nr, nt) half ? f32_dot(j, r0, t0, nr, nt, 1, y) : f32_dot(j, r0, t0, nr, nt, 0, y)

static inline __attribute__((always_inline)) void f32_block(const void *ctx, size_t o, int64_t t0, int nr, int nt) {
    const f32_job *j = ctx;
    const int half = j->w->fmt == TERN_WF_F16;
    const int64_t r0 = j->row0 + (int64_t)o;
    float *y = j->y + t0 * j->n_out + (int64_t)o;
    SWITCH_BLOCK(nr, nt, F32_CASE);
}

static void f32_range(void *ctx, size_t b, size_t e, int tid) {
    walk_blocks(ctx, b, e, ((const f32_job *)ctx)->T, f32_block);
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
    if (T <= TERN_GEMV_MAX_T && w->fmt == TERN_WF_BF16) {
        int64_t in_pad = (in + 31) / 32 * 32;
        uint16_t *xb = to_bf16(x, T, in, in_pad);
        if (!xb)
            return -1;
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
        return -1;
    /* A tile of weight rows stays within ~256 KB (L2) while every group of 4 tokens streams over it. */
    int64_t tile_rows = (256 << 10) / (kpad * 2);
    tile_rows = tile_rows < 4 ? 4 : tile_rows > 64 ? 64 : tile_rows / 4 * 4;
    gemm_job j = {w, row0, n_out, T, in, kpad, tile_rows, xb, y, 0};
    tern_pool_parallel_for(pool, (size_t)n_out, (size_t)tile_rows, gemm_range, &j);
    free(xb);
    return j.failed ? -1 : 1;
}

double tern_read_sum_avx512(const float *p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        /* Asked for ahead of use, as the matmul kernels do: the probe measures what the cores can pull. */
        _mm_prefetch((const char *)(p + i) + 2048, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i) + 2048 + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i) + 2048 + 128, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i) + 2048 + 192, _MM_HINT_T0);
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

/* gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))). */
static inline __m512 gelu512(__m512 v) {
    const __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                   _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), v), _mm512_mul_ps(v, v), v));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.0f), tanh512(u)));
}

void tern_gelu_tanh_avx512(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(x + i, m, gelu512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* The f16 table's gelu: each value rounded to f16 (VCVTPS2PH, nearest even), its entry gathered (4 bytes from
 * entry h: the padding entry keeps the last in bounds) and widened back, the ends taken as the table's definition. */
static void gelu_tanh_mul_f16_avx512(float *g, const float *u, int64_t n, const uint16_t *table) {
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, h, (const void *)table, 2);
        __m512 y = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(e));
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

void tern_gelu_tanh_mul_avx512(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(gelu512(_mm512_maskz_loadu_ps(m, g + i)), _mm512_maskz_loadu_ps(m, u + i)));
    }
}

void tern_rmsnorm_avx512(const float *x, const float *w, int64_t n, float eps, float *y) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask16(n - i), x + i);
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        a0 = _mm512_fmadd_pd(lo, lo, a0);
        a1 = _mm512_fmadd_pd(hi, hi, a1);
    }
    const double ss = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    const __m512 r = _mm512_set1_ps((float)(1.0 / sqrt(ss / (double)n + eps)));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), r);
        if (w)
            v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

void tern_exp_avx512(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __mmask16 live = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-87.0f), _CMP_GE_OQ); /* NaN: not live */
        _mm512_mask_storeu_ps(x + i, m, _mm512_maskz_mov_ps(live, exp512(v)));
    }
}

void tern_silu_mul_avx512(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), cap = _mm512_set1_ps(88.0f), lo = _mm512_set1_ps(-87.0f);
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        /* min(-g, 88); a NaN g gives 88, as the C comparison does */
        const __m512 t = _mm512_min_ps(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign)), cap);
        const __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, lo, _CMP_GE_OQ), exp512(t));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)),
                                                      _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* Three passes: the maximum, e^(x - max) stored and summed (in float lanes, then double), the scale. */
void tern_softmax_avx512(float *x, int64_t n) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        vm = _mm512_mask_max_ps(vm, m, vm, _mm512_maskz_loadu_ps(m, x + i));
    }
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vm));
    __m512 vs = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        const __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mx);
        const __mmask16 live = _mm512_mask_cmp_ps_mask(m, v, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
        const __m512 e = _mm512_maskz_mov_ps(live, exp512(v));
        _mm512_mask_storeu_ps(x + i, m, e);
        vs = _mm512_add_ps(vs, e);
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / (double)_mm512_reduce_add_ps(vs)));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}

void tern_rope_apply_avx512(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn) {
    const int64_t half = dim / 2;
    for (int64_t i = 0; i < half; i += 16) {
        const __mmask16 m = tail_mask16(half - i);
        /* Unordered compare, as the portable `!= 0` reads: a NaN frequency rotates (and spreads the NaN). */
        const __mmask16 live =
            _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, inv_freq + i), _mm512_setzero_ps(), _CMP_NEQ_UQ);
        const __m512 x0 = _mm512_maskz_loadu_ps(m, x + i), x1 = _mm512_maskz_loadu_ps(m, x + i + half);
        const __m512 c = _mm512_maskz_loadu_ps(m, cs + i), s = _mm512_maskz_loadu_ps(m, sn + i);
        _mm512_mask_storeu_ps(x + i, live, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
        _mm512_mask_storeu_ps(x + i + half, live, _mm512_add_ps(_mm512_mul_ps(x1, c), _mm512_mul_ps(x0, s)));
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

/* Values i .. i + 15 of a cache row run stored as t (i a multiple of 16, so a block type's run is in one block). */
static inline __m512 load16(const void *base, tern_kv_type t, int64_t i) {
    const uint8_t *b = base;
    uint16_t h;
    switch (t) {
    case TERN_KV_F32: return _mm512_loadu_ps((const float *)base + i);
    case TERN_KV_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 2 * i)));
    case TERN_KV_Q8_0: {
        b += (i >> 5) * 34;
        memcpy(&h, b, 2);
        const __m512i c = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + (i & 31))));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(c), _mm512_set1_ps(_cvtsh_ss(h)));
    }
    case TERN_KV_Q4_0: {
        b += (i >> 5) * 18;
        memcpy(&h, b, 2);
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        q = _mm_and_si128(i & 16 ? _mm_srli_epi16(q, 4) : q, _mm_set1_epi8(15));
        const __m512i c = _mm512_sub_epi32(_mm512_cvtepu8_epi32(q), _mm512_set1_epi32(8));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(c), _mm512_set1_ps(_cvtsh_ss(h)));
    }
    default: {
        const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + 2 * i)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
    }
}

/* Lane i of the result is the sum of the 16 lanes of v[i]: a transpose-and-add tree (15 adds and 30 shuffles
 * for 16 sums, against ~8 operations per sum one at a time). Lane 4k+m of the tree holds v[4m+k]; the final
 * permutation puts it in order. */
static inline __m512 reduce16(const __m512 *v) {
    __m512 w[8], x[4], y[2];
    for (int i = 0; i < 8; i++) /* 128-bit lanes: [v2i 0+2, v2i 1+3, v2i+1 0+2, v2i+1 1+3] */
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* 128-bit lane k: 4 partial sums of v[4i+k] */
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

/* The softmax of one head's scores in place: exp(s - max), with the max and the sum of the exps out. */
static inline void softmax_row(float *s, int64_t n, float *mx_out, float *sum_out) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 16)
        mx = _mm512_mask_max_ps(mx, tail_mask16(n - j), mx, _mm512_maskz_loadu_ps(tail_mask16(n - j), s + j));
    *mx_out = _mm512_reduce_max_ps(mx);
    const __m512 m = _mm512_set1_ps(*mx_out);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = tail_mask16(n - j);
        const __m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m)));
        sum = _mm512_add_ps(sum, e);
        _mm512_mask_storeu_ps(s + j, k, e);
    }
    *sum_out = _mm512_reduce_add_ps(sum);
}

/* The shared attention partial (attention_simd.inc) at 16 lanes: 4 V slices per pass with up to 4 query heads per
 * KV head, 3 with 8 (32 zmm registers), then a two-slice pass. */
#define AV_W 16
#define AV_VEC __m512
#define AV_ZERO() _mm512_setzero_ps()
#define AV_SET1(x) _mm512_set1_ps(x)
#define AV_LOADU(p) _mm512_loadu_ps(p)
#define AV_STOREU(p, v) _mm512_storeu_ps(p, v)
#define AV_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define AV_NV(group) ((group) <= 4 ? 4 : (group) <= 8 ? 3 : 1)
#define AV_PAIR_TAIL(group) ((group) <= 8)
#define AV_ATTEND_PART tern_attend_part_avx512
#define load_kv load16
#define reduce_lanes reduce16
#include "tensor/attention_simd.inc"

void tern_axpby_avx512(float *y, const float *x, int64_t n, float a, float b) {
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask16(n - i);
        const __m512 r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, y + i), va, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vb));
        _mm512_mask_storeu_ps(y + i, k, r);
    }
}

/* One register tile: R (<= 8) rows of C by up to 32 columns (2R accumulators, so B's row k is read once per 8 rows
 * of A); each k broadcasts the rows' A values and multiplies them into two vectors of B's row k; masked loads and
 * stores take a tail of columns. */
static inline __attribute__((always_inline)) void sgemm_tile16(int R, int64_t K, const float *A, int64_t lda,
                                                               const float *B, int64_t ldb, float *C, int64_t ldc,
                                                               __mmask16 k0, __mmask16 k1) {
    __m512 c0[8], c1[8];
    for (int q = 0; q < R; q++)
        c0[q] = c1[q] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        const __m512 b0 = _mm512_maskz_loadu_ps(k0, b), b1 = _mm512_maskz_loadu_ps(k1, b + 16);
        for (int q = 0; q < R; q++) {
            const __m512 a = _mm512_set1_ps(A[q * lda + k]);
            c0[q] = _mm512_fmadd_ps(a, b0, c0[q]);
            c1[q] = _mm512_fmadd_ps(a, b1, c1[q]);
        }
    }
    for (int q = 0; q < R; q++) {
        _mm512_mask_storeu_ps(C + q * ldc, k0, c0[q]);
        _mm512_mask_storeu_ps(C + q * ldc + 16, k1, c1[q]);
    }
}

/* The products' register tiles over C: columns in blocks of 32 (the last masked), rows in blocks of 8, the last rows
 * each count with its own constant so that TILE_FN's tile stays in registers. */
#define TILED_PRODUCT(TILE_FN)                                                                                     \
    for (int64_t j = 0; j < N; j += 32) {                                                                         \
        const __mmask16 k0 = tail_mask16(N - j), k1 = tail_mask16(N - j > 16 ? N - j - 16 : 0);                  \
        int64_t i = 0;                                                                                            \
        for (; i + 8 <= M; i += 8)                                                                                \
            TILE_FN(8, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1);                            \
        switch (M - i) {                                                                                          \
        case 7: TILE_FN(7, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        case 6: TILE_FN(6, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        case 5: TILE_FN(5, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        case 4: TILE_FN(4, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        case 3: TILE_FN(3, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        case 2: TILE_FN(2, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        case 1: TILE_FN(1, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1); break;                 \
        default: break;                                                                                           \
        }                                                                                                         \
    }

void tern_sgemm_avx512(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                       float *C, int64_t ldc) {
    TILED_PRODUCT(sgemm_tile16)
}

/* One register tile of the bf16 product: R (<= 8) rows of C by up to 32 columns; each pair of k broadcasts the rows'
 * pairs of A values and takes VDPBF16PS against two vectors of B's packed pair row. */
static inline __attribute__((always_inline)) void bgemm_tile16(int R, int64_t K, const uint16_t *A, int64_t lda,
                                                               const uint32_t *Bp, int64_t ldb, float *C, int64_t ldc,
                                                               __mmask16 k0, __mmask16 k1) {
    __m512 c0[8], c1[8];
    for (int q = 0; q < R; q++)
        c0[q] = c1[q] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 2) {
        const uint32_t *b = Bp + k / 2 * ldb;
        const __m512i b0 = _mm512_maskz_loadu_epi32(k0, b), b1 = _mm512_maskz_loadu_epi32(k1, b + 16);
        for (int q = 0; q < R; q++) {
            uint32_t pair;
            memcpy(&pair, A + q * lda + k, sizeof pair);
            const __m512i a = _mm512_set1_epi32((int)pair);
            c0[q] = _mm512_dpbf16_ps(c0[q], (__m512bh)a, (__m512bh)b0);
            c1[q] = _mm512_dpbf16_ps(c1[q], (__m512bh)a, (__m512bh)b1);
        }
    }
    for (int q = 0; q < R; q++) {
        _mm512_mask_storeu_ps(C + q * ldc, k0, c0[q]);
        _mm512_mask_storeu_ps(C + q * ldc + 16, k1, c1[q]);
    }
}

void tern_bgemm_avx512(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *B, int64_t ldb,
                       float *C, int64_t ldc) {
    TILED_PRODUCT(bgemm_tile16)
}

/* VCVTNEPS2BF16 rounds to nearest even; a NaN comes out quiet, as the scalar conversion makes it. */
void tern_to_bf16_avx512(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask16(n - i);
        const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(k, x + i));
        _mm256_mask_storeu_epi16(y + i, k, (__m256i)v);
    }
}

/* Lanes 0-7 in one register, 8-15 in the other; swapping the 64-bit halves of each 128-bit lane gives d[j ^ 1]. */
static void checksum_blocks_avx512(uint64_t acc[16], const void *p, size_t blocks, uint64_t first) {
    const uint8_t *b = p;
    __m512i a0 = _mm512_loadu_si512(acc), a1 = _mm512_loadu_si512(acc + 8);
    const __m512i g = _mm512_set1_epi64((long long)TERN_CHECKSUM_G);
    uint64_t key[16];
    for (int j = 0; j < 16; j++)
        key[j] = (uint64_t)(j + 1) * TERN_CHECKSUM_K + first * TERN_CHECKSUM_G;
    __m512i k0 = _mm512_loadu_si512(key), k1 = _mm512_loadu_si512(key + 8);
    for (size_t i = 0; i < blocks; i++, b += 128) {
        const __m512i d0 = _mm512_loadu_si512(b), d1 = _mm512_loadu_si512(b + 64);
        const __m512i x0 = _mm512_xor_si512(d0, k0), x1 = _mm512_xor_si512(d1, k1);
        a0 = _mm512_add_epi64(a0, _mm512_add_epi64(_mm512_mul_epu32(x0, _mm512_srli_epi64(x0, 32)),
                                                   _mm512_shuffle_epi32(d0, _MM_PERM_BADC)));
        a1 = _mm512_add_epi64(a1, _mm512_add_epi64(_mm512_mul_epu32(x1, _mm512_srli_epi64(x1, 32)),
                                                   _mm512_shuffle_epi32(d1, _MM_PERM_BADC)));
        k0 = _mm512_add_epi64(k0, g);
        k1 = _mm512_add_epi64(k1, g);
    }
    _mm512_storeu_si512(acc, a0);
    _mm512_storeu_si512(acc + 8, a1);
}

/* Every entry but the ISA and the int8 products' kernels, shared by the AVX-512 and AMX tables. */
#define AVX512_ENTRIES                                                                                     \
    .lanes = 16, .qblock = &tern_qblock_avx512, .matmul = tern_matmul_avx512, .rmsnorm = tern_rmsnorm_avx512, \
    .rope_apply = tern_rope_apply_avx512, .gelu_tanh = tern_gelu_tanh_avx512,                               \
    .gelu_tanh_mul = tern_gelu_tanh_mul_avx512, .gelu_tanh_mul_f16 = gelu_tanh_mul_f16_avx512,              \
    .softcap = tern_softcap_avx512, .silu_mul = tern_silu_mul_avx512, .exp = tern_exp_avx512, .softmax = tern_softmax_avx512, .axpby = tern_axpby_avx512, .sgemm = tern_sgemm_avx512, .bgemm = tern_bgemm_avx512, .to_bf16 = tern_to_bf16_avx512,                      \
    .attend_part = tern_attend_part_avx512, .read_sum = tern_read_sum_avx512,                               \
    .checksum_blocks = checksum_blocks_avx512

const tern_kernel_table tern_kernels_avx512 = {.isa = TERN_ISA_AVX512, .qmm = &tern_qmm_avx512, AVX512_ENTRIES};
const tern_kernel_table tern_kernels_amx = {.isa = TERN_ISA_AMX, .qmm = &tern_qmm_amx, AVX512_ENTRIES};
