/* qblock.c — ggml's block formats: layouts, dequantization, activation quantizers and the portable dot
 * products (see qblock.h). Blocks are byte streams: no field is assumed aligned. */
#include "tensor/qblock.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/half.h"

static const struct {
    const char *name;
    int elems;
    size_t bytes;
    tern_qblock act;
} INFO[TERN_QB_COUNT] = {
    [TERN_QB_NONE] = {"none", 0, 0, TERN_QB_NONE},
    [TERN_QB_Q4_0] = {"q4_0", 32, 18, TERN_QB_Q8_0},
    [TERN_QB_Q4_1] = {"q4_1", 32, 20, TERN_QB_Q8_1},
    [TERN_QB_Q5_0] = {"q5_0", 32, 22, TERN_QB_Q8_0},
    [TERN_QB_Q5_1] = {"q5_1", 32, 24, TERN_QB_Q8_1},
    [TERN_QB_Q8_0] = {"q8_0", 32, 34, TERN_QB_Q8_0},
    [TERN_QB_Q4_K] = {"q4_K", 256, 144, TERN_QB_Q8_K},
    [TERN_QB_Q5_K] = {"q5_K", 256, 176, TERN_QB_Q8_K},
    [TERN_QB_Q6_K] = {"q6_K", 256, 210, TERN_QB_Q8_K},
    [TERN_QB_Q8_1] = {"q8_1", 32, 36, TERN_QB_NONE},
    [TERN_QB_Q8_K] = {"q8_K", 256, 292, TERN_QB_NONE},
};

int tern_qblock_elems(tern_qblock t) { return t > 0 && t < TERN_QB_COUNT ? INFO[t].elems : 0; }
size_t tern_qblock_bytes(tern_qblock t) { return t > 0 && t < TERN_QB_COUNT ? INFO[t].bytes : 0; }
tern_qblock tern_qblock_act(tern_qblock t) { return t > 0 && t < TERN_QB_COUNT ? INFO[t].act : TERN_QB_NONE; }
const char *tern_qblock_name(tern_qblock t) { return t >= 0 && t < TERN_QB_COUNT ? INFO[t].name : "?"; }

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return tern_f16_to_f32(h);
}

/* The value codes of one block, and what scales them, in a form every format shares: code[i] for i < elems,
 * signed and offset already removed. */
static void codes_32(tern_qblock t, const uint8_t *b, int8_t code[32]) {
    switch (t) {
    case TERN_QB_Q4_0:
    case TERN_QB_Q4_1: {
        const uint8_t *qs = b + (t == TERN_QB_Q4_0 ? 2 : 4);
        const int off = t == TERN_QB_Q4_0 ? 8 : 0;
        for (int j = 0; j < 16; j++) {
            code[j] = (int8_t)((qs[j] & 0xf) - off);
            code[j + 16] = (int8_t)((qs[j] >> 4) - off);
        }
        break;
    }
    case TERN_QB_Q5_0:
    case TERN_QB_Q5_1: {
        const uint8_t *qh = b + (t == TERN_QB_Q5_0 ? 2 : 4), *qs = qh + 4;
        uint32_t h;
        memcpy(&h, qh, 4);
        const int off = t == TERN_QB_Q5_0 ? 16 : 0;
        for (int j = 0; j < 16; j++) {
            code[j] = (int8_t)(((qs[j] & 0xf) | ((h >> j) & 1) << 4) - off);
            code[j + 16] = (int8_t)(((qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4) - off);
        }
        break;
    }
    case TERN_QB_Q8_0: memcpy(code, b + 2, 32); break;
    case TERN_QB_Q8_1: memcpy(code, b + 4, 32); break;
    default: memset(code, 0, 32);
    }
}

void tern_qblock_k_codes(tern_qblock t, const uint8_t *b, int8_t code[256]) {
    if (t == TERN_QB_Q6_K) {
        const uint8_t *ql = b, *qh = b + 128;
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, k = e % 128 / 32, l = e % 32;
            const int lo = ql[h * 64 + (k & 1) * 32 + l] >> (k >= 2 ? 4 : 0) & 0xf;
            const int hi = qh[h * 32 + l] >> (2 * k) & 3;
            code[e] = (int8_t)((lo | hi << 4) - 32);
        }
        return;
    }
    const uint8_t *qs = b + (t == TERN_QB_Q4_K ? 16 : 48), *qh = b + 16;
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) {
            int q = qs[s / 2 * 32 + l] >> (s & 1 ? 4 : 0) & 0xf;
            if (t == TERN_QB_Q5_K)
                q |= (qh[l] >> s & 1) << 4;
            code[s * 32 + l] = (int8_t)q;
        }
}

