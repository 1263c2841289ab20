/* test_speculative.c — speculative decoding in the engine is lossless: greedy output is the same token for token
 * with and without every draft source (prompt lookup; predicted outputs that agree fully, partly and not at all),
 * solo and batched with rows joining and leaving, and a prediction given as text that the model splits into other
 * tokens; seeded sampling with speculation reproduces itself; the usage
 * counts what was drafted and kept; the Gemma 4 assistant drafter serves as a source the same way; and at the model
 * level, rolling a verify pass back to any accepted length
 * leaves the KV cache exactly as a plain run over the accepted tokens would. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"
#include "kv/kv_cache.h"
#include "models/model.h"
#include "models/synth.h"
#include "sample/sampler.h"
#include "draft/draft.h"
#include "draft/policy.h"
#include "tokenizer/piece_index.h"
#include "tern/tern.h"
#include "testutil.h"

#define WAIT_MS 120000
#define GEN 40

static tern_model *model;
static char model_dir[4096];

static int setup(void **state) {
    (void)state;
    tern_err *e = tu_tiny_model("spec_model", TERN_SYNTH_F32, 11, NULL, model_dir);
    tern_model_opts mo = {.model_dir = model_dir};
    if (!e)
        e = tern_model_load(&mo, &model);
    if (e) {
        print_error("%s\n", tern_err_msg(e));
        tern_err_free(e);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tern_model_free(model);
    return 0;
}

typedef struct run {
    int32_t toks[GEN];
    int n;
    tern_usage usage;
} run;

/* Prompts with repeated stretches (what prompt lookup feeds on) of different lengths. */
static void prompt_of(int k, int32_t *ids, int64_t *n) {
    uint32_t s = 40503u * (uint32_t)(k + 1);
    const int period = 5 + k % 4, len = 12 + 7 * k;
    for (int i = 0; i < len; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = i >= period && (s >> 9) % 3 ? ids[i - period] : 2 + (int32_t)((s >> 8) % 500);
    }
    *n = len;
}

/* An engine on m of `parallel` rows and ctx positions drafting up to draft_max tokens (-1: no speculation): by prompt
 * lookup with `ngram`, and with the drafter at `drafter` unless NULL (head: tern_engine_opts.draft_head). */
static tern_engine *engine_on(tern_model *m, int parallel, int ngram, int draft_max, int64_t ctx, const char *drafter,
                              int head) {
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = parallel;
    o.ctx = ctx;
    o.prefill_chunk = 16;
    o.step_tokens = 64;
    o.draft_ngram = ngram;
    o.draft_max = draft_max;
    o.draft_model = drafter;
    o.draft_head = head;
    tern_engine *e;
    TU_OK(tern_engine_create(m, &o, &e));
    return e;
}

static tern_engine *engine(int parallel, int ngram, int draft_max) {
    return engine_on(model, parallel, ngram, draft_max, 256, NULL, 0);
}

/* Runs n requests on e (all submitted at once: with fewer rows than requests they join as others leave),
 * prediction[k] (may be NULL) as each one's predicted output, or pred_text[k] as its text. */
/* Tokens every request of run_text bans (none unless a test sets them). */
static tern_logit_bias *ban;
static int n_ban;
/* run_text's requests carry no seed (sampled drafts) unless 0. */
static int unseeded;

static void run_text(tern_engine *e, int n, const int32_t *const *pred, const int *n_pred, char *const *pred_text,
                     float temperature, run *out) {
    tern_stream *s[8];
    int32_t ids[8][64];
    for (int k = 0; k < n; k++) {
        int64_t len;
        prompt_of(k, ids[k], &len);
        tern_request r;
        tern_request_default(&r);
        r.prompt_ids = ids[k];
        r.n_prompt_ids = (size_t)len;
        r.max_tokens = GEN;
        r.ignore_eos = 1;
        r.sampling.temperature = temperature;
        r.sampling.seed = 1234 + (uint64_t)k;
        r.sampling.has_seed = !unseeded;
        if (pred && pred[k]) {
            r.prediction_ids = pred[k];
            r.n_prediction_ids = (size_t)n_pred[k];
        }
        if (pred_text && pred_text[k]) {
            r.prediction_text = pred_text[k];
            r.prediction_text_len = strlen(pred_text[k]);
        }
        r.sampling.logit_bias = ban;
        r.sampling.n_logit_bias = n_ban;
        TU_OK(tern_engine_submit(e, &r, NULL, NULL, &s[k], NULL));
    }
    for (int k = 0; k < n; k++) {
        memset(&out[k], 0, sizeof out[k]);
        tern_event ev;
        while (tern_stream_next(s[k], &ev, WAIT_MS) == 1) {
            if (ev.kind == TERN_EV_TOKEN) {
                assert_int_equal(ev.index, out[k].n);
                out[k].toks[out[k].n++] = ev.token;
            } else {
                out[k].usage = ev.usage;
                assert_int_equal(ev.finish, TERN_FINISH_LENGTH);
            }
        }
        tern_stream_free(s[k]);
        assert_int_equal(out[k].n, GEN);
    }
}

static void run_all(tern_engine *e, int n, const int32_t *const *pred, const int *n_pred, float temperature,
                    run *out) {
    run_text(e, n, pred, n_pred, NULL, temperature, out);
}

static void expect_same(const run *a, const run *b, int n, const char *what) {
    for (int k = 0; k < n; k++)
        if (memcmp(a[k].toks, b[k].toks, sizeof a[k].toks)) {
            int at = 0;
            while (a[k].toks[at] == b[k].toks[at])
                at++;
            fail_msg("%s: request %d differs from plain decoding at token %d", what, k, at);
        }
}

