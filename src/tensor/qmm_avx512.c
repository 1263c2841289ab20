/* qmm_avx512.c — MLX affine q4/q8 products with AVX-512 VNNI over the packed layout of qpack.h
 * (compiled with AVX-512 flags; called only when cpuid reports F/BW/VL/VNNI).
 *
 * One 16-row block is the unit of work: each 64-byte chunk of codes is one register of 16 rows x 4
 * codes, and VPDPBUSD with four broadcast activation bytes adds to all 16 rows at once, so outputs come
 * out as whole vectors (no horizontal sums) and a block is read front to back once per group of up to 8
 * tokens. The arithmetic is exactly tern_qmm_ref's (integer dots per group, then the same two FMAs in the
 * same order), so results are bit-identical to the portable definition and independent of the batch. */
#include <immintrin.h>

#include "tensor/cpu.h"
#include "tensor/kernels.h"
#include "tensor/qmm.h"
#include "tensor/qmm_avx512_epilogue.h"
#include "tensor/qmm_stream_avx512.h"

/* Activations, quantized as tern_qact_fill_ref does (same bytes): per group, max |x| (NaN ignored: vmaxps returns
 * its second operand when one is NaN), its step, codes clamped and rounded to nearest even by the
 * current (default) rounding mode, exact integer sums. Group n (token n / ng, x + n * group) goes to its unit. */
static void fill(tern_qact *a, const float *x, int64_t n0, int64_t n1) {
    const int64_t G = a->group, ng = a->in / G;
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    for (int64_t n = n0, t = n0 / ng, g = n0 % ng; n < n1; n++, g = g + 1 < ng ? g + 1 : 0, t += g == 0) {
        const int64_t u = tern_qact_unit(a, t, g);
        const float *xg = x + n * G;
        __m512 m = _mm512_setzero_ps();
        for (int64_t k = 0; k < G; k += 16)
            m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xg + k)), m);
        const tern_qact_step st = tern_qact_step_for(_mm512_reduce_max_ps(m));
        const __m512 inv = _mm512_set1_ps(st.inv);
        __m512i isum = _mm512_setzero_si512();
        int8_t *q = a->q + u * G;
        for (int64_t k = 0; k < G; k += 16) {
            const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(xg + k), inv), lo), hi);
            const __m512i c = _mm512_cvtps_epi32(v);
            isum = _mm512_add_epi32(isum, c);
            _mm_storeu_si128((__m128i *)(q + k), _mm512_cvtsepi32_epi8(c));
        }
        tern_qact_set(a, u, st, _mm512_reduce_add_epi32(isum));
    }
}

/* tern_qmm_kernels.fill_ggml: ggml's Q8_0 quantization of each 32 values (tern_qblock_quantize_ref: step
 * amax / 127 stored f16, codes rounded to nearest even of x * 127 / amax), as tern_qact_set_q8_0 records it. */
static void fill_ggml(tern_qact *a, const float *x, int64_t n0, int64_t n1) {
    const int64_t ng = a->in / 32;
    for (int64_t n = n0, t = n0 / ng, g = n0 % ng; n < n1; n++, g = g + 1 < ng ? g + 1 : 0, t += g == 0) {
        const int64_t u = tern_qact_unit(a, t, g);
        const __m512 v0 = _mm512_loadu_ps(x + n * 32), v1 = _mm512_loadu_ps(x + n * 32 + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_max_ps(_mm512_abs_ps(v1),
                                                                                                _mm512_setzero_ps())));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i c0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id)), c1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        _mm_storeu_si128((__m128i *)(a->q + u * 32), _mm512_cvtsepi32_epi8(c0));
        _mm_storeu_si128((__m128i *)(a->q + u * 32 + 16), _mm512_cvtsepi32_epi8(c1));
        tern_qact_set_ggml(a, u, _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT)),
                           _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1)));
    }
}

/* Groups ahead of the current one whose activations a pass over 1 to 3 tokens requests (see qmm_block). */
#define QMM_ACT_AHEAD 2

