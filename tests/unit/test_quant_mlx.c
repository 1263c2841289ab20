/* test_quant_mlx.c — MLX affine quantization: shape checks, bit packing for every width, dequantization against
 * a bit-by-bit reference, the MLX quantizer on hand-computed groups and its error bound, and mxfp4 decoding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "tensor/quant_mlx.h"
#include "testutil.h"

static const int all_bits[] = {2, 3, 4, 5, 6, 8};
#define N_BITS (int)(sizeof all_bits / sizeof all_bits[0])

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* Uniform in [lo, hi). */
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 40) / 16777216.0); }

/* Bit p of a row read as an LSB-first stream over little-endian uint32 words. */
static unsigned stream_bit(const uint32_t *row, int64_t p) { return (row[p / 32] >> (p % 32)) & 1u; }

/* The k-th value of a row assembled one bit at a time, straight from the layout definition. */
static uint32_t ref_get(const uint32_t *row, int bits, int64_t k) {
    uint32_t v = 0;
    for (int i = 0; i < bits; i++)
        v |= stream_bit(row, k * bits + i) << i;
    return v;
}

static float ref_scale(const void *p, tern_dtype dt, int64_t i) {
    if (dt == TERN_DT_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == TERN_DT_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
}

static void test_check(void **state) {
    for (int i = 0; i < N_BITS; i++) {
        TU_OK(tern_mlx_check(all_bits[i], 32, 2048));
        TU_OK(tern_mlx_check(all_bits[i], 64, 2048));
        TU_OK(tern_mlx_check(all_bits[i], 128, 2048));
    }
    TU_OK(tern_mlx_check(4, 16, 16));
    TU_OK(tern_mlx_check(4, 8, 8));
    TU_FAILS_WITH(tern_mlx_check(7, 64, 2048), "bits = 7 is not supported");
    TU_FAILS_WITH(tern_mlx_check(1, 64, 2048), "bits = 1 is not supported");
    TU_FAILS_WITH(tern_mlx_check(16, 64, 2048), "bits = 16");
    TU_FAILS_WITH(tern_mlx_check(4, 48, 2016), "group_size = 48 is not supported");
    TU_FAILS_WITH(tern_mlx_check(4, 4, 2048), "group_size = 4");
    TU_FAILS_WITH(tern_mlx_check(4, 0, 2048), "group_size = 0");
    TU_FAILS_WITH(tern_mlx_check(4, -64, 2048), "group_size = -64");
    TU_FAILS_WITH(tern_mlx_check(4, 64, 2000), "2000 is not a multiple of group_size 64");
    TU_FAILS_WITH(tern_mlx_check(4, 64, 0), "must be positive");
    /* 8 three-bit values are 24 bits: not a whole word. */
    TU_FAILS_WITH(tern_mlx_check(3, 8, 8), "does not fill whole uint32 words");
    TU_OK(tern_mlx_check(3, 8, 32));
    /* No overflow for absurd sizes. */
    TU_OK(tern_mlx_check(8, 64, INT64_C(1) << 60));

    assert_int_equal(tern_mlx_row_words(2048, 4), 256);
    assert_int_equal(tern_mlx_row_words(2048, 3), 192);
    assert_int_equal(tern_mlx_row_words(2048, 5), 320);
    assert_int_equal(tern_mlx_row_words(2048, 6), 384);
    assert_int_equal(tern_mlx_row_words(2048, 8), 512);
    assert_int_equal(tern_mlx_row_words(2048, 2), 128);
    assert_int_equal(tern_mlx_row_words(INT64_C(1) << 60, 8), INT64_C(1) << 58);
}

/* Pack -> unpack and pack -> get round-trip random codes at every width; the packed bits match the layout
 * definition bit for bit, and packing writes no word past the row. */
static void test_pack_roundtrip(void **state) {
    enum { IN = 384 };
    uint8_t q[IN], back[IN];
    uint32_t row[IN * 8 / 32 + 1];
    for (int bi = 0; bi < N_BITS; bi++) {
        int bits = all_bits[bi];
        int64_t words = tern_mlx_row_words(IN, bits);
        assert_int_equal(words * 32, IN * bits);
        for (int rep = 0; rep < 4; rep++) {
            for (int k = 0; k < IN; k++)
                q[k] = (uint8_t)(next_u64() % (1u << bits));
            if (rep == 1)
                for (int k = 0; k < IN; k++)
                    q[k] = (uint8_t)((1u << bits) - 1); /* all ones */
            memset(row, 0xA5, sizeof row);
            tern_mlx_pack_row(q, IN, bits, row);
            assert_int_equal(row[words], 0xA5A5A5A5u); /* sentinel after the row untouched */
            tern_mlx_unpack_row(row, IN, bits, back);
            assert_memory_equal(q, back, IN);
            for (int k = 0; k < IN; k++) {
                assert_int_equal(tern_mlx_get(row, bits, k), q[k]);
                assert_int_equal(ref_get(row, bits, k), q[k]);
            }
        }
        /* Bits above `bits` in the input codes are dropped, not smeared into neighbours. */
        for (int k = 0; k < IN; k++)
            q[k] = (uint8_t)(0xff);
        tern_mlx_pack_row(q, IN, bits, row);
        for (int k = 0; k < IN; k++)
            assert_int_equal(tern_mlx_get(row, bits, k), (1u << bits) - 1);
    }
}

/* Known packed words: 2/4/8 bits keep each value inside one word (word c, slot j at bit j*b); 3 and 5 bits form a
 * continuous LSB-first stream in which values straddle words. */
static void test_pack_layout(void **state) {
    uint8_t q8[4] = {0x01, 0x02, 0x03, 0xfe};
    uint32_t w[5];
    tern_mlx_pack_row(q8, 4, 8, w);
    assert_int_equal(w[0], 0xfe030201u);

    uint8_t q4[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0};
    tern_mlx_pack_row(q4, 16, 4, w);
    assert_int_equal(w[0], 0x87654321u);
    assert_int_equal(w[1], 0x0fedcba9u);

    uint8_t q2[16] = {0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 1, 1, 0, 0, 0, 3};
    tern_mlx_pack_row(q2, 16, 2, w);
    /* value j at bits 2j..2j+1 */
    assert_int_equal(w[0], 0xc0551be4u);

    /* 3 bits: 8 values fill 24 bits (MLX's 3-byte pack); 32 values fill 3 words. */
    uint8_t q3[32] = {1, 2, 3, 4, 5, 6, 7, 0};
    tern_mlx_pack_row(q3, 32, 3, w);
    assert_int_equal(w[0], 0x001F58D1u);
    assert_int_equal(w[1], 0);
    assert_int_equal(w[2], 0);

    /* 5 bits: values (7k+3) mod 32; value 6 sits at bits 30..34, across words 0 and 1 (words computed
     * independently with Python big integers). */
    uint8_t q5[32];
    for (int k = 0; k < 32; k++)
        q5[k] = (uint8_t)((7 * k + 3) % 32);
    tern_mlx_pack_row(q5, 32, 5, w);
    const uint32_t want5[5] = {0x4dfc4543u, 0x78245ba3u, 0x0753617du, 0x4b276cf4u, 0xe55c7066u};
    assert_memory_equal(w, want5, sizeof want5);
    assert_int_equal(tern_mlx_get(w, 5, 6), 13);

    /* 6 bits: 4 values per 24 bits. */
    uint8_t q6[16] = {63, 0, 21, 42};
    tern_mlx_pack_row(q6, 16, 6, w);
    assert_int_equal(w[0], 63u | 0u << 6 | 21u << 12 | 42u << 18);
}

/* Dequantization against the scalar reference (bit-by-bit unpack, scale*q + bias), every width, group size
 * 32/64/128 and scale dtype f32/bf16/f16, on random bit patterns and random scales/biases. */
static void test_dequant_reference(void **state) {
    enum { IN = 512 };
    static const int groups[] = {32, 64, 128};
    static const tern_dtype sdts[] = {TERN_DT_F32, TERN_DT_BF16, TERN_DT_F16};
    uint32_t row[IN * 8 / 32];
    float sc32[IN / 32], bi32[IN / 32];
    uint16_t sc16[IN / 32], bi16[IN / 32];
    float out[IN];
    for (int bi = 0; bi < N_BITS; bi++) {
        int bits = all_bits[bi];
        for (int gi = 0; gi < 3; gi++) {
            int group = groups[gi];
            TU_OK(tern_mlx_check(bits, group, IN));
            for (int di = 0; di < 3; di++) {
                tern_dtype sdt = sdts[di];
                for (int64_t c = 0; c < tern_mlx_row_words(IN, bits); c++)
                    row[c] = (uint32_t)next_u64();
                for (int g = 0; g < IN / group; g++) {
                    float s = uniform(-0.05f, 0.05f), b = uniform(-1.0f, 1.0f);
                    sc32[g] = s, bi32[g] = b;
                    sc16[g] = sdt == TERN_DT_BF16 ? tern_f32_to_bf16(s) : tern_f32_to_f16(s);
                    bi16[g] = sdt == TERN_DT_BF16 ? tern_f32_to_bf16(b) : tern_f32_to_f16(b);
                }
                const void *scales = sdt == TERN_DT_F32 ? (const void *)sc32 : (const void *)sc16;
                const void *biases = sdt == TERN_DT_F32 ? (const void *)bi32 : (const void *)bi16;
                tern_mlx_dequantize_row(row, scales, biases, sdt, bits, group, IN, out);
                for (int k = 0; k < IN; k++) {
                    float s = ref_scale(scales, sdt, k / group), b = ref_scale(biases, sdt, k / group);
                    float prod = s * (float)ref_get(row, bits, k);
                    float want = prod + b;
                    if (out[k] != want)
                        fail_msg("bits %d group %d %s: out[%d] = %.9g, want %.9g", bits, group, tern_dtype_name(sdt),
                                 k, out[k], want);
                }
            }
        }
    }
}

/* 8-bit dequantization of a known packed word with bf16 scale 0.5 and bias -1. */
static void test_dequant_8bit_known(void **state) {
    uint32_t row[8] = {0x04030201u, 0xff000080u, 0, 0, 0, 0, 0, 0}; /* 32 values, one group */
    uint16_t scale = tern_f32_to_bf16(0.5f), bias = tern_f32_to_bf16(-1.0f);
    float out[32];
    tern_mlx_dequantize_row(row, &scale, &bias, TERN_DT_BF16, 8, 32, 32, out);
    const float want[8] = {-0.5f, 0.0f, 0.5f, 1.0f, 63.0f, -1.0f, -1.0f, 126.5f};
    for (int k = 0; k < 8; k++)
        assert_true(out[k] == want[k]);
    for (int k = 8; k < 32; k++)
        assert_true(out[k] == -1.0f);
    /* f16 scales and biases as well. */
    uint16_t s16 = tern_f32_to_f16(0.25f), b16 = tern_f32_to_f16(2.0f);
    tern_mlx_dequantize_row(row, &s16, &b16, TERN_DT_F16, 8, 32, 32, out);
    assert_true(out[0] == 2.25f && out[3] == 3.0f && out[7] == 2.0f + 0.25f * 255.0f);
}

/* Quantizes a 32-value group whose first entries are given and the rest repeat `fill`. */
static void quantize_group(const float *head, int n_head, float fill, int bits, float *scale, float *bias,
                           uint8_t *codes, float *deq) {
    float x[32];
    for (int k = 0; k < 32; k++)
        x[k] = k < n_head ? head[k] : fill;
    uint32_t row[8];
    tern_mlx_quantize_row(x, 32, bits, 32, TERN_DT_F32, row, scale, bias);
    tern_mlx_unpack_row(row, 32, bits, codes);
    tern_mlx_dequantize_row(row, scale, bias, TERN_DT_F32, bits, 32, 32, deq);
}

/* The MLX algorithm worked by hand on small groups (values checked against an f32 emulation in Python). */
static void test_quantize_known(void **state) {
    float scale, bias, deq[32];
    uint8_t q[32];

    /* min -1, max 3, 4 bits: |min| < |max| so the edge is the max: scale0 = -(3-(-1))/15 = -0.2666667,
     * q0 = round(3 / -0.2666667) = round(-11.25) = -11, scale = 3 / -11 = -0.27272728, bias = 3.
     * Codes: 3 -> 0, -1 -> round(14.67) = 15, 0 -> 11, 1 -> round(7.33) = 7, 0.5 -> round(9.17) = 9,
     * 2 -> round(3.67) = 4. Zero is on the grid: 3 + 11 * (3/-11) = 0 exactly. */
    const float a[] = {-1.0f, 3.0f, 0.0f, 1.0f, 0.5f};
    quantize_group(a, 5, 2.0f, 4, &scale, &bias, q, deq);
    assert_true(scale == 3.0f / -11.0f);
    assert_true(bias == 3.0f);
    const uint8_t qa[] = {15, 0, 11, 7, 9, 4};
    assert_memory_equal(q, qa, 6);
    assert_true(deq[1] == 3.0f);
    assert_true(deq[2] == 0.0f);
    assert_float_equal(deq[0], -1.0909091f, 1e-6);
    assert_float_equal(deq[5], 1.9090909f, 1e-6);

    /* The mirror image: min -3 dominates, so the scale is positive and the bias is the min. */
    const float b[] = {-3.0f, 1.0f, 0.0f};
    quantize_group(b, 3, -1.0f, 4, &scale, &bias, q, deq);
    assert_true(scale == -3.0f / -11.0f);
    assert_true(bias == -3.0f);
    const uint8_t qb[] = {0, 15, 11, 7};
    assert_memory_equal(q, qb, 4);
    assert_true(deq[0] == -3.0f && deq[2] == 0.0f);

    /* max 3, min -0.9: scale0 = -3.9/15 = -0.26, q0 = round(-11.54) = -12, scale = -0.25: the grid [3, -0.75] no
     * longer reaches the min, whose code round(15.6) = 16 clips to 15 (error 0.15 > |scale|/2). 2.375 sits at
     * code 2.5 exactly and rounds half away from zero to 3 (MLX's GPU round; its CPU rint would give 2). */
    const float c[] = {3.0f, -0.9f, 2.375f, 2.125f, 0.0f};
    quantize_group(c, 5, 1.0f, 4, &scale, &bias, q, deq);
    assert_true(scale == -0.25f && bias == 3.0f);
    const uint8_t qc[] = {0, 15, 3, 4, 12, 8};
    assert_memory_equal(q, qc, 6);
    assert_true(deq[1] == -0.75f && deq[2] == 2.25f && deq[4] == 0.0f && deq[5] == 1.0f);

    /* All-negative group at 2 bits: the running max starts at 0, so the grid spans [-4, 0] in steps of 4/3
     * (not [-4, -1] in steps of 1): -1 -> round(2.25) = 2 -> -1.3333333; -2 -> code 1.5 in f32 -> 2. */
    const float d[] = {-4.0f, -1.0f, -2.0f, -3.0f};
    quantize_group(d, 4, -1.5f, 2, &scale, &bias, q, deq);
    assert_true(scale == -4.0f / -3.0f && bias == -4.0f);
    const uint8_t qd[] = {0, 2, 2, 1, 2};
    assert_memory_equal(q, qd, 5);
    assert_float_equal(deq[1], -1.3333333f, 1e-6);

    /* A constant group: the range is 0, the scale falls back to -1e-7 and the value itself becomes the bias. */
    quantize_group(NULL, 0, 0.75f, 4, &scale, &bias, q, deq);
    assert_true(bias == 0.75f);
    assert_true(deq[0] == 0.75f && deq[31] == 0.75f);
    assert_true(q[0] == 0 && q[31] == 0);
    /* All zeros: q0 = 0, so bias 0 and every value back to 0. */
    quantize_group(NULL, 0, 0.0f, 3, &scale, &bias, q, deq);
    assert_true(bias == 0.0f && deq[7] == 0.0f);
    assert_true(fabsf(scale) == 1e-7f);
}

/* Quantize -> dequantize on random groups of many shapes: every value within |scale|/2 (+ f32 rounding) of its
 * reconstruction, or within |scale| when its code was clipped at the far end of the grid; the bias edge and any
 * exact zero (in groups with a non-positive value) come back exactly or nearly so. */
static void test_quantize_error_bound(void **state) {
    enum { IN = 1024 };
    static const int groups[] = {32, 64, 128};
    float x[IN], deq[IN], scales[IN / 32], biases[IN / 32];
    uint32_t row[IN * 8 / 32];
    uint8_t q[IN];
    int clipped_seen = 0;
    for (int bi = 0; bi < N_BITS; bi++) {
        int bits = all_bits[bi];
        float n_bins = (float)((1 << bits) - 1);
        for (int gi = 0; gi < 3; gi++) {
            int group = groups[gi];
            for (int rep = 0; rep < 6; rep++) {
                for (int k = 0; k < IN; k++) {
                    int g = k / group;
                    switch ((g + rep) % 6) {
                    case 0: x[k] = uniform(-1.0f, 1.0f); break;
                    case 1: x[k] = uniform(0.5f, 2.0f); break;       /* all positive */
                    case 2: x[k] = uniform(-3.0f, -0.25f); break;    /* all negative */
                    case 3: x[k] = uniform(-0.02f, 0.05f); break;    /* small, skewed */
                    case 4: x[k] = tern_bf16_to_f32(tern_f32_to_bf16(uniform(-0.1f, 0.1f))); break;
                    default: x[k] = (k % 7 == 0) ? 0.0f : uniform(-5.0f, 1.0f); break;
                    }
                }
                tern_mlx_quantize_row(x, IN, bits, group, TERN_DT_F32, row, scales, biases);
                tern_mlx_unpack_row(row, IN, bits, q);
                tern_mlx_dequantize_row(row, scales, biases, TERN_DT_F32, bits, group, IN, deq);
                for (int g = 0; g < IN / group; g++) {
                    float s = scales[g], b = biases[g], amax = fabsf(b);
                    int has_nonpos = 0;
                    for (int j = 0; j < group; j++) {
                        amax = fmaxf(amax, fabsf(x[g * group + j]));
                        has_nonpos |= x[g * group + j] <= 0.0f;
                    }
                    float tiny = 4e-7f * amax + 1e-12f;
                    for (int j = 0; j < group; j++) {
                        int k = g * group + j;
                        assert_true(q[k] <= n_bins);
                        float t = roundf((x[k] - b) / s);
                        int clipped = t < 0.0f || t > n_bins;
                        clipped_seen += clipped;
                        float err = fabsf(x[k] - deq[k]);
                        float bound = (clipped ? fabsf(s) : 0.5f * fabsf(s)) + tiny;
                        if (!(err <= bound))
                            fail_msg("bits %d group %d: x %.9g deq %.9g err %.3g > bound %.3g (scale %.9g bias %.9g)",
                                     bits, group, x[k], deq[k], err, bound, s, b);
                        if (x[k] == b)
                            assert_true(q[k] == 0 && deq[k] == b);
                        if (x[k] == 0.0f && has_nonpos)
                            assert_true(fabsf(deq[k]) <= tiny);
                    }
                }
            }
        }
    }
    assert_true(clipped_seen > 0); /* the far-end clip does happen on ordinary data */
}

/* bf16/f16 scale storage: the codes come from the f32 scale/bias (identical to an f32-scale run) and only the
 * stored copies are rounded. */
static void test_quantize_half_scales(void **state) {
    enum { IN = 256, G = 64 };
    float x[IN], s32[IN / G], b32[IN / G];
    uint16_t s16[IN / G], b16[IN / G];
    uint32_t r32[IN * 8 / 32], r16[IN * 8 / 32];
    for (int k = 0; k < IN; k++)
        x[k] = tern_bf16_to_f32(tern_f32_to_bf16(uniform(-0.3f, 0.2f)));
    for (int bi = 0; bi < N_BITS; bi++) {
        int bits = all_bits[bi];
        int64_t words = tern_mlx_row_words(IN, bits);
        tern_mlx_quantize_row(x, IN, bits, G, TERN_DT_F32, r32, s32, b32);
        tern_mlx_quantize_row(x, IN, bits, G, TERN_DT_BF16, r16, s16, b16);
        assert_memory_equal(r32, r16, (size_t)words * 4);
        for (int g = 0; g < IN / G; g++) {
            assert_int_equal(s16[g], tern_f32_to_bf16(s32[g]));
            assert_int_equal(b16[g], tern_f32_to_bf16(b32[g]));
        }
        tern_mlx_quantize_row(x, IN, bits, G, TERN_DT_F16, r16, s16, b16);
        assert_memory_equal(r32, r16, (size_t)words * 4);
        for (int g = 0; g < IN / G; g++) {
            assert_int_equal(s16[g], tern_f32_to_f16(s32[g]));
            assert_int_equal(b16[g], tern_f32_to_f16(b32[g]));
        }
    }
}

/* mxfp4: E2M1 codes with sign bit and E8M0 scales. */
static void test_mxfp4(void **state) {
    assert_true(tern_e8m0_to_f32(127) == 1.0f);
    assert_true(tern_e8m0_to_f32(128) == 2.0f);
    assert_true(tern_e8m0_to_f32(126) == 0.5f);
    assert_true(tern_e8m0_to_f32(1) == ldexpf(1.0f, -126));
    assert_true(tern_e8m0_to_f32(0) == ldexpf(1.0f, -127));
    assert_true(isinf(tern_e8m0_to_f32(255)));
    assert_true(tern_fp4_to_f32(0x7) == 6.0f);
    assert_true(tern_fp4_to_f32(0xf) == -6.0f);
    assert_true(tern_fp4_to_f32(0x3) == 1.5f);
    assert_true(tern_fp4_to_f32(0x9) == -0.5f);
    assert_true(signbit(tern_fp4_to_f32(0x8)) && tern_fp4_to_f32(0x8) == 0.0f);

    /* Two groups of 32. Group 0 (scale 1): codes 0..15 then 15..0; group 1 (scale 2^2): all code 0x5 (3.0)
     * except value 33 = code 0xC (-2.0). */
    uint32_t row[8] = {0x76543210u, 0xfedcba98u, 0x89abcdefu, 0x01234567u,
                       0x555555c5u, 0x55555555u, 0x55555555u, 0x55555555u};
    uint8_t scales[2] = {127, 129};
    float out[64];
    tern_mxfp4_dequantize_row(row, scales, 64, out);
    const float lut[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int k = 0; k < 16; k++) {
        assert_true(out[k] == lut[k]);
        assert_true(out[16 + k] == lut[15 - k]);
    }
    assert_true(out[32] == 12.0f);
    assert_true(out[33] == -8.0f);
    for (int k = 34; k < 64; k++)
        assert_true(out[k] == 12.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_pack_roundtrip),
        cmocka_unit_test(test_pack_layout),
        cmocka_unit_test(test_dequant_reference),
        cmocka_unit_test(test_dequant_8bit_known),
        cmocka_unit_test(test_quantize_known),
        cmocka_unit_test(test_quantize_error_bound),
        cmocka_unit_test(test_quantize_half_scales),
        cmocka_unit_test(test_mxfp4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
