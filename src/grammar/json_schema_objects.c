/* json_schema_objects.c — objects for the JSON Schema converter: properties in the schema's order, required and
 * optional members, and additional properties whose keys exclude the listed names (a trie of the names walked into
 * alternatives). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "grammar/json_schema_internal.h"

/* The next character of each word w[i] at byte pos: where the run of words sharing it ends, with its length. */
static size_t next_char_run(const char **w, size_t i, size_t k, size_t pos, uint32_t *cp, int *len) {
    *cp = 0;
    *len = tern_utf8_decode((const unsigned char *)w[i] + pos, strlen(w[i]) - pos, cp);
    size_t j = i;
    while (j < k && !memcmp(w[j] + pos, w[i] + pos, (size_t)*len))
        j++;
    return j;
}

/* The alternative for a key whose first character is none of the edges: that character, then anything. */
static TERN_MUST_CHECK tern_err *other_first(conv *c, const tern_cpset *edges, const char *any, sbuf *o) {
    sbuf other = {0};
    tern_err *err = NULL;
    if (c->d->key_class) { /* the key alphabet, [A-Za-z0-9_], less the edges */
        tern_cpset s = {0};
        tern_cpset_add(&s, '0', '9'), tern_cpset_add(&s, 'A', 'Z'), tern_cpset_add(&s, 'a', 'z'), tern_cpset_add(&s, '_', '_');
        tern_cpset_norm(&s);
        for (size_t r = 0; r < edges->n; r++)
            tern_cpset_remove(&s, edges->r[r].lo, edges->r[r].hi);
        if (s.n)
            js_class_of(&other, &s);
        other.oom |= s.oom;
        tern_cpset_free(&s);
    } else {
        tern_cpset s = {0};
        tern_cpset_add(&s, 0, 0x1f), tern_cpset_add(&s, '"', '"'), tern_cpset_add(&s, '\\', '\\');
        for (size_t r = 0; r < edges->n; r++)
            tern_cpset_add(&s, edges->r[r].lo, edges->r[r].hi);
        tern_cpset_norm(&s);
        js_class_ranges(&other, &s, 1);
        other.oom |= s.oom;
        tern_cpset_free(&s);
        char letters[16];
        size_t nl = 0;
        int ctl_edge = 0;
        for (size_t e = 0; e < JS_N_SHORT_ESC; e++)
            if (!tern_cpset_has(edges, JS_SHORT_ESC[e].cp))
                letters[nl++] = JS_SHORT_ESC[e].esc;
        for (uint32_t cp = 0; cp < 0x20; cp++)
            ctl_edge |= tern_cpset_has(edges, cp);
        sbuf t = {0};
        sbuf_adds(&t, "\"\\\\\" [");
        for (size_t e = 0; e < nl; e++)
            js_class_char(&t, (unsigned char)letters[e]);
        sbuf_adds(&t, "]");
        js_alt_push(&other, t.p);
        other.oom |= t.oom;
        sbuf_free(&t);
        if (!ctl_edge) {
            const char *hex;
            err = js_prim(c, P_HEX, &hex);
            if (!err)
                sbuf_printf(&other, " | \"\\\\u00\" [01] %s", hex);
        }
    }
    if (!err && other.len) {
        js_seq_push(o, other.p);
        js_atom_push(o, any, "*");
    }
    o->oom |= other.oom;
    sbuf_free(&other);
    return err;
}

static TERN_MUST_CHECK tern_err *not_words(conv *c, const char **w, size_t k, size_t pos, int allow_empty, sbuf *o);

/* not_words' alternatives, joined by '|' into o: a branch per next character of the words, then `other`. */
static TERN_MUST_CHECK tern_err *branches(conv *c, const char **w, size_t k, size_t pos, int is_word_end,
                                          const char *any, const char *other, sbuf *o) {
    tern_err *err = NULL;
    size_t n = 0;
    for (size_t i = is_word_end; i < k && !err; n++) {
        uint32_t cp;
        int len;
        const size_t j = next_char_run(w, i, k, pos, &cp, &len);
        if (n)
            sbuf_adds(o, " | ");
        if (c->d->raw_text) {
            tern_gbnf_literal(o, w[i] + pos, (size_t)len);
        } else {
            sbuf t = {0};
            js_json_str(&t, w[i] + pos, (size_t)len), tern_gbnf_literal(o, t.p + 1, t.len - 2);
            o->oom |= t.oom;
            sbuf_free(&t);
        }
        if (j - i == 1 && strlen(w[i]) == pos + (size_t)len)
            js_atom_push(o, any, "+");
        else
            err = not_words(c, w + i, j - i, pos + (size_t)len, 1, o);
        i = j;
    }
    if (!err && *other)
        sbuf_adds(o, n ? " | " : ""), sbuf_adds(o, other);
    return err;
}

