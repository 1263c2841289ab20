/* jinja_eval.c — the interpreter: runs a template's syntax tree against a context.
 *
 * Semantics follow @huggingface/jinja, quirks included, because templates are written and
 * tested against it (and against Python Jinja, which it tracks):
 *  - scopes: a for loop opens one scope for all its iterations; macros see the variables
 *    of the place they are called from (dynamic scope); "set" writes the current scope;
 *    if-blocks open none;
 *  - break/continue discard the output of the iteration they leave, and a loop whose every
 *    iteration was left that way renders its else-block;
 *  - undefined values print nothing, most operations on them fail with an error;
 *  - == and != are JavaScript's loose equality; "in" over a list is strict equality;
 *  - arithmetic is on doubles, tagged integer or float like the reference's values.
 * Every evaluation step is counted and nesting is bounded (tern_jinja_limits). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

static jrc exec_block(jctx *c, const jlist *body, jenv *env, jbuf *out);

/* Counts a step and a nesting level; pair with LEAVE. */
static jrc enter(jctx *c, uint32_t pos) {
    if (++c->steps > c->lim.max_steps) {
        jx_fail(c, pos, "the template took more than %llu evaluation steps (limit)", (unsigned long long)c->lim.max_steps);
        if (c->err)
            c->err->code = TERN_EOVERLOAD;
        return JR_ERR;
    }
    if (++c->depth > c->lim.max_depth) {
        c->depth--;
        jx_fail(c, pos, "evaluation nested more than %u levels deep (runaway recursion?)", c->lim.max_depth);
        if (c->err)
            c->err->code = TERN_EOVERLOAD;
        return JR_ERR;
    }
    return JR_OK;
}
#define LEAVE(c) ((c)->depth--)

/* ------------------------------------------------------------------ scopes */

static jenv *new_env(jctx *c, uint32_t pos, jenv *parent) {
    jenv *e = jx_alloc(c, pos, sizeof *e);
    if (e)
        e->parent = parent;
    return e;
}

jrc jx_setvar(jctx *c, uint32_t pos, jenv *env, const char *name, size_t n, jv v) {
    for (jvar *x = env->vars; x; x = x->next)
        if (x->nlen == n && !memcmp(x->name, name, n)) {
            x->v = v;
            return JR_OK;
        }
    jvar *x = jx_alloc(c, pos, sizeof *x);
    if (!x)
        return JR_ERR;
    *x = (jvar){env->vars, name, n, v};
    env->vars = x;
    return JR_OK;
}

static jv builtin_fn(jctx *c, jbuiltin b) {
    jfunc *f = jx_alloc(c, 0, sizeof *f);
    if (!f)
        return jv_undef();
    f->kind = JF_BUILTIN;
    f->builtin = b;
    jv v = {JV_FUNC, {0}};
    v.u.f = f;
    return v;
}

/* Every scope of the reference starts with its own `namespace`; only the innermost
 * scope's matters, so an explicit variable there shadows the built-in. */
jv jx_lookup(const jctx *c, jenv *env, const char *name, size_t n) {
    int is_namespace = n == 9 && !memcmp(name, "namespace", 9);
    for (jenv *e = env; e; e = e->parent) {
        for (jvar *x = e->vars; x; x = x->next)
            if (x->nlen == n && !memcmp(x->name, name, n))
                return x->v;
        if (is_namespace)
            return c->namespace_fn;
    }
    return jv_undef();
}

/* ------------------------------------------------------------------ loop */

static const char *const loop_fields[] = {"index", "index0", "revindex", "revindex0", "first",
                                          "last",  "length", "previtem", "nextitem"};
#define LOOP_FIELDS (sizeof loop_fields / sizeof loop_fields[0])

/* Field k of loop_fields for the current iteration. */
static jv loop_field(const jloop *l, size_t k) {
    size_t i = l->i, n = l->n;
    switch (k) {
    case 0: return jv_int((double)i + 1);
    case 1: return jv_int((double)i);
    case 2: return jv_int((double)(n - i));
    case 3: return jv_int((double)(n - i - 1));
    case 4: return jv_bool(i == 0);
    case 5: return jv_bool(i + 1 == n);
    case 6: return jv_int((double)n);
    case 7: return i > 0 ? l->items[i - 1] : jv_undef();
    default: return i + 1 < n ? l->items[i + 1] : jv_undef();
    }
}

static int loop_field_index(const char *s, size_t n, size_t *k) {
    for (size_t i = 0; i < LOOP_FIELDS; i++)
        if (strlen(loop_fields[i]) == n && !memcmp(loop_fields[i], s, n)) {
            *k = i;
            return 1;
        }
    return 0;
}

/* The object form of this iteration's `loop` (built once per iteration). */
static jrc loop_object(jctx *c, uint32_t pos, jloop *l, jv *out) {
    if (!l->obj) {
        jobj *o = jv_new_obj(c, pos, LOOP_FIELDS);
        if (!o)
            return JR_ERR;
        for (size_t k = 0; k < LOOP_FIELDS; k++)
            o->kv[k] = (jkv){loop_fields[k], strlen(loop_fields[k]), loop_field(l, k)};
        o->n = LOOP_FIELDS;
        l->obj = o;
    }
    *out = jv_obj(l->obj, JV_OBJECT);
    return JR_OK;
}

/* ------------------------------------------------------------------ expressions */

