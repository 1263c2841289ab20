/* scheduler.c — the engine thread: one loop of
 *
 *   admit    queued requests take free rows while the KV budget holds their whole reservation
 *            (first come, first served: the head waits rather than being overtaken — except, for at
 *            most a second of its wait, by a request whose prompt is mostly cached and that fits);
 *   start    a new row restores the longest cached prefix of its prompt (prefix_cache.h);
 *   step     one forward over every active row: each decoding row feeds its last token, then
 *            prefilling rows (first admitted first) feed prompt chunks of up to prefill_chunk
 *            tokens while the step's token budget lasts — so a long prompt joins the batch a
 *            chunk at a time and never stalls the rows already decoding;
 *   sample   rows whose prompt is done choose a token (in parallel, each with its own chain);
 *   emit     token text goes through the streaming detokenizer and the stop-string matcher,
 *            then to the request's channel; finished and cancelled rows leave and free their
 *            KV memory and reservation before their DONE event is delivered.
 *
 * Per-row state (tokens, KV length, sampler, detokenizer, stop matcher, prefix-cache cursor)
 * lives in the row, so rows come and go between steps without disturbing each other, and a
 * row's result depends only on its own inputs. The verifier (speculative decoding) feeds a row
 * its last token and the drafted ones, takes logits for all of them, accepts a prefix with
 * tern_chain_accept, rolls the KV back with tern_kv_set_len, and hands the prefix-cache cursor
 * only the committed length; when a row drafts and how much is the draft room's policy
 * (draft/policy.h). */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timeutil.h"
#include "engine/engine_internal.h"

/* ---- events ------------------------------------------------------------------------------------ */

static void fill_done(tern_event *ev, const eng_request *q, const eng_row *w, tern_finish finish, double now) {
    memset(ev, 0, sizeof *ev);
    ev->kind = TERN_EV_DONE;
    ev->request_id = q->id;
    ev->time_s = now;
    ev->token = -1;
    ev->text = "";
    ev->finish = finish;
    ev->stop_token = -1;
    ev->stop_string = -1;
    ev->usage.prompt_tokens = q->n_prompt;
    ev->usage.cached_tokens = w ? w->cached : 0;
    ev->usage.completion_tokens = w ? w->n_gen : 0;
    if (w) {
        ev->usage.drafted_tokens = w->drafted;
        ev->usage.accepted_draft_tokens = w->accepted;
        ev->usage.accepted_prediction_tokens = w->pred_accepted;
        ev->usage.rejected_prediction_tokens = w->pred_rejected;
    }
    ev->usage.max_tokens = q->max_tokens;
    double admit = q->t_admit > 0 ? q->t_admit : now;
    ev->timings.queue_s = admit - q->t_submit;
    if (q->t_first > 0) {
        ev->timings.prefill_s = q->t_first - admit;
        ev->timings.ttft_s = q->t_first - q->t_submit;
        ev->timings.decode_s = now - q->t_first;
    }
}

/* A request that never reached a row (cancelled while queued, or the engine stopped). */
static void finish_queued(tern_engine *e, eng_request *q, tern_finish finish) {
    tern_event ev;
    fill_done(&ev, q, NULL, finish, tern_now_s());
    pthread_mutex_lock(&e->mu);
    e->m.requests_finished[finish]++;
    e->m.prompt_tokens += (uint64_t)q->n_prompt;
    pthread_mutex_unlock(&e->mu);
    channel_emit(q->ch, &ev);
    request_free(q);
}

/* Appends to the row's final-text buffer; 0 or -1 on OOM. */
static int final_append(eng_row *w, const char *s, size_t n) {
    if (w->n_final + n + 1 > w->cap_final) {
        size_t cap = w->cap_final ? w->cap_final : 64;
        while (cap < w->n_final + n + 1)
            cap *= 2;
        char *nb = realloc(w->final, cap);
        if (!nb)
            return -1;
        w->final = nb;
        w->cap_final = cap;
    }
    if (n)
        memcpy(w->final + w->n_final, s, n);
    w->n_final += n;
    w->final[w->n_final] = 0;
    return 0;
}

/* Generation ended without a stop string: what the detokenizer and the matcher held back is real output
 * (unless the detokenizer's last bytes complete a stop string after all, which turns the finish into one). */
static void release_held_text(eng_row *w, tern_finish *finish, int *stop_string, int32_t *stop_token) {
    const char *tail = "", *out;
    size_t tail_len = 0, out_len;
    int idx = -1;
    w->n_final = 0;
    if (w->detok)
        tern_detok_stream_flush(w->detok, &tail, &tail_len);
    tern_err *err = tern_stop_text_push(&w->stop, tail, tail_len, &out, &out_len, &idx);
    if (!err && !final_append(w, out, out_len) && idx < 0)
        err = tern_stop_text_flush(&w->stop, &out, &out_len);
    if (!err && idx < 0)
        final_append(w, out, out_len);
    if (idx >= 0) {
        *finish = TERN_FINISH_STOP;
        *stop_string = idx;
        *stop_token = -1;
    }
    tern_err_free(err); /* out of memory: the held-back text is lost, the request still ends */
}

