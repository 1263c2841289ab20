/* stream_choice.c — measuring and keeping, per CPU, from how many tokens the int8 products request their weight
 * stream ahead (see stream_choice.h). The measurement is a sweep of one product per packed matrix, in the
 * weights' order, over as many bytes as twice the last-level cache (at least 256 MiB): what a decode step's
 * products read, without the rest of the step. */
#include "models/stream_choice.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/cache_dir.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"
#include "tensor/qpack.h"

#define MIN_SWEEP_BYTES ((size_t)256 << 20)
#define ROUNDS 3
#define MAX_TOKENS 3  /* passes over 4 tokens or more always request (qmm_avx512.c) */
#define CLEAR_WIN 0.97 /* the requests are kept for a token count when its best sweep takes at most this share of
                        * the best sweep without them: a CPU whose prefetchers keep up is left to them */

static atomic_int claimed; /* one settling at a time, and none after one settled */

/* cpu-<signature>.stream in the cache folder (malloc'd), or NULL when caching is off. */
static char *choice_path(void) {
    char *dir = tern_cache_dir();
    if (!dir)
        return NULL;
    char *path = NULL;
    if (asprintf(&path, "%s/cpu-%016llx.stream", dir, (unsigned long long)tern_cpu_signature()) < 0)
        path = NULL;
    free(dir);
    return path;
}

/* The kept count (1..4), or 0 when there is none to read. */
static int read_choice(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "stream_tokens %d", &n) == 1)
            break;
    fclose(f);
    return n >= 1 && n <= 4 ? n : 0;
}

static void keep_choice(const char *path, int n, const double best[MAX_TOKENS][2], double gb) {
    char *tmp = NULL;
    tern_err *err = tern_cache_begin_write(path, &tmp);
    FILE *f = err ? NULL : fopen(tmp, "w");
    if (f) {
        fprintf(f, "# tern: from how many tokens a pass of the int8 products requests its weight stream ahead on this "
                   "CPU (measured)\nstream_tokens %d\n", n);
        for (int t = 0; t < MAX_TOKENS; t++)
            fprintf(f, "# %d token(s): %.1f GB/s with the requests, %.1f without\n", t + 1, gb / best[t][1],
                    gb / best[t][0]);
    }
    if (!err && (!f || fclose(f) || rename(tmp, path)))
        err = tern_errf(TERN_EIO, "%s: cannot be written", path);
    if (err) {
        TLOG_WARN("%s; the stream choice is measured again at the next start", tern_err_msg(err));
        tern_err_free(err);
        if (tmp)
            unlink(tmp);
    }
    free(tmp);
}

typedef struct sweep {
    tern_pool *pool;
    const tern_weight **ws;
    size_t n;
    float *x, *y;
} sweep;

/* Seconds for one product of T tokens per matrix of the sweep; < 0 when a product fails. */
static double sweep_seconds(const sweep *s, int T) {
    const double t0 = tern_now_s();
    for (size_t i = 0; i < s->n; i++)
        if (tern_matmul(s->pool, s->ws[i], s->x, T, s->y, TERN_MM_DECODE))
            return -1;
    return tern_now_s() - t0;
}

/* best[t][r]: the fastest sweep over t + 1 tokens with (r = 1) and without (r = 0) the requests. 0 on success. */
static int measure(const sweep *s, double best[MAX_TOKENS][2]) {
    if (sweep_seconds(s, 1) < 0) /* the first pass pays for page faults and cold TLBs */
        return -1;
    for (int t = 0; t < MAX_TOKENS; t++)
        best[t][0] = best[t][1] = INFINITY;
    for (int round = 0; round < ROUNDS; round++)
        for (int t = 0; t < MAX_TOKENS; t++)
            for (int k = 0; k < 2; k++) {
                const int requests = (round + t + k) & 1; /* the order alternates from round to round */
                tern_cpu_set_stream_tokens(requests ? 1 : 4);
                const double dt = sweep_seconds(s, t + 1);
                if (dt < 0)
                    return -1;
                best[t][requests] = fmin(best[t][requests], dt);
            }
    return 0;
}

/* The sweep's matrices: the packed ones in order until `want` bytes; 0 when they hold fewer. */
static int pick_matrices(const tern_weights *w, size_t want, sweep *s, size_t *bytes, int64_t *cols, int64_t *rows) {
    *bytes = 0, *cols = *rows = 0;
    for (size_t i = 0; i < w->n && *bytes < want; i++) {
        const tern_weight *m = &w->w[i];
        if (!m->qpack)
            continue;
        s->ws[s->n++] = m;
        *bytes += tern_qpack_bytes(m);
        *cols = tern_weight_cols(m) > *cols ? tern_weight_cols(m) : *cols;
        *rows = tern_weight_rows(m) > *rows ? tern_weight_rows(m) : *rows;
    }
    return *bytes >= want;
}

void tern_stream_choice_settle(const tern_weights *w, int threads) {
    if (tern_cpu_stream_tokens_asked() || !w->packed || atomic_exchange(&claimed, 1))
        return;
    char *path = choice_path();
    const int kept = path ? read_choice(path) : 0;
    if (kept) {
        tern_cpu_set_stream_tokens(kept);
        tern_cache_used(path);
        free(path);
        return;
    }
    int settled = 0;
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const size_t want = llc > 0 && (size_t)llc * 2 > MIN_SWEEP_BYTES ? (size_t)llc * 2 : MIN_SWEEP_BYTES;
    sweep s = {.ws = calloc(w->n ? w->n : 1, sizeof *s.ws)};
    size_t bytes = 0;
    int64_t cols = 0, rows = 0;
    const int big_enough = s.ws && pick_matrices(w, want, &s, &bytes, &cols, &rows);
    s.x = big_enough ? malloc((size_t)cols * MAX_TOKENS * sizeof *s.x) : NULL;
    s.y = big_enough ? malloc((size_t)rows * MAX_TOKENS * sizeof *s.y) : NULL;
    tern_err *err = s.x && s.y && threads > 1 ? tern_pool_create(threads, &s.pool) : NULL;
    const int before = tern_cpu_stream_tokens();
    double best[MAX_TOKENS][2];
    if (s.x && s.y && !err) {
        for (int64_t i = 0; i < cols * MAX_TOKENS; i++) /* any finite activations: the time does not depend on them */
            s.x[i] = (float)((i * 7919) % 2003 - 1001) / 1001.0f;
        int chosen = 4;
        const double t0 = tern_now_s();
        if (!measure(&s, best)) {
            for (int t = MAX_TOKENS - 1; t >= 0 && best[t][1] <= CLEAR_WIN * best[t][0]; t--)
                chosen = t + 1;
            tern_cpu_set_stream_tokens(chosen);
            settled = 1;
            const double gb = (double)bytes / 1e9;
            TLOG_INFO("int8 products request their weight stream ahead from %d token(s) a pass on this CPU (measured "
                      "in %.2f s over %.0f MB: 1 token %.1f / %.1f GB/s with / without the requests, 2 tokens %.1f / "
                      "%.1f, 3 tokens %.1f / %.1f)",
                      chosen, tern_now_s() - t0, gb * 1e3, gb / best[0][1], gb / best[0][0], gb / best[1][1],
                      gb / best[1][0], gb / best[2][1], gb / best[2][0]);
            if (path)
                keep_choice(path, chosen, best, gb);
        } else {
            tern_cpu_set_stream_tokens(before);
        }
    }
    if (!settled) /* a later, larger model may measure */
        atomic_store(&claimed, 0);
    tern_err_free(err);
    tern_pool_destroy(s.pool);
    free(s.x), free(s.y), free(s.ws), free(path);
}
