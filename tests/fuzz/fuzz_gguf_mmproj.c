/* fuzz_gguf_mmproj.c — fuzz target for GGUF multimodal projector files: arbitrary bytes parsed as GGUF and read as
 * Gemma 4's audio tower (clip.audio.* keys to config, tensors renamed, shapes checked, weights bound), as loading an
 * mmproj file does: a hostile file must end in an error, never a crash. A tower that loads encodes a few frames of
 * silence. The seed (scripts/gguf/mmproj-files.sh) is llama.cpp's conversion of the audio oracle's tower, cut to one
 * block. */
#include <stdint.h>
#include <stdlib.h>

#include "formats/gguf.h"
#include "models/audio_encoder.h"
#include "models/gemma4_audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_gguf *g;
    tern_err *e = tern_gguf_parse(data, size, "fuzz-mmproj.gguf", &g);
    if (e) {
        tern_err_free(e);
        return 0;
    }
    void *tower = NULL;
    if ((e = tern_gemma4_audio_gguf_from(g, &tower))) {
        tern_err_free(e);
        return 0;
    }
    const tern_audio_arch *a = &tern_audio_arch_gemma4;
    enum { FRAMES = 8 };
    float mel[FRAMES * 128] = {0};
    const size_t tokens = a->tokens(tower, FRAMES);
    const int64_t dim = a->dim(tower);
    float *out = dim > 0 && dim < (1 << 16) ? malloc((size_t)dim * tokens * sizeof *out) : NULL;
    if (out)
        tern_err_free(a->run(tower, NULL, mel, FRAMES, out));
    free(out);
    a->free(tower);
    return 0;
}
