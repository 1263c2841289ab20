/* test_kv_types.c — the KV cache's element formats: names, sizes, what a stored row reads back as (within each
 * format's rounding: half a step for q8_0, a step at most for q4_0, whose largest value of one sign caps at 7/8,
 * plus the step's own rounding to f16),
 * the kernels' accessor agreeing with the row loader, and a cache holding K and V in different formats: writes,
 * reads, raw position bytes, copies, and the head_dim a block format needs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kv/kv_cache.h"
#include "tensor/kv_type.h"
#include "testutil.h"

static void test_names_and_sizes(void **state) {
    (void)state;
    for (int t = 0; t < TERN_KV_TYPE_COUNT; t++) {
        tern_kv_type got;
        TU_OK(tern_kv_type_parse(tern_kv_type_name((tern_kv_type)t), &got));
        assert_int_equal(got, t);
    }
    tern_kv_type got;
    TU_FAILS_WITH(tern_kv_type_parse("q5_1", &got), "bf16, f16, f32, q8_0 or q4_0");
    TU_FAILS_WITH(tern_kv_type_parse(NULL, &got), "unknown KV cache type");
    assert_int_equal(tern_kv_type_bytes(TERN_KV_BF16, 64), 128);
    assert_int_equal(tern_kv_type_bytes(TERN_KV_F16, 64), 128);
    assert_int_equal(tern_kv_type_bytes(TERN_KV_F32, 64), 256);
    assert_int_equal(tern_kv_type_bytes(TERN_KV_Q8_0, 64), 68);
    assert_int_equal(tern_kv_type_bytes(TERN_KV_Q4_0, 64), 36);
    assert_int_equal(tern_kv_type_block(TERN_KV_Q4_0), 32);
    assert_int_equal(tern_kv_type_block(TERN_KV_F16), 1);
}

/* Rows of varied scale (and an all-zero block) stored and read back. */
static void test_round_trip(void **state) {
    (void)state;
    enum { N = 256 };
    uint64_t rng = 11;
    float x[N], y[N];
    unsigned char buf[N * 4];
    for (int i = 0; i < N; i++)
        x[i] = tu_frand(&rng) * (i < 32 ? 0.0f : i < 64 ? 1e-3f : i < 128 ? 3.0f : 100.0f);
    for (int t = 0; t < TERN_KV_TYPE_COUNT; t++) {
        memset(buf, 0xa5, sizeof buf);
        tern_kv_type_store((tern_kv_type)t, x, buf, N);
        tern_kv_type_load((tern_kv_type)t, buf, y, N);
        for (int i = 0; i < N; i++)
            assert_true(tern_kv_type_elem((tern_kv_type)t, buf, i) == y[i]);
        for (int b = 0; b < N / 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            /* The error each format allows; a block's codes were chosen for the exact step, so the step's rounding
             * to f16 (stored at the block's start) moves every value by up to its code times that rounding. */
            const double step = t == TERN_KV_Q8_0 ? amax / 127.0 : amax / 8.0;
            uint16_t h = 0;
            memcpy(&h, buf + b * (t == TERN_KV_Q8_0 ? 34 : 18), 2);
            const double drift = fabs(fabs((double)tern_f16_to_f32(h)) - step);
            const double tol = t == TERN_KV_F32 ? 0
                               : t == TERN_KV_BF16 ? amax / 256.0
                               : t == TERN_KV_F16 ? amax / 2048.0
                               : t == TERN_KV_Q8_0 ? 0.5 * step + 127 * drift + 1e-12
                                                    : step + 8 * drift + 1e-12;
            for (int j = 0; j < 32; j++) {
                const double e = fabs((double)x[b * 32 + j] - y[b * 32 + j]);
                if (e > tol)
                    fail_msg("%s: value %d: %g read back as %g (error %g > %g)", tern_kv_type_name((tern_kv_type)t),
                             b * 32 + j, x[b * 32 + j], y[b * 32 + j], e, tol);
            }
        }
        for (int i = 0; i < 32; i++)
            assert_true(y[i] == 0.0f); /* a zero block stays zero (step 0, no division by it) */
    }
    /* q4_0: the value of largest magnitude gets code 0 exactly (step = it / -8). */
    float z[32] = {0};
    z[5] = -2.0f;
    z[6] = 2.0f;
    tern_kv_type_store(TERN_KV_Q4_0, z, buf, 32);
    tern_kv_type_load(TERN_KV_Q4_0, buf, y, 32);
    assert_true(y[5] == -2.0f && y[6] == 1.75f && y[0] == 0.0f);
}

