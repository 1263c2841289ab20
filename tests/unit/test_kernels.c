/* test_kernels.c — every SIMD matmul path against a float64 reference over the same dequantized
 * weights: all stored formats, group sizes, odd widths and tails, token counts on both sides of
 * the GEMV/GEMM switch, expert row offsets. Paths that quantize activations (int8 VNNI, bf16) are
 * held to a bound relative to sum |w||x|; f32/f16 weights stay f32 end to end and must match tightly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/hash.h"
#include "core/threadpool.h"
#include "tensor/attention.h"
#include "tensor/checksum.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/quant_mlx.h"
#include "testutil.h"

typedef struct owned_weight {
    tern_weight w;
    void *data, *scales, *biases;
} owned_weight;

static uint64_t rng = 88172645463325252ull;

static owned_weight make_weight(tern_wformat fmt, int64_t rows, int64_t in, int bits, int group) {
    owned_weight o = {0};
    o.w.fmt = fmt;
    o.w.ndim = 2;
    o.w.shape[0] = rows;
    o.w.shape[1] = in;
    o.w.bits = bits;
    o.w.group = group;
    o.w.sdtype = TERN_DT_BF16;
    if (fmt == TERN_WF_MLX_AFFINE) {
        tu_mlx_weight(&o.w, rows, in, bits, group, TERN_DT_BF16, rng++, &o.data, &o.scales, &o.biases);
        return o;
    }
    size_t es = fmt == TERN_WF_F32 ? 4 : 2;
    o.data = malloc((size_t)(rows * in) * es);
    for (int64_t i = 0; i < rows * in; i++) {
        float v = tu_frand(&rng);
        if (fmt == TERN_WF_F32)
            ((float *)o.data)[i] = v;
        else if (fmt == TERN_WF_BF16)
            ((uint16_t *)o.data)[i] = tern_f32_to_bf16(v);
        else
            ((uint16_t *)o.data)[i] = tern_f32_to_f16(v);
    }
    o.w.data = o.data;
    return o;
}

static void free_weight(owned_weight *o) {
    free(o->data);
    free(o->scales);
    free(o->biases);
}

/* Runs one case on the active ISA; returns the worst error relative to the bound. */
static double run_case(tern_pool *pool, const owned_weight *o, int64_t row0, int64_t n_out, int64_t T,
                       tern_mm_kind kind, double rel_tol, const char *what) {
    const int64_t in = o->w.shape[1];
    float *x = malloc((size_t)(T * in) * sizeof *x), *y = malloc((size_t)(T * n_out) * sizeof *y);
    float *row = malloc((size_t)in * sizeof *row);
    for (int64_t i = 0; i < T * in; i++)
        x[i] = tu_frand(&rng) * 3.0f;
    tern_matmul_rows(pool, &o->w, row0, n_out, x, T, y, kind);
    double worst = 0;
    for (int64_t r = 0; r < n_out; r++) {
        tern_weight_row(&o->w, row0 + r, row);
        for (int64_t t = 0; t < T; t++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < in; k++) {
                ref += (double)row[k] * x[t * in + k];
                mag += fabs((double)row[k] * x[t * in + k]);
            }
            double err = fabs(y[t * n_out + r] - ref) / (rel_tol * mag + 1e-6);
            if (err > worst)
                worst = err;
            if (err > 1.0)
                fail_msg("%s isa=%s in=%lld rows=%lld+%lld T=%lld: y[%lld][%lld] = %.6g, reference %.6g (|w||x| %.3g)",
                         what, tern_isa_name(tern_isa_active()), (long long)in, (long long)row0, (long long)n_out,
                         (long long)T, (long long)t, (long long)r, y[t * n_out + r], ref, mag);
        }
    }
    free(x);
    free(y);
    free(row);
    return worst;
}

static void sweep(void **state, tern_wformat fmt, int bits, const int *groups, double rel_tol, const char *what) {
    const tern_isa isa = tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    static const int64_t ins[] = {32, 64, 96, 128, 192, 256, 384, 1536, 33, 100};
    static const int64_t Ts[] = {1, 2, 3, 4, 5, 8, 9, 13, 40};
    static const int64_t outs[] = {1, 7, 16, 33, 70};
    {
        tern_isa_set(isa);
        double worst = 0;
        for (const int *g = groups; *g; g++)
            for (size_t ii = 0; ii < sizeof ins / sizeof ins[0]; ii++) {
                int64_t in = ins[ii];
                if (fmt == TERN_WF_MLX_AFFINE && (in % *g || (in * bits) % 32))
                    continue;
                for (size_t oi = 0; oi < sizeof outs / sizeof outs[0]; oi++) {
                    /* A stacked weight: compute a slab starting at row 3 (as experts do). */
                    owned_weight o = make_weight(fmt, outs[oi] + 5, in, bits, *g);
                    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
                        for (int kind = 0; kind < 2; kind++)
                            worst = fmax(worst, run_case(pool, &o, 3, outs[oi], Ts[ti], (tern_mm_kind)kind, rel_tol, what));
                    free_weight(&o);
                }
            }
        print_message("%s on %s: worst error %.3f of the bound\n", what, tern_isa_name(isa), worst);
    }
    tern_pool_destroy(pool);
}

static const int no_group[] = {1, 0};
static const int groups[] = {32, 64, 128, 0};

