/* request.c — turning a submitted tern_request into the engine's own copy: every field validated
 * (errors say which and why), the prompt tokenized, and the admission arithmetic done up front:
 * a prompt that can never fit is rejected here, max_tokens is clamped to what the context and
 * the KV budget hold, and the bytes to reserve at admission are fixed. */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/utf8.h"
#include "engine/engine_internal.h"

void request_free(eng_request *r) {
    if (!r)
        return;
    free(r->prompt);
    tern_pc_prefetch_free(r->prefetch);
    constraint_release(r->grammar);
    free(r->emb);
    free(r->emb_at);
    free(r->spans);
    free(r->keys);
    free(r->prediction);
    free(r->bias);
    free(r->stop_ids);
    for (int i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    free(r->stops);
    free(r->stop_lens);
    if (r->ch)
        channel_unref(r->ch);
    free(r);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static TERN_MUST_CHECK tern_err *take_prompt(tern_engine *e, const tern_request *r, eng_request *q) {
    int has_ids = r->prompt_ids != NULL || r->n_prompt_ids > 0, has_text = r->prompt_text != NULL;
    if (has_ids == has_text)
        return tern_errf(TERN_EINVAL, "a request needs exactly one prompt: token ids or text");
    if (has_text) {
        tern_tokens t = {0};
        tern_err *err = tern_tokenize(e->model->tok, r->prompt_text, r->prompt_text_len, r->add_special,
                                      r->parse_special, &t);
        if (err) {
            tern_tokens_free(&t);
            return tern_err_wrap(err, "prompt");
        }
        q->prompt = t.ids;
        q->n_prompt = (int64_t)t.n;
    } else {
        if (!r->prompt_ids)
            return tern_errf(TERN_EINVAL, "prompt: %zu token ids but no array", r->n_prompt_ids);
        if (r->n_prompt_ids > (size_t)INT32_MAX)
            return tern_errf(TERN_EINVAL, "prompt: %zu token ids is too many", r->n_prompt_ids);
        q->prompt = malloc((r->n_prompt_ids ? r->n_prompt_ids : 1) * sizeof *q->prompt);
        if (!q->prompt)
            return tern_errf(TERN_ENOMEM, "out of memory for a prompt of %zu tokens", r->n_prompt_ids);
        if (r->n_prompt_ids)
            memcpy(q->prompt, r->prompt_ids, r->n_prompt_ids * sizeof *q->prompt);
        q->n_prompt = (int64_t)r->n_prompt_ids;
        for (int64_t i = 0; i < q->n_prompt; i++)
            if (q->prompt[i] < 0 || q->prompt[i] >= e->vocab)
                return tern_errf(TERN_EINVAL, "prompt: token %lld is id %d, outside the vocabulary [0, %lld)",
                                 (long long)i, q->prompt[i], (long long)e->vocab);
    }
    if (q->n_prompt < 1)
        return tern_errf(TERN_EINVAL, "the prompt is empty (no tokens)");
    return NULL;
}

/* Image spans on a model that sees an image both ways: each position's span, and each span short enough for one
 * forward (the scheduler feeds a span whole). */
static TERN_MUST_CHECK tern_err *take_spans(tern_engine *e, const tern_request *r, eng_request *q) {
    for (int i = 0; e->desc->span_both_ways && i < r->n_embeds; i++) {
        const tern_prompt_embeds *s = &r->embeds[i];
        if (!s->image)
            continue;
        if (s->n > e->ring_extra)
            return tern_errf(TERN_EINVAL, "an image of %lld soft tokens: this model attends within an image both "
                             "ways, so one forward must hold it, and this engine's hold at most %d", (long long)s->n,
                             e->ring_extra);
        if (!q->spans) {
            if (!(q->spans = malloc((size_t)q->n_prompt * sizeof *q->spans)))
                return tern_errf(TERN_ENOMEM, "out of memory");
            for (int64_t t = 0; t < q->n_prompt; t++)
                q->spans[t] = (tern_tok_span){-1, -1};
        }
        for (int64_t k = 0; k < s->n; k++)
            q->spans[s->pos + k] = (tern_tok_span){s->pos, s->pos + s->n - 1};
    }
    return NULL;
}

/* Soft-token spans: copied, with each prompt position's row and the key ids the prefix cache sees. A soft
 * position's key id is negative (no token has it), drawn from its span's key and its place in the span, so two
 * different clips of the same length never share cached positions and the same clip again does. */
static TERN_MUST_CHECK tern_err *take_embeds(tern_engine *e, const tern_request *r, eng_request *q) {
    if (r->n_embeds == 0)
        return NULL;
    if (r->n_embeds < 0 || !r->embeds)
        return tern_errf(TERN_EINVAL, "embeds: %d spans but no array", r->n_embeds);
    if (r->prompt_text)
        return tern_errf(TERN_EINVAL, "embeds: soft-token spans need a prompt of token ids");
    int64_t total = 0, end = 0;
    for (int i = 0; i < r->n_embeds; i++) {
        const tern_prompt_embeds *s = &r->embeds[i];
        if (s->n < 1 || !s->rows || s->pos < end || s->pos > q->n_prompt || s->n > q->n_prompt - s->pos)
            return tern_errf(TERN_EINVAL,
                             "embeds[%d]: positions [%lld, %lld) must lie in the prompt (%lld tokens), after the "
                             "span before, with rows",
                             i, (long long)s->pos, (long long)(s->pos + s->n), (long long)q->n_prompt);
        end = s->pos + s->n;
        total += s->n;
    }
    const int64_t H = e->desc->hidden;
    q->emb = malloc((size_t)total * (size_t)H * sizeof *q->emb);
    q->emb_at = malloc((size_t)q->n_prompt * sizeof *q->emb_at);
    q->keys = malloc((size_t)q->n_prompt * sizeof *q->keys);
    if (!q->emb || !q->emb_at || !q->keys)
        return tern_errf(TERN_ENOMEM, "out of memory for %lld soft tokens", (long long)total);
    memcpy(q->keys, q->prompt, (size_t)q->n_prompt * sizeof *q->keys);
    for (int64_t t = 0; t < q->n_prompt; t++)
        q->emb_at[t] = -1;
    int64_t row = 0;
    for (int i = 0; i < r->n_embeds; i++) {
        const tern_prompt_embeds *s = &r->embeds[i];
        memcpy(q->emb + row * H, s->rows, (size_t)(s->n * H) * sizeof *q->emb);
        for (int64_t k = 0; k < s->n; k++) {
            q->emb_at[s->pos + k] = (int32_t)(row + k);
            q->keys[s->pos + k] = (int32_t)(0x80000000u | (uint32_t)tern_mix64(s->key ^ (uint64_t)k * 0x9e3779b97f4a7c15ull));
        }
        row += s->n;
    }
    q->n_emb = total;
    return take_spans(e, r, q);
}

static TERN_MUST_CHECK tern_err *take_sampling(tern_engine *e, const tern_request *r, eng_request *q) {
    const tern_sampling_params *s = &r->sampling;
    tern_chain_params *p = &q->sp;
    *p = tern_chain_defaults();
    p->s.temperature = s->temperature;
    p->s.top_k = s->top_k;
    p->s.top_p = s->top_p;
    p->s.min_p = s->min_p;
    p->pen.repeat = s->repetition_penalty;
    p->pen.presence = s->presence_penalty;
    p->pen.frequency = s->frequency_penalty;
    p->penalty_last_n = s->penalty_last_n;
    p->seed = s->seed;
    p->logprobs = r->logprobs || r->top_logprobs > 0;
    p->top_logprobs = r->top_logprobs;
    if (s->n_logit_bias < 0 || s->n_logit_bias > TERN_MAX_LOGIT_BIAS || (s->n_logit_bias && !s->logit_bias))
        return tern_errf(TERN_EINVAL, "logit_bias: %d entries (at most %d)", s->n_logit_bias, TERN_MAX_LOGIT_BIAS);
    if (s->n_logit_bias) {
        if (!(q->bias = malloc((size_t)s->n_logit_bias * sizeof *q->bias)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        for (int i = 0; i < s->n_logit_bias; i++) {
            q->bias[i].id = s->logit_bias[i].token;
            q->bias[i].value = s->logit_bias[i].bias;
        }
    }
    p->bias = q->bias;
    p->n_bias = s->n_logit_bias;
    return tern_chain_params_check(p, e->vocab);
}

static TERN_MUST_CHECK tern_err *take_stops(tern_engine *e, const tern_request *r, eng_request *q) {
    if (r->n_stop_ids < 0 || r->n_stop_ids > TERN_MAX_STOP_IDS || (r->n_stop_ids && !r->stop_ids))
        return tern_errf(TERN_EINVAL, "stop ids: %d given, at most %d", r->n_stop_ids, TERN_MAX_STOP_IDS);
    if (r->n_stop_ids) {
        if (!(q->stop_ids = malloc((size_t)r->n_stop_ids * sizeof *q->stop_ids)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        memcpy(q->stop_ids, r->stop_ids, (size_t)r->n_stop_ids * sizeof *q->stop_ids);
        q->n_stop_ids = r->n_stop_ids;
        for (int i = 0; i < r->n_stop_ids; i++)
            if (q->stop_ids[i] < 0 || q->stop_ids[i] >= e->vocab)
                return tern_errf(TERN_EINVAL, "stop id %d is outside the vocabulary [0, %lld)", q->stop_ids[i],
                                 (long long)e->vocab);
    }
    if (r->n_stop_strings < 0 || r->n_stop_strings > TERN_MAX_STOP_STRINGS || (r->n_stop_strings && !r->stop_strings))
        return tern_errf(TERN_EINVAL, "stop: %d strings given, at most %d", r->n_stop_strings, TERN_MAX_STOP_STRINGS);
    if (!r->n_stop_strings)
        return NULL;
    q->stops = calloc((size_t)r->n_stop_strings, sizeof *q->stops);
    q->stop_lens = calloc((size_t)r->n_stop_strings, sizeof *q->stop_lens);
    if (!q->stops || !q->stop_lens)
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (int i = 0; i < r->n_stop_strings; i++) {
        const char *s = r->stop_strings[i];
        size_t n = s ? strnlen(s, TERN_MAX_STOP_STRING_BYTES + 1) : 0;
        if (n == 0 || n > TERN_MAX_STOP_STRING_BYTES)
            return tern_errf(TERN_EINVAL, "stop string %d must have 1 to %d bytes", i, TERN_MAX_STOP_STRING_BYTES);
        if (!tern_utf8_valid(s, n, NULL))
            return tern_errf(TERN_EINVAL, "stop string %d is not valid UTF-8", i);
        if (!(q->stops[i] = strdup(s)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        q->stop_lens[i] = n;
        q->n_stops = i + 1;
    }
    return NULL;
}

/* The predicted output and the request's draft length. */
static TERN_MUST_CHECK tern_err *take_prediction(tern_engine *e, const tern_request *r, eng_request *q) {
    if (r->draft_max < 0)
        return tern_errf(TERN_EINVAL, "draft_max must be >= 0 (0 = the server's), got %d", r->draft_max);
    q->draft_max = r->draft_off || e->o.draft_max <= 0 ? 0 : r->draft_max > 0 && r->draft_max < e->o.draft_max
                                                              ? r->draft_max : e->o.draft_max;
    const int has_ids = r->prediction_ids != NULL || r->n_prediction_ids > 0, has_text = r->prediction_text != NULL;
    if (has_ids && has_text)
        return tern_errf(TERN_EINVAL, "prediction: give token ids or text, not both");
    if (has_text) {
        tern_tokens t = {0};
        tern_err *err = tern_tokenize(e->model->tok, r->prediction_text, r->prediction_text_len, 0, 0, &t);
        if (err) {
            tern_tokens_free(&t);
            return tern_err_wrap(err, "prediction");
        }
        q->prediction = t.ids;
        q->n_prediction = (int64_t)t.n;
    } else if (has_ids) {
        if (!r->prediction_ids || r->n_prediction_ids > (size_t)INT32_MAX)
            return tern_errf(TERN_EINVAL, "prediction: %zu token ids but no array", r->n_prediction_ids);
        if (!(q->prediction = malloc(r->n_prediction_ids * sizeof *q->prediction)))
            return tern_errf(TERN_ENOMEM, "out of memory for a prediction of %zu tokens", r->n_prediction_ids);
        memcpy(q->prediction, r->prediction_ids, r->n_prediction_ids * sizeof *q->prediction);
        q->n_prediction = (int64_t)r->n_prediction_ids;
        for (int64_t i = 0; i < q->n_prediction; i++)
            if (q->prediction[i] < 0 || q->prediction[i] >= e->vocab)
                return tern_errf(TERN_EINVAL, "prediction: token %lld is id %d, outside the vocabulary [0, %lld)",
                                 (long long)i, q->prediction[i], (long long)e->vocab);
    }
    if (q->n_prediction > e->o.ctx)
        return tern_errf(TERN_EINVAL, "the prediction has %lld tokens, more than the context holds (%lld)",
                         (long long)q->n_prediction, (long long)e->o.ctx);
    return NULL;
}

/* Rejects a prompt that can never run; clamps max_tokens; fixes the reservation. */
static TERN_MUST_CHECK tern_err *fit(tern_engine *e, const tern_request *r, eng_request *q) {
    const int64_t ctx = e->o.ctx, n = q->n_prompt;
    if (q->embed) { /* the prompt alone */
        if (n > ctx)
            return tern_errf(TERN_EINVAL, "the input has %lld tokens but a request may hold %lld; shorten it or raise "
                                          "--ctx",
                             (long long)n, (long long)ctx);
        q->reserve = tern_kv_cost_bytes(&e->cost, n);
        if (q->reserve > e->budget.total)
            return tern_errf(TERN_EINVAL, "the input has %lld tokens, which need %.1f MiB of KV cache, but the KV "
                                          "budget is %.1f MiB; shorten it or raise the budget",
                             (long long)n, mib(q->reserve), mib(e->budget.total));
        q->max_tokens = 0;
        return NULL;
    }
    if (r->max_tokens < 0)
        return tern_errf(TERN_EINVAL, "max_tokens must be >= 0 (0 = as many as fit), got %lld", (long long)r->max_tokens);
    if (n + 1 > ctx)
        return tern_errf(TERN_EINVAL,
                         "the prompt has %lld tokens but a request may hold %lld (prompt + at least one generated "
                         "token); shorten it or raise --ctx",
                         (long long)n, (long long)ctx);
    uint64_t need = tern_kv_cost_bytes(&e->cost, n + 1);
    if (need > e->budget.total)
        return tern_errf(TERN_EINVAL,
                         "the prompt has %lld tokens, which need %.1f MiB of KV cache, but the KV budget is %.1f MiB; "
                         "shorten it or raise the budget",
                         (long long)n, mib(need), mib(e->budget.total));
    int64_t positions = tern_kv_cost_max_positions(&e->cost, e->budget.total, ctx), room = positions - n;
    q->max_tokens = r->max_tokens == 0 || r->max_tokens > room ? room : r->max_tokens;
    q->reserve = tern_kv_cost_bytes(&e->cost, n + q->max_tokens);
    return NULL;
}

tern_err *request_build(tern_engine *e, const tern_request *r, eng_request **out) {
    *out = NULL;
    if (!r)
        return tern_errf(TERN_EINVAL, "no request");
    if (r->top_logprobs < 0 || r->top_logprobs > TERN_MAX_TOP_LOGPROBS)
        return tern_errf(TERN_EINVAL, "top_logprobs must be in [0, %d], got %d", TERN_MAX_TOP_LOGPROBS, r->top_logprobs);
    eng_request *q = calloc(1, sizeof *q);
    if (!q)
        return tern_errf(TERN_ENOMEM, "out of memory");
    q->ignore_eos = r->ignore_eos;
    q->render_special = r->render_special;
    q->embed = r->embed != 0;
    q->pooling = r->pooling;
    if (q->embed && (r->pooling < TERN_POOL_MEAN || r->pooling > TERN_POOL_CLS)) {
        request_free(q);
        return tern_errf(TERN_EINVAL, "pooling must be mean, last or cls, got %d", (int)r->pooling);
    }
    tern_err *err = take_prompt(e, r, q);
    if (!err)
        err = take_embeds(e, r, q);
    if (!err && q->embed) { /* nothing is generated: only the prompt and its soft tokens are read */
        q->sp = tern_chain_defaults();
        err = fit(e, r, q);
        if (err) {
            request_free(q);
            return err;
        }
        *out = q;
        return NULL;
    }
    if (!err && r->grammar)
        err = constraint_acquire(e, r->grammar, r->grammar_len, r->grammar_special, &q->grammar);
    if (!err)
        err = take_sampling(e, r, q);
    if (!err)
        err = take_stops(e, r, q);
    if (!err)
        err = take_prediction(e, r, q);
    if (!err)
        err = fit(e, r, q);
    if (!err && q->grammar && q->grammar->min_tokens > (uint64_t)q->max_tokens)
        err = tern_errf(TERN_EINVAL,
                        "the schema's or grammar's shortest reply takes at least %llu tokens, but this request can "
                        "generate at most %lld (max_tokens, the context and the KV budget)",
                        (unsigned long long)q->grammar->min_tokens, (long long)q->max_tokens);
    if (err) {
        request_free(q);
        return err;
    }
    /* The disk reads a prompt's cached prefix needs happen here, on the submitting thread, while the engine thread
     * goes on with its rows; the engine takes the blocks when the request starts. */
    if (e->pc)
        q->prefetch = tern_prefix_cache_prefetch(e->pc, q->keys ? q->keys : q->prompt, q->n_prompt - 1);
    *out = q;
    return NULL;
}
