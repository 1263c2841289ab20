/* load_hf.c — builds a tokenizer from Hugging Face's tokenizer.json (+ tokenizer_config.json): the BPE model
 * (vocab, merges, byte_fallback, fuse_unk, ignore_merges, unk_token), added tokens, and the normalizer,
 * pre-tokenizer, post-processor and decoder declarations, each mapped onto the pipeline steps of
 * tok_internal.h. Declarations this build cannot honour are errors that name them, never silent changes. */
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "core/log.h"
#include "tokenizer/tok_internal.h"

#define MAX_JSON_BYTES ((size_t)1 << 30)

static const char *jstr(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int jbool(const json_t *obj, const char *key, int dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* A token name in tokenizer_config.json: a string or {"content": "..."}. */
static const char *token_name(const json_t *v) {
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v))
        return jstr(v, "content");
    return NULL;
}

static tern_token find_name(const tern_tokenizer *t, const char *s) {
    return s ? tok_vocab_find(t, s, strlen(s)) : TERN_TOKEN_NONE;
}

/* ---- model and added tokens ---- */

typedef struct vocab_ctx {
    tern_tokenizer *t;
    size_t entries;
    int64_t max_id;
} vocab_ctx;

static TERN_MUST_CHECK tern_err *vocab_count(void *ctx, const char *text, size_t len, int32_t id) {
    vocab_ctx *c = ctx;
    (void)text, (void)len;
    c->entries++;
    c->max_id = id > c->max_id ? id : c->max_id;
    return NULL;
}

static TERN_MUST_CHECK tern_err *vocab_set(void *ctx, const char *text, size_t len, int32_t id) {
    vocab_ctx *c = ctx;
    TERN_TRY(tok_vocab_set(c->t, id, text, len));
    c->t->attr[id] = TA_NORMAL;
    return NULL;
}

static TERN_MUST_CHECK tern_err *load_vocab(tern_tokenizer *t, const tok_hf_bulk *b, const json_t *added) {
    if (!b->vocab)
        return tern_errf(TERN_EFORMAT, "model.vocab: expected an object of token -> id");
    vocab_ctx c = {.t = t, .max_id = -1};
    TERN_TRY(tok_hf_each_vocab(b->vocab, b->vocab_len, vocab_count, &c));
    size_t i;
    json_t *a;
    json_array_foreach((json_t *)added, i, a) {
        const json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || !json_is_string(json_object_get(a, "content")))
            return tern_errf(TERN_EFORMAT, "added_tokens[%zu]: expected an object with an integer id and a content string", i);
        if (json_integer_value(id) > c.max_id)
            c.max_id = json_integer_value(id);
        c.entries++;
    }
    /* Ids index arrays: a file may leave holes, but not ask for far more slots than it has tokens. */
    if (c.max_id < 0 || (size_t)c.max_id >= c.entries * 4 + 1024 || c.max_id >= INT32_MAX)
        return tern_errf(TERN_EFORMAT, "token ids: largest id %lld for %zu tokens", (long long)c.max_id, c.entries);
    TERN_TRY(tok_vocab_alloc(t, (int32_t)c.max_id + 1, 0));
    for (int32_t k = 0; k < t->n_vocab; k++)
        t->attr[k] = TA_UNUSED; /* holes stay unused */
    TERN_TRY(tok_hf_each_vocab(b->vocab, b->vocab_len, vocab_set, &c));
    json_array_foreach((json_t *)added, i, a) {
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        const json_t *content = json_object_get(a, "content");
        TERN_TRY(tok_vocab_set(t, id, json_string_value(content), json_string_length(content)));
        uint16_t attr = jbool(a, "special", 0) ? TA_CONTROL : TA_USER;
        if (jbool(a, "lstrip", 0))
            attr |= TA_LSTRIP;
        if (jbool(a, "rstrip", 0))
            attr |= TA_RSTRIP;
        t->attr[id] = attr;
    }
    /* Byte-fallback tokens decode to their byte; mark them so (they are normal vocabulary entries). */
    for (int32_t k = 0; k < t->n_vocab; k++) {
        const char *s = t->pool + t->text_off[k];
        if ((t->attr[k] & TA_NORMAL) && t->text_len[k] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>')
            t->attr[k] = TA_BYTE;
    }
    return tok_vocab_index(t, 0);
}

typedef struct merge_ctx {
    tern_tokenizer *t;
    char *buf;
    size_t cap;
} merge_ctx;

