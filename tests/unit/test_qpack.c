/* test_qpack.c — the packed MLX affine layout and the int8 product: packing is lossless and puts every code
 * where qpack.h says; the portable product is the dot of dequantized weights with quantized activations;
 * the AVX-512 and AVX2 quantizers and kernels reproduce the portable ones bit for bit (packed copy or not, in one
 * run or in pieces, any slab offset, every token count, bf16/f16/f32 scales). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/half.h"
#include "core/threadpool.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/qblock.h"
#include "tensor/qmm.h"
#include "tensor/qpack.h"
#include "tensor/quant_mlx.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

typedef struct qweight {
    tern_weight w;
    void *data, *scales, *biases;
    tern_qpack *pk;
} qweight;

static qweight make_q(int64_t rows, int64_t in, int bits, int group, tern_dtype sdt) {
    qweight o = {0};
    tu_mlx_weight(&o.w, rows, in, bits, group, sdt, rng++, &o.data, &o.scales, &o.biases);
    return o;
}

/* Packs o in pieces starting at blocks 0, 1 and 3 (fewer for small weights), the last piece first in one buffer
 * (*buf, the caller's to free), so that no piece follows the one before it. */
static void pack_split(qweight *o, uint8_t **buf) {
    const int64_t blocks = (tern_weight_rows(&o->w) + 15) / 16, first[] = {0, 1, 3};
    const int n = blocks > 3 ? 3 : blocks > 1 ? 2 : 1;
    const size_t bb = tern_qpack_bytes(&o->w) / (size_t)blocks;
    *buf = tern_aligned_alloc(tern_qpack_bytes(&o->w), 64);
    assert_non_null(*buf);
    uint8_t *at[3];
    size_t off = 0;
    for (int i = n - 1; i >= 0; i--) {
        at[i] = *buf + off * bb;
        off += (size_t)((i + 1 < n ? first[i + 1] : blocks) - first[i]);
    }
    TU_OK(tern_qpack_create_split(&o->w, n, first, at, 1, &o->pk));
}

static void free_q(qweight *o) {
    tern_qpack_free(o->pk);
    free(o->data);
    free(o->scales);
    free(o->biases);
}

static void test_layout(void **state) {
    static const int bits[] = {4, 8};
    static const tern_dtype sdts[] = {TERN_DT_BF16, TERN_DT_F16, TERN_DT_F32};
    for (int bi = 0; bi < 2; bi++)
        for (int si = 0; si < 3; si++) {
            const int G = 64, b = bits[bi];
            const int64_t rows = 37, in = 192, ng = in / G, words = tern_mlx_row_words(in, b);
            qweight o = make_q(rows, in, b, G, sdts[si]);
            TU_OK(tern_qpack_create(&o.w, NULL, &o.pk));
            const size_t ss = tern_dtype_size(sdts[si]);
            assert_int_equal(o.pk->blocks, 3);
            for (int64_t r = 0; r < 48; r++)
                for (int64_t k = 0; k < in; k++) {
                    const uint8_t *grp = o.pk->data + (size_t)(r / 16) * o.pk->block_bytes + (size_t)(k / G) * o.pk->group_bytes;
                    const uint8_t *codes = grp + 32 * ss;
                    const int64_t kk = k % G, rr = r % 16;
                    unsigned q;
                    if (b == 8)
                        q = codes[(kk / 4) * 64 + 4 * rr + kk % 4];
                    else {
                        const uint8_t byte = codes[(kk / 8) * 64 + 4 * rr + kk % 4];
                        q = kk % 8 < 4 ? byte & 15 : byte >> 4;
                    }
                    const unsigned want = r < rows ? tern_mlx_get((const uint32_t *)o.data + r * words, b, k) : 0;
                    if (q != want)
                        fail_msg("bits %d row %lld col %lld: packed code %u, stored %u", b, (long long)r, (long long)k, q, want);
                    if (kk == 0) { /* padding rows: scale 1, bias 0 */
                        const float one_f32 = 1.0f;
                        const uint16_t one_half = sdts[si] == TERN_DT_BF16 ? 0x3f80 : 0x3c00;
                        char zero[4] = {0}, one[4];
                        memcpy(one, sdts[si] == TERN_DT_F32 ? (const void *)&one_f32 : (const void *)&one_half, ss);
                        const void *ws = r < rows ? (const char *)o.scales + (size_t)(r * ng + k / G) * ss : one;
                        const void *wb = r < rows ? (const char *)o.biases + (size_t)(r * ng + k / G) * ss : zero;
                        assert_memory_equal(grp + rr * ss, ws, ss);
                        assert_memory_equal(grp + (16 + rr) * ss, wb, ss);
                    }
                }
            /* Split into pieces: every block's bytes the same as in one run. */
            uint8_t *buf;
            tern_qpack *whole = o.pk;
            pack_split(&o, &buf);
            assert_int_equal(o.pk->pieces, 2);
            for (int64_t blk = 0; blk < whole->blocks; blk++)
                assert_memory_equal(tern_qpack_block_data(o.pk, blk), tern_qpack_block_data(whole, blk), whole->block_bytes);
            assert_ptr_equal(tern_qpack_block_data(o.pk, 1), buf); /* the last piece lies first */
            tern_qpack_free(whole);
            free_q(&o);
            tern_aligned_free(buf);
        }
    tern_weight bad = {.fmt = TERN_WF_MLX_AFFINE, .ndim = 2, .shape = {16, 96}, .bits = 3, .group = 32, .sdtype = TERN_DT_BF16};
    tern_qpack *pk = NULL;
    tern_err *e = tern_qpack_create(&bad, NULL, &pk);
    assert_non_null(e);
    assert_null(pk);
    tern_err_free(e);
}

