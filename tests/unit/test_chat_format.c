/* test_chat_format.c — a model's chat format, worked out once: BOS/EOS texts, every stop id, turn and media
 * markers, the generation prompt and the tool-call dialect, from the real Gemma 4, Llama 3 and Qwen vocabularies
 * and templates; no template and a broken template; and the same facts through the public API of a loaded model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat_format.h"
#include "core/fileio.h"
#include "testutil.h"
#include "tern/tern.h"

static char *read_text(const char *rel) {
    char *s;
    size_t n;
    TU_OK(tern_read_file(tu_testdata(rel), 1 << 20, &s, &n));
    return s;
}

static int has_stop(const tern_chat_format *f, int32_t id) { return tern_chat_format_is_stop(f, id); }

static void test_gemma4(void **state) {
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), &tok));
    char *tpl = read_text("templates/google-gemma-4-31B-it.jinja");
    const int32_t eos[2] = {1, 106};
    tern_chat_format *f;
    TU_OK(tern_chat_format_build(tok, tpl, "gemma-4-31B-it.jinja", eos, 2, &f));
    assert_non_null(f->tpl);
    assert_int_equal(f->bos_id, 2);
    assert_string_equal(f->bos_text, "<bos>");
    assert_string_equal(f->eos_text, "<eos>");
    assert_true(has_stop(f, 1) && has_stop(f, 106)); /* <eos>, <turn|> */
    assert_false(has_stop(f, 105));                  /* <|turn> opens a turn, it does not end one */
    assert_string_equal(f->turn_start, "<|turn>");
    assert_string_equal(f->turn_end, "<turn|>");
    assert_string_equal(f->audio_start, "<|audio>");
    assert_string_equal(f->audio_token, "<|audio|>");
    assert_string_equal(f->audio_end, "<audio|>");
    assert_string_equal(f->image_start, "<|image>");
    assert_string_equal(f->image_end, "<image|>");
    assert_true(f->tool_response_id >= 0);
    assert_non_null(f->generation_prompt);
    assert_true(!strncmp(f->generation_prompt, "<|turn>model\n", 13));
    /* A conversation renders with the BOS the template prints. */
    json_t *m = json_pack("[{s:s,s:s}]", "role", "user", "content", "What is 2+2?");
    char *text;
    size_t len;
    TU_OK(tern_chat_format_render(f, m, NULL, NULL, 1, &text, &len));
    assert_true(!strncmp(text, "<bos><|turn>user\nWhat is 2+2?<turn|>\n", 36));
    assert_non_null(strstr(text, f->generation_prompt));
    free(text);
    json_decref(m);
    tern_chat_format_free(f);
    free(tpl);
    tern_tokenizer_free(tok);
}

static void test_llama3(void **state) {
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-llama-bpe.gguf"), &tok));
    char *tpl = read_text("templates/meta-llama-Llama-3.1-8B-Instruct.jinja");
    tern_chat_format *f;
    TU_OK(tern_chat_format_build(tok, tpl, "llama", NULL, 0, &f));
    assert_string_equal(f->turn_start, "<|start_header_id|>");
    assert_string_equal(f->turn_end, "<|eot_id|>");
    assert_null(f->audio_start);
    assert_null(f->image_start);
    assert_non_null(f->generation_prompt);
    assert_non_null(strstr(f->generation_prompt, "assistant"));
    assert_true(f->n_stop_ids >= 1);
    assert_ptr_equal(f->dialect, &tern_dialect_llama3);
    tern_chat_format_free(f);
    /* Llama 3's JSON calls from its vocabulary where the template never shows tools (a Llama 3.2-style template
     * without them), and with no template at all. */
    const char *plain = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}"
                        "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant"
                        "<|end_header_id|>\n\n{% endif %}";
    const char *tpls[2] = {plain, NULL};
    for (int i = 0; i < 2; i++) {
        TU_OK(tern_chat_format_build(tok, tpls[i], "llama", NULL, 0, &f));
        assert_ptr_equal(f->dialect, &tern_dialect_llama3);
        tern_chat_format_free(f);
    }
    free(tpl);
    tern_tokenizer_free(tok);
    /* ChatML turns (Qwen's vocabulary) with a template that shows no tools: Hermes-style <tool_call> blocks. */
    TU_OK(tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-qwen2.gguf"), &tok));
    TU_OK(tern_chat_format_build(tok, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                      "{% endfor %}", "chatml", NULL, 0, &f));
    assert_ptr_equal(f->dialect, &tern_dialect_hermes);
    tern_chat_format_free(f);
    tern_tokenizer_free(tok);
}

