/* tern.h — the public C API of libtern: load a model, run a serving engine, submit requests and
 * read their token events. The HTTP server and `tern run` use this and nothing else.
 *
 *   tern_model_load ─▶ tern_engine_create ─▶ tern_engine_submit ─▶ events ─▶ tern_engine_destroy
 *
 * Threads. An engine owns one thread that runs the model: it admits queued requests when a row
 * and enough KV memory are free, prefills prompts in chunks between decode steps (continuous
 * batching: rows join and leave between steps), and decodes all active rows in one batched
 * forward per step. Submit, cancel, metrics and stream reads only take short locks; no model work
 * ever happens on the caller's thread except tokenizing a text prompt.
 *
 * Errors are values (`tern_err *`, NULL on success; see tern/error.h): read the message with
 * tern_err_msg, the kind with err->code, free with tern_err_free. Submit fails fast with
 * TERN_EOVERLOAD when the wait queue is full (HTTP 429) and with TERN_EINVAL when a request
 * can never run (prompt longer than the context or than the KV budget; bad parameters).
 *
 * Events. Each request produces TERN_EV_TOKEN events (one per generated token) and exactly one
 * final TERN_EV_DONE event (finish reason, usage, timings), delivered either to a callback on the
 * engine thread or into a pollable stream. Text in events is complete UTF-8; text that might be
 * the start of a stop string is held back until it is known not to be one. */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; tern_version() says which library is running. */
#define TERN_VERSION_MAJOR 0
#define TERN_VERSION_MINOR 9
#define TERN_VERSION_PATCH 0
#define TERN_VERSION "0.9.0"

/* The library's version, "MAJOR.MINOR.PATCH". */
TERN_API const char *tern_version(void);

/* ==== models ================================================================================ */

typedef struct tern_model tern_model;

typedef struct tern_model_opts {
    const char *model_dir;          /* config.json + *.safetensors, or a GGUF file (or a folder holding one); required */
    const char *tokenizer_path;     /* NULL: model_dir (tokenizer.json [+ tokenizer_config.json]); or a file */
    const char *chat_template_path; /* NULL: found in model_dir if present (chat_template.jinja, ...) */
    const char *mmproj_path;        /* the audio and/or vision tower as a GGUF multimodal projector (llama.cpp's
                                     * --mmproj); NULL: model_dir's own, or for a GGUF folder the mmproj*.gguf it
                                     * holds */
    int threads; /* the engines' kernel threads, for which the packed weights are laid out; 0 = one per core */
} tern_model_opts;

typedef struct tern_model_info {
    const char *dir;
    int64_t vocab_size, n_layers, hidden_size, sliding_window;
    int64_t ctx_train;                 /* max_position_embeddings */
    uint64_t weights_bytes;            /* text-decoder tensors as stored */
    uint64_t kv_full_bytes_per_token;  /* bf16 K+V over full-attention layers */
    uint64_t kv_sliding_bytes_per_token; /* bf16 K+V over sliding layers (saturates at the window) */
    int threads;                       /* the thread count the packed weights are laid out for */
    int audio;                         /* 1: the model has an audio tower (chat requests may carry audio) */
    int vision;                        /* 1: the model has a vision tower (chat requests may carry images) */
} tern_model_info;

/* Loads weights (mmapped), tokenizer and chat template; errors name the file at fault. */
TERN_API TERN_MUST_CHECK tern_err *tern_model_load(const tern_model_opts *o, tern_model **out);
/* Frees the model; every engine using it must be destroyed first. NULL is fine. */
TERN_API void tern_model_free(tern_model *m);
/* Sizes and memory figures of the model. */
TERN_API void tern_model_get_info(const tern_model *m, tern_model_info *out);
/* The chat template source (NUL-terminated) and where it came from, or NULL when the model has none. */
TERN_API const char *tern_model_chat_template(const tern_model *m, const char **origin);
/* Tokenizes len bytes of text into a malloc'd array (*ids, *n; free with tern_free). add_special adds the
 * BOS the tokenizer's config asks for; parse_special turns special-token text ("<start_of_turn>") into ids. */
