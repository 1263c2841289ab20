/* loader.h — the loaded model behind tern.h's tern_model: a network from the architecture table, its tokenizer
 * and its chat format, put together once by tern_model_load. The engine runs the network; the server and the CLI
 * read the chat format; nothing is worked out twice. */
#ifndef TERN_LOADER_LOADER_H
#define TERN_LOADER_LOADER_H

#include "chat/chat_format.h"
#include "core/threadpool.h"
#include "loader/audio_input.h"
#include "models/model.h"
#include "tern/tern.h"
#include "tokenizer/tokenizer.h"

struct tern_model {
    tern_lm *lm;
    tern_tokenizer *tok;
    tern_chat_format *chat;
    tern_audio_input *audio; /* the audio tower, or NULL */
    char *chat_template, *template_origin; /* NULL when the model has none */
    char *dir;
};

/* The chat format (never NULL for a loaded model). */
const tern_chat_format *tern_model_chat_format(const tern_model *m);
/* A conversation (OpenAI-style messages; tools and kwargs may be NULL) as prompt ids: rendered with the chat
 * format's template and tokenized with one BOS (*ids freed with tern_free). TERN_EUNSUPPORTED without a template. */
tern_err *tern_model_chat_prompt(const tern_model *m, const json_t *messages, const json_t *tools,
                                 const json_t *kwargs, int add_generation_prompt, int32_t **ids, size_t *n);

/* Prompt text (a rendered template, or a completion prompt) as ids the way chat prompts are: special-token text as
 * special ids, one BOS at the start (*ids freed with tern_free). */
tern_err *tern_model_prompt_ids(const tern_model *m, const char *text, size_t len, int32_t **ids, size_t *n);

/* Audio clips a request may carry. */
#define TERN_MAX_AUDIO_CLIPS 16

/* A chat prompt with the soft-token spans of its audio clips (rows owned by `clips`). */
typedef struct tern_media_prompt {
    int32_t *ids;
    size_t n;
    tern_prompt_embeds *spans; /* [n_clips], spans[i].rows = clips[i].rows */
    tern_audio_embeds *clips;  /* one per 30 s window of each clip */
    int n_clips;
} tern_media_prompt;

/* How a chat prompt's audio is read. */
typedef struct tern_media_opts {
    double timeout_s;  /* bound on each clip's container decode; <= 0: the default */
    int audio_windows; /* a clip longer than 30 s: encode up to this many 30 s windows, each its own run of soft
                        * tokens between the markers; <= 1: keep the first 30 s (the reference's behaviour) */
    tern_pool *pool;   /* runs the tower's products; NULL: the calling thread alone */
} tern_media_opts;

/* tern_model_chat_prompt for messages that may carry audio parts: each clip is decoded (base64, then any supported
 * container) and encoded by the model's audio tower as `o` says (NULL: defaults), and the marker the template
 * placed for it becomes the model's audio start marker, one placeholder per soft token, and the end marker (per
 * 30 s window). Errors name the part ("messages[0].content[1]: ..."): no audio tower, bad base64, an undecodable or
 * too-short clip, more than TERN_MAX_AUDIO_CLIPS clips, a template that placed no marker. */
tern_err *tern_model_chat_prompt_media(const tern_model *m, const json_t *messages, const json_t *tools,
                                       const json_t *kwargs, int add_generation_prompt, const tern_media_opts *o,
                                       tern_media_prompt *out);
/* Frees and zeroes; a zeroed struct is fine. */
void tern_media_prompt_free(tern_media_prompt *p);
/* Replaces the k-th `marker` id of ids[0, n) by its clips — groups[k] consecutive entries of clips (groups NULL:
 * one each), each as start, clips[i].n placeholders (the marker id) and end — filling spans[n_clips] (positions,
 * rows, keys); the marker count must equal the number of groups (n_groups, or n_clips without groups). */
tern_err *tern_audio_splice(const int32_t *ids, size_t n, int32_t marker, int32_t start, int32_t end,
                            const tern_audio_embeds *clips, int n_clips, const int *groups, int n_groups, int32_t **out,
                            size_t *n_out, tern_prompt_embeds *spans);

#endif
