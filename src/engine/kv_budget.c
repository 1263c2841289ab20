/* kv_budget.c — KV cost model and reservations (see kv_budget.h). */
#include "engine/kv_budget.h"

#include <assert.h>

void tern_kv_cost_from_desc(const tern_lm_desc *d, tern_kv_type k_type, tern_kv_type v_type, int64_t chunk,
                            tern_kv_cost *out) {
    tern_lm_desc_kv_bytes(d, k_type, v_type, &out->full_per_pos, &out->ring_per_pos);
    out->ring_slots = d->sliding_window + (chunk > 0 ? chunk : 0);
}

void tern_kv_cost_from_kv(const tern_kv *kv, tern_kv_cost *out) {
    out->full_per_pos = out->ring_per_pos = 0;
    out->ring_slots = tern_kv_ctx(kv);
    for (int l = 0; l < tern_kv_n_layers(kv); l++) {
        uint64_t b = (uint64_t)tern_kv_pos_bytes(kv, l);
        if (tern_kv_is_ring(kv, l)) {
            out->ring_per_pos += b;
            out->ring_slots = tern_kv_slots(kv, l);
        } else {
            out->full_per_pos += b;
        }
    }
}

static uint64_t mul_sat(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t tern_kv_cost_bytes(const tern_kv_cost *c, int64_t n) {
    if (n <= 0)
        return 0;
    int64_t ring = n < c->ring_slots ? n : c->ring_slots;
    return add_sat(mul_sat((uint64_t)n, c->full_per_pos), mul_sat((uint64_t)ring, c->ring_per_pos));
}

int64_t tern_kv_cost_max_positions(const tern_kv_cost *c, uint64_t bytes, int64_t cap) {
    if (cap <= 0 || tern_kv_cost_bytes(c, 1) > bytes)
        return 0;
    if (tern_kv_cost_bytes(c, cap) <= bytes)
        return cap;
    int64_t lo = 1, hi = cap; /* cost is non-decreasing in n: bytes(lo) fits, bytes(hi) does not */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (tern_kv_cost_bytes(c, mid) <= bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int tern_budget_reserve(tern_budget *b, uint64_t bytes) {
    if (bytes > b->total - b->used)
        return 0;
    b->used += bytes;
    if (b->used > b->peak)
        b->peak = b->used;
    return 1;
}

void tern_budget_release(tern_budget *b, uint64_t bytes) {
    assert(bytes <= b->used); /* a request gives back only what it reserved */
    b->used = bytes > b->used ? 0 : b->used - bytes;
}
