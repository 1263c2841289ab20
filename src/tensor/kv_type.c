/* kv_type.c — KV cache element formats: names, sizes, storing and loading rows (see kv_type.h). */
#include "tensor/kv_type.h"

#include <math.h>
#include <string.h>

#include "tensor/qblock.h"

static const char *const NAMES[TERN_KV_TYPE_COUNT] = {
    [TERN_KV_BF16] = "bf16", [TERN_KV_F16] = "f16", [TERN_KV_F32] = "f32", [TERN_KV_Q8_0] = "q8_0",
    [TERN_KV_Q4_0] = "q4_0",
};

tern_err *tern_kv_type_parse(const char *name, tern_kv_type *out) {
    for (int t = 0; t < TERN_KV_TYPE_COUNT; t++)
        if (name && !strcmp(name, NAMES[t])) {
            *out = (tern_kv_type)t;
            return NULL;
        }
    return tern_errf(TERN_EINVAL, "unknown KV cache type \"%s\" (bf16, f16, f32, q8_0 or q4_0)", name ? name : "");
}

const char *tern_kv_type_name(tern_kv_type t) { return t >= 0 && t < TERN_KV_TYPE_COUNT ? NAMES[t] : "?"; }

int64_t tern_kv_type_block(tern_kv_type t) { return t == TERN_KV_Q8_0 || t == TERN_KV_Q4_0 ? 32 : 1; }

/* ggml's quantize_row_q4_0_ref: the step is the value of largest magnitude over -8 (so that value gets code 0),
 * codes truncate x / d + 8.5 and cap at 15 (clamped in float first, so no value converts out of range). */
static inline int code_q4(float v) {
    v += 8.5f;
    return v >= 15.0f ? 15 : v >= 0.0f ? (int)v : 0;
}

static void store_q4_0(const float *x, uint8_t *o, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32, o += 18) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax)
                amax = fabsf(x[j]), max = x[j];
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = tern_f32_to_f16(d);
        memcpy(o, &dh, 2);
        for (int j = 0; j < 16; j++)
            o[2 + j] = (uint8_t)(code_q4(x[j] * id) | code_q4(x[j + 16] * id) << 4);
    }
}

void tern_kv_type_store(tern_kv_type t, const float *x, void *dst, int64_t n) {
    switch (t) {
    case TERN_KV_F32: memcpy(dst, x, (size_t)n * 4); break;
    case TERN_KV_F16: tern_f32_to_f16_row(x, dst, (size_t)n); break;
    case TERN_KV_Q8_0: tern_qblock_quantize_ref(TERN_QB_Q8_0, x, dst, n); break;
    case TERN_KV_Q4_0: store_q4_0(x, dst, n); break;
    default: tern_f32_to_bf16_row(x, dst, (size_t)n); break;
    }
}

void tern_kv_type_load(tern_kv_type t, const void *src, float *out, int64_t n) {
    switch (t) {
    case TERN_KV_F32: memcpy(out, src, (size_t)n * 4); break;
    case TERN_KV_F16: tern_f16_to_f32_row(src, out, (size_t)n); break;
    case TERN_KV_Q8_0: tern_qblock_dequantize(TERN_QB_Q8_0, src, out, n); break;
    case TERN_KV_Q4_0: tern_qblock_dequantize(TERN_QB_Q4_0, src, out, n); break;
    default: tern_bf16_to_f32_row(src, out, (size_t)n); break;
    }
}
