/* gemma4_weights.c — the tensor list of a Gemma 4 text decoder (GEMMA4.md §1). */
#include "models/gemma4_weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prefixes[TERN_LAYOUT_COUNT] = {"model.language_model.", "language_model.model.", "model."};
static const char *layout_names[TERN_LAYOUT_COUNT] = {"hf", "mlx-vlm", "mlx-lm"};

const char *tern_layout_prefix(tern_layout l) { return prefixes[l]; }
const char *tern_layout_name(tern_layout l) { return layout_names[l]; }

void tern_wspec_full_name(const tern_wspec *s, tern_layout layout, const char *part, char *buf, size_t len) {
    const char *prefix = s->rooted ? "" : prefixes[layout];
    if (part)
        snprintf(buf, len, "%s%s.%s", prefix, s->name, part);
    else
        snprintf(buf, len, "%s%s%s", prefix, s->name, s->suffix ? ".weight" : "");
}

typedef struct {
    tern_wspec *v;
    size_t n, cap;
} spec_list;

static int add(spec_list *l, tern_wkind kind, int suffix, int ndim, int64_t d0, int64_t d1, int64_t d2,
               const char *fmt, ...) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        tern_wspec *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    tern_wspec *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->kind = kind;
    s->suffix = suffix;
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->shape[2] = d2;
    return 0;
}

#define LIN(out, in, ...) fail |= add(&l, TERN_WK_LINEAR, 1, 2, out, in, 0, __VA_ARGS__)
#define NORM(n, ...) fail |= add(&l, TERN_WK_NORM, 1, 1, n, 0, 0, __VA_ARGS__)

tern_err *tern_gemma4_specs(const tern_gemma4_config *c, tern_layout layout, tern_wspec **specs, size_t *n) {
    spec_list l = {0};
    int fail = 0;
    const int64_t H = c->hidden_size, N = c->num_hidden_layers, P = c->hidden_size_per_layer_input;
    const int64_t nH = c->num_attention_heads;
    fail |= add(&l, TERN_WK_EMBED, 1, 2, c->vocab_size, H, 0, "embed_tokens");
    if (P > 0) {
        fail |= add(&l, TERN_WK_EMBED, 1, 2, c->vocab_size_per_layer_input, N * P, 0, "embed_tokens_per_layer");
        LIN(N * P, H, "per_layer_model_projection");
        NORM(P, "per_layer_projection_norm");
    }
    const int first_shared = tern_gemma4_first_shared(c);
    for (int i = 0; i < N; i++) {
        const int64_t hd = tern_gemma4_layer_head_dim(c, i), kvh = tern_gemma4_layer_kv_heads(c, i);
        const int owns_cache = i < first_shared;
        const int k_eq_v = c->attention_k_eq_v && c->layer_types[i] == TERN_LAYER_FULL;
        const int64_t F = tern_gemma4_layer_ffn(c, i);
        NORM(H, "layers.%d.input_layernorm", i);
        LIN(nH * hd, H, "layers.%d.self_attn.q_proj", i);
        if (owns_cache) {
            LIN(kvh * hd, H, "layers.%d.self_attn.k_proj", i);
            if (!k_eq_v)
                LIN(kvh * hd, H, "layers.%d.self_attn.v_proj", i);
        }
        LIN(H, nH * hd, "layers.%d.self_attn.o_proj", i);
        NORM(hd, "layers.%d.self_attn.q_norm", i);
        if (owns_cache)
            NORM(hd, "layers.%d.self_attn.k_norm", i);
        NORM(H, "layers.%d.post_attention_layernorm", i);
        NORM(H, "layers.%d.pre_feedforward_layernorm", i);
        NORM(H, "layers.%d.post_feedforward_layernorm", i);
        LIN(F, H, "layers.%d.mlp.gate_proj", i);
        LIN(F, H, "layers.%d.mlp.up_proj", i);
        LIN(H, F, "layers.%d.mlp.down_proj", i);
        if (c->enable_moe_block) {
            const int64_t E = c->num_experts, I = c->moe_intermediate_size;
            LIN(E, H, "layers.%d.router.proj", i);
            fail |= add(&l, TERN_WK_SCALE, 0, 1, H, 0, 0, "layers.%d.router.scale", i);
            fail |= add(&l, TERN_WK_SCALE, 0, 1, E, 0, 0, "layers.%d.router.per_expert_scale", i);
            if (layout == TERN_LAYOUT_HF && !c->experts_split) {
                fail |= add(&l, TERN_WK_EXPERTS, 0, 3, E, 2 * I, H, "layers.%d.experts.gate_up_proj", i);
                fail |= add(&l, TERN_WK_EXPERTS, 0, 3, E, H, I, "layers.%d.experts.down_proj", i);
            } else {
                fail |= add(&l, TERN_WK_EXPERTS, 1, 3, E, I, H, "layers.%d.experts.switch_glu.gate_proj", i);
                fail |= add(&l, TERN_WK_EXPERTS, 1, 3, E, I, H, "layers.%d.experts.switch_glu.up_proj", i);
                fail |= add(&l, TERN_WK_EXPERTS, 1, 3, E, H, I, "layers.%d.experts.switch_glu.down_proj", i);
            }
            NORM(H, "layers.%d.pre_feedforward_layernorm_2", i);
            NORM(H, "layers.%d.post_feedforward_layernorm_1", i);
            NORM(H, "layers.%d.post_feedforward_layernorm_2", i);
        }
        if (P > 0) {
            LIN(P, H, "layers.%d.per_layer_input_gate", i);
            LIN(H, P, "layers.%d.per_layer_projection", i);
            NORM(H, "layers.%d.post_per_layer_input_norm", i);
        }
        fail |= add(&l, TERN_WK_SCALE, 0, 1, 1, 0, 0, "layers.%d.layer_scalar", i);
    }
    NORM(H, "norm");
    if (fail) {
        free(l.v);
        return tern_errf(TERN_ENOMEM, "out of memory listing tensors");
    }
    *specs = l.v;
    *n = l.n;
    return NULL;
}

uint64_t tern_gemma4_weights_decode_bytes(const tern_gemma4_weights *w, const tern_gemma4_config *c) {
    double total = 0;
    for (size_t i = 0; i < w->n; i++) {
        const tern_wspec *s = &w->specs[i];
        if (s->kind == TERN_WK_NORM || s->kind == TERN_WK_SCALE || !strcmp(s->name, "embed_tokens_per_layer"))
            continue;
        double b = (double)tern_weight_bytes(&w->w[i]);
        if (s->kind == TERN_WK_EXPERTS)
            b *= (double)c->top_k_experts / (double)c->num_experts;
        total += b;
    }
    return (uint64_t)total;
}