static TERN_MUST_CHECK tern_err *merge_count(void *ctx, const char *l, size_t ll, const char *r, size_t rl, size_t i) {
    (void)l, (void)ll, (void)r, (void)rl, (void)i;
    ((merge_ctx *)ctx)->cap++;
    return NULL;
}

static TERN_MUST_CHECK tern_err *merge_add(void *ctx, const char *l, size_t ll, const char *r, size_t rl, size_t i) {
    merge_ctx *c = ctx;
    int32_t li = tok_vocab_find(c->t, l, ll), ri = tok_vocab_find(c->t, r, rl);
    if (li < 0 || ri < 0)
        return tern_errf(TERN_EFORMAT, "model.merges[%zu]: '%.*s' + '%.*s' names a token missing from the vocabulary", i,
                         (int)ll, l, (int)rl, r);
    if (ll + rl > c->cap) {
        char *nb = realloc(c->buf, (ll + rl) * 2 + 16);
        if (!nb)
            return tern_errf(TERN_ENOMEM, "out of memory");
        c->buf = nb;
        c->cap = (ll + rl) * 2 + 16;
    }
    memcpy(c->buf, l, ll);
    memcpy(c->buf + ll, r, rl);
    int32_t res = tok_vocab_find(c->t, c->buf, ll + rl);
    if (res < 0)
        return tern_errf(TERN_EFORMAT, "model.merges[%zu]: the merged token '%.*s' is missing from the vocabulary", i,
                         (int)(ll + rl), c->buf);
    return tok_merges_add(c->t, li, ri, res, (int32_t)i);
}

static TERN_MUST_CHECK tern_err *load_merges(tern_tokenizer *t, const tok_hf_bulk *b, const json_t *model) {
    if (!b->merges) {
        const json_t *merges = json_object_get(model, "merges");
        return merges ? tern_errf(TERN_EFORMAT, "model.merges: expected an array") : NULL;
    }
    merge_ctx c = {.t = t};
    TERN_TRY(tok_hf_each_merge(b->merges, b->merges_len, merge_count, &c));
    if (c.cap > INT32_MAX)
        return tern_errf(TERN_EFORMAT, "model.merges: too many merges");
    TERN_TRY(tok_merges_reserve(t, c.cap));
    c.cap = 0;
    tern_err *e = tok_hf_each_merge(b->merges, b->merges_len, merge_add, &c);
    free(c.buf);
    return e;
}

/* ---- normalizers ---- */

static TERN_MUST_CHECK tern_err *pattern_of(const json_t *obj, const char *what, char **lit, size_t *lit_len, void **regex) {
    const json_t *p = json_object_get(obj, "pattern");
    const char *s;
    *lit = NULL;
    *lit_len = 0;
    *regex = NULL;
    if ((s = jstr(p, "String"))) {
        size_t n = json_string_length(json_object_get(p, "String"));
        if (n == 0)
            return tern_errf(TERN_EFORMAT, "%s: empty pattern", what);
        *lit = malloc(n);
        if (!*lit)
            return tern_errf(TERN_ENOMEM, "out of memory");
        memcpy(*lit, s, n);
        *lit_len = n;
        return NULL;
    }
    if ((s = jstr(p, "Regex")))
        return tern_err_wrap(tok_regex_compile_hf(s, json_string_length(json_object_get(p, "Regex")), regex), "%s", what);
    return tern_errf(TERN_EFORMAT, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", what);
}

static TERN_MUST_CHECK tern_err *add_normalizer(tern_tokenizer *t, const json_t *n, int depth) {
    if (json_is_null(n) || !n)
        return NULL;
    const char *type = jstr(n, "type");
    if (!type)
        return tern_errf(TERN_EFORMAT, "normalizer: missing \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list) || depth > 8)
            return tern_errf(TERN_EFORMAT, "normalizer Sequence: expected a \"normalizers\" array");
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)list, i, x) TERN_TRY(add_normalizer(t, x, depth + 1));
        return NULL;
    }
    norm_step st = {0};
    if (!strcmp(type, "Replace")) {
        const char *content = jstr(n, "content");
        if (!content)
            return tern_errf(TERN_EFORMAT, "normalizer Replace: missing \"content\"");
        st.kind = NORM_REPLACE;
        TERN_TRY(pattern_of(n, "normalizer Replace", &st.pattern, &st.pattern_len, &st.regex));
        st.content = strdup(content);
        st.content_len = strlen(content);
    } else if (!strcmp(type, "Prepend")) {
        const char *p = jstr(n, "prepend");
        if (!p)
            return tern_errf(TERN_EFORMAT, "normalizer Prepend: missing \"prepend\"");
        st.kind = NORM_PREPEND;
        st.content = strdup(p);
        st.content_len = strlen(p);
    } else if (!strcmp(type, "Strip")) {
        st.kind = NORM_STRIP;
        st.strip_left = jbool(n, "strip_left", 1);
        st.strip_right = jbool(n, "strip_right", 1);
    } else {
        static const struct {
            const char *name;
            norm_kind kind;
        } plain[] = {{"NFC", NORM_NFC},           {"NFD", NORM_NFD},
                     {"NFKC", NORM_NFKC},         {"NFKD", NORM_NFKD},
                     {"Lowercase", NORM_LOWERCASE}, {"StripAccents", NORM_STRIP_ACCENTS}};
        size_t i = 0;
        while (i < sizeof plain / sizeof plain[0] && strcmp(plain[i].name, type))
            i++;
        if (i == sizeof plain / sizeof plain[0])
            return tern_errf(TERN_EUNSUPPORTED, "normalizer type '%s' is not supported", type);
        st.kind = plain[i].kind;
    }
    const int has_content = st.kind == NORM_REPLACE || st.kind == NORM_PREPEND;
    norm_step *nn = realloc(t->norms, (t->n_norms + 1) * sizeof *nn);
    if (!nn || (has_content && !st.content)) {
        if (nn)
            t->norms = nn;
        free(st.pattern);
        free(st.content);
        if (st.regex)
            tok_regex_free(st.regex);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    t->norms = nn;
    t->norms[t->n_norms++] = st;
    return NULL;
}

