/* gemma4.c — the Gemma 4 text decoder, written to read like GEMMA4.md §1.
 *
 * Speed lives in src/tensor/ (matmul and friends); this file says what is computed.
 * Activations are f32, [T][width] row-major, where T counts the tokens of all rows of the
 * batch concatenated; each token knows its KV sequence and absolute position. */
#include "models/gemma4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/half.h"
#include "core/json_util.h"
#include "formats/checkpoint_dir.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/decoder.h"
#include "models/gemma4_gguf.h"
#include "models/gemma4_weights.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"

/* ---- weights ------------------------------------------------------------------------------ */


struct tern_gemma4 {
    tern_gemma4_config c;
    tern_checkpoint *ck;
    tern_quant_config *qc;
    tern_weights *gw;
    const tern_weight *embed, *embed_ple, *ple_proj;
    const float *ple_norm;   /* [P] */
    const float *final_norm; /* [H] */
    float embed_scale, ple_scale;
    tern_gemma4_layer *layers;
    float *inv_freq[2]; /* by layer type: [head_dim/2] */
    tern_lm_profile *prof; /* tern_gemma4_set_profile, or NULL */
    int layout_threads; /* the pool size the packed weights are laid out for */
};

/* sqrt(width) as the reference applies it: cast to the embedding's dtype first (GEMMA4.md §1). */
static float embed_scale_for(const tern_weight *w, double width) {
    float s = (float)sqrt(width);
    tern_dtype dt = w->fmt == TERN_WF_MLX_AFFINE ? w->sdtype : w->fmt == TERN_WF_BF16 ? TERN_DT_BF16
                                                         : w->fmt == TERN_WF_F16     ? TERN_DT_F16
                                                                                     : TERN_DT_F32;
    if (dt == TERN_DT_BF16)
        return tern_bf16_to_f32(tern_f32_to_bf16(s));
    if (dt == TERN_DT_F16)
        return tern_f16_to_f32(tern_f32_to_f16(s));
    return s;
}

static TERN_MUST_CHECK tern_err *bind_layers(tern_gemma4 *m) {
    const tern_gemma4_config *c = &m->c;
    m->layers = calloc((size_t)c->num_hidden_layers, sizeof *m->layers);
    if (!m->layers)
        return tern_errf(TERN_ENOMEM, "out of memory");
    m->embed = tern_gemma4_weight(m->gw, "embed_tokens", 0);
    m->final_norm = tern_weights_floats(m->gw, "norm");
    m->embed_scale = embed_scale_for(m->embed, (double)c->hidden_size);
    if (c->hidden_size_per_layer_input > 0) {
        m->embed_ple = tern_gemma4_weight(m->gw, "embed_tokens_per_layer", 0);
        m->ple_proj = tern_gemma4_weight(m->gw, "per_layer_model_projection", 0);
        m->ple_norm = tern_weights_floats(m->gw, "per_layer_projection_norm");
        m->ple_scale = embed_scale_for(m->embed_ple, (double)c->hidden_size_per_layer_input);
    }
    for (int i = 0; i < c->num_hidden_layers; i++)
        TERN_TRY(tern_gemma4_layer_bind(m->gw, c, i, &m->layers[i]));
    return tern_gemma4_rope_tables(c, m->inv_freq);
}

static TERN_MUST_CHECK tern_err *pack_products(tern_gemma4 *m, const char *dir, int threads);

tern_err *tern_gemma4_load(const char *dir, tern_gemma4 **out) { return tern_gemma4_load_threads(dir, 0, out); }

tern_err *tern_gemma4_parse(const char *dir, const json_t *root, tern_gemma4_parsed *p) {
    memset(p, 0, sizeof *p);
    json_t *gguf_config = NULL; /* a GGUF file (root NULL): the config its metadata stands for, and its tensors */
    tern_err *err = root ? NULL : tern_gemma4_gguf_open(dir, &gguf_config, &p->ck);
    char where[4200];
    snprintf(where, sizeof where, "%s%s", dir, root ? "/config.json" : " (GGUF metadata)");
    if (!root)
        root = gguf_config;
    if (!err)
        err = tern_err_wrap(tern_gemma4_config_parse(root, &p->c), "%s", where);
    if (!err)
        err = tern_err_wrap(tern_quant_config_parse(root, &p->qc), "%s", where);
    if (!err && !p->ck)
        err = tern_checkpoint_open(dir, &p->ck);
    json_decref(gguf_config);
    if (!err)
        err = tern_gemma4_bind(&p->c, p->qc, p->ck, &p->gw);
    if (err)
        tern_gemma4_parsed_free(p);
    return err;
}

void tern_gemma4_parsed_free(tern_gemma4_parsed *p) {
    tern_weights_free(p->gw);
    tern_quant_config_free(p->qc);
    tern_checkpoint_close(p->ck);
    p->gw = NULL;
    p->qc = NULL;
    p->ck = NULL;
}

