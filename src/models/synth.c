/* synth.c — synthetic Gemma 4 checkpoints (see synth.h). */
#include "models/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/hash.h"
#include "core/json_util.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/ckpt_write.h"
#include "models/gemma4_audio.h"
#include "models/gemma4_vision.h"
#include "models/gemma4_config.h"
#include "models/gemma4_weights.h"
#include "models/model.h"
#include "tensor/quant_mlx.h"
#include "tokenizer/hf_export.h"

/* ---- presets --------------------------------------------------------------------------- */

typedef struct preset {
    const char *name;
    int64_t hidden, ffn, layers, heads, kv, global_kv, ple, kv_shared, window, experts, top_k, moe_ffn;
    int pattern, double_wide, k_eq_v;
} preset;

/* Shapes from GEMMA4.md §2 (the published configs); "tiny" is the demo/test size with the real vocabulary;
 * "e4b-moe-like" has the 26B-A4B block structure (MoE beside a dense MLP, k_eq_v, global KV heads) at a size this
 * machine can run whole. */
static const preset presets[] = {
    {"tiny", 128, 512, 6, 4, 2, 2, 16, 2, 16, 0, 0, 0, 3, 1, 0},
    {"e2b", 1536, 6144, 35, 8, 1, 1, 256, 20, 512, 0, 0, 0, 5, 1, 0},
    {"e4b", 2560, 10240, 42, 8, 2, 2, 256, 18, 512, 0, 0, 0, 6, 0, 0},
    {"12b", 3840, 15360, 48, 16, 8, 1, 0, 0, 1024, 0, 0, 0, 6, 0, 1},
    {"26b-a4b", 2816, 2112, 30, 16, 8, 2, 0, 0, 1024, 128, 8, 704, 6, 0, 1},
    {"31b", 5376, 21504, 60, 32, 16, 4, 0, 0, 1024, 0, 0, 0, 6, 0, 1},
    {"e4b-moe-like", 1536, 1536, 12, 8, 4, 1, 0, 0, 1024, 32, 4, 512, 6, 0, 1},
};

