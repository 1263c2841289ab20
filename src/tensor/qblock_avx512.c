/* qblock_avx512.c — ggml block-format products with AVX-512 VNNI on 256-bit vectors (compiled with AVX-512
 * flags; called only when cpuid reports F/BW/VL/VNNI): one VPDPBUSD per 32 codes in place of AVX2's
 * VPMADDUBSW + VPMADDWD pair. */
#include <immintrin.h>

/* Signed bytes times signed bytes, four products per 32-bit lane: |w| (unsigned) times a with w's sign. */
static inline __m256i sdot32(__m256i w, __m256i a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}
#define SDOT32(w, a) sdot32(w, a)
#define QB_TABLE tern_qblock_avx512
#define QB_TILE tern_qblock_tile_avx512
#define QB_TILE_FORMATS (1u << TERN_QB_Q4_0 | 1u << TERN_QB_Q8_0)
#include "tensor/qblock_simd.inc"

/* Q4_0 and Q8_0 weights two rows at a time in 512-bit registers: lanes 0-7 hold row A's eight lane sums of a block,
 * lanes 8-15 row B's, each accumulating its own row exactly as the 256-bit path does (so results are the same bit
 * for bit), while one VPDPBUSD serves both rows. The codes go in unsigned (Q4_0 as stored, Q8_0 plus 128) against
 * the signed activation codes, each lane's sum starting from minus the offset times the activation's lane sums
 * (tern_qblock_side), so VPDPBUSD alone gives the exact lane sums. */
static inline __m512i codes_pair(int q8, const uint8_t *a, const uint8_t *b) {
    if (q8)
        return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                                                   _mm256_loadu_si256((const __m256i *)(b + 2)), 1),
                                _mm512_set1_epi8((char)0x80));
    const __m256i v =
        _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b + 2)), _mm_loadu_si128((const __m128i *)(a + 2)));
    const __m256i m = _mm256_set1_epi8(0xf);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                                         _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1); /* A lo, B lo, A hi, B hi */
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

#ifndef QB_AHEAD
#define QB_AHEAD 256
#endif
#define TILE_TOKENS(NT, Q8)                                                                                           \
    static void pair_##NT##_##Q8(int64_t nb, const uint8_t *wa, const uint8_t *wb, const uint8_t *a,                  \
                          size_t arow, const tern_qblock_side *s, size_t srow, float *ya, float *yb,                  \
                          int64_t ystride, int64_t bstride) {                                                         \
        const size_t WB = Q8 ? 34 : 18;                                                                               \
        __m512 acc[NT];                                                                                               \
        for (int k = 0; k < NT; k++)                                                                                  \
            acc[k] = _mm512_setzero_ps();                                                                             \
        for (int64_t i = 0; i < nb; i++, wa += WB, wb += WB) {                                                        \
            _mm_prefetch((const char *)wa + QB_AHEAD, _MM_HINT_T0);                                                   \
            _mm_prefetch((const char *)wb + QB_AHEAD, _MM_HINT_T0);                                                   \
            const __m512i c = codes_pair(Q8, wa, wb);                                                                 \
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
TILE_TOKENS(1, 0)
TILE_TOKENS(8, 0)
TILE_TOKENS(1, 1)
TILE_TOKENS(8, 1)

void tern_qblock_tile_avx512(tern_qblock t, int64_t n, const uint8_t *w, size_t wrow, int64_t rows, const uint8_t *a,
                             size_t arow, const tern_qblock_side *side, int64_t T, float *y, int64_t ystride) {
    const int64_t nb = n / 32, half = (rows + 1) / 2;
    const int q8 = t == TERN_QB_Q8_0;
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
            (q8 ? pair_8_1 : pair_8_0)(nb, wa, wb, a + k * arow, arow,
                                       (const tern_qblock_side *)((const uint8_t *)side + k * srow), srow,
                                       y + k * ystride + r, pair ? y + k * ystride + rb : spare, ystride,
                                       pair ? ystride : 1);
        for (; k < T; k++)
            (q8 ? pair_1_1 : pair_1_0)(nb, wa, wb, a + k * arow, arow,
                                       (const tern_qblock_side *)((const uint8_t *)side + k * srow), srow,
                                       y + k * ystride + r, pair ? y + k * ystride + rb : spare, ystride, ystride);
    }
}
