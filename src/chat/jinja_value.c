/* jinja_value.c — runtime values of the Jinja renderer: arrays and insertion-ordered objects
 * (in the render's arena, jinja_arena.c), conversion from the JSON context, and the
 * conversions whose exact bytes matter — how a value prints, how it serialises to JSON
 * (tojson), JavaScript's == and === between values, the ordering used by sort/dictsort,
 * and Unicode upper/lower casing.
 *
 * Values follow @huggingface/jinja: numbers are JavaScript doubles tagged integer or float,
 * arrays and objects compare by identity, objects keep JavaScript's key order (integer-like
 * keys first). Every value of a render lives in one arena freed when the render ends, so
 * values can share freely (and even form cycles through namespaces) without ownership
 * bookkeeping; the arena's cap bounds the memory a template can use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

/* ------------------------------------------------------------------ errors and buffers */

jrc jx_fail(jctx *c, uint32_t pos, const char *fmt, ...) {
    if (c->err)
        return JR_ERR;
    char where[256];
    jinja_where(c->tpl->name, c->tpl->src, c->tpl->src_len, pos, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    tern_err *e = tern_verrf(TERN_EINVAL, fmt, ap);
    va_end(ap);
    c->err = tern_err_wrap(e, "%.*s", (int)(strlen(where) >= 2 ? strlen(where) - 2 : 0), where);
    return JR_ERR;
}

jrc jx_charge(jctx *c, uint32_t pos, uint64_t n) {
    c->steps += n;
    if (c->steps > c->lim.max_steps) {
        jx_fail(c, pos, "the template took more than %llu evaluation steps (limit)", (unsigned long long)c->lim.max_steps);
        if (c->err)
            c->err->code = TERN_EOVERLOAD;
        return JR_ERR;
    }
    return JR_OK;
}

void *jx_alloc(jctx *c, uint32_t pos, size_t n) {
    void *p = ja_alloc(&c->arena, n);
    if (!p) {
        jx_fail(c, pos, "the template used more than %zu bytes of memory (limit)", c->lim.max_memory);
        if (c->err)
            c->err->code = TERN_EOVERLOAD;
    }
    return p;
}

jrc jb_put(jctx *c, uint32_t pos, jbuf *b, const char *s, size_t n) {
    if (n == 0)
        return JR_OK;
    if (n > c->lim.max_output || b->n > c->lim.max_output - n) {
        jx_fail(c, pos, "the rendered text exceeds %zu bytes (limit)", c->lim.max_output);
        if (c->err)
            c->err->code = TERN_EOVERLOAD;
        return JR_ERR;
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap = cap > SIZE_MAX / 2 ? b->n + n : cap * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return jx_fail(c, pos, "out of memory");
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return JR_OK;
}

void jb_free(jbuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

jrc jb_take(jctx *c, uint32_t pos, jbuf *b, jv *out) {
    jrc rc = jv_str_copy(c, pos, b->p ? b->p : "", b->n, out);
    jb_free(b);
    return rc;
}

static jrc put_str(jctx *c, uint32_t pos, jbuf *b, const char *s) { return jb_put(c, pos, b, s, strlen(s)); }

/* ------------------------------------------------------------------ arrays and objects */

jarr *jv_new_arr(jctx *c, uint32_t pos, size_t n) {
    size_t bytes;
    if (n > SIZE_MAX / sizeof(jv) - 1)
        return jx_fail(c, pos, "array too large"), NULL;
    bytes = n * sizeof(jv);
    jarr *a = jx_alloc(c, pos, sizeof *a);
    if (!a)
        return NULL;
    a->n = n;
    if (n && !(a->items = jx_alloc(c, pos, bytes)))
        return NULL;
    return a; /* items zeroed: JV_UNDEF */
}

jv jv_arr(jarr *a) {
    jv v = {JV_ARRAY, {0}};
    v.u.a = a;
    return v;
}

jobj *jv_new_obj(jctx *c, uint32_t pos, size_t cap) {
    jobj *o = jx_alloc(c, pos, sizeof *o);
    if (!o)
        return NULL;
    if (cap) {
        if (cap > SIZE_MAX / sizeof(jkv))
            return jx_fail(c, pos, "object too large"), NULL;
        if (!(o->kv = jx_alloc(c, pos, cap * sizeof(jkv))))
            return NULL;
        o->cap = cap;
    }
    return o;
}

jv jv_obj(jobj *o, jv_type t) {
    jv v = {t, {0}};
    v.u.o = o;
    return v;
}

static uint32_t key_hash(const char *k, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

#define INDEX_MIN 16 /* objects with fewer keys are searched linearly */

static void index_insert(jobj *o, size_t at) {
    size_t mask = o->index_cap - 1, i = key_hash(o->kv[at].k, o->kv[at].kn) & mask;
    while (o->index[i])
        i = (i + 1) & mask;
    o->index[i] = (uint32_t)(at + 1);
}

/* (Re)builds the hash index when the object is large enough to need one. */
static jrc index_build(jctx *c, uint32_t pos, jobj *o) {
    if (o->n < INDEX_MIN || o->n > UINT32_MAX / 4)
        return JR_OK;
    size_t cap = 32;
    while (cap < o->n * 2)
        cap *= 2;
    uint32_t *idx = jx_alloc(c, pos, cap * sizeof *idx);
    if (!idx)
        return JR_ERR;
    o->index = idx;
    o->index_cap = cap;
    for (size_t i = 0; i < o->n; i++)
        index_insert(o, i);
    return JR_OK;
}

jv *jobj_get(const jobj *o, const char *k, size_t kn) {
    if (o->index) {
        size_t mask = o->index_cap - 1, i = key_hash(k, kn) & mask;
        while (o->index[i]) {
            jkv *e = &o->kv[o->index[i] - 1];
            if (e->kn == kn && !memcmp(e->k, k, kn))
                return &e->v;
            i = (i + 1) & mask;
        }
        return NULL;
    }
    for (size_t i = 0; i < o->n; i++)
        if (o->kv[i].kn == kn && !memcmp(o->kv[i].k, k, kn))
            return &o->kv[i].v;
    return NULL;
}

jrc jobj_set(jctx *c, uint32_t pos, jobj *o, const char *k, size_t kn, jv v) {
    jv *have = jobj_get(o, k, kn);
    if (have) {
        *have = v;
        return JR_OK;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        if (cap > SIZE_MAX / sizeof(jkv))
            return jx_fail(c, pos, "object too large");
        jkv *kv = jx_alloc(c, pos, cap * sizeof *kv);
        if (!kv)
            return JR_ERR;
        if (o->n)
            memcpy(kv, o->kv, o->n * sizeof *kv);
        o->kv = kv;
        o->cap = cap;
    }
    o->kv[o->n++] = (jkv){k, kn, v};
    if (o->index && o->n * 2 <= o->index_cap)
        index_insert(o, o->n - 1);
    else if (o->n >= INDEX_MIN)
        return index_build(c, pos, o);
    return JR_OK;
}

jrc jv_str_copy(jctx *c, uint32_t pos, const char *p, size_t n, jv *out) {
    if (n == 0) {
        *out = jv_str("", 0);
        return JR_OK;
    }
    if (n == SIZE_MAX)
        return jx_fail(c, pos, "string too large");
    char *d = jx_alloc(c, pos, n + 1);
    if (!d)
        return JR_ERR;
    memcpy(d, p, n);
    *out = jv_str(d, n);
    return JR_OK;
}

/* ------------------------------------------------------------------ from JSON */

/* JavaScript orders an object's "array index" keys ("0", "17", < 2^32 - 1) first,
 * ascending, then the other keys in insertion order. Returns the index or -1. */
static long long array_index_key(const char *k, size_t n) {
    if (n == 0 || n > 10 || (n > 1 && k[0] == '0'))
        return -1;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9')
            return -1;
        v = v * 10 + (k[i] - '0');
    }
    return v <= 4294967294LL ? v : -1;
}

jrc jv_from_json(jctx *c, const json_t *j, unsigned depth, jv *out) {
    if (depth > 512)
        return jx_fail(c, 0, "the context is nested more than 512 levels deep");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(j);
        jobj *o = jv_new_obj(c, 0, n);
        if (!o)
            return JR_ERR;
        size_t nidx = 0;
        for (void *it = json_object_iter((json_t *)j); it; it = json_object_iter_next((json_t *)j, it)) {
            const char *k = json_object_iter_key(it);
#if JANSSON_VERSION_HEX >= 0x020e00
            size_t kn = json_object_iter_key_len(it);
#else
            size_t kn = strlen(k);
#endif
            if (o->n >= n)
                break;
            jv v;
            if (jv_from_json(c, json_object_iter_value(it), depth + 1, &v))
                return JR_ERR;
            o->kv[o->n++] = (jkv){k, kn, v};
            if (array_index_key(k, kn) >= 0)
                nidx++;
        }
        if (nidx) { /* stable partition: index keys first, ascending */
            jkv *sorted = jx_alloc(c, 0, o->n * sizeof *sorted);
            if (!sorted)
                return JR_ERR;
            size_t a = 0, b = nidx;
            for (size_t i = 0; i < o->n; i++) {
                if (array_index_key(o->kv[i].k, o->kv[i].kn) >= 0) {
                    size_t at = a++;
                    long long key = array_index_key(o->kv[i].k, o->kv[i].kn);
                    while (at > 0 && array_index_key(sorted[at - 1].k, sorted[at - 1].kn) > key) {
                        sorted[at] = sorted[at - 1];
                        at--;
                    }
                    sorted[at] = o->kv[i];
                } else
                    sorted[b++] = o->kv[i];
            }
            o->kv = sorted;
        }
        if (index_build(c, 0, o))
            return JR_ERR;
        *out = jv_obj(o, JV_OBJECT);
        return JR_OK;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jarr *a = jv_new_arr(c, 0, n);
        if (!a)
            return JR_ERR;
        for (size_t i = 0; i < n; i++)
            if (jv_from_json(c, json_array_get(j, i), depth + 1, &a->items[i]))
                return JR_ERR;
        *out = jv_arr(a);
        return JR_OK;
    }
    case JSON_STRING:
        *out = jv_str(json_string_value(j), json_string_length(j));
        return JR_OK;
    case JSON_INTEGER:
        *out = jv_int((double)json_integer_value(j));
        return JR_OK;
    case JSON_REAL: {
        double d = json_real_value(j);
        /* JSON.parse yields plain numbers; the reference calls integral ones integers */
        *out = isfinite(d) && d == floor(d) ? jv_int(d) : jv_float(d);
        return JR_OK;
    }
    case JSON_TRUE:
        *out = jv_bool(1);
        return JR_OK;
    case JSON_FALSE:
        *out = jv_bool(0);
        return JR_OK;
    default:
        *out = jv_null();
        return JR_OK;
    }
}

/* ------------------------------------------------------------------ truthiness, names */

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_BOOL: return v.u.b;
    case JV_INT:
    case JV_FLOAT: return v.u.num != 0 && !isnan(v.u.num);
    case JV_STR: return v.u.s.n > 0;
    case JV_ARRAY: return v.u.a->n > 0;
    case JV_OBJECT: return v.u.o->n > 0;
    case JV_NS:
    case JV_FUNC:
    case JV_LOOP: return 1;
    default: return 0;
    }
}

