/* hf_bulk.c — tokenizer.json's two large members, model.vocab and model.merges, read straight from the text.
 *
 * A 262,144-token vocabulary with half a million merges is 15 MB of JSON; building a general JSON tree of it
 * (a string and a hash entry per token, an array per merge) took most of a server's start. Here one pass finds
 * the two members, the JSON library parses the rest of the document with them emptied ("{}" and "[]"), and the
 * members themselves are decoded in place: strings as JSON defines them (escapes, surrogate pairs, UTF-8 checked,
 * no raw control characters), ids as non-negative integers. Anything this reader does not recognise is left in
 * the document, so the JSON library sees it and reports it as before. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tokenizer/tok_internal.h"

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int hex4(const char *p, const char *end, uint32_t *out) {
    if (end - p < 4)
        return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        const int h = hexval(p[i]);
        if (h < 0)
            return 0;
        v = v << 4 | (uint32_t)h;
    }
    *out = v;
    return 1;
}

/* Decodes the JSON string whose opening quote is at p into buf (room for end - p bytes: a decoded string is never
 * longer than its text); returns the position after the closing quote, or NULL when it is not a valid string. */
static const char *decode_string(const char *p, const char *end, char *buf, size_t *len) {
    size_t n = 0;
    p++;
    while (p < end) {
        const unsigned char c = (unsigned char)*p;
        if (c == '"') {
            *len = n;
            return p + 1;
        }
        if (c < 0x20)
            return NULL;
        if (c != '\\') {
            if (c < 0x80) {
                buf[n++] = (char)c;
                p++;
                continue;
            }
            const int k = tern_utf8_check((const unsigned char *)p, (size_t)(end - p));
            if (k <= 0)
                return NULL;
            memcpy(buf + n, p, (size_t)k);
            n += (size_t)k;
            p += k;
            continue;
        }
        if (++p >= end)
            return NULL;
        uint32_t cp;
        switch (*p++) {
        case '"': buf[n++] = '"'; continue;
        case '\\': buf[n++] = '\\'; continue;
        case '/': buf[n++] = '/'; continue;
        case 'b': buf[n++] = '\b'; continue;
        case 'f': buf[n++] = '\f'; continue;
        case 'n': buf[n++] = '\n'; continue;
        case 'r': buf[n++] = '\r'; continue;
        case 't': buf[n++] = '\t'; continue;
        case 'u':
            if (!hex4(p, end, &cp))
                return NULL;
            p += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return NULL; /* a low surrogate with no high one before it */
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return NULL;
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            n += tern_utf8_put(cp, buf + n);
            continue;
        default: return NULL;
        }
    }
    return NULL;
}

/* The position after the string at p (which starts with a quote), or NULL. Escapes are skipped, not checked:
 * what is skipped here is either decoded by decode_string later or parsed by the JSON library. */
static const char *skip_string(const char *p, const char *end) {
    for (const char *from = p + 1;;) {
        const char *q = memchr(from, '"', (size_t)(end - from));
        if (!q)
            return NULL;
        size_t slashes = 0; /* an odd run of backslashes escapes the quote */
        while (q - slashes > p + 1 && q[-1 - (ptrdiff_t)slashes] == '\\')
            slashes++;
        if (!(slashes & 1))
            return q + 1;
        from = q + 1;
    }
}

/* Bytes that end a number or literal. */
static const unsigned char ends_scalar[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1, [','] = 1, [':'] = 1,
                                               [']'] = 1, ['}'] = 1, ['['] = 1, ['{'] = 1, ['"'] = 1};

/* The position after the JSON value at p, or NULL when none ends before `end`. Only the structure is followed. */
static const char *skip_value(const char *p, const char *end) {
    int depth = 0;
    do {
        p = skip_ws(p, end);
        if (p >= end)
            return NULL;
        if (*p == '"') {
            if (!(p = skip_string(p, end)))
                return NULL;
        } else if (*p == '{' || *p == '[') {
            if (++depth > 10000)
                return NULL;
            p++;
        } else if (*p == '}' || *p == ']') {
            if (--depth < 0)
                return NULL;
            p++;
        } else if (*p == ',' || *p == ':') {
            if (!depth)
                return NULL;
            p++;
        } else { /* a number or a literal */
            const char *s = p;
            while (p < end && !ends_scalar[(unsigned char)*p])
                p++;
            if (p == s)
                return NULL;
        }
    } while (depth > 0);
    return p;
}