void tern_qblock_dequantize(tern_qblock t, const void *src, float *out, int64_t n) {
    const int E = tern_qblock_elems(t);
    const size_t B = tern_qblock_bytes(t);
    for (int64_t i = 0; i < n / E; i++) {
        const uint8_t *b = (const uint8_t *)src + (size_t)i * B;
        float *y = out + i * E;
        if (E == 32) {
            int8_t c[32];
            codes_32(t, b, c);
            const float d = f16_at(b);
            const int has_min = t == TERN_QB_Q4_1 || t == TERN_QB_Q5_1;
            const float m = has_min ? f16_at(b + 2) : 0.0f;
            for (int j = 0; j < 32; j++)
                y[j] = has_min ? (float)c[j] * d + m : (float)c[j] * d;
            continue;
        }
        int8_t c[256];
        tern_qblock_k_codes(t, b, c);
        if (t == TERN_QB_Q6_K) {
            const float d = f16_at(b + 208);
            const int8_t *sc = (const int8_t *)(b + 192);
            for (int e = 0; e < 256; e++)
                y[e] = d * (float)sc[e / 16] * (float)c[e];
        } else if (t == TERN_QB_Q8_K) {
            float d;
            memcpy(&d, b, 4);
            for (int e = 0; e < 256; e++)
                y[e] = d * (float)(int8_t)b[4 + e];
        } else {
            const float d = f16_at(b), dmin = f16_at(b + 2);
            for (int s = 0; s < 8; s++) {
                int sc, m;
                tern_qblock_k4_scale(b + 4, s, &sc, &m);
                const float d1 = d * (float)sc, m1 = dmin * (float)m;
                for (int l = 0; l < 32; l++)
                    y[s * 32 + l] = d1 * (float)c[s * 32 + l] - m1;
            }
        }
    }
}

/* Round to nearest, ties to even, as vcvtps2dq in the default mode and ggml's nearest_int; NaN and values past
 * int's range give INT_MIN, as vcvtps2dq does (a cast would be undefined: a hostile file's weights can make NaN
 * activations). */
static inline int round_even(float v) {
    const float r = nearbyintf(v);
    return r >= -2147483648.0f && r < 2147483648.0f ? (int)r : INT_MIN;
}

/* A code saturated to int8, as the vector paths' packs saturate. */
static inline int8_t sat8(int v) { return (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v); }

void tern_qblock_quantize_ref(tern_qblock act, const float *x, void *dst, int64_t n) {
    uint8_t *o = dst;
    if (act == TERN_QB_Q8_K) {
        for (int64_t i = 0; i < n / 256; i++, x += 256, o += 292) {
            float amax = 0, max = 0;
            for (int j = 0; j < 256; j++)
                if (fabsf(x[j]) > amax)
                    amax = fabsf(x[j]), max = x[j];
            float d = 0;
            int8_t *qs = (int8_t *)(o + 4);
            memset(qs, 0, 256);
            if (amax > 0) {
                const float iscale = -127.0f / max;
                for (int j = 0; j < 256; j++)
                    qs[j] = sat8(round_even(iscale * x[j]));
                d = 1.0f / iscale;
            }
            memcpy(o, &d, 4);
            for (int g = 0; g < 16; g++) {
                int16_t s = 0;
                for (int j = 0; j < 16; j++)
                    s = (int16_t)(s + qs[g * 16 + j]);
                memcpy(o + 260 + 2 * g, &s, 2);
            }
        }
        return;
    }
    const int with_sum = act == TERN_QB_Q8_1;
    const size_t B = tern_qblock_bytes(act);
    for (int64_t i = 0; i < n / 32; i++, x += 32, o += B) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const uint16_t dh = tern_f32_to_f16(d);
        memcpy(o, &dh, 2);
        int8_t *qs = (int8_t *)(o + (with_sum ? 4 : 2));
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            qs[j] = sat8(round_even(x[j] * id));
            sum += qs[j];
        }
        if (with_sum) {
            const uint16_t sh = tern_f32_to_f16(d * (float)sum);
            memcpy(o + 2, &sh, 2);
        }
    }
}