/* Keys other than the given words (sorted, distinct, each in the key alphabet): a trie walked into alternatives,
 * written into o a level at a time (building each level apart copied every deeper one again: quadratic in a key's
 * length). JSON keys are string contents (characters written in one canonical escaping where a word's character
 * is concerned); Gemma keys are [A-Za-z0-9_]+. */
static TERN_MUST_CHECK tern_err *not_words(conv *c, const char **w, size_t k, size_t pos, int allow_empty, sbuf *o) {
    const char *any = c->d->key_class;
    if (!any)
        TERN_TRY(js_prim(c, P_CHAR, &any));
    const int is_word_end = k && strlen(w[0]) == pos;
    tern_cpset edges = {0};
    size_t n_alts = 0;
    for (size_t i = is_word_end; i < k; n_alts++) {
        uint32_t cp;
        int len;
        i = next_char_run(w, i, k, pos, &cp, &len);
        tern_cpset_add(&edges, cp, cp);
    }
    tern_cpset_norm(&edges);
    sbuf other = {0};
    tern_err *err = edges.oom ? js_oom() : other_first(c, &edges, any, &other);
    tern_cpset_free(&edges);
    n_alts += other.len > 0;
    const char *op = allow_empty && !is_word_end ? "?" : "";
    if (!err && n_alts > 1) { /* what js_atom_push writes for alternatives, without scanning the nested levels */
        js_seq_push_unit(o, "( ");
        err = branches(c, w, k, pos, is_word_end, any, other.p ? other.p : "", o);
        sbuf_adds(o, " )"), sbuf_adds(o, op);
    } else if (!err && n_alts == 1) { /* one alternative: its text decides whether it needs a group */
        sbuf alts = {0};
        err = branches(c, w, k, pos, is_word_end, any, other.p ? other.p : "", &alts);
        if (!err && alts.len)
            js_atom_push(o, alts.p, op);
        o->oom |= alts.oom;
        sbuf_free(&alts);
    }
    if (!err && (o->oom || other.oom))
        err = js_oom();
    sbuf_free(&other);
    return err;
}

/* The grammar that keeps extra keys apart from the listed ones nests a group per character of each: a listed
 * name (a property, or a required name that is not one) is at most 256 bytes. */
static TERN_MUST_CHECK tern_err *check_name_len(const char *path, const char *where, const char *name) {
    if (strlen(name) <= 256)
        return NULL;
    return tern_errf(TERN_EINVAL, "%s.%s: a property name of %zu bytes (at most 256)", path, where, strlen(name));
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
            js_seq_push(o, t.p);
        else
            js_atom_push(o, t.p, "?");
        o->oom |= t.oom;
        sbuf_free(&t);
    }
    if (extra) {
        sbuf t = {0};
        sbuf_printf(&t, "%s %s", sepx, extra);
        js_atom_push(o, t.p, "*");
        o->oom |= t.oom;
        sbuf_free(&t);
    }
}

