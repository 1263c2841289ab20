/* bench_prompt_cache.c — what the prompt cache saves on the time to first token, for a long system prompt shared by
 * many user turns (the chat server's common case): each turn's first token
 *
 *   cold      the engine without a prefix cache (every turn prefills the whole prompt)
 *   memory    the prefix in the memory tier (after one turn put it there)
 *   disk      after a restart: a new engine over the same --cache-disk folder, the folder's files dropped from the
 *             page cache first (posix_fadvise), so the first turn reads the prefix from the disk itself
 *
 * The turns after the restart are new (only the system part can come from the cache). The first --cold-turns of each
 * phase also run cold, and the cached runs' first tokens must be theirs (greedy), so the figures are of the same
 * output. Medians over the turns (cold: over its fewer turns, each a full prefill).
 *
 * usage: bench_prompt_cache MODEL_DIR DISK_DIR [--system 2000] [--turns 50] [--cold-turns 3] [--threads 2] [--json]
 *   build/bench_prompt_cache models/e2b-q4 /tmp/tern-prompt-cache --threads 2 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern/tern.h"

#define MAX_TURNS 512

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Turn t's prompt: the shared system part, then the turn's own 24 tokens (ids drawn from a seeded stream). */
static int32_t *make_prompt(int64_t system, int t, int64_t vocab, int64_t *n) {
    const int64_t own = 24;
    int32_t *p = malloc((size_t)(system + own) * sizeof *p);
    uint64_t s = 12345;
    for (int64_t i = 0; i < system + own; i++) {
        if (i == system)
            s = 777 + (uint64_t)t * 1000003u;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (int32_t)(1000 + (s >> 33) % (uint64_t)(vocab - 2000));
    }
    p[0] = 2; /* BOS */
    *n = system + own;
    return p;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One turn: its first token and the seconds to it from the submit call (so the disk reads a submit does count), and
 * how many prompt tokens came from the cache. */
static int turn(tern_engine *e, const int32_t *ids, int64_t n, int32_t *tok, double *ttft, int64_t *cached) {
    const double t0 = now_s();
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = (size_t)n;
    r.max_tokens = 1;
    r.ignore_eos = 1;
    tern_stream *s;
    tern_err *err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL);
    if (err) {
        fprintf(stderr, "bench_prompt_cache: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return -1;
    }
    tern_event ev;
    int rc = -1;
    while (tern_stream_next(s, &ev, -1) == 1) {
        if (ev.kind == TERN_EV_TOKEN) {
            *tok = ev.token;
            *ttft = now_s() - t0;
        } else {
            *cached = ev.usage.cached_tokens;
            rc = ev.finish == TERN_FINISH_LENGTH || ev.finish == TERN_FINISH_STOP ? 0 : -1;
        }
    }
    tern_stream_free(s);
    return rc;
}

/* Drops the folder's files (recursively, one level of key folders) from the page cache. */
static void drop_cached(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        DIR *sub = fdopendir(fd);
        if (sub) {
            closedir(sub);
            drop_cached(path);
            continue;
        }
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    closedir(d);
}

static tern_engine *engine(tern_model *m, int threads, int64_t ctx, int cache, const char *disk) {
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = 1;
    o.ctx = ctx;
    o.threads = threads;
    o.prefix_cache_bytes = cache ? (int64_t)1 << 30 : 0; /* room for the whole prefix whatever the context */
    o.prefix_disk_dir = disk;
    tern_engine *e;
    tern_err *err = tern_engine_create(m, &o, &e);
    if (err) {
        fprintf(stderr, "bench_prompt_cache: %s\n", tern_err_msg(err));
        exit(1);
    }
    return e;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_prompt_cache MODEL_DIR DISK_DIR [--system 2000] [--turns 50] [--cold-turns 3] "
                        "[--threads 2] [--json]\n");
        return 2;
    }
    const char *model_dir = argv[1], *disk = argv[2];
    int64_t system = 2000;
    int turns = 50, cold_turns = 3, threads = 2, json = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--system") && i + 1 < argc)
            system = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--turns") && i + 1 < argc)
            turns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cold-turns") && i + 1 < argc)
            cold_turns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
    }
    if (turns < 1 || turns > MAX_TURNS || cold_turns < 1 || cold_turns > turns || system < 16) {
        fprintf(stderr, "bench_prompt_cache: --turns 1..%d, --cold-turns 1..turns, --system >= 16\n", MAX_TURNS);
        return 2;
    }
    tern_model_opts mo = {.model_dir = model_dir, .threads = threads};
    tern_model *m;
    tern_err *err = tern_model_load(&mo, &m);
    if (err) {
        fprintf(stderr, "bench_prompt_cache: %s\n", tern_err_msg(err));
        return 1;
    }
    tern_model_info info;
    tern_model_get_info(m, &info);
    const int64_t ctx = system + 64;
    static double cold[2 * MAX_TURNS], mem[MAX_TURNS], after[MAX_TURNS];
    static int32_t first[2 * MAX_TURNS];
    int64_t n, cached, disk_cached = 0;
    int32_t tok;
    int mismatches = 0;

    /* Turn ids: 0..turns-1 run with the prefix in memory, turns..2*turns-1 after the restart (their own tokens new, so
     * only the system part can come from the cache), WARM puts the prefix in memory first. Cold runs: the first
     * cold_turns of each phase, whose first tokens the cached runs must repeat. */
    const int WARM = 100000;
    tern_engine *e = engine(m, threads, ctx, 0, NULL);
    int n_cold = 0;
    for (int ph = 0; ph < 2; ph++)
        for (int t = 0; t < cold_turns; t++, n_cold++) {
            int32_t *p = make_prompt(system, ph * turns + t, info.vocab_size, &n);
            if (turn(e, p, n, &first[n_cold], &cold[n_cold], &cached))
                return 1;
            free(p);
            fprintf(stderr, "cold turn %d: %.3f s\n", ph * turns + t, cold[n_cold]);
        }
    tern_engine_destroy(e);

    e = engine(m, threads, ctx, 1, disk);
    for (int t = -1; t < turns; t++) {
        int32_t *p = make_prompt(system, t < 0 ? WARM : t, info.vocab_size, &n);
        double s;
        if (turn(e, p, n, &tok, &s, &cached))
            return 1;
        free(p);
        if (t >= 0) {
            mem[t] = s;
            mismatches += (t < cold_turns && tok != first[t]) || cached < system;
        }
    }
    tern_engine_destroy(e); /* writes what the disk tier has queued */

    /* a restart over the same folder, its files out of the page cache */
    drop_cached(disk);
    e = engine(m, threads, ctx, 1, disk);
    for (int t = 0; t < turns; t++) {
        int32_t *p = make_prompt(system, turns + t, info.vocab_size, &n);
        if (turn(e, p, n, &tok, &after[t], &cached))
            return 1;
        free(p);
        if (t == 0)
            disk_cached = cached;
        mismatches += (t < cold_turns && tok != first[cold_turns + t]) || cached < system;
    }
    tern_metrics met;
    tern_engine_metrics(e, &met);
    tern_engine_destroy(e);
    tern_model_free(m);

    const double from_disk = after[0];
    double c = median(cold, n_cold), mm = median(mem, turns), am = median(after, turns);
    if (json)
        printf("{\"system_tokens\":%lld,\"turns\":%d,\"cold_ttft_s\":%.4f,\"memory_ttft_s\":%.4f,"
               "\"disk_first_ttft_s\":%.4f,\"after_restart_ttft_s\":%.4f,\"disk_cached_tokens\":%lld,"
               "\"disk_hit_tokens\":%llu,\"disk_bytes\":%llu,\"mismatches\":%d}\n",
               (long long)system, turns, c, mm, from_disk, am, (long long)disk_cached,
               (unsigned long long)met.prefix_disk_hit_tokens, (unsigned long long)met.prefix_disk_bytes, mismatches);
    else {
        printf("system prompt %lld tokens, %d turns of 24 more (threads %d)\n", (long long)system, turns, threads);
        printf("  cold (no cache), median of %d: %8.3f s\n", n_cold, c);
        printf("  prefix in memory, median:       %8.3f s  (%.1f%% of cold)\n", mm, 100.0 * mm / c);
        printf("  after a restart, first turn:    %8.3f s  (%.1f%% of cold; %lld tokens read from disk)\n", from_disk,
               100.0 * from_disk / c, (long long)disk_cached);
        printf("  after a restart, median:        %8.3f s\n", am);
        printf("  disk tier: %.1f MiB; first tokens differing from the cold run's, or prefixes missed: %d\n",
               (double)met.prefix_disk_bytes / 1048576.0, mismatches);
    }
    return mismatches ? 1 : 0;
}
