/* pack_cache.h — packed weights kept between starts. Repacking MLX q4/q8 weights for the int8 kernels costs ~2 s
 * per GB at every start; instead the packed arena is written once to a cache file and read back on later starts.
 * The file is keyed by what it was made from (the checkpoint files' names, sizes, modification times and first
 * 64 KiB, the packed matrices' shapes and order, the thread layout, the format version) and carries a checksum of
 * its bytes: a stale, truncated, corrupt or foreign file is never used, only rebuilt. Writers write a temporary
 * file and rename it over the old one, so two servers starting at once never see a partial file.
 *
 * Where: $TERN_CACHE_DIR, else $XDG_CACHE_HOME/tern, else ~/.cache/tern; TERN_CACHE_DIR set to an empty string
 * (or "off") turns the cache off. */
#ifndef TERN_MODELS_PACK_CACHE_H
#define TERN_MODELS_PACK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The cache file's format, and the packed blocks' (qpack.h): bump it when either changes; a file of another
 * version is rebuilt. */
#define TERN_PACK_CACHE_VERSION 1

/* The cache file for a model folder and thread layout (malloc'd), or NULL when caching is off or no folder can be
 * named; *source_key identifies the checkpoint's files as they are now. */
char *tern_pack_cache_path(const char *model_dir, int threads, uint64_t *source_key);
/* Reads the cache into arena[0, bytes) when its header carries `key` and `bytes` and its checksum holds: 1;
 * otherwise 0 (missing, stale, truncated, corrupt or foreign; the arena's contents are then unspecified). */
int tern_pack_cache_read(const char *path, uint64_t key, uint8_t *arena, size_t bytes);
/* Writes arena[0, bytes) as the cache for `key`, creating the folder as needed. */
tern_err *tern_pack_cache_write(const char *path, uint64_t key, const uint8_t *arena, size_t bytes);

#endif
