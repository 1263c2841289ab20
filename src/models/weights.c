/* weights.c — resolve a family's tensor list in a checkpoint (float, MLX-quantized or GGUF block storage, shapes
 * checked against the spec, a list of what is missing or extra) and pack the bound matrices for the int8 kernels. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/weights.h"
#include "models/pack_cache.h"
#include "models/stream_choice.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/qblock.h"
#include "tensor/qmm.h"
#include "tensor/qpack.h"
#include "tensor/quant_mlx.h"

static int add_msg(char ***list, size_t *n, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nl = realloc(*list, (*n + 1) * sizeof *nl);
    if (!nl)
        return -1;
    *list = nl;
    if (!(nl[*n] = strdup(buf)))
        return -1;
    (*n)++;
    return 0;
}

static void shape_str(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}

static int float_format(tern_dtype dt, tern_wformat *f) {
    switch (dt) {
    case TERN_DT_F32: *f = TERN_WF_F32; return 1;
    case TERN_DT_F16: *f = TERN_WF_F16; return 1;
    case TERN_DT_BF16: *f = TERN_WF_BF16; return 1;
    default: return 0;
    }
}

/* Binds one spec; returns a problem message in `why` (empty when fine). */
void tern_weights_bind_one(const tern_wspec *s, tern_layout layout, const tern_quant_config *qc,
                          const tern_checkpoint *ck, tern_weight *w, char *why, size_t wlen) {
    char name[200], sname[200], bname[200], module[200];
    why[0] = 0;
    memset(w, 0, sizeof *w);
    tern_wspec_full_name(s, layout, NULL, name, sizeof name);
    const tern_tensor *t = tern_checkpoint_find(ck, name);
    const tern_tensor *sc = NULL, *bi = NULL;
    if (s->suffix) {
        tern_wspec_full_name(s, layout, "scales", sname, sizeof sname);
        tern_wspec_full_name(s, layout, "biases", bname, sizeof bname);
        sc = tern_checkpoint_find(ck, sname);
        bi = tern_checkpoint_find(ck, bname);
    }
    if (!t) {
        snprintf(why, wlen, "missing: %s", name);
        return;
    }
    char want[96], got[96];
    shape_str(s->shape, s->ndim, want, sizeof want);
    shape_str(t->shape, t->ndim, got, sizeof got);
    w->ndim = s->ndim;
    memcpy(w->shape, s->shape, sizeof s->shape);
    w->name = t->name;
    const int64_t in = s->shape[s->ndim - 1];
    if (!sc) {
        tern_wformat f = TERN_WF_QBLOCK;
        if (!t->qblock && !float_format(t->dtype, &f)) {
            snprintf(why, wlen, "mis-shaped: %s: expected %s F32/F16/BF16, found %s %s", name, want, got,
                     tern_dtype_name(t->dtype));
            return;
        }
        int same = t->ndim == s->ndim;
        for (int i = 0; same && i < s->ndim; i++)
            same = t->shape[i] == s->shape[i];
        if (!same) {
            snprintf(why, wlen, "mis-shaped: %s: expected %s, found %s %s", name, want, got, tern_dtype_name(t->dtype));
            return;
        }
        w->fmt = f;
        w->qblock = t->qblock;
        w->data = t->data;
        return;
    }
    /* Quantized: weight U32 [.., words], scales [.., in/group], biases like scales (affine). */
    snprintf(module, sizeof module, "%.*s", (int)(strlen(name) - strlen(".weight")), name);
    tern_quant_params qp = tern_quant_config_lookup(qc, module);
    int bits = qp.bits, group = qp.group_size;
    int mxfp4 = qp.quantized && qp.mode == TERN_QMODE_MXFP4;
    if (!qp.quantized) {
        tern_err *e = tern_quant_infer(in, t->ndim ? t->shape[t->ndim - 1] : 0, sc->ndim ? sc->shape[sc->ndim - 1] : 0,
                                       &bits, &group);
        if (e) {
            snprintf(why, wlen, "mis-shaped: %s: cannot infer quantization: %s", name, tern_err_msg(e));
            tern_err_free(e);
            return;
        }
    }
    int ok = t->dtype == TERN_DT_U32 && t->ndim == s->ndim && sc->ndim == s->ndim;
    for (int i = 0; ok && i + 1 < s->ndim; i++)
        ok = t->shape[i] == s->shape[i] && sc->shape[i] == s->shape[i];
    ok = ok && in % group == 0 && t->shape[s->ndim - 1] == tern_mlx_row_words(in, bits) &&
         sc->shape[s->ndim - 1] == in / group;
    if (mxfp4)
        ok = ok && sc->dtype == TERN_DT_U8;
    else
        ok = ok && bi && bi->ndim == sc->ndim && bi->dtype == sc->dtype && !memcmp(bi->shape, sc->shape, sizeof sc->shape) &&
             (sc->dtype == TERN_DT_F32 || sc->dtype == TERN_DT_BF16 || sc->dtype == TERN_DT_F16);
    if (!ok) {
        char sg[96];
        shape_str(sc->shape, sc->ndim, sg, sizeof sg);
        snprintf(why, wlen,
                 "mis-shaped: %s: expected %s quantized to %d bits in groups of %d, found weight %s %s, scales %s %s%s",
                 name, want, bits, group, got, tern_dtype_name(t->dtype), sg, tern_dtype_name(sc->dtype),
                 (!mxfp4 && !bi) ? ", no biases" : "");
        return;
    }
    w->fmt = mxfp4 ? TERN_WF_MXFP4 : TERN_WF_MLX_AFFINE;
    w->data = t->data;
    w->scales = sc->data;
    w->biases = mxfp4 ? NULL : bi->data;
    w->sdtype = sc->dtype;
    w->bits = bits;
    w->group = group;
}

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Whether a stored tensor (name relative to the layout's prefix, or from the root when `rooted`) is one a spec
 * names: its weight, or an MLX quantized matrix's scales or biases. */
static int names_spec(const tern_weights *w, const char *name, int rooted) {
    char base[200];
    snprintf(base, sizeof base, "%s", name);
    const size_t rl = strlen(base);
    static const char *suffixes[] = {".weight", ".scales", ".biases"};
    for (int s = 0; s < 3; s++) {
        const size_t sl = strlen(suffixes[s]);
        if (rl > sl && !strcmp(base + rl - sl, suffixes[s])) {
            base[rl - sl] = 0;
            break;
        }
    }
    for (size_t i = 0; i < w->n; i++)
        if (w->specs[i].rooted == rooted && !strcmp(w->specs[i].name, base))
            return 1;
    return 0;
}

static const char *prefixes[TERN_LAYOUT_COUNT] = {"model.language_model.", "language_model.model.", "model."};
static const char *layout_names[TERN_LAYOUT_COUNT] = {"hf", "mlx-vlm", "mlx-lm"};

int tern_wspec_add(tern_wspec_list *l, tern_wkind kind, int suffix, int ndim, int64_t d0, int64_t d1, int64_t d2,
                   const char *fmt, ...) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        tern_wspec *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    tern_wspec *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->kind = kind;
    s->suffix = suffix;
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->shape[2] = d2;
    return 0;
}

