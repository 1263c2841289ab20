/* gemma4.h — the Gemma 4 text decoder (GEMMA4.md §1): load, KV cache, forward over a batch of rows.
 *
 * A batch is a list of rows; each row appends n_tok tokens to one KV sequence, starting at
 * that sequence's current length. Rows may carry soft-token embeddings in place of ids
 * (audio/images). The forward returns logits (post soft-cap) and/or the final normed hidden
 * state for the last token of each row or for every token. */
#ifndef TERN_MODELS_GEMMA4_H
#define TERN_MODELS_GEMMA4_H

#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "formats/model_config.h"
#include "kv/kv_cache.h"

typedef struct tern_gemma4 tern_gemma4;

typedef enum { TERN_OUT_NONE = 0, TERN_OUT_LAST, TERN_OUT_ALL } tern_out_mode;

typedef struct tern_batch {
    int n_rows;
    const int *seq;          /* [n_rows] KV sequence of each row */
    const int64_t *n_tok;    /* [n_rows] tokens each row appends (>= 1) */
    const int32_t *ids;      /* [sum n_tok] token ids, rows concatenated */
    const float *embeds;     /* NULL, or [sum n_tok][H] soft-token embeddings */
    const uint8_t *is_embed; /* NULL, or [sum n_tok]: 1 = take embeds[t] instead of the id's embedding */
    tern_out_mode out;       /* which positions get logits/hidden: last of each row, or all */
    const uint8_t *row_out;  /* NULL, or [n_rows]: 0 = this row gets no output (a prompt chunk before its last) */
    const uint8_t *row_prefill; /* NULL, or [n_rows]: 1 = prompt tokens, 0 = generated tokens (which kernels serve
                                 * them; NULL: rows of more than one token are prompt). A row's results depend
                                 * only on this, never on the other rows of the batch. */
} tern_batch;

/* Loads MODEL_DIR (config.json + safetensors); refuses a checkpoint with missing or mis-shaped tensors. The
 * packed weights are laid out for a pool of one thread per core (tern_gemma4_weights_pack). */
tern_err *tern_gemma4_load(const char *dir, tern_gemma4 **out);
/* The same with the packed weights laid out for a pool of `threads` threads (0: one per core). A pool of another
 * size computes the same results, only its memory streams restart more often. */
tern_err *tern_gemma4_load_threads(const char *dir, int threads, tern_gemma4 **out);
/* Bytes of the activation buffers a forward over T tokens keeps in its KV cache's work area (tern_kv_work). */
uint64_t tern_gemma4_work_bytes(const tern_gemma4_config *c, int64_t T);
/* The pool size the packed weights are laid out for (the loader's `threads`, resolved). */
int tern_gemma4_layout_threads(const tern_gemma4 *m);
/* Frees the model; NULL is fine. */
void tern_gemma4_free(tern_gemma4 *m);
/* The parsed hyper-parameters. */
const tern_gemma4_config *tern_gemma4_config_of(const tern_gemma4 *m);
struct tern_gemma4_weights;
/* The bound weights (spec list and storage of every tensor). */
const struct tern_gemma4_weights *tern_gemma4_weights_of(const tern_gemma4 *m);
/* Bytes of weights one decode step streams: every matrix a matmul reads (the tied LM head included;
 * the per-layer embedding table excluded, it is only looked up), MoE experts counted at top_k / E. */
uint64_t tern_gemma4_decode_bytes(const tern_gemma4 *m);
/* A KV cache for this model: n_seq sequences of up to ctx positions; ring layers keep window + chunk
 * slots, where `chunk` bounds both the tokens one row may append per forward and the rollback depth. */
tern_err *tern_gemma4_kv_create(const tern_gemma4 *m, int n_seq, int64_t ctx, int64_t chunk, tern_dtype dtype,
                                tern_kv **out);
/* The phases of a forward pass, as tern_gemma4_profile charges its time. */
typedef enum tern_phase {
    TERN_PH_SETUP,     /* work area, RoPE angles, KV bookkeeping */
    TERN_PH_EMBED,     /* embedding and per-layer-input lookups, the per-layer-input model projection */
    TERN_PH_QKV,       /* the q/k/v products (q alone in layers reading another layer's cache) */
    TERN_PH_ATTN_PREP, /* q/k/v norms, RoPE, KV cache writes */
    TERN_PH_ATTN,      /* attention over the cached positions */
    TERN_PH_O,         /* the o product */
    TERN_PH_GATE_UP,   /* the gate/up products */
    TERN_PH_DOWN,      /* the down product (GELU(gate) x up formed in its input pass) */
    TERN_PH_MOE,       /* the MoE block: router and experts */
    TERN_PH_PLE,       /* the per-layer-input gate and projection products and the GELU between them */
    TERN_PH_RESIDUAL,  /* residual norms and adds */
    TERN_PH_HEAD,      /* final norm, tied LM head, logit soft-cap */
    TERN_PH_COUNT
} tern_phase;

/* Short name of a phase ("qkv", "attention", ...). */
const char *tern_phase_name(tern_phase ph);

/* Wall time and weight bytes of forward passes, by phase (each phase's time is the main thread's, from the end
 * of the phase before it, so the phases add up to the whole pass). */
typedef struct tern_gemma4_profile {
    double seconds[TERN_PH_COUNT];
    double bytes[TERN_PH_COUNT]; /* bytes of the matrices the phase's products read */
    int64_t passes;
} tern_gemma4_profile;

/* From now on every forward pass adds its phases to *p (not zeroed here); NULL stops. The timing costs a clock
 * read per phase, ~13 per layer. */
void tern_gemma4_set_profile(tern_gemma4 *m, tern_gemma4_profile *p);

/* Runs the batch; logits is [n_out][V] (or NULL), hidden is [n_out][H] (or NULL), where n_out counts the rows
 * (TERN_OUT_LAST) or tokens (TERN_OUT_ALL) of the rows with output, in row order. Advances each row's KV
 * sequence by its n_tok. */
tern_err *tern_gemma4_forward(tern_gemma4 *m, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits,
                              float *hidden);

#endif
