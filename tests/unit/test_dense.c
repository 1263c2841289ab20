/* test_dense.c — the dense families (Llama 3, Qwen 2, Qwen 3) against llama.cpp on the GGUF files its converter and
 * llama-quantize wrote of tern's tiny random models (scripts/gguf/dense-files.sh), the same models from their
 * safetensors (f32, bf16, MLX q8/q4), Mistral's sliding window against a float reference, the engine's drafts and
 * prefix cache on them, and the errors a user sees for checkpoints tern cannot run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json_util.h"
#include "core/threadpool.h"
#include "models/model.h"
#include "models/quantize.h"
#include "models/synth.h"
#include "tern/tern.h"
#include "testutil.h"

#define N_IDS 48
#define VOCAB 2048

static tern_pool *pool;

static int setup(void **state) {
    (void)state;
    return tern_pool_create(2, &pool) ? -1 : 0;
}

static int teardown(void **state) {
    (void)state;
    tern_pool_destroy(pool);
    return 0;
}

static const char *const FAMILIES[] = {"llama", "qwen2", "qwen3", "mistral"}; /* Mistral: no GGUF, see below */
static const uint64_t SEEDS[] = {1, 2, 3, 4}; /* as dense-files.sh and the reference's golden were made */

/* The prompt of the goldens: (i * 739 + 11) mod 2048. */
static void test_ids(int32_t ids[N_IDS]) {
    for (int i = 0; i < N_IDS; i++)
        ids[i] = (i * 739 + 11) % VOCAB;
}

/* Logits [N_IDS][VOCAB] of every position of the test prompt, its tokens fed as prompt tokens or as generated ones
 * (which kernels serve them). */
static void run(tern_lm *m, uint8_t prefill, float *logits) {
    int32_t ids[N_IDS];
    test_ids(ids);
    tern_kv *kv;
    TU_OK(tern_lm_kv_create(m, 1, N_IDS, N_IDS, TERN_KV_F32, TERN_KV_F32, &kv));
    int seq = 0;
    int64_t n = N_IDS;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_ALL, .row_prefill = &prefill};
    TU_OK(tern_lm_forward(m, kv, pool, &b, logits, NULL));
    tern_kv_free(kv);
}

static int64_t argmax(const float *v, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    float *v = malloc(n * sizeof *v);
    assert_int_equal(fread(v, sizeof *v, n, f), n);
    fclose(f);
    return v;
}

/* A GGUF file against llama.cpp's logits for it, as prompt and as generated tokens. Float files: every position
 * within 0.05 and the same argmax. Block-quantized files: ggml quantizes the activations of these products and so
 * does tern, code for code; a code differs only where an input upstream (summed in another order) sits within a
 * float rounding of a rounding boundary, which moves that position by up to tenths in these tiny random models. So:
 * at most 3 of the 48 positions beyond 0.1, none beyond 1 (test_gemma4's criterion), and every argmax the same but
 * at a near-tie: where llama.cpp's two best logits are closer than the position's own deviation (seen once: Qwen 2
 * Q4_K_M on the int8 kernels, top two 0.03 apart, deviation 0.075). */
static void expect_llama_logits(const char *family, const char *format) {
    char model[128], golden[128];
    snprintf(model, sizeof model, "gguf/dense/tiny-%s-%s.gguf", family, format);
    snprintf(golden, sizeof golden, "gguf/dense/tiny-%s.%s.logits.bin", family, format);
    tern_lm *m;
    TU_OK(tern_lm_load(tu_testdata(model), 2, &m));
    assert_string_equal(tern_lm_desc_of(m)->model_type, family);
    float *logits = malloc(sizeof(float) * N_IDS * VOCAB);
    float *gl = read_f32(tu_testdata(golden), (size_t)N_IDS * VOCAB);
    const int quantized = strcmp(format, "f32") != 0;
    for (int prefill = 0; prefill < 2; prefill++) {
        run(m, (uint8_t)prefill, logits);
        double worst = 0;
        int beyond = 0, argmax_differs = 0, ties = 0;
        for (int64_t p = 0; p < N_IDS; p++) {
            const float *g = gl + p * VOCAB;
            double d = 0;
            for (int64_t v = 0; v < VOCAB; v++)
                d = fmax(d, fabs(logits[p * VOCAB + v] - g[v]));
            worst = fmax(worst, d);
            beyond += d > 0.1;
            const int64_t mine = argmax(logits + p * VOCAB, VOCAB), theirs = argmax(g, VOCAB);
            if (mine != theirs && quantized && g[theirs] - g[mine] < d)
                ties++;
            else
                argmax_differs += mine != theirs;
        }
        print_message("%s on %s as %s tokens: max |dlogit| %.4f, positions beyond 0.1: %d of %d, argmax differs at "
                      "%d (and at %d near-ties)\n", model, tern_isa_name(tern_isa_active()), prefill ? "prompt" :
                      "generated", worst, beyond, N_IDS, argmax_differs, ties);
        assert_int_equal(argmax_differs, 0);
        if (quantized)
            assert_true(beyond <= 3 && worst < 1.0);
        else
            assert_true(worst < 0.05);
    }
    free(logits);
    free(gl);
    tern_lm_free(m);
}

