/* cmd_get.c — models by name in the Hugging Face cache: `tern get` downloads one, `tern ls` lists what is cached,
 * `tern rm` deletes one (hub/hub.h does the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "hub/hub.h"

static const char *get_usage =
    "usage: tern get ORG/NAME[@REVISION][:TAG] [--include GLOB]... [--exclude GLOB]... [--parallel 4]\n"
    "Downloads a model from the Hugging Face hub into its cache ($HF_HOME/hub, shared with huggingface-cli and\n"
    "transformers) and prints its path. Interrupted downloads resume; every file is checked against its ETag.\n"
    "  :TAG         a GGUF repository's quantization (Q4_K_M by default) and its mmproj, as llama.cpp's -hf\n"
    "  @REVISION    a branch, tag or commit (default main)\n"
    "  --include / --exclude  globs over the repository's paths (repeatable); default: the files tern reads\n"
    "               (*.json, *.safetensors, *.jinja, *.txt, tokenizer.model), or the GGUF file of the tag\n"
    "  --parallel N files downloaded at once\n"
    "Environment: HF_TOKEN (gated or private models), HF_ENDPOINT (a mirror), HF_HOME / HF_HUB_CACHE (the cache),\n"
    "HF_HUB_OFFLINE=1 (the cache only).\n";

/* Every value of --NAME / --NAME=V in argv, NULL-terminated (repeatable options the common parser keeps once). */
static const char **all_values(int argc, char **argv, const char *name) {
    const char **out = calloc((size_t)argc + 1, sizeof *out);
    size_t n = 0, len = strlen(name);
    for (int i = 1; out && i < argc; i++) {
        if (strncmp(argv[i], "--", 2) || strncmp(argv[i] + 2, name, len))
            continue;
        if (argv[i][2 + len] == '=')
            out[n++] = argv[i] + 3 + len;
        else if (!argv[i][2 + len] && i + 1 < argc)
            out[n++] = argv[++i];
    }
    if (out && !n) {
        free(out);
        return NULL;
    }
    return out;
}

static char *cache_root_or_complain(const char *verb) {
    char *root = hub_cache_root();
    if (!root)
        fprintf(stderr, "tern %s: no HOME and no HF_HOME: set HF_HOME to the folder for models\n", verb);
    return root;
}

int cmd_get(int argc, char **argv) {
    tern_opt opts[] = {{"include", 1, 0}, {"exclude", 1, 0}, {"parallel", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("get", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    int help = tern_args_get(opts, "help") != NULL;
    if (help || np != 1) {
        fputs(get_usage, help ? stdout : stderr);
        return help ? 0 : 2;
    }
    hub_ref ref;
    if (!hub_ref_parse(pos[0], &ref)) {
        fprintf(stderr, "tern get: '%s' is not a model name: ORG/NAME[@REVISION][:TAG], e.g. google/gemma-4-e2b-it\n",
                pos[0]);
        return 2;
    }
    int64_t parallel;
    if (tern_args_int("get", opts, "parallel", 4, 1, 64, &parallel))
        return 2;
    char *root = cache_root_or_complain("get");
    if (!root)
        return 1;
    const char **inc = all_values(argc, argv, "include"), **exc = all_values(argc, argv, "exclude");
    hub_get_options opt = {.include = inc, .exclude = exc, .parallel = (int)parallel, .progress = isatty(2)};
    hub_model m;
    tern_err *err = hub_get(root, &ref, &opt, &m);
    free(inc), free(exc), free(root);
    if (err) {
        fprintf(stderr, "tern get: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    printf("%s\n", m.path);
    if (m.mmproj)
        printf("%s\n", m.mmproj);
    hub_model_free(&m);
    return 0;
}

static void human(uint64_t b, char *out, size_t cap) {
    if (b >= 1000000000ull)
        snprintf(out, cap, "%.1f GB", (double)b / 1e9);
    else if (b >= 1000000ull)
        snprintf(out, cap, "%.1f MB", (double)b / 1e6);
    else
        snprintf(out, cap, "%.1f kB", (double)b / 1e3);
}

int cmd_ls(int argc, char **argv) {
    tern_opt opts[] = {{"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("ls", argc, argv, opts, pos, 0);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs("usage: tern ls\nLists the models in the Hugging Face cache ($HF_HOME/hub): name, revision, size, "
              "files, format.\n", stdout);
        return 0;
    }
    char *root = cache_root_or_complain("ls");
    if (!root)
        return 1;
    hub_entry *e = NULL;
    size_t n = 0;
    tern_err *err = hub_list(root, &e, &n);
    if (err) {
        fprintf(stderr, "tern ls: %s\n", tern_err_msg(err));
        tern_err_free(err);
        free(root);
        return 1;
    }
    if (!n)
        fprintf(stderr, "tern ls: no models in %s (tern get ORG/NAME fetches one)\n", root);
    else
        printf("%-44s %-12s %10s %6s  %s\n", "NAME", "REVISION", "SIZE", "FILES", "FORMAT");
    for (size_t i = 0; i < n; i++) {
        char size[32];
        human(e[i].bytes, size, sizeof size);
        printf("%-44s %-12s %10s %6d  %s\n", e[i].repo, e[i].revision, size, e[i].files, e[i].format);
    }
    free(e);
    free(root);
    return 0;
}

int cmd_rm(int argc, char **argv) {
    tern_opt opts[] = {{"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("rm", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    int help = tern_args_get(opts, "help") != NULL;
    if (help || np != 1) {
        fputs("usage: tern rm ORG/NAME\nDeletes a model (every revision) from the Hugging Face cache.\n",
              help ? stdout : stderr);
        return help ? 0 : 2;
    }
    char *root = cache_root_or_complain("rm");
    if (!root)
        return 1;
    tern_err *err = hub_remove(root, pos[0]);
    free(root);
    if (err) {
        fprintf(stderr, "tern rm: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    printf("removed %s\n", pos[0]);
    return 0;
}