jrc jx_eval_args(jctx *c, const jlist *args, jenv *env, jv **pos_out, size_t *npos, jobj **kwargs) {
    size_t cap = 0;
    for (size_t i = 0; i < args->n; i++)
        cap++;
    jv *pos = NULL;
    size_t n = 0;
    jrc rc;
    if (cap && !(pos = jx_alloc(c, args->v[0]->pos, (cap + 1) * sizeof *pos)))
        return JR_ERR;
    for (size_t i = 0; i < args->n; i++) {
        const jnode *a = args->v[i];
        if (a->kind == E_KWARG || a->kind == E_KWSPREAD)
            continue;
        jv v;
        if ((rc = jx_eval(c, a->kind == E_SPREAD ? a->a : a, env, &v)))
            return rc;
        if (a->kind != E_SPREAD) {
            pos[n++] = v;
            continue;
        }
        if (v.t != JV_ARRAY)
            return jx_fail(c, a->pos, "cannot unpack non-iterable type %s", jv_type_name(v));
        /* grow to fit the unpacked items */
        size_t need = n + v.u.a->n + (args->n - i) + 1;
        if (need > cap) {
            jv *np = jx_alloc(c, a->pos, need * sizeof *np);
            if (!np)
                return JR_ERR;
            if (n)
                memcpy(np, pos, n * sizeof *np);
            pos = np;
            cap = need;
        }
        for (size_t k = 0; k < v.u.a->n; k++)
            pos[n++] = v.u.a->items[k];
    }
    jobj *kw = jv_new_obj(c, 0, 0);
    if (!kw)
        return JR_ERR;
    kw->kwargs = 1;
    for (size_t i = 0; i < args->n; i++) {
        const jnode *a = args->v[i];
        if (a->kind == E_KWARG) {
            jv v;
            if ((rc = jx_eval(c, a->a, env, &v)))
                return rc;
            if (jobj_get(kw, a->s, a->n))
                return jx_fail(c, a->pos, "got multiple values for keyword argument '%.*s'", (int)a->n, a->s);
            if (jobj_set(c, a->pos, kw, a->s, a->n, v))
                return JR_ERR;
        } else if (a->kind == E_KWSPREAD) {
            jv v;
            if ((rc = jx_eval(c, a->a, env, &v)))
                return rc;
            if (v.t != JV_OBJECT)
                return jx_fail(c, a->pos, "argument after ** must be a mapping, not %s", jv_type_name(v));
            for (size_t k = 0; k < v.u.o->n; k++) {
                const jkv *e = &v.u.o->kv[k];
                if (jobj_get(kw, e->k, e->kn))
                    return jx_fail(c, a->pos, "got multiple values for keyword argument '%.*s'", (int)e->kn, e->k);
                if (jobj_set(c, a->pos, kw, e->k, e->kn, e->v))
                    return JR_ERR;
            }
        }
    }
    if (!pos && !(pos = jx_alloc(c, 0, sizeof *pos)))
        return JR_ERR;
    *pos_out = pos;
    *npos = n;
    *kwargs = kw;
    return JR_OK;
}

/* Binds a macro's (or call block's) parameters in `scope` and renders its body. */
static jrc call_macro(jctx *c, uint32_t pos, const char *what, const jnode *def, jv *args, size_t nargs,
                      jenv *scope, jv *out) {
    const jlist *params = &def->args;
    jobj *kw = NULL;
    if (nargs && args[nargs - 1].t == JV_OBJECT && args[nargs - 1].u.o->kwargs)
        kw = args[--nargs].u.o;
    unsigned char *used = NULL;
    if (kw && kw->n && !(used = jx_alloc(c, pos, kw->n)))
        return JR_ERR;
    jrc rc;
    for (size_t i = 0; i < params->n; i++) {
        const jnode *p = params->v[i];
        jv v = jv_undef();
        if (i < nargs)
            v = args[i];
        else if (kw) {
            for (size_t k = 0; k < kw->n; k++)
                if (!used[k] && kw->kv[k].kn == p->n && !memcmp(kw->kv[k].k, p->s, p->n)) {
                    v = kw->kv[k].v;
                    used[k] = 1;
                    break;
                }
        }
        if (jx_setvar(c, p->pos, scope, p->s, p->n, v))
            return JR_ERR;
    }
    size_t left = 0;
    for (size_t k = 0; kw && k < kw->n; k++)
        left += !used[k];
    if (def->special & JSPECIAL_KWARGS) {
        jobj *rest = jv_new_obj(c, pos, left);
        if (!rest)
            return JR_ERR;
        for (size_t k = 0; kw && k < kw->n; k++)
            if (!used[k] && jobj_set(c, pos, rest, kw->kv[k].k, kw->kv[k].kn, kw->kv[k].v))
                return JR_ERR;
        if (jx_setvar(c, pos, scope, "kwargs", 6, jv_obj(rest, JV_OBJECT)))
            return JR_ERR;
    } else if (left) {
        for (size_t k = 0; k < kw->n; k++)
            if (!used[k])
                return jx_fail(c, pos, "macro %s takes no keyword argument '%.*s'", what, (int)kw->kv[k].kn, kw->kv[k].k);
    }
    if (def->special & JSPECIAL_VARARGS) {
        size_t extra = nargs > params->n ? nargs - params->n : 0;
        jarr *va = jv_new_arr(c, pos, extra);
        if (!va)
            return JR_ERR;
        for (size_t k = 0; k < extra; k++)
            va->items[k] = args[params->n + k];
        if (jx_setvar(c, pos, scope, "varargs", 7, jv_arr(va)))
            return JR_ERR;
    } else if (nargs > params->n)
        return jx_fail(c, pos, "macro %s takes not more than %zu argument(s)", what, params->n);
    /* defaults last, so they see every parameter bound */
    for (size_t i = 0; i < params->n; i++) {
        const jnode *p = params->v[i];
        if (p->kind != E_KWARG || i < nargs)
            continue;
        int given = 0;
        for (size_t k = 0; kw && k < kw->n; k++)
            if (used[k] && kw->kv[k].kn == p->n && !memcmp(kw->kv[k].k, p->s, p->n))
                given = 1;
        if (given)
            continue;
        jv v;
        if ((rc = jx_eval(c, p->a, scope, &v)))
            return rc;
        if (jx_setvar(c, p->pos, scope, p->s, p->n, v))
            return JR_ERR;
    }
    jbuf buf = {0};
    rc = exec_block(c, &def->body, scope, &buf);
    if (rc) {
        jb_free(&buf);
        return rc;
    }
    return jb_take(c, pos, &buf, out);
}

