/* load_gguf.c — builds a tokenizer from GGUF vocab metadata (tokenizer.ggml.*), the way llama.cpp reads it:
 *   "llama"  SentencePiece: score-ordered merges, space prefix, ▁ for spaces, <0xXX> byte fallback;
 *   "gemma4" SentencePiece-style BPE: ▁ for spaces, merges by rank, runs of newlines apart, byte fallback;
 *   "gpt2"   byte-level BPE with the pre-tokenizer named by tokenizer.ggml.pre (pretok_names.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "formats/gguf.h"
#include "tokenizer/tok_internal.h"

/* Adds a normalizer step (literal strings copied). */
static TERN_MUST_CHECK tern_err *add_norm(tern_tokenizer *t, norm_kind kind, const char *pattern, const char *content) {
    norm_step *n = realloc(t->norms, (t->n_norms + 1) * sizeof *n);
    if (!n)
        return tern_errf(TERN_ENOMEM, "out of memory");
    t->norms = n;
    norm_step *st = &t->norms[t->n_norms];
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->pattern = pattern ? strdup(pattern) : NULL;
    st->pattern_len = pattern ? strlen(pattern) : 0;
    st->content = content ? strdup(content) : NULL;
    st->content_len = content ? strlen(content) : 0;
    t->n_norms++;
    if ((pattern && !st->pattern) || (content && !st->content))
        return tern_errf(TERN_ENOMEM, "out of memory");
    return NULL;
}

/* Adds a pre-tokenizer step; a regex pattern is compiled. */
static TERN_MUST_CHECK tern_err *add_pre(tern_tokenizer *t, pre_kind kind, const char *regex) {
    pre_step *p = realloc(t->pres, (t->n_pres + 1) * sizeof *p);
    if (!p)
        return tern_errf(TERN_ENOMEM, "out of memory");
    t->pres = p;
    pre_step *st = &t->pres[t->n_pres];
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->behavior = SPLIT_ISOLATED;
    t->n_pres++;
    if (regex)
        TERN_TRY(tok_regex_compile(regex, strlen(regex), &st->regex));
    return NULL;
}

/* The pre-tokenizer a "gpt2" vocabulary names (tokenizer.ggml.pre): its regexes in order, and its flags. */
static TERN_MUST_CHECK tern_err *named_pre(tern_tokenizer *t, const char *pre, unsigned *flags) {
    const tok_pre_name *d = tok_pre_by_name(pre);
    if (!d)
        return tern_errf(TERN_EUNSUPPORTED,
                         "tokenizer.ggml.pre '%s' is not a pre-tokenizer llama.cpp knows (nor this build)", pre);
    for (size_t i = 0; d->regexes[i]; i++)
        TERN_TRY(add_pre(t, PRE_SPLIT, d->regexes[i]));
    *flags = d->flags;
    t->ignore_merges = (d->flags & TOK_PRE_IGNORE_MERGES) != 0;
    t->newline_whole = (d->flags & TOK_PRE_NEWLINES_WHOLE) != 0;
    if (d->flags & TOK_PRE_RAW_UTF8) {
        t->byte_level = 0;
        t->byte_fallback = 1;
        t->piece = d->flags & TOK_PRE_SPACES_AS_METASPACE ? PIECE_METASPACE : PIECE_RAW;
    }
    return NULL;
}

