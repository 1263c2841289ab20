/* test_json_schema.c — JSON Schema to GBNF (src/grammar/json_schema.h): the grammars' shape and determinism, and,
 * through a small GBNF recognizer kept in this file, which documents each grammar accepts and rejects: objects with
 * required and optional properties, additional properties, nested arrays, enums, anyOf, recursive $refs, integer
 * ranges (checked against brute force), strings with escapes, Unicode and length bounds, formats, patterns, tuples,
 * the Gemma 4 tool-call syntax; then the errors strict mode and broken schemas give, and mutated schemas that must
 * either fail cleanly or give a grammar that parses.
 *
 * The recognizer reads llama.cpp's GBNF the way the grammar compiler does (classes and \x / \u escapes are code
 * points, matched against the UTF-8 text one character at a time; repetition bounds at most 1000) and refuses what
 * the converter must not emit: undefined or twice-defined rules, a missing root, an operator after an operator.
 * Matching computes, for a node and a start offset, the set of offsets where it can end (rules memoized per offset),
 * so ambiguity costs nothing and no backtracking order matters. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "testutil.h"

/* ==== the recognizer ============================================================================================ */

enum { N_ALT, N_SEQ, N_LIT, N_CLASS, N_REF, N_REP };

typedef struct gnode {
    int kind;
    struct gnode **kid; /* N_ALT, N_SEQ: the parts; N_REP: kid[0] */
    int n_kid;
    char *text; /* N_LIT: UTF-8 bytes; N_REF: the rule name */
    size_t len;
    uint32_t (*rng)[2]; /* N_CLASS */
    int n_rng, neg;
    int rule;     /* N_REF: resolved index */
    int min, max; /* N_REP: max -1 is unbounded */
} gnode;

typedef struct gram {
    char **name;
    gnode **body;
    int n, root;
    char err[256];
    /* while matching */
    const unsigned char *s;
    size_t len, words;
    uint64_t ***memo;
    uint8_t **busy;
} gram;

typedef struct gparse {
    const char *p, *end;
    gram *g;
} gparse;

static void gnode_free(gnode *n) {
    if (!n)
        return;
    for (int i = 0; i < n->n_kid; i++)
        gnode_free(n->kid[i]);
    free(n->kid);
    free(n->text);
    free(n->rng);
    free(n);
}

static void gram_free(gram *g) {
    if (!g)
        return;
    for (int i = 0; i < g->n; i++) {
        free(g->name[i]);
        gnode_free(g->body[i]);
    }
    free(g->name);
    free(g->body);
    free(g);
}

static gnode *gnode_new(int kind) {
    gnode *n = calloc(1, sizeof *n);
    assert_non_null(n);
    n->kind = kind;
    return n;
}

static void gnode_add(gnode *n, gnode *k) {
    n->kid = realloc(n->kid, (size_t)(n->n_kid + 1) * sizeof *n->kid);
    assert_non_null(n->kid);
    n->kid[n->n_kid++] = k;
}

static int gp_fail(gparse *q, const char *what) {
    if (!q->g->err[0])
        snprintf(q->g->err, sizeof q->g->err, "%s at \"%.40s\"", what, q->p);
    return -1;
}

static int gp_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void gp_space(gparse *q, int newlines) {
    while (q->p < q->end) {
        if (*q->p == ' ' || *q->p == '\t' || (newlines && (*q->p == '\n' || *q->p == '\r')))
            q->p++;
        else if (*q->p == '#')
            while (q->p < q->end && *q->p != '\n')
                q->p++;
        else
            break;
    }
}

static int utf8_len_cp(const unsigned char *s, size_t n, uint32_t *cp) {
    if (!n)
        return 0;
    int len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    uint32_t v = len == 1 ? s[0] : len == 2 ? s[0] & 0x1fu : len == 3 ? s[0] & 0x0fu : s[0] & 0x07u;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

static int put_utf8(uint32_t cp, char *o) {
    if (cp < 0x80)
        return o[0] = (char)cp, 1;
    if (cp < 0x800)
        return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
               o[2] = (char)(0x80 | (cp & 0x3f)), 3;
    return o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
           o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

/* One character of a literal or class. */
static int gp_char(gparse *q, uint32_t *cp) {
    if (q->p >= q->end)
        return gp_fail(q, "unexpected end");
    if (*q->p == '\\') {
        char e = q->p[1];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        q->p += 2;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++, q->p++) {
                char h = q->p < q->end ? *q->p : 0;
                int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (d < 0)
                    return gp_fail(q, "bad hex escape");
                v = v << 4 | (uint32_t)d;
            }
            *cp = v;
            return 0;
        }
        switch (e) {
        case 'n': *cp = '\n'; return 0;
        case 't': *cp = '\t'; return 0;
        case 'r': *cp = '\r'; return 0;
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'': *cp = (uint32_t)e; return 0;
        default: return gp_fail(q, "unknown escape");
        }
    }
    int len = utf8_len_cp((const unsigned char *)q->p, (size_t)(q->end - q->p), cp);
    if (!len)
        return gp_fail(q, "invalid UTF-8");
    q->p += len;
    return 0;
}

static gnode *gp_alt(gparse *q, int nested, int depth);

static gnode *gp_seq(gparse *q, int nested, int depth) {
    gnode *seq = gnode_new(N_SEQ);
    int can_repeat = 0;
    for (;;) {
        gp_space(q, nested);
        if (q->p >= q->end)
            break;
        char c = *q->p;
        gnode *n = NULL;
        if (c == '"') {
            n = gnode_new(N_LIT);
            n->text = malloc((size_t)(q->end - q->p) * 4 + 1);
            assert_non_null(n->text);
            q->p++;
            while (q->p < q->end && *q->p != '"') {
                uint32_t cp;
                if (gp_char(q, &cp))
                    goto fail_n;
                n->len += (size_t)put_utf8(cp, n->text + n->len);
            }
            if (q->p >= q->end) {
                gp_fail(q, "unterminated literal");
                goto fail_n;
            }
            q->p++;
            if (!n->len) {
                gp_fail(q, "an empty literal");
                goto fail_n;
            }
        } else if (c == '[') {
            n = gnode_new(N_CLASS);
            q->p++;
            if (q->p < q->end && *q->p == '^')
                n->neg = 1, q->p++;
            while (q->p < q->end && *q->p != ']') {
                uint32_t lo, hi;
                if (gp_char(q, &lo))
                    goto fail_n;
                hi = lo;
                if (q->p + 1 < q->end && *q->p == '-' && q->p[1] != ']') {
                    q->p++;
                    if (gp_char(q, &hi))
                        goto fail_n;
                    if (hi < lo) {
                        gp_fail(q, "a backwards range");
                        goto fail_n;
                    }
                }
                n->rng = realloc(n->rng, (size_t)(n->n_rng + 1) * sizeof *n->rng);
                n->rng[n->n_rng][0] = lo, n->rng[n->n_rng][1] = hi, n->n_rng++;
            }
            if (q->p >= q->end || !n->n_rng) {
                gp_fail(q, "unterminated or empty class");
                goto fail_n;
            }
            q->p++;
        } else if (c == '(') {
            if (depth > 200) {
                gp_fail(q, "too deep");
                goto fail_seq;
            }
            q->p++;
            n = gp_alt(q, 1, depth + 1);
            if (!n)
                goto fail_seq;
            gp_space(q, 1);
            if (q->p >= q->end || *q->p != ')') {
                gp_fail(q, "expected )");
                goto fail_n;
            }
            q->p++;
        } else if (gp_word(c)) {
            n = gnode_new(N_REF);
            const char *w = q->p;
            while (q->p < q->end && gp_word(*q->p))
                q->p++;
            n->text = strndup(w, (size_t)(q->p - w));
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (!can_repeat) {
                gp_fail(q, "an operator with nothing (or an operator) before it");
                goto fail_seq;
            }
            int min = 0, max = -1;
            if (c == '+')
                min = 1;
            else if (c == '?')
                max = 1;
            else if (c == '{') {
                char *e;
                min = (int)strtol(q->p + 1, &e, 10);
                if (e == q->p + 1) {
                    gp_fail(q, "bad {m,n}");
                    goto fail_seq;
                }
                if (*e == ',') {
                    const char *f = e + 1;
                    max = *f == '}' ? -1 : (int)strtol(f, &e, 10);
                    if (*f == '}')
                        e = (char *)f;
                } else
                    max = min;
                if (*e != '}' || min > 1000 || max > 1000 || (max >= 0 && max < min)) {
                    gp_fail(q, "bad {m,n} (or a bound over 1000)");
                    goto fail_seq;
                }
                q->p = e;
            }
            q->p++;
            gnode *r = gnode_new(N_REP);
            r->min = min, r->max = max;
            gnode_add(r, seq->kid[--seq->n_kid]);
            gnode_add(seq, r);
            can_repeat = 0;
            continue;
        } else
            break;
        gnode_add(seq, n);
        can_repeat = 1;
        continue;
    fail_n:
        gnode_free(n);
        goto fail_seq;
    }
    return seq;
fail_seq:
    gnode_free(seq);
    return NULL;
}

