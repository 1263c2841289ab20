/* test_engine.c — the serving engine end to end on a small synthetic model (vocabulary 512, sliding
 * window 8): batched greedy equals solo greedy for 8 requests of different lengths joining at
 * different times; seeded sampling reproduces inside any batch; prefix-cache hits, to the token, give the
 * same tokens and logprobs as cold prefills and count cached_tokens; cancelling frees the row and the
 * budget; admission rejects, clamps and overloads as specified; stop strings split across tokens
 * and stop ids end generation; text prompts, callbacks and shutdown.
 *
 * Bit-exact batch invariance needs kernels whose result for one token does not depend on how many
 * tokens share the forward (the GEMV path for few tokens and the GEMM path for many must reduce
 * each output in the same order). Batched == solo and seeded sampling inside a mixed batch are
 * checked on an f32 and a bf16 model, whose matmuls take different kernel paths. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json_util.h"
#include "core/threadpool.h"
#include "engine/kv_budget.h"
#include "loader/loader.h"
#include "models/gemma4.h"
#include "models/synth.h"
#include "sample/sampler.h"
#include "tern/tern.h"
#include "testutil.h"

#define WAIT_MS 120000 /* a hang fails the test instead of blocking forever */

static tern_model *model, *model_bf16, *model_q4;
static char model_dir[4096], model_dir_bf16[4096], model_dir_q4[4096];

static TERN_MUST_CHECK tern_err *make_model(const char *name, tern_synth_dtype dt, char *dir, tern_model **out) {
    TERN_TRY(tu_tiny_model(name, dt, 7, NULL, dir));
    tern_model_opts mo = {.model_dir = dir};
    return tern_model_load(&mo, out);
}

