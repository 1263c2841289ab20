/* gemma4_audio_gguf.c — Gemma 4's audio tower from the multimodal projector file llama.cpp's converter writes
 * (`convert_hf_to_gguf.py --mmproj`: mmproj-*.gguf, projector type "gemma4a"), seen as the Hugging Face checkpoint
 * it was made from, so gemma4_audio.c binds it as it binds safetensors.
 *
 * The converter renames the tower's tensors (a.blk.N.attn_q, a.conv1d.0, mm.a.input_projection, ...; the table
 * below is its mapping read backwards), drops ".linear" from the clippable linears' names, stores each attention
 * layer's per-dimension scale as softplus(scale), and flattens the depthwise convolution [D, 1, k] to [D, k] (the
 * same bytes). The clip.audio.* keys carry the widths, depth and head count; what they leave out is read from the
 * tensors' shapes (convolution channels and taps, the output projection's width, whether the linears are clipped)
 * or is Gemma 4's fixed architecture (attention chunks of 12 frames, 13 left and 0 right of context, logit cap 50,
 * residual weight 0.5), as llama.cpp's own graph assumes. Vision tensors beside the tower are left out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "formats/gguf.h"
#include "models/audio_encoder.h"
#include "models/gemma4_audio.h"
#include "models/gguf_tensors.h"

#define TOWER "model.audio_tower."

static const struct {
    const char *gguf, *hf;
    int clipped; /* a clippable linear: its matrix is HF's <name>.linear.weight */
} LAYER[] = {
    {"ffn_up", "feed_forward1.ffw_layer_1", 1},     {"ffn_down", "feed_forward1.ffw_layer_2", 1},
    {"ffn_up_1", "feed_forward2.ffw_layer_1", 1},   {"ffn_down_1", "feed_forward2.ffw_layer_2", 1},
    {"ffn_norm", "feed_forward1.pre_layer_norm", 0}, {"ffn_post_norm", "feed_forward1.post_layer_norm", 0},
    {"ffn_norm_1", "feed_forward2.pre_layer_norm", 0}, {"ffn_post_norm_1", "feed_forward2.post_layer_norm", 0},
    {"attn_q", "self_attn.q_proj", 1},               {"attn_k", "self_attn.k_proj", 1},
    {"attn_v", "self_attn.v_proj", 1},               {"attn_out", "self_attn.post", 1},
    {"attn_k_rel", "self_attn.relative_k_proj", 0},  {"per_dim_scale", "self_attn.per_dim_scale", 0},
    {"attn_pre_norm", "norm_pre_attn", 0},           {"attn_post_norm", "norm_post_attn", 0},
    {"ln2", "norm_out", 0},                          {"conv_norm", "lconv1d.pre_layer_norm", 0},
    {"norm_conv", "lconv1d.conv_norm", 0},           {"conv_pw1", "lconv1d.linear_start", 1},
    {"conv_pw2", "lconv1d.linear_end", 1},           {"conv_dw", "lconv1d.depthwise_conv1d", 0},
};

static const struct {
    const char *gguf, *hf;
} GLOBAL[] = {
    {"a.conv1d.0.weight", TOWER "subsample_conv_projection.layer0.conv.weight"},
    {"a.conv1d.0.norm.weight", TOWER "subsample_conv_projection.layer0.norm.weight"},
    {"a.conv1d.1.weight", TOWER "subsample_conv_projection.layer1.conv.weight"},
    {"a.conv1d.1.norm.weight", TOWER "subsample_conv_projection.layer1.norm.weight"},
    {"a.input_projection.weight", TOWER "subsample_conv_projection.input_proj_linear.weight"},
    {"a.pre_encode.out.weight", TOWER "output_proj.weight"},
    {"a.pre_encode.out.bias", TOWER "output_proj.bias"},
    {"mm.a.input_projection.weight", "model.embed_audio.embedding_projection.weight"},
};

static const char *const BOUNDS[] = {".input_min", ".input_max", ".output_min", ".output_max"};

/* "model.audio_tower.layers.<layer>.<hf><suffix>" (malloc'd; *oom when it could not be). */
static char *layer_name(unsigned layer, const char *hf, const char *suffix, int *oom) {
    const size_t len = strlen(TOWER) + strlen(hf) + strlen(suffix) + 24;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, TOWER "layers.%u.%s%s", layer, hf, suffix);
    *oom = !s;
    return s;
}