const char *jv_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "UndefinedValue";
    case JV_NULL: return "NullValue";
    case JV_BOOL: return "BooleanValue";
    case JV_INT: return "IntegerValue";
    case JV_FLOAT: return "FloatValue";
    case JV_STR: return "StringValue";
    case JV_ARRAY: return v.u.a->tuple ? "TupleValue" : "ArrayValue";
    case JV_OBJECT: return v.u.o->kwargs ? "KeywordArgumentsValue" : "ObjectValue";
    case JV_NS: return "NamespaceValue";
    case JV_FUNC: return "FunctionValue";
    case JV_LOOP: return "ObjectValue";
    }
    return "?";
}

/* ------------------------------------------------------------------ printing */

static jrc put_num(jctx *c, uint32_t pos, jbuf *b, double d) {
    char tmp[48];
    size_t n = jt_num_str(d, tmp);
    return jb_put(c, pos, b, tmp, n);
}

/* FloatValue.toString(): integral floats keep one decimal ("2.0"), -0 is "-0.0". */
static jrc put_float(jctx *c, uint32_t pos, jbuf *b, double d) {
    if (d == 0 && signbit(d))
        return put_str(c, pos, b, "-0.0");
    if (isfinite(d) && d == floor(d) && fabs(d) < 1e21) {
        char tmp[48];
        int n = snprintf(tmp, sizeof tmp, "%.1f", d);
        return jb_put(c, pos, b, tmp, (size_t)n);
    }
    return put_num(c, pos, b, d);
}

