/* fuzz_gguf_mmproj_vision.c — fuzz target for GGUF multimodal projector files read as Gemma 4's vision tower
 * (clip.vision.* keys and tensor shapes to config, tensors renamed, the patch convolution reordered, weights bound),
 * as loading an mmproj file does: a hostile file must end in an error, never a crash. A tower that loads plans and
 * encodes a small gray image when its shape allows. The seeds (scripts/gguf/mmproj-files.sh) are llama.cpp's F16
 * conversion of the vision reference's tower cut to one layer, and an 80 KB copy with that layer's tensors cut
 * smaller (the fuzzer grows its corpus from the smallest file that reaches the same code). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "models/gemma4_vision.h"
#include "models/vision_encoder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_gguf *g;
    tern_err *e = tern_gguf_parse(data, size, "fuzz-mmproj.gguf", &g);
    if (e) {
        tern_err_free(e);
        return 0;
    }
    void *tower = NULL;
    if ((e = tern_gemma4_vision_gguf_from(g, &tower))) {
        tern_err_free(e);
        return 0;
    }
    const tern_vision_arch *a = &tern_vision_arch_gemma4;
    tern_vision_plan p;
    /* A budget of 4 soft tokens (2 x 2 pooled cells, not one Gemma offers): the same code as 70 tokens at 1/17 of the
     * multiplying, so the fuzzer's time goes to the files. */
    e = a->plan(tower, 48, 48, 4, &p);
    const int64_t dim = a->dim(tower);
    /* Only small towers run: a file may claim any width, and the fuzzer should not spend its time multiplying. */
    if (!e && p.w <= 512 && p.h <= 512 && dim > 0 && dim < (1 << 12) && a->work_bytes(tower, p.tokens) < (64u << 20)) {
        uint8_t *rgb = malloc((size_t)p.w * (size_t)p.h * 3);
        float *out = malloc((size_t)dim * p.tokens * sizeof *out);
        if (rgb && out) {
            memset(rgb, 128, (size_t)p.w * (size_t)p.h * 3);
            tern_err_free(a->run(tower, NULL, rgb, &p, out));
        }
        free(rgb);
        free(out);
    }
    tern_err_free(e);
    a->free(tower);
    return 0;
}
