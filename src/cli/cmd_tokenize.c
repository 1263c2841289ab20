/* cmd_tokenize.c — `tern tokenize` and `tern detokenize`: the tokenizer from the command line.
 * tokenize reads stdin byte for byte (nothing stripped: a trailing newline is part of the text) and prints
 * the ids separated by spaces; detokenize prints the text of --ids exactly, with no newline added, so the
 * two round-trip. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/ids.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

static const char *tokenize_usage =
    "usage: tern tokenize ([-m] MODEL_DIR | --vocab FILE [--pre NAME]) [--add-special] [--parse-special] [--pieces]\n"
    "                     < text\n"
    "  MODEL_DIR        a directory with tokenizer.json (and tokenizer_config.json)\n"
    "  --vocab FILE     a tokenizer.json or a GGUF file with tokenizer.ggml.* metadata\n"
    "  --pre NAME       a GGUF vocabulary with another pre-tokenizer (a tokenizer.ggml.pre name llama.cpp knows)\n"
    "  --add-special    add the BOS/EOS tokens the tokenizer's configuration asks for\n"
    "  --parse-special  text spelling a special token (\"<bos>\", \"<|turn>\") becomes that token\n"
    "  --pieces         print what the normalizers and pre-tokenizers make of the text (a JSON array of\n"
    "                   strings) instead of the ids\n"
    "Reads stdin as raw bytes and prints the ids separated by spaces.\n";

static const char *detokenize_usage =
    "usage: tern detokenize ([-m] MODEL_DIR | --vocab FILE) --ids 1,2,3 [--skip-special]\n"
    "  --skip-special   drop special tokens instead of printing their text\n"
    "Prints the decoded text exactly (no newline is added).\n";

/* Loads the tokenizer named by the positional MODEL_DIR or --vocab (with --pre, a GGUF vocabulary under another
 * pre-tokenizer); prints the error and returns NULL. */
static tern_tokenizer *load(const char *verb, const char *dir, const char *vocab, const char *pre) {
    tern_tokenizer *t;
    tern_err *e = pre ? tern_tokenizer_load_gguf_pre(vocab ? vocab : dir, pre, &t) : tern_tokenizer_load(vocab ? vocab : dir, &t);
    if (e) {
        fprintf(stderr, "tern %s: %s\n", verb, tern_err_msg(e));
        tern_err_free(e);
        return NULL;
    }
    return t;
}

/* Reads all of stdin; NULL on failure (message printed). */
static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 32)) {
                fprintf(stderr, "tern tokenize: input larger than 4 GiB\n");
                free(buf);
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) {
            if (ferror(stdin)) {
                fprintf(stderr, "tern tokenize: cannot read stdin\n");
                free(buf);
                return NULL;
            }
            *len = n;
            return buf;
        }
    }
    free(buf);
    fprintf(stderr, "tern tokenize: out of memory reading stdin\n");
    return NULL;
}

/* A piece as a JSON string: valid UTF-8 as it is, any other byte as the character of the same number (so the
 * output stays JSON and still shows every byte). */
static void add_piece(void *ctx, const char *s, size_t n) {
    json_t *str = json_stringn(s, n);
    if (!str) {
        char *latin = malloc(n * 2 + 1);
        size_t k = 0;
        for (size_t i = 0; latin && i < n; i++)
            k += tern_utf8_put((unsigned char)s[i], latin + k);
        str = latin ? json_stringn(latin, k) : NULL;
        free(latin);
    }
    json_array_append_new(ctx, str ? str : json_null());
}

int cmd_tokenize(int argc, char **argv) {
    tern_opt opts[] = {{"vocab", 1, 0}, {"add-special", 0, 0}, {"parse-special", 0, 0}, {"model", 1, 0}, {"pre", 1, 0},
                       {"pieces", 0, 0},  {"help", 0, 0},        {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("tokenize", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(tokenize_usage, stdout);
        return 0;
    }
    const char *vocab = tern_args_get(opts, "vocab");
    if ((np == 1) == (vocab != NULL)) {
        fputs(tokenize_usage, stderr);
        return 2;
    }
    tern_tokenizer *t = load("tokenize", np ? pos[0] : NULL, vocab, tern_args_get(opts, "pre"));
    if (!t)
        return 1;
    size_t len;
    char *text = read_stdin(&len);
    if (!text) {
        tern_tokenizer_free(t);
        return 1;
    }
    if (tern_args_get(opts, "pieces")) {
        json_t *list = json_array();
        tern_err *e = tern_pretokenize(t, text, len, add_piece, list);
        char *out = e ? NULL : json_dumps(list, 0);
        if (out)
            puts(out);
        else
            fprintf(stderr, "tern tokenize: %s\n", e ? tern_err_msg(e) : "out of memory");
        free(out);
        tern_err_free(e);
        json_decref(list);
        free(text);
        tern_tokenizer_free(t);
        return out ? 0 : 1;
    }
    tern_tokens ids = {0};
    tern_err *e = tern_tokenize(t, text, len, tern_args_get(opts, "add-special") != NULL,
                                tern_args_get(opts, "parse-special") != NULL, &ids);
    int rc = 0;
    if (e) {
        fprintf(stderr, "tern tokenize: %s\n", tern_err_msg(e));
        tern_err_free(e);
        rc = 1;
    } else {
        for (size_t i = 0; i < ids.n; i++)
            printf(i ? " %d" : "%d", (int)ids.ids[i]);
        putchar('\n');
        if (fflush(stdout) != 0)
            rc = 1;
    }
    tern_tokens_free(&ids);
    free(text);
    tern_tokenizer_free(t);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    tern_opt opts[] = {{"vocab", 1, 0}, {"ids", 1, 0}, {"skip-special", 0, 0}, {"model", 1, 0}, {"help", 0, 0}, {0, 0, 0}};
    const char *pos[1];
    int np = tern_args_parse("detokenize", argc, argv, opts, pos, 1);
    if (np < 0)
        return 2;
    if (tern_args_get(opts, "help")) {
        fputs(detokenize_usage, stdout);
        return 0;
    }
    const char *vocab = tern_args_get(opts, "vocab"), *ids_s = tern_args_get(opts, "ids");
    if ((np == 1) == (vocab != NULL) || !ids_s) {
        fputs(detokenize_usage, stderr);
        return 2;
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    if (ids_s[strspn(ids_s, " ,")] != 0) { /* an empty list decodes to nothing */
        tern_err *e = tern_parse_ids(ids_s, &ids, &n);
        if (e) {
            fprintf(stderr, "tern detokenize: --ids: %s\n", tern_err_msg(e));
            tern_err_free(e);
            return 2;
        }
    }
    tern_tokenizer *t = load("detokenize", np ? pos[0] : NULL, vocab, NULL);
    if (!t) {
        free(ids);
        return 1;
    }
    char *text = NULL;
    size_t len = 0;
    tern_err *e = tern_detokenize(t, ids, (size_t)n, tern_args_get(opts, "skip-special") == NULL, &text, &len);
    int rc = 0;
    if (e) {
        fprintf(stderr, "tern detokenize: %s\n", tern_err_msg(e));
        tern_err_free(e);
        rc = 1;
    } else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
        rc = 1;
    }
    free(text);
    free(ids);
    tern_tokenizer_free(t);
    return rc;
}
