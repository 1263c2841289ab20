/* test_gemma4_ref.c — the model against a scalar float64 reference forward written here from
 * GEMMA4.md §1, on random tiny models that switch each architecture feature on alone (then all
 * together, and quantized). The reference recomputes every position from scratch with explicit
 * masks, so it also checks the KV cache, the ring and KV sharing of the model under test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/json_util.h"
#include "core/threadpool.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4.h"
#include "models/gemma4_config.h"
#include "models/gemma4_weights.h"
#include "models/synth.h"
#include "tensor/cpu.h"
#include "tensor/ops.h"
#include "testutil.h"

/* ---- the reference ------------------------------------------------------------------------ */

typedef struct ref {
    tern_gemma4_config c;
    tern_checkpoint *ck;
    tern_quant_config *qc;
    tern_weights *gw;
} ref;

/* A whole tensor as doubles (dequantized through the checkpoint's stored format). */
static double *get(const ref *r, const char *fmt, int layer) {
    char name[128];
    snprintf(name, sizeof name, fmt, layer);
    const tern_weight *w = tern_weights_find(r->gw, name);
    if (!w || w->fmt == TERN_WF_NONE)
        return NULL;
    int64_t rows = tern_weight_rows(w), cols = tern_weight_cols(w);
    double *d = malloc((size_t)(rows * cols) * sizeof *d);
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t i = 0; i < rows; i++) {
        tern_weight_row(w, i, row);
        for (int64_t k = 0; k < cols; k++)
            d[i * cols + k] = row[k];
    }
    free(row);
    return d;
}

/* sqrt(width) cast to the table's dtype, as the reference implementation multiplies (GEMMA4.md §1). */
static double embed_scale(const ref *r, const char *name, int64_t width) {
    const tern_weight *w = tern_weights_find(r->gw, name);
    float s = (float)sqrt((double)width);
    if (w->fmt == TERN_WF_BF16 || (w->fmt == TERN_WF_MLX_AFFINE && w->sdtype == TERN_DT_BF16))
        return tern_bf16_to_f32(tern_f32_to_bf16(s));
    return w->fmt == TERN_WF_F32 ? sqrt((double)width) : s;
}

static void matvec(const double *W, const double *x, int64_t out, int64_t in, double *y) {
    for (int64_t o = 0; o < out; o++) {
        double s = 0;
        for (int64_t k = 0; k < in; k++)
            s += W[o * in + k] * x[k];
        y[o] = s;
    }
}

static void rms(double *x, const double *w, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * r * (w ? w[i] : 1.0);
}

static double gelu(double v) { return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); }

static void rope(double *x, int64_t hd, const tern_rope_params *rp, int64_t pos) {
    int64_t half = hd / 2;
    int64_t rot = rp->kind == TERN_ROPE_PROPORTIONAL ? (int64_t)llround(rp->partial_rotary_factor * (double)hd / 2) : half;
    for (int64_t i = 0; i < rot; i++) {
        double f = pow(rp->theta, -2.0 * (double)i / (double)hd) / rp->factor, a = (double)pos * f;
        double x0 = x[i], x1 = x[i + half];
        x[i] = x0 * cos(a) - x1 * sin(a);
        x[i + half] = x1 * cos(a) + x0 * sin(a);
    }
}

