/* bench_attention.c — one decode token's attention alone, over a long KV cache: how fast the kernel reads the
 * cache against the read-bandwidth probe run in between (the figure `tern bench --depth` folds into a whole step).
 * Each layer's cache is its own buffer, as the engine keeps them, so a step streams layers x positions rows from
 * memory; the token's two spans of positions go to two threads as the decoder splits a lone token.
 * With --hot the same single layer is read every time (from the caches): the kernel's arithmetic alone.
 * usage: bench_attention [--ctx 4096] [--layers 16] [--heads 32] [--kv-heads 8] [--head-dim 64] [--kv bf16]
 *                        [--threads 2] [--iters 10] [--hot] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "tensor/attention.h"
#include "tensor/cpu.h"
#include "tensor/kv_type.h"
#include "tensor/membw.h"

static long arg(int argc, char **argv, const char *name, long def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return strtol(argv[i + 1], NULL, 10);
    return def;
}

static const char *arg_str(int argc, char **argv, const char *name, const char *def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

typedef struct layer_job {
    tern_attn_args a;  /* the layer's token, scratch and out filled per thread */
    float *scratch[2]; /* per span: scores, then one partial */
    float *parts;      /* the two spans' partials */
    int64_t spans;
} layer_job;

static void span_range(void *ctx, size_t b, size_t e, int tid) {
    layer_job *j = ctx;
    (void)tid;
    for (size_t s = b; s < e; s++) {
        tern_attn_args a = j->a;
        a.scores = j->scratch[s];
        a.part = j->scratch[s] + a.n_heads * TERN_ATTN_CHUNK;
        if (j->spans == 1)
            tern_attend(&a);
        else
            tern_attend_span(&a, (int64_t)s, j->parts + (int64_t)s * tern_attn_part_floats(a.n_heads, a.head_dim));
    }
}

