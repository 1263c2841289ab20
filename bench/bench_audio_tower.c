/* bench_audio_tower.c — the audio tower on a 30 s clip, and what it does to text decoding beside it.
 *
 * usage: bench_audio_tower MODEL_DIR [--threads T] [--rounds N] [--itl] [--tokens N] [--audio-threads A] [--json]
 *
 * Tower: log-mel features, then the conformer tower and embed_audio over 30 s of 16 kHz audio (a synthetic gliding
 * harmonic tone with pauses: the tower's cost does not depend on the content), on a pool of T threads; the median
 * of N rounds after one warm-up, as seconds and as a multiple of real time.
 *
 * --itl: the server's arrangement, measured on the engine directly. One text request decodes (T engine threads)
 * while, on another thread, the tower encodes a 30 s clip on its own pool of A threads (the server's audio pool;
 * default T) and then the clip's chat request joins the engine's batch. Reported: the text request's inter-token
 * latency (median, p90, max) before the encode, while it runs, and after, and the encode's own time under that
 * load. Nothing is asserted: it is a measurement. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/timeutil.h"
#include "loader/audio_input.h"
#include "loader/loader.h"
#include "tern/tern.h"

/* 30 s of 16 kHz samples: a gliding tone with harmonics and noise, half of every second quieter. */
static float *make_clip(size_t *n) {
    *n = TERN_AUDIO_MAX_SAMPLES;
    float *x = malloc(*n * sizeof *x);
    double phase = 0;
    uint32_t seed = 12345;
    for (size_t i = 0; x && i < *n; i++) {
        double t = (double)i / TERN_AUDIO_RATE;
        phase += 2 * M_PI * (120.0 + 80.0 * sin(2 * M_PI * 0.7 * t)) / TERN_AUDIO_RATE;
        double v = 0;
        for (int h = 1; h <= 12; h++)
            v += sin(h * phase) / h;
        seed = seed * 1664525u + 1013904223u;
        v = 0.3 * v + 0.02 * ((seed >> 8) / 16777216.0 - 0.5);
        x[i] = (float)(fmod(t, 0.5) > 0.25 ? v * 0.01 : v);
    }
    return x;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(double *v, int n, double q) {
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

static int fail(tern_err *e) {
    fprintf(stderr, "bench_audio_tower: %s\n", tern_err_msg(e));
    tern_err_free(e);
    return 1;
}

/* ---- --itl ---------------------------------------------------------------------------------------- */

typedef struct encode_job {
    const tern_model *m;
    tern_pool *pool;
    const float *clip;
    size_t n;
    tern_audio_embeds e;
    double t0, t1; /* the encode ran between these times */
    tern_err *err;
} encode_job;

static void *encode_thread(void *arg) {
    encode_job *j = arg;
    j->t0 = tern_now_s();
    j->err = tern_audio_input_embed_pcm(j->m->audio, j->clip, j->n, j->pool, &j->e);
    j->t1 = tern_now_s();
    return NULL;
}

static int run_itl(tern_model *m, int threads, int audio_threads, int64_t tokens, const float *clip, size_t n,
                   int json) {
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.parallel = 2;
    eo.threads = threads;
    eo.ctx = 4096;
    eo.draft_max = 0;
    tern_engine *e = NULL;
    tern_pool *apool = NULL;
    tern_err *err = tern_engine_create(m, &eo, &e);
    if (!err)
        err = tern_pool_create(audio_threads, &apool);
    if (err)
        return fail(err);
    int32_t prompt[16] = {2, 105, 2364, 107, 3689, 563, 236743, 236778, 236862, 236778, 236881, 106, 107, 105, 4368, 107};
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = 16;
    r.max_tokens = tokens;
    r.ignore_eos = 1;
    tern_stream *s = NULL;
    if ((err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL)))
        return fail(err);
    double *t = calloc((size_t)tokens + 1, sizeof *t);
    int64_t k = 0;
    encode_job job = {.m = m, .pool = apool, .clip = clip, .n = n};
    pthread_t th;
    int started = 0;
    tern_stream *as = NULL;
    tern_event ev;
    while (tern_stream_next(s, &ev, 600000) == 1) {
        if (ev.kind == TERN_EV_DONE)
            break;
        t[k++] = tern_now_s();
        if (k == tokens / 4 && !started) { /* a quarter in: the clip arrives */
            started = pthread_create(&th, NULL, encode_thread, &job) == 0;
        }
        if (started == 1 && job.t1 > 0) { /* encoded: its chat request joins the batch */
            pthread_join(th, NULL);
            started = 2;
            if (job.err)
                return fail(job.err);
            /* The chat turn the server would build: the template's marker spliced into start, soft tokens, end. */
            tern_chat_info ci;
            tern_model_chat_info(m, &ci);
            char text[256];
            snprintf(text, sizeof text, "%suser\n%sTranscribe this.%s\n%smodel\n", ci.turn_start, ci.audio_token,
                     ci.turn_end, ci.turn_start);
            int32_t *ids = NULL, *spliced = NULL, id[3];
            size_t n_ids = 0, n_spliced = 0, one;
            const char *marks[3] = {ci.audio_token, ci.audio_start, ci.audio_end};
            for (int q = 0; q < 3 && !err; q++) {
                int32_t *x = NULL;
                err = tern_model_tokenize(m, marks[q], strlen(marks[q]), 0, 1, &x, &one);
                id[q] = x && one == 1 ? x[0] : -1;
                tern_free(x);
            }
            tern_prompt_embeds span;
            if (!err)
                err = tern_model_tokenize(m, text, strlen(text), 1, 1, &ids, &n_ids);
            if (!err)
                err = tern_audio_splice(ids, n_ids, id[0], id[1], id[2], &job.e, 1, NULL, 0, &spliced, &n_spliced, &span);
            tern_free(ids);
            if (err)
                return fail(err);
            tern_request ar;
            tern_request_default(&ar);
            ar.prompt_ids = spliced;
            ar.n_prompt_ids = n_spliced;
            ar.embeds = &span;
            ar.n_embeds = 1;
            ar.max_tokens = 8;
            err = tern_engine_submit(e, &ar, NULL, NULL, &as, NULL);
            free(spliced);
            if (err)
                return fail(err);
        }
    }
    if (started == 1)
        pthread_join(th, NULL);
    double *before = calloc((size_t)k, sizeof *before), *during = calloc((size_t)k, sizeof *during),
           *after = calloc((size_t)k, sizeof *after);
    int nb = 0, nd = 0, na = 0;
    for (int64_t i = 1; i < k; i++) {
        double gap = t[i] - t[i - 1];
        if (t[i] < job.t0)
            before[nb++] = gap;
        else if (t[i - 1] <= job.t1)
            during[nd++] = gap;
        else
            after[na++] = gap;
    }
    double enc = job.t1 - job.t0, b50 = quantile(before, nb, 0.5), d50 = quantile(during, nd, 0.5),
           d90 = quantile(during, nd, 0.9), dmax = quantile(during, nd, 1.0), a50 = quantile(after, na, 0.5);
    if (json)
        printf("{\"itl_before_ms\":%.2f,\"itl_during_ms\":%.2f,\"itl_during_p90_ms\":%.2f,\"itl_during_max_ms\":%.2f,"
               "\"itl_after_ms\":%.2f,\"tokens_during\":%d,\"encode_s\":%.3f,\"engine_threads\":%d,\"audio_threads\":%d}\n",
               b50 * 1e3, d50 * 1e3, d90 * 1e3, dmax * 1e3, a50 * 1e3, nd, enc, threads, audio_threads);
    else
        printf("text decoding beside a 30 s clip's encode (engine %d threads, audio pool %d):\n"
               "  inter-token latency before: median %.1f ms (%d tokens)\n"
               "  while encoding (%.2f s):     median %.1f ms, p90 %.1f ms, max %.1f ms (%d tokens: the row kept decoding)\n"
               "  after (clip in the batch):   median %.1f ms (%d tokens)\n",
               threads, audio_threads, b50 * 1e3, nb, enc, d50 * 1e3, d90 * 1e3, dmax * 1e3, nd, a50 * 1e3, na);
    if (as) {
        while (tern_stream_next(as, &ev, 600000) == 1 && ev.kind != TERN_EV_DONE)
            ;
        tern_stream_free(as);
    }
    tern_stream_free(s);
    tern_audio_embeds_free(&job.e);
    free(t), free(before), free(during), free(after);
    tern_pool_destroy(apool);
    tern_engine_destroy(e);
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int threads = 2, rounds = 3, itl = 0, json = 0, audio_threads = 0;
    int64_t tokens = 400;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--audio-threads") && i + 1 < argc)
            audio_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--itl"))
            itl = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else {
            fprintf(stderr, "usage: bench_audio_tower MODEL_DIR [--threads T] [--rounds N] [--itl] [--tokens N] "
                            "[--audio-threads A] [--json]\n");
            return 2;
        }
    }
    if (!dir || threads < 1 || rounds < 1 || tokens < 16) {
        fprintf(stderr, "bench_audio_tower: a model folder, --threads >= 1, --rounds >= 1, --tokens >= 16\n");
        return 2;
    }
    if (!audio_threads)
        audio_threads = threads;
    size_t n;
    float *clip = make_clip(&n);
    tern_model_opts mo = {.model_dir = dir, .threads = threads};
    tern_model *m = NULL;
    tern_err *err = tern_model_load(&mo, &m);
    if (err)
        return fail(err);
    if (!m->audio) {
        fprintf(stderr, "bench_audio_tower: %s has no audio tower (tern synth --audio adds one)\n", dir);
        return 1;
    }
    int rc = 0;
    if (itl) {
        rc = run_itl(m, threads, audio_threads, tokens, clip, n, json);
    } else {
        tern_pool *pool = NULL;
        if ((err = tern_pool_create(threads, &pool)))
            return fail(err);
        double *sec = calloc((size_t)rounds, sizeof *sec);
        size_t tok = 0;
        for (int it = -1; it < rounds; it++) { /* one warm-up round faults the weights in */
            tern_audio_embeds e;
            double t0 = tern_now_s();
            if ((err = tern_audio_input_embed_pcm(m->audio, clip, n, pool, &e)))
                return fail(err);
            if (it >= 0)
                sec[it] = tern_now_s() - t0;
            tok = e.n;
            tern_audio_embeds_free(&e);
        }
        double med = quantile(sec, rounds, 0.5), best = quantile(sec, rounds, 0.0);
        char desc[512];
        tern_audio_input_describe(m->audio, desc, sizeof desc);
        if (json)
            printf("{\"clip_s\":30,\"soft_tokens\":%zu,\"threads\":%d,\"encode_s\":%.3f,\"best_s\":%.3f,"
                   "\"x_realtime\":%.1f}\n", tok, threads, med, best, 30.0 / med);
        else
            printf("tower: %s\n30 s clip -> %zu soft tokens on %d threads: %.3f s median of %d (best %.3f s) = %.1fx "
                   "real time\n", desc, tok, threads, med, rounds, best, 30.0 / med);
        free(sec);
        tern_pool_destroy(pool);
    }
    free(clip);
    tern_model_free(m);
    return rc;
}
