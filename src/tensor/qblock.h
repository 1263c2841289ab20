/* qblock.h — ggml's block-quantized formats (the weights of GGUF files): their byte layouts, dequantization,
 * the activation blocks their dot products take, and the portable definition of those dot products.
 *
 * A row of n values is n / elems(t) blocks stored back to back. Every format's dot product multiplies a weight
 * row with an activation row quantized to the format's partner (tern_qblock_act): Q8_0 for Q4_0, Q5_0 and Q8_0,
 * Q8_1 for Q4_1 and Q5_1, Q8_K for the K-quants, exactly as ggml's CPU backend does, so a GGUF file gives the
 * numbers llama.cpp gives. Sums are exact in integers per lane — lane l (of 8) of a 32-value chunk holds its
 * products 4l .. 4l+3, times the sub-block scale for the K-quants — and combine in float per lane, block by block,
 * in ggml's x86 arrangement:
 *     Q4_0/Q5_0/Q8_0:  acc[l] = fma(dw * da, isum[l], acc[l])
 *     Q4_1/Q5_1:       the same, and mins += mw * sa;                               result hsum(acc) + mins
 *     Q4_K/Q5_K:       acc[l] = fma(da * dw, isum[l], acc[l]),
 *                      accm[c] = fma(-da * dmin, m_2c bsum_2c + m_2c+1 bsum_2c+1, accm[c]);  + hsum(accm)
 *     Q6_K:            acc[l] = fma(da * dw, isum[l], acc[l])
 * with hsum over 8 lanes (l0+l4 + l2+l6) + (l1+l5 + l3+l7) and over 4 (a0+a2) + (a1+a3); dw, mw, dmin are the
 * stored f16 values, da, sa the activation block's. The SIMD kernels give these floats bit for bit. */
#ifndef TERN_TENSOR_QBLOCK_H
#define TERN_TENSOR_QBLOCK_H

#include <stddef.h>
#include <stdint.h>

typedef enum tern_qblock {
    TERN_QB_NONE = 0,
    TERN_QB_Q4_0, /* 32 values: f16 d, 16 bytes of 4-bit codes; v = d (q - 8) */
    TERN_QB_Q4_1, /* 32 values: f16 d, f16 m, 4-bit codes; v = d q + m */
    TERN_QB_Q5_0, /* 32 values: f16 d, 32 high bits, 4-bit low codes; v = d (q - 16) */
    TERN_QB_Q5_1, /* 32 values: f16 d, f16 m, high bits, low codes; v = d q + m */
    TERN_QB_Q8_0, /* 32 values: f16 d, 32 signed bytes; v = d q */
    TERN_QB_Q4_K, /* 256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 4-bit codes */
    TERN_QB_Q5_K, /* 256 values: as Q4_K plus 32 bytes of high bits */
    TERN_QB_Q6_K, /* 256 values: 4-bit low codes, 2-bit high codes, 16 signed 8-bit scales, f16 d */
    TERN_QB_Q8_1, /* activations: f16 d, f16 s = d * sum q, 32 signed bytes */
    TERN_QB_Q8_K, /* activations: f32 d, 256 signed bytes, 16 sums of 16 codes (i16) */
    TERN_QB_COUNT
} tern_qblock;

/* Values per block (32 or 256; 0 for NONE). */
int tern_qblock_elems(tern_qblock t);
/* Bytes per block. */
size_t tern_qblock_bytes(tern_qblock t);
/* Bytes of a row of n values (n a multiple of the block). */
static inline size_t tern_qblock_row_bytes(tern_qblock t, int64_t n) {
    return (size_t)(n / tern_qblock_elems(t)) * tern_qblock_bytes(t);
}
/* The activation format a weight format's dot product takes. */
tern_qblock tern_qblock_act(tern_qblock t);
/* ggml's name ("q4_0", "q6_K", ...). */
const char *tern_qblock_name(tern_qblock t);

/* out[n] = the values of the row at src (n a multiple of the block), exactly as ggml dequantizes them. */
void tern_qblock_dequantize(tern_qblock t, const void *src, float *out, int64_t n);
/* Quantizes x[n] into activation blocks of format act (Q8_0, Q8_1 or Q8_K) as ggml's x86 CPU backend does:
 * Q8_0/Q8_1 step amax / 127 (stored f16), codes round-to-nearest-even(x * (127 / amax)); Q8_K step -max / 127
 * for the value of largest magnitude, codes rounded likewise and capped at 127. Every SIMD quantizer gives these
 * bytes. */
void tern_qblock_quantize_ref(tern_qblock act, const float *x, void *dst, int64_t n);
/* The dot product of a weight row w of format t with the activation row a (tern_qblock_act(t)), n values. */
float tern_qblock_dot_ref(tern_qblock t, int64_t n, const void *w, const void *a);

/* The 256 codes of a K-quant block (Q4_K, Q5_K, Q6_K) in value order: unsigned 4/5-bit for Q4_K/Q5_K (scaled per
 * 32 with a min), signed 6-bit (offset 32 removed) for Q6_K (scaled per 16). */
void tern_qblock_k_codes(tern_qblock t, const uint8_t *b, int8_t code[256]);
/* A K-quant block's 6-bit scale and min of sub-block j (0..7) from its 12 packed bytes. */
static inline void tern_qblock_k4_scale(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

#endif
