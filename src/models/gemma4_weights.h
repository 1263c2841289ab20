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
/* One decoder layer as the forward reads it: its tensors bound in a tern_weights, its norms as f32 kept there. */
typedef struct tern_gemma4_layer {
    int type;       /* tern_layer_type */
    int cache;      /* KV cache layer this layer reads (its own, or its donor's when KV-shared) */
    int owns_cache; /* computes K/V and writes them */
    int k_eq_v;     /* full layer without v_proj: v is the raw k projection */
    int64_t hd, kvh, ffn;
    const tern_weight *q, *k, *v, *o;
    const tern_weight *gate, *up, *down;
    const tern_weight *pl_gate, *pl_proj;                  /* per-layer input (PLE) */
    const tern_weight *router, *exp_gate_up, *exp_gate, *exp_up, *exp_down; /* MoE */
    const float *input_norm, *post_attn_norm, *pre_ff_norm, *post_ff_norm; /* [H] */
    const float *q_norm, *k_norm;                                         /* [hd] */
    const float *pl_norm;                                                 /* [H] */
    const float *pre_ff2_norm, *post_ff1_norm, *post_ff2_norm;            /* [H] (MoE) */
    const float *router_scale, *per_expert_scale;                         /* [H], [E] */
    float layer_scalar;
} tern_gemma4_layer;

/* A bound tensor by name (printf format over the layer index), or NULL when absent. */
const tern_weight *tern_gemma4_weight(const tern_weights *gw, const char *fmt, int layer);
/* Binds layer i of `c` from gw (bound by tern_gemma4_bind without problems): the target's decoder and the assistant
 * drafter's Q-only one alike. An error only when memory for a norm's f32 copy ran out. */
TERN_MUST_CHECK tern_err *tern_gemma4_layer_bind(tern_weights *gw, const tern_gemma4_config *c, int i,
                                                 tern_gemma4_layer *L);

/* The share of a layer's experts one token is routed to (top-k / experts; 0 without experts). */
static inline double tern_gemma4_expert_share(const tern_gemma4_config *c) {
    return c->enable_moe_block && c->num_experts > 0 ? (double)c->top_k_experts / (double)c->num_experts : 0;
}

#endif
