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
 * by the grammar can always finish.
 *
 * This file holds the state, the rule table, the primitives and the walk; a string's pattern, numbers and objects
 * are their own parts (json_schema_regex.c, json_schema_numbers.c, json_schema_objects.c), writing GBNF text through
 * json_schema_expr.c (json_schema_internal.h says what they share). */
#include "grammar/json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "grammar/json_schema_internal.h"

TERN_MUST_CHECK tern_err *js_oom(void) { return tern_errf(TERN_ENOMEM, "out of memory"); }

char *js_strf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

int js_is_alnum(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'); }
int js_is_word(int ch) { return js_is_alnum(ch) || ch == '-' || ch == '_'; }

/* A rule name from a hint: [A-Za-z0-9-] only, runs of anything else one '-', at most MAX_NAME characters. */
static void sanitize(const char *hint, char *out) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)hint; *p && n < MAX_NAME; p++) {
        if (js_is_alnum(*p))
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
            return js_oom();
        c->rules = v, c->cap_rules = cap;
    }
    rule *r = &c->rules[c->n_rules];
    r->name = strdup(cand);
    r->body = body ? strdup(body) : NULL;
    if (!r->name || (body && !r->body)) {
        free(r->name), free(r->body);
        return js_oom();
    }
    c->n_rules++;
    *name = r->name;
    return NULL;
}

/* Adds a rule from a built buffer (checking it was built whole). */
TERN_MUST_CHECK tern_err *js_add_rule_buf(conv *c, const char *hint, const sbuf *b, const char **name) {
    if (b->oom)
        return js_oom();
    return add_rule(c, hint, b->p ? b->p : "", name);
}

/* Fills in a reserved rule. */
static TERN_MUST_CHECK tern_err *set_body(conv *c, const char *name, const sbuf *b) {
    if (b->oom)
        return js_oom();
    rule *r = find_rule(c, name);
    if (!r || r->body)
        return tern_errf(TERN_EINTERNAL, "json schema: rule '%s' filled twice", name);
    return (r->body = strdup(b->p ? b->p : "")) ? NULL : js_oom();
}

