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
#include "tensor/qblock_simd.inc"
