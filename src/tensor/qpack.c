/* qpack.c — packing MLX affine weights for the int8 kernels, and the portable product (see qpack.h). */
#include "tensor/qpack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/half.h"
#include "tensor/quant_mlx.h"

tern_qpack_form tern_qpack_form_of(const tern_weight *w) {
    const int64_t in = tern_weight_cols(w);
    if (w->fmt == TERN_WF_MLX_AFFINE && (w->bits == 4 || w->bits == 8) && w->group >= 32 &&
        !(w->group & (w->group - 1)) && in % w->group == 0 &&
        (w->sdtype == TERN_DT_F32 || w->sdtype == TERN_DT_BF16 || w->sdtype == TERN_DT_F16))
        return (tern_qpack_form){w->bits, w->group, w->sdtype, TERN_QPACK_MLX};
    if (w->fmt == TERN_WF_QBLOCK && (w->qblock == TERN_QB_Q4_0 || w->qblock == TERN_QB_Q8_0) && in % 32 == 0)
        return (tern_qpack_form){w->qblock == TERN_QB_Q4_0 ? 4 : 8, 32, TERN_DT_F16, TERN_QPACK_GGML32};
    if (w->fmt == TERN_WF_QBLOCK && w->qblock == TERN_QB_Q4_K && in % 256 == 0)
        return (tern_qpack_form){4, 32, TERN_DT_F16, TERN_QPACK_Q4K};
    if (w->fmt == TERN_WF_QBLOCK && w->qblock == TERN_QB_Q6_K && in % 256 == 0)
        return (tern_qpack_form){6, 16, TERN_DT_F16, TERN_QPACK_Q6K};
    return (tern_qpack_form){0, 0, TERN_DT_F32, TERN_QPACK_MLX};
}

int tern_qpack_supported(const tern_weight *w) { return tern_qpack_form_of(w).bits != 0; }

size_t tern_qpack_group_bytes(tern_qpack_form f) {
    if (f.origin == TERN_QPACK_Q4K)
        return TERN_QPACK_Q4K_BYTES / 8;
    if (f.origin == TERN_QPACK_Q6K)
        return TERN_QPACK_Q6K_BYTES / 16;
    const size_t codes = (size_t)(16 * f.group * f.bits / 8);
    return (f.origin == TERN_QPACK_GGML32 ? 1 : 2) * 16 * tern_dtype_size(f.sdtype) + codes;
}

/* The 256 codes of a ggml Q4_K or Q6_K block unsigned (Q6_K's plus 32: 0..63), in value order. */
static void kquant_codes(tern_qblock t, const uint8_t *blk, uint8_t u[256]) {
    int8_t c[256];
    tern_qblock_k_codes(t, blk, c);
    for (int e = 0; e < 256; e++)
        u[e] = (uint8_t)(c[e] + (t == TERN_QB_Q6_K ? 32 : 0));
}

/* A ggml block's step d (f16 bits) and the bias of its affine form: -8d for Q4_0, -128d for Q8_0 (exact: a power
 * of two times an f16, in range for any weight f16 can hold). */
static uint16_t qblock_bias(int bits, uint16_t d) {
    return tern_f32_to_f16((bits == 4 ? -8.0f : -128.0f) * tern_f16_to_f32(d));
}

/* The 32 codes of a ggml Q4_0 / Q8_0 block as its affine form takes them (unsigned, in order). */
static void qblock_codes(int bits, const uint8_t *blk, uint8_t q[32]) {
    for (int j = 0; j < 16 && bits == 4; j++) {
        q[j] = blk[2 + j] & 15;
        q[16 + j] = blk[2 + j] >> 4;
    }
    for (int j = 0; j < 32 && bits == 8; j++)
        q[j] = blk[2 + j] ^ 0x80;
}

