/* gemma4_vision_gguf.c — Gemma 4's vision tower from the multimodal projector file llama.cpp's converter writes
 * (`convert_hf_to_gguf.py --mmproj`: mmproj-*.gguf, vision projector type "gemma4v"), seen as the Hugging Face
 * checkpoint it was made from, so gemma4_vision.c binds it as it binds safetensors.
 *
 * The converter renames the tower's tensors (v.blk.N.attn_q, v.patch_embd, mm.input_projection, ...; the table below
 * is its mapping read backwards), drops ".linear" from the clippable linears' names, keeps their bounds as
 * one-element tensors, and stores the patch embedding as a convolution [H, 3, p, p]. The clip.vision.* keys carry
 * the width, depth, head count, MLP width, patch size and output width; what they leave out is read from the
 * tensors' shapes (head size from the q norm, key/value heads from k's rows, the position table's length, whether
 * the linears are clipped, whether the output is standardized) or is the architecture's own (GELU-tanh, 3 x 3
 * pooling, RoPE theta 100), as the Hugging Face model defines it. Audio tensors beside the tower are left out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "formats/gguf.h"
#include "models/gemma4_vision.h"
#include "models/gguf_tensors.h"

#define TOWER "model.vision_tower."

static const struct {
    const char *gguf, *hf;
    int clipped; /* a clippable linear: its matrix is HF's <name>.linear.weight */
} LAYER[] = {
    {"attn_q", "self_attn.q_proj", 1},      {"attn_k", "self_attn.k_proj", 1},
    {"attn_v", "self_attn.v_proj", 1},      {"attn_out", "self_attn.o_proj", 1},
    {"ffn_gate", "mlp.gate_proj", 1},       {"ffn_up", "mlp.up_proj", 1},
    {"ffn_down", "mlp.down_proj", 1},       {"attn_q_norm", "self_attn.q_norm", 0},
    {"attn_k_norm", "self_attn.k_norm", 0}, {"ln1", "input_layernorm", 0},
    {"attn_post_norm", "post_attention_layernorm", 0}, {"ln2", "pre_feedforward_layernorm", 0},
    {"ffn_post_norm", "post_feedforward_layernorm", 0},
};

static const struct {
    const char *gguf, *hf;
} GLOBAL[] = {
    {"v.patch_embd.weight", TOWER "patch_embedder.input_proj.weight"},
    {"v.position_embd.weight", TOWER "patch_embedder.position_embedding_table"},
    {"v.std_bias", TOWER "std_bias"},
    {"v.std_scale", TOWER "std_scale"},
    {"mm.input_projection.weight", "model.embed_vision.embedding_projection.weight"},
};

static const char *const BOUNDS[] = {".input_min", ".input_max", ".output_min", ".output_max"};

static char *layer_name(unsigned layer, const char *hf, const char *suffix, int *oom) {
    const size_t len = strlen(TOWER) + strlen(hf) + strlen(suffix) + 40;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, TOWER "encoder.layers.%u.%s%s", layer, hf, suffix);
    *oom = !s;
    return s;
}

/* The Hugging Face name of an mmproj tensor; NULL for the audio tower's (left out). */
static char *rename_tensor(const char *name, void *ctx, int *oom) {
    (void)ctx;
    *oom = 0;
    for (size_t i = 0; i < sizeof GLOBAL / sizeof *GLOBAL; i++)
        if (!strcmp(name, GLOBAL[i].gguf)) {
            char *s = strdup(GLOBAL[i].hf);
            *oom = !s;
            return s;
        }
    unsigned layer;
    int at = 0;
    if (sscanf(name, "v.blk.%u.%n", &layer, &at) == 1 && at > 0) {
        const char *rest = name + at;
        for (size_t i = 0; i < sizeof LAYER / sizeof *LAYER; i++) {
            const size_t n = strlen(LAYER[i].gguf);
            if (strncmp(rest, LAYER[i].gguf, n) || rest[n] != '.')
                continue;
            const char *suffix = rest + n;
            if (!strcmp(suffix, ".weight"))
                return layer_name(layer, LAYER[i].hf, LAYER[i].clipped ? ".linear.weight" : ".weight", oom);
            for (size_t b = 0; LAYER[i].clipped && b < sizeof BOUNDS / sizeof *BOUNDS; b++)
                if (!strcmp(suffix, BOUNDS[b]))
                    return layer_name(layer, LAYER[i].hf, BOUNDS[b], oom);
        }
    }
    if (!strncmp(name, "v.", 2) || (!strncmp(name, "mm.", 3) && strncmp(name, "mm.a.", 5))) {
        char *s = strdup("");
        *oom = !s;
        return s;
    }
    return NULL; /* the audio tower's tensors (a.*, mm.a.*): not read */
}

