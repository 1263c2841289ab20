/* test_model_config.c — config.json -> Gemma 4 hyper-parameters: the oracle's config, defaults,
 * the KV-sharing map, and inconsistent configs rejected with the key named. */
#include <string.h>

#include "core/json_util.h"
#include "models/gemma4_config.h"
#include "testutil.h"

static TERN_MUST_CHECK tern_err *parse(const char *text, tern_gemma4_config *c) {
    json_t *root;
    TERN_TRY(tern_json_load_buf(text, strlen(text), "config.json", &root));
    tern_err *e = tern_gemma4_config_parse(root, c);
    json_decref(root);
    return e;
}

static void test_oracle_config(void **state) {
    tern_gemma4_config c;
    TU_OK(tern_gemma4_config_load(tu_testdata("oracle/tiny-v4096-f32/config.json"), &c));
    assert_int_equal(c.vocab_size, 4096);
    assert_int_equal(c.hidden_size, 128);
    assert_int_equal(c.num_hidden_layers, 8);
    assert_int_equal(c.num_attention_heads, 4);
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.num_global_key_value_heads, 2); /* null -> num_key_value_heads */
    assert_int_equal(c.head_dim, 32);
    assert_int_equal(c.global_head_dim, 64);
    assert_int_equal(c.hidden_size_per_layer_input, 32);
    assert_int_equal(c.num_kv_shared_layers, 4);
    assert_int_equal(c.sliding_window, 8);
    assert_true(c.use_double_wide_mlp);
    assert_false(c.attention_k_eq_v);
    assert_false(c.enable_moe_block);
    assert_true(c.final_logit_softcapping == 30.0);
    assert_int_equal(c.layer_types[3], TERN_LAYER_FULL);
    assert_int_equal(c.layer_types[4], TERN_LAYER_SLIDING);
    assert_int_equal(c.rope[TERN_LAYER_FULL].kind, TERN_ROPE_PROPORTIONAL);
    assert_true(c.rope[TERN_LAYER_FULL].partial_rotary_factor == 0.25);
    assert_true(c.rope[TERN_LAYER_FULL].theta == 1e6);
    assert_true(c.rope[TERN_LAYER_SLIDING].theta == 1e4);
    /* KV sharing: layers 4..7 read the last owning layer of their type (2 sliding, 3 full). */
    assert_int_equal(tern_gemma4_first_shared(&c), 4);
    assert_int_equal(tern_gemma4_kv_source(&c, 2), 2);
    assert_int_equal(tern_gemma4_kv_source(&c, 4), 2);
    assert_int_equal(tern_gemma4_kv_source(&c, 7), 3);
    assert_int_equal(tern_gemma4_layer_ffn(&c, 3), 256);
    assert_int_equal(tern_gemma4_layer_ffn(&c, 5), 512); /* double-wide on shared layers */
    /* eos ids merged from the top level [1, 106] and text_config 1. */
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_token_ids[1], 106);
    /* KV per token (bf16): sliding layers 0,1,2 own 2x2x32, full layer 3 owns 2x2x64. */
    assert_int_equal(tern_gemma4_kv_bytes_per_token(&c, 2, 0), 2 * 2 * 64 * 2);
    assert_int_equal(tern_gemma4_kv_bytes_per_token(&c, 2, 1), 2 * 2 * 64 * 2 + 3 * 2 * 2 * 32 * 2);
}

