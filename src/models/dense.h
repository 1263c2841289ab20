/* dense.h — the dense decoder most open models are (Llama 3, Mistral, Qwen 2.5, Qwen 3): pre-norm blocks of
 * grouped-query attention with rotary positions and a SwiGLU MLP, a final RMSNorm and a tied or separate LM head,
 * from Hugging Face / MLX safetensors (names under "model.", the head as "lm_head") or from a GGUF file
 * (dense_gguf.c). What tells the families apart is a few traits: each family is one small file naming them and
 * its row in the architecture table (llama_arch.c, qwen2_arch.c, qwen3_arch.c). */
#ifndef TERN_MODELS_DENSE_H
#define TERN_MODELS_DENSE_H

#include <stdint.h>

#include <jansson.h>

#include "core/status.h"
#include "models/model.h"
#include "models/weights.h"

struct tern_checkpoint;

/* What one family of the dense decoder has that the others do not. */
typedef struct tern_dense_family {
    const char *name;      /* the table entry's first model_type, e.g. "llama" */
    const char *gguf_arch; /* general.architecture of its GGUF files, the prefix of their metadata keys */
    int qkv_bias;          /* q/k/v projections carry biases whatever the config says (Qwen 2) */
    int qk_norm;           /* per-head RMSNorm of q and k before RoPE (Qwen 3) */
    int gguf_rope_pairs;   /* llama.cpp's converter reorders the Q/K rows of each head so that RoPE turns adjacent
                            * pairs (Llama): from GGUF the same rotation is applied to (2i, 2i + 1) */
} tern_dense_family;

typedef enum { TERN_DROPE_DEFAULT, TERN_DROPE_LINEAR, TERN_DROPE_LLAMA3 } tern_dense_rope;

#define TERN_DENSE_MAX_EOS 8

/* The hyper-parameters, as config.json (or the GGUF metadata standing for it) gives them. */
typedef struct tern_dense_config {
    int64_t vocab, hidden, ffn, n_layers, n_heads, n_kv_heads, head_dim;
    int64_t ctx_train;    /* max_position_embeddings */
    int64_t window;       /* sliding window of every layer (Mistral), 0 for full attention */
    double eps, rope_theta;
    tern_dense_rope rope;
    double rope_factor, low_freq_factor, high_freq_factor;
    int64_t rope_original_ctx; /* llama3 scaling's original_max_position_embeddings */
    int rope_freqs_tensor; /* GGUF: the frequency factors are stored (rope_freqs) instead of described */
    int rope_pairs;        /* RoPE turns adjacent pairs (a Llama GGUF's reordered Q/K rows), else halves */
    int tied;              /* the head is the embedding */
    int qkv_bias, o_bias, qk_norm;
    int n_eos;
    int64_t eos[TERN_DENSE_MAX_EOS];
} tern_dense_config;

/* Parses config.json's root for family f; errors name the key and what was wrong with it. */
TERN_MUST_CHECK tern_err *tern_dense_config_parse(const tern_dense_family *f, const json_t *root, tern_dense_config *c);
/* The tensor list of c, names relative to "model." (the head rooted as "lm_head"). */
TERN_MUST_CHECK tern_err *tern_dense_specs(const tern_dense_config *c, tern_wspec **specs, size_t *n);
/* The same from config.json's root, parsed for family f (the table's config_specs). */
TERN_MUST_CHECK tern_err *tern_dense_config_specs(const tern_dense_family *f, const json_t *root, tern_wspec **specs, size_t *n);
/* inv_freq [head_dim / 2] of c's RoPE (the stored factors not applied), or NULL when out of memory. */
float *tern_dense_inv_freq(const tern_dense_config *c);

/* The GGUF file at path as family f wrote it (dense_gguf.c): *config the config.json object its metadata stands for
 * (caller's reference), *ck its tensors under Hugging Face's names. */
TERN_MUST_CHECK tern_err *tern_dense_gguf_open(const tern_dense_family *f, const char *path, json_t **config,
                               struct tern_checkpoint **ck);
struct tern_gguf;
/* The same from an open GGUF (taken over: closed with the checkpoint, or on an error). */
TERN_MUST_CHECK tern_err *tern_dense_gguf_from(const tern_dense_family *f, struct tern_gguf *g, json_t **config,
                               struct tern_checkpoint **ck);

/* The architecture-table entry points of every dense family; a family's file passes its traits to parse and
 * fills the rest of its row with TERN_DENSE_ENTRIES. */
TERN_MUST_CHECK tern_err *tern_dense_parse(const tern_dense_family *f, const char *dir, const json_t *root, void **state,
                           tern_lm_desc *d);
void tern_dense_state_free(void *state);
uint64_t tern_dense_work_bytes(const void *state, int64_t T);
void tern_dense_report(const char *dir, const void *state, const tern_lm_desc *d, FILE *out);
TERN_MUST_CHECK tern_err *tern_dense_load(const char *dir, void *state, int threads, void **impl);
void tern_dense_free(void *impl);
int tern_dense_layout_threads(const void *impl);
uint64_t tern_dense_decode_bytes(const void *impl);
TERN_MUST_CHECK tern_err *tern_dense_forward(void *impl, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits,
                             float *hidden);
void tern_dense_set_profile(void *impl, tern_lm_profile *p);
void tern_dense_embed(const void *impl, int32_t id, float *out);

#define TERN_DENSE_ENTRIES                                                                                        \
    .gguf = 1, .state_free = tern_dense_state_free, .work_bytes = tern_dense_work_bytes,                          \
    .report = tern_dense_report, .load = tern_dense_load, .free = tern_dense_free,                                \
    .layout_threads = tern_dense_layout_threads, .decode_bytes = tern_dense_decode_bytes,                         \
    .forward = tern_dense_forward, .set_profile = tern_dense_set_profile, .embed = tern_dense_embed

#endif
