/* kv_cache.h — per-sequence K/V storage for the cache-owning attention layers.
 *
 * Full layers keep every position (capacity = context length); sliding layers keep a ring
 * of `window + extra` slots (slot = position % capacity). The `extra` slots are what make
 * chunked prefill and rollback safe: writing a chunk of up to `extra` positions, or
 * truncating back up to `extra` positions, never needs a slot the ring already reused.
 * Elements are stored in a KV type (tensor/kv_type.h: bf16 by default, f16, f32, or ggml's q8_0 / q4_0 blocks),
 * K and V each their own, and read back as f32.
 *
 * Storage is reserved address space: memory is committed as positions are written, and
 * tern_kv_release gives a sequence's pages back, so n_seq x ctx can exceed what any one
 * moment uses (the serving engine's budget bounds that). */
#ifndef TERN_KV_KV_CACHE_H
#define TERN_KV_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/kv_type.h"

typedef struct tern_kv_layer_desc {
    int64_t kv_heads, head_dim;
    int ring; /* 1: sliding window ring, 0: full length */
} tern_kv_layer_desc;

typedef struct tern_kv tern_kv;

/* NULL if layers can store K as k_type and V as v_type: a block type needs every head_dim a multiple of its block
 * (32); else an error naming the layer and the types that fit. */
TERN_MUST_CHECK tern_err *tern_kv_check_types(const tern_kv_layer_desc *layers, int n_layers, tern_kv_type k_type,
                              tern_kv_type v_type);
/* Allocates storage for n_seq sequences of up to `ctx` positions; ring layers hold window + extra slots. K is
 * stored as k_type, V as v_type; a block type needs every layer's head_dim a multiple of its block (32). */
TERN_MUST_CHECK tern_err *tern_kv_create(const tern_kv_layer_desc *layers, int n_layers, int n_seq, int64_t ctx, int64_t window,
                         int64_t extra, tern_kv_type k_type, tern_kv_type v_type, tern_kv **out);
/* Frees; NULL is fine. */
void tern_kv_free(tern_kv *kv);
/* Bytes of storage the cache holds. */
uint64_t tern_kv_bytes(const tern_kv *kv);
/* Maximum positions per sequence. */
int64_t tern_kv_ctx(const tern_kv *kv);
/* Number of sequences. */
int tern_kv_n_seq(const tern_kv *kv);
/* Slots a layer holds per sequence (ctx, or window + extra for ring layers). */
int64_t tern_kv_slots(const tern_kv *kv, int layer);
/* Stores K and V (each kv_heads * head_dim floats) of `pos` for sequence `seq`. */
void tern_kv_write(tern_kv *kv, int layer, int seq, int64_t pos, const float *k, const float *v);
/* Reads K (or V when `value`) of `pos` into out as f32; pos must still be held (see tern_kv_holds). */
void tern_kv_read(const tern_kv *kv, int layer, int seq, int64_t pos, int value, float *out);
/* 1 if the layer still holds `pos` of sequence `seq`: below its length, and (ring layers) neither pushed out by
 * later positions nor overwritten by positions written past the length and rolled back. */
int tern_kv_holds(const tern_kv *kv, int layer, int seq, int64_t pos);
/* Number of positions written to a sequence (its next position). */
int64_t tern_kv_len(const tern_kv *kv, int seq);
/* Raw storage of one sequence in one layer: [slots] rows of kv_heads * head_dim values of tern_kv_k_type (or
 * tern_kv_v_type when `value`), position p at slot p % slots (for kernels that read K or V in place). */
const void *tern_kv_rows(const tern_kv *kv, int layer, int seq, int value);
/* A read-only view of one cache layer of one sequence, for another model to attend over in place (the Gemma 4
 * assistant drafter reads its target's cache): the shapes tern_attn_args takes. */
typedef struct tern_kv_view {
    const void *k, *v;         /* [slots] rows of kv_heads * head_dim values of k_type / v_type; position p at
                                * slot p % slots */
    int64_t slots, kv_heads, head_dim;
    int64_t len;               /* the sequence's committed length: positions [max(0, len - slots), len) are held */
    int ring;                  /* a sliding layer's ring (slots < ctx) */
    tern_kv_type k_type, v_type;
} tern_kv_view;

/* Fills *out for cache layer `layer` of sequence `seq`; the view stays valid until the cache is freed, its
 * contents until the sequence is written or truncated. */
TERN_MUST_CHECK tern_err *tern_kv_view_layer(const tern_kv *kv, int layer, int seq, tern_kv_view *out);
/* Sets a sequence's committed length: after writing (grow, commit), or back (truncate) to no less than `extra`
 * positions before the furthest position written (tern_kv_written) when there are sliding layers; 0 resets. */
TERN_MUST_CHECK tern_err *tern_kv_set_len(tern_kv *kv, int seq, int64_t len);
/* One past the furthest position written to a sequence since its last reset, committed or not. */
int64_t tern_kv_written(const tern_kv *kv, int seq);
/* Records that a forward wrote the sequence's positions up to `end` (exclusive), committed or not. */
void tern_kv_mark_written(tern_kv *kv, int seq, int64_t end);
/* Scratch memory for the forward pass that uses this cache: at least `bytes`, TERN_ALIGN-aligned, contents
 * unspecified; kept (and grown when a larger pass needs it) until tern_kv_free, so that steady decoding does not
 * map and fault in fresh pages every step. Invalidated by the next call. NULL when out of memory. */
void *tern_kv_work(tern_kv *kv, size_t bytes);
/* The work area's size now: the largest `bytes` asked of tern_kv_work so far (0 before the first pass). */
size_t tern_kv_work_bytes(const tern_kv *kv);


/* ---- for the serving engine and the prefix cache: raw positions, copies, memory ---------- */

/* Number of cache-owning layers. */
int tern_kv_n_layers(const tern_kv *kv);
/* 1 if the layer is a ring (holds fewer slots than ctx). */
int tern_kv_is_ring(const tern_kv *kv, int layer);
/* The `extra` ring slots: the most tokens one row may append per forward (minus one) and the rollback depth. */
int64_t tern_kv_extra(const tern_kv *kv);
/* Storage types of K and of V. */
tern_kv_type tern_kv_k_type(const tern_kv *kv);
tern_kv_type tern_kv_v_type(const tern_kv *kv);
/* Bytes of K and V together stored for one position of one layer. */
size_t tern_kv_pos_bytes(const tern_kv *kv, int layer);
/* Copies the stored bytes of K then V at `pos` (which must be held) into out (pos_bytes). */
void tern_kv_export_pos(const tern_kv *kv, int layer, int seq, int64_t pos, void *out);
/* Stores K and V bytes as exported (same types) at `pos`; the caller sets the length afterwards. */
void tern_kv_import_pos(tern_kv *kv, int layer, int seq, int64_t pos, const void *in);
/* Makes sequence dst hold src's positions [0, len) (what src still holds of them) and sets dst's length to len. */
TERN_MUST_CHECK tern_err *tern_kv_copy_seq(tern_kv *kv, int dst, int src, int64_t len);
/* Resets a sequence to length 0 and returns its pages to the operating system. */
void tern_kv_release(tern_kv *kv, int seq);

#endif
