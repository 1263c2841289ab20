/* quant_mlx.h — MLX affine group quantization (2/3/4/5/6/8 bits) and mxfp4: packing, reference
 * dequantization and an exact re-implementation of MLX's affine quantizer.
 *
 * Layout (GEMMA4.md §6): a quantized matrix [out, in] is stored as `weight` U32 [out, in*bits/32]
 * plus `scales` and `biases` [out, in/group] in the model dtype (f32, bf16 or f16), and
 *     w[r, k] = scales[r, k/group] * q[r, k] + biases[r, k/group].
 * The k-th value of a row sits at bit k*bits of the row read as a little-endian, LSB-first bit
 * stream over its uint32 words. For bits 2/4/8 no value straddles a word (word c holds elements
 * c*(32/b)+j at bit offset j*b); for bits 3/5/6 values do straddle word boundaries.
 * The byte order assumed is the host's, and tern targets little-endian hosts only.
 *
 * These are the portable scalar definitions; the SIMD kernels in src/tensor/ are tested against them.
 * Callers validate shapes with tern_mlx_check before calling the row functions, which trust their
 * arguments. */
#ifndef TERN_TENSOR_QUANT_MLX_H
#define TERN_TENSOR_QUANT_MLX_H

#include <stdint.h>

#include "core/status.h"
#include "tensor/dtype.h"

/* Validates a (bits, group, in) triple: bits in {2,3,4,5,6,8}, group a power of two >= 8 (MLX writes 32, 64
 * or 128), in > 0, in % group == 0 and in*bits % 32 == 0; the error names the offending value. */
TERN_MUST_CHECK tern_err *tern_mlx_check(int bits, int group, int64_t in);

/* uint32 words per packed row of `in` values at `bits` bits: in*bits/32 (exact for a triple that passes
 * tern_mlx_check; rounded down otherwise). */
int64_t tern_mlx_row_words(int64_t in, int bits);

/* The k-th quantized value of a packed row (0 <= k < in). */
uint32_t tern_mlx_get(const uint32_t *row, int bits, int64_t k);

/* Packs `in` values q (each in [0, 2^bits); higher bits are dropped) into row[0 .. ceil(in*bits/32)). */
void tern_mlx_pack_row(const uint8_t *q, int64_t in, int bits, uint32_t *row);

/* Unpacks a row into `in` values q. */
void tern_mlx_unpack_row(const uint32_t *row, int64_t in, int bits, uint8_t *q);

/* Element i of a scale or bias vector of dtype dt (TERN_DT_F32, TERN_DT_BF16 or TERN_DT_F16), as f32. */
float tern_mlx_scale(const void *scales, tern_dtype dt, int64_t i);

/* Dequantizes one row: out[k] = scale[k/group] * q[k] + bias[k/group], computed in f32 (the product is rounded
 * before the add); scales/biases hold in/group values of dtype sdt (TERN_DT_F32, TERN_DT_BF16 or TERN_DT_F16). */
void tern_mlx_dequantize_row(const uint32_t *row, const void *scales, const void *biases, tern_dtype sdt, int bits,
                             int group, int64_t in, float *out);

/* Quantizes one row exactly as MLX's affine quantize does on the GPU (Metal/CUDA), which made the published
 * checkpoints. Per group, in f32: min over the values; max over the values and 0; scale =
 * max((max-min)/(2^bits-1), 1e-7), negated unless |min| > |max|; edge = the larger-magnitude extreme;
 * q0 = round(edge/scale); if q0 != 0 the scale becomes edge/q0 and the bias edge (so 0.0 is exactly
 * representable unless all values are positive), else the bias is 0; q = clip(round((x-bias)/scale), 0,
 * 2^bits-1), round = half away from zero. The f32 scale/bias make the codes; the stored copies are cast to sdt
 * (round to nearest even). NaN inputs are skipped by min/max and quantize to 0.
 * Error: |x - deq| <= |scale|/2 for values inside the grid; the value at the far end from the bias can be
 * clipped and then be off by up to |scale|. */
void tern_mlx_quantize_row(const float *x, int64_t in, int bits, int group, tern_dtype sdt, uint32_t *row,
                           void *scales, void *biases);

/* The value of an E8M0 scale byte: 2^(s-127) (s = 0 gives 2^-127, s = 255 gives +Inf, as MLX decodes it). */
float tern_e8m0_to_f32(uint8_t s);

/* The value of an FP4 (E2M1) code: bit 3 is the sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}. */
float tern_fp4_to_f32(uint8_t code);

/* mxfp4: dequantizes one row of FP4 codes packed 8 per uint32 like 4-bit affine (code j of a word at bit 4j),
 * with one E8M0 scale byte per group of 32 values and no biases; `in` must be a multiple of 32. */
void tern_mxfp4_dequantize_row(const uint32_t *row, const uint8_t *scales, int64_t in, float *out);

#endif
