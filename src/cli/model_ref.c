/* model_ref.c — MODEL as a name: the cache first, then the hub (hub/hub.h). */
#include "cli/model_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "hub/hub.h"

/* The resolved model lives as long as the process: verbs keep pointers into it. */
static hub_model resolved;

/* 1 if a GGUF projector carries an audio tower (tern reads that part; a vision-only one would be refused). */
static int has_audio_tower(const char *file) {
    tern_gguf *g = NULL;
    tern_err *err = tern_gguf_open(file, &g);
    int yes = !err && tern_gguf_find(g, "clip.audio.projector_type") >= 0;
    tern_err_free(err);
    tern_gguf_close(g);
    return yes;
}

int cli_resolve_model(const char *verb, tern_opt *opts, const char **pos) {
    struct stat st;
    hub_ref ref;
    if (!pos[0] || !stat(pos[0], &st) || !hub_ref_parse(pos[0], &ref))
        return 0;
    char *root = hub_cache_root();
    if (!root) {
        fprintf(stderr, "tern %s: '%s' is not a path, and with no HOME (or HF_HOME) there is no model cache to look "
                        "it up in\n", verb, pos[0]);
        return 1;
    }
    hub_model_free(&resolved);
    tern_err *err = hub_find(root, &ref, &resolved);
    if (err) {
        tern_err_free(err);
        fprintf(stderr, "tern %s: fetching %s into %s\n", verb, pos[0], root);
        hub_get_options opt = {.progress = isatty(2)};
        err = hub_get(root, &ref, &opt, &resolved);
    }
    free(root);
    if (err) {
        fprintf(stderr, "tern %s: %s\n", verb, tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    pos[0] = resolved.path;
    /* The model id a server reports: the repository's name (and tag), not the snapshot's commit folder. */
    static char alias[320];
    const char *name = strchr(ref.repo, '/') + 1;
    snprintf(alias, sizeof alias, "%s%s%s", name, ref.tag[0] ? ":" : "", ref.tag);
    int audio = resolved.mmproj && has_audio_tower(resolved.mmproj);
    if (resolved.mmproj && !audio)
        fprintf(stderr, "tern %s: %s has no audio tower (its image tower is not read yet): text only\n", verb,
                resolved.mmproj);
    for (tern_opt *o = opts; o->name; o++) {
        if (!strcmp(o->name, "mmproj") && !o->value && audio)
            o->value = resolved.mmproj;
        if (!strcmp(o->name, "alias") && !o->value)
            o->value = alias;
    }
    return 0;
}
