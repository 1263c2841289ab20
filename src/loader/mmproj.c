/* mmproj.c — a tower's source: a projector file or the checkpoint folder (see mmproj.h). */
#include "loader/mmproj.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/checkpoint_dir.h"
#include "formats/gguf.h"

/* Whether the projector file holds the kind's tower. */
static TERN_MUST_CHECK tern_err *holds(const char *file, const char *kind, const char *tensor, int *yes) {
    tern_gguf *g;
    TERN_TRY(tern_gguf_open(file, &g));
    char type_key[64], has_key[64];
    snprintf(type_key, sizeof type_key, "clip.%s.projector_type", kind);
    snprintf(has_key, sizeof has_key, "clip.has_%s_encoder", kind);
    *yes = (tern_gguf_find(g, type_key) >= 0 || tern_gguf_find(g, has_key) >= 0) && tern_gguf_find_tensor(g, tensor);
    tern_gguf_close(g);
    return NULL;
}

tern_err *tern_mmproj_locate(const char *model_path, const char *mmproj, const char *kind, const char *tensor,
                             tern_tower_source *src, char **file) {
    *src = TERN_TOWER_NONE;
    *file = NULL;
    char *found = NULL;
    if (mmproj || tern_checkpoint_mmproj_file(model_path, &found)) {
        int yes = 0;
        tern_err *err = holds(mmproj ? mmproj : found, kind, tensor, &yes);
        if (!err && yes && !(*file = strdup(mmproj ? mmproj : found)))
            err = tern_errf(TERN_ENOMEM, "out of memory");
        if (!err && yes)
            *src = TERN_TOWER_MMPROJ;
        free(found);
        return err;
    }
    if (tern_checkpoint_gguf_file(model_path, &found)) {
        free(found);
        return NULL; /* a GGUF model's tower is a separate projector file, and there is none here */
    }
    *src = TERN_TOWER_FOLDER;
    return NULL;
}
