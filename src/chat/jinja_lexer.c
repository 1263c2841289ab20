/* jinja_lexer.c — template source to tokens, as @huggingface/jinja's lexer does it.
 *
 * First the source is preprocessed the way Hugging Face configures Jinja: one trailing
 * newline dropped, lstrip_blocks (spaces and tabs before a block tag at the start of a
 * line removed), trim_blocks (the newline after a block tag removed), and the
 * transformers-specific {% generation %} tags dropped. These are textual rewrites over the
 * whole source, exactly like the reference's regular expressions, so they apply inside
 * string literals too. Each step keeps a map from its output bytes back to the original
 * source so errors can name the original line and column.
 *
 * Then the tokenizer mirrors the reference: text outside tags, whitespace control with
 * "{%-", "-%}", "{{-", "-}}", "{#-", "-#}", literals, identifiers, operators, and the
 * reference's rule that "-" or "+" directly before a number is part of the number unless
 * it follows a value (so "x -1" subtracts and "[-1]" is a literal). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

/* Text being rewritten, with the original offset of every byte. */
typedef struct pp_text {
    char *s;
    uint32_t *map;
    size_t n;
} pp_text;

static void pp_free(pp_text *t) {
    free(t->s);
    free(t->map);
    t->s = NULL;
    t->map = NULL;
}

static int pp_alloc(pp_text *t, size_t cap) {
    t->s = malloc(cap + 1);
    t->map = malloc((cap + 1) * sizeof *t->map);
    t->n = 0;
    return t->s && t->map ? 0 : -1;
}

static void pp_copy(pp_text *dst, const pp_text *src, size_t from, size_t to) {
    memcpy(dst->s + dst->n, src->s + from, to - from);
    memcpy(dst->map + dst->n, src->map + from, (to - from) * sizeof *src->map);
    dst->n += to - from;
}

/* Byte length of a line terminator (\n, \r, U+2028, U+2029) at s[i], 0 if none. */
static size_t line_term_len(const char *s, size_t n, size_t i) {
    if (s[i] == '\n' || s[i] == '\r')
        return 1;
    if (i + 2 < n && (unsigned char)s[i] == 0xE2 && (unsigned char)s[i + 1] == 0x80 &&
        ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9))
        return 3;
    return 0;
}

/* lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1" */
static int pp_lstrip(const pp_text *in, pp_text *out) {
    if (pp_alloc(out, in->n))
        return -1;
    size_t i = 0;
    int line_start = 1;
    while (i < in->n) {
        if (line_start) {
            size_t j = i;
            while (j < in->n && (in->s[j] == ' ' || in->s[j] == '\t'))
                j++;
            if (j + 1 < in->n && in->s[j] == '{' && strchr("#%-", in->s[j + 1]) && in->s[j + 1])
                i = j; /* drop the indentation */
            line_start = 0;
        }
        size_t lt = line_term_len(in->s, in->n, i);
        if (lt) {
            pp_copy(out, in, i, i + lt);
            i += lt;
            line_start = 1;
        } else {
            pp_copy(out, in, i, i + 1);
            i++;
        }
    }
    return 0;
}

/* trim_blocks: /([#%-]})\n/g -> "$1" */
static int pp_trim(const pp_text *in, pp_text *out) {
    if (pp_alloc(out, in->n))
        return -1;
    for (size_t i = 0; i < in->n; i++) {
        if (in->s[i] == '\n' && i >= 2 && in->s[i - 1] == '}' && strchr("#%-", in->s[i - 2]) && in->s[i - 2])
            continue;
        pp_copy(out, in, i, i + 1);
    }
    return 0;
}

static size_t skip_js_space(const char *s, size_t n, size_t i) {
    size_t l;
    while ((l = jt_space_len(s, n, i)))
        i += l;
    return i;
}

/* If a {% generation %} / {% endgeneration %} tag (with optional "-") starts at k,
 * returns the offset after its "%}" and its strip flags; else 0. */
