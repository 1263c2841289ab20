/* weights.h — binding an architecture's tensor list to a checkpoint, and packing the bound matrices for the int8
 * kernels. Every family describes the tensors it needs as a list of specs (name, kind, logical shape); synth
 * generates from the list, info reports against it and the model loads through it — so the three cannot disagree.
 * Names are relative to the layout's prefix: `model.language_model.` (Hugging Face multimodal checkpoints),
 * `language_model.model.` (mlx-vlm), `model.` (text-only checkpoints: Hugging Face causal LMs, mlx-lm). */
#ifndef TERN_MODELS_WEIGHTS_H
#define TERN_MODELS_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "tensor/weight.h"

typedef enum tern_wkind {
    TERN_WK_LINEAR,  /* [out, in] matrix, quantizable */
    TERN_WK_EMBED,   /* [rows, dim] table read by rows (and multiplied too when it is the tied LM head), quantizable */
    TERN_WK_EXPERTS, /* [E, out, in] stacked expert matrices, quantizable */
    TERN_WK_NORM,    /* RMSNorm weight, near 1 */
    TERN_WK_SCALE,   /* other float vectors/scalars (layer_scalar, router scales), near 1 */
    TERN_WK_BIAS     /* a linear's added bias vector, near 0 */
} tern_wkind;

typedef enum tern_layout {
    TERN_LAYOUT_HF = 0,  /* model.language_model.*, experts.gate_up_proj */
    TERN_LAYOUT_MLX_VLM, /* language_model.model.*, experts.switch_glu.* */
    TERN_LAYOUT_MLX_LM,  /* model.*, experts.switch_glu.* (also every text-only Hugging Face causal LM) */
    TERN_LAYOUT_COUNT
} tern_layout;

typedef struct tern_wspec {
    char name[112];   /* relative name without ".weight", e.g. "layers.3.self_attn.q_proj" */
    int suffix;       /* stored as name + ".weight" */
    int rooted;       /* named from the checkpoint's root, without the layout's prefix (a drafter's projections,
                       * an untied lm_head) */
    int head;         /* an embedding table that is also the tied LM head (multiplied, so packed and counted) */
    tern_wkind kind;
    int ndim;
    int64_t shape[3]; /* logical float shape */
} tern_wspec;

/* A growing spec list, as the families build theirs. */
typedef struct tern_wspec_list {
    tern_wspec *v;
    size_t n, cap;
} tern_wspec_list;

/* Appends the spec named by fmt (of ndim dims d0, d1, d2; stored with ".weight" when suffix); -1 when out of memory
 * (the list so far is kept, for the caller to free). */
