/* gguf_tensors.h — a GGUF file's tensors as a checkpoint under the names the families bind (Hugging Face's): each
 * family supplies the renaming, this does the rest — types (f32, f16, bf16 and ggml's block formats), shapes in
 * PyTorch order, bytes left in the mapped file. */
#ifndef TERN_MODELS_GGUF_TENSORS_H
#define TERN_MODELS_GGUF_TENSORS_H

#include <stdint.h>

#include "core/status.h"
#include "formats/safetensors.h"

struct tern_gguf;

/* What a GGUF tensor name becomes: a malloc'd name, NULL to leave the tensor out, or "" (malloc'd) for a name the
 * family does not know (an error naming it). NULL is also returned when out of memory: *oom is then set. */
typedef char *(*tern_gguf_rename_fn)(const char *gguf_name, void *ctx, int *oom);

/* The tensors of g renamed by `rename` (`what` names the family in errors) as a checkpoint that takes g over: it
 * is closed with the checkpoint, or here on an error. */
TERN_MUST_CHECK tern_err *tern_gguf_checkpoint(struct tern_gguf *g, tern_gguf_rename_fn rename, void *ctx, const char *what,
                               tern_checkpoint **ck);

/* Dimension d (PyTorch order: 0 is the outermost) of tensor `name`, or -1 when it is missing or has fewer
 * dimensions. */
int64_t tern_gguf_tensor_dim(const struct tern_gguf *g, const char *name, uint32_t d);
/* The u32 metadata value `key`, an error naming it when missing or outside [lo, hi]. */
TERN_MUST_CHECK tern_err *tern_gguf_u32_in(const struct tern_gguf *g, const char *key, uint32_t lo, uint32_t hi, uint32_t *out);

#endif
