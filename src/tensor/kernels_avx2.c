/* kernels_avx2.c — AVX2 + FMA kernels (compiled with AVX2 flags; called only when cpuid reports them).
 * Matrix products: each weight row is expanded to f32 in registers (bf16 by shifting, f16 by F16C, MLX
 * affine shapes the int8 kernel of qmm_avx2.c does not take by variable shifts of the packed words and one
 * FMA per group) into a row buffer (f32, bf16 and f16 rows are widened as they are read), then 4 rows at a time
 * are dotted with up to 2 tokens at a time. Also the
 * bandwidth probe's read loop, vectorised exp/tanh/GELU/soft-cap/RMSNorm, and attention (8 lanes). */
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

static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Expands row r of w into out[in] as f32; returns 0 for formats this path leaves to the portable code. */
static int expand_row(const tern_weight *w, int64_t r, int64_t in, float *out) {
    int64_t k = 0;
    switch (w->fmt) {
    case TERN_WF_F32: memcpy(out, (const float *)w->data + r * in, (size_t)in * sizeof *out); return 1;
    case TERN_WF_BF16: {
        const uint16_t *src = (const uint16_t *)w->data + r * in;
        for (; k + 8 <= in; k += 8) {
            __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + k)));
            _mm256_storeu_ps(out + k, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; k < in; k++)
            out[k] = tern_bf16_to_f32(src[k]);
        return 1;
    }
    case TERN_WF_F16: {
        const uint16_t *src = (const uint16_t *)w->data + r * in;
        for (; k + 8 <= in; k += 8)
            _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
        for (; k < in; k++)
            out[k] = tern_f16_to_f32(src[k]);
        return 1;
    }
    case TERN_WF_MLX_AFFINE: {
        const int g = w->group, bits = w->bits;
        if ((bits != 4 && bits != 8) || g < 8 || in % g)
            return 0;
        const int64_t ng = in / g, words = tern_mlx_row_words(in, bits);
        const uint8_t *q = (const uint8_t *)w->data + (size_t)(r * words) * 4;
        const size_t ss = tern_dtype_size(w->sdtype);
        const void *sc = (const char *)w->scales + (size_t)(r * ng) * ss, *bi = (const char *)w->biases + (size_t)(r * ng) * ss;
        const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), m4 = _mm256_set1_epi32(0xf);
        for (int64_t gi = 0; gi < ng; gi++) {
            const __m256 s = _mm256_set1_ps(tern_mlx_scale(sc, w->sdtype, gi)), b = _mm256_set1_ps(tern_mlx_scale(bi, w->sdtype, gi));
            for (int64_t k0 = gi * g; k0 < (gi + 1) * g; k0 += 8) {
                __m256i v;
                if (bits == 4) {
                    uint32_t word;
                    memcpy(&word, q + k0 / 2, 4);
                    v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)word), shifts), m4);
                } else {
                    int64_t two;
                    memcpy(&two, q + k0, 8);
                    v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(two));
                }
                _mm256_storeu_ps(out + k0, _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(v), b));
            }
        }
        return 1;
    }
    default: return 0;
    }
}

typedef struct avx2_job {
    const tern_weight *w;
    int64_t row0, n_out, T, in;
    const float *x;
    float *y;
    int failed; /* a worker lacked scratch memory */
} avx2_job;

/* Elements k .. k+7 of a row stored as f32 (FMT 0), bf16 (1) or f16 (2), widened exactly. */
static inline __attribute__((always_inline)) __m256 row8(const void *row, int64_t k, const int FMT) {
    if (FMT == 0)
        return _mm256_loadu_ps((const float *)row + k);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + k));
    return FMT == 1 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

static inline float row_elem(const void *row, int64_t k, const int FMT) {
    return FMT == 0 ? ((const float *)row)[k]
         : FMT == 1 ? tern_bf16_to_f32(((const uint16_t *)row)[k]) : tern_f16_to_f32(((const uint16_t *)row)[k]);
}

/* y[t][r] for NR rows wr[r] (stored as FMT) x NT tokens from x (compile-time constants at every call): per (row,
 * token) one chain of FMAs along k, then the scalar tail; the NR rows side by side so that their chains overlap
 * (one row alone waits on its chain's latency), each row widened as it is read. */
