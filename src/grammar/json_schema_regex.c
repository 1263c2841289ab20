/* json_schema_regex.c — a string's pattern (an ECMAScript regex) as grammar over the string's encoded content, for
 * the JSON Schema converter. */
#include <stdint.h>
#include <string.h>

#include "core/utf8.h"
#include "grammar/json_schema_internal.h"

/* Regex (pattern) to grammar. The regex speaks of decoded characters; the grammar matches their encoding inside the
 * string: in JSON one canonical escaping (" \ and controls escaped, / also as \/, controls also as \u00XX), in
 * Gemma's raw text. Gemma strings never hold '<' here, so they cannot contain the <|"|> delimiter. */
typedef struct rx {
    conv *c;
    const char *s, *path;
    size_t n, i;
    int depth;
    tern_err *err;
} rx;

static int rx_fail(rx *x, const char *what) {
    if (!x->err)
        x->err = tern_errf(TERN_EINVAL, "%s.pattern: '%s': %s (at offset %zu)", x->path, x->s, what, x->i);
    return -1;
}

/* A set of characters as an expression over their encodings; returns 0, or -1 if it matches nothing. */
static int set_expr(rx *x, const tern_cpset *in, sbuf *o) {
    conv *c = x->c;
    tern_cpset s = {0};
    for (size_t i = 0; i < in->n; i++)
        tern_cpset_add(&s, in->r[i].lo, in->r[i].hi);
    tern_cpset_norm(&s);
    if (c->d->raw_text) {
        tern_cpset_remove(&s, 0, 0);
        tern_cpset_remove(&s, '<', '<');
        if (s.n)
            js_class_of(o, &s);
    } else {
        tern_cpset a = {0};
        for (size_t i = 0; i < s.n; i++)
            tern_cpset_add(&a, s.r[i].lo, s.r[i].hi);
        tern_cpset_norm(&a);
        tern_cpset_remove(&a, 0, 0x1f);
        tern_cpset_remove(&a, '"', '"');
        tern_cpset_remove(&a, '\\', '\\');
        if (a.n) {
            sbuf t = {0};
            js_class_of(&t, &a);
            js_alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
        }
        o->oom |= a.oom;
        tern_cpset_free(&a);
        char letters[16];
        size_t nl = 0;
        for (size_t i = 0; i < JS_N_SHORT_ESC; i++)
            if (tern_cpset_has(&s, JS_SHORT_ESC[i].cp))
                letters[nl++] = JS_SHORT_ESC[i].esc;
        if (nl) {
            sbuf t = {0};
            sbuf_adds(&t, "\"\\\\\" ");
            if (nl == 1)
                tern_gbnf_literal(&t, letters, 1);
            else {
                sbuf_adds(&t, "[");
                for (size_t i = 0; i < nl; i++)
                    js_class_char(&t, (unsigned char)letters[i]);
                sbuf_adds(&t, "]");
            }
            js_alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
        }
        int ctl = 0;
        for (uint32_t cp = 0; cp < 0x20; cp++)
            ctl += tern_cpset_has(&s, cp);
        if (ctl == 0x20) {
            const char *hex;
            if ((x->err = js_prim(c, P_HEX, &hex))) {
                tern_cpset_free(&s);
                return -1;
            }
            sbuf t = {0};
            sbuf_printf(&t, "\"\\\\u00\" [01] %s", hex);
            js_alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
        } else {
            for (uint32_t cp = 0; cp < 0x20; cp++) {
                if (!tern_cpset_has(&s, cp))
                    continue;
                static const char hx[] = "0123456789abcdef";
                sbuf t = {0};
                unsigned lo = cp & 15;
                sbuf_printf(&t, "\"\\\\u00%c", hx[cp >> 4]);
                if (lo < 10)
                    sbuf_printf(&t, "%c\"", hx[lo]);
                else
                    sbuf_printf(&t, "\" [%c%c]", hx[lo], hx[lo] - 'a' + 'A');
                js_alt_push(o, t.p);
                o->oom |= t.oom;
                sbuf_free(&t);
            }
        }
    }
    o->oom |= s.oom;
    int empty = !o->len;
    tern_cpset_free(&s);
    return empty ? -1 : 0;
}

