/* penalties.h — logit processors that look at the context: repetition, presence and frequency
 * penalties over a window of recent tokens, and a per-token logit bias.
 *
 * The window is the last `last_n` tokens accepted (prompt tokens included when the caller feeds
 * them, as llama.cpp does); counts are kept incrementally, so applying the penalties costs
 * O(distinct tokens in the window), not O(vocabulary) or O(window) per token.
 *   repetition (CTRL / Hugging Face): a seen token's logit l becomes l / p if l > 0, else l * p;
 *   presence (OpenAI): l -= presence for a seen token;  frequency (OpenAI): l -= frequency * count. */
#ifndef TERN_SAMPLE_PENALTIES_H
#define TERN_SAMPLE_PENALTIES_H

#include <stdint.h>

#include "core/status.h"

typedef struct tern_penalties {
    float repeat;    /* 1 = off */
    float presence;  /* 0 = off */
    float frequency; /* 0 = off */
} tern_penalties;

typedef struct tern_penalty_window {
    int64_t vocab;
    int64_t last_n;     /* window size; -1 = everything accepted; 0 = nothing is tracked */
    int32_t *count;     /* [vocab] occurrences in the window */
    int32_t *where;     /* [vocab] position of the token in `present`, valid while count > 0 */
    int32_t *present;   /* [vocab] the distinct tokens with count > 0 */
    int64_t n_present;
    int32_t *ring;      /* [last_n] the window's tokens, oldest at `head` once full */
    int64_t ring_len, head;
} tern_penalty_window;

typedef struct tern_bias {
    int32_t id;
    float value; /* added to the logit; -INFINITY bans the token */
} tern_bias;

/* Prepares an empty window over a vocabulary; last_n as in the struct. Zero the struct first. */
TERN_MUST_CHECK tern_err *tern_penalty_window_init(tern_penalty_window *w, int64_t vocab, int64_t last_n);
/* Empties the window (cost: the distinct tokens in it), keeping its storage and size. */
void tern_penalty_window_clear(tern_penalty_window *w);
/* Frees the storage; a zeroed struct is fine. */
void tern_penalty_window_free(tern_penalty_window *w);
/* Adds a token to the window (the oldest leaves once it holds last_n); ids outside the vocabulary are ignored. */
void tern_penalty_window_accept(tern_penalty_window *w, int32_t id);
/* Occurrences of `id` in the window. */
int32_t tern_penalty_window_count(const tern_penalty_window *w, int32_t id);
/* Applies the penalties to logits[vocab] for every token in the window. */
void tern_penalties_apply(const tern_penalty_window *w, const tern_penalties *p, float *logits);
/* 1 if the penalties change anything. */
int tern_penalties_active(const tern_penalties *p);
/* Adds each bias to its token's logit; ids outside [0, vocab) are ignored (callers validate them). */
void tern_logit_bias_apply(const tern_bias *bias, int n, float *logits, int64_t vocab);

#endif