jrc jv_display(jctx *c, uint32_t pos, jv v, jbuf *out) {
    switch (v.t) {
    case JV_STR: return jb_put(c, pos, out, v.u.s.p, v.u.s.n);
    case JV_INT: return put_num(c, pos, out, v.u.num);
    case JV_FLOAT: return put_float(c, pos, out, v.u.num);
    case JV_BOOL: return put_str(c, pos, out, v.u.b ? "true" : "false");
    case JV_NULL: /* the reference's NullValue holds undefined, and prints so inside lists */
    case JV_UNDEF: return put_str(c, pos, out, "undefined");
    case JV_ARRAY:
    case JV_OBJECT:
    case JV_NS: {
        jjson_opts o = {0};
        return jv_to_json(c, pos, v, &o, 0, out);
    }
    case JV_FUNC:
    case JV_LOOP: break;
    }
    return jx_fail(c, pos, "unsupported: printing a function or macro as text");
}

jrc jv_raw_string(jctx *c, uint32_t pos, jv v, jbuf *out) {
    switch (v.t) {
    case JV_INT:
    case JV_FLOAT: return put_num(c, pos, out, v.u.num);
    case JV_NULL:
    case JV_UNDEF: return JR_OK;
    case JV_ARRAY:
        for (size_t i = 0; i < v.u.a->n; i++) {
            if ((i && jb_put(c, pos, out, ",", 1)) || jv_display(c, pos, v.u.a->items[i], out))
                return JR_ERR;
        }
        return JR_OK;
    case JV_OBJECT:
    case JV_NS: return put_str(c, pos, out, "[object Map]");
    case JV_FUNC: return jx_fail(c, pos, "unsupported: converting a function or macro to text");
    default: return jv_display(c, pos, v, out);
    }
}

