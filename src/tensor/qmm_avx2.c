/* qmm_avx2.c — MLX affine q4/q8, GGUF Q4_0/Q8_0 and Q4_K products with AVX2 over the packed layout of qpack.h
 * (compiled with AVX2 flags; called only when cpuid reports AVX2, FMA and F16C).
 *
 * A 16-row block is handled as two halves of 8 rows (32 bytes of each 64-byte chunk). AVX2 has no
 * VPDPBUSD: VPMADDUBSW multiplies the u8 codes by the s8 activations into 16-bit pair sums and VPMADDWD
 * widens them. Both operands are kept to 4-bit codes (q8 bytes split into two nibble planes, the high one
 * weighted 16) so no 16-bit sum can saturate: a pair is at most 2 x 15 x 127 = 3810, and at most 8 pairs
 * are added before widening. The integer dots are therefore exact and the float epilogue is tern_qmm_ref's,
 * so results are bit-identical to the portable definition (and to the AVX-512 kernel). */
#include <immintrin.h>
#include <string.h>

#include "tensor/kernels.h"
#include "tensor/qmm.h"

static float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static int32_t hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* tern_qact_fill_ref, 8 values at a time (max |x| ignoring NaN: vmaxps returns its second operand when one is
 * NaN; clamped codes rounded by the default mode: nearest even, as nearbyintf), over groups n0 .. n1 in token
 * order (token n / ng, at x + n * group), each to its unit. */
static void fill(tern_qact *a, const float *x, int64_t n0, int64_t n1) {
    const int64_t G = a->group, ng = a->in / G;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int64_t n = n0, t = n0 / ng, g = n0 % ng; n < n1; n++, g = g + 1 < ng ? g + 1 : 0, t += g == 0) {
        const int64_t u = tern_qact_unit(a, t, g);
        const float *xg = x + n * G;
        __m256 m = _mm256_setzero_ps();
        for (int64_t k = 0; k < G; k += 8)
            m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xg + k), absmask), m);
        const tern_qact_step st = tern_qact_step_for(hmax8(m));
        const __m256 inv = _mm256_set1_ps(st.inv);
        __m256i isum = _mm256_setzero_si256();
        int8_t *q = a->q + u * G;
        for (int64_t k = 0; k < G; k += 8) {
            const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(xg + k), inv), lo), hi);
            const __m256i c = _mm256_cvtps_epi32(v);
            isum = _mm256_add_epi32(isum, c);
            const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
            _mm_storel_epi64((__m128i *)(q + k), _mm_packs_epi16(w16, w16));
        }
        tern_qact_set(a, u, st, hsum8_epi32(isum));
    }
}

/* Whether 8 scales let the epilogue form s * xs without a multiply (see exponent_add_ok in qmm_avx512.c):
 * exponent fields 66 .. 191. */
static inline int exponent_add_ok8(__m256 s) {
    const __m256i mag = _mm256_and_si256(_mm256_castps_si256(s), _mm256_set1_epi32(0x7fffffff));
    const __m256i off = _mm256_sub_epi32(mag, _mm256_set1_epi32((2 - TERN_QACT_EXP_MIN) << 23));
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), off),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32((253 - TERN_QACT_EXP_MAX + TERN_QACT_EXP_MIN) << 23), off));
    return _mm256_movemask_ps(_mm256_castsi256_ps(in)) == 0xff;
}

/* tern_qmm_kernels.fill_ggml: ggml's Q8_0 quantization of each 32 values (tern_qblock_quantize_ref: step
 * amax / 127 stored f16, codes rounded to nearest even of x * 127 / amax), as tern_qact_set_q8_0 records it. */
