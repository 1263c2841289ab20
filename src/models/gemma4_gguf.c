/* gemma4_gguf.c — a Gemma 4 model as llama.cpp's converter writes it to GGUF: the metadata read back into the
 * config.json Hugging Face would carry, and the tensors renamed to Hugging Face's, so that the one tensor list
 * (gemma4_weights) binds them as it binds safetensors. Tensor bytes stay in the mapped file.
 *
 * llama.cpp stores Gemma 4's norm weights as they are (no +1 shift, unlike Gemma 3), the proportional RoPE of the
 * full-attention layers as a rope_freqs tensor (1 for a rotated pair, 1e30 for the rest: the rotated share is read
 * back from it), and leaves out the K/V projections of KV-shared layers. What the metadata does not say is read
 * from the tensors, as llama.cpp reads it: full-attention layers without attn_v share K and V (attention_k_eq_v),
 * and a router (ffn_gate_inp) in every layer makes the mixture-of-experts block, its experts fused gate-up
 * (ffn_gate_up_exps) or apart (ffn_gate_exps, ffn_up_exps). Tensors may be F32, F16, BF16 or one of
 * ggml's block formats the kernels compute with (tensor/qblock.h); any other type is refused with the tensor and
 * its type named. */
#include "models/gemma4_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "models/gemma4_config.h"
#include "models/gguf_tensors.h"

#define ARCH "gemma4."
#define PREFIX "model.language_model."

static const struct {
    const char *gguf, *hf;
} GLOBAL_NAMES[] = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
    {"output_norm.weight", "norm.weight"},
    {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
};

static const struct {
    const char *gguf, *hf;
} LAYER_NAMES[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_gate_exps.weight", "experts.switch_glu.gate_proj.weight"},
    {"ffn_up_exps.weight", "experts.switch_glu.up_proj.weight"},
};

/* The experts' down projection: beside a fused gate-up tensor it takes Hugging Face's name, beside separate gate
 * and up tensors the name the split layout binds (gemma4_weights: experts stored apart). */
static const char *const DOWN_EXPS = "ffn_down_exps.weight";

/* The Hugging Face name of a GGUF tensor (malloc'd), NULL for one that has none (rope_freqs is read into the
 * config instead), or "" when the name is not one this reader knows. */
static char *hf_name(const char *name, int experts_split) {
    for (size_t i = 0; i < sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0]; i++)
        if (!strcmp(name, GLOBAL_NAMES[i].gguf)) {
            char *s = malloc(strlen(PREFIX) + strlen(GLOBAL_NAMES[i].hf) + 1);
            if (s)
                sprintf(s, "%s%s", PREFIX, GLOBAL_NAMES[i].hf);
            return s;
        }
    if (!strcmp(name, "rope_freqs.weight"))
        return NULL;
    unsigned layer;
    int at = 0;
    if (sscanf(name, "blk.%u.%n", &layer, &at) == 1 && at > 0) {
        const char *hf = NULL;
        if (!strcmp(name + at, DOWN_EXPS))
            hf = experts_split ? "experts.switch_glu.down_proj.weight" : "experts.down_proj";
        for (size_t i = 0; !hf && i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
            if (!strcmp(name + at, LAYER_NAMES[i].gguf))
                hf = LAYER_NAMES[i].hf;
        if (hf) {
            const size_t n = strlen(PREFIX) + strlen(hf) + 32;
            char *s = malloc(n);
            if (s)
                snprintf(s, n, "%slayers.%u.%s", PREFIX, layer, hf);
            return s;
        }
    }
    return strdup("");
}

static char *rename_tensor(const char *name, void *ctx, int *oom) {
    char *s = hf_name(name, *(const int *)ctx);
    *oom = !s && strcmp(name, "rope_freqs.weight");
    return s;
}

/* Reads a per-layer value that GGUF stores either once or as an array of one per layer. */
static TERN_MUST_CHECK tern_err *per_layer(const tern_gguf *g, const char *key, uint32_t layers, int64_t *out) {
    tern_gguf_array a;
    tern_err *e = tern_gguf_get_array(g, key, &a);
    if (!e) {
        if (a.count != layers)
            return tern_errf(TERN_EFORMAT, "%s: %llu values for %u layers", key, (unsigned long long)a.count, layers);
        for (uint32_t i = 0; i < layers; i++) {
            TERN_TRY(tern_gguf_array_i64(&a, i, &out[i]));
            if (out[i] < 0 || out[i] > INT32_MAX) /* counts and widths, each a u32 where stored once */
                return tern_errf(TERN_EFORMAT, "%s[%u]: %lld is not a count", key, i, (long long)out[i]);
        }
        return NULL;
    }
    if (e->code != TERN_EFORMAT)
        return e;
    tern_err_free(e);
    uint32_t v;
    TERN_TRY(tern_gguf_get_u32(g, key, &v));
    for (uint32_t i = 0; i < layers; i++)
        out[i] = v;
    return NULL;
}