/* ---- pre-tokenizers ---- */

static TERN_MUST_CHECK tern_err *push_pre(tern_tokenizer *t, pre_step *st) {
    pre_step *np = realloc(t->pres, (t->n_pres + 1) * sizeof *np);
    if (!np) {
        free(st->literal);
        free(st->replacement);
        if (st->regex)
            tok_regex_free(st->regex);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    t->pres = np;
    t->pres[t->n_pres++] = *st;
    return NULL;
}

static TERN_MUST_CHECK tern_err *behavior_of(const json_t *p, const char *what, split_behavior *out) {
    const char *b = jstr(p, "behavior");
    static const struct {
        const char *name;
        split_behavior b;
    } names[] = {{"Removed", SPLIT_REMOVED},
                 {"Isolated", SPLIT_ISOLATED},
                 {"MergedWithPrevious", SPLIT_MERGED_PREV},
                 {"MergedWithNext", SPLIT_MERGED_NEXT},
                 {"Contiguous", SPLIT_CONTIGUOUS}};
    if (!b) {
        *out = SPLIT_ISOLATED;
        return NULL;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].name, b)) {
            *out = names[i].b;
            return NULL;
        }
    return tern_errf(TERN_EFORMAT, "%s: unknown behavior '%s'", what, b);
}

static TERN_MUST_CHECK tern_err *regex_step(tern_tokenizer *t, const char *re, split_behavior b, int invert) {
    pre_step st = {0};
    st.kind = PRE_SPLIT;
    st.behavior = b;
    st.invert = invert;
    TERN_TRY(tok_regex_compile_hf(re, strlen(re), &st.regex));
    return push_pre(t, &st);
}

