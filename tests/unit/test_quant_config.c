/* test_quant_config.c — config.json quantization sections: a realistic mlx-community config with per-module
 * overrides and prefix variants, absent and alternative sections, malformed sections refused with the key named,
 * and inferring bits / group size from tensor shapes. */
#include <stdint.h>
#include <string.h>

#include "core/json_util.h"
#include "formats/quant_config.h"
#include "testutil.h"

static json_t *parse_json(const char *text) {
    json_t *root = NULL;
    TU_OK(tern_json_load_buf(text, strlen(text), "config.json", &root));
    assert_non_null(root);
    return root;
}

static tern_quant_config *parse_ok(const char *text) {
    json_t *root = parse_json(text);
    tern_quant_config *qc = NULL;
    TU_OK(tern_quant_config_parse(root, &qc));
    assert_non_null(qc);
    json_decref(root);
    return qc;
}

static void expect_fail(const char *text, const char *needle) {
    json_t *root = parse_json(text);
    tern_quant_config *qc = (tern_quant_config *)&qc; /* must be reset to NULL on failure */
    TU_FAILS_WITH(tern_quant_config_parse(root, &qc), needle);
    assert_null(qc);
    json_decref(root);
}

static void expect_params(const tern_quant_config *qc, const char *path, int quantized, int bits, int group,
                          int mode) {
    tern_quant_params p = tern_quant_config_lookup(qc, path);
    if (p.quantized != quantized || (quantized && (p.bits != bits || p.group_size != group || p.mode != mode)))
        fail_msg("%s: got quantized=%d bits=%d group=%d mode=%d, want %d/%d/%d/%d", path, p.quantized, p.bits,
                 p.group_size, p.mode, quantized, bits, group, mode);
}

/* The shape of a real mlx-community Gemma 4 config: global 4-bit group 64, an 8-bit down_proj, modules kept in
 * bf16, the section mirrored under quantization_config, and the text model's own keys around it. */
static const char *realistic_config =
    "{\n"
    "  \"architectures\": [\"Gemma4ForConditionalGeneration\"],\n"
    "  \"model_type\": \"gemma4\",\n"
    "  \"quantization\": {\n"
    "    \"group_size\": 64,\n"
    "    \"bits\": 4,\n"
    "    \"mode\": \"affine\",\n"
    "    \"model.language_model.layers.0.mlp.down_proj\": {\"bits\": 8, \"group_size\": 64},\n"
    "    \"model.language_model.per_layer_model_projection\": false,\n"
    "    \"model.language_model.embed_tokens_per_layer\": {\"group_size\": 32, \"bits\": 6, \"mode\": \"affine\"},\n"
    "    \"model.vision_tower.encoder.layers.0.self_attn.q_proj\": false,\n"
    "    \"model.language_model.layers.3.self_attn.o_proj\": true\n"
    "  },\n"
    "  \"quantization_config\": {\"group_size\": 32, \"bits\": 8},\n"
    "  \"text_config\": {\"hidden_size\": 1536, \"num_hidden_layers\": 35, \"vocab_size\": 262144},\n"
    "  \"torch_dtype\": \"bfloat16\"\n"
    "}\n";

static void test_realistic(void **state) {
    tern_quant_config *qc = parse_ok(realistic_config);
    assert_true(tern_quant_config_present(qc));
    assert_int_equal(tern_quant_config_override_count(qc), 5);
    const int A = TERN_QMODE_AFFINE;

    /* "quantization" wins over "quantization_config" (which here says 8-bit g32 to prove it is not read). */
    expect_params(qc, "model.language_model.layers.1.mlp.down_proj", 1, 4, 64, A);
    expect_params(qc, "model.language_model.embed_tokens", 1, 4, 64, A);

    /* The override, under the path as written and under the other prefixes checkpoints use. */
    expect_params(qc, "model.language_model.layers.0.mlp.down_proj", 1, 8, 64, A);
    expect_params(qc, "language_model.model.layers.0.mlp.down_proj", 1, 8, 64, A);
    expect_params(qc, "model.layers.0.mlp.down_proj", 1, 8, 64, A);
    expect_params(qc, "language_model.layers.0.mlp.down_proj", 1, 8, 64, A);
    expect_params(qc, "layers.0.mlp.down_proj", 1, 8, 64, A);
    /* ... but not a different module that merely shares a prefix of the name. */
    expect_params(qc, "model.language_model.layers.0.mlp.down_proj_x", 1, 4, 64, A);
    expect_params(qc, "model.language_model.layers.0.mlp", 1, 4, 64, A);
    expect_params(qc, "model.language_model.layers.10.mlp.down_proj", 1, 4, 64, A);

    /* false keeps the module in float, whatever prefix is asked for. */
    expect_params(qc, "model.language_model.per_layer_model_projection", 0, 0, 0, A);
    expect_params(qc, "language_model.model.per_layer_model_projection", 0, 0, 0, A);
    expect_params(qc, "model.vision_tower.encoder.layers.0.self_attn.q_proj", 0, 0, 0, A);
    expect_params(qc, "vision_tower.encoder.layers.0.self_attn.q_proj", 0, 0, 0, A);
    expect_params(qc, "model.vision_tower.encoder.layers.0.self_attn.k_proj", 1, 4, 64, A);

    /* A full override object; and true means "the global parameters". */
    expect_params(qc, "language_model.model.embed_tokens_per_layer", 1, 6, 32, A);
    expect_params(qc, "model.language_model.layers.3.self_attn.o_proj", 1, 4, 64, A);

    /* NULL path gives the global parameters. */
    expect_params(qc, NULL, 1, 4, 64, A);
    tern_quant_config_free(qc);
}