static gnode *gp_alt(gparse *q, int nested, int depth) {
    gnode *alt = gnode_new(N_ALT);
    for (;;) {
        gnode *s = gp_seq(q, nested, depth);
        if (!s) {
            gnode_free(alt);
            return NULL;
        }
        gnode_add(alt, s);
        gp_space(q, nested);
        if (q->p < q->end && *q->p == '|') {
            q->p++;
            continue;
        }
        return alt;
    }
}

static int resolve_refs(gram *g, gnode *n) {
    if (n->kind == N_REF) {
        n->rule = -1;
        for (int i = 0; i < g->n; i++)
            if (!strcmp(g->name[i], n->text))
                n->rule = i;
        if (n->rule < 0) {
            snprintf(g->err, sizeof g->err, "rule '%s' is used but not defined", n->text);
            return -1;
        }
    }
    for (int i = 0; i < n->n_kid; i++)
        if (resolve_refs(g, n->kid[i]))
            return -1;
    return 0;
}

/* Parses GBNF; on error returns NULL and writes the reason into err. */
static gram *gram_parse(const char *text, char *err, size_t err_size) {
    gram *g = calloc(1, sizeof *g);
    assert_non_null(g);
    gparse q = {text, text + strlen(text), g};
    g->root = -1;
    for (;;) {
        gp_space(&q, 1);
        if (q.p >= q.end)
            break;
        const char *w = q.p;
        while (q.p < q.end && gp_word(*q.p))
            q.p++;
        if (q.p == w) {
            gp_fail(&q, "expected a rule name");
            break;
        }
        char *name = strndup(w, (size_t)(q.p - w));
        for (int i = 0; i < g->n; i++)
            if (!strcmp(g->name[i], name))
                gp_fail(&q, "a rule defined twice");
        gp_space(&q, 0);
        if (q.end - q.p < 3 || memcmp(q.p, "::=", 3))
            gp_fail(&q, "expected ::=");
        if (g->err[0]) {
            free(name);
            break;
        }
        q.p += 3;
        gnode *body = gp_alt(&q, 0, 0);
        if (!body) {
            free(name);
            break;
        }
        gp_space(&q, 0);
        if (q.p < q.end && *q.p != '\n') {
            gp_fail(&q, "junk after a rule");
            free(name);
            gnode_free(body);
            break;
        }
        g->name = realloc(g->name, (size_t)(g->n + 1) * sizeof *g->name);
        g->body = realloc(g->body, (size_t)(g->n + 1) * sizeof *g->body);
        g->name[g->n] = name, g->body[g->n] = body;
        if (!strcmp(name, "root"))
            g->root = g->n;
        g->n++;
    }
    if (!g->err[0] && g->root < 0)
        snprintf(g->err, sizeof g->err, "no root rule");
    for (int i = 0; !g->err[0] && i < g->n; i++)
        resolve_refs(g, g->body[i]);
    if (g->err[0]) {
        snprintf(err, err_size, "%s", g->err);
        gram_free(g);
        return NULL;
    }
    return g;
}

/* ---- matching: sets of end offsets ---- */

static uint64_t *ps_new(const gram *g) {
    uint64_t *s = calloc(g->words, sizeof *s);
    assert_non_null(s);
    return s;
}
static void ps_set(uint64_t *s, size_t i) { s[i / 64] |= 1ull << (i % 64); }
static int ps_has(const uint64_t *s, size_t i) { return (int)(s[i / 64] >> (i % 64) & 1); }
static void ps_or(const gram *g, uint64_t *d, const uint64_t *s) {
    for (size_t w = 0; w < g->words; w++)
        d[w] |= s[w];
}
static int ps_empty(const gram *g, const uint64_t *s) {
    for (size_t w = 0; w < g->words; w++)
        if (s[w])
            return 0;
    return 1;
}

static void gmatch(gram *g, const gnode *n, size_t pos, uint64_t *out);

static const uint64_t *rule_ends(gram *g, int r, size_t pos) {
    static uint64_t none[1024];
    if (g->memo[r][pos])
        return g->memo[r][pos];
    if (g->busy[r][pos])
        return none; /* left recursion: the converter must never emit it (checked separately) */
    g->busy[r][pos] = 1;
    uint64_t *s = ps_new(g);
    gmatch(g, g->body[r], pos, s);
    g->busy[r][pos] = 0;
    g->memo[r][pos] = s;
    return s;
}

static void gmatch(gram *g, const gnode *n, size_t pos, uint64_t *out) {
    switch (n->kind) {
    case N_LIT:
        if (pos + n->len <= g->len && !memcmp(g->s + pos, n->text, n->len))
            ps_set(out, pos + n->len);
        return;
    case N_CLASS: {
        uint32_t cp;
        int len = utf8_len_cp(g->s + pos, g->len - pos, &cp);
        if (!len)
            return;
        int in = 0;
        for (int i = 0; i < n->n_rng; i++)
            in |= cp >= n->rng[i][0] && cp <= n->rng[i][1];
        if (in != n->neg)
            ps_set(out, pos + (size_t)len);
        return;
    }
    case N_ALT:
        for (int i = 0; i < n->n_kid; i++)
            gmatch(g, n->kid[i], pos, out);
        return;
    case N_REF: ps_or(g, out, rule_ends(g, n->rule, pos)); return;
    case N_SEQ: {
        uint64_t *cur = ps_new(g);
        ps_set(cur, pos);
        for (int i = 0; i < n->n_kid && !ps_empty(g, cur); i++) {
            uint64_t *next = ps_new(g);
            for (size_t p = 0; p <= g->len; p++)
                if (ps_has(cur, p))
                    gmatch(g, n->kid[i], p, next);
            free(cur);
            cur = next;
        }
        ps_or(g, out, cur);
        free(cur);
        return;
    }
    case N_REP: {
        uint64_t *cur = ps_new(g), *done = ps_new(g);
        ps_set(cur, pos);
        for (int i = 0;; i++) {
            if (i >= n->min) {
                ps_or(g, out, cur);
                for (size_t w = 0; w < g->words; w++) { /* expand each offset once past the minimum */
                    cur[w] &= ~done[w];
                    done[w] |= cur[w];
                }
            }
            if (i == n->max || ps_empty(g, cur))
                break;
            uint64_t *next = ps_new(g);
            for (size_t p = 0; p <= g->len; p++)
                if (ps_has(cur, p))
                    gmatch(g, n->kid[0], p, next);
            free(cur);
            cur = next;
        }
        free(cur);
        free(done);
        return;
    }
    }
}

