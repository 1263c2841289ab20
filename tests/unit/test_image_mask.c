/* test_image_mask.c — the larger Gemma 4 models' image mask (text_config.use_bidirectional_attention "vision"): on
 * sliding layers an image's soft tokens see each other both ways, past the window too, while full layers and text
 * stay causal. The oracle tiny target (window 8) with that setting, over a prompt whose positions 5..16 are one
 * image's 12 soft tokens, against golden logits from the project's independent PyTorch decoder
 * (scripts/vision/mask-goldens.py, tests/data/vision-mask): every position within 2e-4; the causal forward differs
 * (the mask matters); the model forward in two passes agrees with one; and through the engine — prefill chunks
 * smaller than the image cut before it and feed it whole, a cached prefix ending inside it — the reply is the
 * golden's; an image no forward holds, or a step too small for one, is refused. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/fileio.h"
#include "core/threadpool.h"
#include "models/model.h"
#include "tern/tern.h"
#include "testutil.h"

#define T 24
#define AT 5
#define N 12
#define V 4096
#define H 128

static char dir[4096];
static int32_t ids[T];
static float *rows, *golden;

/* The oracle target with use_bidirectional_attention "vision" added to its text config, in a folder of its own. */
static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("image-mask"));
    char *cfg = NULL, *out = NULL;
    size_t len = 0;
    TU_OK(tern_read_file(tu_testdata("oracle/tiny-v4096-f32/config.json"), 1 << 20, &cfg, &len));
    json_error_t je;
    json_t *root = json_loadb(cfg, len, 0, &je);
    free(cfg);
    assert_non_null(root);
    json_object_set_new(json_object_get(root, "text_config"), "use_bidirectional_attention", json_string("vision"));
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(json_dump_file(root, path, 0), 0);
    json_decref(root);
    assert_int_equal(tu_runf(&out, "for f in model.safetensors tokenizer.json tokenizer_config.json "
                                   "generation_config.json; do ln -sf '%s'/$f '%s'/$f; done",
                             tu_testdata("oracle/tiny-v4096-f32"), dir), 0);
    free(out);
    json_t *c = json_load_file(tu_testdata("vision-mask/case.json"), 0, &je);
    assert_non_null(c);
    assert_int_equal(json_array_size(json_object_get(c, "ids")), T);
    for (int i = 0; i < T; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(json_object_get(c, "ids"), (size_t)i));
    json_decref(c);
    size_t n = 0;
    TU_OK(tern_read_file(tu_testdata("vision-mask/soft_rows.bin"), 1 << 26, (char **)&rows, &n));
    assert_int_equal(n, (size_t)N * H * sizeof(float));
    TU_OK(tern_read_file(tu_testdata("vision-mask/logits.bin"), 1 << 26, (char **)&golden, &n));
    assert_int_equal(n, (size_t)T * V * sizeof(float));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    free(rows);
    free(golden);
    return 0;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* Runs the prompt through the model in passes of the given lengths (summing to T), the image's tokens seen both
 * ways when `both`; logits of every position into out [T][V]. */
static void forward(tern_lm *lm, tern_pool *pool, const int64_t *passes, int n_passes, int both, float *out) {
    tern_kv *kv;
    TU_OK(tern_lm_kv_create(lm, 1, 64, 32, TERN_KV_F32, TERN_KV_F32, &kv));
    const float *emb[T];
    tern_tok_span spans[T];
    for (int t = 0; t < T; t++) {
        const int soft = t >= AT && t < AT + N;
        emb[t] = soft ? rows + (size_t)(t - AT) * H : NULL;
        spans[t] = soft ? (tern_tok_span){AT, AT + N - 1} : (tern_tok_span){-1, -1};
    }
    int seq = 0;
    for (int64_t at = 0, i = 0; i < n_passes; at += passes[i], i++) {
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &passes[i], .ids = ids + at, .embeds = emb + at,
                        .out = TERN_OUT_ALL, .spans = both ? spans + at : NULL};
        TU_OK(tern_lm_forward(lm, kv, pool, &b, out + (size_t)at * V, NULL));
        TU_OK(tern_batch_commit(kv, &b));
    }
    tern_kv_free(kv);
}

