/* json_schema.c — JSON Schema to GBNF (see json_schema.h for the dialect and the supported keywords).
 *
 * One walk over the schema fills a table of rules. Every subschema that is more than a primitive becomes a rule named
 * after where it sits (root, root-address, root-address-city-kv, Node for #/$defs/Node); a name wanted twice for
 * different bodies gets a numeric suffix, the same name with the same body is shared, so the text is a pure function
 * of the schema. A $ref target becomes one rule, reserved before its body is written, so recursion is a rule that
 * refers to itself; a cycle of references reached before any text is written (left recursion, which no matcher can
 * follow) is refused. Primitives (ws, char, string, number, value, ...) are added when first used.
 *
 * Where the grammar is narrower or looser than the schema, on purpose: properties come in the schema's order, then
 * additional ones; number bounds other than a sign are not enforced (a # comment says so); bounded integers are never
 * written "-0"; where a pattern, an additional property's key (which must not be a listed name) or a const/enum value
 * is concerned, a character outside ASCII is taken raw only, not as a \u escape; lone surrogate escapes are refused
 * everywhere (as jansson refuses them). Numbers and repetitions are bounded (json_schema.h), so a model constrained
 * by the grammar can always finish. */
#include "grammar/json_schema.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sbuf.h"
#include "core/utf8.h"
#include "grammar/cpset.h"

#define MAX_DEPTH 64      /* nesting of subschemas, of const values and of regex groups */
#define INT_DIGITS 19     /* most digits before the point */
#define FRAC_DIGITS 18    /* most digits after it */
#define EXP_DIGITS 3      /* most exponent digits */
#define WS_INDENT 20      /* most spaces or tabs after a newline between tokens */
#define MAX_REPEAT 1000   /* the largest {m,n} bound the grammar compiler takes; larger counts are split */
#define MAX_NAME 80       /* longest rule name before a uniqueness suffix */
#define MAX_COUNT 1000000 /* largest minLength / maxItems / regex count honoured exactly */
#define UNBOUNDED UINT64_MAX

static const char GEMMA_QUOTE[] = "<|\"|>";

/* ==== rules and the converter's state ============================================================================ */

typedef struct rule {
    char *name;
    char *body; /* NULL while reserved (a $ref target being written) */
} rule;

typedef struct ref_ent {
    char *ptr;        /* the $ref text */
    const char *name; /* its rule */
} ref_ent;

enum prim {
    P_WS, P_HEX, P_CHAR, P_STRING, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL, P_VALUE, P_OBJECT, P_ARRAY, P_KEY,
    P_GSTR_LT, P_GSTR_EXIT, P_GSTR_BODY, P_DATE, P_TIME, P_DATETIME, P_UUID, P_EMAIL, P_COUNT
};

typedef struct conv {
    const json_t *root;
    int gemma, strict;
    rule *rules;
    size_t n_rules, cap_rules;
    ref_ent *refs;
    size_t n_refs, cap_refs;
    size_t *chain; /* refs entered since text was last consumed: [chain_base, n_chain) */
    size_t n_chain, cap_chain, chain_base;
    const char *prim[P_COUNT];
    sbuf notes; /* "# ..." lines */
} conv;

static TERN_MUST_CHECK tern_err *oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static int is_alnum(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'); }
static int is_word(int ch) { return is_alnum(ch) || ch == '-' || ch == '_'; }

/* A rule name from a hint: [A-Za-z0-9-] only, runs of anything else one '-', at most MAX_NAME characters. */
static void sanitize(const char *hint, char *out) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)hint; *p && n < MAX_NAME; p++) {
        if (is_alnum(*p))
            out[n++] = (char)*p;
        else if (n && out[n - 1] != '-')
            out[n++] = '-';
    }
    while (n && out[n - 1] == '-')
        n--;
    if (!n)
        out[n++] = 'r';
    out[n] = 0;
}

static rule *find_rule(conv *c, const char *name) {
    for (size_t i = 0; i < c->n_rules; i++)
        if (!strcmp(c->rules[i].name, name))
            return &c->rules[i];
    return NULL;
}

/* Adds `name ::= body` under a name made from `hint` (an existing rule with that name and body is reused); body NULL
 * reserves a fresh name. *name points into the table (stable until the converter is freed). */
static TERN_MUST_CHECK tern_err *add_rule(conv *c, const char *hint, const char *body, const char **name) {
    char base[MAX_NAME + 1], cand[MAX_NAME + 16];
    sanitize(hint, base);
    for (unsigned i = 0;; i++) {
        if (i)
            snprintf(cand, sizeof cand, "%s%u", base, i);
        else
            snprintf(cand, sizeof cand, "%s", base);
        rule *r = find_rule(c, cand);
        if (!r)
            break;
        if (body && r->body && !strcmp(r->body, body)) {
            *name = r->name;
            return NULL;
        }
    }
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? 2 * c->cap_rules : 64;
        rule *v = realloc(c->rules, cap * sizeof *v);
        if (!v)
            return oom();
        c->rules = v, c->cap_rules = cap;
    }
    rule *r = &c->rules[c->n_rules];
    r->name = strdup(cand);
    r->body = body ? strdup(body) : NULL;
    if (!r->name || (body && !r->body)) {
        free(r->name), free(r->body);
        return oom();
    }
    c->n_rules++;
    *name = r->name;
    return NULL;
}

/* Adds a rule from a built buffer (checking it was built whole). */
static TERN_MUST_CHECK tern_err *add_rule_buf(conv *c, const char *hint, const sbuf *b, const char **name) {
    if (b->oom)
        return oom();
    return add_rule(c, hint, b->p ? b->p : "", name);
}

/* Fills in a reserved rule. */
static TERN_MUST_CHECK tern_err *set_body(conv *c, const char *name, const sbuf *b) {
    if (b->oom)
        return oom();
    rule *r = find_rule(c, name);
    if (!r || r->body)
        return tern_errf(TERN_EINTERNAL, "json schema: rule '%s' filled twice", name);
    return (r->body = strdup(b->p ? b->p : "")) ? NULL : oom();
}

static void note(conv *c, const char *path, const char *what) {
    sbuf_adds(&c->notes, "# ");
    for (int part = 0; part < 2; part++) {
        for (const char *p = part ? what : path; *p; p++)
            sbuf_add(&c->notes, (unsigned char)*p < 0x20 ? "?" : p, 1);
        sbuf_adds(&c->notes, part ? "\n" : ": ");
    }
}

static void conv_free(conv *c) {
    for (size_t i = 0; i < c->n_rules; i++)
        free(c->rules[i].name), free(c->rules[i].body);
    free(c->rules);
    for (size_t i = 0; i < c->n_refs; i++)
        free(c->refs[i].ptr);
    free(c->refs);
    free(c->chain);
    sbuf_free(&c->notes);
}

