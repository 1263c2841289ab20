/* jinja_internal.h — what the pieces of the Jinja renderer share: the arena everything lives in
 * (jinja_arena.c) and the text helpers (jinja_text.c), the floor the rest stands on; tokens
 * (jinja_lexer.c), the syntax tree (jinja_parser.c), runtime values (jinja_value.c), the
 * interpreter (jinja_eval.c) and the built-in filters, tests and methods (jinja_filters.c).
 * Nothing here is part of the public API (jinja.h). */
#ifndef TERN_CHAT_JINJA_INTERNAL_H
#define TERN_CHAT_JINJA_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/jinja.h"
#include "core/utf8.h"

/* ------------------------------------------------------------------ text helpers */

/* Decoding and encoding UTF-8: core/utf8.h (the renderer's strings, like JavaScript's, may hold lone surrogates,
 * so they are decoded with tern_utf8_decode_loose; a template's source is checked with tern_utf8_valid). */
/* 1 if `cp` is white space for JavaScript (String.prototype.trim, /\s/). */
int jt_is_js_space(uint32_t cp);
/* Byte length of the JS white-space code point at s[i], 0 if none there. */
size_t jt_space_len(const char *s, size_t n, size_t i);
/* First occurrence of needle in hay (memmem), NULL if none; an empty needle is at hay. */
const char *jt_find(const char *hay, size_t hn, const char *needle, size_t nn);
/* Length of s in UTF-16 code units (JavaScript's String.length). */
size_t jt_utf16_len(const char *s, size_t n);
/* Compares two strings by UTF-16 code units (JavaScript's < on strings): <0, 0, >0. */
int jt_utf16_cmp(const char *a, size_t an, const char *b, size_t bn);
/* JavaScript's Number.prototype.toString(): shortest round-trip digits, JS exponent rules;
 * writes at most 32 bytes + NUL into buf, returns the length. */
size_t jt_num_str(double v, char *buf);
/* JavaScript's ToNumber(string) (the conversion behind "1" == 1). */
double jt_str_to_num(const char *s, size_t n);
/* JavaScript's parseInt(s, 10) and parseFloat(s); NaN when nothing parses. */
double jt_parse_int(const char *s, size_t n);
double jt_parse_float(const char *s, size_t n);
/* Full Unicode case mapping of one code point as JavaScript's toUpperCase/toLowerCase do it
 * (a few map to several code points); writes up to 3 code points, returns the count. */
int jt_upper_cp(uint32_t cp, uint32_t out[3]);
int jt_lower_cp(uint32_t cp, uint32_t out[3]);
/* 1 if `cp` is cased / case-ignorable (Unicode properties used by the final-sigma rule). */
int jt_is_cased(uint32_t cp);
int jt_is_case_ignorable(uint32_t cp);

/* ------------------------------------------------------------------ tokens */

typedef enum jtok_type {
    TK_EOF = 0,
    TK_TEXT,
    TK_NUM,
    TK_STR,
    TK_IDENT,
    TK_EQUALS,
    TK_LPAREN,
    TK_RPAREN,
    TK_OPEN_STMT,
    TK_CLOSE_STMT,
    TK_OPEN_EXPR,
    TK_CLOSE_EXPR,
    TK_LBRACKET,
    TK_RBRACKET,
    TK_LBRACE,
    TK_RBRACE,
    TK_COMMA,
    TK_DOT,
    TK_COLON,
    TK_PIPE,
    TK_ADD,   /* + - ~ */
    TK_MUL,   /* * / // % */
    TK_POW,   /* ** */
    TK_CMP,   /* < > <= >= == != */
    TK_UNARY, /* a lone unary + or - */
    TK_COMMENT
} jtok_type;

typedef struct jtoken {
    jtok_type type;
    const char *s; /* value: text, literal contents (escapes resolved), identifier, operator */
    size_t n;
    uint32_t pos; /* byte offset in the original template source */
} jtoken;

/* ------------------------------------------------------------------ memory (jinja_arena.c) */

/* A bump allocator; everything is freed at once. `cap` bounds the total (0 = none). */
typedef struct jarena {
    struct jchunk *head;
    size_t total, cap;
} jarena;

/* Allocates n zeroed bytes (8-aligned); NULL when out of memory or over the cap. */
void *ja_alloc(jarena *a, size_t n);
/* Copies n bytes into the arena (plus a NUL); NULL on failure. */
char *ja_strdup(jarena *a, const char *s, size_t n);
/* Frees every chunk. */
void ja_free(jarena *a);

/* ------------------------------------------------------------------ syntax tree */

