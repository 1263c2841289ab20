/* gemma4_vision.c — the Gemma 4 vision tower, embed_vision, and its processor's geometry (GEMMA4.md §7; Hugging
 * Face Gemma4VisionModel, Gemma4MultimodalEmbedder, Gemma4ImageProcessor):
 *
 *   pixels [H'][W'][3] u8 ─▶ 2x/255 − 1, p×p patches ─▶ input_proj + x/y position tables
 *       ─▶ encoder layers (RMSNorm sandwich; q/k/v clippable linears, q/k RMSNorm + 2D RoPE, v scale-free RMSNorm,
 *          attention over every patch with scale 1; gated GELU-tanh MLP)
 *       ─▶ k×k average pooling × sqrt(H) ─▶ [standardize] ─▶ scale-free RMSNorm ─▶ embedding_projection
 *
 * The arithmetic follows Hugging Face (the golden in tests/data/vision is an independent float reference of it).
 * Every matrix is a tern_weight run by the project's kernels, including attention: per head, blocks of queries
 * against the keys as one product, softmax, then against the values transposed, so scratch stays bounded for
 * the largest budget.
 *
 * Layouts: Hugging Face names tensors "model.vision_tower.*" / "model.embed_vision.*"; mlx-vlm drops "model.". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/half.h"
#include "core/json_util.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4_vision.h"
#include "models/tower.h"
#include "models/vision_encoder.h"
#include "tensor/ops.h"

#define MAX_LAYERS 64
#define QROWS 32 /* queries a thread scores at once: its scores stay [QROWS][patches] */

static const int budgets[] = {70, 140, 280, 560, TERN_GEMMA4_IMAGE_TOKENS_MAX};

typedef struct vis_cfg {
    int64_t H, I, layers, heads, kv_heads, hd, P, k, p, text_dim;
    double eps, theta;
    int clipped, standardize;
} vis_cfg;

typedef struct vlayer {
    float *ln_in, *ln_post_attn, *ln_pre_ff, *ln_post_ff, *q_norm, *k_norm;
    tern_clin q, k, v, o, gate, up, down;
} vlayer;

typedef struct g4vision {
    vis_cfg c;
    tern_tower_src src;
    tern_quant_config *qc;
    tern_weight patch;    /* [H][p*p*3], columns (ky, kx, channel) */
    float *patch_owned;   /* the patch matrix when reordered from another layout (GGUF) */
    float *pos;           /* [2][P][H]: row 0 by column, row 1 by row */
    vlayer layer[MAX_LAYERS];
    float *std_bias, *std_scale;
    tern_weight proj;     /* [text_dim][H] */
    float *inv_freq;      /* [hd/4]: the 2D RoPE's frequencies within each half */
    /* Attention products over bf16 queries, keys, probabilities and values (f32 sums), as a bf16 or quantized
     * checkpoint's reference runs them; a float32 or float16 tower keeps float32 products. */
    int attn_bf16;
} g4vision;

/* ---- configuration --------------------------------------------------------------------------------------- */

