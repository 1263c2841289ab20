/* dense_config.c — config.json -> tern_dense_config, the tensor list and the RoPE frequencies of the dense decoder.
 *
 * Defaults for absent keys are the ones transformers' LlamaConfig / Qwen2Config / Qwen3Config take: eps 1e-6,
 * RoPE theta 10000, as many KV heads as heads, head_dim = hidden / heads, untied head, no biases. RoPE settings are
 * read from "rope_scaling" (transformers 4) or "rope_parameters" (transformers 5). */
#include "models/dense.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"

#define GETI(key, dflt, lo, hi, dst)                                                        \
    do {                                                                                    \
        int64_t v_;                                                                         \
        TERN_TRY(tern_json_get_int(root, key, dflt, lo, hi, &v_));                          \
        (dst) = v_;                                                                         \
    } while (0)

static TERN_MUST_CHECK tern_err *parse_rope(const json_t *root, tern_dense_config *c) {
    TERN_TRY(tern_json_get_num(root, "rope_theta", 10000.0, &c->rope_theta));
    const json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs || json_is_null(rs))
        rs = json_object_get(root, "rope_parameters");
    c->rope = TERN_DROPE_DEFAULT;
    if (!rs || json_is_null(rs))
        return NULL;
    if (!json_is_object(rs))
        return tern_errf(TERN_EFORMAT, "\"rope_scaling\" must be an object, got %s", tern_json_type_name(rs));
    TERN_TRY(tern_json_get_num(rs, "rope_theta", c->rope_theta, &c->rope_theta));
    const json_t *t = json_object_get(rs, "rope_type");
    if (!t)
        t = json_object_get(rs, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : "default";
    if (!strcmp(type, "default"))
        return NULL;
    TERN_TRY(tern_json_get_num(rs, "factor", 1.0, &c->rope_factor));
    if (!(c->rope_factor > 0))
        return tern_errf(TERN_EFORMAT, "\"rope_scaling\".factor must be positive, got %g", c->rope_factor);
    if (!strcmp(type, "linear")) {
        c->rope = TERN_DROPE_LINEAR;
        return NULL;
    }
    if (!strcmp(type, "llama3")) {
        c->rope = TERN_DROPE_LLAMA3;
        TERN_TRY(tern_json_get_num(rs, "low_freq_factor", 1.0, &c->low_freq_factor));
        TERN_TRY(tern_json_get_num(rs, "high_freq_factor", 4.0, &c->high_freq_factor));
        TERN_TRY(tern_json_get_int(rs, "original_max_position_embeddings", 8192, 1, INT32_MAX, &c->rope_original_ctx));
        if (!(c->high_freq_factor > c->low_freq_factor) || !(c->low_freq_factor > 0))
            return tern_errf(TERN_EFORMAT, "\"rope_scaling\": llama3 needs high_freq_factor > low_freq_factor > 0, got "
                             "%g and %g", c->high_freq_factor, c->low_freq_factor);
        return NULL;
    }
    return tern_errf(TERN_EUNSUPPORTED, "\"rope_scaling\" type \"%s\" is not one tern runs (it runs: default, "
                     "linear, llama3)", type);
}

/* eos_token_id: one id or a list. */
static TERN_MUST_CHECK tern_err *parse_eos(const json_t *root, tern_dense_config *c) {
    const json_t *e = json_object_get(root, "eos_token_id");
    if (!e || json_is_null(e))
        return NULL;
    const size_t n = json_is_array(e) ? json_array_size(e) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_is_array(e) ? json_array_get(e, i) : e;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tern_errf(TERN_EFORMAT, "\"eos_token_id\" must be a non-negative integer or a list of them");
        if (c->n_eos < TERN_DENSE_MAX_EOS)
            c->eos[c->n_eos++] = json_integer_value(v);
    }
    return NULL;
}