/* ------------------------------------------------------------------ JSON */

static jrc put_json_string(jctx *c, uint32_t pos, jbuf *b, const char *s, size_t n, int ascii) {
    if (jb_put(c, pos, b, "\"", 1))
        return JR_ERR;
    size_t run = 0; /* bytes copied verbatim, flushed lazily */
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        char esc[16];
        size_t en = 0, len = 1;
        if (ch == '"')
            en = (size_t)sprintf(esc, "\\\"");
        else if (ch == '\\')
            en = (size_t)sprintf(esc, "\\\\");
        else if (ch < 0x20) {
            switch (ch) {
            case '\b': en = (size_t)sprintf(esc, "\\b"); break;
            case '\f': en = (size_t)sprintf(esc, "\\f"); break;
            case '\n': en = (size_t)sprintf(esc, "\\n"); break;
            case '\r': en = (size_t)sprintf(esc, "\\r"); break;
            case '\t': en = (size_t)sprintf(esc, "\\t"); break;
            default: en = (size_t)sprintf(esc, "\\u%04x", ch); break;
            }
        } else if (ascii && ch >= 0x7F) {
            uint32_t cp = tern_utf8_decode_loose((const unsigned char *)s + i, n - i, &len);
            if (cp < 0x10000)
                en = (size_t)sprintf(esc, "\\u%04x", (unsigned)cp);
            else {
                cp -= 0x10000;
                en = (size_t)sprintf(esc, "\\u%04x\\u%04x", (unsigned)(0xD800 + (cp >> 10)),
                                     (unsigned)(0xDC00 + (cp & 0x3FF)));
            }
        }
        if (!en) {
            run++;
            i++;
            continue;
        }
        if (jb_put(c, pos, b, s + i - run, run) || jb_put(c, pos, b, esc, en))
            return JR_ERR;
        run = 0;
        i += len;
    }
    if (jb_put(c, pos, b, s + n - run, run))
        return JR_ERR;
    return jb_put(c, pos, b, "\"", 1);
}

/* Weight of an ASCII character in ICU's root collation (what localeCompare uses):
 * control characters are ignorable (0), then white space, punctuation, symbols,
 * digits, letters (case-folded; case is a later tie-break). */
static int collation_weight(unsigned char ch) {
    static const char order[] = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";
    if (ch >= 'A' && ch <= 'Z')
        ch = (unsigned char)(ch - 'A' + 'a');
    const char *p = memchr(order, ch, sizeof order - 1);
    return p ? (int)(p - order) + 1 : 0;
}