static inline __attribute__((always_inline)) void dot_rows(const void *const *wr, const float *x, int64_t in,
                                                           const int NR, const int NT, const int FMT, float *y,
                                                           int64_t ystride) {
    __m256 acc[4][2];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= in; k += 8) {
        __m256 wv[4];
        for (int r = 0; r < NR; r++)
            wv[r] = row8(wr[r], k, FMT);
        for (int t = 0; t < NT; t++) {
            const __m256 xv = _mm256_loadu_ps(x + t * in + k);
            for (int r = 0; r < NR; r++)
                acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < NR; r++) {
            float s = hsum8(acc[r][t]);
            for (int64_t kk = k; kk < in; kk++)
                s += row_elem(wr[r], kk, FMT) * x[t * in + kk];
            y[t * ystride + r] = s;
        }
}

#define DOT_FMT(nr, nt) \
    (fmt == 1 ? dot_rows(wr, x, in, nr, nt, 1, y, ys) : fmt == 2 ? dot_rows(wr, x, in, nr, nt, 2, y, ys) \
              : dot_rows(wr, x, in, nr, nt, 0, y, ys))

static void dot_case(const void *const *wr, const float *x, int64_t in, int nr, int nt, int fmt, float *y, int64_t ys) {
    switch (nr * 2 + nt) {
    case 4 * 2 + 2: DOT_FMT(4, 2); break;
    case 4 * 2 + 1: DOT_FMT(4, 1); break;
    case 3 * 2 + 2: DOT_FMT(3, 2); break;
    case 3 * 2 + 1: DOT_FMT(3, 1); break;
    case 2 * 2 + 2: DOT_FMT(2, 2); break;
    case 2 * 2 + 1: DOT_FMT(2, 1); break;
    case 1 * 2 + 2: DOT_FMT(1, 2); break;
    default: DOT_FMT(1, 1); break;
    }
}

static void avx2_range(void *ctx, size_t b, size_t e, int tid) {
    const avx2_job *j = ctx;
    const int64_t in = j->in;
    const tern_wformat f = j->w->fmt;
    /* f32, bf16 and f16 rows are read where they are stored; other formats are expanded to f32 first. */
    const int fmt = f == TERN_WF_BF16 ? 1 : f == TERN_WF_F16 ? 2 : 0, in_place = f == TERN_WF_F32 || fmt;
    const size_t es = f == TERN_WF_F32 ? 4 : 2;
    float *rows = in_place ? NULL : malloc((size_t)(4 * in) * sizeof *rows);
    if (!in_place && !rows) {
        tern_job_fail(&j->failed);
        return;
    }
    for (size_t o = b; o < e; o += 4) {
        const int nr = e - o < 4 ? (int)(e - o) : 4;
        const void *wr[4];
        for (int r = 0; r < nr; r++) {
            const int64_t row = j->row0 + (int64_t)o + r;
            if (in_place)
                wr[r] = (const char *)j->w->data + (size_t)(row * in) * es;
            else {
                expand_row(j->w, row, in, rows + r * in);
                wr[r] = rows + r * in;
            }
        }
        for (int64_t t0 = 0; t0 < j->T; t0 += 2)
            dot_case(wr, j->x + t0 * in, in, nr, j->T - t0 < 2 ? 1 : 2, fmt, j->y + t0 * j->n_out + (int64_t)o,
                     j->n_out);
    }
    free(rows);
}

int tern_matmul_avx2(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                     float *y, tern_mm_kind kind) {
    (void)kind; /* one kernel serves prompt and generated tokens */
    const int64_t in = tern_weight_cols(w);
    if (w->fmt == TERN_WF_MLX_AFFINE && ((w->bits != 4 && w->bits != 8) || w->group < 8 || in % w->group))
        return 0;
    if (w->fmt == TERN_WF_MXFP4 || w->fmt == TERN_WF_NONE)
        return 0;
    avx2_job j = {w, row0, n_out, T, in, x, y, 0};
    tern_pool_parallel_for(pool, (size_t)n_out, 8, avx2_range, &j);
    return j.failed ? -1 : 1;
}

double tern_read_sum_avx2(const float *p, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm_prefetch((const char *)(p + i) + 2048, _MM_HINT_T0); /* as the AVX-512 probe: ahead of use */
        _mm_prefetch((const char *)(p + i) + 2048 + 64, _MM_HINT_T0);
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
    }
    double s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        s += p[i];
    return s;
}