enum { N = 6 };

static void test_greedy_identical(void **state) {
    (void)state;
    static run plain[N], got[N];
    tern_engine *e = engine(3, 0, -1);
    run_all(e, N, NULL, NULL, 0.0f, plain);
    tern_engine_destroy(e);
    for (int k = 0; k < N; k++)
        assert_int_equal(plain[k].usage.drafted_tokens, 0);
    /* Prompt lookup, solo and with 3 rows for 6 requests. */
    const int rows[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        e = engine(rows[i], 1, 6);
        run_all(e, N, NULL, NULL, 0.0f, got);
        tern_metrics m;
        tern_engine_metrics(e, &m);
        tern_engine_destroy(e);
        expect_same(plain, got, N, "n-gram");
        int64_t drafted = 0, kept = 0;
        for (int k = 0; k < N; k++)
            drafted += got[k].usage.drafted_tokens, kept += got[k].usage.accepted_draft_tokens;
        print_message("n-gram, %d rows: %lld drafted, %lld kept\n", rows[i], (long long)drafted, (long long)kept);
        assert_true(drafted > 0 && kept > 0); /* the repeated stretches do get drafted from */
        assert_int_equal(m.draft_tokens[0], (uint64_t)drafted);
        assert_int_equal(m.draft_accepted[0], (uint64_t)kept);
    }
    /* Predicted outputs: the plain output itself, the same with every 4th token changed, and unrelated tokens. */
    static int32_t pred[3][N][GEN];
    for (int k = 0; k < N; k++)
        for (int j = 0; j < GEN; j++) {
            pred[0][k][j] = plain[k].toks[j];
            pred[1][k][j] = j % 4 == 3 ? 2 + (plain[k].toks[j] + 7) % 500 : plain[k].toks[j];
            pred[2][k][j] = 2 + (j * 37 + k * 11) % 500;
        }
    for (int p = 0; p < 3; p++) {
        const int32_t *pp[N];
        int np[N];
        for (int k = 0; k < N; k++)
            pp[k] = pred[p][k], np[k] = GEN;
        for (int i = 0; i < 2; i++) {
            e = engine(rows[i], 0, 8);
            run_all(e, N, pp, np, 0.0f, got);
            tern_engine_destroy(e);
            expect_same(plain, got, N, p == 0 ? "full prediction" : p == 1 ? "partial prediction" : "bad prediction");
            int64_t acc = 0, rej = 0;
            for (int k = 0; k < N; k++)
                acc += got[k].usage.accepted_prediction_tokens, rej += got[k].usage.rejected_prediction_tokens;
            print_message("prediction %d, %d rows: %lld accepted, %lld rejected\n", p, rows[i], (long long)acc,
                          (long long)rej);
            /* How much is drafted depends on the row's measured speed with and without drafts (timing), so only
             * the kind of outcome is checked: a full prediction is never rejected, a partial one both. */
            if (p == 0)
                assert_true(rej == 0 && acc > 0);
            if (p == 1)
                assert_true(acc > 0 && rej > 0);
        }
    }
}

/* A prediction given as text (as the OpenAI API gives it) that is the output's own text, whose tokenization is not
 * the model's tokens (a random model's output re-tokenizes differently): the output stays the same. */
static void test_prediction_text_aligned(void **state) {
    (void)state;
    static run plain[N], got[N];
    /* The test vocabulary of 512 tokens cannot spell text the way a real one does (most merges are missing): this
     * model has Gemma 4's whole vocabulary. */
    static const char *cfg_text =
        "{\"text_config\": {\"vocab_size\": 262144, \"hidden_size\": 64, \"intermediate_size\": 128,"
        " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16,"
        " \"global_head_dim\": 32, \"sliding_window\": 8,"
        " \"layer_types\": [\"sliding_attention\", \"full_attention\"]}}";
    json_t *cfg;
    TU_OK(tern_json_load_buf(cfg_text, strlen(cfg_text), "test config", &cfg));
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("spec_full_vocab"));
    tern_synth_opts so = {.dtype = TERN_SYNTH_F32, .seed = 5, .vocab_gguf = TERN_ASSETS_DIR "/gemma4/vocab.gguf"};
    TU_OK(tern_synth_write(cfg, &so, dir));
    json_decref(cfg);
    tern_model *fm;
    tern_model_opts mo = {.model_dir = dir};
    TU_OK(tern_model_load(&mo, &fm));
    /* Text a client could send back: no lone bytes of unfinished characters (this random model writes many). */
    static tern_logit_bias bans[256];
    n_ban = 0;
    for (int32_t id = 0; id < 262144 && n_ban < 256; id++) {
        size_t len = 0;
        char *p = tern_model_token_piece(fm, id, &len);
        if (p && len == 1 && (unsigned char)p[0] >= 0x80)
            bans[n_ban++] = (tern_logit_bias){.token = id, .bias = -INFINITY};
        tern_free(p);
    }
    ban = bans;
    tern_engine *e = engine_on(fm, 3, 0, -1, 256, NULL, 0);
    run_all(e, N, NULL, NULL, 0.0f, plain);
    tern_engine_destroy(e);
    char *text[N];
    int resplit = 0;
    for (int k = 0; k < N; k++) {
        size_t len = 0, n = 0;
        int32_t *ids = NULL;
        TU_OK(tern_model_detokenize(fm, plain[k].toks, GEN, 1, &text[k], &len));
        TU_OK(tern_model_tokenize(fm, text[k], len, 0, 0, &ids, &n));
        resplit += n != GEN || memcmp(ids, plain[k].toks, sizeof plain[k].toks);
        tern_free(ids);
    }
    print_message("%d of %d outputs tokenize differently from their text\n", resplit, N);
    assert_true(resplit > 0); /* otherwise this tests nothing the token-id predictions do not */
    const int rows[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        e = engine_on(fm, rows[i], 0, 8, 256, NULL, 0);
        run_text(e, N, NULL, NULL, text, 0.0f, got);
        tern_engine_destroy(e);
        expect_same(plain, got, N, "prediction as text");
        int64_t acc = 0, rej = 0;
        for (int k = 0; k < N; k++)
            acc += got[k].usage.accepted_prediction_tokens, rej += got[k].usage.rejected_prediction_tokens;
        print_message("prediction as text, %d rows: %lld accepted, %lld rejected\n", rows[i], (long long)acc,
                      (long long)rej);
        assert_true(acc > 0); /* how much is drafted depends on the rows' measured speed */
    }
    for (int k = 0; k < N; k++)
        tern_free(text[k]);
    ban = NULL;
    n_ban = 0;
    tern_model_free(fm);
}

