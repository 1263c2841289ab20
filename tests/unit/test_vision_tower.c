/* test_vision_tower.c — the Gemma 4 vision tower against an independent float reference of Hugging Face's tower
 * and processor (tests/data/vision, scripts/vision/reference.py): images of several sizes and aspect ratios at
 * every budget kind, on every kernel path, within 1e-3; the processor's geometry (sizes, the thin-image branch,
 * the position table's bound); budgets; a model without a tower; towers missing or mis-shaping a tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/fileio.h"
#include "loader/image_input.h"
#include "models/vision_encoder.h"
#include "testutil.h"

/* Embeds every golden case (the 1120-token one only when `big`) and compares; returns the worst difference. */
static double check_goldens(int big) {
    json_error_t je;
    json_t *idx = json_load_file(tu_testdata("vision/index.json"), 0, &je);
    assert_non_null(idx);
    tern_image_input *ii = NULL;
    TU_OK(tern_image_input_load(tu_testdata(json_string_value(json_object_get(idx, "tower"))), &ii));
    assert_non_null(ii);
    tern_pool *pool = NULL;
    TU_OK(tern_pool_create(2, &pool));
    double worst_all = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(idx, "cases"), i, c) {
        const int budget = (int)json_integer_value(json_object_get(c, "budget"));
        if (budget == 1120 && !big)
            continue;
        const char *image = json_string_value(json_object_get(c, "image"));
        char *bytes = NULL, *want = NULL;
        size_t len, wlen;
        TU_OK(tern_read_file(tu_testdata(image), 1u << 26, &bytes, &len));
        TU_OK(tern_read_file(tu_testdata(json_string_value(json_object_get(c, "golden"))), 1u << 28, &want, &wlen));
        tern_image_embeds e;
        TU_OK(tern_image_input_embed(ii, bytes, len, budget, pool, &e));
        assert_int_equal(e.n, (size_t)json_integer_value(json_object_get(c, "tokens")));
        assert_int_equal(e.rw, json_integer_value(json_object_get(c, "width")));
        assert_int_equal(e.rh, json_integer_value(json_object_get(c, "height")));
        assert_int_equal(wlen, e.n * (size_t)e.dim * sizeof(float));
        double worst = 0;
        const float *g = (const float *)want;
        for (size_t k = 0; k < e.n * (size_t)e.dim; k++)
            worst = fmax(worst, fabs((double)e.rows[k] - g[k]));
        print_message("%-20s budget %4d: %4zu tokens (%d x %d), max |diff| %.2e\n", image, budget, e.n, e.rw, e.rh,
                      worst);
        if (!(worst < 1e-3))
            fail_msg("%s at %d: max |diff| %g against the reference", image, budget, worst);
        worst_all = fmax(worst_all, worst);
        tern_image_embeds_free(&e);
        free(bytes);
        free(want);
    }
    tern_pool_destroy(pool);
    tern_image_input_free(ii);
    json_decref(idx);
    return worst_all;
}

static void test_matches_reference(void **state) {
    tern_isa isa = tu_isa_begin(state);
    check_goldens(isa == tern_isa_detect()); /* the 1120-token case once, on the best path */
}

static void test_geometry(void **state) {
    tern_vision_enc *e = NULL;
    TU_OK(tern_vision_enc_load(tu_testdata("vision/tower-tiny"), &e));
    assert_non_null(e);
    /* Hugging Face's get_aspect_ratio_preserving_size, as the reference computes it (w x h in, w x h out). */
    static const struct {
        int w, h, budget, ow, oh;
        size_t tokens;
    } cases[] = {{300, 200, 280, 960, 624, 260}, {64, 512, 280, 240, 2256, 235}, {50, 50, 280, 768, 768, 256},
                 {960, 672, 280, 960, 672, 280}, {200, 200, 70, 384, 384, 64},   {4000, 60, 70, 3264, 48, 68}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tern_vision_plan p;
        TU_OK(tern_vision_enc_plan(e, cases[i].w, cases[i].h, cases[i].budget, &p));
        if (p.w != cases[i].ow || p.h != cases[i].oh || p.tokens != cases[i].tokens)
            fail_msg("%d x %d at %d: %d x %d, %zu tokens; expected %d x %d, %zu", cases[i].w, cases[i].h,
                     cases[i].budget, p.w, p.h, p.tokens, cases[i].ow, cases[i].oh, cases[i].tokens);
    }
    /* A line of pixels: one side rounds to zero patches, the other takes floor(long / short) blocks, capped at the
     * budget; here beyond this tower's position table (256). */
    tern_vision_plan p;
    TU_FAILS_WITH(tern_vision_enc_plan(e, 2000, 2, 280, &p), "position table");
    TU_FAILS_WITH(tern_vision_enc_plan(e, 0, 10, 280, &p), "no pixels");
    assert_int_equal(tern_vision_enc_budget_nearest(e, 100), 70);
    assert_int_equal(tern_vision_enc_budget_nearest(e, 5000), 1120);
    assert_true(tern_vision_enc_budget_ok(e, 560));
    assert_false(tern_vision_enc_budget_ok(e, 300));
    tern_vision_enc_free(e);
}

