/* kv_cache.c — K/V storage (see kv_cache.h).
 *
 * Each layer's K and V live in one anonymous mapping: the kernel hands out zero pages on first
 * touch, so a cache sized for n_seq x ctx positions costs address space, not memory, until
 * positions are written; tern_kv_release returns a finished sequence's pages. The serving
 * engine's memory budget counts what rows actually reserve, and this makes that count real. */
#include "kv/kv_cache.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"

typedef struct kv_layer {
    tern_kv_layer_desc d;
    int64_t slots;   /* per sequence */
    int64_t row;     /* values per position: kv_heads * head_dim */
    size_t kbytes, vbytes; /* bytes of a position's K row and V row */
    unsigned char *k, *v; /* [n_seq][slots] rows */
    size_t kmap, vmap;    /* bytes of the k and v mappings */
} kv_layer;

struct tern_kv {
    int n_layers, n_seq;
    int64_t ctx, extra;
    tern_kv_type kt, vt;
    kv_layer *layers;
    int64_t *len;     /* [n_seq] committed length */
    int64_t *written; /* [n_seq] one past the furthest position written since the last reset (>= len) */
    uint64_t bytes;
    void *work; /* tern_kv_work's area, work_bytes long */
    size_t work_bytes;
};

/* n zero bytes from the kernel, committed on first touch (page aligned, so also 64-byte aligned). */
static unsigned char *map_zeroed(size_t n) {
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unmap(unsigned char *p, size_t n) {
    if (p)
        munmap(p, n ? n : 1);
}

tern_err *tern_kv_check_types(const tern_kv_layer_desc *layers, int n_layers, tern_kv_type k_type,
                              tern_kv_type v_type) {
    if (k_type < 0 || k_type >= TERN_KV_TYPE_COUNT || v_type < 0 || v_type >= TERN_KV_TYPE_COUNT)
        return tern_errf(TERN_EINVAL, "KV cache type out of range");
    for (int l = 0; l < n_layers; l++)
        for (int plane = 0; plane < 2; plane++) {
            const tern_kv_type t = plane ? v_type : k_type;
            if (layers[l].head_dim % tern_kv_type_block(t))
                return tern_errf(TERN_EINVAL, "KV cache type %s stores blocks of %lld values, but layer %d's head_dim "
                                 "is %lld; use bf16, f16 or f32 for %s", tern_kv_type_name(t),
                                 (long long)tern_kv_type_block(t), l, (long long)layers[l].head_dim, plane ? "V" : "K");
        }
    return NULL;
}

tern_err *tern_kv_create(const tern_kv_layer_desc *layers, int n_layers, int n_seq, int64_t ctx, int64_t window,
                         int64_t extra, tern_kv_type k_type, tern_kv_type v_type, tern_kv **out) {
    *out = NULL;
    TERN_TRY(tern_kv_check_types(layers, n_layers, k_type, v_type));
    int ring = 0;
    for (int l = 0; l < n_layers; l++)
        ring |= layers[l].ring;
    if (n_seq <= 0 || ctx <= 0 || (ring && window <= 0) || extra < 0)
        return tern_errf(TERN_EINVAL, "KV cache needs n_seq, ctx and (with ring layers) window > 0");
    tern_kv *kv = calloc(1, sizeof *kv);
    if (!kv)
        return tern_errf(TERN_ENOMEM, "out of memory");
    kv->n_layers = n_layers;
    kv->n_seq = n_seq;
    kv->ctx = ctx;
    kv->extra = extra;
    kv->kt = k_type;
    kv->vt = v_type;
    kv->layers = calloc((size_t)(n_layers ? n_layers : 1), sizeof *kv->layers);
    kv->len = calloc((size_t)n_seq, sizeof *kv->len);
    kv->written = calloc((size_t)n_seq, sizeof *kv->written);
    if (!kv->layers || !kv->len || !kv->written) {
        tern_kv_free(kv);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    for (int l = 0; l < n_layers; l++) {
        kv_layer *L = &kv->layers[l];
        L->d = layers[l];
        L->slots = layers[l].ring && window + extra < ctx ? window + extra : ctx;
        L->row = layers[l].kv_heads * layers[l].head_dim;
        L->kbytes = tern_kv_type_bytes(k_type, L->row);
        L->vbytes = tern_kv_type_bytes(v_type, L->row);
        if (tern_mul_size((size_t)n_seq * (size_t)L->slots, L->kbytes, &L->kmap) ||
            tern_mul_size((size_t)n_seq * (size_t)L->slots, L->vbytes, &L->vmap)) {
            tern_kv_free(kv);
            return tern_errf(TERN_ENOMEM, "KV cache size overflows");
        }
        L->k = map_zeroed(L->kmap);
        L->v = L->k ? map_zeroed(L->vmap) : NULL;
        if (!L->k || !L->v) {
            tern_kv_free(kv);
            return tern_errf(TERN_ENOMEM, "cannot allocate %.1f MiB of KV cache",
                             (double)(L->kmap + L->vmap) / (1 << 20));
        }
        kv->bytes += (uint64_t)L->kmap + L->vmap;
    }
    *out = kv;
    return NULL;
}

void tern_kv_free(tern_kv *kv) {
    if (!kv)
        return;
    for (int l = 0; kv->layers && l < kv->n_layers; l++) {
        unmap(kv->layers[l].k, kv->layers[l].kmap);
        unmap(kv->layers[l].v, kv->layers[l].vmap);
    }
    free(kv->layers);
    free(kv->len);
    free(kv->written);
    tern_aligned_free(kv->work);
    free(kv);
}

void *tern_kv_work(tern_kv *kv, size_t bytes) {
    if (bytes > kv->work_bytes) {
        tern_aligned_free(kv->work);
        kv->work = tern_aligned_alloc(bytes, TERN_ALIGN);
        kv->work_bytes = kv->work ? bytes : 0;
    }
    return kv->work;
}

size_t tern_kv_work_bytes(const tern_kv *kv) { return kv->work_bytes; }
uint64_t tern_kv_bytes(const tern_kv *kv) { return kv->bytes; }
int64_t tern_kv_ctx(const tern_kv *kv) { return kv->ctx; }
int tern_kv_n_seq(const tern_kv *kv) { return kv->n_seq; }
int64_t tern_kv_slots(const tern_kv *kv, int layer) { return kv->layers[layer].slots; }

static unsigned char *slot_ptr(const tern_kv *kv, int layer, int seq, int64_t pos, int value) {
    assert(layer >= 0 && layer < kv->n_layers && seq >= 0 && seq < kv->n_seq && pos >= 0);
    const kv_layer *L = &kv->layers[layer];
    assert(L->d.ring || pos < L->slots); /* a full layer never wraps: position 0 would be overwritten */
    int64_t slot = pos % L->slots;
    size_t off = ((size_t)seq * (size_t)L->slots + (size_t)slot) * (value ? L->vbytes : L->kbytes);
    return (value ? L->v : L->k) + off;
}

void tern_kv_write(tern_kv *kv, int layer, int seq, int64_t pos, const float *k, const float *v) {
    const int64_t row = kv->layers[layer].row;
    tern_kv_type_store(kv->kt, k, slot_ptr(kv, layer, seq, pos, 0), row);
    tern_kv_type_store(kv->vt, v, slot_ptr(kv, layer, seq, pos, 1), row);
}

void tern_kv_read(const tern_kv *kv, int layer, int seq, int64_t pos, int value, float *out) {
    tern_kv_type_load(value ? kv->vt : kv->kt, slot_ptr(kv, layer, seq, pos, value), out, kv->layers[layer].row);
}

int tern_kv_holds(const tern_kv *kv, int layer, int seq, int64_t pos) {
    const int64_t len = kv->len[seq], slots = kv->layers[layer].slots;
    /* A ring's slot also held a later position written beyond len (then rolled back): that position overwrote it. */
    return pos >= 0 && pos < len && len - pos <= slots && kv->written[seq] - pos <= slots;
}

int64_t tern_kv_len(const tern_kv *kv, int seq) { return kv->len[seq]; }

const void *tern_kv_rows(const tern_kv *kv, int layer, int seq, int value) { return slot_ptr(kv, layer, seq, 0, value); }

tern_err *tern_kv_view_layer(const tern_kv *kv, int layer, int seq, tern_kv_view *out) {
    if (layer < 0 || layer >= kv->n_layers)
        return tern_errf(TERN_EINVAL, "KV view: cache layer %d out of range [0, %d)", layer, kv->n_layers);
    if (seq < 0 || seq >= kv->n_seq)
        return tern_errf(TERN_EINVAL, "KV view: sequence %d out of range [0, %d)", seq, kv->n_seq);
    const kv_layer *L = &kv->layers[layer];
    *out = (tern_kv_view){.k = tern_kv_rows(kv, layer, seq, 0), .v = tern_kv_rows(kv, layer, seq, 1),
                          .slots = L->slots, .kv_heads = L->d.kv_heads, .head_dim = L->d.head_dim,
                          .len = kv->len[seq], .ring = L->slots < kv->ctx, .k_type = kv->kt, .v_type = kv->vt};
    return NULL;
}

tern_err *tern_kv_set_len(tern_kv *kv, int seq, int64_t len) {
    if (seq < 0 || seq >= kv->n_seq)
        return tern_errf(TERN_EINVAL, "KV sequence %d out of range", seq);
    if (len < 0 || len > kv->ctx)
        return tern_errf(TERN_EINVAL, "KV length %lld outside [0, %lld]", (long long)len, (long long)kv->ctx);
    if (len == 0) { /* a reset, always fine */
        kv->len[seq] = kv->written[seq] = 0;
        return NULL;
    }
    /* A ring's slots past the window hold the positions written last, committed or not: going back further than
     * that would attend over positions the ring has already reused. */
    if (len < kv->written[seq] - kv->extra)
        for (int l = 0; l < kv->n_layers; l++)
            if (kv->layers[l].slots < kv->ctx)
                return tern_errf(TERN_EINVAL,
                                 "cannot go back to length %lld: positions up to %lld were written and sliding layers "
                                 "keep only %lld extra slots", (long long)len, (long long)kv->written[seq],
                                 (long long)kv->extra);
    kv->len[seq] = len;
    if (len > kv->written[seq])
        kv->written[seq] = len;
    return NULL;
}

int64_t tern_kv_written(const tern_kv *kv, int seq) { return kv->written[seq]; }

void tern_kv_mark_written(tern_kv *kv, int seq, int64_t end) {
    if (end > kv->written[seq])
        kv->written[seq] = end;
}

/* ---- access for the serving engine and the prefix cache ----------------------------------- */

int tern_kv_n_layers(const tern_kv *kv) { return kv->n_layers; }
int tern_kv_is_ring(const tern_kv *kv, int layer) { return kv->layers[layer].slots < kv->ctx; }
int64_t tern_kv_extra(const tern_kv *kv) { return kv->extra; }
tern_kv_type tern_kv_k_type(const tern_kv *kv) { return kv->kt; }
tern_kv_type tern_kv_v_type(const tern_kv *kv) { return kv->vt; }
size_t tern_kv_pos_bytes(const tern_kv *kv, int layer) { return kv->layers[layer].kbytes + kv->layers[layer].vbytes; }

void tern_kv_export_pos(const tern_kv *kv, int layer, int seq, int64_t pos, void *out) {
    const kv_layer *L = &kv->layers[layer];
    memcpy(out, slot_ptr(kv, layer, seq, pos, 0), L->kbytes);
    memcpy((unsigned char *)out + L->kbytes, slot_ptr(kv, layer, seq, pos, 1), L->vbytes);
}

void tern_kv_import_pos(tern_kv *kv, int layer, int seq, int64_t pos, const void *in) {
    const kv_layer *L = &kv->layers[layer];
    memcpy(slot_ptr(kv, layer, seq, pos, 0), in, L->kbytes);
    memcpy(slot_ptr(kv, layer, seq, pos, 1), (const unsigned char *)in + L->kbytes, L->vbytes);
}

tern_err *tern_kv_copy_seq(tern_kv *kv, int dst, int src, int64_t len) {
    if (dst < 0 || dst >= kv->n_seq || src < 0 || src >= kv->n_seq)
        return tern_errf(TERN_EINVAL, "KV copy: sequence %d or %d out of range [0, %d)", dst, src, kv->n_seq);
    if (len < 0 || len > kv->len[src])
        return tern_errf(TERN_EINVAL, "KV copy: length %lld exceeds the %lld positions of sequence %d",
                         (long long)len, (long long)kv->len[src], src);
    if (dst == src)
        return tern_kv_set_len(kv, dst, len);
    for (int l = 0; l < kv->n_layers; l++) {
        const kv_layer *L = &kv->layers[l];
        int64_t first = len > L->slots ? len - L->slots : 0; /* a ring holds only its last `slots` positions */
        for (int64_t p = first; p < len; p++) {
            memcpy(slot_ptr(kv, l, dst, p, 0), slot_ptr(kv, l, src, p, 0), L->kbytes);
            memcpy(slot_ptr(kv, l, dst, p, 1), slot_ptr(kv, l, src, p, 1), L->vbytes);
        }
    }
    kv->len[dst] = kv->written[dst] = len;
    return NULL;
}

/* Hands the whole pages inside [p, p + n) back to the kernel; they read as zeros afterwards. */
static void discard_pages(unsigned char *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    uintptr_t b = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1), e = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    if (e > b)
        madvise((void *)b, e - b, MADV_DONTNEED);
}

void tern_kv_release(tern_kv *kv, int seq) {
    if (seq < 0 || seq >= kv->n_seq)
        return;
    for (int l = 0; l < kv->n_layers; l++) {
        const kv_layer *L = &kv->layers[l];
        const size_t nk = (size_t)L->slots * L->kbytes, nv = (size_t)L->slots * L->vbytes;
        discard_pages(L->k + (size_t)seq * nk, nk);
        discard_pages(L->v + (size_t)seq * nv, nv);
    }
    kv->len[seq] = kv->written[seq] = 0;
}