/* The prediction source on its own, with Gemma 4's vocabulary: the output splits one of the prediction's tokens in
 * two. Drafting follows the text, so it proposes the rest of the split token and then the prediction's own tokens
 * again: one wrong first draft in the whole output (where the split begins), not a drift for the rest of it. */
static void test_prediction_split_token(void **state) {
    (void)state;
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load_gguf(TERN_ASSETS_DIR "/gemma4/vocab.gguf", &tok));
    const char *text = "The quick brown fox jumps over the lazy dog, and the cat sleeps in the warm sun all day long.";
    tern_tokens pred = {0};
    TU_OK(tern_tokenize(tok, text, strlen(text), 0, 0, &pred));
    assert_true(pred.n > 12);
    /* The output: the prediction with token 5 written as two tokens (its first byte, then the rest). */
    size_t len = 0;
    char *piece = tern_tokenizer_token_piece(tok, pred.ids[5], &len);
    assert_true(len >= 3);
    tern_tokens a = {0}, b = {0};
    TU_OK(tern_tokenize(tok, piece, 1, 0, 0, &a));
    TU_OK(tern_tokenize(tok, piece + 1, len - 1, 0, 0, &b));
    free(piece);
    int32_t out[64];
    int n = 0;
    out[n++] = 2; /* the prompt: one token */
    for (size_t i = 0; i < pred.n; i++) {
        if (i == 5) {
            for (size_t j = 0; j < a.n; j++)
                out[n++] = a.ids[j];
            for (size_t j = 0; j < b.n; j++)
                out[n++] = b.ids[j];
        } else
            out[n++] = pred.ids[i];
    }
    tern_draft_source *src;
    TU_OK(tern_draft_prediction_new(1, tok, &src));
    TU_OK(src->vt->row_start(src, 0, pred.ids, (int64_t)pred.n));
    int wrong = 0;
    for (int t = 2; t < n; t++) { /* the output so far is out[1, t); out[t] comes next */
        int32_t d[4];
        tern_draft_ask ask = {.row = 0, .toks = out, .n_toks = t, .n_prompt = 1, .k = 4, .out = d};
        TU_OK(src->vt->draft(src, &ask, 1));
        assert_true(ask.n_out > 0 || t == n - 1);
        wrong += ask.n_out > 0 && d[0] != out[t];
    }
    print_message("split token: %zu + %zu tokens for 1; %d wrong first drafts over %d steps\n", a.n, b.n, wrong, n - 2);
    assert_int_equal(wrong, 1);
    tern_draft_source_free(src);
    tern_tokens_free(&a);
    tern_tokens_free(&b);
    tern_tokens_free(&pred);
    tern_tokenizer_free(tok);
}

/* Greedy verification of the prediction source's drafts (8 a step) against an output out[1, n) after a one-token
 * prompt: each step keeps the drafts that match and the model's own next token. Returns the steps taken. */
static int verify_prediction(const tern_tokenizer *tok, const tern_tokens *pred, const int32_t *out, int n,
                             int *drafted, int *accepted) {
    tern_draft_source *src;
    TU_OK(tern_draft_prediction_new(1, tok, &src));
    TU_OK(src->vt->row_start(src, 0, pred->ids, (int64_t)pred->n));
    int steps = 0;
    for (int t = 2; t < n; steps++) { /* the output so far is out[1, t); out[t] comes next */
        int32_t d[8];
        tern_draft_ask ask = {.row = 0, .toks = out, .n_toks = t, .n_prompt = 1, .k = 8, .out = d};
        TU_OK(src->vt->draft(src, &ask, 1));
        int ok = 0;
        while (ok < ask.n_out && t + ok < n && d[ok] == out[t + ok])
            ok++;
        *drafted += ask.n_out, *accepted += ok;
        t += ok + 1;
    }
    tern_draft_source_free(src);
    return steps;
}

/* A model that splits text otherwise than the tokenizer would — a random model writes arbitrary tokens, e.g.
 * "geschoss" "pyridine", which the merges make "ges" "chos" "sp" "yridine" — but into the longest pieces: once the
 * output has shown that, the source drafts that split, so only the first drafts miss. The tokens are e2b's (random
 * weights) own output. */
