/* openai_responses.c — OpenAI's Responses API on the chat path:
 *
 *   POST /v1/responses                  input items (chat_responses.c maps them onto chat messages), instructions,
 *                                       function tools, text.format through the grammar masks, reasoning.effort as
 *                                       the template's thinking switch; previous_response_id continues a stored
 *                                       conversation (its prompt prefix is then found in the KV prefix cache)
 *   GET /v1/responses/{id}              a stored response
 *   GET /v1/responses/{id}/input_items  its input items (order=asc|desc, limit, after)
 *   DELETE /v1/responses/{id}
 *
 * The reply is built as output items in both modes — a reasoning item for the thinking channel, a message item
 * for the answer, a function_call item per tool call, in the order the model wrote them — and a streaming reply
 * sends the Responses event sequence as each item opens, grows and closes (response.created, .in_progress,
 * .output_item.added, .content_part.added, .output_text.delta ..., .output_text.done, .content_part.done,
 * .output_item.done, ..., then .completed or .incomplete), every event numbered by sequence_number. A failure
 * mid-stream is an "error" event followed by response.failed. What the server cannot honour (hosted tools,
 * background mode, stored prompts, the Conversations API, truncation "auto") is a 400 naming the field. */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_prompt.h"
#include "chat/tool_calls.h"
#include "grammar/json_schema.h"
#include "server/server_internal.h"

typedef struct resp_run {
    tern_server *srv;
    int streaming;
    tern_reply_parser *parser;
    sbuf *out;             /* streaming: where the current callback writes */
    int64_t seq;           /* the next event's sequence_number */
    json_t *resp;          /* the response object, filled in as the reply comes */
    json_t *output;        /* borrowed: resp.output */
    int open;              /* output index of the open message or reasoning item, or -1 */
    tern_reply_kind open_kind;
    sbuf text;             /* the open item's text */
    sbuf all_text;         /* every message's text (output_text) */
    int64_t reasoning_tokens;
    int token_reasoned;    /* the current token released reasoning text */
    int store;
    json_t *input_items;   /* this request's input items, with ids */
    json_t *history;       /* the conversation before the reply, as chat messages (instructions not included) */
} resp_run;

static TERN_MUST_CHECK tern_err *oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

static void resp_free(void *ctx) {
    resp_run *c = ctx;
    if (!c)
        return;
    tern_reply_parser_free(c->parser);
    json_decref(c->resp);
    sbuf_free(&c->text);
    sbuf_free(&c->all_text);
    json_decref(c->input_items);
    json_decref(c->history);
    free(c);
}

/* ---- events ------------------------------------------------------------------------------------------------ */

/* Sends one event: {type, sequence_number, ...data} (data taken); nothing when not streaming. */
static void emit(resp_run *c, const char *type, json_t *data) {
    if (!c->streaming) {
        json_decref(data);
        return;
    }
    json_t *ev = json_pack("{s:s,s:I}", "type", type, "sequence_number", (json_int_t)c->seq++);
    if (!ev || !data || json_object_update(ev, data)) {
        c->out->oom = 1;
    } else {
        sbuf_printf(c->out, "event: %s\ndata: ", type);
        sbuf_json(c->out, ev);
        sbuf_adds(c->out, "\n\n");
    }
    json_decref(ev);
    json_decref(data);
}

static const char *item_id(resp_run *c, int index) {
    return json_string_value(json_object_get(json_array_get(c->output, (size_t)index), "id"));
}

static json_t *copy_of(resp_run *c, int index) { return json_deep_copy(json_array_get(c->output, (size_t)index)); }