/* logits [n][V] for ids[0..n) from position 0. */
static double *ref_forward(const char *dir, const int32_t *ids, int64_t n) {
    ref r = {0};
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    json_t *root;
    TU_OK(tern_json_load_file(cfg, 1 << 24, &root));
    TU_OK(tern_gemma4_config_parse(root, &r.c));
    TU_OK(tern_quant_config_parse(root, &r.qc));
    json_decref(root);
    TU_OK(tern_checkpoint_open(dir, &r.ck));
    TU_OK(tern_gemma4_bind(&r.c, r.qc, r.ck, &r.gw));
    assert_int_equal(r.gw->n_problems, 0);
    const tern_gemma4_config *c = &r.c;
    const int64_t H = c->hidden_size, N = c->num_hidden_layers, P = c->hidden_size_per_layer_input, V = c->vocab_size;
    const int64_t nH = c->num_attention_heads;
    const double eps = c->rms_norm_eps;
    double *x = calloc((size_t)(n * H), sizeof *x);
    double *E = get(&r, "embed_tokens", 0);
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < H; i++)
            x[t * H + i] = E[ids[t] * H + i] * embed_scale(&r, "embed_tokens", H);
    double *pli = NULL;
    if (P > 0) {
        double *Ep = get(&r, "embed_tokens_per_layer", 0), *Wp = get(&r, "per_layer_model_projection", 0);
        double *np_ = get(&r, "per_layer_projection_norm", 0);
        pli = calloc((size_t)(n * N * P), sizeof *pli);
        for (int64_t t = 0; t < n; t++) {
            double *proj = pli + t * N * P;
            matvec(Wp, x + t * H, N * P, H, proj);
            for (int64_t l = 0; l < N; l++) {
                double *p = proj + l * P;
                for (int64_t i = 0; i < P; i++)
                    p[i] /= sqrt((double)H);
                rms(p, np_, P, eps);
                for (int64_t i = 0; i < P; i++)
                    p[i] = (p[i] + Ep[ids[t] * N * P + l * P + i] * embed_scale(&r, "embed_tokens_per_layer", P)) / sqrt(2.0);
            }
        }
        free(Ep);
        free(Wp);
        free(np_);
    }
    double **Kc = calloc((size_t)N, sizeof *Kc), **Vc = calloc((size_t)N, sizeof *Vc);
    double *xn = malloc((size_t)H * sizeof *xn), *a = malloc((size_t)H * sizeof *a);
    for (int l = 0; l < N; l++) {
        int64_t hd = tern_gemma4_layer_head_dim(c, l), kvh = tern_gemma4_layer_kv_heads(c, l), F = tern_gemma4_layer_ffn(c, l);
        int src = tern_gemma4_kv_source(c, l), full = c->layer_types[l] == TERN_LAYER_FULL;
        const tern_rope_params *rp = &c->rope[c->layer_types[l]];
        double *in_n = get(&r, "layers.%d.input_layernorm", l), *Wq = get(&r, "layers.%d.self_attn.q_proj", l);
        double *qn = get(&r, "layers.%d.self_attn.q_norm", l), *Wo = get(&r, "layers.%d.self_attn.o_proj", l);
        double *post_a = get(&r, "layers.%d.post_attention_layernorm", l);
        double *q = malloc((size_t)(n * nH * hd) * sizeof *q);
        if (src == l) {
            double *Wk = get(&r, "layers.%d.self_attn.k_proj", l), *Wv = get(&r, "layers.%d.self_attn.v_proj", l);
            double *kn = get(&r, "layers.%d.self_attn.k_norm", l);
            Kc[l] = malloc((size_t)(n * kvh * hd) * sizeof(double));
            Vc[l] = malloc((size_t)(n * kvh * hd) * sizeof(double));
            for (int64_t t = 0; t < n; t++) {
                memcpy(xn, x + t * H, (size_t)H * sizeof *xn);
                rms(xn, in_n, H, eps);
                double *k = Kc[l] + t * kvh * hd, *v = Vc[l] + t * kvh * hd;
                matvec(Wk, xn, kvh * hd, H, k);
                if (Wv)
                    matvec(Wv, xn, kvh * hd, H, v);
                else
                    memcpy(v, k, (size_t)(kvh * hd) * sizeof *v); /* attention_k_eq_v */
                for (int64_t h = 0; h < kvh; h++) {
                    rms(k + h * hd, kn, hd, eps);
                    rope(k + h * hd, hd, rp, t);
                    rms(v + h * hd, NULL, hd, eps);
                }
            }
            free(Wk);
            free(Wv);
            free(kn);
        }
        double *o = malloc((size_t)(nH * hd) * sizeof *o), *sc = malloc((size_t)n * sizeof *sc);
        double *newx = malloc((size_t)(n * H) * sizeof *newx);
        for (int64_t t = 0; t < n; t++) {
            memcpy(xn, x + t * H, (size_t)H * sizeof *xn);
            rms(xn, in_n, H, eps);
            double *qt = q + t * nH * hd;
            matvec(Wq, xn, nH * hd, H, qt);
            for (int64_t h = 0; h < nH; h++) {
                rms(qt + h * hd, qn, hd, eps);
                rope(qt + h * hd, hd, rp, t);
                int64_t g = h / (nH / kvh);
                double mx = -1e300;
                for (int64_t j = 0; j <= t; j++) {
                    int visible = full || t - j < c->sliding_window;
                    double s = 0;
                    for (int64_t d = 0; d < hd; d++)
                        s += qt[h * hd + d] * Kc[src][(j * kvh + g) * hd + d];
                    sc[j] = visible ? s : -INFINITY;
                    if (sc[j] > mx)
                        mx = sc[j];
                }
                double sum = 0;
                for (int64_t j = 0; j <= t; j++)
                    sum += (sc[j] = exp(sc[j] - mx));
                for (int64_t d = 0; d < hd; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= t; j++)
                        acc += sc[j] / sum * Vc[src][(j * kvh + g) * hd + d];
                    o[h * hd + d] = acc;
                }
            }
            matvec(Wo, o, H, nH * hd, a);
            rms(a, post_a, H, eps);
            for (int64_t i = 0; i < H; i++)
                newx[t * H + i] = x[t * H + i] + a[i];
        }
        memcpy(x, newx, (size_t)(n * H) * sizeof *x);
        /* Feed-forward (dense MLP, MoE beside it), PLE, layer scalar. */
        double *pre = get(&r, "layers.%d.pre_feedforward_layernorm", l), *post = get(&r, "layers.%d.post_feedforward_layernorm", l);
        double *Wg = get(&r, "layers.%d.mlp.gate_proj", l), *Wu = get(&r, "layers.%d.mlp.up_proj", l);
        double *Wd = get(&r, "layers.%d.mlp.down_proj", l), *ls = get(&r, "layers.%d.layer_scalar", l);
        double *gb = malloc((size_t)F * sizeof *gb), *ub = malloc((size_t)F * sizeof *ub), *f = malloc((size_t)H * sizeof *f);
        for (int64_t t = 0; t < n; t++) {
            double *xt = x + t * H;
            memcpy(xn, xt, (size_t)H * sizeof *xn);
            rms(xn, pre, H, eps);
            matvec(Wg, xn, F, H, gb);
            matvec(Wu, xn, F, H, ub);
            for (int64_t i = 0; i < F; i++)
                gb[i] = gelu(gb[i]) * ub[i];
            matvec(Wd, gb, H, F, f);
            if (c->enable_moe_block) {
                const int64_t E = c->num_experts, I = c->moe_intermediate_size, K = c->top_k_experts;
                double *p1 = get(&r, "layers.%d.post_feedforward_layernorm_1", l), *p2 = get(&r, "layers.%d.post_feedforward_layernorm_2", l);
                double *pre2 = get(&r, "layers.%d.pre_feedforward_layernorm_2", l), *Wr = get(&r, "layers.%d.router.proj", l);
                double *rs = get(&r, "layers.%d.router.scale", l), *pes = get(&r, "layers.%d.router.per_expert_scale", l);
                double *gu = get(&r, "layers.%d.experts.gate_up_proj", l), *eg = NULL, *eu = NULL;
                double *ed = get(&r, "layers.%d.experts.down_proj", l);
                if (!gu) {
                    eg = get(&r, "layers.%d.experts.switch_glu.gate_proj", l);
                    eu = get(&r, "layers.%d.experts.switch_glu.up_proj", l);
                    ed = get(&r, "layers.%d.experts.switch_glu.down_proj", l);
                }
                rms(f, p1, H, eps);
                double *rr = malloc((size_t)H * sizeof *rr), *lg = malloc((size_t)E * sizeof *lg);
                memcpy(rr, xt, (size_t)H * sizeof *rr);
                rms(rr, NULL, H, eps);
                for (int64_t i = 0; i < H; i++)
                    rr[i] *= rs[i] / sqrt((double)H);
                matvec(Wr, rr, E, H, lg);
                double mx = -1e300, sum = 0;
                for (int64_t e = 0; e < E; e++)
                    mx = lg[e] > mx ? lg[e] : mx;
                for (int64_t e = 0; e < E; e++)
                    sum += (lg[e] = exp(lg[e] - mx));
                for (int64_t e = 0; e < E; e++)
                    lg[e] /= sum;
                double *y = malloc((size_t)H * sizeof *y), *mo = calloc((size_t)H, sizeof *mo);
                double *hh = malloc((size_t)I * sizeof *hh), *dd = malloc((size_t)H * sizeof *dd);
                memcpy(y, xt, (size_t)H * sizeof *y);
                rms(y, pre2, H, eps);
                int chosen[16];
                double wsum = 0;
                for (int64_t k = 0; k < K; k++) {
                    int best = -1;
                    for (int64_t e = 0; e < E; e++) {
                        int taken = 0;
                        for (int64_t j = 0; j < k; j++)
                            taken |= chosen[j] == e;
                        if (!taken && (best < 0 || lg[e] > lg[best]))
                            best = (int)e;
                    }
                    chosen[k] = best;
                    wsum += lg[best];
                }
                for (int64_t k = 0; k < K; k++) {
                    int e = chosen[k];
                    for (int64_t i = 0; i < I; i++) {
                        double gv = 0, uv = 0;
                        for (int64_t d = 0; d < H; d++) {
                            gv += (gu ? gu[((int64_t)e * 2 * I + i) * H + d] : eg[((int64_t)e * I + i) * H + d]) * y[d];
                            uv += (gu ? gu[((int64_t)e * 2 * I + I + i) * H + d] : eu[((int64_t)e * I + i) * H + d]) * y[d];
                        }
                        hh[i] = gelu(gv) * uv;
                    }
                    matvec(ed + (int64_t)e * H * I, hh, H, I, dd);
                    for (int64_t i = 0; i < H; i++)
                        mo[i] += lg[e] / wsum * pes[e] * dd[i];
                }
                rms(mo, p2, H, eps);
                for (int64_t i = 0; i < H; i++)
                    f[i] += mo[i];
                free(p1); free(p2); free(pre2); free(Wr); free(rs); free(pes); free(gu); free(eg); free(eu); free(ed);
                free(rr); free(lg); free(y); free(mo); free(hh); free(dd);
            }
            rms(f, post, H, eps);
            for (int64_t i = 0; i < H; i++)
                xt[i] += f[i];
            if (P > 0) {
                double *Wpg = get(&r, "layers.%d.per_layer_input_gate", l), *Wpp = get(&r, "layers.%d.per_layer_projection", l);
                double *pn = get(&r, "layers.%d.post_per_layer_input_norm", l);
                double *gg = malloc((size_t)P * sizeof *gg);
                matvec(Wpg, xt, P, H, gg);
                for (int64_t i = 0; i < P; i++)
                    gg[i] = gelu(gg[i]) * pli[(t * N + l) * P + i];
                matvec(Wpp, gg, H, P, a);
                rms(a, pn, H, eps);
                for (int64_t i = 0; i < H; i++)
                    xt[i] += a[i];
                free(Wpg); free(Wpp); free(pn); free(gg);
            }
            for (int64_t i = 0; i < H; i++)
                xt[i] *= ls[0];
        }
        free(pre); free(post); free(Wg); free(Wu); free(Wd); free(ls); free(gb); free(ub); free(f);
        free(in_n); free(Wq); free(qn); free(Wo); free(post_a); free(q); free(o); free(sc); free(newx);
    }
    double *fn = get(&r, "norm", 0), *logits = malloc((size_t)(n * V) * sizeof *logits);
    for (int64_t t = 0; t < n; t++) {
        rms(x + t * H, fn, H, eps);
        matvec(E, x + t * H, V, H, logits + t * V);
        for (int64_t v = 0; v < V; v++)
            logits[t * V + v] = c->final_logit_softcapping > 0
                                    ? c->final_logit_softcapping * tanh(logits[t * V + v] / c->final_logit_softcapping)
                                    : logits[t * V + v];
    }
    for (int l = 0; l < N; l++) {
        free(Kc[l]);
        free(Vc[l]);
    }
    free(Kc); free(Vc); free(xn); free(a); free(x); free(E); free(pli); free(fn);
    tern_weights_free(r.gw);
    tern_quant_config_free(r.qc);
    tern_checkpoint_close(r.ck);
    return logits;
}