/* The encoding of one literal character when it has exactly one (appended to lit), else 0. */
static int rx_lit_bytes(rx *x, uint32_t cp, sbuf *litb) {
    char u[4];
    if (x->c->d->raw_text) {
        if (cp == 0 || cp == '<')
            return 0;
        sbuf_add(litb, u, tern_utf8_put(cp, u));
        return 1;
    }
    if (cp < 0x20 || cp == '/')
        return 0;
    if (cp == '"' || cp == '\\')
        sbuf_add(litb, cp == '"' ? "\\\"" : "\\\\", 2);
    else
        sbuf_add(litb, u, tern_utf8_put(cp, u));
    return 1;
}

static int rx_hex(rx *x, int digits, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < digits; k++) {
        if (x->i >= x->n)
            return rx_fail(x, "unfinished escape");
        char ch = x->s[x->i];
        int h = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (h < 0)
            return rx_fail(x, "expected hex digits in an escape");
        *v = *v << 4 | (uint32_t)h;
        x->i++;
    }
    return 0;
}

static void add_class_escape(tern_cpset *s, char e) {
    switch (e) {
    case 'd': tern_cpset_add(s, '0', '9'); break;
    case 'w': tern_cpset_add(s, '0', '9'), tern_cpset_add(s, 'A', 'Z'), tern_cpset_add(s, 'a', 'z'), tern_cpset_add(s, '_', '_'); break;
    case 's':
        tern_cpset_add(s, 9, 13), tern_cpset_add(s, ' ', ' '), tern_cpset_add(s, 0xa0, 0xa0), tern_cpset_add(s, 0x1680, 0x1680);
        tern_cpset_add(s, 0x2000, 0x200a), tern_cpset_add(s, 0x2028, 0x2029), tern_cpset_add(s, 0x202f, 0x202f);
        tern_cpset_add(s, 0x205f, 0x205f), tern_cpset_add(s, 0x3000, 0x3000), tern_cpset_add(s, 0xfeff, 0xfeff);
        break;
    }
}

/* An escape after '\\' (x->i at the letter): a set (\d \w \s and negations) into *set with *is_set 1, or one
 * character into *cp. in_class: \b is a backspace rather than a word boundary. */
static int rx_escape(rx *x, int in_class, tern_cpset *set, int *is_set, uint32_t *cp) {
    *is_set = 0;
    if (x->i >= x->n)
        return rx_fail(x, "a pattern ending in '\\'");
    char e = x->s[x->i];
    if (e == 'd' || e == 'w' || e == 's' || e == 'D' || e == 'W' || e == 'S') {
        x->i++;
        tern_cpset t = {0};
        add_class_escape(&t, (char)(e | 0x20));
        tern_cpset_norm(&t);
        if (e >= 'A' && e <= 'Z') {
            tern_cpset inv = {0};
            tern_cpset_invert(&t, &inv);
            tern_cpset_free(&t);
            t = inv;
        }
        for (size_t i = 0; i < t.n; i++)
            tern_cpset_add(set, t.r[i].lo, t.r[i].hi);
        set->oom |= t.oom;
        tern_cpset_free(&t);
        *is_set = 1;
        return 0;
    }
    x->i++;
    switch (e) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 0;
        }
        return rx_fail(x, "word boundaries (\\b) are not supported");
    case 'B': return rx_fail(x, "word boundaries (\\B) are not supported");
    case '0':
        if (x->i < x->n && x->s[x->i] >= '0' && x->s[x->i] <= '9')
            return rx_fail(x, "octal escapes are not supported");
        *cp = 0;
        return 0;
    case 'x': return rx_hex(x, 2, cp);
    case 'u': {
        if (x->i < x->n && x->s[x->i] == '{')
            return rx_fail(x, "\\u{...} escapes are not supported");
        if (rx_hex(x, 4, cp))
            return -1;
        if (*cp >= 0xD800 && *cp <= 0xDBFF && x->i + 1 < x->n && x->s[x->i] == '\\' && x->s[x->i + 1] == 'u') {
            size_t save = x->i;
            uint32_t lo;
            x->i += 2;
            if (rx_hex(x, 4, &lo))
                return -1;
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
                return 0;
            }
            x->i = save;
        }
        if (*cp >= 0xD800 && *cp <= 0xDFFF)
            return rx_fail(x, "a lone surrogate escape");
        return 0;
    }
    case 'c':
        if (x->i < x->n && ((x->s[x->i] | 0x20) >= 'a' && (x->s[x->i] | 0x20) <= 'z')) {
            *cp = (uint32_t)(x->s[x->i++] & 31);
            return 0;
        }
        return rx_fail(x, "a control escape \\c without a letter");
    case 'p':
    case 'P': return rx_fail(x, "Unicode property escapes are not supported");
    case 'k': return rx_fail(x, "backreferences are not supported");
    default:
        if (e >= '1' && e <= '9')
            return rx_fail(x, "backreferences are not supported");
        if (js_is_alnum(e) || e == '_')
            return rx_fail(x, "an unknown escape");
        x->i--;
        int len = tern_utf8_decode((const unsigned char *)x->s + x->i, x->n - x->i, cp);
        if (!len)
            return rx_fail(x, "invalid UTF-8");
        x->i += (size_t)len;
        return 0;
    }
}