static TERN_MUST_CHECK tern_err *open_item(resp_run *c, tern_reply_kind kind) {
    char id[64];
    int msg = kind == TERN_REPLY_CONTENT;
    srv_make_id(c->srv, msg ? "msg_" : "rs_", id, sizeof id);
    json_t *item = msg ? json_pack("{s:s,s:s,s:s,s:s,s:[]}", "id", id, "type", "message", "status", "in_progress",
                                   "role", "assistant", "content")
                       : json_pack("{s:s,s:s,s:[],s:[]}", "id", id, "type", "reasoning", "summary", "content");
    if (!item || json_array_append_new(c->output, item))
        return oom();
    c->open = (int)json_array_size(c->output) - 1;
    c->open_kind = kind;
    sbuf_clear(&c->text);
    emit(c, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", c->open, "item", copy_of(c, c->open)));
    json_t *part = msg ? json_pack("{s:s,s:s,s:[],s:[]}", "type", "output_text", "text", "", "annotations", "logprobs")
                       : json_pack("{s:s,s:s}", "type", "reasoning_text", "text", "");
    emit(c, "response.content_part.added",
         json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", c->open, "content_index", 0, "part", part));
    return NULL;
}

static TERN_MUST_CHECK tern_err *close_item(resp_run *c) {
    if (c->open < 0)
        return NULL;
    int idx = c->open, msg = c->open_kind == TERN_REPLY_CONTENT;
    c->open = -1;
    json_t *item = json_array_get(c->output, (size_t)idx);
    const char *id = item_id(c, idx);
    json_t *text = srv_json_string_lossy(c->text.p ? c->text.p : "", c->text.len);
    json_t *part = !text ? NULL
                   : msg ? json_pack("{s:s,s:O,s:[],s:[]}", "type", "output_text", "text", text, "annotations",
                                     "logprobs")
                         : json_pack("{s:s,s:O}", "type", "reasoning_text", "text", text);
    if (!part || json_array_append(json_object_get(item, "content"), part) ||
        (msg && (json_object_set_new(item, "status", json_string("completed")) ||
                 sbuf_add(&c->all_text, c->text.p ? c->text.p : "", c->text.len)))) {
        json_decref(text);
        json_decref(part);
        return oom();
    }
    if (msg)
        emit(c, "response.output_text.done",
             json_pack("{s:s,s:i,s:i,s:O,s:[]}", "item_id", id, "output_index", idx, "content_index", 0, "text", text,
                       "logprobs"));
    else
        emit(c, "response.reasoning_text.done",
             json_pack("{s:s,s:i,s:i,s:O}", "item_id", id, "output_index", idx, "content_index", 0, "text", text));
    emit(c, "response.content_part.done",
         json_pack("{s:s,s:i,s:i,s:O}", "item_id", id, "output_index", idx, "content_index", 0, "part", part));
    emit(c, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", idx, "item", copy_of(c, idx)));
    json_decref(text);
    json_decref(part);
    return NULL;
}

static TERN_MUST_CHECK tern_err *function_call(resp_run *c, const tern_reply_part *p) {
    TERN_TRY(close_item(c));
    char id[64], call_id[64];
    srv_make_id(c->srv, "fc_", id, sizeof id);
    srv_make_id(c->srv, "call_", call_id, sizeof call_id);
    json_t *item = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", id, "type", "function_call", "status", "in_progress",
                             "call_id", call_id, "name", p->name, "arguments", "");
    if (!item || json_array_append_new(c->output, item))
        return oom();
    int idx = (int)json_array_size(c->output) - 1;
    emit(c, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", idx, "item", copy_of(c, idx)));
    emit(c, "response.function_call_arguments.delta",
         json_pack("{s:s,s:i,s:s}", "item_id", id, "output_index", idx, "delta", p->arguments));
    emit(c, "response.function_call_arguments.done",
         json_pack("{s:s,s:i,s:s,s:s}", "item_id", id, "output_index", idx, "name", p->name, "arguments",
                   p->arguments));
    if (json_object_set_new(item, "arguments", json_string(p->arguments)) ||
        json_object_set_new(item, "status", json_string("completed")))
        return oom();
    emit(c, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", idx, "item", copy_of(c, idx)));
    return NULL;
}

static TERN_MUST_CHECK tern_err *on_part(void *user, const tern_reply_part *p) {
    resp_run *c = user;
    if (p->kind == TERN_REPLY_TOOL_CALL)
        return function_call(c, p);
    if (p->kind == TERN_REPLY_REASONING)
        c->token_reasoned = 1;
    if (c->open >= 0 && c->open_kind != p->kind)
        TERN_TRY(close_item(c));
    if (c->open < 0)
        TERN_TRY(open_item(c, p->kind));
    if (sbuf_add(&c->text, p->text, p->len))
        return oom();
    json_t *delta = srv_json_string_lossy(p->text, p->len);
    if (p->kind == TERN_REPLY_CONTENT)
        emit(c, "response.output_text.delta",
             json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", item_id(c, c->open), "output_index", c->open,
                       "content_index", 0, "delta", delta, "logprobs"));
    else
        emit(c, "response.reasoning_text.delta",
             json_pack("{s:s,s:i,s:i,s:o}", "item_id", item_id(c, c->open), "output_index", c->open, "content_index",
                       0, "delta", delta));
    return c->streaming && c->out->oom ? oom() : NULL;
}

/* ---- the run's ops ---------------------------------------------------------------------------------------- */

static TERN_MUST_CHECK tern_err *resp_token(void *ctx, const tern_event *ev, sbuf *out) {
    resp_run *c = ctx;
    c->out = out;
    c->token_reasoned = 0;
    TERN_TRY(tern_reply_parser_push(c->parser, ev->text, ev->text_len, on_part, c));
    c->reasoning_tokens += c->token_reasoned;
    return NULL;
}

/* The reply as the chat assistant message that continues the conversation: its text and its calls. */
static json_t *assistant_message(resp_run *c) {
    json_t *calls = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(c->output, i, it) {
        if (strcmp(json_string_value(json_object_get(it, "type")), "function_call"))
            continue;
        json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", json_object_get(it, "call_id"), "type",
                                               "function", "function", "name", json_object_get(it, "name"),
                                               "arguments", json_object_get(it, "arguments")));
    }
    json_t *text = srv_json_string_lossy(c->all_text.p ? c->all_text.p : "", c->all_text.len);
    json_t *m = calls && text ? json_pack("{s:s,s:o}", "role", "assistant", "content",
                                          json_array_size(calls) && !c->all_text.len ? json_null() : json_incref(text))
                              : NULL;
    if (m && json_array_size(calls))
        json_object_set(m, "tool_calls", calls);
    json_decref(calls);
    json_decref(text);
    return m;
}

static TERN_MUST_CHECK tern_err *resp_done(void *ctx, const tern_event *ev, sbuf *out) {
    resp_run *c = ctx;
    c->out = out;
    TERN_TRY(resp_token(c, ev, out));
    TERN_TRY(tern_reply_parser_finish(c->parser, on_part, c));
    TERN_TRY(close_item(c));
    const tern_usage *u = &ev->usage;
    int incomplete = ev->finish == TERN_FINISH_LENGTH;
    json_t *usage = json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", (json_int_t)u->prompt_tokens,
                              "input_tokens_details", "cached_tokens", (json_int_t)u->cached_tokens, "output_tokens",
                              (json_int_t)u->completion_tokens, "output_tokens_details", "reasoning_tokens",
                              (json_int_t)c->reasoning_tokens, "total_tokens",
                              (json_int_t)(u->prompt_tokens + u->completion_tokens));
    if (!usage || json_object_set_new(c->resp, "usage", usage) ||
        json_object_set_new(c->resp, "status", json_string(incomplete ? "incomplete" : "completed")) ||
        json_object_set_new(c->resp, "incomplete_details",
                            incomplete ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null()) ||
        json_object_set_new(c->resp, "output_text",
                            srv_json_string_lossy(c->all_text.p ? c->all_text.p : "", c->all_text.len)))
        return oom();
    if (c->store && srv_resp_store_enabled(c->srv->responses)) {
        json_t *msgs = json_deep_copy(c->history), *m = assistant_message(c);
        if (msgs && m && !json_array_append(msgs, m))
            srv_resp_store_put(c->srv->responses, json_string_value(json_object_get(c->resp, "id")), c->resp,
                               c->input_items, msgs);
        json_decref(msgs);
        json_decref(m);
    }
    emit(c, incomplete ? "response.incomplete" : "response.completed",
         json_pack("{s:o}", "response", json_deep_copy(c->resp)));
    return c->streaming && out->oom ? oom() : NULL;
}

