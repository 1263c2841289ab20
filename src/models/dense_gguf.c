/* dense_gguf.c — a dense-family model (Llama, Qwen 2, Qwen 3) as llama.cpp's converter writes it to GGUF: the
 * metadata read back into the config.json Hugging Face would carry, and the tensors renamed to Hugging Face's, so
 * that the one tensor list binds them as it binds safetensors. Tensor bytes stay in the mapped file.
 *
 * What the metadata does not say is read from the tensors, as llama.cpp reads it: the head is tied when there is
 * no `output` tensor, the attention carries biases when the layers have them. Two things differ from the
 * Hugging Face checkpoint and are passed on in the stand-in config: Llama's Q/K rows are reordered for RoPE over
 * adjacent pairs (tern_rope_pairs), and llama3 RoPE scaling is stored as per-pair frequency factors
 * (rope_freqs, tern_rope_freqs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "models/dense.h"
#include "models/gguf_tensors.h"

static const struct {
    const char *gguf, *hf;
} GLOBAL_NAMES[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"rope_freqs.weight", "model.rope_freqs.weight"},
};

static const struct {
    const char *gguf, *hf;
} LAYER_NAMES[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

/* The Hugging Face name of a GGUF tensor (malloc'd), or "" when the name is not one this reader knows. */
static char *rename_tensor(const char *name, void *ctx, int *oom) {
    (void)ctx;
    char *s = NULL;
    for (size_t i = 0; i < sizeof GLOBAL_NAMES / sizeof GLOBAL_NAMES[0] && !s; i++)
        if (!strcmp(name, GLOBAL_NAMES[i].gguf))
            s = strdup(GLOBAL_NAMES[i].hf);
    unsigned layer;
    int at = 0;
    if (!s && sscanf(name, "blk.%u.%n", &layer, &at) == 1 && at > 0)
        for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0] && !s; i++)
            if (!strcmp(name + at, LAYER_NAMES[i].gguf)) {
                const size_t n = strlen(LAYER_NAMES[i].hf) + 32;
                if ((s = malloc(n)))
                    snprintf(s, n, "model.layers.%u.%s", layer, LAYER_NAMES[i].hf);
                *oom = !s;
                return s;
            }
    if (!s)
        s = strdup("");
    *oom = !s;
    return s;
}

/* Sets config[key] from the GGUF's u32 `arch.what` when present (required: an error when absent). */
static TERN_MUST_CHECK tern_err *copy_u32(const tern_gguf *g, const char *arch, const char *what, int required, json_t *config,
                          const char *key) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, what);
    if (tern_gguf_find(g, k) < 0)
        return required ? tern_errf(TERN_EFORMAT, "metadata key %s is missing", k) : NULL;
    uint32_t v;
    TERN_TRY(tern_gguf_get_u32(g, k, &v));
    json_object_set_new(config, key, json_integer(v));
    return NULL;
}

static TERN_MUST_CHECK tern_err *copy_f64(const tern_gguf *g, const char *arch, const char *what, json_t *config, const char *key) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, what);
    if (tern_gguf_find(g, k) < 0)
        return NULL;
    double v;
    TERN_TRY(tern_gguf_get_f64(g, k, &v));
    json_object_set_new(config, key, json_real(v));
    return NULL;
}

static TERN_MUST_CHECK tern_err *config_of(const tern_dense_family *f, const tern_gguf *g, json_t *c) {
    const char *a = f->gguf_arch;
    json_object_set_new(c, "model_type", json_string(f->name));
    TERN_TRY(copy_u32(g, a, "embedding_length", 1, c, "hidden_size"));
    TERN_TRY(copy_u32(g, a, "feed_forward_length", 1, c, "intermediate_size"));
    TERN_TRY(copy_u32(g, a, "block_count", 1, c, "num_hidden_layers"));
    TERN_TRY(copy_u32(g, a, "attention.head_count", 1, c, "num_attention_heads"));
    TERN_TRY(copy_u32(g, a, "attention.head_count_kv", 0, c, "num_key_value_heads"));
    TERN_TRY(copy_u32(g, a, "attention.key_length", 0, c, "head_dim"));
    TERN_TRY(copy_u32(g, a, "context_length", 0, c, "max_position_embeddings"));
    TERN_TRY(copy_f64(g, a, "attention.layer_norm_rms_epsilon", c, "rms_norm_eps"));
    TERN_TRY(copy_f64(g, a, "rope.freq_base", c, "rope_theta"));
    char k[160];
    snprintf(k, sizeof k, "%s.rope.scaling.type", a);
    if (tern_gguf_find(g, k) >= 0) {
        char *type = NULL;
        TERN_TRY(tern_gguf_get_str_dup(g, k, &type));
        json_t *rs = json_pack("{s:s}", "rope_type", type);
        free(type);
        if (!rs)
            return tern_errf(TERN_ENOMEM, "out of memory");
        json_object_set_new(c, "rope_scaling", rs);
        TERN_TRY(copy_f64(g, a, "rope.scaling.factor", rs, "factor"));
    }
    const tern_gguf_tensor *emb = tern_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->dims[1] > INT32_MAX)
        return tern_errf(TERN_EFORMAT, "token_embd.weight: missing or not [hidden, vocabulary]");
    json_object_set_new(c, "vocab_size", json_integer((json_int_t)emb->dims[1]));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(!tern_gguf_find_tensor(g, "output.weight")));
    json_object_set_new(c, "attention_bias", json_boolean(tern_gguf_find_tensor(g, "blk.0.attn_output.bias") != NULL));
    json_object_set_new(c, "tern_rope_pairs", json_boolean(f->gguf_rope_pairs));
    json_object_set_new(c, "tern_rope_freqs", json_boolean(tern_gguf_find_tensor(g, "rope_freqs.weight") != NULL));
    json_t *eos = json_array();
    json_object_set_new(c, "eos_token_id", eos);
    static const char *const ends[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2; i++) {
        uint32_t id = 0;
        if (tern_gguf_find(g, ends[i]) < 0)
            continue;
        TERN_TRY(tern_gguf_get_u32(g, ends[i], &id));
        json_array_append_new(eos, json_integer(id));
    }
    return NULL;
}

tern_err *tern_dense_gguf_from(const tern_dense_family *f, tern_gguf *g, json_t **config, tern_checkpoint **ck) {
    *config = NULL;
    *ck = NULL;
    json_t *c = json_object();
    tern_err *e = c ? config_of(f, g, c) : tern_errf(TERN_ENOMEM, "out of memory");
    if (e) {
        json_decref(c);
        e = tern_err_wrap(e, "%s", tern_gguf_name(g));
        tern_gguf_close(g);
        return e;
    }
    e = tern_gguf_checkpoint(g, rename_tensor, NULL, f->name, ck);
    if (e) {
        json_decref(c);
        return e;
    }
    *config = c;
    return NULL;
}

tern_err *tern_dense_gguf_open(const tern_dense_family *f, const char *path, json_t **config, tern_checkpoint **ck) {
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(path, &g));
    return tern_dense_gguf_from(f, g, config, ck);
}
