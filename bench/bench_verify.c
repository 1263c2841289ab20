/* bench_verify.c — what a speculative verification step costs on this CPU: one forward over k+1 positions per row
 * (the last token and k drafts, logits at every one, nothing committed) against the plain decode step (k = 0),
 * for k = 0..K, after D tokens of context. The ratio t(k) / t(0) is the curve that decides when speculation
 * pays: with per-draft acceptance a, a step yields (1 - a^(k+1)) / (1 - a) tokens on average, so drafting k
 * tokens pays only when that exceeds t(k) / t(0); the last column is the acceptance where they are equal.
 *
 * The k values are interleaved within each iteration (k = 0..K, then again), so a drift of the machine hits them
 * alike; the median of the iterations is reported.
 *
 * usage: bench_verify MODEL_DIR [--max-k 8] [--rows 1] [--depth 256] [--iters 15] [--threads 2] [--json]
 *   build/bench_verify models/e2b-q4 --threads 2 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "core/timeutil.h"
#include "models/model.h"

#define MAX_K 16
#define MAX_ITERS 101

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The acceptance a at which (1 - a^(k+1)) / (1 - a) = ratio (tokens a verification step yields on average); 1
 * when even full acceptance does not pay. */
static double break_even(int k, double ratio) {
    if (ratio <= 1)
        return 0;
    if (ratio >= k + 1)
        return 1;
    double lo = 0, hi = 1;
    for (int i = 0; i < 60; i++) {
        double a = (lo + hi) / 2, yield = (1 - pow(a, k + 1)) / (1 - a);
        if (yield < ratio)
            lo = a;
        else
            hi = a;
    }
    return (lo + hi) / 2;
}

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return dflt;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_verify MODEL_DIR [--max-k 8] [--rows 1] [--depth 256] [--iters 15] "
                        "[--threads 2] [--json]\n");
        return 2;
    }
    const int K = atoi(arg(argc, argv, "--max-k", "8")), R = atoi(arg(argc, argv, "--rows", "1"));
    const int64_t D = atoll(arg(argc, argv, "--depth", "256"));
    const int iters = atoi(arg(argc, argv, "--iters", "15")), threads = atoi(arg(argc, argv, "--threads", "2"));
    int json = 0;
    for (int i = 2; i < argc; i++)
        json |= !strcmp(argv[i], "--json");
    if (K < 1 || K > MAX_K || R < 1 || R > 64 || D < 1 || D > 1 << 20 || iters < 1 || iters > MAX_ITERS) {
        fprintf(stderr, "bench_verify: --max-k in [1, %d], --rows in [1, 64], --depth >= 1, --iters in [1, %d]\n",
                MAX_K, MAX_ITERS);
        return 2;
    }
    tern_lm *lm = NULL;
    tern_pool *pool = NULL;
    tern_kv *kv = NULL;
    tern_err *err = tern_lm_load(argv[1], threads, &lm);
    if (!err)
        err = tern_pool_create(threads, &pool);
    const int64_t feed = 64; /* prompt tokens per forward while the context is built */
    if (!err)
        err = tern_lm_kv_create(lm, R, D + K + 2, feed > K + 1 ? feed : K + 1, TERN_KV_BF16, TERN_KV_BF16, &kv);
    if (err) {
        fprintf(stderr, "bench_verify: %s\n", tern_err_msg(err));
        return 1;
    }
    const int64_t V = tern_lm_desc_of(lm)->vocab;
    float *logits = malloc((size_t)(R * (K + 1)) * (size_t)V * sizeof *logits);
    int32_t *ids = malloc((size_t)(R * (D + K + 1)) * sizeof *ids);
    int seqs[64];
    int64_t ntok[64], pos[64];
    uint8_t prompt[64], gen[64], want[64 * (MAX_K + 1)];
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < R * (D + K + 1); i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        ids[i] = (int32_t)(s % (uint64_t)V);
    }
    /* The context: D tokens per row, committed. */
    for (int r = 0; r < R && !err; r++) {
        seqs[r] = r;
        prompt[r] = 1;
        gen[r] = 0;
        for (int64_t t = 0; t < D && !err; t += feed) {
            int64_t n = D - t < feed ? D - t : feed;
            tern_batch b = {.n_rows = 1, .seq = &seqs[r], .n_tok = &n, .ids = ids + r * (D + K + 1) + t,
                            .out = TERN_OUT_NONE, .row_prefill = &prompt[r]};
            err = tern_lm_forward(lm, kv, pool, &b, NULL, NULL);
            if (!err)
                err = tern_batch_commit(kv, &b);
        }
    }
    memset(want, TERN_WANT_LOGITS, sizeof want);
    double t_k[MAX_K + 1][MAX_ITERS];
    int32_t *fed = malloc((size_t)(R * (K + 1)) * sizeof *fed);
    for (int it = -2; it < iters && !err; it++) /* two rounds of warm-up */
        for (int k = 0; k <= K && !err; k++) {
            for (int r = 0; r < R; r++) {
                ntok[r] = k + 1;
                pos[r] = D; /* every step verifies from the same committed length: nothing is kept */
                memcpy(fed + r * (k + 1), ids + r * (D + K + 1) + D, (size_t)(k + 1) * sizeof *fed);
            }
            tern_batch b = {.n_rows = R, .seq = seqs, .n_tok = ntok, .pos = pos, .ids = fed, .want = want,
                            .row_prefill = gen};
            const double t0 = tern_now_s();
            err = tern_lm_forward(lm, kv, pool, &b, logits, NULL);
            if (it >= 0)
                t_k[k][it] = tern_now_s() - t0;
        }
    if (err) {
        fprintf(stderr, "bench_verify: %s\n", tern_err_msg(err));
        return 1;
    }
    double med[MAX_K + 1];
    for (int k = 0; k <= K; k++) {
        qsort(t_k[k], (size_t)iters, sizeof(double), cmp_double);
        med[k] = t_k[k][iters / 2];
    }
    if (json) {
        printf("{\"rows\": %d, \"depth\": %lld, \"threads\": %d, \"iters\": %d, \"steps\": [", R, (long long)D, threads,
               iters);
        for (int k = 0; k <= K; k++)
            printf("%s{\"k\": %d, \"ms\": %.3f, \"ratio\": %.4f, \"break_even_acceptance\": %.4f}", k ? ", " : "", k,
                   med[k] * 1e3, med[k] / med[0], break_even(k, med[k] / med[0]));
        printf("]}\n");
    } else {
        printf("%s: %d row(s) after %lld tokens of context, %d threads, median of %d\n", argv[1], R, (long long)D,
               threads, iters);
        printf("%4s %10s %12s %10s %22s\n", "k", "positions", "ms / step", "x k=0", "break-even acceptance");
        for (int k = 0; k <= K; k++)
            printf("%4d %10d %12.3f %10.3f %22.3f\n", k, R * (k + 1), med[k] * 1e3, med[k] / med[0],
                   break_even(k, med[k] / med[0]));
    }
    free(fed);
    free(ids);
    free(logits);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_lm_free(lm);
    return 0;
}