jrc jx_call(jctx *c, uint32_t pos, jv fn, jv *args, size_t nargs, jenv *env, jv *out) {
    if (fn.t != JV_FUNC)
        return jx_fail(c, pos, "cannot call something that is not a function: got %s", jv_type_name(fn));
    const jfunc *f = fn.u.f;
    if (f->kind == JF_BUILTIN)
        return jx_call_builtin(c, pos, f, args, nargs, env, out);
    jrc rc;
    if ((rc = enter(c, pos)))
        return rc;
    jenv *scope = new_env(c, pos, f->kind == JF_CALLER ? f->env : env);
    if (!scope)
        rc = JR_ERR;
    else if (f->kind == JF_MACRO) {
        char what[160];
        snprintf(what, sizeof what, "'%.*s'", (int)(f->node->n > 128 ? 128 : f->node->n), f->node->s);
        rc = call_macro(c, pos, what, f->node, args, nargs, scope, out);
    } else
        rc = call_macro(c, pos, "None", f->node, args, nargs, scope, out);
    LEAVE(c);
    return rc;
}

static jrc eval_call(jctx *c, const jnode *n, jenv *env, jv *out) {
    jv *args, fn;
    size_t nargs;
    jobj *kw;
    jrc rc;
    if ((rc = jx_eval_args(c, &n->body, env, &args, &nargs, &kw)))
        return rc;
    if (kw->n)
        args[nargs++] = jv_obj(kw, JV_OBJECT);
    if ((rc = jx_eval(c, n->a, env, &fn)))
        return rc;
    const jnode *callee = n->a;
    if (fn.t != JV_FUNC && (callee->kind == E_IDENT || (callee->kind == E_MEMBER && !callee->flag && callee->b->kind == E_IDENT))) {
        const jnode *name = callee->kind == E_IDENT ? callee : callee->b;
        return jx_fail(c, n->pos, "cannot call '%.*s': not a function (got %s)", (int)(name->n > 64 ? 64 : name->n), name->s,
                       jv_type_name(fn));
    }
    return jx_call(c, n->pos, fn, args, nargs, env, out);
}

/* Code point offsets of a string (n + 1 entries, the last = byte length). */
static size_t *cp_offsets(jctx *c, uint32_t pos, const char *s, size_t n, size_t *count) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    size_t *off = jx_alloc(c, pos, (k + 1) * sizeof *off);
    if (!off)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            off[j++] = i;
    off[k] = n;
    *count = k;
    return off;
}

/* Python-style slice bounds as the reference computes them (utils.slice). */
static void slice_bounds(long long len, const jv *start, const jv *stop, long long step, long long *s, long long *e) {
    double a, b;
    if (step > 0) {
        a = start->t == JV_UNDEF ? 0 : start->u.num;
        b = stop->t == JV_UNDEF ? (double)len : stop->u.num;
        a = a < 0 ? fmax(len + a, 0) : fmin(a, (double)len);
        b = b < 0 ? fmax(len + b, 0) : fmin(b, (double)len);
    } else {
        a = start->t == JV_UNDEF ? (double)(len - 1) : start->u.num;
        b = stop->t == JV_UNDEF ? -1 : stop->u.num;
        a = a < 0 ? fmax(len + a, -1) : fmin(a, (double)(len - 1));
        b = b < -1 ? fmax(len + b, -1) : fmin(b, (double)(len - 1));
    }
    *s = isnan(a) ? 0 : (long long)a;
    *e = isnan(b) ? 0 : (long long)b;
}