static void test_f32(void **state) { sweep(state, TERN_WF_F32, 0, no_group, 1e-5, "f32"); }
static void test_f16(void **state) { sweep(state, TERN_WF_F16, 0, no_group, 1e-5, "f16"); }
/* bf16 activations: each product carries a relative error up to 2^-8 (both operands rounded). */
static void test_bf16(void **state) { sweep(state, TERN_WF_BF16, 0, no_group, 8e-3, "bf16"); }
/* int8 activations in blocks of 32: relative error per element up to 1/254 of the block's max. */
static void test_q4(void **state) { sweep(state, TERN_WF_MLX_AFFINE, 4, groups, 2e-2, "q4"); }
static void test_q8(void **state) { sweep(state, TERN_WF_MLX_AFFINE, 8, groups, 2e-2, "q8"); }

/* The vectorised gelu_tanh and soft-cap against libm over a wide range, on every path. */
static void test_activations(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const int64_t n = 20001;
    float *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g), *c = malloc((size_t)n * sizeof *c);
    {
        tern_isa_set(isa);
        for (int64_t i = 0; i < n; i++)
            x[i] = g[i] = c[i] = (float)(i - n / 2) * 0.003f; /* -30 .. 30 */
        tern_gelu_tanh(g, n);
        tern_softcap(c, n, 30.0f);
        for (int64_t i = 0; i < n; i++) {
            double v = x[i], gr = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
            if (fabs(g[i] - gr) > 2e-6 * (1 + fabs(gr)) || fabs(c[i] - 30 * tanh(v / 30)) > 1e-5) /* a few ulp of values up to 30 */
                fail_msg("%s: x=%g gelu %g (want %g) softcap %g (want %g)", tern_isa_name(isa), v, g[i], gr, c[i],
                         30 * tanh(v / 30));
        }
    }
    free(x);
    free(g);
    free(c);
}

/* e^x in place against libm from -87 to 88 (lengths with tails), and exactly 0 below -87, for -inf and NaN. */
static void test_exp(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const int64_t n = 17501; /* -87 .. 88 in steps of 0.01, odd so every path has a tail */
    float *x = malloc((size_t)n * sizeof *x);
    {
        tern_isa_set(isa);
        for (int64_t i = 0; i < n; i++)
            x[i] = -87.0f + 0.01f * (float)i;
        tern_exp(x, n);
        for (int64_t i = 0; i < n; i++) {
            const double want = exp((double)(-87.0f + 0.01f * (float)i));
            if (fabs(x[i] - want) > 3e-7 * want)
                fail_msg("%s: exp(%g) = %g, want %g", tern_isa_name(isa), -87.0f + 0.01f * (float)i, x[i], want);
        }
        float odd[5] = {-87.5f, -1000.0f, -INFINITY, NAN, 0.0f};
        tern_exp(odd, 5);
        for (int i = 0; i < 4; i++)
            if (odd[i] != 0.0f)
                fail_msg("%s: exp of case %d = %g, want 0", tern_isa_name(isa), i, odd[i]);
        assert_true(odd[4] == 1.0f);
    }
    free(x);
}

/* The activation-by-activation product on every path against double: shapes around the register tiles (rows
 * 1..9, columns around 8/16/32, short and long sums), leading dimensions wider than the rows. */
static void test_sgemm(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const int64_t Ms[] = {1, 3, 4, 5, 8, 9, 33}, Ns[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 70},
                         Ks[] = {1, 5, 64, 300};
    uint64_t rng = 99;
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
                const int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki], lda = K + 3, ldb = N + 5, ldc = N + 2;
                float *A = malloc((size_t)(M * lda) * sizeof *A), *B = malloc((size_t)(K * ldb) * sizeof *B);
                float *C = malloc((size_t)(M * ldc) * sizeof *C);
                for (int64_t i = 0; i < M * lda; i++)
                    A[i] = tu_frand(&rng);
                for (int64_t i = 0; i < K * ldb; i++)
                    B[i] = tu_frand(&rng);
                for (int64_t i = 0; i < M * ldc; i++)
                    C[i] = 12345.0f; /* what lies between rows stays */
                tern_sgemm(M, N, K, A, lda, B, ldb, C, ldc);
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < ldc; j++) {
                        double want = 0;
                        for (int64_t k = 0; k < K; k++)
                            want += (double)A[i * lda + k] * B[k * ldb + j];
                        if (j >= N ? C[i * ldc + j] != 12345.0f : fabs(C[i * ldc + j] - want) > 1e-5 * (1 + sqrt((double)K)))
                            fail_msg("%s %lldx%lldx%lld: C[%lld][%lld] = %g, want %g", tern_isa_name(isa), (long long)M,
                                     (long long)N, (long long)K, (long long)i, (long long)j, C[i * ldc + j],
                                     j >= N ? 12345.0 : want);
                    }
                free(A);
                free(B);
                free(C);
            }
}

/* The bf16 product on every path against double over the same bf16 values: the shapes of test_sgemm (even sums),
 * B packed by pairs of rows, leading dimensions wider than the rows. */
