/* cmd_audio_embed.c — `tern audio-embed MODEL_DIR FILE [--out emb.bin]`: a clip through the model's audio tower:
 * decoded (any supported container), log-mel features, the conformer tower and embed_audio; prints the counts and
 * optionally writes the soft-token embeddings as raw little-endian float32 [soft tokens][text hidden]. Only the
 * tower is loaded, not the text decoder. */
#include <stdio.h>
#include <stdlib.h>

#include "audio/audio.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/fileio.h"
#include "core/timeutil.h"
#include "loader/audio_input.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tern audio-embed MODEL_DIR FILE [--out FILE.bin] [--threads N] [--timeout S] [--mmproj F]\n"
            "  MODEL_DIR  a checkpoint with an audio tower (config.json audio_config), a GGUF multimodal\n"
            "             projector (mmproj*.gguf) or a folder of GGUF files holding one\n"
            "  --mmproj   the projector file to read the tower from instead\n"
            "  FILE       audio in any of: %s (decided by content); the first 30 s are encoded\n"
            "  --out      write float32 [soft tokens][hidden] embeddings (little-endian, no header)\n"
            "  --threads  threads for the tower's products (default: one per core)\n"
            "  --timeout  give up decoding a container after S seconds (default %g)\n",
            tern_audio_supported_containers(), TERN_AUDIO_DEFAULT_TIMEOUT_S);
}

int cmd_audio_embed(int argc, char **argv) {
    tern_opt opts[] = {{"out", 1, 0}, {"threads", 1, 0}, {"timeout", 1, 0}, {"mmproj", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[2];
    int npos = tern_args_parse("audio-embed", argc, argv, opts, pos, 2);
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
    int64_t threads = 0;
    float timeout = 0;
    if (tern_args_int("audio-embed", opts, "threads", 0, 0, 1024, &threads) ||
        tern_args_float("audio-embed", opts, "timeout", 0, 0, 3600, &timeout))
        return 2;
    tern_audio_input *ai = NULL;
    tern_pool *pool = NULL;
    tern_audio_embeds e = {0};
    double t0 = tern_now_s();
    tern_err *err = tern_audio_input_find(pos[0], tern_args_get(opts, "mmproj"), &ai);
    if (!err && !ai)
        err = tern_errf(TERN_EUNSUPPORTED, "%s has no audio tower (no config.json audio_config, no mmproj*.gguf)",
                        pos[0]);
    if (!err)
        err = tern_pool_create(threads ? (int)threads : tern_cpu_count(), &pool);
    double t1 = tern_now_s();
    char *bytes = NULL;
    size_t len = 0;
    if (!err)
        err = tern_read_file(pos[1], 1u << 30, &bytes, &len);
    if (!err)
        err = tern_err_wrap(tern_audio_input_embed(ai, bytes, len, timeout, pool, &e), "%s", pos[1]);
    double t2 = tern_now_s();
    free(bytes);
    if (!err) {
        char desc[512];
        tern_audio_input_describe(ai, desc, sizeof desc);
        printf("tower:        %s\n", desc);
        printf("samples:      %zu (%.3f s at 16 kHz%s)\n", e.samples, (double)e.samples / TERN_AUDIO_RATE,
               e.total_samples > e.samples ? ", truncated at 30 s" : "");
        printf("soft_tokens:  %zu x %lld\n", e.n, (long long)e.dim);
        printf("seconds:      load %.3f, encode %.3f (%.1fx real time)\n", t1 - t0, t2 - t1,
               (double)e.samples / TERN_AUDIO_RATE / (t2 - t1));
        const char *out = tern_args_get(opts, "out");
        if (out && !(err = tern_write_file(out, e.rows, e.n * (size_t)e.dim * sizeof(float))))
            printf("wrote:        %s (float32 [%zu][%lld])\n", out, e.n, (long long)e.dim);
    }
    tern_audio_embeds_free(&e);
    tern_pool_destroy(pool);
    tern_audio_input_free(ai);
    if (err) {
        fprintf(stderr, "tern audio-embed: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    return 0;
}