/* An exact path beats a prefix variant; among prefix variants the first in the file wins. */
static void test_precedence(void **state) {
    tern_quant_config *qc = parse_ok("{\"quantization\": {\"bits\": 4, \"group_size\": 64,"
                                     " \"model.layers.0.mlp.up_proj\": {\"bits\": 8, \"group_size\": 32},"
                                     " \"language_model.model.layers.0.mlp.up_proj\":"
                                     " {\"bits\": 2, \"group_size\": 32},"
                                     " \"layers.0.mlp.up_proj\": {\"bits\": 3, \"group_size\": 32}}}");
    expect_params(qc, "language_model.model.layers.0.mlp.up_proj", 1, 2, 32, TERN_QMODE_AFFINE);
    expect_params(qc, "model.layers.0.mlp.up_proj", 1, 8, 32, TERN_QMODE_AFFINE);
    expect_params(qc, "layers.0.mlp.up_proj", 1, 3, 32, TERN_QMODE_AFFINE);
    expect_params(qc, "model.language_model.layers.0.mlp.up_proj", 1, 8, 32, TERN_QMODE_AFFINE);
    tern_quant_config_free(qc);
}

static void test_absent_and_alternatives(void **state) {
    /* No section at all. */
    tern_quant_config *qc = parse_ok("{\"model_type\": \"gemma4\", \"text_config\": {\"hidden_size\": 8}}");
    assert_false(tern_quant_config_present(qc));
    assert_int_equal(tern_quant_config_override_count(qc), 0);
    expect_params(qc, "model.language_model.layers.0.mlp.down_proj", 0, 0, 0, 0);
    tern_quant_config_free(qc);
    /* null counts as absent; NULL config too. */
    qc = parse_ok("{\"quantization\": null}");
    assert_false(tern_quant_config_present(qc));
    tern_quant_config_free(qc);
    expect_params(NULL, "x", 0, 0, 0, 0);
    assert_false(tern_quant_config_present(NULL));
    tern_quant_config_free(NULL);

    /* Only quantization_config. */
    qc = parse_ok("{\"quantization_config\": {\"group_size\": 128, \"bits\": 8}}");
    assert_true(tern_quant_config_present(qc));
    expect_params(qc, "model.layers.0.mlp.gate_proj", 1, 8, 128, TERN_QMODE_AFFINE);
    tern_quant_config_free(qc);

    /* Nested in text_config. */
    qc = parse_ok("{\"text_config\": {\"quantization\": {\"group_size\": 32, \"bits\": 5}}}");
    expect_params(qc, "model.layers.0.mlp.gate_proj", 1, 5, 32, TERN_QMODE_AFFINE);
    tern_quant_config_free(qc);

    /* Mode defaults: affine 4-bit group 64; an override object takes the defaults of its own mode, not the
     * global values (MLX passes it straight to to_quantized). */
    qc = parse_ok("{\"quantization\": {\"group_size\": 32, \"bits\": 3, \"lm_head\": {\"bits\": 8}}}");
    expect_params(qc, "model.layers.0.mlp.gate_proj", 1, 3, 32, TERN_QMODE_AFFINE);
    expect_params(qc, "lm_head", 1, 8, 64, TERN_QMODE_AFFINE);
    tern_quant_config_free(qc);
    qc = parse_ok("{\"quantization\": {\"mode\": \"affine\"}}");
    expect_params(qc, "a.b", 1, 4, 64, TERN_QMODE_AFFINE);
    tern_quant_config_free(qc);

    /* mxfp4, MLX-style and Hugging Face style. */
    qc = parse_ok("{\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"mxfp4\"}}");
    expect_params(qc, "model.layers.0.mlp.experts.down_proj", 1, 4, 32, TERN_QMODE_MXFP4);
    tern_quant_config_free(qc);
    qc = parse_ok("{\"quantization\": {\"mode\": \"mxfp4\"}}");
    expect_params(qc, "x", 1, 4, 32, TERN_QMODE_MXFP4);
    tern_quant_config_free(qc);
    qc = parse_ok("{\"quantization_config\": {\"quant_method\": \"mxfp4\","
                  " \"modules_to_not_convert\": [\"lm_head\"]}}");
    expect_params(qc, "model.layers.0.mlp.experts.gate_up_proj", 1, 4, 32, TERN_QMODE_MXFP4);
    tern_quant_config_free(qc);

    assert_string_equal(tern_quant_mode_name(TERN_QMODE_AFFINE), "affine");
    assert_string_equal(tern_quant_mode_name(TERN_QMODE_MXFP4), "mxfp4");
    assert_string_equal(tern_quant_mode_name(9), "?");
}

