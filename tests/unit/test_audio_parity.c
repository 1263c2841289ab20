/* test_audio_parity.c — tern's log-mel against an independent implementation: the npm package
 * @huggingface/transformers (Gemma4AudioFeatureExtractor), run with node by
 * tests/oracles/audio_features.mjs. Speech comes from espeak-ng (decoded and resampled by tern),
 * the rest are synthetic signals of the lengths where framing goes wrong first.
 *
 * Equal: frame counts, masks, valid frames, soft-token counts. Close: features, max |diff| < 1e-3.
 * The remaining difference is the window: the Python reference (which tern matches) builds its
 * Hann window in float32, the JavaScript port in float64, and log(x + 1e-3) amplifies that in
 * near-silent bins; the port also squares magnitudes into a float32 array and runs the mel
 * product in float32. Each signal's max/mean difference is printed, and for two signals the test
 * shows where the difference comes from: a slow direct-DFT reference with a float64 window agrees
 * with the JavaScript port, and the same reference with the Python (float32) window agrees with
 * tern, both to float32 output rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "testutil.h"

typedef struct signal {
    const char *name;
    float *x;
    size_t n;
} signal;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* A speech-like synthetic: a gliding harmonic tone, noise bursts, and stretches of near-silence
 * (the near-silent bins are where window rounding shows). */
static float *synth(size_t n, int kind) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    double phase = 0.0;
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / TERN_AUDIO_RATE, v = 0.0;
        switch (kind) {
        case 0: { /* glide + harmonics + a little noise, gated on and off every 0.25 s */
            double f0 = 120.0 + 80.0 * sin(2 * M_PI * 0.7 * t);
            phase += 2 * M_PI * f0 / TERN_AUDIO_RATE;
            for (int h = 1; h <= 12; h++)
                v += sin(h * phase) / h;
            v = 0.3 * v + 0.02 * (urand() - 0.5);
            if (fmod(t, 0.5) > 0.25)
                v *= 1e-3;
            break;
        }
        case 1: v = urand() * 2.0 - 1.0; break;                    /* white noise, full scale */
        case 2: v = 0.5 * sin(2 * M_PI * 1000.0 * t); break;        /* pure tone */
        case 3: v = (i % 1600 == 0) ? 0.9 : 0.0; break;             /* clicks in silence */
        case 4: v = 1e-4 * (urand() - 0.5); break;                  /* almost silence */
        }
        x[i] = (float)v;
    }
    return x;
}

/* Slow reference for frame f's log-mel: direct DFT, dense HTK bank, float64 or Python window. */
static void reference_frame(const float *x, size_t n, size_t f, int f64_window, double out[128]) {
    static double bank[257][128], cosv[512], sinv[512];
    static int ready;
    if (!ready) {
        double pts[130], top = 2595.0 * log10(1.0 + 8000.0 / 700.0);
        for (int i = 0; i < 130; i++)
            pts[i] = 700.0 * (pow(10.0, top * i / 129.0 / 2595.0) - 1.0);
        for (int k = 0; k < 257; k++)
            for (int m = 0; m < 128; m++) {
                double fk = 8000.0 * k / 256.0;
                double v = fmin((fk - pts[m]) / (pts[m + 1] - pts[m]), (pts[m + 2] - fk) / (pts[m + 2] - pts[m + 1]));
                bank[k][m] = v > 0 ? v : 0;
            }
        for (int i = 0; i < 512; i++) {
            cosv[i] = cos(2 * M_PI * i / 512);
            sinv[i] = -sin(2 * M_PI * i / 512);
        }
        ready = 1;
    }
    const float *w32 = tern_logmel_window();
    double fr[320];
    for (int i = 0; i < 320; i++) {
        long idx = (long)(f * 160) + i - 160;
        float v = idx >= 0 && (size_t)idx < n ? x[idx] : 0.0f;
        fr[i] = f64_window ? v * (0.5 - 0.5 * cos(2 * M_PI * i / 320.0)) : (double)(v * w32[i]);
    }
    double mel[128] = {0};
    for (int k = 0; k < 257; k++) {
        double re = 0, im = 0;
        for (int i = 0; i < 320; i++) {
            re += fr[i] * cosv[(k * i) & 511];
            im += fr[i] * sinv[(k * i) & 511];
        }
        double mag = hypot(re, im);
        for (int m = 0; m < 128; m++)
            mel[m] += mag * bank[k][m];
    }
    for (int m = 0; m < 128; m++)
        out[m] = log(mel[m] + 1e-3);
}