static void test_prediction_longest_split(void **state) {
    (void)state;
    static const int32_t ids[] = {137798, 5286,   5286,   15282,  96906,  235147, 235147, 95460,  102725,
                                  126792, 160502, 160502, 160502, 196914, 196914, 171813, 222529, 126253,
                                  17700,  17700,  174408, 176007, 132744, 132744, 124822, 86071,  43950,
                                  43950,  43950,  43950,  254148, 254148, 254148, 83764};
    enum { REPEAT = 3 }; /* the output: those tokens three times */
    const int n_ids = REPEAT * (int)(sizeof ids / sizeof *ids);
    int32_t out[REPEAT * sizeof ids / sizeof *ids + 1] = {2}; /* after a prompt of one token */
    for (int r = 0; r < REPEAT; r++)
        memcpy(out + 1 + r * (n_ids / REPEAT), ids, sizeof ids);
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load_gguf(TERN_ASSETS_DIR "/gemma4/vocab.gguf", &tok));
    char *text = NULL;
    size_t tl = 0;
    TU_OK(tern_detokenize(tok, out + 1, (size_t)n_ids, 0, &text, &tl));
    tern_tokens pred = {0};
    TU_OK(tern_tokenize(tok, text, tl, 0, 0, &pred));
    tern_piece_index *pieces;
    TU_OK(tern_piece_index_new(tok, &pieces));
    size_t at = 0;
    for (int i = 0; i < n_ids; i++) { /* the premise: the longest pieces are the output's tokens */
        size_t len = 0;
        assert_int_equal(tern_piece_index_longest(pieces, text + at, tl - at, &len), out[1 + i]);
        at += len;
    }
    const int n = n_ids + 1;
    int drafted = 0, accepted = 0;
    verify_prediction(tok, &pred, out, n, &drafted, &accepted);
    print_message("longest pieces: %d output tokens, %zu by the tokenizer; %d of %d drafted tokens accepted\n", n_ids,
                  pred.n, accepted, drafted);
    assert_true(pred.n > (size_t)n_ids);
    assert_true(accepted >= drafted * 9 / 10);
    tern_piece_index_free(pieces);
    tern_tokens_free(&pred);
    free(text);
    tern_tokenizer_free(tok);
}

/* A prediction with words rewritten (3 words in 10 reversed, as bench/prediction_server.mjs edits them): after a
 * rewritten word's first token the substitution guess soon proves wrong, so the source drafts nothing through the
 * edit and starts again when the output's last bytes are the prediction's; most of what it drafts is kept. */
static void test_prediction_edited_words(void **state) {
    (void)state;
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load_gguf(TERN_ASSETS_DIR "/gemma4/vocab.gguf", &tok));
    const char *text =
        "The keeper climbed the spiral stairs every evening to light the great lamp above the rocks, and every "
        "morning he wrote the weather into a heavy book that nobody else had read in forty years of service at the "
        "edge of the cold northern sea, where ships passed far out beyond the reef.";
    char edited[1024];
    size_t el = 0;
    int w = 0;
    for (const char *p = text; *p;) {
        if (*p == ' ') {
            edited[el++] = *p++;
            continue;
        }
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        if (w++ % 10 < 3) {
            for (const char *q = e; q > p; q--)
                edited[el++] = q[-1];
            edited[el++] = 'x';
        } else {
            memcpy(edited + el, p, (size_t)(e - p));
            el += (size_t)(e - p);
        }
        p = e;
    }
    tern_tokens pred = {0}, truth = {0};
    TU_OK(tern_tokenize(tok, edited, el, 0, 0, &pred));
    TU_OK(tern_tokenize(tok, text, strlen(text), 0, 0, &truth));
    int32_t out[256] = {2}; /* after a prompt of one token */
    memcpy(out + 1, truth.ids, truth.n * sizeof *truth.ids);
    const int n = (int)truth.n + 1;
    int drafted = 0, accepted = 0;
    const int steps = verify_prediction(tok, &pred, out, n, &drafted, &accepted);
    print_message("edited words: %d of %d drafted tokens accepted, %d tokens in %d steps\n", accepted, drafted, n - 2,
                  steps);
    assert_true(accepted * 10 >= drafted * 6);
    assert_true(steps * 2 < n - 2);
    tern_tokens_free(&pred);
    tern_tokens_free(&truth);
    tern_tokenizer_free(tok);
}

/* Words changed in place and followed by a short unchanged word: once the output has written that word where the
 * prediction has it (as many words on from where they parted), the source drafts the rest of the prediction at
 * once, where matching the output's last bytes alone would wait for 6 of them. Each output token is seen on its own
 * step, as in plain decoding while the row is lost. */
static void test_prediction_rejoin_by_words(void **state) {
    (void)state;
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load_gguf(TERN_ASSETS_DIR "/gemma4/vocab.gguf", &tok));
    const char *predicted = "We carried the red box to the old shed by the gate.";
    const char *written = "We carried the blueish crateling to"; /* the new words in several tokens each */
    const char *rest = " the old shed by the gate.";
    tern_tokens pred = {0}, out = {0}, want = {0};
    TU_OK(tern_tokenize(tok, predicted, strlen(predicted), 0, 0, &pred));
    TU_OK(tern_tokenize(tok, written, strlen(written), 0, 0, &out));
    TU_OK(tern_tokenize(tok, rest, strlen(rest), 0, 0, &want));
    int32_t toks[64] = {2}; /* after a prompt of one token */
    assert_true(out.n < 63 && want.n <= 8);
    memcpy(toks + 1, out.ids, out.n * sizeof *out.ids);
    tern_draft_source *src;
    TU_OK(tern_draft_prediction_new(1, tok, &src));
    TU_OK(src->vt->row_start(src, 0, pred.ids, (int64_t)pred.n));
    int32_t d[8];
    tern_draft_ask ask = {.row = 0, .toks = toks, .n_prompt = 1, .k = 8, .out = d};
    for (size_t t = 2; t <= out.n + 1; t++) {
        ask.n_toks = (int64_t)t;
        TU_OK(src->vt->draft(src, &ask, 1));
    }
    assert_int_equal(ask.n_out, (int)want.n);
    assert_memory_equal(d, want.ids, want.n * sizeof *d);
    tern_draft_source_free(src);
    tern_tokens_free(&pred);
    tern_tokens_free(&out);
    tern_tokens_free(&want);
    tern_tokenizer_free(tok);
}

