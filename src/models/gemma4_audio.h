/* gemma4_audio.h — what `tern synth` needs of the Gemma 4 audio tower (gemma4_audio.c): its configuration and its
 * tensors, named as the loader reads them; and the loader's entry for its GGUF reader. Everything else goes through
 * audio_encoder.h. */
#ifndef TERN_MODELS_GEMMA4_AUDIO_H
#define TERN_MODELS_GEMMA4_AUDIO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "formats/safetensors.h"
#include "models/ckpt_write.h"
#include "models/gemma4_weights.h"

/* The audio_config synth writes: the e2b/e4b tower of GEMMA4.md §4 (hidden 1024, 12 blocks) for a text model of
 * hidden >= 512, else a 2-block tower of hidden 128. */
json_t *tern_gemma4_audio_synth_config(int64_t text_hidden);

/* The tower's tensors for config.json `root` in Hugging Face (mlx = 0) or mlx-vlm (mlx = 1) naming and layout: its
 * linears as specs (kind TERN_WK_LINEAR, rooted names, for the caller's planner and row source), every other tensor
 * (norms, convolutions, clip bounds, per-dimension scales, the output bias) as raw float32 tensors with values drawn
 * from `seed`. *arena owns the specs, the raw tensors and their data: tern_gemma4_audio_synth_free it after
 * writing. */
TERN_MUST_CHECK tern_err *tern_gemma4_audio_synth_tensors(const json_t *root, int mlx, uint64_t seed, tern_wspec **specs,
                                          size_t *n_specs, tern_raw_tensor **raw, size_t *n_raw, void **arena);
/* Frees what tern_gemma4_audio_synth_tensors made; NULL is fine. */
void tern_gemma4_audio_synth_free(void *arena);

/* ---- the tower's loader, for the GGUF reader (gemma4_audio_gguf.c) -------------------------------------- */

/* The tower of config.json `root` bound in ck (taken over: closed with the tower, or here on an error), named as
 * Hugging Face names it; scales_softplused: the per-dimension attention scales hold softplus(p), not p. `what`
 * names the source in errors. */
TERN_MUST_CHECK tern_err *tern_gemma4_audio_load_from(tern_checkpoint *ck, const json_t *root, int scales_softplused,
                                      const char *what, void **impl);
struct tern_gguf;
/* The tower from an open GGUF multimodal projector file (llama.cpp's mmproj) whose projector type is gemma4a (the
 * caller checks), taken over: closed with the tower, or here on an error. */
TERN_MUST_CHECK tern_err *tern_gemma4_audio_gguf_from(struct tern_gguf *g, void **impl);

#endif
