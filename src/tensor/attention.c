/* attention.c — attention of one query token (see attention.h): chunking, merging, the portable partial and
 * dispatch. */
#include "tensor/attention.h"

#include <math.h>
#include <string.h>

#include "core/half.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"

int64_t tern_attn_part_floats(int64_t n_heads, int64_t head_dim) { return n_heads * (head_dim + 2); }

int64_t tern_attn_chunks(int64_t start, int64_t end) { return end / TERN_ATTN_CHUNK - start / TERN_ATTN_CHUNK + 1; }

void tern_attn_chunk(int64_t start, int64_t end, int64_t c, int64_t *s, int64_t *e) {
    const int64_t first = start / TERN_ATTN_CHUNK + c;
    *s = c == 0 ? start : first * TERN_ATTN_CHUNK;
    *e = (first + 1) * TERN_ATTN_CHUNK - 1 < end ? (first + 1) * TERN_ATTN_CHUNK - 1 : end;
}

void tern_attn_rows(const tern_attn_args *a, int64_t offs[TERN_ATTN_CHUNK]) {
    const int64_t n = a->end - a->start + 1, row = a->kv_heads * a->head_dim;
    for (int64_t j = 0, slot = a->start % a->slots; j < n; j++, slot = slot + 1 == a->slots ? 0 : slot + 1)
        offs[j] = slot * row;
}

static float elem(const void *base, tern_dtype dt, int64_t i) {
    return dt == TERN_DT_F32 ? ((const float *)base)[i] : tern_bf16_to_f32(((const uint16_t *)base)[i]);
}

void tern_attend_part_portable(const tern_attn_args *a) {
    const int64_t hd = a->head_dim, group = a->n_heads / a->kv_heads, row = a->kv_heads * hd;
    const int64_t n = a->end - a->start + 1;
    float *out = a->part, *mx = out + a->n_heads * hd, *sum = mx + a->n_heads;
    for (int64_t j = 0; j < n; j++) {
        const int64_t slot = (a->start + j) % a->slots;
        for (int64_t h = 0; h < a->n_heads; h++) {
            const int64_t off = slot * row + (h / group) * hd;
            float s = 0;
            for (int64_t d = 0; d < hd; d++)
                s += a->q[h * hd + d] * elem(a->k, a->dtype, off + d);
            a->scores[h * n + j] = s;
        }
    }
    for (int64_t h = 0; h < a->n_heads; h++) {
        float *s = a->scores + h * n, m = s[0], total = 0;
        for (int64_t j = 1; j < n; j++)
            m = s[j] > m ? s[j] : m;
        for (int64_t j = 0; j < n; j++) {
            s[j] = expf(s[j] - m);
            total += s[j];
        }
        mx[h] = m;
        sum[h] = total;
    }
    memset(out, 0, (size_t)(a->n_heads * hd) * sizeof(float));
    for (int64_t j = 0; j < n; j++) {
        const int64_t slot = (a->start + j) % a->slots;
        for (int64_t h = 0; h < a->n_heads; h++) {
            const int64_t off = slot * row + (h / group) * hd;
            const float p = a->scores[h * n + j];
            for (int64_t d = 0; d < hd; d++)
                out[h * hd + d] += p * elem(a->v, a->dtype, off + d);
        }
    }
}

void tern_attend_part(const tern_attn_args *a) {
    if (tern_isa_active() == TERN_ISA_AVX512 && a->head_dim % 16 == 0 && 16 % (a->n_heads / a->kv_heads) == 0) {
        tern_attend_part_avx512(a);
        return;
    }
    if (tern_isa_active() == TERN_ISA_AVX2 && a->head_dim % 8 == 0 && 8 % (a->n_heads / a->kv_heads) == 0) {
        tern_attend_part_avx2(a);
        return;
    }
    tern_attend_part_portable(a);
}

void tern_attn_merge(int64_t n_heads, int64_t head_dim, float *acc, const float *next) {
    float *am = acc + n_heads * head_dim, *as = am + n_heads;
    const float *nm = next + n_heads * head_dim, *ns = nm + n_heads;
    for (int64_t h = 0; h < n_heads; h++) {
        const float m = am[h] > nm[h] ? am[h] : nm[h], ca = expf(am[h] - m), cn = expf(nm[h] - m);
        for (int64_t d = 0; d < head_dim; d++)
            acc[h * head_dim + d] = acc[h * head_dim + d] * ca + next[h * head_dim + d] * cn;
        am[h] = m;
        as[h] = as[h] * ca + ns[h] * cn;
    }
}

void tern_attn_finish(int64_t n_heads, int64_t head_dim, const float *acc, float *out) {
    const float *sum = acc + n_heads * head_dim + n_heads;
    for (int64_t h = 0; h < n_heads; h++) {
        const float inv = 1.0f / sum[h];
        for (int64_t d = 0; d < head_dim; d++)
            out[h * head_dim + d] = acc[h * head_dim + d] * inv;
    }
}

void tern_attend(const tern_attn_args *a) {
    const int64_t n = tern_attn_chunks(a->start, a->end), pf = tern_attn_part_floats(a->n_heads, a->head_dim);
    tern_attn_args c = *a;
    for (int64_t i = 0; i < n; i++) {
        tern_attn_chunk(a->start, a->end, i, &c.start, &c.end);
        c.part = a->part + (i ? pf : 0);
        tern_attend_part(&c);
        if (i)
            tern_attn_merge(a->n_heads, a->head_dim, a->part, c.part);
    }
    tern_attn_finish(a->n_heads, a->head_dim, a->part, a->out);
}
