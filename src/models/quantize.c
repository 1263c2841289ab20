/* quantize.c — float checkpoint -> MLX affine checkpoint (see quantize.h). */
#include "models/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/ckpt_write.h"
#include "models/gemma4_config.h"
#include "models/gemma4_weights.h"
#include "models/model.h"
#include "tensor/ops.h"

/* Where each output row comes from: a source weight and a row offset (HF stacks gate and up per expert). */
typedef struct row_src {
    const tern_weight *w;
    int64_t rows_per_block; /* output rows per expert block (0: rows map one to one) */
    int64_t block_stride;   /* source rows per expert block */
    int64_t offset;         /* first source row within a block */
} row_src;

typedef struct quant_rows {
    row_src *src;
} quant_rows;

static TERN_MUST_CHECK tern_err *source_row(void *ctx, size_t index, int64_t row, float *out) {
    const row_src *s = &((const quant_rows *)ctx)->src[index];
    int64_t r = row;
    if (s->rows_per_block)
        r = (row / s->rows_per_block) * s->block_stride + s->offset + row % s->rows_per_block;
    tern_weight_row(s->w, r, out);
    return NULL;
}

static tern_dtype float_dtype_of(const tern_weight *w) {
    return w->fmt == TERN_WF_F32 ? TERN_DT_F32 : w->fmt == TERN_WF_F16 ? TERN_DT_F16 : TERN_DT_BF16;
}

/* Resolves the source of output tensor `name` (in the MLX naming) among the bound source weights. */
static TERN_MUST_CHECK tern_err *find_source(const tern_weights *gw, const tern_gemma4_config *c, const char *name, row_src *s) {
    memset(s, 0, sizeof *s);
    const char *sw = strstr(name, "experts.switch_glu.");
    if (sw && gw->layout == TERN_LAYOUT_HF) {
        char base[128];
        snprintf(base, sizeof base, "%.*sexperts.%s", (int)(sw - name), name,
                 strstr(sw, "down_proj") ? "down_proj" : "gate_up_proj");
        s->w = tern_weights_find(gw, base);
        if (!strstr(sw, "down_proj")) { /* gate rows first, then up, per expert */
            s->rows_per_block = c->moe_intermediate_size;
            s->block_stride = 2 * c->moe_intermediate_size;
            s->offset = strstr(sw, "up_proj") ? c->moe_intermediate_size : 0;
        }
    } else {
        s->w = tern_weights_find(gw, name);
    }
    if (!s->w || s->w->fmt == TERN_WF_NONE)
        return tern_errf(TERN_ENOTFOUND, "no source tensor for %s", name);
    if (s->w->fmt != TERN_WF_F32 && s->w->fmt != TERN_WF_BF16 && s->w->fmt != TERN_WF_F16)
        return tern_errf(TERN_EINVAL, "%s is already quantized: quantize takes a float (f32/bf16/f16) checkpoint",
                         s->w->name);
    return NULL;
}

static TERN_MUST_CHECK tern_err *copy_side_files(const char *in_dir, const char *out_dir) {
    static const char *files[] = {"tokenizer.json",          "tokenizer_config.json",  "chat_template.jinja",
                                  "generation_config.json",  "special_tokens_map.json", "preprocessor_config.json",
                                  "processor_config.json",   "tokenizer.model"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *src = tern_path_join(in_dir, files[i]), *dst = tern_path_join(out_dir, files[i]);
        tern_err *e = (!src || !dst) ? tern_errf(TERN_ENOMEM, "out of memory") : NULL;
        if (!e && tern_is_file(src)) {
            char *buf;
            size_t len;
            e = tern_read_file(src, (size_t)1 << 31, &buf, &len);
            if (!e) {
                e = tern_write_file(dst, buf, len);
                free(buf);
            }
        }
        free(src);
        free(dst);
        TERN_TRY(e);
    }
    return NULL;
}

