/* test_audio_logmel.c — log-mel features: frame, mask and soft-token arithmetic at the edges; the
 * window against the seed's specification; every frame against a slow independent reference
 * (direct DFT, dense mel bank written from the formula); silence; truncation; threads; per-bin
 * normalisation from preprocessor_config.json; and the `tern audio-features` verb. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "core/threadpool.h"
#include "tensor/cpu.h"
#include "testutil.h"

static float *noise(size_t n, uint64_t seed, double amp) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        double u = (double)(seed >> 11) / 9007199254740992.0;
        /* noise plus a tone, so both loud and quiet mel bins occur */
        x[i] = (float)(amp * ((u - 0.5) * 0.2 + sin(2 * M_PI * 440.0 * (double)i / 16000.0)));
    }
    return x;
}

/* ---- counts --------------------------------------------------------------------------------- */

static void test_counts(void **state) {
    static const struct {
        size_t n, frames, valid, tokens;
    } c[] = {
        {0, 0, 0, 0},         {1, 0, 0, 0},          {128, 0, 0, 0},          {160, 1, 0, 0},
        {161, 1, 1, 1},       {320, 2, 1, 1},        {321, 2, 2, 1},          {481, 3, 3, 1},
        {641, 4, 4, 1},       {801, 5, 5, 2},        {16000, 99, 99, 25},     {16001, 100, 100, 25},
        {480000, 2999, 2999, 750}, {480001, 2999, 2999, 750}, {10000000, 2999, 2999, 750},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t f = tern_logmel_frame_count(c[i].n), v = tern_logmel_valid_frames(c[i].n);
        if (f != c[i].frames || v != c[i].valid || tern_audio_soft_tokens(v) != c[i].tokens)
            fail_msg("n=%zu: frames %zu valid %zu tokens %zu, expected %zu %zu %zu", c[i].n, f, v,
                     tern_audio_soft_tokens(v), c[i].frames, c[i].valid, c[i].tokens);
    }
    /* N = 641: 4 valid frames → 2 → 1 soft token (ceil(ms / 40) would say 2). */
    assert_int_equal(tern_audio_soft_tokens(4), 1);
    assert_int_equal(tern_audio_soft_tokens(5), 2);
    assert_int_equal(tern_audio_soft_tokens(2999), 750);
    assert_int_equal(tern_audio_soft_tokens(100000), 750);
    assert_int_equal(tern_audio_soft_tokens(0), 0);
}

/* ---- the window is the seed's specification ------------------------------------------------- */

static int b64val(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static void test_window_matches_seed(void **state) {
    /* The seed's features.ts holds the Python reference's window as base64 float32 (WINDOW_B64). */
    char *text;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("audio/hann-window.b64.txt"), 1u << 24, &text, &len));
    const char *p = strstr(text, "const WINDOW_B64 =");
    assert_non_null(p);
    const char *end = strstr(p, "\";\n");
    assert_non_null(end);
    uint8_t bytes[TERN_AUDIO_FRAME * 4 + 8];
    size_t nb = 0;
    unsigned acc = 0;
    int bits = 0, in_str = 0;
    for (const char *q = p; q < end + 1; q++) {
        if (*q == '"') {
            in_str = !in_str;
            continue;
        }
        if (!in_str || *q == '=')
            continue;
        int v = b64val(*q);
        assert_true(v >= 0);
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            assert_true(nb < sizeof bytes);
            bytes[nb++] = (uint8_t)(acc >> bits);
        }
    }
    assert_int_equal(nb, TERN_AUDIO_FRAME * 4);
    const float *w = tern_logmel_window();
    assert_memory_equal(w, bytes, TERN_AUDIO_FRAME * 4);
    free(text);

    /* And it is a periodic Hann window, up to the float32 rounding of cos's argument. */
    for (int n = 0; n < TERN_AUDIO_FRAME; n++)
        assert_true(fabs(w[n] - (0.5 - 0.5 * cos(2 * M_PI * n / TERN_AUDIO_FRAME))) < 4e-7);
    assert_true(w[0] == 0.0f && w[160] == 1.0f);
}

/* ---- against a slow reference --------------------------------------------------------------- */

static double htk_mel(double hz) { return 2595.0 * log10(1.0 + hz / 700.0); }
static double htk_hz(double mel) { return 700.0 * (pow(10.0, mel / 2595.0) - 1.0); }

