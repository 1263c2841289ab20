/* logprobs.c — log-softmax of the chosen token and the top alternatives (see logprobs.h). */
#include "sample/logprobs.h"

#include <math.h>

#include "sample/topk.h"

double tern_logsumexp(const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    if (!(mx > -INFINITY))
        return -INFINITY;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)expf(x[i] - mx);
    return (double)mx + log(s);
}

void tern_logprobs_compute(const float *logits, int64_t n, int32_t chosen, int n_top, tern_logprobs *out) {
    double lse = tern_logsumexp(logits, n);
    out->chosen = chosen >= 0 && chosen < n ? (float)((double)logits[chosen] - lse) : -INFINITY;
    if (n_top < 0)
        n_top = 0;
    if (n_top > TERN_MAX_TOP_LOGPROBS)
        n_top = TERN_MAX_TOP_LOGPROBS;
    out->n_top = tern_top_few(logits, n, n_top, out->top_ids);
    for (int i = 0; i < out->n_top; i++)
        out->top[i] = (float)((double)logits[out->top_ids[i]] - lse);
}
