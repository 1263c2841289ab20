/* batch.h — the language every model family speaks with the engine: a batch of rows for one forward (what each
 * token feeds and what it wants back), committing what a forward computed, and the phases a profile charges. */
#ifndef TERN_MODELS_BATCH_H
#define TERN_MODELS_BATCH_H

#include <stdint.h>

#include "core/status.h"
#include "kv/kv_cache.h"

typedef enum { TERN_OUT_NONE = 0, TERN_OUT_LAST, TERN_OUT_ALL } tern_out_mode;

/* What a token of a batch asks for (tern_batch.want). */
enum { TERN_WANT_LOGITS = 1, TERN_WANT_HIDDEN = 2 };

/* The positions [first, last] of a span a token lies in and sees both ways; first = last = -1: none. */
typedef struct tern_tok_span {
    int64_t first, last;
} tern_tok_span;

typedef struct tern_batch {
    int n_rows;
    const int *seq;          /* [n_rows] KV sequence of each row */
    const int64_t *n_tok;    /* [n_rows] tokens each row feeds (>= 1) */
    const int64_t *pos;      /* NULL, or [n_rows]: the position of each row's first token, at most the sequence's
                              * committed length (tern_kv_len; earlier to overwrite uncommitted or rolled-back
                              * positions, by at most the ring's extra slots); NULL: at the committed length */
    const int32_t *ids;      /* [sum n_tok] token ids, rows concatenated */
    const float *const *embeds; /* NULL, or [sum n_tok]: per token, a row [hidden] fed in place of its id's embedding
                                 * (a soft token: audio), or NULL; the id is then not read */
    tern_out_mode out;       /* which positions get logits/hidden: last of each row, or all */
    const uint8_t *row_out;  /* NULL, or [n_rows]: 0 = this row gets no output (a prompt chunk before its last) */
    const uint8_t *want;     /* NULL, or [sum n_tok]: TERN_WANT_* per token, any subset (then out and row_out are
                              * not read): logits rows are the tokens wanting logits in order, hidden rows those
                              * wanting hidden states */
    const uint8_t *row_prefill; /* NULL, or [n_rows]: 1 = prompt tokens, 0 = generated tokens (which kernels serve
                                 * them; NULL: rows of more than one token are prompt). A row's results depend
                                 * only on this, never on the other rows of the batch. */
    const tern_tok_span *spans; /* NULL, or [sum n_tok]: per token, the span it lies in when its span is seen both
                                 * ways (an image's soft tokens on a model whose tern_lm_desc.span_both_ways is set):
                                 * where the model says so, the token then attends to all of its span as well. A
                                 * span's positions up to the token are written (in this forward or before), its
                                 * later ones in this forward. */
} tern_batch;

/* The position of row r's first token: its `pos`, else its sequence's committed length. */
static inline int64_t tern_batch_row_pos(const tern_batch *b, const tern_kv *kv, int r) {
    return b->pos ? b->pos[r] : tern_kv_len(kv, b->seq[r]);
}
/* Commits every row of a forward that ran: each sequence's length becomes its row's position + n_tok. */
TERN_MUST_CHECK tern_err *tern_batch_commit(tern_kv *kv, const tern_batch *b);

/* The phases of a forward pass, as a profile charges its time. */
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
typedef struct tern_lm_profile {
    double seconds[TERN_PH_COUNT];
    double bytes[TERN_PH_COUNT]; /* bytes of the matrices the phase's products read */
    int64_t passes;
} tern_lm_profile;

#endif