static void fill_ggml(tern_qact *a, const float *x, int64_t n0, int64_t n1) {
    const int64_t ng = a->in / 32;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t n = n0, t = n0 / ng, g = n0 % ng; n < n1; n++, g = g + 1 < ng ? g + 1 : 0, t += g == 0) {
        const int64_t u = tern_qact_unit(a, t, g);
        const float *xg = x + n * 32;
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 32; k += 8)
            m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xg + k), absmask), m);
        const float amax = hmax8(m);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 32; k += 8) {
            const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + k), id));
            isum = _mm256_add_epi32(isum, c);
            const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
            _mm_storel_epi64((__m128i *)(a->q + u * 32 + k), _mm_packs_epi16(w16, w16));
        }
        tern_qact_set_ggml(a, u, _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT)), hsum8_epi32(isum));
    }
}

static inline __m256 load_scales8(const uint8_t *p, tern_dtype dt) {
    if (dt == TERN_DT_F32)
        return _mm256_loadu_ps((const float *)p);
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dt == TERN_DT_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

static inline __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* One block against NT (1 or 2, a compile-time constant) tokens from t0: half h (rows 8h .. 8h+7) from the 32 bytes
 * at 32h of each 64-byte chunk, both halves in one pass, so each chunk is read once and each broadcast of four
 * activation bytes serves both (reading the block once per half took 1.5-2x as long). out[t][h]. */
static inline __attribute__((always_inline)) void whole_block(const uint8_t *blk, const tern_qact *a, int64_t t0,
                                                              const int NT, const int bits, tern_dtype sdt,
                                                              size_t gbytes, __m256 out[2][2]) {
    const int64_t in = a->in, G = a->group, ng = in / G;
    const size_t ss = sdt == TERN_DT_F32 ? 4 : 2;
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[2][2];
    for (int t = 0; t < NT; t++)
        acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        /* grp: the group's scales (then, in the affine form, its biases) */
        const uint8_t *grp = a->ggml_steps ? blk + tern_qpack_ggml_scales_at(bits, g) : blk + (size_t)g * gbytes;
        const uint8_t *codes = a->ggml_steps ? blk + tern_qpack_ggml_codes_at(bits, g) : grp + 32 * ss;
        /* Both tokens lie in one tile: token t's group g is unit u0 + t. */
        const int64_t u0 = tern_qact_unit(a, t0, g);
        const int8_t *xq = a->q + u0 * G;
        __m256i idot[2][2];
        for (int t = 0; t < NT; t++) /* ggml steps: from -off x the codes' sum (qpack.h) */
            idot[t][0] = idot[t][1] =
                a->ggml_steps ? _mm256_set1_epi32(a->isum[u0 + t] * (bits == 4 ? -8 : -128))
                              : _mm256_setzero_si256();
        if (bits == 4) {
            for (int64_t c0 = 0; c0 < G / 8; c0 += 4) {
                __m256i p16[2][2];
                for (int t = 0; t < NT; t++)
                    p16[t][0] = p16[t][1] = _mm256_setzero_si256();
                for (int64_t c = c0; c < c0 + 4; c++)
                    for (int h = 0; h < 2; h++) {
                        const __m256i W = _mm256_loadu_si256((const __m256i *)(codes + c * 64 + 32 * h));
                        const __m256i lo = _mm256_and_si256(W, low4), hi = _mm256_and_si256(_mm256_srli_epi16(W, 4), low4);
                        for (int t = 0; t < NT; t++) {
                            p16[t][h] = _mm256_add_epi16(p16[t][h], _mm256_maddubs_epi16(lo, bcast4(xq + t * G + c * 8)));
                            p16[t][h] = _mm256_add_epi16(p16[t][h], _mm256_maddubs_epi16(hi, bcast4(xq + t * G + c * 8 + 4)));
                        }
                    }
                for (int t = 0; t < NT; t++)
                    for (int h = 0; h < 2; h++)
                        idot[t][h] = _mm256_add_epi32(idot[t][h], _mm256_madd_epi16(p16[t][h], ones));
            }
        } else {
            for (int64_t c0 = 0; c0 < G / 4; c0 += 8) {
                __m256i pl[2][2], ph[2][2];
                for (int t = 0; t < NT; t++)
                    pl[t][0] = pl[t][1] = ph[t][0] = ph[t][1] = _mm256_setzero_si256();
                for (int64_t c = c0; c < c0 + 8; c++)
                    for (int h = 0; h < 2; h++) {
                        const __m256i W = _mm256_loadu_si256((const __m256i *)(codes + c * 64 + 32 * h));
                        const __m256i lo = _mm256_and_si256(W, low4), hi = _mm256_and_si256(_mm256_srli_epi16(W, 4), low4);
                        for (int t = 0; t < NT; t++) {
                            const __m256i xv = bcast4(xq + t * G + c * 4);
                            pl[t][h] = _mm256_add_epi16(pl[t][h], _mm256_maddubs_epi16(lo, xv));
                            ph[t][h] = _mm256_add_epi16(ph[t][h], _mm256_maddubs_epi16(hi, xv));
                        }
                    }
                for (int t = 0; t < NT; t++)
                    for (int h = 0; h < 2; h++)
                        idot[t][h] = _mm256_add_epi32(idot[t][h], _mm256_add_epi32(_mm256_madd_epi16(pl[t][h], ones),
                                                                                   _mm256_slli_epi32(_mm256_madd_epi16(ph[t][h], ones), 4)));
            }
        }
        for (int h = 0; h < 2; h++) {
            const __m256 s = load_scales8(grp + 8 * h * ss, sdt);
            const __m256 b = a->ggml_steps ? _mm256_setzero_ps() : load_scales8(grp + (16 + 8 * h) * ss, sdt);
            const int add = !a->ggml_steps && exponent_add_ok8(s);
            const __m256i sh = _mm256_sub_epi32(_mm256_castps_si256(s), _mm256_set1_epi32(1 << 23));
            for (int t = 0; t < NT; t++) {
                const int64_t i = u0 + t;
                /* s * xs, the same float either way (see qmm_avx512.c); the adds spare a multiply. */
                const __m256i eb = _mm256_set1_epi32(a->exp_bits[i]);
                const __m256 st =
                    add ? _mm256_add_ps(_mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(s), eb)),
                                        _mm256_castsi256_ps(_mm256_and_si256(_mm256_add_epi32(sh, eb),
                                                                             _mm256_set1_epi32(a->half_mask[i]))))
                        : _mm256_mul_ps(s, _mm256_set1_ps(a->xs[i]));
                acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot[t][h]), st, acc[t][h]);
                if (!a->ggml_steps)
                    acc[t][h] = _mm256_fmadd_ps(b, _mm256_set1_ps(a->xsum[i]), acc[t][h]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        out[t][0] = acc[t][0], out[t][1] = acc[t][1];
}

