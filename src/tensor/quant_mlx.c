/* quant_mlx.c — MLX affine group quantization and mxfp4: bit packing, reference dequantization and an
 * exact re-implementation of MLX's affine quantizer.
 *
 * MLX has two affine quantizers that agree except in two corners. Its GPU kernels (Metal `affine_quantize`,
 * mirrored by the CUDA one) produced the published mlx-community checkpoints, so they are the ones followed here:
 * codes and q0 are rounded half away from zero (round), and the running max starts at 0. The CPU backend instead
 * rounds half to even (rint) and starts the max at -inf, so an all-negative group gets a different grid.
 *
 * Every bit width is handled as one LSB-first bit stream over the row's uint32 words: for 2/4/8 bits this is
 * the same thing as "word c holds elements c*(32/b)+j at bit j*b", and for 3/5/6 bits it is the byte-wise
 * packing MLX writes (8 values in 3 or 5 bytes, 4 six-bit values in 3 bytes) read on a little-endian host. */
#include "tensor/quant_mlx.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/half.h"

/* ---------------------------------------------------------------- validation */

static int is_supported_bits(int bits) {
    return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}

tern_err *tern_mlx_check(int bits, int group, int64_t in) {
    if (!is_supported_bits(bits))
        return tern_errf(TERN_EUNSUPPORTED, "quantization bits = %d is not supported (expected 2, 3, 4, 5, 6 or 8)",
                         bits);
    /* MLX itself only writes 32, 64 and 128; other powers of two cost nothing to support. The upper bound keeps
     * every later product of group sizes far from overflow. */
    if (group < 8 || group > (1 << 20) || (group & (group - 1)) != 0)
        return tern_errf(TERN_EUNSUPPORTED,
                         "quantization group_size = %d is not supported (expected 32, 64 or 128, or another power of "
                         "two >= 8)",
                         group);
    if (in <= 0)
        return tern_errf(TERN_EFORMAT, "quantized input size %lld must be positive", (long long)in);
    if (in % group != 0)
        return tern_errf(TERN_EFORMAT, "quantized input size %lld is not a multiple of group_size %d", (long long)in,
                         group);
    /* in*bits % 32 without forming in*bits (which could overflow for absurd sizes). */
    if (((in % 32) * bits) % 32 != 0)
        return tern_errf(TERN_EFORMAT, "quantized input size %lld at %d bits does not fill whole uint32 words",
                         (long long)in, bits);
    return NULL;
}

int64_t tern_mlx_row_words(int64_t in, int bits) {
    /* floor(in*bits/32) without forming in*bits, which could overflow where the result does not. */
    return (in / 32) * bits + (in % 32) * bits / 32;
}

/* ---------------------------------------------------------------- bit access */

uint32_t tern_mlx_get(const uint32_t *row, int bits, int64_t k) {
    uint64_t bit = (uint64_t)k * (uint64_t)bits;
    uint64_t word = bit >> 5;
    unsigned off = (unsigned)(bit & 31u);
    uint64_t v = row[word] >> off;
    if (off + (unsigned)bits > 32u) /* the value straddles into the next word (3/5/6 bits only) */
        v |= (uint64_t)row[word + 1] << (32u - off);
    return (uint32_t)(v & ((1u << bits) - 1u));
}

void tern_mlx_pack_row(const uint8_t *q, int64_t in, int bits, uint32_t *row) {
    /* Round up: a row whose last word is only partly used (never the case for a checked triple) starts clean. */
    int64_t words = tern_mlx_row_words(in, bits) + ((in % 32) * bits % 32 != 0);
    memset(row, 0, (size_t)words * sizeof *row);
    uint32_t mask = (1u << bits) - 1u;
    for (int64_t k = 0; k < in; k++) {
        uint64_t bit = (uint64_t)k * (uint64_t)bits;
        uint64_t word = bit >> 5;
        unsigned off = (unsigned)(bit & 31u);
        uint32_t v = q[k] & mask;
        row[word] |= v << off;
        if (off + (unsigned)bits > 32u)
            row[word + 1] |= v >> (32u - off);
    }
}

/* Reads consecutive values from a packed row: a 64-bit window refilled one word at a time, so a value that
 * straddles two words is assembled without a second branch, and no word past the row is ever read (a refill
 * happens only when the next value still has bits in the row). */
typedef struct bit_reader {
    const uint32_t *src;
    uint64_t window;
    unsigned avail; /* valid bits in window */
    unsigned bits;
    uint32_t mask;
} bit_reader;

static inline void bit_reader_init(bit_reader *r, const uint32_t *row, int bits) {
    r->src = row;
    r->window = 0;
    r->avail = 0;
    r->bits = (unsigned)bits;
    r->mask = (1u << bits) - 1u;
}

static inline uint32_t bit_reader_next(bit_reader *r) {
    if (r->avail < r->bits) {
        uint32_t w; /* memcpy: rows in a mmapped file need not be 4-byte aligned */
        memcpy(&w, r->src++, sizeof w);
        r->window |= (uint64_t)w << r->avail;
        r->avail += 32;
    }
    uint32_t v = (uint32_t)r->window & r->mask;
    r->window >>= r->bits;
    r->avail -= r->bits;
    return v;
}

void tern_mlx_unpack_row(const uint32_t *row, int64_t in, int bits, uint8_t *q) {
    bit_reader r;
    bit_reader_init(&r, row, bits);
    for (int64_t k = 0; k < in; k++)
        q[k] = (uint8_t)bit_reader_next(&r);
}

/* ---------------------------------------------------------------- scales */

