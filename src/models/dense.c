/* dense.c — the dense decoder (dense.h): a checkpoint parsed and described for the table, loaded, and run.
 *
 * A layer, for every token of the pass (activations [T][width] as in the decoder frame):
 *   xn = rmsnorm(x) * input_layernorm
 *   q, k, v = xn Wq^T (+ bq), xn Wk^T (+ bk), xn Wv^T (+ bv); [Qwen 3: per-head rmsnorm of q and k]; RoPE on q, k
 *   x += attention(q / sqrt(head_dim), cached K, V) Wo^T (+ bo)
 *   x += down(silu(gate(xn')) * up(xn'))     with xn' = rmsnorm(x) * post_attention_layernorm
 * and at the end logits = rmsnorm(x) * norm times the head (lm_head, or the embedding when tied). */
#include "models/dense.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/decoder.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"

/* ---- the parse: what the table and `tern info` see -------------------------------------------------------- */

typedef struct dense_state {
    const tern_dense_family *f;
    tern_dense_config c;
    tern_quant_config *qc;
    tern_checkpoint *ck;
    tern_weights *w;
    char architecture[128]; /* config.json's architectures[0], for the report */
} dense_state;

void tern_dense_state_free(void *state) {
    dense_state *st = state;
    if (!st)
        return;
    tern_weights_free(st->w);
    tern_quant_config_free(st->qc);
    tern_checkpoint_close(st->ck);
    free(st);
}

static void describe(const dense_state *st, tern_lm_desc *d) {
    const tern_dense_config *c = &st->c;
    memset(d, 0, sizeof *d);
    d->model_type = st->f->name;
    d->n_layers = c->n_layers;
    d->vocab = c->vocab;
    d->hidden = c->hidden;
    d->ctx_train = c->ctx_train;
    d->sliding_window = c->window;
    d->n_kv = (int)c->n_layers;
    for (int l = 0; l < d->n_kv; l++) {
        d->kv[l] = (tern_kv_layer_desc){.kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .ring = c->window > 0};
        d->layer_kv[l] = (int16_t)l;
    }
    d->n_eos = c->n_eos < TERN_LM_MAX_EOS ? c->n_eos : TERN_LM_MAX_EOS;
    for (int k = 0; k < d->n_eos; k++)
        d->eos[k] = (int32_t)c->eos[k];
    tern_weights_count_bytes(st->w, st->ck, &d->weights_bytes, &d->other_bytes);
    if (tern_isa_active() != TERN_ISA_PORTABLE) { /* where the load packs */
        uint64_t replaced;
        d->copy_bytes = tern_weights_copy_bytes(st->w, &replaced);
        d->weights_bytes += d->copy_bytes - replaced;
    }
    d->decode_bytes = tern_weights_decode_bytes(st->w, 1.0);
    d->has_problems = st->w->n_problems > 0;
}

tern_err *tern_dense_parse(const tern_dense_family *f, const char *dir, const json_t *root, void **state,
                           tern_lm_desc *d) {
    dense_state *st = calloc(1, sizeof *st);
    if (!st)
        return tern_errf(TERN_ENOMEM, "out of memory");
    st->f = f;
    json_t *gguf_config = NULL; /* a GGUF file (root NULL): the config its metadata stands for, and its tensors */
    tern_err *err = root ? NULL : tern_dense_gguf_open(f, dir, &gguf_config, &st->ck);
    char where[4200];
    snprintf(where, sizeof where, "%s%s", dir, root ? "/config.json" : " (GGUF metadata)");
    if (!root)
        root = gguf_config;
    if (!err)
        err = tern_err_wrap(tern_dense_config_parse(f, root, &st->c), "%s", where);
    if (!err)
        err = tern_err_wrap(tern_quant_config_parse(root, &st->qc), "%s", where);
    if (!err && !st->ck)
        err = tern_checkpoint_open(dir, &st->ck);
    const json_t *arch = json_array_get(json_object_get(root, "architectures"), 0);
    if (json_is_string(arch))
        snprintf(st->architecture, sizeof st->architecture, "%s", json_string_value(arch));
    else if (gguf_config)
        snprintf(st->architecture, sizeof st->architecture, "GGUF, general.architecture %s", f->gguf_arch);
    json_decref(gguf_config);
    tern_wspec *specs = NULL;
    size_t n = 0;
    if (!err)
        err = tern_dense_specs(&st->c, &specs, &n);
    if (!err)
        err = tern_weights_bind(specs, n, TERN_LAYOUT_MLX_LM, st->qc, st->ck, &st->w);
    if (err) {
        tern_dense_state_free(st);
        return err;
    }
    describe(st, d);
    *state = st;
    return NULL;
}