static int setup(void **state) {
    tern_err *e = make_model("engine_model", TERN_SYNTH_F32, model_dir, &model);
    if (!e)
        e = make_model("engine_model_bf16", TERN_SYNTH_BF16, model_dir_bf16, &model_bf16);
    if (!e) /* MLX q4: the int8 kernels (activations quantized per token) */
        e = make_model("engine_model_q4", TERN_SYNTH_Q4, model_dir_q4, &model_q4);
    if (e) {
        print_error("%s\n", tern_err_msg(e));
        tern_err_free(e);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    tern_model_free(model);
    tern_model_free(model_bf16);
    tern_model_free(model_q4);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

static void ts_sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

typedef struct result {
    int32_t toks[1024];
    float lp[1024];
    int32_t top0[1024];
    int n_top[1024];
    size_t text_off[1024]; /* text length after each token event */
    int n;
    char text[16384];
    size_t text_len;
    tern_event done; /* pointers cleared */
    float emb[1024];  /* the DONE event's embedding (its first n_embedding values) */
    int finished;
    int bad_order; /* an event came out of order (checked on the test thread: callbacks must not assert) */
} result;

static void take(result *r, const tern_event *ev) {
    if (r->text_len + ev->text_len < sizeof r->text) {
        memcpy(r->text + r->text_len, ev->text, ev->text_len);
        r->text_len += ev->text_len;
        r->text[r->text_len] = 0;
    }
    if (r->finished || r->n >= 1024)
        r->bad_order = 1;
    if (ev->kind == TERN_EV_TOKEN && r->n < 1024) {
        r->bad_order |= ev->index != r->n;
        r->toks[r->n] = ev->token;
        r->lp[r->n] = ev->logprob;
        r->n_top[r->n] = ev->n_top;
        r->top0[r->n] = ev->n_top ? ev->top_ids[0] : -1;
        r->text_off[r->n] = r->text_len;
        r->n++;
    } else {
        r->done = *ev;
        if (ev->embedding && ev->n_embedding > 0 && ev->n_embedding <= 1024)
            memcpy(r->emb, ev->embedding, (size_t)ev->n_embedding * sizeof(float));
        r->done.embedding = NULL;
        r->done.text = NULL;
        r->done.error = NULL;
        r->done.top_ids = NULL;
        r->done.top_logprobs = NULL;
        r->finished = 1;
    }
}

/* Reads one event into r; returns its kind. */
static int read_one(tern_stream *s, result *r) {
    tern_event ev;
    int rc = tern_stream_next(s, &ev, WAIT_MS);
    assert_int_equal(rc, 1);
    take(r, &ev);
    return ev.kind;
}

static void drain(tern_stream *s, result *r) {
    while (!r->finished)
        read_one(s, r);
    tern_event ev;
    assert_int_equal(tern_stream_next(s, &ev, 0), -1);
    assert_false(r->bad_order);
}

/* A callback consumer that can hold the engine thread still at a chosen token, so a test can look at
 * (and act on) the engine mid-request without racing it. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t pause_at; /* token index to hold at, -1 = never */
    int paused, open;
    result r;
} gate;

static void gate_init(gate *g, int64_t pause_at) {
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->pause_at = pause_at;
}

static void gate_destroy(gate *g) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

static void gate_cb(const tern_event *ev, void *user) {
    gate *g = user;
    pthread_mutex_lock(&g->mu);
    take(&g->r, ev);
    if (ev->kind == TERN_EV_TOKEN && ev->index == g->pause_at) {
        g->paused = 1;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait_paused(gate *g) {
    pthread_mutex_lock(&g->mu);
    while (!g->paused)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait_done(gate *g) {
    pthread_mutex_lock(&g->mu);
    while (!g->r.finished)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    assert_false(g->r.bad_order);
}

static tern_engine *make_engine_on(tern_model *mdl, int parallel, int64_t ctx, uint64_t budget, int64_t pc_bytes, int chunk, int step,
                                int max_queue) {
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = parallel;
    o.ctx = ctx;
    o.kv_budget_bytes = budget;
    o.prefix_cache_bytes = pc_bytes;
    o.prefix_block = 16;
    o.prefill_chunk = chunk;
    o.step_tokens = step;
    o.max_queue = max_queue;
    o.threads = 2;
    tern_engine *e;
    TU_OK(tern_engine_create(mdl, &o, &e));
    return e;
}

static tern_engine *make_engine(int parallel, int64_t ctx, uint64_t budget, int64_t pc_bytes, int chunk, int step,
                                int max_queue) {
    return make_engine_on(model, parallel, ctx, budget, pc_bytes, chunk, step, max_queue);
}

static void fill_ids(int32_t *ids, int64_t n, uint32_t s) {
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = 2 + (int32_t)((s >> 8) % 500);
    }
}

static tern_request greedy_request(const int32_t *ids, size_t n, int64_t max_tokens) {
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = n;
    r.max_tokens = max_tokens;
    r.ignore_eos = 1;
    return r;
}

static tern_stream *submit(tern_engine *e, const tern_request *r) {
    tern_stream *s;
    TU_OK(tern_engine_submit(e, r, NULL, NULL, &s, NULL));
    return s;
}

/* Greedy continuation computed straight from the model: one forward over the whole prompt, then one
 * token at a time — no engine, no batching, no chunking. */
static void ref_greedy_in(const char *dir, const int32_t *prompt, int64_t n, int64_t gen, int32_t *out) {
    tern_gemma4 *g;
    tern_pool *pool;
    tern_kv *kv;
    TU_OK(tern_gemma4_load(dir, &g));
    TU_OK(tern_pool_create(1, &pool));
    TU_OK(tern_gemma4_kv_create(g, 1, n + gen, n, TERN_KV_BF16, TERN_KV_BF16, &kv));
    int64_t V = tern_gemma4_config_of(g)->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    int seq = 0;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = prompt, .out = TERN_OUT_LAST};
    TU_OK(tern_gemma4_forward(g, kv, pool, &b, logits, NULL));
    TU_OK(tern_batch_commit(kv, &b));
    for (int64_t i = 0; i < gen; i++) {
        out[i] = tern_argmax(logits, V);
        int64_t one = 1;
        tern_batch d = {.n_rows = 1, .seq = &seq, .n_tok = &one, .ids = &out[i], .out = TERN_OUT_LAST};
        if (i + 1 < gen) {
            TU_OK(tern_gemma4_forward(g, kv, pool, &d, logits, NULL));
            TU_OK(tern_batch_commit(kv, &d));
        }
    }
    free(logits);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_gemma4_free(g);
}

static void ref_greedy(const int32_t *prompt, int64_t n, int64_t gen, int32_t *out) {
    ref_greedy_in(model_dir, prompt, n, gen, out);
}

/* Waits until the engine has no active rows (after a stream was dropped without reading). */
static void wait_idle(tern_engine *e) {
    tern_metrics m;
    for (int i = 0; i < 20000; i++) {
        tern_engine_metrics(e, &m);
        if (m.active_rows == 0 && m.queue_depth == 0)
            return;
        usleep(1000);
    }
    fail_msg("engine did not become idle");
}

/* ---- thread count ------------------------------------------------------------------------------- */

/* A model loaded for 3 threads lays its packed weights out for them, an engine left at threads 0 runs that many,
 * and greedy decoding gives the reference's tokens (a model laid out for the core count, one thread). Thread
 * counts out of range are refused at load. */
static void test_model_threads(void **state) {
    tern_model *m = NULL;
    const int bad[] = {-1, 1025};
    for (int i = 0; i < 2; i++) {
        tern_model_opts mo = {.model_dir = model_dir_q4, .threads = bad[i]};
        tern_err *err = tern_model_load(&mo, &m);
        assert_non_null(err);
        assert_int_equal(err->code, TERN_EINVAL);
        assert_null(m);
        tern_err_free(err);
    }
    tern_model_opts mo = {.model_dir = model_dir_q4, .threads = 3};
    TU_OK(tern_model_load(&mo, &m));
    tern_model_info info;
    tern_model_get_info(m, &info);
    assert_int_equal(info.threads, 3);
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 2;
    o.ctx = 160;
    tern_engine *e;
    TU_OK(tern_engine_create(m, &o, &e));
    tern_metrics em;
    tern_engine_metrics(e, &em);
    assert_int_equal(em.threads, 3);
    enum { LEN = 20, GEN = 16 };
    int32_t prompt[LEN], ref[GEN];
    fill_ids(prompt, LEN, 77);
    ref_greedy_in(model_dir_q4, prompt, LEN, GEN, ref);
    static result r;
    memset(&r, 0, sizeof r);
    tern_request rq = greedy_request(prompt, LEN, GEN);
    tern_stream *s = submit(e, &rq);
    drain(s, &r);
    tern_stream_free(s);
    assert_int_equal(r.n, GEN);
    assert_memory_equal(r.toks, ref, sizeof ref);
    tern_engine_destroy(e);
    tern_model_free(m);
}

/* ---- KV cache types ---------------------------------------------------------------------------------- */

/* Requests on caches of q8_0 K / q4_0 V (and q8_0 both) decode batched exactly as one at a time on the same cache
 * types (the oracle model: head_dim 32 and 64, whole blocks), and the engine admits by the smaller rows; a type
 * name it does not know, or block types on heads that are not whole blocks, fail at creation with the reason. */
static void test_kv_cache_types(void **state) {
    (void)state;
    tern_model *m = NULL;
    tern_model_opts mo = {.model_dir = tu_testdata("oracle/tiny-v4096-f32"), .threads = 2};
    TU_OK(tern_model_load(&mo, &m));
    static const char *const types[][2] = {{"q8_0", "q4_0"}, {"q8_0", "q8_0"}};
    enum { N = 3, GEN = 12 };
    int32_t prompts[N][40];
    const size_t len[N] = {9, 23, 40};
    for (int k = 0; k < N; k++)
        fill_ids(prompts[k], (int64_t)len[k], 300 + (uint32_t)k);
    for (int t = 0; t < 2; t++) {
        static result solo[N], batched[N];
        memset(solo, 0, sizeof solo);
        memset(batched, 0, sizeof batched);
        uint64_t row_bytes[2];
        for (int par = 1; par <= N; par += N - 1) {
            tern_engine_opts o;
            tern_engine_opts_default(&o);
            o.parallel = par;
            o.ctx = 64;
            o.threads = 2;
            o.cache_type_k = types[t][0];
            o.cache_type_v = types[t][1];
            tern_engine *e;
            TU_OK(tern_engine_create(m, &o, &e));
            result *res = par == 1 ? solo : batched;
            tern_stream *s[N];
            for (int k = 0; k < N; k++) {
                tern_request r = greedy_request(prompts[k], len[k], GEN);
                s[k] = submit(e, &r);
                if (par == 1)
                    drain(s[k], &res[k]);
            }
            for (int k = 0; k < N; k++) {
                if (par > 1)
                    drain(s[k], &res[k]);
                tern_stream_free(s[k]);
                assert_int_equal(res[k].n, GEN);
            }
            tern_metrics em;
            tern_engine_metrics(e, &em);
            row_bytes[par > 1] = em.kv_bytes_peak;
            tern_engine_destroy(e);
        }
        assert_true(row_bytes[1] > row_bytes[0]); /* three rows at once reserved more than one */
        for (int k = 0; k < N; k++)
            assert_memory_equal(batched[k].toks, solo[k].toks, GEN * sizeof(int32_t));
    }
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.cache_type_v = "q5_1";
    tern_engine *e = NULL;
    TU_FAILS_WITH(tern_engine_create(m, &o, &e), "unknown KV cache type \"q5_1\" (bf16, f16, f32, q8_0 or q4_0)");
    tern_model_free(m);
    tern_engine_opts_default(&o);
    o.cache_type_k = "q4_0";
    TU_FAILS_WITH(tern_engine_create(model, &o, &e), "head_dim is 16; use bf16, f16 or f32 for K");
    assert_null(e);
}

/* ---- batched == solo ------------------------------------------------------------------------------ */

static void batched_equals_solo(tern_model *mdl, const char *dir) {
    enum { N = 8 };
    int32_t prompts[N][96], ref[N][64];
    int64_t len[N], gen[N];
    for (int k = 0; k < N; k++) {
        len[k] = 3 + 11 * k; /* 3 .. 80 tokens */
        gen[k] = 12 + 5 * k; /* 12 .. 47 tokens */
        fill_ids(prompts[k], len[k], 100 + (uint32_t)k);
        ref_greedy_in(dir, prompts[k], len[k], gen[k], ref[k]);
    }
    /* Two shapes: everyone fits (8 rows, prompts prefilled 8 tokens a step), and 3 rows with a queue
     * (rows leave and new ones take their place mid-flight, 5-token prefill chunks). */
    const int cfg[2][3] = {{8, 8, 20}, {3, 5, 12}};
    for (int c = 0; c < 2; c++) {
        tern_engine *e = make_engine_on(mdl, cfg[c][0], 160, 0, -1, cfg[c][1], cfg[c][2], 16);
        static result res[N];
        memset(res, 0, sizeof res);
        tern_stream *s[N];
        for (int k = 0; k < N; k++) {
            if (k > 0) /* join while the previous request is decoding */
                while (res[k - 1].n < 2 && !res[k - 1].finished)
                    read_one(s[k - 1], &res[k - 1]);
            tern_request r = greedy_request(prompts[k], (size_t)len[k], gen[k]);
            s[k] = submit(e, &r);
        }
        for (int k = 0; k < N; k++) {
            drain(s[k], &res[k]);
            tern_stream_free(s[k]);
            assert_int_equal(res[k].done.finish, TERN_FINISH_LENGTH);
            assert_int_equal(res[k].n, gen[k]);
            assert_int_equal(res[k].done.usage.completion_tokens, gen[k]);
            assert_int_equal(res[k].done.usage.prompt_tokens, len[k]);
            assert_memory_equal(res[k].toks, ref[k], (size_t)gen[k] * sizeof(int32_t));
        }
        tern_metrics m;
        tern_engine_metrics(e, &m);
        assert_true(m.step_rows > m.steps); /* rows really shared forwards */
        assert_int_equal(m.requests_finished[TERN_FINISH_LENGTH], N);
        uint64_t total = 0;
        for (int k = 0; k < N; k++)
            total += (uint64_t)gen[k];
        assert_int_equal(m.tokens_generated, total);
        assert_int_equal(m.kv_bytes_in_use, 0);
        tern_engine_destroy(e);
    }
}

static void test_batched_equals_solo(void **state) { batched_equals_solo(model, model_dir); }
static void test_batched_equals_solo_bf16(void **state) { batched_equals_solo(model_bf16, model_dir_bf16); }
static void test_batched_equals_solo_q4(void **state) { batched_equals_solo(model_q4, model_dir_q4); }

/* ---- seeded sampling --------------------------------------------------------------------------- */

static tern_request sampled_request(const int32_t *ids, size_t n, uint64_t seed) {
    tern_request r = greedy_request(ids, n, 30);
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 50;
    r.sampling.top_p = 0.95f;
    r.sampling.repetition_penalty = 1.1f;
    r.sampling.presence_penalty = 0.2f;
    r.sampling.seed = seed;
    r.sampling.has_seed = 1;
    return r;
}

static void seeded_sampling(tern_model *mdl, const char *dir) {
    int32_t p[20], q[33];
    fill_ids(p, 20, 5);
    fill_ids(q, 33, 6);
    static result solo, again, mixed, other, busy[3];
    memset(&solo, 0, sizeof solo);
    memset(&again, 0, sizeof again);
    memset(&mixed, 0, sizeof mixed);
    memset(&other, 0, sizeof other);
    memset(busy, 0, sizeof busy);
    tern_engine *e = make_engine_on(mdl, 1, 128, 0, 0, 16, 32, 8);
    tern_request r = sampled_request(p, 20, 1234);
    tern_stream *s = submit(e, &r);
    drain(s, &solo);
    tern_stream_free(s);
    s = submit(e, &r);
    drain(s, &again);
    tern_stream_free(s);
    tern_engine_destroy(e);
    assert_int_equal(solo.n, 30);
    assert_memory_equal(solo.toks, again.toks, 30 * sizeof(int32_t));

    /* The same request inside a busy batch (other rows decoding and prefilling around it). */
    e = make_engine_on(mdl, 4, 128, 0, -1, 4, 12, 8);
    tern_stream *b[3];
    for (int i = 0; i < 3; i++) {
        tern_request g = i == 1 ? sampled_request(q, 33, 99) : greedy_request(q, 33 - (size_t)i * 7, 40);
        b[i] = submit(e, &g);
    }
    read_one(b[0], &busy[0]);
    s = submit(e, &r);
    drain(s, &mixed);
    tern_stream_free(s);
    tern_request r2 = sampled_request(p, 20, 1235);
    s = submit(e, &r2);
    drain(s, &other);
    tern_stream_free(s);
    for (int i = 0; i < 3; i++) {
        drain(b[i], &busy[i]);
        tern_stream_free(b[i]);
    }
    tern_engine_destroy(e);
    assert_memory_equal(solo.toks, mixed.toks, 30 * sizeof(int32_t));
    assert_memory_not_equal(solo.toks, other.toks, 30 * sizeof(int32_t)); /* another seed, other draws */
    int greedy_like = 1;
    int32_t ref[30];
    ref_greedy_in(dir, p, 20, 30, ref);
    greedy_like = !memcmp(ref, solo.toks, sizeof ref);
    assert_false(greedy_like); /* it really sampled */
}

static void test_seeded_sampling(void **state) { seeded_sampling(model, model_dir); }
static void test_seeded_sampling_bf16(void **state) { seeded_sampling(model_bf16, model_dir_bf16); }

/* ---- prefix cache ------------------------------------------------------------------------------- */

static void test_prefix_cache_hits(void **state) {
    int32_t P[120];
    fill_ids(P, 70, 77);
    static result a, b, c, c_cold, d, d_cold;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    memset(&c_cold, 0, sizeof c_cold);
    memset(&d, 0, sizeof d);
    memset(&d_cold, 0, sizeof d_cold);
    tern_engine *e = make_engine(2, 160, 0, 32 << 20, 16, 40, 8);
    tern_engine *cold = make_engine(2, 160, 0, 0, 16, 40, 8); /* no prefix cache */
    tern_request r = greedy_request(P, 70, 20);
    r.top_logprobs = 5;
    tern_stream *s = submit(e, &r);
    drain(s, &a);
    tern_stream_free(s);
    assert_int_equal(a.done.usage.cached_tokens, 0);
    /* The same prompt: 69 of its 70 tokens come from the cache (the last one runs: its logits choose the first
     * token); same tokens, same logprobs. */
    s = submit(e, &r);
    drain(s, &b);
    tern_stream_free(s);
    assert_int_equal(b.done.usage.cached_tokens, 69);
    assert_int_equal(b.n, 20);
    assert_memory_equal(a.toks, b.toks, 20 * sizeof(int32_t));
    assert_memory_equal(a.lp, b.lp, 20 * sizeof(float));
    assert_memory_equal(a.top0, b.top0, 20 * sizeof(int32_t));
    /* A prompt sharing 37 tokens: exactly 37 cached (2 whole blocks and 5 tokens of the next), and it matches a cold
     * engine exactly. */
    int32_t C[60];
    memcpy(C, P, 37 * sizeof *C);
    fill_ids(C + 37, 23, 78);
    tern_request rc = greedy_request(C, 60, 15);
    rc.top_logprobs = 5;
    s = submit(e, &rc);
    drain(s, &c);
    tern_stream_free(s);
    s = submit(cold, &rc);
    drain(s, &c_cold);
    tern_stream_free(s);
    assert_int_equal(c.done.usage.cached_tokens, 37);
    assert_int_equal(c_cold.done.usage.cached_tokens, 0);
    assert_memory_equal(c.toks, c_cold.toks, 15 * sizeof(int32_t));
    assert_memory_equal(c.lp, c_cold.lp, 15 * sizeof(float));
    /* A follow-up turn (prompt + answer + more): generated tokens were cached too, so the hit goes
     * past the first prompt (70 prompt + 19 fed answer tokens = 89 positions: 5 blocks and a partial one). */
    memcpy(P + 70, a.toks, 20 * sizeof *P);
    fill_ids(P + 90, 6, 79);
    tern_request rd = greedy_request(P, 96, 10);
    rd.top_logprobs = 5;
    s = submit(e, &rd);
    drain(s, &d);
    tern_stream_free(s);
    s = submit(cold, &rd);
    drain(s, &d_cold);
    tern_stream_free(s);
    assert_int_equal(d.done.usage.cached_tokens, 89);
    assert_memory_equal(d.toks, d_cold.toks, 10 * sizeof(int32_t));
    assert_memory_equal(d.lp, d_cold.lp, 10 * sizeof(float));
    tern_metrics m;
    tern_engine_metrics(e, &m);
    assert_int_equal(m.cached_tokens, 69 + 37 + 89);
    assert_int_equal(m.prefix_hits, 3);
    assert_true(m.prefix_cache_blocks > 0 && m.prefix_cache_bytes > 0);
    assert_true(m.prefix_cache_bytes <= m.prefix_cache_cap_bytes);
    tern_engine_destroy(e);
    tern_engine_destroy(cold);
}

/* The prompt cache's disk tier: an engine destroyed and made again over the same folder ("a restart") finds the
 * earlier prompt's K/V there, to the token, with the tokens and logprobs of a cold run; an engine of another KV type
 * does not read them (its blocks mean something else). */
static void test_prompt_cache_restart(void **state) {
    const char *dir = tu_tmpdir("engine-prompt-disk");
    int32_t P[90];
    fill_ids(P, 90, 81);
    static result a, b, cold_r, f16;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b), memset(&cold_r, 0, sizeof cold_r), memset(&f16, 0, sizeof f16);
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 2, o.ctx = 160, o.prefix_cache_bytes = 32 << 20, o.prefix_block = 16, o.prefill_chunk = 16;
    o.step_tokens = 40, o.threads = 2, o.prefix_disk_dir = dir;
    tern_engine *e;
    TU_OK(tern_engine_create(model, &o, &e));
    tern_request r = greedy_request(P, 70, 12);
    r.top_logprobs = 3;
    tern_stream *s = submit(e, &r);
    drain(s, &a);
    tern_stream_free(s);
    tern_engine_destroy(e); /* writes what the tier still has queued */
    TU_OK(tern_engine_create(model, &o, &e));
    tern_request r2 = greedy_request(P, 90, 12); /* the first prompt and 20 more tokens */
    r2.top_logprobs = 3;
    s = submit(e, &r2);
    drain(s, &b);
    tern_stream_free(s);
    tern_metrics m;
    tern_engine_metrics(e, &m);
    tern_engine_destroy(e);
    assert_int_equal(b.done.usage.cached_tokens, 70); /* the whole first prompt, read back from disk */
    assert_int_equal(m.prefix_disk_hit_tokens, 70);
    assert_true(m.prefix_disk_files > 0 && m.prefix_disk_bytes > 0);
    tern_engine *cold = make_engine(2, 160, 0, 0, 16, 40, 8);
    s = submit(cold, &r2);
    drain(s, &cold_r);
    tern_stream_free(s);
    tern_engine_destroy(cold);
    assert_memory_equal(b.toks, cold_r.toks, 12 * sizeof(int32_t));
    assert_memory_equal(b.lp, cold_r.lp, 12 * sizeof(float));
    o.cache_type_k = o.cache_type_v = "f16";
    TU_OK(tern_engine_create(model, &o, &e));
    s = submit(e, &r2);
    drain(s, &f16);
    tern_stream_free(s);
    tern_engine_destroy(e);
    assert_int_equal(f16.done.usage.cached_tokens, 0);
}

/* The disk tier under concurrent use: four threads submit prompts that share a prefix (their prefetches read the tier
 * while the engine thread takes blocks in, evicts from a memory tier of a few blocks and queues writes for the writer
 * thread); every reply is the one a cold engine gives. */
typedef struct disk_client {
    tern_engine *e;
    int id;
    int32_t toks[6][8];
} disk_client;

static void disk_prompt(int id, int j, int32_t *p) {
    fill_ids(p, 60, 91); /* the shared 48 */
    fill_ids(p + 48, 12, (uint32_t)(1000 + id * 10 + j));
}

static void *disk_client_main(void *arg) {
    disk_client *c = arg;
    for (int j = 0; j < 6; j++) {
        int32_t p[60];
        disk_prompt(c->id, j, p);
        tern_request r = greedy_request(p, 60, 8);
        tern_stream *s;
        tern_err *err = tern_engine_submit(c->e, &r, NULL, NULL, &s, NULL);
        if (err) {
            tern_err_free(err);
            continue;
        }
        tern_event ev;
        int n = 0;
        while (tern_stream_next(s, &ev, WAIT_MS) == 1)
            if (ev.kind == TERN_EV_TOKEN && n < 8)
                c->toks[j][n++] = ev.token;
        tern_stream_free(s);
    }
    return NULL;
}

static void test_prompt_cache_disk_concurrent(void **state) {
    const char *dir = tu_tmpdir("engine-disk-concurrent");
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 2, o.ctx = 128, o.prefix_block = 16, o.prefill_chunk = 16, o.step_tokens = 40, o.threads = 2;
    o.prefix_disk_dir = dir;
    tern_model_info mi;
    tern_model_get_info(model, &mi);
    o.prefix_cache_bytes = (int64_t)(6 * 16 * (mi.kv_full_bytes_per_token + mi.kv_sliding_bytes_per_token));
    static disk_client cl[4];
    for (int round = 0; round < 2; round++) { /* the second round starts from the files the first left */
        tern_engine *e;
        TU_OK(tern_engine_create(model, &o, &e));
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            memset(&cl[i], 0, sizeof cl[i]);
            cl[i].e = e, cl[i].id = i;
            assert_int_equal(pthread_create(&th[i], NULL, disk_client_main, &cl[i]), 0);
        }
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        tern_metrics m;
        tern_engine_metrics(e, &m);
        tern_engine_destroy(e);
        assert_true(m.prefix_hit_tokens > 0);
        if (round)
            assert_true(m.prefix_disk_hit_tokens > 0);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++) {
                int32_t p[60], ref[8];
                disk_prompt(i, j, p);
                ref_greedy(p, 60, 8, ref);
                assert_memory_equal(cl[i].toks[j], ref, sizeof ref);
            }
    }
}

