/* attention.c — attention of one query token (see attention.h); portable path and dispatch. */
#include "tensor/attention.h"

#include <string.h>

#include "core/half.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

static float elem(const void *base, tern_dtype dt, int64_t i) {
    return dt == TERN_DT_F32 ? ((const float *)base)[i] : tern_bf16_to_f32(((const uint16_t *)base)[i]);
}

void tern_attend_portable(const tern_attn_args *a) {
    const int64_t hd = a->head_dim, group = a->n_heads / a->kv_heads, row = a->kv_heads * hd;
    const int64_t n = a->end - a->start + 1;
    for (int64_t j = 0; j < n; j++) {
        const int64_t slot = (a->start + j) % a->slots;
        for (int64_t h = 0; h < a->n_heads; h++) {
            const int64_t off = slot * row + (h / group) * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; d++)
                s += a->q[h * hd + d] * elem(a->k, a->dtype, off + d);
            a->scores[h * n + j] = s;
        }
    }
    for (int64_t h = 0; h < a->n_heads; h++)
        tern_softmax(a->scores + h * n, n);
    memset(a->out, 0, (size_t)(a->n_heads * hd) * sizeof(float));
    for (int64_t j = 0; j < n; j++) {
        const int64_t slot = (a->start + j) % a->slots;
        for (int64_t h = 0; h < a->n_heads; h++) {
            const int64_t off = slot * row + (h / group) * hd;
            const float p = a->scores[h * n + j];
            for (int64_t d = 0; d < hd; d++)
                a->out[h * hd + d] += p * elem(a->v, a->dtype, off + d);
        }
    }
}

void tern_attend(const tern_attn_args *a) {
    if (tern_isa_active() == TERN_ISA_AVX512 && a->head_dim % 16 == 0 && a->n_heads / a->kv_heads <= 16) {
        tern_attend_avx512(a);
        return;
    }
    if (tern_isa_active() == TERN_ISA_AVX2 && a->head_dim % 8 == 0 && 8 % (a->n_heads / a->kv_heads) == 0) {
        tern_attend_avx2(a);
        return;
    }
    tern_attend_portable(a);
}