/* A member's rule, `hint-kv`: KEY ws ":" ws VALUE ws (JSON) or KEY ":" VALUE (Gemma). */
static TERN_MUST_CHECK tern_err *member_rule(conv *c, const char *key, const json_t *vs, const char *path, const char *vpath,
                             const char *vhint, int depth, const char *ws, const char **kv) {
    const char *vname;
    TERN_TRY(js_gen_rule(c, vs, vpath, vhint, depth, &vname));
    size_t kn = strlen(key);
    sbuf b = {0}, t = {0};
    tern_err *err = NULL;
    if (!c->d->raw_text) {
        js_json_str(&t, key, kn);
        tern_gbnf_literal(&b, t.p, t.len);
        sbuf_printf(&b, " %s \":\" %s %s %s", ws, ws, vname, ws);
    } else if (js_gemma_bare_key(key, kn)) {
        tern_gbnf_literal(&b, key, kn);
        sbuf_printf(&b, " \":\" %s", vname);
    } else if (js_has_gemma_quote(key, kn)) {
        err = tern_errf(TERN_EINVAL, "%s: the property name '%s' cannot be written in Gemma's syntax", path, key);
    } else {
        sbuf_printf(&t, "%s%s%s", GEMMA_QUOTE, key, GEMMA_QUOTE);
        tern_gbnf_literal(&b, t.p, t.len);
        sbuf_printf(&b, " \":\" %s", vname);
    }
    b.oom |= t.oom;
    char *h = js_strf("%s-kv", vhint);
    if (!err)
        err = h ? js_add_rule_buf(c, h, &b, kv) : js_oom();
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
        int ok = 1; /* keys of a key alphabet ([A-Za-z0-9_]+): other names cannot come up */
        for (const char *p = words[i]; c->d->key_class && *p; p++)
            ok &= js_is_alnum((unsigned char)*p) || *p == '_';
        if (ok)
            words[kept++] = words[i];
    }
    sbuf key = {0}, b = {0};
    tern_err *err = NULL;
    if (c->d->key_class) {
        err = not_words(c, words, kept, 0, 0, &key);
    } else if (!kept) {
        err = js_prim_push(c, P_STRING, &key);
    } else {
        sbuf_adds(&key, "\"\\\"\"");
        err = not_words(c, words, kept, 0, 1, &key);
        js_seq_push(&key, "\"\\\"\"");
    }
    const char *vname = NULL;
    char *vpath = js_strf("%s.additionalProperties", path), *vhint = js_strf("%s-additional", hint);
    char *kh = vhint ? js_strf("%s-kv", vhint) : NULL;
    if (!err && (!vpath || !vhint || !kh))
        err = js_oom();
    if (!err)
        err = json_is_object(ap) ? js_gen_rule(c, ap, vpath, vhint, depth, &vname) : js_prim(c, P_VALUE, &vname);
    if (!err) {
        if (!c->d->spaced)
            sbuf_printf(&b, "%s \":\" %s", key.p, vname);
        else
            sbuf_printf(&b, "%s %s \":\" %s %s %s", key.p, ws, ws, vname, ws);
        b.oom |= key.oom;
        err = js_add_rule_buf(c, kh, &b, kv);
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
    tern_err *err = tails ? NULL : js_oom();
    /* tails[j], 1 <= j < n_alt: the members from j on, after the first present one. */
    for (size_t j = n_alt ? n_alt - 1 : 0; !err && j >= 1; j--) {
        sbuf t = {0};
        if (j + 1 < n_alt) {
            sbuf one = {0};
            sbuf_printf(&one, "%s %s", sepx, m[j].kv);
            if (m[j].required)
                js_seq_push(&t, one.p);
            else
                js_atom_push(&t, one.p, "?");
            js_seq_push(&t, tails[j + 1]);
            t.oom |= one.oom;
            sbuf_free(&one);
        } else
            members_tail(c, m, n, j, sepx, extra, &t);
        char *th = js_strf("%s-tail-%zu", hint, j);
        err = th ? js_add_rule_buf(c, th, &t, &tails[j]) : js_oom();
        free(th);
        sbuf_free(&t);
    }
    sbuf alts = {0}, b = {0};
    for (size_t i = 0; !err && i < n_alt; i++) {
        sbuf a = {0};
        js_seq_push(&a, m[i].kv);
        if (i + 1 < n_alt)
            js_seq_push(&a, tails[i + 1]);
        else
            members_tail(c, m, n, i + 1, sepx, extra, &a);
        js_alt_push(&alts, a.p);
        alts.oom |= a.oom;
        sbuf_free(&a);
    }
    if (!err && all_optional && extra) {
        sbuf a = {0};
        js_seq_push(&a, extra);
        members_tail(c, m, 0, 0, sepx, extra, &a);
        js_alt_push(&alts, a.p);
        alts.oom |= a.oom;
        sbuf_free(&a);
    }
    if (!err) {
        sbuf_adds(&b, "\"{\"");
        js_seq_push(&b, ws);
        if (alts.len)
            js_atom_push(&b, alts.p, all_optional ? "?" : "");
        js_seq_push(&b, "\"}\"");
        b.oom |= alts.oom;
        sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    }
    sbuf_free(&alts), sbuf_free(&b);
    free(tails);
    return err;
}

TERN_MUST_CHECK tern_err *js_gen_object(conv *c, const json_t *s, const char *path, const char *hint, int depth, sbuf *out) {
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
        return js_prim_push(c, P_OBJECT, out);

    const char *ws = NULL;
    if (c->d->spaced)
        TERN_TRY(js_prim(c, P_WS, &ws));
    size_t cap = n_props + n_req + 1;
    member *m = calloc(cap, sizeof *m);
    const char **words = calloc(cap, sizeof *words);
    tern_err *err = m && words ? NULL : js_oom();
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
            if ((err = check_name_len(path, "properties", k)))
                break;
            words[n_words++] = k;
            if (json_is_false(v)) { /* must not appear */
                if (is_req)
                    err = tern_errf(TERN_EINVAL, "%s.properties.%s: required, but its schema is false", path, k);
                if (err)
                    break;
                continue;
            }
            char *vpath = js_strf("%s.properties.%s", path, k), *vhint = js_strf("%s-%s", hint, k);
            err = vpath && vhint ? member_rule(c, k, v, path, vpath, vhint, depth + 1, ws, &m[n].kv) : js_oom();
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
        if ((err = check_name_len(path, "required", r)))
            break;
        if (c->strict)
            err = tern_errf(TERN_EINVAL, "%s.required: '%s' is not in properties", path, r);
        else if (json_is_false(ap))
            err = tern_errf(TERN_EINVAL, "%s.required: '%s' is not in properties and additionalProperties is false",
                            path, r);
        if (err)
            break;
        char *vpath = js_strf("%s.additionalProperties", path), *vhint = js_strf("%s-%s", hint, r);
        err = vpath && vhint ? member_rule(c, r, ap ? ap : json_true(), path, vpath, vhint, depth + 1, ws, &m[n].kv)
                             : js_oom();
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