const char *tern_layout_prefix(tern_layout l) { return prefixes[l]; }
const char *tern_layout_name(tern_layout l) { return layout_names[l]; }

void tern_wspec_full_name(const tern_wspec *s, tern_layout layout, const char *part, char *buf, size_t len) {
    const char *prefix = s->rooted ? "" : prefixes[layout];
    if (part)
        snprintf(buf, len, "%s%s.%s", prefix, s->name, part);
    else
        snprintf(buf, len, "%s%s%s", prefix, s->name, s->suffix ? ".weight" : "");
}

tern_err *tern_weights_bind(tern_wspec *specs, size_t n, tern_layout layout, const tern_quant_config *qc,
                            const tern_checkpoint *ck, tern_weights **out) {
    *out = NULL;
    tern_weights *gw = calloc(1, sizeof *gw);
    if (!gw) {
        free(specs);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    gw->layout = layout;
    gw->specs = specs;
    gw->n = n;
    tern_err *err = NULL;
    size_t nt = tern_checkpoint_count(ck);
    if (!(gw->w = calloc(gw->n ? gw->n : 1, sizeof *gw->w)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    int oom = 0;
    for (size_t i = 0; i < gw->n && !err; i++) {
        char why[640];
        tern_weights_bind_one(&gw->specs[i], gw->layout, qc, ck, &gw->w[i], why, sizeof why);
        if (why[0])
            oom |= add_msg(&gw->problems, &gw->n_problems, "%s", why);
    }
    /* Every stored tensor under the layout's prefix that no spec names is extra. */
    const char *prefix = tern_layout_prefix(gw->layout);
    for (size_t k = 0; k < nt && !err; k++) {
        const tern_tensor *t = tern_checkpoint_at(ck, k);
        const int under = has_prefix(t->name, prefix);
        if (names_spec(gw, under ? t->name + strlen(prefix) : t->name, !under)) /* bound, or reported as a problem */
            continue;
        if (under)
            oom |= add_msg(&gw->extra, &gw->n_extra, "%s", t->name);
        else
            gw->n_other++;
    }
    if (!err && oom)
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (err) {
        tern_weights_free(gw);
        return err;
    }
    *out = gw;
    return NULL;
}

const tern_weight *tern_weights_find(const tern_weights *w, const char *name) {
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->specs[i].name, name))
            return &w->w[i];
    return NULL;
}

/* Q4_K and Q6_K weights are packed only where the int8 kernels take their form (else their ggml block products run
 * on the file's bytes, and a packed copy would only take memory). */
static int packable(const tern_weights *w, size_t i) {
    const tern_wspec *s = &w->specs[i];
    const int product = s->kind == TERN_WK_LINEAR || s->kind == TERN_WK_EXPERTS || (s->kind == TERN_WK_EMBED && s->head);
    const tern_qmm_kernels *qk = tern_kernels()->qmm;
    const tern_qpack_form f = tern_qpack_form_of(&w->w[i]);
    return product && !w->w[i].qpack && f.bits && tern_qmm_takes_form(qk, f);
}

uint64_t tern_weights_copy_bytes(const tern_weights *w, uint64_t *replaced) {
    uint64_t bytes = 0;
    *replaced = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->w[i].fmt == TERN_WF_QBLOCK && packable(w, i)) {
            bytes += tern_qpack_bytes(&w->w[i]);
            if (w->specs[i].kind != TERN_WK_EMBED)
                *replaced += tern_qblock_row_bytes(w->w[i].qblock, tern_weight_cols(&w->w[i])) *
                             (uint64_t)tern_weight_rows(&w->w[i]);
        }
    return bytes;
}