static size_t generation_tag(const char *s, size_t n, size_t k, int *lstrip, int *rstrip) {
    size_t p = k + 2;
    *lstrip = p < n && s[p] == '-';
    if (*lstrip)
        p++;
    p = skip_js_space(s, n, p);
    if (n - p >= 3 && !memcmp(s + p, "end", 3))
        p += 3;
    if (n - p < 10 || memcmp(s + p, "generation", 10))
        return 0;
    p = skip_js_space(s, n, p + 10);
    *rstrip = p < n && s[p] == '-';
    if (*rstrip)
        p++;
    if (n - p < 2 || s[p] != '%' || s[p + 1] != '}')
        return 0;
    return p + 2;
}

/* Start of the JS white space run that ends at `end`, not going below `floor`. */
static size_t space_run_start(const char *s, size_t n, size_t floor, size_t end) {
    while (end > floor) {
        size_t j = end - 1;
        while (j > floor && ((unsigned char)s[j] & 0xC0) == 0x80)
            j--;
        if (jt_space_len(s, n, j) != end - j)
            break;
        end = j;
    }
    return end;
}

/* /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/g -> keep the surrounding white space
 * unless the tag's "-" strips it. */
static int pp_generation(const pp_text *in, pp_text *out) {
    if (pp_alloc(out, in->n))
        return -1;
    size_t copied = 0, i = 0;
    while (i + 1 < in->n) {
        if (in->s[i] != '{' || in->s[i + 1] != '%') {
            i++;
            continue;
        }
        int lstrip, rstrip;
        size_t after = generation_tag(in->s, in->n, i, &lstrip, &rstrip);
        if (!after) {
            i++;
            continue;
        }
        size_t ws_start = space_run_start(in->s, in->n, copied, i);
        size_t ws_end = skip_js_space(in->s, in->n, after);
        pp_copy(out, in, copied, ws_start);
        if (!lstrip)
            pp_copy(out, in, ws_start, i);
        if (!rstrip)
            pp_copy(out, in, after, ws_end);
        copied = i = ws_end;
    }
    pp_copy(out, in, copied, in->n);
    return 0;
}

/* ------------------------------------------------------------------ tokenizer */

typedef struct lexer {
    const char *name, *orig;
    size_t orig_len;
    const char *s; /* preprocessed */
    const uint32_t *map;
    size_t n, pos;
    jarena *arena;
    jtoken *toks;
    size_t count, cap;
    tern_err *err;
} lexer;

static uint32_t orig_pos(const lexer *L, size_t i) {
    if (i < L->n)
        return L->map[i];
    return (uint32_t)L->orig_len;
}

