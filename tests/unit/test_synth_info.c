/* test_synth_info.c — `tern synth`, `tern info` and `tern bench` end to end through the real binary: the
 * presets' layouts load complete, quantized and sharded checkpoints bind, a seed reproduces the bytes,
 * info lists missing and mis-shaped tensors, and bench reports every field it promises. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "models/gemma4_config.h"
#include "models/synth.h"
#include "tensor/cpu.h"
#include "testutil.h"

static const char *small_config(const char *dir) {
    static const char *text =
        "{\"architectures\": [\"Gemma4ForConditionalGeneration\"], \"text_config\": {\"vocab_size\": 8192,"
        " \"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 4, \"num_attention_heads\": 2,"
        " \"num_key_value_heads\": 1, \"head_dim\": 32, \"global_head_dim\": 64, \"hidden_size_per_layer_input\": 8,"
        " \"num_kv_shared_layers\": 1, \"sliding_window\": 16, \"layer_types\": [\"sliding_attention\","
        " \"full_attention\", \"sliding_attention\", \"full_attention\"], \"enable_moe_block\": true, \"num_experts\": 4,"
        " \"top_k_experts\": 2, \"moe_intermediate_size\": 32}}";
    return tu_write(dir, "small.json", text, strlen(text));
}

static void test_tiny_preset_complete(void **state) {
    char dir[4096], *out;
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("synth-tiny"));
    assert_int_equal(tu_runf(NULL, "%s synth --preset tiny --dtype bf16 --seed 3 %s/m >/dev/null", tu_tern_bin(), dir), 0);
    assert_int_equal(tu_runf(&out, "%s info %s/m", tu_tern_bin(), dir), 0);
    assert_non_null(strstr(out, "layers:       6 (4 sliding, 2 full): ssFssF"));
    assert_non_null(strstr(out, "layout:       hf"));
    assert_non_null(strstr(out, "kv sharing:   layers 4..5 reuse layer 3 (sliding) / 2 (full)"));
    assert_non_null(strstr(out, "tensors:      101 needed, 101 bound, complete"));
    free(out);
    static const char *files[] = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                  "chat_template.jinja", "model.safetensors"};
    for (size_t i = 0; i < 6; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/m/%s", dir, files[i]);
        assert_true(tern_is_file(p));
    }
    /* The tokenizer carries the real Gemma 4 vocabulary and its special tokens. */
    char p[4200];
    snprintf(p, sizeof p, "%s/m/tokenizer.json", dir);
    json_t *tok;
    TU_OK(tern_json_load_file(p, 1 << 26, &tok));
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    assert_int_equal(json_object_size(vocab), 262144);
    assert_int_equal(json_integer_value(json_object_get(vocab, "<|turn>")), 105);
    assert_int_equal(json_integer_value(json_object_get(vocab, "<turn|>")), 106);
    assert_int_equal(json_array_size(json_object_get(json_object_get(tok, "model"), "merges")), 514906);
    json_decref(tok);
}

/* The larger presets carry the published shapes (GEMMA4.md §2), and --layers keeps a layout's first layers. */
static void test_large_presets(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int64_t hidden, layers, heads, kv, global_kv, ffn, experts, top_k, width;
    } want[] = {{"12b", 3840, 48, 16, 8, 1, 15360, 0, 0, 0},
                {"26b-a4b", 2816, 30, 16, 8, 2, 2112, 128, 8, 704},
                {"31b", 5376, 60, 32, 16, 4, 21504, 0, 0, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *cfg;
        tern_gemma4_config c;
        TU_OK(tern_synth_config(want[i].name, &cfg));
        TU_OK(tern_gemma4_config_parse(cfg, &c));
        assert_int_equal(c.hidden_size, want[i].hidden);
        assert_int_equal(c.num_hidden_layers, want[i].layers);
        assert_int_equal(c.num_attention_heads, want[i].heads);
        assert_int_equal(c.num_key_value_heads, want[i].kv);
        assert_int_equal(c.num_global_key_value_heads, want[i].global_kv);
        assert_true(c.attention_k_eq_v);
        assert_int_equal(c.intermediate_size, want[i].ffn);
        assert_int_equal(c.head_dim, 256);
        assert_int_equal(c.global_head_dim, 512);
        assert_int_equal(c.sliding_window, 1024);
        assert_int_equal(c.enable_moe_block, want[i].experts > 0);
        assert_int_equal(c.num_experts, want[i].experts);
        assert_int_equal(c.top_k_experts, want[i].top_k);
        assert_int_equal(c.moe_intermediate_size, want[i].width);
        assert_int_equal(c.layer_types[5], TERN_LAYER_FULL);
        assert_int_equal(c.layer_types[want[i].layers - 1], TERN_LAYER_FULL);
        TU_OK(tern_synth_cut_layers(cfg, 6));
        TU_OK(tern_gemma4_config_parse(cfg, &c));
        assert_int_equal(c.num_hidden_layers, 6);
        assert_int_equal(c.layer_types[4], TERN_LAYER_SLIDING);
        TU_FAILS_WITH(tern_synth_cut_layers(cfg, 7), "--layers 7: the model has 6 layers");
        json_decref(cfg);
    }
}