static void resp_fail(void *ctx, int status, const char *message, sbuf *out) {
    resp_run *c = ctx;
    c->out = out;
    const char *code = status == 504 ? "timeout" : status == 503 ? "server_unavailable" : "server_error";
    emit(c, "error", json_pack("{s:s,s:s,s:n}", "code", code, "message", message, "param"));
    json_object_set_new(c->resp, "status", json_string("failed"));
    json_object_set_new(c->resp, "error", json_pack("{s:s,s:s}", "code", code, "message", message));
    emit(c, "response.failed", json_pack("{s:o}", "response", json_deep_copy(c->resp)));
}

static const srv_gen_ops RESP_OPS = {resp_token, resp_done, resp_fail, resp_free};

/* response.created and response.in_progress, the first events of a stream. */
static void resp_start(resp_run *c, sbuf *out) {
    c->out = out;
    emit(c, "response.created", json_pack("{s:o}", "response", json_deep_copy(c->resp)));
    emit(c, "response.in_progress", json_pack("{s:o}", "response", json_deep_copy(c->resp)));
}

/* ---- the request ----------------------------------------------------------------------------------------- */

/* What a request asks, in chat terms and for the reply. */
typedef struct resp_in {
    json_t *chat;        /* a chat.completions body: messages, tools, tool_choice, sampling, max_tokens, stream */
    json_t *kwargs;      /* chat_template_kwargs (borrowed from chat), or NULL */
    json_t *history;     /* previous conversation + this input (chat messages, no instructions) */
    json_t *input_items; /* this input as items with ids */
    json_t *resp;        /* the response object's request echo */
    char *gbnf;          /* text.format's grammar, or NULL */
    int store;
} resp_in;

static void resp_in_free(resp_in *in) {
    json_decref(in->chat);
    json_decref(in->history);
    json_decref(in->input_items);
    json_decref(in->resp);
    free(in->gbnf);
}

static int is_set(const json_t *v) { return v && !json_is_null(v); }

/* A field of type `want` (json_is_*), or absent / null. */
static TERN_MUST_CHECK tern_err *want_type(const json_t *body, const char *key, int (*is)(const json_t *), const char *what) {
    const json_t *v = json_object_get(body, key);
    if (is_set(v) && !is(v))
        return tern_errf(TERN_EINVAL, "'%s' must be %s, got %s", key, what, tern_json_type_name(v));
    return NULL;
}

static int is_string(const json_t *v) { return json_is_string(v); }
static int is_object(const json_t *v) { return json_is_object(v); }
static int is_array(const json_t *v) { return json_is_array(v); }
static int is_bool(const json_t *v) { return json_is_boolean(v); }

