/* main.c — the tern binary: dispatches to one verb per file in src/cli/. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/mapping_faults.h"
#include "tensor/cpu.h"
#include "tern/tern.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} verbs[] = {
    {"serve", cmd_serve, "MODEL [--port 8080] [-np N] [-c N]  OpenAI/Anthropic HTTP server"},
    {"run", cmd_run, "MODEL [PROMPT] [-n N] [--temp T]   chat interactively, or generate once from PROMPT"},
    {"info", cmd_info, "MODEL                architecture, parameters, completeness check"},
    {"fit", cmd_fit, "MODEL [-c N] [-np N] [--budget GIB]  what fits: weights + KV memory"},
    {"bench", cmd_bench, "MODEL [-p 512] [-n 128]  prefill/decode throughput vs. memory bandwidth"},
    {"logits", cmd_logits, "MODEL --ids ...      parity interface: logits/hidden for a token sequence"},
    {"perplexity", cmd_perplexity, "MODEL FILE [-c 512] [--stride N]  windowed perplexity of a text"},
    {"spec-trace", cmd_spec_trace, "TARGET --draft DIR --ids ... [-k 4]  parity trace of assistant drafting"},
    {"tokenize", cmd_tokenize, "(MODEL | --vocab F) < text  print token ids (--add-special, --parse-special)"},
    {"detokenize", cmd_detokenize, "(MODEL | --vocab F) --ids 1,2,3  print the text of token ids"},
    {"template", cmd_template, "TEMPLATE CONTEXT.json  render a chat template (Jinja) with a JSON context"},
    {"synth", cmd_synth, "--preset P --dtype D OUT  write a synthetic checkpoint (HF/MLX layout)"},
    {"quantize", cmd_quantize, "IN OUT --bits 4|8 [--group 64]  MLX-format quantized copy of a float checkpoint"},
    {"audio-embed", cmd_audio_embed, "MODEL_DIR FILE [--out F.bin]  a clip through the model's audio tower"},
    {"image-embed", cmd_image_embed, "MODEL FILE [--out F.bin]  an image through the model's vision tower"},
    {"audio-features", cmd_audio_features, "FILE [--out F.bin]  log-mel features, frame and soft-token counts"},
    {"get", cmd_get, "ORG/NAME[@REV][:TAG]  download a model from the Hugging Face hub into its cache"},
    {"ls", cmd_ls, "                     the models in the Hugging Face cache"},
    {"rm", cmd_rm, "ORG/NAME             delete a model from the cache"},
};
#define N_VERBS (sizeof verbs / sizeof verbs[0])

static void usage(FILE *f) {
    fprintf(f, "usage: tern VERB [args]        (MODEL: a checkpoint folder with config.json and *.safetensors, a GGUF\n"
               "                               file, or a Hugging Face name ORG/NAME[@REV][:TAG], fetched if needed)\n\n"
               "verbs:\n");
    for (size_t i = 0; i < N_VERBS; i++)
        fprintf(f, "  %-15s %s\n", verbs[i].name, verbs[i].help);
    fprintf(f, "\n'tern VERB --help' describes a verb's options; 'tern --version' says which tern this is.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
        if (argc > 2) /* tern help VERB */
            for (size_t i = 0; i < N_VERBS; i++)
                if (!strcmp(argv[2], verbs[i].name)) {
                    char *h[] = {argv[2], "--help", NULL};
                    return verbs[i].fn(2, h);
                }
        usage(stdout);
        return 0;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-v") || !strcmp(a, "version")) {
        printf("tern %s (libtern %s; %s kernels on this CPU)\n", TERN_VERSION, tern_version(),
               tern_isa_name(tern_isa_detect()));
        return 0;
    }
    cli_report_mapping_faults();
    for (size_t i = 0; i < N_VERBS; i++)
        if (!strcmp(a, verbs[i].name))
            return verbs[i].fn(argc - 1, argv + 1);
    const char *names[N_VERBS];
    for (size_t i = 0; i < N_VERBS; i++)
        names[i] = verbs[i].name;
    const char *near = a[0] == '-' ? NULL : tern_args_closest(a, strlen(a), names, N_VERBS);
    if (near)
        fprintf(stderr, "tern: unknown verb '%s'; did you mean '%s'?\n", a, near);
    else
        fprintf(stderr, "tern: unknown verb '%s'\n\n", a);
    if (!near)
        usage(stderr);
    return 2;
}
