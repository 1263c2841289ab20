/* test_audio_resample.c — sample-rate conversion: 16 kHz passes through untouched, output length
 * and time alignment, accuracy on an in-band tone, and the anti-aliasing that linear
 * interpolation lacks (a 12 kHz tone at 48 kHz must vanish at 16 kHz, not fold to 4 kHz). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "testutil.h"

static float *tone(size_t n, int rate, double hz, double amp) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(amp * sin(2 * M_PI * hz * (double)i / rate));
    return x;
}

static double rms(const float *x, size_t a, size_t b) {
    double s = 0.0;
    for (size_t i = a; i < b; i++)
        s += (double)x[i] * x[i];
    return sqrt(s / (double)(b - a));
}

static void test_same_rate_is_a_copy(void **state) {
    float in[5] = {0.1f, -0.2f, 0.3f, 1e-20f, -1.0f};
    tern_pcm out;
    TU_OK(tern_audio_resample(in, 5, 16000, 16000, &out));
    assert_int_equal(out.n, 5);
    assert_int_equal(out.rate, 16000);
    assert_ptr_not_equal(out.samples, in);
    assert_memory_equal(out.samples, in, sizeof in);
    tern_pcm_free(&out);

    TU_OK(tern_audio_resample(NULL, 0, 44100, 16000, &out));
    assert_int_equal(out.n, 0);
    assert_null(out.samples);
}

static void test_lengths_and_alignment(void **state) {
    static const int rates[] = {8000, 11025, 22050, 24000, 32000, 44100, 48000, 96000};
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        int rate = rates[r];
        size_t n = (size_t)rate * 2 + 37; /* 2 s and a bit */
        float *x = tone(n, rate, 440.0, 0.5);
        tern_pcm out;
        TU_OK(tern_audio_resample(x, n, rate, 16000, &out));
        double expect = (double)n * 16000 / rate;
        assert_true(fabs((double)out.n - expect) <= 1.0);
        /* Sample i is the tone at time i / 16000: no filter delay left in. */
        double maxerr = 0.0;
        for (size_t i = 200; i + 200 < out.n; i++)
            maxerr = fmax(maxerr, fabs(out.samples[i] - 0.5 * sin(2 * M_PI * 440.0 * (double)i / 16000.0)));
        if (maxerr >= 1e-3)
            fail_msg("%d Hz -> 16 kHz: max error %g on a 440 Hz tone", rate, maxerr);
        tern_pcm_free(&out);
        free(x);
    }
}

static void test_anti_aliasing(void **state) {
    /* 12 kHz is above the 8 kHz Nyquist limit of the output: it must be filtered out. Linear
     * interpolation would fold it to 4 kHz at nearly full amplitude. */
    size_t n = 48000;
    float *x = tone(n, 48000, 12000.0, 0.5);
    tern_pcm out;
    TU_OK(tern_audio_resample(x, n, 48000, 16000, &out));
    assert_true(out.n >= 15999 && out.n <= 16001);
    double r = rms(out.samples, 200, out.n - 200);
    if (r >= 1e-3)
        fail_msg("12 kHz tone leaked through the 48 -> 16 kHz resampler at rms %g (input rms 0.354)", r);
    tern_pcm_free(&out);
    free(x);

    /* ...while a 6 kHz tone (in band) keeps its level. */
    x = tone(n, 48000, 6000.0, 0.5);
    TU_OK(tern_audio_resample(x, n, 48000, 16000, &out));
    r = rms(out.samples, 200, out.n - 200);
    assert_true(fabs(r - 0.5 / sqrt(2.0)) < 0.01);
    tern_pcm_free(&out);
    free(x);
}

static void test_upsampling_and_bounds(void **state) {
    size_t n = 8000;
    float *x = tone(n, 8000, 1000.0, 0.25);
    tern_pcm out;
    TU_OK(tern_audio_resample(x, n, 8000, 16000, &out));
    assert_int_equal(out.n, 16000);
    assert_true(fabs(rms(out.samples, 100, 15900) - 0.25 / sqrt(2.0)) < 0.005);
    tern_pcm_free(&out);

    TU_FAILS_WITH(tern_audio_resample(x, n, 999, 16000, &out), "outside the supported");
    TU_FAILS_WITH(tern_audio_resample(x, n, 8000, 400000, &out), "outside the supported");
    TU_FAILS_WITH(tern_audio_resample(x, n, 0, 16000, &out), "outside the supported");
    assert_null(out.samples);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_rate_is_a_copy),
        cmocka_unit_test(test_lengths_and_alignment),
        cmocka_unit_test(test_anti_aliasing),
        cmocka_unit_test(test_upsampling_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
