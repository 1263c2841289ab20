/* engine_internal.h — the serving engine's structures, shared by its files:
 *   channel.c    how one request's events reach its consumer (callback or pollable stream)
 *   request.c    validating and copying a submitted request; admission arithmetic
 *   engine.c     create / destroy / submit / cancel / metrics: the parts other threads call
 *   scheduler.c  the engine thread: admit, prefill in chunks, decode in one batch, sample, emit
 *
 * Ownership and locking. `mu` guards the wait queue, the budget, each row's `req` pointer (so
 * cancel can find running requests) and the counters; the engine thread takes it briefly once
 * per step and never runs the model while holding it. Everything else about a row belongs to
 * the engine thread alone. A request's channel is shared with its consumer and reference
 * counted; its cancel flag is atomic. */
#ifndef TERN_ENGINE_INTERNAL_H
#define TERN_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "engine/kv_budget.h"
#include "engine/stop_text.h"
#include "grammar/grammar.h"
#include "grammar/token_dfa.h"
#include "kv/prefix_cache.h"
#include "loader/loader.h"
#include "models/model.h"
#include "sample/chain.h"
#include "draft/draft.h"
#include "draft/policy.h"
#include "tern/tern.h"
#include "tokenizer/tokenizer.h"

/* ---- channel: a request's events on their way to the consumer ------------------------------- */

typedef struct ev_node ev_node;

typedef struct channel {
    atomic_int refs;
    atomic_int cancelled;
    uint64_t id;
    tern_event_fn cb; /* callback mode, else queue mode */
    void *user;
    pthread_mutex_t mu; /* queue mode */
    pthread_cond_t cv;
    ev_node *head, *tail;
    ev_node *current; /* the event handed out last (freed on the next read) */
    ev_node *spare_done; /* made with the channel: the DONE event when copying it finds no memory (queue mode) */
    int done_read; /* the DONE event was handed out */
    int closed;    /* the consumer freed its stream */
} channel;

/* Wraps a queue-mode channel as the consumer's stream (adds a reference); NULL on OOM. */
tern_stream *stream_wrap(channel *ch);

/* A channel with one reference (the engine's); cb NULL = queue mode. */
channel *channel_new(uint64_t id, tern_event_fn cb, void *user);
/* Adds a reference (the consumer's stream). */
void channel_ref(channel *ch);
/* Drops a reference; the last one frees. */
void channel_unref(channel *ch);
/* Delivers an event: calls the callback, or deep-copies it into the queue. Returns 0, or -1 when a token event is
 * lost to OOM; a DONE event always arrives (bare, as an error, in the node made with the channel, if need be). */
int channel_emit(channel *ch, const tern_event *ev);

/* ---- constrained decoding (constraint.c) ------------------------------------------------------------ */

/* A compiled grammar shared by the requests that ask for it, and the engine's cache of them (reference counted: the
 * cache holds one reference, each request another). */
typedef struct eng_grammar {
    atomic_int refs;
    uint64_t min_tokens;  /* fewest tokens any complete reply takes (its shortest sentence over the longest token) */
    uint64_t key;         /* hash of the text and the special-token flag */
    char *text;           /* the text itself (a hash alone could be forged to match another request's) */
    size_t len;
    int special;
    tern_grammar *g;
    tern_gdfa *dfa;
    double used;          /* last acquired (the cache drops the least recent) */
    struct eng_grammar *next;
} eng_grammar;

/* The compiled grammar for `text` (from the cache, or compiled and cached); special: special tokens match their text
 * (else they never match). Errors are the compiler's (TERN_EINVAL naming line and column). */
TERN_MUST_CHECK tern_err *constraint_acquire(tern_engine *e, const char *text, size_t len, int special, eng_grammar **out);
/* Drops a reference; NULL is fine. */
void constraint_release(eng_grammar *g);
/* Drops the engine's cache and vocabularies (at destroy). */
void constraint_destroy(tern_engine *e);
/* Sets the logits of tokens the grammar does not allow from `state` to -inf (scratch: (vocab + 63) / 64 words).
 * NULL, or an error message (static text) when no token may follow or the DFA ran out of room. */
const char *constraint_mask(eng_grammar *g, int32_t state, float *logits, int64_t vocab, uint64_t *scratch);

/* ---- requests --------------------------------------------------------------------------------- */

typedef struct eng_request {
    uint64_t id;
    int32_t *prompt;
    int64_t n_prompt;
    tern_chain_params sp; /* sp.bias points into `bias` */
    int sample_drafts;    /* sampling without a seed of its own: model sources sample their drafts (verified by
                           * min(1, p/q)); a seeded request keeps one-hot drafts, choosing the tokens it would
                           * choose without speculation */
    tern_bias *bias;
    int32_t *stop_ids;
    int n_stop_ids;
    char **stops;
    size_t *stop_lens;
    int n_stops;
    int64_t max_tokens; /* after clamping */
    uint64_t reserve;   /* KV bytes reserved while admitted */
    int ignore_eos, render_special;
    float *emb;             /* soft-token rows [n_emb][hidden], or NULL */
    int64_t n_emb;
    int32_t *emb_at;        /* [n_prompt]: the row each prompt position feeds, -1 = its id; NULL without rows */
    tern_tok_span *spans;   /* [n_prompt]: the image span a position lies in (or -1, -1), on a model that sees an
                             * image both ways (the rest of a span is fed in one forward); NULL without */
    int32_t *keys;          /* [n_prompt]: the ids the prefix cache keys positions by (soft tokens: from their span's
                             * key), NULL when they are the prompt's */
    eng_grammar *grammar;   /* the reply must follow it, or NULL */
    int32_t *prediction;    /* predicted output (drafted from), or NULL */
    int64_t n_prediction;
    int draft_max;          /* resolved: 0 = no speculation */
    tern_pc_prefetch *prefetch; /* its cached prefix read from the prompt cache's disk tier at submit, or NULL */
    int embed;              /* an embedding request: the prompt only, its hidden states pooled */
    tern_pooling pooling;
    channel *ch;
    double t_submit, t_admit, t_first;
    struct eng_request *next; /* wait queue */
} eng_request;

