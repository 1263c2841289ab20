/* resample.c — sample-rate conversion of mono float audio with libswresample.
 *
 * Why not linear interpolation (what the seed did): downsampling 44.1/48 kHz speech to 16 kHz
 * without a low-pass folds everything above 8 kHz back into the band the mel bank sees. swr's
 * default engine is a windowed-sinc polyphase filter (32 taps at the lower rate, cutoff 0.97 of
 * its Nyquist), which removes that, and it compensates its own delay, so output sample i is the
 * signal at time i / rate_out and the output has about n * rate_out / rate_in samples. */
#include <stdlib.h>
#include <string.h>

#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>

#include "audio/audio.h"

static TERN_MUST_CHECK tern_err *av_fail(int rc, const char *what) {
    char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(rc, msg, sizeof msg);
    return tern_errf(TERN_EINTERNAL, "resample: %s failed: %s", what, msg);
}

tern_err *tern_audio_resample(const float *in, size_t n, int rate_in, int rate_out, tern_pcm *out) {
    memset(out, 0, sizeof *out);
    if (rate_in < TERN_AUDIO_MIN_RATE || rate_in > TERN_AUDIO_MAX_RATE || rate_out < TERN_AUDIO_MIN_RATE ||
        rate_out > TERN_AUDIO_MAX_RATE)
        return tern_errf(TERN_EINVAL, "resample: rates %d -> %d Hz outside the supported %d..%d Hz", rate_in,
                         rate_out, TERN_AUDIO_MIN_RATE, TERN_AUDIO_MAX_RATE);
    out->rate = rate_out;
    if (n == 0)
        return NULL;
    if (rate_in == rate_out) {
        out->samples = malloc(n * sizeof(float));
        if (!out->samples)
            return tern_errf(TERN_ENOMEM, "resample: cannot allocate %zu samples", n);
        memcpy(out->samples, in, n * sizeof(float));
        out->n = n;
        return NULL;
    }
    /* swr counts samples in int; feed in slices and bound the total output size up front. */
    double expect = (double)n * rate_out / rate_in;
    if (expect > (double)(SIZE_MAX / sizeof(float)) / 2 || expect > 1e9)
        return tern_errf(TERN_EINVAL, "resample: %zu samples at %d Hz would make %.0f at %d Hz, too many", n, rate_in,
                         expect, rate_out);

    SwrContext *swr = NULL;
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    int rc = swr_alloc_set_opts2(&swr, &mono, AV_SAMPLE_FMT_FLT, rate_out, &mono, AV_SAMPLE_FMT_FLT, rate_in, 0,
                                 NULL);
    if (rc < 0)
        return av_fail(rc, "swr_alloc_set_opts2");
    if ((rc = swr_init(swr)) < 0) {
        swr_free(&swr);
        return av_fail(rc, "swr_init");
    }

    size_t cap = (size_t)expect + 256; /* the flush adds at most the filter's delay */
    float *buf = malloc(cap * sizeof(float));
    if (!buf) {
        swr_free(&swr);
        return tern_errf(TERN_ENOMEM, "resample: cannot allocate %zu samples", cap);
    }
    size_t got = 0, pos = 0;
    const size_t slice = 1 << 20;
    tern_err *err = NULL;
    for (;;) {
        size_t take = n - pos < slice ? n - pos : slice;
        int64_t room = swr_get_out_samples(swr, (int)take);
        if (room < 0) {
            err = av_fail((int)room, "swr_get_out_samples");
            break;
        }
        if (got + (size_t)room > cap) {
            size_t ncap = got + (size_t)room + 256;
            float *nb = realloc(buf, ncap * sizeof(float));
            if (!nb) {
                err = tern_errf(TERN_ENOMEM, "resample: cannot allocate %zu samples", ncap);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        uint8_t *dst = (uint8_t *)(buf + got);
        const uint8_t *src = (const uint8_t *)(in + pos);
        /* take == 0 passes NULL input: that drains the filter's tail (the flush). */
        rc = swr_convert(swr, &dst, (int)(cap - got), take ? &src : NULL, (int)take);
        if (rc < 0) {
            err = av_fail(rc, "swr_convert");
            break;
        }
        got += (size_t)rc;
        if (take == 0)
            break;
        pos += take;
    }
    swr_free(&swr);
    if (err) {
        free(buf);
        return err;
    }
    if (got == 0) {
        free(buf);
        return NULL;
    }
    out->samples = buf;
    out->n = got;
    return NULL;
}