/* ---- activations, norm and attention (the AVX-512 versions, 8 lanes wide) --------------------------- */

static inline __m256 tail_load8(const float *p, int64_t n) {
    if (n >= 8)
        return _mm256_loadu_ps(p);
    float t[8] = {0};
    memcpy(t, p, (size_t)n * sizeof *t);
    return _mm256_loadu_ps(t);
}

static inline void tail_store8(float *p, int64_t n, __m256 v) {
    if (n >= 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    float t[8];
    _mm256_storeu_ps(t, v);
    memcpy(p, t, (size_t)n * sizeof *t);
}

/* exp(x) for x in [-87, 88]: 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), p a degree-6
 * Taylor polynomial; 2^n built in the exponent field. */
static inline __m256 exp256(__m256 x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* n is in [-126, 127] after the clamp, so 2^n is a normal float built in the exponent field */
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* tanh(u) = sign(u) (1 - 2 / (exp(2|u|) + 1)). */
static inline __m256 tanh256(__m256 u) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 a = _mm256_andnot_ps(sign, u);
    const __m256 e = exp256(_mm256_add_ps(a, a));
    const __m256 t = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    return _mm256_or_ps(t, _mm256_and_ps(u, sign));
}

static inline __m256 gelu256(__m256 v) {
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                   _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), v), _mm256_mul_ps(v, v), v));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.0f), tanh256(u)));
}

void tern_gelu_tanh_avx2(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        tail_store8(x + i, n - i, gelu256(tail_load8(x + i, n - i)));
}

/* The f16 table's gelu (see kernels_avx512.c), 8 values at a time. */
static void gelu_tanh_mul_f16_avx2(float *g, const float *u, int64_t n, const uint16_t *table) {
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 x = tail_load8(g + i, n - i);
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i e = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)table, h, 2),
                                           _mm256_set1_epi32(0xffff));
        const __m128i e16 = _mm_packus_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
        __m256 y = _mm256_cvtph_ps(e16);
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
        tail_store8(g + i, n - i, _mm256_mul_ps(y, tail_load8(u + i, n - i)));
    }
}

void tern_gelu_tanh_mul_avx2(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        tail_store8(g + i, n - i, _mm256_mul_ps(gelu256(tail_load8(g + i, n - i)), tail_load8(u + i, n - i)));
}

void tern_softcap_avx2(float *x, int64_t n, float cap) {
    const __m256 c = _mm256_set1_ps(cap), ic = _mm256_set1_ps(1.0f / cap);
    for (int64_t i = 0; i < n; i += 8)
        tail_store8(x + i, n - i, _mm256_mul_ps(c, tanh256(_mm256_mul_ps(tail_load8(x + i, n - i), ic))));
}

void tern_rmsnorm_avx2(const float *x, const float *w, int64_t n, float eps, float *y) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 v = tail_load8(x + i, n - i);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_fmadd_pd(lo, lo, a0);
        a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
    const double ss = (t[0] + t[1]) + (t[2] + t[3]);
    const __m256 r = _mm256_set1_ps((float)(1.0 / sqrt(ss / (double)n + eps)));
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v = _mm256_mul_ps(tail_load8(x + i, n - i), r);
        if (w)
            v = _mm256_mul_ps(v, tail_load8(w + i, n - i));
        tail_store8(y + i, n - i, v);
    }
}

void tern_exp_avx2(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 v = tail_load8(x + i, n - i);
        const __m256 live = _mm256_cmp_ps(v, _mm256_set1_ps(-87.0f), _CMP_GE_OQ); /* NaN: not live */
        tail_store8(x + i, n - i, _mm256_and_ps(live, exp256(v)));
    }
}

void tern_silu_mul_avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), cap = _mm256_set1_ps(88.0f), lo = _mm256_set1_ps(-87.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 x = tail_load8(g + i, n - i);
        /* min(-g, 88): VMINPS gives its second operand for a NaN, as the C comparison does */
        const __m256 t = _mm256_min_ps(_mm256_xor_ps(x, sign), cap);
        const __m256 e = _mm256_and_ps(_mm256_cmp_ps(t, lo, _CMP_GE_OQ), exp256(t));
        tail_store8(g + i, n - i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), tail_load8(u + i, n - i)));
    }
}