/* The portable product against its definition computed in double from the dequantized weights and the
 * dequantized activations (xs * xq): only f32 rounding separates them. */
static void test_reference_definition(void **state) {
    const int64_t rows = 9, in = 256, T = 3;
    qweight o = make_q(rows, in, 4, 64, TERN_DT_BF16);
    float *x = malloc((size_t)(T * in) * sizeof *x), *y = malloc((size_t)(T * rows) * sizeof *y);
    float *row = malloc((size_t)in * sizeof *row);
    for (int64_t i = 0; i < T * in; i++)
        x[i] = tu_frand(&rng) * 4.0f;
    x[5] = 0; /* a zero group would divide by zero if mishandled */
    for (int k = 64; k < 128; k++)
        x[k] = 0;
    tern_qact a;
    assert_true(tern_qact_alloc(&a, T, in, 64));
    tern_qact_fill_ref(&a, x);
    tern_qmm_ref(&o.w, 0, rows, &a, y);
    /* Each group's step is the smallest 2^e or 1.5 x 2^e with 127 steps covering its largest magnitude. */
    for (int64_t n = 0; n < T * 4; n++) {
        float amax = 0;
        for (int k = 0; k < 64; k++)
            amax = fmaxf(amax, fabsf(x[n * 64 + k]));
        const int64_t u = tern_qact_unit(&a, n / 4, n % 4);
        int e;
        const float f = frexpf(a.xs[u], &e);
        assert_true(f == 0.5f || f == 0.75f);
        const double below = f == 0.5f ? 0.75 * a.xs[u] : a.xs[u] / 1.5; /* the candidate before it */
        if (amax > 0)
            assert_true(127.0 * a.xs[u] >= amax && 127.0 * below < amax);
        else
            assert_true(a.xs[u] == ldexpf(1.0f, TERN_QACT_EXP_MIN));
    }
    for (int64_t r = 0; r < rows; r++) {
        tern_weight_row(&o.w, r, row);
        for (int64_t t = 0; t < T; t++) {
            double ref = 0, mag = 0, xerr = 0;
            for (int64_t k = 0; k < in; k++) {
                const int64_t u = tern_qact_unit(&a, t, k / 64);
                const double xd = (double)a.xs[u] * a.q[u * 64 + k % 64];
                ref += row[k] * xd;
                mag += fabs(row[k] * xd);
                xerr = fmax(xerr, fabs(xd - x[t * in + k]) / (a.xs[u] + 1e-30));
            }
            assert_true(xerr <= 0.5001); /* each activation is within half a step of its code */
            if (fabs(y[t * rows + r] - ref) > 1e-5 * mag + 1e-6)
                fail_msg("row %lld token %lld: %.7g vs %.7g", (long long)r, (long long)t, y[t * rows + r], ref);
        }
    }
    tern_qact_free(&a);
    free(x);
    free(y);
    free(row);
    free_q(&o);
}