tern_err *tern_dense_config_parse(const tern_dense_family *f, const json_t *root, tern_dense_config *c) {
    memset(c, 0, sizeof *c);
    const json_t *act = json_object_get(root, "hidden_act");
    if (act && !(json_is_string(act) && !strcmp(json_string_value(act), "silu")))
        return tern_errf(TERN_EUNSUPPORTED, "\"hidden_act\" must be \"silu\" for %s, got %s", f->name,
                         json_is_string(act) ? json_string_value(act) : tern_json_type_name(act));
    GETI("vocab_size", -1, 1, INT32_MAX, c->vocab);
    GETI("hidden_size", -1, 1, 1 << 20, c->hidden);
    GETI("intermediate_size", -1, 1, 1 << 22, c->ffn);
    GETI("num_hidden_layers", -1, 1, TERN_LM_MAX_LAYERS, c->n_layers);
    GETI("num_attention_heads", -1, 1, 4096, c->n_heads);
    if (c->vocab < 0 || c->hidden < 0 || c->ffn < 0 || c->n_layers < 0 || c->n_heads < 0)
        return tern_errf(TERN_EFORMAT, "%s needs vocab_size, hidden_size, intermediate_size, num_hidden_layers and "
                         "num_attention_heads", f->name);
    GETI("num_key_value_heads", c->n_heads, 1, c->n_heads, c->n_kv_heads);
    GETI("head_dim", c->hidden / c->n_heads, 2, 4096, c->head_dim);
    GETI("max_position_embeddings", 0, 0, INT32_MAX, c->ctx_train);
    TERN_TRY(tern_json_get_num(root, "rms_norm_eps", 1e-6, &c->eps));
    int tied, bias, mlp_bias, swa;
    TERN_TRY(tern_json_get_bool(root, "tie_word_embeddings", 0, &tied));
    TERN_TRY(tern_json_get_bool(root, "attention_bias", 0, &bias));
    TERN_TRY(tern_json_get_bool(root, "mlp_bias", 0, &mlp_bias));
    /* Qwen writes a sliding_window it does not use unless use_sliding_window says so; Mistral's applies. */
    TERN_TRY(tern_json_get_bool(root, "use_sliding_window", !json_object_get(root, "use_sliding_window"), &swa));
    c->tied = tied;
    c->qkv_bias = bias || f->qkv_bias;
    c->o_bias = bias;
    c->qk_norm = f->qk_norm;
    if (swa) {
        if (json_object_get(root, "max_window_layers") && json_object_get(root, "use_sliding_window"))
            return tern_errf(TERN_EUNSUPPORTED, "\"use_sliding_window\": sliding attention on some layers only "
                             "(max_window_layers) is not something tern runs");
        GETI("sliding_window", 0, 0, INT32_MAX, c->window);
    }
    if (mlp_bias)
        return tern_errf(TERN_EUNSUPPORTED, "\"mlp_bias\": MLP biases are not something tern runs");
    if (c->n_heads % c->n_kv_heads)
        return tern_errf(TERN_EFORMAT, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                         (long long)c->n_heads, (long long)c->n_kv_heads);
    if (c->head_dim % 2)
        return tern_errf(TERN_EFORMAT, "head_dim %lld is odd (RoPE turns pairs)", (long long)c->head_dim);
    if (!(c->eps > 0 && c->eps < 1))
        return tern_errf(TERN_EFORMAT, "\"rms_norm_eps\" %g is not in (0, 1)", c->eps);
    TERN_TRY(parse_rope(root, c));
    if (!(c->rope_theta > 1))
        return tern_errf(TERN_EFORMAT, "\"rope_theta\" %g must be above 1", c->rope_theta);
    /* GGUF: the stand-in config says how the file's RoPE differs (dense_gguf.c). */
    TERN_TRY(tern_json_get_bool(root, "tern_rope_pairs", 0, &c->rope_pairs));
    TERN_TRY(tern_json_get_bool(root, "tern_rope_freqs", 0, &c->rope_freqs_tensor));
    return parse_eos(root, c);
}

#define LIN(out, in, ...) fail |= tern_wspec_add(&l, TERN_WK_LINEAR, 1, 2, out, in, 0, __VA_ARGS__)
#define NORM(n, ...) fail |= tern_wspec_add(&l, TERN_WK_NORM, 1, 1, n, 0, 0, __VA_ARGS__)
#define BIAS(n, ...) fail |= tern_wspec_add(&l, TERN_WK_BIAS, 0, 1, n, 0, 0, __VA_ARGS__)

