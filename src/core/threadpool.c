/* threadpool.c — persistent workers; spin-then-sleep wake-up, static or guided range split. */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long a worker spins for the next region before sleeping (iterations of pause, ~tens of µs). */
#define SPIN_ITERS 20000

struct tern_pool {
    int nthreads;
    pthread_t *threads;
    /* Current job; written by the caller before bumping `generation`. */
    tern_range_fn fn;
    void *ctx;
    size_t n, grain;
    int guided;
    _Alignas(64) atomic_size_t next; /* guided split: first unit not yet taken */
    _Alignas(64) atomic_uint generation;
    _Alignas(64) atomic_int pending; /* workers still running the current job */
    _Alignas(64) atomic_int sleepers;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

typedef struct {
    tern_pool *pool;
    int tid;
} worker_arg;

static void run_share(tern_pool *p, int tid) {
    size_t n = p->n, g = p->grain ? p->grain : 1;
    size_t units = (n + g - 1) / g;
    size_t T = (size_t)p->nthreads;
    if (p->guided) {
        /* Each grab takes half of an equal share of what is left (at least one unit): long contiguous runs
         * first, small ones at the end, so the threads finish within one small run of each other. */
        for (;;) {
            size_t b = atomic_load_explicit(&p->next, memory_order_relaxed), take;
            do {
                if (b >= units)
                    return;
                take = (units - b) / (2 * T);
                take = take ? take : 1;
            } while (!atomic_compare_exchange_weak(&p->next, &b, b + take));
            size_t e = (b + take) * g;
            p->fn(p->ctx, b * g, e < n ? e : n, tid);
        }
    }
    size_t b = units * (size_t)tid / T * g, e = units * ((size_t)tid + 1) / T * g;
    if (e > n)
        e = n;
    if (b < e)
        p->fn(p->ctx, b, e, tid);
}

static void *worker_main(void *argp) {
    worker_arg a = *(worker_arg *)argp;
    free(argp);
    tern_pool *p = a.pool;
    unsigned seen = 0; /* the generation at creation; a job may already be posted */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) {
                CPU_RELAX();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        run_share(p, a.tid);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

int tern_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

tern_err *tern_pool_create(int nthreads, tern_pool **out) {
    *out = NULL;
    if (nthreads <= 0)
        nthreads = tern_cpu_count();
    if (nthreads > 1024)
        return tern_errf(TERN_EINVAL, "thread count %d is out of range (1..1024)", nthreads);
    tern_pool *p = calloc(1, sizeof *p);
    if (!p)
        return tern_errf(TERN_ENOMEM, "out of memory creating thread pool");
    p->nthreads = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)nthreads, sizeof(pthread_t));
    if (!p->threads) {
        tern_pool_destroy(p);
        return tern_errf(TERN_ENOMEM, "out of memory creating thread pool");
    }
    for (int i = 1; i < nthreads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a) {
            a->pool = p;
            a->tid = i;
        }
        if (!a || pthread_create(&p->threads[i], NULL, worker_main, a) != 0) {
            free(a);
            p->nthreads = i; /* join only those started */
            tern_pool_destroy(p);
            return tern_errf(TERN_EIO, "cannot start worker thread %d", i);
        }
    }
    *out = p;
    return NULL;
}

void tern_pool_destroy(tern_pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    if (p->threads)
        for (int i = 1; i < p->nthreads; i++)
            pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int tern_pool_size(const tern_pool *p) { return p ? p->nthreads : 1; }

static void parallel(tern_pool *p, size_t n, size_t grain, int guided, tern_range_fn fn, void *ctx) {
    if (n == 0)
        return;
    if (!p || p->nthreads == 1 || n <= (grain ? grain : 1)) {
        fn(ctx, 0, n, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    p->guided = guided;
    atomic_store(&p->next, 0);
    atomic_store(&p->pending, p->nthreads - 1);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_share(p, 0);
    /* Spin while the workers are likely running; then yield, so an oversubscribed machine (other processes
     * on the cores) lets a descheduled worker finish instead of burning its time slice. */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < SPIN_ITERS)
            CPU_RELAX();
        else
            sched_yield();
    }
}

void tern_pool_parallel_for(tern_pool *p, size_t n, size_t grain, tern_range_fn fn, void *ctx) {
    parallel(p, n, grain, 0, fn, ctx);
}

void tern_pool_parallel_guided(tern_pool *p, size_t n, size_t grain, tern_range_fn fn, void *ctx) {
    parallel(p, n, grain, 1, fn, ctx);
}