/* Whether product p can be laid out by shares: all its matrices packable, not yet packed, and alike in width,
 * group, format and origin (as the grouped int8 product requires). */
static int splittable(const tern_weights *w, const tern_product *p) {
    for (int i = 0; i < p->n; i++) {
        const tern_weight *a = p->w[i], *b = p->w[0];
        const size_t k = (size_t)(a - w->w);
        const tern_qpack_form fa = tern_qpack_form_of(a), fb = tern_qpack_form_of(b);
        if (k >= w->n || !packable(w, k) || tern_weight_cols(a) != tern_weight_cols(b) || fa.group != fb.group ||
            fa.bits != fb.bits || fa.sdtype != fb.sdtype || fa.origin != fb.origin)
            return 0;
        for (int j = 0; j < i; j++)
            if (p->w[j] == a)
                return 0;
    }
    return p->n > 0;
}

/* The blocks [*b, *e) of product p's matrix i that lie in thread t's share of the product's blocks laid end to
 * end (tern_pool_share, as the grouped product splits them); empty when *b >= *e. */
static void share_of_part(const tern_product *p, int i, int t, int threads, int64_t *b, int64_t *e) {
    int64_t units = 0, start = 0;
    for (int k = 0; k < p->n; k++) {
        units += tern_qpack_blocks(p->w[k]);
        start += k < i ? tern_qpack_blocks(p->w[k]) : 0;
    }
    size_t lo, hi;
    tern_pool_share((size_t)units, (size_t)t, (size_t)threads, &lo, &hi);
    const int64_t nb = tern_qpack_blocks(p->w[i]);
    *b = (int64_t)lo > start ? (int64_t)lo - start : 0;
    *e = (int64_t)hi - start < nb ? (int64_t)hi - start : nb;
}