/* One Q4_K-form block (qpack.h) against NT (1 or 2) tokens from t0, both halves of rows in one pass (out[t][h]):
 * per super-block, each sub-block's integer dots formed as whole_block forms a 4-bit group's (8 pair sums of at
 * most 15 x 128 before widening: ggml's Q8_K codes reach -128), times the sub-block's scales, and its mins times
 * the tokens' code sums, all summed exactly; then tern_qmm_ref's two FMAs (qmm_avx512.c's q4k_block, 8 rows). */
static inline __attribute__((always_inline)) void q4k_block(const uint8_t *blk, const tern_qact *a, int64_t t0,
                                                            const int NT, __m256 out[2][2]) {
    const int64_t ns = a->in / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[2][2];
    for (int t = 0; t < NT; t++)
        acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t s = 0; s < ns; s++) {
        __m256i isum[2][2], msum[2][2];
        for (int t = 0; t < NT; t++)
            isum[t][0] = isum[t][1] = msum[t][0] = msum[t][1] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const int64_t u0 = tern_qact_unit(a, t0, 8 * s + j);
            const int8_t *xq = a->q + u0 * 32;
            const uint8_t *codes = blk + tern_qpack_q4k_codes_at(s, j);
            __m256i p16[2][2];
            for (int t = 0; t < NT; t++)
                p16[t][0] = p16[t][1] = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++)
                for (int h = 0; h < 2; h++) {
                    const __m256i W = _mm256_loadu_si256((const __m256i *)(codes + c * 64 + 32 * h));
                    const __m256i lo = _mm256_and_si256(W, low4);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(W, 4), low4);
                    for (int t = 0; t < NT; t++) {
                        const int8_t *x = xq + t * 32 + c * 8;
                        p16[t][h] = _mm256_add_epi16(p16[t][h], _mm256_maddubs_epi16(lo, bcast4(x)));
                        p16[t][h] = _mm256_add_epi16(p16[t][h], _mm256_maddubs_epi16(hi, bcast4(x + 4)));
                    }
                }
            for (int h = 0; h < 2; h++) {
                const uint8_t *scp = blk + tern_qpack_q4k_sc_at(s, j) + 8 * h, *mp = blk + tern_qpack_q4k_m_at(s, j) + 8 * h;
                const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)scp));
                const __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mp));
                for (int t = 0; t < NT; t++) {
                    const __m256i dot = _mm256_madd_epi16(p16[t][h], ones);
                    isum[t][h] = _mm256_add_epi32(isum[t][h], _mm256_mullo_epi32(sc, dot));
                    msum[t][h] = _mm256_add_epi32(msum[t][h], _mm256_mullo_epi32(m, _mm256_set1_epi32(a->isum[u0 + t])));
                }
            }
        }
        const uint8_t *sb = blk + (size_t)s * TERN_QPACK_Q4K_BYTES; /* d [16] f16, then dmin [16] */
        const int64_t us = tern_qact_unit(a, t0, 8 * s);
        for (int h = 0; h < 2; h++) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16 * h)));
            const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 32 + 16 * h)));
            for (int t = 0; t < NT; t++) {
                const __m256 xs = _mm256_set1_ps(a->xs[us + t]);
                acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t][h]), _mm256_mul_ps(d, xs), acc[t][h]);
                acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t][h]),
                                            _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(dmin, xs)), acc[t][h]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        out[t][0] = acc[t][0], out[t][1] = acc[t][1];
}

