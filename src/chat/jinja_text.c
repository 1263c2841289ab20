/* jinja_text.c — text and number conventions of JavaScript that the Jinja renderer must
 * reproduce to match @huggingface/jinja byte for byte: JS white space, UTF-16 lengths and
 * ordering, Number.prototype.toString, ToNumber, parseInt and parseFloat; and where a byte
 * offset of a template's source is (line and column) for messages. Pure functions over
 * (pointer, length) strings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

int jt_is_js_space(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

size_t jt_space_len(const char *s, size_t n, size_t i) {
    if (i >= n)
        return 0;
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80)
        return (c == ' ' || (c >= 0x09 && c <= 0x0D)) ? 1 : 0;
    size_t len;
    uint32_t cp = tern_utf8_decode_loose((const unsigned char *)s + i, n - i, &len);
    return jt_is_js_space(cp) ? len : 0;
}

const char *jt_find(const char *hay, size_t hn, const char *needle, size_t nn) {
    if (nn == 0)
        return hay;
    if (nn > hn)
        return NULL;
    const char *end = hay + (hn - nn) + 1;
    for (const char *p = hay; p < end;) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p)
            return NULL;
        if (!memcmp(p, needle, nn))
            return p;
        p++;
    }
    return NULL;
}

size_t jt_utf16_len(const char *s, size_t n) {
    size_t units = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) != 0x80)
            units += c >= 0xF0 ? 2 : 1; /* a 4-byte sequence is a surrogate pair */
    }
    return units;
}

int jt_utf16_cmp(const char *a, size_t an, const char *b, size_t bn) {
    size_t i = 0, j = 0;
    while (i < an && j < bn) {
        size_t la, lb;
        uint32_t ca = tern_utf8_decode_loose((const unsigned char *)a + i, an - i, &la),
                 cb = tern_utf8_decode_loose((const unsigned char *)b + j, bn - j, &lb);
        if (ca != cb) {
            /* first UTF-16 units: the code point itself, or the high surrogate */
            uint32_t ua = ca < 0x10000 ? ca : 0xD800 + ((ca - 0x10000) >> 10);
            uint32_t ub = cb < 0x10000 ? cb : 0xD800 + ((cb - 0x10000) >> 10);
            if (ua != ub)
                return ua < ub ? -1 : 1;
            ua = 0xDC00 + ((ca - 0x10000) & 0x3FF);
            ub = 0xDC00 + ((cb - 0x10000) & 0x3FF);
            return ua < ub ? -1 : 1;
        }
        i += la;
        j += lb;
    }
    if (i < an)
        return 1;
    if (j < bn)
        return -1;
    return 0;
}

size_t jt_num_str(double v, char *buf) {
    if (isnan(v))
        return (size_t)sprintf(buf, "NaN");
    if (isinf(v))
        return (size_t)sprintf(buf, v < 0 ? "-Infinity" : "Infinity");
    if (v == 0)
        return (size_t)sprintf(buf, "0");
    size_t at = 0;
    if (v < 0) {
        buf[at++] = '-';
        v = -v;
    }
    if (v < 9007199254740992.0 && v == floor(v)) /* an integer below 2^53: its digits, as V8 prints it */
        return at + (size_t)sprintf(buf + at, "%llu", (unsigned long long)v);
    /* The shortest digit string that reads back as v (what V8 prints). */
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    char digits[24];
    int k = 0;
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    int e = atoi(p + 1);
    int n = e + 1; /* v = 0.d1d2...dk x 10^n */
    if (k <= n && n <= 21) {
        memcpy(buf + at, digits, (size_t)k);
        at += (size_t)k;
        for (int z = 0; z < n - k; z++)
            buf[at++] = '0';
    } else if (0 < n && n <= 21) {
        memcpy(buf + at, digits, (size_t)n);
        at += (size_t)n;
        buf[at++] = '.';
        memcpy(buf + at, digits + n, (size_t)(k - n));
        at += (size_t)(k - n);
    } else if (-6 < n && n <= 0) {
        buf[at++] = '0';
        buf[at++] = '.';
        for (int z = 0; z < -n; z++)
            buf[at++] = '0';
        memcpy(buf + at, digits, (size_t)k);
        at += (size_t)k;
    } else {
        buf[at++] = digits[0];
        if (k > 1) {
            buf[at++] = '.';
            memcpy(buf + at, digits + 1, (size_t)(k - 1));
            at += (size_t)(k - 1);
        }
        at += (size_t)sprintf(buf + at, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
    }
    buf[at] = 0;
    return at;
}

/* Length of the longest prefix of s[i..n) that is a JS StrUnsignedDecimalLiteral
 * ("Infinity", digits with optional fraction and exponent); 0 if none. */
static size_t decimal_prefix(const char *s, size_t n, size_t i) {
    if (n - i >= 8 && !memcmp(s + i, "Infinity", 8))
        return 8;
    size_t j = i, int_digits = 0, frac_digits = 0;
    while (j < n && s[j] >= '0' && s[j] <= '9')
        j++, int_digits++;
    if (j < n && s[j] == '.') {
        size_t f = j + 1;
        while (f < n && s[f] >= '0' && s[f] <= '9')
            f++, frac_digits++;
        if (int_digits || frac_digits)
            j = f;
    }
    if (!int_digits && !frac_digits)
        return 0;
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
        size_t x = j + 1;
        if (x < n && (s[x] == '+' || s[x] == '-'))
            x++;
        size_t ed = x;
        while (x < n && s[x] >= '0' && s[x] <= '9')
            x++;
        if (x > ed)
            j = x;
    }
    return j - i;
}