tern_err *tern_quantize_model(const char *in_dir, const char *out_dir, int bits, int group, uint64_t shard_bytes) {
    if (bits != 4 && bits != 8)
        return tern_errf(TERN_EINVAL, "--bits must be 4 or 8, got %d", bits);
    if (group != 32 && group != 64 && group != 128)
        return tern_errf(TERN_EINVAL, "--group must be 32, 64 or 128, got %d", group);
    char *cfg_path = tern_path_join(in_dir, "config.json");
    json_t *root = NULL;
    tern_gemma4_config c = {0};
    tern_quant_config *src_qc = NULL, *qc = NULL;
    tern_checkpoint *ck = NULL;
    tern_weights *gw = NULL;
    tern_wspec *specs = NULL;
    tern_out_tensor *plan = NULL;
    row_src *src = NULL;
    tern_raw_tensor *raw = NULL;
    size_t n = 0, n_raw = 0;
    tern_err *err = cfg_path ? tern_json_load_file(cfg_path, 16u << 20, &root) : tern_errf(TERN_ENOMEM, "oom");
    /* A family that lists its tensors from the config alone (the dense ones) is read and written in the "model."
     * layout; Gemma 4 is read in its own layout and written in mlx-vlm's. */
    const tern_arch *arch = err ? NULL : tern_arch_find(json_string_value(json_object_get(root, "model_type")) ?
                                                        json_string_value(json_object_get(root, "model_type")) : "");
    const int listed = arch && arch->config_specs;
    const tern_layout out_layout = listed ? TERN_LAYOUT_MLX_LM : TERN_LAYOUT_MLX_VLM;
    if (!err && !listed)
        err = tern_err_wrap(tern_gemma4_config_parse(root, &c), "%s", cfg_path);
    if (!err)
        err = tern_quant_config_parse(root, &src_qc);
    if (!err && tern_quant_config_present(src_qc))
        err = tern_errf(TERN_EINVAL, "%s is already quantized (config.json has a quantization section)", in_dir);
    if (!err)
        err = tern_checkpoint_open(in_dir, &ck);
    if (!err && listed) {
        tern_wspec *in_specs = NULL;
        err = tern_err_wrap(arch->config_specs(root, &in_specs, &n), "%s", cfg_path);
        if (!err)
            err = tern_weights_bind(in_specs, n, TERN_LAYOUT_MLX_LM, src_qc, ck, &gw);
    } else if (!err) {
        err = tern_gemma4_bind(&c, src_qc, ck, &gw);
    }
    if (!err && gw->n_problems)
        err = tern_errf(TERN_EFORMAT, "%s: %s (run 'tern info %s')", in_dir, gw->problems[0], in_dir);
    /* The output config: the input's, with MLX's quantization section. */
    if (!err) {
        json_t *q = json_pack("{s:i,s:i,s:s}", "group_size", group, "bits", bits, "mode", "affine");
        json_object_set(root, "quantization", q);
        json_object_set_new(root, "quantization_config", q);
        err = tern_quant_config_parse(root, &qc);
    }
    if (!err)
        err = listed ? arch->config_specs(root, &specs, &n) : tern_gemma4_specs(&c, out_layout, &specs, &n);
    if (!err && (!(plan = calloc(n, sizeof *plan)) || !(src = calloc(n, sizeof *src))))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !err; i++) {
        err = find_source(gw, &c, specs[i].name, &src[i]);
        if (!err) {
            tern_dtype fdt = float_dtype_of(src[i].w);
            tern_ckpt_plan(&plan[i], &specs[i], out_layout, qc, fdt, fdt);
        }
    }
    /* Everything outside the text decoder (towers) is copied as stored. */
    const char *prefix = tern_layout_prefix(gw ? gw->layout : TERN_LAYOUT_HF);
    size_t nt = ck ? tern_checkpoint_count(ck) : 0;
    if (!err && !(raw = calloc(nt + 1, sizeof *raw)))
        err = tern_errf(TERN_ENOMEM, "out of memory");
    for (size_t i = 0; i < nt && !err; i++) {
        const tern_tensor *t = tern_checkpoint_at(ck, i);
        int planned = !strncmp(t->name, prefix, strlen(prefix));
        for (size_t k = 0; k < n && !planned; k++) { /* a rooted tensor of the list (an untied lm_head) */
            char full[256];
            tern_wspec_full_name(&specs[k], out_layout, NULL, full, sizeof full);
            planned = specs[k].rooted && !strcmp(full, t->name);
        }
        if (planned)
            continue;
        tern_raw_tensor *r = &raw[n_raw++];
        r->spec.name = t->name;
        r->spec.dtype = t->dtype;
        r->spec.ndim = t->ndim;
        memcpy(r->spec.shape, t->shape, sizeof t->shape);
        r->data = t->data;
    }
    quant_rows qr = {src};
    if (!err)
        err = tern_ckpt_write(out_dir, plan, n, raw, n_raw, source_row, &qr, shard_bytes, "mlx");
    if (!err) {
        char *out_cfg = tern_path_join(out_dir, "config.json");
        err = out_cfg ? tern_json_save_file(root, out_cfg) : tern_errf(TERN_ENOMEM, "out of memory");
        free(out_cfg);
    }
    if (!err)
        err = copy_side_files(in_dir, out_dir);
    free(raw);
    free(src);
    free(plan);
    free(specs);
    tern_weights_free(gw);
    tern_checkpoint_close(ck);
    tern_quant_config_free(qc);
    tern_quant_config_free(src_qc);
    json_decref(root);
    free(cfg_path);
    return err;
}