static jrc eval_slice(jctx *c, jv obj, const jnode *sl, jenv *env, jv *out) {
    if (obj.t != JV_ARRAY && obj.t != JV_STR)
        return jx_fail(c, sl->pos, "slice object must be an array or string, not %s", jv_type_name(obj));
    jv parts[3] = {jv_undef(), jv_undef(), jv_undef()};
    const jnode *nodes[3] = {sl->a, sl->b, sl->c};
    static const char *const names[3] = {"start", "stop", "step"};
    jrc rc;
    for (int i = 0; i < 3; i++) {
        if (nodes[i] && (rc = jx_eval(c, nodes[i], env, &parts[i])))
            return rc;
        if (parts[i].t != JV_INT && parts[i].t != JV_UNDEF)
            return jx_fail(c, sl->pos, "slice %s must be an integer or undefined, not %s", names[i], jv_type_name(parts[i]));
    }
    size_t *off = NULL, len;
    if (jx_charge(c, sl->pos, obj.t == JV_STR ? obj.u.s.n >> 6 : obj.u.a->n >> 6))
        return JR_ERR;
    if (obj.t == JV_ARRAY)
        len = obj.u.a->n;
    else if (!(off = cp_offsets(c, sl->pos, obj.u.s.p, obj.u.s.n, &len)))
        return JR_ERR;
    double stepd = parts[2].t == JV_UNDEF ? 1 : parts[2].u.num;
    if (isnan(stepd))
        stepd = 0;
    long long L = (long long)len;
    long long step = stepd > L + 1 ? L + 1 : stepd < -L - 1 ? -L - 1 : (long long)stepd;
    if (step == 0 && stepd != 0)
        step = stepd > 0 ? 1 : -1;
    long long s = 0, e = 0, count = 0;
    if (step != 0) {
        slice_bounds(L, &parts[0], &parts[1], step, &s, &e);
        for (long long i = s; step > 0 ? i < e : i > e; i += step)
            count++;
    }
    if (obj.t == JV_ARRAY) {
        jarr *a = jv_new_arr(c, sl->pos, (size_t)count);
        if (!a)
            return JR_ERR;
        long long k = 0;
        for (long long i = s; k < count; i += step)
            a->items[k++] = obj.u.a->items[i];
        *out = jv_arr(a);
        return JR_OK;
    }
    if (step == 1) { /* a contiguous run: share the bytes */
        *out = count ? jv_str(obj.u.s.p + off[s], off[e] - off[s]) : jv_str("", 0);
        return JR_OK;
    }
    char *d = jx_alloc(c, sl->pos, obj.u.s.n + 1);
    if (!d)
        return JR_ERR;
    size_t dn = 0;
    long long k = 0;
    for (long long i = s; k < count; i += step, k++) {
        memcpy(d + dn, obj.u.s.p + off[i], off[i + 1] - off[i]);
        dn += off[i + 1] - off[i];
    }
    *out = jv_str(d, dn);
    return JR_OK;
}

/* Array.prototype.at / String.prototype.at (UTF-16 indexing). */
static jrc index_at(jctx *c, uint32_t pos, jv obj, double idx, jv *out) {
    *out = jv_undef();
    double k = isnan(idx) ? 0 : trunc(idx);
    if (obj.t == JV_ARRAY) {
        double n = (double)obj.u.a->n;
        if (k < 0)
            k += n;
        if (k >= 0 && k < n)
            *out = obj.u.a->items[(size_t)k];
        return JR_OK;
    }
    const char *s = obj.u.s.p;
    size_t n = obj.u.s.n;
    if (jx_charge(c, pos, n >> 5))
        return JR_ERR;
    double units = (double)jt_utf16_len(s, n);
    if (k < 0)
        k += units;
    if (!(k >= 0 && k < units))
        return JR_OK;
    size_t want = (size_t)k, unit = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t cp = tern_utf8_decode_loose((const unsigned char *)s + i, n - i, &len);
        size_t w = cp >= 0x10000 ? 2 : 1;
        if (want < unit + w) {
            if (w == 2)
                return jx_fail(c, pos, "unsupported: indexing into the middle of a character outside the BMP");
            *out = jv_str(s + i, len);
            return JR_OK;
        }
        unit += w;
        i += len;
    }
    return JR_OK;
}

static jrc eval_member(jctx *c, const jnode *n, jenv *env, jv *out) {
    jv obj, prop;
    jrc rc;
    if (n->a->kind == E_IDENT) /* `loop.index` reads the loop state without building an object */
        obj = jx_lookup(c, env, n->a->s, n->a->n);
    else if ((rc = jx_eval(c, n->a, env, &obj)))
        return rc;
    if (n->flag) {
        if (n->b->kind == E_SLICE)
            return eval_slice(c, obj, n->b, env, out);
        if ((rc = jx_eval(c, n->b, env, &prop)))
            return rc;
    } else if (n->b->kind == E_INT)
        prop = jv_int(n->b->num);
    else
        prop = jv_str(n->b->s, n->b->n);
    *out = jv_undef();
    if (obj.t == JV_LOOP) {
        size_t k;
        if (prop.t == JV_STR && loop_field_index(prop.u.s.p, prop.u.s.n, &k)) {
            *out = loop_field(obj.u.l, k);
            return JR_OK;
        }
        if (loop_object(c, n->pos, obj.u.l, &obj))
            return JR_ERR;
    }
    int oom = 0;
    if (obj.t == JV_OBJECT || obj.t == JV_NS) {
        if (prop.t != JV_STR)
            return jx_fail(c, n->pos, "cannot access a property with a non-string key: got %s", jv_type_name(prop));
        jv *v = jobj_get(obj.u.o, prop.u.s.p, prop.u.s.n);
        if (v)
            *out = *v;
        else if (obj.t == JV_OBJECT)
            *out = jx_builtin_member(c, obj, prop.u.s.p, prop.u.s.n, &oom);
    } else if (obj.t == JV_ARRAY || obj.t == JV_STR) {
        if (prop.t == JV_INT)
            return index_at(c, n->pos, obj, prop.u.num, out);
        if (prop.t != JV_STR)
            return jx_fail(c, n->pos, "cannot access a property with a %s key", jv_type_name(prop));
        *out = jx_builtin_member(c, obj, prop.u.s.p, prop.u.s.n, &oom);
    } else if (prop.t != JV_STR)
        return jx_fail(c, n->pos, "cannot access a property with a non-string key: got %s", jv_type_name(prop));
    return oom ? jx_fail(c, n->pos, "out of memory") : JR_OK;
}

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT; }
static int is_numlike(jv v) { return is_num(v) || v.t == JV_BOOL; }
static double numval(jv v) { return v.t == JV_BOOL ? v.u.b : v.u.num; }

static const char *op_name(jop op) {
    switch (op) {
    case OP_EQ: return "==";
    case OP_NE: return "!=";
    case OP_LT: return "<";
    case OP_GT: return ">";
    case OP_LE: return "<=";
    case OP_GE: return ">=";
    case OP_IN: return "in";
    case OP_NOTIN: return "not in";
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_CONCAT: return "~";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "**";
    default: return "?";
    }
}