void tern_qpack_row(const tern_weight *w, int64_t row, uint8_t *codes, float *scales, float *biases) {
    const tern_qpack_form f = tern_qpack_form_of(w);
    const int64_t in = tern_weight_cols(w), ng = in / f.group;
    if (f.origin == TERN_QPACK_Q6K) { /* scale d sc, bias -32 d sc: d sc (u - 32), up to rounding */
        const uint8_t *src = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(w->qblock, in);
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *blk = src + (size_t)(g / 16) * 210;
            uint16_t d;
            memcpy(&d, blk + 208, 2);
            if (g % 16 == 0) /* the super-block's 256 codes */
                kquant_codes(TERN_QB_Q6_K, blk, codes + g * 16);
            scales[g] = tern_f16_to_f32(d) * (float)(int8_t)blk[192 + g % 16];
            biases[g] = -32.0f * scales[g];
        }
        return;
    }
    if (f.origin == TERN_QPACK_Q4K) { /* scale d sc, bias -(dmin m): d sc q - dmin m as ggml computes it */
        const uint8_t *src = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(w->qblock, in);
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *blk = src + (size_t)(g / 8) * 144;
            int sc, m;
            tern_qblock_k4_scale(blk + 4, (int)(g % 8), &sc, &m);
            uint16_t d, dmin;
            memcpy(&d, blk, 2);
            memcpy(&dmin, blk + 2, 2);
            if (g % 8 == 0) /* the super-block's 256 codes */
                kquant_codes(TERN_QB_Q4_K, blk, codes + g * 32);
            scales[g] = tern_f16_to_f32(d) * (float)sc;
            biases[g] = -(tern_f16_to_f32(dmin) * (float)m);
        }
        return;
    }
    if (w->fmt == TERN_WF_QBLOCK) {
        const size_t bb = tern_qblock_bytes(w->qblock);
        const uint8_t *src = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(w->qblock, in);
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *blk = src + (size_t)g * bb;
            uint16_t d;
            memcpy(&d, blk, 2);
            qblock_codes(f.bits, blk, codes + g * 32);
            scales[g] = tern_f16_to_f32(d);
            biases[g] = tern_f16_to_f32(qblock_bias(f.bits, d));
        }
        return;
    }
    tern_mlx_unpack_row((const uint32_t *)w->data + row * tern_mlx_row_words(in, f.bits), in, f.bits, codes);
    for (int64_t g = 0; g < ng; g++) {
        scales[g] = tern_mlx_scale(w->scales, w->sdtype, row * ng + g);
        biases[g] = tern_mlx_scale(w->biases, w->sdtype, row * ng + g);
    }
}

/* Row r of a 16-row block from an MLX affine row: scales and biases as stored, codes regrouped into chunks. */
static void pack_mlx_row(const tern_weight *w, int64_t row, int r, uint8_t *out, size_t gb) {
    const int64_t in = tern_weight_cols(w), ng = in / w->group;
    const size_t row_bytes = (size_t)tern_mlx_row_words(in, w->bits) * 4, ss = tern_dtype_size(w->sdtype);
    const int G = w->group, per_chunk = w->bits == 4 ? 8 : 4; /* codes of a row in one 64-byte chunk */
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

/* Row r of a 16-row block from a ggml Q4_0 / Q8_0 row: one group per block, its f16 scale (the ggml form). */
static void pack_qblock_row(const tern_weight *w, tern_qpack_form f, int64_t row, int r, uint8_t *out) {
    const int64_t in = tern_weight_cols(w), nb = in / 32;
    const size_t bb = tern_qblock_bytes(w->qblock);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(w->qblock, in);
    for (int64_t g = 0; g < nb; g++) {
        const uint8_t *blk = src + (size_t)g * bb;
        uint8_t *codes = out + tern_qpack_ggml_codes_at(f.bits, g), q[32];
        memcpy(out + tern_qpack_ggml_scales_at(f.bits, g) + 2 * r, blk, 2);
        qblock_codes(f.bits, blk, q);
        for (int c = 0; c < (f.bits == 4 ? 4 : 8); c++)
            for (int j = 0; j < 4; j++)
                codes[c * 64 + 4 * r + j] = f.bits == 8 ? q[4 * c + j] : (uint8_t)(q[8 * c + j] | q[8 * c + 4 + j] << 4);
    }
}

/* Row r of a 16-row block from a ggml Q4_K row, super-block by super-block (qpack.h). */
static void pack_q4k_row(const tern_weight *w, int64_t row, int r, uint8_t *out) {
    const int64_t in = tern_weight_cols(w);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(TERN_QB_Q4_K, in);
    for (int64_t s = 0; s < in / 256; s++) {
        const uint8_t *blk = src + (size_t)s * 144;
        uint8_t *sb = out + (size_t)s * TERN_QPACK_Q4K_BYTES;
        memcpy(sb + 2 * r, blk, 2);
        memcpy(sb + 32 + 2 * r, blk + 2, 2);
        uint8_t q[256];
        kquant_codes(TERN_QB_Q4_K, blk, q);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            tern_qblock_k4_scale(blk + 4, j, &sc, &m);
            out[tern_qpack_q4k_sc_at(s, j) + (size_t)r] = (uint8_t)sc;
            out[tern_qpack_q4k_m_at(s, j) + (size_t)r] = (uint8_t)m;
            const uint8_t *qj = q + 32 * j;
            uint8_t *codes = out + tern_qpack_q4k_codes_at(s, j);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 4; k++)
                    codes[c * 64 + 4 * r + k] = (uint8_t)(qj[8 * c + k] | qj[8 * c + 4 + k] << 4);
        }
    }
}

