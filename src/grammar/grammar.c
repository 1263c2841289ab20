/* grammar.c — GBNF compiled to byte-level rules, and the matcher over sets of stacks (see grammar.h).
 *
 * Parsing builds rules whose terminals are code-point classes and a literal's characters; repetitions and groups
 * become helper rules as llama.cpp builds them (x* is R ::= x R | ε). Then every terminal is turned into bytes: a
 * literal character into its UTF-8 bytes, one BYTES element each; a class's code-point ranges (complemented for
 * [^...], surrogates left out) into UTF-8 byte-range sequences (the standard range-splitting construction), a class
 * of ASCII only staying one BYTES element and any other becoming a reference to a rule of one alternative per
 * sequence. Left recursion (through nullable rules too) would make the matcher's expansion loop forever, so it is
 * refused at compile time. */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/utf8.h"
#include "grammar/cpset.h"

#define MAX_REPEAT 1000
#define MAX_ELEMS (1u << 22)
#define MAX_RULES 10000
#define MAX_EXPAND 200000 /* expansions one byte (or the start) may take: an ambiguous grammar fails, never hangs */
#define MAX_EXPAND_DEPTH 1000

/* ---- building ---------------------------------------------------------------------------------------------- */

/* A code-point class: its ranges as written, and whether it is negated. */
typedef struct cpclass {
    tern_cpset set;
    int neg;
} cpclass;

/* A pre-element: a rule reference, a class (index into classes) or a literal's code point. */
typedef struct pel {
    int kind; /* 0 END, 1 ALT, 2 REF, 3 CLASS, 4 CHAR (no class: they were most of a schema grammar's allocations) */
    uint32_t v;
} pel;

typedef struct prule {
    char *name;
    pel *e;
    size_t n, cap;
    int defined;
} prule;

typedef struct builder {
    size_t total;  /* pre-elements in all rules: bounded, so a short grammar cannot ask for unbounded memory */
    prule *rules;
    size_t n_rules, cap_rules;
    int32_t *names; /* open addressing over the written rules' indices, -1 empty: a linear search was quadratic */
    size_t n_names, cap_names;
    cpclass *classes;
    size_t n_classes, cap_classes;
    const char *src, *end;
    tern_err *err;
} builder;

static TERN_MUST_CHECK tern_err *oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

/* A builder step failed: past the size limits (valid text this build cannot hold: a JSON Schema's converter gets
 * there from counts it honours), or out of memory. */
static TERN_MUST_CHECK tern_err *build_oom(const builder *b) {
    if (b->total > MAX_ELEMS || b->n_rules >= MAX_RULES)
        return tern_errf(TERN_EUNSUPPORTED, "grammar: too large (over %u elements or %d rules once repetitions are "
                                      "expanded)", MAX_ELEMS, MAX_RULES);
    return oom();
}

static void where(const builder *b, const char *p, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *q = b->src; q < p && q < b->end; q++) {
        if (*q == '\n')
            (*line)++, *col = 1;
        else
            (*col)++;
    }
}

static void fail(builder *b, const char *p, const char *what) {
    if (b->err)
        return;
    int line, col;
    where(b, p, &line, &col);
    b->err = tern_errf(TERN_EINVAL, "grammar: line %d, column %d: %s", line, col, what);
}

/* A new rule of that name, not looked up (helper names are unique by construction). */
static int append_rule(builder *b, const char *name, size_t len) {
    if (b->n_rules >= MAX_RULES)
        return -1;
    if (b->n_rules == b->cap_rules) {
        size_t cap = b->cap_rules ? 2 * b->cap_rules : 32;
        prule *r = realloc(b->rules, cap * sizeof *r);
        if (!r)
            return -1;
        b->rules = r, b->cap_rules = cap;
    }
    prule *r = &b->rules[b->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = strndup(name, len)))
        return -1;
    return (int)b->n_rules++;
}

static size_t name_slot(const builder *b, const char *name, size_t len) {
    size_t mask = b->cap_names - 1, i = (size_t)tern_hash64(name, len, 0) & mask;
    for (;; i = (i + 1) & mask) {
        int32_t r = b->names[i];
        if (r < 0 || (strlen(b->rules[r].name) == len && !memcmp(b->rules[r].name, name, len)))
            return i;
    }
}

/* The rule a grammar names: found, or added (-1: past the limits or out of memory). */
static int add_rule(builder *b, const char *name, size_t len) {
    if (2 * (b->n_names + 1) > b->cap_names) { /* at most half full: probes stay short */
        size_t cap = b->cap_names ? 2 * b->cap_names : 64;
        int32_t *t = malloc(cap * sizeof *t), *old = b->names;
        if (!t)
            return -1;
        for (size_t i = 0; i < cap; i++)
            t[i] = -1;
        size_t old_cap = b->cap_names;
        b->names = t, b->cap_names = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i] >= 0) {
                const char *n = b->rules[old[i]].name;
                b->names[name_slot(b, n, strlen(n))] = old[i];
            }
        free(old);
    }
    size_t slot = name_slot(b, name, len);
    if (b->names[slot] >= 0)
        return b->names[slot];
    int r = append_rule(b, name, len);
    if (r >= 0)
        b->names[slot] = r, b->n_names++;
    return r;
}