static TERN_MUST_CHECK tern_err *parse_cfg(const json_t *root, vis_cfg *c) {
    const json_t *vc = json_object_get(root, "vision_config");
    const json_t *tc = json_object_get(root, "text_config");
    tern_err *err = NULL;
    int64_t v;
#define GI(obj, key, dflt, lo, hi, dst) \
    if (!err && !(err = tern_json_get_int(obj, key, dflt, lo, hi, &v))) dst = v
    GI(vc, "hidden_size", 768, 8, 65536, c->H);
    GI(vc, "intermediate_size", 3072, 1, 1 << 20, c->I);
    GI(vc, "num_hidden_layers", 16, 1, MAX_LAYERS, c->layers);
    GI(vc, "num_attention_heads", 12, 1, 1024, c->heads);
    GI(vc, "num_key_value_heads", c->heads, 1, 1024, c->kv_heads);
    GI(vc, "head_dim", 64, 4, 4096, c->hd);
    GI(vc, "position_embedding_size", 10240, 1, 1 << 20, c->P);
    GI(vc, "pooling_kernel_size", 3, 1, 16, c->k);
    GI(vc, "patch_size", 16, 1, 64, c->p);
    GI(json_is_object(tc) ? tc : root, "hidden_size", 0, 1, 65536, c->text_dim);
#undef GI
    if (!err)
        err = tern_json_get_num(vc, "rms_norm_eps", 1e-6, &c->eps);
    if (!err)
        err = tern_json_get_bool(vc, "use_clipped_linears", 0, &c->clipped);
    if (!err)
        err = tern_json_get_bool(vc, "standardize", 0, &c->standardize);
    c->theta = 100.0;
    const json_t *rp = json_object_get(vc, "rope_parameters");
    if (!err && json_is_object(rp))
        err = tern_json_get_num(rp, "rope_theta", 100.0, &c->theta);
    else if (!err)
        err = tern_json_get_num(vc, "rope_theta", 100.0, &c->theta);
    if (err)
        return tern_err_wrap(err, "config.json vision_config");
    const char *rt = json_is_object(rp) ? json_string_value(json_object_get(rp, "rope_type")) : NULL;
    if (rt && strcmp(rt, "default"))
        return tern_errf(TERN_EUNSUPPORTED, "config.json vision_config.rope_parameters.rope_type '%s': the tower runs "
                         "the default RoPE", rt);
    const char *act = json_string_value(json_object_get(vc, "hidden_activation"));
    if (act && strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_new") && strcmp(act, "gelu_fast"))
        return tern_errf(TERN_EUNSUPPORTED, "config.json vision_config.hidden_activation '%s': the tower runs "
                         "gelu_pytorch_tanh", act);
    if (c->hd % 4)
        return tern_errf(TERN_EFORMAT, "config.json vision_config.head_dim %lld: the 2D RoPE needs a multiple of 4",
                         (long long)c->hd);
    if (c->heads % c->kv_heads)
        return tern_errf(TERN_EFORMAT, "config.json vision_config: %lld attention heads is not a multiple of %lld "
                         "key/value heads", (long long)c->heads, (long long)c->kv_heads);
    if (c->theta <= 0)
        return tern_errf(TERN_EFORMAT, "config.json vision_config: rope_theta must be positive");
    return NULL;
}

/* ---- loading ---------------------------------------------------------------------------------------------- */

static void g4v_free(void *impl) {
    g4vision *v = impl;
    if (!v)
        return;
    tern_tower_src_free(&v->src);
    tern_checkpoint_close(v->src.ck);
    tern_quant_config_free(v->qc);
    free(v->patch_owned);
    free(v->inv_freq);
    free(v);
}

static TERN_MUST_CHECK tern_err *load_layer(g4vision *v, int l) {
    const vis_cfg *c = &v->c;
    vlayer *L = &v->layer[l];
    const int64_t H = c->H, q = c->heads * c->hd, kv = c->kv_heads * c->hd;
    char p[96], r[200];
    snprintf(p, sizeof p, "vision_tower.encoder.layers.%d.", l);
    tern_err *err = NULL;
#define V(field, suffix, n) if (!err) { snprintf(r, sizeof r, "%s%s", p, suffix); err = tern_tower_floats(&v->src, r, n, &(field)); }
#define C(field, suffix, o, i) if (!err) { snprintf(r, sizeof r, "%s%s", p, suffix); err = tern_tower_clipped(&v->src, r, o, i, c->clipped, &(field)); }
    V(L->ln_in, "input_layernorm.weight", H);
    V(L->ln_post_attn, "post_attention_layernorm.weight", H);
    V(L->ln_pre_ff, "pre_feedforward_layernorm.weight", H);
    V(L->ln_post_ff, "post_feedforward_layernorm.weight", H);
    V(L->q_norm, "self_attn.q_norm.weight", c->hd);
    V(L->k_norm, "self_attn.k_norm.weight", c->hd);
    C(L->q, "self_attn.q_proj", q, H);
    C(L->k, "self_attn.k_proj", kv, H);
    C(L->v, "self_attn.v_proj", kv, H);
    C(L->o, "self_attn.o_proj", H, q);
    C(L->gate, "mlp.gate_proj", c->I, H);
    C(L->up, "mlp.up_proj", c->I, H);
    C(L->down, "mlp.down_proj", H, c->I);
#undef V
#undef C
    return err;
}

/* Reorders a patch convolution stored [out][3][pp] into the (pixel, channel) columns the patch matmul reads. */
static void patch_columns(const float *chw, int64_t out, int64_t pp, float *hwc) {
    for (int64_t o = 0; o < out; o++)
        for (int64_t ch = 0; ch < 3; ch++)
            for (int64_t k = 0; k < pp; k++)
                hwc[o * 3 * pp + k * 3 + ch] = chw[(o * 3 + ch) * pp + k];
}

tern_err *tern_gemma4_vision_load_from(tern_checkpoint *ck, const json_t *root, int patch_chw, const char *what,
                                       void **impl) {
    *impl = NULL;
    g4vision *v = calloc(1, sizeof *v);
    if (!v) {
        tern_checkpoint_close(ck);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    v->src = (tern_tower_src){.ck = ck, .what = "vision tower"};
    tern_err *err = parse_cfg(root, &v->c);
    if (!err)
        err = tern_quant_config_parse(root, &v->qc);
    if (err) {
        g4v_free(v);
        return tern_err_wrap(err, "%s", what);
    }
    const vis_cfg *c = &v->c;
    v->src.qc = v->qc;
    v->src.mlx = !tern_checkpoint_find(ck, "model.vision_tower.patch_embedder.input_proj.weight") &&
                 tern_checkpoint_find(ck, "vision_tower.patch_embedder.input_proj.weight");
    const int64_t pin = 3 * c->p * c->p;
    if (patch_chw) {
        /* Stored [H][3][p][p] (a convolution's layout): reordered once to the (ky, kx, channel) columns. */
        float *raw = malloc((size_t)(c->H * pin) * sizeof *raw);
        v->patch_owned = malloc((size_t)(c->H * pin) * sizeof *v->patch_owned);
        err = raw && v->patch_owned ? tern_tower_read(&v->src, "vision_tower.patch_embedder.input_proj.weight",
                                                      (size_t)(c->H * pin), raw)
                                    : tern_errf(TERN_ENOMEM, "out of memory");
        if (!err)
            patch_columns(raw, c->H, c->p * c->p, v->patch_owned);
        free(raw);
        v->patch = (tern_weight){.fmt = TERN_WF_F32, .ndim = 2, .shape = {c->H, pin}, .data = v->patch_owned,
                                 .name = "vision_tower.patch_embedder.input_proj.weight"};
    } else {
        err = tern_tower_matrix(&v->src, "vision_tower.patch_embedder.input_proj", c->H, pin, &v->patch);
    }
    if (!err)
        err = tern_tower_floats(&v->src, "vision_tower.patch_embedder.position_embedding_table",
                                (size_t)(2 * c->P * c->H), &v->pos);
    for (int l = 0; l < c->layers && !err; l++)
        err = load_layer(v, l);
    if (!err && c->standardize)
        err = tern_tower_floats(&v->src, "vision_tower.std_bias", (size_t)c->H, &v->std_bias);
    if (!err && c->standardize)
        err = tern_tower_floats(&v->src, "vision_tower.std_scale", (size_t)c->H, &v->std_scale);
    if (!err)
        err = tern_tower_matrix(&v->src, "embed_vision.embedding_projection", c->text_dim, c->H, &v->proj);
    v->attn_bf16 = !err && v->layer[0].q.w.fmt != TERN_WF_F32 && v->layer[0].q.w.fmt != TERN_WF_F16;
    if (!err && !(v->inv_freq = malloc((size_t)(c->hd / 4) * sizeof *v->inv_freq)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    /* Each half of a head is a RoPE of width hd/2: inv_freq[j] = theta^(-2j / (hd/2)). */
    for (int64_t j = 0; !err && j < c->hd / 4; j++)
        v->inv_freq[j] = (float)(1.0 / pow(c->theta, (double)(2 * j) / (double)(c->hd / 2)));
    if (err) {
        g4v_free(v);
        return tern_err_wrap(err, "%s", what);
    }
    *impl = v;
    return NULL;
}

static TERN_MUST_CHECK tern_err *g4v_load(const char *dir, const void *config_root, void **impl) {
    tern_checkpoint *ck;
    TERN_TRY(tern_checkpoint_open(dir, &ck));
    return tern_gemma4_vision_load_from(ck, config_root, 0, dir, impl);
}

/* ---- the processor's geometry ------------------------------------------------------------------------------ */

static int g4v_budget_ok(const void *impl, int budget) {
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++)
        if (budget == budgets[i])
            return 1;
    return 0;
}

static int g4v_budget_nearest(const void *impl, int want) {
    int best = budgets[0];
    for (size_t i = 1; i < sizeof budgets / sizeof *budgets; i++)
        if (abs(budgets[i] - want) < abs(best - want))
            best = budgets[i];
    return best;
}

/* get_aspect_ratio_preserving_size: the largest multiple of k*p on each side within budget * k^2 patches at the
 * image's aspect ratio, a side that rounds to zero taking one k*p and the other floor(long / short) of them. */
static TERN_MUST_CHECK tern_err *g4v_plan(const void *impl, int w, int h, int budget, tern_vision_plan *pl) {
    const vis_cfg *c = &((const g4vision *)impl)->c;
    const double max_patches = (double)budget * (double)(c->k * c->k);
    const double factor = sqrt(max_patches * (double)(c->p * c->p) / ((double)h * (double)w));
    const int64_t side = c->k * c->p;
    int64_t th = (int64_t)floor(factor * h / (double)side) * side;
    int64_t tw = (int64_t)floor(factor * w / (double)side) * side;
    const int64_t max_side = (int64_t)budget * side;
    if (th == 0 && tw == 0)
        return tern_errf(TERN_EINVAL, "the image (%d x %d) cannot be resized for %d soft tokens", w, h, budget);
    if (th == 0) {
        th = side;
        tw = (int64_t)floor((double)w / (double)h) * side;
        tw = tw < max_side ? tw : max_side;
    } else if (tw == 0) {
        tw = side;
        th = (int64_t)floor((double)h / (double)w) * side;
        th = th < max_side ? th : max_side;
    }
    if ((double)(th * tw) > max_patches * (double)(c->p * c->p))
        return tern_errf(TERN_EINVAL, "the image (%d x %d) is too thin to resize within %d soft tokens", w, h, budget);
    if (th / c->p > c->P || tw / c->p > c->P)
        return tern_errf(TERN_EINVAL, "the image needs %lld x %lld patches, beyond the tower's position table (%lld)",
                         (long long)(tw / c->p), (long long)(th / c->p), (long long)c->P);
    pl->w = (int)tw;
    pl->h = (int)th;
    pl->tokens = (size_t)((th / side) * (tw / side));
    return NULL;
}

/* ---- running ---------------------------------------------------------------------------------------------- */

static int64_t g4v_dim(const void *impl) { return ((const g4vision *)impl)->c.text_dim; }

/* The scratch one run allocates, for N patches. */
typedef struct work {
    float *x;          /* [N][3 p^2] patch pixels; then [N][I] the MLP's gate */
    float *h, *a, *o;  /* [N][H] hidden state, normed input, sublayer output */
    float *q, *k, *v;  /* [N][heads*hd], [N][kv*hd] x 2 */
    float *kt;         /* one key/value head's keys transposed [hd][N] (bf16: packed by pairs, [hd/2][N]) */
    float *s;          /* [threads][QROWS][N] scores, a slab per thread */
    uint16_t *qb, *pb; /* bf16 attention: queries [N][heads*hd]; a thread's probabilities [threads][QROWS][N2] */
    uint32_t *vp;      /* bf16 attention: one key/value head's values packed by pairs of rows [N2/2][hd] */
    float *att;        /* [N][heads*hd] attention output */
    float *up, *tmp;   /* [N][I] the MLP's up; clamped product inputs [N][max(I, heads*hd, H)] */
    float *cs, *sn;    /* [N][hd/4] x 2 halves: RoPE angles by column, then by row */
} work;

static uint64_t work_floats(const vis_cfg *c, uint64_t N) {
    const uint64_t H = (uint64_t)c->H, I = (uint64_t)c->I, Q = (uint64_t)(c->heads * c->hd),
                   KV = (uint64_t)(c->kv_heads * c->hd), hd = (uint64_t)c->hd;
    uint64_t wide = I > Q ? I : Q;
    wide = wide > H ? wide : H;
    uint64_t x = (uint64_t)(3 * c->p * c->p) > I ? (uint64_t)(3 * c->p * c->p) : I;
    /* the scores: a slab per thread, for as many threads as the machine has cores (and as much again in halves for
     * bf16 probabilities, bf16 queries and packed values) */
    const uint64_t slabs = (uint64_t)QROWS * (uint64_t)tern_cpu_count();
    return N * (x + 3 * H + 2 * Q + 2 * KV + hd + slabs + I + wide + hd) + (N + 1) * (slabs + Q + hd) / 2 + hd;
}

static uint64_t g4v_work_bytes(const void *impl, size_t tokens) {
    const vis_cfg *c = &((const g4vision *)impl)->c;
    return work_floats(c, (uint64_t)tokens * (uint64_t)(c->k * c->k)) * sizeof(float);
}

/* Per-row passes over the pool. */
typedef struct norm_job {
    const float *src;
    float *dst, *acc; /* acc: add the result into it (the residual) */
    const float *w;
    int64_t n;
    float eps;
} norm_job;

static void norm_range(void *ctx, size_t b, size_t e, int tid) {
    const norm_job *j = ctx;
    for (size_t r = b; r < e; r++) {
        float *d = j->dst + r * j->n;
        tern_rmsnorm(j->src + r * j->n, j->w, j->n, j->eps, d);
        if (j->acc)
            for (int64_t i = 0; i < j->n; i++)
                j->acc[r * j->n + i] += d[i];
    }
}

static void norm_rows(tern_pool *pool, int64_t N, const float *src, float *dst, const float *w, int64_t n, float eps,
                      float *acc) {
    norm_job j = {src, dst, acc, w, n, eps};
    tern_tower_par(pool, N, norm_range, &j);
}

/* Per patch: q/k heads normed and turned by the 2D RoPE (first half by the column, second by the row), v heads
 * normed without weight. */
typedef struct qkv_job {
    const g4vision *v;
    const vlayer *L;
    float *q, *k, *vv;
    uint16_t *qb; /* bf16 attention: each token's queries as bf16 too; else NULL */
    const float *cs, *sn;
} qkv_job;

static void rope2d(float *x, int64_t hd, const float *inv_freq, const float *cs, const float *sn) {
    const int64_t q = hd / 4;
    tern_rope_apply(x, hd / 2, inv_freq, cs, sn);
    tern_rope_apply(x + hd / 2, hd / 2, inv_freq, cs + q, sn + q);
}

static void qkv_range(void *ctx, size_t b, size_t e, int tid) {
    const qkv_job *j = ctx;
    const vis_cfg *c = &j->v->c;
    const int64_t hd = c->hd, nq = c->heads, nk = c->kv_heads;
    const float eps = (float)c->eps;
    for (size_t t = b; t < e; t++) {
        const float *cs = j->cs + t * (hd / 2), *sn = j->sn + t * (hd / 2);
        for (int64_t h = 0; h < nq; h++) {
            float *x = j->q + ((int64_t)t * nq + h) * hd;
            tern_rmsnorm(x, j->L->q_norm, hd, eps, x);
            rope2d(x, hd, j->v->inv_freq, cs, sn);
        }
        if (j->qb)
            tern_to_bf16(j->q + (int64_t)t * nq * hd, j->qb + (int64_t)t * nq * hd, nq * hd);
        for (int64_t h = 0; h < nk; h++) {
            float *x = j->k + ((int64_t)t * nk + h) * hd;
            tern_rmsnorm(x, j->L->k_norm, hd, eps, x);
            rope2d(x, hd, j->v->inv_freq, cs, sn);
            x = j->vv + ((int64_t)t * nk + h) * hd;
            tern_rmsnorm(x, NULL, hd, eps, x);
        }
    }
}

/* One head's attention for queries [b, e): scores against the keys transposed (scale 1), the path's softmax, times
 * the values; QROWS queries at a time in the thread's slab of scores. Queries, values and outputs are read and
 * written in place, a head's columns of the [N][heads x hd] rows (ldq, ldv, ldo apart). With bf16 operands the
 * queries are bf16 rows, the keys and values packed by pairs and the probabilities rounded to bf16 first. */
typedef struct head_job {
    const float *q, *kt, *v;
    const uint16_t *qb;
    const uint32_t *kp, *vp;
    uint16_t *pb;
    float *s, *out;
    int64_t N, hd, ldq, ldv, ldo;
} head_job;

static void head_range(void *ctx, size_t b, size_t e, int tid) {
    const head_job *j = ctx;
    const int64_t N = j->N, hd = j->hd, N2 = N + (N & 1);
    float *s = j->s + (size_t)tid * QROWS * (size_t)N;
    uint16_t *pb = j->pb ? j->pb + (size_t)tid * QROWS * (size_t)N2 : NULL;
    for (size_t t0 = b; t0 < e; t0 += QROWS) {
        const int64_t nt = (int64_t)(e - t0 < QROWS ? e - t0 : QROWS);
        if (pb)
            tern_bgemm(nt, N, hd, j->qb + t0 * j->ldq, j->ldq, j->kp, N, s, N);
        else
            tern_sgemm(nt, N, hd, j->q + t0 * j->ldq, j->ldq, j->kt, N, s, N);
        for (int64_t r = 0; r < nt; r++)
            tern_softmax_fast(s + r * N, N);
        if (pb) {
            for (int64_t r = 0; r < nt; r++) {
                tern_to_bf16(s + r * N, pb + r * N2, N);
                if (N2 > N)
                    pb[r * N2 + N] = 0; /* against the values' zero pad row */
            }
            tern_bgemm(nt, hd, N2, pb, N2, j->vp, hd, j->out + t0 * j->ldo, j->ldo);
        } else {
            tern_sgemm(nt, hd, N, s, N, j->v, j->ldv, j->out + t0 * j->ldo, j->ldo);
        }
    }
}

/* One key/value head's keys and values packed by pairs for the bf16 products, pairs of patches [b, e): keys by
 * pairs of dimensions, [hd/2][N]; values by pairs of patches, [N2/2][hd] (an odd last patch paired with zeros). */
typedef struct pack_job {
    const float *k, *v; /* the head's first row; rows ld apart */
    int64_t ld, N, hd;
    uint32_t *kp, *vp;
} pack_job;

static void pack_range(void *ctx, size_t b, size_t e, int tid) {
    const pack_job *j = ctx;
    const int64_t N = j->N, hd = j->hd;
    (void)tid;
    for (int64_t t = 2 * (int64_t)b; t < 2 * (int64_t)e; t += 2) {
        for (int64_t u = t; u < t + 2 && u < N; u++)
            for (int64_t i = 0; i < hd; i += 2) {
                const float *kr = j->k + u * j->ld + i;
                j->kp[i / 2 * N + u] = tern_f32_to_bf16(kr[0]) | (uint32_t)tern_f32_to_bf16(kr[1]) << 16;
            }
        for (int64_t i = 0; i < hd; i++) {
            const float v0 = j->v[t * j->ld + i], v1 = t + 1 < N ? j->v[(t + 1) * j->ld + i] : 0;
            j->vp[t / 2 * hd + i] = tern_f32_to_bf16(v0) | (uint32_t)tern_f32_to_bf16(v1) << 16;
        }
    }
}

/* Bidirectional attention over all N patches, head by head (queries split across the threads); the keys are copied
 * transposed (bf16: and packed by pairs, the values too) once per key/value head. */
static void attention(const g4vision *v, tern_pool *pool, int64_t N, work *w) {
    const vis_cfg *c = &v->c;
    const int64_t hd = c->hd, nq = c->heads, nk = c->kv_heads, rep = nq / nk, N2 = N + (N & 1);
    uint32_t *kp = (uint32_t *)w->kt;
    for (int64_t h = 0; h < nq; h++) {
        const int64_t g = h / rep;
        if (h % rep == 0 && v->attn_bf16) {
            pack_job pj = {w->k + g * hd, w->v + g * hd, nk * hd, N, hd, kp, w->vp};
            tern_tower_par(pool, N2 / 2, pack_range, &pj);
        } else if (h % rep == 0) {
            for (int64_t t = 0; t < N; t++)
                for (int64_t i = 0; i < hd; i++)
                    w->kt[i * N + t] = w->k[(t * nk + g) * hd + i];
        }
        head_job hj = {w->q + h * hd, w->kt, w->v + g * hd, v->attn_bf16 ? w->qb + h * hd : NULL, kp, w->vp,
                       v->attn_bf16 ? w->pb : NULL, w->s, w->att + h * hd, N, hd, nq * hd, nk * hd, nq * hd};
        tern_tower_par(pool, N, head_range, &hj);
    }
}

typedef struct gelu_job {
    float *g;
    const float *u;
    int64_t n;
} gelu_job;

static void gelu_range(void *ctx, size_t b, size_t e, int tid) {
    const gelu_job *j = ctx;
    for (size_t r = b; r < e; r++)
        tern_gelu_tanh_mul(j->g + r * j->n, j->u + r * j->n, j->n);
}

static int encoder_layer(const g4vision *v, tern_pool *pool, const vlayer *L, int64_t N, work *w) {
    const vis_cfg *c = &v->c;
    const int64_t H = c->H;
    const float eps = (float)c->eps;
    norm_rows(pool, N, w->h, w->a, L->ln_in, H, eps, NULL);
    if (tern_clin_run(pool, &L->q, w->a, N, w->tmp, w->q) || tern_clin_run(pool, &L->k, w->a, N, w->tmp, w->k) ||
        tern_clin_run(pool, &L->v, w->a, N, w->tmp, w->v))
        return -1;
    qkv_job qj = {v, L, w->q, w->k, w->v, v->attn_bf16 ? w->qb : NULL, w->cs, w->sn};
    tern_tower_par(pool, N, qkv_range, &qj);
    attention(v, pool, N, w);
    if (tern_clin_run(pool, &L->o, w->att, N, w->tmp, w->o))
        return -1;
    norm_rows(pool, N, w->o, w->o, L->ln_post_attn, H, eps, w->h);
    norm_rows(pool, N, w->h, w->a, L->ln_pre_ff, H, eps, NULL);
    if (tern_clin_run(pool, &L->gate, w->a, N, w->tmp, w->x) || tern_clin_run(pool, &L->up, w->a, N, w->tmp, w->up))
        return -1;
    gelu_job gj = {w->x, w->up, c->I};
    tern_tower_par(pool, N, gelu_range, &gj);
    if (tern_clin_run(pool, &L->down, w->x, N, w->tmp, w->o))
        return -1;
    norm_rows(pool, N, w->o, w->o, L->ln_post_ff, H, eps, w->h);
    return 0;
}

/* Patches in raster order, each (ky, kx, channel), pixels to [-1, 1] as 2 (x/255 - 0.5); a row of patches per
 * job index. */
typedef struct patch_job {
    const uint8_t *rgb;
    int w;
    int64_t p, Wp;
    float *x;
} patch_job;

static void patch_range(void *ctx, size_t b, size_t e, int tid) {
    const patch_job *j = ctx;
    const int64_t p = j->p;
    for (size_t py = b; py < e; py++)
        for (int64_t px = 0; px < j->Wp; px++) {
            float *d = j->x + ((int64_t)py * j->Wp + px) * 3 * p * p;
            for (int64_t ky = 0; ky < p; ky++) {
                const uint8_t *s = j->rgb + (((int64_t)py * p + ky) * j->w + px * p) * 3;
                for (int64_t i = 0; i < 3 * p; i++)
                    *d++ = 2.0f * ((float)s[i] * (1.0f / 255.0f) - 0.5f);
            }
        }
}

static void work_free(work *w) {
    float **f[] = {&w->x, &w->h, &w->a, &w->o, &w->q, &w->k, &w->v, &w->kt, &w->s, &w->att,
                   &w->up, &w->tmp, &w->cs, &w->sn};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        free(*f[i]);
    free(w->qb);
    free(w->pb);
    free(w->vp);
}

static TERN_MUST_CHECK tern_err *g4v_run(const void *impl, tern_pool *pool, const uint8_t *rgb, const tern_vision_plan *pl,
                         float *out) {
    const g4vision *v = impl;
    const vis_cfg *c = &v->c;
    const int64_t p = c->p, k = c->k, H = c->H, I = c->I, hd = c->hd;
    const int64_t Wp = pl->w / p, Hp = pl->h / p, N = Wp * Hp, Q = c->heads * hd, KV = c->kv_heads * hd;
    if (Wp < k || Hp < k || pl->w % (k * p) || pl->h % (k * p) || Wp > c->P || Hp > c->P || (size_t)((Wp / k) * (Hp / k)) != pl->tokens)
        return tern_errf(TERN_EINVAL, "vision tower: a %d x %d image does not fit its patch grid", pl->w, pl->h);
    const int64_t pin = 3 * p * p, wide = I > Q ? (I > H ? I : H) : (Q > H ? Q : H);
    const int64_t threads = pool ? tern_pool_size(pool) : 1;
    const size_t f = sizeof(float);
    work w = {
        .x = malloc((size_t)(N * (pin > I ? pin : I)) * f),
        .h = malloc((size_t)(N * H) * f), .a = malloc((size_t)(N * H) * f), .o = malloc((size_t)(N * H) * f),
        .q = malloc((size_t)(N * Q) * f), .k = malloc((size_t)(N * KV) * f), .v = malloc((size_t)(N * KV) * f),
        .kt = malloc((size_t)(N * hd) * f),
        .s = malloc((size_t)(threads * QROWS * N) * f), .att = malloc((size_t)(N * Q) * f),
        .up = malloc((size_t)(N * I) * f), .tmp = malloc((size_t)(N * wide) * f),
        .cs = malloc((size_t)(N * hd / 2) * f), .sn = malloc((size_t)(N * hd / 2) * f),
    };
    const int64_t N2 = N + (N & 1);
    if (v->attn_bf16) {
        w.qb = malloc((size_t)(N * Q) * sizeof *w.qb);
        w.pb = malloc((size_t)(threads * QROWS * N2) * sizeof *w.pb);
        w.vp = malloc((size_t)(N2 / 2 * hd) * sizeof *w.vp);
    }
    if (!w.x || !w.h || !w.a || !w.o || !w.q || !w.k || !w.v || !w.kt || !w.s || !w.att ||
        !w.up || !w.tmp || !w.cs || !w.sn || (v->attn_bf16 && (!w.qb || !w.pb || !w.vp))) {
        work_free(&w);
        return tern_errf(TERN_ENOMEM, "vision tower: out of memory for an image of %lld patches", (long long)N);
    }
    patch_job pj = {rgb, pl->w, p, Wp, w.x};
    tern_tower_par(pool, Hp, patch_range, &pj);
    int bad = tern_matmul(pool, &v->patch, w.x, N, w.h, TERN_MM_PREFILL) != 0;
    for (int64_t py = 0; py < Hp && !bad; py++)
        for (int64_t px = 0; px < Wp; px++) {
            float *hrow = w.h + (py * Wp + px) * H;
            const float *ex = v->pos + px * H, *ey = v->pos + (c->P + py) * H;
            for (int64_t i = 0; i < H; i++)
                hrow[i] += ex[i] + ey[i];
            float *cs = w.cs + (py * Wp + px) * (hd / 2), *sn = w.sn + (py * Wp + px) * (hd / 2);
            tern_rope_angles(hd / 2, v->inv_freq, px, cs, sn);
            tern_rope_angles(hd / 2, v->inv_freq, py, cs + hd / 4, sn + hd / 4);
        }
    for (int l = 0; l < c->layers && !bad; l++)
        bad = encoder_layer(v, pool, &v->layer[l], N, &w) != 0;
    if (!bad) {
        /* Average k x k blocks of the grid, x sqrt(H); then standardize; then embed_vision's scale-free norm. */
        const int64_t Wt = Wp / k, T = (int64_t)pl->tokens;
        const float scale = sqrtf((float)H) / (float)(k * k);
        memset(w.a, 0, (size_t)(T * H) * f);
        for (int64_t py = 0; py < Hp; py++)
            for (int64_t px = 0; px < Wp; px++) {
                float *dst = w.a + ((py / k) * Wt + px / k) * H;
                const float *src = w.h + (py * Wp + px) * H;
                for (int64_t i = 0; i < H; i++)
                    dst[i] += src[i];
            }
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < H; i++) {
                float x = w.a[t * H + i] * scale;
                if (c->standardize)
                    x = (x - v->std_bias[i]) * v->std_scale[i];
                w.a[t * H + i] = x;
            }
        norm_rows(pool, T, w.a, w.a, NULL, H, (float)c->eps, NULL);
        bad = tern_matmul(pool, &v->proj, w.a, T, out, TERN_MM_PREFILL) != 0;
    }
    work_free(&w);
    return bad ? tern_errf(TERN_ENOMEM, "vision tower: out of scratch memory") : NULL;
}

static void g4v_describe(const void *impl, char *buf, size_t len) {
    const g4vision *v = impl;
    const vis_cfg *c = &v->c;
    char fmt[32];
    tern_wformat_describe(&v->layer[0].q.w, fmt, sizeof fmt);
    snprintf(buf, len, "gemma4 vision: %lld layers, hidden %lld, %lld heads x %lld, patch %lld, pooling %lld, "
             "-> %lld, %s linears%s%s (%s layout)",
             (long long)c->layers, (long long)c->H, (long long)c->heads, (long long)c->hd, (long long)c->p,
             (long long)c->k, (long long)c->text_dim, fmt, c->clipped ? ", clipped" : "",
             c->standardize ? ", standardized" : "", v->src.mlx ? "mlx-vlm" : "hf");
}

const tern_vision_arch tern_vision_arch_gemma4 = {
    .model_type = "gemma4_vision",
    .gguf_projector = "gemma4v",
    .load = g4v_load,
    .load_gguf = tern_gemma4_vision_gguf_from,
    .free = g4v_free,
    .dim = g4v_dim,
    .budget_ok = g4v_budget_ok,
    .budget_nearest = g4v_budget_nearest,
    .plan = g4v_plan,
    .work_bytes = g4v_work_bytes,
    .run = g4v_run,
    .describe = g4v_describe,
};

/* ---- synthetic towers (tern synth --vision) -------------------------------------------------------------- */

json_t *tern_gemma4_vision_synth_config(int64_t text_hidden) {
    /* e2b/e4b (text 1536/2560): 768 x 16 layers, clipped; 12B/26B/31B: 1152 x 27 layers of 16 heads x 72,
     * standardized, unclipped (transformers' convert_gemma4_weights.py); below 512 a 2-layer tower for tests. */
    const int size = text_hidden > 2560 ? 2 : text_hidden >= 512 ? 1 : 0;
    static const int H[] = {64, 768, 1152}, I[] = {128, 3072, 4304}, L[] = {2, 16, 27}, nh[] = {2, 12, 16},
                     hd[] = {32, 64, 72}, P[] = {256, 10240, 10240};
    return json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:f,s:{s:s,s:f},s:i,s:i,s:i,s:b,s:b}", "model_type",
                     "gemma4_vision", "hidden_size", H[size], "intermediate_size", I[size], "num_hidden_layers",
                     L[size], "num_attention_heads", nh[size], "num_key_value_heads", nh[size], "head_dim", hd[size],
                     "hidden_activation", "gelu_pytorch_tanh", "rms_norm_eps", 1e-6, "rope_parameters", "rope_type",
                     "default", "rope_theta", 100.0, "pooling_kernel_size", 3, "patch_size", 16,
                     "position_embedding_size", P[size], "use_clipped_linears", size < 2, "standardize", size != 1);
}

