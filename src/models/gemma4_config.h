/* gemma4_config.h — config.json -> Gemma 4 text hyper-parameters (GEMMA4.md §1).
 *
 * Keys are read from `text_config` when present (multimodal checkpoints) or the top
 * level (text-only conversions); absent keys take the defaults documented in
 * gemma4_config.c; inconsistent values are rejected with the key named. Matrix sizes
 * are later checked against tensor shapes, which win (GEMMA4.md: "prefer tensor shapes"). */
#ifndef TERN_MODELS_GEMMA4_CONFIG_H
#define TERN_MODELS_GEMMA4_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "core/status.h"

#define TERN_MAX_LAYERS 256
#define TERN_MAX_EOS 8

typedef enum { TERN_LAYER_SLIDING = 0, TERN_LAYER_FULL = 1 } tern_layer_type;

typedef enum { TERN_ROPE_DEFAULT = 0, TERN_ROPE_PROPORTIONAL } tern_rope_kind;

typedef struct tern_rope_params {
    tern_rope_kind kind;
    double theta;                 /* base */
    double partial_rotary_factor; /* fraction of the head dim that rotates (proportional only) */
    double factor;                /* frequency divisor (proportional), 1.0 if absent */
} tern_rope_params;

typedef struct tern_gemma4_config {
    int64_t vocab_size;                  /* V */
    int64_t hidden_size;                 /* H */
    int64_t intermediate_size;           /* dense MLP width (doubled on KV-shared layers if use_double_wide_mlp) */
    int64_t num_hidden_layers;           /* N */
    int64_t num_attention_heads;
    int64_t num_key_value_heads;         /* sliding layers (and full layers without k_eq_v) */
    int64_t num_global_key_value_heads;  /* full layers when attention_k_eq_v */
    int64_t head_dim;                    /* sliding layers */
    int64_t global_head_dim;             /* full layers */
    int64_t hidden_size_per_layer_input; /* P; 0 = no per-layer embeddings */
    int64_t vocab_size_per_layer_input;
    int64_t num_kv_shared_layers;
    int64_t sliding_window;
    int64_t max_position_embeddings;
    int attention_k_eq_v;
    int use_double_wide_mlp;
    int tie_word_embeddings;
    int enable_moe_block;
    int64_t num_experts, top_k_experts, moe_intermediate_size;
    int experts_split; /* Hugging Face layout with gate and up experts stored apart (GGUF ffn_gate_exps/ffn_up_exps) */
    double final_logit_softcapping; /* 0 = none */
    int gelu_f16; /* GELU as ggml computes it (tern_gelu_tanh_f16): set for GGUF files, whose numbers follow llama.cpp's */
    double rms_norm_eps;
    tern_rope_params rope[2]; /* by tern_layer_type */
    uint8_t layer_types[TERN_MAX_LAYERS];
    int64_t bos_token_id, pad_token_id;
    int64_t eos_token_ids[TERN_MAX_EOS];
    int n_eos;
    int has_audio_tower; /* audio_config present and not null */
    int reads_other_cache; /* a gemma4_assistant drafter: every layer reads the target model's cache */
    int has_vision_tower;
    /* use_bidirectional_attention "vision" (the larger models): on sliding layers an image's soft tokens also see
     * the later ones of the same image (Hugging Face's create_causal_mask_mapping); full layers stay causal. */
    int vision_both_ways;
} tern_gemma4_config;

/* The most soft tokens one image becomes (the processor's largest budget): with vision_both_ways, what one forward
 * must be able to hold of a row. */
#define TERN_GEMMA4_IMAGE_TOKENS_MAX 1120

/* Parses a config.json object; errors name the offending key ("text_config.sliding_window: ..."). */
TERN_MUST_CHECK tern_err *tern_gemma4_config_parse(const json_t *root, tern_gemma4_config *out);
/* Loads and parses DIR/config.json (or a path to a .json file). */
TERN_MUST_CHECK tern_err *tern_gemma4_config_load(const char *path, tern_gemma4_config *out);

/* The last cache-owning layer at or below `layer` reading the same type (GEMMA4.md §1 KV sharing):
 * `layer` itself for layers below first_shared, else the last non-shared layer of that type. */
int tern_gemma4_kv_source(const tern_gemma4_config *c, int layer);
/* First KV-shared layer index (N - num_kv_shared_layers). */
int tern_gemma4_first_shared(const tern_gemma4_config *c);
/* Head dim / KV heads of a layer, by its type. */
int64_t tern_gemma4_layer_head_dim(const tern_gemma4_config *c, int layer);
int64_t tern_gemma4_layer_kv_heads(const tern_gemma4_config *c, int layer);
/* Dense MLP width of a layer (doubled on KV-shared layers with use_double_wide_mlp). */
int64_t tern_gemma4_layer_ffn(const tern_gemma4_config *c, int layer);
/* RoPE inverse frequencies [hd / 2] of a layer type (proportional RoPE: only the first partial * hd / 2 pairs
 * rotate, the rest are 0); malloc'd, NULL when out of memory. */
float *tern_gemma4_rope_inv_freq(const tern_rope_params *r, int64_t hd);
/* inv_freq[t] = the tables of both layer types (sliding: head_dim, full: global_head_dim); the caller frees both
 * (one may be set when the other ran out of memory). */
TERN_MUST_CHECK tern_err *tern_gemma4_rope_tables(const tern_gemma4_config *c, float *inv_freq[2]);
/* Bytes of KV cache per token summed over cache-owning layers, at `elem_bytes` per element,
 * counting sliding layers (they saturate at the window; callers cap by position). */
int64_t tern_gemma4_kv_bytes_per_token(const tern_gemma4_config *c, int elem_bytes, int include_sliding);

#endif
