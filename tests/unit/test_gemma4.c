/* test_gemma4.c — the text model against the independent oracle (tests/data/oracle), and the
 * KV cache: incremental decode equals a full recompute well past the sliding window, bf16 KV stays
 * close to f32 KV, and quantized checkpoints agree with their dequantized f32 twins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/half.h"
#include "core/json_util.h"
#include "core/threadpool.h"
#include "formats/safetensors.h"
#include "models/gemma4.h"
#include "models/gemma4_weights.h"
#include "models/model.h"
#include "models/pack_cache.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"
#include "tensor/qpack.h"
#include "models/synth.h"
#include "testutil.h"

static tern_pool *pool;

static int setup(void **state) { return tern_pool_create(2, &pool) ? -1 : 0; }
static int teardown(void **state) {
    tern_pool_destroy(pool);
    return 0;
}

static float *read_f32(const char *path, size_t n) {
    char *buf;
    size_t len;
    TU_OK(tern_read_file(path, 1 << 28, &buf, &len));
    assert_int_equal(len, n * sizeof(float));
    return (float *)buf;
}

/* Runs ids through a fresh sequence in one forward; logits/hidden for every position. */
/* One forward over ids with logits at every position, the tokens taken as prompt tokens (prefill 1) or as
 * generated ones (0: the kernels of decoding, as speculative verification runs them). */
static void run_kind(tern_gemma4 *m, tern_kv_type kvdt, const int32_t *ids, int64_t n, float *logits, float *hidden,
                     uint8_t prefill) {
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, n, n, kvdt, kvdt, &kv));
    int seq = 0;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_ALL, .row_prefill = &prefill};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b, logits, hidden));
    TU_OK(tern_batch_commit(kv, &b));
    tern_kv_free(kv);
}

static void run_all(tern_gemma4 *m, tern_kv_type kvdt, const int32_t *ids, int64_t n, float *logits, float *hidden) {
    run_kind(m, kvdt, ids, n, logits, hidden, n > 1);
}

static int64_t argmax(const float *v, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* The golden logits of an independent implementation: all 32 positions within 0.05, same argmax — from the
 * safetensors checkpoint and from the GGUF file llama.cpp's converter made of it. */
static void test_oracle_parity(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    json_t *index;
    TU_OK(tern_json_load_file(tu_testdata("oracle/index.json"), 1 << 20, &index));
    json_t *cs = json_array_get(json_object_get(index, "cases"), 0), *jids = json_object_get(cs, "token_ids");
    int64_t n = (int64_t)json_array_size(jids);
    assert_int_equal(n, 32);
    int32_t ids[32];
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
    json_decref(index);
    static const char *const models[] = {"oracle/tiny-v4096-f32", "gguf/tiny-v4096-f32.gguf"};
    for (int k = 0; k < 2; k++) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tu_testdata(models[k]), &m));
    const int64_t V = 4096, H = 128;
    tern_isa_set(isa);
    float *logits = malloc(sizeof(float) * (size_t)(n * V)), *hidden = malloc(sizeof(float) * (size_t)(n * H));
    run_all(m, TERN_KV_F32, ids, n, logits, hidden);
    float *gl = read_f32(tu_testdata("oracle/tiny-v4096.f32gguf.logits.bin"), (size_t)(n * V));
    float *gh = read_f32(tu_testdata("oracle/tiny-v4096.f32gguf.hidden.bin"), (size_t)(n * H));
    double dl = 0, dh = 0;
    for (int64_t p = 0; p < n; p++) {
        assert_int_equal(argmax(logits + p * V, V), argmax(gl + p * V, V));
        for (int64_t v = 0; v < V; v++)
            dl = fmax(dl, fabs(logits[p * V + v] - gl[p * V + v]));
        for (int64_t i = 0; i < H; i++)
            dh = fmax(dh, fabs(hidden[p * H + i] - gh[p * H + i]));
    }
    print_message("oracle, %s on %s: max |dlogit| = %.4f, max |dhidden| = %.4f\n", models[k], tern_isa_name(isa), dl,
                  dh);
    assert_true(dl < 0.05);
    assert_true(dh < 0.01); /* hidden std is ~1; the reference's fp16 GELU table moves it by ~0.004 */
    free(logits);
    free(hidden);
    free(gl);
    free(gh);
    tern_gemma4_free(m);
    }
}

/* The 32 token ids of the oracle case (tests/data/oracle/index.json). */
static void oracle_ids(int32_t ids[32]) {
    json_t *index;
    TU_OK(tern_json_load_file(tu_testdata("oracle/index.json"), 1 << 20, &index));
    json_t *jids = json_object_get(json_array_get(json_object_get(index, "cases"), 0), "token_ids");
    assert_int_equal(json_array_size(jids), 32);
    for (int64_t i = 0; i < 32; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
    json_decref(index);
}

/* A GGUF file (tests/data/MODEL) against llama.cpp's logits for it (GOLDEN) at the oracle's 32 ids, the tokens
 * taken as a prompt and as generated ones (both roles: ggml's block products on the portable path, the int8
 * kernels on the SIMD paths for Q4_0 / Q8_0). Float files: every position within 0.05, as the oracle's. Block-
 * quantized files: ggml quantizes the activations of these products (Q8_0 blocks for Q4_0/Q8_0, Q8_K for the
 * K-quants) and so does tern, code for code; a code then differs only where an input upstream (attention, norms:
 * summed in another order) sits within a float rounding of a rounding boundary. Such a flip moves that position's
 * logits by up to ~0.5 in these tiny random models, which amplify everything. So: every argmax the same, at most 2
 * of the 32 positions beyond 0.1 (on the paths measured, 0 to 2, the rest agree to 1e-4), none beyond 1. A wrong
 * layout or a missed activation quantization moves every position by tenths to units. */
static void expect_llama_logits(tern_isa isa, const char *model, const char *golden, int quantized) {
    int32_t ids[32];
    oracle_ids(ids);
    const int64_t n = 32, V = 4096;
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tu_testdata(model), &m));
    tern_isa_set(isa);
    float *logits = malloc(sizeof(float) * (size_t)(n * V)), *gl = read_f32(tu_testdata(golden), (size_t)(n * V));
    for (int prefill = 0; prefill < 2; prefill++) {
        run_kind(m, TERN_KV_F32, ids, n, logits, NULL, (uint8_t)prefill);
        double worst = 0, typical = 0;
        int beyond = 0;
        for (int64_t p = 0; p < n; p++) {
            assert_int_equal(argmax(logits + p * V, V), argmax(gl + p * V, V));
            double d = 0;
            for (int64_t v = 0; v < V; v++)
                d = fmax(d, fabs(logits[p * V + v] - gl[p * V + v]));
            worst = fmax(worst, d);
            beyond += d > 0.1;
            if (d <= 0.1)
                typical = fmax(typical, d);
        }
        print_message("%s on %s as %s tokens: max |dlogit| %.4f, positions beyond 0.1: %d of 32, the others within "
                      "%.5f\n", model, tern_isa_name(isa), prefill ? "prompt" : "generated", worst, beyond, typical);
        if (quantized)
            assert_true(beyond <= 2 && worst < 1.0);
        else
            assert_true(worst < 0.05);
    }
    free(logits);
    free(gl);
    tern_gemma4_free(m);
}

