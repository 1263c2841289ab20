/* jinja_parser.c — tokens to a syntax tree, with @huggingface/jinja's grammar.
 *
 * Statements: set (also tuple targets, namespace attributes and block form), if/elif/else,
 * for (tuple targets, "if" filter, else block), macro, call (with caller parameters),
 * filter blocks, break, continue. Anything else ({% include %}, {% raw %}, {% with %}...)
 * is rejected with its line and column.
 *
 * Expression precedence, lowest first (the reference's, which differs from Python Jinja
 * in places): "a if b else c" / "a if b", or, and, not, comparisons and (not) in,
 * + - ~, * / // %, **, "is" tests, "|" filters, unary + -, calls/attributes/subscripts,
 * literals. Nesting is capped so hostile input cannot exhaust the stack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

#define MAX_PARSE_DEPTH 128

typedef struct parser {
    const char *name, *src;
    size_t src_len;
    const jtoken *t;
    size_t count, cur;
    jarena *arena;
    tern_err *err;
    unsigned depth;
} parser;

static void *perr(parser *P, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *perr(parser *P, uint32_t pos, const char *fmt, ...) {
    if (P->err)
        return NULL;
    char where[256], msg[512];
    jinja_where(P->name, P->src, P->src_len, pos, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->err = tern_errf(TERN_EFORMAT, "%s%s", where, msg);
    return NULL;
}

static const jtoken *tok(const parser *P) { return &P->t[P->cur < P->count ? P->cur : P->count - 1]; }
static const jtoken *tok_at(const parser *P, size_t k) {
    size_t i = P->cur + k;
    return &P->t[i < P->count ? i : P->count - 1];
}
static int is(const parser *P, jtok_type ty) { return tok(P)->type == ty; }
static int tok_is(const jtoken *t, const char *s) { return strlen(s) == t->n && !memcmp(t->s, s, t->n); }
static int is_ident(const parser *P, const char *name) { return is(P, TK_IDENT) && tok_is(tok(P), name); }
static void advance(parser *P) {
    if (P->cur < P->count - 1)
        P->cur++;
}

static const char *tok_desc(const jtoken *t) {
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "text";
    case TK_NUM: return "number";
    case TK_STR: return "string";
    case TK_IDENT: return "name";
    case TK_OPEN_STMT: return "'{%'";
    case TK_CLOSE_STMT: return "'%}'";
    case TK_OPEN_EXPR: return "'{{'";
    case TK_CLOSE_EXPR: return "'}}'";
    case TK_COMMENT: return "comment";
    default: return NULL;
    }
}

/* Fails with "expected X, found Y" at the current token. */
static void *expected(parser *P, const char *what) {
    const jtoken *t = tok(P);
    const char *d = tok_desc(t);
    if (d)
        return perr(P, t->pos, "expected %s, found %s", what, d);
    return perr(P, t->pos, "expected %s, found '%.*s'", what, (int)t->n, t->s);
}

static int expect(parser *P, jtok_type ty, const char *what) {
    if (!is(P, ty)) {
        expected(P, what);
        return -1;
    }
    advance(P);
    return 0;
}

static jnode *node(parser *P, jnode_kind k, uint32_t pos) {
    jnode *n = ja_alloc(P->arena, sizeof *n);
    if (!n)
        return perr(P, pos, "out of memory");
    n->kind = k;
    n->pos = pos;
    return n;
}

/* A list grown in the arena. */
typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;

