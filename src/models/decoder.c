/* decoder.c — the frame of a decoder-only forward pass (decoder.h): batch checks, token expansion, the work area,
 * products over runs of one kernel kind, and the output gather. */
#include "models/decoder.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/timeutil.h"
#include "tensor/attention.h"
#include "tensor/ops.h"

static TERN_MUST_CHECK tern_err *check_batch(const tern_kv *kv, const tern_batch *b, int64_t vocab, int64_t *T) {
    *T = 0;
    if (b->n_rows <= 0)
        return tern_errf(TERN_EINVAL, "empty batch");
    const int n_seq = tern_kv_n_seq(kv);
    int ring_limited = 0;
    int64_t ring_slots = INT64_MAX; /* positions the smallest ring holds */
    for (int l = 0; l < tern_kv_n_layers(kv); l++)
        if (tern_kv_is_ring(kv, l)) {
            ring_limited = 1;
            ring_slots = tern_kv_slots(kv, l) < ring_slots ? tern_kv_slots(kv, l) : ring_slots;
        }
    const int64_t chunk = tern_kv_extra(kv); /* the ring's extra slots, read when ring_limited */
    for (int r = 0; r < b->n_rows; r++) {
        if (b->seq[r] < 0 || b->seq[r] >= n_seq)
            return tern_errf(TERN_EINVAL, "row %d: KV sequence %d out of range [0, %d)", r, b->seq[r], n_seq);
        for (int r2 = 0; r2 < r; r2++)
            if (b->seq[r2] == b->seq[r])
                return tern_errf(TERN_EINVAL, "rows %d and %d use the same KV sequence %d", r2, r, b->seq[r]);
        const int64_t n = b->n_tok[r], committed = tern_kv_len(kv, b->seq[r]), len = tern_batch_row_pos(b, kv, r);
        if (n <= 0)
            return tern_errf(TERN_EINVAL, "row %d has no tokens", r);
        if (b->pos) {
            if (len < 0 || len > committed)
                return tern_errf(TERN_EINVAL, "row %d: position %lld is beyond the sequence's committed length %lld", r,
                                 (long long)len, (long long)committed);
            const int64_t written = tern_kv_written(kv, b->seq[r]);
            if (ring_limited && written - len > chunk)
                return tern_errf(TERN_EINVAL, "row %d: position %lld is %lld before the furthest position written; the "
                                 "sliding layers keep %lld", r, (long long)len, (long long)(written - len),
                                 (long long)chunk);
        }
        if (len + n > tern_kv_ctx(kv))
            return tern_errf(TERN_EINVAL, "row %d: %lld + %lld tokens exceed the context of %lld", r, (long long)len,
                             (long long)n, (long long)tern_kv_ctx(kv));
        if (ring_limited && n > chunk + 1)
            return tern_errf(TERN_EINVAL, "row %d: %lld tokens in one forward exceed the chunk limit of %lld", r,
                             (long long)n, (long long)chunk + 1);
        for (int64_t i = 0; b->spans && i < n; i++) {
            const tern_tok_span sp = b->spans[*T + i];
            if ((sp.first != -1 || sp.last != -1) && (sp.first < 0 || sp.first > len + i || sp.last < len + i ||
                                                        sp.last >= len + n))
                return tern_errf(TERN_EINVAL, "row %d: token %lld at position %lld lies in a span [%lld, %lld] that "
                                 "does not hold it or ends beyond this forward (positions up to %lld)", r,
                                 (long long)i, (long long)(len + i), (long long)sp.first, (long long)sp.last,
                                 (long long)(len + n - 1));
            if (sp.last >= 0 && ring_limited && len + n - sp.first > ring_slots)
                return tern_errf(TERN_EINVAL, "row %d: a span from position %lld reaches back further than the sliding "
                                 "layers keep in a forward ending at %lld (%lld positions)", r, (long long)sp.first,
                                 (long long)(len + n - 1), (long long)ring_slots);
        }
        *T += n;
    }
    for (int64_t t = 0; t < *T; t++) {
        const int soft = b->embeds && b->embeds[t];
        if (!soft && (b->ids[t] < 0 || b->ids[t] >= vocab))
            return tern_errf(TERN_EINVAL, "token id %d is outside the vocabulary [0, %lld)", b->ids[t],
                             (long long)vocab);
    }
    return NULL;
}

