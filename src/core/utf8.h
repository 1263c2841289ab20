/* utf8.h — UTF-8, once for the whole house: decoding (strict, as the Unicode standard defines well-formed UTF-8:
 * no overlong forms, no surrogates, nothing past U+10FFFF), validating, encoding, and the one loose decoder for text
 * that may carry lone surrogates (the Jinja renderer's strings, which follow JavaScript's). The tokenizer, the
 * grammar compiler and schema converter, the chat templates, the request checks and the server's JSON all use these.
 * Inline: the tokenizer calls them once per character. */
#ifndef TERN_CORE_UTF8_H
#define TERN_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The UTF-8 character at p (n bytes available): its length (> 0) when well-formed, 0 when the bytes are a valid
 * start that needs more bytes, or -k when ill-formed, its first k bytes (k >= 1) being one unit to replace with
 * U+FFFD (the "maximal subpart" the Unicode standard recommends replacing as one). */
static inline int tern_utf8_check(const unsigned char *p, size_t n) {
    if (n == 0)
        return 0;
    const unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's allowed range */
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlongs */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90; /* no overlongs */
        else if (c == 0xf4)
            hi = 0x8f; /* <= U+10FFFF */
    } else
        return -1;
    for (size_t i = 1; i < need; i++) {
        if (i >= n)
            return 0;
        const unsigned char b = p[i], l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (b < l || b > h)
            return -(int)i;
    }
    return (int)need;
}

/* The code point of the well-formed sequence of length k (1..4) at p (as tern_utf8_check returned it). */
static inline uint32_t tern_utf8_cp(const unsigned char *p, int k) {
    switch (k) {
    case 1: return p[0];
    case 2: return (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
    case 3: return (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
    default:
        return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 | (uint32_t)(p[2] & 0x3f) << 6 |
               (p[3] & 0x3f);
    }
}

/* Decodes the well-formed character at p (n bytes available) into *cp: its length 1..4, or 0 when the bytes there
 * are not one (ill-formed or cut short; *cp untouched). */
static inline int tern_utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
    const int k = tern_utf8_check(p, n);
    if (k <= 0)
        return 0;
    *cp = tern_utf8_cp(p, k);
    return k;
}

/* 1 when s[0, n) is well-formed UTF-8; else 0, with the offset of the first bad byte in *bad (when bad is given). */
static inline int tern_utf8_valid(const char *s, size_t n, size_t *bad) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        const int k = tern_utf8_check(u + i, n - i);
        if (k <= 0) {
            if (bad)
                *bad = i;
            return 0;
        }
        i += (size_t)k;
    }
    return 1;
}

/* Decodes loosely, for text that is UTF-8 or WTF-8 (UTF-8 that may encode lone surrogates, as JavaScript strings
 * hold them): the code point of the sequence its lead byte announces, continuation bytes taken as they are; a
 * stray continuation byte, an invalid lead or a sequence cut short is U+FFFD of length 1. Sets *len. */
static inline uint32_t tern_utf8_decode_loose(const unsigned char *p, size_t n, size_t *len) {
    const unsigned char c = p[0];
    const size_t need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (need == 1 || need == 0 || need > n) {
        *len = 1;
        return need == 1 ? c : 0xfffd;
    }
    *len = need;
    return tern_utf8_cp(p, (int)need);
}

/* Writes code point cp (<= U+10FFFF; a surrogate is written as WTF-8 does) as 1 to 4 UTF-8 bytes into out; returns
 * how many. */
size_t tern_utf8_put(uint32_t cp, char *out);

#endif
