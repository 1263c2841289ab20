/* draft.h — draft sources: where speculative decoding's proposed tokens come from. The engine verifies what a
 * source proposes (one target forward over [last, d1..dk] per row, all speculating rows in one batch) and keeps
 * the prefix the target's own sampling agrees with, so a source can only change speed, never the output.
 *
 * A source serves the engine's rows: it learns a row's prompt (and prediction) when the row starts, proposes up to
 * k tokens for a batch of rows at once, hears how many of them each row kept, and forgets a row when it ends. Rows
 * come and go between steps; a source keeps whatever per-row state it needs indexed by row.
 *
 *   ngram.c       prompt lookup: what followed the longest earlier match of the row's last tokens
 *   prediction.c  OpenAI predicted outputs: the request's expected text, followed by its bytes where the output
 *                 matches it (so a different token split costs one token)
 *   assistant.c   a drafter model that reads the target's cache (the Gemma 4 assistant, models/cache_drafter.h):
 *                 it needs the target's final hidden state at the position before the fed token
 *   draft_model.c a smaller model with the same vocabulary, decoding ahead with its own cache
 *
 * The two model sources take their drafter's argmax for a greedy row and sample it for a sampling row. */
#ifndef TERN_DRAFT_DRAFT_H
#define TERN_DRAFT_DRAFT_H

#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "kv/kv_cache.h"
#include "models/cache_drafter.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

typedef enum tern_draft_kind {
    TERN_DRAFT_NGRAM = 0,
    TERN_DRAFT_PREDICTION,
    TERN_DRAFT_ASSISTANT,
    TERN_DRAFT_MODEL,
    TERN_DRAFT_KINDS
} tern_draft_kind;

/* One row's ask: its tokens so far (prompt then output; the last one is the token being fed), how many of
 * them are the prompt, and room for up to k proposals. */
struct tern_draft_ask;
typedef struct tern_draft_ask {
    int row;
    const int32_t *toks;
    int64_t n_toks, n_prompt;
    int k;
    const float *hidden; /* the target's final normed hidden state before the fed token (sources that need it) */
    int32_t *out; /* [k] */
    int n_out;    /* set by the source: 0..k */
    /* A constrained row (NULL otherwise): restricts logits[vocab] of the token drafted at position n_out (after
     * out[0, n_out)) to what the row's grammar allows there. Sources that choose from logits call it before
     * choosing; the engine drops whatever other sources draft past the first token the grammar forbids. Returns 0,
     * or -1 when nothing is allowed (the source then stops drafting the row). */
    int (*constrain)(const struct tern_draft_ask *a, float *logits, int64_t vocab);
    /* A sampling row (NULL otherwise): sources that choose from logits draw the token at position n_out with it
     * (after `constrain`) instead of taking the argmax; the engine keeps the distribution it was drawn from and
     * verifies the draft against it (min(1, p/q)), which keeps more drafts than a greedy one at a temperature. */
    int32_t (*sample)(const struct tern_draft_ask *a, float *logits, int64_t vocab);
    void *ctx; /* the engine's, for constrain and sample */
} tern_draft_ask;

typedef struct tern_draft_source tern_draft_source;

typedef struct tern_draft_vt {
    const char *name; /* as /metrics labels it */
    /* Row `row` starts a request; prediction (may be empty) is the request's predicted output. */
    tern_err *(*row_start)(tern_draft_source *s, int row, const int32_t *prediction, int64_t n_prediction);
    /* Fills each ask's out[0, n_out). A failure leaves the rows to plain decoding for this step. */
    tern_err *(*draft)(tern_draft_source *s, tern_draft_ask *asks, int n);
    /* The row kept n_toks tokens (everything drafted beyond them is gone). */
    void (*commit)(tern_draft_source *s, int row, int64_t n_toks);
    void (*row_end)(tern_draft_source *s, int row);
    void (*free)(tern_draft_source *s);
} tern_draft_vt;

struct tern_draft_source {
    const tern_draft_vt *vt;
    tern_draft_kind kind;
    int needs_hidden; /* asks carry the target's hidden state */
    int samples;      /* chooses from logits, and draws every draft with `sample` when an ask carries it (sampling
                       * rows' asks do) */
};

/* Prompt lookup over `rows` rows: matches of the last max_n .. min_n tokens. */
TERN_MUST_CHECK tern_err *tern_draft_ngram_new(int rows, int min_n, int max_n, tern_draft_source **out);
/* Predicted outputs over `rows` rows, followed in the prediction's text (tok gives each token's bytes and
 * tokenizes the rest of a token the output stopped inside). */
TERN_MUST_CHECK tern_err *tern_draft_prediction_new(int rows, const tern_tokenizer *tok, tern_draft_source **out);
/* A drafter model reading `target`'s cache `kv` (its sequence r for row r), from dir; refused at start when its
 * geometry does not fit the target (the message gives both sides' numbers). */
TERN_MUST_CHECK tern_err *tern_draft_assistant_new(const char *dir, tern_draft_head head, const tern_lm *target, const tern_kv *kv,
                                   tern_pool *pool, tern_draft_source **out);
/* How the engine hands the draft room a model of its own: `load` loads the checkpoint at dir (with the engine's
 * loader) into a network and its tokenizer, held by *handle until `release` frees it. The draft room stays below
 * the loader. */
typedef struct tern_draft_loader {
    TERN_MUST_CHECK tern_err *(*load)(void *ctx, const char *dir, void **handle, tern_lm **lm,
                                      const tern_tokenizer **tok);
    void (*release)(void *handle);
    void *ctx;
} tern_draft_loader;

/* The target a drafter drafts for: its network, its tokenizer and its KV cache (sequence r for row r). */
typedef struct tern_draft_target {
    tern_lm *lm;
    const tern_tokenizer *tok;
    const tern_kv *kv;
} tern_draft_target;

/* Two-model drafting with the checkpoint at dir (loaded by ld, released with the source), for `rows` rows of up to
 * ctx tokens; refused when its vocabulary differs from the target's. */
TERN_MUST_CHECK tern_err *tern_draft_model_new(const char *dir, const tern_draft_loader *ld,
                                               const tern_draft_target *target, int rows, int64_t ctx,
                                               tern_pool *pool, tern_draft_source **out);
/* The drafter at dir, whichever kind its config.json says (draft/open.c): a cache drafter such as the Gemma 4
 * assistant (reads the target's cache) or a model of its own (two-model, loaded by ld). */
TERN_MUST_CHECK tern_err *tern_draft_open(const char *dir, tern_draft_head head, const tern_draft_target *target,
                                          const tern_draft_loader *ld, int rows, int64_t ctx, tern_pool *pool,
                                          tern_draft_source **out);
/* Frees; NULL is fine. */
void tern_draft_source_free(tern_draft_source *s);

/* Finds the last tokens of key[0, n_key) (the most of them, at most max_n, at least min_n) in hay[0, n_hay) with at
 * least one token after the occurrence, and writes up to k of the tokens that followed it to out; returns how
 * many (0: no match). Among occurrences of the same length it takes the first ending at or after `from` when
 * from >= 0, else the latest. *end (may be NULL) receives where the chosen occurrence ends. `self`: hay is key
 * itself (prompt lookup), so the occurrence must end before key's end. */
int tern_draft_lookup(const int32_t *hay, int64_t n_hay, const int32_t *key, int64_t n_key, int self, int min_n,
                      int max_n, int64_t from, int k, int32_t *out, int64_t *end);

#endif
