/* quant_config.c — parses config.json's quantization section (see quant_config.h for the semantics) and answers
 * per-module lookups. Overrides are kept twice sorted — by full path and by path without its leading prefix —
 * so a lookup is two binary searches even for mixed-precision checkpoints with an entry for every layer. */
#include "formats/quant_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/json_util.h"
#include "tensor/quant_mlx.h"

typedef struct quant_override {
    char *path;       /* the key as written in config.json */
    const char *core; /* path without its leading prefix (points into path) */
    size_t order;     /* position in the file, to make prefix-insensitive matches deterministic */
    tern_quant_params params;
} quant_override;

struct tern_quant_config {
    int present;
    tern_quant_params global;
    size_t n;
    quant_override *by_path; /* sorted by path */
    quant_override **by_core; /* sorted by (core, order) */
};

/* ---------------------------------------------------------------- module paths */

/* Prefixes real checkpoints put before the text model's modules: mlx-vlm writes "language_model.model.X",
 * Hugging Face "model.language_model.X", text-only converters "model.X". Longest first. */
static const char *const module_prefixes[] = {"model.language_model.", "language_model.model.", "language_model.",
                                              "model."};

static const char *path_core(const char *path) {
    for (size_t i = 0; i < sizeof module_prefixes / sizeof module_prefixes[0]; i++) {
        size_t n = strlen(module_prefixes[i]);
        if (strncmp(path, module_prefixes[i], n) == 0)
            return path + n;
    }
    return path;
}

/* ---------------------------------------------------------------- parameter objects */

const char *tern_quant_mode_name(int mode) {
    switch (mode) {
    case TERN_QMODE_AFFINE: return "affine";
    case TERN_QMODE_MXFP4: return "mxfp4";
    default: return "?";
    }
}

static TERN_MUST_CHECK tern_err *parse_mode(const json_t *obj, int *mode) {
    json_t *v = json_object_get(obj, "mode");
    *mode = TERN_QMODE_AFFINE;
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v))
        return tern_errf(TERN_EFORMAT, "\"mode\" must be a string");
    const char *s = json_string_value(v);
    if (strcmp(s, "affine") == 0) {
        *mode = TERN_QMODE_AFFINE;
        return NULL;
    }
    if (strcmp(s, "mxfp4") == 0) {
        *mode = TERN_QMODE_MXFP4;
        return NULL;
    }
    if (strcmp(s, "nvfp4") == 0 || strcmp(s, "mxfp8") == 0)
        return tern_errf(TERN_EUNSUPPORTED, "\"mode\" \"%s\" is not supported (expected \"affine\" or \"mxfp4\")", s);
    return tern_errf(TERN_EFORMAT, "\"mode\" \"%.64s\" is unknown (expected \"affine\" or \"mxfp4\")", s);
}

/* Reads bits / group_size / mode from `obj`; missing values take the mode's defaults (as MLX's
 * _defaults_for_mode). Unknown keys are refused when `strict` (an override object is passed to MLX's
 * to_quantized as keyword arguments, which refuses them too). */
static TERN_MUST_CHECK tern_err *parse_params(const json_t *obj, int strict, tern_quant_params *p) {
    int mode;
    TERN_TRY(parse_mode(obj, &mode));
    int64_t dflt_bits = 4, dflt_group = mode == TERN_QMODE_MXFP4 ? 32 : 64;
    int64_t bits, group;
    TERN_TRY(tern_json_get_int(obj, "bits", dflt_bits, INT32_MIN, INT32_MAX, &bits));
    TERN_TRY(tern_json_get_int(obj, "group_size", dflt_group, INT32_MIN, INT32_MAX, &group));
    if (mode == TERN_QMODE_MXFP4) {
        if (bits != 4)
            return tern_errf(TERN_EUNSUPPORTED, "\"bits\" = %lld is not supported with mode \"mxfp4\" (expected 4)",
                             (long long)bits);
        if (group != 32)
            return tern_errf(TERN_EUNSUPPORTED,
                             "\"group_size\" = %lld is not supported with mode \"mxfp4\" (expected 32)",
                             (long long)group);
    } else {
        if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8)
            return tern_errf(TERN_EUNSUPPORTED, "\"bits\" = %lld is not supported (expected 2, 3, 4, 5, 6 or 8)",
                             (long long)bits);
        if (group < 8 || group > (1 << 20) || (group & (group - 1)) != 0)
            return tern_errf(TERN_EUNSUPPORTED,
                             "\"group_size\" = %lld is not supported (expected 32, 64 or 128, or another power of "
                             "two >= 8)",
                             (long long)group);
    }
    if (strict) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)obj, key, v) {
            if (strcmp(key, "bits") != 0 && strcmp(key, "group_size") != 0 && strcmp(key, "mode") != 0)
                return tern_errf(TERN_EFORMAT, "unknown key \"%.128s\" (expected \"bits\", \"group_size\", \"mode\")",
                                 key);
        }
    }
    p->quantized = 1;
    p->bits = (int)bits;
    p->group_size = (int)group;
    p->mode = mode;
    return NULL;
}