/* Row r of a 16-row block from a ggml Q6_K row (qpack.h): its codes' bits go into chunks shared with the other
 * rows (out starts zeroed). */
static void pack_q6k_row(const tern_weight *w, int64_t row, int r, uint8_t *out) {
    const int64_t in = tern_weight_cols(w);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(TERN_QB_Q6_K, in);
    for (int64_t s = 0; s < in / 256; s++) {
        const uint8_t *blk = src + (size_t)s * 210;
        memcpy(out + (size_t)s * TERN_QPACK_Q6K_BYTES + 2 * r, blk + 208, 2);
        uint8_t us[256];
        kquant_codes(TERN_QB_Q6_K, blk, us);
        for (int j = 0; j < 16; j++) {
            out[tern_qpack_q6k_sc_at(s, j) + (size_t)r] = blk[192 + j];
            const uint8_t *u = us + 16 * j;
            uint8_t *codes = out + tern_qpack_q6k_codes_at(s, j);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 4; k++) {
                    const int i = 4 * r + k, bit = 6 * (i % 8);
                    uint8_t *q = codes + 48 * c + 6 * (i / 8) + bit / 8;
                    const unsigned v = (unsigned)u[4 * c + k] << (bit % 8);
                    q[0] |= (uint8_t)v;
                    if (v >> 8)
                        q[1] |= (uint8_t)(v >> 8);
                }
        }
    }
}

void tern_qpack_block(const tern_weight *w, int64_t row0, uint8_t *out) {
    const tern_qpack_form f = tern_qpack_form_of(w);
    const int64_t in = tern_weight_cols(w), rows = tern_weight_rows(w), ng = in / f.group;
    const size_t ss = tern_dtype_size(f.sdtype), gb = tern_qpack_group_bytes(f);
    memset(out, 0, tern_qpack_block_bytes(w));
    const int64_t valid = rows - row0 < 0 ? 0 : rows - row0 > 16 ? 16 : rows - row0;
    if (f.origin == TERN_QPACK_Q4K || f.origin == TERN_QPACK_Q6K) { /* rows past the end: all zero */
        for (int r = 0; r < valid; r++)
            (f.origin == TERN_QPACK_Q4K ? pack_q4k_row : pack_q6k_row)(w, row0 + r, r, out);
        return;
    }
    /* Rows past the end: codes and bias 0, scale 1, so the kernels' check that a group's scales allow the exponent
     * add (the SIMD kernels) is not failed by padding. Their results are never stored. */
    const float one_f32 = 1.0f;
    const uint16_t one_half = f.sdtype == TERN_DT_BF16 ? 0x3f80 : 0x3c00;
    const void *one = f.sdtype == TERN_DT_F32 ? (const void *)&one_f32 : (const void *)&one_half;
    for (int64_t r = valid; r < 16; r++)
        for (int64_t g = 0; g < ng; g++)
            memcpy(out + (f.origin == TERN_QPACK_GGML32 ? tern_qpack_ggml_scales_at(f.bits, g) : (size_t)g * gb) +
                       (size_t)r * ss, one, ss);
    for (int r = 0; r < valid; r++) {
        if (f.origin == TERN_QPACK_GGML32)
            pack_qblock_row(w, f, row0 + r, r, out);
        else
            pack_mlx_row(w, row0 + r, r, out, gb);
    }
}

