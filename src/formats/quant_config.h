/* quant_config.h — the `quantization` section of an MLX checkpoint's config.json: the global bits / group size /
 * mode, per-module overrides (an object of parameters, or false for "kept in float"), and the fallback that
 * infers bits and group size from tensor shapes when the config has no entry.
 *
 * Semantics follow mlx-lm's loader (GEMMA4.md §6):
 *   - "quantization" is read first; if absent, "quantization_config" (MLX writes the same content under both);
 *     if neither is at the top level, text_config's copy. A Hugging Face style section that names a
 *     "quant_method" is accepted for "mxfp4" (group 32, 4 bits) and refused otherwise.
 *   - Global keys: "bits", "group_size", "mode" ("affine" default, or "mxfp4"); a missing bits/group_size takes
 *     the mode's default (affine: 4 bits, group 64; mxfp4: 4 bits, group 32).
 *   - Every other key is a module path. Its value is an object of the same three keys (missing ones take the
 *     defaults of its own mode, not the global values: MLX passes the object straight to to_quantized), false
 *     (the module stays in float) or true (the global parameters).
 *   - Whether a module is quantized at all is decided by the presence of "<path>.scales" among the tensors;
 *     a lookup of a module without an entry returns the global parameters. */
#ifndef TERN_FORMATS_QUANT_CONFIG_H
#define TERN_FORMATS_QUANT_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

enum { TERN_QMODE_AFFINE = 0, TERN_QMODE_MXFP4 = 1 };

typedef struct tern_quant_params {
    int quantized;  /* 0: the module is stored in float (no section, or an override of false) */
    int bits;       /* 2,3,4,5,6,8 (affine) or 4 (mxfp4); 0 when not quantized */
    int group_size; /* values per scale: a power of two >= 8 (affine) or 32 (mxfp4); 0 when not quantized */
    int mode;       /* TERN_QMODE_AFFINE or TERN_QMODE_MXFP4 */
} tern_quant_params;

typedef struct tern_quant_config tern_quant_config;

/* Parses the quantization section of a config.json root object into *out (a config with quantized = 0 when
 * there is none); errors name the key ("quantization: \"bits\" = 7 is not supported ..."). */
TERN_MUST_CHECK tern_err *tern_quant_config_parse(const json_t *config_root, tern_quant_config **out);

/* Parameters for a module path (tensor name without ".weight"): an override with exactly this path first, then
 * one whose path differs only in the leading prefix ("language_model.model.X", "model.language_model.X",
 * "language_model.X", "model.X" and "X" all name X; the first such entry in file order wins), else the global
 * parameters. NULL or an absent section gives quantized = 0. */
tern_quant_params tern_quant_config_lookup(const tern_quant_config *qc, const char *module_path);

/* 1 if the config had a quantization section, else 0 (also for NULL). */
int tern_quant_config_present(const tern_quant_config *qc);

/* Number of per-module entries (overrides) the section held. */
size_t tern_quant_config_override_count(const tern_quant_config *qc);

/* "affine" or "mxfp4" ("?" otherwise). */
const char *tern_quant_mode_name(int mode);

/* Frees a config; NULL is fine. */
void tern_quant_config_free(tern_quant_config *qc);

/* Fallback for a module that has ".scales" but no config entry (affine only): bits = 32*weight_cols_u32/in and
 * group = in/scale_cols, both required to divide exactly and to pass tern_mlx_check. */
TERN_MUST_CHECK tern_err *tern_quant_infer(int64_t in, int64_t weight_cols_u32, int64_t scale_cols, int *bits, int *group);

#endif
