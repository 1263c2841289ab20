/* prefix_cache.h — reusing computed K/V across requests that share a prompt prefix.
 *
 * Design. The cache is a tree of fixed-size blocks of `block` tokens: a block is identified by
 * its parent block and its own token ids (so a block stands for the whole prefix up to its end),
 * and holds the K and V bytes of its positions for EVERY cache-owning layer — full and sliding
 * alike — copied out of a sequence as the positions are written. Resuming a new prompt after
 * B tokens — a chain of whole blocks and the start of one more — then needs nothing else:
 *   - full layers get positions [0, B) from the chain of blocks;
 *   - ring (sliding) layers get the last min(B, slots) positions, exactly what a ring that had
 *     computed the prefix itself would still hold (older positions would already be overwritten).
 * The alternative — snapshotting whole rings at each boundary — costs window x sliding bytes per
 * boundary (about 16x a block's own bytes for Gemma 4 at window 512, block 64); storing each
 * block's sliding positions once costs them once, whatever boundary is resumed later.
 *
 * Capture happens through a cursor per live sequence: after each forward the engine hands it the
 * sequence's committed length and tokens, and the cursor copies the new positions into its
 * pending block while they are certainly still in the ring, committing the block into the tree
 * when it fills (a block already in the tree is just touched). Generated tokens are captured too,
 * so a follow-up turn that repeats the conversation so far hits the cache. When a capture ends
 * inside a block, the positions it has are kept as a partial block (a leaf that never gets
 * children; it goes once a block after the same parent covers its tokens), so reuse is to the
 * token: a prompt shorter than a block, or one that parts from an earlier prompt mid-block, still
 * finds every token it shares — and a sequence still running is matched by its unfinished block
 * too (its positions so far are copied into a partial block when a lookup needs them).
 *
 * Memory: committed blocks count against a byte cap; when a new block would exceed it, the least
 * recently used leaf that no cursor is extending is evicted (leaves only, so every cached block
 * stays reachable from the root). A lookup touches its whole chain. Match and restore copy bytes;
 * they never alias a live sequence, so the source sequence may be reused or released freely.
 *
 * Not thread-safe: the engine thread owns it. */
#ifndef TERN_KV_PREFIX_CACHE_H
#define TERN_KV_PREFIX_CACHE_H

#include <stdint.h>

#include "core/status.h"
#include "kv/kv_cache.h"

typedef struct tern_prefix_cache tern_prefix_cache;
typedef struct tern_pc_node tern_pc_node;
typedef struct tern_pc_cursor tern_pc_cursor;

typedef struct tern_prefix_cache_stats {
    uint64_t bytes;       /* held by committed blocks */
    uint64_t cap;         /* the byte cap */
    uint64_t block_bytes; /* one block, all layers, K and V */
    uint64_t blocks;      /* committed blocks */
    uint64_t lookups, hits, hit_tokens; /* matches asked for; with >= 1 block; tokens matched */
    uint64_t inserted, evicted;
    /* the disk tier (0 without one) */
    uint64_t disk_hit_tokens;            /* of hit_tokens, those read back from disk */
    uint64_t disk_bytes, disk_files, disk_cap;
    uint64_t disk_writes, disk_dropped;  /* blocks written; writes dropped (queue full, disk error) */
    uint64_t disk_reads;                 /* blocks read back (by a match or a prefetch) */
    uint64_t disk_removed_bad;           /* files found unsound and removed */
} tern_prefix_cache_stats;

/* A cache for sequences of `kv`'s shape (layers, row sizes, K and V types), blocks of `block` tokens, at most
 * cap_bytes of committed blocks. A cap below one block gives a cache that never holds anything. */
TERN_MUST_CHECK tern_err *tern_prefix_cache_create(const tern_kv *kv, int64_t block, uint64_t cap_bytes, tern_prefix_cache **out);
/* Adds the disk tier (prefix_disk.h) in dir, at most cap_bytes, for the model model_key names: every block the cache
 * takes in is also written there (in the background), and a lookup continues there where memory ends. */
