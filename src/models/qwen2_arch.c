/* qwen2_arch.c — Qwen 2 / 2.5 in the architecture table: the dense decoder with biases on q, k and v. */
#include "models/dense.h"

static const tern_dense_family QWEN2 = {.name = "qwen2", .gguf_arch = "qwen2", .qkv_bias = 1};

static TERN_MUST_CHECK tern_err *parse(const char *dir, const json_t *root, void **state, tern_lm_desc *d) {
    return tern_dense_parse(&QWEN2, dir, root, state, d);
}

static TERN_MUST_CHECK tern_err *config_specs(const json_t *root, tern_wspec **specs, size_t *n) {
    return tern_dense_config_specs(&QWEN2, root, specs, n);
}

const tern_arch tern_arch_qwen2 = {.model_types = {"qwen2", NULL}, .parse = parse, .config_specs = config_specs,
                                   TERN_DENSE_ENTRIES};