static void test_bgemm(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const int64_t Ms[] = {1, 3, 8, 9, 33}, Ns[] = {1, 15, 16, 17, 32, 33, 64, 70}, Ks[] = {2, 6, 64, 300};
    uint64_t rng = 7;
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
                const int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki], lda = K + 4, ldb = N + 5, ldc = N + 2;
                uint16_t *A = malloc((size_t)(M * lda) * sizeof *A), *B = malloc((size_t)(K * N) * sizeof *B);
                uint32_t *Bp = malloc((size_t)(K / 2 * ldb) * sizeof *Bp);
                float *C = malloc((size_t)(M * ldc) * sizeof *C);
                for (int64_t i = 0; i < M * lda; i++)
                    A[i] = tern_f32_to_bf16(tu_frand(&rng));
                for (int64_t i = 0; i < K * N; i++)
                    B[i] = tern_f32_to_bf16(tu_frand(&rng));
                for (int64_t k = 0; k < K; k += 2)
                    for (int64_t j = 0; j < N; j++)
                        Bp[k / 2 * ldb + j] = B[k * N + j] | (uint32_t)B[(k + 1) * N + j] << 16;
                for (int64_t i = 0; i < M * ldc; i++)
                    C[i] = 12345.0f;
                tern_bgemm(M, N, K, A, lda, Bp, ldb, C, ldc);
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < ldc; j++) {
                        double want = 0;
                        for (int64_t k = 0; k < K && j < N; k++)
                            want += (double)tern_bf16_to_f32(A[i * lda + k]) * tern_bf16_to_f32(B[k * N + j]);
                        if (j >= N ? C[i * ldc + j] != 12345.0f : fabs(C[i * ldc + j] - want) > 1e-5 * (1 + sqrt((double)K)))
                            fail_msg("%s %lldx%lldx%lld: C[%lld][%lld] = %g, want %g", tern_isa_name(isa), (long long)M,
                                     (long long)N, (long long)K, (long long)i, (long long)j, C[i * ldc + j],
                                     j >= N ? 12345.0 : want);
                    }
                free(A);
                free(B);
                free(Bp);
                free(C);
            }
}

/* The path's bf16 rounding against the scalar one, bit for bit: ties both ways, the largest floats, infinities,
 * NaNs (kept quiet), lengths around the vectors; subnormals may read as zero. */
static void test_to_bf16(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                                       0xff800000u, 0x7fc00001u, 0x7f800001u, 0x80000000u, 0x00000000u};
    uint64_t rng = 3;
    for (int64_t n = 0; n < 70; n++) {
        float x[70];
        uint16_t y[71], want;
        for (int64_t i = 0; i < n; i++) {
            x[i] = tu_frand(&rng) * 1000.0f;
            if (i < (int64_t)(sizeof special / sizeof *special))
                memcpy(&x[i], &special[(i + n) % (sizeof special / sizeof *special)], sizeof(float));
        }
        y[n] = 0xabcd;
        tern_to_bf16(x, y, n);
        assert_int_equal(y[n], 0xabcd);
        for (int64_t i = 0; i < n; i++)
            if (y[i] != (want = tern_f32_to_bf16(x[i])))
                fail_msg("%s n=%lld: %a -> %04x, want %04x", tern_isa_name(isa), (long long)n, (double)x[i], y[i],
                         want);
    }
    float sub = 1e-39f;
    uint16_t ys;
    tern_to_bf16(&sub, &ys, 1);
    assert_true(ys == tern_f32_to_bf16(sub) || ys == 0);
}

/* The path's softmax against double on rows of several lengths (tails) and spreads, one very large value, and
 * all equal. */
static void test_softmax_fast(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const int64_t ns[] = {1, 7, 8, 9, 16, 17, 100, 2304};
    uint64_t rng = 7;
    float *x = malloc(2304 * sizeof *x), *x0 = malloc(2304 * sizeof *x0);
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        for (int spread = 0; spread < 3; spread++) {
            const int64_t n = ns[k];
            for (int64_t i = 0; i < n; i++)
                x[i] = x0[i] = spread == 2 ? 3.0f : tu_frand(&rng) * (spread ? 40.0f : 2.0f);
            if (n > 1 && spread == 1)
                x[n / 2] = x0[n / 2] = 500.0f;
            tern_softmax_fast(x, n);
            double m = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; i++)
                m = fmax(m, x0[i]);
            for (int64_t i = 0; i < n; i++)
                sum += exp((double)x0[i] - m);
            for (int64_t i = 0; i < n; i++) {
                const double want = exp((double)x0[i] - m) / sum;
                if (fabs(x[i] - want) > 1e-6 * want + 1e-30)
                    fail_msg("%s n %lld spread %d: p[%lld] = %g, want %g", tern_isa_name(isa), (long long)n, spread,
                             (long long)i, x[i], want);
            }
        }
    free(x);
    free(x0);
}

/* silu(g) * u against double from -100 to 100 (lengths with tails), 0 far below; and bit for bit the steps its
 * contract names (the path's own exp of min(-g, 88), then the division and product as C rounds them), also at
 * the edges: NaN, infinities, signed zeros, the clamps' ends. */
