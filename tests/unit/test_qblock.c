/* test_qblock.c — ggml's block formats: dequantization agrees with llama.cpp's gguf-py on rows llama-quantize wrote
 * (every format); the portable dot product is the dot of the dequantized weights with the dequantized activation
 * blocks; activation blocks quantize as ggml's x86 backend does; the AVX2 and AVX-512 quantizers and dot products
 * reproduce the portable ones bit for bit; the threaded product equals row-by-row dots. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/threadpool.h"
#include "tensor/kernels.h"
#include "tensor/qblock.h"
#include "tensor/qblock_mm.h"
#include "testutil.h"

static const tern_qblock WEIGHTS[] = {TERN_QB_Q4_0, TERN_QB_Q4_1, TERN_QB_Q5_0, TERN_QB_Q5_1,
                                      TERN_QB_Q8_0, TERN_QB_Q4_K, TERN_QB_Q5_K, TERN_QB_Q6_K};
#define N_WEIGHTS (sizeof WEIGHTS / sizeof WEIGHTS[0])

static uint32_t rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static float rnd_normal(uint64_t *s) {
    float u = 0;
    for (int i = 0; i < 12; i++)
        u += (float)rnd(s) / 4294967296.0f * 2.0f;
    return u - 12.0f;
}

static void put_f16(uint8_t *p, float v) {
    const uint16_t h = tern_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* Random blocks of format t for n values: random code bytes, sane f16 scales (and mins) in their fields. */
static uint8_t *random_row(tern_qblock t, int64_t n, uint64_t *s) {
    const size_t B = tern_qblock_bytes(t), nb = (size_t)(n / tern_qblock_elems(t));
    uint8_t *r = malloc(B * nb);
    for (size_t i = 0; i < B * nb; i++)
        r[i] = (uint8_t)rnd(s);
    for (size_t i = 0; i < nb; i++) {
        uint8_t *b = r + i * B;
        const float d = 0.001f + (float)(rnd(s) % 1000) / 50000.0f;
        if (t == TERN_QB_Q6_K)
            put_f16(b + 208, d);
        else
            put_f16(b, d);
        if (t == TERN_QB_Q4_1 || t == TERN_QB_Q5_1 || t == TERN_QB_Q4_K || t == TERN_QB_Q5_K)
            put_f16(b + 2, (t == TERN_QB_Q4_K || t == TERN_QB_Q5_K ? 1.0f : -8.0f) * d);
    }
    return r;
}

static float *random_x(int64_t n, uint64_t *s) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_normal(s) * (i % 97 == 5 ? 8.0f : 1.0f); /* a few outliers */
    return x;
}

/* Every format's rows from llama-quantize, dequantized by llama.cpp's gguf-py (scripts/gguf/dequant-kat.py). */
static void test_dequantize_matches_gguf_py(void **state) {
    (void)state;
    size_t len;
    uint8_t *kat;
    TU_OK(tern_read_file(tu_testdata("gguf/dequant-kat.bin"), 1 << 20, (char **)&kat, &len));
    int seen = 0;
    for (size_t o = 0; o + 12 <= len;) {
        uint32_t hdr[3];
        memcpy(hdr, kat + o, 12);
        o += 12;
        static const struct {
            uint32_t ggml;
            tern_qblock t;
        } map[] = {{2, TERN_QB_Q4_0}, {3, TERN_QB_Q4_1}, {6, TERN_QB_Q5_0}, {7, TERN_QB_Q5_1},
                   {8, TERN_QB_Q8_0}, {12, TERN_QB_Q4_K}, {13, TERN_QB_Q5_K}, {14, TERN_QB_Q6_K}};
        tern_qblock t = TERN_QB_NONE;
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (map[i].ggml == hdr[0])
                t = map[i].t;
        assert_int_not_equal(t, TERN_QB_NONE);
        const int64_t n = hdr[1];
        assert_int_equal(tern_qblock_row_bytes(t, n), hdr[2]);
        float *got = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
        tern_qblock_dequantize(t, kat + o, got, n);
        memcpy(want, kat + o + hdr[2], sizeof(float) * (size_t)n);
        double worst = 0;
        for (int64_t i = 0; i < n; i++)
            worst = fmax(worst, fabs(got[i] - want[i]) / (fabs(want[i]) + 1e-6));
        print_message("%s: %lld values, max relative difference %.2g\n", tern_qblock_name(t), (long long)n, worst);
        assert_true(worst < 1e-6);
        seen |= 1 << t;
        free(got);
        free(want);
        o += hdr[2] + sizeof(float) * (size_t)n;
    }
    for (size_t i = 0; i < N_WEIGHTS; i++)
        assert_true(seen & 1 << WEIGHTS[i]);
    free(kat);
}