/* The block-quantized GGUF files llama-quantize made of the oracle model against llama.cpp's logits for them. */
static void test_gguf_quantized_parity(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    expect_llama_logits(isa, "gguf/tiny-v4096-q8_0.gguf", "oracle/tiny-v4096.q8_0gguf.logits.bin", 1);
    expect_llama_logits(isa, "gguf/tiny-v4096-q4_0.gguf", "gguf/tiny-v4096.q4_0gguf.logits.bin", 1);
    expect_llama_logits(isa, "gguf/tiny-v4096-q4_k_m.gguf", "gguf/tiny-v4096.q4_k_mgguf.logits.bin", 1);
}

/* Gemma 4's larger layouts from GGUF files llama.cpp's converter wrote (scripts/gguf/moe-kev-files.sh): K=V
 * full-attention layers with their own KV head count (tiny-kev, as the 31B), and experts beside the dense MLP
 * (tiny-moe, as the 26B-A4B: fused gate-up experts, and the Q8_0 file again with gate and up apart), against
 * llama.cpp's logits for each file. */
static void test_gguf_kev_moe_parity(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const char *const files[] = {"kev-f32", "kev-q8_0", "kev-q4_k_m", "moe-f32", "moe-q8_0", "moe-q4_k_m",
                                        "moe-q8_0-split"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char model[64], golden[96];
        const char *fmt = strchr(files[i], '-') + 1;
        snprintf(model, sizeof model, "gguf/tiny-%s.gguf", files[i]);
        snprintf(golden, sizeof golden, "gguf/tiny-%.3s.%sgguf.logits.bin", files[i], fmt);
        expect_llama_logits(isa, model, golden, strcmp(fmt, "f32") != 0);
    }
}

/* The same K=V and MoE models from their float32 safetensors and from the F32 GGUF llama.cpp's converter made of
 * them give the same logits: the GGUF reader maps every tensor and hyper-parameter to the one forward. (GGUF models
 * take ggml's GELU table; the checkpoint is told to as well, through a copy of its config.) */
static void test_gguf_equals_safetensors(void **state) {
    (void)state;
    int32_t ids[32];
    oracle_ids(ids);
    const int64_t n = 32, V = 4096;
    static const char *const names[] = {"kev", "moe"};
    for (int k = 0; k < 2; k++) {
        char src[64], dir[4096];
        snprintf(src, sizeof src, "gguf/tiny-%s-f32", names[k]);
        snprintf(dir, sizeof dir, "%s", tu_tmpdir(names[k]));
        char st_dir[4096], path[4200];
        assert_non_null(realpath(tu_testdata(src), st_dir));
        snprintf(path, sizeof path, "%s/config.json", st_dir);
        json_t *cfg;
        TU_OK(tern_json_load_file(path, 1 << 20, &cfg));
        json_object_set_new(json_object_get(cfg, "text_config"), "tern_gelu_f16_table", json_true());
        char *text = json_dumps(cfg, 0);
        tu_write(dir, "config.json", text, strlen(text));
        free(text);
        json_decref(cfg);
        char link[4200];
        snprintf(link, sizeof link, "%s/model.safetensors", dir);
        snprintf(path, sizeof path, "%s/model.safetensors", st_dir);
        assert_int_equal(symlink(path, link), 0);
        float *a = malloc(sizeof(float) * (size_t)(n * V)), *b = malloc(sizeof(float) * (size_t)(n * V));
        snprintf(src, sizeof src, "gguf/tiny-%s-f32.gguf", names[k]);
        const char *paths[2] = {dir, tu_testdata(src)};
        float *out[2] = {a, b};
        for (int j = 0; j < 2; j++) {
            tern_gemma4 *m;
            TU_OK(tern_gemma4_load(paths[j], &m));
            run_all(m, TERN_KV_F32, ids, n, out[j], NULL);
            tern_gemma4_free(m);
        }
        double d = 0;
        for (int64_t i = 0; i < n * V; i++)
            d = fmax(d, fabs(a[i] - b[i]));
        print_message("tiny-%s: safetensors vs GGUF F32: max |dlogit| %.2g\n", names[k], d);
        assert_true(d < 1e-5);
        free(a);
        free(b);
    }
}

/* The experts run once per pass over the tokens routed to each: a row's logits do not depend on the rows beside it.
 * Two prompts and a generated token in one forward give, bit for bit, what each gives alone (on every path, MoE
 * weights float, int8-packed and in ggml blocks). */
static void test_moe_batched_equals_solo(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    static const char *const files[] = {"gguf/tiny-moe-f32.gguf", "gguf/tiny-moe-q8_0.gguf", "gguf/tiny-moe-q4_k_m.gguf"};
    int32_t ids[32];
    oracle_ids(ids);
    const int64_t V = 4096;
    for (int f = 0; f < 3; f++) {
        tern_gemma4 *m;
        TU_OK(tern_gemma4_load(tu_testdata(files[f]), &m));
        tern_isa_set(isa);
        /* rows: 12 prompt tokens, 9 prompt tokens, and 1 generated token after a 20-token context */
        const int64_t n_tok[3] = {12, 9, 1};
        const uint8_t kinds[3] = {1, 1, 0};
        const int32_t *row_ids[3] = {ids, ids + 12, ids + 21};
        float *solo = malloc(sizeof(float) * (size_t)(22 * V)), *all = malloc(sizeof(float) * (size_t)(22 * V));
        tern_kv *kv;
        TU_OK(tern_gemma4_kv_create(m, 6, 64, 32, TERN_KV_F32, TERN_KV_F32, &kv));
        int64_t ctx = 20;
        for (int s = 2; s < 6; s += 3) { /* the generated row's context, in sequences 2 (solo) and 5 (batched) */
            uint8_t prompt = 1;
            tern_batch b = {.n_rows = 1, .seq = &s, .n_tok = &ctx, .ids = ids, .out = TERN_OUT_NONE,
                            .row_prefill = &prompt};
            TU_OK(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL));
            TU_OK(tern_batch_commit(kv, &b));
        }
        static const int solo_seq[3] = {0, 1, 2};
        for (int r = 0, at = 0; r < 3; at += (int)n_tok[r], r++) {
            tern_batch b = {.n_rows = 1, .seq = &solo_seq[r], .n_tok = &n_tok[r], .ids = row_ids[r],
                            .out = TERN_OUT_ALL, .row_prefill = &kinds[r]};
            TU_OK(tern_gemma4_forward(m, kv, pool, &b, solo + at * V, NULL));
            TU_OK(tern_batch_commit(kv, &b));
        }
        int32_t cat[22];
        memcpy(cat, ids, 21 * sizeof *cat);
        cat[21] = ids[21];
        const int seqs[3] = {3, 4, 5};
        tern_batch b = {.n_rows = 3, .seq = seqs, .n_tok = n_tok, .ids = cat, .out = TERN_OUT_ALL, .row_prefill = kinds};
        TU_OK(tern_gemma4_forward(m, kv, pool, &b, all, NULL));
        TU_OK(tern_batch_commit(kv, &b));
        assert_memory_equal(solo, all, sizeof(float) * (size_t)(22 * V));
        free(solo);
        free(all);
        tern_kv_free(kv);
        tern_gemma4_free(m);
    }
}