/* One character (or escape) of a class; *is_set when it is \d and the like. */
static int rx_class_atom(rx *x, tern_cpset *set, int *is_set, uint32_t *cp) {
    *is_set = 0;
    if (x->s[x->i] == '\\') {
        x->i++;
        return rx_escape(x, 1, set, is_set, cp);
    }
    int len = tern_utf8_decode((const unsigned char *)x->s + x->i, x->n - x->i, cp);
    if (!len)
        return rx_fail(x, "invalid UTF-8");
    x->i += (size_t)len;
    return 0;
}

/* [...] at x->i into set. */
static int rx_class(rx *x, tern_cpset *set) {
    size_t open = x->i++;
    int neg = x->i < x->n && x->s[x->i] == '^';
    x->i += (size_t)neg;
    tern_cpset t = {0};
    while (x->i < x->n && x->s[x->i] != ']') {
        uint32_t lo, hi;
        int is_set;
        if (rx_class_atom(x, &t, &is_set, &lo))
            goto fail;
        if (!is_set && x->i + 1 < x->n && x->s[x->i] == '-' && x->s[x->i + 1] != ']') {
            x->i++;
            int is_set2;
            if (rx_class_atom(x, &t, &is_set2, &hi))
                goto fail;
            if (is_set2) {
                rx_fail(x, "a range ending in a class escape");
                goto fail;
            }
            if (hi < lo) {
                rx_fail(x, "a character range runs backwards");
                goto fail;
            }
            tern_cpset_add(&t, lo, hi);
        } else if (!is_set)
            tern_cpset_add(&t, lo, lo);
    }
    if (x->i >= x->n) {
        x->i = open;
        rx_fail(x, "an unterminated character class");
        goto fail;
    }
    x->i++;
    tern_cpset_norm(&t);
    if (neg)
        tern_cpset_invert(&t, set);
    else
        for (size_t i = 0; i < t.n; i++)
            tern_cpset_add(set, t.r[i].lo, t.r[i].hi);
    set->oom |= t.oom;
    tern_cpset_free(&t);
    return 0;
fail:
    tern_cpset_free(&t);
    return -1;
}

/* A quantifier at x->i: 1 (found, bounds set), 0 (none), -1 (error). */
static int rx_quant(rx *x, uint64_t *min, uint64_t *max) {
    if (x->i >= x->n)
        return 0;
    char ch = x->s[x->i];
    if (ch == '*' || ch == '+' || ch == '?') {
        *min = ch == '+';
        *max = ch == '?' ? 1 : UNBOUNDED;
        x->i++;
    } else if (ch == '{') {
        size_t j = x->i + 1;
        uint64_t a = 0, b;
        int da = 0, db = 0, comma = 0;
        while (j < x->n && x->s[j] >= '0' && x->s[j] <= '9' && a <= MAX_COUNT)
            a = a * 10 + (uint64_t)(x->s[j++] - '0'), da++;
        b = a;
        if (j < x->n && x->s[j] == ',') {
            comma = 1, j++, b = 0;
            while (j < x->n && x->s[j] >= '0' && x->s[j] <= '9' && b <= MAX_COUNT)
                b = b * 10 + (uint64_t)(x->s[j++] - '0'), db++;
        }
        if (!da || j >= x->n || x->s[j] != '}')
            return 0; /* not a quantifier: a literal '{' */
        if (comma && !db)
            b = UNBOUNDED;
        if (a > MAX_COUNT || (b != UNBOUNDED && b > MAX_COUNT))
            return rx_fail(x, "a repetition count too large");
        if (b < a)
            return rx_fail(x, "a repetition {m,n} with n < m");
        *min = a, *max = b;
        x->i = j + 1;
    } else
        return 0;
    if (x->i < x->n && x->s[x->i] == '?')
        x->i++; /* lazy: the same language */
    uint64_t m2, n2;
    size_t save = x->i;
    if (x->i < x->n && (x->s[x->i] == '*' || x->s[x->i] == '+' || x->s[x->i] == '?' ||
                        (x->s[x->i] == '{' && rx_quant(x, &m2, &n2) == 1))) {
        x->i = save;
        return rx_fail(x, "a quantifier after a quantifier");
    }
    return x->err ? -1 : 1;
}

