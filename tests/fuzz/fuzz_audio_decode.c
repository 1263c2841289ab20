/* fuzz_audio_decode.c — fuzz target for the audio dispatcher tern_audio_decode: any bytes go the
 * way an upload does (RIFF/WAVE to tern's parser, everything else to libav from memory, then the
 * resampler and the 30 s cut). They must decode or fail cleanly: no crash, no out-of-bounds read,
 * no leak; a failure leaves the output zeroed with a message; a success is mono 16 kHz, finite,
 * at most TERN_AUDIO_MAX_SAMPLES long, with samples allocated exactly when there are any (a WAV
 * with an empty data chunk decodes to zero samples). The container decode gets a short time limit
 * so a pathological input costs little; running out of time is a clean failure too. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "audio/audio.h"

#define FUZZ_DECODE_TIMEOUT_S 0.25

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_pcm pcm = {(float *)(uintptr_t)1, 12345, 7}; /* stale values the decoder must overwrite */
    tern_err *err = tern_audio_decode(data, size, FUZZ_DECODE_TIMEOUT_S, &pcm);
    if (err) {
        if (pcm.samples || pcm.n || pcm.rate)
            abort(); /* a failed decode leaves nothing behind */
        if (!err->msg || !err->msg[0])
            abort(); /* and says why */
        tern_err_free(err);
        return 0;
    }
    if (pcm.rate != TERN_AUDIO_RATE || pcm.n > TERN_AUDIO_MAX_SAMPLES || !pcm.n != !pcm.samples)
        abort();
    for (size_t i = 0; i < pcm.n; i++)
        if (!isfinite(pcm.samples[i]))
            abort();
    tern_pcm_free(&pcm);
    if (pcm.samples || pcm.n)
        abort();
    return 0;
}