/* While memory is short (the head's reservation does not fit), a request behind it whose prompt is mostly cached goes
 * first — but not once the head has waited a second: then it keeps its place. */
static void test_admission_prefers_cached(void **state) {
    tern_model_info mi;
    tern_model_get_info(model, &mi);
    const int chunk = 16;
    tern_kv_cost cost = {mi.kv_full_bytes_per_token, mi.kv_sliding_bytes_per_token, mi.sliding_window + chunk};
    const uint64_t big = tern_kv_cost_bytes(&cost, 60), small = tern_kv_cost_bytes(&cost, 38);
    tern_engine *e = make_engine(2, 128, big + small + (big - small) / 2, 32 << 20, chunk, 64, 8);
    int32_t C[40], A[10], B[20], D[36];
    fill_ids(C, 40, 41), fill_ids(A, 10, 42), fill_ids(B, 20, 43);
    memcpy(D, C, 35 * sizeof *D);
    D[35] = 77;
    static result warm;
    memset(&warm, 0, sizeof warm);
    tern_request rw = greedy_request(C, 40, 1);
    tern_stream *s = submit(e, &rw);
    drain(s, &warm);
    tern_stream_free(s);
    for (int late = 0; late < 2; late++) {
        static result rb, rd;
        memset(&rb, 0, sizeof rb), memset(&rd, 0, sizeof rd);
        gate ga;
        gate_init(&ga, 0); /* the engine holds still after A's first token */
        tern_request ra = greedy_request(A, 10, 50), rqb = greedy_request(B, 20, 40), rqd = greedy_request(D, 36, 2);
        TU_OK(tern_engine_submit(e, &ra, gate_cb, &ga, NULL, NULL));
        gate_wait_paused(&ga);
        tern_stream *sb = submit(e, &rqb); /* waits: A's reservation and B's do not fit together */
        if (late)
            ts_sleep_ms(1200);
        tern_stream *sd = submit(e, &rqd); /* fits beside A, and 35 of its 36 tokens are cached */
        gate_open(&ga);
        drain(sd, &rd);
        drain(sb, &rb);
        gate_wait_done(&ga);
        tern_stream_free(sb);
        tern_stream_free(sd);
        gate_destroy(&ga);
        assert_int_equal(rd.done.usage.cached_tokens, 35);
        assert_true(rb.done.time_s > ga.r.done.time_s); /* B always waits for A's memory */
        if (late) /* the head waited a second: D keeps its place behind it, admitted only once A has finished */
            assert_true(rd.done.time_s > ga.r.done.time_s);
        else
            assert_true(rd.done.time_s < ga.r.done.time_s); /* D went first, beside A */
    }
    tern_engine_destroy(e);
}

