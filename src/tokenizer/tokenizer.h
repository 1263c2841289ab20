/* tokenizer.h — text <-> token ids for the models tern runs.
 *
 * Two families, loaded from a Hugging Face `tokenizer.json` (+ `tokenizer_config.json`) or from GGUF vocab
 * metadata (`tokenizer.ggml.*`):
 *   - SentencePiece-style: spaces become U+2581 "▁", BPE by merge rank (Gemma) or by piece score (Llama-2
 *     GGUF "llama" vocabularies), unknown characters fall back to <0xXX> byte tokens;
 *   - byte-level BPE (GPT-2, Llama 3, Qwen): a pre-tokenizer regex with Unicode categories (PCRE2, UCP)
 *     splits the text, every byte maps to a printable stand-in character, BPE by merge rank.
 * Added/special tokens are matched before the model runs: tokens that are not special (user-defined) always,
 * special (control) tokens only when the caller asks to parse special text.
 *
 * A loaded tokenizer is immutable: encode/decode may run on many threads at once. Decoding never emits a
 * broken UTF-8 sequence; the streaming decoder holds back the bytes of an incomplete character until the
 * token that completes it arrives. */
#ifndef TERN_TOKENIZER_TOKENIZER_H
#define TERN_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef int32_t tern_token;
#define TERN_TOKEN_NONE (-1)

typedef struct tern_tokenizer tern_tokenizer;
struct tern_gguf;

/* A growable list of token ids (zero-initialise before first use; free with tern_tokens_free). */
typedef struct tern_tokens {
    tern_token *ids;
    size_t n, cap;
} tern_tokens;

/* Loads from a model directory (tokenizer.json, plus tokenizer_config.json when present), a tokenizer.json
 * file, or a GGUF file (model or vocab-only); the kind is decided by what `path` is and holds. */
TERN_MUST_CHECK tern_err *tern_tokenizer_load(const char *path, tern_tokenizer **out);
/* Loads a model directory: dir/tokenizer.json (required) and dir/tokenizer_config.json (optional). */
TERN_MUST_CHECK tern_err *tern_tokenizer_load_dir(const char *dir, tern_tokenizer **out);
/* Loads a tokenizer.json file and, if config_path is not NULL, its tokenizer_config.json. */
TERN_MUST_CHECK tern_err *tern_tokenizer_load_hf(const char *json_path, const char *config_path, tern_tokenizer **out);
/* Loads from JSON text in memory (config_json may be NULL); `name` prefixes errors. */
TERN_MUST_CHECK tern_err *tern_tokenizer_load_hf_buf(const char *json, size_t json_len, const char *config_json, size_t config_len,
                                     const char *name, tern_tokenizer **out);
/* Loads the vocabulary stored in a GGUF file. */
TERN_MUST_CHECK tern_err *tern_tokenizer_load_gguf(const char *path, tern_tokenizer **out);
/* The same with the pre-tokenizer named `pre` (a tokenizer.ggml.pre name) instead of the file's; NULL: the file's. */
TERN_MUST_CHECK tern_err *tern_tokenizer_load_gguf_pre(const char *path, const char *pre, tern_tokenizer **out);
/* Loads the vocabulary from an open GGUF (nothing is kept pointing into it afterwards). */
TERN_MUST_CHECK tern_err *tern_tokenizer_from_gguf(const struct tern_gguf *g, tern_tokenizer **out);
/* Frees the tokenizer; NULL is fine. */
void tern_tokenizer_free(tern_tokenizer *t);

/* Calls piece(ctx, s, n) for each piece the normalizers and pre-tokenizers make of plain text (added and special
 * tokens are not split out), in order: what the model then tokenizes piece by piece. For tests and tools. */
TERN_MUST_CHECK tern_err *tern_pretokenize(const tern_tokenizer *t, const char *text, size_t len,
                           void (*piece)(void *ctx, const char *s, size_t n), void *ctx);
