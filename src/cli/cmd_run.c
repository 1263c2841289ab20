/* cmd_run.c — `tern run`: generate from a prompt of token ids (prefill in chunks, then decode one token
 * at a time) with greedy or seeded sampling; prints the generated ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "models/gemma4.h"
#include "sample/sampler.h"

static const char *usage =
    "usage: tern run MODEL_DIR --ids 2,105,... [-n 64] [--temp 0] [--top-k K] [--top-p P] [--min-p P]\n"
    "                [--seed S] [--threads T] [--ctx N] [--kv bf16|f32]\n"
    "Prints the generated token ids (stops at an end-of-sequence id or after n tokens).\n";

#define PREFILL_CHUNK 512

static int parse_float(const tern_opt *opts, const char *name, float dflt, float lo, float hi, float *out) {
    const char *v = tern_args_get(opts, name);
    *out = dflt;
    if (!v)
        return 0;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "tern run: --%s must be a number in [%g, %g], got '%s'\n", name, lo, hi, v);
        return -1;
    }
    *out = (float)x;
    return 0;
}

int cmd_run(int argc, char **argv) {
    tern_opt opts[] = {{"ids", 1, 0},   {"n", 1, 0},       {"temp", 1, 0}, {"top-k", 1, 0}, {"top-p", 1, 0},
                       {"min-p", 1, 0}, {"seed", 1, 0},    {"threads", 1, 0}, {"ctx", 1, 0}, {"kv", 1, 0},
                       {"help", 0, 0},  {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("run", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    tern_sampling sp = tern_sampling_greedy();
    int64_t n_gen, top_k, seed, threads, ctx;
    const char *kv_s = tern_args_get(opts, "kv");
    if (np != 1 || !tern_args_get(opts, "ids") || tern_args_int("run", opts, "n", 64, 0, 1 << 24, &n_gen) ||
        tern_args_int("run", opts, "top-k", 0, 0, 1 << 30, &top_k) ||
        tern_args_int("run", opts, "seed", 0, 0, INT64_MAX, &seed) ||
        tern_args_int("run", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_int("run", opts, "ctx", 0, 0, 1 << 24, &ctx) ||
        parse_float(opts, "temp", 0.0f, 0.0f, 100.0f, &sp.temperature) ||
        parse_float(opts, "top-p", 1.0f, 0.0f, 1.0f, &sp.top_p) ||
        parse_float(opts, "min-p", 0.0f, 0.0f, 1.0f, &sp.min_p) ||
        (kv_s && strcmp(kv_s, "bf16") && strcmp(kv_s, "f32"))) {
        fputs(usage, stderr);
        return 2;
    }
    sp.top_k = (int)top_k;
    int32_t *ids = NULL;
    int64_t n = 0;
    tern_gemma4 *m = NULL;
    tern_kv *kv = NULL;
    tern_pool *pool = NULL;
    float *logits = NULL, *work = NULL;
    int32_t *idx = NULL;
    tern_err *err = tern_parse_ids(tern_args_get(opts, "ids"), &ids, &n);
    if (!err)
        err = tern_gemma4_load(pos[0], &m);
    if (!err)
        err = tern_pool_create((int)threads, &pool);
    const tern_gemma4_config *c = m ? tern_gemma4_config_of(m) : NULL;
    if (!err) {
        if (!ctx)
            ctx = n + n_gen;
        if (n + n_gen > ctx)
            err = tern_errf(TERN_EINVAL, "%lld prompt + %lld generated tokens exceed --ctx %lld", (long long)n,
                            (long long)n_gen, (long long)ctx);
    }
    if (!err)
        err = tern_gemma4_kv_create(m, 1, ctx, PREFILL_CHUNK, kv_s && !strcmp(kv_s, "f32") ? TERN_DT_F32 : TERN_DT_BF16,
                                    &kv);
    if (!err) {
        logits = malloc((size_t)c->vocab_size * sizeof *logits);
        work = malloc((size_t)c->vocab_size * sizeof *work);
        idx = malloc((size_t)c->vocab_size * sizeof *idx);
        if (!logits || !work || !idx)
            err = tern_errf(TERN_ENOMEM, "out of memory");
    }
    tern_rng rng;
    tern_rng_seed(&rng, (uint64_t)seed);
    int seq = 0;
    int64_t generated = 0;
    double t0 = tern_now_s(), t_prefill = 0;
    for (int64_t t = 0; t < n && !err; t += PREFILL_CHUNK) {
        int64_t cnt = n - t < PREFILL_CHUNK ? n - t : PREFILL_CHUNK;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_LAST};
        err = tern_gemma4_forward(m, kv, pool, &b, logits, NULL);
    }
    t_prefill = tern_now_s() - t0;
    while (!err && generated < n_gen) {
        int32_t next = tern_sample(logits, c->vocab_size, &sp, &rng, work, idx);
        printf("%s%d", generated ? " " : "", next);
        fflush(stdout);
        generated++;
        int eos = 0;
        for (int k = 0; k < c->n_eos; k++)
            eos |= next == c->eos_token_ids[k];
        if (eos || generated == n_gen)
            break;
        int64_t one = 1;
        tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &one, .ids = &next, .out = TERN_OUT_LAST};
        err = tern_gemma4_forward(m, kv, pool, &b, logits, NULL);
    }
    if (generated)
        printf("\n");
    if (!err)
        fprintf(stderr, "prompt %lld tokens in %.3f s, generated %lld tokens in %.3f s\n", (long long)n, t_prefill,
                (long long)generated, tern_now_s() - t0 - t_prefill);
    free(logits);
    free(work);
    free(idx);
    free(ids);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_gemma4_free(m);
    if (err) {
        fprintf(stderr, "tern run: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