/* tests/data/gguf/NAME with the u32 value of metadata key KEY set to v, written to a file of its own; the path. */
static const char *gguf_with_u32(const char *name, const char *key, uint32_t v) {
    char *buf;
    size_t len;
    char src[128];
    snprintf(src, sizeof src, "gguf/%s", name);
    TU_OK(tern_read_file(tu_testdata(src), 1 << 26, &buf, &len));
    const uint64_t klen = strlen(key);
    size_t at = 0;
    for (size_t i = 0; !at && i + 8 + klen + 8 <= len; i++) /* the key as stored: u64 length, bytes, u32 type */
        if (!memcmp(buf + i, &klen, 8) && !memcmp(buf + i + 8, key, klen))
            at = i + 8 + klen;
    assert_true(at > 0);
    uint32_t type;
    memcpy(&type, buf + at, 4);
    assert_int_equal(type, 4); /* GGUF u32 */
    memcpy(buf + at + 4, &v, 4);
    const char *path = tu_write(tu_tmpdir("gguf-bad"), name, buf, len);
    free(buf);
    return path;
}

/* Expert metadata that disagrees with the tensors is refused naming both numbers; a file cut short inside the
 * experts' data is refused too. */
static void test_gguf_moe_bad_metadata(void **state) {
    (void)state;
    tern_gemma4 *m = NULL;
    TU_FAILS_WITH(tern_gemma4_load(gguf_with_u32("tiny-moe-q8_0.gguf", "gemma4.expert_count", 8), &m),
                  "gemma4.expert_count is 8 but blk.0.ffn_gate_inp.weight routes to 4 experts");
    TU_FAILS_WITH(tern_gemma4_load(gguf_with_u32("tiny-moe-q8_0.gguf", "gemma4.expert_used_count", 5), &m),
                  "top_k_experts (5) must be in [1, num_experts = 4]");
    TU_FAILS_WITH(tern_gemma4_load(gguf_with_u32("tiny-moe-q8_0.gguf", "gemma4.expert_feed_forward_length", 128), &m),
                  "expert_feed_forward_length is 128 at layer 0 but blk.0.ffn_gate_up_exps.weight holds experts 256 wide");
    TU_FAILS_WITH(tern_gemma4_load(gguf_with_u32("tiny-moe-q8_0-split.gguf", "gemma4.expert_feed_forward_length", 64),
                                   &m), "but blk.0.ffn_gate_exps.weight holds experts 256 wide");
    char *buf;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("gguf/tiny-moe-q8_0.gguf"), 1 << 26, &buf, &len));
    const char *cut = tu_write(tu_tmpdir("gguf-cut"), "tiny-moe-cut.gguf", buf, len - len / 4);
    free(buf);
    tern_err *e = tern_gemma4_load(cut, &m);
    assert_non_null(e);
    print_message("cut file: %s\n", tern_err_msg(e));
    tern_err_free(e);
    assert_null(m);
}

/* A random tiny model with a window of 8: sliding, full, PLE and KV-shared layers. The PLE width 16
 * keeps sqrt(P) exact in every dtype, so a model and its f32 twin scale embeddings identically. */
static const char *tiny_model_q(const char *name, tern_synth_dtype dt, const char *quantization) {
    static char dir[4096];
    TU_OK(tu_tiny_model(name, dt, 11, quantization, dir));
    return dir;
}

static const char *tiny_model(const char *name, tern_synth_dtype dt) { return tiny_model_q(name, dt, NULL); }

static void fill_ids(int32_t *ids, int64_t n) {
    uint32_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)(s >> 8) % 512;
    }
}

/* Decoding token by token (and in uneven chunks) through the ring equals one full forward, past 3x the window. */
static void test_incremental_equals_full(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("incr", TERN_SYNTH_F32), &m));
    const int64_t n = 30, V = 512; /* window 8: the ring wraps more than three times */
    int32_t ids[30];
    fill_ids(ids, n);
    float *full = malloc(sizeof(float) * (size_t)(n * V)), *inc = malloc(sizeof(float) * (size_t)(n * V));
    run_all(m, TERN_KV_F32, ids, n, full, NULL);
    static const int64_t chunks[] = {1, 3, 5};
    for (size_t ci = 0; ci < 3; ci++) {
        int64_t chunk = chunks[ci];
        tern_kv *kv;
        TU_OK(tern_gemma4_kv_create(m, 1, n, chunk, TERN_KV_F32, TERN_KV_F32, &kv));
        int seq = 0;
        for (int64_t t = 0; t < n; t += chunk) {
            int64_t cnt = t + chunk > n ? n - t : chunk;
            tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_ALL};
            TU_OK(tern_gemma4_forward(m, kv, pool, &b, inc + t * V, NULL));
            TU_OK(tern_batch_commit(kv, &b));
        }
        double d = 0;
        for (int64_t i = 0; i < n * V; i++)
            d = fmax(d, fabs(inc[i] - full[i]));
        if (d > 1e-4)
            fail_msg("chunk %lld: max |incremental - full| = %g", (long long)chunk, d);
        /* The ring holds window + chunk slots, far fewer than the 30 positions. */
        assert_true(tern_kv_slots(kv, 0) == 8 + chunk);
        /* The activations took what `tern fit` counts for forwards of `chunk` tokens. */
        assert_int_equal(tern_kv_work_bytes(kv), tern_gemma4_work_bytes(tern_gemma4_config_of(m), chunk));
        tern_kv_free(kv);
    }
    free(full);
    free(inc);
    tern_gemma4_free(m);
}

/* A lone token after a long context (its full layers' attention split by spans of positions across the threads)
 * gives the logits the same token gives decoded in a batch (no split), bit for bit. */
static void test_long_context_solo_equals_batched(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("long", TERN_SYNTH_F32), &m));
    const int64_t n = 400, V = 512, chunk = 16;
    int32_t *ids = malloc((size_t)(n + 2) * sizeof *ids);
    fill_ids(ids, n + 2);
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 3, n + 4, chunk, TERN_KV_F32, TERN_KV_F32, &kv));
    int seq = 0;
    for (int64_t t = 0; t < n; t += chunk) {
        int64_t cnt = chunk;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_NONE};
        TU_OK(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL));
        TU_OK(tern_batch_commit(kv, &b));
    }
    TU_OK(tern_kv_copy_seq(kv, 1, 0, n));
    float *solo = malloc((size_t)V * sizeof *solo), *both = malloc((size_t)(2 * V) * sizeof *both);
    int64_t one[2] = {1, 1};
    tern_batch b1 = {.n_rows = 1, .seq = &seq, .n_tok = one, .ids = ids + n, .out = TERN_OUT_LAST};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b1, solo, NULL));
    TU_OK(tern_batch_commit(kv, &b1));
    int seqs[2] = {1, 2};
    const int32_t pair[2] = {ids[n], ids[n + 1]};
    tern_batch b2 = {.n_rows = 2, .seq = seqs, .n_tok = one, .ids = pair, .out = TERN_OUT_LAST};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b2, both, NULL));
    TU_OK(tern_batch_commit(kv, &b2));
    assert_memory_equal(solo, both, (size_t)V * sizeof *solo);
    free(solo);
    free(both);
    free(ids);
    tern_kv_free(kv);
    tern_gemma4_free(m);
}

