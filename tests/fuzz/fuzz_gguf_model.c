/* fuzz_gguf_model.c — fuzz target for GGUF models: arbitrary bytes parsed as GGUF, read as a Gemma 4 model
 * (metadata to config, tensors renamed) and bound to the tensor list, as loading does: a hostile file (counts,
 * per-layer arrays, shapes, types, a rope_freqs tensor of the wrong size) must end in an error, never a crash. A
 * bound weight's first and last rows are read as the forward reads them (block formats dequantized). */
#include <stdint.h>
#include <stdlib.h>

#include "formats/gguf.h"
#include "formats/quant_config.h"
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
    json_t *config;
    tern_checkpoint *ck;
    if ((e = tern_gemma4_gguf_from(g, &config, &ck))) {
        tern_err_free(e);
        return 0;
    }
    tern_gemma4_config c;
    tern_quant_config *qc = NULL;
    tern_gemma4_weights *gw = NULL;
    e = tern_gemma4_config_parse(config, &c);
    if (!e)
        e = tern_quant_config_parse(config, &qc);
    if (!e)
        e = tern_gemma4_bind(&c, qc, ck, &gw);
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
    tern_gemma4_weights_free(gw);
    tern_quant_config_free(qc);
    tern_checkpoint_close(ck);
    json_decref(config);
    return 0;
}
