/* gemma4_config.c — config.json -> tern_gemma4_config, with defaults and validation.
 *
 * Defaults for absent keys follow the published Gemma 4 configs (GEMMA4.md §2, the
 * e2b column for sizes): vocab 262144, eps 1e-6, head dims 256/512, window 512,
 * soft-cap 30, tied embeddings, RoPE 1e4 (sliding, default) / 1e6 (full,
 * proportional, 25%). An explicit `null` soft-cap means "no soft-cap". */
#include "models/gemma4_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"

#define GETI(obj, key, dflt, lo, hi, dst)                                   \
    do {                                                                    \
        int64_t v_;                                                         \
        TERN_TRY(tern_err_wrap(tern_json_get_int(obj, key, dflt, lo, hi, &v_), "%s", where)); \
        (dst) = v_;                                                         \
    } while (0)

static TERN_MUST_CHECK tern_err *parse_rope(const json_t *tc, tern_gemma4_config *c, const char *where) {
    c->rope[TERN_LAYER_SLIDING] = (tern_rope_params){TERN_ROPE_DEFAULT, 10000.0, 1.0, 1.0};
    c->rope[TERN_LAYER_FULL] = (tern_rope_params){TERN_ROPE_PROPORTIONAL, 1000000.0, 0.25, 1.0};
    const json_t *rp = json_object_get(tc, "rope_parameters");
    if (!rp || json_is_null(rp)) {
        /* Older-style keys: rope_theta (full) and rope_local_base_freq (sliding). */
        TERN_TRY(tern_err_wrap(tern_json_get_num(tc, "rope_theta", 1000000.0, &c->rope[TERN_LAYER_FULL].theta), "%s", where));
        TERN_TRY(tern_err_wrap(tern_json_get_num(tc, "rope_local_base_freq", 10000.0, &c->rope[TERN_LAYER_SLIDING].theta), "%s", where));
        return NULL;
    }
    if (!json_is_object(rp))
        return tern_errf(TERN_EFORMAT, "%s: \"rope_parameters\" must be an object", where);
    static const char *names[2] = {"sliding_attention", "full_attention"};
    for (int t = 0; t < 2; t++) {
        const json_t *p = json_object_get(rp, names[t]);
        if (!p || json_is_null(p))
            continue;
        if (!json_is_object(p))
            return tern_errf(TERN_EFORMAT, "%s: \"rope_parameters.%s\" must be an object", where, names[t]);
        tern_rope_params *r = &c->rope[t];
        const json_t *type = json_object_get(p, "rope_type");
        if (type && !json_is_null(type)) {
            if (!json_is_string(type))
                return tern_errf(TERN_EFORMAT, "%s: \"rope_parameters.%s.rope_type\" must be a string", where, names[t]);
            const char *s = json_string_value(type);
            if (!strcmp(s, "default"))
                r->kind = TERN_ROPE_DEFAULT;
            else if (!strcmp(s, "proportional"))
                r->kind = TERN_ROPE_PROPORTIONAL;
            else
                return tern_errf(TERN_EUNSUPPORTED,
                                 "%s: rope_parameters.%s.rope_type \"%s\" is not supported (default, proportional)",
                                 where, names[t], s);
        }
        tern_err *e = tern_json_get_num(p, "rope_theta", r->theta, &r->theta);
        if (!e)
            e = tern_json_get_num(p, "partial_rotary_factor", r->kind == TERN_ROPE_PROPORTIONAL ? r->partial_rotary_factor : 1.0,
                                  &r->partial_rotary_factor);
        if (!e)
            e = tern_json_get_num(p, "factor", 1.0, &r->factor);
        if (e)
            return tern_err_wrap(e, "%s: rope_parameters.%s", where, names[t]);
        if (r->theta <= 0 || r->partial_rotary_factor <= 0 || r->partial_rotary_factor > 1 || r->factor <= 0)
            return tern_errf(TERN_EFORMAT,
                             "%s: rope_parameters.%s: rope_theta must be > 0, partial_rotary_factor in (0, 1], factor > 0",
                             where, names[t]);
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_layer_types(const json_t *tc, tern_gemma4_config *c, const char *where) {
    const json_t *lt = json_object_get(tc, "layer_types");
    int64_t n = c->num_hidden_layers;
    if (!lt || json_is_null(lt)) {
        int64_t pattern;
        GETI(tc, "sliding_window_pattern", 5, 1, TERN_MAX_LAYERS, pattern);
        for (int64_t i = 0; i < n; i++)
            c->layer_types[i] = ((i + 1) % pattern == 0 || i == n - 1) ? TERN_LAYER_FULL : TERN_LAYER_SLIDING;
        return NULL;
    }
    if (!json_is_array(lt))
        return tern_errf(TERN_EFORMAT, "%s: \"layer_types\" must be a list", where);
    if ((int64_t)json_array_size(lt) != n)
        return tern_errf(TERN_EFORMAT, "%s: \"layer_types\" has %zu entries but num_hidden_layers is %lld", where,
                         json_array_size(lt), (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (s && !strcmp(s, "sliding_attention"))
            c->layer_types[i] = TERN_LAYER_SLIDING;
        else if (s && !strcmp(s, "full_attention"))
            c->layer_types[i] = TERN_LAYER_FULL;
        else
            return tern_errf(TERN_EFORMAT,
                             "%s: layer_types[%lld] must be \"sliding_attention\" or \"full_attention\"", where,
                             (long long)i);
    }
    return NULL;
}

static void add_eos(tern_gemma4_config *c, int64_t id) {
    for (int k = 0; k < c->n_eos; k++)
        if (c->eos_token_ids[k] == id)
            return;
    if (c->n_eos < TERN_MAX_EOS)
        c->eos_token_ids[c->n_eos++] = id;
}

/* eos_token_id may be one integer or a list; ids from every level are merged. */
static TERN_MUST_CHECK tern_err *parse_eos(const json_t *obj, tern_gemma4_config *c) {
    const json_t *e = json_object_get(obj, "eos_token_id");
    if (!e || json_is_null(e))
        return NULL;
    if (json_is_integer(e) && json_integer_value(e) >= 0) {
        add_eos(c, json_integer_value(e));
        return NULL;
    }
    if (!json_is_array(e))
        return tern_errf(TERN_EFORMAT, "\"eos_token_id\" must be a non-negative integer or a list of them");
    size_t i;
    json_t *v;
    json_array_foreach(e, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tern_errf(TERN_EFORMAT, "\"eos_token_id\"[%zu] must be a non-negative integer", i);
        add_eos(c, json_integer_value(v));
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *validate(const tern_gemma4_config *c, const char *w) {
    if (c->num_attention_heads % c->num_key_value_heads)
        return tern_errf(TERN_EFORMAT, "%s: num_attention_heads (%lld) is not a multiple of num_key_value_heads (%lld)",
                         w, (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if (c->attention_k_eq_v && c->num_attention_heads % c->num_global_key_value_heads)
        return tern_errf(TERN_EFORMAT,
                         "%s: num_attention_heads (%lld) is not a multiple of num_global_key_value_heads (%lld)", w,
                         (long long)c->num_attention_heads, (long long)c->num_global_key_value_heads);
    if (c->head_dim % 2 || c->global_head_dim % 2)
        return tern_errf(TERN_EFORMAT, "%s: head_dim and global_head_dim must be even (RoPE rotates pairs)", w);
    if (c->num_kv_shared_layers >= c->num_hidden_layers && !c->reads_other_cache)
        return tern_errf(TERN_EFORMAT, "%s: num_kv_shared_layers (%lld) must be below num_hidden_layers (%lld)", w,
                         (long long)c->num_kv_shared_layers, (long long)c->num_hidden_layers);
    int first = tern_gemma4_first_shared(c);
    for (int l = first; l < c->num_hidden_layers && !c->reads_other_cache; l++)
        if (tern_gemma4_kv_source(c, l) < 0)
            return tern_errf(TERN_EFORMAT,
                             "%s: KV-shared layer %d is %s but no earlier layer of that type owns a cache", w, l,
                             c->layer_types[l] == TERN_LAYER_FULL ? "full_attention" : "sliding_attention");
    if (c->hidden_size_per_layer_input > 0 && c->vocab_size_per_layer_input <= 0)
        return tern_errf(TERN_EFORMAT, "%s: vocab_size_per_layer_input must be > 0 with per-layer inputs", w);
    /* Soft tokens (audio) read the pad token's per-layer row. */
    if (c->hidden_size_per_layer_input > 0 && c->pad_token_id >= c->vocab_size_per_layer_input)
        return tern_errf(TERN_EFORMAT, "%s: pad_token_id %lld is outside the per-layer vocabulary of %lld", w,
                         (long long)c->pad_token_id, (long long)c->vocab_size_per_layer_input);
    if (c->enable_moe_block) {
        if (c->num_experts <= 0 || c->moe_intermediate_size <= 0)
            return tern_errf(TERN_EFORMAT, "%s: enable_moe_block needs num_experts and moe_intermediate_size > 0", w);
        if (c->top_k_experts <= 0 || c->top_k_experts > c->num_experts)
            return tern_errf(TERN_EFORMAT, "%s: top_k_experts (%lld) must be in [1, num_experts = %lld]", w,
                             (long long)c->top_k_experts, (long long)c->num_experts);
    }
    if (!(c->rms_norm_eps > 0) || c->final_logit_softcapping < 0)
        return tern_errf(TERN_EFORMAT, "%s: rms_norm_eps must be > 0 and final_logit_softcapping >= 0", w);
    return NULL;
}

tern_err *tern_gemma4_config_parse(const json_t *root, tern_gemma4_config *c) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(root))
        return tern_errf(TERN_EFORMAT, "config.json: the top level must be an object");
    const json_t *tc = json_object_get(root, "text_config");
    const char *where = "config.json text_config";
    if (!tc || json_is_null(tc)) {
        tc = root;
        where = "config.json";
    } else if (!json_is_object(tc)) {
        return tern_errf(TERN_EFORMAT, "config.json: \"text_config\" must be an object");
    }
    const int64_t BIG = (int64_t)1 << 40;
    GETI(tc, "vocab_size", 262144, 1, (int64_t)1 << 31, c->vocab_size);
    GETI(tc, "hidden_size", 1536, 1, 1 << 20, c->hidden_size);
    GETI(tc, "intermediate_size", 6144, 1, 1 << 24, c->intermediate_size);
    GETI(tc, "num_hidden_layers", 35, 1, TERN_MAX_LAYERS, c->num_hidden_layers);
    GETI(tc, "num_attention_heads", 8, 1, 4096, c->num_attention_heads);
    GETI(tc, "num_key_value_heads", 1, 1, 4096, c->num_key_value_heads);
    GETI(tc, "num_global_key_value_heads", c->num_key_value_heads, 1, 4096, c->num_global_key_value_heads);
    GETI(tc, "head_dim", 256, 2, 1 << 16, c->head_dim);
    GETI(tc, "global_head_dim", c->head_dim * 2, 2, 1 << 16, c->global_head_dim);
    GETI(tc, "hidden_size_per_layer_input", 0, 0, 1 << 20, c->hidden_size_per_layer_input);
    GETI(tc, "vocab_size_per_layer_input", c->vocab_size, 0, (int64_t)1 << 31, c->vocab_size_per_layer_input);
    GETI(tc, "num_kv_shared_layers", 0, 0, TERN_MAX_LAYERS, c->num_kv_shared_layers);
    GETI(tc, "sliding_window", 512, 1, BIG, c->sliding_window);
    GETI(tc, "max_position_embeddings", 131072, 1, BIG, c->max_position_embeddings);
    GETI(tc, "num_experts", 0, 0, 1 << 16, c->num_experts);
    GETI(tc, "top_k_experts", 0, 0, 1 << 16, c->top_k_experts);
    GETI(tc, "moe_intermediate_size", 0, 0, 1 << 24, c->moe_intermediate_size);
    GETI(tc, "bos_token_id", 2, 0, (int64_t)1 << 31, c->bos_token_id);
    GETI(tc, "pad_token_id", 0, 0, (int64_t)1 << 31, c->pad_token_id);
    TERN_TRY(tern_err_wrap(tern_json_get_bool(tc, "attention_k_eq_v", 0, &c->attention_k_eq_v), "%s", where));
    TERN_TRY(tern_err_wrap(tern_json_get_bool(tc, "use_double_wide_mlp", 0, &c->use_double_wide_mlp), "%s", where));
    int tie_top;
    TERN_TRY(tern_err_wrap(tern_json_get_bool(root, "tie_word_embeddings", 1, &tie_top), "config.json"));
    TERN_TRY(tern_err_wrap(tern_json_get_bool(tc, "tie_word_embeddings", tie_top, &c->tie_word_embeddings), "%s", where));
    TERN_TRY(tern_err_wrap(tern_json_get_bool(tc, "enable_moe_block", 0, &c->enable_moe_block), "%s", where));
    TERN_TRY(tern_err_wrap(tern_json_get_num(tc, "rms_norm_eps", 1e-6, &c->rms_norm_eps), "%s", where));
    const json_t *cap = json_object_get(tc, "final_logit_softcapping");
    if (cap && json_is_null(cap))
        c->final_logit_softcapping = 0;
    else
        TERN_TRY(tern_err_wrap(tern_json_get_num(tc, "final_logit_softcapping", 30.0, &c->final_logit_softcapping), "%s", where));
    const json_t *bidi = json_object_get(tc, "use_bidirectional_attention");
    if (bidi && json_is_string(bidi) && !strcmp(json_string_value(bidi), "vision"))
        c->vision_both_ways = 1;
    else if (bidi && !json_is_null(bidi) && !json_is_false(bidi))
        return tern_errf(TERN_EUNSUPPORTED, "%s: use_bidirectional_attention must be null or \"vision\" (tern runs "
                         "Gemma 4's causal text and its both-ways images)", where);
    const json_t *act = json_object_get(tc, "hidden_activation");
    if (act && !json_is_null(act) &&
        (!json_is_string(act) || (strcmp(json_string_value(act), "gelu_pytorch_tanh") &&
                                  strcmp(json_string_value(act), "gelu_tanh"))))
        return tern_errf(TERN_EUNSUPPORTED, "%s: hidden_activation must be \"gelu_pytorch_tanh\"", where);
    TERN_TRY(tern_err_wrap(tern_json_get_bool(tc, "tern_gelu_f16_table", 0, &c->gelu_f16), "%s", where));
    TERN_TRY(tern_err_wrap(tern_json_get_bool(tc, "tern_experts_split", 0, &c->experts_split), "%s", where));
    TERN_TRY(parse_rope(tc, c, where));
    TERN_TRY(parse_layer_types(tc, c, where));
    TERN_TRY(tern_err_wrap(parse_eos(root, c), "config.json"));
    if (tc != root)
        TERN_TRY(tern_err_wrap(parse_eos(tc, c), "%s", where));
    if (c->n_eos == 0)
        c->eos_token_ids[c->n_eos++] = 1;
    const json_t *type = json_object_get(root, "model_type");
    c->reads_other_cache = json_is_string(type) && !strcmp(json_string_value(type), "gemma4_assistant");
    if (c->reads_other_cache && c->num_kv_shared_layers != c->num_hidden_layers)
        return tern_errf(TERN_EFORMAT, "%s: a gemma4_assistant's layers all read the target's cache: "
                         "num_kv_shared_layers (%lld) must equal num_hidden_layers (%lld)", where,
                         (long long)c->num_kv_shared_layers, (long long)c->num_hidden_layers);
    const json_t *audio = json_object_get(root, "audio_config");
    c->has_audio_tower = audio && json_is_object(audio);
    const json_t *vision = json_object_get(root, "vision_config");
    c->has_vision_tower = vision && json_is_object(vision);
    return validate(c, where);
}

tern_err *tern_gemma4_config_load(const char *path, tern_gemma4_config *out) {
    json_t *root;
    TERN_TRY(tern_json_load_file(path, 16u << 20, &root));
    tern_err *e = tern_err_wrap(tern_gemma4_config_parse(root, out), "%s", path);
    json_decref(root);
    return e;
}

int tern_gemma4_first_shared(const tern_gemma4_config *c) {
    return (int)(c->num_hidden_layers - c->num_kv_shared_layers);
}

int tern_gemma4_kv_source(const tern_gemma4_config *c, int layer) {
    int first = tern_gemma4_first_shared(c);
    if (layer < first)
        return layer;
    for (int j = first - 1; j >= 0; j--)
        if (c->layer_types[j] == c->layer_types[layer])
            return j;
    return -1;
}

int64_t tern_gemma4_layer_head_dim(const tern_gemma4_config *c, int layer) {
    return c->layer_types[layer] == TERN_LAYER_FULL ? c->global_head_dim : c->head_dim;
}

int64_t tern_gemma4_layer_kv_heads(const tern_gemma4_config *c, int layer) {
    return (c->layer_types[layer] == TERN_LAYER_FULL && c->attention_k_eq_v) ? c->num_global_key_value_heads
                                                                            : c->num_key_value_heads;
}

int64_t tern_gemma4_layer_ffn(const tern_gemma4_config *c, int layer) {
    int shared = layer >= tern_gemma4_first_shared(c);
    return c->intermediate_size * ((shared && c->use_double_wide_mlp) ? 2 : 1);
}

int64_t tern_gemma4_kv_bytes_per_token(const tern_gemma4_config *c, int elem_bytes, int include_sliding) {
    int64_t total = 0;
    for (int l = 0; l < tern_gemma4_first_shared(c); l++) {
        if (c->layer_types[l] == TERN_LAYER_SLIDING && !include_sliding)
            continue;
        /* K and V each [kv_heads, head_dim]; with k_eq_v the cache still holds both (v = raw k, normed differently). */
        total += 2 * tern_gemma4_layer_kv_heads(c, l) * tern_gemma4_layer_head_dim(c, l) * elem_bytes;
    }
    return total;
}

float *tern_gemma4_rope_inv_freq(const tern_rope_params *r, int64_t hd) {
    float *f = calloc((size_t)(hd / 2), sizeof *f);
    if (!f)
        return NULL;
    /* Proportional RoPE: only the first partial*hd/2 pairs rotate, with exponents over the whole head. */
    int64_t rotating = r->kind == TERN_ROPE_PROPORTIONAL ? (int64_t)(r->partial_rotary_factor * (double)hd / 2 + 0.5)
                                                         : hd / 2;
    for (int64_t i = 0; i < rotating; i++)
        f[i] = (float)(pow(r->theta, -2.0 * (double)i / (double)hd) / r->factor);
    return f;
}

tern_err *tern_gemma4_rope_tables(const tern_gemma4_config *c, float *inv_freq[2]) {
    for (int t = 0; t < 2; t++)
        if (!(inv_freq[t] = tern_gemma4_rope_inv_freq(&c->rope[t], t == TERN_LAYER_FULL ? c->global_head_dim
                                                                                       : c->head_dim)))
            return tern_errf(TERN_ENOMEM, "out of memory");
    return NULL;
}
