/* ckpt_write.c — checkpoint weights from a row source (see ckpt_write.h). */
#include "models/ckpt_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "formats/st_sharded.h"
#include "tensor/quant_mlx.h"

static int nparts(const tern_out_tensor *t) { return t->quantized ? 3 : 1; }

static int quantizable_shape(int bits, int group, int64_t in) {
    tern_err *e = tern_mlx_check(bits, group, in);
    int ok = e == NULL;
    tern_err_free(e);
    return ok;
}

void tern_ckpt_plan(tern_out_tensor *t, const tern_wspec *s, tern_layout layout, const tern_quant_config *qc,
                    tern_dtype float_dtype, tern_dtype scale_dtype) {
    memset(t, 0, sizeof *t);
    t->spec = s;
    int quantizable = s->kind == TERN_WK_LINEAR || s->kind == TERN_WK_EMBED || s->kind == TERN_WK_EXPERTS;
    int64_t in = s->shape[s->ndim - 1];
    char module[160];
    snprintf(module, sizeof module, "%s%s", tern_layout_prefix(layout), s->name);
    tern_quant_params qp = tern_quant_config_lookup(qc, module);
    t->bits = qp.bits;
    t->group = qp.group_size;
    t->quantized = qp.quantized && qp.mode == TERN_QMODE_AFFINE && quantizable && s->suffix &&
                   quantizable_shape(qp.bits, qp.group_size, in);
    static const char *parts[3] = {"weight", "scales", "biases"};
    for (int k = 0; k < nparts(t); k++) {
        tern_st_spec *st = &t->parts[k];
        tern_wspec_full_name(s, layout, t->quantized ? parts[k] : NULL, t->names[k], sizeof t->names[k]);
        st->name = t->names[k];
        st->ndim = s->ndim;
        memcpy(st->shape, s->shape, sizeof s->shape);
        st->dtype = float_dtype;
        if (t->quantized) {
            st->dtype = k == 0 ? TERN_DT_U32 : scale_dtype;
            st->shape[s->ndim - 1] = k == 0 ? tern_mlx_row_words(in, t->bits) : in / t->group;
        }
    }
}

/* Tensor bytes go through a staging buffer so the writer sees large writes. */
typedef struct stager {
    tern_sharded_writer *w;
    unsigned char *buf;
    size_t used, cap;
} stager;

static TERN_MUST_CHECK tern_err *put(stager *sw, const void *data, size_t len) {
    if (sw->used + len > sw->cap) {
        TERN_TRY(tern_sharded_write(sw->w, sw->buf, sw->used));
        sw->used = 0;
        if (len > sw->cap)
            return tern_sharded_write(sw->w, data, len);
    }
    memcpy(sw->buf + sw->used, data, len);
    sw->used += len;
    return NULL;
}

/* f32 values -> n elements of dtype dt at dst. */
static void store(const float *x, int64_t n, tern_dtype dt, void *dst) {
    if (dt == TERN_DT_F32)
        memcpy(dst, x, (size_t)n * sizeof *x);
    else if (dt == TERN_DT_F16)
        tern_f32_to_f16_row(x, dst, (size_t)n);
    else
        tern_f32_to_bf16_row(x, dst, (size_t)n);
}

/* Writes part `part` of tensor `index`: its values (part 0), or a quantized tensor's scales (1) or biases (2),
 * which come from re-quantizing the rows rather than being held from part 0. */
