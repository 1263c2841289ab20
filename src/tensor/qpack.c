/* qpack.c — packing MLX affine weights for the int8 kernels, and the portable product (see qpack.h). */
#include "tensor/qpack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "tensor/quant_mlx.h"

int tern_qpack_supported(const tern_weight *w) {
    const int64_t in = tern_weight_cols(w);
    return w->fmt == TERN_WF_MLX_AFFINE && (w->bits == 4 || w->bits == 8) && w->group >= 32 &&
           !(w->group & (w->group - 1)) && in % w->group == 0 &&
           (w->sdtype == TERN_DT_F32 || w->sdtype == TERN_DT_BF16 || w->sdtype == TERN_DT_F16);
}

size_t tern_qpack_group_bytes(int bits, int group, tern_dtype sdtype) {
    return 2 * 16 * tern_dtype_size(sdtype) + (size_t)(16 * group * bits / 8);
}

void tern_qpack_block(const tern_weight *w, int64_t row0, uint8_t *out) {
    const int64_t in = tern_weight_cols(w), rows = tern_weight_rows(w), ng = in / w->group;
    const size_t row_bytes = (size_t)tern_mlx_row_words(in, w->bits) * 4;
    const size_t ss = tern_dtype_size(w->sdtype), gb = tern_qpack_group_bytes(w->bits, w->group, w->sdtype);
    const int G = w->group, per_chunk = w->bits == 4 ? 8 : 4; /* codes of a row in one 64-byte chunk */
    memset(out, 0, gb * (size_t)ng);
    /* Rows past the end: codes and bias 0, scale 1, so the kernels' check that a group's scales allow the exponent
     * add (the SIMD kernels) is not failed by padding. Their results are never stored. */
    const float one_f32 = 1.0f;
    const uint16_t one_half = w->sdtype == TERN_DT_BF16 ? 0x3f80 : 0x3c00;
    const void *one = w->sdtype == TERN_DT_F32 ? (const void *)&one_f32 : (const void *)&one_half;
    const int64_t valid = rows - row0 < 0 ? 0 : rows - row0 > 16 ? 16 : rows - row0;
    for (int64_t r = valid; r < 16; r++)
        for (int64_t g = 0; g < ng; g++)
            memcpy(out + (size_t)g * gb + (size_t)r * ss, one, ss);
    for (int r = 0; r < 16 && row0 + r < rows; r++) {
        const int64_t row = row0 + r;
        const uint8_t *src = (const uint8_t *)w->data + (size_t)row * row_bytes;
        for (int64_t g = 0; g < ng; g++) {
            uint8_t *grp = out + (size_t)g * gb, *codes = grp + 32 * ss;
            memcpy(grp + (size_t)r * ss, (const char *)w->scales + (size_t)(row * ng + g) * ss, ss);
            memcpy(grp + (size_t)(16 + r) * ss, (const char *)w->biases + (size_t)(row * ng + g) * ss, ss);
            for (int c = 0; c < G / per_chunk; c++) {
                const int64_t k = g * G + (int64_t)c * per_chunk;
                uint8_t *dst = codes + c * 64 + 4 * r;
                if (w->bits == 8) {
                    memcpy(dst, src + k, 4);
                } else {
                    /* Stored byte i holds codes 2i (low nibble) and 2i+1 (high): bytes b0..b3 hold codes k..k+7. */
                    const uint8_t *b = src + k / 2;
                    dst[0] = (uint8_t)((b[0] & 15) | (b[2] & 15) << 4);
                    dst[1] = (uint8_t)((b[0] >> 4) | (b[2] >> 4) << 4);
                    dst[2] = (uint8_t)((b[1] & 15) | (b[3] & 15) << 4);
                    dst[3] = (uint8_t)((b[1] >> 4) | (b[3] >> 4) << 4);
                }
            }
        }
    }
}

int64_t tern_qpack_blocks(const tern_weight *w) { return (tern_weight_rows(w) + 15) / 16; }

size_t tern_qpack_block_bytes(const tern_weight *w) {
    return tern_qpack_group_bytes(w->bits, w->group, w->sdtype) * (size_t)(tern_weight_cols(w) / w->group);
}

size_t tern_qpack_bytes(const tern_weight *w) { return tern_qpack_block_bytes(w) * (size_t)tern_qpack_blocks(w); }

