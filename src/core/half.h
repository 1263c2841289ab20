/* half.h — bf16 and IEEE f16 <-> f32 conversion (round-to-nearest-even, NaN and Inf preserved). */
#ifndef TERN_CORE_HALF_H
#define TERN_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* bf16 bits -> f32: exact (bf16 is the top half of an f32). */
static inline float tern_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN. */
static inline uint16_t tern_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* IEEE binary16 bits -> f32 (subnormals, Inf and NaN handled). */
float tern_f16_to_f32(uint16_t h);
/* f32 -> IEEE binary16 bits, round to nearest even, overflow to Inf. */
uint16_t tern_f32_to_f16(float f);

/* Row conversions. */
void tern_bf16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void tern_f16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void tern_f32_to_bf16_row(const float *src, uint16_t *dst, size_t n);
void tern_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);

#endif