/* a.localeCompare(b) for ASCII keys. */
static int locale_compare_ascii(const char *a, size_t an, const char *b, size_t bn) {
    size_t i = 0, j = 0;
    for (;;) {
        while (i < an && !collation_weight((unsigned char)a[i]))
            i++;
        while (j < bn && !collation_weight((unsigned char)b[j]))
            j++;
        if (i == an || j == bn)
            break;
        int wa = collation_weight((unsigned char)a[i]), wb = collation_weight((unsigned char)b[j]);
        if (wa != wb)
            return wa < wb ? -1 : 1;
        i++, j++;
    }
    if (i < an)
        return 1;
    if (j < bn)
        return -1;
    /* equal but for case: the first lower-case letter against an upper-case one comes first */
    for (i = 0, j = 0;; i++, j++) {
        while (i < an && !collation_weight((unsigned char)a[i]))
            i++;
        while (j < bn && !collation_weight((unsigned char)b[j]))
            j++;
        if (i == an || j == bn)
            return 0;
        int ua = a[i] >= 'A' && a[i] <= 'Z', ub = b[j] >= 'A' && b[j] <= 'Z';
        if (ua != ub)
            return ua ? 1 : -1;
    }
}

jrc jv_to_json(jctx *c, uint32_t pos, jv v, const jjson_opts *o, unsigned depth, jbuf *out) {
    if (depth > 512)
        return jx_fail(c, pos, "tojson: value nested more than 512 levels deep (or containing itself)");
    switch (v.t) {
    case JV_NULL: return put_str(c, pos, out, "null");
    case JV_UNDEF: return put_str(c, pos, out, o->undef_to_null ? "null" : "undefined");
    case JV_INT:
    case JV_FLOAT:
        if (!isfinite(v.u.num))
            return put_str(c, pos, out, "null");
        return put_num(c, pos, out, v.u.num);
    case JV_BOOL: return put_str(c, pos, out, v.u.b ? "true" : "false");
    case JV_STR: return put_json_string(c, pos, out, v.u.s.p, v.u.s.n, o->ensure_ascii);
    case JV_FUNC: return jx_fail(c, pos, "cannot convert to JSON: %s", jv_type_name(v));
    case JV_ARRAY:
    case JV_OBJECT:
        /* the reference has no JSON form for tuples and keyword-argument bundles */
        if ((v.t == JV_ARRAY && v.u.a->tuple) || (v.t == JV_OBJECT && v.u.o->kwargs))
            return jx_fail(c, pos, "cannot convert to JSON: %s", jv_type_name(v));
        break;
    default: break;
    }
    const char *isep = o->item_sep, *ksep = o->key_sep;
    size_t isn = o->item_sep_n, ksn = o->key_sep_n;
    if (!isep) {
        isep = o->indent ? "," : ", ";
        isn = strlen(isep);
        ksep = ": ";
        ksn = 2;
    }
    /* "\n" + indent * depth, and one level deeper for children */
    size_t ind = (size_t)o->indent;
    jrc rc = JR_OK;
#define PAD(levels)                                                                  \
    do {                                                                             \
        if (jb_put(c, pos, out, "\n", 1))                                            \
            return JR_ERR;                                                           \
        for (size_t l_ = 0; l_ < (size_t)(levels) * ind; l_++)                       \
            if (jb_put(c, pos, out, " ", 1))                                         \
                return JR_ERR;                                                       \
    } while (0)
    if (v.t == JV_ARRAY) {
        const jarr *a = v.u.a;
        if (jb_put(c, pos, out, "[", 1))
            return JR_ERR;
        for (size_t i = 0; i < a->n; i++) {
            if (i && jb_put(c, pos, out, isep, isn))
                return JR_ERR;
            if (ind)
                PAD(depth + 1);
            if (jv_to_json(c, pos, a->items[i], o, depth + 1, out))
                return JR_ERR;
        }
        if (ind && a->n)
            PAD(depth);
        return jb_put(c, pos, out, "]", 1);
    }
    const jobj *ob = v.u.o;
    const jkv **order = NULL;
    if (o->sort_keys && ob->n > 1) {
        order = jx_alloc(c, pos, ob->n * sizeof *order);
        if (!order)
            return JR_ERR;
        for (size_t i = 0; i < ob->n; i++) {
            for (size_t k = 0; k < ob->kv[i].kn; k++)
                if ((unsigned char)ob->kv[i].k[k] >= 0x80)
                    return jx_fail(c, pos, "unsupported: tojson(sort_keys=true) with non-ASCII keys");
            /* insertion sort: stable, like Array.prototype.sort */
            size_t at = i;
            while (at > 0 && locale_compare_ascii(order[at - 1]->k, order[at - 1]->kn, ob->kv[i].k, ob->kv[i].kn) > 0) {
                order[at] = order[at - 1];
                at--;
            }
            order[at] = &ob->kv[i];
        }
    }
    if (jb_put(c, pos, out, "{", 1))
        return JR_ERR;
    for (size_t i = 0; i < ob->n && !rc; i++) {
        const jkv *e = order ? order[i] : &ob->kv[i];
        if (i && jb_put(c, pos, out, isep, isn))
            return JR_ERR;
        if (ind)
            PAD(depth + 1);
        if (put_json_string(c, pos, out, e->k, e->kn, o->ensure_ascii) || jb_put(c, pos, out, ksep, ksn) ||
            jv_to_json(c, pos, e->v, o, depth + 1, out))
            return JR_ERR;
    }
    if (ind && ob->n)
        PAD(depth);
#undef PAD
    return jb_put(c, pos, out, "}", 1);
}