/* Fields of the API this server does not implement: a 400 naming them rather than a reply that ignored them. */
static TERN_MUST_CHECK tern_err *refuse_unsupported(const json_t *b) {
    if (json_is_true(json_object_get(b, "background")))
        return tern_errf(TERN_EUNSUPPORTED, "'background': true is not supported: this server answers within the "
                                            "request (use 'stream' for early output)");
    TERN_TRY(want_type(b, "background", is_bool, "true or false"));
    if (is_set(json_object_get(b, "conversation")))
        return tern_errf(TERN_EUNSUPPORTED, "'conversation' (the Conversations API) is not supported: continue a "
                                            "conversation with 'previous_response_id'");
    if (is_set(json_object_get(b, "prompt")))
        return tern_errf(TERN_EUNSUPPORTED, "'prompt' (stored prompt templates) is not supported: send 'input' and "
                                            "'instructions'");
    const json_t *tr = json_object_get(b, "truncation");
    if (is_set(tr) && (!json_is_string(tr) || strcmp(json_string_value(tr), "disabled")))
        return tern_errf(json_is_string(tr) && !strcmp(json_string_value(tr), "auto") ? TERN_EUNSUPPORTED : TERN_EINVAL,
                         "'truncation' must be \"disabled\" on this server (an input longer than the context is a "
                         "400)");
    if (is_set(json_object_get(b, "max_tool_calls")))
        return tern_errf(TERN_EUNSUPPORTED, "'max_tool_calls' is not supported: the model writes its calls in one turn");
    const json_t *tl = json_object_get(b, "top_logprobs");
    if (is_set(tl) && !(json_is_integer(tl) && json_integer_value(tl) == 0))
        return tern_errf(TERN_EUNSUPPORTED, "'top_logprobs' is not supported on /v1/responses (use "
                                            "/v1/chat/completions with 'logprobs')");
    const json_t *inc = json_object_get(b, "include");
    TERN_TRY(want_type(b, "include", is_array, "an array of strings"));
    size_t i;
    json_t *v;
    json_array_foreach(inc, i, v) {
        if (!json_is_string(v))
            return tern_errf(TERN_EINVAL, "'include[%zu]' must be a string", i);
        /* reasoning items always carry their text in the clear, so the encrypted copy has nothing to add */
        if (strcmp(json_string_value(v), "reasoning.encrypted_content"))
            return tern_errf(TERN_EUNSUPPORTED, "'include[%zu]': \"%.64s\" is not supported", i, json_string_value(v));
    }
    return NULL;
}

/* The input as items with ids, the way GET .../input_items lists them. */
static TERN_MUST_CHECK tern_err *input_items(tern_server *s, const json_t *input, json_t **out) {
    json_t *items = json_array();
    if (!items)
        return oom();
    json_t *one = NULL;
    if (json_is_string(input))
        input = one = json_pack("[{s:s,s:O}]", "role", "user", "content", input);
    size_t i;
    json_t *it;
    json_array_foreach(input, i, it) {
        json_t *c = json_deep_copy(it);
        if (!c || json_array_append_new(items, c))
            break;
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!type)
            json_object_set_new(c, "type", json_string(type = "message"));
        const json_t *content = json_object_get(c, "content");
        if (!strcmp(type, "message") && json_is_string(content)) {
            const char *role = json_string_value(json_object_get(c, "role"));
            json_object_set_new(c, "content",
                                json_pack("[{s:s,s:O}]", "type",
                                          role && !strcmp(role, "assistant") ? "output_text" : "input_text", "text",
                                          content));
        }
        if (!json_is_string(json_object_get(c, "id"))) {
            char id[64];
            srv_make_id(s, !strcmp(type, "message") ? "msg_" : !strcmp(type, "function_call") ? "fc_" : "item_", id,
                        sizeof id);
            json_object_set_new(c, "id", json_string(id));
        }
    }
    int whole = json_array_size(items) == json_array_size(input);
    json_decref(one);
    if (!whole) {
        json_decref(items);
        return oom();
    }
    *out = items;
    return NULL;
}

