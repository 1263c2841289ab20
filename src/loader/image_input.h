/* image_input.h — a model's image input: the bytes of an image become the soft-token embeddings its prompt carries.
 * Decoding and resizing are the image front end's (image/image.h, Pillow's semantics); the size and token count
 * for a budget are the tower's processor geometry and the tower is the model's vision encoder
 * (models/vision_encoder.h). The server, `tern run --image` and `tern image-embed` all go through here. */
#ifndef TERN_LOADER_IMAGE_INPUT_H
#define TERN_LOADER_IMAGE_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "image/image.h"

typedef struct tern_image_input tern_image_input;

/* One encoded image. */
typedef struct tern_image_embeds {
    float *rows;   /* [n][dim], malloc'd */
    size_t n;      /* soft tokens */
    int64_t dim;
    uint64_t hash; /* of the resized pixels and the budget: equal images, equal hash */
    int w, h;      /* the image as decoded (after EXIF orientation) */
    int rw, rh;    /* the size the tower saw */
    int budget;    /* the soft-token budget it was encoded for */
} tern_image_embeds;

/* Loads DIR's vision tower and its processor settings (processor_config.json's "image_processor", or a flat
 * preprocessor_config.json); *out NULL, no error, when the model has no vision tower. */
TERN_MUST_CHECK tern_err *tern_image_input_load(const char *dir, tern_image_input **out);
/* The vision tower of a GGUF multimodal projector file (llama.cpp's mmproj); the processor's defaults (the file
 * carries none of its settings). */
TERN_MUST_CHECK tern_err *tern_image_input_load_gguf(const char *file, tern_image_input **out);
/* The vision tower that goes with the model at model_path: from `mmproj` when given (none, no error, when that
 * file has only an audio tower); else the projector model_path is or holds; else none for a GGUF model; else the
 * folder's own. *out NULL, no error, when there is none. */
TERN_MUST_CHECK tern_err *tern_image_input_find(const char *model_path, const char *mmproj, tern_image_input **out);
/* Frees; NULL is fine. */
void tern_image_input_free(tern_image_input *a);
/* Width of an embedding row. */
int64_t tern_image_input_dim(const tern_image_input *a);
/* The processor's default soft-token budget (max_soft_tokens; 280 for Gemma 4). */
int tern_image_input_default_budget(const tern_image_input *a);
/* The allowed budget nearest to `want` (OpenAI's detail: low 70, high 1120). */
int tern_image_input_budget_nearest(const tern_image_input *a, int want);
/* Bytes one image's encode allocates at the largest budget: decoded and resized pixels, the tower's scratch and
 * its output. */
uint64_t tern_image_input_work_bytes(const tern_image_input *a);
/* One line describing the tower (for logs and `tern info`). */
void tern_image_input_describe(const tern_image_input *a, char *buf, size_t len);
/* Decodes `len` bytes (PNG, JPEG, WebP, GIF, BMP) and encodes the image at `budget` soft tokens (0: the
 * default; otherwise one the processor allows, else an error listing them). Errors: undecodable or refused bytes
 * (the reason), an image too thin for the budget. */
TERN_MUST_CHECK tern_err *tern_image_input_embed(const tern_image_input *a, const void *bytes, size_t len, int budget,
                                 tern_pool *pool, tern_image_embeds *out);
/* The same from decoded pixels. */
TERN_MUST_CHECK tern_err *tern_image_input_embed_rgb(const tern_image_input *a, const tern_image *im, int budget, tern_pool *pool,
                                     tern_image_embeds *out);
/* Frees the rows and zeroes; a zeroed struct is fine. */
void tern_image_embeds_free(tern_image_embeds *e);

#endif
