/* vision_encoder.h — vision towers behind one interface: a model's image encoder (config.json's "vision_config",
 * or a GGUF multimodal projector) turns an image's pixels into soft-token embeddings in the text model's space, the
 * rows a prompt carries between its image markers. The family also owns its processor's geometry: the size an
 * image is resized to for a soft-token budget. Chosen by vision_config's "model_type"; Gemma 4's tower
 * (gemma4_vision.c) is the first entry. The loader, the server and the CLI see only this. */
#ifndef TERN_MODELS_VISION_ENCODER_H
#define TERN_MODELS_VISION_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"

typedef struct tern_vision_enc tern_vision_enc;
struct tern_gguf;

/* Where an image of a given size goes: the pixel size the processor resizes it to and the soft tokens it makes. */
typedef struct tern_vision_plan {
    int w, h;
    size_t tokens;
} tern_vision_plan;

/* Loads DIR's vision tower (config.json + safetensors, Hugging Face or mlx-vlm names, float or MLX-quantized
 * linears). *out is NULL, with no error, when the config has no vision_config; a tower that is configured but
 * missing or mis-shaped in the checkpoint is an error naming the tensor. */
TERN_MUST_CHECK tern_err *tern_vision_enc_load(const char *dir, tern_vision_enc **out);
/* Loads the vision tower of a GGUF multimodal projector file (llama.cpp's mmproj-*.gguf), chosen by its
 * clip.vision.projector_type (or clip.projector_type); a file without a vision tower is an error saying so. */
TERN_MUST_CHECK tern_err *tern_vision_enc_load_gguf(const char *file, tern_vision_enc **out);
/* Frees; NULL is fine. */
void tern_vision_enc_free(tern_vision_enc *e);
/* Width of one embedding row (the text model's hidden size). */
int64_t tern_vision_enc_dim(const tern_vision_enc *e);
/* Whether `budget` soft tokens is one the processor allows (Gemma 4: 70, 140, 280, 560, 1120). */
int tern_vision_enc_budget_ok(const tern_vision_enc *e, int budget);
/* The allowed budget nearest to `want` (ties go to the smaller), for a request's detail setting. */
int tern_vision_enc_budget_nearest(const tern_vision_enc *e, int want);
/* The processor's plan for a w x h image at `budget` soft tokens (an allowed one). An image too thin to resize
 * within the budget is an error naming its size. */
TERN_MUST_CHECK tern_err *tern_vision_enc_plan(const tern_vision_enc *e, int w, int h, int budget, tern_vision_plan *p);
/* Bytes of scratch memory one run making `tokens` soft tokens allocates (what fit plans for). */
uint64_t tern_vision_enc_work_bytes(const tern_vision_enc *e, size_t tokens);
/* One image: rgb [p->h][p->w][3] already at the plan's size → out [p->tokens][dim]. `pool` (may be NULL) runs the
 * products. */
TERN_MUST_CHECK tern_err *tern_vision_enc_run(const tern_vision_enc *e, tern_pool *pool, const uint8_t *rgb,
                              const tern_vision_plan *p, float *out);
/* One line for `tern info`: the tower's shape and storage. */
void tern_vision_enc_describe(const tern_vision_enc *e, char *buf, size_t len);

/* ---- for the families: one table entry each ------------------------------------------------------ */

typedef struct tern_vision_arch {
    const char *model_type;     /* vision_config "model_type" */
    const char *gguf_projector; /* its projector type in a GGUF mmproj file */
    tern_err *(*load)(const char *dir, const void *config_root, void **impl);
    tern_err *(*load_gguf)(struct tern_gguf *g, void **impl); /* takes g over: closed with the tower or on error */
    void (*free)(void *impl);
    int64_t (*dim)(const void *impl);
    int (*budget_ok)(const void *impl, int budget);
    int (*budget_nearest)(const void *impl, int want);
    tern_err *(*plan)(const void *impl, int w, int h, int budget, tern_vision_plan *p);
    uint64_t (*work_bytes)(const void *impl, size_t tokens);
    tern_err *(*run)(const void *impl, tern_pool *pool, const uint8_t *rgb, const tern_vision_plan *p, float *out);
    void (*describe)(const void *impl, char *buf, size_t len);
} tern_vision_arch;

/* The Gemma 4 vision tower and embed_vision (gemma4_vision.c). */
extern const tern_vision_arch tern_vision_arch_gemma4;

#endif
