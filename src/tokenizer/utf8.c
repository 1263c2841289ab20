/* utf8.c — UTF-8 validation of byte prefixes (for the streaming decoder and symbol splitting) and encoding. */
#include "tokenizer/tok_internal.h"

int tok_utf8_check(const unsigned char *p, size_t n) {
    if (n == 0)
        return 0;
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
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
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* <= U+10FFFF */
    } else
        return -1;
    for (size_t i = 1; i < need; i++) {
        if (i >= n)
            return 0; /* valid so far, incomplete */
        unsigned char b = p[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (b < l || b > h)
            return -(int)i; /* the bytes before the offending one form one replaced unit */
    }
    return (int)need;
}