/* 1 if the grammar derives exactly the text. */
static int gram_accepts(gram *g, const char *text, size_t len) {
    g->s = (const unsigned char *)text;
    g->len = len;
    g->words = (len + 1 + 63) / 64;
    assert_true(g->words <= 1024);
    g->memo = calloc((size_t)g->n, sizeof *g->memo);
    g->busy = calloc((size_t)g->n, sizeof *g->busy);
    for (int r = 0; r < g->n; r++) {
        g->memo[r] = calloc(len + 1, sizeof **g->memo);
        g->busy[r] = calloc(len + 1, 1);
    }
    uint64_t *ends = ps_new(g);
    gmatch(g, g->body[g->root], 0, ends);
    int ok = ps_has(ends, len);
    free(ends);
    for (int r = 0; r < g->n; r++) {
        for (size_t p = 0; p <= len; p++)
            free(g->memo[r][p]);
        free(g->memo[r]);
        free(g->busy[r]);
    }
    free(g->memo);
    free(g->busy);
    return ok;
}

/* 1 if rule r can match the empty text (a fixpoint is overkill here: depth-bounded recursion). */
static int nullable(const gram *g, const gnode *n, int depth) {
    if (depth > 50)
        return 0;
    switch (n->kind) {
    case N_LIT:
    case N_CLASS: return 0;
    case N_REF: return nullable(g, g->body[n->rule], depth + 1);
    case N_REP: return n->min == 0 || nullable(g, n->kid[0], depth + 1);
    case N_ALT:
        for (int i = 0; i < n->n_kid; i++)
            if (nullable(g, n->kid[i], depth + 1))
                return 1;
        return 0;
    default:
        for (int i = 0; i < n->n_kid; i++)
            if (!nullable(g, n->kid[i], depth + 1))
                return 0;
        return 1;
    }
}

/* What the grammar compiler refuses: an unbounded repetition of something that can match nothing. */
static int nullable_star(const gram *g, const gnode *n) {
    if (n->kind == N_REP && n->max < 0 && nullable(g, n->kid[0], 0))
        return 1;
    for (int i = 0; i < n->n_kid; i++)
        if (nullable_star(g, n->kid[i]))
            return 1;
    return 0;
}

/* ==== helpers ==================================================================================================== */

static json_t *js(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        print_error("bad test JSON (%s): %s\n", e.text, text);
    assert_non_null(v);
    return v;
}

/* The grammar for a schema text (the test fails on an error); the caller frees it. */
static char *gbnf_of(const char *schema, int dialect, int strict) {
    json_t *s = js(schema);
    char *g = NULL;
    tern_err *e = tern_json_schema_to_gbnf(s, dialect, strict, &g);
    json_decref(s);
    if (e) {
        print_error("schema %s: unexpected error: %s\n", schema, e->msg);
        tern_err_free(e);
        fail();
    }
    return g;
}

static gram *parsed(const char *text) {
    char err[256];
    gram *g = gram_parse(text, err, sizeof err);
    if (!g) {
        print_error("grammar does not parse (%s):\n%s", err, text);
        fail();
    }
    for (int r = 0; r < g->n; r++)
        if (nullable_star(g, g->body[r])) {
            print_error("rule %s repeats something that can match nothing:\n%s", g->name[r], text);
            fail();
        }
    return g;
}

static void expect_docs(const char *gbnf, const char *const *good, const char *const *bad) {
    gram *g = parsed(gbnf);
    for (int want = 1; want >= 0; want--)
        for (const char *const *d = want ? good : bad; d && *d; d++)
            if (gram_accepts(g, *d, strlen(*d)) != want) {
                print_error("%s: %s\n--- grammar:\n%s", want ? "rejected a valid text" : "accepted an invalid text", *d,
                            gbnf);
                gram_free(g);
                fail();
            }
    gram_free(g);
}

/* The schema's grammar accepts every text of good and none of bad (NULL-terminated lists). */
static void expect(const char *schema, int dialect, int strict, const char *const *good, const char *const *bad) {
    char *g = gbnf_of(schema, dialect, strict);
    expect_docs(g, good, bad);
    free(g);
}

#define GOOD(...) ((const char *const[]){__VA_ARGS__, NULL})
#define BAD(...) ((const char *const[]){__VA_ARGS__, NULL})
#define J TERN_JSON_DIALECT_JSON
#define G TERN_JSON_DIALECT_GEMMA

static TERN_MUST_CHECK tern_err *convert(const char *schema, int dialect, int strict) {
    json_t *s = js(schema);
    char *g = (char *)1;
    tern_err *e = tern_json_schema_to_gbnf(s, dialect, strict, &g);
    json_decref(s);
    if (e)
        assert_null(g);
    free(e ? NULL : g);
    return e;
}

/* ==== tests ====================================================================================================== */

static const char PERSON[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":20},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":100},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"city\",\"zip\"],\"additionalProperties\":false},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3},"
    "\"role\":{\"enum\":[\"admin\",\"user\",null,7]},"
    "\"scores\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}}}},"
    "\"required\":[\"name\",\"address\"],\"additionalProperties\":false}";

/* Same schema, same text; root first; bounded whitespace; the rules a reader would look for. */
static void test_shape(void **state) {
    char *a = gbnf_of(PERSON, J, 1), *b = gbnf_of(PERSON, J, 1);
    assert_string_equal(a, b);
    assert_true(a[0] == '#');
    const char *first_rule = strstr(a, "\n") + 1;
    while (*first_rule == '#')
        first_rule = strchr(first_rule, '\n') + 1;
    assert_true(!strncmp(first_rule, "root ::= ", 9));
    assert_non_null(strstr(a, "\nroot-age ::= [0-9] | [1-9] [0-9] | \"100\"\n"));
    assert_non_null(strstr(a, "\nroot-name ::= \"\\\"\" char{1,20} \"\\\"\"\n"));
    assert_non_null(strstr(a, "\nws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"));
    assert_non_null(strstr(a, "\nroot-role ::= \"\\\"admin\\\"\" | \"\\\"user\\\"\" | \"null\" | \"7\"\n"));
    /* every line is a comment or one rule */
    for (const char *p = a; *p; p = strchr(p, '\n') + 1)
        assert_true(*p == '#' || strstr(p, " ::= ") < strchr(p, '\n'));
    gram_free(parsed(a));
    free(a), free(b);

    /* names stay unique when two places want the same one for different bodies */
    char *c = gbnf_of("{\"type\":\"object\",\"properties\":{\"a-b\":{\"type\":\"integer\",\"maximum\":5},"
                      "\"a_b\":{\"type\":\"integer\",\"maximum\":6}}}",
                      J, 0);
    assert_non_null(strstr(c, "\nroot-a-b ::= "));
    assert_non_null(strstr(c, "\nroot-a-b1 ::= "));
    gram_free(parsed(c));
    free(c);
}

static void test_object(void **state) {
    expect(PERSON, J, 1,
           GOOD("{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null}}",
                "{\"name\":\"Ann\",\"age\":42,\"address\":{\"city\":\"Oslo\",\"zip\":\"0150\"},\"tags\":[\"a\",\"b\"],"
                "\"role\":\"admin\",\"scores\":[[1,2.5],[],[-3e2]]}",
                "{\n  \"name\": \"Ann\",\n  \"address\": {\n    \"city\": \"Oslo\",\n    \"zip\": null\n  },\n"
                "  \"role\": 7\n}",
                "{ \"name\" : \"Ann\" , \"age\" : 0 , \"address\" : { \"city\" : \"\" , \"zip\" : null } }"),
           BAD("{\"address\":{\"city\":\"Oslo\",\"zip\":null}}",                          /* name missing */
               "{\"name\":\"Ann\"}",                                                      /* address missing */
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\"}}",                      /* zip missing */
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":1}}",            /* zip type */
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null},\"x\":1}", /* an extra */
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null,\"x\":1}}",
               "{\"name\":\"Ann\",\"age\":101,\"address\":{\"city\":\"Oslo\",\"zip\":null}}",
               "{\"name\":\"\",\"address\":{\"city\":\"Oslo\",\"zip\":null}}", /* minLength */
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null},\"tags\":[\"a\",\"b\",\"c\",\"d\"]}",
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null},\"role\":\"root\"}",
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null},\"role\":8}",
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null},}",
               "{\"name\":\"Ann\",,\"address\":{\"city\":\"Oslo\",\"zip\":null}}",
               " {\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null}}", /* whitespace before the root */
               "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\",\"zip\":null}}\n",
               "{\"name\":\"Ann\",                        \"address\":{\"city\":\"Oslo\",\"zip\":null}}",
               "{\"address\":{\"city\":\"Oslo\",\"zip\":null},\"name\":\"Ann\"}")); /* the schema's order */
}