/* ==== expression text ============================================================================================ */

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
        } else if (is_word(ch)) {
            *items += !depth;
            while (is_word(*p))
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

static int is_name(const char *e) {
    if (!*e)
        return 0;
    for (; *e; e++)
        if (!is_word(*e))
            return 0;
    return 1;
}

static void sep(sbuf *o) {
    if (o->len && o->p[o->len - 1] != ' ' && o->p[o->len - 1] != '(')
        sbuf_adds(o, " ");
}

/* Appends e as one element of a sequence (grouped when it has alternatives). */
static void seq_push(sbuf *o, const char *e) {
    if (!e || !*e)
        return;
    sep(o);
    if (has_alt(e))
        sbuf_printf(o, "( %s )", e);
    else
        sbuf_adds(o, e);
}

/* Appends e as another alternative. */
static void alt_push(sbuf *o, const char *e) {
    if (!e || !*e)
        return;
    if (o->len)
        sbuf_adds(o, " | ");
    sbuf_adds(o, e);
}

/* Appends e with a postfix operator (grouped unless it is a single primary). */
static void atom_push(sbuf *o, const char *e, const char *op) {
    if (!*op) {
        seq_push(o, e);
        return;
    }
    sep(o);
    if (is_atom(e))
        sbuf_printf(o, "%s%s", e, op);
    else
        sbuf_printf(o, "( %s )%s", e, op);
}

static void rep_exact(sbuf *o, const char *e, uint64_t k) {
    char op[32];
    for (; k > MAX_REPEAT; k -= MAX_REPEAT) {
        snprintf(op, sizeof op, "{%d}", MAX_REPEAT);
        atom_push(o, e, op);
    }
    if (k == 1)
        seq_push(o, e);
    else if (k > 1) {
        snprintf(op, sizeof op, "{%llu}", (unsigned long long)k);
        atom_push(o, e, op);
    }
}

/* e{0,k}; past the compiler's bound as ( e{1000} e{0,k-1000} | e{0,999} ), which stays unambiguous. */
static void rep_upto(sbuf *o, const char *e, uint64_t k) {
    char op[32];
    if (k == 0)
        return;
    if (k == 1) {
        atom_push(o, e, "?");
    } else if (k <= MAX_REPEAT) {
        snprintf(op, sizeof op, "{0,%llu}", (unsigned long long)k);
        atom_push(o, e, op);
    } else {
        sbuf a = {0}, b = {0};
        rep_exact(&a, e, MAX_REPEAT);
        rep_upto(&a, e, k - MAX_REPEAT);
        rep_upto(&b, e, MAX_REPEAT - 1);
        alt_push(&a, b.p);
        o->oom |= a.oom | b.oom;
        seq_push(o, a.p);
        sbuf_free(&a), sbuf_free(&b);
    }
}

/* Appends e{min,max} (max UNBOUNDED: no upper bound) in the operators the grammar has. */
static void rep_push(sbuf *o, const char *e, uint64_t min, uint64_t max) {
    char op[48];
    if (!e || !*e || max == 0)
        return;
    if (max == UNBOUNDED) {
        if (min == 0)
            atom_push(o, e, "*");
        else if (min == 1)
            atom_push(o, e, "+");
        else if (min <= MAX_REPEAT) {
            snprintf(op, sizeof op, "{%llu,}", (unsigned long long)min);
            atom_push(o, e, op);
        } else {
            rep_exact(o, e, min);
            atom_push(o, e, "*");
        }
    } else if (min == max) {
        rep_exact(o, e, min);
    } else if (max <= MAX_REPEAT) {
        if (min == 0 && max == 1)
            snprintf(op, sizeof op, "?");
        else
            snprintf(op, sizeof op, "{%llu,%llu}", (unsigned long long)min, (unsigned long long)max);
        atom_push(o, e, op);
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
static void seq_lit(sbuf *o, const char *s, size_t n) {
    if (!n)
        return;
    sep(o);
    tern_gbnf_literal(o, s, n);
}

/* ==== code-point sets as grammar classes ========================================================================= */

static void class_char(sbuf *o, uint32_t cp) {
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

static void class_ranges(sbuf *o, const tern_cpset *s, int neg) {
    sbuf_adds(o, neg ? "[^" : "[");
    for (size_t i = 0; i < s->n; i++) {
        class_char(o, s->r[i].lo);
        if (s->r[i].hi > s->r[i].lo) {
            if (s->r[i].hi > s->r[i].lo + 1)
                sbuf_adds(o, "-");
            class_char(o, s->r[i].hi);
        }
    }
    sbuf_adds(o, "]");
}

/* A class for a normalized, non-empty set: [...] or [^...], whichever is shorter. */
static void class_of(sbuf *o, const tern_cpset *s) {
    tern_cpset inv = {0};
    tern_cpset_invert(s, &inv);
    if (inv.n && inv.n < s->n)
        class_ranges(o, &inv, 1);
    else
        class_ranges(o, s, 0);
    o->oom |= inv.oom | s->oom;
    tern_cpset_free(&inv);
}

/* ==== primitives ================================================================================================= */

static TERN_MUST_CHECK tern_err *prim(conv *c, enum prim p, const char **name);

/* Appends the name of primitive p to o. */
static TERN_MUST_CHECK tern_err *prim_push(conv *c, enum prim p, sbuf *o) {
    const char *n;
    TERN_TRY(prim(c, p, &n));
    seq_push(o, n);
    return NULL;
}

static TERN_MUST_CHECK tern_err *prim(conv *c, enum prim p, const char **name) {
    if (c->prim[p]) {
        *name = c->prim[p];
        return NULL;
    }
    static const char *const names[P_COUNT] = {
        [P_WS] = "ws", [P_HEX] = "hex", [P_CHAR] = "char", [P_STRING] = "string", [P_NUMBER] = "number",
        [P_INTEGER] = "integer", [P_BOOLEAN] = "boolean", [P_NULL] = "null", [P_VALUE] = "value",
        [P_OBJECT] = "object", [P_ARRAY] = "array", [P_KEY] = "key", [P_GSTR_LT] = "string-lt",
        [P_GSTR_EXIT] = "string-exit", [P_GSTR_BODY] = "string-body", [P_DATE] = "date", [P_TIME] = "time",
        [P_DATETIME] = "date-time", [P_UUID] = "uuid", [P_EMAIL] = "email"};
    const char *d[6] = {0}; /* the primitives this one refers to */
    sbuf b = {0};
    tern_err *err = NULL;
#define DEP(i, q)                                                                                                      \
    do {                                                                                                               \
        if ((err = prim(c, (q), &d[i])))                                                                               \
            goto done;                                                                                                 \
    } while (0)
    switch (p) {
    case P_WS: sbuf_printf(&b, "( \" \" | \"\\n\" [ \\t]{0,%d} )?", WS_INDENT); break;
    case P_HEX: sbuf_adds(&b, "[0-9a-fA-F]"); break;
    case P_CHAR:
        DEP(0, P_HEX);
        sbuf_printf(&b,
                    "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] %s{3} | [dD] [0-7] "
                    "%s{2} | [dD] [89abAB] %s{2} \"\\\\u\" [dD] [c-fC-F] %s{2} ) )",
                    d[0], d[0], d[0], d[0]);
        break;
    case P_STRING:
        if (c->gemma) {
            DEP(0, P_GSTR_BODY);
            sbuf_printf(&b, "\"<|\\\"|>\" %s \"<|\\\"|>\"", d[0]);
        } else {
            DEP(0, P_CHAR);
            sbuf_printf(&b, "\"\\\"\" %s* \"\\\"\"", d[0]);
        }
        break;
    case P_NUMBER:
        sbuf_printf(&b, "\"-\"? ( \"0\" | [1-9] [0-9]{0,%d} ) ( \".\" [0-9]{1,%d} )? ( [eE] [-+]? [0-9]{1,%d} )?",
                    INT_DIGITS - 1, FRAC_DIGITS, EXP_DIGITS);
        break;
    case P_INTEGER: sbuf_printf(&b, "\"-\"? ( \"0\" | [1-9] [0-9]{0,%d} )", INT_DIGITS - 1); break;
    case P_BOOLEAN: sbuf_adds(&b, "\"true\" | \"false\""); break;
    case P_NULL: sbuf_adds(&b, "\"null\""); break;
    case P_VALUE:
        DEP(0, P_OBJECT);
        DEP(1, P_ARRAY);
        DEP(2, P_STRING);
        DEP(3, P_NUMBER);
        DEP(4, P_BOOLEAN);
        DEP(5, P_NULL);
        sbuf_printf(&b, "%s | %s | %s | %s | %s | %s", d[0], d[1], d[2], d[3], d[4], d[5]);
        break;
    case P_OBJECT:
        /* value refers back to object: reserve the name first. */
        if ((err = add_rule(c, names[p], NULL, &c->prim[p])))
            goto done;
        DEP(0, P_VALUE);
        if (c->gemma) {
            DEP(1, P_KEY);
            sbuf_printf(&b, "\"{\" ( %s \":\" %s ( \",\" %s \":\" %s )* )? \"}\"", d[1], d[0], d[1], d[0]);
        } else {
            DEP(1, P_WS);
            DEP(2, P_STRING);
            sbuf_printf(&b, "\"{\" %s ( %s %s \":\" %s %s %s ( \",\" %s %s %s \":\" %s %s %s )* )? \"}\"", d[1], d[2],
                        d[1], d[1], d[0], d[1], d[1], d[2], d[1], d[1], d[0], d[1]);
        }
        err = set_body(c, c->prim[p], &b);
        *name = c->prim[p];
        sbuf_free(&b);
        return err;
    case P_ARRAY:
        if ((err = add_rule(c, names[p], NULL, &c->prim[p])))
            goto done;
        DEP(0, P_VALUE);
        if (c->gemma) {
            sbuf_printf(&b, "\"[\" ( %s ( \",\" %s )* )? \"]\"", d[0], d[0]);
        } else {
            DEP(1, P_WS);
            sbuf_printf(&b, "\"[\" %s ( %s %s ( \",\" %s %s %s )* )? \"]\"", d[1], d[0], d[1], d[1], d[0], d[1]);
        }
        err = set_body(c, c->prim[p], &b);
        *name = c->prim[p];
        sbuf_free(&b);
        return err;
    case P_KEY: sbuf_adds(&b, "[A-Za-z0-9_]+"); break;
    case P_GSTR_LT: /* a run of '<' (state: "<" seen), with partial quotes "<|", "<|\"", "<|\"|" cut short by '<' */
        sbuf_adds(&b, "\"<\" ( \"<\" | \"|\" ( \"<\" | \"\\\"\" ( \"<\" | \"|<\" ) ) )*");
        break;
    case P_GSTR_EXIT: /* after string-lt: back to plain text without completing <|"|> */
        sbuf_adds(&b, "[^<|\\x00] | \"|\" ( [^<\"\\x00] | \"\\\"\" ( [^<|\\x00] | \"|\" [^<>\\x00] ) )");
        break;
    case P_GSTR_BODY: /* any text without <|"|> (it may end in a proper prefix of it: <|"|> has no border) */
        DEP(0, P_GSTR_LT);
        DEP(1, P_GSTR_EXIT);
        sbuf_printf(&b, "( [^<\\x00] | %s %s )* ( %s ( \"|\" ( \"\\\"\" \"|\"? )? )? )?", d[0], d[1], d[0]);
        break;
    case P_DATE:
        sbuf_adds(&b, "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )");
        break;
    case P_TIME:
        sbuf_adds(&b, "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) "
                      "( \".\" [0-9]{1,9} )? ( [Zz] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )");
        break;
    case P_DATETIME:
        DEP(0, P_DATE);
        DEP(1, P_TIME);
        sbuf_printf(&b, "%s [Tt] %s", d[0], d[1]);
        break;
    case P_UUID:
        DEP(0, P_HEX);
        sbuf_printf(&b, "%s{8} \"-\" %s{4} \"-\" %s{4} \"-\" %s{4} \"-\" %s{12}", d[0], d[0], d[0], d[0], d[0]);
        break;
    case P_EMAIL:
        sbuf_adds(&b, "[A-Za-z0-9._%+\\x2d]{1,64} \"@\" [A-Za-z0-9\\x2d]{1,63} ( \".\" [A-Za-z0-9\\x2d]{1,63} ){1,8}");
        break;
    case P_COUNT: break;
    }
#undef DEP
    err = add_rule_buf(c, names[p], &b, &c->prim[p]);
    if (!err)
        *name = c->prim[p];
done:
    sbuf_free(&b);
    return err;
}

/* ==== rendering constants ======================================================================================== */

/* A JSON string literal the way a compact serializer writes it (raw UTF-8, \u00XX for other controls). */
static void json_str(sbuf *o, const char *s, size_t n) {
    sbuf_adds(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': sbuf_adds(o, "\\\""); break;
        case '\\': sbuf_adds(o, "\\\\"); break;
        case '\b': sbuf_adds(o, "\\b"); break;
        case '\f': sbuf_adds(o, "\\f"); break;
        case '\n': sbuf_adds(o, "\\n"); break;
        case '\r': sbuf_adds(o, "\\r"); break;
        case '\t': sbuf_adds(o, "\\t"); break;
        default:
            if (ch < 0x20)
                sbuf_printf(o, "\\u%04x", ch);
            else
                sbuf_add(o, &s[i], 1);
        }
    }
    sbuf_adds(o, "\"");
}

/* The shortest decimal that reads back as d. */
static void real_text(sbuf *o, double d) {
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    sbuf_adds(o, buf);
}

/* 1 if a key can be written bare in Gemma's syntax and read back as itself. */
static int gemma_bare_key(const char *k, size_t n) {
    if (!n || k[0] == ' ' || k[n - 1] == ' ' || k[0] == '\t' || k[n - 1] == '\t' || k[0] == '\n' || k[n - 1] == '\n')
        return 0;
    if (n >= 5 && !memcmp(k, GEMMA_QUOTE, 5))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (k[i] == ':' || k[i] == ',' || k[i] == '{' || k[i] == '}' || (unsigned char)k[i] < 0x20)
            return 0;
    return 1;
}

static int has_gemma_quote(const char *s, size_t n) { return n >= 5 && memmem(s, n, GEMMA_QUOTE, 5) != NULL; }

/* The text of value v in the dialect; 1 on success, 0 if Gemma's syntax cannot hold it (a string containing
 * <|"|>), -1 if nested too deeply. */
static int render(const conv *c, sbuf *o, const json_t *v, int depth) {
    if (depth > MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        const json_t *x;
        int first = 1;
        sbuf_adds(o, "{");
        json_object_foreach((json_t *)v, k, x) {
            size_t kn = strlen(k);
            if (!first)
                sbuf_adds(o, ",");
            first = 0;
            if (!c->gemma)
                json_str(o, k, kn);
            else if (gemma_bare_key(k, kn))
                sbuf_add(o, k, kn);
            else if (has_gemma_quote(k, kn))
                return 0;
            else
                sbuf_printf(o, "%s%s%s", GEMMA_QUOTE, k, GEMMA_QUOTE);
            sbuf_adds(o, ":");
            int r = render(c, o, x, depth + 1);
            if (r <= 0)
                return r;
        }
        sbuf_adds(o, "}");
        return 1;
    }
    case JSON_ARRAY: {
        sbuf_adds(o, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                sbuf_adds(o, ",");
            int r = render(c, o, json_array_get(v, i), depth + 1);
            if (r <= 0)
                return r;
        }
        sbuf_adds(o, "]");
        return 1;
    }
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        if (!c->gemma) {
            json_str(o, s, n);
            return 1;
        }
        if (has_gemma_quote(s, n) || memchr(s, 0, n))
            return 0;
        sbuf_adds(o, GEMMA_QUOTE);
        sbuf_add(o, s, n);
        sbuf_adds(o, GEMMA_QUOTE);
        return 1;
    }
    case JSON_INTEGER: sbuf_printf(o, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); return 1;
    case JSON_REAL: real_text(o, json_real_value(v)); return 1;
    case JSON_TRUE: sbuf_adds(o, "true"); return 1;
    case JSON_FALSE: sbuf_adds(o, "false"); return 1;
    case JSON_NULL: sbuf_adds(o, "null"); return 1;
    }
    return 0;
}

/* ==== types ====================================================================================================== */

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_NUM = 32, T_INT = 64 };

