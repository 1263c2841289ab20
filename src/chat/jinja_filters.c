/* jinja_filters.c — the built-in library of the Jinja renderer: filters ("x | f"), tests
 * ("x is t"), global functions (namespace, raise_exception, range, strftime_now) and the
 * methods of strings and objects (s.split(), d.items(), ...), each behaving as in
 * @huggingface/jinja for every input that renderer accepts.
 *
 * Where the reference throws on a filter that real templates use (select/reject, and map
 * with a filter name instead of attribute=), this file implements Python Jinja's meaning
 * instead; everything else it does not know is an error naming the filter, never a guess. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_internal.h"

#define NAME_IS(s, n, lit) ((n) == sizeof(lit) - 1 && !memcmp((s), (lit), (n)))

static jv func_value(jctx *c, jbuiltin b, jv self, int *oom) {
    jfunc *f = ja_alloc(&c->arena, sizeof *f);
    if (!f) {
        *oom = 1;
        return jv_undef();
    }
    f->kind = JF_BUILTIN;
    f->builtin = b;
    f->self = self;
    jv v = {JV_FUNC, {0}};
    v.u.f = f;
    return v;
}

jv jx_builtin_member(jctx *c, jv obj, const char *name, size_t n, int *oom) {
    static const struct {
        const char *name;
        jbuiltin b;
    } str_methods[] = {
        {"upper", JB_S_UPPER},         {"lower", JB_S_LOWER},           {"strip", JB_S_STRIP},
        {"title", JB_S_TITLE},         {"capitalize", JB_S_CAPITALIZE}, {"rstrip", JB_S_RSTRIP},
        {"lstrip", JB_S_LSTRIP},       {"startswith", JB_S_STARTSWITH}, {"endswith", JB_S_ENDSWITH},
        {"split", JB_S_SPLIT},         {"replace", JB_S_REPLACE},
    },
      obj_methods[] = {
          {"get", JB_O_GET}, {"items", JB_O_ITEMS}, {"keys", JB_O_KEYS}, {"values", JB_O_VALUES}, {"dictsort", JB_O_DICTSORT},
      };
    if (obj.t == JV_STR) {
        if (NAME_IS(name, n, "length")) {
            c->steps += obj.u.s.n >> 6; /* checked at the next step */
            return jv_int((double)jt_utf16_len(obj.u.s.p, obj.u.s.n));
        }
        for (size_t i = 0; i < sizeof str_methods / sizeof str_methods[0]; i++)
            if (strlen(str_methods[i].name) == n && !memcmp(str_methods[i].name, name, n))
                return func_value(c, str_methods[i].b, obj, oom);
    } else if (obj.t == JV_ARRAY) {
        if (NAME_IS(name, n, "length"))
            return jv_int((double)obj.u.a->n);
    } else if (obj.t == JV_OBJECT) {
        for (size_t i = 0; i < sizeof obj_methods / sizeof obj_methods[0]; i++)
            if (strlen(obj_methods[i].name) == n && !memcmp(obj_methods[i].name, name, n))
                return func_value(c, obj_methods[i].b, obj, oom);
    }
    return jv_undef();
}

/* ------------------------------------------------------------------ helpers */

jrc jx_obj_keys(jctx *c, uint32_t pos, jobj *o, jv *out) {
    jarr *a = jv_new_arr(c, pos, o->n);
    if (!a)
        return JR_ERR;
    for (size_t i = 0; i < o->n; i++)
        a->items[i] = jv_str(o->kv[i].k, o->kv[i].kn);
    *out = jv_arr(a);
    return JR_OK;
}

static jrc obj_values(jctx *c, uint32_t pos, jobj *o, jv *out) {
    jarr *a = jv_new_arr(c, pos, o->n);
    if (!a)
        return JR_ERR;
    for (size_t i = 0; i < o->n; i++)
        a->items[i] = o->kv[i].v;
    *out = jv_arr(a);
    return JR_OK;
}

static jrc pair(jctx *c, uint32_t pos, jv k, jv v, jv *out) {
    jarr *p = jv_new_arr(c, pos, 2);
    if (!p)
        return JR_ERR;
    p->items[0] = k;
    p->items[1] = v;
    *out = jv_arr(p);
    return JR_OK;
}

jrc jx_obj_items(jctx *c, uint32_t pos, jobj *o, jv *out) {
    jarr *a = jv_new_arr(c, pos, o->n);
    if (!a)
        return JR_ERR;
    for (size_t i = 0; i < o->n; i++)
        if (pair(c, pos, jv_str(o->kv[i].k, o->kv[i].kn), o->kv[i].v, &a->items[i]))
            return JR_ERR;
    *out = jv_arr(a);
    return JR_OK;
}

/* A fallible three-way comparison for sorting. */
typedef jrc (*cmp_fn)(jctx *c, uint32_t pos, jv a, jv b, const void *arg, int *res);

/* Stable merge sort (Array.prototype.sort is stable). */
static jrc sort_values(jctx *c, uint32_t pos, jv *v, size_t n, cmp_fn cmp, const void *arg) {
    if (n < 2)
        return JR_OK;
    jv *tmp = jx_alloc(c, pos, n * sizeof *tmp);
    if (!tmp)
        return JR_ERR;
    for (size_t width = 1; width < n; width *= 2) {
        if (jx_charge(c, pos, n))
            return JR_ERR;
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r;
                if (cmp(c, pos, v[i], v[j], arg, &r))
                    return JR_ERR;
                tmp[k++] = r <= 0 ? v[i++] : v[j++];
            }
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
        if (width > SIZE_MAX / 2)
            break;
    }
    return JR_OK;
}

/* Value at a dotted path ("a.b", "items.0") through objects and arrays; undefined if absent. */
static jv attribute_path(jv item, const char *path, size_t n) {
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && path[j] != '.')
            j++;
        if (item.t == JV_OBJECT || item.t == JV_NS) {
            jv *v = jobj_get(item.u.o, path + i, j - i);
            item = v ? *v : jv_undef();
        } else if (item.t == JV_ARRAY) {
            double idx = jt_parse_int(path + i, j - i);
            if (isnan(idx) || idx < 0 || idx >= (double)item.u.a->n)
                return jv_undef();
            item = item.u.a->items[(size_t)idx];
        } else
            return jv_undef();
        if (j >= n)
            return item;
        i = j + 1;
    }
}

typedef struct sort_opts {
    int case_sensitive, reverse;
    const char *attr; /* NULL: the items themselves */
    size_t attr_n;
    int by_value; /* dictsort: compare pair[1] instead of pair[0] */
} sort_opts;

static jrc cmp_items(jctx *c, uint32_t pos, jv a, jv b, const void *arg, int *res) {
    const sort_opts *o = arg;
    if (o->attr) {
        a = attribute_path(a, o->attr, o->attr_n);
        b = attribute_path(b, o->attr, o->attr_n);
    }
    if (jv_compare(c, pos, a, b, o->case_sensitive, res))
        return JR_ERR;
    if (o->reverse)
        *res = -*res;
    return JR_OK;
}