tern_err *tern_dense_specs(const tern_dense_config *c, tern_wspec **specs, size_t *n) {
    tern_wspec_list l = {0};
    int fail = 0;
    const int64_t H = c->hidden, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    fail |= tern_wspec_add(&l, TERN_WK_EMBED, 1, 2, c->vocab, H, 0, "embed_tokens");
    if (!fail)
        l.v[l.n - 1].head = c->tied;
    if (c->rope_freqs_tensor)
        fail |= tern_wspec_add(&l, TERN_WK_SCALE, 1, 1, c->head_dim / 2, 0, 0, "rope_freqs");
    for (int64_t i = 0; i < c->n_layers; i++) {
        NORM(H, "layers.%lld.input_layernorm", (long long)i);
        LIN(q, H, "layers.%lld.self_attn.q_proj", (long long)i);
        LIN(kv, H, "layers.%lld.self_attn.k_proj", (long long)i);
        LIN(kv, H, "layers.%lld.self_attn.v_proj", (long long)i);
        LIN(H, q, "layers.%lld.self_attn.o_proj", (long long)i);
        if (c->qkv_bias) {
            BIAS(q, "layers.%lld.self_attn.q_proj.bias", (long long)i);
            BIAS(kv, "layers.%lld.self_attn.k_proj.bias", (long long)i);
            BIAS(kv, "layers.%lld.self_attn.v_proj.bias", (long long)i);
        }
        if (c->o_bias)
            BIAS(H, "layers.%lld.self_attn.o_proj.bias", (long long)i);
        if (c->qk_norm) {
            NORM(c->head_dim, "layers.%lld.self_attn.q_norm", (long long)i);
            NORM(c->head_dim, "layers.%lld.self_attn.k_norm", (long long)i);
        }
        NORM(H, "layers.%lld.post_attention_layernorm", (long long)i);
        LIN(c->ffn, H, "layers.%lld.mlp.gate_proj", (long long)i);
        LIN(c->ffn, H, "layers.%lld.mlp.up_proj", (long long)i);
        LIN(H, c->ffn, "layers.%lld.mlp.down_proj", (long long)i);
    }
    NORM(H, "norm");
    if (!c->tied) {
        LIN(c->vocab, H, "lm_head");
        if (!fail)
            l.v[l.n - 1].rooted = 1;
    }
    if (fail) {
        free(l.v);
        return tern_errf(TERN_ENOMEM, "out of memory listing tensors");
    }
    *specs = l.v;
    *n = l.n;
    return NULL;
}

tern_err *tern_dense_config_specs(const tern_dense_family *f, const json_t *root, tern_wspec **specs, size_t *n) {
    tern_dense_config c;
    TERN_TRY(tern_dense_config_parse(f, root, &c));
    return tern_dense_specs(&c, specs, n);
}

float *tern_dense_inv_freq(const tern_dense_config *c) {
    const int64_t half = c->head_dim / 2;
    float *f = calloc((size_t)half, sizeof *f);
    if (!f)
        return NULL;
    for (int64_t i = 0; i < half; i++) {
        double inv = pow(c->rope_theta, -2.0 * (double)i / (double)c->head_dim);
        if (c->rope == TERN_DROPE_LINEAR) {
            inv /= c->rope_factor;
        } else if (c->rope == TERN_DROPE_LLAMA3) {
            /* Long wavelengths slowed by the factor, short ones kept, the band between blended. */
            const double wavelen = 2 * M_PI / inv, old = (double)c->rope_original_ctx;
            const double low_wavelen = old / c->low_freq_factor, high_wavelen = old / c->high_freq_factor;
            if (wavelen > low_wavelen) {
                inv /= c->rope_factor;
            } else if (wavelen >= high_wavelen) {
                const double smooth = (old / wavelen - c->low_freq_factor) / (c->high_freq_factor - c->low_freq_factor);
                inv = (1 - smooth) * inv / c->rope_factor + smooth * inv;
            }
        }
        f[i] = (float)inv;
    }
    return f;
}
