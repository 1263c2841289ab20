/* assistant.c — drafting with a model that reads the target's cache (the Gemma 4 assistant): from the fed token
 * and the target's final hidden state before it, k greedy steps of the drafter, each feeding the target's
 * embedding of the token it drafted last and its own projected hidden state (GEMMA4.md §5); all rows step
 * together, so each step reads the drafter's weights once. Its proposals are the drafter's argmax, or for a sampling
 * row a draw from its distribution: the engine's verification keeps the target's distribution exactly either way. */
#include <stdlib.h>
#include <string.h>

#include "sample/sampler.h"
#include "draft/draft.h"

typedef struct assistant {
    tern_draft_source base;
    tern_cache_drafter *d;
    const tern_lm *target;
    const tern_kv *kv;
    tern_pool *pool;
    int rows;                         /* the target cache's sequences: at most one ask each */
    int *live, *seq;                  /* [rows] the asks still drafting, and their cache sequences */
    int32_t *tok;                     /* [rows] the token each drafts from */
    float *emb, *h, *h_next, *logits; /* [rows][hidden], [rows][vocab] */
} assistant;

static TERN_MUST_CHECK tern_err *row_start(tern_draft_source *s, int row, const int32_t *prediction, int64_t n_prediction) {
    (void)s, (void)row, (void)prediction, (void)n_prediction;
    return NULL;
}

/* Every row still drafting takes one step together; a row leaves when it has its k tokens or its grammar allows
 * nothing. Rows keep their order, so the live ones' hidden states move only towards the front. */
static TERN_MUST_CHECK tern_err *draft(tern_draft_source *s, tern_draft_ask *asks, int n) {
    assistant *a = (assistant *)s;
    const tern_lm_desc *t = tern_lm_desc_of(a->target);
    const size_t H = (size_t)t->hidden, V = (size_t)t->vocab;
    if (n > a->rows)
        return tern_errf(TERN_EINVAL, "%d rows asked of a drafter for %d", n, a->rows);
    int m = 0;
    for (int i = 0; i < n; i++) {
        tern_draft_ask *q = &asks[i];
        q->n_out = 0;
        if (q->k <= 0)
            continue;
        a->live[m] = i;
        a->tok[m] = q->toks[q->n_toks - 1];
        memcpy(a->h + m * H, q->hidden, H * sizeof *a->h);
        m++;
    }
    while (m > 0) {
        for (int r = 0; r < m; r++) {
            a->seq[r] = asks[a->live[r]].row;
            TERN_TRY(tern_lm_embed(a->target, a->tok[r], a->emb + r * H));
        }
        tern_cache_drafter_io io = {.kv = a->kv, .target = t, .n = m, .seq = a->seq, .emb = a->emb, .h = a->h,
                                    .logits = a->logits, .h_out = a->h_next};
        TERN_TRY(tern_cache_drafter_step(a->d, a->pool, &io));
        int kept = 0;
        for (int r = 0; r < m; r++) {
            tern_draft_ask *q = &asks[a->live[r]];
            float *lg = a->logits + r * V;
            if (q->constrain && q->constrain(q, lg, t->vocab))
                continue;
            const int32_t tok = q->sample ? q->sample(q, lg, t->vocab) : tern_argmax(lg, t->vocab);
            q->out[q->n_out++] = tok;
            if (q->n_out == q->k)
                continue;
            a->live[kept] = a->live[r];
            a->tok[kept] = tok;
            memcpy(a->h + kept * H, a->h_next + r * H, H * sizeof *a->h);
            kept++;
        }
        m = kept;
    }
    return NULL;
}

static void commit(tern_draft_source *s, int row, int64_t n_toks) { (void)s, (void)row, (void)n_toks; }
static void row_end(tern_draft_source *s, int row) { (void)s, (void)row; }

static void source_free(tern_draft_source *s) {
    assistant *a = (assistant *)s;
    tern_cache_drafter_free(a->d);
    free(a->live);
    free(a->seq);
    free(a->tok);
    free(a->emb);
    free(a->h);
    free(a->h_next);
    free(a->logits);
    free(a);
}

static const tern_draft_vt vt = {"assistant", row_start, draft, commit, row_end, source_free};

tern_err *tern_draft_assistant_new(const char *dir, tern_draft_head head, const tern_lm *target, const tern_kv *kv,
                                   tern_pool *pool, tern_draft_source **out) {
    *out = NULL;
    assistant *a = calloc(1, sizeof *a);
    if (!a)
        return tern_errf(TERN_ENOMEM, "out of memory");
    a->base = (tern_draft_source){&vt, TERN_DRAFT_ASSISTANT, 1, 1};
    a->target = target;
    a->kv = kv;
    a->pool = pool;
    const tern_lm_desc *t = tern_lm_desc_of(target);
    tern_err *err = tern_cache_drafter_load(dir, &a->d);
    if (!err)
        err = tern_cache_drafter_check_target(a->d, t);
    if (!err && head != TERN_DRAFT_HEAD_AUTO)
        err = tern_cache_drafter_set_head(a->d, head);
    if (!err) {
        const size_t R = (size_t)(a->rows = tern_kv_n_seq(kv));
        a->live = malloc(R * sizeof *a->live);
        a->seq = malloc(R * sizeof *a->seq);
        a->tok = malloc(R * sizeof *a->tok);
        a->emb = malloc(R * (size_t)t->hidden * sizeof *a->emb);
        a->h = malloc(R * (size_t)t->hidden * sizeof *a->h);
        a->h_next = malloc(R * (size_t)t->hidden * sizeof *a->h_next);
        a->logits = malloc(R * (size_t)t->vocab * sizeof *a->logits);
        if (!a->live || !a->seq || !a->tok || !a->emb || !a->h || !a->h_next || !a->logits)
            err = tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (err) {
        source_free(&a->base);
        return tern_err_wrap(err, "draft model %s", dir);
    }
    *out = &a->base;
    return NULL;
}