/* One packed block against NT tokens starting at t0 (NT a compile-time constant at every call, so the
 * accumulators stay in registers); out[t] gets the 16 row results of token t0 + t. */
static inline __attribute__((always_inline)) void qmm_block(const uint8_t *blk, const tern_qact *a, int64_t t0,
                                                            const int NT, const int bits, const int GC,
                                                            tern_dtype sdt, size_t gbytes, __m512 *out) {
    const int64_t in = a->in, G = GC ? GC : a->group, ng = in / G;
    const size_t ss = sdt == TERN_DT_F32 ? 4 : 2;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const int ask = stream_requests(NT);
    __m512 acc[8];
    for (int t = 0; t < NT; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        /* grp: the group's scales (then, in the affine form, its biases) */
        const uint8_t *grp = a->ggml_steps ? blk + tern_qpack_ggml_scales_at(bits, g) : blk + (size_t)g * gbytes;
        const uint8_t *codes = a->ggml_steps ? blk + tern_qpack_ggml_codes_at(bits, g) : grp + 32 * ss;
        /* The pass's tokens are one tile: token t's group g is unit u0 + t. */
        const int64_t u0 = t0 * ng + g * NT;
        const int8_t *xq = a->q + u0 * G;
        /* A token's activation line of a group is read once per block, so over wide inputs the whole block has
         * streamed through L1 since its last use and it comes from L2 every time; requested two groups ahead it
         * is there on time. Not for a lone token over 8-bit codes: there the request cost 4-7 points of the
         * probe at ~58 GB/s (with 2 tokens it gains 1-2). */
        if ((bits == 4 || NT > 1) && NT < 4 && g + QMM_ACT_AHEAD < ng)
            for (int t = 0; t < NT; t++)
                _mm_prefetch((const char *)(xq + (t + QMM_ACT_AHEAD * NT) * G), _MM_HINT_T0);
        /* With few tokens a single accumulator would chain every VPDPBUSD on the one before: up to four sets
         * (summed at the end of the group; integer sums, so the result is the same) keep the chains short. */
        const int sets = NT <= 2 ? 4 : NT <= 4 ? 2 : 1;
        __m512i acc4[4][8];
        for (int k = 0; k < sets; k++)
            for (int t = 0; t < NT; t++)
                acc4[k][t] = _mm512_setzero_si512();
        /* ggml steps: the dot starts from -off x the codes' sum (qpack.h), off 8 or 128. */
        for (int t = 0; a->ggml_steps && t < NT; t++)
            acc4[0][t] = _mm512_set1_epi32(a->isum[u0 + t] * (bits == 4 ? -8 : -128));
        /* Four 64-byte chunks per step: q4 chunk c covers activations 8c .. 8c+7 (low nibbles the first four),
         * q8 chunk c covers 4c .. 4c+3. Operand i of a step pairs with activation offset xo[i]. */
        const int per = bits == 4 ? 8 : 4;
        for (int64_t c = 0; c < G / per; c += bits == 4 ? 2 : 4) {
            __m512i op[4];
            int64_t xo[4];
            if (bits == 4) {
                for (int u = 0; u < 2; u++) {
                    request_ahead(codes + (c + u) * 64, ask);
                    __m512i W = _mm512_load_si512(codes + (c + u) * 64);
                    /* One load feeding both masks: left to itself the compiler folds the load into each. */
                    __asm__("" : "+v"(W));
                    op[2 * u] = _mm512_and_si512(W, low4);
                    /* With four accumulator sets the odd ones take only high nibbles: W & 0xf0 is 16 x the code,
                     * one operation instead of a shift and a mask; the set's sum is divided by 16 exactly below. */
                    op[2 * u + 1] = sets == 4 ? _mm512_andnot_si512(low4, W)
                                              : _mm512_and_si512(_mm512_srli_epi16(W, 4), low4);
                    xo[2 * u] = (c + u) * 8;
                    xo[2 * u + 1] = (c + u) * 8 + 4;
                }
            } else {
                for (int u = 0; u < 4; u++) {
                    request_ahead(codes + (c + u) * 64, ask);
                    op[u] = _mm512_load_si512(codes + (c + u) * 64);
                    xo[u] = (c + u) * 4;
                }
            }
            for (int t = 0; t < NT; t++)
                for (int u = 0; u < 4; u++)
                    acc4[u % sets][t] = qmm_dpbusd_bcast(acc4[u % sets][t], op[u], xq + t * G + xo[u]);
        }
        __m512i ia[8];
        for (int t = 0; t < NT; t++) {
            ia[t] = acc4[0][t];
            if (bits == 4 && sets == 4)
                ia[t] = _mm512_add_epi32(_mm512_add_epi32(acc4[0][t], acc4[2][t]),
                                         _mm512_srai_epi32(_mm512_add_epi32(acc4[1][t], acc4[3][t]), 4));
            else
                for (int k = 1; k < sets; k++)
                    ia[t] = _mm512_add_epi32(ia[t], acc4[k][t]);
        }
        const __m512 s = qmm_load_scales(grp, sdt);
        if (a->ggml_steps) /* the offset is in ia already (its dot started from it) */
            qmm_epilogue_ggml_offset_in(acc, ia, s, a->xs + u0, NT);
        else
            qmm_epilogue_affine(acc, ia, s, qmm_load_scales(grp + 16 * ss, sdt), a, u0, NT);
    }
    for (int t = 0; t < NT; t++)
        out[t] = acc[t];
}

