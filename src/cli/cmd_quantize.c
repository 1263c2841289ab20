/* cmd_quantize.c — `tern quantize IN_DIR OUT_DIR --bits 4|8 [--group 64]`. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/timeutil.h"
#include "models/quantize.h"

static const char *usage = "usage: tern quantize IN_DIR OUT_DIR --bits 4|8 [--group 64] [--shard-mb 4096]\n"
                           "Writes an MLX-format affine-quantized checkpoint from a float (f32/bf16/f16) one.\n";

int cmd_quantize(int argc, char **argv) {
    tern_opt opts[] = {{"bits", 1, 0}, {"group", 1, 0}, {"shard-mb", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[2];
    int np = tern_args_parse("quantize", argc, argv, opts, pos, 2);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    int64_t bits, group, shard_mb;
    if (np != 2 || !tern_args_get(opts, "bits") || tern_args_int("quantize", opts, "bits", 4, 2, 8, &bits) ||
        tern_args_int("quantize", opts, "group", 64, 8, 4096, &group) ||
        tern_args_int("quantize", opts, "shard-mb", 4096, 1, 1 << 20, &shard_mb)) {
        fputs(usage, stderr);
        return 2;
    }
    double t0 = tern_now_s();
    tern_err *err = tern_quantize_model(pos[0], pos[1], (int)bits, (int)group, (uint64_t)shard_mb << 20);
    if (err) {
        fprintf(stderr, "tern quantize: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    printf("wrote %s (%lld-bit, group %lld) in %.1f s\n", pos[1], (long long)bits, (long long)group, tern_now_s() - t0);
    return 0;
}
