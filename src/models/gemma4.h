/* gemma4.h — the Gemma 4 text decoder (GEMMA4.md §1): load, KV cache, forward over a batch of rows.
 *
 * A batch is a list of rows; each row feeds n_tok tokens to one KV sequence, from its committed length
 * (or an earlier position). Rows may carry soft-token embeddings in place of ids (audio/images). The
 * forward returns logits (post soft-cap) and/or final normed hidden states for any tokens asked for, and
 * commits nothing: the caller keeps what it decides to (speculative verification keeps a prefix). */
#ifndef TERN_MODELS_GEMMA4_H
#define TERN_MODELS_GEMMA4_H

#include <stdint.h>

#include <jansson.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "models/batch.h"
#include "models/gemma4_config.h"

typedef struct tern_gemma4 tern_gemma4;


/* A checkpoint parsed for Gemma 4: config, quantization, safetensors headers, every tensor bound (or its problem
 * recorded), no weights read. */
typedef struct tern_gemma4_parsed {
    tern_gemma4_config c;
    struct tern_quant_config *qc;
    struct tern_checkpoint *ck;
    struct tern_weights *gw;
} tern_gemma4_parsed;

/* Parses dir's checkpoint against config.json's root object. */
TERN_MUST_CHECK tern_err *tern_gemma4_parse(const char *dir, const json_t *root, tern_gemma4_parsed *p);
/* Frees what a parse holds (what a load took over is NULL); NULL-safe fields. */
void tern_gemma4_parsed_free(tern_gemma4_parsed *p);
/* Builds the model from a parse without problems, taking over its checkpoint (p->qc, ck, gw become NULL); the
 * packed weights are laid out for `threads` (0: one per core) and cached for `dir`, the parsed folder or GGUF file
 * (a folder may hold several GGUF files: each file gets its own cache). */
TERN_MUST_CHECK tern_err *tern_gemma4_load_parsed(const char *dir, tern_gemma4_parsed *p, int threads, tern_gemma4 **out);
/* Loads MODEL_DIR (config.json + safetensors); refuses a checkpoint with missing or mis-shaped tensors. The
 * packed weights are laid out for a pool of one thread per core (tern_weights_pack). */
TERN_MUST_CHECK tern_err *tern_gemma4_load(const char *dir, tern_gemma4 **out);
/* The same with the packed weights laid out for a pool of `threads` threads (0: one per core). A pool of another
 * size computes the same results, only its memory streams restart more often. */
TERN_MUST_CHECK tern_err *tern_gemma4_load_threads(const char *dir, int threads, tern_gemma4 **out);
/* Bytes of the activation buffers a forward over T tokens keeps in its KV cache's work area (tern_kv_work). */
uint64_t tern_gemma4_work_bytes(const tern_gemma4_config *c, int64_t T);
/* The pool size the packed weights are laid out for (the loader's `threads`, resolved). */
int tern_gemma4_layout_threads(const tern_gemma4 *m);
/* Frees the model; NULL is fine. */
void tern_gemma4_free(tern_gemma4 *m);
/* out[H] = the input embedding of `id` as the forward feeds it (the row times the embedding scale); id must be
 * in the vocabulary. */
void tern_gemma4_embed_row(const tern_gemma4 *m, int32_t id, float *out);
/* The parsed hyper-parameters. */
const tern_gemma4_config *tern_gemma4_config_of(const tern_gemma4 *m);
struct tern_weights;
/* The bound weights (spec list and storage of every tensor). */
const struct tern_weights *tern_gemma4_weights_of(const tern_gemma4 *m);
/* Bytes of weights one decode step streams: every matrix a matmul reads (the tied LM head included;
 * the per-layer embedding table excluded, it is only looked up), MoE experts counted at top_k / E. */
uint64_t tern_gemma4_decode_bytes(const tern_gemma4 *m);
/* A KV cache for this model: n_seq sequences of up to ctx positions; ring layers keep window + chunk
 * slots, where `chunk` bounds both the tokens one row may append per forward and the rollback depth. */
TERN_MUST_CHECK tern_err *tern_gemma4_kv_create(const tern_gemma4 *m, int n_seq, int64_t ctx, int64_t chunk, tern_kv_type k_type,
                                tern_kv_type v_type, tern_kv **out);
/* From now on every forward pass adds its phases to *p (not zeroed here); NULL stops. The timing costs a clock
 * read per phase, ~13 per layer. */
void tern_gemma4_set_profile(tern_gemma4 *m, tern_lm_profile *p);

/* Runs the batch: writes each token's K/V at its position and returns logits [n_logits][V] (or NULL) and final
 * normed hidden states [n_hidden][H] (or NULL) of the tokens that want them (see tern_batch.want; without it,
 * both for the last token of each row with output, or every token, by `out`). It does not change any sequence's
 * committed length: the caller commits what it keeps with tern_kv_set_len (tern_batch_commit for all). */
TERN_MUST_CHECK tern_err *tern_gemma4_forward(tern_gemma4 *m, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits,
                              float *hidden);

#endif
