/* bench_spec.c — what speculative decoding buys on this CPU, each ratio measured in one run against plain decoding
 * of the same prompt on the same engine: OpenAI predicted outputs that agree with the output fully, on about 70% of
 * its tokens and not at all, and prompt lookup (n-gram) on a prompt that repeats itself. Every speculative run is
 * checked to produce plain decoding's exact tokens (greedy), so the figures are of the same output.
 *
 * Rounds interleave the variants (plain, then each speculative one, then again), so a drift of the machine hits them
 * alike; medians of decode speed (tokens after the first, over the time after the first) are reported.
 *
 * (A drafter model on chat prompts: `tern bench MODEL --draft-model DIR --prompts FILE`.)
 *
 * usage: bench_spec MODEL_DIR [-n 128] [--rounds 3] [--threads 2] [--draft-max 8] [--json]
 *   build/bench_spec models/e2b-q4 --threads 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tern.h"

#define MAX_ROUNDS 15
enum { V_PLAIN, V_FULL, V_70, V_NONE, V_NGRAM_PLAIN, V_NGRAM, N_VARIANTS };
static const char *const NAMES[N_VARIANTS] = {"plain", "prediction 100%", "prediction ~70%", "prediction 0%",
                                              "plain (n-gram prompt)", "n-gram"};

/* A prompt whose text repeats (a code edit: the same function twice), for prompt lookup to draft from. */
static const char *const NGRAM_PROMPT =
    "Rename the variable total to sum in this function and return the whole function.\n\n"
    "def average(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n\n"
    "def average(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n";
static const char *const PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle.";

typedef struct outcome {
    int32_t toks[4096];
    int n;
    double tok_s;
    tern_usage usage;
} outcome;