/* raw(a) + raw(b) as a new string. */
static jrc concat(jctx *c, uint32_t pos, jv a, jv b, jv *out) {
    jbuf buf = {0};
    if (jv_raw_string(c, pos, a, &buf) || jv_raw_string(c, pos, b, &buf)) {
        jb_free(&buf);
        return JR_ERR;
    }
    return jb_take(c, pos, &buf, out);
}

static int str_contains(jv hay, jv needle) { return jt_find(hay.u.s.p, hay.u.s.n, needle.u.s.p, needle.u.s.n) != NULL; }

static jrc eval_binary(jctx *c, const jnode *n, jenv *env, jv *out) {
    jv l, r;
    jrc rc;
    if ((rc = jx_eval(c, n->a, env, &l)))
        return rc;
    if (n->op == OP_AND)
        return jv_truthy(l) ? jx_eval(c, n->b, env, out) : (*out = l, JR_OK);
    if (n->op == OP_OR)
        return jv_truthy(l) ? (*out = l, JR_OK) : jx_eval(c, n->b, env, out);
    if ((rc = jx_eval(c, n->b, env, &r)))
        return rc;
    jop op = n->op;
    if (op == OP_EQ || op == OP_NE) {
        int eq;
        if (jv_loose_eq(c, n->pos, l, r, &eq))
            return JR_ERR;
        *out = jv_bool(op == OP_EQ ? eq : !eq);
        return JR_OK;
    }
    if (l.t == JV_UNDEF || r.t == JV_UNDEF) {
        if (r.t == JV_UNDEF && (op == OP_IN || op == OP_NOTIN)) {
            *out = jv_bool(op == OP_NOTIN);
            return JR_OK;
        }
        return jx_fail(c, n->pos, "cannot perform operation '%s' on undefined values", op_name(op));
    }
    if (l.t == JV_NULL || r.t == JV_NULL)
        return jx_fail(c, n->pos, "cannot perform operation '%s' on null values", op_name(op));
    if (op == OP_CONCAT)
        return concat(c, n->pos, l, r, out);
    if (op == OP_POW && is_numlike(l) && is_numlike(r)) {
        double a = numval(l), b = numval(r);
        if (a == 0 && b < 0)
            return jx_fail(c, n->pos, "0.0 cannot be raised to a negative power");
        double p = pow(a, b);
        if (!isfinite(p))
            return jx_fail(c, n->pos, "exponentiation result is not a finite real number");
        *out = (l.t == JV_FLOAT || r.t == JV_FLOAT || b < 0) ? jv_float(p) : jv_int(p);
        return JR_OK;
    }
    if (is_num(l) && is_num(r)) {
        double a = l.u.num, b = r.u.num;
        int fl = l.t == JV_FLOAT || r.t == JV_FLOAT;
        switch (op) {
        case OP_ADD: *out = fl ? jv_float(a + b) : jv_int(a + b); return JR_OK;
        case OP_SUB: *out = fl ? jv_float(a - b) : jv_int(a - b); return JR_OK;
        case OP_MUL: *out = fl ? jv_float(a * b) : jv_int(a * b); return JR_OK;
        case OP_DIV: *out = jv_float(a / b); return JR_OK;
        case OP_FLOORDIV: *out = fl ? jv_float(floor(a / b)) : jv_int(floor(a / b)); return JR_OK;
        case OP_MOD: *out = fl ? jv_float(fmod(a, b)) : jv_int(fmod(a, b)); return JR_OK;
        case OP_LT: *out = jv_bool(a < b); return JR_OK;
        case OP_GT: *out = jv_bool(a > b); return JR_OK;
        case OP_GE: *out = jv_bool(a >= b); return JR_OK;
        case OP_LE: *out = jv_bool(a <= b); return JR_OK;
        default: break;
        }
    } else if (l.t == JV_ARRAY && r.t == JV_ARRAY) {
        if (op == OP_ADD) {
            jarr *a = jv_new_arr(c, n->pos, l.u.a->n + r.u.a->n);
            if (!a)
                return JR_ERR;
            if (l.u.a->n)
                memcpy(a->items, l.u.a->items, l.u.a->n * sizeof(jv));
            if (r.u.a->n)
                memcpy(a->items + l.u.a->n, r.u.a->items, r.u.a->n * sizeof(jv));
            *out = jv_arr(a);
            return JR_OK;
        }
    } else if (r.t == JV_ARRAY && (op == OP_IN || op == OP_NOTIN)) {
        int found = 0;
        for (size_t i = 0; i < r.u.a->n && !found; i++)
            found = jv_strict_eq(r.u.a->items[i], l);
        *out = jv_bool(op == OP_IN ? found : !found);
        return JR_OK;
    }
    if ((l.t == JV_STR || r.t == JV_STR) && op == OP_ADD)
        return concat(c, n->pos, l, r, out);
    if (l.t == JV_STR && r.t == JV_STR && (op == OP_IN || op == OP_NOTIN)) {
        if (jx_charge(c, n->pos, r.u.s.n >> 6))
            return JR_ERR;
        int found = str_contains(r, l);
        *out = jv_bool(op == OP_IN ? found : !found);
        return JR_OK;
    }
    if (l.t == JV_STR && r.t == JV_OBJECT && (op == OP_IN || op == OP_NOTIN)) {
        int found = jobj_get(r.u.o, l.u.s.p, l.u.s.n) != NULL;
        *out = jv_bool(op == OP_IN ? found : !found);
        return JR_OK;
    }
    return jx_fail(c, n->pos, "unsupported operator '%s' between %s and %s", op_name(op), jv_type_name(l), jv_type_name(r));
}