/* The activation buffers of a pass (decoder.h), each placed at its field when `at` is given. */
enum { B_X, B_XN, B_Q, B_K, B_V, B_ATTN, B_A, B_G, B_U, B_ROPE, N_BUFS };

static void work_list(const tern_dense_config *c, float **at[N_BUFS], tern_dec_buf bufs[N_BUFS]) {
    const int64_t H = c->hidden, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const int64_t per_token[N_BUFS] = {H, H, q, kv, kv, q, H, c->ffn, c->ffn, c->head_dim};
    for (int i = 0; i < N_BUFS; i++)
        bufs[i] = (tern_dec_buf){at ? at[i] : NULL, per_token[i], 0};
}

uint64_t tern_dense_work_bytes(const void *state, int64_t T) {
    tern_dec_buf bufs[N_BUFS];
    work_list(&((const dense_state *)state)->c, NULL, bufs);
    return tern_dec_work_bytes(bufs, N_BUFS, T);
}

void tern_dense_report(const char *dir, const void *state, const tern_lm_desc *d, FILE *out) {
    const dense_state *st = state;
    const tern_dense_config *c = &st->c;
    if (!st->w) {
        fprintf(out, "model:        %s (loaded: the parse was handed to the model)\n", dir);
        return;
    }
    fprintf(out, "model:        %s\n", dir);
    fprintf(out, "architecture: %s decoder (%s)\n", st->f->name, st->architecture[0] ? st->architecture : "no "
            "architectures key");
    fprintf(out, "layers:       %lld, hidden %lld, mlp %lld%s\n", (long long)c->n_layers, (long long)c->hidden,
            (long long)c->ffn, c->window ? ", sliding window on every layer" : "");
    fprintf(out, "attention:    %lld heads, %lld kv heads, head dim %lld%s%s%s\n", (long long)c->n_heads,
            (long long)c->n_kv_heads, (long long)c->head_dim, c->qkv_bias ? ", q/k/v biases" : "",
            c->o_bias ? ", output bias" : "", c->qk_norm ? ", q/k norms" : "");
    static const char *rope_names[] = {"default", "linear", "llama3"};
    fprintf(out, "rope:         %s theta %g%s", rope_names[c->rope], c->rope_theta,
            c->rope_freqs_tensor ? ", frequency factors stored (rope_freqs)" : "");
    if (c->rope != TERN_DROPE_DEFAULT)
        fprintf(out, ", factor %g", c->rope_factor);
    if (c->rope == TERN_DROPE_LLAMA3)
        fprintf(out, " (low %g, high %g, original context %lld)", c->low_freq_factor, c->high_freq_factor,
                (long long)c->rope_original_ctx);
    fprintf(out, "%s\n", c->rope_pairs ? ", adjacent pairs (GGUF)" : "");
    fprintf(out, "vocab:        %lld, head %s, context %lld", (long long)c->vocab,
            c->tied ? "tied to the embedding" : "lm_head", (long long)c->ctx_train);
    if (c->window)
        fprintf(out, ", window %lld", (long long)c->window);
    fprintf(out, "\n");
    if (tern_quant_config_present(st->qc))
        fprintf(out, "quantization: MLX (config.json \"quantization\")\n");
    double params = 0;
    for (size_t i = 0; i < st->w->n; i++) {
        double n = 1;
        for (int k = 0; k < st->w->specs[i].ndim; k++)
            n *= (double)st->w->specs[i].shape[k];
        params += n;
    }
    fprintf(out, "parameters:   %.3f B\n", params * 1e-9);
    tern_weights_report_bytes(st->ck, out);
    fprintf(out, "per token:    %.1f MiB of weights read by each generated token\n",
            (double)d->decode_bytes / (1024.0 * 1024));
    uint64_t full, ring;
    tern_lm_desc_kv_bytes(d, TERN_KV_BF16, TERN_KV_BF16, &full, &ring);
    fprintf(out, "kv cache:     %llu bytes/token (bf16)\n", (unsigned long long)(full + ring));
    tern_weights_report_list(st->w, out);
}