/* What a request sees is the same with speculation: each token's logprob and alternatives, the streamed text, and
 * where a stop string ends it. */
typedef struct seen {
    int32_t toks[GEN];
    float lp[GEN];
    int32_t top[GEN][3];
    int n;
    char text[4096];
    size_t len;
    tern_finish finish;
} seen;

static void watch(tern_engine *e, const int32_t *ids, int64_t n, const int32_t *pred, int n_pred, const char *stop,
                  seen *out) {
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = (size_t)n;
    r.max_tokens = GEN;
    r.ignore_eos = 1;
    r.logprobs = 1;
    r.top_logprobs = 3;
    r.prediction_ids = pred;
    r.n_prediction_ids = (size_t)n_pred;
    r.stop_strings = &stop;
    r.n_stop_strings = stop ? 1 : 0;
    tern_stream *s;
    TU_OK(tern_engine_submit(e, &r, NULL, NULL, &s, NULL));
    memset(out, 0, sizeof *out);
    tern_event ev;
    while (tern_stream_next(s, &ev, WAIT_MS) == 1) {
        if (out->len + ev.text_len < sizeof out->text) {
            memcpy(out->text + out->len, ev.text, ev.text_len);
            out->len += ev.text_len;
        }
        if (ev.kind == TERN_EV_TOKEN) {
            out->toks[out->n] = ev.token;
            out->lp[out->n] = ev.logprob;
            for (int k = 0; k < 3 && k < ev.n_top; k++)
                out->top[out->n][k] = ev.top_ids[k];
            out->n++;
        } else {
            out->finish = ev.finish;
        }
    }
    tern_stream_free(s);
}

static void test_outputs_unchanged(void **state) {
    (void)state;
    int32_t ids[64];
    int64_t n;
    prompt_of(2, ids, &n);
    tern_engine *e = engine(2, 0, 8);
    static seen plain, spec;
    watch(e, ids, n, NULL, 0, NULL, &plain);
    assert_int_equal(plain.n, GEN);
    /* A stop string: a stretch of the plain text from its middle. */
    char stop[16] = {0};
    const size_t at = plain.len / 2, sl = plain.len - at < 6 ? plain.len - at : 6;
    memcpy(stop, plain.text + at, sl);
    for (int with_stop = 0; with_stop < 2; with_stop++) {
        const char *st = with_stop && sl ? stop : NULL;
        watch(e, ids, n, NULL, 0, st, &plain);
        watch(e, ids, n, plain.toks, plain.n, st, &spec); /* the prediction: the output itself */
        assert_int_equal(spec.n, plain.n);
        assert_int_equal(spec.finish, plain.finish);
        assert_memory_equal(spec.toks, plain.toks, (size_t)plain.n * sizeof *plain.toks);
        assert_memory_equal(spec.lp, plain.lp, (size_t)plain.n * sizeof *plain.lp);
        assert_memory_equal(spec.top, plain.top, sizeof plain.top);
        assert_int_equal(spec.len, plain.len);
        assert_memory_equal(spec.text, plain.text, plain.len);
        if (st)
            assert_int_equal(plain.finish, TERN_FINISH_STOP);
    }
    tern_engine_destroy(e);
}

/* With temperature a seeded request samples the same tokens with speculation as without: each chosen token is
 * drawn as plain sampling draws it (one uniform per token, in order) and a draft is kept when it is that token. */
static void test_seeded_sampling(void **state) {
    (void)state;
    static run plain[N], got[N], again[N];
    tern_engine *e = engine(3, 0, -1);
    run_all(e, N, NULL, NULL, 0.9f, plain);
    tern_engine_destroy(e);
    e = engine(3, 1, 6);
    run_all(e, N, NULL, NULL, 0.9f, got);
    run_all(e, N, NULL, NULL, 0.9f, again);
    tern_metrics m;
    tern_engine_metrics(e, &m);
    tern_engine_destroy(e);
    expect_same(plain, got, N, "seeded sampling with prompt lookup");
    expect_same(plain, again, N, "seeded sampling with prompt lookup, again");
    assert_true(m.draft_tokens[0] > 0);
}

/* Rolling a verify pass back: for every accepted count n = 0..k the cache holds exactly what a plain run over
 * [prompt, last, d1..dn] holds (each token fed as a generated one in both, so the same kernels serve it). */
