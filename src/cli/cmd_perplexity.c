/* cmd_perplexity.c — `tern perplexity MODEL_DIR FILE`: how well the model predicts a text, the quality measure for
 * weight and KV formats. The text is tokenized (with BOS) and read in windows of --ctx tokens that start every
 * --stride tokens; each window starts with BOS (as llama.cpp's perplexity tool does) and scores the tokens after
 * the previous window's end, each with as much context as its window gives (with --stride equal to --ctx the
 * token a window's BOS replaces goes unscored, as in llama.cpp). perplexity = exp(mean negative log-likelihood). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "cli/kv_args.h"
#include "core/fileio.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "loader/loader.h"
#include "sample/logprobs.h"

static const char *usage =
    "usage: tern perplexity [-m] MODEL_DIR (FILE | --ids 2,105,...) [-c 512] [--stride N] [-t T] [--kv T | -ctk T -ctv T]\n"
    "                       [--json]\n"
    "Windows of -c/--ctx tokens every --stride tokens (default ctx/2), each starting with BOS; every token after\n"
    "the previous window is scored once. Prints exp(mean negative log-likelihood); progress goes to stderr.\n";

/* Tokens fed per forward: logits of up to this many positions are held at once ([FEED][vocab] floats). */
#define FEED 64

typedef struct ppl {
    double nll;      /* sum over scored tokens */
    int64_t scored;  /* tokens scored */
    int64_t windows;
} ppl;

/* One window: ids[w0, w1) with ids[w0] replaced by BOS (when the model has one), scoring the tokens at
 * positions >= score_from (absolute). */
static TERN_MUST_CHECK tern_err *run_window(tern_lm *lm, tern_kv *kv, tern_pool *pool, const int32_t *ids, int64_t w0, int64_t w1,
                            int64_t score_from, int32_t bos, float *logits, ppl *out) {
    const int64_t V = tern_lm_desc_of(lm)->vocab;
    int seq = 0;
    TERN_TRY(tern_kv_set_len(kv, 0, 0));
    int32_t feed[FEED];
    uint8_t want[FEED];
    for (int64_t t0 = w0; t0 < w1; t0 += FEED) {
        const int64_t n = w1 - t0 < FEED ? w1 - t0 : FEED;
        for (int64_t i = 0; i < n; i++) {
            const int64_t p = t0 + i; /* this position's logits predict the token at p + 1 */
            feed[i] = p == w0 && bos >= 0 ? bos : ids[p];
            want[i] = p + 1 < w1 && p + 1 >= score_from ? TERN_WANT_LOGITS : 0;
        }
        const uint8_t prompt = 1;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &n, .ids = feed, .want = want, .row_prefill = &prompt};
        TERN_TRY(tern_lm_forward(lm, kv, pool, &b, logits, NULL));
        TERN_TRY(tern_batch_commit(kv, &b));
        for (int64_t i = 0, k = 0; i < n; i++)
            if (want[i]) {
                const float *row = logits + k++ * V;
                out->nll += tern_logsumexp(row, V) - (double)row[ids[t0 + i + 1]];
                out->scored++;
            }
    }
    out->windows++;
    return NULL;
}