/* ------------------------------------------------------------------ equality and order */

static int is_object_like(jv v) { return v.t == JV_ARRAY || v.t == JV_OBJECT || v.t == JV_NS || v.t == JV_FUNC; }

static int same_object(jv a, jv b) {
    if (a.t != b.t) {
        /* OBJECT and NS are distinct kinds of JS objects; so are arrays and maps */
        return 0;
    }
    switch (a.t) {
    case JV_ARRAY: return a.u.a == b.u.a;
    case JV_OBJECT:
    case JV_NS: return a.u.o == b.u.o;
    case JV_FUNC: return a.u.f == b.u.f;
    default: return 0;
    }
}

jrc jv_loose_eq(jctx *c, uint32_t pos, jv a, jv b, int *eq) {
    for (int round = 0; round < 4; round++) {
        int an = a.t == JV_NULL || a.t == JV_UNDEF, bn = b.t == JV_NULL || b.t == JV_UNDEF;
        if (an || bn) {
            *eq = an && bn;
            return JR_OK;
        }
        int anum = a.t == JV_INT || a.t == JV_FLOAT, bnum = b.t == JV_INT || b.t == JV_FLOAT;
        if (anum && bnum) {
            *eq = a.u.num == b.u.num;
            return JR_OK;
        }
        if (a.t == JV_STR && b.t == JV_STR) {
            *eq = a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
            return jx_charge(c, pos, a.u.s.n >> 6);
        }
        if (a.t == JV_BOOL && b.t == JV_BOOL) {
            *eq = a.u.b == b.u.b;
            return JR_OK;
        }
        if (is_object_like(a) && is_object_like(b)) {
            *eq = same_object(a, b);
            return JR_OK;
        }
        /* mixed kinds: JavaScript's coercions */
        if (a.t == JV_BOOL) {
            a = jv_int(a.u.b);
            continue;
        }
        if (b.t == JV_BOOL) {
            b = jv_int(b.u.b);
            continue;
        }
        if (anum && b.t == JV_STR) {
            *eq = a.u.num == jt_str_to_num(b.u.s.p, b.u.s.n);
            return JR_OK;
        }
        if (a.t == JV_STR && bnum) {
            *eq = jt_str_to_num(a.u.s.p, a.u.s.n) == b.u.num;
            return JR_OK;
        }
        /* an object against a string or number: ToPrimitive(object) is its string form */
        jv *obj = is_object_like(a) ? &a : &b;
        if (obj->t == JV_FUNC)
            return jx_fail(c, pos, "unsupported: comparing a function with a %s", jv_type_name(obj == &a ? b : a));
        jbuf tmp = {0};
        jv s;
        if (jv_raw_string(c, pos, *obj, &tmp) || jb_take(c, pos, &tmp, &s)) {
            jb_free(&tmp);
            return JR_ERR;
        }
        *obj = s;
    }
    *eq = 0;
    return JR_OK;
}

int jv_strict_eq(jv a, jv b) {
    int anum = a.t == JV_INT || a.t == JV_FLOAT, bnum = b.t == JV_INT || b.t == JV_FLOAT;
    if (anum || bnum)
        return anum && bnum && a.u.num == b.u.num;
    /* the reference's null and undefined both hold JavaScript undefined */
    if ((a.t == JV_NULL || a.t == JV_UNDEF) && (b.t == JV_NULL || b.t == JV_UNDEF))
        return 1;
    if (a.t != b.t)
        return 0;
    switch (a.t) {
    case JV_BOOL: return a.u.b == b.u.b;
    case JV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    default: return same_object(a, b);
    }
}

