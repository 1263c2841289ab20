/* draft_model.c — two-model drafting: a smaller checkpoint with the same vocabulary decodes ahead of the target with
 * its own KV cache, one sequence per engine row. A draft first catches the drafter up on the row's tokens it has not
 * seen (the prompt the first time; afterwards the target's own token of the last step, and when every draft was
 * kept, the last draft too — the pending token), then runs k - 1 more steps (greedy, or drawing for a sampling row),
 * every row of the batch in one forward per step. After verification the drafter keeps the prefix of what it fed
 * that the row kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draft/draft.h"
#include "sample/sampler.h"

typedef struct dm_row {
    int64_t n_in; /* the row's first n_in tokens (then, during a draft, its drafts) are in the drafter's cache */
} dm_row;

typedef struct draft_model {
    tern_draft_source base;
    tern_draft_loader ld;
    void *handle; /* the loaded drafter, released with the source */
    tern_lm *lm;
    tern_kv *kv;
    tern_pool *pool;
    int rows;
    int64_t ctx, chunk, vocab;
    dm_row *r;
    float *logits; /* [rows][vocab] */
    int *seq;
    int64_t *ntok;
    int32_t *ids; /* [rows * chunk] */
    uint8_t *prefill;
} draft_model;

static TERN_MUST_CHECK tern_err *row_start(tern_draft_source *s, int row, const int32_t *prediction, int64_t n_prediction) {
    draft_model *d = (draft_model *)s;
    (void)prediction, (void)n_prediction;
    d->r[row].n_in = 0;
    return tern_kv_set_len(d->kv, row, 0);
}

/* One forward of the asks' rows that still have tokens to feed: up to `chunk` of each row's backlog (catch-up),
 * or its last draft. Fills each fed row's logits at its last token. Returns the rows fed. */
static TERN_MUST_CHECK tern_err *feed(draft_model *d, tern_draft_ask *asks, int n, int *todo, int *fed_rows, int *n_fed_rows) {
    int nr = 0;
    int64_t T = 0;
    for (int i = 0; i < n; i++) {
        if (!todo[i])
            continue;
        tern_draft_ask *a = &asks[i];
        dm_row *r = &d->r[a->row];
        const int64_t have = r->n_in, total = a->n_toks + a->n_out; /* what the next draft follows */
        int64_t cnt = total - have;
        if (cnt <= 0) { /* nothing to feed: cannot happen while commits keep n_in below the row's length */
            todo[i] = 0;
            continue;
        }
        if (cnt > d->chunk)
            cnt = d->chunk;
        for (int64_t j = 0; j < cnt; j++) {
            const int64_t p = have + j;
            d->ids[T + j] = p < a->n_toks ? a->toks[p] : a->out[p - a->n_toks];
        }
        d->seq[nr] = a->row;
        d->ntok[nr] = cnt;
        d->prefill[nr] = have < a->n_toks - 1;
        fed_rows[nr++] = i;
        T += cnt;
    }
    *n_fed_rows = nr;
    if (!nr)
        return NULL;
    tern_batch b = {.n_rows = nr, .seq = d->seq, .n_tok = d->ntok, .ids = d->ids, .out = TERN_OUT_LAST,
                    .row_prefill = d->prefill};
    TERN_TRY(tern_lm_forward(d->lm, d->kv, d->pool, &b, d->logits, NULL));
    TERN_TRY(tern_batch_commit(d->kv, &b));
    for (int k = 0; k < nr; k++)
        d->r[asks[fed_rows[k]].row].n_in += d->ntok[k];
    return NULL;
}

static TERN_MUST_CHECK tern_err *draft(tern_draft_source *s, tern_draft_ask *asks, int n) {
    draft_model *d = (draft_model *)s;
    int todo[256], fed[256], n_fed;
    for (int i = 0; i < n; i++) {
        asks[i].n_out = 0;
        /* Room in the drafter's context for everything it will be fed. */
        todo[i] = asks[i].n_toks + asks[i].k <= d->ctx;
    }
    for (;;) {
        TERN_TRY(feed(d, asks, n, todo, fed, &n_fed));
        if (!n_fed)
            break;
        for (int k = 0; k < n_fed; k++) {
            tern_draft_ask *a = &asks[fed[k]];
            const dm_row *r = &d->r[a->row];
            if (r->n_in < a->n_toks + a->n_out) /* still catching up: its logits are of a middle token */
                continue;
            float *lg = d->logits + (size_t)k * (size_t)d->vocab;
            if (a->constrain && a->constrain(a, lg, d->vocab)) {
                todo[fed[k]] = 0;
                continue;
            }
            a->out[a->n_out] = a->sample ? a->sample(a, lg, d->vocab) : tern_argmax(lg, d->vocab);
            a->n_out++;
            if (a->n_out == a->k)
                todo[fed[k]] = 0;
        }
    }
    return NULL;
}

