/* qblock_avx512.c — ggml block-format products with AVX-512 VNNI on 256-bit vectors (compiled with AVX-512
 * flags; called only when cpuid reports F/BW/VL/VNNI): one VPDPBUSD per 32 codes in place of AVX2's
 * VPMADDUBSW + VPMADDWD pair. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Signed bytes times signed bytes, four products per 32-bit lane: |w| (unsigned) times a with w's sign. */
static inline __m256i sdot32(__m256i w, __m256i a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}
#define SDOT32(w, a) sdot32(w, a)

/* Q6_K on 512-bit vectors, 64 codes an operation: the codes unsigned (0..63, the 2 high bits moved in by per-half
 * shifts), VPMADDUBSW against the Q8_K codes less VPMADDUBSW of 32 against them (the offset), VPMADDWD by the
 * sub-blocks' scales. Lane j of the product sums values 4j..4j+3 of the 64, so its two halves added are the
 * reference's eight lane sums (exact integers), which then take the reference's float steps. */
static inline float q6k_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define DOT_Q6K512_TOKENS(NT)                                                                                         \
    static void dot_q6k512_##NT(int64_t n, const uint8_t *w, const uint8_t *a, size_t astride, float *out) {          \
        const __m512i m4 = _mm512_set1_epi8(0xf), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);           \
        /* high bits of values 0-31 | 32-63 of each half-block: shifted left 4 | 2, then right 0 | 2 */             \
        const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);                     \
        const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);                  \
        __m512i idx[4]; /* element i of part p: the scale of sub-block 4p + i / 8 */                                \
        for (int p = 0; p < 4; p++)                                                                                  \
            idx[p] = _mm512_add_epi16(_mm512_set1_epi16((short)(4 * p)),                                           \
                                      _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21,  \
                                                                         20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10,  \
                                                                         9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 3));          \
        __m256 acc[NT];                                                                                               \
        for (int k = 0; k < NT; k++)                                                                                  \
            acc[k] = _mm256_setzero_ps();                                                                             \
        for (int64_t i = 0; i < n / 256; i++, w += 210, a += 292) {                                                   \
            const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 192)))); \
            __m512i isum[NT];                                                                                         \
            for (int k = 0; k < NT; k++)                                                                              \
                isum[k] = _mm512_setzero_si512();                                                                     \
            for (int h = 0; h < 2; h++) {                                                                             \
                const __m512i l = _mm512_loadu_si512((const void *)(w + 64 * h));                                     \
                const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h)));   \
                for (int p = 0; p < 2; p++) {                                                                         \
                    const __m512i lo = _mm512_and_si512(p ? _mm512_srli_epi16(l, 4) : l, m4);                         \
                    const __m512i hi = _mm512_and_si512(p ? _mm512_srlv_epi16(hb, shr) : _mm512_sllv_epi16(hb, shl), m30); \
                    const __m512i q = _mm512_or_si512(lo, hi);                                                        \
                    const __m512i s16 = _mm512_permutexvar_epi16(idx[2 * h + p], sc);                                 \
                    for (int k = 0; k < NT; k++) {                                                                    \
                        const __m512i av = _mm512_loadu_si512((const void *)(a + k * astride + 4 + 128 * h + 64 * p)); \
                        const __m512i t = _mm512_sub_epi16(_mm512_maddubs_epi16(q, av), _mm512_maddubs_epi16(k32, av)); \
                        isum[k] = _mm512_add_epi32(isum[k], _mm512_madd_epi16(t, s16));                               \
                    }                                                                                                 \
                }                                                                                                     \
            }                                                                                                         \
            const float dw = _cvtsh_ss(*(const uint16_t *)(w + 208));                                                 \
            for (int k = 0; k < NT; k++) {                                                                            \
                float da;                                                                                             \
                memcpy(&da, a + k * astride, 4);                                                                      \
                const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(isum[k]), _mm512_extracti64x4_epi64(isum[k], 1)); \
                acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(da * dw), _mm256_cvtepi32_ps(lanes), acc[k]);                 \
            }                                                                                                         \
        }                                                                                                             \
        for (int k = 0; k < NT; k++)                                                                                  \
            out[k] = q6k_hsum8(acc[k]);                                                                               \
    }
DOT_Q6K512_TOKENS(1)
DOT_Q6K512_TOKENS(4)
#define QB_DOT_Q6K_1 dot_q6k512_1
#define QB_DOT_Q6K_4 dot_q6k512_4
#define QB_TABLE tern_qblock_avx512
#define QB_TILE tern_qblock_tile_avx512
#define QB_TILE_FORMATS (1u << TERN_QB_Q4_0 | 1u << TERN_QB_Q5_0 | 1u << TERN_QB_Q8_0)
#include "tensor/qblock_simd.inc"

/* Q4_0, Q5_0 and Q8_0 weights two rows at a time in 512-bit registers: lanes 0-7 hold row A's eight lane sums of a
 * block, lanes 8-15 row B's, each accumulating its own row exactly as the 256-bit path does (so results are the same
 * bit for bit), while one VPDPBUSD serves both rows. The codes go in unsigned (Q4_0 as stored, Q5_0 with its fifth
 * bits, Q8_0 plus 128) against the signed activation codes, each lane's sum starting from minus the offset times
 * the activation's lane sums (tern_qblock_side), so VPDPBUSD alone gives the exact lane sums. */
