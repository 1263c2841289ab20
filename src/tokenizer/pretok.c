/* pretok.c — normalizers and pre-tokenizers: the steps between raw text and the model. Regexes run on PCRE2
 * with Unicode properties (UCP), so \p{L}, \p{N} and \s mean what they mean in Hugging Face's Oniguruma
 * patterns; subjects may hold invalid UTF-8 (it simply never matches a character class). Split behaviors
 * follow Hugging Face's `Split` pre-tokenizer exactly (see apply_split). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "core/sbuf.h"
#include "tokenizer/tok_internal.h"

/* The GPT-2 pattern, as Hugging Face's ByteLevel pre-tokenizer applies it (use_regex). */
const char *const TOK_RE_GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

tern_err *tok_regex_compile(const char *pattern, size_t len, void **out) {
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code,
                                   &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return tern_errf(TERN_EFORMAT, "regex /%.*s/: %s at offset %zu", (int)(len > 200 ? 200 : len), pattern,
                         (const char *)msg, (size_t)at);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    *out = re;
    return NULL;
}

void tok_regex_free(void *re) { pcre2_code_free(re); }

/* Oniguruma's \w (what Hugging Face's tokenizers compile tokenizer.json patterns with): alphabetic characters,
 * marks, decimal digits, connector punctuation, and four Latin-1 numerals. PCRE2's \w has letters and every
 * number instead, and no marks: "e" + U+0301 would part there. */
#define ONIG_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"

tern_err *tok_regex_compile_hf(const char *pattern, size_t len, void **out) {
    sbuf b = {0};
    int depth = 0; /* inside a character class (Oniguruma nests them) */
    for (size_t i = 0; i < len && !b.oom; i++) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < len) {
            const char n = pattern[++i];
            if (n == 'w')
                sbuf_adds(&b, depth ? ONIG_WORD : "[" ONIG_WORD "]");
            else if (n == 'W' && !depth)
                sbuf_adds(&b, "[^" ONIG_WORD "]");
            else
                sbuf_add(&b, pattern + i - 1, 2);
            continue;
        }
        if (c == '[') {
            depth++;
            sbuf_add(&b, &c, 1);
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < len && pattern[i + 1] == '^')
                sbuf_add(&b, pattern + ++i, 1);
            if (i + 1 < len && pattern[i + 1] == ']')
                sbuf_add(&b, pattern + ++i, 1);
            continue;
        }
        if (c == ']' && depth)
            depth--;
        sbuf_add(&b, &c, 1);
    }
    tern_err *e = b.oom ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
    if (!e) {
        e = tok_regex_compile(b.p ? b.p : "", b.len, out);
        if (e) { /* name the pattern as written, not as rewritten */
            tern_err_free(e);
            e = tok_regex_compile(pattern, len, out);
            if (!e) {
                tok_regex_free(*out);
                *out = NULL;
                e = tern_errf(TERN_EFORMAT, "regex /%.*s/: cannot be compiled with Oniguruma's \\w", (int)(len > 200 ? 200 : len),
                              pattern);
            }
        }
    }
    free(b.p);
    return e;
}

/* ---- piece lists ---- */

tern_err *tok_pieces_add(tok_pieces *p, const char *s, size_t n) {
    if (n == 0)
        return NULL;
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->len + n)
            cap *= 2;
        char *nb = realloc(p->buf, cap);
        if (!nb)
            return tern_errf(TERN_ENOMEM, "out of memory");
        p->buf = nb;
        p->cap = cap;
    }
    if (p->n == p->ncap) {
        size_t nc = p->ncap ? p->ncap * 2 : 64;
        size_t *ns = realloc(p->start, nc * sizeof *ns);
        if (!ns)
            return tern_errf(TERN_ENOMEM, "out of memory");
        p->start = ns;
        size_t *nl = realloc(p->plen, nc * sizeof *nl);
        if (!nl)
            return tern_errf(TERN_ENOMEM, "out of memory");
        p->plen = nl;
        p->ncap = nc;
    }
    memcpy(p->buf + p->len, s, n);
    p->start[p->n] = p->len;
    p->plen[p->n] = n;
    p->n++;
    p->len += n;
    return NULL;
}