int64_t tern_qpack_blocks(const tern_weight *w) { return (tern_weight_rows(w) + 15) / 16; }

size_t tern_qpack_block_bytes(const tern_weight *w) {
    const tern_qpack_form f = tern_qpack_form_of(w);
    const int64_t ng = tern_weight_cols(w) / f.group;
    return tern_qpack_group_bytes(f) * (size_t)ng + (f.origin == TERN_QPACK_GGML32 && ng % 2 ? 32 : 0);
}

size_t tern_qpack_bytes(const tern_weight *w) { return tern_qpack_block_bytes(w) * (size_t)tern_qpack_blocks(w); }

static TERN_MUST_CHECK tern_err *create(const tern_weight *w, int n, const int64_t *first, uint8_t *const *at, int fill,
                        tern_qpack **out) {
    *out = NULL;
    const char *name = w->name ? w->name : "weight";
    if (!tern_qpack_supported(w))
        return tern_errf(TERN_EINVAL,
                         "%s: only MLX affine 4/8-bit weights with groups of 32 or more, and ggml Q4_0 / Q8_0, can be "
                         "packed", name);
    tern_qpack *p = calloc(1, sizeof *p);
    if (!p)
        return tern_errf(TERN_ENOMEM, "out of memory packing %s", name);
    p->rows = tern_weight_rows(w);
    p->in = tern_weight_cols(w);
    p->blocks = tern_qpack_blocks(w);
    const tern_qpack_form f = tern_qpack_form_of(w);
    p->bits = f.bits;
    p->group = f.group;
    p->sdtype = f.sdtype;
    p->group_bytes = tern_qpack_group_bytes(f);
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

/* Bytes of each array of a tern_qact, whole cache lines: the codes (with 64 bytes past them, as the kernels may
 * read), then five of one 32-bit value per group. */
static size_t qact_codes_bytes(int64_t T, int64_t in) { return ((size_t)(T * in) + 64 + 63) / 64 * 64; }
static size_t qact_group_bytes(int64_t T, int64_t in, int group) {
    return ((size_t)(T * (in / group)) * 4 + 63) / 64 * 64;
}

size_t tern_qact_bytes(int64_t T, int64_t in, int group) {
    return qact_codes_bytes(T, in) + 5 * qact_group_bytes(T, in, group);
}

void tern_qact_place(tern_qact *a, int64_t T, int64_t in, int group, void *mem) {
    memset(a, 0, sizeof *a);
    a->T = T;
    a->in = in;
    a->group = group;
    uint8_t *p = mem;
    const size_t gb = qact_group_bytes(T, in, group);
    a->q = (int8_t *)p;
    p += qact_codes_bytes(T, in);
    a->xs = (float *)p;
    a->xsum = (float *)(p + gb);
    a->exp_bits = (int32_t *)(p + 2 * gb);
    a->half_mask = (int32_t *)(p + 3 * gb);
    a->isum = (int32_t *)(p + 4 * gb);
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
    a->isum = malloc((size_t)(T * ng) * sizeof(int32_t));
    if (!a->q || !a->xs || !a->xsum || !a->exp_bits || !a->half_mask || !a->isum) {
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
                a->q[tern_qact_unit(a, t, g) * G + k] = (int8_t)v;
                isum += (int32_t)v;
            }
            tern_qact_set(a, tern_qact_unit(a, t, g), st, isum);
        }
}

void tern_qact_set_q8_0(tern_qact *a, int64_t u, const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
    int32_t isum = 0;
    for (int k = 0; k < 32; k++) {
        a->q[u * 32 + k] = (int8_t)blk[2 + k];
        isum += (int8_t)blk[2 + k];
    }
    tern_qact_set_ggml(a, u, tern_f16_to_f32(h), isum);
}

void tern_qact_set_q8_k(tern_qact *a, int64_t t, int64_t s, const uint8_t *blk) {
    float d;
    memcpy(&d, blk, 4);
    const int G = a->group, per = 256 / G;
    for (int j = 0; j < per; j++) {
        const int64_t u = tern_qact_unit(a, t, per * s + j);
        memcpy(a->q + u * G, blk + 4 + G * j, (size_t)G);
        int32_t isum = 0;
        for (int i = 0; i < G / 16; i++) { /* the block's sums of 16 */
            int16_t b;
            memcpy(&b, blk + 260 + 2 * (G / 16 * j + i), 2);
            isum += b;
        }
        tern_qact_set_ggml(a, u, d, isum);
    }
}

