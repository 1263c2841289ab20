/* membw.c — read-bandwidth probe (see membw.h). */
#include "tensor/membw.h"

#include <stdlib.h>

#include "core/alloc.h"
#include "core/timeutil.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"

struct tern_membw {
    float *buf;
    size_t n;
    double sums[1024]; /* one per thread; keeps the loads from being optimised away */
};

static void sum_range(void *ctx, size_t b, size_t e, int tid) {
    tern_membw *p = ctx;
    const float *s = p->buf + b;
    size_t n = e - b;
    const double r = tern_kernels()->read_sum(s, n);
    p->sums[tid & 1023] += r;
}

tern_err *tern_membw_create(size_t bytes, tern_membw **out) {
    *out = NULL;
    tern_membw *p = calloc(1, sizeof *p);
    if (p) {
        p->n = bytes / sizeof(float);
        p->buf = tern_stream_alloc(p->n * sizeof(float));
    }
    if (!p || !p->buf) {
        free(p);
        return tern_errf(TERN_ENOMEM, "cannot allocate %zu MiB for the bandwidth probe", bytes >> 20);
    }
    for (size_t i = 0; i < p->n; i++) /* touch every page so the probe measures DRAM, not page faults */
        p->buf[i] = (float)(i & 7);
    *out = p;
    return NULL;
}

double tern_membw_pass(tern_membw *p, tern_pool *pool) {
    double t0 = tern_now_s();
    tern_pool_parallel_for(pool, p->n, 4096, sum_range, p);
    return tern_now_s() - t0;
}

size_t tern_membw_bytes(const tern_membw *p) { return p->n * sizeof(float); }

void tern_membw_free(tern_membw *p) {
    if (!p)
        return;
    tern_aligned_free(p->buf);
    free(p);
}
