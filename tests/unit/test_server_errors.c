/* test_server_errors.c — the server's answers to bad requests: a catalogue of malformed, mistyped, out-of-range,
 * unsupported, misrouted and oversized requests, each answered with the right status, the API's error shape and
 * a message that names the problem, after which the server is still healthy and still generates; then
 * authentication (401 with --api-key, the right key accepted both ways, /health open), the body cap (413, with
 * and without Content-Length), and a full queue (429) that clears when the running request's client leaves. */
#include "server_util.h"

typedef struct bad_case {
    const char *method, *path;
    const char *body; /* NULL: none */
    size_t body_len;  /* 0: strlen(body) */
    int status;
    const char *type; /* error.type */
    const char *msg;  /* a substring of error.message */
} bad_case;

#define CHAT "/v1/chat/completions"
#define CMPL "/v1/completions"
#define MSGS "/v1/messages"
#define IRE "invalid_request_error"
#define USER_HI "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static const bad_case CASES[] = {
    /* the body itself */
    {"POST", CHAT, "{bad", 0, 400, IRE, "not valid JSON"},
    {"POST", CHAT, "", 0, 400, IRE, "body is empty"},
    {"POST", CHAT, "[1,2]", 0, 400, IRE, "must be a JSON object, got an array"},
    {"POST", CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 0, 400, IRE, "not valid JSON"},
    {"POST", CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", 0, 400, IRE, "not valid JSON"},
    {"POST", CHAT, "{\"messages\":[],\"messages\":[]}", 0, 400, IRE, "duplicate"},
    {"POST", CHAT, "{\"max_tokens\":123456789012345678901234567890," USER_HI "}", 0, 400, IRE, "not valid JSON"},
    /* messages */
    {"POST", CHAT, "{\"messages\":\"hi\"}", 0, 400, IRE, "messages: expected an array"},
    {"POST", CHAT, "{\"max_tokens\":3}", 0, 400, IRE, "messages: required"},
    {"POST", CHAT, "{\"messages\":[]}", 0, 400, IRE, "at least one message"},
    {"POST", CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 0, 400, IRE, "unknown role 'wizard'"},
    {"POST", CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", 0, 400, IRE,
     "messages[0].content: expected a string or an array"},
    {"POST", CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                   "\"http://x/y.png\"}}]}]}",
     0, 400, IRE, "this model has no vision tower"},
    {"POST", CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\",\"function\":{"
                   "\"name\":\"f\",\"arguments\":\"{oops\"}}]}]}",
     0, 400, IRE, "function.arguments: not valid JSON"},
    /* sampling and output fields */
    {"POST", CHAT, "{\"temperature\":\"hot\"," USER_HI "}", 0, 400, IRE, "'temperature' must be a number, got a string"},
    {"POST", CHAT, "{\"temperature\":5," USER_HI "}", 0, 400, IRE, "'temperature' must be between 0 and 2, got 5"},
    {"POST", CHAT, "{\"top_p\":1.5," USER_HI "}", 0, 400, IRE, "'top_p' must be between 0 and 1"},
    {"POST", CHAT, "{\"max_tokens\":0," USER_HI "}", 0, 400, IRE, "'max_tokens' must be between 1"},
    {"POST", CHAT, "{\"max_tokens\":2.5," USER_HI "}", 0, 400, IRE, "'max_tokens' must be an integer"},
    {"POST", CHAT, "{\"n\":3," USER_HI "}", 0, 400, IRE, "'n' must be 1"},
    {"POST", CHAT, "{\"seed\":\"x\"," USER_HI "}", 0, 400, IRE, "'seed' must be an integer"},
    {"POST", CHAT, "{\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]," USER_HI "}", 0, 400, IRE, "at most 4"},
    {"POST", CHAT, "{\"stop\":\"\"," USER_HI "}", 0, 400, IRE, "must not be empty"},
    {"POST", CHAT, "{\"logit_bias\":{\"abc\":1}," USER_HI "}", 0, 400, IRE, "not a token id"},
    {"POST", CHAT, "{\"logit_bias\":{\"5\":500}," USER_HI "}", 0, 400, IRE, "between -100 and 100"},
    {"POST", CHAT, "{\"top_logprobs\":3," USER_HI "}", 0, 400, IRE, "needs 'logprobs': true"},
    {"POST", CHAT, "{\"logprobs\":true,\"top_logprobs\":50," USER_HI "}", 0, 400, IRE, "'top_logprobs' must be between 0 and 20"},
    {"POST", CHAT, "{\"stream\":\"yes\"," USER_HI "}", 0, 400, IRE, "'stream' must be true or false"},
    {"POST", CHAT, "{\"presence_penalty\":3," USER_HI "}", 0, 400, IRE, "'presence_penalty' must be between -2 and 2"},
    {"POST", CHAT, "{\"model\":5," USER_HI "}", 0, 400, IRE, "'model' must be a string"},
    {"POST", CHAT, "{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}," USER_HI "}", 0, 400, IRE,
     "'response_format.json_schema.schema' must be a JSON Schema object"},
    {"POST", CHAT, "{\"grammar\":\"root ::= (\"," USER_HI "}", 0, 400, IRE, "grammar: line 1, column 10: expected ')'"},
    {"POST", CHAT, "{\"chat_template_kwargs\":[]," USER_HI "}", 0, 400, IRE, "chat_template_kwargs: expected an object"},
    /* tools */
    {"POST", CHAT, "{\"tools\":{}," USER_HI "}", 0, 400, IRE, "'tools' must be an array"},
    {"POST", CHAT, "{\"tools\":[{\"type\":\"function\",\"function\":{}}]," USER_HI "}", 0, 400, IRE,
     "tools[0].function.name"},
    {"POST", CHAT, "{\"tool_choice\":\"sometimes\"," USER_HI "}", 0, 400, IRE, "'tool_choice' must be"},
    {"POST", CHAT, "{\"tool_choice\":\"required\"," USER_HI "}", 0, 400, IRE, "no 'tools' were given"},
    /* completions */
    {"POST", CMPL, "{\"max_tokens\":3}", 0, 400, IRE, "'prompt' is required"},
    {"POST", CMPL, "{\"prompt\":[999999999]}", 0, 400, IRE, "must be a token id"},
    {"POST", CMPL, "{\"prompt\":[]}", 0, 400, IRE, "'prompt' is empty"},
    {"POST", CMPL, "{\"prompt\":[\"a\",\"b\"]}", 0, 400, IRE, "one prompt per request"},
    {"POST", CMPL, "{\"prompt\":\"a\",\"suffix\":\"b\"}", 0, 400, IRE, "'suffix'"},
    {"POST", CMPL, "{\"prompt\":\"a\",\"echo\":true,\"logprobs\":1}", 0, 400, IRE, "'echo' together with 'logprobs'"},
    {"POST", CMPL, "{\"prompt\":\"a\",\"best_of\":2}", 0, 400, IRE, "'best_of' must be 1"},
    /* Anthropic messages (Anthropic's error shape) */
    {"POST", MSGS, "{" USER_HI "}", 0, 400, IRE, "'max_tokens' is required"},
    {"POST", MSGS, "{\"max_tokens\":5,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", 0, 400, IRE,
     "top-level \"system\" field"},
    {"POST", MSGS, "{\"max_tokens\":5,\"temperature\":1.5," USER_HI "}", 0, 400, IRE, "between 0 and 1"},
    {"POST", MSGS, "{\"max_tokens\":5,\"thinking\":{\"type\":\"maybe\"}," USER_HI "}", 0, 400, IRE, "'thinking'"},
    {"POST", MSGS, "{\"max_tokens\":5,\"tools\":[{\"name\":\"f\"}]," USER_HI "}", 0, 400, IRE, "input_schema"},
    /* routes and methods */
    {"GET", "/nope", NULL, 0, 404, "not_found_error", "no such endpoint: GET /nope"},
    {"POST", "/v1/chat/completion", "{}", 0, 404, "not_found_error", "no such endpoint"},
    {"GET", "/v1/models/nope", NULL, 0, 404, "not_found_error", "model 'nope' not found"},
    {"GET", CHAT, NULL, 0, 405, IRE, "method GET is not allowed on /v1/chat/completions (allowed: POST)"},
    {"POST", "/v1/models", "{}", 0, 405, IRE, "allowed: GET, HEAD"},
    {"DELETE", "/health", NULL, 0, 405, IRE, "method DELETE is not allowed"},
};