static void test_rollback_equals_plain(void **state) {
    (void)state;
    enum { K = 5 };
    tern_lm *lm;
    TU_OK(tern_lm_load(model_dir, 1, &lm));
    tern_pool *pool;
    TU_OK(tern_pool_create(1, &pool));
    const int64_t V = tern_lm_desc_of(lm)->vocab;
    float *logits = malloc((size_t)(K + 1) * (size_t)V * sizeof *logits);
    int32_t prompt[64], spec[K + 1];
    int64_t L;
    prompt_of(3, prompt, &L);
    for (int i = 0; i <= K; i++)
        spec[i] = 3 + 17 * i;
    int seq = 0;
    for (int n = 0; n <= K; n++) {
        tern_kv *a, *b;
        TU_OK(tern_lm_kv_create(lm, 1, 64, 16, TERN_KV_F32, TERN_KV_F32, &a));
        TU_OK(tern_lm_kv_create(lm, 1, 64, 16, TERN_KV_F32, TERN_KV_F32, &b));
        /* a: the prompt token by token, then the verify pass over [last, d1..dK], rolled back to n kept. */
        for (int64_t i = 0; i < L; i++) {
            int64_t one = 1;
            uint8_t dec = 0;
            tern_batch t = {.n_rows = 1, .seq = &seq, .n_tok = &one, .ids = &prompt[i], .out = TERN_OUT_LAST,
                            .row_prefill = &dec};
            TU_OK(tern_lm_forward(lm, a, pool, &t, logits, NULL));
            TU_OK(tern_batch_commit(a, &t));
            TU_OK(tern_lm_forward(lm, b, pool, &t, logits, NULL));
            TU_OK(tern_batch_commit(b, &t));
        }
        int64_t kk = K + 1;
        uint8_t dec = 0;
        tern_batch v = {.n_rows = 1, .seq = &seq, .n_tok = &kk, .ids = spec, .out = TERN_OUT_ALL, .row_prefill = &dec};
        TU_OK(tern_lm_forward(lm, a, pool, &v, logits, NULL));
        TU_OK(tern_batch_commit(a, &v));
        TU_OK(tern_kv_set_len(a, 0, L + n + 1));
        /* b: the kept tokens one by one. */
        for (int i = 0; i <= n; i++) {
            int64_t one = 1;
            tern_batch t = {.n_rows = 1, .seq = &seq, .n_tok = &one, .ids = &spec[i], .out = TERN_OUT_LAST,
                            .row_prefill = &dec};
            TU_OK(tern_lm_forward(lm, b, pool, &t, logits, NULL));
            TU_OK(tern_batch_commit(b, &t));
        }
        assert_int_equal(tern_kv_len(a, 0), tern_kv_len(b, 0));
        const int64_t hd_max = 1024;
        float *ka = malloc(hd_max * sizeof *ka), *kb = malloc(hd_max * sizeof *kb);
        for (int l = 0; l < tern_kv_n_layers(a); l++)
            for (int64_t p = 0; p < L + n + 1; p++) {
                /* Ring slots the rolled-back writes reused hold positions no later query reads (older than the
                 * window: the ring's extra slots cover the rollback); holds() knows, and they are not compared. */
                if (!tern_kv_holds(a, l, 0, p))
                    continue;
                assert_true(tern_kv_pos_bytes(a, l) / 2 / sizeof(float) <= (size_t)hd_max); /* f32 K, then V */
                for (int val = 0; val < 2; val++) {
                    tern_kv_read(a, l, 0, p, val, ka);
                    tern_kv_read(b, l, 0, p, val, kb);
                    if (memcmp(ka, kb, tern_kv_pos_bytes(a, l) / 2))
                        fail_msg("n = %d: layer %d position %lld %s differs", n, l, (long long)p, val ? "V" : "K");
                }
            }
        /* And the next step computes the same logits from either cache. */
        int32_t next = 99;
        int64_t one = 1;
        float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
        tern_batch t = {.n_rows = 1, .seq = &seq, .n_tok = &one, .ids = &next, .out = TERN_OUT_LAST, .row_prefill = &dec};
        TU_OK(tern_lm_forward(lm, a, pool, &t, la, NULL));
        TU_OK(tern_lm_forward(lm, b, pool, &t, lb, NULL));
        assert_memory_equal(la, lb, (size_t)V * sizeof *la);
        free(la);
        free(lb);
        free(ka);
        free(kb);
        tern_kv_free(a);
        tern_kv_free(b);
    }
    free(logits);
    tern_pool_destroy(pool);
    tern_lm_free(lm);
}

/* The Gemma 4 assistant drafter (the oracle pair: a tiny target and its random drafter) as a draft source: greedy
 * output identical to plain decoding, solo and batched, and every row drafted from. */
static void test_assistant_source(void **state) {
    (void)state;
    tern_model *m;
    tern_model_opts mo = {.model_dir = tu_testdata("oracle/tiny-v4096-f32")};
    TU_OK(tern_model_load(&mo, &m));
    tern_model *keep = model;
    model = m; /* engine() and run_all() serve `model` */
    static run plain[N], got[N];
    tern_engine *e = engine(3, 0, -1);
    run_all(e, N, NULL, NULL, 0.0f, plain);
    tern_engine_destroy(e);
    char drafter[4096];
    snprintf(drafter, sizeof drafter, "%s", tu_testdata("oracle/tiny-v4096-assistant-f32"));
    const int rows[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        e = engine_on(m, rows[i], 0, 4, 256, drafter, 1);
        run_all(e, N, NULL, NULL, 0.0f, got);
        tern_metrics mt;
        tern_engine_metrics(e, &mt);
        tern_engine_destroy(e);
        expect_same(plain, got, N, "assistant");
        print_message("assistant, %d rows: %llu drafted, %llu kept\n", rows[i], (unsigned long long)mt.draft_tokens[2],
                      (unsigned long long)mt.draft_accepted[2]);
        assert_true(mt.draft_tokens[2] >= N);
        assert_int_equal(mt.draft_failures, 0);
    }
    /* A drafter for another target is refused when the engine starts. */
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.draft_model = drafter;
    tern_err *err = tern_engine_create(keep, &o, &e);
    assert_non_null(err);
    print_message("%s\n", tern_err_msg(err));
    assert_non_null(strstr(tern_err_msg(err), "hidden size"));
    tern_err_free(err);
    model = keep;
    tern_model_free(m);
}

/* Two-model drafting: the target itself as its own drafter (every draft kept: the same greedy tokens) and another
 * random model of the same vocabulary give plain decoding's output, solo and batched; sampled drafts at a
 * temperature; a drafter of another vocabulary is refused when the engine starts. */
