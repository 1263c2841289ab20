/* prefix_disk.h — the prefix cache's disk tier: cached blocks kept as files, so a restart (or a block the memory
 * tier evicted) finds them again.
 *
 * A block is named by its chain hash: the hash of every token from the start of the sequence to the block's end
 * (its parent's chain hash and its own ids), so the file for "this prefix" is found without the blocks before it
 * being in memory. Files live in DIR/<key>/, key naming the model and the KV layout (what the block's bytes mean);
 * each is a header (magic, version, key, chain hashes, token count, sizes), the ids, the K/V bytes, and a checksum
 * of ids and bytes. A file is written under a temporary name and renamed, so a crash leaves no half entry; a file
 * that is truncated, corrupt, of another version or key, or whose ids do not spell its name is removed when found,
 * never used.
 *
 * Writes happen on the tier's own thread from a bounded queue (a full queue drops the write: the block stays in
 * memory and is simply not kept on disk); reads happen on the caller's thread. The index of what the folder holds
 * is read at open and kept under a lock; past the size cap the least recently used files go. */
#ifndef TERN_KV_PREFIX_DISK_H
#define TERN_KV_PREFIX_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct tern_pc_disk tern_pc_disk;

typedef struct tern_pc_disk_stats {
    uint64_t bytes, files;        /* held on disk */
    uint64_t cap;
    uint64_t writes, reads;       /* files written, blocks read back */
    uint64_t dropped;             /* writes dropped (queue full, disk error) */
    uint64_t removed_bad;         /* files found corrupt, truncated, foreign or stale, and removed */
} tern_pc_disk_stats;

/* Opens (creating) the tier in dir for blocks of `block` tokens and `block_bytes` K/V bytes whose meaning `key`
 * names, holding at most cap_bytes, and reads its index (removing what is not sound). Errors name the folder. */
TERN_MUST_CHECK tern_err *tern_pc_disk_open(const char *dir, uint64_t key, int64_t block, uint64_t block_bytes, uint64_t cap_bytes,
                            tern_pc_disk **out);
/* Writes what is queued, stops the writer and frees; NULL is fine. */
void tern_pc_disk_close(tern_pc_disk *d);
/* The chain hash of a block of ids[0, len) after the block whose chain hash is `parent` (0 for a first block). */
uint64_t tern_pc_disk_chain(uint64_t parent, const int32_t *ids, int64_t len);
/* Queues a block for writing (copies ids and data); nothing when the folder already holds it. */
void tern_pc_disk_put(tern_pc_disk *d, uint64_t parent, uint64_t chain, const int32_t *ids, int64_t len,
                      const void *data);
/* The whole block after `parent` spelling ids[0, block) when the folder holds it: 1 with its K/V bytes in data
 * (block_bytes), else 0. */
int tern_pc_disk_get_block(tern_pc_disk *d, uint64_t parent, const int32_t *ids, void *data);
/* The block after `parent` (whole or partial) whose start agrees longest with ids[0, n): returns the tokens it
 * shares (0: none) with its ids in out_ids (block), its token count in *len and its bytes in data. */
int64_t tern_pc_disk_get_best(tern_pc_disk *d, uint64_t parent, const int32_t *ids, int64_t n, int32_t *out_ids,
                              int64_t *len, void *data);
/* The memory tier holds (on 1) or no longer holds (on 0) the block `chain`: what a prefetch need not read. */
void tern_pc_disk_resident(tern_pc_disk *d, uint64_t chain, int on);
/* 1 if the memory tier said it holds `chain`. */
int tern_pc_disk_is_resident(tern_pc_disk *d, uint64_t chain);
/* Waits until every queued write is done (tests, shutdown). */
void tern_pc_disk_flush(tern_pc_disk *d);
void tern_pc_disk_stats_get(tern_pc_disk *d, tern_pc_disk_stats *out);

#endif
