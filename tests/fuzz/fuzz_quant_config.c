/* fuzz_quant_config.c — fuzz target for the config.json quantization parser and shape inference: any bytes
 * that parse as JSON go through tern_quant_config_parse and lookups of every key (and its prefix variants);
 * the first bytes also drive tern_quant_infer and, when it accepts, a small dequantization. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/json_util.h"
#include "formats/quant_config.h"
#include "tensor/quant_mlx.h"

static void lookup_all(const tern_quant_config *qc, const json_t *sec) {
    static const char *const prefixes[] = {"", "model.", "language_model.", "model.language_model.",
                                           "language_model.model."};
    const char *key;
    json_t *v;
    char path[512];
    json_object_foreach((json_t *)sec, key, v) {
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
            snprintf(path, sizeof path, "%s%s", prefixes[i], key);
            tern_quant_params p = tern_quant_config_lookup(qc, path);
            if (p.quantized && (p.bits < 2 || p.bits > 8 || p.group_size < 8))
                __builtin_trap(); /* a parsed config must only hand out valid parameters */
        }
    }
}

static int64_t read_i64(const uint8_t *d) {
    int64_t v;
    memcpy(&v, d, 8);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *root = NULL;
    tern_err *e = tern_json_load_buf((const char *)data, size, "fuzz.json", &root);
    if (e) {
        tern_err_free(e);
    } else {
        tern_quant_config *qc = NULL;
        e = tern_quant_config_parse(root, &qc);
        if (e) {
            tern_err_free(e);
        } else {
            tern_quant_config_lookup(qc, "model.language_model.layers.0.mlp.down_proj");
            tern_quant_config_lookup(qc, "");
            const char *names[] = {"quantization", "quantization_config"};
            for (int i = 0; i < 2; i++) {
                const json_t *sec = json_object_get(root, names[i]);
                if (json_is_object(sec))
                    lookup_all(qc, sec);
            }
            tern_quant_config_free(qc);
        }
        json_decref(root);
    }

    /* Shape inference on arbitrary sizes, then a dequantization of a row built from the input bytes. */
    if (size >= 24) {
        int64_t in = read_i64(data) % 4096, wc = read_i64(data + 8) % 4096, sc = read_i64(data + 16) % 4096;
        int bits, group;
        e = tern_quant_infer(in, wc, sc, &bits, &group);
        if (e) {
            tern_err_free(e);
        } else {
            uint32_t row[4096 * 8 / 32];
            float scales[4096 / 8], biases[4096 / 8], out[4096];
            memset(row, 0, sizeof row);
            size_t n = size - 24 < sizeof row ? size - 24 : sizeof row;
            memcpy(row, data + 24, n);
            for (int64_t g = 0; g < in / group; g++)
                scales[g] = 0.01f * (float)g, biases[g] = -1.0f;
            tern_mlx_dequantize_row(row, scales, biases, TERN_DT_F32, bits, group, in, out);
            float x[4096];
            for (int64_t k = 0; k < in; k++)
                x[k] = out[k];
            tern_mlx_quantize_row(x, in, bits, group, TERN_DT_F32, row, scales, biases);
        }
    }
    return 0;
}