static TERN_MUST_CHECK tern_err *get_f64_or(const tern_gguf *g, const char *key, double dflt, double *v) {
    *v = dflt;
    return tern_gguf_find(g, key) < 0 ? NULL : tern_gguf_get_f64(g, key, v);
}

/* Layer i's tensor blk.i.<what>, or NULL. */
static const tern_gguf_tensor *layer_tensor(const tern_gguf *g, uint32_t i, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "blk.%u.%s", i, what);
    return tern_gguf_find_tensor(g, name);
}

/* K=V attention, inferred as llama.cpp infers it: a full-attention layer that computes its own K/V and has no
 * attn_v takes V from the K projection (the metadata does not say so). All such layers must agree. */
static TERN_MUST_CHECK tern_err *k_eq_v_of(const tern_gguf *g, const uint8_t *full, uint32_t owners, int *k_eq_v) {
    uint32_t with_v = 0, without_v = 0, first_with = 0, first_without = 0;
    for (uint32_t i = 0; i < owners; i++) {
        if (!full[i])
            continue;
        if (layer_tensor(g, i, "attn_v.weight"))
            first_with = with_v++ ? first_with : i;
        else
            first_without = without_v++ ? first_without : i;
    }
    if (with_v && without_v)
        return tern_errf(TERN_EFORMAT, "full-attention layer %u has attn_v but layer %u has none (K=V attention is a "
                         "property of every full-attention layer)", first_with, first_without);
    *k_eq_v = without_v > 0;
    return NULL;
}

/* The mixture-of-experts block as the tensors and the metadata describe it; an expert count or width that
 * disagrees between the two is an error naming both. */
typedef struct moe_shape {
    int on, split;                  /* a router in every layer; gate and up experts stored apart */
    int64_t experts, top_k, width; /* E, experts per token, expert intermediate size */
} moe_shape;

static TERN_MUST_CHECK tern_err *moe_of(const tern_gguf *g, uint32_t layers, uint32_t hidden, moe_shape *m) {
    memset(m, 0, sizeof *m);
    const tern_gguf_tensor *router = layer_tensor(g, 0, "ffn_gate_inp.weight");
    for (uint32_t i = 1; i < layers; i++)
        if (!layer_tensor(g, i, "ffn_gate_inp.weight") != !router)
            return tern_errf(TERN_EUNSUPPORTED, "layer %u %s a router (ffn_gate_inp) and layer 0 %s: tern runs Gemma 4 "
                             "models whose layers all have experts, or none", i, router ? "lacks" : "has",
                             router ? "has one" : "none");
    if (!router)
        return NULL;
    m->on = 1;
    if (router->n_dims != 2 || router->dims[0] != hidden || router->dims[1] < 1 || router->dims[1] > 1u << 16)
        return tern_errf(TERN_EFORMAT, "blk.0.ffn_gate_inp.weight: expected [%u, experts]", hidden);
    m->experts = (int64_t)router->dims[1];
    uint32_t v;
    if (tern_gguf_find(g, ARCH "expert_count") >= 0) {
        TERN_TRY(tern_gguf_get_u32(g, ARCH "expert_count", &v));
        if (v != m->experts)
            return tern_errf(TERN_EFORMAT, ARCH "expert_count is %u but blk.0.ffn_gate_inp.weight routes to %lld experts",
                             v, (long long)m->experts);
    }
    if (tern_gguf_find(g, ARCH "expert_used_count") < 0)
        return tern_errf(TERN_EFORMAT, ARCH "expert_used_count is missing (how many experts each token takes)");
    TERN_TRY(tern_gguf_get_u32(g, ARCH "expert_used_count", &v));
    m->top_k = v;
    const tern_gguf_tensor *gate_up = layer_tensor(g, 0, "ffn_gate_up_exps.weight");
    const tern_gguf_tensor *gate = layer_tensor(g, 0, "ffn_gate_exps.weight");
    m->split = !gate_up && gate;
    const tern_gguf_tensor *t = gate_up ? gate_up : gate;
    const char *tname = gate_up ? "blk.0.ffn_gate_up_exps.weight" : "blk.0.ffn_gate_exps.weight";
    if (t) {
        if (t->n_dims != 3 || t->dims[0] != hidden || t->dims[1] < 1 || t->dims[1] > 1u << 24 ||
            (gate_up && t->dims[1] % 2))
            return tern_errf(TERN_EFORMAT, "%s: expected [%u, %sexpert width, experts]", tname, hidden,
                             gate_up ? "2 x " : "");
        if ((int64_t)t->dims[2] != m->experts)
            return tern_errf(TERN_EFORMAT, "%s holds %llu experts but blk.0.ffn_gate_inp.weight routes to %lld", tname,
                             (unsigned long long)t->dims[2], (long long)m->experts);
        m->width = (int64_t)t->dims[1] / (gate_up ? 2 : 1);
    }
    if (tern_gguf_find(g, ARCH "expert_feed_forward_length") >= 0) {
        int64_t *w = malloc(layers * sizeof *w);
        if (!w)
            return tern_errf(TERN_ENOMEM, "out of memory");
        tern_err *e = per_layer(g, ARCH "expert_feed_forward_length", layers, w);
        for (uint32_t i = 0; !e && i < layers; i++)
            if (w[i] != (m->width ? m->width : w[0]))
                e = m->width ? tern_errf(TERN_EFORMAT, ARCH "expert_feed_forward_length is %lld at layer %u but %s "
                                         "holds experts %lld wide", (long long)w[i], i, tname, (long long)m->width)
                             : tern_errf(TERN_EUNSUPPORTED, ARCH "expert_feed_forward_length: layers with different "
                                         "expert widths");
        if (!e && !m->width)
            m->width = w[0];
        free(w);
        TERN_TRY(e);
    }
    if (m->width <= 0)
        return tern_errf(TERN_EFORMAT, "the expert width is neither in the metadata (" ARCH
                         "expert_feed_forward_length) nor in an expert tensor");
    return NULL;
}

