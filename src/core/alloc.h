/* alloc.h — aligned allocation for kernel buffers (64-byte = one cache line / one AVX-512 register). */
#ifndef TERN_CORE_ALLOC_H
#define TERN_CORE_ALLOC_H

#include <stddef.h>

#define TERN_ALIGN 64

/* Allocates `size` bytes aligned to `align` (a power of two >= sizeof(void*)); NULL on failure or overflow. */
void *tern_aligned_alloc(size_t size, size_t align);
/* Like tern_aligned_alloc with TERN_ALIGN, memory zeroed. */
void *tern_aligned_calloc(size_t count, size_t elem);
/* Frees memory from tern_aligned_alloc/calloc; NULL is fine. */
void tern_aligned_free(void *p);
/* Memory read as long streams (packed weights, bandwidth probes): 64-byte aligned, and from 2 MiB up on
 * transparent huge pages where the kernel allows (fewer TLB misses per byte streamed). Free with
 * tern_aligned_free. */
void *tern_stream_alloc(size_t size);
/* Multiplies with overflow check: returns 0 and sets *out, or -1 on overflow. */
int tern_mul_size(size_t a, size_t b, size_t *out);

#endif