static jrc cmp_pairs(jctx *c, uint32_t pos, jv a, jv b, const void *arg, int *res) {
    const sort_opts *o = arg;
    int k = o->by_value ? 1 : 0;
    return cmp_items(c, pos, a.u.a->items[k], b.u.a->items[k], arg, res);
}

/* A JavaScript value's truthiness where the reference tests `x.value` directly
 * (arrays and objects are always truthy there). */
static int raw_truthy(jv v) {
    if (v.t == JV_ARRAY || v.t == JV_OBJECT || v.t == JV_NS || v.t == JV_FUNC)
        return 1;
    return jv_truthy(v);
}

/* Positional argument i, else keyword `name`, else NULL. */
static const jv *arg_or_kw(const jv *args, size_t nargs, const jobj *kw, size_t i, const char *name) {
    if (i < nargs)
        return &args[i];
    if (kw)
        return jobj_get(kw, name, strlen(name));
    return NULL;
}

/* Splits a trailing keyword-argument bundle off a builtin's arguments. */
static jobj *pop_kwargs(jv *args, size_t *nargs) {
    if (*nargs && args[*nargs - 1].t == JV_OBJECT && args[*nargs - 1].u.o->kwargs)
        return args[--*nargs].u.o;
    return NULL;
}

static jrc str_trim(jv s, int left, int right, jv *out) {
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n, l;
    if (left)
        while ((l = jt_space_len(p, b, a)))
            a += l;
    if (right)
        while (b > a) {
            size_t j = b - 1;
            while (j > a && ((unsigned char)p[j] & 0xC0) == 0x80)
                j--;
            if (jt_space_len(p, b, j) != b - j)
                break;
            b = j;
        }
    *out = jv_str(p + a, b - a);
    return JR_OK;
}

/* /\b\w/g -> upper case: ASCII word characters that start a word. */
static jrc str_title(jctx *c, uint32_t pos, jv s, jv *out) {
    char *d = jx_alloc(c, pos, s.u.s.n + 1);
    if (!d)
        return JR_ERR;
    int prev_word = 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
        char ch = s.u.s.p[i];
        int word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        d[i] = (word && !prev_word && ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
        prev_word = word;
    }
    *out = jv_str(d, s.u.s.n);
    return JR_OK;
}

/* charAt(0).toUpperCase() + slice(1) */
static jrc str_capitalize(jctx *c, uint32_t pos, jv s, jv *out) {
    if (s.u.s.n == 0) {
        *out = s;
        return JR_OK;
    }
    size_t len;
    uint32_t cp = tern_utf8_decode_loose((const unsigned char *)s.u.s.p, s.u.s.n, &len), m[3];
    if (cp >= 0x10000) { /* charAt(0) is half a surrogate pair: unchanged */
        *out = s;
        return JR_OK;
    }
    int k = jt_upper_cp(cp, m);
    char *d = jx_alloc(c, pos, s.u.s.n + 13);
    if (!d)
        return JR_ERR;
    size_t dn = 0;
    for (int i = 0; i < k; i++)
        dn += tern_utf8_put(m[i], d + dn);
    memcpy(d + dn, s.u.s.p + len, s.u.s.n - len);
    dn += s.u.s.n - len;
    *out = jv_str(d, dn);
    return JR_OK;
}

static const char *memfind(const char *h, size_t hn, const char *n, size_t nn) { return jt_find(h, hn, n, nn); }

/* str.split(sep=None, maxsplit=-1) as the reference implements it. */
static jrc str_split(jctx *c, uint32_t pos, jv self, jv *args, size_t nargs, jv *out) {
    jv sep = nargs > 0 ? args[0] : jv_null();
    if (sep.t != JV_STR && sep.t != JV_NULL)
        return jx_fail(c, pos, "split(): the separator must be a string or none");
    jv ms = nargs > 1 ? args[1] : jv_int(-1);
    if (ms.t != JV_INT)
        return jx_fail(c, pos, "split(): maxsplit must be an integer");
    double maxsplit = ms.u.num;
    const char *p = self.u.s.p;
    size_t n = self.u.s.n;
    if (jx_charge(c, pos, n >> 6))
        return JR_ERR;
    /* count the pieces first, then fill */
    size_t cap = 1;
    if (sep.t == JV_STR) {
        if (sep.u.s.n == 0)
            return jx_fail(c, pos, "split(): empty separator");
        for (const char *q = p; (q = memfind(q, (size_t)(p + n - q), sep.u.s.p, sep.u.s.n)); q += sep.u.s.n)
            cap++;
    } else
        cap = n / 2 + 2;
    if (jx_charge(c, pos, cap))
        return JR_ERR;
    jarr *a = jv_new_arr(c, pos, cap);
    if (!a)
        return JR_ERR;
    size_t k = 0;
    if (sep.t == JV_NULL) {
        size_t i = 0, l;
        while ((l = jt_space_len(p, n, i)))
            i += l;
        while (i < n) {
            size_t start = i;
            while (i < n && !jt_space_len(p, n, i)) {
                size_t cl;
                tern_utf8_decode_loose((const unsigned char *)p + i, n - i, &cl);
                i += cl;
            }
            if (maxsplit != -1 && (double)k >= maxsplit) {
                a->items[k++] = jv_str(p + start, n - start);
                break;
            }
            a->items[k++] = jv_str(p + start, i - start);
            while ((l = jt_space_len(p, n, i)))
                i += l;
        }
        a->n = k;
        *out = jv_arr(a);
        return JR_OK;
    }
    const char *q = p;
    for (;;) {
        const char *hit = memfind(q, (size_t)(p + n - q), sep.u.s.p, sep.u.s.n);
        if (!hit) {
            a->items[k++] = jv_str(q, (size_t)(p + n - q));
            break;
        }
        a->items[k++] = jv_str(q, (size_t)(hit - q));
        q = hit + sep.u.s.n;
    }
    if (maxsplit != -1 && (double)k > maxsplit) {
        /* result.push(result.splice(maxsplit).join(sep)): the tail rejoined is a suffix */
        double startd = maxsplit < 0 ? fmax((double)k + maxsplit, 0) : maxsplit;
        size_t start = (size_t)startd;
        const char *tail = a->items[start].u.s.p;
        a->items[start] = jv_str(tail, (size_t)(p + n - tail));
        k = start + 1;
    }
    a->n = k;
    *out = jv_arr(a);
    return JR_OK;
}