/* Logits (and hidden states, unless NULL) of `n` ids fed to a fresh sequence as prompt tokens, at every position. */
static void fresh_run(tern_gemma4 *m, const int32_t *ids, int64_t n, float *logits, float *hidden) {
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, 64, n, TERN_KV_F32, TERN_KV_F32, &kv)); /* a ring wide enough for one forward */
    int seq = 0;
    const uint8_t prompt = 1;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_ALL, .row_prefill = &prompt};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b, logits, hidden));
    tern_kv_free(kv);
}

static void expect_same(const float *got, const float *want, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: [%lld] %.9g, fresh run %.9g", what, (long long)i, got[i], want[i]);
}

/* Speculative verification's pattern: one forward over k+1 positions with logits at every one commits nothing;
 * the caller commits 2 of them, and the next forward gives exactly the logits of a fresh run over the committed
 * prefix. The uncommitted positions' K/V are simply overwritten. */
static void test_forward_then_commit(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("commit", TERN_SYNTH_F32), &m));
    const int64_t V = 512;
    int32_t ids[24];
    fill_ids(ids, 24);
    float fresh[24 * 512], verify[5 * 512], next[512];
    float fresh_h[16 * 64];
    fresh_run(m, ids, 16, fresh, fresh_h);
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, 64, 8, TERN_KV_F32, TERN_KV_F32, &kv));
    int seq = 0;
    const uint8_t prompt = 1;
    for (int64_t t = 0; t < 12; t += 6) {
        int64_t n = 6;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids + t, .out = TERN_OUT_LAST, .row_prefill = &prompt};
        TU_OK(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL));
        assert_int_equal(tern_kv_len(kv, 0), t); /* the forward commits nothing */
        TU_OK(tern_batch_commit(kv, &b));
        assert_int_equal(tern_kv_len(kv, 0), t + 6);
    }
    /* k = 4 drafts: [last, d1..d4] = ids 12..16, logits at all five; the last two drafts differ from ids. */
    int32_t drafts[5] = {ids[12], ids[13], ids[14], (ids[15] + 1) % 512, 7};
    uint8_t want[5] = {TERN_WANT_LOGITS, TERN_WANT_LOGITS, TERN_WANT_LOGITS, TERN_WANT_LOGITS, TERN_WANT_LOGITS};
    int64_t k1 = 5;
    tern_batch v = {.n_rows = 1, .seq = &seq, .n_tok = &k1, .ids = drafts, .want = want, .row_prefill = &prompt};
    TU_OK(tern_gemma4_forward(m, kv, pool, &v, verify, NULL));
    assert_int_equal(tern_kv_len(kv, 0), 12);
    assert_int_equal(tern_kv_written(kv, 0), 17);
    expect_same(verify, fresh + 12 * V, 3 * V, "verify rows over the accepted drafts");
    /* Accept 2 drafts (ids 13, 14 follow 12): commit 12 + 3 = 15 positions; the next token is fed at 15. */
    TU_OK(tern_kv_set_len(kv, 0, 15));
    int64_t one = 1;
    const int64_t at = 15;
    tern_batch d = {.n_rows = 1, .seq = &seq, .n_tok = &one, .pos = &at, .ids = ids + 15, .out = TERN_OUT_LAST,
                    .row_prefill = &prompt};
    TU_OK(tern_gemma4_forward(m, kv, pool, &d, next, NULL));
    expect_same(next, fresh + 15 * V, V, "the step after the commit");
    /* Hidden states alone, for a subset of positions, in order. */
    float hidden[2 * 64];
    uint8_t hw[5] = {TERN_WANT_HIDDEN, 0, 0, TERN_WANT_HIDDEN, 0};
    const int64_t at12 = 12;
    tern_batch h = {.n_rows = 1, .seq = &seq, .n_tok = &k1, .pos = &at12, .ids = ids + 12, .want = hw,
                    .row_prefill = &prompt};
    TU_OK(tern_gemma4_forward(m, kv, pool, &h, NULL, hidden));
    assert_int_equal(tern_gemma4_config_of(m)->hidden_size, 64);
    expect_same(hidden, fresh_h + 12 * 64, 64, "hidden state at 12");
    expect_same(hidden + 64, fresh_h + 15 * 64, 64, "hidden state at 15");
    /* A position past the committed length leaves a gap: refused. */
    const int64_t gap = 16;
    d.pos = &gap;
    TU_FAILS_WITH(tern_gemma4_forward(m, kv, pool, &d, next, NULL), "beyond the sequence's committed length 15");
    tern_kv_free(kv);
    tern_gemma4_free(m);
}

/* Truncating back across the sliding window's boundary (window 8, ring of 8 + 8 slots): the next tokens' logits
 * are those of a fresh run over the kept prefix; going back further than the ring keeps is an error. */
static void test_truncate_across_window(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("truncate", TERN_SYNTH_F32), &m));
    const int64_t V = 512;
    int32_t ids[24], alt[3] = {5, 77, 300};
    fill_ids(ids, 24);
    float fresh[24 * 512], got[3 * 512];
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, 64, 8, TERN_KV_F32, TERN_KV_F32, &kv));
    int seq = 0;
    const uint8_t prompt = 1;
    for (int64_t t = 0; t < 21; t += 7) { /* 21 positions: the ring of 16 has wrapped */
        int64_t cnt = 7;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_NONE, .row_prefill = &prompt};
        TU_OK(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL));
        TU_OK(tern_batch_commit(kv, &b));
    }
    /* Back to 14: positions 14..20 go, and position 14's window (7..14) starts before the window that 20 saw. */
    TU_OK(tern_kv_set_len(kv, 0, 14));
    int64_t three = 3;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &three, .ids = alt, .out = TERN_OUT_ALL, .row_prefill = &prompt};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b, got, NULL));
    TU_OK(tern_batch_commit(kv, &b));
    int32_t want_ids[17];
    memcpy(want_ids, ids, 14 * sizeof *ids);
    memcpy(want_ids + 14, alt, sizeof alt);
    fresh_run(m, want_ids, 17, fresh, NULL);
    expect_same(got, fresh + 14 * V, 3 * V, "after truncating to 14");
    /* 21 positions were written; the ring keeps 8 beyond the window, so 13 is as far back as it can go. */
    TU_FAILS_WITH(tern_kv_set_len(kv, 0, 12), "cannot go back to length 12");
    TU_OK(tern_kv_set_len(kv, 0, 13));
    tern_kv_free(kv);
    tern_gemma4_free(m);
}

/* Embedding rows in place of ids at chosen positions (audio soft tokens): a row equal to what the id 0 (pad)
 * embeds to — E[0] x sqrt(H), exact here (H = 64) — gives the logits of the id itself, since soft positions take
 * the pad id's per-layer input; other rows in the batch are untouched. */
