/* penalties.c — context penalties and logit bias (see penalties.h). */
#include "sample/penalties.h"

#include <stdlib.h>
#include <string.h>

tern_err *tern_penalty_window_init(tern_penalty_window *w, int64_t vocab, int64_t last_n) {
    memset(w, 0, sizeof *w);
    if (vocab <= 0 || vocab > INT32_MAX || last_n < -1)
        return tern_errf(TERN_EINVAL, "penalty window: vocabulary %lld or window %lld out of range", (long long)vocab,
                         (long long)last_n);
    w->vocab = vocab;
    w->last_n = last_n;
    if (last_n == 0)
        return NULL;
    w->count = calloc((size_t)vocab, sizeof *w->count);
    w->where = malloc((size_t)vocab * sizeof *w->where);
    w->present = malloc((size_t)vocab * sizeof *w->present);
    if (last_n > 0)
        w->ring = malloc((size_t)last_n * sizeof *w->ring);
    if (!w->count || !w->where || !w->present || (last_n > 0 && !w->ring)) {
        tern_penalty_window_free(w);
        return tern_errf(TERN_ENOMEM, "out of memory for a penalty window over %lld tokens", (long long)vocab);
    }
    return NULL;
}

void tern_penalty_window_clear(tern_penalty_window *w) {
    for (int64_t i = 0; i < w->n_present; i++)
        w->count[w->present[i]] = 0;
    w->n_present = 0;
    w->ring_len = w->head = 0;
}

void tern_penalty_window_free(tern_penalty_window *w) {
    free(w->count);
    free(w->where);
    free(w->present);
    free(w->ring);
    memset(w, 0, sizeof *w);
}

static void add(tern_penalty_window *w, int32_t id) {
    if (w->count[id]++ == 0) {
        w->where[id] = (int32_t)w->n_present;
        w->present[w->n_present++] = id;
    }
}

static void drop(tern_penalty_window *w, int32_t id) {
    if (--w->count[id] == 0) { /* swap-remove from the distinct list */
        int32_t last = w->present[--w->n_present];
        w->present[w->where[id]] = last;
        w->where[last] = w->where[id];
    }
}

void tern_penalty_window_accept(tern_penalty_window *w, int32_t id) {
    if (w->last_n == 0 || id < 0 || id >= w->vocab)
        return;
    if (w->last_n > 0) {
        if (w->ring_len == w->last_n) {
            drop(w, w->ring[w->head]);
            w->ring[w->head] = id;
            w->head = (w->head + 1) % w->last_n;
        } else {
            w->ring[w->ring_len++] = id;
        }
    }
    add(w, id);
}

int32_t tern_penalty_window_count(const tern_penalty_window *w, int32_t id) {
    return w->count && id >= 0 && id < w->vocab ? w->count[id] : 0;
}

int tern_penalties_active(const tern_penalties *p) {
    return p->repeat != 1.0f || p->presence != 0.0f || p->frequency != 0.0f;
}

void tern_penalties_apply(const tern_penalty_window *w, const tern_penalties *p, float *logits) {
    if (!tern_penalties_active(p))
        return;
    for (int64_t i = 0; i < w->n_present; i++) {
        int32_t id = w->present[i];
        float l = logits[id];
        if (p->repeat != 1.0f && p->repeat > 0.0f)
            l = l > 0 ? l / p->repeat : l * p->repeat;
        l -= p->presence + p->frequency * (float)w->count[id];
        logits[id] = l;
    }
}

void tern_logit_bias_apply(const tern_bias *bias, int n, float *logits, int64_t vocab) {
    for (int i = 0; i < n; i++)
        if (bias[i].id >= 0 && bias[i].id < vocab)
            logits[bias[i].id] += bias[i].value;
}
