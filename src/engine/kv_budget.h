/* kv_budget.h — KV memory arithmetic and the admission budget.
 *
 * A sequence of n positions costs n x (full-layer bytes per position) plus min(n, ring slots) x
 * (sliding-layer bytes per position): sliding layers saturate at their ring (window + chunk).
 * The engine reserves a request's whole cost (prompt + max_tokens) when it admits it and frees
 * it when the request ends, so the memory in use never exceeds the budget: nothing is
 * over-committed, nothing has to be preempted. The KV storage commits pages only as positions
 * are written and returns them on release (kv_cache.h), so the budget is real memory. */
#ifndef TERN_ENGINE_KV_BUDGET_H
#define TERN_ENGINE_KV_BUDGET_H

#include <stdint.h>

#include "kv/kv_cache.h"
#include "models/model.h"

typedef struct tern_kv_cost {
    uint64_t full_per_pos; /* K+V bytes of one position over all full layers */
    uint64_t ring_per_pos; /* K+V bytes of one position over all sliding (ring) layers */
    int64_t ring_slots;    /* positions a ring keeps per sequence (window + chunk) */
} tern_kv_cost;

/* The cost model of a model's KV layers, K stored as k_type and V as v_type, with `chunk` extra ring slots. */
void tern_kv_cost_from_desc(const tern_lm_desc *d, tern_kv_type k_type, tern_kv_type v_type, int64_t chunk,
                            tern_kv_cost *out);
/* The cost model of an allocated cache (its layers, dtype and ring slots). */
void tern_kv_cost_from_kv(const tern_kv *kv, tern_kv_cost *out);
/* Bytes a sequence of n positions needs (saturating at UINT64_MAX). */
uint64_t tern_kv_cost_bytes(const tern_kv_cost *c, int64_t n);
/* The largest n <= cap whose cost fits in `bytes` (0 if not even one position fits). */
int64_t tern_kv_cost_max_positions(const tern_kv_cost *c, uint64_t bytes, int64_t cap);

typedef struct tern_budget {
    uint64_t total, used, peak;
} tern_budget;

/* Reserves `bytes` if they fit in what is left; returns 1 on success, 0 otherwise. */
int tern_budget_reserve(tern_budget *b, uint64_t bytes);
/* Gives back a reservation. */
void tern_budget_release(tern_budget *b, uint64_t bytes);

#endif
