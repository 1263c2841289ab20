/* cmd_bench.c — `tern bench`: prefill and decode throughput of a model on this machine, next to the
 * machine's read bandwidth measured in the same run, so decode efficiency = achieved / limit. The
 * bandwidth passes alternate with the decode steps (each pass untimed for decode, each step untimed for
 * the probe): both see the machine in the same state, which on a shared VM drifts within seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench_draft.h"
#include "cli/bench_startup.h"
#include "cli/draft_args.h"
#include "cli/kv_args.h"
#include "cli/commands.h"
#include "cli/model_ref.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "models/model.h"
#include "sample/sampler.h"
#include "tensor/cpu.h"
#include "tensor/membw.h"

static const char *usage =
    "usage: tern bench [-m] MODEL_DIR [-p 512] [-n 128] [--batch B] [--depth D] [--threads T] [--kv T | -ctk T -ctv T] [--profile]\n"
    "                  [--json]\n"
    "       tern bench [-m] MODEL_DIR --startup [--rounds 3] [--threads T] [--json]\n"
    "       tern bench [-m] MODEL_DIR (--draft-model DIR | --draft-ngram) --prompts FILE [-n 64] [--draft-max 8]\n"
    "                  [--temp T [--seed S]]\n"
    "Prefill: one row of p tokens (chunks of 512). Decode: B rows, n steps of one token each, every row after the\n"
    "same D tokens of context (prefilled untimed; default 0); the decode limit counts the weights and the KV cache\n"
    "rows each step reads. --profile: where the prefill's and a decode step's\n"
    "time goes, by phase of the forward pass; for decode with the weights each phase reads and their rate against\n"
    "the measured bandwidth.\n"
    "--startup: `tern serve` from process start to its first answered request, cold (the model's and the cache's\n"
    "files evicted from the page cache) and warm, beside reading the files once; medians of --rounds; and once\n"
    "the first start with an empty cache folder, and the cache it leaves.\n"
    "--draft-model / --draft-ngram: speculative decoding on chat prompts (a user message per line of --prompts),\n"
    "each answered without and with drafting: the acceptance and the decode speed-up; greedy replies checked equal.\n"
    "--temp: replies sampled at temperature T instead of greedy; with --seed the requests carry seed S, which keeps\n"
    "greedy drafts (the tokens are those of plain decoding), without it drafts are sampled from the drafter.\n";

#define CHUNK 512

static void empty_range(void *ctx, size_t b, size_t e, int tid) { (void)ctx, (void)b, (void)e, (void)tid; }

/* Microseconds one parallel region costs the caller (wake the workers, split, wait): the mean of n. On this
 * class of virtual machine it tells where the two vCPUs sit: ~0.15 us when they share a core complex, 0.4-0.7 us
 * when every hand-off crosses between complexes (see docs/benchmarks.md, the machine's two regimes). */
static double region_cost_us(tern_pool *pool, int n) {
    double t0 = tern_now_s();
    for (int i = 0; i < n; i++)
        tern_pool_parallel_for(pool, 1024, 1, empty_range, NULL);
    return (tern_now_s() - t0) * 1e6 / n;
}

/* Phases of the forward passes p recorded: time per pass and share; with bw_gb_s > 0 (decode steps) also the
 * weights read and that read's rate against the measured bandwidth. */
static void print_profile(const tern_lm_profile *p, const char *what, double bw_gb_s) {
    double total = 0;
    for (int ph = 0; ph < TERN_PH_COUNT; ph++)
        total += p->seconds[ph];
    printf("profile          per %s (%lld passes): phase, time, share%s\n", what, (long long)p->passes,
           bw_gb_s > 0 ? ", weights read, their rate" : "");
    for (int ph = 0; ph < TERN_PH_COUNT; ph++) {
        const double s = p->seconds[ph] / (double)p->passes, b = p->bytes[ph] / (double)p->passes;
        if (s <= 0 && b <= 0)
            continue;
        printf("  %-10s %9.1f us %5.1f%%", tern_phase_name((tern_phase)ph), s * 1e6,
               total > 0 ? 100 * p->seconds[ph] / total : 0);
        if (bw_gb_s > 0 && b > 0 && s > 0)
            printf("  %8.1f MB  %6.2f GB/s = %5.1f%% of the bandwidth", b * 1e-6, b / s * 1e-9,
                   bw_gb_s > 0 ? 100 * b / s * 1e-9 / bw_gb_s : 0);
        printf("\n");
    }
}

/* One forward whose tokens are all kept. */
static TERN_MUST_CHECK tern_err *forward_commit(tern_lm *m, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits,
                                float *hidden) {
    TERN_TRY(tern_lm_forward(m, kv, pool, b, logits, hidden));
    return tern_batch_commit(kv, b);
}

