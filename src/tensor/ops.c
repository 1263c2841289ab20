/* ops.c — portable kernels (see ops.h). */
#include "tensor/ops.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/half.h"
#include "tensor/cpu.h"
#include "tensor/kernels.h"
#include "tensor/qblock_mm.h"
#include "tensor/qmm.h"
#include "tensor/quant_mlx.h"

/* Bytes of one packed/stored row of `w` (for stepping through rows). */
static void row_ptrs(const tern_weight *w, int64_t row, const void **data, const void **scales, const void **biases) {
    int64_t in = tern_weight_cols(w);
    switch (w->fmt) {
    case TERN_WF_F32: *data = (const float *)w->data + row * in; break;
    case TERN_WF_F16:
    case TERN_WF_BF16: *data = (const uint16_t *)w->data + row * in; break;
    case TERN_WF_MLX_AFFINE: {
        int64_t groups = in / w->group;
        size_t ss = tern_dtype_size(w->sdtype);
        *data = (const uint32_t *)w->data + row * tern_mlx_row_words(in, w->bits);
        *scales = (const char *)w->scales + (size_t)(row * groups) * ss;
        *biases = (const char *)w->biases + (size_t)(row * groups) * ss;
        break;
    }
    case TERN_WF_MXFP4:
        *data = (const uint32_t *)w->data + row * (in / 8);
        *scales = (const uint8_t *)w->scales + row * (in / 32);
        break;
    case TERN_WF_QBLOCK: *data = (const uint8_t *)w->data + (size_t)row * tern_qblock_row_bytes(w->qblock, in); break;
    case TERN_WF_NONE: break;
    }
}

void tern_weight_row(const tern_weight *w, int64_t row, float *out) {
    const void *d = NULL, *s = NULL, *b = NULL;
    int64_t in = tern_weight_cols(w);
    row_ptrs(w, row, &d, &s, &b);
    switch (w->fmt) {
    case TERN_WF_F32: memcpy(out, d, (size_t)in * sizeof(float)); break;
    case TERN_WF_F16: tern_f16_to_f32_row(d, out, (size_t)in); break;
    case TERN_WF_BF16: tern_bf16_to_f32_row(d, out, (size_t)in); break;
    case TERN_WF_MLX_AFFINE: tern_mlx_dequantize_row(d, s, b, w->sdtype, w->bits, w->group, in, out); break;
    case TERN_WF_MXFP4: tern_mxfp4_dequantize_row(d, s, in, out); break;
    case TERN_WF_QBLOCK: tern_qblock_dequantize(w->qblock, d, out, in); break;
    case TERN_WF_NONE: memset(out, 0, (size_t)in * sizeof(float)); break;
    }
}

typedef struct {
    const tern_weight *w;
    int64_t row0, in, T, n_out;
    const float *x;
    float *y;
    int failed; /* a worker lacked scratch memory */
} matmul_job;

/* Each thread dequantizes its weight rows once into a scratch row and dots it with all T inputs. */
static void matmul_range(void *ctx, size_t b, size_t e, int tid) {
    const matmul_job *j = ctx;
    float *row = malloc((size_t)j->in * sizeof(float));
    if (!row) {
        tern_job_fail(&j->failed);
        return;
    }
    const int64_t in = j->in;
    for (size_t o = b; o < e; o++) {
        tern_weight_row(j->w, j->row0 + (int64_t)o, row);
        for (int64_t t = 0; t < j->T; t++) {
            const float *xt = j->x + t * in;
            float acc[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= in; k += 8)
                for (int u = 0; u < 8; u++)
                    acc[u] += row[k + u] * xt[k + u];
            float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; k < in; k++)
                s += row[k] * xt[k];
            j->y[t * j->n_out + (int64_t)o] = s;
        }
    }
    free(row);
}

/* Whether the int8 kernels take w: MLX affine always; ggml Q4_0 / Q8_0 when their packed copy was made (SIMD
 * paths), for prompt and generated tokens alike — the same integer dots as ggml's block products (qblock_mm.h),
 * summed in another order, and read from 16-row blocks that stream at up to twice the rate (e2b Q4_0 decode
 * 7.7 -> 12.3 tok/s on a Sapphire Rapids-class Xeon). */