/* A cache with q8_0 K and q4_0 V: what was written reads back as stored; raw position bytes carry both planes;
 * copies keep them; a head_dim that is not whole blocks is refused with the layer and the way out. */
static void test_cache_mixed(void **state) {
    (void)state;
    tern_kv_layer_desc d[2] = {{2, 32, 1}, {1, 64, 0}};
    tern_kv *kv;
    TU_OK(tern_kv_create(d, 2, 3, 40, 8, 4, TERN_KV_Q8_0, TERN_KV_Q4_0, &kv));
    assert_int_equal(tern_kv_k_type(kv), TERN_KV_Q8_0);
    assert_int_equal(tern_kv_v_type(kv), TERN_KV_Q4_0);
    assert_int_equal(tern_kv_pos_bytes(kv, 0), 2 * 34 + 2 * 18);
    assert_int_equal(tern_kv_pos_bytes(kv, 1), 2 * 34 + 2 * 18);
    /* reserved: 3 sequences x (12 ring slots + 40 full) positions x 104 bytes */
    assert_int_equal(tern_kv_bytes(kv), 3 * (12 + 40) * 104);
    uint64_t rng = 5;
    float k[64], v[64], kq[64], vq[64], got[64];
    for (int64_t p = 0; p < 10; p++)
        for (int l = 0; l < 2; l++) {
            for (int i = 0; i < 64; i++)
                k[i] = tu_frand(&rng), v[i] = tu_frand(&rng);
            tern_kv_write(kv, l, 0, p, k, v);
            if (p == 9) {
                unsigned char raw[2 * 34 + 2 * 18];
                tern_kv_type_store(TERN_KV_Q8_0, k, raw, 64);
                tern_kv_type_load(TERN_KV_Q8_0, raw, kq, 64);
                tern_kv_type_store(TERN_KV_Q4_0, v, raw, 64);
                tern_kv_type_load(TERN_KV_Q4_0, raw, vq, 64);
            }
        }
    TU_OK(tern_kv_set_len(kv, 0, 10));
    tern_kv_read(kv, 1, 0, 9, 0, got);
    assert_memory_equal(got, kq, sizeof kq);
    tern_kv_read(kv, 1, 0, 9, 1, got);
    assert_memory_equal(got, vq, sizeof vq);
    tern_kv_view view;
    TU_OK(tern_kv_view_layer(kv, 0, 0, &view));
    assert_int_equal(view.k_type, TERN_KV_Q8_0);
    assert_int_equal(view.v_type, TERN_KV_Q4_0);
    /* export / import of a position, and a whole-sequence copy */
    unsigned char pos[2 * 34 + 2 * 18];
    tern_kv_export_pos(kv, 1, 0, 9, pos);
    tern_kv_import_pos(kv, 1, 2, 9, pos);
    TU_OK(tern_kv_set_len(kv, 2, 10));
    tern_kv_read(kv, 1, 2, 9, 1, got);
    assert_memory_equal(got, vq, sizeof vq);
    TU_OK(tern_kv_copy_seq(kv, 1, 0, 10));
    tern_kv_read(kv, 1, 1, 9, 0, got);
    assert_memory_equal(got, kq, sizeof kq);
    tern_kv_free(kv);
    tern_kv_layer_desc odd[1] = {{2, 48, 0}};
    TU_FAILS_WITH(tern_kv_create(odd, 1, 1, 16, 8, 4, TERN_KV_BF16, TERN_KV_Q4_0, &kv),
                  "KV cache type q4_0 stores blocks of 32 values, but layer 0's head_dim is 48; use bf16, f16 or f32 "
                  "for V");
    TU_OK(tern_kv_create(odd, 1, 1, 16, 8, 4, TERN_KV_F16, TERN_KV_F32, &kv));
    tern_kv_free(kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_names_and_sizes), cmocka_unit_test(test_round_trip),
                                       cmocka_unit_test(test_cache_mixed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
