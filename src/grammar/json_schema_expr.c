/* json_schema_expr.c — GBNF expression text for the JSON Schema converter: sequences, alternatives and repetitions
 * that group only where they must, literals, and code-point sets as character classes. */
#include <stdint.h>
#include <stdio.h>

#include "core/utf8.h"
#include "grammar/json_schema_internal.h"

const struct js_short_esc JS_SHORT_ESC[JS_N_SHORT_ESC] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {8, 'b'},
                                                          {12, 'f'},  {10, 'n'},   {13, 'r'},  {9, 't'}};

static const char *skip_quoted(const char *p) {
    char close = *p == '"' ? '"' : ']';
    for (p++; *p && *p != close; p++)
        if (*p == '\\' && p[1])
            p++;
    return *p ? p + 1 : p;
}

/* The top level of an expression: how many items (primaries and postfix operators) and whether it has a '|'. */
static void shape(const char *e, int *items, int *alt) {
    int depth = 0;
    *items = 0, *alt = 0;
    for (const char *p = e; *p;) {
        char ch = *p;
        if (ch == '"' || ch == '[') {
            *items += !depth;
            p = skip_quoted(p);
        } else if (ch == '(') {
            *items += !depth;
            depth++, p++;
        } else if (ch == ')') {
            depth--, p++;
        } else if (ch == '|') {
            *alt |= !depth;
            p++;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            *items += !depth;
            p++;
        } else if (ch == '{') {
            *items += !depth;
            while (*p && *p != '}')
                p++;
            p += *p != 0;
        } else if (js_is_word(ch)) {
            *items += !depth;
            while (js_is_word(*p))
                p++;
        } else {
            p++;
        }
    }
}

static int is_atom(const char *e) {
    int items, alt;
    shape(e, &items, &alt);
    return items == 1 && !alt;
}

static int has_alt(const char *e) {
    int items, alt;
    shape(e, &items, &alt);
    return alt;
}

int js_is_name(const char *e) {
    if (!*e)
        return 0;
    for (; *e; e++)
        if (!js_is_word(*e))
            return 0;
    return 1;
}

static void sep(sbuf *o) {
    if (o->len && o->p[o->len - 1] != ' ' && o->p[o->len - 1] != '(')
        sbuf_adds(o, " ");
}

void js_seq_push_unit(sbuf *o, const char *e) {
    if (!e || !*e)
        return;
    sep(o);
    sbuf_adds(o, e);
}

void js_group_push(sbuf *o, const char *e, const char *op) {
    sep(o);
    sbuf_adds(o, "( "), sbuf_adds(o, e), sbuf_adds(o, " )"), sbuf_adds(o, op);
}

/* Appends e as one element of a sequence (grouped when it has alternatives). */
void js_seq_push(sbuf *o, const char *e) {
    if (e && *e && has_alt(e))
        js_group_push(o, e, "");
    else
        js_seq_push_unit(o, e);
}

/* Appends e as another alternative. */
void js_alt_push(sbuf *o, const char *e) {
    if (!e || !*e)
        return;
    if (o->len)
        sbuf_adds(o, " | ");
    sbuf_adds(o, e);
}

/* Appends e with a postfix operator (grouped unless it is a single primary). */
void js_atom_push(sbuf *o, const char *e, const char *op) {
    if (!*op) {
        js_seq_push(o, e);
        return;
    }
    if (!is_atom(e)) {
        js_group_push(o, e, op);
        return;
    }
    sep(o);
    sbuf_adds(o, e), sbuf_adds(o, op);
}

static void rep_exact(sbuf *o, const char *e, uint64_t k) {
    char op[32];
    for (; k > MAX_REPEAT; k -= MAX_REPEAT) {
        snprintf(op, sizeof op, "{%d}", MAX_REPEAT);
        js_atom_push(o, e, op);
    }
    if (k == 1)
        js_seq_push(o, e);
    else if (k > 1) {
        snprintf(op, sizeof op, "{%llu}", (unsigned long long)k);
        js_atom_push(o, e, op);
    }
}

/* e{0,k}; past the compiler's bound as ( e{1000} e{0,k-1000} | e{0,999} ), which stays unambiguous. The levels are
 * written in place, innermost last: built apart, each level's text was copied into the one above it (quadratic in
 * k / 1000: a count near a million took seconds). */
