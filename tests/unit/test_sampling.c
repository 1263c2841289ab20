/* test_sampling.c — the sampling pipeline: partial selection against a full sort, the fast sampler
 * against a straightforward full-sort reference (same seed, same token), penalties and logit bias
 * with known values, logprobs, a seeded chain reproducing its draws, and speculative verification of a drafted
 * token keeping the sampler's distribution (chi-square). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/chain.h"
#include "sample/logprobs.h"
#include "sample/penalties.h"
#include "sample/sampler.h"
#include "sample/topk.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"
#include "testutil.h"

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Random keys with many exact ties (values on a coarse grid) so the index tie-break matters. */
static void random_keys(float *x, int64_t n, uint32_t seed, int coarse) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = lcg(&seed);
        x[i] = coarse ? (float)(r % 37) * 0.25f - 4.0f : (float)r / (float)(1u << 24) * 16.0f - 8.0f;
    }
}

static const float *g_keys;
static int ref_cmp(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    int ni = isnan(g_keys[i]), nj = isnan(g_keys[j]);
    if (ni != nj) /* NaN ranks last */
        return ni ? 1 : -1;
    if (!ni && g_keys[i] != g_keys[j])
        return g_keys[i] > g_keys[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int32_t *ref_order(const float *x, int64_t n) {
    int32_t *o = malloc((size_t)n * sizeof *o);
    for (int64_t i = 0; i < n; i++)
        o[i] = (int32_t)i;
    g_keys = x;
    qsort(o, (size_t)n, sizeof *o, ref_cmp);
    return o;
}

/* tern_argmax against a scan for the first greatest element: every length and position of the maximum
 * around the 8-lane blocks, ties (the first wins), all-negative values, NaNs (skipped). */
static void test_argmax(void **state) {
    float v[40];
    for (int n = 1; n <= 40; n++)
        for (int at = 0; at < n; at++) {
            for (int i = 0; i < n; i++)
                v[i] = -100.0f - (float)((i * 7) % 13);
            v[at] = -1.0f;
            if (at + 9 < n)
                v[at + 9] = -1.0f; /* a later tie */
            assert_int_equal(tern_argmax(v, n), at);
            if (at > 0) {
                v[at - 1] = NAN;
                assert_int_equal(tern_argmax(v, n), at);
            }
        }
    for (int i = 0; i < 40; i++)
        v[i] = NAN;
    assert_int_equal(tern_argmax(v, 40), 0);
    v[17] = -INFINITY;
    assert_int_equal(tern_argmax(v, 40), 17);
}

static void test_rank_matches_sort(void **state) {
    const int64_t n = 3000;
    float *x = malloc((size_t)n * sizeof *x);
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    for (int kind = 0; kind < 4; kind++) {
        random_keys(x, n, 99 + (uint32_t)kind, kind == 1);
        if (kind == 2) /* a peaked distribution with a long flat tail, -inf and NaN entries */
            for (int64_t i = 0; i < n; i += 97) {
                x[i] += 20.0f;
                x[i + 1] = -INFINITY;
                x[i + 2] = NAN;
            }
        if (kind == 3) /* everything within a hair: one bucket */
            for (int64_t i = 0; i < n; i++)
                x[i] = 1.0f + (float)(i % 7) * 1e-7f;
        int32_t *ref = ref_order(x, n);
        int64_t ks[] = {1, 2, 7, 40, 64, 1000, n - 1, n};
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            int64_t g = tern_rank_top(x, n, ks[t], idx);
            assert_true(g >= ks[t] && g <= n);
            assert_memory_equal(idx, ref, (size_t)g * sizeof *idx);
        }
        int32_t few[20];
        assert_int_equal(tern_top_few(x, n, 20, few), 20);
        assert_memory_equal(few, ref, sizeof few);
        assert_int_equal(tern_top_few(x, 3, 20, few), 3);
        free(ref);
    }
    /* Already-sorted and reverse-sorted inputs. */
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)i;
    assert_true(tern_rank_top(x, n, 5, idx) >= 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(idx[i], n - 1 - i);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)-i;
    assert_true(tern_rank_top(x, n, 5, idx) >= 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(idx[i], i);
    assert_int_equal(tern_rank_top(x, n, 0, idx), 0);
    free(x);
    free(idx);
}

/* Sum of p[b, e) as the sampler defines it for blocks: four chains i % 4, then (0 + 1) + (2 + 3). */
static double ref_block_sum(const float *p, int64_t b, int64_t e) {
    double s[4] = {0, 0, 0, 0};
    const int64_t whole = b + (e - b) / 4 * 4;
    for (int64_t i = b; i < e; i++)
        s[i < whole ? (i - b) % 4 : 0] += p[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* The textbook sampler: sort everything, then temperature, top-k, top-p, min-p, draw in order. When nothing is
 * cut, the draw is over the whole vocabulary in index order, with the library's e^x and the block sums of 256
 * that tern_sample defines. */
static int32_t ref_sample(const float *logits, int64_t n, const tern_sampling *p, tern_rng *rng) {
    if (p->temperature <= 0)
        return tern_argmax(logits, n);
    float mx = logits[tern_argmax(logits, n)];
    float *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++)
        w[i] = (logits[i] - mx) / p->temperature;
    if (!(p->top_k > 0 && p->top_k < n) && p->top_p >= 1 && p->min_p <= 0) {
        tern_exp(w, n);
        const int64_t nb = (n + 255) / 256;
        double *bs = malloc((size_t)nb * sizeof *bs), total = 0, acc = 0;
        for (int64_t k = 0; k < nb; k++)
            total += bs[k] = ref_block_sum(w, 256 * k, 256 * k + 256 < n ? 256 * k + 256 : n);
        const double u = tern_rng_uniform(rng) * total;
        int32_t pick = -1;
        for (int64_t k = 0; k < nb && pick < 0; acc += bs[k], k++) {
            double a = acc;
            for (int64_t i = 256 * k; u < acc + bs[k] && i < 256 * k + 256 && i < n && pick < 0; i++)
                if (u < (a += w[i]))
                    pick = (int32_t)i;
        }
        for (int64_t i = n - 1; pick < 0 && i >= 0; i--) /* rounding left u at the top: the last possible one */
            if (w[i] > 0 || i == 0)
                pick = (int32_t)i;
        free(bs);
        free(w);
        return pick;
    }
    int32_t *o = ref_order(w, n);
    int64_t m = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    double total = 0;
    if (m < n)
        for (int64_t i = 0; i < m; i++)
            total += (double)expf(w[o[i]]);
    else
        for (int64_t i = 0; i < n; i++)
            total += (double)expf(w[i]);
    if (p->top_p < 1) {
        double acc = 0;
        for (int64_t i = 0; i < m; i++) {
            acc += (double)expf(w[o[i]]) / total;
            if (acc >= p->top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        int64_t keep = 1;
        while (keep < m && (double)expf(w[o[keep]]) >= p->min_p)
            keep++;
        m = keep;
    }
    double sum = 0;
    if (m == n)
        sum = total;
    else
        for (int64_t i = 0; i < m; i++)
            sum += (double)expf(w[o[i]]);
    double u = tern_rng_uniform(rng) * sum, acc = 0;
    int32_t pick = o[m - 1];
    for (int64_t i = 0; i < m; i++) {
        acc += (double)expf(w[o[i]]);
        if (u < acc) {
            pick = o[i];
            break;
        }
    }
    free(w);
    free(o);
    return pick;
}

static void test_sample_matches_reference(void **state) {
    const int64_t n = 2048;
    float *x = malloc((size_t)n * sizeof *x), *work = malloc((size_t)n * sizeof *work);
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    const tern_sampling cases[] = {
        {1.0f, 0, 1.0f, 0.0f},  {0.7f, 40, 1.0f, 0.0f}, {1.0f, 0, 0.9f, 0.0f}, {1.5f, 0, 0.5f, 0.0f},
        {1.0f, 0, 1.0f, 0.05f}, {0.8f, 50, 0.95f, 0.02f}, {2.0f, 1, 1.0f, 0.0f}, {1.0f, 0, 1.0f, 0.9f},
    };
    int differs_from_greedy = 0;
    for (int v = 0; v < 12; v++) {
        random_keys(x, n, 1000 + (uint32_t)v, v % 3 == 0);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            tern_rng a, b;
            tern_rng_seed(&a, 5 + v);
            tern_rng_seed(&b, 5 + v);
            for (int draw = 0; draw < 8; draw++) {
                int32_t fast = tern_sample(x, n, &cases[c], &a, work, idx);
                int32_t slow = ref_sample(x, n, &cases[c], &b);
                assert_int_equal(fast, slow);
                differs_from_greedy |= fast != tern_argmax(x, n);
            }
        }
    }
    assert_true(differs_from_greedy); /* the draws are really random, not argmax in disguise */
    /* Draws follow the distribution: logits ln 1, ln 2, ln 4 (and a banned token) give 1/7, 2/7, 4/7 with nothing
     * cut, and top-k 2 gives 1/3, 2/3 of the two best. */
    {
        float d[4] = {0.0f, logf(2.0f), -INFINITY, logf(4.0f)};
        const tern_sampling all = {1.0f, 0, 1.0f, 0.0f}, top2 = {1.0f, 2, 1.0f, 0.0f};
        const double want[2][4] = {{1 / 7.0, 2 / 7.0, 0, 4 / 7.0}, {0, 1 / 3.0, 0, 2 / 3.0}};
        tern_rng rd;
        tern_rng_seed(&rd, 11);
        for (int c = 0; c < 2; c++) {
            int count[4] = {0};
            for (int i = 0; i < 70000; i++)
                count[tern_sample(d, 4, c ? &top2 : &all, &rd, work, idx)]++;
            for (int k = 0; k < 4; k++)
                if (fabs(count[k] / 70000.0 - want[c][k]) > 0.01)
                    fail_msg("case %d: token %d drawn %d times in 70000, want %.4f of them", c, k, count[k], want[c][k]);
        }
    }
    /* Greedy: the largest logit, the lowest index on ties. */
    float t[5] = {1, 3, 3, -2, 0};
    tern_sampling g = tern_sampling_greedy();
    tern_rng r;
    tern_rng_seed(&r, 1);
    assert_int_equal(tern_sample(t, 5, &g, &r, work, idx), 1);
    /* top_k 1 is greedy whatever the temperature. */
    tern_sampling k1 = {5.0f, 1, 1.0f, 0.0f};
    for (int i = 0; i < 20; i++)
        assert_int_equal(tern_sample(t, 5, &k1, &r, work, idx), 1);
    /* A banned (-inf) token is never drawn, even at a high temperature. */
    float banned[3] = {-INFINITY, 0.0f, -INFINITY};
    tern_sampling hot = {10.0f, 0, 1.0f, 0.0f};
    for (int i = 0; i < 50; i++)
        assert_int_equal(tern_sample(banned, 3, &hot, &r, work, idx), 1);
    free(x);
    free(work);
    free(idx);
}

/* Pearson's chi-square of counts of `draws` draws against the probabilities p[n]; a token p rules out must never
 * have been drawn. */
static double chi_square(const int *count, const double *p, int n, int draws) {
    double chi2 = 0;
    for (int k = 0; k < n; k++) {
        if (p[k] == 0) {
            assert_int_equal(count[k], 0);
            continue;
        }
        const double e = p[k] * draws;
        chi2 += (count[k] - e) * (count[k] - e) / e;
    }
    return chi2;
}

/* Speculative verification keeps the distribution: with any drafted token (likely, unlikely, cut by top-k, banned)
 * the tokens tern_sample_draft returns follow p exactly. Pearson's chi-square over 60000 draws per case against
 * the exact p, 7 degrees of freedom at most: 24.3 is the 0.001 critical value (seeded, so the test is fixed). */
static void test_draft_verification_keeps_distribution(void **state) {
    (void)state;
    enum { N = 8, DRAWS = 60000 };
    const float logits[N] = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -INFINITY, 0.2f};
    const tern_sampling cases[] = {{1.0f, 0, 1.0f, 0.0f}, {0.7f, 3, 1.0f, 0.0f}, {1.3f, 0, 0.8f, 0.0f},
                                   {1.0f, 0, 1.0f, 0.3f}};
    const int32_t drafts[] = {2, 3, 6, 0, 7};
    float work[N];
    int32_t idx[N];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        /* p: the kept candidates (the reference sampler decides which), weights e^(x / T) among them. */
        double p[N] = {0}, sum = 0;
        tern_rng probe;
        tern_rng_seed(&probe, 99);
        int kept[N] = {0};
        for (int i = 0; i < 20000; i++)
            kept[ref_sample(logits, N, &cases[c], &probe)] = 1;
        for (int k = 0; k < N; k++)
            if (kept[k])
                sum += p[k] = exp((double)logits[k] / cases[c].temperature);
        for (int k = 0; k < N; k++)
            p[k] /= sum;
        for (size_t d = 0; d < sizeof drafts / sizeof *drafts; d++) {
            tern_rng r;
            tern_rng_seed(&r, 1000 + c * 10 + d);
            int count[N] = {0}, accepted_n = 0;
            for (int i = 0; i < DRAWS; i++) {
                int acc = 0;
                int32_t t = tern_sample_draft(logits, N, &cases[c], &r, work, idx, drafts[d], &acc);
                assert_true(t >= 0 && t < N);
                assert_int_equal(acc, t == drafts[d]);
                count[t]++;
                accepted_n += acc;
            }
            const double chi2 = chi_square(count, p, N, DRAWS);
            if (chi2 > 24.3)
                fail_msg("case %zu, draft %d: chi-square %.1f over the 0.001 critical value", c, drafts[d], chi2);
            /* The draft is accepted exactly as often as p gives it. */
            assert_true(fabs(accepted_n / (double)DRAWS - p[drafts[d]]) < 0.01);
        }
    }
    /* Greedy: accepted iff the draft is the argmax, which is returned either way. */
    const tern_sampling g = tern_sampling_greedy();
    tern_rng r;
    tern_rng_seed(&r, 3);
    int acc = 0;
    assert_int_equal(tern_sample_draft(logits, N, &g, &r, work, idx, 2, &acc), 2);
    assert_true(acc);
    assert_int_equal(tern_sample_draft(logits, N, &g, &r, work, idx, 5, &acc), 2);
    assert_false(acc);
}

/* Sampled drafts: tern_sample_probs is the distribution tern_sample draws from, and tokens drafted from any q and
 * verified by tern_sample_draft_q follow p exactly (chi-square as above), the draft kept with probability
 * sum(min(p, q)) — all of the time when q is p. The q's: p itself; uniform over every token (p bans some); another
 * temperature of other logits; one-hot on an unlikely token. */
static void test_sampled_draft_keeps_distribution(void **state) {
    (void)state;
    enum { N = 8, DRAWS = 60000 };
    const float logits[N] = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -INFINITY, 0.2f};
    const float other[N] = {1.0f, 0.0f, 2.5f, 0.0f, -0.5f, 0.5f, 1.0f, 0.0f};
    const tern_sampling cases[] = {{1.0f, 0, 1.0f, 0.0f}, {0.7f, 3, 1.0f, 0.0f}, {1.3f, 0, 0.8f, 0.0f},
                                   {1.0f, 0, 1.0f, 0.3f}};
    float work[N], probs[N];
    int32_t idx[N];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        float p[N];
        tern_sample_probs(logits, N, &cases[c], p, work, idx);
        /* The same distribution as the reference sampler's draws. */
        tern_rng probe;
        tern_rng_seed(&probe, 7 + c);
        int seen[N] = {0};
        for (int i = 0; i < DRAWS; i++)
            seen[ref_sample(logits, N, &cases[c], &probe)]++;
        double sum = 0;
        for (int k = 0; k < N; k++) {
            sum += p[k];
            assert_true(fabs(p[k] - seen[k] / (double)DRAWS) < 0.01);
            if (!seen[k])
                assert_true(p[k] == 0.0f);
        }
        assert_true(fabs(sum - 1) < 1e-5);
        float qs[4][N];
        memcpy(qs[0], p, sizeof p);
        for (int k = 0; k < N; k++)
            qs[1][k] = 1.0f / N;
        const tern_sampling hot = {1.8f, 0, 1.0f, 0.0f};
        tern_sample_probs(other, N, &hot, qs[2], work, idx);
        memset(qs[3], 0, sizeof qs[3]);
        qs[3][3] = 1.0f;
        for (int qi = 0; qi < 4; qi++) {
            const float *q = qs[qi];
            tern_rng rd, rv;
            tern_rng_seed(&rd, 500 + c * 10 + qi);
            tern_rng_seed(&rv, 900 + c * 10 + qi);
            int count[N] = {0}, accepted_n = 0;
            for (int i = 0; i < DRAWS; i++) {
                const int32_t d = tern_sample_from(q, N, &rd);
                assert_true(q[d] > 0);
                int acc = 0;
                int32_t t = tern_sample_draft_q(logits, N, &cases[c], &rv, probs, work, idx, q, d, &acc);
                assert_true(t >= 0 && t < N);
                assert_int_equal(acc, t == d);
                count[t]++;
                accepted_n += acc;
            }
            double pd[N], overlap = 0;
            for (int k = 0; k < N; k++) {
                pd[k] = p[k];
                overlap += p[k] < q[k] ? p[k] : q[k];
            }
            const double chi2 = chi_square(count, pd, N, DRAWS);
            if (chi2 > 24.3)
                fail_msg("case %zu, q %d: chi-square %.1f over the 0.001 critical value", c, qi, chi2);
            if (fabs(accepted_n / (double)DRAWS - overlap) > 0.01)
                fail_msg("case %zu, q %d: kept %.4f of the drafts, sum(min(p, q)) is %.4f", c, qi,
                         accepted_n / (double)DRAWS, overlap);
            if (qi == 0)
                assert_int_equal(accepted_n, DRAWS);
        }
    }
    /* Greedy p: the argmax, kept when it is the draft. */
    const tern_sampling g = tern_sampling_greedy();
    tern_sample_probs(logits, N, &g, probs, work, idx);
    for (int k = 0; k < N; k++)
        assert_true(probs[k] == (k == 2 ? 1.0f : 0.0f));
    const float uniform[N] = {0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f};
    tern_rng r;
    tern_rng_seed(&r, 3);
    int acc = 0;
    assert_int_equal(tern_sample_draft_q(logits, N, &g, &r, probs, work, idx, uniform, 2, &acc), 2);
    assert_true(acc);
    assert_int_equal(tern_sample_draft_q(logits, N, &g, &r, probs, work, idx, uniform, 5, &acc), 2);
    assert_false(acc);
}