TERN_MUST_CHECK tern_err *tern_prefix_cache_open_disk(tern_prefix_cache *pc, const char *dir, uint64_t model_key, uint64_t cap_bytes);
/* Waits until the disk tier has written what it was given (no-op without one). */
void tern_prefix_cache_flush(tern_prefix_cache *pc);
/* Frees the cache (writing what the disk tier still has queued); every cursor must have been freed first. NULL is
 * fine. */
void tern_prefix_cache_free(tern_prefix_cache *pc);
/* Tokens per block. */
int64_t tern_prefix_cache_block(const tern_prefix_cache *pc);
/* Current counters. */
void tern_prefix_cache_stats_get(const tern_prefix_cache *pc, tern_prefix_cache_stats *out);
/* The longest cached prefix of ids[0, n), to the token: a chain of whole blocks, then the start of whichever block
 * after it (whole or partial) agrees longest — in memory, then on the disk tier (blocks read back join memory). Returns the tokens matched (<= n) and the block they end in, in *tail
 * (NULL when nothing matched). Marks the chain used. */
int64_t tern_prefix_cache_match(tern_prefix_cache *pc, const int32_t *ids, int64_t n, const tern_pc_node **tail);
/* Blocks of ids[0, n)'s cached prefix read from the disk tier ahead of a match, on any thread (only the tier, which
 * has its own lock, is touched): those the memory tier does not hold, so that the match that follows (on the engine
 * thread) takes them without reading the disk. NULL when there is nothing to read or no disk tier. */
typedef struct tern_pc_prefetch tern_pc_prefetch;
tern_pc_prefetch *tern_prefix_cache_prefetch(const tern_prefix_cache *pc, const int32_t *ids, int64_t n);
void tern_pc_prefetch_free(tern_pc_prefetch *p);
/* How many tokens of ids[0, n) the memory tier holds, as match would find them, touching nothing (no use marks, no
 * counts, no disk). */
int64_t tern_prefix_cache_peek(const tern_prefix_cache *pc, const int32_t *ids, int64_t n);
/* Tokens a prefetch read (beyond those the memory tier held when it ran). */
int64_t tern_pc_prefetch_tokens(const tern_pc_prefetch *p);
/* tern_prefix_cache_match taking what pf read (may be NULL) before reading the disk itself. */
int64_t tern_prefix_cache_match_prefetched(tern_prefix_cache *pc, const int32_t *ids, int64_t n, tern_pc_prefetch *pf,
                                           const tern_pc_node **tail);
/* Writes the first n_tokens positions of the chain ending at `tail` (what match returned with it) into sequence
 * `seq` of kv (which must have the cache's shape and length 0) and sets the sequence's length to n_tokens. */
TERN_MUST_CHECK tern_err *tern_prefix_cache_restore(const tern_prefix_cache *pc, const tern_pc_node *tail, int64_t n_tokens,
                                    tern_kv *kv, int seq);

/* A cursor with room for one pending block. */
TERN_MUST_CHECK tern_err *tern_pc_cursor_new(tern_prefix_cache *pc, tern_pc_cursor **out);
/* Ends any capture and frees; NULL is fine. */
void tern_pc_cursor_free(tern_pc_cursor *c);
/* Starts capturing a sequence whose first `pos` positions are the chain ending at `tail` (what match and restore
 * used; pos 0 and tail NULL for a cold start). The whole block it extends is pinned (kept from eviction) until the
 * capture ends. */
void tern_pc_cursor_begin(tern_pc_cursor *c, const tern_pc_node *tail, int64_t pos);
/* Copies positions [captured, len) of `seq` (ids[0, len) are its tokens) and commits every block that
 * fills. Call after each forward with the committed length; the positions must still be held by the
 * rings, which is always true right after the forward that wrote them. */
void tern_pc_cursor_capture(tern_pc_cursor *c, const tern_kv *kv, int seq, const int32_t *ids, int64_t len);
/* Stops capturing: keeps the positions of an unfinished block as a partial block (so a later prompt sharing them is
 * matched to the token) and unpins the chain. */
void tern_pc_cursor_end(tern_pc_cursor *c);

#endif