static void test_gguf_parity(void **state) {
    tu_isa_begin(state);
    static const char *const formats[] = {"f32", "q8_0", "q4_k_m"};
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 3; k++)
            expect_llama_logits(FAMILIES[f], formats[k]);
}

/* `tern perplexity` on the families' GGUF files, one window over the test ids (kept as given: the first window does
 * not put BOS in place of its first token), every token after the first scored: exp of the mean negative
 * log-likelihood that llama.cpp's own logits for the file give — F32 within 1e-5, Q8_0 within 1e-3 (relative;
 * seen: 1e-7 and 2.2e-4). */
static void test_perplexity(void **state) {
    (void)state;
    int32_t ids[N_IDS];
    test_ids(ids);
    char list[N_IDS * 8] = "";
    for (int i = 0, at = 0; i < N_IDS; i++)
        at += snprintf(list + at, sizeof list - (size_t)at, "%s%d", i ? "," : "", ids[i]);
    static const char *const formats[] = {"f32", "q8_0"};
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 2; k++) {
            char model[128], golden[128];
            snprintf(model, sizeof model, "gguf/dense/tiny-%s-%s.gguf", FAMILIES[f], formats[k]);
            snprintf(golden, sizeof golden, "gguf/dense/tiny-%s.%s.logits.bin", FAMILIES[f], formats[k]);
            float *gl = read_f32(tu_testdata(golden), (size_t)N_IDS * VOCAB);
            double nll = 0;
            for (int t = 0; t + 1 < N_IDS; t++) {
                const float *g = gl + (size_t)t * VOCAB;
                double mx = g[0], sum = 0;
                for (int v = 1; v < VOCAB; v++)
                    mx = fmax(mx, g[v]);
                for (int v = 0; v < VOCAB; v++)
                    sum += exp(g[v] - mx);
                nll += mx + log(sum) - g[ids[t + 1]];
            }
            free(gl);
            const double want = exp(nll / (N_IDS - 1));
            char path[4096];
            snprintf(path, sizeof path, "%s", tu_testdata(model));
            json_t *j = tu_run_json("'%s' perplexity '%s' --ids %s -c %d --json 2>/dev/null", tu_tern_bin(), path, list,
                                    N_IDS);
            const double got = json_real_value(json_object_get(j, "perplexity"));
            print_message("%s %s: perplexity %.6f, from llama.cpp's logits %.6f\n", FAMILIES[f], formats[k], got, want);
            assert_true(fabs(got / want - 1) < (k == 0 ? 1e-5 : 1e-3));
            json_decref(j);
        }
}

/* The family's tiny model written again as safetensors by `tern synth` (the seed the GGUF files were made from). */
static void synth(int family, tern_synth_dtype dt, char *dir) {
    char cfg_path[128];
    snprintf(cfg_path, sizeof cfg_path, "gguf/dense/tiny-%s.json", FAMILIES[family]);
    json_t *cfg;
    TU_OK(tern_synth_config(tu_testdata(cfg_path), &cfg));
    char name[64];
    snprintf(name, sizeof name, "dense-%s-%d", FAMILIES[family], (int)dt);
    snprintf(dir, 4096, "%s", tu_tmpdir(name));
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s", tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"));
    tern_synth_opts o = {.dtype = dt, .group = 32, .seed = SEEDS[family], .vocab_gguf = vocab, .shard_bytes = 1u << 30};
    TU_OK(tern_synth_write(cfg, &o, dir));
    json_decref(cfg);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* From float32 safetensors the logits are the F32 GGUF's to float rounding (the GGUF's Llama Q/K rows reordered for
 * RoPE over adjacent pairs and its llama3 frequencies stored as factors change only the order of roundings); from
 * bf16 and MLX q8 / q4 checkpoints of the same weights they stay near, by the storage's precision. */
