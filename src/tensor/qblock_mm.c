/* qblock_mm.c — work split of the block-quantized product (see qblock_mm.h). */
#include "tensor/qblock_mm.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/half.h"

/* Rows per unit of work, and tokens per pass over a thread's rows: on the per-row path a row stays in L1 while a
 * run of tokens' activation blocks streams past it (32 tokens of a 2048-wide Q8_0 row are 70 KB); the tile kernels
 * take the run of tokens against all of the thread's rows. */
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
    tern_qblock_side *side; /* T rows of in / 32 entries when the kernels have a tile for the format */
} qb_job;

static void quantize_range(void *ctx, size_t b, size_t e, int tid) {
    const qb_job *j = ctx;
    (void)tid;
    const tern_qblock act = tern_qblock_act(j->w->qblock);
    for (size_t t = b; t < e; t++) {
        j->k->quantize(act, j->x + (int64_t)t * j->in, j->act + t * j->arow, j->in);
        if (j->side)
            tern_qblock_side_fill(j->act + t * j->arow, j->in, tern_qblock_code_offset(j->w->qblock),
                                  j->side + t * (size_t)(j->in / 32));
    }
}

int tern_qblock_code_offset(tern_qblock t) {
    return t == TERN_QB_Q4_0 ? 8 : t == TERN_QB_Q5_0 ? 16 : t == TERN_QB_Q8_0 ? 128 : 0;
}

void tern_qblock_side_fill(const void *act, int64_t n, int offset, tern_qblock_side *side) {
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8_t *b = (const uint8_t *)act + i * 34;
        uint16_t h;
        memcpy(&h, b, 2);
        side[i].d = tern_f16_to_f32(h);
        for (int l = 0; l < 8; l++)
            side[i].neg_off[l] =
                -offset * ((int8_t)b[2 + 4 * l] + (int8_t)b[3 + 4 * l] + (int8_t)b[4 + 4 * l] + (int8_t)b[5 + 4 * l]);
    }
}

static void rows_range(void *ctx, size_t b, size_t e, int tid) {
    const qb_job *j = ctx;
    (void)tid;
    const uint8_t *base = (const uint8_t *)j->w->data + (size_t)j->row0 * j->wrow;
    for (int64_t t0 = 0; t0 < j->T; t0 += QB_TOKENS) {
        const int64_t t1 = t0 + QB_TOKENS < j->T ? t0 + QB_TOKENS : j->T;
        if (j->side) {
            j->k->tile(j->w->qblock, j->in, base + b * j->wrow, j->wrow, (int64_t)(e - b),
                       j->act + (size_t)t0 * j->arow, j->arow, j->side + (size_t)(t0 * (j->in / 32)), t1 - t0,
                       j->y + t0 * j->n_out + (int64_t)b, j->n_out);
            continue;
        }
        for (size_t r = b; r < e; r++) {
            int64_t t = t0;
            for (; t + 4 <= t1; t += 4) {
                float o[4];
                j->k->dot4(j->w->qblock, j->in, base + r * j->wrow, j->act + (size_t)t * j->arow, j->arow, o);
                for (int k = 0; k < 4; k++)
                    j->y[(t + k) * j->n_out + (int64_t)r] = o[k];
            }
            for (; t < t1; t++)
                j->y[t * j->n_out + (int64_t)r] =
                    j->k->dot(j->w->qblock, j->in, base + r * j->wrow, j->act + (size_t)t * j->arow);
        }
    }
}

int tern_qblock_matmul(tern_pool *pool, const tern_qblock_kernels *k, const tern_weight *w, int64_t row0,
                       int64_t n_out, const float *x, int64_t T, float *y) {
    const int64_t in = tern_weight_cols(w);
    qb_job j = {k, w, row0, n_out, T, in, x, NULL, tern_qblock_row_bytes(w->qblock, in),
                tern_qblock_row_bytes(tern_qblock_act(w->qblock), in), y, NULL};
    const int tile = k->tile_formats >> w->qblock & 1;
    if (!(j.act = tern_aligned_alloc(j.arow * (size_t)T, TERN_ALIGN)))
        return -1;
    if (tile && !(j.side = malloc(sizeof *j.side * (size_t)(T * (in / 32))))) {
        tern_aligned_free(j.act);
        return -1;
    }
    tern_pool_parallel_for(pool, (size_t)T, 1, quantize_range, &j);
    tern_pool_parallel_for(pool, (size_t)n_out, QB_ROWS, rows_range, &j);
    tern_aligned_free(j.act);
    free(j.side);
    return 0;
}

static void dot4_ref(tern_qblock t, int64_t n, const void *w, const void *a, size_t astride, float out[4]) {
    for (int k = 0; k < 4; k++)
        out[k] = tern_qblock_dot_ref(t, n, w, (const uint8_t *)a + k * astride);
}

const tern_qblock_kernels tern_qblock_portable = {tern_qblock_quantize_ref, tern_qblock_dot_ref, dot4_ref, NULL, 0};