static json_t *preset_config(const preset *p) {
    json_t *tc = json_object();
    json_object_set_new(tc, "model_type", json_string("gemma4_text"));
    json_object_set_new(tc, "vocab_size", json_integer(262144));
    json_object_set_new(tc, "vocab_size_per_layer_input", json_integer(262144));
    json_object_set_new(tc, "hidden_size", json_integer(p->hidden));
    json_object_set_new(tc, "intermediate_size", json_integer(p->ffn));
    json_object_set_new(tc, "num_hidden_layers", json_integer(p->layers));
    json_object_set_new(tc, "num_attention_heads", json_integer(p->heads));
    json_object_set_new(tc, "num_key_value_heads", json_integer(p->kv));
    json_object_set_new(tc, "num_global_key_value_heads", p->k_eq_v ? json_integer(p->global_kv) : json_null());
    json_object_set_new(tc, "head_dim", json_integer(256 >> (p->hidden < 512 ? 3 : 0)));
    json_object_set_new(tc, "global_head_dim", json_integer(512 >> (p->hidden < 512 ? 3 : 0)));
    json_object_set_new(tc, "attention_k_eq_v", json_boolean(p->k_eq_v));
    json_object_set_new(tc, "hidden_size_per_layer_input", json_integer(p->ple));
    json_object_set_new(tc, "num_kv_shared_layers", json_integer(p->kv_shared));
    json_object_set_new(tc, "use_double_wide_mlp", json_boolean(p->double_wide));
    json_object_set_new(tc, "sliding_window", json_integer(p->window));
    /* The larger models (12B, 26B-A4B, 31B) see an image both ways; e2b/e4b, the tiny and the MoE-like ones do not. */
    json_object_set_new(tc, "use_bidirectional_attention", p->hidden > 2560 ? json_string("vision") : json_null());
    json_t *types = json_array();
    for (int64_t i = 0; i < p->layers; i++)
        json_array_append_new(types, json_string(((i + 1) % p->pattern == 0 || i == p->layers - 1)
                                                     ? "full_attention" : "sliding_attention"));
    json_object_set_new(tc, "layer_types", types);
    json_object_set_new(tc, "rope_parameters",
                        json_pack("{s:{s:s,s:f,s:f},s:{s:s,s:f}}", "full_attention", "rope_type", "proportional",
                                  "partial_rotary_factor", 0.25, "rope_theta", 1000000.0, "sliding_attention",
                                  "rope_type", "default", "rope_theta", 10000.0));
    json_object_set_new(tc, "max_position_embeddings", json_integer(131072));
    json_object_set_new(tc, "rms_norm_eps", json_real(1e-6));
    json_object_set_new(tc, "hidden_activation", json_string("gelu_pytorch_tanh"));
    json_object_set_new(tc, "final_logit_softcapping", json_real(30.0));
    json_object_set_new(tc, "enable_moe_block", json_boolean(p->experts > 0));
    json_object_set_new(tc, "num_experts", p->experts ? json_integer(p->experts) : json_null());
    json_object_set_new(tc, "top_k_experts", p->experts ? json_integer(p->top_k) : json_null());
    json_object_set_new(tc, "moe_intermediate_size", p->experts ? json_integer(p->moe_ffn) : json_null());
    json_object_set_new(tc, "tie_word_embeddings", json_true());
    json_object_set_new(tc, "bos_token_id", json_integer(2));
    json_object_set_new(tc, "eos_token_id", json_integer(1));
    json_object_set_new(tc, "pad_token_id", json_integer(0));
    json_t *root = json_object();
    json_object_set_new(root, "architectures", json_pack("[s]", "Gemma4ForConditionalGeneration"));
    json_object_set_new(root, "model_type", json_string("gemma4"));
    json_object_set_new(root, "text_config", tc);
    json_object_set_new(root, "audio_config", json_null());
    json_object_set_new(root, "vision_config", json_null());
    json_object_set_new(root, "tie_word_embeddings", json_true());
    json_object_set_new(root, "bos_token_id", json_integer(2));
    json_object_set_new(root, "eos_token_id", json_pack("[i,i]", 1, 106));
    json_object_set_new(root, "pad_token_id", json_integer(0));
    return root;
}

/* The dense families' presets: shapes, RoPE and special ids from the published config.json files. */
typedef struct dense_preset {
    const char *name, *model_type, *architecture;
    int64_t hidden, ffn, layers, heads, kv, head_dim, vocab, ctx, bos, eos[3];
    double theta, eps, llama3_factor; /* llama3 RoPE scaling's factor, 0 for none */
    int tied;
} dense_preset;

static const dense_preset dense_presets[] = {
    {"llama-3.2-1b", "llama", "LlamaForCausalLM", 2048, 8192, 16, 32, 8, 64, 128256, 131072, 128000,
     {128001, 128008, 128009}, 500000, 1e-5, 32, 1},
    {"llama-3.1-8b", "llama", "LlamaForCausalLM", 4096, 14336, 32, 32, 8, 128, 128256, 131072, 128000,
     {128001, 128008, 128009}, 500000, 1e-5, 8, 0},
    {"qwen2.5-0.5b", "qwen2", "Qwen2ForCausalLM", 896, 4864, 24, 14, 2, 64, 151936, 32768, 151643, {151645, 151643, -1},
     1000000, 1e-6, 0, 1},
    {"qwen3-0.6b", "qwen3", "Qwen3ForCausalLM", 1024, 3072, 28, 16, 8, 128, 151936, 40960, 151643, {151645, 151643, -1},
     1000000, 1e-6, 0, 1},
    {"qwen3-4b", "qwen3", "Qwen3ForCausalLM", 2560, 9728, 36, 32, 8, 128, 151936, 40960, 151643, {151645, 151643, -1},
     1000000, 1e-6, 0, 1},
    {"qwen3-8b", "qwen3", "Qwen3ForCausalLM", 4096, 12288, 36, 32, 8, 128, 151936, 40960, 151643, {151645, 151643, -1},
     1000000, 1e-6, 0, 0},
};