static void test_safetensors(void **state) {
    (void)state;
    const size_t n = (size_t)N_IDS * VOCAB;
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    for (int f = 0; f < 3; f++) {
        char model[128];
        snprintf(model, sizeof model, "gguf/dense/tiny-%s-f32.gguf", FAMILIES[f]);
        tern_lm *m;
        TU_OK(tern_lm_load(tu_testdata(model), 2, &m));
        run(m, 1, ref);
        tern_lm_free(m);
        static const struct {
            tern_synth_dtype dt;
            double within;
        } forms[] = {{TERN_SYNTH_F32, 1e-3}, {TERN_SYNTH_BF16, 0.15}, {TERN_SYNTH_Q8, 0.4}, {TERN_SYNTH_Q4, 2.5}};
        for (int k = 0; k < 4; k++) {
            char dir[4096];
            synth(f, forms[k].dt, dir);
            TU_OK(tern_lm_load(dir, 2, &m));
            run(m, 1, got);
            tern_lm_free(m);
            const double d = max_diff(ref, got, n);
            int same = 0;
            for (int p = 0; p < N_IDS; p++)
                same += argmax(ref + p * VOCAB, VOCAB) == argmax(got + p * VOCAB, VOCAB);
            print_message("%s, safetensors %d against the F32 GGUF: max |dlogit| %.5f, argmax the same at %d of %d\n",
                          FAMILIES[f], (int)forms[k].dt, d, same, N_IDS);
            assert_true(d < forms[k].within);
            if (forms[k].dt == TERN_SYNTH_F32)
                assert_int_equal(same, N_IDS);
        }
    }
    free(ref);
    free(got);
}

/* Mistral's sliding window (every layer attends over the last 8 positions; llama.cpp's llama architecture has no
 * window, so no GGUF golden): the float32 checkpoint against an independent float64 numpy reference of Hugging
 * Face's definitions (scripts/dense/reference.py; without the window its logits move by up to 6.7). */
static void test_sliding_window_reference(void **state) {
    (void)state;
    char dir[4096];
    synth(3, TERN_SYNTH_F32, dir);
    tern_lm *m;
    TU_OK(tern_lm_load(dir, 2, &m));
    assert_int_equal(tern_lm_desc_of(m)->sliding_window, 8);
    float *logits = malloc(sizeof(float) * N_IDS * VOCAB);
    float *ref = read_f32(tu_testdata("gguf/dense/tiny-mistral.ref.logits.bin"), (size_t)N_IDS * VOCAB);
    for (int prefill = 0; prefill < 2; prefill++) {
        run(m, (uint8_t)prefill, logits);
        const double d = max_diff(logits, ref, (size_t)N_IDS * VOCAB);
        print_message("mistral, window 8, as %s tokens: max |dlogit| %.6f from the reference\n",
                      prefill ? "prompt" : "generated", d);
        assert_true(d < 1e-3);
        for (int p = 0; p < N_IDS; p++)
            assert_int_equal(argmax(logits + p * VOCAB, VOCAB), argmax(ref + p * VOCAB, VOCAB));
    }
    free(logits);
    free(ref);
    tern_lm_free(m);
}

/* Writes config.json (the family's test config with `key` set to the JSON `value`) beside the f32 weights of the
 * family's tiny model, in a directory of its own. */
static const char *with_config(int family, const char *key, const char *value) {
    static char dir[4096];
    char src[4096], path[4200];
    synth(family, TERN_SYNTH_F32, src);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("dense-edited"));
    snprintf(path, sizeof path, "%s/config.json", src);
    json_t *cfg;
    TU_OK(tern_json_load_file(path, 1 << 20, &cfg));
    json_object_set_new(cfg, key, json_loads(value, JSON_DECODE_ANY, NULL));
    char *text = json_dumps(cfg, 0);
    tu_write(dir, "config.json", text, strlen(text));
    free(text);
    json_decref(cfg);
    char link[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    snprintf(link, sizeof link, "%s/model.safetensors", dir);
    assert_int_equal(symlink(path, link), 0);
    return dir;
}

