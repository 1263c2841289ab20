/* openai_chat.c — POST /v1/chat/completions: messages through the model's chat template, generation, and the
 * reply split by the model's reply parser (chat/tool_calls.h) into content, reasoning_content and tool_calls.
 * Streaming sends chat.completion.chunk frames: first the role, then content / reasoning / tool-call deltas, then a
 * chunk with finish_reason (and usage, unless stream_options.include_usage asks for OpenAI's separate usage chunk),
 * then "data: [DONE]". */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_prompt.h"
#include "chat/tool_calls.h"
#include "server/server_internal.h"

typedef struct chat_run {
    tern_server *srv;
    char id[64];
    long created;
    int streaming, include_usage;
    tern_reply_parser *parser;
    sbuf *out;      /* streaming: where the current callback writes */
    int role_sent;
    /* non-streaming accumulators */
    sbuf content, reasoning;
    json_t *tool_calls;
    json_t *lp;     /* logprob entries: all of them (non-streaming) or those not yet sent (streaming) */
    const char *finish;
    tern_usage usage;
} chat_run;

static void chat_free(void *ctx) {
    chat_run *c = ctx;
    if (!c)
        return;
    tern_reply_parser_free(c->parser);
    sbuf_free(&c->content);
    sbuf_free(&c->reasoning);
    json_decref(c->tool_calls);
    json_decref(c->lp);
    free(c);
}

/* ---- streaming frames ---------------------------------------------------------------------------- */

static void sse_data(sbuf *out, json_t *v) {
    if (!v) {
        out->oom = 1;
        return;
    }
    sbuf_adds(out, "data: ");
    sbuf_json(out, v);
    sbuf_adds(out, "\n\n");
    json_decref(v);
}

/* One chunk with `delta` (taken), the pending logprobs, and finish_reason (NULL while running). */
static void send_chunk(chat_run *c, json_t *delta, const char *finish) {
    json_t *lp = json_null();
    if (json_array_size(c->lp)) {
        lp = json_pack("{s:O}", "content", c->lp);
        json_array_clear(c->lp);
    }
    json_t *choice = json_pack("{s:i,s:o,s:o,s:s?}", "index", 0, "delta", delta, "logprobs", lp, "finish_reason",
                               finish);
    sse_data(c->out, json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", c->id, "object", "chat.completion.chunk", "created",
                               (json_int_t)c->created, "model", c->srv->model_id, "choices", choice));
}

static void send_role(chat_run *c) {
    if (c->role_sent)
        return;
    c->role_sent = 1;
    send_chunk(c, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), NULL);
}

static json_t *tool_call_json(chat_run *c, const tern_reply_part *p, int index, int with_index) {
    char id[64];
    srv_make_id(c->srv, "call_", id, sizeof id);
    json_t *v = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function", "name", p->name,
                          "arguments", p->arguments);
    if (v && with_index)
        json_object_set_new(v, "index", json_integer(index));
    return v;
}

/* ---- reply parts ---------------------------------------------------------------------------------- */

static TERN_MUST_CHECK tern_err *on_part(void *user, const tern_reply_part *p) {
    chat_run *c = user;
    if (c->streaming) {
        send_role(c);
        json_t *delta;
        if (p->kind == TERN_REPLY_TOOL_CALL)
            delta = json_pack("{s:[o]}", "tool_calls",
                              tool_call_json(c, p, (int)json_array_size(c->tool_calls), 1));
        else
            delta = json_pack("{s:o}", p->kind == TERN_REPLY_CONTENT ? "content" : "reasoning_content",
                              srv_json_string_lossy(p->text, p->len));
        if (p->kind == TERN_REPLY_TOOL_CALL)
            json_array_append_new(c->tool_calls, json_null()); /* counts the calls sent */
        send_chunk(c, delta, NULL);
        return c->out->oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    }
    int rc = 0;
    if (p->kind == TERN_REPLY_CONTENT)
        rc = sbuf_add(&c->content, p->text, p->len);
    else if (p->kind == TERN_REPLY_REASONING)
        rc = sbuf_add(&c->reasoning, p->text, p->len);
    else
        rc = json_array_append_new(c->tool_calls, tool_call_json(c, p, 0, 0));
    return rc ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
}

static TERN_MUST_CHECK tern_err *chat_token(void *ctx, const tern_event *ev, sbuf *out) {
    chat_run *c = ctx;
    c->out = out;
    if (c->streaming)
        send_role(c);
    if (ev->has_logprob) {
        json_t *e = srv_token_logprob_json(c->srv, ev);
        if (!e || json_array_append_new(c->lp, e))
            return tern_errf(TERN_ENOMEM, "out of memory");
    }
    return tern_reply_parser_push(c->parser, ev->text, ev->text_len, on_part, c);
}