/* A fresh helper rule named after `base` ('~' keeps it apart from every name a grammar can write). */
static int helper_rule(builder *b, const char *base) {
    char name[160];
    snprintf(name, sizeof name, "%.100s~%zu", base, b->n_rules);
    int r = append_rule(b, name, strlen(name));
    if (r >= 0)
        b->rules[r].defined = 1;
    return r;
}

/* Room for `extra` more pre-elements: at least doubling (from 16), and a repetition's copies in one step (growing
 * for them one at a time was most of the compiler's time on a JSON Schema's large counts). */
static int reserve_pels(builder *b, int rule, size_t extra) {
    prule *r = &b->rules[rule];
    if (r->n + extra <= r->cap)
        return 0;
    if (r->n + extra > MAX_ELEMS)
        return -1;
    size_t cap = r->cap ? 2 * r->cap : 16;
    cap = cap < r->n + extra ? r->n + extra : cap > MAX_ELEMS ? MAX_ELEMS : cap;
    pel *e = realloc(r->e, cap * sizeof *e);
    if (!e)
        return -1;
    r->e = e, r->cap = cap;
    return 0;
}

static int push_pel(builder *b, int rule, int kind, uint32_t v) {
    if (++b->total > MAX_ELEMS || reserve_pels(b, rule, 1))
        return -1;
    prule *r = &b->rules[rule];
    r->e[r->n++] = (pel){kind, v};
    return 0;
}

static int new_class(builder *b, int neg) {
    if (b->n_classes == b->cap_classes) {
        size_t cap = b->cap_classes ? 2 * b->cap_classes : 64;
        cpclass *c = realloc(b->classes, cap * sizeof *c);
        if (!c)
            return -1;
        b->classes = c, b->cap_classes = cap;
    }
    b->classes[b->n_classes] = (cpclass){.neg = neg};
    return (int)b->n_classes++;
}

static int class_add(builder *b, int cls, uint32_t lo, uint32_t hi) {
    tern_cpset *c = &b->classes[cls].set;
    tern_cpset_add(c, lo, hi);
    return c->oom ? -1 : 0;
}

static void builder_free(builder *b) {
    for (size_t i = 0; i < b->n_rules; i++) {
        free(b->rules[i].name);
        free(b->rules[i].e);
    }
    free(b->rules);
    free(b->names);
    for (size_t i = 0; i < b->n_classes; i++)
        tern_cpset_free(&b->classes[i].set);
    free(b->classes);
}

/* ---- parsing ----------------------------------------------------------------------------------------------- */

static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static const char *skip_space(builder *b, const char *p, int newline_ok) {
    while (p < b->end) {
        if (*p == ' ' || *p == '\t' || ((*p == '\n' || *p == '\r') && newline_ok))
            p++;
        else if (*p == '#') {
            while (p < b->end && *p != '\n')
                p++;
        } else
            break;
    }
    return p;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class: a UTF-8 sequence or an escape. Returns the position after it, NULL on
 * error (reported). */
static const char *parse_char(builder *b, const char *p, uint32_t *cp) {
    if (p >= b->end) {
        fail(b, p, "unexpected end of the grammar");
        return NULL;
    }
    if (*p == '\\') {
        if (p + 1 >= b->end) {
            fail(b, p, "unfinished escape");
            return NULL;
        }
        char e = p[1];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = p + 2 + i < b->end ? hexval(p[2 + i]) : -1;
                if (h < 0) {
                    fail(b, p, "expected hex digits in an escape");
                    return NULL;
                }
                v = v << 4 | (uint32_t)h;
            }
            if (v > 0x10FFFF) {
                fail(b, p, "escape beyond U+10FFFF");
                return NULL;
            }
            *cp = v;
            return p + 2 + digits;
        }
        switch (e) {
        case 'n': *cp = '\n'; break;
        case 't': *cp = '\t'; break;
        case 'r': *cp = '\r'; break;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': *cp = (uint32_t)e; break;
        default: fail(b, p, "unknown escape"); return NULL;
        }
        return p + 2;
    }
    const int n = tern_utf8_decode((const unsigned char *)p, (size_t)(b->end - p), cp);
    if (!n) {
        fail(b, p, "invalid UTF-8");
        return NULL;
    }
    return p + n;
}

static const char *parse_alternates(builder *b, const char *p, int rule, int nested, int depth);