tern_err *tern_gemma4_load_threads(const char *dir, int threads, tern_gemma4 **out) {
    *out = NULL;
    char *cfg_path = tern_path_join(dir, "config.json");
    json_t *root = NULL;
    tern_gemma4_parsed p = {0};
    char *gguf = NULL;
    tern_err *err = NULL;
    if (tern_checkpoint_gguf_file(dir, &gguf))
        err = tern_gemma4_parse(gguf, NULL, &p);
    else {
        err = tern_checkpoint_dir_check(dir);
        if (!err)
            err = cfg_path ? tern_json_load_file(cfg_path, 16u << 20, &root) : tern_errf(TERN_ENOMEM, "oom");
        if (!err)
            err = tern_gemma4_parse(dir, root, &p);
    }
    json_decref(root);
    free(cfg_path);
    if (!err)
        err = tern_gemma4_load_parsed(gguf ? gguf : dir, &p, threads, out);
    free(gguf);
    tern_gemma4_parsed_free(&p);
    return err;
}

tern_err *tern_gemma4_load_parsed(const char *dir, tern_gemma4_parsed *p, int threads, tern_gemma4 **out) {
    *out = NULL;
    if (p->gw->n_problems)
        return tern_errf(TERN_EFORMAT, "%s: %zu tensor problem(s), first: %s (run 'tern info %s' for all)", dir,
                         p->gw->n_problems, p->gw->problems[0], dir);
    tern_gemma4 *m = calloc(1, sizeof *m);
    if (!m)
        return tern_errf(TERN_ENOMEM, "out of memory");
    m->c = p->c;
    m->qc = p->qc;
    m->ck = p->ck;
    m->gw = p->gw;
    p->qc = NULL;
    p->ck = NULL;
    p->gw = NULL;
    tern_err *err = bind_layers(m);
    m->layout_threads = threads > 0 ? threads : tern_cpu_count();
    if (!err && tern_isa_active() != TERN_ISA_PORTABLE) /* only the int8 kernels read the packed copies */
        err = pack_products(m, dir, m->layout_threads);
    /* The embedding tables are read a row per token, wherever the ids fall: without this each new id faults its
     * rows in (from disk, the first time) in the middle of a decode step. */
    if (!err) {
        tern_weight_prefault(m->embed);
        if (m->embed_ple)
            tern_weight_prefault(m->embed_ple);
    }
    if (err) {
        tern_gemma4_free(m);
        return err;
    }
    *out = m;
    return NULL;
}

void tern_gemma4_free(tern_gemma4 *m) {
    if (!m)
        return;
    free(m->layers);
    free(m->inv_freq[0]);
    free(m->inv_freq[1]);
    tern_weights_free(m->gw);
    tern_quant_config_free(m->qc);
    tern_checkpoint_close(m->ck);
    free(m);
}

void tern_gemma4_embed_row(const tern_gemma4 *m, int32_t id, float *out) {
    tern_weight_row(m->embed, id, out);
    for (int64_t i = 0; i < m->c.hidden_size; i++)
        out[i] *= m->embed_scale;
}

const tern_gemma4_config *tern_gemma4_config_of(const tern_gemma4 *m) { return &m->c; }
const tern_weights *tern_gemma4_weights_of(const tern_gemma4 *m) { return m->gw; }

int tern_gemma4_layout_threads(const tern_gemma4 *m) { return m->layout_threads; }

void tern_gemma4_set_profile(tern_gemma4 *m, tern_lm_profile *p) { m->prof = p; }


uint64_t tern_gemma4_decode_bytes(const tern_gemma4 *m) { return tern_weights_decode_bytes(m->gw, tern_gemma4_expert_share(&m->c)); }

tern_err *tern_gemma4_kv_create(const tern_gemma4 *m, int n_seq, int64_t ctx, int64_t chunk, tern_kv_type k_type,
                                tern_kv_type v_type, tern_kv **out) {
    int n = tern_gemma4_first_shared(&m->c);
    tern_kv_layer_desc *d = calloc((size_t)n, sizeof *d);
    if (!d)
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        d[i].kv_heads = m->layers[i].kvh;
        d[i].head_dim = m->layers[i].hd;
        d[i].ring = m->layers[i].type == TERN_LAYER_SLIDING;
    }
    tern_err *e = tern_kv_create(d, n, n_seq, ctx, m->c.sliding_window, chunk, k_type, v_type, out);
    free(d);
    return e;
}

/* ---- forward ---------------------------------------------------------------------------------- */