static void test_model_against_reference(void **state) {
    (void)state;
    tern_lm *lm;
    tern_pool *pool;
    TU_OK(tern_lm_load(dir, 0, &lm));
    assert_int_equal(tern_lm_desc_of(lm)->span_both_ways, 1120);
    TU_OK(tern_pool_create(2, &pool));
    float *got = malloc((size_t)T * V * sizeof *got), *causal = malloc((size_t)T * V * sizeof *causal);
    const int64_t one[] = {T}, two[] = {AT, T - AT};
    forward(lm, pool, one, 1, 1, got);
    const double d = max_diff(got, golden, (size_t)T * V);
    print_message("both ways, one pass: max |tern - reference| = %.2e over %d positions\n", d, T);
    assert_true(d <= 2e-4);
    forward(lm, pool, two, 2, 1, causal); /* the image starts the second pass */
    assert_true(max_diff(causal, golden, (size_t)T * V) <= 2e-4);
    forward(lm, pool, one, 1, 0, causal);
    const double before = max_diff(causal, golden, (size_t)AT * V), in = max_diff(causal, golden, (size_t)T * V);
    print_message("causal: before the image %.2e, anywhere %.2e\n", before, in);
    assert_true(before <= 2e-4);
    assert_true(in > 1e-2);
    /* A span the forward does not hold whole is refused. */
    tern_kv *kv;
    TU_OK(tern_lm_kv_create(lm, 1, 64, 32, TERN_KV_F32, TERN_KV_F32, &kv));
    tern_tok_span spans[T];
    for (int t = 0; t < T; t++)
        spans[t] = (tern_tok_span){AT, AT + N - 1};
    const int64_t part = AT + 4;
    int seq = 0;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &part, .ids = ids, .out = TERN_OUT_LAST, .spans = spans};
    TU_FAILS_WITH(tern_lm_forward(lm, kv, pool, &b, got, NULL), "span");
    tern_kv_free(kv);
    free(got);
    free(causal);
    tern_pool_destroy(pool);
    tern_lm_free(lm);
}

typedef struct reply {
    int32_t toks[8];
    float lp[8];
    int n;
    int64_t cached;
} reply;

static tern_engine *engine(tern_model *m, int chunk, int step) {
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 2;
    o.ctx = 64;
    o.prefix_cache_bytes = 8 << 20;
    o.prefix_block = 4;
    o.prefill_chunk = chunk;
    o.step_tokens = step;
    o.threads = 2;
    o.cache_type_k = o.cache_type_v = "f32";
    tern_engine *e;
    TU_OK(tern_engine_create(m, &o, &e));
    return e;
}

/* Greedy, 4 tokens with their logprobs, from the first n prompt ids with the image's span. */
static reply ask(tern_engine *e, int64_t n) {
    tern_prompt_embeds span = {.pos = AT, .n = N, .rows = rows, .key = 0x1a6e, .image = 1};
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = ids, r.n_prompt_ids = (size_t)n, r.max_tokens = 4, r.ignore_eos = 1, r.top_logprobs = 1;
    r.embeds = &span, r.n_embeds = 1;
    tern_stream *s;
    TU_OK(tern_engine_submit(e, &r, NULL, NULL, &s, NULL));
    reply out = {0};
    tern_event ev;
    for (;;) {
        assert_int_equal(tern_stream_next(s, &ev, -1), 1);
        if (ev.kind != TERN_EV_TOKEN)
            break;
        out.toks[out.n] = ev.token;
        out.lp[out.n++] = ev.logprob;
    }
    assert_int_equal(ev.kind, TERN_EV_DONE);
    assert_int_equal(ev.finish, TERN_FINISH_LENGTH);
    out.cached = ev.usage.cached_tokens;
    tern_stream_free(s);
    return out;
}