/* A whole tile of tokens (TERN_QACT_TILE = 8) from t0 against one block of ggml Q4_0 or Q8_0 weights (groups of
 * 32, f16 scales, in pairs: qpack.h), in ggml's form of the product: qmm_block's arithmetic, with every size
 * known when compiled. The block's first pass (first != 0) requests its later groups ahead; the later passes find it in L1. */
static inline __attribute__((always_inline)) void ggml_tile(const uint8_t *blk, const tern_qact *a, int64_t t0,
                                                            const int bits, int first, float *y, int64_t ystride,
                                                            __mmask16 m) {
    enum { NT = TERN_QACT_TILE, G = 32 };
    const int64_t ng = a->in / G;
    const size_t pair = 64 + 2 * tern_qpack_ggml_codes_bytes(bits);
    const int sh = bits == 4 ? 3 : 7; /* the bias's code offset, 8 or 128, as a shift */
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const int8_t *xt = a->q + t0 * ng * G;
    const int32_t *isum = a->isum + t0 * ng;
    const float *xs = a->xs + t0 * ng;
    __m512 acc[NT];
    for (int t = 0; t < NT; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *grp = blk + tern_qpack_ggml_scales_at(bits, g), *codes = blk + tern_qpack_ggml_codes_at(bits, g);
        const int8_t *xg = xt + g * NT * G;
        if (first && !(g & 1)) /* the pair's lines */
            for (size_t off = 0; off < pair; off += 64)
                _mm_prefetch((const char *)(grp + off + QMM_PREFETCH), _MM_HINT_T0);
        __m512i ia[NT];
        for (int t = 0; t < NT; t++)
            ia[t] = _mm512_setzero_si512();
        if (bits == 4) {
            for (int c = 0; c < G / 8; c++) {
                __m512i W = _mm512_load_si512(codes + c * 64);
                __asm__("" : "+v"(W));
                const __m512i lo = _mm512_and_si512(W, low4), hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), low4);
                for (int t = 0; t < NT; t++) {
                    ia[t] = qmm_dpbusd_bcast(ia[t], lo, xg + t * G + c * 8);
                    ia[t] = qmm_dpbusd_bcast(ia[t], hi, xg + t * G + c * 8 + 4);
                }
            }
        } else {
            for (int c = 0; c < G / 4; c++) {
                const __m512i W = _mm512_load_si512(codes + c * 64);
                for (int t = 0; t < NT; t++)
                    ia[t] = qmm_dpbusd_bcast(ia[t], W, xg + t * G + c * 4);
            }
        }
        qmm_epilogue_ggml(acc, ia, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)grp)), isum + g * NT,
                          xs + g * NT, sh, NT);
    }
    for (int t = 0; t < NT; t++)
        _mm512_mask_storeu_ps(y + t * ystride, m, acc[t]);
}