static int nvec_push(parser *P, nvec *v, jnode *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = ja_alloc(P->arena, cap * sizeof *nv);
        if (!nv) {
            perr(P, x ? x->pos : 0, "out of memory");
            return -1;
        }
        if (v->n)
            memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

static jlist nvec_list(nvec *v) { return (jlist){v->v, v->n}; }

static jnode *parse_expression(parser *P);
static jnode *parse_primary(parser *P);
static int parse_any(parser *P, jnode **out);

/* ------------------------------------------------------------------ expressions */

static int parse_args(parser *P, int params, jlist *out) {
    if (expect(P, TK_LPAREN, "'(' to open the argument list"))
        return -1;
    nvec args = {0};
    int saw_kw = 0, saw_spread = 0;
    while (!is(P, TK_RPAREN)) {
        const jtoken *t = tok(P);
        int kw_spread = t->type == TK_POW;
        int pos_spread = t->type == TK_MUL && tok_is(t, "*");
        if (params && (kw_spread || pos_spread)) {
            perr(P, t->pos, "argument unpacking is not allowed in parameter declarations");
            return -1;
        }
        jnode *arg;
        if (kw_spread) {
            advance(P);
            jnode *e = parse_expression(P);
            if (!e || !(arg = node(P, E_KWSPREAD, t->pos)))
                return -1;
            arg->a = e;
            if (nvec_push(P, &args, arg))
                return -1;
            if (is(P, TK_COMMA))
                advance(P);
            if (!is(P, TK_RPAREN)) {
                perr(P, tok(P)->pos, "'**' must be applied to the final argument");
                return -1;
            }
            break;
        }
        if (pos_spread) {
            if (saw_spread) {
                perr(P, t->pos, "only one '*' argument unpacking is allowed");
                return -1;
            }
            saw_spread = 1;
            advance(P);
            jnode *e = parse_expression(P);
            if (!e || !(arg = node(P, E_SPREAD, t->pos)))
                return -1;
            arg->a = e;
        } else {
            arg = parse_expression(P);
            if (!arg)
                return -1;
            if (is(P, TK_EQUALS)) {
                advance(P);
                if (arg->kind != E_IDENT) {
                    perr(P, arg->pos, params ? "expected a name for the parameter" : "expected a name for the keyword argument");
                    return -1;
                }
                jnode *v = parse_expression(P);
                jnode *kw = v ? node(P, E_KWARG, arg->pos) : NULL;
                if (!kw)
                    return -1;
                kw->s = arg->s;
                kw->n = arg->n;
                kw->a = v;
                arg = kw;
            }
            if (params) {
                if (arg->kind != E_IDENT && arg->kind != E_KWARG) {
                    perr(P, arg->pos, "expected a name for the parameter");
                    return -1;
                }
                for (size_t i = 0; i < args.n; i++)
                    if (args.v[i]->n == arg->n && !memcmp(args.v[i]->s, arg->s, arg->n)) {
                        perr(P, arg->pos, "duplicate parameter name '%.*s'", (int)arg->n, arg->s);
                        return -1;
                    }
            }
            if (arg->kind == E_KWARG)
                saw_kw = 1;
            else if (saw_kw) {
                perr(P, arg->pos, params ? "a parameter without a default follows one with a default"
                                         : "positional arguments must come before keyword arguments");
                return -1;
            } else if (saw_spread) {
                perr(P, arg->pos, "positional arguments must not follow '*' argument unpacking");
                return -1;
            }
        }
        if (nvec_push(P, &args, arg))
            return -1;
        if (is(P, TK_COMMA))
            advance(P);
    }
    if (expect(P, TK_RPAREN, "')' to close the argument list"))
        return -1;
    *out = nvec_list(&args);
    return 0;
}

/* The inside of [...]: a subscript or a slice a:b:c. */
static jnode *parse_subscript(parser *P, uint32_t pos) {
    jnode *parts[3] = {0};
    size_t n = 0;
    int is_slice = 0;
    while (!is(P, TK_RBRACKET)) {
        jnode *e = NULL;
        if (is(P, TK_COLON)) {
            advance(P);
            is_slice = 1;
        } else {
            e = parse_expression(P);
            if (!e)
                return NULL;
            if (is(P, TK_COLON)) {
                advance(P);
                is_slice = 1;
            }
        }
        if (n < 3)
            parts[n] = e;
        n++;
    }
    if (n == 0)
        return perr(P, pos, "expected at least one argument for the subscript");
    if (!is_slice)
        return parts[0];
    if (n > 3)
        return perr(P, pos, "expected at most 3 parts in a slice");
    jnode *s = node(P, E_SLICE, pos);
    if (s) {
        s->a = parts[0];
        s->b = parts[1];
        s->c = parts[2];
    }
    return s;
}

static jnode *parse_member(parser *P, jnode *object) {
    while (object && (is(P, TK_DOT) || is(P, TK_LBRACKET))) {
        const jtoken *op = tok(P);
        advance(P);
        jnode *m = node(P, E_MEMBER, op->pos);
        if (!m)
            return NULL;
        m->a = object;
        if (op->type == TK_LBRACKET) {
            m->flag = 1;
            m->b = parse_subscript(P, op->pos);
            if (!m->b || expect(P, TK_RBRACKET, "']'"))
                return NULL;
        } else {
            m->b = parse_primary(P);
            if (!m->b)
                return NULL;
            if (m->b->kind != E_IDENT && m->b->kind != E_INT)
                return perr(P, m->b->pos, "expected a name or an integer after '.'");
        }
        object = m;
    }
    return object;
}

static jnode *parse_call(parser *P, jnode *callee) {
    if (++P->depth > MAX_PARSE_DEPTH)
        return perr(P, tok(P)->pos, "expressions nested too deeply");
    jnode *call = node(P, E_CALL, callee->pos);
    if (!call || parse_args(P, 0, &call->body))
        return NULL;
    call->a = callee;
    jnode *e = parse_member(P, call);
    if (e && is(P, TK_LPAREN))
        e = parse_call(P, e);
    P->depth--;
    return e;
}

static jnode *parse_call_member(parser *P) {
    jnode *m = parse_member(P, parse_primary(P));
    if (m && is(P, TK_LPAREN))
        return parse_call(P, m);
    return m;
}

static jnode *parse_unary_sign(parser *P) {
    const jtoken *t = tok(P);
    if ((t->type == TK_UNARY || t->type == TK_ADD) && (tok_is(t, "-") || tok_is(t, "+"))) {
        if (++P->depth > MAX_PARSE_DEPTH)
            return perr(P, t->pos, "expressions nested too deeply");
        advance(P);
        jnode *arg = parse_unary_sign(P);
        P->depth--;
        jnode *u = arg ? node(P, E_UNARY, t->pos) : NULL;
        if (!u)
            return NULL;
        u->op = tok_is(t, "-") ? OP_NEG : OP_POS;
        u->a = arg;
        return u;
    }
    return parse_call_member(P);
}

static jnode *parse_filter(parser *P) {
    jnode *operand = parse_unary_sign(P);
    while (operand && is(P, TK_PIPE)) {
        advance(P);
        jnode *f = parse_primary(P);
        if (!f)
            return NULL;
        if (f->kind != E_IDENT)
            return perr(P, f->pos, "expected a filter name after '|'");
        if (is(P, TK_LPAREN) && !(f = parse_call(P, f)))
            return NULL;
        jnode *fe = node(P, E_FILTER, f->pos);
        if (!fe)
            return NULL;
        fe->a = operand;
        fe->b = f;
        operand = fe;
    }
    return operand;
}

static jnode *parse_test(parser *P) {
    jnode *operand = parse_filter(P);
    while (operand && is_ident(P, "is")) {
        advance(P);
        int negate = is_ident(P, "not");
        if (negate)
            advance(P);
        jnode *name = parse_primary(P);
        if (!name)
            return NULL;
        if (name->kind != E_IDENT)
            return perr(P, name->pos, "expected a test name after 'is'");
        if (is(P, TK_LPAREN))
            return perr(P, tok(P)->pos, "unsupported: a test with arguments ('is %.*s(...)')", (int)name->n, name->s);
        jnode *t = node(P, E_TEST, name->pos);
        if (!t)
            return NULL;
        t->a = operand;
        t->s = name->s;
        t->n = name->n;
        t->flag = (uint8_t)negate;
        operand = t;
    }
    return operand;
}

static jnode *binary(parser *P, jop op, uint32_t pos, jnode *l, jnode *r) {
    if (!l || !r)
        return NULL;
    jnode *b = node(P, E_BINARY, pos);
    if (b) {
        b->op = op;
        b->a = l;
        b->b = r;
    }
    return b;
}

static jnode *parse_power(parser *P) {
    jnode *left = parse_test(P);
    while (left && is(P, TK_POW)) {
        uint32_t pos = tok(P)->pos;
        advance(P);
        left = binary(P, OP_POW, pos, left, parse_test(P));
    }
    return left;
}

static jnode *parse_multiplicative(parser *P) {
    jnode *left = parse_power(P);
    while (left && is(P, TK_MUL)) {
        const jtoken *t = tok(P);
        jop op = tok_is(t, "*") ? OP_MUL : tok_is(t, "/") ? OP_DIV : tok_is(t, "//") ? OP_FLOORDIV : OP_MOD;
        advance(P);
        left = binary(P, op, t->pos, left, parse_power(P));
    }
    return left;
}

static jnode *parse_additive(parser *P) {
    jnode *left = parse_multiplicative(P);
    while (left && is(P, TK_ADD)) {
        const jtoken *t = tok(P);
        jop op = tok_is(t, "+") ? OP_ADD : tok_is(t, "-") ? OP_SUB : OP_CONCAT;
        advance(P);
        left = binary(P, op, t->pos, left, parse_multiplicative(P));
    }
    return left;
}

static jnode *parse_comparison(parser *P) {
    jnode *left = parse_additive(P);
    while (left) {
        const jtoken *t = tok(P);
        jop op;
        if (is_ident(P, "not") && tok_at(P, 1)->type == TK_IDENT && tok_is(tok_at(P, 1), "in")) {
            op = OP_NOTIN;
            advance(P);
            advance(P);
        } else if (is_ident(P, "in")) {
            op = OP_IN;
            advance(P);
        } else if (is(P, TK_CMP)) {
            op = tok_is(t, "==") ? OP_EQ : tok_is(t, "!=") ? OP_NE : tok_is(t, "<") ? OP_LT
               : tok_is(t, ">") ? OP_GT : tok_is(t, "<=") ? OP_LE : OP_GE;
            advance(P);
        } else
            break;
        left = binary(P, op, t->pos, left, parse_additive(P));
    }
    return left;
}

static jnode *parse_not(parser *P) {
    if (is_ident(P, "not")) {
        const jtoken *t = tok(P);
        if (++P->depth > MAX_PARSE_DEPTH)
            return perr(P, t->pos, "expressions nested too deeply");
        advance(P);
        jnode *arg = parse_not(P);
        P->depth--;
        jnode *u = arg ? node(P, E_UNARY, t->pos) : NULL;
        if (u) {
            u->op = OP_NOT;
            u->a = arg;
        }
        return u;
    }
    return parse_comparison(P);
}

static jnode *parse_and(parser *P) {
    jnode *left = parse_not(P);
    while (left && is_ident(P, "and")) {
        uint32_t pos = tok(P)->pos;
        advance(P);
        left = binary(P, OP_AND, pos, left, parse_not(P));
    }
    return left;
}

static jnode *parse_or(parser *P) {
    jnode *left = parse_and(P);
    while (left && is_ident(P, "or")) {
        uint32_t pos = tok(P)->pos;
        advance(P);
        left = binary(P, OP_OR, pos, left, parse_and(P));
    }
    return left;
}

static jnode *parse_if_expression(parser *P) {
    jnode *a = parse_or(P);
    if (!a || !is_ident(P, "if"))
        return a;
    uint32_t pos = tok(P)->pos;
    advance(P);
    jnode *test = parse_or(P);
    if (!test)
        return NULL;
    if (is_ident(P, "else")) {
        advance(P);
        jnode *f = parse_if_expression(P);
        jnode *t = f ? node(P, E_TERNARY, pos) : NULL;
        if (t) {
            t->a = test;
            t->b = a;
            t->c = f;
        }
        return t;
    }
    jnode *s = node(P, E_SELECT, pos);
    if (s) {
        s->a = a;
        s->b = test;
    }
    return s;
}

static jnode *parse_expression(parser *P) {
    if (++P->depth > MAX_PARSE_DEPTH)
        return perr(P, tok(P)->pos, "expressions nested too deeply");
    jnode *e = parse_if_expression(P);
    P->depth--;
    return e;
}

/* a, b, c -> a tuple; a single expression stays itself. */
static jnode *parse_sequence(parser *P, int primary) {
    uint32_t pos = tok(P)->pos;
    jnode *first = primary ? parse_primary(P) : parse_expression(P);
    if (!first || !is(P, TK_COMMA))
        return first;
    nvec items = {0};
    if (nvec_push(P, &items, first))
        return NULL;
    while (is(P, TK_COMMA)) {
        advance(P);
        jnode *e = primary ? parse_primary(P) : parse_expression(P);
        if (!e || nvec_push(P, &items, e))
            return NULL;
    }
    jnode *t = node(P, E_TUPLE, pos);
    if (t)
        t->body = nvec_list(&items);
    return t;
}

static jnode *parse_primary(parser *P) {
    const jtoken *t = tok(P);
    switch (t->type) {
    case TK_NUM: {
        advance(P);
        char buf[64];
        if (t->n >= sizeof buf)
            return perr(P, t->pos, "number literal too long");
        memcpy(buf, t->s, t->n);
        buf[t->n] = 0;
        jnode *n = node(P, memchr(t->s, '.', t->n) ? E_FLOAT : E_INT, t->pos);
        if (n)
            n->num = strtod(buf, NULL);
        return n;
    }
    case TK_STR: {
        advance(P);
        size_t total = t->n, k = 0;
        while (tok_at(P, k)->type == TK_STR)
            total += tok_at(P, k++)->n;
        jnode *n = node(P, E_STR, t->pos);
        if (!n)
            return NULL;
        if (!k) {
            n->s = t->s;
            n->n = t->n;
            return n;
        }
        char *s = ja_alloc(P->arena, total + 1);
        if (!s)
            return perr(P, t->pos, "out of memory");
        memcpy(s, t->s, t->n);
        size_t at = t->n;
        while (is(P, TK_STR)) { /* adjacent literals concatenate */
            memcpy(s + at, tok(P)->s, tok(P)->n);
            at += tok(P)->n;
            advance(P);
        }
        n->s = s;
        n->n = at;
        return n;
    }
    case TK_IDENT: {
        advance(P);
        jnode *n = node(P, E_IDENT, t->pos);
        if (n) {
            n->s = t->s;
            n->n = t->n;
        }
        return n;
    }
    case TK_LPAREN: {
        advance(P);
        jnode *e = parse_sequence(P, 0);
        if (!e || expect(P, TK_RPAREN, "')'"))
            return NULL;
        return e;
    }
    case TK_LBRACKET: {
        advance(P);
        nvec items = {0};
        while (!is(P, TK_RBRACKET)) {
            jnode *e = parse_expression(P);
            if (!e || nvec_push(P, &items, e))
                return NULL;
            if (is(P, TK_COMMA))
                advance(P);
        }
        advance(P);
        jnode *n = node(P, E_ARRAY, t->pos);
        if (n)
            n->body = nvec_list(&items);
        return n;
    }
    case TK_LBRACE: {
        advance(P);
        nvec items = {0};
        while (!is(P, TK_RBRACE)) {
            jnode *k = parse_expression(P);
            if (!k || expect(P, TK_COLON, "':' between key and value"))
                return NULL;
            jnode *v = parse_expression(P);
            if (!v || nvec_push(P, &items, k) || nvec_push(P, &items, v))
                return NULL;
            if (is(P, TK_COMMA))
                advance(P);
        }
        advance(P);
        jnode *n = node(P, E_OBJECT, t->pos);
        if (n)
            n->body = nvec_list(&items);
        return n;
    }
    default:
        return expected(P, "an expression");
    }
}

/* ------------------------------------------------------------------ statements */

/* 1 if the tokens at the cursor are "{% NAME" with NAME one of names (NULL-terminated). */
static int at_statement(const parser *P, const char *const *names) {
    if (!is(P, TK_OPEN_STMT) || tok_at(P, 1)->type != TK_IDENT)
        return 0;
    for (; *names; names++)
        if (tok_is(tok_at(P, 1), *names))
            return 1;
    return 0;
}

static const char *const block_words[] = {"endif", "endfor", "endmacro", "endcall", "endfilter", "endset", "elif", "else", NULL};

static size_t line_of(const parser *P, uint32_t pos) {
    size_t line = 1;
    for (uint32_t i = 0; i < pos && i < P->src_len; i++)
        line += P->src[i] == '\n';
    return line;
}

/* Parses statements until one of `names`; `opener` names the block for the errors. */
static int parse_block(parser *P, const char *const *names, const jtoken *opener, jlist *out) {
    nvec body = {0};
    while (!at_statement(P, names)) {
        if (at_statement(P, block_words)) {
            const jtoken *w = tok_at(P, 1);
            perr(P, w->pos, "unexpected '{%% %.*s %%}' inside the '{%% %.*s %%}' of line %zu (expected '{%% %s %%}')", (int)w->n,
                 w->s, (int)opener->n, opener->s, line_of(P, opener->pos), names[0]);
            return -1;
        }
        if (is(P, TK_EOF)) {
            perr(P, opener->pos, "unclosed '{%% %.*s %%}': no '{%% %s %%}' before the end of the template", (int)opener->n,
                 opener->s, names[0]);
            return -1;
        }
        jnode *n;
        if (parse_any(P, &n))
            return -1;
        if (n && nvec_push(P, &body, n))
            return -1;
    }
    *out = nvec_list(&body);
    return 0;
}

/* Consumes "{% NAME %}". */
static int expect_end(parser *P, const char *name) {
    if (expect(P, TK_OPEN_STMT, "'{%'"))
        return -1;
    if (!is_ident(P, name)) {
        char what[64];
        snprintf(what, sizeof what, "'%s'", name);
        expected(P, what);
        return -1;
    }
    advance(P);
    return expect(P, TK_CLOSE_STMT, "'%}'");
}

static jnode *parse_if(parser *P, const jtoken *kw) {
    static const char *const stop[] = {"endif", "elif", "else", NULL};
    static const char *const stop_else[] = {"endif", NULL};
    if (++P->depth > MAX_PARSE_DEPTH)
        return perr(P, kw->pos, "statements nested too deeply");
    jnode *n = node(P, N_IF, kw->pos);
    if (!n || !(n->a = parse_expression(P)) || expect(P, TK_CLOSE_STMT, "'%}'"))
        return NULL;
    if (parse_block(P, stop, kw, &n->body))
        return NULL;
    if (at_statement(P, (const char *const[]){"elif", NULL})) {
        advance(P);
        const jtoken *elif = tok(P);
        advance(P);
        jnode *nested = parse_if(P, elif);
        if (!nested)
            return NULL;
        nvec alt = {0};
        if (nvec_push(P, &alt, nested))
            return NULL;
        n->alt = nvec_list(&alt);
    } else if (at_statement(P, (const char *const[]){"else", NULL})) {
        advance(P);
        advance(P);
        if (expect(P, TK_CLOSE_STMT, "'%}'") || parse_block(P, stop_else, kw, &n->alt))
            return NULL;
    }
    P->depth--;
    return n;
}

static jnode *parse_for(parser *P, const jtoken *kw) {
    static const char *const stop[] = {"endfor", "else", NULL};
    static const char *const stop_else[] = {"endfor", NULL};
    jnode *n = node(P, N_FOR, kw->pos);
    if (!n || !(n->a = parse_sequence(P, 1)))
        return NULL;
    if (n->a->kind != E_IDENT && n->a->kind != E_TUPLE)
        return perr(P, n->a->pos, "expected a name or names for the loop variable");
    if (!is_ident(P, "in"))
        return expected(P, "'in' after the loop variable");
    advance(P);
    if (!(n->b = parse_expression(P)) || expect(P, TK_CLOSE_STMT, "'%}'"))
        return NULL;
    if (parse_block(P, stop, kw, &n->body))
        return NULL;
    if (at_statement(P, (const char *const[]){"else", NULL})) {
        advance(P);
        advance(P);
        if (expect(P, TK_CLOSE_STMT, "'%}'") || parse_block(P, stop_else, kw, &n->alt))
            return NULL;
    }
    if (expect_end(P, "endfor"))
        return NULL;
    return n;
}

static jnode *parse_set(parser *P, const jtoken *kw) {
    static const char *const stop[] = {"endset", NULL};
    jnode *n = node(P, N_SET, kw->pos);
    if (!n || !(n->a = parse_sequence(P, 0)))
        return NULL;
    if (is(P, TK_EQUALS)) {
        advance(P);
        if (!(n->b = parse_sequence(P, 0)))
            return NULL;
    } else {
        if (expect(P, TK_CLOSE_STMT, "'=' or '%}'") || parse_block(P, stop, kw, &n->body))
            return NULL;
        advance(P); /* {% */
        advance(P); /* endset */
    }
    if (expect(P, TK_CLOSE_STMT, "'%}'"))
        return NULL;
    return n;
}

/* Jinja binds `kwargs` / `varargs` in a macro whose body reads them before any
 * declaration of its own; this walk mirrors the reference's visit order. */
typedef struct special_scan {
    unsigned declared, accessed;
} special_scan;

static unsigned special_bit(const char *s, size_t n) {
    if (n == 6 && !memcmp(s, "kwargs", 6))
        return JSPECIAL_KWARGS;
    if (n == 7 && !memcmp(s, "varargs", 7))
        return JSPECIAL_VARARGS;
    return 0;
}

static void scan_declare_target(special_scan *S, const jnode *t) {
    if (!t)
        return;
    if (t->kind == E_IDENT)
        S->declared |= special_bit(t->s, t->n);
    else if (t->kind == E_TUPLE)
        for (size_t i = 0; i < t->body.n; i++)
            scan_declare_target(S, t->body.v[i]);
}

static void scan_node(special_scan *S, const jnode *n, unsigned depth);

static void scan_list(special_scan *S, const jlist *l, unsigned depth) {
    for (size_t i = 0; i < l->n; i++)
        scan_node(S, l->v[i], depth);
}

static void scan_params(special_scan *S, const jlist *params, unsigned depth, int declare_only) {
    for (size_t i = 0; i < params->n; i++) {
        const jnode *p = params->v[i];
        S->declared |= special_bit(p->s, p->n);
    }
    if (declare_only)
        return;
    for (size_t i = 0; i < params->n; i++)
        if (params->v[i]->kind == E_KWARG)
            scan_node(S, params->v[i]->a, depth);
}

static void scan_filter(special_scan *S, const jnode *f, unsigned depth) {
    if (f && f->kind == E_CALL)
        scan_list(S, &f->body, depth);
}

static void scan_node(special_scan *S, const jnode *n, unsigned depth) {
    if (!n || depth > 4 * MAX_PARSE_DEPTH)
        return;
    depth++;
    switch (n->kind) {
    case N_FOR:
        scan_declare_target(S, n->a);
        if (n->b && n->b->kind == E_SELECT) {
            scan_node(S, n->b->a, depth);
            scan_list(S, &n->body, depth);
            scan_list(S, &n->alt, depth);
            scan_node(S, n->b->b, depth);
        } else {
            scan_node(S, n->b, depth);
            scan_list(S, &n->body, depth);
            scan_list(S, &n->alt, depth);
        }
        return;
    case N_SET:
        scan_declare_target(S, n->a);
        scan_node(S, n->b, depth);
        scan_list(S, &n->body, depth);
        return;
    case N_MACRO:
        scan_params(S, &n->args, depth, 0);
        scan_list(S, &n->body, depth);
        return;
    case N_CALLBLOCK:
        scan_node(S, n->a, depth);
        scan_params(S, &n->args, depth, 0);
        scan_list(S, &n->body, depth);
        return;
    case N_FILTERBLOCK:
        scan_list(S, &n->body, depth);
        scan_filter(S, n->b, depth);
        return;
    case E_IDENT: {
        unsigned bit = special_bit(n->s, n->n);
        if (bit && !(S->declared & bit))
            S->accessed |= bit;
        return;
    }
    case E_MEMBER:
        scan_node(S, n->a, depth);
        if (n->flag)
            scan_node(S, n->b, depth);
        return;
    case E_FILTER:
        scan_node(S, n->a, depth);
        scan_filter(S, n->b, depth);
        return;
    case E_TEST:
        scan_node(S, n->a, depth);
        return;
    case E_SELECT:
        scan_node(S, n->b, depth);
        scan_node(S, n->a, depth);
        return;
    case E_KWARG:
        scan_node(S, n->a, depth);
        return;
    case E_TERNARY:
        scan_node(S, n->a, depth);
        scan_node(S, n->b, depth);
        scan_node(S, n->c, depth);
        return;
    default:
        scan_node(S, n->a, depth);
        scan_node(S, n->b, depth);
        scan_node(S, n->c, depth);
        scan_list(S, &n->body, depth);
        scan_list(S, &n->alt, depth);
        return;
    }
}

static uint8_t special_args(const jlist *params, const jlist *body) {
    special_scan S = {0, 0};
    scan_params(&S, params, 0, 1);
    scan_list(&S, body, 0);
    return (uint8_t)S.accessed;
}

static jnode *parse_macro(parser *P, const jtoken *kw) {
    static const char *const stop[] = {"endmacro", NULL};
    jnode *n = node(P, N_MACRO, kw->pos);
    jnode *name = n ? parse_primary(P) : NULL;
    if (!name)
        return NULL;
    if (name->kind != E_IDENT)
        return perr(P, name->pos, "expected a name after 'macro'");
    n->s = name->s;
    n->n = name->n;
    if (parse_args(P, 1, &n->args) || expect(P, TK_CLOSE_STMT, "'%}'") || parse_block(P, stop, kw, &n->body))
        return NULL;
    if (expect_end(P, "endmacro"))
        return NULL;
    n->special = special_args(&n->args, &n->body);
    return n;
}

static jnode *parse_callblock(parser *P, const jtoken *kw) {
    static const char *const stop[] = {"endcall", NULL};
    jnode *n = node(P, N_CALLBLOCK, kw->pos);
    if (!n)
        return NULL;
    if (is(P, TK_LPAREN) && parse_args(P, 1, &n->args))
        return NULL;
    jnode *callee = parse_primary(P);
    if (!callee)
        return NULL;
    if (callee->kind != E_IDENT)
        return perr(P, callee->pos, "expected a macro name after 'call'");
    jnode *call = node(P, E_CALL, callee->pos);
    if (!call || parse_args(P, 0, &call->body))
        return NULL;
    call->a = callee;
    n->a = call;
    if (expect(P, TK_CLOSE_STMT, "'%}'") || parse_block(P, stop, kw, &n->body) || expect_end(P, "endcall"))
        return NULL;
    n->special = special_args(&n->args, &n->body);
    return n;
}

static jnode *parse_filterblock(parser *P, const jtoken *kw) {
    static const char *const stop[] = {"endfilter", NULL};
    jnode *n = node(P, N_FILTERBLOCK, kw->pos);
    jnode *f = n ? parse_primary(P) : NULL;
    if (!f)
        return NULL;
    if (f->kind == E_IDENT && is(P, TK_LPAREN) && !(f = parse_call(P, f)))
        return NULL;
    n->b = f;
    if (expect(P, TK_CLOSE_STMT, "'%}'") || parse_block(P, stop, kw, &n->body) || expect_end(P, "endfilter"))
        return NULL;
    return n;
}

static jnode *parse_statement(parser *P) {
    advance(P); /* {% */
    const jtoken *kw = tok(P);
    if (kw->type != TK_IDENT)
        return expected(P, "a statement name after '{%'");
    if (++P->depth > MAX_PARSE_DEPTH)
        return perr(P, kw->pos, "statements nested too deeply");
    advance(P);
    jnode *n = NULL;
    if (tok_is(kw, "set"))
        n = parse_set(P, kw);
    else if (tok_is(kw, "if")) {
        n = parse_if(P, kw);
        if (n && expect_end(P, "endif"))
            n = NULL;
    } else if (tok_is(kw, "for"))
        n = parse_for(P, kw);
    else if (tok_is(kw, "macro"))
        n = parse_macro(P, kw);
    else if (tok_is(kw, "call"))
        n = parse_callblock(P, kw);
    else if (tok_is(kw, "filter"))
        n = parse_filterblock(P, kw);
    else if (tok_is(kw, "break") || tok_is(kw, "continue")) {
        n = node(P, tok_is(kw, "break") ? N_BREAK : N_CONTINUE, kw->pos);
        if (n && expect(P, TK_CLOSE_STMT, "'%}'"))
            n = NULL;
    } else {
        for (const char *const *w = block_words; *w; w++)
            if (tok_is(kw, *w))
                return perr(P, kw->pos, "unexpected '{%% %.*s %%}' outside the block it would close", (int)kw->n, kw->s);
        return perr(P, kw->pos, "unsupported statement '{%% %.*s %%}'", (int)kw->n, kw->s);
    }
    P->depth--;
    return n;
}

static int parse_any(parser *P, jnode **out) {
    *out = NULL;
    const jtoken *t = tok(P);
    switch (t->type) {
    case TK_COMMENT:
        advance(P);
        return 0;
    case TK_TEXT:
        advance(P);
        if (!(*out = node(P, N_TEXT, t->pos)))
            return -1;
        (*out)->s = t->s;
        (*out)->n = t->n;
        return 0;
    case TK_OPEN_STMT:
        return (*out = parse_statement(P)) ? 0 : -1;
    case TK_OPEN_EXPR:
        advance(P);
        if (!(*out = parse_expression(P)) || expect(P, TK_CLOSE_EXPR, "'}}'"))
            return -1;
        return 0;
    default:
        expected(P, "text, '{{' or '{%'");
        return -1;
    }
}

tern_err *jinja_parse(const char *name, const char *src, size_t len, const jtoken *toks, size_t count,
                      jarena *arena, jlist *out) {
    parser P = {.name = name, .src = src, .src_len = len, .t = toks, .count = count, .arena = arena};
    nvec body = {0};
    while (!is(&P, TK_EOF)) {
        jnode *n;
        if (parse_any(&P, &n))
            break;
        if (n && nvec_push(&P, &body, n))
            break;
    }
    if (P.err)
        return P.err;
    *out = nvec_list(&body);
    return NULL;
}