/* The golden's choice after the last prompt position and its log-probability. */
static void golden_first(int64_t pos, int32_t *tok, float *lp) {
    const float *g = golden + (size_t)pos * V;
    int32_t best = 0;
    double sum = 0;
    for (int i = 0; i < V; i++)
        best = g[i] > g[best] ? i : best;
    for (int i = 0; i < V; i++)
        sum += exp((double)g[i] - g[best]);
    *tok = best;
    *lp = (float)-log(sum);
}

static void test_engine_keeps_an_image_whole(void **state) {
    (void)state;
    tern_model_opts mo = {.model_dir = dir};
    tern_model *m;
    TU_OK(tern_model_load(&mo, &m));
    /* Chunks of 8 would cut the image (12 tokens at 5..16): the first stops before it, the second holds it whole,
     * past the chunk. */
    tern_engine *chunked = engine(m, 8, 0), *whole = engine(m, 64, 0);
    int32_t tok;
    float lp;
    golden_first(T - 1, &tok, &lp);
    const reply a = ask(chunked, T), b = ask(whole, T);
    print_message("first token %d (golden %d), logprob %.6f (golden %.6f)\n", a.toks[0], tok, a.lp[0], lp);
    assert_int_equal(a.toks[0], tok);
    assert_true(fabsf(a.lp[0] - lp) <= 2e-4f);
    assert_memory_equal(a.toks, b.toks, sizeof a.toks);
    assert_memory_equal(a.lp, b.lp, sizeof a.lp);
    /* A prompt ending with the image: the second time its cached prefix ends inside the image. */
    const reply c = ask(chunked, AT + N), d = ask(chunked, AT + N);
    assert_int_equal(d.cached, AT + N - 1);
    golden_first(AT + N - 1, &tok, &lp);
    assert_int_equal(c.toks[0], tok);
    assert_true(fabsf(c.lp[0] - lp) <= 2e-4f);
    assert_memory_equal(c.toks, d.toks, sizeof c.toks);
    assert_memory_equal(c.lp, d.lp, sizeof c.lp);
    tern_engine_destroy(chunked);
    tern_engine_destroy(whole);
    /* An image longer than any forward holds (the largest, 1120) is refused at submit; a step too small for an
     * image beside the rows' decoding, at the start. */
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.ctx = 1200, o.parallel = 1, o.threads = 2;
    tern_engine *e = NULL;
    TU_OK(tern_engine_create(m, &o, &e));
    int32_t *many = calloc(1200, sizeof *many);
    float *big = calloc((size_t)1121 * H, sizeof *big);
    tern_prompt_embeds span = {.pos = 10, .n = 1121, .rows = big, .key = 1, .image = 1};
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = many, r.n_prompt_ids = 1200, r.max_tokens = 2, r.embeds = &span, r.n_embeds = 1;
    tern_stream *none = NULL;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &none, NULL), "hold at most 1120");
    assert_null(none);
    tern_engine_destroy(e);
    free(many);
    free(big);
    tern_engine_opts_default(&o);
    o.step_tokens = 1000, o.parallel = 4;
    TU_FAILS_WITH(tern_engine_create(m, &o, &e), "feeds an image whole");
    tern_model_free(m);
    /* By default the chunk holds the largest image, and a step a chunk beside 4 rows' decode and drafts (the
     * engine's defaults, as tern fit plans them). */
    json_t *plan = tu_run_json("'%s' fit '%s' --json", tu_tern_bin(), dir);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(plan, "kv"), "chunk")), 1120);
    assert_int_equal(json_integer_value(json_object_get(plan, "step_tokens")), 1120 + 4 * (8 + 1));
    json_decref(plan);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_against_reference),
        cmocka_unit_test(test_engine_keeps_an_image_whole),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