/* tern_qmm_kernels.tile: the tile's tokens two at a time. */
static void tile(const uint8_t *blk, const tern_qact *a, int64_t t0, int first, int bits, tern_dtype sdt,
                 size_t gbytes, float *y, int64_t ystride, int valid) {
    (void)first;
    __m256i m[2];
    for (int h = 0; h < 2; h++)
        m[h] = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid - 8 * h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const int64_t t1 = a->T - t0 < TERN_QACT_TILE ? a->T : t0 + TERN_QACT_TILE;
    for (int64_t tp = t0; tp < t1; tp += 2) {
        const int nt = t1 - tp < 2 ? 1 : 2;
        __m256 out[2][2];
        if (a->ggml_steps == 2) /* the Q4_K form (the only one with ggml's Q8_K codes this table takes) */
            nt == 2 ? q4k_block(blk, a, tp, 2, out) : q4k_block(blk, a, tp, 1, out);
        else if (nt == 2)
            bits == 4 ? whole_block(blk, a, tp, 2, 4, sdt, gbytes, out) : whole_block(blk, a, tp, 2, 8, sdt, gbytes, out);
        else
            bits == 4 ? whole_block(blk, a, tp, 1, 4, sdt, gbytes, out) : whole_block(blk, a, tp, 1, 8, sdt, gbytes, out);
        for (int t = 0; t < nt; t++)
            for (int h = 0; h < 2 && valid > 8 * h; h++)
                _mm256_maskstore_ps(y + (tp - t0 + t) * ystride + 8 * h, m[h], out[t][h]);
    }
}

const tern_qmm_kernels tern_qmm_avx2 = {.fill = fill, .fill_ggml = fill_ggml, .tile = tile, .q4k = 1, .q6k = 0};