static void rep_upto(sbuf *o, const char *e, uint64_t k) {
    char op[32];
    uint64_t levels = 0;
    for (; k > MAX_REPEAT; k -= MAX_REPEAT, levels++) {
        sep(o);
        sbuf_adds(o, "( ");
        rep_exact(o, e, MAX_REPEAT);
    }
    if (k == 1) {
        js_atom_push(o, e, "?");
    } else if (k > 1) {
        snprintf(op, sizeof op, "{0,%llu}", (unsigned long long)k);
        js_atom_push(o, e, op);
    }
    for (; levels; levels--) {
        sbuf_adds(o, " | ");
        snprintf(op, sizeof op, "{0,%d}", MAX_REPEAT - 1);
        js_atom_push(o, e, op);
        sbuf_adds(o, " )");
    }
}

/* Appends e{min,max} (max UNBOUNDED: no upper bound) in the operators the grammar has. */
void js_rep_push(sbuf *o, const char *e, uint64_t min, uint64_t max) {
    char op[48];
    if (!e || !*e || max == 0)
        return;
    if (max == UNBOUNDED) {
        if (min == 0)
            js_atom_push(o, e, "*");
        else if (min == 1)
            js_atom_push(o, e, "+");
        else if (min <= MAX_REPEAT) {
            snprintf(op, sizeof op, "{%llu,}", (unsigned long long)min);
            js_atom_push(o, e, op);
        } else {
            rep_exact(o, e, min);
            js_atom_push(o, e, "*");
        }
    } else if (min == max) {
        rep_exact(o, e, min);
    } else if (max <= MAX_REPEAT) {
        if (min == 0 && max == 1)
            snprintf(op, sizeof op, "?");
        else
            snprintf(op, sizeof op, "{%llu,%llu}", (unsigned long long)min, (unsigned long long)max);
        js_atom_push(o, e, op);
    } else {
        rep_exact(o, e, min);
        rep_upto(o, e, max - min);
    }
}

/* A GBNF literal of n bytes (raw UTF-8 kept, control characters escaped). */
void tern_gbnf_literal(sbuf *o, const char *s, size_t n) {
    sbuf_adds(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"')
            sbuf_adds(o, "\\\"");
        else if (ch == '\\')
            sbuf_adds(o, "\\\\");
        else if (ch == '\n')
            sbuf_adds(o, "\\n");
        else if (ch == '\r')
            sbuf_adds(o, "\\r");
        else if (ch == '\t')
            sbuf_adds(o, "\\t");
        else if (ch < 0x20 || ch == 0x7f)
            sbuf_printf(o, "\\x%02x", ch);
        else
            sbuf_add(o, &s[i], 1);
    }
    sbuf_adds(o, "\"");
}

/* Appends a literal as the next element of a sequence. */
void js_seq_lit(sbuf *o, const char *s, size_t n) {
    if (!n)
        return;
    sep(o);
    tern_gbnf_literal(o, s, n);
}

/* ==== code-point sets as grammar classes ========================================================================= */

void js_class_char(sbuf *o, uint32_t cp) {
    char u[4];
    if (cp == '\\')
        sbuf_adds(o, "\\\\");
    else if (cp == ']' || cp == '[' || cp == '-' || cp == '^')
        sbuf_printf(o, "\\x%02x", (unsigned)cp);
    else if (cp == '\n')
        sbuf_adds(o, "\\n");
    else if (cp == '\t')
        sbuf_adds(o, "\\t");
    else if (cp == '\r')
        sbuf_adds(o, "\\r");
    else if (cp < 0x20 || cp == 0x7f)
        sbuf_printf(o, "\\x%02x", (unsigned)cp);
    else if (cp < 0x80)
        sbuf_add(o, (char[]){(char)cp}, 1);
    else if (cp <= 0xFFFF)
        sbuf_printf(o, "\\u%04x", (unsigned)cp);
    else
        sbuf_add(o, u, tern_utf8_put(cp, u));
}

void js_class_ranges(sbuf *o, const tern_cpset *s, int neg) {
    sbuf_adds(o, neg ? "[^" : "[");
    for (size_t i = 0; i < s->n; i++) {
        js_class_char(o, s->r[i].lo);
        if (s->r[i].hi > s->r[i].lo) {
            if (s->r[i].hi > s->r[i].lo + 1)
                sbuf_adds(o, "-");
            js_class_char(o, s->r[i].hi);
        }
    }
    sbuf_adds(o, "]");
}

/* A class for a normalized, non-empty set: [...] or [^...], whichever is shorter. */
void js_class_of(sbuf *o, const tern_cpset *s) {
    tern_cpset inv = {0};
    tern_cpset_invert(s, &inv);
    if (inv.n && inv.n < s->n)
        js_class_ranges(o, &inv, 1);
    else
        js_class_ranges(o, s, 0);
    o->oom |= inv.oom | s->oom;
    tern_cpset_free(&inv);
}