/* ---------------------------------------------------------------- the section */

static int cmp_by_path(const void *a, const void *b) {
    return strcmp(((const quant_override *)a)->path, ((const quant_override *)b)->path);
}

static int cmp_by_core(const void *a, const void *b) {
    const quant_override *x = *(const quant_override *const *)a, *y = *(const quant_override *const *)b;
    int c = strcmp(x->core, y->core);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

void tern_quant_config_free(tern_quant_config *qc) {
    if (!qc)
        return;
    for (size_t i = 0; i < qc->n; i++)
        free(qc->by_path[i].path);
    free(qc->by_path);
    free(qc->by_core);
    free(qc);
}

/* Finds the section: "quantization", else "quantization_config", at the top level, then in text_config. */
static const json_t *find_section(const json_t *root, const char **name) {
    static const char *const keys[] = {"quantization", "quantization_config"};
    static const char *const nested[] = {"text_config.quantization", "text_config.quantization_config"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(root, keys[i]);
        if (v && !json_is_null(v)) {
            *name = keys[i];
            return v;
        }
    }
    const json_t *text = json_object_get(root, "text_config");
    if (json_is_object(text)) {
        for (int i = 0; i < 2; i++) {
            const json_t *v = json_object_get(text, keys[i]);
            if (v && !json_is_null(v)) {
                *name = nested[i];
                return v;
            }
        }
    }
    return NULL;
}

/* A Hugging Face style section ({"quant_method": ...}): only mxfp4 maps onto what tern reads. */
static TERN_MUST_CHECK tern_err *parse_hf_section(const json_t *sec, tern_quant_config *qc) {
    const json_t *m = json_object_get(sec, "quant_method");
    if (!json_is_string(m))
        return tern_errf(TERN_EFORMAT, "\"quant_method\" must be a string");
    if (strcmp(json_string_value(m), "mxfp4") != 0)
        return tern_errf(TERN_EUNSUPPORTED,
                         "\"quant_method\" \"%.64s\" is not supported (tern reads MLX affine and mxfp4 checkpoints; "
                         "convert with mlx_lm.convert)",
                         json_string_value(m));
    qc->global = (tern_quant_params){.quantized = 1, .bits = 4, .group_size = 32, .mode = TERN_QMODE_MXFP4};
    return NULL;
}

static TERN_MUST_CHECK tern_err *parse_section(const json_t *sec, tern_quant_config *qc) {
    if (json_object_get(sec, "quant_method"))
        return parse_hf_section(sec, qc);
    TERN_TRY(parse_params(sec, 0, &qc->global));

    size_t cap = json_object_size(sec);
    qc->by_path = calloc(cap ? cap : 1, sizeof *qc->by_path);
    if (!qc->by_path)
        return tern_errf(TERN_ENOMEM, "out of memory for %zu quantization entries", cap);
    const char *key;
    json_t *v;
    size_t order = 0;
    json_object_foreach((json_t *)sec, key, v) {
        if (strcmp(key, "bits") == 0 || strcmp(key, "group_size") == 0 || strcmp(key, "mode") == 0)
            continue;
        tern_quant_params p = {0};
        if (json_is_object(v)) {
            tern_err *e = parse_params(v, 1, &p);
            if (e)
                return tern_err_wrap(e, "module \"%.200s\"", key);
        } else if (json_is_false(v)) {
            p.quantized = 0;
        } else if (json_is_true(v)) {
            p = qc->global; /* MLX: a predicate of True quantizes with the global parameters */
        } else {
            return tern_errf(TERN_EFORMAT, "module \"%.200s\": entry must be an object of bits/group_size or false, "
                                           "found %s",
                             key, tern_json_type_name(v));
        }
        quant_override *o = &qc->by_path[qc->n];
        o->path = strdup(key);
        if (!o->path)
            return tern_errf(TERN_ENOMEM, "out of memory for quantization entry \"%.200s\"", key);
        o->core = path_core(o->path);
        o->order = order++;
        o->params = p;
        qc->n++;
    }
    /* Sort after all entries exist, so the core pointers (into each path string) stay valid. */
    qsort(qc->by_path, qc->n, sizeof *qc->by_path, cmp_by_path);
    qc->by_core = malloc((qc->n ? qc->n : 1) * sizeof *qc->by_core);
    if (!qc->by_core)
        return tern_errf(TERN_ENOMEM, "out of memory for %zu quantization entries", qc->n);
    for (size_t i = 0; i < qc->n; i++)
        qc->by_core[i] = &qc->by_path[i];
    qsort(qc->by_core, qc->n, sizeof *qc->by_core, cmp_by_core);
    return NULL;
}

tern_err *tern_quant_config_parse(const json_t *config_root, tern_quant_config **out) {
    *out = NULL;
    if (!json_is_object(config_root))
        return tern_errf(TERN_EFORMAT, "config: expected a JSON object at the top level");
    tern_quant_config *qc = calloc(1, sizeof *qc);
    if (!qc)
        return tern_errf(TERN_ENOMEM, "out of memory for the quantization config");
    const char *name = NULL;
    const json_t *sec = find_section(config_root, &name);
    if (!sec) {
        *out = qc;
        return NULL;
    }
    tern_err *e = NULL;
    if (!json_is_object(sec))
        e = tern_errf(TERN_EFORMAT, "must be an object, found %s", tern_json_type_name(sec));
    else
        e = parse_section(sec, qc);
    if (e) {
        tern_quant_config_free(qc);
        return tern_err_wrap(e, "config \"%s\"", name);
    }
    qc->present = 1;
    *out = qc;
    return NULL;
}

/* ---------------------------------------------------------------- lookups */

int tern_quant_config_present(const tern_quant_config *qc) { return qc && qc->present; }

size_t tern_quant_config_override_count(const tern_quant_config *qc) { return qc ? qc->n : 0; }

tern_quant_params tern_quant_config_lookup(const tern_quant_config *qc, const char *module_path) {
    tern_quant_params none = {0};
    if (!qc || !qc->present)
        return none;
    if (!module_path)
        return qc->global;

    /* Exact path. */
    size_t lo = 0, hi = qc->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(qc->by_path[mid].path, module_path);
        if (c == 0)
            return qc->by_path[mid].params;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }

    /* Same module under another prefix: the first entry (in file order) with the same core. */
    const char *core = path_core(module_path);
    lo = 0, hi = qc->n;
    while (lo < hi) { /* lower bound of core */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(qc->by_core[mid]->core, core) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < qc->n && strcmp(qc->by_core[lo]->core, core) == 0)
        return qc->by_core[lo]->params;
    return qc->global;
}

