/* openai_completions.c — POST /v1/completions: a raw prompt (text, or token ids) without any template, the
 * legacy logprobs format (tokens, token_logprobs, top_logprobs, text_offset), echo, and text_completion chunks
 * when streaming. Special-token text in a text prompt ("<|turn>") becomes the special token, and the tokenizer's
 * BOS is added unless the prompt already starts with it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server_internal.h"

typedef struct cmpl_run {
    tern_server *srv;
    char id[64];
    long created;
    int streaming, include_usage, logprobs;
    sbuf text;       /* non-streaming: the whole text (echo first) */
    json_t *tokens, *token_lps, *tops, *offsets; /* legacy logprobs, pending (streaming) or all */
    size_t offset;   /* bytes of text so far, for text_offset */
    const char *finish;
    tern_usage usage;
} cmpl_run;

static void cmpl_free(void *ctx) {
    cmpl_run *c = ctx;
    if (!c)
        return;
    sbuf_free(&c->text);
    json_decref(c->tokens);
    json_decref(c->token_lps);
    json_decref(c->tops);
    json_decref(c->offsets);
    free(c);
}

static json_t *take_logprobs(cmpl_run *c) {
    if (!c->logprobs)
        return json_null();
    json_t *v = json_pack("{s:O,s:O,s:O,s:O}", "tokens", c->tokens, "token_logprobs", c->token_lps, "top_logprobs",
                          c->tops, "text_offset", c->offsets);
    if (c->streaming) {
        json_array_clear(c->tokens);
        json_array_clear(c->token_lps);
        json_array_clear(c->tops);
        json_array_clear(c->offsets);
    }
    return v ? v : json_null();
}

static void send_chunk(cmpl_run *c, sbuf *out, const char *text, size_t len, const char *finish, int usage) {
    json_t *choice = json_pack("{s:o,s:i,s:o,s:s?}", "text", srv_json_string_lossy(text, len), "index", 0, "logprobs",
                               take_logprobs(c), "finish_reason", finish);
    json_t *v = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", c->id, "object", "text_completion", "created",
                          (json_int_t)c->created, "model", c->srv->model_id, "choices", choice);
    if (v && usage)
        json_object_set_new(v, "usage", srv_usage_json(&c->usage));
    if (!v) {
        out->oom = 1;
        return;
    }
    sbuf_adds(out, "data: ");
    sbuf_json(out, v);
    sbuf_adds(out, "\n\n");
    json_decref(v);
}

static TERN_MUST_CHECK tern_err *cmpl_token(void *ctx, const tern_event *ev, sbuf *out) {
    cmpl_run *c = ctx;
    if (c->logprobs) {
        size_t len = 0;
        char *piece = tern_model_token_piece(c->srv->model, ev->token, &len);
        json_t *top = json_object();
        for (int k = 0; top && k < ev->n_top; k++) {
            size_t tl = 0;
            char *tp = tern_model_token_piece(c->srv->model, ev->top_ids[k], &tl);
            json_t *key = srv_json_string_lossy(tp ? tp : "", tp ? tl : 0);
            if (key && !json_object_get(top, json_string_value(key)))
                json_object_set_new(top, json_string_value(key), srv_json_logprob(ev->top_logprobs[k]));
            json_decref(key);
            tern_free(tp);
        }
        int bad = json_array_append_new(c->tokens, srv_json_string_lossy(piece ? piece : "", piece ? len : 0)) ||
                  json_array_append_new(c->token_lps, srv_json_logprob(ev->logprob)) ||
                  json_array_append_new(c->tops, top) ||
                  json_array_append_new(c->offsets, json_integer((json_int_t)c->offset));
        c->offset += len;
        tern_free(piece);
        if (bad)
            return tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (!c->streaming)
        return sbuf_add(&c->text, ev->text, ev->text_len) ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    if (ev->text_len || c->logprobs)
        send_chunk(c, out, ev->text, ev->text_len, NULL, 0);
    return out->oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
}

static TERN_MUST_CHECK tern_err *cmpl_done(void *ctx, const tern_event *ev, sbuf *out) {
    cmpl_run *c = ctx;
    c->usage = ev->usage;
    c->finish = ev->finish == TERN_FINISH_LENGTH ? "length" : "stop";
    if (!c->streaming)
        return sbuf_add(&c->text, ev->text, ev->text_len) ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    send_chunk(c, out, ev->text, ev->text_len, c->finish, !c->include_usage);
    if (c->include_usage) {
        json_t *v = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", c->id, "object", "text_completion", "created",
                              (json_int_t)c->created, "model", c->srv->model_id, "choices", "usage",
                              srv_usage_json(&c->usage));
        sbuf_adds(out, "data: ");
        sbuf_json(out, v);
        sbuf_adds(out, "\n\n");
        json_decref(v);
    }
    sbuf_adds(out, "data: [DONE]\n\n");
    return out->oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
}

static void cmpl_fail(void *ctx, int status, const char *message, sbuf *out) {
    (void)ctx;
    json_t *e = srv_error_json(API_OPENAI, status, message);
    sbuf_adds(out, "data: ");
    sbuf_json(out, e);
    sbuf_adds(out, "\n\ndata: [DONE]\n\n");
    json_decref(e);
}

static const srv_gen_ops CMPL_OPS = {cmpl_token, cmpl_done, cmpl_fail, cmpl_free};