/* One ISA's quantizer and kernel against the portable definitions, bit for bit. */
static void simd_matches_reference(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const tern_qmm_kernels *k = isa == TERN_ISA_AMX      ? &tern_qmm_amx
                                : isa == TERN_ISA_AVX512 ? &tern_qmm_avx512
                                                         : &tern_qmm_avx2;
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    static const struct {
        int bits, group;
        tern_dtype sdt;
        int64_t in;
    } cases[] = {{4, 64, TERN_DT_BF16, 1536}, {4, 32, TERN_DT_F16, 96},  {4, 128, TERN_DT_F32, 384},
                 {8, 64, TERN_DT_BF16, 320},  {8, 32, TERN_DT_F32, 64},  {8, 128, TERN_DT_F16, 256},
                 /* whole batches of 4 groups (AMX's tiles) at every width and group it takes */
                 {8, 64, TERN_DT_F16, 512},   {4, 128, TERN_DT_BF16, 1024}, {8, 128, TERN_DT_F32, 512}};
    static const int64_t Ts[] = {1, 2, 5, 8, 9, 19};
    /* row0, n_out: whole matrices of 16 blocks (the threads' runs hold several: whole tiles of tokens take two
     * blocks a pass where the kernels pair them), slabs from a block's start and from mid-block (packed apart) */
    static const int64_t slabs[][2] = {{0, 245}, {19, 200}, {0, 53}, {16, 37}, {3, 40}, {48, 5}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t in = cases[c].in, rows = 245;
        qweight o = make_q(rows, in, cases[c].bits, cases[c].group, cases[c].sdt);
        float *x = malloc((size_t)(19 * in) * sizeof *x);
        for (int64_t i = 0; i < 19 * in; i++)
            x[i] = tu_frand(&rng) * (i % 97 == 0 ? 40.0f : 2.0f);
        /* Token 17: groups at the ends of the step's range and beyond it (steps clamped, codes saturated), a NaN
         * and infinities (NaN is ignored by the maxima, coded -127; infinity takes the largest step). */
        static const float extremes[] = {0.0f, 1e-30f, 3e-41f, -1e25f, 1e38f, 0.0f, 1.0f, -127.0f};
        const int64_t G = cases[c].group, ng = in / G;
        for (int64_t g = 0; g < ng; g++)
            for (int64_t k = 0; k < G; k++) {
                const float v = extremes[g % 8] * (k % 3 == 0 ? 1.0f : -0.37f);
                x[17 * in + g * G + k] = v;
            }
        x[17 * in + (ng - 1) * G + 1] = NAN;
        x[17 * in + (ng > 1 ? ng - 2 : 0) * G + 2] = INFINITY;
        /* Scales the kernels cannot shift by adding to their exponent (zero, subnormal, tiny, huge): those groups
         * take the multiply, with the same result. */
        static const float odd_scales[] = {0.0f, 1e-40f, 3e-20f, 1e21f}, odd_f16[] = {0.0f, 6e-8f, 1e-6f, 6e4f};
        for (int r = 0; r < 4; r++) { /* group 0 of rows 5, 16, 27, 38 (token 17's group 0 is zero: no overflow) */
            const int64_t at = (5 + 11 * r) * ng;
            if (cases[c].sdt == TERN_DT_F32)
                ((float *)o.scales)[at] = odd_scales[r];
            else if (cases[c].sdt == TERN_DT_BF16)
                ((uint16_t *)o.scales)[at] = tern_f32_to_bf16(odd_scales[r]);
            else
                ((uint16_t *)o.scales)[at] = tern_f32_to_f16(odd_f16[r]);
        }
        /* activation bytes */
        tern_qact r, s;
        assert_true(tern_qact_alloc(&r, 19, in, cases[c].group));
        assert_true(tern_qact_alloc(&s, 19, in, cases[c].group));
        tern_qact_fill_ref(&r, x);
        k->fill(&s, x, 0, 19 * (in / cases[c].group));
        assert_memory_equal(r.q, s.q, (size_t)(19 * in));
        assert_memory_equal(r.xs, s.xs, (size_t)(19 * in / cases[c].group) * sizeof(float));
        assert_memory_equal(r.xsum, s.xsum, (size_t)(19 * in / cases[c].group) * sizeof(float));
        assert_memory_equal(r.exp_bits, s.exp_bits, (size_t)(19 * in / cases[c].group) * sizeof(int32_t));
        assert_memory_equal(r.half_mask, s.half_mask, (size_t)(19 * in / cases[c].group) * sizeof(int32_t));
        uint8_t *buf = NULL;
        for (int packed = 0; packed < 3; packed++) { /* not packed, packed in one run, packed in pieces */
            if (packed == 1)
                TU_OK(tern_qpack_create(&o.w, NULL, &o.pk));
            if (packed == 2) {
                tern_qpack_free(o.pk);
                pack_split(&o, &buf);
            }
            o.w.qpack = o.pk;
            for (size_t si = 0; si < sizeof slabs / sizeof slabs[0]; si++)
                for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                    const int64_t row0 = slabs[si][0], n_out = slabs[si][1], T = Ts[ti];
                    float *y = malloc((size_t)(T * n_out) * sizeof *y), *want = malloc((size_t)(T * n_out) * sizeof *want);
                    tern_qact a;
                    assert_true(tern_qact_alloc(&a, T, in, cases[c].group));
                    tern_qact_fill_ref(&a, x);
                    tern_qmm_ref(&o.w, row0, n_out, &a, want);
                    for (int kind = 0; kind < 2; kind++) {
                        tern_matmul_rows(pool, &o.w, row0, n_out, x, T, y, (tern_mm_kind)kind);
                        for (int64_t i = 0; i < T * n_out; i++)
                            if (memcmp(&y[i], &want[i], sizeof *y))
                                fail_msg("%s case %zu packed %d rows %lld+%lld T %lld kind %d: y[%lld][%lld] = %.9g, "
                                         "portable %.9g", tern_isa_name(isa), c, packed, (long long)row0, (long long)n_out, (long long)T, kind,
                                         (long long)(i / n_out), (long long)(i % n_out), y[i], want[i]);
                    }
                    tern_qact_free(&a);
                    free(y);
                    free(want);
                }
        }
        tern_qact_free(&r);
        tern_qact_free(&s);
        free(x);
        free_q(&o);
        tern_aligned_free(buf);
    }
    tern_pool_destroy(pool);
}