static void test_bad_checkpoints(void **state) {
    (void)state;
    tern_lm *m = NULL;
    TU_FAILS_WITH(tern_lm_load(with_config(0, "model_type", "\"falcon\""), 2, &m),
                  "model_type \"falcon\" is not one tern runs (it runs: gemma4, gemma4_text, llama, mistral, qwen2, "
                  "qwen3)");
    tern_lm_spec *s;
    TU_OK(tern_lm_spec_load(with_config(0, "intermediate_size", "320"), &s));
    char *report = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&report, &len);
    tern_lm_spec_report(s, f);
    fclose(f);
    assert_non_null(strstr(report, "mis-shaped: model.layers.0.mlp.gate_proj.weight: expected [320, 128], found "
                                   "[256, 128]"));
    free(report);
    tern_lm_spec_free(s);
    TU_FAILS_WITH(tern_lm_load(with_config(0, "intermediate_size", "320"), 2, &m), "tensors are missing or mis-shaped");
    TU_FAILS_WITH(tern_lm_load(with_config(0, "rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4}"), 2, &m),
                  "\"rope_scaling\" type \"yarn\" is not one tern runs (it runs: default, linear, llama3)");
    TU_FAILS_WITH(tern_lm_load(with_config(2, "hidden_act", "\"gelu\""), 2, &m), "\"hidden_act\" must be \"silu\"");
    TU_FAILS_WITH(tern_lm_load(with_config(1, "num_key_value_heads", "3"), 2, &m),
                  "num_attention_heads 4 is not a multiple of num_key_value_heads 3");
    assert_null(m);
}

/* `tern quantize` writes an MLX q8 checkpoint of a dense family that loads and stays near its float source. */
static void test_quantize(void **state) {
    (void)state;
    const size_t n = (size_t)N_IDS * VOCAB;
    float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    for (int f = 0; f < 3; f++) {
        char src[4096], out[4096];
        synth(f, TERN_SYNTH_F32, src);
        snprintf(out, sizeof out, "%s", tu_tmpdir("dense-quantized"));
        TU_OK(tern_quantize_model(src, out, 8, 32, 1u << 30));
        tern_lm *m;
        const char *dirs[2] = {src, out};
        float *res[2] = {ref, got};
        for (int k = 0; k < 2; k++) {
            TU_OK(tern_lm_load(dirs[k], 2, &m));
            run(m, 1, res[k]);
            tern_lm_free(m);
        }
        const double d = max_diff(ref, got, n);
        print_message("%s quantized to MLX q8: max |dlogit| %.4f against its float source\n", FAMILIES[f], d);
        assert_true(d > 0 && d < 0.4);
    }
    free(ref);
    free(got);
}

enum { GEN = 16, REQS = 3 };

/* Greedy output of REQS requests (prompts cut from the test ids) on an engine over `target` with options o; returns
 * the tokens drafted (by any source). */
static unsigned long long generate(tern_model *target, const tern_engine_opts *o, int32_t out[REQS][GEN]) {
    tern_engine *e;
    TU_OK(tern_engine_create(target, o, &e));
    int32_t ids[N_IDS];
    test_ids(ids);
    tern_stream *s[REQS];
    for (int k = 0; k < REQS; k++) {
        tern_request r;
        tern_request_default(&r);
        r.prompt_ids = ids + 4 * k;
        r.n_prompt_ids = 20;
        r.max_tokens = GEN;
        r.ignore_eos = 1;
        r.sampling.temperature = 0;
        TU_OK(tern_engine_submit(e, &r, NULL, NULL, &s[k], NULL));
    }
    for (int k = 0; k < REQS; k++) {
        tern_event ev;
        int got = 0;
        while (tern_stream_next(s[k], &ev, 60000) == 1)
            if (ev.kind == TERN_EV_TOKEN)
                out[k][got++] = ev.token;
        assert_int_equal(got, GEN);
        tern_stream_free(s[k]);
    }
    tern_metrics mt;
    tern_engine_metrics(e, &mt);
    tern_engine_destroy(e);
    unsigned long long drafted = 0;
    for (size_t i = 0; i < sizeof mt.draft_tokens / sizeof mt.draft_tokens[0]; i++)
        drafted += mt.draft_tokens[i];
    return drafted;
}