static void test_no_template_and_broken(void **state) {
    tern_tokenizer *tok;
    TU_OK(tern_tokenizer_load(tu_testdata("vocab/ggml-vocab-gemma-4.gguf"), &tok));
    tern_chat_format *f;
    TU_OK(tern_chat_format_build(tok, NULL, NULL, NULL, 0, &f));
    assert_null(f->tpl);
    assert_null(f->generation_prompt);
    assert_true(has_stop(f, 1)); /* the tokenizer's EOS still ends replies */
    json_t *m = json_pack("[{s:s,s:s}]", "role", "user", "content", "Hi");
    char *text;
    size_t len;
    TU_FAILS_WITH(tern_chat_format_render(f, m, NULL, NULL, 1, &text, &len), "no chat template");
    json_decref(m);
    tern_chat_format_free(f);
    TU_FAILS_WITH(tern_chat_format_build(tok, "{% if %}", "broken.jinja", NULL, 0, &f), "broken.jinja");
    /* A template that cannot render a lone user message: the format builds (whole conversations still render), the
     * generation prompt is unknown, and a warning says why (stderr captured). */
    const char *picky = "{% if messages[0].role != 'system' %}{{ raise_exception('start with a system message') }}"
                        "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}";
    char log_path[4096];
    snprintf(log_path, sizeof log_path, "%s/stderr.txt", tu_tmpdir("chat-format-log"));
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = fopen(log_path, "w");
    assert_non_null(cap);
    dup2(fileno(cap), 2);
    tern_err *e = tern_chat_format_build(tok, picky, "picky.jinja", NULL, 0, &f);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(cap);
    TU_OK(e);
    assert_null(f->generation_prompt);
    char *logged;
    size_t logged_len;
    TU_OK(tern_read_file(log_path, 1 << 20, &logged, &logged_len));
    assert_non_null(strstr(logged, "picky.jinja: a conversation of one user message does not render"));
    assert_non_null(strstr(logged, "start with a system message"));
    free(logged);
    tern_chat_format_free(f);
    tern_chat_format_free(NULL);
    tern_tokenizer_free(tok);
}

/* Through the public API of a loaded model. */
static void test_public_chat_info(void **state) {
    tern_model_opts o = {.model_dir = tu_testdata("oracle/tiny-v4096-f32")};
    tern_model *m;
    TU_OK(tern_model_load(&o, &m));
    tern_chat_info ci;
    tern_model_chat_info(m, &ci);
    assert_true(ci.has_template);
    assert_string_equal(ci.bos, "<bos>");
    assert_non_null(ci.turn_start); /* this cut vocabulary names its turns the Gemma 3 way */
    assert_non_null(ci.generation_prompt);
    assert_true(!strncmp(ci.generation_prompt, ci.turn_start, strlen(ci.turn_start)));
    assert_true(ci.n_stop_ids >= 1);
    for (int k = 0; k < ci.n_stop_ids; k++)
        assert_true(tern_model_is_eog(m, ci.stop_ids[k]));
    assert_null(ci.audio_start); /* the vocabulary is cut to 4096 ids: no media tokens */
    tern_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma4),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_no_template_and_broken),
        cmocka_unit_test(test_public_chat_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
