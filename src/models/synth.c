/* synth.c — synthetic Gemma 4 checkpoints (see synth.h). */
#include "models/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/json_util.h"
#include "formats/model_config.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "formats/st_sharded.h"
#include "models/gemma4_weights.h"
#include "tensor/quant_mlx.h"
#include "tokenizer/hf_export.h"

/* ---- presets --------------------------------------------------------------------------- */

typedef struct preset {
    const char *name;
    int64_t hidden, ffn, layers, heads, kv, global_kv, ple, kv_shared, window, experts, top_k, moe_ffn;
    int pattern, double_wide, k_eq_v;
} preset;

/* Shapes from GEMMA4.md §2; "tiny" is the demo/test size with the real vocabulary;
 * "e4b-moe-like" has the 26B-A4B block structure (MoE beside a dense MLP, k_eq_v,
 * global KV heads) at a size this machine can run. */
static const preset presets[] = {
    {"tiny", 128, 512, 6, 4, 2, 2, 16, 2, 16, 0, 0, 0, 3, 1, 0},
    {"e2b", 1536, 6144, 35, 8, 1, 1, 256, 20, 512, 0, 0, 0, 5, 1, 0},
    {"e4b", 2560, 10240, 42, 8, 2, 2, 256, 18, 512, 0, 0, 0, 6, 0, 0},
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

tern_err *tern_synth_config(const char *preset_or_path, json_t **out) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(preset_or_path, presets[i].name)) {
            *out = preset_config(&presets[i]);
            return *out ? NULL : tern_errf(TERN_ENOMEM, "out of memory building preset");
        }
    if (!tern_is_file(preset_or_path))
        return tern_errf(TERN_EINVAL, "unknown preset '%s' (tiny, e2b, e4b, e4b-moe-like, or a config.json path)",
                         preset_or_path);
    return tern_json_load_file(preset_or_path, 16u << 20, out);
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

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_name(const char *s, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* An approximately standard normal value: the sum of four 16-bit uniforms (Irwin–Hall), rescaled.
 * Synthetic weights only need the right scale, and this is several times cheaper than Box–Muller. */
static float normal01(uint64_t *s) {
    uint64_t r = splitmix64(s);
    float u = (float)((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) * (1.0f / 65536.0f);
    return (u - 2.0f) * 1.7320508f;
}

/* ---- what gets stored ----------------------------------------------------------------------- */

/* One logical tensor of the architecture and how it is stored (1 tensor, or 3 when quantized). */
typedef struct planned {
    const tern_wspec *spec;
    int quantized, bits, group; /* MLX affine parameters when quantized */
    tern_st_spec parts[3];
    char names[3][160];
} planned;

static int nparts(const planned *p) { return p->quantized ? 3 : 1; }

static int quantizable_shape(int bits, int group, int64_t in) {
    tern_err *e = tern_mlx_check(bits, group, in);
    int ok = e == NULL;
    tern_err_free(e);
    return ok;
}

/* Plans one tensor: quantized (as the quantization config says for its module, when its width
 * allows) or stored in the float dtype. */
static void plan_tensor(planned *p, const tern_wspec *s, tern_layout layout, const tern_synth_opts *o,
                        const tern_quant_config *qc) {
    memset(p, 0, sizeof *p);
    p->spec = s;
    int quantizable = s->kind == TERN_WK_LINEAR || s->kind == TERN_WK_EMBED || s->kind == TERN_WK_EXPERTS;
    int64_t in = s->shape[s->ndim - 1];
    char module[160];
    snprintf(module, sizeof module, "%s%s", tern_layout_prefix(layout), s->name);
    tern_quant_params qp = tern_quant_config_lookup(qc, module);
    p->bits = qp.bits;
    p->group = qp.group_size;
    p->quantized = qp.quantized && qp.mode == TERN_QMODE_AFFINE && quantizable && s->suffix &&
                   quantizable_shape(qp.bits, qp.group_size, in);
    tern_dtype fdt = o->dtype == TERN_SYNTH_F32 ? TERN_DT_F32 : o->dtype == TERN_SYNTH_F16 ? TERN_DT_F16 : TERN_DT_BF16;
    static const char *parts[3] = {"weight", "scales", "biases"};
    for (int k = 0; k < nparts(p); k++) {
        tern_st_spec *st = &p->parts[k];
        tern_wspec_full_name(s, layout, p->quantized ? parts[k] : NULL, p->names[k], sizeof p->names[k]);
        st->name = p->names[k];
        st->ndim = s->ndim;
        memcpy(st->shape, s->shape, sizeof s->shape);
        st->dtype = fdt;
        if (p->quantized) {
            st->dtype = k == 0 ? TERN_DT_U32 : TERN_DT_BF16;
            st->shape[s->ndim - 1] = k == 0 ? tern_mlx_row_words(in, p->bits) : in / p->group;
        }
    }
}

/* Mean and spread of a tensor's values: linear N(0, 1/sqrt(in)); embeddings scaled so that
 * the looked-up vector times sqrt(its width) is ~N(0, 1); norms and scales near 1. */
static void init_scale(const tern_wspec *s, const tern_gemma4_config *c, float *mean, float *std) {
    int64_t in = s->shape[s->ndim - 1];
    *mean = 0.0f;
    *std = 1.0f;
    switch (s->kind) {
    case TERN_WK_LINEAR:
    case TERN_WK_EXPERTS: *std = 1.0f / sqrtf((float)in); break;
    case TERN_WK_EMBED:
        *std = 1.0f / sqrtf((float)(strstr(s->name, "per_layer") ? c->hidden_size_per_layer_input : in));
        break;
    case TERN_WK_NORM:
    case TERN_WK_SCALE:
        *mean = 1.0f;
        *std = 0.05f;
        break;
    }
}

/* ---- writing ---------------------------------------------------------------------------------- */

/* Tensor bytes go through a staging buffer so the writer sees large writes. */
typedef struct stager {
    tern_sharded_writer *w;
    unsigned char *buf;
    size_t used, cap;
} stager;

static tern_err *put(stager *sw, const void *data, size_t len) {
    if (sw->used + len > sw->cap) {
        TERN_TRY(tern_sharded_write(sw->w, sw->buf, sw->used));
        sw->used = 0;
        if (len > sw->cap)
            return tern_sharded_write(sw->w, data, len);
    }
    memcpy(sw->buf + sw->used, data, len);
    sw->used += len;
    return NULL;
}

/* Writes a tensor's values (`scales_pass` 0), or for a quantized tensor in the second pass its scales
 * and biases: they are regenerated from the same seed rather than held, so memory stays bounded. */
static tern_err *write_tensor(stager *sw, const planned *p, const tern_gemma4_config *c,
                              const tern_synth_opts *o, int scales_pass) {
    const tern_wspec *s = p->spec;
    int64_t in = s->shape[s->ndim - 1], rows = 1;
    for (int i = 0; i + 1 < s->ndim; i++)
        rows *= s->shape[i];
    float mean, std;
    init_scale(s, c, &mean, &std);
    uint64_t base = hash_name(s->name, o->seed);
    const int bits = p->bits, group = p->group;
    int64_t words = p->quantized ? tern_mlx_row_words(in, bits) : 0, groups = p->quantized ? in / group : 0;
    float *x = malloc((size_t)in * sizeof *x);
    uint16_t *h = malloc((size_t)in * sizeof *h);
    uint32_t *q = p->quantized ? malloc((size_t)words * 4) : NULL;
    uint16_t *scales = p->quantized ? malloc((size_t)(rows * groups) * 2) : NULL;
    uint16_t *biases = p->quantized ? malloc((size_t)(rows * groups) * 2) : NULL;
    tern_err *err = NULL;
    if (!x || !h || (p->quantized && (!q || !scales || !biases)))
        err = tern_errf(TERN_ENOMEM, "out of memory generating %s", s->name);
    for (int64_t r = 0; r < rows && !err; r++) {
        uint64_t st = base + (uint64_t)r * 0x632be59bd9b4e019ull;
        for (int64_t k = 0; k < in; k++)
            x[k] = mean + std * normal01(&st);
        if (p->quantized) {
            tern_mlx_quantize_row(x, in, bits, group, TERN_DT_BF16, q, scales + r * groups, biases + r * groups);
            if (!scales_pass)
                err = put(sw, q, (size_t)words * 4);
        } else if (p->parts[0].dtype == TERN_DT_F32) {
            err = put(sw, x, (size_t)in * 4);
        } else if (p->parts[0].dtype == TERN_DT_F16) {
            tern_f32_to_f16_row(x, h, (size_t)in);
            err = put(sw, h, (size_t)in * 2);
        } else {
            tern_f32_to_bf16_row(x, h, (size_t)in);
            err = put(sw, h, (size_t)in * 2);
        }
    }
    if (!err && p->quantized && scales_pass)
        err = put(sw, scales, (size_t)(rows * groups) * 2);
    if (!err && p->quantized && scales_pass)
        err = put(sw, biases, (size_t)(rows * groups) * 2);
    free(x);
    free(h);
    free(q);
    free(scales);
    free(biases);
    return err;
}

/* Writes every planned tensor: 4-byte elements first (f32, packed u32), then 2-byte ones (bf16/f16
 * tensors, scales, biases), so every tensor's data stays aligned to its element size. */
static tern_err *write_weights(const char *dir, planned *plan, size_t n, const tern_gemma4_config *c,
                               const tern_synth_opts *o, const char *format) {
    tern_st_spec *specs = malloc((3 * n + 1) * sizeof *specs);
    if (!specs)
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < nparts(&plan[i]); j++)
                if ((tern_dtype_size(plan[i].parts[j].dtype) == 4) == (pass == 0))
                    specs[k++] = plan[i].parts[j];
    stager sw = {0};
    sw.cap = 4u << 20;
    sw.buf = malloc(sw.cap);
    tern_err *err = sw.buf ? tern_sharded_open(dir, specs, k, o->shard_bytes, format, &sw.w)
                           : tern_errf(TERN_ENOMEM, "out of memory");
    free(specs);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n && !err; i++) {
            int wide = tern_dtype_size(plan[i].parts[0].dtype) == 4;
            if ((!wide && pass == 0) || (wide && pass == 1 && !plan[i].quantized))
                continue;
            err = tern_err_wrap(write_tensor(&sw, &plan[i], c, o, pass == 1 && plan[i].quantized), "%s", dir);
        }
    if (!err && sw.used)
        err = tern_sharded_write(sw.w, sw.buf, sw.used);
    if (sw.w) {
        tern_err *ce = tern_sharded_close(sw.w);
        if (!err)
            err = ce;
        else
            tern_err_free(ce);
    }
    free(sw.buf);
    return err;
}