static TERN_MUST_CHECK tern_err *add_pretokenizer(tern_tokenizer *t, const json_t *p, int depth) {
    if (!p || json_is_null(p))
        return NULL;
    const char *type = jstr(p, "type");
    if (!type)
        return tern_errf(TERN_EFORMAT, "pre_tokenizer: missing \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list) || depth > 8)
            return tern_errf(TERN_EFORMAT, "pre_tokenizer Sequence: expected a \"pretokenizers\" array");
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)list, i, x) TERN_TRY(add_pretokenizer(t, x, depth + 1));
        return NULL;
    }
    pre_step st = {0};
    if (!strcmp(type, "Split")) {
        st.kind = PRE_SPLIT;
        st.invert = jbool(p, "invert", 0);
        TERN_TRY(behavior_of(p, "pre_tokenizer Split", &st.behavior));
        TERN_TRY(pattern_of(p, "pre_tokenizer Split", &st.literal, &st.literal_len, &st.regex));
        return push_pre(t, &st);
    }
    if (!strcmp(type, "ByteLevel")) {
        st.kind = PRE_BYTELEVEL;
        st.add_prefix_space = jbool(p, "add_prefix_space", 1);
        if (jbool(p, "use_regex", 1))
            TERN_TRY(tok_regex_compile(TOK_RE_GPT2, strlen(TOK_RE_GPT2), &st.regex));
        t->byte_level = 1;
        return push_pre(t, &st);
    }
    if (!strcmp(type, "Metaspace")) {
        const char *rep = jstr(p, "replacement");
        const char *scheme = jstr(p, "prepend_scheme");
        st.kind = PRE_METASPACE;
        st.replacement = strdup(rep ? rep : "\xe2\x96\x81");
        st.replacement_len = strlen(st.replacement ? st.replacement : "");
        if (scheme) {
            st.add_prefix_space = strcmp(scheme, "never") != 0;
            st.prepend_first_only = !strcmp(scheme, "first");
        } else {
            st.add_prefix_space = jbool(p, "add_prefix_space", 1);
        }
        st.split = jbool(p, "split", 1);
        if (!st.replacement || st.replacement_len == 0) {
            free(st.replacement);
            return tern_errf(TERN_EFORMAT, "pre_tokenizer Metaspace: empty replacement");
        }
        return push_pre(t, &st);
    }
    if (!strcmp(type, "Digits"))
        return regex_step(t, jbool(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", SPLIT_ISOLATED, 0);
    if (!strcmp(type, "WhitespaceSplit"))
        return regex_step(t, "\\s+", SPLIT_REMOVED, 0);
    if (!strcmp(type, "Whitespace"))
        return regex_step(t, "\\w+|[^\\w\\s]+", SPLIT_REMOVED, 1);
    if (!strcmp(type, "Punctuation")) {
        split_behavior b;
        TERN_TRY(behavior_of(p, "pre_tokenizer Punctuation", &b));
        return regex_step(t, "[\\p{P}!-/:-@\\[-`{-~]", b, 0);
    }
    return tern_errf(TERN_EUNSUPPORTED, "pre_tokenizer type '%s' is not supported", type);
}

/* ---- post-processor: which ids add_special puts before and after ---- */

static TERN_MUST_CHECK tern_err *push_id(tern_token **list, size_t *n, tern_token id) {
    tern_token *nl = realloc(*list, (*n + 1) * sizeof *nl);
    if (!nl)
        return tern_errf(TERN_ENOMEM, "out of memory");
    *list = nl;
    nl[(*n)++] = id;
    return NULL;
}

static TERN_MUST_CHECK tern_err *special_ids(tern_tokenizer *t, const json_t *pp, const char *name, tern_token **list, size_t *n) {
    const json_t *st = json_object_get(json_object_get(pp, "special_tokens"), name);
    const json_t *ids = json_object_get(st, "ids");
    if (json_is_array(ids)) {
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)ids, i, x) {
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= t->n_vocab)
                return tern_errf(TERN_EFORMAT, "post_processor: special token '%s' has an id outside the vocabulary", name);
            TERN_TRY(push_id(list, n, (tern_token)json_integer_value(x)));
        }
        return NULL;
    }
    tern_token id = find_name(t, name);
    if (id < 0)
        return tern_errf(TERN_EFORMAT, "post_processor: special token '%s' is not in the vocabulary", name);
    return push_id(list, n, id);
}

