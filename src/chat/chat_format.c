/* chat_format.c — a model's chat format from its tokenizer, template and config (see chat_format.h). */
#include "chat/chat_format.h"

#include <stdlib.h>
#include <string.h>

#include "chat/chat_prompt.h"
#include "core/log.h"

/* The text of a marker if the vocabulary has it as one token, else NULL. (Such texts are never pieces of
 * ordinary words, so being one token is enough; vocabularies differ in which of them they flag as special.) */
static const char *marker(const tern_tokenizer *tok, const char *text) {
    return tern_tokenizer_token_id(tok, text, strlen(text)) >= 0 ? text : NULL;
}

/* The first pair of markers the vocabulary has both of. */
static void marker_pair(const tern_tokenizer *tok, const char *const (*pairs)[2], size_t n, const char **a,
                        const char **b) {
    *a = *b = NULL;
    for (size_t i = 0; i < n && !*a; i++)
        if (marker(tok, pairs[i][0]) && marker(tok, pairs[i][1])) {
            *a = pairs[i][0];
            *b = pairs[i][1];
        }
}

static void add_stop(tern_chat_format *f, int32_t id) {
    if (id < 0 || tern_chat_format_is_stop(f, id) || f->n_stop_ids >= TERN_CHAT_MAX_STOP_IDS)
        return;
    f->stop_ids[f->n_stop_ids++] = id;
}

static char *token_text(const tern_tokenizer *tok, int32_t id) {
    if (id < 0)
        return NULL;
    char *s = NULL;
    size_t len;
    tern_token t = id;
    tern_err *e = tern_detokenize(tok, &t, 1, 1, &s, &len);
    if (e) {
        tern_err_free(e);
        return NULL;
    }
    return s;
}

/* What add_generation_prompt appends: the rendering of one user message with it, less the rendering without. A
 * template that cannot render that conversation (one that demands a system message, say) leaves it unknown, said
 * in a warning: prompts still render in full, only tern_model_chat_info lacks the piece. */
static char *generation_prompt(const tern_chat_format *f, const char *origin) {
    json_t *messages = json_pack("[{s:s,s:s}]", "role", "user", "content", "Hi");
    char *with = NULL, *without = NULL, *out = NULL;
    size_t lw = 0, lo = 0;
    tern_err *e = messages ? tern_chat_format_render(f, messages, NULL, NULL, 1, &with, &lw) : NULL;
    if (!e && messages)
        e = tern_chat_format_render(f, messages, NULL, NULL, 0, &without, &lo);
    if (!e && with && without && lw > lo && !memcmp(with, without, lo))
        out = strndup(with + lo, lw - lo);
    else if (e)
        TLOG_WARN("%s: a conversation of one user message does not render (%s): the generation prompt is not known",
                  origin ? origin : "chat template", tern_err_msg(e));
    else if (with && without && lw != lo) /* equal: the template adds nothing to open the model's turn */
        TLOG_WARN("%s: the conversation with the generation prompt does not extend the one without: the generation "
                  "prompt is not known", origin ? origin : "chat template");
    tern_err_free(e);
    free(with);
    free(without);
    json_decref(messages);
    return out;
}

/* The dialect the model writes: Gemma 4's markers when the vocabulary has them; else what the template shows the
 * model (Hermes-style <tool_call> blocks, Llama 3's JSON calls); else what the vocabulary's markers say of the family
 * (a <tool_call> token, or ChatML turns: Hermes; Llama 3's turns or <|python_tag|>: Llama 3's JSON calls, even from
 * a template that never shows tools); else Gemma 4's. */
static const tern_reply_dialect *dialect_of(const tern_tokenizer *tok, const char *template_src) {
    if (marker(tok, TERN_G4_TOOL_CALL_OPEN))
        return &tern_dialect_gemma4;
    if (template_src && strstr(template_src, "<tool_call>"))
        return &tern_dialect_hermes;
    if (template_src && (strstr(template_src, "<|python_tag|>") || strstr(template_src, "\"parameters\": ")))
        return &tern_dialect_llama3;
    if (marker(tok, "<tool_call>") || marker(tok, "<|im_start|>"))
        return &tern_dialect_hermes;
    if (marker(tok, "<|python_tag|>") || marker(tok, "<|start_header_id|>"))
        return &tern_dialect_llama3;
    return &tern_dialect_gemma4;
}