/* The engine serves the dense families unchanged: greedy output is the same with drafts from a smaller model of
 * the same family and vocabulary (one layer) and from n-gram lookup, solo and batched, with bf16 and q8_0 K/V. */
static void test_engine_drafts(void **state) {
    (void)state;
    char target_dir[4096], draft_dir[4096];
    synth(2, TERN_SYNTH_F32, target_dir);
    snprintf(draft_dir, sizeof draft_dir, "%s", with_config(2, "num_hidden_layers", "1"));
    char vocab_src[4200], cmd[9000];
    snprintf(vocab_src, sizeof vocab_src, "%s", target_dir);
    snprintf(cmd, sizeof cmd, "cp '%s'/tokenizer*.json '%s'/", vocab_src, draft_dir);
    assert_int_equal(tu_run(cmd, NULL), 0);
    tern_model_opts mo = {.model_dir = target_dir, .threads = 2};
    tern_model *target;
    TU_OK(tern_model_load(&mo, &target));
    static const char *const kv[2] = {"bf16", "q8_0"};
    for (int t = 0; t < 2; t++)
        for (int rows = 1; rows <= 3; rows += 2) {
            tern_engine_opts o;
            tern_engine_opts_default(&o);
            o.parallel = rows;
            o.ctx = 128;
            o.prefill_chunk = 16;
            o.cache_type_k = o.cache_type_v = kv[t];
            o.draft_max = -1;
            int32_t plain[REQS][GEN], model_drafts[REQS][GEN], ngram_drafts[REQS][GEN];
            assert_int_equal(generate(target, &o, plain), 0);
            o.draft_max = 4;
            o.draft_model = draft_dir;
            const unsigned long long by_model = generate(target, &o, model_drafts);
            o.draft_model = NULL;
            o.draft_ngram = 1;
            const unsigned long long by_ngram = generate(target, &o, ngram_drafts);
            print_message("KV %s, %d rows: %llu tokens drafted by the one-layer model, %llu by n-gram lookup\n", kv[t],
                          rows, by_model, by_ngram);
            assert_true(by_model > 0);
            assert_memory_equal(plain, model_drafts, sizeof plain);
            assert_memory_equal(plain, ngram_drafts, sizeof plain);
        }
    tern_model_free(target);
}

/* The prefix cache serves a dense model's repeated prompt: the second request of the same 40 tokens takes its
 * leading block from the cache (block 16) and generates what the first did. */
static void test_prefix_cache(void **state) {
    (void)state;
    char dir[4096];
    synth(0, TERN_SYNTH_F32, dir);
    tern_model_opts mo = {.model_dir = dir, .threads = 2};
    tern_model *m;
    TU_OK(tern_model_load(&mo, &m));
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 1;
    o.ctx = 128;
    o.prefix_block = 16;
    tern_engine *e;
    TU_OK(tern_engine_create(m, &o, &e));
    int32_t ids[N_IDS], out[2][GEN];
    test_ids(ids);
    int64_t cached[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        tern_request r;
        tern_request_default(&r);
        r.prompt_ids = ids;
        r.n_prompt_ids = 40;
        r.max_tokens = GEN;
        r.ignore_eos = 1;
        r.sampling.temperature = 0;
        tern_stream *s;
        TU_OK(tern_engine_submit(e, &r, NULL, NULL, &s, NULL));
        tern_event ev;
        int got = 0;
        while (tern_stream_next(s, &ev, 60000) == 1) {
            if (ev.kind == TERN_EV_TOKEN)
                out[k][got++] = ev.token;
            else
                cached[k] = ev.usage.cached_tokens;
        }
        tern_stream_free(s);
        assert_int_equal(got, GEN);
    }
    print_message("cached prompt tokens: %lld, then %lld\n", (long long)cached[0], (long long)cached[1]);
    assert_int_equal(cached[0], 0);
    assert_true(cached[1] >= 32);
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    tern_engine_destroy(e);
    tern_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_ISA_TESTS(test_gguf_parity),
        cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_perplexity),
        cmocka_unit_test(test_sliding_window_reference),
        cmocka_unit_test(test_bad_checkpoints),
        cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_engine_drafts),
        cmocka_unit_test(test_prefix_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