/* str.replace(old, new, count=None), the reference's utils.replace. */
static jrc str_replace(jctx *c, uint32_t pos, jv self, jv *args, size_t nargs, jv *out) {
    if (nargs < 2)
        return jx_fail(c, pos, "replace() requires at least two arguments");
    jv old = args[0], rep = args[1];
    if (old.t != JV_STR || rep.t != JV_STR)
        return jx_fail(c, pos, "replace() arguments must be strings");
    jv count = jv_null();
    if (nargs > 2) {
        if (args[2].t == JV_OBJECT && args[2].u.o->kwargs) {
            jv *cv = jobj_get(args[2].u.o, "count", 5);
            count = cv ? *cv : jv_null();
        } else
            count = args[2];
    }
    if (count.t != JV_INT && count.t != JV_NULL)
        return jx_fail(c, pos, "replace() count must be an integer or none");
    if (count.t == JV_INT && count.u.num == 0) {
        *out = self;
        return JR_OK;
    }
    double remaining = (count.t == JV_NULL || count.u.num < 0) ? INFINITY : count.u.num;
    const char *p = self.u.s.p;
    size_t n = self.u.s.n;
    if (jx_charge(c, pos, n >> 6))
        return JR_ERR;
    jbuf b = {0};
    jrc rc = JR_OK;
    if (old.u.s.n == 0) { /* an empty pattern matches at every code point boundary */
        size_t i = 0;
        for (;;) {
            if (remaining > 0) {
                if ((rc = jb_put(c, pos, &b, rep.u.s.p, rep.u.s.n)))
                    break;
                remaining--;
            }
            if (i >= n)
                break;
            size_t cl;
            tern_utf8_decode_loose((const unsigned char *)p + i, n - i, &cl);
            if ((rc = jb_put(c, pos, &b, p + i, cl)))
                break;
            i += cl;
        }
    } else {
        const char *q = p;
        while (remaining > 0) {
            const char *hit = memfind(q, (size_t)(p + n - q), old.u.s.p, old.u.s.n);
            if (!hit)
                break;
            if ((rc = jb_put(c, pos, &b, q, (size_t)(hit - q))) || (rc = jb_put(c, pos, &b, rep.u.s.p, rep.u.s.n)))
                break;
            q = hit + old.u.s.n;
            remaining--;
        }
        if (!rc)
            rc = jb_put(c, pos, &b, q, (size_t)(p + n - q));
    }
    if (rc) {
        jb_free(&b);
        return rc;
    }
    return jb_take(c, pos, &b, out);
}

static jrc str_affix(jctx *c, uint32_t pos, jv self, jv *args, size_t nargs, int ends, jv *out) {
    const char *what = ends ? "endswith" : "startswith";
    if (nargs == 0)
        return jx_fail(c, pos, "%s() requires at least one argument", what);
    jv pat = args[0];
    size_t count = pat.t == JV_ARRAY ? pat.u.a->n : 1;
    if (pat.t != JV_ARRAY && pat.t != JV_STR)
        return jx_fail(c, pos, "%s() argument must be a string or tuple of strings", what);
    for (size_t i = 0; i < count; i++) {
        jv s = pat.t == JV_ARRAY ? pat.u.a->items[i] : pat;
        if (s.t != JV_STR)
            return jx_fail(c, pos, "%s() tuple elements must be strings", what);
        if (s.u.s.n <= self.u.s.n &&
            !memcmp(ends ? self.u.s.p + self.u.s.n - s.u.s.n : self.u.s.p, s.u.s.p, s.u.s.n)) {
            *out = jv_bool(1);
            return JR_OK;
        }
    }
    *out = jv_bool(0);
    return JR_OK;
}

/* Lines indented by `width` spaces (first line and blank lines optionally skipped). */
static jrc str_indent(jctx *c, uint32_t pos, jv s, double width, int first, int blank, jv *out) {
    if (width < 0)
        return jx_fail(c, pos, "indent: invalid width %g", width);
    if (width > 1 << 20)
        return jx_fail(c, pos, "unsupported: indent width %g", width);
    size_t w = (size_t)width;
    jbuf b = {0};
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    int line = 0;
    jrc rc = JR_OK;
    for (;;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (!((!first && line == 0) || (!blank && le == p)))
            for (size_t i = 0; i < w && !rc; i++)
                rc = jb_put(c, pos, &b, " ", 1);
        if (!rc)
            rc = jb_put(c, pos, &b, p, (size_t)(le - p));
        if (!rc && nl)
            rc = jb_put(c, pos, &b, "\n", 1);
        if (rc || !nl)
            break;
        p = nl + 1;
        line++;
    }
    if (rc) {
        jb_free(&b);
        return rc;
    }
    return jb_take(c, pos, &b, out);
}

/* ------------------------------------------------------------------ tests */

jrc jx_test(jctx *c, uint32_t pos, const char *name, size_t n, jv v, const jv *arg, int *res) {
#define T(lit) NAME_IS(name, n, lit)
    if (T("boolean"))
        *res = v.t == JV_BOOL;
    else if (T("callable"))
        *res = v.t == JV_FUNC;
    else if (T("odd") || T("even")) {
        if (v.t != JV_INT)
            return jx_fail(c, pos, "cannot test %.*s on %s", (int)n, name, jv_type_name(v));
        int odd = fmod(v.u.num, 2) != 0;
        *res = T("odd") ? odd : !odd;
    } else if (T("false"))
        *res = v.t == JV_BOOL && !v.u.b;
    else if (T("true"))
        *res = v.t == JV_BOOL && v.u.b;
    else if (T("none"))
        *res = v.t == JV_NULL;
    else if (T("string"))
        *res = v.t == JV_STR;
    else if (T("number"))
        *res = v.t == JV_INT || v.t == JV_FLOAT;
    else if (T("integer"))
        *res = v.t == JV_INT;
    else if (T("iterable"))
        *res = (v.t == JV_ARRAY && !v.u.a->tuple) || v.t == JV_STR;
    else if (T("mapping"))
        *res = v.t == JV_OBJECT;
    else if (T("sequence"))
        *res = v.t == JV_ARRAY || v.t == JV_OBJECT || v.t == JV_STR;
    else if (T("lower") || T("upper")) {
        *res = 0;
        if (v.t == JV_STR) {
            jv m;
            if ((T("lower") ? jv_lower : jv_upper)(c, pos, v, &m))
                return JR_ERR;
            *res = m.u.s.n == v.u.s.n && !memcmp(m.u.s.p, v.u.s.p, v.u.s.n);
        }
    } else if (T("defined"))
        *res = v.t != JV_UNDEF;
    else if (T("undefined"))
        *res = v.t == JV_UNDEF;
    else if (T("equalto") || T("eq")) {
        if (!arg)
            return jx_fail(c, pos, "the test '%.*s' needs a value to compare with", (int)n, name);
        *res = jv_strict_eq(v, *arg);
    } else
        return jx_fail(c, pos, "unknown test '%.*s'", (int)n, name);
#undef T
    return JR_OK;
}

/* ------------------------------------------------------------------ global functions */