int tern_wspec_add(tern_wspec_list *l, tern_wkind kind, int suffix, int ndim, int64_t d0, int64_t d1, int64_t d2,
                   const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* The name prefix of a layout ("model.language_model.", ...). */
const char *tern_layout_prefix(tern_layout layout);
/* A layout's short name ("hf", "mlx-vlm", "mlx-lm"). */
const char *tern_layout_name(tern_layout layout);
/* Full stored name of a spec's tensor (prefix + name + ".weight" if suffixed) into buf. */
void tern_wspec_full_name(const tern_wspec *s, tern_layout layout, const char *part, char *buf, size_t len);


/* ---- binding a checkpoint -------------------------------------------------------------------- */

struct tern_checkpoint;
struct tern_quant_config;

/* The architecture's tensors resolved in one checkpoint, with what did not fit. */
typedef struct tern_weights {
    tern_layout layout;
    tern_wspec *specs;   /* [n] */
    tern_weight *w;      /* [n], fmt TERN_WF_NONE where missing or mis-shaped */
    size_t n;
    char **problems;     /* "missing: NAME", "mis-shaped: NAME: expected ..., found ..." */
    size_t n_problems;
    char **extra;        /* stored tensors under the text prefix that nothing uses */
    size_t n_extra;
    size_t n_other;      /* stored tensors outside the text decoder (audio/vision towers) */
    uint8_t *packed;     /* one arena for all packed copies (tern_weights_pack), or NULL */
    size_t packed_bytes;
    int pack_source;     /* TERN_PACK_*: how the arena's bytes came to be */
    float **floats;      /* f32 copies made by tern_weights_floats */
    size_t n_floats;
} tern_weights;

enum { TERN_PACK_NONE = 0, TERN_PACK_PACKED, TERN_PACK_FROM_CACHE };

/* Resolves specs [n] (taken over, freed with the weights) in `ck` under `layout`; the stored tensors under the
 * layout's prefix that no spec names are listed as extra, the rest counted as other. Problems are collected, not
 * returned as an error: the caller decides (info lists them, the loader refuses). */
TERN_MUST_CHECK tern_err *tern_weights_bind(tern_wspec *specs, size_t n, tern_layout layout, const struct tern_quant_config *qc,
                            const struct tern_checkpoint *ck, tern_weights **out);
/* Binds one tensor of `ck` to *w as `s` describes it (float, or MLX-quantized per qc); on a problem *w is left
 * with fmt TERN_WF_NONE and why says "missing: NAME" or "mis-shaped: NAME: ...". */
void tern_weights_bind_one(const tern_wspec *s, tern_layout layout, const struct tern_quant_config *qc,
                          const struct tern_checkpoint *ck, tern_weight *w, char *why, size_t wlen);
/* The bound weight of relative name (e.g. "layers.0.mlp.up_proj"), or NULL if not in the spec list. */
const tern_weight *tern_weights_find(const tern_weights *w, const char *name);
/* One product step of the forward pass: up to three matrices reading the same input, multiplied in one
 * parallel region over their 16-row blocks laid end to end. */
typedef struct tern_product {
    const tern_weight *w[3];
    int n;
} tern_product;

/* Gives every MLX affine q4/q8 matrix used in products (linears, experts, the tied head) a copy packed for
 * the int8 kernels (qpack.h), all in one arena; freed with the weights. GGUF Q4_0 / Q8_0 matrices get one too,
 * kept beside the stored blocks (which only the portable path reads). The listed products (in forward order)
 * are cut by the thread pool's shares of their blocks (tern_pool_share, `threads` ways) and each thread's shares
 * of all of them are laid end to end: a decode step then reads one run per thread, so the memory stream does not
 * restart at every product. Packable matrices not listed follow whole. Lookup-only tables are left as stored. With cache_path (pack_cache.h), the arena is that file, mapped, when it was made from the same
 * checkpoint (source_key) and layout; otherwise the weights are packed (on `threads` threads) straight into a new
 * cache file, or into memory when none can be made. */
TERN_MUST_CHECK tern_err *tern_weights_pack(tern_weights *w, const tern_product *products, size_t n,
                                   int threads, const char *cache_path, uint64_t source_key);
/* tern_weights_pack with the cache file of the model at `dir` (its folder or GGUF file; pack_cache.h), the time
 * it took logged. */
TERN_MUST_CHECK tern_err *tern_weights_pack_for(tern_weights *w, const tern_product *products, size_t n, int threads, const char *dir);
/* Bytes of the packed copies tern_weights_pack makes of stored blocks (GGUF Q4_0 / Q8_0 matrices in
 * products), where the int8 kernels run; *replaced = the stored blocks' bytes that then leave memory (all but the
 * tied head's, which embedding lookups read). */
uint64_t tern_weights_copy_bytes(const tern_weights *w, uint64_t *replaced);
/* Bytes of weights one generated token reads: every matrix but the lookup-only tables (a tied head included), and
 * of the experts only the share `expert_share` (experts used / experts) a token is routed to. */
uint64_t tern_weights_decode_bytes(const tern_weights *w, double expert_share);
/* An f32 copy of the bound vector (norm, bias, scale) of relative name, kept with the weights; NULL when it is not
 * bound or memory ran out. */
const float *tern_weights_floats(tern_weights *w, const char *name);
/* Stored bytes of ck's tensors the decoder binds or could (under the layout's prefix, or named by a rooted spec)
 * into *decoder, the rest (towers) into *other. */
void tern_weights_count_bytes(const tern_weights *w, const struct tern_checkpoint *ck, uint64_t *decoder,
                              uint64_t *other);
/* `tern info`'s lines on ck's bytes: in all, per dtype and block format, files. */
void tern_weights_report_bytes(const struct tern_checkpoint *ck, FILE *out);
/* `tern info`'s closing lines: tensors outside the decoder, extra tensors, every problem, the count. */
void tern_weights_report_list(const tern_weights *w, FILE *out);
/* Frees; NULL is fine. */
void tern_weights_free(tern_weights *w);

#endif