/* Lays out product p's matrices with thread t's share of the product's blocks at cursor[t] (advanced). */
static TERN_MUST_CHECK tern_err *place_split(const tern_product *p, int threads, uint8_t **cursor) {
    int64_t *first = malloc((size_t)threads * sizeof *first);
    uint8_t **at = malloc((size_t)threads * sizeof *at);
    tern_err *err = first && at ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    for (int i = 0; i < p->n && !err; i++) {
        int pieces = 0;
        for (int t = 0; t < threads; t++) {
            int64_t b, e;
            share_of_part(p, i, t, threads, &b, &e);
            if (b >= e)
                continue;
            first[pieces] = b;
            at[pieces++] = cursor[t];
            cursor[t] += (size_t)(e - b) * tern_qpack_block_bytes(p->w[i]);
        }
        tern_qpack *pk;
        if (!(err = tern_qpack_create_split(p->w[i], pieces, first, at, 0, &pk)))
            ((tern_weight *)p->w[i])->qpack = pk;
    }
    free(first);
    free(at);
    return err;
}

/* Bytes of thread t's share of product p. */
static size_t share_bytes(const tern_product *p, int t, int threads) {
    size_t bytes = 0;
    for (int i = 0; i < p->n; i++) {
        int64_t b, e;
        share_of_part(p, i, t, threads, &b, &e);
        bytes += b < e ? (size_t)(e - b) * tern_qpack_block_bytes(p->w[i]) : 0;
    }
    return bytes;
}

/* What the arena's bytes are made of besides the checkpoint's data: the packed matrices' names, shapes and
 * formats in arena order, the listed products, the thread layout and the arena's size. */
static uint64_t layout_key(const tern_weights *w, const tern_product *products, size_t n, int threads,
                           size_t total) {
    uint64_t k = tern_hash64(&total, sizeof total, (uint64_t)threads);
    for (size_t i = 0; i < w->n; i++) {
        if (!packable(w, i))
            continue;
        const tern_weight *x = &w->w[i];
        const tern_qpack_form fx = tern_qpack_form_of(x);
        const int64_t f[7] = {x->shape[0], x->shape[1], x->shape[2], fx.bits, fx.group, fx.sdtype, fx.origin};
        k = tern_hash64(f, sizeof f, tern_hash64(w->specs[i].name, strlen(w->specs[i].name), k));
    }
    for (size_t p = 0; p < n; p++)
        for (int i = 0; i < products[p].n; i++) {
            const char *name = products[p].w[i]->name ? products[p].w[i]->name : "";
            k = tern_hash64(name, strlen(name), k + p);
        }
    return k;
}

/* Packing fills the laid-out blocks in parallel: runs of blocks of one matrix, in arena order, shared out by the
 * pool; each thread's page faults on the checkpoint (reading it) overlap the others' packing. */
typedef struct fill_task {
    const tern_weight *w;
    int64_t b0, b1;
} fill_task;

typedef struct fill_job {
    const fill_task *tasks;
    size_t total_bytes;
    size_t done_bytes; /* atomic */
    double t0, next_report;
} fill_job;

