/* gemma4_audio.c — the Gemma 4 audio tower and embed_audio (GEMMA4.md §4; Hugging Face Gemma4AudioModel):
 *
 *   mel [F][128] ─▶ two 3x3 stride-2 convolutions (LayerNorm over channels, ReLU) ─▶ [F/4][32 x C1]
 *       ─▶ input_proj_linear ─▶ conformer blocks (FF/2, chunked local attention with relative positions,
 *          light causal convolution, FF/2, norm) ─▶ output_proj (bias) ─▶ scale-free RMSNorm ─▶ embedding_projection
 *
 * The arithmetic follows Hugging Face exactly (the golden in tests/data/audio is its semantics). Every matrix is a
 * tern_weight run by the project's kernels: the linears as stored (float or MLX affine), the two convolutions as
 * products over gathered 3x3 patches with their weights laid out [out][kh][kw][in] at load. Only a clip's valid
 * frames are fed: the reference zeroes the rest before each convolution and masks them as keys, which is the same.
 *
 * Layouts: Hugging Face names tensors "model.audio_tower.*" / "model.embed_audio.*" with convolutions
 * [out, in, kh, kw] and [D, 1, k]; mlx-vlm drops "model." and stores them [out, kh, kw, in] and [D, k, 1]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/json_util.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/audio_encoder.h"
#include "models/gemma4_audio.h"
#include "models/gemma4_weights.h"
#include "models/tower.h"
#include "tensor/ops.h"

#define MEL 128
#define MAX_LAYERS 64

typedef struct audio_cfg {
    int64_t D, layers, heads, C0, C1, kernel, chunk, left, right, out_dim, text_dim;
    double residual, cap, invalid, eps, clip;
    int clipped;
} audio_cfg;

typedef struct alayer {
    float *ff_pre[2], *ff_post[2];
    tern_clin ff1[2], ff2[2];
    float *norm_pre_attn, *norm_post_attn, *norm_out;
    tern_clin q, k, v, post;
    tern_weight relk;
    float *qscale;   /* [head_dim] q_scale * softplus(per_dim_scale) */
    float *lc_pre, *lc_norm;
    tern_clin lstart, lend;
    float *dw;       /* [D][kernel] depthwise taps, oldest first */
} alayer;

typedef struct g4audio {
    audio_cfg c;
    tern_tower_src src;    /* the checkpoint, its names' root (mlx-vlm: also the convolutions' layout) and owned arrays */
    tern_quant_config *qc;
    int scales_softplused; /* per_dim_scale holds softplus(p) (a GGUF mmproj) rather than p */
    float *conv0, *conv1;  /* [C0][3][3][1], [C1][3][3][C0] */
    tern_weight conv0w, conv1w;
    float *norm0, *norm1;
    tern_weight in_proj, out_proj, embed_proj;
    float *out_bias;
    alayer layer[MAX_LAYERS];
    float *pos;            /* [npos][D] the sinusoid inputs of relative positions 0..npos-1 */
    int64_t npos;
    int64_t F1, F2;        /* frequency bins after each convolution */
} g4audio;

/* ---- loading -------------------------------------------------------------------------------------------- */

/* A small float array the tower owns (freed with it). */
static float *own(g4audio *a, size_t n) {
    float *p = NULL;
    tern_err *err = tern_tower_floats(&a->src, NULL, n, &p);
    tern_err_free(err);
    return p;
}

static TERN_MUST_CHECK tern_err *vec(g4audio *a, const char *rel, size_t n, float **out) {
    return tern_tower_floats(&a->src, rel, n, out);
}

static TERN_MUST_CHECK tern_err *matrix(g4audio *a, const char *rel, int64_t out, int64_t in, tern_weight *w) {
    return tern_tower_matrix(&a->src, rel, out, in, w);
}

static TERN_MUST_CHECK tern_err *clipped(g4audio *a, const char *rel, int64_t out, int64_t in, tern_clin *l) {
    return tern_tower_clipped(&a->src, rel, out, in, a->c.clipped, l);
}