/* ---- the cases -------------------------------------------------------------------------- */

/* A small base model: 4 full layers with default RoPE, no PLE, no sharing, no MoE. Each case
 * edits it to switch on one feature. */
static json_t *base_config(void) {
    json_t *tc = json_pack(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:b,s:i,s:[s,s,s,s],s:{s:{s:s,s:f},s:{s:s,s:f}},s:f,s:f,s:b}",
        "vocab_size", 512, "vocab_size_per_layer_input", 512, "hidden_size", 64, "intermediate_size", 96,
        "num_hidden_layers", 4, "num_attention_heads", 4, "num_key_value_heads", 2, "head_dim", 16,
        "global_head_dim", 32, "num_kv_shared_layers", 0, "attention_k_eq_v", 0, "use_double_wide_mlp", 0,
        "sliding_window", 6, "layer_types", "full_attention", "full_attention", "full_attention", "full_attention",
        "rope_parameters", "full_attention", "rope_type", "default", "rope_theta", 10000.0, "sliding_attention",
        "rope_type", "default", "rope_theta", 10000.0, "final_logit_softcapping", 30.0, "rms_norm_eps", 1e-6,
        "tie_word_embeddings", 1);
    return json_pack("{s:[s],s:s,s:o}", "architectures", "Gemma4ForConditionalGeneration", "model_type", "gemma4",
                     "text_config", tc);
}

