/* cmd_info.c — `tern info MODEL_DIR`: architecture, layer pattern, parameters and bytes,
 * KV bytes per token, whether every tensor the architecture needs is present and well shaped, and the audio and
 * vision towers beside the text decoder. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_ref.h"
#include "loader/audio_input.h"
#include "loader/image_input.h"
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
    /* The towers, each loaded as serving would (a broken one is reported and makes the exit status 1). */
    tern_audio_input *audio = NULL;
    tern_image_input *image = NULL;
    char desc[512];
    if ((err = tern_audio_input_find(pos[0], NULL, &audio)) || (err = tern_image_input_find(pos[0], NULL, &image))) {
        printf("towers:       %s\n", tern_err_msg(err));
        tern_err_free(err);
        rc = 1;
    }
    if (audio) {
        tern_audio_input_describe(audio, desc, sizeof desc);
        printf("audio tower:  %s; %.1f MiB work area for a 30 s clip\n", desc,
               (double)tern_audio_input_work_bytes(audio) / (1 << 20));
    }
    if (image) {
        tern_image_input_describe(image, desc, sizeof desc);
        printf("vision tower: %s; default %d soft tokens an image, %.1f MiB work area at the largest budget\n", desc,
               tern_image_input_default_budget(image), (double)tern_image_input_work_bytes(image) / (1 << 20));
    }
    tern_audio_input_free(audio);
    tern_image_input_free(image);
    return rc;
}