static TERN_MUST_CHECK tern_err *add_postprocessor(tern_tokenizer *t, const json_t *pp, int depth) {
    if (!pp || json_is_null(pp))
        return NULL;
    const char *type = jstr(pp, "type");
    if (!type)
        return tern_errf(TERN_EFORMAT, "post_processor: missing \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(pp, "processors");
        if (!json_is_array(list) || depth > 8)
            return tern_errf(TERN_EFORMAT, "post_processor Sequence: expected a \"processors\" array");
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)list, i, x) TERN_TRY(add_postprocessor(t, x, depth + 1));
        return NULL;
    }
    if (!strcmp(type, "ByteLevel"))
        return NULL; /* offsets only */
    if (!strcmp(type, "TemplateProcessing")) {
        const json_t *single = json_object_get(pp, "single");
        if (!json_is_array(single))
            return tern_errf(TERN_EFORMAT, "post_processor TemplateProcessing: expected a \"single\" array");
        int after = 0;
        size_t i;
        json_t *item;
        json_array_foreach((json_t *)single, i, item) {
            if (json_object_get(item, "Sequence")) {
                after = 1;
                continue;
            }
            const char *name = jstr(json_object_get(item, "SpecialToken"), "id");
            if (!name)
                return tern_errf(TERN_EFORMAT, "post_processor TemplateProcessing: single[%zu] is neither a Sequence nor a SpecialToken", i);
            TERN_TRY(after ? special_ids(t, pp, name, &t->suffix, &t->n_suffix)
                           : special_ids(t, pp, name, &t->prefix, &t->n_prefix));
        }
        return NULL;
    }
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        const json_t *cls = json_object_get(pp, "cls"), *sep = json_object_get(pp, "sep");
        const json_t *ci = json_array_get(cls, 1), *si = json_array_get(sep, 1);
        if (!json_is_integer(ci) || !json_is_integer(si) || json_integer_value(ci) < 0 ||
            json_integer_value(ci) >= t->n_vocab || json_integer_value(si) < 0 || json_integer_value(si) >= t->n_vocab)
            return tern_errf(TERN_EFORMAT, "post_processor %s: cls/sep must be [token, id] inside the vocabulary", type);
        TERN_TRY(push_id(&t->prefix, &t->n_prefix, (tern_token)json_integer_value(ci)));
        return push_id(&t->suffix, &t->n_suffix, (tern_token)json_integer_value(si));
    }
    return tern_errf(TERN_EUNSUPPORTED, "post_processor type '%s' is not supported", type);
}

/* ---- decoder ---- */

static TERN_MUST_CHECK tern_err *add_decoder(tern_tokenizer *t, const json_t *d, int depth, int *fused) {
    if (!d || json_is_null(d))
        return NULL;
    const char *type = jstr(d, "type");
    if (!type)
        return tern_errf(TERN_EFORMAT, "decoder: missing \"type\"");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(d, "decoders");
        if (!json_is_array(list) || depth > 8)
            return tern_errf(TERN_EFORMAT, "decoder Sequence: expected a \"decoders\" array");
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)list, i, x) TERN_TRY(add_decoder(t, x, depth + 1, fused));
        return NULL;
    }
    if (!strcmp(type, "ByteLevel")) {
        t->piece = PIECE_BYTELEVEL;
        return NULL;
    }
    if (!strcmp(type, "ByteFallback"))
        return NULL; /* <0xXX> tokens always decode to their byte */
    if (!strcmp(type, "Fuse")) {
        *fused = 1;
        return NULL;
    }
    if (!strcmp(type, "Replace")) {
        const char *from = jstr(json_object_get(d, "pattern"), "String");
        const char *to = jstr(d, "content");
        if (from && to && !strcmp(from, "\xe2\x96\x81") && !strcmp(to, " ")) {
            t->piece = PIECE_METASPACE;
            return NULL;
        }
        return tern_errf(TERN_EUNSUPPORTED, "decoder Replace: only '\xe2\x96\x81' -> ' ' is supported");
    }
    if (!strcmp(type, "Metaspace")) {
        const char *scheme = jstr(d, "prepend_scheme");
        t->piece = PIECE_METASPACE;
        t->strip_leading_space = scheme ? strcmp(scheme, "never") != 0 : jbool(d, "add_prefix_space", 1);
        return NULL;
    }
    if (!strcmp(type, "Strip")) {
        const char *content = jstr(d, "content");
        const json_t *start = json_object_get(d, "start"), *stop = json_object_get(d, "stop");
        json_int_t a = json_is_integer(start) ? json_integer_value(start) : 0;
        json_int_t b = json_is_integer(stop) ? json_integer_value(stop) : 0;
        /* After Fuse the whole text is one piece, so stripping its start is stripping the stream's start. */
        if (content && !strcmp(content, " ") && a <= 1 && b == 0 && *fused) {
            t->strip_leading_space = (int)a;
            return NULL;
        }
        return tern_errf(TERN_EUNSUPPORTED, "decoder Strip: only one leading ' ' after Fuse is supported");
    }
    return tern_errf(TERN_EUNSUPPORTED, "decoder type '%s' is not supported", type);
}

/* ---- tokenizer_config.json ---- */