/* The reference dot equals the dot of the dequantized rows (float64 sum), to float rounding; the activation blocks
 * hold x to within half a step. */
static void test_reference_definition(void **state) {
    (void)state;
    uint64_t s = 7;
    const int64_t n = 1024;
    for (size_t k = 0; k < N_WEIGHTS; k++) {
        const tern_qblock t = WEIGHTS[k], act = tern_qblock_act(t);
        for (int rep = 0; rep < 20; rep++) {
            uint8_t *w = random_row(t, n, &s), *a = malloc(tern_qblock_row_bytes(act, n));
            float *x = random_x(n, &s), *wf = malloc(sizeof(float) * n), *af = malloc(sizeof(float) * n);
            tern_qblock_quantize_ref(act, x, a, n);
            tern_qblock_dequantize(t, w, wf, n);
            tern_qblock_dequantize(act, a, af, n);
            double want = 0, mag = 0, step_err = 0;
            for (int64_t i = 0; i < n; i++) {
                want += (double)wf[i] * af[i];
                mag += fabs((double)wf[i] * af[i]);
            }
            for (int64_t b = 0; b < n; b += tern_qblock_elems(act)) {
                float amax = 0;
                for (int j = 0; j < tern_qblock_elems(act); j++)
                    amax = fmaxf(amax, fabsf(x[b + j]));
                for (int j = 0; j < tern_qblock_elems(act); j++)
                    step_err = fmax(step_err, fabs(af[b + j] - x[b + j]) / (amax / 127.0));
            }
            const double got = tern_qblock_dot_ref(t, n, w, a);
            /* Q8_1's stored sum is rounded to f16: the mins' term is that much off the dequantized one. */
            const double tol = (act == TERN_QB_Q8_1 ? 2e-3 : 1e-5) * mag + 1e-6;
            if (fabs(got - want) > tol)
                fail_msg("%s: dot %.9g, dequantized %.9g (sum |terms| %.3g)", tern_qblock_name(t), got, want, mag);
            assert_true(step_err <= 0.5 + 127.0 / 2048); /* the f16 step is off by up to 2^-11: 127 codes of it */
            free(w), free(a), free(x), free(wf), free(af);
        }
    }
}

/* ggml's quantizers on known inputs: Q8_0 codes round half to even at 127 / amax; Q8_K scales by the value of
 * largest magnitude (the first of equals), negative step when it is positive, codes capped at 127. */
static void test_activation_known_answers(void **state) {
    (void)state;
    float x[256] = {0};
    x[0] = 2.54f, x[1] = 0.01f, x[2] = -2.54f, x[3] = 1.0f;
    uint8_t q[292];
    tern_qblock_quantize_ref(TERN_QB_Q8_0, x, q, 32);
    int8_t c[4];
    memcpy(c, q + 2, 4);
    assert_int_equal(c[0], 127);
    assert_int_equal(c[1], 0);          /* 0.01 * 50 = 0.5: ties to even */
    assert_int_equal(c[2], -127);
    assert_int_equal(c[3], 50);
    uint16_t dh;
    memcpy(&dh, q, 2);
    assert_int_equal(dh, tern_f32_to_f16(2.54f / 127.0f));
    x[5] = 3.0f, x[6] = -3.0f;
    tern_qblock_quantize_ref(TERN_QB_Q8_K, x, q, 256);
    float d;
    memcpy(&d, q, 4);
    assert_true(d < 0 && fabsf(d * -127.0f - 3.0f) < 1e-6f);
    assert_int_equal((int8_t)q[4 + 5], -127);
    assert_int_equal((int8_t)q[4 + 6], 127);
    int16_t b0;
    memcpy(&b0, q + 260, 2);
    int sum = 0;
    for (int j = 0; j < 16; j++)
        sum += (int8_t)q[4 + j];
    assert_int_equal(b0, sum);
    memset(x, 0, sizeof x); /* an all-zero block: zero step and codes */
    tern_qblock_quantize_ref(TERN_QB_Q8_K, x, q, 256);
    memcpy(&d, q, 4);
    assert_true(d == 0.0f && q[4] == 0);
}

/* Activations a hostile file's weights made NaN or infinite get defined codes (the vector paths' saturated -128),
 * not a cast of NaN to int (undefined; UBSan stopped fuzz_gguf_mmproj_vision on it). */
