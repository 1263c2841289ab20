/* base64.c — base64 decoding (see base64.h). */
#include "core/base64.h"

#include <stdint.h>
#include <stdlib.h>

static int value_of(unsigned char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

tern_err *tern_base64_decode(const char *text, size_t len, unsigned char **out, size_t *n) {
    *out = NULL;
    *n = 0;
    unsigned char *buf = malloc(len / 4 * 3 + 3);
    if (!buf)
        return tern_errf(TERN_ENOMEM, "out of memory for %zu bytes of base64", len);
    size_t o = 0, pad = 0, digits = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (is_space(c))
            continue;
        if (c == '=') {
            pad++;
            if (pad > 2 || digits % 4 < 2) {
                free(buf);
                return tern_errf(TERN_EINVAL, "invalid base64: misplaced '=' at offset %zu", i);
            }
            continue;
        }
        int v = value_of(c);
        if (v < 0 || pad) {
            free(buf);
            return tern_errf(TERN_EINVAL, "invalid base64: %s at offset %zu",
                             pad ? "data after the '=' padding" : "a character outside the alphabet", i);
        }
        acc = acc << 6 | (uint32_t)v;
        if (++digits % 4 == 0) {
            buf[o++] = (unsigned char)(acc >> 16);
            buf[o++] = (unsigned char)(acc >> 8);
            buf[o++] = (unsigned char)acc;
            acc = 0;
        }
    }
    switch (digits % 4) {
    case 1:
        free(buf);
        return tern_errf(TERN_EINVAL, "invalid base64: the text ends with a lone character (truncated?)");
    case 2: buf[o++] = (unsigned char)(acc >> 4); break;
    case 3:
        buf[o++] = (unsigned char)(acc >> 10);
        buf[o++] = (unsigned char)(acc >> 2);
        break;
    default: break;
    }
    if (pad && (digits + pad) % 4) {
        free(buf);
        return tern_errf(TERN_EINVAL, "invalid base64: wrong amount of '=' padding");
    }
    if (o == 0) {
        free(buf);
        buf = NULL;
    }
    *out = buf;
    *n = o;
    return NULL;
}

char *tern_base64_encode(const void *data, size_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0u);
        out[o++] = digits[v >> 18 & 63];
        out[o++] = digits[v >> 12 & 63];
        out[o++] = i + 1 < n ? digits[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? digits[v & 63] : '=';
    }
    out[o] = 0;
    return out;
}
