/* test_server_families.c — the dense families served: a Llama 3 and a Qwen 3 model (random weights, small shapes,
 * the families' real vocabularies — tests/data/vocab — and chat templates — tests/data/templates) made by
 * `tern synth`, each served by `tern serve` and driven by the official `openai` npm client
 * (tests/server/openai_families.mjs: chat, streaming, forced tool calls in the family's markup, JSON Schema,
 * reasoning, and reasoning as Anthropic thinking blocks) and by an Anthropic messages request whose forced call
 * comes back as a tool_use block (and beside a grammar is refused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

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

/* A request giving a grammar beside a forced tool call: a 400 naming both. */
static void expect_not_both(const ts_server *S, const char *path, const char *body) {
    ts_resp r;
    ts_http(S->port, "POST", path, "Content-Type: application/json\r\n", body, &r);
    if (r.status != 400 || !strstr(r.body, "not both"))
        print_error("%s: status %d: %s\n", path, r.status, r.body);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "not both"));
    ts_resp_free(&r);
}

/* Anthropic's tool_choice "tool" forces the call in the family's markup; it comes back as a tool_use block. */
static void anthropic_tool_use(const ts_server *S) {
    static const char body[] =
        "{\"model\":\"m\",\"max_tokens\":200,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
        "\"Weather in Rome?\"}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\"},\"tools\":[{\"name\":"
        "\"get_weather\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\","
        "\"Rome\"]}},\"required\":[\"city\"]}}]}";
    ts_resp r;
    ts_http(S->port, "POST", "/v1/messages", "Content-Type: application/json\r\n", body, &r);
    json_t *v = json_loads(r.body, 0, NULL);
    if (r.status != 200 || !v)
        print_error("status %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(v, "stop_reason")), "tool_use");
    const json_t *block = NULL, *b;
    size_t k;
    json_array_foreach(json_object_get(v, "content"), k, b) if (!strcmp(json_string_value(json_object_get(b, "type")),
                                                                       "tool_use")) block = b;
    assert_non_null(block);
    assert_string_equal(json_string_value(json_object_get(block, "name")), "get_weather");
    const char *city = json_string_value(json_object_get(json_object_get(block, "input"), "city"));
    assert_true(city && (!strcmp(city, "Paris") || !strcmp(city, "Rome")));
    json_decref(v);
    ts_resp_free(&r);
    /* A grammar beside the forced call: which one the reply follows would be a guess, so a 400 naming both. */
    char both[sizeof body + 64];
    snprintf(both, sizeof both, "%.*s,\"grammar\":\"root ::= \\\"x\\\"\"}", (int)(sizeof body - 2), body);
    expect_not_both(S, "/v1/messages", both);
}

/* Chat completions as Anthropic: llama.cpp's `grammar` beside a forced tool call is a 400 naming both. */
static void openai_forced_with_grammar(const ts_server *S) {
    static const char body[] =
        "{\"model\":\"m\",\"max_tokens\":20,\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"
        "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"tools\":[{\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}],"
        "\"grammar\":\"root ::= \\\"x\\\"\"}";
    expect_not_both(S, "/v1/chat/completions", body);
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
    if (rc == 0) {
        anthropic_tool_use(&S);
        openai_forced_with_grammar(&S);
    }
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