static void test_budgets_and_errors(void **state) {
    tern_image_input *ii = NULL;
    TU_OK(tern_image_input_load(tu_testdata("vision/tower-tiny"), &ii));
    assert_int_equal(tern_image_input_default_budget(ii), 280);
    assert_int_equal(tern_image_input_budget_nearest(ii, 1), 70);
    char *bytes = NULL;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("vision/square.png"), 1u << 26, &bytes, &len));
    tern_image_embeds e;
    TU_FAILS_WITH(tern_image_input_embed(ii, bytes, len, 300, NULL, &e), "nearest 280");
    TU_FAILS_WITH(tern_image_input_embed(ii, bytes, 40, 0, NULL, &e), "PNG");
    TU_FAILS_WITH(tern_image_input_embed(ii, "not an image", 12, 0, NULL, &e), "not an image format");
    assert_null(e.rows);
    free(bytes);
    tern_image_input_free(ii);
    /* A model without a vision tower: none, no error. */
    TU_OK(tern_image_input_load(tu_testdata("oracle/tiny-v4096-f32"), &ii));
    assert_null(ii);
}

/* A copy of the tiny tower with its config edited by `edit`. */
static const char *edited_tower(const char *name, void (*edit)(json_t *vc)) {
    const char *dir = tu_tmpdir(name);
    static char out[4096];
    snprintf(out, sizeof out, "%s", dir);
    char *st = NULL;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("vision/tower-tiny/model.safetensors"), 1u << 26, &st, &len));
    tu_write(out, "model.safetensors", st, len);
    free(st);
    json_error_t je;
    json_t *cfg = json_load_file(tu_testdata("vision/tower-tiny/config.json"), 0, &je);
    edit(json_object_get(cfg, "vision_config"));
    char *text = json_dumps(cfg, 0);
    tu_write(out, "config.json", text, strlen(text));
    free(text);
    json_decref(cfg);
    return out;
}

static void more_layers(json_t *vc) { json_object_set_new(vc, "num_hidden_layers", json_integer(3)); }
static void wider(json_t *vc) { json_object_set_new(vc, "intermediate_size", json_integer(160)); }
static void bad_act(json_t *vc) { json_object_set_new(vc, "hidden_activation", json_string("relu")); }
static void bad_type(json_t *vc) { json_object_set_new(vc, "model_type", json_string("siglip_vision_model")); }

static void test_bad_towers(void **state) {
    tern_image_input *ii = NULL;
    TU_FAILS_WITH(tern_image_input_load(edited_tower("vis-layers", more_layers), &ii),
                  "missing tensor model.vision_tower.encoder.layers.2.input_layernorm.weight");
    TU_FAILS_WITH(tern_image_input_load(edited_tower("vis-wide", wider), &ii), "mlp.gate_proj");
    TU_FAILS_WITH(tern_image_input_load(edited_tower("vis-act", bad_act), &ii), "gelu_pytorch_tanh");
    TU_FAILS_WITH(tern_image_input_load(edited_tower("vis-type", bad_type), &ii), "siglip_vision_model");
    assert_null(ii);
}

/* The same tower converted by llama.cpp (convert_hf_to_gguf.py --mmproj, scripts/gguf/mmproj-files.sh): the F32 file
 * gives the safetensors tower's numbers exactly, the F16 one within its rounding of the weights. */