/* Three passes: the maximum, e^(x - max) stored and summed (in float lanes), the scale. */
void tern_softmax_avx2(float *x, int64_t n) {
    float m = -INFINITY;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    for (int k = 0; k < 8; k++)
        m = lanes[k] > m ? lanes[k] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    const __m256 mx = _mm256_set1_ps(m);
    __m256 vs = _mm256_setzero_ps();
    for (i = 0; i < n; i += 8) {
        const __m256 v = _mm256_sub_ps(tail_load8(x + i, n - i), mx);
        const __m256 live = _mm256_cmp_ps(v, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
        __m256 e = _mm256_and_ps(live, exp256(v));
        if (n - i < 8) { /* lanes past the end were loaded as 0: e^(0 - max) must not count */
            float t[8];
            _mm256_storeu_ps(t, e);
            for (int64_t k = n - i; k < 8; k++)
                t[k] = 0;
            e = _mm256_loadu_ps(t);
        }
        tail_store8(x + i, n - i, e);
        vs = _mm256_add_ps(vs, e);
    }
    _mm256_storeu_ps(lanes, vs);
    double sum = 0;
    for (int k = 0; k < 8; k++)
        sum += lanes[k];
    const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    for (i = 0; i < n; i += 8)
        tail_store8(x + i, n - i, _mm256_mul_ps(tail_load8(x + i, n - i), inv));
}

void tern_rope_apply_avx2(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn) {
    const int64_t half = dim / 2;
    for (int64_t i = 0; i < half; i += 8) {
        const int64_t n = half - i;
        /* Lanes of zero frequency keep x (unordered compare: a NaN frequency rotates, as in the portable path). */
        const __m256 live = _mm256_cmp_ps(tail_load8(inv_freq + i, n), _mm256_setzero_ps(), _CMP_NEQ_UQ);
        const __m256 x0 = tail_load8(x + i, n), x1 = tail_load8(x + i + half, n);
        const __m256 c = tail_load8(cs + i, n), s = tail_load8(sn + i, n);
        const __m256 r0 = _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s));
        const __m256 r1 = _mm256_add_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x0, s));
        tail_store8(x + i, n, _mm256_blendv_ps(x0, r0, live));
        tail_store8(x + i + half, n, _mm256_blendv_ps(x1, r1, live));
    }
}

/* Values i .. i + 7 of a cache row run stored as t (i a multiple of 8, so a block type's run is in one block). */
static inline __m256 load8(const void *base, tern_kv_type t, int64_t i) {
    const uint8_t *b = base;
    uint16_t h;
    switch (t) {
    case TERN_KV_F32: return _mm256_loadu_ps((const float *)base + i);
    case TERN_KV_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i)));
    case TERN_KV_Q8_0: {
        b += (i >> 5) * 34;
        memcpy(&h, b, 2);
        const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + (i & 31))));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(_cvtsh_ss(h)));
    }
    case TERN_KV_Q4_0: {
        b += (i >> 5) * 18;
        memcpy(&h, b, 2);
        __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + (i & 15)));
        q = _mm_and_si128(i & 16 ? _mm_srli_epi16(q, 4) : q, _mm_set1_epi8(15));
        const __m256i c = _mm256_sub_epi32(_mm256_cvtepu8_epi32(q), _mm256_set1_epi32(8));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(_cvtsh_ss(h)));
    }
    default: {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 2 * i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    }
}

/* Lane i of the result is the sum of the 8 lanes of v[i] (a transpose-and-add tree). */
static inline __m256 reduce8(const __m256 *v) {
    const __m256 a0 = _mm256_hadd_ps(v[0], v[1]), a1 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 a2 = _mm256_hadd_ps(v[4], v[5]), a3 = _mm256_hadd_ps(v[6], v[7]);
    const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);
    /* b0 lanes: [v0 lo, v1 lo, v2 lo, v3 lo, v0 hi, v1 hi, v2 hi, v3 hi] (halves of each sum); likewise b1 */
    return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}

/* The softmax of one head's scores in place: exp(s - max), with the max and the sum of the exps out. */
static inline void softmax_row(float *s, int64_t n, float *mx_out, float *sum_out) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    const __m256 m = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
        const __m256 e = exp256(_mm256_sub_ps(tail_load8(s + j, n - j), m));
        const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        sum = _mm256_add_ps(sum, _mm256_and_ps(e, keep));
        tail_store8(s + j, n - j, e);
    }
    *mx_out = mx;
    *sum_out = hsum8(sum);
}