/* Dense 257 x 128 HTK bank straight from its definition. */
static void dense_bank(double bank[257][128]) {
    double pts[130];
    for (int i = 0; i < 130; i++)
        pts[i] = htk_hz(htk_mel(8000.0) * i / 129.0);
    for (int k = 0; k < 257; k++) {
        double f = 8000.0 * k / 256.0;
        for (int m = 0; m < 128; m++) {
            double rise = (f - pts[m]) / (pts[m + 1] - pts[m]), fall = (pts[m + 2] - f) / (pts[m + 2] - pts[m + 1]);
            double v = rise < fall ? rise : fall;
            bank[k][m] = v > 0 ? v : 0;
        }
    }
}

static void reference_frame(const float *x, size_t n, size_t f, double bank[257][128], double out[128]) {
    const float *w = tern_logmel_window();
    double frame[320];
    for (int i = 0; i < 320; i++) {
        long idx = (long)(f * 160) + i - 160;
        float s = idx >= 0 && (size_t)idx < n ? x[idx] : 0.0f;
        frame[i] = (double)(s * w[i]);
    }
    double mag[257];
    for (int k = 0; k < 257; k++) { /* direct DFT, n = 512 with zero padding */
        double re = 0, im = 0;
        for (int i = 0; i < 320; i++) {
            double a = -2 * M_PI * (double)((k * i) % 512) / 512.0;
            re += frame[i] * cos(a);
            im += frame[i] * sin(a);
        }
        mag[k] = hypot(re, im);
    }
    for (int m = 0; m < 128; m++) {
        double s = 0;
        for (int k = 0; k < 257; k++)
            s += mag[k] * bank[k][m];
        out[m] = log(s + 1e-3);
    }
}

static void test_against_direct_dft(void **state) {
    static double bank[257][128];
    dense_bank(bank);
    size_t n = 5000;
    float *x = noise(n, 99, 0.3);
    for (size_t i = 2000; i < 3000; i++)
        x[i] *= 1e-4f; /* a quiet stretch */
    tern_logmel m;
    TU_OK(tern_logmel_compute(x, n, NULL, NULL, &m));
    assert_int_equal(m.frames, tern_logmel_frame_count(n));
    assert_int_equal(m.valid_frames, 31);
    double maxd = 0;
    for (size_t f = 0; f < m.frames; f++) {
        if (f < m.valid_frames) {
            assert_int_equal(m.mask[f], 1);
            double ref[128];
            reference_frame(x, n, f, bank, ref);
            for (int b = 0; b < 128; b++)
                maxd = fmax(maxd, fabs(m.features[f * 128 + b] - ref[b]));
        } else {
            assert_int_equal(m.mask[f], 0);
            for (int b = 0; b < 128; b++)
                assert_true(m.features[f * 128 + b] == 0.0f);
        }
    }
    /* Only the float32 output rounding (|log| < 8: half an ulp is < 5e-7) and summation order. */
    if (maxd > 1e-6)
        fail_msg("max |fast - direct DFT| = %g", maxd);
    tern_logmel_free(&m);
    free(x);
}

static void test_silence_and_truncation(void **state) {
    size_t n = 16000;
    float *z = calloc(n, sizeof(float));
    tern_logmel m;
    TU_OK(tern_logmel_compute(z, n, NULL, NULL, &m));
    assert_int_equal(m.frames, 99);
    for (size_t i = 0; i < m.valid_frames * 128; i++)
        assert_true(m.features[i] == (float)log(1e-3));
    tern_logmel_free(&m);
    free(z);

    /* Input beyond 30 s is cut before framing: same result as the first 480 000 samples. */
    size_t big = 490000;
    float *x = noise(big, 7, 0.5);
    tern_logmel a, b;
    TU_OK(tern_logmel_compute(x, big, NULL, NULL, &a));
    TU_OK(tern_logmel_compute(x, TERN_AUDIO_MAX_SAMPLES, NULL, NULL, &b));
    assert_int_equal(a.frames, 2999);
    assert_int_equal(a.frames, b.frames);
    assert_memory_equal(a.features, b.features, a.frames * 128 * sizeof(float));
    tern_logmel_free(&a);
    tern_logmel_free(&b);

    /* Threads change nothing, bit for bit. */
    tern_pool *pool;
    TU_OK(tern_pool_create(3, &pool));
    TU_OK(tern_logmel_compute(x, 300007, NULL, pool, &a));
    TU_OK(tern_logmel_compute(x, 300007, NULL, NULL, &b));
    assert_int_equal(a.valid_frames, b.valid_frames);
    assert_memory_equal(a.features, b.features, a.frames * 128 * sizeof(float));
    assert_memory_equal(a.mask, b.mask, a.frames);
    tern_logmel_free(&a);
    tern_logmel_free(&b);
    tern_pool_destroy(pool);
    free(x);

    TU_FAILS_WITH(tern_logmel_compute(NULL, 10, NULL, NULL, &a), "no sample buffer");
}

