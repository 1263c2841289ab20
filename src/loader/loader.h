/* loader.h — the loaded model behind tern.h's tern_model: a network from the architecture table, its tokenizer
 * and its chat format, put together once by tern_model_load. The engine runs the network; the server and the CLI
 * read the chat format; nothing is worked out twice. */
#ifndef TERN_LOADER_LOADER_H
#define TERN_LOADER_LOADER_H

#include "chat/chat_format.h"
#include "models/model.h"
#include "tern/tern.h"
#include "tokenizer/tokenizer.h"

struct tern_model {
    tern_lm *lm;
    tern_tokenizer *tok;
    tern_chat_format *chat;
    char *chat_template, *template_origin; /* NULL when the model has none */
    char *dir;
};

/* The chat format (never NULL for a loaded model). */
const tern_chat_format *tern_model_chat_format(const tern_model *m);
/* A conversation (OpenAI-style messages; tools and kwargs may be NULL) as prompt ids: rendered with the chat
 * format's template and tokenized with one BOS (*ids freed with tern_free). TERN_EUNSUPPORTED without a template. */
tern_err *tern_model_chat_prompt(const tern_model *m, const json_t *messages, const json_t *tools,
                                 const json_t *kwargs, int add_generation_prompt, int32_t **ids, size_t *n);

#endif