/* Walks the members of the object at p ('{'), calling member(key, value) for each, which returns the position
 * after the value (or NULL); the position after the object, or NULL when the text is not an object the walk
 * can follow. */
typedef const char *(*member_fn)(void *ctx, const char *key, size_t key_len, const char *value, const char *end);

static const char *each_member(const char *p, const char *end, char *keybuf, member_fn member, void *ctx) {
    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        return NULL;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return p + 1;
    for (;;) {
        size_t klen = 0; /* a key longer than any this reader looks for is passed on as "" */
        const char *ke = p < end && *p == '"' ? skip_string(p, end) : NULL;
        if (!ke || (ke - p <= 4096 && !decode_string(p, end, keybuf, &klen)))
            return NULL;
        p = ke;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return NULL;
        const char *v = skip_ws(p + 1, end), *ve = v < end ? member(ctx, keybuf, klen, v, end) : NULL;
        if (!ve)
            return NULL;
        p = skip_ws(ve, end);
        if (p < end && *p == '}')
            return p + 1;
        if (p >= end || *p != ',')
            return NULL;
        p = skip_ws(p + 1, end);
    }
}

typedef struct cut_ctx {
    char *keybuf;
    tok_hf_bulk *b;
} cut_ctx;

static const char *model_member(void *ctx, const char *key, size_t klen, const char *v, const char *end) {
    tok_hf_bulk *b = ((cut_ctx *)ctx)->b;
    const char *ve = skip_value(v, end);
    if (!ve)
        return NULL;
    if (klen == 5 && !memcmp(key, "vocab", 5) && *v == '{') {
        b->vocab = v;
        b->vocab_len = (size_t)(ve - v);
    } else if (klen == 6 && !memcmp(key, "merges", 6) && *v == '[') {
        b->merges = v;
        b->merges_len = (size_t)(ve - v);
    }
    return ve;
}

static const char *top_member(void *ctx, const char *key, size_t klen, const char *v, const char *end) {
    cut_ctx *c = ctx;
    if (klen == 5 && !memcmp(key, "model", 5) && *v == '{') {
        c->b->vocab = c->b->merges = NULL; /* a repeated "model" is the JSON library's error to report */
        return each_member(v, end, c->keybuf, model_member, ctx);
    }
    return skip_value(v, end);
}

