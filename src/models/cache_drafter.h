/* cache_drafter.h — drafters that keep no KV cache of their own but read their target's: the Gemma 4 assistant
 * (model_type "gemma4_assistant", GEMMA4.md §5, gemma4_assistant.c) is the first. Each draft step feeds the
 * target's scaled embedding of a token beside a hidden state of the target's width, runs Q-only layers that attend
 * over the TARGET's cache (its last cache-owning sliding layer for sliding blocks, its last full one for full
 * blocks) at one fixed query position, and returns the drafter's logits (no soft-cap) and the next hidden state.
 *
 *   load          config.json + safetensors (Hugging Face or MLX-quantized), every tensor checked
 *   check_target  the drafter's attention geometry against the target's cache, refused with the numbers
 *   step          one draft step of several sequences, batched */
#ifndef TERN_MODELS_CACHE_DRAFTER_H
#define TERN_MODELS_CACHE_DRAFTER_H

#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "models/model.h"

typedef struct tern_cache_drafter tern_cache_drafter;

/* 1 when a config.json's model_type names a cache drafter architecture tern has (gemma4_assistant). */
int tern_cache_drafter_type(const char *model_type);

/* Which head scores the drafter's tokens: the checkpoint's choice (the centroid head when it has one), or the
 * full tied head over every token. */
typedef enum { TERN_DRAFT_HEAD_AUTO = 0, TERN_DRAFT_HEAD_FULL, TERN_DRAFT_HEAD_CENTROID } tern_draft_head;

typedef struct tern_cache_drafter_desc {
    int64_t hidden;          /* the drafter's width */
    int64_t backbone_hidden; /* the target's width it reads and writes */
    int64_t vocab, n_layers;
    int has_centroids;       /* the checkpoint carries the centroid head */
} tern_cache_drafter_desc;

/* Loads MODEL_DIR as an assistant drafter; errors name what is wrong (not an assistant, missing or mis-shaped
 * tensors). */
TERN_MUST_CHECK tern_err *tern_cache_drafter_load(const char *dir, tern_cache_drafter **out);
/* Frees; NULL is fine. */
void tern_cache_drafter_free(tern_cache_drafter *a);
const tern_cache_drafter_desc *tern_cache_drafter_desc_of(const tern_cache_drafter *a);
/* NULL when the drafter can read a target of description t as is (vocabulary, width, and per block type the
 * head dim, KV heads and window of the target cache layer it reads); else an error with both sides' numbers. */
TERN_MUST_CHECK tern_err *tern_cache_drafter_check_target(const tern_cache_drafter *a, const tern_lm_desc *t);
/* Picks the head (TERN_DRAFT_HEAD_CENTROID needs the checkpoint's centroids). */
TERN_MUST_CHECK tern_err *tern_cache_drafter_set_head(tern_cache_drafter *a, tern_draft_head head);

/* One step of n sequences: row r reads sequence seq[r] of the target's KV cache `kv`, whose committed length is
 * that row's query position P (positions < P are attended). */
typedef struct tern_cache_drafter_io {
    const tern_kv *kv;
    const tern_lm_desc *target; /* for the cache layers to read */
    int n;
    const int *seq;             /* [n] */
    const float *emb;           /* [n][backbone_hidden] the target's scaled embedding of the token drafted from */
    const float *h;             /* [n][backbone_hidden] the target's final normed hidden at P - 1, or the last step's
                                 * h_out */
    float *logits;              /* out [n][vocab] (the centroid head: tokens outside the chosen clusters get the
                                 * lowest score minus 1) */
    float *h_out;               /* out [n][backbone_hidden] */
} tern_cache_drafter_io;

/* One draft step of io->n sequences, each at its own query position: every product reads the drafter's weights
 * once for all rows, and each row's results are what a step of that row alone gives. */
TERN_MUST_CHECK tern_err *tern_cache_drafter_step(tern_cache_drafter *a, tern_pool *pool, const tern_cache_drafter_io *io);

#endif