static void test_embedding_rows(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("embeds", TERN_SYNTH_F32), &m));
    const int64_t V = 512, H = 64;
    assert_int_equal(tern_gemma4_config_of(m)->hidden_size, H);
    int32_t ids[8];
    fill_ids(ids, 8);
    ids[3] = ids[5] = 0;
    float *embeds = calloc(8 * 64, sizeof *embeds), want[8 * 512], got[8 * 512];
    tern_weight_row(tern_weights_find(tern_gemma4_weights_of(m), "embed_tokens"), 0, embeds + 3 * H);
    for (int64_t i = 0; i < H; i++)
        embeds[5 * H + i] = embeds[3 * H + i] *= 8.0f;
    const float *soft[8] = {NULL, NULL, NULL, embeds + 3 * H, NULL, embeds + 5 * H, NULL, NULL};
    int64_t n = 8;
    int seq = 0;
    for (int pass = 0; pass < 2; pass++) {
        tern_kv *kv;
        TU_OK(tern_gemma4_kv_create(m, 1, 16, 8, TERN_KV_F32, TERN_KV_F32, &kv));
        int32_t fed[8];
        memcpy(fed, ids, sizeof fed);
        if (pass)
            fed[3] = fed[5] = 77; /* never read at soft positions */
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = fed, .out = TERN_OUT_ALL,
                        .embeds = pass ? soft : NULL};
        TU_OK(tern_gemma4_forward(m, kv, pool, &b, pass ? got : want, NULL));
        tern_kv_free(kv);
    }
    expect_same(got, want, 8 * V, "embedding rows at positions 3 and 5");
    free(embeds);
    tern_gemma4_free(m);
}

/* Another model reads this one's cache through views (the assistant drafter's Q-only attention): each layer's
 * view is the cache layer it reads (KV-shared layers their donor's), in place, with the committed length. */
static void test_kv_views(void **state) {
    tern_lm *lm;
    TU_OK(tern_lm_load(tiny_model("views", TERN_SYNTH_F32), 0, &lm));
    const tern_lm_desc *d = tern_lm_desc_of(lm);
    tern_kv *kv;
    TU_OK(tern_lm_kv_create(lm, 2, 64, 8, TERN_KV_BF16, TERN_KV_BF16, &kv));
    int32_t ids[12];
    fill_ids(ids, 12);
    int seq = 1;
    int64_t n = 9;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_NONE};
    TU_OK(tern_lm_forward(lm, kv, pool, &b, NULL, NULL));
    TU_OK(tern_batch_commit(kv, &b));
    /* The tiny model: 6 layers, the last 2 share the caches of layers 3 (sliding) and 2 (full). */
    assert_int_equal(d->n_layers, 6);
    assert_int_equal(d->n_kv, 4);
    assert_int_equal(d->layer_kv[4], 3);
    assert_int_equal(d->layer_kv[5], 2);
    for (int l = 0; l < d->n_layers; l++) {
        tern_kv_view v;
        TU_OK(tern_kv_view_layer(kv, d->layer_kv[l], seq, &v));
        assert_int_equal(v.len, 9);
        assert_int_equal(v.kv_heads, d->kv[d->layer_kv[l]].kv_heads);
        assert_int_equal(v.head_dim, d->kv[d->layer_kv[l]].head_dim);
        assert_int_equal(v.ring, d->kv[d->layer_kv[l]].ring);
        assert_int_equal(v.slots, v.ring ? 8 + 8 : 64);
        assert_int_equal(v.k_type, TERN_KV_BF16);
        assert_int_equal(v.v_type, TERN_KV_BF16);
        const int64_t row = v.kv_heads * v.head_dim;
        float want[256];
        for (int64_t p = 0; p < 9; p++)
            for (int value = 0; value < 2; value++) {
                tern_kv_read(kv, d->layer_kv[l], seq, p, value, want);
                const uint16_t *got = (const uint16_t *)(value ? v.v : v.k) + (p % v.slots) * row;
                for (int64_t i = 0; i < row; i++)
                    assert_true(tern_bf16_to_f32(got[i]) == want[i]);
            }
    }
    tern_kv_view v;
    TU_FAILS_WITH(tern_kv_view_layer(kv, 4, 0, &v), "cache layer 4 out of range");
    TU_FAILS_WITH(tern_kv_view_layer(kv, 0, 2, &v), "sequence 2 out of range");
    tern_kv_free(kv);
    tern_lm_free(lm);
}

/* The packed weights survive restarts: the first load packs and writes the cache, the next reads it back with the
 * same logits bit for bit; a corrupt, truncated or stale cache file is rebuilt, never used; two processes loading
 * at once both succeed and leave a valid file. */
static void logits_of(const char *dir, int expect_source, float *out) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load_threads(dir, 2, &m));
    if (tern_gemma4_weights_of(m)->pack_source != expect_source)
        fail_msg("packed weights: source %d, want %d", tern_gemma4_weights_of(m)->pack_source, expect_source);
    int32_t ids[6] = {2, 100, 200, 300, 400, 500};
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, 16, 8, TERN_KV_F32, TERN_KV_F32, &kv));
    int seq = 0;
    int64_t n = 6;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_ALL};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b, out, NULL));
    tern_kv_free(kv);
    tern_gemma4_free(m);
}

static void test_pack_cache(void **state) {
    if (tern_isa_detect() == TERN_ISA_PORTABLE) {
        print_message("no int8 kernels on this CPU: nothing is packed; skipped\n");
        skip();
    }
    char cache_dir[4096], model[4096];
    snprintf(cache_dir, sizeof cache_dir, "%s", tu_tmpdir("pack-cache"));
    setenv("TERN_CACHE_DIR", cache_dir, 1);
    snprintf(model, sizeof model, "%s", tiny_model_q("cached-q4", TERN_SYNTH_Q4, NULL));
    static float want[6 * 512], got[6 * 512];
    logits_of(model, TERN_PACK_PACKED, want);
    uint64_t key;
    char *path = tern_pack_cache_path(model, 2, &key);
    assert_non_null(path);
    assert_true(tern_is_file(path));
    logits_of(model, TERN_PACK_FROM_CACHE, got);
    expect_same(got, want, 6 * 512, "logits with the packed weights read from the cache");
    /* One byte of the packed data flipped: rebuilt, same logits, and the file is good again. */
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "printf '\\377' | dd of='%s' bs=1 seek=5000 conv=notrunc status=none", path);
    assert_int_equal(system(cmd), 0);
    logits_of(model, TERN_PACK_PACKED, got);
    expect_same(got, want, 6 * 512, "after a corrupt cache");
    logits_of(model, TERN_PACK_FROM_CACHE, got);
    /* Truncated: rebuilt. */
    assert_int_equal(truncate(path, 4096 + 100), 0);
    logits_of(model, TERN_PACK_PACKED, got);
    expect_same(got, want, 6 * 512, "after a truncated cache");
    /* The checkpoint changed (a new modification time): the old cache is stale. */
    snprintf(cmd, sizeof cmd, "touch -d '2020-01-01 00:00:00' '%s/model.safetensors'", model);
    assert_int_equal(system(cmd), 0);
    logits_of(model, TERN_PACK_PACKED, got);
    logits_of(model, TERN_PACK_FROM_CACHE, got);
    /* Two processes at once on an empty cache: both load, and the file left behind is whole. */
    assert_int_equal(unlink(path), 0);
    pid_t kids[2];
    for (int k = 0; k < 2; k++)
        if ((kids[k] = fork()) == 0) {
            tern_gemma4 *m;
            tern_err *e = tern_gemma4_load_threads(model, 2, &m);
            tern_gemma4_free(m);
            _exit(e ? 1 : 0);
        }
    for (int k = 0; k < 2; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    logits_of(model, TERN_PACK_FROM_CACHE, got);
    expect_same(got, want, 6 * 512, "after two concurrent first loads");
    free(path);
    /* Nothing to key a cache by — a model path whose folder cannot be listed (here a FIFO; for a person, a folder
     * without read permission): no key and no cache file, rather than a key blind to the files' changes. */
    snprintf(cmd, sizeof cmd, "%s/not-a-folder", tu_tmpdir("pack-cache-fifo"));
    assert_int_equal(mkfifo(cmd, 0600), 0);
    assert_int_equal(tern_model_source_key(cmd), 0);
    assert_null(tern_pack_cache_path(cmd, 2, &key));
    assert_true(tern_model_source_key(model) != 0);
    unsetenv("TERN_CACHE_DIR");
}