static int rx_alt(rx *x, sbuf *out, int *nullable, int *n_alts);

/* One atom: its expression into e (or, for a character with one encoding, its bytes into litb with *is_lit). */
static int rx_atom(rx *x, sbuf *e, sbuf *litb, int *is_lit, int *nullable) {
    *is_lit = 0, *nullable = 0;
    char ch = x->s[x->i];
    tern_cpset set = {0};
    uint32_t cp;
    int is_set = 0;
    if (ch == '(') {
        x->i++;
        if (x->i < x->n && x->s[x->i] == '?') {
            const char *g = x->s + x->i + 1;
            size_t left = x->n - x->i - 1;
            if (left >= 1 && g[0] == ':')
                x->i += 2;
            else if (left >= 2 && g[0] == '<' && g[1] != '=' && g[1] != '!') {
                const char *close = memchr(g, '>', left);
                if (!close)
                    return rx_fail(x, "an unterminated group name");
                x->i = (size_t)(close - x->s) + 1;
            } else if (left >= 1 && (g[0] == '=' || g[0] == '!' || g[0] == '<'))
                return rx_fail(x, "lookahead and lookbehind are not supported");
            else
                return rx_fail(x, "an unsupported group");
        }
        if (++x->depth > MAX_DEPTH)
            return rx_fail(x, "groups nested too deeply");
        int n_alts;
        if (rx_alt(x, e, nullable, &n_alts))
            return -1;
        x->depth--;
        if (x->i >= x->n || x->s[x->i] != ')')
            return rx_fail(x, "an unclosed group");
        x->i++;
        return 0;
    }
    if (ch == '[') {
        if (rx_class(x, &set))
            goto fail;
        is_set = 1;
    } else if (ch == '.') {
        x->i++;
        tern_cpset_add(&set, 0, 0x10FFFF);
        tern_cpset_norm(&set);
        tern_cpset_remove(&set, '\n', '\n');
        tern_cpset_remove(&set, '\r', '\r');
        tern_cpset_remove(&set, 0x2028, 0x2029);
        is_set = 1;
    } else if (ch == '\\') {
        x->i++;
        if (rx_escape(x, 0, &set, &is_set, &cp))
            goto fail;
    } else if (ch == '^' || ch == '$') {
        return rx_fail(x, "anchors (^ $) are only supported at the start and the end");
    } else if (ch == '*' || ch == '+' || ch == '?') {
        return rx_fail(x, "a quantifier with nothing to repeat");
    } else if (ch == ')') {
        return rx_fail(x, "an unmatched ')'");
    } else {
        uint64_t a, b;
        if (ch == '{' && rx_quant(x, &a, &b) == 1)
            return rx_fail(x, "a quantifier with nothing to repeat");
        if (x->err)
            return -1;
        int len = tern_utf8_decode((const unsigned char *)x->s + x->i, x->n - x->i, &cp);
        if (!len)
            return rx_fail(x, "invalid UTF-8");
        x->i += (size_t)len;
    }
    if (!is_set) {
        if (x->c->d->raw_text && cp == '<')
            return rx_fail(x, "'<' cannot be matched in the Gemma dialect (it would risk the <|\"|> delimiter)");
        if (rx_lit_bytes(x, cp, litb)) {
            *is_lit = 1;
            return 0;
        }
        tern_cpset_add(&set, cp, cp);
    }
    tern_cpset_norm(&set);
    if (set_expr(x, &set, e)) {
        if (!x->err)
            rx_fail(x, "a character class that matches nothing");
        goto fail;
    }
    tern_cpset_free(&set);
    return 0;
fail:
    tern_cpset_free(&set);
    return -1;
}

