/* test_audio_codecs.c — the same speech through every container, compared in log-mel space.
 *
 * One espeak-ng sentence, resampled to 16 kHz by tern and quantised to 16 bits, is the WAV
 * original s. A second sentence d makes a stereo version L = s + d, R = s - d whose channel mean
 * is s exactly, so a wrong mix (left only, right only, sum) cannot pass. Both are encoded at test
 * time: FLAC, AIFF, Ogg/Vorbis and µ-law WAV by sox; MP3 (libmp3lame), Ogg/Opus and WebM/Opus
 * (libopus, which libav decodes at 48 kHz, so the resampler is on that path) and M4A/AAC by
 * libav's encoders in memory (audio_testutil.c). Each file goes through tern_audio_decode and
 * tern_logmel_compute and is compared with the original's features:
 *   - length: lossless decodes have exactly the original's samples and frames; lossy ones are
 *     within one codec frame (padding the container may leave untrimmed; the priming at the
 *     start is trimmed by libav from what the container records);
 *   - alignment: the decoded signal is cross-correlated with the original over ±100 ms around its
 *     loudest half second; the lag must be 0 for every codec (priming trimmed) and is printed.
 *     Features are then taken over the original's length of the aligned decode, so the frame
 *     counts compared are equal by construction;
 *   - features: lossless decodes must give bit-identical samples and features. µ-law and the lossy
 *     codecs must stay under per-codec bounds on the mean |Δ log-mel| over the cells with energy:
 *     frames within 40 dB of the loudest frame, and in those the bins within 40 dB of the frame's
 *     loudest bin. Silence and near-empty bins are left out because log(x + 1e-3) turns coding
 *     noise there (and the codecs' low-pass above ~7 kHz) into large numbers no model would
 *     notice; a looser second bound covers every bin of the loud frames.
 * Every measured figure is printed. The sanity part feeds the same comparison with what broken
 * decoding would produce (another sentence, left or right channel only, channels summed, the
 * wrong sample rate, interleaved stereo read as mono) and requires each to score at least twice
 * the largest lossy bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "audio_testutil.h"
#include "testutil.h"

#define MAX_LAG 1600      /* alignment search: ±100 ms at 16 kHz */
#define SILENCE_DB (-40.0) /* frames (and bins) this far below the loudest are left out of the mean */
#define SANITY_FACTOR 2.0  /* broken decoding must score this many times the largest lossy bound */

/* ---- the clips ------------------------------------------------------------------------------ */

typedef struct clips {
    const char *dir;
    int16_t *s, *d;   /* the original and the second sentence, same length */
    size_t n;
    float *mono;      /* s / 32768 */
    float *stereo;    /* interleaved (s + d, s - d) / 32768 */
    char ref_wav[4096], stereo_wav[4096];
} clips;

static float *speak(const char *dir, const char *name, const char *text, size_t *n) {
    char path[4096], cmd[8192], *out = NULL;
    snprintf(path, sizeof path, "%s/%s.wav", dir, name);
    snprintf(cmd, sizeof cmd, "espeak-ng -w '%s' '%s' 2>&1", path, text);
    int rc = tu_run(cmd, &out);
    if (rc != 0)
        fail_msg("espeak-ng failed (%d): %s (scripts/install-deps installs it)", rc, out ? out : "");
    free(out);
    tern_pcm p;
    TU_OK(tern_audio_decode_file(path, 0, &p)); /* 22.05 kHz → 16 kHz */
    assert_int_equal(p.rate, TERN_AUDIO_RATE);
    *n = p.n;
    return p.samples;
}

static int16_t quantise(double v) {
    double x = nearbyint(v * 32768.0);
    if (x < -32768 || x > 32767)
        fail_msg("test clip clips at %g", v);
    return (int16_t)x;
}