/* One 64-byte chunk of 4-bit codes of each of two blocks (16 rows x 8 codes: activations k .. k + 7, the low nibbles
 * the first four) against four tokens whose codes for them start at xg, G apart: each broadcast activation word
 * feeds both blocks' VPDPBUSD. */
static inline __attribute__((always_inline)) void pair_q4_chunk(const uint8_t *c0, const uint8_t *c1, const int8_t *xg,
                                                                const int G, __m512i *i0, __m512i *i1) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i W0 = _mm512_load_si512(c0), W1 = _mm512_load_si512(c1);
    __asm__("" : "+v"(W0), "+v"(W1)); /* one load feeding both masks, as in qmm_block */
    const __m512i lo0 = _mm512_and_si512(W0, low4), hi0 = _mm512_and_si512(_mm512_srli_epi16(W0, 4), low4);
    const __m512i lo1 = _mm512_and_si512(W1, low4), hi1 = _mm512_and_si512(_mm512_srli_epi16(W1, 4), low4);
    for (int t = 0; t < 4; t++) {
        const __m512i xa = _mm512_set1_epi32(*(const int32_t *)(xg + t * G));
        const __m512i xb = _mm512_set1_epi32(*(const int32_t *)(xg + t * G + 4));
        i0[t] = _mm512_dpbusd_epi32(i0[t], lo0, xa);
        i1[t] = _mm512_dpbusd_epi32(i1[t], lo1, xa);
        i0[t] = _mm512_dpbusd_epi32(i0[t], hi0, xb);
        i1[t] = _mm512_dpbusd_epi32(i1[t], hi1, xb);
    }
}

/* Two blocks of ggml Q4_0 / Q8_0 weights against four tokens (tq .. tq + 3 of the whole tile from t0): each
 * activation broadcast feeds both blocks, so a group's 64 VPDPBUSD take 50 loads where ggml_tile's (one block,
 * eight tokens) take 85 — more than two a cycle, which bound it: on Zen 5 10-13% more multiply-adds a second from
 * cache (bench_kernels --ceiling --format q4_0). The same integers (the dot started from the offset's product, as
 * qmm_block's, not having it subtracted, which costs 2-3% here) and the same FMA per token and group as ggml_tile:
 * the same bits. */
static inline __attribute__((always_inline)) void ggml_pair4(const uint8_t *b0, const uint8_t *b1, const tern_qact *a,
                                                             int64_t t0, int tq, const int bits, float *y0, float *y1,
                                                             int64_t ystride, __mmask16 m0, __mmask16 m1) {
    enum { NT = 4, TILE = TERN_QACT_TILE, G = 32 };
    const int64_t ng = a->in / G;
    const int off = bits == 4 ? -8 : -128; /* the bias's code offset */
    const int8_t *xt = a->q + t0 * ng * G + tq * G;
    const int32_t *isum = a->isum + t0 * ng + tq;
    const float *xs = a->xs + t0 * ng + tq;
    __m512 acc0[NT], acc1[NT];
    for (int t = 0; t < NT; t++)
        acc0[t] = acc1[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const size_t so = tern_qpack_ggml_scales_at(bits, g), co = tern_qpack_ggml_codes_at(bits, g);
        const int8_t *xg = xt + g * TILE * G;
        __m512i i0[NT], i1[NT];
        for (int t = 0; t < NT; t++) /* the dot starts from -off x the codes' sum */
            i0[t] = i1[t] = _mm512_set1_epi32(isum[g * TILE + t] * off);
        if (bits == 4) {
            for (int c = 0; c < G / 8; c++)
                pair_q4_chunk(b0 + co + c * 64, b1 + co + c * 64, xg + c * 8, G, i0, i1);
        } else {
            for (int c = 0; c < G / 4; c++) {
                const __m512i W0 = _mm512_load_si512(b0 + co + c * 64), W1 = _mm512_load_si512(b1 + co + c * 64);
                for (int t = 0; t < NT; t++) {
                    const __m512i xa = _mm512_set1_epi32(*(const int32_t *)(xg + t * G + c * 4));
                    i0[t] = _mm512_dpbusd_epi32(i0[t], W0, xa);
                    i1[t] = _mm512_dpbusd_epi32(i1[t], W1, xa);
                }
            }
        }
        qmm_epilogue_ggml_offset_in(acc0, i0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b0 + so))),
                                    xs + g * TILE, NT);
        qmm_epilogue_ggml_offset_in(acc1, i1, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b1 + so))),
                                    xs + g * TILE, NT);
    }
    for (int t = 0; t < NT; t++) {
        _mm512_mask_storeu_ps(y0 + (tq + t) * ystride, m0, acc0[t]);
        _mm512_mask_storeu_ps(y1 + (tq + t) * ystride, m1, acc1[t]);
    }
}

