/* chat_format.h — a model's chat format, worked out once when the model loads: its template (compiled), the
 * special-token texts templates print (BOS, EOS), every id that ends a reply, the turn and media markers its
 * vocabulary has, and the text a chat prompt ends with to open the model's turn. The server, `tern run` and the
 * library all read this one object instead of working the same things out again.
 *
 * It knows the tokenizer and the template, nothing of the engine: the loaded model builds it. */
#ifndef TERN_CHAT_CHAT_FORMAT_H
#define TERN_CHAT_CHAT_FORMAT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/jinja.h"
#include "chat/tool_calls.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

#define TERN_CHAT_MAX_STOP_IDS 64

typedef struct tern_chat_format {
    tern_jinja *tpl;           /* NULL: the model has no chat template */
    int fold_tool_results;     /* the template wants Gemma-native tool_responses (tern_chat_template_wants_...) */
    int32_t bos_id, eos_id;    /* -1 when the vocabulary has none */
    char *bos_text, *eos_text; /* their texts, as templates print them; NULL when absent */
    int32_t stop_ids[TERN_CHAT_MAX_STOP_IDS]; /* every id that ends a reply by default: the config's EOS ids, the
                                               * tokenizer's EOS and end-of-generation tokens */
    int n_stop_ids;
    int32_t tool_response_id;  /* the token that opens a tool's answer: a chat reply stops there; -1 if absent */
    /* Markers the vocabulary has as single special tokens, or NULL: a turn's opening and closing, and the media
     * runs (start, the soft token repeated, end). */
    const char *turn_start, *turn_end;
    const char *audio_start, *audio_token, *audio_end;
    const char *image_start, *image_token, *image_end;
    char *generation_prompt;   /* what add_generation_prompt appends to a conversation; NULL when unknown */
    const tern_reply_dialect *dialect; /* the markup the model writes tool calls and reasoning in */
} tern_chat_format;

/* Builds the format from the tokenizer, the template source (NULL: none; `origin` names it in errors) and the
 * config's EOS ids. A template that does not compile is an error. */
TERN_MUST_CHECK tern_err *tern_chat_format_build(const tern_tokenizer *tok, const char *template_src, const char *origin,
                                 const int32_t *config_eos, int n_config_eos, tern_chat_format **out);
/* Frees; NULL is fine. */
void tern_chat_format_free(tern_chat_format *f);
/* 1 if `id` ends a reply by default. */
int tern_chat_format_is_stop(const tern_chat_format *f, int32_t id);
/* Renders a conversation (OpenAI-style messages; tools and kwargs may be NULL) with the template into a malloc'd
 * prompt text (see tern_chat_build_context for what is validated). TERN_EUNSUPPORTED when there is no template. */
TERN_MUST_CHECK tern_err *tern_chat_format_render(const tern_chat_format *f, const json_t *messages, const json_t *tools,
                                  const json_t *kwargs, int add_generation_prompt, char **text, size_t *len);
/* The same taking audio parts out into `audio` and image parts into `images` (tern_chat_input.audio / .images; NULL
 * refuses them). */
TERN_MUST_CHECK tern_err *tern_chat_format_render_media(const tern_chat_format *f, const json_t *messages, const json_t *tools,
                                        const json_t *kwargs, int add_generation_prompt, json_t *audio,
                                        json_t *images, char **text, size_t *len);

#endif