TERN_API TERN_MUST_CHECK tern_err *tern_model_tokenize(const tern_model *m, const char *text, size_t len, int add_special, int parse_special,
                                       int32_t **ids, size_t *n);
/* Decodes ids into a malloc'd NUL-terminated string (free with tern_free); special tokens only if render_special. */
TERN_API TERN_MUST_CHECK tern_err *tern_model_detokenize(const tern_model *m, const int32_t *ids, size_t n, int render_special, char **text,
                                         size_t *len);
/* The bytes one token decodes to on its own (malloc'd, free with tern_free), or NULL for an id out of range. */
TERN_API char *tern_model_token_piece(const tern_model *m, int32_t id, size_t *len);
/* 1 if the token ends generation by default (EOS or an end-of-turn token). */
TERN_API int tern_model_is_eog(const tern_model *m, int32_t id);
/* A model's chat format, as the model's checkpoint defines it (strings owned by the model). */
typedef struct tern_chat_info {
    int has_template;                 /* the model has a chat template */
    const char *bos, *eos;            /* the BOS / EOS texts templates print, or NULL */
    const int32_t *stop_ids;          /* every id that ends a reply by default (EOS, end of turn, ...) */
    int n_stop_ids;
    const char *turn_start, *turn_end; /* the turn markers of the vocabulary ("<|turn>", "<turn|>"), or NULL */
    const char *generation_prompt;    /* what a chat prompt ends with to open the model's turn, or NULL */
    const char *audio_start, *audio_token, *audio_end; /* media markers (start, soft token, end), or NULL */
    const char *image_start, *image_token, *image_end;
} tern_chat_info;

/* The model's chat format: stop ids, special-token texts, turn and media markers. */
TERN_API void tern_model_chat_info(const tern_model *m, tern_chat_info *out);
/* The BOS id, or -1. */
TERN_API int32_t tern_model_bos(const tern_model *m);
/* Frees memory returned by this API. */
TERN_API void tern_free(void *p);

/* ==== engines ================================================================================ */

typedef struct tern_engine tern_engine;

typedef struct tern_engine_opts {
    int parallel;              /* rows decoded together (--parallel); default 4 */
    int64_t ctx;               /* positions per request, prompt + generated; default min(ctx_train, 8192) */
    uint64_t kv_budget_bytes;  /* KV memory for all rows; 0 = parallel x ctx, capped by free memory */
    int64_t prefix_cache_bytes; /* prefix cache cap; < 0 = default (half the budget, within free memory), 0 = off */
    int prefix_block;          /* tokens per prefix-cache block; default 64 */
    const char *prefix_disk_dir; /* the prompt cache's disk tier (--cache-disk): blocks the prefix cache takes in are
                                  * also kept there, and found again after a restart; NULL = off */
    uint64_t prefix_disk_bytes;  /* its size cap; 0 = 10 GiB */
    int max_queue;             /* requests waiting for a row before submit says TERN_EOVERLOAD; default 64 */
    int threads;               /* kernel threads; 0 = the model's (tern_model_opts.threads) */
    int prefill_chunk;         /* most prompt tokens one row feeds per step; default 256 */
    int step_tokens;           /* most tokens in one forward (decode rows first, then prefill chunks); 0 = default:
                                * 512, or on a model that sees an image both ways (Gemma 4 12B/26B/31B) enough for
                                * its largest image beside every row's decode and drafts */
    const char *cache_type_k;  /* how K is stored (llama.cpp's --cache-type-k): "bf16" (NULL: the default), "f16",
                                * "f32", "q8_0" or "q4_0" (ggml's 8- and 4-bit blocks of 32 values) */
    const char *cache_type_v;  /* how V is stored (--cache-type-v), the same names */
    /* Speculative decoding (lossless: drafts only change speed). A request with a prediction drafts from it. */
    int draft_ngram;           /* 1: rows without a prediction draft by prompt lookup (--draft-ngram) */
    int draft_max;             /* most tokens drafted per row and step (at most 64 and prefill_chunk - 1); 0 = default
                                * 8; < 0 = speculation off */
    int draft_min;             /* fewer proposed tokens than this are not verified (plain decoding); default 1 */
    int draft_fixed;           /* 1: every decoding row drafts draft_max tokens each step, without the adaptive length
                                * and the pauses where drafting does not pay (to measure a drafter's acceptance) */
    const char *draft_model;   /* a drafter checkpoint for rows without a prediction: a Gemma 4 assistant (reads the
                                * target's cache) or a smaller model with the same vocabulary; NULL = none */
    int draft_head;            /* the assistant's head: 0 the checkpoint's choice, 1 full, 2 centroid */
} tern_engine_opts;