/* Two blocks of MLX affine q4 weights in groups of 64 against four tokens (tq .. tq + 3 of the whole tile from t0),
 * as ggml_pair4 pairs ggml's: each activation broadcast feeds both blocks (a group's 128 VPDPBUSD take 96 loads
 * where qmm_block's one block against eight tokens takes 162: 255-256 -> 278-284 GMAC/s from cache), and each
 * block's epilogue is qmm_block's: the same bits. */
static inline __attribute__((always_inline)) void mlx_pair4(const uint8_t *b0, const uint8_t *b1, const tern_qact *a,
                                                            int64_t t0, int tq, tern_dtype sdt, size_t gbytes,
                                                            float *y0, float *y1, int64_t ystride, __mmask16 m0,
                                                            __mmask16 m1) {
    enum { NT = 4, TILE = TERN_QACT_TILE, G = 64 };
    const int64_t ng = a->in / G;
    const size_t ss = sdt == TERN_DT_F32 ? 4 : 2;
    const int8_t *xt = a->q + t0 * ng * G + tq * G;
    __m512 acc0[NT], acc1[NT];
    for (int t = 0; t < NT; t++)
        acc0[t] = acc1[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *g0 = b0 + (size_t)g * gbytes, *g1 = b1 + (size_t)g * gbytes; /* scales, biases, codes */
        const uint8_t *c0 = g0 + 32 * ss, *c1 = g1 + 32 * ss;
        const int8_t *xg = xt + g * TILE * G;
        __m512i i0[NT], i1[NT];
        for (int t = 0; t < NT; t++)
            i0[t] = i1[t] = _mm512_setzero_si512();
        for (int c = 0; c < G / 8; c++)
            pair_q4_chunk(c0 + c * 64, c1 + c * 64, xg + c * 8, G, i0, i1);
        const int64_t u0 = t0 * ng + g * TILE + tq;
        qmm_epilogue_affine(acc0, i0, qmm_load_scales(g0, sdt), qmm_load_scales(g0 + 16 * ss, sdt), a, u0, NT);
        qmm_epilogue_affine(acc1, i1, qmm_load_scales(g1, sdt), qmm_load_scales(g1 + 16 * ss, sdt), a, u0, NT);
    }
    for (int t = 0; t < NT; t++) {
        _mm512_mask_storeu_ps(y0 + (tq + t) * ystride, m0, acc0[t]);
        _mm512_mask_storeu_ps(y1 + (tq + t) * ystride, m1, acc1[t]);
    }
}

/* One Q4_K-form block (qpack.h) against NT tokens from t0 (out[t]: its 16 rows): per super-block, each sub-block's
 * integer dots formed as qmm_block forms a 4-bit group's, times the sub-block's scales, and its mins times the
 * tokens' code sums, all summed exactly; then tern_qmm_ref's two FMAs. */