/* Repeats the symbol elements [at, n) of `rule`'s current sequence: min..max times (max < 0: unbounded). */
static int repeat(builder *b, int rule, size_t at, int min, int max) {
    prule *r = &b->rules[rule];
    size_t len = r->n - at;
    pel *sym = malloc((len ? len : 1) * sizeof *sym);
    if (!sym)
        return -1;
    if (len)
        memcpy(sym, r->e + at, len * sizeof *sym);
    r->n = at;
    int bad = reserve_pels(b, rule, (size_t)min * len + 1);
    for (int i = 0; i < min && !bad; i++)
        for (size_t k = 0; k < len && !bad; k++)
            bad |= push_pel(b, rule, sym[k].kind, sym[k].v);
    if (max < 0) { /* R ::= sym R | ε */
        int rr = bad ? -1 : helper_rule(b, b->rules[rule].name);
        bad |= rr < 0;
        for (size_t k = 0; k < len && !bad; k++)
            bad |= push_pel(b, rr, sym[k].kind, sym[k].v);
        if (!bad)
            bad |= push_pel(b, rr, 2, (uint32_t)rr) || push_pel(b, rr, 1, 0) || push_pel(b, rr, 0, 0) ||
                   push_pel(b, rule, 2, (uint32_t)rr);
    } else if (max > min) { /* nested optionals: R1 ::= sym R2 | ε, ..., Rk ::= sym | ε */
        int prev = -1;
        for (int i = 0; i < max - min && !bad; i++) {
            int rr = helper_rule(b, b->rules[rule].name);
            bad |= rr < 0;
            for (size_t k = 0; k < len && !bad; k++)
                bad |= push_pel(b, rr, sym[k].kind, sym[k].v);
            if (!bad && prev >= 0)
                bad |= push_pel(b, rr, 2, (uint32_t)prev);
            if (!bad)
                bad |= push_pel(b, rr, 1, 0) || push_pel(b, rr, 0, 0);
            prev = rr;
        }
        if (!bad)
            bad |= push_pel(b, rule, 2, (uint32_t)prev);
    }
    free(sym);
    return bad ? -1 : 0;
}

/* A sequence of symbols with postfix operators, appended to `rule`. */
static const char *parse_sequence(builder *b, const char *p, int rule, int nested, int depth) {
    size_t last = (size_t)-1; /* where the last symbol's elements start */
    while (p < b->end && !b->err) {
        const char *s = p;
        if (*p == '"') {
            last = b->rules[rule].n;
            p++;
            while (p < b->end && *p != '"' && !b->err) {
                uint32_t cp;
                if (!(p = parse_char(b, p, &cp)))
                    return NULL;
                if (push_pel(b, rule, 4, cp))
                    return b->err = build_oom(b), NULL;
            }
            if (p >= b->end)
                return fail(b, s, "unterminated string literal"), NULL;
            p++;
        } else if (*p == '[') {
            last = b->rules[rule].n;
            p++;
            int neg = p < b->end && *p == '^';
            p += neg;
            int c = new_class(b, neg);
            if (c < 0)
                return b->err = build_oom(b), NULL;
            while (p < b->end && *p != ']' && !b->err) {
                uint32_t lo, hi;
                if (!(p = parse_char(b, p, &lo)))
                    return NULL;
                hi = lo;
                if (p + 1 < b->end && *p == '-' && p[1] != ']') {
                    if (!(p = parse_char(b, p + 1, &hi)))
                        return NULL;
                    if (hi < lo)
                        return fail(b, s, "a character range runs backwards"), NULL;
                }
                if (class_add(b, c, lo, hi))
                    return b->err = build_oom(b), NULL;
            }
            if (p >= b->end)
                return fail(b, s, "unterminated character class"), NULL;
            p++;
            if (push_pel(b, rule, 3, (uint32_t)c))
                return b->err = build_oom(b), NULL;
        } else if (*p == '.') {
            last = b->rules[rule].n;
            p++;
            int c = new_class(b, 0);
            if (c < 0 || class_add(b, c, 0, 0x10FFFF) || push_pel(b, rule, 3, (uint32_t)c))
                return b->err = build_oom(b), NULL;
        } else if (is_word(*p)) {
            last = b->rules[rule].n;
            const char *w = p;
            while (p < b->end && is_word(*p))
                p++;
            int r = add_rule(b, w, (size_t)(p - w));
            if (r < 0 || push_pel(b, rule, 2, (uint32_t)r))
                return b->err = build_oom(b), NULL;
        } else if (*p == '(') {
            if (depth > 1000)
                return fail(b, p, "groups nested too deeply (more than 1000)"), NULL;
            last = b->rules[rule].n;
            int g = helper_rule(b, b->rules[rule].name);
            if (g < 0)
                return b->err = build_oom(b), NULL;
            p = skip_space(b, p + 1, 1);
            if (!(p = parse_alternates(b, p, g, 1, depth + 1)))
                return NULL;
            if (p >= b->end || *p != ')')
                return fail(b, s, "expected ')'"), NULL;
            p++;
            if (push_pel(b, rule, 2, (uint32_t)g))
                return b->err = build_oom(b), NULL;
        } else if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
            if (last == (size_t)-1)
                return fail(b, p, "a repetition with nothing before it"), NULL;
            int min = 0, max = -1;
            if (*p == '+')
                min = 1;
            else if (*p == '?')
                max = 1;
            else if (*p == '{') {
                p++;
                long m = 0, n = -1;
                if (p >= b->end || *p < '0' || *p > '9')
                    return fail(b, s, "expected a number in {m,n}"), NULL;
                while (p < b->end && *p >= '0' && *p <= '9' && m <= MAX_REPEAT)
                    m = m * 10 + (*p++ - '0');
                if (p < b->end && *p == ',') {
                    p++;
                    if (p < b->end && *p >= '0' && *p <= '9') {
                        n = 0;
                        while (p < b->end && *p >= '0' && *p <= '9' && n <= MAX_REPEAT)
                            n = n * 10 + (*p++ - '0');
                    }
                } else
                    n = m;
                if (p >= b->end || *p != '}')
                    return fail(b, s, "expected '}' closing {m,n}"), NULL;
                if (m > MAX_REPEAT || n > MAX_REPEAT || (n >= 0 && n < m))
                    return fail(b, s, "a repetition bound over 1000, or {m,n} with n < m"), NULL;
                min = (int)m, max = (int)n;
            }
            p++;
            if (repeat(b, rule, last, min, max))
                return b->err = build_oom(b), NULL;
            last = (size_t)-1;
        } else {
            break;
        }
        p = skip_space(b, p, nested);
    }
    return b->err ? NULL : p;
}

