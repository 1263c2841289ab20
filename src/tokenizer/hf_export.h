/* hf_export.h — write a Hugging Face tokenizer (tokenizer.json, tokenizer_config.json,
 * chat_template.jinja) from a GGUF vocabulary, so synthetic checkpoints carry the real
 * Gemma 4 tokenizer in the file layout users' checkpoints have. */
#ifndef TERN_TOKENIZER_HF_EXPORT_H
#define TERN_TOKENIZER_HF_EXPORT_H

#include <stdint.h>

#include "core/status.h"

/* Writes the tokenizer files of the SentencePiece-style BPE vocabulary in `gguf_path` into
 * out_dir, keeping the first `vocab_size` tokens (and only the merges among them). */
TERN_MUST_CHECK tern_err *tern_hf_export_tokenizer(const char *gguf_path, int64_t vocab_size, const char *out_dir);

#endif
