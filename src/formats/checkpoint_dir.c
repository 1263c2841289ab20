/* checkpoint_dir.c — what is at a model path, told before anything is parsed: a user pointing tern at a GGUF
 * file, a folder of GGUF files or of weights without a config hears what was found and what was expected,
 * instead of "config.json: Not a directory". */
#include "formats/checkpoint_dir.h"

#include <dirent.h>
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

tern_err *tern_checkpoint_dir_check(const char *path) {
    static const char expected[] = "tern loads Hugging Face checkpoints: a folder with config.json, *.safetensors "
                                   "and tokenizer.json";
    struct stat st;
    if (stat(path, &st))
        return tern_errf(TERN_ENOTFOUND, "%s: %s", path, strerror(errno));
    size_t plen = strlen(path);
    if (!S_ISDIR(st.st_mode)) {
        if (ends_with(path, plen, ".gguf"))
            return tern_errf(TERN_EUNSUPPORTED, "%s is a GGUF file; GGUF models are not supported yet (%s)", path,
                             expected);
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
    DIR *d = opendir(path);
    if (!d)
        return tern_errf(TERN_EIO, "%s: %s", path, strerror(errno));
    char first_gguf[256] = "", first_weights[256] = "";
    int n_gguf = 0, n_weights = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (ends_with(e->d_name, n, ".gguf")) {
            if (n_gguf++ == 0)
                snprintf(first_gguf, sizeof first_gguf, "%s", e->d_name);
        } else if (ends_with(e->d_name, n, ".safetensors") || ends_with(e->d_name, n, ".bin") ||
                   ends_with(e->d_name, n, ".pth")) {
            if (n_weights++ == 0)
                snprintf(first_weights, sizeof first_weights, "%s", e->d_name);
        }
    }
    closedir(d);
    if (n_gguf)
        return tern_errf(TERN_EUNSUPPORTED, "%s has no config.json but holds GGUF file%s (%s%s); GGUF models are not "
                         "supported yet (%s)", path, n_gguf > 1 ? "s" : "", first_gguf, n_gguf > 1 ? ", ..." : "",
                         expected);
    if (n_weights)
        return tern_errf(TERN_ENOTFOUND, "%s has weights (%s%s) but no config.json (%s)", path, first_weights,
                         n_weights > 1 ? ", ..." : "", expected);
    return tern_errf(TERN_ENOTFOUND, "%s has no config.json and no weights: not a model folder (%s)", path, expected);
}