typedef enum jnode_kind {
    /* statements */
    N_TEXT,        /* s,n */
    N_IF,          /* a = test, body, alt */
    N_FOR,         /* a = loop variable (E_IDENT or E_TUPLE), b = iterable (maybe E_SELECT), body, alt */
    N_SET,         /* a = target, b = value (NULL: block set, body) */
    N_MACRO,       /* s,n = name, args = parameters, body */
    N_CALLBLOCK,   /* a = E_CALL, args = caller parameters, body */
    N_FILTERBLOCK, /* b = filter (E_IDENT or E_CALL), body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    E_INT,     /* num */
    E_FLOAT,   /* num */
    E_STR,     /* s,n */
    E_IDENT,   /* s,n */
    E_ARRAY,   /* body = items */
    E_TUPLE,   /* body = items */
    E_OBJECT,  /* body = key, value, key, value... */
    E_MEMBER,  /* a = object, b = property, flag = computed ([...]) */
    E_SLICE,   /* a = start, b = stop, c = step (each may be NULL) */
    E_CALL,    /* a = callee, body = arguments */
    E_UNARY,   /* op, a */
    E_BINARY,  /* op, a, b */
    E_FILTER,  /* a = operand, b = filter (E_IDENT or E_CALL) */
    E_TEST,    /* a = operand, s,n = test name, flag = negated */
    E_SELECT,  /* a = value, b = condition ("a if b" without else) */
    E_TERNARY, /* a = condition, b = if true, c = if false */
    E_KWARG,   /* s,n = name, a = value */
    E_SPREAD,  /* *a */
    E_KWSPREAD /* **a */
} jnode_kind;

typedef enum jop {
    OP_NONE = 0,
    OP_AND, OP_OR, OP_NOT,
    OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE, OP_IN, OP_NOTIN,
    OP_ADD, OP_SUB, OP_CONCAT, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_NEG, OP_POS
} jop;

typedef struct jnode jnode;
typedef struct jlist {
    jnode **v;
    size_t n;
} jlist;

/* Macro and call-block bodies that read these names get them bound (Jinja's rule). */
enum { JSPECIAL_KWARGS = 1, JSPECIAL_VARARGS = 2 };

struct jnode {
    jnode_kind kind;
    jop op;
    uint32_t pos; /* byte offset in the original source, for error messages */
    uint8_t flag;
    uint8_t special; /* N_MACRO / N_CALLBLOCK: JSPECIAL_* read by the body */
    const char *s;
    size_t n;
    double num;
    jnode *a, *b, *c;
    jlist body, alt, args;
};

/* ------------------------------------------------------------------ the compiled template */

struct tern_jinja {
    jarena arena;      /* the tree, its strings, the preprocessed source */
    char *name;        /* for error messages */
    char *src;         /* original source (NUL-terminated copy) */
    size_t src_len;
    jlist body;        /* top-level statements */
};

/* Formats "NAME:LINE:COL: " for byte offset `pos` of the original source into buf (jinja_text.c). */
void jinja_where(const char *name, const char *src, size_t src_len, uint32_t pos, char *buf, size_t cap);

/* Tokenizes `src` after Hugging Face's preprocessing (trailing newline, lstrip_blocks,
 * trim_blocks, {% generation %} tags); tokens and their strings live in `arena`; the
 * array ends with a TK_EOF token. Errors name the line and column. */
TERN_MUST_CHECK tern_err *jinja_lex(const char *name, const char *src, size_t len, jarena *arena, jtoken **out, size_t *count);

/* Parses tokens into top-level statements (nodes in `arena`). */
TERN_MUST_CHECK tern_err *jinja_parse(const char *name, const char *src, size_t len, const jtoken *toks, size_t count,
                      jarena *arena, jlist *out);

/* ------------------------------------------------------------------ runtime values */

typedef enum jv_type {
    JV_UNDEF = 0,
    JV_NULL,
    JV_BOOL,
    JV_INT,   /* a JavaScript number known to be an integer (IntegerValue) */
    JV_FLOAT, /* FloatValue */
    JV_STR,
    JV_ARRAY, /* also tuples (jarr.tuple) */
    JV_OBJECT,/* also keyword-argument bundles (jobj.kwargs) */
    JV_NS,    /* namespace(): a mutable attribute bag */
    JV_FUNC,
    JV_LOOP   /* a for loop's `loop` as stored in its scope; jx_eval turns it into an object */
} jv_type;

typedef struct jarr jarr;
typedef struct jobj jobj;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jv {
    jv_type t;
    union {
        int b;
        double num;
        struct {
            const char *p;
            size_t n;
        } s;
        jarr *a;
        jobj *o;
        jfunc *f;
        jloop *l;
    } u;
} jv;

