/* anthropic.c — POST /v1/messages (Anthropic Messages) and /v1/messages/count_tokens. The request is mapped onto
 * OpenAI-style messages (chat_prompt.c) and rendered by the model's own template; the reply comes back as
 * content blocks (text, thinking, tool_use). Streaming follows Anthropic's event grammar:
 *   message_start, ping, then per block content_block_start / content_block_delta... / content_block_stop,
 *   then message_delta (stop_reason, usage) and message_stop; a failure mid-stream is an "error" event. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "chat/tool_calls.h"
#include "server/server_internal.h"

typedef struct msg_run {
    tern_server *srv;
    char id[64];
    int streaming;
    tern_reply_parser *parser;
    sbuf *out;
    int block_open;      /* streaming: a text or thinking block is open */
    tern_reply_kind block_kind;
    int n_blocks;        /* blocks started so far (the next block's index) */
    json_t *content;     /* non-streaming: the blocks */
    int64_t prompt_tokens;
    char *stops[TERN_MAX_STOP_STRINGS];
    int n_stops;
    const char *stop_reason;
    const char *stop_sequence;
    tern_usage usage;
} msg_run;

static void msg_free(void *ctx) {
    msg_run *c = ctx;
    if (!c)
        return;
    tern_reply_parser_free(c->parser);
    json_decref(c->content);
    for (int i = 0; i < c->n_stops; i++)
        free(c->stops[i]);
    free(c);
}

static void event(sbuf *out, const char *name, json_t *data) {
    if (!data) {
        out->oom = 1;
        return;
    }
    sbuf_printf(out, "event: %s\ndata: ", name);
    sbuf_json(out, data);
    sbuf_adds(out, "\n\n");
    json_decref(data);
}

static void close_block(msg_run *c) {
    if (!c->block_open)
        return;
    event(c->out, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", c->n_blocks - 1));
    c->block_open = 0;
}

static json_t *tool_use_block(msg_run *c, const tern_reply_part *p, int with_input) {
    char id[64];
    srv_make_id(c->srv, "toolu_", id, sizeof id);
    json_t *input = with_input ? json_loads(p->arguments, JSON_ALLOW_NUL, NULL) : json_object();
    return json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", id, "name", p->name, "input",
                     input ? input : json_object());
}

static TERN_MUST_CHECK tern_err *on_part(void *user, const tern_reply_part *p) {
    msg_run *c = user;
    if (!c->streaming) {
        json_t *last = json_array_size(c->content) ? json_array_get(c->content, json_array_size(c->content) - 1) : NULL;
        const char *type = last ? json_string_value(json_object_get(last, "type")) : "";
        if (p->kind == TERN_REPLY_TOOL_CALL)
            return json_array_append_new(c->content, tool_use_block(c, p, 1)) ? tern_errf(TERN_ENOMEM, "out of memory")
                                                                              : NULL;
        const char *want = p->kind == TERN_REPLY_CONTENT ? "text" : "thinking";
        json_t *piece = srv_json_string_lossy(p->text, p->len);
        if (!piece)
            return tern_errf(TERN_ENOMEM, "out of memory");
        if (last && !strcmp(type, want)) { /* extend the open block */
            json_t *old = json_object_get(last, want);
            size_t a = json_string_length(old), b = json_string_length(piece);
            char *joined = malloc(a + b + 1);
            if (!joined) {
                json_decref(piece);
                return tern_errf(TERN_ENOMEM, "out of memory");
            }
            memcpy(joined, json_string_value(old), a);
            memcpy(joined + a, json_string_value(piece), b);
            json_object_set_new(last, want, json_stringn(joined, a + b));
            free(joined);
            json_decref(piece);
            return NULL;
        }
        json_t *blk = p->kind == TERN_REPLY_CONTENT
                          ? json_pack("{s:s,s:o}", "type", "text", "text", piece)
                          : json_pack("{s:s,s:o,s:s}", "type", "thinking", "thinking", piece, "signature", "");
        return json_array_append_new(c->content, blk) ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    }
    if (p->kind == TERN_REPLY_TOOL_CALL) {
        close_block(c);
        int idx = c->n_blocks++;
        event(c->out, "content_block_start",
              json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", idx, "content_block",
                        tool_use_block(c, p, 0)));
        event(c->out, "content_block_delta",
              json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", idx, "delta", "type",
                        "input_json_delta", "partial_json", p->arguments));
        event(c->out, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", idx));
    } else {
        int text = p->kind == TERN_REPLY_CONTENT;
        if (c->block_open && c->block_kind != p->kind)
            close_block(c);
        if (!c->block_open) {
            int idx = c->n_blocks++;
            json_t *blk = text ? json_pack("{s:s,s:s}", "type", "text", "text", "")
                               : json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", "");
            event(c->out, "content_block_start",
                  json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", idx, "content_block", blk));
            c->block_open = 1;
            c->block_kind = p->kind;
        }
        event(c->out, "content_block_delta",
              json_pack("{s:s,s:i,s:{s:s,s:o}}", "type", "content_block_delta", "index", c->n_blocks - 1, "delta",
                        "type", text ? "text_delta" : "thinking_delta", text ? "text" : "thinking",
                        srv_json_string_lossy(p->text, p->len)));
    }
    return c->out->oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
}