/* ---- cancellation ------------------------------------------------------------------------------- */

/* Soft-token spans (audio clips): rows fed in place of their positions' embeddings. Rows equal to the pad
 * token's embedding at pad positions reproduce the plain prompt exactly; the prefix cache reuses a span's
 * positions for the same key only, never for another clip of the same length; bad spans are refused. */
static void test_soft_token_spans(void **state) {
    tern_model_info info;
    tern_model_get_info(model, &info);
    const int64_t H = info.hidden_size, N = 40, at = 10;
    int32_t P[70];
    fill_ids(P, 70, 91);
    for (int64_t k = 0; k < N; k++)
        P[at + k] = 0; /* the pad id: what a soft position's per-layer input reads */
    float *pad_rows = malloc((size_t)(N * H) * sizeof(float)), *A = malloc((size_t)(N * H) * sizeof(float)),
          *B = malloc((size_t)(N * H) * sizeof(float));
    TU_OK(tern_lm_embed(model->lm, 0, pad_rows));
    for (int64_t k = 1; k < N; k++)
        memcpy(pad_rows + k * H, pad_rows, (size_t)H * sizeof(float));
    uint64_t st = 5;
    for (int64_t i = 0; i < N * H; i++) {
        A[i] = tu_frand(&st) * 2.0f;
        B[i] = tu_frand(&st) * 2.0f;
    }
    static result plain, padded, a, a2, b, b_cold;
    memset(&plain, 0, sizeof plain), memset(&padded, 0, sizeof padded), memset(&a, 0, sizeof a);
    memset(&a2, 0, sizeof a2), memset(&b, 0, sizeof b), memset(&b_cold, 0, sizeof b_cold);
    tern_engine *e = make_engine(2, 160, 0, 32 << 20, 16, 40, 8);
    tern_engine *cold = make_engine(2, 160, 0, 0, 16, 40, 8);
    tern_request r = greedy_request(P, 70, 12);
    r.top_logprobs = 3;
    tern_stream *s = submit(cold, &r);
    drain(s, &plain);
    tern_stream_free(s);
    tern_prompt_embeds span = {.pos = at, .n = N, .rows = pad_rows, .key = 1};
    r.embeds = &span, r.n_embeds = 1;
    s = submit(cold, &r);
    drain(s, &padded);
    tern_stream_free(s);
    assert_memory_equal(plain.toks, padded.toks, 12 * sizeof(int32_t));
    assert_memory_equal(plain.lp, padded.lp, 12 * sizeof(float));
    /* Clip A, twice: the second run reuses all but the last position (69 of 70), with the same output. */
    span = (tern_prompt_embeds){.pos = at, .n = N, .rows = A, .key = 0xA};
    s = submit(e, &r);
    drain(s, &a);
    tern_stream_free(s);
    s = submit(e, &r);
    drain(s, &a2);
    tern_stream_free(s);
    assert_int_equal(a.done.usage.cached_tokens, 0);
    assert_int_equal(a2.done.usage.cached_tokens, 69);
    assert_memory_equal(a.toks, a2.toks, 12 * sizeof(int32_t));
    assert_memory_equal(a.lp, a2.lp, 12 * sizeof(float));
    /* Clip B, same length and place: only the 10 text positions before it are shared, and the output is a cold
     * engine's. */
    span = (tern_prompt_embeds){.pos = at, .n = N, .rows = B, .key = 0xB};
    s = submit(e, &r);
    drain(s, &b);
    tern_stream_free(s);
    s = submit(cold, &r);
    drain(s, &b_cold);
    tern_stream_free(s);
    assert_int_equal(b.done.usage.cached_tokens, 10);
    assert_memory_equal(b.toks, b_cold.toks, 12 * sizeof(int32_t));
    assert_memory_equal(b.lp, b_cold.lp, 12 * sizeof(float));
    assert_true(memcmp(a.lp, b.lp, 12 * sizeof(float)) != 0); /* the rows were really fed */
    /* Bad spans. */
    tern_stream *none = NULL;
    tern_prompt_embeds two[2] = {{.pos = 5, .n = 10, .rows = A, .key = 1}, {.pos = 12, .n = 3, .rows = A, .key = 2}};
    r.embeds = two, r.n_embeds = 2;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &none, NULL), "after the span before");
    two[1].pos = 66, two[1].n = 5;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &none, NULL), "must lie in the prompt");
    two[1].n = 4, two[1].rows = NULL;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &none, NULL), "with rows");
    tern_request t = greedy_request(NULL, 0, 4);
    t.prompt_text = "hello", t.prompt_text_len = 5, t.embeds = two, t.n_embeds = 1;
    TU_FAILS_WITH(tern_engine_submit(e, &t, NULL, NULL, &none, NULL), "need a prompt of token ids");
    assert_null(none);
    tern_engine_destroy(e);
    tern_engine_destroy(cold);
    free(pad_rows), free(A), free(B);
}

