/* bench_tower.c — a model's audio or vision tower on one input, and what it does to text decoding beside it.
 *
 * usage: bench_tower MODEL_DIR (--audio | --image [FILE]) [--budget B] [--threads T] [--rounds N] [--itl]
 *                    [--tokens N] [--tower-threads A] [--json]
 *
 * --audio: log-mel features, then the conformer tower and embed_audio over 30 s of 16 kHz audio (a synthetic gliding
 * harmonic tone with pauses: the tower's cost does not depend on the content). --image: FILE decoded (default: an
 * 896 x 896 synthetic picture), resized for B soft tokens (default the processor's, 280) and encoded by the vision
 * tower and embed_vision. On a pool of T threads; the median of N rounds after one warm-up.
 *
 * --itl: the server's arrangement, measured on the engine directly. One text request decodes (T engine threads)
 * while, on another thread, the tower encodes its input on its own pool of A threads (the server's media pool;
 * default T), below the engine's priority as the server runs it (TERN_MEDIA_NICE), and then the input's chat
 * request joins the engine's batch. Reported: the text request's inter-token
 * latency (median, p90, max) before the encode, while it runs, and after, and the encode's own time under that
 * load. Nothing is asserted: it is a measurement. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "core/fileio.h"
#include "core/timeutil.h"
#include "image/image.h"
#include "loader/audio_input.h"
#include "loader/image_input.h"
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

/* An 896 x 896 picture: smooth colour waves (the tower's cost does not depend on the content). */
static int make_picture(tern_image *im) {
    im->w = im->h = 896;
    im->rgb = malloc((size_t)im->w * (size_t)im->h * 3);
    for (int y = 0; im->rgb && y < im->h; y++)
        for (int x = 0; x < im->w; x++)
            for (int c = 0; c < 3; c++)
                im->rgb[((size_t)y * im->w + x) * 3 + c] =
                    (uint8_t)(128 + 100 * sin(x / (9.0 + 4 * c) - y / (13.0 + 2 * c)));
    return im->rgb ? 0 : -1;
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
    fprintf(stderr, "bench_tower: %s\n", tern_err_msg(e));
    tern_err_free(e);
    return 1;
}

/* The input one round encodes, and what it became. */
typedef struct media {
    int image;
    const float *clip; /* audio: 16 kHz samples */
    size_t n;
    tern_image pic;    /* image: decoded pixels */
    int budget;
} media;

typedef struct encoded {
    tern_audio_embeds a;
    tern_image_embeds i;
    tern_prompt_embeds rows; /* n, rows, key of whichever it was */
} encoded;

static TERN_MUST_CHECK tern_err *encode(const tern_model *m, const media *in, tern_pool *pool, encoded *out) {
    memset(out, 0, sizeof *out);
    if (in->image) {
        TERN_TRY(tern_image_input_embed_rgb(m->image, &in->pic, in->budget, pool, &out->i));
        out->rows = (tern_prompt_embeds){.n = (int64_t)out->i.n, .rows = out->i.rows, .key = out->i.hash};
    } else {
        TERN_TRY(tern_audio_input_embed_pcm(m->audio, in->clip, in->n, pool, &out->a));
        out->rows = (tern_prompt_embeds){.n = (int64_t)out->a.n, .rows = out->a.rows, .key = out->a.hash};
    }
    return NULL;
}

static void encoded_free(encoded *e) {
    tern_audio_embeds_free(&e->a);
    tern_image_embeds_free(&e->i);
}

/* ---- --itl ---------------------------------------------------------------------------------------- */

typedef struct encode_job {
    const tern_model *m;
    int threads; /* the tower's pool, made by the encode's own thread */
    const media *in;
    encoded e;
    double t0, t1; /* the encode ran between these times */
    tern_err *err;
} encode_job;

/* As `tern serve` encodes: on a thread below the engine's priority, whose pool's workers inherit it. */
static void *encode_thread(void *arg) {
    encode_job *j = arg;
    j->t0 = tern_now_s();
    tern_thread_lower_priority(TERN_MEDIA_NICE);
    tern_pool *pool = NULL;
    j->err = tern_pool_create(j->threads, &pool);
    if (!j->err)
        j->err = encode(j->m, j->in, pool, &j->e);
    tern_pool_destroy(pool);
    j->t1 = tern_now_s();
    return NULL;
}

/* The chat turn the server would build for the encoded input: the template's marker spliced into start, soft
 * tokens, end. */