/* text.format → the reply's grammar; the echo is text {format}. */
static TERN_MUST_CHECK tern_err *text_format(const json_t *b, char **gbnf, json_t **echo) {
    *gbnf = NULL;
    *echo = NULL;
    TERN_TRY(want_type(b, "text", is_object, "an object {\"format\": ...}"));
    const json_t *fmt = json_object_get(json_object_get(b, "text"), "format");
    if (!is_set(fmt))
        return (*echo = json_pack("{s:{s:s}}", "format", "type", "text")) ? NULL : oom();
    const char *type = json_is_object(fmt) ? json_string_value(json_object_get(fmt, "type")) : NULL;
    if (!type)
        return tern_errf(TERN_EINVAL, "'text.format' must be an object with a \"type\": \"text\", \"json_object\" or "
                                      "\"json_schema\"");
    if (!strcmp(type, "json_object"))
        TERN_TRY(tern_json_object_gbnf(gbnf));
    else if (!strcmp(type, "json_schema")) {
        const json_t *name = json_object_get(fmt, "name"), *schema = json_object_get(fmt, "schema");
        const json_t *strict = json_object_get(fmt, "strict");
        if (!json_is_string(name) || json_string_length(name) == 0)
            return tern_errf(TERN_EINVAL, "'text.format.name' must be a non-empty string");
        if (is_set(strict) && !json_is_boolean(strict))
            return tern_errf(TERN_EINVAL, "'text.format.strict' must be true or false");
        if (!json_is_object(schema) && !json_is_boolean(schema))
            return tern_errf(TERN_EINVAL, "'text.format.schema' must be a JSON Schema object");
        TERN_TRY(tern_err_wrap(tern_json_schema_to_gbnf(schema, TERN_JSON_DIALECT_JSON, json_is_true(strict), gbnf),
                               "'text.format.schema'"));
    } else if (strcmp(type, "text")) {
        return tern_errf(TERN_EINVAL, "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", got "
                                      "\"%.64s\"",
                         type);
    }
    return (*echo = json_pack("{s:O}", "format", fmt)) ? NULL : oom();
}

/* tool_choice in chat terms: the strings as they are, {type: "function", name} as a named function. */
static TERN_MUST_CHECK tern_err *tool_choice(const json_t *b, json_t **out) {
    const json_t *tc = json_object_get(b, "tool_choice");
    *out = NULL;
    if (!is_set(tc) || json_is_string(tc))
        return (*out = json_incref((json_t *)tc)) || !tc ? NULL : oom();
    const char *type = json_is_object(tc) ? json_string_value(json_object_get(tc, "type")) : NULL;
    if (!type)
        return tern_errf(TERN_EINVAL, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                                      "\"function\", \"name\"}");
    if (strcmp(type, "function"))
        return tern_errf(TERN_EUNSUPPORTED, "'tool_choice.type' \"%.64s\" is not supported: name a function tool",
                         type);
    const json_t *name = json_object_get(tc, "name");
    if (!json_is_string(name))
        return tern_errf(TERN_EINVAL, "'tool_choice.name' must be a string");
    return (*out = json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name)) ? NULL : oom();
}

/* reasoning {effort, summary}: an effort other than "none" / "minimal" turns the template's thinking on. */
static TERN_MUST_CHECK tern_err *reasoning(const json_t *b, json_t *kwargs, json_t **echo) {
    TERN_TRY(want_type(b, "reasoning", is_object, "an object {\"effort\", \"summary\"}"));
    const json_t *rs = json_object_get(b, "reasoning");
    const json_t *effort = json_object_get(rs, "effort"), *summary = json_object_get(rs, "summary");
    static const char *efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    static const char *summaries[] = {"auto", "concise", "detailed"};
    int e = -1;
    for (int k = 0; json_is_string(effort) && k < 6; k++)
        if (!strcmp(json_string_value(effort), efforts[k]))
            e = k;
    if (is_set(effort) && e < 0)
        return tern_errf(TERN_EINVAL, "'reasoning.effort' must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" "
                                      "or \"xhigh\"");
    int sm = !is_set(summary);
    for (int k = 0; json_is_string(summary) && k < 3; k++)
        sm |= !strcmp(json_string_value(summary), summaries[k]);
    if (!sm)
        return tern_errf(TERN_EINVAL, "'reasoning.summary' must be \"auto\", \"concise\" or \"detailed\"");
    if (e >= 0 && json_object_set_new(kwargs, "enable_thinking", json_boolean(e >= 2)))
        return oom();
    return (*echo = json_pack("{s:O?,s:O?}", "effort", effort, "summary", summary)) ? NULL : oom();
}

static TERN_MUST_CHECK tern_err *metadata(const json_t *b) {
    TERN_TRY(want_type(b, "metadata", is_object, "an object of string values"));
    const json_t *md = json_object_get(b, "metadata");
    if (json_object_size(md) > 16)
        return tern_errf(TERN_EINVAL, "'metadata' may hold at most 16 keys, got %zu", json_object_size(md));
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)md, k, v) {
        if (strlen(k) > 64)
            return tern_errf(TERN_EINVAL, "'metadata' keys may be at most 64 characters");
        if (!json_is_string(v) || json_string_length(v) > 512)
            return tern_errf(TERN_EINVAL, "'metadata.%.64s' must be a string of at most 512 characters", k);
    }
    return NULL;
}