static void test_draft_model_source(void **state) {
    (void)state;
    static run plain[N], got[N];
    tern_engine *e = engine(3, 0, -1);
    run_all(e, N, NULL, NULL, 0.0f, plain);
    tern_engine_destroy(e);
    char other[4096];
    TU_OK(tu_tiny_model("spec_model_other", TERN_SYNTH_F32, 12, NULL, other));
    const char *drafters[2] = {model_dir, other};
    for (int d = 0; d < 2; d++)
        for (int rows = 1; rows <= 3; rows += 2) {
            e = engine_on(model, rows, 0, 4, 256, drafters[d], 0);
            run_all(e, N, NULL, NULL, 0.0f, got);
            tern_metrics mt;
            tern_engine_metrics(e, &mt);
            tern_engine_destroy(e);
            expect_same(plain, got, N, d ? "another model drafting" : "the model drafting for itself");
            print_message("%s, %d rows: %llu drafted, %llu kept\n", d ? "another model" : "itself", rows,
                          (unsigned long long)mt.draft_tokens[3], (unsigned long long)mt.draft_accepted[3]);
            assert_int_equal(mt.draft_failures, 0);
            if (d == 0)
                assert_int_equal(mt.draft_accepted[3], mt.draft_tokens[3]);
            assert_true(mt.draft_tokens[3] > 0);
        }
    /* Sampling rows without a seed draw their drafts from the drafter's distribution and verify them against it
     * (min(1, p/q)): the model drafting for itself at a temperature keeps (nearly) every draft — a greedy draft is
     * kept only as often as the target samples its argmax. Seeded rows draft greedily and choose plain decoding's
     * tokens. */
    static run plain_t[N];
    e = engine(3, 0, -1);
    run_all(e, N, NULL, NULL, 0.9f, plain_t);
    tern_engine_destroy(e);
    for (int rows = 1; rows <= 3; rows += 2) {
        static run seeded[N];
        e = engine_on(model, rows, 0, 4, 256, model_dir, 0);
        unseeded = 1;
        run_all(e, N, NULL, NULL, 0.9f, got);
        unseeded = 0;
        tern_metrics mu, mt;
        tern_engine_metrics(e, &mu);
        run_all(e, N, NULL, NULL, 0.9f, seeded);
        tern_engine_metrics(e, &mt);
        tern_engine_destroy(e);
        expect_same(plain_t, seeded, N, "seeded sampling, the model drafting for itself");
        const unsigned long long drafted = mu.draft_tokens[3], kept = mu.draft_accepted[3];
        print_message("itself at temperature 0.9, %d rows: unseeded %llu drafted, %llu kept; seeded %llu drafted, "
                      "%llu kept\n", rows, drafted, kept, (unsigned long long)(mt.draft_tokens[3] - drafted),
                      (unsigned long long)(mt.draft_accepted[3] - kept));
        assert_true(drafted > 0);
        assert_true(kept >= 0.95 * (double)drafted);
    }
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    char v4096[4096];
    snprintf(v4096, sizeof v4096, "%s", tu_testdata("oracle/tiny-v4096-f32"));
    o.draft_model = v4096;
    tern_err *err = tern_engine_create(model, &o, &e);
    assert_non_null(err);
    print_message("%s\n", tern_err_msg(err));
    assert_non_null(strstr(tern_err_msg(err), "vocabulary has 4096 tokens, the model's 512"));
    tern_err_free(err);
}

/* The token-sequence search both lookup sources use: the longest suffix match, the latest one (or the first at or
 * after `from`), what followed it, and nothing when nothing matches. */
static void test_lookup(void **state) {
    (void)state;
    int32_t out[8];
    int64_t end = -1;
    const int32_t seq[] = {1, 2, 3, 4, 1, 2};
    assert_int_equal(tern_draft_lookup(seq, 6, seq, 6, 1, 1, 4, -1, 4, out, &end), 4);
    assert_int_equal(end, 2);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[3], 2);
    const int32_t run[] = {7, 7, 7}; /* a run drafts more of itself (the match may end right before the key's end) */
    assert_int_equal(tern_draft_lookup(run, 3, run, 3, 1, 1, 4, -1, 4, out, NULL), 1);
    assert_int_equal(out[0], 7);
    const int32_t hay[] = {5, 6, 9, 5, 6, 8}, key[] = {0, 5, 6};
    assert_int_equal(tern_draft_lookup(hay, 6, key, 3, 0, 1, 4, -1, 1, out, NULL), 1);
    assert_int_equal(out[0], 8); /* latest */
    assert_int_equal(tern_draft_lookup(hay, 6, key, 3, 0, 1, 4, 0, 1, out, NULL), 1);
    assert_int_equal(out[0], 9); /* the first at or after 0 */
    const int32_t none[] = {3};
    assert_int_equal(tern_draft_lookup(hay, 6, none, 1, 0, 1, 4, -1, 4, out, NULL), 0);
}

/* The drafting policy: the source a request gets; a row starts with plain steps, then asks for all it may; full
 * agreement keeps the length at draft_max, a run keeping k settles near k + 2, the asks stay within what the reply
 * and the step have room for; nothing kept starts a pause that doubles when drafting fails again after it; a
 * source whose drafts are kept but slower than plain steps teaches its new rows to start with a longer pause. */
