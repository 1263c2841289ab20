/* test_server_responses.c — /v1/responses end to end on the synthetic tiny model (the real Gemma 4 vocabulary and
 * template, random weights): the official `openai` npm client's view (tests/server/openai_responses.mjs), then what
 * a client library hides: the raw event stream's framing, the 405 that lists the methods a stored response takes,
 * input-item paging, the bounded store (--responses-store), a client that hangs up mid-stream, and the metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testutil.h"
#include "server_util.h"

static ts_server S;

static int setup(void **state) {
    ts_start(&S, "--parallel 2 --ctx 2048 --responses-store 3");
    return 0;
}

static int teardown(void **state) {
    ts_stop(&S);
    return 0;
}

static json_t *post_json(const char *body, int want_status) {
    ts_resp r;
    ts_post(S.port, "/v1/responses", body, &r);
    if (r.status != want_status)
        print_error("status %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, want_status);
    json_t *v = json_loads(r.body, 0, NULL);
    assert_non_null(v);
    ts_resp_free(&r);
    return v;
}

static void test_node_responses(void **state) {
    /* the node script stores several responses: this server keeps 3, so it runs on one of its own */
    ts_server big;
    ts_start(&big, "--parallel 2 --ctx 2048");
    char *out = NULL;
    int rc = ts_node(&big, "openai_responses.mjs", NULL, &out);
    if (rc != 0 || !strstr(out, "ok "))
        print_error("%s\n", out ? out : "(no output)");
    ts_stop(&big);
    assert_int_equal(rc, 0);
    printf("  openai_responses.mjs: %s", out);
    free(out);
}

/* The raw stream: "event: NAME" lines that match each data's type, no [DONE] (the Responses API has none). */
static void test_stream_framing(void **state) {
    ts_resp r;
    ts_post(S.port, "/v1/responses", "{\"input\":\"Hi\",\"max_output_tokens\":3,\"stream\":true}", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "content-type: text/event-stream"));
    assert_null(strstr(r.body, "[DONE]"));
    int events = 0;
    for (char *p = strstr(r.body, "event: "); p; p = strstr(p + 1, "event: ")) {
        char name[96], want[320];
        assert_int_equal(sscanf(p, "event: %95s", name), 1);
        snprintf(want, sizeof want, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%d", name, name, events);
        if (strncmp(p, want, strlen(want)))
            print_error("event %d: %.200s\n", events, p);
        assert_int_equal(strncmp(p, want, strlen(want)), 0);
        events++;
    }
    assert_true(events >= 8);
    assert_non_null(strstr(r.body, "event: response.incomplete"));
    ts_resp_free(&r);
}

static void test_methods_and_paths(void **state) {
    ts_resp r;
    ts_http(S.port, "PUT", "/v1/responses/resp_x", NULL, NULL, &r);
    assert_int_equal(r.status, 405);
    assert_non_null(strcasestr(r.head, "allow: GET, HEAD, DELETE"));
    ts_resp_free(&r);
    ts_http(S.port, "GET", "/v1/responses/resp_x/other", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    ts_resp_free(&r);
    ts_http(S.port, "DELETE", "/v1/responses/resp_x", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "\"code\":\"response_not_found\""));
    ts_resp_free(&r);
}