/* Optional properties in order, each may be missing, commas right in every combination; extras after them. */
static void test_optional_and_extra(void **state) {
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},"
                    "\"c\":{\"type\":\"string\"}},\"additionalProperties\":false}";
    expect(s, J, 1,
           GOOD("{}", "{ }", "{\"a\":1}", "{\"b\":true}", "{\"c\":\"x\"}", "{\"a\":1,\"b\":false}",
                "{\"a\":1,\"c\":\"\"}", "{\"b\":true,\"c\":\"x\"}", "{\"a\":1,\"b\":true,\"c\":\"x\"}"),
           BAD("{,}", "{,\"a\":1}", "{\"a\":1,}", "{\"b\":true,\"a\":1}", "{\"a\":1,\"a\":1}", "{\"d\":1}",
               "{\"a\":1 \"b\":true}"));
    /* a required property in the middle */
    s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},"
        "\"c\":{\"type\":\"string\"}},\"required\":[\"b\"],\"additionalProperties\":false}";
    expect(s, J, 1,
           GOOD("{\"b\":true}", "{\"a\":1,\"b\":true}", "{\"b\":true,\"c\":\"x\"}", "{\"a\":1,\"b\":true,\"c\":\"x\"}"),
           BAD("{}", "{\"a\":1}", "{\"a\":1,\"c\":\"x\"}", "{,\"b\":true}"));
    /* non-strict: additional properties with other names, of any value or of the given schema */
    s = "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"name\":{\"type\":\"string\"}},"
        "\"required\":[\"id\"]}";
    expect(s, J, 0,
           GOOD("{\"id\":1}", "{\"id\":1,\"x\":[1,{\"y\":null}]}",
                "{\"id\":1,\"name\":\"n\",\"i\":1,\"idx\":2,\"nam\":3}", "{\"id\":1,\"\":true,\"\\n\":2}",
                "{\"id\":1,\"na\\\"me\":0}"),
           BAD("{\"id\":1,\"id\":2}", "{\"id\":1,\"name\":\"n\",\"name\":\"m\"}", "{\"x\":1,\"id\":1}"));
    s = "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\",\"minimum\":0}}";
    expect(s, J, 1, GOOD("{}", "{\"a\":1}", "{\"a\":1,\"b\":2}"), BAD("{\"a\":-1}", "{\"a\":\"x\"}", "[]"));
    s = "{\"type\":\"object\",\"additionalProperties\":false}";
    expect(s, J, 1, GOOD("{}", "{ }", "{\n}"), BAD("{\"a\":1}", "{  }"));
    /* required names outside properties (non-strict) must appear as additional properties */
    s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\",\"b\"]}";
    expect(s, J, 0, GOOD("{\"a\":\"x\",\"b\":1}", "{\"a\":\"x\",\"b\":[],\"c\":2}"), BAD("{\"a\":\"x\"}", "{\"b\":1}"));
    /* {"type":"object"} and {} as values */
    expect("{\"type\":\"object\"}", J, 1, GOOD("{}", "{\"a\":{\"b\":[1,\"x\",null,true]}}"), BAD("[]", "1", "\"x\""));
    expect("{}", J, 1, GOOD("{}", "[]", "1", "-2.5e-3", "\"x\"", "null", "true", "[{\"a\":[]}]"),
           BAD("", "nul", "tru", "[1,]"));
    expect("true", J, 1, GOOD("{}", "[1]"), BAD("x"));
}

static void test_arrays(void **state) {
    expect("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":5},\"minItems\":2,"
           "\"maxItems\":3}",
           J, 1, GOOD("[1,-5]", "[ 5 , 0 , -1 ]", "[\n  1,\n  2\n]"),
           BAD("[]", "[1]", "[1,2,3,4]", "[6,1]", "[1,,2]", "[1,2,]"));
    expect("{\"type\":\"array\"}", J, 1, GOOD("[]", "[1,[2,[3]],{\"a\":\"b\"}]"), BAD("[", "{}"));
    expect("{\"type\":\"array\",\"items\":false}", J, 1, GOOD("[]", "[ ]"), BAD("[1]"));
    /* a tuple, then booleans; shorter arrays are valid JSON Schema too */
    const char *t = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],"
                    "\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":4}";
    expect(t, J, 1, GOOD("[1]", "[1,\"a\"]", "[1,\"a\",true]", "[1,\"a\",true,false]"),
           BAD("[]", "[\"a\"]", "[1,2]", "[1,\"a\",true,false,true]", "[1,\"a\",1]"));
    expect("{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"},{\"const\":\"y\"}],\"items\":false,\"minItems\":2}",
           J, 1, GOOD("[\"x\",\"y\"]"), BAD("[\"x\"]", "[\"x\",\"y\",\"z\"]", "[\"y\",\"x\"]"));
    expect("{\"type\":\"array\",\"items\":[{\"type\":\"null\"}],\"additionalItems\":false}", J, 0, GOOD("[]", "[null]"),
           BAD("[null,null]"));
    /* nested arrays of objects */
    expect(
        "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"array\",\"items\":"
        "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}}}},\"required\":[\"p\"],\"additionalProperties\":false}}",
        J, 1, GOOD("[]", "[{\"p\":[]},{\"p\":[[true],[],[false,true]]}]"), BAD("[{}]", "[{\"p\":[true]}]"));
}

static void test_enum_const_anyof(void **state) {
    expect("{\"enum\":[\"red\",\"a \\\"q\\\" \\\\ \\n\",1.5,-2,true,null,[1,\"x\"],{\"k\":{\"n\":[]}},\"é中😀\"]}", J, 1,
           GOOD("\"red\"", "\"a \\\"q\\\" \\\\ \\n\"", "1.5", "-2", "true", "null", "[1,\"x\"]", "{\"k\":{\"n\":[]}}",
                "\"é中😀\""),
           BAD("\"blue\"", "\"Red\"", "1", "false", "[1]", "{\"k\":{}}", "\"red\" "));
    /* enum values of other types than "type" are left out */
    expect("{\"type\":\"string\",\"enum\":[\"a\",1,\"b\"]}", J, 1, GOOD("\"a\"", "\"b\""), BAD("1"));
    expect("{\"const\":{\"a\":[1,2]}}", J, 1, GOOD("{\"a\":[1,2]}"), BAD("{\"a\":[1]}"));
    expect("{\"const\":0.1}", J, 1, GOOD("0.1"), BAD("0.10000000000000001"));
    expect(
        "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":1},{\"type\":\"integer\",\"minimum\":3},{\"type\":\"null\"}]}",
        J, 1, GOOD("\"a\"", "\"\"", "3", "1000", "null"), BAD("\"ab\"", "2", "true"));
    expect(
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
        "\"required\":[\"kind\",\"x\"],\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"kind\":"
        "{\"const\":\"b\"},\"y\":{\"type\":\"string\"}},\"required\":[\"kind\",\"y\"],\"additionalProperties\":false}]"
        "}",
        J, 1, GOOD("{\"kind\":\"a\",\"x\":1}", "{\"kind\":\"b\",\"y\":\"s\"}"),
        BAD("{\"kind\":\"a\",\"y\":\"s\"}", "{\"kind\":\"c\",\"x\":1}"));
    expect("{\"type\":[\"integer\",\"null\"],\"minimum\":1}", J, 1, GOOD("1", "null"), BAD("0", "\"1\""));
    expect("{\"allOf\":[{\"type\":\"boolean\"}]}", J, 1, GOOD("true"), BAD("1"));
    /* non-strict allOf of several objects: merged */
    expect("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
           "{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}],\"additionalProperties\":false}",
           J, 0, GOOD("{\"a\":1,\"b\":\"x\"}"), BAD("{\"a\":1}", "{\"b\":\"x\"}"));
}