void js_note(conv *c, const char *path, const char *what) {
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

/* ==== primitives ================================================================================================= */


/* Appends the name of primitive p to o. */
TERN_MUST_CHECK tern_err *js_prim_push(conv *c, enum prim p, sbuf *o) {
    const char *n;
    TERN_TRY(js_prim(c, p, &n));
    js_seq_push(o, n);
    return NULL;
}

TERN_MUST_CHECK tern_err *js_prim(conv *c, enum prim p, const char **name) {
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
        if ((err = js_prim(c, (q), &d[i])))                                                                               \
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
        if (c->d->raw_text) {
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
        if (c->d->raw_text) { /* keys as text, and (the same dialect) no white space */
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
        if (!c->d->spaced) {
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
    err = js_add_rule_buf(c, names[p], &b, &c->prim[p]);
    if (!err)
        *name = c->prim[p];
done:
    sbuf_free(&b);
    return err;
}

/* ==== rendering constants ======================================================================================== */

/* A JSON string literal the way a compact serializer writes it (raw UTF-8, \u00XX for other controls). */
void js_json_str(sbuf *o, const char *s, size_t n) {
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
int js_gemma_bare_key(const char *k, size_t n) {
    if (!n || k[0] == ' ' || k[n - 1] == ' ' || k[0] == '\t' || k[n - 1] == '\t' || k[0] == '\n' || k[n - 1] == '\n')
        return 0;
    if (n >= 5 && !memcmp(k, GEMMA_QUOTE, 5))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (k[i] == ':' || k[i] == ',' || k[i] == '{' || k[i] == '}' || (unsigned char)k[i] < 0x20)
            return 0;
    return 1;
}

int js_has_gemma_quote(const char *s, size_t n) { return n >= 5 && memmem(s, n, GEMMA_QUOTE, 5) != NULL; }

/* JSON writes a key and a string alike: quoted and escaped. */
static int json_quoted(sbuf *o, const char *k, size_t n) {
    js_json_str(o, k, n);
    return 1;
}

/* Gemma 4 writes a key bare when it reads back as itself, else between its delimiters (which it cannot hold). */
static int gemma_key(sbuf *o, const char *k, size_t n) {
    if (js_gemma_bare_key(k, n))
        sbuf_add(o, k, n);
    else if (js_has_gemma_quote(k, n))
        return 0;
    else
        sbuf_printf(o, "%s%.*s%s", GEMMA_QUOTE, (int)n, k, GEMMA_QUOTE);
    return 1;
}

/* A Gemma 4 string is its raw text between the delimiters, which it cannot hold (nor a NUL). */
static int gemma_string(sbuf *o, const char *s, size_t n) {
    if (js_has_gemma_quote(s, n) || memchr(s, 0, n))
        return 0;
    sbuf_adds(o, GEMMA_QUOTE);
    sbuf_add(o, s, n);
    sbuf_adds(o, GEMMA_QUOTE);
    return 1;
}

static const js_dialect JSON = {.title = "JSON", .quote = "\"", .spaced = 1, .key = json_quoted,
                                .string = json_quoted};
static const js_dialect GEMMA = {.title = "Gemma 4 tool-call", .quote = GEMMA_QUOTE, .raw_text = 1, .args_object = 1,
                                 .key_class = "[A-Za-z0-9_]", .key = gemma_key, .string = gemma_string};

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
            if (!c->d->key(o, k, kn))
                return 0;
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
        return c->d->string(o, json_string_value(v), json_string_length(v));
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
TERN_MUST_CHECK tern_err *js_gen_rule(conv *c, const json_t *s, const char *path, const char *hint, int depth, const char **name) {
    sbuf b = {0};
    tern_err *err = gen_body(c, s, path, hint, depth, 0, &b);
    if (!err && b.oom)
        err = js_oom();
    if (!err && !b.len)
        err = tern_errf(TERN_EINTERNAL, "%s: empty grammar", path);
    if (!err) {
        rule *r = js_is_name(b.p) ? find_rule(c, b.p) : NULL;
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
            err = err ? err : js_oom();
        sbuf_free(&tok);
    }
    if (!err && (p.oom || last.oom))
        err = js_oom();
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
            return js_oom();
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
            return js_oom();
        c->refs = v, c->cap_refs = cap;
    }
    if (!(c->refs[c->n_refs].ptr = strdup(ptr)))
        return js_oom();
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
        js_seq_push(out, c->refs[i].name);
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
        js_seq_push(out, name);
    sbuf_free(&b);
    free(tpath), free(hint);
    return err;
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
            char *w = js_strf("format '%s' is not enforced", json_string_value(fmt));
            if (!w)
                return js_oom();
            js_note(c, path, w);
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
        return js_prim_push(c, P_STRING, out);
    sbuf b = {0};
    tern_err *err = NULL;
    const char *q = c->d->quote;
    js_seq_lit(&b, q, strlen(q));
    if (pat) {
        err = js_gen_pattern(c, json_string_value(pat), path, &b);
        if (!err && (fmt || lengths))
            js_note(c, path, "only the pattern is enforced (not format or length)");
    } else if (fmt) {
        err = js_prim_push(c, fp, &b);
        if (!err && lengths)
            js_note(c, path, "only the format is enforced (not the length)");
    } else {
        const char *ch = "[^<\\x00]";
        if (!c->d->raw_text)
            err = js_prim(c, P_CHAR, &ch);
        if (!err)
            js_rep_push(&b, ch, min, max);
    }
    js_seq_lit(&b, q, strlen(q));
    if (!err)
        sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    sbuf_free(&b);
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
    if (c->d->spaced)
        TERN_TRY(js_prim(c, P_WS, &ws));
    /* Everything inside comes after "[". */
    size_t saved_base = c->chain_base;
    c->chain_base = c->n_chain;
    const char **pe = calloc(np + 1, sizeof *pe), *xe = NULL;
    tern_err *err = pe ? NULL : js_oom();
    for (size_t i = 0; !err && i < np && i < total_max; i++) {
        char *p = js_strf("%s.%s[%zu]", path, prefix_key, i), *h = js_strf("%s-%zu", hint, i);
        err = p && h ? js_gen_rule(c, json_array_get(prefix, i), p, h, depth + 1, &pe[i]) : js_oom();
        free(p), free(h);
    }
    if (!err && has_extra && total_max > np) {
        char *p = js_strf("%s.%s", path, extra_key), *h = js_strf("%s-item", hint);
        if (!p || !h)
            err = js_oom();
        else if (!extra || json_is_true(extra))
            err = js_prim(c, P_VALUE, &xe);
        else
            err = js_gen_rule(c, extra, p, h, depth + 1, &xe);
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
            js_seq_push(&el, ws);
            sbuf_printf(&next, "%s %s", sepx, el.p);
            if (np) {
                js_rep_push(&inner, next.p, lo, hi);
            } else {
                sbuf all = {0};
                js_seq_push(&all, el.p);
                js_rep_push(&all, next.p, lo ? lo - 1 : 0, hi == UNBOUNDED ? UNBOUNDED : hi - 1);
                js_atom_push(&inner, all.p, lo ? "" : "?");
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
            js_seq_push(&part, pe[k]);
            js_seq_push(&part, ws);
            js_seq_push(&part, inner.p);
            sbuf_clear(&inner);
            js_atom_push(&inner, part.p, k < min ? "" : "?");
            inner.oom |= part.oom;
            sbuf_free(&part);
        }
        sbuf_adds(&b, "\"[\"");
        js_seq_push(&b, ws);
        js_seq_push(&b, inner.p);
        js_seq_push(&b, "\"]\"");
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
    tern_err *err = lits ? NULL : js_oom();
    for (size_t i = 0; !err && i < n; i++) {
        const json_t *v = is_const ? vals : json_array_get(vals, i);
        if (!value_fits(v, types))
            continue;
        sbuf t = {0}, l = {0};
        int r = render(c, &t, v, 0);
        if (r < 0)
            err = tern_errf(TERN_EINVAL, "%s.%s: a value nested deeper than %d levels", path, kw, MAX_DEPTH);
        else if (r == 0)
            js_note(c, path, "a string holding <|\"|> cannot be written in Gemma's syntax: that value is left out");
        else {
            tern_gbnf_literal(&l, t.p, t.len);
            int dup = l.oom;
            for (size_t j = 0; j < n_lits && !dup; j++)
                dup = !strcmp(lits[j], l.p);
            if (!dup) {
                js_alt_push(&alts, l.p);
                lits[n_lits++] = l.p; /* kept: freed below */
                l.p = NULL;
            }
        }
        alts.oom |= t.oom | l.oom;
        sbuf_free(&t), sbuf_free(&l);
    }
    if (!err && alts.oom)
        err = js_oom();
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
    tern_err *err = m && props && req ? NULL : js_oom();
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
        return js_prim_push(c, top && c->d->args_object ? P_OBJECT : P_VALUE, out);
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
            char *p = js_strf("%s.allOf[0]", path);
            if (!p)
                return js_oom();
            tern_err *err = gen_body(c, json_array_get(all, 0), p, hint, depth + 1, top, out);
            free(p);
            return err;
        }
        if (c->strict)
            return tern_errf(TERN_EINVAL, "%s.allOf: only one schema is supported in strict mode", path);
        json_t *merged;
        TERN_TRY(merge_all_of(c, all, path, &merged));
        js_note(c, path, "allOf merged into one schema");
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
            char *p = js_strf("%s.%s[%zu]", path, compk, i), *h = js_strf("%s-%zu", hint, i);
            const char *name;
            err = p && h ? js_gen_rule(c, json_array_get(list, i), p, h, depth + 1, &name) : js_oom();
            if (!err)
                js_alt_push(&alts, name);
            free(p), free(h);
        }
        if (!err && alts.oom)
            err = js_oom();
        if (!err)
            sbuf_adds(out, alts.p);
        sbuf_free(&alts);
        return err;
    }

    unsigned types;
    TERN_TRY(schema_types(s, path, &types));
    if (top && c->d->args_object) {
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
            return js_prim_push(c, top && c->d->args_object ? P_OBJECT : P_VALUE, out);
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
        char *h = multi ? js_strf("%s-%s", hint, TYPES[i].name) : strdup(hint);
        sbuf one = {0};
        if (!h)
            err = js_oom();
        else if (t == T_OBJ)
            err = js_gen_object(c, s, path, h, depth, &one);
        else if (t == T_ARR)
            err = gen_array(c, s, path, h, depth, &one);
        else if (t == T_STR)
            err = gen_string(c, s, path, h, &one);
        else if (t == T_NUM)
            err = js_gen_number(c, s, path, h, &one);
        else if (t == T_INT)
            err = js_gen_integer(c, s, path, h, &one);
        else
            err = js_prim_push(c, t == T_BOOL ? P_BOOLEAN : P_NULL, &one);
        if (!err)
            js_alt_push(&alts, one.p);
        alts.oom |= one.oom;
        sbuf_free(&one);
        free(h);
    }
    if (!err && alts.oom)
        err = js_oom();
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
        return js_oom();
    for (size_t i = 0; i < c->n_rules; i++)
        order[i] = &c->rules[i];
    qsort(order, c->n_rules, sizeof *order, cmp_rule_name);
    sbuf o = {0};
    tern_err *err = NULL;
    sbuf_printf(&o, "# generated from a JSON Schema (%s syntax)\n", c->d->title);
    sbuf_add(&o, c->notes.p, c->notes.len);
    for (size_t i = 0; i < c->n_rules && !err; i++) {
        if (!order[i]->body)
            err = tern_errf(TERN_EINTERNAL, "json schema: rule '%s' was never written", order[i]->name);
        else
            sbuf_printf(&o, "%s ::= %s\n", order[i]->name, order[i]->body);
    }
    free(order);
    if (!err && (o.oom || c->notes.oom))
        err = js_oom();
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
    conv c = {.root = schema, .d = dialect == TERN_JSON_DIALECT_GEMMA ? &GEMMA : &JSON, .strict = !!strict};
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
    conv c = {.d = &JSON};
    const char *root, *obj;
    sbuf b = {0};
    tern_err *err = add_rule(&c, "root", NULL, &root);
    if (!err)
        err = js_prim(&c, P_OBJECT, &obj);
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
