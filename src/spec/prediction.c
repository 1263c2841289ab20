/* prediction.c — OpenAI's predicted outputs: the request says what it expects the output to be (a file being
 * edited, say), and the source proposes the prediction's tokens from where the output has got to. It follows the
 * output in step with the prediction — a token the output changed is taken as a substitution, so drafting goes on
 * right after it — and when the output's last tokens no longer match there (text inserted or left out), it finds
 * them again in the prediction, first at or after where it was (so repeated lines are walked in order). */
#include <stdlib.h>
#include <string.h>

#include "spec/draft.h"

/* Output tokens matched against the prediction: enough to place a repeated phrase, few enough to rejoin soon. */
#define PREDICTION_MATCH 8

typedef struct pred_row {
    int32_t *toks;
    int64_t n;
    int64_t at, seen; /* the output's first `seen` tokens correspond to the prediction's first `at` */
} pred_row;

typedef struct prediction {
    tern_draft_source base;
    int rows;
    pred_row *r;
} prediction;

static tern_err *row_start(tern_draft_source *s, int row, const int32_t *pred, int64_t n_pred) {
    pred_row *r = &((prediction *)s)->r[row];
    free(r->toks);
    memset(r, 0, sizeof *r);
    if (n_pred <= 0)
        return NULL;
    if (!(r->toks = malloc((size_t)n_pred * sizeof *r->toks)))
        return tern_errf(TERN_ENOMEM, "out of memory for a prediction of %lld tokens", (long long)n_pred);
    memcpy(r->toks, pred, (size_t)n_pred * sizeof *r->toks);
    r->n = n_pred;
    return NULL;
}

static tern_err *draft(tern_draft_source *s, tern_draft_ask *asks, int n) {
    prediction *p = (prediction *)s;
    for (int i = 0; i < n; i++) {
        tern_draft_ask *a = &asks[i];
        pred_row *r = &p->r[a->row];
        a->n_out = 0;
        const int64_t n_out = a->n_toks - a->n_prompt; /* the output so far, the fed token last */
        if (!r->n || n_out <= 0)
            continue;
        const int32_t *out = a->toks + a->n_prompt;
        int64_t at = r->at + (n_out - r->seen); /* in step */
        const int agrees = at >= 1 && at <= r->n && r->toks[at - 1] == out[n_out - 1];
        if (!agrees && n_out >= 2) { /* rejoin where the last tokens (two at least) are found again */
            int64_t end = -1;
            int32_t probe;
            const int64_t from = at > PREDICTION_MATCH ? at - PREDICTION_MATCH : 0;
            if (tern_draft_lookup(r->toks, r->n, out, n_out, 0, 2, PREDICTION_MATCH, from, 1, &probe, &end))
                at = end;
        }
        r->at = at;
        r->seen = n_out;
        while (at >= 0 && at < r->n && a->n_out < a->k)
            a->out[a->n_out++] = r->toks[at++];
    }
    return NULL;
}

static void commit(tern_draft_source *s, int row, int64_t n_toks) { (void)s, (void)row, (void)n_toks; }

static void row_end(tern_draft_source *s, int row) {
    pred_row *r = &((prediction *)s)->r[row];
    free(r->toks);
    memset(r, 0, sizeof *r);
}

static void source_free(tern_draft_source *s) {
    prediction *p = (prediction *)s;
    for (int i = 0; i < p->rows; i++)
        free(p->r[i].toks);
    free(p->r);
    free(p);
}

static const tern_draft_vt vt = {"prediction", row_start, draft, commit, row_end, source_free};

tern_err *tern_draft_prediction_new(int rows, tern_draft_source **out) {
    prediction *p = calloc(1, sizeof *p);
    if (!p || !(p->r = calloc((size_t)rows, sizeof *p->r))) {
        free(p);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    p->base = (tern_draft_source){&vt, TERN_DRAFT_PREDICTION, 0};
    p->rows = rows;
    *out = &p->base;
    return NULL;
}
