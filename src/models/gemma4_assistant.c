/* gemma4_assistant.c — the Gemma 4 assistant drafter (GEMMA4.md §5). The decoder stack binds through the Gemma 4
 * tensor list (its config has every layer KV-shared, so each layer is Q-only); the projections and the centroid
 * head sit at the checkpoint's root and bind by name. One step is a single token of each row drafted, so every
 * product is one pass over the weights for all rows on the pool, and each row's attention is one query over its
 * target cache rows in place. */
#include "models/cache_drafter.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/gemma4.h"
#include "models/gemma4_weights.h"
#include "tensor/attention.h"
#include "tensor/ops.h"

struct tern_cache_drafter {
    tern_gemma4_parsed p;
    tern_cache_drafter_desc d;
    tern_weight pre, post, centroids;
    const int64_t *ordering; /* [vocab] token ids grouped by centroid, or NULL */
    int64_t n_centroids, centroid_top_k;
    int use_centroids;
    tern_gemma4_layer *layers; /* Q-only: every layer reads a target cache layer */
    const tern_weight *embed;
    const float *norm;
    float *inv_freq[2];
    int cap;    /* rows the activations have room for */
    float *buf; /* one arena for a step's activations: per row x .. cscore ([cap][width] each), then one row's
                 * attention scratch */
    float *x, *xn, *q, *attn, *a, *g, *u, *cat, *y, *cscore, *cs, *sn, *scores, *part, *row;
};

/* Binds a root-level tensor (the projections, the centroids). */
static TERN_MUST_CHECK tern_err *bind_root(tern_cache_drafter *a, const char *name, int64_t rows, int64_t cols, tern_weight *w) {
    tern_wspec s = {.suffix = 1, .rooted = 1, .kind = TERN_WK_LINEAR, .ndim = 2, .shape = {rows, cols}};
    snprintf(s.name, sizeof s.name, "%s", name);
    char why[640];
    tern_weights_bind_one(&s, a->p.gw->layout, a->p.qc, a->p.ck, w, why, sizeof why);
    return why[0] ? tern_errf(TERN_EFORMAT, "%s", why) : NULL;
}

static TERN_MUST_CHECK tern_err *bind_head(tern_cache_drafter *a, const json_t *root) {
    const tern_tensor *order = tern_checkpoint_find(a->p.ck, "masked_embedding.token_ordering");
    const tern_tensor *cw = tern_checkpoint_find(a->p.ck, "masked_embedding.centroids.weight");
    if (!order && !cw)
        return NULL;
    if (!order || !cw || cw->ndim != 2)
        return tern_errf(TERN_EFORMAT, "the centroid head needs masked_embedding.centroids.weight [centroids, "
                                       "hidden] and masked_embedding.token_ordering [vocab]");
    const int64_t V = a->d.vocab, C = cw->shape[0];
    if (order->dtype != TERN_DT_I64 || order->ndim != 1 || order->shape[0] != V || !order->aligned || C <= 0 ||
        V % C)
        return tern_errf(TERN_EFORMAT, "masked_embedding.token_ordering: expected I64 [%lld] in %lld equal groups",
                         (long long)V, (long long)C);
    a->ordering = order->data;
    for (int64_t i = 0; i < V; i++)
        if (a->ordering[i] < 0 || a->ordering[i] >= V)
            return tern_errf(TERN_EFORMAT, "masked_embedding.token_ordering[%lld] = %lld is outside the vocabulary",
                             (long long)i, (long long)a->ordering[i]);
    a->n_centroids = C;
    int64_t k = 32;
    TERN_TRY(tern_json_get_int(root, "centroid_intermediate_top_k", 32, 1, 1 << 20, &k));
    a->centroid_top_k = k < 1 ? 1 : k > C ? C : k;
    TERN_TRY(bind_root(a, "masked_embedding.centroids", C, a->d.hidden, &a->centroids));
    a->d.has_centroids = 1;
    a->use_centroids = 1;
    return NULL;
}