static void test_penalties(void **state) {
    tern_penalty_window w;
    TU_OK(tern_penalty_window_init(&w, 16, 3));
    int32_t ctx[] = {5, 5, 7, 9};
    for (int i = 0; i < 4; i++)
        tern_penalty_window_accept(&w, ctx[i]);
    assert_int_equal(tern_penalty_window_count(&w, 5), 1); /* the first 5 left the window of 3 */
    assert_int_equal(tern_penalty_window_count(&w, 7), 1);
    assert_int_equal(tern_penalty_window_count(&w, 3), 0);
    float l[16] = {0};
    l[5] = 4.0f;
    l[7] = -1.0f;
    l[9] = 0.5f;
    l[3] = 2.0f;
    tern_penalties p = {2.0f, 0.5f, 0.25f};
    tern_penalties_apply(&w, &p, l);
    assert_float_equal(l[5], 4.0f / 2 - 0.5f - 0.25f, 1e-6);
    assert_float_equal(l[7], -1.0f * 2 - 0.5f - 0.25f, 1e-6);
    assert_float_equal(l[9], 0.5f / 2 - 0.75f, 1e-6);
    assert_float_equal(l[3], 2.0f, 0); /* not in the window */
    tern_penalty_window_accept(&w, 9);  /* window is now 7 9 9 */
    assert_int_equal(tern_penalty_window_count(&w, 5), 0);
    assert_int_equal(tern_penalty_window_count(&w, 9), 2);
    float f[16] = {0};
    tern_penalties freq = {1.0f, 0.0f, 1.0f};
    tern_penalties_apply(&w, &freq, f);
    assert_float_equal(f[9], -2.0f, 1e-6);
    assert_float_equal(f[7], -1.0f, 1e-6);
    tern_penalty_window_clear(&w);
    assert_int_equal(tern_penalty_window_count(&w, 9), 0);
    tern_penalty_window_free(&w);
    /* The whole context (-1): counts never drop. */
    TU_OK(tern_penalty_window_init(&w, 16, -1));
    for (int i = 0; i < 100; i++)
        tern_penalty_window_accept(&w, 4);
    tern_penalty_window_accept(&w, 99); /* out of the vocabulary: ignored */
    assert_int_equal(tern_penalty_window_count(&w, 4), 100);
    tern_penalty_window_free(&w);
    /* Logit bias. */
    float b[4] = {0, 0, 0, 0};
    tern_bias bias[] = {{1, 2.5f}, {3, -INFINITY}, {7, 1.0f}};
    tern_logit_bias_apply(bias, 3, b, 4);
    assert_float_equal(b[1], 2.5f, 0);
    assert_true(isinf(b[3]) && b[3] < 0);
}

