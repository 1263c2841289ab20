/* cmd_info.c — `tern info MODEL_DIR`: architecture, layer pattern, parameters and bytes,
 * KV bytes per token, and whether every tensor the architecture needs is present and well shaped. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_ref.h"
#include "models/model.h"

int cmd_info(int argc, char **argv) {
    tern_opt opts[] = {{"model", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("info", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    const int help = tern_args_get(opts, "help") != NULL;
    if (help || np != 1) {
        fputs("usage: tern info [-m] MODEL_DIR\nExits 1 when a needed tensor is missing or mis-shaped.\n",
              help ? stdout : stderr);
        return help ? 0 : 2;
    }
    if (cli_resolve_model("info", opts, pos))
        return 1;
    tern_lm_spec *spec = NULL;
    tern_err *err = tern_lm_spec_load(pos[0], &spec);
    if (err) {
        fprintf(stderr, "tern info: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    tern_lm_spec_report(spec, stdout);
    int rc = tern_lm_spec_desc(spec)->has_problems ? 1 : 0;
    tern_lm_spec_free(spec);
    return rc;
}