static json_t *dense_preset_config(const dense_preset *p) {
    json_t *c = json_pack("{s:[s],s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:b,s:s,s:I,s:b}", "architectures",
                          p->architecture, "model_type", p->model_type, "vocab_size", (json_int_t)p->vocab,
                          "hidden_size", (json_int_t)p->hidden, "intermediate_size", (json_int_t)p->ffn,
                          "num_hidden_layers", (json_int_t)p->layers, "num_attention_heads", (json_int_t)p->heads,
                          "num_key_value_heads", (json_int_t)p->kv, "head_dim", (json_int_t)p->head_dim,
                          "max_position_embeddings", (json_int_t)p->ctx, "rope_theta", p->theta, "rms_norm_eps",
                          p->eps, "tie_word_embeddings", p->tied, "hidden_act", "silu", "bos_token_id",
                          (json_int_t)p->bos, "attention_bias", 0);
    json_t *eos = json_array();
    for (int i = 0; i < 3 && p->eos[i] >= 0; i++)
        json_array_append_new(eos, json_integer(p->eos[i]));
    json_object_set_new(c, "eos_token_id", eos);
    if (p->llama3_factor > 0)
        json_object_set_new(c, "rope_scaling",
                            json_pack("{s:s,s:f,s:f,s:f,s:i}", "rope_type", "llama3", "factor", p->llama3_factor,
                                      "low_freq_factor", 1.0, "high_freq_factor", 4.0,
                                      "original_max_position_embeddings", 8192));
    return c;
}

tern_err *tern_synth_config(const char *preset_or_path, json_t **out) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(preset_or_path, presets[i].name)) {
            *out = preset_config(&presets[i]);
            return *out ? NULL : tern_errf(TERN_ENOMEM, "out of memory building preset");
        }
    for (size_t i = 0; i < sizeof dense_presets / sizeof dense_presets[0]; i++)
        if (!strcmp(preset_or_path, dense_presets[i].name)) {
            *out = dense_preset_config(&dense_presets[i]);
            return *out ? NULL : tern_errf(TERN_ENOMEM, "out of memory building preset");
        }
    if (!tern_is_file(preset_or_path))
        return tern_errf(TERN_EINVAL, "unknown preset '%s' (tiny, e2b, e4b, 12b, 26b-a4b, 31b, e4b-moe-like, "
                         "llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, qwen3-0.6b, qwen3-4b, qwen3-8b, or a config.json "
                         "path)", preset_or_path);
    return tern_json_load_file(preset_or_path, 16u << 20, out);
}

tern_err *tern_synth_cut_layers(json_t *config, int64_t layers) {
    json_t *tc = json_object_get(config, "text_config");
    if (!json_is_object(tc))
        tc = config;
    json_t *types = json_object_get(tc, "layer_types");
    const int64_t had = json_integer_value(json_object_get(tc, "num_hidden_layers"));
    if (layers < 1 || (had > 0 && layers > had))
        return tern_errf(TERN_EINVAL, "--layers %lld: the model has %lld layers", (long long)layers, (long long)had);
    json_object_set_new(tc, "num_hidden_layers", json_integer(layers));
    while (json_is_array(types) && (int64_t)json_array_size(types) > layers)
        json_array_remove(types, json_array_size(types) - 1);
    return NULL;
}

tern_err *tern_synth_parse_dtype(const char *s, tern_synth_dtype *out) {
    static const char *names[] = {"f32", "bf16", "f16", "q8", "q4"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *out = (tern_synth_dtype)i;
            return NULL;
        }
    return tern_errf(TERN_EINVAL, "unknown dtype '%s' (f32, bf16, f16, q8, q4)", s);
}

/* ---- deterministic random numbers --------------------------------------------------------- */

