/* tower.c — the encoder towers' shared reading, clippable linears and synthetic tensors (see tower.h). */
#include "models/tower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/hash.h"
#include "tensor/ops.h"

void tern_tower_src_free(tern_tower_src *s) {
    for (size_t i = 0; i < s->n_owned; i++)
        free(s->owned[i]);
    free(s->owned);
    s->owned = NULL;
    s->n_owned = 0;
}

void tern_tower_name(const tern_tower_src *s, const char *rel, char *buf, size_t len) {
    snprintf(buf, len, "%s%s", s->mlx ? "" : "model.", rel);
}

tern_err *tern_tower_read(const tern_tower_src *s, const char *rel, size_t n, float *out) {
    char name[256];
    tern_tower_name(s, rel, name, sizeof name);
    const tern_tensor *t = tern_checkpoint_find(s->ck, name);
    if (!t)
        return tern_errf(TERN_EFORMAT, "%s: missing tensor %s", s->what, name);
    if ((size_t)t->numel != n)
        return tern_errf(TERN_EFORMAT, "%s: %s holds %lld values, expected %zu", s->what, name, (long long)t->numel, n);
    if (t->dtype != TERN_DT_F32 && t->dtype != TERN_DT_BF16 && t->dtype != TERN_DT_F16)
        return tern_errf(TERN_EFORMAT, "%s: %s is %s, expected F32/F16/BF16", s->what, name, tern_dtype_name(t->dtype));
    const unsigned char *p = t->data;
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == TERN_DT_F32) {
            memcpy(&out[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == TERN_DT_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
        }
    }
    return NULL;
}

tern_err *tern_tower_floats(tern_tower_src *s, const char *rel, size_t n, float **out) {
    float **v = realloc(s->owned, (s->n_owned + 1) * sizeof *v);
    if (!v)
        return tern_errf(TERN_ENOMEM, "out of memory");
    s->owned = v;
    if (!(*out = calloc(n ? n : 1, sizeof **out)))
        return tern_errf(TERN_ENOMEM, "out of memory");
    s->owned[s->n_owned++] = *out;
    return rel ? tern_tower_read(s, rel, n, *out) : NULL;
}

tern_err *tern_tower_matrix(const tern_tower_src *s, const char *rel, int64_t out, int64_t in, tern_weight *w) {
    tern_wspec sp = {.suffix = 1, .rooted = 1, .kind = TERN_WK_LINEAR, .ndim = 2, .shape = {out, in}};
    tern_tower_name(s, rel, sp.name, sizeof sp.name);
    char why[400];
    tern_weights_bind_one(&sp, TERN_LAYOUT_HF, s->qc, s->ck, w, why, sizeof why);
    return why[0] ? tern_errf(TERN_EFORMAT, "%s: %s", s->what, why) : NULL;
}

tern_err *tern_tower_clipped(const tern_tower_src *s, const char *rel, int64_t out, int64_t in, int clipped,
                             tern_clin *l) {
    char r[200];
    snprintf(r, sizeof r, "%s.linear", rel);
    tern_err *err = tern_tower_matrix(s, r, out, in, &l->w);
    float *b[4] = {&l->in_lo, &l->in_hi, &l->out_lo, &l->out_hi};
    static const char *names[4] = {"input_min", "input_max", "output_min", "output_max"};
    for (int i = 0; i < 4 && !err; i++) {
        *b[i] = i % 2 ? INFINITY : -INFINITY;
        if (!clipped)
            continue;
        char full[256];
        snprintf(r, sizeof r, "%s.%s", rel, names[i]);
        tern_tower_name(s, r, full, sizeof full);
        if (tern_checkpoint_find(s->ck, full))
            err = tern_tower_read(s, r, 1, b[i]);
    }
    return err;
}

void tern_tower_par(tern_pool *pool, int64_t rows, tern_range_fn fn, void *job) {
    if (pool && rows > 1)
        tern_pool_parallel_for(pool, (size_t)rows, 1, fn, job);
    else
        fn(job, 0, (size_t)rows, 0);
}

/* dst = src clamped to [lo, hi] (dst may be src). */
static void clamp(const float *src, float *dst, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) {
        float v = src[i] < lo ? lo : src[i];
        dst[i] = v > hi ? hi : v;
    }
}

typedef struct clamp_job {
    const float *src;
    float *dst;
    int64_t n;
    float lo, hi;
} clamp_job;

static void clamp_range(void *ctx, size_t b, size_t e, int tid) {
    const clamp_job *j = ctx;
    for (size_t r = b; r < e; r++)
        clamp(j->src + r * j->n, j->dst + r * j->n, j->n, j->lo, j->hi);
}