static void test_draft_policy(void **state) {
    tern_draft_source ngram = {.kind = TERN_DRAFT_NGRAM}, pred = {.kind = TERN_DRAFT_PREDICTION},
                      assist = {.kind = TERN_DRAFT_ASSISTANT};
    tern_draft_source *src[TERN_DRAFT_KINDS] = {&ngram, &pred, NULL, NULL};
    assert_ptr_equal(tern_draft_pick(src, 1), &pred);
    assert_ptr_equal(tern_draft_pick(src, 0), &ngram);
    src[TERN_DRAFT_ASSISTANT] = &assist;
    assert_ptr_equal(tern_draft_pick(src, 0), &assist);
    assert_ptr_equal(tern_draft_pick(src, 1), &pred);

    tern_draft_lessons l;
    tern_draft_lessons_init(&l);
    tern_draft_policy p;
    tern_draft_policy_start(&p, 8, TERN_DRAFT_NGRAM, &l);
    assert_int_equal(tern_draft_policy_ask(&p, 100, 100, 1), 0); /* two plain steps first */
    tern_draft_policy_after(&p, TERN_DRAFT_NGRAM, 0, 1, 0.010, 8, &l);
    assert_int_equal(tern_draft_policy_ask(&p, 100, 100, 1), 0);
    tern_draft_policy_after(&p, TERN_DRAFT_NGRAM, 0, 1, 0.010, 8, &l);
    assert_int_equal(tern_draft_policy_ask(&p, 100, 100, 1), 8); /* hopeful: all it may */
    assert_int_equal(tern_draft_policy_ask(&p, 5, 100, 1), 5);   /* within what the reply leaves */
    assert_int_equal(tern_draft_policy_ask(&p, 100, 3, 1), 3);   /* and the step's budget */
    assert_int_equal(tern_draft_policy_ask(&p, 100, 3, 4), 0);   /* fewer than draft_min: none */
    for (int i = 0; i < 6; i++) /* everything kept, and faster: stays at draft_max */
        tern_draft_policy_after(&p, TERN_DRAFT_NGRAM, 8, 9, 0.012, 8, &l);
    assert_int_equal(p.k, 8);
    for (int i = 0; i < 12; i++) /* 3 of 8 kept a step: settles at 3 + 2 */
        tern_draft_policy_after(&p, TERN_DRAFT_NGRAM, 8, 4, 0.012, 8, &l);
    assert_int_equal(p.k, 5);
    assert_int_equal(p.rest, 0);
    int steps = 0; /* nothing kept: the running mean falls below a quarter of a token within a few steps */
    while (p.rest == 0 && steps < 6)
        tern_draft_policy_after(&p, TERN_DRAFT_NGRAM, 5, 1, 0.012, 8, &l), steps++;
    assert_int_equal(steps, 4); /* 3 -> 1.5 -> 0.75 -> 0.375 -> 0.19 */
    assert_int_equal(p.rest, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(tern_draft_policy_ask(&p, 100, 100, 1), 0);
    assert_true(tern_draft_policy_ask(&p, 100, 100, 1) > 0);
    tern_draft_policy_after(&p, TERN_DRAFT_NGRAM, 1, 1, 0.012, 8, &l); /* fails again: the next pause is 16 */
    assert_int_equal(p.rest, 16);
    assert_int_equal(l.pause[TERN_DRAFT_NGRAM], 8);

    /* drafts kept, but steps with them slower than plain ones: a pause, and new rows start with a longer one */
    tern_draft_policy q;
    tern_draft_policy_start(&q, 8, TERN_DRAFT_NGRAM, &l);
    tern_draft_policy_after(&q, TERN_DRAFT_NGRAM, 0, 1, 0.010, 8, &l); /* plain: 100 tokens/s */
    tern_draft_policy_after(&q, TERN_DRAFT_NGRAM, 4, 2, 0.040, 8, &l); /* drafting: 50 tokens/s */
    assert_true(q.rest > 0);
    assert_int_equal(l.pause[TERN_DRAFT_NGRAM], 16);
    tern_draft_policy_start(&q, 8, TERN_DRAFT_NGRAM, &l);
    assert_int_equal(q.rest, 16);
    /* a prediction's rows teach nothing */
    tern_draft_policy_start(&q, 8, TERN_DRAFT_PREDICTION, &l);
    tern_draft_policy_after(&q, TERN_DRAFT_PREDICTION, 0, 1, 0.010, 8, &l);
    tern_draft_policy_after(&q, TERN_DRAFT_PREDICTION, 4, 2, 0.040, 8, &l);
    assert_int_equal(l.pause[TERN_DRAFT_PREDICTION], 8);
    /* fixed: draft_max from the first step on, whatever is kept and however slow (the lessons say 16 plain steps) */
    tern_draft_policy_start(&q, 4, TERN_DRAFT_NGRAM, &l);
    q.fixed = 1;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(tern_draft_policy_ask(&q, 100, 100, 1), 4);
        tern_draft_policy_after(&q, TERN_DRAFT_NGRAM, 4, 1, 0.040, 4, &l);
    }
    assert_int_equal(tern_draft_policy_ask(&q, 2, 100, 1), 2);
    assert_int_equal(l.pause[TERN_DRAFT_NGRAM], 16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_draft_policy),
        cmocka_unit_test(test_greedy_identical),
        cmocka_unit_test(test_prediction_text_aligned),
        cmocka_unit_test(test_prediction_split_token),
        cmocka_unit_test(test_prediction_longest_split),
        cmocka_unit_test(test_prediction_edited_words),
        cmocka_unit_test(test_prediction_rejoin_by_words),
        cmocka_unit_test(test_outputs_unchanged),
        cmocka_unit_test(test_seeded_sampling),
        cmocka_unit_test(test_rollback_equals_plain),
        cmocka_unit_test(test_assistant_source),
        cmocka_unit_test(test_draft_model_source),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