static void test_silu_mul(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const int64_t n = 20001;
    float *g = malloc((size_t)n * sizeof *g), *u = malloc((size_t)n * sizeof *u), *g0 = malloc((size_t)n * sizeof *g0);
    tern_isa_set(isa);
    for (int64_t i = 0; i < n; i++) {
        g[i] = (float)(i - n / 2) * 0.01f;
        u[i] = 1.0f + (float)(i % 7) * 0.25f;
    }
    const float edges[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.0f, -88.0f, 87.0f, -87.0f, 86.99f, -87.01f,
                           1e-40f, -1e-40f, 3e38f, -3e38f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        g[i * 997] = edges[i];
    memcpy(g0, g, (size_t)n * sizeof *g);
    tern_silu_mul(g, u, n);
    for (int64_t i = 0; i < n; i++) {
        float t = -g0[i] < 88.0f ? -g0[i] : 88.0f;
        tern_exp(&t, 1);
        const float steps = g0[i] / (1.0f + t) * u[i];
        if (memcmp(&steps, &g[i], sizeof steps))
            fail_msg("%s: silu(%.9g) * %g = %.9g, its steps %.9g", tern_isa_name(isa), g0[i], u[i], g[i], steps);
        const double x = g0[i], want = x / (1 + exp(-x)) * u[i];
        if (i % 997 && fabs(g[i] - want) > 1e-6 * (1 + fabs(want)))
            fail_msg("%s: silu(%g) * u = %g, want %g", tern_isa_name(isa), x, g[i], want);
    }
    free(g);
    free(u);
    free(g0);
}

/* The attention merge's rescaled sum y = y * a + x * b, SIMD kernels against double on widths around the vector
 * lengths (tails of 1..15). */
static void test_axpby(void **state) {
    static const int64_t ns[] = {1, 7, 8, 9, 15, 16, 17, 31, 100};
    float y[100], x[100], y0[100];
    const int isa = tu_isa_begin(state) >= TERN_ISA_AVX512;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            const int64_t n = ns[k];
            for (int64_t i = 0; i < 100; i++) {
                y[i] = y0[i] = tu_frand(&rng);
                x[i] = tu_frand(&rng);
            }
            (isa ? tern_axpby_avx512 : tern_axpby_avx2)(y, x, n, 0.75f, 1.25f);
            for (int64_t i = 0; i < 100; i++) {
                const double want = i < n ? (double)y0[i] * 0.75 + (double)x[i] * 1.25 : y0[i];
                if (fabs(y[i] - want) > 1e-6)
                    fail_msg("%s n %lld: y[%lld] %g, want %g", isa ? "avx512" : "avx2", (long long)n, (long long)i,
                             y[i], want);
            }
        }
}

/* ggml's table gelu times u on a SIMD path against the portable one, bit for bit: every f16 value's neighbourhood
 * (each f16 value and the floats just around it, its rounding's edges), the ends at +-10, widths off the vector. */
static void test_gelu_f16_table(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const int64_t n = 3 * 65536 + 13;
    float *g = malloc((size_t)n * sizeof *g), *u = malloc((size_t)n * sizeof *u);
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = (uint16_t)(i / 3);
        const float v = (h & 0x7c00) == 0x7c00 ? 10.0f : tern_f16_to_f32(h); /* no NaN: its code is the path's */
        g[i] = i % 3 == 0 ? v : nextafterf(v, i % 3 == 1 ? -INFINITY : INFINITY);
        u[i] = 1.0f + tu_frand(&rng);
    }
    g[5] = -10.0f, g[6] = nextafterf(-10.0f, 0.0f), g[7] = 10.0f, g[8] = nextafterf(10.0f, 0.0f), g[9] = 1e30f;
    for (int64_t len = n; len > n - 17; len -= 5) {
        memcpy(want, g, (size_t)n * sizeof *g);
        memcpy(got, g, (size_t)n * sizeof *g);
        tern_isa_set(TERN_ISA_PORTABLE);
        tern_gelu_tanh_mul_f16(want, u, len);
        tern_isa_set(isa);
        tern_gelu_tanh_mul_f16(got, u, len);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&want[i], &got[i], sizeof *got))
                fail_msg("%s, %lld values: gelu_f16(%.9g) * %g = %.9g, portable %.9g", tern_isa_name(isa),
                         (long long)len, g[i], u[i], got[i], want[i]);
    }
    free(g), free(u), free(want), free(got);
}

/* gelu(g) * u in one pass, rmsnorm (odd widths, with and without weight) against double references on every
 * path; RoPE in two steps (shared angles) against double, zero frequencies left alone. */
