/* quantize.h — `tern quantize`: an MLX-format (affine, per-group) quantized checkpoint from a float one,
 * so users can quantize their own downloads. The text decoder's matrices and embeddings are quantized
 * (norms, scalars and router scales stay float, as MLX does); towers and other tensors are copied; the
 * tokenizer and template files come along. */
#ifndef TERN_MODELS_QUANTIZE_H
#define TERN_MODELS_QUANTIZE_H

#include <stdint.h>

#include "core/status.h"

/* Reads the float checkpoint in in_dir and writes out_dir with bits (4 or 8) and group (32, 64, 128). */
TERN_MUST_CHECK tern_err *tern_quantize_model(const char *in_dir, const char *out_dir, int bits, int group, uint64_t shard_bytes);

#endif