/* The row kept n_toks tokens: the drafter keeps what it was fed of them (the drafts the target accepted). */
static void commit(tern_draft_source *s, int row, int64_t n_toks) {
    draft_model *d = (draft_model *)s;
    dm_row *r = &d->r[row];
    if (r->n_in > n_toks - 1) /* the row's last token (the target's own) is fed next time */
        r->n_in = n_toks - 1;
    if (tern_kv_set_len(d->kv, row, r->n_in)) /* cannot fail: a rollback within what was written */
        r->n_in = 0;
}

static void row_end(tern_draft_source *s, int row) {
    draft_model *d = (draft_model *)s;
    d->r[row].n_in = 0;
    tern_kv_release(d->kv, row);
}

static void source_free(tern_draft_source *s) {
    draft_model *d = (draft_model *)s;
    free(d->r);
    free(d->logits);
    free(d->seq);
    free(d->ntok);
    free(d->ids);
    free(d->prefill);
    tern_kv_free(d->kv);
    if (d->handle)
        d->ld.release(d->handle);
    free(d);
}

static const tern_draft_vt vt = {"draft_model", row_start, draft, commit, row_end, source_free};

/* The same vocabulary: the same size and every token the same text. */
static TERN_MUST_CHECK tern_err *same_vocabulary(const tern_draft_target *target, const tern_lm *lm,
                                                 const tern_tokenizer *tok) {
    const int64_t vt_ = tern_lm_desc_of(target->lm)->vocab, vd = tern_lm_desc_of(lm)->vocab;
    if (vt_ != vd)
        return tern_errf(TERN_EINVAL, "its vocabulary has %lld tokens, the model's %lld: a drafter must share the "
                         "model's vocabulary", (long long)vd, (long long)vt_);
    for (int32_t id = 0; id < vt_; id++) {
        size_t la = 0, lb = 0;
        char *a = tern_tokenizer_token_piece(target->tok, id, &la), *b = tern_tokenizer_token_piece(tok, id, &lb);
        const int same = a && b && la == lb && !memcmp(a, b, la);
        free(a);
        free(b);
        if (!same)
            return tern_errf(TERN_EINVAL, "its vocabulary and the model's differ at token %d: a drafter must share "
                             "the model's vocabulary", id);
    }
    return NULL;
}

tern_err *tern_draft_model_new(const char *dir, const tern_draft_loader *ld, const tern_draft_target *target, int rows,
                               int64_t ctx, tern_pool *pool, tern_draft_source **out) {
    *out = NULL;
    draft_model *d = calloc(1, sizeof *d);
    if (!d)
        return tern_errf(TERN_ENOMEM, "out of memory");
    d->base = (tern_draft_source){&vt, TERN_DRAFT_MODEL, 0, 1};
    d->ld = *ld;
    d->rows = rows;
    d->ctx = ctx;
    d->chunk = 256;
    d->pool = pool;
    const tern_tokenizer *tok = NULL;
    tern_err *err = ld->load(ld->ctx, dir, &d->handle, &d->lm, &tok);
    if (!err)
        err = same_vocabulary(target, d->lm, tok);
    if (!err) {
        d->vocab = tern_lm_desc_of(d->lm)->vocab;
        err = tern_lm_kv_create(d->lm, rows, ctx, d->chunk, TERN_KV_BF16, TERN_KV_BF16, &d->kv);
    }
    if (!err) {
        d->r = calloc((size_t)rows, sizeof *d->r);
        d->logits = malloc((size_t)rows * (size_t)d->vocab * sizeof *d->logits);
        d->seq = malloc((size_t)rows * sizeof *d->seq);
        d->ntok = malloc((size_t)rows * sizeof *d->ntok);
        d->ids = malloc((size_t)rows * (size_t)d->chunk * sizeof *d->ids);
        d->prefill = malloc((size_t)rows);
        if (!d->r || !d->logits || !d->seq || !d->ntok || !d->ids || !d->prefill)
            err = tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (err) {
        source_free(&d->base);
        return tern_err_wrap(err, "draft model %s", dir);
    }
    *out = &d->base;
    return NULL;
}