/* ---------------------------------------------------------------- shape inference */

tern_err *tern_quant_infer(int64_t in, int64_t weight_cols_u32, int64_t scale_cols, int *bits, int *group) {
    if (in <= 0 || weight_cols_u32 <= 0 || scale_cols <= 0)
        return tern_errf(TERN_EFORMAT,
                         "cannot infer quantization from sizes in = %lld, weight columns = %lld, scale columns = %lld "
                         "(all must be positive)",
                         (long long)in, (long long)weight_cols_u32, (long long)scale_cols);
    if (weight_cols_u32 > INT64_MAX / 32 || (32 * weight_cols_u32) % in != 0)
        return tern_errf(TERN_EFORMAT,
                         "cannot infer quantization bits: %lld uint32 columns do not hold a whole number of bits for "
                         "each of %lld inputs",
                         (long long)weight_cols_u32, (long long)in);
    if (in % scale_cols != 0)
        return tern_errf(TERN_EFORMAT, "cannot infer quantization group size: %lld inputs over %lld scale columns",
                         (long long)in, (long long)scale_cols);
    int64_t b = 32 * weight_cols_u32 / in, g = in / scale_cols;
    if (b > 32 || g > INT32_MAX)
        return tern_errf(TERN_EFORMAT, "cannot infer quantization: %lld bits, group size %lld are out of range",
                         (long long)b, (long long)g);
    tern_err *e = tern_mlx_check((int)b, (int)g, in);
    if (e)
        return tern_err_wrap(e, "inferred from tensor shapes");
    *bits = (int)b;
    *group = (int)g;
    return NULL;
}
