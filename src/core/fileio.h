/* fileio.h — whole-file reads, read-only memory maps, path joining. */
#ifndef TERN_CORE_FILEIO_H
#define TERN_CORE_FILEIO_H

#include <stddef.h>

#include "core/status.h"

/* A read-only mapping of a whole file. An empty file maps to data == NULL, size == 0. */
typedef struct tern_mmap {
    const unsigned char *data;
    size_t size;
} tern_mmap;

/* Maps `path` read-only (MAP_PRIVATE); error names the path and the OS reason. */
TERN_MUST_CHECK tern_err *tern_mmap_open(const char *path, tern_mmap *out);
/* Unmaps; a zeroed struct is fine. */
void tern_mmap_close(tern_mmap *m);
/* Lets the kernel drop the mapped pages wholly inside [p, p + len) from this process (read-only private file
 * mappings only: a later access reads the file again). For data kept elsewhere in another form. */
void tern_mmap_release(const void *p, size_t len);
/* Reads the mapped pages of [p, p + len) in now and maps them into this process, so that later accesses take
 * no page faults (advice: where the kernel cannot, the pages load on first touch as before). For data read a
 * little at a time at unpredictable places, such as embedding rows. */
void tern_mmap_prefault(const void *p, size_t len);
/* Reads a whole file into a NUL-terminated heap buffer (*len excludes the NUL); caps at max_bytes. */
TERN_MUST_CHECK tern_err *tern_read_file(const char *path, size_t max_bytes, char **out, size_t *len);
/* Writes `len` bytes to `path` (created/truncated). */
TERN_MUST_CHECK tern_err *tern_write_file(const char *path, const void *data, size_t len);
/* Returns malloc'd "dir/name" (no double slash); NULL on OOM. */
char *tern_path_join(const char *dir, const char *name);
/* 1 if `path` exists and is a regular file. */
int tern_is_file(const char *path);
/* 1 if `path` exists and is a directory. */
int tern_is_dir(const char *path);
/* Creates `path` and its parents (like mkdir -p). */
TERN_MUST_CHECK tern_err *tern_mkdir_p(const char *path);
/* Calls fn(ctx, name, path) for every regular file directly in `dir` but hidden ones (names starting with '.'),
 * in directory order; an error when the folder cannot be read. */
TERN_MUST_CHECK tern_err *tern_dir_files(const char *dir, void (*fn)(void *ctx, const char *name, const char *path), void *ctx);

#endif