static int run(tern_engine *e, const char *prompt, int64_t n_gen, const int32_t *pred, size_t n_pred, int plain,
               outcome *o) {
    tern_request r;
    tern_request_default(&r);
    r.prompt_text = prompt;
    r.prompt_text_len = strlen(prompt);
    r.add_special = 1;
    r.max_tokens = n_gen;
    r.ignore_eos = 1;
    r.prediction_ids = pred;
    r.n_prediction_ids = n_pred;
    r.draft_off = plain;
    tern_stream *s;
    tern_err *err = tern_engine_submit(e, &r, NULL, NULL, &s, NULL);
    if (err) {
        fprintf(stderr, "bench_spec: %s\n", tern_err_msg(err));
        tern_err_free(err);
        return -1;
    }
    memset(o, 0, sizeof *o);
    tern_event ev;
    while (tern_stream_next(s, &ev, -1) == 1) {
        if (ev.kind == TERN_EV_TOKEN && o->n < 4096)
            o->toks[o->n++] = ev.token;
        if (ev.kind == TERN_EV_DONE) {
            o->usage = ev.usage;
            o->tok_s = ev.timings.decode_s > 0 ? (double)(ev.usage.completion_tokens - 1) / ev.timings.decode_s : 0;
        }
    }
    tern_stream_free(s);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int64_t n_gen = 128;
    int rounds = 3, threads = 0, draft_max = 8, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n_gen = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--draft-max") && i + 1 < argc)
            draft_max = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(stderr, "usage: bench_spec MODEL_DIR [-n 128] [--rounds 3] [--threads 2] [--draft-max 8] [--json]\n");
            return 2;
        }
    }
    if (!dir || n_gen < 8 || n_gen > 4000 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench_spec MODEL_DIR [-n 128] [--rounds 3] [--threads 2] [--draft-max 8] [--json]\n");
        return 2;
    }
    tern_model_opts mo = {.model_dir = dir, .threads = threads};
    tern_model *m = NULL;
    tern_engine *e = NULL;
    tern_err *err = tern_model_load(&mo, &m);
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.parallel = 1;
    eo.ctx = 2048;
    eo.draft_ngram = 1;
    eo.draft_max = draft_max;
    if (!err)
        err = tern_engine_create(m, &eo, &e);
    if (err) {
        fprintf(stderr, "bench_spec: %s\n", tern_err_msg(err));
        tern_err_free(err);
        tern_model_free(m);
        return 1;
    }
    tern_model_info info;
    tern_model_get_info(m, &info);
    const int64_t V = info.vocab_size;
    static outcome plain, ngram_plain, o;
    static int32_t pred[3][4096];
    double speed[N_VARIANTS][MAX_ROUNDS];
    int64_t acc[N_VARIANTS] = {0}, drafted[N_VARIANTS] = {0};
    int rc = 0;
    for (int r = 0; r < rounds && !rc; r++) {
        rc |= run(e, PROMPT, n_gen, NULL, 0, 1, &plain);
        speed[V_PLAIN][r] = plain.tok_s;
        if (r == 0) /* the predictions, from the plain output: itself, 3 tokens in 10 changed, unrelated ids */
            for (int j = 0; j < plain.n; j++) {
                pred[0][j] = plain.toks[j];
                pred[1][j] = j % 10 == 2 || j % 10 == 5 || j % 10 == 8 ? (int32_t)((plain.toks[j] + 1 + j) % V)
                                                                       : plain.toks[j];
                pred[2][j] = (int32_t)((V / 2 + (int64_t)j * 7919) % V);
            }
        for (int v = V_FULL; v <= V_NONE && !rc; v++) {
            rc |= run(e, PROMPT, n_gen, pred[v - V_FULL], (size_t)plain.n, 0, &o);
            speed[v][r] = o.tok_s;
            acc[v] += o.usage.accepted_draft_tokens;
            drafted[v] += o.usage.drafted_tokens;
            if (o.n != plain.n || memcmp(o.toks, plain.toks, (size_t)plain.n * sizeof *o.toks)) {
                fprintf(stderr, "bench_spec: %s changed the output\n", NAMES[v]);
                rc = 1;
            }
        }
        rc |= run(e, NGRAM_PROMPT, n_gen, NULL, 0, 1, &ngram_plain);
        speed[V_NGRAM_PLAIN][r] = ngram_plain.tok_s;
        rc |= run(e, NGRAM_PROMPT, n_gen, NULL, 0, 0, &o);
        speed[V_NGRAM][r] = o.tok_s;
        acc[V_NGRAM] += o.usage.accepted_draft_tokens;
        drafted[V_NGRAM] += o.usage.drafted_tokens;
        if (o.n != ngram_plain.n || memcmp(o.toks, ngram_plain.toks, (size_t)o.n * sizeof *o.toks)) {
            fprintf(stderr, "bench_spec: n-gram drafting changed the output\n");
            rc = 1;
        }
    }
    if (!rc) {
        double med[N_VARIANTS];
        for (int v = 0; v < N_VARIANTS; v++)
            med[v] = median(speed[v], rounds);
        if (json)
            printf("{\"tokens\": %lld, \"rounds\": %d, \"draft_max\": %d, \"variants\": [", (long long)n_gen, rounds,
                   draft_max);
        else
            printf("%lld tokens, draft_max %d, median of %d rounds (decode tok/s after the first token)\n\n"
                   "%-22s %9s %8s %10s %9s\n", (long long)n_gen, draft_max, rounds, "variant", "tok/s", "ratio",
                   "accepted", "drafted");
        for (int v = 0; v < N_VARIANTS; v++) {
            const double base = v >= V_NGRAM_PLAIN ? med[V_NGRAM_PLAIN] : med[V_PLAIN];
            const double rate = drafted[v] ? (double)acc[v] / (double)drafted[v] : 0;
            if (json)
                printf("%s{\"name\": \"%s\", \"tok_s\": %.3f, \"ratio\": %.3f, \"acceptance\": %.3f, \"drafted\": %lld}",
                       v ? ", " : "", NAMES[v], med[v], med[v] / base, rate, (long long)drafted[v]);
            else
                printf("%-22s %9.2f %7.2fx %9.1f%% %9lld\n", NAMES[v], med[v], med[v] / base, 100 * rate,
                       (long long)drafted[v]);
        }
        if (json)
            printf("]}\n");
    }
    tern_engine_destroy(e);
    tern_model_free(m);
    return rc;
}
