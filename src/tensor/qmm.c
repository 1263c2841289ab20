/* qmm.c — work split of the int8 product (see qmm.h). */
#include "tensor/qmm.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "tensor/kernels.h"
#include "tensor/qblock_mm.h"

#define QMM_MAX_PARTS TERN_QMM_MAX_SLABS
/* Bytes of a thread's run requested before it starts when several tokens share the pass: their kernels
 * prefetch ahead of themselves, so without it the start of every run would wait on memory. (Single-token passes
 * leave the stream to the hardware prefetchers.) */
#define QMM_RUN_PREFETCH 4096
/* Bytes of each thread's share of the next group requested at the end of its share of this one (2 KiB measured
 * 2 points of bandwidth better than none over the e2b-shaped sequence at ~37 GB/s; 8 KiB into L2 the same). */
#define QMM_NEXT_PREFETCH 2048

/* Up to 4 matrices sharing one input (q/k/v, gate/up) run as one parallel region over their row blocks laid
 * end to end: one activation quantization, one wake-up, and the threads balance over all the blocks. */
typedef struct qmm_job {
    const tern_qmm_kernels *k;
    int n;
    const tern_weight *w[QMM_MAX_PARTS];
    float *y[QMM_MAX_PARTS];
    int64_t row0[QMM_MAX_PARTS], n_out[QMM_MAX_PARTS];
    int64_t start[QMM_MAX_PARTS + 1]; /* first virtual block of each part */
    tern_qact *a[QMM_MAX_PARTS];      /* each part's activation codes (parts reading one input share them) */
    tern_qact *acts;                  /* the n_acts distinct ones: filled in the first region, read in the second */
    const float *const *xs;           /* [n_acts] their inputs */
    const int64_t *fill_start;        /* [n_acts + 1] first quantization unit (group) of each */
    int n_acts;
    float *gated;     /* the one input itself when it is gate(x, mul), formed before quantizing; else NULL */
    const float *mul;
    tern_gate_fn gate;
    size_t threads;
    const tern_weight *const *next; /* the group multiplied next (its packed copies), or NULL */
    int n_next;
    int failed; /* a worker lacked scratch memory */
} qmm_job;

/* Requests `bytes` of pk's packed blocks from block blk on (no further than its last block), piece by piece: the
 * blocks may lie in several runs. */
static void request_blocks(const tern_qpack *pk, int64_t blk, size_t bytes) {
    const size_t left = (size_t)(pk->blocks - blk) * pk->block_bytes;
    for (size_t off = 0; off < bytes && off < left; off += 64)
        __builtin_prefetch(tern_qpack_block_data(pk, blk + (int64_t)(off / pk->block_bytes)) + off % pk->block_bytes);
}

/* Bytes of packed blocks taken together against every tile of tokens: they stay in L2 while each tile's
 * activations, read from L2 once per run of blocks, stay in L1 across the run, and each token's results come
 * out as one contiguous run per tile. (Every block against all tokens before the next, as before, stored
 * each 64-byte result to a line and page of its own, and the stores took ~20% of a 512-token product.) */
#define QMM_RUN_BYTES (384 * 1024)

/* Blocks [b, e) of part p, in runs of QMM_RUN_BYTES: each from the weight's packed copy when its rows line up
 * with it, else packed here (weights loaded without a packed copy, or slabs starting mid-block). */