/* Two GGUF files in one folder: each its own cache of the packed copies of its Q4_0 / Q8_0 blocks, made by the
 * first load and mapped by the next with the same logits; a file changed (a new time) finds its cache stale. */
static void test_pack_cache_gguf(void **state) {
    if (tern_isa_detect() == TERN_ISA_PORTABLE) {
        print_message("no int8 kernels on this CPU: nothing is packed; skipped\n");
        skip();
    }
    char cache_dir[4096], dir[4096], files[2][4200], cmd[9000];
    snprintf(cache_dir, sizeof cache_dir, "%s", tu_tmpdir("pack-cache-gguf"));
    setenv("TERN_CACHE_DIR", cache_dir, 1);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("gguf-pair"));
    static const char *const names[2] = {"tiny-v4096-q4_0.gguf", "tiny-v4096-q8_0.gguf"};
    static float want[6 * 4096], got[6 * 4096];
    char *paths[2];
    for (int k = 0; k < 2; k++) {
        snprintf(files[k], sizeof files[k], "%s/%s", dir, names[k]);
        char src[4096];
        snprintf(src, sizeof src, "gguf/%s", names[k]);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", tu_testdata(src), files[k]);
        assert_int_equal(system(cmd), 0);
        logits_of(files[k], TERN_PACK_PACKED, want);
        logits_of(files[k], TERN_PACK_FROM_CACHE, got);
        expect_same(got, want, 6 * 4096, "GGUF logits with the packed copies read from the cache");
        uint64_t key;
        paths[k] = tern_pack_cache_path(files[k], 2, &key);
        assert_non_null(paths[k]);
        assert_true(tern_is_file(paths[k]));
    }
    assert_string_not_equal(paths[0], paths[1]);
    snprintf(cmd, sizeof cmd, "touch -d '2020-01-01 00:00:00' '%s'", files[0]);
    assert_int_equal(system(cmd), 0);
    logits_of(files[0], TERN_PACK_PACKED, got);
    logits_of(files[1], TERN_PACK_FROM_CACHE, got);
    free(paths[0]);
    free(paths[1]);
    unsetenv("TERN_CACHE_DIR");
}

/* Rolling back a sequence and re-decoding reproduces the same logits (speculative decoding needs it). */
static void test_rollback(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("rollback", TERN_SYNTH_F32), &m));
    const int64_t V = 512;
    int32_t ids[24];
    fill_ids(ids, 24);
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 1, 24, 4, TERN_KV_F32, TERN_KV_F32, &kv));
    int seq = 0;
    float a[4 * 512], b2[4 * 512];
    for (int64_t t = 0; t < 20; t += 4) {
        int64_t cnt = 4;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_ALL};
        TU_OK(tern_gemma4_forward(m, kv, pool, &b, a, NULL));
        TU_OK(tern_batch_commit(kv, &b));
    }
    /* a = logits of positions 16..19; roll back 4 and redo. */
    TU_OK(tern_kv_set_len(kv, 0, 16));
    int64_t cnt = 4;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + 16, .out = TERN_OUT_ALL};
    TU_OK(tern_gemma4_forward(m, kv, pool, &b, b2, NULL));
    TU_OK(tern_batch_commit(kv, &b));
    for (int64_t i = 0; i < 4 * V; i++)
        assert_true(a[i] == b2[i]);
    TU_FAILS_WITH(tern_kv_set_len(kv, 0, 10), "cannot go back to length 10");
    tern_kv_free(kv);
    tern_gemma4_free(m);
}

/* Every KV type against f32 KV on the oracle model, each within its stated share of the logits' spread (max
 * |dlogit|, mean |dlogit|, argmax agreement of 24 positions): bf16 and f16 round only (10%, 1%, 22); q8_0 blocks
 * (15%, 1.5%, 22); q4_0 blocks, coarse on a random model's even activations (2.5x, 25%, 12). A type that was not
 * really used would differ by 0. */
static void test_kv_types(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tu_testdata("oracle/tiny-v4096-f32"), &m)); /* head_dim 32 and 64: whole blocks */
    const int64_t n = 24, V = 4096;
    int32_t ids[24];
    fill_ids(ids, n);
    float *f = malloc(sizeof(float) * (size_t)(n * V)), *h = malloc(sizeof(float) * (size_t)(n * V));
    run_all(m, TERN_KV_F32, ids, n, f, NULL);
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n * V; i++)
        mean += f[i];
    mean /= (double)(n * V);
    for (int64_t i = 0; i < n * V; i++)
        var += (f[i] - mean) * (f[i] - mean);
    const double sd = sqrt(var / (double)(n * V));
    static const struct {
        tern_kv_type t;
        double max, mean;
        int agree; /* positions of 24 whose argmax must match */
    } cases[] = {{TERN_KV_BF16, 0.10, 0.01, 22}, {TERN_KV_F16, 0.10, 0.01, 22}, {TERN_KV_Q8_0, 0.15, 0.015, 22},
                 {TERN_KV_Q4_0, 2.5, 0.25, 12}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        run_all(m, cases[c].t, ids, n, h, NULL);
        double d = 0, mad = 0;
        int agree = 0;
        for (int64_t i = 0; i < n * V; i++) {
            d = fmax(d, fabs(f[i] - h[i]));
            mad += fabs(f[i] - h[i]);
        }
        mad /= (double)(n * V);
        for (int64_t p = 0; p < n; p++)
            agree += argmax(f + p * V, V) == argmax(h + p * V, V);
        print_message("%s vs f32 KV: max |dlogit| = %.4f, mean %.5f (logit std %.2f), argmax agrees at %d of %lld\n",
                      tern_kv_type_name(cases[c].t), d, mad, sd, agree, (long long)n);
        assert_true(d > 0);
        assert_true(d < cases[c].max * sd);
        assert_true(mad < cases[c].mean * sd);
        assert_true(agree >= cases[c].agree);
    }
    free(f);
    free(h);
    tern_gemma4_free(m);
}