static void test_kernels_agree(void **state) {
    /* The 2-lane and the widest kernel give the same bits (odd frame counts exercise the
     * partial last batch). */
    static const size_t lens[] = {161, 481, 801, 16000, 33333};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        float *x = noise(lens[i], 1234 + i, 0.7);
        tern_logmel a, b;
        tern_isa_set(tern_isa_detect());
        const char *wide = tern_logmel_kernel();
        TU_OK(tern_logmel_compute(x, lens[i], NULL, NULL, &a));
        tern_isa_set(TERN_ISA_PORTABLE);
        const char *narrow = tern_logmel_kernel();
        TU_OK(tern_logmel_compute(x, lens[i], NULL, NULL, &b));
        tern_isa_set(tern_isa_detect());
        assert_int_equal(a.frames, b.frames);
        if (memcmp(a.features, b.features, a.frames * 128 * sizeof(float)) != 0)
            fail_msg("n=%zu: kernels '%s' and '%s' disagree", lens[i], wide, narrow);
        tern_logmel_free(&a);
        tern_logmel_free(&b);
        free(x);
    }
}

/* ---- per-bin normalisation ------------------------------------------------------------------ */

static const char *write_config(const char *dir, const char *name, const char *mean, const char *stddev, int nested) {
    char *buf = malloc(1 << 16);
    size_t len = 0;
    len += (size_t)snprintf(buf + len, (1 << 16) - len, "{\"feature_size\": 128,%s", nested ? "\"feature_extractor\": {" : "");
    len += (size_t)snprintf(buf + len, (1 << 16) - len, "\"per_bin_mean\": %s, \"per_bin_stddev\": %s", mean, stddev);
    len += (size_t)snprintf(buf + len, (1 << 16) - len, "%s}", nested ? "}" : "");
    const char *path = tu_write(dir, name, buf, len);
    free(buf);
    return path;
}

static char *bins(double first, double rest, int count) {
    char *s = malloc(8192);
    size_t len = (size_t)snprintf(s, 8192, "[");
    for (int i = 0; i < count; i++)
        len += (size_t)snprintf(s + len, 8192 - len, "%s%g", i ? "," : "", i ? rest : first);
    snprintf(s + len, 8192 - len, "]");
    return s;
}

static void test_normalisation(void **state) {
    const char *dir = tu_tmpdir("audio_norm");
    char *mean = bins(1.0, 0.5, 128), *sd = bins(4.0, 2.0, 128);
    tern_logmel_norm norm;
    TU_OK(tern_logmel_norm_load(write_config(dir, "pre.json", mean, sd, 0), &norm));
    assert_true(norm.has_mean && norm.has_stddev);
    assert_true(norm.mean[0] == 1.0 && norm.mean[5] == 0.5 && norm.stddev[0] == 4.0 && norm.stddev[127] == 2.0);

    size_t n = 3000;
    float *x = noise(n, 3, 0.2);
    tern_logmel raw, nm;
    TU_OK(tern_logmel_compute(x, n, NULL, NULL, &raw));
    TU_OK(tern_logmel_compute(x, n, &norm, NULL, &nm));
    for (size_t f = 0; f < raw.frames; f++)
        for (int b = 0; b < 128; b++) {
            float r = raw.features[f * 128 + b], v = nm.features[f * 128 + b];
            if (f >= raw.valid_frames)
                assert_true(v == 0.0f); /* invalid frames are zeroed after normalising */
            else
                assert_true(fabs(v - (r - norm.mean[b]) / norm.stddev[b]) < 1e-6);
        }
    tern_logmel_free(&raw);
    tern_logmel_free(&nm);
    free(x);

    /* Nested under "feature_extractor"; nulls mean "no normalisation". */
    TU_OK(tern_logmel_norm_load(write_config(dir, "nested.json", mean, "null", 1), &norm));
    assert_true(norm.has_mean && !norm.has_stddev);
    TU_OK(tern_logmel_norm_load(write_config(dir, "none.json", "null", "null", 0), &norm));
    assert_true(!norm.has_mean && !norm.has_stddev);

    char *short_bins = bins(1.0, 1.0, 127), *zero = bins(0.0, 1.0, 128);
    TU_FAILS_WITH(tern_logmel_norm_load(write_config(dir, "short.json", short_bins, "null", 0), &norm),
                  "per_bin_mean must be an array of 128 numbers");
    TU_FAILS_WITH(tern_logmel_norm_load(write_config(dir, "zero.json", "null", zero, 0), &norm),
                  "per_bin_stddev[0] = 0 is not usable");
    TU_FAILS_WITH(tern_logmel_norm_load(write_config(dir, "str.json", "\"x\"", "null", 0), &norm),
                  "per_bin_mean must be an array");
    const char *bad = tu_write(dir, "bad.json", "{\"per_bin_mean\": [1,", 19);
    TU_FAILS_WITH(tern_logmel_norm_load(bad, &norm), "bad.json");
    free(short_bins);
    free(zero);
    free(mean);
    free(sd);
}

