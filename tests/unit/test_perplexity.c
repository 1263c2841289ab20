/* test_perplexity.c — `tern perplexity` against an independent implementation: on the oracle model, the perplexity
 * of the oracle's 32 tokens equals the one computed here from llama.cpp's golden logits; windows and strides
 * score every token once; text files are tokenized with BOS; bad input is refused with a message. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json_util.h"
#include "sample/logprobs.h"
#include "testutil.h"

/* Runs `tern perplexity ARGS --json` and returns its JSON object. */
static json_t *run_json(const char *args) {
    return tu_run_json("'%s' perplexity %s --json 2>&1", tu_tern_bin(), args);
}

static void oracle_ids(int32_t *ids, char *csv, size_t cap) {
    json_t *index;
    TU_OK(tern_json_load_file(tu_testdata("oracle/index.json"), 1 << 20, &index));
    json_t *jids = json_object_get(json_array_get(json_object_get(index, "cases"), 0), "token_ids");
    assert_int_equal(json_array_size(jids), 32);
    size_t at = 0;
    for (size_t i = 0; i < 32; i++) {
        ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
        at += (size_t)snprintf(csv + at, cap - at, "%s%d", i ? "," : "", ids[i]);
    }
    json_decref(index);
}

static void test_matches_golden_logits(void **state) {
    int32_t ids[32];
    char csv[1024], args[8192];
    oracle_ids(ids, csv, sizeof csv);
    char *buf;
    size_t len;
    TU_OK(tern_read_file(tu_testdata("oracle/tiny-v4096.f32gguf.logits.bin"), 1 << 24, &buf, &len));
    assert_int_equal(len, 32 * 4096 * sizeof(float));
    const float *gl = (const float *)buf;
    double nll = 0;
    for (int p = 0; p < 31; p++)
        nll += tern_logsumexp(gl + p * 4096, 4096) - gl[p * 4096 + ids[p + 1]];
    const double want = exp(nll / 31);
    free(buf);
    snprintf(args, sizeof args, "'%s' --ids %s -c 32 --stride 32", tu_testdata("oracle/tiny-v4096-f32"), csv);
    json_t *v = run_json(args);
    const double got = json_real_value(json_object_get(v, "perplexity"));
    print_message("perplexity %.5f, from llama.cpp's logits %.5f\n", got, want);
    assert_int_equal(json_integer_value(json_object_get(v, "tokens_scored")), 31);
    assert_true(fabs(got / want - 1) < 0.005);
    json_decref(v);
}

static void test_windows_score_every_token_once(void **state) {
    int32_t ids[32];
    char csv[1024], args[8192];
    oracle_ids(ids, csv, sizeof csv);
    const char *model = tu_testdata("oracle/tiny-v4096-f32");
    char m[2048];
    snprintf(m, sizeof m, "%s", model);
    snprintf(args, sizeof args, "'%s' --ids %s -c 12 --stride 5", m, csv);
    json_t *v = run_json(args);
    /* windows [0,12) [5,17) [10,22) [15,27) [20,32): tokens 1..31 each scored once */
    assert_int_equal(json_integer_value(json_object_get(v, "tokens_scored")), 31);
    assert_int_equal(json_integer_value(json_object_get(v, "windows")), 5);
    const double windowed = json_real_value(json_object_get(v, "perplexity"));
    json_decref(v);
    snprintf(args, sizeof args, "'%s' --ids %s -c 12 --stride 12", m, csv);
    v = run_json(args);
    /* non-overlapping windows [0,12) [12,24) [24,32): the tokens their BOS replaces (12, 24) go unscored */
    assert_int_equal(json_integer_value(json_object_get(v, "tokens_scored")), 29);
    json_decref(v);
    assert_true(windowed > 1 && isfinite(windowed));
}

static void test_text_and_errors(void **state) {
    const char *dir = tu_tmpdir("ppl");
    char file[2048], one[2048], args[8192];
    static const char text[] = "In the beginning God created the heaven and the earth. And the earth was without form.";
    snprintf(file, sizeof file, "%s", tu_write(dir, "text.txt", text, sizeof text - 1));
    snprintf(one, sizeof one, "%s", tu_write(dir, "empty.txt", "", 0));
    char model[2048];
    snprintf(model, sizeof model, "%s", tu_testdata("oracle/tiny-v4096-f32"));
    snprintf(args, sizeof args, "'%s' '%s' -c 64", model, file);
    json_t *v = run_json(args);
    const json_int_t n = json_integer_value(json_object_get(v, "tokens"));
    assert_true(n > 10);
    assert_int_equal(json_integer_value(json_object_get(v, "tokens_scored")), n - 1); /* one window, BOS first */
    json_decref(v);
    char *out;
    assert_int_equal(tu_runf(&out, "'%s' perplexity '%s' '%s' 2>&1", tu_tern_bin(), model, one), 1);
    assert_non_null(strstr(out, "at least 2 are needed"));
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' perplexity '%s' '%s' --ids 2,3 2>&1", tu_tern_bin(), model, file), 2);
    free(out);
    assert_int_equal(tu_runf(&out, "'%s' perplexity '%s' --ids 2,999999 2>&1", tu_tern_bin(), model), 1);
    assert_non_null(strstr(out, "outside the vocabulary"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_golden_logits),
        cmocka_unit_test(test_windows_score_every_token_once),
        cmocka_unit_test(test_text_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
