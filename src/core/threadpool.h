/* threadpool.h — one persistent pool of workers for data-parallel kernels.
 *
 * parallel_for splits [0, n) into one contiguous range per thread (the caller
 * is thread 0), so a region costs a wake-up, not a thread creation. Workers
 * spin briefly after a region (the next one usually follows within
 * microseconds), then sleep on a condition variable. */
#ifndef TERN_CORE_THREADPOOL_H
#define TERN_CORE_THREADPOOL_H

#include <stddef.h>

#include "core/status.h"

typedef struct tern_pool tern_pool;

/* Body of a parallel region: handle [begin, end); `tid` in [0, nthreads). */
typedef void (*tern_range_fn)(void *ctx, size_t begin, size_t end, int tid);

/* Lowers the calling thread's priority: its nice value raised by `nice` (0..19; the threads it creates afterwards,
 * a pool's workers among them, inherit it). Lowering needs no privilege; a failure leaves the priority as it was. */
void tern_thread_lower_priority(int nice);

/* Creates a pool with `nthreads` threads in total (caller included); 0 = one per online core. */
TERN_MUST_CHECK tern_err *tern_pool_create(int nthreads, tern_pool **out);
/* Stops and joins the workers; NULL is fine. */
void tern_pool_destroy(tern_pool *pool);
/* Number of threads (caller included). */
int tern_pool_size(const tern_pool *pool);
/* Runs fn over [0, n) split into near-equal contiguous ranges, each range a multiple of `grain`
 * (except the last); returns when all are done. Not reentrant; one caller at a time. */
void tern_pool_parallel_for(tern_pool *pool, size_t n, size_t grain, tern_range_fn fn, void *ctx);
/* Like tern_pool_parallel_for, but balanced for work whose speed varies (memory-bound streams, causal
 * attention): each thread works through its own contiguous share front to back, then takes what is left of
 * the others' shares from their ends, so the threads finish together. fn may be called several times per
 * thread, with ranges aligned to `grain`. */
void tern_pool_parallel_balanced(tern_pool *pool, size_t n, size_t grain, tern_range_fn fn, void *ctx);
/* Thread t's own contiguous share [*lo, *hi) of `units` split T ways: what parallel_for gives it, and where
 * parallel_balanced starts it (data laid out by these shares is read by each thread as one run). */
void tern_pool_share(size_t units, size_t t, size_t T, size_t *lo, size_t *hi);
/* The cores this process may use: online, in its CPU affinity, and within its container's CPU quota (rounded up). */
int tern_cpu_count(void);

#endif
