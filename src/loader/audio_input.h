/* audio_input.h — a model's audio input: the bytes of a clip in any supported container become the soft-token
 * embeddings its prompt carries. Decoding to 16 kHz mono and the log-mel features are the audio front end's
 * (audio/audio.h, with the model's own per-bin normalisation when its processor config gives one); the tower is the
 * model's audio encoder (models/audio_encoder.h). The server, `tern run --audio` and `tern audio-embed` all go
 * through here. */
#ifndef TERN_LOADER_AUDIO_INPUT_H
#define TERN_LOADER_AUDIO_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"

typedef struct tern_audio_input tern_audio_input;

/* One encoded clip. */
typedef struct tern_audio_embeds {
    float *rows;    /* [n][dim], malloc'd */
    size_t n;       /* soft tokens */
    int64_t dim;
    uint64_t hash;  /* of the 16 kHz samples the tower saw: equal clips, equal hash */
    size_t samples; /* 16 kHz samples encoded (after truncation at 30 s) */
    size_t total_samples; /* the clip's whole length at 16 kHz */
} tern_audio_embeds;

/* Loads DIR's audio tower and its processor config (preprocessor_config.json or processor_config.json);
 * *out NULL, no error, when the model has no audio tower. */
TERN_MUST_CHECK tern_err *tern_audio_input_load(const char *dir, tern_audio_input **out);
/* The audio tower of a GGUF multimodal projector file (llama.cpp's mmproj-*.gguf); no processor config (Gemma 4's
 * log-mel is not normalized). */
TERN_MUST_CHECK tern_err *tern_audio_input_load_gguf(const char *file, tern_audio_input **out);
/* The audio tower that goes with the model at model_path: from `mmproj` when given (none, no error, when that file
 * has only a vision tower); else the projector model_path is or holds (an mmproj*.gguf file, or a GGUF folder holding one); else none for a GGUF model; else the folder's
 * own (tern_audio_input_load). *out NULL, no error, when there is none. */
TERN_MUST_CHECK tern_err *tern_audio_input_find(const char *model_path, const char *mmproj, tern_audio_input **out);
/* Frees; NULL is fine. */
void tern_audio_input_free(tern_audio_input *a);
/* Width of an embedding row. */
int64_t tern_audio_input_dim(const tern_audio_input *a);
/* Soft tokens of a clip of n 16 kHz samples (after truncation at 30 s). */
size_t tern_audio_input_tokens(const tern_audio_input *a, size_t samples);
/* Bytes one 30 s clip's encode allocates: decoded samples, log-mel features, the tower's scratch and its output. */
uint64_t tern_audio_input_work_bytes(const tern_audio_input *a);
/* One line describing the tower (for logs and `tern info`). */
void tern_audio_input_describe(const tern_audio_input *a, char *buf, size_t len);
/* Decodes `len` bytes (any supported container; `timeout_s` bounds the decode, <= 0: default) and encodes the
 * first 30 s. Errors: undecodable bytes (naming the supported containers), a clip too short for one frame. */
TERN_MUST_CHECK tern_err *tern_audio_input_embed(const tern_audio_input *a, const void *bytes, size_t len, double timeout_s,
                                 tern_pool *pool, tern_audio_embeds *out);
/* A clip longer than 30 s in windows: decodes up to max_windows x 30 s and encodes each 30 s window on its own
 * (a last window shorter than one frame is dropped), *clips (malloc'd, *n of them; free each, then the array). With
 * max_windows 1 this is tern_audio_input_embed. */
TERN_MUST_CHECK tern_err *tern_audio_input_embed_windows(const tern_audio_input *a, const void *bytes, size_t len, double timeout_s,
                                         int max_windows, tern_pool *pool, tern_audio_embeds **clips, int *n);
/* The same from 16 kHz mono samples (at most TERN_AUDIO_MAX_SAMPLES are encoded). */
TERN_MUST_CHECK tern_err *tern_audio_input_embed_pcm(const tern_audio_input *a, const float *samples, size_t n, tern_pool *pool,
                                     tern_audio_embeds *out);
/* Frees the rows and zeroes; a zeroed struct is fine. */
void tern_audio_embeds_free(tern_audio_embeds *e);

#endif
