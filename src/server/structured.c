/* structured.c — what a request's structured-output fields ask the reply to be, as one GBNF grammar for the engine:
 *
 *   response_format {"type": "json_object"}                    any JSON object
 *   response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
 *                                                                 JSON valid against the schema (strict: OpenAI's
 *                                                                 strict subset, other keywords refused)
 *   grammar "root ::= ..."                                        llama.cpp's field: the grammar as given
 *   tool_choice "required" / a named function (Anthropic: any / tool)
 *                                                                 one call, in the model's tool-call dialect, of an
 *                                                                 allowed tool with arguments valid against its
 *                                                                 parameters schema
 *
 * Each tool's argument grammar comes from the schema converter in the dialect's argument syntax (JSON, or Gemma
 * 4's); its rules are renamed with the tool's index so several tools' grammars live in one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_calls.h"
#include "core/sbuf.h"
#include "grammar/json_schema.h"
#include "server/server_internal.h"

static int word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Appends GBNF text to b with every rule name prefixed (literals, classes, {m,n} bounds and comments left as they
 * are). */
static int append_prefixed(sbuf *b, const char *g, const char *prefix) {
    int bad = 0;
    for (const char *p = g; *p && !bad;) {
        if (*p == '"' || *p == '[' || *p == '{') {
            char close = *p == '"' ? '"' : *p == '[' ? ']' : '}';
            const char *s = p++;
            while (*p && *p != close)
                p += p[0] == '\\' && p[1] ? 2 : 1;
            if (*p)
                p++;
            bad |= sbuf_add(b, s, (size_t)(p - s));
        } else if (*p == '#') {
            const char *s = p;
            while (*p && *p != '\n')
                p++;
            bad |= sbuf_add(b, s, (size_t)(p - s));
        } else if (word_char(*p)) {
            const char *s = p;
            while (word_char(*p))
                p++;
            bad |= sbuf_adds(b, prefix) || sbuf_add(b, s, (size_t)(p - s));
        } else {
            bad |= sbuf_add(b, p++, 1);
        }
    }
    return bad;
}

/* A forced call should not invent arguments: every object schema with properties but no word on additional ones
 * gets additionalProperties false (in place, on a copy). */
static void close_objects(json_t *v, int depth) {
    if (depth > 64)
        return;
    if (json_is_object(v)) {
        if (json_object_get(v, "properties") && !json_object_get(v, "additionalProperties"))
            json_object_set_new(v, "additionalProperties", json_false());
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) close_objects(x, depth + 1);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) close_objects(x, depth + 1);
    }
}

tern_err *srv_tool_call_grammar(const tern_server *s, const json_t *tools, const char *only, char **gbnf) {
    *gbnf = NULL;
    const tern_reply_dialect *d = srv_dialect(s);
    sbuf b = {0}, rules = {0};
    int bad = sbuf_adds(&b, "root ::= ");
    tern_gbnf_literal(&b, d->force_open, strlen(d->force_open));
    bad |= sbuf_adds(&b, " (");
    size_t i, n = 0;
    json_t *t;
    tern_err *err = NULL;
    json_array_foreach(tools, i, t) {
        const json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const json_t *params = json_object_get(fn, "parameters");
        if (!name || (only && strcmp(name, only)))
            continue;
        json_t *copy = json_is_object(params) ? json_deep_copy(params) : json_pack("{s:s,s:{}}", "type", "object",
                                                                                    "properties");
        if (!copy) {
            err = tern_errf(TERN_ENOMEM, "out of memory");
            break;
        }
        close_objects(copy, 0);
        char *args = NULL;
        err = tern_json_schema_to_gbnf(copy, d->json_args ? TERN_JSON_DIALECT_JSON : TERN_JSON_DIALECT_GEMMA, 0, &args);
        json_decref(copy);
        if (err) {
            err = tern_err_wrap(err, "tools[%zu].function.parameters", i);
            break;
        }
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        bad |= sbuf_adds(&b, n++ ? " | " : " ");
        tern_gbnf_literal(&b, name, strlen(name));
        if (*d->force_mid) {
            bad |= sbuf_adds(&b, " ");
            tern_gbnf_literal(&b, d->force_mid, strlen(d->force_mid));
        }
        bad |= b.oom || sbuf_printf(&b, " t%zu-root", i);
        bad |= append_prefixed(&rules, args, prefix) || sbuf_adds(&rules, "\n");
        free(args);
    }
    bad |= sbuf_adds(&b, " ) ");
    tern_gbnf_literal(&b, d->force_close, strlen(d->force_close));
    bad |= sbuf_adds(&b, "\n") || sbuf_add(&rules, "", 1);
    if (!err && !n)
        err = tern_errf(TERN_EINVAL, "'tool_choice': no tool to call");
    if (!err && bad)
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err && (sbuf_adds(&b, rules.p) || sbuf_add(&b, "", 1)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    sbuf_free(&rules);
    if (err) {
        sbuf_free(&b);
        return err;
    }
    *gbnf = b.p;
    return NULL;
}

tern_err *srv_reply_grammar(const json_t *body, char *forced, char **gbnf) {
    *gbnf = NULL;
    if (!forced)
        return srv_response_grammar(body, gbnf);
    /* llama.cpp's `grammar` beside a forced call: which one the reply follows would be a guess (a response_format
     * is for a text reply, which a forced call has not: it stays unused, as at OpenAI) */
    const json_t *gr = json_object_get(body, "grammar");
    if (gr && !json_is_null(gr)) {
        free(forced);
        return tern_errf(TERN_EINVAL, "give 'grammar' or a forced 'tool_choice', not both");
    }
    *gbnf = forced;
    return NULL;
}

tern_err *srv_response_grammar(const json_t *body, char **gbnf) {
    *gbnf = NULL;
    const json_t *rf = json_object_get(body, "response_format");
    const json_t *gr = json_object_get(body, "grammar");
    int has_rf = json_is_object(rf) && strcmp(json_string_value(json_object_get(rf, "type")) ?: "text", "text");
    if (gr && !json_is_null(gr)) {
        if (!json_is_string(gr) || json_string_length(gr) == 0)
            return tern_errf(TERN_EINVAL, "'grammar' must be a GBNF grammar text (llama.cpp's syntax)");
        if (has_rf)
            return tern_errf(TERN_EINVAL, "give 'grammar' or a JSON 'response_format', not both");
        return (*gbnf = strdup(json_string_value(gr))) ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    }
    if (!has_rf)
        return NULL;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!strcmp(type, "json_object"))
        return tern_json_object_gbnf(gbnf);
    const json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return tern_errf(TERN_EINVAL, "'response_format.json_schema' must be an object {\"name\", \"schema\", "
                                      "\"strict\"}");
    const json_t *schema = json_object_get(js, "schema"), *strict = json_object_get(js, "strict");
    const json_t *name = json_object_get(js, "name");
    if (name && !json_is_string(name))
        return tern_errf(TERN_EINVAL, "'response_format.json_schema.name' must be a string");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return tern_errf(TERN_EINVAL, "'response_format.json_schema.strict' must be true or false");
    if (!schema || json_is_null(schema))
        schema = json_object_get(rf, "schema"); /* some clients put it one level up */
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return tern_errf(TERN_EINVAL, "'response_format.json_schema.schema' must be a JSON Schema object");
    return tern_err_wrap(tern_json_schema_to_gbnf(schema, TERN_JSON_DIALECT_JSON, json_is_true(strict), gbnf),
                         "'response_format.json_schema'");
}