/* Fills the defaults (all fields 0 / -1 as documented above). */
TERN_API void tern_engine_opts_default(tern_engine_opts *o);
/* Creates an engine over `m` (which must outlive it) and starts its thread. Errors when the budget cannot
 * hold even one position, or a value is out of range. */
TERN_API TERN_MUST_CHECK tern_err *tern_engine_create(tern_model *m, const tern_engine_opts *o, tern_engine **out);
/* Stops the engine: queued and running requests finish with TERN_FINISH_CANCELLED (their DONE events are
 * delivered before this returns), then the thread is joined. Streams stay readable until freed. NULL is fine. */
TERN_API void tern_engine_destroy(tern_engine *e);

/* ==== requests =============================================================================== */

typedef struct tern_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token */
} tern_logit_bias;

typedef struct tern_sampling_params {
    float temperature;        /* 0 = greedy */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off (CTRL: divide positive logits of seen tokens, multiply negative) */
    float presence_penalty;   /* 0 = off; subtracted once from each seen token */
    float frequency_penalty;  /* 0 = off; subtracted per occurrence */
    int64_t penalty_last_n;   /* context tokens (prompt included) the penalties see; -1 = all; default 64 */
    const tern_logit_bias *logit_bias; /* copied at submit */
    int n_logit_bias;
    uint64_t seed;            /* used when has_seed; otherwise the engine picks one. With a seed of its own a request
                               * chooses the tokens it would choose without speculation (drafts are one-hot); without
                               * one, a drafter model samples its drafts at the request's temperature, which keeps
                               * more of them (verified by min(1, p/q): the output's distribution is the same) */
    int has_seed;
} tern_sampling_params;

/* Rows that stand in for prompt tokens: the soft tokens of an audio clip or an image, fed in place of their
 * placeholder ids' embeddings. */
typedef struct tern_prompt_embeds {
    int64_t pos;       /* the first prompt position they replace */
    int64_t n;         /* positions (rows) */
    const float *rows; /* [n][the model's hidden size], copied at submit */
    uint64_t key;      /* names the content (a hash of the clip): the prefix cache shares these positions only between
                        * prompts whose spans agree in key, place and length */
    int image;         /* 1: an image's soft tokens — on a model that sees an image both ways (Gemma 4 26B/31B) they
                        * attend to each other, and the span must fit the engine's prefill chunk; 0: audio, causal */
} tern_prompt_embeds;

/* How an embedding request pools its prompt's final (normed) hidden states: their mean, the last token's, or the
 * first token's (CLS-style). */
typedef enum tern_pooling { TERN_POOL_MEAN = 0, TERN_POOL_LAST, TERN_POOL_CLS } tern_pooling;

