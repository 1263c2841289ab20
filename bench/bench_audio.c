/* bench_audio.c — times the audio front end on a 30 s clip: WAV decode (16-bit PCM, 16 kHz, the
 * common case), log-mel features, and both together; single-threaded and with the thread pool.
 *
 * usage: bench_audio [--iters N] [--threads T] [--rate HZ] [--portable]
 *   --rate other than 16000 makes the WAV at that rate, so decode includes resampling to 16 kHz.
 *   --portable times the 2-lane portable log-mel kernel (same as TERN_ISA=portable).
 * Prints min and median milliseconds per 30 s clip. The clip is synthetic (a gliding harmonic
 * tone with noise and pauses), generated in memory: nothing is read from disk. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/threadpool.h"
#include "core/timeutil.h"
#include "tensor/cpu.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A 30 s mono 16-bit PCM WAV at `rate` Hz, in memory. */
static unsigned char *make_wav(int rate, size_t *len) {
    size_t n = (size_t)rate * 30;
    *len = 44 + n * 2;
    unsigned char *w = malloc(*len);
    if (!w)
        return NULL;
    uint32_t riff = (uint32_t)(*len - 8), data = (uint32_t)(n * 2), byte_rate = (uint32_t)rate * 2, r = (uint32_t)rate;
    uint16_t pcm = 1, ch = 1, align = 2, bits = 16;
    uint32_t fmt_size = 16;
    memcpy(w, "RIFF", 4);
    memcpy(w + 4, &riff, 4);
    memcpy(w + 8, "WAVEfmt ", 8);
    memcpy(w + 16, &fmt_size, 4);
    memcpy(w + 20, &pcm, 2);
    memcpy(w + 22, &ch, 2);
    memcpy(w + 24, &r, 4);
    memcpy(w + 28, &byte_rate, 4);
    memcpy(w + 32, &align, 2);
    memcpy(w + 34, &bits, 2);
    memcpy(w + 36, "data", 4);
    memcpy(w + 40, &data, 4);
    double phase = 0.0;
    uint32_t seed = 12345;
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / rate;
        phase += 2 * M_PI * (120.0 + 80.0 * sin(2 * M_PI * 0.7 * t)) / rate;
        double v = 0.0;
        for (int h = 1; h <= 12; h++)
            v += sin(h * phase) / h;
        seed = seed * 1664525u + 1013904223u;
        v = 0.3 * v + 0.02 * ((seed >> 8) / 16777216.0 - 0.5);
        if (fmod(t, 0.5) > 0.25)
            v *= 0.01;
        int16_t s = (int16_t)lrint(fmax(-1.0, fmin(1.0, v)) * 32767.0);
        memcpy(w + 44 + 2 * i, &s, 2);
    }
    return w;
}

typedef struct stats {
    double min, median;
} stats;

static stats summarize(double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    return (stats){ms[0], ms[n / 2]};
}

static int run(const unsigned char *wav, size_t len, tern_pool *pool, int iters, const char *label) {
    double *dec = malloc(sizeof(double) * iters), *mel = malloc(sizeof(double) * iters),
           *all = malloc(sizeof(double) * iters);
    size_t frames = 0;
    for (int it = -2; it < iters; it++) { /* two warm-up rounds build tables and fault pages in */
        tern_pcm pcm;
        tern_logmel m;
        uint64_t t0 = tern_now_ns();
        tern_err *e = tern_audio_decode(wav, len, 0, &pcm);
        uint64_t t1 = tern_now_ns();
        if (!e)
            e = tern_logmel_compute(pcm.samples, pcm.n, NULL, pool, &m);
        uint64_t t2 = tern_now_ns();
        if (e) {
            fprintf(stderr, "bench_audio: %s\n", tern_err_msg(e));
            return 1;
        }
        frames = m.frames;
        if (it >= 0) {
            dec[it] = (t1 - t0) / 1e6;
            mel[it] = (t2 - t1) / 1e6;
            all[it] = (t2 - t0) / 1e6;
        }
        tern_logmel_free(&m);
        tern_pcm_free(&pcm);
    }
    stats d = summarize(dec, iters), l = summarize(mel, iters), a = summarize(all, iters);
    printf("%-12s decode %7.3f ms (min %7.3f)  log-mel %7.3f ms (min %7.3f)  total %7.3f ms (min %7.3f)  [%zu frames]\n",
           label, d.median, d.min, l.median, l.min, a.median, a.min, frames);
    free(dec);
    free(mel);
    free(all);
    return 0;
}

int main(int argc, char **argv) {
    int iters = 50, threads = 0, rate = TERN_AUDIO_RATE, portable = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
            rate = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--portable"))
            portable = 1;
        else {
            fprintf(stderr, "usage: bench_audio [--iters N] [--threads T] [--rate HZ] [--portable]\n");
            return 2;
        }
    }
    if (iters < 1 || rate < TERN_AUDIO_MIN_RATE || rate > TERN_AUDIO_MAX_RATE) {
        fprintf(stderr, "bench_audio: bad --iters or --rate\n");
        return 2;
    }
    size_t len;
    unsigned char *wav = make_wav(rate, &len);
    if (!wav)
        return 1;
    if (portable)
        tern_isa_set(TERN_ISA_PORTABLE);
    const char *kernel = tern_logmel_kernel();
    printf("bench_audio: 30 s clip, 16-bit mono WAV at %d Hz (%zu bytes), %s log-mel kernel, %d iterations, "
           "median (min)\n",
           rate, len, kernel, iters);
    if (run(wav, len, NULL, iters, "1 thread"))
        return 1;
    tern_pool *pool = NULL;
    tern_err *e = tern_pool_create(threads, &pool);
    if (e) {
        fprintf(stderr, "bench_audio: %s\n", tern_err_msg(e));
        return 1;
    }
    char label[32];
    snprintf(label, sizeof label, "%d threads", tern_pool_size(pool));
    int rc = tern_pool_size(pool) > 1 ? run(wav, len, pool, iters, label) : 0;
    tern_pool_destroy(pool);
    free(wav);
    return rc;
}
