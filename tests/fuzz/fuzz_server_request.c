/* fuzz_server_request.c — request bodies through everything the server does to them before the engine sees a
 * request: JSON parsing, field validation for the APIs (chat, completions, Anthropic messages, Responses,
 * embeddings), chat message normalization (OpenAI, Anthropic and Responses forms) and tool validation; and the same bytes as model output
 * through the Gemma 4 reply splitter (in three pieces) and tool-call reader, and the lossy UTF-8 string maker. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "chat/tool_calls.h"
#include "server/server_internal.h"

static TERN_MUST_CHECK tern_err *sink(void *user, const tern_reply_part *p) {
    size_t *count = user;
    *count += p->kind == TERN_REPLY_TOOL_CALL ? strlen(p->arguments) : p->len;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    json_t *body = NULL;
    tern_err_free(srv_parse_body(text, size, &body));
    if (body) {
        for (int kind = PARAMS_CHAT; kind <= PARAMS_MESSAGES; kind++) {
            srv_params p;
            tern_err_free(srv_params_parse(body, (srv_params_kind)kind, 262144, &p));
            srv_params_free(&p);
        }
        tern_chat_input in = {.messages = json_object_get(body, "messages"),
                              .tools = json_object_get(body, "tools"),
                              .template_kwargs = json_object_get(body, "chat_template_kwargs"),
                              .add_generation_prompt = 1,
                              .bos_token = "<bos>",
                              .eos_token = "<eos>"};
        json_t *ctx = NULL;
        tern_err_free(tern_chat_build_context(&in, &ctx));
        json_decref(ctx);
        json_t *msgs = NULL, *tools = NULL;
        tern_err_free(tern_chat_from_anthropic(body, &msgs, &tools));
        json_decref(msgs);
        json_decref(tools);
        tern_err_free(tern_chat_validate_tools(json_object_get(body, "tools")));
        /* the Responses body in chat terms, and the checks the chat path runs on it next */
        static tern_server srv = {.model_id = "m"};
        json_t *chat = NULL;
        tern_err_free(srv_responses_chat_body(&srv, body, &chat));
        if (chat) {
            srv_params p;
            tern_err_free(srv_params_parse(chat, PARAMS_CHAT, 262144, &p));
            srv_params_free(&p);
            json_t *shown = NULL;
            int parse = 0, forced = 0;
            tern_err_free(srv_resolve_tools(chat, &shown, &parse, &forced));
            json_decref(shown);
            json_decref(chat);
        }
        json_t *inputs = NULL;
        int b64;
        int64_t dims;
        tern_err_free(srv_embeddings_read(body, 262144, 64, &inputs, &b64, &dims));
        json_decref(inputs);
        json_decref(body);
    }

    tern_reply_parser *rp;
    if (!tern_reply_parser_new(NULL, 1, &rp)) {
        size_t count = 0, a = size / 3, b = 2 * size / 3;
        tern_err_free(tern_reply_parser_push(rp, text, a, sink, &count));
        tern_err_free(tern_reply_parser_push(rp, text + a, b - a, sink, &count));
        tern_err_free(tern_reply_parser_push(rp, text + b, size - b, sink, &count));
        tern_err_free(tern_reply_parser_finish(rp, sink, &count));
        tern_reply_parser_free(rp);
    }
    char *name = NULL;
    json_t *args = NULL;
    tern_err_free(tern_g4_parse_tool_call(text, size, &name, &args));
    free(name);
    json_decref(args);
    json_t *s = srv_json_string_lossy(text, size);
    if (!s)
        abort(); /* the lossy maker must always produce a valid string */
    json_decref(s);
    return 0;
}