static size_t buf_floats(const tern_dec_buf *d, int64_t T) {
    const size_t line = TERN_ALIGN / sizeof(float);
    const size_t n = (size_t)(T * (d->per_token || d->fixed ? d->per_token : 1) + d->fixed);
    return (n + line - 1) / line * line;
}

uint64_t tern_dec_work_bytes(const tern_dec_buf *bufs, int n_bufs, int64_t T) {
    uint64_t total = 0;
    for (int i = 0; i < n_bufs; i++)
        total += buf_floats(&bufs[i], T);
    return total * sizeof(float);
}

static void dec_free(tern_dec *D) {
    free(D->tok_seq);
    free(D->tok_pos);
    free(D->tok_kind);
    free(D->want);
    D->tok_seq = NULL;
    D->tok_pos = NULL;
    D->tok_kind = NULL;
    D->want = NULL;
}

tern_err *tern_dec_begin(tern_dec *D, tern_kv *kv, tern_pool *pool, const tern_batch *b, int64_t vocab,
                         const tern_dec_buf *bufs, int n_bufs, tern_lm_profile *prof) {
    memset(D, 0, sizeof *D);
    D->t_mark = prof ? tern_now_s() : 0;
    int64_t T;
    TERN_TRY(check_batch(kv, b, vocab, &T));
    D->kv = kv;
    D->pool = pool;
    D->T = T;
    D->prof = prof;
    D->tok_span = b->spans;
    D->tok_seq = malloc((size_t)T * sizeof *D->tok_seq);
    D->tok_pos = malloc((size_t)T * sizeof *D->tok_pos);
    D->tok_kind = malloc((size_t)T * sizeof *D->tok_kind);
    D->want = malloc((size_t)T);
    /* The activations live in the cache's work area, zeroed each pass (the area outlives the pass, so decode
     * steps reuse its pages instead of faulting in fresh ones). */
    const uint64_t bytes = tern_dec_work_bytes(bufs, n_bufs, T);
    float *work = tern_kv_work(kv, (size_t)bytes);
    if (!D->tok_seq || !D->tok_pos || !D->tok_kind || !D->want || !work) {
        dec_free(D);
        return tern_errf(TERN_ENOMEM, "out of memory for a batch of %lld tokens", (long long)T);
    }
    memset(work, 0, (size_t)bytes);
    for (int i = 0; i < n_bufs; work += buf_floats(&bufs[i], T), i++)
        if (bufs[i].at)
            *bufs[i].at = work;
    for (int r = 0, t = 0; r < b->n_rows; r++) {
        const int64_t len = tern_batch_row_pos(b, kv, r);
        /* Marked before the layers write: a truncation must never reach ring slots this pass reuses. */
        tern_kv_mark_written(kv, b->seq[r], len + b->n_tok[r]);
        const int prefill = b->row_prefill ? b->row_prefill[r] : b->n_tok[r] > 1;
        const int row_out = b->out != TERN_OUT_NONE && (!b->row_out || b->row_out[r]);
        for (int64_t i = 0; i < b->n_tok[r]; i++, t++) {
            D->tok_seq[t] = b->seq[r];
            D->tok_pos[t] = len + i;
            D->tok_kind[t] = prefill ? TERN_MM_PREFILL : TERN_MM_DECODE;
            D->want[t] = b->want ? b->want[t]
                         : row_out && (b->out == TERN_OUT_ALL || i == b->n_tok[r] - 1) ? TERN_WANT_LOGITS | TERN_WANT_HIDDEN
                                                                                     : 0;
        }
    }
    tern_dec_mark(D, TERN_PH_SETUP, NULL);
    return NULL;
}

void tern_dec_mark(tern_dec *D, tern_phase ph, const tern_product *s) {
    if (!D->prof)
        return;
    const double t = tern_now_s();
    D->prof->seconds[ph] += t - D->t_mark;
    D->t_mark = t;
    for (int i = 0; s && i < s->n; i++)
        D->prof->bytes[ph] += (double)tern_weight_bytes(s->w[i]);
}

