/* membw.h — the machine's read bandwidth, measured the way decode reads weights: every pool
 * thread streams its share of a buffer far larger than the caches. A probe is a buffer kept between
 * passes, so a benchmark can interleave passes with the work it measures (this machine's bandwidth
 * drifts by tens of percent over seconds; a limit measured minutes apart would not be the same limit). */
#ifndef TERN_TENSOR_MEMBW_H
#define TERN_TENSOR_MEMBW_H

#include <stddef.h>

#include "core/status.h"
#include "core/threadpool.h"

typedef struct tern_membw tern_membw;

/* A probe over a `bytes` buffer, every page touched. */
TERN_MUST_CHECK tern_err *tern_membw_create(size_t bytes, tern_membw **out);
/* One pass over the whole buffer with every thread of the pool; returns the seconds it took. */
double tern_membw_pass(tern_membw *p, tern_pool *pool);
/* Bytes one pass reads. */
size_t tern_membw_bytes(const tern_membw *p);
void tern_membw_free(tern_membw *p);

#endif
