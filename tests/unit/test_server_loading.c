/* test_server_loading.c — a server started before its model has loaded (as `tern serve` starts): /health answers
 * 503 {"status": "loading"} with Retry-After, generation requests get 503 with Retry-After, /metrics answers; once
 * the model is attached, /health is 200 and a chat completes. */
#include "server/server.h"
#include "server_util.h"

static int has_retry_after(const ts_resp *r) { return r->head && strcasestr(r->head, "\r\nRetry-After: ") != NULL; }

static void test_loading_then_ready(void **state) {
    (void)state;
    tern_server_config sc;
    tern_server_config_default(&sc);
    sc.port = 0;
    sc.model_dir = "/somewhere/demo-model";
    tern_server *s = NULL;
    TU_OK(tern_server_start(NULL, NULL, &sc, &s));
    const int port = tern_server_port(s);
    ts_resp r;
    ts_http(port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(ts_str(r.json, "status"), "loading");
    assert_string_equal(ts_str(r.json, "model"), "demo-model");
    assert_true(has_retry_after(&r));
    ts_resp_free(&r);
    ts_post(port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r);
    assert_int_equal(r.status, 503);
    assert_true(has_retry_after(&r));
    assert_non_null(strstr(ts_str(r.json, "error.message"), "loading"));
    ts_resp_free(&r);
    ts_http(port, "GET", "/v1/models", NULL, NULL, &r);
    assert_int_equal(r.status, 503);
    ts_resp_free(&r);
    ts_http(port, "GET", "/metrics", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "tern_build_info"));
    ts_resp_free(&r);

    tern_model *m = NULL;
    tern_engine *e = NULL;
    tern_model_opts mo = {.model_dir = ts_model()};
    TU_OK(tern_model_load(&mo, &m));
    tern_engine_opts eo;
    tern_engine_opts_default(&eo);
    eo.parallel = 1;
    eo.ctx = 256;
    TU_OK(tern_engine_create(m, &eo, &e));
    tern_server_attach(s, m, e);
    ts_http(port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "status"), "ok");
    ts_resp_free(&r);
    ts_post(port, "/v1/chat/completions",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4,\"temperature\":0}", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ts_int(r.json, "usage.completion_tokens"), 4);
    ts_resp_free(&r);
    tern_server_quiesce(s);
    tern_server_detach_engine(s);
    tern_engine_destroy(e);
    tern_server_stop(s);
    tern_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_loading_then_ready)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
