/* test_server_api.c — `tern serve` end to end on the demo model (random weights, real Gemma 4 vocabulary and
 * template), over raw HTTP and through the official `openai` and `@anthropic-ai/sdk` npm clients:
 * /health, /v1/models, chat (exact prompt token count of the GEMMA4.md example, streaming == non-streaming
 * under greedy decoding, chunk grammar, usage), stop strings cut at their first occurrence, seeds, logprobs,
 * prefix-cache reuse reported as cached_tokens, completions (text and token-id prompts, echo, legacy logprobs),
 * Anthropic messages (blocks, event grammar), keep-alive connections, /metrics, and a clean SIGTERM exit. */
#include "server_util.h"

static ts_server S;

static int setup(void **state) {
    ts_start(&S, "--parallel 2 --ctx 2048");
    return 0;
}

static int teardown(void **state) {
    ts_stop(&S);
    return 0;
}

static void test_health_and_models(void **state) {
    ts_resp r;
    ts_http(S.port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "status"), "ok");
    assert_int_equal(ts_int(r.json, "parallel"), 2);
    ts_resp_free(&r);
    ts_http(S.port, "HEAD", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_http(S.port, "GET", "/v1/models", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "object"), "list");
    assert_string_equal(ts_str(r.json, "data.0.id"), "m");
    assert_int_equal(ts_int(r.json, "data.0.meta.n_ctx"), 2048);
    ts_resp_free(&r);
    ts_http(S.port, "GET", "/v1/models/m", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "id"), "m");
    ts_resp_free(&r);
}

#define CHAT_BASE "{\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}]"
#define CHAT_2PLUS2 CHAT_BASE ",\"temperature\":0"

/* The reply content of the 2+2 chat with `extra` fields (which must set the temperature). */
static char *chat_content(const char *extra, json_t **usage_out) {
    char body[8192];
    snprintf(body, sizeof body, CHAT_BASE "%s}", extra);
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", body, &r);
    assert_int_equal(r.status, 200);
    char *s = strdup(ts_str(r.json, "choices.0.message.content"));
    if (usage_out)
        *usage_out = json_incref(ts_get(r.json, "usage"));
    ts_resp_free(&r);
    return s;
}

static void test_chat_non_stream(void **state) {
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", CHAT_2PLUS2 ",\"max_tokens\":6}", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "object"), "chat.completion");
    assert_string_equal(ts_str(r.json, "model"), "m");
    assert_true(!strncmp(ts_str(r.json, "id"), "chatcmpl-", 9));
    assert_string_equal(ts_str(r.json, "choices.0.message.role"), "assistant");
    assert_string_equal(ts_str(r.json, "choices.0.finish_reason"), "length");
    /* GEMMA4.md §3: this conversation renders to exactly 20 tokens (one BOS, thinking off). */
    assert_int_equal(ts_int(r.json, "usage.prompt_tokens"), 20);
    assert_int_equal(ts_int(r.json, "usage.completion_tokens"), 6);
    assert_int_equal(ts_int(r.json, "usage.total_tokens"), 26);
    assert_non_null(ts_get(r.json, "usage.prompt_tokens_details.cached_tokens"));
    assert_true(json_is_null(ts_get(r.json, "choices.0.logprobs")));
    ts_resp_free(&r);
    /* max_completion_tokens wins over max_tokens */
    ts_post(S.port, "/v1/chat/completions", CHAT_2PLUS2 ",\"max_tokens\":6,\"max_completion_tokens\":3}", &r);
    assert_int_equal(ts_int(r.json, "usage.completion_tokens"), 3);
    ts_resp_free(&r);
}

