/* mapped_files.c — the table behind mapped_files.h: slots claimed by compare-and-swap on their start address, the
 * path written before the length is published, so a reader in a signal handler sees a slot whole or not at all. */
#include "core/mapped_files.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define SLOTS 1024

static struct slot {
    _Atomic uintptr_t start; /* 0: free; 1: being filled */
    _Atomic size_t len;      /* 0 until the slot is complete */
    char path[256];
} slots[SLOTS];

void tern_mapped_files_add(const void *p, size_t n, const char *path) {
    if (!p || !n)
        return;
    for (int i = 0; i < SLOTS; i++) {
        uintptr_t free_slot = 0;
        if (!atomic_compare_exchange_strong(&slots[i].start, &free_slot, 1))
            continue;
        strncpy(slots[i].path, path ? path : "", sizeof slots[i].path - 1);
        slots[i].path[sizeof slots[i].path - 1] = 0;
        atomic_store(&slots[i].start, (uintptr_t)p);
        atomic_store(&slots[i].len, n);
        return;
    }
}

void tern_mapped_files_remove(const void *p) {
    if (!p)
        return;
    for (int i = 0; i < SLOTS; i++)
        if (atomic_load(&slots[i].start) == (uintptr_t)p) {
            atomic_store(&slots[i].len, 0);
            atomic_store(&slots[i].start, 0);
            return;
        }
}

const char *tern_mapped_files_find(const void *addr) {
    const uintptr_t a = (uintptr_t)addr;
    for (int i = 0; i < SLOTS; i++) {
        const uintptr_t s = atomic_load(&slots[i].start);
        const size_t n = atomic_load(&slots[i].len);
        if (s > 1 && n && a >= s && a - s < n)
            return slots[i].path;
    }
    return NULL;
}