static int qmm_takes(const tern_weight *w) { return w->fmt != TERN_WF_QBLOCK || w->qpack; }

int tern_matmul_rows(tern_pool *pool, const tern_weight *w, int64_t row0, int64_t n_out, const float *x, int64_t T,
                     float *y, tern_mm_kind kind) {
    const tern_kernel_table *k = tern_kernels();
    int rc = k->qmm && qmm_takes(w) ? tern_qmm_run(pool, k->qmm, &w, &row0, &n_out, 1, x, T, &y, NULL, 0) : 0;
    if (!rc && w->fmt == TERN_WF_QBLOCK)
        return tern_qblock_matmul(pool, k->qblock, w, row0, n_out, x, T, y);
    if (!rc && k->matmul)
        rc = k->matmul(pool, w, row0, n_out, x, T, y, kind);
    if (rc)
        return rc < 0 ? -1 : 0;
    matmul_job j = {w, row0, tern_weight_cols(w), T, n_out, x, y, 0};
    tern_pool_parallel_for(pool, (size_t)n_out, 16, matmul_range, &j);
    return j.failed ? -1 : 0;
}

int tern_matmul_slabs(tern_pool *pool, const tern_weight *w, int64_t n_out, const tern_slab *s, int n) {
    const tern_kernel_table *k = tern_kernels();
    int failed = 0;
    for (int i0 = 0; i0 < n; i0 += TERN_QMM_MAX_SLABS) {
        const int m = n - i0 < TERN_QMM_MAX_SLABS ? n - i0 : TERN_QMM_MAX_SLABS;
        int rc = 0;
        if (k->qmm && qmm_takes(w)) {
            tern_qmm_part parts[TERN_QMM_MAX_SLABS];
            for (int i = 0; i < m; i++)
                parts[i] = (tern_qmm_part){w, s[i0 + i].row0, n_out, s[i0 + i].x, s[i0 + i].T, s[i0 + i].y};
            rc = tern_qmm_run_parts(pool, k->qmm, parts, m);
        }
        if (rc < 0)
            return -1;
        for (int i = 0; !rc && i < m; i++) {
            const tern_slab *t = &s[i0 + i];
            failed |= tern_matmul_rows(pool, w, t->row0, n_out, t->x, t->T, t->y, t->kind) != 0;
        }
    }
    return failed ? -1 : 0;
}

int tern_matmul(tern_pool *pool, const tern_weight *w, const float *x, int64_t T, float *y, tern_mm_kind kind) {
    return tern_matmul_rows(pool, w, 0, tern_weight_rows(w), x, T, y, kind);
}

/* The int8 products of a group of whole matrices, with the input gated (gate(x, mul)) when gate is given;
 * tern_qmm_run's 1 / 0 (those kernels cannot take the group: nothing done) / -1. */
static int qmm_group(tern_pool *pool, const tern_weight *const *ws, int n, float *gated, const float *x,
                     const float *mul, tern_gate_fn gate, int64_t T, float *const *ys, const tern_weight *const *next,
                     int n_next) {
    const tern_qmm_kernels *qk = tern_kernels()->qmm;
    if (!qk || n > 4)
        return 0;
    for (int i = 0; i < n; i++)
        if (!qmm_takes(ws[i]))
            return 0;
    int64_t row0s[4] = {0}, n_outs[4];
    for (int i = 0; i < n; i++)
        n_outs[i] = tern_weight_rows(ws[i]);
    return gate ? tern_qmm_run_gated(pool, qk, ws, row0s, n_outs, n, gated, mul, gate, T, ys, next, n_next)
                : tern_qmm_run(pool, qk, ws, row0s, n_outs, n, x, T, ys, next, n_next);
}