/* The shared attention partial (attention_simd.inc) at 8 lanes: 4 V slices per pass with up to 2 query heads per
 * KV head, 2 with 4, 1 with 8 (16 ymm registers). */
#define AV_W 8
#define AV_VEC __m256
#define AV_ZERO() _mm256_setzero_ps()
#define AV_SET1(x) _mm256_set1_ps(x)
#define AV_LOADU(p) _mm256_loadu_ps(p)
#define AV_STOREU(p, v) _mm256_storeu_ps(p, v)
#define AV_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define AV_NV(group) ((group) <= 2 ? 4 : (group) <= 4 ? 2 : 1)
#define AV_PAIR_TAIL(group) 0
#define AV_ATTEND_PART tern_attend_part_avx2
#define load_kv load8
#define reduce_lanes reduce8
#include "tensor/attention_simd.inc"

/* One register tile: R rows of C by 16 columns (2R accumulators), B's row k in two vectors, the rows' A values
 * broadcast. */
static inline __attribute__((always_inline)) void sgemm_tile8(int R, int64_t K, const float *A, int64_t lda,
                                                              const float *B, int64_t ldb, float *C, int64_t ldc) {
    __m256 c0[4], c1[4];
    for (int q = 0; q < R; q++)
        c0[q] = c1[q] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = _mm256_loadu_ps(B + k * ldb + 8);
        for (int q = 0; q < R; q++) {
            const __m256 a = _mm256_broadcast_ss(A + q * lda + k);
            c0[q] = _mm256_fmadd_ps(a, b0, c0[q]);
            c1[q] = _mm256_fmadd_ps(a, b1, c1[q]);
        }
    }
    for (int q = 0; q < R; q++) {
        _mm256_storeu_ps(C + q * ldc, c0[q]);
        _mm256_storeu_ps(C + q * ldc + 8, c1[q]);
    }
}

/* The products' register tiles over C: 16 columns at a time in tiles of 4 rows (the last rows each count with its own
 * constant), a tail of columns by TAIL_FN, the portable way (the same sum over k in order). */
#define TILED_PRODUCT(TILE_FN, TAIL_FN)                                                                            \
    const int64_t N16 = N / 16 * 16;                                                                              \
    for (int64_t j = 0; j < N16; j += 16) {                                                                       \
        int64_t i = 0;                                                                                            \
        for (; i + 4 <= M; i += 4)                                                                                \
            TILE_FN(4, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc);                                    \
        switch (M - i) {                                                                                          \
        case 3: TILE_FN(3, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc); break;                         \
        case 2: TILE_FN(2, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc); break;                         \
        case 1: TILE_FN(1, K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc); break;                         \
        default: break;                                                                                           \
        }                                                                                                         \
    }                                                                                                             \
    if (N16 < N)                                                                                                  \
        TAIL_FN(M, N - N16, K, A, lda, B + N16, ldb, C + N16, ldc);

void tern_sgemm_avx2(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                     int64_t ldc) {
    TILED_PRODUCT(sgemm_tile8, tern_sgemm_portable)
}

/* One register tile of the bf16 product: R rows by 16 columns, each pair of B's rows widened to two float vectors
 * (a bf16 is the high half of its float), each row's pair of A values broadcast likewise. */
static inline __attribute__((always_inline)) void bgemm_tile8(int R, int64_t K, const uint16_t *A, int64_t lda,
                                                              const uint32_t *Bp, int64_t ldb, float *C, int64_t ldc) {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 c0[4], c1[4];
    for (int q = 0; q < R; q++)
        c0[q] = c1[q] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 2) {
        const __m256i p0 = _mm256_loadu_si256((const __m256i *)(Bp + k / 2 * ldb)),
                      p1 = _mm256_loadu_si256((const __m256i *)(Bp + k / 2 * ldb + 8));
        const __m256 b00 = _mm256_castsi256_ps(_mm256_slli_epi32(p0, 16)), b01 = _mm256_castsi256_ps(_mm256_and_si256(p0, hi));
        const __m256 b10 = _mm256_castsi256_ps(_mm256_slli_epi32(p1, 16)), b11 = _mm256_castsi256_ps(_mm256_and_si256(p1, hi));
        for (int q = 0; q < R; q++) {
            const __m256 a0 = _mm256_set1_ps(tern_bf16_to_f32(A[q * lda + k])),
                         a1 = _mm256_set1_ps(tern_bf16_to_f32(A[q * lda + k + 1]));
            c0[q] = _mm256_fmadd_ps(a1, b01, _mm256_fmadd_ps(a0, b00, c0[q]));
            c1[q] = _mm256_fmadd_ps(a1, b11, _mm256_fmadd_ps(a0, b10, c1[q]));
        }
    }
    for (int q = 0; q < R; q++) {
        _mm256_storeu_ps(C + q * ldc, c0[q]);
        _mm256_storeu_ps(C + q * ldc + 8, c1[q]);
    }
}