static jrc fn_namespace(jctx *c, uint32_t pos, jv *args, size_t nargs, jv *out) {
    jobj *kw = pop_kwargs(args, &nargs);
    if (nargs > 1)
        return jx_fail(c, pos, "namespace() expected at most 1 argument, got %zu", nargs);
    jobj *ns = jv_new_obj(c, pos, 4);
    if (!ns)
        return JR_ERR;
    if (nargs == 1) {
        jv src = args[0];
        if (src.t == JV_OBJECT) {
            for (size_t i = 0; i < src.u.o->n; i++)
                if (jobj_set(c, pos, ns, src.u.o->kv[i].k, src.u.o->kv[i].kn, src.u.o->kv[i].v))
                    return JR_ERR;
        } else if (src.t == JV_ARRAY) {
            for (size_t i = 0; i < src.u.a->n; i++) {
                jv p = src.u.a->items[i], k, v;
                if (p.t == JV_ARRAY && p.u.a->n == 2) {
                    k = p.u.a->items[0];
                    v = p.u.a->items[1];
                } else if (p.t == JV_STR && jt_utf16_len(p.u.s.p, p.u.s.n) >= 2) {
                    size_t l1, l2;
                    tern_utf8_decode_loose((const unsigned char *)p.u.s.p, p.u.s.n, &l1);
                    if (l1 >= p.u.s.n)
                        goto bad_pair;
                    tern_utf8_decode_loose((const unsigned char *)p.u.s.p + l1, p.u.s.n - l1, &l2);
                    if (l1 + l2 != p.u.s.n)
                        goto bad_pair;
                    k = jv_str(p.u.s.p, l1);
                    v = jv_str(p.u.s.p + l1, l2);
                } else {
                bad_pair:
                    return jx_fail(c, pos, "namespace() expected an object or an iterable of [key, value] pairs");
                }
                if (k.t != JV_STR)
                    return jx_fail(c, pos, "namespace() keys must be strings");
                if (jobj_set(c, pos, ns, k.u.s.p, k.u.s.n, v))
                    return JR_ERR;
            }
        } else
            return jx_fail(c, pos, "namespace(): a %s is not iterable", jv_type_name(src));
    }
    for (size_t i = 0; kw && i < kw->n; i++)
        if (jobj_set(c, pos, ns, kw->kv[i].k, kw->kv[i].kn, kw->kv[i].v))
            return JR_ERR;
    *out = jv_obj(ns, JV_NS);
    return JR_OK;
}

static jrc fn_raise(jctx *c, uint32_t pos, jv *args, size_t nargs) {
    jbuf b = {0};
    jv m = nargs ? args[0] : jv_undef();
    jrc rc = jv_raw_string(c, pos, m, &b); /* null and undefined: Error(undefined), an empty message */
    if (!rc)
        rc = jb_put(c, pos, &b, "", 0);
    if (rc) {
        jb_free(&b);
        return rc;
    }
    jx_fail(c, pos, "raise_exception: %.*s", (int)(b.n > 65536 ? 65536 : b.n), b.p ? b.p : "");
    jb_free(&b);
    return JR_ERR;
}

static jrc fn_range(jctx *c, uint32_t pos, jv *args, size_t nargs, jv *out) {
    double v[3];
    int have[3] = {0, 0, 0};
    for (size_t i = 0; i < nargs && i < 3; i++) {
        if (args[i].t == JV_UNDEF)
            continue;
        if (args[i].t != JV_INT && args[i].t != JV_FLOAT)
            return jx_fail(c, pos, "range() arguments must be numbers, not %s", jv_type_name(args[i]));
        v[i] = args[i].u.num;
        have[i] = 1;
    }
    if (nargs > 3)
        return jx_fail(c, pos, "range() takes at most 3 arguments");
    double start = have[0] ? v[0] : NAN, stop, step = have[2] ? v[2] : 1;
    if (!have[1]) {
        stop = start;
        start = 0;
    } else
        stop = v[1];
    if (!have[0] && !have[1]) { /* range() / range(undefined): nothing */
        *out = jv_arr(jv_new_arr(c, pos, 0));
        return out->u.a ? JR_OK : JR_ERR;
    }
    if (step == 0)
        return jx_fail(c, pos, "range() step must not be zero");
    double span = step > 0 ? (stop - start) / step : (start - stop) / -step;
    if (isnan(span) || span > 50000000)
        return jx_fail(c, pos, "range() of %g items is too large", span);
    /* count exactly as the loop below steps (fractional steps accumulate rounding) */
    size_t count = 0;
    for (double i = start; (step > 0 ? i < stop : i > stop) && count <= 50000001; i += step)
        count++;
    if (count > 50000000 || jx_charge(c, pos, count))
        return count > 50000000 ? jx_fail(c, pos, "range() of %zu items is too large", count) : JR_ERR;
    jarr *a = jv_new_arr(c, pos, count);
    if (!a)
        return JR_ERR;
    size_t k = 0;
    for (double i = start; k < count; i += step)
        a->items[k++] = i == floor(i) && isfinite(i) ? jv_int(i) : jv_float(i);
    *out = jv_arr(a);
    return JR_OK;
}

static jrc fn_strftime(jctx *c, uint32_t pos, jv *args, size_t nargs, jv *out) {
    if (nargs < 1 || args[0].t != JV_STR)
        return jx_fail(c, pos, "strftime_now() needs a format string");
    static const char *const months[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};
    time_t now = c->lim.now ? (time_t)c->lim.now : time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm))
        return jx_fail(c, pos, "strftime_now(): cannot read the clock");
    const char *f = args[0].u.s.p;
    size_t n = args[0].u.s.n;
    jbuf b = {0};
    jrc rc = JR_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        char tmp[32];
        int tn = -1;
        if (f[i] == '%' && i + 1 < n) {
            switch (f[i + 1]) {
            case 'Y': tn = snprintf(tmp, sizeof tmp, "%d", tm.tm_year + 1900); break;
            case 'm': tn = snprintf(tmp, sizeof tmp, "%02d", tm.tm_mon + 1); break;
            case 'd': tn = snprintf(tmp, sizeof tmp, "%02d", tm.tm_mday); break;
            case 'b': tn = snprintf(tmp, sizeof tmp, "%.3s", months[tm.tm_mon]); break;
            case 'B': tn = snprintf(tmp, sizeof tmp, "%s", months[tm.tm_mon]); break;
            case 'H': tn = snprintf(tmp, sizeof tmp, "%02d", tm.tm_hour); break;
            case 'M': tn = snprintf(tmp, sizeof tmp, "%02d", tm.tm_min); break;
            case '%': tn = snprintf(tmp, sizeof tmp, "%%"); break;
            default: break;
            }
        }
        if (tn >= 0) {
            rc = jb_put(c, pos, &b, tmp, (size_t)tn);
            i++;
        } else
            rc = jb_put(c, pos, &b, f + i, 1);
    }
    if (rc) {
        jb_free(&b);
        return rc;
    }
    return jb_take(c, pos, &b, out);
}

static jrc obj_dictsort(jctx *c, uint32_t pos, jobj *o, jv *args, size_t nargs, jv *out) {
    jobj *kw = NULL;
    jv posargs[3];
    size_t np = 0;
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].t == JV_OBJECT && args[i].u.o->kwargs)
            kw = args[i].u.o;
        else if (np < 3)
            posargs[np++] = args[i];
    }
    const jv *cs = arg_or_kw(posargs, np, kw, 0, "case_sensitive");
    const jv *by = arg_or_kw(posargs, np, kw, 1, "by");
    const jv *rev = arg_or_kw(posargs, np, kw, 2, "reverse");
    if (cs && cs->t != JV_BOOL)
        return jx_fail(c, pos, "dictsort: case_sensitive must be a boolean");
    if (by && by->t != JV_STR)
        return jx_fail(c, pos, "dictsort: by must be a string");
    int by_value = 0;
    if (by) {
        if (NAME_IS(by->u.s.p, by->u.s.n, "value"))
            by_value = 1;
        else if (!NAME_IS(by->u.s.p, by->u.s.n, "key"))
            return jx_fail(c, pos, "dictsort: by must be either 'key' or 'value'");
    }
    if (rev && rev->t != JV_BOOL)
        return jx_fail(c, pos, "dictsort: reverse must be a boolean");
    sort_opts so = {cs ? cs->u.b : 0, rev ? rev->u.b : 0, NULL, 0, by_value};
    if (jx_obj_items(c, pos, o, out))
        return JR_ERR;
    return sort_values(c, pos, out->u.a->items, out->u.a->n, cmp_pairs, &so);
}