int main(int argc, char **argv) {
    const int64_t ctx = arg(argc, argv, "--ctx", 4096);
    const int64_t nH = arg(argc, argv, "--heads", 32), kvh = arg(argc, argv, "--kv-heads", 8);
    const int64_t hd = arg(argc, argv, "--head-dim", 64), row = kvh * hd;
    const int iters = (int)arg(argc, argv, "--iters", 10), threads = (int)arg(argc, argv, "--threads", 2);
    const int64_t L = arg(argc, argv, "--layers", 16);
    int is_hot = 0;
    for (int i = 1; i < argc; i++)
        is_hot |= !strcmp(argv[i], "--hot");
    tern_kv_type kt;
    tern_err *err = tern_kv_type_parse(arg_str(argc, argv, "--kv", "bf16"), &kt);
    if (!err && (ctx < 1 || nH < 1 || kvh < 1 || nH % kvh || hd % 32 || L < 1 || iters < 1))
        err = tern_errf(TERN_EINVAL, "bad shape");
    const int64_t bufs = is_hot ? 1 : L;
    const size_t bytes = tern_kv_type_bytes(kt, ctx * row); /* one layer's K (or V) */
    void **k = calloc((size_t)bufs, sizeof *k), **v = calloc((size_t)bufs, sizeof *v);
    const int64_t pf = tern_attn_part_floats(nH, hd);
    float *q = malloc((size_t)(nH * hd) * sizeof *q), *out = malloc((size_t)(nH * hd) * sizeof *out);
    float *parts = malloc((size_t)(2 * pf) * sizeof *parts), *rowf = malloc((size_t)row * sizeof *rowf);
    float *scratch[2] = {malloc((size_t)(nH * TERN_ATTN_CHUNK + 3 * pf) * sizeof(float)),
                         malloc((size_t)(nH * TERN_ATTN_CHUNK + 3 * pf) * sizeof(float))};
    tern_pool *pool = NULL;
    tern_membw *probe = NULL;
    if (!err && (!k || !v || !q || !out || !parts || !rowf || !scratch[0] || !scratch[1]))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    for (int64_t l = 0; !err && l < bufs; l++)
        if (!(k[l] = tern_stream_alloc(bytes)) || !(v[l] = tern_stream_alloc(bytes)))
            err = tern_errf(TERN_ENOMEM, "out of memory for %lld layers of %zu bytes", (long long)L, bytes);
    if (!err)
        err = tern_pool_create(threads, &pool);
    if (!err)
        err = tern_membw_create((size_t)256 << 20, &probe);
    if (err) {
        fprintf(stderr, "bench_attention: %s\n", tern_err_msg(err));
        return 1;
    }
    /* Values of the size q_norm/k_norm give (the speed does not depend on them). */
    uint64_t s = 1;
    for (int64_t l = 0; l < bufs; l++)
        for (int64_t p = 0; p < ctx; p++)
            for (int kvi = 0; kvi < 2; kvi++) {
                for (int64_t i = 0; i < row; i++)
                    rowf[i] = (float)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) / 8388608.0f - 1.0f;
                tern_kv_type_store(kt, rowf, (char *)(kvi ? v[l] : k[l]) + tern_kv_type_bytes(kt, p * row), row);
            }
    for (int64_t i = 0; i < nH * hd; i++)
        q[i] = (float)((i * 7919) % 2001) / 4000.0f - 0.25f;
    layer_job j = {.a = {.q = q, .n_heads = nH, .kv_heads = kvh, .head_dim = hd, .k_type = kt, .v_type = kt,
                         .slots = ctx, .start = 0, .end = ctx - 1, .out = out},
                   .scratch = {scratch[0], scratch[1]}, .parts = parts};
    j.spans = tern_attn_spans(&j.a);
    double t_att = 0, t_probe = 0;
    for (int it = 0; it <= iters; it++) { /* pass 0 warms up */
        const double t0 = tern_now_s();
        for (int64_t l = 0; l < L; l++) {
            j.a.k = k[l % bufs];
            j.a.v = v[l % bufs];
            tern_pool_parallel_for(pool, (size_t)j.spans, 1, span_range, &j);
            if (j.spans == 2) {
                float *pt[2] = {parts, parts + pf};
                tern_attn_finish(&j.a, pt, 2);
            }
        }
        const double dt = tern_now_s() - t0, dp = is_hot ? 0 : tern_membw_pass(probe, pool);
        if (it) {
            t_att += dt;
            t_probe += dp;
        }
    }
    const double step = 2.0 * (double)bytes * (double)L, gbs = step * iters / t_att * 1e-9;
    printf("isa %s, %d threads, %s KV, %lld heads / %lld KV heads x %lld, %lld positions x %lld layers%s: "
           "%.1f MB per token\n",
           tern_isa_name(tern_isa_active()), tern_pool_size(pool), tern_kv_type_name(kt), (long long)nH,
           (long long)kvh, (long long)hd, (long long)ctx, (long long)L, is_hot ? " (one layer, hot)" : "", step * 1e-6);
    if (is_hot)
        printf("attention %.3f ms per token, %.2f GB/s from cache\n", t_att / iters * 1e3, gbs);
    else {
        const double pgbs = (double)tern_membw_bytes(probe) * iters / t_probe * 1e-9;
        printf("attention %.3f ms per token, %.2f GB/s; probe %.2f GB/s; ratio %.1f%%\n", t_att / iters * 1e3, gbs,
               pgbs, 100 * gbs / pgbs);
    }
    for (int64_t l = 0; l < bufs; l++) {
        tern_aligned_free(k[l]);
        tern_aligned_free(v[l]);
    }
    free(k);
    free(v);
    free(q);
    free(out);
    free(parts);
    free(rowf);
    free(scratch[0]);
    free(scratch[1]);
    tern_membw_free(probe);
    tern_pool_destroy(pool);
    return 0;
}
