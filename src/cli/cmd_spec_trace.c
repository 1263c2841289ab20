/* cmd_spec_trace.c — `tern spec-trace`: the parity interface of speculative decoding with an assistant drafter,
 * greedy and in float32 like `tern logits`. After a prefill of the ids, each round drafts k tokens from the last
 * token (query position P, the target's final normed hidden at P - 1 as h0), verifies [last, d1..dk] in one target
 * forward at positions P..P+k, accepts the longest prefix the target agrees with plus the target's own next token,
 * and rolls the cache back to what was accepted (GEMMA4.md §5 "Verify"). Prints the rounds as JSON; with
 * --out-prefix also writes the float32 intermediates the golden files hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "core/fileio.h"
#include "core/threadpool.h"
#include "models/cache_drafter.h"
#include "models/model.h"

static const char *usage =
    "usage: tern spec-trace [-m] TARGET_DIR --draft DIR --ids 2,105,... [-k 4] [--rounds 2]\n"
    "                       [--draft-head full|centroid] [--out-prefix P] [--threads N]\n"
    "Greedy speculative rounds with a Gemma 4 assistant drafter, float32 KV. Prints\n"
    "{\"rounds\": [{\"pos0\", \"id_last\", \"draft\", \"target\", \"accepted\"}]} (target: the target's argmax over\n"
    "the k+1 verify rows); --out-prefix P writes float32 P.draft_logits.bin [R][K][V], P.draft_h.bin [R][K][H],\n"
    "P.h0.bin [R][H] and P.verify_logits.bin [R][K+1][V] (H: the target's hidden size).\n";

static int32_t argmax(const float *v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

static TERN_MUST_CHECK tern_err *write_f32(const char *prefix, const char *suffix, const float *v, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, suffix);
    return tern_write_file(path, v, n * sizeof *v);
}

typedef struct trace {
    int64_t K, R, V, H;
    float *draft_logits, *draft_h, *h0, *verify_logits; /* [R][K][V], [R][K][H], [R][H], [R][K+1][V] */
    int32_t *draft, *target;                              /* [R][K], [R][K+1] */
    int64_t *pos0, *accepted;
    int32_t *id_last;
} trace;

/* Runs the prefill and R rounds; fills t. */
static TERN_MUST_CHECK tern_err *run(tern_lm *lm, tern_cache_drafter *d, tern_kv *kv, tern_pool *pool, const int32_t *ids,
                     int64_t n, trace *t) {
    const tern_lm_desc *ld = tern_lm_desc_of(lm);
    const int64_t K = t->K, V = t->V, H = t->H;
    int seq = 0;
    float *logits = malloc((size_t)((K + 1) * V) * sizeof *logits), *hidden = malloc((size_t)((K + 1) * H) * sizeof *hidden);
    float *emb = malloc((size_t)H * sizeof *emb), *h = malloc((size_t)H * sizeof *h);
    int32_t *feed = malloc((size_t)(K + 1) * sizeof *feed);
    tern_err *err = logits && hidden && emb && h && feed ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    /* Prefill: the last prompt position gives the first target token and h0. */
    if (!err) {
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = ids, .out = TERN_OUT_LAST};
        err = tern_lm_forward(lm, kv, pool, &b, logits, hidden);
        if (!err)
            err = tern_batch_commit(kv, &b);
    }
    int32_t last = err ? 0 : argmax(logits, V);
    if (!err)
        memcpy(h, hidden, (size_t)H * sizeof *h);
    for (int64_t r = 0; r < t->R && !err; r++) {
        const int64_t P = tern_kv_len(kv, seq);
        t->pos0[r] = P;
        t->id_last[r] = last;
        memcpy(t->h0 + r * H, h, (size_t)H * sizeof *h);
        int32_t tok = last;
        for (int64_t j = 0; j < K && !err; j++) {
            err = tern_lm_embed(lm, tok, emb);
            tern_cache_drafter_io io = {.kv = kv, .target = ld, .n = 1, .seq = &seq, .emb = emb, .h = h,
                                        .logits = t->draft_logits + (r * K + j) * V, .h_out = t->draft_h + (r * K + j) * H};
            if (!err)
                err = tern_cache_drafter_step(d, pool, &io);
            if (!err) {
                tok = argmax(io.logits, V);
                t->draft[r * K + j] = tok;
                memcpy(h, io.h_out, (size_t)H * sizeof *h);
            }
        }
        if (err)
            break;
        feed[0] = last;
        memcpy(feed + 1, t->draft + r * K, (size_t)K * sizeof *feed);
        const int64_t nk = K + 1;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &nk, .ids = feed, .out = TERN_OUT_ALL};
        err = tern_lm_forward(lm, kv, pool, &b, t->verify_logits + r * (K + 1) * V, hidden);
        if (err)
            break;
        int64_t acc = 0;
        for (int64_t j = 0; j <= K; j++)
            t->target[r * (K + 1) + j] = argmax(t->verify_logits + (r * (K + 1) + j) * V, V);
        while (acc < K && t->draft[r * K + acc] == t->target[r * (K + 1) + acc])
            acc++;
        t->accepted[r] = acc;
        /* Keep [last, d1..d_acc]; the target's token after them is the next round's last. */
        err = tern_kv_set_len(kv, seq, P + acc + 1);
        last = t->target[r * (K + 1) + acc];
        memcpy(h, hidden + acc * H, (size_t)H * sizeof *h);
    }
    free(logits);
    free(hidden);
    free(emb);
    free(h);
    free(feed);
    return err;
}