jrc jx_eval(jctx *c, const jnode *n, jenv *env, jv *out) {
    jrc rc;
    if ((rc = enter(c, n->pos)))
        return rc;
    *out = jv_undef();
    switch (n->kind) {
    case E_INT: *out = jv_int(n->num); break;
    case E_FLOAT: *out = jv_float(n->num); break;
    case E_STR: *out = jv_str(n->s, n->n); break;
    case E_IDENT:
        *out = jx_lookup(c, env, n->s, n->n);
        if (out->t == JV_LOOP)
            rc = loop_object(c, n->pos, out->u.l, out);
        break;
    case E_ARRAY:
    case E_TUPLE: {
        jarr *a = jv_new_arr(c, n->pos, n->body.n);
        if (!a) {
            rc = JR_ERR;
            break;
        }
        a->tuple = n->kind == E_TUPLE;
        for (size_t i = 0; i < n->body.n && !rc; i++)
            rc = jx_eval(c, n->body.v[i], env, &a->items[i]);
        *out = jv_arr(a);
        break;
    }
    case E_OBJECT: {
        jobj *o = jv_new_obj(c, n->pos, n->body.n / 2);
        if (!o) {
            rc = JR_ERR;
            break;
        }
        for (size_t i = 0; i + 1 < n->body.n && !rc; i += 2) {
            jv k, v;
            if ((rc = jx_eval(c, n->body.v[i], env, &k)))
                break;
            if (k.t != JV_STR) {
                rc = jx_fail(c, n->body.v[i]->pos, "object keys must be strings: got %s", jv_type_name(k));
                break;
            }
            if (!(rc = jx_eval(c, n->body.v[i + 1], env, &v)))
                rc = jobj_set(c, n->pos, o, k.u.s.p, k.u.s.n, v);
        }
        *out = jv_obj(o, JV_OBJECT);
        break;
    }
    case E_MEMBER: rc = eval_member(c, n, env, out); break;
    case E_CALL: rc = eval_call(c, n, env, out); break;
    case E_UNARY: {
        jv a;
        if ((rc = jx_eval(c, n->a, env, &a)))
            break;
        if (n->op == OP_NOT)
            *out = jv_bool(!jv_truthy(a));
        else if (is_numlike(a)) {
            double v = (n->op == OP_NEG ? -1 : 1) * numval(a);
            *out = a.t == JV_FLOAT ? jv_float(v) : jv_int(v);
        } else
            rc = jx_fail(c, n->pos, "unsupported operator '%s' for %s", n->op == OP_NEG ? "-" : "+", jv_type_name(a));
        break;
    }
    case E_BINARY: rc = eval_binary(c, n, env, out); break;
    case E_FILTER: {
        jv a;
        if (!(rc = jx_eval(c, n->a, env, &a)))
            rc = jx_apply_filter(c, a, n->b, env, out);
        break;
    }
    case E_TEST: {
        jv a;
        int res;
        if (!(rc = jx_eval(c, n->a, env, &a)) && !(rc = jx_test(c, n->pos, n->s, n->n, a, NULL, &res)))
            *out = jv_bool(n->flag ? !res : res);
        break;
    }
    case E_SELECT: {
        jv t;
        if (!(rc = jx_eval(c, n->b, env, &t)) && jv_truthy(t))
            rc = jx_eval(c, n->a, env, out);
        break;
    }
    case E_TERNARY: {
        jv t;
        if (!(rc = jx_eval(c, n->a, env, &t)))
            rc = jx_eval(c, jv_truthy(t) ? n->b : n->c, env, out);
        break;
    }
    default:
        rc = jx_fail(c, n->pos, "this expression is not allowed here");
        break;
    }
    LEAVE(c);
    return rc;
}

/* ------------------------------------------------------------------ statements */

/* Binds a loop variable (a name or a tuple of names) to one item. */
static jrc bind_target(jctx *c, const jnode *target, jv item, jenv *scope) {
    if (target->kind == E_IDENT)
        return jx_setvar(c, target->pos, scope, target->s, target->n, item);
    const jarr *a = item.u.a;
    for (size_t j = 0; j < target->body.n; j++) {
        const jnode *t = target->body.v[j];
        if (t->kind != E_IDENT)
            return jx_fail(c, t->pos, "cannot unpack into something that is not a name");
        if (jx_setvar(c, t->pos, scope, t->s, t->n, a->items[j]))
            return JR_ERR;
    }
    return JR_OK;
}