/* memcpy because mmapped tensors need not be aligned. */
float tern_mlx_scale(const void *p, tern_dtype dt, int64_t i) {
    const unsigned char *b = p;
    switch (dt) {
    case TERN_DT_F32: {
        float f;
        memcpy(&f, b + 4 * i, 4);
        return f;
    }
    case TERN_DT_BF16: {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        return tern_bf16_to_f32(h);
    }
    case TERN_DT_F16: {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        return tern_f16_to_f32(h);
    }
    default:
        assert(!"scale dtype must be F32, BF16 or F16");
        return 0.0f;
    }
}

static inline void store_scale(void *p, tern_dtype dt, int64_t i, float v) {
    unsigned char *b = p;
    uint16_t h;
    switch (dt) {
    case TERN_DT_F32:
        memcpy(b + 4 * i, &v, 4);
        break;
    case TERN_DT_BF16:
        h = tern_f32_to_bf16(v);
        memcpy(b + 2 * i, &h, 2);
        break;
    case TERN_DT_F16:
        h = tern_f32_to_f16(v);
        memcpy(b + 2 * i, &h, 2);
        break;
    default:
        assert(!"scale dtype must be F32, BF16 or F16");
        break;
    }
}

/* ---------------------------------------------------------------- affine dequantize / quantize */

void tern_mlx_dequantize_row(const uint32_t *row, const void *scales, const void *biases, tern_dtype sdt, int bits,
                             int group, int64_t in, float *out) {
    bit_reader r;
    bit_reader_init(&r, row, bits);
    int64_t groups = in / group;
    for (int64_t g = 0; g < groups; g++) {
        float s = tern_mlx_scale(scales, sdt, g);
        float b = tern_mlx_scale(biases, sdt, g);
        float *o = out + g * group;
        for (int j = 0; j < group; j++) {
            float sq = s * (float)bit_reader_next(&r); /* rounded separately, as MLX's scale*q + bias */
            o[j] = sq + b;
        }
    }
}

void tern_mlx_quantize_row(const float *x, int64_t in, int bits, int group, tern_dtype sdt, uint32_t *row,
                           void *scales, void *biases) {
    const float n_bins = (float)((1 << bits) - 1);
    const float eps = 1e-7f;
    int64_t groups = in / group;
    enum { chunk = 256 }; /* codes are packed 256 at a time: 256*bits is a whole number of words */
    uint8_t q[chunk];
    uint32_t *dst = row;

    /* Per group, (scale, bias) are computed in f32 and the codes use those f32 values; only the stored copies
     * are rounded to sdt, which is MLX's order of operations. */
    int fill = 0;
    for (int64_t g = 0; g < groups; g++) {
        const float *xg = x + g * group;
        /* The running max starts at 0, not -inf, as in MLX's GPU kernels: the grid of an all-negative group
         * therefore reaches up to 0. fminf/fmaxf skip NaNs, like Metal's min/max. */
        float w_min = INFINITY, w_max = 0.0f;
        for (int j = 0; j < group; j++) {
            w_min = fminf(w_min, xg[j]);
            w_max = fmaxf(w_max, xg[j]);
        }
        /* The edge with the larger magnitude becomes the bias (code 0) and the scale takes the sign that makes
         * the codes of the other values positive; the scale is then nudged so edge/scale is a whole number, so
         * 0.0 is the grid point of code -q0 — a valid code, hence exactly representable, unless every value of
         * the group is positive. */
        int side = fabsf(w_min) > fabsf(w_max);
        float scale = fmaxf((w_max - w_min) / n_bins, eps);
        scale = side ? scale : -scale;
        float edge = side ? w_min : w_max;
        float q0 = roundf(edge / scale); /* round half away from zero, as Metal's round() */
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        for (int j = 0; j < group; j++) {
            float c = roundf((xg[j] - bias) / scale);
            /* Metal's float->uint8 conversion saturates negatives (and NaN) to 0; clamp explicitly instead of an
             * undefined C conversion. */
            c = c > 0.0f ? c : 0.0f;
            c = c < n_bins ? c : n_bins;
            q[fill++] = (uint8_t)c;
            if (fill == chunk) {
                tern_mlx_pack_row(q, chunk, bits, dst);
                dst += tern_mlx_row_words(chunk, bits);
                fill = 0;
            }
        }
        store_scale(scales, sdt, g, scale);
        store_scale(biases, sdt, g, bias);
    }
    if (fill > 0)
        tern_mlx_pack_row(q, fill, bits, dst); /* fill = in % 256, and in*bits fills whole words, so does fill*bits */
}

/* ---------------------------------------------------------------- mxfp4 */

static const float fp4_e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float tern_fp4_to_f32(uint8_t code) { return fp4_e2m1_values[code & 15u]; }

float tern_e8m0_to_f32(uint8_t s) {
    /* An f32 with exponent field s and zero mantissa is 2^(s-127); s = 255 lands on +Inf. s = 0 would be +0, so
     * it is the subnormal 2^-127 instead (mantissa MSB set), as MLX decodes it. */
    uint32_t u = s ? (uint32_t)s << 23 : 0x00400000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void tern_mxfp4_dequantize_row(const uint32_t *row, const uint8_t *scales, int64_t in, float *out) {
    for (int64_t g = 0; g < in / 32; g++) {
        float s = tern_e8m0_to_f32(scales[g]);
        const uint32_t *w = row + g * 4; /* 32 codes = 4 words */
        float *o = out + g * 32;
        for (int c = 0; c < 4; c++) {
            uint32_t word = w[c];
            for (int j = 0; j < 8; j++)
                o[c * 8 + j] = s * fp4_e2m1_values[(word >> (4 * j)) & 15u];
        }
    }
}