/* Recursive definitions: a tree, a linked list through "definitions", the root itself. */
static void test_refs(void **state) {
    const char *tree =
        "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"integer\"},"
        "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"value\"],"
        "\"additionalProperties\":false}},\"type\":\"object\",\"properties\":{\"tree\":"
        "{\"$ref\":\"#/$defs/node\"}},\"required\":[\"tree\"],\"additionalProperties\":false}";
    expect(tree, J, 1,
           GOOD("{\"tree\":{\"value\":1}}", "{\"tree\":{\"value\":1,\"children\":[]}}",
                "{\"tree\":{\"value\":1,\"children\":[{\"value\":2,\"children\":[{\"value\":3}]},{\"value\":4}]}}"),
           BAD("{\"tree\":{}}", "{\"tree\":{\"value\":1,\"children\":[{\"children\":[]}]}}",
               "{\"tree\":{\"value\":1,\"children\":[{\"value\":\"x\"}]}}",
               "{\"tree\":{\"value\":1,\"children\":{}}}"));
    char *g = gbnf_of(tree, J, 1);
    assert_non_null(strstr(g, "\nnode ::= \"{\" ws node-value-kv"));
    free(g);
    expect("{\"definitions\":{\"list\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"object\",\"properties\":{\"head\":"
           "{\"type\":\"integer\"},\"tail\":{\"$ref\":\"#/definitions/list\"}},\"required\":[\"head\",\"tail\"],"
           "\"additionalProperties\":false}]}},\"$ref\":\"#/definitions/list\"}",
           J, 1, GOOD("null", "{\"head\":1,\"tail\":null}", "{\"head\":1,\"tail\":{\"head\":2,\"tail\":null}}"),
           BAD("{\"head\":1}", "{\"head\":1,\"tail\":{\"head\":2}}"));
    expect("{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"child\":{\"$ref\":\"#\"}},"
           "\"additionalProperties\":false}",
           J, 1, GOOD("{}", "{\"v\":1,\"child\":{\"child\":{\"v\":2}}}"), BAD("{\"child\":{\"x\":1}}"));
    /* a definition named like a primitive keeps both apart */
    expect(
        "{\"$defs\":{\"string\":{\"type\":\"integer\"}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":"
        "\"#/$defs/string\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\",\"b\"],\"additionalProperties\":false}",
        J, 1, GOOD("{\"a\":1,\"b\":\"s\"}"), BAD("{\"a\":\"s\",\"b\":\"s\"}", "{\"a\":1,\"b\":1}"));
}

/* Integer bounds: exact digit-range grammars, checked against every value near the bounds. */
static void check_int_range(int has_lo, long long lo, int has_hi, long long hi, const char *extra_keys) {
    char schema[256], num[32];
    snprintf(schema, sizeof schema, "{\"type\":\"integer\"%s", extra_keys ? extra_keys : "");
    if (!extra_keys && has_lo)
        snprintf(schema + strlen(schema), sizeof schema - strlen(schema), ",\"minimum\":%lld", lo);
    if (!extra_keys && has_hi)
        snprintf(schema + strlen(schema), sizeof schema - strlen(schema), ",\"maximum\":%lld", hi);
    strcat(schema, "}");
    char *text = gbnf_of(schema, J, 1);
    gram *g = parsed(text);
    long long probes[200];
    int n = 0;
    long long anchors[] = {lo, hi, 0, lo / 10, hi / 10, lo * 10, hi * 10, -lo, -hi, 1, -1, 9, 10, 99, 100, 999, 1000};
    for (size_t a = 0; a < sizeof anchors / sizeof *anchors; a++)
        for (long long d = -3; d <= 3; d++)
            if (n < 200)
                probes[n++] = anchors[a] + d;
    for (int i = 0; i < n; i++) {
        long long v = probes[i];
        int want = (!has_lo || v >= lo) && (!has_hi || v <= hi);
        snprintf(num, sizeof num, "%lld", v);
        if (gram_accepts(g, num, strlen(num)) != want) {
            print_error("%s: %s %s\n%s", schema, want ? "rejected" : "accepted", num, text);
            fail();
        }
    }
    static const char *const malformed[] = {"", "-", "01", "-0", "+1", "1.0", "1e2", " 1", "--1", "00"};
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++)
        if (gram_accepts(g, malformed[i], strlen(malformed[i]))) {
            print_error("%s: accepted %s\n%s", schema, malformed[i], text);
            fail();
        }
    gram_free(g);
    free(text);
}

static void test_integers(void **state) {
    check_int_range(1, 0, 1, 100, NULL);
    check_int_range(1, -5, 1, 5, NULL);
    check_int_range(1, 10, 1, 999, NULL);
    check_int_range(1, 0, 0, 0, NULL);
    check_int_range(0, 0, 1, 0, NULL);
    check_int_range(1, -100, 0, 0, NULL);
    check_int_range(0, 0, 1, -17, NULL);
    check_int_range(1, 7, 1, 7, NULL);
    check_int_range(1, -1000000000000000LL, 1, 1000000000000000LL, NULL);
    check_int_range(1, 123456789012345LL, 1, 123456789098765LL, NULL);
    check_int_range(1, -999999999999999LL, 1, -99999LL, NULL);
    check_int_range(1, -3, 1, 2, ",\"exclusiveMinimum\":-4,\"exclusiveMaximum\":3");
    check_int_range(1, 2, 1, 9, ",\"minimum\":1.5,\"maximum\":9.99");
    check_int_range(1, 1, 1, 4, ",\"minimum\":0,\"exclusiveMinimum\":true,\"maximum\":5,\"exclusiveMaximum\":true");
    /* pseudo-random ranges against brute force */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 40; i++) {
        long long v[2];
        for (int k = 0; k < 2; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            long long mag = 1;
            for (int d = (int)(x % 16); d > 0; d--)
                mag *= 10;
            v[k] = (long long)((x >> 8) % (uint64_t)mag) * ((x >> 4) & 1 ? -1 : 1);
        }
        if (v[0] > v[1])
            v[0] ^= v[1], v[1] ^= v[0], v[0] ^= v[1];
        check_int_range(1, v[0], 1, v[1], NULL);
    }
    expect("{\"type\":\"integer\"}", J, 1, GOOD("0", "-0", "-12", "1234567890123456789"),
           BAD("01", "1.5", "1e3", "12345678901234567890", "-", "+1"));
}

static void test_numbers(void **state) {
    expect(
        "{\"type\":\"number\"}", J, 1,
        GOOD("0", "-0", "1.5", "-1.5e10", "1E+2", "2e-308", "0.000001", "123456789012345678", "3.141592653589793"),
        BAD("01", "1.", ".5", "+1", "1e", "--1", "1.5.5", "NaN", "Infinity", "12345678901234567890", "1e1234", "0x10"));
    /* bounds on a number: only the sign is enforced, and a comment says so */
    char *g = gbnf_of("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", J, 1);
    assert_non_null(strstr(g, "# schema: number bounds are enforced only as no minus sign"));
    expect_docs(g, GOOD("0", "0.5", "1", "7.5"), BAD("-0.5"));
    free(g);
    expect("{\"type\":\"boolean\"}", J, 1, GOOD("true", "false"), BAD("True", "1"));
    expect("{\"type\":\"null\"}", J, 1, GOOD("null"), BAD("None"));
}