/* The state behind `loop`: one per running for loop, updated in place each iteration.
 * `loop.index` and friends are computed from it; the object form (a fresh one per
 * iteration, as in the reference) is only built when the template takes `loop` itself. */
struct jloop {
    size_t i, n;
    const jv *items;
    jobj *obj; /* this iteration's object form, once built */
};

struct jarr {
    size_t n;
    int tuple;
    jv *items;
};

typedef struct jkv {
    const char *k;
    size_t kn;
    jv v;
} jkv;

struct jobj {
    size_t n, cap;
    int kwargs;        /* a KeywordArgumentsValue: the trailing bundle of name=value arguments */
    jkv *kv;           /* insertion order */
    uint32_t *index;   /* open-addressing hash of kv positions + 1, built for larger objects */
    size_t index_cap;
};

typedef enum jbuiltin {
    JB_NAMESPACE = 1,
    JB_RAISE,
    JB_RANGE,
    JB_STRFTIME,
    /* string methods */
    JB_S_UPPER, JB_S_LOWER, JB_S_STRIP, JB_S_TITLE, JB_S_CAPITALIZE, JB_S_RSTRIP, JB_S_LSTRIP,
    JB_S_STARTSWITH, JB_S_ENDSWITH, JB_S_SPLIT, JB_S_REPLACE,
    /* object methods */
    JB_O_GET, JB_O_ITEMS, JB_O_KEYS, JB_O_VALUES, JB_O_DICTSORT
} jbuiltin;

typedef enum jfunc_kind { JF_BUILTIN, JF_MACRO, JF_CALLER } jfunc_kind;

typedef struct jenv jenv;

struct jfunc {
    jfunc_kind kind;
    jbuiltin builtin;
    jv self;            /* the string or object a method is bound to */
    const jnode *node;  /* JF_MACRO: N_MACRO; JF_CALLER: N_CALLBLOCK */
    jenv *env;          /* JF_CALLER: where the call block stands */
};

/* A scope: variables set here, then the parent's. */
typedef struct jvar {
    struct jvar *next;
    const char *name;
    size_t nlen;
    jv v;
} jvar;

struct jenv {
    jenv *parent;
    jvar *vars;
};

/* A growable output buffer (malloc'd), bounded by the render's max_output. */
typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

/* The state of one render. */
typedef struct jctx {
    const tern_jinja *tpl;
    jarena arena;         /* every runtime value */
    tern_err *err;        /* set with the failing construct's location */
    tern_jinja_limits lim;
    uint64_t steps;
    unsigned depth;
    uint32_t ctrl_pos;    /* where a break/continue that left every loop stood */
    jv namespace_fn;      /* the built-in namespace() of this render */
} jctx;

typedef enum jrc { JR_OK = 0, JR_ERR, JR_BREAK, JR_CONTINUE } jrc;

