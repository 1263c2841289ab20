/* mapped_files.h — which file each of the process's file mappings shows, so that a fault on a mapping whose file
 * was cut short under the running process (SIGBUS) can be reported by name instead of ending the process silently.
 * The table is fixed-size and lock-free: the lookup is safe inside a signal handler. */
#ifndef TERN_CORE_MAPPED_FILES_H
#define TERN_CORE_MAPPED_FILES_H

#include <stddef.h>

/* Records that [p, p + n) maps `path` (its first 255 bytes are kept); when the table is full the mapping is not
 * recorded and a fault on it is reported without a name. */
void tern_mapped_files_add(const void *p, size_t n, const char *path);
/* Forgets the mapping that starts at p (nothing when it was not recorded). */
void tern_mapped_files_remove(const void *p);
/* The path of the recorded mapping holding addr, or NULL; async-signal-safe. */
const char *tern_mapped_files_find(const void *addr);

#endif