static void test_quantized_sharded_deterministic(void **state) {
    char dir[4096], *out;
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("synth-q"));
    const char *cfg = small_config(dir);
    char cfgcopy[4200];
    snprintf(cfgcopy, sizeof cfgcopy, "%s", cfg);
    for (int i = 0; i < 2; i++)
        assert_int_equal(tu_runf(NULL, "%s synth --preset %s --dtype q4 --group 32 --seed 5 %s/q%d >/dev/null",
                             tu_tern_bin(), cfgcopy, dir, i), 0);
    assert_int_equal(tu_runf(NULL, "%s synth --preset %s --dtype q4 --group 32 --seed 6 %s/q2 >/dev/null",
                         tu_tern_bin(), cfgcopy, dir), 0);
    assert_int_equal(tu_runf(&out, "%s info %s/q0", tu_tern_bin(), dir), 0);
    assert_non_null(strstr(out, "layout:       mlx-vlm"));
    assert_non_null(strstr(out, "quantization: MLX"));
    assert_non_null(strstr(out, "moe:          4 experts, top 2"));
    assert_non_null(strstr(out, ", complete"));
    assert_non_null(strstr(out, "U32"));
    free(out);
    /* Same seed, same bytes; another seed, other bytes. */
    assert_int_equal(tu_runf(NULL, "cmp -s %s/q0/model.safetensors %s/q1/model.safetensors", dir, dir), 0);
    assert_int_not_equal(tu_runf(NULL, "cmp -s %s/q0/model.safetensors %s/q2/model.safetensors", dir, dir), 0);
    /* q8 binds too; f32 (about 3.5 MiB) sharded at 1 MiB loads through the index. */
    assert_int_equal(tu_runf(NULL, "%s synth --preset %s --dtype q8 %s/q8 >/dev/null && %s info %s/q8 >/dev/null",
                         tu_tern_bin(), cfgcopy, dir, tu_tern_bin(), dir), 0);
    assert_int_equal(tu_runf(NULL, "%s synth --preset %s --dtype f32 --shard-mb 1 %s/f32 >/dev/null", tu_tern_bin(),
                         cfgcopy, dir), 0);
    assert_int_equal(tu_runf(&out, "%s info %s/f32", tu_tern_bin(), dir), 0);
    assert_null(strstr(out, " 1 file(s)"));
    assert_non_null(strstr(out, ", complete"));
    free(out);
    char p[4200];
    snprintf(p, sizeof p, "%s/f32/model.safetensors.index.json", dir);
    assert_true(tern_is_file(p));
}