/* The epilogue's s * xs at the edges of the exponent add: f32 scales on both sides of the range where the kernels
 * add to the exponent (2^-61 .. 2^65) against steps from 2^-64 to 2^50, with and without the 1.5 factor; every
 * ISA against the portable definition, bit for bit. */
static void test_step_edges(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const float scales[] = {0x1p-61f, 0x1p-62f, 0x1.8p-61f, 0x1p-126f, 0x1.fcp64f, 0x1p65f, 1.0f, 1e-3f,
                                   0x1p-60f, 0x1.fffffep-62f, 3e-5f, 0x1p64f, 0.0f, 7.0f, 0x1p-100f, 0x1.4p20f};
    static const float amaxes[] = {1e-30f, 1.4e-17f, 1e-17f, 1.0f, 1.45f, 1.99f, 3e5f, 1e15f};
    const int64_t rows = 16, in = 128, T = 8, ng = 2;
    qweight o = make_q(rows, in, 4, 64, TERN_DT_F32);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < ng; g++)
            ((float *)o.scales)[r * ng + g] = scales[(r + g) % 16];
    float x[8 * 128], want[8 * 16], got[8 * 16];
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < in; k++)
            x[t * in + k] = amaxes[(t + k / 64) % 8] * (k % 64 == 5 ? 1.0f : tu_frand(&rng));
    tern_qact a;
    assert_true(tern_qact_alloc(&a, T, in, 64));
    tern_qact_fill_ref(&a, x);
    tern_qmm_ref(&o.w, 0, rows, &a, want);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    {
        tern_matmul_rows(pool, &o.w, 0, rows, x, T, got, TERN_MM_DECODE);
        for (int64_t i = 0; i < T * rows; i++)
            if (memcmp(&got[i], &want[i], sizeof got[i]))
                fail_msg("%s: token %lld row %lld: %.9g, portable %.9g", tern_isa_name(isa), (long long)(i / rows),
                         (long long)(i % rows), got[i], want[i]);
    }
    tern_pool_destroy(pool);
    tern_qact_free(&a);
    free_q(&o);
}

/* Rows of ggml Q4_0 or Q8_0 blocks: random codes, f16 steps from tiny to large, one step zero. */
static uint8_t *random_qblock(tern_qblock t, int64_t rows, int64_t in) {
    const size_t B = tern_qblock_bytes(t), nb = (size_t)(rows * in / 32);
    uint8_t *d = malloc(B * nb);
    static const float steps[] = {0.0f, 6e-8f, 1e-5f, 0.002f, 0.03f, 1.5f, 300.0f, 0.0117f};
    for (size_t i = 0; i < B * nb; i++)
        d[i] = (uint8_t)(int)((tu_frand(&rng) + 1.0f) * 127.9f);
    for (size_t i = 0; i < nb; i++) {
        const uint16_t h = tern_f32_to_f16(steps[i % 8] * (i % 3 ? 1.0f : -1.0f));
        memcpy(d + i * B, &h, 2);
    }
    return d;
}

/* ggml Q4_0 and Q8_0 in the packed affine form: every weight the same value as ggml's dequantization gives, codes
 * and f16 scales where the layout puts them; prompt and generated tokens take the int8 kernel over the packed copy
 * on SIMD paths (bit for bit the portable definition), ggml's block product on the portable one (bit for bit its
 * reference dot), and the two agree to the activations' quantization. */