static tern_err *create(const tern_weight *w, int n, const int64_t *first, uint8_t *const *at, int fill,
                        tern_qpack **out) {
    *out = NULL;
    const char *name = w->name ? w->name : "weight";
    if (!tern_qpack_supported(w))
        return tern_errf(TERN_EINVAL, "%s: only MLX affine 4/8-bit weights with groups of 32 or more can be packed",
                         name);
    tern_qpack *p = calloc(1, sizeof *p);
    if (!p)
        return tern_errf(TERN_ENOMEM, "out of memory packing %s", name);
    p->rows = tern_weight_rows(w);
    p->in = tern_weight_cols(w);
    p->blocks = tern_qpack_blocks(w);
    p->bits = w->bits;
    p->group = w->group;
    p->sdtype = w->sdtype;
    p->group_bytes = tern_qpack_group_bytes(w->bits, w->group, w->sdtype);
    p->block_bytes = tern_qpack_block_bytes(w);
    p->owns_data = at == NULL;
    p->pieces = n;
    p->first = malloc((size_t)n * sizeof *p->first);
    p->piece_data = malloc((size_t)n * sizeof *p->piece_data);
    if (p->first && p->piece_data) {
        for (int i = 0; i < n; i++) {
            p->first[i] = first ? first[i] : 0;
            p->piece_data[i] = at ? at[i] : NULL;
        }
        if (!at)
            p->piece_data[0] = tern_stream_alloc(tern_qpack_bytes(w));
        p->data = p->piece_data[0];
    }
    if (!p->data) {
        tern_qpack_free(p);
        return tern_errf(TERN_ENOMEM, "out of memory packing %s (%zu bytes)", name, tern_qpack_bytes(w));
    }
    for (int i = 0; i < n; i++) {
        const int64_t end = i + 1 < n ? p->first[i + 1] : p->blocks;
        if (p->first[i] >= end || (i == 0 && p->first[0] != 0)) {
            tern_qpack_free(p);
            return tern_errf(TERN_EINVAL, "%s: pieces must start at block 0 and increase", name);
        }
        for (int64_t b = p->first[i]; fill && b < end; b++)
            tern_qpack_block(w, b * 16, p->piece_data[i] + (size_t)(b - p->first[i]) * p->block_bytes);
    }
    *out = p;
    return NULL;
}

tern_err *tern_qpack_create(const tern_weight *w, uint8_t *at, tern_qpack **out) {
    return create(w, 1, NULL, at ? &at : NULL, 1, out);
}

tern_err *tern_qpack_place(const tern_weight *w, uint8_t *at, tern_qpack **out) {
    return create(w, 1, NULL, &at, 0, out);
}

tern_err *tern_qpack_create_split(const tern_weight *w, int n, const int64_t *first, uint8_t *const *at, int fill,
                                  tern_qpack **out) {
    if (n < 1 || !first || !at) {
        *out = NULL;
        return tern_errf(TERN_EINVAL, "%s: a split packing needs at least one piece", w->name ? w->name : "weight");
    }
    return create(w, n, first, at, fill, out);
}

void tern_qpack_free(tern_qpack *p) {
    if (!p)
        return;
    if (p->owns_data)
        tern_aligned_free(p->data);
    free(p->first);
    free(p->piece_data);
    free(p);
}

int tern_qact_alloc(tern_qact *a, int64_t T, int64_t in, int group) {
    const int64_t ng = in / group;
    memset(a, 0, sizeof *a);
    a->T = T;
    a->in = in;
    a->group = group;
    a->q = malloc((size_t)(T * in) + 64);
    a->xs = malloc((size_t)(T * ng) * sizeof(float));
    a->xsum = malloc((size_t)(T * ng) * sizeof(float));
    a->exp_bits = malloc((size_t)(T * ng) * sizeof(int32_t));
    a->half_mask = malloc((size_t)(T * ng) * sizeof(int32_t));
    if (!a->q || !a->xs || !a->xsum || !a->exp_bits || !a->half_mask) {
        tern_qact_free(a);
        return 0;
    }
    return 1;
}

void tern_qact_fill_ref(tern_qact *a, const float *x) {
    const int64_t in = a->in, G = a->group, ng = in / G;
    for (int64_t t = 0; t < a->T; t++)
        for (int64_t g = 0; g < ng; g++) {
            const float *xg = x + t * in + g * G;
            float amax = 0;
            for (int64_t k = 0; k < G; k++)
                amax = fmaxf(amax, fabsf(xg[k])); /* NaN ignored */
            const tern_qact_step st = tern_qact_step_for(amax);
            int32_t isum = 0;
            for (int64_t k = 0; k < G; k++) {
                /* Clamped before rounding, as the SIMD quantizers do: NaN becomes -127 there and here. */
                const float v = nearbyintf(fminf(fmaxf(xg[k] * st.inv, -127.0f), 127.0f));
                a->q[t * in + g * G + k] = (int8_t)v;
                isum += (int32_t)v;
            }
            tern_qact_set(a, t * ng + g, st, isum);
        }
}

void tern_qact_free(tern_qact *a) {
    free(a->q);
    free(a->xs);
    free(a->xsum);
    free(a->exp_bits);
    free(a->half_mask);
    memset(a, 0, sizeof *a);
}

void tern_qmm_ref(const tern_weight *w, int64_t row0, int64_t n_out, const tern_qact *a, float *y) {
    const int64_t in = a->in, G = w->group, ng = in / G, words = tern_mlx_row_words(in, w->bits);
    uint8_t *q = malloc((size_t)in);
    if (!q)
        return;
    for (int64_t o = 0; o < n_out; o++) {
        const int64_t row = row0 + o;
        tern_mlx_unpack_row((const uint32_t *)w->data + row * words, in, w->bits, q);
        for (int64_t t = 0; t < a->T; t++) {
            const int8_t *xq = a->q + t * in;
            float acc = 0;
            for (int64_t g = 0; g < ng; g++) {
                int32_t idot = 0;
                for (int64_t k = g * G; k < (g + 1) * G; k++)
                    idot += (int32_t)q[k] * xq[k];
                const float s = tern_mlx_scale(w->scales, w->sdtype, row * ng + g);
                const float b = tern_mlx_scale(w->biases, w->sdtype, row * ng + g);
                acc = fmaf(b, a->xsum[t * ng + g], fmaf((float)idot, s * a->xs[t * ng + g], acc));
            }
            y[t * n_out + o] = acc;
        }
    }
    free(q);
}