static const struct {
    const char *name;
    unsigned bit;
} TYPES[] = {{"object", T_OBJ},  {"array", T_ARR},    {"string", T_STR}, {"number", T_NUM},
             {"integer", T_INT}, {"boolean", T_BOOL}, {"null", T_NULL}};

static TERN_MUST_CHECK tern_err *type_bit(const json_t *t, const char *path, unsigned *bit) {
    if (json_is_string(t))
        for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++)
            if (!strcmp(json_string_value(t), TYPES[i].name)) {
                *bit = TYPES[i].bit;
                return NULL;
            }
    if (json_is_string(t))
        return tern_errf(TERN_EINVAL, "%s.type: unknown type '%s'", path, json_string_value(t));
    return tern_errf(TERN_EINVAL, "%s.type: must be a type name or a list of them", path);
}

/* The "type" keyword as a mask (0: absent). */
static TERN_MUST_CHECK tern_err *schema_types(const json_t *s, const char *path, unsigned *mask) {
    const json_t *t = json_object_get(s, "type");
    *mask = 0;
    if (!t)
        return NULL;
    if (json_is_array(t)) {
        if (!json_array_size(t))
            return tern_errf(TERN_EINVAL, "%s.type: an empty list of types", path);
        for (size_t i = 0; i < json_array_size(t); i++) {
            unsigned b;
            TERN_TRY(type_bit(json_array_get(t, i), path, &b));
            *mask |= b;
        }
        return NULL;
    }
    unsigned b;
    TERN_TRY(type_bit(t, path, &b));
    *mask = b;
    return NULL;
}

static int value_fits(const json_t *v, unsigned types) {
    if (!types)
        return 1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return !!(types & T_OBJ);
    case JSON_ARRAY: return !!(types & T_ARR);
    case JSON_STRING: return !!(types & T_STR);
    case JSON_INTEGER: return !!(types & (T_NUM | T_INT));
    case JSON_REAL: {
        double d = json_real_value(v);
        return !!(types & T_NUM) || ((types & T_INT) && d == floor(d));
    }
    case JSON_TRUE:
    case JSON_FALSE: return !!(types & T_BOOL);
    case JSON_NULL: return !!(types & T_NULL);
    }
    return 0;
}

/* A non-negative integer keyword (absent: dflt). */
static TERN_MUST_CHECK tern_err *get_count(const json_t *s, const char *key, const char *path, uint64_t dflt, uint64_t *out) {
    const json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v)
        return NULL;
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (d < 0 || d != floor(d))
        return tern_errf(TERN_EINVAL, "%s.%s: must be a non-negative integer", path, key);
    if (d > MAX_COUNT)
        return tern_errf(TERN_EINVAL, "%s.%s: %.0f is beyond the supported %d", path, key, d, MAX_COUNT);
    *out = (uint64_t)d;
    return NULL;
}

/* ==== keywords =================================================================================================== */

/* Annotations and definition containers: never constraints. */
static const char *const IGNORED[] = {"description", "title", "default", "examples", "$schema", "$id", "$comment",
                                      "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};
static const char *const SUPPORTED[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "format", "pattern", NULL};
static const char *const COMPOSITE[] = {"$ref", "allOf", "anyOf", "oneOf", NULL};

static int in_list(const char *const *list, const char *k) {
    for (; *list; list++)
        if (!strcmp(*list, k))
            return 1;
    return 0;
}

/* Strict mode: every keyword supported, nothing constraining beside $ref / allOf / anyOf / oneOf. */
static TERN_MUST_CHECK tern_err *check_keywords(conv *c, const json_t *s, const char *path) {
    if (!c->strict)
        return NULL;
    const char *comp = NULL;
    for (const char *const *k = COMPOSITE; *k && !comp; k++)
        if (json_object_get(s, *k))
            comp = *k;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(IGNORED, k))
            continue;
        if (!in_list(SUPPORTED, k))
            return tern_errf(TERN_EINVAL, "%s: keyword '%s' is not supported", path, k);
        if (comp && strcmp(k, comp))
            return tern_errf(TERN_EINVAL, "%s: keyword '%s' beside '%s' is not supported", path, k, comp);
    }
    return NULL;
}

/* ==== the walk =================================================================================================== */

static TERN_MUST_CHECK tern_err *gen_body(conv *c, const json_t *s, const char *path, const char *hint, int depth, int top, sbuf *out);

/* The rule (or primitive) for subschema s: its name. */
static TERN_MUST_CHECK tern_err *gen_rule(conv *c, const json_t *s, const char *path, const char *hint, int depth, const char **name) {
    sbuf b = {0};
    tern_err *err = gen_body(c, s, path, hint, depth, 0, &b);
    if (!err && b.oom)
        err = oom();
    if (!err && !b.len)
        err = tern_errf(TERN_EINTERNAL, "%s: empty grammar", path);
    if (!err) {
        rule *r = is_name(b.p) ? find_rule(c, b.p) : NULL;
        if (r)
            *name = r->name;
        else
            err = add_rule(c, hint, b.p, name);
    }
    sbuf_free(&b);
    return err;
}

/* ---- $ref ---- */

static TERN_MUST_CHECK tern_err *resolve(conv *c, const char *ref, const char *path, const json_t **target, char **tpath, char **hint) {
    if (ref[0] != '#')
        return tern_errf(TERN_EINVAL, "%s.$ref: '%s' is not a local reference ('#/...')", path, ref);
    const json_t *cur = c->root;
    sbuf p = {0}, last = {0};
    tern_err *err = NULL;
    sbuf_adds(&p, "schema");
    sbuf_adds(&last, "root");
    const char *q = ref + 1;
    if (*q && *q != '/')
        err = tern_errf(TERN_EINVAL, "%s.$ref: '%s' is not a JSON pointer (anchors are not supported)", path, ref);
    while (!err && *q == '/') {
        q++;
        sbuf tok = {0};
        for (; *q && *q != '/'; q++) {
            if (*q == '~' && (q[1] == '0' || q[1] == '1')) {
                sbuf_adds(&tok, q[1] == '0' ? "~" : "/");
                q++;
            } else
                sbuf_add(&tok, q, 1);
        }
        const char *t = tok.p ? tok.p : "";
        if (json_is_object(cur))
            cur = json_object_get(cur, t);
        else if (json_is_array(cur)) {
            char *end;
            unsigned long i = strtoul(t, &end, 10);
            cur = *t && !*end ? json_array_get(cur, i) : NULL;
        } else
            cur = NULL;
        if (!cur)
            err = tern_errf(TERN_EINVAL, "%s.$ref: '%s' does not resolve", path, ref);
        sbuf_printf(&p, ".%s", t);
        sbuf_clear(&last);
        sbuf_adds(&last, t);
        if (tok.oom)
            err = err ? err : oom();
        sbuf_free(&tok);
    }
    if (!err && (p.oom || last.oom))
        err = oom();
    if (err) {
        sbuf_free(&p), sbuf_free(&last);
        return err;
    }
    *target = cur;
    *tpath = p.p;
    *hint = last.p;
    return NULL;
}