int tern_clin_run(tern_pool *pool, const tern_clin *l, const float *x, int64_t T, float *tmp, float *y) {
    const int64_t in = tern_weight_cols(&l->w), out = tern_weight_rows(&l->w);
    const float *src = x;
    if (isfinite(l->in_lo) || isfinite(l->in_hi)) {
        clamp_job j = {x, tmp, in, l->in_lo, l->in_hi};
        tern_tower_par(pool, T, clamp_range, &j);
        src = tmp;
    }
    if (tern_matmul(pool, &l->w, src, T, y, TERN_MM_PREFILL))
        return -1;
    if (isfinite(l->out_lo) || isfinite(l->out_hi)) {
        clamp_job j = {y, y, out, l->out_lo, l->out_hi};
        tern_tower_par(pool, T, clamp_range, &j);
    }
    return 0;
}

/* ---- synthetic towers -------------------------------------------------------------------------------- */

static float synth_normal(uint64_t *s) {
    uint64_t r = tern_splitmix64(s);
    float u = (float)((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) * (1.0f / 65536.0f);
    return (u - 2.0f) * 1.7320508f;
}

void tern_tower_synth_linear(tern_tower_synth *A, const char *rel, int64_t out, int64_t in) {
    if (A->failed)
        return;
    if (A->n_specs == A->cap_specs) {
        size_t cap = A->cap_specs ? 2 * A->cap_specs : 64;
        tern_wspec *v = realloc(A->specs, cap * sizeof *v);
        if (!v) {
            A->failed = 1;
            return;
        }
        A->specs = v, A->cap_specs = cap;
    }
    tern_wspec *s = &A->specs[A->n_specs++];
    *s = (tern_wspec){.suffix = 1, .rooted = 1, .kind = TERN_WK_LINEAR, .ndim = 2, .shape = {out, in}};
    snprintf(s->name, sizeof s->name, "%s%s", A->mlx ? "" : "model.", rel);
}

void tern_tower_synth_raw(tern_tower_synth *A, const char *rel, int ndim, const int64_t *shape, float mean,
                          float std) {
    if (A->failed)
        return;
    if (A->n_raw == A->cap_raw) {
        size_t cap = A->cap_raw ? 2 * A->cap_raw : 256;
        tern_raw_tensor *r = realloc(A->raw, cap * sizeof *r);
        if (r)
            A->raw = r;
        char(*nm)[200] = r ? realloc(A->names, cap * sizeof *nm) : NULL;
        if (nm)
            A->names = nm;
        float **d = nm ? realloc(A->data, cap * sizeof *d) : NULL;
        if (!d) {
            A->failed = 1;
            return;
        }
        A->data = d, A->cap_raw = cap;
    }
    size_t i = A->n_raw, n = 1;
    snprintf(A->names[i], sizeof A->names[i], "%s%s", A->mlx ? "" : "model.", rel);
    tern_st_spec sp = {.name = NULL, .dtype = TERN_DT_F32, .ndim = ndim};
    for (int k = 0; k < ndim; k++)
        n *= (size_t)(sp.shape[k] = shape[k]);
    float *x = malloc(n * sizeof *x);
    if (!x) {
        A->failed = 1;
        return;
    }
    uint64_t st = tern_hash64(rel, strlen(rel), A->seed); /* by the name below the root: the same in either layout */
    for (size_t k = 0; k < n; k++)
        x[k] = mean + std * synth_normal(&st);
    A->data[i] = x;
    A->raw[i] = (tern_raw_tensor){.spec = sp, .data = x};
    A->n_raw++;
}

void tern_tower_synth_clipped(tern_tower_synth *A, const char *rel, int64_t out, int64_t in, float bound) {
    char r[200];
    snprintf(r, sizeof r, "%s.linear", rel);
    tern_tower_synth_linear(A, r, out, in);
    static const char *const bn[4] = {"input_min", "input_max", "output_min", "output_max"};
    for (int b = 0; b < 4; b++) {
        snprintf(r, sizeof r, "%s.%s", rel, bn[b]);
        tern_tower_synth_raw(A, r, 0, NULL, b % 2 ? bound : -bound, 2.0f);
    }
}

tern_err *tern_tower_synth_finish(tern_tower_synth *A, tern_wspec **specs, size_t *n_specs, tern_raw_tensor **raw,
                                  size_t *n_raw) {
    if (A->failed) {
        tern_tower_synth_free(A);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < A->n_raw; i++)
        A->raw[i].spec.name = A->names[i];
    *specs = A->specs, *n_specs = A->n_specs;
    *raw = A->raw, *n_raw = A->n_raw;
    return NULL;
}

void tern_tower_synth_free(tern_tower_synth *A) {
    if (!A)
        return;
    for (size_t i = 0; i < A->n_raw; i++)
        free(A->data[i]);
    free(A->data);
    free(A->names);
    free(A->raw);
    free(A->specs);
    free(A);
}