/* Per-forward scratch, sized for T tokens, beside the frame's (decoder.h). */
typedef struct fwd {
    tern_dec D;
    tern_gemma4 *m;
    float *x, *xn, *q, *k, *v, *attn, *a, *g, *u, *f, *moe, *pli, *tmp;
    float *mw; /* MoE scratch: router inputs [T][H], logits [T][E]; per token-expert pair [T * K]: its token's row [H],
                * gate/up [2I], gelu [I], down [H] */
    float *rope[2]; /* by layer type: [T][head_dim], each token's RoPE cos (first half) and sin (second half) */
} fwd;

static void mark(fwd *F, tern_phase ph, const tern_product *s) { tern_dec_mark(&F->D, ph, s); }

/* The residual step of each row: a = rmsnorm(a) * a_norm; x = (x + a) * scale; then, given x_norm,
 * xn = rmsnorm(x) * x_norm (the next block's input). One pass per row instead of a region per step. */
typedef struct residual_job {
    float *x, *a, *xn;
    const float *a_norm, *x_norm;
    int64_t n;
    float eps, scale;
} residual_job;

static void residual_range(void *ctx, size_t b, size_t e, int tid) {
    const residual_job *j = ctx;
    for (size_t r = b; r < e; r++) {
        float *x = j->x + (int64_t)r * j->n, *a = j->a + (int64_t)r * j->n;
        tern_rmsnorm(a, j->a_norm, j->n, j->eps, a);
        for (int64_t i = 0; i < j->n; i++)
            x[i] += a[i];
        if (j->scale != 1.0f)
            for (int64_t i = 0; i < j->n; i++)
                x[i] *= j->scale;
        if (j->x_norm)
            tern_rmsnorm(x, j->x_norm, j->n, j->eps, j->xn + (int64_t)r * j->n);
    }
}

static void residual_rows(fwd *F, float *a, const float *a_norm, float scale, const float *x_norm) {
    const tern_gemma4_config *c = &F->m->c;
    residual_job j = {F->x, a, F->xn, a_norm, x_norm, c->hidden_size, (float)c->rms_norm_eps, scale};
    tern_pool_parallel_for(F->D.pool, (size_t)F->D.T, 1, residual_range, &j);
    mark(F, TERN_PH_RESIDUAL, NULL);
}

/* The matrices of one product step of the forward pass: one matrix, or several reading the same input (q/k/v,
 * gate/up) multiplied in one region. */
typedef tern_product mm_set;

static mm_set one(const tern_weight *w) { return (mm_set){{w}, 1}; }

static void mm(fwd *F, const mm_set *s, float *x, float *const *ys, const mm_set *next) {
    tern_dec_mm(&F->D, s, x, ys, next);
}

/* Layer l's first product (q/k/v, or q alone when the layer reads another layer's cache); past the last layer,
 * the tied head. */
static mm_set first_product(const tern_gemma4 *m, int l) {
    if (l >= m->c.num_hidden_layers)
        return one(m->embed);
    const tern_gemma4_layer *L = &m->layers[l];
    if (!L->owns_cache)
        return one(L->q);
    return (mm_set){{L->q, L->k, L->v}, L->k_eq_v ? 2 : 3};
}

/* Layer L's gate and up projections, which read the same normed input. */
static mm_set gate_up_of(const tern_gemma4_layer *L) { return (mm_set){{L->gate, L->up}, 2}; }

/* The packed copies of the weights, laid out for a pool of `threads` threads (tern_weights_pack) along the
 * dense products of a forward pass in the order it runs them (MoE experts aside): at most 6 per layer, the
 * per-layer-input model projection first and the tied head last. */
static TERN_MUST_CHECK tern_err *pack_products(tern_gemma4 *m, const char *dir, int threads) {
    mm_set *list = malloc((size_t)(6 * m->c.num_hidden_layers + 2) * sizeof *list);
    if (!list)
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t n = 0;
    if (m->ple_proj)
        list[n++] = one(m->ple_proj);
    for (int l = 0; l < m->c.num_hidden_layers; l++) {
        const tern_gemma4_layer *L = &m->layers[l];
        list[n++] = first_product(m, l);
        list[n++] = one(L->o);
        list[n++] = gate_up_of(L);
        list[n++] = one(L->down);
        if (L->pl_gate && L->pl_proj) {
            list[n++] = one(L->pl_gate);
            list[n++] = one(L->pl_proj);
        }
    }
    list[n++] = one(m->embed);
    tern_err *err = tern_weights_pack_for(m->gw, list, n, threads, dir);
    free(list);
    return err;
}

typedef struct attn_job {
    fwd *F;
    const tern_gemma4_layer *L;
    int64_t nH;
    const float *inv_freq;
    int layer;
} attn_job;

/* Tokens [b, e): q/k norms and RoPE (the token's angles from F->rope), v's scale-free norm, and, in a layer that
 * owns its cache, the token's K/V written to it (every token of a forward has its own slot). */