static ts_server S;

static int setup(void **state) {
    ts_start(&S, "--parallel 2 --ctx 256 --max-body 65536");
    return 0;
}

static int teardown(void **state) {
    if (S.pid)
        ts_stop(&S);
    return 0;
}

/* Sends one request and checks status, error type and message (OpenAI or Anthropic shape). */
static void expect(const char *method, const char *path, const char *headers, const char *body, size_t body_len,
                   int status, const char *type, const char *msg) {
    size_t bl = body ? (body_len ? body_len : strlen(body)) : 0;
    char *req = malloc(bl + 4096);
    int k = snprintf(req, 4096, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s", method, path,
                     headers ? headers : "");
    if (body)
        k += snprintf(req + k, 4096 - (size_t)k, "Content-Type: application/json\r\nContent-Length: %zu\r\n", bl);
    k += snprintf(req + k, 4096 - (size_t)k, "\r\n");
    if (bl)
        memcpy(req + k, body, bl);
    ts_resp r;
    ts_raw(S.port, req, (size_t)k + bl, &r);
    free(req);
    if (r.status != status || !r.json) {
        print_error("%s %s: expected %d, got %d: %s\n", method, path, status, r.status, r.body);
        fail();
    }
    int anthropic = !strncmp(path, "/v1/messages", 12);
    if (anthropic)
        assert_string_equal(ts_str(r.json, "type"), "error");
    const char *m = ts_str(r.json, "error.message");
    const char *t = ts_str(r.json, "error.type");
    if (!m || !strstr(m, msg) || !t || strcmp(t, type)) {
        print_error("%s %s: message '%s' (type %s) lacks '%s' (type %s)\n", method, path, m ? m : "(none)",
                    t ? t : "(none)", msg, type);
        fail();
    }
    ts_resp_free(&r);
}