/* Every final (normed) hidden state of a prompt, straight from the model: one forward over the whole prompt. */
static void ref_hidden(const int32_t *prompt, int64_t n, float *hidden) {
    tern_gemma4 *g;
    tern_pool *pool;
    tern_kv *kv;
    TU_OK(tern_gemma4_load(model_dir, &g));
    TU_OK(tern_pool_create(1, &pool));
    TU_OK(tern_gemma4_kv_create(g, 1, n, n, TERN_KV_BF16, TERN_KV_BF16, &kv));
    uint8_t *want = malloc((size_t)n);
    memset(want, TERN_WANT_HIDDEN, (size_t)n);
    int seq = 0;
    tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = prompt, .want = want};
    TU_OK(tern_gemma4_forward(g, kv, pool, &b, NULL, hidden));
    free(want);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_gemma4_free(g);
}

static void assert_close(const float *a, const float *b, int64_t n, float tol, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i]))))
            fail_msg("%s: [%lld] %g vs %g", what, (long long)i, (double)a[i], (double)b[i]);
}

/* Embedding requests: the prompt's hidden states pooled (mean, last, first) as the model computes them in one
 * forward, though the engine runs the prompt in chunks; the same vector beside a generating row as alone, and again
 * after the prompt went into the prefix cache (which embedding rows never read); nothing generated; an input beyond
 * the context refused. */
static void test_embeddings(void **state) {
    tern_model_info info;
    tern_model_get_info(model, &info);
    const int64_t H = info.hidden_size, N = 70;
    assert_true(H <= 1024);
    int32_t P[161];
    fill_ids(P, 161, 33);
    float *ref = malloc((size_t)(N * H) * sizeof(float)), *mean = calloc((size_t)H, sizeof(float));
    ref_hidden(P, N, ref);
    for (int64_t t = 0; t < N; t++)
        for (int64_t d = 0; d < H; d++)
            mean[d] += ref[t * H + d];
    for (int64_t d = 0; d < H; d++)
        mean[d] /= (float)N;
    tern_engine *e = make_engine(2, 160, 0, 32 << 20, 16, 40, 8);
    static result solo, beside, again, gen, last, first;
    memset(&solo, 0, sizeof solo), memset(&beside, 0, sizeof beside), memset(&again, 0, sizeof again);
    memset(&gen, 0, sizeof gen), memset(&last, 0, sizeof last), memset(&first, 0, sizeof first);
    tern_request r = greedy_request(P, (size_t)N, 0);
    r.embed = 1;
    tern_stream *s = submit(e, &r);
    drain(s, &solo);
    tern_stream_free(s);
    assert_int_equal(solo.n, 0);
    assert_int_equal(solo.done.finish, TERN_FINISH_STOP);
    assert_int_equal(solo.done.n_embedding, H);
    assert_int_equal(solo.done.usage.prompt_tokens, N);
    assert_int_equal(solo.done.usage.completion_tokens, 0);
    assert_close(solo.emb, mean, H, 1e-5f, "mean pooling");
    /* beside a generating row that prefills at the same time */
    tern_request g = greedy_request(P + 3, 50, 20);
    tern_stream *sg = submit(e, &g);
    s = submit(e, &r);
    drain(s, &beside);
    drain(sg, &gen);
    tern_stream_free(s);
    tern_stream_free(sg);
    assert_int_equal(gen.n, 20);
    assert_memory_equal(beside.emb, solo.emb, (size_t)H * sizeof(float));
    s = submit(e, &r); /* its prompt is cached now: not read */
    drain(s, &again);
    tern_stream_free(s);
    assert_int_equal(again.done.usage.cached_tokens, 0);
    assert_memory_equal(again.emb, solo.emb, (size_t)H * sizeof(float));
    r.pooling = TERN_POOL_LAST;
    s = submit(e, &r);
    drain(s, &last);
    tern_stream_free(s);
    assert_close(last.emb, ref + (N - 1) * H, H, 1e-5f, "last pooling");
    r.pooling = TERN_POOL_CLS;
    s = submit(e, &r);
    drain(s, &first);
    tern_stream_free(s);
    assert_close(first.emb, ref, H, 1e-5f, "cls pooling");
    /* the prompt alone must fit: the whole context is fine, one more is not */
    tern_request full = greedy_request(P, 160, 0);
    full.embed = 1;
    s = submit(e, &full);
    static result whole;
    memset(&whole, 0, sizeof whole);
    drain(s, &whole);
    tern_stream_free(s);
    assert_int_equal(whole.done.finish, TERN_FINISH_STOP);
    full.n_prompt_ids = 161;
    tern_stream *none = NULL;
    TU_FAILS_WITH(tern_engine_submit(e, &full, NULL, NULL, &none, NULL), "but a request may hold 160");
    full.n_prompt_ids = 10, full.pooling = (tern_pooling)7;
    TU_FAILS_WITH(tern_engine_submit(e, &full, NULL, NULL, &none, NULL), "pooling must be");
    tern_engine_destroy(e);
    free(ref);
    free(mean);
}