static void fill_range(void *ctx, size_t begin, size_t end, int tid) {
    fill_job *j = ctx;
    for (size_t k = begin; k < end; k++) {
        const fill_task *f = &j->tasks[k];
        const tern_qpack *pk = f->w->qpack;
        for (int64_t b = f->b0; b < f->b1; b++)
            tern_qpack_block(f->w, b * 16, (uint8_t *)tern_qpack_block_data(pk, b));
        const size_t done =
            __atomic_add_fetch(&j->done_bytes, (size_t)(f->b1 - f->b0) * pk->block_bytes, __ATOMIC_RELAXED);
        if (tid == 0 && tern_now_s() >= j->next_report) {
            TLOG_INFO("packing the weights for the int8 kernels: %.0f%% (%.2f s)", 100.0 * (double)done / (double)j->total_bytes,
                      tern_now_s() - j->t0);
            j->next_report = tern_now_s() + 2.0;
        }
    }
}

static TERN_MUST_CHECK tern_err *fill_all(tern_weights *w, int threads, size_t total) {
    size_t n = 0, cap = 256;
    fill_task *tasks = malloc(cap * sizeof *tasks);
    tern_err *err = tasks ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < w->n && !err; i++) {
        const tern_qpack *pk = w->w[i].qpack;
        if (!pk)
            continue;
        const int64_t step = (int64_t)((size_t)4 << 20) / (int64_t)pk->block_bytes + 1; /* ~4 MiB a task */
        for (int64_t b = 0; b < pk->blocks && !err; b += step) {
            if (n == cap) {
                fill_task *g = realloc(tasks, (cap *= 2) * sizeof *tasks);
                if (!g) {
                    err = tern_errf(TERN_ENOMEM, "out of memory");
                    break;
                }
                tasks = g;
            }
            tasks[n++] = (fill_task){&w->w[i], b, b + step < pk->blocks ? b + step : pk->blocks};
        }
    }
    tern_pool *pool = NULL;
    if (!err && threads > 1)
        err = tern_pool_create(threads, &pool);
    if (!err) {
        fill_job j = {.tasks = tasks, .total_bytes = total, .t0 = tern_now_s(), .next_report = tern_now_s() + 2.0};
        if (pool)
            tern_pool_parallel_balanced(pool, n, 1, fill_range, &j);
        else
            fill_range(&j, 0, n, 0);
    }
    tern_pool_destroy(pool);
    free(tasks);
    return err;
}

