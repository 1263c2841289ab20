/* gemma4_vision.h — what `tern synth` needs of the Gemma 4 vision tower (gemma4_vision.c): its configuration and its
 * tensors, named as the loader reads them; and the loader's entry for its GGUF reader. Everything else goes through
 * vision_encoder.h. */
#ifndef TERN_MODELS_GEMMA4_VISION_H
#define TERN_MODELS_GEMMA4_VISION_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "formats/safetensors.h"
#include "models/ckpt_write.h"
#include "models/weights.h"

/* The vision_config synth writes for a text model of this width: the e2b/e4b tower (hidden 768, 16 layers, 12 heads
 * x 64, clipped linears) for 512..2560, the larger models' (1152, 27 layers, 16 heads x 72, standardized) above,
 * and a 2-layer tower of hidden 64 (2 heads x 32, clipped, standardized) below. */
json_t *tern_gemma4_vision_synth_config(int64_t text_hidden);

/* The tower's tensors for config.json `root` in Hugging Face (mlx = 0) or mlx-vlm (mlx = 1) naming: its linears as
 * specs (kind TERN_WK_LINEAR, rooted names, for the caller's planner and row source), every other tensor (norms,
 * position table, clip bounds, standardization) as raw float32 tensors with values drawn from `seed`. *arena owns
 * them: tern_gemma4_vision_synth_free it after writing. */
TERN_MUST_CHECK tern_err *tern_gemma4_vision_synth_tensors(const json_t *root, int mlx, uint64_t seed, tern_wspec **specs,
                                           size_t *n_specs, tern_raw_tensor **raw, size_t *n_raw, void **arena);
/* Frees what tern_gemma4_vision_synth_tensors made; NULL is fine. */
void tern_gemma4_vision_synth_free(void *arena);

/* ---- the tower's loader, for the GGUF reader (gemma4_vision_gguf.c) ------------------------------------ */

/* The tower of config.json `root` bound in ck (taken over: closed with the tower, or here on an error), named as
 * Hugging Face names it; patch_chw: the patch embedding is stored [H][3][p][p] (a convolution, as GGUF keeps it)
 * rather than [H][p*p*3]. `what` names the source in errors. */
TERN_MUST_CHECK tern_err *tern_gemma4_vision_load_from(tern_checkpoint *ck, const json_t *root, int patch_chw, const char *what,
                                       void **impl);
struct tern_gguf;
/* The tower from an open GGUF multimodal projector file (llama.cpp's mmproj) whose vision projector type is
 * gemma4v (the caller checks), taken over: closed with the tower, or here on an error. */
TERN_MUST_CHECK tern_err *tern_gemma4_vision_gguf_from(struct tern_gguf *g, void **impl);

#endif
