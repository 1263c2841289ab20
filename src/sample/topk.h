/* topk.h — ranking the best candidates of a vocabulary without sorting all of it.
 *
 * Samplers walk candidates from the most likely down and usually stop after a few dozen of a
 * 262,144-token vocabulary, so sorting everything every token is wasted work. tern_rank_top
 * buckets the keys by value in two sequential passes (values in a higher bucket are all larger),
 * gathers only the top buckets holding at least k candidates, and sorts just those. The order is
 * total — key descending, then index ascending — so results never depend on the algorithm, and a
 * walk that needs more candidates simply asks again with a larger k. */
#ifndef TERN_SAMPLE_TOPK_H
#define TERN_SAMPLE_TOPK_H

#include <stdint.h>

/* Writes into idx[0, g) the g >= min(k, n) first candidates of keys[0, n) in order (key descending,
 * index ascending): the top k plus whatever shares their lowest value bucket. idx must hold n entries
 * (it is used as scratch). NaN keys rank last. Returns g. */
int64_t tern_rank_top(const float *keys, int64_t n, int64_t k, int32_t *idx);
/* The k largest of x (k small, e.g. top logprobs) in order into ids[]: one pass, no scratch.
 * Returns min(k, n). */
int tern_top_few(const float *x, int64_t n, int k, int32_t *ids);

#endif
