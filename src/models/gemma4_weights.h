/* gemma4_weights.h — the tensors a Gemma 4 text decoder needs, and binding them to a checkpoint.
 *
 * One list (tern_gemma4_specs) says which tensors the architecture needs with their
 * logical shapes; synth generates from it, info reports against it, and the model
 * loads through it — so the three cannot disagree. Names are relative to the layout's
 * prefix: Hugging Face `model.language_model.`, mlx-vlm `language_model.model.`,
 * mlx-lm `model.` (GEMMA4.md §1 "Weight names"). */
#ifndef TERN_MODELS_GEMMA4_WEIGHTS_H
#define TERN_MODELS_GEMMA4_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "models/gemma4_config.h"
#include "tensor/weight.h"

typedef enum tern_wkind {
    TERN_WK_LINEAR,  /* [out, in] matrix, quantizable */
    TERN_WK_EMBED,   /* [rows, dim] lookup table (also the tied LM head), quantizable */
    TERN_WK_EXPERTS, /* [E, out, in] stacked expert matrices, quantizable */
    TERN_WK_NORM,    /* RMSNorm weight, near 1 */
    TERN_WK_SCALE    /* other float vectors/scalars (layer_scalar, router scales), near 1 */
} tern_wkind;

typedef enum tern_layout {
    TERN_LAYOUT_HF = 0,  /* model.language_model.*, experts.gate_up_proj */
    TERN_LAYOUT_MLX_VLM, /* language_model.model.*, experts.switch_glu.* */
    TERN_LAYOUT_MLX_LM,  /* model.*, experts.switch_glu.* */
    TERN_LAYOUT_COUNT
} tern_layout;

typedef struct tern_wspec {
    char name[112];   /* relative name without ".weight", e.g. "layers.3.self_attn.q_proj" */
    int suffix;       /* stored as name + ".weight" */
    int rooted;       /* named from the checkpoint's root, without the layout's prefix (a drafter's projections) */
    tern_wkind kind;
    int ndim;
    int64_t shape[3]; /* logical float shape */
} tern_wspec;

/* The tensors `c` needs in `layout`, in checkpoint order; *specs is malloc'd. */
tern_err *tern_gemma4_specs(const tern_gemma4_config *c, tern_layout layout, tern_wspec **specs, size_t *n);
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
typedef struct tern_gemma4_weights {
    tern_layout layout;
    tern_wspec *specs;   /* [n] */
    tern_weight *w;      /* [n], fmt TERN_WF_NONE where missing or mis-shaped */
    size_t n;
    char **problems;     /* "missing: NAME", "mis-shaped: NAME: expected ..., found ..." */
    size_t n_problems;
    char **extra;        /* stored tensors under the text prefix that nothing uses */
    size_t n_extra;
    size_t n_other;      /* stored tensors outside the text decoder (audio/vision towers) */
    uint8_t *packed;     /* one arena for all packed copies (tern_gemma4_weights_pack), or NULL */
    size_t packed_bytes;
    int packed_mapped;   /* the arena is a cache file's mapping (tern_pack_cache_unmap), not an allocation */
    int pack_source;     /* TERN_PACK_*: how the arena's bytes came to be */
} tern_gemma4_weights;

enum { TERN_PACK_NONE = 0, TERN_PACK_PACKED, TERN_PACK_FROM_CACHE };

/* Resolves every tensor of `c` in `ck` (layout detected from the names). Problems are collected,
 * not returned as an error: the caller decides (info lists them, the loader refuses). */
tern_err *tern_gemma4_bind(const tern_gemma4_config *c, const struct tern_quant_config *qc,
                           const struct tern_checkpoint *ck, tern_gemma4_weights **out);
/* Binds one tensor of `ck` to *w as `s` describes it (float, or MLX-quantized per qc); on a problem *w is left
 * with fmt TERN_WF_NONE and why says "missing: NAME" or "mis-shaped: NAME: ...". */
void tern_gemma4_bind_one(const tern_wspec *s, tern_layout layout, const struct tern_quant_config *qc,
                          const struct tern_checkpoint *ck, tern_weight *w, char *why, size_t wlen);
/* The bound weight of relative name (e.g. "layers.0.mlp.up_proj"), or NULL if not in the spec list. */
const tern_weight *tern_gemma4_find(const tern_gemma4_weights *w, const char *name);
/* One product step of the forward pass: up to three matrices reading the same input, multiplied in one
 * parallel region over their 16-row blocks laid end to end. */
typedef struct tern_gemma4_product {
    const tern_weight *w[3];
    int n;
} tern_gemma4_product;

/* Gives every MLX affine q4/q8 matrix used in products (linears, experts, the tied head) a copy packed for
 * the int8 kernels (qpack.h), all in one arena; freed with the weights. GGUF Q4_0 / Q8_0 matrices get one too,
 * kept beside the stored blocks (which only the portable path reads). The listed products (in forward order)
 * are cut by the thread pool's shares of their blocks (tern_pool_share, `threads` ways) and each thread's shares
 * of all of them are laid end to end: a decode step then reads one run per thread, so the memory stream does not
 * restart at every product. Packable matrices not listed follow whole. The lookup-only per-layer table is left
 * as stored. With cache_path (pack_cache.h), the arena is that file, mapped, when it was made from the same
 * checkpoint (source_key) and layout; otherwise the weights are packed (on `threads` threads) straight into a new
 * cache file, or into memory when none can be made. */
tern_err *tern_gemma4_weights_pack(tern_gemma4_weights *w, const tern_gemma4_product *products, size_t n,
                                   int threads, const char *cache_path, uint64_t source_key);
/* Bytes of the packed copies tern_gemma4_weights_pack makes of stored blocks (GGUF Q4_0 / Q8_0 matrices in
 * products), where the int8 kernels run; *replaced = the stored blocks' bytes that then leave memory (all but the
 * tied head's, which embedding lookups read). */
uint64_t tern_gemma4_weights_copy_bytes(const tern_gemma4_weights *w, uint64_t *replaced);
/* Bytes of weights one generated token reads: every matrix but the per-layer table's lookups (the tied head
 * included), and of the experts only the top_k_experts / num_experts share a token is routed to. */
uint64_t tern_gemma4_weights_decode_bytes(const tern_gemma4_weights *w, const tern_gemma4_config *c);
/* Frees; NULL is fine. */
void tern_gemma4_weights_free(tern_gemma4_weights *w);

#endif