static void qk_prep_range(void *ctx, size_t b, size_t e, int tid) {
    const attn_job *j = ctx;
    fwd *F = j->F;
    const tern_gemma4_layer *L = j->L;
    const int64_t hd = L->hd, kvh = L->kvh;
    const float eps = (float)F->m->c.rms_norm_eps;
    for (size_t t = b; t < e; t++) {
        const float *cs = F->rope[L->type] + (int64_t)t * hd, *sn = cs + hd / 2;
        for (int64_t h = 0; h < j->nH; h++) {
            float *qh = F->q + ((int64_t)t * j->nH + h) * hd;
            tern_rmsnorm(qh, L->q_norm, hd, eps, qh);
            tern_rope_apply(qh, hd, j->inv_freq, cs, sn);
        }
        for (int64_t h = 0; L->owns_cache && h < kvh; h++) {
            float *kh = F->k + ((int64_t)t * kvh + h) * hd, *vh = F->v + ((int64_t)t * kvh + h) * hd;
            tern_rmsnorm(kh, L->k_norm, hd, eps, kh);
            tern_rope_apply(kh, hd, j->inv_freq, cs, sn);
            tern_rmsnorm(vh, NULL, hd, eps, vh);
        }
        if (L->owns_cache)
            tern_kv_write(F->D.kv, j->layer, F->D.tok_seq[t], F->D.tok_pos[t], F->k + (int64_t)t * kvh * hd,
                          F->v + (int64_t)t * kvh * hd);
    }
}

/* Tokens [b, e): RoPE angles of each token's position for both layer types, shared by all layers of a type. */
static void rope_range(void *ctx, size_t b, size_t e, int tid) {
    fwd *F = ctx;
    const tern_gemma4_config *c = &F->m->c;
    for (int type = 0; type < 2; type++) {
        const int64_t hd = type == TERN_LAYER_FULL ? c->global_head_dim : c->head_dim;
        for (size_t t = b; t < e; t++) {
            float *cs = F->rope[type] + (int64_t)t * hd;
            tern_rope_angles(hd, F->m->inv_freq[type], F->D.tok_pos[t], cs, cs + hd / 2);
        }
    }
}

/* The attention block; F->xn already holds this layer's normed input when `normed` (the previous layer's last
 * residual pass produced it). */
static void attention(fwd *F, const tern_gemma4_layer *L, int layer, int normed) {
    tern_gemma4 *m = F->m;
    const tern_gemma4_config *c = &m->c;
    const int64_t T = F->D.T, nH = c->num_attention_heads, hd = L->hd, kvh = L->kvh;
    const float eps = (float)c->rms_norm_eps;
    const float *inv_freq = m->inv_freq[L->type];
    if (!normed) {
        tern_dec_rmsnorm_rows(F->D.pool, F->x, L->input_norm, T, c->hidden_size, eps, F->xn);
        mark(F, TERN_PH_RESIDUAL, NULL);
    }
    const mm_set qkv = first_product(m, layer), o = one(L->o); /* q, k and v read the same normed input */
    float *ys[3] = {F->q, F->k, F->v};
    mm(F, &qkv, F->xn, ys, &o);
    mark(F, TERN_PH_QKV, &qkv);
    if (L->owns_cache && L->k_eq_v)
        memcpy(F->v, F->k, (size_t)(T * kvh * hd) * sizeof(float));
    attn_job j = {F, L, nH, inv_freq, layer};
    tern_pool_parallel_for(F->D.pool, (size_t)T, 1, qk_prep_range, &j);
    mark(F, TERN_PH_ATTN_PREP, NULL);
    const int sliding = L->type == TERN_LAYER_SLIDING;
    tern_dec_attend(&F->D, L->cache, F->q, nH, kvh, hd, sliding ? c->sliding_window : 0, sliding && c->vision_both_ways,
                    F->attn);
    mark(F, TERN_PH_ATTN, NULL);
    const mm_set gate_up = gate_up_of(L);
    mm(F, &o, F->attn, &F->a, &gate_up);
    mark(F, TERN_PH_O, &o);
}

typedef struct gelu_job {
    float *g;
    const float *u;
    int64_t width;
} gelu_job;

/* Tokens [b, e) of g = tern_gelu_tanh_f16(g) * u, rows of `width`. */
static void gelu_f16_range(void *ctx, size_t b, size_t e, int tid) {
    const gelu_job *j = ctx;
    (void)tid;
    tern_gelu_tanh_mul_f16(j->g + (int64_t)b * j->width, j->u + (int64_t)b * j->width, (int64_t)(e - b) * j->width);
}

