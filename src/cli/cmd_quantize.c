/* cmd_quantize.c — `tern quantize IN_DIR OUT_DIR --bits 4|8 [--group 64]`. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/timeutil.h"
#include "models/model.h"
#include "models/quantize.h"
#include "tensor/cpu.h"

static const char *usage =
    "usage: tern quantize IN_DIR OUT_DIR --bits 4|8 [--group 64] [--shard-mb 4096] [--threads T] [--no-pack]\n"
    "Writes an MLX-format affine-quantized checkpoint from a float (f32/bf16/f16) one, then (unless --no-pack)\n"
    "packs it once for this CPU's int8 kernels into the packed-weights cache, laid out for T threads (default: one\n"
    "per core, as tern serve runs), so that the first start serving it does not repack.\n";

int cmd_quantize(int argc, char **argv) {
    tern_opt opts[] = {{"bits", 1, 0},    {"group", 1, 0},   {"shard-mb", 1, 0},
                       {"threads", 1, 0}, {"no-pack", 0, 0}, {"help", 0, 0},    {0, 0, 0}};
    const char *pos[2];
    int np = tern_args_parse("quantize", argc, argv, opts, pos, 2);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    int64_t bits, group, shard_mb, threads;
    if (np != 2 || !tern_args_get(opts, "bits") || tern_args_int("quantize", opts, "bits", 4, 2, 8, &bits) ||
        tern_args_int("quantize", opts, "group", 64, 8, 4096, &group) ||
        tern_args_int("quantize", opts, "shard-mb", 4096, 1, 1 << 20, &shard_mb) ||
        tern_args_int("quantize", opts, "threads", 0, 0, 1024, &threads)) {
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
    /* Loading packs the weights and writes the cache (models/pack_cache.h); a drafter that is not a model of its
     * own (no architecture entry) has nothing to pack. */
    tern_lm_spec *spec = NULL;
    tern_err *serr = tern_lm_spec_load(pos[1], &spec);
    tern_lm_spec_free(spec);
    if (!serr && !tern_args_get(opts, "no-pack") && tern_isa_active() != TERN_ISA_PORTABLE) {
        tern_lm *lm = NULL;
        t0 = tern_now_s();
        err = tern_lm_load(pos[1], (int)threads, &lm);
        if (err) {
            fprintf(stderr, "tern quantize: packing %s: %s\n", pos[1], tern_err_msg(err));
            tern_err_free(err);
            return 1;
        }
        printf("packed it for the int8 kernels (%d threads) in %.1f s\n", tern_lm_layout_threads(lm),
               tern_now_s() - t0);
        tern_lm_free(lm);
    }
    tern_err_free(serr);
    return 0;
}