jrc jx_call_builtin(jctx *c, uint32_t pos, const jfunc *f, jv *args, size_t nargs, jenv *env, jv *out) {
    jv self = f->self;
    switch (f->builtin) {
    case JB_NAMESPACE: return fn_namespace(c, pos, args, nargs, out);
    case JB_RAISE: return fn_raise(c, pos, args, nargs);
    case JB_RANGE:
        if (nargs && args[nargs - 1].t == JV_OBJECT && args[nargs - 1].u.o->kwargs)
            return jx_fail(c, pos, "range() takes no keyword arguments");
        return fn_range(c, pos, args, nargs, out);
    case JB_STRFTIME: return fn_strftime(c, pos, args, nargs, out);
    case JB_S_UPPER: return jv_upper(c, pos, self, out);
    case JB_S_LOWER: return jv_lower(c, pos, self, out);
    case JB_S_STRIP: return str_trim(self, 1, 1, out);
    case JB_S_LSTRIP: return str_trim(self, 1, 0, out);
    case JB_S_RSTRIP: return str_trim(self, 0, 1, out);
    case JB_S_TITLE: return str_title(c, pos, self, out);
    case JB_S_CAPITALIZE: return str_capitalize(c, pos, self, out);
    case JB_S_STARTSWITH: return str_affix(c, pos, self, args, nargs, 0, out);
    case JB_S_ENDSWITH: return str_affix(c, pos, self, args, nargs, 1, out);
    case JB_S_SPLIT: return str_split(c, pos, self, args, nargs, out);
    case JB_S_REPLACE: return str_replace(c, pos, self, args, nargs, out);
    case JB_O_GET: {
        if (nargs < 1 || args[0].t != JV_STR)
            return jx_fail(c, pos, "get(): the key must be a string, got %s", nargs ? jv_type_name(args[0]) : "nothing");
        jv *v = jobj_get(self.u.o, args[0].u.s.p, args[0].u.s.n);
        *out = v ? *v : nargs > 1 ? args[1] : jv_null();
        return JR_OK;
    }
    case JB_O_ITEMS: return jx_obj_items(c, pos, self.u.o, out);
    case JB_O_KEYS: return jx_obj_keys(c, pos, self.u.o, out);
    case JB_O_VALUES: return obj_values(c, pos, self.u.o, out);
    case JB_O_DICTSORT: return obj_dictsort(c, pos, self.u.o, args, nargs, out);
    }
    return jx_fail(c, pos, "unknown built-in function");
}

/* ------------------------------------------------------------------ filters */

static jrc unknown_filter(jctx *c, uint32_t pos, const char *name, size_t n, jv v) {
    return jx_fail(c, pos, "unknown filter '%.*s' for a %s", (int)n, name, jv_type_name(v));
}

static jrc filter_select(jctx *c, uint32_t pos, jv v, jv *args, size_t nargs, int keep_if, jv *out);

/* ---- filters written without arguments ("x | name"): one function each, found by name and value type ---- */

typedef jrc (*plain_fn)(jctx *c, uint32_t pos, jv v, jv *out);

static jrc pf_self(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    *out = v;
    return JR_OK;
}

static jrc pf_tojson(jctx *c, uint32_t pos, jv v, jv *out) {
    jjson_opts o = {.undef_to_null = 1};
    jbuf b = {0};
    if (jv_to_json(c, pos, v, &o, 0, &b)) {
        jb_free(&b);
        return JR_ERR;
    }
    return jb_take(c, pos, &b, out);
}

static jrc pf_first(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    *out = v.u.a->n ? v.u.a->items[0] : jv_undef();
    return JR_OK;
}

static jrc pf_last(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    *out = v.u.a->n ? v.u.a->items[v.u.a->n - 1] : jv_undef();
    return JR_OK;
}

static jrc pf_length(jctx *c, uint32_t pos, jv v, jv *out) {
    if (v.t == JV_STR) {
        *out = jv_int((double)jt_utf16_len(v.u.s.p, v.u.s.n));
        return jx_charge(c, pos, v.u.s.n >> 6);
    }
    *out = jv_int((double)(v.t == JV_ARRAY ? v.u.a->n : v.u.o->n));
    return JR_OK;
}

static jrc pf_reverse(jctx *c, uint32_t pos, jv v, jv *out) {
    jarr *a = v.u.a, *r = jv_new_arr(c, pos, a->n);
    if (!r)
        return JR_ERR;
    for (size_t i = 0; i < a->n; i++)
        r->items[i] = a->items[a->n - 1 - i];
    *out = jv_arr(r);
    return JR_OK;
}

static jrc pf_sort(jctx *c, uint32_t pos, jv v, jv *out) {
    jarr *a = v.u.a, *r = jv_new_arr(c, pos, a->n);
    if (!r)
        return JR_ERR;
    if (a->n)
        memcpy(r->items, a->items, a->n * sizeof(jv));
    sort_opts so = {0};
    *out = jv_arr(r);
    return sort_values(c, pos, r->items, r->n, cmp_items, &so);
}

/* An array's items joined as their raw strings (join), or the array as JSON text (string). */
static jrc arr_text(jctx *c, uint32_t pos, jv v, int as_json, jv *out) {
    jbuf b = {0};
    jrc rc = JR_OK;
    if (as_json) {
        jjson_opts o = {0};
        rc = jv_to_json(c, pos, v, &o, 0, &b);
    } else
        for (size_t i = 0; i < v.u.a->n && !rc; i++)
            rc = jv_raw_string(c, pos, v.u.a->items[i], &b);
    if (rc) {
        jb_free(&b);
        return rc;
    }
    return jb_take(c, pos, &b, out);
}
static jrc pf_arr_join(jctx *c, uint32_t pos, jv v, jv *out) { return arr_text(c, pos, v, 0, out); }
static jrc pf_arr_string(jctx *c, uint32_t pos, jv v, jv *out) { return arr_text(c, pos, v, 1, out); }

/* Python Jinja's select/reject with no test: truthiness */
static jrc pf_select(jctx *c, uint32_t pos, jv v, jv *out) { return filter_select(c, pos, v, NULL, 0, 1, out); }
static jrc pf_reject(jctx *c, uint32_t pos, jv v, jv *out) { return filter_select(c, pos, v, NULL, 0, 0, out); }

