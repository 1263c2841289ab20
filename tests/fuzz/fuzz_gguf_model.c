/* fuzz_gguf_model.c — fuzz target for GGUF models: arbitrary bytes parsed as GGUF, read as the model its
 * general.architecture names — Gemma 4, or a dense family (llama, qwen2, qwen3) — (metadata to config, tensors
 * renamed) and bound to the tensor list, as loading does: a hostile file (counts,
 * per-layer arrays, shapes, types, a rope_freqs tensor of the wrong size) must end in an error, never a crash. A
 * bound weight's first and last rows are read as the forward reads them (block formats dequantized). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/quant_config.h"
#include "models/dense.h"
#include "models/gemma4_config.h"
#include "models/gemma4_gguf.h"
#include "models/gemma4_weights.h"
#include "tensor/ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_gguf *g;
    tern_err *e = tern_gguf_parse(data, size, "fuzz.gguf", &g);
    if (e) {
        tern_err_free(e);
        return 0;
    }
    /* A dense family's traits as its table file sets them, by the architecture the file names. */
    char arch[16] = "";
    tern_gguf_str a;
    tern_err *ae = tern_gguf_get_str(g, "general.architecture", &a);
    if (!ae && a.len < sizeof arch)
        memcpy(arch, a.ptr, a.len);
    tern_err_free(ae);
    const tern_dense_family fam = {.name = arch, .gguf_arch = arch, .qkv_bias = !strcmp(arch, "qwen2"),
                                   .qk_norm = !strcmp(arch, "qwen3"), .gguf_rope_pairs = !strcmp(arch, "llama")};
    const int dense = !strcmp(arch, "llama") || !strcmp(arch, "qwen2") || !strcmp(arch, "qwen3");
    json_t *config;
    tern_checkpoint *ck;
    if ((e = dense ? tern_dense_gguf_from(&fam, g, &config, &ck) : tern_gemma4_gguf_from(g, &config, &ck))) {
        tern_err_free(e);
        return 0;
    }
    tern_gemma4_config c;
    tern_dense_config dc;
    tern_quant_config *qc = NULL;
    tern_weights *gw = NULL;
    e = dense ? tern_dense_config_parse(&fam, config, &dc) : tern_gemma4_config_parse(config, &c);
    if (!e)
        e = tern_quant_config_parse(config, &qc);
    if (!e && dense) {
        tern_wspec *specs;
        size_t n;
        e = tern_dense_specs(&dc, &specs, &n);
        if (!e)
            e = tern_weights_bind(specs, n, TERN_LAYOUT_MLX_LM, qc, ck, &gw);
    } else if (!e) {
        e = tern_gemma4_bind(&c, qc, ck, &gw);
    }
    for (size_t i = 0; !e && i < gw->n; i++) {
        const tern_weight *w = &gw->w[i];
        const int64_t rows = tern_weight_rows(w), cols = tern_weight_cols(w);
        float *row = w->fmt != TERN_WF_NONE && rows > 0 && cols > 0 ? malloc(sizeof(float) * (size_t)cols) : NULL;
        if (row) {
            tern_weight_row(w, 0, row);
            tern_weight_row(w, rows - 1, row);
        }
        free(row);
    }
    tern_err_free(e);
    tern_weights_free(gw);
    tern_quant_config_free(qc);
    tern_checkpoint_close(ck);
    json_decref(config);
    return 0;
}