static TERN_MUST_CHECK tern_err *push_chain(conv *c, size_t ref) {
    if (c->n_chain == c->cap_chain) {
        size_t cap = c->cap_chain ? 2 * c->cap_chain : 16;
        size_t *v = realloc(c->chain, cap * sizeof *v);
        if (!v)
            return oom();
        c->chain = v, c->cap_chain = cap;
    }
    c->chain[c->n_chain++] = ref;
    return NULL;
}

static TERN_MUST_CHECK tern_err *add_ref(conv *c, const char *ptr, const char *name, size_t *idx) {
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? 2 * c->cap_refs : 16;
        ref_ent *v = realloc(c->refs, cap * sizeof *v);
        if (!v)
            return oom();
        c->refs = v, c->cap_refs = cap;
    }
    if (!(c->refs[c->n_refs].ptr = strdup(ptr)))
        return oom();
    c->refs[c->n_refs].name = name;
    *idx = c->n_refs++;
    return NULL;
}

static TERN_MUST_CHECK tern_err *gen_ref(conv *c, const json_t *s, const char *path, int depth, sbuf *out) {
    const json_t *r = json_object_get(s, "$ref");
    if (!json_is_string(r))
        return tern_errf(TERN_EINVAL, "%s.$ref: must be a string", path);
    const char *ref = json_string_value(r);
    for (size_t i = 0; i < c->n_refs; i++) {
        if (strcmp(c->refs[i].ptr, ref))
            continue;
        for (size_t j = c->chain_base; j < c->n_chain; j++)
            if (c->chain[j] == i)
                return tern_errf(TERN_EINVAL, "%s.$ref: '%s' comes back to itself before any text is written", path,
                                 ref);
        seq_push(out, c->refs[i].name);
        return NULL;
    }
    const json_t *target;
    char *tpath, *hint;
    TERN_TRY(resolve(c, ref, path, &target, &tpath, &hint));
    const char *name;
    size_t idx;
    sbuf b = {0};
    tern_err *err = add_rule(c, hint, NULL, &name);
    if (!err)
        err = add_ref(c, ref, name, &idx);
    if (!err)
        err = push_chain(c, idx);
    if (!err) {
        err = gen_body(c, target, tpath, name, depth + 1, 0, &b);
        c->n_chain--;
    }
    if (!err)
        err = set_body(c, name, &b);
    if (!err)
        seq_push(out, name);
    sbuf_free(&b);
    free(tpath), free(hint);
    return err;
}

/* ---- strings ---- */

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
    if (c->gemma) {
        tern_cpset_remove(&s, 0, 0);
        tern_cpset_remove(&s, '<', '<');
        if (s.n)
            class_of(o, &s);
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
            class_of(&t, &a);
            alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
        }
        o->oom |= a.oom;
        tern_cpset_free(&a);
        static const struct {
            uint32_t cp;
            char esc;
        } short_esc[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {8, 'b'}, {12, 'f'}, {10, 'n'}, {13, 'r'}, {9, 't'}};
        char letters[16];
        size_t nl = 0;
        for (size_t i = 0; i < sizeof short_esc / sizeof *short_esc; i++)
            if (tern_cpset_has(&s, short_esc[i].cp))
                letters[nl++] = short_esc[i].esc;
        if (nl) {
            sbuf t = {0};
            sbuf_adds(&t, "\"\\\\\" ");
            if (nl == 1)
                tern_gbnf_literal(&t, letters, 1);
            else {
                sbuf_adds(&t, "[");
                for (size_t i = 0; i < nl; i++)
                    class_char(&t, (unsigned char)letters[i]);
                sbuf_adds(&t, "]");
            }
            alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
        }
        int ctl = 0;
        for (uint32_t cp = 0; cp < 0x20; cp++)
            ctl += tern_cpset_has(&s, cp);
        if (ctl == 0x20) {
            const char *hex;
            if ((x->err = prim(c, P_HEX, &hex))) {
                tern_cpset_free(&s);
                return -1;
            }
            sbuf t = {0};
            sbuf_printf(&t, "\"\\\\u00\" [01] %s", hex);
            alt_push(o, t.p);
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
                alt_push(o, t.p);
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
    if (x->c->gemma) {
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
        if (is_alnum(e) || e == '_')
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
        if (x->c->gemma && cp == '<')
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
        seq_push(out, t.p);
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
                    rep_push(out, e.p, min, max);
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
            alt_push(&alts, seq.p);
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
            atom_push(out, alts.p, "?");
        else
            sbuf_adds(out, alts.p);
    }
    out->oom |= alts.oom;
    sbuf_free(&alts);
    *nullable = nul_any;
    return rc;
}

/* The content of a string matching the pattern (between the quotes), appended to out. */
static TERN_MUST_CHECK tern_err *gen_pattern(conv *c, const char *pat, const char *path, sbuf *out) {
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
    tern_err *err = c->gemma || (a0 && a1) ? NULL : prim(c, P_CHAR, &any);
    if (err) {
        sbuf_free(&body);
        return err;
    }
    if (!a0)
        atom_push(out, any, "*");
    seq_push(out, body.p);
    if (!a1)
        atom_push(out, any, "*");
    out->oom |= body.oom;
    sbuf_free(&body);
    return NULL;
}

static TERN_MUST_CHECK tern_err *gen_string(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out) {
    uint64_t min, max;
    TERN_TRY(get_count(s, "minLength", path, 0, &min));
    TERN_TRY(get_count(s, "maxLength", path, UNBOUNDED, &max));
    if (max != UNBOUNDED && min > max)
        return tern_errf(TERN_EINVAL, "%s: minLength %llu exceeds maxLength %llu", path, (unsigned long long)min,
                         (unsigned long long)max);
    const json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    if (pat && !json_is_string(pat))
        return tern_errf(TERN_EINVAL, "%s.pattern: must be a string", path);
    if (fmt && !json_is_string(fmt))
        return tern_errf(TERN_EINVAL, "%s.format: must be a string", path);
    int lengths = min > 0 || max != UNBOUNDED;
    enum prim fp = P_COUNT;
    if (fmt) {
        static const struct {
            const char *name;
            enum prim p;
        } formats[] = {
            {"date", P_DATE}, {"time", P_TIME}, {"date-time", P_DATETIME}, {"uuid", P_UUID}, {"email", P_EMAIL}};
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (!strcmp(json_string_value(fmt), formats[i].name))
                fp = formats[i].p;
        if (fp == P_COUNT) {
            if (c->strict)
                return tern_errf(TERN_EINVAL, "%s: format '%s' is not supported", path, json_string_value(fmt));
            char *w = strf("format '%s' is not enforced", json_string_value(fmt));
            if (!w)
                return oom();
            note(c, path, w);
            free(w);
            fmt = NULL;
        }
    }
    if (c->strict && ((pat && (fmt || lengths)) || (fmt && lengths)))
        return tern_errf(TERN_EINVAL, "%s: '%s' together with '%s' is not supported", path, pat ? "pattern" : "format",
                         pat && fmt ? "format"
                         : min > 0  ? "minLength"
                                    : "maxLength");
    if (!pat && !fmt && !lengths)
        return prim_push(c, P_STRING, out);
    sbuf b = {0};
    tern_err *err = NULL;
    const char *q = c->gemma ? GEMMA_QUOTE : "\"";
    seq_lit(&b, q, strlen(q));
    if (pat) {
        err = gen_pattern(c, json_string_value(pat), path, &b);
        if (!err && (fmt || lengths))
            note(c, path, "only the pattern is enforced (not format or length)");
    } else if (fmt) {
        err = prim_push(c, fp, &b);
        if (!err && lengths)
            note(c, path, "only the format is enforced (not the length)");
    } else {
        const char *ch = "[^<\\x00]";
        if (!c->gemma)
            err = prim(c, P_CHAR, &ch);
        if (!err)
            rep_push(&b, ch, min, max);
    }
    seq_lit(&b, q, strlen(q));
    if (!err)
        sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    sbuf_free(&b);
    return err;
}

/* ---- numbers ---- */

static int ndig(uint64_t v) {
    int n = 1;
    for (; v >= 10; v /= 10)
        n++;
    return n;
}

static uint64_t p10(int n) {
    uint64_t r = 1;
    while (n-- > 0)
        r *= 10;
    return r;
}

/* The n-digit strings x..y (x <= y; leading zeros allowed, they follow a prefix). */
static void drange(sbuf *o, const char *x, const char *y, int n) {
    int k = 0;
    while (k < n && x[k] == y[k])
        k++;
    if (k == n) {
        tern_gbnf_literal(o, x, (size_t)n);
        return;
    }
    if (k) {
        sbuf t = {0};
        drange(&t, x + k, y + k, n - k);
        tern_gbnf_literal(o, x, (size_t)k);
        seq_push(o, t.p);
        o->oom |= t.oom;
        sbuf_free(&t);
        return;
    }
    int rest = n - 1, xz = 1, y9 = 1;
    for (int i = 1; i < n; i++)
        xz &= x[i] == '0', y9 &= y[i] == '9';
    char lo = x[0], hi = y[0], nines[INT_DIGITS + 1], zeros[INT_DIGITS + 1];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    if (!xz) {
        sbuf a = {0}, t = {0};
        drange(&t, x + 1, nines, rest);
        tern_gbnf_literal(&a, x, 1);
        seq_push(&a, t.p);
        alt_push(o, a.p);
        o->oom |= a.oom | t.oom;
        sbuf_free(&a), sbuf_free(&t);
        lo++;
    }
    if (!y9)
        hi--;
    if (lo <= hi) {
        sbuf a = {0};
        if (lo == hi)
            tern_gbnf_literal(&a, &lo, 1);
        else
            sbuf_printf(&a, "[%c-%c]", lo, hi);
        rep_push(&a, "[0-9]", (uint64_t)rest, (uint64_t)rest);
        alt_push(o, a.p);
        o->oom |= a.oom;
        sbuf_free(&a);
    }
    if (!y9) {
        sbuf a = {0}, t = {0};
        drange(&t, zeros, y + 1, rest);
        tern_gbnf_literal(&a, y, 1);
        seq_push(&a, t.p);
        alt_push(o, a.p);
        o->oom |= a.oom | t.oom;
        sbuf_free(&a), sbuf_free(&t);
    }
}