static void test_chat_stream_matches(void **state) {
    char *plain = chat_content(",\"temperature\":0,\"max_tokens\":10", NULL);
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", CHAT_2PLUS2 ",\"max_tokens\":10,\"stream\":true}", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "content-type: text/event-stream"));
    json_t *chunks = ts_sse(r.body, NULL);
    size_t n = json_array_size(chunks);
    assert_true(n >= 3);
    assert_string_equal(ts_str(chunks, "0.choices.0.delta.role"), "assistant");
    assert_string_equal(json_string_value(json_array_get(chunks, n - 1)), "[DONE]");
    json_t *last = json_array_get(chunks, n - 2);
    assert_string_equal(ts_str(last, "choices.0.finish_reason"), "length");
    assert_int_equal(ts_int(last, "usage.completion_tokens"), 10);
    assert_int_equal(ts_int(last, "usage.prompt_tokens"), 20);
    for (size_t i = 0; i + 1 < n; i++) {
        assert_string_equal(ts_str(json_array_get(chunks, i), "object"), "chat.completion.chunk");
        assert_string_equal(ts_str(json_array_get(chunks, i), "id"), ts_str(last, "id"));
    }
    char *streamed = ts_sse_concat(chunks, "content");
    assert_string_equal(streamed, plain);
    free(streamed);
    json_decref(chunks);
    ts_resp_free(&r);
    /* include_usage: OpenAI's separate usage chunk with empty choices */
    ts_post(S.port, "/v1/chat/completions",
            CHAT_2PLUS2 ",\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", &r);
    chunks = ts_sse(r.body, NULL);
    n = json_array_size(chunks);
    json_t *u = json_array_get(chunks, n - 2);
    assert_int_equal(json_array_size(ts_get(u, "choices")), 0);
    assert_int_equal(ts_int(u, "usage.completion_tokens"), 3);
    json_decref(chunks);
    ts_resp_free(&r);
    free(plain);
}

/* Index of the first byte of the k-th UTF-8 character of s. */
static size_t utf8_offset(const char *s, size_t k) {
    size_t i = 0;
    while (s[i] && k) {
        i++;
        while ((s[i] & 0xc0) == 0x80)
            i++;
        k--;
    }
    return i;
}

static void test_stop_string(void **state) {
    char *plain = chat_content(",\"temperature\":0,\"max_tokens\":12", NULL);
    size_t a = utf8_offset(plain, 3), b = utf8_offset(plain, 5);
    assert_true(b > a);
    char stop[64];
    snprintf(stop, sizeof stop, "%.*s", (int)(b - a), plain + a);
    size_t first = (size_t)(strstr(plain, stop) - plain);
    json_t *stops = json_pack("[s]", stop);
    char *sj = json_dumps(stops, JSON_COMPACT);
    char extra[512];
    snprintf(extra, sizeof extra, ",\"max_tokens\":12,\"stop\":%s", sj);
    char body[8192];
    snprintf(body, sizeof body, CHAT_2PLUS2 "%s}", extra);
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", body, &r);
    assert_string_equal(ts_str(r.json, "choices.0.finish_reason"), "stop");
    assert_int_equal(strlen(ts_str(r.json, "choices.0.message.content")), first);
    assert_memory_equal(ts_str(r.json, "choices.0.message.content"), plain, first);
    ts_resp_free(&r);
    /* streaming holds back what could be a stop string and never sends it */
    snprintf(body, sizeof body, CHAT_2PLUS2 "%s,\"stream\":true}", extra);
    ts_post(S.port, "/v1/chat/completions", body, &r);
    json_t *chunks = ts_sse(r.body, NULL);
    char *streamed = ts_sse_concat(chunks, "content");
    assert_int_equal(strlen(streamed), first);
    assert_memory_equal(streamed, plain, first);
    free(streamed);
    json_decref(chunks);
    ts_resp_free(&r);
    free(sj);
    json_decref(stops);
    free(plain);
}

