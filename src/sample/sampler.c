/* sampler.c — token selection (see sampler.h). */
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void tern_rng_seed(tern_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) { /* splitmix64 expands the seed */
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        r->s[i] = z ^ (z >> 31);
    }
}

uint64_t tern_rng_next(tern_rng *r) {
    uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tern_rng_uniform(tern_rng *r) { return (double)(tern_rng_next(r) >> 11) * 0x1.0p-53; }

tern_sampling tern_sampling_greedy(void) { return (tern_sampling){0.0f, 0, 1.0f, 0.0f}; }

int32_t tern_argmax(const float *logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

/* Orders candidate indices by value descending (ties: lower index first). */
static int by_value_desc(const void *a, const void *b, void *keys) {
    const float *sort_keys = keys;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (sort_keys[i] != sort_keys[j])
        return sort_keys[i] > sort_keys[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

int32_t tern_sample(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work, int32_t *idx) {
    if (p->temperature <= 0.0f)
        return tern_argmax(logits, n);
    /* Candidates: all, or the top_k largest, ordered by logit. */
    float mx = logits[tern_argmax(logits, n)];
    for (int64_t i = 0; i < n; i++) {
        work[i] = (logits[i] - mx) / p->temperature;
        idx[i] = (int32_t)i;
    }
    qsort_r(idx, (size_t)n, sizeof *idx, by_value_desc, work);
    int64_t m = n;
    if (p->top_k > 0 && p->top_k < m)
        m = p->top_k;
    double sum = 0;
    for (int64_t i = 0; i < m; i++)
        sum += exp((double)work[idx[i]]);
    if (p->top_p < 1.0f) { /* smallest prefix whose probability reaches top_p (at least one) */
        double acc = 0;
        int64_t keep = m;
        for (int64_t i = 0; i < m; i++) {
            acc += exp((double)work[idx[i]]) / sum;
            if (acc >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        m = keep;
    }
    if (p->min_p > 0.0f) { /* drop tokens below min_p times the top probability */
        double top = exp((double)work[idx[0]]);
        int64_t keep = 1;
        while (keep < m && exp((double)work[idx[keep]]) >= p->min_p * top)
            keep++;
        m = keep;
    }
    sum = 0;
    for (int64_t i = 0; i < m; i++)
        sum += exp((double)work[idx[i]]);
    double u = tern_rng_uniform(rng) * sum, acc = 0;
    for (int64_t i = 0; i < m; i++) {
        acc += exp((double)work[idx[i]]);
        if (u < acc)
            return idx[i];
    }
    return idx[m - 1];
}
