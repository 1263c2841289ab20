/* checkpoint_dir.c — what is at a model path, told before anything is parsed: a user pointing tern at a GGUF
 * file, a folder of GGUF files or of weights without a config hears what was found and what was expected,
 * instead of "config.json: Not a directory". */
#include "formats/checkpoint_dir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

static int ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n > k && !strcasecmp(s + n - k, suffix);
}

/* What a folder without config.json holds: GGUF files and other weight files, and the first of each. */
typedef struct found {
    char first_gguf[256], first_weights[256];
    int n_gguf, n_weights;
} found;

static void tally(void *ctx, const char *name, const char *path) {
    found *f = ctx;
    const size_t n = strlen(name);
    (void)path;
    if (ends_with(name, n, ".gguf")) {
        if (f->n_gguf++ == 0)
            snprintf(f->first_gguf, sizeof f->first_gguf, "%s", name);
    } else if (ends_with(name, n, ".safetensors") || ends_with(name, n, ".bin") || ends_with(name, n, ".pth")) {
        if (f->n_weights++ == 0)
            snprintf(f->first_weights, sizeof f->first_weights, "%s", name);
    }
}

/* A GGUF file name of the kind looked for: a multimodal projector (mmproj*) or a model (anything else). */
static int is_kind(const char *name, int mmproj) {
    return ends_with(name, strlen(name), ".gguf") && (strncmp(name, "mmproj", 6) == 0) == (mmproj != 0);
}

typedef struct one_gguf {
    char *file;
    int n, mmproj;
} one_gguf;

static void pick_gguf(void *ctx, const char *name, const char *path) {
    one_gguf *o = ctx;
    if (is_kind(name, o->mmproj) && o->n++ == 0)
        o->file = strdup(path);
}

/* `path` as a GGUF file of the kind (a model file is any .gguf named), or the one such file in a folder without
 * config.json. */
static int find_gguf(const char *path, int mmproj, char **file) {
    *file = NULL;
    struct stat st;
    if (stat(path, &st))
        return 0;
    if (!S_ISDIR(st.st_mode)) {
        const char *base = strrchr(path, '/');
        if (mmproj ? !is_kind(base ? base + 1 : path, 1) : !ends_with(path, strlen(path), ".gguf"))
            return 0;
        *file = strdup(path);
        return *file != NULL;
    }
    char *cfg = tern_path_join(path, "config.json");
    const int has_config = cfg && access(cfg, F_OK) == 0;
    free(cfg);
    one_gguf o = {.mmproj = mmproj};
    if (!has_config)
        tern_err_free(tern_dir_files(path, pick_gguf, &o));
    if (o.n == 1) {
        *file = o.file;
        return *file != NULL;
    }
    free(o.file);
    return 0;
}

int tern_checkpoint_gguf_file(const char *path, char **file) { return find_gguf(path, 0, file); }

int tern_checkpoint_mmproj_file(const char *path, char **file) { return find_gguf(path, 1, file); }

tern_err *tern_checkpoint_dir_check(const char *path) {
    static const char expected[] = "tern loads Hugging Face checkpoints (a folder with config.json, *.safetensors "
                                   "and tokenizer.json) and GGUF files";
    struct stat st;
    if (stat(path, &st))
        return tern_errf(TERN_ENOTFOUND, "%s: %s", path, strerror(errno));
    size_t plen = strlen(path);
    if (!S_ISDIR(st.st_mode)) {
        if (ends_with(path, plen, ".gguf"))
            return tern_errf(TERN_EUNSUPPORTED, "%s is a GGUF file: tern loads GGUF files as models, not as folders",
                             path);
        return tern_errf(TERN_EINVAL, "%s is a file, not a model folder (%s)", path, expected);
    }
    char *cfg = tern_path_join(path, "config.json");
    if (!cfg)
        return tern_errf(TERN_ENOMEM, "out of memory");
    int has_config = access(cfg, F_OK) == 0;
    free(cfg);
    if (has_config)
        return NULL;
    /* Say what is there: a GGUF file, other weights, or nothing a model is made of. */
    found f = {0};
    TERN_TRY(tern_dir_files(path, tally, &f));
    if (f.n_gguf)
        return tern_errf(TERN_EINVAL, "%s has no config.json but holds several GGUF files (%s, ...): name the one to "
                         "load", path, f.first_gguf);
    if (f.n_weights)
        return tern_errf(TERN_ENOTFOUND, "%s has weights (%s%s) but no config.json (%s)", path, f.first_weights,
                         f.n_weights > 1 ? ", ..." : "", expected);
    return tern_errf(TERN_ENOTFOUND, "%s has no config.json and no weights: not a model folder (%s)", path, expected);
}