static jrc exec_for(jctx *c, const jnode *n, jenv *env, jbuf *out) {
    jenv *scope = new_env(c, n->pos, env);
    if (!scope)
        return JR_ERR;
    const jnode *test = NULL;
    jv it;
    jrc rc;
    if (n->b->kind == E_SELECT) {
        test = n->b->b;
        rc = jx_eval(c, n->b->a, scope, &it);
    } else
        rc = jx_eval(c, n->b, scope, &it);
    if (rc)
        return rc;
    if (it.t == JV_OBJECT) {
        if (jx_obj_keys(c, n->pos, it.u.o, &it))
            return JR_ERR;
    } else if (it.t != JV_ARRAY)
        return jx_fail(c, n->b->pos, "expected an iterable or object in the for loop, got %s", jv_type_name(it));
    const jarr *src = it.u.a;
    const jnode *target = n->a;
    /* select the items first (the reference does), checking tuple targets as it goes */
    jv *items = jx_alloc(c, n->pos, (src->n + 1) * sizeof *items);
    if (!items)
        return JR_ERR;
    size_t count = 0;
    for (size_t i = 0; i < src->n; i++) {
        jv cur = src->items[i];
        if (target->kind == E_TUPLE) {
            if (cur.t != JV_ARRAY || cur.u.a->tuple)
                return jx_fail(c, target->pos, "cannot unpack non-iterable type %s", jv_type_name(cur));
            if (cur.u.a->n != target->body.n)
                return jx_fail(c, target->pos, "too %s items to unpack", target->body.n > cur.u.a->n ? "few" : "many");
        }
        if (test) {
            jenv *ls = new_env(c, n->pos, scope);
            jv keep;
            if (!ls || bind_target(c, target, cur, ls))
                return JR_ERR;
            if ((rc = jx_eval(c, test, ls, &keep)))
                return rc;
            if (!jv_truthy(keep))
                continue;
        }
        items[count++] = cur;
    }
    int rendered = 0;
    jloop *state = jx_alloc(c, n->pos, sizeof *state);
    if (!state)
        return JR_ERR;
    *state = (jloop){0, count, items, NULL};
    jv loopv = {JV_LOOP, {0}};
    loopv.u.l = state;
    for (size_t i = 0; i < count; i++) {
        if ((rc = enter(c, n->pos)))
            return rc;
        LEAVE(c);
        state->i = i;
        state->obj = NULL; /* each iteration has its own loop object */
        if (jx_setvar(c, n->pos, scope, "loop", 4, loopv) || bind_target(c, target, items[i], scope))
            return JR_ERR;
        size_t mark = out->n;
        rc = exec_block(c, &n->body, scope, out);
        if (rc == JR_CONTINUE) {
            out->n = mark;
            continue;
        }
        if (rc == JR_BREAK) {
            out->n = mark;
            break;
        }
        if (rc)
            return rc;
        rendered = 1;
    }
    if (!rendered)
        return exec_block(c, &n->alt, scope, out);
    return JR_OK;
}

static jrc exec_set(jctx *c, const jnode *n, jenv *env) {
    jv rhs;
    jrc rc;
    if (n->b)
        rc = jx_eval(c, n->b, env, &rhs);
    else {
        jbuf buf = {0};
        rc = exec_block(c, &n->body, env, &buf);
        if (!rc)
            rc = jb_take(c, n->pos, &buf, &rhs);
        jb_free(&buf);
    }
    if (rc)
        return rc;
    const jnode *t = n->a;
    switch (t->kind) {
    case E_IDENT: return jx_setvar(c, t->pos, env, t->s, t->n, rhs);
    case E_TUPLE:
        if (rhs.t != JV_ARRAY)
            return jx_fail(c, n->pos, "cannot unpack non-iterable type in set: %s", jv_type_name(rhs));
        if (rhs.u.a->n != t->body.n)
            return jx_fail(c, n->pos, "too %s items to unpack in set", t->body.n > rhs.u.a->n ? "few" : "many");
        for (size_t i = 0; i < t->body.n; i++) {
            const jnode *e = t->body.v[i];
            if (e->kind != E_IDENT)
                return jx_fail(c, e->pos, "cannot unpack to something that is not a name in set");
            if (jx_setvar(c, e->pos, env, e->s, e->n, rhs.u.a->items[i]))
                return JR_ERR;
        }
        return JR_OK;
    case E_MEMBER: {
        jv obj;
        if ((rc = jx_eval(c, t->a, env, &obj)))
            return rc;
        if (obj.t != JV_NS)
            return jx_fail(c, t->pos, "cannot assign an attribute of a %s (only of a namespace)", jv_type_name(obj));
        if (t->b->kind != E_IDENT)
            return jx_fail(c, t->pos, "cannot assign to a member that is not a name");
        return jobj_set(c, t->pos, obj.u.o, t->b->s, t->b->n, rhs);
    }
    default:
        return jx_fail(c, t->pos, "invalid target of set");
    }
}

static jrc emit(jctx *c, uint32_t pos, jv v, jbuf *out) {
    if (v.t == JV_NULL || v.t == JV_UNDEF)
        return JR_OK;
    return jv_display(c, pos, v, out);
}

static jrc exec_node(jctx *c, const jnode *n, jenv *env, jbuf *out) {
    jrc rc;
    jv v;
    switch (n->kind) {
    case N_TEXT: return jb_put(c, n->pos, out, n->s, n->n);
    case N_IF:
        if ((rc = jx_eval(c, n->a, env, &v)))
            return rc;
        return exec_block(c, jv_truthy(v) ? &n->body : &n->alt, env, out);
    case N_FOR: return exec_for(c, n, env, out);
    case N_SET: return exec_set(c, n, env);
    case N_MACRO: {
        jfunc *f = jx_alloc(c, n->pos, sizeof *f);
        if (!f)
            return JR_ERR;
        f->kind = JF_MACRO;
        f->node = n;
        jv fv = {JV_FUNC, {0}};
        fv.u.f = f;
        return jx_setvar(c, n->pos, env, n->s, n->n, fv);
    }
    case N_CALLBLOCK: {
        jfunc *f = jx_alloc(c, n->pos, sizeof *f);
        if (!f)
            return JR_ERR;
        f->kind = JF_CALLER;
        f->node = n;
        f->env = env;
        jv caller = {JV_FUNC, {0}}, fn, *args;
        caller.u.f = f;
        size_t nargs;
        jobj *kw;
        if ((rc = jx_eval_args(c, &n->a->body, env, &args, &nargs, &kw)))
            return rc;
        args[nargs++] = jv_obj(kw, JV_OBJECT);
        if ((rc = jx_eval(c, n->a->a, env, &fn)))
            return rc;
        if (fn.t != JV_FUNC)
            return jx_fail(c, n->a->pos, "cannot call something that is not a function: got %s", jv_type_name(fn));
        jenv *inner = new_env(c, n->pos, env);
        if (!inner || jx_setvar(c, n->pos, inner, "caller", 6, caller))
            return JR_ERR;
        if ((rc = jx_call(c, n->a->pos, fn, args, nargs, inner, &v)))
            return rc;
        return emit(c, n->pos, v, out);
    }
    case N_FILTERBLOCK: {
        jbuf buf = {0};
        rc = exec_block(c, &n->body, env, &buf);
        if (!rc)
            rc = jb_take(c, n->pos, &buf, &v);
        jb_free(&buf);
        if (rc || (rc = jx_apply_filter(c, v, n->b, env, &v)))
            return rc;
        return emit(c, n->pos, v, out);
    }
    case N_BREAK: return JR_BREAK;
    case N_CONTINUE: return JR_CONTINUE;
    default:
        if ((rc = jx_eval(c, n, env, &v)))
            return rc;
        return emit(c, n->pos, v, out);
    }
}

