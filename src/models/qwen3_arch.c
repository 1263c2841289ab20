/* qwen3_arch.c — Qwen 3 (dense) in the architecture table: the dense decoder with a per-head RMSNorm of q and k
 * before RoPE. */
#include "models/dense.h"

static const tern_dense_family QWEN3 = {.name = "qwen3", .gguf_arch = "qwen3", .qk_norm = 1};

static TERN_MUST_CHECK tern_err *parse(const char *dir, const json_t *root, void **state, tern_lm_desc *d) {
    return tern_dense_parse(&QWEN3, dir, root, state, d);
}

static TERN_MUST_CHECK tern_err *config_specs(const json_t *root, tern_wspec **specs, size_t *n) {
    return tern_dense_config_specs(&QWEN3, root, specs, n);
}

const tern_arch tern_arch_qwen3 = {.model_types = {"qwen3", NULL}, .parse = parse, .config_specs = config_specs,
                                   TERN_DENSE_ENTRIES};