static jrc pf_unique(jctx *c, uint32_t pos, jv v, jv *out) {
    jarr *a = v.u.a, *r = jv_new_arr(c, pos, a->n);
    if (!r)
        return JR_ERR;
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (jx_charge(c, pos, k))
            return JR_ERR;
        int seen = 0;
        for (size_t j = 0; j < k && !seen; j++) {
            jv x = r->items[j], y = a->items[i];
            /* Set membership is SameValueZero on the underlying values */
            seen = jv_strict_eq(x, y) || ((x.t == JV_INT || x.t == JV_FLOAT) && (y.t == JV_INT || y.t == JV_FLOAT) &&
                                          isnan(x.u.num) && isnan(y.u.num));
        }
        if (!seen)
            r->items[k++] = a->items[i];
    }
    r->n = k;
    *out = jv_arr(r);
    return JR_OK;
}

static jrc pf_upper(jctx *c, uint32_t pos, jv v, jv *out) { return jv_upper(c, pos, v, out); }
static jrc pf_lower(jctx *c, uint32_t pos, jv v, jv *out) { return jv_lower(c, pos, v, out); }
static jrc pf_title(jctx *c, uint32_t pos, jv v, jv *out) { return str_title(c, pos, v, out); }
static jrc pf_capitalize(jctx *c, uint32_t pos, jv v, jv *out) { return str_capitalize(c, pos, v, out); }
static jrc pf_trim(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    return str_trim(v, 1, 1, out);
}
static jrc pf_indent(jctx *c, uint32_t pos, jv v, jv *out) { return str_indent(c, pos, v, 4, 0, 0, out); }

/* int and float: a string parsed as JavaScript's parseInt/parseFloat (NaN: 0), a number or boolean converted
 * (int truncates toward minus infinity, as floor). */
static jrc to_number(jv v, int as_int, jv *out) {
    double d;
    if (v.t == JV_STR) {
        d = as_int ? jt_parse_int(v.u.s.p, v.u.s.n) : jt_parse_float(v.u.s.p, v.u.s.n);
        d = isnan(d) ? 0 : d;
    } else
        d = v.t == JV_BOOL ? v.u.b : as_int ? floor(v.u.num) : v.u.num;
    *out = as_int ? jv_int(d) : jv_float(d);
    return JR_OK;
}
static jrc pf_int(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    return to_number(v, 1, out);
}
static jrc pf_float(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    return to_number(v, 0, out);
}

static jrc pf_abs(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    *out = v.t == JV_INT ? jv_int(fabs(v.u.num)) : jv_float(fabs(v.u.num));
    return JR_OK;
}

static jrc pf_num_string(jctx *c, uint32_t pos, jv v, jv *out) {
    jbuf b = {0};
    if (jv_display(c, pos, v, &b)) {
        jb_free(&b);
        return JR_ERR;
    }
    return jb_take(c, pos, &b, out);
}

static jrc pf_bool_string(jctx *c, uint32_t pos, jv v, jv *out) {
    (void)c, (void)pos;
    *out = v.u.b ? jv_str("true", 4) : jv_str("false", 5);
    return JR_OK;
}

static jrc pf_items(jctx *c, uint32_t pos, jv v, jv *out) { return jx_obj_items(c, pos, v.u.o, out); }

#define ON(t) (1u << (t))
#define NUM (ON(JV_INT) | ON(JV_FLOAT))
#define ANY (~0u)
/* The value types a filter takes without arguments, as @huggingface/jinja has them. */
static const struct {
    const char *name;
    unsigned types;
    plain_fn fn;
} PLAIN[] = {
    {"safe", ANY, pf_self},
    {"tojson", ANY, pf_tojson},
    {"list", ON(JV_ARRAY), pf_self},
    {"first", ON(JV_ARRAY), pf_first},
    {"last", ON(JV_ARRAY), pf_last},
    {"length", ON(JV_ARRAY) | ON(JV_STR) | ON(JV_OBJECT), pf_length},
    {"reverse", ON(JV_ARRAY), pf_reverse},
    {"sort", ON(JV_ARRAY), pf_sort},
    {"join", ON(JV_ARRAY), pf_arr_join},
    {"string", ON(JV_ARRAY), pf_arr_string},
    {"select", ON(JV_ARRAY), pf_select},
    {"reject", ON(JV_ARRAY), pf_reject},
    {"unique", ON(JV_ARRAY), pf_unique},
    {"upper", ON(JV_STR), pf_upper},
    {"lower", ON(JV_STR), pf_lower},
    {"title", ON(JV_STR), pf_title},
    {"capitalize", ON(JV_STR), pf_capitalize},
    {"trim", ON(JV_STR), pf_trim},
    {"indent", ON(JV_STR), pf_indent},
    {"join", ON(JV_STR), pf_self},
    {"string", ON(JV_STR), pf_self},
    {"int", ON(JV_STR) | NUM | ON(JV_BOOL), pf_int},
    {"float", ON(JV_STR) | NUM | ON(JV_BOOL), pf_float},
    {"abs", NUM, pf_abs},
    {"string", NUM, pf_num_string},
    {"items", ON(JV_OBJECT), pf_items},
    {"bool", ON(JV_BOOL), pf_self},
    {"string", ON(JV_BOOL), pf_bool_string},
};
/* The types that have filters of their own; a filter on any other (undefined, null, a function, ...) is refused
 * whatever its name, but for those that take ANY. */
#define TYPED (ON(JV_ARRAY) | ON(JV_STR) | NUM | ON(JV_OBJECT) | ON(JV_BOOL))

static jrc filter_plain(jctx *c, uint32_t pos, jv v, const char *name, size_t n, jenv *env, jv *out) {
    const unsigned type = ON(v.t);
    for (size_t i = 0; i < sizeof PLAIN / sizeof PLAIN[0]; i++)
        if ((PLAIN[i].types & type) && strlen(PLAIN[i].name) == n && !memcmp(name, PLAIN[i].name, n))
            return PLAIN[i].fn(c, pos, v, out);
    if (!(type & TYPED))
        return jx_fail(c, pos, "cannot apply the filter '%.*s' to a %s", (int)n, name, jv_type_name(v));
    if (v.t == JV_OBJECT) { /* an object's own methods, called without arguments: "x | keys" */
        int oom = 0;
        jv m = jx_builtin_member(c, v, name, n, &oom);
        if (oom)
            return jx_fail(c, pos, "out of memory");
        if (m.t == JV_FUNC)
            return jx_call_builtin(c, pos, m.u.f, NULL, 0, env, out);
    }
    return unknown_filter(c, pos, name, n, v);
}
#undef ON
#undef NUM
#undef ANY
#undef TYPED

static jrc filter_call(jctx *c, uint32_t pos, jv v, const char *name, size_t n, jv *args, size_t nargs, jobj *kw,
                       jenv *env, const jnode *node, jv *out);

