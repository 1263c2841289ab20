/* chain.h — one request's sampling pipeline, run once per generated token:
 *
 *   raw logits ──▶ logprobs (reported, from the raw distribution)
 *              ──▶ logit bias ──▶ repetition / presence / frequency penalties over the window
 *              ──▶ greedy argmax, or temperature → top-k → top-p → min-p → seeded draw
 *
 * A chain owns its scratch (a few vocabulary-sized arrays) and its RNG, so rows of a batch can
 * sample on different threads at once, and a row's choices depend only on its own logits,
 * parameters and history — never on the batch it ran in. Accepting a token is separate from
 * choosing it, so a verifier (speculative decoding) can choose at several positions and accept
 * only the prefix it keeps. */
#ifndef TERN_SAMPLE_CHAIN_H
#define TERN_SAMPLE_CHAIN_H

#include <stdint.h>

#include "core/status.h"
#include "sample/logprobs.h"
#include "sample/penalties.h"
#include "sample/sampler.h"

typedef struct tern_chain_params {
    tern_sampling s;        /* temperature (<= 0: greedy), top_k, top_p, min_p */
    tern_penalties pen;     /* repetition / presence / frequency */
    int64_t penalty_last_n; /* tokens of context the penalties see: -1 all, 0 none */
    const tern_bias *bias;  /* n_bias entries, copied by tern_chain_start */
    int n_bias;
    uint64_t seed;
    int logprobs;           /* 1: compute the chosen token's logprob */
    int top_logprobs;       /* alternatives to report, 0..TERN_MAX_TOP_LOGPROBS */
} tern_chain_params;

typedef struct tern_chain tern_chain;

/* The default parameters: greedy, no penalties (repeat 1, window 64), no bias, no logprobs. */
tern_chain_params tern_chain_defaults(void);
/* Checks ranges (temperature >= 0, top_p in (0, 1], min_p in [0, 1], repeat > 0, bias ids in the
 * vocabulary, ...); errors name the parameter. */
TERN_MUST_CHECK tern_err *tern_chain_params_check(const tern_chain_params *p, int64_t vocab);
/* A chain with scratch for a vocabulary of `vocab` tokens. */
TERN_MUST_CHECK tern_err *tern_chain_new(int64_t vocab, tern_chain **out);
/* Frees; NULL is fine. */
void tern_chain_free(tern_chain *c);
/* Starts a request: parameters (checked), RNG seeded, window cleared and then fed the last
 * penalty_last_n tokens of `context` (the prompt; may be NULL). */
TERN_MUST_CHECK tern_err *tern_chain_start(tern_chain *c, const tern_chain_params *p, const int32_t *context, int64_t n_context);
/* Chooses the next token from logits[vocab] (not modified); fills *lp when logprobs were asked for
 * (lp may be NULL). Does not accept it. */
int32_t tern_chain_choose(tern_chain *c, const float *logits, tern_logprobs *lp);
/* Chooses the next token given a drafted one (speculative verification): the same distribution as
 * tern_chain_choose (tern_sample_draft); *accepted says whether the choice is the draft. Does not accept it. */
int32_t tern_chain_verify(tern_chain *c, const float *logits, int32_t draft, tern_logprobs *lp, int *accepted);
/* Drafts a token by sampling a drafter's logits[vocab] (biased in place) under the request's bias, temperature, top-k,
 * top-p and min-p (not its penalties), from a generator of its own seeded by the request's seed; q[vocab] receives
 * the distribution it was drawn from, for tern_chain_verify_q. */
int32_t tern_chain_draft(tern_chain *c, float *logits, float *q);
/* tern_chain_verify for a token drafted from q (tern_chain_draft): kept with probability min(1, p/q) at it
 * (tern_sample_draft_q); the choice is distributed as tern_chain_choose's, but seeded runs choose other tokens than
 * without drafts. */
int32_t tern_chain_verify_q(tern_chain *c, const float *logits, int32_t draft, const float *q, tern_logprobs *lp,
                            int *accepted);
/* Adds a token to the history the penalties see. */
void tern_chain_accept(tern_chain *c, int32_t id);

#endif
