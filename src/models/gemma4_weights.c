/* gemma4_weights.c — the tensor list of a Gemma 4 text decoder (GEMMA4.md §1). */
#include "models/gemma4_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/quant_config.h"
#include "formats/safetensors.h"

#define LIN(out, in, ...) fail |= tern_wspec_add(&l, TERN_WK_LINEAR, 1, 2, out, in, 0, __VA_ARGS__)
#define NORM(n, ...) fail |= tern_wspec_add(&l, TERN_WK_NORM, 1, 1, n, 0, 0, __VA_ARGS__)

tern_err *tern_gemma4_specs(const tern_gemma4_config *c, tern_layout layout, tern_wspec **specs, size_t *n) {
    tern_wspec_list l = {0};
    int fail = 0;
    const int64_t H = c->hidden_size, N = c->num_hidden_layers, P = c->hidden_size_per_layer_input;
    const int64_t nH = c->num_attention_heads;
    fail |= tern_wspec_add(&l, TERN_WK_EMBED, 1, 2, c->vocab_size, H, 0, "embed_tokens");
    if (!fail)
        l.v[l.n - 1].head = 1; /* tied */
    if (P > 0) {
        fail |= tern_wspec_add(&l, TERN_WK_EMBED, 1, 2, c->vocab_size_per_layer_input, N * P, 0, "embed_tokens_per_layer");
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
            fail |= tern_wspec_add(&l, TERN_WK_SCALE, 0, 1, H, 0, 0, "layers.%d.router.scale", i);
            fail |= tern_wspec_add(&l, TERN_WK_SCALE, 0, 1, E, 0, 0, "layers.%d.router.per_expert_scale", i);
            if (layout == TERN_LAYOUT_HF && !c->experts_split) {
                fail |= tern_wspec_add(&l, TERN_WK_EXPERTS, 0, 3, E, 2 * I, H, "layers.%d.experts.gate_up_proj", i);
                fail |= tern_wspec_add(&l, TERN_WK_EXPERTS, 0, 3, E, H, I, "layers.%d.experts.down_proj", i);
            } else {
                fail |= tern_wspec_add(&l, TERN_WK_EXPERTS, 1, 3, E, I, H, "layers.%d.experts.switch_glu.gate_proj", i);
                fail |= tern_wspec_add(&l, TERN_WK_EXPERTS, 1, 3, E, I, H, "layers.%d.experts.switch_glu.up_proj", i);
                fail |= tern_wspec_add(&l, TERN_WK_EXPERTS, 1, 3, E, H, I, "layers.%d.experts.switch_glu.down_proj", i);
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
        fail |= tern_wspec_add(&l, TERN_WK_SCALE, 0, 1, 1, 0, 0, "layers.%d.layer_scalar", i);
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

tern_err *tern_gemma4_bind(const tern_gemma4_config *c, const tern_quant_config *qc, const tern_checkpoint *ck,
                           tern_weights **out) {
    *out = NULL;
    tern_layout layout = TERN_LAYOUT_HF;
    for (int l = 0; l < TERN_LAYOUT_COUNT; l++) {
        char probe[128];
        snprintf(probe, sizeof probe, "%sembed_tokens.weight", tern_layout_prefix((tern_layout)l));
        if (tern_checkpoint_find(ck, probe)) {
            layout = (tern_layout)l;
            break;
        }
    }
    tern_wspec *specs;
    size_t n;
    TERN_TRY(tern_gemma4_specs(c, layout, &specs, &n));
    TERN_TRY(tern_weights_bind(specs, n, layout, qc, ck, out));
    /* The K/V tensors of KV-shared layers are stored by some converters and read by nobody: say so. */
    tern_weights *w = *out;
    for (size_t i = 0; i < w->n_extra; i++) {
        const char *e = w->extra[i];
        if (!strstr(e, "self_attn.k_proj") && !strstr(e, "self_attn.v_proj") && !strstr(e, "self_attn.k_norm"))
            continue;
        static const char note[] = " (ignored: KV-shared layer)";
        char *x = realloc(w->extra[i], strlen(e) + sizeof note);
        if (!x)
            continue; /* the note is lost, the name stays */
        strcat(x, note);
        w->extra[i] = x;
    }
    return NULL;
}

const tern_weight *tern_gemma4_weight(const tern_weights *gw, const char *fmt, int layer) {
    char name[128];
    snprintf(name, sizeof name, fmt, layer);
    const tern_weight *w = tern_weights_find(gw, name);
    return w && w->fmt != TERN_WF_NONE ? w : NULL;
}

/* A small float vector (norm weight, scalar) converted once to f32, kept with the weights. */
static const float *floats(tern_weights *gw, const char *fmt, int layer) {
    char name[128];
    snprintf(name, sizeof name, fmt, layer);
    return tern_weights_floats(gw, name);
}

tern_err *tern_gemma4_layer_bind(tern_weights *gw, const tern_gemma4_config *c, int i, tern_gemma4_layer *L) {
#define W(fmt) tern_gemma4_weight(gw, fmt, i)
#define V(fmt) floats(gw, fmt, i)
    memset(L, 0, sizeof *L);
    L->type = c->layer_types[i];
    L->cache = tern_gemma4_kv_source(c, i);
    L->owns_cache = L->cache == i;
    L->k_eq_v = c->attention_k_eq_v && L->type == TERN_LAYER_FULL;
    L->hd = tern_gemma4_layer_head_dim(c, i);
    L->kvh = tern_gemma4_layer_kv_heads(c, i);
    L->ffn = tern_gemma4_layer_ffn(c, i);
    L->q = W("layers.%d.self_attn.q_proj");
    L->k = W("layers.%d.self_attn.k_proj");
    L->v = W("layers.%d.self_attn.v_proj");
    L->o = W("layers.%d.self_attn.o_proj");
    L->gate = W("layers.%d.mlp.gate_proj");
    L->up = W("layers.%d.mlp.up_proj");
    L->down = W("layers.%d.mlp.down_proj");
    L->input_norm = V("layers.%d.input_layernorm");
    L->post_attn_norm = V("layers.%d.post_attention_layernorm");
    L->pre_ff_norm = V("layers.%d.pre_feedforward_layernorm");
    L->post_ff_norm = V("layers.%d.post_feedforward_layernorm");
    L->q_norm = V("layers.%d.self_attn.q_norm");
    L->k_norm = L->owns_cache ? V("layers.%d.self_attn.k_norm") : NULL;
    const float *ls = V("layers.%d.layer_scalar");
    L->layer_scalar = ls ? ls[0] : 1.0f;
    if (c->hidden_size_per_layer_input > 0) {
        L->pl_gate = W("layers.%d.per_layer_input_gate");
        L->pl_proj = W("layers.%d.per_layer_projection");
        L->pl_norm = V("layers.%d.post_per_layer_input_norm");
    }
    if (c->enable_moe_block) {
        L->router = W("layers.%d.router.proj");
        L->router_scale = V("layers.%d.router.scale");
        L->per_expert_scale = V("layers.%d.router.per_expert_scale");
        L->exp_gate_up = W("layers.%d.experts.gate_up_proj");
        L->exp_gate = W("layers.%d.experts.switch_glu.gate_proj");
        L->exp_up = W("layers.%d.experts.switch_glu.up_proj");
        L->exp_down = W("layers.%d.experts.down_proj");
        if (!L->exp_down)
            L->exp_down = W("layers.%d.experts.switch_glu.down_proj");
        L->pre_ff2_norm = V("layers.%d.pre_feedforward_layernorm_2");
        L->post_ff1_norm = V("layers.%d.post_feedforward_layernorm_1");
        L->post_ff2_norm = V("layers.%d.post_feedforward_layernorm_2");
    }
#undef W
#undef V
    int ok = L->q && L->o && L->gate && L->up && L->down && L->input_norm && L->post_attn_norm && L->pre_ff_norm &&
             L->post_ff_norm && L->q_norm;
    if (L->owns_cache)
        ok = ok && L->k && L->k_norm && (L->k_eq_v || L->v);
    if (c->enable_moe_block)
        ok = ok && L->router && L->router_scale && L->per_expert_scale && L->exp_down &&
             (L->exp_gate_up || (L->exp_gate && L->exp_up)) && L->pre_ff2_norm && L->post_ff1_norm && L->post_ff2_norm;
    return ok ? NULL : tern_errf(TERN_ENOMEM, "layer %d: out of memory binding weights", i);
}
