/* bench_engine.c — the serving engine's throughput and latency, through the public API (tern.h):
 *
 *   1. aggregate decode tok/s with S = 1, 2, 4, 8 concurrent streams: S greedy requests with distinct
 *      prompts start together; the rate counts the tokens generated while all S were decoding (from the
 *      last first-token to the first finish), so prefill and stragglers do not dilute it;
 *   2. time to first token for a 2,000-token prompt, cold, then again with the prompt in the prefix
 *      cache (the engine recomputes only the tokens past the last whole cached block).
 *
 * usage: bench_engine MODEL_DIR [--streams 1,2,4,8] [-n 64] [-p 128] [--ttft-prompt 2000]
 *                     [--threads T] [--chunk 256] [--json]
 * Run on a quiet machine (see bench/README.md); e.g. on the e2b synthetic model:
 *   build/tern synth --preset e2b --dtype q4 models/e2b-q4
 *   build/bench_engine models/e2b-q4 --threads 2 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tern.h"

#define MAX_STREAMS 64

typedef struct stream_rec {
    double first, done;  /* event times (monotonic s) */
    double *t;           /* [n] token event times */
    int n, cap;
    tern_event fin;
    int finished;
} stream_rec;

typedef struct bench {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    stream_rec rec[MAX_STREAMS];
    int done;
} bench;

typedef struct cb_arg {
    bench *b;
    int i;
} cb_arg;