/* Decimal numerals (no leading zeros) of a..b; has_b 0: a and up, at most INT_DIGITS digits. */
static void nonneg_range(sbuf *o, uint64_t a, int has_b, uint64_t b) {
    int la = ndig(a), lb = has_b ? ndig(b) : INT_DIGITS, run_lo = 0, run_hi = 0;
    for (int len = la; len <= lb + 1; len++) {
        int full = 0;
        uint64_t lo = 0, hi = 0;
        if (len <= lb) {
            lo = len == la ? a : p10(len - 1);
            hi = has_b && len == lb ? b : p10(len) - 1;
            full = len > 1 && lo == p10(len - 1) && hi == p10(len) - 1;
        }
        if (full) {
            if (!run_lo)
                run_lo = len;
            run_hi = len;
            continue;
        }
        if (run_lo) {
            sbuf t = {0};
            sbuf_adds(&t, "[1-9]");
            rep_push(&t, "[0-9]", (uint64_t)run_lo - 1, (uint64_t)run_hi - 1);
            alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
            run_lo = 0;
        }
        if (len > lb)
            break;
        char xs[INT_DIGITS + 2], ys[INT_DIGITS + 2];
        snprintf(xs, sizeof xs, "%0*llu", len, (unsigned long long)lo);
        snprintf(ys, sizeof ys, "%0*llu", len, (unsigned long long)hi);
        sbuf t = {0};
        drange(&t, xs, ys, len);
        alt_push(o, t.p);
        o->oom |= t.oom;
        sbuf_free(&t);
    }
}

/* Integers lo..hi (each bound optional) as an expression: negative ones as "-" and a magnitude (so never "-0"), then
 * the non-negative ones. */
static void int_range(sbuf *o, int has_lo, int64_t lo, int has_hi, int64_t hi) {
    if (!has_lo || lo < 0) {
        uint64_t mlo = has_hi && hi < 0 ? (uint64_t)(-(hi + 1)) + 1 : 1;
        uint64_t mhi = has_lo ? (uint64_t)(-(lo + 1)) + 1 : 0;
        sbuf t = {0}, a = {0};
        nonneg_range(&t, mlo, has_lo, mhi);
        sbuf_adds(&a, "\"-\"");
        seq_push(&a, t.p);
        alt_push(o, a.p);
        o->oom |= t.oom | a.oom;
        sbuf_free(&t), sbuf_free(&a);
    }
    if (!has_hi || hi >= 0) {
        sbuf t = {0};
        nonneg_range(&t, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi, has_hi ? (uint64_t)hi : 0);
        alt_push(o, t.p);
        o->oom |= t.oom;
        sbuf_free(&t);
    }
}

/* One bound on an integer from a number keyword: *has 0 when it does not constrain within int64; returns -1 if no
 * int64 satisfies it. */
static int int_bound(const json_t *v, int upper, int exclusive, int *has, int64_t *out) {
    *has = 1;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (exclusive && i == (upper ? INT64_MIN : INT64_MAX))
            return -1;
        *out = exclusive ? (upper ? i - 1 : i + 1) : i;
        return 0;
    }
    double d = json_number_value(v);
    d = upper ? (exclusive ? ceil(d) - 1 : floor(d)) : (exclusive ? floor(d) + 1 : ceil(d));
    if (d >= 9.2e18 || d <= -9.2e18) {
        *has = 0;
        return (d >= 9.2e18) != upper ? -1 : 0;
    }
    *out = (int64_t)d;
    return 0;
}

static TERN_MUST_CHECK tern_err *gen_integer(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out) {
    int has_lo = 0, has_hi = 0;
    int64_t lo = 0, hi = 0;
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(s, keys[k]);
        int upper = k >= 2, excl = k & 1;
        if (!v)
            continue;
        if (json_is_boolean(v) && excl)
            continue; /* draft 4: applies to minimum / maximum below */
        if (!json_is_number(v))
            return tern_errf(TERN_EINVAL, "%s.%s: must be a number", path, keys[k]);
        if (!excl && json_is_true(json_object_get(s, keys[k + 1])))
            excl = 1;
        int has;
        int64_t b;
        if (int_bound(v, upper, excl, &has, &b))
            return tern_errf(TERN_EINVAL, "%s.%s: no integer in the supported range satisfies it", path, keys[k]);
        if (!has)
            continue;
        if (upper) {
            if (!has_hi || b < hi)
                hi = b;
            has_hi = 1;
        } else {
            if (!has_lo || b > lo)
                lo = b;
            has_lo = 1;
        }
    }
    if (has_lo && has_hi && lo > hi)
        return tern_errf(TERN_EINVAL, "%s: no integer lies between the minimum %lld and the maximum %lld", path,
                         (long long)lo, (long long)hi);
    if (!has_lo && !has_hi)
        return prim_push(c, P_INTEGER, out);
    sbuf b = {0};
    int_range(&b, has_lo, lo, has_hi, hi);
    tern_err *err = NULL;
    sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    sbuf_free(&b);
    return err;
}

static TERN_MUST_CHECK tern_err *gen_number(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out) {
    const json_t *mn = json_object_get(s, "minimum"), *xmn = json_object_get(s, "exclusiveMinimum");
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    int any = 0;
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(s, keys[k]);
        if (v && !json_is_number(v) && !((k & 1) && json_is_boolean(v)))
            return tern_errf(TERN_EINVAL, "%s.%s: must be a number", path, keys[k]);
        any |= v && json_is_number(v);
    }
    if (!any)
        return prim_push(c, P_NUMBER, out);
    /* Only the sign is enforced: a lower bound of 0 or more rules out '-'. */
    int nonneg = (mn && json_is_number(mn) && json_number_value(mn) >= 0) ||
                 (xmn && json_is_number(xmn) && json_number_value(xmn) >= 0);
    note(c, path, nonneg ? "number bounds are enforced only as no minus sign" : "number bounds are not enforced");
    if (!nonneg)
        return prim_push(c, P_NUMBER, out);
    sbuf b = {0};
    sbuf_printf(&b, "( \"0\" | [1-9] [0-9]{0,%d} ) ( \".\" [0-9]{1,%d} )? ( [eE] [-+]? [0-9]{1,%d} )?", INT_DIGITS - 1,
                FRAC_DIGITS, EXP_DIGITS);
    tern_err *err = NULL;
    sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    sbuf_free(&b);
    return err;
}

/* ---- objects ---- */

/* Keys other than the given words (sorted, distinct, each in the key alphabet): a trie walked into alternatives.
 * JSON keys are string contents (characters written in one canonical escaping where a word's character is
 * concerned); Gemma keys are [A-Za-z0-9_]+. */
