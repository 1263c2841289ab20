/* llama_arch.c — Llama 3.x (and Mistral-7B-style checkpoints) in the architecture table: the dense decoder with
 * biases only where the config's attention_bias asks, and from GGUF the Q/K rows llama.cpp reorders for RoPE over
 * adjacent pairs. */
#include "models/dense.h"

static const tern_dense_family LLAMA = {.name = "llama", .gguf_arch = "llama", .gguf_rope_pairs = 1};

static TERN_MUST_CHECK tern_err *parse(const char *dir, const json_t *root, void **state, tern_lm_desc *d) {
    return tern_dense_parse(&LLAMA, dir, root, state, d);
}

static TERN_MUST_CHECK tern_err *config_specs(const json_t *root, tern_wspec **specs, size_t *n) {
    return tern_dense_config_specs(&LLAMA, root, specs, n);
}

const tern_arch tern_arch_llama = {.model_types = {"llama", "mistral", NULL}, .parse = parse, .config_specs = config_specs,
                                   TERN_DENSE_ENTRIES};
