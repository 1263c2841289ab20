/* test_audio_container.c — non-WAV containers through libav, made at test time: AIFF, FLAC,
 * Ogg/Vorbis and µ-law WAV by sox; MP3, Ogg/Opus, M4A/AAC and WebM/Opus by libav's own encoders
 * (audio_testutil.c writes them to memory). Each must decode to mono 16 kHz with the right
 * length, level and pitch; stereo channels are mean-mixed; corrupt, truncated, empty and
 * unknown input fail with a message naming the supported containers; a decode over its time
 * limit is abandoned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "audio_testutil.h"
#include "testutil.h"

/* ---- checks on decoded audio ---------------------------------------------------------------- */

/* Power of x at `hz` (Goertzel), normalised so a full-length sine of amplitude A gives ~A^2/4. */
static double tone_power(const float *x, size_t a, size_t b, double hz) {
    double w = 2 * M_PI * hz / TERN_AUDIO_RATE, c = 2 * cos(w), s1 = 0, s2 = 0;
    for (size_t i = a; i < b; i++) {
        double s0 = x[i] + c * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    double p = s1 * s1 + s2 * s2 - c * s1 * s2;
    double n = (double)(b - a);
    return p / (n * n);
}

static double rms(const float *x, size_t a, size_t b) {
    double s = 0;
    for (size_t i = a; i < b; i++)
        s += (double)x[i] * x[i];
    return sqrt(s / (double)(b - a));
}

/* Decoded audio of `seconds` of a sine at `hz` with mono amplitude `amp`: length within
 * `slack` samples (encoder padding), level within 10%, and the energy at `hz`, not elsewhere. */
static void check_tone(const char *what, const tern_pcm *p, double seconds, double hz, double amp, size_t slack) {
    double expect = seconds * TERN_AUDIO_RATE;
    if (p->rate != TERN_AUDIO_RATE || fabs((double)p->n - expect) > (double)slack)
        fail_msg("%s: %zu samples at %d Hz, expected %.0f +- %zu at 16000", what, p->n, p->rate, expect, slack);
    size_t a = p->n / 4, b = p->n * 3 / 4;
    double r = rms(p->samples, a, b), want = amp / sqrt(2.0);
    if (fabs(r - want) > 0.1 * want)
        fail_msg("%s: rms %g, expected %g", what, r, want);
    double on = tone_power(p->samples, a, b, hz), off = tone_power(p->samples, a, b, hz * 1.37);
    if (!(on > 100 * off) || on < 0.5 * amp * amp / 4)
        fail_msg("%s: tone power %g at %g Hz vs %g off-tone", what, on, hz, off);
}

static tern_pcm decode_path(const char *path) {
    tern_pcm p;
    TU_OK(tern_audio_decode_file(path, 0, &p));
    return p;
}

/* ---- tones encoded by libav's encoders (audio_testutil.c) ----------------------------------- */

/* Encodes `seconds` of a sine at `hz` (left amplitude amp_l, every other channel amp_r) with
 * `codec` in `muxer` at 128 kbit/s. */
static uint8_t *libav_encode(const char *muxer, const char *codec, int rate, int channels, double seconds, double hz,
                             double amp_l, double amp_r, size_t *len) {
    size_t frames = (size_t)(seconds * rate);
    float *x = malloc(frames * (size_t)channels * sizeof(float));
    assert_non_null(x);
    for (size_t i = 0; i < frames; i++) {
        double ph = sin(2 * M_PI * hz * (double)i / rate);
        for (int c = 0; c < channels; c++)
            x[i * (size_t)channels + (size_t)c] = (float)(ph * (c == 0 ? amp_l : amp_r));
    }
    uint8_t *data = atu_libav_encode(muxer, codec, rate, channels, x, frames, 128000, len);
    free(x);
    return data;
}

/* ---- containers made by sox ----------------------------------------------------------------- */

static const char *tone_wav(const char *dir, int rate, int channels, double seconds, double hz) {
    static char path[4096];
    char args[16384];
    snprintf(path, sizeof path, "%s/tone_%d_%d.wav", dir, rate, channels);
    snprintf(args, sizeof args, "-n -r %d -c %d -b 16 '%s' synth %g sine %g vol 0.5", rate, channels, path, seconds, hz);
    atu_sox(args);
    return path;
}

static void test_sox_containers(void **state) {
    const char *dir = tu_tmpdir("audio_sox");
    char src[4096], args[16384], path[4096];
    snprintf(src, sizeof src, "%s", tone_wav(dir, 44100, 2, 1.0, 440.0));
    static const struct {
        const char *ext, *opts;
        size_t slack;
    } kinds[] = {
        {"aiff", "", 2}, {"flac", "", 2}, {"ogg", "", 400}, {"caf", "", 2}, {"wv", "", 2},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        snprintf(path, sizeof path, "%s/tone.%s", dir, kinds[k].ext);
        snprintf(args, sizeof args, "'%s' %s '%s'", src, kinds[k].opts, path);
        atu_sox(args);
        tern_pcm p = decode_path(path);
        check_tone(kinds[k].ext, &p, 1.0, 440.0, 0.5, kinds[k].slack);
        tern_pcm_free(&p);
    }

    /* µ-law in a RIFF/WAVE file: the WAV parser declines the codec, libav decodes it. */
    snprintf(path, sizeof path, "%s/tone_ulaw.wav", dir);
    snprintf(args, sizeof args, "'%s' -e u-law '%s'", src, path);
    atu_sox(args);
    tern_pcm p = decode_path(path);
    check_tone("u-law wav", &p, 1.0, 440.0, 0.5, 2);
    tern_pcm_free(&p);

    /* A FLAC file named .wav still decodes: content decides, not the name. */
    snprintf(path, sizeof path, "%s/actually_flac.wav", dir);
    snprintf(args, sizeof args, "'%s' -t flac '%s'", src, path);
    atu_sox(args);
    p = decode_path(path);
    check_tone("flac named .wav", &p, 1.0, 440.0, 0.5, 2);
    tern_pcm_free(&p);

    /* 16 kHz FLAC passes the resampler by: the samples are the 16-bit values exactly. */
    snprintf(src, sizeof src, "%s", tone_wav(dir, 16000, 1, 0.5, 1000.0));
    snprintf(path, sizeof path, "%s/tone16k.flac", dir);
    snprintf(args, sizeof args, "'%s' '%s'", src, path);
    atu_sox(args);
    tern_pcm a = decode_path(src), b = decode_path(path);
    assert_int_equal(a.n, 8000);
    assert_int_equal(b.n, 8000);
    assert_memory_equal(a.samples, b.samples, 8000 * sizeof(float));
    tern_pcm_free(&a);
    tern_pcm_free(&b);
}

static void test_stereo_mean_mixdown(void **state) {
    /* Lossless stereo with the right channel inverted: the mean is silence. */
    const char *dir = tu_tmpdir("audio_mix");
    char src[4096], args[16384], path[4096];
    snprintf(src, sizeof src, "%s", tone_wav(dir, 48000, 2, 0.5, 300.0));
    snprintf(path, sizeof path, "%s/inverted.flac", dir);
    snprintf(args, sizeof args, "'%s' '%s' remix 1 1v-1", src, path);
    atu_sox(args);
    tern_pcm p = decode_path(path);
    assert_int_equal(p.n, 8000);
    assert_true(rms(p.samples, 0, p.n) < 1e-4);
    tern_pcm_free(&p);

    /* Left only: the mean is half the level. */
    snprintf(path, sizeof path, "%s/left_only.aiff", dir);
    snprintf(args, sizeof args, "'%s' '%s' remix 1 0", src, path);
    atu_sox(args);
    p = decode_path(path);
    check_tone("left-only aiff", &p, 0.5, 300.0, 0.25, 2);
    tern_pcm_free(&p);
}

/* ---- containers made by libav's encoders ---------------------------------------------------- */

static void test_libav_encoded_containers(void **state) {
    static const struct {
        const char *what, *muxer, *codec;
        int rate, channels;
        size_t slack;
    } kinds[] = {
        {"mp3", "mp3", "libmp3lame", 44100, 2, 1200},
        {"ogg/opus", "ogg", "libopus", 48000, 2, 400},
        {"m4a/aac", "ipod", "aac", 44100, 2, 800},
        {"webm/opus", "webm", "libopus", 48000, 1, 400},
        {"mp4/alac", "mp4", "alac", 32000, 2, 2},
        {"ogg/vorbis 4ch", "ogg", "libvorbis", 48000, 4, 400},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t len;
        uint8_t *data = libav_encode(kinds[k].muxer, kinds[k].codec, kinds[k].rate, kinds[k].channels, 1.5, 660.0,
                                     0.5, 0.5, &len);
        tern_pcm p;
        TU_OK(tern_audio_decode(data, len, 0, &p));
        check_tone(kinds[k].what, &p, 1.5, 660.0, 0.5, kinds[k].slack);
        tern_pcm_free(&p);
        free(data);
    }
}

static void test_long_input_stops_at_30s(void **state) {
    /* 40 s of MP3: decoding stops a little past 30 s and the result is exactly 480 000 samples. */
    size_t len;
    uint8_t *data = libav_encode("mp3", "libmp3lame", 22050, 1, 40.0, 500.0, 0.5, 0.5, &len);
    tern_pcm p;
    TU_OK(tern_audio_decode(data, len, 0, &p));
    assert_int_equal(p.n, TERN_AUDIO_MAX_SAMPLES);
    check_tone("40 s mp3", &p, 30.0, 500.0, 0.5, 0);
    tern_pcm_free(&p);

    /* The container decoder alone honours max_seconds at the native rate. */
    TU_OK(tern_audio_decode_container(data, len, 0, 2.0, &p));
    assert_int_equal(p.rate, 22050);
    assert_int_equal(p.n, 44100);
    tern_pcm_free(&p);
    free(data);
}

/* ---- failures ------------------------------------------------------------------------------- */

static void test_corrupt_and_unknown(void **state) {
    tern_pcm p;
    uint8_t junk[4096];
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < sizeof junk; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        junk[i] = (uint8_t)r;
    }
    TU_FAILS_WITH(tern_audio_decode(junk, sizeof junk, 0, &p), "supported containers: WAV");
    assert_null(p.samples);
    const char *text = "this is a text file, not audio\n";
    TU_FAILS_WITH(tern_audio_decode(text, strlen(text), 0, &p), "supported containers");
    TU_FAILS_WITH(tern_audio_decode("", 0, 0, &p), "empty");

    /* An encoded file cut down to its first bytes, and one with its middle overwritten. */
    size_t len;
    uint8_t *flac = libav_encode("flac", "flac", 44100, 1, 1.0, 440.0, 0.5, 0.5, &len);
    tern_err *e = tern_audio_decode(flac, 42, 0, &p);
    assert_non_null(e);
    assert_null(p.samples);
    tern_err_free(e);
    for (size_t i = len / 3; i < 2 * len / 3; i++)
        flac[i] = (uint8_t)(i * 131);
    e = tern_audio_decode(flac, len, 0, &p);
    if (e) {
        tern_err_free(e);
    } else { /* decoders skip bad frames: whatever survives is bounded and finite */
        assert_true(p.n <= 16000 + 4096);
        for (size_t i = 0; i < p.n; i++)
            assert_true(isfinite(p.samples[i]));
        tern_pcm_free(&p);
    }
    free(flac);

    /* A playlist is not audio: the hls/concat demuxers are not on the whitelist. */
    const char *m3u = "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n/etc/passwd\n#EXT-X-ENDLIST\n";
    TU_FAILS_WITH(tern_audio_decode(m3u, strlen(m3u), 0, &p), "supported containers");
    const char *concat = "ffconcat version 1.0\nfile /etc/passwd\n";
    TU_FAILS_WITH(tern_audio_decode(concat, strlen(concat), 0, &p), "supported containers");
}

static void test_timeout(void **state) {
    size_t len;
    uint8_t *mp3 = libav_encode("mp3", "libmp3lame", 44100, 1, 1.0, 440.0, 0.5, 0.5, &len);
    tern_pcm p;
    tern_err *e = tern_audio_decode(mp3, len, 1e-9, &p);
    assert_non_null(e);
    if (e->code != TERN_ECANCELLED)
        fail_msg("expected a timeout, got: %s", e->msg);
    assert_int_equal(e->code, TERN_ECANCELLED);
    TU_FAILS_WITH(e, "time limit");
    assert_null(p.samples);
    /* The same bytes with a real budget decode fine. */
    TU_OK(tern_audio_decode(mp3, len, 5.0, &p));
    check_tone("mp3", &p, 1.0, 440.0, 0.5, 1200);
    tern_pcm_free(&p);
    free(mp3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sox_containers),
        cmocka_unit_test(test_stereo_mean_mixdown),
        cmocka_unit_test(test_libav_encoded_containers),
        cmocka_unit_test(test_long_input_stops_at_30s),
        cmocka_unit_test(test_corrupt_and_unknown),
        cmocka_unit_test(test_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