static void test_logprobs(void **state) {
    const tern_isa isa = tu_isa_begin(state);
    float l[4] = {1.0f, 2.0f, 3.0f, 2.0f};
    double lse = 3.0 + log(1.0 + 2.0 * exp(-1.0) + exp(-2.0));
    assert_float_equal(tern_logsumexp(l, 4), lse, 1e-6);
    tern_logprobs lp;
    tern_logprobs_compute(l, 4, 1, 3, &lp);
    assert_float_equal(lp.chosen, 2.0 - lse, 1e-6);
    assert_int_equal(lp.n_top, 3);
    assert_int_equal(lp.top_ids[0], 2);
    assert_int_equal(lp.top_ids[1], 1); /* tie with 3: the lower id first */
    assert_int_equal(lp.top_ids[2], 3);
    assert_float_equal(lp.top[0], 3.0 - lse, 1e-6);
    tern_logprobs_compute(l, 4, 0, 50, &lp); /* clamped to the vocabulary */
    assert_int_equal(lp.n_top, 4);
    /* A vocabulary of many blocks (with a tail) against double, on every path; banned tokens count for nothing. */
    const int64_t V = 262147;
    float *x = malloc((size_t)V * sizeof *x);
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < V; i++) {
        x[i] = i % 1000 == 7 ? -INFINITY : (float)((i * 7919) % 2003) * 0.01f - 10.0f;
        mx = x[i] > mx ? x[i] : mx;
    }
    for (int64_t i = 0; i < V; i++)
        s += exp(x[i] - mx);
    {
        tern_isa_set(isa);
        assert_float_equal(tern_logsumexp(x, V), mx + log(s), 1e-6);
    }
    free(x);
}