static json_t *tc_of(json_t *root) { return json_object_get(root, "text_config"); }

static void set_types(json_t *root, const char *pattern) {
    json_t *a = json_array();
    for (const char *p = pattern; *p; p++)
        json_array_append_new(a, json_string(*p == 'F' ? "full_attention" : "sliding_attention"));
    json_object_set_new(tc_of(root), "num_hidden_layers", json_integer((json_int_t)strlen(pattern)));
    json_object_set_new(tc_of(root), "layer_types", a);
}

static json_t *feature_config(const char *feature) {
    json_t *root = base_config(), *tc = tc_of(root);
    if (!strcmp(feature, "sliding") || !strcmp(feature, "all"))
        set_types(root, "ssFssF");
    if (!strcmp(feature, "proportional-rope") || !strcmp(feature, "all"))
        json_object_set_new(json_object_get(json_object_get(tc, "rope_parameters"), "full_attention"), "rope_type",
                            json_string("proportional")),
            json_object_set_new(json_object_get(json_object_get(tc, "rope_parameters"), "full_attention"),
                                "partial_rotary_factor", json_real(0.25));
    if (!strcmp(feature, "ple") || !strcmp(feature, "all"))
        json_object_set_new(tc, "hidden_size_per_layer_input", json_integer(8));
    if (!strcmp(feature, "kv-shared") || !strcmp(feature, "double-wide") || !strcmp(feature, "all")) {
        if (strcmp(feature, "all"))
            set_types(root, "FsFsFs");
        json_object_set_new(tc, "num_kv_shared_layers", json_integer(2));
    }
    if (!strcmp(feature, "double-wide") || !strcmp(feature, "all"))
        json_object_set_new(tc, "use_double_wide_mlp", json_true());
    if (!strcmp(feature, "k-eq-v") || !strcmp(feature, "all")) {
        json_object_set_new(tc, "attention_k_eq_v", json_true());
        json_object_set_new(tc, "num_global_key_value_heads", json_integer(1));
    }
    if (!strcmp(feature, "moe") || !strcmp(feature, "all")) {
        json_object_set_new(tc, "enable_moe_block", json_true());
        json_object_set_new(tc, "num_experts", json_integer(4));
        json_object_set_new(tc, "top_k_experts", json_integer(2));
        json_object_set_new(tc, "moe_intermediate_size", json_integer(32));
    }
    if (!strcmp(feature, "mqa"))
        json_object_set_new(tc, "num_key_value_heads", json_integer(1));
    return root;
}