/* Writes the f32 twin of a (quantized) model: every weight dequantized into an HF-layout f32 checkpoint. */
static const char *dequantized_twin_in(const char *qdir, const char *name, tern_layout layout) {
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir(name));
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(qdir, &m));
    const tern_weights *gw = tern_gemma4_weights_of(m);
    tern_st_spec *specs = calloc(gw->n, sizeof *specs);
    char (*names)[160] = calloc(gw->n, sizeof *names);
    for (size_t i = 0; i < gw->n; i++) {
        tern_wspec_full_name(&gw->specs[i], layout, NULL, names[i], sizeof names[i]);
        specs[i].name = names[i];
        specs[i].dtype = TERN_DT_F32;
        specs[i].ndim = gw->specs[i].ndim;
        memcpy(specs[i].shape, gw->specs[i].shape, sizeof gw->specs[i].shape);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tern_st_writer *w;
    TU_OK(tern_st_writer_open(path, specs, gw->n, NULL, &w));
    for (size_t i = 0; i < gw->n; i++) {
        int64_t rows = tern_weight_rows(&gw->w[i]), cols = tern_weight_cols(&gw->w[i]);
        float *row = malloc((size_t)cols * sizeof *row);
        for (int64_t r = 0; r < rows; r++) {
            tern_weight_row(&gw->w[i], r, row);
            TU_OK(tern_st_writer_write(w, row, (size_t)cols * sizeof *row));
        }
        free(row);
    }
    TU_OK(tern_st_writer_close(w));
    json_t *cfg;
    snprintf(path, sizeof path, "%s/config.json", qdir);
    TU_OK(tern_json_load_file(path, 1 << 20, &cfg));
    json_object_del(cfg, "quantization");
    json_object_del(cfg, "quantization_config");
    snprintf(path, sizeof path, "%s/config.json", dir);
    TU_OK(tern_json_save_file(cfg, path));
    json_decref(cfg);
    free(specs);
    free(names);
    tern_gemma4_free(m);
    return dir;
}

static const char *dequantized_twin(const char *qdir, const char *name) {
    return dequantized_twin_in(qdir, name, TERN_LAYOUT_HF);
}

/* The same weights under each naming layout (HF model.language_model.*, mlx-vlm language_model.model.*,
 * mlx-lm model.*): each binds completely and gives the same logits bit for bit. */
static void test_weight_name_layouts(void **state) {
    const int64_t n = 12, V = 512;
    int32_t ids[12];
    fill_ids(ids, n);
    char src[4096];
    snprintf(src, sizeof src, "%s", tiny_model("layouts", TERN_SYNTH_BF16));
    float *ref = malloc(sizeof(float) * (size_t)(n * V)), *got = malloc(sizeof(float) * (size_t)(n * V));
    static const char *names[TERN_LAYOUT_COUNT] = {"layout-hf", "layout-mlx-vlm", "layout-mlx-lm"};
    for (int l = 0; l < TERN_LAYOUT_COUNT; l++) {
        const char *dir = dequantized_twin_in(src, names[l], (tern_layout)l);
        tern_gemma4 *m;
        TU_OK(tern_gemma4_load(dir, &m));
        assert_int_equal(tern_gemma4_weights_of(m)->layout, l);
        assert_int_equal(tern_gemma4_weights_of(m)->n_problems, 0);
        run_all(m, TERN_KV_F32, ids, n, l ? got : ref, NULL);
        tern_gemma4_free(m);
        if (l)
            assert_memory_equal(got, ref, sizeof(float) * (size_t)(n * V));
    }
    free(ref);
    free(got);
}

/* q8 and q4 models (MLX layout, packed weights read by the kernels) agree with their dequantized f32
 * twins (HF layout, plain f32 weights). On the portable path both compute in f32 from the same values:
 * max |dlogit| < 1e-3. The AVX-512 path rounds activations (int8 with a scale per 8 or 4 values for MLX q4/q8,
 * bf16 for bf16 weights), which this random 6-layer model amplifies: stated tolerance mean |dlogit| < 0.1 and
 * max < 1.0 (logit std ~1). */
static void test_quantized_twins(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    const int64_t n = 16, V = 512;
    int32_t ids[16];
    fill_ids(ids, n);
    float *ref = malloc(sizeof(float) * (size_t)(n * V)), *q = malloc(sizeof(float) * (size_t)(n * V));
    /* Groups 32/64/128 and per-module overrides (8-bit embeddings, an unquantized module) as mlx-community
     * mixed recipes write them; f16 and bf16 float weights. */
    static const struct {
        tern_synth_dtype dt;
        const char *name, *quantization;
    } cases[] = {
        {TERN_SYNTH_Q8, "twin-q8", NULL},
        {TERN_SYNTH_Q4, "twin-q4", NULL},
        {TERN_SYNTH_Q8, "twin-q8-g128", "{\"bits\": 8, \"group_size\": 128}"},
        {TERN_SYNTH_Q4, "twin-q4-mixed",
         "{\"bits\": 4, \"group_size\": 64, \"language_model.model.embed_tokens\": {\"bits\": 8, \"group_size\": 32},"
         " \"language_model.model.layers.0.mlp.down_proj\": false,"
         " \"language_model.model.layers.1.self_attn.q_proj\": {\"bits\": 8, \"group_size\": 64}}"},
        {TERN_SYNTH_BF16, "twin-bf16", NULL},
        {TERN_SYNTH_F16, "twin-f16", NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *qdir = tiny_model_q(cases[c].name, cases[c].dt, cases[c].quantization);
        char qdir_copy[4096];
        snprintf(qdir_copy, sizeof qdir_copy, "%s", qdir);
        char twin_name[64];
        snprintf(twin_name, sizeof twin_name, "%s-f32", cases[c].name);
        const char *fdir = dequantized_twin(qdir_copy, twin_name);
        {
        tern_isa_set(isa);
        tern_gemma4 *m;
        TU_OK(tern_gemma4_load(qdir_copy, &m));
        if (!strcmp(cases[c].name, "twin-q4-mixed")) { /* the overrides took effect */
            const tern_weights *gw = tern_gemma4_weights_of(m);
            const tern_weight *e = tern_weights_find(gw, "embed_tokens"), *d = tern_weights_find(gw, "layers.0.mlp.down_proj");
            const tern_weight *qp = tern_weights_find(gw, "layers.1.self_attn.q_proj"), *u = tern_weights_find(gw, "layers.1.mlp.up_proj");
            assert_true(e->fmt == TERN_WF_MLX_AFFINE && e->bits == 8 && e->group == 32);
            assert_true(d->fmt == TERN_WF_BF16);
            assert_true(qp->fmt == TERN_WF_MLX_AFFINE && qp->bits == 8 && qp->group == 64);
            assert_true(u->fmt == TERN_WF_MLX_AFFINE && u->bits == 4 && u->group == 64);
        }
        run_all(m, TERN_KV_F32, ids, n, q, NULL);
        tern_gemma4_free(m);
        TU_OK(tern_gemma4_load(fdir, &m));
        run_all(m, TERN_KV_F32, ids, n, ref, NULL);
        tern_gemma4_free(m);
        double d = 0, mean = 0;
        for (int64_t i = 0; i < n * V; i++) {
            d = fmax(d, fabs(q[i] - ref[i]));
            mean += fabs(q[i] - ref[i]) / (double)(n * V);
        }
        print_message("%s vs its dequantized f32 twin on %s: max |dlogit| = %.2g, mean %.2g\n", cases[c].name,
                      tern_isa_name(isa), d, mean);
        /* Paths that quantize activations: AVX-512 (int8 for MLX weights, bf16 for bf16 weights) and AVX2 (int8
         * for MLX weights; it expands bf16 to f32). */
        const int mlx = cases[c].dt == TERN_SYNTH_Q4 || cases[c].dt == TERN_SYNTH_Q8;
        int simd_quantized = isa >= TERN_ISA_AVX512 ? cases[c].dt != TERN_SYNTH_F16 : isa == TERN_ISA_AVX2 && mlx;
        if (simd_quantized ? (d >= 1.0 || mean >= 0.1) : d >= 1e-3)
            fail_msg("%s on %s: max |dlogit| %g, mean %g", cases[c].name, tern_isa_name(isa), d, mean);
        }
    }
    free(ref);
    free(q);
}

/* Where thread t's share (tern_pool_share over the product's blocks) of the product w[0..n) starts and ends in
 * the packed arena; 0 when the share is empty or does not lie in one run. */
static int share_run(const tern_weight *const *w, int n, int t, int T, const uint8_t **b, const uint8_t **e) {
    int64_t units = 0;
    for (int i = 0; i < n; i++)
        units += w[i]->qpack->blocks;
    size_t lo, hi;
    tern_pool_share((size_t)units, (size_t)t, (size_t)T, &lo, &hi);
    *b = *e = NULL;
    for (int i = 0, start = 0; i < n; start += (int)w[i]->qpack->blocks, i++)
        for (int64_t blk = 0; blk < w[i]->qpack->blocks; blk++) {
            if (start + blk < (int64_t)lo || start + blk >= (int64_t)hi)
                continue;
            const uint8_t *d = tern_qpack_block_data(w[i]->qpack, blk);
            if (*e && d != *e)
                return 0;
            if (!*b)
                *b = d;
            *e = d + w[i]->qpack->block_bytes;
        }
    return *b != NULL;
}

/* The packed weights are laid out for the thread pool: each thread's shares of the forward's products, in the
 * order the forward runs them (the per-layer-input model projection, then per layer q/k/v or q, o, gate/up, down,
 * the per-layer-input gate and projection; the tied head last), follow each other in one run. A layout for
 * another pool size gives the same results. */
static void test_packed_runs(void **state) {
    if (tern_isa_detect() == TERN_ISA_PORTABLE) {
        print_message("no int8 kernels on this CPU: nothing is packed; skipped\n");
        skip();
    }
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("runs-q4", TERN_SYNTH_Q4), &m));
    const tern_weights *gw = tern_gemma4_weights_of(m);
    const tern_gemma4_config *c = tern_gemma4_config_of(m);
    const tern_weight *prod[512][3];
    int parts[512], n = 0;
    char name[128];
