/* gen_common.c — what the generation endpoints share: the chat prompt (template → tokens), the usage object,
 * and per-token logprob entries. */
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

/* 1 if some message's content has an audio or image part (the prompt then needs the towers' pool). */
static int has_media(const json_t *messages) {
    size_t i, j;
    json_t *m, *part;
    json_array_foreach(messages, i, m) {
        const json_t *c = json_is_object(m) ? json_object_get(m, "content") : NULL;
        if (json_is_array(c))
            json_array_foreach(c, j, part) {
                const char *t = json_is_object(part) ? json_string_value(json_object_get(part, "type")) : NULL;
                if (t && (!strcmp(t, "input_audio") || !strcmp(t, "audio_url") || !strcmp(t, "image_url")))
                    return 1;
            }
    }
    return 0;
}

/* A chat prompt with media: its towers' products run on the server's media pool (made the first time, by the thread
 * that runs this, whose priority its workers inherit). */
typedef struct media_job {
    tern_server *s;
    const json_t *messages, *tools, *kwargs;
    int add_generation_prompt;
    tern_media_prompt *mp;
    tern_err *err;
} media_job;

static void media_encode(media_job *j) {
    tern_server *s = j->s;
    j->err = s->media_pool ? NULL : tern_pool_create(s->info.threads > 0 ? s->info.threads : tern_cpu_count(),
                                                     &s->media_pool);
    tern_media_opts o = {.audio_windows = s->cfg.audio_windows, .pool = s->media_pool,
                         .fetch = s->cfg.fetch_image_url, .fetch_ctx = s->cfg.fetch_ctx};
    if (!j->err)
        j->err = tern_model_chat_prompt_media(s->model, j->messages, j->tools, j->kwargs, j->add_generation_prompt, &o,
                                              j->mp);
}

static void *media_thread(void *arg) {
    tern_thread_lower_priority(TERN_MEDIA_NICE);
    media_encode(arg);
    return NULL;
}

tern_err *srv_chat_prompt_media(tern_server *s, const json_t *messages, const json_t *tools, const json_t *kwargs,
                                int add_generation_prompt, tern_media_prompt *mp) {
    memset(mp, 0, sizeof *mp);
    if (!s->chat->tpl)
        return tern_errf(TERN_EUNSUPPORTED, "this model has no chat template: use /v1/completions with a raw prompt");
    const int media = (s->info.audio || s->info.vision) && json_is_array(messages) && has_media(messages);
    if (!media)
        return tern_model_chat_prompt_media(s->model, messages, tools, kwargs, add_generation_prompt, NULL, mp);
    /* One encode at a time, on a pool of its own and below the engine's priority (TERN_MEDIA_NICE): the towers'
     * products take the cores the decoding streams leave. Without a thread to spare it runs here, unlowered. */
    pthread_mutex_lock(&s->media_mu);
    media_job j = {s, messages, tools, kwargs, add_generation_prompt, mp, NULL};
    pthread_t t;
    if (pthread_create(&t, NULL, media_thread, &j) == 0)
        pthread_join(t, NULL);
    else
        media_encode(&j);
    pthread_mutex_unlock(&s->media_mu);
    return j.err;
}

json_t *srv_usage_json(const tern_usage *u) {
    return json_pack("{s:I,s:I,s:I,s:{s:I},s:{s:I,s:I,s:I}}", "prompt_tokens", (json_int_t)u->prompt_tokens,
                     "completion_tokens", (json_int_t)u->completion_tokens, "total_tokens",
                     (json_int_t)(u->prompt_tokens + u->completion_tokens), "prompt_tokens_details", "cached_tokens",
                     (json_int_t)u->cached_tokens, "completion_tokens_details", "reasoning_tokens", (json_int_t)0,
                     "accepted_prediction_tokens", (json_int_t)u->accepted_prediction_tokens,
                     "rejected_prediction_tokens", (json_int_t)u->rejected_prediction_tokens);
}

/* {token, logprob, bytes} for one id. */
static json_t *token_entry(tern_server *s, int32_t id, float lp) {
    size_t len = 0;
    char *piece = tern_model_token_piece(s->model, id, &len);
    json_t *bytes = json_array();
    for (size_t i = 0; piece && bytes && i < len; i++)
        json_array_append_new(bytes, json_integer((unsigned char)piece[i]));
    json_t *v = json_pack("{s:o,s:o,s:o}", "token", srv_json_string_lossy(piece ? piece : "", piece ? len : 0),
                          "logprob", srv_json_logprob(lp), "bytes", bytes);
    tern_free(piece);
    return v;
}

json_t *srv_token_logprob_json(tern_server *s, const tern_event *ev) {
    json_t *v = token_entry(s, ev->token, ev->logprob);
    json_t *top = json_array();
    for (int k = 0; top && k < ev->n_top; k++)
        json_array_append_new(top, token_entry(s, ev->top_ids[k], ev->top_logprobs[k]));
    if (!v || !top) {
        json_decref(v);
        json_decref(top);
        return NULL;
    }
    if (json_object_set_new(v, "top_logprobs", top)) { /* takes top even when it fails */
        json_decref(v);
        return NULL;
    }
    return v;
}

tern_err *srv_gen_start_chat_media(srv_req *r, tern_server *s, srv_params *p, tern_media_prompt *mp,
                                   const srv_gen_ops *ops, void *ctx, srv_gen **out) {
    p->req.prompt_ids = mp->ids;
    p->req.n_prompt_ids = mp->n;
    p->req.embeds = mp->spans;
    p->req.n_embeds = mp->n_spans;
    p->req.render_special = 1;
    int32_t stop_id = s->chat->tool_response_id; /* submit copies the stop ids */
    if (stop_id >= 0) {
        p->req.stop_ids = &stop_id;
        p->req.n_stop_ids = 1;
    }
    srv_req_begin_generation(r);
    tern_err *err = srv_gen_start(r, &p->req, p->stream, ops, ctx, out);
    tern_media_prompt_free(mp);
    srv_params_free(p);
    return err;
}