/* down(gelu_tanh(gate(xn)) * up(xn)) for all tokens, into out [T][H]; `next` follows down. */
static void mlp(fwd *F, const tern_gemma4_layer *L, float *xn, float *out, const mm_set *next) {
    const mm_set gate_up = gate_up_of(L), down = one(L->down);
    float *ys[2] = {F->g, F->u};
    mm(F, &gate_up, xn, ys, &down);
    mark(F, TERN_PH_GATE_UP, &gate_up);
    const int f16 = F->m->c.gelu_f16;
    if (f16) {
        gelu_job j = {F->g, F->u, tern_weight_rows(L->gate)};
        tern_pool_parallel_for(F->D.pool, (size_t)F->D.T, 1, gelu_f16_range, &j);
    }
    F->D.failed |= tern_dec_mm_runs(F->D.pool, &down, F->g, f16 ? NULL : tern_gelu_tanh_mul, F->u, &out, F->D.tok_kind,
                                    F->D.T, next) != 0;
    mark(F, TERN_PH_DOWN, &down);
}

typedef struct moe_job {
    fwd *F;
    const tern_gemma4_layer *L;
    int64_t P;          /* token-expert pairs: T * K */
    const int32_t *tok; /* [P] each pair's token, pairs in expert order (each expert's tokens ascending) */
    const float *w;     /* [P] each pair's weight */
    const int32_t *pos; /* [T][K] each token's pairs, in ascending expert order */
    float *gu, *h, *d;  /* [P][2I] gate | up (fused) or up (split), [P][I] gelu (gate, when split), [P][H] down */
} moe_job;

/* Pairs [b, e): h = gelu_tanh(gate) * up. */
static void moe_gelu_range(void *ctx, size_t b, size_t e, int tid) {
    const moe_job *j = ctx;
    const tern_gemma4_config *c = &j->F->m->c;
    const int64_t I = c->moe_intermediate_size;
    void (*gelu_mul)(float *, const float *, int64_t) = c->gelu_f16 ? tern_gelu_tanh_mul_f16 : tern_gelu_tanh_mul;
    for (size_t p = b; p < e; p++) {
        float *h = j->h + (int64_t)p * I;
        if (j->L->exp_gate_up) { /* a pair's row is [gate | up] */
            memcpy(h, j->gu + (int64_t)p * 2 * I, (size_t)I * sizeof *h);
            gelu_mul(h, j->gu + (int64_t)p * 2 * I + I, I);
        } else {
            gelu_mul(h, j->gu + (int64_t)p * I, I);
        }
    }
}

/* Tokens [b, e): out[t] = the sum of its experts' weighted down rows, in ascending expert order. */
static void moe_combine_range(void *ctx, size_t b, size_t e, int tid) {
    const moe_job *j = ctx;
    const int64_t H = j->F->m->c.hidden_size, K = j->F->m->c.top_k_experts;
    for (size_t t = b; t < e; t++) {
        float *o = j->F->moe + (int64_t)t * H;
        memset(o, 0, (size_t)H * sizeof *o);
        for (int64_t k = 0; k < K; k++) {
            const int32_t p = j->pos[(int64_t)t * K + k];
            const float wp = j->w[p], *dp = j->d + (int64_t)p * H;
            for (int64_t i = 0; i < H; i++)
                o[i] += wp * dp[i];
        }
    }
}

/* The slabs of one stacked expert matrix (rows_per_expert rows each): one per run of an expert's pairs of one
 * role, reading its inputs from x (pair p's row at x + p * in) and writing y (pair p's at y + p * out). */
static int expert_slabs(fwd *F, const moe_job *j, const int32_t *end, int64_t rows_per_expert, const float *x,
                        int64_t in, float *y, int64_t out, tern_slab *s) {
    int n = 0;
    for (int64_t e = 0, b = 0; e < F->m->c.num_experts; b = end[e], e++)
        for (int64_t p0 = b; p0 < end[e];) {
            const uint8_t kind = F->D.tok_kind[j->tok[p0]];
            int64_t p1 = p0 + 1;
            while (p1 < end[e] && F->D.tok_kind[j->tok[p1]] == kind)
                p1++;
            s[n++] = (tern_slab){e * rows_per_expert, p1 - p0, x + p0 * in, y + p0 * out, (tern_mm_kind)kind};
            p0 = p1;
        }
    return n;
}

/* The MoE block of all tokens: each token's router over x picks its top-k experts; each expert then runs once over
 * the tokens routed to it (its rows read once per pass, not once per token), all experts' products in a few
 * parallel regions, on y = pre_ff2(x) (F->xn); each token's weighted sum, its experts added in ascending order
 * whatever else is in the batch, goes to F->moe [T][H]. */
