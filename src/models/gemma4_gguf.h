/* gemma4_gguf.h — a Gemma 4 GGUF file (llama.cpp's converter) seen as a Hugging Face checkpoint. */
#ifndef TERN_MODELS_GEMMA4_GGUF_H
#define TERN_MODELS_GEMMA4_GGUF_H

#include <jansson.h>

#include "core/status.h"
#include "formats/safetensors.h"

/* Opens the GGUF file at `path`: *config the config.json object its metadata stands for (caller's reference),
 * *ck its tensors under Hugging Face's names (bytes in the mapped file, released with the checkpoint). */
TERN_MUST_CHECK tern_err *tern_gemma4_gguf_open(const char *path, json_t **config, tern_checkpoint **ck);
struct tern_gguf;
/* The same from an open GGUF (taken over: closed with the checkpoint, or on an error). */
TERN_MUST_CHECK tern_err *tern_gemma4_gguf_from(struct tern_gguf *g, json_t **config, tern_checkpoint **ck);

#endif