static void test_strings(void **state) {
    expect("{\"type\":\"string\"}", J, 1,
           GOOD("\"\"", "\"plain\"", "\"é中😀\"", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\u00e9\\u4E2D\"",
                "\"\\ud83d\\ude00\"", "\"\x7f\"", "\"a'b<c>\""),
           BAD("\"", "\"\"\"", "plain", "\"a\nb\"", "\"tab\there\"", "\"\\x41\"", "\"\\u12\"", "\"\\ud83d\"",
               "\"\\ude00\"", "\"\\a\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "'x'"));
    /* lengths count characters: a multi-byte character or an escape is one */
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", J, 1,
           GOOD("\"ab\"", "\"é中\"", "\"a😀b\"", "\"\\u00e9x\"", "\"\\ud83d\\ude00a\"", "\"\\n\\t\\\"\"", "\"中文字\""),
           BAD("\"a\"", "\"😀\"", "\"abcd\"", "\"\"", "\"é中😀a\""));
    expect("{\"type\":\"string\",\"maxLength\":0}", J, 1, GOOD("\"\""), BAD("\"a\""));
    expect("{\"type\":\"string\",\"minLength\":3}", J, 1, GOOD("\"abc\"", "\"abcdefgh\""), BAD("\"ab\""));
    /* lengths past the compiler's repetition bound are split, not refused */
    char *g = gbnf_of("{\"type\":\"string\",\"minLength\":1001,\"maxLength\":2500}", J, 1);
    char *doc = malloc(3504);
    assert_non_null(doc);
    for (size_t n = 1000; n <= 1001; n++) { /* 1000 too short, 1001 fine */
        doc[0] = '"', memset(doc + 1, 'x', n), doc[n + 1] = '"', doc[n + 2] = 0;
        expect_docs(g, n == 1001 ? GOOD(doc) : NULL, n == 1000 ? BAD(doc) : NULL);
    }
    for (size_t n = 2500; n <= 2501; n++) {
        doc[0] = '"', memset(doc + 1, 'x', n), doc[n + 1] = '"', doc[n + 2] = 0;
        expect_docs(g, n == 2500 ? GOOD(doc) : NULL, n == 2501 ? BAD(doc) : NULL);
    }
    free(g);
    /* three levels of the split bound: ( e{1000} ( e{1000} ( e{1000} e{0,500} | e{0,999} ) | e{0,999} ) | e{0,999} ) */
    g = gbnf_of("{\"type\":\"string\",\"maxLength\":3500}", J, 1);
    const size_t lens[] = {0, 1, 999, 1000, 1001, 1999, 2000, 2001, 2999, 3000, 3001, 3499, 3500, 3501};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        const size_t n = lens[i];
        doc[0] = '"', memset(doc + 1, 'x', n), doc[n + 1] = '"', doc[n + 2] = 0;
        expect_docs(g, n <= 3500 ? GOOD(doc) : NULL, n > 3500 ? BAD(doc) : NULL);
    }
    free(doc);
    free(g);
}

