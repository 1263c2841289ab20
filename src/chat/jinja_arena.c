/* jinja_arena.c — the bump arena a compiled template (its tokens, tree and strings) and each render (its values)
 * live in: allocation is a pointer bump in 64 KiB chunks, everything is freed at once, and the arena's cap bounds
 * the memory a template can use. The floor of the renderer: it calls nothing else of it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

typedef struct jchunk {
    struct jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} jchunk;

#define CHUNK_SIZE (64 * 1024)

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > CHUNK_SIZE / 4 ? n : CHUNK_SIZE;
        if (size > SIZE_MAX - sizeof(jchunk))
            return NULL;
        if (a->cap && (a->total > a->cap || size > a->cap - a->total))
            return NULL;
        jchunk *nc = calloc(1, sizeof(jchunk) + size);
        if (!nc)
            return NULL;
        nc->size = size;
        a->total += size;
        if (c && size != CHUNK_SIZE) {
            /* a big one-off block: keep filling the current chunk afterwards */
            nc->next = c->next;
            c->next = nc;
            nc->used = n;
            return nc->data;
        }
        nc->next = c;
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *ja_strdup(jarena *a, const char *s, size_t n) {
    if (n == SIZE_MAX)
        return NULL;
    char *d = ja_alloc(a, n + 1);
    if (!d)
        return NULL;
    if (n)
        memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void ja_free(jarena *a) {
    jchunk *c = a->head;
    while (c) {
        jchunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}
