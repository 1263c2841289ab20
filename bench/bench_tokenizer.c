/* bench_tokenizer.c — times tokenizer load, tokenization of 1 MB of text, and detokenization.
 *
 * usage: bench_tokenizer TOKENIZER [--text FILE] [--iters N] [--one-line]
 *   TOKENIZER: a model directory (tokenizer.json), a tokenizer.json file or a GGUF vocab, e.g.
 *              assets/gemma4/vocab.gguf
 *   --text:    tokenize this file instead of the built-in text
 *   --one-line: replace newlines by spaces (one 1 MB pre-token for SentencePiece-style tokenizers: the
 *              worst case for the merge loop)
 * The built-in text is 1 MiB generated in memory: English-like words, numbers, punctuation, code-like
 * lines, accented Latin, Cyrillic, CJK and emoji, with newlines every few dozen words. Prints min and
 * median milliseconds over N runs, tokens, and MB/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/timeutil.h"
#include "tokenizer/tokenizer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* 1 MiB of mixed text, deterministic. */
static char *make_text(size_t *len) {
    static const char *const words[] = {
        "the", "of", "and", "to", "in", "is", "that", "model", "tokenizer", "inference", "memory", "bandwidth",
        "attention", "layer", "function", "return", "value", "server", "request", "Hello", "World", "Gemma",
        "quantized", "matrix", "vector", "über", "café", "naïve", "Привет", "мир", "日本語", "中文", "测试",
        "😀", "🚀", "x=1;", "if(a<b){", "}", "printf(\"%d\\n\",", "i++)", "3.14159", "2024", "42", "1,000,000",
        "don't", "it's", "we're", "(parenthesis)", "[bracket]", "--", "...", "?!", "e-mail", "https://example.com",
    };
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap + 64);
    if (!t)
        return NULL;
    int since_nl = 0;
    while (n < cap) {
        const char *w = words[next_rand() % (sizeof words / sizeof words[0])];
        size_t wl = strlen(w);
        if (n + wl + 2 > cap)
            break;
        memcpy(t + n, w, wl);
        n += wl;
        uint32_t r = next_rand() % 100;
        if (++since_nl > 12 && r < 8) {
            t[n++] = '\n';
            if (r < 2)
                t[n++] = '\n';
            since_nl = 0;
        } else {
            t[n++] = r < 3 ? '\t' : ' ';
        }
    }
    while (n < cap)
        t[n++] = ' ';
    *len = n;
    return t;
}

int main(int argc, char **argv) {
    const char *path = NULL, *text_path = NULL;
    int iters = 5, one_line = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--text") && i + 1 < argc)
            text_path = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--one-line"))
            one_line = 1;
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_tokenizer TOKENIZER [--text FILE] [--iters N] [--one-line]\n");
            return 2;
        }
    }
    if (!path || iters < 1) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER [--text FILE] [--iters N] [--one-line]\n");
        return 2;
    }
    char *text;
    size_t len;
    tern_err *e = NULL;
    if (text_path)
        e = tern_read_file(text_path, (size_t)1 << 30, &text, &len);
    else if (!(text = make_text(&len)))
        e = tern_errf(TERN_ENOMEM, "out of memory");
    if (e) {
        fprintf(stderr, "bench_tokenizer: %s\n", tern_err_msg(e));
        return 1;
    }
    if (one_line)
        for (size_t i = 0; i < len; i++)
            if (text[i] == '\n')
                text[i] = ' ';

    double t0 = tern_now_s();
    tern_tokenizer *tok;
    if ((e = tern_tokenizer_load(path, &tok))) {
        fprintf(stderr, "bench_tokenizer: %s\n", tern_err_msg(e));
        return 1;
    }
    double load_ms = (tern_now_s() - t0) * 1e3;

    double *enc = malloc(sizeof(double) * (size_t)iters), *dec = malloc(sizeof(double) * (size_t)iters);
    size_t n_tokens = 0, dec_len = 0;
    for (int it = 0; it < iters; it++) {
        tern_tokens ids = {0};
        t0 = tern_now_s();
        e = tern_tokenize(tok, text, len, 0, 0, &ids);
        enc[it] = (tern_now_s() - t0) * 1e3;
        if (e) {
            fprintf(stderr, "bench_tokenizer: %s\n", tern_err_msg(e));
            return 1;
        }
        n_tokens = ids.n;
        char *out;
        t0 = tern_now_s();
        e = tern_detokenize(tok, ids.ids, ids.n, 1, &out, &dec_len);
        dec[it] = (tern_now_s() - t0) * 1e3;
        if (e) {
            fprintf(stderr, "bench_tokenizer: %s\n", tern_err_msg(e));
            return 1;
        }
        free(out);
        tern_tokens_free(&ids);
    }
    qsort(enc, (size_t)iters, sizeof *enc, cmp_double);
    qsort(dec, (size_t)iters, sizeof *dec, cmp_double);
    printf("tokenizer: %s\n", tern_tokenizer_describe(tok));
    printf("load:       %8.1f ms\n", load_ms);
    printf("text:       %zu bytes%s%s -> %zu tokens (%.2f bytes/token)\n", len, text_path ? " from " : " built-in",
           text_path ? text_path : (one_line ? ", one line" : ""), n_tokens, n_tokens ? (double)len / n_tokens : 0.0);
    printf("tokenize:   min %8.1f ms  median %8.1f ms  (%.1f MB/s at min)\n", enc[0], enc[iters / 2],
           (double)len / 1e6 / (enc[0] / 1e3));
    printf("detokenize: min %8.1f ms  median %8.1f ms  (%zu bytes out)\n", dec[0], dec[iters / 2], dec_len);
    free(enc);
    free(dec);
    free(text);
    tern_tokenizer_free(tok);
    return 0;
}
