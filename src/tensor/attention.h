/* attention.h — scaled-dot-product attention of one query token over a run of cached positions.
 *
 * K and V are read in place from the KV cache: rows of kv_heads * head_dim elements (bf16 or f32), position
 * p at slot p % slots. Query head h uses KV head h / (n_heads / kv_heads); each K and V row is read once for
 * all the query heads sharing it. The score scale is 1.0 (Gemma 4 folds it into q_norm/k_norm). */
#ifndef TERN_TENSOR_ATTENTION_H
#define TERN_TENSOR_ATTENTION_H

#include <stdint.h>

#include "tensor/dtype.h"

typedef struct tern_attn_args {
    const float *q;       /* [n_heads][head_dim] */
    int64_t n_heads, kv_heads, head_dim;
    const void *k, *v;    /* cache rows of one sequence and layer */
    tern_dtype dtype;     /* TERN_DT_BF16 or TERN_DT_F32 */
    int64_t slots;
    int64_t start, end;   /* positions start..end inclusive */
    float *scores;        /* scratch [n_heads][end - start + 1] */
    float *out;           /* [n_heads][head_dim] */
} tern_attn_args;

/* out = softmax(q . K^T) V per head, on the active ISA. */
void tern_attend(const tern_attn_args *a);
/* The portable implementation (the reference the SIMD path is tested against). */
void tern_attend_portable(const tern_attn_args *a);

#endif