tern_err *tern_weights_pack(tern_weights *w, const tern_product *products, size_t n,
                                   int threads, const char *cache_path, uint64_t source_key) {
    if (w->packed)
        return NULL;
    threads = threads < 1 ? 1 : threads;
    size_t total = 0;
    for (size_t i = 0; i < w->n; i++)
        if (packable(w, i))
            total += tern_qpack_bytes(&w->w[i]);
    if (!total)
        return NULL;
    /* The layout below is a function of the weights' shapes, the products and the threads alone, so bytes mapped
     * from a cache made with the same key lie where packing would put them. */
    const uint64_t key = source_key ^ layout_key(w, products, n, threads, total);
    if (cache_path && (w->packed = (uint8_t *)tern_pack_cache_map(cache_path, key, total)))
        w->pack_source = TERN_PACK_FROM_CACHE; /* read only: placing a packed matrix writes nothing */
    else if ((w->packed = tern_stream_alloc(total)))
        w->pack_source = TERN_PACK_PACKED;
    else
        return tern_errf(TERN_ENOMEM, "out of memory packing the weights (%zu MiB)", total >> 20);
    w->packed_bytes = total;
    /* Each thread's region holds its shares of the listed products in order; the rest follow. */
    uint8_t **cursor = calloc((size_t)threads, sizeof *cursor);
    char *split = calloc(n ? n : 1, 1);
    tern_err *err = cursor && split ? NULL : tern_errf(TERN_ENOMEM, "out of memory");
    size_t off = 0;
    for (size_t k = 0; k < n && !err; k++) /* decided before anything is laid out: layout marks matrices */
        split[k] = (char)splittable(w, &products[k]);
    for (int t = 0; t < threads && !err; t++) {
        cursor[t] = w->packed + off;
        for (size_t k = 0; k < n; k++)
            off += split[k] ? share_bytes(&products[k], t, threads) : 0;
    }
    for (size_t k = 0; k < n && !err; k++)
        if (split[k])
            err = place_split(&products[k], threads, cursor);
    for (size_t i = 0; i < w->n && !err; i++) {
        if (!packable(w, i))
            continue;
        tern_qpack *pk;
        if (!(err = tern_qpack_place(&w->w[i], w->packed + off, &pk))) {
            w->w[i].qpack = pk;
            off += tern_qpack_bytes(&w->w[i]);
        }
    }
    if (!err && w->pack_source == TERN_PACK_PACKED) {
        err = fill_all(w, threads, total);
        tern_err *e = !err && cache_path ? tern_pack_cache_save(cache_path, w->packed, total, key) : NULL;
        if (e) /* a cache that cannot be kept costs the next start its packing, nothing else */
            TLOG_WARN("%s", tern_err_msg(e));
        tern_err_free(e);
    }
    /* Products read only the packed copies now: the mapped codes and blocks can leave memory (the portable path
     * would fault them back in from the file). The tied head's stay: embedding lookups read them. */
    for (size_t i = 0; i < w->n && !err; i++) {
        const tern_weight *pw = &w->w[i];
        if (!pw->qpack || w->specs[i].kind == TERN_WK_EMBED ||
            (pw->fmt != TERN_WF_MLX_AFFINE && pw->fmt != TERN_WF_QBLOCK))
            continue;
        const int64_t cols = tern_weight_cols(pw);
        const size_t row_bytes = pw->fmt == TERN_WF_QBLOCK ? tern_qblock_row_bytes(pw->qblock, cols)
                                                           : (size_t)tern_mlx_row_words(cols, pw->bits) * 4;
        tern_mmap_release(pw->data, row_bytes * (size_t)tern_weight_rows(pw));
    }
    free(cursor);
    free(split);
    return err;
}

void tern_weights_free(tern_weights *w) {
    if (!w)
        return;
    for (size_t i = 0; w->w && i < w->n; i++)
        tern_qpack_free((tern_qpack *)w->w[i].qpack);
    if (w->pack_source == TERN_PACK_FROM_CACHE)
        tern_pack_cache_unmap(w->packed, w->packed_bytes);
    else
        tern_aligned_free(w->packed);
    for (size_t i = 0; i < w->n_problems; i++)
        free(w->problems[i]);
    for (size_t i = 0; i < w->n_extra; i++)
        free(w->extra[i]);
    for (size_t i = 0; i < w->n_floats; i++)
        free(w->floats[i]);
    free(w->floats);
    free(w->problems);
    free(w->extra);
    free(w->specs);
    free(w->w);
    free(w);
}

uint64_t tern_weights_decode_bytes(const tern_weights *w, double expert_share) {
    double total = 0;
    for (size_t i = 0; i < w->n; i++) {
        const tern_wspec *s = &w->specs[i];
        if (s->kind == TERN_WK_NORM || s->kind == TERN_WK_SCALE || s->kind == TERN_WK_BIAS ||
            (s->kind == TERN_WK_EMBED && !s->head))
            continue;
        double b = (double)tern_weight_bytes(&w->w[i]);
        if (s->kind == TERN_WK_EXPERTS)
            b *= expert_share;
        total += b;
    }
    return (uint64_t)total;
}

