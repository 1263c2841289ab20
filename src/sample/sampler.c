/* sampler.c — token selection (see sampler.h). */
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The sum of w[0, n): the sum of its block sums. */
static double weights_total(const float *w, int64_t n) {
    double total = 0;
    for (int64_t b = 0; b < n; b += SAMPLE_BLOCK)
        total += block_sum(w, b, b + SAMPLE_BLOCK < n ? b + SAMPLE_BLOCK : n);
    return total;
}

/* A draw from weights w[0, n) (not normalised) in index order: the draw finds its block by the block sums' running
 * sum, then its token within. */
static int32_t draw_weights(const float *w, int64_t n, tern_rng *rng) {
    const double total = weights_total(w, n);
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

/* work = (logit - max) / T, the largest 0 so exp() never overflows, NaN impossible; returns 0 when nothing is
 * possible (all banned). */
static int scale(const float *logits, int64_t n, float temperature, float *work) {
    const float mx = logits[tern_argmax(logits, n)];
    if (!(mx > -INFINITY))
        return 0;
    for (int64_t i = 0; i < n; i++) {
        float w = (logits[i] - mx) / temperature;
        work[i] = w == w ? w : -INFINITY;
    }
    return 1;
}

static int nothing_cut(const tern_sampling *p, int64_t n) {
    return !(p->top_k > 0 && p->top_k < n) && !(p->top_p < 1.0f) && !(p->min_p > 0.0f);
}

/* With a filter on: how many of the best-ranked candidates top-k, top-p and min-p keep (ranks [0, m) of r), and
 * *sum, the sum of their e^work. */
static int64_t kept_candidates(ranked *r, const tern_sampling *p, double *sum) {
    const float *work = r->keys;
    const int64_t n = r->n;
    double total = 0;
    int64_t m = p->top_k > 0 && p->top_k < n ? p->top_k : n; /* candidates kept so far: ranks [0, m) */
    if (m < n)
        for (int64_t i = 0; i < m; i++)
            total += (double)expf(work[rank_at(r, i)]);
    else
        for (int64_t i = 0; i < n; i++)
            total += (double)expf(work[i]);
    if (p->top_p < 1.0f) { /* the smallest prefix whose probability reaches top_p (at least one) */
        double acc = 0;
        for (int64_t i = 0; i < m; i++) {
            acc += (double)expf(work[rank_at(r, i)]) / total;
            if (acc >= p->top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) { /* drop tokens below min_p times the top probability (exp(0) = 1) */
        int64_t keep = 1;
        while (keep < m && (double)expf(work[rank_at(r, keep)]) >= p->min_p)
            keep++;
        m = keep;
    }
    *sum = 0;
    if (m == n)
        *sum = total;
    else
        for (int64_t i = 0; i < m; i++)
            *sum += (double)expf(work[rank_at(r, i)]);
    return m;
}

int32_t tern_sample(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work, int32_t *idx) {
    if (p->temperature <= 0.0f || n <= 1)
        return tern_argmax(logits, n);
    if (!scale(logits, n, p->temperature, work)) /* nothing is possible: fall back to the first token */
        return 0;
    if (nothing_cut(p, n)) {
        tern_exp(work, n);
        return draw_weights(work, n, rng);
    }
    ranked r = {work, idx, n, 0};
    double sum;
    const int64_t m = kept_candidates(&r, p, &sum);
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

void tern_sample_probs(const float *logits, int64_t n, const tern_sampling *p, float *probs, float *work,
                       int32_t *idx) {
    if (p->temperature <= 0.0f || n <= 1 || !scale(logits, n, p->temperature, work)) {
        const int32_t t = p->temperature <= 0.0f || n <= 1 ? tern_argmax(logits, n) : 0;
        memset(probs, 0, (size_t)n * sizeof *probs);
        probs[t] = 1.0f;
        return;
    }
    if (nothing_cut(p, n)) {
        memcpy(probs, work, (size_t)n * sizeof *probs);
        tern_exp(probs, n);
        const float inv = (float)(1.0 / weights_total(probs, n));
        for (int64_t i = 0; i < n; i++)
            probs[i] *= inv;
        return;
    }
    ranked r = {work, idx, n, 0};
    double sum;
    const int64_t m = kept_candidates(&r, p, &sum);
    memset(probs, 0, (size_t)n * sizeof *probs);
    for (int64_t i = 0; i < m; i++)
        probs[idx[i]] = (float)((double)expf(work[idx[i]]) / sum);
}

int32_t tern_sample_from(const float *probs, int64_t n, tern_rng *rng) { return draw_weights(probs, n, rng); }

int32_t tern_sample_draft(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *work,
                          int32_t *idx, int32_t draft, int *accepted) {
    /* The token is drawn exactly as without a draft (one uniform, the same walk), and the draft is kept when it is
     * that token: the draft is accepted with probability p(draft), as rejection sampling against a one-hot proposal
     * would, the output is distributed as p, and a seeded request draws the same tokens as without speculation. */
    int32_t t = tern_sample(logits, n, p, rng, work, idx);
    *accepted = t == draft;
    return t;
}

int32_t tern_sample_draft_q(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng, float *probs,
                            float *work, int32_t *idx, const float *q, int32_t draft, int *accepted) {
    /* Speculative sampling: keep the draft with probability min(1, p/q) at it; otherwise draw from the part of p
     * that q under-proposes, max(0, p - q) normalised — together exactly p, whatever q is. */
    tern_sample_probs(logits, n, p, probs, work, idx);
    const double u = tern_rng_uniform(rng);
    *accepted = q[draft] > 0.0f && u * (double)q[draft] < (double)probs[draft];
    if (*accepted)
        return draft;
    int any = 0;
    for (int64_t i = 0; i < n; i++) {
        const float d = probs[i] - q[i];
        probs[i] = d > 0.0f ? d : 0.0f;
        any |= d > 0.0f;
    }
    if (!any) /* p and q equal but for rounding (a rejection is then all but impossible): draw from p */
        tern_sample_probs(logits, n, p, probs, work, idx);
    const int32_t t = draw_weights(probs, n, rng);
    *accepted = t == draft; /* the residual never holds the draft (p < q there), unless p was drawn afresh */
    return t;
}
