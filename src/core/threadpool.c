/* threadpool.c — persistent workers; spin-then-sleep wake-up, static or balanced range split. */
#include "core/threadpool.h"

#include <assert.h>
#include <math.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/cgroup.h"

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
    int balanced;
    struct span *spans; /* balanced split: each thread's units not yet taken, [nthreads] */
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

/* A thread's remaining units [lo, hi) packed as lo | hi << 32, one cache line each (no false sharing). */
struct span {
    _Alignas(64) _Atomic uint64_t v;
};

/* Takes up to a quarter of what is left of span s (at least one unit), from the front (the owner, whose
 * runs then continue one stream) or from the back (a thief); 0 when the span is empty. */
static int take(struct span *s, int front, size_t *b, size_t *e) {
    uint64_t v = atomic_load_explicit(&s->v, memory_order_relaxed);
    for (;;) {
        const uint64_t lo = v & 0xffffffffu, hi = v >> 32;
        if (lo >= hi)
            return 0;
        uint64_t n = (hi - lo) / 4;
        n = n ? n : 1;
        const uint64_t nv = front ? (lo + n) | hi << 32 : lo | (hi - n) << 32;
        if (atomic_compare_exchange_weak(&s->v, &v, nv)) {
            *b = front ? lo : hi - n;
            *e = front ? lo + n : hi;
            return 1;
        }
    }
}

void tern_pool_share(size_t units, size_t t, size_t T, size_t *lo, size_t *hi) {
    assert(T > 0 && t < T);
    *lo = (size_t)((uint64_t)units * t / T);
    *hi = (size_t)((uint64_t)units * (t + 1) / T);
}

static void run_share(tern_pool *p, int tid) {
    size_t n = p->n, g = p->grain ? p->grain : 1;
    size_t units = (n + g - 1) / g;
    size_t T = (size_t)p->nthreads;
    if (p->balanced) {
        /* Own share first, front to back; then the others' from their backs, so the threads end together even
         * when their speed varies, and each mostly streams one contiguous run. */
        size_t b, e;
        for (size_t k = 0; k < T; k++) {
            struct span *s = &p->spans[((size_t)tid + k) % T];
            while (take(s, k == 0, &b, &e))
                p->fn(p->ctx, b * g, e * g < n ? e * g : n, tid);
        }
        return;
    }
    size_t b, e;
    tern_pool_share(units, (size_t)tid, T, &b, &e);
    b *= g;
    e = e * g < n ? e * g : n;
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

void tern_thread_lower_priority(int nice) {
    /* Linux keeps a nice value per thread: PRIO_PROCESS with the thread's own id changes only this thread. */
    const id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0)
        (void)setpriority(PRIO_PROCESS, tid, now + nice > 19 ? 19 : now + nice);
}

int tern_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    /* a container's share: the CPUs it may run on (a cpuset), and its CPU quota rounded up */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n)
        n = CPU_COUNT(&set);
    tern_cgroup_limits cg;
    tern_cgroup_self(&cg);
    if (cg.cpus > 0 && (long)ceil(cg.cpus) < n)
        n = (long)ceil(cg.cpus);
    return (int)n;
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
    p->spans = tern_aligned_calloc((size_t)nthreads, sizeof *p->spans);
    if (!p->threads || !p->spans) {
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
    tern_aligned_free(p->spans);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int tern_pool_size(const tern_pool *p) { return p ? p->nthreads : 1; }

static void parallel(tern_pool *p, size_t n, size_t grain, int balanced, tern_range_fn fn, void *ctx) {
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
    const size_t units = (n + (grain ? grain : 1) - 1) / (grain ? grain : 1);
    p->balanced = balanced && units < ((uint64_t)1 << 32);
    for (int t = 0; p->balanced && t < p->nthreads; t++) {
        size_t lo, hi;
        tern_pool_share(units, (size_t)t, (size_t)p->nthreads, &lo, &hi);
        atomic_store_explicit(&p->spans[t].v, (uint64_t)lo | (uint64_t)hi << 32, memory_order_relaxed);
    }
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

void tern_pool_parallel_balanced(tern_pool *p, size_t n, size_t grain, tern_range_fn fn, void *ctx) {
    parallel(p, n, grain, 1, fn, ctx);
}