static void assert_healthy(int port) {
    ts_resp r;
    ts_http(port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_post(port, CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"still there?\"}],\"max_tokens\":3}", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ts_int(r.json, "usage.completion_tokens"), 3);
    ts_resp_free(&r);
}

static void test_catalogue(void **state) {
    size_t n = sizeof CASES / sizeof *CASES;
    assert_true(n >= 30);
    for (size_t i = 0; i < n; i++) {
        const bad_case *c = &CASES[i];
        expect(c->method, c->path, NULL, c->body, c->body_len, c->status, c->type, c->msg);
    }
    /* Cases whose bodies are built here. A prompt beyond --ctx 256: */
    char big[16384];
    int k = snprintf(big, sizeof big, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 400; i++)
        k += snprintf(big + k, sizeof big - (size_t)k, "w%d ", i);
    snprintf(big + k, sizeof big - (size_t)k, "\"}]}");
    expect("POST", CHAT, NULL, big, 0, 400, IRE, "raise --ctx");
    /* JSON nested past the parser's depth limit: */
    char deep[8200];
    for (int i = 0; i < 4000; i++)
        deep[i] = '[';
    deep[4000] = 0;
    expect("POST", CHAT, NULL, deep, 0, 400, IRE, "not valid JSON");
    /* A body over --max-body, announced by Content-Length: */
    char *huge = malloc(70000);
    memset(huge, ' ', 70000);
    memcpy(huge, "{\"messages\":[]}", 15);
    expect("POST", CHAT, NULL, huge, 70000, 413, IRE, "exceeds the limit of 65536 bytes");
    free(huge);
    assert_healthy(S.port);
}

static void test_body_cap_chunked(void **state) {
    /* No Content-Length: the cap is enforced while the chunks arrive. */
    int fd = ts_connect(S.port);
    const char *head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
                       "Content-Type: application/json\r\n\r\n";
    ts_send(fd, head, strlen(head));
    char chunk[8192 + 16];
    int hl = snprintf(chunk, sizeof chunk, "2000\r\n");
    memset(chunk + hl, ' ', 8192);
    memcpy(chunk + hl + 8192, "\r\n", 2);
    for (int i = 0; i < 12; i++) /* 96 KiB > 64 KiB */
        ts_send(fd, chunk, (size_t)hl + 8192 + 2);
    ts_send(fd, "0\r\n\r\n", 5);
    size_t n;
    char *raw = ts_read_all(fd, &n);
    close(fd);
    ts_resp r;
    ts_parse_response(raw, n, &r);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(ts_str(r.json, "error.message"), "exceeds the limit"));
    ts_resp_free(&r);
    assert_healthy(S.port);
}