static inline int32_t dot4_codes(const int8_t *c, const int8_t *q) {
    return c[0] * q[0] + c[1] * q[1] + c[2] * q[2] + c[3] * q[3];
}

/* ggml's horizontal sums: 8 lanes as (l0+l4 + l2+l6) + (l1+l5 + l3+l7), 4 lanes as (l0+l2) + (l1+l3). */
static float hsum8(const float l[8]) {
    const float a = l[0] + l[4], b = l[1] + l[5], c = l[2] + l[6], d = l[3] + l[7];
    return (a + c) + (b + d);
}

float tern_qblock_dot_ref(tern_qblock t, int64_t n, const void *w, const void *a) {
    /* Lane i of a 32-value chunk holds the integer sum of its products 4i .. 4i+3; each lane accumulates its
     * block terms in float, and the lanes are summed at the end (the SIMD kernels' arrangement, bit for bit). */
    const int E = tern_qblock_elems(t);
    const size_t WB = tern_qblock_bytes(t), AB = tern_qblock_bytes(tern_qblock_act(t));
    float acc[8] = {0}, accm[4] = {0}, mins = 0;
    for (int64_t i = 0; i < n / E; i++) {
        const uint8_t *wb = (const uint8_t *)w + (size_t)i * WB, *ab = (const uint8_t *)a + (size_t)i * AB;
        int32_t lane[8] = {0};
        if (E == 32) {
            int8_t c[32], q[32];
            codes_32(t, wb, c);
            codes_32(tern_qblock_act(t), ab, q);
            for (int j = 0; j < 32; j++)
                lane[j / 4] += c[j] * q[j];
            const float d = f16_at(wb) * f16_at(ab);
            for (int l = 0; l < 8; l++)
                acc[l] = fmaf(d, (float)lane[l], acc[l]);
            if (t == TERN_QB_Q4_1 || t == TERN_QB_Q5_1)
                mins += f16_at(wb + 2) * f16_at(ab + 2);
            continue;
        }
        int8_t c[256];
        tern_qblock_k_codes(t, wb, c);
        float da;
        memcpy(&da, ab, 4);
        const int8_t *q = (const int8_t *)(ab + 4);
        float dw;
        if (t == TERN_QB_Q6_K) {
            const int8_t *sc = (const int8_t *)(wb + 192);
            for (int e = 0; e < 256; e += 4)
                lane[e / 4 % 8] += sc[e / 16] * dot4_codes(c + e, q + e);
            dw = f16_at(wb + 208);
        } else {
            int32_t msum[4] = {0};
            for (int s = 0; s < 8; s++) {
                int sc, m;
                tern_qblock_k4_scale(wb + 4, s, &sc, &m);
                for (int e = 32 * s; e < 32 * s + 32; e += 4)
                    lane[e / 4 % 8] += sc * dot4_codes(c + e, q + e);
                int16_t b0, b1;
                memcpy(&b0, ab + 260 + 4 * s, 2);
                memcpy(&b1, ab + 262 + 4 * s, 2);
                msum[s / 2] += m * (b0 + b1);
            }
            const float dmin = -da * f16_at(wb + 2);
            for (int l = 0; l < 4; l++)
                accm[l] = fmaf(dmin, (float)msum[l], accm[l]);
            dw = f16_at(wb);
        }
        const float d = da * dw;
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return hsum8(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3])) + mins;
}
