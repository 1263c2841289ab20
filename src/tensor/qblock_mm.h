/* qblock_mm.h — products over ggml block-quantized weights (qblock.h): the activations are quantized once per
 * token into the weight format's partner blocks, then every row is dotted with every token, split across a
 * thread pool. Each ISA supplies the two inner pieces. */
#ifndef TERN_TENSOR_QBLOCK_MM_H
#define TERN_TENSOR_QBLOCK_MM_H

#include <stdint.h>

#include "core/threadpool.h"
#include "tensor/qblock.h"
#include "tensor/weight.h"

typedef struct tern_qblock_kernels {
    /* x[n] as activation blocks of format act (Q8_0, Q8_1, Q8_K), byte for byte as tern_qblock_quantize_ref. */
    void (*quantize)(tern_qblock act, const float *x, void *dst, int64_t n);
    /* tern_qblock_dot_ref's block terms, added in the kernel's own order. */
    float (*dot)(tern_qblock t, int64_t n, const void *w, const void *a);
} tern_qblock_kernels;

extern const tern_qblock_kernels tern_qblock_portable, tern_qblock_avx2, tern_qblock_avx512;

/* Y[t][o] = X[t] . W[row0 + o] for t < T, o < n_out, W of format TERN_WF_QBLOCK; 0, or -1 when scratch memory
 * ran out (Y incomplete). A token's result depends only on its own activations. */
int tern_qblock_matmul(tern_pool *pool, const tern_qblock_kernels *k, const tern_weight *w, int64_t row0,
                       int64_t n_out, const float *x, int64_t T, float *y);

#endif
