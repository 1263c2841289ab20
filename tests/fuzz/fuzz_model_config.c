/* fuzz_model_config.c — fuzz target for a model folder's config.json as each family reads it: Gemma 4's config, and
 * the dense families' (Llama 3 / Mistral, Qwen 2.5, Qwen 3) config with the tensor list it describes, which
 * `tern synth`, `tern quantize` and the loader go by. A config must parse or fail with an error, never crash or
 * leak. Checked beyond that: a dense config that parses lists its embedding first and at least one tensor per
 * layer, and its RoPE frequencies are finite and not negative. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "models/dense.h"
#include "models/gemma4_config.h"
#include "models/model.h"

static void check(int ok) {
    if (!ok)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return 0;
    tern_gemma4_config g;
    tern_err_free(tern_gemma4_config_parse(root, &g));
    const tern_arch *const archs[] = {&tern_arch_llama, &tern_arch_qwen2, &tern_arch_qwen3};
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        tern_wspec *specs = NULL;
        size_t n = 0;
        tern_err *e = archs[a]->config_specs(root, &specs, &n);
        if (e) {
            tern_err_free(e);
            continue;
        }
        check(n >= 2 && specs[0].kind == TERN_WK_EMBED);
        free(specs);
    }
    /* The frequencies of the family whose options are widest (Llama's rope_scaling types). */
    static const tern_dense_family llama = {.name = "llama", .gguf_arch = "llama", .gguf_rope_pairs = 1};
    tern_dense_config c;
    tern_err *e = tern_dense_config_parse(&llama, root, &c);
    if (!e && c.head_dim <= 4096) {
        float *f = tern_dense_inv_freq(&c);
        for (int64_t i = 0; f && i < c.head_dim / 2; i++)
            check(isfinite(f[i]) && f[i] >= 0);
        free(f);
    }
    tern_err_free(e);
    json_decref(root);
    return 0;
}