/* A 3x3 convolution's weight as [out][kh][kw][in] float32, from either layout. */
static TERN_MUST_CHECK tern_err *conv3x3(g4audio *a, const char *rel, int64_t co, int64_t ci, float **out, tern_weight *w) {
    size_t n = (size_t)(co * ci * 9);
    float *raw = own(a, n);
    if (!raw || !(*out = own(a, n)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    tern_err *err = tern_tower_read(&a->src, rel, n, raw);
    if (err)
        return err;
    for (int64_t o = 0; o < co; o++)
        for (int64_t i = 0; i < ci; i++)
            for (int k = 0; k < 9; k++)
                (*out)[(o * 9 + k) * ci + i] = a->src.mlx ? raw[(o * 9 + k) * ci + i] : raw[(o * ci + i) * 9 + k];
    *w = (tern_weight){.fmt = TERN_WF_F32, .ndim = 2, .shape = {co, 9 * ci}, .data = *out, .name = "conv"};
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_cfg(const json_t *root, audio_cfg *c) {
    const json_t *ac = json_object_get(root, "audio_config");
    const json_t *tc = json_object_get(root, "text_config");
    tern_err *err = NULL;
    int64_t v;
#define GI(obj, key, dflt, lo, hi, dst) \
    if (!err && !(err = tern_json_get_int(obj, key, dflt, lo, hi, &v))) dst = v
    GI(ac, "hidden_size", 1024, 8, 65536, c->D);
    GI(ac, "num_hidden_layers", 12, 1, MAX_LAYERS, c->layers);
    GI(ac, "num_attention_heads", 8, 1, 1024, c->heads);
    GI(ac, "conv_kernel_size", 5, 1, 64, c->kernel);
    GI(ac, "attention_chunk_size", 12, 1, 4096, c->chunk);
    GI(ac, "attention_context_left", 13, 1, 4096, c->left);
    GI(ac, "attention_context_right", 0, 0, 4096, c->right);
    GI(ac, "output_proj_dims", 1536, 1, 65536, c->out_dim);
    GI(json_is_object(tc) ? tc : root, "hidden_size", 0, 1, 65536, c->text_dim);
#undef GI
    if (!err)
        err = tern_json_get_num(ac, "residual_weight", 0.5, &c->residual);
    if (!err)
        err = tern_json_get_num(ac, "attention_logit_cap", 50.0, &c->cap);
    if (!err)
        err = tern_json_get_num(ac, "attention_invalid_logits_value", -1e9, &c->invalid);
    if (!err)
        err = tern_json_get_num(ac, "rms_norm_eps", 1e-6, &c->eps);
    if (!err)
        err = tern_json_get_num(ac, "gradient_clipping", 1e10, &c->clip);
    if (!err)
        err = tern_json_get_bool(ac, "use_clipped_linears", 0, &c->clipped);
    if (err)
        return tern_err_wrap(err, "config.json audio_config");
    const json_t *ch = json_object_get(ac, "subsampling_conv_channels");
    if (!json_is_array(ch) || json_array_size(ch) != 2 || !json_is_integer(json_array_get(ch, 0)) ||
        !json_is_integer(json_array_get(ch, 1)))
        return tern_errf(TERN_EFORMAT, "config.json audio_config.subsampling_conv_channels: expected two integers");
    c->C0 = json_integer_value(json_array_get(ch, 0));
    c->C1 = json_integer_value(json_array_get(ch, 1));
    if (c->C0 < 1 || c->C0 > 4096 || c->C1 < 1 || c->C1 > 4096)
        return tern_errf(TERN_EFORMAT, "config.json audio_config.subsampling_conv_channels out of range");
    if (c->D % c->heads)
        return tern_errf(TERN_EFORMAT, "config.json audio_config: hidden_size %lld is not a multiple of %lld heads",
                         (long long)c->D, (long long)c->heads);
    const char *act = json_string_value(json_object_get(ac, "hidden_act"));
    if (act && strcmp(act, "silu") && strcmp(act, "swish"))
        return tern_errf(TERN_EUNSUPPORTED, "config.json audio_config.hidden_act '%s': the tower runs silu", act);
    if (c->cap <= 0)
        return tern_errf(TERN_EFORMAT, "config.json audio_config.attention_logit_cap must be positive");
    if (c->left < 2 || c->left - 1 + c->right > 4096)
        return tern_errf(TERN_EFORMAT, "config.json audio_config: attention_context_left must be >= 2 (a frame sees "
                                       "itself) and the context at most 4096");
    return NULL;
}

static void g4a_free(void *impl) {
    g4audio *a = impl;
    if (!a)
        return;
    tern_tower_src_free(&a->src);
    tern_checkpoint_close(a->src.ck);
    tern_quant_config_free(a->qc);
    free(a);
}

static TERN_MUST_CHECK tern_err *load_layer(g4audio *a, int l) {
    const audio_cfg *c = &a->c;
    alayer *L = &a->layer[l];
    int64_t D = c->D, hd = D / c->heads;
    char p[96], r[200];
    snprintf(p, sizeof p, "audio_tower.layers.%d.", l);
    tern_err *err = NULL;
#define V(field, suffix, n) if (!err) { snprintf(r, sizeof r, "%s%s", p, suffix); err = vec(a, r, n, &(field)); }
#define C(field, suffix, o, i) if (!err) { snprintf(r, sizeof r, "%s%s", p, suffix); err = clipped(a, r, o, i, &(field)); }
    for (int f = 0; f < 2; f++) {
        char ff[64];
        snprintf(ff, sizeof ff, "feed_forward%d.", f + 1);
        char s[96];
        snprintf(s, sizeof s, "%spre_layer_norm.weight", ff);
        V(L->ff_pre[f], s, D);
        snprintf(s, sizeof s, "%spost_layer_norm.weight", ff);
        V(L->ff_post[f], s, D);
        snprintf(s, sizeof s, "%sffw_layer_1", ff);
        C(L->ff1[f], s, 4 * D, D);
        snprintf(s, sizeof s, "%sffw_layer_2", ff);
        C(L->ff2[f], s, D, 4 * D);
    }
    V(L->norm_pre_attn, "norm_pre_attn.weight", D);
    V(L->norm_post_attn, "norm_post_attn.weight", D);
    V(L->norm_out, "norm_out.weight", D);
    C(L->q, "self_attn.q_proj", D, D);
    C(L->k, "self_attn.k_proj", D, D);
    C(L->v, "self_attn.v_proj", D, D);
    C(L->post, "self_attn.post", D, D);
    V(L->qscale, "self_attn.per_dim_scale", hd);
    V(L->lc_pre, "lconv1d.pre_layer_norm.weight", D);
    V(L->lc_norm, "lconv1d.conv_norm.weight", D);
    C(L->lstart, "lconv1d.linear_start", 2 * D, D);
    C(L->lend, "lconv1d.linear_end", D, D);
    V(L->dw, "lconv1d.depthwise_conv1d.weight", D * c->kernel);
#undef V
#undef C
    if (!err) {
        snprintf(r, sizeof r, "%sself_attn.relative_k_proj", p);
        err = matrix(a, r, D, D, &L->relk);
    }
    if (err)
        return err;
    /* q is scaled by head_dim^-1/2 / ln 2 times softplus(per_dim_scale), per dimension (llama.cpp's mmproj files
     * store the softplus already). */
    double q_scale = pow((double)hd, -0.5) / log(2.0);
    for (int64_t i = 0; i < hd; i++) {
        double x = L->qscale[i];
        double sp = a->scales_softplused ? x : x > 30 ? x : log1p(exp(x));
        L->qscale[i] = (float)(q_scale * (float)sp);
    }
    /* Both layouts store the depthwise taps D x k (Hugging Face [D, 1, k], mlx-vlm [D, k, 1]): the same order. */
    return NULL;
}

tern_err *tern_gemma4_audio_load_from(tern_checkpoint *ck, const json_t *root, int scales_softplused,
                                      const char *what, void **impl) {
    *impl = NULL;
    g4audio *a = calloc(1, sizeof *a);
    if (!a) {
        tern_checkpoint_close(ck);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    a->src = (tern_tower_src){.ck = ck, .what = "audio tower"};
    a->scales_softplused = scales_softplused;
    tern_err *err = parse_cfg(root, &a->c);
    if (!err)
        err = tern_quant_config_parse(root, &a->qc);
    if (err) {
        g4a_free(a);
        return tern_err_wrap(err, "%s", what);
    }
    const audio_cfg *c = &a->c;
    a->src.qc = a->qc;
    a->src.mlx = !tern_checkpoint_find(ck, "model.audio_tower.subsample_conv_projection.layer0.conv.weight") &&
                 tern_checkpoint_find(ck, "audio_tower.subsample_conv_projection.layer0.conv.weight");
    a->F1 = (MEL + 2 - 3) / 2 + 1;
    a->F2 = (a->F1 + 2 - 3) / 2 + 1;
    err = conv3x3(a, "audio_tower.subsample_conv_projection.layer0.conv.weight", c->C0, 1, &a->conv0, &a->conv0w);
    if (!err)
        err = conv3x3(a, "audio_tower.subsample_conv_projection.layer1.conv.weight", c->C1, c->C0, &a->conv1, &a->conv1w);
    if (!err)
        err = vec(a, "audio_tower.subsample_conv_projection.layer0.norm.weight", c->C0, &a->norm0);
    if (!err)
        err = vec(a, "audio_tower.subsample_conv_projection.layer1.norm.weight", c->C1, &a->norm1);
    if (!err)
        err = matrix(a, "audio_tower.subsample_conv_projection.input_proj_linear", c->D, a->F2 * c->C1, &a->in_proj);
    for (int l = 0; l < c->layers && !err; l++)
        err = load_layer(a, l);
    if (!err)
        err = matrix(a, "audio_tower.output_proj", c->out_dim, c->D, &a->out_proj);
    if (!err)
        err = vec(a, "audio_tower.output_proj.bias", c->out_dim, &a->out_bias);
    if (!err)
        err = matrix(a, "embed_audio.embedding_projection", c->text_dim, c->out_dim, &a->embed_proj);
    if (!err) {
        /* Relative positions 0 .. (chunk + left - 1 + right) / 2, each [sin(p tau_i)..., cos(p tau_i)...] with
         * tau_i = exp(-i ln(1e4) / (D/2 - 1)), float32 as the reference computes them. */
        a->npos = (c->chunk + c->left - 1 + c->right) / 2 + 1;
        int64_t half = c->D / 2;
        if (!(a->pos = own(a, (size_t)(a->npos * c->D))))
            err = tern_errf(TERN_ENOMEM, "out of memory");
        double inc = log(10000.0) / (double)(half - 1 > 1 ? half - 1 : 1);
        for (int64_t p = 0; p < a->npos && !err; p++)
            for (int64_t i = 0; i < half; i++) {
                float tau = expf((float)i * (float)-inc);
                float t = (float)p * tau;
                a->pos[p * c->D + i] = sinf(t);
                a->pos[p * c->D + half + i] = cosf(t);
            }
    }
    if (err) {
        g4a_free(a);
        return tern_err_wrap(err, "%s", what);
    }
    *impl = a;
    return NULL;
}

static TERN_MUST_CHECK tern_err *g4a_load(const char *dir, const void *config_root, void **impl) {
    tern_checkpoint *ck;
    TERN_TRY(tern_checkpoint_open(dir, &ck));
    return tern_gemma4_audio_load_from(ck, config_root, 0, dir, impl);
}

/* ---- running ------------------------------------------------------------------------------------------- */

static size_t half_up(size_t n) { return (n + 1) / 2; }

static size_t g4a_tokens(const void *impl, size_t frames) { return half_up(half_up(frames)); }

static int64_t g4a_dim(const void *impl) { return ((const g4audio *)impl)->c.text_dim; }

/* Rows of the second convolution gathered per product (bounds the patch buffer). */
#define CONV_ROWS 32

/* The scratch one run allocates: the convolutions' patches and outputs, then the conformer's buffers. */
typedef struct work {
    float *p0, *x0, *p1, *x1;  /* first patches [T1*F1][9], its output [T1][F1][C0]; second patches, output */
    float *h;                  /* [T][D] the hidden state */
    float *a, *b, *c, *d;      /* [T][D] each: normed input, products, q/k/v */
    float *wide, *tmp;         /* [T][max(4D, F2*C1)]: FF middle and GLU input; clamped copies of product inputs */
    float *rel;                /* [npos][D] relative-position keys */
    float *o;                  /* [T][out_dim] */
} work;

static uint64_t g4a_work_bytes(const void *impl, size_t frames) {
    const g4audio *a = impl;
    const audio_cfg *c = &a->c;
    uint64_t T1 = half_up(frames), T = half_up(T1), D = (uint64_t)c->D;
    uint64_t wide = 4 * D > (uint64_t)(a->F2 * c->C1) ? 4 * D : (uint64_t)(a->F2 * c->C1);
    uint64_t f = T1 * a->F1 * (9 + c->C0) + (uint64_t)CONV_ROWS * a->F2 * 9 * c->C0 + T * a->F2 * c->C1;
    f += T * (5 * D + 2 * wide + c->out_dim) + (uint64_t)a->npos * D;
    return f * sizeof(float);
}

/* ---- row passes: every element-wise stage runs over the pool, rows split between the threads ------------- */

/* silu in place over n values: x / (1 + e^-x) with the vectorised exp (its argument capped where e^x is defined;
 * silu is then 0 to float precision). `t` is n floats of scratch. */
static void silu_row(float *x, float *t, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        t[i] = -x[i] < 80.0f ? -x[i] : 80.0f;
    tern_exp(t, n);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + t[i]);
}

/* One fused pass per row: dst = clamp(src, lo, hi), then optionally RMS-normalised (weight w, or scale-free with
 * w NULL and norm set), silu, and added into acc scaled (acc[r] += scale * dst[r]). */
typedef struct rows_job {
    const float *src;
    float *dst, *acc;
    int64_t n;
    float lo, hi, eps, scale;
    const float *w;
    int norm, act;
} rows_job;

static void rows_range(void *ctx, size_t b, size_t e, int tid) {
    const rows_job *j = ctx;
    float t[4096];
    for (size_t r = b; r < e; r++) {
        const float *s = j->src + r * j->n;
        float *d = j->dst + r * j->n;
        for (int64_t i = 0; i < j->n; i++) {
            float v = s[i];
            v = v < j->lo ? j->lo : v;
            d[i] = v > j->hi ? j->hi : v;
        }
        if (j->norm)
            tern_rmsnorm(d, j->w, j->n, j->eps, d);
        for (int64_t k = 0; j->act && k < j->n; k += 4096)
            silu_row(d + k, t, j->n - k < 4096 ? j->n - k : 4096);
        if (j->acc) {
            float *a = j->acc + r * j->n;
            for (int64_t i = 0; i < j->n; i++)
                a[i] += j->scale * d[i];
        }
    }
}

static void rows(tern_pool *pool, rows_job j, int64_t T) { tern_tower_par(pool, T, rows_range, &j); }

/* y = the clipped linear of x, then silu when act; x is left as it was. */
static int clin_run(tern_pool *pool, const tern_clin *l, const float *x, int64_t T, float *tmp, float *y, int act) {
    if (tern_clin_run(pool, l, x, T, tmp, y))
        return -1;
    if (act)
        rows(pool, (rows_job){.src = y, .dst = y, .n = l->w.shape[0], .lo = -INFINITY, .hi = INFINITY, .act = 1}, T);
    return 0;
}

/* LayerNorm over the channels of each position (weight only), then ReLU. */
typedef struct ln_job {
    float *x;
    int64_t C;
    const float *w;
    float eps;
} ln_job;

static void ln_range(void *ctx, size_t b, size_t e, int tid) {
    const ln_job *j = ctx;
    for (size_t r = b; r < e; r++) {
        float *v = j->x + r * j->C;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < j->C; i++)
            mean += v[i];
        mean /= (double)j->C;
        for (int64_t i = 0; i < j->C; i++)
            var += (v[i] - mean) * (v[i] - mean);
        var /= (double)j->C;
        float inv = (float)(1.0 / sqrt(var + j->eps)), m = (float)mean;
        for (int64_t i = 0; i < j->C; i++) {
            float y = (v[i] - m) * inv * j->w[i];
            v[i] = y > 0 ? y : 0;
        }
    }
}

/* Gathers the 3x3 patches (stride 2, zero padding 1) of output rows [t0, t0 + n) of x [T][F][C] into
 * p [n][Fo][3][3][C]. */
typedef struct patch_job {
    const float *x;
    int64_t T, F, C, t0, Fo;
    float *p;
} patch_job;

static void patch_range(void *ctx, size_t b, size_t e, int tid) {
    const patch_job *j = ctx;
    for (size_t t = b; t < e; t++)
        for (int64_t f = 0; f < j->Fo; f++)
            for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 3; kw++) {
                    float *dst = j->p + ((((int64_t)t * j->Fo + f) * 3 + kh) * 3 + kw) * j->C;
                    int64_t ti = 2 * (j->t0 + (int64_t)t) - 1 + kh, fi = 2 * f - 1 + kw;
                    if (ti < 0 || ti >= j->T || fi < 0 || fi >= j->F)
                        memset(dst, 0, (size_t)j->C * sizeof *dst);
                    else
                        memcpy(dst, j->x + (ti * j->F + fi) * j->C, (size_t)j->C * sizeof *dst);
                }
}

/* A 3x3 stride-2 convolution's output rows [t0, t0 + n) (then LayerNorm + ReLU) as one product over patches. */
static int conv_rows(tern_pool *pool, const tern_weight *w, const float *norm, float eps, const float *x, int64_t T,
                     int64_t F, int64_t C, int64_t t0, int64_t n, int64_t Fo, float *p, float *y) {
    patch_job pj = {x, T, F, C, t0, Fo, p};
    tern_tower_par(pool, n, patch_range, &pj);
    if (tern_matmul(pool, w, p, n * Fo, y, TERN_MM_PREFILL))
        return -1;
    ln_job lj = {y, w->shape[0], norm, eps};
    tern_tower_par(pool, n * Fo, ln_range, &lj);
    return 0;
}

static int feed_forward(const g4audio *a, tern_pool *pool, const alayer *L, int f, int64_t T, work *w) {
    const audio_cfg *c = &a->c;
    const float clip = (float)c->clip, eps = (float)c->eps;
    rows(pool, (rows_job){.src = w->h, .dst = w->a, .n = c->D, .lo = -clip, .hi = clip, .norm = 1, .w = L->ff_pre[f],
                          .eps = eps}, T);
    if (clin_run(pool, &L->ff1[f], w->a, T, w->tmp, w->wide, 1) ||
        clin_run(pool, &L->ff2[f], w->wide, T, w->tmp, w->b, 0))
        return -1;
    rows(pool, (rows_job){.src = w->b, .dst = w->b, .n = c->D, .lo = -clip, .hi = clip, .norm = 1,
                          .w = L->ff_post[f], .eps = eps, .acc = w->h, .scale = (float)c->residual}, T);
    return 0;
}

/* Chunked local attention of q/k/v [T][D] into out [T][D] (before `post`): query t sees keys t - d for the d the
 * reference's mask allows (0 <= d < left - 1, and d > -right), each logit q.k + q.R(d) soft-capped. */
typedef struct attn_job {
    const g4audio *a;
    const float *q, *k, *v, *rel;
    float *out;
    int64_t T;
} attn_job;

static void attn_range(void *ctx, size_t b, size_t e, int tid) {
    const attn_job *j = ctx;
    const audio_cfg *c = &j->a->c;
    const int64_t D = c->D, H = c->heads, hd = D / H, T = j->T;
    const int64_t max_past = c->left - 1, P = j->a->npos - 1;
    const int64_t dlo = c->right > 0 ? -(c->right - 1) : 0, dhi = c->left - 2, span = dhi - dlo + 1;
    const float cap = (float)c->cap;
    float logit[8192];
    for (size_t tt = b; tt < e; tt++) {
        const int64_t t = (int64_t)tt;
        for (int64_t h = 0; h < H; h++) {
            const float *qv = j->q + t * D + h * hd;
            float mx = -INFINITY;
            for (int64_t d = dlo; d <= dhi; d++) {
                int64_t kj = t - d;
                float *lg = &logit[d - dlo];
                if (kj < 0 || kj >= T) {
                    *lg = -INFINITY;
                    continue;
                }
                const float *kv = j->k + kj * D + h * hd;
                int64_t r = max_past - d; /* the reference's shifted column: position P - r, zero past the table */
                const float *rv = r >= 0 && r <= P ? j->rel + (P - r) * D + h * hd : NULL;
                float s = 0;
                if (rv)
                    for (int64_t i = 0; i < hd; i++)
                        s += qv[i] * (kv[i] + rv[i]);
                else
                    for (int64_t i = 0; i < hd; i++)
                        s += qv[i] * kv[i];
                s = cap * tanhf(s / cap);
                *lg = s;
                mx = s > mx ? s : mx;
            }
            float sum = 0;
            for (int64_t k = 0; k < span; k++) {
                logit[k] = isinf(logit[k]) ? 0 : expf(logit[k] - mx);
                sum += logit[k];
            }
            float *o = j->out + t * D + h * hd;
            memset(o, 0, (size_t)hd * sizeof *o);
            for (int64_t d = dlo; d <= dhi && sum > 0; d++) {
                float pr = logit[d - dlo] / sum;
                if (pr == 0 || t - d < 0 || t - d >= T)
                    continue;
                const float *vv = j->v + (t - d) * D + h * hd;
                for (int64_t i = 0; i < hd; i++)
                    o[i] += pr * vv[i];
            }
        }
    }
}

typedef struct scale_job {
    float *q, *k;
    const float *qscale;
    int64_t D, hd;
    float k_scale;
} scale_job;

static void scale_range(void *ctx, size_t b, size_t e, int tid) {
    const scale_job *j = ctx;
    for (size_t t = b; t < e; t++)
        for (int64_t i = 0; i < j->D; i++) {
            j->q[t * j->D + i] *= j->qscale[i % j->hd];
            j->k[t * j->D + i] *= j->k_scale;
        }
}

static int attention(const g4audio *a, tern_pool *pool, const alayer *L, const float *x, int64_t T, work *w,
                     float *out) {
    const audio_cfg *c = &a->c;
    float *q = w->b, *k = w->c, *v = w->d;
    if (clin_run(pool, &L->q, x, T, w->tmp, q, 0) || clin_run(pool, &L->k, x, T, w->tmp, k, 0) ||
        clin_run(pool, &L->v, x, T, w->tmp, v, 0))
        return -1;
    scale_job sj = {q, k, L->qscale, c->D, c->D / c->heads, (float)(log(1.0 + exp(1.0)) / log(2.0))};
    tern_tower_par(pool, T, scale_range, &sj);
    /* R[p] = relative_k_proj(sinusoid of position p), for the positions the shifted term can reach. */
    if (tern_matmul(pool, &L->relk, a->pos, a->npos, w->rel, TERN_MM_PREFILL))
        return -1;
    attn_job aj = {a, q, k, v, w->rel, out, T};
    tern_tower_par(pool, T, attn_range, &aj);
    return 0;
}

/* The light convolution's middle: GLU (first half times sigmoid of the second) of u [T][2D] into g [T][D], then
 * the causal depthwise convolution (left padding k - 1) of g into y. */
typedef struct lconv_job {
    const float *u, *dw;
    float *g, *y;
    int64_t D, K;
} lconv_job;

static void glu_range(void *ctx, size_t b, size_t e, int tid) {
    const lconv_job *j = ctx;
    float t[4096];
    for (size_t r = b; r < e; r++) {
        const float *u = j->u + r * 2 * j->D;
        float *g = j->g + r * j->D;
        for (int64_t k = 0; k < j->D; k += 4096) {
            int64_t n = j->D - k < 4096 ? j->D - k : 4096;
            for (int64_t i = 0; i < n; i++)
                t[i] = -u[j->D + k + i] < 80.0f ? -u[j->D + k + i] : 80.0f;
            tern_exp(t, n);
            for (int64_t i = 0; i < n; i++)
                g[k + i] = u[k + i] / (1.0f + t[i]);
        }
    }
}

static void dwconv_range(void *ctx, size_t b, size_t e, int tid) {
    const lconv_job *j = ctx;
    for (size_t r = b; r < e; r++) {
        float *y = j->y + r * j->D;
        memset(y, 0, (size_t)j->D * sizeof *y);
        for (int64_t k = 0; k < j->K; k++) {
            int64_t src = (int64_t)r - (j->K - 1) + k;
            if (src < 0)
                continue;
            const float *g = j->g + src * j->D;
            for (int64_t i = 0; i < j->D; i++)
                y[i] += j->dw[i * j->K + k] * g[i];
        }
    }
}

static int light_conv(const g4audio *a, tern_pool *pool, const alayer *L, int64_t T, work *w) {
    const audio_cfg *c = &a->c;
    const float clip = (float)c->clip, eps = (float)c->eps;
    rows(pool, (rows_job){.src = w->h, .dst = w->a, .n = c->D, .lo = -INFINITY, .hi = INFINITY, .norm = 1,
                          .w = L->lc_pre, .eps = eps}, T);
    if (clin_run(pool, &L->lstart, w->a, T, w->tmp, w->wide, 0))
        return -1;
    lconv_job lj = {w->wide, L->dw, w->b, w->c, c->D, c->kernel};
    tern_tower_par(pool, T, glu_range, &lj);
    tern_tower_par(pool, T, dwconv_range, &lj);
    rows(pool, (rows_job){.src = w->c, .dst = w->c, .n = c->D, .lo = -clip, .hi = clip, .norm = 1, .w = L->lc_norm,
                          .eps = eps, .act = 1}, T);
    if (clin_run(pool, &L->lend, w->c, T, w->tmp, w->b, 0))
        return -1;
    rows(pool, (rows_job){.src = w->b, .dst = w->b, .n = c->D, .lo = -INFINITY, .hi = INFINITY, .acc = w->h,
                          .scale = 1.0f}, T);
    return 0;
}

static int conformer(const g4audio *a, tern_pool *pool, const alayer *L, int64_t T, work *w) {
    const audio_cfg *c = &a->c;
    const float clip = (float)c->clip, eps = (float)c->eps;
    if (feed_forward(a, pool, L, 0, T, w))
        return -1;
    rows(pool, (rows_job){.src = w->h, .dst = w->a, .n = c->D, .lo = -clip, .hi = clip, .norm = 1,
                          .w = L->norm_pre_attn, .eps = eps}, T);
    if (attention(a, pool, L, w->a, T, w, w->a) || clin_run(pool, &L->post, w->a, T, w->tmp, w->b, 0))
        return -1;
    rows(pool, (rows_job){.src = w->b, .dst = w->b, .n = c->D, .lo = -clip, .hi = clip, .norm = 1,
                          .w = L->norm_post_attn, .eps = eps, .acc = w->h, .scale = 1.0f}, T);
    if (light_conv(a, pool, L, T, w) || feed_forward(a, pool, L, 1, T, w))
        return -1;
    rows(pool, (rows_job){.src = w->h, .dst = w->h, .n = c->D, .lo = -clip, .hi = clip, .norm = 1, .w = L->norm_out,
                          .eps = eps}, T);
    return 0;
}

static void work_free(work *w) {
    float *all[] = {w->p0, w->x0, w->p1, w->x1, w->h, w->a, w->b, w->c, w->d, w->wide, w->tmp, w->rel, w->o};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

static TERN_MUST_CHECK tern_err *g4a_run(const void *impl, tern_pool *pool, const float *mel, size_t frames, float *out) {
    const g4audio *a = impl;
    const audio_cfg *c = &a->c;
    const int64_t T1 = (int64_t)half_up(frames), T = (int64_t)half_up((size_t)T1), D = c->D;
    const int64_t F1 = a->F1, F2 = a->F2, rows_per = T < CONV_ROWS ? T : CONV_ROWS;
    const int64_t wide = 4 * D > F2 * c->C1 ? 4 * D : F2 * c->C1;
    const size_t n = (size_t)(T * D);
    const float eps = (float)c->eps;
    work w = {
        .p0 = malloc((size_t)(T1 * F1 * 9) * sizeof(float)),
        .x0 = malloc((size_t)(T1 * F1 * c->C0) * sizeof(float)),
        .p1 = malloc((size_t)(rows_per * F2 * 9 * c->C0) * sizeof(float)),
        .x1 = malloc((size_t)(T * F2 * c->C1) * sizeof(float)),
        .h = malloc(n * sizeof(float)),
        .a = malloc(n * sizeof(float)),
        .b = malloc(n * sizeof(float)),
        .c = malloc(n * sizeof(float)),
        .d = malloc(n * sizeof(float)),
        .wide = malloc((size_t)(T * wide) * sizeof(float)),
        .tmp = malloc((size_t)(T * wide) * sizeof(float)),
        .rel = malloc((size_t)(a->npos * D) * sizeof(float)),
        .o = malloc((size_t)(T * c->out_dim) * sizeof(float)),
    };
    if (!w.p0 || !w.x0 || !w.p1 || !w.x1 || !w.h || !w.a || !w.b || !w.c || !w.d || !w.wide || !w.tmp || !w.rel ||
        !w.o) {
        work_free(&w);
        return tern_errf(TERN_ENOMEM, "audio tower: out of memory for a clip of %zu frames", frames);
    }
    int bad = 0;
    /* Subsampling: the mel image is one channel [frames][128][1]; x0 and x1 are [T][F][C] (channels last). */
    bad |= conv_rows(pool, &a->conv0w, a->norm0, eps, mel, (int64_t)frames, MEL, 1, 0, T1, F1, w.p0, w.x0);
    for (int64_t t0 = 0; t0 < T && !bad; t0 += rows_per) {
        int64_t nr = T - t0 < rows_per ? T - t0 : rows_per;
        bad |= conv_rows(pool, &a->conv1w, a->norm1, eps, w.x0, T1, F1, c->C0, t0, nr, F2, w.p1,
                         w.x1 + t0 * F2 * c->C1);
    }
    /* Each frame of x1 flattened frequency-major, as the reference's permute + reshape. */
    bad |= !bad && tern_matmul(pool, &a->in_proj, w.x1, T, w.h, TERN_MM_PREFILL);
    for (int l = 0; l < c->layers && !bad; l++)
        bad |= conformer(a, pool, &a->layer[l], T, &w);
    bad |= !bad && tern_matmul(pool, &a->out_proj, w.h, T, w.o, TERN_MM_PREFILL);
    if (!bad) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < c->out_dim; i++)
                w.o[t * c->out_dim + i] += a->out_bias[i];
        /* embed_audio: a scale-free RMSNorm, then the projection into the text model's space. */
        rows(pool, (rows_job){.src = w.o, .dst = w.o, .n = c->out_dim, .lo = -INFINITY, .hi = INFINITY, .norm = 1,
                              .eps = eps}, T);
        bad |= tern_matmul(pool, &a->embed_proj, w.o, T, out, TERN_MM_PREFILL);
    }
    work_free(&w);
    return bad ? tern_errf(TERN_ENOMEM, "audio tower: out of scratch memory") : NULL;
}