/* Appends the ids of `text` (len bytes, any bytes; invalid UTF-8 goes through byte fallback) to *out.
 * add_special: add the BOS/EOS (or template) tokens the tokenizer's configuration asks for.
 * parse_special: text spelling a special token (e.g. "<bos>") becomes that token; otherwise it is plain text.
 * Tokens that are added but not special are always matched, as Hugging Face and llama.cpp do. */
TERN_MUST_CHECK tern_err *tern_tokenize(const tern_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        tern_tokens *out);
/* Appends one id to a list. */
TERN_MUST_CHECK tern_err *tern_tokens_push(tern_tokens *list, tern_token id);
/* Frees a list's storage and zeroes it. */
void tern_tokens_free(tern_tokens *list);

/* Decodes ids to a malloc'd NUL-terminated string (*out_len excludes the NUL). Special tokens are written as
 * their text when render_special, else dropped. Bytes that do not form valid UTF-8 become U+FFFD. Ids out
 * of range are an error. */
TERN_MUST_CHECK tern_err *tern_detokenize(const tern_tokenizer *t, const tern_token *ids, size_t n, int render_special, char **out,
                          size_t *out_len);

/* Streaming decoder: push ids one at a time, get back only complete UTF-8 characters. */
typedef struct tern_detok_stream tern_detok_stream;
/* Creates a stream decoder over `t` (which must outlive it). */
TERN_MUST_CHECK tern_err *tern_detok_stream_new(const tern_tokenizer *t, int render_special, tern_detok_stream **out);
/* Decodes one id; *text and *len receive the newly complete text (possibly empty), valid until the next call. */
TERN_MUST_CHECK tern_err *tern_detok_stream_push(tern_detok_stream *s, tern_token id, const char **text, size_t *len);
/* Ends the stream: bytes of an unfinished character come out as U+FFFD. The stream can then start anew. */
void tern_detok_stream_flush(tern_detok_stream *s, const char **text, size_t *len);
/* Frees the stream; NULL is fine. */
void tern_detok_stream_free(tern_detok_stream *s);

/* Number of ids (the largest id + 1). */
size_t tern_tokenizer_vocab_size(const tern_tokenizer *t);
/* The token's vocabulary text (e.g. "▁Hello", "Ġworld", "<0x0A>", "<bos>") and its length; NULL if out of range. */
const char *tern_tokenizer_token_text(const tern_tokenizer *t, tern_token id, size_t *len);
/* The id whose vocabulary text is exactly these bytes, or TERN_TOKEN_NONE. */
tern_token tern_tokenizer_token_id(const tern_tokenizer *t, const char *text, size_t len);
/* The bytes this token decodes to on its own (special tokens as their text), malloc'd; NULL on a bad id. */
char *tern_tokenizer_token_piece(const tern_tokenizer *t, tern_token id, size_t *len);
/* Special ids, or TERN_TOKEN_NONE when the tokenizer has none. */
tern_token tern_tokenizer_bos(const tern_tokenizer *t);
tern_token tern_tokenizer_eos(const tern_tokenizer *t);
tern_token tern_tokenizer_pad(const tern_tokenizer *t);
tern_token tern_tokenizer_unk(const tern_tokenizer *t);
/* 1 if `id` is a special (control or unknown) token: rendered only on request, matched only when parsing special. */
int tern_tokenizer_is_special(const tern_tokenizer *t, tern_token id);
/* 1 if `id` is an added token, special or not: markup matched whole when encoding (Gemma 4's "<|channel>", Qwen's
 * "<tool_call>"), never a piece of ordinary text. */
int tern_tokenizer_is_added(const tern_tokenizer *t, tern_token id);
/* 1 if `id` ends generation: EOS, or an end-of-turn control token ("<turn|>", "<end_of_turn>", "<|eot_id|>", ...). */
int tern_tokenizer_is_eog(const tern_tokenizer *t, tern_token id);
/* Whether add_special adds BOS / EOS. */
int tern_tokenizer_adds_bos(const tern_tokenizer *t);
int tern_tokenizer_adds_eos(const tern_tokenizer *t);
/* A short description ("gguf gemma4 (bpe, 262144 tokens)") for logs. */
const char *tern_tokenizer_describe(const tern_tokenizer *t);

#endif