int tern_dec_mm_runs(tern_pool *pool, const tern_product *s, float *x, tern_gate_fn gate, const float *mul,
                     float *const *ys, const uint8_t *kind, int64_t n, const tern_product *next) {
    const int64_t in = tern_weight_cols(s->w[0]);
    int failed = 0;
    for (int64_t t0 = 0; t0 < n;) {
        int64_t t1 = t0 + 1;
        while (t1 < n && kind[t1] == kind[t0])
            t1++;
        float *yt[3];
        for (int i = 0; i < s->n; i++)
            yt[i] = ys[i] + t0 * tern_weight_rows(s->w[i]);
        if (gate)
            failed |= tern_matmul_gated_group(pool, s->w, s->n, x + t0 * in, mul + t0 * in, gate, t1 - t0, yt,
                                              (tern_mm_kind)kind[t0], next ? next->w : NULL, next ? next->n : 0);
        else
            failed |= tern_matmul_group(pool, s->w, s->n, x + t0 * in, t1 - t0, yt, (tern_mm_kind)kind[t0],
                                        next ? next->w : NULL, next ? next->n : 0);
        t0 = t1;
    }
    return failed ? -1 : 0;
}

void tern_dec_mm(tern_dec *D, const tern_product *s, float *x, float *const *ys, const tern_product *next) {
    D->failed |= tern_dec_mm_runs(D->pool, s, x, NULL, NULL, ys, D->tok_kind, D->T, next) != 0;
}

typedef struct rows_job {
    const float *x, *w;
    float *y;
    int64_t n;
    float eps;
} rows_job;

static void rmsnorm_range(void *ctx, size_t b, size_t e, int tid) {
    const rows_job *j = ctx;
    (void)tid;
    for (size_t r = b; r < e; r++)
        tern_rmsnorm(j->x + (int64_t)r * j->n, j->w, j->n, j->eps, j->y + (int64_t)r * j->n);
}

void tern_dec_rmsnorm_rows(tern_pool *pool, const float *x, const float *w, int64_t rows, int64_t n, float eps,
                           float *y) {
    rows_job j = {x, w, y, n, eps};
    tern_pool_parallel_for(pool, (size_t)rows, 1, rmsnorm_range, &j);
}

typedef struct softcap_job {
    float *a;
    float cap;
} softcap_job;

typedef struct attend_job {
    tern_dec *D;
    int cache;
    int both_ways; /* spans seen both ways: a token attends up to its span's end */
    const float *q;
    float *out;
    int64_t nH, kvh, hd, window;
    int64_t slices; /* shares of a token's query heads computed apart */
    int64_t spans;  /* 2: a token's two spans of positions computed apart, their partials in parts; else 1 */
    float *parts;   /* spans == 2: [T][2] partials, finished after the region */
} attend_job;

static tern_attn_args attend_args(const attend_job *j, int64_t t) {
    const tern_dec *D = j->D;
    const int seq = D->tok_seq[t];
    const int64_t p = D->tok_pos[t];
    int64_t start = j->window > 0 ? p - j->window + 1 : 0, end = p;
    if (j->both_ways && D->tok_span && D->tok_span[t].last >= 0) { /* the whole span, past the window too */
        start = D->tok_span[t].first < start ? D->tok_span[t].first : start;
        end = D->tok_span[t].last;
    }
    return (tern_attn_args){.q = j->q + t * j->nH * j->hd, .n_heads = j->nH, .kv_heads = j->kvh, .head_dim = j->hd,
                            .k = tern_kv_rows(D->kv, j->cache, seq, 0), .v = tern_kv_rows(D->kv, j->cache, seq, 1),
                            .k_type = tern_kv_k_type(D->kv), .v_type = tern_kv_v_type(D->kv),
                            .slots = tern_kv_slots(D->kv, j->cache), .start = start < 0 ? 0 : start, .end = end,
                            .out = j->out + t * j->nH * j->hd};
}

/* Units [b, e): unit u is, of token u / (spans * slices), span (u / slices) % spans of its positions for share
 * u % slices of its query heads; with one span the unit's result is final, with two it is a partial. */
