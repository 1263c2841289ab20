/* prediction.c — OpenAI's predicted outputs: the request says what it expects the output to be (a file being
 * edited, say). The source follows the output along the prediction: the output's last tokens are found in the
 * prediction, first at or after where they were found last time (so repeated lines are walked in order), and the
 * prediction's next tokens are proposed; where the output departs from the prediction and later rejoins it, the
 * lookup finds it again. */
#include <stdlib.h>
#include <string.h>

#include "spec/draft.h"

/* Output tokens matched against the prediction: enough to place a repeated phrase, few enough to rejoin soon. */
#define PREDICTION_MATCH 8

typedef struct pred_row {
    int32_t *toks;
    int64_t n;
    int64_t at; /* where the last match ended */
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
        int64_t end = -1;
        a->n_out = tern_draft_lookup(r->toks, r->n, a->toks + a->n_prompt, n_out, 0, 1, PREDICTION_MATCH, r->at,
                                     a->k, a->out, &end);
        if (a->n_out)
            r->at = end;
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
    p->base = (tern_draft_source){&vt, TERN_DRAFT_PREDICTION};
    p->rows = rows;
    *out = &p->base;
    return NULL;
}