void tern_qact_free(tern_qact *a) {
    free(a->q);
    free(a->xs);
    free(a->xsum);
    free(a->exp_bits);
    free(a->half_mask);
    free(a->isum);
    memset(a, 0, sizeof *a);
}

/* The Q4_K and Q6_K forms' product (qpack.h): ggml's integers per super-block, then an FMA (and Q4_K's second). */
static void qmm_ref_kquant(const tern_weight *w, int q6, int64_t row0, int64_t n_out, const tern_qact *a, float *y) {
    const int64_t in = a->in, ns = in / 256, G = a->group, per = 256 / G;
    const size_t bb = tern_qblock_bytes(w->qblock);
    for (int64_t o = 0; o < n_out; o++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)(row0 + o) * tern_qblock_row_bytes(w->qblock, in);
        for (int64_t t = 0; t < a->T; t++) {
            float acc = 0;
            for (int64_t s = 0; s < ns; s++) {
                const uint8_t *blk = src + (size_t)s * bb;
                int32_t isum = 0, msum = 0;
                float xs = 0;
                uint8_t q[256];
                kquant_codes(w->qblock, blk, q);
                for (int j = 0; j < per; j++) {
                    const int64_t u = tern_qact_unit(a, t, per * s + j);
                    int32_t idot = 0;
                    for (int64_t k = 0; k < G; k++)
                        idot += (int32_t)q[j * G + k] * a->q[u * G + k];
                    int sc, m = 0;
                    if (q6) /* the codes' offset of 32 */
                        sc = (int8_t)blk[192 + j], idot -= 32 * a->isum[u];
                    else
                        tern_qblock_k4_scale(blk + 4, j, &sc, &m);
                    isum += sc * idot;
                    msum += m * a->isum[u];
                    xs = a->xs[u];
                }
                uint16_t d, dmin;
                memcpy(&d, blk + (q6 ? 208 : 0), 2);
                memcpy(&dmin, blk + 2, 2);
                acc = fmaf((float)isum, tern_f16_to_f32(d) * xs, acc);
                if (!q6)
                    acc = fmaf((float)msum, -(tern_f16_to_f32(dmin) * xs), acc);
            }
            y[t * n_out + o] = acc;
        }
    }
}

void tern_qmm_ref(const tern_weight *w, int64_t row0, int64_t n_out, const tern_qact *a, float *y) {
    const tern_qpack_form f = tern_qpack_form_of(w);
    if (f.origin == TERN_QPACK_Q4K || f.origin == TERN_QPACK_Q6K) {
        qmm_ref_kquant(w, f.origin == TERN_QPACK_Q6K, row0, n_out, a, y);
        return;
    }
    const int64_t in = a->in, G = f.group, ng = in / G;
    const int32_t off = f.bits == 4 ? 8 : 128; /* ggml steps: the bias's code offset */
    uint8_t *q = malloc((size_t)in);
    float *sb = malloc((size_t)(2 * ng) * sizeof *sb);
    for (int64_t o = 0; q && sb && o < n_out; o++) {
        tern_qpack_row(w, row0 + o, q, sb, sb + ng);
        for (int64_t t = 0; t < a->T; t++) {
            float acc = 0;
            for (int64_t g = 0; g < ng; g++) {
                const int64_t u = tern_qact_unit(a, t, g);
                const int8_t *xq = a->q + u * G;
                int32_t idot = 0;
                for (int64_t k = 0; k < G; k++)
                    idot += (int32_t)q[g * G + k] * xq[k];
                if (a->ggml_steps)
                    acc = fmaf((float)(idot - off * a->isum[u]), sb[g] * a->xs[u], acc);
                else
                    acc = fmaf(sb[ng + g], a->xsum[u], fmaf((float)idot, sb[g] * a->xs[u], acc));
            }
            y[t * n_out + o] = acc;
        }
    }
    free(q);
    free(sb);
}
