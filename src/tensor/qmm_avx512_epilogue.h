/* qmm_avx512_epilogue.h — the float side of an int8 product's group on AVX-512: each token's 16 integer row dots
 * of one group times the group's scales and the token's step, added to its accumulators. Shared by the VNNI
 * kernel (qmm_avx512.c) and the AMX one (qmm_amx.c), which differ only in how they form the integer dots, so the
 * two give the same results bit for bit (tern_qmm_ref's arithmetic). Included only by files compiled with
 * AVX-512 flags. */
#ifndef TERN_TENSOR_QMM_AVX512_EPILOGUE_H
#define TERN_TENSOR_QMM_AVX512_EPILOGUE_H

#include <immintrin.h>

#include "tensor/qpack.h"

#define QMM_INLINE static inline __attribute__((always_inline))

/* acc += W (unsigned bytes) x the four signed bytes at p broadcast to every lane: the integer step every VNNI
 * kernel shares. Written out because compilers issue a separate broadcast instead of the instruction's
 * embedded-broadcast operand. */
QMM_INLINE __m512i qmm_dpbusd_bcast(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

/* 16 scales of a group (f32, f16 or bf16) as floats. */
QMM_INLINE __m512 qmm_load_scales(const uint8_t *p, tern_dtype dt) {
    if (dt == TERN_DT_F32)
        return _mm512_loadu_ps(p);
    const __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dt == TERN_DT_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* Whether every scale s of a group lets the epilogue form s * xs without a multiply for any step: s * 2^e and
 * s * 2^(e-1) by adding to the exponent field must both be normal floats, i.e. exponent fields 66 .. 191
 * (2^-61 <= |s| < 2^65). Zero and subnormal scales (a constant group stores a zero scale) take the multiply. */
QMM_INLINE int qmm_exponent_add_ok(__m512 s) {
    const __m512i mag = _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(0x7fffffff));
    const __m512i off = _mm512_sub_epi32(mag, _mm512_set1_epi32((2 - TERN_QACT_EXP_MIN) << 23));
    return _mm512_cmplt_epu32_mask(off, _mm512_set1_epi32((253 - TERN_QACT_EXP_MAX + TERN_QACT_EXP_MIN) << 23)) == 0xffff;
}

/* ggml's steps over dots that already hold the bias's offset (started from it): acc[t] += float(ia[t]) *
 * (s * xs[t]) for the NT tokens whose steps start at xs (one apart). */
QMM_INLINE void qmm_epilogue_ggml_offset_in(__m512 *acc, const __m512i *ia, __m512 s, const float *xs, const int NT) {
    for (int t = 0; t < NT; t++)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), _mm512_mul_ps(s, _mm512_set1_ps(xs[t])), acc[t]);
}

/* ggml's steps: acc[t] += float(ia[t] - off * isum[t]) * (s * xs[t]), off = 1 << sh (8 or 128, the bias's code
 * offset), for the NT tokens whose per-group values start at isum / xs (one apart). */
QMM_INLINE void qmm_epilogue_ggml(__m512 *acc, const __m512i *ia, __m512 s, const int32_t *isum, const float *xs,
                                  int sh, const int NT) {
    __m512i d[8];
    for (int t = 0; t < NT; t++)
        d[t] = _mm512_sub_epi32(ia[t], _mm512_slli_epi32(_mm512_set1_epi32(isum[t]), sh));
    qmm_epilogue_ggml_offset_in(acc, d, s, xs, NT);
}

/* MLX affine: acc[t] += float(ia[t]) * (s * xs) + b * xsum for the NT tokens of units u0 .. u0 + NT - 1 of a. */
QMM_INLINE void qmm_epilogue_affine(__m512 *acc, const __m512i *ia, __m512 s, __m512 b, const tern_qact *a,
                                    int64_t u0, const int NT) {
    if (__builtin_expect(qmm_exponent_add_ok(s), 1)) {
        /* s * xs: s * 2^e by adding e to s's exponent field, plus (for 1.5 x 2^e) s * 2^(e-1) made alike, in
         * one float add: one rounding, as the reference's product. */
        const __m512i sh = _mm512_sub_epi32(_mm512_castps_si512(s), _mm512_set1_epi32(1 << 23));
        for (int t = 0; t < NT; t++) {
            const int64_t i = u0 + t;
            const __m512i eb = _mm512_set1_epi32(a->exp_bits[i]);
            const __m512i half = _mm512_and_si512(_mm512_add_epi32(sh, eb), _mm512_set1_epi32(a->half_mask[i]));
            const __m512 st = _mm512_add_ps(_mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(s), eb)),
                                            _mm512_castsi512_ps(half));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), st, acc[t]);
            acc[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(a->xsum[i]), acc[t]);
        }
    } else {
        for (int t = 0; t < NT; t++) {
            const int64_t i = u0 + t;
            const __m512 st = _mm512_mul_ps(s, _mm512_set1_ps(a->xs[i]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), st, acc[t]);
            acc[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(a->xsum[i]), acc[t]);
        }
    }
}

#endif
