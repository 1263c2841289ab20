/* weight.c — weight descriptions. */
#include "tensor/weight.h"

#include <stdio.h>

#include "core/fileio.h"
#include "tensor/quant_mlx.h"

const char *tern_wformat_describe(const tern_weight *w, char *buf, int len) {
    switch (w->fmt) {
    case TERN_WF_NONE: snprintf(buf, (size_t)len, "absent"); break;
    case TERN_WF_F32: snprintf(buf, (size_t)len, "f32"); break;
    case TERN_WF_F16: snprintf(buf, (size_t)len, "f16"); break;
    case TERN_WF_BF16: snprintf(buf, (size_t)len, "bf16"); break;
    case TERN_WF_MLX_AFFINE: snprintf(buf, (size_t)len, "q%d/%d", w->bits, w->group); break;
    case TERN_WF_MXFP4: snprintf(buf, (size_t)len, "mxfp4"); break;
    case TERN_WF_QBLOCK: snprintf(buf, (size_t)len, "%s", tern_qblock_name(w->qblock)); break;
    }
    return buf;
}

uint64_t tern_weight_bytes(const tern_weight *w) {
    uint64_t rows = (uint64_t)tern_weight_rows(w), cols = (uint64_t)tern_weight_cols(w);
    switch (w->fmt) {
    case TERN_WF_F32: return rows * cols * 4;
    case TERN_WF_F16:
    case TERN_WF_BF16: return rows * cols * 2;
    case TERN_WF_MLX_AFFINE:
        return rows * ((uint64_t)tern_mlx_row_words((int64_t)cols, w->bits) * 4 +
                       2 * (cols / (uint64_t)w->group) * tern_dtype_size(w->sdtype));
    case TERN_WF_MXFP4: return rows * (cols / 2 + cols / 32);
    case TERN_WF_QBLOCK: return rows * tern_qblock_row_bytes(w->qblock, (int64_t)cols);
    case TERN_WF_NONE: return 0;
    }
    return 0;
}

void tern_weight_prefault(const tern_weight *w) {
    const uint64_t rows = (uint64_t)tern_weight_rows(w), cols = (uint64_t)tern_weight_cols(w);
    switch (w->fmt) {
    case TERN_WF_MLX_AFFINE: {
        const uint64_t per_row = cols / (uint64_t)w->group * tern_dtype_size(w->sdtype);
        tern_mmap_prefault(w->data, (size_t)(rows * (uint64_t)tern_mlx_row_words((int64_t)cols, w->bits) * 4));
        tern_mmap_prefault(w->scales, (size_t)(rows * per_row));
        tern_mmap_prefault(w->biases, (size_t)(rows * per_row));
        break;
    }
    case TERN_WF_MXFP4:
        tern_mmap_prefault(w->data, (size_t)(rows * cols / 2));
        tern_mmap_prefault(w->scales, (size_t)(rows * cols / 32));
        break;
    case TERN_WF_NONE: break;
    default: tern_mmap_prefault(w->data, (size_t)tern_weight_bytes(w));
    }
}