static jrc exec_block(jctx *c, const jlist *body, jenv *env, jbuf *out) {
    for (size_t i = 0; i < body->n; i++) {
        const jnode *n = body->v[i];
        jrc rc;
        if ((rc = enter(c, n->pos)))
            return rc;
        rc = exec_node(c, n, env, out);
        LEAVE(c);
        if (rc) {
            if (rc == JR_BREAK || rc == JR_CONTINUE)
                c->ctrl_pos = n->pos;
            return rc;
        }
    }
    return JR_OK;
}

/* ------------------------------------------------------------------ entry point */

static const char *const global_names[] = {"false", "true", "none", "raise_exception", "range", "strftime_now",
                                           "True", "False", "None", "namespace"};

tern_err *tern_jinja_render(const tern_jinja *tpl, const json_t *context, const tern_jinja_limits *limits,
                            char **out, size_t *out_len) {
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!tpl)
        return tern_errf(TERN_EINVAL, "tern_jinja_render: no template");
    if (context && !json_is_object(context))
        return tern_errf(TERN_EINVAL, "%s: the render context must be a JSON object", tpl->name);
    jctx c = {.tpl = tpl};
    if (limits)
        c.lim = *limits;
    if (!c.lim.max_output)
        c.lim.max_output = (size_t)64 << 20;
    if (!c.lim.max_memory)
        c.lim.max_memory = (size_t)512 << 20;
    if (!c.lim.max_steps)
        c.lim.max_steps = 100000000ull;
    if (!c.lim.max_depth)
        c.lim.max_depth = 400;
    c.arena.cap = c.lim.max_memory;

    jbuf buf = {0};
    jenv *global = new_env(&c, 0, NULL);
    if (!global)
        goto done;
    c.namespace_fn = builtin_fn(&c, JB_NAMESPACE);
    if (c.namespace_fn.t != JV_FUNC)
        goto done;
    struct {
        const char *name;
        jv v;
    } globals[] = {
        {"false", jv_bool(0)}, {"true", jv_bool(1)}, {"none", jv_null()},
        {"raise_exception", builtin_fn(&c, JB_RAISE)}, {"range", builtin_fn(&c, JB_RANGE)},
        {"strftime_now", builtin_fn(&c, JB_STRFTIME)},
        {"True", jv_bool(1)}, {"False", jv_bool(0)}, {"None", jv_null()},
    };
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (c.err || jx_setvar(&c, 0, global, globals[i].name, strlen(globals[i].name), globals[i].v))
            goto done;
    for (void *it = context ? json_object_iter((json_t *)context) : NULL; it;
         it = json_object_iter_next((json_t *)context, it)) {
        const char *key = json_object_iter_key(it);
#if JANSSON_VERSION_HEX >= 0x020e00
        size_t kn = json_object_iter_key_len(it);
#else
        size_t kn = strlen(key);
#endif
        for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++)
            if (kn == strlen(global_names[i]) && !memcmp(key, global_names[i], kn)) {
                c.err = tern_errf(TERN_EINVAL, "%s: the context variable '%s' would redefine a built-in", tpl->name, key);
                goto done;
            }
        jv v;
        if (jv_from_json(&c, json_object_iter_value(it), 0, &v) || jx_setvar(&c, 0, global, key, kn, v))
            goto done;
    }
    jrc rc = exec_block(&c, &tpl->body, global, &buf);
    if (rc == JR_BREAK || rc == JR_CONTINUE)
        jx_fail(&c, c.ctrl_pos, "'%s' outside a for loop", rc == JR_BREAK ? "break" : "continue");
    else if (rc == JR_OK) {
        if (jb_put(&c, 0, &buf, "", 0) || !(*out = malloc(buf.n + 1))) {
            if (!c.err)
                c.err = tern_errf(TERN_ENOMEM, "%s: out of memory", tpl->name);
            goto done;
        }
        if (buf.n)
            memcpy(*out, buf.p, buf.n);
        (*out)[buf.n] = 0;
        if (out_len)
            *out_len = buf.n;
    }
done:
    jb_free(&buf);
    ja_free(&c.arena);
    if (c.err) {
        free(*out);
        *out = NULL;
        if (out_len)
            *out_len = 0;
        return c.err;
    }
    if (!*out)
        return tern_errf(TERN_EINTERNAL, "%s: render produced no result", tpl->name);
    return NULL;
}