/* Reads a Responses body into chat terms. prior: the stored conversation previous_response_id names, or NULL. */
static TERN_MUST_CHECK tern_err *read_request(tern_server *s, const json_t *b, json_t *prior, resp_in *in) {
    memset(in, 0, sizeof *in);
    TERN_TRY(refuse_unsupported(b));
    const json_t *input = json_object_get(b, "input");
    if (!is_set(input))
        return tern_errf(TERN_EINVAL, "'input' is required: a string or an array of input items");
    TERN_TRY(want_type(b, "instructions", is_string, "a string"));
    TERN_TRY(want_type(b, "user", is_string, "a string"));
    TERN_TRY(want_type(b, "store", is_bool, "true or false"));
    TERN_TRY(want_type(b, "stream", is_bool, "true or false"));
    TERN_TRY(metadata(b));
    const json_t *mot = json_object_get(b, "max_output_tokens");
    if (is_set(mot) && !(json_is_integer(mot) && json_integer_value(mot) >= 1 && json_integer_value(mot) <= 1 << 24))
        return tern_errf(TERN_EINVAL, "'max_output_tokens' must be an integer between 1 and %d", 1 << 24);
    in->store = !json_is_false(json_object_get(b, "store"));

    in->history = prior ? json_incref(prior) : json_array();
    if (!in->history)
        return oom();
    TERN_TRY(tern_chat_from_responses_input(input, in->history));
    TERN_TRY(input_items(s, input, &in->input_items));

    json_t *tools = NULL, *choice = NULL, *text_echo = NULL, *reasoning_echo = NULL;
    in->chat = json_object();
    json_t *msgs = json_array();
    const json_t *ins = json_object_get(b, "instructions");
    tern_err *err = NULL;
    if (!in->chat || !msgs || (json_is_string(ins) && json_array_append_new(msgs, json_pack("{s:s,s:O}", "role",
                                                                                            "system", "content", ins))))
        err = oom();
    json_t *hist = err ? NULL : json_deep_copy(in->history); /* the template path may normalize messages in place */
    if (!err && (!hist || json_array_extend(msgs, hist)))
        err = oom();
    json_decref(hist);
    if (!err)
        err = tern_chat_tools_from_responses(json_object_get(b, "tools"), &tools);
    if (!err)
        err = tool_choice(b, &choice);
    if (!err)
        err = text_format(b, &in->gbnf, &text_echo);
    const json_t *kw = json_object_get(b, "chat_template_kwargs"); /* the chat endpoint's extension */
    if (!err && is_set(kw) && !json_is_object(kw))
        err = tern_errf(TERN_EINVAL, "'chat_template_kwargs' must be an object");
    if (!err) {
        in->kwargs = json_is_object(kw) ? json_deep_copy(kw) : json_object();
        if (!in->kwargs || json_object_set_new(in->chat, "chat_template_kwargs", in->kwargs))
            err = oom();
    }
    if (!err)
        err = reasoning(b, in->kwargs, &reasoning_echo);
    if (!err) {
        json_object_set(in->chat, "messages", msgs);
        if (tools)
            json_object_set(in->chat, "tools", tools);
        if (choice)
            json_object_set(in->chat, "tool_choice", choice);
        static const char *const same[] = {"temperature", "top_p", "top_k", "min_p", "seed", "stream",
                                           "parallel_tool_calls"};
        for (size_t k = 0; k < sizeof same / sizeof *same; k++)
            if (json_object_get(b, same[k]))
                json_object_set(in->chat, same[k], json_object_get(b, same[k]));
        if (is_set(mot))
            json_object_set(in->chat, "max_tokens", (json_t *)mot);
    }
    if (!err) {
        const json_t *temp = json_object_get(b, "temperature"), *top_p = json_object_get(b, "top_p");
        const json_t *ptc = json_object_get(b, "parallel_tool_calls");
        in->resp = json_object();
        json_t *r = in->resp;
        char id[64];
        srv_make_id(s, "resp_", id, sizeof id);
        if (!r || json_object_set_new(r, "id", json_string(id)) || json_object_set_new(r, "object", json_string("response")) ||
            json_object_set_new(r, "created_at", json_integer((json_int_t)time(NULL))) ||
            json_object_set_new(r, "status", json_string("in_progress")) || json_object_set_new(r, "background", json_false()) ||
            json_object_set_new(r, "error", json_null()) || json_object_set_new(r, "incomplete_details", json_null()) ||
            json_object_set_new(r, "instructions", json_incref((json_t *)(ins ? ins : json_null()))) ||
            json_object_set_new(r, "max_output_tokens", json_incref((json_t *)(mot ? mot : json_null()))) ||
            json_object_set_new(r, "model", json_string(s->model_id)) || json_object_set_new(r, "output", json_array()) ||
            json_object_set_new(r, "parallel_tool_calls", json_boolean(!json_is_false(ptc))) ||
            json_object_set_new(r, "previous_response_id",
                                json_incref(json_object_get(b, "previous_response_id") ?: json_null())) ||
            json_object_set_new(r, "reasoning", reasoning_echo) ||
            json_object_set_new(r, "store", json_boolean(in->store)) ||
            json_object_set_new(r, "temperature", is_set(temp) ? json_incref((json_t *)temp) : json_real(1.0)) ||
            json_object_set_new(r, "text", text_echo) ||
            json_object_set_new(r, "tool_choice", choice ? json_incref(json_object_get(b, "tool_choice"))
                                                         : json_string("auto")) ||
            json_object_set_new(r, "tools", is_set(json_object_get(b, "tools"))
                                                ? json_incref(json_object_get(b, "tools")) : json_array()) ||
            json_object_set_new(r, "top_p", is_set(top_p) ? json_incref((json_t *)top_p) : json_real(1.0)) ||
            json_object_set_new(r, "truncation", json_string("disabled")) || json_object_set_new(r, "usage", json_null()) ||
            json_object_set_new(r, "user", json_incref(json_object_get(b, "user") ?: json_null())) ||
            json_object_set_new(r, "metadata", is_set(json_object_get(b, "metadata"))
                                                   ? json_incref(json_object_get(b, "metadata")) : json_object()))
            err = oom();
        reasoning_echo = text_echo = NULL; /* taken by the object */
    }
    json_decref(msgs);
    json_decref(tools);
    json_decref(choice);
    json_decref(text_echo);
    json_decref(reasoning_echo);
    return err;
}

