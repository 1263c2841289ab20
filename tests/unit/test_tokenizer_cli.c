/* test_tokenizer_cli.c — `tern tokenize` / `tern detokenize` driven as a user would: stdin read byte for byte
 * (a trailing newline is text), the --add-special / --parse-special flags, exact output for round trips,
 * and the exit codes of usage and input errors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void test_tokenize(void **state) {
    const char *dir = tu_tmpdir("tok-cli");
    char in[4096], vocab[4096];
    snprintf(vocab, sizeof vocab, "%s", tu_testdata("vocab/ggml-vocab-gemma-4.gguf"));
    snprintf(in, sizeof in, "%s", tu_write(dir, "hello.txt", "Hello world\n", 12));
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' tokenize --vocab '%s' < '%s'", tu_tern_bin(), vocab, in), 0);
    assert_string_equal(out, "9259 1902 107\n"); /* the newline is part of the text */
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' tokenize --vocab '%s' --add-special < '%s'", tu_tern_bin(), vocab, in), 0);
    assert_string_equal(out, "2 9259 1902 107\n");
    free(out);

    static const char chat[] = "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
    snprintf(in, sizeof in, "%s", tu_write(dir, "chat.txt", chat, sizeof chat - 1));
    assert_int_equal(tu_runf(&out, "'%s' tokenize --vocab '%s' --parse-special < '%s'", tu_tern_bin(), vocab, in), 0);
    assert_string_equal(out, "2 105 2364 107 3689 563 236743 236778 236862 236778 236881 106 107 105 4368 107 100 45518 "
                             "107 101\n");
    free(out);
    /* Without --parse-special, "<bos>" is text: no id 2 anywhere. */
    assert_int_equal(tu_runf(&out, "'%s' tokenize --vocab '%s' < '%s'", tu_tern_bin(), vocab, in), 0);
    assert_null(strstr(out, " 2 "));
    assert_true(strncmp(out, "2 ", 2) != 0);
    free(out);
    /* Empty input: an empty line. */
    snprintf(in, sizeof in, "%s", tu_write(dir, "empty.txt", "", 0));
    assert_int_equal(tu_runf(&out, "'%s' tokenize --vocab '%s' < '%s'", tu_tern_bin(), vocab, in), 0);
    assert_string_equal(out, "\n");
    free(out);
    /* A model directory works too (tokenizer.json + tokenizer_config.json). */
    assert_int_equal(tu_runf(&out, "printf 'ab' | '%s' tokenize '%s' --add-special", tu_tern_bin(),
                         tu_testdata("oracle/tiny-v4096-f32")),
                     0);
    assert_string_equal(out, "2 335 336\n");
    free(out);
}

/* --pieces shows the pre-tokenizer's pieces; --pre reads a GGUF vocabulary under another pre-tokenizer name. */
static void test_pieces_and_pre(void **state) {
    char *out;
    const char *vocab = tu_testdata("vocab/ggml-vocab-llama-bpe.gguf");
    assert_int_equal(tu_runf(&out, "printf 'Hi  there\\n\\n 12345' | '%s' tokenize --vocab '%s' --pieces", tu_tern_bin(), vocab), 0);
    assert_string_equal(out, "[\"Hi\", \" \", \" there\", \"\\n\\n\", \" \", \"123\", \"45\"]\n");
    free(out);
    assert_int_equal(tu_runf(&out, "printf 'Hi  there\\n\\n 12345' | '%s' tokenize --vocab '%s' --pre qwen2 --pieces",
                             tu_tern_bin(), vocab),
                     0);
    assert_string_equal(out, "[\"Hi\", \" \", \" there\", \"\\n\\n\", \" \", \"1\", \"2\", \"3\", \"4\", \"5\"]\n");
    free(out);
    assert_int_equal(tu_runf(&out, "printf x | '%s' tokenize --vocab '%s' --pre no-such 2>&1", tu_tern_bin(), vocab), 1);
    assert_non_null(strstr(out, "tokenizer.ggml.pre 'no-such' is not a pre-tokenizer llama.cpp knows"));
    free(out);
}

static void test_detokenize_and_round_trip(void **state) {
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s", tu_testdata("vocab/ggml-vocab-gemma-4.gguf"));
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' detokenize --vocab '%s' --ids 2,9259,1902,107", tu_tern_bin(), vocab), 0);
    assert_string_equal(out, "<bos>Hello world\n"); /* exactly the text: the newline is token 107's */
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' detokenize --vocab '%s' --ids 2,9259 --skip-special", tu_tern_bin(), vocab), 0);
    assert_string_equal(out, "Hello");
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' detokenize --vocab '%s' --ids ''", tu_tern_bin(), vocab), 0);
    assert_string_equal(out, "");
    free(out);
    /* tokenize | detokenize gives the input back byte for byte, specials and trailing newlines included. */
    const char *dir = tu_tmpdir("tok-cli-rt");
    static const char text[] = "<|turn>user\n  caf\xc3\xa9 \xf0\x9f\x98\x80 ok?\t\n\n";
    char in[4096];
    snprintf(in, sizeof in, "%s", tu_write(dir, "rt.txt", text, sizeof text - 1));
    assert_int_equal(tu_runf(NULL,
                         "ids=$('%s' tokenize --vocab '%s' --parse-special < '%s' | tr ' ' ,) && "
                         "'%s' detokenize --vocab '%s' --ids \"$ids\" > '%s/back.txt' && cmp -s '%s' '%s/back.txt'",
                         tu_tern_bin(), vocab, in, tu_tern_bin(), vocab, dir, in, dir),
                     0);
}

static void test_errors(void **state) {
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s", tu_testdata("vocab/ggml-vocab-gemma-4.gguf"));
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' tokenize < /dev/null 2>&1", tu_tern_bin()), 2);
    assert_non_null(strstr(out, "usage: tern tokenize"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' detokenize --vocab '%s' 2>&1", tu_tern_bin(), vocab), 2);
    assert_non_null(strstr(out, "usage: tern detokenize"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' detokenize --vocab '%s' --ids 15043,32000 2>&1", tu_tern_bin(),
                         tu_testdata("vocab/ggml-vocab-llama-spm.gguf")),
                     1);
    assert_non_null(strstr(out, "token id 32000 out of range [0, 32000)"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' detokenize --vocab '%s' --ids 1,x 2>&1", tu_tern_bin(), vocab), 2);
    assert_non_null(strstr(out, "--ids"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' tokenize --vocab /no/such/vocab.gguf < /dev/null 2>&1", tu_tern_bin()), 1);
    assert_non_null(strstr(out, "/no/such/vocab.gguf: no such file or directory"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize),
        cmocka_unit_test(test_pieces_and_pre),
        cmocka_unit_test(test_detokenize_and_round_trip),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