static const char *parse_alternates(builder *b, const char *p, int rule, int nested, int depth) {
    for (;;) {
        if (!(p = parse_sequence(b, p, rule, nested, depth)))
            return NULL;
        if (p < b->end && *p == '|') {
            if (push_pel(b, rule, 1, 0))
                return b->err = build_oom(b), NULL;
            p = skip_space(b, p + 1, 1);
            continue;
        }
        if (push_pel(b, rule, 0, 0))
            return b->err = build_oom(b), NULL;
        return p;
    }
}

static void parse(builder *b) {
    const char *p = skip_space(b, b->src, 1);
    while (p < b->end && !b->err) {
        const char *w = p;
        while (p < b->end && is_word(*p))
            p++;
        if (p == w)
            return fail(b, p, "expected a rule name");
        int r = add_rule(b, w, (size_t)(p - w));
        if (r < 0) {
            b->err = build_oom(b);
            return;
        }
        if (b->rules[r].defined)
            return fail(b, w, "a rule defined twice");
        b->rules[r].defined = 1;
        p = skip_space(b, p, 0);
        if (b->end - p < 3 || memcmp(p, "::=", 3))
            return fail(b, p, "expected '::='");
        p = skip_space(b, p + 3, 1);
        if (!(p = parse_alternates(b, p, r, 0, 0)))
            return;
        if (p < b->end && *p != '\n' && *p != '\r')
            return fail(b, p, "unexpected character");
        p = skip_space(b, p, 1);
    }
}

/* ---- classes to bytes ------------------------------------------------------------------------------------------ */

typedef struct seqs {
    uint8_t (*s)[4][2]; /* each: up to 4 byte ranges */
    uint8_t *len;
    size_t n, cap;
} seqs;

static int seq_add(seqs *q, int len, const uint8_t lo[4], const uint8_t hi[4]) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 16;
        uint8_t(*s)[4][2] = realloc(q->s, cap * sizeof *s);
        if (s)
            q->s = s;
        uint8_t *l = s ? realloc(q->len, cap) : NULL;
        if (!l)
            return -1;
        q->len = l, q->cap = cap;
    }
    for (int i = 0; i < len; i++)
        q->s[q->n][i][0] = lo[i], q->s[q->n][i][1] = hi[i];
    q->len[q->n++] = (uint8_t)len;
    return 0;
}


/* The UTF-8 byte-range sequences of code points lo..hi (no surrogates inside). */
static int utf8_split(uint32_t lo, uint32_t hi, seqs *q) {
    static const uint32_t maxes[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= maxes[i] && hi > maxes[i])
            return utf8_split(lo, maxes[i], q) || utf8_split(maxes[i] + 1, hi, q);
    if (hi >= 0x80)
        for (int i = 1; i < 4; i++) {
            uint32_t m = (1u << (6 * i)) - 1;
            if ((lo & ~m) != (hi & ~m)) {
                if (lo & m)
                    return utf8_split(lo, lo | m, q) || utf8_split((lo | m) + 1, hi, q);
                if ((hi & m) != m)
                    return utf8_split(lo, (hi & ~m) - 1, q) || utf8_split(hi & ~m, hi, q);
            }
        }
    char a[4], z[4];
    int n = (int)tern_utf8_put(lo, a);
    tern_utf8_put(hi, z);
    return seq_add(q, n, (const uint8_t *)a, (const uint8_t *)z);
}

/* The class's code points, normalized (complemented when negated) into out; -1 when out of memory. */
static int class_ranges(cpclass *c, tern_cpset *out) {
    tern_cpset_norm(&c->set);
    if (c->neg)
        tern_cpset_invert(&c->set, out);
    else
        *out = c->set, c->set = (tern_cpset){0};
    return out->oom || c->set.oom ? -1 : 0;
}

