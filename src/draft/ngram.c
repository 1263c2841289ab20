/* ngram.c — prompt lookup drafting: the row's last few tokens are looked up earlier in its own prompt and output,
 * and what followed them there is proposed (code edits, quoting, repeated structure). No state between steps. */
#include <stdlib.h>

#include "draft/draft.h"

typedef struct ngram {
    tern_draft_source base;
    int min_n, max_n;
} ngram;

static TERN_MUST_CHECK tern_err *row_start(tern_draft_source *s, int row, const int32_t *prediction, int64_t n_prediction) {
    (void)s, (void)row, (void)prediction, (void)n_prediction;
    return NULL;
}

static TERN_MUST_CHECK tern_err *draft(tern_draft_source *s, tern_draft_ask *asks, int n) {
    const ngram *g = (const ngram *)s;
    for (int i = 0; i < n; i++) {
        tern_draft_ask *a = &asks[i];
        a->n_out = tern_draft_lookup(a->toks, a->n_toks, a->toks, a->n_toks, 1, g->min_n, g->max_n, -1, a->k,
                                     a->out, NULL);
    }
    return NULL;
}

static void commit(tern_draft_source *s, int row, int64_t n_toks) { (void)s, (void)row, (void)n_toks; }
static void row_end(tern_draft_source *s, int row) { (void)s, (void)row; }
static void source_free(tern_draft_source *s) { free(s); }

static const tern_draft_vt vt = {"ngram", row_start, draft, commit, row_end, source_free};

tern_err *tern_draft_ngram_new(int rows, int min_n, int max_n, tern_draft_source **out) {
    (void)rows;
    ngram *g = calloc(1, sizeof *g);
    if (!g)
        return tern_errf(TERN_ENOMEM, "out of memory");
    g->base = (tern_draft_source){&vt, TERN_DRAFT_NGRAM, 0, 0};
    g->min_n = min_n;
    g->max_n = max_n;
    *out = &g->base;
    return NULL;
}

void tern_draft_source_free(tern_draft_source *s) {
    if (s)
        s->vt->free(s);
}
