/* bench_read.c — the machine's plain read bandwidth, the roofline decode is judged against: T threads each sum one
 * contiguous share of a buffer far larger than the caches (vector loads, four accumulators, no software prefetch:
 * the hardware prefetchers follow one long run per thread), the best of R passes in GB/s. tern bench's own probe
 * runs between decode steps under the same conditions as they do (its mean, with the kernels' prefetch); this one
 * gives what the memory can give, so both figures can be put beside a decode rate.
 * usage: bench_read [--threads 2] [--mib 2048] [--passes 5]   (prints one number, GB/s) */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/timeutil.h"

typedef struct share {
    const uint64_t *p;
    size_t n; /* 64-bit words */
    uint64_t sum;
} share;

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 12)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; i++)
        s += p[i];
    return s;
}

static uint64_t sum_plain(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        a0 += p[i], a1 += p[i + 1], a2 += p[i + 2], a3 += p[i + 3];
    for (; i < n; i++)
        a0 += p[i];
    return a0 + a1 + a2 + a3;
}

static void *run_share(void *arg) {
    share *s = arg;
    s->sum = __builtin_cpu_supports("avx2") ? sum_avx2(s->p, s->n) : sum_plain(s->p, s->n);
    return NULL;
}

static long arg(int argc, char **argv, const char *name, long def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return strtol(argv[i + 1], NULL, 10);
    return def;
}

int main(int argc, char **argv) {
    const long threads = arg(argc, argv, "--threads", 2), mib = arg(argc, argv, "--mib", 2048),
               passes = arg(argc, argv, "--passes", 5);
    if (threads < 1 || threads > 256 || mib < 64 || passes < 1) {
        fprintf(stderr, "usage: bench_read [--threads 1..256] [--mib >= 64] [--passes >= 1]\n");
        return 2;
    }
    const size_t bytes = (size_t)mib << 20, words = bytes / 8;
    uint64_t *buf = tern_stream_alloc(bytes);
    if (!buf) {
        fprintf(stderr, "bench_read: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < words; i++) /* every page touched: DRAM is measured, not page faults */
        buf[i] = i & 7;
    share sh[256];
    pthread_t th[256];
    double best = 0;
    uint64_t sink = 0;
    for (long p = 0; p < passes; p++) {
        const double t0 = tern_now_s();
        for (long t = 0; t < threads; t++) {
            const size_t lo = words * (size_t)t / (size_t)threads / 4 * 4, hi = words * (size_t)(t + 1) / (size_t)threads / 4 * 4;
            sh[t] = (share){buf + lo, hi - lo, 0};
            if (t > 0 && pthread_create(&th[t], NULL, run_share, &sh[t])) {
                fprintf(stderr, "bench_read: cannot start a thread\n");
                return 1;
            }
        }
        run_share(&sh[0]);
        for (long t = 1; t < threads; t++)
            pthread_join(th[t], NULL);
        const double gbs = (double)bytes / (tern_now_s() - t0) * 1e-9;
        for (long t = 0; t < threads; t++)
            sink += sh[t].sum;
        best = gbs > best ? gbs : best;
    }
    printf("%.2f\n", best + (sink == 1 ? 1e-9 : 0));
    tern_aligned_free(buf);
    return 0;
}