/* Ends a row's request: releases its KV memory and reservation (so metrics read after DONE already show
 * them free), then delivers DONE. */
static void finish_row(tern_engine *e, eng_row *w, tern_finish finish, int32_t stop_token, int stop_string,
                       const char *error) {
    eng_request *q = w->req;
    w->n_final = 0;
    if (finish == TERN_FINISH_LENGTH || (finish == TERN_FINISH_STOP && stop_string < 0))
        release_held_text(w, &finish, &stop_string, &stop_token);
    tern_event ev;
    fill_done(&ev, q, w, finish, tern_now_s());
    ev.text = w->n_final ? w->final : "";
    ev.text_len = w->n_final;
    ev.stop_token = stop_token;
    ev.stop_string = stop_string;
    ev.error = error;
    if (q->embed && finish == TERN_FINISH_STOP) {
        ev.embedding = w->pooled;
        ev.n_embedding = e->desc->hidden;
    }
    if (w->cursor) { /* the last fed token's position too (a row that ends is not captured after its step) */
        tern_pc_cursor_capture(w->cursor, e->kv, w->seq, w->keys ? w->keys : w->toks, w->n_past);
        tern_pc_cursor_end(w->cursor);
    }
    if (w->src)
        w->src->vt->row_end(w->src, w->seq);
    w->src = NULL;
    tern_kv_release(e->kv, w->seq);
    pthread_mutex_lock(&e->mu);
    tern_budget_release(&e->budget, q->reserve);
    w->req = NULL;
    e->m.requests_finished[finish]++;
    e->m.prompt_tokens += (uint64_t)q->n_prompt;
    e->m.cached_tokens += (uint64_t)w->cached;
    e->m.active_rows--;
    if (w->phase != ROW_DECODE)
        e->m.prefilling_rows--;
    pthread_mutex_unlock(&e->mu);
    w->phase = ROW_FREE;
    channel_emit(q->ch, &ev);
    tern_detok_stream_free(w->detok);
    w->detok = NULL;
    tern_stop_text_reset(&w->stop);
    request_free(q);
}

/* ---- starting a row ------------------------------------------------------------------------- */