/* The config.json object Hugging Face would carry for this file's text model. */
static TERN_MUST_CHECK tern_err *config_of(const tern_gguf *g, json_t **out) {
    uint32_t layers, hidden, ctx, heads_scalar = 0, window, shared = 0, pl = 0, kd, kd_swa, vocab, pl_vocab = 0;
    TERN_TRY(tern_gguf_get_u32(g, ARCH "block_count", &layers));
    if (layers == 0 || layers > TERN_MAX_LAYERS)
        return tern_errf(TERN_EFORMAT, ARCH "block_count: %u layers (tern runs 1 to %d)", layers, TERN_MAX_LAYERS);
    TERN_TRY(tern_gguf_get_u32(g, ARCH "embedding_length", &hidden));
    TERN_TRY(tern_gguf_get_u32(g, ARCH "context_length", &ctx));
    TERN_TRY(tern_gguf_get_u32(g, ARCH "attention.sliding_window", &window));
    TERN_TRY(tern_gguf_get_u32(g, ARCH "attention.key_length", &kd));
    TERN_TRY(tern_gguf_get_u32(g, ARCH "attention.key_length_swa", &kd_swa));
    if (tern_gguf_find(g, ARCH "attention.shared_kv_layers") >= 0)
        TERN_TRY(tern_gguf_get_u32(g, ARCH "attention.shared_kv_layers", &shared));
    if (tern_gguf_find(g, ARCH "embedding_length_per_layer_input") >= 0)
        TERN_TRY(tern_gguf_get_u32(g, ARCH "embedding_length_per_layer_input", &pl));
    const tern_gguf_tensor *emb = tern_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->dims[0] != hidden || emb->dims[1] > INT32_MAX)
        return tern_errf(TERN_EFORMAT, "token_embd.weight: missing or not [%u, vocabulary]", hidden);
    vocab = (uint32_t)emb->dims[1];
    const tern_gguf_tensor *ple = tern_gguf_find_tensor(g, "per_layer_token_embd.weight");
    if (ple && ple->n_dims == 2 && ple->dims[1] <= INT32_MAX)
        pl_vocab = (uint32_t)ple->dims[1];
    double eps, theta, theta_swa, softcap;
    TERN_TRY(get_f64_or(g, ARCH "attention.layer_norm_rms_epsilon", 1e-6, &eps));
    TERN_TRY(get_f64_or(g, ARCH "rope.freq_base", 1e6, &theta));
    TERN_TRY(get_f64_or(g, ARCH "rope.freq_base_swa", 1e4, &theta_swa));
    TERN_TRY(get_f64_or(g, ARCH "final_logit_softcapping", 0.0, &softcap));

    int64_t *ff = malloc(layers * 3 * sizeof *ff), *heads = ff + layers, *kv = ff + 2 * layers;
    if (!ff)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *e = per_layer(g, ARCH "feed_forward_length", layers, ff);
    if (!e)
        e = per_layer(g, ARCH "attention.head_count", layers, heads);
    if (!e)
        e = per_layer(g, ARCH "attention.head_count_kv", layers, kv);
    tern_gguf_array swa;
    if (!e)
        e = tern_gguf_get_array(g, ARCH "attention.sliding_window_pattern", &swa);
    if (!e && swa.count != layers)
        e = tern_errf(TERN_EFORMAT, ARCH "attention.sliding_window_pattern: %llu values for %u layers",
                      (unsigned long long)swa.count, layers);
    /* The rotated share of the full-attention heads: the pairs whose rope_freqs factor is 1. */
    double rotated = 1.0;
    const tern_gguf_tensor *rf = tern_gguf_find_tensor(g, "rope_freqs.weight");
    if (!e && rf) {
        const void *data;
        size_t nbytes;
        e = rf->ggml_type == TERN_GGML_F32 && rf->n_dims == 1 && rf->dims[0] * 2 == kd
                ? tern_gguf_tensor_data(g, rf, &data, &nbytes)
                : tern_errf(TERN_EFORMAT, "rope_freqs.weight: expected %u float32 factors", kd / 2);
        if (!e) {
            uint64_t ones = 0;
            for (uint64_t i = 0; i < rf->dims[0]; i++)
                ones += ((const float *)data)[i] == 1.0f;
            rotated = (double)ones / (double)rf->dims[0];
        }
    }
    json_t *text = json_object(), *types = json_array();
    uint8_t full[TERN_MAX_LAYERS];
    int64_t full_kv = -1, swa_kv = -1;
    for (uint32_t i = 0; !e && i < layers; i++) {
        double is_swa;
        if ((e = tern_gguf_array_f64(&swa, i, &is_swa)))
            break;
        full[i] = is_swa == 0;
        json_array_append_new(types, json_string(full[i] ? "full_attention" : "sliding_attention"));
        int64_t *seen = full[i] ? &full_kv : &swa_kv;
        if (*seen < 0)
            *seen = kv[i];
        else if (*seen != kv[i])
            e = tern_errf(TERN_EUNSUPPORTED, ARCH "attention.head_count_kv: %s layers with different KV head counts "
                          "(%lld and %lld)", full[i] ? "full-attention" : "sliding", (long long)*seen, (long long)kv[i]);
    }
    if (!e) {
        heads_scalar = (uint32_t)heads[0];
        for (uint32_t i = 1; i < layers; i++)
            if (heads[i] != heads[0])
                e = tern_errf(TERN_EUNSUPPORTED, ARCH "attention.head_count: layers with different head counts");
    }
    int k_eq_v = 0;
    if (!e && shared < layers)
        e = k_eq_v_of(g, full, layers - shared, &k_eq_v);
    if (!e && !k_eq_v && full_kv >= 0 && swa_kv >= 0 && full_kv != swa_kv)
        e = tern_errf(TERN_EUNSUPPORTED, ARCH "attention.head_count_kv: full-attention layers have %lld KV heads and "
                      "sliding ones %lld; Gemma 4 gives full layers their own count only with K=V attention (no attn_v)",
                      (long long)full_kv, (long long)swa_kv);
    moe_shape moe = {0};
    if (!e)
        e = moe_of(g, layers, hidden, &moe);
    /* A double-wide MLP shows as KV-shared layers with twice the others' width. */
    const int double_wide = !e && shared > 0 && shared < layers && ff[layers - 1] == 2 * ff[0];
    if (!e) {
        json_object_set_new(text, "model_type", json_string("gemma4_text"));
        json_object_set_new(text, "vocab_size", json_integer(vocab));
        json_object_set_new(text, "vocab_size_per_layer_input", json_integer(pl_vocab ? pl_vocab : vocab));
        json_object_set_new(text, "hidden_size", json_integer(hidden));
        json_object_set_new(text, "intermediate_size", json_integer(ff[0]));
        json_object_set_new(text, "num_hidden_layers", json_integer(layers));
        json_object_set_new(text, "num_attention_heads", json_integer(heads_scalar));
        json_object_set_new(text, "num_key_value_heads", json_integer(swa_kv >= 0 ? swa_kv : kv[0]));
        json_object_set_new(text, "num_global_key_value_heads",
                            k_eq_v && full_kv >= 0 ? json_integer(full_kv) : json_null());
        json_object_set_new(text, "head_dim", json_integer(kd_swa));
        json_object_set_new(text, "global_head_dim", json_integer(kd));
        json_object_set_new(text, "attention_k_eq_v", json_boolean(k_eq_v));
        json_object_set_new(text, "hidden_size_per_layer_input", json_integer(pl));
        json_object_set_new(text, "num_kv_shared_layers", json_integer(shared));
        json_object_set_new(text, "use_double_wide_mlp", json_boolean(double_wide));
        json_object_set_new(text, "sliding_window", json_integer(window));
        json_object_set_new(text, "layer_types", types);
        types = NULL;
        json_object_set_new(text, "rope_parameters",
                            json_pack("{s:{s:s,s:f,s:f},s:{s:s,s:f}}", "full_attention", "rope_type", "proportional",
                                      "partial_rotary_factor", rotated, "rope_theta", theta, "sliding_attention",
                                      "rope_type", "default", "rope_theta", theta_swa));
        json_object_set_new(text, "max_position_embeddings", json_integer(ctx));
        json_object_set_new(text, "rms_norm_eps", json_real(eps));
        json_object_set_new(text, "hidden_activation", json_string("gelu_pytorch_tanh"));
        /* llama.cpp's GELU reads an f16 table: the quantized products' activation codes then match its own. */
        json_object_set_new(text, "tern_gelu_f16_table", json_true());
        json_object_set_new(text, "final_logit_softcapping", softcap > 0 ? json_real(softcap) : json_null());
        json_object_set_new(text, "tie_word_embeddings", json_boolean(!tern_gguf_find_tensor(g, "output.weight")));
        json_object_set_new(text, "enable_moe_block", json_boolean(moe.on));
        if (moe.on) {
            json_object_set_new(text, "num_experts", json_integer(moe.experts));
            json_object_set_new(text, "top_k_experts", json_integer(moe.top_k));
            json_object_set_new(text, "moe_intermediate_size", json_integer(moe.width));
            json_object_set_new(text, "tern_experts_split", json_boolean(moe.split));
        }
    }
    json_decref(types);
    free(ff);
    if (e) {
        json_decref(text);
        return e;
    }
    json_t *root = json_pack("{s:s,s:o,s:b}", "model_type", "gemma4", "text_config", text, "tie_word_embeddings",
                             !tern_gguf_find_tensor(g, "output.weight"));
    if (!root)
        return tern_errf(TERN_ENOMEM, "out of memory");
    uint32_t id;
    static const char *const ids[][2] = {{"tokenizer.ggml.bos_token_id", "bos_token_id"},
                                         {"tokenizer.ggml.eos_token_id", "eos_token_id"},
                                         {"tokenizer.ggml.padding_token_id", "pad_token_id"}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (tern_gguf_find(g, ids[i][0]) >= 0 && !(e = tern_gguf_get_u32(g, ids[i][0], &id)))
            json_object_set_new(root, ids[i][1], json_integer(id));
        else
            tern_err_free(e), e = NULL;
    *out = root;
    return NULL;
}