static void moe_block(fwd *F, const tern_gemma4_layer *L) {
    const tern_gemma4_config *c = &F->m->c;
    const int64_t T = F->D.T, H = c->hidden_size, E = c->num_experts, I = c->moe_intermediate_size;
    const int64_t K = c->top_k_experts, P = T * K;
    float *r = F->mw, *logits = r + T * H, *X = logits + T * E, *gu = X + P * H, *h = gu + P * 2 * I, *d = h + P * I;
    int32_t *end = calloc((size_t)E + 1, sizeof *end), *tok = malloc((size_t)P * sizeof *tok);
    int32_t *sel = malloc((size_t)P * sizeof *sel), *pos = malloc((size_t)P * sizeof *pos);
    float *wsel = malloc((size_t)P * sizeof *wsel), *wtok = malloc((size_t)P * sizeof *wtok);
    tern_slab *slabs = malloc((size_t)P * sizeof *slabs);
    if (!end || !tok || !sel || !pos || !wsel || !wtok || !slabs) {
        F->D.failed = 1;
        goto done;
    }
    const float inv_sqrt_h = 1.0f / sqrtf((float)H);
    for (int64_t t = 0; t < T; t++) {
        float *rt = r + t * H;
        tern_rmsnorm(F->x + t * H, NULL, H, (float)c->rms_norm_eps, rt);
        for (int64_t i = 0; i < H; i++)
            rt[i] *= L->router_scale[i] * inv_sqrt_h;
    }
    const mm_set router = one(L->router);
    F->D.failed |= tern_dec_mm_runs(F->D.pool, &router, r, NULL, NULL, &logits, F->D.tok_kind, T, NULL) != 0;
    if (F->D.prof)
        F->D.prof->bytes[TERN_PH_MOE] += (double)tern_weight_bytes(L->router);
    for (int64_t t = 0; t < T; t++) {
        float *lt = logits + t * E, wsum = 0;
        int32_t *st = sel + t * K;
        tern_softmax(lt, E);
        for (int64_t k = 0; k < K; k++) { /* top-k by repeated selection: K is small (<= 8 in practice) */
            int32_t best = -1;
            for (int64_t e = 0; e < E; e++) {
                int taken = 0;
                for (int64_t q = 0; q < k; q++)
                    taken |= st[q] == e;
                if (!taken && (best < 0 || lt[e] > lt[best]))
                    best = (int32_t)e;
            }
            st[k] = best;
            wsum += lt[best];
        }
        for (int64_t k = 0; k < K; k++) {
            wsel[t * K + k] = lt[st[k]] / wsum * L->per_expert_scale[st[k]];
            end[st[k] + 1]++;
        }
    }
    /* Pairs by expert (counting sort: each expert's tokens in ascending order); each token's pairs in ascending
     * expert order. */
    for (int64_t e = 0; e < E; e++)
        end[e + 1] += end[e];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t k = 0; k < K; k++) {
            const int32_t e = sel[t * K + k], at = end[e]++;
            tok[at] = (int32_t)t;
            wtok[at] = wsel[t * K + k];
            int64_t q = k; /* insertion by expert: the pair positions of one token rise with their experts */
            for (; q > 0 && pos[t * K + q - 1] > at; q--)
                pos[t * K + q] = pos[t * K + q - 1];
            pos[t * K + q] = at;
        }
    }
    /* end[e] is now expert e's end. Each pair's input: the token's row, gathered. */
    for (int64_t p = 0; p < P; p++)
        memcpy(X + p * H, F->xn + (int64_t)tok[p] * H, (size_t)H * sizeof *X);
    moe_job j = {F, L, P, tok, wtok, pos, gu, h, d};
    if (L->exp_gate_up) {
        const int n = expert_slabs(F, &j, end, 2 * I, X, H, gu, 2 * I, slabs);
        F->D.failed |= tern_matmul_slabs(F->D.pool, L->exp_gate_up, 2 * I, slabs, n) != 0;
    } else {
        int n = expert_slabs(F, &j, end, I, X, H, h, I, slabs);
        F->D.failed |= tern_matmul_slabs(F->D.pool, L->exp_gate, I, slabs, n) != 0;
        n = expert_slabs(F, &j, end, I, X, H, gu, I, slabs);
        F->D.failed |= tern_matmul_slabs(F->D.pool, L->exp_up, I, slabs, n) != 0;
    }
    tern_pool_parallel_for(F->D.pool, (size_t)P, 1, moe_gelu_range, &j);
    const int n = expert_slabs(F, &j, end, H, h, I, d, H, slabs);
    F->D.failed |= tern_matmul_slabs(F->D.pool, L->exp_down, H, slabs, n) != 0;
    tern_pool_parallel_for(F->D.pool, (size_t)T, 1, moe_combine_range, &j);
    if (F->D.prof) { /* each routed expert's share of the stacked matrices, read once a pass */
        int64_t used = 0;
        for (int64_t e = 0, b = 0; e < E; b = end[e], e++)
            used += end[e] > b;
        const tern_weight *ws[4] = {L->exp_gate_up, L->exp_gate, L->exp_up, L->exp_down};
        for (int i = 0; i < 4; i++)
            if (ws[i])
                F->D.prof->bytes[TERN_PH_MOE] += (double)tern_weight_bytes(ws[i]) * (double)used / (double)E;
    }
