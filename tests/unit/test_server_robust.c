/* test_server_robust.c — the server under hostile or unlucky clients and at shutdown: a client that hangs up
 * mid-stream or before a non-streaming reply, on every generation route and in an embeddings batch (its requests are
 * cancelled and their rows freed), slow-loris clients
 * that stall in the headers or the body (dropped after --timeout), a client reading one byte at a time (gets
 * every byte), garbage instead of HTTP, concurrent requests batched together giving the same greedy text as
 * alone, and SIGTERM: a drain that lets 16 streams finish while new requests get 503 and the probes say so, and a second
 * signal that ends running streams with an error frame; a port already taken is an error, not a shared socket. Every exit must be clean (status 0; under ASan, no
 * leaks). */
#include <pthread.h>

#include "core/sbuf.h"
#include "server_util.h"

static const char LONG_STREAM[] =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"go on\"}],\"stream\":true,\"ignore_eos\":true}";
static const char LONG_PLAIN[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"go on\"}],\"ignore_eos\":true}";

/* Opens a connection and sends a POST of `body` to path (keep-alive unless close). */
static int open_post(int port, const char *path, const char *body, int close_conn) {
    char req[8192];
    int k = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     path, close_conn ? "Connection: close\r\n" : "", strlen(body), body);
    int fd = ts_connect(port);
    assert_true(fd >= 0);
    ts_send(fd, req, (size_t)k);
    return fd;
}

/* open_post for a body of any size. */
static int open_post_big(int port, const char *path, const char *body) {
    char head[512];
    int k = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", path,
                     strlen(body));
    int fd = ts_connect(port);
    assert_true(fd >= 0);
    ts_send(fd, head, (size_t)k);
    ts_send(fd, body, strlen(body));
    return fd;
}

static void wait_idle(int port) {
    for (int i = 0; i < TS_WAIT_S * 10; i++) {
        ts_resp r;
        ts_http(port, "GET", "/health", NULL, NULL, &r);
        long long active = ts_int(r.json, "active_rows"), queued = ts_int(r.json, "queue_depth");
        ts_resp_free(&r);
        if (active == 0 && queued == 0)
            return;
        ts_sleep_ms(100);
    }
    fail_msg("the server never went idle");
}

static void test_disconnects(void **state) {
    ts_server S;
    ts_start(&S, "--parallel 2");
    char buf[65536];
    /* mid-stream */
    int fd = open_post(S.port, "/v1/chat/completions", LONG_STREAM, 0);
    assert_true(ts_read_until(fd, "data: ", buf, sizeof buf));
    close(fd);
    assert_true(ts_wait_metric(S.port, "tern_client_disconnects_total", 1) >= 1);
    assert_true(ts_wait_metric(S.port, "tern_requests_finished_total{reason=\"cancelled\"}", 1) >= 1);
    wait_idle(S.port);
    /* before a non-streaming reply: the client hangs up right after sending */
    fd = open_post(S.port, "/v1/chat/completions", LONG_PLAIN, 0);
    assert_true(ts_wait_metric(S.port, "tern_active_rows", 1) >= 1);
    close(fd);
    assert_true(ts_wait_metric(S.port, "tern_client_disconnects_total", 2) >= 2);
    assert_true(ts_wait_metric(S.port, "tern_requests_finished_total{reason=\"cancelled\"}", 2) >= 2);
    wait_idle(S.port);
    /* an Anthropic stream too */
    fd = open_post(S.port, "/v1/messages",
                   "{\"messages\":[{\"role\":\"user\",\"content\":\"go\"}],\"max_tokens\":100000,\"stream\":true}", 0);
    assert_true(ts_read_until(fd, "content_block_delta", buf, sizeof buf));
    close(fd);
    assert_true(ts_wait_metric(S.port, "tern_client_disconnects_total", 3) >= 3);
    wait_idle(S.port);
    /* a Responses stream */
    fd = open_post(S.port, "/v1/responses", "{\"input\":\"go\",\"max_output_tokens\":100000,\"stream\":true}", 0);
    assert_true(ts_read_until(fd, "response.output_text.delta", buf, sizeof buf));
    close(fd);
    assert_true(ts_wait_metric(S.port, "tern_client_disconnects_total", 4) >= 4);
    wait_idle(S.port);
    /* an embeddings batch far longer than the rows: the inputs still running and those not started are dropped */
    sbuf big = {0};
    sbuf_adds(&big, "{\"input\":[");
    for (int i = 0; i < 200; i++) {
        sbuf_adds(&big, i ? ",\"" : "\"");
        for (int w = 0; w < 1000; w++)
            sbuf_adds(&big, "word ");
        sbuf_adds(&big, "\"");
    }
    sbuf_adds(&big, "]}");
    fd = open_post_big(S.port, "/v1/embeddings", big.p);
    sbuf_free(&big);
    assert_true(ts_wait_metric(S.port, "tern_active_rows", 1) >= 1);
    close(fd);
    assert_true(ts_wait_metric(S.port, "tern_client_disconnects_total", 5) >= 5);
    wait_idle(S.port);
    ts_stop(&S);
}

