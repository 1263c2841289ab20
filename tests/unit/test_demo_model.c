/* test_demo_model.c — the bundled demo model (models/demo, trained by scripts/train-demo/): `tern perplexity` on
 * the held-out chapters equals the training script's own evaluation of the same text (tests/data/demo/eval.json,
 * PyTorch, bf16 weights computed in float32) within 0.5% with the same token count, its MLX 8- and 4-bit
 * quantizations stay close to it, and served over the chat API as `make run` serves it (with its assistant
 * drafter) it answers a definition question with English words in the chat format (the reply ends on the turn
 * marker, so the finish reason is "stop"). */
#include <ctype.h>
#include <math.h>

#include "server_util.h"

#define DEMO "models/demo"

/* `tern perplexity MODEL heldout.txt` with the training script's window (256, stride 128), as JSON. */
static json_t *perplexity_of(const char *model) {
    return tu_run_json("'%s' perplexity '%s' '%s' --ctx 256 --stride 128 --json 2>/dev/null", tu_tern_bin(), model,
                       tu_testdata("demo/heldout.txt"));
}

static json_t *training_eval(void) {
    json_error_t e;
    json_t *j = json_load_file(tu_testdata("demo/eval.json"), 0, &e);
    assert_non_null(j);
    return j;
}

static void test_perplexity_matches_training(void **state) {
    (void)state;
    json_t *want = training_eval(), *got = perplexity_of(DEMO);
    const double ppl = json_real_value(json_object_get(got, "perplexity"));
    const double ref = json_number_value(json_object_get(want, "ppl_bfloat16"));
    print_message("held-out perplexity: tern %.4f, training script %.4f (%+.3f%%)\n", ppl, ref,
                  100.0 * (ppl / ref - 1.0));
    /* The same tokenizer on both sides: the same number of tokens and of scored tokens. */
    assert_int_equal(json_integer_value(json_object_get(got, "tokens")),
                     json_integer_value(json_object_get(want, "heldout_tokens")));
    assert_int_equal(json_integer_value(json_object_get(got, "tokens_scored")),
                     json_integer_value(json_object_get(want, "scored")));
    assert_true(fabs(ppl / ref - 1.0) < 0.005);
    json_decref(got);
    json_decref(want);
}

/* MLX affine quantizations of the demo: perplexity within `slack` (relative) of the bf16 model's. */
static void check_quantized(int bits, double slack) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/demo-q%d", tu_tmpdir("demo-quantized"), bits);
    char *out = NULL;
    assert_int_equal(tu_runf(&out, "'%s' quantize " DEMO " '%s' --bits %d 2>&1", tu_tern_bin(), dir, bits), 0);
    free(out);
    json_t *want = training_eval(), *got = perplexity_of(dir);
    const double ppl = json_real_value(json_object_get(got, "perplexity"));
    const double ref = json_number_value(json_object_get(want, "ppl_bfloat16"));
    print_message("MLX %d-bit: perplexity %.4f (%+.2f%% against bf16)\n", bits, ppl, 100.0 * (ppl / ref - 1.0));
    assert_true(ppl > 1.0 && fabs(ppl / ref - 1.0) < slack);
    json_decref(got);
    json_decref(want);
}

static void test_quantized_8bit(void **state) {
    (void)state;
    check_quantized(8, 0.01);
}

static void test_quantized_4bit(void **state) {
    (void)state;
    check_quantized(4, 0.03);
}

/* A reply of English words: letters and sentence punctuation only, at least three words, and it names the word
 * it was asked about. */
static void expect_english_about(const char *reply, const char *word) {
    int words = 0, in_word = 0;
    for (const char *p = reply; *p; p++) {
        const int c = (unsigned char)*p;
        if (!(isalpha(c) || strchr(" ,.;:'\"()!?-", c))) {
            print_error("reply '%s' has '%c' (0x%02x)\n", reply, c, c);
            fail();
        }
        if (isalpha(c) && !in_word)
            words++;
        in_word = isalpha(c);
    }
    if (words < 3 || !strcasestr(reply, word)) {
        print_error("reply '%s': %d words, expected some about '%s'\n", reply, words, word);
        fail();
    }
}

static void test_chat_definition(void **state) {
    (void)state;
    ts_server s;
    ts_start_model(&s, DEMO, "--parallel 1 --ctx 512 --draft-model " DEMO "-assistant"); /* as make run serves it */
    static const char *const words[] = {"water", "king"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"What does %s mean?\"}],\"temperature\":0,"
                 "\"max_tokens\":80}",
                 words[i]);
        ts_resp r;
        ts_post(s.port, "/v1/chat/completions", body, &r);
        assert_int_equal(r.status, 200);
        const char *reply = ts_str(r.json, "choices.0.message.content");
        print_message("What does %s mean? -> %s\n", words[i], reply);
        assert_non_null(reply);
        assert_string_equal(ts_str(r.json, "choices.0.finish_reason"), "stop");
        expect_english_about(reply, words[i]);
        ts_resp_free(&r);
    }
    ts_stop(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perplexity_matches_training),
        cmocka_unit_test(test_quantized_8bit),
        cmocka_unit_test(test_quantized_4bit),
        cmocka_unit_test(test_chat_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
