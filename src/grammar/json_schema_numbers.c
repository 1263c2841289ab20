/* json_schema_numbers.c — numbers and integers for the JSON Schema converter: integer ranges written digit by
 * digit (the standard range-splitting construction). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "grammar/json_schema_internal.h"

static int ndig(uint64_t v) {
    int n = 1;
    for (; v >= 10; v /= 10)
        n++;
    return n;
}

static uint64_t p10(int n) {
    uint64_t r = 1;
    while (n-- > 0)
        r *= 10;
    return r;
}

/* The n-digit strings x..y (x <= y; leading zeros allowed, they follow a prefix). */
static void drange(sbuf *o, const char *x, const char *y, int n) {
    int k = 0;
    while (k < n && x[k] == y[k])
        k++;
    if (k == n) {
        tern_gbnf_literal(o, x, (size_t)n);
        return;
    }
    if (k) {
        sbuf t = {0};
        drange(&t, x + k, y + k, n - k);
        tern_gbnf_literal(o, x, (size_t)k);
        js_seq_push(o, t.p);
        o->oom |= t.oom;
        sbuf_free(&t);
        return;
    }
    int rest = n - 1, xz = 1, y9 = 1;
    for (int i = 1; i < n; i++)
        xz &= x[i] == '0', y9 &= y[i] == '9';
    char lo = x[0], hi = y[0], nines[INT_DIGITS + 1], zeros[INT_DIGITS + 1];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    if (!xz) {
        sbuf a = {0}, t = {0};
        drange(&t, x + 1, nines, rest);
        tern_gbnf_literal(&a, x, 1);
        js_seq_push(&a, t.p);
        js_alt_push(o, a.p);
        o->oom |= a.oom | t.oom;
        sbuf_free(&a), sbuf_free(&t);
        lo++;
    }
    if (!y9)
        hi--;
    if (lo <= hi) {
        sbuf a = {0};
        if (lo == hi)
            tern_gbnf_literal(&a, &lo, 1);
        else
            sbuf_printf(&a, "[%c-%c]", lo, hi);
        js_rep_push(&a, "[0-9]", (uint64_t)rest, (uint64_t)rest);
        js_alt_push(o, a.p);
        o->oom |= a.oom;
        sbuf_free(&a);
    }
    if (!y9) {
        sbuf a = {0}, t = {0};
        drange(&t, zeros, y + 1, rest);
        tern_gbnf_literal(&a, y, 1);
        js_seq_push(&a, t.p);
        js_alt_push(o, a.p);
        o->oom |= a.oom | t.oom;
        sbuf_free(&a), sbuf_free(&t);
    }
}

/* Decimal numerals (no leading zeros) of a..b; has_b 0: a and up, at most INT_DIGITS digits. */
static void nonneg_range(sbuf *o, uint64_t a, int has_b, uint64_t b) {
    int la = ndig(a), lb = has_b ? ndig(b) : INT_DIGITS, run_lo = 0, run_hi = 0;
    for (int len = la; len <= lb + 1; len++) {
        int full = 0;
        uint64_t lo = 0, hi = 0;
        if (len <= lb) {
            lo = len == la ? a : p10(len - 1);
            hi = has_b && len == lb ? b : p10(len) - 1;
            full = len > 1 && lo == p10(len - 1) && hi == p10(len) - 1;
        }
        if (full) {
            if (!run_lo)
                run_lo = len;
            run_hi = len;
            continue;
        }
        if (run_lo) {
            sbuf t = {0};
            sbuf_adds(&t, "[1-9]");
            js_rep_push(&t, "[0-9]", (uint64_t)run_lo - 1, (uint64_t)run_hi - 1);
            js_alt_push(o, t.p);
            o->oom |= t.oom;
            sbuf_free(&t);
            run_lo = 0;
        }
        if (len > lb)
            break;
        char xs[INT_DIGITS + 2], ys[INT_DIGITS + 2];
        snprintf(xs, sizeof xs, "%0*llu", len, (unsigned long long)lo);
        snprintf(ys, sizeof ys, "%0*llu", len, (unsigned long long)hi);
        sbuf t = {0};
        drange(&t, xs, ys, len);
        js_alt_push(o, t.p);
        o->oom |= t.oom;
        sbuf_free(&t);
    }
}

/* Integers lo..hi (each bound optional) as an expression: negative ones as "-" and a magnitude (so never "-0"), then
 * the non-negative ones. */