tern_err *tok_hf_cut(const char *json, size_t len, tok_hf_bulk *b) {
    memset(b, 0, sizeof *b);
    char keybuf[4096 + 8];
    const char *end = json + len;
    cut_ctx c = {.keybuf = keybuf, .b = b};
    if (!each_member(json, end, keybuf, top_member, &c) || !b->vocab) {
        b->vocab = b->merges = NULL; /* not followed: the JSON library reads (and judges) the whole text */
        return NULL;
    }
    /* Both spans lie inside "model", vocab and merges in either order. */
    const char *cut[2][2] = {{b->vocab, b->vocab + b->vocab_len}, {b->merges, b->merges ? b->merges + b->merges_len : NULL}};
    if (b->merges && b->merges < b->vocab) {
        const char *t0 = cut[0][0], *t1 = cut[0][1];
        cut[0][0] = cut[1][0], cut[0][1] = cut[1][1], cut[1][0] = t0, cut[1][1] = t1;
    }
    if (!(b->rest = malloc(len + 1)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t n = 0;
    const char *from = json;
    for (int i = 0; i < 2; i++) {
        if (!cut[i][0])
            continue;
        memcpy(b->rest + n, from, (size_t)(cut[i][0] - from));
        n += (size_t)(cut[i][0] - from);
        b->rest[n++] = cut[i][0][0];
        b->rest[n++] = cut[i][0][0] == '{' ? '}' : ']';
        from = cut[i][1];
    }
    memcpy(b->rest + n, from, (size_t)(end - from));
    b->rest_len = n + (size_t)(end - from);
    return NULL;
}

void tok_hf_bulk_free(tok_hf_bulk *b) {
    free(b->rest);
    memset(b, 0, sizeof *b);
}

/* After entry i of `what` (model.vocab or model.merges), at *p: a ',' and a next entry, or the closing bracket.
 * Moves *p to the next entry (or the bracket); an error when neither follows. */
static TERN_MUST_CHECK tern_err *next_entry(const char **p, const char *end, char close, const char *what, size_t i) {
    *p = skip_ws(*p, end);
    if (*p < end && **p == ',') {
        *p = skip_ws(*p + 1, end);
        return *p >= end || **p == close ? tern_errf(TERN_EFORMAT, "%s: a ',' after the last entry", what) : NULL;
    }
    return *p >= end || **p != close ? tern_errf(TERN_EFORMAT, "%s: expected ',' or '%c' after entry %zu", what, close, i)
                                     : NULL;
}

tern_err *tok_hf_each_vocab(const char *s, size_t n, tok_vocab_fn fn, void *ctx) {
    const char *p = s, *end = s + n;
    char *buf = malloc(n + 1);
    if (!buf)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *e = NULL;
    p = skip_ws(p + 1, end); /* past '{' */
    for (size_t i = 0; !e && p < end && *p != '}'; i++) {
        size_t len;
        const char *q = *p == '"' ? decode_string(p, end, buf, &len) : NULL;
        if (q)
            q = skip_ws(q, end);
        if (!q || *q != ':') {
            e = tern_errf(TERN_EFORMAT, "model.vocab: entry %zu is not \"token\": id", i);
            break;
        }
        q = skip_ws(q + 1, end);
        int64_t id = 0;
        const char *digits = q;
        while (q < end && *q >= '0' && *q <= '9' && id <= INT32_MAX)
            id = id * 10 + (*q++ - '0');
        if (q == digits || id > INT32_MAX || (q - digits > 1 && *digits == '0') ||
            (q < end && (*q == '.' || *q == 'e' || *q == 'E'))) {
            e = tern_errf(TERN_EFORMAT, "model.vocab['%.*s']: expected a non-negative integer id", (int)len, buf);
            break;
        }
        p = q;
        if (!(e = fn(ctx, buf, len, (int32_t)id)))
            e = next_entry(&p, end, '}', "model.vocab", i);
    }
    free(buf);
    return e;
}

tern_err *tok_hf_each_merge(const char *s, size_t n, tok_merge_fn fn, void *ctx) {
    const char *p = s, *end = s + n;
    char *buf = malloc(n + 1);
    if (!buf)
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *e = NULL;
    p = skip_ws(p + 1, end); /* past '[' */
    for (size_t i = 0; !e && p < end && *p != ']'; i++) {
        size_t ll = 0, rl = 0;
        const char *l = buf, *r = NULL, *q = NULL;
        if (*p == '"') { /* "left right" */
            if ((q = decode_string(p, end, buf, &ll))) {
                const char *sp = memchr(buf, ' ', ll);
                if (!sp) {
                    e = tern_errf(TERN_EFORMAT, "model.merges[%zu]: '%.*s' is not \"left right\"", i, (int)ll, buf);
                    break;
                }
                r = sp + 1;
                rl = ll - (size_t)(r - buf);
                ll = (size_t)(sp - buf);
            }
        } else if (*p == '[') { /* ["left", "right"] */
            q = skip_ws(p + 1, end);
            q = q < end && *q == '"' ? decode_string(q, end, buf, &ll) : NULL;
            q = q ? skip_ws(q, end) : NULL;
            if (q && q < end && *q == ',') {
                q = skip_ws(q + 1, end);
                r = buf + ll;
                q = q < end && *q == '"' ? decode_string(q, end, buf + ll, &rl) : NULL;
                q = q ? skip_ws(q, end) : NULL;
                q = q && q < end && *q == ']' ? q + 1 : NULL;
            } else
                q = NULL;
        }
        if (!q || !r) {
            e = tern_errf(TERN_EFORMAT, "model.merges[%zu]: expected \"left right\" or [left, right]", i);
            break;
        }
        p = q;
        if (!(e = fn(ctx, l, ll, r, rl, i)))
            e = next_entry(&p, end, ']', "model.merges", i);
    }
    free(buf);
    return e;
}