/* Reads the merges ("left right" strings) into the id-pair table; merges naming unknown tokens are skipped. */
static TERN_MUST_CHECK tern_err *load_merges(tern_tokenizer *t, const tern_gguf *g) {
    tern_gguf_array m;
    TERN_TRY(tern_gguf_get_array(g, "tokenizer.ggml.merges", &m));
    if (m.elem_type != TERN_GGUF_STRING)
        return tern_errf(TERN_EFORMAT, "tokenizer.ggml.merges: expected an array of strings, found %s",
                         tern_gguf_type_name(m.elem_type));
    if (m.count > INT32_MAX)
        return tern_errf(TERN_EFORMAT, "tokenizer.ggml.merges: %llu merges is too many", (unsigned long long)m.count);
    TERN_TRY(tok_merges_reserve(t, (size_t)m.count));
    char *buf = NULL;
    size_t cap = 0;
    for (uint64_t i = 0; i < m.count; i++) {
        tern_gguf_str s;
        tern_err *e = tern_gguf_array_str(&m, i, &s);
        if (e) {
            free(buf);
            return e;
        }
        /* The separator is the first space after the first byte (a left part may itself be a space). */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp)
            continue;
        size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        int32_t l = tok_vocab_find(t, s.ptr, ll), r = tok_vocab_find(t, sp + 1, rl);
        if (l < 0 || r < 0)
            continue;
        if (ll + rl > cap) {
            cap = (ll + rl) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return tern_errf(TERN_ENOMEM, "out of memory");
            }
            buf = nb;
        }
        memcpy(buf, s.ptr, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t res = tok_vocab_find(t, buf, ll + rl);
        if (res < 0)
            continue;
        e = tok_merges_add(t, l, r, res, (int32_t)i);
        if (e) {
            free(buf);
            return e;
        }
    }
    free(buf);
    return NULL;
}

/* Reads an optional special-token id; a value outside the vocabulary is ignored (the default stays). */
/* A special token's id into *id (left as it is when the key is absent). A value of another type is an error, as
 * llama.cpp refuses it; an id outside the vocabulary is ignored with a warning, as llama.cpp does. */
static TERN_MUST_CHECK tern_err *read_id(const tern_gguf *g, const char *key, int32_t n_vocab, tern_token *id) {
    uint32_t v;
    if (tern_gguf_find(g, key) < 0)
        return NULL;
    TERN_TRY(tern_gguf_get_u32(g, key, &v));
    if (v >= (uint32_t)n_vocab) {
        TLOG_WARN("vocabulary: %s is %u, outside the %d tokens: ignored", key, v, n_vocab);
        return NULL;
    }
    *id = (tern_token)v;
    return NULL;
}

static void read_flag(const tern_gguf *g, const char *key, int *flag) {
    int v;
    if (tern_gguf_find(g, key) < 0)
        return;
    tern_err *e = tern_gguf_get_bool(g, key, &v);
    if (!e)
        *flag = v;
    tern_err_free(e);
}

/* The bytes a string array spans in the file. */
static size_t string_array_bytes(const tern_gguf_array *a) {
    tern_gguf_str last;
    if (!a->count || tern_gguf_array_str(a, a->count - 1, &last))
        return 0;
    return (size_t)(last.ptr + last.len - (const char *)a->data);
}

/* A large byte-level or Gemma 4 vocabulary keeps its tables in the cache folder (tok_cache.c), keyed by its
 * tokens, token types and merges as stored; NULL when it is small, SentencePiece (scores), or caching is off. */
static char *tables_cache(const tern_gguf *g, int kind, const tern_gguf_array *tokens, uint64_t *key) {
    if (kind == 1 || tokens->count < 32768)
        return NULL;
    uint64_t h = tern_hash64(tokens->data, string_array_bytes(tokens), (uint64_t)kind);
    tern_gguf_array a;
    if (tern_gguf_find(g, "tokenizer.ggml.merges") >= 0 && !tern_gguf_get_array(g, "tokenizer.ggml.merges", &a) &&
        a.elem_type == TERN_GGUF_STRING)
        h = tern_hash64(a.data, string_array_bytes(&a), h);
    if (tern_gguf_find(g, "tokenizer.ggml.token_type") >= 0 && !tern_gguf_get_array(g, "tokenizer.ggml.token_type", &a))
        for (uint64_t i = 0; i < a.count; i++) {
            int64_t ty = 0;
            tern_err_free(tern_gguf_array_i64(&a, i, &ty));
            h = tern_mix64(h ^ (uint64_t)ty ^ (i << 8));
        }
    *key = h;
    return tok_cache_path_for(key);
}

