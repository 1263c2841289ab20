/* attention.h — scaled-dot-product attention of one query token over a run of cached positions.
 *
 * K and V are read in place from the KV cache: rows of kv_heads * head_dim values (a KV type each), position
 * p at slot p % slots. Query head h uses KV head h / (n_heads / kv_heads); each K and V row is read once for
 * all the query heads sharing it. The score scale is 1.0 (Gemma 4 folds it into q_norm/k_norm).
 *
 * A run is cut into chunks at multiples of TERN_ATTN_CHUNK positions (bounding the scratch). Each chunk gives a
 * partial (per head: the output weighted by exp(score - chunk max), the max and the sum of the weights). A run
 * of several chunks is computed in two spans of whole chunks (the first half, rounded up, and the rest), each
 * span's partials merged in chunk order, then the two spans' merged: that is the definition every caller follows,
 * so the spans of one token can be computed apart (by two threads) with the same result.
 *
 * The query heads of each KV head can be split into `slices` equal shares run apart (by different threads):
 * every head's arithmetic is the same whichever share it is computed in, so the split does not change results. */
#ifndef TERN_TENSOR_ATTENTION_H
#define TERN_TENSOR_ATTENTION_H

#include <stdint.h>

#include "tensor/kv_type.h"

#define TERN_ATTN_CHUNK 128

typedef struct tern_attn_args {
    const float *q;       /* [n_heads][head_dim] */
    int64_t n_heads, kv_heads, head_dim;
    const void *k, *v;    /* cache rows of one sequence and layer */
    tern_kv_type k_type, v_type; /* how K and V are stored */
    int64_t slots;
    int64_t start, end;   /* positions start..end inclusive */
    int64_t slice, slices; /* the query heads computed: share `slice` of each KV head's heads cut in `slices`
                            * (0 or 1 slices: all heads); `slices` divides n_heads / kv_heads */
    float *scores;        /* scratch [n_heads][TERN_ATTN_CHUNK] */
    float *part;          /* scratch: one partial, tern_attn_part_floats() floats (tern_attend: three) */
    float *out;           /* [n_heads][head_dim] (tern_attend only) */
} tern_attn_args;

/* Floats in one partial: [n_heads][head_dim] weighted outputs, then [n_heads] maxima, then [n_heads] sums. */
int64_t tern_attn_part_floats(int64_t n_heads, int64_t head_dim);
/* Query heads per KV head in the args' slice, and the first of them for KV head g. */
int64_t tern_attn_slice_heads(const tern_attn_args *a);
int64_t tern_attn_slice_head0(const tern_attn_args *a, int64_t g);
/* offs[j] = value offset in the cache of position a->start + j's row, for every position of a chunk (in values:
 * a block type's row of n values starts at block n / 32). */
void tern_attn_rows(const tern_attn_args *a, int64_t offs[TERN_ATTN_CHUNK]);
/* Spans of the run: 1 when it lies in one chunk, else 2. */
int64_t tern_attn_spans(const tern_attn_args *a);
/* The partial of span `span` (its chunks merged in order) for the slice's heads into acc (one partial). */
void tern_attend_span(const tern_attn_args *a, int64_t span, float *acc);
/* out = the attention of the slice's heads from the partials of the run's n spans (parts[0] is overwritten). */
void tern_attn_finish(const tern_attn_args *a, float *const *parts, int64_t n);
/* out = softmax(q . K^T) V over start..end for the slice's heads: every span, merged. */
void tern_attend(const tern_attn_args *a);

#endif