static TERN_MUST_CHECK tern_err *msg_token(void *ctx, const tern_event *ev, sbuf *out) {
    msg_run *c = ctx;
    c->out = out;
    return tern_reply_parser_push(c->parser, ev->text, ev->text_len, on_part, c);
}

static json_t *usage_json(const msg_run *c, int with_input) {
    json_t *u = json_pack("{s:I}", "output_tokens", (json_int_t)c->usage.completion_tokens);
    if (u && with_input) {
        json_object_set_new(u, "input_tokens", json_integer(c->usage.prompt_tokens - c->usage.cached_tokens));
        json_object_set_new(u, "cache_read_input_tokens", json_integer(c->usage.cached_tokens));
        json_object_set_new(u, "cache_creation_input_tokens", json_integer(0));
    }
    return u;
}

static TERN_MUST_CHECK tern_err *msg_done(void *ctx, const tern_event *ev, sbuf *out) {
    msg_run *c = ctx;
    c->out = out;
    TERN_TRY(tern_reply_parser_push(c->parser, ev->text, ev->text_len, on_part, c));
    TERN_TRY(tern_reply_parser_finish(c->parser, on_part, c));
    c->usage = ev->usage;
    c->stop_sequence = NULL;
    if (ev->finish == TERN_FINISH_LENGTH)
        c->stop_reason = "max_tokens";
    else if (ev->stop_string >= 0 && ev->stop_string < c->n_stops) {
        c->stop_reason = "stop_sequence";
        c->stop_sequence = c->stops[ev->stop_string];
    } else if (tern_reply_parser_tool_calls(c->parser))
        c->stop_reason = "tool_use";
    else
        c->stop_reason = "end_turn";
    if (!c->streaming)
        return NULL;
    close_block(c);
    event(out, "message_delta", json_pack("{s:s,s:{s:s,s:s?},s:o}", "type", "message_delta", "delta", "stop_reason",
                                          c->stop_reason, "stop_sequence", c->stop_sequence, "usage",
                                          usage_json(c, 1)));
    event(out, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    return out->oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
}

static void msg_fail(void *ctx, int status, const char *message, sbuf *out) {
    (void)ctx;
    event(out, "error", srv_error_json(API_ANTHROPIC, status, message));
}

static const srv_gen_ops MSG_OPS = {msg_token, msg_done, msg_fail, msg_free};

const srv_gen_ops *srv_messages_ops(void) { return &MSG_OPS; }

void *srv_messages_run_new(tern_server *s, int streaming, int parse_tools, int64_t prompt_tokens,
                           char *const *stops, int n_stops) {
    msg_run *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = s;
    srv_make_id(s, "msg_", c->id, sizeof c->id);
    c->streaming = streaming;
    c->prompt_tokens = prompt_tokens;
    c->content = json_array();
    for (int i = 0; i < n_stops && i < TERN_MAX_STOP_STRINGS; i++)
        if ((c->stops[i] = strdup(stops[i])))
            c->n_stops++;
    tern_err *err = tern_reply_parser_new(srv_dialect(s), parse_tools, &c->parser);
    if (err || !c->content || c->n_stops != n_stops) {
        tern_err_free(err);
        msg_free(c);
        return NULL;
    }
    return c;
}

void srv_messages_start(void *run, sbuf *out) {
    msg_run *c = run;
    event(out, "message_start",
          json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:{s:I,s:i}}}", "type", "message_start", "message", "id",
                    c->id, "type", "message", "role", "assistant", "model", c->srv->model_id, "content", "stop_reason",
                    "stop_sequence", "usage", "input_tokens", (json_int_t)c->prompt_tokens, "output_tokens", 0));
    event(out, "ping", json_pack("{s:s}", "type", "ping"));
}