/* Constrained decoding: every reply follows its grammar (greedy, seeded sampling, beside an unconstrained row whose
 * reply is what it is alone), ends where the grammar is complete, or says "length" when max_tokens cuts it; a
 * grammar that does not compile is refused at submit. */
static int digits_reply(const char *t, size_t n) { /* {"n": DIGITS} */
    if (n < 8 || memcmp(t, "{\"n\": ", 6) || t[n - 1] != '}')
        return 0;
    for (size_t i = 6; i + 1 < n; i++)
        if (t[i] < '0' || t[i] > '9')
            return 0;
    return n - 7 <= 4;
}

static void test_grammar_constrained(void **state) {
    static const char G[] = "root ::= \"{\\\"n\\\": \" [0-9]{1,4} \"}\"";
    int32_t P[20];
    fill_ids(P, 20, 55);
    tern_engine *e = make_engine(2, 160, 0, 0, 16, 40, 8);
    static result solo, a, b, c, d;
    memset(&solo, 0, sizeof solo), memset(&a, 0, sizeof a), memset(&b, 0, sizeof b), memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    tern_request plain = greedy_request(P, 20, 12);
    tern_stream *s = submit(e, &plain);
    drain(s, &solo);
    tern_stream_free(s);
    tern_request r = greedy_request(P, 20, 40);
    r.ignore_eos = 0;
    r.grammar = G, r.grammar_len = strlen(G);
    /* The constrained row beside the unconstrained one. */
    tern_stream *s1 = submit(e, &r), *s2 = submit(e, &plain);
    drain(s1, &a);
    drain(s2, &b);
    tern_stream_free(s1), tern_stream_free(s2);
    if (!digits_reply(a.text, a.text_len))
        print_error("constrained reply: '%s'\n", a.text);
    assert_true(digits_reply(a.text, a.text_len));
    assert_int_equal(a.done.finish, TERN_FINISH_STOP);
    assert_memory_equal(b.toks, solo.toks, 12 * sizeof(int32_t));
    /* Seeded sampling at temperature 1.5: still the grammar's language. */
    for (int k = 0; k < 4; k++) {
        static result rs;
        memset(&rs, 0, sizeof rs);
        tern_request t = r;
        t.sampling.temperature = 1.5f;
        t.sampling.seed = 100 + (uint64_t)k, t.sampling.has_seed = 1;
        s = submit(e, &t);
        drain(s, &rs);
        tern_stream_free(s);
        if (!digits_reply(rs.text, rs.text_len))
            print_error("sampled reply %d: '%s'\n", k, rs.text);
        assert_true(digits_reply(rs.text, rs.text_len));
    }
    /* Cut by max_tokens inside the document: "length", and a prefix of the language. */
    tern_request cut = r;
    cut.max_tokens = 3;
    s = submit(e, &cut);
    drain(s, &c);
    tern_stream_free(s);
    assert_int_equal(c.done.finish, TERN_FINISH_LENGTH);
    assert_true(c.text_len <= 8 && !memcmp(c.text, "{\"n\": ", c.text_len < 6 ? c.text_len : 6));
    /* A predicted output (drafted from, verified under the grammar): partly outside the language, yet the reply is
     * the one without it, token for token. */
    static result pr;
    memset(&pr, 0, sizeof pr);
    tern_request with = r;
    with.prediction_text = "{\"n\": 12x}} and more", with.prediction_text_len = strlen(with.prediction_text);
    s = submit(e, &with);
    drain(s, &pr);
    tern_stream_free(s);
    assert_int_equal(pr.n, a.n);
    assert_memory_equal(pr.toks, a.toks, (size_t)a.n * sizeof(int32_t));
    assert_true(pr.done.usage.drafted_tokens > 0);
    /* Grammars that do not compile, or allow no token, are refused / end the request with an error. */
    tern_stream *none = NULL;
    tern_request bad = r;
    bad.grammar = "root ::= (", bad.grammar_len = 10;
    TU_FAILS_WITH(tern_engine_submit(e, &bad, NULL, NULL, &none, NULL), "grammar: line 1");
    bad.grammar = "root ::= [^\\x00-\\U0010FFFF]", bad.grammar_len = strlen(bad.grammar); /* an empty language */
    s = submit(e, &bad);
    drain(s, &d);
    tern_stream_free(s);
    assert_int_equal(d.done.finish, TERN_FINISH_ERROR);
    tern_engine_destroy(e);
}

/* A plain grammar shapes text: an added token its characters would spell ("<|channel>", which the reply parser reads
 * as markup) is never chosen however the logits favour it; with grammar_special it is. */
static void test_grammar_leaves_out_added_tokens(void **state) {
    static const char G[] = "root ::= \"\\\"\" [a-z<|>_]{1,12} \"\\\"\"";
    int32_t P[20], *ids;
    size_t n;
    fill_ids(P, 20, 57);
    TU_OK(tern_model_tokenize(model, "<|channel>", 10, 0, 0, &ids, &n));
    assert_int_equal(n, 1);
    const tern_logit_bias favour = {ids[0], 100.0f};
    tern_engine *e = make_engine(1, 160, 0, 0, 16, 40, 8);
    tern_request r = greedy_request(P, 20, 16);
    r.ignore_eos = 0;
    r.grammar = G, r.grammar_len = strlen(G);
    r.sampling.logit_bias = &favour, r.sampling.n_logit_bias = 1;
    static result plain, special;
    memset(&plain, 0, sizeof plain), memset(&special, 0, sizeof special);
    tern_stream *s = submit(e, &r);
    drain(s, &plain);
    tern_stream_free(s);
    r.grammar_special = 1;
    s = submit(e, &r);
    drain(s, &special);
    tern_stream_free(s);
    int in_plain = 0, in_special = 0;
    for (int i = 0; i < plain.n; i++)
        in_plain += plain.toks[i] == ids[0];
    for (int i = 0; i < special.n; i++)
        in_special += special.toks[i] == ids[0];
    assert_true(plain.n >= 3 && plain.text[0] == '"');
    assert_int_equal(in_plain, 0);
    assert_true(in_special > 0);
    tern_free(ids);
    tern_engine_destroy(e);
}

static void test_cancel_frees_memory(void **state) {
    int32_t p[30];
    fill_ids(p, 30, 31);
    tern_engine *e = make_engine(1, 256, 0, -1, 16, 32, 4);
    tern_metrics m0, m;
    tern_engine_metrics(e, &m0);
    assert_int_equal(m0.kv_bytes_in_use, 0);
    static result b;
    memset(&b, 0, sizeof b);
    tern_request r = greedy_request(p, 30, 0); /* as many as fit: would run for 226 tokens */
    gate ga;
    gate_init(&ga, 2); /* the engine holds still after A's third token */
    uint64_t id_a, id_b;
    tern_stream *sb;
    TU_OK(tern_engine_submit(e, &r, gate_cb, &ga, NULL, &id_a));
    gate_wait_paused(&ga);
    TU_OK(tern_engine_submit(e, &r, NULL, NULL, &sb, &id_b)); /* waits: the only row is busy */
    tern_engine_metrics(e, &m);
    assert_true(m.kv_bytes_in_use > 0);
    assert_int_equal(m.active_rows, 1);
    assert_int_equal(m.queue_depth, 1);
    assert_int_equal(tern_engine_cancel(e, id_b), 1); /* cancelled while queued */
    assert_int_equal(tern_engine_cancel(e, id_a), 1); /* cancelled mid-decode */
    gate_open(&ga);
    drain(sb, &b);
    assert_int_equal(b.done.finish, TERN_FINISH_CANCELLED);
    assert_int_equal(b.done.usage.completion_tokens, 0);
    assert_int_equal(b.n, 0);
    gate_wait_done(&ga);
    assert_int_equal(ga.r.done.finish, TERN_FINISH_CANCELLED);
    assert_int_equal(ga.r.done.usage.completion_tokens, 3); /* freed at the very next step */
    tern_engine_metrics(e, &m); /* DONE is delivered after the row and its memory are freed */
    assert_int_equal(m.kv_bytes_in_use, m0.kv_bytes_in_use);
    assert_int_equal(m.active_rows, 0);
    assert_int_equal(m.prefilling_rows, 0);
    assert_int_equal(m.queue_depth, 0);
    assert_int_equal(m.requests_finished[TERN_FINISH_CANCELLED], 2);
    assert_int_equal(tern_engine_cancel(e, id_a), 0); /* already gone */
    assert_int_equal(tern_engine_cancel(e, 999999), 0);
    tern_stream_free(sb);
    gate_destroy(&ga);
    /* A consumer that walks away (frees its stream unread) cancels too. */
    tern_stream *sc = submit(e, &r);
    tern_stream_free(sc);
    wait_idle(e);
    tern_engine_metrics(e, &m);
    assert_int_equal(m.kv_bytes_in_use, 0);
    assert_int_equal(m.requests_finished[TERN_FINISH_CANCELLED], 3);
    /* The row is reusable: a new request runs to its end. */
    static result c;
    memset(&c, 0, sizeof c);
    tern_request rc = greedy_request(p, 30, 5);
    tern_stream *s = submit(e, &rc);
    drain(s, &c);
    tern_stream_free(s);
    assert_int_equal(c.done.finish, TERN_FINISH_LENGTH);
    int32_t ref[5];
    ref_greedy(p, 30, 5, ref);
    assert_memory_equal(c.toks, ref, sizeof ref);
    tern_engine_destroy(e);
}

