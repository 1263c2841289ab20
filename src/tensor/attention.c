/* attention.c — attention of one query token (see attention.h): chunking, merging, and the partials through the
 * active ISA's kernel table (the portable partial is kernels_portable.c's). */
#include "tensor/attention.h"

#include <math.h>
#include <string.h>

#include "core/half.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"

int64_t tern_attn_part_floats(int64_t n_heads, int64_t head_dim) { return n_heads * (head_dim + 2); }

int64_t tern_attn_slice_heads(const tern_attn_args *a) {
    return a->n_heads / a->kv_heads / (a->slices > 1 ? a->slices : 1);
}

int64_t tern_attn_slice_head0(const tern_attn_args *a, int64_t g) {
    return g * (a->n_heads / a->kv_heads) + (a->slices > 1 ? a->slice : 0) * tern_attn_slice_heads(a);
}

void tern_attn_rows(const tern_attn_args *a, int64_t offs[TERN_ATTN_CHUNK]) {
    const int64_t n = a->end - a->start + 1, row = a->kv_heads * a->head_dim;
    for (int64_t j = 0, slot = a->start % a->slots; j < n; j++, slot = slot + 1 == a->slots ? 0 : slot + 1)
        offs[j] = slot * row;
}

/* The partial on the active ISA. Chosen by the whole group, not the slice, so that every slice of a token takes
 * the same path. */
static void attend_part(const tern_attn_args *a) {
    const tern_kernel_table *k = tern_kernels();
    const int64_t group = a->n_heads / a->kv_heads;
    if (a->head_dim % k->lanes == 0 && k->lanes % group == 0)
        k->attend_part(a);
    else
        tern_kernels_portable.attend_part(a);
}

/* acc = acc merged with the partial of the chunk after it, for the slice's heads. */
static void merge(const tern_attn_args *a, float *acc, const float *next) {
    const int64_t hd = a->head_dim, sh = tern_attn_slice_heads(a);
    float *am = acc + a->n_heads * hd, *as = am + a->n_heads;
    const float *nm = next + a->n_heads * hd, *ns = nm + a->n_heads;
    for (int64_t g = 0; g < a->kv_heads; g++)
        for (int64_t h = tern_attn_slice_head0(a, g); h < tern_attn_slice_head0(a, g) + sh; h++) {
            const float m = am[h] > nm[h] ? am[h] : nm[h], ca = expf(am[h] - m), cn = expf(nm[h] - m);
            tern_kernels()->axpby(acc + h * hd, next + h * hd, hd, ca, cn);
            am[h] = m;
            as[h] = as[h] * ca + ns[h] * cn;
        }
}

int64_t tern_attn_spans(const tern_attn_args *a) {
    return a->end / TERN_ATTN_CHUNK > a->start / TERN_ATTN_CHUNK ? 2 : 1;
}

void tern_attend_span(const tern_attn_args *a, int64_t span, float *acc) {
    const int64_t first = a->start / TERN_ATTN_CHUNK, last = a->end / TERN_ATTN_CHUNK, half = (last - first + 2) / 2;
    const int64_t i0 = span == 0 ? first : first + half, i1 = span == 0 ? first + half - 1 : last;
    tern_attn_args c = *a;
    for (int64_t i = i0; i <= i1; i++) {
        c.start = i == first ? a->start : i * TERN_ATTN_CHUNK;
        c.end = i == last ? a->end : i * TERN_ATTN_CHUNK + TERN_ATTN_CHUNK - 1;
        c.part = i == i0 ? acc : a->part;
        attend_part(&c);
        if (i > i0)
            merge(a, acc, a->part);
    }
}

void tern_attn_finish(const tern_attn_args *a, float *const *parts, int64_t n) {
    const int64_t hd = a->head_dim, sh = tern_attn_slice_heads(a);
    if (n > 1)
        merge(a, parts[0], parts[1]);
    const float *sum = parts[0] + a->n_heads * hd + a->n_heads;
    for (int64_t g = 0; g < a->kv_heads; g++)
        for (int64_t h = tern_attn_slice_head0(a, g); h < tern_attn_slice_head0(a, g) + sh; h++) {
            const float inv = 1.0f / sum[h];
            for (int64_t d = 0; d < hd; d++)
                a->out[h * hd + d] = parts[0][h * hd + d] * inv;
        }
}

void tern_attend(const tern_attn_args *a) {
    const int64_t pf = tern_attn_part_floats(a->n_heads, a->head_dim), n = tern_attn_spans(a);
    float *parts[2] = {a->part + pf, a->part + 2 * pf};
    for (int64_t s = 0; s < n; s++)
        tern_attend_span(a, s, parts[s]);
    tern_attn_finish(a, parts, n);
}
