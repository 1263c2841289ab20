/* fuzz_hub.c — fuzz target for what `tern get` reads from the network and the command line: the input is the hub's
 * file list (JSON); its first line is also taken as a model name, and the listed paths are offered to the GGUF and
 * mmproj pickers with the name's tag. Nothing may crash or leak; a path the listing accepts must be relative with no
 * "." or ".." segment. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub.h"
#include "hub/hub_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char line[512];
    size_t n = 0;
    while (n < size && n < sizeof line - 1 && data[n] != '\n')
        n++;
    memcpy(line, data, n);
    line[n] = 0;
    hub_ref ref;
    int named = hub_ref_parse(line, &ref);
    hub_listing l;
    tern_err *err = hub_listing_parse((const char *)data, size, "fuzz/model", &l);
    if (err) {
        tern_err_free(err);
        return 0;
    }
    const char **paths = malloc((l.n + 1) * sizeof *paths);
    for (size_t i = 0; paths && i < l.n; i++) {
        const char *p = l.f[i].path;
        if (p[0] == '/' || !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") || strstr(p, "//"))
            abort();
        paths[i] = p;
    }
    if (paths) {
        int g = hub_pick_gguf(paths, l.n, named ? ref.tag : "");
        int m = hub_pick_mmproj(paths, l.n, named ? ref.tag : "");
        if (g >= (int)l.n || m >= (int)l.n)
            abort();
        for (size_t i = 0; g >= 0 && i < l.n; i++)
            (void)hub_split_siblings(paths[g], paths[i]);
    }
    free(paths);
    hub_listing_free(&l);
    return 0;
}
