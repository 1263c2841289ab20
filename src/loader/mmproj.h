/* mmproj.h — where a model's tower comes from: a GGUF multimodal projector file (named with --mmproj, or the one a
 * GGUF folder holds), or the checkpoint folder itself. The audio and image inputs both ask here. */
#ifndef TERN_LOADER_MMPROJ_H
#define TERN_LOADER_MMPROJ_H

#include "core/status.h"

typedef enum tern_tower_source {
    TERN_TOWER_NONE,   /* a GGUF model (or a projector file) without this tower */
    TERN_TOWER_MMPROJ, /* *file: the projector file that holds it */
    TERN_TOWER_FOLDER  /* the checkpoint folder's own config and weights */
} tern_tower_source;

/* Where the tower of `kind` ("audio" or "vision") of the model at model_path is: `mmproj` when given, else the
 * projector model_path is or holds, each only when its metadata names that kind's projector and its weights are
 * there (`tensor`: one every such tower has; a converter run on a checkpoint whose tower was cut away writes the
 * keys alone); else nothing for a GGUF model; else the folder. *file is malloc'd for TERN_TOWER_MMPROJ. */
TERN_MUST_CHECK tern_err *tern_mmproj_locate(const char *model_path, const char *mmproj, const char *kind, const char *tensor,
                             tern_tower_source *src, char **file);

#endif