/* ---- the compiled grammar ------------------------------------------------------------------------------------ */

struct tern_grammar {
    tern_gelem *e;
    size_t n, cap;
    uint32_t *start; /* [n_rules] */
    size_t n_rules;
    uint32_t root;
};

/* Appends an element; with no array yet (g->e NULL) only counts it, so the array is allocated once at its size
 * (growing it by doubling was a third of the JSON Schema fuzz target's time under ASan). -1 past MAX_ELEMS. */
static int emit_elem(tern_grammar *g, tern_gelem e) {
    if (g->n >= (g->e ? g->cap : MAX_ELEMS))
        return -1;
    if (g->e)
        g->e[g->n] = e;
    g->n++;
    return 0;
}

/* A literal's code point: its UTF-8 bytes in sequence (a surrogate has none and matches nothing, as in a class). */
static int emit_char(tern_grammar *g, uint32_t cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return emit_elem(g, (tern_gelem){.type = TERN_GE_BYTES, .lo = 1, .hi = 0});
    char u[4];
    size_t n = tern_utf8_put(cp, u);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_BYTES, .lo = (uint8_t)u[i], .hi = (uint8_t)u[i]});
    return bad;
}

/* The rules' elements, then the classes' rules (counted only while g->e is NULL); -1 past MAX_ELEMS. */
static int write_elems(const builder *b, tern_grammar *g, const int64_t *class_rule, const seqs *cs) {
    /* A class inline: its one-byte ranges as one BYTES element (an empty class matches nothing: a range 1..0). */
    int bad = 0;
    for (size_t r = 0; r < b->n_rules && !bad; r++) {
        g->start[r] = (uint32_t)g->n;
        const prule *pr = &b->rules[r];
        for (size_t i = 0; i < pr->n && !bad; i++) {
            const pel *e = &pr->e[i];
            if (e->kind == 0)
                bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_END});
            else if (e->kind == 1)
                bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_ALT});
            else if (e->kind == 2)
                bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_REF, .rule = e->v});
            else if (e->kind == 4)
                bad |= emit_char(g, e->v);
            else if (class_rule[e->v] >= 0)
                bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_REF, .rule = (uint32_t)class_rule[e->v]});
            else {
                const seqs *q = &cs[e->v];
                if (q->n == 0)
                    bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_BYTES, .lo = 1, .hi = 0});
                for (size_t k = 0; k < q->n && !bad; k++)
                    bad |= emit_elem(g, (tern_gelem){.type = k ? TERN_GE_BYTES_ALT : TERN_GE_BYTES, .lo = q->s[k][0][0],
                                                .hi = q->s[k][0][1]});
            }
        }
    }
    /* The classes' rules: one alternative per byte sequence (one-byte ones merged into the first). */
    for (size_t c = 0; c < b->n_classes && !bad; c++) {
        if (class_rule[c] < 0)
            continue;
        g->start[class_rule[c]] = (uint32_t)g->n;
        const seqs *q = &cs[c];
        int first = 1, ones = 0;
        for (size_t k = 0; k < q->n && !bad; k++)
            if (q->len[k] == 1) {
                bad |= emit_elem(g, (tern_gelem){.type = ones ? TERN_GE_BYTES_ALT : TERN_GE_BYTES, .lo = q->s[k][0][0],
                                            .hi = q->s[k][0][1]});
                ones = 1, first = 0;
            }
        for (size_t k = 0; k < q->n && !bad; k++) {
            if (q->len[k] == 1)
                continue;
            if (!first)
                bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_ALT});
            first = 0;
            for (int i = 0; i < q->len[k] && !bad; i++)
                bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_BYTES, .lo = q->s[k][i][0], .hi = q->s[k][i][1]});
        }
        bad |= emit_elem(g, (tern_gelem){.type = TERN_GE_END});
    }
    return bad;
}

/* Rule ids: the builder's rules first, then one per non-ASCII class (class_rule[c]). */
static TERN_MUST_CHECK tern_err *lower(builder *b, tern_grammar *g) {
    size_t nc = b->n_classes;
    int64_t *class_rule = malloc((nc ? nc : 1) * sizeof *class_rule);
    seqs *cs = calloc(nc ? nc : 1, sizeof *cs);
    tern_err *err = class_rule && cs ? NULL : oom();
    size_t n_rules = b->n_rules;
    for (size_t c = 0; c < nc && !err; c++) {
        tern_cpset r = {0};
        if (class_ranges(&b->classes[c], &r)) {
            tern_cpset_free(&r);
            err = oom();
            break;
        }
        for (size_t i = 0; i < r.n && !err; i++)
            if (utf8_split(r.r[i].lo, r.r[i].hi, &cs[c]))
                err = oom();
        tern_cpset_free(&r);
        int ascii = 1;
        for (size_t i = 0; i < cs[c].n; i++)
            ascii &= cs[c].len[i] == 1;
        class_rule[c] = ascii ? -1 : (int64_t)n_rules++;
    }
    if (!err && !(g->start = calloc(n_rules ? n_rules : 1, sizeof *g->start)))
        err = oom();
    g->n_rules = n_rules;
    if (!err && write_elems(b, g, class_rule, cs))
        err = tern_errf(TERN_EUNSUPPORTED, "grammar: too large (over %u elements)", MAX_ELEMS);
    if (!err && !(g->e = malloc((g->n ? g->n : 1) * sizeof *g->e)))
        err = oom();
    if (!err) {
        g->cap = g->n, g->n = 0;
        (void)write_elems(b, g, class_rule, cs); /* the same elements again, now stored: they fit */
    }
    for (size_t c = 0; cs && c < nc; c++)
        free(cs[c].s), free(cs[c].len);
    free(cs);
    free(class_rule);
    return err;
}

