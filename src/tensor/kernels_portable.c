/* kernels_portable.c — the portable kernels: plain C, the reference every SIMD kernel is tested against, and the
 * path of a CPU without AVX2; with them, the choice of the active ISA's table. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "tensor/attention.h"
#include "tensor/checksum.h"
#include "tensor/kernels.h"
#include "tensor/qblock_mm.h"

static void rmsnorm_portable(const float *x, const float *w, int64_t n, float eps, float *y) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    if (w)
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * r * w[i];
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * r;
}

static void rope_apply_portable(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn) {
    int64_t half = dim / 2;
    for (int64_t i = 0; i < half; i++) {
        if (inv_freq[i] == 0.0f)
            continue;
        float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * cs[i] - x1 * sn[i];
        x[i + half] = x1 * cs[i] + x0 * sn[i];
    }
}

static void gelu_tanh_portable(float *x, int64_t n) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}

static void gelu_tanh_mul_portable(float *g, const float *u, int64_t n) {
    gelu_tanh_portable(g, n);
    for (int64_t i = 0; i < n; i++)
        g[i] *= u[i];
}

static void softcap_portable(float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++)
        x[i] = cap * tanhf(x[i] / cap);
}

static void exp_portable(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] >= -87.0f ? expf(x[i]) : 0.0f;
}

static void silu_mul_portable(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float t = -g[i] < 88.0f ? -g[i] : 88.0f;
        exp_portable(&t, 1);
        g[i] = g[i] / (1.0f + t) * u[i];
    }
}

static void axpby_portable(float *y, const float *x, int64_t n, float a, float b) {
    for (int64_t d = 0; d < n; d++)
        y[d] = y[d] * a + x[d] * b;
}

void tern_softmax_portable(float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++)
        x[i] -= m;
    exp_portable(x, n);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

/* Row by row: C[i] = sum over k of A[i][k] B[k], the reference of the SIMD paths' register tiles. */
void tern_sgemm_portable(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                         float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; j++)
            c[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            const float a = A[i * lda + k], *b = B + k * ldb;
            for (int64_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

/* Row by row over pairs of k: the reference of the SIMD paths' bf16 dot products. */
void tern_bgemm_portable(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint32_t *Bp,
                         int64_t ldb, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; j++)
            c[j] = 0;
        for (int64_t k = 0; k < K; k += 2) {
            const float a0 = tern_bf16_to_f32(A[i * lda + k]), a1 = tern_bf16_to_f32(A[i * lda + k + 1]);
            const uint32_t *b = Bp + k / 2 * ldb;
            for (int64_t j = 0; j < N; j++)
                c[j] += a0 * tern_bf16_to_f32((uint16_t)b[j]) + a1 * tern_bf16_to_f32((uint16_t)(b[j] >> 16));
        }
    }
}

void tern_to_bf16_portable(const float *x, uint16_t *y, int64_t n) { tern_f32_to_bf16_row(x, y, (size_t)n); }

/* The partial of a->start..a->end (within one chunk) into a->part: the portable reference of the SIMD paths. */
static void attend_part_portable(const tern_attn_args *a) {
    const int64_t hd = a->head_dim, row = a->kv_heads * hd, n = a->end - a->start + 1, sh = tern_attn_slice_heads(a);
    float *out = a->part, *mx = out + a->n_heads * hd, *sum = mx + a->n_heads;
    for (int64_t g = 0; g < a->kv_heads; g++)
        for (int64_t h = tern_attn_slice_head0(a, g); h < tern_attn_slice_head0(a, g) + sh; h++) {
            float *s = a->scores + h * n, m = -INFINITY, total = 0;
            for (int64_t j = 0; j < n; j++) {
                const int64_t off = ((a->start + j) % a->slots) * row + g * hd;
                float dot = 0;
                for (int64_t d = 0; d < hd; d++)
                    dot += a->q[h * hd + d] * tern_kv_type_elem(a->k_type, a->k, off + d);
                s[j] = dot;
                m = dot > m ? dot : m;
            }
            for (int64_t j = 0; j < n; j++) {
                s[j] = expf(s[j] - m);
                total += s[j];
            }
            mx[h] = m;
            sum[h] = total;
            memset(out + h * hd, 0, (size_t)hd * sizeof(float));
            for (int64_t j = 0; j < n; j++) {
                const int64_t off = ((a->start + j) % a->slots) * row + g * hd;
                for (int64_t d = 0; d < hd; d++)
                    out[h * hd + d] += s[j] * tern_kv_type_elem(a->v_type, a->v, off + d);
            }
        }
}

static void checksum_blocks_portable(uint64_t acc[16], const void *p, size_t blocks, uint64_t first) {
    const uint8_t *b = p;
    for (size_t i = 0; i < blocks; i++, b += 128) {
        uint64_t d[16];
        memcpy(d, b, 128); /* little-endian: the only byte order this project builds for */
        for (int j = 0; j < 16; j++) {
            const uint64_t k = d[j] ^ ((uint64_t)(j + 1) * TERN_CHECKSUM_K + (first + i) * TERN_CHECKSUM_G);
            acc[j] += (k & 0xffffffffu) * (k >> 32) + d[j ^ 1];
        }
    }
}

static void gelu_tanh_mul_f16_portable(float *g, const float *u, int64_t n, const uint16_t *table) {
    for (int64_t i = 0; i < n; i++)
        g[i] = tern_gelu_f16_at(g[i], table) * u[i];
}

static double read_sum_portable(const float *p, size_t n) {
    double r = 0;
    for (size_t i = 0; i < n; i++)
        r += p[i];
    return r;
}

const tern_kernel_table tern_kernels_portable = {
    .isa = TERN_ISA_PORTABLE,
    .lanes = 1,
    .qmm = NULL,    /* f32 activations */
    .qblock = &tern_qblock_portable,
    .matmul = NULL, /* the portable loop of ops.c */
    .rmsnorm = rmsnorm_portable,
    .rope_apply = rope_apply_portable,
    .gelu_tanh = gelu_tanh_portable,
    .gelu_tanh_mul = gelu_tanh_mul_portable,
    .gelu_tanh_mul_f16 = gelu_tanh_mul_f16_portable,
    .softcap = softcap_portable,
    .exp = exp_portable,
    .silu_mul = silu_mul_portable,
    .softmax = tern_softmax_portable,
    .axpby = axpby_portable,
    .sgemm = tern_sgemm_portable,
    .bgemm = tern_bgemm_portable,
    .to_bf16 = tern_to_bf16_portable,
    .attend_part = attend_part_portable,
    .read_sum = read_sum_portable,
    .checksum_blocks = checksum_blocks_portable,
};

const tern_kernel_table *tern_kernels(void) {
    static const tern_kernel_table *const by_isa[] = {
        [TERN_ISA_PORTABLE] = &tern_kernels_portable,
        [TERN_ISA_AVX2] = &tern_kernels_avx2,
        [TERN_ISA_AVX512] = &tern_kernels_avx512,
        [TERN_ISA_AMX] = &tern_kernels_amx,
    };
    return by_isa[tern_isa_active()];
}