static void test_api_key(void **state) {
    ts_server K;
    ts_start(&K, "--api-key sekret --ctx 256");
    int save = S.port;
    S.port = K.port; /* expect() talks to S */
    expect("POST", CHAT, NULL, "{" USER_HI "}", 0, 401, "authentication_error", "missing or wrong API key");
    expect("POST", CHAT, "Authorization: Bearer wrong\r\n", "{" USER_HI "}", 0, 401, "authentication_error",
           "Authorization: Bearer KEY");
    expect("GET", "/v1/models", "Authorization: Bearer sekre\r\n", NULL, 0, 401, "authentication_error", "API key");
    expect("POST", MSGS, "x-api-key: nope\r\n", "{" USER_HI ",\"max_tokens\":2}", 0, 401, "authentication_error",
           "API key");
    S.port = save;
    ts_resp r;
    ts_http(K.port, "GET", "/v1/models", "Authorization: Bearer sekret\r\n", NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_http(K.port, "GET", "/v1/models", "x-api-key: sekret\r\n", NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_http(K.port, "POST", CHAT, "Authorization: bearer sekret\r\n", "{" USER_HI ",\"max_tokens\":2}", &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_http(K.port, "GET", "/health", NULL, NULL, &r); /* probes need no key */
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_http(K.port, "GET", "/v1/models", NULL, NULL, &r);
    assert_non_null(strcasestr(r.head, "WWW-Authenticate: Bearer"));
    ts_resp_free(&r);
    ts_stop(&K);
}

static void test_queue_full(void **state) {
    ts_server Q;
    ts_start(&Q, "--parallel 1 --max-queue 1");
    /* A: a long stream holds the only row (ignore_eos: it runs to the end of the context unless cancelled) */
    const char *a_body = "{\"messages\":[{\"role\":\"user\",\"content\":\"go on\"}],\"stream\":true,\"ignore_eos\":true}";
    char req[2048];
    int k = snprintf(req, sizeof req,
                     "POST " CHAT " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(a_body), a_body);
    int a = ts_connect(Q.port);
    ts_send(a, req, (size_t)k);
    char buf[65536];
    assert_true(ts_read_until(a, "data: ", buf, sizeof buf));
    /* B waits in the queue */
    const char *b_body = "{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}],\"max_tokens\":2}";
    k = snprintf(req, sizeof req,
                 "POST " CHAT " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 strlen(b_body), b_body);
    int b = ts_connect(Q.port);
    ts_send(b, req, (size_t)k);
    assert_true(ts_wait_metric(Q.port, "tern_queue_depth", 1) >= 1);
    /* C finds the queue full */
    ts_resp r;
    ts_post(Q.port, CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"c\"}],\"max_tokens\":2}", &r);
    assert_int_equal(r.status, 429);
    assert_string_equal(ts_str(r.json, "error.type"), "rate_limit_error");
    assert_non_null(strstr(ts_str(r.json, "error.message"), "already waiting"));
    ts_resp_free(&r);
    ts_post(Q.port, MSGS, "{\"messages\":[{\"role\":\"user\",\"content\":\"c\"}],\"max_tokens\":2}", &r);
    assert_int_equal(r.status, 429);
    assert_string_equal(ts_str(r.json, "error.type"), "rate_limit_error");
    ts_resp_free(&r);
    /* A's client leaves: its request is cancelled, B gets the row and its answer */
    close(a);
    size_t n;
    char *raw = ts_read_all(b, &n);
    close(b);
    ts_parse_response(raw, n, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(ts_int(r.json, "usage.completion_tokens"), 2);
    ts_resp_free(&r);
    assert_true(ts_wait_metric(Q.port, "tern_client_disconnects_total", 1) >= 1);
    assert_true(ts_metric(Q.port, "tern_requests_rejected_total{reason=\"queue_full\"}") >= 2);
    assert_true(ts_wait_metric(Q.port, "tern_requests_finished_total{reason=\"cancelled\"}", 1) >= 1);
    assert_healthy(Q.port);
    ts_stop(&Q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogue),
        cmocka_unit_test(test_body_cap_chunked),
        cmocka_unit_test(test_api_key),
        cmocka_unit_test(test_queue_full),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
