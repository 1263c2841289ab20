/* checkpoint_dir.h — checks that a model path is a Hugging Face checkpoint folder. */
#ifndef TERN_FORMATS_CHECKPOINT_DIR_H
#define TERN_FORMATS_CHECKPOINT_DIR_H

#include "core/status.h"

/* NULL when `path` is a folder with config.json; otherwise an error saying what is there instead (a GGUF file
 * or folder of them: TERN_EUNSUPPORTED; weights without config.json, nothing, no such path: TERN_ENOTFOUND; a
 * file: TERN_EINVAL) and what tern expects. */
TERN_MUST_CHECK tern_err *tern_checkpoint_dir_check(const char *path);
/* 1 when `path` is a GGUF model: a .gguf file, or a folder without config.json holding exactly one .gguf file
 * besides multimodal projectors (mmproj-*); *file is then that file (malloc'd). Otherwise 0. */
int tern_checkpoint_gguf_file(const char *path, char **file);
/* 1 when `path` is a GGUF multimodal projector (a file named mmproj*.gguf) or a folder without config.json holding
 * exactly one; *file is then that file (malloc'd). Otherwise 0. */
int tern_checkpoint_mmproj_file(const char *path, char **file);

#endif
