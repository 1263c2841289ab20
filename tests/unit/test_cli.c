/* test_cli.c — the command line as a user meets it: help and version everywhere, llama.cpp's short options,
 * "did you mean" for typos, the model and the prompt as positionals, an interactive chat driven through a pipe,
 * a port in use reported before any model is loaded, and a GGUF folder named for what it is. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fileio.h"
#include "tensor/cpu.h"
#include "testutil.h"
#include "tern/tern.h"

#define MODEL "oracle/tiny-v4096-f32"

static const char *const VERBS[] = {"serve",      "run",      "info",  "fit",      "bench",          "logits",
                                    "perplexity", "tokenize", "detokenize", "template", "synth", "quantize",
                                    "audio-features", "spec-trace"};

static void test_help_everywhere(void **state) {
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' --help", tu_tern_bin()), 0);
    for (size_t i = 0; i < sizeof VERBS / sizeof VERBS[0]; i++)
        assert_non_null(strstr(out, VERBS[i]));
    free(out);
    for (size_t i = 0; i < sizeof VERBS / sizeof VERBS[0]; i++)
        for (int f = 0; f < 3; f++) {
            static const char *const forms[] = {"--help", "-h", "help"};
            char want[64];
            snprintf(want, sizeof want, "usage: tern %s", VERBS[i]);
            int rc = f == 2 ? tu_runf(&out, "'%s' help %s 2>&1", tu_tern_bin(), VERBS[i])
                            : tu_runf(&out, "'%s' %s %s 2>&1", tu_tern_bin(), VERBS[i], forms[f]);
            if (rc != 0 || strncmp(out, want, strlen(want)))
                fail_msg("tern %s %s: exit %d, output: %.200s", f == 2 ? "help" : VERBS[i], f == 2 ? VERBS[i] : forms[f],
                         rc, out);
            free(out);
        }
    /* `tern serve -h` is help, not a model folder called "-h". */
    assert_int_equal(tu_runf(&out, "'%s' serve -h 2>&1", tu_tern_bin()), 0);
    assert_null(strstr(out, "config.json"));
    free(out);
}

static void test_version(void **state) {
    char *out, want[64];
    snprintf(want, sizeof want, "tern %s ", TERN_VERSION);
    assert_int_equal(tu_runf(&out, "'%s' --version", tu_tern_bin()), 0);
    assert_true(!strncmp(out, want, strlen(want)));
    free(out);
    assert_string_equal(tern_version(), TERN_VERSION);
}