static void test_qblock_form(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    static const tern_qblock types[] = {TERN_QB_Q4_0, TERN_QB_Q8_0};
    static const int64_t widths[] = {256, 224, 32}; /* even and odd numbers of blocks a row (a last pair half empty) */
    /* 37 rows: three blocks, one at a time; 677: 43, in the threads' runs of several blocks, where whole tiles of
     * tokens after the first (tokens 8-15 of 19) take two blocks a pass (tile_pair), a partial block among them */
    static const int64_t row_counts[] = {37, 677};
    for (int ti = 0; ti < 12; ti++) {
        const tern_qblock t = types[ti % 2];
        const int64_t rows = row_counts[ti / 6], in = widths[ti / 2 % 3], ng = in / 32, T = 19;
        uint8_t *data = random_qblock(t, rows, in);
        tern_weight w = {.fmt = TERN_WF_QBLOCK, .ndim = 2, .shape = {rows, in}, .data = data, .qblock = t,
                         .name = "w"};
        const tern_qpack_form f = tern_qpack_form_of(&w);
        assert_int_equal(f.bits, t == TERN_QB_Q4_0 ? 4 : 8);
        assert_int_equal(f.group, 32);
        assert_int_equal(f.sdtype, TERN_DT_F16);
        assert_int_equal(f.origin, TERN_QPACK_GGML32);
        tern_qpack *pk;
        TU_OK(tern_qpack_create(&w, NULL, &pk));
        assert_int_equal(pk->block_bytes, (size_t)(ng / 2) * (64 + 2 * tern_qpack_ggml_codes_bytes(f.bits)) +
                                              (size_t)(ng % 2) * (64 + tern_qpack_ggml_codes_bytes(f.bits)));
        uint8_t codes[256];
        float sb[16], deq[256];
        for (int64_t r = 0; r < rows; r++) {
            tern_qpack_row(&w, r, codes, sb, sb + ng);
            tern_qblock_dequantize(t, data + (size_t)r * tern_qblock_row_bytes(t, in), deq, in);
            for (int64_t k = 0; k < in; k++) {
                const float v = sb[k / 32] * (float)codes[k] + sb[ng + k / 32];
                if (v != deq[k])
                    fail_msg("%s row %lld col %lld: affine %.9g, ggml %.9g", tern_qblock_name(t), (long long)r,
                             (long long)k, v, deq[k]);
                /* No biases: each pair of groups is their scales' cache line, then their codes. */
                const uint8_t *blk = pk->data + (size_t)(r / 16) * pk->block_bytes;
                const uint8_t *gc = blk + tern_qpack_ggml_codes_at(f.bits, k / 32);
                const int64_t kk = k % 32, rr = r % 16;
                const uint8_t byte = f.bits == 8 ? gc[(kk / 4) * 64 + 4 * rr + kk % 4] : gc[(kk / 8) * 64 + 4 * rr + kk % 4];
                const unsigned q = f.bits == 8 ? byte : kk % 8 < 4 ? byte & 15u : (unsigned)byte >> 4;
                assert_int_equal(q, codes[k]);
                uint16_t hs;
                memcpy(&hs, blk + tern_qpack_ggml_scales_at(f.bits, k / 32) + 2 * rr, 2);
                assert_true(tern_f16_to_f32(hs) == sb[k / 32]);
            }
        }
        w.qpack = pk;
        float *x = malloc((size_t)(T * in) * sizeof *x), *y = malloc((size_t)(T * rows) * sizeof *y);
        float *want = malloc((size_t)(T * rows) * sizeof *want);
        for (int64_t i = 0; i < T * in; i++)
            x[i] = tu_frand(&rng) * (i % 89 == 0 ? 30.0f : 1.0f);
        /* ggml's dot on its own activation blocks. */
        uint8_t *a8 = malloc(tern_qblock_row_bytes(TERN_QB_Q8_0, in));
        for (int64_t tk = 0; tk < T; tk++) {
            tern_qblock_quantize_ref(TERN_QB_Q8_0, x + tk * in, a8, in);
            for (int64_t r = 0; r < rows; r++)
                want[tk * rows + r] = tern_qblock_dot_ref(t, in, data + (size_t)r * tern_qblock_row_bytes(t, in), a8);
        }
        /* The int8 kernel (on SIMD paths) with ggml's activation codes: bit for bit the portable definition, and
         * within float rounding of ggml's dot (the same integer dots, summed in another order). */
        float *yd = malloc((size_t)(T * rows) * sizeof *yd);
        TU_OK(tern_matmul_rows(pool, &w, 0, rows, x, T, yd, TERN_MM_DECODE) ? tern_errf(TERN_ENOMEM, "oom") : NULL);
        TU_OK(tern_matmul_rows(pool, &w, 0, rows, x, T, y, TERN_MM_PREFILL) ? tern_errf(TERN_ENOMEM, "oom") : NULL);
        float *ref = malloc((size_t)(T * rows) * sizeof *ref);
        tern_qact a;
        assert_true(tern_qact_alloc(&a, T, in, 32));
        a.ggml_steps = 1;
        for (int64_t n = 0; n < T * ng; n++) {
            tern_qblock_quantize_ref(TERN_QB_Q8_0, x + n * 32, a8, 32);
            tern_qact_set_q8_0(&a, tern_qact_unit(&a, n / ng, n % ng), a8);
        }
        tern_qmm_ref(&w, 0, rows, &a, ref);
        /* The SIMD quantizer of these activations gives the same bytes, here and on groups of zeros, of values
         * below f16's smallest step and beyond its range. */
        const tern_qmm_kernels *qk = tern_kernels()->qmm;
        if (qk) {
            tern_qact s;
            assert_true(tern_qact_alloc(&s, T, in, 32));
            float *xe = malloc((size_t)(T * in) * sizeof *xe);
            memcpy(xe, x, (size_t)(T * in) * sizeof *xe);
            for (int k = 0; k < 32; k++)
                xe[32 + k] = 0, xe[64 + k] = 1e-9f * (float)(k - 7), xe[96 + k] = 3e8f * (float)(k % 5 - 2);
            qk->fill_ggml(&s, xe, 0, T * ng);
            tern_qact e;
            assert_true(tern_qact_alloc(&e, T, in, 32));
            for (int64_t n = 0; n < T * ng; n++) {
                tern_qblock_quantize_ref(TERN_QB_Q8_0, xe + n * 32, a8, 32);
                tern_qact_set_q8_0(&e, tern_qact_unit(&e, n / ng, n % ng), a8);
            }
            assert_memory_equal(s.q, e.q, (size_t)(T * in));
            assert_memory_equal(s.xs, e.xs, (size_t)(T * ng) * sizeof(float));
            assert_memory_equal(s.xsum, e.xsum, (size_t)(T * ng) * sizeof(float));
            assert_memory_equal(s.isum, e.isum, (size_t)(T * ng) * sizeof(int32_t));
            tern_qact_free(&s);
            tern_qact_free(&e);
            free(xe);
        }
        for (int64_t i = 0; i < T * rows; i++) {
            const float exact_to = isa == TERN_ISA_PORTABLE ? want[i] : ref[i];
            for (int kind = 0; kind < 2; kind++)
                if (memcmp(kind ? &yd[i] : &y[i], &exact_to, sizeof *y))
                    fail_msg("%s %s %s token %lld row %lld: %.9g, %s %.9g", tern_isa_name(isa), tern_qblock_name(t),
                             kind ? "generated" : "prompt", (long long)(i / rows), (long long)(i % rows),
                             kind ? yd[i] : y[i], isa == TERN_ISA_PORTABLE ? "ggml" : "portable int8", exact_to);
            double mag = 1e-30;
            const int64_t tk = i / rows, r = i % rows;
            tern_qblock_dequantize(t, data + (size_t)r * tern_qblock_row_bytes(t, in), deq, in);
            for (int64_t k = 0; k < in; k++)
                mag += fabs((double)deq[k] * x[tk * in + k]);
            if (fabs(ref[i] - want[i]) > 1e-5 * mag)
                fail_msg("%s token %lld row %lld: int8 %.9g, ggml %.9g (sum |w x| %.3g)", tern_qblock_name(t),
                         (long long)tk, (long long)r, ref[i], want[i], mag);
        }
        tern_qact_free(&a);
        free(ref), free(a8), free(x), free(y), free(yd), free(want), free(data);
        tern_qpack_free(pk);
    }
    tern_pool_destroy(pool);
}

