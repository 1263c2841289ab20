/* weight.c — weight descriptions. */
#include "tensor/weight.h"

#include <stdio.h>

const char *tern_wformat_describe(const tern_weight *w, char *buf, int len) {
    switch (w->fmt) {
    case TERN_WF_NONE: snprintf(buf, (size_t)len, "absent"); break;
    case TERN_WF_F32: snprintf(buf, (size_t)len, "f32"); break;
    case TERN_WF_F16: snprintf(buf, (size_t)len, "f16"); break;
    case TERN_WF_BF16: snprintf(buf, (size_t)len, "bf16"); break;
    case TERN_WF_MLX_AFFINE: snprintf(buf, (size_t)len, "q%d/%d", w->bits, w->group); break;
    case TERN_WF_MXFP4: snprintf(buf, (size_t)len, "mxfp4"); break;
    }
    return buf;
}