static void g4a_describe(const void *impl, char *buf, size_t len) {
    const g4audio *a = impl;
    const audio_cfg *c = &a->c;
    char fmt[32];
    tern_wformat_describe(&a->layer[0].ff1[0].w, fmt, sizeof fmt);
    snprintf(buf, len, "gemma4 conformer: %lld blocks, hidden %lld, %lld heads, chunk %lld (left %lld, right %lld), "
             "output %lld -> %lld, %s linears%s (%s layout)",
             (long long)c->layers, (long long)c->D, (long long)c->heads, (long long)c->chunk, (long long)c->left,
             (long long)c->right, (long long)c->out_dim, (long long)c->text_dim, fmt,
             c->clipped ? ", clipped" : "", a->src.mlx ? "mlx-vlm" : "hf");
}

const tern_audio_arch tern_audio_arch_gemma4 = {
    .model_type = "gemma4_audio",
    .gguf_projector = "gemma4a",
    .load = g4a_load,
    .load_gguf = tern_gemma4_audio_gguf_from,
    .free = g4a_free,
    .dim = g4a_dim,
    .tokens = g4a_tokens,
    .work_bytes = g4a_work_bytes,
    .run = g4a_run,
    .describe = g4a_describe,
};

/* ---- synthetic towers (tern synth) ------------------------------------------------------------------- */