tern_err *tern_gemma4_vision_synth_tensors(const json_t *root, int mlx, uint64_t seed, tern_wspec **specs,
                                           size_t *n_specs, tern_raw_tensor **raw, size_t *n_raw, void **arena) {
    vis_cfg c;
    TERN_TRY(parse_cfg(root, &c));
    tern_tower_synth *A = calloc(1, sizeof *A);
    if (!A)
        return tern_errf(TERN_ENOMEM, "out of memory");
    A->seed = seed, A->mlx = mlx;
    const int64_t H = c.H, q = c.heads * c.hd, kv = c.kv_heads * c.hd;
    const int64_t vH[1] = {H}, vhd[1] = {c.hd}, table[3] = {2, c.P, H};
    char r[200], base[160];
    for (int l = 0; l < c.layers; l++) {
        char p[96];
        snprintf(p, sizeof p, "vision_tower.encoder.layers.%d.", l);
        static const char *const norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                            "post_feedforward_layernorm"};
        for (size_t i = 0; i < sizeof norms / sizeof *norms; i++)
            snprintf(r, sizeof r, "%s%s.weight", p, norms[i]), tern_tower_synth_raw(A, r, 1, vH, 1.0f, 0.05f);
        snprintf(r, sizeof r, "%sself_attn.q_norm.weight", p), tern_tower_synth_raw(A, r, 1, vhd, 1.0f, 0.05f);
        snprintf(r, sizeof r, "%sself_attn.k_norm.weight", p), tern_tower_synth_raw(A, r, 1, vhd, 1.0f, 0.05f);
        static const char *const lin[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                          "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                          "mlp.down_proj"};
        const int64_t shapes[][2] = {{q, H}, {kv, H}, {kv, H}, {H, q}, {c.I, H}, {c.I, H}, {H, c.I}};
        for (int i = 0; i < 7; i++) {
            snprintf(base, sizeof base, "%s%s", p, lin[i]);
            if (c.clipped)
                tern_tower_synth_clipped(A, base, shapes[i][0], shapes[i][1], 8.0f);
            else
                snprintf(r, sizeof r, "%s.linear", base), tern_tower_synth_linear(A, r, shapes[i][0], shapes[i][1]);
        }
    }
    tern_tower_synth_linear(A, "vision_tower.patch_embedder.input_proj", H, 3 * c.p * c.p);
    tern_tower_synth_raw(A, "vision_tower.patch_embedder.position_embedding_table", 3, table, 0.0f, 0.5f);
    if (c.standardize) {
        tern_tower_synth_raw(A, "vision_tower.std_bias", 1, vH, 0.0f, 0.3f);
        tern_tower_synth_raw(A, "vision_tower.std_scale", 1, vH, 1.0f, 0.1f);
    }
    tern_tower_synth_linear(A, "embed_vision.embedding_projection", c.text_dim, H);
    TERN_TRY(tern_tower_synth_finish(A, specs, n_specs, raw, n_raw));
    *arena = A;
    return NULL;
}

void tern_gemma4_vision_synth_free(void *arena) { tern_tower_synth_free(arena); }