/* The block formats this build computes with, by ggml type id. */
tern_err *tern_gemma4_gguf_open(const char *path, json_t **config, tern_checkpoint **ck) {
    *config = NULL;
    *ck = NULL;
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(path, &g));
    return tern_gemma4_gguf_from(g, config, ck);
}

tern_err *tern_gemma4_gguf_from(tern_gguf *g, json_t **config, tern_checkpoint **ck) {
    *config = NULL;
    *ck = NULL;
    const char *path = tern_gguf_name(g);
    char *arch = NULL;
    tern_err *e = tern_gguf_get_str_dup(g, "general.architecture", &arch);
    if (!e && strcmp(arch, "gemma4"))
        e = tern_errf(TERN_EUNSUPPORTED, "%s: general.architecture \"%s\" is not one tern runs from GGUF (it runs: gemma4)",
                      path, arch);
    free(arch);
    if (!e)
        e = tern_err_wrap(config_of(g, config), "%s", path);
    if (e) {
        json_decref(*config);
        *config = NULL;
        tern_gguf_close(g);
        return e;
    }
    /* Separate gate and up experts name the down projection as the split layout binds it. */
    int experts_split = layer_tensor(g, 0, "ffn_gate_exps.weight") && !layer_tensor(g, 0, "ffn_gate_up_exps.weight");
    e = tern_gguf_checkpoint(g, rename_tensor, &experts_split, "Gemma 4", ck);
    if (e) {
        json_decref(*config);
        *config = NULL;
    }
    return e;
}