/* ---- the model ------------------------------------------------------------------------------------------- */

typedef struct dense_layer {
    const tern_weight *q, *k, *v, *o, *gate, *up, *down;
    const float *bq, *bk, *bv, *bo;          /* or NULL */
    const float *q_norm, *k_norm;            /* [head_dim] or NULL */
    const float *input_norm, *post_attn_norm; /* [H] */
} dense_layer;

typedef struct dense_model {
    tern_dense_config c;
    tern_quant_config *qc;
    tern_checkpoint *ck;
    tern_weights *w;
    const tern_weight *embed, *head;
    const float *final_norm;
    dense_layer *layers;
    float *inv_freq; /* [head_dim / 2] */
    float q_scale;   /* 1 / sqrt(head_dim), applied to q before attention */
    tern_lm_profile *prof;
    int layout_threads;
} dense_model;

void tern_dense_free(void *impl) {
    dense_model *m = impl;
    if (!m)
        return;
    free(m->layers);
    free(m->inv_freq);
    tern_weights_free(m->w);
    tern_quant_config_free(m->qc);
    tern_checkpoint_close(m->ck);
    free(m);
}

static const tern_weight *W(const dense_model *m, const char *name) {
    const tern_weight *w = tern_weights_find(m->w, name);
    return w && w->fmt != TERN_WF_NONE ? w : NULL;
}

static const tern_weight *LW(const dense_model *m, int l, const char *what) {
    char name[128];
    snprintf(name, sizeof name, "layers.%d.%s", l, what);
    return W(m, name);
}

static const float *LF(dense_model *m, int l, const char *what) {
    char name[128];
    snprintf(name, sizeof name, "layers.%d.%s", l, what);
    return tern_weights_floats(m->w, name);
}