/* ---- checks --------------------------------------------------------------------------------------------------- */

static int end_of_seq(const tern_gelem *e) { return e->type == TERN_GE_END || e->type == TERN_GE_ALT; }

/* Which rules can match the empty text (a fixpoint over the rules). */
static uint8_t *nullable_rules(const tern_grammar *g) {
    uint8_t *nul = calloc(g->n_rules ? g->n_rules : 1, 1);
    if (!nul)
        return NULL;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t r = 0; r < g->n_rules; r++) {
            if (nul[r])
                continue;
            for (size_t i = g->start[r];;) { /* each alternative */
                int all = 1;
                size_t j = i;
                for (; !end_of_seq(&g->e[j]); j++)
                    if (g->e[j].type != TERN_GE_REF || !nul[g->e[j].rule])
                        all = 0;
                if (all) {
                    nul[r] = changed = 1;
                    break;
                }
                if (g->e[j].type == TERN_GE_END)
                    break;
                i = j + 1;
            }
        }
    }
    return nul;
}

/* 1 if rule r can reach itself without consuming a byte (through leading references, past nullable ones). */
static int left_recursive(const tern_grammar *g, const uint8_t *nul, uint32_t r, uint8_t *visiting, uint8_t *done) {
    if (done[r])
        return 0;
    if (visiting[r])
        return 1;
    visiting[r] = 1;
    for (size_t i = g->start[r];;) {
        size_t j = i;
        for (; !end_of_seq(&g->e[j]); j++) {
            if (g->e[j].type != TERN_GE_REF)
                break;
            if (left_recursive(g, nul, g->e[j].rule, visiting, done))
                return 1;
            if (!nul[g->e[j].rule])
                break;
        }
        while (!end_of_seq(&g->e[j]))
            j++;
        if (g->e[j].type == TERN_GE_END)
            break;
        i = j + 1;
    }
    visiting[r] = 0;
    done[r] = 1;
    return 0;
}

tern_err *tern_grammar_compile(const char *text, size_t len, tern_grammar **out) {
    *out = NULL;
    builder b = {.src = text, .end = text + len};
    parse(&b);
    tern_err *err = b.err;
    int root = -1;
    for (size_t i = 0; !err && i < b.n_rules; i++)
        if (!b.rules[i].defined) {
            err = tern_errf(TERN_EINVAL, "grammar: rule '%s' is used but never defined", b.rules[i].name);
        } else if (!strcmp(b.rules[i].name, "root"))
            root = (int)i;
    for (size_t i = 0; !err && root < 0 && i < b.n_rules; i++)
        if (!strcmp(b.rules[i].name, "start"))
            root = (int)i;
    if (!err && root < 0)
        err = tern_errf(TERN_EINVAL, "grammar: no 'root' rule");
    tern_grammar *g = err ? NULL : calloc(1, sizeof *g);
    if (!err && !g)
        err = oom();
    if (!err)
        err = lower(&b, g);
    if (!err) {
        g->root = (uint32_t)root;
        uint8_t *nul = nullable_rules(g), *vis = calloc(g->n_rules, 1), *done = calloc(g->n_rules, 1);
        if (!nul || !vis || !done)
            err = oom();
        for (size_t r = 0; !err && r < g->n_rules; r++)
            if (left_recursive(g, nul, (uint32_t)r, vis, done))
                err = tern_errf(TERN_EINVAL, "grammar: rule '%s' is left-recursive (it can reach itself before "
                                             "matching a character); rewrite it right-recursively",
                                r < b.n_rules ? b.rules[r].name : "(a character class)");
        free(nul), free(vis), free(done);
    }
    builder_free(&b);
    if (err) {
        tern_grammar_free(g);
        return err;
    }
    *out = g;
    return NULL;
}

void tern_grammar_free(tern_grammar *g) {
    if (!g)
        return;
    free(g->e);
    free(g->start);
    free(g);
}