/* The config.json object (vision_config and the text width) the file's metadata and shapes stand for. */
static TERN_MUST_CHECK tern_err *config_of(const tern_gguf *g, json_t **out) {
    *out = NULL;
    uint32_t H, layers, heads, I, text, patch;
    TERN_TRY(tern_gguf_u32_in(g, "clip.vision.embedding_length", 8, 65536, &H));
    TERN_TRY(tern_gguf_u32_in(g, "clip.vision.block_count", 1, 64, &layers));
    TERN_TRY(tern_gguf_u32_in(g, "clip.vision.attention.head_count", 1, 1024, &heads));
    TERN_TRY(tern_gguf_u32_in(g, "clip.vision.feed_forward_length", 1, 1u << 20, &I));
    TERN_TRY(tern_gguf_u32_in(g, "clip.vision.projection_dim", 1, 65536, &text));
    TERN_TRY(tern_gguf_u32_in(g, "clip.vision.patch_size", 1, 64, &patch));
    double eps = 1e-6;
    if (tern_gguf_find(g, "clip.vision.attention.layer_norm_epsilon") >= 0)
        TERN_TRY(tern_gguf_get_f64(g, "clip.vision.attention.layer_norm_epsilon", &eps));
    const int64_t hd = tern_gguf_tensor_dim(g, "v.blk.0.attn_q_norm.weight", 0), krows = tern_gguf_tensor_dim(g, "v.blk.0.attn_k.weight", 0);
    const int64_t P = tern_gguf_tensor_dim(g, "v.position_embd.weight", 1);
    if (hd < 4 || krows < 1 || P < 1)
        return tern_errf(TERN_EFORMAT, "missing one of v.blk.0.attn_q_norm.weight, v.blk.0.attn_k.weight, "
                                       "v.position_embd.weight (the tower's shape is read from them)");
    if (krows % hd)
        return tern_errf(TERN_EFORMAT, "v.blk.0.attn_k.weight has %lld rows, not a multiple of the head size %lld",
                         (long long)krows, (long long)hd);
    json_t *root = json_pack("{s:{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:b,s:b},s:{s:I}}", "vision_config",
                             "model_type", "gemma4_vision", "hidden_size", (json_int_t)H, "intermediate_size",
                             (json_int_t)I, "num_hidden_layers", (json_int_t)layers, "num_attention_heads",
                             (json_int_t)heads, "num_key_value_heads", (json_int_t)(krows / hd), "head_dim",
                             (json_int_t)hd, "patch_size", (json_int_t)patch, "position_embedding_size", (json_int_t)P,
                             "pooling_kernel_size", (json_int_t)3, "rms_norm_eps", eps, "use_clipped_linears",
                             tern_gguf_find_tensor(g, "v.blk.0.attn_q.input_max") != NULL, "standardize",
                             tern_gguf_find_tensor(g, "v.std_bias") != NULL, "text_config", "hidden_size",
                             (json_int_t)text);
    if (!root)
        return tern_errf(TERN_ENOMEM, "out of memory");
    *out = root;
    return NULL;
}

tern_err *tern_gemma4_vision_gguf_from(tern_gguf *g, void **impl) {
    *impl = NULL;
    char *what = strdup(tern_gguf_name(g));
    json_t *root = NULL;
    tern_err *e = what ? config_of(g, &root) : tern_errf(TERN_ENOMEM, "out of memory");
    if (e) {
        tern_gguf_close(g);
        e = what ? tern_err_wrap(e, "%s", what) : e;
        free(what);
        return e;
    }
    tern_checkpoint *ck;
    e = tern_gguf_checkpoint(g, rename_tensor, NULL, "Gemma 4's vision tower", &ck);
    if (!e)
        e = tern_gemma4_vision_load_from(ck, root, 1, what, impl);
    json_decref(root);
    free(what);
    return e;
}