static TERN_MUST_CHECK tern_err *chat_request(tern_model *m, const media *in, const encoded *enc, int32_t **spliced, size_t *n,
                              tern_prompt_embeds *span) {
    tern_chat_info ci;
    tern_model_chat_info(m, &ci);
    const char *marks[3] = {in->image ? ci.image_token : ci.audio_token, in->image ? ci.image_start : ci.audio_start,
                            in->image ? ci.image_end : ci.audio_end};
    if (!marks[0] || !marks[1] || !marks[2])
        return tern_errf(TERN_EUNSUPPORTED, "the vocabulary has no %s markers", in->image ? "image" : "audio");
    char text[256];
    snprintf(text, sizeof text, "%suser\n%s%s%s\n%smodel\n", ci.turn_start, marks[0],
             in->image ? "Describe this." : "Transcribe this.", ci.turn_end, ci.turn_start);
    int32_t *ids = NULL, id[3];
    size_t n_ids = 0, one;
    tern_err *err = NULL;
    for (int q = 0; q < 3 && !err; q++) {
        int32_t *x = NULL;
        err = tern_model_tokenize(m, marks[q], strlen(marks[q]), 0, 1, &x, &one);
        id[q] = x && one == 1 ? x[0] : -1;
        tern_free(x);
    }
    if (!err)
        err = tern_model_tokenize(m, text, strlen(text), 1, 1, &ids, &n_ids);
    const tern_splice_kind kind = {.marker = id[0], .start = id[1], .end = id[2], .items = &enc->rows, .n_items = 1,
                                   .what = in->image ? "image" : "audio"};
    if (!err)
        err = tern_media_splice(ids, n_ids, &kind, 1, spliced, n, span);
    tern_free(ids);
    return err;
}