jrc jv_compare(jctx *c, uint32_t pos, jv a, jv b, int case_sensitive, int *res) {
    *res = 0;
    if (a.t == JV_NULL && b.t == JV_NULL)
        return JR_OK;
    if (a.t == JV_NULL || b.t == JV_NULL)
        return jx_fail(c, pos, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
    if (a.t == JV_UNDEF && b.t == JV_UNDEF)
        return JR_OK;
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        return jx_fail(c, pos, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
    int anum = a.t == JV_INT || a.t == JV_FLOAT || a.t == JV_BOOL;
    int bnum = b.t == JV_INT || b.t == JV_FLOAT || b.t == JV_BOOL;
    if (anum && bnum) {
        double x = a.t == JV_BOOL ? a.u.b : a.u.num, y = b.t == JV_BOOL ? b.u.b : b.u.num;
        *res = x < y ? -1 : x > y ? 1 : 0;
        return JR_OK;
    }
    if (strcmp(jv_type_name(a), jv_type_name(b)))
        return jx_fail(c, pos, "cannot compare different types: %s and %s", jv_type_name(a), jv_type_name(b));
    if (a.t != JV_STR)
        return jx_fail(c, pos, "cannot compare values of type %s", jv_type_name(a));
    if (jx_charge(c, pos, (a.u.s.n + b.u.s.n) >> 6) ||
        (!case_sensitive && (jv_lower(c, pos, a, &a) || jv_lower(c, pos, b, &b))))
        return JR_ERR;
    *res = jt_utf16_cmp(a.u.s.p, a.u.s.n, b.u.s.p, b.u.s.n);
    *res = *res < 0 ? -1 : *res > 0;
    return JR_OK;
}

/* ------------------------------------------------------------------ case mapping */

static jrc map_case(jctx *c, uint32_t pos, jv s, int upper, jv *out) {
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i;
    if (jx_charge(c, pos, n >> 6))
        return JR_ERR;
    /* fast path: nothing to change */
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x80 || (upper ? (ch >= 'a' && ch <= 'z') : (ch >= 'A' && ch <= 'Z')))
            break;
    }
    if (i == n) {
        *out = s;
        return JR_OK;
    }
    /* a code point maps to at most 3, each at most 4 bytes, from at least 1 byte */
    if (n > (SIZE_MAX - 1) / 12)
        return jx_fail(c, pos, "string too large");
    char *d = jx_alloc(c, pos, n * 12 + 1);
    if (!d)
        return JR_ERR;
    memcpy(d, p, i);
    size_t dn = i;
    while (i < n) {
        size_t len;
        uint32_t cp = tern_utf8_decode_loose((const unsigned char *)p + i, n - i, &len), m[3];
        int k;
        if (upper)
            k = jt_upper_cp(cp, m);
        else if (cp == 0x3A3) {
            /* Final_Sigma: after a cased letter, not before one (case-ignorables skipped) */
            int before = 0, after = 0;
            size_t j = i;
            while (j > 0) {
                size_t b = j - 1, bl;
                while (b > 0 && ((unsigned char)p[b] & 0xC0) == 0x80)
                    b--;
                uint32_t q = tern_utf8_decode_loose((const unsigned char *)p + b, n - b, &bl);
                j = b;
                if (jt_is_case_ignorable(q))
                    continue;
                before = jt_is_cased(q);
                break;
            }
            for (j = i + len; j < n;) {
                size_t al;
                uint32_t q = tern_utf8_decode_loose((const unsigned char *)p + j, n - j, &al);
                j += al;
                if (jt_is_case_ignorable(q))
                    continue;
                after = jt_is_cased(q);
                break;
            }
            m[0] = before && !after ? 0x3C2 : 0x3C3;
            k = 1;
        } else
            k = jt_lower_cp(cp, m);
        for (int q = 0; q < k; q++)
            dn += tern_utf8_put(m[q], d + dn);
        i += len;
    }
    d[dn] = 0;
    *out = jv_str(d, dn);
    return JR_OK;
}

jrc jv_upper(jctx *c, uint32_t pos, jv s, jv *out) { return map_case(c, pos, s, 1, out); }
jrc jv_lower(jctx *c, uint32_t pos, jv s, jv *out) { return map_case(c, pos, s, 0, out); }