static void test_gguf_mmproj(void **state) {
    tern_image_input *st = NULL, *f32 = NULL, *f16 = NULL;
    TU_OK(tern_image_input_load(tu_testdata("vision/tower-tiny"), &st));
    TU_OK(tern_image_input_find(tu_testdata("gguf/mmproj-vision-tiny-f32.gguf"), NULL, &f32));
    TU_OK(tern_image_input_load_gguf(tu_testdata("gguf/mmproj-vision-tiny-f16.gguf"), &f16));
    assert_non_null(f32);
    char *bytes = NULL, *want = NULL;
    size_t len, wlen;
    TU_OK(tern_read_file(tu_testdata("vision/square.png"), 1u << 26, &bytes, &len));
    TU_OK(tern_read_file(tu_testdata("vision/square.280.emb.bin"), 1u << 26, &want, &wlen));
    tern_image_embeds a, b, c;
    TU_OK(tern_image_input_embed(st, bytes, len, 280, NULL, &a));
    TU_OK(tern_image_input_embed(f32, bytes, len, 280, NULL, &b));
    TU_OK(tern_image_input_embed(f16, bytes, len, 280, NULL, &c));
    assert_int_equal(b.n, a.n);
    assert_memory_equal(b.rows, a.rows, a.n * (size_t)a.dim * sizeof(float));
    double worst = 0;
    for (size_t k = 0; k < c.n * (size_t)c.dim; k++)
        worst = fmax(worst, fabs((double)c.rows[k] - ((const float *)want)[k]));
    print_message("mmproj F32 = safetensors; F16 vs the reference: max |diff| %.2e\n", worst);
    assert_true(worst < 2e-2);
    tern_image_embeds_free(&a);
    tern_image_embeds_free(&b);
    tern_image_embeds_free(&c);
    free(bytes);
    free(want);
    tern_image_input_free(st);
    tern_image_input_free(f32);
    tern_image_input_free(f16);
    /* An audio-only projector has no vision tower: none, no error (and naming it as a vision file is one). */
    TU_OK(tern_image_input_find(tu_testdata("gguf/mmproj-audio-tiny-f32.gguf"), NULL, &st));
    assert_null(st);
    TU_FAILS_WITH(tern_image_input_load_gguf(tu_testdata("gguf/mmproj-audio-tiny-f32.gguf"), &st), "v.blk.0.attn_q_norm");
}

static double rel_rms(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

/* `tern synth --vision` in every dtype: float32 and bf16 in Hugging Face's names, MLX 8- and 4-bit in mlx-vlm's (no
 * "model." root, affine-quantized linears run by the int8 kernels), the same seed: each loads and stays near the
 * float32 tower. */
static void test_synth_dtypes(void **state) {
    static const struct {
        const char *dtype;
        double most;
    } cases[] = {{"f32", 0}, {"bf16", 0.03}, {"q8", 0.2}, {"q4", 0.6}}; /* a tower of other weights: ~1.4 */
    char *bytes = NULL;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("vision/square.png"), 1u << 26, &bytes, &len));
    tern_image_embeds ref = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[64], dir[4096], *out = NULL;
        snprintf(name, sizeof name, "vision-synth-%s", cases[i].dtype);
        snprintf(dir, sizeof dir, "%s/m", tu_tmpdir(name));
        assert_int_equal(tu_runf(&out, "'%s' synth --preset tiny --dtype %s --seed 9 --vision '%s' 2>&1", tu_tern_bin(),
                                 cases[i].dtype, dir), 0);
        free(out);
        tern_image_input *ii = NULL;
        TU_OK(tern_image_input_load(dir, &ii));
        assert_non_null(ii);
        char desc[512];
        tern_image_input_describe(ii, desc, sizeof desc);
        tern_image_embeds e;
        TU_OK(tern_image_input_embed(ii, bytes, len, 70, NULL, &e));
        if (i == 0) {
            ref = e;
        } else {
            const double r = rel_rms(e.rows, ref.rows, e.n * (size_t)e.dim);
            print_message("%-4s %s: relative RMS %.3g against float32\n", cases[i].dtype, desc, r);
            assert_true(r > 0 && r < cases[i].most);
            assert_non_null(strstr(desc, i < 2 ? "(hf layout)" : "(mlx-vlm layout)"));
            tern_image_embeds_free(&e);
        }
        tern_image_input_free(ii);
    }
    tern_image_embeds_free(&ref);
    free(bytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_ISA_TESTS(test_matches_reference),
        cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_budgets_and_errors),
        cmocka_unit_test(test_bad_towers),
        cmocka_unit_test(test_gguf_mmproj),
        cmocka_unit_test(test_synth_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
