/* audio_input.c — clip bytes → samples → log-mel → audio tower → soft-token embeddings (see audio_input.h). */
#include "loader/audio_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "loader/mmproj.h"
#include "models/audio_encoder.h"

struct tern_audio_input {
    tern_audio_enc *enc;
    tern_logmel_norm norm;
    int has_norm;
};

/* A tower around enc (taken over). */
static TERN_MUST_CHECK tern_err *wrap(tern_audio_enc *enc, tern_audio_input **out) {
    tern_audio_input *a = calloc(1, sizeof *a);
    if (!a) {
        tern_audio_enc_free(enc);
        return tern_errf(TERN_ENOMEM, "out of memory");
    }
    a->enc = enc;
    *out = a;
    return NULL;
}

tern_err *tern_audio_input_load_gguf(const char *file, tern_audio_input **out) {
    *out = NULL;
    tern_audio_enc *enc = NULL;
    TERN_TRY(tern_audio_enc_load_gguf(file, &enc));
    return wrap(enc, out);
}

tern_err *tern_audio_input_find(const char *model_path, const char *mmproj, tern_audio_input **out) {
    *out = NULL;
    tern_tower_source src;
    char *file = NULL;
    TERN_TRY(tern_mmproj_locate(model_path, mmproj, "audio", "mm.a.input_projection.weight", &src, &file));
    tern_err *err = src == TERN_TOWER_MMPROJ   ? tern_audio_input_load_gguf(file, out)
                    : src == TERN_TOWER_FOLDER ? tern_audio_input_load(model_path, out)
                                               : NULL;
    free(file);
    return err;
}

tern_err *tern_audio_input_load(const char *dir, tern_audio_input **out) {
    *out = NULL;
    tern_audio_enc *enc = NULL;
    tern_err *err = tern_audio_enc_load(dir, &enc);
    if (err || !enc)
        return err;
    tern_audio_input *a = NULL;
    TERN_TRY(wrap(enc, &a));
    static const char *names[] = {"preprocessor_config.json", "processor_config.json"};
    for (size_t i = 0; i < 2 && !err; i++) {
        char *p = tern_path_join(dir, names[i]);
        if (!p) {
            err = tern_errf(TERN_ENOMEM, "out of memory");
            break;
        }
        if (tern_is_file(p)) {
            err = tern_logmel_norm_load(p, &a->norm);
            a->has_norm = !err && (a->norm.has_mean || a->norm.has_stddev);
            free(p);
            break;
        }
        free(p);
    }
    if (err) {
        tern_audio_input_free(a);
        return err;
    }
    *out = a;
    return NULL;
}

void tern_audio_input_free(tern_audio_input *a) {
    if (!a)
        return;
    tern_audio_enc_free(a->enc);
    free(a);
}

int64_t tern_audio_input_dim(const tern_audio_input *a) { return tern_audio_enc_dim(a->enc); }

size_t tern_audio_input_tokens(const tern_audio_input *a, size_t samples) {
    if (samples > TERN_AUDIO_MAX_SAMPLES)
        samples = TERN_AUDIO_MAX_SAMPLES;
    return tern_audio_enc_tokens(a->enc, tern_logmel_valid_frames(samples));
}

uint64_t tern_audio_input_work_bytes(const tern_audio_input *a) {
    const size_t n = TERN_AUDIO_MAX_SAMPLES, frames = tern_logmel_frame_count(n);
    const uint64_t tokens = tern_audio_enc_tokens(a->enc, tern_logmel_valid_frames(n));
    return (uint64_t)n * sizeof(float) + (uint64_t)frames * (TERN_AUDIO_MEL_BINS * sizeof(float) + 1) +
           tern_audio_enc_work_bytes(a->enc, tern_logmel_valid_frames(n)) +
           tokens * (uint64_t)tern_audio_enc_dim(a->enc) * sizeof(float);
}

void tern_audio_input_describe(const tern_audio_input *a, char *buf, size_t len) {
    tern_audio_enc_describe(a->enc, buf, len);
}

