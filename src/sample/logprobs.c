/* logprobs.c — log-softmax of the chosen token and the top alternatives (see logprobs.h). */
#include "sample/logprobs.h"

#include <math.h>

#include "sample/topk.h"
#include "tensor/ops.h"

double tern_logsumexp(const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    if (!(mx > -INFINITY))
        return -INFINITY;
    /* e^(x - max) a block at a time with the vectorised exp (NaN logits count as impossible), summed in double
     * over four chains. */
    double s[4] = {0, 0, 0, 0};
    float e[256];
    for (int64_t b = 0; b < n; b += 256) {
        const int64_t m = n - b < 256 ? n - b : 256;
        for (int64_t i = 0; i < m; i++)
            e[i] = x[b + i] - mx;
        tern_exp(e, m);
        for (int64_t i = 0; i < m; i++)
            s[i & 3] += (double)e[i];
    }
    return (double)mx + log((s[0] + s[1]) + (s[2] + s[3]));
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
