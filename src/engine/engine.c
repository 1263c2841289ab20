/* engine.c — the parts of the engine other threads call: create, destroy, submit, cancel, metrics.
 * They touch shared state only under `mu`, briefly; the model runs on the engine thread
 * (scheduler.c). */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "engine/engine_internal.h"
#include "models/pack_cache.h"
#include "engine/fit.h"

void tern_engine_opts_default(tern_engine_opts *o) {
    memset(o, 0, sizeof *o);
    o->parallel = 4;
    o->prefix_cache_bytes = -1;
    o->prefix_block = 64;
    o->max_queue = 64;
    o->prefill_chunk = TERN_ENGINE_PREFILL_CHUNK;
    o->step_tokens = 0; /* resolved at create: it depends on the model (tern_fit_default_step_tokens) */
    o->draft_max = TERN_ENGINE_DRAFT_MAX;
    o->draft_min = 1;
}

void tern_request_default(tern_request *r) {
    memset(r, 0, sizeof *r);
    r->sampling.top_p = 1.0f;
    r->sampling.repetition_penalty = 1.0f;
    r->sampling.penalty_last_n = 64;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* Resolves defaults and checks ranges; fills e->o, e->budget.total and the prefix-cache cap. */
static TERN_MUST_CHECK tern_err *resolve_opts(tern_engine *e, const tern_engine_opts *in, uint64_t *pc_cap) {
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    if (in)
        o = *in;
    if (o.parallel == 0)
        o.parallel = 4;
    if (o.parallel < 1 || o.parallel > 256)
        return tern_errf(TERN_EINVAL, "parallel must be in [1, 256], got %d", o.parallel);
    if (o.ctx == 0)
        o.ctx = tern_fit_default_ctx(e->desc);
    if (o.ctx < 2 || o.ctx > (int64_t)1 << 24)
        return tern_errf(TERN_EINVAL, "ctx must be in [2, 16777216], got %lld", (long long)o.ctx);
    if (o.prefix_block == 0)
        o.prefix_block = 64;
    if (o.prefix_block < 1 || o.prefix_block > 4096)
        return tern_errf(TERN_EINVAL, "prefix_block must be in [1, 4096], got %d", o.prefix_block);
    if (o.max_queue == 0)
        o.max_queue = 64;
    if (o.max_queue < 0 || o.max_queue > 1 << 20)
        return tern_errf(TERN_EINVAL, "max_queue must be in [1, 1048576], got %d", o.max_queue);
    if (o.threads < 0 || o.threads > 1024)
        return tern_errf(TERN_EINVAL, "threads must be in [0, 1024], got %d", o.threads);
    if (o.threads == 0) /* the pool the weights are laid out for: each thread then reads one run per step */
        o.threads = tern_lm_layout_threads(e->lm);
    if (o.prefill_chunk == 0)
        o.prefill_chunk = TERN_ENGINE_PREFILL_CHUNK;
    if (o.prefill_chunk < 1 || o.prefill_chunk > 1 << 16)
        return tern_errf(TERN_EINVAL, "prefill_chunk must be in [1, 65536], got %d", o.prefill_chunk);
    if (o.step_tokens == 0)
        o.step_tokens = (int)tern_fit_default_step_tokens(e->desc, o.prefill_chunk, o.parallel,
                                                           o.draft_max > 0 && o.draft_max <= 64 ? o.draft_max
                                                                                                 : TERN_ENGINE_DRAFT_MAX);
    if (o.step_tokens < o.parallel + 1 || o.step_tokens > 1 << 20)
        return tern_errf(TERN_EINVAL, "step_tokens must be in [parallel + 1 = %d, 1048576], got %d", o.parallel + 1,
                         o.step_tokens);
    if (o.draft_max == 0)
        o.draft_max = TERN_ENGINE_DRAFT_MAX;
    if (o.draft_max < 0)
        o.draft_max = 0;
    /* A verify pass feeds draft_max + 1 tokens and may roll all but one back: the ring's extra slots (the prefill
     * chunk) must cover it. */
    if (o.draft_max > 64)
        return tern_errf(TERN_EINVAL, "draft_max must be in [0, 64], got %d", o.draft_max);
    if (o.draft_max > o.prefill_chunk - 1)
        o.draft_max = o.prefill_chunk - 1;
    /* An image seen both ways goes whole into one forward, past the prefill chunk if it must: the ring keeps room
     * for it, and a step holds it beside every row's decode and drafts. */
    e->ring_extra = (int)tern_fit_ring_extra(e->desc, o.prefill_chunk);
    if (e->desc->span_both_ways && o.step_tokens < e->ring_extra + o.parallel * (o.draft_max + 1))
        return tern_errf(TERN_EINVAL, "step_tokens %d is below %d (an image) + parallel %d x (draft_max %d + 1): this "
                         "model feeds an image whole in one forward", o.step_tokens, e->ring_extra, o.parallel,
                         o.draft_max);
    if (o.draft_min == 0)
        o.draft_min = 1;
    if (o.draft_head < 0 || o.draft_head > 2)
        return tern_errf(TERN_EINVAL, "draft_head must be 0 (the checkpoint's), 1 (full) or 2 (centroid), got %d",
                         o.draft_head);
    if (o.draft_min < 1 || o.draft_min > 64)
        return tern_errf(TERN_EINVAL, "draft_min must be in [1, 64], got %d", o.draft_min);
    e->kt = e->vt = TERN_KV_BF16;
    if (o.cache_type_k)
        TERN_TRY(tern_kv_type_parse(o.cache_type_k, &e->kt));
    if (o.cache_type_v)
        TERN_TRY(tern_kv_type_parse(o.cache_type_v, &e->vt));
    o.cache_type_k = tern_kv_type_name(e->kt);
    o.cache_type_v = tern_kv_type_name(e->vt);
    e->o = o;
    tern_kv_cost_from_desc(e->desc, e->kt, e->vt, e->ring_extra, &e->cost);
    uint64_t one = tern_kv_cost_bytes(&e->cost, o.ctx);
    uint64_t need = one > UINT64_MAX / (uint64_t)o.parallel ? UINT64_MAX : one * (uint64_t)o.parallel;
    /* What this machine can spare: 3/4 of MemAvailable, less the weights still to be paged in. */
    uint64_t avail = tern_mem_available(), spare = avail / 4 * 3;
    spare = spare > e->desc->weights_bytes ? spare - e->desc->weights_bytes : 0;
    uint64_t budget = o.kv_budget_bytes;
    if (!budget) {
        budget = need;
        if (avail && spare < budget) {
            budget = spare > one ? spare : one; /* always room for one full-context request */
            if (spare < one)
                TLOG_WARN("engine: one request of %lld positions needs %.1f MiB of KV cache but only about %.1f MiB "
                          "of memory look free; lower --ctx if the machine starts swapping",
                          (long long)o.ctx, mib(one), mib(spare));
        }
    }
    if (budget < tern_kv_cost_bytes(&e->cost, 2))
        return tern_errf(TERN_EINVAL, "a KV budget of %llu bytes cannot hold even two positions (%llu bytes)",
                         (unsigned long long)budget, (unsigned long long)tern_kv_cost_bytes(&e->cost, 2));
    if (budget > need)
        budget = need; /* more than the rows can ever use */
    e->budget.total = budget;
    if (o.prefix_cache_bytes < 0) {
        uint64_t left = spare > budget ? spare - budget : 0, half = budget / 2;
        *pc_cap = avail ? (left < half ? left : half) : half;
    } else {
        *pc_cap = (uint64_t)o.prefix_cache_bytes;
    }
    return NULL;
}

static void engine_free(tern_engine *e) {
    for (int r = 0; e->rows && r < e->o.parallel; r++) {
        eng_row *w = &e->rows[r];
        tern_chain_free(w->chain);
        tern_detok_stream_free(w->detok);
        tern_stop_text_free(&w->stop);
        tern_pc_cursor_free(w->cursor);
        free(w->lp);
        free(w->draft);
        free(w->draft_q);
        free(w->h);
        free(w->chosen_toks);
        free(w->toks);
        free(w->keys);
        free(w->gmask);
        free(w->final);
        free(w->pooled);
    }
    free(e->rows);
    for (int k = 0; k < TERN_DRAFT_KINDS; k++)
        tern_draft_source_free(e->sources[k]);
    tern_prefix_cache_free(e->pc);
    tern_kv_free(e->kv);
    tern_pool_destroy(e->pool);
    free(e->logits);
    free(e->hidden);
    free(e->b_seq);
    free(e->b_row);
    free(e->b_ntok);
    free(e->b_ids);
    free(e->b_want);
    free(e->b_emb);
    free(e->b_span);
    free(e->b_prefill);
    free(e->ready);
    constraint_destroy(e);
    pthread_mutex_destroy(&e->gram_mu);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

/* The draft room's loader (draft.h): a two-model drafter's checkpoint loaded as a model like the target, on as many
 * threads as the engine's pool. */
static TERN_MUST_CHECK tern_err *load_drafter(void *ctx, const char *dir, void **handle, tern_lm **lm,
                                              const tern_tokenizer **tok) {
    const tern_engine *e = ctx;
    tern_model_opts mo = {.model_dir = dir, .threads = tern_pool_size(e->pool)};
    tern_model *m = NULL;
    TERN_TRY(tern_model_load(&mo, &m));
    *handle = m;
    *lm = m->lm;
    *tok = m->tok;
    return NULL;
}

static void release_drafter(void *handle) { tern_model_free(handle); }

tern_err *tern_engine_create(tern_model *m, const tern_engine_opts *o, tern_engine **out) {
    *out = NULL;
    if (!m)
        return tern_errf(TERN_EINVAL, "tern_engine_create: no model");
    tern_engine *e = calloc(1, sizeof *e);
    if (!e)
        return tern_errf(TERN_ENOMEM, "out of memory");
    if (pthread_mutex_init(&e->mu, NULL) || pthread_cond_init(&e->cv, NULL) || pthread_mutex_init(&e->gram_mu, NULL)) {
        free(e);
        return tern_errf(TERN_ENOMEM, "cannot create the engine's lock");
    }
    e->model = m;
    e->lm = m->lm;
    e->desc = tern_lm_desc_of(m->lm);
    e->vocab = e->desc->vocab;
    uint64_t pc_cap = 0;
    tern_err *err = resolve_opts(e, o, &pc_cap);
    const int P = e->o.parallel;
    if (!err)
        err = tern_pool_create(e->o.threads, &e->pool);
    if (!err)
        err = tern_lm_kv_create(e->lm, P, e->o.ctx, e->ring_extra, e->kt, e->vt, &e->kv);
    if (!err) {
        tern_kv_cost_from_kv(e->kv, &e->cost); /* the allocated rings are what admission must count */
        if (pc_cap >= 1)
            err = tern_prefix_cache_create(e->kv, e->o.prefix_block, pc_cap, &e->pc);
    }
    if (!err && e->o.prefix_disk_dir) {
        uint64_t model_key;
        tern_model_info info;
        tern_model_get_info(m, &info);
        if (!e->pc)
            err = tern_errf(TERN_EINVAL, "the prompt cache's disk tier needs its memory tier: the prefix cache is off");
        else if (!(model_key = tern_model_source_key(info.dir)))
            err = tern_errf(TERN_EIO, "the prompt cache's disk tier needs to key its files to the model's, and %s "
                                      "cannot be read as a whole (see the warning above)", info.dir);
        else
            err = tern_prefix_cache_open_disk(e->pc, e->o.prefix_disk_dir, model_key,
                                              e->o.prefix_disk_bytes ? e->o.prefix_disk_bytes : (uint64_t)10 << 30);
    }
    if (!err) {
        e->rows = calloc((size_t)P, sizeof *e->rows);
        e->logits = malloc((size_t)P * (size_t)(e->o.draft_max + 1) * (size_t)e->vocab * sizeof *e->logits);
        e->b_seq = malloc((size_t)P * sizeof *e->b_seq);
        e->b_row = malloc((size_t)P * sizeof *e->b_row);
        e->b_ntok = malloc((size_t)P * sizeof *e->b_ntok);
        e->b_ids = malloc((size_t)e->o.step_tokens * sizeof *e->b_ids);
        e->b_want = malloc((size_t)e->o.step_tokens);
        e->b_emb = malloc((size_t)e->o.step_tokens * sizeof *e->b_emb);
        e->b_span = malloc((size_t)e->o.step_tokens * sizeof *e->b_span);
        e->b_prefill = malloc((size_t)P);
        e->ready = malloc((size_t)P * sizeof *e->ready);
        e->hidden = malloc(((size_t)e->o.step_tokens + (size_t)P * (size_t)(e->o.draft_max + 1)) *
                           (size_t)e->desc->hidden * sizeof *e->hidden);
        if (!e->rows || !e->logits || !e->b_seq || !e->b_row || !e->b_ntok || !e->b_ids || !e->b_want || !e->b_emb ||
            !e->b_span || !e->b_prefill || !e->ready || !e->hidden)
            err = tern_errf(TERN_ENOMEM, "out of memory for %d rows", P);
    }
    tern_draft_lessons_init(&e->lessons);
    if (!err && e->o.draft_max > 0) {
        err = tern_draft_prediction_new(P, m->tok, &e->sources[TERN_DRAFT_PREDICTION]);
        if (!err && e->o.draft_ngram)
            err = tern_draft_ngram_new(P, 1, 4, &e->sources[TERN_DRAFT_NGRAM]);
        tern_draft_source *dm = NULL;
        const tern_draft_target target = {m->lm, m->tok, e->kv};
        const tern_draft_loader ld = {load_drafter, release_drafter, e};
        if (!err && e->o.draft_model)
            err = tern_draft_open(e->o.draft_model, (tern_draft_head)e->o.draft_head, &target, &ld, P, e->o.ctx,
                                  e->pool, &dm);
        if (dm)
            e->sources[dm->kind] = dm;
    }
    int needs_hidden = 0;
    for (int k = 0; k < TERN_DRAFT_KINDS; k++)
        needs_hidden |= e->sources[k] && e->sources[k]->needs_hidden;
    for (int r = 0; !err && r < P; r++) {
        eng_row *w = &e->rows[r];
        w->seq = r;
        err = tern_chain_new(e->vocab, &w->chain);
        const int K = e->o.draft_max;
        w->lp = calloc((size_t)K + 1, sizeof *w->lp);
        w->draft = malloc(((size_t)K + 1) * sizeof *w->draft);
        w->chosen_toks = malloc(((size_t)K + 1) * sizeof *w->chosen_toks);
        if (needs_hidden)
            w->h = calloc((size_t)e->desc->hidden, sizeof *w->h);
        if (!err && (!w->lp || !w->draft || !w->chosen_toks || (needs_hidden && !w->h)))
            err = tern_errf(TERN_ENOMEM, "out of memory");
        if (!err && e->pc)
            err = tern_pc_cursor_new(e->pc, &w->cursor);
    }
    if (err) {
        engine_free(e);
        return err;
    }
    e->next_id = 1;
    e->seed_state = tern_now_ns() ^ (uint64_t)(uintptr_t)e;
    e->m.parallel = P;
    e->m.threads = tern_pool_size(e->pool);
    e->m.ctx = e->o.ctx;
    e->m.kv_budget_bytes = e->budget.total;
    e->m.prefix_cache_cap_bytes = e->pc ? pc_cap : 0;
    if (e->pc) {
        tern_prefix_cache_stats st;
        tern_prefix_cache_stats_get(e->pc, &st);
        e->m.prefix_block = e->o.prefix_block;
        e->m.prefix_block_bytes = st.block_bytes;
    }
    e->m.max_queue = e->o.max_queue;
    if (pthread_create(&e->thread, NULL, engine_thread_main, e) != 0) {
        engine_free(e);
        return tern_errf(TERN_ENOMEM, "cannot start the engine thread");
    }
    e->thread_started = 1;
    TLOG_INFO("engine: %d rows x %lld positions, KV budget %.1f MiB (%.1f MiB per full request), prefix cache %.1f MiB",
              P, (long long)e->o.ctx, mib(e->budget.total), mib(tern_kv_cost_bytes(&e->cost, e->o.ctx)),
              mib(e->m.prefix_cache_cap_bytes));
    *out = e;
    return NULL;
}

void tern_engine_destroy(tern_engine *e) {
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->thread_started)
        pthread_join(e->thread, NULL);
    engine_finish_all(e, TERN_FINISH_CANCELLED);
    engine_free(e);
}

tern_err *tern_engine_submit(tern_engine *e, const tern_request *r, tern_event_fn cb, void *user,
                             tern_stream **stream, uint64_t *id) {
    if (stream)
        *stream = NULL;
    if (id)
        *id = 0;
    if (!cb == !stream)
        return tern_errf(TERN_EINVAL, "submit: give either a callback or a stream pointer, not both or neither");
    eng_request *q;
    tern_err *err = request_build(e, r, &q); /* tokenizing happens here, on the caller's thread */
    if (err) {
        pthread_mutex_lock(&e->mu);
        e->m.requests_rejected++;
        pthread_mutex_unlock(&e->mu);
        return err;
    }
    q->t_submit = tern_now_s();
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->q_len >= e->o.max_queue) {
        int full = !e->stopping;
        int waiting = e->q_len;
        if (full)
            e->m.requests_overloaded++;
        pthread_mutex_unlock(&e->mu);
        request_free(q);
        return full ? tern_errf(TERN_EOVERLOAD, "the server is busy: %d requests are already waiting; retry later",
                                waiting)
                    : tern_errf(TERN_ECANCELLED, "the engine is shutting down");
    }
    q->id = e->next_id++;
    if (!r->sampling.has_seed)
        q->sp.seed = tern_splitmix64(&e->seed_state);
    q->sample_drafts = !r->sampling.has_seed && q->sp.s.temperature > 0;
    q->ch = channel_new(q->id, cb, user);
    tern_stream *s = q->ch && !cb ? stream_wrap(q->ch) : NULL;
    if (!q->ch || (!cb && !s)) {
        pthread_mutex_unlock(&e->mu);
        request_free(q);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (e->q_tail)
        e->q_tail->next = q;
    else
        e->q_head = q;
    e->q_tail = q;
    e->q_len++;
    e->m.requests_submitted++;
    if (id)
        *id = q->id;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (stream)
        *stream = s;
    return NULL;
}

int tern_engine_cancel(tern_engine *e, uint64_t id) {
    int found = 0;
    pthread_mutex_lock(&e->mu);
    for (eng_request *q = e->q_head; q && !found; q = q->next)
        if (q->id == id) {
            atomic_store(&q->ch->cancelled, 1);
            found = 1;
        }
    for (int r = 0; r < e->o.parallel && !found; r++)
        if (e->rows[r].req && e->rows[r].req->id == id) {
            atomic_store(&e->rows[r].req->ch->cancelled, 1);
            found = 1;
        }
    if (found)
        pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return found;
}

void tern_engine_metrics(tern_engine *e, tern_metrics *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->m;
    out->queue_depth = e->q_len;
    out->kv_bytes_in_use = e->budget.used;
    out->kv_bytes_peak = e->budget.peak;
    pthread_mutex_unlock(&e->mu);
}
