/* chain.c — the per-request sampling pipeline (see chain.h). */
#include "sample/chain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tern_chain {
    int64_t vocab;
    tern_chain_params p;
    tern_bias *bias; /* own copy of p.bias */
    int bias_cap;
    tern_rng rng;
    tern_rng draft_rng; /* drafts drawn for this request: independent of its own choices */
    tern_penalty_window win;
    float *work;   /* [vocab] processed logits */
    float *work2;  /* [vocab] sampler scratch */
    int32_t *idx;  /* [vocab] */
    float *probs;  /* [vocab] verification of sampled drafts (made at the first) */
};

tern_chain_params tern_chain_defaults(void) {
    tern_chain_params p;
    memset(&p, 0, sizeof p);
    p.s = tern_sampling_greedy();
    p.pen.repeat = 1.0f;
    p.penalty_last_n = 64;
    return p;
}

tern_err *tern_chain_params_check(const tern_chain_params *p, int64_t vocab) {
    if (!(p->s.temperature >= 0.0f) || !isfinite(p->s.temperature))
        return tern_errf(TERN_EINVAL, "temperature must be a finite number >= 0, got %g", p->s.temperature);
    if (p->s.top_k < 0)
        return tern_errf(TERN_EINVAL, "top_k must be >= 0 (0 = off), got %d", p->s.top_k);
    if (!(p->s.top_p > 0.0f && p->s.top_p <= 1.0f))
        return tern_errf(TERN_EINVAL, "top_p must be in (0, 1], got %g", p->s.top_p);
    if (!(p->s.min_p >= 0.0f && p->s.min_p <= 1.0f))
        return tern_errf(TERN_EINVAL, "min_p must be in [0, 1], got %g", p->s.min_p);
    if (!(p->pen.repeat > 0.0f) || !isfinite(p->pen.repeat))
        return tern_errf(TERN_EINVAL, "repetition_penalty must be a finite number > 0 (1 = off), got %g", p->pen.repeat);
    if (!isfinite(p->pen.presence) || fabsf(p->pen.presence) > 100.0f)
        return tern_errf(TERN_EINVAL, "presence_penalty must be in [-100, 100], got %g", p->pen.presence);
    if (!isfinite(p->pen.frequency) || fabsf(p->pen.frequency) > 100.0f)
        return tern_errf(TERN_EINVAL, "frequency_penalty must be in [-100, 100], got %g", p->pen.frequency);
    if (p->penalty_last_n < -1)
        return tern_errf(TERN_EINVAL, "penalty_last_n must be >= -1 (-1 = whole context), got %lld",
                         (long long)p->penalty_last_n);
    if (p->n_bias < 0 || (p->n_bias > 0 && !p->bias))
        return tern_errf(TERN_EINVAL, "logit_bias: %d entries but no array", p->n_bias);
    for (int i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id < 0 || p->bias[i].id >= vocab)
            return tern_errf(TERN_EINVAL, "logit_bias: token id %d is outside the vocabulary [0, %lld)", p->bias[i].id,
                             (long long)vocab);
        if (isnan(p->bias[i].value) || p->bias[i].value == INFINITY)
            return tern_errf(TERN_EINVAL, "logit_bias: token %d: bias must be a number (or -inf to ban it)",
                             p->bias[i].id);
    }
    if (p->top_logprobs < 0 || p->top_logprobs > TERN_MAX_TOP_LOGPROBS)
        return tern_errf(TERN_EINVAL, "top_logprobs must be in [0, %d], got %d", TERN_MAX_TOP_LOGPROBS, p->top_logprobs);
    return NULL;
}

tern_err *tern_chain_new(int64_t vocab, tern_chain **out) {
    *out = NULL;
    if (vocab <= 0 || vocab > INT32_MAX)
        return tern_errf(TERN_EINVAL, "sampler: vocabulary size %lld out of range", (long long)vocab);
    tern_chain *c = calloc(1, sizeof *c);
    if (!c)
        return tern_errf(TERN_ENOMEM, "out of memory");
    c->vocab = vocab;
    c->p = tern_chain_defaults();
    c->work = malloc((size_t)vocab * sizeof *c->work);
    c->work2 = malloc((size_t)vocab * sizeof *c->work2);
    c->idx = malloc((size_t)vocab * sizeof *c->idx);
    if (!c->work || !c->work2 || !c->idx) {
        tern_chain_free(c);
        return tern_errf(TERN_ENOMEM, "out of memory for sampler scratch (%lld tokens)", (long long)vocab);
    }
    *out = c;
    return NULL;
}

