/* model.h — the architecture table: every model family behind one interface, chosen by config.json's
 * "model_type". The engine, fit, the KV budget and the verbs see only this — a description (sizes, KV geometry,
 * memory per token) and a forward over a batch of rows — never a family's own symbols. Gemma 4 text is the first
 * entry (gemma4_arch.c); a new family is a new file and a line in the table (model.c).
 *
 *   tern_lm_spec_load(dir)   config.json + checkpoint headers, parsed once: the description, no weights
 *   tern_lm_load(dir)        the spec, then the weights bound and (for the int8 kernels) packed
 *   tern_lm_forward          one batch of rows; commits nothing (tern_batch_commit, tern_kv_set_len)
 *
 * The batch (tern_batch) and the profile phases (tern_phase) are the families' common language, in batch.h. */
#ifndef TERN_MODELS_MODEL_H
#define TERN_MODELS_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "models/batch.h"
#include "models/weights.h"

#define TERN_LM_MAX_LAYERS 256
#define TERN_LM_MAX_EOS 8

/* What the engine, fit and the KV budget know of a model. */
typedef struct tern_lm_desc {
    const char *model_type;  /* the table entry that runs it */
    int64_t n_layers, vocab, hidden;
    int64_t ctx_train;       /* trained context (max_position_embeddings); 0 when unknown */
    int64_t sliding_window;  /* positions the ring (sliding) KV layers attend over; 0 when there are none */
    int n_kv;                /* KV-cache layers (the layers that own a cache) */
    tern_kv_layer_desc kv[TERN_LM_MAX_LAYERS];
    int16_t layer_kv[TERN_LM_MAX_LAYERS]; /* the cache layer each of the n_layers layers reads (its own, or the
                                              * layer it shares with): with tern_kv_view_layer, what another
                                              * model attending over this one's cache reads */
    int n_eos;               /* end-of-generation ids the config names */
    int32_t eos[TERN_LM_MAX_EOS];
    uint64_t weights_bytes;  /* the decoder's tensors as stored, with copy_bytes in place of the blocks they
                              * replace */
    uint64_t copy_bytes;     /* copies of stored tensors repacked for the int8 kernels (GGUF Q4_0 / Q8_0), where
                              * they run */
    uint64_t other_bytes;    /* tensors the decoder never reads (audio/vision towers) */
    uint64_t decode_bytes;   /* weights one generated token reads (with experts, the dense part and its top-k) */
    int64_t experts, experts_used; /* mixture-of-experts: experts per layer and per token (0 without) */
    int has_problems;        /* a needed tensor is missing or mis-shaped (tern_lm_spec_report lists them) */
    int64_t span_both_ways;  /* > 0: an image's soft tokens see each other both ways (tern_batch.span_last), so
                              * one forward must hold an image whole — at most this many tokens; 0: causal */
} tern_lm_desc;

/* K+V bytes of one position over the full-length KV layers and over the ring (sliding) layers, K stored as k_type
 * and V as v_type. */
void tern_lm_desc_kv_bytes(const tern_lm_desc *d, tern_kv_type k_type, tern_kv_type v_type, uint64_t *full,
                           uint64_t *ring);
/* K+V bytes one row's decode step reads from its cache holding n positions (its own token's included): every layer
 * reads the cache layer it attends over — all n positions on a full layer, at most the window on a ring layer —
 * whether it owns that layer or shares another's. */
uint64_t tern_lm_desc_kv_read_bytes(const tern_lm_desc *d, tern_kv_type k_type, tern_kv_type v_type, int64_t n);

typedef struct tern_lm_spec tern_lm_spec;
typedef struct tern_lm tern_lm;

/* Parses MODEL_DIR's config.json and checkpoint headers and finds its architecture (errors name the
 * model_type when no entry runs it); no weights are read. */
TERN_MUST_CHECK tern_err *tern_lm_spec_load(const char *dir, tern_lm_spec **out);
/* Frees; NULL is fine. */
void tern_lm_spec_free(tern_lm_spec *s);
/* The description. */
const tern_lm_desc *tern_lm_spec_desc(const tern_lm_spec *s);
/* Bytes of the activation buffers one forward over T tokens keeps in its KV cache's work area. */
uint64_t tern_lm_spec_work_bytes(const tern_lm_spec *s, int64_t T);
/* Prints what `tern info` shows: architecture, layer pattern, parameters, bytes, KV per token, every tensor
 * problem. */