static void test_info_reports_problems(void **state) {
    char dir[4096], *out;
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("synth-bad"));
    const char *cfg = small_config(dir);
    char cfgcopy[4200];
    snprintf(cfgcopy, sizeof cfgcopy, "%s", cfg);
    assert_int_equal(tu_runf(NULL, "%s synth --preset %s --dtype bf16 %s/m >/dev/null", tu_tern_bin(), cfgcopy, dir), 0);
    /* Widen the MLP and drop the PLE in the config: the weights no longer fit it. */
    char p[4200];
    snprintf(p, sizeof p, "%s/m/config.json", dir);
    json_t *root;
    TU_OK(tern_json_load_file(p, 1 << 20, &root));
    json_t *tc = json_object_get(root, "text_config");
    json_object_set_new(tc, "intermediate_size", json_integer(160));
    json_object_set_new(tc, "num_hidden_layers", json_integer(5));
    json_array_append_new(json_object_get(tc, "layer_types"), json_string("sliding_attention"));
    TU_OK(tern_json_save_file(root, p));
    json_decref(root);
    assert_int_equal(tu_runf(&out, "%s info %s/m", tu_tern_bin(), dir), 1);
    assert_non_null(strstr(out, "mis-shaped: model.language_model.layers.0.mlp.gate_proj.weight: expected [160, 64], found [128, 64] BF16"));
    assert_non_null(strstr(out, "missing: model.language_model.layers.4.self_attn.q_proj.weight"));
    assert_non_null(strstr(out, "INCOMPLETE"));
    free(out);
    /* Errors a user can act on. */
    assert_int_equal(tu_runf(&out, "%s synth --preset huge --dtype bf16 %s/x 2>&1", tu_tern_bin(), dir), 1);
    assert_non_null(strstr(out, "unknown preset 'huge'"));
    free(out);
    assert_int_equal(tu_runf(&out, "%s synth --preset tiny --dtype q3 %s/x 2>&1", tu_tern_bin(), dir), 1);
    assert_non_null(strstr(out, "unknown dtype 'q3'"));
    free(out);
    assert_int_equal(tu_runf(&out, "%s info %s/nothing 2>&1", tu_tern_bin(), dir), 1);
    assert_non_null(strstr(out, "nothing: No such file or directory"));
    free(out);
}

/* bench --json: one object with the fields users script against, all consistent with each other (no timing
 * is judged: only that the numbers are there, positive and add up); with --profile, every phase of the forward
 * pass, whose products read exactly the bytes a decode step is said to stream. */
static void test_bench_json(void **state) {
    const char *dir = tu_tmpdir("bench_json");
    char *out = NULL;
    assert_int_equal(tu_runf(NULL, "%s synth --preset tiny --dtype q4 --group 32 --seed 2 %s/m >/dev/null", tu_tern_bin(), dir), 0);
    /* TERN_STREAM_TOKENS: how a benchmark compares the two ways of streaming weights on one machine */
    assert_int_equal(tu_runf(&out, "TERN_STREAM_TOKENS=3 %s bench %s/m -p 20 -n 4 --batch 3 --depth 150 --threads 2 "
                             "--profile --json",
                             tu_tern_bin(), dir), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    if (!o)
        fail_msg("bench --json printed no JSON object: %s (%s)", out, je.text);
    static const char *positive[] = {"prefill_tok_s", "decode_tok_s", "decode_aggregate_tok_s", "bytes_per_token",
                                     "bandwidth_gb_s", "decode_efficiency", "single_row_tok_s", "batch_speedup"};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) {
        json_t *v = json_object_get(o, positive[i]);
        if (!json_is_number(v) || !(json_number_value(v) > 0))
            fail_msg("bench --json: %s missing or not positive in %s", positive[i], out);
    }
    assert_int_equal(json_integer_value(json_object_get(o, "threads")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "batch")), 3);
    assert_int_equal(json_integer_value(json_object_get(o, "depth")), 150);
    assert_int_equal(json_integer_value(json_object_get(o, "stream_tokens")), 3);
    assert_true(json_is_string(json_object_get(o, "isa")));
    json_t *prof = json_object_get(o, "profile");
    assert_true(json_is_array(prof) && json_array_size(prof) == 12);
    double bytes = 0, us = 0;
    for (size_t i = 0; i < json_array_size(prof); i++) {
        json_t *e = json_array_get(prof, i);
        assert_true(json_is_string(json_object_get(e, "phase")));
        assert_true(json_number_value(json_object_get(e, "us_per_step")) >= 0);
        bytes += json_number_value(json_object_get(e, "weight_bytes_per_step"));
        us += json_number_value(json_object_get(e, "us_per_step"));
    }
    assert_true(us > 0);
    json_t *pre = json_object_get(o, "prefill_profile"); /* the prefill's phases (one pass of 20 tokens) */
    assert_true(json_is_array(pre) && json_array_size(pre) == 12);
    double pre_us = 0;
    for (size_t i = 0; i < json_array_size(pre); i++) {
        json_t *e = json_array_get(pre, i);
        assert_true(json_is_string(json_object_get(e, "phase")));
        assert_true(json_number_value(json_object_get(e, "us_per_pass")) >= 0);
        pre_us += json_number_value(json_object_get(e, "us_per_pass"));
    }
    assert_true(pre_us > 0);
    const double step_bytes = json_number_value(json_object_get(o, "bytes_per_token"));
    if (fabs(bytes - step_bytes) > 12) /* each phase's figure is rounded to a whole byte */
        fail_msg("profile: the phases read %.0f bytes per step, bytes_per_token says %.0f", bytes, step_bytes);
    const double per_row = json_number_value(json_object_get(o, "decode_tok_s"));
    const double aggregate = json_number_value(json_object_get(o, "decode_aggregate_tok_s"));
    assert_true(fabs(aggregate - 3 * per_row) <= 0.02 * aggregate + 0.01);
    json_decref(o);
    free(out);
    assert_int_equal(tu_runf(&out, "%s bench %s/m -p 0 -n 0 --batch 0 2>&1", tu_tern_bin(), dir), 2);
    free(out);
    assert_int_equal(tu_runf(&out, "%s bench %s/nothing -n 2 --batch 2 2>&1", tu_tern_bin(), dir), 1);
    assert_non_null(strstr(out, "tern bench:"));
    free(out);
}