static void test_norm_gelu_mul_rope(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const int64_t n = 1001;
    float *g = malloc((size_t)n * sizeof *g), *u = malloc((size_t)n * sizeof *u), *y = malloc((size_t)n * sizeof *y);
    float *w = malloc((size_t)n * sizeof *w);
    {
        tern_isa_set(isa);
        for (int64_t i = 0; i < n; i++) {
            g[i] = tu_frand(&rng) * 8;
            u[i] = tu_frand(&rng) * 3;
            w[i] = 1 + tu_frand(&rng);
        }
        memcpy(y, g, (size_t)n * sizeof *y);
        tern_gelu_tanh_mul(y, u, n);
        for (int64_t i = 0; i < n; i++) {
            double v = g[i], want = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))) * u[i];
            if (fabs(y[i] - want) > 4e-6 * (1 + fabs(want)))
                fail_msg("%s: gelu(%g) * %g = %g, want %g", tern_isa_name(isa), v, u[i], y[i], want);
        }
        static const int64_t widths[] = {1, 15, 16, 17, 256, 1001};
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int weighted = 0; weighted < 2; weighted++) {
                const int64_t m = widths[wi];
                tern_rmsnorm(g, weighted ? w : NULL, m, 1e-6f, y);
                double ss = 0;
                for (int64_t i = 0; i < m; i++)
                    ss += (double)g[i] * g[i];
                const double r = 1 / sqrt(ss / (double)m + 1e-6);
                for (int64_t i = 0; i < m; i++) {
                    const double want = g[i] * r * (weighted ? w[i] : 1);
                    if (fabs(y[i] - want) > 1e-6 * (1 + fabs(want)))
                        fail_msg("%s: rmsnorm width %lld [%lld] = %g, want %g", tern_isa_name(isa), (long long)m,
                                 (long long)i, y[i], want);
                }
            }
    }
    /* RoPE over head dims with and without vector tails (2 .. 512), every path. */
    static const int dims[] = {2, 34, 64, 96, 256, 512};
    float inv[256], cs[256], sn[256], a[512], b[512];
    {
        tern_isa_set(isa);
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int dim = dims[di], half = dim / 2;
            for (int i = 0; i < half; i++)
                inv[i] = i % 5 == 4 ? 0.0f : powf(10000.0f, -(float)i / (float)half);
            for (int64_t pos = 0; pos < 5000; pos += 333) {
                for (int i = 0; i < dim; i++)
                    a[i] = b[i] = tu_frand(&rng);
                tern_rope_angles(dim, inv, pos, cs, sn);
                tern_rope_apply(b, dim, inv, cs, sn);
                for (int i = 0; i < half; i++) {
                    const double t = (double)pos * inv[i], c = cos(t), s = sin(t);
                    const double w0 = inv[i] == 0 ? a[i] : a[i] * c - a[i + half] * s;
                    const double w1 = inv[i] == 0 ? a[i + half] : a[i + half] * c + a[i] * s;
                    if (fabs(b[i] - w0) > 1e-6 || fabs(b[i + half] - w1) > 1e-6 ||
                        (inv[i] == 0 && (b[i] != a[i] || b[i + half] != a[i + half])))
                        fail_msg("%s: rope dim %d pos %lld pair %d: (%g, %g), want (%g, %g)", tern_isa_name(isa), dim,
                                 (long long)pos, i, b[i], b[i + half], w0, w1);
                }
            }
        }
    }
    free(g);
    free(u);
    free(y);
    free(w);
}

/* softmax(q K^T) V of every head in float64 from the stored (bf16-rounded) values, into ref [n_heads][head_dim]. */
static void attn_ref(const tern_attn_args *a, const float *kf, const float *vf, double *ref) {
    const int64_t hd = a->head_dim, row = a->kv_heads * hd, n = a->end - a->start + 1;
    double *s = malloc((size_t)n * sizeof *s);
    for (int64_t h = 0; h < a->n_heads; h++) {
        const int64_t off = (h / (a->n_heads / a->kv_heads)) * hd;
        double m = -INFINITY, den = 0;
        for (int64_t p = a->start; p <= a->end; p++) {
            double dot = 0;
            for (int64_t i = 0; i < hd; i++)
                dot += (double)a->q[h * hd + i] * kf[(p % a->slots) * row + off + i];
            s[p - a->start] = dot;
            m = dot > m ? dot : m;
        }
        for (int64_t d = 0; d < hd; d++)
            ref[h * hd + d] = 0;
        for (int64_t p = a->start; p <= a->end; p++) {
            const double e = exp(s[p - a->start] - m);
            for (int64_t d = 0; d < hd; d++)
                ref[h * hd + d] += e * vf[(p % a->slots) * row + off + d];
            den += e;
        }
        for (int64_t d = 0; d < hd; d++)
            ref[h * hd + d] /= den;
    }
    free(s);
}

/* Attention on every ISA: against float64, and against the portable path; head dims 32..512 (tails after the
 * 64-, 48- and 32-wide V passes), 1..16 query heads per KV head, caches of every KV type (block types where
 * head_dim is a multiple of their 32-value block; K and V of different types too), runs that wrap around the ring
 * and span several chunks. The query heads computed in shares (slices), and the two spans of a run computed
 * apart and then finished (as threads split a lone token), must give the whole result bit for bit. */