static void test_activation_non_finite(void **state) {
    (void)state;
    float x[256] = {0};
    x[0] = NAN, x[1] = 1.0f, x[2] = INFINITY;
    uint8_t q[292];
    tern_qblock_quantize_ref(TERN_QB_Q8_0, x, q, 32); /* amax inf: step 0, so inf and NaN both read as NaN */
    assert_int_equal((int8_t)q[2], -128);
    assert_int_equal((int8_t)q[3], 0);
    assert_int_equal((int8_t)q[4], -128);
    x[2] = 2.0f;
    tern_qblock_quantize_ref(TERN_QB_Q8_1, x, q, 32); /* a finite block with one NaN: the rest as usual */
    assert_int_equal((int8_t)q[4], -128);
    assert_int_equal((int8_t)q[5], 64);
    assert_int_equal((int8_t)q[6], 127);
    tern_qblock_quantize_ref(TERN_QB_Q8_K, x, q, 256);
    assert_int_equal((int8_t)q[4], -128);
    assert_int_equal((int8_t)q[5], -64);
    assert_int_equal((int8_t)q[6], -127);
}

static const tern_qblock_kernels *simd_table(void **state) {
    return tu_isa_begin(state) >= TERN_ISA_AVX512 ? &tern_qblock_avx512 : &tern_qblock_avx2;
}

/* The SIMD quantizers give the reference's bytes; the SIMD dots its floats, bit for bit, on random rows (edge codes
 * included: random bytes reach every code) and all-zero activations. */
static void test_simd_matches_reference(void **state) {
    const tern_qblock_kernels *k = simd_table(state);
    uint64_t s = 11;
    static const int64_t lens[] = {256, 512, 2048};
    for (size_t k2 = 0; k2 < N_WEIGHTS; k2++) {
        const tern_qblock t = WEIGHTS[k2], act = tern_qblock_act(t);
        for (size_t li = 0; li < 3; li++) {
            const int64_t n = lens[li];
            for (int rep = 0; rep < 10; rep++) {
                uint8_t *w = random_row(t, n, &s), *a = malloc(tern_qblock_row_bytes(act, n)),
                        *b = malloc(tern_qblock_row_bytes(act, n));
                float *x = random_x(n, &s);
                if (rep == 9)
                    memset(x, 0, sizeof(float) * (size_t)n);
                tern_qblock_quantize_ref(act, x, a, n);
                k->quantize(act, x, b, n);
                assert_memory_equal(a, b, tern_qblock_row_bytes(act, n));
                const float want = tern_qblock_dot_ref(t, n, w, a), got = k->dot(t, n, w, a);
                if (memcmp(&want, &got, sizeof got))
                    fail_msg("%s n=%lld: reference %.9g, simd %.9g", tern_qblock_name(t), (long long)n, want, got);
                free(w), free(a), free(b), free(x);
            }
        }
    }
}

/* The threaded product of the active path: every output equals the reference dot of its row and token, for slabs
 * at any row offset and token counts around the kernels' tiles; results do not depend on the other tokens. */
static void test_matmul(void **state) {
    tu_isa_begin(state);
    const tern_qblock_kernels *k = tern_kernels()->qblock;
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    uint64_t s = 5;
    static const int64_t Ts[] = {1, 3, 33};
    for (size_t k2 = 0; k2 < N_WEIGHTS; k2++) {
        const tern_qblock t = WEIGHTS[k2], act = tern_qblock_act(t);
        const int64_t rows = 37, in = 512, row0 = 3, n_out = 29;
        uint8_t *wd = random_row(t, rows * in, &s);
        const tern_weight w = {.fmt = TERN_WF_QBLOCK, .ndim = 2, .shape = {rows, in}, .data = wd, .qblock = t};
        for (size_t ti = 0; ti < 3; ti++) {
            const int64_t T = Ts[ti];
            float *x = random_x(T * in, &s), *y = malloc(sizeof(float) * (size_t)(T * n_out));
            assert_int_equal(tern_qblock_matmul(pool, k, &w, row0, n_out, x, T, y), 0);
            uint8_t *a = malloc(tern_qblock_row_bytes(act, in));
            for (int64_t tk = 0; tk < T; tk++) {
                tern_qblock_quantize_ref(act, x + tk * in, a, in);
                for (int64_t o = 0; o < n_out; o++) {
                    const float want =
                        tern_qblock_dot_ref(t, in, wd + (size_t)(row0 + o) * tern_qblock_row_bytes(t, in), a);
                    if (memcmp(&want, &y[tk * n_out + o], sizeof want))
                        fail_msg("%s T=%lld token %lld row %lld: reference %.9g, product %.9g", tern_qblock_name(t),
                                 (long long)T, (long long)tk, (long long)o, want, y[tk * n_out + o]);
                }
            }
            free(a), free(x), free(y);
        }
        free(wd);
    }
    tern_pool_destroy(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dequantize_matches_gguf_py),
        cmocka_unit_test(test_reference_definition),
        cmocka_unit_test(test_activation_known_answers),
        cmocka_unit_test(test_activation_non_finite),
        TU_SIMD_TESTS(test_simd_matches_reference),
        TU_ISA_TESTS(test_matmul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