uint64_t tern_grammar_min_bytes(const tern_grammar *g) {
    const uint64_t INF = UINT64_MAX;
    uint64_t *m = malloc((g->n_rules ? g->n_rules : 1) * sizeof *m);
    if (!m)
        return 0; /* unknown: no bound */
    for (size_t r = 0; r < g->n_rules; r++)
        m[r] = INF;
    for (int changed = 1; changed;) { /* a fixpoint: each rule's shortest alternative */
        changed = 0;
        for (size_t r = 0; r < g->n_rules; r++) {
            for (size_t i = g->start[r];;) {
                uint64_t sum = 0;
                size_t j = i;
                for (; !end_of_seq(&g->e[j]); j++) {
                    if (g->e[j].type == TERN_GE_BYTES)
                        sum += sum < INF;
                    else if (g->e[j].type == TERN_GE_REF)
                        sum = m[g->e[j].rule] == INF || sum == INF ? INF : sum + m[g->e[j].rule];
                }
                if (sum < m[r])
                    m[r] = sum, changed = 1;
                if (g->e[j].type == TERN_GE_END)
                    break;
                i = j + 1;
            }
        }
    }
    uint64_t root = m[g->root];
    free(m);
    return root;
}

const tern_gelem *tern_grammar_elems(const tern_grammar *g) { return g->e; }
size_t tern_grammar_n_elems(const tern_grammar *g) { return g->n; }
uint32_t tern_grammar_rule_start(const tern_grammar *g, uint32_t rule) { return g->start[rule]; }
uint32_t tern_grammar_root(const tern_grammar *g) { return g->root; }

/* ---- matching --------------------------------------------------------------------------------------------- */

void tern_gstate_free(tern_gstate *s) {
    free(s->pos);
    memset(s, 0, sizeof *s);
}

static int reserve(tern_gstate *s, size_t more) {
    if (s->len + more <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < s->len + more)
        cap *= 2;
    int32_t *p = realloc(s->pos, cap * sizeof *p);
    if (!p)
        return -1;
    s->pos = p, s->cap = cap;
    return 0;
}

int tern_gstate_copy(tern_gstate *dst, const tern_gstate *src) {
    dst->len = dst->n = 0;
    if (reserve(dst, src->len))
        return -1;
    if (src->len)
        memcpy(dst->pos, src->pos, src->len * sizeof *dst->pos);
    dst->len = src->len;
    dst->n = src->n;
    return 0;
}

/* The stacks being gathered into a state, with an index once there are many: a linear search for duplicates costs
 * stacks x stacks comparisons of up to TERN_GRAMMAR_MAX_DEPTH positions for every byte of an ambiguous grammar. */
#define STACK_SCAN_MAX 16 /* up to this many stacks a scan is cheaper than clearing the index */
typedef struct stack_set {
    tern_gstate *s;
    int indexed;
    uint32_t slot[2 * TERN_GRAMMAR_MAX_STACKS]; /* offset in s->pos + 1, 0 empty; at most half full */
} stack_set;

/* A stack's hash: a word at a time (the byte hash spent a third of the matcher's time on these short arrays). */
static uint64_t stack_hash(const int32_t *st, int32_t n) {
    uint64_t h = (uint64_t)n * 0x9e3779b97f4a7c15ull;
    for (int32_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)st[i]) * 0xff51afd7ed558ccdull;
    return tern_mix64(h);
}

static uint32_t *stack_slot(stack_set *ss, const int32_t *st, int32_t n) {
    const size_t mask = 2 * TERN_GRAMMAR_MAX_STACKS - 1;
    for (size_t i = (size_t)stack_hash(st, n) & mask;; i = (i + 1) & mask) {
        uint32_t at = ss->slot[i];
        if (!at || (ss->s->pos[at - 1] == n && !memcmp(ss->s->pos + at, st, (size_t)n * sizeof *st)))
            return &ss->slot[i];
    }
}

/* Adds a stack (positions st[0, n)) unless already present. 0, or -1 (out of memory, too many stacks). */
static int add_stack(stack_set *ss, const int32_t *st, int32_t n) {
    tern_gstate *s = ss->s;
    uint32_t *slot = NULL;
    if (!ss->indexed && s->n >= STACK_SCAN_MAX) {
        memset(ss->slot, 0, sizeof ss->slot);
        for (size_t i = 0; i < s->len; i += (size_t)s->pos[i] + 1)
            *stack_slot(ss, s->pos + i + 1, s->pos[i]) = (uint32_t)i + 1;
        ss->indexed = 1;
    }
    if (ss->indexed) {
        slot = stack_slot(ss, st, n);
        if (*slot)
            return 0;
    } else {
        for (size_t i = 0; i < s->len; i += (size_t)s->pos[i] + 1)
            if (s->pos[i] == n && !memcmp(s->pos + i + 1, st, (size_t)n * sizeof *st))
                return 0;
    }
    if (s->n >= TERN_GRAMMAR_MAX_STACKS || reserve(s, (size_t)n + 1))
        return -1;
    if (slot)
        *slot = (uint32_t)s->len + 1;
    s->pos[s->len++] = n;
    memcpy(s->pos + s->len, st, (size_t)n * sizeof *st);
    s->len += (size_t)n;
    s->n++;
    return 0;
}