/* ggml Q4_K and Q6_K in their packed forms (qpack.h): every code, scale, min and step where the layout puts them;
 * prompt and generated tokens take the int8 kernel over the packed copy where the kernels take the form (bit for
 * bit tern_qmm_ref with ggml's Q8_K codes), ggml's block product elsewhere (bit for bit its reference dot), and
 * the two agree to float rounding: the same integers per super-block. Widths of one and of three super-blocks,
 * 11 tokens (a whole tile and a part). */
static void test_kquant_form(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    for (int ci = 0; ci < 4; ci++) {
        const tern_qblock t = ci % 2 ? TERN_QB_Q6_K : TERN_QB_Q4_K;
        const int q6 = t == TERN_QB_Q6_K, G = q6 ? 16 : 32;
        const int64_t rows = 37, in = ci < 2 ? 256 : 768, ns = in / 256, T = 11;
        const size_t rb = tern_qblock_row_bytes(t, in), bb = tern_qblock_bytes(t);
        uint8_t *data = malloc(rb * (size_t)rows);
        for (size_t i = 0; i < rb * (size_t)rows; i++)
            data[i] = (uint8_t)(int)((tu_frand(&rng) + 1.0f) * 127.9f);
        for (int64_t b = 0; b < rows * ns; b++) { /* steps of several sizes (Q4_K: d, dmin first; Q6_K: d last) */
            const uint16_t d = tern_f32_to_f16(0.001f * (float)(1 + b % 7)), dm = tern_f32_to_f16(0.0003f * (float)(b % 5));
            memcpy(data + (size_t)b * bb + (q6 ? 208 : 0), &d, 2);
            if (!q6)
                memcpy(data + (size_t)b * bb + 2, &dm, 2);
        }
        tern_weight w = {.fmt = TERN_WF_QBLOCK, .ndim = 2, .shape = {rows, in}, .data = data, .qblock = t, .name = "w"};
        const tern_qpack_form f = tern_qpack_form_of(&w);
        assert_int_equal(f.origin, q6 ? TERN_QPACK_Q6K : TERN_QPACK_Q4K);
        assert_int_equal(f.group, G);
        tern_qpack *pk;
        TU_OK(tern_qpack_create(&w, NULL, &pk));
        assert_int_equal(pk->block_bytes, (size_t)ns * (q6 ? TERN_QPACK_Q6K_BYTES : TERN_QPACK_Q4K_BYTES));
        uint8_t codes[768];
        float sb[96], deq[768];
        for (int64_t r = 0; r < rows; r++) {
            tern_qpack_row(&w, r, codes, sb, sb + in / G);
            tern_qblock_dequantize(t, data + (size_t)r * rb, deq, in);
            const uint8_t *blk = pk->data + (size_t)(r / 16) * pk->block_bytes;
            const int64_t rr = r % 16;
            for (int64_t k = 0; k < in; k++) {
                const float v = sb[k / G] * (float)codes[k] + sb[in / G + k / G];
                if (fabsf(v - deq[k]) > 1e-6f * fabsf(deq[k]) + 1e-9f)
                    fail_msg("%s row %lld col %lld: %.9g, ggml %.9g", tern_qblock_name(t), (long long)r, (long long)k,
                             (double)v, (double)deq[k]);
                const int64_t s = k / 256, j = k % 256 / G, kk = k % G;
                const uint8_t *row_blk = data + (size_t)r * rb + (size_t)s * bb;
                if (q6) { /* code 4r + k of its chunk: 6 bits at bit 6 (i % 8) of quadword i / 8's six bytes */
                    const uint8_t *chunk = blk + tern_qpack_q6k_codes_at(s, (int)j) + 48 * (size_t)(kk / 4);
                    const int i = (int)(4 * rr + kk % 4), bit = 6 * (i % 8);
                    const unsigned two = chunk[6 * (i / 8) + bit / 8] | (bit % 8 > 2 ? (unsigned)chunk[6 * (i / 8) + bit / 8 + 1] << 8 : 0u);
                    assert_int_equal(two >> (bit % 8) & 63u, codes[k]);
                    assert_int_equal(blk[tern_qpack_q6k_sc_at(s, (int)j) + (size_t)rr], row_blk[192 + j]);
                    assert_memory_equal(blk + (size_t)s * TERN_QPACK_Q6K_BYTES + 2 * rr, row_blk + 208, 2);
                } else {
                    const uint8_t byte = blk[tern_qpack_q4k_codes_at(s, (int)j) + (size_t)((kk / 8) * 64 + 4 * rr + kk % 4)];
                    assert_int_equal(kk % 8 < 4 ? byte & 15u : (unsigned)byte >> 4, codes[k]);
                    int sc, m;
                    tern_qblock_k4_scale(row_blk + 4, (int)j, &sc, &m);
                    assert_int_equal(blk[tern_qpack_q4k_sc_at(s, (int)j) + (size_t)rr], sc);
                    assert_int_equal(blk[tern_qpack_q4k_m_at(s, (int)j) + (size_t)rr], m);
                    assert_memory_equal(blk + (size_t)s * TERN_QPACK_Q4K_BYTES + 2 * rr, row_blk, 2);
                }
            }
        }
        w.qpack = pk;
        float *x = malloc((size_t)(T * in) * sizeof *x), *y = malloc((size_t)(T * rows) * sizeof *y);
        float *yd = malloc((size_t)(T * rows) * sizeof *yd), *ref = malloc((size_t)(T * rows) * sizeof *ref);
        float *want = malloc((size_t)(T * rows) * sizeof *want);
        for (int64_t i = 0; i < T * in; i++)
            x[i] = tu_frand(&rng) * (i % 89 == 0 ? 30.0f : 1.0f);
        uint8_t *a8 = malloc(tern_qblock_row_bytes(TERN_QB_Q8_K, in));
        tern_qact a;
        assert_true(tern_qact_alloc(&a, T, in, G));
        a.ggml_steps = 2;
        for (int64_t tk = 0; tk < T; tk++) {
            tern_qblock_quantize_ref(TERN_QB_Q8_K, x + tk * in, a8, in);
            for (int64_t r = 0; r < rows; r++)
                want[tk * rows + r] = tern_qblock_dot_ref(t, in, data + (size_t)r * rb, a8);
            for (int64_t s = 0; s < ns; s++)
                tern_qact_set_q8_k(&a, tk, s, a8 + (size_t)s * tern_qblock_bytes(TERN_QB_Q8_K));
        }
        tern_qmm_ref(&w, 0, rows, &a, ref);
        TU_OK(tern_matmul_rows(pool, &w, 0, rows, x, T, yd, TERN_MM_DECODE) ? tern_errf(TERN_ENOMEM, "oom") : NULL);
        TU_OK(tern_matmul_rows(pool, &w, 0, rows, x, T, y, TERN_MM_PREFILL) ? tern_errf(TERN_ENOMEM, "oom") : NULL);
        const tern_qmm_kernels *qk = tern_kernels()->qmm;
        const int packed_path = qk && tern_qmm_takes_form(qk, f);
        for (int64_t i = 0; i < T * rows; i++) {
            const float exact_to = packed_path ? ref[i] : want[i];
            for (int kind = 0; kind < 2; kind++)
                if (memcmp(kind ? &yd[i] : &y[i], &exact_to, sizeof *y))
                    fail_msg("%s %s %s token %lld row %lld: %.9g, %s %.9g", tern_isa_name(isa), tern_qblock_name(t),
                             kind ? "generated" : "prompt", (long long)(i / rows), (long long)(i % rows),
                             (double)(kind ? yd[i] : y[i]), packed_path ? "packed reference" : "ggml", (double)exact_to);
            double mag = 1e-30;
            tern_qblock_dequantize(t, data + (size_t)(i % rows) * rb, deq, in);
            for (int64_t k = 0; k < in; k++)
                mag += fabs((double)deq[k] * x[i / rows * in + k]);
            if (fabs(ref[i] - want[i]) > 1e-5 * mag)
                fail_msg("%s token %lld row %lld: packed %.9g, ggml %.9g (sum |w x| %.3g)", tern_qblock_name(t),
                         (long long)(i / rows), (long long)(i % rows), (double)ref[i], (double)want[i], mag);
        }
        tern_qact_free(&a);
        free(ref), free(a8), free(x), free(y), free(yd), free(want), free(data);
        tern_qpack_free(pk);
    }
    tern_pool_destroy(pool);
}