static void test_malformed(void **state) {
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": \"4\"}}",
                "config \"quantization\": \"bits\" must be an integer");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 7}}",
                "config \"quantization\": \"bits\" = 7 is not supported");
    expect_fail("{\"quantization\": {\"group_size\": 48, \"bits\": 4}}", "\"group_size\" = 48 is not supported");
    expect_fail("{\"quantization\": {\"group_size\": 64.5, \"bits\": 4}}", "\"group_size\" must be an integer");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 1e12}}", "\"bits\" = 1000000000000 is out of range");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"int4\"}}",
                "\"mode\" \"int4\" is unknown");
    expect_fail("{\"quantization\": {\"group_size\": 16, \"bits\": 4, \"mode\": \"nvfp4\"}}",
                "\"mode\" \"nvfp4\" is not supported");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": 1}}", "\"mode\" must be a string");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"mode\": \"mxfp4\"}}",
                "\"group_size\" = 64 is not supported with mode \"mxfp4\" (expected 32)");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.0.mlp\": 8}}",
                "config \"quantization\": module \"model.layers.0.mlp\": entry must be an object of bits/group_size "
                "or false, found a number");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"lm_head\": \"8bit\"}}",
                "module \"lm_head\": entry must be an object of bits/group_size or false, found a string");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"lm_head\": {\"bits\": 9}}}",
                "module \"lm_head\": \"bits\" = 9 is not supported");
    expect_fail("{\"quantization\": {\"group_size\": 64, \"bits\": 4, \"lm_head\": {\"bitz\": 8}}}",
                "module \"lm_head\": unknown key \"bitz\"");
    expect_fail("{\"quantization\": [64, 4]}", "config \"quantization\": must be an object, found an array");
    expect_fail("{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4}}",
                "config \"quantization_config\": \"quant_method\" \"awq\" is not supported");
    expect_fail("{\"quantization_config\": {\"quant_method\": 4}}", "\"quant_method\" must be a string");
    expect_fail("{\"text_config\": {\"quantization\": {\"bits\": 12}}}", "config \"text_config.quantization\"");
    expect_fail("[1, 2]", "expected a JSON object at the top level");
}

static void test_infer(void **state) {
    int bits = 0, group = 0;
    TU_OK(tern_quant_infer(2048, 256, 32, &bits, &group));
    assert_int_equal(bits, 4);
    assert_int_equal(group, 64);
    TU_OK(tern_quant_infer(2048, 192, 16, &bits, &group));
    assert_int_equal(bits, 3);
    assert_int_equal(group, 128);
    TU_OK(tern_quant_infer(1536, 384, 48, &bits, &group));
    assert_int_equal(bits, 8);
    assert_int_equal(group, 32);
    TU_OK(tern_quant_infer(1536, 240, 24, &bits, &group));
    assert_int_equal(bits, 5);
    assert_int_equal(group, 64);

    bits = group = -1;
    TU_FAILS_WITH(tern_quant_infer(2048, 100, 32, &bits, &group), "do not hold a whole number of bits");
    assert_int_equal(bits, -1); /* untouched on failure */
    TU_FAILS_WITH(tern_quant_infer(2048, 448, 32, &bits, &group), "bits = 7 is not supported");
    TU_FAILS_WITH(tern_quant_infer(2048, 448, 32, &bits, &group), "inferred from tensor shapes");
    TU_FAILS_WITH(tern_quant_infer(2048, 2048, 32, &bits, &group), "bits = 32 is not supported");
    TU_FAILS_WITH(tern_quant_infer(2048, 256, 3, &bits, &group), "2048 inputs over 3 scale columns");
    TU_FAILS_WITH(tern_quant_infer(2048, 256, 2048, &bits, &group), "group_size = 1 is not supported");
    TU_FAILS_WITH(tern_quant_infer(2048, 256, 0, &bits, &group), "must be positive");
    TU_FAILS_WITH(tern_quant_infer(0, 256, 32, &bits, &group), "must be positive");
    TU_FAILS_WITH(tern_quant_infer(-64, 256, 32, &bits, &group), "must be positive");
    TU_FAILS_WITH(tern_quant_infer(64, INT64_MAX, 1, &bits, &group), "do not hold a whole number");
    TU_FAILS_WITH(tern_quant_infer(64, 64 * 4, 1, &bits, &group), "out of range");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_realistic), cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_absent_and_alternatives), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_infer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