json_t *srv_messages_response(void *run) {
    msg_run *c = run;
    return json_pack("{s:s,s:s,s:s,s:s,s:O,s:s?,s:s?,s:o}", "id", c->id, "type", "message", "role", "assistant",
                     "model", c->srv->model_id, "content", c->content, "stop_reason", c->stop_reason, "stop_sequence",
                     c->stop_sequence, "usage", usage_json(c, 1));
}

/* ---- the request ------------------------------------------------------------------------------- */

/* thinking → chat_template_kwargs.enable_thinking; tool_choice → which tools the model sees, and for "any" / "tool"
 * the grammar of the forced call (*gbnf, NULL otherwise). */
static TERN_MUST_CHECK tern_err *anthropic_options(const tern_server *s, const json_t *body, json_t **tools, json_t **kwargs,
                                   int *parse_tools, char **gbnf) {
    *gbnf = NULL;
    *kwargs = json_object();
    if (!*kwargs)
        return tern_errf(TERN_ENOMEM, "out of memory");
    const json_t *th = json_object_get(body, "thinking");
    if (th && !json_is_null(th)) {
        const json_t *type = json_is_object(th) ? json_object_get(th, "type") : NULL;
        const char *t = json_is_string(type) ? json_string_value(type) : NULL;
        if (!t || (strcmp(t, "enabled") && strcmp(t, "disabled")))
            return tern_errf(TERN_EINVAL, "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N} or "
                                          "{\"type\": \"disabled\"}");
        const json_t *bt = json_object_get(th, "budget_tokens");
        if (bt && !json_is_null(bt) && (!json_is_integer(bt) || json_integer_value(bt) < 1))
            return tern_errf(TERN_EINVAL, "'thinking.budget_tokens' must be a positive integer");
        json_object_set_new(*kwargs, "enable_thinking", json_boolean(!strcmp(t, "enabled")));
    }
    *parse_tools = json_array_size(*tools) > 0;
    const json_t *tc = json_object_get(body, "tool_choice");
    if (!tc || json_is_null(tc))
        return NULL;
    const json_t *type = json_is_object(tc) ? json_object_get(tc, "type") : NULL;
    const char *t = json_is_string(type) ? json_string_value(type) : NULL;
    if (!t || (strcmp(t, "auto") && strcmp(t, "any") && strcmp(t, "tool") && strcmp(t, "none")))
        return tern_errf(TERN_EINVAL, "'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\"");
    if (!strcmp(t, "none")) {
        json_decref(*tools);
        *tools = NULL;
        *parse_tools = 0;
        return NULL;
    }
    if (strcmp(t, "auto") && !*tools)
        return tern_errf(TERN_EINVAL, "'tool_choice' is \"%s\" but no 'tools' were given", t);
    if (!strcmp(t, "tool")) {
        const json_t *name = json_object_get(tc, "name");
        if (!json_is_string(name))
            return tern_errf(TERN_EINVAL, "'tool_choice.name' must be a string when the type is \"tool\"");
        size_t i;
        json_t *tool;
        json_array_foreach(*tools, i, tool) {
            const json_t *nm = json_object_get(json_object_get(tool, "function"), "name");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), json_string_value(name))) {
                json_t *only = json_pack("[O]", tool);
                json_decref(*tools);
                *tools = only;
                return only ? srv_tool_call_grammar(s, only, NULL, gbnf) : tern_errf(TERN_ENOMEM, "out of memory");
            }
        }
        return tern_errf(TERN_EINVAL, "'tool_choice' names tool '%.64s', which is not among 'tools'",
                         json_string_value(name));
    }
    return !strcmp(t, "any") ? srv_tool_call_grammar(s, *tools, NULL, gbnf) : NULL;
}

