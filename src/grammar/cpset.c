/* cpset.c — sets of code points as ranges (see cpset.h). */
#include "grammar/cpset.h"

#include <stdlib.h>
#include <string.h>

void tern_cpset_add(tern_cpset *s, uint32_t lo, uint32_t hi) {
    if (s->oom || lo > hi)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        tern_cprange *v = realloc(s->r, cap * sizeof *v);
        if (!v) {
            s->oom = 1;
            return;
        }
        s->r = v, s->cap = cap;
    }
    s->r[s->n++] = (tern_cprange){lo, hi};
}

static int cmp_range(const void *a, const void *b) {
    const tern_cprange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorts and merges the ranges, and cuts out the surrogates (they have no UTF-8 form). */
void tern_cpset_norm(tern_cpset *s) {
    if (s->oom || !s->n)
        return;
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k && s->r[i].lo <= s->r[k - 1].hi + 1) {
            if (s->r[i].hi > s->r[k - 1].hi)
                s->r[k - 1].hi = s->r[i].hi;
        } else
            s->r[k++] = s->r[i];
    }
    s->n = k;
    for (size_t i = 0; i < s->n; i++) {
        tern_cprange r = s->r[i];
        if (r.hi < 0xD800 || r.lo > 0xDFFF)
            continue;
        if (r.lo < 0xD800 && r.hi > 0xDFFF) {
            s->r[i].hi = 0xD7FF;
            tern_cpset_add(s, 0xE000, r.hi);
            tern_cpset_norm(s);
            return;
        }
        if (r.lo >= 0xD800 && r.hi <= 0xDFFF) {
            memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof *s->r);
            s->n--, i--;
        } else if (r.lo < 0xD800)
            s->r[i].hi = 0xD7FF;
        else
            s->r[i].lo = 0xE000;
    }
}

/* The complement of a normalized set among all code points but the surrogates. */
void tern_cpset_invert(const tern_cpset *s, tern_cpset *out) {
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next)
            tern_cpset_add(out, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10FFFF)
        tern_cpset_add(out, next, 0x10FFFF);
    out->oom |= s->oom;
    tern_cpset_norm(out);
}

int tern_cpset_has(const tern_cpset *s, uint32_t cp) {
    for (size_t i = 0; i < s->n; i++)
        if (cp >= s->r[i].lo && cp <= s->r[i].hi)
            return 1;
    return 0;
}

/* s minus lo..hi (normalized in, normalized out). */
void tern_cpset_remove(tern_cpset *s, uint32_t lo, uint32_t hi) {
    tern_cpset t = {0};
    for (size_t i = 0; i < s->n; i++) {
        tern_cprange r = s->r[i];
        if (r.hi < lo || r.lo > hi) {
            tern_cpset_add(&t, r.lo, r.hi);
            continue;
        }
        if (r.lo < lo)
            tern_cpset_add(&t, r.lo, lo - 1);
        if (r.hi > hi)
            tern_cpset_add(&t, hi + 1, r.hi);
    }
    t.oom |= s->oom;
    free(s->r);
    *s = t;
    tern_cpset_norm(s);
}

void tern_cpset_free(tern_cpset *s) {
    free(s->r);
    memset(s, 0, sizeof *s);
}
