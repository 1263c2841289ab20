/* decoder.h — the frame every decoder-only family runs its layers in, so that a family's file says only what its
 * layers compute:
 *
 *   tern_dec_begin    the batch checked against the KV cache, its rows expanded to tokens (sequence, position,
 *                     which kernels serve them, what each wants back), the activation buffers carved from the
 *                     cache's work area, the sequences marked written
 *   ...               the family's embedding and layers, multiplying with tern_dec_mm and timing with
 *                     tern_dec_mark
 *   tern_dec_finish   the final-normed hidden states and the LM head's logits (soft-capped) of the tokens that
 *                     want them, the profile's pass counted, a product that ran out of memory reported
 *
 * Activations are f32, [T][width] row-major, T counting the tokens of all rows of the batch concatenated. */
#ifndef TERN_MODELS_DECODER_H
#define TERN_MODELS_DECODER_H

#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "models/batch.h"
#include "models/weights.h"
#include "tensor/ops.h"

/* One forward pass in the frame. */
typedef struct tern_dec {
    tern_kv *kv;
    tern_pool *pool;
    int64_t T;          /* tokens of the batch */
    int *tok_seq;       /* [T] KV sequence of each token */
    int64_t *tok_pos;   /* [T] absolute position of each token */
    uint8_t *tok_kind;  /* [T] tern_mm_kind: prompt tokens take the throughput kernels, generated ones the latency
                         * kernels */
    uint8_t *want;      /* [T] TERN_WANT_* of each token */
    const tern_tok_span *tok_span; /* [T] or NULL: tern_batch.spans (the batch's own array) */
    int failed;         /* a product ran out of scratch memory: the pass's results are not to be used */
    tern_lm_profile *prof; /* or NULL */
    double t_mark;      /* profiling: when the current phase began */
} tern_dec;

/* An activation buffer of a pass: per_token floats for each token plus `fixed` floats (a row of per_token 0 and
 * fixed 0 still gets one float per token). */
typedef struct tern_dec_buf {
    float **at; /* where tern_dec_begin puts its address (may be NULL when only sizing) */
    int64_t per_token, fixed;
} tern_dec_buf;

/* Bytes the buffers take for T tokens (each rounded to whole cache lines): what the pass asks of tern_kv_work. */
uint64_t tern_dec_work_bytes(const tern_dec_buf *bufs, int n_bufs, int64_t T);

/* Checks b against kv (sequences in range and apart, positions at most committed and within what ring layers
 * keep, the context, the ring's chunk limit, ids inside [0, vocab) where no embedding is given) and sets up D for
 * its tokens: buffers zeroed in the cache's work area, each *bufs[i].at set, the sequences marked written, the
 * profile's clock started. On an error nothing is left to free. */
TERN_MUST_CHECK tern_err *tern_dec_begin(tern_dec *D, tern_kv *kv, tern_pool *pool, const tern_batch *b, int64_t vocab,
                         const tern_dec_buf *bufs, int n_bufs, tern_lm_profile *prof);

/* Profiling: charges the time since the last mark to phase ph, and the bytes of the product s (or NULL) that ran
 * in it. */
void tern_dec_mark(tern_dec *D, tern_phase ph, const tern_product *s);

/* ys[i] = x W_i^T for the product's matrices over n tokens of the given kinds, one product per run of tokens of one
 * kind; given a gate, x is first rewritten as gate(x, mul) (a gated MLP's activation, formed by the product's own
 * input pass). `next` is the product multiplied after this one (a hint that lets its memory
 * stream start early), or NULL. Returns -1 when a product ran out of scratch memory. */
int tern_dec_mm_runs(tern_pool *pool, const tern_product *s, float *x, tern_gate_fn gate, const float *mul,
                     float *const *ys, const uint8_t *kind, int64_t n, const tern_product *next);
/* The same over the pass's T tokens; a failure is kept in D->failed. */
void tern_dec_mm(tern_dec *D, const tern_product *s, float *x, float *const *ys, const tern_product *next);

/* y[r] = rmsnorm(x[r]) * w for rows of n, over the pool (y may be x). */
void tern_dec_rmsnorm_rows(tern_pool *pool, const float *x, const float *w, int64_t rows, int64_t n, float eps,
                           float *y);

/* out [T][nH * hd] = each token's attention with its query q [T][nH * hd] over the positions of its sequence held
 * in cache layer `cache` up to its own (the last `window` of them when window > 0) — with `both_ways`, and all of the
 * span it lies in where the batch gives one (tern_batch.spans). With fewer tokens than threads a token's
 * work is shared out (its two spans of positions, its query heads); results do not depend on the split. */
void tern_dec_attend(tern_dec *D, int cache, const float *q, int64_t nH, int64_t kvh, int64_t hd, int64_t window,
                     int both_ways, float *out);

/* The end of a pass. */
typedef struct tern_dec_head {
    const float *final_norm;  /* [hidden] */
    float eps;
    int64_t hidden, vocab;
    const tern_weight *head;  /* [vocab, hidden]: the LM head (or the tied embedding) */
    float softcap;            /* logits = softcap * tanh(logits / softcap) when > 0 */
} tern_dec_head;

/* Writes hidden [n_hidden][hidden] = the final-normed rows of x [T][hidden] of the tokens wanting them, and logits
 * [n_logits][vocab] = the head over the final-normed rows of those wanting logits (normed into scratch [T][hidden]
 * first); either output may be NULL. Then counts the pass in the profile and frees D; the error says when a
 * product ran out of memory (its results would be wrong, so none are given). */
TERN_MUST_CHECK tern_err *tern_dec_finish(tern_dec *D, const tern_dec_head *h, const float *x, float *scratch, float *logits,
                          float *hidden);

#endif
