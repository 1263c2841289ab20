/* main.c — the tern binary: dispatches to one verb per file in src/cli/. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} verbs[] = {
    {"detokenize", cmd_detokenize, "(MODEL_DIR | --vocab F) --ids 1,2,3  print the text of token ids"},
    {"audio-features", cmd_audio_features, "FILE [--out F.bin]    log-mel features, frame and soft-token counts"},
    {"bench", cmd_bench, "MODEL_DIR [-p 512] [-n 128] prefill/decode throughput vs. memory bandwidth"},
    {"fit", cmd_fit, "MODEL_DIR [--ctx N] [--parallel N] [--budget GIB]  what fits: weights + KV memory"},
    {"info", cmd_info, "MODEL_DIR                 architecture, parameters, completeness check"},
    {"logits", cmd_logits, "MODEL_DIR --ids ...       parity interface: logits/hidden for a token sequence"},
    {"quantize", cmd_quantize, "IN OUT --bits 4|8 [--group 64]  MLX-format quantized copy of a float checkpoint"},
    {"run", cmd_run, "MODEL_DIR --ids ... [-n N]  generate (greedy or sampled)"},
    {"serve", cmd_serve, "MODEL_DIR [--host H] [--port P] [--parallel N]  OpenAI/Anthropic HTTP server"},
    {"synth", cmd_synth, "--preset P --dtype D OUT  write a synthetic checkpoint (HF/MLX layout)"},
    {"template", cmd_template, "TEMPLATE CONTEXT.json     render a chat template (Jinja) with a JSON context"},
    {"tokenize", cmd_tokenize, "(MODEL_DIR | --vocab F) < text  print token ids (--add-special, --parse-special)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: tern VERB [args]\n\nverbs:\n");
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        fprintf(f, "  %-15s %s\n", verbs[i].name, verbs[i].help);
    fprintf(f, "\n'tern VERB --help' describes a verb's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(argv[1], verbs[i].name))
            return verbs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tern: unknown verb '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