static TERN_MUST_CHECK tern_err *run_new(tern_server *s, resp_in *in, int streaming, int parse_tools, resp_run **out) {
    resp_run *c = calloc(1, sizeof *c);
    if (!c)
        return oom();
    c->srv = s;
    c->streaming = streaming;
    c->open = -1;
    c->store = in->store;
    c->resp = in->resp;
    c->output = json_object_get(c->resp, "output");
    c->input_items = in->input_items;
    c->history = in->history;
    in->resp = in->input_items = in->history = NULL;
    tern_err *err = tern_reply_parser_new(srv_dialect(s), parse_tools, &c->parser);
    if (err) {
        resp_free(c);
        return err;
    }
    *out = c;
    return NULL;
}

void *srv_responses_run_new(tern_server *s, int streaming, int parse_tools) {
    resp_in in = {0};
    char id[64];
    srv_make_id(s, "resp_", id, sizeof id);
    in.resp = json_pack("{s:s,s:s,s:I,s:s,s:s,s:[],s:n}", "id", id, "object", "response", "created_at",
                        (json_int_t)time(NULL), "status", "in_progress", "model", s->model_id, "output", "usage");
    in.input_items = json_array();
    in.history = json_array();
    resp_run *c = NULL;
    tern_err *err = in.resp && in.input_items && in.history ? run_new(s, &in, streaming, parse_tools, &c) : oom();
    resp_in_free(&in);
    tern_err_free(err);
    return c;
}

const srv_gen_ops *srv_responses_ops(void) { return &RESP_OPS; }

void srv_responses_start(void *run, sbuf *out) { resp_start(run, out); }

json_t *srv_responses_response(void *run) { return ((resp_run *)run)->resp; }

tern_err *srv_responses_chat_body(tern_server *s, const json_t *body, json_t **chat) {
    resp_in in;
    tern_err *err = read_request(s, body, NULL, &in);
    *chat = err ? NULL : json_incref(in.chat);
    resp_in_free(&in);
    return err;
}

static int reply_not_found(srv_req *r, const char *id) {
    json_t *v = srv_error_json(API_OPENAI, 404, "");
    json_t *e = json_object_get(v, "error");
    char msg[256];
    snprintf(msg, sizeof msg, "Response with id '%.80s' not found (never stored, dropped from the store, or "
                              "deleted).", id);
    json_object_set_new(e, "message", json_string(msg));
    json_object_set_new(e, "code", json_string("response_not_found"));
    int rc = srv_reply_json(r, 404, v);
    json_decref(v);
    return rc;
}

int srv_handle_responses(srv_req *r, json_t *body) {
    tern_server *s = r->srv;
    json_t *prior = NULL;
    const json_t *prev = json_object_get(body, "previous_response_id");
    if (is_set(prev)) {
        if (!json_is_string(prev))
            return srv_reply_error(r, 400, "'previous_response_id' must be a string, got %s", tern_json_type_name(prev));
        int got = srv_resp_store_get(s->responses, json_string_value(prev), NULL, NULL, &prior);
        if (got < 0)
            return srv_reply_error(r, 503, "out of memory");
        if (!got)
            return reply_not_found(r, json_string_value(prev));
    }
    resp_in in;
    srv_params p;
    memset(&p, 0, sizeof p);
    json_t *tools = NULL;
    int parse_tools = 0, forced = 0;
    tern_media_prompt mp = {0};
    tern_err *err = read_request(s, body, prior, &in);
    json_decref(prior);
    if (!err)
        err = srv_params_parse(in.chat, PARAMS_CHAT, s->info.vocab_size, &p);
    if (!err)
        err = srv_resolve_tools(in.chat, &tools, &parse_tools, &forced);
    if (!err) {
        char *gbnf = NULL;
        if (forced)
            err = srv_tool_call_grammar(s, tools, NULL, &gbnf);
        else
            gbnf = in.gbnf, in.gbnf = NULL;
        srv_params_set_grammar(&p, gbnf, forced);
    }
    if (!err)
        err = srv_chat_prompt_media(s, json_object_get(in.chat, "messages"), tools, in.kwargs, 1, &mp);
    json_decref(tools);
    resp_run *c = NULL;
    if (!err)
        err = run_new(s, &in, p.stream, parse_tools, &c);
    resp_in_free(&in);
    if (err) {
        tern_media_prompt_free(&mp);
        srv_params_free(&p);
        return srv_reply_err(r, err);
    }
    srv_gen *g;
    err = srv_gen_start_chat_media(r, s, &p, &mp, &RESP_OPS, c, &g);
    if (err)
        return srv_reply_err(r, err);
    if (c->streaming) {
        resp_start(c, &g->out);
        return srv_reply_stream(r, g);
    }
    int k = srv_gen_run(g);
    int rc;
    if (k < 0)
        rc = 0; /* MHD_NO: the client is gone */
    else if (k > 0)
        rc = srv_reply_error(r, g->fail_status, "%s", g->fail_msg);
    else
        rc = srv_reply_json(r, 200, c->resp);
    srv_gen_free(g);
    return rc;
}

