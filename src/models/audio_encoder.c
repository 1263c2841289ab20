/* audio_encoder.c — the audio tower table (see audio_encoder.h). */
#include "models/audio_encoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/json_util.h"
#include "formats/gguf.h"

static const tern_audio_arch *const archs[] = {&tern_audio_arch_gemma4};

struct tern_audio_enc {
    const tern_audio_arch *arch;
    void *impl;
};

tern_err *tern_audio_enc_load(const char *dir, tern_audio_enc **out) {
    *out = NULL;
    json_t *root = NULL;
    tern_err *err = tern_json_load_in(dir, "config.json", 16u << 20, &root);
    if (err)
        return err;
    const json_t *ac = json_object_get(root, "audio_config");
    if (!json_is_object(ac)) {
        json_decref(root);
        return NULL;
    }
    const char *type = json_string_value(json_object_get(ac, "model_type"));
    const tern_audio_arch *arch = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (type && !strcmp(type, archs[i]->model_type))
            arch = archs[i];
    if (!arch) {
        err = tern_errf(TERN_EUNSUPPORTED, "%s: audio_config.model_type '%s' has no audio tower in this build (known: %s)",
                        dir, type ? type : "(none)", tern_audio_arch_gemma4.model_type);
        json_decref(root);
        return err;
    }
    tern_audio_enc *e = calloc(1, sizeof *e);
    if (!e) {
        json_decref(root);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    e->arch = arch;
    err = arch->load(dir, root, &e->impl);
    json_decref(root);
    if (err) {
        free(e);
        return err;
    }
    *out = e;
    return NULL;
}

tern_err *tern_audio_enc_load_gguf(const char *file, tern_audio_enc **out) {
    *out = NULL;
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(file, &g));
    char *type = NULL;
    tern_err *err = tern_gguf_get_str_dup(g, "clip.audio.projector_type", &type);
    if (err) {
        tern_gguf_close(g);
        tern_err_free(err);
        return tern_errf(TERN_EUNSUPPORTED, "%s: no audio tower in this file (no clip.audio.projector_type)", file);
    }
    const tern_audio_arch *arch = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(type, archs[i]->gguf_projector))
            arch = archs[i];
    if (!arch)
        err = tern_errf(TERN_EUNSUPPORTED, "%s: clip.audio.projector_type \"%s\" has no audio tower in this build "
                        "(known: %s)", file, type, tern_audio_arch_gemma4.gguf_projector);
    free(type);
    tern_audio_enc *e = err ? NULL : calloc(1, sizeof *e);
    if (!err && !e)
        err = tern_errf(TERN_ENOMEM, "out of memory");
    if (!err) {
        e->arch = arch;
        err = arch->load_gguf(g, &e->impl);
    } else
        tern_gguf_close(g);
    if (err) {
        free(e);
        return err;
    }
    *out = e;
    return NULL;
}

void tern_audio_enc_free(tern_audio_enc *e) {
    if (!e)
        return;
    e->arch->free(e->impl);
    free(e);
}

int64_t tern_audio_enc_dim(const tern_audio_enc *e) { return e->arch->dim(e->impl); }

size_t tern_audio_enc_tokens(const tern_audio_enc *e, size_t mel_frames) { return e->arch->tokens(e->impl, mel_frames); }

uint64_t tern_audio_enc_work_bytes(const tern_audio_enc *e, size_t mel_frames) {
    return e->arch->work_bytes(e->impl, mel_frames);
}

tern_err *tern_audio_enc_run(const tern_audio_enc *e, tern_pool *pool, const float *mel, size_t frames, float *out) {
    if (frames == 0)
        return tern_errf(TERN_EINVAL, "the clip has no audio frames (shorter than 10 ms)");
    return e->arch->run(e->impl, pool, mel, frames, out);
}

void tern_audio_enc_describe(const tern_audio_enc *e, char *buf, size_t len) { e->arch->describe(e->impl, buf, len); }
