/* membw.c — read-bandwidth probe (see membw.h). */
#include "tensor/membw.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/timeutil.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"

typedef struct {
    const float *buf;
    double sums[1024]; /* one per thread; keeps the loads from being optimised away */
} probe;

static void sum_range(void *ctx, size_t b, size_t e, int tid) {
    probe *p = ctx;
    const float *s = p->buf + b;
    size_t n = e - b;
    double r = 0;
    switch (tern_isa_active()) {
    case TERN_ISA_AVX512: r = tern_read_sum_avx512(s, n); break;
    case TERN_ISA_AVX2: r = tern_read_sum_avx2(s, n); break;
    case TERN_ISA_PORTABLE:
        for (size_t i = 0; i < n; i++)
            r += s[i];
        break;
    }
    p->sums[tid & 1023] += r;
}

tern_err *tern_measure_read_bandwidth(tern_pool *pool, size_t bytes, int reps, double *gb_s) {
    size_t n = bytes / sizeof(float);
    float *buf = tern_aligned_alloc(n * sizeof(float), 64);
    if (!buf)
        return tern_errf(TERN_ENOMEM, "cannot allocate %zu MiB for the bandwidth probe", bytes >> 20);
    for (size_t i = 0; i < n; i++) /* touch every page so the probe measures DRAM, not page faults */
        buf[i] = (float)(i & 7);
    probe p = {.buf = buf};
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = tern_now_s();
        tern_pool_parallel_for(pool, n, 4096, sum_range, &p);
        double dt = tern_now_s() - t0;
        if (dt > 0 && (double)(n * sizeof(float)) / dt > best)
            best = (double)(n * sizeof(float)) / dt;
    }
    tern_aligned_free(buf);
    *gb_s = best * 1e-9;
    return NULL;
}