/* Messages + options → prompt ids. */
static TERN_MUST_CHECK tern_err *build_prompt(tern_server *s, const json_t *body, tern_media_prompt *mp, int *parse_tools,
                              char **gbnf) {
    json_t *msgs = NULL, *tools = NULL, *kwargs = NULL;
    *gbnf = NULL;
    memset(mp, 0, sizeof *mp);
    tern_err *err = tern_chat_from_anthropic(body, &msgs, &tools);
    if (!err)
        err = anthropic_options(s, body, &tools, &kwargs, parse_tools, gbnf);
    if (!err)
        err = srv_chat_prompt_media(s, msgs, tools, kwargs, 1, mp);
    json_decref(msgs);
    json_decref(tools);
    json_decref(kwargs);
    return err;
}

int srv_handle_count_tokens(srv_req *r, json_t *body) {
    tern_media_prompt mp;
    int parse_tools;
    char *gbnf = NULL;
    tern_err *err = build_prompt(r->srv, body, &mp, &parse_tools, &gbnf);
    const size_t n = mp.n;
    free(gbnf);
    tern_media_prompt_free(&mp);
    if (err)
        return srv_reply_err(r, err);
    json_t *v = json_pack("{s:I}", "input_tokens", (json_int_t)n);
    int rc = srv_reply_json(r, 200, v);
    json_decref(v);
    return rc;
}

int srv_handle_messages(srv_req *r, json_t *body) {
    tern_server *s = r->srv;
    srv_params p;
    tern_media_prompt mp = {0};
    int parse_tools = 0;
    tern_err *err = srv_params_parse(body, PARAMS_MESSAGES, s->info.vocab_size, &p);
    const json_t *md = json_object_get(body, "metadata");
    if (!err && md && !json_is_null(md) && !json_is_object(md))
        err = tern_errf(TERN_EINVAL, "'metadata' must be an object, got %s", tern_json_type_name(md));
    char *gbnf = NULL;
    if (!err)
        err = build_prompt(s, body, &mp, &parse_tools, &gbnf);
    /* llama.cpp's 'grammar' (and a JSON response_format) as in chat completions; as there, only a forced call's
     * grammar lets special tokens match their text */
    const int forced = gbnf != NULL;
    char *reply = NULL;
    if (!err)
        err = srv_reply_grammar(body, gbnf, &reply);
    else
        free(gbnf);
    srv_params_set_grammar(&p, reply, forced);
    msg_run *c = NULL;
    if (!err && !(c = srv_messages_run_new(s, p.stream, parse_tools, (int64_t)mp.n, p.stops, p.req.n_stop_strings)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (err) {
        tern_media_prompt_free(&mp);
        srv_params_free(&p);
        return srv_reply_err(r, err);
    }
    srv_gen *g;
    err = srv_gen_start_chat_media(r, s, &p, &mp, &MSG_OPS, c, &g);
    if (err)
        return srv_reply_err(r, err);
    if (c->streaming) {
        srv_messages_start(c, &g->out);
        return srv_reply_stream(r, g);
    }
    int k = srv_gen_run(g);
    int rc;
    if (k < 0)
        rc = 0;
    else if (k > 0)
        rc = srv_reply_error(r, g->fail_status, "%s", g->fail_msg);
    else {
        json_t *v = srv_messages_response(c);
        rc = v ? srv_reply_json(r, 200, v) : srv_reply_error(r, 503, "out of memory");
        json_decref(v);
    }
    srv_gen_free(g);
    return rc;
}