/* ---- stored responses ------------------------------------------------------------------------------------ */

/* The id in /v1/responses/{id}[/input_items] and whether the tail asks for the input items; 0 if malformed. */
static int parse_path(const char *url, char *id, size_t cap, int *items) {
    const char *p = url + strlen("/v1/responses/");
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    *items = slash != NULL;
    if (n == 0 || n >= cap || (slash && strcmp(slash, "/input_items")))
        return 0;
    memcpy(id, p, n);
    id[n] = 0;
    return 1;
}

static int list_input_items(srv_req *r, json_t *items) {
    const char *order = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "order");
    const char *limit_s = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
    const char *after = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "after");
    if (order && strcmp(order, "asc") && strcmp(order, "desc"))
        return srv_reply_error(r, 400, "'order' must be \"asc\" or \"desc\", got \"%.32s\"", order);
    long limit = 20;
    if (limit_s) {
        char *end;
        limit = strtol(limit_s, &end, 10);
        if (!*limit_s || *end || limit < 1 || limit > 100)
            return srv_reply_error(r, 400, "'limit' must be an integer between 1 and 100, got \"%.32s\"", limit_s);
    }
    int desc = !order || !strcmp(order, "desc"); /* OpenAI's default: newest first */
    size_t n = json_array_size(items), start = 0;
    if (after) {
        size_t k = 0;
        for (; k < n; k++) {
            size_t at = desc ? n - 1 - k : k;
            if (!strcmp(json_string_value(json_object_get(json_array_get(items, at), "id")) ?: "", after))
                break;
        }
        if (k == n)
            return srv_reply_error(r, 400, "'after': no input item has id '%.80s'", after);
        start = k + 1;
    }
    json_t *data = json_array();
    for (size_t k = start; data && k < n && json_array_size(data) < (size_t)limit; k++)
        json_array_append(data, json_array_get(items, desc ? n - 1 - k : k));
    size_t got = json_array_size(data);
    json_t *v = data ? json_pack("{s:s,s:o,s:O?,s:O?,s:b}", "object", "list", "data", data, "first_id",
                                 got ? json_object_get(json_array_get(data, 0), "id") : NULL, "last_id",
                                 got ? json_object_get(json_array_get(data, got - 1), "id") : NULL, "has_more",
                                 start + got < n)
                     : NULL;
    int rc = v ? srv_reply_json(r, 200, v) : srv_reply_error(r, 503, "out of memory");
    json_decref(v);
    return rc;
}

int srv_handle_response_get(srv_req *r, json_t *body) {
    (void)body;
    char id[64];
    int items;
    if (!parse_path(r->url, id, sizeof id, &items))
        return reply_not_found(r, r->url + strlen("/v1/responses/"));
    json_t *resp = NULL, *in = NULL;
    int got = srv_resp_store_get(r->srv->responses, id, items ? NULL : &resp, items ? &in : NULL, NULL);
    if (got < 0)
        return srv_reply_error(r, 503, "out of memory");
    if (!got)
        return reply_not_found(r, id);
    int rc = items ? list_input_items(r, in) : srv_reply_json(r, 200, resp);
    json_decref(resp);
    json_decref(in);
    return rc;
}

int srv_handle_response_delete(srv_req *r, json_t *body) {
    (void)body;
    char id[64];
    int items;
    if (!parse_path(r->url, id, sizeof id, &items) || items)
        return reply_not_found(r, r->url + strlen("/v1/responses/"));
    if (!srv_resp_store_delete(r->srv->responses, id))
        return reply_not_found(r, id);
    json_t *v = json_pack("{s:s,s:s,s:b}", "id", id, "object", "response", "deleted", 1);
    int rc = srv_reply_json(r, 200, v);
    json_decref(v);
    return rc;
}