static void qmm_part(const qmm_job *j, int p, int64_t b, int64_t e) {
    const tern_weight *w = j->w[p];
    const tern_qpack *pk = w->qpack;
    const tern_qact *a = j->a[p];
    const int64_t n_out = j->n_out[p];
    const tern_qpack_form f = tern_qpack_form_of(w);
    const size_t gb = tern_qpack_group_bytes(f), bb = tern_qpack_block_bytes(w);
    const int direct = pk && j->row0[p] % 16 == 0;
    const int64_t per_run = bb < QMM_RUN_BYTES ? (int64_t)(QMM_RUN_BYTES / bb) : 1;
    uint8_t *own = NULL;
    if (!direct && !(own = tern_aligned_alloc(bb * (size_t)(e - b < per_run ? e - b : per_run), TERN_ALIGN))) {
        tern_job_fail(&j->failed);
        return;
    }
    const size_t run = (size_t)(e - b) * bb;
    if (direct && a->T > 1)
        request_blocks(pk, j->row0[p] / 16 + b, run < QMM_RUN_PREFETCH ? run : QMM_RUN_PREFETCH);
    for (int64_t r0 = b; r0 < e; r0 += per_run) {
        const int64_t r1 = r0 + per_run < e ? r0 + per_run : e;
        for (int64_t blk = r0; !direct && blk < r1; blk++)
            tern_qpack_block(w, j->row0[p] + blk * 16, own + (size_t)(blk - r0) * bb);
        for (int64_t t0 = 0; t0 < a->T; t0 += TERN_QACT_TILE) {
            /* Whole tiles two blocks at a time where the kernels pair them, but for the blocks' first tile: it
             * streams them from memory, and the one-block tile's requests ahead keep that stream going (a batch of
             * 8 rows decoding, one tile, lost 5-10% paired). */
            const int pairs = j->k->tile_pair && t0 > 0 && a->T - t0 >= TERN_QACT_TILE;
            for (int64_t blk = r0; blk < r1;) {
                const uint8_t *src =
                    direct ? tern_qpack_block_data(pk, j->row0[p] / 16 + blk) : own + (size_t)(blk - r0) * bb;
                float *y = j->y[p] + t0 * n_out + blk * 16;
                const int64_t valid = n_out - blk * 16 < 16 ? n_out - blk * 16 : 16;
                if (pairs && blk + 1 < r1) {
                    const uint8_t *src1 = direct ? tern_qpack_block_data(pk, j->row0[p] / 16 + blk + 1) : src + bb;
                    const int64_t valid1 = n_out - blk * 16 - 16 < 16 ? n_out - blk * 16 - 16 : 16;
                    j->k->tile_pair(src, src1, a, t0, f.bits, f.sdtype, gb, y, y + 16, n_out, (int)valid, (int)valid1);
                    blk += 2;
                } else {
                    j->k->tile(src, a, t0, t0 == 0, f.bits, f.sdtype, gb, y, n_out, (int)valid);
                    blk++;
                }
            }
        }
    }
    tern_aligned_free(own);
}

/* The first QMM_NEXT_PREFETCH bytes of thread tid's share of the next group (tern_pool_share: where the pool's
 * balanced split starts it), requested while the other threads finish this one. */
static void prefetch_next(const qmm_job *j, int tid) {
    int64_t units = 0;
    for (int p = 0; p < j->n_next; p++) {
        if (!j->next[p]->qpack)
            return;
        units += j->next[p]->qpack->blocks;
    }
    size_t lo, hi;
    tern_pool_share((size_t)units, (size_t)tid, j->threads, &lo, &hi);
    int64_t blk = (int64_t)lo;
    for (int p = 0; p < j->n_next; p++, blk -= j->next[p - 1]->qpack->blocks)
        if (blk < j->next[p]->qpack->blocks) {
            request_blocks(j->next[p]->qpack, blk, QMM_NEXT_PREFETCH);
            return;
        }
}

static void qmm_range(void *ctx, size_t b, size_t e, int tid) {
    const qmm_job *j = ctx;
    for (int p = 0; p < j->n; p++) {
        const int64_t lo = (int64_t)b > j->start[p] ? (int64_t)b : j->start[p];
        const int64_t hi = (int64_t)e < j->start[p + 1] ? (int64_t)e : j->start[p + 1];
        if (lo < hi)
            qmm_part(j, p, lo - j->start[p], hi - j->start[p]);
    }
    /* The end of this thread's own share (it may still take from the others'). */
    size_t lo, hi;
    tern_pool_share((size_t)j->start[j->n], (size_t)tid, j->threads, &lo, &hi);
    if (j->n_next > 0 && e == hi)
        prefetch_next(j, tid);
}

int tern_qmm_takes_form(const tern_qmm_kernels *k, tern_qpack_form f) {
    if (f.origin == TERN_QPACK_Q4K)
        return k && k->q4k;
    if (f.origin == TERN_QPACK_Q6K)
        return k && k->q6k && tern_cpu_vbmi();
    return 1;
}

/* Units [u0, u1) of a (ggml_steps 2) as ggml's Q8_K blocks: each block of 256 values whose first group lies in the
 * range, quantized whole (ng is a multiple of the groups a block holds). */