void tern_bgemm_avx2(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *B, int64_t ldb,
                     float *C, int64_t ldc) {
    TILED_PRODUCT(bgemm_tile8, tern_bgemm_portable)
}

/* Round to nearest even on the bits (u + 0x7fff + the kept half's lowest bit), NaNs kept quiet as the scalar does. */
void tern_to_bf16_avx2(const float *x, uint16_t *y, int64_t n) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), abs = _mm256_set1_epi32(0x7fffffff),
                  inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one))), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        const __m256i v = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
        const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
        _mm_storeu_si128((__m128i *)(y + i), _mm_packus_epi32(lo, hi));
    }
    tern_to_bf16_portable(x + i, y + i, n - i);
}

void tern_axpby_avx2(float *y, const float *x, int64_t n, float a, float b) {
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    for (int64_t i = 0; i < n; i += 8)
        tail_store8(y + i, n - i, _mm256_fmadd_ps(tail_load8(y + i, n - i), va, _mm256_mul_ps(tail_load8(x + i, n - i), vb)));
}

/* Lanes 4r..4r+3 in register r; swapping the 64-bit halves of each 128-bit lane gives d[j ^ 1]. */
static void checksum_blocks_avx2(uint64_t acc[16], const void *p, size_t blocks, uint64_t first) {
    const uint8_t *b = p;
    uint64_t key[16];
    for (int j = 0; j < 16; j++)
        key[j] = (uint64_t)(j + 1) * TERN_CHECKSUM_K + first * TERN_CHECKSUM_G;
    __m256i a[4], k[4];
    for (int r = 0; r < 4; r++) {
        a[r] = _mm256_loadu_si256((const __m256i *)(acc + 4 * r));
        k[r] = _mm256_loadu_si256((const __m256i *)(key + 4 * r));
    }
    const __m256i g = _mm256_set1_epi64x((long long)TERN_CHECKSUM_G);
    for (size_t i = 0; i < blocks; i++, b += 128)
        for (int r = 0; r < 4; r++) {
            const __m256i d = _mm256_loadu_si256((const __m256i *)(b + 32 * r)), x = _mm256_xor_si256(d, k[r]);
            a[r] = _mm256_add_epi64(a[r], _mm256_add_epi64(_mm256_mul_epu32(x, _mm256_srli_epi64(x, 32)),
                                                           _mm256_shuffle_epi32(d, 0x4e)));
            k[r] = _mm256_add_epi64(k[r], g);
        }
    for (int r = 0; r < 4; r++)
        _mm256_storeu_si256((__m256i *)(acc + 4 * r), a[r]);
}

const tern_kernel_table tern_kernels_avx2 = {
    .isa = TERN_ISA_AVX2,
    .lanes = 8,
    .qmm = &tern_qmm_avx2,
    .qblock = &tern_qblock_avx2,
    .matmul = tern_matmul_avx2,
    .rmsnorm = tern_rmsnorm_avx2,
    .rope_apply = tern_rope_apply_avx2,
    .gelu_tanh = tern_gelu_tanh_avx2,
    .gelu_tanh_mul = tern_gelu_tanh_mul_avx2,
    .gelu_tanh_mul_f16 = gelu_tanh_mul_f16_avx2,
    .softcap = tern_softcap_avx2,
    .exp = tern_exp_avx2,
    .silu_mul = tern_silu_mul_avx2,
    .softmax = tern_softmax_avx2,
    .axpby = tern_axpby_avx2,
    .sgemm = tern_sgemm_avx2,
    .bgemm = tern_bgemm_avx2,
    .to_bf16 = tern_to_bf16_avx2,
    .attend_part = tern_attend_part_avx2,
    .read_sum = tern_read_sum_avx2,
    .checksum_blocks = checksum_blocks_avx2,
};