static inline __m512i codes_pair(tern_qblock t, const uint8_t *a, const uint8_t *b) {
    if (t == TERN_QB_Q8_0)
        return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                                                   _mm256_loadu_si256((const __m256i *)(b + 2)), 1),
                                _mm512_set1_epi8((char)0x80));
    const int q5 = t == TERN_QB_Q5_0, at = q5 ? 6 : 2; /* Q5_0: d, the 32 fifth bits, then the nibbles */
    const __m256i v =
        _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b + at)), _mm_loadu_si128((const __m128i *)(a + at)));
    const __m256i m = _mm256_set1_epi8(0xf);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                                         _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1); /* A lo, B lo, A hi, B hi */
    const __m512i c = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    if (!q5)
        return c;
    uint32_t ha, hb; /* bit j: code j's fifth bit, 16 added (codes 0..31, offset 16) */
    memcpy(&ha, a + 2, 4);
    memcpy(&hb, b + 2, 4);
    return _mm512_mask_add_epi8(c, _cvtu64_mask64((uint64_t)hb << 32 | ha), c, _mm512_set1_epi8(16));
}

#ifndef QB_AHEAD
#define QB_AHEAD 256
#endif
#define TILE_TOKENS(NT, FMT)                                                                                          \
    static void pair_##NT##_##FMT(int64_t nb, const uint8_t *wa, const uint8_t *wb, const uint8_t *a,                 \
                          size_t arow, const tern_qblock_side *s, size_t srow, float *ya, float *yb,                  \
                          int64_t ystride, int64_t bstride) {                                                         \
        const size_t WB = tern_qblock_bytes(TERN_QB_##FMT);                                                           \
        __m512 acc[NT];                                                                                               \
        for (int k = 0; k < NT; k++)                                                                                  \
            acc[k] = _mm512_setzero_ps();                                                                             \
        for (int64_t i = 0; i < nb; i++, wa += WB, wb += WB) {                                                        \
            _mm_prefetch((const char *)wa + QB_AHEAD, _MM_HINT_T0);                                                   \
            _mm_prefetch((const char *)wb + QB_AHEAD, _MM_HINT_T0);                                                   \
            const __m512i c = codes_pair(TERN_QB_##FMT, wa, wb);                                                      \
            const __m512 dw = _mm512_castpd_ps(_mm512_insertf64x4(                                                    \
                _mm512_castps_pd(_mm512_castps256_ps512(_mm256_set1_ps(f16_at(wa)))),                                 \
                _mm256_castps_pd(_mm256_set1_ps(f16_at(wb))), 1));                                                    \
            for (int k = 0; k < NT; k++) {                                                                            \
                const tern_qblock_side *sk = (const tern_qblock_side *)((const uint8_t *)s + k * srow) + i;           \
                const __m512i q =                                                                                 \
                    _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a + k * arow + i * 34 + 2)));     \
                const __m512i off = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)sk->neg_off));         \
                const __m512i d = _mm512_dpbusd_epi32(off, c, q);                                                     \
                acc[k] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(sk->d)), _mm512_cvtepi32_ps(d), acc[k]);    \
            }                                                                                                         \
        }                                                                                                             \
        for (int k = 0; k < NT; k++) {                                                                                \
            ya[k * ystride] = hsum8(_mm512_castps512_ps256(acc[k]));                                                  \
            yb[k * bstride] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[k]), 1)));           \
        }                                                                                                             \
    }
TILE_TOKENS(1, Q4_0)
TILE_TOKENS(8, Q4_0)
TILE_TOKENS(1, Q5_0)
TILE_TOKENS(8, Q5_0)
TILE_TOKENS(1, Q8_0)
TILE_TOKENS(8, Q8_0)

typedef void (*pair_fn)(int64_t, const uint8_t *, const uint8_t *, const uint8_t *, size_t, const tern_qblock_side *,
                        size_t, float *, float *, int64_t, int64_t);

void tern_qblock_tile_avx512(tern_qblock t, int64_t n, const uint8_t *w, size_t wrow, int64_t rows, const uint8_t *a,
                             size_t arow, const tern_qblock_side *side, int64_t T, float *y, int64_t ystride) {
    const int64_t nb = n / 32, half = (rows + 1) / 2;
    const pair_fn p8 = t == TERN_QB_Q8_0 ? pair_8_Q8_0 : t == TERN_QB_Q5_0 ? pair_8_Q5_0 : pair_8_Q4_0;
    const pair_fn p1 = t == TERN_QB_Q8_0 ? pair_1_Q8_0 : t == TERN_QB_Q5_0 ? pair_1_Q5_0 : pair_1_Q4_0;
    const size_t srow = (size_t)nb * sizeof(tern_qblock_side);
    /* Row r is paired with row r + half: each register half reads one long contiguous run of rows, which the
     * hardware prefetchers follow (pairs of neighbouring rows made two short interleaved runs: 30% slower
     * decode). An odd middle row is paired with itself and its second result dropped. */
    for (int64_t r = 0; r < half; r++) {
        const int pair = r + half < rows;
        const uint8_t *wa = w + (size_t)r * wrow, *wb = pair ? wa + (size_t)half * wrow : wa;
        float spare[8];
        const int64_t rb = r + half;
        int64_t k = 0;
        for (; k + 8 <= T; k += 8)
            p8(nb, wa, wb, a + k * arow, arow, (const tern_qblock_side *)((const uint8_t *)side + k * srow), srow,
               y + k * ystride + r, pair ? y + k * ystride + rb : spare, ystride, pair ? ystride : 1);
        for (; k < T; k++)
            p1(nb, wa, wb, a + k * arow, arow, (const tern_qblock_side *)((const uint8_t *)side + k * srow), srow,
               y + k * ystride + r, pair ? y + k * ystride + rb : spare, ystride, ystride);
    }
}