static const char *make_model(const char *feature, tern_synth_dtype dt, const char *tag) {
    static char dir[4096];
    json_t *cfg = feature_config(feature);
    char name[128];
    snprintf(name, sizeof name, "ref-%s-%s", feature, tag);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir(name));
    tern_synth_opts o = {.dtype = dt, .group = 32, .seed = 7, .vocab_gguf = TERN_ASSETS_DIR "/gemma4/vocab.gguf"};
    TU_OK(tern_synth_write(cfg, &o, dir));
    json_decref(cfg);
    return dir;
}

/* Runs the model token by token (decode) and as one prefill, compares both with the reference. */
static void check_against_reference(const char *dir, double tol) {
    /* Semantics, not kernel precision: the portable kernels keep f32 activations everywhere (the SIMD
     * paths quantize activations for quantized weights and are checked against it in test_kernels). */
    tern_isa_set(TERN_ISA_PORTABLE);
    static const int32_t ids[] = {2, 17, 301, 44, 5, 99, 250, 8, 77, 410, 3, 64, 128, 7, 500, 33};
    const int64_t n = sizeof ids / sizeof ids[0];
    double *want = ref_forward(dir, ids, n);
    tern_gemma4 *m;
    TU_OK(tern_gemma4_load(dir, &m));
    const int64_t V = tern_gemma4_config_of(m)->vocab_size;
    tern_pool *pool;
    TU_OK(tern_pool_create(2, &pool));
    float *got = malloc((size_t)(n * V) * sizeof *got);
    for (int mode = 0; mode < 2; mode++) { /* 0: one prefill of all tokens, 1: one token per forward */
        tern_kv *kv;
        TU_OK(tern_gemma4_kv_create(m, 1, n, mode ? 1 : n, TERN_KV_F32, TERN_KV_F32, &kv));
        int seq = 0;
        for (int64_t t = 0; t < n; t += mode ? 1 : n) {
            int64_t cnt = mode ? 1 : n;
            tern_batch b = {.n_rows = 1, .seq = &seq, .n_tok = &cnt, .ids = ids + t, .out = TERN_OUT_ALL};
            TU_OK(tern_gemma4_forward(m, kv, pool, &b, got + t * V, NULL));
            TU_OK(tern_batch_commit(kv, &b));
        }
        double maxd = 0;
        for (int64_t i = 0; i < n * V; i++)
            maxd = fmax(maxd, fabs((double)got[i] - want[i]));
        if (maxd >= tol)
            fail_msg("%s (%s): max |logit - reference| = %g >= %g", dir, mode ? "decode" : "prefill", maxd, tol);
        tern_kv_free(kv);
    }
    free(got);
    free(want);
    tern_pool_destroy(pool);
    tern_gemma4_free(m);
    tern_isa_set(tern_isa_detect());
}

