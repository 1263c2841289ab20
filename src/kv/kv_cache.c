/* kv_cache.c — K/V storage (see kv_cache.h).
 *
 * Each layer's K and V live in one anonymous mapping: the kernel hands out zero pages on first
 * touch, so a cache sized for n_seq x ctx positions costs address space, not memory, until
 * positions are written; tern_kv_release returns a finished sequence's pages. The serving
 * engine's memory budget counts what rows actually reserve, and this makes that count real. */
#include "kv/kv_cache.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/half.h"

typedef struct kv_layer {
    tern_kv_layer_desc d;
    int64_t slots;   /* per sequence */
    int64_t row;     /* elements per position: kv_heads * head_dim */
    unsigned char *k, *v; /* [n_seq][slots][row] */
    size_t map_bytes;     /* bytes of each of the k and v mappings */
} kv_layer;

struct tern_kv {
    int n_layers, n_seq;
    int64_t ctx, extra;
    tern_dtype dtype;
    size_t esize;
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

tern_err *tern_kv_create(const tern_kv_layer_desc *layers, int n_layers, int n_seq, int64_t ctx, int64_t window,
                         int64_t extra, tern_dtype dtype, tern_kv **out) {
    *out = NULL;
    if (dtype != TERN_DT_BF16 && dtype != TERN_DT_F32)
        return tern_errf(TERN_EINVAL, "KV cache dtype must be bf16 or f32");
    if (n_seq <= 0 || ctx <= 0 || window <= 0 || extra < 0)
        return tern_errf(TERN_EINVAL, "KV cache needs n_seq, ctx and window > 0");
    tern_kv *kv = calloc(1, sizeof *kv);
    if (!kv)
        return tern_errf(TERN_ENOMEM, "out of memory");
    kv->n_layers = n_layers;
    kv->n_seq = n_seq;
    kv->ctx = ctx;
    kv->extra = extra;
    kv->dtype = dtype;
    kv->esize = tern_dtype_size(dtype);
    kv->layers = calloc((size_t)(n_layers ? n_layers : 1), sizeof *kv->layers);
    kv->len = calloc((size_t)n_seq, sizeof *kv->len);
    kv->written = calloc((size_t)n_seq, sizeof *kv->written);
    if (!kv->layers || !kv->len) {
        tern_kv_free(kv);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    for (int l = 0; l < n_layers; l++) {
        kv_layer *L = &kv->layers[l];
        L->d = layers[l];
        L->slots = layers[l].ring && window + extra < ctx ? window + extra : ctx;
        L->row = layers[l].kv_heads * layers[l].head_dim;
        size_t n;
        if (tern_mul_size((size_t)n_seq * (size_t)L->slots, (size_t)L->row * kv->esize, &n)) {
            tern_kv_free(kv);
            return tern_errf(TERN_ENOMEM, "KV cache size overflows");
        }
        L->k = map_zeroed(n);
        L->v = L->k ? map_zeroed(n) : NULL;
        L->map_bytes = n;
        if (!L->k || !L->v) {
            tern_kv_free(kv);
            return tern_errf(TERN_ENOMEM, "cannot allocate %.1f MiB of KV cache", 2.0 * (double)n / (1 << 20));
        }
        kv->bytes += 2 * (uint64_t)n;
    }
    *out = kv;
    return NULL;
}

void tern_kv_free(tern_kv *kv) {
    if (!kv)
        return;
    for (int l = 0; kv->layers && l < kv->n_layers; l++) {
        unmap(kv->layers[l].k, kv->layers[l].map_bytes);
        unmap(kv->layers[l].v, kv->layers[l].map_bytes);
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
    const kv_layer *L = &kv->layers[layer];
    int64_t slot = pos % L->slots;
    size_t off = ((size_t)seq * (size_t)L->slots + (size_t)slot) * (size_t)L->row * kv->esize;
    return (value ? L->v : L->k) + off;
}

void tern_kv_write(tern_kv *kv, int layer, int seq, int64_t pos, const float *k, const float *v) {
    int64_t row = kv->layers[layer].row;
    unsigned char *kp = slot_ptr(kv, layer, seq, pos, 0), *vp = slot_ptr(kv, layer, seq, pos, 1);
    if (kv->dtype == TERN_DT_F32) {
        memcpy(kp, k, (size_t)row * 4);
        memcpy(vp, v, (size_t)row * 4);
    } else {
        tern_f32_to_bf16_row(k, (uint16_t *)kp, (size_t)row);
        tern_f32_to_bf16_row(v, (uint16_t *)vp, (size_t)row);
    }
}

void tern_kv_read(const tern_kv *kv, int layer, int seq, int64_t pos, int value, float *out) {
    int64_t row = kv->layers[layer].row;
    const unsigned char *p = slot_ptr(kv, layer, seq, pos, value);
    if (kv->dtype == TERN_DT_F32)
        memcpy(out, p, (size_t)row * 4);
    else
        tern_bf16_to_f32_row((const uint16_t *)p, out, (size_t)row);
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
                          .len = kv->len[seq], .ring = L->slots < kv->ctx, .dtype = kv->dtype};
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
tern_dtype tern_kv_dtype(const tern_kv *kv) { return kv->dtype; }
size_t tern_kv_row_bytes(const tern_kv *kv, int layer) { return (size_t)kv->layers[layer].row * kv->esize; }

void tern_kv_export_pos(const tern_kv *kv, int layer, int seq, int64_t pos, void *k, void *v) {
    size_t n = tern_kv_row_bytes(kv, layer);
    memcpy(k, slot_ptr(kv, layer, seq, pos, 0), n);
    memcpy(v, slot_ptr(kv, layer, seq, pos, 1), n);
}

void tern_kv_import_pos(tern_kv *kv, int layer, int seq, int64_t pos, const void *k, const void *v) {
    size_t n = tern_kv_row_bytes(kv, layer);
    memcpy(slot_ptr(kv, layer, seq, pos, 0), k, n);
    memcpy(slot_ptr(kv, layer, seq, pos, 1), v, n);
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
        size_t row = (size_t)L->row * kv->esize;
        for (int64_t p = first; p < len; p++) {
            memcpy(slot_ptr(kv, l, dst, p, 0), slot_ptr(kv, l, src, p, 0), row);
            memcpy(slot_ptr(kv, l, dst, p, 1), slot_ptr(kv, l, src, p, 1), row);
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
        size_t n = (size_t)L->slots * (size_t)L->row * kv->esize;
        discard_pages(L->k + (size_t)seq * n, n);
        discard_pages(L->v + (size_t)seq * n, n);
    }
    kv->len[seq] = kv->written[seq] = 0;
}