tern_err *tern_chat_format_build(const tern_tokenizer *tok, const char *template_src, const char *origin,
                                 const int32_t *config_eos, int n_config_eos, tern_chat_format **out) {
    *out = NULL;
    tern_chat_format *f = calloc(1, sizeof *f);
    if (!f)
        return tern_errf(TERN_ENOMEM, "out of memory");
    if (template_src) {
        tern_err *e = tern_jinja_compile(template_src, strlen(template_src), origin ? origin : "chat template", &f->tpl);
        if (e) {
            free(f);
            return e;
        }
        f->fold_tool_results = tern_chat_template_wants_tool_responses(template_src);
    }
    const int32_t V = (int32_t)tern_tokenizer_vocab_size(tok);
    f->bos_id = tern_tokenizer_bos(tok);
    f->eos_id = tern_tokenizer_eos(tok);
    for (int k = 0; k < n_config_eos; k++)
        if (config_eos[k] >= 0 && config_eos[k] < V) {
            if (f->eos_id < 0)
                f->eos_id = config_eos[k];
            add_stop(f, config_eos[k]);
        }
    add_stop(f, f->eos_id);
    for (int32_t id = 0; id < V; id++)
        if (tern_tokenizer_is_eog(tok, id))
            add_stop(f, id);
    f->bos_text = token_text(tok, f->bos_id);
    f->eos_text = token_text(tok, f->eos_id);
    const char *tool = marker(tok, "<|tool_response>");
    f->tool_response_id = tool ? tern_tokenizer_token_id(tok, tool, strlen(tool)) : -1;
    static const char *const turns[][2] = {{"<|turn>", "<turn|>"},                      /* Gemma 4 */
                                           {"<start_of_turn>", "<end_of_turn>"},        /* Gemma 2/3 */
                                           {"<|im_start|>", "<|im_end|>"},              /* ChatML (Qwen) */
                                           {"<|start_header_id|>", "<|eot_id|>"}};      /* Llama 3 */
    marker_pair(tok, turns, sizeof turns / sizeof turns[0], &f->turn_start, &f->turn_end);
    static const char *const audio[][2] = {{"<|audio>", "<audio|>"}}, *const image[][2] = {{"<|image>", "<image|>"}};
    marker_pair(tok, audio, 1, &f->audio_start, &f->audio_end);
    marker_pair(tok, image, 1, &f->image_start, &f->image_end);
    f->audio_token = f->audio_start ? marker(tok, "<|audio|>") : NULL;
    f->image_token = f->image_start ? marker(tok, "<|image|>") : NULL;
    f->dialect = dialect_of(tok, template_src);
    if (f->tpl)
        f->generation_prompt = generation_prompt(f, origin);
    *out = f;
    return NULL;
}

void tern_chat_format_free(tern_chat_format *f) {
    if (!f)
        return;
    tern_jinja_free(f->tpl);
    free(f->bos_text);
    free(f->eos_text);
    free(f->generation_prompt);
    free(f);
}

int tern_chat_format_is_stop(const tern_chat_format *f, int32_t id) {
    for (int k = 0; k < f->n_stop_ids; k++)
        if (f->stop_ids[k] == id)
            return 1;
    return 0;
}

tern_err *tern_chat_format_render(const tern_chat_format *f, const json_t *messages, const json_t *tools,
                                  const json_t *kwargs, int add_generation_prompt, char **text, size_t *len) {
    return tern_chat_format_render_media(f, messages, tools, kwargs, add_generation_prompt, NULL, NULL, text, len);
}

tern_err *tern_chat_format_render_media(const tern_chat_format *f, const json_t *messages, const json_t *tools,
                                        const json_t *kwargs, int add_generation_prompt, json_t *audio,
                                        json_t *images, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (!f->tpl)
        return tern_errf(TERN_EUNSUPPORTED, "this model has no chat template");
    tern_chat_input in = {.messages = messages,
                          .tools = tools,
                          .template_kwargs = kwargs,
                          .add_generation_prompt = add_generation_prompt,
                          .fold_tool_results = f->fold_tool_results,
                          .bos_token = f->bos_text,
                          .eos_token = f->eos_text,
                          .audio = audio,
                          .images = images};
    json_t *ctx;
    TERN_TRY(tern_chat_build_context(&in, &ctx));
    tern_err *err = tern_chat_render(f->tpl, ctx, text, len);
    json_decref(ctx);
    return err;
}
