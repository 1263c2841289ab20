/* weight.h — a weight matrix as the kernels see it: logical float shape plus how it is
 * stored (f32/f16/bf16 rows, MLX affine / mxfp4 packed rows with group scales, or ggml blocks). The
 * data points straight into the mmapped checkpoint; nothing is copied at load time. */
#ifndef TERN_TENSOR_WEIGHT_H
#define TERN_TENSOR_WEIGHT_H

#include <stdint.h>

#include "tensor/dtype.h"
#include "tensor/qblock.h"

typedef enum tern_wformat {
    TERN_WF_NONE = 0, /* absent */
    TERN_WF_F32,
    TERN_WF_F16,
    TERN_WF_BF16,
    TERN_WF_MLX_AFFINE, /* u32 packed rows, scales + biases per group */
    TERN_WF_MXFP4,      /* u32 packed FP4 rows, u8 E8M0 scales per 32 */
    TERN_WF_QBLOCK      /* ggml block-quantized rows (GGUF), format in qblock */
} tern_wformat;

typedef struct tern_weight {
    tern_wformat fmt;
    int ndim;
    int64_t shape[3];   /* logical shape: [out, in], [E, out, in] for experts, [n] for vectors */
    const void *data;   /* float elements, or packed u32 rows */
    const void *scales; /* quantized formats: [rows, in/group] */
    const void *biases; /* affine only */
    tern_dtype sdtype;  /* dtype of scales and biases */
    int bits, group;
    tern_qblock qblock; /* TERN_WF_QBLOCK: the block format */
    const char *name;   /* stored tensor name (for messages) */
    const struct tern_qpack *qpack; /* optional copy repacked for the int8 kernels (qpack.h), owned by the loader */
} tern_weight;

/* Number of logical rows (product of all but the last dim) and columns (last dim). */
static inline int64_t tern_weight_rows(const tern_weight *w) {
    int64_t r = 1;
    for (int i = 0; i + 1 < w->ndim; i++)
        r *= w->shape[i];
    return r;
}
static inline int64_t tern_weight_cols(const tern_weight *w) { return w->ndim ? w->shape[w->ndim - 1] : 1; }

/* Bytes the stored weight occupies (data plus scales and biases). */
uint64_t tern_weight_bytes(const tern_weight *w);
/* Loads every page of w's stored data now (tern_mmap_prefault): for tables read a row at a time. */
void tern_weight_prefault(const tern_weight *w);
/* Short name of a format ("bf16", "q4/64", ...) written into buf. */
const char *tern_wformat_describe(const tern_weight *w, char *buf, int len);

#endif