/* ---- admission ------------------------------------------------------------------------------------ */

static void test_admission(void **state) {
    tern_model_info mi;
    tern_model_get_info(model, &mi);
    const int chunk = 16;
    tern_kv_cost cost = {mi.kv_full_bytes_per_token, mi.kv_sliding_bytes_per_token, mi.sliding_window + chunk};
    uint64_t budget = tern_kv_cost_bytes(&cost, 40);
    tern_engine *e = make_engine(1, 64, budget, 0, chunk, 32, 1);
    tern_metrics m;
    tern_engine_metrics(e, &m);
    assert_int_equal(m.kv_budget_bytes, budget);
    int32_t p[80];
    fill_ids(p, 80, 9);
    tern_stream *s = NULL;
    tern_request r = greedy_request(p, 64, 1);
    tern_err *err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL);
    assert_non_null(err);
    assert_int_equal(err->code, TERN_EINVAL);
    TU_FAILS_WITH(err, "the prompt has 64 tokens but a request may hold 64");
    assert_null(s);
    r = greedy_request(p, 45, 1);
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "KV budget");
    /* Clamping: 40 positions fit, the prompt takes 30, so 10 tokens at most. */
    const int64_t asked[] = {0, 4, 1000}, got[] = {10, 4, 10};
    for (int i = 0; i < 3; i++) {
        static result res;
        memset(&res, 0, sizeof res);
        r = greedy_request(p, 30, asked[i]);
        s = submit(e, &r);
        drain(s, &res);
        tern_stream_free(s);
        assert_int_equal(res.done.usage.max_tokens, got[i]);
        assert_int_equal(res.done.usage.completion_tokens, got[i]);
        assert_int_equal(res.done.finish, TERN_FINISH_LENGTH);
    }
    /* Bad requests say what is wrong. */
    r = greedy_request(p, 10, 1);
    r.sampling.temperature = -1;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "temperature");
    r = greedy_request(p, 10, 1);
    const char *empty[] = {""};
    r.stop_strings = empty;
    r.n_stop_strings = 1;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "stop string 0");
    r = greedy_request(p, 10, 1);
    r.prompt_text = "hello";
    r.prompt_text_len = 5;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "exactly one prompt");
    int32_t bad[2] = {5, 512};
    r = greedy_request(bad, 2, 1);
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "outside the vocabulary");
    r = greedy_request(p, 0, 1);
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "empty");
    r = greedy_request(p, 10, -1);
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "max_tokens");
    r = greedy_request(p, 10, 1);
    r.top_logprobs = 21;
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, &s, NULL), "top_logprobs");
    TU_FAILS_WITH(tern_engine_submit(e, &r, NULL, NULL, NULL, NULL), "callback or a stream");
    tern_engine_metrics(e, &m);
    assert_int_equal(m.requests_rejected, 9);

    /* Overload: one row busy, one request waiting (max_queue 1), the next is refused at once. */
    static result b;
    memset(&b, 0, sizeof b);
    r = greedy_request(p, 20, 0);
    gate ga;
    gate_init(&ga, 0);
    TU_OK(tern_engine_submit(e, &r, gate_cb, &ga, NULL, NULL));
    gate_wait_paused(&ga);
    tern_stream *sb = submit(e, &r);
    err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL);
    assert_non_null(err);
    assert_int_equal(err->code, TERN_EOVERLOAD);
    TU_FAILS_WITH(err, "busy");
    tern_engine_metrics(e, &m);
    assert_int_equal(m.requests_overloaded, 1);
    assert_int_equal(m.queue_depth, 1);
    gate_open(&ga);
    gate_wait_done(&ga);
    drain(sb, &b);
    assert_int_equal(b.done.finish, TERN_FINISH_LENGTH); /* it ran once the row was free */
    tern_stream_free(sb);
    gate_destroy(&ga);
    tern_engine_destroy(e);

    /* The budget holds one full request: a second waits (rows are free) until the first leaves. */
    e = make_engine(2, 64, tern_kv_cost_bytes(&cost, 64), 0, chunk, 32, 4);
    memset(&b, 0, sizeof b);
    r = greedy_request(p, 20, 0); /* reserves all 64 positions */
    gate_init(&ga, 0);
    TU_OK(tern_engine_submit(e, &r, gate_cb, &ga, NULL, NULL));
    gate_wait_paused(&ga);
    tern_request small = greedy_request(p, 5, 3);
    sb = submit(e, &small);
    tern_engine_metrics(e, &m);
    assert_int_equal(m.active_rows, 1);
    assert_int_equal(m.queue_depth, 1);
    assert_int_equal(m.kv_bytes_in_use, tern_kv_cost_bytes(&cost, 64));
    gate_open(&ga);
    gate_wait_done(&ga);
    drain(sb, &b);
    assert_int_equal(ga.r.done.finish, TERN_FINISH_LENGTH);
    assert_int_equal(ga.r.n, 44);
    assert_int_equal(b.done.finish, TERN_FINISH_LENGTH);
    assert_int_equal(b.n, 3);
    tern_stream_free(sb);
    gate_destroy(&ga);
    tern_engine_metrics(e, &m);
    assert_int_equal(m.kv_bytes_peak, tern_kv_cost_bytes(&cost, 64)); /* never over-committed */
    tern_engine_destroy(e);
}

/* ---- stops ---------------------------------------------------------------------------------------- */