done:
    free(end);
    free(tok);
    free(sel);
    free(pos);
    free(wsel);
    free(wtok);
    free(slabs);
}

/* The feed-forward block on F->xn (x already normed by pre_ff_norm); its output added to x, which is then
 * scaled by `scale` and, given x_norm, normed with it into F->xn. */
static void feed_forward(fwd *F, const tern_gemma4_layer *L, int layer, float scale, const float *x_norm) {
    const tern_gemma4_config *c = &F->m->c;
    const int64_t T = F->D.T, H = c->hidden_size;
    const float eps = (float)c->rms_norm_eps;
    /* What follows down: the experts' products when there is a MoE block (no hint), else the per-layer-input
     * gate or the next layer. */
    const mm_set next = c->hidden_size_per_layer_input > 0 ? one(L->pl_gate) : first_product(F->m, layer + 1);
    mlp(F, L, F->xn, F->f, c->enable_moe_block ? NULL : &next);
    if (c->enable_moe_block) {
        tern_dec_rmsnorm_rows(F->D.pool, F->f, L->post_ff1_norm, T, H, eps, F->f);
        tern_dec_rmsnorm_rows(F->D.pool, F->x, L->pre_ff2_norm, T, H, eps, F->xn);
        moe_block(F, L);
        for (int64_t t = 0; t < T; t++) {
            float *mo = F->moe + t * H;
            tern_rmsnorm(mo, L->post_ff2_norm, H, eps, mo);
            for (int64_t i = 0; i < H; i++)
                F->f[t * H + i] += mo[i];
        }
        mark(F, TERN_PH_MOE, NULL);
    }
    residual_rows(F, F->f, L->post_ff_norm, scale, x_norm);
}

typedef struct ple_job {
    fwd *F;
    int layer;
} ple_job;

/* Tokens [b, e): g = gelu_tanh(g) * the token's per-layer input for this layer. */
static void ple_gate_range(void *ctx, size_t b, size_t e, int tid) {
    const ple_job *j = ctx;
    const tern_gemma4_config *c = &j->F->m->c;
    const int64_t P = c->hidden_size_per_layer_input, N = c->num_hidden_layers;
    for (size_t t = b; t < e; t++) {
        float *g = j->F->g + (int64_t)t * P;
        const float *in = j->F->pli + ((int64_t)t * N + j->layer) * P;
        (c->gelu_f16 ? tern_gelu_tanh_f16 : tern_gelu_tanh)(g, P);
        for (int64_t i = 0; i < P; i++)
            g[i] *= in[i];
    }
}

/* The per-layer input block: its output added to x, which is then scaled by `scale` and, given x_norm, normed
 * with it into F->xn. */
static void per_layer_input(fwd *F, const tern_gemma4_layer *L, int layer, float scale, const float *x_norm) {
    const mm_set gate = one(L->pl_gate), proj = one(L->pl_proj), next = first_product(F->m, layer + 1);
    mm(F, &gate, F->x, &F->g, &proj);
    mark(F, TERN_PH_PLE, &gate);
    ple_job j = {F, layer};
    tern_pool_parallel_for(F->D.pool, (size_t)F->D.T, 1, ple_gate_range, &j);
    mm(F, &proj, F->g, &F->a, &next);
    mark(F, TERN_PH_PLE, &proj);
    residual_rows(F, F->a, L->pl_norm, scale, x_norm);
}