static void fill_q8k(tern_qact *a, const float *x, int64_t u0, int64_t u1) {
    const int64_t G = a->group, ng = a->in / G, per = 256 / G;
    _Alignas(64) uint8_t blk[292];
    for (int64_t n = (u0 + per - 1) / per * per; n < u1; n += per) {
        tern_kernels()->qblock->quantize(TERN_QB_Q8_K, x + n * G, blk, 256);
        tern_qact_set_q8_k(a, n / ng, n % ng / per, blk);
    }
}

/* Quantization units [b, e): the groups of the distinct inputs laid end to end. */
static void fill_range(void *ctx, size_t b, size_t e, int tid) {
    const qmm_job *j = ctx;
    (void)tid;
    for (int i = 0; i < j->n_acts; i++) {
        const int64_t lo = (int64_t)b > j->fill_start[i] ? (int64_t)b : j->fill_start[i];
        const int64_t hi = (int64_t)e < j->fill_start[i + 1] ? (int64_t)e : j->fill_start[i + 1];
        if (lo >= hi)
            continue;
        tern_qact *a = &j->acts[i];
        const int64_t u0 = lo - j->fill_start[i], u1 = hi - j->fill_start[i];
        if (j->gated) { /* units [u0, u1) are the contiguous floats [u0 * group, u1 * group) */
            const size_t G = (size_t)a->group;
            j->gate(j->gated + (size_t)u0 * G, j->mul + (size_t)u0 * G, (int64_t)((size_t)(u1 - u0) * G));
        }
        (a->ggml_steps == 2 ? fill_q8k : a->ggml_steps ? j->k->fill_ggml : j->k->fill)(a, j->xs[i], u0, u1);
    }
}

/* The activation codes' memory, kept by each calling thread and grown as needed: a forward pass makes hundreds of
 * products, and fresh pages for each (a prompt's codes are megabytes, allocated from and returned to the system)
 * were faulted in and zeroed by the kernel every time. Freed when the thread ends. */
typedef struct act_arena {
    void *p;
    size_t cap;
} act_arena;
static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static int arena_ok;

static void arena_free(void *v) {
    act_arena *a = v;
    tern_aligned_free(a->p);
    free(a);
}

static void arena_init(void) { arena_ok = pthread_key_create(&arena_key, arena_free) == 0; }

static void *arena_get(size_t bytes) {
    pthread_once(&arena_once, arena_init);
    if (!arena_ok)
        return NULL;
    act_arena *a = pthread_getspecific(arena_key);
    if (!a) {
        if (!(a = calloc(1, sizeof *a)))
            return NULL;
        if (pthread_setspecific(arena_key, a)) {
            free(a);
            return NULL;
        }
    }
    if (a->cap < bytes) {
        void *p = tern_aligned_alloc(bytes + bytes / 4, TERN_ALIGN);
        if (!p)
            return NULL;
        tern_aligned_free(a->p);
        a->p = p;
        a->cap = bytes + bytes / 4;
    }
    return a->p;
}

/* The parts (at most QMM_MAX_PARTS, alike in width, group and origin) in one quantization region and one product
 * region; parts reading the same input (x and T) share its codes. */
