/* gemma4_weights.h — the tensors a Gemma 4 text decoder needs (GEMMA4.md §1 "Weight names"), bound through
 * weights.h. */
#ifndef TERN_MODELS_GEMMA4_WEIGHTS_H
#define TERN_MODELS_GEMMA4_WEIGHTS_H

#include <stddef.h>

#include "core/status.h"
#include "models/gemma4_config.h"
#include "models/weights.h"

struct tern_checkpoint;
struct tern_quant_config;

/* The tensors `c` needs in `layout`, in checkpoint order; *specs is malloc'd. */
TERN_MUST_CHECK tern_err *tern_gemma4_specs(const tern_gemma4_config *c, tern_layout layout, tern_wspec **specs, size_t *n);
/* Resolves every tensor of `c` in `ck` (layout detected from the names). Problems are collected,
 * not returned as an error: the caller decides (info lists them, the loader refuses). */
TERN_MUST_CHECK tern_err *tern_gemma4_bind(const tern_gemma4_config *c, const struct tern_quant_config *qc,
                           const struct tern_checkpoint *ck, tern_weights **out);
/* The share of a layer's experts one token is routed to (top-k / experts; 0 without experts). */
static inline double tern_gemma4_expert_share(const tern_gemma4_config *c) {
    return c->enable_moe_block && c->num_experts > 0 ? (double)c->top_k_experts / (double)c->num_experts : 0;
}

#endif