/* Frees a request and drops its channel reference; NULL is fine. */
void request_free(eng_request *r);

/* ---- rows ------------------------------------------------------------------------------------- */

typedef enum { ROW_FREE = 0, ROW_ADMITTED, ROW_PREFILL, ROW_DECODE } row_phase;

typedef struct eng_row {
    int seq;                 /* KV sequence (= row index) */
    row_phase phase;
    eng_request *req;        /* guarded by mu (cancel reads it) */
    uint64_t admit_order;    /* prefill goes first-admitted first */
    int32_t *toks;           /* prompt then generated tokens; toks[0, n_past) are in the KV */
    int32_t *keys;           /* the same as the prefix cache keys them (soft tokens differ), or NULL: toks */
    int64_t n_toks, cap_toks;
    int64_t n_past, n_gen, cached;
    tern_chain *chain;
    tern_detok_stream *detok;
    tern_stop_text stop;
    tern_pc_cursor *cursor;
    char *final;             /* text released with DONE */
    size_t n_final, cap_final;
    /* this step */
    int64_t feed;            /* tokens fed in this step's forward */
    int out;                 /* its logits row, or -1 */
    tern_logprobs *lp;       /* [draft_max + 1]: each chosen token's */
    /* speculation */
    tern_draft_source *src;  /* this request's draft source, or NULL */
    int32_t *draft;          /* [draft_max] this step's drafted tokens */
    float *draft_q;          /* [draft_max][vocab] sampling rows of sampling sources: the distributions the drafts
                              * were drawn from (made at the first such row), or NULL: drafts are argmaxes */
    int asked;               /* its source was asked this step (and so hears what the row kept) */
    float *h;                /* [hidden] the target's final hidden state before the fed token (sources needing it) */
    int hout;                /* this step's first hidden-state row, or -1 */
    int n_draft;
    int32_t *chosen_toks;    /* [draft_max + 1] this step's chosen tokens (accepted drafts, then the target's own) */
    int32_t gstate;          /* constrained rows: the grammar's DFA state after the tokens so far */
    uint64_t *gmask;         /* constrained rows: mask scratch [(vocab + 63) / 64] */
    const char *gfail;       /* set by sampling when the grammar left no token: the row ends with this error */
    int n_chosen;
    tern_draft_policy pol;   /* when it drafts and how much (draft/policy.h) */
    int64_t drafted, accepted, pred_accepted, pred_rejected;
    float *pooled;           /* [hidden] embedding rows: the pooled hidden state so far (made at the first) */
} eng_row;

struct tern_engine {
    tern_model *model;
    tern_lm *lm;
    const tern_lm_desc *desc;
    int64_t vocab;
    tern_engine_opts o; /* resolved */
    tern_kv_type kt, vt; /* the cache's K and V storage (o.cache_type_k / _v) */
    tern_pool *pool;
    tern_kv *kv;
    tern_kv_cost cost;
    tern_prefix_cache *pc; /* NULL when off */
    tern_draft_source *sources[TERN_DRAFT_KINDS]; /* NULL when off */
    tern_draft_lessons lessons; /* what each source's rows have taught its new ones (engine thread only) */
    eng_row *rows;         /* [parallel] */
    float *logits;         /* [parallel * (draft_max + 1)][vocab] */
    float *hidden;         /* [step_tokens + parallel * (draft_max + 1)][hidden]: the hidden states a step's tokens
                            * ask for (draft sources reading them, embedding rows) */
    int *b_seq, *b_row;    /* batch scratch [parallel] */
    int64_t *b_ntok;
    int32_t *b_ids;        /* [step_tokens] */
    uint8_t *b_want;       /* [step_tokens] */
    const float **b_emb;   /* [step_tokens] soft-token rows (tern_batch.embeds) */
    tern_tok_span *b_span; /* [step_tokens] the spans seen both ways (tern_batch.spans) */
    int ring_extra;        /* positions past the window the sliding layers keep: the prefill chunk, or a whole image
                            * on a model that sees an image both ways (tern_fit_ring_extra) */
    uint8_t *b_prefill;    /* [parallel] */
    int *ready;            /* rows sampling this step */
    int n_ready;
    pthread_t thread;
    int thread_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    eng_request *q_head, *q_tail;
    int q_len;
    int stopping;
    tern_budget budget;
    uint64_t next_id, admit_counter, seed_state;
    tern_metrics m; /* counters (configuration fields filled at create) */

    pthread_mutex_t gram_mu;  /* the grammar cache and the vocabularies below (taken by submitting threads) */
    eng_grammar *grammars;
    tern_gvocab *gvocab[2];   /* the vocabulary as bytes: special tokens never matching / matching their text */
};

/* The engine thread's body (scheduler.c). */
void *engine_thread_main(void *arg);
/* Ends every row and queued request with `finish` (used by destroy after the thread stopped). */
void engine_finish_all(tern_engine *e, tern_finish finish);

/* Validates a submitted request against the engine and copies it (request.c); rejects with TERN_EINVAL. */
TERN_MUST_CHECK tern_err *request_build(tern_engine *e, const tern_request *r, eng_request **out);

#endif
