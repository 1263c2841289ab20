/* cmd_synth.c — `tern synth`: write a synthetic checkpoint in the Hugging Face / MLX layout. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fileio.h"
#include "core/timeutil.h"
#include "models/synth.h"

static const char *usage =
    "usage: tern synth --preset PRESET|CONFIG.json --dtype f32|bf16|f16|q8|q4\n"
    "                  [--layers N] [--group 64] [--seed N] [--vocab FILE.gguf] [--shard-mb N] [--audio] [--vision]\n"
    "                  OUT_DIR\n"
    "Presets: Gemma 4 tiny, e2b, e4b, 12b, 26b-a4b, 31b, e4b-moe-like; llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b,\n"
    "qwen3-0.6b, qwen3-4b, qwen3-8b (these need --vocab: a GGUF holding the family's vocabulary, e.g. llama.cpp's\n"
    "models/ggml-vocab-llama-bpe.gguf or ggml-vocab-qwen2.gguf).\n"
    "Writes config.json, safetensors (sharded above 4 GiB), tokenizer files and the chat template.\n"
    "--layers keeps the first N layers of the preset (a real layout at a size the machine can hold).\n"
    "--audio adds the audio tower (hidden 1024 x 12 blocks beside e2b/e4b, 128 x 2 beside tiny), its token ids\n"
    "and processor_config.json, so chat requests can carry audio.\n"
    "--vision adds the vision tower (hidden 768 x 16 layers beside e2b/e4b, 1152 x 27 beside 12b/26b/31b, 64 x 2\n"
    "beside tiny), its token ids and\n"
    "the image processor's settings, so chat requests can carry images.\n";

/* The Gemma 4 vocabulary: beside an installed binary (PREFIX/share/tern, as `make install` puts it), else in the
 * source tree the binary was built from. */
static const char *default_vocab(char *buf, size_t cap) {
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, cap, "%s/../share/tern/gemma4/vocab.gguf", exe);
            if (access(buf, R_OK) == 0)
                return buf;
        }
    }
    return TERN_ASSETS_DIR "/gemma4/vocab.gguf";
}

int cmd_synth(int argc, char **argv) {
    tern_opt opts[] = {{"preset", 1, 0}, {"dtype", 1, 0}, {"group", 1, 0}, {"seed", 1, 0}, {"vocab", 1, 0},
                       {"shard-mb", 1, 0}, {"audio", 0, 0}, {"vision", 0, 0}, {"layers", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("synth", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (np != 1 || !tern_args_get(opts, "preset")) {
        fputs(usage, stderr);
        return 2;
    }
    tern_synth_opts so = {0};
    int64_t group, seed, shard_mb, layers;
    if (tern_args_int("synth", opts, "group", 64, 8, 4096, &group) ||
        tern_args_int("synth", opts, "layers", 0, 1, 256, &layers) ||
        tern_args_int("synth", opts, "seed", 0, 0, INT64_MAX, &seed) ||
        tern_args_int("synth", opts, "shard-mb", 4096, 1, 1 << 20, &shard_mb))
        return 2;
    so.group = (int)group;
    so.seed = (uint64_t)seed;
    so.shard_bytes = (uint64_t)shard_mb << 20;
    char installed[4096];
    so.audio = tern_args_get(opts, "audio") != NULL;
    so.vision = tern_args_get(opts, "vision") != NULL;
    so.vocab_gguf = tern_args_get(opts, "vocab") ? tern_args_get(opts, "vocab") : default_vocab(installed, sizeof installed);
    const char *dt = tern_args_get(opts, "dtype") ? tern_args_get(opts, "dtype") : "bf16";
    json_t *config = NULL;
    double t0 = tern_now_s();
    tern_err *err = tern_synth_parse_dtype(dt, &so.dtype);
    if (!err)
        err = tern_synth_config(tern_args_get(opts, "preset"), &config);
    const char *type = err ? NULL : json_string_value(json_object_get(config, "model_type"));
    if (!err && !tern_args_get(opts, "vocab") && type && strncmp(type, "gemma4", 6))
        err = tern_errf(TERN_EINVAL, "--vocab is needed for a %s model (the bundled vocabulary is Gemma 4's): a GGUF "
                        "file holding the family's vocabulary", type);
    if (!err && layers)
        err = tern_synth_cut_layers(config, layers);
    if (!err)
        err = tern_synth_write(config, &so, pos[0]);
    json_decref(config);
    if (err) {
        fprintf(stderr, "tern synth: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return 1;
    }
    printf("wrote %s (%s, %s, vocabulary %s) in %.1f s\n", pos[0], tern_args_get(opts, "preset"), dt, so.vocab_gguf,
           tern_now_s() - t0);
    return 0;
}