static inline __attribute__((always_inline)) void q4k_block(const uint8_t *blk, const tern_qact *a, int64_t t0,
                                                            const int NT, __m512 *out) {
    const int64_t ns = a->in / 256, ng = a->in / 32;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const int sets = NT <= 2 ? 4 : NT <= 4 ? 2 : 1, ask = stream_requests(NT);
    __m512 acc[8];
    for (int t = 0; t < NT; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < ns; s++) {
        const uint8_t *sb = blk + (size_t)s * TERN_QPACK_Q4K_BYTES;
        __m512i isum[8], msum[8];
        for (int t = 0; t < NT; t++)
            isum[t] = msum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const int64_t u0 = t0 * ng + (8 * s + j) * NT;
            const int8_t *xq = a->q + u0 * 32;
            const uint8_t *codes = blk + tern_qpack_q4k_codes_at(s, j);
            __m512i acc4[4][8];
            for (int k = 0; k < sets; k++)
                for (int t = 0; t < NT; t++)
                    acc4[k][t] = _mm512_setzero_si512();
            for (int c = 0; c < 4; c++) {
                request_ahead(codes + c * 64, ask);
                __m512i W = _mm512_load_si512(codes + c * 64);
                __asm__("" : "+v"(W));
                /* as in qmm_block: with four sets the odd ones take 16 x the high nibbles, divided out below */
                const __m512i lo = _mm512_and_si512(W, low4);
                const __m512i hi = sets == 4 ? _mm512_andnot_si512(low4, W)
                                             : _mm512_and_si512(_mm512_srli_epi16(W, 4), low4);
                const int kl = (2 * c) % sets, kh = (2 * c + 1) % sets;
                for (int t = 0; t < NT; t++) {
                    acc4[kl][t] = qmm_dpbusd_bcast(acc4[kl][t], lo, xq + t * 32 + 8 * c);
                    acc4[kh][t] = qmm_dpbusd_bcast(acc4[kh][t], hi, xq + t * 32 + 8 * c + 4);
                }
            }
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(blk + tern_qpack_q4k_sc_at(s, j))));
            const __m512i m = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(blk + tern_qpack_q4k_m_at(s, j))));
            for (int t = 0; t < NT; t++) {
                __m512i ia = acc4[0][t];
                if (sets == 4)
                    ia = _mm512_add_epi32(_mm512_add_epi32(acc4[0][t], acc4[2][t]),
                                          _mm512_srai_epi32(_mm512_add_epi32(acc4[1][t], acc4[3][t]), 4));
                else
                    for (int k = 1; k < sets; k++)
                        ia = _mm512_add_epi32(ia, acc4[k][t]);
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sc, ia));
                msum[t] = _mm512_add_epi32(msum[t], _mm512_mullo_epi32(m, _mm512_set1_epi32(a->isum[u0 + t])));
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)sb));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 32)));
        for (int t = 0; t < NT; t++) {
            const __m512 xs = _mm512_set1_ps(a->xs[t0 * ng + 8 * s * NT + t]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, xs), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[t]),
                                     _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, xs)), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++)
        out[t] = acc[t];
}

/* tern_qmm_kernels.tile: the tile's token count a constant in its own copy of qmm_block (ggml_tile for whole
 * tiles of ggml blocks), results stored masked to the valid rows. */
