/* info.c — the small GET endpoints: /health (/health/ready, /health/live), /v1/models, /v1/models/{id} and
 * /metrics. */
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

/* The generation and embedding endpoints this model answers (an extension, as vLLM's and LiteLLM's model cards
 * carry one): chat-based ones need a chat template, transcription an audio tower. */
static json_t *endpoints_json(tern_server *s) {
    json_t *a = json_array();
    int chat = s->chat && s->chat->tpl;
    const char *all[] = {chat ? "/v1/chat/completions" : NULL, "/v1/completions", chat ? "/v1/responses" : NULL,
                         "/v1/embeddings", chat ? "/v1/messages" : NULL,
                         s->info.audio ? "/v1/audio/transcriptions" : NULL};
    for (size_t i = 0; a && i < sizeof all / sizeof *all; i++)
        if (all[i])
            json_array_append_new(a, json_string(all[i]));
    return a;
}

static json_t *model_json(tern_server *s) {
    return json_pack("{s:s,s:s,s:I,s:s,s:o,s:{s:I,s:I,s:I}}", "id", s->model_id, "object", "model", "created",
                     (json_int_t)s->created, "owned_by", "tern", "endpoints", endpoints_json(s), "meta", "n_ctx",
                     (json_int_t)s->ctx, "n_vocab", (json_int_t)s->info.vocab_size, "n_ctx_train",
                     (json_int_t)s->info.ctx_train);
}

int srv_handle_models(srv_req *r, json_t *body) {
    (void)body;
    json_t *v = json_pack("{s:s,s:[o]}", "object", "list", "data", model_json(r->srv));
    int rc = srv_reply_json(r, 200, v);
    json_decref(v);
    return rc;
}

int srv_handle_model(srv_req *r, json_t *body) {
    (void)body;
    const char *id = r->url + strlen("/v1/models/");
    if (strcmp(id, r->srv->model_id))
        return srv_reply_error(r, 404, "model '%.200s' not found: this server serves '%s'", id, r->srv->model_id);
    json_t *v = model_json(r->srv);
    int rc = srv_reply_json(r, 200, v);
    json_decref(v);
    return rc;
}

int srv_handle_health(srv_req *r, json_t *body) {
    (void)body;
    tern_server *s = r->srv;
    tern_metrics m;
    int up = 0;
    pthread_rwlock_rdlock(&s->engine_lock);
    if (s->engine && !atomic_load(&s->draining)) {
        tern_engine_metrics(s->engine, &m);
        up = 1;
    }
    pthread_rwlock_unlock(&s->engine_lock);
    json_t *v = up ? json_pack("{s:s,s:s,s:s,s:i,s:i,s:i}", "status", "ok", "version", tern_version(), "model",
                               s->model_id, "queue_depth", m.queue_depth, "active_rows", m.active_rows, "parallel",
                               m.parallel)
                   : json_pack("{s:s,s:s,s:i}", "status", "draining", "version", tern_version(), "inflight",
                               atomic_load(&s->inflight));
    int rc = srv_reply_json(r, up ? 200 : 503, v);
    json_decref(v);
    return rc;
}

int srv_handle_live(srv_req *r, json_t *body) {
    (void)body;
    json_t *v = json_pack("{s:s,s:s}", "status", "alive", "version", tern_version());
    int rc = srv_reply_json(r, 200, v);
    json_decref(v);
    return rc;
}

int srv_handle_metrics(srv_req *r, json_t *body) {
    (void)body;
    tern_server *s = r->srv;
    size_t len = 0;
    pthread_rwlock_rdlock(&s->engine_lock);
    char *text = srv_metrics_render(&s->metrics, s->engine, &len);
    pthread_rwlock_unlock(&s->engine_lock);
    if (!text)
        return srv_reply_error(r, 503, "out of memory rendering the metrics");
    int rc = srv_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
    return rc;
}