/* The Hugging Face name of an mmproj tensor; NULL for the vision encoder's (left out). */
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
    if (sscanf(name, "a.blk.%u.%n", &layer, &at) == 1 && at > 0) {
        const char *rest = name + at;
        for (size_t i = 0; i < sizeof LAYER / sizeof *LAYER; i++) {
            const size_t n = strlen(LAYER[i].gguf);
            if (strncmp(rest, LAYER[i].gguf, n) || rest[n] != '.')
                continue;
            const char *suffix = rest + n;
            if (!strcmp(suffix, ".weight")) /* HF's per_dim_scale is a bare parameter, its linears' matrices .linear */
                return layer_name(layer, LAYER[i].hf,
                                  LAYER[i].clipped ? ".linear.weight" : !strcmp(LAYER[i].gguf, "per_dim_scale") ? ""
                                                                                                              : ".weight",
                                  oom);
            for (size_t b = 0; LAYER[i].clipped && b < sizeof BOUNDS / sizeof *BOUNDS; b++)
                if (!strcmp(suffix, BOUNDS[b]))
                    return layer_name(layer, LAYER[i].hf, BOUNDS[b], oom);
        }
    }
    if (!strncmp(name, "a.", 2) || !strncmp(name, "mm.a.", 5)) {
        char *s = strdup("");
        *oom = !s;
        return s;
    }
    return NULL; /* the vision encoder's tensors (v.*, mm.*): not read */
}

/* The config.json object (audio_config and the text width) the file's metadata and shapes stand for (the caller
 * chose this reader by the file's projector type). */
static TERN_MUST_CHECK tern_err *config_of(const tern_gguf *g, json_t **out) {
    *out = NULL;
    uint32_t D, layers, heads, text, mels;
    TERN_TRY(tern_gguf_u32_in(g, "clip.audio.embedding_length", 8, 65536, &D));
    TERN_TRY(tern_gguf_u32_in(g, "clip.audio.block_count", 1, 64, &layers));
    TERN_TRY(tern_gguf_u32_in(g, "clip.audio.attention.head_count", 1, 1024, &heads));
    TERN_TRY(tern_gguf_u32_in(g, "clip.audio.projection_dim", 1, 65536, &text));
    TERN_TRY(tern_gguf_u32_in(g, "clip.audio.num_mel_bins", 1, 4096, &mels));
    if (mels != 128)
        return tern_errf(TERN_EUNSUPPORTED, "clip.audio.num_mel_bins is %u; Gemma 4's tower reads 128", mels);
    double eps = 1e-6;
    if (tern_gguf_find(g, "clip.audio.attention.layer_norm_epsilon") >= 0)
        TERN_TRY(tern_gguf_get_f64(g, "clip.audio.attention.layer_norm_epsilon", &eps));
    const int64_t c0 = tern_gguf_tensor_dim(g, "a.conv1d.0.weight", 0), c1 = tern_gguf_tensor_dim(g, "a.conv1d.1.weight", 0);
    const int64_t taps = tern_gguf_tensor_dim(g, "a.blk.0.conv_dw.weight", 1), out_dim = tern_gguf_tensor_dim(g, "a.pre_encode.out.weight", 0);
    if (c0 < 1 || c1 < 1 || taps < 1 || out_dim < 1)
        return tern_errf(TERN_EFORMAT, "missing one of a.conv1d.0.weight, a.conv1d.1.weight, a.blk.0.conv_dw.weight, "
                                       "a.pre_encode.out.weight (the tower's shape is read from them)");
    json_t *root = json_object(), *ac = json_object(), *tc = json_object(), *ch = json_array();
    if (!root || !ac || !tc || !ch || json_object_set_new(root, "audio_config", ac) ||
        json_object_set_new(root, "text_config", tc) || json_object_set_new(ac, "subsampling_conv_channels", ch)) {
        json_decref(root);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    int bad = json_array_append_new(ch, json_integer(c0)) | json_array_append_new(ch, json_integer(c1));
    bad |= json_object_set_new(ac, "model_type", json_string("gemma4_audio"));
    bad |= json_object_set_new(ac, "hidden_size", json_integer(D));
    bad |= json_object_set_new(ac, "num_hidden_layers", json_integer(layers));
    bad |= json_object_set_new(ac, "num_attention_heads", json_integer(heads));
    bad |= json_object_set_new(ac, "conv_kernel_size", json_integer(taps));
    bad |= json_object_set_new(ac, "output_proj_dims", json_integer(out_dim));
    bad |= json_object_set_new(ac, "rms_norm_eps", json_real(eps));
    bad |= json_object_set_new(ac, "use_clipped_linears",
                               json_boolean(tern_gguf_find_tensor(g, "a.blk.0.attn_q.input_max") != NULL));
    bad |= json_object_set_new(tc, "hidden_size", json_integer(text));
    if (bad) {
        json_decref(root);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    *out = root;
    return NULL;
}

tern_err *tern_gemma4_audio_gguf_from(tern_gguf *g, void **impl) {
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
    e = tern_gguf_checkpoint(g, rename_tensor, NULL, "Gemma 4's audio tower", &ck);
    if (!e)
        e = tern_gemma4_audio_load_from(ck, root, 1, what, impl);
    json_decref(root);
    free(what);
    return e;
}