static int lex_fail(lexer *L, size_t i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int lex_fail(lexer *L, size_t i, const char *fmt, ...) {
    char where[256], msg[512];
    jinja_where(L->name, L->orig, L->orig_len, orig_pos(L, i), where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!L->err)
        L->err = tern_errf(TERN_EFORMAT, "%s%s", where, msg);
    return -1;
}

static int push(lexer *L, jtok_type t, const char *s, size_t n, size_t at) {
    if (L->count == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtoken *nt = realloc(L->toks, cap * sizeof *nt);
        if (!nt)
            return lex_fail(L, at, "out of memory");
        L->toks = nt;
        L->cap = cap;
    }
    L->toks[L->count++] = (jtoken){t, s, n, orig_pos(L, at)};
    return 0;
}

static jtok_type last_type(const lexer *L) { return L->count ? L->toks[L->count - 1].type : TK_EOF; }

/* {%- / {{- / {#-: trimEnd the preceding text token, dropping it if that empties it. */
static void strip_trailing(lexer *L) {
    if (!L->count || L->toks[L->count - 1].type != TK_TEXT)
        return;
    jtoken *t = &L->toks[L->count - 1];
    t->n = space_run_start(t->s, t->n, 0, t->n);
    if (t->n == 0)
        L->count--;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads `len` hex digits at s[i]; -1 if they are not all there. */
static long read_hex(const lexer *L, size_t i, int len) {
    if (L->n - i < (size_t)len)
        return -1;
    long v = 0;
    for (int k = 0; k < len; k++) {
        int h = hexval(L->s[i + (size_t)k]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* A quoted string starting at L->pos (the quote); escapes resolved into arena memory. */
static int lex_string(lexer *L) {
    size_t start = L->pos;
    char quote = L->s[L->pos++];
    /* find the closing quote first: the decoded form is never longer than the source */
    size_t end = L->pos;
    while (end < L->n && L->s[end] != quote)
        end += L->s[end] == '\\' ? 2 : 1;
    char *buf = ja_alloc(L->arena, (end < L->n ? end : L->n) - L->pos + 1);
    if (!buf)
        return lex_fail(L, start, "out of memory");
    size_t bn = 0;
    for (;;) {
        if (L->pos >= L->n)
            return lex_fail(L, start, "unterminated string literal");
        char c = L->s[L->pos];
        if (c == quote)
            break;
        if (c != '\\') {
            buf[bn++] = c;
            L->pos++;
            continue;
        }
        size_t esc_at = L->pos++;
        if (L->pos >= L->n)
            return lex_fail(L, start, "unterminated string literal");
        char e = L->s[L->pos++];
        long cp;
        switch (e) {
        case 'n': buf[bn++] = '\n'; break;
        case 't': buf[bn++] = '\t'; break;
        case 'r': buf[bn++] = '\r'; break;
        case 'b': buf[bn++] = '\b'; break;
        case 'f': buf[bn++] = '\f'; break;
        case 'v': buf[bn++] = '\v'; break;
        case '\'': buf[bn++] = '\''; break;
        case '"': buf[bn++] = '"'; break;
        case '\\': buf[bn++] = '\\'; break;
        case 'x':
        case 'u':
            cp = read_hex(L, L->pos, e == 'x' ? 2 : 4);
            if (cp < 0)
                return lex_fail(L, esc_at, "invalid hexadecimal escape sequence \\%c", e);
            L->pos += e == 'x' ? 2 : 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && L->n - L->pos >= 6 && L->s[L->pos] == '\\' &&
                L->s[L->pos + 1] == 'u') {
                long lo = read_hex(L, L->pos + 2, 4);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    L->pos += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return lex_fail(L, esc_at, "unsupported: a lone UTF-16 surrogate escape in a string literal");
            bn += tern_utf8_put((uint32_t)cp, buf + bn);
            break;
        default:
            return lex_fail(L, esc_at, "unexpected escaped character '%c'", e);
        }
    }
    L->pos++; /* closing quote */
    buf[bn] = 0;
    return push(L, TK_STR, buf, bn, start);
}

static const struct {
    const char *seq;
    jtok_type type;
} op_table[] = {
    {"{%", TK_OPEN_STMT}, {"%}", TK_CLOSE_STMT}, {"{{", TK_OPEN_EXPR}, {"}}", TK_CLOSE_EXPR},
    {"(", TK_LPAREN},     {")", TK_RPAREN},      {"{", TK_LBRACE},     {"}", TK_RBRACE},
    {"[", TK_LBRACKET},   {"]", TK_RBRACKET},    {",", TK_COMMA},      {".", TK_DOT},
    {":", TK_COLON},      {"|", TK_PIPE},        {"<=", TK_CMP},       {">=", TK_CMP},
    {"==", TK_CMP},       {"!=", TK_CMP},        {"<", TK_CMP},        {">", TK_CMP},
    {"+", TK_ADD},        {"-", TK_ADD},         {"~", TK_ADD},        {"**", TK_POW},
    {"*", TK_MUL},        {"//", TK_MUL},        {"/", TK_MUL},        {"%", TK_MUL},
    {"=", TK_EQUALS},
};

static int starts(const lexer *L, const char *lit) {
    size_t k = strlen(lit);
    return L->n - L->pos >= k && !memcmp(L->s + L->pos, lit, k);
}

static int tokenize(lexer *L) {
    int curly = 0;
    while (L->pos < L->n) {
        jtok_type lt = last_type(L);
        if (lt == TK_EOF || lt == TK_CLOSE_STMT || lt == TK_CLOSE_EXPR || lt == TK_COMMENT) {
            size_t start = L->pos;
            while (L->pos < L->n && !(L->s[L->pos] == '{' && L->pos + 1 < L->n &&
                                      (L->s[L->pos + 1] == '%' || L->s[L->pos + 1] == '{' || L->s[L->pos + 1] == '#')))
                L->pos++;
            if (L->pos > start) {
                if (push(L, TK_TEXT, L->s + start, L->pos - start, start))
                    return -1;
                continue;
            }
        }
        if (starts(L, "{#")) {
            size_t start = L->pos;
            L->pos += 2;
            int strip_before = L->pos < L->n && L->s[L->pos] == '-';
            if (strip_before)
                L->pos++;
            size_t body = L->pos;
            while (!(L->pos + 1 < L->n && L->s[L->pos] == '#' && L->s[L->pos + 1] == '}')) {
                if (L->pos + 2 >= L->n)
                    return lex_fail(L, start, "unterminated comment (missing '#}')");
                L->pos++;
            }
            int strip_after = L->pos > body && L->s[L->pos - 1] == '-';
            if (strip_before)
                strip_trailing(L);
            if (push(L, TK_COMMENT, L->s + body, L->pos - body, start))
                return -1;
            L->pos += 2;
            if (strip_after)
                L->pos = skip_js_space(L->s, L->n, L->pos);
            continue;
        }
        if (starts(L, "{%-")) {
            strip_trailing(L);
            if (push(L, TK_OPEN_STMT, "{%", 2, L->pos))
                return -1;
            L->pos += 3;
            continue;
        }
        if (starts(L, "{{-")) {
            strip_trailing(L);
            if (push(L, TK_OPEN_EXPR, "{{", 2, L->pos))
                return -1;
            curly = 0;
            L->pos += 3;
            continue;
        }
        size_t ws = skip_js_space(L->s, L->n, L->pos);
        if (ws > L->pos && ws >= L->n)
            return lex_fail(L, L->pos, "unexpected end of template inside a tag");
        L->pos = ws;
        if (L->pos >= L->n)
            break;
        if (starts(L, "-%}")) {
            if (push(L, TK_CLOSE_STMT, "%}", 2, L->pos))
                return -1;
            L->pos = skip_js_space(L->s, L->n, L->pos + 3);
            continue;
        }
        if (starts(L, "-}}")) {
            if (push(L, TK_CLOSE_EXPR, "}}", 2, L->pos))
                return -1;
            L->pos = skip_js_space(L->s, L->n, L->pos + 3);
            continue;
        }
        char c = L->s[L->pos];
        if (c == '-' || c == '+') {
            lt = last_type(L);
            if (lt == TK_TEXT || lt == TK_EOF)
                return lex_fail(L, L->pos, "unexpected character '%c'", c);
            if (!(lt == TK_IDENT || lt == TK_NUM || lt == TK_STR || lt == TK_RPAREN || lt == TK_RBRACKET)) {
                /* a sign: part of a number literal if digits follow */
                size_t start = L->pos++;
                size_t d = L->pos;
                while (L->pos < L->n && is_digit(L->s[L->pos]))
                    L->pos++;
                if (L->pos > d && L->pos + 1 < L->n && L->s[L->pos] == '.' && is_digit(L->s[L->pos + 1])) {
                    L->pos++;
                    while (L->pos < L->n && is_digit(L->s[L->pos]))
                        L->pos++;
                }
                if (L->pos > d && L->pos >= L->n)
                    return lex_fail(L, start, "unexpected end of template inside a tag");
                if (push(L, L->pos > d ? TK_NUM : TK_UNARY, L->s + start, L->pos - start, start))
                    return -1;
                continue;
            }
        }
        int matched = 0;
        for (size_t k = 0; k < sizeof op_table / sizeof op_table[0]; k++) {
            if (op_table[k].type == TK_CLOSE_EXPR && curly > 0)
                continue;
            if (!starts(L, op_table[k].seq))
                continue;
            size_t len = strlen(op_table[k].seq);
            if (push(L, op_table[k].type, L->s + L->pos, len, L->pos))
                return -1;
            if (op_table[k].type == TK_OPEN_EXPR)
                curly = 0;
            else if (op_table[k].type == TK_LBRACE)
                curly++;
            else if (op_table[k].type == TK_RBRACE)
                curly--;
            L->pos += len;
            matched = 1;
            break;
        }
        if (matched)
            continue;
        if (c == '\'' || c == '"') {
            if (lex_string(L))
                return -1;
            continue;
        }
        if (is_digit(c)) {
            size_t start = L->pos;
            while (L->pos < L->n && is_digit(L->s[L->pos]))
                L->pos++;
            if (last_type(L) != TK_DOT && L->pos + 1 < L->n && L->s[L->pos] == '.' && is_digit(L->s[L->pos + 1])) {
                L->pos++;
                while (L->pos < L->n && is_digit(L->s[L->pos]))
                    L->pos++;
            }
            if (L->pos >= L->n)
                return lex_fail(L, start, "unexpected end of template inside a tag");
            if (push(L, TK_NUM, L->s + start, L->pos - start, start))
                return -1;
            continue;
        }
        if (is_word(c)) {
            size_t start = L->pos;
            while (L->pos < L->n && is_word(L->s[L->pos]))
                L->pos++;
            if (L->pos >= L->n)
                return lex_fail(L, start, "unexpected end of template inside a tag");
            if (push(L, TK_IDENT, L->s + start, L->pos - start, start))
                return -1;
            continue;
        }
        if ((unsigned char)c >= 0x80) {
            size_t len;
            uint32_t cp = tern_utf8_decode_loose((const unsigned char *)L->s + L->pos, L->n - L->pos, &len);
            return lex_fail(L, L->pos, "unexpected character U+%04X inside a tag", (unsigned)cp);
        }
        return lex_fail(L, L->pos, "unexpected character '%c'", c);
    }
    return push(L, TK_EOF, "", 0, L->n);
}

tern_err *jinja_lex(const char *name, const char *src, size_t len, jarena *arena, jtoken **out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (len >= UINT32_MAX)
        return tern_errf(TERN_EINVAL, "%s: template of %zu bytes is too large", name, len);
    pp_text a = {0}, b = {0};
    if (pp_alloc(&a, len)) {
        pp_free(&a);
        return tern_errf(TERN_ENOMEM, "%s: out of memory", name);
    }
    memcpy(a.s, src, len);
    for (size_t i = 0; i < len; i++)
        a.map[i] = (uint32_t)i;
    a.n = len;
    if (a.n && a.s[a.n - 1] == '\n')
        a.n--;
    int rc = pp_lstrip(&a, &b);
    pp_free(&a);
    if (!rc)
        rc = pp_trim(&b, &a);
    pp_free(&b);
    if (!rc)
        rc = pp_generation(&a, &b);
    pp_free(&a);
    if (rc) {
        pp_free(&b);
        return tern_errf(TERN_ENOMEM, "%s: out of memory", name);
    }
    /* the token strings point into the preprocessed text: keep it in the arena */
    char *text = ja_strdup(arena, b.s, b.n);
    if (!text) {
        pp_free(&b);
        return tern_errf(TERN_ENOMEM, "%s: out of memory", name);
    }
    lexer L = {.name = name, .orig = src, .orig_len = len, .s = text, .map = b.map, .n = b.n, .arena = arena};
    int bad = tokenize(&L);
    pp_free(&b);
    if (bad) {
        free(L.toks);
        return L.err ? L.err : tern_errf(TERN_EINTERNAL, "%s: tokenizer failed", name);
    }
    /* move the tokens into the arena so the caller frees nothing */
    jtoken *toks = ja_alloc(arena, L.count * sizeof *toks);
    if (!toks) {
        free(L.toks);
        return tern_errf(TERN_ENOMEM, "%s: out of memory", name);
    }
    memcpy(toks, L.toks, L.count * sizeof *toks);
    free(L.toks);
    *out = toks;
    *count = L.count;
    return NULL;
}