static void tile(const uint8_t *blk, const tern_qact *a, int64_t t0, int first, int bits, tern_dtype sdt,
                 size_t gbytes, float *y, int64_t ystride, int valid) {
    const int nt = a->T - t0 < TERN_QACT_TILE ? (int)(a->T - t0) : TERN_QACT_TILE;
    __m512 out[TERN_QACT_TILE] = {0};
#define QMM_CASE(n)                                                                                        \
    case n:                                                                                                \
        if (bits == 4)                                                                                     \
            qmm_block(blk, a, t0, n, 4, 0, sdt, gbytes, out);                                              \
        else                                                                                               \
            qmm_block(blk, a, t0, n, 8, 0, sdt, gbytes, out);                                              \
        break;
    if (a->ggml_steps == 2 && bits == 6) {
        tern_qmm_q6k_tile(blk, a, t0, y, ystride, valid);
        return;
    }
    if (a->ggml_steps == 2) {
        switch (nt) {
        case 1: q4k_block(blk, a, t0, 1, out); break;
        case 2: q4k_block(blk, a, t0, 2, out); break;
        case 3: q4k_block(blk, a, t0, 3, out); break;
        case 4: q4k_block(blk, a, t0, 4, out); break;
        case 5: q4k_block(blk, a, t0, 5, out); break;
        case 6: q4k_block(blk, a, t0, 6, out); break;
        case 7: q4k_block(blk, a, t0, 7, out); break;
        default: q4k_block(blk, a, t0, 8, out); break;
        }
    } else if (nt == 8 && a->ggml_steps) {
        if (bits == 4)
            ggml_tile(blk, a, t0, 4, first, y, ystride, (__mmask16)((1u << valid) - 1));
        else
            ggml_tile(blk, a, t0, 8, first, y, ystride, (__mmask16)((1u << valid) - 1));
        return;
    } else if (nt == 8 && a->group == 64) {
        if (bits == 4)
            qmm_block(blk, a, t0, 8, 4, 64, sdt, gbytes, out);
        else
            qmm_block(blk, a, t0, 8, 8, 64, sdt, gbytes, out);
    } else
        switch (nt) {
            QMM_CASE(1)
            QMM_CASE(2)
            QMM_CASE(3)
            QMM_CASE(4)
            QMM_CASE(5)
            QMM_CASE(6)
            QMM_CASE(7)
            QMM_CASE(8)
        }
#undef QMM_CASE
    if (valid == 16)
        for (int t = 0; t < nt; t++)
            _mm512_storeu_ps(y + t * ystride, out[t]);
    else
        for (int t = 0; t < nt; t++)
            _mm512_mask_storeu_ps(y + t * ystride, (__mmask16)((1u << valid) - 1), out[t]);
}

/* tern_qmm_kernels.tile_pair: ggml's blocks and MLX q4 groups of 64 in two halves of four tokens (eight tokens of
 * two blocks would take more accumulators than there are registers); other forms one block at a time (MLX q8 paired
 * measured no faster: 229-244 against 233-247 GMAC/s). */
static void tile_pair(const uint8_t *b0, const uint8_t *b1, const tern_qact *a, int64_t t0, int bits, tern_dtype sdt,
                      size_t gbytes, float *y0, float *y1, int64_t ystride, int valid0, int valid1) {
    const __mmask16 m0 = (__mmask16)((1u << valid0) - 1), m1 = (__mmask16)((1u << valid1) - 1);
    if (a->ggml_steps == 1 && bits == 4) {
        ggml_pair4(b0, b1, a, t0, 0, 4, y0, y1, ystride, m0, m1);
        ggml_pair4(b0, b1, a, t0, 4, 4, y0, y1, ystride, m0, m1);
    } else if (a->ggml_steps == 1) {
        ggml_pair4(b0, b1, a, t0, 0, 8, y0, y1, ystride, m0, m1);
        ggml_pair4(b0, b1, a, t0, 4, 8, y0, y1, ystride, m0, m1);
    } else if (!a->ggml_steps && a->group == 64 && bits == 4) {
        mlx_pair4(b0, b1, a, t0, 0, sdt, gbytes, y0, y1, ystride, m0, m1);
        mlx_pair4(b0, b1, a, t0, 4, sdt, gbytes, y0, y1, ystride, m0, m1);
    } else {
        tile(b0, a, t0, 0, bits, sdt, gbytes, y0, ystride, valid0);
        tile(b1, a, t0, 0, bits, sdt, gbytes, y1, ystride, valid1);
    }
}

const tern_qmm_kernels tern_qmm_avx512 = {.fill = fill, .fill_ggml = fill_ggml, .tile = tile, .q4k = 1, .q6k = 1,
                                          .tile_pair = tile_pair};
const tern_qmm_kernels tern_qmm_amx = {.fill = fill, .fill_ggml = fill_ggml, .tile = tern_qmm_amx_tile, .q4k = 1,
                                       .q6k = 1};