static void test_stops(void **state) {
    int32_t p[20];
    fill_ids(p, 20, 21);
    tern_engine *e = make_engine(2, 128, 0, 0, 16, 32, 4);
    static result full, cut, by_id, eos;
    memset(&full, 0, sizeof full);
    memset(&cut, 0, sizeof cut);
    memset(&by_id, 0, sizeof by_id);
    memset(&eos, 0, sizeof eos);
    tern_request r = greedy_request(p, 20, 60);
    tern_stream *s = submit(e, &r);
    drain(s, &full);
    tern_stream_free(s);
    assert_int_equal(full.n, 60);
    /* A stop string made of the last byte of one token's text and the first byte of the next. */
    int at = -1;
    for (int i = 1; i + 1 < full.n && at < 0; i++) {
        size_t end = full.text_off[i], prev = full.text_off[i - 1], next = full.text_off[i + 1];
        if (end > prev && next > end && (unsigned char)full.text[end - 1] < 0x80 &&
            (unsigned char)full.text[end] < 0x80 && full.text[end - 1] && full.text[end])
            at = i;
    }
    assert_true(at > 0);
    char stop[3] = {full.text[full.text_off[at] - 1], full.text[full.text_off[at]], 0};
    const char *first = strstr(full.text, stop);
    assert_non_null(first);
    size_t expect = (size_t)(first - full.text);
    const char *stops[] = {"never appears \x01", stop};
    r.stop_strings = stops;
    r.n_stop_strings = 2;
    s = submit(e, &r);
    drain(s, &cut);
    tern_stream_free(s);
    assert_int_equal(cut.done.finish, TERN_FINISH_STOP);
    assert_int_equal(cut.done.stop_string, 1);
    assert_int_equal(cut.done.stop_token, -1);
    assert_int_equal(cut.text_len, expect); /* the streamed text stops right before the stop string */
    assert_memory_equal(cut.text, full.text, expect);
    assert_memory_equal(cut.toks, full.toks, (size_t)cut.n * sizeof(int32_t));
    assert_true(cut.n < full.n);
    /* A stop id: the first token that did not occur before position 3 ends generation, unemitted. */
    int j = 3;
    for (;; j++) {
        int seen = 0;
        for (int i = 0; i < j; i++)
            seen |= full.toks[i] == full.toks[j];
        if (!seen)
            break;
    }
    r = greedy_request(p, 20, 60);
    r.stop_ids = &full.toks[j];
    r.n_stop_ids = 1;
    s = submit(e, &r);
    drain(s, &by_id);
    tern_stream_free(s);
    assert_int_equal(by_id.done.finish, TERN_FINISH_STOP);
    assert_int_equal(by_id.done.stop_token, full.toks[j]);
    assert_int_equal(by_id.n, j);
    assert_int_equal(by_id.done.usage.completion_tokens, j + 1);
    /* EOS ends generation unless ignore_eos: force it with a logit bias. */
    r = greedy_request(p, 20, 60);
    r.ignore_eos = 0;
    tern_logit_bias force = {1, 100.0f}; /* <eos> */
    r.sampling.logit_bias = &force;
    r.sampling.n_logit_bias = 1;
    s = submit(e, &r);
    drain(s, &eos);
    tern_stream_free(s);
    assert_int_equal(eos.done.finish, TERN_FINISH_STOP);
    assert_int_equal(eos.done.stop_token, 1);
    assert_int_equal(eos.n, 0);
    tern_engine_destroy(e);
}

/* ---- text prompts, logprobs, callbacks, shutdown --------------------------------------------------- */

typedef struct cb_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    result r[4];
    int done;
} cb_state;

static void on_event(const tern_event *ev, void *user) {
    cb_state *st = user;
    pthread_mutex_lock(&st->mu);
    result *r = &st->r[ev->request_id % 4];
    if (ev->kind == TERN_EV_TOKEN) {
        if (r->n < 1024)
            r->toks[r->n++] = ev->token;
    } else {
        r->done = *ev;
        r->finished = 1;
        st->done++;
        pthread_cond_broadcast(&st->cv);
    }
    pthread_mutex_unlock(&st->mu);
}

static void *destroy_thread(void *arg) {
    tern_engine_destroy(arg);
    return NULL;
}

static void test_text_callbacks_shutdown(void **state) {
    tern_engine *e = make_engine(2, 128, 0, -1, 16, 32, 8);
    static result by_text, by_ids;
    memset(&by_text, 0, sizeof by_text);
    memset(&by_ids, 0, sizeof by_ids);
    const char *text = "the cat is on the mat";
    int32_t *ids;
    size_t n;
    TU_OK(tern_model_tokenize(model, text, strlen(text), 1, 0, &ids, &n));
    assert_true(n > 3);
    assert_int_equal(ids[0], tern_model_bos(model));
    tern_request r = greedy_request(NULL, 0, 12);
    r.prompt_text = text;
    r.prompt_text_len = strlen(text);
    r.add_special = 1;
    r.top_logprobs = 3;
    tern_stream *s = submit(e, &r);
    drain(s, &by_text);
    tern_stream_free(s);
    r = greedy_request(ids, n, 12);
    s = submit(e, &r);
    drain(s, &by_ids);
    tern_stream_free(s);
    assert_int_equal(by_text.done.usage.prompt_tokens, (int64_t)n);
    assert_memory_equal(by_text.toks, by_ids.toks, 12 * sizeof(int32_t));
    for (int i = 0; i < 12; i++) { /* greedy: the chosen token is the most likely one */
        assert_int_equal(by_text.n_top[i], 3);
        assert_int_equal(by_text.top0[i], by_text.toks[i]);
        assert_true(by_text.lp[i] <= 0.0f);
    }
    char *decoded;
    size_t dlen;
    TU_OK(tern_model_detokenize(model, by_ids.toks, 12, 0, &decoded, &dlen));
    assert_int_equal(dlen, by_ids.text_len); /* the streamed pieces add up to the whole decode */
    assert_memory_equal(decoded, by_ids.text, dlen);
    tern_free(decoded);

    /* Callback mode gives the same tokens. */
    cb_state st = {.done = 0};
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    uint64_t id;
    TU_OK(tern_engine_submit(e, &r, on_event, &st, NULL, &id));
    pthread_mutex_lock(&st.mu);
    while (st.done < 1)
        pthread_cond_wait(&st.cv, &st.mu);
    pthread_mutex_unlock(&st.mu);
    assert_int_equal(st.r[id % 4].n, 12);
    assert_memory_equal(st.r[id % 4].toks, by_ids.toks, 12 * sizeof(int32_t));

    /* Destroying the engine ends running and queued requests with CANCELLED before it returns. The
     * first request holds the engine thread still while the engine is told to stop. */
    memset(st.r, 0, sizeof st.r);
    st.done = 0;
    tern_request longr = greedy_request(ids, n, 0);
    gate gd;
    gate_init(&gd, 0);
    TU_OK(tern_engine_submit(e, &longr, gate_cb, &gd, NULL, NULL));
    gate_wait_paused(&gd);
    for (int i = 0; i < 2; i++) /* one takes the second row, one waits in the queue */
        TU_OK(tern_engine_submit(e, &longr, on_event, &st, NULL, NULL));
    tern_stream *left;
    TU_OK(tern_engine_submit(e, &longr, NULL, NULL, &left, NULL));
    pthread_t killer;
    assert_int_equal(pthread_create(&killer, NULL, destroy_thread, e), 0);
    for (;;) { /* once submit says "shutting down", the engine will stop at its next step */
        tern_err *err = tern_engine_submit(e, &longr, on_event, &st, NULL, NULL);
        int code = err ? err->code : TERN_OK;
        tern_err_free(err);
        if (code == TERN_ECANCELLED)
            break;
        assert_true(code == TERN_OK || code == TERN_EOVERLOAD); /* not stopping yet */
        usleep(100);
    }
    gate_open(&gd);
    pthread_join(killer, NULL);
    assert_int_equal(gd.r.done.finish, TERN_FINISH_CANCELLED);
    assert_true(st.done >= 2);
    for (int i = 0; i < 4; i++)
        if (st.r[i].finished)
            assert_int_equal(st.r[i].done.finish, TERN_FINISH_CANCELLED);
    gate_destroy(&gd);
    static result l;
    memset(&l, 0, sizeof l);
    drain(left, &l); /* the stream outlives the engine */
    assert_int_equal(l.done.finish, TERN_FINISH_CANCELLED);
    tern_stream_free(left);
    tern_free(ids);
    pthread_mutex_destroy(&st.mu);
    pthread_cond_destroy(&st.cv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_equals_solo), cmocka_unit_test(test_batched_equals_solo_bf16),
        cmocka_unit_test(test_batched_equals_solo_q4),
        cmocka_unit_test(test_seeded_sampling),     cmocka_unit_test(test_seeded_sampling_bf16),
        cmocka_unit_test(test_prefix_cache_hits),   cmocka_unit_test(test_soft_token_spans),
        cmocka_unit_test(test_grammar_constrained),
        cmocka_unit_test(test_grammar_leaves_out_added_tokens), cmocka_unit_test(test_cancel_frees_memory),
        cmocka_unit_test(test_admission),           cmocka_unit_test(test_stops),
        cmocka_unit_test(test_text_callbacks_shutdown), cmocka_unit_test(test_model_threads),
        cmocka_unit_test(test_kv_cache_types),      cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_prompt_cache_restart), cmocka_unit_test(test_admission_prefers_cached),
        cmocka_unit_test(test_prompt_cache_disk_concurrent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