static TERN_MUST_CHECK tern_err *bind_layers(tern_cache_drafter *a) {
    const tern_gemma4_config *c = &a->p.c;
    if (!(a->layers = calloc((size_t)c->num_hidden_layers, sizeof *a->layers)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    for (int l = 0; l < c->num_hidden_layers; l++)
        TERN_TRY(tern_gemma4_layer_bind(a->p.gw, c, l, &a->layers[l]));
    a->embed = tern_gemma4_weight(a->p.gw, "embed_tokens", 0);
    if (!(a->norm = tern_weights_floats(a->p.gw, "norm")))
        return tern_errf(TERN_ENOMEM, "out of memory");
    return tern_gemma4_rope_tables(c, a->inv_freq);
}

/* Room for the activations of n rows (kept for later steps). */
static TERN_MUST_CHECK tern_err *reserve_rows(tern_cache_drafter *a, int n) {
    if (n <= a->cap)
        return NULL;
    const tern_gemma4_config *c = &a->p.c;
    const int64_t H = c->hidden_size, Ht = a->d.backbone_hidden, nH = c->num_attention_heads;
    const int64_t hd = c->global_head_dim > c->head_dim ? c->global_head_dim : c->head_dim;
    int64_t F = 0;
    for (int l = 0; l < c->num_hidden_layers; l++)
        F = a->layers[l].ffn > F ? a->layers[l].ffn : F;
    const int64_t per_row[] = {H, H, nH * hd, nH * hd, H, F, F, 2 * Ht, H, a->n_centroids};
    const int64_t once[] = {hd, hd, nH * TERN_ATTN_CHUNK, 3 * tern_attn_part_floats(nH, hd), H};
    float **rows[] = {&a->x, &a->xn, &a->q, &a->attn, &a->a, &a->g, &a->u, &a->cat, &a->y, &a->cscore};
    float **single[] = {&a->cs, &a->sn, &a->scores, &a->part, &a->row};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof per_row / sizeof *per_row; i++)
        total += (int64_t)n * per_row[i];
    for (size_t i = 0; i < sizeof once / sizeof *once; i++)
        total += once[i];
    float *buf = malloc((size_t)total * sizeof(float));
    if (!buf)
        return tern_errf(TERN_ENOMEM, "out of memory for the drafter's activations of %d rows", n);
    free(a->buf);
    a->buf = buf;
    a->cap = n;
    for (size_t i = 0; i < sizeof per_row / sizeof *per_row; i++) {
        *rows[i] = buf;
        buf += (int64_t)n * per_row[i];
    }
    for (size_t i = 0; i < sizeof once / sizeof *once; i++) {
        *single[i] = buf;
        buf += once[i];
    }
    return NULL;
}

int tern_cache_drafter_type(const char *model_type) { return model_type && !strcmp(model_type, "gemma4_assistant"); }

tern_err *tern_cache_drafter_load(const char *dir, tern_cache_drafter **out) {
    *out = NULL;
    json_t *root = NULL;
    tern_err *err = tern_json_load_in(dir, "config.json", 16u << 20, &root);
    if (err)
        return tern_err_wrap(err, "%s", dir);
    const json_t *type = json_object_get(root, "model_type");
    if (!tern_cache_drafter_type(json_string_value(type))) {
        err = tern_errf(TERN_EINVAL, "%s: model_type is \"%s\", not \"gemma4_assistant\" (a Gemma 4 assistant "
                                     "drafter)", dir, json_is_string(type) ? json_string_value(type) : "?");
        json_decref(root);
        return err;
    }
    tern_cache_drafter *a = calloc(1, sizeof *a);
    if (!a) {
        json_decref(root);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    err = tern_gemma4_parse(dir, root, &a->p);
    if (!err) {
        const tern_gemma4_config *c = &a->p.c;
        a->d.hidden = c->hidden_size;
        a->d.vocab = c->vocab_size;
        a->d.n_layers = c->num_hidden_layers;
        err = tern_err_wrap(tern_json_get_int(root, "backbone_hidden_size", 0, 0, 1 << 20, &a->d.backbone_hidden),
                            "%s/config.json", dir);
        if (!err && a->d.backbone_hidden <= 0)
            err = tern_errf(TERN_EFORMAT, "%s/config.json: backbone_hidden_size (the target's width) is missing",
                            dir);
    }
    if (!err && a->p.gw->n_problems)
        err = tern_errf(TERN_EFORMAT, "%s: %s%s", dir, a->p.gw->problems[0],
                        a->p.gw->n_problems > 1 ? " (and more: tern info lists them)" : "");
    if (!err)
        err = bind_root(a, "pre_projection", a->d.hidden, 2 * a->d.backbone_hidden, &a->pre);
    if (!err)
        err = bind_root(a, "post_projection", a->d.backbone_hidden, a->d.hidden, &a->post);
    if (!err)
        err = bind_head(a, root);
    if (!err)
        err = bind_layers(a);
    if (!err)
        err = reserve_rows(a, 1);
    json_decref(root);
    if (err) {
        tern_cache_drafter_free(a);
        return tern_err_wrap(err, "draft model");
    }
    *out = a;
    return NULL;
}

void tern_cache_drafter_free(tern_cache_drafter *a) {
    if (!a)
        return;
    free(a->layers);
    free(a->inv_freq[0]);
    free(a->inv_freq[1]);
    free(a->buf);
    tern_gemma4_parsed_free(&a->p);
    free(a);
}

const tern_cache_drafter_desc *tern_cache_drafter_desc_of(const tern_cache_drafter *a) { return &a->d; }

tern_err *tern_cache_drafter_set_head(tern_cache_drafter *a, tern_draft_head head) {
    if (head == TERN_DRAFT_HEAD_CENTROID && !a->d.has_centroids)
        return tern_errf(TERN_EINVAL, "the draft model has no centroid head (masked_embedding.*): use the full head");
    a->use_centroids = head == TERN_DRAFT_HEAD_FULL ? 0 : a->d.has_centroids;
    return NULL;
}

/* The target cache layer a drafter block of `type` reads: the last cache-owning layer of that type. */
static int target_cache_layer(const tern_lm_desc *t, int type) {
    int found = -1;
    for (int i = 0; i < t->n_kv; i++)
        if (t->kv[i].ring == (type == TERN_LAYER_SLIDING))
            found = i;
    return found;
}

tern_err *tern_cache_drafter_check_target(const tern_cache_drafter *a, const tern_lm_desc *t) {
    const tern_gemma4_config *c = &a->p.c;
    if (t->vocab != a->d.vocab || t->hidden != a->d.backbone_hidden)
        return tern_errf(TERN_EINVAL, "the draft model is for a target with vocabulary %lld and hidden size %lld; "
                         "this target has vocabulary %lld and hidden size %lld", (long long)a->d.vocab,
                         (long long)a->d.backbone_hidden, (long long)t->vocab, (long long)t->hidden);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const int type = c->layer_types[l];
        const char *name = type == TERN_LAYER_FULL ? "full" : "sliding";
        const int k = target_cache_layer(t, type);
        if (k < 0)
            return tern_errf(TERN_EINVAL, "draft layer %d is a %s-attention block but the target has no %s layer "
                             "owning a cache", l, name, name);
        const int64_t hd = tern_gemma4_layer_head_dim(c, l), kvh = tern_gemma4_layer_kv_heads(c, l);
        if (t->kv[k].head_dim != hd || t->kv[k].kv_heads != kvh ||
            (type == TERN_LAYER_SLIDING && t->sliding_window != c->sliding_window))
            return tern_errf(TERN_EINVAL, "draft layer %d (%s) attends with head dim %lld, %lld KV heads%s%lld; the "
                             "target cache layer %d it reads has head dim %lld, %lld KV heads%s%lld", l, name,
                             (long long)hd, (long long)kvh, type == TERN_LAYER_SLIDING ? ", window " : "",
                             type == TERN_LAYER_SLIDING ? (long long)c->sliding_window : 0LL, k,
                             (long long)t->kv[k].head_dim, (long long)t->kv[k].kv_heads,
                             type == TERN_LAYER_SLIDING ? ", window " : "",
                             type == TERN_LAYER_SLIDING ? (long long)t->sliding_window : 0LL);
    }
    return NULL;
}

/* Scores row r with the centroid head (a->cscore holds every row's centroid scores): the top clusters' tokens get
 * their embedding dot y, all others the lowest of those minus 1. */
static void centroid_logits(tern_cache_drafter *a, int r, float *logits) {
    const int64_t V = a->d.vocab, C = a->n_centroids, per = V / C, H = a->d.hidden;
    float *cscore = a->cscore + (size_t)r * (size_t)C;
    const float *y = a->y + (size_t)r * (size_t)H;
    for (int64_t i = 0; i < V; i++)
        logits[i] = NAN;
    float lo = FLT_MAX;
    for (int64_t k = 0; k < a->centroid_top_k; k++) {
        int64_t best = -1;
        for (int64_t j = 0; j < C; j++)
            if (!isnan(cscore[j]) && (best < 0 || cscore[j] > cscore[best]))
                best = j;
        cscore[best] = NAN; /* taken */
        for (int64_t i = best * per; i < (best + 1) * per; i++) {
            const int64_t id = a->ordering[i];
            tern_weight_row(a->embed, id, a->row);
            float s = 0;
            for (int64_t e = 0; e < H; e++)
                s += a->row[e] * y[e];
            logits[id] = s;
            lo = s < lo ? s : lo;
        }
    }
    for (int64_t i = 0; i < V; i++)
        if (isnan(logits[i]))
            logits[i] = lo - 1.0f;
}

/* Row r's attention over its target cache view at layer L: one query of nH heads at position P (a->q's row r,
 * normed and rotated here) into a->attn's row r. */
static void attend_row(tern_cache_drafter *a, const tern_gemma4_layer *L, int r, int64_t P, const tern_kv_view *v) {
    const tern_gemma4_config *c = &a->p.c;
    const int64_t nH = c->num_attention_heads, hd = L->hd;
    float *q = a->q + (size_t)r * (size_t)(nH * hd), *out = a->attn + (size_t)r * (size_t)(nH * hd);
    /* Every step queries from P, the position of the token drafted from; the cache holds positions < P. */
    tern_rope_angles(hd, a->inv_freq[L->type], P, a->cs, a->sn);
    for (int64_t h = 0; h < nH; h++) {
        float *qh = q + h * hd;
        tern_rmsnorm(qh, L->q_norm, hd, (float)c->rms_norm_eps, qh);
        tern_rope_apply(qh, hd, a->inv_freq[L->type], a->cs, a->sn);
    }
    int64_t start = L->type == TERN_LAYER_SLIDING ? P - c->sliding_window + 1 : 0;
    start = start < 0 ? 0 : start;
    if (P == 0) {
        memset(out, 0, (size_t)(nH * hd) * sizeof(float)); /* nothing to read before the first token */
        return;
    }
    tern_attn_args args = {.q = q, .n_heads = nH, .kv_heads = v->kv_heads, .head_dim = hd, .k = v->k, .v = v->v,
                           .k_type = v->k_type, .v_type = v->v_type, .slots = v->slots, .start = start, .end = P - 1,
                           .scores = a->scores, .part = a->part, .out = out};
    tern_attend(&args);
}

/* x[r] = (x[r] + norm(y[r])) * scale for each of n rows of width H. */
static void add_normed(float *x, float *y, const float *norm, int n, int64_t H, float eps, float scale) {
    for (int r = 0; r < n; r++) {
        float *xr = x + (size_t)r * (size_t)H, *yr = y + (size_t)r * (size_t)H;
        tern_rmsnorm(yr, norm, H, eps, yr);
        for (int64_t i = 0; i < H; i++)
            xr[i] = (xr[i] + yr[i]) * scale;
    }
}

tern_err *tern_cache_drafter_step(tern_cache_drafter *a, tern_pool *pool, const tern_cache_drafter_io *io) {
    const tern_gemma4_config *c = &a->p.c;
    const int n = io->n;
    const int64_t H = c->hidden_size, Ht = a->d.backbone_hidden;
    const float eps = (float)c->rms_norm_eps;
    if (n <= 0)
        return NULL;
    TERN_TRY(reserve_rows(a, n));
    int kv_layer[2];
    for (int type = 0; type < 2; type++)
        kv_layer[type] = target_cache_layer(io->target, type);
    for (int r = 0; r < n; r++) {
        float *cat = a->cat + (size_t)r * (size_t)(2 * Ht);
        memcpy(cat, io->emb + (size_t)r * (size_t)Ht, (size_t)Ht * sizeof(float));
        memcpy(cat + Ht, io->h + (size_t)r * (size_t)Ht, (size_t)Ht * sizeof(float));
    }
    int failed = tern_matmul(pool, &a->pre, a->cat, n, a->x, TERN_MM_DECODE);
    for (int64_t l = 0; l < a->d.n_layers && !failed; l++) {
        const tern_gemma4_layer *L = &a->layers[l];
        for (int r = 0; r < n; r++)
            tern_rmsnorm(a->x + (size_t)r * (size_t)H, L->input_norm, H, eps, a->xn + (size_t)r * (size_t)H);
        failed |= tern_matmul(pool, L->q, a->xn, n, a->q, TERN_MM_DECODE);
        for (int r = 0; r < n && !failed; r++) {
            tern_kv_view view;
            TERN_TRY(tern_kv_view_layer(io->kv, kv_layer[L->type], io->seq[r], &view));
            attend_row(a, L, r, tern_kv_len(io->kv, io->seq[r]), &view);
        }
        failed |= tern_matmul(pool, L->o, a->attn, n, a->a, TERN_MM_DECODE);
        add_normed(a->x, a->a, L->post_attn_norm, n, H, eps, 1.0f);
        for (int r = 0; r < n; r++)
            tern_rmsnorm(a->x + (size_t)r * (size_t)H, L->pre_ff_norm, H, eps, a->xn + (size_t)r * (size_t)H);
        failed |= tern_matmul(pool, L->gate, a->xn, n, a->g, TERN_MM_DECODE);
        failed |= tern_matmul(pool, L->up, a->xn, n, a->u, TERN_MM_DECODE);
        for (int r = 0; r < n; r++) /* by row: a vector kernel's tail must fall where a lone row's does */
            tern_gelu_tanh_mul(a->g + (size_t)r * (size_t)L->ffn, a->u + (size_t)r * (size_t)L->ffn, L->ffn);
        failed |= tern_matmul(pool, L->down, a->g, n, a->a, TERN_MM_DECODE);
        add_normed(a->x, a->a, L->post_ff_norm, n, H, eps, L->layer_scalar);
    }
    if (!failed) {
        for (int r = 0; r < n; r++)
            tern_rmsnorm(a->x + (size_t)r * (size_t)H, a->norm, H, eps, a->y + (size_t)r * (size_t)H);
        if (a->use_centroids) {
            failed |= tern_matmul(pool, &a->centroids, a->y, n, a->cscore, TERN_MM_DECODE);
            for (int r = 0; r < n && !failed; r++)
                centroid_logits(a, r, io->logits + (size_t)r * (size_t)a->d.vocab);
        } else {
            failed |= tern_matmul(pool, a->embed, a->y, n, io->logits, TERN_MM_DECODE);
        }
        failed |= tern_matmul(pool, &a->post, a->y, n, io->h_out, TERN_MM_DECODE);
    }
    return failed ? tern_errf(TERN_ENOMEM, "out of memory in a draft step") : NULL;
}
