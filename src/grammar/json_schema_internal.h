/* json_schema_internal.h — what the parts of the JSON Schema converter share (json_schema.h is its public face):
 * the converter's state and rule table, its primitives and bounds (json_schema.c), the GBNF expression text every
 * part writes (json_schema_expr.c), and the parts that turn one kind of subschema into grammar: a string's pattern
 * (json_schema_regex.c), numbers and integer ranges (json_schema_numbers.c), objects and the keys an additional
 * property may not take (json_schema_objects.c). */
#ifndef TERN_GRAMMAR_JSON_SCHEMA_INTERNAL_H
#define TERN_GRAMMAR_JSON_SCHEMA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/sbuf.h"
#include "grammar/cpset.h"
#include "grammar/json_schema.h"

#define MAX_DEPTH 64      /* nesting of subschemas, of const values and of regex groups */
#define INT_DIGITS 19     /* most digits before the point */
#define FRAC_DIGITS 18    /* most digits after it */
#define EXP_DIGITS 3      /* most exponent digits */
#define WS_INDENT 20      /* most spaces or tabs after a newline between tokens */
#define MAX_REPEAT 1000   /* the largest {m,n} bound the grammar compiler takes; larger counts are split */
#define MAX_NAME 80       /* longest rule name before a uniqueness suffix */
#define MAX_COUNT 1000000 /* largest minLength / maxItems / regex count honoured exactly */
#define UNBOUNDED UINT64_MAX

#define GEMMA_QUOTE "<|\"|>" /* Gemma 4's string delimiter */

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

/* The syntax the grammar is written in (json_schema.h's tern_json_dialect; the chat format picks it): what differs
 * between JSON text and Gemma 4's tool-call arguments, named. */
typedef struct js_dialect {
    const char *title;     /* in the grammar's first comment */
    const char *quote;     /* a string's delimiters */
    int spaced;            /* white space may stand between tokens */
    int raw_text;          /* strings (and keys) are raw text: no escapes, never NUL or '<' (the delimiter's start) */
    int args_object;       /* the top level is a call's arguments, always an object */
    const char *key_class; /* the characters an additional property's key is made of (NULL: any string's) */
    /* Writes a constant's key or string value in the dialect's syntax into o; 0 when the dialect cannot write it. */
    int (*key)(sbuf *o, const char *k, size_t n);
    int (*string)(sbuf *o, const char *s, size_t n);
} js_dialect;

typedef struct conv {
    const json_t *root;
    const js_dialect *d;
    int strict;
    rule *rules;
    size_t n_rules, cap_rules;
    ref_ent *refs;
    size_t n_refs, cap_refs;
    size_t *chain; /* refs entered since text was last consumed: [chain_base, n_chain) */
    size_t n_chain, cap_chain, chain_base;
    const char *prim[P_COUNT];
    sbuf notes; /* "# ..." lines */
} conv;

/* ---- json_schema.c: the state, the rule table, the primitives, the walk ---- */

/* The out-of-memory error. */
TERN_MUST_CHECK tern_err *js_oom(void);
/* A malloc'd printf; NULL when out of memory. */
char *js_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* [A-Za-z0-9] */
int js_is_alnum(int ch);
/* [A-Za-z0-9_-] */
int js_is_word(int ch);
/* Adds a rule from a built buffer (checking it was built whole). */
TERN_MUST_CHECK tern_err *js_add_rule_buf(conv *c, const char *hint, const sbuf *b, const char **name);
/* Adds "# PATH: WHAT" to the notes written above the rules (where the grammar is looser than the schema). */
void js_note(conv *c, const char *path, const char *what);
/* The name of primitive p, adding its rules when first used. */
TERN_MUST_CHECK tern_err *js_prim(conv *c, enum prim p, const char **name);
/* Appends the name of primitive p to o. */
TERN_MUST_CHECK tern_err *js_prim_push(conv *c, enum prim p, sbuf *o);
/* A JSON string literal the way a compact serializer writes it (raw UTF-8, \u00XX for other controls). */
void js_json_str(sbuf *o, const char *s, size_t n);
/* 1 if a key can be written bare in Gemma's syntax and read back as itself. */
int js_gemma_bare_key(const char *k, size_t n);
/* 1 if s holds Gemma's string delimiter. */
int js_has_gemma_quote(const char *s, size_t n);
/* The rule (or primitive) for subschema s: its name. */
TERN_MUST_CHECK tern_err *js_gen_rule(conv *c, const json_t *s, const char *path, const char *hint, int depth,
                                      const char **name);

/* ---- json_schema_expr.c: GBNF expression text ---- */

/* The characters JSON can escape with a letter (\" \\ \/ \b \f \n \r \t), and those letters. */
#define JS_N_SHORT_ESC 8
extern const struct js_short_esc {
    uint32_t cp;
    char esc;
} JS_SHORT_ESC[JS_N_SHORT_ESC];

/* 1 if e is a single rule name. */
int js_is_name(const char *e);
/* Appends e as one element of a sequence (grouped when it has alternatives). */
void js_seq_push(sbuf *o, const char *e);
/* Appends e as one element of a sequence, e known to hold no top-level '|' (not scanned: for nested output). */
void js_seq_push_unit(sbuf *o, const char *e);
/* Appends ( e )op, e known to need the group (not scanned). */
void js_group_push(sbuf *o, const char *e, const char *op);
/* Appends e as another alternative. */
void js_alt_push(sbuf *o, const char *e);
/* Appends e with a postfix operator (grouped unless it is a single primary). */
void js_atom_push(sbuf *o, const char *e, const char *op);
/* Appends e{min,max} (max UNBOUNDED: no upper bound) in the operators the grammar has. */
void js_rep_push(sbuf *o, const char *e, uint64_t min, uint64_t max);
/* Appends a literal as the next element of a sequence. */
void js_seq_lit(sbuf *o, const char *s, size_t n);
/* One code point inside a [...] class, escaped where the class syntax needs it. */
void js_class_char(sbuf *o, uint32_t cp);
/* The class [...] (or [^...] when neg) of a normalized set's ranges. */
void js_class_ranges(sbuf *o, const tern_cpset *s, int neg);
/* A class for a normalized, non-empty set: [...] or [^...], whichever is shorter. */
void js_class_of(sbuf *o, const tern_cpset *s);

/* ---- json_schema_regex.c, json_schema_numbers.c, json_schema_objects.c: subschemas of one kind ---- */

/* The content of a string matching the pattern (between the quotes), appended to out. */
TERN_MUST_CHECK tern_err *js_gen_pattern(conv *c, const char *pat, const char *path, sbuf *out);
/* An integer, within its minimum/maximum (exclusive ones too) when it has them. */
TERN_MUST_CHECK tern_err *js_gen_integer(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out);
/* A number (bounds other than a sign are noted, not enforced). */
TERN_MUST_CHECK tern_err *js_gen_number(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out);
/* An object: its properties in the schema's order, required and optional, then additional ones. */
TERN_MUST_CHECK tern_err *js_gen_object(conv *c, const json_t *s, const char *path, const char *hint, int depth,
                                        sbuf *out);

#endif