int tern_matmul_group(tern_pool *pool, const tern_weight *const *ws, int n, const float *x, int64_t T,
                      float *const *ys, tern_mm_kind kind, const tern_weight *const *next, int n_next) {
    const int rc = qmm_group(pool, ws, n, NULL, x, NULL, NULL, T, ys, next, n_next);
    if (rc)
        return rc < 0 ? -1 : 0;
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed |= tern_matmul(pool, ws[i], x, T, ys[i], kind) != 0;
    return failed ? -1 : 0;
}

typedef struct gate_job {
    float *x;
    const float *mul;
    tern_gate_fn gate;
} gate_job;

static void gate_range(void *ctx, size_t b, size_t e, int tid) {
    const gate_job *j = ctx;
    (void)tid;
    j->gate(j->x + b, j->mul + b, (int64_t)(e - b));
}

int tern_matmul_gated_group(tern_pool *pool, const tern_weight *const *ws, int n, float *x, const float *mul,
                            tern_gate_fn gate, int64_t T, float *const *ys, tern_mm_kind kind,
                            const tern_weight *const *next, int n_next) {
    const int rc = qmm_group(pool, ws, n, x, x, mul, gate, T, ys, next, n_next);
    if (rc)
        return rc < 0 ? -1 : 0;
    gate_job j = {x, mul, gate};
    tern_pool_parallel_for(pool, (size_t)(T * tern_weight_cols(ws[0])), 4096, gate_range, &j);
    return tern_matmul_group(pool, ws, n, x, T, ys, kind, next, n_next);
}

void tern_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *y) {
    tern_kernels()->rmsnorm(x, w, n, eps, y);
}

void tern_rope_angles(int64_t dim, const float *inv_freq, int64_t pos, float *cs, float *sn) {
    for (int64_t i = 0; i < dim / 2; i++) {
        double a = (double)pos * inv_freq[i];
        cs[i] = (float)cos(a);
        sn[i] = (float)sin(a);
    }
}

void tern_rope_apply(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn) {
    tern_kernels()->rope_apply(x, dim, inv_freq, cs, sn);
}

void tern_gelu_tanh(float *x, int64_t n) {
    tern_kernels()->gelu_tanh(x, n);
}

void tern_gelu_tanh_mul(float *g, const float *u, int64_t n) {
    tern_kernels()->gelu_tanh_mul(g, u, n);
}

static uint16_t gelu_f16_table[65536 + 1]; /* one of padding: a SIMD gather reads 4 bytes per entry */
static pthread_once_t gelu_f16_once = PTHREAD_ONCE_INIT;

static void gelu_f16_init(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float x = tern_f16_to_f32((uint16_t)h);
        gelu_f16_table[h] = tern_f32_to_f16(0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x))));
    }
}

void tern_gelu_tanh_f16(float *x, int64_t n) {
    pthread_once(&gelu_f16_once, gelu_f16_init);
    for (int64_t i = 0; i < n; i++)
        x[i] = tern_gelu_f16_at(x[i], gelu_f16_table);
}

void tern_gelu_tanh_mul_f16(float *g, const float *u, int64_t n) {
    pthread_once(&gelu_f16_once, gelu_f16_init);
    tern_kernels()->gelu_tanh_mul_f16(g, u, n, gelu_f16_table);
}

void tern_softcap(float *x, int64_t n, float cap) {
    tern_kernels()->softcap(x, n, cap);
}

void tern_exp(float *x, int64_t n) {
    tern_kernels()->exp(x, n);
}

void tern_silu_mul(float *g, const float *u, int64_t n) { tern_kernels()->silu_mul(g, u, n); }

void tern_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                int64_t ldc) {
    tern_kernels()->sgemm(M, N, K, A, lda, B, ldb, C, ldc);
}

void tern_bgemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp, int64_t ldb,
                float *C, int64_t ldc) {
    tern_kernels()->bgemm(M, N, K, A, lda, Bp, ldb, C, ldc);
}

void tern_to_bf16(const float *x, uint16_t *y, int64_t n) { tern_kernels()->to_bf16(x, y, n); }

void tern_softmax_fast(float *x, int64_t n) { tern_kernels()->softmax(x, n); }

void tern_softmax(float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    float inv = (float)(1.0 / s);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}