static void flush_lit(sbuf *out, sbuf *litb) {
    if (litb->len) {
        sbuf t = {0};
        tern_gbnf_literal(&t, litb->p, litb->len);
        js_seq_push(out, t.p);
        out->oom |= t.oom | litb->oom;
        sbuf_free(&t);
        sbuf_clear(litb);
    }
}

static int rx_seq(rx *x, sbuf *out, int *nullable) {
    sbuf litb = {0};
    *nullable = 1;
    int rc = 0;
    while (!rc && x->i < x->n && x->s[x->i] != '|' && x->s[x->i] != ')') {
        sbuf e = {0}, one = {0};
        int is_lit, anul;
        uint64_t min = 1, max = 1;
        if (rx_atom(x, &e, &one, &is_lit, &anul)) {
            rc = -1;
        } else {
            int q = rx_quant(x, &min, &max);
            if (q < 0)
                rc = -1;
            else if (!q && is_lit) {
                sbuf_add(&litb, one.p, one.len);
                *nullable = 0;
            } else {
                flush_lit(out, &litb);
                if (is_lit)
                    tern_gbnf_literal(&e, one.p, one.len);
                if (max == UNBOUNDED && anul && e.len)
                    rc = rx_fail(x, "a repeated part that can match nothing");
                else {
                    js_rep_push(out, e.p, min, max);
                    if (min > 0 && !anul && e.len)
                        *nullable = 0;
                }
            }
        }
        out->oom |= e.oom | one.oom;
        sbuf_free(&e), sbuf_free(&one);
    }
    flush_lit(out, &litb);
    sbuf_free(&litb);
    return rc;
}

/* Alternatives into out (an expression, empty if it matches only the empty text). */
static int rx_alt(rx *x, sbuf *out, int *nullable, int *n_alts) {
    sbuf alts = {0};
    int any_empty = 0, nul_any = 0, rc = 0;
    *n_alts = 0;
    for (;;) {
        sbuf seq = {0};
        int nul;
        if (rx_seq(x, &seq, &nul)) {
            sbuf_free(&seq);
            rc = -1;
            break;
        }
        (*n_alts)++;
        nul_any |= nul;
        if (!seq.len)
            any_empty = 1;
        else
            js_alt_push(&alts, seq.p);
        alts.oom |= seq.oom;
        sbuf_free(&seq);
        if (x->i < x->n && x->s[x->i] == '|') {
            x->i++;
            continue;
        }
        break;
    }
    if (!rc && alts.len) {
        if (any_empty)
            js_atom_push(out, alts.p, "?");
        else
            sbuf_adds(out, alts.p);
    }
    out->oom |= alts.oom;
    sbuf_free(&alts);
    *nullable = nul_any;
    return rc;
}

/* The content of a string matching the pattern (between the quotes), appended to out. */
TERN_MUST_CHECK tern_err *js_gen_pattern(conv *c, const char *pat, const char *path, sbuf *out) {
    rx x = {.c = c, .s = pat, .path = path, .n = strlen(pat)};
    size_t end = x.n;
    int a0 = end && pat[0] == '^', a1 = 0;
    if (end > (size_t)a0 && pat[end - 1] == '$') {
        size_t bs = 0;
        while (end - 1 - bs > 0 && pat[end - 2 - bs] == '\\')
            bs++;
        a1 = bs % 2 == 0;
    }
    x.i = (size_t)a0;
    x.n = end - (size_t)a1;
    sbuf body = {0};
    int nul, n_alts;
    if (!rx_alt(&x, &body, &nul, &n_alts) && x.i < x.n)
        rx_fail(&x, "an unmatched ')'");
    if (!x.err && (a0 || a1) && n_alts > 1) {
        /* ^a|b$ anchors a at the start and b at the end only: refuse rather than guess. */
        x.i = 0;
        rx_fail(&x, "anchors with a top-level '|'; write ^(a|b)$");
    }
    if (x.err) {
        sbuf_free(&body);
        return x.err;
    }
    const char *any = "[^<\\x00]";
    tern_err *err = c->d->raw_text || (a0 && a1) ? NULL : js_prim(c, P_CHAR, &any);
    if (err) {
        sbuf_free(&body);
        return err;
    }
    if (!a0)
        js_atom_push(out, any, "*");
    js_seq_push(out, body.p);
    if (!a1)
        js_atom_push(out, any, "*");
    out->oom |= body.oom;
    sbuf_free(&body);
    return NULL;
}
