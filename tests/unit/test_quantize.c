/* test_quantize.c — `tern quantize`: float checkpoints (the oracle's HF model; a synthetic MoE model whose
 * HF experts.gate_up_proj must be split into MLX switch_glu gate/up) become MLX checkpoints that bind
 * completely and compute close to the float model; bad requests are refused with a reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "core/threadpool.h"
#include "models/gemma4.h"
#include "models/gemma4_weights.h"
#include "models/quantize.h"
#include "models/synth.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"
#include "testutil.h"

static void logits_of(const char *dir, const int32_t *ids, int64_t n, float **out, int64_t *V) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(dir, &m));
    *V = tern_gemma4_config_of(m)->vocab_size;
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, n, n, TERN_KV_F32, TERN_KV_F32, &kv));
    *out = malloc((size_t)(n * *V) * sizeof **out);
    int seq = 0;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_ALL};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b, *out, NULL));
    TU_OK(tern_batch_commit(kv, &b));
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_gemma4_free(m);
}

/* Mean and max |dlogit| between a float model and its quantized copy, and the share of positions with the
 * same argmax, against the given bounds. */
static void compare(const char *fdir, const char *qdir, double mean_tol, double max_tol, double min_agree) {
    static const int32_t ids[] = {2, 1449, 1051, 3315, 1249, 3737, 3385, 2919, 1835, 235, 3097, 3310, 2692, 1157, 439, 3646};
    const int64_t n = 16;
    float *a, *b;
    int64_t V;
    logits_of(fdir, ids, n, &a, &V);
    logits_of(qdir, ids, n, &b, &V);
    double d = 0, mean = 0;
    int agree = 0;
    for (int64_t p = 0; p < n; p++) {
        int64_t ia = 0, ib = 0;
        for (int64_t v = 0; v < V; v++) {
            d = fmax(d, fabs(a[p * V + v] - b[p * V + v]));
            mean += fabs(a[p * V + v] - b[p * V + v]) / (double)(n * V);
            ia = a[p * V + v] > a[p * V + ia] ? v : ia;
            ib = b[p * V + v] > b[p * V + ib] ? v : ib;
        }
        agree += ia == ib;
    }
    print_message("%s: mean |dlogit| %.3f, max %.3f, argmax agreement %d/%lld\n", qdir, mean, d, agree, (long long)n);
    assert_true(mean < mean_tol);
    assert_true(d < max_tol);
    assert_true(agree >= min_agree * (double)n);
    free(a);
    free(b);
}

static void test_oracle_q8_q4(void **state) {
    tern_isa_set(TERN_ISA_PORTABLE); /* quantization error only, not activation rounding */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("quantize-oracle"));
    char q8[4200], q4[4200];
    snprintf(q8, sizeof q8, "%s/q8", dir);
    snprintf(q4, sizeof q4, "%s/q4", dir);
    const char *src = tu_testdata("oracle/tiny-v4096-f32");
    char srccopy[4096];
    snprintf(srccopy, sizeof srccopy, "%s", src);
    TU_OK(tern_quantize_model(srccopy, q8, 8, 32, 0));
    TU_OK(tern_quantize_model(srccopy, q4, 4, 64, 0));
    /* Random-weight models amplify weight error (logit std 4.4 here): stated bounds, q8 then q4. */
    compare(srccopy, q8, 0.15, 1.0, 0.85);
    compare(srccopy, q4, 2.5, 20.0, 0.5);
    /* The copy carries the tokenizer files and an MLX quantization section. */
    char p[4300];
    snprintf(p, sizeof p, "%s/config.json", q4);
    json_t *cfg;
    TU_OK(tern_json_load_file(p, 1 << 20, &cfg));
    json_t *q = json_object_get(cfg, "quantization");
    assert_int_equal(json_integer_value(json_object_get(q, "bits")), 4);
    assert_int_equal(json_integer_value(json_object_get(q, "group_size")), 64);
    json_decref(cfg);
    snprintf(p, sizeof p, "%s/tokenizer.json", q4);
    assert_true(tern_is_file(p));
    TU_FAILS_WITH(tern_quantize_model(q8, q4, 4, 64, 0), "already quantized");
    TU_FAILS_WITH(tern_quantize_model(srccopy, q4, 3, 64, 0), "--bits must be 4 or 8");
    TU_FAILS_WITH(tern_quantize_model(srccopy, q4, 4, 48, 0), "--group must be 32, 64 or 128");
    tern_isa_set(tern_isa_detect());
}

static void test_moe_layout(void **state) {
    tern_isa_set(TERN_ISA_PORTABLE);
    const char *text =
        "{\"text_config\": {\"vocab_size\": 4096, \"hidden_size\": 64, \"intermediate_size\": 128,"
        " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 32,"
        " \"global_head_dim\": 64, \"enable_moe_block\": true, \"num_experts\": 4, \"top_k_experts\": 2,"
        " \"moe_intermediate_size\": 64, \"layer_types\": [\"sliding_attention\", \"full_attention\"]}}";
    json_t *cfg;
    TU_OK(tern_json_load_buf(text, strlen(text), "cfg", &cfg));
    char dir[4096], f[4200], q[4200];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("quantize-moe"));
    snprintf(f, sizeof f, "%s/f32", dir);
    snprintf(q, sizeof q, "%s/q8", dir);
    tern_synth_opts o = {.dtype = TERN_SYNTH_F32, .group = 64, .seed = 3, .vocab_gguf = TERN_ASSETS_DIR "/gemma4/vocab.gguf"};
    TU_OK(tern_synth_write(cfg, &o, f));
    json_decref(cfg);
    TU_OK(tern_quantize_model(f, q, 8, 32, 0));
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(q, &m));
    const tern_weights *gw = tern_gemma4_weights_of(m);
    assert_int_equal(gw->layout, TERN_LAYOUT_MLX_VLM);
    const tern_weight *g = tern_weights_find(gw, "layers.0.experts.switch_glu.gate_proj");
    assert_non_null(g);
    assert_int_equal(g->fmt, TERN_WF_MLX_AFFINE);
    assert_int_equal(g->shape[1], 64);
    /* Expert e's gate row i is source row e*2I + i of gate_up_proj, its up row is e*2I + I + i: each
     * dequantized row must match its source within the 8-bit step of its group. */
    tern_gemma4 *fm;
    TU_OK(tern_gemma4_load(f, &fm));
    const tern_weight *gu = tern_weights_find(tern_gemma4_weights_of(fm), "layers.0.experts.gate_up_proj");
    const tern_weight *u = tern_weights_find(gw, "layers.0.experts.switch_glu.up_proj");
    float a[64], b[64];
    for (int e = 0; e < 4; e++)
        for (int i = 0; i < 64; i += 9)
            for (int which = 0; which < 2; which++) {
                tern_weight_row(which ? u : g, e * 64 + i, a);
                tern_weight_row(gu, e * 128 + which * 64 + i, b);
                float lo = b[0], hi = b[0];
                for (int k = 0; k < 64; k++) {
                    lo = fminf(lo, b[k]);
                    hi = fmaxf(hi, b[k]);
                }
                for (int k = 0; k < 64; k++)
                    assert_true(fabsf(a[k] - b[k]) <= (hi - lo) / 255.0f + 1e-6f);
            }
    tern_gemma4_free(fm);
    tern_gemma4_free(m);
    compare(f, q, 0.2, 1e9, 0.75); /* MoE routing flips under any perturbation: argmax agreement only */
    tern_isa_set(tern_isa_detect());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_q8_q4),
        cmocka_unit_test(test_moe_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