static void test_defaults_and_top_level(void **state) {
    tern_gemma4_config c;
    /* A text-only config with keys at the top level, most absent. */
    TU_OK(parse("{\"hidden_size\": 256, \"num_hidden_layers\": 6, \"final_logit_softcapping\": null}", &c));
    assert_int_equal(c.vocab_size, 262144);
    assert_int_equal(c.head_dim, 256);
    assert_int_equal(c.global_head_dim, 512);
    assert_true(c.final_logit_softcapping == 0.0); /* explicit null: no soft-cap */
    assert_true(c.rms_norm_eps == 1e-6);
    /* Without layer_types: every 5th layer full, and the last one. */
    assert_int_equal(c.layer_types[4], TERN_LAYER_FULL);
    assert_int_equal(c.layer_types[5], TERN_LAYER_FULL);
    assert_int_equal(c.layer_types[3], TERN_LAYER_SLIDING);
    assert_int_equal(c.n_eos, 1);
    assert_int_equal(c.eos_token_ids[0], 1);
    TU_OK(parse("{\"text_config\": {\"num_hidden_layers\": 2}, \"audio_config\": {\"hidden_size\": 1024}}", &c));
    assert_true(c.has_audio_tower);
    assert_true(c.final_logit_softcapping == 30.0);
}

static void test_bad_configs(void **state) {
    tern_gemma4_config c;
    TU_FAILS_WITH(parse("[1, 2]", &c), "top level must be an object");
    TU_FAILS_WITH(parse("{\"text_config\": 3}", &c), "\"text_config\" must be an object");
    TU_FAILS_WITH(parse("{\"hidden_size\": \"big\"}", &c), "\"hidden_size\" must be an integer");
    TU_FAILS_WITH(parse("{\"hidden_size\": -4}", &c), "\"hidden_size\" = -4 is out of range");
    TU_FAILS_WITH(parse("{\"num_hidden_layers\": 2, \"layer_types\": [\"full_attention\"]}", &c),
                  "\"layer_types\" has 1 entries but num_hidden_layers is 2");
    TU_FAILS_WITH(parse("{\"num_hidden_layers\": 1, \"layer_types\": [\"local\"]}", &c), "layer_types[0] must be");
    TU_FAILS_WITH(parse("{\"num_attention_heads\": 6, \"num_key_value_heads\": 4}", &c),
                  "num_attention_heads (6) is not a multiple of num_key_value_heads (4)");
    TU_FAILS_WITH(parse("{\"num_hidden_layers\": 4, \"num_kv_shared_layers\": 4}", &c),
                  "num_kv_shared_layers (4) must be below num_hidden_layers (4)");
    TU_FAILS_WITH(parse("{\"num_hidden_layers\": 3, \"num_kv_shared_layers\": 1, \"layer_types\": "
                        "[\"sliding_attention\", \"sliding_attention\", \"full_attention\"]}", &c),
                  "KV-shared layer 2 is full_attention but no earlier layer of that type owns a cache");
    TU_FAILS_WITH(parse("{\"enable_moe_block\": true, \"num_experts\": 4, \"top_k_experts\": 9, "
                        "\"moe_intermediate_size\": 8}", &c),
                  "top_k_experts (9) must be in [1, num_experts = 4]");
    TU_FAILS_WITH(parse("{\"enable_moe_block\": true}", &c), "enable_moe_block needs num_experts");
    TU_FAILS_WITH(parse("{\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"yarn\"}}}", &c),
                  "rope_type \"yarn\" is not supported");
    TU_FAILS_WITH(parse("{\"rope_parameters\": {\"sliding_attention\": {\"rope_theta\": -1}}}", &c),
                  "rope_theta must be > 0");
    TU_FAILS_WITH(parse("{\"head_dim\": 15}", &c), "must be even");
    TU_FAILS_WITH(parse("{\"hidden_activation\": \"relu\"}", &c), "hidden_activation must be");
    TU_FAILS_WITH(parse("{\"eos_token_id\": [1, \"x\"]}", &c), "\"eos_token_id\"[1] must be");
    TU_FAILS_WITH(parse("{\"attention_k_eq_v\": 1}", &c), "\"attention_k_eq_v\" must be true or false");
    TU_FAILS_WITH(parse("{\"rms_norm_eps\": 0}", &c), "rms_norm_eps must be > 0");
    TU_FAILS_WITH(tern_gemma4_config_load("/nonexistent/config.json", &c), "/nonexistent/config.json: cannot open");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_config),
        cmocka_unit_test(test_defaults_and_top_level),
        cmocka_unit_test(test_bad_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