/* max |a - reference| over the valid frames of a signal; a is [frames][128] float32. */
static double diff_to_reference(const float *a, const float *x, size_t n, size_t valid, int f64_window) {
    double maxd = 0, ref[128];
    for (size_t f = 0; f < valid; f++) {
        reference_frame(x, n, f, f64_window, ref);
        for (int m = 0; m < 128; m++)
            maxd = fmax(maxd, fabs(a[f * 128 + m] - ref[m]));
    }
    return maxd;
}

static void write_f32(const char *path, const float *x, size_t n) {
    tern_err *e = tern_write_file(path, x, n * sizeof(float));
    if (e)
        fail_msg("%s", tern_err_msg(e));
}

static void test_parity_with_transformers_js(void **state) {
    const char *dir = tu_tmpdir("audio_parity");
    const char *src = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";

    /* Speech: espeak-ng writes 22.05 kHz 16-bit WAV; tern decodes and resamples it. */
    char cmd[8192], path[4096];
    snprintf(path, sizeof path, "%s/speech.wav", dir);
    snprintf(cmd, sizeof cmd,
             "espeak-ng -w '%s' 'The quick brown fox jumps over the lazy dog. Audio features for Gemma four, "
             "computed in C and checked against JavaScript.' 2>&1",
             path);
    char *outp = NULL;
    int rc = tu_run(cmd, &outp);
    if (rc != 0)
        fail_msg("espeak-ng failed (%d): %s (scripts/install-deps installs it)", rc, outp ? outp : "");
    free(outp);
    tern_pcm speech;
    TU_OK(tern_audio_decode_file(path, 0, &speech));
    assert_int_equal(speech.rate, TERN_AUDIO_RATE);
    assert_true(speech.n > 16000);

    static const size_t lengths[] = {1, 127, 128, 160, 161, 320, 321, 481, 641, 1000, 16000, 48037};
    enum { NLEN = sizeof lengths / sizeof lengths[0] };
    signal sigs[NLEN * 2 + 8];
    int ns = 0;
    static char names[64][48];
    sigs[ns++] = (signal){"speech (espeak-ng)", speech.samples, speech.n};
    for (int i = 0; i < NLEN; i++) {
        snprintf(names[ns], sizeof names[ns], "synthetic n=%zu", lengths[i]);
        sigs[ns] = (signal){names[ns], synth(lengths[i], 0), lengths[i]};
        ns++;
    }
    sigs[ns++] = (signal){"white noise n=32000", synth(32000, 1), 32000};
    sigs[ns++] = (signal){"1 kHz tone n=24000", synth(24000, 2), 24000};
    sigs[ns++] = (signal){"clicks n=20000", synth(20000, 3), 20000};
    sigs[ns++] = (signal){"near-silence n=16000", synth(16000, 4), 16000};
    sigs[ns++] = (signal){"synthetic n=500000 (>30 s)", synth(500000, 0), 500000};
    sigs[ns++] = (signal){"synthetic n=480000 (30 s)", synth(480000, 0), 480000};

    /* One node run for all signals: importing the package dominates its cost. */
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "node '%s/tests/oracles/audio_features.mjs'", src);
    for (int s = 0; s < ns; s++) {
        snprintf(path, sizeof path, "%s/sig%d.f32", dir, s);
        write_f32(path, sigs[s].x, sigs[s].n);
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " '%s/sig%d.f32' '%s/sig%d.bin'", dir, s, dir, s);
    }
    snprintf(cmd + len, sizeof cmd - len, " 2>&1");
    rc = tu_run(cmd, &outp);
    if (rc != 0)
        fail_msg("node oracle failed (%d): %s", rc, outp ? outp : "");
    free(outp);

    double worst = 0.0;
    for (int s = 0; s < ns; s++) {
        snprintf(path, sizeof path, "%s/sig%d.bin", dir, s);
        char *blob;
        size_t blen;
        TU_OK(tern_read_file(path, 1u << 30, &blob, &blen));
        assert_true(blen >= 8);
        int32_t frames, bins;
        memcpy(&frames, blob, 4);
        memcpy(&bins, blob + 4, 4);
        assert_int_equal(bins, TERN_AUDIO_MEL_BINS);
        assert_true(frames >= 0);
        assert_int_equal(blen, 8 + (size_t)frames + (size_t)frames * bins * 4);
        const uint8_t *jmask = (const uint8_t *)blob + 8;
        const char *jfeat = blob + 8 + frames;

        tern_logmel m;
        TU_OK(tern_logmel_compute(sigs[s].x, sigs[s].n, NULL, NULL, &m));
        assert_int_equal(m.frames, (size_t)frames);
        size_t jvalid = 0;
        for (int f = 0; f < frames; f++) {
            assert_int_equal(m.mask[f], jmask[f]);
            jvalid += jmask[f];
        }
        assert_int_equal(m.valid_frames, jvalid);
        assert_int_equal(tern_audio_soft_tokens(m.valid_frames), tern_audio_soft_tokens(jvalid));
        double maxd = 0.0, sumd = 0.0;
        for (size_t i = 0; i < (size_t)frames * bins; i++) {
            float jv;
            memcpy(&jv, jfeat + 4 * i, 4);
            double d = fabs((double)m.features[i] - jv);
            sumd += d;
            if (!(d <= maxd))
                maxd = d; /* NaN lands here and fails below */
        }
        double meand = frames ? sumd / ((double)frames * bins) : 0.0;
        print_message("  %-28s frames %5d valid %5zu soft tokens %3zu  max|diff| %.3e  mean %.3e\n", sigs[s].name,
                      frames, m.valid_frames, tern_audio_soft_tokens(m.valid_frames), maxd, meand);
        assert_true(maxd < 1e-3);
        if (maxd > worst)
            worst = maxd;
        if (s == 0 || strstr(sigs[s].name, "tone")) {
            /* Attribute the difference: JavaScript = float64 window, tern = the Python float32 one. */
            float *jf = malloc((size_t)frames * bins * sizeof(float) + 1);
            memcpy(jf, jfeat, (size_t)frames * bins * sizeof(float));
            double js64 = diff_to_reference(jf, sigs[s].x, sigs[s].n, jvalid, 1);
            double tern32 = diff_to_reference(m.features, sigs[s].x, sigs[s].n, jvalid, 0);
            double tern64 = diff_to_reference(m.features, sigs[s].x, sigs[s].n, jvalid, 1);
            print_message("      direct-DFT reference: float64 window vs JavaScript %.2e, float32 (Python) window vs "
                          "tern %.2e; tern vs float64-window reference %.2e\n",
                          js64, tern32, tern64);
            assert_true(js64 < 2e-6);
            assert_true(tern32 < 2e-6);
            free(jf);
        }
        tern_logmel_free(&m);
        free(blob);
    }
    print_message("  worst max|diff| over all signals: %.3e (bound 1e-3)\n", worst);

    /* Zero samples: the Python reference returns 0 frames; the JavaScript port throws
     * ("Invalid typed array length") rather than returning an empty result. tern follows Python. */
    tern_logmel empty;
    TU_OK(tern_logmel_compute(NULL, 0, NULL, NULL, &empty));
    assert_int_equal(empty.frames, 0);
    assert_int_equal(empty.valid_frames, 0);
    assert_null(empty.features);

    for (int s = 0; s < ns; s++)
        free(sigs[s].x); /* speech.samples is sigs[0].x */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_with_transformers_js),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
