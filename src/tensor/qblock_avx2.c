/* qblock_avx2.c — ggml block-format products with AVX2 (compiled with AVX2/FMA/F16C flags; called only when
 * cpuid reports them). */
#include <immintrin.h>

/* Signed bytes times signed bytes, four products per 32-bit lane: |w| (unsigned) times a with w's sign, by
 * VPMADDUBSW (pairs cannot saturate: 2 x 128 x 127 < 2^15), the pairs summed by VPMADDWD. */
static inline __m256i sdot32(__m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
#define SDOT32(w, a) sdot32(w, a)
#define QB_TABLE tern_qblock_avx2
#define QB_TILE NULL
#define QB_TILE_FORMATS 0
#include "tensor/qblock_simd.inc"