static void test_attention(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const int64_t hds[] = {32, 48, 64, 128, 256, 512};
    static const int64_t groups[] = {1, 2, 3, 4, 8, 16};
    static const int64_t runs[][2] = {{0, 0}, {0, 23}, {10, 33}, {37, 52}, {100, 390}, {250, 520}, {127, 128}, {5, 299}};
    static const tern_kv_type types[][2] = {{TERN_KV_BF16, TERN_KV_BF16}, {TERN_KV_F32, TERN_KV_F32},
                                            {TERN_KV_F16, TERN_KV_F16},   {TERN_KV_Q8_0, TERN_KV_Q8_0},
                                            {TERN_KV_Q4_0, TERN_KV_Q4_0}, {TERN_KV_Q8_0, TERN_KV_Q4_0},
                                            {TERN_KV_BF16, TERN_KV_Q8_0}};
    const int64_t slots = 300;
    for (size_t hi = 0; hi < 6; hi++)
        for (size_t gi = 0; gi < 6; gi++)
            for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
                const tern_kv_type kt = types[ti][0], vt = types[ti][1];
                if (hds[hi] % tern_kv_type_block(kt) || hds[hi] % tern_kv_type_block(vt))
                    continue;
                char tname[16];
                snprintf(tname, sizeof tname, "%s/%s", tern_kv_type_name(kt), tern_kv_type_name(vt));
                const int64_t hd = hds[hi], kvh = 2, nH = kvh * groups[gi], row = kvh * hd;
                const int64_t pf = tern_attn_part_floats(nH, hd);
                float *q = malloc((size_t)(nH * hd) * sizeof *q), *o1 = malloc((size_t)(nH * hd) * sizeof *o1);
                float *o2 = malloc((size_t)(nH * hd) * sizeof *o2), *sc = malloc((size_t)(nH * TERN_ATTN_CHUNK) * sizeof *sc);
                float *part = malloc((size_t)(3 * pf) * sizeof *part), *o3 = malloc((size_t)(nH * hd) * sizeof *o3);
                float *sp = malloc((size_t)(2 * pf) * sizeof *sp);
                float *kf = malloc((size_t)(slots * row) * sizeof *kf), *vf = malloc((size_t)(slots * row) * sizeof *vf);
                void *k = malloc((size_t)(slots * row) * 4), *v = malloc((size_t)(slots * row) * 4);
                double *ref = malloc((size_t)(nH * hd) * sizeof *ref);
                for (int64_t i = 0; i < nH * hd; i++)
                    q[i] = tu_frand(&rng) * 0.5f;
                /* Stored as the cache stores a position, then read back: the values every path must see. */
                for (int64_t i = 0; i < slots * row; i++) {
                    kf[i] = tu_frand(&rng);
                    vf[i] = tu_frand(&rng);
                }
                tern_kv_type_store(kt, kf, k, slots * row);
                tern_kv_type_store(vt, vf, v, slots * row);
                tern_kv_type_load(kt, k, kf, slots * row);
                tern_kv_type_load(vt, v, vf, slots * row);
                for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
                    tern_attn_args a = {.q = q, .n_heads = nH, .kv_heads = kvh, .head_dim = hd, .k = k, .v = v,
                                        .k_type = kt, .v_type = vt, .slots = slots, .start = runs[r][0],
                                        .end = runs[r][1], .scores = sc, .part = part, .out = o1};
                    tern_isa_set(TERN_ISA_PORTABLE);
                    tern_attend(&a);
                    attn_ref(&a, kf, vf, ref);
                    for (int64_t i = 0; i < nH * hd; i++)
                        if (fabs(o1[i] - ref[i]) > 2e-5)
                            fail_msg("portable hd %lld group %lld run %zu: out[%lld] %g vs float64 %g", (long long)hd,
                                     (long long)groups[gi], r, (long long)i, o1[i], ref[i]);
                    a.out = o2;
                    {
                        tern_isa_set(isa);
                        tern_attend(&a);
                        for (int64_t i = 0; i < nH * hd; i++)
                            if (fabsf(o1[i] - o2[i]) > 1e-5f)
                                fail_msg("%s hd %lld group %lld %s run %zu: out[%lld] %g vs portable %g",
                                         tern_isa_name(isa), (long long)hd, (long long)groups[gi], tname,
                                         r, (long long)i, o2[i], o1[i]);
                        /* The split: each share of every KV head's query heads on its own, into a poisoned output. */
                        for (int64_t S = 2; S <= groups[gi]; S *= 2) {
                            if (groups[gi] % S)
                                continue;
                            for (int64_t i = 0; i < nH * hd; i++)
                                o3[i] = NAN;
                            tern_attn_args sa = a;
                            sa.out = o3;
                            sa.slices = S;
                            for (sa.slice = S - 1; sa.slice >= 0; sa.slice--)
                                tern_attend(&sa);
                            if (memcmp(o3, o2, (size_t)(nH * hd) * sizeof *o3))
                                fail_msg("%s hd %lld group %lld run %zu: %lld slices differ from the whole", tern_isa_name(isa),
                                         (long long)hd, (long long)groups[gi], r, (long long)S);
                        }
                        /* The spans apart (the second first), each in the two halves of the heads when they split. */
                        const int64_t n = tern_attn_spans(&a), S = groups[gi] % 2 ? 1 : 2;
                        assert_int_equal(n, runs[r][1] / TERN_ATTN_CHUNK > runs[r][0] / TERN_ATTN_CHUNK ? 2 : 1);
                        for (int64_t i = 0; i < nH * hd; i++)
                            o3[i] = NAN;
                        tern_attn_args sa = a;
                        sa.out = o3;
                        sa.slices = S;
                        for (int64_t span = n - 1; span >= 0; span--)
                            for (sa.slice = 0; sa.slice < S; sa.slice++)
                                tern_attend_span(&sa, span, sp + span * pf);
                        float *pt[2] = {sp, sp + pf};
                        sa.slices = 1;
                        sa.slice = 0;
                        tern_attn_finish(&sa, pt, n);
                        if (memcmp(o3, o2, (size_t)(nH * hd) * sizeof *o3))
                            fail_msg("%s hd %lld group %lld run %zu: spans computed apart differ from the whole",
                                     tern_isa_name(isa), (long long)hd, (long long)groups[gi], r);
                    }
                }
                free(q);
                free(o1);
                free(o2);
                free(o3);
                free(sc);
                free(part);
                free(sp);
                free(kf);
                free(vf);
                free(ref);
                free(k);
                free(v);
            }
}