static TERN_MUST_CHECK tern_err *not_words(conv *c, const char **w, size_t k, size_t pos, int allow_empty, sbuf *o) {
    const char *any;
    if (c->gemma)
        any = "[A-Za-z0-9_]";
    else
        TERN_TRY(prim(c, P_CHAR, &any));
    int is_word_end = k && strlen(w[0]) == pos;
    size_t i = is_word_end;
    sbuf alts = {0};
    tern_cpset edges = {0};
    tern_err *err = NULL;
    while (i < k && !err) {
        uint32_t cp = 0;
        int len = tern_utf8_decode((const unsigned char *)w[i] + pos, strlen(w[i]) - pos, &cp);
        size_t j = i;
        while (j < k && !memcmp(w[j] + pos, w[i] + pos, (size_t)len))
            j++;
        sbuf a = {0}, t = {0};
        if (c->gemma)
            tern_gbnf_literal(&a, w[i] + pos, (size_t)len);
        else
            json_str(&t, w[i] + pos, (size_t)len), tern_gbnf_literal(&a, t.p + 1, t.len - 2);
        if (j - i == 1 && strlen(w[i]) == pos + (size_t)len) {
            atom_push(&a, any, "+");
        } else {
            sbuf sub = {0};
            err = not_words(c, w + i, j - i, pos + (size_t)len, 1, &sub);
            seq_push(&a, sub.p);
            a.oom |= sub.oom;
            sbuf_free(&sub);
        }
        alt_push(&alts, a.p);
        alts.oom |= a.oom | t.oom;
        sbuf_free(&a), sbuf_free(&t);
        tern_cpset_add(&edges, cp, cp);
        i = j;
    }
    tern_cpset_norm(&edges);
    /* Any other first character, then anything. */
    sbuf other = {0};
    if (c->gemma) {
        tern_cpset s = {0};
        tern_cpset_add(&s, '0', '9'), tern_cpset_add(&s, 'A', 'Z'), tern_cpset_add(&s, 'a', 'z'), tern_cpset_add(&s, '_', '_');
        tern_cpset_norm(&s);
        for (size_t r = 0; r < edges.n; r++)
            tern_cpset_remove(&s, edges.r[r].lo, edges.r[r].hi);
        if (s.n)
            class_of(&other, &s);
        other.oom |= s.oom;
        tern_cpset_free(&s);
    } else {
        tern_cpset s = {0};
        tern_cpset_add(&s, 0, 0x1f), tern_cpset_add(&s, '"', '"'), tern_cpset_add(&s, '\\', '\\');
        for (size_t r = 0; r < edges.n; r++)
            tern_cpset_add(&s, edges.r[r].lo, edges.r[r].hi);
        tern_cpset_norm(&s);
        class_ranges(&other, &s, 1);
        other.oom |= s.oom;
        tern_cpset_free(&s);
        static const struct {
            uint32_t cp;
            char esc;
        } short_esc[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {8, 'b'}, {12, 'f'}, {10, 'n'}, {13, 'r'}, {9, 't'}};
        char letters[16];
        size_t nl = 0;
        int ctl_edge = 0;
        for (size_t e = 0; e < sizeof short_esc / sizeof *short_esc; e++)
            if (!tern_cpset_has(&edges, short_esc[e].cp))
                letters[nl++] = short_esc[e].esc;
        for (uint32_t cp = 0; cp < 0x20; cp++)
            ctl_edge |= tern_cpset_has(&edges, cp);
        sbuf t = {0};
        sbuf_adds(&t, "\"\\\\\" [");
        for (size_t e = 0; e < nl; e++)
            class_char(&t, (unsigned char)letters[e]);
        sbuf_adds(&t, "]");
        alt_push(&other, t.p);
        other.oom |= t.oom;
        sbuf_free(&t);
        if (!ctl_edge) {
            const char *hex;
            err = err ? err : prim(c, P_HEX, &hex);
            if (!err)
                sbuf_printf(&other, " | \"\\\\u00\" [01] %s", hex);
        }
    }
    if (other.len) {
        sbuf a = {0};
        seq_push(&a, other.p);
        atom_push(&a, any, "*");
        alt_push(&alts, a.p);
        alts.oom |= a.oom;
        sbuf_free(&a);
    }
    alts.oom |= other.oom | edges.oom;
    sbuf_free(&other);
    tern_cpset_free(&edges);
    if (!err && alts.len)
        atom_push(o, alts.p, allow_empty && !is_word_end ? "?" : "");
    if (!err && alts.oom)
        err = oom();
    sbuf_free(&alts);
    return err;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

typedef struct member {
    const char *kv; /* rule name */
    int required;
} member;

/* Members from index j on, each after a separator, then the additional ones. */
static void members_tail(conv *c, const member *m, size_t n, size_t j, const char *sepx, const char *extra, sbuf *o) {
    for (; j < n; j++) {
        sbuf t = {0};
        sbuf_printf(&t, "%s %s", sepx, m[j].kv);
        if (m[j].required)
            seq_push(o, t.p);
        else
            atom_push(o, t.p, "?");
        o->oom |= t.oom;
        sbuf_free(&t);
    }
    if (extra) {
        sbuf t = {0};
        sbuf_printf(&t, "%s %s", sepx, extra);
        atom_push(o, t.p, "*");
        o->oom |= t.oom;
        sbuf_free(&t);
    }
}

/* A member's rule, `hint-kv`: KEY ws ":" ws VALUE ws (JSON) or KEY ":" VALUE (Gemma). */
static TERN_MUST_CHECK tern_err *member_rule(conv *c, const char *key, const json_t *vs, const char *path, const char *vpath,
                             const char *vhint, int depth, const char *ws, const char **kv) {
    const char *vname;
    TERN_TRY(gen_rule(c, vs, vpath, vhint, depth, &vname));
    size_t kn = strlen(key);
    sbuf b = {0}, t = {0};
    tern_err *err = NULL;
    if (!c->gemma) {
        json_str(&t, key, kn);
        tern_gbnf_literal(&b, t.p, t.len);
        sbuf_printf(&b, " %s \":\" %s %s %s", ws, ws, vname, ws);
    } else if (gemma_bare_key(key, kn)) {
        tern_gbnf_literal(&b, key, kn);
        sbuf_printf(&b, " \":\" %s", vname);
    } else if (has_gemma_quote(key, kn)) {
        err = tern_errf(TERN_EINVAL, "%s: the property name '%s' cannot be written in Gemma's syntax", path, key);
    } else {
        sbuf_printf(&t, "%s%s%s", GEMMA_QUOTE, key, GEMMA_QUOTE);
        tern_gbnf_literal(&b, t.p, t.len);
        sbuf_printf(&b, " \":\" %s", vname);
    }
    b.oom |= t.oom;
    char *h = strf("%s-kv", vhint);
    if (!err)
        err = h ? add_rule_buf(c, h, &b, kv) : oom();
    free(h);
    sbuf_free(&b), sbuf_free(&t);
    return err;
}

/* The rule for an additional property: a key that is none of words[0, n) (sorted, any order in), value `ap`. */
static TERN_MUST_CHECK tern_err *extra_rule(conv *c, const char **words, size_t n, const json_t *ap, const char *path, const char *hint,
                            int depth, const char *ws, const char **kv) {
    qsort(words, n, sizeof *words, cmp_str);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept && !strcmp(words[kept - 1], words[i]))
            continue;
        int ok = 1; /* Gemma's extra keys are [A-Za-z0-9_]+: other names cannot come up */
        for (const char *p = words[i]; c->gemma && *p; p++)
            ok &= is_alnum((unsigned char)*p) || *p == '_';
        if (ok)
            words[kept++] = words[i];
    }
    sbuf key = {0}, b = {0};
    tern_err *err = NULL;
    if (c->gemma) {
        err = not_words(c, words, kept, 0, 0, &key);
    } else if (!kept) {
        err = prim_push(c, P_STRING, &key);
    } else {
        sbuf_adds(&key, "\"\\\"\"");
        err = not_words(c, words, kept, 0, 1, &key);
        seq_push(&key, "\"\\\"\"");
    }
    const char *vname = NULL;
    char *vpath = strf("%s.additionalProperties", path), *vhint = strf("%s-additional", hint);
    char *kh = vhint ? strf("%s-kv", vhint) : NULL;
    if (!err && (!vpath || !vhint || !kh))
        err = oom();
    if (!err)
        err = json_is_object(ap) ? gen_rule(c, ap, vpath, vhint, depth, &vname) : prim(c, P_VALUE, &vname);
    if (!err) {
        if (c->gemma)
            sbuf_printf(&b, "%s \":\" %s", key.p, vname);
        else
            sbuf_printf(&b, "%s %s \":\" %s %s %s", key.p, ws, ws, vname, ws);
        b.oom |= key.oom;
        err = add_rule_buf(c, kh, &b, kv);
    }
    free(vpath), free(vhint), free(kh);
    sbuf_free(&key), sbuf_free(&b);
    return err;
}

/* The object's body from its members: the first present member has no separator, so the rule branches on which
 * member comes first; tail rules (hint-tail-J) hold what may follow. */
static TERN_MUST_CHECK tern_err *object_rule(conv *c, const member *m, size_t n, const char *extra, const char *hint, const char *ws,
                             sbuf *out) {
    char sepx[64];
    snprintf(sepx, sizeof sepx, ws ? "\",\" %s" : "\",\"", ws);
    size_t n_alt = 0;
    while (n_alt < n && !m[n_alt].required)
        n_alt++;
    int all_optional = n_alt == n;
    if (!all_optional)
        n_alt++; /* the first required member closes the choice */
    const char **tails = calloc(n_alt + 1, sizeof *tails);
    tern_err *err = tails ? NULL : oom();
    /* tails[j], 1 <= j < n_alt: the members from j on, after the first present one. */
    for (size_t j = n_alt ? n_alt - 1 : 0; !err && j >= 1; j--) {
        sbuf t = {0};
        if (j + 1 < n_alt) {
            sbuf one = {0};
            sbuf_printf(&one, "%s %s", sepx, m[j].kv);
            if (m[j].required)
                seq_push(&t, one.p);
            else
                atom_push(&t, one.p, "?");
            seq_push(&t, tails[j + 1]);
            t.oom |= one.oom;
            sbuf_free(&one);
        } else
            members_tail(c, m, n, j, sepx, extra, &t);
        char *th = strf("%s-tail-%zu", hint, j);
        err = th ? add_rule_buf(c, th, &t, &tails[j]) : oom();
        free(th);
        sbuf_free(&t);
    }
    sbuf alts = {0}, b = {0};
    for (size_t i = 0; !err && i < n_alt; i++) {
        sbuf a = {0};
        seq_push(&a, m[i].kv);
        if (i + 1 < n_alt)
            seq_push(&a, tails[i + 1]);
        else
            members_tail(c, m, n, i + 1, sepx, extra, &a);
        alt_push(&alts, a.p);
        alts.oom |= a.oom;
        sbuf_free(&a);
    }
    if (!err && all_optional && extra) {
        sbuf a = {0};
        seq_push(&a, extra);
        members_tail(c, m, 0, 0, sepx, extra, &a);
        alt_push(&alts, a.p);
        alts.oom |= a.oom;
        sbuf_free(&a);
    }
    if (!err) {
        sbuf_adds(&b, "\"{\"");
        seq_push(&b, ws);
        if (alts.len)
            atom_push(&b, alts.p, all_optional ? "?" : "");
        seq_push(&b, "\"}\"");
        b.oom |= alts.oom;
        sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    }
    sbuf_free(&alts), sbuf_free(&b);
    free(tails);
    return err;
}

static TERN_MUST_CHECK tern_err *gen_object(conv *c, const json_t *s, const char *path, const char *hint, int depth, sbuf *out) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *ap = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return tern_errf(TERN_EINVAL, "%s.properties: must be an object", path);
    if (req && !json_is_array(req))
        return tern_errf(TERN_EINVAL, "%s.required: must be a list of property names", path);
    for (size_t i = 0; req && i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i)))
            return tern_errf(TERN_EINVAL, "%s.required[%zu]: must be a string", path, i);
    if (ap && !json_is_boolean(ap) && !json_is_object(ap))
        return tern_errf(TERN_EINVAL, "%s.additionalProperties: must be a boolean or a schema", path);
    size_t n_props = props ? json_object_size(props) : 0, n_req = req ? json_array_size(req) : 0;
    if (c->strict && n_props && !json_is_false(ap))
        return tern_errf(TERN_EINVAL, "%s: additionalProperties must be false in strict mode", path);
    if (!n_props && !n_req && (!ap || json_is_true(ap)))
        return prim_push(c, P_OBJECT, out);

    const char *ws = NULL;
    if (!c->gemma)
        TERN_TRY(prim(c, P_WS, &ws));
    size_t cap = n_props + n_req + 1;
    member *m = calloc(cap, sizeof *m);
    const char **words = calloc(cap, sizeof *words);
    tern_err *err = m && words ? NULL : oom();
    size_t n = 0, n_words = 0;
    const char *extra = NULL;
    /* Everything inside comes after "{": a reference in progress may be reached again from here. */
    size_t saved_base = c->chain_base;
    c->chain_base = c->n_chain;
    const char *k;
    const json_t *v;
    if (!err && props) {
        json_object_foreach((json_t *)props, k, v) {
            int is_req = 0;
            for (size_t i = 0; i < n_req; i++)
                is_req |= !strcmp(json_string_value(json_array_get(req, i)), k);
            /* The grammar that keeps extra keys apart from the listed ones nests a group per character. */
            if (strlen(k) > 256) {
                err = tern_errf(TERN_EINVAL, "%s.properties: a property name of %zu bytes (at most 256)", path,
                                strlen(k));
                break;
            }
            words[n_words++] = k;
            if (json_is_false(v)) { /* must not appear */
                if (is_req)
                    err = tern_errf(TERN_EINVAL, "%s.properties.%s: required, but its schema is false", path, k);
                if (err)
                    break;
                continue;
            }
            char *vpath = strf("%s.properties.%s", path, k), *vhint = strf("%s-%s", hint, k);
            err = vpath && vhint ? member_rule(c, k, v, path, vpath, vhint, depth + 1, ws, &m[n].kv) : oom();
            free(vpath), free(vhint);
            if (err)
                break;
            m[n++].required = is_req;
        }
    }
    /* Required names that are not properties: additional properties that must be there. */
    for (size_t i = 0; !err && i < n_req; i++) {
        const char *r = json_string_value(json_array_get(req, i));
        int seen = props && json_object_get(props, r);
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(json_string_value(json_array_get(req, j)), r);
        if (seen)
            continue;
        if (c->strict)
            err = tern_errf(TERN_EINVAL, "%s.required: '%s' is not in properties", path, r);
        else if (json_is_false(ap))
            err = tern_errf(TERN_EINVAL, "%s.required: '%s' is not in properties and additionalProperties is false",
                            path, r);
        if (err)
            break;
        char *vpath = strf("%s.additionalProperties", path), *vhint = strf("%s-%s", hint, r);
        err = vpath && vhint ? member_rule(c, r, ap ? ap : json_true(), path, vpath, vhint, depth + 1, ws, &m[n].kv)
                             : oom();
        free(vpath), free(vhint);
        words[n_words++] = r;
        m[n++].required = 1;
    }
    if (!err && !json_is_false(ap))
        err = extra_rule(c, words, n_words, ap, path, hint, depth + 1, ws, &extra);
    c->chain_base = saved_base;
    if (!err)
        err = object_rule(c, m, n, extra, hint, ws, out);
    free(m);
    free(words);
    return err;
}