int cmd_perplexity(int argc, char **argv) {
    tern_opt opts[] = {{"ctx", 1, 0},  {"stride", 1, 0}, {"ids", 1, 0},   {"threads", 1, 0},
                       {"json", 0, 0}, {"model", 1, 0},  {"help", 0, 0}, TERN_KV_OPTS, {0, 0, 0}};
    const char *pos[2];
    int np = tern_args_parse("perplexity", argc, argv, opts, pos, 2);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    const char *ids_s = tern_args_get(opts, "ids");
    int64_t ctx, stride, threads;
    tern_kv_type kt, vt;
    if (np < 1 || (np == 2) == (ids_s != NULL) || tern_kv_args("perplexity", opts, TERN_KV_F32, &kt, &vt) ||
        tern_args_int("perplexity", opts, "ctx", 512, 2, 1 << 20, &ctx) ||
        tern_args_int("perplexity", opts, "stride", ctx / 2 > 0 ? ctx / 2 : 1, 1, ctx, &stride) ||
        tern_args_int("perplexity", opts, "threads", 0, 0, 1024, &threads)) {
        fputs(usage, stderr);
        return 2;
    }
    const int json = tern_args_get(opts, "json") != NULL;
    tern_model_opts mo = {.model_dir = pos[0], .threads = (int)threads};
    tern_model *m = NULL;
    tern_pool *pool = NULL;
    tern_kv *kv = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    float *logits = NULL;
    char *text = NULL;
    ppl r = {0};
    double t_start = tern_now_s();
    tern_err *err = tern_model_load(&mo, &m);
    if (!err && ids_s) {
        err = tern_parse_ids(ids_s, &ids, &n);
    } else if (!err) {
        size_t len, nt = 0;
        err = tern_read_file(pos[1], (size_t)1 << 30, &text, &len);
        if (!err)
            err = tern_model_tokenize(m, text, len, 1, 0, &ids, &nt);
        n = (int64_t)nt;
    }
    if (!err && n < 2)
        err = tern_errf(TERN_EINVAL, "the text is %lld token%s long: at least 2 are needed to score one", (long long)n,
                        n == 1 ? "" : "s");
    const tern_lm_desc *d = err ? NULL : tern_lm_desc_of(m->lm);
    for (int64_t i = 0; !err && i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->vocab)
            err = tern_errf(TERN_EINVAL, "token id %d is outside the vocabulary [0, %lld)", ids[i], (long long)d->vocab);
    if (!err)
        err = tern_pool_create((int)threads, &pool);
    if (!err)
        err = tern_lm_kv_create(m->lm, 1, ctx, FEED, kt, vt, &kv);
    if (!err && !(logits = malloc((size_t)FEED * (size_t)d->vocab * sizeof *logits)))
        err = tern_errf(TERN_ENOMEM, "out of memory for %d rows of logits", FEED);
    const int32_t bos = err ? -1 : tern_model_bos(m);
    for (int64_t w0 = 0, scored_to = 1; !err && scored_to < n; w0 += stride) {
        const int64_t w1 = w0 + ctx < n ? w0 + ctx : n;
        /* A window's first token is BOS, so the one after it is the first it can score. */
        const int64_t from = scored_to > w0 + 1 ? scored_to : w0 + 1;
        err = run_window(m->lm, kv, pool, ids, w0, w1, from, w0 == 0 ? -1 : bos, logits, &r);
        scored_to = w1;
        if (!err && !json)
            fprintf(stderr, "[%lld/%lld tokens] perplexity so far %.4f\n", (long long)w1, (long long)n,
                    exp(r.nll / (double)r.scored));
        if (w1 == n)
            break;
    }
    if (!err) {
        const double mean = r.nll / (double)r.scored, secs = tern_now_s() - t_start;
        if (json)
            printf("{\"perplexity\": %.6f, \"nll_mean\": %.6f, \"tokens_scored\": %lld, \"tokens\": %lld, "
                   "\"windows\": %lld, \"ctx\": %lld, \"stride\": %lld, \"seconds\": %.3f}\n",
                   exp(mean), mean, (long long)r.scored, (long long)n, (long long)r.windows, (long long)ctx,
                   (long long)stride, secs);
        else
            printf("perplexity: %.4f (mean NLL %.6f over %lld tokens, %lld windows of %lld, stride %lld; %.1f s)\n",
                   exp(mean), mean, (long long)r.scored, (long long)r.windows, (long long)ctx, (long long)stride, secs);
    }
    free(logits);
    free(text);
    tern_free(ids);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_model_free(m);
    if (err) {
        fprintf(stderr, "tern perplexity: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
