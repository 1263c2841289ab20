/* sampler.c — token selection (see sampler.h). */
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "core/hash.h"
#include "sample/topk.h"
#include "tensor/ops.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void tern_rng_seed(tern_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) /* splitmix64 expands the seed */
        r->s[i] = tern_splitmix64(&seed);
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
    /* The maximum first, over 8 independent lanes (no carried index, so it vectorises), then its first
     * position. NaNs never win a comparison, so they are skipped; all NaN yields 0. */
    float lane[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] = logits[i + k] > lane[k] ? logits[i + k] : lane[k];
    for (; i < n; i++)
        lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
    float m = lane[0];
    for (int k = 1; k < 8; k++)
        m = lane[k] > m ? lane[k] : m;
    for (i = 0; i + 8 <= n; i += 8) { /* the block holding the first maximum, 8 comparisons at a time */
        int hit = 0;
        for (int k = 0; k < 8; k++)
            hit |= logits[i + k] == m;
        if (hit)
            break;
    }
    for (; i < n; i++)
        if (logits[i] == m)
            return (int32_t)i;
    return 0;
}

/* The sorted prefix of candidates in `idx`, grown (by ranking again with a larger k) as a walk needs more. */
typedef struct ranked {
    const float *keys;
    int32_t *idx;
    int64_t n, sorted;
} ranked;

/* Makes sure idx[0, i] is in order; returns the candidate at rank i. */
static int32_t rank_at(ranked *r, int64_t i) {
    if (i >= r->sorted) {
        int64_t k = r->sorted * 8 > i + 1 ? r->sorted * 8 : i + 1;
        r->sorted = tern_rank_top(r->keys, r->n, k < 64 ? 64 : k, r->idx);
    }
    return r->idx[i];
}

/* Blocks of the vocabulary whose sums let a draw with nothing cut skip to its block. */
#define SAMPLE_BLOCK 256

/* The sum of p[b, e) over four interleaved chains (no chain of dependent additions across the whole block). */
static double block_sum(const float *p, int64_t b, int64_t e) {
    double s[4] = {0, 0, 0, 0};
    int64_t i = b;
    for (; i + 4 <= e; i += 4)
        for (int k = 0; k < 4; k++)
            s[k] += (double)p[i + k];
    for (; i < e; i++)
        s[0] += (double)p[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* A draw over the whole vocabulary in index order, w holding (logit - max) / T: w becomes e^w, the total is the
 * sum of the block sums, and the draw finds its block by their running sum, then its token within. */
static int32_t draw_all(float *w, int64_t n, tern_rng *rng) {
    tern_exp(w, n);
    double total = 0;
    for (int64_t b = 0; b < n; b += SAMPLE_BLOCK)
        total += block_sum(w, b, b + SAMPLE_BLOCK < n ? b + SAMPLE_BLOCK : n);
    const double u = tern_rng_uniform(rng) * total;
    double acc = 0;
    for (int64_t b = 0; b < n; b += SAMPLE_BLOCK) {
        const int64_t e = b + SAMPLE_BLOCK < n ? b + SAMPLE_BLOCK : n;
        const double bs = block_sum(w, b, e);
        if (u < acc + bs) { /* the draw falls in this block: walk it */
            double a = acc;
            for (int64_t i = b; i < e; i++) {
                a += (double)w[i];
                if (u < a)
                    return (int32_t)i;
            }
        }
        acc += bs;
    }
    for (int64_t i = n - 1; i > 0; i--) /* rounding left u at the very top: the last possible token */
        if (w[i] > 0.0f)
            return (int32_t)i;
    return 0;
}

int32_t tern_sample(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work, int32_t *idx) {
    if (p->temperature <= 0.0f || n <= 1)
        return tern_argmax(logits, n);
    float mx = logits[tern_argmax(logits, n)];
    if (!(mx > -INFINITY)) /* nothing is possible (all banned): fall back to the first token */
        return 0;
    /* work = (logit - max) / T: the largest is 0, so exp() never overflows; NaN counts as impossible. */
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        float w = (logits[i] - mx) / p->temperature;
        work[i] = w == w ? w : -INFINITY;
    }
    if (!(p->top_k > 0 && p->top_k < n) && !(p->top_p < 1.0f) && !(p->min_p > 0.0f))
        return draw_all(work, n, rng);
    ranked r = {work, idx, n, 0};
    int64_t m = p->top_k > 0 && p->top_k < n ? p->top_k : n; /* candidates kept so far: ranks [0, m) */
    if (m < n)
        for (int64_t i = 0; i < m; i++)
            total += (double)expf(work[rank_at(&r, i)]);
    else
        for (int64_t i = 0; i < n; i++)
            total += (double)expf(work[i]);
    if (p->top_p < 1.0f) { /* the smallest prefix whose probability reaches top_p (at least one) */
        double acc = 0;
        for (int64_t i = 0; i < m; i++) {
            acc += (double)expf(work[rank_at(&r, i)]) / total;
            if (acc >= p->top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) { /* drop tokens below min_p times the top probability (exp(0) = 1) */
        int64_t keep = 1;
        while (keep < m && (double)expf(work[rank_at(&r, keep)]) >= p->min_p)
            keep++;
        m = keep;
    }
    double sum = 0;
    if (m == n)
        sum = total;
    else
        for (int64_t i = 0; i < m; i++)
            sum += (double)expf(work[rank_at(&r, i)]);
    double u = tern_rng_uniform(rng) * sum, acc = 0;
    for (int64_t i = 0; i < m; i++) {
        int32_t t = rank_at(&r, i);
        acc += (double)expf(work[t]);
        if (u < acc)
            return t;
    }
    /* Rounding left u at the very top: take the last candidate with any probability. */
    for (int64_t i = m - 1; i > 0; i--)
        if (work[rank_at(&r, i)] > -INFINITY)
            return rank_at(&r, i);
    return rank_at(&r, 0);
}

int32_t tern_sample_draft(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work,
                          int32_t *idx, int32_t draft, int *accepted) {
    /* The token is drawn exactly as without a draft (one uniform, the same walk), and the draft is kept when it is
     * that token: the draft is accepted with probability p(draft), as rejection sampling against a one-hot proposal
     * would, the output is distributed as p, and a seeded request draws the same tokens as without speculation. */
    int32_t t = tern_sample(logits, n, p, rng, work, idx);
    *accepted = t == draft;
    return t;
}