/* A weight of one stored format and width, as the cross-path tests sweep them. */
typedef struct weight_case {
    tern_wformat fmt;
    int bits, group;
    int64_t in;
} weight_case;

/* A token's output must not depend on the other tokens of its batch (the engine's "batched == solo"):
 * Y over T tokens equals T single-token products bit for bit, for every format, path and kind. */
static void test_batch_independence(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    static const weight_case cases[] = {{TERN_WF_F32, 0, 1, 96},      {TERN_WF_F16, 0, 1, 1536},   {TERN_WF_BF16, 0, 1, 100},
                 {TERN_WF_BF16, 0, 1, 1536},   {TERN_WF_MLX_AFFINE, 4, 64, 1536}, {TERN_WF_MLX_AFFINE, 8, 32, 256},
                 {TERN_WF_MLX_AFFINE, 4, 32, 96}, {TERN_WF_MLX_AFFINE, 8, 128, 384}};
    {
        tern_isa_set(isa);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t in = cases[c].in, rows = 37, T = 40;
            owned_weight o = make_weight(cases[c].fmt, rows, in, cases[c].bits, cases[c].group);
            float *x = malloc((size_t)(T * in) * sizeof *x), *y = malloc((size_t)(T * rows) * sizeof *y);
            float *y1 = malloc((size_t)rows * sizeof *y1);
            for (int64_t i = 0; i < T * in; i++)
                x[i] = tu_frand(&rng);
            static const int64_t Ts[] = {2, 9, 40};
            for (int kind = 0; kind < 2; kind++)
                for (int ti = 0; ti < 3; ti++) {
                    tern_matmul_rows(pool, &o.w, 0, rows, x, Ts[ti], y, (tern_mm_kind)kind);
                    for (int64_t t = 0; t < Ts[ti]; t++) {
                        tern_matmul_rows(pool, &o.w, 0, rows, x + t * in, 1, y1, (tern_mm_kind)kind);
                        if (memcmp(y1, y + t * rows, (size_t)rows * sizeof *y1))
                            fail_msg("%s case %zu kind %d: token %lld of %lld differs from the same token alone",
                                     tern_isa_name(isa), c, kind, (long long)t, (long long)Ts[ti]);
                    }
                }
            free(x);
            free(y);
            free(y1);
            free_weight(&o);
        }
    }
    tern_pool_destroy(pool);
}

/* The gated MLP's product: gelu_tanh(x) * mul or silu(x) * mul formed by the product's input pass gives bit for bit
 * what the separate element-wise pass and the plain product give, and leaves the same activation in x. */
static void test_gated_group(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    static const weight_case cases[] = {
        {TERN_WF_MLX_AFFINE, 4, 64, 1536}, {TERN_WF_MLX_AFFINE, 8, 32, 96}, {TERN_WF_BF16, 0, 1, 100}};
    {
        tern_isa_set(isa);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t in = cases[c].in, rows[2] = {40, 19}, Tmax = 40;
            owned_weight o[2];
            for (int i = 0; i < 2; i++)
                o[i] = make_weight(cases[c].fmt, rows[i], in, cases[c].bits, cases[c].group);
            const tern_weight *ws[2] = {&o[0].w, &o[1].w};
            const size_t xb = (size_t)(Tmax * in) * sizeof(float), yb = (size_t)(Tmax * 40) * sizeof(float);
            float *x = malloc(xb), *mul = malloc(xb), *xe = malloc(xb), *xa = malloc(xb);
            float *ye[2] = {malloc(yb), malloc(yb)}, *ya[2] = {malloc(yb), malloc(yb)};
            for (int64_t i = 0; i < Tmax * in; i++) {
                x[i] = 3 * tu_frand(&rng);
                mul[i] = tu_frand(&rng);
            }
            static const int64_t Ts[] = {1, 5, 40};
            static const tern_gate_fn gates[] = {tern_gelu_tanh_mul, tern_silu_mul};
            for (int ti = 0; ti < 6; ti++) {
                const int64_t T = Ts[ti % 3];
                const tern_gate_fn gate = gates[ti / 3];
                const tern_mm_kind kind = T > 1 ? TERN_MM_PREFILL : TERN_MM_DECODE;
                memcpy(xe, x, xb);
                memcpy(xa, x, xb);
                gate(xe, mul, T * in);
                tern_matmul_group(pool, ws, 2, xe, T, ye, kind, NULL, 0);
                tern_matmul_gated_group(pool, ws, 2, xa, mul, gate, T, ya, kind, NULL, 0);
                if (memcmp(xa, xe, (size_t)(T * in) * sizeof *xa))
                    fail_msg("%s case %zu T %lld gate %d: the gated input differs", tern_isa_name(isa), c,
                             (long long)T, ti / 3);
                for (int i = 0; i < 2; i++)
                    if (memcmp(ya[i], ye[i], (size_t)(T * rows[i]) * sizeof(float)))
                        fail_msg("%s case %zu T %lld gate %d: product %d differs from the unfused one",
                                 tern_isa_name(isa), c, (long long)T, ti / 3, i);
            }
            free(x);
            free(mul);
            free(xe);
            free(xa);
            for (int i = 0; i < 2; i++) {
                free(ye[i]);
                free(ya[i]);
                free_weight(&o[i]);
            }
        }
    }
    tern_pool_destroy(pool);
}