void tok_pieces_clear(tok_pieces *p) {
    p->len = 0;
    p->n = 0;
}

void tok_pieces_free(tok_pieces *p) {
    free(p->buf);
    free(p->start);
    free(p->plen);
    memset(p, 0, sizeof *p);
}

/* ---- matching: literal or regex, all non-overlapping matches left to right ---- */

typedef struct span {
    size_t b, e;
    int is_match;
} span;

typedef struct span_list {
    span *v;
    size_t n, cap;
} span_list;

static int spans_add(span_list *l, size_t b, size_t e, int m) {
    if (b == e && !m) /* an empty match stays: it parts the text on either side (it yields no piece) */
        return 0;
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 32;
        span *nv = realloc(l->v, c * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = c;
    }
    l->v[l->n++] = (span){b, e, m};
    return 0;
}

/* Finds all matches of `re` (or of the literal) in s and lists matches and the gaps between them. */
static TERN_MUST_CHECK tern_err *find_spans(const void *re, const char *lit, size_t lit_len, const char *s, size_t n, span_list *out,
                            pcre2_match_data **md) {
    out->n = 0;
    size_t pos = 0, gap = 0;
    if (!re) {
        while (lit_len && pos + lit_len <= n) {
            const char *hit = memmem(s + pos, n - pos, lit, lit_len);
            if (!hit)
                break;
            size_t b = (size_t)(hit - s);
            if (spans_add(out, gap, b, 0) || spans_add(out, b, b + lit_len, 1))
                return tern_errf(TERN_ENOMEM, "out of memory");
            pos = gap = b + lit_len;
        }
    } else {
        if (!*md && !(*md = pcre2_match_data_create_from_pattern(re, NULL)))
            return tern_errf(TERN_ENOMEM, "out of memory");
        while (pos <= n) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, *md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* a deep backtrack: the interpreter keeps its stack on the heap */
                rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_JIT, *md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return tern_errf(TERN_EINTERNAL, "pre-tokenizer regex failed at byte %zu: %s", pos, (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(*md);
            size_t b = ov[0], e = ov[1];
            if (spans_add(out, gap, b, 0) || spans_add(out, b, e, 1))
                return tern_errf(TERN_ENOMEM, "out of memory");
            gap = e;
            /* After an empty match, look again one character on, as the reference regex engines do. */
            pos = e > b ? e : b < n ? b + tok_utf8_len((unsigned char)s[b]) : n + 1;
            if (pos > n && b < n)
                pos = n;
        }
    }
    if (spans_add(out, gap, n, 0))
        return tern_errf(TERN_ENOMEM, "out of memory");
    return NULL;
}

/* Applies a Split behavior to the spans of s and appends the resulting pieces. Mirrors Hugging Face:
 * MergedWithPrevious glues a match to a preceding gap, MergedWithNext to a following gap, Contiguous fuses
 * runs of matches, Removed drops matches, Isolated keeps everything apart; `invert` swaps matches and gaps. */
static TERN_MUST_CHECK tern_err *apply_split(split_behavior bh, int invert, const char *s, span_list *sp, tok_pieces *out) {
    if (invert)
        for (size_t i = 0; i < sp->n; i++)
            sp->v[i].is_match = !sp->v[i].is_match;
    /* Merge in place into a compact list of [b, e) ranges; `keep` marks what survives. */
    size_t k = 0;
    int prev_match = 0;
    switch (bh) {
    case SPLIT_REMOVED:
        for (size_t i = 0; i < sp->n; i++)
            if (!sp->v[i].is_match)
                sp->v[k++] = sp->v[i];
        break;
    case SPLIT_ISOLATED:
        k = sp->n;
        break;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < sp->n; i++) {
            if (sp->v[i].is_match && !prev_match && k > 0)
                sp->v[k - 1].e = sp->v[i].e;
            else
                sp->v[k++] = sp->v[i];
            prev_match = sp->v[i].is_match;
        }
        break;
    case SPLIT_MERGED_NEXT: {
        /* Walk backwards: a match absorbs the (non-match) span after it. */
        size_t w = sp->n;
        for (size_t i = sp->n; i-- > 0;) {
            span cur = sp->v[i];
            if (cur.is_match && !prev_match && w < sp->n)
                sp->v[w].b = cur.b;
            else
                sp->v[--w] = cur;
            prev_match = cur.is_match;
        }
        memmove(sp->v, sp->v + w, (sp->n - w) * sizeof *sp->v);
        k = sp->n - w;
        break;
    }
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < sp->n; i++) {
            if (k > 0 && sp->v[i].is_match == prev_match)
                sp->v[k - 1].e = sp->v[i].e;
            else
                sp->v[k++] = sp->v[i];
            prev_match = sp->v[i].is_match;
        }
        break;
    }
    for (size_t i = 0; i < k; i++)
        TERN_TRY(tok_pieces_add(out, s + sp->v[i].b, sp->v[i].e - sp->v[i].b));
    return NULL;
}