static void test_slow_clients(void **state) {
    ts_server S;
    ts_start(&S, "--timeout 2");
    char buf[4096];
    /* stalls inside the headers */
    int a = ts_connect(S.port);
    ts_send(a, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", 46);
    /* stalls inside the body */
    int b = ts_connect(S.port);
    const char *head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"messa";
    ts_send(b, head, strlen(head));
    /* meanwhile the server answers others */
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}",
            &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    /* both stalled connections are closed by the server (recv sees EOF, well before our own timeout) */
    assert_true(recv(a, buf, sizeof buf, 0) <= 0);
    assert_true(recv(b, buf, sizeof buf, 0) <= 0);
    close(a);
    close(b);
    /* a client reading one byte at a time still gets every byte */
    char *plain;
    ts_post(S.port, "/v1/chat/completions",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":12,\"temperature\":0}", &r);
    plain = strdup(ts_str(r.json, "choices.0.message.content"));
    ts_resp_free(&r);
    int fd = open_post(S.port, "/v1/chat/completions",
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":12,\"temperature\":0,"
                       "\"stream\":true}",
                       1);
    size_t cap = 1 << 16, n = 0;
    char *raw = malloc(cap);
    for (;;) {
        ssize_t k = recv(fd, raw + n, 1, 0);
        if (k <= 0)
            break;
        if (++n == cap - 1)
            break;
    }
    raw[n] = 0;
    close(fd);
    ts_parse_response(raw, n, &r);
    json_t *chunks = ts_sse(r.body, NULL);
    char *streamed = ts_sse_concat(chunks, "content");
    assert_string_equal(streamed, plain);
    assert_string_equal(json_string_value(json_array_get(chunks, json_array_size(chunks) - 1)), "[DONE]");
    free(streamed);
    free(plain);
    json_decref(chunks);
    ts_resp_free(&r);
    ts_stop(&S);
}