static TERN_MUST_CHECK tern_err *build(tern_tokenizer *t, const tern_gguf *g, const char *pre_override, int cacheable) {
    char *model = NULL, *pre = NULL;
    TERN_TRY(tern_gguf_get_str_dup(g, "tokenizer.ggml.model", &model));
    tern_err *e = NULL;
    if (pre_override) {
        if (!(pre = strdup(pre_override)))
            e = tern_errf(TERN_ENOMEM, "out of memory");
    } else if (tern_gguf_find(g, "tokenizer.ggml.pre") >= 0)
        e = tern_gguf_get_str_dup(g, "tokenizer.ggml.pre", &pre);
    int kind = !e ? (!strcmp(model, "llama") ? 1 : !strcmp(model, "gemma4") ? 2 : !strcmp(model, "gpt2") ? 3 : 0) : 0;
    if (!e && !kind)
        e = tern_errf(TERN_EUNSUPPORTED, "tokenizer.ggml.model '%s' is not supported (llama, gemma4 and gpt2 are)",
                      model);

    tern_gguf_array tokens, scores = {0}, types = {0};
    int have_scores = 0, have_types = 0;
    if (!e)
        e = tern_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens);
    if (!e && tokens.elem_type != TERN_GGUF_STRING)
        e = tern_errf(TERN_EFORMAT, "tokenizer.ggml.tokens: expected an array of strings");
    if (!e && (tokens.count == 0 || tokens.count > INT32_MAX))
        e = tern_errf(TERN_EFORMAT, "tokenizer.ggml.tokens: %llu tokens", (unsigned long long)tokens.count);
    if (!e && tern_gguf_find(g, "tokenizer.ggml.scores") >= 0) {
        e = tern_gguf_get_array(g, "tokenizer.ggml.scores", &scores);
        if (!e && scores.count < tokens.count)
            e = tern_errf(TERN_EFORMAT, "tokenizer.ggml.scores: %llu scores for %llu tokens",
                          (unsigned long long)scores.count, (unsigned long long)tokens.count);
        have_scores = !e;
    }
    if (!e && tern_gguf_find(g, "tokenizer.ggml.token_type") >= 0) {
        e = tern_gguf_get_array(g, "tokenizer.ggml.token_type", &types);
        if (!e && types.count < tokens.count)
            e = tern_errf(TERN_EFORMAT, "tokenizer.ggml.token_type: %llu types for %llu tokens",
                          (unsigned long long)types.count, (unsigned long long)tokens.count);
        have_types = !e;
    }
    uint64_t key = 0;
    char *cache = !e && cacheable ? tables_cache(g, kind, &tokens, &key) : NULL;
    const int cached = cache && tok_cache_read(t, cache, key);
    if (!e && !cached)
        e = tok_vocab_alloc(t, (int32_t)tokens.count, kind == 1);
    for (int32_t i = 0; !e && !cached && i < t->n_vocab; i++) {
        tern_gguf_str s;
        e = tern_gguf_array_str(&tokens, (uint64_t)i, &s);
        if (!e)
            e = tok_vocab_set(t, i, s.ptr, s.len);
        if (!e && have_scores && t->score) {
            double d;
            e = tern_gguf_array_f64(&scores, (uint64_t)i, &d);
            t->score[i] = (float)d;
        }
        if (!e && have_types) {
            int64_t ty;
            e = tern_gguf_array_i64(&types, (uint64_t)i, &ty);
            /* llama.cpp token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
            static const uint16_t attr_of[] = {TA_NORMAL, TA_NORMAL, TA_UNKNOWN, TA_CONTROL, TA_USER, TA_UNUSED, TA_BYTE};
            if (!e)
                t->attr[i] = ty >= 0 && ty <= 6 ? attr_of[ty] : TA_NORMAL;
        }
    }
    if (!e && !cached)
        e = tok_vocab_index(t, 1);
    if (!e && !cached && (kind == 2 || kind == 3))
        e = load_merges(t, g);
    if (!e && cache && !cached) {
        tern_err *w = tok_cache_write(t, cache, key); /* costs the next load its building, nothing else */
        tern_err_free(w);
    }
    free(cache);

    int add_bos = 0, add_eos = 0, add_space_prefix = 0;
    unsigned pre_flags = 0;
    t->bos = t->eos = t->unk = t->pad = t->eot = TERN_TOKEN_NONE;
    if (!e && kind == 1) {
        t->model = MODEL_SPM;
        t->byte_fallback = 1;
        t->piece = PIECE_METASPACE;
        t->bos = 1 < t->n_vocab ? 1 : -1;
        t->eos = 2 < t->n_vocab ? 2 : -1;
        t->unk = 0;
        add_bos = 1;
        add_space_prefix = 1;
    } else if (!e && kind == 2) {
        t->model = MODEL_BPE;
        t->byte_fallback = 1;
        t->newline_whole = 1;
        t->piece = PIECE_METASPACE;
        e = add_pre(t, PRE_NEWLINES, NULL);
    } else if (!e && kind == 3) {
        t->model = MODEL_BPE;
        t->byte_level = 1;
        t->piece = PIECE_BYTELEVEL;
        e = named_pre(t, pre, &pre_flags);
    }
    if (!e) {
        read_flag(g, "tokenizer.ggml.add_space_prefix", &add_space_prefix);
        read_flag(g, "tokenizer.ggml.add_bos_token", &add_bos);
        read_flag(g, "tokenizer.ggml.add_eos_token", &add_eos);
        if (kind == 2 || (pre_flags & TOK_PRE_ADD_BOS))
            add_bos = 1; /* Gemma 4 and some named pre-tokenizers always start with BOS (as llama.cpp does) */
        static const char *const keys[] = {"bos", "eos", "unknown", "padding", "eot"};
        tern_token *ids[] = {&t->bos, &t->eos, &t->unk, &t->pad, &t->eot};
        for (size_t k = 0; !e && k < sizeof keys / sizeof *keys; k++) {
            char key[64];
            snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", keys[k]);
            e = read_id(g, key, t->n_vocab, ids[k]);
        }
        if (pre_flags & TOK_PRE_NO_BOS)
            t->bos = TERN_TOKEN_NONE;
        if (!e && (kind == 1 || kind == 2 || (pre_flags & TOK_PRE_SPACES_AS_METASPACE))) {
            /* SentencePiece style: optional leading space, then every space becomes ▁. */
            if (add_space_prefix)
                e = add_norm(t, NORM_PREPEND, NULL, " ");
            if (!e)
                e = add_norm(t, NORM_REPLACE, " ", "\xe2\x96\x81");
            t->strip_leading_space = add_space_prefix;
        }
    }
    if (!e && add_bos && t->bos >= 0) {
        t->prefix = malloc(sizeof *t->prefix);
        if (!t->prefix)
            e = tern_errf(TERN_ENOMEM, "out of memory");
        else
            t->prefix[t->n_prefix++] = t->bos;
    }
    if (!e && add_eos && t->eos >= 0) {
        t->suffix = malloc(sizeof *t->suffix);
        if (!t->suffix)
            e = tern_errf(TERN_ENOMEM, "out of memory");
        else
            t->suffix[t->n_suffix++] = t->eos;
    }
    if (!e) {
        tok_byte_tables(t);
        e = tok_added_index(t);
        if (!e)
            e = tok_space_split_index(t);
    }
    if (!e) {
        tok_find_eog(t);
        tok_set_describe(t, "gguf %s%s%s (%s, %d tokens, %zu merges%s)", model, pre ? "/" : "", pre ? pre : "",
                         t->model == MODEL_SPM ? "spm" : t->byte_level ? "byte-level bpe" : "bpe", (int)t->n_vocab,
                         t->n_merges, cached ? ", tables from the cache" : "");
    }
    free(model);
    free(pre);
    return e;
}

static TERN_MUST_CHECK tern_err *from_gguf(const tern_gguf *g, const char *pre, int cacheable, tern_tokenizer **out) {
    *out = NULL;
    tern_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *e = build(t, g, pre, cacheable);
    if (e) {
        tern_tokenizer_free(t);
        return tern_err_wrap(e, "%s: vocabulary", tern_gguf_name(g));
    }
    *out = t;
    return NULL;
}

tern_err *tern_tokenizer_from_gguf(const tern_gguf *g, tern_tokenizer **out) { return from_gguf(g, NULL, 0, out); }

tern_err *tern_tokenizer_load_gguf_pre(const char *path, const char *pre, tern_tokenizer **out) {
    *out = NULL;
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(path, &g));
    tern_err *e = from_gguf(g, pre, 1, out);
    tern_gguf_close(g);
    return e;
}

tern_err *tern_tokenizer_load_gguf(const char *path, tern_tokenizer **out) {
    return tern_tokenizer_load_gguf_pre(path, NULL, out);
}