/* Prepares an admitted row: tokens, sampler, detokenizer, stop matcher, and the cached prefix. */
static TERN_MUST_CHECK tern_err *start_row(tern_engine *e, eng_row *w) {
    eng_request *q = w->req;
    int64_t need = q->n_prompt + q->max_tokens + 1;
    if (need > w->cap_toks) {
        int32_t *nt = realloc(w->toks, (size_t)need * sizeof *nt);
        if (!nt)
            return tern_errf(TERN_ENOMEM, "out of memory for %lld tokens", (long long)need);
        w->toks = nt;
        w->cap_toks = need;
    }
    memcpy(w->toks, q->prompt, (size_t)q->n_prompt * sizeof *w->toks);
    w->n_toks = q->n_prompt;
    free(w->keys);
    w->keys = NULL;
    if (q->keys) { /* soft tokens: the prefix cache keys them apart from their placeholder ids */
        if (!(w->keys = malloc((size_t)w->cap_toks * sizeof *w->keys)))
            return tern_errf(TERN_ENOMEM, "out of memory for %lld tokens", (long long)need);
        memcpy(w->keys, q->keys, (size_t)q->n_prompt * sizeof *w->keys);
    }
    w->n_past = w->n_gen = w->cached = 0;
    TERN_TRY(tern_kv_set_len(e->kv, w->seq, 0)); /* released when its last request finished */
    TERN_TRY(tern_chain_start(w->chain, &q->sp, q->prompt, q->n_prompt));
    TERN_TRY(tern_detok_stream_new(e->model->tok, q->render_special, &w->detok));
    tern_stop_text_init(&w->stop, (const char *const *)q->stops, q->stop_lens, q->n_stops);
    w->drafted = w->accepted = w->pred_accepted = w->pred_rejected = 0;
    w->src = NULL;
    if (q->draft_max > 0)
        w->src = tern_draft_pick(e->sources, q->n_prediction > 0);
    if (w->src) {
        tern_err *err = w->src->vt->row_start(w->src, w->seq, q->prediction, q->n_prediction);
        if (err) { /* the row decodes plainly */
            TLOG_DEBUG("engine: draft source %s: %s", w->src->vt->name, tern_err_msg(err));
            tern_err_free(err);
            w->src = NULL;
            pthread_mutex_lock(&e->mu);
            e->m.draft_failures++;
            pthread_mutex_unlock(&e->mu);
        }
    }
    if (w->src && w->src->samples && q->sample_drafts && !w->draft_q &&
        !(w->draft_q = malloc((size_t)e->o.draft_max * (size_t)e->vocab * sizeof *w->draft_q)))
        TLOG_WARN("engine: no memory for sampled drafts (%d x %lld floats): this row drafts greedily",
                  e->o.draft_max, (long long)e->vocab);
    tern_draft_policy_start(&w->pol, q->draft_max, w->src ? (int)w->src->kind : -1, &e->lessons);
    w->pol.fixed = e->o.draft_fixed;
    if (q->embed) { /* every position's hidden state is pooled, so none comes from the cache */
        if (!w->pooled && !(w->pooled = malloc((size_t)e->desc->hidden * sizeof *w->pooled)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        memset(w->pooled, 0, (size_t)e->desc->hidden * sizeof *w->pooled);
        if (e->pc)
            tern_pc_cursor_begin(w->cursor, NULL, 0);
    } else if (e->pc) {
        /* At least the last prompt token must run through the model: its logits choose the first token. */
        const tern_pc_node *tail = NULL;
        int64_t got = tern_prefix_cache_match_prefetched(e->pc, q->keys ? q->keys : q->prompt, q->n_prompt - 1,
                                                         q->prefetch, &tail);
        tern_pc_prefetch_free(q->prefetch);
        q->prefetch = NULL;
        if (got) {
            TERN_TRY(tern_prefix_cache_restore(e->pc, tail, got, e->kv, w->seq));
            w->n_past = w->cached = got;
        }
        tern_pc_cursor_begin(w->cursor, tail, got);
    }
    w->gfail = NULL;
    if (q->grammar) {
        if (!w->gmask && !(w->gmask = malloc((size_t)((e->vocab + 63) / 64) * sizeof *w->gmask)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        if ((w->gstate = tern_gdfa_start(q->grammar->dfa)) < 0)
            return tern_errf(TERN_ENOMEM, "out of memory");
    }
    w->phase = ROW_PREFILL;
    return NULL;
}

/* ---- one step -------------------------------------------------------------------------------- */

/* An embedding row's hidden states of this step (from its hout) into its pooled state: summed for the mean, the one
 * state otherwise. */
static void pool_hidden(tern_engine *e, eng_row *w, int n) {
    const int64_t H = e->desc->hidden;
    for (int k = 0; k < n; k++) {
        const float *h = e->hidden + (size_t)(w->hout + k) * (size_t)H;
        if (w->req->pooling == TERN_POOL_MEAN)
            for (int64_t d = 0; d < H; d++)
                w->pooled[d] += h[d];
        else
            memcpy(w->pooled, h, (size_t)H * sizeof *h);
    }
}

typedef struct sample_job {
    tern_engine *e;
} sample_job;

/* Whether the row's drafts are drawn from its source's distribution (kept in draft_q): a sampling source, and a
 * request that samples without a seed of its own, with the memory for q. */
static int drafts_sampled(const eng_row *w) {
    return w->src && w->src->samples && w->req->sample_drafts && w->draft_q;
}

/* The row's choices this step: at each fed position in turn the chain chooses (verifying the drafted token
 * there, if any), until a choice is not the draft; every choice joins the penalties' history. */
static void choose_row(tern_engine *e, eng_row *w) {
    const size_t V = (size_t)e->vocab;
    float *logits = e->logits + (size_t)w->out * V;
    eng_grammar *g = w->req->grammar;
    w->n_chosen = 0;
    for (int j = 0;; j++) {
        /* A constrained row chooses among what its grammar allows after the tokens chosen so far, so a drafted
         * token the grammar forbids is never kept. */
        if (g && (w->gfail = constraint_mask(g, w->gstate, logits + (size_t)j * V, e->vocab, w->gmask)))
            return;
        int accepted = 0;
        const float *lg = logits + (size_t)j * V;
        int32_t t = j >= w->n_draft      ? tern_chain_choose(w->chain, lg, &w->lp[j])
                    : drafts_sampled(w) ? tern_chain_verify_q(w->chain, lg, w->draft[j], w->draft_q + (size_t)j * V,
                                                            &w->lp[j], &accepted)
                                        : tern_chain_verify(w->chain, lg, w->draft[j], &w->lp[j], &accepted);
        if (g) {
            int32_t next = tern_gdfa_token(g->dfa, w->gstate, t);
            if (next < 0) {
                w->gfail = next == -1 ? "the grammar needs more states than the matcher keeps"
                                      : "the sampler chose a token the grammar does not allow";
                return;
            }
            w->gstate = next;
        }
        tern_chain_accept(w->chain, t);
        w->chosen_toks[w->n_chosen++] = t;
        if (!accepted)
            break;
    }
}

static void sample_range(void *ctx, size_t b, size_t end, int tid) {
    tern_engine *e = ((sample_job *)ctx)->e;
    for (size_t i = b; i < end; i++)
        choose_row(e, &e->rows[e->ready[i]]);
}

static int is_stop_token(const tern_engine *e, const eng_request *q, int32_t tok) {
    for (int i = 0; i < q->n_stop_ids; i++)
        if (q->stop_ids[i] == tok)
            return 1;
    return !q->ignore_eos && tern_model_is_eog(e->model, tok);
}

/* The row's j-th choice of this step: record it, emit its event, and finish the row if it is done. */
static void take_token(tern_engine *e, eng_row *w, int j) {
    eng_request *q = w->req;
    int32_t tok = w->chosen_toks[j];
    const tern_logprobs *lp = &w->lp[j];
    double now = tern_now_s();
    if (w->n_gen == 0) {
        q->t_first = now;
        w->phase = ROW_DECODE;
        pthread_mutex_lock(&e->mu);
        e->m.prefilling_rows--;
        pthread_mutex_unlock(&e->mu);
    }
    if (w->keys)
        w->keys[w->n_toks] = tok;
    w->toks[w->n_toks++] = tok;
    w->n_gen++;
    if (is_stop_token(e, q, tok)) {
        finish_row(e, w, TERN_FINISH_STOP, tok, -1, NULL);
        return;
    }
    const char *piece = "", *text = "";
    size_t piece_len = 0, text_len = 0;
    int stop = -1;
    tern_err *err = tern_detok_stream_push(w->detok, tok, &piece, &piece_len);
    if (!err)
        err = tern_stop_text_push(&w->stop, piece, piece_len, &text, &text_len, &stop);
    if (err) {
        finish_row(e, w, TERN_FINISH_ERROR, -1, -1, tern_err_msg(err));
        tern_err_free(err);
        return;
    }
    tern_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TERN_EV_TOKEN;
    ev.request_id = q->id;
    ev.time_s = now;
    ev.token = tok;
    ev.index = w->n_gen - 1;
    ev.text = text;
    ev.text_len = text_len;
    ev.has_logprob = q->sp.logprobs;
    ev.logprob = lp->chosen;
    ev.n_top = q->sp.top_logprobs ? lp->n_top : 0;
    ev.top_ids = lp->top_ids;
    ev.top_logprobs = lp->top;
    ev.stop_token = -1;
    ev.stop_string = -1;
    if (channel_emit(q->ch, &ev)) /* a token the reader never sees: end with an error, not a shorter reply */
        finish_row(e, w, TERN_FINISH_ERROR, -1, -1, "out of memory delivering a token: the reply was cut short");
    else if (stop >= 0)
        finish_row(e, w, TERN_FINISH_STOP, -1, stop, NULL);
    else if (w->n_gen >= q->max_tokens)
        finish_row(e, w, TERN_FINISH_LENGTH, -1, -1, NULL);
}

/* Rows in prefill, first admitted first. */
static int prefill_order(tern_engine *e, int *order) {
    int n = 0;
    for (int r = 0; r < e->o.parallel; r++)
        if (e->rows[r].phase == ROW_PREFILL) {
            int j = n++;
            for (; j > 0 && e->rows[order[j - 1]].admit_order > e->rows[r].admit_order; j--)
                order[j] = order[j - 1];
            order[j] = r;
        }
    return n;
}

/* How many of the drafted tokens out[0, n) a constrained row's grammar allows one after another from the row's
 * state; the state after them in *st. */
static int draft_allowed(const eng_row *w, const int32_t *out, int n, int32_t *st) {
    int32_t s = w->gstate;
    int i = 0;
    for (int32_t next; i < n && (next = tern_gdfa_token(w->req->grammar->dfa, s, out[i])) >= 0; i++)
        s = next;
    *st = s;
    return i;
}

/* tern_draft_ask.constrain for a constrained row: its grammar's mask at the next drafted position. */
static int draft_constrain(const tern_draft_ask *a, float *logits, int64_t vocab) {
    eng_row *w = a->ctx;
    int32_t st;
    if (draft_allowed(w, a->out, a->n_out, &st) < a->n_out)
        return -1;
    return constraint_mask(w->req->grammar, st, logits, vocab, w->gmask) ? -1 : 0;
}

/* tern_draft_ask.sample for a sampling row: the drafted token drawn under the row's sampling, its distribution kept
 * for the verification. */
static int32_t draft_sample(const tern_draft_ask *a, float *logits, int64_t vocab) {
    eng_row *w = a->ctx;
    return tern_chain_draft(w->chain, logits, w->draft_q + (size_t)a->n_out * (size_t)vocab);
}

/* Asks every source for its rows' drafts (one call per source for all its rows); sets each decoding row's n_draft. */
static void gather_drafts(tern_engine *e, const int *rows, int n) {
    tern_draft_ask asks[TERN_DRAFT_KINDS][256];
    int n_asks[TERN_DRAFT_KINDS] = {0};
    int64_t room = e->o.step_tokens - n; /* every decoding row feeds its own token first */
    for (int i = 0; i < n; i++) {
        eng_row *w = &e->rows[rows[i]];
        w->n_draft = 0;
        int k = w->src ? tern_draft_policy_ask(&w->pol, w->req->max_tokens - w->n_gen - 1, room, e->o.draft_min) : 0;
        if (k <= 0)
            continue;
        room -= k;
        w->asked = 1;
        tern_draft_ask *a = &asks[w->src->kind][n_asks[w->src->kind]++];
        *a = (tern_draft_ask){.row = w->seq, .toks = w->toks, .n_toks = w->n_toks, .n_prompt = w->req->n_prompt,
                              .k = k, .hidden = w->h, .out = w->draft,
                              .constrain = w->req->grammar ? draft_constrain : NULL,
                              .sample = drafts_sampled(w) ? draft_sample : NULL, .ctx = w};
    }
    for (int kind = 0; kind < TERN_DRAFT_KINDS; kind++) {
        if (!n_asks[kind])
            continue;
        tern_draft_source *src = e->sources[kind];
        tern_err *err = src->vt->draft(src, asks[kind], n_asks[kind]);
        if (err) { /* those rows decode plainly this step */
            TLOG_DEBUG("engine: draft source %s: %s", src->vt->name, tern_err_msg(err));
            tern_err_free(err);
            pthread_mutex_lock(&e->mu);
            e->m.draft_failures++;
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        for (int i = 0; i < n_asks[kind]; i++) {
            tern_draft_ask *a = &asks[kind][i];
            eng_row *w = &e->rows[a->row];
            /* A constrained row keeps its drafts up to the first one its grammar forbids (lookup and predictions
             * draft from text that need not follow it). */
            int32_t st;
            if (w->req->grammar)
                a->n_out = draft_allowed(w, a->out, a->n_out, &st);
            w->n_draft = a->n_out >= e->o.draft_min ? a->n_out : 0;
        }
    }
}

/* After a decoding step of a row with a draft source: the drafts' fate in the counters, and the policy's view of
 * the step (draft/policy.h). */
static void count_drafts(tern_engine *e, eng_row *w, double dt) {
    if (w->n_draft) {
        const int kept = w->n_chosen - 1;
        w->drafted += w->n_draft;
        w->accepted += kept;
        if (w->src->kind == TERN_DRAFT_PREDICTION) {
            w->pred_accepted += kept;
            w->pred_rejected += w->n_draft - kept;
        }
        e->m.draft_tokens[w->src->kind] += (uint64_t)w->n_draft;
        e->m.draft_accepted[w->src->kind] += (uint64_t)kept;
    }
    tern_draft_policy_after(&w->pol, (int)w->src->kind, w->n_draft, w->n_chosen, dt, w->req->draft_max, &e->lessons);
}

/* How much of a prefill chunk of cnt tokens from the row's position to feed so that no image seen both ways is cut:
 * the chunk ends before an image it would cut; a row at an image (at its start, or inside it after a cached prefix)
 * feeds the rest of it alone — past the prefill chunk if need be, within the step's `room` or not at all. */
static int64_t whole_spans(const eng_row *w, int64_t cnt, int64_t room) {
    const tern_tok_span *sp = w->req->spans;
    const int64_t at = w->n_past, end = at + cnt - 1;
    if (!sp || at >= w->req->n_prompt)
        return cnt;
    if (sp[at].last >= 0)
        return sp[at].last - at + 1 <= room ? sp[at].last - at + 1 : 0;
    return end < w->req->n_prompt && sp[end].last > end ? sp[end].first - at : cnt;
}

static void step(tern_engine *e) {
    const int P = e->o.parallel;
    int n = 0, order[256], decoding[256], n_dec = 0;
    int64_t T = 0;
    int soft = 0;
    const double t_step = tern_now_s();
    for (int r = 0; r < P; r++) {
        e->rows[r].asked = 0;
        if (e->rows[r].phase == ROW_DECODE)
            decoding[n_dec++] = r;
    }
    if (n_dec)
        gather_drafts(e, decoding, n_dec);
    for (int i = 0; i < n_dec; i++) { /* decoding rows: their token, then any drafts, every one wanting logits */
        eng_row *w = &e->rows[decoding[i]];
        e->b_seq[n] = w->seq;
        e->b_ntok[n] = 1 + w->n_draft;
        e->b_row[n] = decoding[i];
        e->b_prefill[n] = 0;
        e->b_ids[T] = w->toks[w->n_past];
        memcpy(e->b_ids + T + 1, w->draft, (size_t)w->n_draft * sizeof *e->b_ids);
        for (int64_t t = 0; t < 1 + w->n_draft; t++)
            e->b_emb[T + t] = NULL;
        memset(e->b_want + T, TERN_WANT_LOGITS | (w->src && w->src->needs_hidden ? TERN_WANT_HIDDEN : 0),
               (size_t)(1 + w->n_draft));
        T += 1 + w->n_draft;
        n++;
    }
    const int64_t T_decode = T;
    int both_ways = 0;
    int np = prefill_order(e, order);
    for (int i = 0; i < np && T < e->o.step_tokens; i++) { /* then prompt chunks while the step has room */
        eng_row *w = &e->rows[order[i]];
        int64_t cnt = w->n_toks - w->n_past;
        if (cnt > e->o.prefill_chunk)
            cnt = e->o.prefill_chunk;
        if (cnt > e->o.step_tokens - T)
            cnt = e->o.step_tokens - T;
        if (!(cnt = whole_spans(w, cnt, e->o.step_tokens - T)))
            continue; /* its image does not fit this step's room: a later step (a chunk always fits an empty one) */
        e->b_seq[n] = w->seq;
        e->b_ntok[n] = cnt;
        e->b_row[n] = order[i];
        e->b_prefill[n] = 1;
        w->n_draft = 0;
        memcpy(e->b_ids + T, w->toks + w->n_past, (size_t)cnt * sizeof *e->b_ids);
        const eng_request *q = w->req;
        for (int64_t t = 0; t < cnt; t++) {
            int64_t p = w->n_past + t;
            int32_t row = q->emb_at && p < q->n_prompt ? q->emb_at[p] : -1;
            e->b_emb[T + t] = row >= 0 ? q->emb + (size_t)row * (size_t)e->desc->hidden : NULL;
            e->b_span[T + t] = q->spans && p < q->n_prompt ? q->spans[p] : (tern_tok_span){-1, -1};
            soft |= row >= 0;
            both_ways |= q->spans != NULL;
        }
        /* Only a chunk that completes the prompt needs logits: its last token's choose the first token. An
         * embedding row wants the hidden states its pooling reads instead. */
        memset(e->b_want + T, q->embed && q->pooling == TERN_POOL_MEAN ? TERN_WANT_HIDDEN : 0, (size_t)cnt);
        if (q->embed) {
            if (q->pooling == TERN_POOL_LAST && w->n_past + cnt == w->n_toks)
                e->b_want[T + cnt - 1] = TERN_WANT_HIDDEN;
            if (q->pooling == TERN_POOL_CLS && w->n_past == 0)
                e->b_want[T] = TERN_WANT_HIDDEN;
        } else if (w->n_past + cnt == w->n_toks) {
            e->b_want[T + cnt - 1] = TERN_WANT_LOGITS | (w->src && w->src->needs_hidden ? TERN_WANT_HIDDEN : 0);
        }
        T += cnt;
        n++;
    }
    if (n == 0)
        return;
    for (int64_t t = 0; both_ways && t < T_decode; t++) /* the decoding rows' tokens: generated text, causal */
        e->b_span[t] = (tern_tok_span){-1, -1};
    tern_batch b = {.n_rows = n, .seq = e->b_seq, .n_tok = e->b_ntok, .ids = e->b_ids, .want = e->b_want,
                    .row_prefill = e->b_prefill, .embeds = soft ? e->b_emb : NULL,
                    .spans = both_ways ? e->b_span : NULL};
    tern_err *err = tern_lm_forward(e->lm, e->kv, e->pool, &b, e->logits, e->hidden);
    if (!err)
        err = tern_batch_commit(e->kv, &b);
    if (err) {
        TLOG_ERROR("engine: forward over %d rows failed: %s", n, tern_err_msg(err));
        for (int i = 0; i < n; i++)
            finish_row(e, &e->rows[e->b_row[i]], TERN_FINISH_ERROR, -1, -1, tern_err_msg(err));
        tern_err_free(err);
        return;
    }
    e->n_ready = 0;
    int64_t t0 = 0, k = 0, kh = 0;
    for (int i = 0; i < n; i++) {
        eng_row *w = &e->rows[e->b_row[i]];
        int wants = 0, hiddens = 0;
        for (int64_t t = t0; t < t0 + e->b_ntok[i]; t++) {
            wants += (e->b_want[t] & TERN_WANT_LOGITS) != 0;
            hiddens += (e->b_want[t] & TERN_WANT_HIDDEN) != 0;
        }
        t0 += e->b_ntok[i];
        w->out = wants ? (int)k : -1;
        w->hout = hiddens ? (int)kh : -1;
        k += wants;
        kh += hiddens;
        if (e->b_prefill[i]) { /* a decoding row's kept length is known only after verification */
            w->n_past += e->b_ntok[i];
            if (w->cursor)
                tern_pc_cursor_capture(w->cursor, e->kv, w->seq, w->keys ? w->keys : w->toks, w->n_past);
        }
        if (wants)
            e->ready[e->n_ready++] = e->b_row[i];
        if (w->req->embed)
            pool_hidden(e, w, hiddens);
    }
    for (int i = 0; i < n; i++) { /* embedding rows whose prompt has run are done */
        eng_row *w = &e->rows[e->b_row[i]];
        if (w->req && w->req->embed && w->n_past == w->n_toks) {
            if (w->req->pooling == TERN_POOL_MEAN)
                for (int64_t d = 0; d < e->desc->hidden; d++)
                    w->pooled[d] /= (float)w->n_toks;
            finish_row(e, w, TERN_FINISH_STOP, -1, -1, NULL);
        }
    }
    sample_job job = {e};
    if (e->n_ready > 1)
        tern_pool_parallel_for(e->pool, (size_t)e->n_ready, 1, sample_range, &job);
    else if (e->n_ready == 1)
        sample_range(&job, 0, 1, 0);
    uint64_t chosen = 0;
    const double dt = tern_now_s() - t_step; /* drafting, the forward and the choices */
    pthread_mutex_lock(&e->mu); /* counted before any DONE goes out, so metrics read after it add up */
    for (int i = 0; i < e->n_ready; i++) {
        eng_row *w = &e->rows[e->ready[i]];
        chosen += (uint64_t)w->n_chosen;
        if (w->phase == ROW_DECODE && w->src && !w->gfail)
            count_drafts(e, w, dt);
    }
    e->m.steps++;
    e->m.step_rows += (uint64_t)n;
    e->m.tokens_generated += chosen;
    if (e->pc) {
        tern_prefix_cache_stats st;
        tern_prefix_cache_stats_get(e->pc, &st);
        e->m.prefix_cache_bytes = st.bytes;
        e->m.prefix_cache_blocks = st.blocks;
        e->m.prefix_lookups = st.lookups;
        e->m.prefix_hits = st.hits;
        e->m.prefix_evictions = st.evicted;
        e->m.prefix_hit_tokens = st.hit_tokens;
        e->m.prefix_disk_hit_tokens = st.disk_hit_tokens;
        e->m.prefix_disk_bytes = st.disk_bytes;
        e->m.prefix_disk_cap_bytes = st.disk_cap;
        e->m.prefix_disk_files = st.disk_files;
        e->m.prefix_disk_writes = st.disk_writes;
        e->m.prefix_disk_dropped = st.disk_dropped;
        e->m.prefix_disk_removed_bad = st.disk_removed_bad;
    }
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->n_ready; i++) {
        eng_row *w = &e->rows[e->ready[i]];
        const eng_request *q = w->req;
        const int was_decoding = w->phase == ROW_DECODE;
        if (w->gfail) {
            finish_row(e, w, TERN_FINISH_ERROR, -1, -1, w->gfail);
            continue;
        }
        if (w->hout >= 0) /* the last kept position's hidden state: what the next draft starts from */
            memcpy(w->h, e->hidden + (size_t)(w->hout + (was_decoding ? w->n_chosen - 1 : 0)) * (size_t)e->desc->hidden,
                   (size_t)e->desc->hidden * sizeof *w->h);
        if (was_decoding) {
            /* Kept: the fed token and the drafts accepted after it; the cache forgets the rest. */
            w->n_past += w->n_chosen;
            err = tern_kv_set_len(e->kv, w->seq, w->n_past);
            if (err) {
                finish_row(e, w, TERN_FINISH_ERROR, -1, -1, tern_err_msg(err));
                tern_err_free(err);
                continue;
            }
        }
        for (int j = 0; j < w->n_chosen && w->req == q; j++)
            take_token(e, w, j);
        /* A constrained reply that is complete with nothing allowed after it ends here, even when end tokens do
         * not end generation (ignore_eos). */
        if (w->req == q && q->grammar && q->ignore_eos && tern_gdfa_complete(q->grammar->dfa, w->gstate) == 2)
            finish_row(e, w, TERN_FINISH_STOP, -1, -1, NULL);
        if (w->req != q || !was_decoding) /* finished, or a prompt's first token (captured above) */
            continue;
        if (w->cursor)
            tern_pc_cursor_capture(w->cursor, e->kv, w->seq, w->keys ? w->keys : w->toks, w->n_past);
        if (w->asked)
            w->src->vt->commit(w->src, w->seq, w->n_past + 1);
    }
}

/* ---- the loop --------------------------------------------------------------------------------- */

/* Under mu: unlinks cancelled requests from the wait queue into *dropped. */
static void take_cancelled(tern_engine *e, eng_request **dropped) {
    for (eng_request **pp = &e->q_head; *pp;) {
        eng_request *q = *pp;
        if (!atomic_load(&q->ch->cancelled)) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        e->q_len--;
        q->next = *dropped;
        *dropped = q;
    }
    e->q_tail = NULL;
    for (eng_request *q = e->q_head; q; q = q->next)
        e->q_tail = q;
}

/* Under mu: moves queue heads into free rows while their reservations fit. */
/* How long the head of the queue lets cached requests behind it go first while its reservation does not fit. */
#define ADMIT_PATIENCE_S 1.0
#define ADMIT_LOOKAHEAD 8

/* Under mu: the request to admit into a free row, unlinked from the queue (its reservation taken), or NULL. First
 * come, first served; but while memory is short (the head's reservation does not fit) and the head has waited less
 * than ADMIT_PATIENCE_S, one of the next few whose prompt is mostly in the prefix cache (a short prefill: its row soon
 * decodes) and whose reservation fits goes first. After that patience nobody overtakes the head, so the memory it
 * waits for is left to free. */
static eng_request *next_to_admit(tern_engine *e, double now) {
    eng_request **pp = &e->q_head, *prev = NULL;
    if (!tern_budget_reserve(&e->budget, e->q_head->reserve)) {
        if (!e->pc || now - e->q_head->t_submit >= ADMIT_PATIENCE_S)
            return NULL;
        prev = e->q_head;
        int k = 1;
        for (eng_request *q = prev->next; q && k < ADMIT_LOOKAHEAD; prev = q, q = q->next, k++) {
            int64_t n = q->n_prompt - 1,
                    cached = q->embed ? 0 : tern_prefix_cache_peek(e->pc, q->keys ? q->keys : q->prompt, n) +
                                             tern_pc_prefetch_tokens(q->prefetch);
            if (2 * cached >= n && n > 0 && tern_budget_reserve(&e->budget, q->reserve))
                break;
        }
        if (!prev->next || k == ADMIT_LOOKAHEAD)
            return NULL;
        pp = &prev->next;
    }
    eng_request *q = *pp;
    *pp = q->next;
    if (e->q_tail == q)
        e->q_tail = pp == &e->q_head ? NULL : prev;
    return q;
}

static void admit(tern_engine *e) {
    double now = tern_now_s();
    while (e->q_head) {
        int r = 0;
        while (r < e->o.parallel && e->rows[r].phase != ROW_FREE)
            r++;
        eng_request *q = r == e->o.parallel ? NULL : next_to_admit(e, now);
        if (!q)
            return;
        e->q_len--;
        q->next = NULL;
        q->t_admit = now;
        eng_row *w = &e->rows[r];
        w->req = q;
        w->phase = ROW_ADMITTED;
        w->admit_order = ++e->admit_counter;
        e->m.active_rows++;
        e->m.prefilling_rows++;
    }
}

void *engine_thread_main(void *arg) {
    tern_engine *e = arg;
    for (;;) {
        eng_request *dropped = NULL;
        pthread_mutex_lock(&e->mu);
        for (;;) {
            if (e->stopping) {
                pthread_mutex_unlock(&e->mu);
                return NULL;
            }
            take_cancelled(e, &dropped);
            admit(e);
            if (e->m.active_rows > 0 || dropped)
                break;
            pthread_cond_wait(&e->cv, &e->mu);
        }
        pthread_mutex_unlock(&e->mu);
        while (dropped) {
            eng_request *q = dropped;
            dropped = q->next;
            finish_queued(e, q, TERN_FINISH_CANCELLED);
        }
        for (int r = 0; r < e->o.parallel; r++) {
            eng_row *w = &e->rows[r];
            if (w->phase == ROW_FREE)
                continue;
            if (atomic_load(&w->req->ch->cancelled)) {
                finish_row(e, w, TERN_FINISH_CANCELLED, -1, -1, NULL);
                continue;
            }
            if (w->phase == ROW_ADMITTED) {
                tern_err *err = start_row(e, w);
                if (err) {
                    finish_row(e, w, TERN_FINISH_ERROR, -1, -1, tern_err_msg(err));
                    tern_err_free(err);
                }
            }
        }
        step(e);
    }
}

void engine_finish_all(tern_engine *e, tern_finish finish) {
    for (int r = 0; e->rows && r < e->o.parallel; r++)
        if (e->rows[r].phase != ROW_FREE)
            finish_row(e, &e->rows[r], finish, -1, -1, NULL);
    pthread_mutex_lock(&e->mu);
    eng_request *q = e->q_head;
    e->q_head = e->q_tail = NULL;
    e->q_len = 0;
    pthread_mutex_unlock(&e->mu);
    while (q) {
        eng_request *next = q->next;
        finish_queued(e, q, finish);
        q = next;
    }
}