/* The prompt: a string, one string in an array, token ids, or one array of token ids. */
static TERN_MUST_CHECK tern_err *read_prompt(tern_server *s, const json_t *body, int32_t **ids, size_t *n, char **echo_text) {
    const json_t *p = json_object_get(body, "prompt");
    *ids = NULL;
    *n = 0;
    *echo_text = NULL;
    if (!p || json_is_null(p))
        return tern_errf(TERN_EINVAL, "'prompt' is required (a string or an array of token ids)");
    if (json_is_array(p) && json_array_size(p) == 1 && (json_is_string(json_array_get(p, 0)) ||
                                                        json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        TERN_TRY(tern_model_prompt_ids(s->model, json_string_value(p), json_string_length(p), ids, n));
        if (!(*echo_text = strdup(json_string_value(p))))
            return tern_errf(TERN_ENOMEM, "out of memory");
        return NULL;
    }
    if (!json_is_array(p))
        return tern_errf(TERN_EINVAL, "'prompt' must be a string or an array of token ids, got %s",
                         tern_json_type_name(p));
    size_t len = json_array_size(p);
    if (len == 0)
        return tern_errf(TERN_EINVAL, "'prompt' is empty");
    if (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0)))
        return tern_errf(TERN_EINVAL, "'prompt' holds %zu prompts: this server takes one prompt per request", len);
    if (!(*ids = malloc(len * sizeof **ids)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) {
        const json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= s->info.vocab_size) {
            tern_free(*ids);
            *ids = NULL;
            return tern_errf(TERN_EINVAL, "'prompt[%zu]' must be a token id in [0, %lld)", i,
                             (long long)s->info.vocab_size);
        }
        (*ids)[i] = (int32_t)json_integer_value(t);
    }
    *n = len;
    size_t tl;
    return tern_model_detokenize(s->model, *ids, len, 0, echo_text, &tl);
}

int srv_handle_completions(srv_req *r, json_t *body) {
    tern_server *s = r->srv;
    srv_params p;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *echo_text = NULL;
    int echo = 0;
    tern_err *err = srv_params_parse(body, PARAMS_COMPLETIONS, s->info.vocab_size, &p);
    if (!err) { /* llama.cpp's `grammar` (and a JSON response_format) constrain a raw completion too */
        char *gbnf = NULL;
        err = srv_response_grammar(body, &gbnf);
        srv_params_set_grammar(&p, gbnf, 0);
    }
    const json_t *ev = json_object_get(body, "echo");
    const json_t *suffix = json_object_get(body, "suffix");
    if (!err && ev && !json_is_null(ev)) {
        if (!json_is_boolean(ev))
            err = tern_errf(TERN_EINVAL, "'echo' must be true or false, got %s", tern_json_type_name(ev));
        echo = json_is_true(ev);
        if (!err && echo && p.req.logprobs)
            err = tern_errf(TERN_EUNSUPPORTED, "'echo' together with 'logprobs' is not supported (no prompt logprobs)");
    }
    if (!err && suffix && !json_is_null(suffix) && !(json_is_string(suffix) && json_string_length(suffix) == 0))
        err = tern_errf(TERN_EUNSUPPORTED, "'suffix' (fill-in-the-middle) is not supported");
    if (!err)
        err = read_prompt(s, body, &ids, &n_ids, &echo_text);
    cmpl_run *c = NULL;
    if (!err && !(c = calloc(1, sizeof *c)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err) {
        c->srv = s;
        srv_make_id(s, "cmpl-", c->id, sizeof c->id);
        c->created = (long)time(NULL);
        c->streaming = p.stream;
        c->include_usage = p.include_usage;
        c->logprobs = p.req.logprobs;
        c->tokens = json_array();
        c->token_lps = json_array();
        c->tops = json_array();
        c->offsets = json_array();
        if (!c->tokens || !c->token_lps || !c->tops || !c->offsets)
            err = tern_errf(TERN_ENOMEM, "out of memory");
        if (!err && echo && !c->streaming && sbuf_adds(&c->text, echo_text))
            err = tern_errf(TERN_ENOMEM, "out of memory");
        if (err) {
            cmpl_free(c);
            c = NULL;
        }
    }
    if (err) {
        tern_free(ids);
        tern_free(echo_text);
        srv_params_free(&p);
        return srv_reply_err(r, err);
    }
    p.req.prompt_ids = ids;
    p.req.n_prompt_ids = n_ids;
    srv_req_begin_generation(r);
    srv_gen *g;
    err = srv_gen_start(r, &p.req, p.stream, &CMPL_OPS, c, &g);
    tern_free(ids);
    srv_params_free(&p);
    if (err) {
        tern_free(echo_text);
        return srv_reply_err(r, err);
    }
    if (c->streaming) {
        if (echo && echo_text && *echo_text)
            send_chunk(c, &g->out, echo_text, strlen(echo_text), NULL, 0);
        tern_free(echo_text);
        return srv_reply_stream(r, g);
    }
    tern_free(echo_text);
    int k = srv_gen_run(g);
    int rc;
    if (k < 0)
        rc = 0;
    else if (k > 0)
        rc = srv_reply_error(r, g->fail_status, "%s", g->fail_msg);
    else {
        json_t *v = json_pack("{s:s,s:s,s:I,s:s,s:[{s:o,s:i,s:o,s:s}],s:o}", "id", c->id, "object",
                              "text_completion", "created", (json_int_t)c->created, "model", s->model_id, "choices",
                              "text", srv_json_string_lossy(c->text.p ? c->text.p : "", c->text.len), "index", 0,
                              "logprobs", take_logprobs(c), "finish_reason", c->finish, "usage",
                              srv_usage_json(&c->usage));
        rc = v ? srv_reply_json(r, 200, v) : srv_reply_error(r, 503, "out of memory");
        json_decref(v);
    }
    srv_gen_free(g);
    return rc;
}