static void test_formats(void **state) {
    expect("{\"type\":\"string\",\"format\":\"date\"}", J, 1, GOOD("\"2024-02-29\"", "\"1999-12-31\""),
           BAD("\"2024-13-01\"", "\"2024-00-10\"", "\"2024-1-1\"", "\"2024-01-32\""));
    expect("{\"type\":\"string\",\"format\":\"time\"}", J, 1, GOOD("\"23:59:60Z\"", "\"08:30:00.123+05:30\""),
           BAD("\"24:00:00Z\"", "\"08:30:00\"", "\"8:30:00Z\""));
    expect("{\"type\":\"string\",\"format\":\"date-time\"}", J, 1,
           GOOD("\"2024-02-29T12:30:00Z\"", "\"2024-02-29t12:30:00.5-01:00\""),
           BAD("\"2024-02-29 12:30:00Z\"", "\"2024-02-29\""));
    expect("{\"type\":\"string\",\"format\":\"uuid\"}", J, 1, GOOD("\"123e4567-e89b-12d3-A456-426614174000\""),
           BAD("\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""));
    expect("{\"type\":\"string\",\"format\":\"email\"}", J, 1, GOOD("\"a.b+c@example.co.uk\"", "\"x@y.io\""),
           BAD("\"a@b\"", "\"@x.com\"", "\"a b@x.com\""));
    /* unknown formats: any string (with a note) unless strict */
    char *g = gbnf_of("{\"type\":\"string\",\"format\":\"hostname\"}", J, 0);
    assert_non_null(strstr(g, "format 'hostname' is not enforced"));
    expect_docs(g, GOOD("\"anything\""), BAD("1"));
    free(g);
}

static void test_patterns(void **state) {
    expect("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3,5}(\\\\.[a-z]+)?$\"}", J, 1,
           GOOD("\"AB-123\"", "\"ZZ-12345.abc\""), BAD("\"AB-12\"", "\"ab-123\"", "\"AB-123.\"", "\"xAB-123\""));
    /* unanchored: anywhere in the string */
    expect("{\"type\":\"string\",\"pattern\":\"a/b\"}", J, 1, GOOD("\"a/b\"", "\"xxa\\/byy\"", "\"é a/b\""),
           BAD("\"ab\"", "\"a\\\\b\""));
    expect("{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}", J, 1, GOOD("\"cat\"", "\"dogs\""),
           BAD("\"cats!\"", "\"bird\"", "\"\""));
    /* classes: negation, quotes and backslashes and controls written as escapes, non-ASCII, \s \w \D */
    expect("{\"type\":\"string\",\"pattern\":\"^[^a-z\\\"]+$\"}", J, 1,
           GOOD("\"ABC 1\"", "\"中文\"", "\"A\\\\B\"", "\"\\n\\t\"", "\"\\u0001\""),
           BAD("\"AbC\"", "\"A\\\"B\"", "\"\""));
    expect("{\"type\":\"string\",\"pattern\":\"^.{2,3}$\"}", J, 1, GOOD("\"ab\"", "\"中文字\"", "\"\\\\\\\"\""),
           BAD("\"a\"", "\"abcd\"", "\"\\n\\n\""));
    expect("{\"type\":\"string\",\"pattern\":\"^\\\\w+\\\\s\\\\D[à-ÿ\\\\u4e00-\\\\u9fff]*$\"}", J, 1,
           GOOD("\"abc_9 xé中\"", "\"a\\tb\"", "\"a b\""), BAD("\"a b1\"", "\"ab\"", "\"a bA\"", "\"a 1\""));
    expect("{\"type\":\"string\",\"pattern\":\"^x{3}y{2,}z?[\\\\w-]*(?:ab|cd){0,2}\\\\{\\\\}$\"}", J, 1,
           GOOD("\"xxxyy{}\"", "\"xxxyyyz_-a9abcd{}\""), BAD("\"xxyy{}\"", "\"xxxyyab{\"", "\"xxxyy}{\""));
    expect("{\"type\":\"string\",\"pattern\":\"^$\"}", J, 1, GOOD("\"\""), BAD("\"a\""));
    expect("{\"type\":\"string\",\"pattern\":\"^a{1,3}?b$\"}", J, 1, GOOD("\"ab\"", "\"aaab\""),
           BAD("\"b\"", "\"aaaab\""));
}

/* Gemma 4 tool-call arguments: bare keys, <|"|> strings, no whitespace. */
static void test_gemma(void **state) {
    const char *s =
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\","
        "\"minimum\":1,\"maximum\":14},\"units\":{\"enum\":[\"metric\",\"imperial\"]},\"opts\":{\"type\":"
        "\"object\",\"properties\":{\"metric\":{\"type\":\"boolean\"}},\"additionalProperties\":false},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"score\":{\"type\":[\"number\",\"null\"]}},"
        "\"required\":[\"city\"],\"additionalProperties\":false}";
    expect(s, G, 1,
           GOOD("{city:<|\"|>Paris<|\"|>,days:3}", "{city:<|\"|>Paris<|\"|>}", "{city:<|\"|><|\"|>}",
                "{city:<|\"|>line1\nline2 \"quoted\" \\ é中😀 {x:1}<|\"|>,units:<|\"|>metric<|\"|>,opts:{metric:true},"
                "tags:[<|\"|>a<|\"|>,<|\"|><|\"|>],score:-1.5e3}",
                "{city:<|\"|>a<b <|x <|\"x <|\"|x<|\"|>}", "{city:<|\"|>a<<|\"|>}", "{city:<|\"|><|<|\"|>}",
                "{city:<|\"|>x<|\"<|\"|>}", "{city:<|\"|>x<|\"|<|\"|>}", "{city:<|\"|><<|\"|<|\"|>}",
                "{city:<|\"|>x<|\"|>,score:null}"),
           BAD("{city:<|\"|>a<|\"|>b<|\"|>}", "{city:<|\"|>Paris<|\"|>,days:15}", "{\"city\":\"Paris\"}",
               "{city: <|\"|>Paris<|\"|>}", "{city:<|\"|>Paris<|\"|>,extra:1}", "{days:3}", "{city:Paris}",
               "{city:<|\"|>Paris<|\"|>,units:<|\"|>si<|\"|>}", "{city:<|\"|>Paris<|\"|> }",
               "{city:<|\"|>Paris<|\"|>,opts:{metric:true,x:1}}"));
    /* keys that cannot be bare are quoted; additional keys are [A-Za-z0-9_]+ and not a listed name */
    s = "{\"type\":\"object\",\"properties\":{\"my key\":{\"type\":\"string\"},\"a:b\":{\"type\":\"integer\"},"
        "\"q\":{\"const\":{\"k\":\"v\",\"list\":[1,2.5,null],\"x "
        "y\":true}}},\"additionalProperties\":{\"type\":\"integer\"}}";
    expect(s, G, 0,
           GOOD("{}", "{my key:<|\"|>x<|\"|>}", "{<|\"|>a:b<|\"|>:5}",
                "{q:{k:<|\"|>v<|\"|>,list:[1,2.5,null],x y:true}}", "{zz:3}", "{my key:<|\"|>x<|\"|>,foo_1:-2,qq:3}"),
           BAD("{q:5}", "{zz:<|\"|>x<|\"|>}", "{q:1,zz:2}", "{a:b:5}", "{:1}", "{<|\"|>zz<|\"|>:1}"));
    /* the root is the arguments object */
    expect("{}", G, 0, GOOD("{}", "{a:1,b:[<|\"|>x<|\"|>,{c:null}],d:{}}"), BAD("[]", "1", "{\"a\":1}", "{a :1}"));
    expect("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":3},\"p\":{\"type\":"
           "\"string\",\"pattern\":\"^[a-z]+\\\\d$\"},\"d\":{\"type\":\"string\",\"format\":\"date\"}},"
           "\"additionalProperties\":false}",
           G, 1, GOOD("{s:<|\"|>abc<|\"|>}", "{s:<|\"|>é\n<|\"|>,p:<|\"|>ab1<|\"|>,d:<|\"|>2024-01-31<|\"|>}"),
           BAD("{s:<|\"|>abcd<|\"|>}", "{p:<|\"|>1<|\"|>}", "{d:<|\"|>2024-1-31<|\"|>}"));
    TU_FAILS_WITH(convert("{\"type\":\"string\"}", G, 0),
                  "schema: tool arguments in the Gemma dialect must be an object");
    TU_FAILS_WITH(convert("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^<b>$\"}},"
                          "\"additionalProperties\":false}",
                          G, 1),
                  "schema.properties.s.pattern: '^<b>$': '<' cannot be matched in the Gemma dialect");
}

static void test_json_object(void **state) {
    char *g = NULL;
    TU_OK(tern_json_object_gbnf(&g));
    expect_docs(g,
                GOOD("{}", "{\"a\":[1,{\"b\":null}],\"c\":\"x\",\"d\":{\"e\":{\"f\":[true,false,-1.5e-3]}}}",
                     "{\n  \"a\": 1\n}"),
                BAD("[1]", " {}", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "\"x\"", "{}x"));
    free(g);
}

static void test_errors(void **state) {
    /* strict mode: what cannot be enforced */
    TU_FAILS_WITH(convert("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\",\"not\":{\"const\":3}}},"
                          "\"required\":[\"age\"],\"additionalProperties\":false}",
                          J, 1),
                  "schema.properties.age: keyword 'not' is not supported");
    TU_FAILS_WITH(convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}", J, 1),
                  "schema: additionalProperties must be false in strict mode");
    TU_FAILS_WITH(convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"b\":{}},"
                          "\"additionalProperties\":true}},\"additionalProperties\":false}",
                          J, 1),
                  "schema.properties.a: additionalProperties must be false in strict mode");
    TU_FAILS_WITH(convert("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/missing\"}},"
                          "\"additionalProperties\":false}",
                          J, 1),
                  "schema.properties.a.$ref: '#/$defs/missing' does not resolve");
    TU_FAILS_WITH(convert("{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", J, 1),
                  "schema.pattern: '^(?=a)b$': lookahead and lookbehind are not supported");
    TU_FAILS_WITH(convert("{\"type\":\"string\",\"pattern\":\"(?<!a)b\"}", J, 0), "lookahead and lookbehind");
    TU_FAILS_WITH(
        convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\",\"b\"],"
                "\"additionalProperties\":false}",
                J, 1),
        "schema.required: 'b' is not in properties");
    TU_FAILS_WITH(convert("{\"type\":\"string\",\"format\":\"hostname\"}", J, 1),
                  "schema: format 'hostname' is not supported");
    TU_FAILS_WITH(convert("{\"type\":\"integer\",\"multipleOf\":3}", J, 1),
                  "schema: keyword 'multipleOf' is not supported");
    TU_FAILS_WITH(convert("{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":1}]}", J, 1),
                  "schema.allOf: only one schema is supported in strict mode");
    TU_FAILS_WITH(convert("{\"$ref\":\"#/$defs/a\",\"type\":\"object\",\"$defs\":{\"a\":{\"type\":\"null\"}}}", J, 1),
                  "schema: keyword 'type' beside '$ref' is not supported");
    TU_FAILS_WITH(convert("{\"type\":\"string\",\"pattern\":\"^a$\",\"maxLength\":3}", J, 1),
                  "schema: 'pattern' together with 'maxLength' is not supported");
    TU_FAILS_WITH(convert("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"null\"}]}", J, 1),
                  "schema: prefixItems needs 'items'");
    /* the same schemas are fine in non-strict mode, which ignores what it does not know */
    TU_OK(convert("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\",\"not\":{\"const\":3}}}}", J, 0));
    TU_OK(convert("{\"type\":\"integer\",\"multipleOf\":3,\"x-custom\":1}", J, 0));
    /* broken schemas, in either mode */
    static const struct {
        const char *schema, *error;
    } bad[] = {
        {"{\"type\":\"strin\"}", "schema.type: unknown type 'strin'"},
        {"{\"type\":[]}", "schema.type: an empty list of types"},
        {"{\"type\":1}", "schema.type: must be a type name or a list of them"},
        {"{\"type\":\"object\",\"properties\":[]}", "schema.properties: must be an object"},
        {"{\"type\":\"object\",\"required\":\"a\"}", "schema.required: must be a list of property names"},
        {"{\"type\":\"object\",\"required\":[1]}", "schema.required[0]: must be a string"},
        {"{\"type\":\"object\",\"additionalProperties\":1}",
         "schema.additionalProperties: must be a boolean or a schema"},
        {"{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", "schema: minLength 5 exceeds maxLength 2"},
        {"{\"type\":\"string\",\"minLength\":-1}", "schema.minLength: must be a non-negative integer"},
        {"{\"type\":\"string\",\"maxLength\":1.5}", "schema.maxLength: must be a non-negative integer"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "schema: minItems 3 exceeds maxItems 2"},
        {"{\"type\":\"array\",\"items\":1}", "schema.items: must be a schema"},
        {"{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}", "minItems 2 is more than the 1"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "schema: no integer lies between the minimum 5 and"},
        {"{\"type\":\"integer\",\"minimum\":\"0\"}", "schema.minimum: must be a number"},
        {"{\"type\":\"integer\",\"minimum\":1e300}", "schema.minimum: no integer in the supported range"},
        {"{\"enum\":[]}", "schema.enum: must be a non-empty list"},
        {"{\"type\":\"string\",\"enum\":[1,2]}", "schema.enum: no value fits the schema"},
        {"{\"anyOf\":{}}", "schema.anyOf: must be a non-empty list of schemas"},
        {"{\"anyOf\":[{\"type\":\"string\"},1]}", "schema.anyOf[1]: a schema must be an object or a boolean"},
        {"{\"$ref\":1}", "schema.$ref: must be a string"},
        {"{\"$ref\":\"http://example.com/s.json\"}", "is not a local reference"},
        {"{\"$ref\":\"#foo\"}", "anchors are not supported"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "comes back to itself before any text"},
        {"{\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"null\"}]}},\"$ref\":\"#/$defs/a\"}",
         "schema.$defs.a.anyOf[0].$ref: '#/$defs/a' comes back to itself"},
        {"{\"$defs\":[]}", "schema.$defs: must be an object"},
        {"false", "schema: the schema false accepts no value"},
        {"[]", "schema: a schema must be an object or a boolean"},
        {"{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"],\"additionalProperties\":false}",
         "schema.properties.a: required, but its schema is false"},
        {"{\"type\":\"string\",\"pattern\":\"(a\"}", "an unclosed group"},
        {"{\"type\":\"string\",\"pattern\":\"a)\"}", "an unmatched ')'"},
        {"{\"type\":\"string\",\"pattern\":\"[ab\"}", "an unterminated character class"},
        {"{\"type\":\"string\",\"pattern\":\"*a\"}", "a quantifier with nothing to repeat"},
        {"{\"type\":\"string\",\"pattern\":\"a**\"}", "a quantifier after a quantifier"},
        {"{\"type\":\"string\",\"pattern\":\"(a*)*\"}", "a repeated part that can match nothing"},
        {"{\"type\":\"string\",\"pattern\":\"a\\\\1\"}", "backreferences are not supported"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bx\"}", "word boundaries"},
        {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "anchors with a top-level '|'"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "anchors (^ $) are only supported at the start and the end"},
        {"{\"type\":\"string\",\"pattern\":\"[z-a]\"}", "a character range runs backwards"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\p{L}\"}", "Unicode property escapes are not supported"},
        {"{\"type\":\"string\",\"pattern\":\"a{3,2}\"}", "a repetition {m,n} with n < m"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\\"}", "a pattern ending in '\\'"},
        {"{\"type\":\"string\",\"pattern\":\"[^\\\\s\\\\S]\"}", "a character class that matches nothing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        for (int strict = 0; strict <= 1; strict++)
            TU_FAILS_WITH(convert(bad[i].schema, J, strict), bad[i].error);
    /* nesting is bounded */
    char deep[2048] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "{\"type\":\"array\",\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 70; i++)
        strcat(deep, "}");
    TU_FAILS_WITH(convert(deep, J, 0), "schema nested deeper than 64 levels");
    /* a listed name is at most 256 bytes: a property, or a required name that is not one (each character of the
     * names nests a group in the grammar of the other keys, and the compiler takes 1,000 levels) */
    char name[1201], schema[1400];
    memset(name, 'k', 1200), name[1200] = 0;
    snprintf(schema, sizeof schema, "{\"type\":\"object\",\"properties\":{\"%s\":{}}}", name);
    TU_FAILS_WITH(convert(schema, J, 0), "schema.properties: a property name of 1200 bytes (at most 256)");
    snprintf(schema, sizeof schema, "{\"type\":\"object\",\"required\":[\"%s\"]}", name);
    TU_FAILS_WITH(convert(schema, J, 0), "schema.required: a property name of 1200 bytes (at most 256)");
    name[256] = 0; /* the longest: its grammar compiles */
    snprintf(schema, sizeof schema, "{\"type\":\"object\",\"required\":[\"%s\"]}", name);
    char *text = gbnf_of(schema, J, 0);
    tern_grammar *gr = NULL;
    TU_OK(tern_grammar_compile(text, strlen(text), &gr));
    tern_grammar_free(gr);
    free(text);
    char *g = (char *)1;
    TU_FAILS_WITH(tern_json_schema_to_gbnf(NULL, J, 0, &g), "schema: missing");
    assert_null(g);
}

