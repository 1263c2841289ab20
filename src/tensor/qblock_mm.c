/* qblock_mm.c — work split of the block-quantized product (see qblock_mm.h). */
#include "tensor/qblock_mm.h"

#include "core/alloc.h"

/* Rows per unit of work, and tokens per pass over them: a tile of rows stays in L1/L2 while a run of tokens'
 * activation blocks streams past it (16 rows of a 2048-wide Q8_0 matrix are 35 KB; 32 tokens of it 70 KB). */
#define QB_ROWS 16
#define QB_TOKENS 32

typedef struct qb_job {
    const tern_qblock_kernels *k;
    const tern_weight *w;
    int64_t row0, n_out, T, in;
    const float *x;
    uint8_t *act;
    size_t wrow, arow;
    float *y;
} qb_job;

static void quantize_range(void *ctx, size_t b, size_t e, int tid) {
    const qb_job *j = ctx;
    (void)tid;
    const tern_qblock act = tern_qblock_act(j->w->qblock);
    for (size_t t = b; t < e; t++)
        j->k->quantize(act, j->x + (int64_t)t * j->in, j->act + t * j->arow, j->in);
}

static void rows_range(void *ctx, size_t b, size_t e, int tid) {
    const qb_job *j = ctx;
    (void)tid;
    const uint8_t *base = (const uint8_t *)j->w->data + (size_t)j->row0 * j->wrow;
    for (int64_t t0 = 0; t0 < j->T; t0 += QB_TOKENS) {
        const int64_t t1 = t0 + QB_TOKENS < j->T ? t0 + QB_TOKENS : j->T;
        for (size_t r = b; r < e; r++)
            for (int64_t t = t0; t < t1; t++)
                j->y[t * j->n_out + (int64_t)r] =
                    j->k->dot(j->w->qblock, j->in, base + r * j->wrow, j->act + (size_t)t * j->arow);
    }
}

int tern_qblock_matmul(tern_pool *pool, const tern_qblock_kernels *k, const tern_weight *w, int64_t row0,
                       int64_t n_out, const float *x, int64_t T, float *y) {
    const int64_t in = tern_weight_cols(w);
    qb_job j = {k, w, row0, n_out, T, in, x, NULL, tern_qblock_row_bytes(w->qblock, in),
                tern_qblock_row_bytes(tern_qblock_act(w->qblock), in), y};
    if (!(j.act = tern_aligned_alloc(j.arow * (size_t)T, TERN_ALIGN)))
        return -1;
    tern_pool_parallel_for(pool, (size_t)T, 1, quantize_range, &j);
    tern_pool_parallel_for(pool, (size_t)n_out, QB_ROWS, rows_range, &j);
    tern_aligned_free(j.act);
    return 0;
}

const tern_qblock_kernels tern_qblock_portable = {tern_qblock_quantize_ref, tern_qblock_dot_ref};