/* Records an error located at `pos` (first error wins); returns JR_ERR. */
jrc jx_fail(jctx *c, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Counts n evaluation steps of work (loops inside built-ins, scans of long strings: one step
 * per 64 bytes); fails once the render's step budget is spent. */
jrc jx_charge(jctx *c, uint32_t pos, uint64_t n);
/* Allocates from the render's arena; on failure records an error at pos and returns NULL. */
void *jx_alloc(jctx *c, uint32_t pos, size_t n);

/* Value constructors. */
static inline jv jv_undef(void) { jv v = {JV_UNDEF, {0}}; return v; }
static inline jv jv_null(void) { jv v = {JV_NULL, {0}}; return v; }
static inline jv jv_bool(int b) { jv v = {JV_BOOL, {0}}; v.u.b = !!b; return v; }
static inline jv jv_int(double d) { jv v = {JV_INT, {0}}; v.u.num = d; return v; }
static inline jv jv_float(double d) { jv v = {JV_FLOAT, {0}}; v.u.num = d; return v; }
static inline jv jv_str(const char *p, size_t n) { jv v = {JV_STR, {0}}; v.u.s.p = p; v.u.s.n = n; return v; }

/* Makes an array of n undefined items (caller fills), NULL on failure. */
jarr *jv_new_arr(jctx *c, uint32_t pos, size_t n);
jv jv_arr(jarr *a);
/* Makes an empty object (or namespace when t == JV_NS). */
jobj *jv_new_obj(jctx *c, uint32_t pos, size_t cap);
jv jv_obj(jobj *o, jv_type t);
/* Looks a key up; NULL when absent. */
jv *jobj_get(const jobj *o, const char *k, size_t kn);
/* Map.set: replaces the value of an existing key in place, else appends. */
jrc jobj_set(jctx *c, uint32_t pos, jobj *o, const char *k, size_t kn, jv v);
/* Copies a string into the arena as a value. */
jrc jv_str_copy(jctx *c, uint32_t pos, const char *p, size_t n, jv *out);

/* The JSON context converted to values (object keys in JavaScript's property order). */
jrc jv_from_json(jctx *c, const json_t *j, unsigned depth, jv *out);

/* Truthiness (__bool__). */
int jv_truthy(jv v);
/* Type names as the reference renderer spells them ("StringValue", ...), for messages. */
const char *jv_type_name(jv v);

/* Buffer helpers; append fails (error at pos) past the output cap. */
jrc jb_put(jctx *c, uint32_t pos, jbuf *b, const char *s, size_t n);
void jb_free(jbuf *b);
/* Moves the buffer's bytes into the arena as a string value and empties the buffer. */
jrc jb_take(jctx *c, uint32_t pos, jbuf *b, jv *out);

/* RuntimeValue.toString(): how a value prints in {{ }} (strings bare, floats "1.0",
 * containers as JSON with "undefined" for undefined). */
jrc jv_display(jctx *c, uint32_t pos, jv v, jbuf *out);
/* value.toString() of the underlying JavaScript value (the ~ and string + operators:
 * floats "1", arrays "a,b", objects "[object Map]"; null/undefined as ""). */
jrc jv_raw_string(jctx *c, uint32_t pos, jv v, jbuf *out);

/* JSON serialisation options (the tojson filter). */
typedef struct jjson_opts {
    int indent;           /* 0: none */
    int ensure_ascii;
    int sort_keys;
    const char *item_sep, *key_sep; /* NULL: the defaults */
    size_t item_sep_n, key_sep_n;
    int undef_to_null;
} jjson_opts;
jrc jv_to_json(jctx *c, uint32_t pos, jv v, const jjson_opts *o, unsigned depth, jbuf *out);

/* JavaScript loose (==) and strict (===) equality of the underlying values. */
jrc jv_loose_eq(jctx *c, uint32_t pos, jv a, jv b, int *eq);
int jv_strict_eq(jv a, jv b);
/* compareRuntimeValues: orders numbers/booleans, strings (optionally case-insensitively),
 * null with null, undefined with undefined; anything else is an error. */
jrc jv_compare(jctx *c, uint32_t pos, jv a, jv b, int case_sensitive, int *res);

/* String case mapping as JavaScript does it. */
jrc jv_upper(jctx *c, uint32_t pos, jv s, jv *out);
jrc jv_lower(jctx *c, uint32_t pos, jv s, jv *out);

/* ------------------------------------------------------------------ interpreter entry points */

/* Evaluates an expression node. */
jrc jx_eval(jctx *c, const jnode *n, jenv *env, jv *out);
/* Evaluates call arguments: positional values, then a kwargs object (NULL when none given). */
jrc jx_eval_args(jctx *c, const jlist *args, jenv *env, jv **pos_out, size_t *npos, jobj **kwargs);
/* Calls a function value with arguments (a trailing kwargs object included in args). */
jrc jx_call(jctx *c, uint32_t pos, jv fn, jv *args, size_t nargs, jenv *env, jv *out);
/* Looks a variable up through the scope chain (undefined when absent). */
jv jx_lookup(const jctx *c, jenv *env, const char *name, size_t n);
/* Sets a variable in this scope. */
jrc jx_setvar(jctx *c, uint32_t pos, jenv *env, const char *name, size_t n, jv v);

/* Filters, tests and methods (jinja_filters.c). */
jrc jx_apply_filter(jctx *c, jv operand, const jnode *filter, jenv *env, jv *out);
/* Runs test `name` on v (with an optional second argument); unknown test -> error. */
jrc jx_test(jctx *c, uint32_t pos, const char *name, size_t n, jv v, const jv *arg, int *res);
/* Calls a built-in function or bound method. */
jrc jx_call_builtin(jctx *c, uint32_t pos, const jfunc *f, jv *args, size_t nargs, jenv *env, jv *out);
/* Property lookup on strings / arrays / objects: map entries first, then built-in methods. */
jv jx_builtin_member(jctx *c, jv obj, const char *name, size_t n, int *oom);
/* Array of an object's keys / [key, value] pairs. */
jrc jx_obj_keys(jctx *c, uint32_t pos, jobj *o, jv *out);
jrc jx_obj_items(jctx *c, uint32_t pos, jobj *o, jv *out);

#endif
