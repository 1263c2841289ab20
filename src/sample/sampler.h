/* sampler.h — choosing the next token from logits: greedy, or temperature with top-k, top-p and
 * min-p filtering, drawn from a seeded RNG so a seed reproduces a run. */
#ifndef TERN_SAMPLE_SAMPLER_H
#define TERN_SAMPLE_SAMPLER_H

#include <stdint.h>

typedef struct tern_rng {
    uint64_t s[4];
} tern_rng;

typedef struct tern_sampling {
    float temperature; /* <= 0: greedy */
    int top_k;         /* 0: off */
    float top_p;       /* 1: off */
    float min_p;       /* 0: off */
} tern_sampling;

/* Seeds the generator (xoshiro256**) from one 64-bit seed. */
void tern_rng_seed(tern_rng *r, uint64_t seed);
/* Next 64 random bits. */
uint64_t tern_rng_next(tern_rng *r);
/* Uniform in [0, 1). */
double tern_rng_uniform(tern_rng *r);
/* Default parameters: greedy. */
tern_sampling tern_sampling_greedy(void);
/* Index of the largest logit (lowest index on ties). */
int32_t tern_argmax(const float *logits, int64_t n);
/* Picks a token. Processing order (as Hugging Face applies it): temperature, top-k, top-p, min-p;
 * the draw walks the kept candidates from the most likely down (ties: lower id first). Candidates
 * are ranked only as deep as the walk goes (topk.h), so a typical call costs O(n), not a sort.
 * When nothing is cut (no top-k below n, top-p 1, min-p 0) nothing is ranked: the draw walks the
 * vocabulary in index order, by blocks of 256 (each summed over 4 interleaved chains, in double).
 * `work` must hold n floats and `idx` n ints; logits are not modified. */
int32_t tern_sample(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work, int32_t *idx);

/* The distribution tern_sample draws from, as probabilities: probs[n] (zero where a filter cuts; one-hot at the
 * argmax when greedy). `work` and `idx` are scratch of n. */
void tern_sample_probs(const float *logits, int64_t n, const tern_sampling *p, float *probs, float *work,
                       int32_t *idx);
/* A token drawn from probs[n] (weights: need not sum to 1). */
int32_t tern_sample_from(const float *probs, int64_t n, tern_rng *rng);

/* Verifies a drafted token: the token tern_sample draws (the same draw, the same RNG use), accepted iff it is the
 * draft — so it is accepted with probability p(draft) (rejection sampling against a one-hot proposal), the result is
 * distributed as tern_sample's, and a seeded run chooses the same tokens with or without drafts. *accepted says
 * whether the result is the draft. */
int32_t tern_sample_draft(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work,
                          int32_t *idx, int32_t draft, int *accepted);
/* Verifies a token drafted by drawing from q[n] (a drafter's distribution; q[draft] > 0): kept with probability
 * min(1, p(draft) / q(draft)), else a token drawn from max(0, p - q) renormalised, so the result is distributed as
 * tern_sample's p whatever q is, and the draft is kept with probability sum(min(p, q)) — higher than p(draft) when
 * q is close to p. Uses other random draws than tern_sample. `probs`, `work`, `idx`: scratch of n. */
int32_t tern_sample_draft_q(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *probs,
                            float *work, int32_t *idx, const float *q, int32_t draft, int *accepted);

#endif