/* ---- normalizers ---- */

tern_err *tok_normalize(const tern_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len) {
    sbuf cur = {0}, nxt = {0};
    pcre2_match_data *md = NULL;
    span_list sp = {0};
    tern_err *e = NULL;
    if (sbuf_add(&cur, s, n))
        goto oom;
    for (size_t k = 0; k < t->n_norms; k++) {
        const norm_step *st = &t->norms[k];
        nxt.len = 0;
        switch (st->kind) {
        case NORM_NFC:
        case NORM_NFD:
        case NORM_NFKC:
        case NORM_NFKD:
        case NORM_LOWERCASE:
        case NORM_STRIP_ACCENTS:
            if (nxt.p == NULL && sbuf_add(&nxt, "", 0))
                goto oom;
            if ((e = tok_unicode_transform(st->kind, cur.p, cur.len, &nxt)))
                goto fail;
            break;
        case NORM_STRIP: {
            size_t b, en;
            tok_unicode_strip(cur.p, cur.len, st->strip_left, st->strip_right, &b, &en);
            if (sbuf_add(&nxt, cur.p + b, en - b))
                goto oom;
            break;
        }
        case NORM_PREPEND:
            if (cur.len == 0)
                continue;
            if (sbuf_add(&nxt, st->content, st->content_len) || sbuf_add(&nxt, cur.p, cur.len))
                goto oom;
            break;
        case NORM_REPLACE:
            if ((e = find_spans(st->regex, st->pattern, st->pattern_len, cur.p, cur.len, &sp, &md)))
                goto fail;
            if (nxt.p == NULL && sbuf_add(&nxt, "", 0))
                goto oom;
            for (size_t i = 0; i < sp.n; i++) {
                const span *x = &sp.v[i];
                if (x->is_match ? sbuf_add(&nxt, st->content, st->content_len) : sbuf_add(&nxt, cur.p + x->b, x->e - x->b))
                    goto oom;
            }
            break;
        }
        sbuf tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    free(nxt.p);
    free(sp.v);
    pcre2_match_data_free(md);
    *out = cur.p;
    *out_len = cur.len;
    return NULL;
oom:
    e = tern_errf(TERN_ENOMEM, "out of memory normalizing text");
fail:
    free(cur.p);
    free(nxt.p);
    free(sp.v);
    pcre2_match_data_free(md);
    return e;
}

/* ---- pre-tokenizers ---- */

static TERN_MUST_CHECK tern_err *split_newlines(const char *s, size_t n, tok_pieces *out) {
    size_t b = 0;
    for (size_t i = 1; i <= n; i++)
        if (i == n || (s[i] == '\n') != (s[b] == '\n')) {
            TERN_TRY(tok_pieces_add(out, s + b, i - b));
            b = i;
        }
    return NULL;
}

/* Metaspace: ' ' -> replacement, prefix the replacement unless present, then optionally split so each
 * replacement starts a piece (MergedWithNext). */
static TERN_MUST_CHECK tern_err *metaspace(const pre_step *st, const char *s, size_t n, int first, tok_pieces *out, span_list *sp,
                           pcre2_match_data **md) {
    sbuf b = {0};
    int prepend = st->add_prefix_space && (!st->prepend_first_only || first);
    /* Hugging Face prepends only when the text, its spaces replaced, does not start with the replacement. */
    const int starts = (n > 0 && s[0] == ' ') || (n >= st->replacement_len && !memcmp(s, st->replacement, st->replacement_len));
    if (prepend && !starts)
        if (sbuf_add(&b, st->replacement, st->replacement_len))
            goto oom;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ' ? sbuf_add(&b, st->replacement, st->replacement_len) : sbuf_add(&b, s + i, 1))
            goto oom;
    tern_err *e;
    if (!st->split)
        e = tok_pieces_add(out, b.p ? b.p : "", b.len);
    else if (!(e = find_spans(NULL, st->replacement, st->replacement_len, b.p ? b.p : "", b.len, sp, md)))
        e = apply_split(SPLIT_MERGED_NEXT, 0, b.p, sp, out);
    free(b.p);
    return e;
oom:
    free(b.p);
    return tern_errf(TERN_ENOMEM, "out of memory");
}

static TERN_MUST_CHECK tern_err *apply_step(const pre_step *st, const char *s, size_t n, int first, tok_pieces *out, span_list *sp,
                            pcre2_match_data **md) {
    switch (st->kind) {
    case PRE_NEWLINES:
        return split_newlines(s, n, out);
    case PRE_METASPACE:
        return metaspace(st, s, n, first, out, sp, md);
    case PRE_BYTELEVEL: {
        /* HF adds the prefix space to each split that does not start with one, then splits with the GPT-2
         * regex; the byte -> stand-in mapping happens in the model (symbols are bytes). */
        char *tmp = NULL;
        if (st->add_prefix_space && (n == 0 || s[0] != ' ')) {
            tmp = malloc(n + 1);
            if (!tmp)
                return tern_errf(TERN_ENOMEM, "out of memory");
            tmp[0] = ' ';
            memcpy(tmp + 1, s, n);
            s = tmp;
            n++;
        }
        tern_err *e;
        if (!st->regex)
            e = tok_pieces_add(out, s, n);
        else if (!(e = find_spans(st->regex, NULL, 0, s, n, sp, md)))
            e = apply_split(SPLIT_ISOLATED, 0, s, sp, out);
        free(tmp);
        return e;
    }
    case PRE_SPLIT:
    case PRE_DIGITS:
    case PRE_WHITESPACE_SPLIT:
        TERN_TRY(find_spans(st->regex, st->literal, st->literal_len, s, n, sp, md));
        return apply_split(st->behavior, st->invert, s, sp, out);
    }
    return tern_errf(TERN_EINTERNAL, "unknown pre-tokenizer step %d", (int)st->kind);
}

tern_err *tok_pretokenize(const tern_tokenizer *t, const char *s, size_t n, int first, tok_pieces *out,
                          tok_pieces *scratch) {
    tok_pieces_clear(out);
    tok_pieces_clear(scratch);
    TERN_TRY(tok_pieces_add(out, s, n));
    span_list sp = {0};
    pcre2_match_data *md = NULL;
    tern_err *e = NULL;
    for (size_t k = 0; k < t->n_pres && !e; k++) {
        tok_pieces_clear(scratch);
        for (size_t i = 0; i < out->n && !e; i++)
            e = apply_step(&t->pres[k], out->buf + out->start[i], out->plen[i], first && i == 0, scratch, &sp, &md);
        tok_pieces tmp = *out;
        *out = *scratch;
        *scratch = tmp;
    }
    free(sp.v);
    pcre2_match_data_free(md);
    return e;
}

void tok_pipeline_free(tern_tokenizer *t) {
    for (size_t i = 0; i < t->n_norms; i++) {
        free(t->norms[i].pattern);
        free(t->norms[i].content);
        if (t->norms[i].regex)
            tok_regex_free(t->norms[i].regex);
    }
    free(t->norms);
    for (size_t i = 0; i < t->n_pres; i++) {
        free(t->pres[i].literal);
        free(t->pres[i].replacement);
        if (t->pres[i].regex)
            tok_regex_free(t->pres[i].regex);
    }
    free(t->pres);
    t->norms = NULL;
    t->pres = NULL;
    t->n_norms = t->n_pres = 0;
}