void tern_chain_free(tern_chain *c) {
    if (!c)
        return;
    tern_penalty_window_free(&c->win);
    free(c->bias);
    free(c->work);
    free(c->work2);
    free(c->idx);
    free(c->probs);
    free(c);
}

tern_err *tern_chain_start(tern_chain *c, const tern_chain_params *p, const int32_t *context, int64_t n_context) {
    TERN_TRY(tern_chain_params_check(p, c->vocab));
    if (p->n_bias > c->bias_cap) {
        tern_bias *nb = realloc(c->bias, (size_t)p->n_bias * sizeof *nb);
        if (!nb)
            return tern_errf(TERN_ENOMEM, "out of memory");
        c->bias = nb;
        c->bias_cap = p->n_bias;
    }
    if (p->n_bias)
        memcpy(c->bias, p->bias, (size_t)p->n_bias * sizeof *c->bias);
    c->p = *p;
    c->p.bias = c->bias;
    tern_rng_seed(&c->rng, p->seed);
    tern_rng_seed(&c->draft_rng, p->seed ^ 0x9e3779b97f4a7c15u);
    int64_t last_n = tern_penalties_active(&p->pen) ? p->penalty_last_n : 0;
    if (last_n != c->win.last_n || (last_n != 0 && !c->win.count)) {
        tern_penalty_window_free(&c->win);
        TERN_TRY(tern_penalty_window_init(&c->win, c->vocab, last_n));
    } else {
        tern_penalty_window_clear(&c->win);
    }
    int64_t from = last_n > 0 && n_context > last_n ? n_context - last_n : 0;
    for (int64_t i = from; context && last_n != 0 && i < n_context; i++)
        tern_penalty_window_accept(&c->win, context[i]);
    return NULL;
}

/* The logits after bias and penalties (c->work, or the logits themselves when neither applies). */
static const float *processed(tern_chain *c, const float *logits) {
    const tern_chain_params *p = &c->p;
    if (!p->n_bias && !(c->win.n_present && tern_penalties_active(&p->pen)))
        return logits;
    memcpy(c->work, logits, (size_t)c->vocab * sizeof *c->work);
    tern_logit_bias_apply(p->bias, p->n_bias, c->work, c->vocab);
    tern_penalties_apply(&c->win, &p->pen, c->work);
    return c->work;
}

static void fill_logprobs(const tern_chain *c, const float *logits, int32_t tok, tern_logprobs *lp) {
    const tern_chain_params *p = &c->p;
    if (!lp)
        return;
    if (p->logprobs || p->top_logprobs)
        tern_logprobs_compute(logits, c->vocab, tok, p->top_logprobs, lp);
    else
        memset(lp, 0, sizeof *lp);
}

int32_t tern_chain_verify(tern_chain *c, const float *logits, int32_t draft, tern_logprobs *lp, int *accepted) {
    int32_t tok = tern_sample_draft(processed(c, logits), c->vocab, &c->p.s, &c->rng, c->work2, c->idx, draft,
                                    accepted);
    fill_logprobs(c, logits, tok, lp);
    return tok;
}

int32_t tern_chain_draft(tern_chain *c, float *logits, float *q) {
    tern_logit_bias_apply(c->p.bias, c->p.n_bias, logits, c->vocab);
    tern_sample_probs(logits, c->vocab, &c->p.s, q, c->work2, c->idx);
    return tern_sample_from(q, c->vocab, &c->draft_rng);
}

int32_t tern_chain_verify_q(tern_chain *c, const float *logits, int32_t draft, const float *q, tern_logprobs *lp,
                            int *accepted) {
    if (!c->probs && !(c->probs = malloc((size_t)c->vocab * sizeof *c->probs))) /* verify as a one-hot draft */
        return tern_chain_verify(c, logits, draft, lp, accepted);
    int32_t tok = tern_sample_draft_q(processed(c, logits), c->vocab, &c->p.s, &c->rng, c->probs, c->work2, c->idx,
                                      q, draft, accepted);
    fill_logprobs(c, logits, tok, lp);
    return tok;
}

int32_t tern_chain_choose(tern_chain *c, const float *logits, tern_logprobs *lp) {
    const tern_chain_params *p = &c->p;
    int32_t tok = tern_sample(processed(c, logits), c->vocab, &p->s, &c->rng, c->work2, c->idx);
    fill_logprobs(c, logits, tok, lp);
    return tok;
}

void tern_chain_accept(tern_chain *c, int32_t id) { tern_penalty_window_accept(&c->win, id); }
