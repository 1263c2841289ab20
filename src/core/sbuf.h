/* sbuf.h — a growable byte buffer (response bodies, SSE frames, decoded text). The content stays
 * NUL-terminated; an append that cannot grow sets `oom` so a caller can check once at the end. */
#ifndef TERN_CORE_SBUF_H
#define TERN_CORE_SBUF_H

#include <jansson.h>
#include <stddef.h>

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom; /* an append failed: the content is incomplete */
} sbuf;

/* Appends n bytes (keeps a NUL after them); on failure sets b->oom and returns -1. */
int sbuf_add(sbuf *b, const void *s, size_t n);
/* Appends a NUL-terminated string. */
int sbuf_adds(sbuf *b, const char *s);
/* Appends printf-style text. */
int sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends compact JSON of v (which it does not free). */
int sbuf_json(sbuf *b, const json_t *v);
/* Empties the buffer, keeping its memory. */
void sbuf_clear(sbuf *b);
/* Frees the memory. */
void sbuf_free(sbuf *b);

#endif