static void test_seed_and_logprobs(void **state) {
    char *a = chat_content(",\"max_tokens\":8,\"temperature\":1.0,\"seed\":42", NULL);
    char *b = chat_content(",\"max_tokens\":8,\"temperature\":1.0,\"seed\":42", NULL);
    char *c = chat_content(",\"max_tokens\":8,\"temperature\":1.0,\"seed\":43", NULL);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c); /* 8 draws from a near-uniform 262144-way distribution */
    free(a);
    free(b);
    free(c);
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", CHAT_2PLUS2 ",\"max_tokens\":5,\"logprobs\":true,\"top_logprobs\":4}", &r);
    assert_int_equal(r.status, 200);
    json_t *lp = ts_get(r.json, "choices.0.logprobs.content");
    assert_int_equal(json_array_size(lp), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *e = json_array_get(lp, i);
        json_t *top = json_object_get(e, "top_logprobs");
        assert_int_equal(json_array_size(top), 4);
        assert_string_equal(ts_str(e, "token"), ts_str(top, "0.token"));
        assert_true(json_real_value(json_object_get(e, "logprob")) <= 0);
        for (size_t k = 1; k < 4; k++)
            assert_true(json_number_value(ts_get(top, "0.logprob")) >= json_number_value(json_object_get(
                                                                              json_array_get(top, k), "logprob")));
        assert_true(json_array_size(json_object_get(e, "bytes")) > 0);
    }
    ts_resp_free(&r);
}

static void test_cached_tokens(void **state) {
    /* A long shared prefix: the second request reuses the first one's K/V (prefix blocks of 64 tokens). */
    char body[16384];
    int k = snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 200; i++)
        k += snprintf(body + k, sizeof body - (size_t)k, "word%d ", i);
    snprintf(body + k, sizeof body - (size_t)k, "\"}],\"max_tokens\":2,\"temperature\":0}");
    ts_resp r1, r2;
    ts_post(S.port, "/v1/chat/completions", body, &r1);
    ts_post(S.port, "/v1/chat/completions", body, &r2);
    assert_int_equal(r1.status, 200);
    assert_int_equal(r2.status, 200);
    long long prompt = ts_int(r2.json, "usage.prompt_tokens");
    long long cached = ts_int(r2.json, "usage.prompt_tokens_details.cached_tokens");
    assert_true(prompt > 200);
    assert_true(cached >= 64 && cached < prompt);
    assert_string_equal(ts_str(r1.json, "choices.0.message.content"), ts_str(r2.json, "choices.0.message.content"));
    ts_resp_free(&r1);
    ts_resp_free(&r2);
}

static void test_completions(void **state) {
    ts_resp r, t, e, s;
    ts_post(S.port, "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":5,\"temperature\":0}", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "object"), "text_completion");
    assert_int_equal(ts_int(r.json, "usage.prompt_tokens"), 2); /* <bos> Hello */
    assert_int_equal(ts_int(r.json, "usage.completion_tokens"), 5);
    const char *text = ts_str(r.json, "choices.0.text");
    ts_post(S.port, "/v1/completions", "{\"prompt\":[2,9259],\"max_tokens\":5,\"temperature\":0}", &t);
    assert_string_equal(ts_str(t.json, "choices.0.text"), text);
    ts_post(S.port, "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":5,\"temperature\":0,\"echo\":true}", &e);
    assert_true(!strncmp(ts_str(e.json, "choices.0.text"), "Hello", 5));
    assert_string_equal(ts_str(e.json, "choices.0.text") + 5, text);
    ts_post(S.port, "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":5,\"temperature\":0,\"stream\":true}", &s);
    json_t *chunks = ts_sse(s.body, NULL);
    char *streamed = ts_sse_concat(chunks, "text");
    assert_string_equal(streamed, text);
    assert_string_equal(json_string_value(json_array_get(chunks, json_array_size(chunks) - 1)), "[DONE]");
    free(streamed);
    json_decref(chunks);
    ts_resp_free(&t);
    ts_resp_free(&e);
    ts_resp_free(&s);
    ts_resp_free(&r);
    ts_post(S.port, "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":3,\"temperature\":0,\"logprobs\":2}", &r);
    json_t *lp = ts_get(r.json, "choices.0.logprobs");
    assert_int_equal(json_array_size(json_object_get(lp, "tokens")), 3);
    assert_int_equal(json_array_size(json_object_get(lp, "token_logprobs")), 3);
    assert_int_equal(json_object_size(ts_get(lp, "top_logprobs.0")), 2);
    assert_int_equal(ts_int(lp, "text_offset.0"), 0);
    ts_resp_free(&r);
}