tern_err *tern_audio_input_embed_pcm(const tern_audio_input *a, const float *samples, size_t n, tern_pool *pool,
                                     tern_audio_embeds *out) {
    memset(out, 0, sizeof *out);
    out->total_samples = n;
    if (n > TERN_AUDIO_MAX_SAMPLES)
        n = TERN_AUDIO_MAX_SAMPLES;
    tern_logmel mel = {0};
    tern_err *err = tern_logmel_compute(samples, n, a->has_norm ? &a->norm : NULL, pool, &mel);
    if (err)
        return err;
    size_t frames = mel.valid_frames;
    if (frames == 0) {
        tern_logmel_free(&mel);
        return tern_errf(TERN_EINVAL, "the clip is too short: %zu samples at 16 kHz, at least 161 (10 ms) are needed",
                         n);
    }
    size_t tokens = tern_audio_enc_tokens(a->enc, frames);
    /* The soft-token count the prompt reserves is the front end's arithmetic; the tower's must agree. */
    if (tokens != tern_audio_soft_tokens(frames)) {
        tern_logmel_free(&mel);
        return tern_errf(TERN_EINTERNAL, "audio tower emits %zu soft tokens for %zu frames, the prompt expects %zu",
                         tokens, frames, tern_audio_soft_tokens(frames));
    }
    int64_t dim = tern_audio_enc_dim(a->enc);
    float *rows = malloc(tokens * (size_t)dim * sizeof *rows);
    if (!rows) {
        tern_logmel_free(&mel);
        return tern_errf(TERN_ENOMEM, "out of memory for %zu audio embeddings", tokens);
    }
    err = tern_audio_enc_run(a->enc, pool, mel.features, frames, rows);
    tern_logmel_free(&mel);
    if (err) {
        free(rows);
        return err;
    }
    out->rows = rows;
    out->n = tokens;
    out->dim = dim;
    out->samples = n;
    out->hash = tern_hash64(samples, n * sizeof *samples, 0x617564696f636c70ull);
    return NULL;
}

tern_err *tern_audio_input_embed(const tern_audio_input *a, const void *bytes, size_t len, double timeout_s,
                                 tern_pool *pool, tern_audio_embeds *out) {
    memset(out, 0, sizeof *out);
    tern_pcm pcm = {0};
    tern_err *err = tern_audio_decode(bytes, len, timeout_s, &pcm);
    if (err)
        return err;
    err = tern_audio_input_embed_pcm(a, pcm.samples, pcm.n, pool, out);
    tern_pcm_free(&pcm);
    return err;
}

tern_err *tern_audio_input_embed_windows(const tern_audio_input *a, const void *bytes, size_t len, double timeout_s,
                                         int max_windows, tern_pool *pool, tern_audio_embeds **clips, int *n) {
    *clips = NULL;
    *n = 0;
    if (max_windows < 1)
        max_windows = 1;
    tern_pcm pcm = {0};
    tern_err *err = tern_audio_decode_long(bytes, len, timeout_s, (size_t)max_windows * TERN_AUDIO_MAX_SAMPLES, &pcm);
    if (err)
        return err;
    size_t windows = pcm.n ? (pcm.n + TERN_AUDIO_MAX_SAMPLES - 1) / TERN_AUDIO_MAX_SAMPLES : 1;
    if (windows > 1 && pcm.n - (windows - 1) * TERN_AUDIO_MAX_SAMPLES < 161)
        windows--; /* a tail too short for one frame */
    tern_audio_embeds *c = calloc(windows, sizeof *c);
    if (!c)
        err = tern_errf(TERN_ENOMEM, "out of memory");
    size_t k = 0;
    for (; !err && k < windows; k++) {
        size_t at = k * TERN_AUDIO_MAX_SAMPLES, m = pcm.n - at < TERN_AUDIO_MAX_SAMPLES ? pcm.n - at : TERN_AUDIO_MAX_SAMPLES;
        err = tern_audio_input_embed_pcm(a, pcm.samples + at, m, pool, &c[k]);
        c[k].total_samples = pcm.n;
    }
    tern_pcm_free(&pcm);
    if (err) {
        for (size_t i = 0; c && i < k; i++)
            tern_audio_embeds_free(&c[i]);
        free(c);
        return err;
    }
    *clips = c;
    *n = (int)windows;
    return NULL;
}

void tern_audio_embeds_free(tern_audio_embeds *e) {
    if (!e)
        return;
    free(e->rows);
    memset(e, 0, sizeof *e);
}