static void test_garbage(void **state) {
    ts_server S;
    ts_start(&S, "");
    static const char *const junk[] = {
        "\x00\x01\x02\xff\xfe garbage\r\n\r\n",
        "GET\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "GET /health HTTP/1.1\r\nHost: x\r\nX: " /* an endless header, cut short */,
    };
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        int fd = ts_connect(S.port);
        ts_send(fd, junk[i], i == 0 ? 17 : strlen(junk[i])); /* the first holds a NUL */
        shutdown(fd, SHUT_WR);
        size_t n;
        char *raw = ts_read_all(fd, &n);
        close(fd);
        /* either a 4xx from the HTTP layer or a closed connection, never a crash */
        if (n)
            assert_true(!strncmp(raw, "HTTP/1.1 4", 10) || !strncmp(raw, "HTTP/1.0 4", 10) ||
                        !strncmp(raw, "HTTP/1.1 5", 10));
        free(raw);
    }
    /* a header far beyond the connection's memory limit */
    char *big = malloc(200000);
    int k = snprintf(big, 200000, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(big + k, 'a', 150000);
    memcpy(big + k + 150000, "\r\n\r\n", 4);
    ts_resp r;
    ts_raw(S.port, big, (size_t)k + 150004, &r);
    assert_true(r.status == 0 || (r.status >= 400 && r.status < 500));
    ts_resp_free(&r);
    free(big);
    ts_http(S.port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_stop(&S);
}

static void test_port_in_use(void **state) {
    ts_server S;
    ts_start(&S, "");
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' serve '%s' --port %d 2>&1", tu_tern_bin(), ts_model(), S.port);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "cannot listen on 127.0.0.1:"));
    free(out);
    ts_resp r;
    ts_http(S.port, "GET", "/health", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ts_resp_free(&r);
    ts_stop(&S);
}

typedef struct job {
    int port;
    const char *body;
    char *content;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    ts_resp r;
    ts_post(j->port, "/v1/chat/completions", j->body, &r);
    const char *c = ts_str(r.json, "choices.0.message.content");
    j->content = c ? strdup(c) : NULL;
    ts_resp_free(&r);
    return NULL;
}

static void test_concurrent_equals_solo(void **state) {
    ts_server S;
    ts_start(&S, "--parallel 3");
    enum { N = 6 };
    char bodies[N][256];
    job solo[N], together[N];
    for (int i = 0; i < N; i++) {
        snprintf(bodies[i], sizeof bodies[i],
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"question %d\"}],\"max_tokens\":%d,\"temperature\":0}",
                 i, 6 + 3 * i);
        solo[i] = (job){S.port, bodies[i], NULL};
        run_job(&solo[i]);
        assert_non_null(solo[i].content);
    }
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        together[i] = (job){S.port, bodies[i], NULL};
        pthread_create(&th[i], NULL, run_job, &together[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_non_null(together[i].content);
        assert_string_equal(together[i].content, solo[i].content);
        free(solo[i].content);
        free(together[i].content);
    }
    assert_true(ts_metric(S.port, "tern_batch_size_mean") > 0);
    ts_stop(&S);
}

/* Waits (bounded) until the server's stderr contains `needle`. */
static int wait_log(const ts_server *s, const char *needle) {
    for (int i = 0; i < TS_WAIT_S * 10; i++) {
        FILE *f = fopen(s->log, "r");
        if (f) {
            char buf[65536];
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = 0;
            if (strstr(buf, needle))
                return 1;
        }
        ts_sleep_ms(100);
    }
    return 0;
}

/* A restart loses no cached prompt: with --cache-disk, the same conversation after a restart reads its prefix back
 * from the folder (cached_tokens, /metrics by tier) and gets the same greedy reply. */
static void test_prompt_cache_survives_restart(void **state) {
    char args[4400];
    snprintf(args, sizeof args, "--cache-disk '%s'", tu_tmpdir("serve-prompt-cache"));
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a careful assistant. Answer in one short "
                       "sentence, plainly, without lists or markup, and say when you do not know.\"},{\"role\":\"user\","
                       "\"content\":\"What is the capital of France?\"}],\"max_tokens\":8,\"temperature\":0}";
    ts_server S;
    ts_start(&S, args);
    ts_resp a;
    ts_post(S.port, "/v1/chat/completions", body, &a);
    assert_int_equal(a.status, 200);
    ts_stop(&S);
    ts_start(&S, args);
    ts_resp b;
    ts_post(S.port, "/v1/chat/completions", body, &b);
    assert_int_equal(b.status, 200);
    long long prompt = ts_int(b.json, "usage.prompt_tokens"), cached = ts_int(b.json, "usage.prompt_tokens_details.cached_tokens");
    assert_int_equal(cached, prompt - 1);
    assert_string_equal(ts_str(b.json, "choices.0.message.content"), ts_str(a.json, "choices.0.message.content"));
    assert_true(ts_metric(S.port, "tern_prefix_cache_hit_tokens_total{tier=\"disk\"}") >= (double)cached);
    assert_true(ts_metric(S.port, "tern_prefix_cache_tier_bytes{tier=\"disk\"}") > 0);
    ts_resp_free(&a);
    ts_resp_free(&b);
    ts_stop(&S);
}

/* SIGTERM drains: 16 streams in flight all run to their end; meanwhile the port still answers, new generation requests
 * with 503 and Retry-After, /health and /health/ready with "draining", /health/live with 200; then the process exits 0.
 * (16 rows, so every stream keeps receiving tokens while it waits: none sits silent past a read timeout on a loaded
 * machine.) */
static void test_sigterm_drains(void **state) {
    ts_server S;
    ts_start(&S, "--parallel 16");
    char buf[65536];
    int fds[16];
    for (int i = 0; i < 16; i++)
        fds[i] = open_post(S.port, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1000,"
                           "\"ignore_eos\":true,\"stream\":true}",
                           1);
    assert_true(ts_read_until(fds[0], "data: ", buf, sizeof buf));
    assert_true(ts_wait_metric(S.port, "tern_active_rows", 16) >= 16);
    kill(S.pid, SIGTERM);
    assert_true(wait_log(&S, "draining 16 requests"));
    ts_resp r;
    ts_post(S.port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"late\"}]}", &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strcasestr(r.head, "retry-after:"));
    assert_non_null(strstr(r.body, "draining"));
    ts_resp_free(&r);
    static const char *const probes[][2] = {{"/health", "503"}, {"/health/ready", "503"}, {"/health/live", "200"}};
    for (int i = 0; i < 3; i++) {
        ts_http(S.port, "GET", probes[i][0], NULL, NULL, &r);
        assert_int_equal(r.status, atoi(probes[i][1]));
        assert_string_equal(ts_str(r.json, "status"), i < 2 ? "draining" : "alive");
        ts_resp_free(&r);
    }
    for (int i = 0; i < 16; i++) { /* every stream still finishes */
        size_t n;
        char *rest = ts_read_all(fds[i], &n);
        close(fds[i]);
        if (!strstr(rest, "\"finish_reason\":\"length\""))
            fail_msg("stream %d of 16 did not end by length; its last bytes (of %zu): %s", i, n,
                     n > 600 ? rest + n - 600 : rest);
        assert_non_null(strstr(rest, "data: [DONE]"));
        free(rest);
    }
    assert_int_equal(ts_signal_wait(&S, 0), 0);
    assert_true(ts_connect(S.port) < 0); /* and then the port is closed */
}

static void test_second_signal_stops_now(void **state) {
    ts_server S;
    ts_start(&S, "");
    char buf[65536];
    int fd = open_post(S.port, "/v1/chat/completions", LONG_STREAM, 1);
    assert_true(ts_read_until(fd, "data: ", buf, sizeof buf));
    int an = open_post(S.port, "/v1/messages",
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"go\"}],\"max_tokens\":100000,\"stream\":true}", 1);
    assert_true(ts_read_until(an, "content_block_delta", buf, sizeof buf));
    kill(S.pid, SIGTERM);
    assert_true(wait_log(&S, "draining 2 requests"));
    kill(S.pid, SIGTERM);
    size_t n;
    char *rest = ts_read_all(fd, &n);
    close(fd);
    assert_non_null(strstr(rest, "shutting down"));
    assert_non_null(strstr(rest, "\"type\":\"server_unavailable\""));
    assert_non_null(strstr(rest, "data: [DONE]"));
    free(rest);
    rest = ts_read_all(an, &n);
    close(an);
    assert_non_null(strstr(rest, "event: error"));
    assert_non_null(strstr(rest, "\"type\":\"overloaded_error\""));
    free(rest);
    assert_int_equal(ts_signal_wait(&S, 0), 0);
    assert_true(wait_log(&S, "stopped"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disconnects),         cmocka_unit_test(test_slow_clients),
        cmocka_unit_test(test_garbage),             cmocka_unit_test(test_port_in_use),
        cmocka_unit_test(test_concurrent_equals_solo),
        cmocka_unit_test(test_prompt_cache_survives_restart), cmocka_unit_test(test_sigterm_drains),
        cmocka_unit_test(test_second_signal_stops_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
