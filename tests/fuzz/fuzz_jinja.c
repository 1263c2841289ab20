/* fuzz_jinja.c — fuzz target for the Jinja renderer: the bytes up to the first NUL are a
 * template, the rest (when it parses as a JSON object) its context, else a fixed chat
 * context with messages, tool calls and tools. Compile and render must end in output or
 * an error, within tight limits; a rendering must be exactly as long as reported. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

static const char default_context[] =
    "{\"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\", \"add_generation_prompt\": true, \"enable_thinking\": false,"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"description\": \"d\", \"parameters\":"
    " {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\", \"enum\": [\"a\", \"b\"]}, \"n\": {\"type\": \"integer\"}},"
    " \"required\": [\"q\"]}}}],"
    " \"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"hi \\u00e9\\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abcdefghi\", \"type\": \"function\","
    " \"function\": {\"name\": \"get\", \"arguments\": {\"q\": \"a\", \"n\": 1.5}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"abcdefghi\", \"content\": \"ok\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}, {\"type\": \"image\"}]}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *fallback;
    if (!fallback)
        fallback = json_loads(default_context, 0, NULL);
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    json_t *ctx = NULL;
    if (nul) {
        ctx = json_loadb((const char *)nul + 1, size - tlen - 1, JSON_ALLOW_NUL, NULL);
        if (ctx && !json_is_object(ctx)) {
            json_decref(ctx);
            ctx = NULL;
        }
    }
    tern_jinja *tpl;
    tern_err *e = tern_jinja_compile((const char *)data, tlen, "fuzz", &tpl);
    if (!e) {
        tern_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 32 << 20, .max_steps = 200000, .max_depth = 200};
        char *out = NULL;
        size_t len = 0;
        e = tern_jinja_render(tpl, ctx ? ctx : fallback, &lim, &out, &len);
        if (!e && (!out || out[len] != 0))
            __builtin_trap();
        if (e && (out || !e->msg))
            __builtin_trap();
        free(out);
        tern_jinja_free(tpl);
    } else if (!e->msg || !strstr(e->msg, "fuzz:"))
        __builtin_trap(); /* compile errors always name the template and a location */
    tern_err_free(e);
    json_decref(ctx);
    return 0;
}