static void on_event(const tern_event *ev, void *user) {
    cb_arg *a = user;
    bench *b = a->b;
    stream_rec *r = &b->rec[a->i];
    pthread_mutex_lock(&b->mu);
    if (ev->kind == TERN_EV_TOKEN) {
        if (r->n < r->cap)
            r->t[r->n++] = ev->time_s;
        if (ev->index == 0)
            r->first = ev->time_s;
    } else {
        r->done = ev->time_s;
        r->fin = *ev;
        r->finished = 1;
        b->done++;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

static void fill_ids(int32_t *ids, int64_t n, uint32_t s, int64_t vocab) {
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = 2 + (int32_t)((s >> 8) % (uint32_t)(vocab - 2 > 30000 ? 30000 : vocab - 2));
    }
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > MAX_STREAMS)
            return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

static int die(tern_err *e) {
    fprintf(stderr, "bench_engine: %s\n", tern_err_msg(e));
    tern_err_free(e);
    return 1;
}

/* Runs S concurrent greedy streams; returns the aggregate decode rate while all S were decoding. */
static double decode_rate(tern_engine *e, int S, int64_t p, int64_t n, int64_t vocab, double *per_stream) {
    static bench b;
    static cb_arg args[MAX_STREAMS];
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    int32_t *prompts = malloc((size_t)(S * p) * sizeof *prompts);
    for (int i = 0; i < S; i++) {
        b.rec[i].cap = (int)n;
        b.rec[i].t = calloc((size_t)n, sizeof(double));
        fill_ids(prompts + i * p, p, 1000u + (uint32_t)i * 7919u + (uint32_t)S, vocab);
    }
    for (int i = 0; i < S; i++) {
        tern_request r;
        tern_request_default(&r);
        r.prompt_ids = prompts + i * p;
        r.n_prompt_ids = (size_t)p;
        r.max_tokens = n;
        r.ignore_eos = 1;
        args[i] = (cb_arg){&b, i};
        tern_err *err = tern_engine_submit(e, &r, on_event, &args[i], NULL, NULL);
        if (err)
            exit(die(err));
    }
    pthread_mutex_lock(&b.mu);
    while (b.done < S)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    double start = 0, end = 1e300;
    for (int i = 0; i < S; i++) {
        if (b.rec[i].first > start)
            start = b.rec[i].first;
        if (b.rec[i].done < end)
            end = b.rec[i].done;
    }
    long tokens = 0;
    for (int i = 0; i < S; i++)
        for (int k = 0; k < b.rec[i].n; k++)
            tokens += b.rec[i].t[k] > start && b.rec[i].t[k] <= end;
    double rate = end > start ? (double)tokens / (end - start) : 0;
    *per_stream = rate / S;
    for (int i = 0; i < S; i++)
        free(b.rec[i].t);
    free(prompts);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    return rate;
}

/* One request of `p` prompt tokens generating one token; returns its DONE event. */
static tern_event one_shot(tern_engine *e, const int32_t *ids, int64_t p) {
    tern_request r;
    tern_request_default(&r);
    r.prompt_ids = ids;
    r.n_prompt_ids = (size_t)p;
    r.max_tokens = 1;
    r.ignore_eos = 1;
    tern_stream *s;
    tern_err *err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL);
    if (err)
        exit(die(err));
    tern_event ev, done;
    memset(&done, 0, sizeof done);
    while (tern_stream_next(s, &ev, -1) == 1)
        if (ev.kind == TERN_EV_DONE)
            done = ev;
    done.text = NULL;
    tern_stream_free(s);
    return done;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int streams[16] = {1, 2, 4, 8}, n_streams = 4, threads = 0, chunk = 256, json = 0;
    int64_t n = 64, p = 128, ttft_p = 2000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--streams") && v) {
            if ((n_streams = parse_list(v, streams, 16)) <= 0) {
                fprintf(stderr, "bench_engine: --streams wants a list like 1,2,4,8 (each 1..%d)\n", MAX_STREAMS);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "-n") && v) {
            n = atoll(argv[++i]);
        } else if (!strcmp(a, "-p") && v) {
            p = atoll(argv[++i]);
        } else if (!strcmp(a, "--ttft-prompt") && v) {
            ttft_p = atoll(argv[++i]);
        } else if (!strcmp(a, "--threads") && v) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(a, "--chunk") && v) {
            chunk = atoi(argv[++i]);
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] != '-' && !dir) {
            dir = a;
        } else {
            fprintf(stderr, "usage: bench_engine MODEL_DIR [--streams 1,2,4,8] [-n 64] [-p 128] [--ttft-prompt 2000] "
                            "[--threads T] [--chunk 256] [--json]\n");
            return 2;
        }
    }
    if (!dir || n < 2 || p < 1 || ttft_p < 2 || chunk < 1) {
        fprintf(stderr, "usage: bench_engine MODEL_DIR [--streams 1,2,4,8] [-n 64] [-p 128] [--ttft-prompt 2000] "
                        "[--threads T] [--chunk 256] [--json]\n");
        return 2;
    }
    tern_model *m;
    tern_model_opts mo = {.model_dir = dir, .threads = threads};
    tern_err *err = tern_model_load(&mo, &m);
    if (err)
        return die(err);
    tern_model_info mi;
    tern_model_get_info(m, &mi);
    int max_s = 1;
    for (int i = 0; i < n_streams; i++)
        max_s = streams[i] > max_s ? streams[i] : max_s;

    /* 1. decode throughput: one engine with max_s rows, prefix cache off (prompts are distinct anyway). */
    tern_engine_opts o;
    tern_engine_opts_default(&o);
    o.parallel = max_s;
    o.ctx = p + n + 1;
    o.prefix_cache_bytes = 0;
    o.threads = threads;
    o.prefill_chunk = chunk;
    o.step_tokens = chunk + max_s;
    o.max_queue = MAX_STREAMS;
    tern_engine *e;
    if ((err = tern_engine_create(m, &o, &e)))
        return die(err);
    double rates[16], per[16];
    for (int i = 0; i < n_streams; i++)
        rates[i] = decode_rate(e, streams[i], p, n, mi.vocab_size, &per[i]);
    tern_engine_destroy(e);

    /* 2. TTFT for a long prompt: cold, then with its prefix cached. */
    tern_engine_opts_default(&o);
    o.parallel = 1;
    o.ctx = ttft_p + 2;
    o.prefix_cache_bytes = (int64_t)(mi.kv_full_bytes_per_token + mi.kv_sliding_bytes_per_token) * (ttft_p + 64) * 2;
    o.threads = threads;
    o.prefill_chunk = chunk;
    o.step_tokens = chunk + 1;
    if ((err = tern_engine_create(m, &o, &e)))
        return die(err);
    int32_t *ids = malloc((size_t)ttft_p * sizeof *ids);
    fill_ids(ids, ttft_p, 4242, mi.vocab_size);
    tern_event cold = one_shot(e, ids, ttft_p), hot = one_shot(e, ids, ttft_p);
    tern_engine_destroy(e);
    free(ids);

    if (json) {
        printf("{\"model\": \"%s\", \"prompt\": %lld, \"generated\": %lld, \"decode\": [", dir, (long long)p,
               (long long)n);
        for (int i = 0; i < n_streams; i++)
            printf("%s{\"streams\": %d, \"tok_s\": %.2f, \"tok_s_per_stream\": %.2f}", i ? ", " : "", streams[i],
                   rates[i], per[i]);
        printf("], \"ttft\": {\"prompt\": %lld, \"cold_s\": %.4f, \"cached_s\": %.4f, \"cached_tokens\": %lld}}\n",
               (long long)ttft_p, cold.timings.ttft_s, hot.timings.ttft_s, (long long)hot.usage.cached_tokens);
    } else {
        printf("model %s: decode with %lld-token prompts, %lld generated per stream\n", dir, (long long)p, (long long)n);
        printf("  streams   aggregate tok/s   per stream tok/s\n");
        for (int i = 0; i < n_streams; i++)
            printf("  %7d   %15.2f   %16.2f\n", streams[i], rates[i], per[i]);
        printf("time to first token, %lld-token prompt: cold %.3f s, prefix cached %.3f s (%lld tokens from the cache)\n",
               (long long)ttft_p, cold.timings.ttft_s, hot.timings.ttft_s, (long long)hot.usage.cached_tokens);
    }
    tern_model_free(m);
    return 0;
}
