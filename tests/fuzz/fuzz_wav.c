/* fuzz_wav.c — fuzz target for the RIFF/WAVE parser: any bytes must parse or fail cleanly (no
 * crash, no out-of-bounds read, no leak), and a successful parse must hold its invariants. What
 * decodes then goes through the log-mel front end, so hostile sample values (denormals, huge
 * floats, full-scale square waves) exercise it too. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "audio/audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int is_wav = tern_audio_is_wav(data, size);
    tern_pcm pcm;
    tern_err *err = tern_wav_decode(data, size, 0, &pcm);
    if (err) {
        if (pcm.samples || pcm.n)
            abort(); /* a failed decode leaves nothing behind */
        tern_err_free(err);
        return 0;
    }
    if (!is_wav || pcm.rate < TERN_AUDIO_MIN_RATE || pcm.rate > TERN_AUDIO_MAX_RATE || pcm.n > size ||
        (pcm.n && !pcm.samples))
        abort();
    for (size_t i = 0; i < pcm.n; i++)
        if (!isfinite(pcm.samples[i]))
            abort();
    size_t n = pcm.n < 8000 ? pcm.n : 8000; /* keep each run fast */
    tern_logmel mel;
    err = tern_logmel_compute(pcm.samples, n, NULL, NULL, &mel);
    if (err || mel.frames != tern_logmel_frame_count(n) || mel.valid_frames != tern_logmel_valid_frames(n))
        abort();
    tern_logmel_free(&mel);
    tern_pcm_free(&pcm);
    return 0;
}