/* ids[0, n) into sequence 0 in chunks of CHUNK tokens, each chunk's last logits into logits (none when NULL). */
static TERN_MUST_CHECK tern_err *prefill_seq0(tern_lm *m, tern_kv *kv, tern_pool *pool, const int32_t *ids, int64_t n,
                              float *logits) {
    int seq0 = 0;
    for (int64_t t = 0; t < n; t += CHUNK) {
        int64_t cnt = n - t < CHUNK ? n - t : CHUNK;
        tern_batch b = {.n_rows = 1, .seq = &seq0, .n_tok = &cnt, .ids = ids + t,
                        .out = logits ? TERN_OUT_LAST : TERN_OUT_NONE};
        TERN_TRY(forward_commit(m, kv, pool, &b, logits, NULL));
    }
    return NULL;
}

int cmd_bench(int argc, char **argv) {
    tern_opt opts[] = {{"p", 1, 0},       {"n", 1, 0},      {"batch", 1, 0},   {"threads", 1, 0}, {"depth", 1, 0},
                       {"json", 0, 0},   {"profile", 0, 0}, {"startup", 0, 0}, {"rounds", 1, 0},
                       {"model", 1, 0},   {"help", 0, 0},   {"prompts", 1, 0}, {"temp", 1, 0},     {"seed", 1, 0},
                       TERN_DRAFT_OPTS,   TERN_KV_OPTS,     {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("bench", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (np >= 1 && cli_resolve_model("bench", opts, pos))
        return 1;
    int64_t P, N, B, D, threads;
    tern_kv_type kt, vt;
    if (np != 1 || tern_args_int("bench", opts, "p", 512, 0, 1 << 20, &P) ||
        tern_args_int("bench", opts, "n", 128, 0, 1 << 20, &N) || tern_args_int("bench", opts, "batch", 1, 1, 256, &B) ||
        tern_args_int("bench", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_int("bench", opts, "depth", 0, 0, 1 << 20, &D) ||
        tern_kv_args("bench", opts, TERN_KV_BF16, &kt, &vt)) {
        fputs(usage, stderr);
        return 2;
    }
    int json = tern_args_get(opts, "json") != NULL, profiling = tern_args_get(opts, "profile") != NULL;
    if (tern_args_get(opts, "startup")) {
        int64_t rounds;
        if (tern_args_int("bench", opts, "rounds", 3, 1, 32, &rounds))
            return 2;
        return tern_bench_startup(pos[0], (int)rounds, (int)threads, json);
    }
    if (tern_args_get(opts, "draft-model") || tern_args_get(opts, "draft-ngram")) {
        tern_engine_opts eo;
        tern_engine_opts_default(&eo);
        if (tern_draft_args("bench", opts, &eo))
            return 2;
        if (!tern_args_get(opts, "prompts")) {
            fprintf(stderr, "tern bench: drafting is measured on chat prompts: give --prompts FILE\n");
            return 2;
        }
        tern_request dflt;
        tern_request_default(&dflt);
        tern_sampling_params sp = dflt.sampling;
        int64_t seed;
        if (tern_args_float("bench", opts, "temp", 0.0f, 0.0f, 100.0f, &sp.temperature) ||
            tern_args_int("bench", opts, "seed", 0, 0, INT64_MAX, &seed))
            return 2;
        sp.seed = (uint64_t)seed;
        sp.has_seed = tern_args_get(opts, "seed") != NULL;
        return tern_bench_draft(pos[0], &eo, &sp, tern_args_get(opts, "prompts"), tern_args_get(opts, "n") ? N : 64,
                                (int)threads, json);
    }
    tern_lm_profile prof = {0};
    char kv_name[16];
    snprintf(kv_name, sizeof kv_name, "%s", tern_kv_type_name(kt));
    if (vt != kt)
        snprintf(kv_name, sizeof kv_name, "%s/%s", tern_kv_type_name(kt), tern_kv_type_name(vt));
    tern_lm *m = NULL;
    tern_pool *pool = NULL;
    tern_kv *kv = NULL;
    float *logits = NULL;
    int32_t *ids = NULL;
    double bw = 0, prefill_s = 0, decode_s = 0, region_us = 0, probe_s = 0, solo_s = 0;
    tern_membw *probe = NULL;
    tern_err *err = tern_lm_load(pos[0], (int)threads, &m);
    if (!err)
        err = tern_pool_create((int)threads, &pool);
    const tern_lm_desc *c = m ? tern_lm_desc_of(m) : NULL;
    if (!err)
        err = tern_membw_create((size_t)256 << 20, &probe);
    if (!err)
        tern_membw_pass(probe, pool); /* warm-up */
    /* Token ids for the prompt, the context and one first token per row. */
    const int64_t ctx = (P > 1 ? P : 1) + D + N + 1, most = P > B ? P : B, nids = most > D ? most : D;
    if (!err) {
        logits = malloc((size_t)((B + 1) * c->vocab) * sizeof *logits);
        ids = malloc((size_t)(nids + 1) * sizeof *ids);
        if (!logits || !ids)
            err = tern_errf(TERN_ENOMEM, "out of memory");
    }
    tern_rng rng;
    tern_rng_seed(&rng, 1);
    for (int64_t i = 0; ids && i < nids + 1; i++)
        ids[i] = (int32_t)(tern_rng_next(&rng) % (uint64_t)c->vocab);
    /* Prefill, after one untimed pass of the same prompt (as llama-bench warms up): every weight page faulted in
     * and the work area grown to the prompt's size, so the timed pass is what every later prompt costs. */
    if (!err)
        err = tern_lm_kv_create(m, (int)(B > 1 ? B + 1 : B), ctx, CHUNK, kt, vt, &kv);
    if (!err)
        err = prefill_seq0(m, kv, pool, ids, P > 0 ? P : 1, logits);
    if (!err)
        err = tern_kv_set_len(kv, 0, 0);
    tern_lm_profile pre_prof = {0};
    if (!err)
        tern_lm_set_profile(m, profiling ? &pre_prof : NULL);
    double t0 = tern_now_s();
    if (!err)
        err = prefill_seq0(m, kv, pool, ids, P, logits);
    prefill_s = tern_now_s() - t0;
    if (m)
        tern_lm_set_profile(m, NULL);
    /* Decode: every row starts from one token; each step is one batched forward, then greedy picks. */
    int *seqs = malloc((size_t)B * sizeof *seqs);
    int64_t *ones = malloc((size_t)B * sizeof *ones);
    int32_t *next = malloc((size_t)B * sizeof *next);
    if (!err && (!seqs || !ones || !next))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    /* The context every decode row starts from: D tokens prefilled once (untimed) and copied to the others. */
    if (!err)
        err = tern_kv_set_len(kv, 0, 0);
    if (!err)
        err = prefill_seq0(m, kv, pool, ids, D, NULL);
    for (int64_t r = 0; r < B && !err; r++) {
        seqs[r] = (int)r;
        ones[r] = 1;
        next[r] = ids[r];
        if (r > 0)
            err = tern_kv_copy_seq(kv, (int)r, 0, D);
    }
    /* With B > 1, one more sequence decodes alone between the batched steps: the speed-up of batching is
     * then measured against a single row under the same machine conditions. */
    int solo_seq = (int)B;
    int64_t one = 1;
    if (!err && B > 1)
        err = tern_kv_copy_seq(kv, solo_seq, 0, D);
    if (!err && N > 0) {
        int32_t solo_next = ids[0];
        float *solo_logits = logits + B * c->vocab;
        tern_batch b = {.n_rows = (int)B, .seq = seqs, .n_tok = ones, .ids = next, .out = TERN_OUT_LAST};
        tern_batch solo = {.n_rows = 1, .seq = &solo_seq, .n_tok = &one, .ids = &solo_next, .out = TERN_OUT_LAST};
        err = forward_commit(m, kv, pool, &b, logits, NULL); /* first step: not timed (one prompt token) */
        if (!err && B > 1)
            err = forward_commit(m, kv, pool, &solo, solo_logits, NULL);
        for (int64_t s = 0; s < N && !err; s++) {
            t0 = tern_now_s();
            for (int64_t r = 0; r < B; r++)
                next[r] = tern_argmax(logits + r * c->vocab, c->vocab);
            tern_lm_set_profile(m, profiling ? &prof : NULL);
            err = forward_commit(m, kv, pool, &b, logits, NULL);
            tern_lm_set_profile(m, NULL);
            decode_s += tern_now_s() - t0;
            if (!err && B > 1) {
                t0 = tern_now_s();
                solo_next = tern_argmax(solo_logits, c->vocab);
                err = forward_commit(m, kv, pool, &solo, solo_logits, NULL);
                solo_s += tern_now_s() - t0;
            }
            probe_s += tern_membw_pass(probe, pool);
            /* The hand-off cost too, sampled between the steps like the bandwidth (the run's mean). */
            region_us = (region_us * (double)s + region_cost_us(pool, 500)) / (double)(s + 1);
        }
    }
    for (int64_t s = N; s < 8 && !err; s++) /* too few decode steps: the probe alone, 8 passes */
        probe_s += tern_membw_pass(probe, pool);
    if (!err && N == 0) /* no decode step sampled the hand-off cost */
        region_us = region_cost_us(pool, 10000);
    if (!err)
        bw = (double)tern_membw_bytes(probe) * (double)(N > 8 ? N : 8) / probe_s * 1e-9;
    if (!err) {
        double bytes = (double)tern_lm_decode_bytes(m);
        /* What the timed steps read from the cache: each row over the D + 2 + s positions it holds at step s. */
        double kv_bytes = 0;
        for (int64_t s = 0; s < N; s++)
            kv_bytes += (double)B * (double)tern_lm_desc_kv_read_bytes(c, kt, vt, D + 2 + s) / (double)N;
        double prefill_tps = P && prefill_s > 0 ? (double)P / prefill_s : 0;
        double steps = decode_s > 0 ? (double)N / decode_s : 0;
        double eff = bw > 0 ? steps * (bytes + kv_bytes) / (bw * 1e9) : 0;
        const char *isa = tern_isa_name(tern_isa_active());
        /* B > 1: the lone row decoded between the batched steps, and the batch's aggregate over it. */
        double solo = B > 1 && solo_s > 0 ? (double)N / solo_s : steps, speedup = solo > 0 ? steps * (double)B / solo : 0;
        if (json) {
            printf("{\"model\": \"%s\", \"prefill_tokens\": %lld, \"decode_tokens\": %lld, \"prefill_tok_s\": %.2f, "
                   "\"decode_tok_s\": %.2f, \"decode_aggregate_tok_s\": %.2f, \"bytes_per_token\": %.0f, "
                   "\"bandwidth_gb_s\": %.2f, \"decode_efficiency\": %.3f, \"threads\": %d, \"batch\": %lld, "
                   "\"isa\": \"%s\", \"kv\": \"%s\", \"region_us\": %.2f, \"single_row_tok_s\": %.2f, "
                   "\"batch_speedup\": %.2f, \"depth\": %lld, \"kv_bytes_per_step\": %.0f, \"stream_tokens\": %d",
                   pos[0], (long long)P, (long long)N, prefill_tps, steps, steps * (double)B, bytes, bw, eff,
                   tern_pool_size(pool), (long long)B, isa, kv_name, region_us, solo,
                   speedup, (long long)D, kv_bytes, tern_cpu_stream_tokens());
            if (profiling && pre_prof.passes) {
                printf(", \"prefill_profile\": [");
                for (int ph = 0; ph < TERN_PH_COUNT; ph++)
                    printf("%s{\"phase\": \"%s\", \"us_per_pass\": %.1f}", ph ? ", " : "",
                           tern_phase_name((tern_phase)ph), pre_prof.seconds[ph] * 1e6 / (double)pre_prof.passes);
                printf("]");
            }
            if (profiling && prof.passes) {
                printf(", \"profile\": [");
                for (int ph = 0; ph < TERN_PH_COUNT; ph++)
                    printf("%s{\"phase\": \"%s\", \"us_per_step\": %.1f, \"weight_bytes_per_step\": %.0f}",
                           ph ? ", " : "", tern_phase_name((tern_phase)ph),
                           prof.seconds[ph] * 1e6 / (double)prof.passes, prof.bytes[ph] / (double)prof.passes);
                printf("]");
            }
            printf("}\n");
        } else {
            printf("model            %s\nisa              %s, %d threads, kv %s, weight streams requested from %d "
                   "token(s) a pass\n"
                   "prefill          %lld tokens: %.2f tok/s\n"
                   "decode           %lld steps x %lld rows after %lld tokens of context: %.2f tok/s per row, "
                   "%.2f tok/s aggregate\n"
                   "weights/step     %.1f MB streamed per decode step\n"
                   "kv/step          %.1f MB read from the KV cache per decode step (every row, its mean context)\n"
                   "read bandwidth   %.2f GB/s (measured between the decode steps, %d threads)\n"
                   "decode limit     %.2f steps/s; efficiency %.1f%%\n"
                   "thread pool      %.2f us per parallel region (measured between the decode steps)\n",
                   pos[0], isa, tern_pool_size(pool), kv_name, tern_cpu_stream_tokens(), (long long)P, prefill_tps,
                   (long long)N, (long long)B, (long long)D, steps, steps * (double)B, bytes * 1e-6, kv_bytes * 1e-6,
                   bw, tern_pool_size(pool), bytes + kv_bytes > 0 ? bw * 1e9 / (bytes + kv_bytes) : 0, eff * 100,
                   region_us);
            if (B > 1)
                printf("batching         %.2f tok/s for one row decoded between the batched steps; %lld rows give "
                       "%.2fx its throughput\n", solo, (long long)B, speedup);
            if (profiling && pre_prof.passes)
                print_profile(&pre_prof, "prefill chunk", 0);
            if (profiling && prof.passes)
                print_profile(&prof, "decode step", bw);
        }
    }
    free(seqs);
    free(ones);
    free(next);
    free(logits);
    free(ids);
    tern_kv_free(kv);
    tern_membw_free(probe);
    tern_pool_destroy(pool);
    tern_lm_free(m);
    if (err) {
        fprintf(stderr, "tern bench: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