static void test_anthropic_messages(void **state) {
    ts_resp r;
    ts_post(S.port, "/v1/messages",
            "{\"model\":\"x\",\"max_tokens\":5,\"temperature\":0,\"system\":\"Be brief.\",\"messages\":[{\"role\":"
            "\"user\",\"content\":\"Hi\"}]}",
            &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(ts_str(r.json, "type"), "message");
    assert_string_equal(ts_str(r.json, "role"), "assistant");
    assert_string_equal(ts_str(r.json, "content.0.type"), "text");
    assert_string_equal(ts_str(r.json, "stop_reason"), "max_tokens");
    assert_int_equal(ts_int(r.json, "usage.output_tokens"), 5);
    const char *text = ts_str(r.json, "content.0.text");
    ts_resp s;
    ts_post(S.port, "/v1/messages",
            "{\"model\":\"x\",\"max_tokens\":5,\"temperature\":0,\"system\":\"Be brief.\",\"stream\":true,\"messages\":"
            "[{\"role\":\"user\",\"content\":\"Hi\"}]}",
            &s);
    json_t *events;
    json_t *data = ts_sse(s.body, &events);
    size_t n = json_array_size(events);
    assert_true(n >= 7);
    assert_string_equal(json_string_value(json_array_get(events, 0)), "message_start");
    assert_string_equal(json_string_value(json_array_get(events, 1)), "ping");
    assert_string_equal(json_string_value(json_array_get(events, 2)), "content_block_start");
    assert_string_equal(json_string_value(json_array_get(events, n - 3)), "content_block_stop");
    assert_string_equal(json_string_value(json_array_get(events, n - 2)), "message_delta");
    assert_string_equal(json_string_value(json_array_get(events, n - 1)), "message_stop");
    char streamed[4096] = "";
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(data, i);
        assert_string_equal(ts_str(d, "type"), json_string_value(json_array_get(events, i)));
        if (ts_str(d, "delta.text"))
            strncat(streamed, ts_str(d, "delta.text"), sizeof streamed - strlen(streamed) - 1);
    }
    assert_string_equal(streamed, text);
    assert_string_equal(ts_str(json_array_get(data, n - 2), "delta.stop_reason"), "max_tokens");
    json_decref(events);
    json_decref(data);
    ts_resp_free(&s);
    ts_resp_free(&r);
}

static void test_keep_alive(void **state) {
    /* two requests on one connection, the second after the first's reply */
    int fd = ts_connect(S.port);
    const char *req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[8192];
    for (int i = 0; i < 2; i++) {
        ts_send(fd, req, strlen(req));
        size_t n = 0;
        while (n < sizeof buf - 1) {
            ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
            if (k <= 0)
                break;
            n += (size_t)k;
            buf[n] = 0;
            char *h = strstr(buf, "\r\n\r\n");
            if (h && strstr(h, "}"))
                break;
        }
        assert_true(!strncmp(buf, "HTTP/1.1 200", 12));
        memset(buf, 0, sizeof buf);
    }
    close(fd);
}

static void test_node_openai(void **state) {
    char *out = NULL;
    int rc = ts_node(&S, "openai_client.mjs", NULL, &out);
    if (rc != 0)
        print_error("%s\n", out ? out : "");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ok "));
    free(out);
}

static void test_node_anthropic(void **state) {
    char *out = NULL;
    int rc = ts_node(&S, "anthropic_client.mjs", NULL, &out);
    if (rc != 0)
        print_error("%s\n", out ? out : "");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ok "));
    free(out);
}

static void test_metrics(void **state) {
    ts_resp r;
    ts_http(S.port, "GET", "/metrics", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "content-type: text/plain; version=0.0.4"));
    assert_non_null(strstr(r.body, "# TYPE tern_time_to_first_token_seconds histogram"));
    assert_non_null(strstr(r.body, "tern_time_per_output_token_seconds_bucket{le=\"+Inf\"}"));
    assert_non_null(strstr(r.body, "tern_queue_depth 0"));
    assert_non_null(strstr(r.body, "tern_kv_bytes_in_use "));
    assert_non_null(strstr(r.body, "tern_batch_size_mean "));
    ts_resp_free(&r);
    assert_true(ts_metric(S.port, "tern_http_responses_total{endpoint=\"chat_completions\",code=\"200\"}") >= 5);
    assert_true(ts_metric(S.port, "tern_time_to_first_token_seconds_count") >= 5);
    assert_true(ts_metric(S.port, "tern_generated_tokens_total") >= 20);
    assert_true(ts_metric(S.port, "tern_requests_finished_total{reason=\"length\"}") >= 5);
}