static int run(tern_pool *pool, const tern_qmm_kernels *k, const tern_qmm_part *parts, int n, float *gated,
               const float *mul, tern_gate_fn gate, const tern_weight *const *next, int n_next) {
    if (n < 1 || n > QMM_MAX_PARTS)
        return 0;
    const tern_weight *w0 = parts[0].w;
    const int64_t in = tern_weight_cols(w0);
    qmm_job j = {.k = k, .n = n, .gated = gated, .mul = mul, .gate = gate, .threads = (size_t)tern_pool_size(pool),
                 .next = next, .n_next = next ? n_next : 0};
    const tern_qpack_form f0 = tern_qpack_form_of(w0);
    if (!tern_qmm_takes_form(k, f0))
        return 0;
    for (int p = 0; p < n; p++) {
        const tern_weight *w = parts[p].w;
        const tern_qpack_form f = tern_qpack_form_of(w);
        if (!f.bits || f.group != f0.group || tern_weight_cols(w) != in || f.origin != f0.origin)
            return 0;
        j.w[p] = w;
        j.y[p] = parts[p].y;
        j.row0[p] = parts[p].row0;
        j.n_out[p] = parts[p].n_out;
        j.start[p + 1] = j.start[p] + (parts[p].n_out + 15) / 16;
    }
    /* The distinct inputs: a part shares the codes of an earlier part with its input. */
    int slot[QMM_MAX_PARTS];
    tern_qact acts[QMM_MAX_PARTS];
    const float *xs[QMM_MAX_PARTS];
    int64_t fill_start[QMM_MAX_PARTS + 1];
    int64_t act_T[QMM_MAX_PARTS];
    size_t off[QMM_MAX_PARTS + 1] = {0};
    j.acts = acts;
    j.xs = xs;
    j.fill_start = fill_start;
    for (int p = 0; p < n; p++) {
        slot[p] = -1;
        for (int q = 0; q < p && slot[p] < 0; q++)
            if (parts[q].x == parts[p].x && parts[q].T == parts[p].T)
                slot[p] = slot[q];
        if (slot[p] >= 0)
            continue;
        slot[p] = j.n_acts;
        off[j.n_acts + 1] = off[j.n_acts] + tern_qact_bytes(parts[p].T, in, f0.group);
        act_T[j.n_acts] = parts[p].T;
        xs[j.n_acts++] = parts[p].x;
    }
    uint8_t *mem = arena_get(off[j.n_acts]);
    const int ok = mem != NULL;
    for (int i = 0; ok && i < j.n_acts; i++) {
        tern_qact_place(&acts[i], act_T[i], in, f0.group, mem + off[i]);
        /* weights from ggml blocks meet the activation codes llama.cpp gives them */
        acts[i].ggml_steps = f0.origin == TERN_QPACK_GGML32 ? 1 : f0.origin == TERN_QPACK_MLX ? 0 : 2;
    }
    int rc = -1;
    if (ok) {
        for (int p = 0; p < n; p++)
            j.a[p] = &j.acts[slot[p]];
        fill_start[0] = 0;
        for (int i = 0; i < j.n_acts; i++)
            fill_start[i + 1] = fill_start[i] + acts[i].T * (in / f0.group);
        /* Quantization split in one equal run per thread, unless the runs would be under 32 groups (one token of
         * a narrow product): then the calling thread does it alone. Runs of whole Q8_K blocks (8 or 16 groups). */
        const size_t groups = (size_t)fill_start[j.n_acts], per = ((groups + j.threads - 1) / j.threads + 15) / 16 * 16;
        tern_pool_parallel_for(pool, groups, per < 32 ? groups : per, fill_range, &j);
        tern_pool_parallel_balanced(pool, (size_t)j.start[n], 1, qmm_range, &j);
        rc = j.failed ? -1 : 1;
    }
    return rc;
}

/* The parts of a call whose matrices share one input. */
static int run_shared(tern_pool *pool, const tern_qmm_kernels *k, const tern_weight *const *ws, const int64_t *row0s,
                      const int64_t *n_outs, int n, const float *x, float *gated, const float *mul,
                      tern_gate_fn gate, int64_t T, float *const *ys, const tern_weight *const *next, int n_next) {
    tern_qmm_part parts[4];
    if (n < 1 || n > 4)
        return 0;
    for (int p = 0; p < n; p++)
        parts[p] = (tern_qmm_part){ws[p], row0s[p], n_outs[p], x, T, ys[p]};
    return run(pool, k, parts, n, gated, mul, gate, next, n_next);
}

int tern_qmm_run_parts(tern_pool *pool, const tern_qmm_kernels *k, const tern_qmm_part *parts, int n) {
    return run(pool, k, parts, n, NULL, NULL, NULL, NULL, 0);
}

int tern_qmm_run(tern_pool *pool, const tern_qmm_kernels *k, const tern_weight *const *ws, const int64_t *row0s,
                 const int64_t *n_outs, int n, const float *x, int64_t T, float *const *ys,
                 const tern_weight *const *next, int n_next) {
    return run_shared(pool, k, ws, row0s, n_outs, n, x, NULL, NULL, NULL, T, ys, next, n_next);
}

int tern_qmm_run_gated(tern_pool *pool, const tern_qmm_kernels *k, const tern_weight *const *ws, const int64_t *row0s,
                       const int64_t *n_outs, int n, float *x, const float *mul, tern_gate_fn gate, int64_t T,
                       float *const *ys, const tern_weight *const *next, int n_next) {
    return run_shared(pool, k, ws, row0s, n_outs, n, x, x, mul, gate, T, ys, next, n_next);
}
