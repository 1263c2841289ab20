/* ckpt_write.h — writing a Gemma 4 checkpoint's weights from a row source.
 *
 * Each tensor of the spec list is stored in a float dtype or MLX-quantized (weight/scales/biases) as
 * the quantization config says for its module; tensors with larger elements come first so every
 * tensor's data stays aligned; files are sharded above a size limit. `tern synth` (random rows) and
 * `tern quantize` (rows of an existing checkpoint) both write through here. Memory stays bounded:
 * rows are produced one at a time (a quantized tensor is produced twice: codes, then scales). */
#ifndef TERN_MODELS_CKPT_WRITE_H
#define TERN_MODELS_CKPT_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4_weights.h"

/* One tensor of the architecture and how it is stored (1 stored tensor, or 3 when quantized). */
typedef struct tern_out_tensor {
    const tern_wspec *spec;
    int quantized, bits, group; /* MLX affine parameters when quantized */
    tern_st_spec parts[3];
    char names[3][160];
} tern_out_tensor;

/* A tensor copied byte for byte (e.g. an audio tower next to the text decoder). */
typedef struct tern_raw_tensor {
    tern_st_spec spec;
    const void *data;
} tern_raw_tensor;

/* Fills row `row` (flattened over leading dims) of tensor `index` with f32 values. */
typedef tern_err *(*tern_row_fn)(void *ctx, size_t index, int64_t row, float *out);

/* Plans one tensor in `layout`: quantized when qc says so for its module and its width allows, else stored as
 * float_dtype; scales and biases in scale_dtype. */
void tern_ckpt_plan(tern_out_tensor *t, const tern_wspec *spec, tern_layout layout, const tern_quant_config *qc,
                    tern_dtype float_dtype, tern_dtype scale_dtype);
/* Writes the planned tensors (rows from `row`) and the raw ones into dir. */
TERN_MUST_CHECK tern_err *tern_ckpt_write(const char *dir, const tern_out_tensor *ts, size_t n, const tern_raw_tensor *raw,
                          size_t n_raw, tern_row_fn row, void *ctx, uint64_t shard_bytes, const char *format);

#endif