static TERN_MUST_CHECK tern_err *bind(dense_model *m) {
    const tern_dense_config *c = &m->c;
    if (!(m->layers = calloc((size_t)c->n_layers, sizeof *m->layers)) || !(m->inv_freq = tern_dense_inv_freq(c)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    m->embed = W(m, "embed_tokens");
    m->head = c->tied ? m->embed : W(m, "lm_head");
    m->final_norm = tern_weights_floats(m->w, "norm");
    m->q_scale = (float)(1.0 / sqrt((double)c->head_dim));
    int ok = m->embed && m->head && m->final_norm;
    if (c->rope_freqs_tensor) { /* llama.cpp's frequency factors: each pair's frequency divided by its factor */
        const float *ff = tern_weights_floats(m->w, "rope_freqs");
        ok = ok && ff;
        for (int64_t i = 0; ff && i < c->head_dim / 2; i++)
            m->inv_freq[i] /= ff[i];
    }
    for (int l = 0; l < c->n_layers && ok; l++) {
        dense_layer *L = &m->layers[l];
        L->q = LW(m, l, "self_attn.q_proj");
        L->k = LW(m, l, "self_attn.k_proj");
        L->v = LW(m, l, "self_attn.v_proj");
        L->o = LW(m, l, "self_attn.o_proj");
        L->gate = LW(m, l, "mlp.gate_proj");
        L->up = LW(m, l, "mlp.up_proj");
        L->down = LW(m, l, "mlp.down_proj");
        L->input_norm = LF(m, l, "input_layernorm");
        L->post_attn_norm = LF(m, l, "post_attention_layernorm");
        ok = L->q && L->k && L->v && L->o && L->gate && L->up && L->down && L->input_norm && L->post_attn_norm;
        if (c->qkv_bias) {
            L->bq = LF(m, l, "self_attn.q_proj.bias");
            L->bk = LF(m, l, "self_attn.k_proj.bias");
            L->bv = LF(m, l, "self_attn.v_proj.bias");
            ok = ok && L->bq && L->bk && L->bv;
        }
        if (c->o_bias)
            ok = ok && (L->bo = LF(m, l, "self_attn.o_proj.bias"));
        if (c->qk_norm) {
            L->q_norm = LF(m, l, "self_attn.q_norm");
            L->k_norm = LF(m, l, "self_attn.k_norm");
            ok = ok && L->q_norm && L->k_norm;
        }
    }
    return ok ? NULL : tern_errf(TERN_ENOMEM, "out of memory binding weights");
}

static tern_product one(const tern_weight *w) { return (tern_product){{w}, 1}; }
static tern_product qkv_of(const dense_layer *L) { return (tern_product){{L->q, L->k, L->v}, 3}; }
static tern_product gate_up_of(const dense_layer *L) { return (tern_product){{L->gate, L->up}, 2}; }

/* The packed copies laid out along the products of a pass in the order it runs them, the head last. */
static TERN_MUST_CHECK tern_err *pack(dense_model *m, const char *dir, int threads) {
    const size_t n_max = (size_t)(4 * m->c.n_layers + 1);
    tern_product *list = malloc(n_max * sizeof *list);
    if (!list)
        return tern_errf(TERN_ENOMEM, "out of memory");
    size_t n = 0;
    for (int l = 0; l < m->c.n_layers; l++) {
        const dense_layer *L = &m->layers[l];
        list[n++] = qkv_of(L);
        list[n++] = one(L->o);
        list[n++] = gate_up_of(L);
        list[n++] = one(L->down);
    }
    list[n++] = one(m->head);
    tern_err *err = tern_weights_pack_for(m->w, list, n, threads, dir);
    free(list);
    return err;
}

/* tern_lm_load has refused a parse with tensor problems before this is called. */
tern_err *tern_dense_load(const char *dir, void *state, int threads, void **impl) {
    dense_state *st = state;
    dense_model *m = calloc(1, sizeof *m);
    if (!m)
        return tern_errf(TERN_ENOMEM, "out of memory");
    m->c = st->c;
    m->qc = st->qc;
    m->ck = st->ck;
    m->w = st->w;
    st->qc = NULL;
    st->ck = NULL;
    st->w = NULL;
    tern_err *err = bind(m);
    m->layout_threads = threads > 0 ? threads : tern_cpu_count();
    if (!err && tern_isa_active() != TERN_ISA_PORTABLE) /* only the int8 kernels read the packed copies */
        err = pack(m, dir, m->layout_threads);
    if (!err) /* looked up a row per token wherever the ids fall: faulted in now, not in the middle of a step */
        tern_weight_prefault(m->embed);
    if (err) {
        tern_dense_free(m);
        return err;
    }
    *impl = m;
    return NULL;
}

int tern_dense_layout_threads(const void *impl) { return ((const dense_model *)impl)->layout_threads; }
uint64_t tern_dense_decode_bytes(const void *impl) { return tern_weights_decode_bytes(((const dense_model *)impl)->w, 1.0); }
void tern_dense_set_profile(void *impl, tern_lm_profile *p) { ((dense_model *)impl)->prof = p; }

void tern_dense_embed(const void *impl, int32_t id, float *out) {
    tern_weight_row(((const dense_model *)impl)->embed, id, out);
}

/* ---- forward --------------------------------------------------------------------------------------------- */

typedef struct fwd {
    tern_dec D;
    const dense_model *m;
    const dense_layer *L; /* the layer a region works on */
    int layer;
    float *x, *xn, *q, *k, *v, *attn, *a, *g, *u, *rope; /* rope: [T][head_dim], cos (first half) and sin */
} fwd;

static void add_bias(float *y, const float *b, int64_t n) {
    for (int64_t i = 0; b && i < n; i++)
        y[i] += b[i];
}

/* x's head of `dim` values turned by the token's angles: pairs (i, i + dim/2), or (2i, 2i + 1) when `pairs`. */
static void rope(float *x, int64_t dim, const float *inv_freq, const float *cs, const float *sn, int pairs) {
    if (!pairs) {
        tern_rope_apply(x, dim, inv_freq, cs, sn);
        return;
    }
    for (int64_t i = 0; i < dim / 2; i++) {
        const float a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * cs[i] - b * sn[i];
        x[2 * i + 1] = a * sn[i] + b * cs[i];
    }
}

/* Tokens [b, e): biases, q/k norms, RoPE, q scaled, the token's K/V written to the cache. */
static void qk_prep_range(void *ctx, size_t b, size_t e, int tid) {
    const fwd *F = ctx;
    const tern_dense_config *c = &F->m->c;
    const dense_layer *L = F->L;
    const int64_t hd = c->head_dim, nH = c->n_heads, kvh = c->n_kv_heads;
    const float eps = (float)c->eps;
    (void)tid;
    for (size_t t = b; t < e; t++) {
        float *q = F->q + (int64_t)t * nH * hd, *k = F->k + (int64_t)t * kvh * hd, *v = F->v + (int64_t)t * kvh * hd;
        add_bias(q, L->bq, nH * hd);
        add_bias(k, L->bk, kvh * hd);
        add_bias(v, L->bv, kvh * hd);
        const float *cs = F->rope + (int64_t)t * hd, *sn = cs + hd / 2;
        for (int64_t h = 0; h < nH; h++) {
            float *qh = q + h * hd;
            if (L->q_norm)
                tern_rmsnorm(qh, L->q_norm, hd, eps, qh);
            rope(qh, hd, F->m->inv_freq, cs, sn, c->rope_pairs);
            for (int64_t i = 0; i < hd; i++)
                qh[i] *= F->m->q_scale;
        }
        for (int64_t h = 0; h < kvh; h++) {
            float *kh = k + h * hd;
            if (L->k_norm)
                tern_rmsnorm(kh, L->k_norm, hd, eps, kh);
            rope(kh, hd, F->m->inv_freq, cs, sn, c->rope_pairs);
        }
        tern_kv_write(F->D.kv, F->layer, F->D.tok_seq[t], F->D.tok_pos[t], k, v);
    }
}

/* Tokens [b, e): each token's RoPE angles, shared by all layers. */
static void rope_range(void *ctx, size_t b, size_t e, int tid) {
    const fwd *F = ctx;
    const int64_t hd = F->m->c.head_dim;
    (void)tid;
    for (size_t t = b; t < e; t++) {
        float *cs = F->rope + (int64_t)t * hd;
        tern_rope_angles(hd, F->m->inv_freq, F->D.tok_pos[t], cs, cs + hd / 2);
    }
}

/* A residual step: x += a (+ bias); then, given norm, xn = rmsnorm(x) * norm. */
typedef struct residual_job {
    const fwd *F;
    const float *bias, *norm;
} residual_job;

static void residual_range(void *ctx, size_t b, size_t e, int tid) {
    const residual_job *j = ctx;
    const fwd *F = j->F;
    const int64_t H = F->m->c.hidden;
    (void)tid;
    for (size_t t = b; t < e; t++) {
        float *x = F->x + (int64_t)t * H;
        const float *a = F->a + (int64_t)t * H;
        for (int64_t i = 0; i < H; i++)
            x[i] += a[i] + (j->bias ? j->bias[i] : 0.0f);
        if (j->norm)
            tern_rmsnorm(x, j->norm, H, (float)F->m->c.eps, F->xn + (int64_t)t * H);
    }
}

static void residual(fwd *F, const float *bias, const float *norm) {
    residual_job j = {F, bias, norm};
    tern_pool_parallel_for(F->D.pool, (size_t)F->D.T, 1, residual_range, &j);
    tern_dec_mark(&F->D, TERN_PH_RESIDUAL, NULL);
}

static void layer(fwd *F, int l) {
    const dense_model *m = F->m;
    const tern_dense_config *c = &m->c;
    const dense_layer *L = &m->layers[l];
    F->L = L;
    F->layer = l;
    const tern_product qkv = qkv_of(L), o = one(L->o), gate_up = gate_up_of(L), down = one(L->down);
    const tern_product next = l + 1 < c->n_layers ? qkv_of(&m->layers[l + 1]) : one(m->head);
    float *qkv_out[3] = {F->q, F->k, F->v}, *gu_out[2] = {F->g, F->u};
    tern_dec_mm(&F->D, &qkv, F->xn, qkv_out, &o);
    tern_dec_mark(&F->D, TERN_PH_QKV, &qkv);
    tern_pool_parallel_for(F->D.pool, (size_t)F->D.T, 1, qk_prep_range, F);
    tern_dec_mark(&F->D, TERN_PH_ATTN_PREP, NULL);
    tern_dec_attend(&F->D, l, F->q, c->n_heads, c->n_kv_heads, c->head_dim, c->window, 0, F->attn);
    tern_dec_mark(&F->D, TERN_PH_ATTN, NULL);
    tern_dec_mm(&F->D, &o, F->attn, &F->a, &gate_up);
    tern_dec_mark(&F->D, TERN_PH_O, &o);
    residual(F, L->bo, L->post_attn_norm);
    tern_dec_mm(&F->D, &gate_up, F->xn, gu_out, &down);
    tern_dec_mark(&F->D, TERN_PH_GATE_UP, &gate_up);
    F->D.failed |=
        tern_dec_mm_runs(F->D.pool, &down, F->g, tern_silu_mul, F->u, &F->a, F->D.tok_kind, F->D.T, &next) != 0;
    tern_dec_mark(&F->D, TERN_PH_DOWN, &down);
    residual(F, NULL, l + 1 < c->n_layers ? m->layers[l + 1].input_norm : NULL);
}

tern_err *tern_dense_forward(void *impl, tern_kv *kv, tern_pool *pool, const tern_batch *b, float *logits,
                             float *hidden) {
    const dense_model *m = impl;
    const tern_dense_config *c = &m->c;
    fwd F = {.m = m};
    float **at[N_BUFS] = {&F.x, &F.xn, &F.q, &F.k, &F.v, &F.attn, &F.a, &F.g, &F.u, &F.rope};
    tern_dec_buf bufs[N_BUFS];
    work_list(c, at, bufs);
    TERN_TRY(tern_dec_begin(&F.D, kv, pool, b, c->vocab, bufs, N_BUFS, m->prof));
    for (int64_t t = 0; t < F.D.T; t++) {
        float *xt = F.x + t * c->hidden;
        if (b->embeds && b->embeds[t])
            memcpy(xt, b->embeds[t], (size_t)c->hidden * sizeof *xt);
        else
            tern_weight_row(m->embed, b->ids[t], xt);
    }
    tern_dec_rmsnorm_rows(pool, F.x, m->layers[0].input_norm, F.D.T, c->hidden, (float)c->eps, F.xn);
    tern_dec_mark(&F.D, TERN_PH_EMBED, NULL);
    tern_pool_parallel_for(pool, (size_t)F.D.T, 8, rope_range, &F);
    tern_dec_mark(&F.D, TERN_PH_SETUP, NULL);
    for (int l = 0; l < c->n_layers; l++)
        layer(&F, l);
    const tern_dec_head head = {m->final_norm, (float)c->eps, c->hidden, c->vocab, m->head, 0.0f};
    return tern_dec_finish(&F.D, &head, F.x, F.xn, logits, hidden);
}