static void test_typos_name_the_closest(void **state) {
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' run '%s' --tmp 0.5 2>&1", tu_tern_bin(), tu_testdata(MODEL)), 2);
    assert_non_null(strstr(out, "unknown option --tmp; did you mean --temp?"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' serve x --parralel 2 2>&1", tu_tern_bin()), 2);
    assert_non_null(strstr(out, "did you mean --parallel?"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' sreve 2>&1", tu_tern_bin()), 2);
    assert_non_null(strstr(out, "unknown verb 'sreve'; did you mean 'serve'?"));
    free(out);
    /* Nothing close: no guess. */
    assert_int_equal(tu_runf(&out, "'%s' info --zzzzzzzz 2>&1", tu_tern_bin()), 2);
    assert_non_null(strstr(out, "unknown option --zzzzzzzz"));
    assert_null(strstr(out, "did you mean"));
    free(out);
}

/* The same generation spelled the llama.cpp way and the long way, with the model and prompt as positionals or
 * options, gives the same tokens. */
static void test_short_options_and_positionals(void **state) {
    char model[4096];
    snprintf(model, sizeof model, "%s", tu_testdata(MODEL));
    const char *bin = tu_tern_bin();
    char *a, *b, *c, *d;
    assert_int_equal(tu_runf(&a, "'%s' run -m '%s' -p 'Tell me a story' -n 6 -t 1 -c 256 --temp 0 --print-ids", bin,
                             model), 0);
    assert_int_equal(tu_runf(&b, "'%s' run '%s' 'Tell me a story' --n-predict 6 --threads 1 --ctx-size 256 --print-ids",
                             bin, model), 0);
    assert_int_equal(tu_runf(&c, "'%s' run --model '%s' --prompt 'Tell me a story' -n 6 --print-ids", bin, model), 0);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    int n = 0;
    for (char *p = strtok(a, " \n"); p; p = strtok(NULL, " \n"))
        n++;
    assert_int_equal(n, 6);
    free(a);
    free(b);
    free(c);
    /* Seeded sampling is reproducible through --temp/--top-k/--top-p/--seed (and -s). */
    assert_int_equal(tu_runf(&a, "'%s' run '%s' Hi -n 8 --temp 1.5 --top-k 40 --top-p 0.95 --seed 11 --print-ids", bin,
                             model), 0);
    assert_int_equal(tu_runf(&b, "'%s' run '%s' Hi -n 8 --temp 1.5 --top-k 40 --top-p 0.95 -s 11 --print-ids", bin,
                             model), 0);
    assert_string_equal(a, b);
    free(a);
    free(b);
    /* The model twice, or two prompts, is an error that says so. */
    assert_int_equal(tu_runf(&d, "'%s' run -m '%s' '%s' Hi 2>&1", bin, model, model), 2);
    assert_non_null(strstr(d, "one argument too many"));
    free(d);
    assert_int_equal(tu_runf(&d, "'%s' run '%s' Hi --prompt Hello 2>&1", bin, model), 2);
    assert_non_null(strstr(d, "the prompt is given twice"));
    free(d);
    /* -m works for the other model verbs too. */
    assert_int_equal(tu_runf(&d, "'%s' info -m '%s'", bin, model), 0);
    assert_non_null(strstr(d, "complete"));
    free(d);
}

/* Reads "prompt N tokens" from each stats line of the chat's stderr into n[], returns how many. */
static int prompt_sizes(const char *text, long *n, int max) {
    int k = 0;
    for (const char *p = text; (p = strstr(p, "prompt ")) && k < max; p++)
        if (p == text || p[-1] == '\n')
            n[k++] = strtol(p + 7, NULL, 10);
    return k;
}

/* `tern run MODEL` with no prompt chats: each line is a turn, the history is the next prompt, /clear forgets it,
 * /exit ends; replies go to stdout, statistics to stderr on their own lines. */
static void test_interactive_chat(void **state) {
    const char *dir = tu_tmpdir("cli-chat");
    char err_path[4096], in_path[4096];
    static const char script[] = "Hello\nHow are you?\n/clear\nHello\n/exit\nNever read\n";
    snprintf(in_path, sizeof in_path, "%s", tu_write(dir, "in.txt", script, sizeof script - 1));
    snprintf(err_path, sizeof err_path, "%s/err.txt", dir);
    char *out, *err;
    assert_int_equal(tu_runf(&out, "'%s' run '%s' -n 5 --stats < '%s' 2> '%s'", tu_tern_bin(), tu_testdata(MODEL),
                             in_path, err_path), 0);
    assert_int_equal(tu_runf(&err, "cat '%s'", err_path), 0);
    long n[8];
    int k = prompt_sizes(err, n, 8);
    if (k != 3)
        fail_msg("want 3 replies' statistics, got %d; stderr:\n%s", k, err);
    assert_true(n[1] > n[0] + 5); /* the second turn's prompt holds the first turn and its reply */
    assert_int_equal(n[2], n[0]); /* after /clear, the same message is the same prompt again */
    assert_non_null(strstr(err, "(new conversation)"));
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    assert_true(lines >= 3); /* one line at least per reply */
    free(out);
    free(err);
    /* End of input ends the chat cleanly too. */
    assert_int_equal(tu_runf(&out, "printf 'Hi\\n' | '%s' run '%s' -n 2 2>/dev/null", tu_tern_bin(), tu_testdata(MODEL)), 0);
    free(out);
}

/* A taken port is reported at once, before the model loads: the model path here does not even exist. */
static void test_serve_port_in_use(void **state) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 1), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char *out;
    int rc = tu_runf(&out, "'%s' serve /no/such/model --port %d 2>&1", tu_tern_bin(), ntohs(a.sin_port));
    close(fd);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "Address already in use"));
    assert_null(strstr(out, "/no/such/model"));
    free(out);
}

/* Model paths say what they hold and what tern expects; a GGUF file, or a folder holding one (beside a
 * multimodal projector), runs. */