static TERN_MUST_CHECK tern_err *write_part(stager *sw, const tern_out_tensor *t, size_t index, int part, tern_row_fn row_fn,
                            void *ctx) {
    const tern_wspec *s = t->spec;
    const int64_t in = s->shape[s->ndim - 1];
    int64_t rows = 1;
    for (int i = 0; i + 1 < s->ndim; i++)
        rows *= s->shape[i];
    const int64_t words = t->quantized ? tern_mlx_row_words(in, t->bits) : 0, groups = t->quantized ? in / t->group : 0;
    const tern_dtype sdt = t->quantized ? t->parts[1].dtype : TERN_DT_F32;
    const size_t ss = tern_dtype_size(sdt);
    float *x = malloc((size_t)in * sizeof *x);
    void *out = malloc((size_t)in * 4 + 16);
    unsigned char *sb = t->quantized ? malloc((size_t)groups * ss * 2 + 16) : NULL;
    tern_err *err = (!x || !out || (t->quantized && !sb)) ? tern_errf(TERN_ENOMEM, "out of memory writing %s", s->name)
                                                         : NULL;
    for (int64_t r = 0; r < rows && !err; r++) {
        err = row_fn(ctx, index, r, x);
        if (err)
            break;
        if (!t->quantized) {
            store(x, in, t->parts[0].dtype, out);
            err = put(sw, out, (size_t)in * tern_dtype_size(t->parts[0].dtype));
            continue;
        }
        tern_mlx_quantize_row(x, in, t->bits, t->group, sdt, out, sb, sb + (size_t)groups * ss);
        if (part == 0)
            err = put(sw, out, (size_t)words * 4);
        else
            err = put(sw, sb + (part == 2 ? (size_t)groups * ss : 0), (size_t)groups * ss);
    }
    free(x);
    free(out);
    free(sb);
    return err;
}

tern_err *tern_ckpt_write(const char *dir, const tern_out_tensor *ts, size_t n, const tern_raw_tensor *raw,
                          size_t n_raw, tern_row_fn row, void *ctx, uint64_t shard_bytes, const char *format) {
    /* Order: by element size, largest first (8, 4, 2, 1 bytes); within a size, tensors in list order. */
    tern_st_spec *specs = malloc((3 * n + n_raw + 1) * sizeof *specs);
    if (!specs)
        return tern_errf(TERN_ENOMEM, "out of memory");
    static const size_t sizes[] = {8, 4, 2, 1};
    size_t k = 0;
    for (int pass = 0; pass < 4; pass++) {
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < nparts(&ts[i]); j++)
                if (tern_dtype_size(ts[i].parts[j].dtype) == sizes[pass])
                    specs[k++] = ts[i].parts[j];
        for (size_t i = 0; i < n_raw; i++)
            if (tern_dtype_size(raw[i].spec.dtype) == sizes[pass])
                specs[k++] = raw[i].spec;
    }
    stager sw = {0};
    sw.cap = 4u << 20;
    sw.buf = malloc(sw.cap);
    tern_err *err = sw.buf ? tern_sharded_open(dir, specs, k, shard_bytes, format, &sw.w)
                           : tern_errf(TERN_ENOMEM, "out of memory");
    for (int pass = 0; pass < 4 && !err; pass++) {
        for (size_t i = 0; i < n && !err; i++)
            for (int j = 0; j < nparts(&ts[i]) && !err; j++)
                if (tern_dtype_size(ts[i].parts[j].dtype) == sizes[pass])
                    err = tern_err_wrap(write_part(&sw, &ts[i], i, j, row, ctx), "%s", ts[i].parts[j].name);
        for (size_t i = 0; i < n_raw && !err; i++)
            if (tern_dtype_size(raw[i].spec.dtype) == sizes[pass]) {
                uint64_t bytes = tern_dtype_size(raw[i].spec.dtype);
                for (int d = 0; d < raw[i].spec.ndim; d++)
                    bytes *= (uint64_t)raw[i].spec.shape[d];
                err = put(&sw, raw[i].data, (size_t)bytes);
            }
    }
    free(specs);
    if (!err && sw.used)
        err = tern_sharded_write(sw.w, sw.buf, sw.used);
    if (sw.w) {
        tern_err *ce = tern_sharded_close(sw.w);
        if (!err)
            err = ce;
        else
            tern_err_free(ce);
    }
    free(sw.buf);
    return tern_err_wrap(err, "%s", dir);
}