/* Puts `id` into (add) or out of (!add) the front of prefix / the back of suffix. */
static TERN_MUST_CHECK tern_err *force_edge(tern_token **list, size_t *n, tern_token id, int add, int front) {
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if ((*list)[i] != id)
            (*list)[k++] = (*list)[i];
    *n = k;
    if (!add)
        return NULL;
    TERN_TRY(push_id(list, n, id));
    if (front) {
        memmove(*list + 1, *list, (*n - 1) * sizeof **list);
        (*list)[0] = id;
    }
    return NULL;
}

static TERN_MUST_CHECK tern_err *apply_config(tern_tokenizer *t, const json_t *cfg) {
    static const char *const bos_names[] = {"<bos>", "<s>", "<|begin_of_text|>", NULL};
    static const char *const eos_names[] = {"<eos>", "</s>", "<|end_of_text|>", "<|endoftext|>", NULL};
    if (cfg) {
        t->bos = find_name(t, token_name(json_object_get(cfg, "bos_token")));
        t->eos = find_name(t, token_name(json_object_get(cfg, "eos_token")));
        t->pad = find_name(t, token_name(json_object_get(cfg, "pad_token")));
        tern_token unk = find_name(t, token_name(json_object_get(cfg, "unk_token")));
        if (unk >= 0)
            t->unk = unk;
    }
    /* Without a config, take BOS/EOS from the template or from the usual names. */
    if (t->bos < 0 && t->n_prefix)
        t->bos = t->prefix[0];
    for (size_t i = 0; t->bos < 0 && bos_names[i]; i++)
        if ((t->bos = find_name(t, bos_names[i])) >= 0 && !(t->attr[t->bos] & TA_CONTROL))
            t->bos = -1;
    for (size_t i = 0; t->eos < 0 && eos_names[i]; i++)
        if ((t->eos = find_name(t, eos_names[i])) >= 0 && !(t->attr[t->eos] & TA_CONTROL))
            t->eos = -1;
    const json_t *ab = json_object_get(cfg, "add_bos_token"), *ae = json_object_get(cfg, "add_eos_token");
    if (json_is_boolean(ab) && t->bos >= 0)
        TERN_TRY(force_edge(&t->prefix, &t->n_prefix, t->bos, json_is_true(ab), 1));
    if (json_is_boolean(ae) && t->eos >= 0)
        TERN_TRY(force_edge(&t->suffix, &t->n_suffix, t->eos, json_is_true(ae), 0));
    return NULL;
}

/* ---- assembly ---- */

/* The text's tables: read back from the cache when it holds them (tok_cache.c), else built and written there. */
typedef struct tables_cache {
    char *path; /* NULL: no cache */
    uint64_t key;
    int hit;
} tables_cache;

