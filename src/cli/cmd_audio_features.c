/* cmd_audio_features.c — `tern audio-features FILE [--out FILE.bin]`: decodes any supported audio
 * file (WAV by content, other containers through libav) to mono 16 kHz, computes Gemma 4 log-mel
 * features, prints the frame counts and the soft-token count, and optionally writes the features
 * as raw little-endian float32 [frames][128] (invalid frames all zero). */
#include <stdio.h>
#include <stdlib.h>

#include "audio/audio.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/fileio.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tern audio-features FILE [--out FILE.bin] [--config preprocessor_config.json] [--timeout S]\n"
            "  FILE       audio in any of: %s (decided by content, not by name)\n"
            "  --out      write float32 [frames][128] log-mel features (little-endian, no header)\n"
            "  --config   apply per_bin_mean / per_bin_stddev from a preprocessor_config.json\n"
            "  --timeout  give up decoding a container after S seconds (default %g)\n",
            tern_audio_supported_containers(), TERN_AUDIO_DEFAULT_TIMEOUT_S);
}

int cmd_audio_features(int argc, char **argv) {
    tern_opt opts[] = {{"out", 1, 0}, {"config", 1, 0}, {"timeout", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int npos = tern_args_parse("audio-features", argc, argv, opts, pos, 1);
    if (npos < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        usage(stdout);
        return 0;
    }
    if (npos != 1) {
        usage(stderr);
        return 2;
    }
    double timeout = TERN_AUDIO_DEFAULT_TIMEOUT_S;
    const char *tv = tern_args_get(opts, "timeout");
    if (tv) {
        char *end;
        timeout = strtod(tv, &end);
        if (end == tv || *end || !(timeout > 0) || timeout > 3600) {
            fprintf(stderr, "tern audio-features: --timeout must be seconds in (0, 3600], got '%s'\n", tv);
            return 2;
        }
    }

    tern_logmel_norm norm;
    tern_pcm pcm = {0};
    tern_logmel mel = {0};
    const char *cfg = tern_args_get(opts, "config");
    tern_err *err = NULL;
    if (cfg && (err = tern_logmel_norm_load(cfg, &norm)))
        goto fail;
    if ((err = tern_audio_decode_file(pos[0], timeout, &pcm)))
        goto fail;
    if ((err = tern_logmel_compute(pcm.samples, pcm.n, cfg ? &norm : NULL, NULL, &mel)))
        goto fail_pcm;

    printf("samples:      %zu (%.3f s at %d Hz, mono)\n", pcm.n, (double)pcm.n / TERN_AUDIO_RATE, TERN_AUDIO_RATE);
    printf("frames:       %zu x %d\n", mel.frames, TERN_AUDIO_MEL_BINS);
    printf("valid_frames: %zu\n", mel.valid_frames);
    printf("soft_tokens:  %zu\n", tern_audio_soft_tokens(mel.valid_frames));
    const char *out = tern_args_get(opts, "out");
    if (out) {
        err = tern_write_file(out, mel.features, mel.frames * TERN_AUDIO_MEL_BINS * sizeof(float));
        if (err)
            goto fail_mel;
        printf("wrote:        %s (float32 [%zu][%d])\n", out, mel.frames, TERN_AUDIO_MEL_BINS);
    }
    tern_logmel_free(&mel);
    tern_pcm_free(&pcm);
    return 0;

fail_mel:
    tern_logmel_free(&mel);
fail_pcm:
    tern_pcm_free(&pcm);
fail:
    fprintf(stderr, "tern audio-features: %s\n", tern_err_msg(err));
    tern_err_free(err);
    return 1;
}