json_t *tern_gemma4_audio_synth_config(int64_t text_hidden) {
    const int big = text_hidden >= 512;
    return json_pack("{s:s,s:i,s:i,s:i,s:s,s:[i,i],s:i,s:f,s:i,s:i,s:i,s:f,s:f,s:b,s:f,s:f,s:i,s:f}", "model_type",
                     "gemma4_audio", "hidden_size", big ? 1024 : 128, "num_hidden_layers", big ? 12 : 2,
                     "num_attention_heads", big ? 8 : 4, "hidden_act", "silu", "subsampling_conv_channels", 128, 32,
                     "conv_kernel_size", 5, "residual_weight", 0.5, "attention_chunk_size", 12,
                     "attention_context_left", 13, "attention_context_right", 0, "attention_logit_cap", 50.0,
                     "attention_invalid_logits_value", -1e9, "use_clipped_linears", 1, "rms_norm_eps", 1e-6,
                     "gradient_clipping", 1e10, "output_proj_dims", big ? 1536 : 256, "initializer_range", 0.02);
}

void tern_gemma4_audio_synth_free(void *arena) { tern_tower_synth_free(arena); }

tern_err *tern_gemma4_audio_synth_tensors(const json_t *root, int mlx, uint64_t seed, tern_wspec **specs,
                                          size_t *n_specs, tern_raw_tensor **raw, size_t *n_raw, void **arena) {
    audio_cfg c;
    TERN_TRY(parse_cfg(root, &c));
    tern_tower_synth *A = calloc(1, sizeof *A);
    if (!A)
        return tern_errf(TERN_ENOMEM, "out of memory");
    A->seed = seed, A->mlx = mlx;
    const int64_t D = c.D, K = c.kernel, F2 = ((MEL + 2 - 3) / 2 + 1 + 2 - 3) / 2 + 1;
    char r[200];
    const int64_t vD[1] = {D}, vHd[1] = {D / c.heads};
#define LIN(o, i) tern_tower_synth_linear(A, r, o, i)
#define RAW(nd, shape, mean, std) tern_tower_synth_raw(A, r, nd, shape, mean, std)
    /* A clippable linear: the matrix, and bounds wide enough for these activations (about unit scale). */
#define CLIN(base, o, i) tern_tower_synth_clipped(A, base, o, i, 24.0f)
    for (int l = 0; l < c.layers; l++) {
        char p[96], base[160];
        snprintf(p, sizeof p, "audio_tower.layers.%d.", l);
        for (int f = 1; f <= 2; f++) {
            snprintf(r, sizeof r, "%sfeed_forward%d.pre_layer_norm.weight", p, f), RAW(1, vD, 1.0f, 0.05f);
            snprintf(r, sizeof r, "%sfeed_forward%d.post_layer_norm.weight", p, f), RAW(1, vD, 1.0f, 0.05f);
            snprintf(base, sizeof base, "%sfeed_forward%d.ffw_layer_1", p, f);
            CLIN(base, 4 * D, D);
            snprintf(base, sizeof base, "%sfeed_forward%d.ffw_layer_2", p, f);
            CLIN(base, D, 4 * D);
        }
        static const char *const norms[] = {"norm_pre_attn", "norm_post_attn", "norm_out", "lconv1d.pre_layer_norm",
                                            "lconv1d.conv_norm"};
        for (size_t k = 0; k < sizeof norms / sizeof *norms; k++)
            snprintf(r, sizeof r, "%s%s.weight", p, norms[k]), RAW(1, vD, 1.0f, 0.05f);
        static const char *const attn[] = {"q_proj", "k_proj", "v_proj", "post"};
        for (int k = 0; k < 4; k++) {
            snprintf(base, sizeof base, "%sself_attn.%s", p, attn[k]);
            CLIN(base, D, D);
        }
        snprintf(r, sizeof r, "%sself_attn.relative_k_proj", p), LIN(D, D);
        snprintf(r, sizeof r, "%sself_attn.per_dim_scale", p), RAW(1, vHd, 0.0f, 0.1f);
        snprintf(base, sizeof base, "%slconv1d.linear_start", p);
        CLIN(base, 2 * D, D);
        snprintf(base, sizeof base, "%slconv1d.linear_end", p);
        CLIN(base, D, D);
        const int64_t dw[3] = {D, mlx ? K : 1, mlx ? 1 : K};
        snprintf(r, sizeof r, "%slconv1d.depthwise_conv1d.weight", p), RAW(3, dw, 0.0f, 1.0f / sqrtf((float)K));
    }
    const int64_t c0[4] = {c.C0, mlx ? 3 : 1, 3, mlx ? 1 : 3};
    const int64_t c1[4] = {c.C1, mlx ? 3 : c.C0, 3, mlx ? c.C0 : 3};
    const int64_t vC0[1] = {c.C0}, vC1[1] = {c.C1}, vP[1] = {c.out_dim};
    snprintf(r, sizeof r, "audio_tower.subsample_conv_projection.layer0.conv.weight"), RAW(4, c0, 0.0f, 1.0f / 3.0f);
    snprintf(r, sizeof r, "audio_tower.subsample_conv_projection.layer0.norm.weight"), RAW(1, vC0, 1.0f, 0.05f);
    snprintf(r, sizeof r, "audio_tower.subsample_conv_projection.layer1.conv.weight"),
        RAW(4, c1, 0.0f, 1.0f / sqrtf(9.0f * (float)c.C0));
    snprintf(r, sizeof r, "audio_tower.subsample_conv_projection.layer1.norm.weight"), RAW(1, vC1, 1.0f, 0.05f);
    snprintf(r, sizeof r, "audio_tower.subsample_conv_projection.input_proj_linear"), LIN(D, F2 * c.C1);
    snprintf(r, sizeof r, "audio_tower.output_proj"), LIN(c.out_dim, D);
    snprintf(r, sizeof r, "audio_tower.output_proj.bias"), RAW(1, vP, 0.0f, 0.02f);
    snprintf(r, sizeof r, "embed_audio.embedding_projection"), LIN(c.text_dim, c.out_dim);
#undef LIN
#undef RAW
#undef CLIN
    TERN_TRY(tern_tower_synth_finish(A, specs, n_specs, raw, n_raw));
    *arena = A;
    return NULL;
}
