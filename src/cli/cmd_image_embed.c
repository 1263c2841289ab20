/* cmd_image_embed.c — `tern image-embed MODEL FILE [--out emb.bin] [--budget N]`: an image through the model's
 * vision tower: decoded (PNG, JPEG, WebP, GIF, BMP), resized as the processor does, the tower and embed_vision;
 * prints the sizes and counts and optionally writes the soft-token embeddings as raw little-endian float32
 * [soft tokens][text hidden] (the parity interface). Only the tower is loaded, not the text decoder. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fileio.h"
#include "core/timeutil.h"
#include "loader/image_input.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tern image-embed MODEL FILE [--out FILE.bin] [--budget N] [--threads N] [--mmproj F]\n"
            "  MODEL      a checkpoint with a vision tower (config.json vision_config), a GGUF multimodal\n"
            "             projector (mmproj*.gguf) or a folder of GGUF files holding one\n"
            "  --mmproj   the projector file to read the tower from instead\n"
            "  FILE       an image: %s (decided by content)\n"
            "  --budget   soft tokens per image: 70, 140, 280, 560 or 1120 (default: the processor's, 280)\n"
            "  --out      write float32 [soft tokens][hidden] embeddings (little-endian, no header)\n"
            "  --threads  threads for the tower's products (default: one per core)\n",
            tern_image_supported_formats());
}

int cmd_image_embed(int argc, char **argv) {
    tern_opt opts[] = {{"out", 1, 0},    {"budget", 1, 0}, {"threads", 1, 0},
                       {"mmproj", 1, 0}, {"help", 0, 0},   {0, 0, 0}};
    const char *pos[2];
    int npos = tern_args_parse("image-embed", argc, argv, opts, pos, 2);
    if (npos < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        usage(stdout);
        return 0;
    }
    if (npos != 2) {
        usage(stderr);
        return 2;
    }
    int64_t threads = 0, budget = 0;
    if (tern_args_int("image-embed", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_int("image-embed", opts, "budget", 0, 1, 1 << 20, &budget))
        return 2;
    tern_image_input *ii = NULL;
    tern_pool *pool = NULL;
    tern_image_embeds e = {0};
    double t0 = tern_now_s();
    tern_err *err = tern_image_input_find(pos[0], tern_args_get(opts, "mmproj"), &ii);
    if (!err && !ii)
        err = tern_errf(TERN_EUNSUPPORTED, "%s has no vision tower (no config.json vision_config, no mmproj*.gguf "
                        "with one)", pos[0]);
    if (!err)
        err = tern_pool_create(threads ? (int)threads : tern_cpu_count(), &pool);
    double t1 = tern_now_s();
    char *bytes = NULL;
    size_t len = 0;
    if (!err)
        err = tern_read_file(pos[1], 1u << 30, &bytes, &len);
    if (!err)
        err = tern_err_wrap(tern_image_input_embed(ii, bytes, len, (int)budget, pool, &e), "%s", pos[1]);
    double t2 = tern_now_s();
    free(bytes);
    if (!err) {
        char desc[512];
        tern_image_input_describe(ii, desc, sizeof desc);
        printf("tower:        %s\n", desc);
        printf("image:        %d x %d, resized to %d x %d (budget %d)\n", e.w, e.h, e.rw, e.rh, e.budget);
        printf("soft_tokens:  %zu x %lld\n", e.n, (long long)e.dim);
        printf("seconds:      load %.3f, encode %.3f\n", t1 - t0, t2 - t1);
        const char *out = tern_args_get(opts, "out");
        if (out && !(err = tern_write_file(out, e.rows, e.n * (size_t)e.dim * sizeof(float))))
            printf("wrote:        %s (float32 [%zu][%lld])\n", out, e.n, (long long)e.dim);
    }
    tern_image_embeds_free(&e);
    tern_pool_destroy(pool);
    tern_image_input_free(ii);
    if (err) {
        fprintf(stderr, "tern image-embed: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
