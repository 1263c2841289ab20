/* chat_responses.c — an OpenAI Responses request's `input` and `tools` in chat terms, so the Responses endpoint
 * renders through the same template path as chat completions:
 *
 *   "text"                                         a user message
 *   {type?: "message", role, content}              a message; developer becomes system; content a string or
 *                                                  input_text / output_text / input_audio parts
 *   {type: "function_call", call_id, name, arguments}
 *                                                  an assistant tool call (consecutive calls, and calls right after
 *                                                  an assistant message, join that message)
 *   {type: "function_call_output", call_id, output}
 *                                                  a tool message answering call_id
 *   {type: "reasoning", ...}                       dropped: earlier thinking is not shown to the model again, as the
 *                                                  chat templates drop reasoning_content of earlier turns
 *
 * Anything else is refused naming the item and field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "core/json_util.h"

static TERN_MUST_CHECK tern_err *oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

static TERN_MUST_CHECK tern_err *append(json_t *arr, json_t *v) { return !v || json_array_append_new(arr, v) ? oom() : NULL; }

static const char *type_of(const json_t *o) { return json_string_value(json_object_get(o, "type")); }

/* A message's content: a string stays one; parts become chat parts (text, or input_audio as it is). */
static TERN_MUST_CHECK tern_err *message_content(const json_t *c, const char *path, json_t **out) {
    *out = NULL;
    if (json_is_string(c))
        return (*out = json_incref((json_t *)c)) ? NULL : oom();
    if (!json_is_array(c))
        return tern_errf(TERN_EINVAL, "%s.content: expected a string or an array of content parts, got %s", path,
                         c ? tern_json_type_name(c) : "nothing");
    json_t *parts = json_array();
    if (!parts)
        return oom();
    size_t i;
    json_t *p;
    tern_err *err = NULL;
    json_array_foreach(c, i, p) {
        const char *t = json_is_object(p) ? type_of(p) : NULL;
        if (!t) {
            err = tern_errf(TERN_EINVAL, "%s.content[%zu]: expected a part object with a \"type\"", path, i);
        } else if (!strcmp(t, "input_text") || !strcmp(t, "output_text") || !strcmp(t, "text")) {
            const json_t *s = json_object_get(p, "text");
            err = json_is_string(s) ? append(parts, json_pack("{s:s,s:O}", "type", "text", "text", s))
                                    : tern_errf(TERN_EINVAL, "%s.content[%zu].text: expected a string", path, i);
        } else if (!strcmp(t, "refusal")) {
            const json_t *s = json_object_get(p, "refusal");
            err = json_is_string(s) ? append(parts, json_pack("{s:s,s:O}", "type", "text", "text", s))
                                    : tern_errf(TERN_EINVAL, "%s.content[%zu].refusal: expected a string", path, i);
        } else if (!strcmp(t, "input_audio")) {
            err = append(parts, json_incref(p)); /* chat's own audio part; the template path checks it */
        } else if (!strcmp(t, "input_image")) {
            /* {image_url: "data:..." | "https://...", detail} → chat's image_url part; file_id names nothing here */
            const json_t *u = json_object_get(p, "image_url"), *d = json_object_get(p, "detail");
            if (!json_is_string(u))
                err = tern_errf(TERN_EINVAL, "%s.content[%zu].image_url: expected a data: URI or an http(s) URL "
                                             "(file_id is not supported)", path, i);
            else
                err = append(parts, json_pack("{s:s,s:{s:O,s:O?}}", "type", "image_url", "image_url", "url", u,
                                              "detail", json_is_string(d) ? d : NULL));
        } else if (!strcmp(t, "input_file")) {
            err = tern_errf(TERN_EUNSUPPORTED, "%s.content[%zu].type: '%s' parts are not supported by this server "
                                               "(text, input_image and input_audio are)",
                            path, i, t);
        } else {
            err = tern_errf(TERN_EINVAL, "%s.content[%zu].type: expected \"input_text\", \"output_text\", "
                                         "\"input_image\" or \"input_audio\", got \"%.64s\"",
                            path, i, t);
        }
        if (err)
            break;
    }
    if (err) {
        json_decref(parts);
        return err;
    }
    *out = parts;
    return NULL;
}

/* The last message if it is an assistant's, to which tool calls join. */
static json_t *open_assistant(json_t *msgs) {
    size_t n = json_array_size(msgs);
    json_t *last = n ? json_array_get(msgs, n - 1) : NULL;
    const char *role = last ? json_string_value(json_object_get(last, "role")) : NULL;
    return role && !strcmp(role, "assistant") ? last : NULL;
}

static TERN_MUST_CHECK tern_err *function_call(const json_t *it, const char *path, json_t *msgs) {
    const json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name");
    const json_t *args = json_object_get(it, "arguments");
    if (!json_is_string(id) || json_string_length(id) == 0)
        return tern_errf(TERN_EINVAL, "%s.call_id: expected a non-empty string", path);
    if (!json_is_string(name) || json_string_length(name) == 0)
        return tern_errf(TERN_EINVAL, "%s.name: expected a non-empty string", path);
    if (!json_is_string(args))
        return tern_errf(TERN_EINVAL, "%s.arguments: expected the arguments as a JSON text string", path);
    json_t *call = json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name", name,
                             "arguments", args);
    if (!call)
        return oom();
    json_t *a = open_assistant(msgs);
    if (!a) {
        a = json_pack("{s:s,s:n,s:[]}", "role", "assistant", "content", "tool_calls");
        if (!a || json_array_append_new(msgs, a)) {
            json_decref(call);
            return oom();
        }
    }
    json_t *calls = json_object_get(a, "tool_calls");
    if (!calls && json_object_set_new(a, "tool_calls", calls = json_array()))
        calls = NULL;
    return calls && !json_array_append_new(calls, call) ? NULL : oom();
}

