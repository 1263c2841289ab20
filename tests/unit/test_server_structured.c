/* test_server_structured.c — structured output end to end: `tern serve` on the synthetic tiny model (the real
 * Gemma 4 vocabulary and template, random weights) driven by the official `openai` npm client, every reply checked
 * by ajv against its JSON Schema (tests/server/openai_structured.mjs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testutil.h"
#include "server_util.h"

static ts_server S;

static int setup(void **state) {
    ts_start(&S, "--parallel 4 --ctx 2048");
    return 0;
}

static int teardown(void **state) {
    ts_stop(&S);
    return 0;
}

static void test_node_structured(void **state) {
    char *out = NULL;
    int rc = ts_node(&S, "openai_structured.mjs", NULL, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    assert_int_equal(rc, 0);
    printf("  openai_structured.mjs: %s", out);
    free(out);
}

/* Anthropic's tool_choice "any" and "tool" force a call too: the reply is a tool_use block with valid input. */
static void test_anthropic_forced_tool(void **state) {
    static const char *choices[] = {"{\"type\":\"any\"}", "{\"type\":\"tool\",\"name\":\"set_alarm\"}"};
    for (int i = 0; i < 2; i++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"model\":\"m\",\"max_tokens\":200,\"temperature\":1,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"Wake me at 7\"}],\"tool_choice\":%s,\"tools\":[{\"name\":\"get_weather\","
                 "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
                 "\"maxLength\":8}},\"required\":[\"city\"]}},{\"name\":\"set_alarm\",\"input_schema\":{"
                 "\"type\":\"object\",\"properties\":{\"hour\":{\"type\":\"integer\",\"minimum\":0,"
                 "\"maximum\":23}},\"required\":[\"hour\"]}}]}",
                 choices[i]);
        ts_resp r;
        ts_http(S.port, "POST", "/v1/messages", "Content-Type: application/json\r\n", body, &r);
        json_t *v = json_loads(r.body, 0, NULL);
        if (r.status != 200 || !v)
            print_error("status %d: %s\n", r.status, r.body);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_string_value(json_object_get(v, "stop_reason")), "tool_use");
        json_t *block = NULL, *b;
        size_t k;
        json_array_foreach(json_object_get(v, "content"), k, b) if (!strcmp(json_string_value(json_object_get(b, "type")), "tool_use"))
            block = b;
        assert_non_null(block);
        const char *name = json_string_value(json_object_get(block, "name"));
        json_t *input = json_object_get(block, "input");
        if (i == 1)
            assert_string_equal(name, "set_alarm");
        if (!strcmp(name, "set_alarm")) {
            json_int_t h = json_integer_value(json_object_get(input, "hour"));
            assert_true(json_is_integer(json_object_get(input, "hour")) && h >= 0 && h <= 23);
        } else {
            assert_true(json_is_string(json_object_get(input, "city")));
        }
        json_decref(v);
        ts_resp_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_node_structured), cmocka_unit_test(test_anthropic_forced_tool)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
