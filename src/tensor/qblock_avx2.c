/* qblock_avx2.c — ggml block-format products with AVX2 (compiled with AVX2/FMA/F16C flags; called only when
 * cpuid reports them). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Signed bytes times signed bytes, four products per 32-bit lane: |w| (unsigned) times a with w's sign, by
 * VPMADDUBSW (pairs cannot saturate: 2 x 128 x 127 < 2^15), the pairs summed by VPMADDWD. */
static inline __m256i sdot32(__m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
#define SDOT32(w, a) sdot32(w, a)

/* Q6_K, 32 codes an operation: the codes unsigned (0..63: the 2 high bits moved in by shifts), VPMADDUBSW against
 * the Q8_K codes less VPMADDUBSW of 32 against them (the offset: no pair can saturate, 2 x 63 x 128 < 2^15), then
 * VPMADDWD by the two sub-blocks' scales, which sums the pairs and scales them in one step. Lane j sums values
 * 4j..4j+3 of each 32 times their scale: the reference's eight lane sums (exact integers), which then take the
 * reference's float steps (qblock_avx512.c's dot on 256-bit vectors). */
#define DOT_Q6K256_TOKENS(NT)                                                                                         \
    static void dot_q6k256_##NT(int64_t n, const uint8_t *w, const uint8_t *a, size_t astride, float *out) {          \
        const __m256i m4 = _mm256_set1_epi8(0xf), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);           \
        const __m256i pick = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);                                               \
        __m256 acc[NT];                                                                                               \
        for (int k = 0; k < NT; k++)                                                                                  \
            acc[k] = _mm256_setzero_ps();                                                                             \
        for (int64_t i = 0; i < n / 256; i++, w += 210, a += 292) {                                                   \
            /* scale e as a pair of 16-bit words (both e), so one 32-bit broadcast feeds VPMADDWD */                 \
            int32_t s2[16];                                                                                           \
            for (int e = 0; e < 16; e++)                                                                              \
                s2[e] = (int32_t)((uint32_t)(uint16_t)(int16_t)(int8_t)w[192 + e] * 0x10001u);                        \
            __m256i isum[NT];                                                                                         \
            for (int k = 0; k < NT; k++)                                                                              \
                isum[k] = _mm256_setzero_si256();                                                                     \
            for (int h = 0; h < 2; h++) {                                                                             \
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(w + 64 * h));                                 \
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));                            \
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));                           \
                for (int q = 0; q < 4; q++) {                                                                         \
                    const __m256i lo = q < 2 ? _mm256_and_si256(q ? l1 : l0, m4)                                      \
                                             : _mm256_and_si256(_mm256_srli_epi16(q == 2 ? l0 : l1, 4), m4);          \
                    const __m256i hs = q == 0 ? _mm256_slli_epi16(hb, 4) : q == 1 ? _mm256_slli_epi16(hb, 2)          \
                                     : q == 2 ? hb : _mm256_srli_epi16(hb, 2);                                        \
                    const __m256i v = _mm256_or_si256(lo, _mm256_and_si256(hs, m30));                                 \
                    const int e = 128 * h + 32 * q;                                                                   \
                    const __m256i s16 =                                                                               \
                        _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(s2 + e / 16))), pick); \
                    for (int k = 0; k < NT; k++) {                                                                    \
                        const __m256i av = _mm256_loadu_si256((const __m256i *)(a + k * astride + 4 + e));            \
                        const __m256i t = _mm256_sub_epi16(_mm256_maddubs_epi16(v, av), _mm256_maddubs_epi16(k32, av)); \
                        isum[k] = _mm256_add_epi32(isum[k], _mm256_madd_epi16(t, s16));                               \
                    }                                                                                                 \
                }                                                                                                     \
            }                                                                                                         \
            uint16_t dh;                                                                                              \
            memcpy(&dh, w + 208, 2);                                                                                  \
            const float dw = _cvtsh_ss(dh);                                                                           \
            for (int k = 0; k < NT; k++) {                                                                            \
                float da;                                                                                             \
                memcpy(&da, a + k * astride, 4);                                                                      \
                acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(da * dw), _mm256_cvtepi32_ps(isum[k]), acc[k]);               \
            }                                                                                                         \
        }                                                                                                             \
        for (int k = 0; k < NT; k++) {                                                                                \
            __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[k]), _mm256_extractf128_ps(acc[k], 1));                  \
            s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                                   \
            out[k] = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));                                                \
        }                                                                                                             \
    }
DOT_Q6K256_TOKENS(1)
DOT_Q6K256_TOKENS(4)
#define QB_DOT_Q6K_1 dot_q6k256_1
#define QB_DOT_Q6K_4 dot_q6k256_4
#define QB_TABLE tern_qblock_avx2
#define QB_TILE NULL
#define QB_TILE_FORMATS 0
#include "tensor/qblock_simd.inc"