/* Input items page by limit / after, newest first unless order=asc; bad query values are 400s. */
static void test_input_item_pages(void **state) {
    json_t *v = post_json("{\"input\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
                          "{\"role\":\"user\",\"content\":\"c\"}],\"max_output_tokens\":1}",
                          200);
    char path[256];
    snprintf(path, sizeof path, "/v1/responses/%s/input_items?limit=2", json_string_value(json_object_get(v, "id")));
    ts_resp r;
    ts_http(S.port, "GET", path, NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    json_t *page = json_loads(r.body, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(page, "data")), 2);
    assert_true(json_is_true(json_object_get(page, "has_more")));
    json_t *first = json_array_get(json_object_get(page, "data"), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(first, "content"), 0), "text")),
                        "c");
    char next[512];
    snprintf(next, sizeof next, "%s&after=%s", path, json_string_value(json_object_get(page, "last_id")));
    ts_resp_free(&r);
    ts_http(S.port, "GET", next, NULL, NULL, &r);
    json_t *page2 = json_loads(r.body, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(page2, "data")), 1);
    assert_false(json_is_true(json_object_get(page2, "has_more")));
    first = json_array_get(json_object_get(page2, "data"), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(first, "content"), 0), "type")),
                        "input_text");
    ts_resp_free(&r);
    snprintf(next, sizeof next, "%s&order=sideways", path);
    ts_http(S.port, "GET", next, NULL, NULL, &r);
    assert_int_equal(r.status, 400);
    ts_resp_free(&r);
    json_decref(page);
    json_decref(page2);
    json_decref(v);
}

/* --responses-store 3: the fourth response pushes out the first. */
static void test_store_bound(void **state) {
    char ids[4][100];
    for (int i = 0; i < 4; i++) {
        json_t *v = post_json("{\"input\":\"x\",\"max_output_tokens\":1}", 200);
        snprintf(ids[i], sizeof ids[i], "%s", json_string_value(json_object_get(v, "id")));
        json_decref(v);
    }
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "/v1/responses/%s", ids[i]);
        ts_resp r;
        ts_http(S.port, "GET", path, NULL, NULL, &r);
        assert_int_equal(r.status, i == 0 ? 404 : 200);
        ts_resp_free(&r);
    }
    char body[400];
    snprintf(body, sizeof body, "{\"input\":\"y\",\"max_output_tokens\":1,\"previous_response_id\":\"%s\"}", ids[0]);
    json_decref(post_json(body, 404));
}

/* A client that hangs up in the middle of a stream frees its row: the next requests still run. */
static void test_disconnect_mid_stream(void **state) {
    for (int i = 0; i < 3; i++) {
        int fd = ts_connect(S.port);
        const char *body = "{\"input\":\"Tell me a long story\",\"max_output_tokens\":400,\"stream\":true}";
        char req[512];
        int n = snprintf(req, sizeof req,
                         "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         strlen(body), body);
        ts_send(fd, req, (size_t)n);
        char buf[8192];
        assert_true(ts_read_until(fd, "response.output_text.delta", buf, sizeof buf) > 0);
        close(fd);
    }
    json_decref(post_json("{\"input\":\"after\",\"max_output_tokens\":2}", 200));
    assert_true(ts_metric(S.port, "tern_client_disconnects_total") >= 3);
}

static void test_errors_and_metrics(void **state) {
    json_t *v = post_json("{\"input\":\"x\",\"tools\":[{\"type\":\"file_search\"}]}", 400);
    json_t *e = json_object_get(v, "error");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "invalid_request_error");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "tools[0].type"));
    json_decref(v);
    v = post_json("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}", 400);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
                           "input[0].call_id"));
    json_decref(v);
    v = post_json("{\"input\":\"x\",\"include\":[\"message.output_text.logprobs\"]}", 400);
    json_decref(v);
    v = post_json("{\"input\":\"x\",\"truncation\":\"auto\"}", 400);
    json_decref(v);
    assert_true(ts_metric(S.port, "tern_http_responses_total{endpoint=\"responses\",code=\"200\"}") >= 1);
    assert_true(ts_metric(S.port, "tern_http_responses_total{endpoint=\"responses\",code=\"400\"}") >= 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_responses),     cmocka_unit_test(test_stream_framing),
        cmocka_unit_test(test_methods_and_paths),  cmocka_unit_test(test_input_item_pages),
        cmocka_unit_test(test_store_bound),        cmocka_unit_test(test_disconnect_mid_stream),
        cmocka_unit_test(test_errors_and_metrics),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
