/* testutil.c — shared helpers for the unit tests. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensor/quant_mlx.h"

#include "core/fileio.h"
#include "core/json_util.h"

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

const char *tu_testdata(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", env_or("TERN_TESTDATA", "tests/data"), rel);
    return buf;
}

/* The folders this process made, removed when it exits (a suite run repeatedly would otherwise keep every run's
 * models: the names carry the pid). TERN_KEEP_TMP=1 keeps them for a look after a failure. */
static char **made;
static size_t n_made;
static pid_t made_by; /* a forked child leaving by exit() must not remove its parent's folders */

static void remove_made(void) {
    for (size_t i = 0; i < n_made && getpid() == made_by; i++) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", made[i]);
        if (!getenv("TERN_KEEP_TMP") && system(cmd) != 0)
            fprintf(stderr, "testutil: could not remove %s\n", made[i]);
        free(made[i]);
    }
    free(made);
}

const char *tu_tmpdir(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s.%d", env_or("TERN_TMP", "/tmp/tern-test"), name, (int)getpid());
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", buf);
    if (system(cmd) != 0)
        fail_msg("cannot clear %s", buf);
    tern_err *e = tern_mkdir_p(buf);
    if (e)
        fail_msg("%s", tern_err_msg(e));
    for (size_t i = 0; i < n_made; i++)
        if (!strcmp(made[i], buf))
            return buf;
    char **grown = realloc(made, (n_made + 1) * sizeof *made);
    char *copy = strdup(buf);
    if (!grown || !copy)
        fail_msg("out of memory");
    if (!made) {
        made_by = getpid();
        atexit(remove_made);
    }
    made = grown;
    made[n_made++] = copy;
    return buf;
}

const tern_isa tu_isa_paths[4] = {TERN_ISA_PORTABLE, TERN_ISA_AVX2, TERN_ISA_AVX512, TERN_ISA_AMX};

/* The best path of this CPU, capped by TERN_ISA (portable|avx2|avx512) so that the suite can run as on a lesser
 * CPU. */
static tern_isa best_isa(void) {
    const char *cap = getenv("TERN_ISA");
    tern_isa best = tern_isa_detect();
    if (cap && !strcmp(cap, "portable"))
        best = TERN_ISA_PORTABLE;
    else if (cap && !strcmp(cap, "avx2") && best > TERN_ISA_AVX2)
        best = TERN_ISA_AVX2;
    else if (cap && !strcmp(cap, "avx512") && best > TERN_ISA_AVX512)
        best = TERN_ISA_AVX512;
    return best;
}

tern_isa tu_isa_begin(void **state) {
    const tern_isa isa = *(const tern_isa *)*state;
    if (best_isa() < isa) {
        print_message("no %s here: skipped\n", tern_isa_name(isa));
        skip();
    }
    tern_isa_set(isa);
    return isa;
}

int tu_isa_restore(void **state) {
    tern_isa_set(best_isa());
    return 0;
}

const char *tu_tern_bin(void) { return env_or("TERN_BIN", "build/tern"); }

const char *tu_write(const char *dir, const char *name, const void *data, size_t len) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    tern_err *e = tern_write_file(buf, data, len);
    if (e)
        fail_msg("%s", tern_err_msg(e));
    return buf;
}

int tu_run(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, p);
        if (r == 0)
            break;
        n += r;
    }
    buf[n] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tu_expect_error(tern_err *err, const char *needle, const char *file, int line) {
    if (!err) {
        print_error("%s:%d: expected an error containing \"%s\", got success\n", file, line, needle);
        fail();
    }
    if (!strstr(err->msg, needle)) {
        print_error("%s:%d: expected an error containing \"%s\", got \"%s\"\n", file, line, needle, err->msg);
        tern_err_free(err);
        fail();
    }
    tern_err_free(err);
}

int tu_runf(char **out, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return tu_run(cmd, out);
}

json_t *tu_run_json(const char *fmt, ...) {
    char cmd[8192], *out = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    const int rc = tu_run(cmd, &out);
    json_error_t e;
    json_t *j = rc == 0 && out ? json_loads(out, 0, &e) : NULL;
    if (!j)
        fail_msg("'%s' exited %d and printed '%s', not JSON", cmd, rc, out ? out : "");
    free(out);
    return j;
}

