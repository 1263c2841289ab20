/* tok_internal.h — the tokenizer's inside, shared by its files (not part of the public API).
 *
 * A tokenizer is a vocabulary (token texts, attributes, scores, a text -> id hash), a merge table
 * ((left id, right id) -> rank, result), and a pipeline the loaders fill in from the file's declarations:
 *   special-token partition -> normalizers -> pre-tokenizers -> model (BPE by rank / SPM by score)
 *   -> post-processing (BOS/EOS)
 * and, for decoding, how one token's text becomes bytes (piece mode) plus leading-space stripping. */
#ifndef TERN_TOKENIZER_INTERNAL_H
#define TERN_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

/* ---- token attributes (bit flags) ---- */
enum {
    TA_NORMAL = 1,
    TA_CONTROL = 2,  /* special: matched only with parse_special, rendered only on request */
    TA_USER = 4,     /* added but not special: always matched before the model, decoded verbatim */
    TA_BYTE = 8,     /* <0xXX> byte-fallback token */
    TA_UNKNOWN = 16, /* <unk> */
    TA_UNUSED = 32,
    TA_LSTRIP = 64,  /* added token swallows whitespace on its left */
    TA_RSTRIP = 128, /* ... and on its right */
    TA_EOG = 256,    /* ends generation */
    TA_ADDED = TA_CONTROL | TA_USER | TA_UNKNOWN, /* an added token, special or not: its text is matched whole */
};

/* ---- pipeline steps ---- */
typedef enum norm_kind {
    NORM_REPLACE,       /* replace every occurrence of a literal string (or regex) by `content` */
    NORM_PREPEND,       /* put `content` in front of a non-empty segment */
    NORM_NFC,           /* Unicode normalization forms (unicode_norm.c) */
    NORM_NFD,
    NORM_NFKC,
    NORM_NFKD,
    NORM_LOWERCASE,     /* full Unicode lowercase */
    NORM_STRIP_ACCENTS, /* drop nonspacing marks (Mn) */
    NORM_STRIP,         /* trim White_Space on the left and/or right (strip_left, strip_right) */
} norm_kind;

typedef struct norm_step {
    norm_kind kind;
    char *pattern; /* NORM_REPLACE literal */
    size_t pattern_len;
    void *regex;   /* NORM_REPLACE regex (pcre2_code *), or NULL */
    char *content;
    size_t content_len;
    int strip_left, strip_right; /* NORM_STRIP */
} norm_step;

typedef enum split_behavior {
    SPLIT_REMOVED,
    SPLIT_ISOLATED,
    SPLIT_MERGED_PREV,
    SPLIT_MERGED_NEXT,
    SPLIT_CONTIGUOUS,
} split_behavior;

typedef enum pre_kind {
    PRE_SPLIT,     /* split on a regex or literal with a behavior (HF Split; llama.cpp regex lists) */
    PRE_BYTELEVEL, /* optional prefix space + GPT-2 regex split; the byte mapping itself is done by the model */
    PRE_METASPACE, /* ' ' -> replacement, optional prefix, optional split before each replacement */
    PRE_DIGITS,    /* isolate digits (each, or runs) */
    PRE_NEWLINES,  /* runs of '\n' vs everything else (llama.cpp's gemma4 pre-tokenizer) */
    PRE_WHITESPACE_SPLIT, /* split on whitespace, dropping it */
} pre_kind;

typedef struct pre_step {
    pre_kind kind;
    split_behavior behavior;
    int invert;
    void *regex;      /* pcre2_code * for PRE_SPLIT with a regex, PRE_BYTELEVEL with use_regex */
    char *literal;    /* PRE_SPLIT with a string pattern */
    size_t literal_len;
    int add_prefix_space; /* ByteLevel / Metaspace */
    int prepend_first_only; /* Metaspace prepend_scheme "first" */
    int split;              /* Metaspace split */
    int individual_digits;  /* Digits */
    char *replacement;      /* Metaspace */
    size_t replacement_len;
} pre_step;