#define W1(fmt, l) (snprintf(name, sizeof name, fmt, l), tern_weights_find(gw, name))
    prod[n][0] = tern_weights_find(gw, "per_layer_model_projection"), parts[n++] = 1;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const tern_weight *k = W1("layers.%d.self_attn.k_proj", l), *v = W1("layers.%d.self_attn.v_proj", l);
        prod[n][0] = W1("layers.%d.self_attn.q_proj", l);
        parts[n] = k && k->fmt != TERN_WF_NONE ? (v && v->fmt != TERN_WF_NONE ? 3 : 2) : 1;
        prod[n][1] = k, prod[n][2] = v, n++;
        prod[n][0] = W1("layers.%d.self_attn.o_proj", l), parts[n++] = 1;
        prod[n][0] = W1("layers.%d.mlp.gate_proj", l), prod[n][1] = W1("layers.%d.mlp.up_proj", l), parts[n++] = 2;
        prod[n][0] = W1("layers.%d.mlp.down_proj", l), parts[n++] = 1;
        prod[n][0] = W1("layers.%d.per_layer_input_gate", l), parts[n++] = 1;
        prod[n][0] = W1("layers.%d.per_layer_projection", l), parts[n++] = 1;
    }
    prod[n][0] = tern_weights_find(gw, "embed_tokens"), parts[n++] = 1;
#undef W1
    const int T = tern_cpu_count();
    int checked = 0;
    for (int t = 0; t < T; t++) {
        const uint8_t *end = NULL, *b, *e;
        for (int k = 0; k < n; k++) {
            int packed = 1;
            for (int i = 0; i < parts[k]; i++)
                packed &= prod[k][i]->qpack != NULL; /* this tiny model's 16-wide per-layer inputs are narrower
                                                       * than a group: those products use the float kernels */
            if (!packed || !share_run(prod[k], parts[k], t, T, &b, &e))
                continue;
            checked++;
            if (end && b != end)
                fail_msg("thread %d of %d: product %d starts %td bytes from where the one before ended", t, T, k,
                         b - end);
            end = e;
        }
    }
    assert_true(checked >= 4 * c->num_hidden_layers); /* q/k/v, o, gate/up and down of every layer at least */
    /* Laid out for another pool size: the same logits, bit for bit. */
    const int64_t V = c->vocab_size, len = 12;
    int32_t ids[12];
    fill_ids(ids, len);
    float *want = malloc(sizeof(float) * (size_t)(len * V)), *got = malloc(sizeof(float) * (size_t)(len * V));
    run_all(m, TERN_KV_F32, ids, len, want, NULL);
    tern_gemma4_free(m);
    TU_OK(tern_gemma4_load_threads(tiny_model("runs-q4", TERN_SYNTH_Q4), 3, &m));
    run_all(m, TERN_KV_F32, ids, len, got, NULL);
    assert_memory_equal(got, want, sizeof(float) * (size_t)(len * V));
    free(want);
    free(got);
    tern_gemma4_free(m);
}

static void test_bad_batches(void **state) {
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(tiny_model("bad", TERN_SYNTH_F32), &m));
    tern_kv *kv;
    TU_OK(tern_gemma4_kv_create(m, 2, 16, 4, TERN_KV_F32, TERN_KV_F32, &kv));
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 600};
    int seq = 0, seqs[2] = {1, 1};
    int64_t n = 8, one = 1, two[2] = {1, 1};
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_LAST};
    TU_FAILS_WITH(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL), "exceed the chunk limit");
    b.n_tok = &one;
    b.ids = ids + 7;
    TU_FAILS_WITH(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL), "outside the vocabulary");
    b.n_rows = 2;
    b.seq = seqs;
    b.n_tok = two;
    b.ids = ids;
    TU_FAILS_WITH(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL), "same KV sequence");
    seq = 5;
    b.n_rows = 1;
    b.seq = &seq;
    TU_FAILS_WITH(tern_gemma4_forward(m, kv, pool, &b, NULL, NULL), "out of range");
    tern_kv_free(kv);
    tern_gemma4_free(m);
    TU_FAILS_WITH(tern_gemma4_load(tu_tmpdir("empty-model"), &m), "config.json");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_ISA_TESTS(test_oracle_parity),
        TU_ISA_TESTS(test_gguf_quantized_parity), TU_ISA_TESTS(test_gguf_kev_moe_parity),
        cmocka_unit_test(test_gguf_equals_safetensors), cmocka_unit_test(test_gguf_moe_bad_metadata),
        TU_ISA_TESTS(test_moe_batched_equals_solo), cmocka_unit_test(test_incremental_equals_full),
        cmocka_unit_test(test_long_context_solo_equals_batched), cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_forward_then_commit), cmocka_unit_test(test_kv_views), cmocka_unit_test(test_embedding_rows),
        cmocka_unit_test(test_pack_cache), cmocka_unit_test(test_pack_cache_gguf), cmocka_unit_test(test_truncate_across_window),      cmocka_unit_test(test_kv_types),
        TU_ISA_TESTS(test_quantized_twins), cmocka_unit_test(test_weight_name_layouts), cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_packed_runs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