static void print_json(const trace *t) {
    printf("{\"rounds\": [");
    for (int64_t r = 0; r < t->R; r++) {
        printf("%s\n  {\"pos0\": %lld, \"id_last\": %d, \"draft\": [", r ? "," : "", (long long)t->pos0[r],
               t->id_last[r]);
        for (int64_t j = 0; j < t->K; j++)
            printf("%s%d", j ? ", " : "", t->draft[r * t->K + j]);
        printf("], \"target\": [");
        for (int64_t j = 0; j <= t->K; j++)
            printf("%s%d", j ? ", " : "", t->target[r * (t->K + 1) + j]);
        printf("], \"accepted\": %lld}", (long long)t->accepted[r]);
    }
    printf("\n]}\n");
}

int cmd_spec_trace(int argc, char **argv) {
    tern_opt opts[] = {{"draft", 1, 0}, {"ids", 1, 0}, {"k", 1, 0}, {"rounds", 1, 0}, {"draft-head", 1, 0},
                       {"out-prefix", 1, 0}, {"threads", 1, 0}, {"model", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("spec-trace", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    const char *head_s = tern_args_get(opts, "draft-head"), *prefix = tern_args_get(opts, "out-prefix");
    int64_t K, R, threads;
    if (np != 1 || !tern_args_get(opts, "draft") || !tern_args_get(opts, "ids") ||
        (head_s && strcmp(head_s, "full") && strcmp(head_s, "centroid")) ||
        tern_args_int("spec-trace", opts, "k", 4, 1, 64, &K) ||
        tern_args_int("spec-trace", opts, "rounds", 2, 1, 4096, &R) ||
        tern_args_int("spec-trace", opts, "threads", 0, 0, 1024, &threads)) {
        fputs(usage, stderr);
        return 2;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    tern_lm *lm = NULL;
    tern_cache_drafter *d = NULL;
    tern_kv *kv = NULL;
    tern_pool *pool = NULL;
    trace t = {.K = K, .R = R};
    tern_err *err = tern_parse_ids(tern_args_get(opts, "ids"), &ids, &n);
    if (!err)
        err = tern_lm_load(pos[0], (int)threads, &lm);
    if (!err)
        err = tern_cache_drafter_load(tern_args_get(opts, "draft"), &d);
    if (!err)
        err = tern_cache_drafter_check_target(d, tern_lm_desc_of(lm));
    if (!err && head_s)
        err = tern_cache_drafter_set_head(d, !strcmp(head_s, "full") ? TERN_DRAFT_HEAD_FULL : TERN_DRAFT_HEAD_CENTROID);
    if (!err)
        err = tern_pool_create((int)threads, &pool);
    /* The cache's rollback depth (chunk) covers a verify pass of k + 1 tokens; the prompt goes in at once. */
    const int64_t ctx = n + R * (K + 1) + 1, chunk = n > K + 1 ? n : K + 1;
    if (!err)
        err = tern_lm_kv_create(lm, 1, ctx, chunk, TERN_KV_F32, TERN_KV_F32, &kv);
    if (!err) {
        t.V = tern_lm_desc_of(lm)->vocab;
        t.H = tern_lm_desc_of(lm)->hidden;
        t.draft_logits = malloc((size_t)(R * K * t.V) * sizeof(float));
        t.draft_h = malloc((size_t)(R * K * t.H) * sizeof(float));
        t.h0 = malloc((size_t)(R * t.H) * sizeof(float));
        t.verify_logits = malloc((size_t)(R * (K + 1) * t.V) * sizeof(float));
        t.draft = malloc((size_t)(R * K) * sizeof(int32_t));
        t.target = malloc((size_t)(R * (K + 1)) * sizeof(int32_t));
        t.pos0 = malloc((size_t)R * sizeof(int64_t));
        t.accepted = malloc((size_t)R * sizeof(int64_t));
        t.id_last = malloc((size_t)R * sizeof(int32_t));
        if (!t.draft_logits || !t.draft_h || !t.h0 || !t.verify_logits || !t.draft || !t.target || !t.pos0 ||
            !t.accepted || !t.id_last)
            err = tern_errf(TERN_ENOMEM, "out of memory for %lld rounds of %lld x %lld logits", (long long)R,
                            (long long)(K + 1), (long long)t.V);
    }
    if (!err)
        err = run(lm, d, kv, pool, ids, n, &t);
    if (!err && prefix) {
        err = write_f32(prefix, "draft_logits.bin", t.draft_logits, (size_t)(R * K * t.V));
        if (!err)
            err = write_f32(prefix, "draft_h.bin", t.draft_h, (size_t)(R * K * t.H));
        if (!err)
            err = write_f32(prefix, "h0.bin", t.h0, (size_t)(R * t.H));
        if (!err)
            err = write_f32(prefix, "verify_logits.bin", t.verify_logits, (size_t)(R * (K + 1) * t.V));
    }
    if (!err)
        print_json(&t);
    free(t.draft_logits);
    free(t.draft_h);
    free(t.h0);
    free(t.verify_logits);
    free(t.draft);
    free(t.target);
    free(t.pos0);
    free(t.accepted);
    free(t.id_last);
    free(ids);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_cache_drafter_free(d);
    tern_lm_free(lm);
    if (err) {
        fprintf(stderr, "tern spec-trace: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
