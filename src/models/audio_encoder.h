/* audio_encoder.h — audio towers behind one interface: a model folder's audio encoder (config.json's
 * "audio_config") turns a clip's log-mel features into soft-token embeddings in the text model's space, the rows a
 * prompt carries between its audio markers. Chosen by audio_config's "model_type"; Gemma 4's conformer tower
 * (gemma4_audio.c) is the first entry. The server, the CLI and the loader see only this. */
#ifndef TERN_MODELS_AUDIO_ENCODER_H
#define TERN_MODELS_AUDIO_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"

typedef struct tern_audio_enc tern_audio_enc;
struct tern_gguf;

/* Loads DIR's audio tower (config.json + safetensors, any layout the family knows, float or MLX-quantized linears).
 * *out is NULL, with no error, when the config has no audio_config; a tower that is configured but missing or
 * mis-shaped in the checkpoint is an error naming the tensor. */
TERN_MUST_CHECK tern_err *tern_audio_enc_load(const char *dir, tern_audio_enc **out);
/* Loads the audio tower of a GGUF multimodal projector file (llama.cpp's mmproj-*.gguf), chosen by its
 * clip.audio.projector_type; a file without an audio tower, or one of a kind this build lacks, is an error. */
TERN_MUST_CHECK tern_err *tern_audio_enc_load_gguf(const char *file, tern_audio_enc **out);
/* Frees; NULL is fine. */
void tern_audio_enc_free(tern_audio_enc *e);
/* Width of one embedding row (the text model's hidden size). */
int64_t tern_audio_enc_dim(const tern_audio_enc *e);
/* Soft tokens (embedding rows) the tower emits for `mel_frames` valid log-mel frames, from its own arithmetic. */
size_t tern_audio_enc_tokens(const tern_audio_enc *e, size_t mel_frames);
/* Bytes of scratch memory one run over `mel_frames` frames allocates (what fit plans for). */
uint64_t tern_audio_enc_work_bytes(const tern_audio_enc *e, size_t mel_frames);
/* One clip: mel [frames][128] (valid frames only) → out [tern_audio_enc_tokens(frames)][dim]. `pool` (may be NULL)
 * runs the matrix products. */
TERN_MUST_CHECK tern_err *tern_audio_enc_run(const tern_audio_enc *e, tern_pool *pool, const float *mel, size_t frames, float *out);
/* One line for `tern info`: the tower's shape and storage. */
void tern_audio_enc_describe(const tern_audio_enc *e, char *buf, size_t len);

/* ---- for the families: one table entry each ------------------------------------------------------ */

typedef struct tern_audio_arch {
    const char *model_type; /* audio_config "model_type" */
    const char *gguf_projector; /* its clip.audio.projector_type in a GGUF mmproj file */
    tern_err *(*load)(const char *dir, const void *config_root, void **impl);
    tern_err *(*load_gguf)(struct tern_gguf *g, void **impl); /* takes g over: closed with the tower or on error */
    void (*free)(void *impl);
    int64_t (*dim)(const void *impl);
    size_t (*tokens)(const void *impl, size_t mel_frames);
    uint64_t (*work_bytes)(const void *impl, size_t mel_frames);
    tern_err *(*run)(const void *impl, tern_pool *pool, const float *mel, size_t frames, float *out);
    void (*describe)(const void *impl, char *buf, size_t len);
} tern_audio_arch;

/* The Gemma 4 conformer tower and embed_audio (gemma4_audio.c). */
extern const tern_audio_arch tern_audio_arch_gemma4;

#endif