/* ---- arrays ---- */

static TERN_MUST_CHECK tern_err *gen_array(conv *c, const json_t *s, const char *path, const char *hint, int depth, sbuf *out) {
    const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems"), *extra;
    const char *prefix_key = "prefixItems", *extra_key = "items";
    uint64_t min, max;
    TERN_TRY(get_count(s, "minItems", path, 0, &min));
    TERN_TRY(get_count(s, "maxItems", path, UNBOUNDED, &max));
    if (max != UNBOUNDED && min > max)
        return tern_errf(TERN_EINVAL, "%s: minItems %llu exceeds maxItems %llu", path, (unsigned long long)min,
                         (unsigned long long)max);
    if (prefix && !json_is_array(prefix))
        return tern_errf(TERN_EINVAL, "%s.prefixItems: must be a list of schemas", path);
    if (items && !json_is_object(items) && !json_is_boolean(items) && !(json_is_array(items) && !prefix))
        return tern_errf(TERN_EINVAL, "%s.items: must be a schema", path);
    if (json_is_array(items)) { /* draft 2019 and before: items as a tuple, additionalItems after it */
        prefix = items, prefix_key = "items";
        extra = json_object_get(s, "additionalItems"), extra_key = "additionalItems";
    } else
        extra = items;
    if (extra && !json_is_object(extra) && !json_is_boolean(extra))
        return tern_errf(TERN_EINVAL, "%s.%s: must be a schema", path, extra_key);
    size_t np = prefix ? json_array_size(prefix) : 0;
    if (np && !extra && c->strict)
        return tern_errf(TERN_EINVAL, "%s: %s needs '%s' (false, or a schema for the items after them) in strict mode",
                         path, prefix_key, extra_key);
    int has_extra = !json_is_false(extra);
    uint64_t total_max = has_extra ? max : (max < np ? max : np);
    if (min > total_max)
        return tern_errf(TERN_EINVAL, "%s: minItems %llu is more than the %llu items allowed", path,
                         (unsigned long long)min, (unsigned long long)total_max);
    const char *ws = NULL;
    if (!c->gemma)
        TERN_TRY(prim(c, P_WS, &ws));
    /* Everything inside comes after "[". */
    size_t saved_base = c->chain_base;
    c->chain_base = c->n_chain;
    const char **pe = calloc(np + 1, sizeof *pe), *xe = NULL;
    tern_err *err = pe ? NULL : oom();
    for (size_t i = 0; !err && i < np && i < total_max; i++) {
        char *p = strf("%s.%s[%zu]", path, prefix_key, i), *h = strf("%s-%zu", hint, i);
        err = p && h ? gen_rule(c, json_array_get(prefix, i), p, h, depth + 1, &pe[i]) : oom();
        free(p), free(h);
    }
    if (!err && has_extra && total_max > np) {
        char *p = strf("%s.%s", path, extra_key), *h = strf("%s-item", hint);
        if (!p || !h)
            err = oom();
        else if (!extra || json_is_true(extra))
            err = prim(c, P_VALUE, &xe);
        else
            err = gen_rule(c, extra, p, h, depth + 1, &xe);
        free(p), free(h);
    }
    c->chain_base = saved_base;
    sbuf b = {0}, inner = {0};
    if (!err) {
        /* One element is NAME ws (JSON) or NAME (Gemma); the ones after the first have a separator before them. */
        char sepx[64];
        snprintf(sepx, sizeof sepx, ws ? "\",\" %s" : "\",\"", ws);
        if (xe) {
            uint64_t lo = min > np ? min - np : 0, hi = max == UNBOUNDED ? UNBOUNDED : max - np;
            sbuf el = {0}, next = {0};
            sbuf_adds(&el, xe);
            seq_push(&el, ws);
            sbuf_printf(&next, "%s %s", sepx, el.p);
            if (np) {
                rep_push(&inner, next.p, lo, hi);
            } else {
                sbuf all = {0};
                seq_push(&all, el.p);
                rep_push(&all, next.p, lo ? lo - 1 : 0, hi == UNBOUNDED ? UNBOUNDED : hi - 1);
                atom_push(&inner, all.p, lo ? "" : "?");
                inner.oom |= all.oom;
                sbuf_free(&all);
            }
            inner.oom |= el.oom | next.oom;
            sbuf_free(&el), sbuf_free(&next);
        }
        /* From the last prefix item back: item k is optional once minItems is met, and needs the ones before. */
        for (size_t k = np < total_max ? np : (size_t)total_max; k-- > 0;) {
            sbuf part = {0};
            if (k)
                sbuf_adds(&part, sepx);
            seq_push(&part, pe[k]);
            seq_push(&part, ws);
            seq_push(&part, inner.p);
            sbuf_clear(&inner);
            atom_push(&inner, part.p, k < min ? "" : "?");
            inner.oom |= part.oom;
            sbuf_free(&part);
        }
        sbuf_adds(&b, "\"[\"");
        seq_push(&b, ws);
        seq_push(&b, inner.p);
        seq_push(&b, "\"]\"");
        b.oom |= inner.oom;
        sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    }
    sbuf_free(&b), sbuf_free(&inner);
    free(pe);
    return err;
}

/* ---- enum, const, composition ---- */

static TERN_MUST_CHECK tern_err *gen_values(conv *c, const json_t *vals, int is_const, unsigned types, const char *path, sbuf *out) {
    const char *kw = is_const ? "const" : "enum";
    size_t n = is_const ? 1 : json_array_size(vals), n_lits = 0;
    char **lits = calloc(n, sizeof *lits);
    sbuf alts = {0};
    tern_err *err = lits ? NULL : oom();
    for (size_t i = 0; !err && i < n; i++) {
        const json_t *v = is_const ? vals : json_array_get(vals, i);
        if (!value_fits(v, types))
            continue;
        sbuf t = {0}, l = {0};
        int r = render(c, &t, v, 0);
        if (r < 0)
            err = tern_errf(TERN_EINVAL, "%s.%s: a value nested deeper than %d levels", path, kw, MAX_DEPTH);
        else if (r == 0)
            note(c, path, "a string holding <|\"|> cannot be written in Gemma's syntax: that value is left out");
        else {
            tern_gbnf_literal(&l, t.p, t.len);
            int dup = l.oom;
            for (size_t j = 0; j < n_lits && !dup; j++)
                dup = !strcmp(lits[j], l.p);
            if (!dup) {
                alt_push(&alts, l.p);
                lits[n_lits++] = l.p; /* kept: freed below */
                l.p = NULL;
            }
        }
        alts.oom |= t.oom | l.oom;
        sbuf_free(&t), sbuf_free(&l);
    }
    if (!err && alts.oom)
        err = oom();
    if (!err && !alts.len)
        err = tern_errf(TERN_EINVAL, "%s.%s: no value fits the schema", path, kw);
    if (!err)
        sbuf_adds(out, alts.p);
    for (size_t j = 0; j < n_lits; j++)
        free(lits[j]);
    free(lits);
    sbuf_free(&alts);
    return err;
}

/* allOf with several schemas, non-strict: their keywords merged (properties and required joined, else the first
 * occurrence wins). */
static TERN_MUST_CHECK tern_err *merge_all_of(conv *c, const json_t *list, const char *path, json_t **out) {
    json_t *m = json_object(), *props = json_object(), *req = json_array();
    tern_err *err = m && props && req ? NULL : oom();
    for (size_t i = 0; !err && i < json_array_size(list); i++) {
        const json_t *s = json_array_get(list, i);
        for (int hops = 0; json_is_object(s) && json_object_get(s, "$ref") && !err; hops++) {
            const json_t *target;
            char *tp, *h;
            if (hops > MAX_DEPTH)
                err = tern_errf(TERN_EINVAL, "%s.allOf[%zu]: $ref chain too long", path, i);
            else if (!json_is_string(json_object_get(s, "$ref")))
                err = tern_errf(TERN_EINVAL, "%s.allOf[%zu].$ref: must be a string", path, i);
            else if (!(err = resolve(c, json_string_value(json_object_get(s, "$ref")), path, &target, &tp, &h))) {
                free(tp), free(h);
                s = target;
            }
        }
        if (err)
            break;
        if (json_is_true(s))
            continue;
        if (!json_is_object(s) || json_object_get(s, "allOf")) {
            err = tern_errf(TERN_EINVAL, "%s.allOf[%zu]: only schema objects without a nested allOf can be merged",
                            path, i);
            break;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)s, k, v) {
            if (!strcmp(k, "properties") && json_is_object(v))
                json_object_update_missing(props, v);
            else if (!strcmp(k, "required") && json_is_array(v))
                json_array_extend(req, v);
            else if (!json_object_get(m, k))
                json_object_set(m, k, v);
        }
    }
    if (!err && json_object_size(props))
        json_object_set(m, "properties", props);
    if (!err && json_array_size(req))
        json_object_set(m, "required", req);
    json_decref(props), json_decref(req);
    if (err) {
        json_decref(m);
        return err;
    }
    *out = m;
    return NULL;
}