static uint64_t hash_name(const char *s, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* An approximately standard normal value: the sum of four 16-bit uniforms (Irwin–Hall), rescaled.
 * Synthetic weights only need the right scale, and this is several times cheaper than Box–Muller. */
static float normal01(uint64_t *s) {
    uint64_t r = tern_splitmix64(s);
    float u = (float)((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) * (1.0f / 65536.0f);
    return (u - 2.0f) * 1.7320508f;
}

/* ---- values ------------------------------------------------------------------------------------ */

/* Mean and spread of a tensor's values: linear N(0, 1/sqrt(in)); embeddings scaled so that
 * the looked-up vector times sqrt(its width) is ~N(0, 1); norms and scales near 1. */
static void init_scale(const tern_wspec *s, int64_t ple_width, float *mean, float *std) {
    int64_t in = s->shape[s->ndim - 1];
    *mean = 0.0f;
    *std = 1.0f;
    switch (s->kind) {
    case TERN_WK_LINEAR:
    case TERN_WK_EXPERTS: *std = 1.0f / sqrtf((float)in); break;
    case TERN_WK_EMBED:
        *std = 1.0f / sqrtf((float)(strstr(s->name, "per_layer") ? ple_width : in));
        break;
    case TERN_WK_BIAS: *std = 0.5f; break; /* large enough that a missing bias shows in the logits */
    case TERN_WK_NORM:
    case TERN_WK_SCALE:
        *mean = 1.0f;
        *std = 0.05f;
        break;
    }
}

typedef struct synth_rows {
    const tern_out_tensor *ts;
    int64_t ple_width; /* Gemma 4's per-layer input width */
    uint64_t seed;
} synth_rows;

/* Row `row` of tensor `index`: a pure function of (seed, tensor name, row), so any row can be made again. */
static TERN_MUST_CHECK tern_err *synth_row(void *ctx, size_t index, int64_t row, float *out) {
    const synth_rows *sr = ctx;
    const tern_wspec *s = sr->ts[index].spec;
    float mean, std;
    init_scale(s, sr->ple_width, &mean, &std);
    /* A tower's linears are named from the root, which is "model." in Hugging Face's layout and nothing in
     * mlx-vlm's: the values follow the name below it, so both layouts of one seed hold the same tower. */
    const char *name = s->rooted && !strncmp(s->name, "model.", 6) ? s->name + 6 : s->name;
    uint64_t st = hash_name(name, sr->seed) + (uint64_t)row * 0x632be59bd9b4e019ull;
    for (int64_t k = 0; k < s->shape[s->ndim - 1]; k++)
        out[k] = mean + std * normal01(&st);
    return NULL;
}

static TERN_MUST_CHECK tern_err *write_json(const char *dir, const char *name, json_t *v) {
    char *path = tern_path_join(dir, name);
    tern_err *e = path && v ? tern_json_save_file(v, path) : tern_errf(TERN_ENOMEM, "out of memory");
    free(path);
    json_decref(v);
    return e;
}

/* The encoder towers synth can add beside Gemma 4's text decoder. */
typedef struct tower_part {
    tern_wspec *specs;
    size_t n_specs;
    tern_raw_tensor *raw;
    size_t n_raw;
    void *arena;
    void (*free)(void *arena);
} tower_part;

/* Appends n values of size `size` from src to *dst (*len of them), growing it. */
static int append(void **dst, size_t *len, const void *src, size_t n, size_t size) {
    if (!n)
        return 0;
    void *v = realloc(*dst, (*len + n) * size);
    if (!v)
        return -1;
    memcpy((char *)v + *len * size, src, n * size);
    *dst = v;
    *len += n;
    return 0;
}

/* Gemma 4's tensor list for the config (the text decoder, and with o->audio / o->vision the towers: their float
 * tensors in *raw, malloc'd), the layout it is written in, its vocabulary and per-layer input widths. */
static TERN_MUST_CHECK tern_err *gemma4_specs(json_t *config, const tern_synth_opts *o, int quant, tern_wspec **specs, size_t *n,
                              tern_layout *layout, tern_raw_tensor **raw, size_t *n_raw, tower_part *towers,
                              int64_t *vocab, int64_t *ple_width) {
    tern_gemma4_config c;
    TERN_TRY(tern_gemma4_config_parse(config, &c));
    *vocab = c.vocab_size;
    *ple_width = c.hidden_size_per_layer_input;
    *layout = quant ? TERN_LAYOUT_MLX_VLM : TERN_LAYOUT_HF;
    tern_err *err = NULL;
    if (o->audio) {
        /* The tower and the ids of the Gemma 4 vocabulary's audio markers (the processor config's). */
        if (!json_is_object(json_object_get(config, "audio_config")))
            json_object_set_new(config, "audio_config", tern_gemma4_audio_synth_config(c.hidden_size));
        json_object_set_new(config, "audio_token_id", json_integer(258881));
        json_object_set_new(config, "boa_token_id", json_integer(256000));
        json_object_set_new(config, "eoa_token_id", json_integer(258883));
        json_object_set_new(config, "eoa_token_index", json_integer(258883));
        tower_part *t = &towers[0];
        t->free = tern_gemma4_audio_synth_free;
        err = tern_gemma4_audio_synth_tensors(config, quant, o->seed, &t->specs, &t->n_specs, &t->raw, &t->n_raw,
                                              &t->arena);
    }
    if (!err && o->vision) {
        /* The tower and the ids of the image markers. */
        if (!json_is_object(json_object_get(config, "vision_config")))
            json_object_set_new(config, "vision_config", tern_gemma4_vision_synth_config(c.hidden_size));
        json_object_set_new(config, "image_token_id", json_integer(258880));
        json_object_set_new(config, "boi_token_id", json_integer(255999));
        json_object_set_new(config, "eoi_token_id", json_integer(258882));
        tower_part *t = &towers[1];
        t->free = tern_gemma4_vision_synth_free;
        err = tern_gemma4_vision_synth_tensors(config, quant, o->seed, &t->specs, &t->n_specs, &t->raw, &t->n_raw,
                                               &t->arena);
    }
    if (!err)
        err = tern_gemma4_specs(&c, *layout, specs, n);
    for (int k = 0; k < 2 && !err; k++)
        if (append((void **)specs, n, towers[k].specs, towers[k].n_specs, sizeof **specs) ||
            append((void **)raw, n_raw, towers[k].raw, towers[k].n_raw, sizeof **raw))
            err = tern_errf(TERN_ENOMEM, "out of memory");
    return err;
}

tern_err *tern_synth_write(const json_t *config_in, const tern_synth_opts *o, const char *out_dir) {
    if ((o->dtype == TERN_SYNTH_Q8 || o->dtype == TERN_SYNTH_Q4) &&
        (o->group < 8 || (o->group & (o->group - 1))))
        return tern_errf(TERN_EINVAL, "group size %d must be a power of two >= 8 (32, 64, 128)", o->group);
    json_t *config = json_deep_copy(config_in);
    if (!config)
        return tern_errf(TERN_ENOMEM, "out of memory");
    int quant = o->dtype == TERN_SYNTH_Q8 || o->dtype == TERN_SYNTH_Q4;
    const char *dtype_name = o->dtype == TERN_SYNTH_F32 ? "float32" : o->dtype == TERN_SYNTH_F16 ? "float16" : "bfloat16";
    json_object_set_new(config, "dtype", json_string(dtype_name));
    if (!json_object_get(config, "model_type")) /* a hand-written config: what synth writes is Gemma 4 */
        json_object_set_new(config, "model_type", json_string("gemma4"));
    json_t *tc = json_object_get(config, "text_config");
    if (json_is_object(tc))
        json_object_set_new(tc, "dtype", json_string(dtype_name));
    /* A quantization section already in the config (with per-module overrides) is kept as given. */
    if (quant && !json_object_get(config, "quantization")) {
        json_t *q = json_pack("{s:i,s:i,s:s}", "group_size", o->group, "bits", o->dtype == TERN_SYNTH_Q8 ? 8 : 4,
                              "mode", "affine");
        json_object_set(config, "quantization", q);
        json_object_set_new(config, "quantization_config", q);
    }
    if (!quant) {
        json_object_del(config, "quantization");
        json_object_del(config, "quantization_config");
    }
    tern_quant_config *qc = NULL;
    tern_wspec *specs = NULL;
    tern_raw_tensor *raw = NULL;
    tower_part towers[2] = {{0}};
    tern_out_tensor *plan = NULL;
    size_t n = 0, n_raw = 0;
    synth_rows sr = {.seed = o->seed};
    int64_t vocab = 0;
    tern_layout layout = TERN_LAYOUT_MLX_LM;
    const tern_arch *arch = tern_arch_find(json_string_value(json_object_get(config, "model_type")) ?
                                           json_string_value(json_object_get(config, "model_type")) : "");
    tern_err *err = NULL;
    const int gemma = !(arch && arch->config_specs);
    if (!gemma) { /* a family that lists its tensors from the config alone */
        err = o->audio || o->vision ? tern_errf(TERN_EINVAL, "--audio/--vision: only Gemma 4 has the towers") : NULL;
        if (!err)
            err = arch->config_specs(config, &specs, &n);
        vocab = json_integer_value(json_object_get(config, "vocab_size"));
    } else {
        err = gemma4_specs(config, o, quant, &specs, &n, &layout, &raw, &n_raw, towers, &vocab, &sr.ple_width);
    }
    if (!err)
        err = tern_quant_config_parse(config, &qc);
    if (!err)
        err = tern_mkdir_p(out_dir);
    if (!err && !(plan = calloc(n, sizeof *plan)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    tern_dtype fdt = o->dtype == TERN_SYNTH_F32 ? TERN_DT_F32 : o->dtype == TERN_SYNTH_F16 ? TERN_DT_F16 : TERN_DT_BF16;
    for (size_t i = 0; i < n && !err; i++)
        tern_ckpt_plan(&plan[i], &specs[i], layout, qc, fdt, TERN_DT_BF16);
    sr.ts = plan;
    if (!err)
        err = tern_ckpt_write(out_dir, plan, n, raw, n_raw, synth_row, &sr, o->shard_bytes, quant ? "mlx" : "pt");
    if (!err && (o->audio || o->vision)) {
        json_t *pc = json_pack("{s:s}", "processor_class", "Gemma4Processor");
        if (o->audio) {
            json_object_set_new(pc, "audio_seq_length", json_integer(750));
            json_object_set_new(pc, "audio_ms_per_token", json_integer(40));
            json_object_set_new(pc, "feature_extractor",
                                json_pack("{s:s,s:i,s:i,s:f,s:b,s:f,s:f,s:f,s:f,s:f,s:n,s:n}", "feature_extractor_type",
                                          "Gemma4AudioFeatureExtractor", "feature_size", 128, "sampling_rate", 16000,
                                          "padding_value", 0.0, "return_attention_mask", 1, "frame_length_ms", 20.0,
                                          "hop_length_ms", 10.0, "min_frequency", 0.0, "max_frequency", 8000.0,
                                          "mel_floor", 0.001, "per_bin_mean", "per_bin_stddev"));
        }
        if (o->vision)
            json_object_set_new(pc, "image_processor",
                                json_pack("{s:s,s:b,s:[f,f,f],s:[f,f,f],s:i,s:i,s:i}", "image_processor_type",
                                          "Gemma4ImageProcessor", "do_normalize", 0, "image_mean", 0.0, 0.0, 0.0,
                                          "image_std", 1.0, 1.0, 1.0, "patch_size", 16, "pooling_kernel_size", 3,
                                          "max_soft_tokens", 280));
        err = write_json(out_dir, "processor_config.json", pc);
    }
    if (!err)
        err = write_json(out_dir, "config.json", json_incref(config));
    if (!err && gemma)
        err = write_json(out_dir, "generation_config.json",
                         json_pack("{s:i,s:[i,i],s:i}", "bos_token_id", 2, "eos_token_id", 1, 106, "pad_token_id", 0));
    else if (!err)
        err = write_json(out_dir, "generation_config.json",
                         json_pack("{s:O?,s:O?}", "bos_token_id", json_object_get(config, "bos_token_id"),
                                   "eos_token_id", json_object_get(config, "eos_token_id")));
    if (!err)
        err = tern_hf_export_tokenizer(o->vocab_gguf, vocab, out_dir);
    free(plan);
    free(specs);
    for (int k = 0; k < 2; k++)
        if (towers[k].free)
            towers[k].free(towers[k].arena);
    free(raw);
    tern_quant_config_free(qc);
    json_decref(config);
    return err;
}
