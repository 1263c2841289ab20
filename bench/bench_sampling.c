/* bench_sampling.c — time to pick one token from a vocabulary, per sampling setting.
 *
 * usage: bench_sampling [--vocab 262144] [--iters 50] [--sigma S]
 * Logits are normal with standard deviation S (default: 1, 3 and 6 in turn; random-weight checkpoints give
 * flat ones, trained models peaked ones). Settings: greedy; temperature 1 with nothing cut (the OpenAI and
 * Anthropic defaults); temperature 0.8 with top-p 0.95; top-k 40; llama.cpp's server defaults (top-k 40,
 * top-p 0.95, min-p 0.05, temperature 0.8); and the log-probabilities of a token with its 5 best alternatives
 * (the APIs' logprobs). Prints the median milliseconds per call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timeutil.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int64_t vocab = 262144;
    int iters = 50;
    double sigmas[3] = {1, 3, 6};
    int n_sigma = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            vocab = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sigma") && i + 1 < argc)
            sigmas[0] = atof(argv[++i]), n_sigma = 1;
        else {
            fprintf(stderr, "usage: bench_sampling [--vocab 262144] [--iters 50] [--sigma S]\n");
            return 2;
        }
    }
    if (vocab < 2 || vocab > (1 << 24) || iters < 1 || iters > 100000) {
        fprintf(stderr, "bench_sampling: --vocab must be in [2, 16777216] and --iters in [1, 100000]\n");
        return 2;
    }
    float *logits = malloc((size_t)vocab * sizeof *logits), *work = malloc((size_t)vocab * sizeof *work);
    int32_t *idx = malloc((size_t)vocab * sizeof *idx);
    double *t = malloc((size_t)iters * sizeof *t);
    if (!logits || !work || !idx || !t) {
        fprintf(stderr, "bench_sampling: out of memory\n");
        return 1;
    }
    const struct {
        const char *name;
        tern_sampling s;
    } settings[] = {
        {"greedy", {0.0f, 0, 1.0f, 0.0f}},
        {"temperature 1 (API default)", {1.0f, 0, 1.0f, 0.0f}},
        {"temperature 0.8, top-p 0.95", {0.8f, 0, 0.95f, 0.0f}},
        {"top-k 40", {1.0f, 40, 1.0f, 0.0f}},
        {"llama.cpp defaults", {0.8f, 40, 0.95f, 0.05f}},
    };
    tern_rng rng;
    tern_rng_seed(&rng, 1);
    printf("vocabulary %lld, median of %d draws\n", (long long)vocab, iters);
    for (int si = 0; si < n_sigma; si++) {
        for (int64_t i = 0; i < vocab; i++) { /* Box-Muller */
            const double u1 = tern_rng_uniform(&rng) + 1e-300, u2 = tern_rng_uniform(&rng);
            logits[i] = (float)(sigmas[si] * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
        }
        for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
            int64_t picked = 0;
            for (int it = 0; it < iters; it++) {
                const double t0 = tern_now_s();
                picked += tern_sample(logits, vocab, &settings[k].s, &rng, work, idx);
                t[it] = tern_now_s() - t0;
            }
            qsort(t, (size_t)iters, sizeof *t, cmp_double);
            printf("  sigma %-4g %-30s %8.3f ms  (mean id %lld)\n", sigmas[si], settings[k].name, t[iters / 2] * 1e3,
                   (long long)(picked / iters));
        }
        double lp_sum = 0;
        for (int it = 0; it < iters; it++) {
            tern_logprobs lp;
            const double t0 = tern_now_s();
            tern_logprobs_compute(logits, vocab, it, 5, &lp);
            t[it] = tern_now_s() - t0;
            lp_sum += lp.chosen;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        printf("  sigma %-4g %-30s %8.3f ms  (mean %.3f)\n", sigmas[si], "logprobs, top 5", t[iters / 2] * 1e3,
               lp_sum / iters);
    }
    free(logits);
    free(work);
    free(idx);
    free(t);
    return 0;
}