/* Mutated schemas: each either fails with TERN_EINVAL or gives a grammar that parses, the same text twice. */
static void collect(json_t *v, json_t **nodes, size_t *n, size_t cap) {
    if (*n < cap)
        nodes[(*n)++] = v;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) collect(x, nodes, n, cap);
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            collect(json_array_get(v, i), nodes, n, cap);
    }
}

static void test_mutations(void **state) {
    static const char *const pool[] = {"{}",
                                       "true",
                                       "false",
                                       "null",
                                       "1",
                                       "-1",
                                       "\"x\"",
                                       "[]",
                                       "[{}]",
                                       "{\"type\":\"string\"}",
                                       "{\"$ref\":\"#\"}",
                                       "{\"$ref\":\"#/$defs/node\"}",
                                       "{\"type\":[\"integer\",\"null\"],\"minimum\":-3}",
                                       "{\"enum\":[1,\"a\",null]}",
                                       "{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/node\"}]}",
                                       "{\"pattern\":\"^[a-c]{1,2}(x|y)*$\"}",
                                       "{\"not\":{}}",
                                       "{\"minLength\":3,\"maxLength\":1}",
                                       "\"integer\"",
                                       "{\"items\":{\"items\":{}}}",
                                       "{\"additionalProperties\":{\"type\":\"integer\"}}",
                                       "[\"a\",\"b\"]"};
    json_t *base = js(PERSON);
    json_object_set_new(
        base, "$defs",
        js("{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":"
           "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"additionalProperties\":false}}"));
    uint64_t x = 0x243f6a8885a308d3ull;
    int ok = 0, failed = 0;
    for (int iter = 0; iter < 400; iter++) {
        json_t *s = json_deep_copy(base);
        for (int m = 0; m < 1 + iter % 3; m++) {
            json_t *nodes[512];
            size_t n = 0;
            collect(s, nodes, &n, 512);
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            json_t *target = nodes[x % n];
            json_t *repl = js(pool[(x >> 20) % (sizeof pool / sizeof *pool)]);
            if (json_is_object(target) && json_object_size(target)) {
                char *key = strdup(json_object_iter_key(json_object_iter(target)));
                json_object_set_new(target, (x >> 40) & 1 ? key : "items", repl);
                free(key);
            } else if (json_is_array(target) && json_array_size(target))
                json_array_set_new(target, (x >> 33) % json_array_size(target), repl);
            else
                json_decref(repl);
        }
        for (int dialect = 0; dialect <= 1; dialect++)
            for (int strict = 0; strict <= 1; strict++) {
                char *a = NULL, *b = NULL;
                tern_err *e = tern_json_schema_to_gbnf(s, dialect, strict, &a);
                if (e) {
                    assert_int_equal(e->code, TERN_EINVAL);
                    assert_null(a);
                    tern_err_free(e);
                    failed++;
                    continue;
                }
                TU_OK(tern_json_schema_to_gbnf(s, dialect, strict, &b));
                assert_string_equal(a, b);
                gram_free(parsed(a));
                free(a), free(b);
                ok++;
            }
        json_decref(s);
    }
    json_decref(base);
    assert_true(ok > 100 && failed > 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_object),
        cmocka_unit_test(test_optional_and_extra),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_enum_const_anyof),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_json_object),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