void tern_lm_spec_report(const tern_lm_spec *s, FILE *out);

/* Loads MODEL_DIR: the spec, then the weights (mmapped; packed for the int8 kernels laid out for a pool of
 * `threads`, 0 = one per core); refuses a checkpoint with missing or mis-shaped tensors. */
TERN_MUST_CHECK tern_err *tern_lm_load(const char *dir, int threads, tern_lm **out);
/* Frees; NULL is fine. */
void tern_lm_free(tern_lm *m);
/* What loading parsed. */
const tern_lm_spec *tern_lm_spec_of(const tern_lm *m);
const tern_lm_desc *tern_lm_desc_of(const tern_lm *m);
/* The pool size the packed weights are laid out for. */
int tern_lm_layout_threads(const tern_lm *m);
/* Bytes of weights one decode step streams. */
uint64_t tern_lm_decode_bytes(const tern_lm *m);
/* A KV cache for this model: n_seq sequences of up to ctx positions; ring layers keep window + chunk slots. */
TERN_MUST_CHECK tern_err *tern_lm_kv_create(const tern_lm *m, int n_seq, int64_t ctx, int64_t chunk, tern_kv_type k_type,
                            tern_kv_type v_type, tern_kv **out);
/* Runs a batch (see tern_batch): logits [n_logits][vocab] and/or hidden [n_hidden][hidden] of the tokens that want
 * them. Commits nothing. */
TERN_MUST_CHECK tern_err *tern_lm_forward(tern_lm *m, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits, float *hidden);
/* out[hidden] = the input embedding of token `id` as the forward feeds it (scaled): what a drafter reading this
 * model's embedding takes. */
TERN_MUST_CHECK tern_err *tern_lm_embed(const tern_lm *m, int32_t id, float *out);
/* From now on every forward adds its phases to *p (NULL stops). */
void tern_lm_set_profile(tern_lm *m, tern_lm_profile *p);

/* ---- for the families: one table entry each ---------------------------------------------------- */

typedef struct tern_arch {
    const char *model_types[4]; /* config.json "model_type" values this entry runs (NULL-terminated) */
    int gguf;                   /* also runs GGUF files whose general.architecture is one of model_types */
    /* Parses config.json (root) and the checkpoint headers of dir into the family's state; fills d. For a GGUF
     * file, dir is the file and root NULL (the family reads both from it). */
    tern_err *(*parse)(const char *dir, const json_t *root, void **state, tern_lm_desc *d);
    void (*state_free)(void *state);
    uint64_t (*work_bytes)(const void *state, int64_t T);
    void (*report)(const char *dir, const void *state, const tern_lm_desc *d, FILE *out);
    /* Builds the runnable model from the state, taking over the parsed checkpoint (report is then unavailable); dir
     * as parse had it (a GGUF model's file). */
    tern_err *(*load)(const char *dir, void *state, int threads, void **impl);
    void (*free)(void *impl);
    int (*layout_threads)(const void *impl);
    uint64_t (*decode_bytes)(const void *impl);
    tern_err *(*forward)(void *impl, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits, float *hidden);
    void (*set_profile)(void *impl, tern_lm_profile *p);
    void (*embed)(const void *impl, int32_t id, float *out); /* id inside the vocabulary */
    /* The tensor list config.json's root describes (names relative to "model."), which `tern synth` writes and
     * `tern quantize` reads; NULL when the family lists its tensors its own way (Gemma 4: its layouts). */
    tern_err *(*config_specs)(const json_t *root, tern_wspec **specs, size_t *n);
} tern_arch;

/* The table entry that runs config.json model_type `type`, or NULL. */
const tern_arch *tern_arch_find(const char *type);

/* The Gemma 4 text decoder (gemma4_arch.c). */
extern const tern_arch tern_arch_gemma4;
/* The dense decoder's families (dense.h): Llama 3 / Mistral, Qwen 2.5, Qwen 3. */
extern const tern_arch tern_arch_llama, tern_arch_qwen2, tern_arch_qwen3;

#endif