static TERN_MUST_CHECK tern_err *gen_body(conv *c, const json_t *s, const char *path, const char *hint, int depth, int top, sbuf *out) {
    if (depth > MAX_DEPTH)
        return tern_errf(TERN_EINVAL, "%s: schema nested deeper than %d levels", path, MAX_DEPTH);
    if (json_is_true(s))
        return prim_push(c, top && c->gemma ? P_OBJECT : P_VALUE, out);
    if (json_is_false(s))
        return tern_errf(TERN_EINVAL, "%s: the schema false accepts no value", path);
    if (!json_is_object(s))
        return tern_errf(TERN_EINVAL, "%s: a schema must be an object or a boolean", path);
    TERN_TRY(check_keywords(c, s, path));
    const json_t *defs[2] = {json_object_get(s, "$defs"), json_object_get(s, "definitions")};
    for (int i = 0; i < 2; i++)
        if (defs[i] && !json_is_object(defs[i]))
            return tern_errf(TERN_EINVAL, "%s.%s: must be an object", path, i ? "definitions" : "$defs");

    if (json_object_get(s, "$ref"))
        return gen_ref(c, s, path, depth, out);

    const json_t *all = json_object_get(s, "allOf");
    if (all) {
        if (!json_is_array(all) || !json_array_size(all))
            return tern_errf(TERN_EINVAL, "%s.allOf: must be a non-empty list of schemas", path);
        if (json_array_size(all) == 1) {
            char *p = strf("%s.allOf[0]", path);
            if (!p)
                return oom();
            tern_err *err = gen_body(c, json_array_get(all, 0), p, hint, depth + 1, top, out);
            free(p);
            return err;
        }
        if (c->strict)
            return tern_errf(TERN_EINVAL, "%s.allOf: only one schema is supported in strict mode", path);
        json_t *merged;
        TERN_TRY(merge_all_of(c, all, path, &merged));
        note(c, path, "allOf merged into one schema");
        tern_err *err = gen_body(c, merged, path, hint, depth + 1, top, out);
        json_decref(merged);
        return err;
    }

    const char *compk = json_object_get(s, "anyOf") ? "anyOf" : json_object_get(s, "oneOf") ? "oneOf" : NULL;
    if (compk) {
        const json_t *list = json_object_get(s, compk);
        if (!json_is_array(list) || !json_array_size(list))
            return tern_errf(TERN_EINVAL, "%s.%s: must be a non-empty list of schemas", path, compk);
        sbuf alts = {0};
        tern_err *err = NULL;
        for (size_t i = 0; !err && i < json_array_size(list); i++) {
            char *p = strf("%s.%s[%zu]", path, compk, i), *h = strf("%s-%zu", hint, i);
            const char *name;
            err = p && h ? gen_rule(c, json_array_get(list, i), p, h, depth + 1, &name) : oom();
            if (!err)
                alt_push(&alts, name);
            free(p), free(h);
        }
        if (!err && alts.oom)
            err = oom();
        if (!err)
            sbuf_adds(out, alts.p);
        sbuf_free(&alts);
        return err;
    }

    unsigned types;
    TERN_TRY(schema_types(s, path, &types));
    if (top && c->gemma) { /* the arguments of a call: an object */
        if (types && !(types & T_OBJ))
            return tern_errf(TERN_EINVAL, "%s: tool arguments in the Gemma dialect must be an object", path);
        types = T_OBJ;
    }
    if (json_object_get(s, "const"))
        return gen_values(c, json_object_get(s, "const"), 1, types, path, out);
    const json_t *en = json_object_get(s, "enum");
    if (en) {
        if (!json_is_array(en) || !json_array_size(en))
            return tern_errf(TERN_EINVAL, "%s.enum: must be a non-empty list", path);
        return gen_values(c, en, 0, types, path, out);
    }
    if (!types) {
        static const struct {
            const char *key;
            unsigned bit;
        } infer[] = {{"properties", T_OBJ},       {"additionalProperties", T_OBJ},
                     {"required", T_OBJ},         {"items", T_ARR},
                     {"prefixItems", T_ARR},      {"minItems", T_ARR},
                     {"maxItems", T_ARR},         {"additionalItems", T_ARR},
                     {"minLength", T_STR},        {"maxLength", T_STR},
                     {"pattern", T_STR},          {"format", T_STR},
                     {"minimum", T_NUM},          {"maximum", T_NUM},
                     {"exclusiveMinimum", T_NUM}, {"exclusiveMaximum", T_NUM}};
        for (size_t i = 0; i < sizeof infer / sizeof *infer; i++)
            if (json_object_get(s, infer[i].key))
                types |= infer[i].bit;
        if (!types)
            return prim_push(c, top && c->gemma ? P_OBJECT : P_VALUE, out);
    }
    if (types & T_NUM)
        types &= ~(unsigned)T_INT;
    int multi = __builtin_popcount(types) > 1;
    sbuf alts = {0};
    tern_err *err = NULL;
    for (size_t i = 0; !err && i < sizeof TYPES / sizeof *TYPES; i++) {
        unsigned t = TYPES[i].bit;
        if (!(types & t))
            continue;
        char *h = multi ? strf("%s-%s", hint, TYPES[i].name) : strdup(hint);
        sbuf one = {0};
        if (!h)
            err = oom();
        else if (t == T_OBJ)
            err = gen_object(c, s, path, h, depth, &one);
        else if (t == T_ARR)
            err = gen_array(c, s, path, h, depth, &one);
        else if (t == T_STR)
            err = gen_string(c, s, path, h, &one);
        else if (t == T_NUM)
            err = gen_number(c, s, path, h, &one);
        else if (t == T_INT)
            err = gen_integer(c, s, path, h, &one);
        else
            err = prim_push(c, t == T_BOOL ? P_BOOLEAN : P_NULL, &one);
        if (!err)
            alt_push(&alts, one.p);
        alts.oom |= one.oom;
        sbuf_free(&one);
        free(h);
    }
    if (!err && alts.oom)
        err = oom();
    if (!err)
        sbuf_adds(out, alts.p);
    sbuf_free(&alts);
    return err;
}

/* ==== output ===================================================================================================== */

static int cmp_rule_name(const void *a, const void *b) {
    const rule *x = *(const rule *const *)a, *y = *(const rule *const *)b;
    int x_root = !strcmp(x->name, "root"), y_root = !strcmp(y->name, "root");
    if (x_root != y_root)
        return y_root - x_root;
    return strcmp(x->name, y->name);
}

static TERN_MUST_CHECK tern_err *finish(conv *c, char **gbnf) {
    const rule **order = malloc((c->n_rules ? c->n_rules : 1) * sizeof *order);
    if (!order)
        return oom();
    for (size_t i = 0; i < c->n_rules; i++)
        order[i] = &c->rules[i];
    qsort(order, c->n_rules, sizeof *order, cmp_rule_name);
    sbuf o = {0};
    tern_err *err = NULL;
    sbuf_printf(&o, "# generated from a JSON Schema (%s syntax)\n", c->gemma ? "Gemma 4 tool-call" : "JSON");
    sbuf_add(&o, c->notes.p, c->notes.len);
    for (size_t i = 0; i < c->n_rules && !err; i++) {
        if (!order[i]->body)
            err = tern_errf(TERN_EINTERNAL, "json schema: rule '%s' was never written", order[i]->name);
        else
            sbuf_printf(&o, "%s ::= %s\n", order[i]->name, order[i]->body);
    }
    free(order);
    if (!err && (o.oom || c->notes.oom))
        err = oom();
    if (err) {
        sbuf_free(&o);
        return err;
    }
    *gbnf = o.p;
    return NULL;
}

tern_err *tern_json_schema_to_gbnf(const json_t *schema, tern_json_dialect dialect, int strict, char **gbnf) {
    *gbnf = NULL;
    if (!schema)
        return tern_errf(TERN_EINVAL, "schema: missing");
    if (dialect != TERN_JSON_DIALECT_JSON && dialect != TERN_JSON_DIALECT_GEMMA)
        return tern_errf(TERN_EINVAL, "schema: unknown dialect %d", (int)dialect);
    conv c = {.root = schema, .gemma = dialect == TERN_JSON_DIALECT_GEMMA, .strict = !!strict};
    const char *root;
    size_t idx;
    sbuf b = {0};
    tern_err *err = add_rule(&c, "root", NULL, &root);
    if (!err)
        err = add_ref(&c, "#", root, &idx);
    if (!err)
        err = push_chain(&c, idx);
    if (!err)
        err = gen_body(&c, schema, "schema", "root", 0, 1, &b);
    if (!err)
        err = set_body(&c, root, &b);
    if (!err)
        err = finish(&c, gbnf);
    sbuf_free(&b);
    conv_free(&c);
    return err;
}

tern_err *tern_json_object_gbnf(char **gbnf) {
    *gbnf = NULL;
    conv c = {0};
    const char *root, *obj;
    sbuf b = {0};
    tern_err *err = add_rule(&c, "root", NULL, &root);
    if (!err)
        err = prim(&c, P_OBJECT, &obj);
    if (!err)
        sbuf_adds(&b, obj);
    if (!err)
        err = set_body(&c, root, &b);
    if (!err)
        err = finish(&c, gbnf);
    sbuf_free(&b);
    conv_free(&c);
    return err;
}