/* A product whose scratch memory cannot be had reports -1 instead of leaving its output stale, on every path (an
 * MLX q4 weight 2^56 inputs wide: the activations' buffer, or the portable path's row, cannot be allocated; the
 * weight's data is never read). */
static void test_scratch_failure_reported(void **state) {
    tu_isa_begin(state);
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    tern_weight w = {.fmt = TERN_WF_MLX_AFFINE, .ndim = 2, .shape = {16, (int64_t)1 << 56}, .sdtype = TERN_DT_BF16,
                     .bits = 4, .group = 64, .name = "huge"};
    float x[4] = {0}, y[16];
    const tern_weight *ws[1] = {&w};
    float *ys[1] = {y};
    assert_int_equal(tern_matmul(pool, &w, x, 1, y, TERN_MM_DECODE), -1);
    assert_int_equal(tern_matmul_group(pool, ws, 1, x, 1, ys, TERN_MM_PREFILL, NULL, 0), -1);
    tern_pool_destroy(pool);
}

/* The checksum's block kernel against the portable one (random data, lanes and block numbers, lengths with
 * partial blocks), and what it is for: one flipped bit, two swapped blocks, a zeroed block each change it. */
static void test_checksum(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const size_t cap = 128 * 41 + 77;
    uint8_t *b = malloc(cap);
    uint64_t rng = 7;
    for (size_t i = 0; i < cap; i++)
        b[i] = (uint8_t)tern_splitmix64(&rng);
    for (size_t blocks = 0; blocks <= 41; blocks += 5) {
        uint64_t want[16], got[16];
        for (int j = 0; j < 16; j++)
            want[j] = got[j] = tern_splitmix64(&rng);
        const uint64_t first = tern_splitmix64(&rng) >> (blocks % 3 ? 0 : 40);
        tern_kernels_portable.checksum_blocks(want, b + blocks, blocks, first);
        tern_kernels()->checksum_blocks(got, b + blocks, blocks, first);
        if (memcmp(want, got, sizeof want))
            fail_msg("%s: %zu blocks from %llu differ from the portable kernel", tern_isa_name(isa), blocks,
                     (unsigned long long)first);
    }
    tern_isa_set(TERN_ISA_PORTABLE);
    uint64_t ref[6];
    for (int k = 0; k < 6; k++)
        ref[k] = tern_checksum(b, cap - (size_t)k * 33, 11);
    tern_isa_set(isa);
    for (int k = 0; k < 6; k++)
        assert_true(tern_checksum(b, cap - (size_t)k * 33, 11) == ref[k]);
    const uint64_t h = tern_checksum(b, cap, 11);
    b[1000] ^= 4;
    assert_true(tern_checksum(b, cap, 11) != h);
    b[1000] ^= 4;
    uint8_t t[128];
    memcpy(t, b + 128 * 3, 128);
    memcpy(b + 128 * 3, b + 128 * 9, 128);
    memcpy(b + 128 * 9, t, 128);
    assert_true(tern_checksum(b, cap, 11) != h);
    memset(b + 128 * 9, 0, 128);
    assert_true(tern_checksum(b, cap, 11) != h);
    assert_true(tern_checksum(b, cap, 12) != tern_checksum(b, cap, 11));
    free(b);
}

static void test_isa_selection(void **state) {
    tern_isa best = tern_isa_detect();
    tern_isa_set(TERN_ISA_PORTABLE);
    assert_int_equal(tern_isa_active(), TERN_ISA_PORTABLE);
    tern_isa_set(TERN_ISA_AMX);
    assert_int_equal(tern_isa_active(), best); /* capped at what the CPU has */
    tern_isa_set(TERN_ISA_AVX512);
    assert_int_equal(tern_isa_active(), best < TERN_ISA_AVX512 ? best : TERN_ISA_AVX512);
    assert_string_equal(tern_isa_name(TERN_ISA_AMX), "amx");
    assert_string_equal(tern_isa_name(TERN_ISA_AVX2), "avx2");
    print_message("this CPU: %s\n", tern_isa_name(best));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_selection), TU_ISA_TESTS(test_scratch_failure_reported), TU_ISA_TESTS(test_activations), TU_ISA_TESTS(test_exp), TU_ISA_TESTS(test_sgemm), TU_ISA_TESTS(test_bgemm), TU_ISA_TESTS(test_to_bf16), TU_ISA_TESTS(test_softmax_fast), TU_ISA_TESTS(test_silu_mul), TU_SIMD_TESTS(test_axpby), TU_ISA_TESTS(test_norm_gelu_mul_rope), TU_SIMD_TESTS(test_gelu_f16_table), TU_ISA_TESTS(test_attention), TU_ISA_TESTS(test_batch_independence), TU_ISA_TESTS(test_gated_group),
        TU_ISA_TESTS(test_checksum),
        TU_ISA_TESTS(test_f32), TU_ISA_TESTS(test_f16),
        TU_ISA_TESTS(test_bf16),          TU_ISA_TESTS(test_q4),  TU_ISA_TESTS(test_q8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
