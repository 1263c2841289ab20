/* kernels_avx2.c — AVX2 + FMA matrix products (compiled with AVX2 flags; called only when cpuid reports
 * them). Each weight row is expanded to f32 in registers (bf16 by shifting, f16 by F16C, MLX affine by
 * variable shifts of the packed words and one FMA per group) into a row buffer that stays in L1, then
 * dotted with up to 4 tokens at a time. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/quant_mlx.h"

static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float scale_at(const void *p, tern_dtype dt, int64_t i) {
    if (dt == TERN_DT_F32) {
        float f;
        memcpy(&f, (const float *)p + i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint16_t *)p + i, 2);
    return dt == TERN_DT_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
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
            const __m256 s = _mm256_set1_ps(scale_at(sc, w->sdtype, gi)), b = _mm256_set1_ps(scale_at(bi, w->sdtype, gi));
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
} avx2_job;

static void avx2_range(void *ctx, size_t b, size_t e, int tid) {
    const avx2_job *j = ctx;
    const int64_t in = j->in;
    float *row = malloc((size_t)in * sizeof *row);
    if (!row)
        return;
    for (size_t o = b; o < e; o++) {
        expand_row(j->w, j->row0 + (int64_t)o, in, row);
        for (int64_t t0 = 0; t0 < j->T; t0 += 4) {
            const int nt = j->T - t0 < 4 ? (int)(j->T - t0) : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            int64_t k = 0;
            for (; k + 8 <= in; k += 8) {
                const __m256 wv = _mm256_loadu_ps(row + k);
                for (int t = 0; t < nt; t++)
                    acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(j->x + (t0 + t) * in + k), acc[t]);
            }
            for (int t = 0; t < nt; t++) {
                float s = hsum8(acc[t]);
                for (int64_t kk = k; kk < in; kk++)
                    s += row[kk] * j->x[(t0 + t) * in + kk];
                j->y[(t0 + t) * j->n_out + (int64_t)o] = s;
            }
        }
    }
    free(row);
}

int tern_matmul_avx2(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                     float *y) {
    const int64_t in = tern_weight_cols(w);
    if (w->fmt == TERN_WF_MLX_AFFINE && ((w->bits != 4 && w->bits != 8) || w->group < 8 || in % w->group))
        return 0;
    if (w->fmt == TERN_WF_MXFP4 || w->fmt == TERN_WF_NONE)
        return 0;
    avx2_job j = {w, row0, n_out, T, in, x, y};
    tern_pool_parallel_for(pool, (size_t)n_out, 8, avx2_range, &j);
    return 1;
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