static TERN_MUST_CHECK tern_err *chat_done(void *ctx, const tern_event *ev, sbuf *out) {
    chat_run *c = ctx;
    c->out = out;
    if (c->streaming)
        send_role(c);
    TERN_TRY(tern_reply_parser_push(c->parser, ev->text, ev->text_len, on_part, c));
    TERN_TRY(tern_reply_parser_finish(c->parser, on_part, c));
    c->usage = ev->usage;
    c->finish = ev->finish == TERN_FINISH_LENGTH ? "length"
                : tern_reply_parser_tool_calls(c->parser) ? "tool_calls"
                                                           : "stop";
    if (!c->streaming)
        return NULL;
    send_chunk(c, json_object(), c->finish);
    if (c->include_usage) {
        sse_data(out, json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", c->id, "object", "chat.completion.chunk",
                                "created", (json_int_t)c->created, "model", c->srv->model_id, "choices", "usage",
                                srv_usage_json(&c->usage)));
    } else {
        /* usage rides on the finish chunk: re-open it (the reference's behaviour; clients ignore the extra key) */
        const char *tail = "}\n\n";
        if (out->len > 3 && !strcmp(out->p + out->len - 3, tail)) {
            out->len -= 3;
            sbuf_adds(out, ",\"usage\":");
            json_t *u = srv_usage_json(&c->usage);
            sbuf_json(out, u);
            json_decref(u);
            sbuf_adds(out, tail);
        }
    }
    sbuf_adds(out, "data: [DONE]\n\n");
    return out->oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
}

static void chat_fail(void *ctx, int status, const char *message, sbuf *out) {
    (void)ctx;
    sse_data(out, srv_error_json(API_OPENAI, status, message));
    sbuf_adds(out, "data: [DONE]\n\n");
}

static const srv_gen_ops CHAT_OPS = {chat_token, chat_done, chat_fail, chat_free};

const srv_gen_ops *srv_chat_ops(void) { return &CHAT_OPS; }

void *srv_chat_run_new(tern_server *s, int streaming, int include_usage, int parse_tools) {
    chat_run *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = s;
    srv_make_id(s, "chatcmpl-", c->id, sizeof c->id);
    c->created = (long)time(NULL);
    c->streaming = streaming;
    c->include_usage = include_usage;
    c->tool_calls = json_array();
    c->lp = json_array();
    tern_err *err = tern_reply_parser_new(srv_dialect(s), parse_tools, &c->parser);
    if (err || !c->tool_calls || !c->lp) {
        tern_err_free(err);
        chat_free(c);
        return NULL;
    }
    return c;
}

json_t *srv_chat_response(void *run) {
    chat_run *c = run;
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    int has_calls = json_array_size(c->tool_calls) > 0;
    if (!msg)
        return NULL;
    if (has_calls && c->content.len == 0)
        json_object_set_new(msg, "content", json_null());
    else
        json_object_set_new(msg, "content", srv_json_string_lossy(c->content.p ? c->content.p : "", c->content.len));
    if (c->reasoning.len)
        json_object_set_new(msg, "reasoning_content", srv_json_string_lossy(c->reasoning.p, c->reasoning.len));
    if (has_calls)
        json_object_set(msg, "tool_calls", c->tool_calls);
    json_t *lp = json_array_size(c->lp) ? json_pack("{s:O}", "content", c->lp) : json_null();
    return json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:o,s:s?}],s:o}", "id", c->id, "object", "chat.completion",
                     "created", (json_int_t)c->created, "model", c->srv->model_id, "choices", "index", 0, "message",
                     msg, "logprobs", lp, "finish_reason", c->finish, "usage", srv_usage_json(&c->usage));
}

/* ---- the request ---------------------------------------------------------------------------------- */

tern_err *srv_resolve_tools(const json_t *body, json_t **tools_out, int *parse_tools, int *forced) {
    const json_t *tools = json_object_get(body, "tools");
    const json_t *choice = json_object_get(body, "tool_choice");
    const json_t *ptc = json_object_get(body, "parallel_tool_calls");
    *tools_out = NULL;
    *parse_tools = 0;
    *forced = 0;
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc))
        return tern_errf(TERN_EINVAL, "'parallel_tool_calls' must be true or false, got %s", tern_json_type_name(ptc));
    if (json_object_get(body, "functions") || json_object_get(body, "function_call"))
        return tern_errf(TERN_EUNSUPPORTED, "'functions' / 'function_call' are deprecated: use 'tools' and "
                                            "'tool_choice'");
    int have = json_is_array(tools) && json_array_size(tools) > 0;
    const char *mode = "auto";
    const char *named = NULL;
    if (choice && !json_is_null(choice)) {
        if (json_is_string(choice)) {
            mode = json_string_value(choice);
            if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required"))
                return tern_errf(TERN_EINVAL,
                                 "'tool_choice' must be \"none\", \"auto\", \"required\" or a function object, got "
                                 "\"%.64s\"",
                                 mode);
        } else if (json_is_object(choice)) {
            const json_t *fn = json_object_get(choice, "function");
            const json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            if (!json_is_string(name))
                return tern_errf(TERN_EINVAL, "'tool_choice.function.name' must be a string");
            named = json_string_value(name);
            mode = "named";
        } else {
            return tern_errf(TERN_EINVAL, "'tool_choice' must be a string or an object, got %s",
                             tern_json_type_name(choice));
        }
        if (!have && strcmp(mode, "none") && strcmp(mode, "auto"))
            return tern_errf(TERN_EINVAL, "'tool_choice' is \"%s\" but no 'tools' were given", mode);
    }
    if (!tools || json_is_null(tools) || !strcmp(mode, "none"))
        return NULL;
    if (!json_is_array(tools))
        return tern_errf(TERN_EINVAL, "'tools' must be an array of tools, got %s", tern_json_type_name(tools));
    if (named) {
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const json_t *fn = json_is_object(t) ? json_object_get(t, "function") : NULL;
            const json_t *nm = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            if (json_is_string(nm) && !strcmp(json_string_value(nm), named)) {
                *tools_out = json_pack("[O]", t);
                *parse_tools = *forced = 1;
                return *tools_out ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
            }
        }
        return tern_errf(TERN_EINVAL, "'tool_choice' names function '%.64s', which is not among 'tools'", named);
    }
    *tools_out = json_incref((json_t *)tools);
    *parse_tools = have;
    *forced = have && !strcmp(mode, "required");
    return NULL;
}

