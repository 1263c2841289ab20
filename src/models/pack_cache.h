/* pack_cache.h — packed weights kept between starts. Repacking MLX q4/q8 weights for the int8 kernels costs ~2 s
 * per GB at every start; instead the packed arena is written once to a cache file and memory-mapped on later starts.
 * The file is keyed by what it was made from (the checkpoint files' names, sizes, modification times and first
 * 64 KiB, the packed matrices' shapes and order, the thread layout, the format version) and carries a checksum of
 * its bytes: a stale, truncated, corrupt or foreign file is never used, only rebuilt. Writers write a
 * temporary file and rename it over the old one, so two servers starting at once never see a partial file.
 *
 * Where: the cache folder (core/cache_dir.h), which also keeps it bounded. */
#ifndef TERN_MODELS_PACK_CACHE_H
#define TERN_MODELS_PACK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The cache file's format, and the packed blocks' (qpack.h): bump it when either changes; a file of another
 * version is rebuilt. */
#define TERN_PACK_CACHE_VERSION 3

/* A key for a model folder (or GGUF file) as its files are now: their names, sizes, modification times and heads; 0
 * (logged) when the path does not resolve, its folder cannot be listed or one of its weight or config files cannot be
 * looked at. What caches of things computed from the model (packed weights, prompt K/V) key by. */
uint64_t tern_model_source_key(const char *model_path);
/* The cache file for a model folder (or a GGUF model file) and thread layout (malloc'd), or NULL when caching is off,
 * no folder can be named or the model has no key; *source_key identifies the checkpoint's files as they are now. */
char *tern_pack_cache_path(const char *model_path, int threads, uint64_t *source_key);
/* Maps the cache read-only when its header carries `key` and `bytes` and its checksum holds: the data's first
 * byte (page-aligned), shared with every process mapping the same file, on 2 MiB pages where the page cache holds
 * the file in 2 MiB folios (as tern_pack_cache_save's writes and a read from disk leave it); otherwise NULL
 * (missing, stale, truncated, corrupt or foreign). Release with tern_pack_cache_unmap. */
const uint8_t *tern_pack_cache_map(const char *path, uint64_t key, size_t bytes);
/* Unmaps what tern_pack_cache_map returned for `bytes` (NULL: nothing). */
void tern_pack_cache_unmap(const uint8_t *data, size_t bytes);
/* Keeps `bytes` packed bytes for the next start: written with header and checksum to a temporary file beside
 * `path`, then renamed over it, so two servers starting at once never see a partial file. An error (a full
 * disk, a folder it may not write) costs the next start its packing, nothing else. */
TERN_MUST_CHECK tern_err *tern_pack_cache_save(const char *path, const uint8_t *data, size_t bytes, uint64_t key);

#endif
