/* chat_prompt.h — chat requests into prompts: OpenAI-style messages (and Anthropic ones, mapped onto them) are
 * validated, normalized into the context the model's own chat template expects, rendered, and tokenized.
 *
 *   messages + tools + chat_template_kwargs ─▶ tern_chat_build_context ─▶ JSON context
 *       ─▶ tern_chat_render (the model's Jinja template) ─▶ prompt text ─▶ tern_chat_tokenize ─▶ ids
 *
 * Normalized messages carry only the fields templates read (role, content, name, tool_calls, tool_call_id,
 * reasoning_content); text content parts are joined into one string (templates differ in what they accept for
 * lists; every template accepts a string); assistant tool-call arguments given as JSON text are parsed into
 * objects, as Hugging Face templates expect. Audio parts (OpenAI input_audio, data-URI audio_url) and image parts
 * (image_url) are taken out for the caller to decode, leaving {"type": "audio"} / {"type": "image"} in their place.
 * Errors are TERN_EINVAL (TERN_EUNSUPPORTED for valid input this model cannot take, such as images without a vision
 * tower) with messages that name the field: "messages[2].role: ...". */
#ifndef TERN_CHAT_CHAT_PROMPT_H
#define TERN_CHAT_CHAT_PROMPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/jinja.h"
#include "core/status.h"
#include "tern/tern.h"
#include "tokenizer/tokenizer.h"

typedef struct tern_chat_input {
    const json_t *messages;        /* OpenAI messages array (required, non-empty) */
    const json_t *tools;           /* OpenAI tools array, or NULL / JSON null for none */
    const json_t *template_kwargs; /* extra template variables (chat_template_kwargs), or NULL */
    int add_generation_prompt;     /* end with the opening of the assistant's turn */
    int fold_tool_results;         /* tool messages become the preceding assistant message's tool_responses
                                    * (see tern_chat_template_wants_tool_responses) */
    const char *bos_token, *eos_token; /* the special-token texts templates print (may be NULL) */
    json_t *audio;                 /* NULL: audio content parts are refused (no audio tower). Else each audio part is
                                    * appended to this array as {"data": base64 text, "format", "path"} in document
                                    * order, and its message's content becomes a list of text parts and
                                    * {"type": "audio"} items in the same order (what templates place markers for) */
    json_t *images;                /* likewise for image_url parts: NULL refuses them (no vision tower); else each is
                                    * appended as {"data": base64 text} or {"url": http(s) URL} with "detail" and
                                    * "path", leaving {"type": "image"} in its message's content */
} tern_chat_input;

/* Validates `in` and builds a new template context object in *ctx (json_decref it). Template kwargs come
 * first; messages, tools, add_generation_prompt, bos_token and eos_token then take precedence. */
TERN_MUST_CHECK tern_err *tern_chat_build_context(const tern_chat_input *in, json_t **ctx);
/* 1 if a template reads tool results only in Gemma's native form (assistant "tool_responses": [{name, response}])
 * and knows nothing of OpenAI tool messages (no "tool_call_id"), as earlier Gemma 4 templates do. */
int tern_chat_template_wants_tool_responses(const char *template_src);
/* Validates an OpenAI tools array the way tern_chat_build_context does (NULL or JSON null is fine). */
TERN_MUST_CHECK tern_err *tern_chat_validate_tools(const json_t *tools);
/* Renders the template with `ctx` into a malloc'd NUL-terminated prompt; template failures (including the
 * template's own raise_exception) are TERN_EINVAL errors starting with "chat template: ". */
TERN_MUST_CHECK tern_err *tern_chat_render(const tern_jinja *tpl, const json_t *ctx, char **text, size_t *len);
/* Tokenizes a rendered prompt with special-token text as special ids and at most one BOS at the start (the
 * tokenizer's own BOS is added only when the template did not print one). *ids is freed with tern_free. */
TERN_MUST_CHECK tern_err *tern_chat_tokenize(const tern_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n);

/* Maps an Anthropic Messages request (its "system", "messages" and "tools") onto new OpenAI-style
 * messages (*messages) and tools (*tools, NULL when there are none). tool_result blocks become tool
 * messages, tool_use blocks assistant tool_calls, thinking blocks reasoning_content. */
TERN_MUST_CHECK tern_err *tern_chat_from_anthropic(const json_t *req, json_t **messages, json_t **tools);

/* Appends an OpenAI Responses `input` (a string or a list of message / function_call / function_call_output /
 * reasoning items) to `messages` as OpenAI-style chat messages (chat_responses.c says how each item maps). */
TERN_MUST_CHECK tern_err *tern_chat_from_responses_input(const json_t *input, json_t *messages);
/* Responses function tools [{type: "function", name, description, parameters, strict}] as chat tools in *tools
 * (NULL for none); a hosted tool type is TERN_EUNSUPPORTED naming it. */
TERN_MUST_CHECK tern_err *tern_chat_tools_from_responses(const json_t *tools_in, json_t **tools);

#endif
