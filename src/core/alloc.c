/* alloc.c — aligned allocation. */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *tern_aligned_alloc(size_t size, size_t align) {
    if (align < sizeof(void *) || (align & (align - 1)))
        return NULL;
    if (size == 0)
        size = align;
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
    return p;
}

void *tern_aligned_calloc(size_t count, size_t elem) {
    size_t n;
    if (tern_mul_size(count, elem, &n))
        return NULL;
    void *p = tern_aligned_alloc(n, TERN_ALIGN);
    if (p)
        memset(p, 0, n);
    return p;
}

void tern_aligned_free(void *p) { free(p); }

void *tern_stream_alloc(size_t size) {
    const size_t huge = (size_t)2 << 20;
    if (size < huge)
        return tern_aligned_alloc(size, TERN_ALIGN);
    size = (size + huge - 1) / huge * huge;
    void *p = tern_aligned_alloc(size, huge);
    if (p)
        (void)madvise(p, size, MADV_HUGEPAGE); /* advice only: without it the memory still works */
    return p;
}

int tern_mul_size(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}