/* The slabs of a stacked weight, each over its own tokens (as a mixture's experts run), in the regions
 * tern_matmul_slabs makes of them — more than one region's worth of slabs, some reading one shared input, packed
 * and not — give each slab what tern_matmul_rows gives it alone, bit for bit. */
static void test_slabs(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    const int64_t E = 70, rows = 32, in = 128, Tmax = 5;
    qweight o = make_q(E * rows, in, 4, 32, TERN_DT_BF16);
    float *x = malloc(sizeof(float) * (size_t)(E * Tmax * in)), *y = malloc(sizeof(float) * (size_t)(E * Tmax * rows));
    float *want = malloc(sizeof(float) * (size_t)(Tmax * rows));
    for (int64_t i = 0; i < E * Tmax * in; i++)
        x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    tern_slab s[70];
    for (int64_t e = 0; e < E; e++) /* every third expert reads the first one's input */
        s[e] = (tern_slab){e * rows, e % 3 ? 1 + e % Tmax : 2, e % 3 ? x + e * Tmax * in : x, y + e * Tmax * rows,
                           (tern_mm_kind)(e % 2)};
    for (int packed = 0; packed < 2; packed++) {
        if (packed) {
            TU_OK(tern_qpack_create(&o.w, NULL, &o.pk));
            o.w.qpack = o.pk;
        }
        tern_isa_set(isa);
        assert_int_equal(tern_matmul_slabs(pool, &o.w, rows, s, (int)E), 0);
        for (int64_t e = 0; e < E; e++) {
            assert_int_equal(tern_matmul_rows(pool, &o.w, s[e].row0, rows, s[e].x, s[e].T, want, s[e].kind), 0);
            assert_memory_equal(s[e].y, want, sizeof(float) * (size_t)(s[e].T * rows));
        }
    }
    free(x), free(y), free(want);
    free_q(&o);
    tern_pool_destroy(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_reference_definition),
        TU_SIMD_TESTS(test_step_edges),
        TU_SIMD_TESTS(simd_matches_reference),
        TU_ISA_TESTS(test_qblock_form),
        TU_ISA_TESTS(test_kquant_form),
        TU_ISA_TESTS(test_slabs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