/* tojson(indent=, ensure_ascii=, sort_keys=, separators=) — keyword arguments only. */
static jrc filter_tojson(jctx *c, uint32_t pos, jv v, jobj *kw, jv *out) {
    jjson_opts o = {.undef_to_null = 1};
    jv *ind = kw ? jobj_get(kw, "indent", 6) : NULL;
    if (ind && ind->t != JV_INT && ind->t != JV_NULL)
        return jx_fail(c, pos, "tojson: indent must be an integer");
    if (ind && ind->t == JV_INT) {
        if (ind->u.num < 0)
            return jx_fail(c, pos, "tojson: invalid indent %g", ind->u.num);
        if (ind->u.num > 4096)
            return jx_fail(c, pos, "unsupported: tojson indent %g", ind->u.num);
        o.indent = (int)ind->u.num;
    }
    jv *ea = kw ? jobj_get(kw, "ensure_ascii", 12) : NULL;
    if (ea && ea->t != JV_BOOL)
        return jx_fail(c, pos, "tojson: ensure_ascii must be a boolean");
    o.ensure_ascii = ea && ea->u.b;
    jv *sk = kw ? jobj_get(kw, "sort_keys", 9) : NULL;
    if (sk && sk->t != JV_BOOL)
        return jx_fail(c, pos, "tojson: sort_keys must be a boolean");
    o.sort_keys = sk && sk->u.b;
    jv *sep = kw ? jobj_get(kw, "separators", 10) : NULL;
    if (sep && sep->t == JV_ARRAY) {
        if (sep->u.a->n != 2 || sep->u.a->items[0].t != JV_STR || sep->u.a->items[1].t != JV_STR)
            return jx_fail(c, pos, "tojson: separators must be a tuple of two strings");
        o.item_sep = sep->u.a->items[0].u.s.p;
        o.item_sep_n = sep->u.a->items[0].u.s.n;
        o.key_sep = sep->u.a->items[1].u.s.p;
        o.key_sep_n = sep->u.a->items[1].u.s.n;
    } else if (sep && sep->t != JV_NULL)
        return jx_fail(c, pos, "tojson: separators must be a tuple of two strings");
    jbuf b = {0};
    if (jv_to_json(c, pos, v, &o, 0, &b)) {
        jb_free(&b);
        return JR_ERR;
    }
    return jb_take(c, pos, &b, out);
}

/* select/reject (Python Jinja; the reference lacks them): keep items passing a test. */
static jrc filter_select(jctx *c, uint32_t pos, jv v, jv *args, size_t nargs, int keep_if, jv *out) {
    jarr *a = v.u.a, *r = jv_new_arr(c, pos, a->n);
    if (!r)
        return JR_ERR;
    if (nargs && args[0].t != JV_STR)
        return jx_fail(c, pos, "select/reject: the test name must be a string");
    if (jx_charge(c, pos, a->n))
        return JR_ERR;
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        int res;
        if (!nargs)
            res = jv_truthy(a->items[i]);
        else if (jx_test(c, pos, args[0].u.s.p, args[0].u.s.n, a->items[i], nargs > 1 ? &args[1] : NULL, &res))
            return JR_ERR;
        if (!!res == keep_if)
            r->items[k++] = a->items[i];
    }
    r->n = k;
    *out = jv_arr(r);
    return JR_OK;
}

static jrc filter_selectattr(jctx *c, uint32_t pos, jv v, const jnode *node, jenv *env, int select, jv *out) {
    jarr *a = v.u.a;
    for (size_t i = 0; i < a->n; i++)
        if (a->items[i].t != JV_OBJECT && a->items[i].t != JV_NS)
            return jx_fail(c, pos, "%s can only be applied to a list of objects", select ? "selectattr" : "rejectattr");
    jv s[3];
    size_t ns = 0;
    for (size_t i = 0; i < node->body.n; i++) {
        if (node->body.v[i]->kind != E_STR)
            return jx_fail(c, node->body.v[i]->pos, "the arguments of %s must be string literals",
                           select ? "selectattr" : "rejectattr");
        if (ns < 3)
            s[ns++] = jv_str(node->body.v[i]->s, node->body.v[i]->n);
    }
    if (ns == 0)
        return jx_fail(c, pos, "%s needs an attribute name", select ? "selectattr" : "rejectattr");
    jarr *r = jv_new_arr(c, pos, a->n);
    if (!r)
        return JR_ERR;
    if (jx_charge(c, pos, a->n))
        return JR_ERR;
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        jv *attr = jobj_get(a->items[i].u.o, s[0].u.s.p, s[0].u.s.n);
        int res = 0;
        if (attr) {
            if (ns >= 2) {
                if (jx_test(c, pos, s[1].u.s.p, s[1].u.s.n, *attr, ns >= 3 ? &s[2] : NULL, &res))
                    return JR_ERR;
            } else
                res = jv_truthy(*attr);
        }
        if (!!res == select)
            r->items[k++] = a->items[i];
    }
    r->n = k;
    *out = jv_arr(r);
    return JR_OK;
}

static jrc filter_map(jctx *c, uint32_t pos, jv v, jv *args, size_t nargs, jobj *kw, jenv *env, jv *out) {
    jarr *a = v.u.a, *r = jv_new_arr(c, pos, a->n);
    if (!r)
        return JR_ERR;
    if (jx_charge(c, pos, a->n))
        return JR_ERR;
    jv *attr = kw ? jobj_get(kw, "attribute", 9) : NULL;
    if (attr) {
        if (attr->t != JV_STR)
            return jx_fail(c, pos, "map: attribute must be a string");
        jv *dflt = jobj_get(kw, "default", 7);
        for (size_t i = 0; i < a->n; i++) {
            jv item = a->items[i];
            if (item.t != JV_OBJECT && item.t != JV_NS)
                return jx_fail(c, pos, "map: items must be objects");
            jv got = attribute_path(item, attr->u.s.p, attr->u.s.n);
            r->items[i] = got.t == JV_UNDEF && dflt ? *dflt : got;
        }
        *out = jv_arr(r);
        return JR_OK;
    }
    /* Python Jinja's map('filter', args...): the reference does not support it */
    if (nargs < 1 || args[0].t != JV_STR)
        return jx_fail(c, pos, "map needs attribute= or a filter name");
    jobj *rest_kw = kw && kw->n ? kw : NULL;
    for (size_t i = 0; i < a->n; i++) {
        jrc rc = (nargs > 1 || rest_kw)
                     ? filter_call(c, pos, a->items[i], args[0].u.s.p, args[0].u.s.n, args + 1, nargs - 1, rest_kw, env, NULL,
                                   &r->items[i])
                     : filter_plain(c, pos, a->items[i], args[0].u.s.p, args[0].u.s.n, env, &r->items[i]);
        if (rc)
            return rc;
    }
    *out = jv_arr(r);
    return JR_OK;
}

/* Filters written with an argument list ("x | name(...)"). `node` is the call (for the
 * filters that inspect their argument syntax), NULL when called from map(). */