static void attend_range(void *ctx, size_t b, size_t e, int tid) {
    const attend_job *j = ctx;
    const int64_t pf = tern_attn_part_floats(j->nH, j->hd), S = j->slices, P = j->spans;
    float *scratch = malloc((size_t)(j->nH * TERN_ATTN_CHUNK + 3 * pf) * sizeof *scratch);
    if (!scratch)
        return;
    for (size_t u = b; u < e; u++) {
        const int64_t t = (int64_t)u / (S * P), span = (int64_t)u / S % P;
        tern_attn_args a = attend_args(j, t);
        a.slice = (int64_t)u % S;
        a.slices = S;
        a.scores = scratch;
        a.part = scratch + j->nH * TERN_ATTN_CHUNK;
        if (P == 1)
            tern_attend(&a);
        else
            tern_attend_span(&a, span, j->parts + (t * 2 + span) * pf);
    }
    free(scratch);
}

void tern_dec_attend(tern_dec *D, int cache, const float *q, int64_t nH, int64_t kvh, int64_t hd, int64_t window,
                     int both_ways, float *out) {
    const int64_t T = D->T;
    attend_job j = {D, cache, both_ways, q, out, nH, kvh, hd, window, 1, 1, NULL};
    /* With fewer tokens than threads, each token's work is shared out so that every thread has attention to do:
     * over runs of 3 or more chunks, its two spans of positions (each thread then reads half the cache rows);
     * and/or its query heads, halved while the KV heads' groups divide. */
    const int threads = tern_pool_size(D->pool);
    j.spans = T < threads ? 2 : 1;
    for (int64_t t = 0; t < T && j.spans > 1; t++) {
        const tern_attn_args a = attend_args(&j, t);
        if (a.end / TERN_ATTN_CHUNK - a.start / TERN_ATTN_CHUNK < 2)
            j.spans = 1;
    }
    while (T * j.spans * j.slices < threads && (nH / kvh) % (2 * j.slices) == 0)
        j.slices *= 2;
    const int64_t pf = tern_attn_part_floats(nH, hd);
    if (j.spans > 1 && !(j.parts = malloc((size_t)(T * 2 * pf) * sizeof *j.parts)))
        j.spans = 1;
    /* Balanced: with causal masking later tokens cost more, so equal token counts would not be equal work. */
    tern_pool_parallel_balanced(D->pool, (size_t)(T * j.spans * j.slices), 1, attend_range, &j);
    for (int64_t t = 0; j.spans > 1 && t < T; t++) {
        tern_attn_args a = attend_args(&j, t);
        float *pt[2] = {j.parts + t * 2 * pf, j.parts + (t * 2 + 1) * pf};
        tern_attn_finish(&a, pt, 2);
    }
    free(j.parts);
}

static void softcap_range(void *ctx, size_t b, size_t e, int tid) {
    const softcap_job *j = ctx;
    (void)tid;
    tern_softcap(j->a + b, (int64_t)(e - b), j->cap);
}

tern_err *tern_dec_finish(tern_dec *D, const tern_dec_head *h, const float *x, float *scratch, float *logits,
                          float *hidden) {
    const int64_t H = h->hidden;
    int64_t n_out = 0;
    for (int64_t t = 0, j = 0; t < D->T; t++)
        if (hidden && (D->want[t] & TERN_WANT_HIDDEN))
            tern_rmsnorm(x + t * H, h->final_norm, H, h->eps, hidden + j++ * H);
    for (int64_t t = 0; t < D->T; t++)
        if (D->want[t] & TERN_WANT_LOGITS) {
            tern_rmsnorm(x + t * H, h->final_norm, H, h->eps, scratch + n_out * H);
            D->tok_kind[n_out++] = D->tok_kind[t]; /* n_out <= t: entries already read are reused */
        }
    const tern_product head = {{h->head}, 1};
    if (logits && n_out) {
        D->failed |= tern_dec_mm_runs(D->pool, &head, scratch, NULL, NULL, &logits, D->tok_kind, n_out, NULL) != 0;
        softcap_job j = {logits, h->softcap};
        if (h->softcap > 0)
            tern_pool_parallel_for(D->pool, (size_t)(n_out * h->vocab), 4096, softcap_range, &j);
    }
    tern_dec_mark(D, TERN_PH_HEAD, logits && n_out ? &head : NULL);
    tern_dec_mark(D, TERN_PH_SETUP, NULL);
    if (D->prof)
        D->prof->passes++;
    tern_err *err = D->failed ? tern_errf(TERN_ENOMEM, "out of memory for a product's scratch buffers in a forward "
                                          "of %lld tokens (its results would be wrong, so none are given)",
                                          (long long)D->T)
                              : NULL;
    dec_free(D);
    return err;
}
