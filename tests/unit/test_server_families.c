/* test_server_families.c — the dense families served: a Llama 3 and a Qwen 3 model (random weights, small shapes,
 * the families' real vocabularies — tests/data/vocab — and chat templates — tests/data/templates) made by
 * `tern synth`, each served by `tern serve` and driven by the official `openai` npm client
 * (tests/server/openai_families.mjs: chat, streaming, forced tool calls in the family's markup, JSON Schema). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "server_util.h"

/* Writes the family's model into a fresh directory: CONFIG (JSON text) with the vocabulary and template named. */
static const char *family_model(const char *name, const char *config, const char *vocab, const char *template) {
    static char dir[4200];
    char base[4096], cfg[4200], cmd[16000];
    snprintf(base, sizeof base, "%s", tu_tmpdir(name));
    snprintf(cfg, sizeof cfg, "%s", tu_write(base, "config.json", config, strlen(config)));
    snprintf(dir, sizeof dir, "%s/m", base);
    const char *src = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    snprintf(cmd, sizeof cmd, "'%s' synth --preset '%s' --dtype bf16 --seed 7 --vocab '%s' '%s' >/dev/null && "
             "cp '%s/tests/data/templates/%s' '%s/chat_template.jinja'",
             tu_tern_bin(), cfg, tu_testdata(vocab), dir, src, template, dir);
    if (tu_run(cmd, NULL) != 0) {
        print_error("making the %s model failed: %s\n", name, cmd);
        fail();
    }
    return dir;
}

static void serve_and_drive(const char *model) {
    ts_server S;
    ts_start_model(&S, model, "--parallel 2 --ctx 1024");
    char *out = NULL;
    int rc = ts_node(&S, "openai_families.mjs", NULL, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    printf("  openai_families.mjs on %s: %s", model, out ? out : "");
    free(out);
    ts_stop(&S);
    assert_int_equal(rc, 0);
}

static void test_llama3(void **state) {
    (void)state;
    serve_and_drive(family_model(
        "family-llama3",
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 128256, "
        "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
        "\"num_key_value_heads\": 2, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-5, \"rope_theta\": "
        "500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, "
        "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}, \"tie_word_embeddings\": true, "
        "\"hidden_act\": \"silu\", \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009]}",
        "vocab/ggml-vocab-llama-bpe.gguf", "meta-llama-Llama-3.1-8B-Instruct.jinja"));
}

static void test_qwen3(void **state) {
    (void)state;
    serve_and_drive(family_model(
        "family-qwen3",
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 151936, "
        "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
        "\"num_key_value_heads\": 2, \"head_dim\": 32, \"max_position_embeddings\": 40960, \"rms_norm_eps\": 1e-6, "
        "\"rope_theta\": 1000000.0, \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"bos_token_id\": "
        "151643, \"eos_token_id\": 151645}",
        "vocab/ggml-vocab-qwen2.gguf", "Qwen-Qwen3-0.6B.jinja"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llama3), cmocka_unit_test(test_qwen3)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
