/* membw.h — the machine's read bandwidth, measured the way decode reads weights: every pool
 * thread streams its share of a buffer far larger than the caches. */
#ifndef TERN_TENSOR_MEMBW_H
#define TERN_TENSOR_MEMBW_H

#include <stddef.h>

#include "core/status.h"
#include "core/threadpool.h"

/* Best of `reps` passes over a `bytes` buffer, in GB/s (1e9 bytes per second). */
tern_err *tern_measure_read_bandwidth(tern_pool *pool, size_t bytes, int reps, double *gb_s);

#endif