#define FEATURE_TEST(fn, feature)                                                \
    static void fn(void **state) { check_against_reference(make_model(feature, TERN_SYNTH_F32, "f32"), 1e-3); }

FEATURE_TEST(test_base, "base")
FEATURE_TEST(test_sliding, "sliding")
FEATURE_TEST(test_proportional_rope, "proportional-rope")
FEATURE_TEST(test_ple, "ple")
FEATURE_TEST(test_kv_shared, "kv-shared")
FEATURE_TEST(test_double_wide, "double-wide")
FEATURE_TEST(test_k_eq_v, "k-eq-v")
FEATURE_TEST(test_moe, "moe")
FEATURE_TEST(test_mqa, "mqa")
FEATURE_TEST(test_all, "all")

/* Quantized (MLX layout, switch_glu experts): the reference reads the same dequantized weights. */
static void test_all_q8(void **state) { check_against_reference(make_model("all", TERN_SYNTH_Q8, "q8"), 1e-3); }
static void test_all_q4(void **state) { check_against_reference(make_model("all", TERN_SYNTH_Q4, "q4"), 1e-3); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base),    cmocka_unit_test(test_sliding), cmocka_unit_test(test_proportional_rope),
        cmocka_unit_test(test_ple),     cmocka_unit_test(test_kv_shared), cmocka_unit_test(test_double_wide),
        cmocka_unit_test(test_k_eq_v),  cmocka_unit_test(test_moe),     cmocka_unit_test(test_mqa),
        cmocka_unit_test(test_all),     cmocka_unit_test(test_all_q8),  cmocka_unit_test(test_all_q4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