static void test_model_path_messages(void **state) {
    const char *dir = tu_tmpdir("cli-gguf");
    char gdir[4096];
    snprintf(gdir, sizeof gdir, "%s", dir);
    tu_write(gdir, "gemma-4-e2b-Q4_0.gguf", "GGUF", 4);
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' run '%s' Hi 2>&1", tu_tern_bin(), gdir), 1);
    assert_non_null(strstr(out, "gemma-4-e2b-Q4_0.gguf: truncated header"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' serve '%s/gemma-4-e2b-Q4_0.gguf' --port 0 2>&1", tu_tern_bin(), gdir), 1);
    assert_non_null(strstr(out, "truncated header"));
    free(out);
    tu_write(gdir, "gemma-4-e2b-Q8_0.gguf", "GGUF", 4);
    assert_int_equal(tu_runf(&out, "'%s' info '%s' 2>&1", tu_tern_bin(), gdir), 1);
    assert_non_null(strstr(out, "holds several GGUF files"));
    free(out);
    /* Block-quantized files load; a block format the kernels lack is named, not misread: the Q4_0 file with one
     * tensor's type rewritten as IQ4_NL (the same 18 bytes per 32 values). */
    assert_int_equal(tu_runf(&out, "'%s' info '%s' 2>&1", tu_tern_bin(), tu_testdata("gguf/tiny-v4096-q4_0.gguf")), 0);
    assert_non_null(strstr(out, "GGUF"));
    free(out);
    char *bytes;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("gguf/tiny-v4096-q4_0.gguf"), 1 << 24, &bytes, &len));
    static const char tname[] = "blk.0.attn_q.weight";
    char *at = memmem(bytes, len, tname, sizeof tname - 1);
    assert_non_null(at);
    uint32_t dims, type;
    memcpy(&dims, at + sizeof tname - 1, 4);
    char *type_at = at + sizeof tname - 1 + 4 + 8 * dims;
    memcpy(&type, type_at, 4);
    assert_int_equal(type, 2); /* Q4_0 */
    type = 20;                 /* IQ4_NL */
    memcpy(type_at, &type, 4);
    tu_write(gdir, "iq4.gguf", bytes, len);
    free(bytes);
    assert_int_equal(tu_runf(&out, "'%s' info '%s/iq4.gguf' 2>&1", tu_tern_bin(), gdir), 1);
    assert_non_null(strstr(out, "tensor blk.0.attn_q.weight is iq4_nl; this build reads f32, f16, bf16, q4_0"));
    free(out);
    /* The float file runs in a folder beside its audio projector, which is loaded with it; a broken projector there
     * is named, not skipped. */
    snprintf(gdir, sizeof gdir, "%s", tu_tmpdir("cli-gguf-run"));
    char *cp, model_file[1024];
    snprintf(model_file, sizeof model_file, "%s", tu_testdata("gguf/tiny-v4096-f32.gguf"));
    assert_int_equal(tu_runf(&cp, "cp '%s' '%s' '%s/'", model_file, tu_testdata("gguf/mmproj-audio-tiny-f32.gguf"),
                             gdir), 0);
    free(cp);
    assert_int_equal(tu_runf(&out, "'%s' run '%s' --prompt Hi -n 3 2>&1", tu_tern_bin(), gdir), 0);
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' fit '%s' 2>&1", tu_tern_bin(), gdir), 0);
    assert_non_null(strstr(out, "audio:        ")); /* the tower's work area is planned for */
    free(out);
    assert_int_equal(tu_runf(&cp, "printf GGUF > '%s/mmproj-audio-tiny-f32.gguf'", gdir), 0);
    free(cp);
    assert_int_equal(tu_runf(&out, "'%s' run '%s' --prompt Hi -n 3 2>&1", tu_tern_bin(), gdir), 1);
    assert_non_null(strstr(out, "mmproj-audio-tiny-f32.gguf"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' logits '%s' --ids 2,1449 2>&1", tu_tern_bin(),
                             tu_testdata("gguf/tiny-v4096-f32.gguf")),
                     0);
    assert_non_null(strstr(out, "argmax: 1305 1641"));
    free(out);
    /* A Q4_0 file keeps a copy packed for prompt tokens beside its blocks where the int8 kernels run: fit counts it. */
    assert_int_equal(tu_runf(&out, "'%s' fit '%s' 2>&1", tu_tern_bin(), tu_testdata("gguf/tiny-v4096-q4_0.gguf")), 0);
    assert_true((strstr(out, "repacked for the int8 kernels") != NULL) == (tern_isa_active() != TERN_ISA_PORTABLE));
    free(out);
    /* A mixture-of-experts file: a generated token reads the dense part and its top-k of the experts. */
    assert_int_equal(tu_runf(&out, "'%s' fit '%s' 2>&1", tu_tern_bin(), tu_testdata("gguf/tiny-moe-q8_0.gguf")), 0);
    assert_non_null(strstr(out, "of weights read by each generated token (the dense part and 2 of 4 experts a layer)"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' info '%s' 2>&1", tu_tern_bin(), tu_testdata("gguf/tiny-moe-q8_0.gguf")), 0);
    assert_non_null(strstr(out, "moe:          4 experts, top 2, expert width 256"));
    assert_non_null(strstr(out, "attention_k_eq_v"));
    assert_non_null(strstr(out, "(the dense part and 2 of 4 experts a layer)"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' info '%s/nothing-here' 2>&1", tu_tern_bin(), gdir), 1);
    assert_non_null(strstr(out, "No such file or directory"));
    free(out);
}

/* tern bench --startup starts real servers: every figure present, and the bytes read are the model's files (a
 * folder's, or a GGUF file). */
static void test_bench_startup(void **state) {
    char model[2048];
    snprintf(model, sizeof model, "%s", tu_testdata(MODEL));
    json_t *v = tu_run_json("'%s' bench '%s' --startup --rounds 1 --json 2>/dev/null", tu_tern_bin(), model);
    assert_true(json_real_value(json_object_get(v, "cold_start_s")) > 0);
    assert_true(json_real_value(json_object_get(v, "warm_start_s")) > 0);
    assert_true(json_real_value(json_object_get(v, "read_once_s")) > 0);
    assert_true(json_real_value(json_object_get(v, "first_start_s")) > 0);
    assert_true(json_is_integer(json_object_get(v, "cache_bytes")));
    char *du;
    assert_int_equal(tu_runf(&du, "cat '%s'/* | wc -c", model), 0);
    assert_int_equal(json_integer_value(json_object_get(v, "files_bytes")), strtoll(du, NULL, 10));
    free(du);
    json_decref(v);
    /* A GGUF model is one file. */
    v = tu_run_json("'%s' bench '%s' --startup --rounds 1 --json 2>/dev/null", tu_tern_bin(),
                    tu_testdata("gguf/tiny-v4096-f32.gguf"));
    assert_true(json_real_value(json_object_get(v, "warm_start_s")) > 0);
    assert_int_equal(json_integer_value(json_object_get(v, "files_bytes")), 13242112);
    json_decref(v);
}

/* tern bench with drafting: the model drafting for itself keeps every draft; the Gemma 4 assistant of the same
 * oracle pair runs too; the replies are checked equal by the verb itself (exit 0). */
static void test_bench_drafting(void **state) {
    (void)state;
    char model[2048], drafter[2048], *out;
    snprintf(model, sizeof model, "%s", tu_testdata(MODEL));
    snprintf(drafter, sizeof drafter, "%s", tu_testdata("oracle/tiny-v4096-assistant-f32"));
    const char *prompts = tu_write(tu_tmpdir("bench-draft"), "prompts.txt", "hello\nthe king\n", 16);
    const char *drafters[2] = {model, drafter};
    for (int i = 0; i < 2; i++) {
        json_t *v = tu_run_json("'%s' bench '%s' --draft-model '%s' --prompts '%s' -n 12 --json 2>/dev/null",
                                tu_tern_bin(), model, drafters[i], prompts);
        assert_int_equal(json_integer_value(json_object_get(v, "prompts")), 2);
        assert_true(json_integer_value(json_object_get(v, "drafted")) > 0);
        if (i == 0)
            assert_true(json_real_value(json_object_get(v, "acceptance")) == 1.0);
        json_decref(v);
    }
    assert_int_equal(tu_runf(&out, "'%s' bench '%s' --draft-ngram 2>&1", tu_tern_bin(), model), 2);
    assert_non_null(strstr(out, "--prompts"));
    free(out);
}

/* tern quantize packs what it wrote for the int8 kernels into the cache: the first run of the result reads it back
 * instead of packing. (Nothing to pack on the portable path: then the quantize says nothing of it.) */
static void test_quantize_prepacks(void **state) {
    (void)state;
    char model[2048], *out;
    snprintf(model, sizeof model, "%s", tu_testdata(MODEL));
    const char *dir = tu_tmpdir("quantize-pack");
    assert_int_equal(tu_runf(&out, "TERN_CACHE_DIR='%s/cache' '%s' quantize '%s' '%s/q8' --bits 8 2>&1", dir,
                             tu_tern_bin(), model, dir), 0);
    const int packed = strstr(out, "packed it for the int8 kernels") != NULL;
    free(out);
    if (!packed) {
        assert_int_equal(tern_isa_active(), TERN_ISA_PORTABLE);
        skip();
    }
    assert_int_equal(tu_runf(&out, "TERN_CACHE_DIR='%s/cache' '%s' run '%s/q8' --ids 2,3 -n 1 2>&1", dir,
                             tu_tern_bin(), dir), 0);
    if (!strstr(out, "packed weights mapped from the cache"))
        fail_msg("the first run packed again: %s", out);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_everywhere),    cmocka_unit_test(test_version),
        cmocka_unit_test(test_typos_name_the_closest), cmocka_unit_test(test_short_options_and_positionals),
        cmocka_unit_test(test_interactive_chat),   cmocka_unit_test(test_serve_port_in_use),
        cmocka_unit_test(test_model_path_messages), cmocka_unit_test(test_bench_startup),
        cmocka_unit_test(test_bench_drafting),      cmocka_unit_test(test_quantize_prepacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