/* stream_tokens as `tern bench --json` on dir/m reports it, with the cache folder dir/cache and `env` before it. */
static int bench_stream_tokens(const char *dir, const char *env) {
    char *out = NULL;
    assert_int_equal(tu_runf(&out, "TERN_CACHE_DIR=%s/cache %s %s bench %s/m -p 0 -n 1 --json 2>/dev/null", dir, env,
                             tu_tern_bin(), dir), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    if (!o)
        fail_msg("bench --json printed no JSON object: %s (%s)", out, je.text);
    const int n = (int)json_integer_value(json_object_get(o, "stream_tokens"));
    json_decref(o);
    free(out);
    return n;
}

/* The stream choice kept in the cache folder under this CPU's identity is what the next start takes (a model too
 * small to measure on writes none and keeps the cpuid default); a kept value out of range is ignored, and
 * TERN_STREAM_TOKENS wins over a kept one. Measuring is exercised on the full-size e2b (tests/cli/e2b_q4.sh). */
static void test_stream_choice_kept(void **state) {
    if (getenv("TERN_STREAM_TOKENS") || tern_isa_active() == TERN_ISA_PORTABLE) {
        skip(); /* the override decides, or nothing is packed for the int8 kernels */
        return;
    }
    const char *dir = tu_tmpdir("stream_choice");
    char cache[4200], name[64], path[4300];
    assert_int_equal(tu_runf(NULL, "%s synth --preset tiny --dtype q4 --seed 3 %s/m >/dev/null", tu_tern_bin(), dir), 0);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(name, sizeof name, "cpu-%016llx.stream", (unsigned long long)tern_cpu_signature());
    snprintf(path, sizeof path, "%s/%s", cache, name);
    const int def = tern_cpu_stream_tokens(); /* this process packed nothing: the cpuid default */
    assert_int_equal(bench_stream_tokens(dir, ""), def);
    assert_false(tern_is_file(path));
    const int other = def == 3 ? 2 : 3;
    char text[64];
    snprintf(text, sizeof text, "# measured\nstream_tokens %d\n", other);
    tu_write(cache, name, text, strlen(text));
    assert_int_equal(bench_stream_tokens(dir, ""), other);
    assert_int_equal(bench_stream_tokens(dir, "TERN_STREAM_TOKENS=4"), 4);
    tu_write(cache, name, "stream_tokens 9\n", 16);
    assert_int_equal(bench_stream_tokens(dir, ""), def);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_preset_complete), cmocka_unit_test(test_large_presets),
        cmocka_unit_test(test_quantized_sharded_deterministic),
        cmocka_unit_test(test_info_reports_problems),
        cmocka_unit_test(test_bench_json), cmocka_unit_test(test_stream_choice_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