static void put_le(uint8_t *p, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A 16-bit PCM RIFF/WAVE file of interleaved samples at 16 kHz. */
static void write_wav16(const char *path, const int16_t *x, size_t frames, int channels) {
    size_t count = frames * (size_t)channels, bytes = count * 2;
    uint8_t *b = malloc(44 + bytes);
    assert_non_null(b);
    memcpy(b, "RIFF", 4);
    put_le(b + 4, (uint32_t)(36 + bytes), 4);
    memcpy(b + 8, "WAVEfmt ", 8);
    put_le(b + 16, 16, 4);
    put_le(b + 20, 1, 2); /* PCM */
    put_le(b + 22, (uint32_t)channels, 2);
    put_le(b + 24, TERN_AUDIO_RATE, 4);
    put_le(b + 28, (uint32_t)(TERN_AUDIO_RATE * channels * 2), 4);
    put_le(b + 32, (uint32_t)(channels * 2), 2);
    put_le(b + 34, 16, 2);
    memcpy(b + 36, "data", 4);
    put_le(b + 40, (uint32_t)bytes, 4);
    for (size_t i = 0; i < count; i++)
        put_le(b + 44 + 2 * i, (uint16_t)x[i], 2);
    TU_OK(tern_write_file(path, b, 44 + bytes));
    free(b);
}

static void make_clips(clips *c) {
    c->dir = tu_tmpdir("audio_codecs");
    size_t na, nb;
    float *a = speak(c->dir, "a",
                     "The quick brown fox jumps over the lazy dog. Audio features for Gemma four, from every "
                     "container.",
                     &na);
    float *b = speak(c->dir, "b", "Seven silver swans swam silently seaward, while a bell rang in the hall.", &nb);
    c->n = na;
    c->s = malloc(na * sizeof(int16_t));
    c->d = malloc(na * sizeof(int16_t));
    c->mono = malloc(na * sizeof(float));
    c->stereo = malloc(2 * na * sizeof(float));
    int16_t *lr = malloc(2 * na * sizeof(int16_t));
    assert_true(c->s && c->d && c->mono && c->stereo && lr);
    for (size_t i = 0; i < na; i++) {
        /* 0.45 of espeak's level keeps s + d and s - d inside 16 bits */
        c->s[i] = quantise(0.45 * a[i]);
        c->d[i] = quantise(i < nb ? 0.45 * b[i] : 0.0);
        lr[2 * i] = quantise((c->s[i] + c->d[i]) / 32768.0);
        lr[2 * i + 1] = quantise((c->s[i] - c->d[i]) / 32768.0);
        c->mono[i] = c->s[i] / 32768.0f;
        c->stereo[2 * i] = lr[2 * i] / 32768.0f;
        c->stereo[2 * i + 1] = lr[2 * i + 1] / 32768.0f;
    }
    snprintf(c->ref_wav, sizeof c->ref_wav, "%s/original.wav", c->dir);
    snprintf(c->stereo_wav, sizeof c->stereo_wav, "%s/stereo.wav", c->dir);
    write_wav16(c->ref_wav, c->s, na, 1);
    write_wav16(c->stereo_wav, lr, na, 2);
    free(lr);
    free(a);
    free(b);
}

static void free_clips(clips *c) {
    free(c->s);
    free(c->d);
    free(c->mono);
    free(c->stereo);
}

/* ---- the comparison ------------------------------------------------------------------------- */

typedef struct reference {
    const float *x;
    size_t n;
    tern_logmel mel;
    uint8_t *loud;  /* [frames]: 1 = a frame with energy (within 40 dB of the loudest frame) */
    uint8_t *cell;  /* [frames][bins]: 1 = a loud frame's bin within 40 dB of that frame's peak bin */
    size_t n_loud, n_cells;
    size_t win_at;  /* start of the 0.5 s window used for alignment: around the loudest frame */
} reference;

/* Energy of the 320 samples feature frame f sees: [f*160 - 160, f*160 + 160). */
static double frame_energy(const float *x, size_t n, size_t f) {
    double e = 0;
    for (long i = (long)(f * TERN_AUDIO_HOP) - TERN_AUDIO_HOP; i < (long)(f * TERN_AUDIO_HOP) + TERN_AUDIO_HOP; i++)
        if (i >= 0 && (size_t)i < n)
            e += (double)x[i] * x[i];
    return e;
}

static void reference_init(reference *r, const float *x, size_t n) {
    memset(r, 0, sizeof *r);
    r->x = x;
    r->n = n;
    TU_OK(tern_logmel_compute(x, n, NULL, NULL, &r->mel));
    size_t frames = r->mel.frames;
    r->loud = calloc(frames, 1);
    r->cell = calloc(frames * TERN_AUDIO_MEL_BINS, 1);
    assert_true(r->loud && r->cell);
    double emax = 0, e;
    size_t fmax = 0;
    for (size_t f = 0; f < r->mel.valid_frames; f++)
        if ((e = frame_energy(x, n, f)) > emax)
            emax = e, fmax = f;
    assert_true(emax > 0);
    for (size_t f = 0; f < r->mel.valid_frames; f++) {
        if (!(frame_energy(x, n, f) > emax * pow(10.0, SILENCE_DB / 10.0)))
            continue;
        r->loud[f] = 1;
        r->n_loud++;
        /* log-mel is ln(magnitude): 40 dB of magnitude is ln(100) */
        const float *row = r->mel.features + f * TERN_AUDIO_MEL_BINS;
        float peak = row[0];
        for (size_t b = 1; b < TERN_AUDIO_MEL_BINS; b++)
            peak = row[b] > peak ? row[b] : peak;
        for (size_t b = 0; b < TERN_AUDIO_MEL_BINS; b++)
            if (row[b] > peak + SILENCE_DB / 20.0 * log(10.0)) {
                r->cell[f * TERN_AUDIO_MEL_BINS + b] = 1;
                r->n_cells++;
            }
    }
    size_t c = fmax * TERN_AUDIO_HOP;
    assert_true(n >= 8000 + 2 * MAX_LAG);
    r->win_at = c > 4000 + MAX_LAG ? c - 4000 : MAX_LAG;
    if (r->win_at + 8000 + MAX_LAG > n)
        r->win_at = n - 8000 - MAX_LAG;
}

static void reference_free(reference *r) {
    tern_logmel_free(&r->mel);
    free(r->loud);
    free(r->cell);
}

typedef struct comparison {
    long lag;          /* y[i + lag] lines up with x[i] */
    double corr;       /* normalised cross-correlation at that lag */
    double mean_cells; /* mean |Δ log-mel| over the cells with energy (the bounded figure) */
    double mean_loud;  /* mean |Δ log-mel| over the loud frames, every bin (quiet bins included) */
    double max_all;    /* max |Δ log-mel| over every frame and bin */
} comparison;

/* Aligns y with the reference by cross-correlation over a 0.5 s window (lags ±MAX_LAG), then
 * compares the log-mel of y's aligned stretch of the reference's length (zeros past y's end). */
static comparison compare(const reference *r, const float *y, size_t ny) {
    comparison c = {0, -2, 0, 0, 0};
    double ex = 0;
    for (size_t i = r->win_at; i < r->win_at + 8000; i++)
        ex += (double)r->x[i] * r->x[i];
    for (long lag = -MAX_LAG; lag <= MAX_LAG; lag++) {
        double xy = 0, ey = 0;
        for (size_t i = r->win_at; i < r->win_at + 8000; i++) {
            long j = (long)i + lag;
            double v = j >= 0 && (size_t)j < ny ? y[j] : 0.0;
            xy += r->x[i] * v;
            ey += v * v;
        }
        double k = ey > 0 ? xy / sqrt(ex * ey) : 0;
        if (k > c.corr)
            c.corr = k, c.lag = lag;
    }
    float *al = calloc(r->n, sizeof(float));
    assert_non_null(al);
    for (size_t i = 0; i < r->n; i++) {
        long j = (long)i + c.lag;
        if (j >= 0 && (size_t)j < ny)
            al[i] = y[j];
    }
    tern_logmel m;
    TU_OK(tern_logmel_compute(al, r->n, NULL, NULL, &m));
    assert_int_equal(m.frames, r->mel.frames);
    double sum_loud = 0, sum_cells = 0;
    for (size_t f = 0; f < m.frames; f++)
        for (size_t b = 0; b < TERN_AUDIO_MEL_BINS; b++) {
            size_t i = f * TERN_AUDIO_MEL_BINS + b;
            double dv = fabs((double)m.features[i] - r->mel.features[i]);
            if (!(dv <= c.max_all))
                c.max_all = isnan(dv) ? INFINITY : dv; /* NaN fails every bound */
            if (r->loud[f])
                sum_loud += dv;
            if (r->cell[i])
                sum_cells += dv;
        }
    c.mean_loud = sum_loud / ((double)r->n_loud * TERN_AUDIO_MEL_BINS);
    c.mean_cells = sum_cells / (double)r->n_cells;
    if (isnan(c.max_all) || isinf(c.max_all))
        c.mean_cells = c.mean_loud = INFINITY;
    tern_logmel_free(&m);
    free(al);
    return c;
}

/* ---- the codecs ----------------------------------------------------------------------------- */

enum { BY_SOX, BY_LIBAV };

typedef struct codec_case {
    const char *what;
    int maker;
    int stereo;
    const char *ext_or_muxer; /* sox: output file extension; libav: muxer */
    const char *opts;         /* sox: output options; libav: encoder name */
    int rate;                 /* libav: encoder rate */
    int64_t bit_rate;         /* libav */
    int lossless;             /* 1: bit-identical samples and features */
    long len_slack;           /* lossy: |decoded - original| samples allowed (padding to whole codec frames) */
    double bound;             /* lossy: mean |Δ log-mel| over the cells with energy */
    double bound_loud;        /* lossy: mean |Δ log-mel| over the loud frames' every bin */
} codec_case;

/* Lossy bounds: the figure measured here (espeak-ng 1.51, libavcodec 59.37, sox 14.4.2; the test
 * prints it) times about 1.4, rounded up. Bit rates are what a client would send for speech. The
 * length slack is one codec frame at 16 kHz: the padding a container may leave untrimmed (AAC in
 * M4A measured +215 samples; the others measured 0). */
static const codec_case cases[] = {
    /* what                          maker    st  ext/muxer  opts/encoder    rate   bits  exact slack cells loud */
    {"flac (sox)",                     BY_SOX,   0, "flac", "",            0,     0,      1, 0,    0,    0},
    {"flac stereo (sox)",              BY_SOX,   1, "flac", "",            0,     0,      1, 0,    0,    0},
    {"aiff (sox)",                     BY_SOX,   0, "aiff", "",            0,     0,      1, 0,    0,    0},
    {"aiff stereo (sox)",              BY_SOX,   1, "aiff", "",            0,     0,      1, 0,    0,    0},
    {"wav u-law (sox)",                BY_SOX,   0, "wav",  "-e u-law",    0,     0,      0, 0,    0.07, 0.35},
    {"ogg/vorbis q6 (sox)",            BY_SOX,   0, "ogg",  "-C 6",        0,     0,      0, 1024, 0.16, 0.28},
    {"ogg/vorbis stereo q6 (sox)",     BY_SOX,   1, "ogg",  "-C 6",        0,     0,      0, 1024, 0.28, 0.50},
    {"mp3 64k (libmp3lame)",           BY_LIBAV, 0, "mp3",  "libmp3lame",  16000, 64000,  0, 576,  0.25, 0.35},
    {"mp3 stereo 128k (libmp3lame)",   BY_LIBAV, 1, "mp3",  "libmp3lame",  16000, 128000, 0, 576,  0.23, 0.30},
    {"ogg/opus 48k (libopus)",         BY_LIBAV, 0, "ogg",  "libopus",     16000, 48000,  0, 320,  0.18, 0.22},
    {"webm/opus stereo 96k (libopus)", BY_LIBAV, 1, "webm", "libopus",     16000, 96000,  0, 320,  0.15, 0.20},
    {"m4a/aac 64k (aac)",              BY_LIBAV, 0, "ipod", "aac",         16000, 64000,  0, 1024, 0.11, 0.17},
    {"m4a/aac stereo 128k (aac)",      BY_LIBAV, 1, "ipod", "aac",         16000, 128000, 0, 1024, 0.17, 0.28},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static double max_lossy_bound(void) {
    double m = 0;
    for (size_t k = 0; k < NCASES; k++)
        if (!cases[k].lossless && cases[k].bound > m)
            m = cases[k].bound;
    return m;
}

static void decode_case(const clips *cl, const codec_case *k, size_t idx, tern_pcm *p, size_t *file_len) {
    if (k->maker == BY_SOX) {
        char path[4096], args[16384];
        snprintf(path, sizeof path, "%s/case%zu.%s", cl->dir, idx, k->ext_or_muxer);
        snprintf(args, sizeof args, "-D '%s' %s '%s'", k->stereo ? cl->stereo_wav : cl->ref_wav, k->opts, path);
        atu_sox(args);
        char *bytes;
        TU_OK(tern_read_file(path, 64u << 20, &bytes, file_len));
        TU_OK(tern_audio_decode(bytes, *file_len, 0, p));
        free(bytes);
    } else {
        uint8_t *bytes = atu_libav_encode(k->ext_or_muxer, k->opts, k->rate, k->stereo ? 2 : 1,
                                          k->stereo ? cl->stereo : cl->mono, cl->n, k->bit_rate, file_len);
        TU_OK(tern_audio_decode(bytes, *file_len, 0, p));
        free(bytes);
    }
    assert_int_equal(p->rate, TERN_AUDIO_RATE);
}

static void test_codecs_match_the_wav_original(void **state) {
    clips cl;
    make_clips(&cl);

    /* The WAV original, through the same decoder: its samples are s / 32768 exactly. */
    tern_pcm orig;
    TU_OK(tern_audio_decode_file(cl.ref_wav, 0, &orig));
    assert_int_equal(orig.n, cl.n);
    assert_memory_equal(orig.samples, cl.mono, cl.n * sizeof(float));
    reference ref;
    reference_init(&ref, orig.samples, orig.n);
    print_message("  original: %zu samples (%.2f s), %zu frames, %zu valid, %zu loud (within %.0f dB of the "
                  "loudest), %zu cells with energy (%.0f%% of the loud frames' bins)\n",
                  orig.n, orig.n / (double)TERN_AUDIO_RATE, ref.mel.frames, ref.mel.valid_frames, ref.n_loud,
                  -SILENCE_DB, ref.n_cells, 100.0 * ref.n_cells / (ref.n_loud * (double)TERN_AUDIO_MEL_BINS));
    assert_true(ref.n_loud > ref.mel.valid_frames / 2);

    for (size_t k = 0; k < NCASES; k++) {
        const codec_case *cc = &cases[k];
        tern_pcm p;
        size_t file_len;
        decode_case(&cl, cc, k, &p, &file_len);
        long dn = (long)p.n - (long)orig.n;
        long dframes = (long)tern_logmel_frame_count(p.n) - (long)ref.mel.frames;
        comparison c = compare(&ref, p.samples, p.n);
        if (cc->lossless)
            print_message("  %-30s %6zu B  samples %+4ld frames %+2ld lag %+4ld corr %.4f  mean|d| cells %.4f "
                          "loud %.4f  max|d| %.3f  (exact)\n",
                          cc->what, file_len, dn, dframes, c.lag, c.corr, c.mean_cells, c.mean_loud, c.max_all);
        else
            print_message("  %-30s %6zu B  samples %+4ld frames %+2ld lag %+4ld corr %.4f  mean|d| cells %.4f "
                          "(bound %.2f) loud %.4f (bound %.2f)  max|d| %.3f\n",
                          cc->what, file_len, dn, dframes, c.lag, c.corr, c.mean_cells, cc->bound, c.mean_loud,
                          cc->bound_loud, c.max_all);
        if (cc->lossless) {
            assert_int_equal(p.n, orig.n);
            assert_memory_equal(p.samples, orig.samples, orig.n * sizeof(float));
            assert_int_equal(c.lag, 0);
            assert_true(c.max_all == 0.0);
        } else {
            if (labs(dn) > cc->len_slack)
                fail_msg("%s: %ld samples off the original's %zu (allowed %ld)", cc->what, dn, orig.n, cc->len_slack);
            assert_int_equal(c.lag, 0);
            if (!(c.mean_cells <= cc->bound))
                fail_msg("%s: mean |d log-mel| %.4f over the cells with energy, bound %.3g", cc->what, c.mean_cells,
                         cc->bound);
            if (!(c.mean_loud <= cc->bound_loud))
                fail_msg("%s: mean |d log-mel| %.4f over the loud frames' every bin, bound %.3g", cc->what,
                         c.mean_loud, cc->bound_loud);
        }
        tern_pcm_free(&p);
    }

    /* Sanity: what broken decoding would hand the same comparison. */
    double worst_bound = max_lossy_bound();
    float *wrong = malloc(cl.n * sizeof(float));
    assert_non_null(wrong);
    struct {
        const char *what;
        int kind;
    } broken[] = {
        {"another sentence", 0},
        {"left channel only", 1},
        {"right channel only", 2},
        {"channels summed", 3},
        {"mono read as 22.05 kHz", 4},
        {"stereo read as mono", 5},
    };
    for (size_t b = 0; b < sizeof broken / sizeof broken[0]; b++) {
        const float *y = wrong;
        size_t ny = cl.n;
        tern_pcm rs = {0};
        for (size_t i = 0; i < cl.n; i++) {
            float l = cl.stereo[2 * i], r = cl.stereo[2 * i + 1];
            switch (broken[b].kind) {
            case 0: wrong[i] = cl.d[i] / 32768.0f; break;
            case 1: wrong[i] = l; break;
            case 2: wrong[i] = r; break;
            case 3: wrong[i] = l + r; break;
            case 5: wrong[i] = cl.stereo[i]; break; /* interleaved pairs taken as consecutive samples */
            default: break;
            }
        }
        if (broken[b].kind == 4) { /* a decoder that got the rate wrong: resampled by 16000/22050 */
            TU_OK(tern_audio_resample(cl.mono, cl.n, 22050, TERN_AUDIO_RATE, &rs));
            y = rs.samples;
            ny = rs.n;
        }
        comparison c = compare(&ref, y, ny);
        print_message("  sanity: %-24s lag %+5ld corr %.4f  mean|d| cells %.4f (%.1fx the largest lossy bound) "
                      "loud %.4f\n",
                      broken[b].what, c.lag, c.corr, c.mean_cells, c.mean_cells / worst_bound, c.mean_loud);
        if (!(c.mean_cells > SANITY_FACTOR * worst_bound))
            fail_msg("sanity '%s': mean |d log-mel| %.4f is not %gx the largest lossy bound %.3g", broken[b].what,
                     c.mean_cells, SANITY_FACTOR, worst_bound);
        tern_pcm_free(&rs);
    }
    free(wrong);
    reference_free(&ref);
    tern_pcm_free(&orig);
    free_clips(&cl);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codecs_match_the_wav_original),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