int tu_vocab_vectors(const char *name, void (*fn)(void *ctx, const char *text, size_t len, const int32_t *ids,
                                                  size_t n_ids),
                     void *ctx) {
    char rel[256], *inp, *out;
    size_t inp_len, out_len;
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.inp", name);
    tern_err *e = tern_read_file(tu_testdata(rel), 1 << 24, &inp, &inp_len);
    if (e)
        fail_msg("%s", tern_err_msg(e));
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf.out", name);
    e = tern_read_file(tu_testdata(rel), 1 << 24, &out, &out_len);
    if (e)
        fail_msg("%s", tern_err_msg(e));
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t pos = 0;
    char *line = out;
    int cases = 0;
    while (pos < inp_len) {
        const char *hit = memmem(inp + pos, inp_len - pos, sep, sizeof sep - 1);
        size_t end = hit ? (size_t)(hit - inp) : inp_len;
        assert_true(*line != 0); /* as many id lines as cases */
        char *eol = strchr(line, '\n');
        if (eol)
            *eol = 0;
        int32_t want[4096];
        size_t n_want = 0;
        for (char *p = line, *q; (q = NULL, strtol(p, &q, 10), q != p) && n_want < 4096; p = q)
            want[n_want++] = (int32_t)strtol(p, NULL, 10);
        fn(ctx, inp + pos, end - pos, want, n_want);
        cases++;
        line = eol ? eol + 1 : line + strlen(line);
        if (!hit)
            break;
        pos = end + sizeof sep - 1;
    }
    free(inp);
    free(out);
    return cases;
}

float tu_frand(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (float)((double)(*state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

void tu_mlx_weight(tern_weight *w, int64_t rows, int64_t in, int bits, int group, tern_dtype sdt, uint64_t seed,
                   void **data, void **scales, void **biases) {
    const int64_t words = tern_mlx_row_words(in, bits), ng = in / group;
    const size_t ss = tern_dtype_size(sdt);
    memset(w, 0, sizeof *w);
    w->fmt = TERN_WF_MLX_AFFINE;
    w->ndim = 2;
    w->shape[0] = rows;
    w->shape[1] = in;
    w->bits = bits;
    w->group = group;
    w->sdtype = sdt;
    *data = malloc((size_t)(rows * words) * 4);
    *scales = malloc((size_t)(rows * ng) * ss);
    *biases = malloc((size_t)(rows * ng) * ss);
    float *x = malloc((size_t)in * sizeof *x);
    uint64_t r = seed | 1;
    for (int64_t row = 0; row < rows; row++) {
        for (int64_t k = 0; k < in; k++)
            x[k] = tu_frand(&r) * (1.0f + (float)(k % 7));
        tern_mlx_quantize_row(x, in, bits, group, sdt, (uint32_t *)*data + row * words, (char *)*scales + (size_t)(row * ng) * ss,
                              (char *)*biases + (size_t)(row * ng) * ss);
    }
    free(x);
    w->data = *data;
    w->scales = *scales;
    w->biases = *biases;
}

tern_err *tu_tiny_model(const char *name, tern_synth_dtype dt, uint64_t seed, const char *quantization, char *dir) {
    static const char *cfg_text =
        "{\"text_config\": {\"vocab_size\": 512, \"hidden_size\": 64, \"intermediate_size\": 128,"
        " \"num_hidden_layers\": 6, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16,"
        " \"global_head_dim\": 32, \"hidden_size_per_layer_input\": 16, \"num_kv_shared_layers\": 2,"
        " \"use_double_wide_mlp\": true, \"sliding_window\": 8,"
        " \"layer_types\": [\"sliding_attention\", \"sliding_attention\", \"full_attention\","
        "                   \"sliding_attention\", \"sliding_attention\", \"full_attention\"]}}";
    json_t *cfg, *q;
    TERN_TRY(tern_json_load_buf(cfg_text, strlen(cfg_text), "test config", &cfg));
    if (quantization) {
        tern_err *e = tern_json_load_buf(quantization, strlen(quantization), "test quantization", &q);
        if (e) {
            json_decref(cfg);
            return e;
        }
        json_object_set_new(cfg, "quantization", q);
    }
    snprintf(dir, 4096, "%s", tu_tmpdir(name));
    tern_synth_opts o = {.dtype = dt, .group = 32, .seed = seed, .vocab_gguf = TERN_ASSETS_DIR "/gemma4/vocab.gguf"};
    tern_err *e = tern_synth_write(cfg, &o, dir);
    json_decref(cfg);
    return e;
}

void tu_expect_ids(const tern_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                   const tern_token *want, size_t n_want) {
    tern_tokens got = {0};
    TU_OK(tern_tokenize(t, text, len, add_special, parse_special, &got));
    if (got.n != n_want || (n_want && memcmp(got.ids, want, n_want * sizeof *want))) {
        print_error("text [%.*s]: expected %zu ids, got %zu:", (int)len, text, n_want, got.n);
        for (size_t i = 0; i < got.n; i++)
            print_error(" %d", got.ids[i]);
        print_error("\n");
        tern_tokens_free(&got);
        fail();
    }
    tern_tokens_free(&got);
}