/* Expands a stack until its top is a byte element (or it is empty), adding the results to out; st is not changed.
 * Stacks deeper than TERN_GRAMMAR_MAX_DEPTH are dropped (the sentence cannot nest further). *budget counts the
 * expansions left: an ambiguous grammar (empty derivations repeated) or a long chain of references fails with -1
 * instead of taking unbounded time or stack. */
static int expand(const tern_grammar *g, const int32_t *st, int32_t n, stack_set *out, int *budget, int level) {
    if (--*budget < 0 || level > MAX_EXPAND_DEPTH)
        return -1;
    if (n == 0)
        return add_stack(out, st, 0);
    const int32_t top = st[n - 1];
    const tern_gelem *e = &g->e[top];
    if (e->type != TERN_GE_REF)
        return add_stack(out, st, n);
    /* Pop the reference; its continuation (unless the sequence ends there) goes under the referenced rule. */
    int32_t cp[n + 1];
    memcpy(cp, st, (size_t)(n - 1) * sizeof *cp);
    int32_t base = n - 1;
    if (!end_of_seq(&g->e[top + 1]))
        cp[base++] = top + 1;
    for (uint32_t i = g->start[e->rule];;) {
        int32_t m = base;
        int deep = 0;
        if (!end_of_seq(&g->e[i])) {
            deep = m >= TERN_GRAMMAR_MAX_DEPTH;
            cp[m++] = (int32_t)i;
        }
        if (!deep && expand(g, cp, m, out, budget, level + 1))
            return -1;
        while (!end_of_seq(&g->e[i]))
            i++;
        if (g->e[i].type == TERN_GE_END)
            break;
        i++;
    }
    return 0;
}

tern_err *tern_gstate_init(const tern_grammar *g, tern_gstate *s) {
    memset(s, 0, sizeof *s);
    int32_t st[1];
    int rc = 0, budget = MAX_EXPAND;
    stack_set ss; /* not zeroed: the index is cleared only when a state grows past STACK_SCAN_MAX */
    ss.s = s, ss.indexed = 0;
    for (uint32_t i = g->start[g->root];;) { /* each alternative of the root, expanded */
        int32_t m = 0;
        if (!end_of_seq(&g->e[i]))
            st[m++] = (int32_t)i;
        rc |= expand(g, st, m, &ss, &budget, 0);
        while (!end_of_seq(&g->e[i]))
            i++;
        if (g->e[i].type == TERN_GE_END)
            break;
        i++;
    }
    if (rc) {
        tern_gstate_free(s);
        return tern_errf(TERN_EINVAL, "grammar: too ambiguous (more than %d ways, or %d expansions, to read the "
                                      "start)", TERN_GRAMMAR_MAX_STACKS, MAX_EXPAND);
    }
    return NULL;
}

static int byte_ok(const tern_gelem *e, uint8_t b) {
    if (b >= e->lo && b <= e->hi)
        return 1;
    for (e++; e->type == TERN_GE_BYTES_ALT; e++)
        if (b >= e->lo && b <= e->hi)
            return 1;
    return 0;
}

int tern_gstate_byte(const tern_grammar *g, const tern_gstate *in, uint8_t b, tern_gstate *out) {
    out->len = out->n = 0;
    int budget = MAX_EXPAND;
    int32_t st[TERN_GRAMMAR_MAX_DEPTH + 2];
    stack_set ss;
    ss.s = out, ss.indexed = 0;
    for (size_t i = 0; i < in->len; i += (size_t)in->pos[i] + 1) {
        const int32_t n = in->pos[i];
        if (n == 0)
            continue;
        const int32_t top = in->pos[i + (size_t)n];
        if (!byte_ok(&g->e[top], b))
            continue;
        memcpy(st, in->pos + i + 1, (size_t)(n - 1) * sizeof *st);
        int32_t m = n - 1, next = top + 1;
        while (g->e[next].type == TERN_GE_BYTES_ALT)
            next++;
        if (!end_of_seq(&g->e[next]))
            st[m++] = next;
        if (expand(g, st, m, &ss, &budget, 0))
            return -1;
    }
    return 0;
}

int tern_gstate_bytes(const tern_grammar *g, tern_gstate *s, const uint8_t *bytes, size_t n, tern_gstate *tmp) {
    for (size_t i = 0; i < n; i++) {
        if (tern_gstate_byte(g, s, bytes[i], tmp))
            return -1;
        tern_gstate t = *s;
        *s = *tmp;
        *tmp = t;
        if (s->n == 0)
            return 0;
    }
    return 1;
}

int tern_gstate_complete(const tern_gstate *s) {
    for (size_t i = 0; i < s->len; i += (size_t)s->pos[i] + 1)
        if (s->pos[i] == 0)
            return 1;
    return 0;
}

int tern_gstate_final(const tern_gstate *s) { return s->n > 0 && s->len == (size_t)s->n; }