static void test_chain(void **state) {
    const int64_t V = 600;
    float *x = malloc((size_t)V * sizeof *x);
    random_keys(x, V, 77, 0);
    tern_chain *a, *b;
    TU_OK(tern_chain_new(V, &a));
    TU_OK(tern_chain_new(V, &b));
    tern_chain_params p = tern_chain_defaults();
    p.s.temperature = 1.0f;
    p.s.top_k = 100;
    p.seed = 42;
    int32_t first[50];
    TU_OK(tern_chain_start(a, &p, NULL, 0));
    for (int i = 0; i < 50; i++)
        first[i] = tern_chain_choose(a, x, NULL);
    /* Same seed: the same draws, in a chain that did other work before. */
    tern_chain_params other = p;
    other.seed = 43;
    TU_OK(tern_chain_start(b, &other, NULL, 0));
    int same = 1;
    for (int i = 0; i < 50; i++)
        same &= tern_chain_choose(b, x, NULL) == first[i];
    assert_false(same); /* another seed draws differently */
    TU_OK(tern_chain_start(b, &p, NULL, 0));
    for (int i = 0; i < 50; i++)
        assert_int_equal(tern_chain_choose(b, x, NULL), first[i]);

    /* Greedy with a repetition penalty over the prompt window (a chain over 8 tokens). */
    tern_chain_free(a);
    TU_OK(tern_chain_new(8, &a));
    float l[8] = {0, 0, 0, 2.0f, 1.9f, 0, 0, 0};
    tern_chain_params g = tern_chain_defaults();
    g.pen.repeat = 1.2f;
    g.penalty_last_n = 2;
    int32_t ctx[] = {3, 0, 1};
    TU_OK(tern_chain_start(a, &g, ctx, 1)); /* window holds 3 */
    assert_int_equal(tern_chain_choose(a, l, NULL), 4);
    TU_OK(tern_chain_start(a, &g, ctx, 3)); /* window of 2 holds 0 1: 3 is no longer penalised */
    assert_int_equal(tern_chain_choose(a, l, NULL), 3);
    tern_chain_accept(a, 3);
    assert_int_equal(tern_chain_choose(a, l, NULL), 4);
    /* Logit bias bans the argmax; logprobs still describe the raw distribution. */
    tern_bias ban = {3, -INFINITY};
    tern_chain_params gb = tern_chain_defaults();
    gb.bias = &ban;
    gb.n_bias = 1;
    gb.logprobs = 1;
    gb.top_logprobs = 2;
    TU_OK(tern_chain_start(a, &gb, NULL, 0));
    tern_logprobs lp;
    assert_int_equal(tern_chain_choose(a, l, &lp), 4);
    assert_int_equal(lp.top_ids[0], 3);
    assert_float_equal(lp.chosen, 1.9 - tern_logsumexp(l, 8), 1e-6);
    /* Bad parameters are named. */
    tern_chain_params bad = tern_chain_defaults();
    bad.s.top_p = 0.0f;
    TU_FAILS_WITH(tern_chain_start(a, &bad, NULL, 0), "top_p");
    bad = tern_chain_defaults();
    tern_bias out_of_range = {8, 1.0f};
    bad.bias = &out_of_range;
    bad.n_bias = 1;
    TU_FAILS_WITH(tern_chain_start(a, &bad, NULL, 0), "logit_bias");
    bad = tern_chain_defaults();
    bad.s.temperature = NAN;
    TU_FAILS_WITH(tern_chain_params_check(&bad, V), "temperature");
    bad = tern_chain_defaults();
    bad.top_logprobs = 21;
    TU_FAILS_WITH(tern_chain_params_check(&bad, V), "top_logprobs");
    tern_chain_free(a);
    tern_chain_free(b);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax),            cmocka_unit_test(test_rank_matches_sort), cmocka_unit_test(test_sample_matches_reference),
        cmocka_unit_test(test_draft_verification_keeps_distribution),
        cmocka_unit_test(test_sampled_draft_keeps_distribution),
        cmocka_unit_test(test_penalties),         TU_ISA_TESTS(test_logprobs),
        cmocka_unit_test(test_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
