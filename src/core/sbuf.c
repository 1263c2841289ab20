/* sbuf.c — a growable byte buffer (see sbuf.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sbuf.h"

static int grow(sbuf *b, size_t need) {
    if (b->oom)
        return -1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *np = realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

int sbuf_add(sbuf *b, const void *s, size_t n) {
    if (n > SIZE_MAX - b->len - 1 || grow(b, b->len + n + 1))
        return -1;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int sbuf_adds(sbuf *b, const char *s) { return sbuf_add(b, s, strlen(s)); }

int sbuf_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(b, b->len + (size_t)n + 1))
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

static int dump_cb(const char *buffer, size_t size, void *data) { return sbuf_add(data, buffer, size); }

int sbuf_json(sbuf *b, const json_t *v) {
    if (json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)) {
        b->oom = 1;
        return -1;
    }
    return 0;
}

void sbuf_clear(sbuf *b) {
    b->len = 0;
    if (b->p)
        b->p[0] = 0;
}

void sbuf_free(sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
