/* bench_drafter.c — what drafting several rows at once saves with a drafter that reads its target's cache (the Gemma 4
 * assistant): for n = 1, 2, 4, .. rows, one step of all n rows together against n steps of one row each, every row
 * after D tokens of context of its own. Together, each of the drafter's products reads its weights once for all rows
 * (and runs one parallel region instead of n); the attention over each row's cache is the same work either way.
 *
 * The two ways alternate within each iteration, so a drift of the machine hits them alike; medians are reported.
 *
 * usage: bench_drafter MODEL_DIR DRAFTER_DIR [--rows 8] [--depth 64] [--iters 21] [--threads 2] [--json]
 *   build/bench_drafter models/demo models/demo-assistant --threads 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "core/timeutil.h"
#include "models/cache_drafter.h"
#include "models/model.h"

#define MAX_ITERS 101

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static int fail(tern_err *err) {
    fprintf(stderr, "bench_drafter: %s\n", tern_err_msg(err));
    tern_err_free(err);
    return 1;
}

int main(int argc, char **argv) {
    const char *model = NULL, *drafter = NULL;
    int rows = 8, depth = 64, iters = 21, threads = 2, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
            depth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!model)
            model = argv[i];
        else if (!drafter)
            drafter = argv[i];
        else
            model = NULL, i = argc;
    }
    if (!model || !drafter || rows < 1 || rows > 64 || depth < 1 || iters < 1 || iters > MAX_ITERS || threads < 0) {
        fprintf(stderr, "usage: bench_drafter MODEL_DIR DRAFTER_DIR [--rows 8] [--depth 64] [--iters 21] "
                        "[--threads 2] [--json]\n");
        return 2;
    }
    tern_lm *lm = NULL;
    tern_cache_drafter *d = NULL;
    tern_pool *pool = NULL;
    tern_kv *kv = NULL;
    tern_err *err = tern_lm_load(model, threads, &lm);
    if (!err)
        err = tern_cache_drafter_load(drafter, &d);
    if (!err)
        err = tern_cache_drafter_check_target(d, tern_lm_desc_of(lm));
    if (!err)
        err = tern_pool_create(threads, &pool);
    if (!err)
        err = tern_lm_kv_create(lm, rows, depth + 1, depth, TERN_KV_BF16, TERN_KV_BF16, &kv);
    if (err)
        return fail(err);
    const tern_lm_desc *t = tern_lm_desc_of(lm);
    const size_t H = (size_t)t->hidden, V = (size_t)t->vocab;
    int *seq = malloc((size_t)rows * sizeof *seq);
    int64_t *ntok = malloc((size_t)rows * sizeof *ntok);
    int32_t *ids = malloc((size_t)rows * (size_t)depth * sizeof *ids);
    float *emb = malloc((size_t)rows * H * sizeof *emb), *h = malloc((size_t)rows * H * sizeof *h);
    float *h_out = malloc((size_t)rows * H * sizeof *h_out), *logits = malloc((size_t)rows * V * sizeof *logits);
    if (!seq || !ntok || !ids || !emb || !h || !h_out || !logits)
        return fail(tern_errf(TERN_ENOMEM, "out of memory"));
    for (int r = 0; r < rows; r++) {
        seq[r] = r;
        ntok[r] = depth;
        for (int j = 0; j < depth; j++)
            ids[r * depth + j] = (int32_t)((3 + 7919 * (r + 1) * (j + 1)) % t->vocab);
    }
    tern_batch b = {.n_rows = rows, .seq = seq, .n_tok = ntok, .ids = ids, .out = TERN_OUT_LAST};
    float *prefill_logits = malloc((size_t)rows * V * sizeof *prefill_logits);
    if (!prefill_logits)
        return fail(tern_errf(TERN_ENOMEM, "out of memory"));
    err = tern_lm_forward(lm, kv, pool, &b, prefill_logits, h);
    free(prefill_logits);
    if (!err)
        err = tern_batch_commit(kv, &b);
    for (int r = 0; r < rows && !err; r++)
        err = tern_lm_embed(lm, ids[r * depth + depth - 1], emb + (size_t)r * H);
    if (err)
        return fail(err);
    if (json)
        printf("{\"depth\": %d, \"threads\": %d, \"results\": [", depth, threads);
    else
        printf("drafter steps after %d tokens, %d threads (medians of %d)\n%6s %14s %14s %8s\n", depth, threads,
               iters, "rows", "together ms", "one by one ms", "ratio");
    for (int n = 1; n <= rows; n *= 2) {
        double together[MAX_ITERS], apart[MAX_ITERS];
        for (int it = 0; it < iters && !err; it++) {
            tern_cache_drafter_io io = {.kv = kv, .target = t, .n = n, .seq = seq, .emb = emb, .h = h,
                                        .logits = logits, .h_out = h_out};
            double t0 = tern_now_s();
            err = tern_cache_drafter_step(d, pool, &io);
            double t1 = tern_now_s();
            for (int r = 0; r < n && !err; r++) {
                tern_cache_drafter_io one = {.kv = kv, .target = t, .n = 1, .seq = &seq[r], .emb = emb + r * H,
                                             .h = h + r * H, .logits = logits, .h_out = h_out};
                err = tern_cache_drafter_step(d, pool, &one);
            }
            together[it] = (t1 - t0) * 1e3;
            apart[it] = (tern_now_s() - t1) * 1e3;
        }
        if (err)
            return fail(err);
        const double a = median(together, iters), s = median(apart, iters);
        if (json)
            printf("%s{\"rows\": %d, \"together_ms\": %.4f, \"one_by_one_ms\": %.4f}", n > 1 ? ", " : "", n, a, s);
        else
            printf("%6d %14.3f %14.3f %7.2fx\n", n, a, s, s / a);
    }
    if (json)
        printf("]}\n");
    free(seq);
    free(ntok);
    free(ids);
    free(emb);
    free(h);
    free(h_out);
    free(logits);
    tern_kv_free(kv);
    tern_pool_destroy(pool);
    tern_cache_drafter_free(d);
    tern_lm_free(lm);
    return 0;
}
