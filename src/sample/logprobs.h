/* logprobs.h — log-probabilities of chosen tokens and their strongest alternatives.
 *
 * Reported from the model's own distribution: log-softmax of the raw logits, before bias,
 * penalties, temperature and truncation (what vLLM reports by default), so a token's logprob
 * says what the model thought of it, whatever the sampling settings. */
#ifndef TERN_SAMPLE_LOGPROBS_H
#define TERN_SAMPLE_LOGPROBS_H

#include <stdint.h>

#define TERN_MAX_TOP_LOGPROBS 20

typedef struct tern_logprobs {
    float chosen;                           /* logprob of the chosen token */
    int n_top;                              /* alternatives filled, <= TERN_MAX_TOP_LOGPROBS */
    int32_t top_ids[TERN_MAX_TOP_LOGPROBS]; /* most likely first (ties: lower id first) */
    float top[TERN_MAX_TOP_LOGPROBS];
} tern_logprobs;

/* log(sum(exp(x))) over n values, in double; -INFINITY when every value is -INFINITY. */
double tern_logsumexp(const float *x, int64_t n);
/* Fills out with the logprob of `chosen` and the n_top (clamped to [0, TERN_MAX_TOP_LOGPROBS]) most likely tokens. */
void tern_logprobs_compute(const float *logits, int64_t n, int32_t chosen, int n_top, tern_logprobs *out);

#endif