typedef struct tern_request {
    /* The prompt: token ids, or text to tokenize (exactly one of the two). */
    const int32_t *prompt_ids;
    size_t n_prompt_ids;
    const char *prompt_text;
    size_t prompt_text_len;
    int add_special;          /* text prompts: add BOS as the tokenizer config asks */
    int parse_special;        /* text prompts: special-token text becomes special tokens (rendered chat templates) */
    tern_sampling_params sampling;
    int64_t max_tokens;       /* 0 = as many as fit; always clamped to what the context and the budget hold */
    const int32_t *stop_ids;  /* extra token ids that end generation (copied) */
    int n_stop_ids;
    const char *const *stop_strings; /* end generation when the text contains one; excluded from output (copied) */
    int n_stop_strings;
    int ignore_eos;           /* 1: EOS / end-of-turn tokens do not end generation */
    int logprobs;             /* 1: report each chosen token's logprob */
    int top_logprobs;         /* 0..20 most likely alternatives per token (implies logprobs) */
    int render_special;       /* 1: special tokens appear in the event text */
    /* OpenAI predicted outputs: the expected output, as token ids or text (tokenized without special tokens),
     * drafted from; at most one of the two. */
    const int32_t *prediction_ids;
    size_t n_prediction_ids;
    const char *prediction_text;
    size_t prediction_text_len;
    int draft_max;            /* 0: the engine's; > 0: at most this many drafted tokens per step (capped by the
                               * engine's) */
    int draft_off;            /* 1: no speculation for this request */
    /* Constrained decoding: the reply must follow this GBNF grammar (llama.cpp's syntax, start rule `root`); NULL for
     * none. Added tokens (special ones, and markup such as Gemma 4's "<|channel>") never match it, unless
     * grammar_special (then an added token matches its text). End tokens are allowed exactly where the reply is a
     * complete sentence. Compiled grammars are cached by the engine. */
    const char *grammar;
    size_t grammar_len;
    int grammar_special;
    /* Soft-token spans (prompt_ids only): in prompt order, inside the prompt, not overlapping. */
    const tern_prompt_embeds *embeds;
    int n_embeds;
    /* Embedding: 1 = run the prompt only, generating nothing (sampling, stops, grammar, prediction and max_tokens
     * are not read), and deliver its hidden states pooled by `pooling` in the DONE event's `embedding`. The prefix
     * cache is not read (every position's state is computed), only filled. */
    int embed;
    tern_pooling pooling;
} tern_request;

#define TERN_MAX_STOP_STRINGS 16
#define TERN_MAX_STOP_STRING_BYTES 1024
#define TERN_MAX_STOP_IDS 64
#define TERN_MAX_LOGIT_BIAS 1024

/* The defaults: greedy, no penalties (window 64), no stops beyond EOS, max_tokens 0, no logprobs. */
TERN_API void tern_request_default(tern_request *r);

typedef enum tern_event_kind { TERN_EV_TOKEN = 1, TERN_EV_DONE = 2 } tern_event_kind;

typedef enum tern_finish {
    TERN_FINISH_NONE = 0,  /* (token events) */
    TERN_FINISH_STOP,      /* EOS / end-of-turn / stop id / stop string */
    TERN_FINISH_LENGTH,    /* max_tokens (after clamping) reached */
    TERN_FINISH_CANCELLED, /* cancelled, stream freed, or engine destroyed */
    TERN_FINISH_ERROR      /* the model failed; `error` says why */
} tern_finish;

typedef struct tern_usage {
    int64_t prompt_tokens;
    int64_t cached_tokens;     /* prompt tokens whose K/V came from the prefix cache */
    int64_t completion_tokens; /* tokens generated (a stop token counts) */
    int64_t max_tokens;        /* the effective max_tokens after clamping */
    int64_t drafted_tokens;    /* tokens proposed by draft sources and verified */
    int64_t accepted_draft_tokens;
    int64_t accepted_prediction_tokens; /* of the drafted tokens, those from the request's prediction, kept */
    int64_t rejected_prediction_tokens; /* ... and not kept */
} tern_usage;

typedef struct tern_timings {
    double queue_s;   /* submit -> admitted to a row */
    double prefill_s; /* admitted -> first token */
    double ttft_s;    /* submit -> first token */
    double decode_s;  /* first token -> finish */
} tern_timings;

typedef struct tern_event {
    tern_event_kind kind;
    uint64_t request_id;
    double time_s;            /* monotonic seconds when the engine produced the event */
    /* TOKEN */
    int32_t token;            /* the generated id */
    int64_t index;            /* 0-based position among generated tokens */
    const char *text;         /* text released by this event (TOKEN or DONE), NUL-terminated, maybe empty */
    size_t text_len;
    int has_logprob;
    float logprob;            /* log-softmax of the model's raw logits */
    int n_top;
    const int32_t *top_ids;   /* [n_top] most likely first */
    const float *top_logprobs;
    /* DONE */
    tern_finish finish;
    int32_t stop_token;       /* the id that stopped generation (STOP by token), else -1 */
    int stop_string;          /* index into stop_strings (STOP by string), else -1 */
    const char *error;        /* FINISH_ERROR: message */
    const float *embedding;   /* embedding requests (STOP): [n_embedding] the pooled final hidden state, not
                               * normalized; NULL otherwise */
    int64_t n_embedding;
    tern_usage usage;
    tern_timings timings;
} tern_event;