static TERN_MUST_CHECK tern_err *build(tern_tokenizer *t, const json_t *root, const tok_hf_bulk *bulk, const json_t *cfg,
                       tables_cache *tc) {
    if (!json_is_object(root))
        return tern_errf(TERN_EFORMAT, "expected a JSON object at the top level");
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return tern_errf(TERN_EFORMAT, "missing \"model\" object");
    const char *type = jstr(model, "type");
    if (type && strcmp(type, "BPE"))
        return tern_errf(TERN_EUNSUPPORTED, "model type '%s' is not supported (only BPE is)", type);
    const char *cont = jstr(model, "continuing_subword_prefix"), *suffix = jstr(model, "end_of_word_suffix");
    if ((cont && *cont) || (suffix && *suffix))
        return tern_errf(TERN_EUNSUPPORTED, "BPE with continuing_subword_prefix/end_of_word_suffix is not supported");
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added) && !json_is_null(added))
        return tern_errf(TERN_EFORMAT, "added_tokens: expected an array");

    t->bos = t->eos = t->unk = t->pad = t->eot = TERN_TOKEN_NONE;
    t->model = MODEL_BPE;
    if (!(tc->hit = tc->path && tok_cache_read(t, tc->path, tc->key))) {
        TERN_TRY(load_vocab(t, bulk, json_is_array(added) ? added : NULL));
        TERN_TRY(load_merges(t, bulk, model));
        tern_err *e = tc->path ? tok_cache_write(t, tc->path, tc->key) : NULL;
        if (e) /* costs the next load its building, nothing else */
            TLOG_WARN("%s", tern_err_msg(e));
        tern_err_free(e);
    }
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    t->fuse_unk = jbool(model, "fuse_unk", 0);
    t->ignore_merges = jbool(model, "ignore_merges", 0);
    const char *unk = jstr(model, "unk_token");
    if (unk) {
        t->unk = find_name(t, unk);
        if (t->unk >= 0 && (t->attr[t->unk] & (TA_CONTROL | TA_NORMAL)))
            t->attr[t->unk] = (uint16_t)((t->attr[t->unk] & ~(TA_CONTROL | TA_NORMAL)) | TA_UNKNOWN);
    }
    TERN_TRY(tern_err_wrap(add_normalizer(t, json_object_get(root, "normalizer"), 0), "normalizer"));
    TERN_TRY(tern_err_wrap(add_pretokenizer(t, json_object_get(root, "pre_tokenizer"), 0), "pre_tokenizer"));
    t->piece = t->byte_level ? PIECE_BYTELEVEL : PIECE_RAW;
    int fused = 0;
    TERN_TRY(tern_err_wrap(add_decoder(t, json_object_get(root, "decoder"), 0, &fused), "decoder"));
    TERN_TRY(tern_err_wrap(add_postprocessor(t, json_object_get(root, "post_processor"), 0), "post_processor"));
    TERN_TRY(tern_err_wrap(apply_config(t, cfg), "tokenizer_config.json"));
    tok_byte_tables(t);
    TERN_TRY(tok_added_index(t));
    TERN_TRY(tok_space_split_index(t));
    tok_find_eog(t);
    tok_set_describe(t, "tokenizer.json (%sbpe, %d tokens, %zu merges%s)", t->byte_level ? "byte-level " : "",
                     (int)t->n_vocab, t->n_merges, tc->hit ? ", tables from the cache" : "");
    return NULL;
}

/* Tokenizers smaller than this build their tables faster than a cache file would be found and checked. */
#define CACHE_MIN_JSON_BYTES ((size_t)1 << 20)

static TERN_MUST_CHECK tern_err *load_hf(const char *json, size_t json_len, const char *config_json, size_t config_len,
                         const char *name, int cacheable, tern_tokenizer **out) {
    *out = NULL;
    if (!name)
        name = "tokenizer.json";
    json_t *root = NULL, *cfg = NULL;
    tok_hf_bulk bulk;
    TERN_TRY(tok_hf_cut(json, json_len, &bulk));
    tern_err *e = bulk.rest ? tern_json_load_buf(bulk.rest, bulk.rest_len, name, &root)
                            : tern_json_load_buf(json, json_len, name, &root);
    if (!e && config_json)
        e = tern_json_load_buf(config_json, config_len, "tokenizer_config.json", &cfg);
    tern_tokenizer *t = e ? NULL : calloc(1, sizeof *t);
    if (!e && !t)
        e = tern_errf(TERN_ENOMEM, "out of memory");
    if (!e && cfg && !json_is_object(cfg))
        e = tern_errf(TERN_EFORMAT, "tokenizer_config.json: expected a JSON object");
    tables_cache tc = {0};
    if (!e && cacheable && json_len >= CACHE_MIN_JSON_BYTES)
        tc.path = tok_cache_path(json, json_len, &tc.key);
    if (!e)
        e = tern_err_wrap(build(t, root, &bulk, cfg, &tc), "%s", name);
    free(tc.path);
    tok_hf_bulk_free(&bulk);
    json_decref(root);
    json_decref(cfg);
    if (e) {
        tern_tokenizer_free(t);
        return e;
    }
    *out = t;
    return NULL;
}

tern_err *tern_tokenizer_load_hf_buf(const char *json, size_t json_len, const char *config_json, size_t config_len,
                                     const char *name, tern_tokenizer **out) {
    return load_hf(json, json_len, config_json, config_len, name, 0, out);
}

tern_err *tern_tokenizer_load_hf(const char *json_path, const char *config_path, tern_tokenizer **out) {
    *out = NULL;
    char *json = NULL, *cfg = NULL;
    size_t json_len = 0, cfg_len = 0;
    TERN_TRY(tern_read_file(json_path, MAX_JSON_BYTES, &json, &json_len));
    tern_err *e = config_path ? tern_read_file(config_path, 64u << 20, &cfg, &cfg_len) : NULL;
    if (!e)
        e = load_hf(json, json_len, cfg, cfg_len, json_path, 1, out);
    free(json);
    free(cfg);
    return e;
}
