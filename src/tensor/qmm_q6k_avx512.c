/* qmm_q6k_avx512.c — the Q6_K form's tiles (qpack.h) on AVX-512 VNNI with VBMI (compiled with those flags; called
 * only when tern_cpu_vbmi says the CPU has VBMI). A chunk's 48 bytes of 6-bit codes are spread to 6 bytes per
 * quadword (VPERMB / VPERMT2B from the sub-block's three aligned lines, the other two bytes zeroed), each code cut
 * out at its bit offset (VPMULTISHIFTQB) and masked to 6 bits: 64 unsigned codes, four for each of 16 rows, in
 * three instructions where ggml's layout takes about ten per row; then one VPDPBUSD per token, as the 4- and 8-bit
 * groups. (Masked 48-byte loads at each chunk's offset instead of the aligned lines made a 605 MB head 1.7x
 * slower on Zen 4.) The integers per super-block and the FMA are tern_qmm_ref's: the same results bit for bit. */
#include <immintrin.h>

#include "tensor/kernels.h"
#include "tensor/qmm.h"
#include "tensor/qmm_avx512_epilogue.h"
#include "tensor/qmm_stream_avx512.h"

/* One Q6_K-form block against NT tokens from t0: out[t] gets the 16 row results of token t0 + t. */
static inline __attribute__((always_inline)) void q6k_block(const uint8_t *blk, const tern_qact *a, int64_t t0,
                                                            const int NT, __m512 *out) {
    const int64_t ns = a->in / 256, ng = a->in / 16;
    /* byte b of quadword q <- byte 6q + b of the chunk (b < 6; the others zeroed by the mask) */
    const __m512i spread = _mm512_set_epi64(0x00002f2e2d2c2b2aLL, 0x0000292827262524LL, 0x0000232221201f1eLL,
                                            0x00001d1c1b1a1918LL, 0x0000171615141312LL, 0x000011100f0e0d0cLL,
                                            0x00000b0a09080706LL, 0x0000050403020100LL);
    const __m512i spread48 = _mm512_add_epi8(spread, _mm512_set1_epi8(48));
    const __m512i spread32 = _mm512_add_epi8(spread, _mm512_set1_epi8(32));
    const __m512i spread16 = _mm512_add_epi8(spread, _mm512_set1_epi8(16));
    const __mmask64 six = 0x3f3f3f3f3f3f3f3fULL;
    const __m512i offsets = _mm512_set1_epi64(0x2a241e18120c0600LL), m6 = _mm512_set1_epi8(0x3f);
    const int ask = t0 == 0 && stream_requests(NT); /* later tiles find the block in cache */
    __m512 acc[8];
    for (int t = 0; t < NT; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < ns; s++) {
        const uint8_t *sb = blk + (size_t)s * TERN_QPACK_Q6K_BYTES;
        __m512i isum[8];
        for (int t = 0; t < NT; t++)
            isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 16; j++) {
            const int64_t u0 = t0 * ng + (16 * s + j) * NT;
            const int8_t *xq = a->q + u0 * 16;
            const uint8_t *codes = blk + tern_qpack_q6k_codes_at(s, j);
            __m512i ia[8];
            for (int t = 0; t < NT; t++) /* the codes' offset of 32, taken as the sum starts */
                ia[t] = _mm512_set1_epi32(-32 * a->isum[u0 + t]);
            /* the sub-block's 192 bytes as three aligned lines; chunk c's 48 bytes start at byte 48c */
            for (int l = 0; l < 3; l++)
                request_ahead(codes + l * 64, ask);
            const __m512i l0 = _mm512_load_si512(codes), l1 = _mm512_load_si512(codes + 64);
            const __m512i l2 = _mm512_load_si512(codes + 128);
            __m512i q[4];
            q[0] = _mm512_maskz_permutexvar_epi8(six, spread, l0);
            q[1] = _mm512_maskz_permutex2var_epi8(six, l0, spread48, l1);
            q[2] = _mm512_maskz_permutex2var_epi8(six, l1, spread32, l2);
            q[3] = _mm512_maskz_permutexvar_epi8(six, spread16, l2);
            for (int c = 0; c < 4; c++) {
                q[c] = _mm512_and_si512(_mm512_multishift_epi64_epi8(offsets, q[c]), m6);
                for (int t = 0; t < NT; t++)
                    ia[t] = qmm_dpbusd_bcast(ia[t], q[c], xq + t * 16 + 4 * c);
            }
            const __m128i sc8 = _mm_load_si128((const __m128i *)(blk + tern_qpack_q6k_sc_at(s, j)));
            const __m512i sc = _mm512_cvtepi8_epi32(sc8);
            for (int t = 0; t < NT; t++)
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sc, ia[t]));
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)sb));
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]),
                                     _mm512_mul_ps(d, _mm512_set1_ps(a->xs[t0 * ng + 16 * s * NT + t])), acc[t]);
    }
    for (int t = 0; t < NT; t++)
        out[t] = acc[t];
}

void tern_qmm_q6k_tile(const uint8_t *blk, const struct tern_qact *a, int64_t t0, float *y, int64_t ystride,
                       int valid) {
    const int nt = a->T - t0 < TERN_QACT_TILE ? (int)(a->T - t0) : TERN_QACT_TILE;
    __m512 out[TERN_QACT_TILE];
    switch (nt) {
    case 1: q6k_block(blk, a, t0, 1, out); break;
    case 2: q6k_block(blk, a, t0, 2, out); break;
    case 3: q6k_block(blk, a, t0, 3, out); break;
    case 4: q6k_block(blk, a, t0, 4, out); break;
    case 5: q6k_block(blk, a, t0, 5, out); break;
    case 6: q6k_block(blk, a, t0, 6, out); break;
    case 7: q6k_block(blk, a, t0, 7, out); break;
    default: q6k_block(blk, a, t0, 8, out); break;
    }
    for (int t = 0; t < nt; t++)
        _mm512_mask_storeu_ps(y + t * ystride, (__mmask16)((1u << valid) - 1), out[t]);
}