/* h0 = E[id] * sqrt(H) (soft tokens as given); PLE inputs pli [T][N][P]. */
static void embed(fwd *F, const tern_batch *b) {
    tern_gemma4 *m = F->m;
    const tern_gemma4_config *c = &m->c;
    const int64_t T = F->D.T, H = c->hidden_size, P = c->hidden_size_per_layer_input, N = c->num_hidden_layers;
    for (int64_t t = 0; t < T; t++) {
        float *xt = F->x + t * H;
        if (b->embeds && b->embeds[t]) {
            memcpy(xt, b->embeds[t], (size_t)H * sizeof *xt);
            continue;
        }
        tern_weight_row(m->embed, b->ids[t], xt);
        for (int64_t i = 0; i < H; i++)
            xt[i] *= m->embed_scale;
    }
    if (P <= 0) {
        mark(F, TERN_PH_EMBED, NULL);
        return;
    }
    const mm_set proj = one(m->ple_proj), next = first_product(m, 0);
    mm(F, &proj, F->x, &F->pli, &next);
    mark(F, TERN_PH_EMBED, &proj);
    const float inv_sqrt_h = 1.0f / sqrtf((float)H), inv_sqrt2 = 0.70710678118654752f;
    float *tok = F->tmp;
    for (int64_t t = 0; t < T; t++) {
        /* Soft tokens take the pad token's per-layer row (the projection above saw their own embedding). */
        int32_t id = (b->embeds && b->embeds[t]) ? (int32_t)c->pad_token_id : b->ids[t];
        tern_weight_row(m->embed_ple, id, tok);
        for (int64_t l = 0; l < N; l++) {
            float *p = F->pli + (t * N + l) * P;
            for (int64_t i = 0; i < P; i++)
                p[i] *= inv_sqrt_h;
            tern_rmsnorm(p, m->ple_norm, P, (float)c->rms_norm_eps, p);
            for (int64_t i = 0; i < P; i++)
                p[i] = (p[i] + tok[l * P + i] * m->ple_scale) * inv_sqrt2;
        }
    }
    mark(F, TERN_PH_EMBED, NULL);
}

/* The activation buffers of a pass (decoder.h), each placed at F's field when F is given. */
#define WORK_BUFS 16
static void work_list(const tern_gemma4_config *c, fwd *F, tern_dec_buf bufs[WORK_BUFS]) {
    const int64_t H = c->hidden_size, N = c->num_hidden_layers, P = c->hidden_size_per_layer_input;
    const int64_t qw = c->num_attention_heads * (c->global_head_dim > c->head_dim ? c->global_head_dim : c->head_dim);
    int64_t ffn = c->intermediate_size * 2;
    const int64_t moe = c->enable_moe_block ? H + c->num_experts + c->top_k_experts * (2 * H + 3 * c->moe_intermediate_size)
                                            : 0;
    if (ffn < P)
        ffn = P;
    const int64_t per_token[WORK_BUFS] = {H, H, qw, qw, qw, qw, H, ffn, ffn, H, H, N * P, c->head_dim,
                                          c->global_head_dim, moe, 0};
    float **at[WORK_BUFS] = {NULL};
    if (F) {
        float **fields[WORK_BUFS] = {&F->x, &F->xn,  &F->q,   &F->k,       &F->v,       &F->attn, &F->a,  &F->g,
                                     &F->u, &F->f,   &F->moe, &F->pli, &F->rope[0], &F->rope[1], &F->mw, &F->tmp};
        memcpy(at, fields, sizeof at);
    }
    for (int i = 0; i < WORK_BUFS; i++)
        bufs[i] = (tern_dec_buf){at[i], per_token[i], i == WORK_BUFS - 1 ? H + N * P : 0};
}

uint64_t tern_gemma4_work_bytes(const tern_gemma4_config *c, int64_t T) {
    tern_dec_buf bufs[WORK_BUFS];
    work_list(c, NULL, bufs);
    return tern_dec_work_bytes(bufs, WORK_BUFS, T);
}

tern_err *tern_gemma4_forward(tern_gemma4 *m, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits,
                              float *hidden) {
    const tern_gemma4_config *c = &m->c;
    const int64_t N = c->num_hidden_layers, P = c->hidden_size_per_layer_input;
    fwd F = {.m = m};
    tern_dec_buf bufs[WORK_BUFS];
    work_list(c, &F, bufs);
    TERN_TRY(tern_dec_begin(&F.D, kv, pool, b, c->vocab_size, bufs, WORK_BUFS, m->prof));
    embed(&F, b);
    tern_pool_parallel_for(pool, (size_t)F.D.T, 8, rope_range, &F);
    mark(&F, TERN_PH_SETUP, NULL);
    for (int l = 0; l < N; l++) {
        const tern_gemma4_layer *L = &m->layers[l];
        /* The layer's last residual pass also norms x for the next layer's attention. */
        const float *next_norm = l + 1 < N ? m->layers[l + 1].input_norm : NULL;
        attention(&F, L, l, l > 0);
        residual_rows(&F, F.a, L->post_attn_norm, 1.0f, L->pre_ff_norm);
        /* The layer's scalar applies after its last residual: the per-layer input's when there is one. */
        feed_forward(&F, L, l, P > 0 ? 1.0f : L->layer_scalar, P > 0 ? NULL : next_norm);
        if (P > 0)
            per_layer_input(&F, L, l, L->layer_scalar, next_norm);
    }
    /* Tied logits with the soft-cap (GEMMA4.md §1). */
    const tern_dec_head head = {m->final_norm, (float)c->rms_norm_eps, c->hidden_size, c->vocab_size, m->embed,
                                (float)c->final_logit_softcapping};
    return tern_dec_finish(&F.D, &head, F.x, F.xn, logits, hidden);
}