static jrc filter_call(jctx *c, uint32_t pos, jv v, const char *name, size_t n, jv *args, size_t nargs, jobj *kw,
                       jenv *env, const jnode *node, jv *out) {
#define F(lit) NAME_IS(name, n, lit)
    if (F("tojson"))
        return filter_tojson(c, pos, v, kw, out);
    if (F("join")) {
        if (v.t != JV_STR && v.t != JV_ARRAY)
            return jx_fail(c, pos, "cannot apply the filter 'join' to a %s", jv_type_name(v));
        const jv *sep = arg_or_kw(args, nargs, kw, 0, "separator");
        if (sep && sep->t != JV_STR)
            return jx_fail(c, pos, "join: the separator must be a string");
        jbuf b = {0};
        jrc rc = JR_OK;
        if (v.t == JV_STR) {
            for (size_t i = 0; i < v.u.s.n && !rc;) {
                size_t cl;
                tern_utf8_decode_loose((const unsigned char *)v.u.s.p + i, v.u.s.n - i, &cl);
                if (i && sep)
                    rc = jb_put(c, pos, &b, sep->u.s.p, sep->u.s.n);
                if (!rc)
                    rc = jb_put(c, pos, &b, v.u.s.p + i, cl);
                i += cl;
            }
        } else
            for (size_t i = 0; i < v.u.a->n && !rc; i++) {
                if (i && sep)
                    rc = jb_put(c, pos, &b, sep->u.s.p, sep->u.s.n);
                if (!rc)
                    rc = jv_raw_string(c, pos, v.u.a->items[i], &b);
            }
        if (rc) {
            jb_free(&b);
            return rc;
        }
        return jb_take(c, pos, &b, out);
    }
    if (F("int") || F("float")) {
        const jv *d = arg_or_kw(args, nargs, kw, 0, "default");
        jv dflt = d ? *d : F("int") ? jv_int(0) : jv_float(0);
        if (v.t == JV_STR) {
            double x = F("int") ? jt_parse_int(v.u.s.p, v.u.s.n) : jt_parse_float(v.u.s.p, v.u.s.n);
            *out = isnan(x) ? dflt : F("int") ? jv_int(x) : jv_float(x);
        } else if (v.t == JV_INT || v.t == JV_FLOAT)
            *out = v;
        else if (v.t == JV_BOOL)
            *out = F("int") ? jv_int(v.u.b) : jv_float(v.u.b);
        else
            return jx_fail(c, pos, "cannot apply the filter '%.*s' to a %s", (int)n, name, jv_type_name(v));
        return JR_OK;
    }
    if (F("default")) {
        jv dflt = nargs > 0 ? args[0] : jv_str("", 0);
        const jv *flag = arg_or_kw(args, nargs, kw, 1, "boolean");
        if (flag && flag->t != JV_BOOL)
            return jx_fail(c, pos, "the 'default' filter's flag must be a boolean");
        *out = (v.t == JV_UNDEF || (flag && flag->u.b && !jv_truthy(v))) ? dflt : v;
        return JR_OK;
    }
    if (v.t == JV_ARRAY) {
        if (F("sort")) {
            const jv *rev = arg_or_kw(args, nargs, kw, 0, "reverse");
            const jv *cs = arg_or_kw(args, nargs, kw, 1, "case_sensitive");
            const jv *attr = arg_or_kw(args, nargs, kw, 2, "attribute");
            if (rev && rev->t != JV_BOOL)
                return jx_fail(c, pos, "sort: reverse must be a boolean");
            if (cs && cs->t != JV_BOOL)
                return jx_fail(c, pos, "sort: case_sensitive must be a boolean");
            if (attr && attr->t != JV_STR && attr->t != JV_INT && attr->t != JV_NULL)
                return jx_fail(c, pos, "sort: attribute must be a string, integer, or none");
            sort_opts so = {cs ? cs->u.b : 0, rev ? rev->u.b : 0, NULL, 0, 0};
            char num[48];
            if (attr && attr->t == JV_STR) {
                so.attr = attr->u.s.p;
                so.attr_n = attr->u.s.n;
            } else if (attr && attr->t == JV_INT) {
                so.attr_n = jt_num_str(attr->u.num, num);
                so.attr = num;
            }
            jarr *r = jv_new_arr(c, pos, v.u.a->n);
            if (!r)
                return JR_ERR;
            if (r->n)
                memcpy(r->items, v.u.a->items, r->n * sizeof(jv));
            *out = jv_arr(r);
            return sort_values(c, pos, r->items, r->n, cmp_items, &so);
        }
        if (F("selectattr") || F("rejectattr")) {
            if (!node)
                return jx_fail(c, pos, "unsupported: %.*s inside map()", (int)n, name);
            return filter_selectattr(c, pos, v, node, env, F("selectattr"), out);
        }
        if (F("map"))
            return filter_map(c, pos, v, args, nargs, kw, env, out);
        if (F("select") || F("reject"))
            return filter_select(c, pos, v, args, nargs, F("select"), out);
        goto unknown;
    }
    if (v.t == JV_STR) {
        if (F("indent")) {
            const jv *w = arg_or_kw(args, nargs, kw, 0, "width");
            if (w && w->t != JV_INT)
                return jx_fail(c, pos, "indent: width must be an integer");
            const jv *first = arg_or_kw(args, nargs, kw, 1, "first");
            const jv *blank = arg_or_kw(args, nargs, kw, 2, "blank");
            return str_indent(c, pos, v, w ? w->u.num : 4, first && raw_truthy(*first), blank && raw_truthy(*blank), out);
        }
        if (F("replace")) {
            jv *all = jx_alloc(c, pos, (nargs + 1) * sizeof *all);
            if (!all)
                return JR_ERR;
            if (nargs)
                memcpy(all, args, nargs * sizeof *all);
            jobj *k = kw;
            if (!k) {
                if (!(k = jv_new_obj(c, pos, 0)))
                    return JR_ERR;
                k->kwargs = 1;
            }
            all[nargs] = jv_obj(k, JV_OBJECT);
            return str_replace(c, pos, v, all, nargs + 1, out);
        }
        goto unknown;
    }
    if (v.t == JV_OBJECT) {
        int oom = 0;
        jv m = jx_builtin_member(c, v, name, n, &oom);
        if (oom)
            return jx_fail(c, pos, "out of memory");
        if (m.t == JV_FUNC) {
            jv *all = jx_alloc(c, pos, (nargs + 1) * sizeof *all);
            if (!all)
                return JR_ERR;
            if (nargs)
                memcpy(all, args, nargs * sizeof *all);
            size_t na = nargs;
            if (kw && kw->n)
                all[na++] = jv_obj(kw, JV_OBJECT);
            return jx_call_builtin(c, pos, m.u.f, all, na, env, out);
        }
        goto unknown;
    }
    return jx_fail(c, pos, "cannot apply the filter '%.*s' to a %s", (int)n, name, jv_type_name(v));
unknown:
#undef F
    return unknown_filter(c, pos, name, n, v);
}

jrc jx_apply_filter(jctx *c, jv operand, const jnode *filter, jenv *env, jv *out) {
    if (filter->kind == E_IDENT)
        return filter_plain(c, filter->pos, operand, filter->s, filter->n, env, out);
    if (filter->kind != E_CALL || filter->a->kind != E_IDENT)
        return jx_fail(c, filter->pos, "unsupported filter expression");
    const jnode *name = filter->a;
    jv *args = NULL;
    size_t nargs = 0;
    jobj *kw = NULL;
    jrc rc;
    int is_selectattr = NAME_IS(name->s, name->n, "selectattr") || NAME_IS(name->s, name->n, "rejectattr");
    /* selectattr/rejectattr take their (literal) arguments from the syntax */
    if (!(is_selectattr && operand.t == JV_ARRAY) && (rc = jx_eval_args(c, &filter->body, env, &args, &nargs, &kw)))
        return rc;
    return filter_call(c, name->pos, operand, name->s, name->n, args, nargs, kw, env, filter, out);
}
