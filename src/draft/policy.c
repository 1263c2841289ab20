/* policy.c — the speculation policy (see policy.h). */
#include "draft/policy.h"

void tern_draft_lessons_init(tern_draft_lessons *l) {
    for (int k = 0; k < TERN_DRAFT_KINDS; k++)
        l->pause[k] = 8;
}

tern_draft_source *tern_draft_pick(tern_draft_source *const sources[TERN_DRAFT_KINDS], int has_prediction) {
    return sources[has_prediction                   ? TERN_DRAFT_PREDICTION
                   : sources[TERN_DRAFT_ASSISTANT] ? TERN_DRAFT_ASSISTANT
                   : sources[TERN_DRAFT_MODEL]     ? TERN_DRAFT_MODEL
                                                   : TERN_DRAFT_NGRAM];
}

void tern_draft_policy_start(tern_draft_policy *p, int draft_max, int kind, const tern_draft_lessons *l) {
    p->k = draft_max;
    p->fixed = 0;
    p->rest_len = 8;
    p->rate_plain = p->rate_draft = 0;
    p->acc_len = (float)draft_max; /* start hopeful: the first drafting step drafts all it may */
    /* more plain steps first while this source has lately been slower than plain decoding on this machine */
    p->rest = kind >= 0 && l->pause[kind] > 8 ? l->pause[kind] : 2;
}

int tern_draft_policy_ask(tern_draft_policy *p, int64_t left, int64_t room, int draft_min) {
    if (p->rest > 0 && !p->fixed) { /* drafting was not paying: decode plainly for a while, then try again */
        p->rest--;
        return 0;
    }
    int64_t k = p->k;
    k = k < left ? k : left;
    k = k < room ? k : room;
    return k >= draft_min ? (int)k : 0;
}

void tern_draft_policy_after(tern_draft_policy *p, int kind, int n_draft, int n_chosen, double dt, int draft_max,
                             tern_draft_lessons *l) {
    float *rate = n_draft ? &p->rate_draft : &p->rate_plain;
    const float r = dt > 0 ? (float)((double)n_chosen / dt) : 0.0f;
    *rate = *rate > 0 ? 0.7f * *rate + 0.3f * r : r;
    if (!n_draft || p->fixed)
        return;
    const int kept = n_chosen - 1;
    p->acc_len = 0.5f * p->acc_len + 0.5f * (float)kept;
    const int k = (int)(p->acc_len + 0.5f) + 2;
    p->k = k < draft_max ? k : draft_max;
    const int slower = p->rate_plain > 0 && p->rate_draft < p->rate_plain;
    /* A prediction's worth is its request's own, so it teaches the source's other rows nothing. */
    int *learned = &l->pause[kind];
    const int teaches = kind != TERN_DRAFT_PREDICTION && kept && p->rate_plain > 0;
    if (kept && !slower) {
        p->rest_len = 8;
        if (teaches)
            *learned = *learned > 16 ? *learned / 2 : 8;
    }
    if (p->acc_len < 0.25f || slower) {
        p->rest = p->rest_len;
        p->rest_len = p->rest_len < 256 ? 2 * p->rest_len : 256;
        p->acc_len = 1.0f;
        p->rate_draft = 0; /* judged afresh after the pause */
        if (teaches && slower)
            *learned = *learned < 256 ? 2 * *learned : 256;
    }
}