/* strtod of s[i..i+len) with an optional sign in front, on a bounded copy. */
static double strtod_span(const char *s, size_t i, size_t len, int neg) {
    if (len >= 8 && !memcmp(s + i, "Infinity", 8))
        return neg ? -INFINITY : INFINITY;
    char small[64];
    char *tmp = len < sizeof small ? small : malloc(len + 1);
    if (!tmp)
        return NAN;
    memcpy(tmp, s + i, len);
    tmp[len] = 0;
    double v = strtod(tmp, NULL);
    if (tmp != small)
        free(tmp);
    return neg ? -v : v;
}

static size_t skip_space(const char *s, size_t n, size_t i) {
    size_t l;
    while ((l = jt_space_len(s, n, i)))
        i += l;
    return i;
}

double jt_str_to_num(const char *s, size_t n) {
    size_t i = skip_space(s, n, 0);
    size_t end = n;
    while (end > i) { /* trim trailing JS white space */
        size_t j = end - 1;
        while (j > i && ((unsigned char)s[j] & 0xC0) == 0x80)
            j--;
        if (jt_space_len(s, end, j) != end - j)
            break;
        end = j;
    }
    if (i == end)
        return 0;
    if (end - i > 2 && s[i] == '0' && strchr("xXoObB", s[i + 1])) {
        int base = (s[i + 1] == 'x' || s[i + 1] == 'X') ? 16 : (s[i + 1] == 'o' || s[i + 1] == 'O') ? 8 : 2;
        double v = 0;
        for (size_t j = i + 2; j < end; j++) {
            int d = s[j] >= '0' && s[j] <= '9' ? s[j] - '0'
                    : s[j] >= 'a' && s[j] <= 'f' ? s[j] - 'a' + 10
                    : s[j] >= 'A' && s[j] <= 'F' ? s[j] - 'A' + 10 : 99;
            if (d >= base)
                return NAN;
            v = v * base + d;
        }
        return v;
    }
    int neg = 0;
    if (s[i] == '+' || s[i] == '-')
        neg = s[i++] == '-';
    size_t len = decimal_prefix(s, end, i);
    if (!len || i + len != end)
        return NAN;
    return strtod_span(s, i, len, neg);
}

double jt_parse_int(const char *s, size_t n) {
    size_t i = skip_space(s, n, 0);
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    size_t j = i;
    while (j < n && s[j] >= '0' && s[j] <= '9')
        j++;
    if (j == i)
        return NAN;
    return strtod_span(s, i, j - i, neg);
}

double jt_parse_float(const char *s, size_t n) {
    size_t i = skip_space(s, n, 0);
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    size_t len = decimal_prefix(s, n, i);
    if (!len)
        return NAN;
    return strtod_span(s, i, len, neg);
}

/* Line and column count characters (UTF-8 lead bytes), from 1. */
void jinja_where(const char *name, const char *src, size_t src_len, uint32_t pos, char *buf, size_t cap) {
    size_t line = 1, col = 1;
    if (pos > src_len)
        pos = (uint32_t)src_len;
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)src[i] & 0xC0) != 0x80)
            col++;
    }
    snprintf(buf, cap, "%s:%zu:%zu: ", name ? name : "template", line, col);
}
