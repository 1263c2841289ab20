/* loader.h — the loaded model behind tern.h's tern_model: a network from the architecture table, its tokenizer
 * and its chat format, put together once by tern_model_load. The engine runs the network; the server and the CLI
 * read the chat format; nothing is worked out twice. */
#ifndef TERN_LOADER_LOADER_H
#define TERN_LOADER_LOADER_H

#include "chat/chat_format.h"
#include "core/threadpool.h"
#include "loader/audio_input.h"
#include "loader/image_input.h"
#include "models/model.h"
#include "tern/tern.h"
#include "tokenizer/tokenizer.h"

struct tern_model {
    tern_lm *lm;
    tern_tokenizer *tok;
    tern_chat_format *chat;
    tern_audio_input *audio; /* the audio tower, or NULL */
    tern_image_input *image; /* the vision tower, or NULL */
    char *chat_template, *template_origin; /* NULL when the model has none */
    char *dir;
};

/* The chat format (never NULL for a loaded model). */
const tern_chat_format *tern_model_chat_format(const tern_model *m);
/* A conversation (OpenAI-style messages; tools and kwargs may be NULL) as prompt ids: rendered with the chat
 * format's template and tokenized with one BOS (*ids freed with tern_free). TERN_EUNSUPPORTED without a template. */
TERN_MUST_CHECK tern_err *tern_model_chat_prompt(const tern_model *m, const json_t *messages, const json_t *tools,
                                 const json_t *kwargs, int add_generation_prompt, int32_t **ids, size_t *n);

/* Prompt text (a rendered template, or a completion prompt) as ids the way chat prompts are: special-token text as
 * special ids, one BOS at the start (*ids freed with tern_free). */
TERN_MUST_CHECK tern_err *tern_model_prompt_ids(const tern_model *m, const char *text, size_t len, int32_t **ids, size_t *n);

/* Audio clips and images a request may carry. */
#define TERN_MAX_AUDIO_CLIPS 16
#define TERN_MAX_IMAGES 16

/* A chat prompt with the soft-token spans of its audio clips and images (rows owned by `clips` and `images`). */
typedef struct tern_media_prompt {
    int32_t *ids;
    size_t n;
    tern_prompt_embeds *spans; /* [n_spans] in prompt order, each pointing at a clip's or an image's rows */
    int n_spans;
    tern_audio_embeds *clips;  /* one per 30 s window of each clip */
    int n_clips;
    tern_image_embeds *images;
    int n_images;
} tern_media_prompt;

/* Fetches an image URL (http/https) into *bytes (malloc'd, *len of them), or refuses with a reason. */
typedef tern_err *(*tern_url_fetch_fn)(void *ctx, const char *url, void **bytes, size_t *len);

/* How much lower than the engine's threads the encodes of audio and images run (`tern serve`, and bench_tower as
 * it measures serve). At equal priority four busy threads on two cores left a stream decoding beside an image ~300
 * ms a token (its pool barriers waiting for time slices) while the image took 5.5 s; 5 lower: ~40-60 ms and 9 s;
 * 10 lower: ~38 ms and 18 s (e2b q4, bench-log 2026-12-06). Alone, an encode runs at full speed either way. */
#define TERN_MEDIA_NICE 5

/* How a chat prompt's audio and images are read. */
typedef struct tern_media_opts {
    double timeout_s;  /* bound on each clip's container decode; <= 0: the default */
    int audio_windows; /* a clip longer than 30 s: encode up to this many 30 s windows, each its own run of soft
                        * tokens between the markers; <= 1: keep the first 30 s (the reference's behaviour) */
    tern_pool *pool;   /* runs the towers' products; NULL: the calling thread alone */
    tern_url_fetch_fn fetch; /* image URLs: NULL refuses them (data: URIs only) */
    void *fetch_ctx;
} tern_media_opts;

/* tern_model_chat_prompt for messages that may carry audio and image parts: each clip is decoded (base64, then any
 * supported container) and encoded by the model's audio tower, each image decoded (base64 or a fetched URL) and
 * encoded by its vision tower at the budget its detail asks for (low 70, auto the processor's, high 1120 soft
 * tokens), as `o` says (NULL: defaults); the marker the template placed for each becomes the model's start marker,
 * one placeholder per soft token, and the end marker (per 30 s window of audio). Errors name the part
 * ("messages[0].content[1]: ..."): no tower, bad base64, an undecodable or refused file, more than
 * TERN_MAX_AUDIO_CLIPS clips or TERN_MAX_IMAGES images, a template that placed no marker. */
TERN_MUST_CHECK tern_err *tern_model_chat_prompt_media(const tern_model *m, const json_t *messages, const json_t *tools,
                                       const json_t *kwargs, int add_generation_prompt, const tern_media_opts *o,
                                       tern_media_prompt *out);
/* Frees and zeroes; a zeroed struct is fine. */
void tern_media_prompt_free(tern_media_prompt *p);

/* One kind of media for tern_media_splice: its marker ids and its items in prompt order. */
typedef struct tern_splice_kind {
    int32_t marker, start, end;
    const tern_prompt_embeds *items; /* rows, n and key of each item (pos is filled in the output spans) */
    int n_items;
    const int *groups;               /* items per marker (NULL: one each) */
    int n_groups;                    /* markers expected (n_items without groups) */
    const char *what;                /* "audio" / "image", for messages */
} tern_splice_kind;

/* Replaces the k-th marker of each kind in ids[0, n) by its items — groups[k] consecutive ones — each as start,
 * item.n placeholders (the marker id) and end, filling spans[] (one per item of every kind, in prompt order);
 * each kind's marker count must equal its number of groups. *out is malloc'd. */
TERN_MUST_CHECK tern_err *tern_media_splice(const int32_t *ids, size_t n, const tern_splice_kind *kinds, int n_kinds, int32_t **out,
                            size_t *n_out, tern_prompt_embeds *spans);

#endif