/* OpenAI predicted outputs: the same greedy reply with a prediction of it (as a string and as text parts), the
 * kept and rejected prediction tokens in usage.completion_tokens_details and /metrics; a malformed prediction or one
 * longer than the context is a 400 naming the problem. */
static void test_prediction(void **state) {
    (void)state;
    char *plain = chat_content(",\"temperature\":0,\"max_tokens\":24", NULL);
    json_t *content = json_string(plain);
    json_t *pred[2] = {json_pack("{s:s,s:O}", "type", "content", "content", content),
                       json_pack("{s:s,s:[{s:s,s:O}]}", "type", "content", "content", "type", "text", "text", content)};
    for (int i = 0; i < 2; i++) {
        char *pj = json_dumps(pred[i], JSON_COMPACT);
        char extra[8192];
        snprintf(extra, sizeof extra, ",\"temperature\":0,\"max_tokens\":24,\"prediction\":%s", pj);
        json_t *usage = NULL;
        char *got = chat_content(extra, &usage);
        assert_string_equal(got, plain);
        const long long acc = ts_int(usage, "completion_tokens_details.accepted_prediction_tokens");
        const long long rej = ts_int(usage, "completion_tokens_details.rejected_prediction_tokens");
        print_message("prediction (%s): %lld accepted, %lld rejected\n", i ? "parts" : "string", acc, rej);
        assert_true(acc > 0);
        assert_true(ts_get(usage, "completion_tokens_details.reasoning_tokens") != NULL);
        json_decref(usage);
        free(got);
        free(pj);
        json_decref(pred[i]);
    }
    json_decref(content);
    free(plain);
    assert_true(ts_metric(S.port, "tern_draft_accepted_total{source=\"prediction\"}") > 0);
    static const char *const bad[][2] = {
        {"\"prediction\":\"text\"", "'prediction' must be an object"},
        {"\"prediction\":{\"type\":\"file\",\"content\":\"x\"}", "'prediction.type' must be"},
        {"\"prediction\":{\"type\":\"content\",\"content\":[{\"type\":\"image\"}]}", "'prediction.content[0]'"},
        {"\"prediction\":{\"type\":\"content\",\"content\":5}", "'prediction.content' must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char body[1024];
        snprintf(body, sizeof body, CHAT_BASE ",%s}", bad[i][0]);
        ts_resp r;
        ts_post(S.port, "/v1/chat/completions", body, &r);
        assert_int_equal(r.status, 400);
        assert_non_null(strstr(ts_str(r.json, "error.message"), bad[i][1]));
        ts_resp_free(&r);
    }
    /* Longer than the context (2048 positions): refused before it runs. */
    size_t n = 3 * 4096;
    char *body = malloc(n + 256);
    int at = snprintf(body, n + 256, CHAT_BASE ",\"prediction\":{\"type\":\"content\",\"content\":\"");
    for (size_t i = 0; i < 3000; i++)
        at += snprintf(body + at, n + 256 - (size_t)at, "a ");
    snprintf(body + at, n + 256 - (size_t)at, "\"}}");
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", body, &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(ts_str(r.json, "error.message"), "more than the context holds"));
    ts_resp_free(&r);
    free(body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_and_models), cmocka_unit_test(test_chat_non_stream),
        cmocka_unit_test(test_chat_stream_matches), cmocka_unit_test(test_stop_string),
        cmocka_unit_test(test_seed_and_logprobs), cmocka_unit_test(test_cached_tokens),
        cmocka_unit_test(test_completions),       cmocka_unit_test(test_anthropic_messages),
        cmocka_unit_test(test_keep_alive),        cmocka_unit_test(test_node_openai),
        cmocka_unit_test(test_node_anthropic),    cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_prediction),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
