/* vision_encoder.c — the vision tower table (see vision_encoder.h). */
#include "models/vision_encoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/json_util.h"
#include "formats/gguf.h"

static const tern_vision_arch *const archs[] = {&tern_vision_arch_gemma4};

struct tern_vision_enc {
    const tern_vision_arch *arch;
    void *impl;
};

static TERN_MUST_CHECK tern_err *wrap(const tern_vision_arch *arch, void *impl, tern_vision_enc **out) {
    tern_vision_enc *e = calloc(1, sizeof *e);
    if (!e) {
        arch->free(impl);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    e->arch = arch;
    e->impl = impl;
    *out = e;
    return NULL;
}

tern_err *tern_vision_enc_load(const char *dir, tern_vision_enc **out) {
    *out = NULL;
    json_t *root = NULL;
    tern_err *err = tern_json_load_in(dir, "config.json", 16u << 20, &root);
    if (err)
        return err;
    const json_t *vc = json_object_get(root, "vision_config");
    if (!json_is_object(vc)) {
        json_decref(root);
        return NULL;
    }
    const char *type = json_string_value(json_object_get(vc, "model_type"));
    const tern_vision_arch *arch = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (type && !strcmp(type, archs[i]->model_type))
            arch = archs[i];
    void *impl = NULL;
    if (!arch)
        err = tern_errf(TERN_EUNSUPPORTED, "%s: vision_config.model_type '%s' has no vision tower in this build "
                        "(known: %s)", dir, type ? type : "(none)", tern_vision_arch_gemma4.model_type);
    else
        err = arch->load(dir, root, &impl);
    json_decref(root);
    return err ? err : wrap(arch, impl, out);
}

tern_err *tern_vision_enc_load_gguf(const char *file, tern_vision_enc **out) {
    *out = NULL;
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(file, &g));
    /* Files with both towers name each one's projector; older single-tower files only clip.projector_type. */
    char *type = NULL;
    tern_err *err = tern_gguf_get_str_dup(g, "clip.vision.projector_type", &type);
    if (err && tern_gguf_find(g, "clip.has_vision_encoder") >= 0) {
        tern_err_free(err);
        err = tern_gguf_get_str_dup(g, "clip.projector_type", &type);
    }
    if (err) {
        tern_gguf_close(g);
        tern_err_free(err);
        return tern_errf(TERN_EUNSUPPORTED, "%s: no vision tower in this file (no clip.vision.projector_type)", file);
    }
    const tern_vision_arch *arch = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(type, archs[i]->gguf_projector))
            arch = archs[i];
    if (!arch) {
        err = tern_errf(TERN_EUNSUPPORTED, "%s: vision projector type \"%s\" has no vision tower in this build "
                        "(known: %s)", file, type, tern_vision_arch_gemma4.gguf_projector);
        free(type);
        tern_gguf_close(g);
        return err;
    }
    free(type);
    void *impl = NULL;
    TERN_TRY(arch->load_gguf(g, &impl));
    return wrap(arch, impl, out);
}

void tern_vision_enc_free(tern_vision_enc *e) {
    if (!e)
        return;
    e->arch->free(e->impl);
    free(e);
}

int64_t tern_vision_enc_dim(const tern_vision_enc *e) { return e->arch->dim(e->impl); }

int tern_vision_enc_budget_ok(const tern_vision_enc *e, int budget) { return e->arch->budget_ok(e->impl, budget); }

int tern_vision_enc_budget_nearest(const tern_vision_enc *e, int want) {
    return e->arch->budget_nearest(e->impl, want);
}

tern_err *tern_vision_enc_plan(const tern_vision_enc *e, int w, int h, int budget, tern_vision_plan *p) {
    if (w < 1 || h < 1)
        return tern_errf(TERN_EINVAL, "the image has no pixels (%d x %d)", w, h);
    return e->arch->plan(e->impl, w, h, budget, p);
}

uint64_t tern_vision_enc_work_bytes(const tern_vision_enc *e, size_t tokens) {
    return e->arch->work_bytes(e->impl, tokens);
}

tern_err *tern_vision_enc_run(const tern_vision_enc *e, tern_pool *pool, const uint8_t *rgb,
                              const tern_vision_plan *p, float *out) {
    return e->arch->run(e->impl, pool, rgb, p, out);
}

void tern_vision_enc_describe(const tern_vision_enc *e, char *buf, size_t len) {
    e->arch->describe(e->impl, buf, len);
}