static TERN_MUST_CHECK tern_err *check_unsupported(const json_t *body) {
    const json_t *rf = json_object_get(body, "response_format");
    if (rf && !json_is_null(rf)) {
        const json_t *type = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(type))
            return tern_errf(TERN_EINVAL, "'response_format' must be an object with a \"type\"");
        const char *t = json_string_value(type);
        if (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema"))
            return tern_errf(TERN_EINVAL, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", "
                                          "got \"%.64s\"",
                             t);
    }
    const json_t *mod = json_object_get(body, "modalities");
    if (mod && !json_is_null(mod)) {
        size_t i;
        json_t *m;
        if (!json_is_array(mod))
            return tern_errf(TERN_EINVAL, "'modalities' must be an array of strings");
        json_array_foreach(mod, i, m) if (!json_is_string(m) || strcmp(json_string_value(m), "text")) return tern_errf(
            TERN_EUNSUPPORTED, "'modalities' may only contain \"text\" on this server");
    }
    if (json_object_get(body, "audio") && !json_is_null(json_object_get(body, "audio")))
        return tern_errf(TERN_EUNSUPPORTED, "audio output ('audio') is not supported");
    const json_t *agp = json_object_get(body, "add_generation_prompt");
    if (agp && !json_is_null(agp) && !json_is_boolean(agp))
        return tern_errf(TERN_EINVAL, "'add_generation_prompt' must be true or false, got %s", tern_json_type_name(agp));
    return NULL;
}

int srv_handle_chat(srv_req *r, json_t *body) {
    tern_server *s = r->srv;
    srv_params p;
    json_t *tools = NULL;
    int parse_tools = 0, forced = 0;
    tern_media_prompt mp = {0};
    tern_err *err = srv_params_parse(body, PARAMS_CHAT, s->info.vocab_size, &p);
    if (!err)
        err = check_unsupported(body);
    if (!err)
        err = srv_resolve_tools(body, &tools, &parse_tools, &forced);
    if (!err) { /* a forced tool call, else the response format's grammar (or llama.cpp's `grammar`) */
        char *call = NULL, *gbnf = NULL;
        err = forced ? srv_tool_call_grammar(s, tools, NULL, &call) : NULL;
        if (!err)
            err = srv_reply_grammar(body, call, &gbnf);
        srv_params_set_grammar(&p, gbnf, forced);
    }
    if (!err && !tools) /* no tools, or tool_choice "none": still check what was sent */
        err = tern_chat_validate_tools(json_object_get(body, "tools"));
    if (!err) {
        /* add_generation_prompt: top level (vLLM's place), else inside chat_template_kwargs, else true */
        const json_t *kwargs = json_object_get(body, "chat_template_kwargs");
        const json_t *agp = json_object_get(body, "add_generation_prompt");
        if (!json_is_boolean(agp))
            agp = json_is_object(kwargs) ? json_object_get(kwargs, "add_generation_prompt") : NULL;
        err = srv_chat_prompt_media(s, json_object_get(body, "messages"), tools, kwargs,
                                    json_is_boolean(agp) ? json_is_true(agp) : 1, &mp);
    }
    json_decref(tools);
    chat_run *c = NULL;
    if (!err && !(c = srv_chat_run_new(s, p.stream, p.include_usage, parse_tools)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (err) {
        tern_media_prompt_free(&mp);
        srv_params_free(&p);
        return srv_reply_err(r, err);
    }
    srv_gen *g;
    err = srv_gen_start_chat_media(r, s, &p, &mp, &CHAT_OPS, c, &g);
    if (err)
        return srv_reply_err(r, err);
    if (c->streaming)
        return srv_reply_stream(r, g);

    int k = srv_gen_run(g);
    int rc;
    if (k < 0) {
        rc = 0; /* MHD_NO: the client is gone, close the connection */
    } else if (k > 0) {
        rc = srv_reply_error(r, g->fail_status, "%s", g->fail_msg);
    } else {
        json_t *v = srv_chat_response(c);
        rc = v ? srv_reply_json(r, 200, v) : srv_reply_error(r, 503, "out of memory");
        json_decref(v);
    }
    srv_gen_free(g);
    return rc;
}