tern_err *tern_weights_pack_for(tern_weights *w, const tern_product *products, size_t n, int threads, const char *dir) {
    uint64_t source_key = 0;
    char *cache = tern_pack_cache_path(dir, threads, &source_key);
    const double t0 = tern_now_s();
    tern_err *err = tern_weights_pack(w, products, n, threads, cache, source_key);
    if (!err && w->pack_source != TERN_PACK_NONE)
        TLOG_INFO("%s: packed weights %s in %.2f s%s%s", dir,
                  w->pack_source == TERN_PACK_FROM_CACHE ? "mapped from the cache" : "made", tern_now_s() - t0,
                  cache ? " — " : " (no cache folder)", cache ? cache : "");
    if (!err && w->pack_source != TERN_PACK_NONE)
        tern_stream_choice_settle(w, threads);
    free(cache);
    return err;
}

const float *tern_weights_floats(tern_weights *w, const char *name) {
    const tern_weight *b = tern_weights_find(w, name);
    if (!b || b->fmt == TERN_WF_NONE)
        return NULL;
    float *v = malloc((size_t)tern_weight_cols(b) * sizeof *v);
    float **all = realloc(w->floats, (w->n_floats + 1) * sizeof *all);
    if (all)
        w->floats = all;
    if (!v || !all) {
        free(v);
        return NULL;
    }
    tern_weight_row(b, 0, v);
    w->floats[w->n_floats++] = v;
    return v;
}

void tern_weights_count_bytes(const tern_weights *w, const tern_checkpoint *ck, uint64_t *decoder, uint64_t *other) {
    *decoder = *other = 0;
    const char *prefix = tern_layout_prefix(w->layout);
    for (size_t i = 0; i < tern_checkpoint_count(ck); i++) {
        const tern_tensor *t = tern_checkpoint_at(ck, i);
        const int under = has_prefix(t->name, prefix);
        if (under || names_spec(w, t->name, 1))
            *decoder += t->nbytes;
        else
            *other += t->nbytes;
    }
}

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

void tern_weights_report_bytes(const tern_checkpoint *ck, FILE *out) {
    double by_dtype[TERN_DT_COUNT] = {0}, by_block[TERN_QB_COUNT] = {0}, total = 0;
    for (size_t i = 0; i < tern_checkpoint_count(ck); i++) {
        const tern_tensor *t = tern_checkpoint_at(ck, i);
        if (t->qblock)
            by_block[t->qblock] += (double)t->nbytes;
        else
            by_dtype[t->dtype] += (double)t->nbytes;
        total += (double)t->nbytes;
    }
    const size_t files = tern_checkpoint_file_count(ck);
    if (files)
        fprintf(out, "bytes:        %.3f GiB in %zu tensors, %zu file(s):", gib(total), tern_checkpoint_count(ck), files);
    else
        fprintf(out, "bytes:        %.3f GiB in %zu tensors, one GGUF file:", gib(total), tern_checkpoint_count(ck));
    for (int d = 1; d < TERN_DT_COUNT; d++)
        if (by_dtype[d] > 0)
            fprintf(out, " %s %.3f GiB", tern_dtype_name((tern_dtype)d), gib(by_dtype[d]));
    for (int b = 1; b < TERN_QB_COUNT; b++)
        if (by_block[b] > 0)
            fprintf(out, " %s %.3f GiB", tern_qblock_name((tern_qblock)b), gib(by_block[b]));
    fprintf(out, "\n");
}

void tern_weights_report_list(const tern_weights *w, FILE *out) {
    if (w->n_other)
        fprintf(out, "other:        %zu tensors outside the text decoder (towers)\n", w->n_other);
    for (size_t i = 0; i < w->n_extra; i++)
        fprintf(out, "extra:        %s\n", w->extra[i]);
    for (size_t i = 0; i < w->n_problems; i++)
        fprintf(out, "%s\n", w->problems[i]);
    fprintf(out, "tensors:      %zu needed, %zu bound, %s\n", w->n, w->n - w->n_problems,
            w->n_problems ? "INCOMPLETE" : "complete");
}