/* Called on the engine thread; pointers are valid during the call only. It must return quickly (copy
 * and hand off) and may call tern_engine_cancel, but not destroy the engine. */
typedef void (*tern_event_fn)(const tern_event *ev, void *user);

typedef struct tern_stream tern_stream;

/* Queues a request. With `cb`, events go to cb(ev, user) and `stream` must be NULL; without, *stream receives
 * a pollable stream (free it with tern_stream_free). *id (may be NULL) receives the request id.
 * Fails with TERN_EOVERLOAD when max_queue requests are already waiting, TERN_EINVAL when the request can
 * never run (message says why: prompt beyond the context or the KV budget, bad parameter, unknown token). */
TERN_API TERN_MUST_CHECK tern_err *tern_engine_submit(tern_engine *e, const tern_request *r, tern_event_fn cb, void *user,
                                      tern_stream **stream, uint64_t *id);
/* Cancels a request: it leaves the queue or its row at the next step and ends with TERN_FINISH_CANCELLED.
 * Returns 1 if the request was still queued or running, 0 otherwise. */
TERN_API int tern_engine_cancel(tern_engine *e, uint64_t id);

/* Waits up to timeout_ms (< 0: forever) for the next event. Returns 1 with *ev filled (its pointers stay
 * valid until the next call or tern_stream_free), 0 on timeout, -1 once the DONE event has been read. */
TERN_API int tern_stream_next(tern_stream *s, tern_event *ev, int timeout_ms);
/* The request id of a stream. */
TERN_API uint64_t tern_stream_id(const tern_stream *s);
/* Asks for cancellation (the DONE event still arrives). */
TERN_API void tern_stream_cancel(tern_stream *s);
/* Cancels the request if unfinished and frees the stream; NULL is fine. */
TERN_API void tern_stream_free(tern_stream *s);

/* ==== metrics ================================================================================ */

typedef struct tern_metrics {
    /* configuration */
    int parallel;
    int threads; /* kernel threads */
    int64_t ctx;
    uint64_t kv_budget_bytes;
    uint64_t prefix_cache_cap_bytes;
    int prefix_block;            /* tokens per prefix-cache block (0 without a prefix cache) */
    uint64_t prefix_block_bytes; /* one block's K and V over all layers */
    int max_queue;
    /* now */
    int queue_depth;          /* requests waiting for a row */
    int active_rows;          /* rows prefilling or decoding */
    int prefilling_rows;
    uint64_t kv_bytes_in_use; /* reserved by admitted requests */
    uint64_t kv_bytes_peak;
    uint64_t prefix_cache_bytes, prefix_cache_blocks;
    /* totals since creation */
    uint64_t requests_submitted, requests_rejected, requests_overloaded;
    uint64_t requests_finished[5]; /* by tern_finish */
    uint64_t prompt_tokens, cached_tokens, tokens_generated;
    uint64_t steps, step_rows;     /* forwards run, and rows summed over them (mean batch = step_rows / steps) */
    uint64_t prefix_lookups, prefix_hits, prefix_evictions;
    uint64_t prefix_hit_tokens, prefix_disk_hit_tokens; /* tokens reused, and of them those read back from disk */
    uint64_t prefix_disk_bytes, prefix_disk_cap_bytes, prefix_disk_files, prefix_disk_writes, prefix_disk_dropped,
        prefix_disk_removed_bad;
    uint64_t draft_tokens[4], draft_accepted[4]; /* by source: n-gram, prediction, assistant, draft model */
    uint64_t draft_failures;                     /* draft source errors (those rows decoded plainly) */
} tern_metrics;

/* A consistent snapshot of the engine's counters. */
TERN_API void tern_engine_metrics(tern_engine *e, tern_metrics *out);

#ifdef __cplusplus
}
#endif

#endif