static int run_itl(tern_model *m, const media *in, int threads, int tower_threads, int64_t tokens, int json) {
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.parallel = 2;
    eo.threads = threads;
    eo.ctx = 4096;
    eo.draft_max = 0;
    tern_engine *e = NULL;
    tern_err *err = tern_engine_create(m, &eo, &e);
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
    encode_job job = {.m = m, .threads = tower_threads, .in = in};
    pthread_t th;
    int started = 0;
    tern_stream *as = NULL;
    tern_event ev;
    while (tern_stream_next(s, &ev, 600000) == 1) {
        if (ev.kind == TERN_EV_DONE)
            break;
        t[k++] = tern_now_s();
        if (k == tokens / 4 && !started) /* a quarter in: the input arrives */
            started = pthread_create(&th, NULL, encode_thread, &job) == 0;
        if (started == 1 && job.t1 > 0) { /* encoded: its chat request joins the batch */
            pthread_join(th, NULL);
            started = 2;
            if (job.err)
                return fail(job.err);
            int32_t *spliced = NULL;
            size_t n_spliced = 0;
            tern_prompt_embeds span;
            if ((err = chat_request(m, in, &job.e, &spliced, &n_spliced, &span)))
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
    const char *what = in->image ? "an image's" : "a 30 s clip's";
    if (json)
        printf("{\"input\":\"%s\",\"itl_before_ms\":%.2f,\"itl_during_ms\":%.2f,\"itl_during_p90_ms\":%.2f,"
               "\"itl_during_max_ms\":%.2f,\"itl_after_ms\":%.2f,\"tokens_during\":%d,\"encode_s\":%.3f,"
               "\"engine_threads\":%d,\"tower_threads\":%d}\n",
               in->image ? "image" : "audio", b50 * 1e3, d50 * 1e3, d90 * 1e3, dmax * 1e3, a50 * 1e3, nd, enc,
               threads, tower_threads);
    else
        printf("text decoding beside %s encode (engine %d threads, tower pool %d):\n"
               "  inter-token latency before: median %.1f ms (%d tokens)\n"
               "  while encoding (%.2f s):     median %.1f ms, p90 %.1f ms, max %.1f ms (%d tokens: the row kept decoding)\n"
               "  after (input in the batch):  median %.1f ms (%d tokens)\n",
               what, threads, tower_threads, b50 * 1e3, nb, enc, d50 * 1e3, d90 * 1e3, dmax * 1e3, nd, a50 * 1e3, na);
    if (as) {
        while (tern_stream_next(as, &ev, 600000) == 1 && ev.kind != TERN_EV_DONE)
            ;
        tern_stream_free(as);
    }
    tern_stream_free(s);
    encoded_free(&job.e);
    free(t), free(before), free(during), free(after);
    tern_engine_destroy(e);
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_tower MODEL_DIR (--audio | --image [FILE]) [--budget B] [--threads T] [--rounds N] "
                    "[--itl] [--tokens N] [--tower-threads A] [--json]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *image_file = NULL;
    int threads = 2, rounds = 3, itl = 0, json = 0, tower_threads = 0, budget = 0;
    media in = {.image = -1};
    int64_t tokens = 400;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--tower-threads") && i + 1 < argc)
            tower_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc)
            budget = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--audio"))
            in.image = 0;
        else if (!strcmp(argv[i], "--image")) {
            in.image = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                image_file = argv[++i];
        } else if (!strcmp(argv[i], "--itl"))
            itl = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else
            return usage();
    }
    if (!dir || in.image < 0 || threads < 1 || rounds < 1 || tokens < 16)
        return usage();
    if (!tower_threads)
        tower_threads = threads;
    tern_err *err = NULL;
    if (in.image && image_file) {
        char *bytes = NULL;
        size_t len = 0;
        err = tern_read_file(image_file, 1u << 30, &bytes, &len);
        if (!err)
            err = tern_image_decode(bytes, len, &in.pic);
        free(bytes);
    } else if (in.image && make_picture(&in.pic)) {
        err = tern_errf(TERN_ENOMEM, "out of memory");
    }
    float *clip = in.image ? NULL : make_clip(&in.n);
    in.clip = clip;
    tern_model_opts mo = {.model_dir = dir, .threads = threads};
    tern_model *m = NULL;
    if (!err)
        err = tern_model_load(&mo, &m);
    if (err)
        return fail(err);
    if (in.image ? !m->image : !m->audio) {
        fprintf(stderr, "bench_tower: %s has no %s tower (tern synth --%s adds one)\n", dir, in.image ? "vision" : "audio",
                in.image ? "vision" : "audio");
        return 1;
    }
    in.budget = in.image ? (budget ? budget : tern_image_input_default_budget(m->image)) : 0;
    int rc = 0;
    if (itl) {
        rc = run_itl(m, &in, threads, tower_threads, tokens, json);
    } else {
        tern_pool *pool = NULL;
        if ((err = tern_pool_create(threads, &pool)))
            return fail(err);
        double *sec = calloc((size_t)rounds, sizeof *sec);
        size_t tok = 0;
        for (int it = -1; it < rounds; it++) { /* one warm-up round faults the weights in */
            encoded e;
            double t0 = tern_now_s();
            if ((err = encode(m, &in, pool, &e)))
                return fail(err);
            if (it >= 0)
                sec[it] = tern_now_s() - t0;
            tok = (size_t)e.rows.n;
            encoded_free(&e);
        }
        double med = quantile(sec, rounds, 0.5), best = quantile(sec, rounds, 0.0);
        char desc[512];
        if (in.image)
            tern_image_input_describe(m->image, desc, sizeof desc);
        else
            tern_audio_input_describe(m->audio, desc, sizeof desc);
        if (json && in.image)
            printf("{\"image\":\"%dx%d\",\"budget\":%d,\"soft_tokens\":%zu,\"threads\":%d,\"encode_s\":%.3f,"
                   "\"best_s\":%.3f}\n", in.pic.w, in.pic.h, in.budget, tok, threads, med, best);
        else if (json)
            printf("{\"clip_s\":30,\"soft_tokens\":%zu,\"threads\":%d,\"encode_s\":%.3f,\"best_s\":%.3f,"
                   "\"x_realtime\":%.1f}\n", tok, threads, med, best, 30.0 / med);
        else if (in.image)
            printf("tower: %s\n%d x %d image at budget %d -> %zu soft tokens on %d threads: %.3f s median of %d "
                   "(best %.3f s)\n", desc, in.pic.w, in.pic.h, in.budget, tok, threads, med, rounds, best);
        else
            printf("tower: %s\n30 s clip -> %zu soft tokens on %d threads: %.3f s median of %d (best %.3f s) = %.1fx "
                   "real time\n", desc, tok, threads, med, rounds, best, 30.0 / med);
        free(sec);
        tern_pool_destroy(pool);
    }
    free(clip);
    tern_image_free(&in.pic);
    tern_model_free(m);
    return rc;
}