static tern_err *write_json(const char *dir, const char *name, json_t *v) {
    char *path = tern_path_join(dir, name);
    tern_err *e = path && v ? tern_json_save_file(v, path) : tern_errf(TERN_ENOMEM, "out of memory");
    free(path);
    json_decref(v);
    return e;
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
    tern_gemma4_config c;
    tern_quant_config *qc = NULL;
    tern_wspec *specs = NULL;
    planned *plan = NULL;
    size_t n = 0;
    tern_err *err = tern_gemma4_config_parse(config, &c);
    if (!err)
        err = tern_quant_config_parse(config, &qc);
    if (!err)
        err = tern_mkdir_p(out_dir);
    tern_layout layout = quant ? TERN_LAYOUT_MLX_VLM : TERN_LAYOUT_HF;
    if (!err)
        err = tern_gemma4_specs(&c, layout, &specs, &n);
    if (!err && !(plan = calloc(n, sizeof *plan)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !err; i++)
        plan_tensor(&plan[i], &specs[i], layout, o, qc);
    if (!err)
        err = write_weights(out_dir, plan, n, &c, o, quant ? "mlx" : "pt");
    if (!err)
        err = write_json(out_dir, "config.json", json_incref(config));
    if (!err)
        err = write_json(out_dir, "generation_config.json",
                         json_pack("{s:i,s:[i,i],s:i}", "bos_token_id", 2, "eos_token_id", 1, 106, "pad_token_id", 0));
    if (!err)
        err = tern_hf_export_tokenizer(o->vocab_gguf, c.vocab_size, out_dir);
    free(plan);
    free(specs);
    tern_quant_config_free(qc);
    json_decref(config);
    return err;
}