typedef enum model_kind {
    MODEL_BPE, /* merges by rank over symbols; byte-level or character symbols */
    MODEL_SPM, /* SentencePiece BPE by piece score (GGUF "llama") */
} model_kind;

typedef enum piece_mode {
    PIECE_RAW,       /* token text as is */
    PIECE_METASPACE, /* U+2581 -> ' ' */
    PIECE_BYTELEVEL, /* each stand-in character -> its byte */
} piece_mode;

typedef struct merge_entry {
    uint64_t key; /* (left << 32) | right, UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
} merge_entry;

struct tern_tokenizer {
    char *describe;
    /* vocabulary */
    int32_t n_vocab;
    char *pool;       /* all token texts back to back */
    size_t pool_len, pool_cap;
    uint32_t *text_off;
    uint32_t *text_len;
    uint16_t *attr;
    float *score;     /* SPM only (NULL otherwise) */
    uint64_t *hash;   /* text -> (hash tag << 32) | (id + 1), 0 empty; open addressing */
    size_t hash_cap;
    /* merges */
    merge_entry *merges;
    size_t merges_cap;
    size_t n_merges;
    /* added-token matching: distinct lengths of matchable tokens (longest first), first bytes */
    uint32_t *added_lens;
    size_t n_added_lens;
    uint8_t added_first[256];
    /* model */
    model_kind model;
    int byte_level;       /* initial symbols are bytes mapped through bytelevel_id */
    int byte_fallback;    /* unknown characters -> <0xXX> tokens */
    int fuse_unk;
    int ignore_merges;    /* a pre-token that is itself a token is not merged */
    int newline_whole;    /* a run of '\n' that is a token is taken whole (llama.cpp gemma4) */
    int space_split;      /* pieces may be cut before each ▁ (see tok_space_split_index) */
    uint32_t *no_split_after; /* code points that precede ▁ inside some token: never cut after them */
    size_t n_no_split_after;
    int32_t byte_id[256];      /* <0xXX> tokens, -1 absent */
    int32_t bytelevel_id[256]; /* byte-level stand-in character tokens, -1 absent */
    /* pipeline */
    norm_step *norms;
    size_t n_norms;
    pre_step *pres;
    size_t n_pres;
    /* post-processing for add_special */
    tern_token *prefix;
    size_t n_prefix;
    tern_token *suffix;
    size_t n_suffix;
    /* decoding */
    piece_mode piece;
    int strip_leading_space; /* drop one leading ' ' of the first normal piece */
    /* special ids */
    tern_token bos, eos, unk, pad, eot;
};

/* ---- UTF-8 ---- */
/* Length of the UTF-8 sequence a lead byte announces (1 for invalid leads, so callers always advance). */
static inline size_t tok_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}
/* Decoding and checking a character: core/utf8.h. */

/* ---- vocabulary (vocab.c) ---- */
/* Allocates the per-token arrays for n tokens (texts empty). */
TERN_MUST_CHECK tern_err *tok_vocab_alloc(tern_tokenizer *t, int32_t n, int with_scores);
/* Sets token id's text (copied into the pool); call for each id, then tok_vocab_index. */
TERN_MUST_CHECK tern_err *tok_vocab_set(tern_tokenizer *t, int32_t id, const char *text, size_t len);
/* Builds the text -> id hash; a duplicate text keeps the lower id unless `dup_error`, then fails naming both. */
TERN_MUST_CHECK tern_err *tok_vocab_index(tern_tokenizer *t, int dup_error);
/* The id of exactly these bytes, or -1. */
int32_t tok_vocab_find(const tern_tokenizer *t, const char *text, size_t len);
/* Adds a merge (left, right) -> result with `rank`; a repeated pair keeps its first (lowest) rank. */
TERN_MUST_CHECK tern_err *tok_merges_add(tern_tokenizer *t, int32_t left, int32_t right, int32_t result, int32_t rank);
/* Sizes the merge table for n merges (call before adding). */
TERN_MUST_CHECK tern_err *tok_merges_reserve(tern_tokenizer *t, size_t n);
/* Looks up a merge; returns its rank or -1, and the result id. */
int32_t tok_merges_find(const tern_tokenizer *t, int32_t left, int32_t right, int32_t *result);
/* Builds the added-token matcher from the TA_CONTROL/TA_USER/TA_UNKNOWN attributes. */
TERN_MUST_CHECK tern_err *tok_added_index(tern_tokenizer *t);
/* Fills byte_id[] from "<0xXX>" tokens and bytelevel_id[] from the GPT-2 byte stand-ins. */
void tok_byte_tables(tern_tokenizer *t);
/* The GPT-2 byte -> stand-in code point map, and its inverse (-1 for code points that are not stand-ins). */
uint32_t tok_bytelevel_cp(unsigned char b);
int tok_bytelevel_byte(uint32_t cp);
/* Enables cutting long character-level pieces before each U+2581 "▁": exact because a merge across such a
 * cut would have to produce a token holding "x▁" (x not ▁), and the characters x that do occur so are
 * recorded and never cut after. Turns the merge loop on a 1 MB line into many short ones. */