static TERN_MUST_CHECK tern_err *function_output(const json_t *it, const char *path, json_t *msgs) {
    const json_t *id = json_object_get(it, "call_id"), *out = json_object_get(it, "output");
    if (!json_is_string(id) || json_string_length(id) == 0)
        return tern_errf(TERN_EINVAL, "%s.call_id: expected a non-empty string", path);
    json_t *content = NULL;
    char pp[96];
    snprintf(pp, sizeof pp, "%s.output", path);
    if (json_is_string(out))
        content = json_incref((json_t *)out);
    else if (json_is_array(out))
        TERN_TRY(message_content(out, pp, &content));
    else
        return tern_errf(TERN_EINVAL, "%s.output: expected a string or an array of content parts, got %s", path,
                         out ? tern_json_type_name(out) : "nothing");
    return append(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", content));
}

static TERN_MUST_CHECK tern_err *message(const json_t *it, const char *path, json_t *msgs) {
    const char *role = json_string_value(json_object_get(it, "role"));
    if (!role)
        return tern_errf(TERN_EINVAL, "%s.role: expected \"user\", \"assistant\", \"system\" or \"developer\"", path);
    if (!strcmp(role, "developer"))
        role = "system";
    if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system"))
        return tern_errf(TERN_EINVAL, "%s.role: expected \"user\", \"assistant\", \"system\" or \"developer\", got "
                                      "\"%.32s\"",
                         path, role);
    json_t *content;
    TERN_TRY(message_content(json_object_get(it, "content"), path, &content));
    return append(msgs, json_pack("{s:s,s:o}", "role", role, "content", content));
}

tern_err *tern_chat_from_responses_input(const json_t *input, json_t *msgs) {
    if (json_is_string(input))
        return append(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input));
    if (!json_is_array(input))
        return tern_errf(TERN_EINVAL, "input: expected a string or an array of input items, got %s",
                         input ? tern_json_type_name(input) : "nothing");
    size_t i;
    json_t *it;
    json_array_foreach(input, i, it) {
        char path[48];
        snprintf(path, sizeof path, "input[%zu]", i);
        if (!json_is_object(it))
            return tern_errf(TERN_EINVAL, "%s: expected an input item object, got %s", path, tern_json_type_name(it));
        const json_t *tv = json_object_get(it, "type");
        const char *t = json_is_string(tv) ? json_string_value(tv) : NULL;
        if (tv && !t)
            return tern_errf(TERN_EINVAL, "%s.type: expected a string", path);
        if (!t || !strcmp(t, "message"))
            TERN_TRY(message(it, path, msgs));
        else if (!strcmp(t, "function_call"))
            TERN_TRY(function_call(it, path, msgs));
        else if (!strcmp(t, "function_call_output"))
            TERN_TRY(function_output(it, path, msgs));
        else if (strcmp(t, "reasoning"))
            return tern_errf(!strcmp(t, "item_reference") ? TERN_EUNSUPPORTED : TERN_EINVAL,
                             "%s.type: '%.64s' items are not supported; give \"message\", \"function_call\", "
                             "\"function_call_output\" or \"reasoning\" items (or previous_response_id)",
                             path, t);
    }
    return NULL;
}

tern_err *tern_chat_tools_from_responses(const json_t *tools, json_t **out) {
    *out = NULL;
    if (!tools || json_is_null(tools))
        return NULL;
    if (!json_is_array(tools))
        return tern_errf(TERN_EINVAL, "tools: expected an array of tools, got %s", tern_json_type_name(tools));
    json_t *res = json_array();
    if (!res)
        return oom();
    size_t i;
    json_t *t;
    tern_err *err = NULL;
    json_array_foreach(tools, i, t) {
        const char *type = json_is_object(t) ? type_of(t) : NULL;
        const json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
        const json_t *params = json_object_get(t, "parameters"), *strict = json_object_get(t, "strict");
        if (!type)
            err = tern_errf(TERN_EINVAL, "tools[%zu]: expected a tool object with a \"type\"", i);
        else if (strcmp(type, "function"))
            err = tern_errf(TERN_EUNSUPPORTED, "tools[%zu].type: '%.64s' is a hosted tool this server cannot run; "
                                               "give function tools",
                            i, type);
        else if (!json_is_string(name) || json_string_length(name) == 0)
            err = tern_errf(TERN_EINVAL, "tools[%zu].name: expected a non-empty string", i);
        else if (desc && !json_is_null(desc) && !json_is_string(desc))
            err = tern_errf(TERN_EINVAL, "tools[%zu].description: expected a string", i);
        else if (params && !json_is_null(params) && !json_is_object(params))
            err = tern_errf(TERN_EINVAL, "tools[%zu].parameters: expected a JSON Schema object", i);
        else if (strict && !json_is_null(strict) && !json_is_boolean(strict))
            err = tern_errf(TERN_EINVAL, "tools[%zu].strict: expected true or false", i);
        if (err)
            break;
        json_t *fn = json_pack("{s:O}", "name", name);
        if (fn && json_is_string(desc))
            json_object_set(fn, "description", (json_t *)desc);
        if (fn && json_is_object(params))
            json_object_set(fn, "parameters", (json_t *)params);
        if ((err = append(res, fn ? json_pack("{s:s,s:o}", "type", "function", "function", fn) : NULL)))
            break;
    }
    if (err) {
        json_decref(res);
        return err;
    }
    *out = res;
    return NULL;
}
