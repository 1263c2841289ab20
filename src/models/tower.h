/* tower.h — what the encoder towers (audio, vision) share: reading their small float tensors and matrices from a
 * checkpoint under the layout's root ("model." for Hugging Face, none for mlx-vlm), Gemma 4's clippable linear
 * (bounds on its input and output), and the synthetic tensors `tern synth` writes for them. */
#ifndef TERN_MODELS_TOWER_H
#define TERN_MODELS_TOWER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/threadpool.h"
#include "formats/quant_config.h"
#include "formats/safetensors.h"
#include "models/ckpt_write.h"
#include "models/weights.h"
#include "tensor/weight.h"

/* A tower's tensors in one checkpoint, and the float arrays read from it (owned here). */
typedef struct tern_tower_src {
    tern_checkpoint *ck;
    const tern_quant_config *qc;
    int mlx;          /* mlx-vlm names: no "model." root */
    const char *what; /* "audio tower", "vision tower": the start of every error */
    float **owned;
    size_t n_owned;
} tern_tower_src;

/* Frees the arrays the source read (not the checkpoint or the quantization config). */
void tern_tower_src_free(tern_tower_src *s);
/* The full stored name of `rel` under the layout's root. */
void tern_tower_name(const tern_tower_src *s, const char *rel, char *buf, size_t len);
/* The stored tensor `rel` as float32 (F32, F16 or BF16), checked to hold n values, into out[n]. */
TERN_MUST_CHECK tern_err *tern_tower_read(const tern_tower_src *s, const char *rel, size_t n, float *out);
/* tern_tower_read into a new array the source owns (rel NULL: a zeroed array of n for the tower's own use). */
TERN_MUST_CHECK tern_err *tern_tower_floats(tern_tower_src *s, const char *rel, size_t n, float **out);
/* The matrix `rel` (+ ".weight") bound as [out, in], float or MLX-quantized; an error names it when missing or
 * mis-shaped. */
TERN_MUST_CHECK tern_err *tern_tower_matrix(const tern_tower_src *s, const char *rel, int64_t out, int64_t in, tern_weight *w);

/* Gemma4ClippableLinear: y = clamp(clamp(x, in_lo, in_hi) W^T, out_lo, out_hi); infinite bounds do nothing. */
typedef struct tern_clin {
    tern_weight w;
    float in_lo, in_hi, out_lo, out_hi;
} tern_clin;

/* The clippable linear `rel`: its matrix at rel.linear, its bounds beside it (rel.input_min, …) when `clipped` and
 * stored; a bound left out keeps the reference's infinite default. */
TERN_MUST_CHECK tern_err *tern_tower_clipped(const tern_tower_src *s, const char *rel, int64_t out, int64_t in, int clipped,
                             tern_clin *l);
/* y [T][out] = the clipped linear of x [T][in] (x unchanged: clamped into tmp [T][in] when bounded). 0, or -1 when
 * scratch memory ran out. */
int tern_clin_run(tern_pool *pool, const tern_clin *l, const float *x, int64_t T, float *tmp, float *y);
/* Runs fn over rows [0, rows) on the pool (or inline without one or with one row). */
void tern_tower_par(tern_pool *pool, int64_t rows, tern_range_fn fn, void *job);

/* ---- synthetic towers (tern synth) ------------------------------------------------------------------- */

/* The tensors a synthetic tower is written as: its linears as specs (for the caller's planner and row source) and
 * every other tensor as raw float32 data drawn from the seed. */
typedef struct tern_tower_synth {
    tern_wspec *specs;
    size_t n_specs, cap_specs;
    tern_raw_tensor *raw;
    char (*names)[200];
    float **data;
    size_t n_raw, cap_raw;
    uint64_t seed;
    int mlx;
    int failed; /* an allocation failed: the caller reports out of memory */
} tern_tower_synth;

/* A linear [out, in] named rel (+ ".weight") under the root. */
void tern_tower_synth_linear(tern_tower_synth *A, const char *rel, int64_t out, int64_t in);
/* A raw float32 tensor named rel (as given, ".weight" included when wanted) of values mean + std * N(0, 1), a
 * function of (seed, name); ndim 0 is a scalar. */
void tern_tower_synth_raw(tern_tower_synth *A, const char *rel, int ndim, const int64_t *shape, float mean, float std);
/* A clippable linear: rel.linear and four bounds around +-bound (std 2) that rarely clip unit-scale activations. */
void tern_tower_synth_clipped(tern_tower_synth *A, const char *rel, int64_t out, int64_t in, float bound);
/* Hands out the lists (raw names fixed up); NULL, or out of memory (the arena then freed). */
TERN_MUST_CHECK tern_err *tern_tower_synth_finish(tern_tower_synth *A, tern_wspec **specs, size_t *n_specs, tern_raw_tensor **raw,
                                  size_t *n_raw);
/* Frees the arena and everything in it; NULL is fine. */
void tern_tower_synth_free(tern_tower_synth *A);

#endif