static void int_range(sbuf *o, int has_lo, int64_t lo, int has_hi, int64_t hi) {
    if (!has_lo || lo < 0) {
        uint64_t mlo = has_hi && hi < 0 ? (uint64_t)(-(hi + 1)) + 1 : 1;
        uint64_t mhi = has_lo ? (uint64_t)(-(lo + 1)) + 1 : 0;
        sbuf t = {0}, a = {0};
        nonneg_range(&t, mlo, has_lo, mhi);
        sbuf_adds(&a, "\"-\"");
        js_seq_push(&a, t.p);
        js_alt_push(o, a.p);
        o->oom |= t.oom | a.oom;
        sbuf_free(&t), sbuf_free(&a);
    }
    if (!has_hi || hi >= 0) {
        sbuf t = {0};
        nonneg_range(&t, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi, has_hi ? (uint64_t)hi : 0);
        js_alt_push(o, t.p);
        o->oom |= t.oom;
        sbuf_free(&t);
    }
}

/* One bound on an integer from a number keyword: *has 0 when it does not constrain within int64; returns -1 if no
 * int64 satisfies it. */
static int int_bound(const json_t *v, int upper, int exclusive, int *has, int64_t *out) {
    *has = 1;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (exclusive && i == (upper ? INT64_MIN : INT64_MAX))
            return -1;
        *out = exclusive ? (upper ? i - 1 : i + 1) : i;
        return 0;
    }
    double d = json_number_value(v);
    d = upper ? (exclusive ? ceil(d) - 1 : floor(d)) : (exclusive ? floor(d) + 1 : ceil(d));
    if (d >= 9.2e18 || d <= -9.2e18) {
        *has = 0;
        return (d >= 9.2e18) != upper ? -1 : 0;
    }
    *out = (int64_t)d;
    return 0;
}

TERN_MUST_CHECK tern_err *js_gen_integer(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out) {
    int has_lo = 0, has_hi = 0;
    int64_t lo = 0, hi = 0;
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(s, keys[k]);
        int upper = k >= 2, excl = k & 1;
        if (!v)
            continue;
        if (json_is_boolean(v) && excl)
            continue; /* draft 4: applies to minimum / maximum below */
        if (!json_is_number(v))
            return tern_errf(TERN_EINVAL, "%s.%s: must be a number", path, keys[k]);
        if (!excl && json_is_true(json_object_get(s, keys[k + 1])))
            excl = 1;
        int has;
        int64_t b;
        if (int_bound(v, upper, excl, &has, &b))
            return tern_errf(TERN_EINVAL, "%s.%s: no integer in the supported range satisfies it", path, keys[k]);
        if (!has)
            continue;
        if (upper) {
            if (!has_hi || b < hi)
                hi = b;
            has_hi = 1;
        } else {
            if (!has_lo || b > lo)
                lo = b;
            has_lo = 1;
        }
    }
    if (has_lo && has_hi && lo > hi)
        return tern_errf(TERN_EINVAL, "%s: no integer lies between the minimum %lld and the maximum %lld", path,
                         (long long)lo, (long long)hi);
    if (!has_lo && !has_hi)
        return js_prim_push(c, P_INTEGER, out);
    sbuf b = {0};
    int_range(&b, has_lo, lo, has_hi, hi);
    tern_err *err = NULL;
    sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    sbuf_free(&b);
    return err;
}

TERN_MUST_CHECK tern_err *js_gen_number(conv *c, const json_t *s, const char *path, const char *hint, sbuf *out) {
    const json_t *mn = json_object_get(s, "minimum"), *xmn = json_object_get(s, "exclusiveMinimum");
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    int any = 0;
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(s, keys[k]);
        if (v && !json_is_number(v) && !((k & 1) && json_is_boolean(v)))
            return tern_errf(TERN_EINVAL, "%s.%s: must be a number", path, keys[k]);
        any |= v && json_is_number(v);
    }
    if (!any)
        return js_prim_push(c, P_NUMBER, out);
    /* Only the sign is enforced: a lower bound of 0 or more rules out '-'. */
    int nonneg = (mn && json_is_number(mn) && json_number_value(mn) >= 0) ||
                 (xmn && json_is_number(xmn) && json_number_value(xmn) >= 0);
    js_note(c, path, nonneg ? "number bounds are enforced only as no minus sign" : "number bounds are not enforced");
    if (!nonneg)
        return js_prim_push(c, P_NUMBER, out);
    sbuf b = {0};
    sbuf_printf(&b, "( \"0\" | [1-9] [0-9]{0,%d} ) ( \".\" [0-9]{1,%d} )? ( [eE] [-+]? [0-9]{1,%d} )?", INT_DIGITS - 1,
                FRAC_DIGITS, EXP_DIGITS);
    tern_err *err = NULL;
    sbuf_add(out, b.p, b.len), out->oom |= b.oom;
    sbuf_free(&b);
    return err;
}
