/* decode.c — the audio dispatcher: any supported bytes → mono 16 kHz float, at most 30 s (or what the caller
 * asks for, when it encodes a long clip in 30 s windows).
 *
 * The format is decided by content: RIFF/WAVE magic goes to our WAV parser, everything else to
 * libav. A declared type (file name, MIME type, a request's "format" field) is never consulted, so
 * a mislabelled upload still decodes. Decoding stops a little past 30 s of native-rate audio: the
 * resampler's filter reaches only a few milliseconds ahead, so the first 480 000 output samples
 * are the same as if the whole file had been decoded, and a long upload costs no more than 30 s. */
#include <math.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"

tern_err *tern_audio_decode(const void *data, size_t len, double timeout_s, tern_pcm *out) {
    return tern_audio_decode_long(data, len, timeout_s, TERN_AUDIO_MAX_SAMPLES, out);
}

tern_err *tern_audio_decode_long(const void *data, size_t len, double timeout_s, size_t max_samples, tern_pcm *out) {
    memset(out, 0, sizeof *out);
    /* Native-rate audio to decode so that max_samples at 16 kHz can be produced: 100 ms of margin. */
    const double DECODE_SECONDS = (double)max_samples / TERN_AUDIO_RATE + 0.1;
    tern_pcm native = {0};
    tern_err *err = NULL;
    if (tern_audio_is_wav(data, len)) {
        err = tern_wav_decode(data, len, DECODE_SECONDS, &native);
        if (err && err->code == TERN_EUNSUPPORTED) {
            /* Well-formed WAV our parser does not read (µ-law, A-law, ADPCM, MP3-in-WAV…): libav
             * may. If it cannot either, the WAV parser's reason is the more useful one. */
            tern_err *av = tern_audio_decode_container(data, len, timeout_s, DECODE_SECONDS, &native);
            if (av)
                tern_err_free(av);
            else {
                tern_err_free(err);
                err = NULL;
            }
        }
    } else {
        err = tern_audio_decode_container(data, len, timeout_s, DECODE_SECONDS, &native);
    }
    if (err)
        return err;

    if (native.rate == TERN_AUDIO_RATE) {
        *out = native; /* 16 kHz passes through untouched */
    } else {
        err = tern_audio_resample(native.samples, native.n, native.rate, TERN_AUDIO_RATE, out);
        tern_pcm_free(&native);
        if (err)
            return err;
    }
    out->rate = TERN_AUDIO_RATE;
    if (out->n > max_samples)
        out->n = max_samples;
    /* Finite but huge float samples (a hostile float WAV) overflow in resampling; nothing non-finite may reach
     * the features. */
    for (size_t i = 0; i < out->n; i++)
        if (!isfinite(out->samples[i])) {
            tern_pcm_free(out);
            return tern_errf(TERN_EFORMAT, "the audio decodes to non-finite sample values (float samples far "
                                           "outside [-1, 1]?)");
        }
    return NULL;
}

tern_err *tern_audio_decode_file(const char *path, double timeout_s, tern_pcm *out) {
    memset(out, 0, sizeof *out);
    tern_mmap m;
    TERN_TRY(tern_mmap_open(path, &m));
    tern_err *err = tern_audio_decode(m.data, m.size, timeout_s, out);
    tern_mmap_close(&m);
    return tern_err_wrap(err, "%s", path);
}