TERN_MUST_CHECK tern_err *tok_space_split_index(tern_tokenizer *t);
/* Marks well-known end-of-turn tokens and sets eot; call after attributes and special ids are known. */
void tok_find_eog(tern_tokenizer *t);
/* Sets the description string. */
void tok_set_describe(tern_tokenizer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- pre-tokenizers by tokenizer.ggml.pre name (pretok_names.c) ---- */
enum {
    TOK_PRE_IGNORE_MERGES = 1,       /* a piece that is itself a token is not merged */
    TOK_PRE_ADD_BOS = 2,             /* add_special puts BOS first, whatever the file says */
    TOK_PRE_NO_BOS = 4,              /* the vocabulary has no BOS */
    TOK_PRE_RAW_UTF8 = 8,            /* symbols are UTF-8 characters, not GPT-2 byte stand-ins */
    TOK_PRE_SPACES_AS_METASPACE = 16, /* every ' ' becomes U+2581 first (SentencePiece style) */
    TOK_PRE_NEWLINES_WHOLE = 32,     /* a run of '\n' that is a token is taken whole (Gemma 4) */
};
typedef struct tok_pre_name {
    const char *name;
    const char *const *regexes; /* applied in order, NULL-terminated */
    unsigned flags;             /* TOK_PRE_* */
} tok_pre_name;
/* The pre-tokenizer llama.cpp knows by this name (NULL or "": "default"), or NULL for a name it does not. */
const tok_pre_name *tok_pre_by_name(const char *name);

/* ---- pipeline (pretok.c) ---- */
/* Compiles a regex with Unicode properties; errors name the pattern and the position. */
TERN_MUST_CHECK tern_err *tok_regex_compile(const char *pattern, size_t len, void **out);
void tok_regex_free(void *re);
/* The same for a tokenizer.json pattern: \w and \W first take Oniguruma's meaning (Hugging Face compiles these
 * patterns with Oniguruma). */
TERN_MUST_CHECK tern_err *tok_regex_compile_hf(const char *pattern, size_t len, void **out);
/* The GPT-2 regex (Hugging Face ByteLevel with use_regex). */
extern const char *const TOK_RE_GPT2;

/* A list of text pieces (each a byte string) produced by pre-tokenization. */
typedef struct tok_pieces {
    char *buf;
    size_t len, cap;
    size_t *start;
    size_t *plen;
    size_t n, ncap;
} tok_pieces;

/* Appends a piece (copying its bytes). */
TERN_MUST_CHECK tern_err *tok_pieces_add(tok_pieces *p, const char *s, size_t n);
void tok_pieces_clear(tok_pieces *p);
void tok_pieces_free(tok_pieces *p);
/* Applies the normalizers to one segment: *out (malloc'd) / *out_len. */
TERN_MUST_CHECK tern_err *tok_normalize(const tern_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len);
/* Applies the pre-tokenizers to one normalized segment; `first` marks the text's first segment. Pieces are
 * appended to *out (scratch is reused between steps). */
TERN_MUST_CHECK tern_err *tok_pretokenize(const tern_tokenizer *t, const char *s, size_t n, int first, tok_pieces *out,
                          tok_pieces *scratch);
void tok_pipeline_free(tern_tokenizer *t);

/* ---- Unicode normalizers (unicode_norm.c) ---- */
struct sbuf;
/* Appends s[0, n) transformed by `kind` (NFC, NFD, NFKC, NFKD, LOWERCASE or STRIP_ACCENTS) to out: each run of
 * valid UTF-8 transformed, invalid bytes kept as they are. */
TERN_MUST_CHECK tern_err *tok_unicode_transform(norm_kind kind, const char *s, size_t n, struct sbuf *out);
/* The part [*b, *e) of s[0, n) left after trimming White_Space characters on the chosen sides. */
void tok_unicode_strip(const char *s, size_t n, int left, int right, size_t *b, size_t *e);

/* ---- tokenizer.json's vocabulary and merges (hf_bulk.c) ---- */
/* The document split for loading: its two large members as text, the rest for the JSON library. */
typedef struct tok_hf_bulk {
    char *rest;             /* the document with model.vocab and model.merges emptied ("{}", "[]"), or NULL */
    size_t rest_len;
    const char *vocab;      /* model.vocab's object text, or NULL when not found (rest is then NULL too) */
    size_t vocab_len;
    const char *merges;     /* model.merges' array text, or NULL */
    size_t merges_len;
} tok_hf_bulk;
/* Finds model.vocab (an object) and model.merges (an array) in a tokenizer.json text; when the walk cannot
 * follow the text, nothing is cut and the JSON library is left to read and judge all of it. */
TERN_MUST_CHECK tern_err *tok_hf_cut(const char *json, size_t len, tok_hf_bulk *out);
void tok_hf_bulk_free(tok_hf_bulk *b);
typedef tern_err *(*tok_vocab_fn)(void *ctx, const char *text, size_t len, int32_t id);
typedef tern_err *(*tok_merge_fn)(void *ctx, const char *left, size_t left_len, const char *right, size_t right_len,
                                  size_t index);
/* Calls fn for each "token": id of model.vocab's text (ids non-negative integers); stops at fn's first error. */
TERN_MUST_CHECK tern_err *tok_hf_each_vocab(const char *s, size_t n, tok_vocab_fn fn, void *ctx);
/* Calls fn for each merge of model.merges' text ("left right" or ["left", "right"]); stops at fn's first error. */
TERN_MUST_CHECK tern_err *tok_hf_each_merge(const char *s, size_t n, tok_merge_fn fn, void *ctx);

/* ---- the vocabulary and merge tables kept between loads (tok_cache.c) ---- */
/* The cache file for a tokenizer.json text (malloc'd; NULL when caching is off), and the text's key. */
char *tok_cache_path(const char *text, size_t len, uint64_t *key);
/* The same for tables keyed by the caller's hash of what they are made from (*key gets the format version). */
char *tok_cache_path_for(uint64_t *key);
/* Fills the vocabulary (texts, attributes, index) and merge tables of an empty tokenizer from the cache file
 * when it holds them for `key`, whole and unchanged: 1; otherwise 0 and the tokenizer is left as it was. */
int tok_cache_read(tern_tokenizer *t, const char *path, uint64_t key);
/* Writes the tokenizer's vocabulary and merge tables as the cache for `key`. */
TERN_MUST_CHECK tern_err *tok_cache_write(const tern_tokenizer *t, const char *path, uint64_t key);

/* ---- models (bpe.c) ---- */
/* Scratch reused across pieces of one encode call. */
typedef struct tok_work tok_work;
tok_work *tok_work_new(void);
void tok_work_free(tok_work *w);
/* Tokenizes one pre-token and appends its ids. */
TERN_MUST_CHECK tern_err *tok_model_encode(const tern_tokenizer *t, tok_work *w, const char *s, size_t n, tern_tokens *out);

#endif