/* ---- the CLI verb --------------------------------------------------------------------------- */

static void test_cli_audio_features(void **state) {
    const char *dir = tu_tmpdir("audio_cli");
    /* 1.5 s of 16-bit noise + tone at 22.05 kHz, written as a WAV. */
    size_t n = 33075;
    float *x = noise(n, 11, 0.4);
    size_t len = 44 + n * 2;
    uint8_t *w = malloc(len);
    memcpy(w, "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\1\0\1\0\x22\x56\0\0\x44\xac\0\0\2\0\x10\0data", 40);
    uint32_t dsz = (uint32_t)(n * 2);
    memcpy(w + 40, &dsz, 4);
    for (size_t i = 0; i < n; i++) {
        int16_t v = (int16_t)lrintf(x[i] * 32767.0f);
        memcpy(w + 44 + 2 * i, &v, 2);
    }
    char wav[4096], bin[4096], cmd[16384];
    snprintf(wav, sizeof wav, "%s", tu_write(dir, "clip.wav", w, len));
    snprintf(bin, sizeof bin, "%s/clip.bin", dir);
    snprintf(cmd, sizeof cmd, "'%s' audio-features '%s' --out '%s' 2>&1", tu_tern_bin(), wav, bin);
    char *out = NULL;
    int rc = tu_run(cmd, &out);
    if (rc != 0)
        fail_msg("%s -> %d: %s", cmd, rc, out ? out : "");

    /* What the library says for the same file. */
    tern_pcm pcm;
    tern_logmel m;
    TU_OK(tern_audio_decode_file(wav, 0, &pcm));
    TU_OK(tern_logmel_compute(pcm.samples, pcm.n, NULL, NULL, &m));
    assert_int_equal(pcm.n, 24000);
    char want[256];
    snprintf(want, sizeof want, "frames:       %zu x 128\nvalid_frames: %zu\nsoft_tokens:  %zu\n", m.frames,
             m.valid_frames, tern_audio_soft_tokens(m.valid_frames));
    if (!strstr(out, want))
        fail_msg("output lacks\n%s\ngot\n%s", want, out);
    assert_int_equal(m.valid_frames, 149);
    assert_int_equal(tern_audio_soft_tokens(m.valid_frames), 38);
    char *feat;
    size_t flen;
    TU_OK(tern_read_file(bin, 1u << 26, &feat, &flen));
    assert_int_equal(flen, m.frames * 128 * sizeof(float));
    assert_memory_equal(feat, m.features, flen);
    free(feat);
    free(out);
    tern_logmel_free(&m);
    tern_pcm_free(&pcm);

    /* A file that is not audio: exit status 1 and the supported containers named. */
    const char *txt = tu_write(dir, "notes.txt", "hello, not audio\n", 17);
    snprintf(cmd, sizeof cmd, "'%s' audio-features '%s' 2>&1", tu_tern_bin(), txt);
    rc = tu_run(cmd, &out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "supported containers"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' audio-features 2>&1", tu_tern_bin());
    rc = tu_run(cmd, &out);
    assert_int_equal(rc, 2);
    free(out);
    free(w);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_window_matches_seed),
        cmocka_unit_test(test_against_direct_dft),
        cmocka_unit_test(test_silence_and_truncation),
        cmocka_unit_test(test_kernels_agree),
        cmocka_unit_test(test_normalisation),
        cmocka_unit_test(test_cli_audio_features),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
